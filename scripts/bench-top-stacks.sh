#!/usr/bin/env bash
# `top -g` against `record -g -o /dev/null` on the same load (issue 38, BENCHMARKS.md
# "Issue 38: top with call stacks"): recorder CPU per record, side by side in one run.
#
#   scripts/bench-top-stacks.sh [--runs N] [--calls N] [--dwarf]
#
# The load: the C chain of scripts/lib/stack-bench.sh (frame pointers) calling main → outer →
# middle → inner → syscall(SYS_setpgid, 424242, SEQ) N times flat out. Rows, each attached
# to raw_syscalls:sys_enter with the filter `id == 109` (given 2 s to attach):
#   record      `uevrec record -o /dev/null` (no stacks)
#   record-g    `uevrec record -g -o /dev/null` (each stack named into its JSON line)
#   top         `uevrec top --plain` (counting only)
#   top-g       `uevrec top -g --plain` (each stack named as a call path and counted)
# --dwarf: `--call-graph dwarf -m 4M` in place of -g (record-dwarf, top-dwarf).
# Measured per run: the program's calls/s, the records counted (record's summary line;
# top's final totals line), the losses, the recorder's CPU (user+sys, wait4's rusage) and
# µs of it per record. Needs: root, gcc, python3. Builds the release binary.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=3
CALLS=200000
G=(-g)
SUFFIX=g
while [ $# -gt 0 ]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --calls) CALLS=$2; shift 2 ;;
    --dwarf) G=(--call-graph dwarf -m 4M); SUFFIX=dwarf; shift ;;
    *) echo "usage: $0 [--runs N] [--calls N] [--dwarf]" >&2; exit 2 ;;
  esac
done
if [ -z "${UEVREC:-}" ]; then
  cargo build --release --bin uevrec --manifest-path "$ROOT/Cargo.toml" >&2
  UEVREC=$ROOT/target/release/uevrec
fi
WORK=$(mktemp -d /dev/shm/bench-top-stacks.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=scripts/lib/stack-bench.sh
. "$ROOT/scripts/lib/stack-bench.sh"
build_chain "$WORK" 109
EVENT=(-e raw_syscalls:sys_enter --filter "id == 109")

# one NAME: a run of row NAME; prints "rate records lost cpu_s".
one() {
  local name=$1 out=$WORK/$1.out err=$WORK/$1.err
  rm -f "$out" "$err" "$WORK/m" "$WORK/m.pid"
  case $name in
    record) measure "$WORK/m" "$UEVREC" record "${EVENT[@]}" -o /dev/null 2> "$err" & ;;
    record-*) measure "$WORK/m" "$UEVREC" record "${G[@]}" "${EVENT[@]}" -o /dev/null 2> "$err" & ;;
    top) measure "$WORK/m" "$UEVREC" top --plain "${EVENT[@]}" > "$out" 2> "$err" & ;;
    top-*) measure "$WORK/m" "$UEVREC" top --plain "${G[@]}" "${EVENT[@]}" > "$out" 2> "$err" & ;;
  esac
  while [ ! -s "$WORK/m.pid" ]; do sleep 0.05; done
  local pid; pid=$(cat "$WORK/m.pid")
  sleep 2
  local rate; rate=$("$WORK/chain" "$CALLS")
  sleep 1.5
  kill -INT "$pid"
  while [ ! -s "$WORK/m" ]; do sleep 0.05; done
  local cpu; cpu=$(awk '{print $1 + $2}' "$WORK/m")
  local records lost
  case $name in
    record*)
      records=$(sed -n 's/^uevrec: \([0-9]*\) records, \([0-9]*\) lost.*/\1/p' "$err")
      lost=$(sed -n 's/^uevrec: \([0-9]*\) records, \([0-9]*\) lost.*/\2/p' "$err") ;;
    top*)
      read -r records lost < <(python3 -c '
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if "\"top_total\"" in l][-1]
print(last["records"], last["lost"])' "$out") ;;
  esac
  echo "$rate ${records:-0} ${lost:-0} $cpu"
}

echo "# $CALLS calls a run, setpgid, $UEVREC" >&2
printf '%-13s %3s %10s %9s %7s %7s %10s\n' row run calls/s records lost cpu_s us/record
for run in $(seq "$RUNS"); do
  for name in record "record-$SUFFIX" top "top-$SUFFIX"; do
    read -r rate records lost cpu < <(one "$name")
    per=$(awk -v c="$cpu" -v r="$records" 'BEGIN { if (r > 0) printf "%.3f", c * 1e6 / r; else print "n/a" }')
    printf '%-13s %3s %10s %9s %7s %7.3f %10s\n' "$name" "$run" "$rate" "$records" "$lost" "$cpu" "$per"
  done
done
