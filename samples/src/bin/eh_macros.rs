//! EventHeader events through the `eventheader` crate's compile-time macros
//! (`define_provider!`, `write_event!`): every field type the macros offer, structs,
//! arrays (of scalars, of structs through `raw_struct_slice`, empty ones), activity ids,
//! opcode, id/version, tags, several providers, levels and keywords, and a provider group.
//!
//! ```text
//! eh_macros [--count N] [START OPTIONS]
//! ```
//! START OPTIONS: `--timeout-secs S`, `--settle-ms MS`, `--start-file F` (see
//! `uevrec_samples::StartArgs`).
//!
//! Report lines (stdout, one JSON object each): `{"registered":TRACEPOINT}` per
//! tracepoint, then per event written the keys uevrec must print for it
//! (`uevrec_samples::eh::Written::to_json`, plus `"seq"`), then `{"done":..,"written":N}`.
//! Provider names are fixed (the macros want literals): `UevrecEhMacros`,
//! `UevrecEhMacros2` and `UevrecEhMacrosG` (group `uevrecgrp`).

use std::net::Ipv6Addr;
use std::time::{Duration, SystemTime};

use clap::Parser;
use eventheader as eh;
use eventheader_dynamic as ehd;
use serde_json::{Value, json};
use uevrec_samples::eh::{
    Written, boolean, float, hex_bytes, hex_int, latin1, time_t, utf16, utf32, uuid_text,
};
use uevrec_samples::{StartArgs, fail, report};

eh::define_provider!(MAIN, "UevrecEhMacros");
eh::define_provider!(SECOND, "UevrecEhMacros2");
eh::define_provider!(GROUPED, "UevrecEhMacrosG", group_name("uevrecgrp"));

const MAIN_NAME: &str = "UevrecEhMacros";
const SECOND_NAME: &str = "UevrecEhMacros2";
const GROUPED_NAME: &str = "UevrecEhMacrosG";
const GROUP: &str = "uevrecgrp";

#[derive(Parser)]
#[command(about = "Write EventHeader events with the eventheader crate's macros")]
struct Args {
    /// Write every event this many times.
    #[arg(long, default_value_t = 1)]
    count: u64,
    #[command(flatten)]
    start: StartArgs,
}

const ACTIVITY: [u8; 16] = [
    0x3f, 0x25, 0x04, 0xe0, 0x4f, 0x89, 0x11, 0xd3, 0x9a, 0x0c, 0x03, 0x05, 0xe8, 0x2c, 0x33, 0x01,
];
const RELATED: [u8; 16] = [
    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10,
];
const IPV6: [u8; 16] = [
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
];
const KW_HIGH: u64 = 0xf000_0000_0000_000f;

/// Every (provider, level, keyword, group) combination the events below use.
const TRACEPOINTS: &[(&str, u8, u64, Option<&str>)] = &[
    (MAIN_NAME, 4, 1, None),
    (MAIN_NAME, 5, 0x23, None),
    (MAIN_NAME, 1, KW_HIGH, None),
    (MAIN_NAME, 2, 1, None),
    (MAIN_NAME, 3, 1, None),
    (SECOND_NAME, 4, 0x10, None),
    (GROUPED_NAME, 4, 1, Some(GROUP)),
];

/// Enable-bit probes: `eventheader_dynamic` registrations of the same tracepoints.
///
/// `eh::provider_enabled!` (eventheader 0.5) never turned true here, even while the
/// tracepoint was recorded and `write_event!` on it succeeded: its tracepoint static is
/// apparently never registered. A second registration of the same tracepoint name gets
/// its own enable bit from the kernel, so these probes say when a recorder listens.
fn enable_probes() -> (Vec<ehd::Provider>, Vec<std::sync::Arc<ehd::EventSet>>) {
    let mut providers = Vec::new();
    let mut sets = Vec::new();
    for &(name, level, keyword, group) in TRACEPOINTS {
        let mut options = ehd::Provider::new_options();
        if let Some(g) = group {
            options.group_name(g);
        }
        let mut p = ehd::Provider::new(name, &options);
        sets.push(p.register_set(ehd::Level::from_int(level), keyword));
        providers.push(p);
    }
    (providers, sets)
}

struct Out {
    seq: u64,
    written: u64,
}

impl Out {
    /// `rc` is `write_event!`'s errno: report `w` when the kernel took the event.
    fn emit(&mut self, rc: u32, w: Written) {
        w.report_written(i64::from(rc), self.seq, "write_event!");
        self.written += 1;
        self.seq += 1;
    }
}

