#!/usr/bin/env bash
# Export benchmark (issue 24): `uevrec record --otlp` against JSON lines to a file. Prints
# tables; see BENCHMARKS.md §16.
#
#   scripts/bench-export.sh [--runs N] [--calls N] [--pages P] [--outage SECS] [--rate R]
#        [--backlog SIZE] [--no-main] [--no-outage] [--no-backlog] [--results FILE]
#   scripts/bench-export.sh --report FILE      (the tables again from a --results file)
#
# Main table (--runs N, default 3; every run printed): samples' `syscall_loop` calls getppid
# --calls times (default 1,000,000) from one thread, started paused; uevrec records
# raw_syscalls:sys_enter with the filter `common_pid == TID && id == 110`, so the records it
# should see are exactly the generator's calls (as scripts/bench-live.sh does), as
#   jsonl        `-o /dev/shm/…/out.jsonl` (JSON lines to tmpfs; the baseline)
#   grpc         `--otlp-endpoint http://127.0.0.1:PORT --otlp-protocol grpc`
#   http         the same with `--otlp-protocol http/protobuf`
#   grpc-spool   grpc with `--spool /var/tmp/bench-export-spool` (the machine's disk)
#   http-spool   http/protobuf with that spool
# to examples/otlp_receiver.rs (the test receiver: tonic gRPC / hyper HTTP on 127.0.0.1,
# decoding every request and counting its log records), started fresh for each run. The
# recorder is stopped (SIGINT) once the generator is done and drains for up to 120 s.
# Measured: the generator's rate, records recorded and lost in the kernel (uevrec's
# summary), records the receiver got (or the file holds), missing = calls - received,
# recorder CPU (user+sys from wait4's rusage) per recorded record, its peak RSS, the
# delivered rate (received / time from the generator's start to the recorder's exit), the
# receiver's CPU, the 1-minute load average at the start of the run; ratios vs jsonl.
#
# Outage (--outage SECS, default 120; 0 skips): no collector at all (a closed port), a
# steady perl producer (--rate calls/s, default 20000) and `--spool`; uevrec's VmRSS, the
# spool's bytes and batches (/metrics, --metrics-listen) sampled every 5 s. Then the
# receiver starts on that port and the time until the spool is empty is measured.
#
# Backlog (--backlog SIZE, default 1G; 0 skips): no collector; syscall_loop at full speed
# until the spool holds SIZE bytes (uevrec_spool_bytes), then the receiver starts; measured
# until uevrec_spool_batches is 0: from the receiver's start (this includes uevrec's
# retry backoff, up to 30 s ±20 %) and from the first request it accepted.
#
# Needs: root, jq, curl, perl, python3, tmpfs at /dev/shm, a few GiB free in /var/tmp.
# Builds release binaries first (into $CARGO_TARGET_DIR, default ./target).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN="$TARGET/release"
RECEIVER="$BIN/examples/otlp_receiver"
GETPPID_NR=110 # x86_64; syscall_loop prints the real number, checked below
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
SHM=/dev/shm/bench-export
DISK=/var/tmp/bench-export-spool

die() { printf 'bench-export: %s\n' "$*" >&2; exit 1; }
note() { printf 'bench-export: %s\n' "$*" >&2; }

# measure OUT.json CMD...: run CMD as a child; its pid to OUT.json.pid at once, then after
# it exits {"user_s","sys_s","maxrss_kb","wall_s","status"} to OUT.json (as bench-live.sh).
measure() {
  local out=$1; shift
  "$PY" - "$out" "$@" <<'PY'
import json, os, sys, time
out, argv = sys.argv[1], sys.argv[2:]
t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
with open(out + ".pid", "w") as f:
    f.write(str(pid))
_, status, ru = os.wait4(pid, 0)
json.dump({"user_s": ru.ru_utime, "sys_s": ru.ru_stime, "maxrss_kb": ru.ru_maxrss,
           "wall_s": time.monotonic() - t0, "status": os.waitstatus_to_exitcode(status)},
          open(out, "w"))
PY
}

wait_file() { # wait_file PATH SECONDS: until PATH exists and is not empty
  local i
  for ((i = 0; i < $2 * 20; i++)); do [ -s "$1" ] && return 0; sleep 0.05; done
  return 1
}

