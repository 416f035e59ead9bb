#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-tests.sh - runs ecworker's test binaries and reports one line per binary.
#
#   tests/run-tests.sh BUILD_DIR [--unit-only|--integration-only]
#   (the option may also come first, as the Makefile passes it)
#
# Unit binaries (BUILD_DIR/tests/unit/test_*) run without any service. For the
# integration binaries (BUILD_DIR/tests/integration/test_*) this script starts
# in-memory Azurites (queue + table on free ports), one for each binary that
# may run at once (a lane), and always stops them on exit. A binary finds its
# lane's in ECW_TEST_CONNECTION_STRING, ECW_TEST_QUEUE_PORT,
# ECW_TEST_TABLE_PORT and ECW_TEST_BLOB_PORT. For the TLS and OAuth tests it
# also starts one queue + table + blob Azurite over https (--oauth basic) with
# a self-signed certificate made with openssl (ECW_TEST_HTTPS_QUEUE_PORT,
# ECW_TEST_HTTPS_TABLE_PORT, ECW_TEST_HTTPS_BLOB_PORT, ECW_TEST_CA_FILE; log
# BUILD_DIR/azurite-https.log,
# certificate in BUILD_DIR/tls/). Each lane's access log is kept:
# BUILD_DIR/azurite.log for the first, BUILD_DIR/azurite-lane2.log and so on
# for the others; a failed binary's report names its lane's (set
# ECW_AZURITE_DEBUG=1 to add the first lane's debug log, which shows the
# string-to-sign it expected, in BUILD_DIR/azurite-debug.log). Each binary's
# output is kept in BUILD_DIR/test-logs/. ECW_TESTS="test_a test_b" runs only
# the binaries so named (while working on one module). ECW_TEST_WRAPPER="valgrind ..."
# runs each binary under that command (make valgrind), which must exit
# non-zero when it finds an error.
#
# Unit binaries run side by side, ECW_TEST_JOBS at a time (default: the
# number of cores; 1 runs them one after the other). Integration binaries run
# ECW_TEST_INTEG_JOBS at a time (default: one more than the cores), each on its
# lane's Azurite: side by side on one Azurite, a binary waited out the stalls
# the other's load brought on (no request answered for 15 to 58 s, in its
# access log) and one with a 2 s lease failed; on an Azurite of its own a
# binary meets only what it and the binaries before it on its lane did, as
# when they all ran one after the other. Those in SERIAL_TESTS below run
# alone, after the others; those in FIRST_TESTS start first. The lines come
# in the order the binaries start, whatever finishes first, each with its
# wall and CPU time, and the run ends with the slowest binaries
# (ECW_TEST_SLOWEST=N of them, default 10).
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

