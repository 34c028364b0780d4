#!/usr/bin/env bash
# Live benchmark of uevrec against perf (issue 5). Prints one table; see BENCHMARKS.md.
#
#   [UEVREC_BENCH_RATE=path/to/rate] scripts/bench-live.sh [--quick] [--runs N] [--calls N] [--vm-calls N] [--pages P]
#                         [--threads "1 2"] [--busy N] [--no-script] [--no-extras] [--noprio] [--stop-runs N]
#                         [--no-host] [--no-vm] [--results FILE] | --report FILE (tables from a --results file)
#
# Host part (this kernel, native speed): samples' `syscall_loop` calls getppid in a tight
# loop from 1 and from 2 threads, started paused; the recorder attaches to
# raw_syscalls:sys_enter with the filter `(common_pid == TID || ...) && id == 110`, so the
# events it should see are exactly the generator's calls. Per run and thread count:
#   untraced      the generator alone
#   uevrec        `uevrec record -q -m P --filter F -o tmpfs/FILE raw_syscalls:sys_enter`
#   uevrec-ftrace the same with `--backend ftrace` (a tracefs instance, trace_pipe_raw)
#   uevrec-raw    `uevrec record -q -m P --filter F --raw tmpfs/FILE raw_syscalls:sys_enter`
#                 (a perf.data; counted with `uevrec decode`, not timed)
#   uevrec-ftrace-raw the same with `--backend ftrace`
#   uevrec-ftrace-dat the same with `--raw-format trace-dat` (a trace.dat of the rings'
#                 pages spliced whole; counted with `uevrec decode`, not timed)
#   perf-record   `perf record -a -m P --filter F -e raw_syscalls:sys_enter -o tmpfs/FILE`
#   perf-script   `perf script` of that perf.data into a tmpfs text file
# (perf-record+script is the sum of the last two; --no-script leaves perf script out).
# --threads picks the generator thread counts (default "1 2"); --busy N runs N competing
# busy loops (`sh -c 'while :; do :; done'`) during every host run, untraced and traced, so
# the recorder must win CPU time from them (issue 16: loss under contention); each row
# notes the busy loops and the 1-minute load average at its start. --noprio adds a third
# recorder per run, uevrec without CAP_SYS_NICE (`setpriv --bounding-set=-sys_nice`), whose
# threads therefore keep ordinary priorities (src/system/sched.rs): the same binary before and
# after the fix of issue 16's loss. Measured: generator rate, events
# recorded, events the recorder says it lost, missing = calls - recorded, recorder CPU
# (user+sys from wait4's rusage, µs resolution), peak RSS (ru_maxrss), output bytes.
# Then (unless --no-extras): uevrec's peak RSS for 10x the calls (1 thread), and uevrec's
# CPU while idle (attached, filter matching nothing).
# Stop time (--stop-runs N, default 2; 0 with --quick): `uevrec record -q syscalls:*` and
# `perf record -a -e 'syscalls:*'` (every syscall tracepoint on every CPU), SIGINT once
# attached; measured from the signal to the recorder's exit, and for uevrec also until its
# background closer (`uevrec-close`, see src/capture/perf/reaper.rs) is gone.
# VM part (scripts/…/run.sh boots a kernel with user_events): samples' `rate` producer
# writes user events while uevrec (both backends) or perf record is attached; same
# measures, ratios only.
#
# Needs: root, perf, jq, python3, tmpfs at /dev/shm. Builds release binaries first.
# Never run two benchmarks at once. Exit status 0 also when a target is missed (the table
# says so); 1 when a measurement could not be made.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF="$ROOT/scripts/bench-live.sh"
BIN="$ROOT/target/release"
GETPPID_NR=110   # x86_64; syscall_loop prints the real number, checked below
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
RATE=${UEVREC_BENCH_RATE:-$BIN/rate}   # samples' rate producer (VM part)

die() { printf 'bench-live: %s\n' "$*" >&2; exit 1; }
note() { printf 'bench-live: %s\n' "$*" >&2; }

