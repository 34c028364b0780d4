//! The schema of one tracepoint: what a tracefs `format` file (or a user_events register
//! command) says about the layout of its records.
//!
//! Data path: format text ([`crate::format_file`]) or a user_events register command (`uevrec_samples::register`, the producer side)
//! → [`EventFormat`] → raw record bytes ([`crate::decode`]) → JSON line ([`crate::json_line`]).

use serde::Serialize;

/// One tracepoint's layout, as parsed from `events/<system>/<event>/format`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventFormat {
    /// The event name from the `name:` line (may contain dots: `name.1a` for multi-format).
    pub name: String,
    /// The tracepoint ID from the `ID:` line (perf's `config` for PERF_TYPE_TRACEPOINT).
    pub id: u32,
    /// Fields before the first blank line (`common_type`, `common_pid`, ...).
    pub common_fields: Vec<Field>,
    /// The event's own fields.
    pub fields: Vec<Field>,
    /// The `print fmt:` text, kept verbatim.
    pub print_fmt: String,
}

impl EventFormat {
    /// The common field called `name`, if the format declares it.
    pub fn common_field(&self, name: &str) -> Option<&Field> {
        self.common_fields.iter().find(|f| f.name == name)
    }

    /// The event field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// One `field:` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Field {
    /// The field's name (without brackets).
    pub name: String,
    /// The declared type with the name removed, brackets kept as written and moved next to
    /// the type: `char b[16]` → `char[16]`, `__rel_loc char msg[]` → `__rel_loc char[]`,
    /// `__data_loc char[] filename` → `__data_loc char[]`, `struct foo f` → `struct foo`.
    pub type_text: String,
    /// Byte offset from the start of the record (including common fields).
    pub offset: u32,
    /// Byte size as given by `size:` (the truth; array brackets may be garbage).
    pub size: u32,
    /// The `signed:` value, when the line has one.
    pub signed: Option<bool>,
    /// What the bytes hold and how to decode them.
    pub kind: FieldKind,
}

/// How a field's bytes are to be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FieldKind {
    /// A scalar integer of 1, 2, 4 or 8 bytes.
    Integer {
        /// Width in bytes.
        size: u8,
        /// Whether it is two's-complement signed.
        signed: bool,
    },
    /// A fixed array stored in place; `count` = field size / element size.
    FixedArray {
        /// The element type.
        elem: Element,
        /// Number of elements (from `size:`, never from the brackets).
        count: u32,
    },
    /// A `__data_loc` or `__rel_loc` field: a u32 (or legacy u16) locating the data.
    Dynamic {
        /// Where the offset counts from.
        loc: LocKind,
        /// The element type of the located data.
        elem: Element,
    },
    /// A trailing `size:0` array: the bytes from `offset` to the end of the record.
    RestOfRecord {
        /// The element type.
        elem: Element,
    },
    /// `struct T name`: opaque bytes.
    Struct {
        /// The struct tag (`T`).
        type_name: String,
    },
    /// A type this parser does not understand; the bytes are kept.
    Unknown,
}

/// The element type of an array (fixed, dynamic or rest-of-record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Element {
    /// `char`: the array is a string, up to the first NUL.
    Char,
    /// `unsigned char`, `u8`, `__u8`, or an unknown element type: raw bytes.
    Byte,
    /// An integer element wider than a byte (or an explicitly signed byte).
    Integer {
        /// Width in bytes.
        size: u8,
        /// Whether it is signed.
        signed: bool,
    },
}

impl Element {
    /// Size of one element in bytes.
    pub fn size(self) -> u32 {
        match self {
            Element::Char | Element::Byte => 1,
            Element::Integer { size, .. } => u32::from(size),
        }
    }
}

/// The two encodings of a dynamic location.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LocKind {
    /// `__data_loc`: offset counts from the start of the record.
    DataLoc,
    /// `__rel_loc`: offset counts from the end of the location field itself.
    RelLoc,
}
