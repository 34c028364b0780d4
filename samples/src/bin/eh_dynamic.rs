//! EventHeader events through `eventheader_dynamic` (`Provider`, `EventBuilder`): the
//! same kinds of fields as `eh_macros` built at run time, plus what only the builder
//! expresses: BinaryLength16Char8 with other formats (null, integer, float views),
//! Value128 as hex, UTF strings with a BOM, string8 and hex views of values, arrays of
//! strings and of binaries, arrays of structs, duplicate field names, run-time provider
//! names (with a group).
//!
//! ```text
//! eh_dynamic [--name PREFIX] [--count N] [START OPTIONS]
//! ```
//! Providers: `<PREFIX>` and `<PREFIX>G` (group `dyngrp`). Report lines as `eh_macros`.

use std::net::Ipv6Addr;
use std::sync::Arc;

use clap::Parser;
use eventheader_dynamic::{EventBuilder, EventSet, FieldEncoding, FieldFormat, Level, Opcode};
use eventheader_dynamic::{Provider, ProviderOptions};
use serde_json::{Value, json};
use uevrec_samples::eh::{Written, float, hex_bytes, hex_int, latin1, utf16, uuid_text};
use uevrec_samples::{StartArgs, fail, report};

#[derive(Parser)]
#[command(about = "Write EventHeader events with eventheader_dynamic's EventBuilder")]
struct Args {
    /// Provider name (the grouped provider is this plus `G`).
    #[arg(long, default_value = "UevrecEhDynamic")]
    name: String,
    /// Write every event this many times.
    #[arg(long, default_value_t = 1)]
    count: u64,
    #[command(flatten)]
    start: StartArgs,
}

const GROUP: &str = "dyngrp";
const ACTIVITY: [u8; 16] = *b"\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff\x00";
const RELATED: [u8; 16] = *b"\xa0\xa1\xa2\xa3\xb0\xb1\xc0\xc1\xd7\xd6\xd5\xd4\xd3\xd2\xd1\xd0";

struct Sets {
    info: Arc<EventSet>,
    verbose: Arc<EventSet>,
    error: Arc<EventSet>,
    grouped: Arc<EventSet>,
}

struct Out<'a> {
    provider: &'a str,
    grouped: String,
    seq: u64,
    written: u64,
}

impl Out<'_> {
    fn emit(&mut self, rc: i32, w: Written) {
        w.report_written(i64::from(rc), self.seq, "EventBuilder::write");
        self.written += 1;
        self.seq += 1;
    }

    fn event(&self, name: &str, level: u8, keyword: u64) -> Written {
        Written::new(self.provider, name, level, keyword)
    }
}

fn main() {
    let args = Args::parse();
    let mut main_provider = Provider::new(&args.name, &Provider::new_options());
    let grouped_name = format!("{}G", args.name);
    let mut options = ProviderOptions::new();
    options.group_name(GROUP);
    let mut grouped_provider = Provider::new(&grouped_name, &options);
    let sets = Sets {
        info: main_provider.register_set(Level::Informational, 1),
        verbose: main_provider.register_set(Level::Verbose, 0xabc),
        error: main_provider.register_set(Level::Error, 0x8000_0000_0000_0000),
        grouped: grouped_provider.register_set(Level::Warning, 2),
    };
    for set in [&sets.info, &sets.verbose, &sets.error, &sets.grouped] {
        if set.errno() != 0 {
            fail(format!(
                "registering {set:?}: errno {} (needs user_events and tracefs)",
                set.errno()
            ));
        }
    }
    use uevrec_samples::eh::tracepoint_name as tp;
    for t in [
        tp(&args.name, 4, 1, None),
        tp(&args.name, 5, 0xabc, None),
        tp(&args.name, 2, 0x8000_0000_0000_0000, None),
        tp(&grouped_name, 3, 2, Some(GROUP)),
    ] {
        report(&json!({"registered": t}));
    }
    args.start.wait_for("eh_dynamic", || {
        [&sets.info, &sets.verbose, &sets.error, &sets.grouped]
            .iter()
            .all(|s| s.enabled())
    });
    let mut out = Out {
        provider: &args.name,
        grouped: grouped_name.clone(),
        seq: 0,
        written: 0,
    };
    let mut eb = EventBuilder::new();
    for _ in 0..args.count {
        values(&mut eb, &sets, &mut out);
        strings(&mut eb, &sets, &mut out);
        binaries(&mut eb, &sets, &mut out);
        arrays(&mut eb, &sets, &mut out);
        header(&mut eb, &sets, &mut out);
    }
    main_provider.unregister();
    grouped_provider.unregister();
    report(&json!({"done": "eh_dynamic", "written": out.written}));
}

