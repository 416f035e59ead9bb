#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-deps.sh - fails when a source file #includes a header its folder may
# not see (make check-deps; CONTRIBUTING.md describes the layout).
#
#   tests/check-deps.sh [ROOT]      ROOT: the tree to check (default: this one)
#
# Reads every #include "..." of the .c and .h files in include/, worker/ (and
# its folders) and tests/support/, finds the file each name stands for, and
# checks it against the rules below. Prints one line per violation,
#   FILE:LINE: "header" may not be included here: <the rule>
# and a summary, and exits 1; or prints one OK line and exits 0. Exit 2: usage.
# The Makefile's per-folder include paths (dir_incs) make most of these
# includes fail to compile; this check also names the rule, and catches what
# an include path cannot: a header of include/ pulling in the wrong seam, a
# name defined twice, a `#include "../x.h"`.

# The rule lists are split into globs on purpose (with set -f below), and
# matched as patterns: shellcheck's advice to quote them does not apply here.
# shellcheck disable=SC2053,SC2086
set -euo pipefail

# ---- the rules -------------------------------------------------------------
# A header name is looked up among every .h of the tree (tests/node_modules
# aside) and must stand for exactly one file; a name with a `/` is taken
# relative to the including file, as the compiler does.
#
# `private HEADER FILE...`: only those files may include HEADER. Checked first.
#
# `headers FOLDER NAME...`: the only headers FOLDER may hold. A room of
# worker/ keeps one public header named for it and one <room>_private.h for
# what its files share, so that a reader finds its face in one place.
#
# Then one block per room; a source file takes the FIRST block whose `files`
# it matches (so worker/main.c comes before worker/*):
#   files  the files of the room
#   may    where their includes may resolve
#   never  headers they may not include all the same
#   rule   the sentence printed with each violation
# A glob's `*` stays inside one folder: worker/* is not worker/cmd/x.c.
# A file under these folders that no block takes is a violation too: a new
# folder gets its block here.

BASE="include/ecw_buf.h include/ecw_cancel.h include/ecw_clock.h include/ecw_codec.h include/ecw_crash.h include/ecw_duration.h include/ecw_err.h \
	include/ecw_log.h include/ecw_pace.h include/ecw_progress.h include/ecw_strv.h include/ecw_version.h"

RULES="
private worker/migrate/migrate_private.h  worker/migrate/migrate.c worker/migrate/migrate_apply.c

