//! What the producer binaries (`src/bin/`) share: their report lines on stdout, the
//! values a recorder must show for what they wrote, and when to start writing.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use uevrec_parsers::{Element, FieldKind};

use crate::{EmitError, Event, Flags, PayloadValue, RegisterCommand, Written};

/// Call `cond` every millisecond until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// How uevrec's JSON lines show `value` written into a field of `kind` (see README,
/// "JSON lines"): integers as numbers, char data as strings cut at the first NUL, bytes
/// and structs as lowercase hex, integer arrays as arrays. The producers print this so
/// that a test can compare it with what a recorder decoded.
///
/// Returns `None` for combinations the producers never write.
pub fn expected_json(kind: &FieldKind, value: &PayloadValue<'_>) -> Option<Value> {
    match (kind, value) {
        (FieldKind::Integer { .. }, PayloadValue::Int(v)) => Some(json!(v)),
        (FieldKind::Integer { .. }, PayloadValue::Uint(v)) => Some(json!(v)),
        (
            FieldKind::FixedArray {
                elem: Element::Char,
                count,
            },
            PayloadValue::Str(s),
        ) => {
            let bytes = &s.as_bytes()[..s.len().min(*count as usize)];
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            Some(Value::String(
                String::from_utf8_lossy(&bytes[..end]).into_owned(),
            ))
        }
        (
            FieldKind::Dynamic {
                elem: Element::Char,
                ..
            },
            PayloadValue::Str(s),
        ) => {
            let end = s.find('\0').unwrap_or(s.len());
            Some(Value::String(s[..end].to_string()))
        }
        (
            FieldKind::FixedArray {
                elem: Element::Byte,
                ..
            }
            | FieldKind::Dynamic {
                elem: Element::Byte,
                ..
            }
            | FieldKind::Struct { .. },
            PayloadValue::Bytes(b),
        ) => {
            let mut hex = String::with_capacity(b.len() * 2);
            for byte in *b {
                hex.push_str(&format!("{byte:02x}"));
            }
            // Fixed areas are zero-padded to their size.
            if let FieldKind::FixedArray { count, .. } = kind {
                hex.extend(std::iter::repeat_n(
                    "00",
                    (*count as usize).saturating_sub(b.len()),
                ));
            }
            Some(Value::String(hex))
        }
        (
            FieldKind::Dynamic {
                elem: Element::Integer { size: 4, .. },
                ..
            },
            PayloadValue::U32s(w),
        ) => Some(Value::Array(w.iter().map(|&x| json!(x)).collect())),
        _ => None,
    }
}

/// Print one JSON value as a line on stdout and flush (the producers' report protocol:
/// tests read these lines while the producer runs).
pub fn report(line: &Value) {
    let mut out = io::stdout().lock();
    // A closed stdout only loses the report; the producer's work is done either way.
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// Exit with status 1 after printing `msg` to stderr (for the producers' `main`).
pub fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1)
}

/// Print the producers' first report line for a fresh registration:
/// `{"registered":NAME,"command":CMD,"write_index":N,"flags":F}`.
pub fn announce(event: &Event<'_>, flags: Flags) {
    report(&json!({
        "registered": event.command().name,
        "command": event.command().to_string(),
        "write_index": event.write_index(),
        "flags": flags.0,
    }));
}

