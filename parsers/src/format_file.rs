//! tracefs `format` file text → [`EventFormat`], parsed line by line with nom.
//!
//! The shape (kernel/trace/trace_events.c, `f_show`):
//!
//! ```text
//! name: <event name, may contain dots: uevc_multi.1a>
//! ID: <decimal>
//! format:
//! <TAB>field:<decl>;<TAB>offset:N;<TAB>size:N;<TAB>signed:N;    ← common fields
//! <blank line>
//! <TAB>field:<decl>;<TAB>offset:N;<TAB>size:N;<TAB>signed:N;    ← event fields
//! <blank line>
//! print fmt: <C string literal and arguments, kept verbatim>
//! ```
//!
//! Each declaration goes through [`resolve_decl`](crate::field_type::resolve_decl), the one C-type rule; a declaration it
//! cannot split still becomes a field (kind [`FieldKind::Unknown`], best-effort name), so
//! one odd field never makes a whole event unusable.
//!
//! Variants accepted (and tested):
//! - tabs or spaces (or nothing) around the `key:value;` items; CRLF line ends; no
//!   trailing newline; a missing `print fmt:` line (the text is then empty);
//! - `signed:` missing (old kernels print none; the type name then decides signedness);
//!   `field special:` (old kernels' ftrace events; libtraceevent skips the word too);
//!   unknown `key:value;` items are ignored;
//! - any number and kind of common fields (RT kernels add `common_migrate_disable`,
//!   `common_preempt_lazy_count`; old kernels `common_tgid`, `common_lock_depth`): they
//!   are read, never assumed;
//! - an event with no fields (two blank lines), extra blank lines among event fields;
//! - a text with no blank line at all: the leading `common_*` fields are the common ones;
//! - the 2,751 corpus files, every format file of the 6.18 host and of the 6.12 VM
//!   (user_events, user_events_multi, ftrace) parse; see `tests/corpus.rs`,
//!   `tests/host_formats.rs`.
//!
//! Not decoded: declarations the kernel does not print today (bitfields, function
//! pointers) become `Unknown` fields with a best-effort name; a file without the
//! `name:` / `ID:` / `format:` header is an error, whatever the kernel version.
//!
//! Errors ([`FormatError`], with the 1-based line): a missing or malformed `name:`, `ID:`
//! or `format:` header; a field line without `offset:` or `size:`, or with a value that is
//! not a decimal `u32` (`signed:` must be 0 or 1); a line in the field section that is
//! neither a `field:` line, a blank line nor `print fmt:`. Lines after `print fmt:` are
//! ignored (the kernel writes none).

use nom::{
    IResult, Parser,
    bytes::{tag, take_till, take_while1},
    character::complete::{char, space0, space1},
    combinator::{opt, rest},
    multi::fold_many0,
};

use crate::field_type::{WordSize, resolve_field_for, split_trailing_ident};
use crate::schema::{EventFormat, Field, FieldKind};

/// A format file that could not be parsed; carries the 1-based line number and what was
/// expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: expected {expected}, found `{found}`")]
pub struct FormatError {
    /// 1-based line number.
    pub line: usize,
    /// What the parser expected.
    pub expected: String,
    /// The offending text (truncated).
    pub found: String,
}

/// At most this many characters of offending text are quoted in a [`FormatError`].
const FOUND_MAX_CHARS: usize = 80;

/// What [`FormatError::found`] says when the text ends early.
const END_OF_FILE: &str = "<end of file>";

impl FormatError {
    fn new(line: usize, expected: impl Into<String>, found: &str) -> Self {
        let found = match found.char_indices().nth(FOUND_MAX_CHARS) {
            Some((cut, _)) => format!("{}…", &found[..cut]),
            None => found.to_string(),
        };
        FormatError {
            line,
            expected: expected.into(),
            found,
        }
    }
}