headers worker/runtime   runtime.h runtime_private.h
headers worker/schedule  schedule.h schedule_private.h
headers worker/migrate   migrate.h migrate_private.h
headers worker/telemetry telemetry.h telemetry_private.h
headers worker/config
headers worker/yaml
private worker/schedule/schedule_private.h worker/schedule/schedule.c worker/schedule/schedule_audit.c worker/schedule/schedule_window.c
private worker/telemetry/telemetry_private.h worker/telemetry/*
private worker/runtime/runtime_private.h  worker/runtime/*
private worker/storage/http_conn.h worker/storage/http.c worker/storage/http_answer.c worker/storage/http_conn.c worker/storage/http_answer.h
private worker/storage/http_answer.h worker/storage/http.c worker/storage/http_answer.c
private jobs/fanout_private.h  jobs/fanout.c jobs/fanout_audit.c
private jobs/move_private.h    jobs/move.c jobs/move_blob.c jobs/move_blob_group.c
private jobs/move_blob_private.h jobs/move_blob.c jobs/move_blob_group.c
private jobs/index_private.h   jobs/index.c jobs/index_audit.c
private jobs/blob_ref_private.h jobs/blob_ref.c jobs/blob_ref_audit.c
private jobs/template_private.h jobs/template.c jobs/template_filter.c
private jobs/export_private.h jobs/export.c jobs/export_run.c jobs/export_io.c jobs/export_audit.c tests/unit/test_export.c
private jobs/index_list_private.h jobs/index_list.c jobs/index_list_audit.c jobs/index_list_store.c jobs/index_list_combine.c jobs/index_list_tuples.c jobs/index_list_combine_private.h
private jobs/index_list_combine_private.h jobs/index_list.c jobs/index_list_combine.c

files $BASE
may   $BASE
rule  a base header includes only base headers: worker/base, which sees them, knows nothing of jobs, storage or config

files include/*.h
may   include/*.h
rule  include/ holds the seams between parts: its headers include only include/ headers

files worker/base/*
may   $BASE
rule  worker/base includes only the base headers of include/ (buf, clock, codec, crash, duration, err, log, pace, progress, strv, version): it knows nothing of jobs, storage or config

files worker/storage/*
may   include/*.h worker/storage/*.h
never include/ecw_config.h include/ecw_node.h include/ecw_job.h include/ecw_template.h
rule  worker/storage includes only include/ and worker/storage, never ecw_config.h, ecw_node.h, ecw_job.h or ecw_template.h: storage knows nothing of jobs or config

files jobs/*
may   include/*.h jobs/*.h
never include/ecw_config.h
rule  jobs/ includes only include/ and jobs/, never ecw_config.h (the worker's schema): jobs read their settings through ecw_node.h

files worker/main.c
may   include/*.h worker/cmd/cmd.h
rule  main.c includes only include/ and, of worker/cmd, cmd.h: a table of commands, dispatch only

files worker/*
may   include/*.h worker/*.h
never worker/*_private.h
rule  what the commands and the daemon share (worker/*.c, worker/*.h: message, connect, poison, pause) includes only include/ and worker/*.h: it sits below every room of worker/

files worker/telemetry/*
may   include/*.h worker/telemetry/*.h
rule  worker/telemetry (metrics, traces, OTLP) includes only include/ and worker/telemetry

files worker/migrate/*
may   include/*.h worker/migrate/*.h
rule  worker/migrate includes only include/ and worker/migrate

files worker/yaml/*
may   $BASE include/ecw_node.h
rule  worker/yaml (the YAML tree and its typed readers) includes only the base headers of include/ and ecw_node.h: it sits below the job types, which read their settings with it

files worker/config/*
may   include/*.h worker/config/*.h
rule  worker/config (the schema and its sections) includes only include/ and worker/config

files worker/schedule/*
may   include/*.h worker/schedule/*.h worker/*.h worker/telemetry/*.h
never worker/*_private.h worker/telemetry/*_private.h
rule  worker/schedule includes only include/, worker/schedule, what worker/ shares and worker/telemetry

files worker/runtime/*
may   include/*.h worker/runtime/*.h worker/*.h worker/telemetry/*.h worker/schedule/*.h
never worker/*_private.h worker/telemetry/*_private.h worker/schedule/*_private.h
rule  worker/runtime (the daemon) includes only include/, worker/runtime, what worker/ shares, worker/telemetry and worker/schedule: never a header of worker/cmd, worker/storage or jobs/, nor another room's *_private.h

files worker/cmd/*
may   include/*.h worker/cmd/*.h worker/*.h worker/runtime/*.h worker/schedule/*.h worker/migrate/*.h worker/telemetry/*.h
never worker/*_private.h worker/*/*_private.h
rule  worker/cmd includes only include/, worker/cmd, what worker/ shares and the public headers of worker/runtime, worker/schedule, worker/migrate and worker/telemetry (never a *_private.h)

