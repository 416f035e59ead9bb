#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-fuzz.sh - runs ecworker's libFuzzer targets, FUZZ_JOBS at a time
# (default: the number of cores, so each has one), and reports one line per
# target in their order (like run-tests.sh does for test binaries).
#
#   tests/fuzz/run-fuzz.sh FUZZ_BUILD_DIR SECONDS [TARGET...]
#
# Each target FUZZ_BUILD_DIR/NAME runs for SECONDS (-max_total_time) on its
# committed seed corpus tests/fuzz/corpus/NAME/, which is only read, plus a
# scratch corpus FUZZ_BUILD_DIR/corpus/NAME/ that keeps what it finds between
# runs; with tests/fuzz/NAME.dict when there is one. Leak detection is on.
# A crash, leak, sanitizer report or timeout leaves its input in
# FUZZ_BUILD_DIR/artifacts/ (the path is printed) and fails the run; the full
# output of each target is in FUZZ_BUILD_DIR/logs/NAME.log.
set -euo pipefail

if [[ $# -lt 2 ]]; then
	echo "usage: $0 FUZZ_BUILD_DIR SECONDS [TARGET...]" >&2
	exit 2
fi
BUILD_DIR="$1"
SECONDS_PER="$2"
shift 2
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ "$SECONDS_PER" =~ ^[0-9]+$ && "$SECONDS_PER" -gt 0 ]] || { echo "$0: SECONDS must be a positive integer" >&2; exit 2; }
[[ -d "$BUILD_DIR" ]] || { echo "$0: no build directory $BUILD_DIR" >&2; exit 2; }
BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
	for f in "$BUILD_DIR"/fuzz_*; do
		[[ -f "$f" && -x "$f" ]] && targets+=("$(basename "$f")")
	done
fi
if [[ ${#targets[@]} -eq 0 ]]; then
	echo "$0: no fuzz targets in $BUILD_DIR" >&2
	exit 1
fi

ARTIFACTS="$BUILD_DIR/artifacts"
LOGS="$BUILD_DIR/logs"
mkdir -p "$ARTIFACTS" "$LOGS"
# libFuzzer's own options come on the command line; these are the sanitizers'.
# strict_string_checks (as run-tests.sh): a str* function given a span that is
# not NUL-terminated is a report. strndup(p, n) is the exception: it reads at
# most n bytes, which the strict check does not know.
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:intercept_strndup=0:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# fuzz_one TARGET: runs it, its output in its log, its exit status in
# LOGS/TARGET.rc. In the background, FUZZ_JOBS at a time (default: the
# number of cores): each runs its SECONDS on a core of its own.
fuzz_one() {
	local t="$1" bin="$BUILD_DIR/$1" seeds="$ROOT/tests/fuzz/corpus/$1" scratch="$BUILD_DIR/corpus/$1"
	local log="$LOGS/$1.log" rc=0 args dirs
	mkdir -p "$scratch" "$ARTIFACTS/$t"
	args=(-max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 -max_len=16384
		-detect_leaks=1 -print_final_stats=1 -artifact_prefix="$ARTIFACTS/$t/")
	[[ -f "$ROOT/tests/fuzz/$t.dict" ]] && args+=(-dict="$ROOT/tests/fuzz/$t.dict")
	dirs=("$scratch")
	[[ -d "$seeds" ]] && dirs+=("$seeds")
	# Artifacts from an earlier run are not this run's findings.
	: >"$ARTIFACTS/$t/.run-start"
	# A command put in the background by a script starts with SIGINT and
	# SIGQUIT ignored: env restores them.
	(cd "$BUILD_DIR" && env --default-signal=INT,QUIT "$bin" "${args[@]}" "${dirs[@]}") >"$log" 2>&1 </dev/null || rc=$?
	echo "$rc" >"$LOGS/$t.rc"
}

# report_one TARGET: its line (and, when it failed, what it found).
report_one() {
	local t="$1" bin="$BUILD_DIR/$1" scratch="$BUILD_DIR/corpus/$1" log="$LOGS/$1.log" rc execs corp
	local marker="$ARTIFACTS/$t/.run-start"
	rc="$(cat "$LOGS/$t.rc" 2>/dev/null || echo 255)"
	execs="$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)"
	corp="$(sed -n 's/^#[0-9]*[[:space:]]*DONE .* corp: \([0-9]*\)\/\([0-9a-zA-Z]*\).*/\1 (\2)/p' "$log" | tail -n 1)"
	[[ -n "$corp" ]] || corp="$(find "$scratch" -type f | wc -l) files"
	if [[ $rc -eq 0 ]]; then
		printf '%-4s %-24s %10s execs  corpus %-14s %4ss\n' PASS "$t" "${execs:-?}" "$corp" "$SECONDS_PER"
	else
		printf '%-4s %-24s %10s execs  corpus %-14s exit %d\n' FAIL "$t" "${execs:-?}" "$corp" "$rc"
		failed+=("$t")
		grep -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|invariant failed|SUMMARY|Test unit written to|==[0-9]+== ?ERROR' "$log" | head -n 20 || true
		echo "  artifacts: $(find "$ARTIFACTS/$t" -type f ! -name .run-start -newer "$marker" | tr '\n' ' ')"
		echo "  log: $log"
		echo "  reproduce: $bin $ARTIFACTS/$t/<file>"
	fi
}

JOBS="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "$0: FUZZ_JOBS must be a positive number" >&2; exit 2; }
failed=()
runnable=()
for t in "${targets[@]}"; do
	if [[ ! -x "$BUILD_DIR/$t" ]]; then
		printf '%-4s %-24s (no binary %s)\n' FAIL "$t" "$BUILD_DIR/$t"
		failed+=("$t")
	else
		runnable+=("$t")
	fi
done
# JOBS at a time (the targets take the same time), reported in order.
for ((i = 0; i < ${#runnable[@]}; i += JOBS)); do
	batch=("${runnable[@]:i:JOBS}")
	pids=()
	for t in "${batch[@]}"; do
		rm -f "$LOGS/$t.rc"
		fuzz_one "$t" &
		pids+=($!)
	done
	wait "${pids[@]}" || true
	for t in "${batch[@]}"; do
		report_one "$t"
	done
done

echo "==== fuzz: ${#targets[@]} targets, $((${#targets[@]} - ${#failed[@]})) passed, ${#failed[@]} failed (${SECONDS_PER}s each)"
[[ ${#failed[@]} -eq 0 ]] || { echo "failed: ${failed[*]}"; exit 1; }
