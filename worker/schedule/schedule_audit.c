/* SPDX-License-Identifier: MIT */
/* schedule_audit.c - the audit windows of `schedules:` (audit: JOB): the
 * replica that claims a window (worker/schedule/schedule.c, as for any schedule) hands
 * it to its auditor, a thread of its own with a storage client of its own,
 * which runs the job's audit (worker/schedule/audit_run.c) paced at the schedule's
 * rate, writes the result into the window's marker and shows it on /metrics.
 * One audit at a time per replica: while one runs, the scheduler claims no
 * other audit window, which waits for the next tick (of this replica or
 * another). Every replica shows the latest result per audited job, read from
 * the markers (ecw_schedule_audit_read, ecw_schedule_audit_show).
 *
 * The claim while the audit runs: an audit may take far longer than
 * worker.schedule_lease, so the claimant RENEWS it: before a storage request
 * of the audit, once a third of the lease has passed since the last renewal,
 * it merges a new ClaimedAt If-Match the claim's ETag. Renewing keeps what a
 * window promises today, at least once: a claimant that dies stops renewing,
 * its claim goes stale after the lease and another replica takes the window
 * over and audits it again. Marking the window done at the start instead
 * would make a crash lose that period's audit (at most once), and leave the
 * marker without a result. A second audit of one window is harmless: an
 * audit only reads, and its repairs are the job's own convergent runs. The
 * renewal rides on the audit's own requests, which come at least once a
 * second (rate >= 1), far within a lease (1s at the least, 2m by default);
 * only a storage call stuck longer than the lease (request_timeout and its
 * retries against a lease of a few seconds) lets the claim go stale while
 * alive. Then the renewal, or the final write, fails with 412: the audit
 * stops (or its result is dropped) and the new claimant's counts.
 *
 * Crash safety, one step at a time:
 *   - dies after the claim, before or during the audit: the marker stays not
 *     done, stops being renewed, and is taken over after the lease; the
 *     audit runs again from the start. Repairs it made are done for good
 *     (each is the job's own run), so the second audit finds less.
 *   - dies after the audit, before the result is written: the same.
 *   - dies after the result is written (Done with the counts, one merge):
 *     the window is finished.
 * At shutdown the audit stops before its next request (the runtime's
 * stopping flag), and the window is given back (the marker deleted
 * If-Match), so another replica audits it at once; so is a window whose
 * audit failed, after which this replica takes no audit for
 * AUDIT_RETRY_MS (an audit failing at once would otherwise be retried
 * every tick). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "ecw_audit.h"
#include "ecw_buf.h"
#include "ecw_clock.h"
#include "ecw_codec.h"
#include "ecw_entity.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "ecw_version.h"
#include "telemetry.h"
#include "schedule_private.h"

#define AUDIT_RETRY_MS 60000              /* after a failed audit, no other for this long */
#define AUDIT_IDLE_POLL_MS 250            /* how often an idle auditor looks for a window, or a stop */
#define AUDIT_STOP_POLL_MS 20             /* how often shutdown looks whether it has stopped */
#define EXAMPLE_MAX (3 * 4 * ECW_KEY_MAX) /* one finding's table and keys, escaped */

/* The marker's result properties, by kind (Int64). */
static const char *const found_props[ECW_AUDIT_KINDS] = {"Missing", "Stale", "Orphan", "Conflict"};
static const char *const repaired_props[ECW_AUDIT_KINDS] = {"RepairedMissing", "RepairedStale",
							    "RepairedOrphan", "RepairedConflict"};

/* The window in hand. */
struct window {
	const struct ecw_schedule *sc;
	char rk[32];
	char *etag; /* the claim's, renewed */
	bool takeover;
	int64_t renewed_ms; /* ecw_clock_now_ms of the last claim or renewal */
	bool lost;          /* another replica took the window over */
	struct ecw_buf example[ECW_AUDIT_KINDS];
};

