//! What the `--format otlp` tests share: the check of every line against the official
//! protobuf definitions (`tests/otlp/validate.py`, PyPI `opentelemetry-proto`), and
//! reading the records of a signal back out of the request lines.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Run `tests/otlp/validate.py` on `file`: every line must parse as an OTLP export
/// request with unknown fields refused. Returns its summary (`ok {…counts…}`).
pub fn validate(file: &Path) -> String {
    let check = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/validate.py"))
        .arg(file)
        .output()
        .expect("python3 (with the PyPI package opentelemetry-proto) must run here");
    let said = String::from_utf8_lossy(&check.stdout).into_owned()
        + &String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "validate.py: {said}");
    assert!(said.starts_with("ok "), "{said}");
    said
}

/// The records of one signal (`logs`, `spans`, `metrics`) in `lines`: (resource
/// attributes as an object, scope name, record).
pub fn records(lines: &[Value], kind: &str) -> Vec<(Value, String, Value)> {
    let (resources, scopes, items) = match kind {
        "logs" => ("resourceLogs", "scopeLogs", "logRecords"),
        "spans" => ("resourceSpans", "scopeSpans", "spans"),
        _ => ("resourceMetrics", "scopeMetrics", "metrics"),
    };
    let mut out = Vec::new();
    for line in lines {
        for r in line[resources].as_array().into_iter().flatten() {
            let attrs = attributes(&r["resource"]);
            for s in r[scopes].as_array().into_iter().flatten() {
                let scope = s["scope"]["name"].as_str().unwrap_or_default().to_string();
                for item in s[items].as_array().into_iter().flatten() {
                    out.push((attrs.clone(), scope.clone(), item.clone()));
                }
            }
        }
    }
    out
}

/// `owner["attributes"]` as a JSON object of OTLP AnyValues.
pub fn attributes(owner: &Value) -> Value {
    let mut m = serde_json::Map::new();
    for a in owner["attributes"].as_array().into_iter().flatten() {
        m.insert(a["key"].as_str().unwrap().to_string(), a["value"].clone());
    }
    Value::Object(m)
}

/// An OTLP AnyValue as plain JSON: `intValue` → a number, `stringValue` → a string,
/// `doubleValue`, `boolValue`, `arrayValue` → an array, `kvlistValue` → an object, the
/// empty value → `null`.
pub fn plain(any: &Value) -> Value {
    if let Some(s) = any.get("intValue") {
        let n: i64 = s
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("intValue digits");
        return Value::from(n);
    }
    for key in ["stringValue", "doubleValue", "boolValue"] {
        if let Some(v) = any.get(key) {
            return v.clone();
        }
    }
    if let Some(values) = any.get("arrayValue") {
        let items = values["values"].as_array().into_iter().flatten();
        return Value::Array(items.map(plain).collect());
    }
    if let Some(list) = any.get("kvlistValue") {
        return Value::Object(
            attributes(&serde_json::json!({"attributes": list["values"]}))
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), plain(v)))
                .collect(),
        );
    }
    Value::Null
}

/// A JSON-lines value as OTLP carries it (then read back with [`plain`]): integers
/// beyond int64 become strings of their digits (OTLP has no unsigned 64-bit type).
pub fn as_otlp_would(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.as_i64().is_none() && n.as_u64().is_some() => {
            Value::String(n.to_string())
        }
        Value::Array(items) => Value::Array(items.iter().map(as_otlp_would).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), as_otlp_would(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}
