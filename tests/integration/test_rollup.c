/* SPDX-License-Identifier: MIT */
/* test_rollup.c - the rollup job type against a real Azurite: a month
 * (October 2020) of hourly water-tank readings for three devices in one
 * table (partitions tank-a_raw, tank-b_raw, tank-c_raw; RowKey = 10-digit
 * Unix seconds), some hours missing and tank-c without any reading on
 * 2020-10-10, rolled up per day ({device}_daily, RowKey yyyyMMdd) and per
 * week ({device}_weekly, the Monday's yyyyMMdd) by the worker binary
 * (build/ecworker-test) from queue messages. Every check compares what the
 * worker left with a recomputation done here from the raw rows; reruns must
 * write nothing (same ETags, no write requests in the metrics), and the
 * worker's message lines name each message's device and window. Late
 * readings and deleted raw rows come after the first pass. Crash cases stop
 * the worker dead after each step (ECW_CRASH_AT) and check a fresh worker
 * converges. A few cases call the job's run in this process, with this
 * test's client, to count its requests (a range query, not a scan), to
 * see permanent errors as the runtime would, and to hold a run between its
 * query and its write (ecw_crash_point_hook) while a late reading lands and
 * another run writes: the held run must start over, not overwrite. Last,
 * three workers race on triplicated messages and late data. */
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_config.h"
#include "ecw_job.h"
#include "jobs_private.h"

/* ---- fixture
 * ----------------------------------------------------------------------------------------------- */

/* t->table = the telemetry. */
static int fx_setup(void **state)
{
	*state = wfx_new(sizeof(struct wfx), WFX_QUEUE | WFX_TABLE);
	return 0;
}

static int fx_teardown(void **state)
{
	return wfx_teardown(state);
}

#define TABLE(x) ((x)->t->table)
#define DAY 86400LL
#define WEEK (7 * DAY)
#define OCT1 1601510400LL /* 2020-10-01T00:00:00Z, a Thursday */
#define MON0 1601251200LL /* 2020-09-28, the Monday of its week */
#define NDAYS 31
#define NWEEKS 5 /* Mondays 09-28, 10-05, 10-12, 10-19, 10-26 */

#define AGGREGATE                                                                                            \
	"{averageDepth: avg(depth), minDepth: min(depth), maxDepth: max(depth), totalDepth: sum(depth), "    \
	"samples: count()}"

static void jobs_text(char *out, size_t cap, const char *table)
{
	int k = snprintf(out, cap,
	                 "  daily:\n"
	                 "    type: rollup\n"
	                 "    source: %s\n"
	                 "    from_partition: \"{device}_raw\"\n"
	                 "    to_partition: \"{device}_daily\"\n"
	                 "    window: 1d\n"
	                 "    aggregate: " AGGREGATE "\n"
	                 "  weekly:\n"
	                 "    type: rollup\n"
	                 "    source: %s\n"
	                 "    from_partition: \"{device}_raw\"\n"
	                 "    to_partition: \"{device}_weekly\"\n"
	                 "    window: 1w\n"
	                 "    aggregate: " AGGREGATE "\n",
	                 table, table);
	assert_true(k > 0 && (size_t)k < cap);
}

/* Writes the worker's config and returns the metrics port. */
static int write_config(struct wfx *x, const char *name, int vis_s)
{
	char jobs[4096];

	jobs_text(jobs, sizeof(jobs), TABLE(x));
	return wfx_job_config(x, name, vis_s, 4, jobs);
}

/* Starts a worker, waits until `want` messages succeeded, reads its table
 * write requests from the metrics, stops it. */
static long long run_worker(struct wfx *x, const char *name, size_t want, int vis_s)
{
	return wfx_run(x, name, write_config(x, name, vis_s), want, 90000, NULL);
}

/* A worker started with ECW_CRASH_AT=point must die there (exit 86). */
static void run_until_crash(struct wfx *x, const char *name, const char *point)
{
	write_config(x, name, 1);
	wfx_run_until_crash(x, name, point);
}

/* ---- data
 * -------------------------------------------------------------------------------------------------- */

