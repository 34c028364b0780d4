//! Resolving a field declaration (`char b[16]`, `__data_loc char[] filename`,
//! `__rel_loc char msg[]`, `struct foo f`, `pid_t pid` …) into a name, a normalised type
//! text and a [`FieldKind`].
//!
//! This is the ONE place that maps C type text to a decoding rule; the format-file parser
//! and the register-command compiler both call [`resolve_decl`].
//!
//! Rules (the kernel's `kernel/trace/trace_events_user.c`, `user_event_parse_field` and
//! `user_field_size`; on a 6.12 kernel, `docs/vm-tier.md`'s `t1_every_type_round_trips`):
//! - the element count of a fixed array is `size / element size`; the number inside the
//!   brackets is never used (user_events prints garbage there);
//! - `char` arrays are strings; `unsigned char`, `u8`, `__u8`, `uint8_t` and unknown element
//!   types are bytes; other known integer element types are integer arrays;
//! - a bracketed field with `size: 0` is the rest of the record;
//! - a scalar of 1, 2, 4 or 8 bytes is an integer whatever its typedef (`pid_t`, `bool`,
//!   `size_t`, pointers, enums), signed per `signed:` when given, else per the type name;
//! - `struct T name` is opaque bytes; anything else is [`FieldKind::Unknown`].

use crate::schema::{Element, Field, FieldKind, LocKind};

/// A field declaration split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decl {
    /// The field name.
    pub name: String,
    /// The type with the name removed (see [`crate::schema::Field::type_text`]).
    pub type_text: String,
    /// The decoding rule.
    pub kind: FieldKind,
}

/// Why a declaration could not even be split into type and name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclError {
    /// No identifier where the field name should be.
    #[error("expected a field name at the end of declaration `{0}`")]
    NoName(String),
    /// Nothing before the name.
    #[error("expected a type before the field name in declaration `{0}`")]
    NoType(String),
    /// A `[` without its `]` (or the reverse).
    #[error("unbalanced brackets in declaration `{0}`")]
    Brackets(String),
}

/// The traced machine's word size: the size of `long`, `unsigned long`, `size_t`,
/// `ssize_t` and pointers in its declarations (format files do not say; perf.data and
/// trace.dat files do). It decides the element count of arrays such as `unsigned long
/// args[6]` (48 bytes on a 64-bit kernel, 24 on a 32-bit one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WordSize {
    /// 32-bit machines (ILP32).
    Four,
    /// 64-bit machines (LP64).
    Eight,
}

impl WordSize {
    /// The machine this code runs on (live tracefs format files describe it).
    pub const HOST: WordSize = if cfg!(target_pointer_width = "32") {
        WordSize::Four
    } else {
        WordSize::Eight
    };

    /// The size in bytes.
    pub fn bytes(self) -> u8 {
        match self {
            WordSize::Four => 4,
            WordSize::Eight => 8,
        }
    }
}

/// Resolve the declaration text of a `field:` line given its `size:` and `signed:` values,
/// for this machine's word size ([`resolve_decl_for`] with [`WordSize::HOST`]).
pub fn resolve_decl(decl: &str, size: u32, signed: Option<bool>) -> Result<Decl, DeclError> {
    resolve_decl_for(decl, size, signed, WordSize::HOST)
}

/// Resolve the declaration text of a `field:` line given its `size:` and `signed:` values
/// on a machine whose `long` and pointers are `word` wide.
pub fn resolve_decl_for(
    decl: &str,
    size: u32,
    signed: Option<bool>,
    word: WordSize,
) -> Result<Decl, DeclError> {
    let text = decl.trim();
    let (loc, rest) = if let Some(r) = strip_word(text, "__data_loc") {
        (Some(LocKind::DataLoc), r)
    } else if let Some(r) = strip_word(text, "__rel_loc") {
        (Some(LocKind::RelLoc), r)
    } else {
        (None, text)
    };
    let (base, name, brackets) = split_name(rest).ok_or_else(|| classify_error(text))?;
    let type_text = match loc {
        Some(LocKind::DataLoc) => format!("__data_loc {base}{brackets}"),
        Some(LocKind::RelLoc) => format!("__rel_loc {base}{brackets}"),
        None => format!("{base}{brackets}"),
    };
    let is_array = !brackets.is_empty();
    let kind = match loc {
        Some(loc) => FieldKind::Dynamic {
            loc,
            elem: element_of(base, signed, word),
        },
        None => plain_kind(base, is_array, size, signed, word),
    };
    Ok(Decl {
        name: name.to_string(),
        type_text,
        kind,
    })
}

