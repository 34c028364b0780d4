//! The recorder's layers: every path in `src/` that names a module of a documented level
//! (the top-level modules, in the order `src/lib.rs` documents as "Layers, lowest first:
//! …", and the modules of each folder whose `mod.rs` documents its own) names one of a
//! LOWER layer than the file's own, so no import circle can come back. The rule and its
//! checker: `tests/common/layers.rs`.

#[path = "../common/layers.rs"]
mod layers;

use std::path::Path;

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_crate_import_goes_down_the_documented_layers() {
    let wrong = layers::violations(&src());
    assert!(
        wrong.is_empty(),
        "{} layer violation(s) in src/ (see tests/common/layers.rs for the rule):\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