static void iso_date(char *out, size_t cap, long long s)
{
	time_t t = (time_t)s;
	struct tm tm;
	gmtime_r(&t, &tm);
	snprintf(out, cap, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

static void put_message(struct wfx *x, const char *job, const char *device, long long start)
{
	struct json_object *o = json_object_new_object();
	char ws[48];

	iso_date(ws, sizeof(ws), start);
	json_object_object_add(o, "job", json_object_new_string(job));
	json_object_object_add(o, "device", json_object_new_string(device));
	json_object_object_add(o, "window_start", json_object_new_string(ws));
	const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	ECW_ASSERT_OK(ecw_queue_put(NULL, x->t->client, x->t->queue, text, strlen(text), NULL));
	json_object_put(o);
}

static const char *const devices[] = {"tank-a", "tank-b", "tank-c"};
#define NDEV 3

/* Device dev's reading at hour h (0-based from OCT1): false when missing.
 * tank-a reads Int32, tank-b Double, tank-c Int32 and nothing on 10-10. */
static bool reading(int dev, long long h, bool *is_double, double *v)
{
	long long day = h / 24;

	*is_double = dev == 1;
	if (dev == 0) {
		*v = 100 + (double)((h * 37 + day * 11) % 50);
		return h % 17 != 5;
	}
	if (dev == 1) {
		*v = 50.25 + (double)((h * 13 + day * 7) % 40) * 0.5;
		return h % 13 != 2;
	}
	*v = 200 - (double)((h * 7) % 30);
	return day != 9 && h % 19 != 0;
}

static void raw_entity(struct ecw_entity **e, const char *device, long long s, bool is_double, double v)
{
	char pk[64], rk[32];

	snprintf(pk, sizeof(pk), "%s_raw", device);
	snprintf(rk, sizeof(rk), "%010lld", s);
	ECW_ASSERT_OK(ecw_entity_new(e, pk, rk));
	if (is_double)
		ECW_ASSERT_OK(ecw_entity_set_double(*e, "depth", v));
	else
		ECW_ASSERT_OK(ecw_entity_set_int32(*e, "depth", (int32_t)v));
	ECW_ASSERT_OK(ecw_entity_set_string(*e, "unit", "cm", 2)); /* not aggregated */
}

/* Hours [h0, h1) of device dev (as reading() says), in batches. */
static void put_readings(struct wfx *x, int dev, long long h0, long long h1)
{
	struct ecw_batch *b = NULL;

	for (long long h = h0; h < h1; h++) {
		bool dbl;
		double v;
		if (!reading(dev, h, &dbl, &v))
			continue;
		if (!b)
			ECW_ASSERT_OK(ecw_batch_new(&b, TABLE(x)));
		struct ecw_entity *e = NULL;
		raw_entity(&e, devices[dev], OCT1 + h * 3600, dbl, v);
		ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT_OR_REPLACE, e, NULL));
		ecw_entity_free(e);
		if (ecw_batch_count(b) == ECW_BATCH_MAX_OPS) {
			ECW_ASSERT_OK(ecw_batch_submit(x->t->client, b));
			ecw_batch_free(b);
			b = NULL;
		}
	}
	if (b)
		ECW_ASSERT_OK(ecw_batch_submit(x->t->client, b));
	ecw_batch_free(b);
}

