#!/bin/sh
# uevrec decode vs perf script (default fields) on the same perf.data, one core each,
# output to a file on tmpfs (see BENCHMARKS.md, "perf.data decoding"). Needs root, perf,
# perl, GNU time, a tmpfs at /dev/shm.
#   scripts/bench-decode.sh [CALLS [RUNS]]     CALLS getppid() calls recorded (default 3000000)
# Prints one row per run: tool, events, seconds (wall), user and system CPU seconds,
# events per second of wall time and per CPU second, peak RSS in KiB.
set -eu
calls=${1:-3000000}
runs=${2:-3}
cpu=${BENCH_CPU:-1}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=/dev/shm/uevrec-bench-decode
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
(cd "$here" && cargo build --release -q --bin uevrec)
uevrec=$here/target/release/uevrec
data=$dir/perf.data
# raw_syscalls:sys_enter from a getppid loop and sched:sched_switch, CPU-wide (-a) so the
# file has several CPUs' rings and FINISHED_ROUND windows to order; 16 MiB rings per
# CPU keep loss low; -k for HEADER_CLOCK_DATA.
perf record -q -a -m 4096 -k CLOCK_MONOTONIC -e raw_syscalls:sys_enter -e sched:sched_switch \
    -o "$data" -- perl -e "getppid() for 1..$calls" 2>"$dir/record.err" || {
    cat "$dir/record.err" >&2
    exit 1
}
ls -l "$data" >&2
measure() { # name outfile command...
    name=$1
    out=$2
    shift 2
    rm -f "$out"
    /usr/bin/time -f "%e %U %S %M" -o "$dir/time" taskset -c "$cpu" "$@" >"$out" 2>"$dir/err" || {
        cat "$dir/err" >&2
        exit 1
    }
    read -r wall user sys rss <"$dir/time"
    echo "$name $wall $user $sys $rss"
}
events=$(perf script -i "$data" -F event 2>/dev/null | wc -l)
echo "# $events samples in $(du -h "$data" | cut -f1) ($calls getppid calls); cpu $cpu"
printf '%-8s %10s %7s %7s %7s %11s %11s %9s\n' tool events wall_s user_s sys_s ev_per_s ev_per_cpu_s rss_kib
for i in $(seq "$runs"); do
    for tool in perf uevrec; do
        if [ "$tool" = perf ]; then
            set -- perf script -i "$data"
            out=$dir/perf.txt
        else
            set -- "$uevrec" decode -q "$data"
            out=$dir/out.jsonl
        fi
        measure "$tool" "$out" "$@" | awk -v ev="$events" \
            '{ printf "%-8s %10d %7.2f %7.2f %7.2f %11.0f %11.0f %9d\n", $1, ev, $2, $3, $4, ev / $2, ev / ($3 + $4), $5 }'
    done
done
echo "# lines: perf $(wc -l <"$dir/perf.txt"), uevrec $(wc -l <"$dir/out.jsonl")"
