#!/usr/bin/env bash
# The whole test suite: lint, doc tests, tier 1 (pure) + tier 2 (host kernel, as root) via
# nextest (the tier-3 binaries, tests/vm_*.rs, are left to the VM), then tier 3 (real user_events in the VM)
# via scripts/vm-test.sh. Ends with one
# line `total: N passed, N failed, N skipped` over all tiers.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n=== %s ===\n' "$*"; }
t0=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

# Tier 2 tests need tracefs; mount it when we are root and it is not mounted.
if [ "$(id -u)" = 0 ] && [ ! -e /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi

step "doc tests"
cargo test --workspace --doc --quiet 2>&1 | tee -a "$log"

step "tests: tier 1 (pure) and tier 2 (host kernel)"
t1=$(date +%s)
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast --success-output never --failure-output final -E 'not binary(/^vm_/)' 2>&1 | tee -a "$log"
else
  cargo test --workspace --no-fail-fast 2>&1 | tee -a "$log"
fi
echo "tiers 1+2 took $(( $(date +%s) - t1 ))s"

if [ -x scripts/vm-test.sh ]; then
  step "tests: tier 3 (real user_events kernel in a VM)"
  scripts/vm-test.sh 2>&1 | tee -a "$log"
fi

# Sum what the runners reported: nextest's summary and libtest's `test result:` lines.
read -r passed failed skipped < <(awk '
  /Summary \[/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1); if ($i ~ /^skipped/) s += $(i-1) } }
  /^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;/) p += $(i-1); if ($i ~ /^failed;/) f += $(i-1); if ($i ~ /^ignored;/) s += $(i-1) } }
  END { print p+0, f+0, s+0 }' "$log")
printf '\nall tiers done in %ss\n' "$(( $(date +%s) - t0 ))"
echo "total: $passed passed, $failed failed, $skipped skipped"
