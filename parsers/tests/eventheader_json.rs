//! EventHeader events built by hand (both byte orders, every encoding, arrays, nested
//! structs, struct arrays, empty arrays, bad metadata, truncation at every byte, duplicate
//! names, name attributes, activity ids) through the enumerator and the JSON line
//! writer; property tests on arbitrary bytes and on generated valid events.

use std::collections::HashSet;
use std::fmt;

use proptest::prelude::*;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};
use uevrec_parsers::eventheader::tracepoint_format;
use uevrec_parsers::eventheader::{Enumerator, Item, parse_event};
use uevrec_parsers::{LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp};

/// Builds an event: header, optional activity id, metadata, payload.
#[derive(Clone, Debug)]
struct Ev {
    big: bool,
    level: u8,
    opcode: u8,
    id: u16,
    version: u8,
    tag: u16,
    activity: Option<Vec<u8>>,
    meta: Option<Vec<u8>>,
    payload: Vec<u8>,
}

impl Ev {
    fn new(name: &str, big: bool) -> Self {
        let mut meta = name.as_bytes().to_vec();
        meta.push(0);
        Ev {
            big,
            level: 4,
            opcode: 0,
            id: 0,
            version: 0,
            tag: 0,
            activity: None,
            meta: Some(meta),
            payload: Vec::new(),
        }
    }
    fn u16(&self, v: u16) -> [u8; 2] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    /// A field record: name, encoding (with flags), optional format, tag, array length.
    fn field(
        mut self,
        name: &str,
        enc: u8,
        format: Option<u8>,
        tag: u16,
        len: Option<u16>,
    ) -> Self {
        let m = self.meta.as_mut().unwrap();
        m.extend_from_slice(name.as_bytes());
        m.push(0);
        let chain = format.is_some() || tag != 0;
        m.push(enc | if chain { 0x80 } else { 0 } | if len.is_some() { 0x20 } else { 0 });
        if chain {
            m.push(format.unwrap_or(0) | if tag != 0 { 0x80 } else { 0 });
            if tag != 0 {
                let t = self.u16(tag);
                self.meta.as_mut().unwrap().extend_from_slice(&t);
            }
        }
        if let Some(n) = len {
            let n = self.u16(n);
            self.meta.as_mut().unwrap().extend_from_slice(&n);
        }
        self
    }
    fn data(mut self, bytes: &[u8]) -> Self {
        self.payload.extend_from_slice(bytes);
        self
    }
    fn d16(self, v: u16) -> Self {
        let b = self.u16(v);
        self.data(&b)
    }
    fn d32(self, v: u32) -> Self {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.data(&b)
    }
    fn d64(self, v: u64) -> Self {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.data(&b)
    }
    fn bytes(&self) -> Vec<u8> {
        let mut d = vec![if self.big { 0x01 } else { 0x03 }, self.version];
        d.extend_from_slice(&self.u16(self.id));
        d.extend_from_slice(&self.u16(self.tag));
        d.push(self.opcode);
        d.push(self.level);
        let mut blocks: Vec<(u16, &[u8])> = Vec::new();
        if let Some(a) = &self.activity {
            blocks.push((2, a));
        }
        if let Some(m) = &self.meta {
            blocks.push((1, m));
        }
        if !blocks.is_empty() {
            d[0] |= 0x04;
        }
        let n = blocks.len();
        for (i, (kind, block)) in blocks.into_iter().enumerate() {
            d.extend_from_slice(&self.u16(block.len() as u16));
            d.extend_from_slice(&self.u16(kind | if i + 1 < n { 0x8000 } else { 0 }));
            d.extend_from_slice(block);
        }
        d.extend_from_slice(&self.payload);
        d
    }
}

/// The line for event data `data` of tracepoint `tp`, checked: both write paths agree,
/// one line, valid JSON, no duplicate keys.
fn line_bytes(tp: &str, data: &[u8]) -> Vec<u8> {
    let mut raw = vec![0u8; 8];
    raw.extend_from_slice(data);
    let f = tracepoint_format(tp, 1);
    let mut w = LineWriter::new(LineOptions::default());
    let p = PreparedFormat::new(&f, "user_events", tp, None);
    let mut a = Vec::new();
    let stamp = RecordStamp {
        time_unix_ns: Some(0),
        cpu: 1,
        pid: 2,
        tid: 3,
    };
    w.write_prepared(&mut a, &stamp, &p, &raw);
    let mut b = Vec::new();
    let meta = RecordMeta {
        time_unix_ns: Some(0),
        cpu: 1,
        pid: 2,
        tid: 3,
        system: "user_events",
        event: tp,
        format_id: None,
    };
    w.write_record(&mut b, &meta, &f, &raw);
    assert_eq!(a, b, "write_prepared and write_record differ");
    assert!(a.ends_with(b"\n"));
    assert_eq!(a.iter().filter(|&&c| c == b'\n').count(), 1);
    let text = std::str::from_utf8(&a).expect("UTF-8");
    serde_json::from_str::<NoDup>(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    a
}

fn line(tp: &str, data: &[u8]) -> Value {
    serde_json::from_slice(&line_bytes(tp, data)).unwrap()
}

/// Parses any JSON value, failing on a duplicate key in any object.
struct NoDup;

impl<'de> Deserialize<'de> for NoDup {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NoDupVisitor)
    }
}

