#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sbom.sh VERSION [REVISION [CREATED]]: prints an SPDX 2.3 JSON document of
# what is installed in the root filesystem it runs in: one package per Debian
# package dpkg knows as installed (name, version, architecture, source package
# and version, purl pkg:deb/debian/NAME@VERSION?arch=ARCH&distro=debian-N,
# with upstream=SOURCE when the source package has another name or version),
# and ecworker itself at VERSION (REVISION, the git commit, in its sourceInfo).
# CREATED (UTC, 2006-01-02T15:04:05Z) defaults to now.
#
# The image build runs it in the runtime stage after the last package is
# installed (deploy/Dockerfile), into /usr/share/doc/ecworker/sbom.spdx.json;
# an image derived from ours that installs more packages can run it again:
#   /usr/local/lib/ecworker/sbom.sh "$(ecworker --version | ...)" > FILE
#
# It needs bash and dpkg-query only (the slim image has no jq or python), so
# it writes the JSON itself. No value is escaped: each is checked against the
# characters Debian allows in it (package names [a-z0-9.+-], versions
# [A-Za-z0-9.+~:-], architectures [a-z0-9-]), none of which JSON escapes, and
# anything else stops the script with an error rather than a broken document.
# One package per line, so `grep NAME` finds it; the line breaks fall only
# between JSON values, so deleting them leaves the same document (make image
# puts that, minified, in the image's ecworker.sbom label).
set -euo pipefail

version="${1:?usage: sbom.sh VERSION [REVISION [CREATED]]}"
revision="${2:-unknown}"
created="${3:-}"
[[ -n "$created" && "$created" != unknown ]] || created="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

die() { echo "sbom.sh: $*" >&2; exit 1; }
check() { # WHAT VALUE REGEX
	[[ "$2" =~ $3 ]] || die "$1 '$2' has characters outside $3"
}
check "ecworker version" "$version" '^[A-Za-z0-9.+~-]+$'
check "revision" "$revision" '^[A-Za-z0-9.+~-]+$'
check "created" "$created" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$'

# distro=debian-13 (VERSION_ID), or debian-CODENAME for testing and unstable.
distro="$(
	# shellcheck source=/dev/null
	. /etc/os-release
	echo "${ID:-debian}-${VERSION_ID:-${VERSION_CODENAME:-unknown}}"
)"
check "distribution" "$distro" '^[a-z0-9.-]+$'

# purl: percent-encode what the purl specification does not leave bare in a
# name or version ('+' and the epoch's ':'; '~', '.', '-' stay).
purl_enc() {
	local s="${1//%/%25}"
	s="${s//+/%2B}"
	printf '%s' "${s//:/%3A}"
}

uuid="$(cat /proc/sys/kernel/random/uuid 2>/dev/null || true)"
[[ "$uuid" =~ ^[0-9a-f-]{36}$ ]] || uuid="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"

printf '{"spdxVersion":"SPDX-2.3","dataLicense":"CC0-1.0","SPDXID":"SPDXRef-DOCUMENT",\n'
printf '"name":"ecworker-%s-image","documentNamespace":"https://spdx.org/spdxdocs/ecworker-%s-image-%s",\n' "$version" "$version" "$uuid"
printf '"creationInfo":{"created":"%s","creators":["Tool: ecworker-sbom.sh"],"comment":"Installed Debian packages (dpkg-query) of the ecworker image, and ecworker."},\n' "$created"
printf '"packages":[\n'
printf '{"name":"ecworker","SPDXID":"SPDXRef-ecworker","versionInfo":"%s","downloadLocation":"NOASSERTION","filesAnalyzed":false,' "$version"
printf '"sourceInfo":"built from git commit %s","primaryPackagePurpose":"APPLICATION",' "$revision"
printf '"licenseConcluded":"NOASSERTION","licenseDeclared":"NOASSERTION","copyrightText":"NOASSERTION",'
printf '"externalRefs":[{"referenceCategory":"PACKAGE-MANAGER","referenceType":"purl","referenceLocator":"pkg:generic/ecworker@%s"}]}' "$(purl_enc "$version")"

n=0
ids=()
while IFS='|' read -r status name ver arch src srcver; do
	[[ "$status" == "install ok installed" ]] || continue
	check "package name" "$name" '^[a-z0-9][a-z0-9.+-]*$'
	check "version of $name" "$ver" '^[A-Za-z0-9.+~:-]+$'
	check "architecture of $name" "$arch" '^[a-z0-9-]+$'
	src="${src:-$name}"
	srcver="${srcver:-$ver}"
	check "source package of $name" "$src" '^[a-z0-9][a-z0-9.+-]*$'
	check "source version of $name" "$srcver" '^[A-Za-z0-9.+~:-]+$'
	n=$((n + 1))
	# SPDXIDs allow [A-Za-z0-9.-]: the counter keeps them unique.
	id="SPDXRef-deb-$n-${name//+/-}-$arch"
	ids+=("$id")
	purl="pkg:deb/debian/$(purl_enc "$name")@$(purl_enc "$ver")?arch=$arch&distro=$distro"
	if [[ "$src" != "$name" || "$srcver" != "$ver" ]]; then
		up="$(purl_enc "$src")"
		[[ "$srcver" == "$ver" ]] || up="$up%40$(purl_enc "$srcver")"
		purl="$purl&upstream=$up"
	fi
	printf ',\n{"name":"%s","SPDXID":"%s","versionInfo":"%s","supplier":"Organization: Debian","downloadLocation":"NOASSERTION","filesAnalyzed":false,' "$name" "$id" "$ver"
	printf '"sourceInfo":"built package from: %s %s",' "$src" "$srcver"
	printf '"externalRefs":[{"referenceCategory":"PACKAGE-MANAGER","referenceType":"purl","referenceLocator":"%s"}]}' "$purl"
done < <(dpkg-query -W -f='${Status}|${Package}|${Version}|${Architecture}|${source:Package}|${source:Version}\n')
[[ "$n" -gt 0 ]] || die "dpkg-query lists no installed package"

printf '\n],\n"relationships":[\n'
printf '{"spdxElementId":"SPDXRef-DOCUMENT","relationshipType":"DESCRIBES","relatedSpdxElement":"SPDXRef-ecworker"}'
# The document describes what the image holds: ecworker and every package.
for id in "${ids[@]}"; do
	printf ',\n{"spdxElementId":"SPDXRef-DOCUMENT","relationshipType":"DESCRIBES","relatedSpdxElement":"%s"}' "$id"
done
printf '\n]}\n'
