/* SPDX-License-Identifier: MIT */
/* schedule.c - the scheduler each replica ticks on its own thread (see
 * schedule.h). The `schedules:` section it runs is the configuration's
 * (worker/config/schedules.c); a window's period math, marker times, log
 * lines and release are schedule_window.c's.
 *
 * Each window (a schedule's period) is enqueued once across replicas by
 * claiming it first: a marker entity in worker.schedule_table, PartitionKey
 * the schedule's name, RowKey the period's start. Insert fails with 409 for
 * every replica but one. The claimant enqueues the window's messages, then
 * merges Done=true (If-Match its claim's ETag).
 *
 * Crash safety, one step at a time (the claim is a lease of
 * worker.schedule_lease, measured from ClaimedAt in real time):
 *   - dies before the insert: nothing was written; the window is still due
 *     and the next tick of any replica claims it.
 *   - dies after the insert, before or while enqueueing: the marker stays
 *     not done. Once it is older than the lease, another replica (or this one
 *     restarted) takes it over with If-Match on the ETag it read, so of two
 *     replicas seeing the same stale claim only one wins (412 for the other),
 *     and enqueues the whole window again. The messages put before the crash
 *     are put twice: the jobs converge (a rollup recomputes its window, a
 *     purge finds nothing more to delete), so duplicates are harmless, while
 *     a lost window would not be.
 *   - dies after enqueueing, before Done: the same takeover, the same
 *     harmless duplicates.
 *   - dies after Done: the window is finished; nobody touches it again.
 * A claimant still enqueueing when its lease runs out (a huge for_each table)
 * may be taken over while alive: both enqueue (harmless), and its own Done
 * then fails with 412, which it logs and leaves to the new claimant. A replica
 * stopping in the middle of a window, or failing to enqueue, deletes its
 * marker (If-Match) so the window is redone at once instead of after the
 * lease.
 *
 * An audit schedule (audit: JOB) claims its windows the same way, but puts
 * no message: the claim goes to this replica's auditor
 * (worker/schedule/schedule_audit.c, where its crash safety is argued), which runs
 * the audit, renews the claim meanwhile, and marks the window done with its
 * result; while it runs, this replica claims no other audit window.
 *
 * Catch-up: a tick looks at the latest catch_up periods whose firing is due,
 * oldest first, and does those without a Done marker; older ones are left
 * for good. Periods known done are remembered so an idle tick sends nothing. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_buf.h"
#include "ecw_clock.h"
#include "ecw_entity.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "ecw_crash.h"
#include "ecw_version.h"
#include "message.h"
#include "telemetry.h"
#include "schedule.h"
#include "schedule_private.h"

#define ERROR_WAIT_MS 5000
#define TICK_MS 1000
/* How often each replica reads the audits' latest results, and over how many
 * periods back (at least; catch_up when more). */
#define AUDIT_SHOW_MS 60000
#define AUDIT_SHOW_PERIODS 3
/* Distinct for_each values held while a window is enqueued. */
#define MAX_VALUES 1000000

/* ---- the scheduler ------------------------------------------------------------ */

struct ecw_scheduler {
	const struct ecw_config *cfg;
	const struct ecw_schedule_set *set;
	int64_t **done; /* per schedule: catch_up period starts known done (INT64_MIN: empty) */
	struct ecw_schedule_audit *auditor;
	int64_t show_audits_ms; /* when the audits' results are read next (ecw_clock_now_ms) */
};

int ecw_schedule_runner_new(struct ecw_scheduler **out, const struct ecw_config *cfg,
			    struct ecw_schedule_audit *auditor)
{
	struct ecw_scheduler *s = calloc(1, sizeof(*s));
	size_t n = ecw_schedules_count(cfg->schedules);

