//! The raw user_events ABI from `include/uapi/linux/user_events.h` (Linux 6.4+), spelled
//! out in Rust: the two ioctl structs, the three ioctl request numbers and the
//! registration flags.
//!
//! Everything here is plain data; the system calls that use it live in the crate root.

/// `struct user_reg`: the argument of [`DIAG_IOCSREG`]. Packed, 28 bytes.
///
/// The caller fills in everything except `write_index`, which the kernel writes back: it
/// is the `u32` that must start every `writev()` of this event.
#[repr(C, packed)]
#[derive(Debug, Clone, Copy, Default)]
pub struct UserReg {
    /// `sizeof(struct user_reg)`: lets the kernel tell ABI versions apart.
    pub size: u32,
    /// Which bit of the enable word the kernel sets while someone records the event.
    pub enable_bit: u8,
    /// Size of the enable word in bytes: 4 or 8.
    pub enable_size: u8,
    /// `USER_EVENT_REG_*` flags ([`Flags`]).
    pub flags: u16,
    /// Address of the enable word in this process (naturally aligned).
    pub enable_addr: u64,
    /// Address of the NUL-terminated register command (`name field1; field2`).
    pub name_args: u64,
    /// Out: the index to put in front of every write of this event.
    pub write_index: u32,
}

/// `struct user_unreg`: the argument of [`DIAG_IOCSUNREG`]. Packed, 16 bytes.
///
/// Tells the kernel to stop updating the enable word at `disable_addr`.
#[repr(C, packed)]
#[derive(Debug, Clone, Copy, Default)]
pub struct UserUnreg {
    /// `sizeof(struct user_unreg)`.
    pub size: u32,
    /// The bit given at registration.
    pub disable_bit: u8,
    /// Must be 0.
    pub reserved: u8,
    /// Must be 0.
    pub reserved2: u16,
    /// The enable word given at registration.
    pub disable_addr: u64,
}

/// `_IOWR('*', 0, struct user_reg *)`: register an event (or add this process as one more
/// user of an existing one with the same fields).
pub const DIAG_IOCSREG: u64 = 0xC008_2A00;
/// `_IOW('*', 1, char *)`: delete an event by name (fails with EBUSY while it is in use).
pub const DIAG_IOCSDEL: u64 = 0x4008_2A01;
/// `_IOW('*', 2, struct user_unreg *)`: stop updating one enable word.
pub const DIAG_IOCSUNREG: u64 = 0x4008_2A02;

/// `USER_EVENT_REG_*` registration flags (a `u16` bit set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags(pub u16);

impl Flags {
    /// No flags: the event is deleted automatically when its last user goes away.
    pub const NONE: Flags = Flags(0);
    /// `USER_EVENT_REG_PERSIST` (6.5+, needs CAP_PERFMON): the event outlives its
    /// producers until deleted (DIAG_IOCSDEL or a `-:` line on `dynamic_events`).
    pub const PERSIST: Flags = Flags(1 << 0);
    /// `USER_EVENT_REG_MULTI_FORMAT` (6.10+): the same name may be registered with
    /// different fields; each format becomes its own tracepoint
    /// `user_events_multi:<name>.<hex id>`.
    pub const MULTI_FORMAT: Flags = Flags(1 << 1);

    /// Both sets of bits.
    pub const fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_match_the_uapi_header() {
        assert_eq!(std::mem::size_of::<UserReg>(), 28);
        assert_eq!(std::mem::size_of::<UserUnreg>(), 16);
    }

    #[test]
    fn ioctl_numbers_encode_dir_size_type_nr() {
        // _IOC(dir, type, nr, size) = dir << 30 | size << 16 | type << 8 | nr, with
        // size = sizeof(pointer) = 8 because the uapi header passes pointer types.
        let ioc = |dir: u64, nr: u64| dir << 30 | 8 << 16 | (b'*' as u64) << 8 | nr;
        assert_eq!(DIAG_IOCSREG, ioc(3, 0));
        assert_eq!(DIAG_IOCSDEL, ioc(1, 1));
        assert_eq!(DIAG_IOCSUNREG, ioc(1, 2));
    }
}
