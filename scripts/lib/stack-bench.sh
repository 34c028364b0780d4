# Sourced by the call-stack benchmarks (scripts/bench-stacks.sh,
# scripts/bench-stack-outputs.sh): the traced C chain and the recorder-CPU measure.

# build_chain DIR NR: build DIR/chain, `main → outer → middle → inner → syscall(NR,
# 424242, SEQ)` (-O1 -g -fno-omit-frame-pointer, each function out of line).
#   DIR/chain N [RATE]: N calls, flat out or RATE calls/s (paced by the monotonic clock
#   in steps of a millisecond's calls); prints the calls/s it made.
build_chain() {
  local dir=$1 nr=$2
  cat > "$dir/chain.c" <<'C'
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
__attribute__((noinline)) long inner(long seq) { return syscall(NR, 424242L, seq); }
__attribute__((noinline)) long middle(long seq) { long r = inner(seq); __asm__ volatile("" ::: "memory"); return r; }
__attribute__((noinline)) long outer(long seq) { long r = middle(seq); __asm__ volatile("" ::: "memory"); return r; }
static double secs(struct timespec t) { return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    double rate = argc > 2 ? atof(argv[2]) : 0;
    long step = rate >= 1000 ? (long)(rate / 1000) : 1;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        if (rate > 0 && i % step == 0) {
            double due = secs(a) + i / rate;
            struct timespec t = {(time_t)due, (long)((due - (time_t)due) * 1e9)};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
        }
        outer(i);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.0f\n", n / (secs(b) - secs(a)));
    return 0;
}
C
  gcc -O1 -g -fno-omit-frame-pointer -DNR="$nr" -o "$dir/chain" "$dir/chain.c"
}

# measure OUT CMD...: run CMD as a child, its pid in OUT.pid at once; after it exits,
# "user sys" seconds (wait4's rusage) in OUT.
measure() {
  local out=$1; shift
  python3 - "$out" "$@" <<'PY'
import os, sys
out, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.execvp(argv[0], argv)
open(out + ".pid", "w").write(str(pid))
_, status, ru = os.wait4(pid, 0)
open(out, "w").write(f"{ru.ru_utime} {ru.ru_stime}\n")
PY
}
