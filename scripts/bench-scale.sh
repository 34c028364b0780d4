#!/usr/bin/env bash
# Issue 25's table on any machine with N CPUs: a load generator on T threads x CALLS
# getppid(424242, SEQ) calls (T = 1, 2, 4, … up to N-1), `raw_syscalls:sys_enter` recorded
# system-wide with `-m PAGES` rings, output on tmpfs, each recorder alone on the same load:
#   untraced      the generator alone (its rate)
#   perf          `perf record -a -m PAGES -e raw_syscalls:sys_enter -o TMPFS/perf.data`
#   old-perf/old-ftrace   UEVREC_OLD (a build before the change), JSON lines to a tmpfs file,
#                 perf backend / `--backend ftrace` (left out without UEVREC_OLD)
#   new-perf/new-ftrace   UEVREC the same (with UEVREC_ARGS, e.g. "--threads 8")
# Per run: the traced generator's rate (calls/s), records written, records lost (uevrec:
# its summary; perf record: the chunks its "lost N chunks" warning counts), and the
# recorder's rate (records written / the generator's seconds); for uevrec, what each of its
# threads did over the load (CPU, time waiting for a CPU, context switches: where the
# bound is). Then the table.
#
#   UEVREC=path [UEVREC_OLD=path] [PERF=path [PERF_LIBS=dir]] [LOADGEN=path] \
#     scripts/bench-scale.sh [--threads "1 2 4 8 15"] [--calls 1000000] [--pages 1024] \
#     [--tmp /dev/shm] [--log FILE] [--drain-threads N]
#
# --drain-threads N is passed to every uevrec (old and new; left out: each one's default,
# CPUs / 4), so the 16-CPU table can be rerun with 1 and with N persistent drain threads.
#
# Binaries from a folder: with PERF_LIBS, perf runs as
# `PERF_LIBS/ld-linux-x86-64.so.2 --library-path PERF_LIBS PERF` (perf's shared libraries
# copied beside the loader, for a machine without perf). LOADGEN defaults to
# scripts/bench-scale/loadgen built with `gcc -static -O2 -pthread` (needs gcc then).
# Needs root and tracefs (mounted at /sys/kernel/tracing if it is not). Exit 0 also when a
# target is missed; 1 when a measurement could not be made.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CALLS=1000000
PAGES=1024
TMP=/dev/shm
LOG=
NCPU=$(nproc)
THREADS=
DRAIN=()
while [ $# -gt 0 ]; do
  case $1 in
    --threads) THREADS=$2; shift 2 ;;
    --calls) CALLS=$2; shift 2 ;;
    --pages) PAGES=$2; shift 2 ;;
    --tmp) TMP=$2; shift 2 ;;
    --log) LOG=$2; shift 2 ;;
    --drain-threads) DRAIN=(--drain-threads "$2"); shift 2 ;;
    *) echo "bench-scale: unknown argument $1 (see the comment at the top)" >&2; exit 1 ;;
  esac
done
die() { echo "bench-scale: $*" >&2; exit 1; }
[ -n "${UEVREC:-}" ] || die "set UEVREC=path/to/uevrec"
[ -x "$UEVREC" ] || die "UEVREC=$UEVREC is not an executable"
[ "$(id -u)" = 0 ] || die "needs root (perf_event_open system-wide, tracefs)"
if [ -z "$THREADS" ]; then
  t=1
  while [ $t -lt $((NCPU - 1)) ]; do THREADS="$THREADS $t"; t=$((t * 2)); done
  THREADS="$THREADS $((NCPU > 1 ? NCPU - 1 : 1))"
fi
if [ -z "${LOADGEN:-}" ]; then
  LOADGEN=$TMP/bench-scale-loadgen
  gcc -static -O2 -pthread "$ROOT/scripts/bench-scale/loadgen.c" -o "$LOADGEN" \
    || die "cannot build the load generator: set LOADGEN=path or install gcc"
fi
PERF_CMD=()
if [ -n "${PERF:-}" ]; then
  if [ -n "${PERF_LIBS:-}" ]; then
    PERF_CMD=("$PERF_LIBS/ld-linux-x86-64.so.2" --library-path "$PERF_LIBS" "$PERF")
  else
    PERF_CMD=("$PERF")
  fi