/// Scalars through `add_value`, including views only the builder offers.
fn values(eb: &mut EventBuilder, sets: &Sets, out: &mut Out<'_>) {
    let v128 = [
        0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xa, 0xb, 0xc, 0xd, 0xe, 0xff,
    ];
    let ip6 = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0202, 0xb3ff, 0xfe1e, 0x8329).octets();
    eb.reset("Values", 0)
        .add_value("u8", 200u8, FieldFormat::Default, 0)
        .add_value("i8", -100i8, FieldFormat::SignedInt, 0)
        .add_value("u16", 60000u16, FieldFormat::UnsignedInt, 0)
        .add_value("i16", -30000i16, FieldFormat::SignedInt, 0)
        .add_value("u32", 4_000_000_000u32, FieldFormat::Default, 0)
        .add_value("i32", -2_000_000_000i32, FieldFormat::SignedInt, 0)
        .add_value(
            "u64",
            18_000_000_000_000_000_000u64,
            FieldFormat::Default,
            0,
        )
        .add_value(
            "i64",
            -9_000_000_000_000_000_000i64,
            FieldFormat::SignedInt,
            0,
        )
        .add_value(
            "u64_max_2p53_plus1",
            (1u64 << 53) + 1,
            FieldFormat::Default,
            0,
        )
        .add_value("hex16", 0xabcdu16, FieldFormat::HexInt, 0)
        .add_value("errno", 110i32, FieldFormat::Errno, 0)
        .add_value("pid", 1u32, FieldFormat::Pid, 0)
        .add_value("time", 0i64, FieldFormat::Time, 0)
        .add_value("time32", 2_147_483_647i32, FieldFormat::Time, 0)
        .add_value("bool", true, FieldFormat::Boolean, 0)
        .add_value("bool8_7", 7u8, FieldFormat::Boolean, 0)
        .add_value("f32", -0.5f32, FieldFormat::Float, 0)
        .add_value("f64", 1e-300f64, FieldFormat::Float, 0)
        .add_value("f64_nan", f64::NAN, FieldFormat::Float, 0)
        .add_value("string8", 0xfcu8, FieldFormat::String8, 0)
        .add_value("char_utf32", '🦀', FieldFormat::StringUtf, 0)
        .add_value("hex_bytes2", [0x01u8, 0xfe], FieldFormat::HexBytes, 0)
        .add_value("ipv4", [10u8, 0, 0, 1], FieldFormat::IPAddress, 0)
        .add_value("port", 8080u16.to_be(), FieldFormat::Port, 0)
        .add_value("v128", v128, FieldFormat::Default, 0)
        .add_value("v128_hex", v128, FieldFormat::HexBytes, 0)
        .add_value("uuid", ACTIVITY, FieldFormat::Uuid, 0)
        .add_value("ipv6", ip6, FieldFormat::IPAddress, 0)
        .add_value("dup", 1u8, FieldFormat::Default, 0)
        .add_value("dup", 2u8, FieldFormat::Default, 0)
        .add_value("dup", 3u8, FieldFormat::Default, 0)
        .add_value("tagged", 5u8, FieldFormat::Default, 0xfff);
    let rc = eb.write(&sets.info, None, None);
    let mut w = out
        .event("Values", 4, 1)
        .field("u8", json!(200))
        .field("i8", json!(-100))
        .field("u16", json!(60000))
        .field("i16", json!(-30000))
        .field("u32", json!(4_000_000_000u32))
        .field("i32", json!(-2_000_000_000))
        .field("u64", json!(18_000_000_000_000_000_000u64))
        .field("i64", json!(-9_000_000_000_000_000_000i64))
        .field("u64_max_2p53_plus1", json!((1u64 << 53) + 1))
        .field("hex16", hex_int(0xabcd))
        .field("errno", json!(110))
        .field("pid", json!(1))
        .field("time", json!("1970-01-01T00:00:00Z"))
        .field("time32", json!("2038-01-19T03:14:07Z"))
        .field("bool", json!(true))
        .field("bool8_7", json!(7))
        .field("f32", float(-0.5))
        .field("f64", float(1e-300))
        .field("f64_nan", float(f64::NAN))
        .field("string8", json!(latin1(&[0xfc])))
        .field("char_utf32", json!("🦀"))
        .field("hex_bytes2", json!("01fe"))
        .field("ipv4", json!("10.0.0.1"))
        .field("port", json!(8080))
        .field("v128", json!(hex_bytes(&v128)))
        .field("v128_hex", json!(hex_bytes(&v128)))
        .field("uuid", json!(uuid_text(&ACTIVITY)))
        .field("ipv6", json!(Ipv6Addr::from(ip6).to_string()))
        .field("dup", json!(1))
        .field("dup#2", json!(2))
        .field("dup#3", json!(3))
        .field("tagged", json!(5));
    w.field_tags.insert("tagged".into(), json!(0xfff));
    out.emit(rc, w);
}

