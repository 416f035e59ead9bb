#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-tests.sh - the tests of the source checks (make check-tests; make test
# runs it first): check-deps and check-format must pass on a clean tree and
# fail, naming the file and the rule, on each kind of violation;
# check-hardening must pass on a small program built with the Makefile's
# hardening flags and fail, naming the property, with each one undone; and
# check-circles must fail on two tiny objects that use each other's symbols,
# naming both files and the symbols, and on a listed circle that is gone, and
# pass on a chain and on a listed circle; check-names must fail on a name
# without its file's prefix and pass on the names the rule allows.
#
#   tests/check-tests.sh
#
# The clean tree is a small synthetic one made here, a few files per folder
# laid out as the rooms are (include/, worker/base, worker/storage, jobs/,
# worker/, worker/cmd, tests/...), with this tree's Makefile, .clang-format
# files and check scripts: the test does not depend on the real tree passing
# the checks yet. Each case copies it, breaks one rule, and runs the check the
# way make does. Then the same violations are added to a copy of the real
# tree: they must be reported there too (and, once the real tree passes, be
# the only thing reported). Exit 0 when every case passes.

# ok and fail always return 0, so `A && ok || fail` is an if-then-else here.
# shellcheck disable=SC2001,SC2015,SC2094
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
export CLANG_FORMAT="${CLANG_FORMAT:-clang-format}"

passed=0
failed=0
ok() {
	passed=$((passed + 1))
	[[ -n "${VERBOSE:-}" ]] && echo "ok - $1"
	return 0
}
fail() {
	failed=$((failed + 1))
	echo "FAIL - $1" >&2
	[[ -n "${2:-}" ]] && sed 's/^/    | /' <<<"$2" >&2
	return 0
}

# The parts below (check-deps, check-format, the real tree, check-hardening,
# the docs' checks, check-circles) run side by side: each is a `{ ... } &`
# group that ends with `section_end NAME`, its output kept in $TMP/NAME.out
# and its counts in $TMP/NAME.count. At the end the outputs are printed in
# this order and the counts added. Each part works in directories of its own
# (most of the time of this script is spent starting processes: make, the
# checks, the compilers).
SECTIONS=()
section_end() {
	echo "$passed $failed" >"$TMP/$1.count"
}

# ---- the synthetic clean tree ---------------------------------------------

CLEAN="$TMP/clean"

