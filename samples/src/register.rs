//! user_events register commands (`name[:flags] type field; ...`): parse, print, validate
//! as the kernel does, and compute the [`uevrec_parsers::EventFormat`] the kernel will expose.
//!
//! The grammar and limits mirror `kernel/trace/trace_events_user.c` (6.12:
//! `user_event_parse_cmd`, `user_event_parse_field`, `user_field_size`,
//! `user_field_array_size`, `MAX_EVENT_DESC`, `MAX_FIELD_ARRAY_SIZE`):
//!
//! - the event name runs up to the first space; a `:` in it starts text flags, which every
//!   kernel so far refuses (EINVAL);
//! - fields are separated by `;`; leading spaces of a field are skipped, empty fields are
//!   ignored; inside a field the parts are separated by **single** spaces (a double or
//!   trailing space makes an empty part, which the kernel refuses);
//! - a field is `type name`, or `struct T name SIZE`; two-word types are `unsigned X`,
//!   `struct T`, `__data_loc X`, `__data_loc unsigned X`, `__rel_loc X`,
//!   `__rel_loc unsigned X`;
//! - accepted types: `u8 s8 u16 s16 u32 s32 u64 s64 int`, `unsigned int`, `short`,
//!   `unsigned short`, `char`, `unsigned char`, `char[N]` / `unsigned char[N]`
//!   (1 ≤ N ≤ 1024; N read like the kernel's `kstrtouint(.., 0, ..)`: decimal, `0x` hex or
//!   `0` octal), anything starting `__data_loc ` or `__rel_loc ` (4 bytes), and
//!   `struct T name SIZE` (SIZE ≥ 1, decimal);
//! - `signed:` is the kernel's `type[0] != 'u'`; fields are packed from offset 8;
//! - the whole `DIAG_IOCSREG` command is at most 511 bytes (`MAX_EVENT_DESC` 512 with the
//!   NUL); a `dynamic_events` line at most 4094 bytes (`WRITE_BUFSIZE` − 2).
//!
//! Where the kernel is sloppier than is good for anyone, uevrec is **stricter** and says so
//! in the error: field names must be C identifiers (the kernel takes any text, even
//! `a[2]`, which then reads as an array in the format file, or nothing: `u32 ` with a
//! trailing space makes a field with an empty name), struct tags must be
//! identifiers, nothing may follow the `]` of a fixed array (the kernel ignores up to a
//! few such characters), a `__data_loc`/`__rel_loc` field needs an element type, the event
//! name may not be empty, and no control characters are allowed anywhere (a newline
//! would split a `dynamic_events` line, and `#` there starts a comment, so it is refused
//! in the `dynamic_events` forms).
//!
//! [`RegisterCommand::event_format`] gives the schema the kernel will expose; its field
//! `type_text` is [`uevrec_parsers::resolve_decl`] applied to the line the kernel
//! prints in the format file, with the true element count inside the brackets of a fixed
//! array (`char[8] b` → kernel line `char b[<garbage>]` → type_text `char[8]`) and empty
//! brackets for a `__rel_loc` array (`__rel_loc char[] msg` → `__rel_loc char[]`). The
//! kernel prints garbage (or nothing) between those brackets, so compare type texts with
//! the bracket contents removed ([`strip_bracket_contents`]).

use std::fmt;

use uevrec_parsers::{DeclError, resolve_decl};
use uevrec_parsers::{EventFormat, Field, FieldKind};

/// Size of the common header (`struct trace_entry`) the kernel puts before the payload;
/// the first field of a user event sits at this offset.
pub const COMMON_HEADER_SIZE: u32 = 8;

/// Longest register command `DIAG_IOCSREG` accepts, in bytes (`MAX_EVENT_DESC` − 1).
pub const MAX_COMMAND_LEN: usize = 511;

/// Longest line `dynamic_events` accepts, in bytes (`WRITE_BUFSIZE` − 2).
pub const MAX_DYNAMIC_EVENTS_LINE: usize = 4094;

/// Largest element count of a fixed `char[N]` / `unsigned char[N]` (`MAX_FIELD_ARRAY_SIZE`).
pub const MAX_ARRAY_LEN: u32 = 1024;

/// The scalar types the kernel accepts and their sizes (`user_field_size`; `long` is
/// deliberately absent).
pub const SCALAR_TYPES: &[(&str, u32)] = &[
    ("s64", 8),
    ("u64", 8),
    ("s32", 4),
    ("u32", 4),
    ("int", 4),
    ("unsigned int", 4),
    ("s16", 2),
    ("u16", 2),
    ("short", 2),
    ("unsigned short", 2),
    ("s8", 1),
    ("u8", 1),
    ("char", 1),
    ("unsigned char", 1),
];

/// Types the kernel accepts, for error messages.
const ACCEPTED: &str = "the kernel accepts u8 s8 u16 s16 u32 s32 u64 s64 int, `unsigned int`, \
    short, `unsigned short`, char, `unsigned char`, `char[N]` and `unsigned char[N]` \
    (1 <= N <= 1024), `__data_loc T[] name`, `__rel_loc T[] name`, `struct T name SIZE`";

/// Which text form a command was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandForm {
    /// `name fields`: the `name_args` of a `DIAG_IOCSREG` ioctl.
    Register,
    /// `u:name fields`: a line written to tracefs `dynamic_events` (creates a persistent
    /// event).
    DynamicCreate,
    /// `-:name fields`: a `dynamic_events` line deleting that event (the fields must match).
    DynamicDelete,
}

impl CommandForm {
    /// The prefix this form puts before the name (`""`, `"u:"`, `"-:"`).
    pub fn prefix(self) -> &'static str {
        match self {
            CommandForm::Register => "",
            CommandForm::DynamicCreate => "u:",
            CommandForm::DynamicDelete => "-:",
        }
    }

    /// The longest text the kernel takes in this form.
    pub fn max_len(self) -> usize {
        match self {
            CommandForm::Register => MAX_COMMAND_LEN,
            CommandForm::DynamicCreate | CommandForm::DynamicDelete => MAX_DYNAMIC_EVENTS_LINE,
        }
    }
}

/// One field of a register command, with the layout the kernel gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandField {
    /// The type exactly as written (the kernel keeps and compares this text):
    /// `u32`, `unsigned int`, `char[8]`, `__data_loc char[]`, `struct foo`.
    pub type_text: String,
    /// The field name.
    pub name: String,
    /// Offset from the start of the record (the first field is at [`COMMON_HEADER_SIZE`]).
    pub offset: u32,
    /// Size in bytes (4 for dynamic locations, SIZE for structs).
    pub size: u32,
    /// The kernel's `signed:` value: the type text does not start with `u`.
    pub signed: bool,
    /// How the bytes decode, from [`uevrec_parsers::resolve_decl`].
    pub kind: FieldKind,
}

