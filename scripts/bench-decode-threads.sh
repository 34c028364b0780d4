#!/usr/bin/env bash
# `uevrec decode --threads 1` against `--threads 2` (issue 25; BENCHMARKS.md §25).
#
#   scripts/bench-decode-threads.sh UEVREC_BINARY [ROUNDS]
#
# Builds no uevrec (give a release binary); needs root (tracefs, perf_event_open) and
# gcc for scripts/bench-scale/loadgen.c. Makes a 3 M-sample perf.data and a trace.dat of
# `raw_syscalls:sys_enter` around `loadgen 1 3000000` on /dev/shm (as BENCHMARKS §21),
# checks that both thread counts write the same bytes, then decodes each file with
# `-q --threads 1` and `--threads 2` alternating, ROUNDS (default 5) times, output to
# /dev/null, and prints wall/user/sys per run, the load average before each run and the
# ratio of the medians (t1 / t2: above 1 means two threads are faster).
set -euo pipefail
BIN=${1:?usage: $0 UEVREC_BINARY [ROUNDS]}
ROUNDS=${2:-5}
BIN=$(readlink -f "$BIN")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$(mktemp -d /dev/shm/bench-decode-threads.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
LOADGEN=$DIR/loadgen
gcc -static -O2 -pthread "$ROOT/scripts/bench-scale/loadgen.c" -o "$LOADGEN"

record() { # OUT ARGS... : record around one loadgen run
  local out=$1; shift
  "$BIN" record -q "$@" -e raw_syscalls:sys_enter --raw "$out" &
  local rec=$!
  sleep 1.5
  "$LOADGEN" 1 3000000 >/dev/null
  sleep 0.5
  kill -INT "$rec" 2>/dev/null || true
  wait "$rec" || true
}
record "$DIR/p.data" -m 4096 --count 3000000
record "$DIR/t.dat" --backend ftrace --raw-format trace-dat
ls -l "$DIR/p.data" "$DIR/t.dat"

for f in p.data t.dat; do
  "$BIN" decode -q --threads 1 "$DIR/$f" >"$DIR/one.out" || [ $? -eq 3 ]
  "$BIN" decode -q --threads 2 "$DIR/$f" >"$DIR/two.out" || [ $? -eq 3 ]
  cmp "$DIR/one.out" "$DIR/two.out" || { echo "$f: --threads 2 differs from --threads 1" >&2; exit 1; }
  echo "$f: $(wc -l <"$DIR/one.out") lines, --threads 1 and 2 identical"
  rm -f "$DIR/one.out" "$DIR/two.out"
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for f in p.data t.dat; do
  : >"$DIR/w1"; : >"$DIR/w2"
  for r in $(seq "$ROUNDS"); do
    for t in 1 2; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      /usr/bin/time -f '%e %U %S' -o "$DIR/time" "$BIN" decode -q --threads "$t" "$DIR/$f" >/dev/null || [ $? -eq 3 ]
      read -r wall user sys <"$DIR/time"
      echo "$wall" >>"$DIR/w$t"
      printf '%s round %d --threads %d: wall %s s user %s s sys %s s (load %s)\n' "$f" "$r" "$t" "$wall" "$user" "$sys" "$load"
    done
  done
  m1=$(median <"$DIR/w1"); m2=$(median <"$DIR/w2")
  printf '%s: median wall --threads 1 %s s, --threads 2 %s s, ratio t1/t2 %s\n' "$f" "$m1" "$m2" \
    "$(awk -v a="$m1" -v b="$m2" 'BEGIN {printf "%.2f", a / b}')"
done