perf_fds() { find "/proc/$1/fd" -lname 'anon_inode:*perf_event*' 2>/dev/null | wc -l; }

# wait_attached PID: until the process holds perf event fds and their number is stable
# for 0.5 s, then another second.
wait_attached() {
  local pid=$1 n prev=-1 stable=0 i
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || return 1
    n=$(perf_fds "$pid")
    if [ "$n" -gt 0 ] && [ "$n" = "$prev" ]; then
      stable=$((stable + 1))
      if [ "$stable" -ge 5 ]; then sleep 1; return 0; fi
    else
      stable=0
    fi
    prev=$n
    sleep 0.1
  done
  return 1
}

emit() { # emit KEY=VALUE... -> one JSON object line on stdout (numbers unquoted)
  local kv k v out="{" sep=""
  for kv in "$@"; do
    k=${kv%%=*}; v=${kv#*=}
    if [[ $v =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then out+="$sep\"$k\":$v"
    else out+="$sep\"$k\":\"$v\""; fi
    sep=","
  done
  printf '%s}\n' "$out"
}

load1() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s.%N; }
elapsed() { "$PY" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$1" "$2"; }
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
vmrss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# metric ADDR NAME: the sum of NAME's samples on uevrec's /metrics (0 when absent).
metric() {
  curl -s --max-time 5 "http://$1/metrics" |
    awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $2 } END { if (NR) printf "%d\n", s }'
}

# summary_field ERRFILE recorded|lost|exported|dropped|pending: from uevrec's summary.
summary_field() {
  case $2 in
    recorded) sed -n 's/^uevrec: \([0-9]*\) records, .*/\1/p' "$1" | tail -1 ;;
    lost) sed -n 's/^uevrec: [0-9]* records, \([0-9]*\) lost.*/\1/p' "$1" | tail -1 ;;
    exported) sed -n 's/^uevrec: export: \([0-9]*\) records acknowledged.*/\1/p' "$1" | tail -1 ;;
    dropped) sed -n 's/^uevrec: export: [0-9]* records acknowledged by the collector, \([0-9]*\) dropped.*/\1/p' "$1" | tail -1 ;;
    pending) sed -n 's/^uevrec: export: .* dropped, \([0-9]*\) still .*/\1/p' "$1" | tail -1 ;;
  esac
}

# start_receiver DIR KIND [PORT]: the example receiver in the background (rusage in
# DIR/rx.json, its stdout in DIR/rx.out); sets RX_WRAPPER and RX_PORT once it listens.
start_receiver() {
  local d=$1 kind=$2 port=${3:-0}
  rm -f "$d/rx.json" "$d/rx.json.pid" "$d/rx.out"
  measure "$d/rx.json" "$RECEIVER" "--$kind" --port "$port" </dev/null >"$d/rx.out" 2>"$d/rx.err" &
  RX_WRAPPER=$!
  wait_file "$d/rx.out" 20 || die "the receiver did not start: $(cat "$d/rx.err")"
  RX_PORT=$(head -1 "$d/rx.out" | jq -r .listening)
}

# stop_receiver DIR: SIGINT it, wait; its final counts line stays last in DIR/rx.out.
stop_receiver() {
  kill -INT "$(cat "$1/rx.json.pid")" 2>/dev/null || true
  wait "$RX_WRAPPER" || true
  [ -s "$1/rx.json" ] || die "the receiver left no rusage: $(cat "$1/rx.err")"
}

# start_generator DIR [ARGS...]: syscall_loop paused (--wait-signal); sets GEN_PID, FILTER.
start_generator() {
  local d=$1 ready; shift
  "$BIN/syscall_loop" --threads 1 --wait-signal "$@" >"$d/gen.out" 2>"$d/gen.err" &
  GEN_PID=$!
  wait_file "$d/gen.out" 10 || die "syscall_loop did not start: $(cat "$d/gen.err")"
  ready=$(head -1 "$d/gen.out")
  [ "$(jq -r .getppid_nr <<<"$ready")" = "$GETPPID_NR" ] ||
    die "getppid is not syscall $GETPPID_NR here; adjust GETPPID_NR"
  FILTER="($(jq -r '.tids | map("common_pid == \(.)") | join(" || ")' <<<"$ready")) && id == $GETPPID_NR"
}

