//! The text parts of a trace.dat: saved command lines and tgids, C integer literals of
//! the options.

/// How many lines were not read, and the first of them.
pub type BadLines = (usize, String);

/// At most this many characters of a bad line are shown in an error.
pub const MAX_SHOWN: usize = 80;

/// The `TID TGID` pairs of a saved tgids text (the kernel's `saved_tgids` file, read live
/// by the ftrace backend and kept in the files of `record --raw-format trace-dat`): lines
/// that are not two numbers are skipped, and so are those with a tgid of 0 (they say
/// nothing).
pub fn parse_saved_tgids(text: &str) -> impl Iterator<Item = (u32, u32)> + '_ {
    text.lines().filter_map(|l| {
        let mut it = l.split_whitespace();
        let tid = it.next()?.parse().ok()?;
        let tgid: u32 = it.next()?.parse().ok()?;
        (tgid != 0).then_some((tid, tgid))
    })
}

/// The `PID COMM` lines of a saved cmdlines text (the kernel's `saved_cmdlines` file,
/// `"%d %s\n"` per entry) as (pid, comm) sorted by pid, one per pid (a later line wins, as
/// libtraceevent's registration does), and the count and first of the lines that are not
/// of that form (empty lines are not counted).
pub fn parse_cmdlines(text: &str) -> (Vec<(u32, String)>, Option<BadLines>) {
    let mut bad: Option<BadLines> = None;
    let mut cmdlines: Vec<(u32, String)> = text
        .lines()
        .filter(|line| !line.is_empty())
        .filter_map(|line| {
            let parsed = line
                .trim_start()
                .split_once(' ')
                .and_then(|(pid, comm)| Some((pid.parse().ok()?, comm.to_string())));
            if parsed.is_none() {
                match &mut bad {
                    // A count of lines of the text: saturating never reached.
                    Some((n, _)) => *n = n.saturating_add(1),
                    None => bad = Some((1, line.chars().take(MAX_SHOWN).collect())),
                }
            }
            parsed
        })
        .collect();
    // Later lines win: reversed, a stable sort keeps the last line of a pid first.
    cmdlines.reverse();
    cmdlines.sort_by_key(|&(pid, _)| pid);
    cmdlines.dedup_by_key(|&mut (pid, _)| pid);
    (cmdlines, bad)
}

/// A C integer literal as `strtoll(…, 0)` reads it: decimal, `0x` hex or `0` octal, with
/// an optional sign.
pub(super) fn parse_c_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let v = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()?
    } else if t.len() > 1 && t.starts_with('0') {
        u64::from_str_radix(&t[1..], 8).ok()?
    } else {
        t.parse::<u64>().ok()?
    };
    let v = i64::try_from(v).ok()?;
    if neg { v.checked_neg() } else { Some(v) }
}