impl CommandField {
    /// Offset of this field inside the payload written after the `write_index`
    /// (record offset minus the common header).
    pub fn payload_offset(&self) -> u32 {
        self.offset.saturating_sub(COMMON_HEADER_SIZE)
    }

    /// Whether the kernel checks that the located data of this dynamic field ends with a
    /// NUL byte (it does for every `__data_loc`/`__rel_loc` type containing `char`, and
    /// discards the write with EFAULT otherwise).
    pub fn kernel_requires_nul(&self) -> bool {
        matches!(self.kind, FieldKind::Dynamic { .. }) && self.type_text.contains("char")
    }

    /// The declaration as the kernel prints it in the format file, with `bracket` inside
    /// the brackets of an array (the kernel prints garbage or nothing there).
    fn printed_decl(&self, bracket: &str) -> String {
        match self.type_text.find('[') {
            Some(open) if !self.type_text.starts_with("__data_loc") => {
                format!("{} {}[{bracket}]", &self.type_text[..open], self.name)
            }
            _ => format!("{} {}", self.type_text, self.name),
        }
    }

    /// The printed declaration with the true element count in a fixed array's brackets
    /// (and empty brackets for a `__rel_loc` array): the input of the one type rule.
    fn true_decl(&self) -> String {
        let count = if self.type_text.starts_with("__") {
            String::new()
        } else {
            self.size.to_string()
        };
        self.printed_decl(&count)
    }

    /// The `printf` conversion the kernel's `print fmt:` uses for this field.
    fn print_conversion(&self) -> &'static str {
        match self.type_text.as_str() {
            "s64" => "%lld",
            "u64" => "%llu",
            "s32" | "int" | "s16" | "short" | "s8" | "char" => "%d",
            "u32" | "unsigned int" | "u16" | "unsigned short" | "u8" | "unsigned char" => "%u",
            t if t.contains("char[") => "%s",
            _ => "%llu",
        }
    }

    /// The `print fmt:` argument for this field.
    fn print_argument(&self) -> String {
        let getter = if self.type_text.starts_with("__data_loc ") {
            Some("__get_str")
        } else if self.type_text.starts_with("__rel_loc ") {
            Some("__get_rel_str")
        } else {
            None
        };
        match getter {
            Some(getter) if self.type_text.contains("char") => format!("{getter}({})", self.name),
            _ => format!("REC->{}", self.name),
        }
    }
}

/// A parsed, kernel-validated user_events register command.
///
/// ```
/// use uevrec_samples::register::RegisterCommand;
/// let cmd = RegisterCommand::parse("test u32 a;char[8] b").unwrap();
/// assert_eq!(cmd.to_string(), "test u32 a; char[8] b");
/// assert_eq!(cmd.fields[1].offset, 12);
/// assert!(RegisterCommand::parse("test long x").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterCommand {
    /// The text form it was written in.
    pub form: CommandForm,
    /// The event name (the tracepoint name, unless registered with MULTI_FORMAT, which
    /// appends `.<hex id>`).
    pub name: String,
    /// The `:FLAGS` text. [`RegisterCommand::parse`] refuses commands with flags (no kernel
    /// accepts text flags); [`RegisterCommand::parse_syntax`] keeps them here.
    pub flags: Option<String>,
    /// The fields in order.
    pub fields: Vec<CommandField>,
}

/// What is wrong with one field of a register command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    /// Only a type, no name.
    #[error("no field name: write `TYPE NAME`, e.g. `u32 count`")]
    MissingName,
    /// A double or trailing space.
    #[error(
        "extra space: the kernel splits a field on single spaces and refuses empty parts \
         (write `u32 a; u8 b`, one space inside a field, none before `;`)"
    )]
    ExtraSpace,
    /// More words than `type name` (or `struct T name SIZE`).
    #[error("too many words: a field is `TYPE NAME`, or `struct T NAME SIZE`")]
    TooManyWords,
    /// A size after a non-struct field.
    #[error("only struct fields take a size (`struct T NAME SIZE`); write `TYPE NAME` without it")]
    SizeOnlyForStruct,
    /// `struct T name` without SIZE.
    #[error("a struct field needs its size in bytes: `struct {tag} NAME SIZE`")]
    StructNeedsSize {
        /// The struct tag.
        tag: String,
    },
    /// SIZE of a struct is not a number the kernel reads.
    #[error("struct size `{0}` is not a decimal number from 1 to 2147483647")]
    BadStructSize(String),
    /// SIZE 0.
    #[error("struct size 0: the kernel refuses empty fields; give the size in bytes (>= 1)")]
    StructSizeZero,
    /// `struct` followed by something that is not an identifier.
    #[error("struct tag `{0}` is not a C identifier (uevrec requires one)")]
    BadStructTag(String),
    /// `long` and friends.
    #[error(
        "type `{0}` is refused: `long` differs in size between 32- and 64-bit programs; \
         use s64/u64 (or s32/u32)"
    )]
    LongRefused(String),
    /// A fixed array of something other than char/unsigned char.
    #[error(
        "fixed arrays are only accepted for char and unsigned char: use `unsigned char[N]` \
         for bytes, or `__data_loc {0}[] NAME` for a variable-length array of {0}"
    )]
    FixedArrayOnlyChar(String),
    /// `char[]`: a fixed array without a length.
    #[error(
        "fixed array `{0}` has no length: give 1..=1024, or use `__data_loc char[] NAME` / \
         `__rel_loc char[] NAME` for a variable-length string"
    )]
    ArrayNeedsLength(String),
    /// The bracket text is not a number the kernel reads.
    #[error(
        "array length `{0}` is not a number the kernel reads (decimal, 0x hex or 0 octal, \
         at most 6 characters)"
    )]
    BadArrayLength(String),
    /// 0 or more than 1024.
    #[error("array length {0} is out of range: the kernel accepts 1..=1024 (MAX_FIELD_ARRAY_SIZE)")]
    ArrayLengthRange(u32),
    /// Text after the closing bracket.
    #[error("text after `]` in `{0}`: write `char[N] NAME`")]
    AfterBracket(String),
    /// `__data_loc` / `__rel_loc` with nothing after it.
    #[error("a dynamic field needs an element type: `__data_loc char[] NAME`")]
    MissingElementType,
    /// A type the kernel does not know.
    #[error("unknown type `{0}`: {ACCEPTED}")]
    UnknownType(String),
    /// The field name is not an identifier.
    #[error(
        "field name `{0}` is not a C identifier ([A-Za-z_][A-Za-z0-9_]*): the kernel would \
         take it, but the format file and filters would misread it"
    )]
    BadFieldName(String),
    /// The declaration cannot be resolved by the one type rule.
    #[error("cannot resolve the declaration: {0}")]
    Unresolvable(DeclError),
}