# ------------------------------------------------------------ main table ------------
# main_run CONFIG RUN: one run; prints one result row.
main_run() {
  local cfg=$1 run=$2 d="$SHM/$1" port="" proto="" out=() load t0 t1 mpid rec_pid
  rm -rf "$d"; mkdir -p "$d"
  load=$(load1)
  case $cfg in
    jsonl) out=(-o "$d/out.jsonl") ;;
    grpc | grpc-spool) proto=grpc ;;
    http | http-spool) proto=http/protobuf ;;
  esac
  if [ -n "$proto" ]; then
    start_receiver "$d" "${proto%%/*}"
    port=$RX_PORT
    out=(--otlp-endpoint "http://127.0.0.1:$port" --otlp-protocol "$proto" --drain-timeout 120s)
    if [[ $cfg == *-spool ]]; then
      rm -rf "$DISK"; mkdir -p "$(dirname "$DISK")"
      out+=(--spool "$DISK" --spool-size 4G)
    fi
  fi
  start_generator "$d" --iterations "$CALLS"
  measure "$d/rec.json" "$BIN/uevrec" record -m "$PAGES" --filter "$FILTER" "${out[@]}" \
    raw_syscalls:sys_enter 2>"$d/rec.err" &
  mpid=$!
  wait_file "$d/rec.json.pid" 10 || die "$cfg: uevrec did not start"
  rec_pid=$(cat "$d/rec.json.pid")
  if ! wait_attached "$rec_pid"; then
    kill "$GEN_PID" 2>/dev/null || true
    die "$cfg: uevrec did not attach: $(cat "$d/rec.err")"
  fi
  t0=$(now)
  kill -USR1 "$GEN_PID"
  wait "$GEN_PID" || die "syscall_loop failed: $(cat "$d/gen.err")"
  kill -INT "$rec_pid" 2>/dev/null || true
  wait "$mpid" || true
  t1=$(now)
  [ -s "$d/rec.json" ] || die "$cfg: no rusage"
  [ "$(jq -r .status "$d/rec.json")" = 0 ] || die "$cfg: uevrec exited with $(jq -r .status "$d/rec.json"): $(tail -5 "$d/rec.err")"
  local done_line recorded lost received exported=0 dropped=0 pending=0 rx_cpu=0 rx_rss=0 bytes=0
  done_line=$(tail -1 "$d/gen.out")
  recorded=$(summary_field "$d/rec.err" recorded)
  lost=$(summary_field "$d/rec.err" lost)
  [ -n "$recorded" ] || die "$cfg: no summary from uevrec: $(tail -5 "$d/rec.err")"
  if [ -z "$proto" ]; then
    received=$(grep -v '"uevrec":' "$d/out.jsonl" | grep -c '"event":"sys_enter"' || true)
    bytes=$(stat -c %s "$d/out.jsonl")
    rm -f "$d/out.jsonl"
  else
    stop_receiver "$d"
    received=$(tail -1 "$d/rx.out" | jq -r .log_records)
    bytes=$(tail -1 "$d/rx.out" | jq -r .log_bytes)
    rx_cpu=$(jq -r '.user_s + .sys_s' "$d/rx.json")
    rx_rss=$(jq -r .maxrss_kb "$d/rx.json")
    exported=$(summary_field "$d/rec.err" exported)
    dropped=$(summary_field "$d/rec.err" dropped)
    pending=$(summary_field "$d/rec.err" pending)
  fi
  emit part=main config="$cfg" run="$run" load="$load" calls="$(jq -r .calls <<<"$done_line")" \
    rate="$(jq -r .per_sec <<<"$done_line")" recorded="$recorded" lost="$lost" \
    received="$received" exported="$exported" dropped="$dropped" pending="$pending" \
    cpu_s="$(jq -r '.user_s + .sys_s' "$d/rec.json")" maxrss_kb="$(jq -r .maxrss_kb "$d/rec.json")" \
    seconds="$(elapsed "$t0" "$t1")" rx_cpu_s="$rx_cpu" rx_maxrss_kb="$rx_rss" bytes="$bytes"
  rm -rf "$DISK"
}