	*out = NULL;
	if (!s || !(s->done = calloc(n ? n : 1, sizeof(*s->done))))
		goto oom;
	s->cfg = cfg;
	s->set = cfg->schedules;
	s->auditor = auditor;
	for (size_t i = 0; i < n; i++) {
		size_t k = (size_t)ecw_schedules_get(s->set, i)->catch_up;
		if (!(s->done[i] = malloc(k * sizeof(**s->done))))
			goto oom;
		for (size_t j = 0; j < k; j++)
			s->done[i][j] = INT64_MIN;
	}
	*out = s;
	return 0;
oom:
	ecw_schedule_runner_free(s);
	return ecw_error_set(ECW_ENOMEM, "out of memory");
}

void ecw_schedule_runner_free(struct ecw_scheduler *s)
{
	if (!s)
		return;
	for (size_t i = 0; s->done && i < ecw_schedules_count(s->set); i++)
		free(s->done[i]);
	free(s->done);
	free(s);
}

static bool known_done(const int64_t *done, int k, int64_t p)
{
	for (int i = 0; i < k; i++)
		if (done[i] == p)
			return true;
	return false;
}

/* Replaces the oldest entry: older periods drop out of the catch-up list first. */
static void remember_done(int64_t *done, int k, int64_t p)
{
	int oldest = 0;

	if (known_done(done, k, p))
		return;
	for (int i = 1; i < k; i++)
		if (done[i] < done[oldest])
			oldest = i;
	done[oldest] = p;
}

static int value_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The distinct for_each values, sorted, into *out (n strings; free each and
 * the array). Entities without the field as a string are skipped (counted
 * in *skipped). */
static int collect_values(char ***out, size_t *n, size_t *skipped, struct ecw_client *c,
			  const struct ecw_schedule *sc, const atomic_bool *stopping)
{
	struct ecw_query_options qo = {sc->filter, sc->field, 0, 0};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	char **v = NULL;
	size_t cap = 0, k = 0;
	int err;

	*out = NULL;
	*n = *skipped = 0;
	if ((err = ecw_table_query_new(&q, c, sc->table, &qo)) < 0)
		goto done;
	while ((err = ecw_table_query_next(&e, q)) == 0 && e) {
		const char *val = NULL;
		const struct ecw_prop *p;
		if (strcmp(sc->field, "PartitionKey") == 0)
			val = ecw_entity_pk(e);
		else if (strcmp(sc->field, "RowKey") == 0)
			val = ecw_entity_rk(e);
		else if ((p = ecw_entity_get(e, sc->field)) && p->type == ECW_EDM_STRING)
			val = p->v.s;
		if (!val) {
			(*skipped)++;
		} else {
			if (k == cap) {
				char **nv;
				if (cap >= MAX_VALUES) {
					err = ecw_error_set(ECW_ETOOLARGE, "for_each: more than %d entities",
							    MAX_VALUES);
					goto done;
				}
				cap = cap ? cap * 2 : 64;
				if (!(nv = realloc(v, cap * sizeof(*v)))) {
					err = ecw_error_set(ECW_ENOMEM, "out of memory");
					goto done;
				}
				v = nv;
			}
			if (!(v[k] = strdup(val))) {
				err = ecw_error_set(ECW_ENOMEM, "out of memory");
				goto done;
			}
			k++;
		}
		ecw_entity_free(e);
		e = NULL;
		if (atomic_load(stopping)) {
			err = ecw_error_set(ECW_ETRANSIENT, "stopping");
			goto done;
		}
	}
	if (err < 0)
		goto done;
	if (k > 1) {
		size_t w = 1;
		qsort(v, k, sizeof(*v), value_cmp);
		for (size_t i = 1; i < k; i++) {
			if (strcmp(v[i], v[w - 1]) == 0)
				free(v[i]);
			else
				v[w++] = v[i];
		}
		k = w;
	}
done:
	ecw_entity_free(e);
	ecw_table_query_free(q);
	if (err < 0) {
		for (size_t i = 0; i < k; i++)
			free(v[i]);
		free(v);
		return err;
	}
	*out = v;
	*n = k;
	return 0;
}