/// Parse the text of an `events/<system>/<event>/format` file.
///
/// ```
/// use uevrec_parsers::parse_format;
/// use uevrec_parsers::{Element, FieldKind};
///
/// let text = "name: test\nID: 1117\nformat:\n\
///     \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\
///     \tfield:char b[1055984226];\toffset:8;\tsize:8;\tsigned:1;\n\n\
///     print fmt: \"b=%s\", REC->b\n";
/// let format = parse_format(text).unwrap();
/// assert_eq!((format.name.as_str(), format.id), ("test", 1117));
/// let b = format.field("b").unwrap();
/// assert_eq!(b.kind, FieldKind::FixedArray { elem: Element::Char, count: 8 });
/// assert_eq!(format.print_fmt, "\"b=%s\", REC->b");
/// ```
pub fn parse_format(text: &str) -> Result<EventFormat, FormatError> {
    parse_format_for(text, WordSize::HOST)
}

/// [`parse_format`] for a format file of a machine whose `long` and pointers are `word`
/// wide (a perf.data or trace.dat file from another machine says which).
pub fn parse_format_for(text: &str, word: WordSize) -> Result<EventFormat, FormatError> {
    let mut lines = NumberedLines {
        inner: text.lines(),
        next_number: 1,
    };

    let (line, value) = lines.header("name", "`name: <event name>`")?;
    // ASCII white space only: the kernel takes any other character into a name (a
    // user_events name ending in U+00A0 is that name), and `str::trim` would drop it.
    let name = value.trim_matches(|c: char| c.is_ascii_whitespace());
    if name.is_empty() {
        return Err(FormatError::new(line, "an event name after `name:`", value));
    }
    let (line, value) = lines.header("ID", "`ID: <decimal tracepoint id>`")?;
    let id = decimal(line, "a decimal tracepoint ID after `ID:`", value.trim())?;
    let (line, value) = lines.header("format", "`format:`")?;
    if !value.trim().is_empty() {
        return Err(FormatError::new(line, "nothing after `format:`", value));
    }

    let mut common_fields = Vec::new();
    let mut fields = Vec::new();
    let mut saw_blank = false;
    let mut print_fmt = String::new();
    while let Some((line, text)) = lines.next() {
        if text.trim().is_empty() {
            saw_blank = true;
        } else if let Ok((_, fmt)) = print_fmt_line(text) {
            print_fmt = fmt.trim_start().to_string();
            break;
        } else {
            let field = parse_field_line(line, text, word)?;
            if saw_blank {
                &mut fields
            } else {
                &mut common_fields
            }
            .push(field);
        }
    }
    if !saw_blank {
        let split = common_fields
            .iter()
            .take_while(|f| f.name.starts_with("common_"))
            .count();
        fields = common_fields.split_off(split);
    }
    Ok(EventFormat {
        name: name.to_string(),
        id,
        common_fields,
        fields,
        print_fmt,
    })
}

/// The lines of the text with their 1-based numbers.
struct NumberedLines<'a> {
    inner: std::str::Lines<'a>,
    next_number: usize,
}

impl<'a> NumberedLines<'a> {
    fn next(&mut self) -> Option<(usize, &'a str)> {
        let text = self.inner.next()?;
        let number = self.next_number;
        // A count of the text's lines.
        self.next_number = self.next_number.saturating_add(1);
        Some((number, text))
    }

    /// The next line, which must be `key:` followed by a value; returns the line number
    /// and the (untrimmed) value.
    fn header(&mut self, key: &str, expected: &str) -> Result<(usize, &'a str), FormatError> {
        let Some((line, text)) = self.next() else {
            return Err(FormatError::new(self.next_number, expected, END_OF_FILE));
        };
        let parsed: IResult<&str, &str> = (space0, tag(key), space0, char(':'), rest)
            .map(|(_, _, _, _, value)| value)
            .parse_complete(text);
        parsed
            .map(|(_, value)| (line, value))
            .map_err(|_| FormatError::new(line, expected, text))
    }
}

/// `print fmt: ...` → the rest of the line.
fn print_fmt_line(input: &str) -> IResult<&str, &str> {
    (space0, tag("print"), space1, tag("fmt"), char(':'), rest)
        .map(|t| t.5)
        .parse_complete(input)
}

