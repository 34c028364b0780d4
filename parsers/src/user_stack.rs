//! `PERF_SAMPLE_REGS_USER` and `PERF_SAMPLE_STACK_USER`: the user registers and the copy
//! of the user stack a sample carries, what `--call-graph dwarf` unwinds in user space.
//!
//! - regs: `u64 abi` (`PERF_SAMPLE_REGS_ABI_NONE` = 0: no registers follow, as for a
//!   kernel thread), then one `u64` per bit of the event's `sample_regs_user`, lowest
//!   bit first;
//! - stack: `u64 size`, then `size` bytes and `u64 dyn_size` (the bytes the kernel could
//!   copy, at most `size`) when `size` is not 0.
//!
//! Both come after the raw data (`perf_output_sample`). Lengths are checked against the
//! record; `dyn_size` past `size` is an error, never a read past the copy.

use crate::bytes::Endian;

/// `PERF_SAMPLE_REGS_ABI_NONE`: the sample has no user registers.
pub const REGS_ABI_NONE: u64 = 0;

/// x86_64's register numbers (`arch/x86/include/uapi/asm/perf_regs.h`).
pub mod x86_64 {
    /// `PERF_REG_X86_BP`: the frame pointer.
    pub const BP: u32 = 6;
    /// `PERF_REG_X86_SP`: the stack pointer.
    pub const SP: u32 = 7;
    /// `PERF_REG_X86_IP`: the instruction pointer.
    pub const IP: u32 = 8;
}

/// aarch64's register numbers (`arch/arm64/include/uapi/asm/perf_regs.h`).
pub mod aarch64 {
    /// `PERF_REG_ARM64_X29`: the frame pointer.
    pub const FP: u32 = 29;
    /// `PERF_REG_ARM64_LR` (x30): the link register.
    pub const LR: u32 = 30;
    /// `PERF_REG_ARM64_SP`: the stack pointer.
    pub const SP: u32 = 31;
    /// `PERF_REG_ARM64_PC`: the program counter.
    pub const PC: u32 = 32;
}

/// The user registers of one sample: `abi` and the words of the registers of `mask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRegs<'a> {
    abi: u64,
    mask: u64,
    words: &'a [u8],
    endian: Endian,
}

impl<'a> UserRegs<'a> {
    /// The registers of `mask` in `words` (8 bytes each, lowest register first), in byte
    /// order `endian`. `words` shorter than the mask asks: the missing registers are
    /// `None` ([`UserRegs::get`]).
    pub fn new(abi: u64, mask: u64, words: &'a [u8], endian: Endian) -> Self {
        UserRegs {
            abi,
            mask,
            words,
            endian,
        }
    }

    /// `PERF_SAMPLE_REGS_ABI_*` (0: none, 1: 32-bit, 2: 64-bit).
    pub fn abi(&self) -> u64 {
        self.abi
    }

    /// The `sample_regs_user` mask the words follow.
    pub fn mask(&self) -> u64 {
        self.mask
    }

    /// The registers' words as the record holds them.
    pub fn bytes(&self) -> &'a [u8] {
        self.words
    }

    /// The byte order of the words.
    pub fn endian(&self) -> Endian {
        self.endian
    }

    /// Register `reg` (a `PERF_REG_*` number), when the mask has it and the sample has
    /// registers.
    pub fn get(&self, reg: u32) -> Option<u64> {
        if self.abi == REGS_ABI_NONE || reg >= 64 || self.mask >> reg & 1 == 0 {
            return None;
        }
        // The registers below `reg` in the mask come first: at most 63, times 8.
        let below = (self.mask & ((1u64 << reg).wrapping_sub(1))).count_ones() as usize;
        let at = below.checked_mul(8)?;
        let word = *self.words.get(at..)?.first_chunk::<8>()?;
        Some(if self.endian.is_big() {
            u64::from_be_bytes(word)
        } else {
            u64::from_le_bytes(word)
        })
    }
}

/// The copy of a sample's user stack: the bytes from its stack pointer up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackCopy<'a> {
    /// The bytes the kernel copied (`dyn_size` of them).
    pub bytes: &'a [u8],
    /// The size asked for (`sample_stack_user`, or less where the record would not fit):
    /// `bytes` as long as this means the copy may end before the stack does.
    pub size: u64,
}

/// Registers and stack copy together: what an unwinder starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserStack<'a> {
    /// The registers at the sample.
    pub regs: UserRegs<'a>,
    /// The stack from the stack pointer up.
    pub stack: StackCopy<'a>,
}

/// Bytes of the registers of `mask` when `abi` has any (`popcount(mask)` words).
pub fn regs_len(abi: u64, mask: u64) -> usize {
    if abi == REGS_ABI_NONE {
        0
    } else {
        // At most 64 words.
        (mask.count_ones() as usize).saturating_mul(8)
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn registers_by_number() {
        let mask = 1 << x86_64::BP | 1 << x86_64::SP | 1 << x86_64::IP;
        let words: Vec<u8> = [10u64, 20, 30]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let r = UserRegs::new(2, mask, &words, Endian::Little);
        assert_eq!(r.get(x86_64::BP), Some(10));
        assert_eq!(r.get(x86_64::SP), Some(20));
        assert_eq!(r.get(x86_64::IP), Some(30));
        assert_eq!(r.get(0), None, "not in the mask");
        assert_eq!(r.get(64), None);
        assert_eq!(UserRegs::new(0, mask, &words, Endian::Little).get(6), None);
        // Cut short: the registers past the words are missing, never read past.
        let short = UserRegs::new(2, mask, &words[..16], Endian::Little);
        assert_eq!(
            (short.get(x86_64::SP), short.get(x86_64::IP)),
            (Some(20), None)
        );
        assert_eq!(regs_len(2, mask), 24);
        assert_eq!(regs_len(0, mask), 0);
    }
}