/// Strings: BOMs, XML/JSON on 16-bit text, Latin-1, hex view of a string, sequences.
fn strings(eb: &mut EventBuilder, sets: &Sets, out: &mut Out<'_>) {
    let bom8: Vec<u8> = [&[0xef, 0xbb, 0xbf][..], "bom é".as_bytes()].concat();
    let bom16: Vec<u16> = std::iter::once(0xfeff)
        .chain("bom16 ☺".encode_utf16())
        .collect();
    let nobom16: Vec<u16> = "no bom".encode_utf16().collect();
    let xml16: Vec<u16> = "<x a='1'/>".encode_utf16().collect();
    let json32: Vec<u32> = "[1,\"two\"]".chars().map(u32::from).collect();
    let names = ["alpha", "", "γάμμα \"q\""];
    eb.reset("Strings", 0)
        .add_str("utf8_bom", &bom8, FieldFormat::StringUtfBom, 0)
        .add_str("utf16_bom", &bom16, FieldFormat::StringUtfBom, 0)
        .add_cstr("utf16_no_bom", &nobom16, FieldFormat::StringUtfBom, 0)
        .add_str("xml16", &xml16, FieldFormat::StringXml, 0)
        .add_cstr("json32", &json32, FieldFormat::StringJson, 0)
        .add_str(
            "latin1",
            [0x63u8, 0x61, 0x66, 0xe9],
            FieldFormat::String8,
            0,
        )
        .add_cstr("hexstr", "AB", FieldFormat::HexBytes, 0)
        .add_str_sequence(
            "str_seq",
            names.iter().map(|s| s.as_bytes()),
            FieldFormat::Default,
            0,
        )
        .add_cstr_sequence(
            "cstr_seq",
            names.iter().map(|s| s.as_bytes()),
            FieldFormat::Default,
            0,
        )
        .add_str_sequence(
            "empty_seq",
            std::iter::empty::<&[u8]>(),
            FieldFormat::Default,
            0,
        );
    let rc = eb.write(&sets.verbose, None, None);
    let w = out
        .event("Strings", 5, 0xabc)
        .field("utf8_bom", json!("bom é"))
        .field("utf16_bom", json!("bom16 ☺"))
        .field("utf16_no_bom", json!("no bom"))
        .field("xml16", json!(utf16(&xml16)))
        .field("json32", json!("[1,\"two\"]"))
        .field("latin1", json!("café"))
        .field("hexstr", json!("4142"))
        .field("str_seq", json!(names))
        .field("cstr_seq", json!(names))
        .field("empty_seq", json!([]));
    out.emit(rc, w);
}

/// BinaryLength16Char8: hex by default; with a value format, length 0 is null and
/// lengths 1/2/4/8/16 read as that ValueN.
fn binaries(eb: &mut EventBuilder, sets: &Sets, out: &mut Out<'_>) {
    let blob = [0xdeu8, 0xad, 0xbe, 0xef, 0x00, 0x01];
    let seq: [&[u8]; 3] = [&[1, 2], &[], &[0xff]];
    eb.reset("Binaries", 0)
        .add_binary("blob", blob, FieldFormat::Default, 0)
        .add_binary("empty_blob", [0u8; 0], FieldFormat::Default, 0)
        .add_binary("null_uint", [0u8; 0], FieldFormat::UnsignedInt, 0)
        .add_binary(
            "uint32",
            123_456u32.to_ne_bytes(),
            FieldFormat::UnsignedInt,
            0,
        )
        .add_binary("int16", (-2i16).to_ne_bytes(), FieldFormat::SignedInt, 0)
        .add_binary("float64", 2.5f64.to_ne_bytes(), FieldFormat::Float, 0)
        .add_binary("odd_uint", [1u8, 2, 3], FieldFormat::UnsignedInt, 0)
        .add_binary("uuid16", ACTIVITY, FieldFormat::Uuid, 0)
        .add_binary_sequence("blobs", seq, FieldFormat::Default, 0);
    let rc = eb.write(&sets.info, None, None);
    let w = out
        .event("Binaries", 4, 1)
        .field("blob", json!(hex_bytes(&blob)))
        .field("empty_blob", json!(""))
        .field("null_uint", Value::Null)
        .field("uint32", json!(123_456))
        .field("int16", json!(-2))
        .field("float64", float(2.5))
        .field("odd_uint", json!("010203"))
        .field("uuid16", json!(uuid_text(&ACTIVITY)))
        .field("blobs", json!(["0102", "", "ff"]));
    out.emit(rc, w);
}

