#!/usr/bin/env bash
# Flight recorder benchmark (docs/flight-recorder.md, BENCHMARKS.md): uevrec's CPU per
# record with `record --flight 64M` beside plain `record -o FILE`, on the same workload,
# alternating, and the time a 64 MiB dump takes.
#
#   scripts/bench-flight.sh [--runs N] [--calls N]
#
# Workload: samples' syscall_loop (1 thread, N getppid calls, default 3,000,000, started
# paused); uevrec records raw_syscalls:sys_enter filtered to the generator's thread
# (`common_pid == TID && id == NR`), output on /dev/shm. Once the generator is done and
# uevrec's CPU time has stopped growing (two reads of /proc/PID/stat 300 ms apart agree),
# its user+sys CPU (clock ticks) divided by the records is the steady-state CPU per
# record (start-up included, shutdown and dump not). The flight run then gets SIGUSR1:
# its 64 MiB buffer is full (every sys_enter record is 100 bytes staged: ~671k records),
# and the dump time is what uevrec reports ("in X s": decode, format, write to /dev/shm).
# Needs root and a release build (built first). Prints one line per run.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=3 calls=3000000
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--calls) calls=$2; shift 2 ;;
	*) echo "usage: $0 [--runs N] [--calls N]" >&2; exit 2 ;;
	esac
done
cd "$ROOT"
cargo build --release --quiet --bin uevrec -p uevrec
cargo build --release --quiet --bin syscall_loop -p uevrec-samples
exec python3 - "$ROOT/target/release" "$runs" "$calls" <<'PY'
import json, os, re, signal, subprocess, sys, time, glob

bin_dir, runs, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tick = os.sysconf("SC_CLK_TCK")

def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick

def one(mode):
    gen = subprocess.Popen([f"{bin_dir}/syscall_loop", "--iterations", str(calls), "--wait-signal"],
                           stdout=subprocess.PIPE, text=True)
    ready = json.loads(gen.stdout.readline())
    out = f"/dev/shm/uevrec-bench-flight-{mode}.json"
    for f in glob.glob(out + "*"):
        os.remove(f)
    args = [f"{bin_dir}/uevrec", "record", "-e", "raw_syscalls:sys_enter", "-o", out,
            "--filter", f"common_pid == {ready['tids'][0]} && id == {ready['getppid_nr']}"]
    if mode == "flight":
        args += ["--flight", "64M"]
    u = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    err = []
    if mode == "flight":
        while "attached" not in (line := u.stderr.readline()):
            err.append(line)
    else:
        while not (os.path.exists(out) and "attached" in open(out).read()):
            time.sleep(0.05)
    os.kill(gen.pid, signal.SIGUSR1)
    done = json.loads(gen.stdout.read().strip().splitlines()[-1])
    gen.wait()
    last = -1.0
    while (now := cpu_s(u.pid)) != last:
        last = now
        time.sleep(0.3)
    dump = ""
    if mode == "flight":
        os.kill(u.pid, signal.SIGUSR1)
        while "flight dump" not in (dump := u.stderr.readline()):
            err.append(dump)
    os.kill(u.pid, signal.SIGINT)
    rest = u.stderr.read()
    u.wait()
    m = re.search(r"uevrec: (\d+) records, (\d+) lost", rest)
    records, lost = int(m.group(1)), int(m.group(2))
    line = (f"{mode:7} calls={done['calls']} records={records} lost={lost} "
            f"cpu={last:.2f}s per_record={last / max(records, 1) * 1e9:.0f}ns")
    if dump:
        d = re.search(r": (\d+) records, (\d+) overwritten.* in ([0-9.]+) s", dump)
        size = sum(os.path.getsize(f) for f in glob.glob(out + ".*"))
        line += f" dump: {d.group(1)} records, {size / 1e6:.0f} MB in {d.group(3)} s"
    for f in glob.glob(out + "*"):
        os.remove(f)
    print(line, flush=True)

for r in range(runs):
    for mode in ("record", "flight"):
        one(mode)
PY