/// The raw `key:value` items of a field line that matter for the layout.
#[derive(Default)]
struct Items<'a> {
    offset: Option<&'a str>,
    size: Option<&'a str>,
    signed: Option<&'a str>,
}

impl<'a> Items<'a> {
    fn with(mut self, (key, value): (&'a str, &'a str)) -> Self {
        match key {
            "offset" => self.offset = Some(value),
            "size" => self.size = Some(value),
            "signed" => self.signed = Some(value),
            _ => {} // forward compatible: unknown items carry nothing we decode
        }
        self
    }
}

/// `field:<decl>;` or `field special:<decl>;` → the declaration.
fn field_prefix(input: &str) -> IResult<&str, &str> {
    let (input, _) = (
        space0,
        tag("field"),
        opt((space1, tag("special"))),
        space0,
        char(':'),
    )
        .parse_complete(input)?;
    let (input, decl) = take_till(|c| c == ';').parse_complete(input)?;
    let (input, _) = opt(char(';')).parse_complete(input)?;
    Ok((input, decl))
}

/// One `key:value;` item (the final `;` may be missing).
fn item(input: &str) -> IResult<&str, (&str, &str)> {
    (
        space0,
        take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_'),
        char(':'),
        space0,
        take_till(|c| c == ';'),
        opt(char(';')),
    )
        .map(|(_, key, _, _, value, _): (_, _, _, _, &str, _)| (key, value.trim_end()))
        .parse_complete(input)
}

/// Parse one `field:` line (line number `line`) into a [`Field`].
fn parse_field_line(line: usize, text: &str, word: WordSize) -> Result<Field, FormatError> {
    let Ok((after_decl, decl)) = field_prefix(text) else {
        return Err(FormatError::new(
            line,
            "a `field:<declaration>;` line, a blank line or `print fmt:`",
            text.trim(),
        ));
    };
    let parsed: IResult<&str, Items> =
        fold_many0(item, Items::default, Items::with).parse_complete(after_decl);
    let (tail, items) = parsed.unwrap_or((after_decl, Items::default()));
    if !tail.trim().is_empty() {
        return Err(FormatError::new(
            line,
            "`key:value;` items after the declaration",
            tail.trim(),
        ));
    }
    let offset = required(line, text, "offset", items.offset)?;
    let size = required(line, text, "size", items.size)?;
    let signed = match items.signed {
        None => None,
        Some("0") => Some(false),
        Some("1") => Some(true),
        Some(other) => {
            return Err(FormatError::new(line, "`signed:0` or `signed:1`", other));
        }
    };
    Ok(match resolve_field_for(decl, offset, size, signed, word) {
        Ok(field) => field,
        Err(_) => Field {
            name: best_effort_name(decl),
            type_text: decl.trim().to_string(),
            offset,
            size,
            signed,
            kind: FieldKind::Unknown,
        },
    })
}

/// The decimal value of the `key:` item, which the line must have.
fn required(line: usize, text: &str, key: &str, value: Option<&str>) -> Result<u32, FormatError> {
    match value {
        Some(value) => decimal(line, &format!("a decimal u32 after `{key}:`"), value),
        None => Err(FormatError::new(
            line,
            format!("a `{key}:N;` item in the field line"),
            text.trim(),
        )),
    }
}

/// `value` as a plain decimal `u32` (digits only: no sign, no hex).
fn decimal(line: usize, expected: &str, value: &str) -> Result<u32, FormatError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FormatError::new(line, expected, value));
    }
    value
        .parse()
        .map_err(|_| FormatError::new(line, format!("{expected} (at most {})", u32::MAX), value))
}

