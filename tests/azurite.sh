# azurite.sh - sourced by the test runner and the demo: start and stop one
# in-memory Azurite (queue + table) on ports the kernel picks, so runs never
# collide. Sets AZURITE_QUEUE_PORT, AZURITE_TABLE_PORT and
# AZURITE_CONNECTION_STRING (the public devstoreaccount1 key).
AZURITE_PID=

azurite_start() {
	local log=$1 here
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	mkdir -p "$(dirname "$log")"
	"$here/node_modules/.bin/azurite" --inMemoryPersistence --skipApiVersionCheck --disableTelemetry \
		--blobHost 127.0.0.1 --blobPort 0 --queueHost 127.0.0.1 --queuePort 0 \
		--tableHost 127.0.0.1 --tablePort 0 >"$log" 2>&1 &
	AZURITE_PID=$!
	for _ in $(seq 1 200); do
		AZURITE_QUEUE_PORT=$(sed -n 's/.*Queue service is successfully listening at http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
		AZURITE_TABLE_PORT=$(sed -n 's/.*Table service is successfully listening at http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
		[ -n "$AZURITE_QUEUE_PORT" ] && [ -n "$AZURITE_TABLE_PORT" ] && break
		kill -0 "$AZURITE_PID" 2>/dev/null || { echo "azurite exited:" >&2; cat "$log" >&2; return 1; }
		sleep 0.1
	done
	if [ -z "$AZURITE_QUEUE_PORT" ] || [ -z "$AZURITE_TABLE_PORT" ]; then
		echo "azurite did not start within 20 s:" >&2; cat "$log" >&2; return 1
	fi
	AZURITE_CONNECTION_STRING="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;QueueEndpoint=http://127.0.0.1:$AZURITE_QUEUE_PORT/devstoreaccount1;TableEndpoint=http://127.0.0.1:$AZURITE_TABLE_PORT/devstoreaccount1;"
	export AZURITE_QUEUE_PORT AZURITE_TABLE_PORT AZURITE_CONNECTION_STRING
}

azurite_stop() {
	if [ -n "$AZURITE_PID" ]; then
		kill "$AZURITE_PID" 2>/dev/null || true
		wait "$AZURITE_PID" 2>/dev/null || true
		AZURITE_PID=
	fi
}