fn main() {
    let args = Args::parse();
    // SAFETY: an executable, not a shared object: the statics outlive the process's use.
    let rcs = unsafe { [MAIN.register(), SECOND.register(), GROUPED.register()] };
    if let Some(rc) = rcs.iter().find(|&&rc| rc != 0) {
        fail(format!(
            "registering the providers: errno {rc} (needs user_events and tracefs)"
        ));
    }
    let (_probe_providers, probes) = enable_probes();
    for &(name, level, keyword, group) in TRACEPOINTS {
        let tp = uevrec_samples::eh::tracepoint_name(name, level, keyword, group);
        report(&json!({"registered": tp}));
    }
    args.start
        .wait_for("eh_macros", || probes.iter().all(|p| p.enabled()));
    let mut out = Out { seq: 0, written: 0 };
    for _ in 0..args.count {
        scalars(&mut out);
        strings(&mut out);
        arrays(&mut out);
        structs(&mut out);
        header_options(&mut out);
        levels_and_providers(&mut out);
    }
    MAIN.unregister();
    SECOND.unregister();
    GROUPED.unregister();
    report(&json!({"done": "eh_macros", "written": out.written}));
}

/// One field of every scalar type.
fn scalars(out: &mut Out) {
    let (u8v, i8v, u16v, i16v) = (255u8, -128i8, 65535u16, -32768i16);
    let (u32v, i32v, u64v, i64v) = (4_294_967_295u32, -2_147_483_648i32, u64::MAX, i64::MIN);
    let (usizev, isizev) = (usize::MAX, -5isize);
    let (hx8, hx16, hx32, hx64) = (0x1fu8, 0xbeefu16, 0xdead_beefu32, 0x0123_4567_89ab_cdefu64);
    let (ihx8, ihx32, hres) = (-1i8, -2i32, -2_147_024_891i32);
    let ptr = 0x7fff_1234_5678usize;
    let (errno, pid, tid) = (2i32, 4242u32, 4243u32);
    let (t32, t64, t64_far) = (1_711_586_712i32, -86_400i64, i64::MAX);
    let sys_time = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 999_999_999);
    let (b_true, b_false, b32_two) = (true, false, 2i32);
    let (f32v, f32_nan, f64v, f64_inf, f64_ninf) =
        (1.5f32, f32::NAN, 0.1f64, f64::INFINITY, f64::NEG_INFINITY);
    let (c8, c16) = (0xe9u8, 0x263au16);
    let guid = eh::Guid::from_bytes_be(&ACTIVITY);
    let ipv4 = [192u8, 168, 1, 20];
    let port = 443u16.to_be(); // the Port format is network byte order
    let bin = [0u8, 1, 0x7f, 0x80, 0xff];
    let rc = eh::write_event!(
        MAIN,
        "Scalars",
        level(Informational),
        keyword(1),
        u8("u8", &u8v),
        i8("i8", &i8v),
        u16("u16", &u16v),
        i16("i16", &i16v),
        u32("u32", &u32v),
        i32("i32", &i32v),
        u64("u64", &u64v),
        i64("i64", &i64v),
        usize("usize", &usizev),
        isize("isize", &isizev),
        u8_hex("u8_hex", &hx8),
        u16_hex("u16_hex", &hx16),
        u32_hex("u32_hex", &hx32),
        u64_hex("u64_hex", &hx64),
        i8_hex("i8_hex", &ihx8),
        i32_hex("i32_hex", &ihx32),
        hresult("hresult", &hres),
        pointer("pointer", &ptr),
        errno("errno", &errno),
        pid("pid", &pid),
        tid("tid", &tid),
        time32("time32", &t32),
        time64("time64", &t64),
        time64("time64_far", &t64_far),
        systemtime("systemtime", &sys_time),
        bool8("bool8_true", &b_true),
        bool8("bool8_false", &b_false),
        bool32("bool32_two", &b32_two),
        f32("f32", &f32v),
        f32("f32_nan", &f32_nan),
        f64("f64", &f64v),
        f64("f64_inf", &f64_inf),
        f64("f64_ninf", &f64_ninf),
        char8_cp1252("char8", &c8),
        char16("char16", &c16),
        guid("guid", &guid),
        ipv4("ipv4", &ipv4),
        ipv6("ipv6", &IPV6),
        port("port", &port),
        binary("binary", &bin),
        u32("tagged", &u32v, tag(0x0abc)),
    );
    let mut w = Written::new(MAIN_NAME, "Scalars", 4, 1)
        .field("u8", json!(u8v))
        .field("i8", json!(i8v))
        .field("u16", json!(u16v))
        .field("i16", json!(i16v))
        .field("u32", json!(u32v))
        .field("i32", json!(i32v))
        .field("u64", json!(u64v))
        .field("i64", json!(i64v))
        .field("usize", json!(usizev))
        .field("isize", json!(isizev))
        .field("u8_hex", hex_int(hx8.into()))
        .field("u16_hex", hex_int(hx16.into()))
        .field("u32_hex", hex_int(hx32.into()))
        .field("u64_hex", hex_int(hx64))
        .field("i8_hex", hex_int((ihx8 as u8).into()))
        .field("i32_hex", hex_int((ihx32 as u32).into()))
        .field("hresult", hex_int((hres as u32).into()))
        .field("pointer", hex_int(ptr as u64))
        .field("errno", json!(errno))
        .field("pid", json!(pid))
        .field("tid", json!(tid))
        .field("time32", time_t(t32.into()))
        .field("time64", time_t(t64))
        .field("time64_far", time_t(t64_far))
        .field("systemtime", time_t(1_700_000_000))
        .field("bool8_true", json!(true))
        .field("bool8_false", json!(false))
        .field("bool32_two", boolean(b32_two.into()))
        .field("f32", float(f32v.into()))
        .field("f32_nan", float(f32_nan.into()))
        .field("f64", float(f64v))
        .field("f64_inf", float(f64_inf))
        .field("f64_ninf", float(f64_ninf))
        .field("char8", json!(latin1(&[c8])))
        .field("char16", json!(utf16(&[c16])))
        .field("guid", json!(uuid_text(&ACTIVITY)))
        .field("ipv4", json!("192.168.1.20"))
        .field("ipv6", json!(Ipv6Addr::from(IPV6).to_string()))
        .field("port", json!(443))
        .field("binary", json!(hex_bytes(&bin)))
        .field("tagged", json!(u32v));
    w.field_tags.insert("tagged".into(), json!(0x0abc));
    out.emit(rc, w);
}

