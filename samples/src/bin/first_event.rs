//! A short-lived producer: registers one event and writes its first record at once, then
//! exits (milliseconds). It never waits for a recorder, so its record is kept only when a
//! recorder already listens to the event when it registers: a pre-registered
//! (persistent) event that a recorder has open (`uevrec record --register`).
//!
//! ```text
//! first_event --name NAME [--fields 'u64 seq'] [--seq N] [--multi-format]
//! ```
//! Registers `NAME FIELDS` (default fields `u64 seq`; every field is written as the
//! value `--seq`, strings as its decimal text) and writes one record when its enable bit is
//! set right after DIAG_IOCSREG. Report line: `{"registered":NAME,"command":CMD,
//! "write_index":N,"flags":F}` then `{"done":NAME,"seq":N,"enabled_at_register":bool,
//! "written":bool}`; a refused registration reports `{"done":NAME,"error":TEXT,
//! "addr_in_use":bool}` and exits with status 3 (EADDRINUSE: the name exists with other fields).

use clap::Parser;
use serde_json::json;
use uevrec_parsers::{Element, FieldKind};
use uevrec_samples::{Flags, PayloadValue, UserEvents, Written, command, fail, report};

#[derive(Parser)]
#[command(about = "Register a user event and write its first record at once, then exit")]
struct Args {
    /// Event name.
    #[arg(long, default_value = "uevrs_first")]
    name: String,
    /// The event's fields (register-command syntax).
    #[arg(long, default_value = "u64 seq")]
    fields: String,
    /// The value written into every field.
    #[arg(long, default_value_t = 0)]
    seq: u64,
    /// Register with USER_EVENT_REG_MULTI_FORMAT.
    #[arg(long)]
    multi_format: bool,
}

fn main() {
    let args = Args::parse();
    let events = UserEvents::open().unwrap_or_else(|e| fail(e));
    let cmd = command(&format!("{} {}", args.name, args.fields));
    let flags = if args.multi_format {
        Flags::MULTI_FORMAT
    } else {
        Flags::NONE
    };
    let event = match events.register(&cmd, flags) {
        Ok(e) => e,
        Err(e) => {
            report(
                &json!({"done": args.name, "error": e.to_string(), "addr_in_use": e.kind() == std::io::ErrorKind::AddrInUse}),
            );
            std::process::exit(3);
        }
    };
    let enabled = event.is_enabled();
    let text = args.seq.to_string();
    let bytes = args.seq.to_le_bytes();
    let values: Vec<PayloadValue<'_>> = cmd
        .fields
        .iter()
        .map(|f| match &f.kind {
            FieldKind::Integer { .. } => PayloadValue::Uint(args.seq % 128),
            FieldKind::FixedArray {
                elem: Element::Char,
                ..
            }
            | FieldKind::Dynamic {
                elem: Element::Char,
                ..
            } => PayloadValue::Str(&text),
            _ => PayloadValue::Bytes(&bytes[..1]),
        })
        .collect();
    // The first field carries the full sequence number when it is 8 bytes wide.
    let values: Vec<PayloadValue<'_>> = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| match (i, &cmd.fields[0].kind) {
            (0, FieldKind::Integer { size: 8, .. }) => PayloadValue::Uint(args.seq),
            _ => v,
        })
        .collect();
    let written = if enabled {
        match event.emit(&values) {
            Ok(Written::Yes) => true,
            Ok(Written::Disabled) => false,
            Err(e) => fail(e),
        }
    } else {
        false
    };
    report(&json!({
        "registered": cmd.name,
        "command": cmd.to_string(),
        "write_index": event.write_index(),
        "flags": flags.0,
    }));
    report(
        &json!({"done": args.name, "seq": args.seq, "enabled_at_register": enabled, "written": written}),
    );
}
