#!/usr/bin/env bash
# deps.sh apt PKG... | node
# Installs what a fresh Debian machine lacks, and nothing when all is there,
# so a second `make deps` costs a few dpkg queries.
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
*)
	echo "usage: deps.sh apt PKG... | node" >&2
	exit 2
	;;
esac
