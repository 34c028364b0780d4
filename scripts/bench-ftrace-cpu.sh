#!/usr/bin/env bash
# CPU time (user + sys) of `uevrec record --backend ftrace` recording N getppid calls of
# one producer, for each uevrec binary given, alternating, RUNS rounds. Extra recorder
# arguments in ARGS (default: --no-context). Needs root, tracefs, perl, GNU time.
#
#   scripts/bench-ftrace-cpu.sh before=/path/uevrec-old after=/path/uevrec-new
set -euo pipefail
N=${N:-1000000}
RUNS=${RUNS:-3}
ARGS=${ARGS:---no-context}
NR_GETPPID=110
out=$(mktemp -d /dev/shm/bench-ftrace-cpu.XXXXXX)
trap 'rm -rf "$out"' EXIT
mkfifo "$out/go"
for round in $(seq 1 "$RUNS"); do
	for spec in "$@"; do
		name=${spec%%=*} bin=${spec#*=}
		perl -e "my \$go = <STDIN>; syscall($NR_GETPPID, 424242, \$_) for 1..$N;" < "$out/go" &
		p=$!
		# shellcheck disable=SC2086
		/usr/bin/time -f "%U %S" -o "$out/time" "$bin" record --quiet --backend ftrace $ARGS \
			-e raw_syscalls:sys_enter --filter "id == $NR_GETPPID" --pid "$p" -o "$out/lines" &
		r=$!
		sleep 1.5
		echo go > "$out/go"
		wait "$p"
		sleep 0.5
		pkill -INT -P "$r"   # GNU time ignores SIGINT: its child gets it
		wait "$r"
		read -r user sys < "$out/time"
		echo "$name round $round: user $user s, sys $sys s, $(grep -c '"sys_enter"' "$out/lines") records"
		rm -f "$out/lines"
	done
done
