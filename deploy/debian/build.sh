#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build.sh BINARY VERSION OUTDIR - what `make deb` runs: stages the package's
# tree from the normal build and the files of deploy/debian/, and builds
# OUTDIR/ecworker_VERSION_ARCH.deb with `dpkg-deb --build --root-owner-group`
# (no dpkg-buildpackage: the binary is the Makefile's hardened build/ecworker).
# Fails, naming the reason, when:
#   - VERSION differs from the top of deploy/debian/changelog or from what
#     BINARY --version says (the image, the package and the program carry one
#     version: include/ecw_version.h);
#   - the man page has a groff or man warning;
#   - the unit derived from deploy/systemd/ecworker.service lost one of its
#     directives, kept /usr/local or DynamicUser, or the configuration's
#     connection_string line was not found to rewrite.
# Depends: is computed by dpkg-shlibdeps on the machine that builds, so the
# library package names are right on Debian 12 and 13 alike.
set -euo pipefail

if [[ $# -ne 3 ]]; then
	echo "usage: deploy/debian/build.sh BINARY VERSION OUTDIR" >&2
	exit 2
fi
binary="$1"
version="$2"
mkdir -p "$3"
out="$(cd "$3" && pwd)"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/deploy/debian"
MAINTAINER="${DEB_MAINTAINER:-ecworker developers <dev@ecworker.invalid>}"

die() {
	echo "deb: $*" >&2
	exit 1
}

# ---- one version ----------------------------------------------------------

[[ -x "$binary" ]] || die "$binary is missing: build it first (make)"
cl_version="$(dpkg-parsechangelog -l "$HERE/changelog" -S Version)"
[[ "$cl_version" == "$version" ]] ||
	die "deploy/debian/changelog's top entry is $cl_version, the version is $version: add an entry"
bin_version="$("$binary" --version | head -n 1)"
[[ "$bin_version" == "ecworker $version" ]] || die "$binary --version says '$bin_version', not 'ecworker $version'"
arch="$(dpkg --print-architecture)"
# Every file's time and the man page's date: the changelog's, so two builds
# of one commit give the same package.
SOURCE_DATE_EPOCH="$(dpkg-parsechangelog -l "$HERE/changelog" -S Timestamp)"
export SOURCE_DATE_EPOCH
date_ymd="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)"

# ---- the tree ---------------------------------------------------------------
# Staged as debian/ecworker under a scratch directory holding a debian/control,
# which is where dpkg-shlibdeps expects a package's files.

scratch="$out/pkg"
stage="$scratch/debian/ecworker"
rm -rf "$scratch"
mkdir -p "$stage"
d() { install -d -m 755 "$stage/$1"; }
f() { install -m "$1" "$2" "$stage/$3"; } # MODE SOURCE DEST
doc=usr/share/doc/ecworker
for dir in DEBIAN usr/bin usr/share/man/man1 usr/lib/systemd/system usr/lib/sysusers.d \
	usr/share/ecworker "$doc" etc/ecworker; do
	d "$dir"
done

# The program, stripped as dh_strip strips it (the CET property note stays).
strip --remove-section=.comment --remove-section=.note -o "$stage/usr/bin/ecworker" "$binary"
chmod 755 "$stage/usr/bin/ecworker"

# The man page, checked the way lintian checks it.
man="$scratch/ecworker.1"
sed -e "s/@VERSION@/$version/g" -e "s/@DATE@/$date_ymd/g" "$HERE/ecworker.1" >"$man"
warn="$(groff -ww -z -man "$man" 2>&1)$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 \
	man --warnings -E UTF-8 -l -Tutf8 -Z "$man" 2>&1 >/dev/null)"
[[ -z "$warn" ]] || die "deploy/debian/ecworker.1 has warnings: $warn"
gzip -9n <"$man" >"$stage/usr/share/man/man1/ecworker.1.gz"
chmod 644 "$stage/usr/share/man/man1/ecworker.1.gz"

# The configuration: config/ecworker.yaml, the documented one (every key, its
# range and default), with one change: no fallback to a local Azurite. A
# service without a connection string then fails check-config (exit 2, which
# the unit does not restart after) instead of knocking on 127.0.0.1.
cfg="$scratch/ecworker.yaml"
{
	cat <<'HEAD'
# /etc/ecworker/ecworker.yaml - the configuration of ecworker.service, from the
# ecworker package: config/ecworker.yaml of the sources, except that
# storage.connection_string is required. Put the connection string in
# /etc/ecworker/ecworker.env (AZURE_STORAGE_CONNECTION_STRING=...), declare
# the jobs under jobs:, check with
#   sudo ecworker check-config -c /etc/ecworker/ecworker.yaml
# (with the variable set), then `systemctl enable --now ecworker`.
#
HEAD
	sed 's|^  connection_string: \${AZURE_STORAGE_CONNECTION_STRING:-UseDevelopmentStorage=true}$|  connection_string: ${AZURE_STORAGE_CONNECTION_STRING}|' \
		"$ROOT/config/ecworker.yaml"
} >"$cfg"
grep -qx '  connection_string: ${AZURE_STORAGE_CONNECTION_STRING}' "$cfg" ||
	die "config/ecworker.yaml: its connection_string line changed; update deploy/debian/build.sh"
f 644 "$cfg" etc/ecworker/ecworker.yaml

# The unit: deploy/systemd/ecworker.service with the package's paths and a
# static system user instead of DynamicUser (so that files and processes have
# an owner with a name, and sysusers/useradd make it at install).
unit="$scratch/ecworker.service"
{
	cat <<'HEAD'
# ecworker.service from the ecworker package (deploy/systemd/ecworker.service
# with /usr paths and the system user ecworker). Configure first:
#   /etc/ecworker/ecworker.yaml  the jobs (a conffile)
#   /etc/ecworker/ecworker.env   AZURE_STORAGE_CONNECTION_STRING=... (mode 600)
# then: systemctl enable --now ecworker; journalctl -u ecworker
# Local changes: systemctl edit ecworker (a drop-in; this file is replaced on
# upgrades).
HEAD
	sed -n '/^\[Unit\]/,$p' "$ROOT/deploy/systemd/ecworker.service" |
		sed -e 's|/usr/local/bin/|/usr/bin/|g' \
			-e 's|^Documentation=.*|Documentation=man:ecworker(1) file:/usr/share/doc/ecworker/README.md.gz|' \
			-e 's|^DynamicUser=yes$|User=ecworker\nGroup=ecworker|'
} >"$unit"
grep -q '/usr/local' "$unit" && die "the unit still names /usr/local"
grep -q '^DynamicUser' "$unit" && die "the unit still has DynamicUser"
grep -qx 'User=ecworker' "$unit" || die "deploy/systemd/ecworker.service has no DynamicUser=yes line to replace"
# Every directive of the source unit is there, but the three rewritten ones.
while IFS= read -r line; do
	case "$line" in '' | '#'* | Documentation=* | DynamicUser=*) continue ;; esac
	line="${line//\/usr\/local\/bin\//\/usr\/bin\/}"
	grep -qxF -- "$line" "$unit" || die "the packaged unit lost '$line'"
done <"$ROOT/deploy/systemd/ecworker.service"
f 644 "$unit" usr/lib/systemd/system/ecworker.service

f 644 "$HERE/ecworker.sysusers" usr/lib/sysusers.d/ecworker.conf
# The environment file's placeholder: the postinst copies it to /etc once.
f 644 "$HERE/ecworker.env" usr/share/ecworker/ecworker.env
# The lintian overrides, but those of tags this machine's lintian does not
# know (lintian reports an override of an unknown tag as an error).
if [[ -f "$HERE/lintian-overrides" ]]; then
	overrides="$scratch/lintian-overrides"
	while IFS= read -r line; do
		if [[ "$line" =~ ^ecworker:\ ([a-z0-9.+-]+) ]] && command -v lintian-explain-tags >/dev/null &&
			! lintian-explain-tags "${BASH_REMATCH[1]}" >/dev/null 2>&1; then
			echo "deb: lintian $(lintian --version | awk '{print $2}') has no tag ${BASH_REMATCH[1]}: its override is left out" >&2
			continue
		fi
		printf '%s\n' "$line"
	done <"$HERE/lintian-overrides" >"$overrides"
	d usr/share/lintian/overrides
	f 644 "$overrides" usr/share/lintian/overrides/ecworker
fi

f 644 "$HERE/copyright" "$doc/copyright"
gz() { gzip -9n <"$1" >"$stage/$2" && chmod 644 "$stage/$2"; } # SOURCE DEST
gz "$HERE/changelog" "$doc/changelog.gz"
gz "$ROOT/README.md" "$doc/README.md.gz"
gz "$ROOT/deploy/README.md" "$doc/DEPLOYMENT.md.gz"
gz "$ROOT/config/README.md" "$doc/CONFIGURATION.md.gz"
gz "$ROOT/jobs/README.md" "$doc/JOBS.md.gz"
gz "$ROOT/worker/README.md" "$doc/OPERATING.md.gz"

# ---- control ------------------------------------------------------------------

printf 'Source: ecworker\n\nPackage: ecworker\nArchitecture: any\n' >"$scratch/debian/control"
depends="$(cd "$scratch" && dpkg-shlibdeps -O -edebian/ecworker/usr/bin/ecworker 2>"$scratch/shlibdeps.log")" ||
	die "dpkg-shlibdeps failed: $(cat "$scratch/shlibdeps.log")"
depends="${depends#shlibs:Depends=}"
[[ -n "$depends" ]] || die "dpkg-shlibdeps found no dependencies"
size="$(du -sk --exclude=DEBIAN "$stage" | cut -f1)"
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@INSTALLED_SIZE@/$size/" \
	-e "s/@DEPENDS@/$depends/" -e "s/@MAINTAINER@/$MAINTAINER/" "$HERE/control.in" >"$stage/DEBIAN/control"
echo /etc/ecworker/ecworker.yaml >"$stage/DEBIAN/conffiles"
for s in postinst prerm postrm; do
	install -m 755 "$HERE/$s" "$stage/DEBIAN/$s"
done
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
	xargs -0 md5sum >DEBIAN/md5sums)
chmod 644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"

# ---- the package --------------------------------------------------------------

find "$stage" -exec touch --no-dereference -d "@$SOURCE_DATE_EPOCH" {} +
deb="$out/ecworker_${version}_${arch}.deb"
rm -f "$out"/ecworker_*.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "deb: $deb ($(stat -c %s "$deb") bytes, installed $size KiB)"
echo "deb: Depends: $depends"