# src FILE [HEADER...]: a small source file in ${DEST:-$CLEAN} including the
# headers, laid out as .clang-format wants (a header gets a guard and a
# declaration, a .c file a function).
src() {
	local f="${DEST:-$CLEAN}/$1" h name
	shift
	mkdir -p "$(dirname "$f")"
	name="$(basename "$f" | tr -c 'a-zA-Z0-9\n' _)"
	{
		echo "/* SPDX-License-Identifier: MIT */"
		echo "/* $(basename "$f"): synthetic, for tests/check-tests.sh */"
		if [[ "$f" == *.h ]]; then
			echo "#ifndef ${name^^}"
			echo "#define ${name^^}"
		fi
		echo
		for h in "$@"; do
			echo "#include \"$h\""
		done
		[[ $# -eq 0 ]] || echo
		if [[ "$f" == *.h ]]; then
			echo "int $name(void);"
			echo
			echo "#endif"
		else
			echo "int $name(void)"
			echo "{"
			printf '\treturn 0;\n'
			echo "}"
		fi
	} >"$f"
}

mkdir -p "$CLEAN/tests"
cp "$ROOT/Makefile" "$ROOT/.clang-format" "$CLEAN/"
cp "$ROOT/tests/check-deps.sh" "$ROOT/tests/check-format.sh" "$CLEAN/tests/"
[[ -f "$ROOT/tests/.clang-format" ]] && cp "$ROOT/tests/.clang-format" "$CLEAN/tests/"

src include/ecw_err.h
src include/ecw_buf.h ecw_err.h
src include/ecw_log.h ecw_err.h
src include/ecw_config.h ecw_err.h
src include/ecw_node.h ecw_err.h
src include/ecw_storage.h ecw_buf.h ecw_err.h
src include/ecw_job.h ecw_node.h ecw_storage.h
src worker/base/log.c ecw_buf.h ecw_log.h
src worker/storage/storage_private.h ecw_storage.h
src worker/storage/table.c storage_private.h ecw_buf.h
src jobs/jobs_private.h ecw_job.h
src jobs/move.c jobs_private.h ecw_node.h
src jobs/job_type.c ecw_job.h
src worker/message.h ecw_err.h
src worker/message.c message.h
src worker/runtime/runtime.h ecw_config.h
src worker/runtime/runtime.c runtime.h message.h ecw_job.h ecw_log.h
src worker/migrate/migrate_private.h ecw_config.h
src worker/migrate/migrate.h ecw_config.h
src worker/migrate/migrate.c migrate_private.h migrate.h
src worker/migrate/migrate_apply.c migrate_private.h ecw_storage.h
src worker/main.c cmd.h
src worker/cmd/cmd.h
src worker/cmd/backfill.h ecw_config.h
src worker/cmd/run.c cmd.h runtime.h ecw_log.h
src worker/cmd/backfill.c backfill.h cmd.h ecw_job.h
src tests/support/test_jobs.c ecw_job.h
src tests/unit/test_buf.c ecw_buf.h
src tests/integration/test_run.c ecw_storage.h
src tests/fuzz/fuzz_x.c ecw_buf.h
src tests/tools/tool.c

# fresh: a new copy of the clean tree in $T, for one case (one directory
# per part: they run side by side).
fresh() {
	T="$TMP/case.$BASHPID"
	rm -rf "$T"
	cp -a "$CLEAN" "$T"
}
# add_include FILE HEADER: FILE gets #include "HEADER" as its first line
# (so the violation is at FILE:1).
add_include() {
	sed -i "1i #include \"$2\"" "$T/$1"
}

# ---- check-deps -------------------------------------------------------------

# A line of check-deps that reports one violation.
VIOLATION=' may not be included here: | is also defined in |: is in no room of |: a room keeps its public header '

# The rules' sentences (check-deps and the real tree's cases).
STORAGE_RULE="worker/storage includes only include/ and worker/storage, never ecw_config.h"
JOBS_RULE="jobs/ includes only include/ and jobs/, never ecw_config.h"
DAEMON_RULE="worker/runtime (the daemon) includes only include/, worker/runtime, what worker/ shares"
SHARED_RULE="what the commands and the daemon share (worker/*.c, worker/*.h: message, connect, poison, pause) includes only include/ and worker/*.h"
BASE_RULE="worker/base includes only the base headers of include/"
BASEH_RULE="a base header includes only base headers"
INCLUDE_RULE="include/ holds the seams between parts: its headers include only include/ headers"
CMD_RULE="worker/cmd includes only include/, worker/cmd, what worker/ shares and the public headers of"
MAIN_RULE="main.c includes only include/ and, of worker/cmd, cmd.h"
SUPPORT_RULE="tests/support includes only include/ and tests/support"
UNIQUE_RULE="a header name must resolve to exactly one file in the tree"
GENERATED_RULE="a header the Makefile generates; only worker/cmd/version.c may include it"
PRIVATE_RULE="worker/migrate/migrate_private.h is private to worker/migrate/migrate.c and worker/migrate/migrate_apply.c"

SECTIONS+=(deps)
{

# deps_case NAME EXPECTED-COUNT EXPECTED-LINE...: make check-deps in $T must
# fail with exactly EXPECTED-COUNT violation lines, among them each expected
# line (a fixed string: the start of the line, rule included).
deps_case() {
	local name="$1" count="$2" out rc=0 want n
	shift 2
	out="$(make -s -C "$T" check-deps 2>&1)" || rc=$?
	if [[ $rc -eq 0 ]]; then
		fail "check-deps: $name: passed" "$out"
		return
	fi
	n="$(grep -c -E "$VIOLATION" <<<"$out" || true)"
	for want in "$@"; do
		if ! grep -q -F -- "$want" <<<"$out"; then
			fail "check-deps: $name: no line \"$want\"" "$out"
			return
		fi
	done
	if [[ "$n" -ne "$count" ]]; then
		fail "check-deps: $name: $n violation lines, expected $count" "$out"
		return
	fi
	if ! grep -q -E "^check-deps: $count violation" <<<"$out"; then
		fail "check-deps: $name: no summary line" "$out"
		return
	fi
	ok "check-deps: $name"
}

fresh
if out="$(make -s -C "$T" check-deps 2>&1)" && grep -q '^check-deps: OK' <<<"$out"; then
	ok "check-deps: the clean tree passes"
else
	fail "check-deps: the clean tree does not pass" "$out"
fi
out="$("$T/tests/check-deps.sh" "$T" 2>&1)" && ok "check-deps: ROOT given" || fail "check-deps: ROOT given" "$out"

# include_case NAME FILE HEADER RULE: FILE of the clean tree including HEADER
# is one violation, reported at FILE:1 with RULE.
include_case() {
	fresh
	add_include "$2" "$3"
	deps_case "$1" 1 "$2:1: \"$3\" may not be included here: $4"
}

# One case per rule, and more: name | file | the header it includes | rule.
while IFS='|' read -r name file header rule; do
	[[ -n "$name" ]] || continue
	read -r name <<<"$name" # read trims the padding
	read -r file header <<<"$file $header"
	include_case "$name" "$file" "$header" "${rule# }"
done <<EOF
storage includes ecw_config.h                   | worker/storage/table.c           | ecw_config.h        | $STORAGE_RULE
storage includes ecw_job.h                      | worker/storage/storage_private.h | ecw_job.h           | $STORAGE_RULE
storage includes a daemon header                | worker/storage/table.c           | runtime.h           | $STORAGE_RULE
jobs include a daemon header                    | jobs/move.c                      | runtime.h           | $JOBS_RULE
jobs include ecw_config.h                       | jobs/move.c                      | ecw_config.h        | $JOBS_RULE
jobs include storage's private header           | jobs/move.c                      | storage_private.h   | $JOBS_RULE
jobs include a daemon header by a relative path | jobs/move.c                      | ../worker/runtime/runtime.h | $JOBS_RULE
the daemon includes cmd.h                       | worker/runtime/runtime.c         | cmd.h               | $DAEMON_RULE
the daemon includes storage's private header    | worker/runtime/runtime.h         | storage_private.h   | $DAEMON_RULE
the daemon includes jobs' private header        | worker/runtime/runtime.c         | jobs_private.h      | $DAEMON_RULE
the daemon includes migrate.h                   | worker/runtime/runtime.c         | migrate.h           | $DAEMON_RULE
what worker/ shares includes the runtime        | worker/message.c                 | runtime.h           | $SHARED_RULE
migrate_private.h outside migrate*.c            | worker/runtime/runtime.c         | migrate_private.h   | $PRIVATE_RULE
main.c includes a command's header              | worker/main.c                    | backfill.h          | $MAIN_RULE
main.c includes the runtime                     | worker/main.c                    | runtime.h           | $MAIN_RULE
a command includes migrate_private.h            | worker/cmd/run.c                 | migrate_private.h   | $PRIVATE_RULE
a command includes jobs' private header         | worker/cmd/run.c                 | jobs_private.h      | $CMD_RULE
base includes ecw_storage.h                     | worker/base/log.c                | ecw_storage.h       | $BASE_RULE
base includes ecw_config.h                      | worker/base/log.c                | ecw_config.h        | $BASE_RULE
a base header includes a daemon header          | include/ecw_buf.h                | runtime.h           | $BASEH_RULE
a base header includes ecw_config.h             | include/ecw_log.h                | ecw_config.h        | $BASEH_RULE
a seam includes a daemon header                 | include/ecw_storage.h            | runtime.h           | $INCLUDE_RULE
test support includes jobs' private header      | tests/support/test_jobs.c        | jobs_private.h      | $SUPPORT_RULE
an include that names no file                   | worker/runtime/runtime.c         | nowhere.h           | $UNIQUE_RULE; this one names none
the generated build header outside version.c    | worker/cmd/run.c                 | ecw_build_info.h    | $GENERATED_RULE
EOF

# Through another header: reported once, where the forbidden one is pulled in.
fresh
add_include include/ecw_job.h ecw_config.h
deps_case "a header jobs/ see pulls in ecw_config.h" 1 \
	"include/ecw_job.h:1: \"ecw_config.h\" may not be included here: $JOBS_RULE"
fresh
DEST="$T" src jobs/runtime.h
deps_case "a header name defined twice" 4 \
	"jobs/runtime.h: \"runtime.h\" is also defined in worker/runtime/runtime.h: $UNIQUE_RULE" \
	"worker/runtime/runtime.h: \"runtime.h\" is also defined in jobs/runtime.h: $UNIQUE_RULE" \
	"worker/runtime/runtime.c:4: \"runtime.h\" may not be included here: $UNIQUE_RULE; this one names jobs/runtime.h worker/runtime/runtime.h"
fresh
DEST="$T" src worker/extra/thing.c ecw_buf.h
deps_case "a folder with no rules" 1 "worker/extra/thing.c: is in no room of tests/check-deps.sh"
fresh
DEST="$T" src worker/migrate/migrate_steps.h ecw_config.h
deps_case "a room's third header" 1 \
	"worker/migrate/migrate_steps.h: a room keeps its public header and its private one only (migrate.h migrate_private.h)"

section_end deps
} >"$TMP/deps.out" 2>&1 &

# ---- check-format -----------------------------------------------------------
SECTIONS+=(format)
{

# One file per folder make check-format covers.
FORMAT_FILES=(include/ecw_buf.h worker/base/log.c worker/storage/table.c jobs/move.c worker/runtime/runtime.c
	worker/cmd/run.c tests/support/test_jobs.c tests/unit/test_buf.c tests/integration/test_run.c
	tests/fuzz/fuzz_x.c tests/tools/tool.c)

fresh
if out="$(make -s -C "$T" check-format 2>&1)" && grep -q -E '^==== format: [0-9]+ file\(s\) .*clang-format [0-9]' <<<"$out"; then
	ok "check-format: the clean tree passes, naming the clang-format version"
else
	fail "check-format: the clean tree does not pass" "$out"
fi

fresh
printf 'int  badly( void ){return 1;}\n' >>"$T/worker/runtime/runtime.c"
rc=0
out="$(make -s -C "$T" check-format 2>&1)" || rc=$?
if [[ $rc -ne 0 ]] && grep -q -E '^worker/runtime/runtime.c: [0-9]+ place\(s\) to format' <<<"$out" &&
	grep -q -E '^check-format: [0-9]+ place\(s\) in 1 file\(s\) differ' <<<"$out"; then
	ok "check-format: a badly formatted line fails, naming its file"
else
	fail "check-format: a badly formatted line in worker/runtime/runtime.c (exit $rc)" "$out"
fi
out="$(make -s -C "$T" format check-format 2>&1)" &&
	ok "check-format: make format fixes it" || fail "check-format: make format did not fix it" "$out"

# The tests' own .clang-format: the same long call is continued with tabs in
# worker/, with spaces in tests/, and make format and check-format agree.
fresh
for f in worker/runtime/runtime.c tests/unit/test_buf.c; do
	printf 'int long_call(void)\n{\n\treturn some_function_with_a_long_name(argument_number_one, %s);\n}\n' \
		"argument_number_two, argument_number_three, argument_number_four" >>"$T/$f"
done
if out="$(make -s -C "$T" format check-format 2>&1)" &&
	grep -q -P '^\t\t\t\t\t +argument_number_four\);' "$T/worker/runtime/runtime.c" &&
	grep -q -P '^\t {20,}argument_number_four\);' "$T/tests/unit/test_buf.c"; then
	ok "check-format: tests/.clang-format applies to the tests only"
else
	fail "check-format: tests/.clang-format" "$out$(grep -h -B1 'argument_number_four' "$T/worker/runtime/runtime.c" \
		"$T/tests/unit/test_buf.c" | cat -A)"
fi

fresh
for f in "${FORMAT_FILES[@]}"; do
	printf 'int  badly_%s( void ){return 1;}\n' "$(basename "$f" | tr -c 'a-z\n' _)" >>"$T/$f"
done
rc=0
out="$(make -s -C "$T" check-format 2>&1)" || rc=$?
missing=()
for f in "${FORMAT_FILES[@]}"; do
	grep -q -E "^$f: [0-9]+ place\\(s\\) to format" <<<"$out" || missing+=("$f")
done
if [[ $rc -ne 0 && ${#missing[@]} -eq 0 ]]; then
	ok "check-format: covers every folder"
else
	fail "check-format: not reported: ${missing[*]} (exit $rc)" "$out"
fi

fresh
sed -i 1d "$T/jobs/move.c"
rc=0
out="$(make -s -C "$T" check-format 2>&1)" || rc=$?
if [[ $rc -ne 0 ]] && grep -q -F 'jobs/move.c: no license line' <<<"$out"; then
	ok "check-format: a file without its SPDX license line fails, naming it"
else
	fail "check-format: jobs/move.c without its SPDX line (exit $rc)" "$out"
fi

fresh
rm "$T/.clang-format"
rc=0
out="$(make -s -C "$T" check-format 2>&1)" || rc=$?
[[ $rc -ne 0 ]] && ok "check-format: fails without a .clang-format" ||
	fail "check-format: passed without a .clang-format" "$out"

section_end format
} >"$TMP/format.out" 2>&1 &

# ---- the real tree ------------------------------------------------------------
# The same violations in a copy of the real tree: reported there too, one more
# line each; and the only line once the real tree passes.
SECTIONS+=(real)
{

REAL="$TMP/real"
mkdir -p "$REAL"
tar -C "$ROOT" --exclude=tests/node_modules --exclude=tests/fuzz/corpus -cf - Makefile .clang-format include worker \
	jobs tests | tar -C "$REAL" -xf -
base_out="$("$REAL/tests/check-deps.sh" "$REAL" 2>&1)" && base_rc=0 || base_rc=$?
base_n="$(grep -c -E "$VIOLATION" <<<"$base_out" || true)"
[[ $base_rc -eq 0 ]] || echo "check-tests: note: the real tree does not pass check-deps yet ($base_n violations)"

# real_case FILE HEADER RULE: FILE of the real tree including HEADER is one
# more violation, reported with RULE.
real_case() {
	local f="$1" h="$2" rule="$3" out rc=0 n
	[[ -f "$REAL/$f" ]] || { fail "check-deps on the real tree: no $f"; return; }
	cp "$REAL/$f" "$TMP/saved"
	sed -i "1i #include \"$h\"" "$REAL/$f"
	out="$("$REAL/tests/check-deps.sh" "$REAL" 2>&1)" || rc=$?
	cp "$TMP/saved" "$REAL/$f"
	n="$(grep -c -E "$VIOLATION" <<<"$out" || true)"
	if [[ $rc -eq 1 && $n -eq $((base_n + 1)) ]] && grep -q -F -- "$f:1: \"$h\" may not be included here: $rule" <<<"$out"; then
		ok "check-deps on the real tree: $f includes $h"
	else
		fail "check-deps on the real tree: $f including $h (exit $rc, $n violations, $base_n before)" "$out"
	fi
}
real_case worker/storage/table.c ecw_config.h "$STORAGE_RULE"
real_case jobs/move.c runtime.h "$JOBS_RULE"
real_case worker/runtime/runtime.c cmd.h "$DAEMON_RULE"
real_case worker/base/log.c ecw_storage.h "$BASE_RULE"
real_case include/ecw_buf.h runtime.h "$BASEH_RULE"
real_case include/ecw_storage.h runtime.h "$INCLUDE_RULE"

if out="$(cd "$REAL" && make -s check-format 2>&1)"; then
	printf 'int  badly( void ){return 1;}\n' >>"$REAL/worker/runtime/runtime.c"
	rc=0
	out="$(cd "$REAL" && make -s check-format 2>&1)" || rc=$?
	[[ $rc -ne 0 ]] && grep -q -E '^worker/runtime/runtime.c: [0-9]+ place\(s\) to format' <<<"$out" &&
		ok "check-format on the real tree: a badly formatted line fails" ||
		fail "check-format on the real tree: a badly formatted line in worker/runtime/runtime.c (exit $rc)" "$out"
else
	echo "check-tests: note: the real tree is not formatted yet ($(grep '^check-format:' <<<"$out" | tail -n 1))"
fi

section_end real
} >"$TMP/real.out" 2>&1 &

# ---- check-hardening ------------------------------------------------------------
# A small program built with the Makefile's hardening flags passes; built with
# them and then one undone (the last flag wins), it fails naming the property.
SECTIONS+=(hardening)
{

if command -v readelf >/dev/null && command -v "${CC:-cc}" >/dev/null; then
	# The release build's flags, also when this runs under make asan (whose
	# SANITIZE=1 the sub-make would otherwise inherit and build without them).
	mapfile -t harden < <(make -s --no-print-directory -C "$ROOT" hardening-flags SANITIZE=)
	cat >"$TMP/hardened.c" <<'EOF'
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	char b[64];
	ssize_t n = read(0, b, (size_t)argc * 16);
	fwrite(b, 1, n > 0 ? (size_t)n : 0, stdout);
	return argv[0][0];
}
EOF
	# hardened_build OUT [FLAG...]: the program with the flags, then FLAG...
	# shellcheck disable=SC2086 # the flags are words
	hardened_build() {
		local out="$1"
		shift
		"${CC:-cc}" -O2 ${harden[0]} "$@" -o "$out" "$TMP/hardened.c" ${harden[1]} "$@"
	}
	if out="$(hardened_build "$TMP/hardened" 2>&1 && "$ROOT/tests/check-hardening.sh" "$TMP/hardened" 2>&1)"; then
		ok "check-hardening: passes on a program built with the Makefile's flags"
	else
		fail "check-hardening: fails on a program built with the Makefile's flags (${harden[*]})" "$out"
	fi
	undo=("pie:-fno-PIE -no-pie" "bind-now:-Wl,-z,lazy" "relro:-Wl,-z,norelro" "nx-stack:-Wl,-z,execstack"
		"canary:-fno-stack-protector" "fortify:-U_FORTIFY_SOURCE")
	[[ "$("${CC:-cc}" -dumpmachine)" == x86_64-* ]] && undo+=("cet:-fcf-protection=none")
	for u in "${undo[@]}"; do
		name="${u%%:*}"
		rc=0
		# shellcheck disable=SC2086 # the flags are words
		out="$(hardened_build "$TMP/weak" ${u#*:} 2>&1 && "$ROOT/tests/check-hardening.sh" "$TMP/weak" 2>&1)" || rc=$?
		[[ $rc -eq 1 ]] && grep -q -E "^  $name +MISSING: " <<<"$out" && grep -q -E "lacks: $name\$" <<<"$out" &&
			ok "check-hardening: fails on a program built with ${u#*:}, naming $name" ||
			fail "check-hardening: a program built with ${u#*:} (exit $rc), want $name named alone" "$out"
	done
else
	echo "check-tests: note: no readelf or no compiler, check-hardening not tested"
fi

section_end hardening
} >"$TMP/hardening.out" 2>&1 &

# ---- check-doc-examples and check-man ----------------------------------------
# The checks of the docs (make check-docs) run the program, which make test
# builds after this script: here they run a stand-in, a small script that
# answers `help`, `CMD --help` and `check-config -c FILE` (a key named bogus
# is its one error) as ecworker does, over a small page and man page of their
# own. Once build/ecworker exists the same mistakes, planted in copies of the
# real pages, must fail with the real program too.
SECTIONS+=(docs)
{

FAKE="$TMP/fake/ecworker"
mkdir -p "$TMP/fake"
cat >"$FAKE" <<'EOF'
#!/usr/bin/env bash
# A stand-in for ecworker, for tests/check-tests.sh.
case "$1 ${2:-}" in
"help "*)
	printf 'usage: ecworker COMMAND [OPTIONS]\n\ncommands:\n  run            run it\n'
	printf '  poison         list or purge poison messages\n  version        the version\n'
	printf '  help           this text\n\nEvery command takes --help.\n' ;;
"--version "* | "version ") echo "ecworker 1.0" ;;
"version --help") echo "usage: ecworker version" ;;
"run --help")
	printf 'usage: ecworker run [-c FILE] [--once]\n\n  -c, --config FILE   configuration\n'
	printf '      --once          one receive, then exit\n  -h, --help          this text\n' ;;
"poison --help") printf 'usage: ecworker poison list|purge [OPTIONS]\n\n  list     show them\n  purge    delete them\n' ;;
"poison list")
	printf 'usage: ecworker poison list [-c FILE] [--json]\n\n      --json          one object a line, or with\n'
	printf '                      --count-only: not an option of its own\n'
	printf '  -c, --config FILE   configuration\n  -h, --help          this text\n' ;;
