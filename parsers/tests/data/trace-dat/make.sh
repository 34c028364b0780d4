#!/bin/sh
# Runs inside the uevrec VM (shared/vm/run.sh). Writes small trace.dat files to /tmp/tdgen/out.
set -x
out=/tmp/tdgen/out
rm -rf $out; mkdir -p $out
: > /tmp/tdgen/empty
# An empty kallsyms and printk_formats keep the files small (trace-cmd copies both whole).
mount --bind /tmp/tdgen/empty /proc/kallsyms || echo "kallsyms bind failed"
mount --bind /tmp/tdgen/empty /sys/kernel/tracing/printk_formats || echo "printk bind failed"
trace-cmd list -c 2>&1 | head
cd $out
W="sh -c 'sleep 0.2; /bin/true; /bin/echo hi > /dev/null; sleep 0.15; /bin/true'"
eval trace-cmd record -q -F -c -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_process_exec -o $out/v7-zstd.dat $W
eval trace-cmd record -q -F -c --compression none -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_process_exec -o $out/v7-none.dat $W
eval trace-cmd record -q -F -c --compression any -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_process_exec -o $out/v7-any.dat $W
eval trace-cmd record -q -F -c --file-version 6 -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_process_exec -o $out/v6.dat $W
# Overwrite mode, small buffer, extracted afterwards: the kernel marks missed events on the pages.
trace-cmd reset
trace-cmd start -b 8 -e sched -e timer -e irq
i=0; while [ $i -lt 100 ]; do /bin/true; i=$((i+1)); done
trace-cmd stop
trace-cmd extract -o $out/v7-lost.dat
trace-cmd reset
ls -la $out
