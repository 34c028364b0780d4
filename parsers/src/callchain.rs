//! `PERF_SAMPLE_CALLCHAIN`: the `u64 nr; u64 ips[nr]` of a sample → frames, each told
//! apart by the context (kernel, user, hypervisor, guest) its marker gave.
//!
//! The kernel writes the addresses innermost first, a marker entry (`PERF_CONTEXT_*`, the
//! top 4095 values of a u64) before each part: `PERF_CONTEXT_KERNEL`, kernel frames, then
//! `PERF_CONTEXT_USER`, user frames (`kernel/events/callchain.c`). A chain read from a file
//! or a hostile ring may hold anything: an unknown marker, a frame before any marker or a
//! marker going back to an earlier part is a [`CallchainError`], never a guess.

use crate::bytes::Endian;

/// `PERF_CONTEXT_HV`: hypervisor frames follow.
pub const PERF_CONTEXT_HV: u64 = -32i64 as u64;
/// `PERF_CONTEXT_KERNEL`: kernel frames follow.
pub const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
/// `PERF_CONTEXT_USER`: user frames follow.
pub const PERF_CONTEXT_USER: u64 = -512i64 as u64;
/// `PERF_CONTEXT_GUEST`: guest frames follow.
pub const PERF_CONTEXT_GUEST: u64 = -2048i64 as u64;
/// `PERF_CONTEXT_GUEST_KERNEL`: guest kernel frames follow.
pub const PERF_CONTEXT_GUEST_KERNEL: u64 = -2176i64 as u64;
/// `PERF_CONTEXT_GUEST_USER`: guest user frames follow.
pub const PERF_CONTEXT_GUEST_USER: u64 = -2560i64 as u64;
/// `PERF_CONTEXT_MAX`: every value from here up is a marker, not an address.
pub const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;

/// Where the frames after a marker ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameContext {
    /// The hypervisor (`PERF_CONTEXT_HV`).
    Hypervisor,
    /// The kernel (`PERF_CONTEXT_KERNEL`).
    Kernel,
    /// User space (`PERF_CONTEXT_USER`).
    User,
    /// A guest (`PERF_CONTEXT_GUEST`).
    Guest,
    /// A guest's kernel (`PERF_CONTEXT_GUEST_KERNEL`).
    GuestKernel,
    /// A guest's user space (`PERF_CONTEXT_GUEST_USER`).
    GuestUser,
}

impl FrameContext {
    /// The context a marker value starts (`None`: not a known marker).
    pub fn of_marker(value: u64) -> Option<FrameContext> {
        Some(match value {
            PERF_CONTEXT_HV => FrameContext::Hypervisor,
            PERF_CONTEXT_KERNEL => FrameContext::Kernel,
            PERF_CONTEXT_USER => FrameContext::User,
            PERF_CONTEXT_GUEST => FrameContext::Guest,
            PERF_CONTEXT_GUEST_KERNEL => FrameContext::GuestKernel,
            PERF_CONTEXT_GUEST_USER => FrameContext::GuestUser,
            _ => return None,
        })
    }

    /// The name used in JSON lines (`kernel`, `user`, …).
    pub fn name(self) -> &'static str {
        match self {
            FrameContext::Hypervisor => "hypervisor",
            FrameContext::Kernel => "kernel",
            FrameContext::User => "user",
            FrameContext::Guest => "guest",
            FrameContext::GuestKernel => "guest_kernel",
            FrameContext::GuestUser => "guest_user",
        }
    }

    /// The order the kernel writes the parts in (hypervisor, kernel, user; then guest,
    /// its kernel, its user): a marker must come after every marker before it.
    fn rank(self) -> u8 {
        match self {
            FrameContext::Hypervisor => 0,
            FrameContext::Kernel => 1,
            FrameContext::User => 2,
            FrameContext::Guest => 3,
            FrameContext::GuestKernel => 4,
            FrameContext::GuestUser => 5,
        }
    }
}

/// One address of a chain and the context it ran in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainFrame {
    /// The return address (the sample's own ip for the innermost frame of a part).
    pub address: u64,
    /// Kernel, user, …
    pub context: FrameContext,
}

/// Why a callchain cannot be read as frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CallchainError {
    /// A value in the marker range that no kernel writes.
    #[error(
        "callchain entry {index} is {value:#x}, in the marker range but no known PERF_CONTEXT_* marker"
    )]
    UnknownMarker {
        /// Place of the entry in the chain.
        index: usize,
        /// Its value.
        value: u64,
    },
    /// An address before any marker: which part it belongs to is unknown.
    #[error("callchain entry {index} is an address before any PERF_CONTEXT_* marker")]
    NoContext {
        /// Place of the entry in the chain.
        index: usize,
    },
    /// A marker naming a part the kernel writes before one already seen.
    #[error(
        "callchain entry {index}: the {context} marker comes after the {after} part (the kernel writes them in order)"
    )]
    MarkerOutOfOrder {
        /// Place of the entry in the chain.
        index: usize,
        /// The context the marker names.
        context: &'static str,
        /// The context of the part before it.
        after: &'static str,
    },
}

/// The `ips` of one sample's callchain (the `nr` words after its count), in the record's
/// byte order; read as frames by [`Callchain::frames`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Callchain<'a> {
    words: &'a [u8],
    endian: Endian,
}