main_part() {
  local run cfg
  for ((run = 1; run <= RUNS; run++)); do
    for cfg in jsonl grpc http grpc-spool http-spool; do
      note "main: run $run, $cfg"
      main_run "$cfg" "$run"
    done
  done
}

# --------------------------------------------------------------- outage -------------
# start_exporter DIR DEADPORT MPORT: uevrec --otlp to a port nobody listens on, with a
# spool on disk and /metrics; sets REC_WRAPPER and REC_PID.
start_exporter() {
  local d=$1 dead=$2 mport=$3 size=$4
  rm -rf "$DISK"
  measure "$d/rec.json" "$BIN/uevrec" record -m "$PAGES" --filter "$FILTER" \
    --otlp-endpoint "http://127.0.0.1:$dead" --otlp-protocol grpc --drain-timeout 120s \
    --spool "$DISK" --spool-size "$size" --metrics-listen "127.0.0.1:$mport" \
    raw_syscalls:sys_enter 2>"$d/rec.err" &
  REC_WRAPPER=$!
  wait_file "$d/rec.json.pid" 10 || die "uevrec did not start"
  REC_PID=$(cat "$d/rec.json.pid")
  wait_attached "$REC_PID" || die "uevrec did not attach: $(cat "$d/rec.err")"
}

# drain DIR DEADPORT MPORT PART: start the receiver on DEADPORT, time until the spool is
# empty; prints one row.
drain() {
  local d=$1 dead=$2 mport=$3 part=$4 t0 t1 bytes batches records rss=0 r i
  bytes=$(metric "127.0.0.1:$mport" uevrec_spool_bytes)
  batches=$(metric "127.0.0.1:$mport" uevrec_spool_batches)
  records=$(metric "127.0.0.1:$mport" uevrec_records_spooled)
  t0=$(now)
  start_receiver "$d" grpc "$dead"
  for ((i = 0; ; i++)); do
    r=$(vmrss_kb "$REC_PID"); [ "$r" -gt "$rss" ] && rss=$r
    [ "$(metric "127.0.0.1:$mport" uevrec_spool_batches)" = 0 ] && break
    [ $i -lt 36000 ] || die "$part: the spool did not drain in an hour"
    sleep 0.1
  done
  t1=$(now)
  kill -INT "$REC_PID" 2>/dev/null || true
  wait "$REC_WRAPPER" || true
  stop_receiver "$d"
  local c; c=$(tail -1 "$d/rx.out")
  emit part="$part-drain" load="$(load1)" spool_bytes="$bytes" spool_batches="$batches" \
    spooled_records="$records" seconds="$(elapsed "$t0" "$t1")" \
    first_accepted_s="$(jq -r '.first_accepted_s // 0' <<<"$c")" \
    last_accepted_s="$(jq -r '.last_accepted_s // 0' <<<"$c")" \
    received="$(jq -r .log_records <<<"$c")" rx_bytes="$(jq -r .log_bytes <<<"$c")" \
    requests="$(jq -r .log_requests <<<"$c")" max_vmrss_kb="$rss" \
    recorded="$(summary_field "$d/rec.err" recorded)" lost="$(summary_field "$d/rec.err" lost)" \
    exported="$(summary_field "$d/rec.err" exported)" dropped="$(summary_field "$d/rec.err" dropped)" \
    pending="$(summary_field "$d/rec.err" pending)" cpu_s="$(jq -r '.user_s + .sys_s' "$d/rec.json")" \
    maxrss_kb="$(jq -r .maxrss_kb "$d/rec.json")" rx_cpu_s="$(jq -r '.user_s + .sys_s' "$d/rx.json")"
}