/// `{field name: value as a recorder must show it}` for `values` written as `cmd`
/// (see [`expected_json`]; `null` where it has no rule).
pub fn expected_fields(
    cmd: &RegisterCommand,
    values: &[PayloadValue<'_>],
) -> serde_json::Map<String, Value> {
    cmd.fields
        .iter()
        .zip(values)
        .map(|(field, value)| {
            (
                field.name.clone(),
                expected_json(&field.kind, value).unwrap_or(Value::Null),
            )
        })
        .collect()
}

/// Encode and write `values`; when the kernel took the record, report it as
/// `{"event":NAME,"seq":SEQ,"fields":{...}}` (see [`expected_fields`]).
pub fn emit_and_report(
    event: &Event<'_>,
    seq: u64,
    values: &[PayloadValue<'_>],
) -> Result<Written, EmitError> {
    let written = event.emit(values)?;
    if written == Written::Yes {
        let fields = expected_fields(event.command(), values);
        report(&json!({"event": event.command().name, "seq": seq, "fields": fields}));
    }
    Ok(written)
}

/// Parse a register command written by the producers themselves (a bug if it fails).
pub fn command(text: &str) -> RegisterCommand {
    RegisterCommand::parse(text).unwrap_or_else(|e| fail(format!("register command `{text}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uevrec_parsers::LocKind;

    #[test]
    fn expected_json_follows_uevrecs_value_rules() {
        let int = FieldKind::Integer {
            size: 1,
            signed: true,
        };
        assert_eq!(
            expected_json(&int, &PayloadValue::Int(-128)),
            Some(json!(-128))
        );
        assert_eq!(
            expected_json(&int, &PayloadValue::Uint(u64::MAX)),
            Some(json!(u64::MAX))
        );
        let chars = FieldKind::FixedArray {
            elem: Element::Char,
            count: 4,
        };
        assert_eq!(
            expected_json(&chars, &PayloadValue::Str("ab")),
            Some(json!("ab"))
        );
        assert_eq!(
            expected_json(&chars, &PayloadValue::Str("abcd")),
            Some(json!("abcd"))
        );
        let bytes = FieldKind::FixedArray {
            elem: Element::Byte,
            count: 3,
        };
        assert_eq!(
            expected_json(&bytes, &PayloadValue::Bytes(&[0xab])),
            Some(json!("ab0000"))
        );
        let dyn_bytes = FieldKind::Dynamic {
            loc: LocKind::RelLoc,
            elem: Element::Byte,
        };
        assert_eq!(
            expected_json(&dyn_bytes, &PayloadValue::Bytes(&[1, 0xff])),
            Some(json!("01ff"))
        );
        let dyn_str = FieldKind::Dynamic {
            loc: LocKind::DataLoc,
            elem: Element::Char,
        };
        assert_eq!(
            expected_json(&dyn_str, &PayloadValue::Str("a\"\n")),
            Some(json!("a\"\n"))
        );
        let words = FieldKind::Dynamic {
            loc: LocKind::DataLoc,
            elem: Element::Integer {
                size: 4,
                signed: false,
            },
        };
        assert_eq!(
            expected_json(&words, &PayloadValue::U32s(&[1, u32::MAX])),
            Some(json!([1, u32::MAX]))
        );
        assert_eq!(expected_json(&int, &PayloadValue::Str("x")), None);
    }
}

/// When a producer may start writing: the command-line options every producer shares.
///
/// The enable bit turns on when a recorder *opens* an event, which can be well before it
/// keeps records (perf first synthesizes process information; seconds under emulation).
/// A producer that must not lose its first records waits for its bits, then for a
/// recorder's "recording now" signal (`--start-file`) or a fixed pause (`--settle-ms`).
#[derive(Debug, Clone, clap::Args)]
pub struct StartArgs {
    /// How long to wait for a recorder (enable bits, start file).
    #[arg(long, default_value_t = 60)]
    pub timeout_secs: u64,
    /// Pause after the events are enabled (and the start file exists), before writing.
    #[arg(long, default_value_t = 0)]
    pub settle_ms: u64,
    /// After the events are enabled, also wait until this file exists.
    #[arg(long)]
    pub start_file: Option<PathBuf>,
}

impl StartArgs {
    /// Wait until every event in `events` is enabled, the start file (if any) exists and
    /// the settle time has passed. On timeout, report
    /// `{"done":NAME,"written":0,"error":..}` and exit with status 2.
    pub fn wait(&self, name: &str, events: &[&Event<'_>]) {
        self.wait_for(name, || events.iter().all(|e| e.is_enabled()));
    }

    /// [`StartArgs::wait`] for producers that are not [`Event`]s (the EventHeader and
    /// OpenTelemetry crates): `enabled` says whether all their tracepoints are enabled.
    pub fn wait_for(&self, name: &str, mut enabled: impl FnMut() -> bool) {
        let timeout = Duration::from_secs(self.timeout_secs);
        let give_up = |why: &str| -> ! {
            report(&json!({"done": name, "written": 0, "error": why}));
            std::process::exit(2)
        };
        if !wait_until(timeout, &mut enabled) {
            give_up("not enabled within the timeout");
        }
        if let Some(file) = &self.start_file
            && !wait_until(timeout, || file.exists())
        {
            give_up("the start file did not appear within the timeout");
        }
        std::thread::sleep(Duration::from_millis(self.settle_ms));
    }
}
