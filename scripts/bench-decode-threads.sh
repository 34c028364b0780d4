#!/usr/bin/env bash
# `uevrec decode --threads 1` against `--threads 2` (issue 25; BENCHMARKS.md §25).
#
#   scripts/bench-decode-threads.sh UEVREC_BINARY [ROUNDS] [OLD_BINARY] [DIR]
#
# Builds no uevrec (give a release binary); needs root (tracefs, perf_event_open) and
# gcc for scripts/bench-scale/loadgen.c, unless LOADGEN names a built one (as
# scripts/bench-scale-pack.sh packs it: `DIR/run.sh decode` runs this script). Makes a 3 M-sample perf.data and a trace.dat of
# `raw_syscalls:sys_enter` around `loadgen 1 3000000` on /dev/shm (as BENCHMARKS §21),
# checks that both thread counts write the same bytes, then decodes each file with
# `-q --threads 1` and `--threads 2` alternating, ROUNDS (default 5) times, output to
# /dev/null, and prints wall/user/sys per run, the load average before each run and the
# ratio of the medians (t1 / t2: above 1 means two threads are faster); the p.data also
# with `--threads 2 --range-size ${RANGE:-16M}` ("2r": ranges of that size; a p.data
# recorded by a build with the range index, BENCHMARKS.md §34, is cut where its index
# says in both "2" rows, one without by a pass ahead of the workers in "2r"). THREADS=N times N
# threads instead of 2 in every "2" row (the rows keep their names). With OLD_BINARY
# (another build, e.g. before a change), its `--threads 2` runs in the same rounds
# ("old2"), checked for the same bytes too. With DIR holding p.data and t.dat already
# (from an earlier run: kept there), nothing is recorded.
set -euo pipefail
TIMEFORMAT='%R %U %S'
BIN=${1:?usage: $0 UEVREC_BINARY [ROUNDS] [OLD_BINARY] [DIR]}
ROUNDS=${2:-5}
BIN=$(readlink -f "$BIN")
OLD=${3:+$(readlink -f "$3")}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${4:-}" ] && [ -f "$4/p.data" ] && [ -f "$4/t.dat" ]; then
  DIR=$4
  KEEP=1
else
  DIR=${4:-$(mktemp -d /dev/shm/bench-decode-threads.XXXXXX)}
  mkdir -p "$DIR"
  KEEP=${4:+1}
fi
[ -n "${KEEP:-}" ] || trap 'rm -rf "$DIR"' EXIT
if [ -z "${LOADGEN:-}" ]; then
  LOADGEN=$DIR/loadgen
  gcc -static -O2 -pthread "$ROOT/scripts/bench-scale/loadgen.c" -o "$LOADGEN"
fi

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
if ! [ -f "$DIR/p.data" ] || ! [ -f "$DIR/t.dat" ]; then
  record "$DIR/p.data" -m 4096 --count 3000000
  record "$DIR/t.dat" --backend ftrace --raw-format trace-dat
fi
ls -l "$DIR/p.data" "$DIR/t.dat"

for f in p.data t.dat; do
  "$BIN" decode -q --threads 1 "$DIR/$f" >"$DIR/one.out" || [ $? -eq 3 ]
  "$BIN" decode -q --threads 2 "$DIR/$f" >"$DIR/two.out" || [ $? -eq 3 ]
  cmp "$DIR/one.out" "$DIR/two.out" || { echo "$f: --threads 2 differs from --threads 1" >&2; exit 1; }
  echo "$f: $(wc -l <"$DIR/one.out") lines, --threads 1 and 2 identical"
  if [ "$f" = p.data ]; then
    "$BIN" decode --threads 2 --range-size "${RANGE:-16M}" "$DIR/$f" 2>&1 >"$DIR/two.out" | tail -1
    cmp "$DIR/one.out" "$DIR/two.out" || { echo "$f: --range-size differs from --threads 1" >&2; exit 1; }
  fi
  if [ -n "$OLD" ]; then
    "$OLD" decode -q --threads 2 "$DIR/$f" >"$DIR/two.out" || [ $? -eq 3 ]
    cmp "$DIR/one.out" "$DIR/two.out" || { echo "$f: OLD_BINARY --threads 2 differs" >&2; exit 1; }
  fi
  rm -f "$DIR/one.out" "$DIR/two.out"
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for f in p.data t.dat; do
  : >"$DIR/w1"; : >"$DIR/w2"; : >"$DIR/w2r"; : >"$DIR/wold2"
  for r in $(seq "$ROUNDS"); do
    ranges=""
    [ "$f" = p.data ] && ranges=2r
    for t in 1 2 $ranges ${OLD:+old2}; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      bin=$BIN n=$t extra=()
      [ "$t" = old2 ] && bin=$OLD n=2
      [ "$t" = 2r ] && n=2 extra=(--range-size "${RANGE:-16M}")
      [ "$n" = 2 ] && n=${THREADS:-2}
      # bash's own `time` (no /usr/bin/time needed): wall, user, sys seconds.
      { time "$bin" decode -q --threads "$n" "${extra[@]}" "$DIR/$f" >/dev/null || [ $? -eq 3 ]; } \
        2>"$DIR/time"
      read -r wall user sys < <(tail -n 1 "$DIR/time")
      echo "$wall" >>"$DIR/w$t"
      printf '%s round %d %s: wall %s s user %s s sys %s s (load %s)\n' "$f" "$r" "$t" "$wall" "$user" "$sys" "$load"
    done
  done
  m1=$(median <"$DIR/w1"); m2=$(median <"$DIR/w2")
  printf '%s: median wall --threads 1 %s s, --threads 2 %s s, ratio t1/t2 %s\n' "$f" "$m1" "$m2" \
    "$(awk -v a="$m1" -v b="$m2" 'BEGIN {printf "%.2f", a / b}')"
  if [ -s "$DIR/w2r" ]; then
    mr=$(median <"$DIR/w2r")
    printf '%s: --threads 2 --range-size %s median %s s, ratio t1/t2r %s\n' "$f" "${RANGE:-16M}" "$mr" \
      "$(awk -v a="$m1" -v b="$mr" 'BEGIN {printf "%.2f", a / b}')"
  fi
  if [ -n "$OLD" ]; then
    mo=$(median <"$DIR/wold2")
    printf '%s: OLD_BINARY --threads 2 median %s s, ratio t1/old2 %s\n' "$f" "$mo" \
      "$(awk -v a="$m1" -v b="$mo" 'BEGIN {printf "%.2f", a / b}')"
  fi
done
