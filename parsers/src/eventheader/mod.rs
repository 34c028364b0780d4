//! EventHeader: the self-describing user_events payload of microsoft/LinuxTracepoints
//! (`eventheader.h`; Rust producers `eventheader`, `eventheader_dynamic`, the
//! OpenTelemetry user_events exporters).
//!
//! An EventHeader tracepoint is named `<Provider>_L<level>K<keyword>[options]`
//! ([`TracepointName`]); its format declares one field, `u8 eventheader_flags` at offset
//! 8, and the record's raw data carries, from offset 8 to its end:
//!
//! 1. the 8-byte [`Header`] and extension blocks ([`parse_event`]): the metadata block
//!    (event name, field records: [`metadata`]) and the activity ids;
//! 2. the payload, walked by the streaming, allocation-free [`Enumerator`] as the
//!    metadata describes it;
//! 3. for JSON lines, [`crate::eventheader_json::write_event`] (rendering, outside this
//!    decoding module) writes the EventHeader keys of a line
//!    (`docs/eventheader.md` has the shape), through a plan compiled once per
//!    distinct metadata block where it can, else (and for every event the plan cannot
//!    write as the walk would) from the [`Enumerator`]'s items.
//!
//! The raw data perf delivers is padded (to 8 bytes with its size word): the pad bytes
//! sit after the event. Like the reference decoder (`tracepoint_decode`, which also takes
//! the raw size as the event size), the decoder takes the slice to the end as the event;
//! bytes left after the last field are ignored, and only a zero-terminated string with
//! no terminator of its own (which runs to the end of the event) can see them.

pub mod enumerator;
pub mod enums;
pub mod header;
pub mod metadata;
mod trace_entry;
pub mod tracepoint_name;

pub use enumerator::{DecodeError, Enumerator, ErrorKind, Item, MAX_FIELDS, MAX_STRUCT_DEPTH};
pub use enums::{Encoding, Format};
pub use header::{EventParts, Header, HeaderError, parse_event};
pub use metadata::{ArrayKind, FieldMeta, MetaError};
pub use trace_entry::trace_entry;
pub use tracepoint_name::TracepointName;

/// The field a tracepoint's format must start with (after the common fields) for its
/// records to be EventHeader events.
pub const FLAGS_FIELD: &str = "eventheader_flags";

/// The format tracefs shows for an EventHeader tracepoint `name` with `id`: the standard
/// common fields, then the 8-byte header (`u8 eventheader_flags; u8 version; u16 id; u16 tag;
/// u8 opcode; u8 level`, what the register command declares). For decoding EventHeader data
/// that comes without a format file (captures of payloads, tests).
pub fn tracepoint_format(name: &str, id: u32) -> crate::schema::EventFormat {
    let field = |decl: &str, offset, size, signed| {
        crate::field_type::resolve_field(decl, offset, size, Some(signed))
            .expect("the fixed EventHeader declarations resolve")
    };
    crate::schema::EventFormat {
        name: name.into(),
        id,
        common_fields: vec![
            field("unsigned short common_type", 0, 2, false),
            field("unsigned char common_flags", 2, 1, false),
            field("unsigned char common_preempt_count", 3, 1, false),
            field("int common_pid", 4, 4, true),
        ],
        fields: vec![
            field("u8 eventheader_flags", 8, 1, false),
            field("u8 version", 9, 1, false),
            field("u16 id", 10, 2, false),
            field("u16 tag", 12, 2, false),
            field("u8 opcode", 14, 1, false),
            field("u8 level", 15, 1, false),
        ],
        print_fmt: String::new(),
    }
}

/// The EventHeader tracepoint name of an event whose format's first field is
/// `eventheader_flags` at offset 8 and whose name (`event`, multi-format suffix
/// allowed) parses; `None` for other events.
pub fn detect<'a>(
    format: &crate::schema::EventFormat,
    event: &'a str,
) -> Option<TracepointName<'a>> {
    let first = format.fields.first()?;
    if first.name != FLAGS_FIELD || first.offset != 8 {
        return None;
    }
    TracepointName::parse(event)
}