struct ecw_schedule_audit {
	const struct ecw_config *cfg;
	struct ecw_client *client;
	const atomic_bool *stopping;
	pthread_t tid;
	bool started;
	pthread_mutex_t mu;
	/* Under mu. */
	bool busy;           /* w holds a window */
	bool quit;           /* free: leave now */
	bool exited;         /* the thread left its loop */
	int64_t retry_at_ms; /* no window before (ecw_clock_now_ms) */
	struct window w;     /* the thread's while busy */
};

/* ---- the result on /metrics ---------------------------------------------------------------------- */

static uint64_t int_prop(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);

	return p && p->type == ECW_EDM_INT64 && p->v.i64 > 0 ? (uint64_t)p->v.i64 : 0;
}

static void show(const char *job, int64_t finished_ms, const struct ecw_audit_counts *c)
{
	const char *kinds[ECW_AUDIT_KINDS];
	uint64_t drift[ECW_AUDIT_KINDS];

	for (int k = 0; k < ECW_AUDIT_KINDS; k++) {
		kinds[k] = ecw_audit_kind_name(k);
		drift[k] = ecw_audit_drift(c, k);
	}
	ecw_metrics_audit(job, finished_ms / 1000, kinds, drift, ECW_AUDIT_KINDS);
}

void ecw_schedule_audit_show(const struct ecw_schedule *sc, const struct ecw_entity *marker)
{
	const struct ecw_prop *p = ecw_entity_get(marker, "FinishedAt");
	struct ecw_audit_counts c = {0};
	int64_t finished_ms;

	if (!p || p->type != ECW_EDM_DATETIME || !ecw_schedule_parse_iso(&finished_ms, p->v.s))
		return; /* done by code that wrote no result */
	c.checked = int_prop(marker, "Checked");
	c.repaired = int_prop(marker, "Repaired");
	for (int k = 0; k < ECW_AUDIT_KINDS; k++) {
		c.found[k] = int_prop(marker, found_props[k]);
		c.repaired_kind[k] = int_prop(marker, repaired_props[k]);
	}
	show(sc->job, finished_ms, &c);
}

int ecw_schedule_audit_read(struct ecw_client *c, const struct ecw_config *cfg, const struct ecw_schedule *sc,
			    int periods)
{
	struct ecw_query_options qo = {0};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	struct ecw_buf f;
	char from[32];
	int64_t n = sc->catch_up > periods ? sc->catch_up : periods;
	int64_t last = ecw_schedule_period_start(ecw_clock_wall_ms() - sc->at_ms, sc->every_ms);
	int err;

	ecw_buf_init(&f, 1024);
	if ((err = ecw_schedule_marker_key(from, sizeof(from), last - (n - 1) * sc->every_ms)) < 0 ||
	    (err = ecw_buf_adds(&f, "PartitionKey eq ")) < 0 ||
	    (err = ecw_escape_filter_string(&f, sc->name)) < 0 ||
	    (err = ecw_buf_adds(&f, " and RowKey ge ")) < 0 ||
	    (err = ecw_escape_filter_string(&f, from)) < 0 ||
	    (err = ecw_buf_adds(&f, " and Done eq true")) < 0)
		goto done;
	qo.filter = ecw_buf_cstr(&f);
	if ((err = ecw_table_query_new(&q, c, cfg->worker.schedule_table, &qo)) < 0)
		goto done;
	/* ecw_metrics_audit keeps the newest of what it is shown. */
	while ((err = ecw_table_query_next(&e, q)) == 0 && e) {
		ecw_schedule_audit_show(sc, e);
		ecw_entity_free(e);
		e = NULL;
	}
	if (err == ECW_ENOTABLE) {
		ecw_error_clear();
		err = 0;
	}
done:
	ecw_table_query_free(q);
	ecw_buf_dispose(&f);
	return err;
}

/* ---- one window ---------------------------------------------------------------------------------- */

/* audit_run's on_request: renews the claim once a third of the lease has
 * passed; false once the window was taken over (the audit stops). A
 * renewal that fails otherwise is tried again before the next request. */
