#!/usr/bin/env bash
# Issue 38, the outputs of call stacks: flame graphs and OTLP. Prints two tables
# (BENCHMARKS.md, "Issue 38: flame graphs and OTLP stacks").
#
#   scripts/bench-stack-outputs.sh [--runs N] [--calls N] [--lines N] [--only flame|otlp]
#
# --only flame or --only otlp: that part alone.
# The load: the C chain of scripts/lib/stack-bench.sh (main → outer → middle → inner →
# syscall(SYS_getppid, 424242, SEQ), -O1 -g -fno-omit-frame-pointer), --calls times
# (default 100,000).
#
# 1. Flame graphs over --lines stacked records (default 1,000,000): `uevrec record -g` of
#    the chain's calls, its record lines repeated up to --lines (uevrec's own lines once);
#    `perf record -g` of the same calls, `perf script`'s text repeated up to as many
#    samples. Timed (wall, and user+sys), --runs times each:
#      uevrec-folded     uevrec flamegraph --folded JSONL
#      uevrec-svg        uevrec flamegraph JSONL -o SVG
#      inferno-collapse  inferno-collapse-perf PERF.TXT           (if installed; $INFERNO)
#      inferno-svg       inferno-collapse-perf PERF.TXT | inferno-flamegraph
#      stackcollapse.pl  perl stackcollapse-perf.pl PERF.TXT      (if $FLAMEGRAPH_PL_DIR has it)
#    The baselines start from perf script's text, not from perf.data: `perf script` itself
#    (naming the frames) is timed once apart.
# 2. OTLP with and without stacks: recorder CPU (user+sys, wait4's rusage) per record for
#      otlp / otlp-g       record --format otlp -o FILE, without and with -g
#      export / export-g   record --otlp-endpoint (grpc) to examples/otlp_receiver
#    records/s = records / recorder CPU seconds (what one core formats and sends).
# Needs: root, gcc, perf, python3, tmpfs at /dev/shm (≈ 2 GiB for 1,000,000 lines).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=3
CALLS=100000
LINES=1000000
PARTS="flame otlp"
while [ $# -gt 0 ]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --calls) CALLS=$2; shift 2 ;;
    --lines) LINES=$2; shift 2 ;;
    --only) PARTS=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--calls N] [--lines N] [--only flame|otlp]" >&2; exit 2 ;;
  esac
done

# UEVREC and RECEIVER name other binaries (a smoke test with debug ones); by default the
# release ones are built.
if [ -z "${UEVREC:-}" ]; then
  (cd "$ROOT" && nice cargo build --release --quiet --bin uevrec --example otlp_receiver) >&2
  UEVREC=$ROOT/target/release/uevrec
  RECEIVER=$ROOT/target/release/examples/otlp_receiver
