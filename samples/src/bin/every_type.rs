//! Registers one user event with every field type the kernel accepts, waits until someone
//! records it, writes rows of known values (minimums, maximums, awkward strings), and
//! prints each row as JSON the way uevrec must decode it.
//!
//! ```text
//! every_type [--name NAME] [--strings] [START OPTIONS]
//! ```
//! START OPTIONS: `--timeout-secs S` (default 60), `--settle-ms MS`, `--start-file F`: when to
//! start writing once enabled (see `uevrec_samples::StartArgs`).
//! `--strings` registers `NAME u32 len; __data_loc char[] d; __rel_loc char[] r` instead
//! and writes strings of 0, 1, 255 and 4000 bytes full of quotes, backslashes, newlines,
//! control characters and multi-byte UTF-8.
//!
//! Report lines (stdout, one JSON object each): `{"registered":..}` first, then one
//! `{"event":..,"seq":..,"fields":{..}}` per record written, then `{"done":..,"written":N}`.
//! Exit status 2 if nobody enabled the event within the timeout.

use clap::Parser;
use serde_json::json;
use uevrec_samples::{
    Flags, PayloadValue as V, StartArgs, UserEvents, Written, announce, command, emit_and_report,
    fail, report,
};

#[derive(Parser)]
#[command(about = "Write every user_events field type with known values")]
struct Args {
    /// Event name.
    #[arg(long, default_value = "uevrs_every")]
    name: String,
    /// Write the string-length event instead (lengths 0, 1, 255, 4000).
    #[arg(long)]
    strings: bool,
    #[command(flatten)]
    start: StartArgs,
}

/// Every accepted type, one field each (names say the type).
const EVERY_TYPE_FIELDS: &str = "u8 f_u8; s8 f_s8; u16 f_u16; s16 f_s16; u32 f_u32; s32 f_s32; \
     u64 f_u64; s64 f_s64; int f_int; unsigned int f_uint; short f_short; \
     unsigned short f_ushort; char f_char; unsigned char f_uchar; char[12] f_chars; \
     unsigned char[6] f_ubytes; __data_loc char[] f_dstr; __rel_loc char[] f_rstr; \
     __data_loc u8[] f_dbytes; __rel_loc u8[] f_rbytes; __data_loc u32[] f_du32; \
     struct point f_struct 12";

/// The string lengths (in bytes, without the NUL) `--strings` writes.
const STRING_LENGTHS: [usize; 4] = [0, 1, 255, 4000];

fn main() {
    let args = Args::parse();
    let events = UserEvents::open().unwrap_or_else(|e| fail(e));
    let cmd = if args.strings {
        command(&format!(
            "{} u32 len; __data_loc char[] d; __rel_loc char[] r",
            args.name
        ))
    } else {
        command(&format!("{} {EVERY_TYPE_FIELDS}", args.name))
    };
    let event = events
        .register(&cmd, Flags::NONE)
        .unwrap_or_else(|e| fail(e));
    announce(&event, Flags::NONE);
    args.start.wait(&args.name, &[&event]);

    let mut written = 0u64;
    let mut emit = |seq: u64, values: &[V<'_>]| match emit_and_report(&event, seq, values) {
        Ok(Written::Yes) => written += 1,
        Ok(Written::Disabled) => fail("the recorder went away while writing"),
        Err(e) => fail(e),
    };
    if args.strings {
        let strings: Vec<String> = STRING_LENGTHS.iter().map(|&n| awkward_string(n)).collect();
        for (seq, s) in strings.iter().enumerate() {
            emit(seq as u64, &[V::Uint(s.len() as u64), V::Str(s), V::Str(s)]);
        }
    } else {
        for (seq, row) in rows().iter().enumerate() {
            emit(seq as u64, row);
        }
    }
    report(&json!({"done": args.name, "written": written}));
}