# --- rusage wrapper: run a command as a child, report its own CPU and peak RSS --------
# measure OUT.json CMD...  writes the child's pid to OUT.json.pid at once, then after it
# exits {"user_s","sys_s","maxrss_kb","wall_s","status"} to OUT.json.
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
# for 0.5 s, then another second (perf enables its events after synthesizing /proc).
wait_attached() {
  local pid=$1 n prev=-1 stable=0 i
  for ((i = 0; i < 200; i++)); do
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

# wait_ftrace_enabled PID SYSTEM EVENT: until uevrec PID's tracefs instance (ftrace
# backend) has enabled SYSTEM:EVENT, then another second like wait_attached.
wait_ftrace_enabled() {
  local f i
  f=$(awk '$3 == "tracefs" { print $2; exit }' /proc/mounts)/instances/uevrec-$1/events/$2/$3/enable
  for ((i = 0; i < 200; i++)); do
    kill -0 "$1" 2>/dev/null || return 1
    if [ "$(cat "$f" 2>/dev/null)" = 1 ]; then sleep 1; return 0; fi
    sleep 0.1
  done
  return 1
}

# perf_counts PERF.DATA EVENT: prints "SAMPLES LOST" for EVENT from `perf report --stats`.
perf_counts() {
  perf report -i "$1" --stats 2>/dev/null | awk -v ev="$2 stats:" '
    $0 ~ /stats:$/ { inside = (index($0, ev) > 0); next }
    inside && /SAMPLE events:/ && !/LOST/ { s = $3 }
    inside && /LOST_SAMPLES events:/ { l = $3 }
    END { printf "%d %d\n", s, l }'
}

# stop_recorder PIDFILE: SIGINT the recorder (it drains and exits), wait for the wrapper.
stop_recorder() {
  local rpid
  rpid=$(cat "$1")
  kill -INT "$rpid" 2>/dev/null || true
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

json_field() { jq -r "$2" "$1"; }

# ---------------------------------------------------------------- host part ----------
BUSY_PIDS=()
start_busy() { # BUSY competing busy loops, until stop_busy
  local i
  for ((i = 0; i < BUSY; i++)); do sh -c 'while :; do :; done' & BUSY_PIDS+=($!); done
}
stop_busy() {
  local p
  for p in "${BUSY_PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  BUSY_PIDS=()
}
load1() { cut -d' ' -f1 /proc/loadavg; }

# host_traced TOOL THREADS CALLS RUN DIR: one traced run; prints result lines.
host_traced() {
  local tool=$1 threads=$2 calls=$3 run=$4 d=$5 gpid filter rec_pid ready done_line load
  rm -rf "$d"; mkdir -p "$d"
  load=$(load1)
  start_busy
  "$BIN/syscall_loop" --threads "$threads" --iterations "$calls" --wait-signal \
    >"$d/gen.out" 2>"$d/gen.err" &
  gpid=$!
  wait_file "$d/gen.out" 10 || die "syscall_loop did not start: $(cat "$d/gen.err")"
  ready=$(head -1 "$d/gen.out")
  [ "$(jq -r .getppid_nr <<<"$ready")" = "$GETPPID_NR" ] ||
    die "getppid is not syscall $GETPPID_NR here; adjust GETPPID_NR"
  filter="($(jq -r '.tids | map("common_pid == \(.)") | join(" || ")' <<<"$ready")) && id == $GETPPID_NR"
  case $tool in
    uevrec | uevrec-ftrace)
      measure "$d/rec.json" "$BIN/uevrec" record -q -m "$PAGES" --filter "$filter" \
        --backend "$(backend_of $tool)" -o "$d/out.jsonl" raw_syscalls:sys_enter 2>"$d/rec.err" &
      ;;
    uevrec-raw | uevrec-ftrace-raw | uevrec-ftrace-dat)
      measure "$d/rec.json" "$BIN/uevrec" record -q -m "$PAGES" --filter "$filter" \
        --backend "$(backend_of $tool)" --raw "$d/out.data" --raw-format "$(raw_format_of $tool)" \
        raw_syscalls:sys_enter 2>"$d/rec.err" &
      ;;
    uevrec-noprio) # without CAP_SYS_NICE: its threads keep ordinary priorities (src/system/sched.rs)
      measure "$d/rec.json" setpriv --bounding-set=-sys_nice "$BIN/uevrec" record -q -m "$PAGES" \
        --filter "$filter" -o "$d/out.jsonl" raw_syscalls:sys_enter 2>"$d/rec.err" &
      ;;
    perf)
      measure "$d/rec.json" perf record -a -m "$PAGES" -e raw_syscalls:sys_enter \
        --filter "$filter" -o "$d/perf.data" 2>"$d/rec.err" &
      ;;
  esac
  local mpid=$!
  wait_file "$d/rec.json.pid" 10 || die "$tool did not start"
  rec_pid=$(cat "$d/rec.json.pid")
  if ! recorder_attached "$tool" "$rec_pid" raw_syscalls sys_enter; then
    kill "$gpid" 2>/dev/null || true
    die "$tool did not attach: $(cat "$d/rec.err")"
  fi
  kill -USR1 "$gpid"
  wait "$gpid" || die "syscall_loop failed: $(cat "$d/gen.err")"
  done_line=$(tail -1 "$d/gen.out")
  stop_recorder "$d/rec.json.pid"
  wait "$mpid" || true
  stop_busy
  [ -s "$d/rec.json" ] || die "$tool: no rusage"
  local status; status=$(json_field "$d/rec.json" .status)
  local rate; rate=$(jq -r .per_sec <<<"$done_line")
  local got_calls; got_calls=$(jq -r .calls <<<"$done_line")
  if [ "$tool" != perf ] && [ "$status" != 0 ]; then
    die "$tool exited with status $status: $(tail -5 "$d/rec.err")"
  fi
  # perf record ends with status 0 or by "signal 2" depending on version; both fine.
  recorder_rows "$d" "$tool" raw_syscalls sys_enter "$got_calls" "$rate" \
    host=1 threads="$threads" run="$run" busy="$BUSY" load="$load"
}

# backend_of TOOL: uevrec's --backend for a tool name.
backend_of() { case $1 in uevrec-ftrace | uevrec-ftrace-raw | uevrec-ftrace-dat) echo ftrace ;; *) echo perf ;; esac; }

# raw_format_of TOOL: uevrec's --raw-format for a --raw tool name.
raw_format_of() { case $1 in uevrec-ftrace-dat) echo trace-dat ;; *) echo perf-data ;; esac; }

