#!/usr/bin/env bash
# What a recorder costs the traced program when it runs on another CPU (issue 25,
# BENCHMARKS.md §37): a getppid loop (scripts/bench-scale/loadgen.c, one thread x CALLS)
# pinned to CPU 1, `raw_syscalls:sys_enter` recorded system-wide with `-m 1024` by a
# recorder pinned to CPU 0 (every thread of it), output on /dev/shm; per round the loop
# alone, then under perf record, uevrec `--raw` (a perf.data, as perf record writes),
# uevrec JSON lines (perf backend) and uevrec `--backend ftrace` JSON lines. Prints the
# loop's rate under each and what each recorder said of losses (perf record's "lost"
# warning, uevrec's summary).
#
#   UEVREC=path [LOADGEN=path] scripts/bench-pinned.sh [ROUNDS (3)] [CALLS (2000000)]
#
# Needs root, two CPUs or more, taskset and perf; gcc unless LOADGEN names a built one.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${1:-3}
CALLS=${2:-2000000}
U=${UEVREC:?set UEVREC=path/to/uevrec}
T=$(mktemp -d /dev/shm/bench-pinned.XXXXXX)
trap 'rm -rf "$T"' EXIT
if [ -z "${LOADGEN:-}" ]; then
  LOADGEN=$T/loadgen
  gcc -static -O2 -pthread "$ROOT/scripts/bench-scale/loadgen.c" -o "$LOADGEN" || exit 1
fi
echo "# bench-pinned: $(uname -r), $(nproc) CPUs, loop on CPU 1, recorder on CPU 0, $CALLS calls"
for r in $(seq "$ROUNDS"); do
  echo "round $r: untraced $(taskset -c 1 "$LOADGEN" 1 "$CALLS" 2>&1 | tail -1)"
  for rec in perf raw json ftrace; do
    rm -f "$T"/*.data "$T"/*.json "$T"/err
    case $rec in
      perf) taskset -c 0 perf record -q -a -m 1024 -e raw_syscalls:sys_enter -o "$T/p.data" 2>"$T/err" & ;;
      raw) taskset -c 0 "$U" record -m 1024 -e raw_syscalls:sys_enter --raw "$T/u.data" 2>"$T/err" & ;;
      json) taskset -c 0 "$U" record -m 1024 -e raw_syscalls:sys_enter -o "$T/u.json" 2>"$T/err" & ;;
      ftrace) taskset -c 0 "$U" record -m 1024 --backend ftrace -e raw_syscalls:sys_enter -o "$T/f.json" 2>"$T/err" & ;;
    esac
    pid=$!
    sleep 1.5
    out=$(taskset -c 1 "$LOADGEN" 1 "$CALLS" 2>&1 | tail -1)
    kill -INT "$pid"
    wait "$pid"
    echo "round $r: $rec $out | $(grep -i -E 'lost|chunks' "$T/err" | tail -1 | cut -c1-150)"
  done
done
