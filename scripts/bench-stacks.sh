#!/usr/bin/env bash
# Call stacks (issue 38): recorder CPU per record with -g against perf record -g, on the
# same load, side by side in one run. Prints one table (BENCHMARKS.md, "Issue 38").
#
#   scripts/bench-stacks.sh [--runs N] [--calls N] [--dwarf | --ftrace] [--rate N [--seconds T]]
#                           [--recorders 'NAME …']
#
# --rate N: the program makes N calls a second for T seconds (default 10; --calls is then
# N × T) instead of flat out: the recorders' steady cost and loss, not a burst's
# (BENCHMARKS.md, "Issue 38: stack output speed, steady-rate dwarf"). --recorders: the rows
# to run (names below), in order.
#
# --dwarf: `--call-graph dwarf` (8 KiB of user stack per record) against perf's, both with
# 4 MiB rings per CPU (-m 4M), instead of the -g rows:
#   uevrec-dwarf        `uevrec record -q --call-graph dwarf -m 4M` (unwound and named while
#                       recording)
#   uevrec-dwarf-nosym  the same with --no-symbolize (unwound, not named)
#   perf-dwarf          `perf record -q --call-graph dwarf -m 4M -a` (copies only)
#   perf-dwarf+script   perf-dwarf plus `perf script` (perf unwinds and names afterwards)
# --ftrace: the ftrace backend's stacks (its instance's kernel_stack and user_stack
# records) against its own baseline and the perf backend's -g, instead of the -g rows:
#   uevrec-ftrace       `uevrec record -q --backend ftrace` (no stacks)
#   uevrec-ftrace-g     the same with -g
#   uevrec-g, perf-g    as below
# The load then calls setpgid (id 109: ESRCH) instead of getppid, which other programs on a
# shared machine also call with 424242.
#
# The load: the C chain of scripts/lib/stack-bench.sh (-O1 -g -fno-omit-frame-pointer) calling
# main → outer → middle → inner → syscall(SYS_getppid, 424242, SEQ) N times flat out.
# Recorders, each attached to raw_syscalls:sys_enter with the filter `id == 110`:
#   uevrec            `uevrec record -q -o /dev/shm/F` (no stacks: the baseline)
#   uevrec-g          the same with -g (stacks symbolized while recording)
#   uevrec-g-nosym    the same with -g --no-symbolize (addresses, module, file offset)
#   uevrec-g-ids      the same with -g --stack-ids (each distinct stack on a line of its
#                     own, records naming it by id: BENCHMARKS.md, "stack lines with ids")
#   uevrec-g-ids-nosym  -g --stack-ids --no-symbolize
#   uevrec-raw, perf  `uevrec record -q --raw /dev/shm/F`, `perf record -a -o /dev/shm/F`:
#                     perf.data files without stacks (the ratio the stacks are held to)
#   uevrec-g-raw      `uevrec record -q -g --raw /dev/shm/F` (a perf.data: callchains copied,
#                     named afterwards by `uevrec decode` or perf script, as perf's)
#   perf-g            `perf record -g -a -o /dev/shm/F` (addresses only while recording)
#   perf-g+script     perf-g plus `perf script` of its file (perf's names, afterwards)
# Measured per run: the program's calls/s, records the recorder wrote, recorder CPU
# (user+sys from wait4's rusage) and µs of it per record, the output file's bytes per
# record (all its lines, or the whole perf.data, over the records); for a perf.data, the
# CPU that names it afterwards (script_cpu_s: perf script of perf's, uevrec decode of
# uevrec's). Needs: root, gcc, perf, python3, tmpfs at /dev/shm. Builds the release binary.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=3
CALLS=200000
NAMES="uevrec uevrec-g uevrec-g-nosym perf-g"
NR=110
RATE=""
SECONDS_AT_RATE=10
while [ $# -gt 0 ]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --calls) CALLS=$2; shift 2 ;;
    --dwarf) NAMES="uevrec uevrec-dwarf uevrec-dwarf-nosym perf-dwarf"; NR=109; shift ;;
    --ftrace) NAMES="uevrec-ftrace uevrec-ftrace-g uevrec-g perf-g"; NR=109; shift ;;
    --rate) RATE=$2; shift 2 ;;
    --seconds) SECONDS_AT_RATE=$2; shift 2 ;;
    --recorders) NAMES=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--calls N] [--dwarf | --ftrace] [--rate N [--seconds T]] [--recorders 'NAME …']" >&2; exit 2 ;;
  esac
done
# A steady rate: RATE calls a second for SECONDS_AT_RATE seconds.
[ -z "$RATE" ] || CALLS=$((RATE * SECONDS_AT_RATE))
# Any dwarf row: setpgid for all (see --dwarf).
case " $NAMES " in *dwarf*) NR=109 ;; esac

# UEVREC names another binary; by default the release one is built.
if [ -z "${UEVREC:-}" ]; then
  cargo build --release --bin uevrec --manifest-path "$ROOT/Cargo.toml" >&2
  UEVREC=$ROOT/target/release/uevrec
