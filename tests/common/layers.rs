//! The layer rule of a crate's modules, one checker for both crates
//! (`parsers/tests/layers.rs`, `tests/pure/layers.rs`): [`violations`].
//!
//! A crate root (`lib.rs`) documents the order of its top-level modules ("Layers, lowest
//! first: `a`, `b`, …."), and a folder's head (`F/mod.rs`, or `F.rs` beside `F/`) may
//! document one for the modules inside `F/`. Where an order is documented, a file of one
//! of those modules names (through `crate::`, `super::` or `self::` paths) only the modules
//! listed before its own, so no import circle can come back and the documented order is
//! the code's. Std-only, so that every test crate can include it by `#[path]`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Everything in `src` (a crate's `src/` folder) that breaks the layer rule, one line each
/// (empty: none). For the crate root and for every folder whose head documents "Layers,
/// lowest first: …":
/// - the list names every module of the level (a `.rs` file or a folder with `mod.rs`),
///   each once, and nothing else;
/// - a path from a file inside one of the level's modules that names the level's module
///   `X` (`crate::X` at the root; in folder `F`, `crate::F::X`, or `super::X` and the like
///   resolved from the file's own module) names a module listed before its own, or its
///   own. A name that the level's head imports (`use`, `pub use`: the root's re-exports,
///   bare or `self::` paths) counts as the module it comes from; an item defined in the
///   head itself (`F::PerfDataError`) is the level's own, not a layer.
///
/// Not read: comments and doc comments; test modules (`tests.rs`, a `tests/` folder, the
/// `#[cfg(test)] mod tests` at the end of a file); `$crate::` (macros); bare paths outside
/// `use` lines of heads (they name an extern crate or an item in scope, never a sibling);
/// the crate's binary root `main.rs` beside `lib.rs` (another crate). A path inside an
/// inline module (`mod opt { … }`) resolves from that module (`mod tests { … }`: not
/// read). The head of a level is above all of its modules (it declares them): its own
/// paths are checked one level up.
pub fn violations(src: &Path) -> Vec<String> {
    let levels = levels(src);
    let mut wrong: Vec<String> = levels.iter().flat_map(list_problems).collect();
    // (file, level, own module, module gone up to) → the paths that do it, as written.
    let mut up: BTreeMap<(PathBuf, usize, String, String), Vec<String>> = BTreeMap::new();
    for file in sources(src) {
        let code = code_of(&read(&src.join(&file)));
        let inline = inline_modules(&code);
        for (at, raw) in paths(&code) {
            let Some(module) = module_at(&module_of(&file), &inline, at) else {
                continue; // in an inline test module
            };
            let Some(target) = absolute(&raw, &module) else {
                continue;
            };
            let written = written(&raw);
            for (i, level) in levels.iter().enumerate() {
                match judge(level, &module, &target) {
                    None => {}
                    Some(Wrong::Up { own, to }) => {
                        let paths = up.entry((file.clone(), i, own, to)).or_default();
                        if !paths.contains(&written) {
                            paths.push(written.clone());
                        }
                    }
                    Some(Wrong::Unknown(name)) => wrong.push(format!(
                        "{}: `{written}`: `{name}` is no module of {}, nor an item or import \
                         of {}",
                        file.display(),
                        level.folder(),
                        level.head.display()
                    )),
                }
            }
        }
    }
    for ((file, i, own, to), paths) in up {
        let level = &levels[i];
        wrong.push(format!(
            "{}: goes UP from `{own}` to `{to}`: `{}` ({}: lowest first {:?})",
            file.display(),
            paths.join("`, `"),
            level.head.display(),
            level.order
        ));
    }
    wrong
}

/// A module path from the crate root (`["otlp", "fields"]`; empty: the root).
type ModPath = Vec<String>;

/// A level whose order is documented: the crate root or a folder, with its head.
struct Level {
    /// The folder's module path (empty: the root).
    path: ModPath,
    /// The head file, relative to `src` (`lib.rs`, `otlp/mod.rs`).
    head: PathBuf,
    /// The documented order, lowest first.
    order: Vec<String>,
    /// The modules on disk.
    modules: BTreeSet<String>,
    /// The head's `use` names: name → the module path it imports (`None`: from outside
    /// the crate).
    imports: BTreeMap<String, Option<ModPath>>,
    /// The head's own code ([`code_of`], inline modules cut), for the items it defines.
    code: String,
}

