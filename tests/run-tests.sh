#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-tests.sh - runs ecworker's test binaries and reports one line per binary.
#
#   tests/run-tests.sh BUILD_DIR [--unit-only|--integration-only]
#   (the option may also come first, as the Makefile passes it)
#
# Unit binaries (BUILD_DIR/tests/unit/test_*) run without any service. For the
# integration binaries (BUILD_DIR/tests/integration/test_*) this script starts
# ONE in-memory Azurite (queue + table on free ports), exports
# ECW_TEST_CONNECTION_STRING, ECW_TEST_QUEUE_PORT and ECW_TEST_TABLE_PORT, and
# always stops it on exit. For the TLS and OAuth tests it also starts a
# queue + table Azurite over https (--oauth basic) with a self-signed
# certificate made with openssl (ECW_TEST_HTTPS_QUEUE_PORT,
# ECW_TEST_HTTPS_TABLE_PORT, ECW_TEST_CA_FILE; log BUILD_DIR/azurite-https.log,
# certificate in BUILD_DIR/tls/). Azurite's access log is kept in BUILD_DIR/azurite.log
# (set ECW_AZURITE_DEBUG=1 to add its debug log, which shows the string-to-sign
# it expected, in BUILD_DIR/azurite-debug.log). Each binary's output is kept in
# BUILD_DIR/test-logs/. ECW_TESTS="test_a test_b" runs only the binaries so
# named (while working on one module). ECW_TEST_WRAPPER="valgrind ..." runs
# each binary under that command (make valgrind), which must exit non-zero
# when it finds an error.
#
# Exits non-zero when a binary fails, crashes or times out, or when no test
# case ran at all.
set -euo pipefail

usage() {
	echo "usage: $0 BUILD_DIR [--unit-only|--integration-only]" >&2
	exit 2
}

BUILD_DIR=""
RUN_UNIT=1
RUN_INTEG=1
for arg in "$@"; do
	case "$arg" in
	--unit-only) RUN_INTEG=0 ;;
	--integration-only) RUN_UNIT=0 ;;
	-h | --help) usage ;;
	-*) echo "$0: unknown option $arg" >&2; usage ;;
	*)
		[[ -z "$BUILD_DIR" ]] || usage
		BUILD_DIR="$arg"
		;;
	esac
done
[[ -n "$BUILD_DIR" ]] || usage
if [[ $RUN_UNIT -eq 0 && $RUN_INTEG -eq 0 ]]; then
	echo "$0: --unit-only and --integration-only exclude each other" >&2
	exit 2
fi
[[ -d "$BUILD_DIR" ]] || { echo "$0: no build directory $BUILD_DIR" >&2; exit 2; }
BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AZURITE="$ROOT/tests/node_modules/.bin/azurite"
AZURITE_LOG="$BUILD_DIR/azurite.log"
LOG_DIR="$BUILD_DIR/test-logs"
TEST_TIMEOUT="${ECW_TEST_TIMEOUT:-600}"   # seconds per binary
mkdir -p "$LOG_DIR"

# Sanitizer builds stop at the first report; the caller may add options (later
# options win). cmocka writes its plain-text report to stdout.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export CMOCKA_MESSAGE_OUTPUT=stdout

# ---- Azurite -------------------------------------------------------------

AZURITE_DIR="$BUILD_DIR"
AZURITE_TLS_LOG="$BUILD_DIR/azurite-https.log"
# shellcheck source=tests/azurite.sh
source "$ROOT/tests/azurite.sh"
trap azurite_stop EXIT
trap 'azurite_stop; exit 130' INT
trap 'azurite_stop; exit 143' TERM

# ---- running binaries ----------------------------------------------------

TOTAL_RUN=0
TOTAL_PASSED=0
BINS_RUN=0
BINS_FAILED=0
FAILED_NAMES=()

now() { printf '%s' "${EPOCHREALTIME/,/.}"; }

# Sums the numbers cmocka prints in lines like "[  PASSED  ] 7 test(s)." (one
# per group; a binary may run several groups).
sum_cmocka() {
	local pattern="$1" file="$2"
	sed -n "s/^\[ *$pattern *\] \([0-9][0-9]*\) test(s).*/\1/p" "$file" | awk '{s += $1} END {print s + 0}'
}

