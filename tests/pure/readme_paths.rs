//! Every path README.md names exists (issue 29: the layout section is written from the
//! tree and must stay true). A path is a backquoted token ending in `/` or a source or
//! document extension; it may be relative to the repository root, `parsers/src`, `src`,
//! `tests`, or to a folder named earlier on the same line (`decode/` … `location.rs`).

use std::path::{Path, PathBuf};

fn is_path(token: &str) -> bool {
    let exts = [
        ".rs", ".md", ".sh", ".toml", ".py", ".service", ".yaml", ".c",
    ];
    (token.ends_with('/') || exts.iter().any(|e| token.ends_with(e)))
        && !token.contains(['*', '<', '>', '…', '{', '}', '$', '=', '|'])
        && !token.starts_with(['/', '-', '~'])
        && !token.starts_with("http")
        && !token.starts_with("../")
}

/// The backquoted tokens of `line` without spaces.
fn tokens(line: &str) -> impl Iterator<Item = &str> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| !t.is_empty() && !t.contains(char::is_whitespace))
}

/// The paths of `text` that exist nowhere under `root`.
fn missing(root: &Path, text: &str) -> Vec<String> {
    let mut bad = Vec::new();
    for line in text.lines() {
        let mut folders: Vec<PathBuf> = Vec::new();
        for t in tokens(line).filter(|t| is_path(t)) {
            let bases = [".", "parsers/src", "src", "tests"].map(|b| root.join(b));
            let found = folders
                .iter()
                .rev()
                .chain(bases.iter())
                .map(|b| b.join(t))
                .find(|p| p.exists());
            match found {
                Some(p) if t.ends_with('/') => folders.push(p),
                Some(_) => {}
                None => bad.push(t.to_string()),
            }
        }
    }
    bad
}

#[test]
fn every_path_the_readme_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let bad = missing(root, &readme);
    assert!(
        bad.is_empty(),
        "README.md names paths that do not exist: {bad:?}"
    );
}

#[test]
fn the_checker_finds_a_missing_path() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = "| x | `decode/` (`location.rs`, `nowhere.rs`), `src/recorder.rs`, `json_line.rs` |\n\
                `options/record-tgid` `a b.rs`";
    assert_eq!(missing(root, text), ["nowhere.rs", "json_line.rs"]);
}