static int put_message(struct ecw_client *c, const struct ecw_config *cfg, const struct ecw_schedule *sc,
		       const char *id, const char *value, const char *window_start)
{
	struct ecw_queue_put_options po = {0, cfg->worker.message_ttl_s};
	struct ecw_buf text, fv, fw;
	char *fields[3] = {NULL, NULL, NULL};
	size_t nf = 0;
	int err;

	ecw_buf_init(&text, ECW_QUEUE_MAX_TEXT);
	ecw_buf_init(&fv, ECW_QUEUE_MAX_TEXT);
	ecw_buf_init(&fw, 128);
	if (value) {
		if ((err = ecw_buf_printf(&fv, "%s=%s", sc->as, value)) < 0)
			goto done;
		fields[nf++] = fv.ptr;
	}
	if (window_start) {
		if ((err = ecw_buf_printf(&fw, "window_start=%s", window_start)) < 0)
			goto done;
		fields[nf++] = fw.ptr;
	}
	if ((err = ecw_message_encode(&text, sc->job, NULL, NULL, id, fields, false)) < 0)
		goto done;
	err = ecw_queue_put(NULL, c, cfg->worker.queue, text.ptr, text.len, &po);
done:
	ecw_buf_dispose(&text);
	ecw_buf_dispose(&fv);
	ecw_buf_dispose(&fw);
	return err;
}

/* Puts the window's messages; *count says how many went out. */
static int enqueue_window(size_t *count, struct ecw_client *c, const struct ecw_config *cfg,
			  const struct ecw_schedule *sc, int64_t period, const char *rk,
			  const atomic_bool *stopping)
{
	char ws[32], id[128];
	const char *window_start = NULL;
	char **values = NULL;
	size_t n = 0, skipped = 0;
	int err = 0;

	*count = 0;
	snprintf(id, sizeof(id), "schedule:%s:%s", sc->name, rk);
	if (sc->window != ECW_WINDOW_NONE) {
		if ((err = ecw_schedule_window_start(ws, sizeof(ws), period, sc->every_ms, sc->window)) < 0)
			return err;
		window_start = ws;
	}
	if (!sc->table) {
		if ((err = put_message(c, cfg, sc, id, NULL, window_start)) == 0)
			*count = 1;
		return err;
	}
	if ((err = collect_values(&values, &n, &skipped, c, sc, stopping)) < 0)
		return err;
	if (skipped) {
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "schedule_skipped_entities");
		ecw_log_str(l, "schedule", sc->name);
		ecw_log_str(l, "window", rk);
		ecw_log_str(l, "table", sc->table);
		ecw_log_str(l, "field", sc->field);
		ecw_log_int(l, "entities", (int64_t)skipped);
		ecw_log_str(l, "reason", "no such String property");
		ecw_log_end(l);
	}
	for (size_t i = 0; i < n && err == 0; i++) {
		if (atomic_load(stopping))
			err = ecw_error_set(ECW_ETRANSIENT, "stopping");
		else if ((err = put_message(c, cfg, sc, id, values[i], window_start)) == 0)
			(*count)++;
	}
	for (size_t i = 0; i < n; i++)
		free(values[i]);
	free(values);
	return err;
}

/* Claims the window (insert, or takeover of a stale claim) into *etag.
 * Returns 1 when claimed, 0 when another replica holds or finished it, <0
 * on a storage error. */
