#!/usr/bin/env bash
# CPU time of `uevrec record -g --raw` (no JSON lines: the raw thread writes the
# perf.data) on one load, for each uevrec binary given, runs interleaved (issue 38;
# BENCHMARKS.md, "Issue 38: build ids in perf.data"). As root, on a kernel with
# raw_syscalls:
#
#   scripts/bench-raw-stacks-cpu.sh CALLS RUNS UEVREC…
#
# Each run records CALLS setpgid calls of the C chain of scripts/lib/stack-bench.sh
# (frame pointers) on raw_syscalls:sys_enter, and prints per binary: uevrec's user and
# system CPU seconds (its whole life: attach, the load, the file's finish; wait4's
# rusage), the chain's calls/s and the file's size.
set -euo pipefail
. "$(dirname "$0")/lib/stack-bench.sh"

CALLS=${1:-200000}
RUNS=${2:-3}
shift 2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
NR_SETPGID=109
build_chain "$DIR" "$NR_SETPGID"

for run in $(seq 1 "$RUNS"); do
    for uevrec in "$@"; do
        rm -f "$DIR/rec.data" "$DIR/cpu" "$DIR/cpu.pid"
        measure "$DIR/cpu" "$uevrec" record --quiet -g -m 4M -e raw_syscalls:sys_enter \
            --filter "id == $NR_SETPGID" --raw "$DIR/rec.data" &
        waiter=$!
        sleep 2
        rate=$("$DIR/chain" "$CALLS")
        sleep 1
        kill -INT "$(cat "$DIR/cpu.pid")"
        wait "$waiter"
        read -r user sys <"$DIR/cpu"
        size=$(stat -c %s "$DIR/rec.data")
        printf 'run %d %-40s user %6.2f s sys %6.2f s %9.0f calls/s %11d bytes\n' \
            "$run" "$uevrec" "$user" "$sys" "$rate" "$size"
    done
done
