//! The body of an EventHeader `{"uevrec":"schema","source":"eventheader",…}` line: what a
//! metadata block says (provider, event name, every field's encoding, format, array kind,
//! tag and nested fields) and the block itself as hex.

use crate::bytes::Endian;
use serde::Serialize;

use super::FirstTracepoint;
use crate::eventheader::enums::{Encoding, Format};
use crate::eventheader::metadata::{
    ArrayKind, MetaError, attributes, read_field, split_event_name, unescape,
};
use crate::eventheader::{MAX_FIELDS, MAX_STRUCT_DEPTH};
use crate::json_line::write_hex;

/// The `eventheader` member of the schema line of the metadata block `meta` (values
/// in byte order `endian`), first seen on `seen`.
pub(super) fn member<'a>(seen: &FirstTracepoint<'a>, meta: &[u8], endian: Endian) -> EhMember<'a> {
    let name_len = memchr::memchr(0, meta).unwrap_or(meta.len());
    let (name, attrs) = split_event_name(&meta[..name_len]);
    let event_attributes = attributes(attrs)
        .map(|(k, v)| (unescaped(k), serde_json::Value::String(unescaped(v))))
        .collect();
    let mut walk = MetaWalk {
        meta,
        endian,
        pos: name_len + 1,
        fields: 0,
    };
    let mut fields = Vec::new();
    let mut error = walk.body(u32::MAX, 0, &mut fields).err();
    if name_len == meta.len() {
        error = Some("the metadata has no NUL-terminated event name".into());
    }
    // `write_hex` writes a JSON string: quotes and digits (never escapes).
    let mut hex = Vec::with_capacity(meta.len() * 2 + 2);
    write_hex(&mut hex, meta);
    let hex = hex.get(1..hex.len() - 1).unwrap_or_default();
    EhMember {
        eventheader: EhBody {
            provider: seen.tracepoint.provider,
            name: unescaped(name),
            event_attributes,
            byte_order: if endian.is_big() { "big" } else { "little" },
            fields,
            error,
            metadata: String::from_utf8_lossy(hex).into_owned(),
        },
    }
}

/// The `eventheader` member of an EventHeader schema line.
#[derive(Debug, Serialize)]
pub(super) struct EhMember<'a> {
    eventheader: EhBody<'a>,
}

/// One field of an EventHeader schema line.
#[derive(Debug, Serialize)]
struct EhFieldLine {
    name: String,
    /// `value8`, `zstring_char8`, `string_length16_char16`, `struct` … (eventheader.h's
    /// names without `event_field_encoding_`).
    encoding: &'static str,
    /// `default`, `hex_int`, `string_utf`, `uuid` … (eventheader.h's names without
    /// `event_field_format_`); absent for structs.
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<&'static str>,
    #[serde(skip_serializing_if = "is_zero")]
    tag: u16,
    /// `constant` or `variable` for arrays.
    #[serde(skip_serializing_if = "Option::is_none")]
    array: Option<&'static str>,
    /// Elements of a constant array.
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u16>,
    /// A struct's fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    fields: Option<Vec<EhFieldLine>>,
}

fn is_zero(v: &u16) -> bool {
    *v == 0
}

/// What an EventHeader schema line says about a metadata block.
#[derive(Debug, Serialize)]
struct EhBody<'a> {
    provider: &'a str,
    name: String,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    event_attributes: serde_json::Map<String, serde_json::Value>,
    byte_order: &'static str,
    fields: Vec<EhFieldLine>,
    /// Why the field records could not all be read (the fields before are listed).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The metadata block, hex: what any EventHeader decoder reads.
    metadata: String,
}

/// eventheader.h's name of an encoding.
fn encoding_name(e: Encoding) -> &'static str {
    match e {
        Encoding::Struct => "struct",
        Encoding::Value8 => "value8",
        Encoding::Value16 => "value16",
        Encoding::Value32 => "value32",
        Encoding::Value64 => "value64",
        Encoding::Value128 => "value128",
        Encoding::ZStringChar8 => "zstring_char8",
        Encoding::ZStringChar16 => "zstring_char16",
        Encoding::ZStringChar32 => "zstring_char32",
        Encoding::StringLength16Char8 => "string_length16_char8",
        Encoding::StringLength16Char16 => "string_length16_char16",
        Encoding::StringLength16Char32 => "string_length16_char32",
        Encoding::BinaryLength16Char8 => "binary_length16_char8",
    }
}

/// eventheader.h's name of a format.
fn format_name(f: Format) -> &'static str {
    match f {
        Format::Default => "default",
        Format::UnsignedInt => "unsigned_int",
        Format::SignedInt => "signed_int",
        Format::HexInt => "hex_int",
        Format::Errno => "errno",
        Format::Pid => "pid",
        Format::Time => "time",
        Format::Boolean => "boolean",
        Format::Float => "float",
        Format::HexBytes => "hex_bytes",
        Format::String8 => "string8",
        Format::StringUtf => "string_utf",
        Format::StringUtfBom => "string_utf_bom",
        Format::StringXml => "string_xml",
        Format::StringJson => "string_json",
        Format::Uuid => "uuid",
        Format::Port => "port",
        Format::IpAddress => "ip_address",
        Format::IpAddressObsolete => "ip_address_obsolete",
    }
}

/// Text of escaped (`;;`) name bytes.
fn unescaped(text: &[u8]) -> String {
    let bytes: Vec<u8> = unescape(text).flatten().copied().collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Reads the field records of a metadata block into [`EhFieldLine`]s.
struct MetaWalk<'m> {
    meta: &'m [u8],
    endian: Endian,
    pos: usize,
    fields: usize,
}

impl MetaWalk<'_> {
    /// Up to `remaining` records (all, to the end, for `u32::MAX`) at nesting `depth`;
    /// stops at the first problem, keeping the fields read.
    fn body(
        &mut self,
        remaining: u32,
        depth: usize,
        out: &mut Vec<EhFieldLine>,
    ) -> Result<(), String> {
        let mut left = remaining;
        while left != 0 && self.pos < self.meta.len() {
            let f = read_field(self.meta, self.pos, self.endian)
                .map_err(|e: MetaError| e.to_string())?;
            self.fields += 1;
            if self.fields > MAX_FIELDS {
                return Err(format!("more than {MAX_FIELDS} fields"));
            }
            self.pos = f.next;
            left -= 1;
            let (array, count) = match f.array {
                ArrayKind::Scalar => (None, None),
                ArrayKind::Constant(n) => (Some("constant"), Some(n)),
                ArrayKind::Variable => (Some("variable"), None),
            };
            let is_struct = f.encoding == Encoding::Struct;
            let mut line = EhFieldLine {
                name: String::from_utf8_lossy(f.name).into_owned(),
                encoding: encoding_name(f.encoding),
                format: (!is_struct).then(|| format_name(f.format())),
                tag: f.tag,
                array,
                count,
                fields: None,
            };
            if is_struct {
                if depth >= MAX_STRUCT_DEPTH {
                    out.push(line);
                    return Err(format!("structs nested deeper than {MAX_STRUCT_DEPTH}"));
                }
                let mut inner = Vec::new();
                let r = self.body(u32::from(f.struct_field_count()), depth + 1, &mut inner);
                line.fields = Some(inner);
                out.push(line);
                r?;
            } else {
                out.push(line);
            }
        }
        Ok(())
    }
}
