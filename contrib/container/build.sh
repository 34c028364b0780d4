#!/usr/bin/env bash
# Build uevrec's container image (contrib/container/Containerfile) with podman:
#   contrib/container/build.sh [IMAGE]      (default localhost/uevrec:VERSION)
# UEVREC_BIN: use this binary instead of a release build (`cargo build --release
# --locked`). The context is staged here: the binary stripped (as scripts/install.sh
# does), each shared library `ldd` names (and the dynamic loader) at its own path, the
# system's CA bundle and an /etc/passwd line for root. Prints the image and its size.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
image=${1:-localhost/uevrec:$version}
bin=${UEVREC_BIN:-}
if [ -z "$bin" ]; then
    cargo build --release --locked
    bin=${CARGO_TARGET_DIR:-target}/release/uevrec
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
root=$ctx/rootfs
install -d "$root/usr/bin" "$root/etc/ssl/certs" "$root/tmp"
chmod 1777 "$root/tmp"
objcopy --strip-debug --strip-unneeded "$bin" "$root/usr/bin/uevrec"
chmod 0755 "$root/usr/bin/uevrec"
# The libraries the binary links, at the paths ldd resolves them to, and the loader.
ldd "$bin" | grep -oE '/[^ ]+' | sort -u | while read -r lib; do
    install -D -m 0755 "$lib" "$root$lib"
    # The loader is named by its /lib64 path; keep its symlink target too.
    real=$(readlink -f "$lib")
    [ "$real" = "$lib" ] || install -D -m 0755 "$real" "$root$real"
done
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] && install -m 0644 "$ca" "$root$ca"
echo 'root:x:0:0:root:/:/usr/bin/uevrec' >"$root/etc/passwd"
cp contrib/container/Containerfile "$ctx/Containerfile"
podman build --quiet -t "$image" -f "$ctx/Containerfile" "$ctx" >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "$image $size"
