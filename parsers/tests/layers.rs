//! The crate's layers: every `crate::` path in `src/` (outside test modules) names a
//! module of a LOWER layer than the file's own, in the order `src/lib.rs` documents
//! ("Layers, lowest first: …"). So no import cycle between modules can come back, and the
//! order in the docs is the order in the code.
//!
//! Paths through the crate root's re-exports (`crate::Value`) count as paths to the
//! module they come from (read from lib.rs's `pub use` lines). Comments, doc comments and
//! test modules (`tests.rs` files, and the `#[cfg(test)] mod tests` at the end of a file)
//! are not imports.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The layer list of lib.rs's docs: the backquoted names from "Layers, lowest first:" to
/// the line that ends with a full stop.
fn documented_layers(lib: &str) -> Vec<String> {
    let mut layers = Vec::new();
    let mut inside = false;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = match doc.split_once("Layers, lowest first:") {
            Some((_, list)) => {
                inside = true;
                list
            }
            None => doc,
        };
        if !inside {
            continue;
        }
        for (i, piece) in doc.split('`').enumerate() {
            if i % 2 == 1 {
                layers.push(piece.to_string());
            }
        }
        if doc.trim_end().ends_with('.') {
            break;
        }
    }
    layers
}

/// The code of a file: comments cut, the test module at its end cut.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let mut out = String::new();
    for line in text.lines() {
        // A `//` inside a string literal would cut too much, never too little: good
        // enough for finding `crate::` paths.
        let code = line.split_once("//").map_or(line, |(code, _)| code);
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The first segment of every `crate::` path in `code` (`crate::{a::b, c}` gives a, c).
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `uevrec_parsers::crate::`-like text or `$crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group, at brace depth 0.
            let mut depth = 0;
            let mut name = String::new();
            let mut at_name = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        if !name.is_empty() {
                            found.push(std::mem::take(&mut name));
                        }
                        at_name = true;
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 && at_name {
                    if c.is_alphanumeric() || c == '_' {
                        name.push(c);
                    } else if !name.is_empty() {
                        at_name = false;
                    }
                }
            }
            if !name.is_empty() {
                found.push(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.push(name);
        }
    }
    found
}

/// lib.rs's `pub use module::{A, B}` lines: re-exported name → module.
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut exports = BTreeMap::new();
    let code = code_of(lib);
    for stmt in code.split(';') {
        let Some(at) = stmt.find("pub use ") else {
            continue;
        };
        let path = stmt[at + "pub use ".len()..].trim();
        let Some((module, rest)) = path.split_once("::") else {
            continue;
        };
        let names = rest
            .rsplit_once('{')
            .map_or(rest, |(_, inner)| inner.trim_end_matches('}'));
        for name in names.split(',') {
            let name = name.trim();
            let name = name.rsplit_once(" as ").map_or(name, |(_, alias)| alias);
            let name = name.rsplit("::").next().unwrap_or(name).trim();
            if !name.is_empty() {
                exports.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    exports
}

/// Every `.rs` file under `dir` but test files.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

#[test]
fn every_crate_import_goes_down_the_documented_layers() {
    let root = src();
    let lib = fs::read_to_string(root.join("lib.rs")).unwrap();
    let layers = documented_layers(&lib);
    assert!(
        layers.len() >= 10,
        "lib.rs must document the layers (\"Layers, lowest first: `a`, `b`, …\"): found {layers:?}"
    );
    let rank: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .map(|(i, l)| (l.as_str(), i))
        .collect();
    let exports = root_exports(&lib);
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();

    let mut modules_seen = BTreeSet::new();
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&root).unwrap();
        let own = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if own == "lib" {
            continue;
        }
        modules_seen.insert(own.clone());
        let Some(&own_rank) = rank.get(own.as_str()) else {
            wrong.push(format!(
                "{}: module `{own}` is not in lib.rs's layer list",
                rel.display()
            ));
            continue;
        };
        let code = code_of(&fs::read_to_string(file).unwrap());
        for first in crate_paths(&code) {
            let target = match exports.get(&first) {
                Some(module) => module.clone(),
                None => first.clone(),
            };
            if target == own {
                continue;
            }
            match rank.get(target.as_str()) {
                Some(&r) if r < own_rank => {}
                Some(_) => wrong.push(format!(
                    "{}: `crate::{first}` goes UP from `{own}` to `{target}` (lib.rs: lowest first {layers:?})",
                    rel.display()
                )),
                None => wrong.push(format!(
                    "{}: `crate::{first}`: `{target}` is not in lib.rs's layer list",
                    rel.display()
                )),
            }
        }
    }
    for layer in &layers {
        if !modules_seen.contains(layer) {
            wrong.push(format!("lib.rs lists `{layer}`, which has no file in src/"));
        }
    }
    assert!(wrong.is_empty(), "layer violations:\n{}", wrong.join("\n"));
}

#[test]
fn the_checker_sees_paths_groups_and_reexports() {
    assert_eq!(
        crate_paths("use crate::a::b;\nuse crate::{c::{d, e}, f};\n x = crate::g(); $crate::h;"),
        ["a", "c", "f", "g"]
    );
    assert_eq!(
        code_of(
            "use crate::a; // crate::b\n//! crate::c\n#[cfg(test)]\nmod tests {\n use crate::d;\n}\n"
        ),
        "use crate::a; \n\n"
    );
    let lib = "//! Layers, lowest first: `x`,\n//! `y`, `z`.\n//! Not `w`.\npub use y::{A, b::C as D};\npub use x::E;\n";
    assert_eq!(documented_layers(lib), ["x", "y", "z"]);
    let exports = root_exports(lib);
    assert_eq!(exports.get("A").map(String::as_str), Some("y"));
    assert_eq!(exports.get("D").map(String::as_str), Some("y"));
    assert_eq!(exports.get("E").map(String::as_str), Some("x"));
}
