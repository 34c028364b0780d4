//! The EventHeader part of a JSON line (`docs/eventheader.md`): from `,"provider":` to
//! the last key before the line's closing `}`. Rendering only: the decoding is
//! `crate::eventheader`'s.
//!
//! [`write_event`] takes the event's cached compiled [`plan`] where it can, else the
//! streaming walk ([`write_event_streaming`]); both name keys through `keys.rs` (the one
//! duplicate-key rule) and write values through `values.rs`, header keys through
//! `header.rs`.

mod header;
mod keys;
pub mod plan;
mod streaming;
pub mod typed;
mod values;

use std::ops::{Deref, DerefMut};

pub use keys::Keys;
use plan::{PlanCache, PlanHint};
pub use streaming::write_event_streaming;
pub use values::write_value;
pub(crate) use values::{uint_of, write_value_as};

use crate::bytes::Endian;
use crate::eventheader::header::parse_event;
use crate::eventheader::tracepoint_name::{OwnedTracepointName, TracepointName};
use crate::json::Text;
use header::{write_header_keys, write_level_keyword, write_provider};

/// Reusable buffers for [`write_event`]; keep one per writer: the [`Keys`] of the line
/// (it derefs to them) and the compiled plans of the metadata blocks seen last.
#[derive(Debug, Default, Clone)]
pub struct Scratch {
    k: Keys,
    /// Compiled plans of the metadata blocks seen last.
    plans: PlanCache,
}

impl Deref for Scratch {
    type Target = Keys;
    fn deref(&self) -> &Keys {
        &self.k
    }
}

impl DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut Keys {
        &mut self.k
    }
}

impl Scratch {
    /// See [`PlanCache::has_learnt`].
    #[inline]
    pub fn has_learnt(&self) -> bool {
        self.plans.has_learnt()
    }

    /// See [`PlanCache::take_learnt`].
    pub fn take_learnt(&mut self) -> Option<(&[u8], Endian)> {
        self.plans.take_learnt()
    }
}

/// Append the EventHeader keys of a line for the event `data` (the raw trace entry from
/// offset 8, the `eventheader_flags` byte, to its end) of the tracepoint `tp`: from
/// `,"provider":` to the last key (the caller writes the line's start and its `}\n`).
/// Never panics; bad data is reported in `errors` with the bytes not decoded.
///
/// Events whose metadata compiles take its cached [`Plan`](plan::Plan); the
/// others, and any event where the plan meets a problem, take the streaming writer
/// ([`write_event_streaming`]), so the line is the same either way.
pub fn write_event(out: &mut Vec<u8>, scratch: &mut Scratch, tp: &TracepointName<'_>, data: &[u8]) {
    let start = out.len();
    if !write_event_planned(out, scratch, tp, data) {
        out.truncate(start);
        write_event_streaming(out, scratch, tp, data);
    }
}

/// A tracepoint name with the constant texts of its events' lines rendered once: what
/// [`write_event_prepared`] copies instead of writing it per event.
#[derive(Debug, Clone)]
pub struct PreparedName {
    name: OwnedTracepointName,
    level: u8,
    /// `,"provider":…`
    provider: Text<64>,
    /// `,"level":…,"keyword":"0x…"` and `,"group":…` for events of the name's level.
    level_keyword: Text<64>,
    /// Where its events' metadata was found last in a plan cache.
    hint: PlanHint,
}

impl PreparedName {
    /// Render the constant texts of `name`.
    pub fn new(name: OwnedTracepointName) -> Self {
        let tp = name.get();
        let (mut provider, mut level_keyword) = (Vec::new(), Vec::new());
        write_provider(&mut provider, &tp);
        write_level_keyword(&mut level_keyword, &tp, tp.level);
        PreparedName {
            level: tp.level,
            provider: Text::new(provider),
            level_keyword: Text::new(level_keyword),
            name,
            hint: PlanHint::default(),
        }
    }

    /// The parsed name, borrowed.
    pub fn get(&self) -> TracepointName<'_> {
        self.name.get()
    }
}

/// [`write_event`] for a [`PreparedName`] (the same text).
pub fn write_event_prepared(
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
    name: &PreparedName,
    data: &[u8],
) {
    let start = out.len();
    let planned = write_planned(
        out,
        scratch,
        name.level,
        data,
        Some(&name.hint),
        |out| name.provider.write(out),
        |out| name.level_keyword.write(out),
    );
    if planned.is_none() {
        out.truncate(start);
        write_event_streaming(out, scratch, &name.get(), data);
    }
}