/// Arrays: scalars, an array of structs holding an array, an empty one, nested structs.
fn arrays(eb: &mut EventBuilder, sets: &Sets, out: &mut Out<'_>) {
    let i32s = [i32::MIN, 0, i32::MAX];
    let f64s = [0.5f64, f64::INFINITY];
    eb.reset("Arrays", 0)
        .add_value_sequence("i32s", &i32s, FieldFormat::SignedInt, 0)
        .add_value_sequence("f64s", &f64s, FieldFormat::Float, 0)
        .add_value_sequence("hex8s", &[0u8, 0x7f, 0xff], FieldFormat::HexInt, 0)
        .add_value_sequence("empty", &[] as &[u64], FieldFormat::Default, 0);
    // Array of struct { u16 x; u8 ys[] }: metadata once, data per element.
    eb.raw_add_meta_vcount("points", FieldEncoding::Struct, FieldFormat::from_int(2), 0)
        .raw_add_meta_scalar("x", FieldEncoding::Value16, FieldFormat::Default, 0)
        .raw_add_meta_vcount("ys", FieldEncoding::Value8, FieldFormat::Default, 0)
        .raw_add_data_value(&2u16)
        .raw_add_data_value(&10u16)
        .raw_add_data_value(&2u16)
        .raw_add_data_slice(&[1u8, 2])
        .raw_add_data_value(&20u16)
        .raw_add_data_value(&0u16);
    eb.raw_add_meta_vcount(
        "no_points",
        FieldEncoding::Struct,
        FieldFormat::from_int(1),
        0,
    )
    .raw_add_meta_scalar("x", FieldEncoding::Value16, FieldFormat::Default, 0)
    .raw_add_data_value(&0u16);
    eb.add_struct("s", 2, 0x42)
        .add_str("name", "inner", FieldFormat::Default, 0)
        .add_struct("t", 1, 0)
        .add_value("v", 9u32, FieldFormat::Default, 7);
    let rc = eb.write(&sets.error, None, None);
    let mut w = out
        .event("Arrays", 2, 0x8000_0000_0000_0000)
        .field("i32s", json!(i32s))
        .field("f64s", json!([float(0.5), float(f64::INFINITY)]))
        .field("hex8s", json!(["0x0", "0x7f", "0xff"]))
        .field("empty", json!([]))
        .field(
            "points",
            json!([{"x": 10, "ys": [1, 2]}, {"x": 20, "ys": []}]),
        )
        .field("no_points", json!([]))
        .field("s", json!({"name": "inner", "t": {"v": 9}}));
    w.field_tags.insert("s".into(), json!(0x42));
    w.field_tags.insert("s.t.v".into(), json!(7));
    out.emit(rc, w);
}

/// Header options: opcode, id/version, event tag, activity ids, the grouped provider.
fn header(eb: &mut EventBuilder, sets: &Sets, out: &mut Out<'_>) {
    eb.reset("Started", 0x1234)
        .opcode(Opcode::ActivityStart)
        .id_version(65535, 255)
        .add_value("n", 1u8, FieldFormat::Default, 0);
    let rc = eb.write(&sets.info, Some(&ACTIVITY), Some(&RELATED));
    let mut w = out.event("Started", 4, 1).field("n", json!(1));
    w.opcode = 1;
    w.id = 65535;
    w.version = 255;
    w.tag = 0x1234;
    w.activity = Some(ACTIVITY);
    w.related_activity = Some(RELATED);
    out.emit(rc, w);

    eb.reset("Sent", 0)
        .opcode(Opcode::Send)
        .add_str("to", "peer", FieldFormat::Default, 0);
    let rc = eb.write(&sets.info, Some(&ACTIVITY), None);
    let mut w = out.event("Sent", 4, 1).field("to", json!("peer"));
    w.opcode = 9;
    w.activity = Some(ACTIVITY);
    out.emit(rc, w);

    eb.reset("Grouped;k=v", 0)
        .add_str("who", "group", FieldFormat::Default, 0);
    let rc = eb.write(&sets.grouped, None, None);
    let grouped = out.grouped.clone();
    let mut w = Written::new(&grouped, "Grouped", 3, 2)
        .group(GROUP)
        .field("who", json!("group"));
    w.event_attributes = vec![("k".into(), "v".into())];
    out.emit(rc, w);
}
