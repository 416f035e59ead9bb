/* SPDX-License-Identifier: MIT */
/* schedule.h - running `schedules:`: jobs enqueued on a timetable by the
 * worker itself (schedule.c), or audited on one (schedule_audit.c). The
 * parsed set is the configuration's (ecw_config.h, worker/config/schedules.c);
 * the runtime's scheduler (ecw_schedule_runner_new / _free) keeps what one
 * replica learnt between ticks and reads the set without owning it, and so
 * does its auditor. The period math (schedule_window.c) is exposed for
 * tests. The room's public face: also `ecworker audit`'s run over jobs
 * (audit_run.c, last below). What its files share besides is in
 * schedule_private.h. */
#ifndef ECW_SCHEDULE_H
#define ECW_SCHEDULE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ecw_config.h"
#include "ecw_storage.h"
#include "ecw_audit.h"

/* ---- period math (UTC; Unix milliseconds) ---- */

/* The start of the period of length every_ms containing t: the hour, UTC
 * midnight, or Monday 00:00 UTC. */
int64_t ecw_schedule_period_start(int64_t t_ms, int64_t every_ms);
/* The starts of the latest max periods whose firing (start + at_ms) is at or
 * before now_ms, oldest first, into out; returns how many (max). */
size_t ecw_schedule_due(int64_t *out, size_t max, int64_t now_ms, int64_t every_ms, int64_t at_ms);
/* The message's window_start for a firing in the period starting at
 * period_ms: that period (current) or the one before (previous);
 * "YYYY-MM-DD" for 1d and 1w, "YYYY-MM-DDTHH:00:00Z" for 1h. */
int ecw_schedule_window_start(char *out, size_t cap, int64_t period_ms, int64_t every_ms,
			      enum ecw_schedule_window w) ECW_MUST_USE;
/* The marker's RowKey for the period starting at period_ms:
 * "YYYY-MM-DDTHH:MMZ", which sorts as time does. */
int ecw_schedule_marker_key(char *out, size_t cap, int64_t period_ms) ECW_MUST_USE;

/* ---- the scheduler (one per replica) ---- */

struct ecw_scheduler;
struct ecw_schedule_audit;

/* cfg (and its schedules) must outlive the scheduler; auditor (NULL when no
 * schedule is an audit) runs the audit windows it claims and must outlive it
 * too. */
int ecw_schedule_runner_new(struct ecw_scheduler **out, const struct ecw_config *cfg,
			    struct ecw_schedule_audit *auditor) ECW_MUST_USE;
void ecw_schedule_runner_free(struct ecw_scheduler *s);
/* Enqueues every due window not yet done (claiming each in the marker table
 * first), using c; stops between requests once *stopping is set. Returns how
 * many real milliseconds to wait before the next tick (at most 1000; more
 * after a storage error). Logs what it did and what failed. */
int64_t ecw_schedule_runner_tick(struct ecw_scheduler *s, struct ecw_client *c, const atomic_bool *stopping);

/* ---- the audits (worker/schedule/schedule_audit.c; one auditor per replica) ---- */

/* A thread that runs the audit windows this replica claims, one at a time,
 * on a client of its own (acct, opts), until *stopping is set; *out NULL
 * when no schedule is an audit. Declares each audited job's metrics. cfg
 * and stopping must outlive it. */
int ecw_schedule_audit_new(struct ecw_schedule_audit **out, const struct ecw_config *cfg,
			   const struct ecw_account *acct, const struct ecw_client_options *opts,
			   const atomic_bool *stopping) ECW_MUST_USE;
/* After *stopping is set: waits until the thread has stopped (the audit in
 * hand stopped and its window given back) or deadline_ms (ecw_clock_now_ms) has
 * passed; true when it stopped. NULL: true. */
bool ecw_schedule_audit_wait(struct ecw_schedule_audit *a, int64_t deadline_ms);
/* Joins the thread and frees; only once it stopped (or never started).
 * NULL is fine. */
void ecw_schedule_audit_free(struct ecw_schedule_audit *a);

/* audit_run.c - one job's audit run to its end (worker/schedule/audit_run.c), for
 * both `ecworker audit` (worker/cmd/audit.c: options, report, exit status)
 * and the audits the runtime runs on a schedule (worker/schedule/schedule_audit.c):
 * the pacing at a chosen rate of storage requests, the stop, the counts, and
 * the findings handed on. What an audit compares is the job's
 * (ecw_audit.h). */

struct ecw_audit_run_opts {
	const char *partition; /* only sources of this PartitionKey; NULL: all */
	bool repair;
	double rate;             /* storage requests a second, repairs included; 0: unpaced */
	const atomic_bool *stop; /* set (by a signal handler or another thread): stop soon; may be NULL */
	/* Called before each storage request the audit makes, after its pacing;
	 * false stops the audit (the runtime renews its claim here). May be NULL. */
	bool (*on_request)(void *payload);
	/* As in struct ecw_audit_ctx; may be NULL. */
	void (*on_finding)(const struct ecw_audit_finding *f, void *payload);
	void (*on_checked)(const struct ecw_audit_counts *c, void *payload);
	/* --via-queue: as ctx->requeue (a repair is the job's message); NULL:
	 * repairs run here. */
	int (*requeue)(const char *pk, const char *rk, void *payload);
	/* ... and as ctx->requeue_fields, for a keyless job; set with requeue. */
	int (*requeue_fields)(char *const *fields, void *payload);
	/* The configuration the job is in: a repair run here then runs the
	 * jobs its `then:` names (and theirs) for the same keys, as the
	 * job's message would. NULL: none. */
	const struct ecw_config *cfg;
	void *payload;
};

/* Audits job (whose type->audit is not NULL) on c. *out receives the counts,
 * also those of an audit that failed or stopped part way; *stopped (may be
 * NULL) whether it stopped before its end (o->stop, or on_request said so).
 * Returns 0, or the audit's error (the last error says why). */
int ecw_audit_run(struct ecw_audit_counts *out, bool *stopped, struct ecw_client *c,
		  const struct ecw_job_def *job, const struct ecw_audit_run_opts *o) ECW_MUST_USE;

#endif