# is_raw TOOL: whether the tool writes a --raw file (counted with uevrec decode).
is_raw() { case $1 in uevrec-raw | uevrec-ftrace-raw | uevrec-ftrace-dat) return 0 ;; *) return 1 ;; esac; }

# recorder_attached TOOL PID SYSTEM EVENT: until the recorder is recording.
recorder_attached() {
  if [ "$(backend_of "$1")" = ftrace ]; then wait_ftrace_enabled "$2" "$3" "$4"; else wait_attached "$2"; fi
}

# recorder_rows DIR TOOL SYSTEM EVENT CALLS RATE KEY=VALUE...: the result rows of one
# recording in DIR (rusage in rec.json; out.jsonl for uevrec, perf.data for perf, which
# is then also converted by a measured `perf script`), each prefixed with KEY=VALUEs.
recorder_rows() {
  local d=$1 tool=$2 system=$3 event=$4 calls=$5 rate=$6 events lost counts distinct
  shift 6
  local cpu rss
  cpu=$(json_field "$d/rec.json" '.user_s + .sys_s')
  rss=$(json_field "$d/rec.json" .maxrss_kb)
  if [ "$tool" != perf ] && ! is_raw "$tool"; then
    [ -e "$d/out.jsonl" ] || die "uevrec wrote no output: $(tail -5 "$d/rec.err")"
    events=$(grep -v '"uevrec":' "$d/out.jsonl" | grep -c "\"event\":\"$event\"" || true) # not the schema line
    lost=$({ grep '"uevrec":"lost"' "$d/out.jsonl" || true; } | jq -s 'map(.lost) | add // 0')
    distinct=$events
    if [ "$system" = user_events ]; then # rate's records carry (thread, seq): count each once
      distinct=$(grep -o '"thread":[0-9]*,"seq":[0-9]*' "$d/out.jsonl" | sort -u | wc -l)
    fi
    emit "$@" tool="$tool" calls="$calls" rate="$rate" events="$events" lost="$lost" \
      distinct="$distinct" missing=$((calls - distinct)) cpu_s="$cpu" maxrss_kb="$rss" \
      bytes="$(stat -c %s "$d/out.jsonl")"
    rm -f "$d/out.jsonl"
    return
  fi
  if is_raw "$tool"; then
    [ -s "$d/out.data" ] || die "uevrec --raw wrote no file: $(tail -5 "$d/rec.err")"
    "$BIN/uevrec" decode -q "$d/out.data" >"$d/out.jsonl" || die "uevrec decode of the --raw file failed"
    events=$(grep -v '"uevrec":' "$d/out.jsonl" | grep -c "\"event\":\"$event\"" || true) # not the schema line
    lost=$({ grep '"uevrec":"lost"' "$d/out.jsonl" || true; } | jq -s 'map(.lost) | add // 0')
    emit "$@" tool="$tool" calls="$calls" rate="$rate" events="$events" lost="$lost" \
      distinct="$events" missing=$((calls - events)) cpu_s="$cpu" maxrss_kb="$rss" \
      bytes="$(stat -c %s "$d/out.data")"
    rm -f "$d/out.jsonl" "$d/out.data"
    return
  fi
  [ -s "$d/perf.data" ] || die "perf record wrote nothing: $(tail -5 "$d/rec.err")"
  counts=$(perf_counts "$d/perf.data" "$system:$event")
  events=${counts% *}; lost=${counts#* }
  measure "$d/script.json" sh -c 'exec perf script -i "$1" >"$2" 2>"$3"' sh \
    "$d/perf.data" "$d/perf.txt" "$d/script.err"
  distinct=$events
  if [ "$system" = user_events ]; then
    # perf 6.1 in the VM writes some samples twice (same CPU, time and seq): count once.
    distinct=$(grep -o 'thread=[0-9]* seq=[0-9]*' "$d/perf.txt" | sort -u | wc -l)
  fi
  emit "$@" tool=perf-record calls="$calls" rate="$rate" events="$events" lost="$lost" \
    distinct="$distinct" missing=$((calls - distinct)) cpu_s="$cpu" maxrss_kb="$rss" \
    bytes="$(stat -c %s "$d/perf.data")"
  if [ "$NO_SCRIPT" = 1 ]; then rm -f "$d/perf.data"; return; fi
  events=$(grep -c " $system:$event:" "$d/perf.txt" || true)
  emit "$@" tool=perf-script calls="$calls" rate="$rate" events="$events" lost="$lost" \
    distinct="$distinct" missing=$((calls - distinct)) \
    cpu_s="$(json_field "$d/script.json" '.user_s + .sys_s')" \
    maxrss_kb="$(json_field "$d/script.json" .maxrss_kb)" bytes="$(stat -c %s "$d/perf.txt")"
  rm -f "$d/perf.data" "$d/perf.txt"
}

host_untraced() { # host_untraced THREADS CALLS RUN
  local line load
  load=$(load1)
  start_busy
  line=$("$BIN/syscall_loop" --threads "$1" --iterations "$2" | tail -1)
  stop_busy
  emit host=1 threads="$1" run="$3" busy="$BUSY" load="$load" tool=untraced \
    calls="$(jq -r .calls <<<"$line")" rate="$(jq -r .per_sec <<<"$line")"
}

# idle CPU: uevrec attached to raw_syscalls:sys_enter with a filter nothing matches.
host_idle() { # host_idle SECONDS DIR
  local d=$2 rpid t0 t1 c0 c1
  rm -rf "$d"; mkdir -p "$d"
  measure "$d/rec.json" "$BIN/uevrec" record -q -m "$PAGES" --filter 'common_pid == 0' \
    -o "$d/out.jsonl" raw_syscalls:sys_enter 2>"$d/rec.err" &
  local mpid=$!
  wait_file "$d/rec.json.pid" 10 || die "uevrec did not start"
  rpid=$(cat "$d/rec.json.pid")
  wait_attached "$rpid" || die "uevrec did not attach: $(cat "$d/rec.err")"
  # on-CPU nanoseconds of all its threads (schedstat field 1), over the idle window
  task_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
  c0=$(task_ns "$rpid"); t0=$(date +%s%N)
  sleep "$1"
  c1=$(task_ns "$rpid"); t1=$(date +%s%N)
  kill -INT "$rpid"; wait "$mpid" || true
  emit host=1 tool=uevrec-idle seconds="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) / 1e9 }')" \
    cpu_s="$(awk -v a="$c0" -v b="$c1" 'BEGIN { print (b - a) / 1e9 }')" \
    maxrss_kb="$(json_field "$d/rec.json" .maxrss_kb)"
}

host_part() {
  local d=/dev/shm/uevrec-bench.$$ run threads
  mkdir -p "$d"
  for ((run = 1; run <= RUNS; run++)); do
    for threads in $THREADS; do
      note "host run $run/$RUNS, $threads thread(s), $CALLS calls, $BUSY busy loop(s), load $(load1)"
      host_untraced "$threads" "$CALLS" "$run"
      host_traced uevrec "$threads" "$CALLS" "$run" "$d/u"
      host_traced uevrec-ftrace "$threads" "$CALLS" "$run" "$d/f"
      host_traced uevrec-raw "$threads" "$CALLS" "$run" "$d/r"
      host_traced uevrec-ftrace-raw "$threads" "$CALLS" "$run" "$d/r"
      host_traced uevrec-ftrace-dat "$threads" "$CALLS" "$run" "$d/r"
      host_traced perf "$threads" "$CALLS" "$run" "$d/p"
      if [ "$NOPRIO" = 1 ]; then host_traced uevrec-noprio "$threads" "$CALLS" "$run" "$d/u"; fi
    done
  done
  if [ "$NO_EXTRAS" = 0 ]; then
    note "host: uevrec peak RSS at ${CALLS} and $((CALLS * 10)) calls (1 thread)"
    host_traced uevrec 1 "$CALLS" 1 "$d/u" | jq -c '.tool = "uevrec-rss-1x"'
    host_traced uevrec 1 "$((CALLS * 10))" 1 "$d/u" | jq -c '.tool = "uevrec-rss-10x"'
    note "host: uevrec idle for ${IDLE_S}s"
    host_idle "$IDLE_S" "$d/i"
  fi
  for ((run = 1; run <= STOP_RUNS; run++)); do
    note "host: stop time for syscalls:*, run $run/$STOP_RUNS"
    host_stop uevrec "$run" "$d/s"
    host_stop perf "$run" "$d/s"
  done
  rm -rf "$d"
}

reapers() { { pgrep -x uevrec-close || true; } | wc -l; }

# host_stop TOOL RUN DIR: attach to syscalls:* on every CPU, SIGINT, time until exit.
host_stop() {
  local tool=$1 run=$2 d=$3 rpid mpid t0 t1 t2 i load
  rm -rf "$d"; mkdir -p "$d"
  # A previous run's background close holds the kernel's event_mutex: wait it out.
  for ((i = 0; i < 1200 && $(reapers) > 0; i++)); do sleep 0.1; done
  load=$(load1)
  if [ "$tool" = uevrec ]; then
    measure "$d/rec.json" "$BIN/uevrec" record -q -o "$d/out.jsonl" 'syscalls:*' 2>"$d/rec.err" &
  else
    measure "$d/rec.json" perf record -q -a -e 'syscalls:*' -o "$d/perf.data" 2>"$d/rec.err" &
  fi
  mpid=$!
  wait_file "$d/rec.json.pid" 10 || die "$tool did not start"
  rpid=$(cat "$d/rec.json.pid")
  wait_attached "$rpid" || die "$tool did not attach to syscalls:*: $(tail -3 "$d/rec.err")"
  local fds; fds=$(perf_fds "$rpid")
  t0=$(date +%s%N)
  kill -INT "$rpid"
  wait "$mpid" || true
  t1=$(date +%s%N)
  t2=$t1
  if [ "$tool" = uevrec ]; then
    for ((i = 0; i < 1200 && $(reapers) > 0; i++)); do sleep 0.05; done
    t2=$(date +%s%N)
  fi
  emit host=1 tool="$tool-stop" run="$run" load="$load" perf_fds="$fds" \
    stop_s="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) / 1e9 }')" \
    closed_s="$(awk -v a="$t0" -v b="$t2" 'BEGIN { print (b - a) / 1e9 }')"
  rm -rf "$d"
}

# ------------------------------------------------------------------ VM part ----------
# Runs inside the guest: rate producer with uevrec / perf record attached.
vm_guest() {
  local d=/dev/shm/uevrec-bench run tool name status
  mkdir -p "$d"
  local threads
  for ((run = 1; run <= RUNS; run++)); do
   for threads in $THREADS; do
    for tool in uevrec uevrec-ftrace perf; do
      name="uevrs_bench_${run}_$threads"
      rm -f "$d"/*
      "$RATE" --name "$name" --events "$VM_CALLS" --threads "$threads" --timeout-secs 60 \
        --settle-ms 500 >"$d/rate.out" 2>"$d/rate.err" &
      local ppid=$!
      wait_file "$d/rate.out" 20 || die "rate did not register: $(cat "$d/rate.err")"
      if [ $tool != perf ]; then
        measure "$d/rec.json" "$BIN/uevrec" record -q -m "$PAGES" -o "$d/out.jsonl" \
          --backend "$(backend_of $tool)" "user_events:$name" 2>"$d/rec.err" &
      else
        measure "$d/rec.json" perf record -a -m "$PAGES" -e "user_events:$name" \
          -o "$d/perf.data" 2>"$d/rec.err" &
      fi
      local mpid=$!
      status=0; wait "$ppid" || status=$?
      [ $status = 0 ] || die "rate failed ($status) with $tool: $(cat "$d/rate.err" "$d/rec.err")"
      local done_line; done_line=$(tail -1 "$d/rate.out")
      stop_recorder "$d/rec.json.pid"
      wait "$mpid" || true
      recorder_rows "$d" "$tool" user_events "$name" "$(jq -r .written <<<"$done_line")" \
        "$(jq -r .per_sec <<<"$done_line")" vm=1 run="$run" threads="$threads"
    done
   done
  done
}

vm_runner() {
  local r
  # Like scripts/vm-test.sh: the shared prebuilt kernel when it is there (fast path),
  # else the project's own runner (which builds a kernel on first use).
  for r in "${UEVREC_BENCH_VM_RUN:-}" "$ROOT/../shared/vm/run.sh" "$ROOT/vm/run.sh"; do
    [ -n "$r" ] && [ -x "$r" ] && { echo "$r"; return 0; }
  done
  return 1
}

vm_part() {
  local runner status=0
  if ! runner=$(vm_runner); then
    note "VM part NOT RUN: no VM runner (vm/run.sh or UEVREC_BENCH_VM_RUN)"
    emit vm=1 tool=skipped reason="no VM runner"
    return 0
  fi
  if [ ! -x "$RATE" ]; then
    note "VM part NOT RUN: $RATE missing (the samples rate producer; build it or set UEVREC_BENCH_RATE)"
    emit vm=1 tool=skipped reason="rate producer not built"
    return 0
  fi
  note "VM part via $runner ($RUNS runs, $VM_CALLS events each)"
  UEVREC_VM_TIMEOUT=${UEVREC_VM_TIMEOUT:-900} "$runner" "$SELF" --vm-guest --runs "$RUNS" \
    --vm-calls "$VM_CALLS" --pages "$PAGES" --threads "$THREADS" || status=$?
  if [ $status != 0 ]; then
    note "VM part FAILED (status $status)"
    emit vm=1 tool=skipped reason="VM run failed with status $status"
  fi
}

# ------------------------------------------------------------------ table ------------
report() { # report RESULTS.jsonl
  "$PY" - "$1" "$CALLS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
calls_n = int(sys.argv[2])
med = statistics.median

def per_event(r, key):
    return r[key] / r["events"] if r.get("events") else float("nan")

def fmt(x, digits=2):
    if isinstance(x, float) and x != x:
        return "n/a"
    return f"{x:.{digits}f}"

def table(where, group_key, groups):
    print(f"\n### {where}: medians over runs")
    print("| {} | recorder | gen rate (M calls/s) | rate vs untraced | events | duplicates | lost (reported) | missing | CPU ns/event | peak RSS (MiB) | bytes/event |".format(group_key))
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for g, sel in groups:
        base = [r["rate"] for r in sel if r["tool"] == "untraced"]
        for tool in ("untraced", "uevrec", "uevrec-ftrace", "uevrec-raw", "uevrec-ftrace-raw", "uevrec-ftrace-dat", "perf-record", "perf-script", "perf-record+script"):
            rs = [r for r in sel if r["tool"] == tool]
            if not rs:
                continue
            rate = med([r["rate"] for r in rs]) / 1e6
            if tool == "untraced":
                print(f"| {g} | (none) | {fmt(rate, 3)} | 1 | | | | | | | |")
                continue
            vs = fmt(med([r["rate"] for r in rs]) / med(base), 3) if base else "n/a"
            print(f"| {g} | {tool} | {fmt(rate, 3)} | {vs} | {int(med([r['events'] for r in rs]))} "
                  f"| {int(med([r['events'] - r.get('distinct', r['events']) for r in rs]))} "
                  f"| {int(med([r['lost'] for r in rs]))} | {int(med([r['missing'] for r in rs]))} "
                  f"| {fmt(med([per_event(r, 'cpu_s') * 1e9 for r in rs]), 0)} "
                  f"| {fmt(med([r['maxrss_kb'] / 1024 for r in rs]), 1)} "
                  f"| {fmt(med([per_event(r, 'bytes') for r in rs]), 1)} |")

def combine(rows):
    """perf-record+script rows: CPU summed, RSS the larger, bytes the text's."""
    out = []
    for r in rows:
        if r["tool"] != "perf-record":
            continue
        s = [x for x in rows if x["tool"] == "perf-script" and x.get("run") == r.get("run")
             and x.get("threads") == r.get("threads") and x.get("vm") == r.get("vm")]
        if s:
            s = s[0]
            out.append(dict(s, tool="perf-record+script", cpu_s=r["cpu_s"] + s["cpu_s"],
                            maxrss_kb=max(r["maxrss_kb"], s["maxrss_kb"]),
                            lost=r["lost"], missing=max(r["missing"], s["missing"])))
    return out

def ratios(sel):
    """Per run: uevrec / perf for CPU per event, RSS, bytes per event; medians of them."""
    res = {"cpu_vs_record": [], "cpu_vs_record_script": [], "rss_vs_record": [],
           "bytes_vs_record": [], "bytes_vs_text": [], "rate_vs_record": [],
           "raw_cpu_vs_record": [], "raw_bytes_vs_record": []}
    keys = sorted({(r.get("run"), r.get("threads")) for r in sel if r["tool"] == "uevrec"})
    for k in keys:
        pick = lambda t: next((r for r in sel if r["tool"] == t and (r.get("run"), r.get("threads")) == k), None)
        u, p, c = pick("uevrec"), pick("perf-record"), pick("perf-record+script")
        if not (u and p and u["events"] and p["events"]):
            continue
        res["cpu_vs_record"].append(per_event(u, "cpu_s") / per_event(p, "cpu_s"))
        res["rss_vs_record"].append(u["maxrss_kb"] / p["maxrss_kb"])
        res["bytes_vs_record"].append(per_event(u, "bytes") / per_event(p, "bytes"))
        res["rate_vs_record"].append(u["rate"] / p["rate"])
        raw = pick("uevrec-raw")
        if raw and raw["events"]:
            res["raw_cpu_vs_record"].append(per_event(raw, "cpu_s") / per_event(p, "cpu_s"))
            res["raw_bytes_vs_record"].append(per_event(raw, "bytes") / per_event(p, "bytes"))
        if c and c["events"]:  # not with --no-script
            res["cpu_vs_record_script"].append(per_event(u, "cpu_s") / per_event(c, "cpu_s"))
            res["bytes_vs_text"].append(per_event(u, "bytes") / per_event(c, "bytes"))
    return res

def ratio_table(where, group_key, groups):
    print(f"\n### {where}: uevrec / perf, per run, then the median (runs: n)")
    print(f"| {group_key} | CPU/event vs perf record | CPU/event vs perf record + perf script | peak RSS vs perf record | bytes/event vs perf.data | bytes/event vs perf script text | gen rate vs perf record | --raw CPU/event vs perf record | --raw bytes/event vs perf.data | n |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    allr = {}
    for g, sel in groups:
        res = ratios(sel)
        n = len(res["cpu_vs_record"])
        for k, v in res.items():
            allr.setdefault(k, []).extend(v)
        cells = [fmt(med(res[k]), 3) if res[k] else "n/a" for k in
                 ("cpu_vs_record", "cpu_vs_record_script", "rss_vs_record", "bytes_vs_record",
                  "bytes_vs_text", "rate_vs_record", "raw_cpu_vs_record", "raw_bytes_vs_record")]
        print(f"| {g} | " + " | ".join(cells) + f" | {n} |")
    return allr

skipped = [r for r in rows if r["tool"] == "skipped"]
host = [r for r in rows if r.get("host")]
vm = [r for r in rows if r.get("vm") and r["tool"] != "skipped"]
verdicts = []
if host:
    main = [r for r in host if r["tool"] in ("untraced", "uevrec", "uevrec-ftrace", "uevrec-raw", "uevrec-ftrace-raw", "uevrec-ftrace-dat", "perf-record", "perf-script")]
    main += combine(main)
    groups = [(f"{t} thread{'s' if t > 1 else ''}", [r for r in main if r.get("threads") == t])
              for t in sorted({r["threads"] for r in main})]
    table("Host, raw_syscalls:sys_enter, getppid loop", "threads", groups)
    hr = ratio_table("Host", "threads", groups)
    if hr.get("raw_cpu_vs_record"):
        runs = ", ".join(f"{x:.3f}" for x in hr["raw_cpu_vs_record"])
        m = med(hr["raw_cpu_vs_record"])
        verdicts.append(("host: record --raw CPU/event <= perf record's", m <= 1.0,
                         f"median ratio {m:.3f}; every run: {runs}"))
    if hr.get("cpu_vs_record_script"):
        m = med(hr["cpu_vs_record_script"])
        verdicts.append(("host: uevrec CPU/event <= 1/10 of perf record + perf script",
                         m <= 0.1, f"median ratio {m:.3f}"))
    # zero loss wherever perf record had zero loss: perf reported no loss and kept at
    # least every call (it may have more: perf 6.1 writes some samples twice)
    pairs = []
    for r in main:
        if r["tool"] == "perf-record" and r["missing"] <= 0 and r["lost"] == 0:
            u = next((x for x in main if x["tool"] == "uevrec" and x["run"] == r["run"]
                      and x["threads"] == r["threads"]), None)
            if u:
                pairs.append(u["missing"] == 0 and u["lost"] == 0)
    lossy_perf = sum(1 for r in main if r["tool"] == "perf-record" and (r["missing"] > 0 or r["lost"]))
    # every run, not a median: records lost (reported, or missing if more) by each tool
    # on the same load (issue 16: uevrec's loss <= perf record's in every run)
    gone = lambda r: max(r["lost"], r["missing"], 0)
    print("\n### Host: loss in every run (lost = max(reported lost, calls - recorded))")
    noprio = [x for x in host if x["tool"] == "uevrec-noprio"]
    print("| run | threads | busy loops | load at start | calls | uevrec lost | perf record lost | uevrec <= perf |"
          + (" uevrec without priorities lost |" if noprio else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|" if noprio else ""))
    le = []
    for r in sorted((x for x in main if x["tool"] == "perf-record"), key=lambda x: (x["threads"], x["run"])):
        u = next((x for x in main if x["tool"] == "uevrec" and x["run"] == r["run"]
                  and x["threads"] == r["threads"]), None)
        if not u:
            continue
        le.append(gone(u) <= gone(r))
        n = next((x for x in noprio if x["run"] == r["run"] and x["threads"] == r["threads"]), None)
        print(f"| {r['run']} | {r['threads']} | {r.get('busy', 0)} | {u.get('load', 'n/a')} / {r.get('load', 'n/a')} "
              f"| {r['calls']} | {gone(u)} | {gone(r)} | {'yes' if le[-1] else 'NO'} |"
              + (f" {gone(n) if n else 'n/a'} |" if noprio else ""))
    verdicts.append(("host: uevrec loss <= perf record loss in every run", all(le) if le else None,
                     f"{sum(le)}/{len(le)} runs"))
    ft_rate = []
    for r in main:
        if r["tool"] == "perf-record":
            f = next((x for x in main if x["tool"] == "uevrec-ftrace" and x["run"] == r["run"]
                      and x["threads"] == r["threads"]), None)
            if f:
                ft_rate.append(f["rate"] / r["rate"])
    for ftool, what in (("uevrec-ftrace", "--backend ftrace"), ("uevrec-ftrace-raw", "--backend ftrace --raw"),
                        ("uevrec-ftrace-dat", "--backend ftrace --raw --raw-format trace-dat")):
        by_threads = {}
        for r in main:
            if r["tool"] == "perf-record":
                f = next((x for x in main if x["tool"] == ftool and x["run"] == r["run"]
                          and x["threads"] == r["threads"]), None)
                if f:
                    by_threads.setdefault(r["threads"], []).append(f["rate"] / r["rate"])
        for t, ft_rate in sorted(by_threads.items()):
            verdicts.append((f"host, {t} thread(s): traced program >= 2x faster under uevrec {what} than under perf record",
                             min(ft_rate) >= 2.0,
                             "per run: " + ", ".join(f"{x:.2f}x" for x in ft_rate)))
        ft = [r for r in main if r["tool"] == ftool]
        if ft:
            verdicts.append((f"host: uevrec {what} zero loss",
                             all(r["missing"] == 0 and r["lost"] == 0 for r in ft),
                             "lost per run: " + ", ".join(str(max(r["lost"], r["missing"])) for r in ft)))
    verdicts.append(("host: uevrec zero loss wherever perf record had zero loss",
                     all(pairs) if pairs else None,
                     f"{sum(pairs)}/{len(pairs)} runs where perf lost nothing; perf lost events in {lossy_perf} run(s)"))
    r1 = [r for r in host if r["tool"] == "uevrec-rss-1x"]
    r10 = [r for r in host if r["tool"] == "uevrec-rss-10x"]
    if r1 and r10:
        a, b = r1[0], r10[0]
        verdicts.append(("host: uevrec peak RSS independent of event count (10x events -> within 10%)",
                         b["maxrss_kb"] <= 1.10 * a["maxrss_kb"],
                         f"{a['events']} events: {a['maxrss_kb']/1024:.1f} MiB; {b['events']} events: {b['maxrss_kb']/1024:.1f} MiB (x{b['maxrss_kb']/a['maxrss_kb']:.3f})"))
    stops = [r for r in host if r["tool"] in ("uevrec-stop", "perf-stop")]
    if stops:
        print("\n### Host: stop time, syscalls:* on every CPU (SIGINT to exit; every run)")
        print("| run | recorder | perf fds | load at start | SIGINT to exit (s) | SIGINT to last descriptor closed (s) |")
        print("|---|---|---|---|---|---|")
        for r in sorted(stops, key=lambda x: (x["run"], x["tool"])):
            print(f"| {r['run']} | {r['tool'][:-5]} | {r['perf_fds']} | {r['load']} | {r['stop_s']:.2f} | {r['closed_s']:.2f} |")
        us = [r["stop_s"] for r in stops if r["tool"] == "uevrec-stop"]
        if us:
            verdicts.append(("host: uevrec exits within 2 s of the stop with syscalls:*", max(us) < 2,
                             "slowest " + f"{max(us):.2f} s over {len(us)} runs"))
    idle = [r for r in host if r["tool"] == "uevrec-idle"]
    if idle:
        i = idle[0]
        pct = 100 * i["cpu_s"] / i["seconds"]
        verdicts.append(("host: idle uevrec < 1% of a core", pct < 1.0,
                         f"{pct:.3f}% over {i['seconds']:.1f} s, RSS {i['maxrss_kb']/1024:.1f} MiB"))
if vm:
    vm += combine(vm)
    vgroups = [(f"VM, {t} thread{'s' if t > 1 else ''}", [r for r in vm if r.get("threads", 1) == t])
               for t in sorted({r.get("threads", 1) for r in vm})]
    table("VM (6.12, TCG), user_events from samples' rate producer (no untraced row: the producer writes only once enabled)", "where", vgroups)
    vr = ratio_table("VM", "where", vgroups)
    pairs = []
    vm_ft = []
    for r in vm:
        if r["tool"] == "perf-record":
            same = lambda x, t: x["tool"] == t and x["run"] == r["run"] and x.get("threads", 1) == r.get("threads", 1)
            f = next((x for x in vm if same(x, "uevrec-ftrace")), None)
            if f:
                vm_ft.append((r.get("threads", 1), f["rate"] / r["rate"]))
            if r["missing"] == 0 and r["lost"] == 0:
                u = next((x for x in vm if same(x, "uevrec")), None)
                if u:
                    pairs.append(u["missing"] == 0 and u["lost"] == 0)
    if vm_ft:
        verdicts.append(("VM: producer faster under uevrec --backend ftrace than under perf record (rate ratio)",
                         min(x for _, x in vm_ft) > 1.0,
                         "per run (threads: ratio): " + ", ".join(f"{t}: {x:.2f}x" for t, x in vm_ft)))
    verdicts.append(("VM: uevrec zero loss wherever perf record had zero loss",
                     all(pairs) if pairs else None, f"{sum(pairs)}/{len(pairs)} runs"))
    if vr.get("cpu_vs_record_script"):
        m = med(vr["cpu_vs_record_script"])
        verdicts.append(("VM: uevrec CPU/event <= 1/10 of perf record + perf script", m <= 0.1,
                         f"median ratio {m:.3f}"))
for s in skipped:
    print(f"\nVM part not measured: {s['reason']}")
print("\n### Targets")
print("| target | met | evidence |")
print("|---|---|---|")
for name, ok, ev in verdicts:
    print(f"| {name} | {'yes' if ok else ('n/a' if ok is None else 'NO')} | {ev} |")
PY
}

# ------------------------------------------------------------------ main -------------
ARGS="$*"
QUICK=0 RUNS=3 CALLS="" VM_CALLS="" PAGES=128 DO_HOST=1 DO_VM=1 GUEST=0 RESULTS="" REPORT=""
THREADS="1 2" BUSY=0 NO_SCRIPT=0 NO_EXTRAS=0 STOP_RUNS="" NOPRIO=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1 ;;
    --runs) RUNS=$2; shift ;;
    --calls) CALLS=$2; shift ;;
    --vm-calls) VM_CALLS=$2; shift ;;
    --pages) PAGES=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --busy) BUSY=$2; shift ;;
    --no-script) NO_SCRIPT=1 ;;
    --no-extras) NO_EXTRAS=1 ;;
    --noprio) NOPRIO=1 ;;
    --stop-runs) STOP_RUNS=$2; shift ;;
    --no-host) DO_HOST=0 ;;
    --no-vm) DO_VM=0 ;;
    --results) RESULTS=$2; shift ;;
    --report) REPORT=$2; shift ;;
    --vm-guest) GUEST=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
  shift
done
if [ $QUICK = 1 ]; then
  RUNS=${RUNS_QUICK:-1}; CALLS=${CALLS:-200000}; VM_CALLS=${VM_CALLS:-20000}; IDLE_S=3
  STOP_RUNS=${STOP_RUNS:-0}
else
  CALLS=${CALLS:-1000000}; VM_CALLS=${VM_CALLS:-100000}; IDLE_S=10
  STOP_RUNS=${STOP_RUNS:-2}
fi

trap stop_busy EXIT
if [ $GUEST = 1 ]; then vm_guest; exit 0; fi
if [ -n "$REPORT" ]; then report "$REPORT"; exit 0; fi # the tables again, from a --results file

[ "$(id -u)" = 0 ] || die "run as root (perf_event_open on tracepoints, tracefs)"
for t in perf jq python3; do command -v $t >/dev/null || die "$t not found (apt-get install linux-perf jq python3)"; done
[ -d /dev/shm ] || die "/dev/shm (tmpfs) missing"

note "building release binaries (nice)"
(cd "$ROOT" && nice cargo build --release --quiet -p uevrec --bin uevrec -p uevrec-samples --bins) ||
  die "release build failed"
"$BIN/uevrec" record --help >/dev/null 2>&1 || die "$BIN/uevrec has no working 'record' subcommand"

RESULTS=${RESULTS:-$(mktemp /tmp/bench-live.XXXXXX.jsonl)}
: >"$RESULTS"
note "raw results: $RESULTS"
{
  echo "## uevrec live benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "command: scripts/bench-live.sh $ARGS (runs $RUNS, host calls $CALLS, threads $THREADS, busy loops $BUSY, VM events $VM_CALLS, ring $PAGES pages/CPU)"
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs, kernel $(uname -r), load before start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "uevrec: $(git -C "$ROOT" rev-parse --short HEAD); $(perf --version)"
} >"$RESULTS.head"
if [ $DO_HOST = 1 ]; then host_part >>"$RESULTS"; fi
if [ $DO_VM = 1 ]; then vm_part >>"$RESULTS"; fi
cat "$RESULTS.head"
report "$RESULTS"