static void put_one(struct wfx *x, const char *device, long long s, bool is_double, double v)
{
	struct ecw_entity *e = NULL;
	raw_entity(&e, device, s, is_double, v);
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, TABLE(x), e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

static void enqueue_all(struct wfx *x)
{
	for (int d = 0; d < NDEV; d++) {
		for (int i = 0; i < NDAYS; i++)
			put_message(x, "daily", devices[d], OCT1 + i * DAY);
		for (int w = 0; w < NWEEKS; w++)
			put_message(x, "weekly", devices[d], MON0 + w * WEEK);
	}
}

#define NMESSAGES (NDEV * (NDAYS + NWEEKS))

/* ---- the recomputation
 * ------------------------------------------------------------------------------------- */

struct want {
	long long rows, n;
	bool all_int;
	long long isum, imin, imax;
	double dsum, dmin, dmax;
};

/* What partition {device}_daily / _weekly should hold, from the raw rows,
 * compared property by property and type by type with what it holds: no
 * aggregate more or less (an empty window has none). Returns how many. */
static size_t check_recomputed(struct wfx *x, const char *device, bool weekly)
{
	char pk[64], filter[128];
	size_t nraw = 0, nagg = 0, found = 0;
	struct want w[64];
	long long w0 = weekly ? MON0 : OCT1 - 7 * DAY, len = weekly ? WEEK : DAY;

	memset(w, 0, sizeof(w));
	snprintf(filter, sizeof(filter), "PartitionKey eq '%s_raw'", device);
	struct ecw_entity **raw = itest_query_all(&nraw, x->t->client, TABLE(x), filter);
	for (size_t i = 0; i < nraw; i++) {
		long long s = strtoll(ecw_entity_rk(raw[i]), NULL, 10);
		long long k = (s - w0) / len;
		assert_true(k >= 0 && k < 64);
		struct want *a = &w[k];
		const struct ecw_prop *p = ecw_entity_get(raw[i], "depth");
		a->rows++;
		if (!p)
			continue;
		bool is_int = p->type == ECW_EDM_INT32;
		double dv = is_int ? p->v.i32 : p->v.d;
		if (a->n == 0) {
			a->all_int = true;
			a->imin = a->imax = is_int ? p->v.i32 : 0;
			a->dmin = a->dmax = dv;
		}
		a->all_int &= is_int;
		if (is_int) {
			a->isum += p->v.i32;
			a->imin = p->v.i32 < a->imin ? p->v.i32 : a->imin;
			a->imax = p->v.i32 > a->imax ? p->v.i32 : a->imax;
		}
		a->dsum += dv;
		a->dmin = fmin(a->dmin, dv);
		a->dmax = fmax(a->dmax, dv);
		a->n++;
	}
	itest_entities_free(raw, nraw);

	snprintf(pk, sizeof(pk), "%s_%s", device, weekly ? "weekly" : "daily");
	snprintf(filter, sizeof(filter), "PartitionKey eq '%s'", pk);
	struct ecw_entity **agg = itest_query_all(&nagg, x->t->client, TABLE(x), filter);
	for (long long k = 0; k < 64; k++) {
		const struct want *a = &w[k];
		char rk[32], ws[64];
		long long start = w0 + k * len;
		time_t t = (time_t)start;
		struct tm tm;
		const struct ecw_entity *e = NULL;

		gmtime_r(&t, &tm);
		snprintf(rk, sizeof(rk), "%04d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
		for (size_t i = 0; i < nagg; i++)
			if (strcmp(ecw_entity_rk(agg[i]), rk) == 0)
				e = agg[i];
		if (!a->rows) {
			ITEST_CHECK(!e, "%s/%s: an aggregate for a window without raw rows: %s", pk, rk,
			            itest_entity_json(e));
			continue;
		}
		found++;
		ITEST_CHECK(e, "%s/%s: no aggregate for %lld raw rows", pk, rk, a->rows);
		const struct ecw_prop *n = ecw_entity_get(e, "samples"),
		                      *avg = ecw_entity_get(e, "averageDepth"),
		                      *lo = ecw_entity_get(e, "minDepth"),
		                      *hi = ecw_entity_get(e, "maxDepth"),
		                      *sum = ecw_entity_get(e, "totalDepth"),
		                      *st = ecw_entity_get(e, "WindowStart");
		ITEST_CHECK(n && n->type == ECW_EDM_INT32 && n->v.i32 == a->rows,
		            "%s/%s: samples, want %lld: %s", pk, rk, a->rows, itest_entity_json(e));
		ITEST_CHECK(avg && avg->type == ECW_EDM_DOUBLE && fabs(avg->v.d - a->dsum / a->n) < 1e-9,
		            "%s/%s: averageDepth, want %.17g: %s", pk, rk, a->dsum / a->n,
		            itest_entity_json(e));
		if (a->all_int) {
			ITEST_CHECK(lo && lo->type == ECW_EDM_INT64 && lo->v.i64 == a->imin && hi &&
			                hi->type == ECW_EDM_INT64 && hi->v.i64 == a->imax && sum &&
			                sum->type == ECW_EDM_INT64 && sum->v.i64 == a->isum,
			            "%s/%s: want Int64 min %lld max %lld sum %lld: %s", pk, rk, a->imin,
			            a->imax, a->isum, itest_entity_json(e));
		} else {
			ITEST_CHECK(lo && lo->type == ECW_EDM_DOUBLE && lo->v.d == a->dmin && hi &&
			                hi->type == ECW_EDM_DOUBLE && hi->v.d == a->dmax && sum &&
			                sum->type == ECW_EDM_DOUBLE && fabs(sum->v.d - a->dsum) < 1e-6,
			            "%s/%s: want Double min %g max %g sum %.17g: %s", pk, rk, a->dmin,
			            a->dmax, a->dsum, itest_entity_json(e));
		}
		snprintf(ws, sizeof(ws), "%04d-%02d-%02dT00:00:00.0000000Z", tm.tm_year + 1900, tm.tm_mon + 1,
		         tm.tm_mday);
		ITEST_CHECK(st && st->type == ECW_EDM_DATETIME && strcmp(st->v.s, ws) == 0,
		            "%s/%s: WindowStart, want %s: %s", pk, rk, ws, itest_entity_json(e));
		ITEST_CHECK(ecw_entity_count(e) == 6, "%s/%s: extra properties: %s", pk, rk,
		            itest_entity_json(e));
	}
	ITEST_CHECK(found == nagg, "%s: %zu aggregates, expected %zu", pk, nagg, found);
	itest_entities_free(agg, nagg);
	return found;
}

static void check_all(struct wfx *x)
{
	for (int d = 0; d < NDEV; d++) {
		check_recomputed(x, devices[d], false);
		assert_int_equal(check_recomputed(x, devices[d], true), NWEEKS);
	}
}

/* Every aggregate's keys and ETag, in query order. */
static struct ecw_entity **aggregates(size_t *n, struct wfx *x)
{
	return itest_query_all(n, x->t->client, TABLE(x),
	                       "PartitionKey ge 'tank-' and PartitionKey lt 'tank.' and RowKey ge '2'");
}

static bool agg_exists(struct wfx *x, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	int err = ecw_table_get(&e, x->t->client, TABLE(x), pk, rk);
	ecw_entity_free(e);
	if (err != ECW_ENOTFOUND)
		ECW_ASSERT_OK(err);
	ecw_error_clear();
	return err == 0;
}

/* ---- 1. a month, late data, deleted rows, reruns
 * ----------------------------------------------------------- */

static void test_rollup__month_late_data_and_reruns(void **state)
{
	struct wfx *x = *state;
	size_t n1 = 0, n2 = 0;

	for (int d = 0; d < NDEV; d++)
		put_readings(x, d, 0, NDAYS * 24);
	enqueue_all(x);
	struct proc p1;
	long long writes =
	    wfx_run(x, "rollup-month-1", write_config(x, "rollup-month-1", 30), NMESSAGES, 90000, &p1);
	wfx_assert_queues_empty(x);
	check_all(x);
	/* A rollup message has no keys: its log line names the device and the
	 * window instead. */
	for (int d = 0; d < NDEV; d++)
		assert_int_equal(
		    proc_count(&p1, "message", "outcome", "succeeded", "device", devices[d], NULL),
		    NDAYS + NWEEKS);
	assert_int_equal(proc_count(&p1, "message", "job", "weekly", "device", "tank-b", "window_start",
	                            "2020-10-05", NULL),
	                 1);
	assert_int_equal(proc_count(&p1, "message", "pk", PROC_ANY, NULL), 0);
	/* One write per aggregate: 31 + 31 + 30 days (tank-c's 10-10 has no
	 * data) and 15 weeks. */
	assert_int_equal(writes, 31 + 31 + 30 + 15);
	assert_false(agg_exists(x, "tank-c_daily", "20201010"));
	assert_true(agg_exists(x, "tank-a_daily", "20201020"));

	/* Late data on days already rolled up: an hour that was missing, a
	 * corrected reading, one between two hours, one at the month's last
	 * second; and tank-a loses every raw row of 10-20. */
	put_one(x, "tank-a", OCT1 + 5 * 3600, false, 999);                   /* hour 5 was missing */
	put_one(x, "tank-a", OCT1 + 2 * DAY + 22 * 3600, false, 1);          /* replaces a reading */
	put_one(x, "tank-b", OCT1 + 14 * DAY + 12 * 3600 + 1, true, 0.125);  /* 12:00:01 */
	put_one(x, "tank-b", OCT1 + 30 * DAY + 23 * 3600 + 3599, true, 7.0); /* 23:59:59 */
	for (long long h = 19 * 24; h < 20 * 24; h++) {
		char rk[32];
		snprintf(rk, sizeof(rk), "%010lld", OCT1 + h * 3600);
		ECW_ASSERT_OK(ecw_table_delete_if_exists(NULL, x->t->client, TABLE(x), "tank-a_raw", rk));
	}
	enqueue_all(x);
	writes = run_worker(x, "rollup-month-2", NMESSAGES, 30);
	wfx_assert_queues_empty(x);
	check_all(x);
	/* Changed: tank-a 10-01, 10-03 and their week; tank-b 10-15, 10-31
	 * and their weeks; tank-a 10-20 deleted and its week rewritten. */
	assert_int_equal(writes, 3 + 4 + 2);
	assert_false(agg_exists(x, "tank-a_daily", "20201020"));
	assert_false(agg_exists(x, "tank-c_daily", "20201010"));

	/* Everything again: nothing changes, not even an ETag. */
	struct ecw_entity **before = aggregates(&n1, x);
	assert_int_equal(n1, 30 + 31 + 30 + 3 * NWEEKS);
	enqueue_all(x);
	assert_int_equal(run_worker(x, "rollup-month-3", NMESSAGES, 30), 0);
	struct ecw_entity **after = aggregates(&n2, x);
	assert_int_equal(n1, n2);
	for (size_t i = 0; i < n1; i++)
		ITEST_CHECK(strcmp(ecw_entity_rk(before[i]), ecw_entity_rk(after[i])) == 0 &&
		                strcmp(ecw_entity_etag(before[i]), ecw_entity_etag(after[i])) == 0,
		            "aggregate %s/%s was written again", ecw_entity_pk(after[i]),
		            ecw_entity_rk(after[i]));
	itest_entities_free(before, n1);
	itest_entities_free(after, n2);
	check_all(x);
	wfx_assert_queues_empty(x);
	proc_assert_logs_clean();
}

/* ---- 2. a crash after every step
 * --------------------------------------------------------------------------- */

static void put_stale(struct wfx *x, const char *device)
{
	struct ecw_entity *e = NULL;
	char pk[64];

	snprintf(pk, sizeof(pk), "%s_daily", device);
	ECW_ASSERT_OK(ecw_entity_new(&e, pk, "20201011"));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "samples", 1));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "averageDepth", -1.0));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, TABLE(x), e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

