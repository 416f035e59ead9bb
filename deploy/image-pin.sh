#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# image-pin.sh [DOCKERFILE]: pins the base images of DOCKERFILE (default
# deploy/Dockerfile; `make image-pin` runs this): each `ARG BUILD_IMAGE=NAME:TAG`
# and `ARG RUNTIME_IMAGE=NAME:TAG` line, with or without an @sha256: digest
# already, becomes NAME:TAG@sha256:DIGEST with the digest NAME:TAG has now, and
# the `# Pinned ...` comment says when and from where. Pinning again replaces
# the old digests. The tag stays for the reader; a digest reference uses the
# digest alone.
#
# Where the digests come from (IMAGE_PIN_FROM):
#   registry            (the default) skopeo inspect --format '{{.Digest}}'
#                       docker://NAME:TAG, the digest of what the tag names
#                       (for debian, the index of every platform); without
#                       skopeo, podman pull and the digest podman records
#   containers-storage  podman's local image NAME:TAG (podman image inspect)
#   oci:DIR             an OCI layout directory, e.g. made with
#                       skopeo copy containers-storage:NAME:TAG oci:DIR:TAG;
#                       the reference's tag names the image in it
#
# Every digest is looked up before the file is touched, and each must be
# sha256: and 64 hex digits; if any lookup fails the file is left as it was
# and the reason is printed (exit 1). The new file replaces the old in one
# rename.
set -euo pipefail

file="${1:-deploy/Dockerfile}"
from="${IMAGE_PIN_FROM:-registry}"
args=(BUILD_IMAGE RUNTIME_IMAGE)

die() { echo "image-pin: $*" >&2; exit 1; }

[[ -f "$file" ]] || die "no file $file"
case "$from" in
registry | containers-storage) ;;
oci:?*) [[ -f "${from#oci:}/index.json" ]] || die "IMAGE_PIN_FROM=$from: no OCI layout (index.json) in ${from#oci:}" ;;
*) die "IMAGE_PIN_FROM=$from: use registry, containers-storage or oci:DIR" ;;
esac

# DIGEST of NAME:TAG, from $from; prints nothing and fails when it cannot.
lookup() {
	local ref="$1" out
	case "$from" in
	registry)
		if command -v skopeo >/dev/null; then
			out="$(skopeo inspect --format '{{.Digest}}' "docker://$ref" 2>&1)" || { echo "$out" >&2; return 1; }
		elif command -v podman >/dev/null; then
			podman pull -q "$ref" >/dev/null || return 1
			out="$(podman image inspect --format '{{.Digest}}' "$ref")" || return 1
		else
			echo "neither skopeo nor podman is installed" >&2
			return 1
		fi
		;;
	containers-storage)
		out="$(podman image inspect --format '{{.Digest}}' "$ref" 2>&1)" || { echo "$out" >&2; return 1; }
		;;
	oci:*)
		out="$(skopeo inspect --format '{{.Digest}}' "$from:${ref##*:}" 2>&1)" || { echo "$out" >&2; return 1; }
		;;
	esac
	[[ "$out" =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "not a sha256 digest: '$out'" >&2; return 1; }
	echo "$out"
}

declare -A digest=() ref=()
for a in "${args[@]}"; do
	line="$(grep -E "^ARG $a=" "$file")" || die "$file has no 'ARG $a=' line"
	[[ "$(grep -cE "^ARG $a=" "$file")" == 1 ]] || die "$file has more than one 'ARG $a=' line"
	r="${line#ARG "$a"=}"
	r="${r%%@*}"
	# NAME:TAG, the tag after the last slash: a digest needs a tag to come from.
	[[ "${r##*/}" == *:* ]] || die "ARG $a=$r has no tag to look up"
	[[ "$r" =~ ^[A-Za-z0-9._/:-]+$ ]] || die "ARG $a=$r is not an image reference"
	d="$(lookup "$r")" || die "cannot resolve $r (IMAGE_PIN_FROM=$from); $file is unchanged"
	ref[$a]="$r"
	digest[$a]="$d"
done

case "$from" in
registry) how="$(command -v skopeo >/dev/null && echo 'skopeo inspect docker://' || echo 'podman pull')" ;;
*) how="$from" ;;
esac
tmp="$(mktemp "$(dirname "$file")/.image-pin.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
sed_args=()
for a in "${args[@]}"; do
	sed_args+=(-e "s|^ARG $a=.*\$|ARG $a=${ref[$a]}@${digest[$a]}|")
done
sed_args+=(-e "s|^# Pinned .*\$|# Pinned on $(date -u +%Y-%m-%d) by make image-pin (digests from $how).|")
sed "${sed_args[@]}" "$file" >"$tmp"
chmod --reference="$file" "$tmp"
mv "$tmp" "$file"
trap - EXIT
for a in "${args[@]}"; do echo "image-pin: $a=${ref[$a]}@${digest[$a]}"; done
