#!/usr/bin/env bash
# Call stacks (issue 38): recorder CPU per record with -g against perf record -g, on the
# same load, side by side in one run. Prints one table (BENCHMARKS.md, "Issue 38").
#
#   scripts/bench-stacks.sh [--runs N] [--calls N] [--dwarf | --ftrace]
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
# The load: a C program built here (-O1 -g -fno-omit-frame-pointer) calling
# main → outer → middle → inner → syscall(SYS_getppid, 424242, SEQ) N times flat out.
# Recorders, each attached to raw_syscalls:sys_enter with the filter `id == 110`:
#   uevrec            `uevrec record -q -o /dev/shm/F` (no stacks: the baseline)
#   uevrec-g          the same with -g (stacks symbolized while recording)
#   uevrec-g-nosym    the same with -g --no-symbolize (addresses, module, file offset)
#   perf-g            `perf record -g -a -o /dev/shm/F` (addresses only while recording)
#   perf-g+script     perf-g plus `perf script` of its file (perf's names, afterwards)
# Measured per run: the program's calls/s, records the recorder wrote, recorder CPU
# (user+sys from wait4's rusage) and µs of it per record; perf script's CPU for the last
# row. Needs: root, gcc, perf, python3, tmpfs at /dev/shm. Builds the release binary.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=3
CALLS=200000
NAMES="uevrec uevrec-g uevrec-g-nosym perf-g"
NR=110
while [ $# -gt 0 ]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --calls) CALLS=$2; shift 2 ;;
    --dwarf) NAMES="uevrec uevrec-dwarf uevrec-dwarf-nosym perf-dwarf"; NR=109; shift ;;
    --ftrace) NAMES="uevrec-ftrace uevrec-ftrace-g uevrec-g perf-g"; NR=109; shift ;;
    *) echo "usage: $0 [--runs N] [--calls N] [--dwarf | --ftrace]" >&2; exit 2 ;;
  esac
done

cargo build --release --bin uevrec --manifest-path "$ROOT/Cargo.toml" >&2
UEVREC=$ROOT/target/release/uevrec
WORK=$(mktemp -d /dev/shm/bench-stacks.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

cat > "$WORK/chain.c" <<'C'
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
__attribute__((noinline)) long inner(long seq) { return syscall(NR, 424242L, seq); }
__attribute__((noinline)) long middle(long seq) { long r = inner(seq); __asm__ volatile("" ::: "memory"); return r; }
__attribute__((noinline)) long outer(long seq) { long r = middle(seq); __asm__ volatile("" ::: "memory"); return r; }
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) outer(i);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.0f\n", n / ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9));
    return 0;
}
C
gcc -O1 -g -fno-omit-frame-pointer -DNR="$NR" -o "$WORK/chain" "$WORK/chain.c"

# measure OUT CMD...: run CMD as a child; its pid in OUT.pid at once; after it exits,
# "user sys" seconds (wait4's rusage) in OUT.
measure() {
  local out=$1; shift
  python3 - "$out" "$@" <<'PY'
import os, sys
out, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.execvp(argv[0], argv)
open(out + ".pid", "w").write(str(pid))
_, status, ru = os.wait4(pid, 0)
open(out, "w").write(f"{ru.ru_utime} {ru.ru_stime}\n")
PY
}

# one NAME: a run of recorder NAME; prints "rate records cpu_s extra_cpu_s".
one() {
  local name=$1 f=$WORK/$1.out
  rm -f "$f" "$WORK/m" "$WORK/m.pid"
  case $name in
    uevrec) measure "$WORK/m" "$UEVREC" record -q -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-g) measure "$WORK/m" "$UEVREC" record -q -g -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-ftrace) measure "$WORK/m" "$UEVREC" record -q --backend ftrace -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-ftrace-g) measure "$WORK/m" "$UEVREC" record -q --backend ftrace -g -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-g-nosym) measure "$WORK/m" "$UEVREC" record -q -g --no-symbolize -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    perf-g) measure "$WORK/m" perf record -q -g -a -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-dwarf) measure "$WORK/m" "$UEVREC" record -q --call-graph dwarf -m 4M -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    uevrec-dwarf-nosym) measure "$WORK/m" "$UEVREC" record -q --call-graph dwarf -m 4M --no-symbolize -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
    perf-dwarf) measure "$WORK/m" perf record -q --call-graph dwarf -m 4M -a -e raw_syscalls:sys_enter --filter "id == $NR" -o "$f" & ;;
  esac
  while [ ! -s "$WORK/m.pid" ]; do sleep 0.05; done
  local pid; pid=$(cat "$WORK/m.pid")
  # Attached: uevrec says so in its output; perf gets two seconds.
  if [ "${name#uevrec}" != "$name" ]; then
    for _ in $(seq 200); do grep -q '"attached"' "$f" 2>/dev/null && break; sleep 0.05; done
  else
    sleep 2
  fi
  local rate; rate=$("$WORK/chain" "$CALLS")
  sleep 0.5
  kill -INT "$pid"
  while [ ! -s "$WORK/m" ]; do sleep 0.05; done
  local cpu; cpu=$(awk '{print $1 + $2}' "$WORK/m")
  local records extra=0
  if [ "${name#perf}" != "$name" ]; then
    local t0 t1
    records=$( { /usr/bin/time -f '%U %S' -o "$WORK/t" perf script -i "$f" -F event 2>/dev/null || true; } | grep -c sys_enter || true)
    extra=$( { /usr/bin/time -f '%U %S' -o "$WORK/t" perf script -i "$f" > /dev/null 2>&1 || true; }; awk '{print $1 + $2}' "$WORK/t")
  else
    records=$(grep -c '"args":\[424242,' "$f" || true)
  fi
  echo "$rate $records $cpu $extra"
}

printf '%-16s %3s %12s %9s %9s %10s %12s\n' recorder run calls/s records cpu_s us/record script_cpu_s
for run in $(seq "$RUNS"); do
  for name in $NAMES; do
    read -r rate records cpu extra < <(one "$name")
    per=$(awk -v c="$cpu" -v r="$records" 'BEGIN { if (r > 0) printf "%.3f", c * 1e6 / r; else print "n/a" }')
    printf '%-16s %3s %12s %9s %9.3f %10s %12s\n' "$name" "$run" "$rate" "$records" "$cpu" "$per" "$extra"
  done
done