elif command -v perf >/dev/null; then
  PERF_CMD=(perf)
fi
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing \
  || die "tracefs is not mounted at /sys/kernel/tracing and cannot be"
[ -d /sys/kernel/tracing/events/raw_syscalls/sys_enter ] \
  || die "no raw_syscalls:sys_enter on this kernel (CONFIG_FTRACE_SYSCALLS)"
[ -n "$LOG" ] && exec > >(tee -a "$LOG") 2>&1

echo "# bench-scale: $(uname -r), $NCPU CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), calls/thread $CALLS, -m $PAGES, output in $TMP"
echo "# UEVREC=$UEVREC ${UEVREC_ARGS:-} ${DRAIN[*]} UEVREC_OLD=${UEVREC_OLD:-none} perf: ${PERF_CMD[*]:-none}"
"$UEVREC" --version 2>/dev/null | sed 's/^/# /'
[ ${#PERF_CMD[@]} -gt 0 ] && "${PERF_CMD[@]}" --version | sed 's/^/# /'

OUT=$TMP/bench-scale.out
ERR=$TMP/bench-scale.err
declare -A RATE REC LOST

# load T: the generator's rate (calls/s) and seconds, "RATE SECS".
load() {
  "$LOADGEN" "$1" "$CALLS" | sed -E 's/.*secs=([0-9.]+) rate=([0-9]+).*/\2 \1/'
}

# threads_snapshot PID: one line per thread of PID: "name cpu_ns wait_ns nvcsw nivcsw" (CPU
# from schedstat's run time, wait = time runnable but not running, on a runqueue; then the
# voluntary and involuntary context switches).
threads_snapshot() {
  local t name run wait rest vol invol
  for t in /proc/"$1"/task/*; do
    read -r name <"$t/comm" 2>/dev/null || continue
    read -r run wait rest <"$t/schedstat" 2>/dev/null || continue
    vol=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null)
    invol=$(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null)
    echo "${t##*/} $name $run $wait ${vol:-0} ${invol:-0}"
  done
}

# threads_during BEFORE AFTER: per thread name (threads of one name added up), what the
# threads did between two snapshots: CPU seconds, seconds waiting for a CPU, context
# switches (voluntary/involuntary). Where a thread's time goes while the load runs: a
# thread busy all of it is a bound; one waiting for a CPU is starved by the load.
threads_during() {
  awk 'NR == FNR { r[$1] = $3; w[$1] = $4; v[$1] = $5; i[$1] = $6; next }
       { n = $2; c[n]++; cpu[n] += $3 - r[$1]; wt[n] += $4 - w[$1]; vs[n] += $5 - v[$1]; is[n] += $6 - i[$1] }
       END { for (n in c) printf "%s x%d cpu %.2fs wait %.2fs cs %d/%d; ", n, c[n], cpu[n] / 1e9, wt[n] / 1e9, vs[n], is[n] }' \
    <(echo "$1") <(echo "$2")
}

# record NAME T CMD...: run CMD (a recorder) in the background around the load.
record() {
  local name=$1 t=$2; shift 2
  rm -f "$OUT" "$ERR"
  "$@" >/dev/null 2>"$ERR" &
  local pid=$! waited=0
  # uevrec writes an `attached` notice when listening; perf record says nothing.
  while [ $waited -lt 100 ]; do
    if [ "$name" = perf ]; then
      [ $waited -ge 15 ] && break
    elif head -c 65536 "$OUT" 2>/dev/null | grep -q '"attached"'; then
      break
    fi
    kill -0 $pid 2>/dev/null || break
    sleep 0.1; waited=$((waited + 1))
  done
  sleep 0.3
  local rs before=""
  [ "$name" = perf ] || before=$(threads_snapshot "$pid")
  rs=$(load "$t")
  sleep 0.5
  local during=""
  [ "$name" = perf ] || during=$(threads_during "$before" "$(threads_snapshot "$pid")")
  kill -INT $pid 2>/dev/null
  local ok=1 i=0
  while kill -0 $pid 2>/dev/null; do
    sleep 0.1; i=$((i + 1))
    if [ $i -ge 600 ]; then kill -KILL $pid; ok=0; break; fi
  done
  wait $pid 2>/dev/null
  local rate=${rs% *} secs=${rs#* } rec lost
  if [ "$name" = perf ]; then
    rec=$(grep -oE '\(([0-9]+) samples\)' "$ERR" | grep -oE '[0-9]+' | tail -1)
    lost=$(grep -oE 'lost ([0-9]+) chunks' "$ERR" | grep -oE '[0-9]+' | tail -1)
    lost="${lost:-0} chunks"
  else
    rec=$(grep -oE '^uevrec: [0-9]+ records' "$ERR" | grep -oE '[0-9]+' | tail -1)
    lost=$(grep -oE '^uevrec: [0-9]+ records, [0-9]+ lost' "$ERR" | grep -oE '[0-9]+ lost' | grep -oE '[0-9]+')
  fi
  [ $ok = 1 ] || lost="(killed)"
  RATE[$name,$t]=$rate; REC[$name,$t]=${rec:-?}; LOST[$name,$t]=${lost:-?}
  local per_s="?"
  [ -n "$rec" ] && per_s=$(awk -v r="$rec" -v s="$secs" 'BEGIN { printf "%.1f", r / s / 1e6 }')
  printf '%-10s T=%-3s traced %6.2f M/s  recorded %-10s lost %-14s (%s M records/s over the load)\n' \
    "$name" "$t" "$(awk -v r="$rate" 'BEGIN { print r / 1e6 }')" "${rec:-?}" "${lost:-?}" "$per_s"
  [ -n "$during" ] && echo "    threads over the load: $during"
  [ "$name" = perf ] || grep -vE '^uevrec: [0-9]+ records|^ +[0-9]+ ' "$ERR" | tr '\r' '\n' \
    | grep -vE 'events/s|^$' | head -3 | sed 's/^/    stderr: /'
  rm -f "$OUT" "$TMP/bench-scale.perf.data"
}

for t in $THREADS; do
  rs=$(load "$t"); RATE[untraced,$t]=${rs% *}
  printf '%-10s T=%-3s rate %6.2f M/s\n' untraced "$t" "$(awk -v r="${rs% *}" 'BEGIN { print r / 1e6 }')"
  if [ ${#PERF_CMD[@]} -gt 0 ]; then
    record perf "$t" "${PERF_CMD[@]}" record -a -m "$PAGES" -e raw_syscalls:sys_enter \
      -o "$TMP/bench-scale.perf.data"
  fi
  if [ -n "${UEVREC_OLD:-}" ]; then
    record old-perf "$t" "$UEVREC_OLD" record "${DRAIN[@]}" -m "$PAGES" -e raw_syscalls:sys_enter -o "$OUT"
    record old-ftrace "$t" "$UEVREC_OLD" record "${DRAIN[@]}" --backend ftrace -m "$PAGES" \
      -e raw_syscalls:sys_enter -o "$OUT"
  fi
  # shellcheck disable=SC2086
  record new-perf "$t" "$UEVREC" record ${UEVREC_ARGS:-} "${DRAIN[@]}" -m "$PAGES" -e raw_syscalls:sys_enter -o "$OUT"
  # shellcheck disable=SC2086
  record new-ftrace "$t" "$UEVREC" record ${UEVREC_ARGS:-} "${DRAIN[@]}" --backend ftrace -m "$PAGES" \
    -e raw_syscalls:sys_enter -o "$OUT"
done

echo
echo "| T | untraced | perf record: traced, lost | old uevrec perf: traced, lost | old ftrace: traced, lost | new uevrec perf: traced, lost, rate/perf's | new ftrace: traced, lost, rate/perf's |"
echo "|---|---|---|---|---|---|---|"
m() { awk -v r="${1:-0}" 'BEGIN { printf "%.1f M/s", r / 1e6 }'; }
ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
for t in $THREADS; do
  row="| $t | $(m "${RATE[untraced,$t]}") |"
  for name in perf old-perf old-ftrace new-perf new-ftrace; do
    if [ -z "${RATE[$name,$t]:-}" ]; then row="$row - |"; continue; fi
    cell="$(m "${RATE[$name,$t]}"), ${LOST[$name,$t]} of ${REC[$name,$t]}"
    case $name in new-*) cell="$cell, $(ratio "${RATE[$name,$t]}" "${RATE[perf,$t]:-}")" ;; esac
    row="$row $cell |"
  done
  echo "$row"
done
