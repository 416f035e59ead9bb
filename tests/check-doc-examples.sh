#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-doc-examples.sh - every YAML example of the Markdown pages passes
# `ecworker check-config`, so that no example rots (make check-docs, in make
# test; make check-tests shows it failing on a planted mistake).
#
#   tests/check-doc-examples.sh PROGRAM [PAGE...]
#
# PAGE...: default every *.md file of the tree (not build/, node_modules/).
# Each ```yaml block is one configuration, checked as written. A block that is
# a fragment (a few keys of a job, a job that chains to one the block does not
# declare) is made whole by markers on the lines right before its fence, which
# a reader of the rendered page does not see:
#
#   <!-- check-config: before
#   jobs:
#     archive-employee:
#   -->
#   <!-- check-config: after
#     employee-by-email: {type: index, source: Employees, ...}
#   -->
#   ```yaml
#
# The checked text is the "before" lines, the block, then the "after" lines
# (CONTRIBUTING.md, "Docs"). A marker not followed by a ```yaml block is an
# error, and so is any other check-config: marker. The fence's indentation (a
# block inside a list item) is taken off the block's lines; the markers' own
# off theirs. check-config runs offline, with nothing of the caller's
# environment but PATH, HOME, the sanitizers' options and
# AZURE_STORAGE_CONNECTION_STRING=UseDevelopmentStorage=true. Its problems are
# printed as PAGE:LINE:COLUMN of the block. Exits 1 when an example fails, 0
# when all pass; 2: usage.
set -euo pipefail

if [[ $# -lt 1 || ! -x "$1" ]]; then
	echo "usage: tests/check-doc-examples.sh PROGRAM [PAGE...]" >&2
	exit 2
fi
prog="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
shift
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

pages=("$@")
if [[ ${#pages[@]} -eq 0 ]]; then
	mapfile -t pages < <(cd "$ROOT" && find . \( -path ./build -o -path ./.git -o -name node_modules \) -prune -o \
		-name '*.md' -type f -print | sed 's|^\./||' | LC_ALL=C sort)
	pages=("${pages[@]/#/$ROOT/}")
fi

env_run=(env -i PATH="$PATH" HOME="${HOME:-/}" AZURE_STORAGE_CONNECTION_STRING=UseDevelopmentStorage=true)
for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
	[[ -n "${!v:-}" ]] && env_run+=("$v=${!v}")
done

total=0
failed=0
errors=0
npages=0
for page in "${pages[@]}"; do
	[[ -f "$page" ]] || {
		echo "check-doc-examples: $page: no such file" >&2
		exit 2
	}
	name="${page#"$ROOT"/}"
	dir="$TMP/$npages"
	mkdir -p "$dir"
	npages=$((npages + 1))
	# Writes dir/N.yaml for the Nth block and a line "N FENCE-LINE BEFORE-LINES
	# BLOCK-LINES" to dir/map; a misplaced or unknown marker goes to stderr.
	awk -v dir="$dir" -v page="$name" '
		function strip(s, n) { return substr(s, 1, n) ~ /^[ \t]*$/ ? substr(s, n + 1) : s }
		function lead(s) { match(s, /^[ \t]*/); return RLENGTH }
		function bad(msg) { printf "%s:%d: %s\n", page, NR, msg > "/dev/stderr"; errors++ }
		function forget() {
			if (marked) bad("a check-config marker must come right before a ```yaml block")
			before = ""; nbefore = 0; after = ""; nafter = 0; marked = 0
		}
		BEGIN { n = 0; state = "text" }
		state == "yaml" {
			if ($0 ~ /^[ \t]*```[ \t]*$/) {
				printf "%s", after > file
				close(file)
				print n, fence, nbefore, nblock > (dir "/map")
				before = ""; nbefore = 0; after = ""; nafter = 0; marked = 0
				state = "text"
				next
			}
			print strip($0, indent) > file
			nblock++
			next
		}
		state == "other" { if ($0 ~ /^[ \t]*```+[ \t]*$/) state = "text"; next }
		state == "marker" {
			if ($0 ~ /^[ \t]*-->[ \t]*$/) { state = "text"; next }
			if (kind == "before") { before = before strip($0, mindent) "\n"; nbefore++ }
			else { after = after strip($0, mindent) "\n"; nafter++ }
			next
		}
		/^[ \t]*<!-- *check-config/ {
			if ($0 ~ /^[ \t]*<!-- check-config: (before|after)[ \t]*$/) {
				kind = ($0 ~ /before/) ? "before" : "after"
				mindent = lead($0)
				state = "marker"
				marked = 1
			} else
				bad("unknown marker: want <!-- check-config: before or <!-- check-config: after")
			next
		}
		/^[ \t]*```yaml[ \t]*$/ {
			n++
			file = dir "/" n ".yaml"
			fence = NR
			indent = lead($0)
			nblock = 0
			printf "%s", before > file
			state = "yaml"
			next
		}
		/^[ \t]*```+[^`]*$/ { forget(); state = "other"; next }
		{ forget() }
		END {
			if (state == "yaml") bad("the ```yaml block that starts at line " fence " never ends")
			if (state == "marker") bad("a check-config marker never ends (-->)")
			exit errors ? 1 : 0
		}' "$page" || {
		errors=$((errors + 1))
		continue
	}
	[[ -f "$dir/map" ]] || continue
	while read -r n fence nbefore nblock; do
		total=$((total + 1))
		f="$dir/$n.yaml"
		if out="$(cd "$dir" && "${env_run[@]}" "$prog" check-config -c "$f" 2>&1)"; then
			continue
		fi
		failed=$((failed + 1))
		echo "$name:$fence: this YAML example fails check-config:" >&2
		# FILE:L:C: in check-config's lines becomes PAGE:LINE:C: of the block.
		awk -v f="$f:" -v page="$name" -v fence="$fence" -v nb="$nbefore" -v nk="$nblock" '
			index($0, f) == 1 {
				rest = substr($0, length(f) + 1)
				if (match(rest, /^[0-9]+/)) {
					l = substr(rest, 1, RLENGTH) + 0
					rest = substr(rest, RLENGTH + 1)
					if (l <= nb) where = page ":" fence ": (its check-config: before text, line " l ")"
					else if (l <= nb + nk) where = page ":" (fence + l - nb)
					else where = page ":" fence ": (its check-config: after text, line " (l - nb - nk) ")"
					print "  " where rest
					next
				}
				print "  " page ":" fence ":" rest
				next
			}
			{ print "  " $0 }' <<<"$out" >&2
	done <"$dir/map"
done

if [[ $errors -gt 0 || $failed -gt 0 ]]; then
	echo "check-doc-examples: $failed of $total YAML example(s) fail check-config, $errors page(s) with a misplaced marker" >&2
	exit 1
fi
echo "==== doc examples: the $total YAML examples of $npages Markdown pages pass $(basename "$prog") check-config"
