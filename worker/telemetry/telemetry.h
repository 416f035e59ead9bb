/* SPDX-License-Identifier: MIT */
/* telemetry.h - the telemetry room's public face (worker/telemetry/), in
 * order: W3C trace context for job messages (trace.c), the OTLP trace
 * export (otlp.c, otlp_export.c), and the worker's counters and their HTTP
 * endpoint (metrics.c, metrics_server.c). Each section says what it owns
 * and who frees what. What the endpoint asks the counters is in
 * telemetry_private.h. */
#ifndef ECW_TELEMETRY_H
#define ECW_TELEMETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ecw_err.h"
#include "ecw_buf.h"

/* trace.c - W3C Trace Context (level 1) for job messages: the
 * "traceparent" field a message may carry, read and written, and the span
 * each run of a message opens. Values only, no allocation: a span is a
 * struct the caller owns.
 *
 *   traceparent = "00-" 32 hex (trace-id) "-" 16 hex (parent-id) "-" 2 hex (flags)
 *
 * Lowercase hex only; an all-zero trace-id or parent-id is invalid. A
 * version other than 00 (but not ff, which is invalid) is read as the spec
 * asks of a version it does not know: the first 55 characters as version 00,
 * and anything after them only when it starts with '-'. What the worker
 * writes is always version 00. */

#define ECW_TRACEPARENT_LEN 55 /* "00-" + 32 + "-" + 16 + "-" + 2 */
#define ECW_TRACE_FLAG_SAMPLED 0x01

/* A trace context: the trace, the span that is the parent of what comes
 * next, and the flags. */
struct ecw_trace_ctx {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t flags;
};

/* One run of a message: a new span in the message's trace (or in a new
 * trace when the message carried none), with the hex forms the log lines
 * use. */
struct ecw_span_ids {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t parent_id[8];
	bool has_parent; /* the message carried a valid traceparent */
	uint8_t flags;
	char trace_hex[33];
	char span_hex[17];
};

/* Reads a traceparent (text of len bytes). ECW_EINVALID with a one-line
 * reason in the last error (the text itself is never quoted: it is the
 * sender's, of any size). */
int ecw_trace_parent_parse(struct ecw_trace_ctx *out, const char *text, size_t len) ECW_MUST_USE;
/* Writes ctx as a version-00 traceparent, NUL-terminated. */
void ecw_trace_parent_format(char out[ECW_TRACEPARENT_LEN + 1], const struct ecw_trace_ctx *ctx);
/* The traceparent a message sent by the run of span carries: the same trace,
 * span's id as the parent-id, span's flags. */
void ecw_trace_child_context(struct ecw_trace_ctx *out, const struct ecw_span_ids *span);

/* Opens the span of one run: parent NULL starts a new trace, whose id is
 * the queue message id's 32 hex digits when it is a GUID (so every delivery
 * of an untraced message shares one trace: its retries line up) and random
 * otherwise; the span id is always fresh and random. message_id may be
 * NULL. */
void ecw_trace_span_start(struct ecw_span_ids *out, const struct ecw_trace_ctx *parent,
			  const char *message_id);

/* n bytes as 2n lowercase hex digits and a NUL. */
void ecw_trace_hex(char *out, const uint8_t *bytes, size_t n);
/* n random bytes, never all zero (getrandom; a weaker mix if it fails). */
void ecw_trace_random(uint8_t *out, size_t n);

/* otlp.c - the OTLP trace export: one span per run of a message, sent to
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

/* metrics.c - the worker's counters and its HTTP endpoint (libmicrohttpd):
 * GET /metrics (Prometheus text format 0.0.4), GET /healthz, GET /readyz.
 * Counters are process-wide and thread-safe; the server runs on
 * libmicrohttpd's own thread. ecw_metrics_start returns a heap handle freed
 * (server stopped) by ecw_metrics_stop. */

/* ---- recording (safe from any thread; labels are copied) ---- */

/* One message outcome: "succeeded", "retried", "poisoned", "lease-lost",
 * "released". job "" when the message did not name a valid job. */
void ecw_metrics_message(const char *job, const char *outcome, double seconds);
/* One storage HTTP attempt: op like "queue.receive", status the HTTP status
 * or 0 when no answer came. */