static const char *etag_of(char *out, size_t cap, struct wfx *x, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_table_get(&e, x->t->client, TABLE(x), pk, rk));
	snprintf(out, cap, "%s", ecw_entity_etag(e));
	ecw_entity_free(e);
	return out;
}

static void test_rollup__crash_after_every_step(void **state)
{
	struct wfx *x = *state;
	/* Each case starts from a stale aggregate for 10-11; the last has no
	 * raw rows, so its aggregate must go. */
	static const char *const points[] = {"rollup.read", "rollup.queried", "rollup.written",
	                                     "rollup.deleted"};

	for (int i = 0; i < 4; i++) {
		char dev[32], pk[64], name[64], etag[256], again[256];
		snprintf(dev, sizeof(dev), "crash%d", i);
		snprintf(pk, sizeof(pk), "%s_daily", dev);
		put_stale(x, dev);
		char stale[256];
		etag_of(stale, sizeof(stale), x, pk, "20201011");
		if (i < 3)
			for (long long h = 0; h < 24; h++)
				put_one(x, dev, OCT1 + 10 * DAY + h * 3600, h % 2 == 1, 10.0 + (double)h);
		put_message(x, "daily", dev, OCT1 + 10 * DAY);
		snprintf(name, sizeof(name), "rollup-crash-%s", points[i] + 7);
		run_until_crash(x, name, points[i]);
		if (i < 2) /* died before writing: the stale aggregate is untouched */
			assert_string_equal(etag_of(etag, sizeof(etag), x, pk, "20201011"), stale);
		else if (i == 2) /* died right after the write: already right */
			assert_int_equal(check_recomputed(x, dev, false), 1);
		else
			assert_false(agg_exists(x, pk, "20201011"));
		if (i == 2)
			etag_of(etag, sizeof(etag), x, pk, "20201011");

		snprintf(name, sizeof(name), "rollup-crash-%s-rerun", points[i] + 7);
		long long writes = run_worker(x, name, 1, 1);
		if (i < 3)
			assert_int_equal(check_recomputed(x, dev, false), 1);
		else
			assert_false(agg_exists(x, pk, "20201011"));
		/* The rerun after the write found it right and wrote nothing. */
		if (i == 2) {
			assert_int_equal(writes, 0);
			assert_string_equal(etag_of(again, sizeof(again), x, pk, "20201011"), etag);
		} else if (i == 3) {
			assert_int_equal(writes, 0);
		} else {
			assert_int_equal(writes, 1);
		}
		wfx_assert_queues_empty(x);
	}
	proc_assert_logs_clean();
}

