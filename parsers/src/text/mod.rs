//! `--format text`: one readable line per record, as perf script and journalctl print
//! them, for a person at a terminal (JSON lines stay the form for programs):
//!
//! ```text
//! -- 2026-12-05 UTC --
//! 23:47:16.025740409 perl[11352] cpu0 raw_syscalls:sys_enter id=110 args=[424242,197]
//! 23:47:16.025884043 -- attached raw_syscalls:sys_enter: id 443, 2 CPUs
//! 23:47:16.026001002 -- lost 42 records on cpu1 (the kernel's ring was full)
//! ```
//!
//! Each record is decoded by the JSON-lines writer, so text and JSON never disagree on a
//! value (plain and EventHeader payloads, context, errors); that line is read back in its
//! key order ([`ordered`]) and rewritten. It costs a parse and a few allocations per
//! record, which a terminal's rate affords; JSON lines, the bulk path, pay nothing for it.
//! Every string that comes from a traced program (comm, names, values, notices) goes
//! through [`escape`]: a payload cannot end a line, move the cursor or color the terminal.
//! The session and schema lines of JSON lines are left out: a reader wants the records.

mod escape;
mod ordered;

use std::time::{Duration, UNIX_EPOCH};

use crate::context::ContextTracker;
use crate::json_line::{LineOptions, LineWriter, PreparedFormat, RecordStamp, RecordWriter};
use escape::{Paint, write_sentence, write_text};
use ordered::Json;

/// Writes `--format text` lines; colors (ANSI) when built with `color`.
#[derive(Debug)]
pub struct TextWriter {
    /// Decodes each record into a JSON line first.
    json: LineWriter,
    /// That line.
    scratch: Vec<u8>,
    paint: Paint,
    /// The day (`YYYY-MM-DD`, UTC) said last.
    day: String,
}

impl TextWriter {
    /// A writer with `opts` (those of the JSON lines it reads back); ANSI colors when
    /// `color` (a terminal without `NO_COLOR`: the caller decides).
    pub fn new(opts: LineOptions, color: bool) -> Self {
        TextWriter {
            json: LineWriter::new(opts),
            scratch: Vec::new(),
            paint: Paint { color },
            day: String::new(),
        }
    }

    /// Who wrote the next record ([`LineWriter::set_context`]): its `comm`.
    pub fn set_context(
        &mut self,
        tracker: &ContextTracker,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
    ) {
        self.json.set_context(tracker, stamp, cgroup);
    }

    /// The time column for an RFC 3339 time (`None`: the input has no clock), after the
    /// day's line when the day changed.
    fn time(&mut self, out: &mut Vec<u8>, rfc3339: Option<&str>) {
        let split = rfc3339.and_then(|t| {
            let (day, rest) = t.split_once('T')?;
            Some((day, rest.strip_suffix('Z').unwrap_or(rest)))
        });
        let Some((day, of_day)) = split else {
            self.paint.dim(out, |out| out.push(b'-'));
            return;
        };
        if day != self.day {
            day.clone_into(&mut self.day);
            self.paint.dim(out, |out| {
                out.extend_from_slice(b"-- ");
                write_text(out, day);
                out.extend_from_slice(b" UTC --");
            });
            out.push(b'\n');
        }
        self.paint.dim(out, |out| write_text(out, of_day));
    }

    /// [`TextWriter::time`] of a time in nanoseconds since the epoch.
    fn time_ns(&mut self, out: &mut Vec<u8>, time_unix_ns: Option<u64>) {
        let text = time_unix_ns
            .map(|ns| humantime::format_rfc3339_nanos(UNIX_EPOCH + Duration::from_nanos(ns)))
            .map(|t| t.to_string());
        self.time(out, text.as_deref());
    }