# The background run_binary of each binary run_pool started: the file with
# the pid of its timeout (stop_pool).
declare -A POOL_PIDS=()
rm -f "$LOG_DIR"/*.pid

# ---- Azurite -------------------------------------------------------------

AZURITE_DIR="$BUILD_DIR"
AZURITE_TLS_LOG="$BUILD_DIR/azurite-https.log"
# shellcheck source=tests/azurite.sh
source "$ROOT/tests/azurite.sh"
trap 'stop_pool; lanes_stop; azurite_stop' EXIT
trap 'stop_pool; lanes_stop; azurite_stop; exit 130' INT
trap 'stop_pool; lanes_stop; azurite_stop; exit 143' TERM

# ---- lanes: an Azurite for each integration binary that runs at once -----
# Lane L (0, 1, ...) is the Azurite LANE_PID[L], its ports and connection
# string, its access log LANE_LOG[L]. run_pool gives each binary it starts
# a free slot, and pool_env exports that slot's lane to it.
LANE_PID=() LANE_QP=() LANE_TP=() LANE_BP=() LANE_CS=() LANE_LOG=()

# lanes_start N: starts N lanes' Azurites, one after the other.
lanes_start() {
	local n="$1" l
	for ((l = 0; l < n; l++)); do
		AZURITE_LOG="$BUILD_DIR/azurite.log"
		((l == 0)) || AZURITE_LOG="$BUILD_DIR/azurite-lane$((l + 1)).log"
		azurite_start || return 1
		LANE_PID[l]="$AZ_PID" LANE_QP[l]="$ECW_TEST_QUEUE_PORT" LANE_TP[l]="$ECW_TEST_TABLE_PORT"
		LANE_BP[l]="$ECW_TEST_BLOB_PORT"
		LANE_CS[l]="$ECW_TEST_CONNECTION_STRING" LANE_LOG[l]="$AZURITE_LOG"
		AZ_PID="" # the lane's now: lanes_stop stops it
	done
}

lanes_stop() {
	local l
	for l in "${!LANE_PID[@]}"; do
		stop_pid "${LANE_PID[l]}"
	done
	LANE_PID=()
}

# lanes_tail: the end of each lane's access log and of the https one's.
lanes_tail() {
	local l
	for l in "${!LANE_LOG[@]}"; do
		AZURITE_LOG="${LANE_LOG[l]}" AZURITE_TLS_LOG=/dev/null azurite_tail
	done
	AZURITE_LOG=/dev/null azurite_tail
}

# ---- running binaries ----------------------------------------------------
# Binaries run JOBS at a time (ECW_TEST_JOBS, default: the number of cores),
# each in the background with its output in its log; their lines are printed
# in the order of the list, each as soon as it and those before it are done,
# so the output reads the same whatever finished first. The integration
# binaries named in SERIAL_TESTS run alone, after the others: they measure
# time or count requests over a period, which another binary's load would
# skew (the reason is beside each name).

JOBS="${ECW_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "$0: ECW_TEST_JOBS must be a positive number, not '$JOBS'" >&2; exit 2; }
# One lane more than ECW_TEST_JOBS (the cores): an integration binary mostly
# waits (for its workers, for Azurite); two lanes kept two cores 40% busy,
# and three took the run from 459 s to 363 s, every binary passing.
INTEG_JOBS="${ECW_TEST_INTEG_JOBS:-$((JOBS + 1))}"
[[ "$INTEG_JOBS" =~ ^[1-9][0-9]*$ ]] ||
	{ echo "$0: ECW_TEST_INTEG_JOBS must be a positive number, not '$INTEG_JOBS'" >&2; exit 2; }

# name: why it runs alone.
SERIAL_TESTS="
test_adaptive: its concurrency follows the latency it measures
test_chaos: four workers SIGKILLed, a private Azurite and a fault proxy: the heaviest load of the run
test_job_index_list_races: its crashes count deliveries exactly (dequeue_count 2) under a 2 s lease, which a worker slowed by the others' load outlives
test_queue_watch: counts the idle worker's requests over a fixed period
test_queues: counts the idle worker's requests over a fixed period
"

# The longest of those side by side start first (and so their lines come
# first): the run ends when its last lane does, and one of these started
# last would run on alone while the other lanes stood idle.
FIRST_TESTS="test_runtime test_outage test_jobs_mixed"

TOTAL_RUN=0
TOTAL_PASSED=0
BINS_RUN=0
BINS_FAILED=0
FAILED_NAMES=()
TIMES=() # "SECONDS CPU-SECONDS KIND/NAME", for the slowest at the end

now() { printf '%s' "${EPOCHREALTIME/,/.}"; }

# Sums the numbers cmocka prints in lines like "[  PASSED  ] 7 test(s)." (one
# per group; a binary may run several groups).
sum_cmocka() {
	local pattern="$1" file="$2"
	sed -n "s/^\[ *$pattern *\] \([0-9][0-9]*\) test(s).*/\1/p" "$file" | awk '{s += $1} END {print s + 0}'
}

