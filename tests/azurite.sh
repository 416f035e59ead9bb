# SPDX-License-Identifier: MIT
# azurite.sh - sourced by tests/run-tests.sh and tests/demo.sh: starts and
# stops in-memory Azurite instances on ports the kernel picks, so runs never
# collide. Callers set AZURITE (the azurite binary), AZURITE_LOG and
# AZURITE_TLS_LOG, and a working directory AZURITE_DIR; azurite_start exports
# ECW_TEST_QUEUE_PORT, ECW_TEST_TABLE_PORT, ECW_TEST_BLOB_PORT and
# ECW_TEST_CONNECTION_STRING (the public devstoreaccount1 key, all three
# endpoints), azurite_start_tls ECW_TEST_HTTPS_QUEUE_PORT,
# ECW_TEST_HTTPS_TABLE_PORT, ECW_TEST_HTTPS_BLOB_PORT and ECW_TEST_CA_FILE
# (its self-signed certificate).

AZ_PID=""        # the queue + table + blob Azurite over http
AZ_TLS_PID=""    # the same over https (self-signed) with --oauth basic, for test_tls and test_oauth
AZURITE_TLS_LOG="${AZURITE_TLS_LOG:-$AZURITE_DIR/azurite-https.log}"

stop_pid() {
	local pid="$1"
	[[ -n "$pid" ]] || return 0
	kill "$pid" 2>/dev/null || true
	# Give it a moment to exit cleanly, then insist.
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

azurite_stop() {
	stop_pid "$AZ_PID"
	AZ_PID=""
	stop_pid "$AZ_TLS_PID"
	AZ_TLS_PID=""
}

azurite_tail() {
	local f
	for f in "$AZURITE_LOG" "$AZURITE_TLS_LOG"; do
		if [[ -s "$f" ]]; then
			echo "---- last 40 lines of $f ----"
			tail -n 40 "$f"
			echo "----"
		fi
	done
}

# Reads "Azurite Queue service is successfully listening at http://127.0.0.1:PORT"
# (azurite) or "Azurite Queue service successfully listens on https://...:PORT"
# (azurite-queue).
listening_port() {
	sed -En "s#.*Azurite $1 service (is )?successfully (listening at|listens on) https?://[^ ]*:([0-9]+).*#\3#p" \
		"$2" | tail -n 1
}

# wait_ports PID LOG SERVICE... : prints the ports in order, or fails after 20 s.
wait_ports() {
	local pid="$1" log="$2" i svc port ports
	shift 2
	for ((i = 0; i < 200; i++)); do
		ports=()
		for svc in "$@"; do
			port="$(listening_port "$svc" "$log")"
			[[ -n "$port" ]] && ports+=("$port")
		done
		if [[ ${#ports[@]} -eq $# ]]; then
			echo "${ports[*]}"
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "azurite: Azurite exited during start-up (see $log)" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "azurite: Azurite did not report its ports within 20 s (see $log)" >&2
	return 1
}

azurite_start() {
	if [[ ! -x "$AZURITE" ]]; then
		echo "azurite: $AZURITE not found: run 'make deps' first" >&2
		return 1
	fi
	local extra=()
	if [[ "${ECW_AZURITE_DEBUG:-0}" == 1 ]]; then
		extra+=(--debug "$AZURITE_DIR/azurite-debug.log")
	fi
	: >"$AZURITE_LOG"
	# Not --silent: the access log (one line per request) is what you want to
	# read when a test fails. In memory, so --location must not be given; run
	# from BUILD_DIR so nothing Azurite might write lands in the source tree.
	(cd "$AZURITE_DIR" && exec "$AZURITE" --inMemoryPersistence --skipApiVersionCheck \
		--disableTelemetry \
		--blobHost 127.0.0.1 --blobPort 0 \
		--queueHost 127.0.0.1 --queuePort 0 \
		--tableHost 127.0.0.1 --tablePort 0 \
		"${extra[@]}") >>"$AZURITE_LOG" 2>&1 &
	AZ_PID=$!

	local ports qp tp bp
	if ! ports="$(wait_ports "$AZ_PID" "$AZURITE_LOG" Queue Table Blob)"; then
		azurite_tail >&2
		return 1
	fi
	read -r qp tp bp <<<"$ports"

	local key="Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	export ECW_TEST_QUEUE_PORT="$qp"
	export ECW_TEST_TABLE_PORT="$tp"
	export ECW_TEST_BLOB_PORT="$bp"
	export ECW_TEST_CONNECTION_STRING="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=$key;QueueEndpoint=http://127.0.0.1:$qp/devstoreaccount1;TableEndpoint=http://127.0.0.1:$tp/devstoreaccount1;BlobEndpoint=http://127.0.0.1:$bp/devstoreaccount1;"
	echo "Azurite (pid $AZ_PID): queue port $qp, table port $tp, blob port $bp, log $AZURITE_LOG"
}

# A second Azurite, queue, table and blob over https with a self-signed
# certificate made here, accepting bearer tokens as well as keys (--oauth
# basic: Azurite checks a token's issuer, audience and lifetime, not its
# signature), for the TLS and OAuth tests (ECW_TEST_HTTPS_QUEUE_PORT,
# ECW_TEST_HTTPS_TABLE_PORT, ECW_TEST_HTTPS_BLOB_PORT, ECW_TEST_CA_FILE). Without openssl the variables stay unset and those tests
# say so.
azurite_start_tls() {
	local dir="$AZURITE_DIR/tls"
	if ! command -v openssl >/dev/null 2>&1; then
		echo "warning: openssl not found: no https Azurite, TLS tests will fail" >&2
		return 0
	fi
	mkdir -p "$dir"
	if [[ ! -s "$dir/cert.pem" || ! -s "$dir/key.pem" ]]; then
		openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=127.0.0.1" \
			-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
			-keyout "$dir/key.pem" -out "$dir/cert.pem" >"$dir/openssl.log" 2>&1 || {
			echo "azurite: openssl could not make a certificate (see $dir/openssl.log)" >&2
			return 1
		}
	fi
	: >"$AZURITE_TLS_LOG"
	(cd "$AZURITE_DIR" && exec "$AZURITE" --inMemoryPersistence --skipApiVersionCheck \
		--disableTelemetry --oauth basic \
		--blobHost 127.0.0.1 --blobPort 0 \
		--queueHost 127.0.0.1 --queuePort 0 \
		--tableHost 127.0.0.1 --tablePort 0 \
		--cert "$dir/cert.pem" --key "$dir/key.pem") >>"$AZURITE_TLS_LOG" 2>&1 &
	AZ_TLS_PID=$!
	local ports qp tp bp
	if ! ports="$(wait_ports "$AZ_TLS_PID" "$AZURITE_TLS_LOG" Queue Table Blob)"; then
		azurite_tail >&2
		return 1
	fi
	read -r qp tp bp <<<"$ports"
	export ECW_TEST_HTTPS_QUEUE_PORT="$qp"
	export ECW_TEST_HTTPS_TABLE_PORT="$tp"
	export ECW_TEST_HTTPS_BLOB_PORT="$bp"
	export ECW_TEST_CA_FILE="$dir/cert.pem"
	echo "Azurite over https with OAuth (pid $AZ_TLS_PID): queue port $qp, table port $tp, blob port $bp, log $AZURITE_TLS_LOG"
}

