#!/bin/sh
# Run one fuzz target for a bounded time, niced, on stable Rust (see docs/fuzzing.md):
#   parsers/fuzz/run.sh TARGET [SECONDS [MAX_RUNS]]
# Log: parsers/fuzz/logs/TARGET.log (final stats at the end); crashes land in
# parsers/fuzz/artifacts/TARGET/.
set -eu
target=$1
seconds=${2:-1800}
runs=${3:-10000000}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
mkdir -p "$here/logs" "$here/corpus/$target"
dict=
if [ -f "$here/dict/$target.dict" ]; then
    dict="-dict=$here/dict/$target.dict"
fi
# RUSTC_BOOTSTRAP=1 lets the stable toolchain accept the -Z flags cargo-fuzz passes.
# No sanitizer: the parsers are #![forbid(unsafe_code)], so panics (with overflow checks
# and debug assertions on, as cargo-fuzz builds by default) are what there is to find,
# and ASan would halve the executions per second.
RUSTC_BOOTSTRAP=1 exec nice -n 10 cargo fuzz run --sanitizer none "$target" -- \
    -max_total_time="$seconds" -runs="$runs" -print_final_stats=1 $dict \
    >"$here/logs/$target.log" 2>&1
