//! Golden lines of `--format text`: a plain event, an EventHeader event, notices, losses,
//! hostile strings, and colors.

use super::*;
use crate::eventheader::{trace_entry, tracepoint_format};
use crate::parse_format;

/// 2024-03-28T00:45:12.5Z.
const STAMP: RecordStamp = RecordStamp {
    time_unix_ns: Some(1_711_586_712_500_000_000),
    cpu: 1,
    pid: 42,
    tid: 43,
};

/// `user_events:t` with `u32 n` and `__rel_loc char[] msg`.
fn plain() -> PreparedFormat {
    let text = "name: t\nID: 7\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:u32 n;\toffset:8;\tsize:4;\tsigned:0;\n\
        \tfield:__rel_loc char[] msg;\toffset:12;\tsize:4;\tsigned:0;\n\n\
        print fmt: \"\"\n";
    PreparedFormat::new(&parse_format(text).unwrap(), "user_events", "t", None)
}

/// A record of [`plain`].
fn plain_raw(n: u32, msg: &[u8]) -> Vec<u8> {
    let mut raw = vec![0u8; 8];
    raw.extend_from_slice(&n.to_le_bytes());
    let len = u32::try_from(msg.len() + 1).unwrap();
    raw.extend_from_slice(&(len << 16).to_le_bytes());
    raw.extend_from_slice(msg);
    raw.push(0);
    raw
}

fn text(color: bool, write: impl FnOnce(&mut TextWriter, &mut Vec<u8>)) -> String {
    let mut w = TextWriter::new(LineOptions::default(), color);
    let mut out = Vec::new();
    write(&mut w, &mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn a_plain_record_is_one_line_after_its_day() {
    let got = text(false, |w, out| {
        w.write_prepared(out, &STAMP, &plain(), &plain_raw(7, b"hello"));
        let later = RecordStamp {
            time_unix_ns: STAMP.time_unix_ns.map(|t| t + 1_500),
            tid: 42,
            ..STAMP
        };
        w.write_prepared(out, &later, &plain(), &plain_raw(8, b"two words"));
    });
    assert_eq!(
        got,
        "-- 2024-03-28 UTC --\n\
         00:45:12.500000000 [42/43] cpu1 user_events:t n=7 msg=hello\n\
         00:45:12.500001500 [42] cpu1 user_events:t n=8 msg=\"two words\"\n"
    );
}

#[test]
fn a_record_without_a_clock_has_a_dash_for_time() {
    let stamp = RecordStamp {
        time_unix_ns: None,
        ..STAMP
    };
    let got = text(false, |w, out| {
        w.write_prepared(out, &stamp, &plain(), &plain_raw(1, b""))
    });
    assert_eq!(got, "- [42/43] cpu1 user_events:t n=1 msg=\"\"\n");
}

#[test]
fn an_eventheader_record_is_named_provider_colon_event() {
    // Metadata: event "disk", fields `user` (string, u16 length) and `n` (u32).
    let mut meta = b"disk\0user\0".to_vec();
    meta.push(10);
    meta.extend_from_slice(b"n\0");
    meta.push(4);
    let mut payload = 4u16.to_le_bytes().to_vec();
    payload.extend_from_slice("zoë".as_bytes());
    payload.extend_from_slice(&9u32.to_le_bytes());
    let prepared = PreparedFormat::new(
        &tracepoint_format("Prov_L2K1", 7),
        "user_events",
        "Prov_L2K1",
        None,
    );
    let got = text(false, |w, out| {
        w.write_prepared(out, &STAMP, &prepared, &trace_entry(2, &meta, &payload))
    });
    assert_eq!(
        got,
        "-- 2024-03-28 UTC --\n\
         00:45:12.500000000 [42/43] cpu1 Prov:disk user=zoë n=9 level=2 keyword=0x1\n"
    );
}

#[test]
fn notices_and_losses_read_as_sentences() {
    let got = text(false, |w, out| {
        w.write_notice(
            out,
            STAMP.time_unix_ns,
            "attached",
            Some("s:e"),
            "id 7, 2 CPUs",
        );
        w.write_notice(out, STAMP.time_unix_ns, "flight", None, "dumped");
        w.write_lost(out, STAMP.time_unix_ns, 3, 42);
        w.write_lost(out, None, 0, 1);
    });
    assert_eq!(
        got,
        "-- 2024-03-28 UTC --\n\
         00:45:12.500000000 -- attached s:e: id 7, 2 CPUs\n\
         00:45:12.500000000 -- flight: dumped\n\
         00:45:12.500000000 -- lost 42 records on cpu3 (the kernel's ring was full)\n\
         - -- lost 1 record on cpu0 (the kernel's ring was full)\n"
    );
}

#[test]
fn hostile_strings_cannot_forge_a_line_or_reach_the_terminal() {
    let forged = "x\n00:00:00.000000000 [1] cpu0 user_events:t n=1\r\x1b[2J\x1b]0;pwned\x07\u{202e}\u{200b}\"\\'";
    let got = text(false, |w, out| {
        w.write_prepared(out, &STAMP, &plain(), &plain_raw(1, forged.as_bytes()));
        w.write_notice(out, None, "skipped", Some("a\nb:c"), forged);
    });
    assert_eq!(
        got,
        "-- 2024-03-28 UTC --\n\
         00:45:12.500000000 [42/43] cpu1 user_events:t n=1 \
         msg=\"x\\n00:00:00.000000000 [1] cpu0 user_events:t n=1\\r\\u{1b}[2J\\u{1b}]0;pwned\\u{7}\\u{202e}\\u{200b}\\\"\\\\'\"\n\
         - -- skipped \"a\\nb:c\": x\\n00:00:00.000000000 [1] cpu0 user_events:t n=1\\r\\u{1b}[2J\\u{1b}]0;pwned\\u{7}\\u{202e}\\u{200b}\"\\'\n"
    );
    // Each record is one line; no byte of the terminal's control set is left.
    assert_eq!(got.lines().count(), 3);
    assert!(!got.bytes().any(|b| b < 0x20 && b != b'\n'), "{got}");
}

#[test]
fn colors_only_when_asked() {
    let plain_text = text(false, |w, out| {
        w.write_prepared(out, &STAMP, &plain(), &plain_raw(7, b"hi"));
        w.write_lost(out, STAMP.time_unix_ns, 0, 2);
    });
    assert!(!plain_text.contains('\x1b'));
    let colored = text(true, |w, out| {
        w.write_prepared(out, &STAMP, &plain(), &plain_raw(7, b"hi"));
        w.write_lost(out, STAMP.time_unix_ns, 0, 2);
    });
    assert_eq!(
        colored,
        "\x1b[2m-- 2024-03-28 UTC --\x1b[0m\n\
         \x1b[2m00:45:12.500000000\x1b[0m [42/43] cpu1 \x1b[1;36muser_events:t\x1b[0m \
         \x1b[2mn=\x1b[0m7 \x1b[2mmsg=\x1b[0mhi\n\
         \x1b[2m00:45:12.500000000\x1b[0m \
         \x1b[1;31m-- lost 2 records on cpu0 (the kernel's ring was full)\x1b[0m\n"
    );
}