static int claim(char **etag, bool *takeover, struct ecw_client *c, const struct ecw_config *cfg,
		 const struct ecw_schedule *sc, const char *rk, const struct ecw_entity *marker)
{
	struct ecw_entity *e = NULL;
	char at[48];
	int64_t now = ecw_clock_wall_ms(), claimed_ms = 0;
	const struct ecw_prop *p;
	int32_t claims = 1;
	int err;

	*etag = NULL;
	*takeover = marker != NULL;
	if (marker) {
		int64_t age_real;
		p = ecw_entity_get(marker, "ClaimedAt");
		/* An unreadable claim counts as stale: it can only have come from
		 * a replica that is not this code. */
		age_real = p && p->type == ECW_EDM_DATETIME && ecw_schedule_parse_iso(&claimed_ms, p->v.s)
				   ? (now - claimed_ms) / ecw_clock_wall_scale()
				   : INT64_MAX;
		if (age_real < cfg->worker.schedule_lease_ms) {
			ecw_schedule_log_window(ECW_LOG_DEBUG, "schedule_skipped", sc, rk, "claimed");
			return 0;
		}
		if ((p = ecw_entity_get(marker, "Claims")) && p->type == ECW_EDM_INT32 &&
		    p->v.i32 < INT32_MAX)
			claims = p->v.i32 + 1;
		else
			claims = 2;
	}
	if ((err = ecw_schedule_iso_time(at, sizeof(at), now)) < 0 ||
	    (err = ecw_entity_new(&e, sc->name, rk)) < 0 ||
	    (err = ecw_entity_set_string(e, "ClaimedBy", ecw_version_worker_id(),
					 strlen(ecw_version_worker_id()))) < 0 ||
	    (err = ecw_entity_set_datetime(e, "ClaimedAt", at)) < 0 ||
	    (err = ecw_entity_set_int32(e, "Claims", claims)) < 0 ||
	    (err = ecw_entity_set_bool(e, "Done", false)) < 0)
		goto done;
	if (marker)
		err = ecw_table_write(etag, c, cfg->worker.schedule_table, e, ECW_WRITE_MERGE,
				      ecw_entity_etag(marker));
	else
		err = ecw_table_write(etag, c, cfg->worker.schedule_table, e, ECW_WRITE_INSERT, NULL);
	if (err == ECW_ECONFLICT || err == ECW_EPRECONDITION) {
		ecw_schedule_log_window(ECW_LOG_DEBUG, "schedule_skipped", sc, rk,
					marker ? "taken over elsewhere" : "claimed");
		err = 0;
		goto done;
	}
	if (err < 0)
		goto done;
	if (marker) {
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "schedule_takeover");
		p = ecw_entity_get(marker, "ClaimedBy");
		ecw_log_str(l, "schedule", sc->name);
		ecw_log_str(l, "window", rk);
		ecw_log_str(l, "previous_claimant", p && p->type == ECW_EDM_STRING ? p->v.s : NULL);
		ecw_log_int(l, "claims", claims);
		ecw_log_str(l, "worker", ecw_version_worker_id());
		ecw_log_end(l);
	}
	err = 1;
done:
	ecw_entity_free(e);
	return err;
}

/* Marks the window done, or (failed or stopping) gives the claim back. */
static void finish(struct ecw_client *c, const struct ecw_config *cfg, const struct ecw_schedule *sc,
		   const char *rk, const char *etag, size_t count, bool ok)
{
	struct ecw_entity *e = NULL;
	char at[48];
	int err;

	if (!ok) {
		ecw_schedule_release(c, cfg, sc, rk, etag);
		return;
	}
	if ((err = ecw_schedule_iso_time(at, sizeof(at), ecw_clock_wall_ms())) < 0 ||
	    (err = ecw_entity_new(&e, sc->name, rk)) < 0 ||
	    (err = ecw_entity_set_bool(e, "Done", true)) < 0 ||
	    (err = ecw_entity_set_int64(e, "Enqueued", (int64_t)count)) < 0 ||
	    (err = ecw_entity_set_datetime(e, "DoneAt", at)) < 0)
		goto done;
	err = ecw_table_write(NULL, c, cfg->worker.schedule_table, e, ECW_WRITE_MERGE, etag);
	if (err == ECW_EPRECONDITION || ecw_error_is_absent(err))
		/* Taken over after the lease ran out: the new claimant enqueues
		 * the window again and marks it done. */
		ecw_schedule_log_window(ECW_LOG_WARN, "schedule_lease_lost", sc, rk,
					"taken over before done");
	else if (err < 0)
		ecw_schedule_log_error("schedule.done", sc, rk);
done:
	ecw_entity_free(e);
}

/* Runs one due window whose marker (NULL: none) was read this tick. Returns
 * 1 when it is done (by anyone, as far as this replica knows), 0 when not,
 * <0 on a storage error. */