/// A name for a declaration [`resolve_decl`](crate::field_type::resolve_decl) could not split: the last identifier before
/// any bracket, else the whole declaration.
fn best_effort_name(decl: &str) -> String {
    let head = decl.split('[').next().unwrap_or(decl).trim_end();
    let (_, name) = split_trailing_ident(head);
    if name.is_empty() { decl.trim() } else { name }.to_string()
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use crate::schema::{Element, LocKind};

    const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";

    fn event(name: &str, body: &str, print: &str) -> String {
        format!("name: {name}\nID: 1117\nformat:\n{COMMON}\n{body}\nprint fmt: {print}\n")
    }

    fn field(f: &EventFormat, name: &str) -> Field {
        f.field(name)
            .unwrap_or_else(|| panic!("no field {name} in {f:?}"))
            .clone()
    }

    /// A real user_events format file (printed by a 6.12 kernel).
    #[test]
    fn user_events_real_shapes() {
        let body = "\tfield:u32 a;\toffset:8;\tsize:4;\tsigned:0;\n\
            \tfield:char b[1055984226];\toffset:12;\tsize:8;\tsigned:1;\n\
            \tfield:__rel_loc char msg[];\toffset:20;\tsize:4;\tsigned:1;\n\
            \tfield:__data_loc char[] dmsg;\toffset:24;\tsize:4;\tsigned:1;\n";
        let print =
            "\"a=%u b=%s msg=%s dmsg=%s\", REC->a, REC->b, __get_rel_str(msg), __get_str(dmsg)";
        let f = parse_format(&event("test", body, print)).unwrap();
        assert_eq!((f.name.as_str(), f.id), ("test", 1117));
        assert_eq!(f.common_fields.len(), 4);
        assert_eq!(
            f.common_field("common_pid").unwrap().kind,
            FieldKind::Integer {
                size: 4,
                signed: true
            }
        );
        assert_eq!(f.fields.len(), 4);
        assert_eq!(
            field(&f, "a"),
            Field {
                name: "a".into(),
                type_text: "u32".into(),
                offset: 8,
                size: 4,
                signed: Some(false),
                kind: FieldKind::Integer {
                    size: 4,
                    signed: false
                },
            }
        );
        let b = field(&f, "b");
        assert_eq!(
            (b.offset, b.size, b.type_text.as_str()),
            (12, 8, "char[1055984226]")
        );
        assert_eq!(
            b.kind,
            FieldKind::FixedArray {
                elem: Element::Char,
                count: 8
            }
        );
        let msg = field(&f, "msg");
        assert_eq!(
            (msg.offset, msg.size, msg.type_text.as_str()),
            (20, 4, "__rel_loc char[]")
        );
        assert_eq!(
            msg.kind,
            FieldKind::Dynamic {
                loc: LocKind::RelLoc,
                elem: Element::Char
            }
        );
        let dmsg = field(&f, "dmsg");
        assert_eq!(
            (dmsg.offset, dmsg.type_text.as_str()),
            (24, "__data_loc char[]")
        );
        assert_eq!(
            dmsg.kind,
            FieldKind::Dynamic {
                loc: LocKind::DataLoc,
                elem: Element::Char
            }
        );
        assert_eq!(f.print_fmt, print);
    }

    /// Captured verbatim from the 6.12 test VM: `u:uevfmt u32 a; char[8] b; __rel_loc
    /// char[] msg; __data_loc char[] dmsg; struct foo s 12; __rel_loc u8[] blob;
    /// __data_loc u32[] v` written to dynamic_events, and uevtest's multi-format event.
    #[test]
    fn vm_captures() {
        let text = "name: uevfmt\nID: 1113\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
            \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
            \tfield:u32 a;\toffset:8;\tsize:4;\tsigned:0;\n\
            \tfield:char b[];\toffset:12;\tsize:8;\tsigned:1;\n\
            \tfield:__rel_loc char msg[];\toffset:20;\tsize:4;\tsigned:1;\n\
            \tfield:__data_loc char[] dmsg;\toffset:24;\tsize:4;\tsigned:1;\n\
            \tfield:struct foo s;\toffset:28;\tsize:12;\tsigned:1;\n\
            \tfield:__rel_loc u8 blob[];\toffset:40;\tsize:4;\tsigned:1;\n\
            \tfield:__data_loc u32[] v;\toffset:44;\tsize:4;\tsigned:1;\n\n\
            print fmt: \"a=%u b=%s msg=%s dmsg=%s s=%llu blob=%llu v=%llu\", REC->a, REC->b, \
            __get_rel_str(msg), __get_str(dmsg), REC->s, REC->blob, REC->v\n";
        let f = parse_format(text).unwrap();
        let kinds: Vec<(&str, u32, u32, &FieldKind)> = f
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.offset, f.size, &f.kind))
            .collect();
        let (rel, data) = (LocKind::RelLoc, LocKind::DataLoc);
        let u32_elem = Element::Integer {
            size: 4,
            signed: false,
        };
        assert_eq!(
            kinds,
            [
                (
                    "a",
                    8,
                    4,
                    &FieldKind::Integer {
                        size: 4,
                        signed: false
                    }
                ),
                (
                    "b",
                    12,
                    8,
                    &FieldKind::FixedArray {
                        elem: Element::Char,
                        count: 8
                    }
                ),
                (
                    "msg",
                    20,
                    4,
                    &FieldKind::Dynamic {
                        loc: rel,
                        elem: Element::Char
                    }
                ),
                (
                    "dmsg",
                    24,
                    4,
                    &FieldKind::Dynamic {
                        loc: data,
                        elem: Element::Char
                    }
                ),
                (
                    "s",
                    28,
                    12,
                    &FieldKind::Struct {
                        type_name: "foo".into()
                    }
                ),
                (
                    "blob",
                    40,
                    4,
                    &FieldKind::Dynamic {
                        loc: rel,
                        elem: Element::Byte
                    }
                ),
                (
                    "v",
                    44,
                    4,
                    &FieldKind::Dynamic {
                        loc: data,
                        elem: u32_elem
                    }
                ),
            ]
        );
        let multi = "name: uevc_multi.1\nID: 1117\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
            \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
            \tfield:u32 a;\toffset:8;\tsize:4;\tsigned:0;\n\n\
            print fmt: \"a=%u\", REC->a\n";
        let f = parse_format(multi).unwrap();
        assert_eq!(
            (f.name.as_str(), f.id, f.fields.len()),
            ("uevc_multi.1", 1117, 1)
        );
    }

    #[test]
    fn garbage_brackets_take_size() {
        for brackets in ["[-2121988123]", "[]", "[1055984226]"] {
            let body = format!(
                "\tfield:char b{brackets};\toffset:8;\tsize:16;\tsigned:1;\n\
                 \tfield:unsigned char u{brackets};\toffset:24;\tsize:5;\tsigned:0;\n\
                 \tfield:__rel_loc u8 blob{brackets};\toffset:29;\tsize:4;\tsigned:0;\n"
            );
            let f = parse_format(&event("g", &body, "\"\"")).unwrap();
            assert_eq!(
                field(&f, "b").kind,
                FieldKind::FixedArray {
                    elem: Element::Char,
                    count: 16
                }
            );
            assert_eq!(
                field(&f, "u").kind,
                FieldKind::FixedArray {
                    elem: Element::Byte,
                    count: 5
                }
            );
            assert_eq!(
                field(&f, "blob").kind,
                FieldKind::Dynamic {
                    loc: LocKind::RelLoc,
                    elem: Element::Byte
                }
            );
            assert_eq!(field(&f, "b").type_text, format!("char{brackets}"));
        }
    }

    #[test]
    fn multi_format_name_with_dots() {
        let body = "\tfield:u32 a;\toffset:8;\tsize:4;\tsigned:0;\n";
        for name in ["uevc_multi.1", "uevc_multi.1a", "a.b.c.ff"] {
            let f = parse_format(&event(name, body, "\"a=%u\", REC->a")).unwrap();
            assert_eq!(f.name, name);
            assert_eq!(f.fields.len(), 1);
        }
    }

    #[test]
    fn missing_signed_and_special_prefix() {
        let text = "name: old\nID: 7\nformat:\n\
            \tfield special:unsigned short common_type;\toffset:0;\tsize:2;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\n\n\
            \tfield:pid_t pid;\toffset:8;\tsize:4;\n\
            \tfield:u16 flags;\toffset:12;\tsize:2;\n\n\
            print fmt: \"pid=%d\", REC->pid\n";
        let f = parse_format(text).unwrap();
        assert_eq!(f.common_fields.len(), 2);
        assert_eq!(f.common_fields[0].name, "common_type");
        let pid = field(&f, "pid");
        assert_eq!(pid.signed, None);
        // Without `signed:` the type name decides.
        assert_eq!(
            pid.kind,
            FieldKind::Integer {
                size: 4,
                signed: true
            }
        );
        assert_eq!(
            field(&f, "flags").kind,
            FieldKind::Integer {
                size: 2,
                signed: false
            }
        );
    }

    #[test]
    fn size_zero_trailing_array_and_legacy_data_loc() {
        let body = "\tfield:__data_loc char[] name;\toffset:8;\tsize:2;\tsigned:1;\n\
            \tfield:unsigned long args[];\toffset:10;\tsize:0;\tsigned:0;\n";
        let f = parse_format(&event("r", body, "\"\"")).unwrap();
        let name = field(&f, "name");
        assert_eq!(name.size, 2);
        assert_eq!(
            name.kind,
            FieldKind::Dynamic {
                loc: LocKind::DataLoc,
                elem: Element::Char
            }
        );
        let args = field(&f, "args");
        assert_eq!((args.offset, args.size), (10, 0));
        assert_eq!(
            args.kind,
            FieldKind::RestOfRecord {
                elem: Element::Integer {
                    size: 8,
                    signed: false
                }
            }
        );
    }

    #[test]
    fn event_without_fields() {
        let text = format!("name: empty\nID: 3\nformat:\n{COMMON}\n\nprint fmt: \"\"\n");
        let f = parse_format(&text).unwrap();
        assert_eq!(f.common_fields.len(), 4);
        assert!(f.fields.is_empty());
        assert_eq!(f.print_fmt, "\"\"");
    }

    #[test]
    fn crlf_spaces_no_trailing_newline_no_print_fmt() {
        let text = "name: x \r\nID:  42\r\nformat:\r\n \
            field:unsigned short common_type; offset:0; size:2; signed:0;\r\n\r\n\
            field:u64 v;offset:8;size:8;signed:0\r\n\
            field:struct foo s; offset:16; size:20; signed:0; extra:9;";
        let f = parse_format(text).unwrap();
        assert_eq!((f.name.as_str(), f.id), ("x", 42));
        assert_eq!(f.common_fields.len(), 1);
        assert_eq!(
            field(&f, "v").kind,
            FieldKind::Integer {
                size: 8,
                signed: false
            }
        );
        let s = field(&f, "s");
        assert_eq!((s.offset, s.size), (16, 20));
        assert_eq!(
            s.kind,
            FieldKind::Struct {
                type_name: "foo".into()
            }
        );
        assert_eq!(f.print_fmt, "");
    }

    #[test]
    fn rt_kernel_common_fields_are_read() {
        let text = "name: rt\nID: 5\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
            \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
            \tfield:unsigned char common_migrate_disable;\toffset:8;\tsize:1;\tsigned:0;\n\
            \tfield:unsigned char common_preempt_lazy_count;\toffset:9;\tsize:1;\tsigned:0;\n\n\
            \tfield:u32 a;\toffset:12;\tsize:4;\tsigned:0;\n\n\
            print fmt: \"a=%u\", REC->a\n";
        let f = parse_format(text).unwrap();
        assert_eq!(f.common_fields.len(), 6);
        assert_eq!(field(&f, "a").offset, 12);
    }

    #[test]
    fn no_blank_line_splits_on_common_prefix() {
        let text = "name: n\nID: 1\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:u32 a;\toffset:8;\tsize:4;\tsigned:0;\n";
        let f = parse_format(text).unwrap();
        assert_eq!(f.common_fields.len(), 1);
        assert_eq!(f.fields.len(), 1);
    }

    #[test]
    fn undecodable_declaration_is_an_unknown_field() {
        let body = "\tfield:int x[4;\toffset:8;\tsize:4;\tsigned:1;\n\
            \tfield:int;\toffset:12;\tsize:4;\tsigned:1;\n\
            \tfield:int é;\toffset:16;\tsize:4;\tsigned:1;\n\
            \tfield:__int128 big;\toffset:20;\tsize:16;\tsigned:1;\n";
        let f = parse_format(&event("u", body, "\"\"")).unwrap();
        let names: Vec<&str> = f.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["x", "int", "int é", "big"]);
        assert!(f.fields.iter().all(|f| f.kind == FieldKind::Unknown));
        assert_eq!(f.fields[0].type_text, "int x[4");
        assert_eq!((f.fields[3].offset, f.fields[3].size), (20, 16));
    }

    fn error(text: &str) -> FormatError {
        parse_format(text).expect_err("should fail")
    }

    #[test]
    fn header_errors_name_the_line() {
        let e = error("");
        assert_eq!((e.line, e.found.as_str()), (1, END_OF_FILE));
        assert!(e.expected.contains("name:"), "{e}");
        let e = error("nom: x\n");
        assert_eq!((e.line, e.found.as_str()), (1, "nom: x"));
        let e = error("name:   \nID: 1\n");
        assert_eq!(e.line, 1);
        let e = error("name: x\n");
        assert_eq!((e.line, e.found.as_str()), (2, END_OF_FILE));
        assert!(e.expected.contains("ID:"), "{e}");
        let e = error("name: x\nID: 0x10\nformat:\n");
        assert_eq!((e.line, e.found.as_str()), (2, "0x10"));
        let e = error("name: x\nID: 99999999999\nformat:\n");
        assert_eq!(e.line, 2);
        assert!(e.expected.contains("at most"), "{e}");
        let e = error("name: x\nID: 1\nformats:\n");
        assert_eq!((e.line, e.found.as_str()), (3, "formats:"));
        assert_eq!(
            e.to_string(),
            "line 3: expected `format:`, found `formats:`"
        );
        let e = error("name: x\nID: 1\nformat: junk\n");
        assert_eq!((e.line, e.found.as_str()), (3, " junk"));
    }

    #[test]
    fn field_errors_name_the_line() {
        let base =
            "name: x\nID: 1\nformat:\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n";
        let e = error(&format!(
            "{base}\tfield:u32 a;\toffset:abc;\tsize:4;\tsigned:0;\n"
        ));
        assert_eq!((e.line, e.found.as_str()), (6, "abc"));
        assert!(e.expected.contains("offset:"), "{e}");
        let e = error(&format!(
            "{base}\tfield:u32 a;\toffset:8;\tsize:-4;\tsigned:0;\n"
        ));
        assert_eq!((e.line, e.found.as_str()), (6, "-4"));
        let e = error(&format!("{base}\tfield:u32 a;\toffset:8;\tsigned:0;\n"));
        assert_eq!(e.line, 6);
        assert!(e.expected.contains("size:"), "{e}");
        let e = error(&format!("{base}\tfield:u32 a;\tsize:4;\n"));
        assert!(e.expected.contains("offset:"), "{e}");
        let e = error(&format!(
            "{base}\tfield:u32 a;\toffset:8;\tsize:4;\tsigned:2;\n"
        ));
        assert_eq!((e.line, e.found.as_str()), (6, "2"));
        let e = error(&format!("{base}\tfield:u32 a;\toffset:8 size:4;\n"));
        assert_eq!((e.line, e.found.as_str()), (6, "8 size:4"));
        let e = error(&format!("{base}\tfield:u32 a;\toffset:8;\tsize:4; junk\n"));
        assert_eq!((e.line, e.found.as_str()), (6, "junk"));
        let e = error(&format!(
            "{base}\tfield:u32 a;\toffset:8;\tsize:4;\n\tprintfmt: x\n"
        ));
        assert_eq!((e.line, e.found.as_str()), (7, "printfmt: x"));
    }

    #[test]
    fn found_text_is_truncated() {
        let long = "é".repeat(500);
        let e = error(&format!("{long}\n"));
        assert_eq!(e.found.chars().count(), FOUND_MAX_CHARS + 1);
    }

    #[test]
    fn lines_after_print_fmt_are_ignored() {
        let text = format!("{}trailing junk\n", event("t", "", "\"x\""));
        assert_eq!(parse_format(&text).unwrap().print_fmt, "\"x\"");
    }
}
