#!/usr/bin/env bash
# --where on the live path (issue 40): recorder CPU per record with and without a
# condition, on the same load, side by side in each round. Prints one table
# (BENCHMARKS.md, "Issue 40: filtering, second part").
#
#   scripts/bench-where.sh [--runs N] [--calls N]
#
# The load: a C program built here calling syscall(SYS_getppid, 424242, SEQ) N times flat
# out. Recorders, each `uevrec record -q -e raw_syscalls:sys_enter --filter 'id == 110'
# -o /dev/shm/F`, with:
#   none        no condition (the baseline)
#   keep-all    --where 'fields.args[0] == 424242' (every record judged and kept: the
#               same lines as the baseline, so the difference is the judging)
#   keep-third  --where 'fields.args[1] % 3 == 0' (a third kept: less to write)
#   comm        --where 'comm == "where-load"' (a context variable: the tracker's text compared)
# Measured per run: the program's calls/s, records written, recorder CPU (user+sys from
# wait4's rusage) and µs of it per record recorded (the N calls). Needs: root, gcc,
# python3, tmpfs at /dev/shm. Builds the release binary.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=3
CALLS=200000
while [ $# -gt 0 ]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --calls) CALLS=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--calls N]" >&2; exit 2 ;;
  esac
done

cargo build --release --bin uevrec --manifest-path "$ROOT/Cargo.toml" >&2
WORK=$(mktemp -d /dev/shm/bench-where.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

cat > "$WORK/load.c" <<'C'
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 1; i <= n; i++) syscall(SYS_getppid, 424242L, i);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.0f\n", n / ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9));
    return 0;
}
C
gcc -O1 -o "$WORK/where-load" "$WORK/load.c"

python3 - "$ROOT/target/release/uevrec" "$WORK" "$CALLS" "$RUNS" <<'PY'
import os, signal, subprocess, sys, time
uevrec, work, calls, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
conditions = {
    "none": [],
    "keep-all": ["--where", "fields.args[0] == 424242"],
    "keep-third": ["--where", "fields.args[1] % 3 == 0"],
    "comm": ["--where", 'comm == "where-load"'],
}

def one(extra):
    out = os.path.join(work, "out.json")
    if os.path.exists(out):
        os.unlink(out)
    argv = [uevrec, "record", "-q", "-e", "raw_syscalls:sys_enter", "--filter", "id == 110",
            "-o", out] + extra
    pid = os.fork()
    if pid == 0:
        os.execv(uevrec, argv)
    for _ in range(400):
        if os.path.exists(out) and b'"attached"' in open(out, "rb").read():
            break
        time.sleep(0.05)
    rate = subprocess.run([os.path.join(work, "where-load"), str(calls)],
                          capture_output=True, text=True, check=True).stdout.strip()
    time.sleep(0.5)
    os.kill(pid, signal.SIGINT)
    _, status, ru = os.wait4(pid, 0)
    assert status == 0, status
    written = sum(1 for l in open(out, "rb") if b'"args":[424242,' in l)
    return rate, written, ru.ru_utime + ru.ru_stime

print(f"{'condition':<11} {'run':>3} {'calls/s':>9} {'written':>8} {'cpu_s':>7} {'us/record':>9}")
for run in range(1, runs + 1):
    for name, extra in conditions.items():
        rate, written, cpu = one(extra)
        print(f"{name:<11} {run:>3} {rate:>9} {written:>8} {cpu:>7.3f} {cpu * 1e6 / calls:>9.3f}",
              flush=True)
PY
