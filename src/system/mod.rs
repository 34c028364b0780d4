//! Leaves every layer may use: what the process asks of the operating system. Signals
//! ([`signals`]), the open-file limit ([`fd_limit`]), thread priorities ([`sched`]), an
//! epoll set ([`epoll`]), files that reach the disk whole ([`durable`]), a lock held for
//! the process's life ([`pid_lock`]), the kernel's symbol table ([`kallsyms`]), its loaded modules ([`kernel_modules`]), the kernel's and its modules' build ids ([`build_id`]), a live process's mappings ([`proc_maps`]) and the kernel's name for the machine ([`uname`]). None imports another module of the crate.
//!
//! Layers, lowest first: `build_id`, `durable`, `epoll`, `fd_limit`, `kallsyms`, `kernel_modules`, `pid_lock`, `proc_maps`, `sched`, `signals`,
//! `uname`.

pub mod build_id;
pub mod durable;
pub mod epoll;
pub mod fd_limit;
pub mod kallsyms;
pub mod kernel_modules;
pub mod pid_lock;
pub mod proc_maps;
pub mod sched;
pub mod signals;
pub mod uname;
