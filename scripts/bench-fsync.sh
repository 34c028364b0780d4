#!/usr/bin/env bash
# BENCHMARKS.md §17: what `record --fsync never|batch|1s` costs, per output.
#
# A perl producer pinned to CPU 0 calls getppid(424242, SEQ) N times as fast as it can;
# `uevrec record` (release build, --pid of the producer, filter id == getppid) writes
# -o FILE (JSON lines), a flight dump, --raw FILE (perf-data: `perf`) or --raw FILE --raw-format trace-dat (--backend ftrace) with each
# --fsync policy, RUNS times each. Printed per run: the recorder's CPU seconds (user +
# system, /usr/bin/time), the records in the output (JSON lines: counted in FILE;
# trace-dat: `uevrec decode FILE`), the kernel's lost counts in it, CPU µs per record, the producer's calls per second,
# and the recorder's wall seconds. Needs root, tracefs with raw_syscalls, perl, taskset.
#
# `flight`: --flight 1G, one SIGUSR1 dump after the calls (its time on stderr: the
# dump's fsync is there).
#
#   scripts/bench-fsync.sh            # json and dat, N=1000000 RUNS=3, target/release/uevrec
#   UEVREC=path N=200000 RUNS=1 scripts/bench-fsync.sh json
#   POLICIES='batch 1s' EXTRA='-m 8M' scripts/bench-fsync.sh json
set -euo pipefail
B=${UEVREC:-${CARGO_TARGET_DIR:-target}/release/uevrec}
N=${N:-1000000}
RUNS=${RUNS:-3}
OUTPUTS=${1:-json dat}
POLICIES=${POLICIES:-never batch 1s}
read -r -a EXTRA <<<"${EXTRA:-}" # more record flags, e.g. EXTRA="-m 8M"
NR=110
[ -x "$B" ] || { echo "no $B: cargo build --release" >&2; exit 1; }
printf 'output\tfsync\trun\trecorder_cpu_s\trecords\tlost\tcpu_us_per_record\tproducer_calls_per_s\trecorder_wall_s\n'
for out in $OUTPUTS; do
  for pol in $POLICIES; do
    for run in $(seq 1 "$RUNS"); do
      dir=$(mktemp -d /tmp/bench-fsync.XXXXXX)
      taskset -c 0 perl -MTime::HiRes=time -e '
        select(undef, undef, undef, 0.01) until -e $ARGV[0];
        my $t = time; syscall('"$NR"', 424242, $_) for 1 .. $ARGV[1];
        printf "%.0f\n", $ARGV[1] / (time - $t);' "$dir/go" "$N" >"$dir/rate" &
      prod=$!
      common=(--pid "$prod" --filter "id == $NR" -e raw_syscalls:sys_enter --fsync "$pol" "${EXTRA[@]}")
      [ "$out" = flight ] || common+=(-q)
      if [ "$out" = json ]; then
        args=(-o "$dir/out.json")
        ready() { grep -q '"attached"' "$dir/out.json" 2>/dev/null; }
      elif [ "$out" = perf ]; then
        args=(--raw "$dir/k.data")
        # The file exists once the recorder runs; its events attach a moment later.
        ready() { [ -s "$dir/k.data" ] && sleep 0.3; }
      elif [ "$out" = flight ]; then
        args=(--flight 1G -o "$dir/fl.json")
        ready() { grep -q '"attached"' "$dir/log" 2>/dev/null; }
      else
        args=(--backend ftrace --raw "$dir/k.dat" --raw-format trace-dat)
        ready() { grep -q '{"format":' "$dir/.k.dat.uevrec-meta" 2>/dev/null; }
      fi
      /usr/bin/time -f '%U %S %e' -o "$dir/time" "$B" record "${args[@]}" "${common[@]}" \
        2>"$dir/log" &
      rec=$!
      until ready; do sleep 0.02; done
      touch "$dir/go"
      wait "$prod"
      sleep 0.5
      if [ "$out" = flight ]; then
        # One dump of everything held; its time is in the log line.
        kill -USR1 "$(pgrep -P "$rec" -x uevrec || echo "$rec")"
        until grep -q 'flight dump' "$dir/log"; do sleep 0.05; done
      fi
      kill -INT "$(pgrep -P "$rec" -x uevrec || echo "$rec")"
      wait "$rec" || true
      if [ "$out" = json ]; then
        cp "$dir/out.json" "$dir/lines"
      elif [ "$out" = flight ]; then
        cat "$dir"/fl.json.* >"$dir/lines"
        grep -o 'flight dump .* in [0-9.]* s' "$dir/log" | sed 's/.* in /flight dump written in /' >&2
      elif [ "$out" = perf ]; then
        "$B" decode "$dir/k.data" >"$dir/lines" 2>/dev/null || true
      else
        "$B" decode "$dir/k.dat" >"$dir/lines" 2>/dev/null || true
      fi
      records=$(grep -c '"args":\[424242,' "$dir/lines" || true)
      lost=$({ grep '"uevrec":"lost"' "$dir/lines" || true; } | { grep -o '"lost":[0-9]*' || true; } |
        awk -F: '{ n += $2 } END { print n + 0 }')
      read -r u s e <"$dir/time"
      awk -v o="$out" -v p="$pol" -v r="$run" -v u="$u" -v s="$s" -v e="$e" -v n="$records" -v l="$lost" \
        -v rate="$(cat "$dir/rate")" \
        'BEGIN { printf "%s\t%s\t%d\t%.2f\t%d\t%d\t%.3f\t%d\t%.1f\n", o, p, r, u + s, n, l,
                 (n ? (u + s) * 1e6 / n : 0), rate, e }'
      rm -rf "$dir"
    done
  done
done
