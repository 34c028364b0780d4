#!/usr/bin/env python3
"""The ftrace backend's rate with and without a named instance's page journal (issue 39).

    scripts/bench-instance.py [--runs 3] [--calls 1000000] [--pages 1024] LABEL=UEVREC ...

Per run, per binary, per mode (`--modes`; `plain`: `--backend ftrace`; `instance`: the same with
`--instance bench_journal`): samples' `syscall_loop` (target/release/syscall_loop, one
thread) makes CALLS getppid calls once the recorder writes its `attached` line;
`uevrec record -m PAGES --filter '(common_pid == TID) && id == 110'
raw_syscalls:sys_enter -o /dev/shm/…` records them. Printed per row: the generator's rate
(M calls/s), records written, lost, missing (calls - records - lost), the recorder's CPU
(user+sys, wait4) and ns per record. Needs root, tracefs, /dev/shm; builds nothing
(`cargo build --release -p uevrec --bin uevrec -p uevrec-samples --bins` first;
SYSCALL_LOOP=path picks another generator).

    scripts/bench-instance.py --startup ROUNDS [--absence 1.0] LABEL=UEVREC ...

Start to reading instead (needs perl, not the release build): a `getppid(424242, SEQ)`
stream at ~2 kHz (0.5 ms asleep after each call); per round, `uevrec record --backend
ftrace --instance bench_startup --pid P --filter 'id == 110' raw_syscalls:sys_enter -o
/dev/shm/…` started, the time from its spawn to the first record line in the file
("fresh"), SIGKILL 0.5 s later, ABSENCE s with no uevrec, the same started again: the
time to its first record line ("adopted") and the records its `adopted` notice says were
waiting; then SIGINT (the instance removed). `--renames N`: before the kill, a perl
process renames itself N times (`$0 = …`, a `task_rename` each), so that the adopting
run has a full tracking journal to recall (docs/restarts.md, "Who is who across a kill").
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.environ.get("SYSCALL_LOOP", os.path.join(ROOT, "target/release/syscall_loop"))
NAME = "bench_journal"


def wait_for(pred, what, secs=30):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    sys.exit(f"bench-instance: timed out waiting for {what}")


def attached(path):
    try:
        with open(path, "rb") as f:
            return b'"what":"attached"' in f.read(1 << 20)
    except FileNotFoundError:
        return False


def one(uevrec, mode, calls, pages):
    gen = subprocess.Popen([GEN, "--threads", "1", "--iterations", str(calls), "--wait-signal"],
                           stdout=subprocess.PIPE, text=True)
    ready = json.loads(gen.stdout.readline())
    filt = "(" + " || ".join(f"common_pid == {t}" for t in ready["tids"]) + ") && id == 110"
    out = f"/dev/shm/bench-instance-{os.getpid()}.jsonl"
    if os.path.exists(out):
        os.remove(out)
    argv = [uevrec, "record", "-m", str(pages), "--backend", "ftrace", "--filter", filt,
            "-o", out, "raw_syscalls:sys_enter"]
    if mode == "instance":
        argv[2:2] = ["--instance", NAME]
    rec = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    wait_for(lambda: attached(out), "the attached line")
    time.sleep(0.5)
    gen.send_signal(signal.SIGUSR1)
    done = json.loads(gen.stdout.readlines()[-1])
    gen.wait()
    time.sleep(0.5)
    rec.send_signal(signal.SIGINT)
    _, status, ru = os.wait4(rec.pid, 0)
    records = lost = 0
    with open(out, "rb") as f:
        for line in f:
            if b'"event":"sys_enter"' in line:
                records += 1
            elif b'"uevrec":"lost"' in line:
                lost += json.loads(line)["lost"]
    os.remove(out)
    cpu = ru.ru_utime + ru.ru_stime
    return {
        "rate_m": done["per_sec"] / 1e6,
        "records": records,
        "lost": lost,
        "missing": done["calls"] - records - lost,
        "cpu_s": cpu,
        "ns_per_record": cpu * 1e9 / max(records, 1),
        "status": os.waitstatus_to_exitcode(status),
    }


def first_record(path, since, secs=30):
    """Seconds from `since` (time.monotonic) until `path` holds a record line."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            with open(path, "rb") as f:
                if b'"event":"sys_enter"' in f.read(1 << 20):
                    return time.monotonic() - since
        except FileNotFoundError:
            pass
        time.sleep(0.002)
    sys.exit(f"bench-instance: no record in {path} within {secs} s")


