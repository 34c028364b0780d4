//! Pure tier, the binary: what `uevrec decode` does with an existing `-o` file (replaces
//! it, as perf's `-o` does; `--append` appends; the input itself is refused as output),
//! and its words for input that is no perf.data (the magic as text and hex, no Rust debug
//! array).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn v6() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("parsers/tests/data/trace-dat/v6.dat")
}

fn decode<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(crate::common::bin())
        .arg("decode")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn decode_o_replaces_an_existing_file_and_append_appends() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    let input = v6();
    let run = |extra: &[&str]| {
        let mut args = vec![input.clone(), "-q".into(), "-o".into(), out.clone()];
        args.extend(extra.iter().map(PathBuf::from));
        let o = decode(&args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::read(&out).unwrap()
    };
    std::fs::write(&out, "an older file's last line\n").unwrap();
    let once = run(&[]);
    assert!(!once.is_empty());
    assert!(!String::from_utf8_lossy(&once).contains("older file"));
    assert_eq!(run(&[]), once, "a second decode -o gives the same file");
    let twice = run(&["--append"]);
    assert_eq!(twice, [once.clone(), once].concat());
}

#[test]
fn decode_refuses_its_input_as_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.dat");
    std::fs::copy(v6(), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let o = decode(&[&input, Path::new("-o"), &input]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("is the input file"), "{err}");
    assert_eq!(std::fs::read(&input).unwrap(), before);
}

#[test]
fn help_says_decode_replaces_and_record_appends() {
    let help = |cmd: &str| {
        let o = Command::new(crate::common::bin())
            .args([cmd, "--help"])
            .output()
            .unwrap();
        String::from_utf8(o.stdout)
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let decode = help("decode");
    assert!(decode.contains("--append"), "{decode}");
    assert!(decode.contains("`decode` replaces it"), "{decode}");
    assert!(help("record").contains("`record` appends to an existing file"));
}

#[test]
fn a_junk_file_names_its_magic_as_text_and_hex() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.data");
    std::fs::write(&junk, b"\xea\x57\x96\x25junk and more junk after it").unwrap();
    let o = decode(&[&junk]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(r#"magic "\xeaW\x96%junk" (ea 57 96 25 6a 75 6e 6b) at byte 0"#),
        "{err}"
    );
    assert!(!err.contains('['), "a Rust debug form: {err}");
}

#[test]
fn decode_format_text_is_one_plain_line_per_record_in_a_pipe() {
    let input = v6();
    let run = |format: &str| {
        let o = decode(&[
            input.as_os_str(),
            "-q".as_ref(),
            "--format".as_ref(),
            format.as_ref(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let text = run("text");
    assert!(!text.contains('\x1b'), "colors in a pipe");
    assert_eq!(
        text.lines().next(),
        Some(
            "- sh[97] cpu0 sched:sched_switch prev_comm=trace-cmd prev_pid=97 prev_prio=120 \
             prev_state=2 next_comm=swapper/0 next_pid=0 next_prio=120"
        )
    );
    let records = run("json")
        .lines()
        .filter(|l| !l.contains("\"uevrec\":\"schema\""))
        .count();
    assert_eq!(text.lines().count(), records);
}
