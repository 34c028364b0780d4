#!/usr/bin/env bash
# Install Debian packages quietly for run.sh and build-kernel.sh:
#   apt-install.sh PKG...
# apt-get update + install; when that fails, retry from bookworm-backports (added by
# apt-backports.sh): the preinstalled qemu-utils may come from backports and block
# bookworm's qemu-system-x86, and linux-source-6.12 may only be there. apt's output is
# shown only on failure. Must run as root.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -gt 0 ] || { echo "usage: $0 PKG..." >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
	echo "apt-install.sh: not root; install them yourself: apt-get install $*" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt_log=$(mktemp)
trap 'rm -f "$apt_log"' EXIT
if ! { apt-get update -q && { apt-get install -y -q --no-install-recommends "$@" ||
	{ "$here/apt-backports.sh" &&
		apt-get install -y -q --no-install-recommends -t bookworm-backports "$@"; }; }; } >"$apt_log" 2>&1; then
	cat "$apt_log" >&2
	echo "apt-install.sh: could not install $*" >&2
	exit 1
fi