static bool keep_claim(void *payload)
{
	struct ecw_schedule_audit *a = payload;
	struct window *w = &a->w;
	struct ecw_entity *e = NULL;
	char at[48], *etag = NULL;
	int err;

	if (ecw_clock_now_ms() - w->renewed_ms < a->cfg->worker.schedule_lease_ms / 3)
		return true;
	if ((err = ecw_schedule_iso_time(at, sizeof(at), ecw_clock_wall_ms())) < 0 ||
	    (err = ecw_entity_new(&e, w->sc->name, w->rk)) < 0 ||
	    (err = ecw_entity_set_datetime(e, "ClaimedAt", at)) < 0)
		goto done;
	err = ecw_table_write(&etag, a->client, a->cfg->worker.schedule_table, e, ECW_WRITE_MERGE, w->etag);
	if (err == 0) {
		free(w->etag);
		w->etag = etag;
		w->renewed_ms = ecw_clock_now_ms();
	} else if (err == ECW_EPRECONDITION || ecw_error_is_absent(err)) {
		w->lost = true;
		ecw_schedule_log_window(ECW_LOG_WARN, "schedule_lease_lost", w->sc, w->rk,
					"taken over while the audit ran: it stops");
	}
done:
	if (err < 0 && !w->lost && !atomic_load(a->stopping))
		ecw_schedule_log_error("schedule.audit_renew", w->sc, w->rk);
	ecw_error_clear();
	ecw_entity_free(e);
	return !w->lost;
}

/* audit_run's on_finding: the first finding of each kind, its table and keys
 * escaped (keys are the data's, and may hold anything a terminal obeys). */
static void keep_example(const struct ecw_audit_finding *f, void *payload)
{
	struct ecw_schedule_audit *a = payload;
	struct ecw_buf *b = &a->w.example[f->kind];

	if (b->len > 0)
		return;
	if (ecw_term_escape(b, f->table ? f->table : "?", f->table ? strlen(f->table) : 1) < 0 ||
	    ecw_buf_addc(b, ' ') < 0 ||
	    ecw_term_escape(b, f->pk ? f->pk : "", f->pk ? strlen(f->pk) : 0) < 0 ||
	    ecw_buf_addc(b, '/') < 0 || ecw_term_escape(b, f->rk ? f->rk : "", f->rk ? strlen(f->rk) : 0) < 0)
		ecw_buf_reset(b); /* too long: no example rather than half of one */
}

/* Merges the result and Done If-Match the claim: false when the window was
 * taken over meanwhile (the result is the new claimant's to write). */
static bool write_result(struct ecw_schedule_audit *a, const struct ecw_audit_counts *c, int64_t finished_ms)
{
	struct window *w = &a->w;
	struct ecw_entity *e = NULL;
	char at[48];
	int err;

	if ((err = ecw_schedule_iso_time(at, sizeof(at), finished_ms)) < 0 ||
	    (err = ecw_entity_new(&e, w->sc->name, w->rk)) < 0 ||
	    (err = ecw_entity_set_bool(e, "Done", true)) < 0 ||
	    (err = ecw_entity_set_datetime(e, "DoneAt", at)) < 0 ||
	    (err = ecw_entity_set_datetime(e, "FinishedAt", at)) < 0 ||
	    (err = ecw_entity_set_bool(e, "Repair", w->sc->repair)) < 0 ||
	    (err = ecw_entity_set_int64(e, "Checked", (int64_t)c->checked)) < 0 ||
	    (err = ecw_entity_set_int64(e, "Repaired", (int64_t)c->repaired)) < 0)
		goto done;
	for (int k = 0; k < ECW_AUDIT_KINDS && err == 0; k++)
		if ((err = ecw_entity_set_int64(e, found_props[k], (int64_t)c->found[k])) == 0)
			err = ecw_entity_set_int64(e, repaired_props[k], (int64_t)c->repaired_kind[k]);
	if (err == 0)
		err = ecw_table_write(NULL, a->client, a->cfg->worker.schedule_table, e, ECW_WRITE_MERGE,
				      w->etag);
	if (err == ECW_EPRECONDITION || ecw_error_is_absent(err)) {
		ecw_schedule_log_window(ECW_LOG_WARN, "schedule_lease_lost", w->sc, w->rk,
					"taken over before done: the new claimant's result stands");
		w->lost = true;
		err = 0;
	}
done:
	if (err < 0)
		ecw_schedule_log_error("schedule.audit_done", w->sc, w->rk);
	ecw_error_clear();
	ecw_entity_free(e);
	return err == 0 && !w->lost;
}