files tests/support/*
may   include/*.h tests/support/*.h
rule  tests/support includes only include/ and tests/support
"

# The folders whose sources are checked, and where header names are looked up.
SCAN_DIRS=(include worker jobs tests/support)
HEADER_DIRS=(include worker jobs tests)

# Headers the Makefile writes into BUILD/gen (never part of the tree), and
# the only files that may include each.
declare -A generated=([ecw_build_info.h]="worker/cmd/version.c")

# ---- reading the rules -----------------------------------------------------

if [[ $# -gt 1 || ${1:-} == -* ]]; then
	echo "usage: $0 [ROOT]" >&2
	exit 2
fi
ROOT="${1:-$(dirname "${BASH_SOURCE[0]}")/..}"
cd "$ROOT" 2>/dev/null || { echo "$0: no directory $ROOT" >&2; exit 2; }
set -f # the globs below are matched by matches(), never expanded against the disk

r_files=() r_may=() r_never=() r_rule=()
p_header=() p_files=()
declare -A room_headers # folder -> the headers it may hold, space-separated
while read -r key rest; do
	case "$key" in
	'' | '#'*) ;;
	private)
		read -r header files <<<"$rest"
		p_header+=("$header")
		p_files+=("$files")
		;;
	headers)
		read -r folder names <<<"$rest"
		room_headers[$folder]="$names"
		;;
	files)
		r_files+=("$rest") r_may+=("") r_never+=("") r_rule+=("")
		;;
	may) r_may[${#r_files[@]} - 1]="$rest" ;;
	never) r_never[${#r_files[@]} - 1]="$rest" ;;
	rule) r_rule[${#r_files[@]} - 1]="$rest" ;;
	*)
		echo "$0: unreadable rule line: $key $rest" >&2
		exit 2
		;;
	esac
done <<<"$RULES"

# matches PATH GLOB...: whether PATH matches one of the globs, `*` not
# crossing a `/`.
matches() {
	local path="$1" g
	shift
	for g in "$@"; do
		[[ "${path%/*}" == "${g%/*}" && "${path##*/}" == ${g##*/} ]] && return 0
	done
	return 1
}

# ---- the headers of the tree -----------------------------------------------

declare -A where # header name -> the files defining it, space-separated
mapfile -t headers < <(find "${HEADER_DIRS[@]}" -path tests/node_modules -prune -o -name '*.h' -type f -print 2>/dev/null | sort)
for h in "${headers[@]}"; do
	name="${h##*/}"
	where[$name]="${where[$name]:+${where[$name]} }$h"
done
mapfile -t sources < <(find "${SCAN_DIRS[@]}" -name '*.[ch]' -type f 2>/dev/null | sort)

# The #include "NAME" lines of every header and source, read in one pass
# (an awk per file made this check take seconds): FILE -> its LINE:NAME
# lines, one a line.
declare -A incs
while IFS=: read -r file ln inc; do
	incs[$file]+="$ln:$inc"$'\n'
