//! Pure tier, the binary: `uevrec decode` names the kernel frames of a trace.dat's
//! `kernel_stack` records from the file's own kallsyms section, not this machine's: a
//! hand-built file whose kallsyms names made-up functions gives those names (no kernel
//! has them), and without the section the notice says this machine's are used.

use std::process::Command;

use uevrec_parsers::trace_dat::writer::header;

use super::decode_windows::fixture::{self, PAGE, seq_format};

/// ftrace's kernel_stack format (Linux 6.18, x86_64).
const KERNEL_STACK: &str = "name: kernel_stack
ID: 4
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int size;\toffset:8;\tsize:4;\tsigned:1;
\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;

print fmt: \"\\t=> %ps\\n\", (void *)REC->caller[0]
";

/// A kallsyms text of made-up functions.
const KALLSYMS: &[u8] = b"ffffffff81000000 T _stext
ffffffff81000100 T uevrec_made_up_inner
ffffffff81000200 t uevrec_made_up_outer
ffffffff81000300 T _etext
";

/// One page: a seq record of thread 42, then its kernel stack (two frames).
fn page() -> Vec<u8> {
    let mut p = vec![0u8; 16];
    p[..8].copy_from_slice(&1_000u64.to_le_bytes());
    let mut entry = |body: Vec<u8>| {
        p.extend_from_slice(&((body.len() as u32 / 4) | (1 << 5)).to_le_bytes());
        p.extend_from_slice(&body);
    };
    let head = |id: u16| {
        let mut v = id.to_le_bytes().to_vec();
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(&42i32.to_le_bytes());
        v
    };
    let mut record = head(2001);
    record.extend_from_slice(&7u64.to_le_bytes());
    entry(record);
    let mut stack = head(4);
    stack.extend_from_slice(&2i32.to_le_bytes());
    stack.extend_from_slice(&[0; 4]);
    for frame in [0xffff_ffff_8100_0110u64, 0xffff_ffff_8100_0208] {
        stack.extend_from_slice(&frame.to_le_bytes());
    }
    entry(stack);
    let commit = (p.len() - 16) as u64;
    p[8..16].copy_from_slice(&commit.to_le_bytes());
    p.resize(PAGE, 0);
    p
}

/// A trace.dat of that page, with `kallsyms` in its section.
fn file(kallsyms: &[u8]) -> Vec<u8> {
    let systems = [("test".to_string(), vec![seq_format("seq", 2001)])];
    let ftrace = [KERNEL_STACK.to_string()];
    let mut meta = fixture::meta(&systems, "42 producer\n", &[], None, None);
    meta.ftrace_formats = &ftrace;
    meta.kallsyms = kallsyms;
    let (mut bytes, offsets) = header(&meta, &[PAGE as u64]);
    bytes.resize(offsets[0] as usize, 0);
    bytes.extend_from_slice(&page());
    bytes
}

/// `uevrec decode` of `bytes`: its JSON lines.
fn decode(bytes: &[u8]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stacks.dat");
    std::fs::write(&path, bytes).unwrap();
    let out = Command::new(crate::common::bin())
        .args(["decode", "--threads", "1"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (String::from_utf8(out.stdout).unwrap().lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `stacks` notice's message.
fn stacks_note(lines: &[serde_json::Value]) -> String {
    let note = lines.iter().find(|v| v["what"] == "stacks");
    note.and_then(|v| v["message"].as_str())
        .unwrap_or_else(|| panic!("a stacks notice: {lines:?}"))
        .to_string()
}

#[test]
fn kernel_frames_are_named_from_the_files_kallsyms() {
    let lines = decode(&file(KALLSYMS));
    let record = (lines.iter().find(|v| v["fields"]["seq"] == 7))
        .unwrap_or_else(|| panic!("the seq record: {lines:?}"));
    let symbols: Vec<&str> = (record["stack"].as_array())
        .unwrap_or_else(|| panic!("a stack: {record}"))
        .iter()
        .map(|f| f["symbol"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        symbols,
        ["uevrec_made_up_inner", "uevrec_made_up_outer"],
        "{record}"
    );
    assert_eq!(record["stack"][0]["context"], "kernel", "{record}");
    assert!(stacks_note(&lines).contains("the file's kallsyms"));

    let lines = decode(&file(&[]));
    let note = stacks_note(&lines);
    assert!(note.contains("this machine's /proc/kallsyms"), "{note}");
    let record = lines.iter().find(|v| v["fields"]["seq"] == 7).unwrap();
    assert!(
        !record.to_string().contains("uevrec_made_up"),
        "no made-up name without the section: {record}"
    );
}