static int run_window(struct ecw_client *c, const struct ecw_config *cfg, const struct ecw_schedule *sc,
		      int64_t period, const char *rk, const struct ecw_entity *marker,
		      struct ecw_schedule_audit *auditor, const atomic_bool *stopping)
{
	const struct ecw_prop *done = marker ? ecw_entity_get(marker, "Done") : NULL;
	char *etag = NULL;
	bool takeover;
	size_t count = 0;
	int r, err;

	if (done && done->type == ECW_EDM_BOOLEAN && done->v.b) {
		ecw_schedule_log_window(ECW_LOG_DEBUG, "schedule_skipped", sc, rk, "done");
		if (sc->audit)
			ecw_schedule_audit_show(sc, marker);
		return 1;
	}
	/* One audit at a time per replica: claim no window it cannot start. */
	if (sc->audit && !ecw_schedule_audit_idle(auditor)) {
		ecw_schedule_log_window(ECW_LOG_DEBUG, "schedule_skipped", sc, rk, "an audit runs here");
		return 0;
	}
	if ((r = claim(&etag, &takeover, c, cfg, sc, rk, marker)) <= 0) {
		if (r < 0)
			ecw_schedule_log_error(marker ? "schedule.takeover" : "schedule.claim", sc, rk);
		return r;
	}
	ecw_crash_point("schedule.claimed");
	if (sc->audit) {
		/* The auditor's thread marks it done (or gives it back). */
		if (!ecw_schedule_audit_take(auditor, sc, rk, etag, takeover)) {
			ecw_schedule_release(c, cfg, sc, rk, etag);
			free(etag);
		}
		return 0;
	}
	err = enqueue_window(&count, c, cfg, sc, period, rk, stopping);
	if (err == 0)
		ecw_crash_point("schedule.enqueued");
	else if (!atomic_load(stopping))
		ecw_schedule_log_error("schedule.enqueue", sc, rk);
	finish(c, cfg, sc, rk, etag, count, err == 0);
	free(etag);
	if (err < 0)
		return err;
	ecw_metrics_scheduled(sc->name, (int64_t)count);
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "schedule_enqueued");
	char ws[32];
	ecw_log_str(l, "schedule", sc->name);
	ecw_log_str(l, "job", sc->job);
	ecw_log_str(l, "window", rk);
	if (sc->window != ECW_WINDOW_NONE &&
	    ecw_schedule_window_start(ws, sizeof(ws), period, sc->every_ms, sc->window) == 0)
		ecw_log_str(l, "window_start", ws);
	ecw_log_int(l, "count", (int64_t)count);
	ecw_log_bool(l, "takeover", takeover);
	ecw_log_str(l, "worker", ecw_version_worker_id());
	ecw_log_end(l);
	return 1;
}

/* Reads the markers of the due periods from the first on. *markers[i] is the
 * marker of due[i] or NULL. */
static int read_markers(struct ecw_entity **markers, struct ecw_client *c, const struct ecw_config *cfg,
			const struct ecw_schedule *sc, const char (*keys)[32], size_t n)
{
	struct ecw_query_options qo = {NULL, NULL, 0, 0};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	struct ecw_buf f;
	int err;

	ecw_buf_init(&f, 1024);
	if ((err = ecw_buf_printf(&f, "PartitionKey eq ")) < 0 ||
	    (err = ecw_escape_filter_string(&f, sc->name)) < 0 ||
	    (err = ecw_buf_printf(&f, " and RowKey ge ")) < 0 ||
	    (err = ecw_escape_filter_string(&f, keys[0])) < 0)
		goto done;
	qo.filter = ecw_buf_cstr(&f);
	if ((err = ecw_table_query_new(&q, c, cfg->worker.schedule_table, &qo)) < 0)
		goto done;
	while ((err = ecw_table_query_next(&e, q)) == 0 && e) {
		for (size_t i = 0; i < n && e; i++)
			if (!markers[i] && strcmp(ecw_entity_rk(e), keys[i]) == 0) {
				markers[i] = e;
				e = NULL;
			}
		ecw_entity_free(e);
		e = NULL;
	}
done:
	ecw_table_query_free(q);
	ecw_buf_dispose(&f);
	return err;
}

