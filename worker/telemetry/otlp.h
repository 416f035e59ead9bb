/* SPDX-License-Identifier: MIT */
/* otlp.h - the OTLP trace export: one span per run of a message, sent to
 * an OpenTelemetry collector over OTLP/HTTP with JSON encoding (POST
 * application/json to <endpoint>/v1/traces). No C OpenTelemetry SDK is
 * packaged for Debian: this is a small hand-written encoder (otlp.c) and a
 * batching exporter over libcurl (otlp_export.c).
 *
 * Configured by the standard OTEL_* environment variables only (the
 * worker/README.md lists them); ecw_otlp_config_read checks them all at start. The
 * header values (OTEL_EXPORTER_OTLP_HEADERS) are secrets: registered with
 * the log redaction, never quoted in an error.
 *
 * The exporter owns a fixed-size queue of spans and one thread. Job
 * threads hand it a span with ecw_otlp_submit, which never blocks on the
 * network: a full queue drops the span and counts it
 * (ecw_otlp_spans_dropped_total{reason="queue_full"}); a failed export
 * drops its batch (reason "export_failed"); what is left at shutdown after
 * the flush deadline is dropped too (reason "shutdown"). */
#ifndef ECW_OTLP_H
#define ECW_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ecw_buf.h"
#include "ecw_err.h"
#include "trace.h"

#define ECW_OTLP_URL_MAX 2048
#define ECW_OTLP_KEY_MAX 128
#define ECW_OTLP_VALUE_MAX 2048
#define ECW_OTLP_HEADERS_MAX 16
#define ECW_OTLP_ATTRS_MAX 32
#define ECW_OTLP_QUEUE_MAX 65536

struct ecw_otlp_kv {
	char key[ECW_OTLP_KEY_MAX + 1];
	char value[ECW_OTLP_VALUE_MAX + 1];
};

/* What the environment asks for; a plain value, no heap. */
struct ecw_otlp_config {
	bool enabled; /* an endpoint is set, and neither the SDK nor the exporter is disabled */
	char url[ECW_OTLP_URL_MAX + 1];
	struct ecw_otlp_kv headers[ECW_OTLP_HEADERS_MAX]; /* values are secrets */
	size_t nheaders;
	int64_t timeout_ms;                              /* one export request, whole */
	struct ecw_otlp_kv resource[ECW_OTLP_ATTRS_MAX]; /* service.name first */
	size_t nresource;
	int64_t schedule_delay_ms; /* the longest a span waits for its batch */
	size_t max_queue;          /* spans held at most */
	size_t max_batch;          /* spans per request at most */
};

/* How the variables are looked up: getenv, or a test's table. */
typedef const char *(*ecw_otlp_env_fn)(const char *name);

/* Reads and checks every variable (worker/README.md, "Trace context and OTLP").
 * ECW_EINVALID with a one-line message naming the variable when one is
 * invalid; a header value is never quoted. Registers the header values
 * with the log redaction. */
int ecw_otlp_config_read(struct ecw_otlp_config *out, ecw_otlp_env_fn env) ECW_MUST_USE;

/* One run of a message, as it is exported. Strings are cut to fit. */
struct ecw_otlp_span {
	struct ecw_span_ids ids;
	char name[128];           /* the job's name; "message" when the message named none */
	char job[128];            /* "" when none */
	char outcome[32];         /* the log line's outcome word */
	char message_id[96];      /* the queue's message id */
	char queue[64];           /* the job queue */
	int64_t dequeue_count;    /* this delivery's */
	int64_t storage_requests; /* storage HTTP attempts of the run (of the group's run, in a group) */
	int64_t group;            /* messages run together (1: alone) */
	int64_t start_unix_ns, end_unix_ns;
	bool error;               /* the run failed: status ERROR */
	char status_message[256]; /* why, when error */
};

/* Appends the OTLP/JSON ExportTraceServiceRequest for spans[0..n) to out:
 * {"resourceSpans":[{"resource":{"attributes":[...]},"scopeSpans":[{"scope":
 * {...},"spans":[...]}]}]}, ids as lowercase hex, times as strings of Unix
 * nanoseconds. */
int ecw_otlp_encode(struct ecw_buf *out, const struct ecw_otlp_config *cfg, const struct ecw_otlp_span *spans,
		    size_t n) ECW_MUST_USE;

/* ---- the exporter (otlp_export.c) ---- */

struct ecw_otlp_exporter;

/* Starts the export thread with a copy of cfg (which must be enabled). */
int ecw_otlp_exporter_new(struct ecw_otlp_exporter **out, const struct ecw_otlp_config *cfg) ECW_MUST_USE;
/* Queues a copy of span for export, or drops and counts it when the queue
 * is full. Never waits for the network. e NULL: nothing. */
void ecw_otlp_submit(struct ecw_otlp_exporter *e, const struct ecw_otlp_span *span);
/* Exports what is queued, for at most flush_ms, drops and counts what is
 * left, stops the thread and frees e. NULL is fine. */
void ecw_otlp_exporter_free(struct ecw_otlp_exporter *e, int64_t flush_ms);

#endif
