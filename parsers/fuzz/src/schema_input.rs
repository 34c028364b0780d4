//! Structured fuzz input that becomes an [`EventFormat`], two ways:
//! - [`SchemaInput::Text`]: format-file text assembled from field lines (declarations from
//!   a table of real spellings, or arbitrary text), then run through `parse_format` — the
//!   schemas the recorder really gets;
//! - [`SchemaInput::Built`]: an `EventFormat` built directly, with every kind, element and
//!   offset (including offsets near `u32::MAX`), kept self-consistent as
//!   [`crate::check_format`] requires.

use arbitrary::{Arbitrary, Unstructured};
use uevrec_parsers::parse_format;
use uevrec_parsers::{Element, EventFormat, Field, FieldKind, LocKind};

/// Declarations seen in real format files and register commands (as a 6.12 kernel prints them).
const DECLS: &[&str] = &[
    "unsigned short common_type",
    "unsigned char common_flags",
    "int common_pid",
    "u8 a",
    "s8 a",
    "u16 a",
    "s16 a",
    "u32 a",
    "s32 a",
    "u64 a",
    "s64 a",
    "int a",
    "pid_t a",
    "bool a",
    "void * p",
    "const char * s",
    "char b[16]",
    "char b[1055984226]",
    "char b[-2121988123]",
    "char b[]",
    "unsigned char u[8]",
    "u8 u[]",
    "u16 w[4]",
    "u32 w[]",
    "s64 w[2]",
    "int w[]",
    "__data_loc char[] s",
    "__data_loc u8[] s",
    "__data_loc u32[] s",
    "__data_loc int[] s",
    "__data_loc unsigned char[] s",
    "__data_loc char s",
    "__data_loc whatever s",
    "__rel_loc char s[]",
    "__rel_loc u8 s[]",
    "__rel_loc u64 s[]",
    "struct foo st",
    "union bar un",
];

/// Where the schema comes from.
#[derive(Debug, Arbitrary)]
pub enum SchemaInput {
    /// Format text rendered from these lines, then parsed.
    Text {
        /// Common fields (before the blank line).
        common: Vec<FieldLine>,
        /// Event fields.
        fields: Vec<FieldLine>,
    },
    /// A schema built directly.
    Built {
        /// Common fields.
        common: Vec<BuiltField>,
        /// Event fields.
        fields: Vec<BuiltField>,
    },
}

/// One `field:` line of a rendered format file.
#[derive(Debug, Arbitrary)]
pub struct FieldLine {
    /// The declaration.
    pub decl: Decl,
    /// `offset:`.
    pub offset: u16,
    /// `size:`.
    pub size: u16,
    /// `signed:` (absent when `None`).
    pub signed: Option<bool>,
}

/// A declaration: a real spelling, or arbitrary text (without `;` or line breaks, which
/// would only make the line unparsable).
#[derive(Debug)]
pub enum Decl {
    /// Index into [`DECLS`].
    Known(usize),
    /// Anything else.
    Text(String),
}

impl<'a> Arbitrary<'a> for Decl {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(if u.ratio(3, 4)? {
            Decl::Known(u.choose_index(DECLS.len())?)
        } else {
            let text: String = u.arbitrary()?;
            Decl::Text(text.replace([';', '\n', '\r'], " "))
        })
    }
}

impl Decl {
    fn text(&self) -> &str {
        match self {
            Decl::Known(i) => DECLS[*i],
            Decl::Text(t) => t,
        }
    }
}

/// One field of a directly built schema.
#[derive(Debug, Arbitrary)]
pub struct BuiltField {
    /// Field name (arbitrary: quotes, control characters, non-ASCII...).
    pub name: String,
    /// Offset: usually small, sometimes anywhere in `u32`.
    pub offset: Offset,
    /// The kind (the field size follows from it).
    pub kind: BuiltKind,
}

/// A field offset.
#[derive(Debug, Arbitrary)]
pub enum Offset {
    /// Within or just past a typical record.
    Near(u8),
    /// Anywhere a u16 reaches.
    Mid(u16),
    /// Anywhere at all (overflow bait).
    Far(u32),
}