/// What a level's name `F::X` is.
#[derive(Debug, PartialEq)]
enum Name {
    /// One of the level's modules, directly or through an import of the head.
    Module(String),
    /// Something else that exists: an item of the head, or an import from outside `F`.
    Other,
    /// Nothing the checker knows.
    Unknown,
}

impl Level {
    /// What `F::name` is.
    fn name(&self, name: &str) -> Name {
        if self.modules.contains(name) {
            return Name::Module(name.to_string());
        }
        match self.imports.get(name) {
            Some(Some(path)) if is_inside(path, &self.path) => {
                Name::Module(path[self.path.len()].clone())
            }
            Some(_) => Name::Other,
            None if defines(&self.code, name) => Name::Other,
            None => Name::Unknown,
        }
    }

    /// The rank of `module` in the documented order.
    fn rank(&self, module: &str) -> Option<usize> {
        self.order.iter().position(|m| m == module)
    }

    /// The folder as messages name it.
    fn folder(&self) -> String {
        if self.path.is_empty() {
            "the crate root".to_string()
        } else {
            format!("{}/", self.path.join("/"))
        }
    }
}

/// What is wrong with a path.
enum Wrong {
    /// It names the module `to`, listed after the file's own module `own`.
    Up { own: String, to: String },
    /// It names something the level does not have.
    Unknown(String),
}

/// What is wrong, at `level`, with a path from a file of `module` to `target` (both
/// from the crate root), if anything: nothing when one of them is outside the level.
fn judge(level: &Level, module: &[String], target: &[String]) -> Option<Wrong> {
    if !is_inside(module, &level.path) || !is_inside(target, &level.path) {
        return None; // a level above judges a path that leaves the folder
    }
    let depth = level.path.len();
    let own = &module[depth];
    match level.name(&target[depth]) {
        Name::Module(to) if &to == own => None,
        Name::Module(to) => match (level.rank(&to), level.rank(own)) {
            (Some(to_rank), Some(own_rank)) if to_rank > own_rank => Some(Wrong::Up {
                own: own.clone(),
                to,
            }),
            _ => None, // a module missing from the list: `list_problems` says so
        },
        Name::Other => None,
        Name::Unknown => Some(Wrong::Unknown(target[depth].clone())),
    }
}

/// A path as written, without a group's `self` (`super::wire::{self}` is `super::wire`).
fn written(raw: &[String]) -> String {
    let raw = raw.strip_suffix(&["self".to_string()]).unwrap_or(raw);
    raw.join("::")
}

/// Whether `module` is strictly inside `folder` (a module of it or deeper).
fn is_inside(module: &[String], folder: &[String]) -> bool {
    module.len() > folder.len() && module.starts_with(folder)
}

/// The documented levels of the crate in `src`: the root (always, even without a list)
/// and every folder whose head has a list.
fn levels(src: &Path) -> Vec<Level> {
    let mut levels = vec![level(src, Vec::new(), PathBuf::from("lib.rs"))];
    let mut folders = Vec::new();
    folders_under(src, Path::new(""), &mut folders);
    for folder in folders {
        let Some(head) = head_of(src, &folder) else {
            continue;
        };
        let path = folder
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let level = level(src, path, head);
        if !level.order.is_empty() {
            levels.push(level);
        }
    }
    levels
}

/// The level of the folder whose module path is `path` and whose head is `head`.
fn level(src: &Path, path: ModPath, head: PathBuf) -> Level {
    let text = read(&src.join(&head));
    let dir = src.join(path.join("/"));
    let modules = modules_in(&dir, path.is_empty());
    let code = outside_inline_modules(&code_of(&text));
    let imports = imports(&code, &path, &modules);
    Level {
        order: documented_layers(&text),
        path,
        head,
        modules,
        imports,
        code,
    }
}