/// Why a register command is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// No event name.
    #[error(
        "empty event name: a register command is `NAME FIELD; FIELD...`, \
         e.g. `myevent u32 count; char[16] tag`"
    )]
    EmptyName,
    /// Longer than the kernel reads.
    #[error(
        "command is {len} bytes (as written, or in canonical form with one space after each \
         `;`); the kernel accepts at most {max} bytes in this form: shorten the names"
    )]
    TooLong {
        /// Length of the text.
        len: usize,
        /// The limit for its form.
        max: usize,
    },
    /// A control character (or `#` in a dynamic_events line).
    #[error(
        "character {ch:?} at byte {at} is not allowed: commands are one line of printable \
         text (and `#` starts a comment in dynamic_events)"
    )]
    BadChar {
        /// The character.
        ch: char,
        /// Its byte offset in the text.
        at: usize,
    },
    /// `name:flags`.
    #[error(
        "text flags `:{0}` are refused by the kernel (EINVAL; none exist): drop them and set \
         USER_EVENT_REG_PERSIST / USER_EVENT_REG_MULTI_FORMAT in user_reg.flags instead"
    )]
    TextFlags(String),
    /// `-:SYSTEM/NAME`.
    #[error("`-:SYSTEM/NAME` is not supported here; write `-:NAME FIELDS`")]
    DeleteWithSystem,
    /// One field is wrong.
    #[error("field {index} `{text}`: {problem}")]
    Field {
        /// 1-based position among the `;`-separated parts.
        index: usize,
        /// The field text.
        text: String,
        /// What is wrong.
        problem: FieldProblem,
    },
    /// The fields add up past 4 GiB.
    #[error("the fields add up to more than 4 GiB; the kernel cannot lay them out")]
    TooLarge,
}

impl RegisterCommand {
    /// Parse and validate a command as the kernel would (see the module docs), accepting
    /// the `DIAG_IOCSREG` form `name fields` and the `dynamic_events` forms
    /// `u:name fields` and `-:name fields`.
    pub fn parse(text: &str) -> Result<RegisterCommand, RegisterError> {
        let cmd = Self::parse_syntax(text)?;
        match cmd.flags {
            Some(flags) => Err(RegisterError::TextFlags(flags)),
            None => Ok(cmd),
        }
    }

    /// Like [`RegisterCommand::parse`], but keeps `:FLAGS` text in
    /// [`RegisterCommand::flags`] instead of refusing it (for echoing or diagnosing a
    /// command; the kernel refuses any flags).
    pub fn parse_syntax(text: &str) -> Result<RegisterCommand, RegisterError> {
        let (form, body) = if let Some(rest) = text.strip_prefix("u:") {
            (CommandForm::DynamicCreate, rest.trim_start_matches(' '))
        } else if let Some(rest) = text.strip_prefix("-:") {
            (CommandForm::DynamicDelete, rest)
        } else {
            (CommandForm::Register, text)
        };
        if text.len() > form.max_len() {
            return Err(RegisterError::TooLong {
                len: text.len(),
                max: form.max_len(),
            });
        }
        let comment = form != CommandForm::Register;
        if let Some((at, ch)) = text
            .char_indices()
            .find(|&(_, c)| c.is_control() || (comment && c == '#'))
        {
            return Err(RegisterError::BadChar { ch, at });
        }
        let (head, args) = match body.split_once(' ') {
            Some((head, args)) => (head, Some(args)),
            None => (body, None),
        };
        let (name, flags) = match head.split_once(':') {
            Some((name, flags)) => (name, Some(flags.to_string())),
            None => (head, None),
        };
        if name.is_empty() {
            return Err(RegisterError::EmptyName);
        }
        if form == CommandForm::DynamicDelete && name.contains('/') {
            return Err(RegisterError::DeleteWithSystem);
        }
        let mut fields = Vec::new();
        let mut offset = COMMON_HEADER_SIZE;
        // Fields counted from 1.
        for (index, piece) in (1..).zip(args.unwrap_or("").split(';')) {
            let text = piece.trim_start_matches(' ');
            if text.is_empty() {
                continue;
            }
            let field = parse_field(text, offset).map_err(|problem| RegisterError::Field {
                index,
                text: text.to_string(),
                problem,
            })?;
            offset = offset
                .checked_add(field.size)
                .ok_or(RegisterError::TooLarge)?;
            fields.push(field);
        }
        let cmd = RegisterCommand {
            form,
            name: name.to_string(),
            flags,
            fields,
        };
        // Producers register the canonical text (`Display`), which puts a space after each
        // `;`: it must fit too.
        let canonical = cmd.to_string().len();
        if canonical > form.max_len() {
            return Err(RegisterError::TooLong {
                len: canonical,
                max: form.max_len(),
            });
        }
        Ok(cmd)
    }

    /// The same command in another text form (e.g. the `-:` line deleting a `u:` event).
    pub fn with_form(&self, form: CommandForm) -> RegisterCommand {
        RegisterCommand {
            form,
            ..self.clone()
        }
    }

