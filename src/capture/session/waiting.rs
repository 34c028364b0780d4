//! Selectors that match nothing: when the session starts, each such selector is named
//! once on standard error and in-band (`{"uevrec":"notice","what":"waiting",…}`:
//! `waiting for user_events:myapp_* to appear`), and again when it first matches
//! (`"what":"matching"`, with the event it matched). A selector that matched at start,
//! or has been reported matching, is not watched any more (an event that vanishes later
//! has its own `detached` notice).

use super::stager::Stager;
use crate::capture::selector::Selector;

/// The selectors still waiting for a first match, by index into the session's list.
#[derive(Debug, Default)]
pub(super) struct Waiting {
    waiting: Vec<usize>,
    /// Also on standard error (not with `--quiet`).
    stderr: bool,
}

impl Waiting {
    /// After the first scan: report the `selectors` that match none of `events`
    /// (`(system, event)` pairs); `every` is the rescan interval and `note` says why they
    /// may never match (no user_events in this kernel), when it applies.
    pub(super) fn start<E>(
        selectors: &[Selector],
        events: &[(String, String)],
        every: std::time::Duration,
        note: impl Fn(&Selector) -> Option<String>,
        stderr: bool,
        st: &mut Stager<E>,
    ) -> Self {
        let mut w = Waiting {
            waiting: Vec::new(),
            stderr,
        };
        for (i, sel) in selectors.iter().enumerate() {
            if first_match(sel, events).is_some() {
                continue;
            }
            let mut msg = format!(
                "waiting for {sel} to appear (rescanning every {})",
                humantime::format_duration(every)
            );
            if let Some(note) = note(sel) {
                msg.push_str("; note: ");
                msg.push_str(&note);
            }
            w.say(st, "waiting", None, &msg);
            w.waiting.push(i);
        }
        w
    }

    /// After a later scan: report each waiting selector that matches one of `events` now.
    pub(super) fn rescan<E>(
        &mut self,
        selectors: &[Selector],
        events: &[(String, String)],
        st: &mut Stager<E>,
    ) {
        if self.waiting.is_empty() {
            return;
        }
        let mut still = Vec::new();
        for &i in &self.waiting {
            let Some(sel) = selectors.get(i) else {
                continue;
            };
            match first_match(sel, events) {
                Some((system, event)) => {
                    let key = format!("{system}:{event}");
                    let msg = format!("{sel} now matches {key}");
                    self.say(st, "matching", Some(&key), &msg);
                }
                None => still.push(i),
            }
        }
        self.waiting = still;
    }

    fn say<E>(&self, st: &mut Stager<E>, what: &str, event: Option<&str>, msg: &str) {
        if self.stderr {
            crate::messages::print(format_args!("uevrec: {msg}\n"));
        }
        st.notice(what, event, msg);
    }
}

/// The first of `events` that `sel` matches.
fn first_match<'e>(sel: &Selector, events: &'e [(String, String)]) -> Option<&'e (String, String)> {
    events
        .iter()
        .find(|(system, event)| sel.matches(system, event))
}
