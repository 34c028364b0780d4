//! The EventHeader producers' side of the contract in docs/eventheader.md: helpers that turn
//! the values a producer wrote into the JSON uevrec must print for them, and the report
//! line (`{"event":..,"provider":..,"name":..,"level":..,"fields":{..}}`) each producer
//! prints per event written.
//!
//! These helpers are written from the spec, independently of uevrec's decoder, so that a
//! test comparing the two can fail.

use serde_json::{Map, Value, json};

/// Lowercase hex of `bytes`, two digits per byte, nothing else (the spec's hex bytes).
pub fn hex_bytes(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// `"0x…"` for an integer shown with the hex-int format: the unsigned value of its
/// width, lowercase, no leading zeros (`"0x0"` for zero).
pub fn hex_int(unsigned: u64) -> Value {
    Value::String(format!("{unsigned:#x}"))
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` from 16 bytes in network (RFC) order.
pub fn uuid_text(b: &[u8; 16]) -> String {
    let h = hex_bytes(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A float as the spec shows it: a JSON number, or `"NaN"`, `"Infinity"`, `"-Infinity"`.
pub fn float(v: f64) -> Value {
    if v.is_nan() {
        json!("NaN")
    } else if v == f64::INFINITY {
        json!("Infinity")
    } else if v == f64::NEG_INFINITY {
        json!("-Infinity")
    } else {
        json!(v)
    }
}

/// A boolean-format integer: `true`/`false` for 1/0, else the number itself.
pub fn boolean(v: i64) -> Value {
    match v {
        0 => json!(false),
        1 => json!(true),
        n => json!(n),
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `YYYY-MM-DDTHH:MM:SS` for `secs` since the epoch, or `None` outside years 0..=9999.
fn rfc3339_base(secs: i64) -> Option<String> {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return None;
    }
    Some(format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    ))
}

/// A time-format field (`time_t` seconds): `"2024-03-28T00:45:12Z"`, or the number when
/// the year is outside 0..=9999 (not representable in RFC 3339).
pub fn time_t(secs: i64) -> Value {
    rfc3339_base(secs).map_or_else(|| json!(secs), |s| json!(format!("{s}Z")))
}

/// RFC 3339 UTC with 0, 3, 6 or 9 fraction digits (the fewest that show `nanos`
/// exactly), as the OpenTelemetry exporters write Common Schema times.
pub fn rfc3339_nanos(secs: i64, nanos: u32) -> String {
    let base = rfc3339_base(secs).expect("time within years 0..=9999");
    let frac = if nanos == 0 {
        String::new()
    } else if nanos % 1_000_000 == 0 {
        format!(".{:03}", nanos / 1_000_000)
    } else if nanos % 1_000 == 0 {
        format!(".{:06}", nanos / 1_000)
    } else {
        format!(".{nanos:09}")
    };
    format!("{base}{frac}Z")
}

/// Decode UTF-16 code units as the spec says (invalid → U+FFFD).
pub fn utf16(units: &[u16]) -> String {
    char::decode_utf16(units.iter().copied())
        .map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()
}

/// Decode UTF-32 code units (invalid → U+FFFD).
pub fn utf32(units: &[u32]) -> String {
    units
        .iter()
        .map(|&u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()
}

/// Latin-1 bytes as text (the `string8` format).
pub fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// What a producer knows about one EventHeader event it wrote: the header keys of
/// uevrec's line (docs/eventheader.md) plus the expected `fields` (and `field_tags`).
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// Tracepoint name, e.g. `MyProvider_L4K1` or `MyProvider_L4K1Gmygroup`.
    pub tracepoint: String,
    /// Provider name.
    pub provider: String,
    /// Event name (before any `;attr=value`).
    pub name: String,
    /// `;k=v` suffixes of the event name, already unescaped.
    pub event_attributes: Vec<(String, String)>,
    /// Level (1..=5).
    pub level: u8,
    /// Keyword.
    pub keyword: u64,
    /// Provider group (the `G` option), if any.
    pub group: Option<String>,
    /// Opcode.
    pub opcode: u8,
    /// Event id.
    pub id: u16,
    /// Event version.
    pub version: u8,
    /// Event tag.
    pub tag: u16,
    /// Activity id (network byte order).
    pub activity: Option<[u8; 16]>,
    /// Related activity id.
    pub related_activity: Option<[u8; 16]>,
    /// The decoded fields, in order.
    pub fields: Map<String, Value>,
    /// Dotted field path → nonzero field tag.
    pub field_tags: Map<String, Value>,
}

/// The tracepoint name the EventHeader crates register for these attributes.
pub fn tracepoint_name(provider: &str, level: u8, keyword: u64, group: Option<&str>) -> String {
    let mut s = format!("{provider}_L{level:x}K{keyword:x}");
    if let Some(g) = group {
        s.push('G');
        s.push_str(g);
    }
    s
}

impl Written {
    /// The producer's account of this event once `writer` (the crate call that wrote it)
    /// returned the errno `rc`: 0 → its report line, numbered `seq`, on standard output;
    /// anything else ends the producer (EBADF: the recorder went away).
    pub fn report_written(&self, rc: i64, seq: u64, writer: &str) {
        match rc {
            0 => {
                let mut line = self.to_json();
                line["seq"] = json!(seq);
                crate::report(&line);
            }
            9 => crate::fail(format!(
                "{}: the recorder went away (EBADF)",
                self.tracepoint
            )),
            e => crate::fail(format!(
                "{}/{}: {writer} returned errno {e}",
                self.tracepoint, self.name
            )),
        }
    }

    /// An event of `provider` at `level`/`keyword` named `name`, no fields yet.
    pub fn new(provider: &str, name: &str, level: u8, keyword: u64) -> Written {
        Written {
            tracepoint: tracepoint_name(provider, level, keyword, None),
            provider: provider.to_string(),
            name: name.to_string(),
            level,
            keyword,
            ..Written::default()
        }
    }

    /// Set the provider group (changes the tracepoint name).
    pub fn group(mut self, group: &str) -> Written {
        self.tracepoint = tracepoint_name(&self.provider, self.level, self.keyword, Some(group));
        self.group = Some(group.to_string());
        self
    }

    /// Add a field.
    pub fn field(mut self, name: &str, value: Value) -> Written {
        self.fields.insert(name.to_string(), value);
        self
    }

    /// The JSON report line: exactly the keys uevrec must print for this event (minus
    /// `time`, `cpu`, `pid`, `tid`, which the producer cannot know in advance), in the
    /// spec's order, optional ones only when set.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("system".into(), json!("user_events"));
        m.insert("event".into(), json!(self.tracepoint));
        m.insert("provider".into(), json!(self.provider));
        m.insert("name".into(), json!(self.name));
        if !self.event_attributes.is_empty() {
            let attrs: Map<String, Value> = self
                .event_attributes
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            m.insert("event_attributes".into(), Value::Object(attrs));
        }
        m.insert("level".into(), json!(self.level));
        m.insert("keyword".into(), json!(format!("{:#x}", self.keyword)));
        if let Some(g) = &self.group {
            m.insert("group".into(), json!(g));
        }
        if self.opcode != 0 {
            m.insert("opcode".into(), json!(self.opcode));
        }
        if self.id != 0 || self.version != 0 {
            m.insert("id".into(), json!(self.id));
            m.insert("version".into(), json!(self.version));
        }
        if self.tag != 0 {
            m.insert("tag".into(), json!(self.tag));
        }
        if let Some(a) = &self.activity {
            m.insert("activity".into(), json!(uuid_text(a)));
        }
        if let Some(a) = &self.related_activity {
            m.insert("related_activity".into(), json!(uuid_text(a)));
        }
        m.insert("fields".into(), Value::Object(self.fields.clone()));
        if !self.field_tags.is_empty() {
            m.insert("field_tags".into(), Value::Object(self.field_tags.clone()));
        }
        Value::Object(m)
    }
}

/// The keys of uevrec's EventHeader line a producer's report line states (all but the
/// per-record `time`, `cpu`, `pid`, `tid` and `format_id`). A key absent from the report
/// must be absent from uevrec's line too.
pub const REPORTED_KEYS: &[&str] = &[
    "system",
    "event",
    "provider",
    "name",
    "event_attributes",
    "level",
    "keyword",
    "group",
    "opcode",
    "id",
    "version",
    "tag",
    "activity",
    "related_activity",
    "fields",
    "field_tags",
    "errors",
    "undecoded",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_follow_rfc3339() {
        assert_eq!(time_t(0), json!("1970-01-01T00:00:00Z"));
        assert_eq!(time_t(1_711_586_712), json!("2024-03-28T00:45:12Z"));
        assert_eq!(time_t(-86_400), json!("1969-12-31T00:00:00Z"));
        assert_eq!(time_t(951_782_400), json!("2000-02-29T00:00:00Z"));
        assert_eq!(time_t(i64::MAX), json!(i64::MAX));
        assert_eq!(
            rfc3339_nanos(1_711_586_712, 123_000_000),
            "2024-03-28T00:45:12.123Z"
        );
        assert_eq!(
            rfc3339_nanos(1_711_586_712, 1_000),
            "2024-03-28T00:45:12.000001Z"
        );
        assert_eq!(rfc3339_nanos(1_711_586_712, 0), "2024-03-28T00:45:12Z");
    }

    #[test]
    fn text_helpers() {
        assert_eq!(hex_int(0), json!("0x0"));
        assert_eq!(hex_int(0xff), json!("0xff"));
        assert_eq!(
            uuid_text(&[
                0x3f, 0x25, 0x04, 0xe0, 0x4f, 0x89, 0x11, 0xd3, 0x9a, 0x0c, 0x03, 0x05, 0xe8, 0x2c,
                0x33, 0x01
            ]),
            "3f2504e0-4f89-11d3-9a0c-0305e82c3301"
        );
        assert_eq!(utf16(&[0x41, 0xd800, 0x42]), "A\u{fffd}B");
        assert_eq!(utf32(&[0x41, 0x11_0000]), "A\u{fffd}");
        assert_eq!(latin1(&[0x41, 0xe9]), "Aé");
        assert_eq!(float(f64::NAN), json!("NaN"));
        assert_eq!(boolean(2), json!(2));
        assert_eq!(tracepoint_name("P", 4, 0x1f, Some("g1")), "P_L4K1fGg1");
    }
}