static int tick_one(struct ecw_scheduler *s, size_t idx, struct ecw_client *c, const atomic_bool *stopping)
{
	const struct ecw_schedule *sc = ecw_schedules_get(s->set, idx);
	size_t k = (size_t)sc->catch_up, n;
	int64_t *due = NULL;
	char(*keys)[32] = NULL;
	struct ecw_entity **markers = NULL;
	bool pending = false;
	int err = 0;

	if (!(due = calloc(k, sizeof(*due))) || !(keys = calloc(k, sizeof(*keys))) ||
	    !(markers = calloc(k, sizeof(*markers)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	n = ecw_schedule_due(due, k, ecw_clock_wall_ms(), sc->every_ms, sc->at_ms);
	for (size_t i = 0; i < n; i++) {
		if ((err = ecw_schedule_marker_key(keys[i], sizeof(keys[i]), due[i])) < 0)
			goto done;
		pending |= !known_done(s->done[idx], sc->catch_up, due[i]);
	}
	if (!pending)
		goto done;
	if ((err = read_markers(markers, c, s->cfg, sc, (const char(*)[32])keys, n)) < 0) {
		ecw_schedule_log_error("schedule.read", sc, keys[0]);
		goto done;
	}
	for (size_t i = 0; i < n && !atomic_load(stopping); i++) {
		int r;
		if (known_done(s->done[idx], sc->catch_up, due[i]))
			continue;
		if ((r = run_window(c, s->cfg, sc, due[i], keys[i], markers[i], s->auditor, stopping)) < 0) {
			err = r;
			break;
		}
		if (r == 1)
			remember_done(s->done[idx], sc->catch_up, due[i]);
	}
done:
	for (size_t i = 0; markers && i < k; i++)
		ecw_entity_free(markers[i]);
	free(markers);
	free(keys);
	free(due);
	return err;
}

int64_t ecw_schedule_runner_tick(struct ecw_scheduler *s, struct ecw_client *c, const atomic_bool *stopping)
{
	int64_t wait = TICK_MS, now, scale = ecw_clock_wall_scale();
	bool failed = false;

	/* Every replica shows the audits' latest results, whoever ran them:
	 * read at start, then about once a minute (one query per audit
	 * schedule); a window seen done in between shows its own at once. */
	if (ecw_clock_now_ms() >= s->show_audits_ms) {
		s->show_audits_ms = ecw_clock_now_ms() + AUDIT_SHOW_MS;
		for (size_t i = 0; i < ecw_schedules_count(s->set) && !atomic_load(stopping); i++)
			if (ecw_schedules_get(s->set, i)->audit &&
			    ecw_schedule_audit_read(c, s->cfg, ecw_schedules_get(s->set, i),
						    AUDIT_SHOW_PERIODS) < 0) {
				ecw_schedule_log_error("schedule.audit_read", ecw_schedules_get(s->set, i),
						       NULL);
				failed = true;
			}
	}
	for (size_t i = 0; i < ecw_schedules_count(s->set) && !atomic_load(stopping); i++)
		failed |= tick_one(s, i, c, stopping) < 0;
	if (failed)
		return ERROR_WAIT_MS;
	/* Wake at the next firing when it comes before the next second. */
	now = ecw_clock_wall_ms();
	for (size_t i = 0; i < ecw_schedules_count(s->set); i++) {
		const struct ecw_schedule *sc = ecw_schedules_get(s->set, i);
		int64_t next =
			ecw_schedule_period_start(now - sc->at_ms, sc->every_ms) + sc->every_ms + sc->at_ms;
		int64_t real = (next - now) / scale + 1;
		if (real < wait)
			wait = real;
	}
	return wait < 1 ? 1 : wait;
}
