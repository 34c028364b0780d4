//! Tier 1 (pure): the test binary of everything that needs no kernel feature: the CLI's
//! argument handling, the tier helper, the OTLP transport against local receivers, the
//! `/metrics` endpoint. Each file is a module; the rules: tests/README.md.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod cli;
mod cli_reference;
mod decode_kallsyms;
mod decode_output;
mod decode_salvage;
mod decode_windows;
mod export_transport;
mod flamegraph;
mod install;
mod layers;
mod metrics_endpoint;
mod readme_paths;
mod tiers;