fi
WORK=$(mktemp -d /dev/shm/bench-stacks.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=scripts/lib/stack-bench.sh
. "$ROOT/scripts/lib/stack-bench.sh"
build_chain "$WORK" "$NR"

# one NAME: a run of recorder NAME; prints "rate records cpu_s extra_cpu_s".
one() {
  local name=$1 f=$WORK/$1.out
  rm -f "$f" "$WORK/m" "$WORK/m.pid"
  case $name in
    uevrec) measure "$WORK/m" "$UEVREC" record -q -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-g) measure "$WORK/m" "$UEVREC" record -q -g -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-ftrace) measure "$WORK/m" "$UEVREC" record -q --backend ftrace -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-ftrace-g) measure "$WORK/m" "$UEVREC" record -q --backend ftrace -g -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-g-ids) measure "$WORK/m" "$UEVREC" record -q -g --stack-ids -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-g-ids-nosym) measure "$WORK/m" "$UEVREC" record -q -g --stack-ids --no-symbolize -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-g-nosym) measure "$WORK/m" "$UEVREC" record -q -g --no-symbolize -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-raw) measure "$WORK/m" "$UEVREC" record -q --raw "$f" -e raw_syscalls:sys_enter --filter "id == $NR" & ;;
    perf) measure "$WORK/m" perf record -q -a -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-g-raw) measure "$WORK/m" "$UEVREC" record -q -g --raw "$f" -e raw_syscalls:sys_enter --filter "id == $NR" & ;;
    perf-g) measure "$WORK/m" perf record -q -g -a -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-dwarf) measure "$WORK/m" "$UEVREC" record -q --call-graph dwarf -m 4M -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-dwarf-nosym) measure "$WORK/m" "$UEVREC" record -q --call-graph dwarf -m 4M --no-symbolize -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    perf-dwarf) measure "$WORK/m" perf record -q --call-graph dwarf -m 4M -a -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
  esac
  while [ ! -s "$WORK/m.pid" ]; do sleep 0.05; done
  local pid; pid=$(cat "$WORK/m.pid")
  # A perf.data (perf's, or uevrec's --raw): its records counted by perf script.
  local binary=""
  case $name in perf*|*-raw) binary=1 ;; esac
  # Attached: uevrec's JSON lines say so; a perf.data's recorder gets two seconds.
  if [ -z "$binary" ]; then
    for _ in $(seq 200); do grep -q '"attached"' "$f" 2>/dev/null && break; sleep 0.05; done
  else
    sleep 2
  fi
  local rate; rate=$("$WORK/chain" "$CALLS" $RATE)
  sleep 0.5
  kill -INT "$pid"
  while [ ! -s "$WORK/m" ]; do sleep 0.05; done
  local cpu; cpu=$(awk '{print $1 + $2}' "$WORK/m")
  local records extra=0
  if [ -n "$binary" ]; then
    local t0 t1
    records=$( { /usr/bin/time -f '%U %S' -o "$WORK/t" perf script -i "$f" -F event 2>/dev/null || true; } | grep -c sys_enter || true)
    # Naming afterwards: perf script for perf's file, uevrec decode for uevrec's.
    case $name in
      *-raw) { /usr/bin/time -f '%U %S' -o "$WORK/t" "$UEVREC" decode "$f" > /dev/null 2>&1 || true; } ;;
      *) { /usr/bin/time -f '%U %S' -o "$WORK/t" perf script -i "$f" > /dev/null 2>&1 || true; } ;;
    esac
    extra=$(awk '{print $1 + $2}' "$WORK/t")
  else
    records=$(grep -c '"args":\[424242,' "$f" || true)
  fi
  echo "$rate $records $cpu $extra $(stat -c %s "$f")"
}

echo "# $CALLS calls a run${RATE:+ at $RATE calls/s}, syscall $NR, $UEVREC" >&2
printf '%-18s %3s %12s %9s %7s %9s %10s %12s %12s\n' recorder run calls/s records lost% cpu_s us/record script_cpu_s bytes/record
for run in $(seq "$RUNS"); do
  for name in $NAMES; do
    read -r rate records cpu extra bytes < <(one "$name")
    per=$(awk -v c="$cpu" -v r="$records" 'BEGIN { if (r > 0) printf "%.3f", c * 1e6 / r; else print "n/a" }')
    lost=$(awk -v c="$CALLS" -v r="$records" 'BEGIN { l = (c - r) * 100 / c; printf "%.1f", l < 0 ? 0 : l }')
    size=$(awk -v b="$bytes" -v r="$records" 'BEGIN { if (r > 0) printf "%.0f", b / r; else print "n/a" }')
    printf '%-18s %3s %12s %9s %7s %9.3f %10s %12s %12s\n' "$name" "$run" "$rate" "$records" "$lost" "$cpu" "$per" "$extra" "$size"
  done
done
