//! Every path README.md and docs/overview.md name exists (issue 29: the layout section,
//! now in docs/overview.md, is written from the tree and must stay true). A path is a backquoted token ending in `/` or a source or
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
    for doc in ["README.md", "docs/overview.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        let bad = missing(root, &text);
        assert!(
            bad.is_empty(),
            "{doc} names paths that do not exist: {bad:?}"
        );
    }
}

#[test]
fn the_checker_finds_a_missing_path() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = "| x | `decode/` (`location.rs`, `nowhere.rs`), `src/recorder/mod.rs`, `json_line.rs` |\n\
                `options/record-tgid` `a b.rs`";
    assert_eq!(missing(root, text), ["nowhere.rs", "json_line.rs"]);
}

/// `unsafe` blocks (`unsafe {`, outside comments) in the `.rs` files under `dir`.
fn unsafe_blocks(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            n += unsafe_blocks(&path);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            n += text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .map(|l| l.matches("unsafe {").count())
                .sum::<usize>();
        }
    }
    n
}

/// The number written just before `marker` in `text` (`34 in \`src/capture/\``).
fn number_before(text: &str, marker: &str) -> usize {
    let flat = text.replace('\n', " ");
    let at = flat
        .find(marker)
        .unwrap_or_else(|| panic!("docs/overview.md no longer says `{marker}`"));
    let head = flat[..at].trim_end();
    let digits = &head[head.rfind(' ').map_or(0, |i| i + 1)..];
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no count before `{marker}`"))
}

#[test]
fn the_readme_counts_the_unsafe_blocks_of_src() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let overview = std::fs::read_to_string(root.join("docs/overview.md")).unwrap();
    let in_capture = unsafe_blocks(&root.join("src/capture"));
    let elsewhere = unsafe_blocks(&root.join("src")) - in_capture;
    assert_eq!(
        (
            number_before(&overview, "in `src/capture/`"),
            number_before(&overview, "elsewhere:")
        ),
        (in_capture, elsewhere),
        "docs/overview.md's \"How it is built\" counts (src/capture, elsewhere) unsafe blocks; the tree has these"
    );
}
