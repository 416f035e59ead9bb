#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# distro-check.sh RELEASE [WORK_DIR] - what `make distro-check DISTRO=RELEASE`
# runs: the project built and its unit tests run inside a clean root
# filesystem of another Debian release, as a new user of that release would.
#
#  1. A fresh `debootstrap --variant=minbase RELEASE` root filesystem (its
#     tarball cached in WORK_DIR, unpacked anew every run, so nothing of a
#     previous run is left in it).
#  2. The working tree copied in (what git tracks and what it would track:
#     never build/ or tests/node_modules).
#  3. In a chroot of its own mount and PID namespaces (so /proc, /dev and
#     every process started there end with it): `apt-get install make`, what
#     the README asks of a user, then `make deps` (the Makefile's
#     own installation of what that release lacks: apt-get and npm), then
#     `make check-format check-deps`, every binary of the test build with
#     -Werror (`make test-build`), `make check-hardening`, and the unit tests
#     (`make unit`). DISTRO_TESTS=all runs `make test` there instead (every
#     test, Azurite included: about a quarter of an hour more).
#
# Exit status: 0 all passed; 1 a step failed (its output is shown); 3 the
# check cannot run on this machine (not root, no debootstrap, no Debian
# mirror): it says why on one line, and nothing was tested.
set -euo pipefail

release="${1:?usage: distro-check.sh RELEASE [WORK_DIR]}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="${2:-$ROOT/build/distro}"
mirror="${DISTRO_MIRROR:-http://deb.debian.org/debian}"
tests="${DISTRO_TESTS:-unit}"
started=$SECONDS

cannot() {
	echo "distro-check: cannot check $release on this machine: $*" >&2
	exit 3
}

case "$release" in
bookworm | trixie) ;;
*) echo "distro-check: unknown release \"$release\" (bookworm or trixie)" >&2; exit 2 ;;
esac
case "$tests" in
unit | all) ;;
*) echo "distro-check: DISTRO_TESTS must be unit or all, not \"$tests\"" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || cannot "it needs root (debootstrap, chroot, mounts)"
"$ROOT/tests/deps.sh" apt debootstrap util-linux >/dev/null 2>&1 || cannot "debootstrap could not be installed"
[ -f "/usr/share/debootstrap/scripts/$release" ] ||
	cannot "this debootstrap does not know $release (update debootstrap and debian-archive-keyring)"

mkdir -p "$work"
work="$(cd "$work" && pwd)"
base="$work/$release-minbase.tar"
root="$work/$release"

# ---- 1. the root filesystem ------------------------------------------------------

if [ ! -s "$base" ]; then
	echo "distro-check: debootstrap --variant=minbase $release (log $work/$release-debootstrap.log)"
	rm -rf "$root.new"
	if ! debootstrap --variant=minbase "$release" "$root.new" "$mirror" >"$work/$release-debootstrap.log" 2>&1; then
		tail -n 5 "$work/$release-debootstrap.log" >&2
		rm -rf "$root.new"
		cannot "debootstrap of $release from $mirror failed (log: $work/$release-debootstrap.log)"
	fi
	tar --numeric-owner -C "$root.new" -cf "$base.tmp" . && mv "$base.tmp" "$base"
	rm -rf "$root.new"
fi
rm -rf "$root"
mkdir -p "$root"
tar --numeric-owner -C "$root" -xf "$base"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The host's trust and proxies, for npm inside: a machine that reaches the
# npm registry through a TLS-inspecting proxy trusts that proxy's CA in its
# own bundle, which a fresh root filesystem lacks. Node reads it as extra CAs.
if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/host-ca-certificates.crt"
	pass_env="NODE_EXTRA_CA_CERTS=/etc/host-ca-certificates.crt"
else
	pass_env=""
fi
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
	[ -n "${!v:-}" ] && pass_env="$pass_env $v=${!v}"
done
echo "distro-check: $release $(cat "$root/etc/debian_version") root filesystem ready"

# ---- 2. the sources ------------------------------------------------------------------

mkdir -p "$root/src"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
	grep -zv -e '^build/' -e '^tests/node_modules/' |
	tar --null --no-recursion --ignore-failed-read -T - -cf - 2>/dev/null) | tar -C "$root/src" -xf -
[ -f "$root/src/Makefile" ] || { echo "distro-check: the sources were not copied" >&2; exit 1; }

# ---- 3. build and test inside ----------------------------------------------------------

if [ "$tests" = all ]; then
	steps='make test && make demo'
else
	steps='make --no-print-directory check-format check-deps && make --no-print-directory -j"$(nproc)" test-build &&
	make --no-print-directory check-hardening && make --no-print-directory unit'
fi
inside="set -e
export DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin $pass_env
export ECW_COMMIT=${ECW_COMMIT:-$(cd "$ROOT" && git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
cd /src
echo \"==== distro-check ($release): apt-get install make (the one package a user installs by hand), make deps\"
apt-get update -qq
apt-get install -y -qq --no-install-recommends make >/dev/null
make --no-print-directory deps
echo \"==== distro-check ($release): gcc \$(gcc -dumpfullversion), \$(openssl version | cut -d' ' -f1-2), json-c \$(pkg-config --modversion json-c), libmicrohttpd \$(pkg-config --modversion libmicrohttpd), libcurl \$(pkg-config --modversion libcurl), \$(clang-format --version | sed 's/.*version /clang-format /')\"
$steps"

log="$work/$release-check.log"
echo "distro-check: building and testing in $release (log $log)"
set +e
# A mount namespace of its own: /dev and /proc are mounted for the chroot only
# and vanish with it; a PID namespace: nothing started inside outlives it.
unshare --mount --pid --fork --propagation private bash -c '
	set -e
	mount --rbind /dev "$1/dev"
	mount -t proc proc "$1/proc"
	mount -t tmpfs tmpfs "$1/dev/shm"
	exec chroot "$1" /bin/bash -c "$2"' distro-check "$root" "$inside" >"$log" 2>&1
rc=$?
set -e
if [ $rc -ne 0 ]; then
	tail -n 60 "$log" >&2
	echo "distro-check: $release FAILED (status $rc) after $((SECONDS - started)) s; full log: $log" >&2
	exit 1
fi
grep -E '^==== ' "$log" || true
echo "distro-check: $release passed ($tests) in $((SECONDS - started)) s"
rm -rf "$root"
