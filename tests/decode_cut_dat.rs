//! Pure tier, the binary: `uevrec decode` of a trace.dat cut inside its CPU data (an
//! interrupted copy of trace-cmd's v6 test file) writes every whole record, then the
//! `truncated` notice, says so on stderr and exits with status 3; the whole file exits 0.

use std::process::Command;

fn decode(path: &std::path::Path) -> (i32, Vec<String>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_uevrec"))
        .arg("decode")
        .arg(path)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines = stdout.lines().map(str::to_string).collect();
    let stderr = String::from_utf8(out.stderr).unwrap();
    (out.status.code().unwrap(), lines, stderr)
}

#[test]
fn a_cut_trace_dat_is_salvaged_with_exit_status_3() {
    let whole = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("parsers/tests/data/trace-dat/v6.dat");
    let (code, all, stderr) = decode(&whole);
    assert_eq!(code, 0, "{stderr}");
    let bytes = std::fs::read(&whole).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.dat");
    std::fs::write(&cut, &bytes[..bytes.len() - 3000]).unwrap();
    let (code, lines, stderr) = decode(&cut);
    assert_eq!(code, 3, "{stderr}");
    let (last, records) = lines.split_last().unwrap();
    let notice: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(notice["what"], "truncated", "{last}");
    assert!(
        notice["message"]
            .as_str()
            .unwrap()
            .contains("cpu 1: the file ends"),
        "{last}"
    );
    assert!(stderr.contains("truncated input salvaged"), "{stderr}");
    // The records before the cut: most of them, each one as in the whole file.
    assert!(
        records.len() > 900 && records.len() < all.len(),
        "{}",
        records.len()
    );
    for r in records {
        assert!(all.contains(r), "{r}");
    }
}