struct NoDupVisitor;

impl<'de> Visitor<'de> for NoDupVisitor {
    type Value = NoDup;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<NoDup, E> {
        Ok(NoDup)
    }
    fn visit_i64<E>(self, _: i64) -> Result<NoDup, E> {
        Ok(NoDup)
    }
    fn visit_u64<E>(self, _: u64) -> Result<NoDup, E> {
        Ok(NoDup)
    }
    fn visit_f64<E>(self, _: f64) -> Result<NoDup, E> {
        Ok(NoDup)
    }
    fn visit_str<E>(self, _: &str) -> Result<NoDup, E> {
        Ok(NoDup)
    }
    fn visit_unit<E>(self) -> Result<NoDup, E> {
        Ok(NoDup)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<NoDup, A::Error> {
        while a.next_element::<NoDup>()?.is_some() {}
        Ok(NoDup)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<NoDup, A::Error> {
        let mut keys = HashSet::new();
        while let Some(k) = a.next_key::<String>()? {
            if !keys.insert(k.clone()) {
                return Err(de::Error::custom(format!("duplicate key {k:?}")));
            }
            a.next_value::<NoDup>()?;
        }
        Ok(NoDup)
    }
}

const TP: &str = "MyProvider_L4K1f";

#[test]
fn line_keys_and_header() {
    for big in [false, true] {
        let mut ev = Ev::new("MyEvent;k=v;;w;x=1", big)
            .field("a", 2, None, 0, None)
            .data(&[7]);
        ev.opcode = 1;
        ev.id = 5;
        ev.version = 2;
        ev.tag = 9;
        let mut act = (0u8..32).collect::<Vec<_>>();
        ev.activity = Some(act.clone());
        let l = line("MyProvider_L4K1fGgrp", &ev.bytes());
        assert_eq!(l["provider"], "MyProvider");
        assert_eq!(l["name"], "MyEvent");
        assert_eq!(l["event_attributes"], json!({"k": "v;w", "x": "1"}));
        assert_eq!(
            (l["level"].clone(), l["keyword"].clone()),
            (json!(4), json!("0x1f"))
        );
        assert_eq!(l["group"], "grp");
        assert_eq!(
            (
                l["opcode"].clone(),
                l["id"].clone(),
                l["version"].clone(),
                l["tag"].clone()
            ),
            (json!(1), json!(5), json!(2), json!(9))
        );
        assert_eq!(l["activity"], "00010203-0405-0607-0809-0a0b0c0d0e0f");
        assert_eq!(
            l["related_activity"],
            "10111213-1415-1617-1819-1a1b1c1d1e1f"
        );
        assert_eq!(l["fields"], json!({"a": 7}));
        assert!(l.get("errors").is_none());
        act.truncate(16);
        ev.activity = Some(act);
        let l = line(TP, &ev.bytes());
        assert!(l.get("related_activity").is_none() && l.get("group").is_none());
        // Key order per the spec.
        let text = String::from_utf8(line_bytes(TP, &ev.bytes())).unwrap();
        let order = [
            "\"time\"",
            "\"system\"",
            "\"event\"",
            "\"cpu\"",
            "\"pid\"",
            "\"tid\"",
            "\"provider\"",
            "\"name\"",
            "\"event_attributes\"",
            "\"level\"",
            "\"keyword\"",
            "\"opcode\"",
            "\"id\"",
            "\"version\"",
            "\"tag\"",
            "\"activity\"",
            "\"fields\"",
        ];
        let pos: Vec<_> = order.iter().map(|k| text.find(k).unwrap()).collect();
        assert!(pos.windows(2).all(|w| w[0] < w[1]), "{text}");
    }
}

#[test]
fn every_value_encoding_and_format_both_orders() {
    for big in [false, true] {
        let ev = Ev::new("E", big)
            .field("u8", 2, None, 0, None)
            .data(&[200])
            .field("i8", 2, Some(2), 0, None)
            .data(&[200])
            .field("x16", 3, Some(3), 0, None)
            .d16(0x1f)
            .field("port", 3, Some(16), 0, None)
            .data(&[0x1f, 0x90])
            .field("i32", 4, Some(2), 0, None)
            .d32(-5i32 as u32)
            .field("errno", 4, Some(4), 0, None)
            .d32(2)
            .field("pid", 4, Some(5), 0, None)
            .d32(42)
            .field("t32", 4, Some(6), 0, None)
            .d32(1_711_586_712)
            .field("b0", 4, Some(7), 0, None)
            .d32(0)
            .field("b1", 2, Some(7), 0, None)
            .data(&[1])
            .field("b2", 3, Some(7), 0, None)
            .d16(2)
            .field("f32", 4, Some(8), 0, None)
            .d32(1.5f32.to_bits())
            .field("nan", 4, Some(8), 0, None)
            .d32(f32::NAN.to_bits())
            .field("ip4", 4, Some(17), 0, None)
            .data(&[10, 0, 0, 1])
            .field("hb", 4, Some(9), 0, None)
            .data(&[1, 2, 3, 4])
            .field("c8", 2, Some(10), 0, None)
            .data(b"A")
            .field("c16", 3, Some(11), 0, None)
            .d16(0xe9)
            .field("u64", 5, None, 0, None)
            .d64(u64::MAX)
            .field("i64", 5, Some(2), 0, None)
            .d64(-1i64 as u64)
            .field("x64", 5, Some(3), 0, None)
            .d64(0xdead_beef)
            .field("t64", 5, Some(6), 0, None)
            .d64(0)
            .field("tbig", 5, Some(6), 0, None)
            .d64(i64::MAX as u64)
            .field("f64", 5, Some(8), 0, None)
            .d64(0.1f64.to_bits())
            .field("inf", 5, Some(8), 0, None)
            .d64(f64::NEG_INFINITY.to_bits())
            .field("v128", 6, None, 0, None)
            .data(&[0xab; 16])
            .field("uuid", 6, Some(15), 0, None)
            .data(&(0u8..16).collect::<Vec<_>>())
            .field("ip6", 6, Some(17), 0, None)
            .data(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])
            .field("unk", 2, Some(99), 0, None)
            .data(&[3]);
        let l = line(TP, &ev.bytes());
        assert_eq!(
            l["fields"],
            json!({
                "u8": 200, "i8": -56, "x16": "0x1f", "port": 8080, "i32": -5, "errno": 2,
                "pid": 42, "t32": "2024-03-28T00:45:12Z", "b0": false, "b1": true, "b2": 2,
                "f32": 1.5, "nan": "NaN", "ip4": "10.0.0.1", "hb": "01020304", "c8": "A",
                "c16": "é", "u64": u64::MAX, "i64": -1, "x64": "0xdeadbeef",
                "t64": "1970-01-01T00:00:00Z", "tbig": i64::MAX, "f64": 0.1, "inf": "-Infinity",
                "v128": "abababababababababababababababab",
                "uuid": "00010203-0405-0607-0809-0a0b0c0d0e0f", "ip6": "2001:db8::1", "unk": 3
            }),
            "big {big}"
        );
    }
}

#[test]
fn strings_and_binary_both_orders() {
    for big in [false, true] {
        let u16s =
            |s: &str, ev: &Ev| -> Vec<u8> { s.encode_utf16().flat_map(|u| ev.u16(u)).collect() };
        let base = Ev::new("E", big);
        let w = u16s("hé😀", &base);
        let w32: Vec<u8> = "h😀"
            .chars()
            .flat_map(|c| {
                if big {
                    (c as u32).to_be_bytes()
                } else {
                    (c as u32).to_le_bytes()
                }
            })
            .collect();
        let ev = base
            .clone()
            .field("z8", 7, None, 0, None)
            .data(b"a\"b\n\0")
            .field("z16", 8, None, 0, None)
            .data(&w)
            .data(&[0, 0])
            .field("z32", 9, None, 0, None)
            .data(&w32)
            .data(&[0; 4])
            .field("l8", 10, None, 0, None)
            .d16(3)
            .data(b"x\xffy")
            .field("l16", 11, None, 0, None)
            .d16(4)
            .data(&w)
            .field("l32", 12, None, 0, None)
            .d16(2)
            .data(&w32)
            .field("lat", 10, Some(10), 0, None)
            .d16(2)
            .data(b"\xe9\x01")
            .field("bom", 10, Some(12), 0, None)
            .d16(5)
            .data(b"\xef\xbb\xbfok")
            .field("bom16", 10, Some(12), 0, None)
            .d16(4)
            .data(&[0xfe, 0xff, 0, b'Z'])
            .field("json", 10, Some(14), 0, None)
            .d16(2)
            .data(b"{}")
            .field("zhex", 7, Some(9), 0, None)
            .data(b"\x01\x02\0")
            .field("bin", 13, None, 0, None)
            .d16(3)
            .data(&[1, 2, 255])
            .field("bin0", 13, Some(5), 0, None)
            .d16(0)
            .field("bin4", 13, Some(5), 0, None)
            .d16(4)
            .data(&42u32.to_le_bytes().map(|b| b))
            .field("s2", 10, Some(16), 0, None)
            .d16(2)
            .data(&[0x1f, 0x90])
            .field("bin3", 13, Some(5), 0, None)
            .d16(3)
            .data(&[1, 2, 3])
            .field("s3", 10, Some(1), 0, None)
            .d16(3)
            .data(b"abc")
            .field("tail", 7, None, 0, None)
            .data(b"no terminator");
        let mut l = line(TP, &ev.bytes());
        // bin4 was written little-endian: its value depends on the order.
        let bin4 = l["fields"]["bin4"].take();
        assert_eq!(bin4, json!(if big { 42u32.swap_bytes() } else { 42 }));
        assert_eq!(
            l["fields"],
            json!({
                "z8": "a\"b\n", "z16": "hé😀", "z32": "h😀", "l8": "x\u{FFFD}y", "l16": "hé😀",
                "l32": "h😀", "lat": "é\u{1}", "bom": "ok", "bom16": "Z", "json": "{}",
                "zhex": "0102", "bin": "0102ff", "bin0": null, "bin4": null, "s2": 8080,
                "bin3": "010203", "s3": "abc", "tail": "no terminator"
            }),
            "big {big}"
        );
    }
}

#[test]
fn arrays_structs_and_struct_arrays() {
    for big in [false, true] {
        let ev = Ev::new("E", big)
            .field("c", 3, None, 0, Some(2))
            .d16(1)
            .d16(2)
            .field("v", 0x40 | 4, Some(2), 0, None)
            .d16(3)
            .d32(1)
            .d32(-1i32 as u32)
            .d32(3)
            .field("e", 0x40 | 2, None, 0, None)
            .d16(0)
            .field("strs", 0x40 | 7, None, 0, None)
            .d16(2)
            .data(b"a\0bc\0")
            .field("ls", 10, None, 0, Some(2))
            .d16(1)
            .data(b"x")
            .d16(0)
            .field("u", 6, Some(15), 0, Some(1))
            .data(&[0; 16])
            .field("s", 1, Some(2), 0, None)
            .field("x", 2, None, 0, None)
            .data(&[1])
            .field("in", 1, Some(1), 0, None)
            .field("y", 2, None, 0, None)
            .data(&[2])
            .field("sa", 0x40 | 1, Some(2), 0, None)
            .d16(2)
            .field("p", 2, None, 0, None)
            .field("q", 0x40 | 2, None, 0, None)
            .data(&[1])
            .d16(1)
            .data(&[9])
            .data(&[2])
            .d16(0)
            .field("empty", 0x40 | 1, Some(2), 0, None)
            .d16(0)
            .field("skipped", 2, None, 0, None)
            .field("inner", 1, Some(1), 0, None)
            .field("deep", 3, None, 0, None)
            .field("cs", 1, Some(1), 0, Some(2))
            .field("z", 2, None, 0, None)
            .data(&[5, 6])
            .field("last", 2, None, 0, None)
            .data(&[7]);
        let l = line(TP, &ev.bytes());
        assert_eq!(
            l["fields"],
            json!({
                "c": [1, 2], "v": [1, -1, 3], "e": [], "strs": ["a", "bc"], "ls": ["x", ""],
                "u": ["00000000-0000-0000-0000-000000000000"],
                "s": {"x": 1, "in": {"y": 2}},
                "sa": [{"p": 1, "q": [9]}, {"p": 2, "q": []}],
                "empty": [], "cs": [{"z": 5}, {"z": 6}], "last": 7
            }),
            "big {big}"
        );
        assert!(l.get("errors").is_none(), "{l}");
    }
}

#[test]
fn enumerator_items() {
    let ev = Ev::new("E", false)
        .field("s", 1, Some(1), 0, None)
        .field("a", 0x40 | 2, None, 0, None)
        .d16(2)
        .data(&[1, 2]);
    let data = ev.bytes();
    let parts = parse_event(&data).unwrap();
    let e = Enumerator::new(
        parts.metadata.unwrap(),
        parts.payload,
        uevrec_parsers::Endian::Little,
    )
    .unwrap();
    let kinds: Vec<String> = e
        .map(|i| match i {
            Item::StructBegin { field, .. } => format!("{{{}", String::from_utf8_lossy(field.name)),
            Item::StructEnd { .. } => "}".into(),
            Item::ArrayBegin { field, count } => {
                format!("[{}{count}", String::from_utf8_lossy(field.name))
            }
            Item::ArrayEnd { .. } => "]".into(),
            Item::Value { bytes, element, .. } => format!("{bytes:?}{element}"),
        })
        .collect();
    assert_eq!(kinds, ["{s", "[a2", "[1]true", "[2]true", "]", "}"]);
}

#[test]
fn duplicate_names_and_tags() {
    let ev = Ev::new("E", false)
        .field("a", 2, None, 0, None)
        .data(&[1])
        .field("a", 2, None, 0, None)
        .data(&[2])
        .field("a#2", 2, None, 0, None)
        .data(&[3])
        .field("a", 2, None, 5, None)
        .data(&[4])
        .field("s", 1, Some(2), 7, None)
        .field("b", 2, None, 0, None)
        .data(&[5])
        .field("b", 2, None, 6, None)
        .data(&[6])
        .field("\u{1}", 2, None, 0, None)
        .data(&[7]);
    let text = String::from_utf8(line_bytes(TP, &ev.bytes())).unwrap();
    let l: Value = serde_json::from_str(&text).unwrap();
    assert!(
        text.contains(
            r#""fields":{"a":1,"a#2":2,"a#2#2":3,"a#3":4,"s":{"b":5,"b#2":6},"\u0001":7}"#
        ),
        "{text}"
    );
    assert_eq!(l["field_tags"], json!({"a#3": 5, "s": 7, "s.b#2": 6}));
}

#[test]
fn errors() {
    // No metadata.
    let mut ev = Ev::new("E", false).data(&[1, 2]);
    ev.meta = None;
    let l = line(TP, &ev.bytes());
    assert_eq!(l["fields"], json!({}));
    assert_eq!(
        l["errors"],
        json!({"payload": "no metadata extension block"})
    );
    assert_eq!(l["undecoded"], "0102");
    // Unsupported flags.
    let mut d = Ev::new("E", false).bytes();
    d[0] |= 0x10;
    let l = line(TP, &d);
    assert!(l["errors"]["header"].as_str().unwrap().contains("flags"));
    assert_eq!(l["undecoded"].as_str().unwrap().len(), 2 * d.len());
    // Level mismatch only.
    let mut ev = Ev::new("E", false).field("a", 2, None, 0, None).data(&[1]);
    ev.level = 5;
    let l = line(TP, &ev.bytes());
    assert_eq!(l["level"], 5);
    assert_eq!(
        l["errors"],
        json!({"level": "header level 5 differs from the tracepoint name's level 4"})
    );
    assert!(l.get("undecoded").is_none());
    // Payload ends early inside a struct.
    let ev = Ev::new("E", false)
        .field("PartB", 1, Some(2), 0, None)
        .field("n", 2, None, 0, None)
        .field("body", 10, None, 0, None)
        .data(&[1])
        .d16(5)
        .data(b"ab");
    let l = line(TP, &ev.bytes());
    assert_eq!(l["fields"], json!({"PartB": {"n": 1}}));
    let msg = l["errors"]["PartB.body"].as_str().unwrap();
    assert!(msg.contains("payload byte 1"), "{msg}");
    assert_eq!(l["undecoded"], "05006162");
    // Bad metadata: unknown encoding.
    let ev = Ev::new("E", false)
        .field("a", 2, None, 0, None)
        .field("bad", 14, None, 0, None)
        .data(&[1, 2]);
    let l = line(TP, &ev.bytes());
    assert_eq!(l["fields"], json!({"a": 1}));
    assert!(
        l["errors"]["payload"]
            .as_str()
            .unwrap()
            .contains("encoding")
    );
    assert_eq!(l["undecoded"], "02");
    // Too deep.
    let mut ev = Ev::new("E", false);
    for _ in 0..9 {
        ev = ev.field("s", 1, Some(1), 0, None);
    }
    let l = line(TP, &ev.field("x", 2, None, 0, None).data(&[1]).bytes());
    assert!(
        l["errors"]["s.s.s.s.s.s.s.s.s"]
            .as_str()
            .unwrap()
            .contains("deeper"),
        "{l}"
    );
    // Too many fields.
    let mut ev = Ev::new("E", false);
    for i in 0..129 {
        ev = ev.field(&format!("f{i}"), 2, None, 0, None).data(&[1]);
    }
    let l = line(TP, &ev.bytes());
    assert!(
        l["errors"]["payload"].as_str().unwrap().contains("128"),
        "{l}"
    );
    assert_eq!(l["fields"].as_object().unwrap().len(), 128);
    // A field named like an error key still gives distinct keys.
    let mut ev = Ev::new("E", false)
        .field("level", 4, None, 0, None)
        .data(&[1]);
    ev.level = 3;
    let l = line(TP, &ev.bytes());
    assert!(
        l["errors"]["level"].is_string() && l["errors"]["level#2"].is_string(),
        "{l}"
    );
}

#[test]
fn truncation_at_every_byte_keeps_the_event() {
    let ev = Ev::new("Ev;a=b", false)
        .field("PartA", 1, Some(1), 0, None)
        .field("time", 7, None, 0, None)
        .data(b"2024\0")
        .field("arr", 0x40 | 3, None, 3, None)
        .d16(2)
        .d16(1)
        .d16(2)
        .field("sa", 0x40 | 1, Some(1), 0, None)
        .d16(1)
        .field("s", 10, None, 0, None)
        .d16(2)
        .data(b"hi")
        .field("v", 6, Some(15), 0, None)
        .data(&[1; 16]);
    let data = ev.bytes();
    for cut in 0..=data.len() {
        let l = line(TP, &data[..cut]);
        if cut < data.len() {
            assert!(
                l.get("errors").is_some() || cut == data.len(),
                "cut {cut}: {l}"
            );
            assert!(l["undecoded"].is_string(), "cut {cut}: {l}");
        } else {
            assert!(l.get("errors").is_none(), "{l}");
        }
    }
}

#[test]
fn trailing_pad_bytes_are_ignored() {
    let ev = Ev::new("E", false)
        .field("a", 4, None, 0, None)
        .d32(7)
        .data(&[0; 7]);
    let l = line(TP, &ev.bytes());
    assert_eq!(l["fields"], json!({"a": 7}));
    assert!(l.get("errors").is_none());
}

#[test]
fn not_eventheader_stays_plain() {
    let f = tracepoint_format("plain_event", 1);
    let p = PreparedFormat::new(&f, "user_events", "plain_event", None);
    assert!(p.eventheader().is_none());
    let p = PreparedFormat::new(&f, "user_events", "P_L4K1", Some("1f"));
    assert!(p.eventheader().is_some());
}

/// A generated field tree and its expected JSON.
#[derive(Debug, Clone)]
enum Gen {
    U8(u8),
    I32(i32),
    U64(u64),
    Str(String),
    Bin(Vec<u8>),
    Arr(Vec<u16>),
    Struct(Vec<Gen>),
}

fn gen_tree() -> impl Strategy<Value = Gen> {
    let leaf = prop_oneof![
        any::<u8>().prop_map(Gen::U8),
        any::<i32>().prop_map(Gen::I32),
        any::<u64>().prop_map(Gen::U64),
        "[a-zé😀\"\\\\\\n]{0,8}".prop_map(Gen::Str),
        prop::collection::vec(any::<u8>(), 0..6).prop_map(Gen::Bin),
        prop::collection::vec(any::<u16>(), 0..4).prop_map(Gen::Arr),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop::collection::vec(inner, 1..4).prop_map(Gen::Struct)
    })
}

