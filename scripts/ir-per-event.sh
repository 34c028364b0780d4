#!/bin/sh
# Instructions per decoded event of `uevrec decode`, deterministic (callgrind; works on a
# loaded machine), and the SHA-256 of each file's full output (to check that a speed change
# leaves the output byte-identical). See BENCHMARKS.md §4 for the files used.
#   scripts/ir-per-event.sh UEVREC_BINARY PERF_DATA...
# Ir/event = (Ir(--count 150000) - Ir(--count 50000)) / 100000 (start-up and the
# per-file setup cancel out). Needs valgrind; each file must hold over 150,000 samples.
# UEVREC_DECODE_ARGS: more `decode` options for every run (e.g. "--format otlp --no-context").
set -eu
bin=${1:?usage: $0 UEVREC_BINARY PERF_DATA...}
shift
[ $# -gt 0 ] || { echo "usage: $0 UEVREC_BINARY PERF_DATA..." >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
ir() { # count file
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" decode -q ${UEVREC_DECODE_ARGS:-} --count "$1" "$2" -o /dev/null 2>&1 |
        awk '/refs/ { gsub(",", "", $4); print $4 }'
}
for f in "$@"; do
    a=$(ir 150000 "$f")
    b=$(ir 50000 "$f")
    sum=$("$bin" decode -q ${UEVREC_DECODE_ARGS:-} "$f" 2>/dev/null | sha256sum | cut -c1-16)
    echo "$(basename "$f") $(((a - b) / 100000)) Ir/event sha256 $sum"
done