"poison purge")
	printf 'usage: ecworker poison purge [-c FILE] --yes\n\n      --yes           really delete\n'
	printf '  -c, --config FILE   configuration\n  -h, --help          this text\n' ;;
"check-config -c")
	l="$(grep -n -m1 'bogus' "$3" | cut -d: -f1)"
	if [[ -n "$l" ]]; then
		echo "$3:$l:3: unknown key 'bogus'" >&2
		exit 2
	fi
	echo "$3: OK" ;;
*) echo "ecworker: unknown command '$1'" >&2; exit 2 ;;
esac
EOF
chmod +x "$FAKE"

# man_case NAME SED-SCRIPT EXPECTED-LINE: the stand-in's man page, changed by
# SED-SCRIPT, fails check-man with EXPECTED-LINE (a fixed string).
MAN="$TMP/fake/fake.1"
cat >"$MAN" <<'EOF'
.TH FAKE 1
.SH COMMANDS
.TP
\fBrun\fR [\fB\-c\fR \fIfile\fR] [\fB\-\-once\fR]
Run.
.TP
\fBpoison list\fR|\fBpurge\fR [\fB\-c\fR \fIfile\fR] [\fB\-\-json\fR] [\fB\-\-yes\fR]
Poison messages.
.TP
.BR version ", " \-\-version
The version.
.TP
.B help
The commands.
.SH OPTIONS
.TP
.BR \-c ", " \-\-config " \fIfile\fP"
.TP
.BR \-h ", " \-\-help
EOF
man_case() {
	local out rc=0
	sed "$2" "$MAN" >"$TMP/fake/case.1"
	out="$("$ROOT/tests/check-man.sh" "$FAKE" "$TMP/fake/case.1" 2>&1)" || rc=$?
	[[ $rc -eq 1 ]] && grep -q -F -- "$3" <<<"$out" && ok "check-man: $1" || fail "check-man: $1 (exit $rc)" "$out"
}
out="$("$ROOT/tests/check-man.sh" "$FAKE" "$MAN" 2>&1)" &&
	ok "check-man: a man page that agrees with --help passes" || fail "check-man: the agreeing man page fails" "$out"
