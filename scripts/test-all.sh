#!/usr/bin/env bash
# The whole test suite: lint, tier 1 (pure) + tier 2 (host kernel, as root) via nextest,
# doc tests, then tier 3 (real user_events in the VM) via scripts/vm-test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n=== %s ===\n' "$*"; }
t0=$(date +%s)

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

# Tier 2 tests need tracefs; mount it when we are root and it is not mounted.
if [ "$(id -u)" = 0 ] && [ ! -e /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi

step "tests: tier 1 (pure) and tier 2 (host kernel)"
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast --success-output never --failure-output final
  cargo test --workspace --doc --quiet
else
  cargo test --workspace --no-fail-fast
fi

if [ -x scripts/vm-test.sh ]; then
  step "tests: tier 3 (real user_events kernel in a VM)"
  scripts/vm-test.sh
fi
printf '\nall tiers done in %ss\n' "$(( $(date +%s) - t0 ))"
