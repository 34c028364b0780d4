//! TEMPORARY stand-in for `uevrec_parsers::register` and `uevrec_parsers::payload`
//! (written by another helper, not yet merged). Replaced by those modules before release;
//! only what the producers need, same names as the contract.

use std::fmt;

use uevrec_parsers::field_type::resolve_decl;
use uevrec_parsers::schema::{Element, EventFormat, Field, FieldKind, LocKind};

/// A parsed register command `name field; field; ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterCommand {
    /// Event name.
    pub name: String,
    /// Field declarations as written (`u32 a`, `struct foo f 12`).
    pub fields: Vec<String>,
}

/// A register command the stand-in cannot handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterError(pub String);

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for RegisterError {}

impl RegisterCommand {
    /// Parse `name f1; f2`.
    pub fn parse(text: &str) -> Result<RegisterCommand, RegisterError> {
        let text = text.trim();
        let (name, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        if name.is_empty() {
            return Err(RegisterError("empty command".into()));
        }
        let fields = rest
            .split(';')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect();
        Ok(RegisterCommand {
            name: name.to_string(),
            fields,
        })
    }

    /// The schema the kernel exposes (kinds only; good enough for encoding).
    pub fn event_format(&self, id: u32) -> EventFormat {
        let mut offset = 8;
        let fields = self
            .fields
            .iter()
            .map(|decl| {
                let words: Vec<&str> = decl.split_whitespace().collect();
                let (decl_text, size) = if words.first() == Some(&"struct") && words.len() == 4 {
                    (words[..3].join(" "), words[3].parse().unwrap_or(0))
                } else {
                    let d = decl.as_str();
                    (d.to_string(), stand_in_size(d))
                };
                let d = resolve_decl(&decl_text, size, None)
                    .unwrap_or_else(|_| panic!("stand-in cannot resolve {decl_text}"));
                let field = Field {
                    name: d.name,
                    type_text: d.type_text,
                    offset,
                    size,
                    signed: None,
                    kind: d.kind,
                };
                offset += size;
                field
            })
            .collect();
        EventFormat {
            name: self.name.clone(),
            id,
            common_fields: Vec::new(),
            fields,
            print_fmt: String::new(),
        }
    }
}

fn stand_in_size(decl: &str) -> u32 {
    if decl.starts_with("__data_loc") || decl.starts_with("__rel_loc") {
        return 4;
    }
    if let (Some(open), Some(close)) = (decl.find('['), decl.find(']')) {
        return decl[open + 1..close].parse().unwrap_or(0);
    }
    let base = decl.rsplit_once(' ').map_or(decl, |(b, _)| b);
    uevrec_parsers::field_type::size_of_type(base).map_or(0, u32::from)
}

impl fmt::Display for RegisterCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)?;
        for (i, field) in self.fields.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { "; " })?;
            f.write_str(field)?;
        }
        Ok(())
    }
}

/// One value for one field.
#[derive(Debug, Clone, PartialEq)]
pub enum PayloadValue<'a> {
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    Uint(u64),
    /// A char field.
    Str(&'a str),
    /// A byte field or struct.
    Bytes(&'a [u8]),
    /// A u32 array.
    U32s(&'a [u32]),
}

/// Encoding failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadError(pub String);

impl fmt::Display for PayloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for PayloadError {}

/// Pack `values` for `cmd`.
pub fn encode(cmd: &RegisterCommand, values: &[PayloadValue<'_>]) -> Result<Vec<u8>, PayloadError> {
    let format = cmd.event_format(0);
    if values.len() != format.fields.len() {
        return Err(PayloadError("value count".into()));
    }
    let fixed: u32 = format.fields.iter().map(|f| f.size).sum();
    let mut out = Vec::new();
    let mut tail = Vec::new();
    for (field, value) in format.fields.iter().zip(values) {
        match (&field.kind, value) {
            (FieldKind::Integer { size, .. }, PayloadValue::Int(v)) => {
                out.extend_from_slice(&v.to_le_bytes()[..usize::from(*size)]);
            }
            (FieldKind::Integer { size, .. }, PayloadValue::Uint(v)) => {
                out.extend_from_slice(&v.to_le_bytes()[..usize::from(*size)]);
            }
            (FieldKind::FixedArray { count, .. }, PayloadValue::Str(s)) => {
                let mut b = s.as_bytes().to_vec();
                b.resize(*count as usize, 0);
                out.extend_from_slice(&b);
            }
            (FieldKind::FixedArray { .. } | FieldKind::Struct { .. }, PayloadValue::Bytes(b)) => {
                let mut b = b.to_vec();
                b.resize(field.size as usize, 0);
                out.extend_from_slice(&b);
            }
            (FieldKind::Dynamic { loc, elem }, v) => {
                let mut data = match v {
                    PayloadValue::Str(s) => s.as_bytes().to_vec(),
                    PayloadValue::Bytes(b) => b.to_vec(),
                    PayloadValue::U32s(w) => w.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    PayloadValue::Int(_) | PayloadValue::Uint(_) => {
                        return Err(PayloadError("int for dynamic".into()));
                    }
                };
                if *elem == Element::Char {
                    data.push(0);
                }
                let here = out.len() as u32 + 4;
                let start = fixed + tail.len() as u32;
                let off = match loc {
                    LocKind::DataLoc => start + 8,
                    LocKind::RelLoc => start - here,
                };
                out.extend_from_slice(&((data.len() as u32) << 16 | off).to_le_bytes());
                tail.extend_from_slice(&data);
            }
            _ => return Err(PayloadError(format!("bad value for {}", field.name))),
        }
    }
    out.extend_from_slice(&tail);
    Ok(out)
}
