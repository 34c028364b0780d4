#!/usr/bin/env bash
# Memory of `uevrec record -g` while many short-lived processes come and go (issue 38):
# each process a fresh exec of a small C chain (main → outer → middle → inner →
# syscall(SYS_sysfs, MAGIC, SEQ), CALLS calls, 10 ms asleep, then exit: long enough for
# uevrec to see most of them alive), one after the other. sysfs(2) (obsolete: EINVAL) and
# not setpgid: the host tests and other benchmarks call setpgid, and the recorder would
# record and name their calls too.
# Prints one table row per run (BENCHMARKS.md, "Issue 38: stacks in containers, debug
# files, 1,000 processes").
#
#   scripts/bench-stacks-processes.sh [--runs N] [--calls N] [--procs "10 1000"]
#                                     [--modes "fp fp-ns dwarf dwarf-ns"]
#
# Per run: the recorder's peak resident memory (VmHWM of /proc/PID/status, read just
# before it is stopped), its descriptors then (/proc/PID/fd), its CPU (user+sys,
# /proc/PID/stat), the records written and how many of them name `middle` (every one
# should). Rows, each for every process count:
#   fp          `uevrec record -g`, the processes in uevrec's mount namespace
#   fp-ns       the same, each process in a mount namespace of its own (`unshare -m`): its
#               files are opened through /proc/PID/root and held (one per distinct file)
#               when uevrec sees the process alive, else checked by build id here
#   dwarf       `--call-graph dwarf -m 4M`, uevrec's namespace
#   dwarf-ns    `--call-graph dwarf -m 4M`, a namespace each
# Needs: root, gcc, unshare (util-linux), python3, bc. Builds the release binary (or takes
# the one UEVREC_BIN names).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=2
CALLS=5
PROCS="10 1000"
MODES="fp fp-ns dwarf dwarf-ns"
while [ $# -gt 0 ]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --calls) CALLS=$2; shift 2 ;;
    --procs) PROCS=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--calls N] [--procs \"10 1000\"] [--modes \"fp dwarf\"]" >&2; exit 2 ;;
  esac
done

if [ -n "${UEVREC_BIN:-}" ]; then
  UEVREC=$UEVREC_BIN
else
  cargo build --release --bin uevrec --manifest-path "$ROOT/Cargo.toml" >&2
  UEVREC=$ROOT/target/release/uevrec
fi
WORK=$(mktemp -d /tmp/bench-stacks-procs.XXXXXX)
REC=
trap '[ -n "$REC" ] && kill -INT "$REC" 2>/dev/null; rm -rf "$WORK"' EXIT

cat > "$WORK/chain.c" <<'C'
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
__attribute__((noinline)) long inner(long m, long s) { return syscall(SYS_sysfs, m, s); }
__attribute__((noinline)) long middle(long m, long s) { long r = inner(m, s); __asm__ volatile("" ::: "memory"); return r; }
__attribute__((noinline)) long outer(long m, long s) { long r = middle(m, s); __asm__ volatile("" ::: "memory"); return r; }
int main(int argc, char **argv) {
    long m = atol(argv[1]), n = atol(argv[2]);
    for (long s = 0; s < n; s++) outer(m, s);
    usleep(10000);
    return 0;
}
C
gcc -O1 -g -fno-omit-frame-pointer -o "$WORK/chain" "$WORK/chain.c"

# status PID KEY: the value of KEY in /proc/PID/status (kB).
status() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
# cpu PID: user+sys seconds of PID so far.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
# count OUT MAGIC [WORD]: records of MAGIC in OUT (holding WORD).
count() {
  python3 - "$@" <<'PY'
import json, sys
out, magic = sys.argv[1], int(sys.argv[2])
word = sys.argv[3] if len(sys.argv) > 3 else None
n = 0
for line in open(out):
    try:
        v = json.loads(line)
    except ValueError:
        continue
    if v.get("fields", {}).get("args", [None])[0] != magic:
        continue
    if word is None or word in line:
        n += 1
print(n)
PY
}

echo "| mode | processes | run | records | naming middle | VmHWM MiB | VmRSS MiB | fds | cpu s | wall s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
NR_SYSFS=$(printf '#include <sys/syscall.h>\nSYS_sysfs\n' | gcc -E -P - | tail -1)
# Calls of this run only: another run at once (or a test) uses other values.
MAGIC=$((4240000000 + $(date +%s) % 1000000 * 100))
for run in $(seq 1 "$RUNS"); do
  for mode in $MODES; do
    for procs in $PROCS; do
      MAGIC=$((MAGIC + 1))
      case $mode in
        fp*) flags=(-g) ;;
        dwarf*) flags=(--call-graph dwarf -m 4M) ;;
      esac
      case $mode in
        *-ns) wrap=(unshare -m --propagation private) ;;
        *) wrap=() ;;
      esac
      out=$WORK/out.jsonl
      rm -f "$out"
      "$UEVREC" record --quiet "${flags[@]}" -e raw_syscalls:sys_enter \
        --filter "id == $NR_SYSFS" -o "$out" &
      REC=$!
      for _ in $(seq 1 600); do
        grep -q '"attached"' "$out" 2>/dev/null && break
        sleep 0.1
      done
      start=$(date +%s.%N)
      for _ in $(seq 1 "$procs"); do
        "${wrap[@]}" "$WORK/chain" "$MAGIC" "$CALLS"
      done
      want=$((procs * CALLS))
      for _ in $(seq 1 1200); do
        [ "$(grep -c "\"args\":\[$MAGIC," "$out" 2>/dev/null || true)" -ge "$want" ] && break
        sleep 0.1
      done
      wall=$(echo "$(date +%s.%N) - $start" | bc)
      hwm=$(status "$REC" VmHWM)
      rss=$(status "$REC" VmRSS)
      fds=$(ls "/proc/$REC/fd" | wc -l)
      used=$(cpu "$REC")
      kill -INT "$REC"
      wait "$REC" || true
      REC=
      printf '| %s | %s | %s | %s | %s | %.1f | %.1f | %s | %s | %.1f |\n' "$mode" "$procs" "$run" \
        "$(count "$out" "$MAGIC")" "$(count "$out" "$MAGIC" '"symbol":"middle"')" \
        "$(echo "$hwm / 1024" | bc -l)" "$(echo "$rss / 1024" | bc -l)" "$fds" "$used" "$wall"
    done
  done
done