/// Append `g` as field `name` to `ev`; returns the expected JSON value.
fn emit(ev: Ev, name: &str, g: &Gen) -> (Ev, Value) {
    match g {
        Gen::U8(v) => (ev.field(name, 2, None, 0, None).data(&[*v]), json!(v)),
        Gen::I32(v) => (ev.field(name, 4, Some(2), 0, None).d32(*v as u32), json!(v)),
        Gen::U64(v) => (ev.field(name, 5, None, 0, None).d64(*v), json!(v)),
        Gen::Str(s) => (
            ev.field(name, 10, None, 0, None)
                .d16(s.len() as u16)
                .data(s.as_bytes()),
            json!(s),
        ),
        Gen::Bin(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            (
                ev.field(name, 13, None, 0, None)
                    .d16(b.len() as u16)
                    .data(b),
                json!(hex),
            )
        }
        Gen::Arr(a) => {
            let mut ev = ev.field(name, 0x40 | 3, None, 0, None).d16(a.len() as u16);
            for v in a {
                ev = ev.d16(*v);
            }
            (ev, json!(a))
        }
        Gen::Struct(children) => {
            let mut ev = ev.field(name, 1, Some(children.len() as u8), 0, None);
            let mut obj = serde_json::Map::new();
            for (i, c) in children.iter().enumerate() {
                let n = format!("f{i}");
                let (e, v) = emit(ev, &n, c);
                ev = e;
                obj.insert(n, v);
            }
            (ev, Value::Object(obj))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_break_a_line(
        head in prop_oneof![Just(vec![7u8, 0, 0, 0, 0, 0, 0, 4]), prop::collection::vec(any::<u8>(), 8)],
        body in prop::collection::vec(any::<u8>(), 0..200),
        name in prop_oneof![Just("P_L4K1".to_string()), "[A-Za-z_]{0,6}_L[0-9a-f]{1,3}K[0-9a-f]{1,4}[A-Z]?[a-z]{0,3}"],
    ) {
        let mut data = head;
        data.extend_from_slice(&body);
        line_bytes(&name, &data);
    }

    #[test]
    fn arbitrary_metadata_never_breaks_a_line(
        meta in prop::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(1u8), Just(2u8), Just(0x41), Just(0x21), Just(0x81), any::<u8>()], 0..80),
        payload in prop::collection::vec(any::<u8>(), 0..80),
        big in any::<bool>(),
    ) {
        let mut ev = Ev::new("", big);
        ev.meta = Some(meta);
        ev.payload = payload;
        line_bytes(TP, &ev.bytes());
    }

    #[test]
    fn generated_events_decode_to_their_values(tree in prop::collection::vec(gen_tree(), 0..6), big in any::<bool>()) {
        let mut ev = Ev::new("Gen", big);
        let mut expected = serde_json::Map::new();
        for (i, g) in tree.iter().enumerate() {
            let n = format!("t{i}");
            let (e, v) = emit(ev, &n, g);
            ev = e;
            expected.insert(n, v);
        }
        let l = line(TP, &ev.bytes());
        prop_assert!(l.get("errors").is_none(), "{}", l);
        prop_assert_eq!(&l["fields"], &Value::Object(expected));
    }
}

