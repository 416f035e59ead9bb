#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# image-sbom-label.sh IMAGE: gives IMAGE (just built from deploy/Dockerfile;
# `make image` runs this after podman build) its SBOM as labels:
#   ecworker.sbom         the SPDX document of /usr/share/doc/ecworker/sbom.spdx.json,
#                         without its line breaks, gzip -9n, base64 (one line)
#   ecworker.sbom.sha256  the sha256 of that file as it is in the image
# (ecworker.sbom.path, the file's path, comes from the Dockerfile.)
# A Dockerfile cannot compute a label from a file made during the build, so the
# file is read out of the image (podman create + podman cp, nothing is run) and
# the labels are added by a build of one LABEL instruction on top, tagged IMAGE
# again. Compressed, because the document is about 0.5 kB per package
# (50 kB for the image), which is noise in `inspect` and near the limit of a
# single command-line argument (128 kB); compressed it is about a tenth.
# Read it back with:
#   podman image inspect --format '{{index .Config.Labels "ecworker.sbom"}}' IMAGE | base64 -d | gunzip
# Checks that the file is there and is a non-empty SPDX 2.3 document; fails
# (and leaves IMAGE as built) otherwise.
set -euo pipefail

image="${1:?usage: image-sbom-label.sh IMAGE}"
path=/usr/share/doc/ecworker/sbom.spdx.json
build_flags="${IMAGE_BUILD_FLAGS:---format docker}"

die() { echo "image-sbom-label: $*" >&2; exit 1; }

tmp="$(mktemp -d)"
ctr=""
cleanup() {
	[[ -n "$ctr" ]] && podman rm --force "$ctr" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT

id="$(podman image inspect --format '{{.Id}}' "$image")" || die "no image $image"
ctr="$(podman create --pull never "$id")" || die "podman create $image failed"
podman cp "$ctr:$path" "$tmp/sbom.spdx.json" || die "$image has no $path"
head -c 40 "$tmp/sbom.spdx.json" | grep -q '^{"spdxVersion":"SPDX-2.3"' || die "$path in $image is not an SPDX 2.3 document"
grep -q '"referenceLocator":"pkg:deb/' "$tmp/sbom.spdx.json" || die "$path in $image lists no Debian package"

sha="$(sha256sum "$tmp/sbom.spdx.json" | cut -d' ' -f1)"
tr -d '\n' <"$tmp/sbom.spdx.json" | gzip -9n | base64 -w0 >"$tmp/sbom.b64"
# base64 has no quote or backslash, so it goes into the LABEL line as is.
{
	echo "FROM $id"
	printf 'LABEL ecworker.sbom="%s" ecworker.sbom.sha256="%s"\n' "$(cat "$tmp/sbom.b64")" "$sha"
} >"$tmp/Containerfile"
# shellcheck disable=SC2086 # the flags are words
podman build $build_flags --pull=never -q -f "$tmp/Containerfile" -t "$image" "$tmp" >/dev/null ||
	die "adding the labels to $image failed"
n="$(grep -c '"referenceLocator":"pkg:deb/' "$tmp/sbom.spdx.json")"
echo "image-sbom-label: $image: labels ecworker.sbom ($(wc -c <"$tmp/sbom.b64") bytes, $n Debian packages), ecworker.sbom.sha256 $sha"
