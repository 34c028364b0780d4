//! `uevrec list`: the matching events with their fields, and for user_events their status.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;
use uevrec_parsers::{EventFormat, FieldKind};

use super::{EXIT_ERROR, EXIT_OK, EXIT_OUTPUT_CLOSED, ListArgs};
use crate::capture::selector::default_selectors;
use crate::messages;

/// Systems whose events appear in `user_events_status`.
const USER_EVENT_SYSTEMS: [&str; 2] = ["user_events", "user_events_multi"];

/// Parse `user_events_status` into event name → status text ("Used by perf", or "unused").
///
/// The kernel prints one line per event, `NAME` or `NAME # Used by ftrace perf other`,
/// then a blank line and `Active:`/`Busy:` counts.
pub fn parse_status(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|line| {
            let (name, rest) = line.split_once(' ').unwrap_or((line, ""));
            let status = rest.trim().trim_start_matches('#').trim();
            let status = if status.is_empty() { "unused" } else { status };
            (!name.is_empty()).then(|| (name.to_owned(), status.to_owned()))
        })
        .collect()
}

/// One event in `--json` output.
#[derive(Serialize)]
struct Listed<'a> {
    system: &'a str,
    event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a str>,
    format: &'a EventFormat,
}

/// A short name for a field kind (`kind` tag of its JSON form).
fn kind_name(kind: &FieldKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn write_text(
    out: &mut impl Write,
    system: &str,
    event: &str,
    status: Option<&str>,
    f: &EventFormat,
) -> io::Result<()> {
    write!(out, "{system}:{event}  id {}", f.id)?;
    if let Some(s) = status {
        write!(out, "  [{s}]")?;
    }
    writeln!(out)?;
    for field in &f.fields {
        writeln!(
            out,
            "    {:<24} {:<28} offset {:<4} size {:<4} {}",
            field.name,
            field.type_text,
            field.offset,
            field.size,
            kind_name(&field.kind)
        )?;
    }
    Ok(())
}

/// `uevrec list`.
pub fn list(args: &ListArgs) -> i32 {
    let tracefs = match args.events.tracefs() {
        Ok(t) => t,
        Err(e) => {
            messages::error(&e);
            return EXIT_ERROR;
        }
    };
    let mut selectors = args.events.all_selectors();
    if selectors.is_empty() {
        selectors = default_selectors();
    }
    let events = match tracefs.list_events() {
        Ok(ev) => ev,
        Err(e) => {
            messages::error(&e);
            return EXIT_ERROR;
        }
    };
    let status = tracefs
        .user_events_status()
        .map(|t| parse_status(&t))
        .unwrap_or_default();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let (mut shown, mut failed) = (0usize, 0usize);
    for (system, event) in events
        .iter()
        .filter(|(s, e)| selectors.iter().any(|sel| sel.matches(s, e)))
    {
        let format = match tracefs.read_format(system, event) {
            Ok(f) => f,
            Err(e) => {
                // Events may vanish between listing and reading; report and go on.
                messages::error(&e);
                failed += 1;
                continue;
            }
        };
        let st = USER_EVENT_SYSTEMS.contains(&system.as_str()).then(|| {
            status
                .get(event.as_str())
                .map_or("not in user_events_status", String::as_str)
        });
        let res = if args.json {
            let item = Listed {
                system,
                event,
                status: st,
                format: &format,
            };
            serde_json::to_writer(&mut out, &item)
                .map_err(io::Error::from)
                .and_then(|_| out.write_all(b"\n"))
        } else {
            write_text(&mut out, system, event, st, &format)
        };
        if let Err(e) = res {
            return io_exit(&e);
        }
        shown += 1;
    }
    if let Err(e) = out.flush() {
        return io_exit(&e);
    }
    if shown == 0 && failed == 0 {
        messages::print(format_args!(
            "uevrec: no event matches (see the SELECTOR syntax in --help)\n"
        ));
    }
    if failed > 0 { EXIT_ERROR } else { EXIT_OK }
}

fn io_exit(e: &io::Error) -> i32 {
    if e.kind() == io::ErrorKind::BrokenPipe {
        EXIT_OUTPUT_CLOSED
    } else {
        messages::error(&format_args!("writing to <stdout>: {e}"));
        EXIT_ERROR
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        let text =
            "test # Used by perf\nother\nmulti.1a # Used by ftrace perf\n\nActive: 3\nBusy: 2\n";
        let m = parse_status(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m["test"], "Used by perf");
        assert_eq!(m["other"], "unused");
        assert_eq!(m["multi.1a"], "Used by ftrace perf");
        assert!(parse_status("").is_empty());
    }
}
