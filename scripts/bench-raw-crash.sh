#!/usr/bin/env bash
# The cost of record --raw's crash-safe perf.data layout (issue 26): two builds of uevrec,
# runs alternating, each recording `raw_syscalls:sys_enter` (filtered to the generator's
# getppid calls) into `--raw` on tmpfs while scripts/bench-scale/loadgen makes CALLS
# getppid(424242, SEQ) calls on one thread. Per run: the generator's rate (calls/s), the
# recorder's CPU (user+sys, wait4's rusage), peak RSS, records and losses (its summary),
# the file's size, and that `uevrec decode` (NEW's) reads it with exit status 0.
#
#   OLD=path NEW=path [RUNS=3] [CALLS=2000000] [PAGES=1024] scripts/bench-raw-crash.sh
#
# Needs root, tracefs, gcc (for the generator), python3. Output: one line per run.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${RUNS:-3}
CALLS=${CALLS:-2000000}
PAGES=${PAGES:-1024}
TMP=${TMP:-/dev/shm}
[ -x "${OLD:-}" ] && [ -x "${NEW:-}" ] || { echo "set OLD=… NEW=… (uevrec binaries)" >&2; exit 1; }
LOADGEN=$TMP/bench-raw-loadgen
gcc -static -O2 -pthread "$ROOT/scripts/bench-scale/loadgen.c" -o "$LOADGEN"
DATA=$TMP/bench-raw.data
run() {
  local name=$1 bin=$2
  rm -f "$DATA"
  python3 - "$bin" "$DATA" "$PAGES" "$LOADGEN" "$CALLS" "$name" <<'PY'
import os, re, signal, subprocess, sys, time
binary, data, pages, loadgen, calls, name = sys.argv[1:]
rec = subprocess.Popen([binary, "record", "-m", pages, "-e", "raw_syscalls:sys_enter",
                        "--filter", "id == 110",
                        "--raw", data],
                       stderr=subprocess.PIPE, text=True)
time.sleep(2.0)
out = subprocess.run([loadgen, "1", calls], capture_output=True, text=True).stdout
rate = int(re.search(r"rate=(\d+)", out).group(1))
time.sleep(0.5)
rec.send_signal(signal.SIGINT)
_, status, ru = os.wait4(rec.pid, 0)
err = rec.stderr.read()
m = re.search(r"uevrec: (\d+) records, (\d+) lost", err)
records, lost = (m.group(1), m.group(2)) if m else ("?", "?")
size = os.path.getsize(data)
print(f"{name}: rate {rate/1e6:.3f} M/s  cpu {ru.ru_utime + ru.ru_stime:.3f} s "
      f"(user {ru.ru_utime:.3f} sys {ru.ru_stime:.3f})  rss {ru.ru_maxrss // 1024} MiB  "
      f"records {records} lost {lost}  file {size} B  exit {status >> 8}")
PY
  "$NEW" decode -q "$DATA" >/dev/null || echo "$name: decode exit $?"
}
for i in $(seq "$RUNS"); do
  run old "$OLD"
  run new "$NEW"
done
rm -f "$DATA" "$LOADGEN"