/// A field for the plan-identity tests: every encoding, formats, tags, both array kinds,
/// structs and arrays of structs, names that repeat.
#[derive(Clone, Debug)]
enum Any {
    Val(u8, Option<u8>, u16),
    Arr(u8, Option<u8>, u16, Option<u16>, u16),
    Struct(u16, Vec<Any>),
    Structs(u16, Option<u16>, u16, Vec<Any>),
}

fn gen_any() -> impl Strategy<Value = Any> {
    let enc = prop_oneof![2u8..=13, Just(10u8), Just(4u8)];
    let format = prop_oneof![
        Just(None),
        (0u8..16).prop_map(Some),
        any::<u8>().prop_map(|f| Some(f & 0x7f))
    ];
    let tag = prop_oneof![3 => Just(0u16), 1 => 1u16..4];
    let len = prop_oneof![Just(None), (1u16..4).prop_map(Some)];
    let leaf = prop_oneof![
        (enc.clone(), format.clone(), tag.clone()).prop_map(|(e, f, t)| Any::Val(e, f, t)),
        (enc, format, tag.clone(), len.clone(), 0u16..4)
            .prop_map(|(e, f, t, l, n)| Any::Arr(e, f, t, l, n)),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            (tag.clone(), prop::collection::vec(inner.clone(), 1..4))
                .prop_map(|(t, c)| Any::Struct(t, c)),
            (
                tag.clone(),
                len.clone(),
                0u16..3,
                prop::collection::vec(inner, 0..3)
            )
                .prop_map(|(t, l, n, c)| Any::Structs(t, l, n, c)),
        ]
    })
}

