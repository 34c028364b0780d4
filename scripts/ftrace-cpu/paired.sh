#!/usr/bin/env bash
# paired.sh BIN THREADS CALLS [uevrec args...]: one run of `uevrec record --backend ftrace`
# (from directory BIN, which also holds samples' syscall_loop) on the bench-live load
# (raw_syscalls:sys_enter, filter on the generator's threads and getppid, -m 1024, output
# on /dev/shm), uevrec under `perf stat` (its system calls by kind) and GNU time (user and
# system CPU), the generator under GNU time. Prints one line of figures. Run it for two
# builds in turn ("pairs") and compare; see BENCHMARKS.md section 8. Needs root, perf, jq.
set -euo pipefail
BIN=$1 T=$2 N=$3; shift 3
d=$(mktemp -d /dev/shm/ftrace-cpu.XXXXXX); trap 'rm -rf "$d"' EXIT
/usr/bin/time -o "$d/gtime" -f "%U %S" "$BIN/syscall_loop" --threads "$T" --iterations "$N" \
  --wait-signal >"$d/gen.out" 2>"$d/gen.err" &
g=$!
while [ ! -s "$d/gen.out" ]; do sleep 0.05; done
gc=$(pgrep -P $g)
filter="($(head -1 "$d/gen.out" | jq -r '.tids | map("common_pid == \(.)") | join(" || ")')) && id == 110"
perf stat -x, -o "$d/stat" -e task-clock,raw_syscalls:sys_enter,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait \
  /usr/bin/time -o "$d/time" -f "%U %S" "$BIN/uevrec" record -q -m 1024 --filter "$filter" \
  --backend ftrace -o "$d/out.jsonl" "$@" raw_syscalls:sys_enter 2>"$d/rec.err" &
p=$!
rp=
for _ in $(seq 100); do # perf stat -> time -> uevrec
  tp=$(pgrep -P $p || true)
  [ -n "$tp" ] && rp=$(pgrep -P "$tp" || true)
  [ -n "$rp" ] && break
  sleep 0.05
done
en=/sys/kernel/tracing/instances/uevrec-$rp/events/raw_syscalls/sys_enter/enable
for _ in $(seq 100); do [ "$(cat "$en" 2>/dev/null)" = 1 ] && break; sleep 0.1; done
sleep 0.5
kill -USR1 "$gc"; wait $g
kill -INT "$rp"; wait $p
ev=$(grep -c '"event":"sys_enter",' "$d/out.jsonl" || true)
lost=$({ grep '"uevrec":"lost"' "$d/out.jsonl" || true; } | jq -s 'map(.lost) | add // 0')
rate=$(tail -1 "$d/gen.out" | jq -r .per_sec)
awk -F, -v ev="$ev" -v rate="$rate" -v lost="$lost" -v load="$(cut -d' ' -f1 /proc/loadavg)" \
  -v ut="$(cat "$d/time")" -v gt="$(cat "$d/gtime")" '
  /task-clock/ {t=$1} /raw_syscalls:sys_enter/ {sc=$1} /sys_enter_read,/ {rd=$1}
  /sys_enter_write,/ {wr=$1} /futex/ {fx=$1} /epoll_wait/ {ep=$1}
  END {printf "load=%s rate=%.3fM records=%d lost=%d uevrec: ns/record=%.0f user/sys s=%s syscalls/1k records=%.1f (read %.1f, write %.2f, futex %.2f, epoll_wait %.2f); generator user/sys s=%s\n",
    load, rate/1e6, ev, lost, t*1e6/ev, ut, sc*1000/ev, rd*1000/ev, wr*1000/ev, fx*1000/ev, ep*1000/ev, gt}' "$d/stat"
