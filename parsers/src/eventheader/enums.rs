//! The EventHeader constants: header flags, extension kinds, field encodings and
//! formats, opcodes and levels, as `eventheader.h` (microsoft/LinuxTracepoints) and
//! `eventheader_types` define them.

/// Header flag: the producer's pointers are 64 bits wide.
pub const FLAG_POINTER64: u8 = 0x01;
/// Header flag: multi-byte values are little-endian (else big-endian).
pub const FLAG_LITTLE_ENDIAN: u8 = 0x02;
/// Header flag: one or more extension blocks follow the header.
pub const FLAG_EXTENSION: u8 = 0x04;
/// Every flag this decoder (and the reference decoder) understands.
pub const KNOWN_FLAGS: u8 = FLAG_POINTER64 | FLAG_LITTLE_ENDIAN | FLAG_EXTENSION;

/// Extension kind bit: another extension block follows this one.
pub const EXTENSION_CHAIN: u16 = 0x8000;
/// Extension kind mask: the kind without the chain bit.
pub const EXTENSION_KIND_MASK: u16 = 0x7fff;
/// Extension kind 0 is invalid.
pub const EXTENSION_INVALID: u16 = 0;
/// Extension kind: the event's metadata (event name and field records).
pub const EXTENSION_METADATA: u16 = 1;
/// Extension kind: activity id (16 bytes) and optional related activity id (16 more).
pub const EXTENSION_ACTIVITY_ID: u16 = 2;

/// Encoding byte: the low 5 bits hold the [`Encoding`].
pub const ENCODING_VALUE_MASK: u8 = 0x1f;
/// Encoding byte: a constant-length array (a `u16` length follows in the metadata).
pub const ENCODING_CARRAY: u8 = 0x20;
/// Encoding byte: a variable-length array (a `u16` count precedes the data).
pub const ENCODING_VARRAY: u8 = 0x40;
/// Encoding byte: a format byte follows.
pub const ENCODING_CHAIN: u8 = 0x80;
/// Format byte: the low 7 bits hold the [`Format`] (or a struct's field count).
pub const FORMAT_VALUE_MASK: u8 = 0x7f;
/// Format byte: a `u16` field tag follows.
pub const FORMAT_CHAIN: u8 = 0x80;

/// How a field's bytes are laid out (the low 5 bits of the encoding byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Encoding {
    /// A group of the next N fields (N = the format byte); no payload bytes of its own.
    Struct = 1,
    /// 1 byte.
    Value8 = 2,
    /// 2 bytes.
    Value16 = 3,
    /// 4 bytes.
    Value32 = 4,
    /// 8 bytes.
    Value64 = 5,
    /// 16 bytes.
    Value128 = 6,
    /// 8-bit code units up to a 0 unit (or the end of the event).
    ZStringChar8 = 7,
    /// 16-bit code units up to a 0 unit (or the end of the event).
    ZStringChar16 = 8,
    /// 32-bit code units up to a 0 unit (or the end of the event).
    ZStringChar32 = 9,
    /// `u16` count, then that many 8-bit code units.
    StringLength16Char8 = 10,
    /// `u16` count, then that many 16-bit code units.
    StringLength16Char16 = 11,
    /// `u16` count, then that many 32-bit code units.
    StringLength16Char32 = 12,
    /// `u16` count, then that many bytes.
    BinaryLength16Char8 = 13,
}

impl Encoding {
    /// The encoding for the low 5 bits of `byte`; `None` for 0 (invalid) and 14..31.
    pub const fn from_u8(byte: u8) -> Option<Encoding> {
        Some(match byte & ENCODING_VALUE_MASK {
            1 => Encoding::Struct,
            2 => Encoding::Value8,
            3 => Encoding::Value16,
            4 => Encoding::Value32,
            5 => Encoding::Value64,
            6 => Encoding::Value128,
            7 => Encoding::ZStringChar8,
            8 => Encoding::ZStringChar16,
            9 => Encoding::ZStringChar32,
            10 => Encoding::StringLength16Char8,
            11 => Encoding::StringLength16Char16,
            12 => Encoding::StringLength16Char32,
            13 => Encoding::BinaryLength16Char8,
            _ => return None,
        })
    }

    /// The size of one value for Value8..Value128, else `None` (variable size or struct).
    pub const fn fixed_size(self) -> Option<usize> {
        match self {
            Encoding::Value8 => Some(1),
            Encoding::Value16 => Some(2),
            Encoding::Value32 => Some(4),
            Encoding::Value64 => Some(8),
            Encoding::Value128 => Some(16),
            _ => None,
        }
    }

    /// The code unit size of the string and binary encodings (1, 2 or 4), else `None`.
    pub const fn char_size(self) -> Option<usize> {
        match self {
            Encoding::ZStringChar8
            | Encoding::StringLength16Char8
            | Encoding::BinaryLength16Char8 => Some(1),
            Encoding::ZStringChar16 | Encoding::StringLength16Char16 => Some(2),
            Encoding::ZStringChar32 | Encoding::StringLength16Char32 => Some(4),
            _ => None,
        }
    }
}

