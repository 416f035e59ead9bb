#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# base-images.sh CACHE_DIR [RELEASE]: makes debian:RELEASE and
# debian:RELEASE-slim (RELEASE trixie, the default, or bookworm) available to
# podman on a machine that reaches Debian's package repository but no image
# registry. One `debootstrap --variant=minbase RELEASE` root filesystem becomes
# both: imported as is for RELEASE, and trimmed the way the official slim
# variant is (no docs, man pages or locales, and a dpkg configuration that
# keeps them out of later installs) for RELEASE-slim.
# Each is imported as localhost/debian:TAG and tagged docker.io/library/debian:TAG,
# so an unchanged `FROM debian:TAG` (or the Dockerfile's default build
# arguments) resolves to it without a pull.
# The root filesystems are cached as tarballs in CACHE_DIR (RELEASE.tar,
# RELEASE-slim.tar); nothing is done for an image podman already has.
set -euo pipefail

usage="usage: base-images.sh CACHE_DIR [trixie|bookworm]"
cache="${1:?$usage}"
release="${2:-trixie}"
case "$release" in
trixie | bookworm) ;;
*) echo "base images: unknown release '$release' ($usage)" >&2; exit 2 ;;
esac
mkdir -p "$cache"
cache="$(cd "$cache" && pwd)"

have_image() { podman image exists "docker.io/library/debian:$1"; }

if have_image "$release" && have_image "$release-slim"; then
	echo "base images: debian:$release and debian:$release-slim already present"
	exit 0
fi

# The sources list of the official images (deb822), so `apt-get update` in a
# build sees the release, its updates and its security updates.
write_sources() {
	rm -f "$1/etc/apt/sources.list"
	mkdir -p "$1/etc/apt/sources.list.d"
	cat >"$1/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: http://deb.debian.org/debian
Suites: $release $release-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $release-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
}

# What the official images add so apt keeps no package files or indexes
# behind and installs no translations.
write_apt_conf() {
	local d="$1/etc/apt/apt.conf.d"
	mkdir -p "$d"
	cat >"$d/docker-clean" <<'CONF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CONF
	echo 'Acquire::Languages "none";' >"$d/docker-no-languages"
	echo 'Acquire::GzipIndexes "true";' >"$d/docker-gzip-indexes"
	printf 'APT::AutoRemove::SuggestsImportant "false";\n' >"$d/docker-autoremove-suggests"
}

# The slim variant: files under these paths are removed now and never
# unpacked later (dpkg path-exclude), as in the official bookworm-slim and
# trixie-slim.
slim_down() {
	local root="$1"
	mkdir -p "$root/etc/dpkg/dpkg.cfg.d"
	cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'CONF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CONF
	find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
	find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
	rm -rf "$root/usr/share/man/"* "$root/usr/share/groff/"* "$root/usr/share/info/"* \
		"$root/usr/share/lintian/"* "$root/usr/share/linda/"*
	find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
}

make_rootfs_tars() {
	local root="$cache/rootfs-$release"
	command -v debootstrap >/dev/null || { echo "base images: debootstrap is not installed" >&2; exit 1; }
	rm -rf "$root"
	local log="$cache/debootstrap-$release.log"
	echo "base images: debootstrap --variant=minbase $release (about 30 s; log $log)"
	if ! debootstrap --variant=minbase "$release" "$root" http://deb.debian.org/debian >"$log" 2>&1; then
		tail -n 20 "$log" >&2
		echo "base images: debootstrap failed (full log: $log)" >&2
		exit 1
	fi
	write_sources "$root"
	write_apt_conf "$root"
	rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"* "$root/var/log/"*.log \
		"$root/var/cache/apt/"*.bin
	# Containers get /dev, /proc and /sys from the runtime.
	tar --numeric-owner -C "$root" -cf "$cache/$release.tar.tmp" . && mv "$cache/$release.tar.tmp" "$cache/$release.tar"
	slim_down "$root"
	tar --numeric-owner -C "$root" -cf "$cache/$release-slim.tar.tmp" . && mv "$cache/$release-slim.tar.tmp" "$cache/$release-slim.tar"
	rm -rf "$root"
}

if [[ ! -s "$cache/$release.tar" || ! -s "$cache/$release-slim.tar" ]]; then
	make_rootfs_tars
fi

for tag in "$release" "$release-slim"; do
	if ! have_image "$tag"; then
		echo "base images: importing localhost/debian:$tag"
		podman import --quiet --change 'CMD ["bash"]' "$cache/$tag.tar" "localhost/debian:$tag" >/dev/null
		podman tag "localhost/debian:$tag" "docker.io/library/debian:$tag"
	fi
done
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep "debian:$release" || true
