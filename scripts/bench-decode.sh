#!/bin/sh
# uevrec decode vs perf script (default fields) and vs a decoder built on the
# tracepoint_decode crate (examples/decode_td.rs) on the same perf.data, one core each,
# output to a file on tmpfs (see BENCHMARKS.md, "perf.data decoding"). Needs root, perf,
# perl, GNU time, a tmpfs at /dev/shm.
#   scripts/bench-decode.sh [CALLS [RUNS]]     CALLS getppid() calls recorded (default 3000000)
# Environment: BENCH_CPU (default 1), BENCH_PREWARM (MiB; default twice the perf.data's
# size, more than any tool's output; 0 = off).
#
# Fairness: the input is read once before the runs (it is in tmpfs: no disk); every run
# runs the three tools in a rotated order (run 1: perf td uevrec, run 2: td uevrec perf,
# …); before each tool its previous output is removed and BENCH_PREWARM MiB are written
# to a scratch file in /dev/shm and removed, so the pages the tool's output takes were
# touched just before. Without that, on a VM whose balloon hands free pages back to the
# host (virtio-balloon free page reporting), the first run after an idle spell pays the
# host's page faults for its whole output: 2-4× the system time (BENCHMARKS.md).
# Prints one row per tool and run (every run, nothing dropped): events, wall, user and
# system CPU seconds, events per second of wall time and per CPU second, peak RSS; then
# per run the ratios perf/uevrec and td/uevrec of wall time and of CPU time.
set -eu
calls=${1:-3000000}
runs=${2:-3}
cpu=${BENCH_CPU:-1}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=/dev/shm/uevrec-bench-decode
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
(cd "$here" && cargo build --release -q --bin uevrec --example decode_td)
uevrec=$here/target/release/uevrec
td=$here/target/release/examples/decode_td
data=$dir/perf.data
# raw_syscalls:sys_enter from a getppid loop and sched:sched_switch, CPU-wide (-a) so the
# file has several CPUs' rings and FINISHED_ROUND windows to order; 16 MiB rings per
# CPU keep loss low; -k for HEADER_CLOCK_DATA.
perf record -q -a -m 4096 -k CLOCK_MONOTONIC -e raw_syscalls:sys_enter -e sched:sched_switch \
    -o "$data" -- perl -e "getppid() for 1..$calls" 2>"$dir/record.err" || {
    cat "$dir/record.err" >&2
    exit 1
}
cat "$data" >/dev/null
prewarm=${BENCH_PREWARM:-$(($(stat -c %s "$data") / 1048576 * 2))}
events=$(perf script -i "$data" -F event 2>/dev/null | wc -l)
echo "# $events samples in $(du -h "$data" | cut -f1) ($calls getppid calls); cpu $cpu;" \
    "prewarm ${prewarm} MiB; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
measure() { # name outfile command...
    name=$1
    out=$2
    shift 2
    rm -f "$out"
    if [ "$prewarm" -gt 0 ]; then
        dd if=/dev/zero of="$dir/warm" bs=1M count="$prewarm" status=none
        rm -f "$dir/warm"
    fi
    /usr/bin/time -f "%e %U %S %M" -o "$dir/time" taskset -c "$cpu" "$@" >"$out" 2>"$dir/err.$name" || {
        cat "$dir/err.$name" >&2
        exit 1
    }
    read -r wall user sys rss <"$dir/time"
    echo "$name $wall $user $sys $rss"
}
printf '%-4s %-7s %10s %7s %7s %7s %11s %11s %9s\n' \
    run tool events wall_s user_s sys_s ev_per_s ev_per_cpu_s rss_kib
: >"$dir/rows"
for i in $(seq "$runs"); do
    case $((i % 3)) in
    1) order="perf td uevrec" ;;
    2) order="td uevrec perf" ;;
    0) order="uevrec perf td" ;;
    esac
    for tool in $order; do
        case $tool in
        perf) set -- perf script -i "$data" ;;
        td) set -- "$td" "$data" ;;
        uevrec) set -- "$uevrec" decode "$data" ;;
        esac
        measure "$tool" "$dir/out.$tool" "$@" | awk -v ev="$events" -v run="$i" \
            '{ printf "%-4s %-7s %10d %7.2f %7.2f %7.2f %11.0f %11.0f %9d\n", run, $1, ev, $2, $3, $4, ev / $2, ev / ($3 + $4), $5 }' |
            tee -a "$dir/rows"
    done
done
echo "# ratios per run (events/s of uevrec over the other's; wall time, CPU time)"
awk '{ wall[$1, $2] = $4; cpu[$1, $2] = $5 + $6; if ($1 > n) n = $1 }
    END { for (r = 1; r <= n; r++)
        printf "run %s: perf/uevrec wall %.2fx cpu %.2fx; td/uevrec wall %.2fx cpu %.2fx\n", r,
            wall[r, "perf"] / wall[r, "uevrec"], cpu[r, "perf"] / cpu[r, "uevrec"],
            wall[r, "td"] / wall[r, "uevrec"], cpu[r, "td"] / cpu[r, "uevrec"] }' "$dir/rows"
echo "# uevrec's stderr: $(tr '\n' ' ' <"$dir/err.uevrec")"
echo "# lines: perf $(wc -l <"$dir/out.perf"), td $(wc -l <"$dir/out.td"), uevrec $(wc -l <"$dir/out.uevrec");" \
    "bytes: perf $(wc -c <"$dir/out.perf"), td $(wc -c <"$dir/out.td"), uevrec $(wc -c <"$dir/out.uevrec")"
