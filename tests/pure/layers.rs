//! The recorder's layers: every path in `src/` that names a module of a documented level
//! (the top-level modules, in the order `src/lib.rs` documents as "Layers, lowest first:
//! …", and the modules of each folder whose `mod.rs` documents its own) names one of a
//! LOWER layer than the file's own, so no import circle can come back; and every folder
//! documents its order. The rule and its checker: `tests/common/layers.rs`.

#[path = "../common/layers.rs"]
mod checker;

use std::path::Path;

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_crate_import_goes_down_the_documented_layers() {
    let wrong = checker::violations(&src());
    assert!(
        wrong.is_empty(),
        "{} layer violation(s) in src/ (see tests/common/layers.rs for the rule):\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// A folder of `src/` with more than one module and no documented order could grow a
/// circle unseen: each one's head (`mod.rs`, or `F.rs` beside `F/`) says its order.
#[test]
fn every_folder_documents_its_layers() {
    let root = src();
    let mut undocumented = Vec::new();
    let mut folders = vec![root.clone()];
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if !path.is_dir() {
                continue;
            }
            folders.push(path.clone());
            let head = std::fs::read_to_string(path.join("mod.rs"))
                .or_else(|_| std::fs::read_to_string(path.with_extension("rs")))
                .unwrap_or_default();
            let modules = std::fs::read_dir(&path)
                .unwrap()
                .filter_map(Result::ok)
                .filter(|e| {
                    !matches!(
                        e.file_name().to_str(),
                        Some("mod.rs" | "tests.rs" | "tests")
                    )
                })
                .count();
            if modules > 1 && !head.contains("Layers, lowest first:") {
                undocumented.push(path.strip_prefix(&root).unwrap().display().to_string());
            }
        }
    }
    undocumented.sort();
    assert!(
        undocumented.is_empty(),
        "these folders of src/ do not document \"Layers, lowest first: …\" in their head: {undocumented:?}"
    );
}