/// Strings: zero-terminated and counted, 8/16/32-bit code units, Latin-1, JSON and XML
/// formats, special and non-ASCII characters, invalid sequences, empty strings.
fn strings(out: &mut Out) {
    let text = "quote \" backslash \\ newline \n tab \t ctl \u{1} é 日本語 🦀";
    let t16: Vec<u16> = text.encode_utf16().collect();
    let t32: Vec<u32> = text.chars().map(u32::from).collect();
    let bad8: &[u8] = &[b'A', 0xff, b'B'];
    let bad16: &[u16] = &[0x41, 0xd800, 0x42];
    let bad32: &[u32] = &[0x41, 0x11_0000, 0x42];
    let cp1252: &[u8] = &[b'A', 0xe9, 0xff];
    let json_text = r#"{"a":[1,2,{"b":null}],"s":"x\"y"}"#;
    let xml_text = r#"<a x="1">t &amp; u</a>"#;
    let j16: Vec<u16> = json_text.encode_utf16().collect();
    let x32: Vec<u32> = xml_text.chars().map(u32::from).collect();
    let with_nul = "before\0after";
    let rc = eh::write_event!(
        MAIN,
        "Strings",
        level(Informational),
        keyword(1),
        cstr8("cstr8", text),
        cstr16("cstr16", &t16),
        cstr32("cstr32", &t32),
        str8("str8", text),
        str16("str16", &t16),
        str32("str32", &t32),
        cstr8("cstr8_empty", ""),
        str8("str8_empty", ""),
        str16("str16_empty", &[] as &[u16]),
        cstr8("cstr8_cut", with_nul),
        str8("str8_nul", with_nul),
        str8("str8_invalid", bad8),
        str16("str16_invalid", bad16),
        str32("str32_invalid", bad32),
        cstr8_cp1252("cstr8_cp1252", cp1252),
        str8_cp1252("str8_cp1252", cp1252),
        str8_json("str8_json", json_text),
        cstr8_json("cstr8_json", json_text),
        str16_json("str16_json", &j16),
        str8_xml("str8_xml", xml_text),
        cstr32_xml("cstr32_xml", &x32),
    );
    let w = Written::new(MAIN_NAME, "Strings", 4, 1)
        .field("cstr8", json!(text))
        .field("cstr16", json!(text))
        .field("cstr32", json!(text))
        .field("str8", json!(text))
        .field("str16", json!(text))
        .field("str32", json!(text))
        .field("cstr8_empty", json!(""))
        .field("str8_empty", json!(""))
        .field("str16_empty", json!(""))
        .field("cstr8_cut", json!("before"))
        .field("str8_nul", json!(with_nul))
        .field("str8_invalid", json!(String::from_utf8_lossy(bad8)))
        .field("str16_invalid", json!(utf16(bad16)))
        .field("str32_invalid", json!(utf32(bad32)))
        .field("cstr8_cp1252", json!(latin1(cp1252)))
        .field("str8_cp1252", json!(latin1(cp1252)))
        .field("str8_json", json!(json_text))
        .field("cstr8_json", json!(json_text))
        .field("str16_json", json!(json_text))
        .field("str8_xml", json!(xml_text))
        .field("cstr32_xml", json!(xml_text));
    out.emit(rc, w);
}