def startup(uevrec, rounds, absence, renames):
    """Rows of (fresh s, adopted s, records waiting) for `rounds` rounds."""
    script = "my $i = 0; while (1) { syscall(110, 424242, $i++); select(undef, undef, undef, 0.0005) }"
    prod = subprocess.Popen(["perl", "-e", script])
    name = "bench_startup"
    rows = []
    try:
        for _ in range(rounds):
            times = []
            waiting = None
            for run in ("fresh", "adopted"):
                out = f"/dev/shm/bench-startup-{os.getpid()}-{run}.jsonl"
                if os.path.exists(out):
                    os.remove(out)
                argv = [uevrec, "record", "--backend", "ftrace", "--instance", name,
                        "--pid", str(prod.pid), "--filter", "id == 110",
                        "raw_syscalls:sys_enter", "-o", out]
                t0 = time.monotonic()
                rec = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
                times.append(first_record(out, t0))
                if run == "fresh":
                    if renames:
                        subprocess.run(["perl", "-e", f"$0 = \"r$_\" for 1 .. {renames}"],
                                       check=True)
                    time.sleep(0.5)
                    rec.kill()
                    rec.wait()
                    time.sleep(absence)
                else:
                    time.sleep(0.3)
                    rec.send_signal(signal.SIGINT)
                    rec.wait()
                    with open(out, "rb") as f:
                        for line in f:
                            if b'"what":"adopted"' in line:
                                msg = json.loads(line)["message"]
                                waiting = int(msg.split(": ", 1)[1].split(" records")[0])
                os.remove(out)
            rows.append((times[0], times[1], waiting))
    finally:
        prod.kill()
        prod.wait()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--startup", type=int, metavar="ROUNDS", help="time start to reading")
    ap.add_argument("--absence", type=float, default=1.0)
    ap.add_argument("--renames", type=int, default=0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--pages", type=int, default=1024)
    ap.add_argument("--modes", default="plain,instance", help="which of plain,instance")
    ap.add_argument("--no-header", action="store_true")
    ap.add_argument("bins", nargs="+", help="LABEL=PATH of a uevrec binary")
    a = ap.parse_args()
    bins = [b.split("=", 1) for b in a.bins]
    if a.startup:
        print("| binary | round | fresh: start to first record (s) | adopted (s) | records waiting |")
        print("|---|---|---|---|---|")
        for label, path in bins:
            for i, (fresh, adopted, waiting) in enumerate(startup(path, a.startup, a.absence, a.renames)):
                print(f"| {label} | {i + 1} | {fresh:.3f} | {adopted:.3f} | "
                      f"{'?' if waiting is None else f'{waiting:,}'} |",
                      flush=True)
        return
    if not a.no_header:
        print("| run | binary | mode | M calls/s | records | lost | missing | CPU s | ns/record |")
        print("|---|---|---|---|---|---|---|---|---|")
    for run in range(1, a.runs + 1):
        for label, path in bins:
            for mode in a.modes.split(","):
                r = one(path, mode, a.calls, a.pages)
                print(f"| {run} | {label} | {mode} | {r['rate_m']:.3f} | {r['records']:,} | "
                      f"{r['lost']:,} | {r['missing']:,} | {r['cpu_s']:.2f} | "
                      f"{r['ns_per_record']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