static void log_finished(struct window *w, const struct ecw_audit_counts *c, int64_t ms)
{
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "audit_finished");

	ecw_log_str(l, "schedule", w->sc->name);
	ecw_log_str(l, "job", w->sc->job);
	ecw_log_str(l, "window", w->rk);
	ecw_log_bool(l, "repair", w->sc->repair);
	ecw_log_int(l, "checked", (int64_t)c->checked);
	for (int k = 0; k < ECW_AUDIT_KINDS; k++)
		ecw_log_int(l, ecw_audit_kind_name(k), (int64_t)c->found[k]);
	ecw_log_int(l, "repaired", (int64_t)c->repaired);
	for (int k = 0; k < ECW_AUDIT_KINDS; k++) {
		char key[32];
		snprintf(key, sizeof(key), "example_%s", ecw_audit_kind_name(k));
		if (w->example[k].len)
			ecw_log_str(l, key, ecw_buf_cstr(&w->example[k]));
	}
	ecw_log_int(l, "duration_ms", ms);
	ecw_log_bool(l, "takeover", w->takeover);
	ecw_log_str(l, "worker", ecw_version_worker_id());
	ecw_log_end(l);
}

/* Runs the window in a->w to its end: result written and shown, or the
 * window given back (stopping, failed) or left to whoever took it over. */
static void run_window(struct ecw_schedule_audit *a)
{
	struct window *w = &a->w;
	const struct ecw_job_def *job = ecw_config_job(a->cfg, w->sc->job);
	struct ecw_audit_run_opts o = {.repair = w->sc->repair,
				       .cfg = a->cfg,
				       .rate = w->sc->rate,
				       .stop = a->stopping,
				       .on_request = keep_claim,
				       .on_finding = keep_example,
				       .payload = a};
	struct ecw_audit_counts c = {0};
	int64_t t0 = ecw_clock_now_ms();
	bool stopped = false;
	int err;

	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "audit_started");
	ecw_log_str(l, "schedule", w->sc->name);
	ecw_log_str(l, "job", w->sc->job);
	ecw_log_str(l, "window", w->rk);
	ecw_log_bool(l, "repair", w->sc->repair);
	ecw_log_bool(l, "takeover", w->takeover);
	ecw_log_str(l, "worker", ecw_version_worker_id());
	ecw_log_end(l);
	err = ecw_audit_run(&c, &stopped, a->client, job, &o);
	if (w->lost)
		return;
	if (err < 0 || stopped) {
		if (err < 0 && !atomic_load(a->stopping)) {
			ecw_schedule_log_error("schedule.audit", w->sc, w->rk);
			pthread_mutex_lock(&a->mu);
			a->retry_at_ms = ecw_clock_now_ms() + AUDIT_RETRY_MS;
			pthread_mutex_unlock(&a->mu);
		}
		ecw_error_clear();
		ecw_schedule_release(a->client, a->cfg, w->sc, w->rk, w->etag);
		return;
	}
	int64_t finished_ms = ecw_clock_wall_ms();
	log_finished(w, &c, ecw_clock_now_ms() - t0);
	if (write_result(a, &c, finished_ms))
		show(w->sc->job, finished_ms, &c);
}

/* ---- the thread ---------------------------------------------------------------------------------- */

/* Sleeps up to ms with a->mu released. */
static void nap(struct ecw_schedule_audit *a, int64_t ms)
{
	pthread_mutex_unlock(&a->mu);
	ecw_clock_sleep_ms(ms);
	pthread_mutex_lock(&a->mu);
}

/* Waits for a window. Polled, like the stopping flag (the runtime's signal
 * wakes its own threads, not this one): a window waits at most
 * AUDIT_IDLE_POLL_MS, nothing next to an audit's length. */