/// The [`Field`] of a `field:` line from its parts, through [`resolve_decl`] (this
/// machine's word size).
pub fn resolve_field(
    decl: &str,
    offset: u32,
    size: u32,
    signed: Option<bool>,
) -> Result<Field, DeclError> {
    resolve_field_for(decl, offset, size, signed, WordSize::HOST)
}

/// The [`Field`] of a `field:` line from its parts, through [`resolve_decl_for`].
pub fn resolve_field_for(
    decl: &str,
    offset: u32,
    size: u32,
    signed: Option<bool>,
    word: WordSize,
) -> Result<Field, DeclError> {
    let d = resolve_decl_for(decl, size, signed, word)?;
    Ok(Field {
        name: d.name,
        type_text: d.type_text,
        offset,
        size,
        signed,
        kind: d.kind,
    })
}

/// Signedness implied by a C type name, when the name decides it.
pub fn signedness_of(base: &str) -> Option<bool> {
    let words: Vec<&str> = base.split_whitespace().collect();
    if words.contains(&"unsigned") {
        return Some(false);
    }
    if words.contains(&"signed") {
        return Some(true);
    }
    let last = *words.last()?;
    match last {
        "u8" | "u16" | "u32" | "u64" | "__u8" | "__u16" | "__u32" | "__u64" | "uint8_t"
        | "uint16_t" | "uint32_t" | "uint64_t" | "size_t" | "bool" | "_Bool" | "__le16"
        | "__le32" | "__le64" | "__be16" | "__be32" | "__be64" | "uid_t" | "gid_t" | "dev_t"
        | "gfp_t" => Some(false),
        "s8" | "s16" | "s32" | "s64" | "__s8" | "__s16" | "__s32" | "__s64" | "int8_t"
        | "int16_t" | "int32_t" | "int64_t" | "int" | "short" | "long" | "ssize_t" | "loff_t"
        | "pid_t" => Some(true),
        _ => None,
    }
}

