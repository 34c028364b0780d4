//! The crate's layers: every path in `src/` that names a module of a documented level (the
//! top-level modules, in the order `src/lib.rs` documents as "Layers, lowest first: …", and
//! the modules of each folder whose `mod.rs` documents its own) names one of a LOWER layer
//! than the file's own. So no import circle between modules can come back, and the order in
//! the docs is the order in the code. The rule and its checker: `tests/common/layers.rs`.

#[path = "../../tests/common/layers.rs"]
mod layers;

use std::path::Path;

#[test]
fn every_crate_import_goes_down_the_documented_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let wrong = layers::violations(&src);
    assert!(
        wrong.is_empty(),
        "{} layer violation(s) in parsers/src/ (see tests/common/layers.rs for the rule):\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
