#!/usr/bin/env bash
# The recorder's CPU per record at several rates, for two uevrec binaries side by side
# (issue 42: a 5 ms loop timeout for output a person watches, against the 100 ms one):
#   scripts/bench-live-poll.sh OLD_BIN NEW_BIN [SECONDS] [ROUNDS]
# Each run: `BIN record --pid P --filter 'id == getppid' -e raw_syscalls:sys_enter
# --duration SECONDS > /dev/null` (JSON lines to standard output, the live path) while
# perl calls getppid at a rate (0 = idle, else calls a second; "max" = flat out); the
# CPU time of uevrec (all its threads) from `perf stat -e task-clock`, the records from its
# summary.
# With OLD_BIN = NEW_BIN the OLD runs write with `-o /dev/null` instead: file output, which
# keeps the 100 ms sleep, against standard output's 5 ms, in the same binary.
# Root, tracefs mounted. Prints one row per run.
set -euo pipefail
old=$1 new=$2 secs=${3:-5} rounds=${4:-2}
nr=110; [ "$(uname -m)" = aarch64 ] && nr=173
producer() { # rate
    case $1 in
    0) exec perl -e 'sleep 1000' ;;
    max) exec perl -e 'while (1) { getppid() for 1..10000 }' ;;
    *) exec perl -MTime::HiRes=sleep,time -e '
        my $rate = shift; my $t = time; my $n = 0;
        while (1) { my $due = int((time - $t) * $rate); while ($n < $due) { getppid(); $n++ } sleep 0.001 }' "$1" ;;
    esac
}
printf '%-6s %-4s %8s %10s %10s %14s\n' rate bin cpu_s records rec/s cpu_us/record
for round in $(seq "$rounds"); do
    for rate in 0 100 1000 10000 max; do
        for which in old new; do
            bin=$old; [ $which = new ] && bin=$new
            out=(); [ "$old" = "$new" ] && [ $which = old ] && out=(-o /dev/null)
            producer $rate & p=$!
            err=$(mktemp)
            perf stat -x, -e task-clock -o "$err.time" -- "$bin" record --pid $p --filter "id == $nr" \
                -e raw_syscalls:sys_enter --duration "${secs}s" "${out[@]}" >/dev/null 2>"$err" || true
            kill $p; wait $p 2>/dev/null || true
            cpu=$(grep task-clock "$err.time" | cut -d, -f1 | awk '{printf "%.3f", $1 / 1000}')
            recs=$(grep -oE '^uevrec: [0-9]+ records' "$err" | grep -oE '[0-9]+' || echo 0)
            per=$( [ "$recs" -gt 0 ] && echo "scale=3; $cpu * 1000000 / $recs" | bc || echo -)
            printf '%-6s %-4s %8s %10s %10s %14s\n' $rate $which "$cpu" "$recs" $((recs / secs)) "$per"
            rm -f "$err" "$err.time"
        done
    done
done
