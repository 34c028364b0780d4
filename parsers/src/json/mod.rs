//! The JSON text every writer shares: strings and their escaping ([`escape`]), integers
//! ([`numbers`]), prepared text copied in fixed-size windows ([`text`]), the fixed-size
//! line buffer the prepared path writes into ([`line_buf`]) and decoded values
//! ([`values`]). JSON lines (`crate::json_line`), EventHeader rendering and OTLP build on
//! it; it depends only on the decoded [`Value`](crate::Value) type.

pub(crate) mod escape;
pub(crate) mod line_buf;
pub(crate) mod numbers;
pub(crate) mod text;
pub(crate) mod unique;
pub(crate) mod values;

pub(crate) use escape::{
    Escaped, first_special, hex_digits, write_c_string, write_escape, write_hex, write_plain,
    write_str, write_text, write_text_contents,
};
pub(crate) use line_buf::LineOut;
pub(crate) use numbers::write_int;
pub(crate) use text::{Span, Text, Texts};
pub(crate) use unique::unique_key;
pub(crate) use values::write_value;
