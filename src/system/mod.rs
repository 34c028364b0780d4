//! Leaves every layer may use: what the process asks of the operating system. Signals
//! ([`signals`]), the open-file limit ([`fd_limit`]), thread priorities ([`sched`]), an
//! epoll set ([`epoll`]), files that reach the disk whole ([`durable`]), a lock held for
//! the process's life ([`pid_lock`]), the kernel's symbol table ([`kallsyms`]), a live process's mappings ([`proc_maps`]) and the kernel's name for the machine ([`uname`]). None imports another module of the crate.
//!
//! Layers, lowest first: `durable`, `epoll`, `fd_limit`, `kallsyms`, `pid_lock`, `proc_maps`, `sched`, `signals`,
//! `uname`.

pub mod durable;
pub mod epoll;
pub mod fd_limit;
pub mod kallsyms;
pub mod pid_lock;
pub mod proc_maps;
pub mod sched;
pub mod signals;
pub mod uname;