# run_binary BIN KIND SLOT: runs BIN, its output in LOG_DIR/KIND-NAME.log,
# with what `pool_env SLOT` exports when that is defined, and writes
# "RC SECONDS CPU-SECONDS SLOT" (CPU: user + system time of the binary and
# the processes it waited for) to LOG_DIR/KIND-NAME.result when it is done;
# the pid of its `timeout` is in LOG_DIR/KIND-NAME.pid meanwhile (stop_pool).
# Runs in the background: it changes no variable of the caller.
run_binary() {
	local bin="$1" kind="$2" slot="$3"
	local name log start end rc=0 cpu pid
	name="$(basename "$bin")"
	if declare -F pool_env >/dev/null; then pool_env "$slot"; fi
	log="$LOG_DIR/$kind-$name.log"
	start="$(now)"
	local -a wrapper=()
	[[ -n "${ECW_TEST_WRAPPER:-}" ]] && read -r -a wrapper <<<"$ECW_TEST_WRAPPER"
	# A command put in the background by a script starts with SIGINT and
	# SIGQUIT ignored, and its programs would inherit that: env restores them.
	env --default-signal=INT,QUIT timeout --kill-after=10 "$TEST_TIMEOUT" "${wrapper[@]}" "$bin" \
		>"$log" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$LOG_DIR/$kind-$name.pid"
	wait "$pid" || rc=$?
	end="$(now)"
	# times: this shell's user and system time, then its children's: the
	# timeout it waited for, and what that waited for. (In this shell: a pipe
	# or $(...) would run it in a subshell, which has no children.)
	times >"$log.times"
	cpu="$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } }
		END { printf "%.1f", s }' "$log.times")"
	rm -f "$log.times"
	rm -f "$LOG_DIR/$kind-$name.pid"
	printf '%s %s %s %s\n' "$rc" "$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')" "$cpu" "$slot" \
		>"$LOG_DIR/$kind-$name.result.tmp"
	mv "$LOG_DIR/$kind-$name.result.tmp" "$LOG_DIR/$kind-$name.result"
}