man_case "an option of --help missing from its entry" 's/ \[\\fB\\-\\-once\\fR\]//' \
	"COMMANDS: run: --once is in 'ecworker run --help' but not in its entry"
man_case "an option of a subcommand's --help missing" 's/ \[\\fB\\-\\-yes\\fR\]//' \
	"COMMANDS: poison: --yes is in 'ecworker poison --help' but not in its entry"
man_case "an option --help does not list" 's/^Poison messages\.$/Poison messages, \\fB\\-\\-all\\fR./' \
	"COMMANDS: poison: its entry names --all, which 'ecworker poison --help' does not list"
man_case "a command without an entry" '/^\.B help$/,/^The commands\.$/d' "COMMANDS: no entry for 'help'"
man_case "an entry for a command the program lacks" 's/^\\fBrun\\fR/\\fBrunn\\fR/' \
	"COMMANDS: an entry for 'runn', which 'ecworker help' does not list"
man_case "an option of every command missing from OPTIONS" '/\\-\\-config/d' \
	"OPTIONS: --config, which every command takes, is not named"

# doc_case NAME EXPECTED-LINE: $T/page.md fails check-doc-examples with
# EXPECTED-LINE (a fixed string).
doc_case() {
	local out rc=0
	out="$(cd "$T" && "$ROOT/tests/check-doc-examples.sh" "$FAKE" "$T/page.md" 2>&1)" || rc=$?
	[[ $rc -eq 1 ]] && grep -q -F -- "$2" <<<"$out" && ok "check-doc-examples: $1" ||
		fail "check-doc-examples: $1 (exit $rc)" "$out"
}
# The page: a whole example (its fence at line 3), a fragment with markers
# before and after it (line 15), one in a list item (line 23), and a marker's
# text inside an sh block, which is no marker.
T="$TMP/docs"
mkdir -p "$T"
cat >"$T/clean.md" <<'EOF'
# A page

