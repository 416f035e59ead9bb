#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# image-pin-test.sh WORKDIR: tests deploy/image-pin.sh (make image-pin) without
# a registry, on copies of deploy/Dockerfile in WORKDIR:
#  - pinned against a local OCI layout (skopeo copy of the local
#    debian:trixie and debian:trixie-slim), the two ARG lines carry exactly
#    the digests skopeo reports for the layout, every other line but the
#    "Pinned" comment is unchanged, and the Dockerfile still starts both
#    stages FROM the build arguments;
#  - pinning again gives the same file (an old digest is replaced, not kept);
#  - against containers-storage, the digests podman reports;
#  - a lookup that fails (a layout without the tags, an unknown source, a
#    tag missing from podman) exits non-zero, says why, and leaves the file
#    byte for byte as it was.
# Needs skopeo, podman and the local base images (base-images.sh). Prints
# "ok ..." per check and "image-pin-test: N passed"; stops at the first failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="${1:?usage: image-pin-test.sh WORKDIR}/pin-test"
PIN="$ROOT/deploy/image-pin.sh"
passed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$*"; }
die() { printf 'FAIL %s\n' "$*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
for t in trixie trixie-slim; do
	podman image exists "docker.io/library/debian:$t" || die "no local docker.io/library/debian:$t (run base-images.sh)"
	skopeo copy -q "containers-storage:docker.io/library/debian:$t" "oci:$work/layout:$t" >/dev/null ||
		die "skopeo copy of debian:$t into an OCI layout failed"
done
want_build="$(skopeo inspect --format '{{.Digest}}' "oci:$work/layout:trixie")"
want_runtime="$(skopeo inspect --format '{{.Digest}}' "oci:$work/layout:trixie-slim")"
[[ "$want_build" =~ ^sha256:[0-9a-f]{64}$ && "$want_runtime" =~ ^sha256:[0-9a-f]{64}$ ]] ||
	die "skopeo reports no digests for the layout: '$want_build' '$want_runtime'"
ok "OCI layout of the local debian:trixie and trixie-slim ($want_runtime)"

df="$work/Dockerfile"
cp "$ROOT/deploy/Dockerfile" "$df"
# The committed Dockerfile's base images, without any digest they carry now.
name_of() { sed -n "s/^ARG $1=\([^@]*\).*/\1/p" "$ROOT/deploy/Dockerfile"; }
build_ref="$(name_of BUILD_IMAGE)"
runtime_ref="$(name_of RUNTIME_IMAGE)"
[[ "$build_ref" == */debian:trixie && "$runtime_ref" == */debian:trixie-slim ]] ||
	die "the Dockerfile's defaults are not debian:trixie and trixie-slim: $build_ref $runtime_ref"

out="$(IMAGE_PIN_FROM="oci:$work/layout" "$PIN" "$df" 2>&1)" || die "image-pin against the layout failed: $out"
check_pinned() { # FILE BUILD_DIGEST RUNTIME_DIGEST
	[[ "$(grep -c '^ARG BUILD_IMAGE=' "$1")" == 1 && "$(grep -c '^ARG RUNTIME_IMAGE=' "$1")" == 1 ]] ||
		die "$1: not exactly one ARG line per base image"
	grep -qxF "ARG BUILD_IMAGE=$build_ref@$2" "$1" || die "$1: BUILD_IMAGE is '$(grep '^ARG BUILD_IMAGE=' "$1")', not $build_ref@$2"
	grep -qxF "ARG RUNTIME_IMAGE=$runtime_ref@$3" "$1" || die "$1: RUNTIME_IMAGE is '$(grep '^ARG RUNTIME_IMAGE=' "$1")', not $runtime_ref@$3"
	diff <(grep -vE '^(ARG (BUILD|RUNTIME)_IMAGE=|# Pinned )' "$ROOT/deploy/Dockerfile") \
		<(grep -vE '^(ARG (BUILD|RUNTIME)_IMAGE=|# Pinned )' "$1") >/dev/null ||
		die "$1: image-pin changed more than the ARG lines and the Pinned comment"
	# shellcheck disable=SC2016 # the Dockerfile's own ${...}
	if ! grep -q '^FROM ${BUILD_IMAGE} AS build$' "$1" || ! grep -q '^FROM ${RUNTIME_IMAGE}$' "$1"; then
		die "$1: the stages no longer start FROM the build arguments"
	fi
}
check_pinned "$df" "$want_build" "$want_runtime"
grep -q "^# Pinned on $(date -u +%Y-%m-%d) by make image-pin (digests from oci:" "$df" || die "the Pinned comment was not updated"
ok "pinned from the layout: ARG lines carry exactly skopeo's digests, nothing else changed"

cp "$df" "$work/Dockerfile.first"
out="$(IMAGE_PIN_FROM="oci:$work/layout" "$PIN" "$df" 2>&1)" || die "pinning again failed: $out"
cmp -s "$df" "$work/Dockerfile.first" || die "pinning again changed the file: $(diff "$work/Dockerfile.first" "$df")"
ok "pinning again gives the same file (old digests replaced)"

cs_build="$(podman image inspect --format '{{.Digest}}' "$build_ref")"
cs_runtime="$(podman image inspect --format '{{.Digest}}' "$runtime_ref")"
out="$(IMAGE_PIN_FROM=containers-storage "$PIN" "$df" 2>&1)" || die "image-pin against containers-storage failed: $out"
check_pinned "$df" "$cs_build" "$cs_runtime"
[[ "$cs_runtime" != "$want_runtime" ]] || die "the layout and podman report the same digest: the re-pin test proves nothing"
ok "re-pinned from containers-storage: podman's digests replaced the layout's"

fails() { # WHAT EXPECTED-MESSAGE ENV...: image-pin must fail and leave $df as it was
	local what="$1" msg="$2"
	shift 2
	cp "$df" "$work/before"
	if out="$(env "$@" "$PIN" "$df" 2>&1)"; then die "$what: image-pin succeeded"; fi
	grep -q "$msg" <<<"$out" || die "$what: image-pin says '$out', not '$msg'"
	cmp -s "$df" "$work/before" || die "$what: the Dockerfile changed"
	compgen -G "$work/.image-pin.*" >/dev/null && die "$what: a temporary file was left behind"
	ok "fails and leaves the file unchanged: $what"
}
mkdir -p "$work/other"
skopeo copy -q "containers-storage:docker.io/library/debian:trixie" "oci:$work/other:unrelated" >/dev/null
fails "a layout without the tags" "cannot resolve $build_ref" IMAGE_PIN_FROM="oci:$work/other"
fails "a directory that is no layout" "no OCI layout" IMAGE_PIN_FROM="oci:$work/nowhere"
fails "an unknown source" "use registry, containers-storage or oci:DIR" IMAGE_PIN_FROM=ftp
sed -i 's/^ARG RUNTIME_IMAGE=\([^@]*\)-slim@/ARG RUNTIME_IMAGE=\1-nosuchtag@/' "$df"
fails "a tag podman does not have" "cannot resolve .*trixie-nosuchtag" IMAGE_PIN_FROM=containers-storage

echo "image-pin-test: $passed passed"