# report_binary BIN KIND: the line of a binary run_binary is done with (and,
# when it failed, the cases that failed and the end of its output); adds it
# to the totals. Returns 1 when it failed.
report_binary() {
	local bin="$1" kind="$2"
	local name log rc secs cpu slot ran passed failed status also
	name="$(basename "$bin")"
	log="$LOG_DIR/$kind-$name.log"
	read -r rc secs cpu slot <"$LOG_DIR/$kind-$name.result"

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
	TIMES+=("$secs $cpu $kind/$name")

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
	printf '%-4s %-12s %-32s %3d/%-3d tests %7ss (cpu %ss)%s\n' \
		"$status" "$kind" "$name" "$passed" "$ran" "$secs" "$cpu" "$why"
	if [[ "$status" == FAIL ]]; then
		also="$log"
		[[ $kind == integration && -n "${LANE_LOG[slot]:-}" ]] && also="$also; its Azurite's: ${LANE_LOG[slot]}"
		echo "---- output of $name (also in $also) ----"
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

# run_pool KIND JOBS BIN...: runs the binaries JOBS at a time and reports
# each, in the order given. Before starting one, calls `pool_check` when it
# is defined: when that fails, starts no more (those running are waited
# for). Returns 1 when a binary failed or pool_check did.
run_pool() {
	local kind="$1" jobs="$2"
	shift 2
	local bins=("$@") n=$# next=0 shown=0 rc=0 stop=0 i slot
	local -a pids=()
	local -A slot_of=() # pid -> its slot (0 .. jobs-1), free again when it ends
	while ((shown < next || (next < n && stop == 0))); do
		while ((stop == 0 && next < n && ${#pids[@]} < jobs)); do
			if declare -F pool_check >/dev/null && ! pool_check "${bins[next]}"; then
				stop=1 rc=1
				break
			fi
			for ((slot = 0; slot < jobs; slot++)); do
				[[ " ${slot_of[*]} " == *" $slot "* ]] || break
			done
			rm -f "$LOG_DIR/$kind-$(basename "${bins[next]}").result"
			run_binary "${bins[next]}" "$kind" "$slot" &
			slot_of[$!]=$slot
			pids+=($!)
			POOL_PIDS[$!]="$LOG_DIR/$kind-$(basename "${bins[next]}").pid"
			next=$((next + 1))
		done
		while ((shown < next)) && [[ -f "$LOG_DIR/$kind-$(basename "${bins[shown]}").result" ]]; do
			report_binary "${bins[shown]}" "$kind" || rc=1
			shown=$((shown + 1))
		done
		((shown < next || (next < n && stop == 0))) || break
		# One of the running ones ends (or all have, and a result is read).
		if ((${#pids[@]} > 0)); then
			wait -n "${pids[@]}" 2>/dev/null || true
			local alive=()
			for i in "${pids[@]}"; do
				if kill -0 "$i" 2>/dev/null; then alive+=("$i"); else unset "slot_of[$i]"; fi
			done
			pids=(${alive[@]+"${alive[@]}"})
		elif [[ ! -f "$LOG_DIR/$kind-$(basename "${bins[shown]}").result" ]]; then
			# Its run_binary ended without a result (killed): a failure.
			echo "255 0.0 0.0 0" >"$LOG_DIR/$kind-$(basename "${bins[shown]}").result"
		fi
	done
	return $rc
}

# stop_pool: at exit, the binaries still running (an interrupted run): the
# timeout of each, whose run_binary still runs, passes the signal on.
stop_pool() {
	local pid tpid
	for pid in "${!POOL_PIDS[@]}"; do
		kill -0 "$pid" 2>/dev/null || continue
		tpid="$(cat "${POOL_PIDS[$pid]}" 2>/dev/null)" || continue
		kill "$tpid" 2>/dev/null || true
	done
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
	else
		run_pool unit "$JOBS" "${unit_bins[@]}" || overall=1
	fi
fi

# Before each integration binary: every lane's Azurite still runs.
pool_check() {
	local l
	for l in "${!LANE_PID[@]}"; do
		kill -0 "${LANE_PID[l]}" 2>/dev/null && continue
		echo "FAIL: the Azurite of lane $((l + 1)) (${LANE_LOG[l]}) died before $(basename "$1")" >&2
		return 1
	done
	return 0
}

# In a binary's run_binary: its slot's lane is its Azurite.
pool_env() {
	local l="$1"
	[[ -n "${LANE_PID[l]:-}" ]] || return 0
	export ECW_TEST_QUEUE_PORT="${LANE_QP[l]}" ECW_TEST_TABLE_PORT="${LANE_TP[l]}"
	export ECW_TEST_BLOB_PORT="${LANE_BP[l]}"
	export ECW_TEST_CONNECTION_STRING="${LANE_CS[l]}"
}

if [[ $RUN_INTEG -eq 1 ]]; then
	mapfile -t integ_bins < <(list_binaries "$BUILD_DIR/tests/integration")
	if [[ ${#integ_bins[@]} -eq 0 ]]; then
		echo "warning: no integration test binaries in $BUILD_DIR/tests/integration" >&2
	else
		lanes=$INTEG_JOBS
		((lanes <= ${#integ_bins[@]})) || lanes=${#integ_bins[@]}
		if ! lanes_start "$lanes" || ! azurite_start_tls; then
			echo "FAIL: could not start Azurite" >&2
			exit 1
		fi
		first=() together=() alone=()
		for b in "${integ_bins[@]}"; do
			if grep -q "^$(basename "$b"):" <<<"$SERIAL_TESTS"; then
				alone+=("$b")
			elif [[ " $FIRST_TESTS " == *" $(basename "$b") "* ]]; then
				first+=("$b")
			else
				together+=("$b")
			fi
		done
		together=(${first[@]+"${first[@]}"} ${together[@]+"${together[@]}"})
		integ_failed=0
		if [[ ${#together[@]} -gt 0 ]]; then
			run_pool integration "$lanes" "${together[@]}" || integ_failed=1
		fi
		if [[ ${#alone[@]} -gt 0 ]]; then
			run_pool integration 1 "${alone[@]}" || integ_failed=1
		fi
		if [[ $integ_failed -ne 0 ]]; then
			overall=1
			lanes_tail
		fi
	fi
fi

if [[ ${#TIMES[@]} -gt 0 ]]; then
	echo "==== the slowest binaries (wall, cpu seconds; units $JOBS at a time, integration $INTEG_JOBS, those in SERIAL_TESTS alone):"
	printf '%s\n' "${TIMES[@]}" | sort -k1,1 -g -r | head -n "${ECW_TEST_SLOWEST:-10}" |
		awk '{ printf "  %7ss  (cpu %ss)  %s\n", $1, $2, $3 }'
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
