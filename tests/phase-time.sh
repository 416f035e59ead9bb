#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# phase-time.sh - the time of each phase of make test (make test-run), so that
# the slow one shows.
#
#   tests/phase-time.sh FILE NAME COMMAND...   runs COMMAND, then appends
#                                              "NAME WALL CPU" to FILE
#   tests/phase-time.sh --report FILE          prints FILE's phases and total
#
# WALL is the elapsed time and CPU the user + system time of COMMAND and
# what it waited for, in seconds. Exits with COMMAND's status (its phase is
# recorded either way).
set -euo pipefail

if [[ ${1:-} == --report ]]; then
	[[ $# -eq 2 && -f "$2" ]] || { echo "usage: $0 --report FILE" >&2; exit 2; }
	awk '{ printf "   %-16s %8.1fs   (cpu %7.1fs)\n", $1, $2, $3; w += $2; c += $3 }
		END { printf "   %-16s %8.1fs   (cpu %7.1fs)   %dm%02ds\n", "total", w, c, int(w / 60), int(w % 60) }' \
		"$2" | { echo "==== make test: the time of each phase (wall, cpu: user + sys)"; cat; }
	exit 0
fi
[[ $# -ge 3 ]] || { echo "usage: $0 FILE NAME COMMAND... | --report FILE" >&2; exit 2; }
file="$1" name="$2"
shift 2
mkdir -p "$(dirname "$file")"
start="${EPOCHREALTIME/,/.}"
rc=0
"$@" || rc=$?
end="${EPOCHREALTIME/,/.}"
# times: this shell's user and system time, then its children's (in this
# shell: a pipe or $(...) would run it in a subshell, which has no children).
times >"$file.times"
cpu="$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } }
	END { printf "%.1f", s }' "$file.times")"
rm -f "$file.times"
awk -v n="$name" -v a="$start" -v b="$end" -v c="$cpu" 'BEGIN { printf "%s %.1f %s\n", n, b - a, c }' >>"$file"
exit $rc
