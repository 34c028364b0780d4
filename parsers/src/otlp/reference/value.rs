//! The message-type path's values (see `super`): decoded fields → OTLP attributes
//! (`KeyValue`s holding `AnyValue`s).
//!
//! Every value is first rendered by the JSON-lines writers (so each EventHeader format
//! rule, UUID, IP address, time, float, …, exists once, in
//! [`crate::json_line::eventheader`] and [`crate::json_line`]), then its JSON scalar becomes
//! the `AnyValue`: integers that fit `int64` → `intValue`; larger unsigned integers →
//! `stringValue` of their decimal digits (OTLP has no unsigned 64-bit type); numbers
//! with a fraction or exponent → `doubleValue`; strings (bytes as hex, NaN and the
//! infinities as `"NaN"`, `"Infinity"`, `"-Infinity"`) → `stringValue`; booleans →
//! `boolValue`; `null` (a zero-length value) → the empty `AnyValue`. EventHeader
//! structs become `kvlistValue`s and arrays `arrayValue`s.

use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, KeyValueList};

use crate::decode::{Endian, Value, decode_field};
use crate::eventheader::enumerator::{Enumerator, Item};
use crate::json::write_value as write_json_value;
use crate::schema::Field;

/// An `AnyValue` holding `v`.
pub(crate) fn any(v: V) -> AnyValue {
    AnyValue { value: Some(v) }
}

/// A `KeyValue`.
pub(crate) fn kv(key: impl Into<String>, v: V) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(any(v)),
        ..Default::default()
    }
}

/// A string value.
pub(crate) fn string(s: impl Into<String>) -> V {
    V::StringValue(s.into())
}

/// An unsigned integer: `intValue` when it fits `int64`, else its decimal digits.
pub(crate) fn unsigned(u: u64) -> V {
    match i64::try_from(u) {
        Ok(i) => V::IntValue(i),
        Err(_) => V::StringValue(u.to_string()),
    }
}

/// The `AnyValue` of one JSON scalar as the JSON-lines writers write it.
pub(crate) fn from_json_scalar(text: &[u8]) -> AnyValue {
    let v = match serde_json::from_slice::<serde_json::Value>(text) {
        Ok(serde_json::Value::Bool(b)) => Some(V::BoolValue(b)),
        Ok(serde_json::Value::String(s)) => Some(V::StringValue(s)),
        Ok(serde_json::Value::Number(n)) => Some(if let Some(i) = n.as_i64() {
            V::IntValue(i)
        } else if let Some(u) = n.as_u64() {
            unsigned(u)
        } else {
            V::DoubleValue(n.as_f64().unwrap_or(f64::NAN))
        }),
        Ok(serde_json::Value::Null) => None,
        // The writers only write scalars here; anything else stays readable as text.
        Ok(other) => Some(V::StringValue(other.to_string())),
        Err(_) => Some(V::StringValue(String::from_utf8_lossy(text).into_owned())),
    };
    AnyValue { value: v }
}

/// A tracepoint field's value (plain events); `Err` with the reason when it failed to
/// decode.
pub(crate) fn plain_value(
    scratch: &mut Vec<u8>,
    field: &Field,
    raw: &[u8],
    endian: Endian,
) -> Result<AnyValue, String> {
    let value = decode_field(field, raw, endian);
    match value {
        Value::Error(e) => Err(e.to_string()),
        Value::IntArray(array) => Ok(any(V::ArrayValue(ArrayValue {
            values: array
                .iter()
                .map(|v| json_of(scratch, |out| write_json_value(out, &v)))
                .collect(),
        }))),
        v => Ok(json_of(scratch, |out| write_json_value(out, &v))),
    }
}

/// Render with `write` into `scratch` and convert the JSON scalar.
fn json_of(scratch: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>) -> bool) -> AnyValue {
    scratch.clear();
    write(scratch);
    from_json_scalar(scratch)
}

/// An open struct or array of an EventHeader walk.
enum Open {
    Struct(Option<String>, Vec<KeyValue>),
    Array(String, Vec<AnyValue>),
}

/// Walk an EventHeader payload into attributes: one per top-level field (structs as
/// `kvlistValue`, arrays as `arrayValue`). A repeated key in the same struct gets the
/// suffix `#2`, `#3`, … as in JSON lines. Returns the attributes and, when the walk
/// stopped early, why (the fields before the problem are kept).
pub(crate) fn eventheader_fields(
    scratch: &mut Vec<u8>,
    e: &mut Enumerator<'_>,
) -> (Vec<KeyValue>, Option<String>) {
    let endian = e.endian();
    let mut stack: Vec<Open> = vec![Open::Struct(None, Vec::new())];
    let name = |n: &[u8]| String::from_utf8_lossy(n).into_owned();
    for item in e.by_ref() {
        match item {
            Item::StructBegin { field, element } => {
                let key = (!element).then(|| name(field.name));
                stack.push(Open::Struct(key, Vec::new()));
            }
            Item::ArrayBegin { field, .. } => {
                stack.push(Open::Array(name(field.name), Vec::new()));
            }
            Item::StructEnd { .. } | Item::ArrayEnd { .. } => close_top(&mut stack),
            Item::Value {
                field,
                bytes,
                element,
            } => {
                let value = json_of(scratch, |out| {
                    crate::json_line::eventheader::write_value(out, &field, bytes, endian);
                    false
                });
                add(&mut stack, (!element).then(|| name(field.name)), value);
            }
        }
    }
    let error = e.error().map(ToString::to_string);
    // A walk that stopped early leaves structs and arrays open: close them as they are.
    while stack.len() > 1 {
        close_top(&mut stack);
    }
    match stack.pop() {
        Some(Open::Struct(_, values)) => (values, error),
        _ => (Vec::new(), error),
    }
}

/// Close the struct or array on top of `stack` (never the top level) into its parent.
fn close_top(stack: &mut Vec<Open>) {
    if stack.len() < 2 {
        return;
    }
    let (key, value) = match stack.pop() {
        Some(Open::Struct(key, values)) => (key, any(V::KvlistValue(KeyValueList { values }))),
        Some(Open::Array(key, values)) => (Some(key), any(V::ArrayValue(ArrayValue { values }))),
        None => return,
    };
    add(stack, key, value);
}

/// Add `value` to the open struct or array on top of `stack`: keyed (deduplicated) in a
/// struct, as an element in an array.
fn add(stack: &mut [Open], key: Option<String>, value: AnyValue) {
    match stack.last_mut() {
        Some(Open::Array(_, values)) => values.push(value),
        Some(Open::Struct(_, values)) => push_unique(values, key.unwrap_or_default(), value),
        None => {}
    }
}

/// Append `key: value`, renaming the key `key#2`, `key#3`, … when it is taken (OTLP
/// attribute keys must be unique).
pub(crate) fn push_unique(values: &mut Vec<KeyValue>, key: String, value: AnyValue) {
    let taken = |k: &str| values.iter().any(|kv| kv.key == k);
    let key = if taken(&key) {
        (2..)
            .map(|n| format!("{key}#{n}"))
            .find(|k| !taken(k))
            .unwrap_or(key)
    } else {
        key
    };
    values.push(KeyValue {
        key,
        value: Some(value),
        ..Default::default()
    });
}