static void *audit_thread(void *p)
{
	struct ecw_schedule_audit *a = p;

	pthread_mutex_lock(&a->mu);
	for (;;) {
		while (!a->busy && !a->quit && !atomic_load(a->stopping))
			nap(a, AUDIT_IDLE_POLL_MS);
		if (!a->busy)
			break;
		pthread_mutex_unlock(&a->mu);
		run_window(a);
		pthread_mutex_lock(&a->mu);
		free(a->w.etag);
		for (int k = 0; k < ECW_AUDIT_KINDS; k++)
			ecw_buf_dispose(&a->w.example[k]);
		memset(&a->w, 0, sizeof(a->w));
		a->busy = false;
	}
	a->exited = true;
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

bool ecw_schedule_audit_idle(struct ecw_schedule_audit *a)
{
	bool idle;

	if (!a)
		return false;
	pthread_mutex_lock(&a->mu);
	idle = !a->busy && !a->exited && ecw_clock_now_ms() >= a->retry_at_ms;
	pthread_mutex_unlock(&a->mu);
	return idle;
}

bool ecw_schedule_audit_take(struct ecw_schedule_audit *a, const struct ecw_schedule *sc, const char *rk,
			     char *etag, bool takeover)
{
	pthread_mutex_lock(&a->mu);
	if (a->busy || a->exited) {
		pthread_mutex_unlock(&a->mu);
		return false;
	}
	memset(&a->w, 0, sizeof(a->w));
	a->w.sc = sc;
	snprintf(a->w.rk, sizeof(a->w.rk), "%s", rk);
	a->w.etag = etag;
	a->w.takeover = takeover;
	a->w.renewed_ms = ecw_clock_now_ms();
	for (int k = 0; k < ECW_AUDIT_KINDS; k++)
		ecw_buf_init(&a->w.example[k], EXAMPLE_MAX);
	a->busy = true;
	pthread_mutex_unlock(&a->mu);
	return true;
}

int ecw_schedule_audit_new(struct ecw_schedule_audit **out, const struct ecw_config *cfg,
			   const struct ecw_account *acct, const struct ecw_client_options *opts,
			   const atomic_bool *stopping)
{
	struct ecw_schedule_audit *a = NULL;
	size_t n = 0;
	int err;

	*out = NULL;
	for (size_t i = 0; i < ecw_schedules_count(cfg->schedules); i++) {
		const struct ecw_schedule *sc = ecw_schedules_get(cfg->schedules, i);
		if (sc->audit) {
			ecw_metrics_audit_declare(sc->job, sc->every_ms / 1000);
			n++;
		}
	}
	if (n == 0)
		return 0;
	if (!(a = calloc(1, sizeof(*a))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	a->cfg = cfg;
	a->stopping = stopping;
	pthread_mutex_init(&a->mu, NULL);
	if ((err = ecw_client_new(&a->client, acct, opts)) < 0) {
		ecw_schedule_audit_free(a);
		return err;
	}
	if (pthread_create(&a->tid, NULL, audit_thread, a) != 0) {
		ecw_schedule_audit_free(a);
		return ecw_error_set(ECW_ENOMEM, "cannot start the auditor's thread");
	}
	a->started = true;
	*out = a;
	return 0;
}

bool ecw_schedule_audit_wait(struct ecw_schedule_audit *a, int64_t deadline_ms)
{
	bool exited;

	if (!a || !a->started)
		return true;
	pthread_mutex_lock(&a->mu);
	while (!a->exited && ecw_clock_now_ms() < deadline_ms) {
		int64_t ms = deadline_ms - ecw_clock_now_ms();
		nap(a, ms > AUDIT_STOP_POLL_MS ? AUDIT_STOP_POLL_MS : ms);
	}
	exited = a->exited;
	pthread_mutex_unlock(&a->mu);
	return exited;
}

void ecw_schedule_audit_free(struct ecw_schedule_audit *a)
{
	if (!a)
		return;
	if (a->started) {
		pthread_mutex_lock(&a->mu);
		a->quit = true;
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->tid, NULL);
	}
	ecw_client_free(a->client);
	pthread_mutex_destroy(&a->mu);
	free(a);
}