    /// The text line of one JSON record line (`line`, without its newline).
    fn record(&mut self, out: &mut Vec<u8>, line: &[u8]) {
        let Ok(Json::Obj(keys)) = serde_json::from_slice::<Json>(line) else {
            // Not expected (the writer's own line); said rather than lost.
            self.paint
                .dim(out, |out| out.extend_from_slice(b"-- unreadable record: "));
            write_sentence(out, &String::from_utf8_lossy(line));
            out.push(b'\n');
            return;
        };
        let get = |name: &str| keys.iter().find(|(k, _)| k == name).map(|(_, v)| v);
        let time = match get("time") {
            Some(Json::Str(t)) => Some(t.as_str()),
            _ => None,
        };
        self.time(out, time);
        out.push(b' ');
        // comm[pid] (comm[pid/tid] for a thread other than the main one).
        if let Some(Json::Str(comm)) = get("comm") {
            write_text(out, comm);
        }
        let (pid, tid) = (get("pid"), get("tid"));
        out.push(b'[');
        if let Some(p) = pid {
            escape::write_value(out, p);
        }
        if let Some(t) = tid.filter(|_| tid != pid) {
            out.push(b'/');
            escape::write_value(out, t);
        }
        out.extend_from_slice(b"] cpu");
        if let Some(c) = get("cpu") {
            escape::write_value(out, c);
        }
        out.push(b' ');
        // The event: provider:name for an EventHeader event with a name, else system:event.
        let name_of = |a: &str, b: &str| match (get(a), get(b)) {
            (Some(Json::Str(a)), Some(Json::Str(b))) => Some((a.clone(), b.clone())),
            _ => None,
        };
        let (group, event) = name_of("provider", "name")
            .or_else(|| name_of("system", "event"))
            .unwrap_or_default();
        self.paint.event(out, |out| {
            write_text(out, &group);
            out.push(b':');
            write_text(out, &event);
        });
        if let Some(Json::Obj(fields)) = get("fields") {
            for (k, v) in fields {
                self.field(out, k, v);
            }
        }
        const SHOWN: &[&str] = &[
            "time", "system", "event", "cpu", "pid", "tid", "comm", "cgroup", "fields", "provider",
            "name",
        ];
        for (k, v) in keys.iter().filter(|(k, _)| !SHOWN.contains(&k.as_str())) {
            self.field(out, k, v);
        }
        out.push(b'\n');
    }

    /// ` key=value`.
    fn field(&self, out: &mut Vec<u8>, key: &str, value: &Json) {
        out.push(b' ');
        self.paint.key(out, |out| {
            write_text(out, key);
            out.push(b'=');
        });
        escape::write_value(out, value);
    }
}

impl RecordWriter for TextWriter {
    fn write_prepared(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        prepared: &PreparedFormat,
        raw: &[u8],
    ) {
        let mut json = std::mem::take(&mut self.scratch);
        json.clear();
        self.json.write_prepared(&mut json, stamp, prepared, raw);
        for line in json.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            self.record(out, line);
        }
        self.scratch = json;
    }

    fn write_lost(&mut self, out: &mut Vec<u8>, time_unix_ns: Option<u64>, cpu: u32, lost: u64) {
        self.time_ns(out, time_unix_ns);
        out.push(b' ');
        self.paint.lost(out, |out| {
            let s = if lost == 1 { "" } else { "s" };
            let text = format!("-- lost {lost} record{s} on cpu{cpu} (the kernel's ring was full)");
            out.extend_from_slice(text.as_bytes());
        });
        out.push(b'\n');
    }

    fn write_notice(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        what: &str,
        event: Option<&str>,
        message: &str,
    ) {
        self.time_ns(out, time_unix_ns);
        out.push(b' ');
        self.paint.notice(out, |out| {
            out.extend_from_slice(b"-- ");
            write_text(out, what);
            if let Some(event) = event {
                out.push(b' ');
                write_text(out, event);
            }
            out.extend_from_slice(b": ");
            write_sentence(out, message);
        });
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests;