/* ---- 3. in this process: the requests one run makes, permanent errors
 * --------------------------------------- */

struct direct {
	struct ecw_config *cfg;
	const struct ecw_job_def *def;
};

static void direct_load(struct direct *d, struct wfx *x)
{
	char text[4096], jobs[2048];
	struct ecw_node_errors errs;

	jobs_text(jobs, sizeof(jobs), TABLE(x));
	snprintf(text, sizeof(text),
	         "storage: {connection_string: \"UseDevelopmentStorage=true\"}\njobs:\n%s", jobs);
	ecw_node_errors_init(&errs);
	int err = ecw_config_parse(&d->cfg, text, strlen(text), "direct.yaml", &errs);
	ITEST_CHECK(err == 0, "config: %s", errs.n ? errs.lines[0] : itest_last_error());
	ecw_node_errors_dispose(&errs);
	d->def = ecw_config_job(d->cfg, "daily");
}

/* Runs the daily job for message text; returns its result, detail in out. */
static int direct_run(struct direct *d, struct wfx *x, const char *message, char *detail, size_t cap)
{
	struct json_object *m = json_tokener_parse(message);
	struct ecw_job_ctx ctx = {
	    .client = x->t->client, .job = "daily", .message = m, .message_id = "direct"};

	assert_non_null(m);
	ecw_error_clear();
	int err = d->def->type->run(d->def->settings, &ctx);
	if (detail)
		snprintf(detail, cap, "%s", ctx.outcome_detail);
	json_object_put(m);
	return err;
}

