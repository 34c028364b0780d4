#!/usr/bin/env bash
# The whole test suite: setup, lint, doc tests, tier 1 (pure) + tier 2 (host kernel, as
# root) via nextest (the tier-3 binaries are left to the VM), then tier 3 (real user_events
# in the VM) via scripts/vm-test.sh. Ends with one line
# `total: N passed, N failed, N skipped` over all tiers, where "skipped" counts the tests
# that could not run their tier here (each says why: `SKIP [tier] test: reason`).
#
# Tiers (tests/common/tier.rs): pure, host, vm, pipelines. UEVREC_REQUIRE_TIERS names the
# tiers that must run: a test of a required tier that cannot run FAILS instead of
# skipping. Unset, this script requires what the machine can run: pure always; host when
# root; vm when a VM runner with a kernel is present and UEVREC_VM_SKIP is not 1;
# pipelines only when asked (UEVREC_PIPELINES=1 or the tier named: those tests install
# and swap the system's syslog daemons with apt-get). `.ci/run` requires all four.
#
# Setup: as root, installs the Debian packages the tiers need (linux-perf for the
# differential tests, busybox-static and qemu-system-x86 for the VM, tmux for the
# terminal test of `uevrec top`); not root, lists
# what is missing and how to install it.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n=== %s ===\n' "$*"; }
t0=$(date +%s)
log=$(mktemp)
export UEVREC_SKIP_LOG=${UEVREC_SKIP_LOG:-$(mktemp "${TMPDIR:-/tmp}/uevrec-skips.XXXXXX")}
: >"$UEVREC_SKIP_LOG"
trap 'rm -f "$log" "$UEVREC_SKIP_LOG"' EXIT

root=false
[ "$(id -u)" = 0 ] && root=true

