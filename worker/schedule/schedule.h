/* SPDX-License-Identifier: MIT */
/* schedule.h - running `schedules:`: jobs enqueued on a timetable by the
 * worker itself (schedule.c), or audited on one (schedule_audit.c). The
 * parsed set is the configuration's (ecw_config.h, worker/config/schedules.c);
 * the runtime's scheduler (ecw_schedule_runner_new / _free) keeps what one
 * replica learnt between ticks and reads the set without owning it, and so
 * does its auditor. The period math (schedule_window.c) is exposed for
 * tests. */
#ifndef ECW_SCHEDULE_H
#define ECW_SCHEDULE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ecw_config.h"
#include "ecw_storage.h"

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

#endif