/// How a field's value is meant to be shown (the low 7 bits of the format byte, for
/// every encoding but [`Encoding::Struct`], where they count the struct's fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Format {
    /// The encoding's default.
    Default = 0,
    /// Unsigned integer.
    UnsignedInt = 1,
    /// Signed integer.
    SignedInt = 2,
    /// Hexadecimal integer.
    HexInt = 3,
    /// errno value.
    Errno = 4,
    /// Process id.
    Pid = 5,
    /// `time_t` seconds since the Unix epoch.
    Time = 6,
    /// Boolean (0 false, 1 true).
    Boolean = 7,
    /// IEEE float (Value32/Value64).
    Float = 8,
    /// Bytes as hex.
    HexBytes = 9,
    /// 8-bit characters (Latin-1).
    String8 = 10,
    /// UTF string in the code unit size of the encoding.
    StringUtf = 11,
    /// UTF string with a byte order mark honoured when present.
    StringUtfBom = 12,
    /// XML text (decoded as [`Format::StringUtfBom`]).
    StringXml = 13,
    /// JSON text (decoded as [`Format::StringUtfBom`]).
    StringJson = 14,
    /// UUID, network byte order (Value128).
    Uuid = 15,
    /// IP port, network byte order (Value16).
    Port = 16,
    /// IP address, network byte order: IPv4 (Value32) or IPv6 (Value128).
    IpAddress = 17,
    /// Obsolete IPv6 format, decoded as [`Format::IpAddress`].
    IpAddressObsolete = 18,
}

impl Format {
    /// The format for the low 7 bits of `byte`; unknown values (19 and up) are
    /// [`Format::Default`], as the spec asks decoders to treat them.
    pub const fn from_u8(byte: u8) -> Format {
        match byte & FORMAT_VALUE_MASK {
            1 => Format::UnsignedInt,
            2 => Format::SignedInt,
            3 => Format::HexInt,
            4 => Format::Errno,
            5 => Format::Pid,
            6 => Format::Time,
            7 => Format::Boolean,
            8 => Format::Float,
            9 => Format::HexBytes,
            10 => Format::String8,
            11 => Format::StringUtf,
            12 => Format::StringUtfBom,
            13 => Format::StringXml,
            14 => Format::StringJson,
            15 => Format::Uuid,
            16 => Format::Port,
            17 => Format::IpAddress,
            18 => Format::IpAddressObsolete,
            _ => Format::Default,
        }
    }
}

/// Event opcodes (the header's `opcode` byte); other values are reserved.
pub mod opcode {
    /// Informational event.
    pub const INFO: u8 = 0;
    /// Start of an activity.
    pub const ACTIVITY_START: u8 = 1;
    /// End of an activity.
    pub const ACTIVITY_STOP: u8 = 2;
    /// Start of a collection.
    pub const COLLECTION_START: u8 = 3;
    /// End of a collection.
    pub const COLLECTION_STOP: u8 = 4;
    /// Extension event.
    pub const EXTENSION: u8 = 5;
    /// Reply event.
    pub const REPLY: u8 = 6;
    /// Resume event.
    pub const RESUME: u8 = 7;
    /// Suspend event.
    pub const SUSPEND: u8 = 8;
    /// Message send event.
    pub const SEND: u8 = 9;
    /// Message receive event.
    pub const RECEIVE: u8 = 240;
}

/// Event levels (the header's `level` byte).
pub mod level {
    /// Critical error.
    pub const CRITICAL_ERROR: u8 = 1;
    /// Error.
    pub const ERROR: u8 = 2;
    /// Warning.
    pub const WARNING: u8 = 3;
    /// Informational.
    pub const INFORMATIONAL: u8 = 4;
    /// Verbose.
    pub const VERBOSE: u8 = 5;
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn encodings_round_trip() {
        for v in 0u8..=255 {
            match Encoding::from_u8(v) {
                Some(e) => assert_eq!(e as u8, v & ENCODING_VALUE_MASK),
                None => assert!(matches!(v & 0x1f, 0 | 14..)),
            }
        }
        assert_eq!(Encoding::from_u8(0x80 | 0x40 | 5), Some(Encoding::Value64));
        assert_eq!(Encoding::Value128.fixed_size(), Some(16));
        assert_eq!(Encoding::StringLength16Char32.char_size(), Some(4));
        assert_eq!(Encoding::Struct.fixed_size(), None);
    }

    #[test]
    fn formats_round_trip() {
        for v in 0u8..=18 {
            assert_eq!(Format::from_u8(v) as u8, v);
        }
        assert_eq!(Format::from_u8(19), Format::Default);
        assert_eq!(Format::from_u8(0x80 | 8), Format::Float);
    }
}
