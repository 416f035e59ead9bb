#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deps.sh apt PKG... | node | promtool DIR
# Installs what a fresh Debian machine lacks, and nothing when all is there,
# so a second `make deps` costs a few dpkg queries.
# promtool: DIR/usr/bin/promtool taken out of Debian's promtool package
# (Debian 13) or prometheus package (Debian 12) without installing it
# (installing prometheus would enable and start a Prometheus server on the
# machine); the tests need only promtool, a static binary.
set -euo pipefail

sudo_if_needed() {
	if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
		echo "deps: need root (or sudo) to run: $*" >&2; exit 1; fi
}

apt_install() {
	local missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	sudo_if_needed apt-get update -qq
	sudo_if_needed apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

case "${1:-}" in
apt)
	shift
	apt_install "$@"
	;;
node)
	# Node.js and npm may come from Debian or from elsewhere (nodesource):
	# only install them when the commands are missing.
	command -v node >/dev/null || apt_install nodejs
	command -v npm >/dev/null || apt_install npm
	;;
promtool)
	dir="${2:?usage: deps.sh promtool DIR}"
	[ -x "$dir/usr/bin/promtool" ] && exit 0
	echo "deps: unpacking promtool from Debian's prometheus package into $dir"
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	chmod 755 "$tmp" # apt downloads as its own user
	# Debian 13 ships promtool in a package of its own; Debian 12 only in
	# prometheus.
	apt-cache show promtool >/dev/null 2>&1 || sudo_if_needed apt-get update -qq
	if apt-cache show promtool >/dev/null 2>&1; then pkg=promtool; else pkg=prometheus; fi
	if ! (cd "$tmp" && apt-get download -qq "$pkg" >/dev/null 2>&1); then
		sudo_if_needed apt-get update -qq # a machine whose package lists were cleared
		(cd "$tmp" && apt-get download -qq "$pkg" >/dev/null)
	fi
	mkdir -p "$dir"
	dpkg-deb -x "$tmp/$pkg"_*.deb "$tmp/root"
	install -D -m 755 "$tmp/root/usr/bin/promtool" "$dir/usr/bin/promtool"
	;;
*)
	echo "usage: deps.sh apt PKG... | node | promtool DIR" >&2
	exit 2
	;;
esac