static void test_rollup__range_query_not_scan(void **state)
{
	struct wfx *x = *state;
	struct direct d = {0};
	char detail[64];

	/* 2,000+ rows in the table: a scan would read at least three pages. */
	for (int dev = 0; dev < NDEV; dev++)
		put_readings(x, dev, 0, NDAYS * 24);
	direct_load(&d, x);

	uint64_t r0 = itest_stats(x->t->client).requests;
	ECW_ASSERT_OK(direct_run(&d, x,
	                         "{\"job\":\"daily\",\"device\":\"tank-b\",\"window_start\":\"2020-10-11\"}",
	                         detail, sizeof(detail)));
	/* One GET of the aggregate, one page of the range query (22 rows:
	 * hours 249 and 262 of tank-b are missing), one insert. */
	assert_int_equal(itest_stats(x->t->client).requests - r0, 3);
	assert_string_equal(detail, "22 rows, written");
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_table_get(&e, x->t->client, TABLE(x), "tank-b_daily", "20201011"));
	assert_int_equal(ecw_entity_get(e, "samples")->v.i32, 22);
	ecw_entity_free(e);

	r0 = itest_stats(x->t->client).requests;
	ECW_ASSERT_OK(direct_run(&d, x,
	                         "{\"job\":\"daily\",\"device\":\"tank-b\",\"window_start\":\"2020-10-11\"}",
	                         detail, sizeof(detail)));
	assert_int_equal(itest_stats(x->t->client).requests - r0, 2);
	assert_string_equal(detail, "22 rows, unchanged");

	/* tank-c's empty day: a read and an empty page, nothing written. */
	r0 = itest_stats(x->t->client).requests;
	ECW_ASSERT_OK(direct_run(&d, x,
	                         "{\"job\":\"daily\",\"device\":\"tank-c\",\"window_start\":\"2020-10-10\"}",
	                         detail, sizeof(detail)));
	assert_int_equal(itest_stats(x->t->client).requests - r0, 2);
	assert_string_equal(detail, "0 rows, empty");
	assert_false(agg_exists(x, "tank-c_daily", "20201010"));
	ecw_config_free(d.cfg);
}

static void expect_permanent(struct direct *d, struct wfx *x, const char *message, const char *needle,
                             const char *needle2)
{
	int err = direct_run(d, x, message, NULL, 0);
	ITEST_CHECK(err == ECW_EINVALID, "%s: %s (%s)", message, ecw_error_name(err), itest_last_error());
	assert_true(ecw_job_err_is_permanent(err));
	ITEST_CHECK(strstr(ecw_error_last()->message, needle) && strstr(ecw_error_last()->message, needle2),
	            "%s: error \"%s\", want \"%s\" and \"%s\"", message, ecw_error_last()->message, needle,
	            needle2);
}

static void test_rollup__permanent_errors(void **state)
{
	struct wfx *x = *state;
	struct direct d = {0};

	ECW_ASSERT_OK(ecw_table_create(NULL, x->t->client, TABLE(x)));
	put_one(x, "tank-z", OCT1 + 3600, false, 10);
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_entity_new(&e, "tank-z_raw", "1601517600"));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "depth", "abc", 3));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, TABLE(x), e, ECW_WRITE_INSERT, NULL));
	ecw_entity_free(e);
	direct_load(&d, x);

	expect_permanent(&d, x, "{\"job\":\"daily\",\"device\":\"tank-z\",\"window_start\":\"2020-10-01\"}",
	                 "1601517600", "'depth'");
	expect_permanent(&d, x, "{\"job\":\"daily\",\"window_start\":\"2020-10-01\"}", "\"device\"", "no");
	expect_permanent(&d, x, "{\"job\":\"daily\",\"device\":7,\"window_start\":\"2020-10-01\"}",
	                 "\"device\"", "string");
	expect_permanent(&d, x,
	                 "{\"job\":\"daily\",\"device\":\"tank-z\",\"window_start\":\"2020-10-01T05:00Z\"}",
	                 "not midnight", "1d");
	expect_permanent(&d, x, "{\"job\":\"daily\",\"device\":\"tank-z\"}", "window_start", "string");
	expect_permanent(&d, x, "{\"job\":\"daily\",\"device\":\"a/b\",\"window_start\":\"2020-10-01\"}",
	                 "from_partition result", "/");
	/* Nothing was written for the bad window. */
	assert_false(agg_exists(x, "tank-z_daily", "20201001"));
	ecw_config_free(d.cfg);

	/* Through the worker: the bad message is poisoned at once, not retried,
	 * and its log line says which window of which device. A device of 5,000
	 * bytes (a key too long) is left out of the line whole, and counted. */
	char big[5001];
	memset(big, 'x', 5000);
	big[5000] = '\0';
	put_message(x, "daily", "tank-z", OCT1);
	put_message(x, "daily", big, OCT1 + DAY);
	struct proc p;
	write_config(x, "rollup-poison", 30);
	const char *args[] = {"run", "-c", x->config, NULL};
	proc_start(&p, "rollup-poison", args, NULL);
	PROC_EXPECT_LOG(&p, 2, 30000, "message", "outcome", "poisoned");
	proc_stop(&p, 10000);
	assert_int_equal(proc_count(&p, "message", "outcome", "poisoned", "job", "daily", "device", "tank-z",
	                            "window_start", "2020-10-01", NULL),
	                 1);
	assert_int_equal(proc_count(&p, "message", "outcome", "poisoned", "job", "daily", "window_start",
	                            "2020-10-02", "fields_omitted", "1", NULL),
	                 1);
	assert_int_equal(proc_count(&p, "message", "device", big, NULL), 0);
	long long n = 0;
	ECW_ASSERT_OK(ecw_queue_count(&n, x->t->client, x->poison));
	assert_int_equal(n, 2);
	proc_assert_logs_clean();
}