done < <(printf '%s\0' "${headers[@]}" "${sources[@]}" | sort -zu | xargs -0 -r awk '
	/^[ \t]*#[ \t]*include[ \t]*"/ { s = $0; sub(/^[^"]*"/, "", s); sub(/".*/, "", s); print FILENAME ":" FNR ":" s }')

# resolve FILE NAME: sets `target` to the file that FILE's #include "NAME"
# stands for; empty when none, or when the name is defined twice (`ambiguous`
# then lists the files).
resolve() {
	local defs
	target="" ambiguous=""
	if [[ "$2" == */* ]]; then
		target="$(realpath -m --relative-to=. "$(dirname "$1")/$2")"
		[[ -f "$target" ]] || target=""
	else
		read -r -a defs <<<"${where[$2]:-}"
		if [[ ${#defs[@]} -gt 1 ]]; then
			ambiguous="${defs[*]}"
		else
			target="${defs[0]:-}"
		fi
	fi
}

# What each header includes: LINE:FILE, resolved. The `never` lists also hold
# through another header: jobs/ may include ecw_job.h only while ecw_job.h does
# not pull in ecw_config.h. Such a violation is reported once, at the line of
# the header that pulls the forbidden one in.
declare -A deps
for name in "${!where[@]}"; do
	for h in ${where[$name]}; do
		deps[$h]=""
		while IFS=: read -r ln inc; do
			[[ -n "$ln" ]] || continue
			resolve "$h" "$inc"
			[[ -n "$target" ]] && deps[$h]+=" $ln:$target"
		done <<<"${incs[$h]:-}"
	done
done

violations=0
declare -A bad_files
violation() { # FILE TEXT
	echo "$2" >&2
	violations=$((violations + 1))
	bad_files[$1]=1
}
# say RULE: the include at $f:$line of $name breaks RULE.
say() { violation "$f" "$f:$line: \"$name\" may not be included here: $1"; }

for name in $(printf '%s\n' "${!where[@]}" | sort); do
	read -r -a defs <<<"${where[$name]}"
	if [[ ${#defs[@]} -gt 1 ]]; then
		for d in "${defs[@]}"; do
			violation "$d" "$d: \"$name\" is also defined in $(printf '%s\n' "${defs[@]}" | grep -vxF "$d" | paste -sd' '): a header name must resolve to exactly one file in the tree"
		done
	fi
done

# A room's headers: its public one and its *_private.h, no other.
for h in "${headers[@]}"; do
	folder="${h%/*}"
	[[ -n "${room_headers[$folder]+set}" ]] || continue
	[[ " ${room_headers[$folder]} " == *" ${h##*/} "* ]] && continue
	violation "$h" "$h: a room keeps its public header and its private one only (${room_headers[$folder]:-none: its seams are in include/}): move what this one declares into them"
done

# room_of FILE: sets `room` to the index of the first block whose files FILE
# matches, or -1.
room_of() {
	local i
	room=-1
	for i in "${!r_files[@]}"; do
		if matches "$1" ${r_files[i]}; then
			room=$i
			return
		fi
	done
}

# allowed FILE TARGET: whether FILE's block lets it include TARGET (the
# private lines aside).
allowed() {
	local room
	room_of "$1"
	[[ $room -ge 0 ]] && matches "$2" ${r_may[room]} && ! matches "$2" ${r_never[room]}
}

# through HEADER ROOM: what HEADER includes, and they in turn, must not be in
# ROOM's `never` list either (HEADER is included at $f:$line). Only includes
# their own folder's rules allow are followed: the others are reported where
# they are.
declare -A reported
through() {
	local queue=("$1") i=0 h dep ln inc
	local -A seen=([$1]=1)
	while [[ $i -lt ${#queue[@]} ]]; do
		h="${queue[i]}"
		i=$((i + 1))
		for dep in ${deps[$h]}; do
			ln="${dep%%:*}" inc="${dep#*:}"
			allowed "$h" "$inc" || continue
			if matches "$inc" ${r_never[$2]}; then
				[[ -n "${reported[$h:$ln:$2]:-}" ]] && continue
				reported[$h:$ln:$2]=1
				violation "$h" "$h:$ln: \"${inc##*/}\" may not be included here: ${r_rule[$2]} ($h is reached from $f:$line)"
			elif [[ -z "${seen[$inc]:-}" ]]; then
				seen[$inc]=1
				queue+=("$inc")
			fi
		done
	done
}

# ---- the includes ----------------------------------------------------------

nincludes=0
for f in "${sources[@]}"; do
	room_of "$f"
	if [[ $room -lt 0 ]]; then
		violation "$f" "$f: is in no room of tests/check-deps.sh: give its folder a block of rules there"
		continue
	fi
	while IFS=: read -r line name; do
		[[ -n "$line" ]] || continue
		nincludes=$((nincludes + 1))
		if [[ -n "${generated[$name]:-}" ]]; then
			[[ " ${generated[$name]} " == *" $f "* ]] ||
				say "a header the Makefile generates; only ${generated[$name]} may include it"
			continue
		fi
		resolve "$f" "$name"
		if [[ -n "$ambiguous" ]]; then
			say "a header name must resolve to exactly one file in the tree; this one names $ambiguous"
			continue
		elif [[ -z "$target" ]]; then
			say "a header name must resolve to exactly one file in the tree; this one names none"
			continue
		fi
		private=0
		for j in "${!p_header[@]}"; do
			if [[ "$target" == "${p_header[j]}" ]]; then
				private=1
				matches "$f" ${p_files[j]} ||
					say "$target is private to ${p_files[j]// / and }"
			fi
		done
		[[ $private -eq 1 ]] && continue
		if matches "$target" ${r_never[room]} || ! matches "$target" ${r_may[room]}; then
			say "${r_rule[room]}"
		elif [[ -n "${r_never[room]}" ]]; then
			through "$target" "$room"
		fi
	done <<<"${incs[$f]:-}"
done

if [[ $violations -gt 0 ]]; then
	echo "check-deps: $violations violation(s) in ${#bad_files[@]} file(s); the rules are at the top of tests/check-deps.sh" >&2
	exit 1
fi
echo "check-deps: OK (${#sources[@]} files, $nincludes includes, each where its folder may look)"
