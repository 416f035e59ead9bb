#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# demo.sh ECWORKER: the table design patterns on a local in-memory Azurite.
# An application (tests/demo.js, the official Azure SDK for JavaScript) seeds
# employees, customers and orders; `ecworker backfill` builds the email index,
# the last-name lists and the copies of customer fields in orders; then the
# application changes things, archives an employee, sends one garbage message,
# and the worker brings everything back in line. Then a water tank's hourly
# readings are rolled up into daily and weekly aggregates, and recomputed when
# late readings arrive. Then an employee is archived into a blob and
# restored, and a photo the employee no longer names is deleted; and a day
# of the tank's raw readings is exported to a blob and leaves the table.
# Ends with SIGTERM.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
cfg="$ROOT/config/demo.yaml"
AZURITE="$ROOT/tests/node_modules/.bin/azurite"
AZURITE_DIR="$(dirname "$bin")"
AZURITE_LOG="$AZURITE_DIR/demo-azurite.log"
worker_log="$AZURITE_DIR/demo-worker.log"
# shellcheck source=tests/azurite.sh
source "$ROOT/tests/azurite.sh"
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; azurite_stop; }
trap cleanup EXIT
azurite_start >/dev/null
# Queue, table and blob endpoints (BlobEndpoint too, for jobs that keep blobs).
export AZURE_STORAGE_CONNECTION_STRING="$ECW_TEST_CONNECTION_STRING"
app() { node "$ROOT/tests/demo.js" "$@"; }
outcomes() { grep -c ' message ' "$worker_log" || true; }
wait_for() {
	for _ in $(seq 1 150); do [ "$(outcomes)" -ge "$1" ] && return 0; sleep 0.2; done
	echo "demo: expected $1 outcomes, saw $(outcomes)" >&2; return 1
}

echo "== ecworker check-config -c config/demo.yaml"
"$bin" check-config -c "$cfg"
echo "== the application writes 4 employees, 2 customers, 5 orders (JS SDK)"
app seed
echo "== ecworker run -c config/demo.yaml   (log: $worker_log)"
"$bin" run -c "$cfg" 2>"$worker_log" &
pid=$!
echo "== ecworker backfill: build the derived data over what exists"
for job in employee-by-email employees-by-lastname customer-to-orders; do
	"$bin" backfill -c "$cfg" "$job"
done
wait_for 10
app show

echo "== the application: Sam Jones becomes Sam Smith, Contoso renames itself, Zoë leaves"
app change
"$bin" enqueue -c "$cfg" employee-by-email Sales "jones 002" >/dev/null
"$bin" enqueue -c "$cfg" employees-by-lastname Sales "jones 002" >/dev/null
"$bin" enqueue -c "$cfg" customer-to-orders customers c1 >/dev/null
"$bin" enqueue -c "$cfg" archive-employee Ops "zoë 004" --base64 >/dev/null   # then: both indexes
echo "== and a message that is not a job at all (poisoned, never lost)"
node -e '
const { QueueClient } = require(process.argv[1] + "/tests/node_modules/@azure/storage-queue");
new QueueClient(process.env.AZURE_STORAGE_CONNECTION_STRING, "ecw-demo").sendMessage("not a job message")
	.then(() => process.exit(0), (e) => { console.error(e.message); process.exit(1); });' "$ROOT"
wait_for 17
app show
echo "== a water tank's hourly readings (two hours missing); roll up the day and the week"
app telemetry
"$bin" enqueue -c "$cfg" tank-daily --field device=tank-7 --field window_start=2020-10-11 >/dev/null
"$bin" enqueue -c "$cfg" tank-weekly --field device=tank-7 --field window_start=2020-10-05 >/dev/null
wait_for 19
app rollups
echo "== the two missing readings arrive late: the same messages again recompute the windows"
app late
"$bin" enqueue -c "$cfg" tank-daily --field device=tank-7 --field window_start=2020-10-11 >/dev/null
"$bin" enqueue -c "$cfg" tank-weekly --field device=tank-7 --field window_start=2020-10-05 >/dev/null
wait_for 21
app rollups
echo "== archives in blobs: Pat O'Brien archived to a blob (then: the indexes), then restored"
"$bin" enqueue -c "$cfg" archive-employee-to-blob Sales "o'brien 001" >/dev/null
wait_for 24
app archived
"$bin" enqueue -c "$cfg" restore-employee-from-blob Sales "o'brien 001" >/dev/null
wait_for 27
app archived
echo "== the large-entities pattern: Alex Jones's photo, then a new one (the entity names the new)"
app photo
app photo
app photos
sleep 3 # past the job's grace (2 s): the replaced photo may go
"$bin" enqueue -c "$cfg" employee-files Ops "jones 003" >/dev/null
wait_for 28
app photos
echo "== log history: the tank's raw readings of 2020-10-11 exported to a blob (JSON lines), then deleted"
"$bin" enqueue -c "$cfg" tank-history --field device=tank-7 --field window_start=2020-10-11 >/dev/null
wait_for 29
app history
echo "== ecworker status -c config/demo.yaml"
"$bin" status -c "$cfg"
echo "== ecworker poison list -c config/demo.yaml   (what an operator sees; see the runbook in worker/README.md)"
"$bin" poison list -c "$cfg"

kill -TERM "$pid"
wait "$pid" && rc=0 || rc=$?
pid=
echo "== worker log"
sed 's/^/   /' "$worker_log"
echo "== worker exited with status $rc after SIGTERM"
[ "$rc" = 0 ]