```yaml
jobs:
  a: {type: move, from: Aaa, to: Bbb}
```

<!-- check-config: before
jobs:
  b:
-->
<!-- check-config: after
  c: {type: move, from: Ccc, to: Ddd}
-->
```yaml
    type: move
    from: Bbb
    to: Ccc
```

- In a list:

  ```yaml
  jobs: {}
  ```

```sh
<!-- check-config: before
```
EOF
cp "$T/clean.md" "$T/page.md"
out="$("$ROOT/tests/check-doc-examples.sh" "$FAKE" "$T/page.md" 2>&1)" &&
	grep -q -F 'the 3 YAML examples of 1 Markdown pages pass' <<<"$out" &&
	ok "check-doc-examples: a page of good examples passes, counting 3" ||
	fail "check-doc-examples: the good page" "$out"
sed '5s/$/\n  bogus: 1/' "$T/clean.md" >"$T/page.md"
doc_case "a bad key in a whole example, at its line" "page.md:6:3: unknown key 'bogus'"
sed '18s/$/\n    bogus: 1/' "$T/clean.md" >"$T/page.md"
doc_case "a bad key in a fragment, at its line" "page.md:19:3: unknown key 'bogus'"
sed '24s/$/\n  bogus: 1/' "$T/clean.md" >"$T/page.md"
doc_case "a bad key in a list item's example, at its line" "page.md:25:3: unknown key 'bogus'"
sed '10s/$/\n  bogus: 1/' "$T/clean.md" >"$T/page.md"
doc_case "a bad key in a marker's text" "page.md:16: (its check-config: before text, line 3):3: unknown key 'bogus'"
sed '14s/$/\nA paragraph between the marker and its block./' "$T/clean.md" >"$T/page.md"
doc_case "a marker not right before its block" "page.md:15: a check-config marker must come right before a"
sed '8s/before/skip -->/; 9,11d' "$T/clean.md" >"$T/page.md"
doc_case "an unknown marker" "page.md:8: unknown marker"
head -n 26 "$T/clean.md" | sed '25,26d' >"$T/page.md"
doc_case "a block that never ends" "the \`\`\`yaml block that starts at line 23 never ends"

