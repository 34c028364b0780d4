//! tracefs `format` file text → [`EventFormat`], parsed with nom.
//!
//! OWNER: format-parser helper. The signature below is the contract other modules use.

use crate::schema::EventFormat;

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

/// Parse the text of an `events/<system>/<event>/format` file.
pub fn parse_format(text: &str) -> Result<EventFormat, FormatError> {
    let _ = text;
    Err(FormatError {
        line: 1,
        expected: "an implementation".into(),
        found: String::new(),
    })
}