outage_part() {
  local d="$SHM/outage" dead mport gpid t0 i
  rm -rf "$d"; mkdir -p "$d"
  dead=$(free_port); mport=$(free_port)
  note "outage: ${OUTAGE} s without a collector, a steady $RATE calls/s"
  # A steady producer: syscall(getppid, 424242, SEQ) at RATE calls/s for OUTAGE s,
  # started by SIGUSR1; one thread, so its pid is the common_pid.
  perl -MTime::HiRes=time,sleep -e '
    $| = 1; my ($rate, $secs) = @ARGV; my $go = 0; $SIG{USR1} = sub { $go = 1 };
    print "{\"pid\":$$}\n"; sleep 0.01 until $go;
    my ($t0, $n) = (time, 0);
    while ((my $e = time - $t0) < $secs) {
      my $want = int($e * $rate); syscall('$GETPPID_NR', 424242, $n++) while $n < $want; sleep 0.002;
    }
    print "{\"done\":$n,\"seconds\":", time - $t0, "}\n";' "$RATE" "$OUTAGE" >"$d/gen.out" 2>"$d/gen.err" &
  gpid=$!
  wait_file "$d/gen.out" 10 || die "the perl producer did not start: $(cat "$d/gen.err")"
  FILTER="common_pid == $gpid && id == $GETPPID_NR"
  start_exporter "$d" "$dead" "$mport" 8G
  t0=$(now)
  kill -USR1 "$gpid"
  for ((i = 0; ; i++)); do
    emit part=outage t_s="$(elapsed "$t0" "$(now)")" vmrss_kb="$(vmrss_kb "$REC_PID")" \
      spool_bytes="$(metric "127.0.0.1:$mport" uevrec_spool_bytes)" \
      spool_batches="$(metric "127.0.0.1:$mport" uevrec_spool_batches)" \
      spooled_records="$(metric "127.0.0.1:$mport" uevrec_records_spooled)" load="$(load1)"
    kill -0 "$gpid" 2>/dev/null || break
    sleep 5
  done
  wait "$gpid" || die "the perl producer failed: $(cat "$d/gen.err")"
  emit part=outage-producer calls="$(tail -1 "$d/gen.out" | jq -r .done)" \
    seconds="$(tail -1 "$d/gen.out" | jq -r .seconds)"
  sleep 2
  drain "$d" "$dead" "$mport" outage
  rm -rf "$DISK"
}

# -------------------------------------------------------------- backlog -------------
backlog_part() {
  local d="$SHM/backlog" dead mport t0 i b fill_s
  rm -rf "$d"; mkdir -p "$d"
  dead=$(free_port); mport=$(free_port)
  note "backlog: filling the spool to $BACKLOG_BYTES bytes without a collector"
  start_generator "$d" --seconds 3600
  start_exporter "$d" "$dead" "$mport" "$((BACKLOG_BYTES * 2 + (256 << 20)))"
  t0=$(now)
  kill -USR1 "$GEN_PID"
  for ((i = 0; ; i++)); do
    b=$(metric "127.0.0.1:$mport" uevrec_spool_bytes)
    [ "$b" -ge "$BACKLOG_BYTES" ] && break
    kill -0 "$REC_PID" 2>/dev/null || die "uevrec exited while filling: $(tail -5 "$d/rec.err")"
    if ((i % 50 == 0)); then
      emit part=backlog-fill t_s="$(elapsed "$t0" "$(now)")" vmrss_kb="$(vmrss_kb "$REC_PID")" \
        spool_bytes="$b" load="$(load1)"
    fi
    sleep 0.2
  done
  fill_s=$(elapsed "$t0" "$(now)")
  kill -TERM "$GEN_PID" 2>/dev/null || true
  wait "$GEN_PID" 2>/dev/null || true
  sleep 3 # what the recorder still holds reaches the spool
  emit part=backlog-fill t_s="$fill_s" vmrss_kb="$(vmrss_kb "$REC_PID")" \
    spool_bytes="$(metric "127.0.0.1:$mport" uevrec_spool_bytes)" load="$(load1)" filled=1
  drain "$d" "$dead" "$mport" backlog
  rm -rf "$DISK"
}