/// Three rows: minimum values, maximum values, and mixed/awkward ones.
fn rows() -> Vec<Vec<V<'static>>> {
    const U32S: &[u32] = &[0, 1, 0x8000_0000, u32::MAX];
    const STRUCT_BYTES: &[u8] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
    // Negative values as Int, the rest as Uint (together they cover every width).
    let i = |v: i128| {
        if v < 0 {
            V::Int(v as i64)
        } else {
            V::Uint(v as u64)
        }
    };
    vec![
        vec![
            i(0),
            i(i8::MIN.into()),
            i(0),
            i(i16::MIN.into()),
            i(0),
            i(i32::MIN.into()),
            i(0),
            i(i64::MIN.into()),
            i(i32::MIN.into()),
            i(0),
            i(i16::MIN.into()),
            i(0),
            i(i8::MIN.into()),
            i(0),
            V::Str(""),
            V::Bytes(&[]),
            V::Str(""),
            V::Str(""),
            V::Bytes(&[]),
            V::Bytes(&[]),
            V::U32s(&[]),
            V::Bytes(&[0; 12]),
        ],
        vec![
            i(u8::MAX.into()),
            i(i8::MAX.into()),
            i(u16::MAX.into()),
            i(i16::MAX.into()),
            i(u32::MAX.into()),
            i(i32::MAX.into()),
            i(u64::MAX.into()),
            i(i64::MAX.into()),
            i(i32::MAX.into()),
            i(u32::MAX.into()),
            i(i16::MAX.into()),
            i(u16::MAX.into()),
            i(i8::MAX.into()),
            i(u8::MAX.into()),
            V::Str("twelve bytes"), // fills char[12] exactly: no NUL in the record
            V::Bytes(&[0xff; 6]),
            V::Str("quote \" backslash \\ newline \n tab \t end"),
            V::Str("UTF-8: é 日本語 🦀 \u{7f} \u{1}"),
            V::Bytes(&[0, 1, 0x7f, 0x80, 0xff]),
            V::Bytes(&[0xde, 0xad, 0xbe, 0xef]),
            V::U32s(U32S),
            V::Bytes(STRUCT_BYTES),
        ],
        vec![
            i(1),
            i(-1),
            i(0x1234),
            i(-2),
            i(0xdead_beef),
            i(-3),
            i(1 << 53 | 1), // above 2^53: must stay an exact integer in JSON
            i(-(1 << 53) - 1),
            i(-4),
            i(7),
            i(-5),
            i(0x8000),
            i(-6),
            i(0x80),
            V::Str("short"), // NUL-padded in the record
            V::Bytes(&[1, 2, 3]),
            V::Str("</script> {\"json\": [1,2]} \r\n\u{8}\u{c}"),
            V::Str("\\\\ two backslashes"),
            V::Bytes(&[0x42]),
            V::Bytes(&[]),
            V::U32s(&[42]),
            V::Bytes(&[0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0]),
        ],
    ]
}

/// A string of exactly `len` bytes cycling through characters that need care in JSON or
/// are more than one byte in UTF-8 (filled up with `x` where a multi-byte one won't fit).
fn awkward_string(len: usize) -> String {
    const PIECES: [&str; 12] = [
        "\"", "\\", "\n", "é", "日本", "🦀", "\t", "\u{1}", "a", "/", "\r", "\u{7f}",
    ];
    let mut s = String::with_capacity(len);
    for piece in PIECES.iter().cycle() {
        if s.len() + piece.len() > len {
            break;
        }
        s.push_str(piece);
    }
    while s.len() < len {
        s.push('x');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awkward_strings_have_exact_byte_lengths() {
        for n in STRING_LENGTHS.into_iter().chain([2, 3, 17, 254, 1000]) {
            let s = awkward_string(n);
            assert_eq!(s.len(), n);
        }
        let long = awkward_string(4000);
        for needle in ["\"", "\\", "\n", "é", "日本", "🦀", "\u{1}"] {
            assert!(long.contains(needle), "{needle:?}");
        }
    }

    #[test]
    fn every_row_matches_the_field_list() {
        let cmd = command(&format!("x {EVERY_TYPE_FIELDS}"));
        for row in rows() {
            assert_eq!(row.len(), cmd.fields.len());
            uevrec_samples::encode(&cmd, &row).expect("row encodes");
        }
    }
}