run_binary() {
	local bin="$1" kind="$2"
	local name log start end secs rc ran passed failed status
	name="$(basename "$bin")"
	log="$LOG_DIR/$kind-$name.log"
	start="$(now)"
	rc=0
	local -a wrapper=()
	[[ -n "${ECW_TEST_WRAPPER:-}" ]] && read -r -a wrapper <<<"$ECW_TEST_WRAPPER"
	timeout --kill-after=10 "$TEST_TIMEOUT" "${wrapper[@]}" "$bin" >"$log" 2>&1 </dev/null || rc=$?
	end="$(now)"
	secs="$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')"

	# cmocka prints "[==========] Running N test(s)." when a group starts and
	# "[==========] N test(s) run." when it ends. A binary that dies midway
	# never prints the second: then the cases it announced count as run (and,
	# not having passed, as failed).
	local announced completed started
	announced="$(sed -n 's/^\[=*\] Running \([0-9][0-9]*\) test(s)\..*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')"
	completed="$(sed -n 's/^\[=*\] \([0-9][0-9]*\) test(s) run\..*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')"
	started="$(grep -c '^\[ RUN      \]' "$log" || true)"
	ran=$completed
	((announced > ran)) && ran=$announced
	((started > ran)) && ran=$started
	passed="$(sum_cmocka PASSED "$log")"
	failed=$((ran - passed))
	((failed < 0)) && failed=0

	BINS_RUN=$((BINS_RUN + 1))
	TOTAL_RUN=$((TOTAL_RUN + ran))
	TOTAL_PASSED=$((TOTAL_PASSED + passed))

	if [[ $rc -eq 0 && $failed -eq 0 && $ran -gt 0 ]]; then
		status="PASS"
	else
		status="FAIL"
		BINS_FAILED=$((BINS_FAILED + 1))
		FAILED_NAMES+=("$kind/$name")
	fi
	local why=""
	if [[ $rc -eq 124 || $rc -eq 137 ]]; then
		why=" (timed out after ${TEST_TIMEOUT}s)"
	elif [[ $rc -gt 128 ]]; then
		why=" (killed by signal $((rc - 128)))"
	elif [[ $ran -eq 0 ]]; then
		why=" (no test cases ran)"
	fi
	printf '%-4s %-12s %-32s %3d/%-3d tests %7ss%s\n' \
		"$status" "$kind" "$name" "$passed" "$ran" "$secs" "$why"
	if [[ "$status" == FAIL ]]; then
		echo "---- output of $name (also in $log) ----"
		# Failed cases and their assertion messages (a message of several
		# lines whole, up to cmocka's next line), then the end of the output
		# (which holds a sanitizer report or the crash, if any).
		awk '/^\[  (FAILED|ERROR) *\]|error:|Failure!|ERROR|AddressSanitizer|runtime error|^==[0-9]+== / {
			print; more = !/^\[/ && !/^==/; next
		}
		/^\[/ { more = 0 }
		more' "$log" | head -n 80 || true
		echo "...."
		tail -n 40 "$log"
		echo "----"
		return 1
	fi
	return 0
}

list_binaries() {
	local dir="$1" f
	[[ -d "$dir" ]] || return 0
	for f in "$dir"/test_*; do
		[[ -f "$f" && -x "$f" && "$(basename "$f")" != *.* ]] || continue
		[[ -z "${ECW_TESTS:-}" || " $ECW_TESTS " == *" $(basename "$f") "* ]] && printf '%s\n' "$f"
	done
	return 0
}

overall=0

if [[ $RUN_UNIT -eq 1 ]]; then
	mapfile -t unit_bins < <(list_binaries "$BUILD_DIR/tests/unit")
	if [[ ${#unit_bins[@]} -eq 0 ]]; then
		echo "warning: no unit test binaries in $BUILD_DIR/tests/unit" >&2
	fi
	for b in "${unit_bins[@]}"; do
		run_binary "$b" unit || overall=1
	done
fi

if [[ $RUN_INTEG -eq 1 ]]; then
	mapfile -t integ_bins < <(list_binaries "$BUILD_DIR/tests/integration")
	if [[ ${#integ_bins[@]} -eq 0 ]]; then
		echo "warning: no integration test binaries in $BUILD_DIR/tests/integration" >&2
	else
		if ! azurite_start || ! azurite_start_tls; then
			echo "FAIL: could not start Azurite" >&2
			exit 1
		fi
		integ_failed=0
		for b in "${integ_bins[@]}"; do
			if ! kill -0 "$AZ_PID" 2>/dev/null; then
				echo "FAIL: Azurite died before $(basename "$b")" >&2
				integ_failed=1
				break
			fi
			run_binary "$b" integration || integ_failed=1
		done
		if [[ $integ_failed -ne 0 ]]; then
			overall=1
			azurite_tail
		fi
	fi
fi

echo "==== $BINS_RUN binaries, $((BINS_RUN - BINS_FAILED)) passed; $TOTAL_RUN test cases run, $TOTAL_PASSED passed, $((TOTAL_RUN - TOTAL_PASSED)) failed"
if [[ $BINS_FAILED -gt 0 ]]; then
	echo "failed: ${FAILED_NAMES[*]}"
fi
if [[ $TOTAL_RUN -eq 0 ]]; then
	echo "FAIL: no test cases ran" >&2
	overall=1
fi
exit $overall
