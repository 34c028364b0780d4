#!/usr/bin/env bash
# run.sh MODE CALLS THREADS: one run of a minimal trace_pipe_raw reader (MODE read or
# splice) on a fresh tracefs instance (4 MiB per CPU, buffer_percent 25) recording
# raw_syscalls:sys_enter of samples' syscall_loop (THREADS threads, CALLS getppid calls);
# prints the generator's rate, the ring's overrun and the reader's user/sys CPU seconds.
# Needs root, jq, GNU time, and release builds of samples (cargo build --release -p
# uevrec-samples) and of this reader (cargo build --release here).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
mode=$1 calls=$2 threads=$3
T=/sys/kernel/tracing; I=$T/instances/rawcmp-$$; BIN="$HERE/../../target/release"
mkdir $I; trap 'rmdir $I' EXIT
echo mono > $I/trace_clock; echo 4096 > $I/buffer_size_kb; echo 25 > $I/buffer_percent
d=$(mktemp -d); rm -f $d/stop
$BIN/syscall_loop --threads $threads --iterations $calls --wait-signal > $d/gen.out &
g=$!
while [ ! -s $d/gen.out ]; do sleep 0.05; done
f="($(head -1 $d/gen.out | jq -r '.tids | map("common_pid == \(.)") | join(" || ")')) && id == 110"
echo "$f" > $I/events/raw_syscalls/sys_enter/filter
echo 1 > $I/events/raw_syscalls/sys_enter/enable
/usr/bin/time -f '%U %S' -o $d/time "$HERE/target/release/ftrace-read-vs-splice" $mode $I $(nproc) $d/stop > $d/r.out &
r=$!
sleep 0.5
kill -USR1 $g; wait $g
echo 0 > $I/events/raw_syscalls/sys_enter/enable
touch $d/stop; wait $r
ov=$(cat $I/per_cpu/cpu*/stats | awk '/^overrun/ {s+=$2} END {print s}')
rate=$(tail -1 $d/gen.out | jq .per_sec)
read u s < $d/time
echo "{\"mode\":\"$mode\",\"threads\":$threads,\"rate\":$rate,\"overrun\":$ov,\"user_s\":$u,\"sys_s\":$s,\"read\":$(cat $d/r.out)}"
rm -rf $d