/// Deterministic payload bytes from an entropy vector.
struct Bytes<'a>(&'a [u8], usize);

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        let b = self
            .0
            .get(self.1 % self.0.len().max(1))
            .copied()
            .unwrap_or(7);
        self.1 += 1;
        b.wrapping_add((self.1 / self.0.len().max(1)) as u8)
    }
    /// One value of encoding `enc` (low 5 bits).
    fn value(&mut self, ev: Ev, enc: u8) -> Ev {
        let text = |r: &mut Self, n: usize| -> Vec<u8> {
            const CHARS: &[u8] = b"ab \"\\\n\xc3\xa9\xff;=";
            (0..n)
                .map(|_| CHARS[usize::from(r.next()) % CHARS.len()])
                .collect()
        };
        match enc {
            2..=6 => {
                let n = [1, 2, 4, 8, 16][usize::from(enc - 2)];
                let b: Vec<u8> = (0..n).map(|_| self.next()).collect();
                ev.data(&b)
            }
            7 => {
                let n = usize::from(self.next() % 5);
                let mut t: Vec<u8> = text(self, n).into_iter().map(|c| c.max(1)).collect();
                t.push(0);
                ev.data(&t)
            }
            8 | 9 => {
                let unit = if enc == 8 { 2 } else { 4 };
                let n = usize::from(self.next() % 3);
                let mut t = Vec::new();
                for _ in 0..n {
                    let c = u32::from(self.next()) + 1;
                    if ev.big {
                        t.extend_from_slice(&c.to_be_bytes()[4 - unit..]);
                    } else {
                        t.extend_from_slice(&c.to_le_bytes()[..unit]);
                    }
                }
                t.extend(std::iter::repeat_n(0, unit));
                ev.data(&t)
            }
            10..=13 => {
                let unit = [1, 2, 4, 1][usize::from(enc - 10)];
                let n = usize::from(self.next() % 6);
                let t = if unit == 1 {
                    text(self, n)
                } else {
                    (0..n * unit).map(|_| self.next()).collect()
                };
                ev.d16(n as u16).data(&t)
            }
            _ => ev,
        }
    }
}

