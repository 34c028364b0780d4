//! Integers as JSON numbers (decimal digits), without a `memcpy` per number.
//!
//! Hand-written rather than itoa's `Buffer::format` (the well-kept crate this replaced):
//! itoa writes the digits into a buffer of its own, whose text of run-time length then
//! costs a call to `memcpy` to append (about as much again as itoa itself, for the 5 to
//! 20-digit numbers of ids and pointers). Here the digits are made 8 at a time in one
//! 64-bit word ([`eight_digits`], multiply-shift divisions in every lane at once), the
//! leading zeros shifted out, and the word appended as one fixed-size copy cut back to
//! the number's length ([`LineOut::put`](super::line_buf::LineOut::put)). `ints_as_display_writes_them` checks every
//! width against `Display` at 0, the bounds, every power of ten and a stride through the
//! rest.

use super::line_buf::LineOut;

/// `b'0'` in every byte lane.
const ZEROS: u64 = u64::from_le_bytes([b'0'; 8]);
/// 10^8: the digits of one word.
const E8: u64 = 100_000_000;

/// The 8 decimal digits of `n` (below 10^8), zero-padded, as ASCII in a word whose
/// lowest byte holds the most significant digit (the digits' order in memory once
/// written little-endian). Checked against `format!` through `nine_digits` (the time's
/// nanoseconds), whose test covers every 8-digit tail pattern.
#[inline(always)]
pub(crate) fn eight_digits(n: u32) -> u64 {
    digit_values(n) + ZEROS
}

/// [`eight_digits`] before `'0'` is added: each byte lane holds a digit's value (0 to 9),
/// so the leading zeros are the low bytes that are 0.
#[inline(always)]
fn digit_values(n: u32) -> u64 {
    let n = u64::from(n);
    // Lanes in memory order (little-endian): the most significant digits first.
    let halves = (n / 10_000) | ((n % 10_000) << 32);
    // x / 100 for x < 10^4 is (x * 10486) >> 20.
    let hundreds = ((halves * 10_486) >> 20) & 0x0000_007f_0000_007f;
    let quarters = hundreds | ((halves - hundreds * 100) << 16);
    // x / 10 for x < 100 is (x * 103) >> 10.
    let tens = ((quarters * 103) >> 10) & 0x000f_000f_000f_000f;
    tens | ((quarters - tens * 10) << 8)
}

/// `n` (0 to 10^8 - 1) without leading zeros: its ASCII word ([`eight_digits`] shifted
/// by the zero lanes at its low end) and its length (0 is `0`, length 1).
#[inline(always)]
pub(crate) fn short_digits(n: u32) -> (u64, usize) {
    let values = digit_values(n);
    let zeros = (values | (1 << 56)).trailing_zeros() / 8;
    ((values + ZEROS) >> (8 * zeros), 8 - zeros as usize)
}

/// The decimal digits of `v`: numbers below 1000 (CPUs, small ids and values, syscall
/// numbers, priorities) made digit by digit, others as one or more words. All in line: out of line, the register saves
/// and constant loads of a call cost more than a third of a 15-digit pointer's digits.
#[inline(always)]
pub(crate) fn write_u64(out: &mut impl LineOut, v: u64) {
    if v < 10 {
        out.put_all(&[b'0' + v as u8]);
    } else if v < 100 {
        let v = v as u8;
        out.put_all(&[b'0' + v / 10, b'0' + v % 10]);
    } else if v < 1000 {
        // Syscall numbers, priorities: cheaper than the 8-digit word (BENCHMARKS.md, "Instruction counts moved out of the code").
        // x / 100 for x < 1000 is (x * 41) >> 12; x / 10 for x < 100 is (x * 103) >> 10.
        let v = v as u32;
        let hundreds = (v * 41) >> 12;
        let rest = v - hundreds * 100;
        let tens = (rest * 103) >> 10;
        let digits = [hundreds, tens, rest - tens * 10, 0].map(|d| b'0' + d as u8);
        out.put(&digits, 3);
    } else if v < E8 {
        let (word, len) = short_digits(v as u32);
        out.put(&word.to_le_bytes(), len);
    } else {
        write_long(out, v);
    }
}

/// `sep` and then the decimal digits of `v`, in one store for numbers below 10^7 (the
/// separator shifted into the digits' word): array elements after their `[` or `,`,
/// where a separate push of the separator cost as much again as a short number.
#[inline(always)]
pub(crate) fn write_u64_after(out: &mut impl LineOut, sep: u8, v: u64) {
    if v < 10 {
        out.put_all(&[sep, b'0' + v as u8]);
    } else if v < 100 {
        let v = v as u8;
        out.put_all(&[sep, b'0' + v / 10, b'0' + v % 10]);
    } else if v < E7 {
        let (word, len) = short_digits(v as u32);
        put_after(out, sep, word, len);
    } else if (E8..E15).contains(&v) {
        // Pointers (9 to 15 digits): the separator shifted into the word of the digits
        // above the last 8 as well, and no second pass through `write_u64`'s tests
        // (fewer instructions per line on the sys_enter file, whose `args` start with
        // one; BENCHMARKS.md, "Instruction counts moved out of the code").
        let (word, len) = short_digits((v / E8) as u32);
        put_after(out, sep, word, len);
        out.put_all(&eight_digits((v % E8) as u32).to_le_bytes());
    } else {
        out.put_all(&[sep]);
        write_u64(out, v);
    }
}

