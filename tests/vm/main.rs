//! Tier 3 (VM): the test binary of everything that needs a kernel with user_events:
//! scripts/vm-test.sh runs it inside the QEMU guest (../shared/vm/run.sh or vm/run.sh).
//! On a host without user_events each test says why it did not run (and fails when
//! `UEVREC_REQUIRE_TIERS` names `vm`). Each file is a module; the rules: tests/README.md.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod context;
mod crash;
mod eventheader;
mod export;
mod filtering;
mod flight;
mod many_events;
mod otlp;
mod register;
mod session;
mod stacks;
mod threads;
mod top;
mod user_events;