# ---------------------------------------------------------------- report ------------
report() { # report RESULTS.jsonl
  "$PY" - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
med = statistics.median
main = [r for r in rows if r["part"] == "main"]
if main:
    print("\n### Records/s and recorder CPU per record, every run")
    print("| run | load | output | gen calls/s | recorded | lost (kernel) | received | missing | acked / dropped / pending | delivered records/s | CPU ns/record | CPU vs jsonl | peak RSS MiB | receiver CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in main:
        base = next((x for x in main if x["run"] == r["run"] and x["config"] == "jsonl"), None)
        cpr = r["cpu_s"] / r["recorded"] * 1e9 if r["recorded"] else float("nan")
        bcpr = base["cpu_s"] / base["recorded"] * 1e9 if base and base["recorded"] else float("nan")
        ack = "—" if r["config"] == "jsonl" else f"{r['exported']} / {r['dropped']} / {r['pending']}"
        rx = "—" if r["config"] == "jsonl" else f"{r['rx_cpu_s']:.2f}"
        print(f"| {r['run']} | {r['load']} | {r['config']} | {r['rate']:,.0f} | {r['recorded']} | {r['lost']} "
              f"| {r['received']} | {r['calls'] - r['received']} | {ack} | {r['received'] / r['seconds']:,.0f} "
              f"| {cpr:.0f} | {cpr / bcpr:.2f} | {r['maxrss_kb'] / 1024:.1f} | {rx} |")
    print("\n### Medians over runs")
    print("| output | gen calls/s | gen rate vs jsonl | delivered records/s | CPU ns/record | CPU vs jsonl | peak RSS MiB | runs with loss |")
    print("|---|---|---|---|---|---|---|---|")
    cfgs = []
    for r in main:
        if r["config"] not in cfgs:
            cfgs.append(r["config"])
    bj = [r for r in main if r["config"] == "jsonl"]
    for c in cfgs:
        rs = [r for r in main if r["config"] == c]
        cpr = med([r["cpu_s"] / r["recorded"] * 1e9 for r in rs if r["recorded"]])
        rate = med([r["rate"] for r in rs])
        bc = med([r["cpu_s"] / r["recorded"] * 1e9 for r in bj if r["recorded"]]) if bj else float("nan")
        br = med([r["rate"] for r in bj]) if bj else float("nan")
        loss = sum(1 for r in rs if r["calls"] - r["received"] != 0 or r["lost"])
        print(f"| {c} | {rate:,.0f} | {rate / br:.2f} | {med([r['received'] / r['seconds'] for r in rs]):,.0f} "
              f"| {cpr:.0f} | {cpr / bc:.2f} | {med([r['maxrss_kb'] / 1024 for r in rs]):.1f} | {loss}/{len(rs)} |")
out = [r for r in rows if r["part"] == "outage"]
if out:
    prod = next((r for r in rows if r["part"] == "outage-producer"), None)
    print("\n### Collector down: uevrec's RSS while the spool grows (every 5 s)")
    if prod:
        print(f"producer: {prod['calls']} calls in {prod['seconds']:.0f} s")
    print("| t (s) | VmRSS MiB | spool MiB | spool batches | records in the spool | load |")
    print("|---|---|---|---|---|---|")
    for r in out:
        print(f"| {r['t_s']:.0f} | {r['vmrss_kb'] / 1024:.1f} | {r['spool_bytes'] / 2**20:.1f} | {r['spool_batches']} "
              f"| {r['spooled_records']} | {r['load']} |")
    rss = [r["vmrss_kb"] for r in out[1:]] or [0]
    print(f"\nVmRSS from the second sample on: min {min(rss) / 1024:.1f} MiB, max {max(rss) / 1024:.1f} MiB; "
          f"spool {out[0]['spool_bytes'] / 2**20:.1f} -> {out[-1]['spool_bytes'] / 2**20:.1f} MiB")
dr = [r for r in rows if r["part"].endswith("-drain")]
if dr:
    print("\n### Drain when the collector returns (gRPC, spool on /var/tmp)")
    print("| backlog | spool MiB | batches | records | receiver start -> spool empty (s) | first accepted request (s) | first -> last accepted (s) | MiB/s (from first request) | records/s | received | uevrec acked / dropped / pending | uevrec max VmRSS while draining MiB | peak RSS of the run MiB | recorder CPU s (whole run) | receiver CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in dr:
        span = max(r["seconds"] - r["first_accepted_s"], 1e-9)
        print(f"| {r['part'][:-6]} | {r['spool_bytes'] / 2**20:.1f} | {r['spool_batches']} | {r['spooled_records']} "
              f"| {r['seconds']:.1f} | {r['first_accepted_s']:.1f} | {r['last_accepted_s'] - r['first_accepted_s']:.1f} "
              f"| {r['spool_bytes'] / 2**20 / span:.1f} | {r['spooled_records'] / span:,.0f} | {r['received']} "
              f"| {r['exported']} / {r['dropped']} / {r['pending']} | {r['max_vmrss_kb'] / 1024:.1f} "
              f"| {r['maxrss_kb'] / 1024:.1f} | {r['cpu_s']:.1f} | {r['rx_cpu_s']:.1f} |")
fill = [r for r in rows if r["part"] == "backlog-fill" and r.get("filled")]
for r in fill:
    print(f"\nbacklog filled in {r['t_s']:.0f} s ({r['spool_bytes'] / 2**20:.0f} MiB; uevrec VmRSS then {r['vmrss_kb'] / 1024:.1f} MiB)")
PY
}

# ------------------------------------------------------------------ main ------------
ARGS="$*"
RUNS=3 CALLS=1000000 PAGES=128 OUTAGE=120 RATE=20000 BACKLOG=1G RESULTS="" REPORT=""
DO_MAIN=1 DO_OUTAGE=1 DO_BACKLOG=1
while [ $# -gt 0 ]; do
  case $1 in
    --runs) RUNS=$2; shift ;;
    --calls) CALLS=$2; shift ;;
    --pages) PAGES=$2; shift ;;
    --outage) OUTAGE=$2; shift ;;
    --rate) RATE=$2; shift ;;
    --backlog) BACKLOG=$2; shift ;;
    --no-main) DO_MAIN=0 ;;
    --no-outage) DO_OUTAGE=0 ;;
    --no-backlog) DO_BACKLOG=0 ;;
    --results) RESULTS=$2; shift ;;
    --report) REPORT=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
  shift