/// Size in bytes implied by a C type name on a machine of word size `word`, when the name
/// decides it.
pub fn size_of_type(base: &str, word: WordSize) -> Option<u8> {
    if base.contains('*') {
        return Some(word.bytes());
    }
    let words: Vec<&str> = base
        .split_whitespace()
        .filter(|w| !matches!(*w, "const" | "volatile" | "signed" | "unsigned"))
        .collect();
    match words.as_slice() {
        [] => Some(4), // plain `unsigned` / `signed`
        ["long", "long"] | ["long", "long", "int"] => Some(8),
        ["long"] | ["long", "int"] => Some(word.bytes()),
        ["short"] | ["short", "int"] => Some(2),
        [one] => {
            match *one {
                "char" | "u8" | "s8" | "__u8" | "__s8" | "uint8_t" | "int8_t" | "bool"
                | "_Bool" => Some(1),
                "u16" | "s16" | "__u16" | "__s16" | "uint16_t" | "int16_t" | "__le16"
                | "__be16" => Some(2),
                "int" | "u32" | "s32" | "__u32" | "__s32" | "uint32_t" | "int32_t" | "pid_t"
                | "uid_t" | "gid_t" | "__le32" | "__be32" | "dev_t" | "gfp_t" => Some(4),
                "u64" | "s64" | "__u64" | "__s64" | "uint64_t" | "int64_t" | "loff_t"
                | "__le64" | "__be64" => Some(8),
                "size_t" | "ssize_t" => Some(word.bytes()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The element type of an array whose element type text is `base`.
fn element_of(base: &str, signed: Option<bool>, word: WordSize) -> Element {
    let words: Vec<&str> = base
        .split_whitespace()
        .filter(|w| !matches!(*w, "const" | "volatile"))
        .collect();
    match words.as_slice() {
        ["char"] => return Element::Char,
        ["unsigned", "char"] | ["u8"] | ["__u8"] | ["uint8_t"] => return Element::Byte,
        _ => {}
    }
    if base.contains('*') {
        return Element::Integer {
            size: word.bytes(),
            signed: false,
        };
    }
    match size_of_type(base, word) {
        Some(size) if !words.is_empty() && words[0] != "struct" => Element::Integer {
            size,
            signed: signedness_of(base).or(signed).unwrap_or(false),
        },
        _ => Element::Byte,
    }
}

/// The kind of a field stored in place (not a dynamic location).
fn plain_kind(
    base: &str,
    is_array: bool,
    size: u32,
    signed: Option<bool>,
    word: WordSize,
) -> FieldKind {
    if is_array {
        let elem = element_of(base, signed, word);
        if size == 0 {
            return FieldKind::RestOfRecord { elem };
        }
        // Element sizes are 1, 2, 4 or 8: the checked forms never fail.
        let elem = if size.checked_rem(elem.size()) == Some(0) {
            elem
        } else {
            Element::Byte
        };
        return FieldKind::FixedArray {
            elem,
            count: size.checked_div(elem.size()).unwrap_or(size),
        };
    }
    // `struct T *p` / `union U *p` are pointers: scalars like any other.
    let pointer = base.contains('*');
    if let Some(tag) = strip_word(base, "struct").filter(|_| !pointer) {
        return FieldKind::Struct {
            type_name: tag.trim().to_string(),
        };
    }
    if strip_word(base, "union").is_some() && !pointer {
        return FieldKind::Unknown;
    }
    match size {
        1 | 2 | 4 | 8 => FieldKind::Integer {
            size: size as u8,
            signed: signed.or_else(|| signedness_of(base)).unwrap_or(false),
        },
        _ => FieldKind::Unknown,
    }
}

/// `text` without the leading word `word` (followed by white space), if it starts so.
fn strip_word<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let rest = text.strip_prefix(word)?;
    if rest.starts_with(char::is_whitespace) {
        Some(rest.trim_start())
    } else {
        None
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Split `text` into what precedes its trailing identifier and that identifier (empty when
/// `text` does not end with one). Safe for any UTF-8 text.
pub(crate) fn split_trailing_ident(text: &str) -> (&str, &str) {
    let start = text
        .char_indices()
        .rev()
        .find(|&(_, c)| !is_ident_char(c))
        // A place inside the text: the sum fits.
        .map_or(0, |(i, c)| i.saturating_add(c.len_utf8()));
    text.split_at(start)
}

/// Split `T name`, `T name[N]`, `T[] name` into (type, name, brackets as written).
fn split_name(text: &str) -> Option<(&str, &str, &str)> {
    let text = text.trim_end();
    // Brackets after the name: `T name[N]` / `T name[]`.
    let (head, trailing_brackets) = if text.ends_with(']') {
        let open = text.find('[')?;
        (&text[..open], &text[open..])
    } else {
        (text, "")
    };
    let (base, name) = split_trailing_ident(head.trim_end());
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut base = base.trim_end();
    // Brackets before the name: `T[] name` / `T[N] name`.
    let mut brackets = trailing_brackets;
    if brackets.is_empty() && base.ends_with(']') {
        let open = base.find('[')?;
        brackets = &base[open..];
        base = base[..open].trim_end();
    }
    if base.is_empty() || brackets.matches('[').count() != brackets.matches(']').count() {
        return None;
    }
    Some((base, name, brackets))
}

fn classify_error(text: &str) -> DeclError {
    if text.matches('[').count() != text.matches(']').count() {
        DeclError::Brackets(text.to_string())
    } else if text.ends_with(|c: char| !is_ident_char(c) && c != ']') || text.is_empty() {
        DeclError::NoName(text.to_string())
    } else {
        DeclError::NoType(text.to_string())
    }
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    fn kind(decl: &str, size: u32, signed: Option<bool>) -> FieldKind {
        resolve_decl(decl, size, signed).unwrap().kind
    }

    #[test]
    fn garbage_brackets_use_size() {
        let d = resolve_decl("char b[1055984226]", 8, Some(true)).unwrap();
        assert_eq!(d.name, "b");
        assert_eq!(d.type_text, "char[1055984226]");
        assert_eq!(
            d.kind,
            FieldKind::FixedArray {
                elem: Element::Char,
                count: 8
            }
        );
        assert_eq!(
            kind("char b[-2121988123]", 8, Some(true)),
            FieldKind::FixedArray {
                elem: Element::Char,
                count: 8
            }
        );
        assert_eq!(
            kind("char b[]", 8, Some(true)),
            FieldKind::FixedArray {
                elem: Element::Char,
                count: 8
            }
        );
        assert_eq!(
            kind("unsigned char b[77]", 16, Some(false)),
            FieldKind::FixedArray {
                elem: Element::Byte,
                count: 16
            }
        );
    }

    #[test]
    fn dynamic_spellings() {
        let d = resolve_decl("__data_loc char[] filename", 4, Some(false)).unwrap();
        assert_eq!(
            (d.name.as_str(), d.type_text.as_str()),
            ("filename", "__data_loc char[]")
        );
        assert_eq!(
            d.kind,
            FieldKind::Dynamic {
                loc: LocKind::DataLoc,
                elem: Element::Char
            }
        );
        let d = resolve_decl("__rel_loc char msg[]", 4, Some(true)).unwrap();
        assert_eq!(
            (d.name.as_str(), d.type_text.as_str()),
            ("msg", "__rel_loc char[]")
        );
        assert_eq!(
            d.kind,
            FieldKind::Dynamic {
                loc: LocKind::RelLoc,
                elem: Element::Char
            }
        );
        assert_eq!(
            kind("__rel_loc u8[] blob", 4, Some(false)),
            FieldKind::Dynamic {
                loc: LocKind::RelLoc,
                elem: Element::Byte
            }
        );
        assert_eq!(
            kind("__rel_loc u8 blob[123]", 4, Some(false)),
            FieldKind::Dynamic {
                loc: LocKind::RelLoc,
                elem: Element::Byte
            }
        );
        assert_eq!(
            kind("__data_loc u32[] v", 4, Some(false)),
            FieldKind::Dynamic {
                loc: LocKind::DataLoc,
                elem: Element::Integer {
                    size: 4,
                    signed: false
                }
            }
        );
        assert_eq!(
            kind("__data_loc int[] v", 4, Some(true)),
            FieldKind::Dynamic {
                loc: LocKind::DataLoc,
                elem: Element::Integer {
                    size: 4,
                    signed: true
                }
            }
        );
        assert_eq!(
            kind("__data_loc whatever f", 4, Some(false)),
            FieldKind::Dynamic {
                loc: LocKind::DataLoc,
                elem: Element::Byte
            }
        );
        assert_eq!(
            kind("__data_loc char f", 4, Some(false)),
            FieldKind::Dynamic {
                loc: LocKind::DataLoc,
                elem: Element::Char
            }
        );
    }

    #[test]
    fn scalars_by_size_and_sign() {
        assert_eq!(
            kind("pid_t pid", 4, Some(true)),
            FieldKind::Integer {
                size: 4,
                signed: true
            }
        );
        assert_eq!(
            kind("bool b", 1, Some(false)),
            FieldKind::Integer {
                size: 1,
                signed: false
            }
        );
        assert_eq!(
            kind("unsigned long x", 8, None),
            FieldKind::Integer {
                size: 8,
                signed: false
            }
        );
        assert_eq!(
            kind("long x", 8, None),
            FieldKind::Integer {
                size: 8,
                signed: true
            }
        );
        assert_eq!(
            kind("const char * name", 8, Some(false)),
            FieldKind::Integer {
                size: 8,
                signed: false
            }
        );
        assert_eq!(
            kind("enum foo e", 4, Some(false)),
            FieldKind::Integer {
                size: 4,
                signed: false
            }
        );
        assert_eq!(kind("__int128 x", 16, Some(true)), FieldKind::Unknown);
        assert_eq!(
            kind("u32 a", 4, Some(false)),
            FieldKind::Integer {
                size: 4,
                signed: false
            }
        );
        assert_eq!(
            kind("s8 a", 1, None),
            FieldKind::Integer {
                size: 1,
                signed: true
            }
        );
    }

    #[test]
    fn word_size_decides_long_and_pointer_arrays() {
        // raw_syscalls:sys_enter's `unsigned long args[6]` on a 32-bit kernel: 24 bytes.
        let four = |decl, size| resolve_decl_for(decl, size, Some(false), WordSize::Four);
        let ints = |size, count| FieldKind::FixedArray {
            elem: Element::Integer {
                size,
                signed: false,
            },
            count,
        };
        assert_eq!(four("unsigned long args[6]", 24).unwrap().kind, ints(4, 6));
        assert_eq!(four("void * ptrs[2]", 8).unwrap().kind, ints(4, 2));
        assert_eq!(four("size_t sizes[3]", 12).unwrap().kind, ints(4, 3));
        // `long long` stays 8 bytes everywhere.
        assert_eq!(
            four("unsigned long long v[2]", 16).unwrap().kind,
            ints(8, 2)
        );
        let eight = resolve_decl_for("unsigned long args[6]", 48, Some(false), WordSize::Eight);
        assert_eq!(eight.unwrap().kind, ints(8, 6));
        assert_eq!(size_of_type("long", WordSize::Four), Some(4));
        assert_eq!(size_of_type("long", WordSize::Eight), Some(8));
        assert_eq!(
            WordSize::HOST.bytes() as usize,
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn arrays_structs_and_rest() {
        assert_eq!(
            kind("unsigned long args[6]", 48, Some(false)),
            FieldKind::FixedArray {
                elem: Element::Integer {
                    size: 8,
                    signed: false
                },
                count: 6
            }
        );
        assert_eq!(
            kind("u8 buf[]", 0, Some(false)),
            FieldKind::RestOfRecord {
                elem: Element::Byte
            }
        );
        assert_eq!(
            kind("char buf[0]", 0, Some(true)),
            FieldKind::RestOfRecord {
                elem: Element::Char
            }
        );
        let d = resolve_decl("struct foo f", 20, Some(false)).unwrap();
        assert_eq!(d.type_text, "struct foo");
        assert_eq!(
            d.kind,
            FieldKind::Struct {
                type_name: "foo".into()
            }
        );
        // Pointers to structs and unions are 8-byte scalars (corpus: `struct file *`,
        // `union bpf_attr * uattr`).
        let ptr = FieldKind::Integer {
            size: 8,
            signed: false,
        };
        assert_eq!(kind("struct file * file", 8, Some(false)), ptr);
        assert_eq!(kind("union bpf_attr * uattr", 8, Some(false)), ptr);
        assert_eq!(kind("const struct iovec * vec", 8, Some(false)), ptr);
        // Size not a multiple of the element: bytes.
        assert_eq!(
            kind("u32 odd[3]", 10, Some(false)),
            FieldKind::FixedArray {
                elem: Element::Byte,
                count: 10
            }
        );
    }

    #[test]
    fn bad_declarations() {
        assert!(matches!(
            resolve_decl("int", 4, None),
            Err(DeclError::NoType(_))
        ));
        assert!(matches!(
            resolve_decl("int x[4", 4, None),
            Err(DeclError::Brackets(_))
        ));
        assert!(resolve_decl("", 4, None).is_err());
        assert!(resolve_decl("int *", 8, None).is_err());
        // Non-ASCII text before the name must not split a character.
        assert!(resolve_decl("int é", 4, None).is_err());
        assert_eq!(resolve_decl("é x", 4, None).unwrap().name, "x");
    }
}
