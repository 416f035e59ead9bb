#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-format.sh FILE... - fails when a file does not start with its SPDX
# license line, or differs from what clang-format
# makes of it with the committed .clang-format files (make check-format, which
# passes every C file of the tree; make format rewrites them). Each file is
# checked against the nearest .clang-format above it, as make format formats
# it: the top one, or tests/.clang-format for the tests.
#
# Run from the top of the tree. Prints the clang-format version it ran:
# Debian 12 ships 14, Debian 13 ships 19, and they lay out a few constructs
# differently (the Makefile says which). CLANG_FORMAT=clang-format-19 picks
# another one. Exit 0: all formatted; 1: some are not, or no clang-format;
# 2: usage.
set -euo pipefail

CLANG_FORMAT="${CLANG_FORMAT:-clang-format}"
if [[ $# -eq 0 ]]; then
	echo "usage: $0 FILE..." >&2
	exit 2
fi
if [[ ! -f .clang-format ]]; then
	echo "check-format: no .clang-format in $PWD: run it from the top of the tree" >&2
	exit 2
fi
for f in "$@"; do
	if [[ "$f" == /* || "$f" == *..* ]]; then
		echo "check-format: $f: give the files relative to the top of the tree" >&2
		exit 2
	fi
done
if ! command -v "$CLANG_FORMAT" >/dev/null; then
	echo "check-format: $CLANG_FORMAT is missing: make deps installs it (Debian's clang-format package)" >&2
	exit 1
fi
version="$("$CLANG_FORMAT" --version | sed -E 's/.*version ([0-9][^ ]*).*/\1/')"

# Every file says its license on its first line (LICENSE: MIT).
unlicensed=()
for f in "$@"; do
	IFS= read -r first <"$f" || true
	[[ "$first" == "/* SPDX-License-Identifier: MIT */" ]] || unlicensed+=("$f")
done
if [[ ${#unlicensed[@]} -gt 0 ]]; then
	printf '%s: no license line: its first line must be /* SPDX-License-Identifier: MIT */\n' "${unlicensed[@]}" >&2
	echo "check-format: ${#unlicensed[@]} file(s) without the SPDX line (LICENSE)" >&2
	exit 1
fi

# No fallback: a file that finds no .clang-format is an error, not checked
# against clang-format's own default style.
if out="$("$CLANG_FORMAT" --style=file --fallback-style=none --dry-run -Werror "$@" 2>&1)"; then
	echo "==== format: $# file(s) as .clang-format wants (clang-format $version)"
	exit 0
fi

# clang-format reports each place in three lines: show the first few places,
# then one line per file.
places="$(grep -E '^[^ :]+:[0-9]+:[0-9]+: error: code should be clang-formatted' <<<"$out" || true)"
if [[ -z "$places" ]]; then
	echo "$out" >&2 # not a formatting difference: an unreadable .clang-format, a missing file
	echo "check-format: clang-format $version failed" >&2
	exit 1
fi
head -n 12 <<<"$out" >&2
echo "..." >&2
cut -d: -f1 <<<"$places" | uniq -c | awk '{ printf "%s: %d place(s) to format\n", $2, $1 }' >&2
echo "check-format: $(wc -l <<<"$places") place(s) in $(cut -d: -f1 <<<"$places" | sort -u | wc -l) file(s)" \
	"differ from .clang-format (clang-format $version); make format rewrites them" >&2
exit 1