step "setup"
# command → Debian package
missing=()
command -v perf >/dev/null 2>&1 || missing+=(linux-perf)
[ -x /bin/busybox ] || command -v busybox >/dev/null 2>&1 || missing+=(busybox-static)
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
# tests/host/top.rs runs `uevrec top` in a real terminal: a tmux pane.
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
# tests/pure/install.rs parses the completion scripts with zsh -n and fish -n and renders
# the man pages with man -l (man-db, groff).
command -v zsh >/dev/null 2>&1 || missing+=(zsh)
command -v fish >/dev/null 2>&1 || missing+=(fish)
command -v man >/dev/null 2>&1 || missing+=(man-db)
command -v groff >/dev/null 2>&1 || missing+=(groff-base)
command -v objcopy >/dev/null 2>&1 || missing+=(binutils)
# tests/host/text.rs runs `uevrec tail` in a terminal made by util-linux `script`.
command -v script >/dev/null 2>&1 || missing+=(bsdutils)
# tests/host/container.rs builds and runs the image of contrib/container/ with podman (runc:
# crun refuses hosts whose cgroups are in hybrid mode).
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
# tests/host/stacks.rs builds its traced C programs with gcc (-g -fno-omit-frame-pointer).
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
# tests/host/stack_namespaces.rs splits and strips them (binutils, above) and runs them in a
# mount namespace of their own with util-linux `unshare`.
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
# tests/host/stack_outputs.rs opens uevrec's flame-graph SVG in headless Chromium.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# tests/host/decode.rs compares trace.dat decoding with `trace-cmd report`.
command -v trace-cmd >/dev/null 2>&1 || missing+=(trace-cmd)
if [ ${#missing[@]} -gt 0 ]; then
  if $root; then
    echo "installing: ${missing[*]}"
    # qemu-system-x86 may need bookworm-backports (see vm/apt-install.sh).
    vm/apt-install.sh "${missing[@]}"
  else
    echo "missing: ${missing[*]}; as root: apt-get install ${missing[*]}" >&2
    echo "(the tiers that need them skip, each saying why, unless UEVREC_REQUIRE_TIERS names them)" >&2
  fi
else
  echo "packages: all present"
fi
# The VM tier's OTLP test (tests/vm/otlp.rs) checks uevrec's lines with the official
# protobuf definitions: the PyPI package opentelemetry-proto (the guest sees this python3).
if ! python3 -c 'import opentelemetry.proto' 2>/dev/null; then
  echo "installing: opentelemetry-proto (PyPI, for tests/otlp/validate.py)"
  python3 -m pip install --quiet opentelemetry-proto ||
    python3 -m pip install --quiet --break-system-packages opentelemetry-proto ||
    echo "pip install opentelemetry-proto failed: tests/vm/otlp.rs will fail until it is installed" >&2
fi
# tests/pure/metrics_endpoint.rs reads /metrics with a real Prometheus text parser: the PyPI
# package prometheus-client (tests/metrics/parse.py).
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
  echo "installing: prometheus-client (PyPI, for tests/metrics/parse.py)"
  python3 -m pip install --quiet prometheus-client ||
    python3 -m pip install --quiet --break-system-packages prometheus-client ||
    echo "pip install prometheus-client failed: tests/pure/metrics_endpoint.rs will fail until it is installed" >&2
fi
if ! command -v cargo-nextest >/dev/null 2>&1; then
  echo "cargo-nextest not found: falling back to cargo test (cargo install cargo-nextest for per-test processes)"
fi
# Tier 2 tests need tracefs; mount it when we are root and it is not mounted.
if $root && [ ! -e /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi

vm_runner_ready() {
  [ "${UEVREC_VM_SKIP:-0}" = 1 ] && return 1
  [ -n "${UEVREC_VM_RUNNER:-}" ] && return 0
  [ -x ../shared/vm/run.sh ] && return 0
  [ -f vm/bzImage ] || [ -n "${UEVREC_VM_KERNEL:-}" ] ||
    [ -f "${UEVREC_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uevrec-kernel}/bzImage" ]
}
if [ -z "${UEVREC_REQUIRE_TIERS+set}" ]; then
  tiers=pure
  $root && tiers+=",host"
  vm_runner_ready && tiers+=",vm"
  [ "${UEVREC_PIPELINES:-0}" = 1 ] && tiers+=",pipelines"
  export UEVREC_REQUIRE_TIERS=$tiers
fi
echo "required tiers (UEVREC_REQUIRE_TIERS): ${UEVREC_REQUIRE_TIERS:-none}"

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

# The fuzz targets (their own workspace, parsers/fuzz) call the parsers' API: checked here
# so that a change to it cannot leave them unbuildable until the next campaign.
step "cargo fmt --check and clippy on the fuzz targets (parsers/fuzz)"
cargo fmt --manifest-path parsers/fuzz/Cargo.toml --check
cargo clippy --manifest-path parsers/fuzz/Cargo.toml --all-targets --quiet -- -D warnings

step "cargo doc (broken or private links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "doc tests"
cargo test --workspace --doc --quiet 2>&1 | tee -a "$log"

step "tests: tier 1 (pure) and tier 2 (host kernel)"
t1=$(date +%s)
# The tier-3 test binaries (`vm`: tests/vm/, and samples' register_kernel: the list is
# scripts/vm-test.sh's) run in the VM only. One binary per tier: tests/README.md.
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast --success-output never --failure-output final \
    -E 'not binary(=vm) and not binary(=register_kernel)' \
    2>&1 | tee -a "$log"
else
  # Without nextest the tier-3 tests run here too and skip (they are not required on the
  # host: the VM tier below runs them for real).
  UEVREC_REQUIRE_TIERS=$(tr ',' '\n' <<<"$UEVREC_REQUIRE_TIERS" | grep -vx 'vm\|all' | paste -sd, -) \
    cargo test --workspace --no-fail-fast 2>&1 | tee -a "$log"
fi
echo "tiers 1+2 took $(($(date +%s) - t1))s"

step "self-check: a required tier that cannot run fails"
# tracefs hidden (UEVREC_TRACEFS at an empty dir): required, the host test must fail and
# say why; not required, it must pass as a counted skip.
hidden=$(mktemp -d)
check_log=$(mktemp)
if UEVREC_TRACEFS=$hidden UEVREC_REQUIRE_TIERS=host UEVREC_SKIP_LOG=$check_log \
  cargo test --quiet --test host record::records_exec_of_a_known_path >"$check_log.out" 2>&1; then
  echo "SELF-CHECK FAILED: a required host test passed with tracefs hidden" | tee -a "$log"
  echo "test result: FAILED. 0 passed; 1 failed; 0 ignored" >>"$log"
elif ! grep -q "tier \`host\` is required" "$check_log.out"; then
  echo "SELF-CHECK FAILED: the required host test failed for another reason:" | tee -a "$log"
  tail -n 20 "$check_log.out"
  echo "test result: FAILED. 0 passed; 1 failed; 0 ignored" >>"$log"
elif ! UEVREC_TRACEFS=$hidden UEVREC_REQUIRE_TIERS=pure UEVREC_SKIP_LOG=$check_log \
  cargo test --quiet --test host record::records_exec_of_a_known_path >"$check_log.out" 2>&1 ||
  ! grep -q "SKIP \[host\] record::records_exec_of_a_known_path" "$check_log"; then
  echo "SELF-CHECK FAILED: an unrequired host test with tracefs hidden did not skip loudly" | tee -a "$log"
  tail -n 20 "$check_log.out"
  echo "test result: FAILED. 0 passed; 1 failed; 0 ignored" >>"$log"
else
  echo "ok: required → failed with the reason; not required → a logged skip"
  echo "test result: ok. 1 passed; 0 failed; 0 ignored" >>"$log"
fi
rm -rf "$hidden" "$check_log" "$check_log.out"

if [ -x scripts/vm-test.sh ]; then
  step "tests: tier 3 (real user_events kernel in a VM)"
  if ! vm_runner_ready && [[ ",$UEVREC_REQUIRE_TIERS," == *",vm,"* || ",$UEVREC_REQUIRE_TIERS," == *",all,"* ]]; then
    echo "tier vm is required and no VM runner with a kernel is ready: vm-test.sh will build one (vm/build-kernel.sh)"
  fi
  if [ "${UEVREC_VM_SKIP:-0}" = 1 ] && [[ ",$UEVREC_REQUIRE_TIERS," == *",vm,"* ]]; then
    echo "UEVREC_VM_SKIP=1 but tier vm is required" | tee -a "$log"
    echo "test result: FAILED. 0 passed; 1 failed; 0 ignored" >>"$log"
  else
    scripts/vm-test.sh 2>&1 | tee -a "$log"
  fi
fi

# Sum what the runners reported: nextest's summary and libtest's `test result:` lines;
# the tests that skipped their tier passed as far as the runners know: count them as
# skipped instead.
read -r passed failed skipped < <(awk '
  /Summary \[/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1); if ($i ~ /^skipped/) s += $(i-1) } }
  /^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;/) p += $(i-1); if ($i ~ /^failed;/) f += $(i-1); if ($i ~ /^ignored;/) s += $(i-1) } }
  END { print p+0, f+0, s+0 }' "$log")
tier_skips=$(grep -c '^SKIP ' "$UEVREC_SKIP_LOG" || true)
if [ "$tier_skips" -gt 0 ]; then
  printf '\ntests that could not run their tier here (%s):\n' "$tier_skips"
  sed 's/^/  /' "$UEVREC_SKIP_LOG"
fi
passed=$((passed - tier_skips))
skipped=$((skipped + tier_skips))
printf '\nall tiers done in %ss (required tiers: %s)\n' "$(($(date +%s) - t0))" "${UEVREC_REQUIRE_TIERS:-none}"
echo "total: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
