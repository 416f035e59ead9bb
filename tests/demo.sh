#!/usr/bin/env bash
# demo.sh ECWORKER: starts a local in-memory Azurite on free ports, runs the
# worker on it with config/demo.yaml, enqueues a few messages (plain, base64,
# one that fails once, one that fails for good, and garbage) and shows what
# happened to each, then stops the worker with SIGTERM.
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
azurite_start
export AZURE_STORAGE_CONNECTION_STRING="$ECW_TEST_CONNECTION_STRING"

echo "== ecworker check-config -c config/demo.yaml"
"$bin" check-config -c "$cfg"

echo "== ecworker run -c config/demo.yaml (log: $worker_log)"
"$bin" run -c "$cfg" 2>"$worker_log" &
pid=$!

echo "== enqueueing"
"$bin" enqueue -c "$cfg" welcome-employee Sales "o'brien 001" >/dev/null
"$bin" enqueue -c "$cfg" welcome-employee Sales "jones 002" --base64 >/dev/null
"$bin" enqueue -c "$cfg" sync-payroll Sales "smith 003" --field period=2026-11 >/dev/null
"$bin" enqueue -c "$cfg" broken-import Sales "lee 004" >/dev/null
echo "   4 job messages (one base64), and one that is not JSON at all, sent raw:"
node -e '
const http = require("http"), crypto = require("crypto");
const cs = Object.fromEntries(process.env.AZURE_STORAGE_CONNECTION_STRING.split(";").filter(Boolean)
	.map(p => [p.slice(0, p.indexOf("=")), p.slice(p.indexOf("=") + 1)]));
const u = new URL(cs.QueueEndpoint + "/ecw-demo/messages"), date = new Date().toUTCString();
const body = "<QueueMessage><MessageText>not a job message</MessageText></QueueMessage>";
const sts = ["POST", "", "", String(Buffer.byteLength(body)), "", "application/xml", "", "", "", "", "", "",
	"x-ms-date:" + date, "x-ms-version:2021-12-02", "/" + cs.AccountName + u.pathname].join("\n");
const sig = crypto.createHmac("sha256", Buffer.from(cs.AccountKey, "base64")).update(sts).digest("base64");
const req = http.request(u, {method: "POST", headers: {"x-ms-date": date, "x-ms-version": "2021-12-02",
	"Content-Type": "application/xml", Authorization: "SharedKey " + cs.AccountName + ":" + sig}},
	res => { if (res.statusCode !== 201) console.error("put failed: " + res.statusCode); process.exit(res.statusCode === 201 ? 0 : 1); });
req.end(body);'

echo "== waiting for 6 outcomes (the flaky one is retried after ~1 s)"
for _ in $(seq 1 100); do
	n=$(grep -c ' message ' "$worker_log" || true)
	[ "$n" -ge 6 ] && break
	sleep 0.2
done
kill -TERM "$pid"
wait "$pid" && rc=0 || rc=$?
pid=
echo "== worker log"
sed 's/^/   /' "$worker_log"
echo "== worker exited with status $rc after SIGTERM"
[ "$rc" = 0 ]