/* ---- 4. runs racing
 * ---------------------------------------------------------------------------------------- */

/* One run of 10-11 held at rollup.queried (between its query and its write)
 * while a late reading lands and a second run, which sees it, writes first. */
struct race {
	struct direct *d;
	struct wfx *x;
	const char *device;
	char message[160];
	bool fired;
	int err;
	char detail[64]; /* the second run's */
};

static void race_hook(const char *name, void *payload)
{
	struct race *r = payload;

	/* Once: the second run passes the same points. */
	if (r->fired || strcmp(name, "rollup.queried") != 0)
		return;
	r->fired = true;
	put_one(r->x, r->device, OCT1 + 10 * DAY + 12 * 3600 + 30, false, 1000); /* 12:00:30 */
	r->err = direct_run(r->d, r->x, r->message, r->detail, sizeof(r->detail));
}

/* rows raw rows on 10-11 (the odd hours Double), and a stale aggregate
 * unless insert: the held run's write is an insert (409 when it loses), an
 * update If-Match (412), or, with no rows, a delete If-Match (412). */
static void race_one(struct direct *d, struct wfx *x, const char *device, int rows, bool insert,
                     const char *held_detail)
{
	struct race r = {.d = d, .x = x, .device = device};
	char pk[64], detail[64];

	snprintf(pk, sizeof(pk), "%s_daily", device);
	snprintf(r.message, sizeof(r.message),
	         "{\"job\":\"daily\",\"device\":\"%s\",\"window_start\":\"2020-10-11\"}", device);
	for (int h = 0; h < rows; h++)
		put_one(x, device, OCT1 + 10 * DAY + h * 3600, h % 2 == 1, 10.0 + (double)h);
	if (!insert)
		put_stale(x, device);

	ecw_crash_point_hook(race_hook, &r);
	int err = direct_run(d, x, r.message, detail, sizeof(detail));
	ecw_crash_point_hook(NULL, NULL);
	ECW_ASSERT_OK(err);
	assert_true(r.fired);
	ITEST_CHECK(r.err == 0, "the second run: %s", ecw_error_name(r.err));
	char want_second[64];
	snprintf(want_second, sizeof(want_second), "%d rows, written", rows + 1);
	assert_string_equal(r.detail, want_second);
	/* What is stored is the latest data's aggregate, the late row included. */
	ITEST_CHECK(agg_exists(x, pk, "20201011"), "%s/20201011 is gone", pk);
	assert_int_equal(check_recomputed(x, device, false), 1);
	/* The held run lost: it read the aggregate again, queried again (the
	 * late row now among the rows), found the result already there. */
	assert_string_equal(detail, held_detail);
}

/* A run that queried before a late reading and writes after a run that saw
 * it must not overwrite the newer aggregate: its write is If-Match what it
 * read (an insert when there was none), fails, and it starts over. Were the
 * write unconditional, the stale result would stay. */
static void test_rollup__stale_run_starts_over(void **state)
{
	struct wfx *x = *state;
	struct direct d = {0};

	ECW_ASSERT_OK(ecw_table_create(NULL, x->t->client, TABLE(x)));
	direct_load(&d, x);
	race_one(&d, x, "race-insert", 24, true, "25 rows, unchanged (round 2)");
	race_one(&d, x, "race-update", 24, false, "25 rows, unchanged (round 2)");
	race_one(&d, x, "race-delete", 0, false, "1 rows, unchanged (round 2)");
	ecw_config_free(d.cfg);
}

