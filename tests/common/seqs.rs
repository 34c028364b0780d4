//! The `getppid(424242, SEQ)` stream's records read back: a line's SEQ, whole lines, and
//! `uevrec decode FILE`'s lines (tests/host/crash.rs and instance.rs).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The first argument of the producers' getppid calls, which marks their records.
pub const MAGIC: u64 = 424_242;

/// The SEQ of a record line of the producer, if it is one.
pub fn seq(v: &Value) -> Option<u64> {
    (v["event"] == "sys_enter"
        && v["fields"]["id"] == u64::from(super::NR_GETPPID)
        && v["fields"]["args"][0] == MAGIC)
        .then(|| v["fields"]["args"][1].as_u64())
        .flatten()
}

/// Every line of `text` parsed (each must be JSON and end with `\n`: `what` names the
/// file in the failure).
pub fn whole_lines(text: &str, what: &str) -> Vec<Value> {
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{what} ends in part of a line: {:?}",
        &text[text.len().saturating_sub(200)..]
    );
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {l}")))
        .collect()
}

/// `uevrec decode FILE`'s lines; the decode must succeed (`what` names it in the
/// failure).
pub fn decoded(file: &Path, what: &str) -> Vec<Value> {
    let dec = Command::new(super::bin())
        .arg("decode")
        .arg(file)
        .output()
        .unwrap();
    assert!(
        dec.status.success(),
        "decode {what}: {}",
        String::from_utf8_lossy(&dec.stderr)
    );
    whole_lines(&String::from_utf8(dec.stdout).unwrap(), what)
}
