#!/usr/bin/env bash
# `uevrec decode` of a perf.data with call stacks against the same load without them,
# and against `perf script` on the same file (issue 38; BENCHMARKS.md, "Issue 38: stacks
# in perf.data"). As root, on a kernel with raw_syscalls and perf installed:
#
#   scripts/bench-decode-stacks.sh [UEVREC] [CALLS] [RUNS]
#
# Records CALLS setpgid calls of a C program built with frame pointers (main → outer →
# middle → inner → syscall) with `uevrec record -g --raw` and with `uevrec record --raw`,
# then times, RUNS times each: `uevrec decode` of both files (one thread, and
# `--threads 2`), `uevrec decode --no-symbolize` of the stacked one, and `perf script`
# (its default output: the callchains with names) of the stacked one. Prints one line
# per run and command: wall seconds, records, records/s.
set -euo pipefail

UEVREC=${1:-target/release/uevrec}
CALLS=${2:-200000}
RUNS=${3:-3}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

cat >"$DIR/chain.c" <<'EOF'
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
__attribute__((noinline)) long inner(long magic, long seq) {
    return syscall(SYS_setpgid, magic, seq);
}
__attribute__((noinline)) long middle(long magic, long seq) {
    long r = inner(magic, seq);
    __asm__ volatile("" ::: "memory");
    return r;
}
__attribute__((noinline)) long outer(long magic, long seq) {
    long r = middle(magic, seq);
    __asm__ volatile("" ::: "memory");
    return r;
}
int main(int argc, char **argv) {
    long magic = atol(argv[1]), n = atol(argv[2]);
    for (long seq = 0; seq < n; seq++) {
        outer(magic, seq);
    }
    return 0;
}
EOF
gcc -O1 -g -fno-omit-frame-pointer -o "$DIR/chain" "$DIR/chain.c"
NR_SETPGID=109

record() { # FILE [FLAGS…]
    local file=$1
    shift
    "$UEVREC" record --quiet "$@" -e raw_syscalls:sys_enter \
        --filter "id == $NR_SETPGID" --raw "$file" &
    local pid=$!
    sleep 2
    "$DIR/chain" 424242 "$CALLS"
    sleep 1
    kill -INT "$pid"
    wait "$pid"
}

record "$DIR/stacks.data" -g
record "$DIR/plain.data"
ls -l "$DIR/stacks.data" "$DIR/plain.data" | awk '{print $5, $9}'

timed() { # NAME COMMAND…: wall seconds, records, records/s
    local name=$1
    shift
    local start end records
    start=$(date +%s.%N)
    "$@" >"$DIR/out" 2>"$DIR/err"
    end=$(date +%s.%N)
    records=$(grep -o '^uevrec: [0-9]* records' "$DIR/err" | awk '{print $2}' || true)
    # perf script: a blank line after each sample's callchain.
    [ -n "$records" ] || records=$(grep -c '^$' "$DIR/out" || true)
    awk -v n="$name" -v s="$start" -v e="$end" -v r="$records" \
        'BEGIN { w = e - s; printf "%-34s %7.3f s %9d records %10.0f records/s\n", n, w, r, r / w }'
}

for run in $(seq 1 "$RUNS"); do
    echo "run $run"
    timed "decode stacks.data" "$UEVREC" decode --threads 1 "$DIR/stacks.data"
    timed "decode plain.data" "$UEVREC" decode --threads 1 "$DIR/plain.data"
    timed "decode --threads 2 stacks.data" "$UEVREC" decode --threads 2 "$DIR/stacks.data"
    timed "decode --threads 2 plain.data" "$UEVREC" decode --threads 2 "$DIR/plain.data"
    timed "decode --no-symbolize stacks.data" "$UEVREC" decode --threads 1 --no-symbolize "$DIR/stacks.data"
    timed "perf script stacks.data" perf script -i "$DIR/stacks.data"
done
