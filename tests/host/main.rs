//! Tier 2 (host kernel): the test binary of everything that needs root, tracefs and
//! perf_event_open on this machine's kernel (no user_events). A test that cannot run here
//! says why through `require!`/`crate::common::tier::skip` (and fails when
//! `UEVREC_REQUIRE_TIERS` names `host`). Each file is a module; the rules: tests/README.md.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod cli;
mod container;
mod context;
mod crash;
mod crash_raw;
mod decode;
mod decode_threads;
mod export;
mod export_faults;
mod filtering;
mod flight;
mod instance;
mod k8s;
mod live;
mod otlp;
mod readme;
mod record;
mod record_dat;
mod record_raw;
mod session;
mod spool;
mod stack_ids;
mod stack_namespaces;
mod stack_outputs;
mod stack_vdso;
mod stacks;
mod stacks_build_ids;
mod stacks_ftrace;
mod stacks_raw;
mod stall;
mod stop;
mod text;
mod threads;
mod tid_reuse;
mod top;
mod top_stacks;
mod where_offline;
