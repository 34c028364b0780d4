//! Emitting Linux **user_events** from Rust, with nothing but `libc`.
//!
//! user_events (Linux 6.4+, `CONFIG_USER_EVENTS`) let a process define tracepoints at run
//! time and write records into the kernel's trace buffers, where perf, ftrace or uevrec
//! pick them up. The whole protocol is four steps on one file,
//! `<tracefs>/user_events_data`:
//!
//! 1. **register**: `ioctl(fd, DIAG_IOCSREG, &user_reg)` with a register command such as
//!    `my_event u32 count; __rel_loc char[] msg` and the address of an *enable word* in
//!    this process. The kernel answers with a `write_index`.
//! 2. **check**: the kernel sets one bit of the enable word while anyone records the
//!    event, and clears it when they stop. Test the bit before doing any work.
//! 3. **write**: `writev(fd, [write_index as u32, payload...])`. The payload is the
//!    event's fields packed without padding; `__data_loc`/`__rel_loc` fields hold
//!    `len << 16 | offset` and their data goes after the fixed part. Writing while nobody
//!    records fails with `EBADF`.
//! 4. **unregister**: `ioctl(fd, DIAG_IOCSUNREG, &user_unreg)` before the enable word's
//!    memory goes away; the event itself is deleted when its last user is gone.
//!
//! This crate wraps exactly that: [`UserEvents`] is the open data file, [`Event`] one
//! registration (it owns a heap-pinned enable word and unregisters on drop). Register
//! commands are built and checked with [`RegisterCommand`] and payloads with
//! [`encode`], the same code uevrec uses to understand them. The producers in
//! `src/bin/` are runnable examples and the workload of uevrec's VM test tier.
//!
//! ```no_run
//! use uevrec_samples::{encode, Flags, PayloadValue, RegisterCommand, UserEvents, Written};
//!
//! let cmd = RegisterCommand::parse("hello_rust u32 count; __rel_loc char[] msg")?;
//! let events = UserEvents::open()?;                 // <tracefs>/user_events_data
//! let hello = events.register(&cmd, Flags::NONE)?;  // DIAG_IOCSREG
//! for count in 0..3u32 {
//!     if hello.is_enabled() {                       // somebody is recording
//!         let payload = encode(&cmd, &[PayloadValue::Uint(count.into()), PayloadValue::Str("hi")])?;
//!         match hello.write(&payload)? {
//!             Written::Yes => {}
//!             Written::Disabled => {} // the recorder left between the check and the write
//!         }
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Permissions: `user_events_data` is root-only by default (`chmod` it, or run as root);
//! [`Flags::PERSIST`] needs CAP_PERFMON.
//!
//! Running the producers needs a kernel with user_events; without one, the project's test
//! VM has it (`cargo build -p uevrec-samples`, then for example
//! `vm/run.sh 'target/debug/every_type --name demo & sleep 1; target/debug/uevrec record -e user_events:demo --duration 5s'`).
//! Each prints JSON lines saying what it registered and wrote.
#![warn(missing_docs)]

//!
//! One file per job: [`data_file`] (the open `user_events_data`, registrations and
//! writes), [`tracefs`] (where tracefs is, persistent events through `dynamic_events`),
//! [`producer`] (what the producer binaries share: their report lines, the values a
//! recorder must show, when to start writing), [`register`] and [`payload`] (the register
//! command and payload encoding), [`abi`] and [`eh`].

pub mod abi;
pub mod data_file;
pub mod eh;
pub mod payload;
pub mod producer;
#[deny(clippy::arithmetic_side_effects)]
pub mod register;
pub mod tracefs;

pub use abi::Flags;
pub use data_file::{EmitError, Event, UserEvents, Written};
pub use payload::{PayloadError, PayloadValue, encode, encode_into};
pub use producer::{
    StartArgs, announce, command, emit_and_report, expected_fields, expected_json, fail, report,
    wait_until,
};
pub use register::{RegisterCommand, RegisterError};
pub use tracefs::{DEFAULT_TRACEFS, add_persistent, event_exists, remove_persistent, tracefs_root};