const NAMES: [&str; 5] = ["a", "b", "a#2", "é;x=1", "\"q"];

/// Append `g` as field `name`; whether a tag sits inside an array of structs.
fn emit_any(ev: Ev, name: &str, g: &Any, r: &mut Bytes, in_array: bool) -> (Ev, bool) {
    match g {
        Any::Val(e, f, t) => {
            let ev = ev.field(name, *e, *f, *t, None);
            (r.value(ev, *e), in_array && *t != 0)
        }
        Any::Arr(e, f, t, len, n) => {
            let mut ev = ev.field(
                name,
                *e | if len.is_none() { 0x40 } else { 0 },
                *f,
                *t,
                *len,
            );
            let n = len.unwrap_or(*n);
            if len.is_none() {
                ev = ev.d16(n);
            }
            for _ in 0..n {
                ev = r.value(ev, *e);
            }
            (ev, in_array && *t != 0)
        }
        Any::Struct(t, children) => {
            let mut ev = ev.field(name, 1, Some(children.len() as u8), *t, None);
            let mut tagged = in_array && *t != 0;
            for (i, c) in children.iter().enumerate() {
                let (e, tg) = emit_any(ev, NAMES[i % NAMES.len()], c, r, in_array);
                ev = e;
                tagged |= tg;
            }
            (ev, tagged)
        }
        Any::Structs(t, len, n, children) => {
            let enc = 1 | if len.is_none() { 0x40 } else { 0 };
            let mut ev = ev.field(name, enc, Some(children.len() as u8), *t, *len);
            let n = len.unwrap_or(*n);
            if len.is_none() {
                ev = ev.d16(n);
            }
            // The metadata of the children once, their payload per element.
            let mut meta_only = Ev {
                payload: Vec::new(),
                ..ev.clone()
            };
            let mut tagged = in_array && *t != 0;
            let mut elements = Vec::new();
            for k in 0..n.max(1) {
                let mut el = Ev {
                    payload: Vec::new(),
                    ..meta_only.clone()
                };
                for (i, c) in children.iter().enumerate() {
                    let (e, tg) = emit_any(el, NAMES[i % NAMES.len()], c, r, true);
                    el = e;
                    tagged |= tg;
                }
                if k == 0 {
                    meta_only.meta = el.meta.clone();
                }
                elements.push(el.payload);
            }
            ev.meta = meta_only.meta;
            for p in elements.iter().take(usize::from(n)) {
                ev.payload.extend_from_slice(p);
            }
            (ev, tagged)
        }
    }
}