/// The fast path of [`write_event`] for a tracepoint of level `level` (`hint`: its
/// [`PlanHint`] when it has one), whose
/// `,"provider":…` text `provider` writes and whose `,"level":…,"keyword":…` text
/// (`,"group":…` included) `level_keyword` writes: `None` (with partial output) when
/// the event has no metadata, its metadata does not compile, its levels differ, or its
/// payload does not fit the plan: the streaming writer then writes the line (with its
/// errors).
#[inline]
fn write_planned(
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
    level: u8,
    data: &[u8],
    hint: Option<&PlanHint>,
    provider: impl FnOnce(&mut Vec<u8>),
    level_keyword: impl FnOnce(&mut Vec<u8>),
) -> Option<()> {
    let parts = parse_event(data).ok()?;
    if parts.header.level != level {
        return None;
    }
    let endian = parts.header.endian();
    let plan = scratch.plans.get(parts.metadata?, endian, hint)?;
    provider(out);
    plan.write_head(out);
    level_keyword(out);
    write_header_keys(out, &parts);
    out.extend_from_slice(b",\"fields\":{");
    plan.write_fields(out, parts.payload, endian)?;
    out.push(b'}');
    plan.write_tags(out);
    Some(())
}

/// Only the fast path of [`write_event`]: whether a plan wrote the event (else `out`
/// holds partial output). For the tests comparing it with [`write_event_streaming`].
#[doc(hidden)]
pub fn write_event_planned(
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
    tp: &TracepointName<'_>,
    data: &[u8],
) -> bool {
    write_planned(
        out,
        scratch,
        tp.level,
        data,
        None,
        |out| write_provider(out, tp),
        |out| write_level_keyword(out, tp, tp.level),
    )
    .is_some()
}

#[cfg(test)]
mod tests {
    use super::values::*;

    #[test]
    fn floats_as_serde_json_writes_them() {
        // Special values and random bit patterns, as f64 and as f32 (the low 32 bits);
        // non-finite ones as the documented strings, the others as serde_json's text,
        // which reads back to the same value.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut patterns = vec![0, 1, 0x8000_0000_0000_0000, 0x7ff0_0000_0000_0000];
        patterns.extend((0..20_000).map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }));
        patterns.extend([1e16, 1e-5, 1e21, 0.1, 65.0].map(f64::to_bits));
        let special = |finite: bool, nan: bool, positive: bool| match (finite, nan, positive) {
            (true, ..) => None,
            (false, true, _) => Some(b"\"NaN\"".to_vec()),
            (false, false, true) => Some(b"\"Infinity\"".to_vec()),
            (false, false, false) => Some(b"\"-Infinity\"".to_vec()),
        };
        for bits in patterns {
            let double = f64::from_bits(bits);
            let mut out = Vec::new();
            write_float(&mut out, double);
            let expected = special(double.is_finite(), double.is_nan(), double > 0.0)
                .unwrap_or_else(|| serde_json::to_vec(&double).unwrap());
            assert_eq!(out, expected, "{double:?}");
            let single = f32::from_bits(bits as u32);
            out.clear();
            write_float(&mut out, single);
            let expected = special(single.is_finite(), single.is_nan(), single > 0.0)
                .unwrap_or_else(|| serde_json::to_vec(&single).unwrap());
            assert_eq!(out, expected, "{single:?}");
            if single.is_finite() {
                let back: f32 = std::str::from_utf8(&out).unwrap().parse().unwrap();
                assert_eq!(back.to_bits(), single.to_bits());
            }
        }
    }

    #[test]
    fn hex_numbers_and_uuids_as_format_writes_them() {
        let mut v = 1u64;
        for shift in 0..64 {
            for x in [0, 1u64 << shift, (1u64 << shift) - 1, v, u64::MAX >> shift] {
                let mut out = Vec::new();
                write_hash_x(&mut out, x);
                assert_eq!(out, format!("\"{x:#x}\"").into_bytes());
            }
            v = v.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        }
        let b: [u8; 16] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0xa5);
        let mut out = Vec::new();
        write_uuid(&mut out, &b);
        let hex: String = b.iter().map(|b| format!("{b:02x}")).collect();
        let expected = format!(
            "\"{}-{}-{}-{}-{}\"",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn ipv6_as_std_displays_it() {
        // Every pattern of zero and non-zero segments (non-zero ones varied), and the
        // IPv4-mapped and IPv4-compatible forms.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for pattern in 0u32..256 {
            for round in 0..4 {
                let mut b = [0u8; 16];
                for (i, pair) in b.chunks_exact_mut(2).enumerate() {
                    if pattern >> i & 1 == 1 {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let v = match round {
                            0 => seed as u16 | 1,
                            1 => (seed as u16 & 0xf) | 1,
                            2 => 0xffff,
                            _ => (seed as u16 & 0xff) | 0x100,
                        };
                        pair.copy_from_slice(&v.to_be_bytes());
                    }
                }
                let mut mapped = b;
                mapped[..10].fill(0);
                mapped[10..12].fill(0xff);
                for b in [b, mapped] {
                    let mut out = Vec::new();
                    write_ipv6(&mut out, &b);
                    let expected = format!("\"{}\"", std::net::Ipv6Addr::from(b));
                    assert_eq!(String::from_utf8(out).unwrap(), expected);
                }
            }
        }
    }
}