if [[ -x "$ROOT/build/ecworker" ]]; then
	mkdir -p "$TMP/real-docs/config"
	n="$(grep -n -m1 '^  batch_size: ' "$ROOT/config/README.md" | cut -d: -f1)"
	sed "${n}s/batch_size/batch_sise/" "$ROOT/config/README.md" >"$TMP/real-docs/config/README.md"
	rc=0
	out="$("$ROOT/tests/check-doc-examples.sh" "$ROOT/build/ecworker" "$TMP/real-docs/config/README.md" 2>&1)" || rc=$?
	[[ $rc -eq 1 ]] && grep -q -E "config/README.md:$n:[0-9]+: unknown key 'batch_sise'" <<<"$out" &&
		ok "check-doc-examples on the real pages: a misspelt key in config/README.md" ||
		fail "check-doc-examples on the real pages: batch_sise at config/README.md:$n (exit $rc)" "$out"
	sed 's/\\-\\-online//g' "$ROOT/deploy/debian/ecworker.1" >"$TMP/real-docs/ecworker.1"
	rc=0
	out="$("$ROOT/tests/check-man.sh" "$ROOT/build/ecworker" "$TMP/real-docs/ecworker.1" 2>&1)" || rc=$?
	[[ $rc -eq 1 ]] && grep -q -F "COMMANDS: check-config: --online is in 'ecworker check-config --help' but not in its entry" <<<"$out" &&
		ok "check-man on the real man page: --online taken out" ||
		fail "check-man on the real man page: --online taken out (exit $rc)" "$out"
else
	echo "check-tests: note: no build/ecworker yet, check-doc-examples and check-man tested on a stand-in only"
fi

