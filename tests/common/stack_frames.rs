//! A record's `stack` key read back: the user frames' names and whether a call chain
//! is among them (the host tier's stack tests).

use serde_json::Value;

/// The user frames' symbols of a record, innermost first (`?`: a frame without one).
pub fn user_symbols(r: &Value) -> Vec<String> {
    r["stack"]
        .as_array()
        .expect("a stack on every record")
        .iter()
        .filter(|f| f["context"] == "user")
        .map(|f| f["symbol"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// Whether `names` holds `chain` one right after the other.
pub fn holds_in_a_row(names: &[String], chain: &[&str]) -> bool {
    names
        .windows(chain.len())
        .any(|w| w.iter().zip(chain).all(|(a, b)| a == b))
}