/// Variable-length arrays of every scalar kind the macros offer, empty ones, and an
/// array of structs (`raw_struct_slice`, the macros' only way to express one).
fn arrays(out: &mut Out) {
    let u8s = [0u8, 1, 255];
    let i16s = [-32768i16, 0, 32767];
    let u32s = [0u32, 1, u32::MAX];
    let i64s = [i64::MIN, -1, i64::MAX];
    let u64hex = [0u64, 0xff, u64::MAX];
    let f32s = [1.5f32, -0.25, 0.0];
    let f64s = [0.1f64, -1e300, 2.5];
    let bools = [true, false, true];
    let errnos = [1i32, 13];
    let guids = [
        eh::Guid::from_bytes_be(&ACTIVITY),
        eh::Guid::from_bytes_be(&RELATED),
    ];
    let ipv4s = [[127u8, 0, 0, 1], [10, 1, 2, 3]];
    let ports = [80u16.to_be(), 65535u16.to_be()];
    let empty_u32: [u32; 0] = [];
    let empty_guid: [eh::Guid; 0] = [];
    // Array of struct {u32 id; str8 name}: u16 count, then each element's fields.
    let mut structs = Vec::new();
    structs.extend_from_slice(&2u16.to_ne_bytes());
    for (id, name) in [(7u32, "seven"), (8, "eight é")] {
        structs.extend_from_slice(&id.to_ne_bytes());
        structs.extend_from_slice(&(name.len() as u16).to_ne_bytes());
        structs.extend_from_slice(name.as_bytes());
    }
    let no_structs = 0u16.to_ne_bytes();
    let rc = eh::write_event!(
        MAIN,
        "Arrays",
        level(Verbose),
        keyword(0x23),
        u8_slice("u8s", &u8s),
        i16_slice("i16s", &i16s),
        u32_slice("u32s", &u32s),
        i64_slice("i64s", &i64s),
        u64_hex_slice("u64hex", &u64hex),
        f32_slice("f32s", &f32s),
        f64_slice("f64s", &f64s),
        bool8_slice("bools", &bools),
        errno_slice("errnos", &errnos),
        guid_slice("guids", &guids),
        ipv4_slice("ipv4s", &ipv4s),
        port_slice("ports", &ports),
        u32_slice("empty_u32", &empty_u32),
        guid_slice("empty_guid", &empty_guid),
        raw_struct_slice("structs", 2),
        raw_meta("id", Value32),
        raw_meta("name", StringLength16Char8),
        raw_data(&structs),
        raw_struct_slice("no_structs", 2),
        raw_meta("id", Value32),
        raw_meta("name", StringLength16Char8),
        raw_data(&no_structs),
    );
    let w = Written::new(MAIN_NAME, "Arrays", 5, 0x23)
        .field("u8s", json!(u8s))
        .field("i16s", json!(i16s))
        .field("u32s", json!(u32s))
        .field("i64s", json!(i64s))
        .field(
            "u64hex",
            Value::Array(u64hex.iter().map(|&v| hex_int(v)).collect()),
        )
        .field(
            "f32s",
            Value::Array(f32s.iter().map(|&v| float(v.into())).collect()),
        )
        .field(
            "f64s",
            Value::Array(f64s.iter().map(|&v| float(v)).collect()),
        )
        .field("bools", json!(bools))
        .field("errnos", json!(errnos))
        .field("guids", json!([uuid_text(&ACTIVITY), uuid_text(&RELATED)]))
        .field("ipv4s", json!(["127.0.0.1", "10.1.2.3"]))
        .field("ports", json!([80, 65535]))
        .field("empty_u32", json!([]))
        .field("empty_guid", json!([]))
        .field(
            "structs",
            json!([{"id": 7, "name": "seven"}, {"id": 8, "name": "eight é"}]),
        )
        .field("no_structs", json!([]));
    out.emit(rc, w);
}