fi
INFERNO=${INFERNO:-$(dirname "$(command -v inferno-collapse-perf 2>/dev/null || echo /nonexistent/x)")}
FLAMEGRAPH_PL_DIR=${FLAMEGRAPH_PL_DIR:-}
WORK=$(mktemp -d /dev/shm/bench-stack-outputs.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=scripts/lib/stack-bench.sh
. "$ROOT/scripts/lib/stack-bench.sh"
build_chain "$WORK" SYS_getppid

# timed NAME CMD...: run the shell command CMD; prints "NAME wall_s cpu_s".
timed() {
  local name=$1; shift
  /usr/bin/time -f '%e %U %S' -o "$WORK/time" bash -c "$*" > /dev/null 2>&1
  read -r wall user sys < "$WORK/time"
  echo "$name $wall $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')"
}

filter="id == 110"

# The chain, stopped before it starts (so that recorders can follow its pid alone: other
# programs on the machine call getppid too): start_chain sets CHAIN_PID, run_chain runs it.
start_chain() {
  bash -c 'kill -STOP $$; exec "$0" "$1" > /dev/null' "$WORK/chain" "$CALLS" &
  CHAIN_PID=$!
  until [ "$(awk '{print $3}' "/proc/$CHAIN_PID/stat" 2>/dev/null)" = T ]; do sleep 0.02; done
}
run_chain() {
  kill -CONT "$CHAIN_PID"
  wait "$CHAIN_PID"
}
if [ "${PARTS#*flame}" != "$PARTS" ]; then
echo "# inputs: $CALLS calls of the chain, recorded by uevrec -g and perf record -g" >&2
start_chain
measure "$WORK/m" "$UEVREC" record -q -g --pid "$CHAIN_PID" -e raw_syscalls:sys_enter --filter "$filter" -o "$WORK/rec.jsonl" &
while [ ! -s "$WORK/m.pid" ]; do sleep 0.05; done
for _ in $(seq 400); do grep -q '"attached"' "$WORK/rec.jsonl" 2>/dev/null && break; sleep 0.05; done
run_chain
sleep 1
kill -INT "$(cat "$WORK/m.pid")"
while [ ! -s "$WORK/m" ]; do sleep 0.05; done
python3 - "$WORK/rec.jsonl" "$WORK/stacks.jsonl" "$LINES" <<'PY'
import sys
src, dst, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
own, records = [], []
for line in open(src):
    if '"args":[424242,' in line and '"stack"' in line:
        records.append(line)
    elif line.startswith('{"time"') and '"uevrec"' in line:
        own.append(line)
with open(dst, "w") as out:
    out.writelines(own)
    n = 0
    while n < want:
        for line in records[: want - n]:
            out.write(line)
        n += min(len(records), want - n)
print(f"# {len(records)} recorded lines repeated to {want}", file=sys.stderr)
PY
rm -f "$WORK/rec.jsonl" "$WORK/m" "$WORK/m.pid"

start_chain
perf record -q -g -p "$CHAIN_PID" -e raw_syscalls:sys_enter --filter "$filter" -o "$WORK/perf.data" 2>/dev/null &
perf_pid=$!
sleep 2
run_chain
sleep 1
kill -INT "$perf_pid" 2>/dev/null || true; wait "$perf_pid" || true
# Without the tracepoint's fields: the collapsers read the classic sample lines.
read -r name wall cpu < <(timed perf-script "perf script -F comm,pid,tid,time,event,ip,sym,dso -i '$WORK/perf.data' > '$WORK/one.txt' 2>/dev/null")
samples=$(grep -c 'raw_syscalls:sys_enter' "$WORK/one.txt" || true)
echo "# perf script: $samples samples in ${wall} s wall, ${cpu} s CPU" >&2
python3 - "$WORK/one.txt" "$WORK/perf.txt" "$LINES" <<'PY'
import sys
src, dst, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
blocks = open(src).read().strip("\n").split("\n\n")
with open(dst, "w") as out:
    n = 0
    while n < want:
        for b in blocks[: want - n]:
            out.write(b + "\n\n")
        n += min(len(blocks), want - n)
print(f"# {len(blocks)} perf samples repeated to {want}", file=sys.stderr)
PY
rm -f "$WORK/one.txt" "$WORK/perf.data"
printf '# input sizes: JSON lines %s MB, perf script text %s MB\n' \
  "$(( $(stat -c %s "$WORK/stacks.jsonl") / 1000000 ))" "$(( $(stat -c %s "$WORK/perf.txt") / 1000000 ))"
"$UEVREC" flamegraph --folded "$WORK/stacks.jsonl" 2>/dev/null | sed 's/^/# folded: /' | cut -c1-200

printf '%-18s %3s %8s %8s %12s\n' tool run wall_s cpu_s records/s
for run in $(seq "$RUNS"); do
  rows=(
    "uevrec-folded|'$UEVREC' flamegraph --folded '$WORK/stacks.jsonl'"
    "uevrec-svg|'$UEVREC' flamegraph '$WORK/stacks.jsonl' -o '$WORK/out.svg'"
  )
  if [ -x "$INFERNO/inferno-collapse-perf" ]; then
    rows+=("inferno-collapse|'$INFERNO/inferno-collapse-perf' '$WORK/perf.txt'")
    rows+=("inferno-svg|'$INFERNO/inferno-collapse-perf' '$WORK/perf.txt' | '$INFERNO/inferno-flamegraph' > '$WORK/perf.svg'")
  fi
  if [ -n "$FLAMEGRAPH_PL_DIR" ] && [ -f "$FLAMEGRAPH_PL_DIR/stackcollapse-perf.pl" ]; then
    rows+=("stackcollapse.pl|perl '$FLAMEGRAPH_PL_DIR/stackcollapse-perf.pl' '$WORK/perf.txt'")
  fi
  for row in "${rows[@]}"; do
    read -r name wall cpu < <(timed "${row%%|*}" "${row#*|}")
    printf '%-18s %3s %8s %8s %12s\n' "$name" "$run" "$wall" "$cpu" \
      "$(awk -v n="$LINES" -v w="$wall" 'BEGIN { printf "%.0f", n / w }')"
  done
done
rm -f "$WORK/stacks.jsonl" "$WORK/perf.txt"
fi

# OTLP: one NAME → "records cpu_s"
otlp_run() {
  local name=$1 f=$WORK/$1.out rx_pid=""
  rm -f "$f" "$WORK/m" "$WORK/m.pid" "$WORK/rx.out"
  local g=()
  case $name in *-g) g=(-g) ;; esac
  start_chain
  g+=(--pid "$CHAIN_PID")
  case $name in
    otlp*) measure "$WORK/m" "$UEVREC" record -q "${g[@]}" --format otlp -e raw_syscalls:sys_enter --filter "$filter" -o "$f" & ;;
    export*)
      "$RECEIVER" --grpc </dev/null >"$WORK/rx.out" 2>/dev/null &
      rx_pid=$!
      for _ in $(seq 200); do grep -q listening "$WORK/rx.out" 2>/dev/null && break; sleep 0.05; done
      local port; port=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["listening"])' "$WORK/rx.out")
      measure "$WORK/m" "$UEVREC" record -q "${g[@]}" --otlp-endpoint "http://127.0.0.1:$port" \
        --otlp-protocol grpc -e raw_syscalls:sys_enter --filter "$filter" & ;;
  esac
  while [ ! -s "$WORK/m.pid" ]; do sleep 0.05; done
  sleep 2
  run_chain
  sleep 1
  kill -INT "$(cat "$WORK/m.pid")"
  while [ ! -s "$WORK/m" ]; do sleep 0.05; done
  local records
  if [ -n "$rx_pid" ]; then
    kill -INT "$rx_pid"; wait "$rx_pid" 2>/dev/null || true
    records=$(tail -1 "$WORK/rx.out" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["log_records"])')
  else
    records=$(grep -o '"linux.tracepoint","value":{"stringValue":"raw_syscalls:sys_enter"' "$f" | wc -l)
  fi
  echo "$records $(awk '{print $1 + $2}' "$WORK/m")"
}

if [ "${PARTS#*otlp}" != "$PARTS" ]; then
printf '\n%-10s %3s %9s %8s %12s\n' output run records cpu_s records/s
for run in $(seq "$RUNS"); do
  for name in otlp otlp-g export export-g; do
    read -r records cpu < <(otlp_run "$name")
    printf '%-10s %3s %9s %8.2f %12s\n' "$name" "$run" "$records" "$cpu" \
      "$(awk -v r="$records" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.0f", r / c; else print "n/a" }')"
  done
done
fi