/* Message lines of p's log whose detail says the run started over. */
static size_t restarts(const struct proc *p)
{
	struct proc_log log;
	struct json_object *l;
	size_t n = 0;

	proc_log_read(&log, p->log_path);
	for (size_t i = 0; (l = proc_log_find(&log, i, "message", "detail", PROC_ANY, NULL)); i++)
		n += strstr(proc_field(l, "detail"), "(round ") != NULL;
	proc_log_dispose(&log);
	return n;
}

#define RACE_DAYS 14
#define RACE_WEEKS 3 /* Mondays 09-28, 10-05, 10-12 */
#define RACE_COPIES 3
#define RACE_LATE 24

/* Three workers, every message three times over (side by side on the queue,
 * so copies run at once), each worker pausing up to 30 ms at every step
 * (ECW_TEST_STEP_JITTER_MS) while late readings land, each followed by its
 * windows' messages as the contract asks: every aggregate ends equal to the
 * recomputation from the raw rows, and runs did lose races (started over). */
static void test_rollup__workers_race_on_duplicates_and_late_data(void **state)
{
	struct wfx *x = *state;
	struct proc p[3];
	/* The first worker also holds every run 200 ms between its query and
	 * its write: a late reading then often lands in between. */
	const char *held[] = {"ECW_TEST_STEP_JITTER_MS=30", "ECW_TEST_PAUSE_AT=rollup.queried:200", NULL};
	const char *jitter[] = {"ECW_TEST_STEP_JITTER_MS=30", NULL};
	const size_t total = NDEV * (RACE_DAYS + RACE_WEEKS) * RACE_COPIES + 2 * RACE_LATE;
	size_t ok = 0, lost = 0;
	char jobs[4096];

	for (int d = 0; d < NDEV; d++)
		put_readings(x, d, 0, RACE_DAYS * 24);
	for (int d = 0; d < NDEV; d++) {
		for (int i = 0; i < RACE_DAYS; i++)
			for (int c = 0; c < RACE_COPIES; c++)
				put_message(x, "daily", devices[d], OCT1 + i * DAY);
		for (int w = 0; w < RACE_WEEKS; w++)
			for (int c = 0; c < RACE_COPIES; c++)
				put_message(x, "weekly", devices[d], MON0 + w * WEEK);
	}
	jobs_text(jobs, sizeof(jobs), TABLE(x));
	for (int i = 0; i < 3; i++) {
		char name[32];
		const char *args[] = {"run", "-c", x->config, NULL};
		snprintf(name, sizeof(name), "rollup-race%d", i);
		wfx_job_config(x, name, 30, 4, jobs);
		proc_start(&p[i], name, args, i == 0 ? held : jitter);
	}
	/* Late readings, each between two hours of a day, while the workers
	 * run; then that day's and that week's messages. */
	for (int k = 0; k < RACE_LATE; k++) {
		int dev = k % NDEV;
		long long day = (k * 5) % RACE_DAYS;
		put_one(x, devices[dev], OCT1 + day * DAY + (k % 24) * 3600 + 1800 + k, dev == 1, 500.5 + k);
		put_message(x, "daily", devices[dev], OCT1 + day * DAY);
		put_message(x, "weekly", devices[dev], MON0 + (3 + day) / 7 * WEEK);
		itest_sleep_ms(40);
	}
	for (int64_t end = itest_now_ms() + 120000; itest_now_ms() < end; itest_sleep_ms(200)) {
		ok = 0;
		for (int i = 0; i < 3; i++)
			ok += proc_count(&p[i], "message", "outcome", "succeeded", NULL);
		if (ok >= total)
			break;
	}
	ITEST_CHECK(ok == total, "%zu messages succeeded, expected %zu", ok, total);
	for (int i = 0; i < 3; i++) {
		ITEST_CHECK(proc_count(&p[i], "message", "outcome", "poisoned", NULL) == 0,
		            "%s poisoned messages:\n%s", p[i].name, proc_tail(p[i].log_path, 20));
		lost += restarts(&p[i]);
		proc_stop(&p[i], 15000);
	}
	wfx_assert_queues_empty(x);
	for (int d = 0; d < NDEV; d++) {
		check_recomputed(x, devices[d], false);
		assert_int_equal(check_recomputed(x, devices[d], true), RACE_WEEKS);
	}
	print_message("%zu runs started over\n", lost);
	ITEST_CHECK(lost > 0, "no run lost a race: the test staged none");
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_rollup__month_late_data_and_reruns, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_rollup__crash_after_every_step, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_rollup__range_query_not_scan, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_rollup__permanent_errors, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_rollup__stale_run_starts_over, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_rollup__workers_race_on_duplicates_and_late_data, fx_setup,
	                                    fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