/// Nested structs (three deep), a tagged struct, fields after a struct.
fn structs(out: &mut Out) {
    let (a, b, c) = (1u32, -2i64, 3.25f64);
    let rc = eh::write_event!(
        MAIN,
        "Structs",
        level(Informational),
        keyword(1),
        u32("before", &a),
        struct("outer", {
            u32("a", &a),
            str8("s", "outer string"),
            struct("inner", tag(0x1234), {
                i64("b", &b),
                struct("innermost", {
                    f64("c", &c),
                    cstr8("z", "deep"),
                }),
                u32("after_innermost", &a),
            }),
            bool8("flag", &true),
        }),
        str8("after", "end"),
    );
    let mut w = Written::new(MAIN_NAME, "Structs", 4, 1)
        .field("before", json!(a))
        .field(
            "outer",
            json!({
                "a": a,
                "s": "outer string",
                "inner": {"b": b, "innermost": {"c": c, "z": "deep"}, "after_innermost": a},
                "flag": true,
            }),
        )
        .field("after", json!("end"));
    w.field_tags.insert("outer.inner".into(), json!(0x1234));
    out.emit(rc, w);
}

/// Opcode, activity ids, id/version, event tag, an event name with attributes.
fn header_options(out: &mut Out) {
    let n = 1u32;
    let rc = eh::write_event!(
        MAIN,
        "ActivityStart",
        level(CriticalError),
        keyword(KW_HIGH),
        opcode(ActivityStart),
        activity_id(&ACTIVITY),
        related_id(&RELATED),
        id_version(1234, 5),
        tag(0x77),
        u32("n", &n),
    );
    let mut w = Written::new(MAIN_NAME, "ActivityStart", 1, KW_HIGH).field("n", json!(n));
    w.opcode = 1;
    w.activity = Some(ACTIVITY);
    w.related_activity = Some(RELATED);
    w.id = 1234;
    w.version = 5;
    w.tag = 0x77;
    out.emit(rc, w);

    let rc = eh::write_event!(
        MAIN,
        "ActivityStop",
        level(CriticalError),
        keyword(KW_HIGH),
        opcode(ActivityStop),
        activity_id(&ACTIVITY),
    );
    let mut w = Written::new(MAIN_NAME, "ActivityStop", 1, KW_HIGH);
    w.opcode = 2;
    w.activity = Some(ACTIVITY);
    out.emit(rc, w);

    let rc = eh::write_event!(
        MAIN,
        "Attributed;color=blue;note=a;;b",
        level(Error),
        keyword(1),
        opcode(Receive),
        u32("n", &n),
    );
    let mut w = Written::new(MAIN_NAME, "Attributed", 2, 1).field("n", json!(n));
    w.event_attributes = vec![
        ("color".into(), "blue".into()),
        ("note".into(), "a;b".into()),
    ];
    w.opcode = 240;
    out.emit(rc, w);
}

/// Other levels, keywords, a second provider and the grouped provider.
fn levels_and_providers(out: &mut Out) {
    let n = 3u16;
    let rc = eh::write_event!(MAIN, "Warning", level(Warning), keyword(1), u16("n", &n));
    out.emit(
        rc,
        Written::new(MAIN_NAME, "Warning", 3, 1).field("n", json!(n)),
    );
    let rc = eh::write_event!(
        SECOND,
        "FromSecond",
        level(Informational),
        keyword(0x10),
        str8("who", "second provider"),
    );
    out.emit(
        rc,
        Written::new(SECOND_NAME, "FromSecond", 4, 0x10).field("who", json!("second provider")),
    );
    let rc = eh::write_event!(
        GROUPED,
        "FromGroup",
        level(Informational),
        keyword(1),
        str8("who", "grouped provider"),
    );
    out.emit(
        rc,
        Written::new(GROUPED_NAME, "FromGroup", 4, 1)
            .group(GROUP)
            .field("who", json!("grouped provider")),
    );
    // No fields at all.
    let rc = eh::write_event!(SECOND, "Empty", level(Informational), keyword(0x10));
    out.emit(rc, Written::new(SECOND_NAME, "Empty", 4, 0x10));
}
