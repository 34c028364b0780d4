#!/usr/bin/env bash
# callgrind.sh BIN CALLS NAME [uevrec args...]: instructions per record of
# `uevrec record --backend ftrace` (BIN/uevrec) under callgrind, draining CALLS getppid
# records of a Python loop (getppid_loop.py, alive until uevrec stopped, so its process id
# stays known as in a live run). The ring is -m 16384 so that nothing is lost while
# valgrind slows uevrec down. Writes NAME.cg in the current directory; prints records,
# lost and instructions per record (whole program, the formatter thread, the drain
# thread). Needs root, valgrind, jq, python3. BENCHMARKS.md section 8.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$1 N=$2 OUT=$3; shift 3
d=$(mktemp -d /dev/shm/ftrace-cg.XXXXXX); trap 'touch "$d/end"; rm -rf "$d"' EXIT
python3 "$HERE/getppid_loop.py" "$d" "$N" &
g=$!
while [ ! -s "$d/gen.pid" ]; do sleep 0.05; done
filter="common_pid == $(cat "$d/gen.pid") && id == 110"
valgrind --tool=callgrind --callgrind-out-file="$OUT.cg" --separate-threads=no \
  "$BIN/uevrec" record -q -m 16384 --filter "$filter" --backend ftrace -o "$d/out.jsonl" "$@" \
  raw_syscalls:sys_enter 2>"$d/rec.err" &
p=$!
en=/sys/kernel/tracing/instances/uevrec-$p/events/raw_syscalls/sys_enter/enable
for _ in $(seq 600); do [ "$(cat "$en" 2>/dev/null)" = 1 ] && break; sleep 0.1; done
sleep 1
touch "$d/go"
while [ ! -e "$d/gen.done" ]; do sleep 0.1; done
sleep 3
kill -INT $p; wait $p
touch "$d/end"; wait $g
ev=$(grep -c '"event":"sys_enter",' "$d/out.jsonl" || true)
lost=$({ grep '"uevrec":"lost"' "$d/out.jsonl" || true; } | jq -s 'map(.lost) | add // 0')
incl=$(callgrind_annotate --inclusive=yes "$OUT.cg" 2>/dev/null)
num() { grep -m1 "$1" <<<"$incl" | awk '{gsub(",", "", $1); print $1}'; }
tot=$(num "PROGRAM TOTALS") f=$(num "formatter::run \[") s=$(num "Stager<E>::drain \[")
echo "$OUT: records=$ev lost=$lost instructions/record=$((tot / ev)) formatter=$((f / ev)) drain=$((s / ev))"
