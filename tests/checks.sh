# SPDX-License-Identifier: MIT
# checks.sh - sourced by the shell-level tests (tests/image/image-test.sh,
# tests/package/deb-test.sh): the counting of checks and the wait for the
# archive move both tests make. Set CHECKS_NAME (the summary line's name) and
# ROOT (the repository) before sourcing.
#   say TEXT             a heading
#   ok TEXT              one check passed
#   die TEXT             the check failed: says why, prints the summary, exits 1
#   checks_done          prints "NAME: N passed, 0 failed"
#   wait_moved PK RK LOG waits up to 20 s for Employees(PK, RK) to be in
#                        EmployeesArchive (tests/image/entities.js), then wants
#                        a succeeded outcome in the worker's LOG
# shellcheck shell=bash
passed=0

say() { printf '== %s\n' "$*"; }
ok() { passed=$((passed + 1)); printf '   ok   %s\n' "$*"; }
die() {
	printf '   FAIL %s\n' "$*" >&2
	echo "$CHECKS_NAME: $passed passed, 1 failed" >&2
	exit 1
}
checks_done() { echo "$CHECKS_NAME: $passed passed, 0 failed"; }

wait_moved() {
	local pk="$1" rk="$2" log="$3" rc
	for _ in $(seq 1 100); do
		if node "$ROOT/tests/image/entities.js" moved "$pk" "$rk"; then
			grep -q '"outcome":"succeeded"' "$log" || die "no outcome succeeded in the worker's log"
			return 0
		else
			rc=$?
			[[ "$rc" == 3 ]] || die "could not read the tables"
		fi
		sleep 0.2
	done
	tail -n 20 "$log" >&2
	die "Employees($pk, $rk) was not moved to EmployeesArchive within 20 s"
}