done
if [ -n "$REPORT" ]; then report "$REPORT"; exit 0; fi
[[ $RUNS =~ ^[0-9]+$ && $CALLS =~ ^[1-9][0-9]*$ && $OUTAGE =~ ^[0-9]+$ && $RATE =~ ^[1-9][0-9]*$ ]] ||
  die "--runs, --calls, --outage and --rate take whole numbers (--calls and --rate above 0)"
BACKLOG_BYTES=$(numfmt --from=iec "$BACKLOG" 2>/dev/null) ||
  die "--backlog $BACKLOG: a size such as 1G, 256M or 0"
[ $OUTAGE = 0 ] && DO_OUTAGE=0
[ "$BACKLOG_BYTES" = 0 ] && DO_BACKLOG=0

[ "$(id -u)" = 0 ] || die "run as root (perf_event_open on tracepoints)"
for t in jq curl perl python3 numfmt; do command -v $t >/dev/null || die "$t not found (apt-get install jq curl perl python3 coreutils)"; done
[ -d /dev/shm ] || die "/dev/shm (tmpfs) missing"

note "building release binaries into $TARGET (nice)"
(cd "$ROOT" && nice cargo build --release --quiet -p uevrec --bin uevrec --example otlp_receiver \
  -p uevrec-samples --bin syscall_loop) || die "release build failed"

RESULTS=${RESULTS:-$(mktemp /tmp/bench-export.XXXXXX.jsonl)}
: >"$RESULTS"
note "raw results: $RESULTS"
{
  echo "## uevrec export benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "command: scripts/bench-export.sh $ARGS (runs $RUNS, calls $CALLS, ring $PAGES pages/CPU, outage $OUTAGE s at $RATE calls/s, backlog $BACKLOG)"
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs, kernel $(uname -r), load before start: $(cut -d' ' -f1-3 /proc/loadavg); spool on $(df --output=source,fstype "$(dirname "$DISK")" | tail -1 | tr -s ' ')"
  echo "uevrec: $(git -C "$ROOT" rev-parse --short HEAD)"
} >"$RESULTS.head"
mkdir -p "$SHM"
if [ $DO_MAIN = 1 ]; then main_part >>"$RESULTS"; fi
if [ $DO_OUTAGE = 1 ]; then outage_part >>"$RESULTS"; fi
if [ $DO_BACKLOG = 1 ]; then backlog_part >>"$RESULTS"; fi
rm -rf "$SHM"
cat "$RESULTS.head"
report "$RESULTS"