section_end docs
} >"$TMP/docs.out" 2>&1 &

# ---- check-circles -----------------------------------------------------------
# Tiny objects compiled here and given to the script directly (the Makefile
# gives it $(OBJS) the same way, with --objdir $(BUILD)/obj): two files that
# use each other's symbols fail, named with the symbols; a chain passes; a
# listed circle passes; a listed circle that is gone fails.
SECTIONS+=(circles)
{

if command -v node >/dev/null && command -v nm >/dev/null && command -v "${CC:-cc}" >/dev/null; then
	CIRC="$TMP/circles"
	# cobj NAME CODE: $CIRC/obj/NAME.o compiled from CODE (NAME.c; the .o in
	# $CIRC/obj stands for it).
	cobj() {
		mkdir -p "$CIRC/src/$(dirname "$1")" "$CIRC/obj/$(dirname "$1")"
		printf '%s\n' "$2" >"$CIRC/src/$1.c"
		"${CC:-cc}" -O2 -c -o "$CIRC/obj/$1.o" "$CIRC/src/$1.c"
	}
	# circles KNOWN-LINES NAME...: runs the check on the objects NAME..., with
	# a known list of KNOWN-LINES; sets out and rc.
	circles() {
		local k="$1" objs=() n
		shift
		printf '# known circles\n%s' "$k" >"$CIRC/known.txt"
		for n in "$@"; do objs+=("$CIRC/obj/$n.o"); done
		rc=0
		out="$(node "$ROOT/tests/check-circles.js" --known "$CIRC/known.txt" --objdir "$CIRC/obj" "${objs[@]}" 2>&1)" || rc=$?
	}
	# has LINE...: out has each LINE (a whole line, a fixed string).
	has() {
		local l
		for l in "$@"; do grep -q -x -F -- "$l" <<<"$out" || return 1; done
	}
	# The pair: a calls b, b calls a and reads a's table and counter.
	cobj worker/a 'int ecw_b_put(int);
const int ecw_a_table[2] = {1, 2};
int ecw_a_count;
int ecw_a_get(int x) { return ecw_b_put(x + 1); }'
	cobj worker/b 'extern const int ecw_a_table[2];
extern int ecw_a_count;
int ecw_a_get(int);
int ecw_b_put(int x) { return x > 9 ? x : ecw_a_get(x) + ecw_a_table[1] + ecw_a_count; }'
	# The chain: x -> y -> z, and libc (no object defines strlen: no arrow).
	cobj jobs/z 'int ecw_z(int x) { return x * 3; }'
	cobj jobs/y '#include <string.h>
int ecw_z(int);
int ecw_y(const char *s) { return ecw_z((int)strlen(s)); }'
	cobj jobs/x 'int ecw_y(const char *);
int ecw_x(void) { return ecw_y("x"); }'
	# A third file joining the pair's circle: a -> b -> a and b -> c -> a.
	cobj worker/c 'int ecw_a_get(int);
int ecw_c(int x) { return ecw_a_get(x); }'
	cobj worker/b2 'int ecw_a_get(int);
int ecw_c(int);
int ecw_b_put(int x) { return x > 9 ? ecw_c(x) : ecw_a_get(x); }'

	circles "" worker/a worker/b jobs/x jobs/y jobs/z
	[[ $rc -eq 1 ]] && has "check-circles: a new circle of 2 files: worker/a.c worker/b.c" \
		"circle: worker/a.c -> worker/b.c: ecw_b_put" \
		"circle: worker/b.c -> worker/a.c: ecw_a_count, ecw_a_get, ecw_a_table" &&
		grep -q '^check-circles: FAILED: 1 new circle(s), 0 known circle(s) gone (5 files, 4 arrows)' <<<"$out" &&
		! grep -q 'jobs/' <<<"$out" &&
		ok "check-circles: two files calling each other fail, named with the symbols (function, const, variable)" ||
		fail "check-circles: two files calling each other (exit $rc)" "$out"

	circles "" jobs/x jobs/y jobs/z
	[[ $rc -eq 0 ]] && has "check-circles: OK (3 files, 2 arrows; no circle)" &&
		ok "check-circles: a chain without a circle passes" || fail "check-circles: a chain (exit $rc)" "$out"

	circles $'worker/b.c  worker/a.c # the pair, in any order\n' worker/a worker/b jobs/x jobs/y jobs/z
	[[ $rc -eq 0 ]] && has "check-circles: OK (5 files, 4 arrows; 1 known circle(s) left: [a b])" &&
		ok "check-circles: a known circle passes, counted in the summary" ||
		fail "check-circles: a known circle (exit $rc)" "$out"

	circles $'worker/a.c worker/b.c\n' worker/a jobs/x jobs/y jobs/z
	[[ $rc -eq 1 ]] && grep -q -F "$CIRC/known.txt:2: the known circle \"worker/a.c worker/b.c\" no longer exists" <<<"$out" &&
		grep -q '^check-circles: FAILED: 0 new circle(s), 1 known circle(s) gone' <<<"$out" &&
		ok "check-circles: a listed circle that no longer exists fails, naming its line" ||
		fail "check-circles: a listed circle gone (exit $rc)" "$out"

	# The pair listed, and a file joins the circle: a new circle (b2 is b, with
	# an arrow to c).
	mv "$CIRC/obj/worker/b2.o" "$CIRC/obj/worker/b.o"
	circles $'worker/a.c worker/b.c\n' worker/a worker/b worker/c
	[[ $rc -eq 1 ]] && has "circle: worker/b.c -> worker/c.c: ecw_c" "circle: worker/c.c -> worker/a.c: ecw_a_get" &&
		grep -q -F 'check-circles: a new circle of 3 files: worker/a.c worker/b.c worker/c.c (it shares files with the known "worker/a.c worker/b.c"' <<<"$out" &&
		grep -q '^check-circles: FAILED: 1 new circle(s), 1 known circle(s) gone' <<<"$out" &&
		ok "check-circles: a file joining a known circle fails" ||
		fail "check-circles: a file joining a known circle (exit $rc)" "$out"

	# --update rewrites the list (its comment kept), and the check then passes.
	circles $'worker/a.c worker/b.c\n' worker/a worker/b worker/c
	node "$ROOT/tests/check-circles.js" --known "$CIRC/known.txt" --objdir "$CIRC/obj" --update \
		"$CIRC"/obj/worker/{a,b,c}.o >/dev/null
	known="$(cat "$CIRC/known.txt")"
	circles "$(sed 1d <<<"$known")"$'\n' worker/a worker/b worker/c
	[[ "$known" == $'# known circles\nworker/a.c worker/b.c worker/c.c' && $rc -eq 0 ]] &&
		ok "check-circles: --update writes today's circles" ||
		fail "check-circles: --update (exit $rc)" "$known"$'\n'"$out"

	# ---- check-names: the same tiny objects, and some named for the rule.
	# names NAME...: runs check-names on the objects NAME... from the
	# sources' folder (a file's module is looked up beside it); sets out, rc.
	names() {
		local objs=() n
		for n in "$@"; do objs+=("$CIRC/obj/$n.o"); done
		rc=0
		out="$(cd "$CIRC/src" && node "$ROOT/tests/check-names.js" --objdir "$CIRC/obj" "${objs[@]}" 2>&1)" || rc=$?
	}
	cobj worker/clock 'long long ecw_clock_now_ms(void) { return 1; }'
	cobj worker/clock_wall 'long long ecw_clock_wall_ms(void) { return 2; }'
	cobj worker/cmd/run 'int ecw_cmd_run(int argc) { return argc; }'
	cobj jobs/move 'const int ecw_job_move = 1;
int ecw_move_plan(void) { return 0; }'
	cobj jobs/move_audit 'const int ecw_job_move = 2;
int ecw_move_audit(void) { return 0; }'
	names worker/a worker/b worker/clock worker/clock_wall worker/cmd/run jobs/move jobs/move_audit jobs/z
	[[ $rc -eq 0 ]] && has "check-names: OK (8 files, 12 names, each with its file's prefix)" &&
		ok "check-names: names with their file's prefix, their module's, ecw_cmd_* and a job's descriptor pass" ||
		fail "check-names: a clean set (exit $rc)" "$out"

	cobj worker/clock 'long long ecw_uptime_ms(void) { return 1; }
static long long ecw_hidden(void) { return 2; }
long long ecw_clock_now(void) { return ecw_hidden(); }'
	cobj jobs/move 'const int ecw_job_fanout = 1;'
	cobj worker/clockwork 'int ecw_clock_tick(void) { return 0; }'
	names worker/clock jobs/move worker/clockwork
	[[ $rc -eq 1 ]] && has "check-names: worker/clock.c exports ecw_uptime_ms: its names start with ecw_clock_*" \
		"check-names: jobs/move.c exports ecw_job_fanout: its names start with ecw_move_*, ecw_job_move" \
		"check-names: worker/clockwork.c exports ecw_clock_tick: its names start with ecw_clockwork_*" &&
		grep -q '^check-names: FAILED: 3 name(s) without their file.s prefix (3 files, 4 names)' <<<"$out" &&
		! grep -q "ecw_hidden\|ecw_clock_now:" <<<"$out" &&
		ok "check-names: a name without its file's prefix fails, named with its file (a static one is not looked at)" ||
		fail "check-names: names without their prefix (exit $rc)" "$out"

	# A sanitizer build's objects: ASan defines __odr_asan.NAME beside each
	# global, a name the compiler makes (reserved to it), not the file's.
	if "${CC:-cc}" -fsanitize=address -O1 -c -o "$CIRC/obj/jobs/move.o" -x c - 2>/dev/null <<<'const int ecw_job_move[2] = {1, 2};'; then
		names jobs/move
		[[ $rc -eq 0 ]] && has "check-names: OK (1 files, 1 names, each with its file's prefix)" &&
			ok "check-names: the names an ASan build adds (__odr_asan.*) are not the file's" ||
			fail "check-names: an ASan object (exit $rc)" "$out"
	fi
else
	echo "check-tests: note: no node, nm or compiler, check-circles and check-names not tested"
fi
section_end circles
} >"$TMP/circles.out" 2>&1 &

# The parts' outputs in order, and their counts added; a part that stopped
# early (no counts) fails the run.
wait
for sec in "${SECTIONS[@]}"; do
	cat "$TMP/$sec.out"
	if [[ -f "$TMP/$sec.count" ]]; then
		read -r p f <"$TMP/$sec.count"
		passed=$((passed + p)) failed=$((failed + f))
	else
		failed=$((failed + 1))
		echo "FAIL - check-tests: the $sec part stopped before its end" >&2
	fi
done
if [[ $failed -gt 0 ]]; then
	echo "check-tests: $failed of $((passed + failed)) cases failed" >&2
	exit 1
fi
echo "==== check-tests: $passed cases passed (check-deps, check-format, check-hardening, check-circles, check-names, check-doc-examples and check-man fail on each violation, pass on a clean tree)"
