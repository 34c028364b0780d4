#!/usr/bin/env bash
# Install uevrec: the binary, its man pages, bash/zsh/fish completions, the systemd units
# of contrib/ and the README.
#
#   scripts/install.sh [PREFIX]        (default /usr/local)
#
# DESTDIR stages the tree (packaging: DESTDIR=/tmp/pkg scripts/install.sh /usr); UEVREC_BIN
# installs that binary instead of building one (`cargo build --release --locked`: the
# release profile, which has no debug info). The installed binary is stripped; the debug
# info a binary has (a `--profile profiling` or debug build) is kept apart in
# PREFIX/lib/debug/uevrec.debug (found through its .gnu_debuglink by gdb and perf).
# The units' ExecStart names PREFIX/bin/uevrec. Prints what it installed.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-/usr/local}
root="${DESTDIR:-}$prefix"

bin=${UEVREC_BIN:-}
if [ -z "$bin" ]; then
    cargo build --release --locked
    bin=${CARGO_TARGET_DIR:-target}/release/uevrec
fi

install -d "$root/bin" "$root/lib/debug" "$root/share/man/man1" \
    "$root/share/bash-completion/completions" "$root/share/zsh/site-functions" \
    "$root/share/fish/vendor_completions.d" "$root/lib/systemd/system" \
    "$root/share/doc/uevrec"
# Debug info apart, then the stripped binary pointing at it.
objcopy --only-keep-debug "$bin" "$root/lib/debug/uevrec.debug"
chmod 0644 "$root/lib/debug/uevrec.debug"
objcopy --strip-debug --strip-unneeded \
    --add-gnu-debuglink="$root/lib/debug/uevrec.debug" "$bin" "$root/bin/uevrec.new"
chmod 0755 "$root/bin/uevrec.new"
mv "$root/bin/uevrec.new" "$root/bin/uevrec"
installed="$root/bin/uevrec"

"$installed" man "$root/share/man/man1" >/dev/null
"$installed" completions bash >"$root/share/bash-completion/completions/uevrec"
"$installed" completions zsh >"$root/share/zsh/site-functions/_uevrec"
"$installed" completions fish >"$root/share/fish/vendor_completions.d/uevrec.fish"
for unit in contrib/*.service; do
    sed "s#/usr/local/bin/uevrec#$prefix/bin/uevrec#g" "$unit" \
        >"$root/lib/systemd/system/$(basename "$unit")"
done
install -m 0644 README.md "$root/share/doc/uevrec/README.md"

echo "installed into $root:"
echo "  bin/uevrec: $(stat -c %s "$installed") bytes (debug info apart: lib/debug/uevrec.debug)"
echo "  share/man/man1: $(cd "$root/share/man/man1" && ls uevrec*.1 | tr '\n' ' ')"
echo "  completions: bash, zsh, fish; systemd units: $(cd contrib && echo *.service)"
