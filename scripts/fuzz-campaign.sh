#!/usr/bin/env bash
# A fuzz campaign over every cargo-fuzz target of uevrec-parsers (docs/fuzzing.md):
#
#   scripts/fuzz-campaign.sh [SECONDS]
#
# Builds the targets once (stable Rust with RUSTC_BOOTSTRAP=1, no sanitizer), seeds the
# corpora (parsers/fuzz/seed-corpus.sh), then runs each target listed by `cargo fuzz
# list` in turn, niced, with -fork=1 -ignore_crashes=1 (a crash is saved and fuzzing
# goes on), until SECONDS (default 1200) or 1,000,000 runs, whichever comes first (fork
# mode checks the runs as each job ends, so it may overshoot by one job). At the end one
# table: target, runs, seconds, exec/s, coverage at the start (the corpus as it was,
# read once) → at the end (the final corpus, read the same way), corpus size (files),
# oom/timeout/crash counts, and the distinct crash sites: each crash input saved during
# the run is run again and its panic location read from that log.
#
# Environment: TARGETS (space-separated, default: all), RUNS (default 1000000),
# UEVREC_CORPUS_DIR (for seed-corpus.sh). Logs: parsers/fuzz/logs/campaign/ (TARGET.log,
# TARGET-start.log, TARGET-crashes/ with one log per crash input, table.md).
set -euo pipefail

seconds=${1:-1200}
runs=${RUNS:-1000000}
root=$(cd "$(dirname "$0")/.." && pwd)
fuzz=$root/parsers/fuzz
logs=$fuzz/logs/campaign
mkdir -p "$logs"
cd "$root/parsers"
export RUSTC_BOOTSTRAP=1

targets=${TARGETS:-$(cargo fuzz list)}
echo "fuzz-campaign: building $(echo $targets | wc -w) targets" >&2
# shellcheck disable=SC2086
for t in $targets; do
    nice -n 10 cargo fuzz build --sanitizer none "$t" >"$logs/build.log" 2>&1 ||
        { cat "$logs/build.log" >&2; exit 1; }
done
"$fuzz/seed-corpus.sh" >"$logs/seed.log" 2>&1 || { cat "$logs/seed.log" >&2; exit 1; }
triple=$(rustc -vV | sed -n 's/^host: //p')
bin=$fuzz/target/$triple/release

rows=()
for t in $targets; do
    corpus=$fuzz/corpus/$t
    artifacts=$fuzz/artifacts/$t
    crashes=$logs/$t-crashes
    mkdir -p "$corpus" "$artifacts"
    rm -rf "$crashes"
    mkdir -p "$crashes"
    dict=()
    if [ -f "$fuzz/dict/$t.dict" ]; then
        dict=("-dict=$fuzz/dict/$t.dict")
    fi
    # Coverage of the corpus as it is: read once, no fuzzing.
    nice -n 10 "$bin/$t" -runs=0 "${dict[@]}" "$corpus" >"$logs/$t-start.log" 2>&1 || true
    stamp=$logs/$t.stamp
    touch "$stamp"
    echo "fuzz-campaign: $t for ${seconds} s or $runs runs" >&2
    start=$(date +%s)
    nice -n 10 "$bin/$t" -fork=1 -ignore_crashes=1 -max_total_time="$seconds" -runs="$runs" \
        -timeout=30 -artifact_prefix="$artifacts/" "${dict[@]}" "$corpus" \
        >"$logs/$t.log" 2>&1 || true
    elapsed=$(($(date +%s) - start))
    # Coverage and corpus at the end, read the same way as at the start: fork mode's last
    # status line is printed before the last job's inputs are merged (a target that
    # reaches RUNS in one job would read 0).
    nice -n 10 "$bin/$t" -runs=0 "${dict[@]}" "$corpus" >"$logs/$t-end.log" 2>&1 || true
    # Each crash input of this run, run again: its panic location.
    sites=$(
        find "$artifacts" -maxdepth 1 -type f -name 'crash-*' -newer "$stamp" | sort |
            while read -r input; do
                out=$crashes/$(basename "$input").log
                "$bin/$t" "$input" >"$out" 2>&1 || true
                site=$(grep -o 'panicked at [^ ]*' "$out" | head -1 | sed 's/^panicked at //; s/:$//')
                echo "${site:-no panic (signal or abort)}"
            done | sort | uniq -c | sort -rn | awk '{n=$1; $1=""; sub(/^ /,""); printf "%s%s (%d)", sep, $0, n; sep=", "}'
    )
    rm -f "$stamp"
    row=$(
        awk -v t="$t" -v secs="$elapsed" -v sites="${sites:-none}" \
            -v start_log="$logs/$t-start.log" -v end_log="$logs/$t-end.log" -v corp="$(find "$corpus" -type f | wc -l)" '
        # The coverage libFuzzer reports after reading a corpus (-runs=0); an empty corpus
        # reports none: 0.
        function coverage(file,    line, cov) {
            cov = "?"
            while ((getline line < file) > 0)
                if (match(line, /INITED cov: [0-9]+/)) cov = substr(line, RSTART + 12, RLENGTH - 12)
                else if (line ~ /INITED/) cov = 0
            return cov
        }
        BEGIN { cov0 = coverage(start_log); cov = coverage(end_log) }
        /^#[0-9]+: cov: / {
            runs = substr($1, 2); sub(/:$/, "", runs)
            omc = $11
        }
        END {
            if (runs == "") { runs = 0; omc = "?" }
            rate = secs > 0 ? int(runs / secs) : 0
            printf "| `%s` | %d | %d | %d | %s → %s | %s | %s | %s |\n", t, runs, secs, rate, cov0, cov, corp, omc, sites
        }' "$logs/$t.log"
    )
    rows+=("$row")
    echo "$row" >&2
done

{
    echo "| target | runs | seconds | exec/s | coverage (start → end) | corpus | oom/timeout/crash | crash sites (inputs) |"
    echo "|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} | tee "$logs/table.md"
