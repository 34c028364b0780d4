#!/usr/bin/env bash
# Build the uevrec test kernel (x86_64 bzImage with CONFIG_USER_EVENTS=y) from
# Debian's linux-source-6.12 package and config.fragment next to this script.
#
# Idempotent: the result is cached under $UEVREC_KERNEL_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/uevrec-kernel) together with a key made of
# the source package version and the fragment's hash; a second run with the
# same key does nothing. Progress goes to stderr; the only line on stdout is
# the path of the bzImage, so `kernel=$(build-kernel.sh)` works.
#
# Knobs: UEVREC_KERNEL_CACHE, UEVREC_KERNEL_JOBS (default: nproc),
#        UEVREC_KERNEL_FORCE=1 to rebuild even if the key matches.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${UEVREC_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uevrec-kernel}
fragment=$here/config.fragment
jobs=${UEVREC_KERNEL_JOBS:-$(nproc)}
src_pkg=linux-source-6.12
src_tar=/usr/src/$src_pkg.tar.xz

log() { echo "build-kernel.sh: $*" >&2; }

[ -f "$fragment" ] || { log "missing $fragment"; exit 1; }

# ---- prerequisites (Debian packages) ------------------------------------------
pkgs=("$src_pkg" build-essential flex bison bc libelf-dev libssl-dev xz-utils)
missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		log "missing packages: ${missing[*]} (apt-get install them as root)"
		exit 1
	fi
	log "installing ${missing[*]}"
	"$here/apt-install.sh" "${missing[@]}" || { log "could not install ${missing[*]}"; exit 1; }
fi
[ -f "$src_tar" ] || { log "$src_tar not found"; exit 1; }

version=$(dpkg-query -W -f='${Version}' "$src_pkg")
frag_hash=$(sha256sum "$fragment" | cut -c1-16)
key="$src_pkg=$version fragment=$frag_hash"

mkdir -p "$cache"
if [ "${UEVREC_KERNEL_FORCE:-0}" != 1 ] && [ -f "$cache/bzImage" ] &&
	[ "$(cat "$cache/bzImage.key" 2>/dev/null)" = "$key" ]; then
	log "up to date ($key)"
	echo "$cache/bzImage"
	exit 0
fi

start=$(date +%s)

# ---- sources --------------------------------------------------------------------
srcdir=$cache/src/$src_pkg-$version
if [ ! -f "$srcdir/.extracted" ]; then
	log "extracting $src_tar ($version)"
	rm -rf "$srcdir" "$srcdir.tmp"
	mkdir -p "$srcdir.tmp"
	tar -xf "$src_tar" -C "$srcdir.tmp"
	mv "$srcdir.tmp/$src_pkg" "$srcdir"
	rmdir "$srcdir.tmp"
	touch "$srcdir/.extracted"
fi

# ---- configure: allnoconfig + our fragment ------------------------------------------
objdir=$cache/build-$version
mkdir -p "$objdir"
buildlog=$cache/build.log
: >"$buildlog"
log "configuring in $objdir"
make -C "$srcdir" O="$objdir" ARCH=x86_64 KCONFIG_ALLCONFIG="$fragment" allnoconfig >>"$buildlog" 2>&1 || {
	tail -n 40 "$buildlog" >&2
	exit 1
}
bad=0
while IFS= read -r line; do
	case $line in '' | '#'*) continue ;; esac
	if ! grep -qxF "$line" "$objdir/.config"; then
		log "option did not stick: $line"
		bad=1
	fi
done <"$fragment"
[ "$bad" = 0 ] || { log "config.fragment does not apply cleanly to $version"; exit 1; }

# ---- build --------------------------------------------------------------------------
log "building bzImage with -j$jobs (log: $buildlog)"
if ! nice -n 10 make -C "$srcdir" O="$objdir" ARCH=x86_64 -j"$jobs" bzImage >>"$buildlog" 2>&1; then
	tail -n 40 "$buildlog" >&2
	log "build failed"
	exit 1
fi

cp "$objdir/arch/x86/boot/bzImage" "$cache/bzImage.tmp"
cp "$objdir/.config" "$cache/config"
mv "$cache/bzImage.tmp" "$cache/bzImage"
echo "$key" >"$cache/bzImage.key"
log "done in $(($(date +%s) - start))s: $(du -h "$cache/bzImage" | cut -f1) ($key)"
echo "$cache/bzImage"