impl<'a> Callchain<'a> {
    /// The chain whose `ips` are `words` (a multiple of 8 bytes; a trailing part word is
    /// ignored) in byte order `endian`.
    pub fn new(words: &'a [u8], endian: Endian) -> Self {
        Callchain { words, endian }
    }

    /// The `ips` bytes, markers included (what a staged record or a perf.data writer copies).
    pub fn bytes(&self) -> &'a [u8] {
        self.words
    }

    /// The byte order of the words.
    pub fn endian(&self) -> Endian {
        self.endian
    }

    /// Entries, markers included (`nr`).
    pub fn len(&self) -> usize {
        self.words.len() / 8
    }

    /// Whether the chain has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every entry as it is, markers included.
    pub fn entries(&self) -> impl Iterator<Item = u64> + 'a {
        let big = self.endian.is_big();
        self.words.chunks_exact(8).map(move |c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            if big {
                u64::from_be_bytes(a)
            } else {
                u64::from_le_bytes(a)
            }
        })
    }

    /// The frames, innermost first, each with its context; the first misplaced or unknown
    /// marker ends the walk with its error (the frames before it were given).
    pub fn frames(&self) -> impl Iterator<Item = Result<ChainFrame, CallchainError>> + 'a {
        let mut context: Option<FrameContext> = None;
        let mut failed = false;
        self.entries()
            .enumerate()
            .filter_map(move |(index, value)| {
                if failed {
                    return None;
                }
                if value >= PERF_CONTEXT_MAX {
                    let Some(next) = FrameContext::of_marker(value) else {
                        failed = true;
                        return Some(Err(CallchainError::UnknownMarker { index, value }));
                    };
                    if let Some(before) = context
                        && next.rank() <= before.rank()
                    {
                        failed = true;
                        return Some(Err(CallchainError::MarkerOutOfOrder {
                            index,
                            context: next.name(),
                            after: before.name(),
                        }));
                    }
                    context = Some(next);
                    return None;
                }
                match context {
                    Some(context) => Some(Ok(ChainFrame {
                        address: value,
                        context,
                    })),
                    None => {
                        failed = true;
                        Some(Err(CallchainError::NoContext { index }))
                    }
                }
            })
    }
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn chain(values: &[u64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn kernel_then_user_frames() {
        let bytes = chain(&[
            PERF_CONTEXT_KERNEL,
            0xf_fff1,
            0xf_fff2,
            PERF_CONTEXT_USER,
            0x401000,
        ]);
        let c = Callchain::new(&bytes, Endian::Little);
        assert_eq!(c.len(), 5);
        let frames: Vec<_> = c.frames().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            frames,
            [
                ChainFrame {
                    address: 0xf_fff1,
                    context: FrameContext::Kernel
                },
                ChainFrame {
                    address: 0xf_fff2,
                    context: FrameContext::Kernel
                },
                ChainFrame {
                    address: 0x401000,
                    context: FrameContext::User
                },
            ]
        );
    }

    #[test]
    fn big_endian_words() {
        let bytes: Vec<u8> = [PERF_CONTEXT_USER, 7]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let frames: Vec<_> = Callchain::new(&bytes, Endian::Big).frames().collect();
        assert_eq!(
            frames,
            [Ok(ChainFrame {
                address: 7,
                context: FrameContext::User
            })]
        );
    }

    #[test]
    fn odd_markers_are_errors() {
        let no_context = chain(&[0x401000]);
        assert_eq!(
            Callchain::new(&no_context, Endian::Little).frames().next(),
            Some(Err(CallchainError::NoContext { index: 0 }))
        );
        let unknown = chain(&[PERF_CONTEXT_USER, 1, -300i64 as u64, 2]);
        let got: Vec<_> = Callchain::new(&unknown, Endian::Little).frames().collect();
        assert_eq!(got.len(), 2, "the walk ends at the error");
        assert_eq!(
            got[1],
            Err(CallchainError::UnknownMarker {
                index: 2,
                value: -300i64 as u64
            })
        );
        let back = chain(&[PERF_CONTEXT_USER, 1, PERF_CONTEXT_KERNEL, 2]);
        let e = Callchain::new(&back, Endian::Little)
            .frames()
            .nth(1)
            .unwrap()
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("kernel marker comes after the user part"),
            "{e}"
        );
        let twice = chain(&[PERF_CONTEXT_USER, PERF_CONTEXT_USER]);
        assert!(
            Callchain::new(&twice, Endian::Little)
                .frames()
                .next()
                .unwrap()
                .is_err()
        );
    }

    proptest! {
        /// Any words: frames are the non-marker entries in order, until an error that
        /// ends the walk; never a panic.
        #[test]
        fn frames_are_the_addresses(values in proptest::collection::vec(
            prop_oneof![any::<u64>(), Just(PERF_CONTEXT_KERNEL), Just(PERF_CONTEXT_USER), 0u64..0x1000], 0..40),
            extra in 0usize..8) {
            let mut bytes = chain(&values);
            bytes.extend(std::iter::repeat_n(0xAA, extra));
            let c = Callchain::new(&bytes, Endian::Little);
            prop_assert_eq!(c.len(), values.len() + extra / 8);
            let mut ok = 0;
            for f in c.frames() {
                match f {
                    Ok(f) => { prop_assert!(f.address < PERF_CONTEXT_MAX); ok += 1; }
                    Err(_) => break,
                }
            }
            prop_assert!(ok <= c.len());
        }
    }
}
