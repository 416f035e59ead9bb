#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-man.sh - the man page against the program's own option tables, the
# ones `--help` prints, so that neither can change alone (make check-docs, in
# make test; make check-tests shows it failing on a planted difference).
#
#   tests/check-man.sh PROGRAM [MANPAGE]     (default deploy/debian/ecworker.1)
#
# The commands are those `PROGRAM help` lists. For each, the long options are
# those of the option table of `PROGRAM CMD --help` (a line that starts, after
# at most 8 spaces, with `--name` or `-x, --name`), together with those of its
# subcommands (`poison list|replay|purge`, `migrate status`, `index get`: the
# lowercase words after the command in its usage lines), each asked with
# `PROGRAM CMD SUB --help`. Then, in the man page's COMMANDS section, where
# an entry is a .TP (a .TQ continues it) whose header names the command:
#   - every command has an entry, and every entry names a command;
#   - every long option of the command's tables is named in its entry, except
#     those every command's table has (--config, --help), which the OPTIONS
#     section must name instead;
#   - every long option an entry names is in its command's tables, or runs as
#     the command itself (`ecworker --version` is `ecworker version`).
# Prints one line per problem and exits 1, or 0; 2: usage.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 || ! -x "$1" ]]; then
	echo "usage: tests/check-man.sh PROGRAM [MANPAGE]" >&2
	exit 2
fi
prog="$1"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
man="${2:-$ROOT/deploy/debian/ecworker.1}"
[[ -f "$man" ]] || {
	echo "check-man: $man: no such file" >&2
	exit 2
}
name="${man#"$ROOT"/}"

problems=0
problem() {
	echo "$name: $*" >&2
	problems=$((problems + 1))
}

# The long options of one --help text's option table, one a line.
table_options() {
	{ grep -E '^ {1,8}(-[A-Za-z], )?--[a-z]' || true; } | sed -E 's/^ *(-[A-Za-z], )?(--[a-z][a-z0-9-]*).*/\2/' | sort -u
}
# The long options a piece of roff names (\- is a hyphen), one a line.
roff_options() {
	sed 's/\\-/-/g' | { grep -o -E -- '--[a-z][a-z0-9-]*' || true; } | sort -u
}
# in_list WORD LIST: whether LIST (one word a line) holds WORD; in bash, not
# a grep per option (those forks made this check take seconds).
in_list() {
	[[ $'\n'"$2"$'\n' == *$'\n'"$1"$'\n'* ]]
}
# The words of `PROGRAM help`'s list of commands.
commands=()
while read -r cmd; do
	commands+=("$cmd")
done < <("$prog" help | sed -n '/^commands:/,/^$/p' | sed -n -E 's/^  ([a-z][a-z0-9-]*) .*/\1/p')
[[ ${#commands[@]} -gt 0 ]] || {
	echo "check-man: '$prog help' lists no commands" >&2
	exit 1
}

# Each command's options: the union of its and its subcommands' tables.
declare -A opts
for cmd in "${commands[@]}"; do
	help="$("$prog" "$cmd" --help 2>&1)" || true
	all="$(table_options <<<"$help")"
	subs="$(sed -n -E "s/^(usage:)? +ecworker $cmd ([a-z][a-z|-]*)( .*)?\$/\\2/p" <<<"$help" | tr '|' '\n' | sort -u)"
	for sub in $subs; do
		all+=$'\n'"$("$prog" "$cmd" "$sub" --help 2>&1 | table_options)" || true
	done
	opts[$cmd]="$(grep -v '^$' <<<"$all" | sort -u || true)"
done

# The options every command with a table has: the man page's OPTIONS.
common=""
first=1
for cmd in "${commands[@]}"; do
	[[ -n "${opts[$cmd]}" ]] || continue
	if [[ $first -eq 1 ]]; then
		common="${opts[$cmd]}"
		first=0
	else
		common="$(comm -12 <(echo "$common") <(echo "${opts[$cmd]}"))"
	fi
done

# section NAME: the lines of the man page's section .SH NAME.
section() {
	awk -v want="$1" '/^\.SH / { on = ($0 == ".SH " want); next } on' "$man"
}
man_options="$(section OPTIONS | roff_options)"
for o in $common; do
	in_list "$o" "$man_options" || problem "OPTIONS: $o, which every command takes, is not named"
done

# The COMMANDS section as entries: "CMD<TAB>roff of the entry, one line".
entries="$(section COMMANDS | awk '
	function flush() { if (cmd != "") print cmd "\t" text; cmd = ""; text = "" }
	/^\.TP/ { flush(); head = 1; next }
	/^\.TQ/ { head = 1; next }
	head == 1 {
		head = 0
		h = $0
		if (cmd == "") {
			sub(/^\.[A-Z]+ +/, "", h)
			gsub(/\\f[BIRP]|"/, "", h)
			gsub(/\\-/, "-", h)
			split(h, w, /[ |,]+/)
			cmd = w[1]
		}
	}
	{ text = text " " $0 }
	END { flush() }')"

declare -A seen
while IFS=$'\t' read -r cmd text; do
	[[ -n "$cmd" ]] || continue
	if [[ -z "${opts[$cmd]+set}" ]]; then
		problem "COMMANDS: an entry for '$cmd', which '$(basename "$prog") help' does not list"
		continue
	fi
	seen[$cmd]=1
	in_man="$(roff_options <<<"$text")"
	for o in ${opts[$cmd]}; do
		in_list "$o" "$common" && continue
		in_list "$o" "$in_man" ||
			problem "COMMANDS: $cmd: $o is in '$(basename "$prog") $cmd --help' but not in its entry"
	done
	for o in $in_man; do
		in_list "$o" "${opts[$cmd]}" && continue
		# An alias of the command itself, as --version is of version.
		if a="$("$prog" "$o" 2>&1)" && b="$("$prog" "$cmd" 2>&1)" && [[ "$a" == "$b" ]]; then
			continue
		fi
		problem "COMMANDS: $cmd: its entry names $o, which '$(basename "$prog") $cmd --help' does not list"
	done
done <<<"$entries"
for cmd in "${commands[@]}"; do
	[[ -n "${seen[$cmd]+set}" ]] || problem "COMMANDS: no entry for '$cmd'"
done

if [[ $problems -gt 0 ]]; then
	echo "check-man: $problems problem(s): the man page and the program's --help differ" >&2
	exit 1
fi
n=0
for cmd in "${commands[@]}"; do
	n=$((n + $(grep -c . <<<"${opts[$cmd]}" || true)))
done
echo "==== man page: $name agrees with the --help of the ${#commands[@]} commands ($n long options)"