impl Offset {
    fn get(&self) -> u32 {
        match *self {
            Offset::Near(v) => u32::from(v),
            Offset::Mid(v) => u32::from(v),
            Offset::Far(v) => v,
        }
    }
}

/// An integer width.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Width {
    /// 1 byte.
    W1,
    /// 2 bytes.
    W2,
    /// 4 bytes.
    W4,
    /// 8 bytes.
    W8,
}

impl Width {
    fn bytes(self) -> u8 {
        match self {
            Width::W1 => 1,
            Width::W2 => 2,
            Width::W4 => 4,
            Width::W8 => 8,
        }
    }
}

/// An array element.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum BuiltElem {
    /// `char`.
    Char,
    /// Bytes.
    Byte,
    /// Integers.
    Integer(Width, bool),
}

impl BuiltElem {
    fn get(self) -> Element {
        match self {
            BuiltElem::Char => Element::Char,
            BuiltElem::Byte => Element::Byte,
            BuiltElem::Integer(w, signed) => Element::Integer {
                size: w.bytes(),
                signed,
            },
        }
    }
}

/// A field kind, with what decides the field size.
#[derive(Debug, Arbitrary)]
pub enum BuiltKind {
    /// Scalar.
    Integer(Width, bool),
    /// Fixed array of `1 + count` elements.
    FixedArray(BuiltElem, u8),
    /// Dynamic location; `legacy` = the 2-byte offset-only form.
    Dynamic(bool, BuiltElem, bool),
    /// Rest of the record.
    RestOfRecord(BuiltElem),
    /// Opaque struct of `size` bytes.
    Struct(String, u8),
    /// Unknown type of `size` bytes.
    Unknown(u8),
}

impl BuiltField {
    fn get(&self) -> Field {
        let (kind, size) = match &self.kind {
            BuiltKind::Integer(w, signed) => (
                FieldKind::Integer {
                    size: w.bytes(),
                    signed: *signed,
                },
                u32::from(w.bytes()),
            ),
            BuiltKind::FixedArray(elem, count) => {
                let elem = elem.get();
                let count = u32::from(*count) + 1;
                (FieldKind::FixedArray { elem, count }, count * elem.size())
            }
            BuiltKind::Dynamic(rel, elem, legacy) => (
                FieldKind::Dynamic {
                    loc: if *rel {
                        LocKind::RelLoc
                    } else {
                        LocKind::DataLoc
                    },
                    elem: elem.get(),
                },
                if *legacy { 2 } else { 4 },
            ),
            BuiltKind::RestOfRecord(elem) => (FieldKind::RestOfRecord { elem: elem.get() }, 0),
            BuiltKind::Struct(tag, size) => (
                FieldKind::Struct {
                    type_name: tag.clone(),
                },
                u32::from(*size),
            ),
            BuiltKind::Unknown(size) => (FieldKind::Unknown, u32::from(*size)),
        };
        Field {
            name: self.name.clone(),
            type_text: String::from("fuzz"),
            offset: self.offset.get(),
            size,
            signed: None,
            kind,
        }
    }
}

impl SchemaInput {
    /// The schema, or `None` when the rendered text does not parse.
    pub fn format(&self) -> Option<EventFormat> {
        match self {
            SchemaInput::Text { common, fields } => {
                let mut text = String::from("name: fuzz\nID: 1\nformat:\n");
                for line in common {
                    render(&mut text, line);
                }
                text.push('\n');
                for line in fields {
                    render(&mut text, line);
                }
                text.push_str("\nprint fmt: \"\"\n");
                parse_format(&text).ok()
            }
            SchemaInput::Built { common, fields } => Some(EventFormat {
                name: String::from("fuzz"),
                id: 1,
                common_fields: common.iter().map(BuiltField::get).collect(),
                fields: fields.iter().map(BuiltField::get).collect(),
                print_fmt: String::new(),
            }),
        }
    }
}

fn render(text: &mut String, line: &FieldLine) {
    use std::fmt::Write;
    let _ = write!(
        text,
        "\tfield:{};\toffset:{};\tsize:{};",
        line.decl.text(),
        line.offset,
        line.size
    );
    if let Some(signed) = line.signed {
        let _ = write!(text, "\tsigned:{};", u8::from(signed));
    }
    text.push('\n');
}