void ecw_metrics_storage(const char *op, int status);
void ecw_metrics_retry(void);
void ecw_metrics_inflight_add(int delta);
void ecw_metrics_poisoned(const char *reason);           /* "permanent" | "max-dequeue" */
void ecw_metrics_received(int64_t unix_time, int count); /* a successful receive, count >= 0 */
/* count messages of job concluded with the run of a duplicate in flight
 * with them instead of running again (ecw_messages_deduplicated_total). */
void ecw_metrics_deduplicated(const char *job, int64_t count);
void ecw_metrics_scheduled(const char *schedule, int64_t count); /* messages a schedule's window put */
/* A queue as last looked at: its approximate messages and the age of its
 * oldest visible message (0: none); and whether it is paused. */
void ecw_metrics_queue(const char *queue, long long approximate, int64_t oldest_age_s);
void ecw_metrics_paused(const char *queue, bool paused);
/* A job blocked by a missing table (job_block.c): gauge
 * ecw_job_blocked{job,table}, 1 while blocked, 0 once it ran again. */
void ecw_metrics_job_blocked(const char *job, const char *table, bool blocked);
/* A job audited on schedule every period_s seconds (gauge
 * ecw_audit_period_seconds{job}, the shortest when several schedules audit
 * it): declared at start, so that an alert can tell an audit that never
 * finished from no audit at all. */
void ecw_metrics_audit_declare(const char *job, int64_t period_s);
/* The latest finished audit of job, from the markers: finished_s (Unix
 * seconds) and its drift per kind (kinds[i], drift[i]: found and not
 * repaired), gauges ecw_audit_last_run_timestamp_seconds{job} and
 * ecw_audit_drift{job,kind}. A result older than the one shown is ignored. */
void ecw_metrics_audit(const char *job, int64_t finished_s, const char *const *kinds, const uint64_t *drift,
		       size_t n);

/* The OTLP export (otlp.c): spans the collector took
 * (ecw_otlp_spans_exported_total), and spans dropped by reason
 * (ecw_otlp_spans_dropped_total{reason}: "queue_full", "export_failed",
 * "shutdown"). Declared (at 0) when the exporter starts. */
void ecw_metrics_otlp_exported(int64_t spans);
void ecw_metrics_otlp_dropped(const char *reason, int64_t spans);
/* A batch sent again after the collector answered 429/502/503/504 or not at
 * all (ecw_otlp_export_retries_total). */
void ecw_metrics_otlp_retry(void);
void ecw_metrics_otlp_declare(void);

/* Puts the series alerts need at 0 before anything happened: each poison
 * reason, and (job not NULL) the job's succeeded, retried and poisoned
 * outcomes and its deduplicated messages. Declaring again changes nothing. */
void ecw_metrics_declare(const char *job);

/* Liveness and readiness, set by the runtime. */
void ecw_metrics_heartbeat(void); /* the loop went round */
void ecw_metrics_set_ready(bool storage_ok);
/* The storage circuit (circuit.c): /readyz is not ready while it is open;
 * gauge ecw_storage_circuit_open. */
void ecw_metrics_set_circuit_open(bool open);
/* Job threads that completed no storage call for worker.stall_timeout:
 * /healthz fails while any is (the orchestrator restarts the process; the
 * messages come back through their leases); gauge ecw_jobs_stalled. */
void ecw_metrics_set_stalled(int jobs);
/* The adaptive concurrency limit now (ecw_concurrency_limit; not shown
 * before it is first set); cut: it was lowered (counted in
 * ecw_concurrency_limit_cuts_total). */
void ecw_metrics_set_concurrency_limit(int limit, bool cut);
/* Alive when the loop went round within max_silence_ms. */
void ecw_metrics_set_liveness_window(int64_t max_silence_ms);

/* The /metrics page, for tests and for the server. free() the result. */
char *ecw_metrics_render(void);
/* Back to zero (tests). */
void ecw_metrics_reset(void);

/* ---- the server ---- */

struct ecw_metrics_server;

/* listen is "host:port" (host an IPv4/IPv6 literal or "localhost"; port 0
 * picks a free one). */
int ecw_metrics_start(struct ecw_metrics_server **out, const char *listen) ECW_MUST_USE;
int ecw_metrics_port(const struct ecw_metrics_server *s);
void ecw_metrics_stop(struct ecw_metrics_server *s);

#endif