    /// Size of the fixed part of the payload (all fields, without the common header):
    /// the least a write must carry after its `write_index`.
    pub fn payload_size(&self) -> u32 {
        self.fields
            .last()
            .map_or(0, |f| f.payload_offset().saturating_add(f.size))
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&CommandField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The schema the kernel exposes for this command under tracepoint ID `id`: the four
    /// standard common fields, then the fields, and the kernel's own `print fmt:` text.
    /// This assumes mainline's 8-byte `struct trace_entry`; kernels that add common fields
    /// (older PREEMPT_RT patch sets) move the event's fields too, so there the real format
    /// file is the only truth.
    /// For a MULTI_FORMAT registration set `name` to the versioned tracepoint name.
    pub fn event_format(&self, id: u32) -> EventFormat {
        let common_fields = STANDARD_COMMON_FIELDS
            .iter()
            .map(|&(decl, offset, size, signed)| schema_field(decl, offset, size, signed))
            .collect();
        let fields = self
            .fields
            .iter()
            .map(|f| schema_field(&f.true_decl(), f.offset, f.size, f.signed))
            .collect();
        EventFormat {
            name: self.name.clone(),
            id,
            common_fields,
            fields,
            print_fmt: self.print_fmt(),
        }
    }

    /// The `print fmt:` text the kernel builds for this command
    /// (`"a=%u b=%s", REC->a, REC->b`).
    pub fn print_fmt(&self) -> String {
        let conversions: Vec<String> = self
            .fields
            .iter()
            .map(|f| format!("{}={}", f.name, f.print_conversion()))
            .collect();
        let mut out = format!("\"{}\"", conversions.join(" "));
        for f in &self.fields {
            out.push_str(", ");
            out.push_str(&f.print_argument());
        }
        out
    }

    /// The format file the kernel shows for this command under `id`, byte for byte, as
    /// printed when the kernel leaves array lengths at zero (`char b[]`; other times it
    /// prints a garbage number there, see [`strip_bracket_contents`]).
    pub fn expected_format_file(&self, id: u32) -> String {
        let decls: Vec<String> = self.fields.iter().map(|f| f.printed_decl("")).collect();
        let fields: Vec<(&str, u32, u32, bool)> = decls
            .iter()
            .zip(&self.fields)
            .map(|(d, f)| (d.as_str(), f.offset, f.size, f.signed))
            .collect();
        format_file_text(&self.name, id, &fields, &self.print_fmt())
    }
}

/// The text of a tracefs `format` file as the kernel prints it: `name:`, `ID:`, the
/// standard common fields (`common_type`, `common_flags`, `common_preempt_count`,
/// `common_pid`), a blank line, `fields` given as (declaration, offset, size, signed),
/// a blank line and `print fmt: <print_fmt>`. For test fixtures (fake tracefs trees,
/// benches) of user_events and kernel events alike.
///
/// ```
/// let text = uevrec_samples::register::format_file_text(
///     "e", 7, &[("u32 n", 8, 4, false)], "\"n=%u\", REC->n");
/// assert!(text.starts_with("name: e\nID: 7\nformat:\n\tfield:unsigned short common_type;"));
/// assert!(text.contains("\n\n\tfield:u32 n;\toffset:8;\tsize:4;\tsigned:0;\n\nprint fmt: "));
/// ```
pub fn format_file_text(
    name: &str,
    id: u32,
    fields: &[(&str, u32, u32, bool)],
    print_fmt: &str,
) -> String {
    let mut out = format!("name: {name}\nID: {id}\nformat:\n");
    for &(decl, offset, size, signed) in STANDARD_COMMON_FIELDS {
        push_field_line(&mut out, decl, offset, size, signed);
    }
    out.push('\n');
    for &(decl, offset, size, signed) in fields {
        push_field_line(&mut out, decl, offset, size, signed);
    }
    out.push_str("\nprint fmt: ");
    out.push_str(print_fmt);
    out.push('\n');
    out
}

/// The standard common fields: (declaration, offset, size, signed).
const STANDARD_COMMON_FIELDS: &[(&str, u32, u32, bool)] = &[
    ("unsigned short common_type", 0, 2, false),
    ("unsigned char common_flags", 2, 1, false),
    ("unsigned char common_preempt_count", 3, 1, false),
    ("int common_pid", 4, 4, true),
];

/// A schema field from a printed declaration, typed by the one rule
/// ([`resolve_decl`]); a declaration it cannot split keeps its text as the name and gets
/// [`FieldKind::Unknown`] (not reachable for validated commands).
fn schema_field(decl: &str, offset: u32, size: u32, signed: bool) -> Field {
    let (name, type_text, kind) = match resolve_decl(decl, size, Some(signed)) {
        Ok(d) => (d.name, d.type_text, d.kind),
        Err(_) => (decl.to_string(), String::new(), FieldKind::Unknown),
    };
    Field {
        name,
        type_text,
        offset,
        size,
        signed: Some(signed),
        kind,
    }
}

fn push_field_line(out: &mut String, decl: &str, offset: u32, size: u32, signed: bool) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "\tfield:{decl};\toffset:{offset};\tsize:{size};\tsigned:{};",
        u8::from(signed)
    );
}

/// `text` with everything between `[` and `]` removed (`char[1055984226]` → `char[]`),
/// for comparing type texts with the kernel's garbage array lengths.
pub fn strip_bracket_contents(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut inside = false;
    for c in text.chars() {
        match c {
            '[' => {
                inside = true;
                out.push(c);
            }
            ']' => {
                inside = false;
                out.push(c);
            }
            _ if inside => {}
            _ => out.push(c),
        }
    }
    out
}

impl fmt::Display for RegisterCommand {
    /// The canonical text: what `dynamic_events` lists for the event (after the prefix),
    /// and the text the kernel compares when the same name is registered again.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.form.prefix(), self.name)?;
        if let Some(flags) = &self.flags {
            write!(f, ":{flags}")?;
        }
        for (i, field) in self.fields.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { "; " })?;
            write!(f, "{} {}", field.type_text, field.name)?;
            if field.type_text.starts_with("struct ") {
                write!(f, " {}", field.size)?;
            }
        }
        Ok(())
    }
}

/// Two-word type prefixes (the kernel's `skip_next` list), and whether they make a struct.
const TWO_WORD_PREFIXES: [(&str, bool); 6] = [
    ("unsigned ", false),
    ("struct ", true),
    ("__data_loc unsigned ", false),
    ("__data_loc ", false),
    ("__rel_loc unsigned ", false),
    ("__rel_loc ", false),
];