/// The EventHeader part of the line through [`write_event`] (its plan, cached on the
/// first call, then from the cache) and through the streaming writer: the same bytes.
/// Returns whether the plan wrote the event.
fn plan_matches_stream(tp: &str, data: &[u8]) -> bool {
    use uevrec_parsers::eventheader::TracepointName;
    use uevrec_parsers::eventheader_json::{
        Scratch, write_event, write_event_planned, write_event_streaming,
    };
    let tp = TracepointName::parse(tp).unwrap();
    let mut s = Scratch::default();
    let mut stream = b"line start".to_vec();
    write_event_streaming(&mut stream, &mut s, &tp, data);
    for _ in 0..2 {
        let mut out = b"line start".to_vec();
        write_event(&mut out, &mut s, &tp, data);
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&stream),
            "write_event and the streaming writer differ"
        );
    }
    let mut out = b"line start".to_vec();
    let planned = write_event_planned(&mut out, &mut s, &tp, data);
    if planned {
        assert_eq!(out, stream, "the plan's line differs");
    }
    planned
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Valid events take the plan (unless a tag sits inside an array of structs), and
    /// it writes what the streaming writer writes; so do arbitrary byte changes and
    /// truncations of them (plan or fallback).
    #[test]
    fn plans_write_what_the_streaming_writer_writes(
        tree in prop::collection::vec(gen_any(), 0..6),
        entropy in prop::collection::vec(any::<u8>(), 1..64),
        big in any::<bool>(),
        level in prop_oneof![4 => Just(4u8), 1 => any::<u8>()],
        muts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let mut ev = Ev::new("Ev;k=v;k=w", big);
        ev.level = level;
        let mut r = Bytes(&entropy, 0);
        let mut tag_in_array = false;
        for (i, g) in tree.iter().enumerate() {
            let (e, t) = emit_any(ev, NAMES[i % NAMES.len()], g, &mut r, false);
            ev = e;
            tag_in_array |= t;
        }
        let data = ev.bytes();
        let planned = plan_matches_stream(TP, &data);
        if level == 4 && !tag_in_array && ev.meta.as_ref().unwrap().len() <= 2048 {
            prop_assert!(planned, "a valid event did not take the plan: {:?}", tree);
        }
        let mut bad = data.clone();
        for (i, b) in &muts {
            let at = i.index(bad.len());
            bad[at] = *b;
        }
        if let Some(c) = cut {
            bad.truncate(c.index(bad.len() + 1));
        }
        plan_matches_stream(TP, &bad);
        // Trailing bytes (perf's padding) stay outside the line.
        let mut padded = data;
        padded.extend_from_slice(&[0, 0, 0, 0]);
        plan_matches_stream(TP, &padded);
    }

    #[test]
    fn plans_of_arbitrary_metadata_write_what_the_streaming_writer_writes(
        meta in prop::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(1u8), Just(2u8), Just(0x41), Just(0x21), Just(0x81), Just(0x8a), any::<u8>()], 0..80),
        payload in prop::collection::vec(any::<u8>(), 0..80),
        big in any::<bool>(),
    ) {
        let mut ev = Ev::new("", big);
        ev.meta = Some(meta);
        ev.payload = payload;
        plan_matches_stream(TP, &ev.bytes());
    }
}

