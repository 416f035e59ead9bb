/* SPDX-License-Identifier: MIT */
/* metrics.h - the worker's counters and its HTTP endpoint (libmicrohttpd):
 * GET /metrics (Prometheus text format 0.0.4), GET /healthz, GET /readyz.
 * Counters are process-wide and thread-safe; the server runs on
 * libmicrohttpd's own thread. ecw_metrics_start returns a heap handle freed
 * (server stopped) by ecw_metrics_stop. */
#ifndef ECW_METRICS_H
#define ECW_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include "ecw_err.h"

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
/* A job blocked by a missing table (job_block.h): gauge
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

/* The OTLP export (otlp.h): spans the collector took
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
/* The storage circuit (circuit.h): /readyz is not ready while it is open;
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