/// Parse one field (leading spaces already skipped) placed at record offset `offset`.
fn parse_field(text: &str, offset: u32) -> Result<CommandField, FieldProblem> {
    let prefix = TWO_WORD_PREFIXES.iter().find(|(p, _)| text.starts_with(p));
    let is_struct = prefix.is_some_and(|&(_, s)| s);
    // type, then the parts after it, split on single spaces like the kernel's strsep.
    let (type_text, rest) = match prefix {
        Some((p, _)) => {
            // A place in `text`; the space there is one byte.
            let end = text[p.len()..]
                .find(' ')
                .ok_or(FieldProblem::MissingName)?
                .saturating_add(p.len());
            (&text[..end], Some(&text[end..][1..]))
        }
        None => match text.split_once(' ') {
            Some((t, rest)) => (t, Some(rest)),
            None => (text, None),
        },
    };
    let parts: Vec<&str> = rest.map(|r| r.split(' ').collect()).unwrap_or_default();
    if type_text.ends_with(' ') || parts.iter().any(|p| p.is_empty()) {
        return Err(FieldProblem::ExtraSpace);
    }
    let (name, size_text) = match parts.as_slice() {
        [] => return Err(FieldProblem::MissingName),
        [name] => (*name, None),
        [name, size] if is_struct => (*name, Some(*size)),
        [second, third] => {
            return Err(if kernel_uint(third, 10).is_some() {
                FieldProblem::SizeOnlyForStruct
            } else if kernel_field_size(type_text).is_ok() {
                FieldProblem::TooManyWords
            } else {
                // `long long x`, `signed char c`: a two-word type the kernel does not know.
                unknown_type(&format!("{type_text} {second}"))
            });
        }
        _ => return Err(FieldProblem::TooManyWords),
    };
    if !is_identifier(name) {
        return Err(FieldProblem::BadFieldName(name.to_string()));
    }
    let size = if is_struct {
        let tag = &type_text["struct ".len()..];
        if !is_identifier(tag) {
            return Err(FieldProblem::BadStructTag(tag.to_string()));
        }
        let Some(size_text) = size_text else {
            return Err(FieldProblem::StructNeedsSize {
                tag: tag.to_string(),
            });
        };
        match kernel_uint(size_text, 10) {
            Some(0) => return Err(FieldProblem::StructSizeZero),
            // The kernel stores it in an `int`: larger values come back negative.
            Some(n) if n <= i32::MAX as u32 => n,
            _ => return Err(FieldProblem::BadStructSize(size_text.to_string())),
        }
    } else {
        kernel_field_size(type_text)?
    };
    let signed = !type_text.starts_with('u');
    let mut field = CommandField {
        type_text: type_text.to_string(),
        name: name.to_string(),
        offset,
        size,
        signed,
        kind: FieldKind::Unknown,
    };
    // The one type rule, on the declaration the kernel prints (with the true count).
    field.kind = resolve_decl(&field.true_decl(), size, Some(signed))
        .map_err(FieldProblem::Unresolvable)?
        .kind;
    Ok(field)
}

/// The kernel's `user_field_size` for a non-struct type.
fn kernel_field_size(type_text: &str) -> Result<u32, FieldProblem> {
    if let Some(&(_, size)) = SCALAR_TYPES.iter().find(|(t, _)| *t == type_text) {
        return Ok(size);
    }
    if type_text.starts_with("char[") || type_text.starts_with("unsigned char[") {
        return array_len(type_text);
    }
    for loc in ["__data_loc ", "__rel_loc "] {
        if let Some(elem) = type_text.strip_prefix(loc) {
            let elem = elem.strip_prefix("unsigned ").unwrap_or(elem);
            if elem.is_empty() || elem.starts_with('[') {
                return Err(FieldProblem::MissingElementType);
            }
            return Ok(4);
        }
    }
    Err(unknown_type(type_text))
}

/// The most helpful problem for a type the kernel does not know.
fn unknown_type(type_text: &str) -> FieldProblem {
    if type_text.split([' ', '[']).any(|w| w == "long") {
        return FieldProblem::LongRefused(type_text.to_string());
    }
    if let Some(open) = type_text.find('[') {
        return FieldProblem::FixedArrayOnlyChar(type_text[..open].to_string());
    }
    FieldProblem::UnknownType(type_text.to_string())
}

/// The kernel's `user_field_array_size` (with nothing allowed after `]`).
fn array_len(type_text: &str) -> Result<u32, FieldProblem> {
    let Some((_, inner)) = type_text.split_once('[') else {
        return Err(FieldProblem::ArrayNeedsLength(type_text.to_string()));
    };
    let Some(close) = inner.find(']') else {
        return Err(FieldProblem::BadArrayLength(inner.to_string()));
    };
    if &inner[close..] != "]" {
        return Err(FieldProblem::AfterBracket(type_text.to_string()));
    }
    let digits = &inner[..close];
    if digits.is_empty() {
        return Err(FieldProblem::ArrayNeedsLength(type_text.to_string()));
    }
    // The kernel copies at most 7 characters after `[` (the number and its `]`).
    if digits.len() > 6 {
        return Err(FieldProblem::BadArrayLength(digits.to_string()));
    }
    match kernel_uint(digits, 0) {
        Some(n) if (1..=MAX_ARRAY_LEN).contains(&n) => Ok(n),
        Some(n) => Err(FieldProblem::ArrayLengthRange(n)),
        None => Err(FieldProblem::BadArrayLength(digits.to_string())),
    }
}