/// Walks past the item budget (arrays of empty structs, and of strings whose elements
/// take no byte) stop as the streaming writer stops, with its error; arrays of
/// fixed-size values (which a plan walks without counting) stay within it.
#[test]
fn plans_stop_at_the_item_budget_as_the_stream_does() {
    for big in [false, true] {
        let structs = Ev::new("S", big)
            .field("s", 1 | 0x40, Some(0), 0, None)
            .d16(u16::MAX);
        let strings = Ev::new("Z", big)
            .field("z", 7 | 0x40, None, 0, None)
            .d16(u16::MAX);
        for ev in [structs, strings] {
            let data = ev.bytes();
            assert!(!plan_matches_stream(TP, &data), "the plan wrote it");
            let line = String::from_utf8(line_bytes(TP, &data)).unwrap();
            assert!(line.contains("too many items"), "{line}");
        }
        let mut values = Ev::new("V", big)
            .field("v", 2 | 0x40, None, 0, None)
            .d16(5000);
        values.payload.extend(std::iter::repeat_n(7, 5000));
        assert!(
            plan_matches_stream(TP, &values.bytes()),
            "the plan did not write it"
        );
    }
}

/// A plan survives its cache: many metadata blocks (more than the cache holds) in turn,
/// each event written by plan or stream the same.
#[test]
fn plan_cache_keeps_lines_identical_past_its_bound() {
    use uevrec_parsers::eventheader::TracepointName;
    use uevrec_parsers::eventheader_json::plan::PLAN_CACHE_ENTRIES;
    use uevrec_parsers::eventheader_json::{Scratch, write_event, write_event_streaming};
    let tp = TracepointName::parse(TP).unwrap();
    let events: Vec<Vec<u8>> = (0..PLAN_CACHE_ENTRIES + 5)
        .map(|i| {
            Ev::new(&format!("E{i}"), i % 2 == 0)
                .field("n", 4, Some(2), 0, None)
                .d32(i as u32)
                .bytes()
        })
        .collect();
    let (mut s, mut t) = (Scratch::default(), Scratch::default());
    for round in 0..3 {
        for (i, e) in events.iter().enumerate().skip(round) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            write_event(&mut a, &mut s, &tp, e);
            write_event_streaming(&mut b, &mut t, &tp, e);
            assert_eq!(a, b, "event {i} round {round}");
        }
    }
}

#[test]
fn keyword_text_is_hash_x() {
    for k in [
        0u64,
        1,
        0xf,
        0x10,
        0xabc,
        0x8000_0000_0000_0000,
        u64::MAX,
        0x0123_4567_89ab_cdef,
    ] {
        let tp = format!("P_L4K{k:x}");
        let l = line(&tp, &Ev::new("E", false).bytes());
        assert_eq!(l["keyword"], json!(format!("{k:#x}")), "{tp}");
    }
}