/// `sep` and the `len` digits of `word` (at most 7, [`short_digits`]) in one store.
#[inline(always)]
fn put_after(out: &mut impl LineOut, sep: u8, word: u64, len: usize) {
    out.put(&((word << 8) | u64::from(sep)).to_le_bytes(), len + 1);
}

/// 10^7: the numbers whose digits and a separator fit one word.
const E7: u64 = 10_000_000;
/// 10^15: the numbers whose digits above the last 8 and a separator fit one word.
const E15: u64 = 1_000_000_000_000_000;

/// The digits of `v` from 10^8 up (9 to 20 digits): the digits above the last 8 (up to
/// 12: as [`write_u64`] writes a number below 10^8, or 4 and then 8), then the last 8.
#[inline(always)]
fn write_long(out: &mut impl LineOut, v: u64) {
    let high = v / E8;
    if high < E8 {
        let (word, len) = short_digits(high as u32);
        out.put(&word.to_le_bytes(), len);
    } else {
        let (top, len) = short_digits((high / E8) as u32);
        out.put(&top.to_le_bytes(), len);
        out.put_all(&eight_digits((high % E8) as u32).to_le_bytes());
    }
    out.put_all(&eight_digits((v % E8) as u32).to_le_bytes());
}

/// An integer type [`write_int`] writes: its sign and magnitude.
pub(crate) trait Decimal: Copy {
    /// Whether the value is negative, and its absolute value.
    fn sign_magnitude(self) -> (bool, u64);
}

macro_rules! decimal_unsigned {
    ($($t:ty),*) => {$(
        impl Decimal for $t {
            #[inline(always)]
            fn sign_magnitude(self) -> (bool, u64) {
                (false, self as u64)
            }
        }
    )*};
}

macro_rules! decimal_signed {
    ($($t:ty),*) => {$(
        impl Decimal for $t {
            #[inline(always)]
            fn sign_magnitude(self) -> (bool, u64) {
                (self < 0, self.unsigned_abs() as u64)
            }
        }
    )*};
}

decimal_unsigned!(u8, u16, u32, u64, usize);
decimal_signed!(i8, i16, i32, i64, isize);

/// An integer as a JSON number (always in line: out of line, the call costs more than
/// the usual short number).
#[inline(always)]
pub(crate) fn write_int(out: &mut impl LineOut, v: impl Decimal) {
    let (negative, magnitude) = v.sign_magnitude();
    if negative {
        out.put_all(b"-");
    }
    write_u64(out, magnitude);
}

/// [`write_int`] after `sep` ([`write_u64_after`]).
#[inline(always)]
pub(crate) fn write_int_after(out: &mut impl LineOut, sep: u8, v: impl Decimal) {
    let (negative, magnitude) = v.sign_magnitude();
    if negative {
        out.put_all(&[sep, b'-']);
        write_u64(out, magnitude);
    } else {
        write_u64_after(out, sep, magnitude);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: Decimal + std::fmt::Display>(v: T) {
        let mut out = b"x".to_vec();
        write_int(&mut out, v);
        assert_eq!(out[1..], *v.to_string().as_bytes(), "{v}");
        let mut out = b"x".to_vec();
        write_int_after(&mut out, b',', v);
        assert_eq!(out[1..], *format!(",{v}").as_bytes(), "{v}");
    }

    #[test]
    fn ints_as_display_writes_them() {
        for v in -300i64..300 {
            check(v);
            check(v as i8);
            check(v as u8);
            check(v as i16);
            check(v as u32);
            check(v as u64);
        }
        // Every 3-digit number (their own path) and its neighbours.
        for v in 300..1100i64 {
            check(v);
            check(-v);
        }
        for v in [u64::MIN, u64::MAX, i64::MAX as u64] {
            check(v);
        }
        for v in [i64::MIN, i64::MAX, 0] {
            check(v);
        }
        check(i8::MIN);
        check(i16::MIN);
        check(i32::MIN);
        check(i32::MAX);
        check(u32::MAX);
        check(u16::MAX);
        check(usize::MAX);
        check(isize::MIN);
        // Around every power of ten, both signs.
        for p in 0..20 {
            let base = 10u64.pow(p);
            for v in base.saturating_sub(3)..=base.saturating_add(3) {
                check(v);
                check(v as i64);
                check((v as i64).wrapping_neg());
            }
        }
        // A stride through the whole range (odd multiplier: every digit in every place).
        let mut v = 1u64;
        for _ in 0..300_000 {
            check(v);
            check(v as i64);
            check(v >> 20);
            check(v >> 40);
            v = v
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
        }
    }

    #[test]
    fn prefix_is_cut_to_length() {
        for n in 0..=8 {
            let mut out = b"ab".to_vec();
            out.put(b"12345678", n);
            assert_eq!(out[2..], b"12345678"[..n]);
        }
    }
}