/// The kernel's `kstrtouint(text, radix, ..)` for radix 10 or 0 (auto: `0x` hex, `0` octal):
/// an optional `+`, then digits only.
fn kernel_uint(text: &str, radix: u32) -> Option<u32> {
    let text = text.strip_prefix('+').unwrap_or(text);
    let (digits, radix) = match radix {
        0 => {
            let lower = text.get(..2).map(str::to_ascii_lowercase);
            if lower.as_deref() == Some("0x")
                && text[2..].starts_with(|c: char| c.is_ascii_hexdigit())
            {
                (&text[2..], 16)
            } else if text.starts_with('0') {
                (text, 8)
            } else {
                (text, 10)
            }
        }
        r => (text, r),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u32::from_str_radix(digits, radix).ok()
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use uevrec_parsers::{Element, LocKind};

    fn one_field(field: &str) -> Result<CommandField, RegisterError> {
        RegisterCommand::parse(&format!("ev {field}")).map(|mut c| c.fields.remove(0))
    }

    fn problem(field: &str) -> FieldProblem {
        match one_field(field) {
            Err(RegisterError::Field { problem, .. }) => problem,
            other => panic!("`{field}`: expected a field problem, got {other:?}"),
        }
    }

    const fn int(size: u8, signed: bool) -> FieldKind {
        FieldKind::Integer { size, signed }
    }

    #[test]
    fn accepted_types_sizes_signedness_and_kinds() {
        use Element::{Byte, Char};
        use LocKind::{DataLoc, RelLoc};
        let dynamic = |loc, elem| FieldKind::Dynamic { loc, elem };
        let fixed = |elem, count| FieldKind::FixedArray { elem, count };
        let table: Vec<(&str, u32, bool, FieldKind)> = vec![
            ("u8 f", 1, false, int(1, false)),
            ("s8 f", 1, true, int(1, true)),
            ("u16 f", 2, false, int(2, false)),
            ("s16 f", 2, true, int(2, true)),
            ("u32 f", 4, false, int(4, false)),
            ("s32 f", 4, true, int(4, true)),
            ("u64 f", 8, false, int(8, false)),
            ("s64 f", 8, true, int(8, true)),
            ("int f", 4, true, int(4, true)),
            ("unsigned int f", 4, false, int(4, false)),
            ("short f", 2, true, int(2, true)),
            ("unsigned short f", 2, false, int(2, false)),
            ("char f", 1, true, int(1, true)),
            ("unsigned char f", 1, false, int(1, false)),
            ("char[8] f", 8, true, fixed(Char, 8)),
            ("char[1] f", 1, true, fixed(Char, 1)),
            ("char[1024] f", 1024, true, fixed(Char, 1024)),
            ("unsigned char[16] f", 16, false, fixed(Byte, 16)),
            ("char[0x10] f", 16, true, fixed(Char, 16)),
            ("char[0X1f] f", 31, true, fixed(Char, 31)),
            ("char[010] f", 8, true, fixed(Char, 8)),
            ("char[+4] f", 4, true, fixed(Char, 4)),
            ("__data_loc char[] f", 4, true, dynamic(DataLoc, Char)),
            ("__rel_loc char[] f", 4, true, dynamic(RelLoc, Char)),
            (
                "__data_loc unsigned char[] f",
                4,
                true,
                dynamic(DataLoc, Byte),
            ),
            (
                "__rel_loc unsigned char[] f",
                4,
                true,
                dynamic(RelLoc, Byte),
            ),
            ("__data_loc u8[] f", 4, true, dynamic(DataLoc, Byte)),
            ("__rel_loc u8[] f", 4, true, dynamic(RelLoc, Byte)),
            (
                "__data_loc s8[] f",
                4,
                true,
                dynamic(
                    DataLoc,
                    Element::Integer {
                        size: 1,
                        signed: true,
                    },
                ),
            ),
            (
                "__data_loc u32[] f",
                4,
                true,
                dynamic(
                    DataLoc,
                    Element::Integer {
                        size: 4,
                        signed: false,
                    },
                ),
            ),
            (
                "__data_loc int[] f",
                4,
                true,
                dynamic(
                    DataLoc,
                    Element::Integer {
                        size: 4,
                        signed: true,
                    },
                ),
            ),
            (
                "__rel_loc s64[] f",
                4,
                true,
                dynamic(
                    RelLoc,
                    Element::Integer {
                        size: 8,
                        signed: true,
                    },
                ),
            ),
            ("__data_loc char f", 4, true, dynamic(DataLoc, Char)),
            ("__data_loc whatever f", 4, true, dynamic(DataLoc, Byte)),
            (
                "struct foo f 20",
                20,
                true,
                FieldKind::Struct {
                    type_name: "foo".into(),
                },
            ),
            (
                "struct foo f 1",
                1,
                true,
                FieldKind::Struct {
                    type_name: "foo".into(),
                },
            ),
            (
                "struct foo f +5000",
                5000,
                true,
                FieldKind::Struct {
                    type_name: "foo".into(),
                },
            ),
        ];
        for (text, size, signed, kind) in table {
            let f = one_field(text).unwrap_or_else(|e| panic!("`{text}` refused: {e}"));
            assert_eq!(
                (f.name.as_str(), f.offset, f.size, f.signed),
                ("f", 8, size, signed),
                "{text}"
            );
            assert_eq!(f.kind, kind, "{text}");
        }
    }

    #[test]
    fn refused_types_name_the_problem() {
        use FieldProblem as P;
        let table: Vec<(&str, FieldProblem)> = vec![
            ("long f", P::LongRefused("long".into())),
            ("unsigned long f", P::LongRefused("unsigned long".into())),
            ("long long f", P::LongRefused("long long".into())),
            ("signed char f", P::UnknownType("signed char".into())),
            ("bool f", P::UnknownType("bool".into())),
            ("s128 f", P::UnknownType("s128".into())),
            ("char[0] f", P::ArrayLengthRange(0)),
            ("char[] f", P::ArrayNeedsLength("char[]".into())),
            ("char[1025] f", P::ArrayLengthRange(1025)),
            ("unsigned char[2000] f", P::ArrayLengthRange(2000)),
            ("u8[8] f", P::FixedArrayOnlyChar("u8".into())),
            ("s8[4] f", P::FixedArrayOnlyChar("s8".into())),
            ("int[2] f", P::FixedArrayOnlyChar("int".into())),
            ("struct foo f", P::StructNeedsSize { tag: "foo".into() }),
            ("struct foo f 0", P::StructSizeZero),
            ("struct foo f -1", P::BadStructSize("-1".into())),
            ("struct foo f 0x10", P::BadStructSize("0x10".into())),
            (
                "struct foo f 3000000000",
                P::BadStructSize("3000000000".into()),
            ),
            (
                "struct foo f 99999999999",
                P::BadStructSize("99999999999".into()),
            ),
            ("struct foo f 20 x", P::TooManyWords),
            ("u32 f 4", P::SizeOnlyForStruct),
            ("u32 f g", P::TooManyWords),
            ("u32 f ", P::ExtraSpace),
            ("u32  f", P::ExtraSpace),
            ("unsigned  int f", P::ExtraSpace),
            ("__data_loc  f", P::ExtraSpace),
            ("u32", P::MissingName),
            ("unsigned int", P::MissingName),
            ("struct foo", P::MissingName),
            ("u32 a-b", P::BadFieldName("a-b".into())),
            ("u32 a[2]", P::BadFieldName("a[2]".into())),
            ("u32 2a", P::BadFieldName("2a".into())),
            ("struct a[2] f 8", P::BadStructTag("a[2]".into())),
            ("char[8]x f", P::AfterBracket("char[8]x".into())),
            ("char[8][2] f", P::AfterBracket("char[8][2]".into())),
            ("char[8 f", P::BadArrayLength("8".into())),
            ("char[0x] f", P::BadArrayLength("0x".into())),
            ("char[08] f", P::BadArrayLength("08".into())),
            ("char[-1] f", P::BadArrayLength("-1".into())),
            ("char[0000008] f", P::BadArrayLength("0000008".into())),
            ("__data_loc [] f", P::MissingElementType),
            ("__rel_loc unsigned [] f", P::MissingElementType),
        ];
        for (text, want) in table {
            assert_eq!(problem(text), want, "{text}");
        }
    }

    #[test]
    fn errors_say_what_the_kernel_accepts() {
        for (text, hint) in [
            ("ev long x", "s64/u64"),
            ("ev bool x", "unsigned char[N]"),
            ("ev u8[4] x", "__data_loc u8[] NAME"),
            ("ev char[] x", "__data_loc char[] NAME"),
            ("ev struct s x", "struct s NAME SIZE"),
            ("ev:BPF u32 a", "user_reg.flags"),
            ("ev u32 a; u32 b ", "field 2 `u32 b `"),
        ] {
            let msg = RegisterCommand::parse(text).unwrap_err().to_string();
            assert!(msg.contains(hint), "{text}: {msg}");
        }
    }

    #[test]
    fn command_level_rules() {
        assert_eq!(RegisterCommand::parse(""), Err(RegisterError::EmptyName));
        assert_eq!(
            RegisterCommand::parse(" u32 a"),
            Err(RegisterError::EmptyName)
        );
        assert_eq!(
            RegisterCommand::parse(":x u32 a"),
            Err(RegisterError::EmptyName)
        );
        assert_eq!(
            RegisterCommand::parse("ev:x u32 a"),
            Err(RegisterError::TextFlags("x".into()))
        );
        assert_eq!(
            RegisterCommand::parse("ev: u32 a"),
            Err(RegisterError::TextFlags(String::new()))
        );
        let kept = RegisterCommand::parse_syntax("ev:A,B u32 a").unwrap();
        assert_eq!(kept.flags.as_deref(), Some("A,B"));
        assert_eq!(kept.to_string(), "ev:A,B u32 a");
        assert_eq!(
            RegisterCommand::parse("ev u32 a\n"),
            Err(RegisterError::BadChar { ch: '\n', at: 8 })
        );
        assert_eq!(
            RegisterCommand::parse("ev\tu32 a"),
            Err(RegisterError::BadChar { ch: '\t', at: 2 })
        );
        assert!(RegisterCommand::parse("e#v u32 a").is_ok());
        assert_eq!(
            RegisterCommand::parse("u:ev u32 a #c"),
            Err(RegisterError::BadChar { ch: '#', at: 11 })
        );
        assert_eq!(
            RegisterCommand::parse("-:user_events/ev u32 a"),
            Err(RegisterError::DeleteWithSystem)
        );
        // Names: anything but control characters, dots included.
        assert_eq!(
            RegisterCommand::parse("my.ev-1 u32 a").unwrap().name,
            "my.ev-1"
        );
        // Empty fields are skipped, `;` needs no space after it.
        let c = RegisterCommand::parse("ev u32 a;; ;u8 b;").unwrap();
        assert_eq!(c.to_string(), "ev u32 a; u8 b");
        for bare in ["ev", "ev ", "ev ;", "ev  "] {
            let c = RegisterCommand::parse(bare).unwrap();
            assert!(c.fields.is_empty(), "{bare}");
            assert_eq!(c.payload_size(), 0);
        }
    }

    #[test]
    fn length_limits() {
        let name = |n: usize| "e".repeat(n);
        assert!(RegisterCommand::parse(&name(511)).is_ok());
        assert_eq!(
            RegisterCommand::parse(&name(512)),
            Err(RegisterError::TooLong { len: 512, max: 511 })
        );
        let cmd = format!("{} u32 a", name(505));
        assert_eq!(cmd.len(), 511);
        assert!(RegisterCommand::parse(&cmd).is_ok());
        // 511 bytes as written, 512 in canonical form (a space after the `;`).
        let compact = format!("{} u8 a;u8 b", name(501));
        assert_eq!(compact.len(), 511);
        assert_eq!(
            RegisterCommand::parse(&compact),
            Err(RegisterError::TooLong { len: 512, max: 511 })
        );
        // dynamic_events lines may be longer.
        let long = format!("u:{}", name(4092));
        assert!(RegisterCommand::parse(&long).is_ok());
        assert_eq!(
            RegisterCommand::parse(&format!("u:{}", name(4093))),
            Err(RegisterError::TooLong {
                len: 4095,
                max: 4094
            })
        );
        // Array and struct bounds.
        assert!(one_field("char[1024] f").is_ok());
        assert!(one_field("struct s f 2147483647").is_ok());
        assert_eq!(
            problem("struct s f 2147483648"),
            FieldProblem::BadStructSize("2147483648".into())
        );
        // Offsets past 4 GiB.
        assert_eq!(
            RegisterCommand::parse("ev struct s a 2147483647; struct s b 2147483647; struct s c 2"),
            Err(RegisterError::TooLarge)
        );
    }

    #[test]
    fn packed_offsets_and_forms() {
        let c = RegisterCommand::parse(
            "u: test u32 a;char[8] b; __rel_loc char[] msg; __data_loc char[] dmsg",
        )
        .unwrap();
        assert_eq!(c.form, CommandForm::DynamicCreate);
        assert_eq!(c.name, "test");
        let layout: Vec<(&str, u32, u32)> = c
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.offset, f.size))
            .collect();
        assert_eq!(
            layout,
            [("a", 8, 4), ("b", 12, 8), ("msg", 20, 4), ("dmsg", 24, 4)]
        );
        assert_eq!(c.payload_size(), 20);
        assert_eq!(c.field("b").map(|f| f.payload_offset()), Some(4));
        assert_eq!(
            c.to_string(),
            "u:test u32 a; char[8] b; __rel_loc char[] msg; __data_loc char[] dmsg"
        );
        let del = c.with_form(CommandForm::DynamicDelete);
        assert_eq!(
            del.to_string(),
            "-:test u32 a; char[8] b; __rel_loc char[] msg; __data_loc char[] dmsg"
        );
        assert_eq!(RegisterCommand::parse(&del.to_string()), Ok(del.clone()));
        let reg = c.with_form(CommandForm::Register);
        assert_eq!(
            reg.to_string(),
            "test u32 a; char[8] b; __rel_loc char[] msg; __data_loc char[] dmsg"
        );
        // The type text is kept as written (the kernel compares it on re-registration).
        let hex = RegisterCommand::parse("ev char[0x10] s; struct pt p 16").unwrap();
        assert_eq!(hex.to_string(), "ev char[0x10] s; struct pt p 16");
        assert_eq!(RegisterCommand::parse(&hex.to_string()), Ok(hex));
    }

    #[test]
    fn kernel_requires_nul_follows_strstr_char() {
        let c = RegisterCommand::parse(
            "ev __data_loc char[] a; __rel_loc unsigned char[] b; __data_loc u8[] c; char[4] d",
        )
        .unwrap();
        let nul: Vec<bool> = c
            .fields
            .iter()
            .map(CommandField::kernel_requires_nul)
            .collect();
        assert_eq!(nul, [true, true, false, false]);
    }

    #[test]
    fn print_fmt_like_the_kernel() {
        let c = RegisterCommand::parse(
            "test u32 a; char[8] b; __rel_loc char[] msg; __data_loc char[] dmsg",
        )
        .unwrap();
        assert_eq!(
            c.print_fmt(),
            r#""a=%u b=%s msg=%s dmsg=%s", REC->a, REC->b, __get_rel_str(msg), __get_str(dmsg)"#
        );
        let c = RegisterCommand::parse(
            "ev s64 a; u64 b; int c; unsigned short d; char e; unsigned char[4] f; __data_loc u32[] g; struct s h 3",
        )
        .unwrap();
        assert_eq!(
            c.print_fmt(),
            r#""a=%lld b=%llu c=%d d=%u e=%d f=%s g=%llu h=%llu", REC->a, REC->b, REC->c, REC->d, REC->e, REC->f, REC->g, REC->h"#
        );
        assert_eq!(RegisterCommand::parse("ev").unwrap().print_fmt(), "\"\"");
    }

    #[test]
    fn event_format_schema() {
        let c = RegisterCommand::parse(
            "test u32 a; unsigned char[8] b; __rel_loc u8[] r; struct foo s 3",
        )
        .unwrap();
        let f = c.event_format(42);
        assert_eq!((f.name.as_str(), f.id), ("test", 42));
        type Summary<'a> = (&'a str, &'a str, u32, u32, Option<bool>);
        let summary = |fields: &'_ [Field]| -> Vec<(String, String, u32, u32, Option<bool>)> {
            fields
                .iter()
                .map(|x| {
                    (
                        x.name.clone(),
                        x.type_text.clone(),
                        x.offset,
                        x.size,
                        x.signed,
                    )
                })
                .collect()
        };
        let owned = |rows: &[Summary<'_>]| -> Vec<(String, String, u32, u32, Option<bool>)> {
            rows.iter()
                .map(|&(n, t, o, s, g)| (n.into(), t.into(), o, s, g))
                .collect()
        };
        let common = summary(&f.common_fields);
        assert_eq!(
            common,
            owned(&[
                ("common_type", "unsigned short", 0, 2, Some(false)),
                ("common_flags", "unsigned char", 2, 1, Some(false)),
                ("common_preempt_count", "unsigned char", 3, 1, Some(false)),
                ("common_pid", "int", 4, 4, Some(true)),
            ])
        );
        assert_eq!(f.common_fields[3].kind, int(4, true));
        let fields = summary(&f.fields);
        assert_eq!(
            fields,
            owned(&[
                ("a", "u32", 8, 4, Some(false)),
                ("b", "unsigned char[8]", 12, 8, Some(false)),
                ("r", "__rel_loc u8[]", 20, 4, Some(true)),
                ("s", "struct foo", 24, 3, Some(true)),
            ])
        );
        assert_eq!(
            f.fields[1].kind,
            FieldKind::FixedArray {
                elem: Element::Byte,
                count: 8
            }
        );
    }

    #[test]
    fn strip_brackets() {
        assert_eq!(strip_bracket_contents("char b[1055984226]"), "char b[]");
        assert_eq!(strip_bracket_contents("char[-2121988123]"), "char[]");
        assert_eq!(
            strip_bracket_contents("__data_loc char[] x"),
            "__data_loc char[] x"
        );
        assert_eq!(strip_bracket_contents("u32 a"), "u32 a");
    }

    #[test]
    fn kernel_uint_mirrors_kstrtouint() {
        assert_eq!(kernel_uint("10", 0), Some(10));
        assert_eq!(kernel_uint("010", 0), Some(8));
        assert_eq!(kernel_uint("0x1F", 0), Some(31));
        assert_eq!(kernel_uint("0", 0), Some(0));
        assert_eq!(kernel_uint("+7", 0), Some(7));
        assert_eq!(kernel_uint("010", 10), Some(10));
        assert_eq!(kernel_uint("0x1F", 10), None);
        assert_eq!(kernel_uint("", 0), None);
        assert_eq!(kernel_uint("+", 10), None);
        assert_eq!(kernel_uint("-1", 10), None);
        assert_eq!(kernel_uint("4294967296", 10), None);
        assert_eq!(kernel_uint("0é", 0), None);
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // Offsets of the fields a test generates.
mod props {
    use super::*;
    use proptest::prelude::*;

    /// A field the kernel accepts, as text.
    fn field() -> impl Strategy<Value = String> {
        let name = "[a-z_][a-z0-9_]{0,6}";
        let ty = prop_oneof![
            prop::sample::select(
                SCALAR_TYPES
                    .iter()
                    .map(|&(t, _)| t)
                    .chain([
                        "__data_loc char[]",
                        "__rel_loc char[]",
                        "__data_loc u8[]",
                        "__rel_loc u32[]",
                        "__data_loc int[]",
                    ])
                    .collect::<Vec<_>>()
            )
            .prop_map(str::to_string),
            (1u32..=1024, any::<bool>())
                .prop_map(|(n, u)| format!("{}char[{n}]", if u { "unsigned " } else { "" })),
        ];
        prop_oneof![
            (ty, name).prop_map(|(t, n)| format!("{t} {n}")),
            ("[a-z_][a-z0-9_]{0,6}", name, 1u32..100_000)
                .prop_map(|(tag, n, size)| format!("struct {tag} {n} {size}")),
        ]
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,80}") {
            let _ = RegisterCommand::parse(&text);
        }

        #[test]
        fn token_soup_never_panics(parts in prop::collection::vec(
            prop::sample::select(vec![
                "ev", " ", ";", ":", "u:", "-:", "unsigned", "struct", "__data_loc", "__rel_loc",
                "char", "[", "]", "0x", "08", "1024", "1025", "0", "a", "u32", "#", "\t",
            ]), 0..24)) {
            let text: String = parts.concat();
            if let Ok(cmd) = RegisterCommand::parse_syntax(&text) {
                let _ = cmd.event_format(1);
                let _ = cmd.expected_format_file(1);
            }
        }

        #[test]
        fn generated_commands_round_trip(
            name in "[a-z][a-z0-9_.]{0,12}",
            fields in prop::collection::vec(field(), 0..8),
            form in prop::sample::select(vec![
                CommandForm::Register, CommandForm::DynamicCreate, CommandForm::DynamicDelete,
            ]),
        ) {
            let text = format!("{}{name} {}", form.prefix(), fields.join(";"));
            let cmd = RegisterCommand::parse(&text).unwrap();
            prop_assert_eq!(cmd.form, form);
            prop_assert_eq!(cmd.fields.len(), fields.len());
            let canonical = cmd.to_string();
            prop_assert_eq!(RegisterCommand::parse(&canonical).unwrap(), cmd.clone());
            // Packed from 8, every kind resolved, schema agrees with the command.
            let mut offset = COMMON_HEADER_SIZE;
            let schema = cmd.event_format(7);
            for (f, s) in cmd.fields.iter().zip(&schema.fields) {
                prop_assert_eq!(f.offset, offset);
                prop_assert!(f.kind != FieldKind::Unknown);
                prop_assert_eq!(&s.kind, &f.kind);
                prop_assert_eq!((s.offset, s.size, s.signed), (f.offset, f.size, Some(f.signed)));
                offset += f.size;
            }
        }
    }
}
