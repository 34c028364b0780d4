//! Pure tier, the binary: `uevrec decode` salvages cut inputs with exit status 3, the
//! `truncated` notice last and a line on stderr: a trace.dat cut inside its CPU data (an
//! interrupted copy of trace-cmd's v6 test file) gives every whole record; a `record
//! --raw` perf.data killed during its finish (trailer written, header not) gives every
//! sample. The whole files exit 0.

use std::process::Command;

fn decode(path: &std::path::Path) -> (i32, Vec<String>, String) {
    let out = Command::new(crate::common::bin())
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

/// A `record --raw` perf.data killed during its finish: the end of the records noted in
/// the unfinished header (`writer::finishing_mark`), the trailer appended, the file-mode
/// header not yet written. Made from the fuzz seeds of the unfinished and the finished
/// file (parsers/tests/perf_data_truncation.rs makes them: 12 samples, seq 1..=12): the
/// finished file's bytes after the unfinished one's are the trailer.
#[test]
fn a_perf_data_killed_while_being_finished_is_salvaged_with_exit_status_3() {
    use uevrec_parsers::perf_data::writer::{FINISHING_END_AT, finishing_mark};
    let seeds =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("parsers/fuzz/seeds/perf_data");
    // The seeds start with the fuzz target's three parameter bytes.
    let unfinished = std::fs::read(seeds.join("unfinished")).unwrap()[3..].to_vec();
    let finished = std::fs::read(seeds.join("finished")).unwrap()[3..].to_vec();
    let mut killed = unfinished.clone();
    let at = FINISHING_END_AT as usize;
    killed[at..at + 8].copy_from_slice(&finishing_mark(unfinished.len() as u64));
    killed.extend_from_slice(&finished[unfinished.len()..]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.data");
    std::fs::write(&path, &killed).unwrap();
    let (code, lines, stderr) = decode(&path);
    assert_eq!(code, 3, "{stderr}");
    let values: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seqs: Vec<u64> = values
        .iter()
        .filter_map(|v| v["fields"]["seq"].as_u64())
        .collect();
    assert_eq!(seqs, (1..=12).collect::<Vec<_>>(), "{lines:?}");
    let last = values.last().unwrap();
    assert_eq!(last["what"], "truncated", "{last}");
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("its finish was cut short"),
        "{last}"
    );
    // The finished file itself: exit 0, the same records.
    let whole = dir.path().join("finished.data");
    std::fs::write(&whole, &finished).unwrap();
    let (code, lines, stderr) = decode(&whole);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(lines.len(), values.len() - 1, "{lines:?}");
}

/// The `trace_dat` fuzz finding of issue 43 (parsers/tests/fuzz-regressions): a file cut
/// through 40 CPUs whose pages claim more lost records than a counter holds. Stderr stays
/// readable: the cut in one line ("and N more" CPUs; each CPU's words in the `truncated`
/// notice), the problems past the first ones counted after them, and the summary says the
/// lost total cannot be given instead of printing a counter's end as a count.
#[test]
fn a_trace_dat_cut_through_many_cpus_is_one_line_on_stderr() {
    let input = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("parsers/tests/fuzz-regressions/trace_dat-lost-total-overflow.bin");
    let (code, lines, stderr) = decode(&input);
    // Bad pages make it corrupt (1), not only cut short.
    assert_eq!(code, 1, "{stderr}");
    // Before: one line of 9 KB.
    let path = input.display().to_string();
    for line in stderr.lines() {
        let words = line.replace(&path, "FILE");
        assert!(
            words.len() < 400,
            "a stderr line of {} bytes: {words}",
            words.len()
        );
    }
    let salvaged: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("truncated input salvaged"))
        .collect();
    assert_eq!(salvaged.len(), 1, "{stderr}");
    assert!(
        salvaged[0].contains("the file ends inside the trace data of ")
            && salvaged[0].contains(" more); "),
        "{}",
        salvaged[0]
    );
    let notice: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(notice["what"], "truncated");
    let details = notice["message"].as_str().unwrap();
    for cpu in [19, 22, 60] {
        assert!(
            details.contains(&format!("cpu {cpu}: the file ends")),
            "{details}"
        );
    }
    // "… and N more problems" comes after the problems it continues.
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
    assert!(errors.last().unwrap().contains("… and "), "{stderr}");
    assert!(
        stderr.contains(&format!("0 records, more than {} lost", u64::MAX)),
        "{stderr}"
    );
}