/// What is wrong with `level`'s list: missing modules, names that are none, repeats.
fn list_problems(level: &Level) -> Vec<String> {
    let head = level.head.display();
    let folder = level.folder();
    let mut wrong = Vec::new();
    if level.order.is_empty() {
        wrong.push(format!(
            "{head} documents no layer list (\"Layers, lowest first: `a`, `b`, ….\")"
        ));
    }
    for module in &level.modules {
        if level.rank(module).is_none() {
            wrong.push(format!(
                "{head}: module `{module}` of {folder} is not in its layer list"
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for name in &level.order {
        if !seen.insert(name) {
            wrong.push(format!("{head}: the layer list names `{name}` twice"));
        } else if name == "tests" {
            wrong.push(format!(
                "{head}: the layer list names `tests`: test modules are not layers"
            ));
        } else if !level.modules.contains(name) {
            wrong.push(format!(
                "{head}: the layer list names `{name}`, which is no module of {folder}"
            ));
        }
    }
    wrong
}

/// The layer list of a head's docs: the backquoted names from "Layers, lowest first:" to
/// the line that ends with a full stop.
fn documented_layers(head: &str) -> Vec<String> {
    let mut layers = Vec::new();
    let mut inside = false;
    for line in head.lines() {
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

/// The code of a file: the test module at its end cut, comments cut, and the contents of
/// string and character literals (so that neither a `//` nor a brace in one misleads).
/// Only an inline `mod tests {` is cut: a `mod tests;` declaration (the module in its own
/// `tests.rs`, which is skipped) may stand before the rest of the file's code.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let skipped = if rest.starts_with("//") {
            rest.find('\n').unwrap_or(rest.len())
        } else if rest.starts_with("/*") {
            block_comment_len(rest)
        } else if c == '"' {
            out.push_str("\"\"");
            string_len(rest)
        } else if c == 'r' && raw_prefix_ok(&out) && raw_string_len(rest).is_some() {
            out.push_str("\"\"");
            raw_string_len(rest).unwrap_or(1)
        } else if c == '\'' {
            match char_literal_len(rest) {
                Some(len) => {
                    out.push_str("' '");
                    len
                }
                None => {
                    out.push(c);
                    1
                }
            }
        } else {
            out.push(c);
            c.len_utf8()
        };
        rest = &rest[skipped..];
    }
    out
}

/// Whether an `r` after `before` can start a raw string: not inside a name, but perhaps
/// after a `b` (`br"…"`).
fn raw_prefix_ok(before: &str) -> bool {
    let before = before.strip_suffix('b').unwrap_or(before);
    !before.ends_with(is_name_char)
}

/// The length of the block comment `/* … */` (nested ones inside) at the start of `text`.
fn block_comment_len(text: &str) -> usize {
    let mut depth = 0;
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        if rest.starts_with("/*") {
            depth += 1;
            at += 2;
        } else if rest.starts_with("*/") {
            depth -= 1;
            at += 2;
            if depth == 0 {
                return at;
            }
        } else {
            at += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    text.len()
}

/// The length of the string literal `"…"` at the start of `text` (escapes skipped).
fn string_len(text: &str) -> usize {
    let mut chars = text.char_indices().skip(1);
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '"' => return at + 1,
            _ => {}
        }
    }
    text.len()
}

/// The length of the raw string literal `r"…"` / `r#"…"#` at the start of `text`, if one
/// starts there.
fn raw_string_len(text: &str) -> Option<usize> {
    let hashes = text[1..].len() - text[1..].trim_start_matches('#').len();
    let body = text[1 + hashes..].strip_prefix('"')?;
    let end = format!("\"{}", "#".repeat(hashes));
    let close = body.find(&end).map_or(body.len(), |at| at + end.len());
    Some(2 + hashes + close)
}

/// The length of the character literal (`'x'`, `'\n'`, `'\u{…}'`) at the start of
/// `text`; `None` for a lifetime or label (`'a`).
fn char_literal_len(text: &str) -> Option<usize> {
    let mut chars = text.char_indices().skip(1);
    let (_, first) = chars.next()?;
    if first == '\\' {
        return text.get(3..)?.find('\'').map(|at| at + 4);
    }
    let (at, close) = chars.next()?;
    (close == '\'').then_some(at + 1)
}

/// The modules written inline in `code` (`mod name { … }`): where each one's braces open
/// and close, and its name.
fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("mod") {
        if code[..at].ends_with(is_name_char) {
            continue;
        }
        let after = &code[at + 3..];
        let start = at + 3 + (after.len() - after.trim_start().len());
        if start == at + 3 {
            continue; // `mod` is part of a longer word
        }
        let Some(name) = name_at(code, start) else {
            continue;
        };
        let open = skip_space(code, start + name.len());
        if code[open..].starts_with('{') {
            found.push((open, matching_brace(code, open), name.to_string()));
        }
    }
    found
}

/// Where the brace opened at `open` of `code` closes (literals and comments are cut).
fn matching_brace(code: &str, open: usize) -> usize {
    let mut depth = 0;
    for (at, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + at;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// The module at position `at` of a file of module `file`, with its inline modules
/// `inline` ([`inline_modules`]); `None` inside an inline test module (`mod tests`).
fn module_at(file: &[String], inline: &[(usize, usize, String)], at: usize) -> Option<ModPath> {
    let mut module = file.to_vec();
    for (open, close, name) in inline {
        if *open < at && at < *close {
            if name == "tests" {
                return None;
            }
            module.push(name.clone());
        }
    }
    Some(module)
}

/// `code` without the bodies of its inline modules: what a head itself imports and
/// defines.
fn outside_inline_modules(code: &str) -> String {
    let mut out = String::new();
    let mut from = 0;
    for (open, close, _) in inline_modules(code) {
        if open >= from {
            out.push_str(&code[from..open]);
            from = (close + 1).min(code.len());
        }
    }
    out.push_str(&code[from..]);
    out
}

/// Every path of `code` that starts with `crate`, `super` or `self` (`$crate` and
/// `x::crate` excluded), with where it starts; groups expanded: `use super::{a::b, c}`
/// gives `super::a::b` and `super::c`.
fn paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let Some(start) = path_start(code, at) else {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let mut trees = Vec::new();
        at = use_tree(code, start, Vec::new(), &mut trees);
        found.extend(trees.into_iter().map(|(path, _)| (start, path)));
    }
    found
}

/// Whether a path starting with `crate::`, `super::` or `self::` begins at `at` (a
/// keyword not preceded by a name's character, `$` or `:`): `Some(at)` if so.
fn path_start(code: &str, at: usize) -> Option<usize> {
    let rest = &code[at..];
    let keyword = ["crate", "super", "self"]
        .into_iter()
        .find(|k| rest.starts_with(k))?;
    let before = code[..at].chars().next_back();
    if before.is_some_and(|c| is_name_char(c) || c == '$' || c == ':') {
        return None;
    }
    rest[keyword.len()..]
        .trim_start()
        .starts_with("::")
        .then_some(at)
}

/// Parse the use tree (a path, perhaps ending in `{…}` groups or `*`, perhaps `as NAME`)
/// starting at `at` of `code`, under `prefix`; push each path with its alias to `out`.
/// Returns where the tree ends. A path in an expression is a tree without groups: it ends
/// at the first character that does not continue it (`(`, `<`, `;`, …).
fn use_tree(
    code: &str,
    mut at: usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    let mut path = prefix;
    loop {
        at = skip_space(code, at);
        let rest = &code[at..];
        if rest.starts_with('{') {
            return group(code, at + 1, &path, out);
        }
        if rest.starts_with('*') {
            path.push("*".to_string());
            out.push((path, None));
            return at + 1;
        }
        let Some(name) = name_at(code, at) else {
            break;
        };
        path.push(name.to_string());
        at += name.len();
        let next = skip_space(code, at);
        if code[next..].starts_with("::") {
            at = next + 2;
            continue;
        }
        let mut alias = None;
        if name_at(code, next) == Some("as") {
            let after = skip_space(code, next + 2);
            if let Some(name) = name_at(code, after) {
                alias = Some(name.to_string());
                at = after + name.len();
            }
        }
        out.push((path, alias));
        return at;
    }
    out.push((path, None));
    at
}

/// The members of a group `{a, b::c, …}` whose contents start at `at`, each a tree under
/// `path`; returns where the group ends (after its `}`).
fn group(
    code: &str,
    mut at: usize,
    path: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    loop {
        at = skip_space(code, at);
        match code[at..].chars().next() {
            None => return at,
            Some('}') => return at + 1,
            Some(',') => at += 1,
            Some(_) => {
                let end = use_tree(code, at, path.to_vec(), out);
                if end == at {
                    return at; // not a use tree: stop rather than loop
                }
                at = end;
            }
        }
    }
}

/// The name (identifier) starting at `at`, if one does.
fn name_at(code: &str, at: usize) -> Option<&str> {
    let rest = &code[at..];
    if !rest.starts_with(|c: char| c.is_alphabetic() || c == '_') {
        return None;
    }
    let end = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Whether `c` can be part of a name.
fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `at` moved past white space.
fn skip_space(code: &str, at: usize) -> usize {
    let rest = &code[at..];
    at + (rest.len() - rest.trim_start().len())
}

/// The module path `raw` names from a file of `module`: `crate::` from the root,
/// `self::` from `module`, each `super::` one up; `None` for a bare path or one above the
/// root. A group's `self` member (`use a::{self}`) names its prefix.
fn absolute(raw: &[String], module: &[String]) -> Option<ModPath> {
    let mut segments = raw.iter().map(String::as_str).peekable();
    let mut base: ModPath = match segments.peek() {
        Some(&"crate") => {
            segments.next();
            Vec::new()
        }
        Some(&"self" | &"super") => module.to_vec(),
        _ => return None,
    };
    while let Some(&keyword @ ("self" | "super")) = segments.peek() {
        if keyword == "super" {
            base.pop()?;
        }
        segments.next();
    }
    base.extend(segments.map(str::to_string));
    if base.last().is_some_and(|s| s == "self") {
        base.pop();
    }
    Some(base)
}

/// The names a head of module `module` imports (`use` lines, `pub` or not), each with the
/// module path it comes from (`None`: outside the crate); `modules` are the folder's, which
/// bare paths name (`use fields::Text`).
fn imports(
    code: &str,
    module: &[String],
    modules: &BTreeSet<String>,
) -> BTreeMap<String, Option<ModPath>> {
    let mut names = BTreeMap::new();
    for stmt in code.split(';') {
        let Some(at) = use_keyword(stmt) else {
            continue;
        };
        let mut trees = Vec::new();
        use_tree(stmt, at + "use".len(), Vec::new(), &mut trees);
        for (raw, alias) in trees {
            let mut raw = raw;
            if raw.last().is_some_and(|s| s == "self") {
                raw.pop();
            }
            let Some(name) = alias.or_else(|| raw.last().cloned()) else {
                continue;
            };
            if name == "*" {
                continue;
            }
            let from = absolute(&raw, module).or_else(|| {
                let first = raw.first()?;
                modules.contains(first).then(|| [module, &raw[..]].concat())
            });
            names.insert(name, from);
        }
    }
    names
}

/// Where the `use` keyword of the statement `stmt` is, if it has one.
fn use_keyword(stmt: &str) -> Option<usize> {
    stmt.match_indices("use").map(|(at, _)| at).find(|&at| {
        let before = stmt[..at].chars().next_back();
        let after = stmt[at + 3..].chars().next();
        !before.is_some_and(is_name_char) && after.is_some_and(char::is_whitespace)
    })
}

/// Whether `code` defines an item called `name` (`fn`, `struct`, `const`, `mod`, …): the
/// name, whole, after such a keyword and white space.
fn defines(code: &str, name: &str) -> bool {
    const KEYWORDS: [&str; 11] = [
        "fn",
        "struct",
        "enum",
        "union",
        "trait",
        "type",
        "const",
        "static",
        "mut",
        "mod",
        "macro_rules!",
    ];
    code.match_indices(name).any(|(at, _)| {
        let whole = !code[at + name.len()..].starts_with(is_name_char);
        let before = &code[..at];
        let word = last_word(before.trim_end());
        whole && before.ends_with(char::is_whitespace) && KEYWORDS.contains(&word)
    })
}

/// The word `text` ends with (name characters and `!`).
fn last_word(text: &str) -> &str {
    let start = text
        .char_indices()
        .rev()
        .find(|&(_, c)| !(is_name_char(c) || c == '!'))
        .map_or(0, |(at, c)| at + c.len_utf8());
    &text[start..]
}

/// The module of the file `file` (relative to `src`): `a/b.rs` and `a/b/mod.rs` are
/// `a::b`, `lib.rs` the root.
fn module_of(file: &Path) -> ModPath {
    let mut path: ModPath = file
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = path.pop().unwrap_or_default();
    match last.strip_suffix(".rs") {
        Some("mod") => {}
        Some("lib") if path.is_empty() => {}
        Some(name) => path.push(name.to_string()),
        None => path.push(last),
    }
    path
}

/// The modules of the folder `dir`: its `.rs` files and its folders with a `mod.rs` (or a
/// `.rs` file beside them), test modules and (at the root) crate roots left out.
fn modules_in(dir: &Path, root: bool) -> BTreeSet<String> {
    let mut modules = BTreeSet::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let module = if path.is_dir() {
            let has_head = path.join("mod.rs").exists() || dir.join(format!("{name}.rs")).exists();
            has_head.then_some(name)
        } else {
            name.strip_suffix(".rs").map(str::to_string)
        };
        let Some(module) = module else {
            continue;
        };
        let skipped = module == "mod" || module == "tests";
        if !skipped && !(root && (module == "lib" || module == "main")) {
            modules.insert(module);
        }
    }
    modules
}

/// Every folder under `dir` (relative to `src`), test folders left out.
fn folders_under(src: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(src.join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap();
        if path.is_dir() && name != "tests" {
            let rel = dir.join(name);
            out.push(rel.clone());
            folders_under(src, &rel, out);
        }
    }
}

/// The head of `folder` (relative to `src`): its `mod.rs`, or the `.rs` file beside it.
fn head_of(src: &Path, folder: &Path) -> Option<PathBuf> {
    let inside = folder.join("mod.rs");
    let beside = folder.with_extension("rs");
    [inside, beside].into_iter().find(|f| src.join(f).exists())
}

/// Every `.rs` file of the crate in `src` (relative to it) but test files and `main.rs`
/// beside `lib.rs`, sorted.
fn sources(src: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![PathBuf::new()];
    folders_under(src, Path::new(""), &mut folders);
    for folder in folders {
        for entry in fs::read_dir(src.join(&folder)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap();
            let rust = path.extension().is_some_and(|e| e == "rs");
            let binary =
                folder.as_os_str().is_empty() && name == "main.rs" && src.join("lib.rs").exists();
            if path.is_file() && rust && name != "tests.rs" && !binary {
                files.push(folder.join(name));
            }
        }
    }
    files.sort();
    files
}

/// The text of `file`.
fn read(file: &Path) -> String {
    fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(paths: Vec<(usize, Vec<String>)>) -> Vec<String> {
        paths.into_iter().map(|(_, p)| p.join("::")).collect()
    }

    #[test]
    fn the_checker_sees_paths_groups_and_reexports() {
        assert_eq!(
            strings(paths(
                "use crate::a::b;\nuse crate::{c::{d, e}, f};\n x = crate::g(); $crate::h;"
            )),
            [
                "crate::a::b",
                "crate::c::d",
                "crate::c::e",
                "crate::f",
                "crate::g"
            ]
        );
        assert_eq!(
            code_of(
                "use crate::a; // crate::b\n//! crate::c\n#[cfg(test)]\nmod tests {\n use crate::d;\n}\n"
            ),
            "use crate::a; \n\n"
        );
        let code = code_of(
            "let s = \"// crate::a {\\\" crate::b\"; let c = '{'; let e = '\\''; let l: &'a u8;\n\
             let r = br#\"crate::c \"}\"#; /* crate::d /* nested */ { */ crate::e",
        );
        assert_eq!(
            code,
            "let s = \"\"; let c = ' '; let e = ' '; let l: &'a u8;\nlet r = b\"\";  crate::e"
        );
        assert_eq!(strings(paths(&code)), ["crate::e"]);
        let code = "mod a {\n mod b { x }\n}\nmod c;\nfn pmod() { mod d {} }\n";
        let inline = inline_modules(code);
        let names: Vec<&str> = inline.iter().map(|(_, _, n)| n.as_str()).collect();
        assert_eq!(names, ["a", "b", "d"]);
        let inside_b = code.find('x').unwrap();
        assert_eq!(
            module_at(&[], &inline, inside_b),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            outside_inline_modules(code),
            "mod a \nmod c;\nfn pmod() { mod d  }\n"
        );
        let lib = "//! Layers, lowest first: `x`,\n//! `y`, `z`.\n//! Not `w`.\npub use y::{A, b::C as D};\npub use x::E;\n";
        assert_eq!(documented_layers(lib), ["x", "y", "z"]);
        let modules: BTreeSet<String> = ["x", "y", "z"].map(String::from).into();
        let code = code_of(lib);
        let root = Level {
            path: Vec::new(),
            head: PathBuf::from("lib.rs"),
            order: documented_layers(lib),
            imports: imports(&code, &[], &modules),
            modules,
            code,
        };
        assert_eq!(root.name("A"), Name::Module("y".into()));
        assert_eq!(root.name("D"), Name::Module("y".into()));
        assert_eq!(root.name("E"), Name::Module("x".into()));
        assert_eq!(root.name("z"), Name::Module("z".into()));
        assert_eq!(root.name("C"), Name::Unknown);
    }

    #[test]
    fn super_self_and_aliases_resolve_from_the_file_module() {
        let module = ["f", "low"].map(String::from);
        let code = "use super::{high::{self, H}};\nuse super::super::g as G;\nuse self::inner::X;\n\
                    let p = super::super::top::f(); pub(super) fn q() {} pub(crate) fn r() {}\n\
                    Self::new(); x.self_::y; abc::super::z;";
        let resolved: Vec<String> = paths(code)
            .iter()
            .filter_map(|(_, raw)| absolute(raw, &module))
            .map(|p| p.join("::"))
            .collect();
        assert_eq!(
            resolved,
            ["f::high", "f::high::H", "g", "f::low::inner::X", "top::f"]
        );
        assert_eq!(
            absolute(&["super".into(), "super".into()], &module),
            Some(vec![])
        );
        assert_eq!(absolute(&["std".into(), "fmt".into()], &module), None);
        let head = "pub use low::Re;\nuse self::high::{Up as Lifted};\nuse std::fmt;\n\
                    pub struct Own;\npub(crate) const LIMIT: u32 = 1;\nfn helper() {}\n";
        let modules = ["low", "high"].map(String::from).into();
        let names = imports(head, &["f".to_string()], &modules);
        let from = |name: &str| names.get(name).cloned().flatten().map(|p| p.join("::"));
        assert_eq!(from("Re").as_deref(), Some("f::low::Re"));
        assert_eq!(from("Lifted").as_deref(), Some("f::high::Up"));
        assert_eq!(names.get("fmt"), Some(&None));
        for item in ["Own", "LIMIT", "helper"] {
            assert!(defines(head, item), "{item}");
        }
        for nothing in ["Ow", "LIM", "fmt", "u32"] {
            assert!(!defines(head, nothing), "{nothing}");
        }
    }

    /// A crate tree written under a fresh temporary folder (removed when dropped).
    struct FakeCrate(PathBuf);

    impl FakeCrate {
        fn new(name: &str, files: &[(&str, &str)]) -> Self {
            let dir =
                std::env::temp_dir().join(format!("uevrec-layers-{}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            for (file, text) in files {
                let path = dir.join(file);
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(path, text).unwrap();
            }
            FakeCrate(dir)
        }
    }

    impl Drop for FakeCrate {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// Each violation of `files` contains exactly one of `expected` and each of `expected`
    /// is in one violation.
    fn assert_violations(name: &str, files: &[(&str, &str)], expected: &[&str]) {
        let fake = FakeCrate::new(name, files);
        let found = violations(&fake.0);
        let matches = |e: &str| found.iter().filter(|v| v.contains(e)).count();
        for e in expected {
            assert_eq!(matches(e), 1, "{e:?} once in {found:#?}");
        }
        for v in &found {
            let n = expected.iter().filter(|e| v.contains(*e)).count();
            assert_eq!(n, 1, "{v:?} matches one of {expected:?}");
        }
    }

    #[test]
    fn the_root_list_is_complete_and_followed() {
        assert_violations(
            "root",
            &[
                (
                    "lib.rs",
                    "//! Layers, lowest first: `a`, `b`, `ghost`.\nmod a;\nmod b;\nmod c;\n\
                     pub use b::B;\npub fn root_item() {}\n",
                ),
                ("main.rs", "fn main() { crate::c::x(); }\n"),
                (
                    "a.rs",
                    "use crate::B; // crate::c\nuse crate::a::x;\nfn f() { crate::root_item() }\n\
                     use crate::nothing;\n$crate::b::y;\n",
                ),
                (
                    "b.rs",
                    "use crate::a;\n#[cfg(test)]\nmod tests {\n use crate::c;\n}\n",
                ),
                ("c.rs", "use crate::a;\n"),
                ("tests.rs", "use crate::c;\n"),
            ],
            &[
                "a.rs: goes UP from `a` to `b`: `crate::B` (lib.rs: lowest first",
                "a.rs: `crate::nothing`: `nothing` is no module",
                "lib.rs: module `c` of the crate root is not in its layer list",
                "names `ghost`, which is no module of the crate root",
            ],
        );
    }

    #[test]
    fn folders_with_a_list_are_checked_at_every_depth() {
        let head = "//! A folder.\n//!\n//! Layers, lowest first: `low`, `sub`,\n//! `high`.\n\
                    mod high;\nmod low;\nmod sub;\npub use low::Re;\nuse high::Up;\n\
                    pub struct Own;\n#[cfg(test)]\nmod tests;\n";
        assert_violations(
            "folders",
            &[
                (
                    "lib.rs",
                    "//! Layers, lowest first: `f`, `g`.\nmod f;\nmod g;\n",
                ),
                // Into a folder from outside it: judged at the root only.
                ("g.rs", "use crate::f::high;\n"),
                ("f/mod.rs", head),
                (
                    "f/low.rs",
                    "use super::high::H;\nuse super::Up;\nuse super::{Own, Re};\n\
                     use crate::f::sub::S;\nuse crate::g;\nfn f() { super::Nope }\n\
                     mod inner {\n    use super::super::high;\n}\n\
                     mod tests {\n    use super::super::high;\n}\nconst C: char = '}';\n",
                ),
                (
                    "f/high.rs",
                    "use super::{low, sub::S, Re};\nuse crate::f::low::L;\nuse self::inner::I;\n\
                     mod opt {\n    const X: u8 = super::super::low::X;\n}\n",
                ),
                ("f/tests.rs", "use super::high;\n"),
                (
                    "f/sub/mod.rs",
                    "//! Layers, lowest first: `x`, `y`.\nmod x;\nmod y;\nuse super::low;\n",
                ),
                ("f/sub/x.rs", "use super::y::Y;\nuse super::super::high;\n"),
                (
                    "f/sub/y.rs",
                    "use super::x;\nuse super::super::low;\nuse crate::f::sub::x::X;\n",
                ),
                // No list: not a level.
                ("f/high/inner.rs", "use super::super::sub;\n"),
                ("f/high/deep.rs", "use crate::f::high::inner;\n"),
            ],
            &[
                "f/low.rs: goes UP from `low` to `high`: `super::high::H`, `super::Up`, \
                 `super::super::high` (f/mod.rs: lowest first",
                "f/low.rs: goes UP from `low` to `sub`: `crate::f::sub::S` (",
                "f/low.rs: goes UP from `f` to `g`: `crate::g` (lib.rs",
                "f/low.rs: `super::Nope`: `Nope` is no module of f/, nor an item or import of f/mod.rs",
                "f/sub/x.rs: goes UP from `x` to `y`: `super::y::Y` (f/sub/mod.rs",
                "f/sub/x.rs: goes UP from `sub` to `high`: `super::super::high` (f/mod.rs",
            ],
        );
    }

    #[test]
    fn a_head_beside_its_folder_counts_and_tests_are_not_layers() {
        assert_violations(
            "beside",
            &[
                ("lib.rs", "//! Layers, lowest first: `f`.\nmod f;\n"),
                (
                    "f.rs",
                    "//! Layers, lowest first: `a`, `tests`, `b`.\nmod a;\nmod b;\n\
                     #[cfg(test)]\nmod tests;\n",
                ),
                ("f/a.rs", "use super::b;\n"),
                ("f/b.rs", "use super::a;\n"),
                ("f/tests/mod.rs", "use super::b;\n"),
            ],
            &[
                "f/a.rs: goes UP from `a` to `b`: `super::b` (f.rs",
                "f.rs: the layer list names `tests`: test modules are not layers",
            ],
        );
    }
}
