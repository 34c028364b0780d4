#!/usr/bin/env bash
# Pack what scripts/bench-scale.sh needs on a machine that has neither Rust, gcc nor perf
# (the 16-CPU machine some sessions are lent: one command at a time, nothing outside it
# reachable; see BENCHMARKS.md §15): into DIR, a stripped release uevrec (and optionally
# one of an older revision), the static load generator, perf with every shared library it
# loads and the loader itself, and run.sh, which runs bench-scale.sh with them.
#
#   scripts/bench-scale-pack.sh DIR [OLD_REV]
#   then, there:  DIR/run.sh [bench-scale.sh arguments, e.g. --threads "1 2 4 8 15"]
#            or:  DIR/run.sh stages   (benches/stages.rs, pinned to CPU 1)
#            or:  [THREADS=8] [RANGE=16M] DIR/run.sh decode [ROUNDS]
#                 (scripts/bench-decode-threads.sh with the packed uevrec: --threads 1
#                 against THREADS staged and in ranges, on a 3 M-sample recording)
#
# DIR must lie right under the repository root (run.sh finds the scripts one level up)
# and should be ignored by git (e.g. listed in .git/info/exclude) and carried to the
# other machine with the repository; binaries are never committed. perf runs there as
# `DIR/lib/ld-linux-x86-64.so.2 --library-path DIR/lib DIR/perf`, so that machine's libc
# does not matter. OLD_REV (a commit) adds DIR/uevrec-old, built from `git archive` of it.
# Needs cargo, gcc (static libc) and perf here.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${1:?usage: $0 DIR [OLD_REV]}
OLD=${2:-}
die() { echo "bench-scale-pack: $*" >&2; exit 1; }
command -v gcc >/dev/null || die "gcc is needed (apt-get install gcc libc6-dev)"
PERF_BIN=$(command -v perf) || die "perf is needed (apt-get install linux-perf)"
mkdir -p "$DIR/lib"
DIR=$(cd "$DIR" && pwd)

build() { # source-dir target-dir out
  (cd "$1" && CARGO_TARGET_DIR=$2 cargo build --release --quiet --bin uevrec)
  strip -o "$3" "$2/release/uevrec"
}
build "$ROOT" "${CARGO_TARGET_DIR:-$ROOT/target}" "$DIR/uevrec"
if [ -n "$OLD" ]; then
  src=$(mktemp -d "${TMPDIR:-/tmp}/bench-scale-old.XXXXXX")
  trap 'rm -rf "$src"' EXIT
  git -C "$ROOT" archive "$OLD" | tar -x -C "$src"
  build "$src" "$src/target" "$DIR/uevrec-old"
fi
gcc -static -O2 -pthread "$ROOT/scripts/bench-scale/loadgen.c" -o "$DIR/loadgen"
# The single-threaded stages alone on one core (benches/stages.rs, BENCHMARKS.md issue 41),
# to run there on idle cores: `run.sh stages`.
stages=$(cd "$ROOT" && cargo bench --no-run --bench stages --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
[ -x "$stages" ] || die "benches/stages.rs did not build"
strip -o "$DIR/stages" "$stages"

# perf: the binary itself (Debian's /usr/bin/perf may be a wrapper script naming
# perf_VERSION), every library ldd lists, and the loader.
if head -c 4 "$PERF_BIN" | grep -q ELF; then
  real=$PERF_BIN
else
  real=$(ls /usr/bin/perf_* 2>/dev/null | sort -V | tail -1)
  [ -n "$real" ] || die "$PERF_BIN is not an ELF binary and no /usr/bin/perf_* was found"
fi
cp "$real" "$DIR/perf"
ldd "$real" | awk '/=> \// { print $3 } /^\t\/.*ld-linux/ { print $1 }' | while read -r lib; do
  cp -L "$lib" "$DIR/lib/"
done
[ -e "$DIR/lib/ld-linux-x86-64.so.2" ] || die "the loader was not among perf's libraries"

cat >"$DIR/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs scripts/bench-scale.sh with the binaries packed beside this file
# (scripts/bench-scale-pack.sh); arguments go to bench-scale.sh. `run.sh decode [ROUNDS]`
# runs scripts/bench-decode-threads.sh instead (THREADS, default 8, and RANGE from the
# environment; with uevrec-old packed, its staged runs too).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
[ -x "$root/scripts/bench-scale.sh" ] || { echo "run.sh: pack into a folder right under the repository root" >&2; exit 1; }
export UEVREC=$here/uevrec PERF=$here/perf PERF_LIBS=$here/lib LOADGEN=$here/loadgen
[ -x "$here/uevrec-old" ] && export UEVREC_OLD=$here/uevrec-old
if [ "${1:-}" = stages ]; then
  shift
  cd "$here"
  pin=(); command -v taskset >/dev/null && pin=(taskset -c 1)
  exec "${pin[@]}" ./stages --bench --warm-up-time 1 --measurement-time 3 "$@"
fi
if [ "${1:-}" = decode ]; then
  export THREADS=${THREADS:-8}
  exec "$root/scripts/bench-decode-threads.sh" "$UEVREC" "${2:-5}" ${UEVREC_OLD:+"$UEVREC_OLD"}
fi
exec "$root/scripts/bench-scale.sh" "$@"
RUN
chmod +x "$DIR/run.sh"
# The packed perf must run through its own loader here too.
"$DIR/lib/ld-linux-x86-64.so.2" --library-path "$DIR/lib" "$DIR/perf" --version >/dev/null ||
  die "the packed perf does not start through its loader"
du -sh "$DIR" | awk '{ print "bench-scale-pack: " $1 " in " $2 " (the device tool carries at most 64 MiB)" }'
ls -la "$DIR" "$DIR/lib"
