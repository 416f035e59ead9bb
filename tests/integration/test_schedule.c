/* SPDX-License-Identifier: MIT */
/* test_schedule.c - `schedules:` in running workers (build/ecworker-test)
 * against the real Azurite, on a simulated clock (ECW_TEST_CLOCK, shared by
 * every replica of a test): three replicas over many hourly windows enqueue
 * each window exactly once; a replica down for hours catches up on the
 * latest catch_up windows and no more; a replica that dies holding a claim,
 * right after claiming or after putting the window's messages but before
 * marking it done, has it taken over once the lease runs out, and not
 * before, and the window is put again whole.
 *
 * The scheduled job is test-record (keyless; fields [device]; window 1h): it
 * writes one entity per message into the records table, PartitionKey the
 * message's window_start, RowKey "device~message id" (a redelivery lands on
 * the same row), so the records count the messages each window put. */
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_entity.h"

#define NDEV 3
static const char *const devices[NDEV] = {"dev-a", "dev-b", "dev-c"};

struct st {
	struct wfx fx;       /* first, for wfx_teardown */
	const char *devices; /* the for_each table (fx.t->table) */
	const char *records; /* test-record's table (fx.t->table2, created by the worker) */
	const char *markers; /* worker.schedule_table */
};

static int st_setup(void **state)
{
	struct st *s = wfx_new(sizeof(*s), WFX_TABLE);

	s->devices = s->fx.t->table;
	s->records = s->fx.t->table2;
	s->markers = itest_extra_table(s->fx.t, "sched");
	for (int i = 0; i < NDEV; i++) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_entity_new(&e, "tank", devices[i]));
		ECW_ASSERT_OK(ecw_table_write(NULL, s->fx.t->client, s->devices, e, ECW_WRITE_INSERT, NULL));
		ecw_entity_free(e);
	}
	*state = s;
	return 0;
}

static int st_teardown(void **state)
{
	return wfx_teardown(state);
}

static int64_t utc(int y, int mo, int d, int h, int mi)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d, tm.tm_hour = h, tm.tm_min = mi;
	return (int64_t)timegm(&tm) * 1000;
}

static int64_t real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A simulated clock reading base_ms now and running scale times as fast. */
static void clock_env(char *out, size_t cap, int64_t anchor, int64_t base_ms, int scale)
{
	snprintf(out, cap, "ECW_TEST_CLOCK=%lld:%lld:%d", (long long)anchor, (long long)base_ms, scale);
}

/* schedule: the lines under schedules: (NULL: none); extra: more worker keys;
 * poll: the worker's poll_interval (min and max), NULL for WFX_WORKER's. */
static void start_polling(struct proc *p, struct st *s, const char *name, const char *schedule,
                          const char *extra, const char *const *env, const char *poll)
{
	struct wfx_worker w = WFX_WORKER(s->fx.t->queue, s->fx.poison);
	char path[640], worker_extra[1024], jobs[4096];
	const char *args[] = {"run", "-c", path, NULL};
	int k;

	k = snprintf(worker_extra, sizeof(worker_extra), "  schedule_table: %s\n%s", s->markers,
	             extra ? extra : "");
	assert_true(k > 0 && (size_t)k < sizeof(worker_extra));
	k = snprintf(jobs, sizeof(jobs),
	             "  rollup: {type: test-record, table: %s, fields: [device], window: 1h}\n"
	             "%s%s",
	             s->records, schedule ? "schedules:\n" : "", schedule ? schedule : "");
	assert_true(k > 0 && (size_t)k < sizeof(jobs));
	/* The worker's own batch size, dequeue count and backoff. */
	w.batch_size = 0;
	w.max_dequeue = 0;
	w.retry_max = NULL;
	w.worker_extra = worker_extra;
	w.jobs = jobs;
	if (poll)
		w.poll_min = w.poll_max = poll;
	wfx_write_config(path, sizeof(path), name, &w);
	proc_start(p, name, args, env);
}

static void start(struct proc *p, struct st *s, const char *name, const char *schedule, const char *extra,
                  const char *const *env)
{
	start_polling(p, s, name, schedule, extra, env, NULL);
}

/* Starts p again (after it stopped) with its config and env. */
static void restart(struct proc *p, const char *const *env)
{
	char path[640], file[128];
	const char *args[] = {"run", "-c", path, NULL};

	snprintf(file, sizeof(file), "%s.yaml", p->name);
	proc_path(path, sizeof(path), file);
	proc_restart(p, args, env);
}

static const struct ecw_prop *prop(const struct ecw_entity *e, const char *name, enum ecw_edm type)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);

	ITEST_CHECK(p && p->type == type, "marker %s lacks %s of the right type: %s", ecw_entity_rk(e), name,
	            itest_entity_json(e));
	return p;
}

/* Done markers so far; 0 while the workers have not created the table. */
static size_t count_done(struct st *s)
{
	struct ecw_query_options qo = {"PartitionKey eq 'rollup' and Done eq true", NULL, 0, 0};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	size_t done = 0;
	int err;

	ECW_ASSERT_OK(ecw_table_query_new(&q, s->fx.t->client, s->markers, &qo));
	while ((err = ecw_table_query_next(&e, q)) == 0 && e) {
		done++;
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);
	if (err == ECW_ENOTABLE)
		return 0;
	ECW_ASSERT_OK(err);
	return done;
}

static size_t count_records(struct st *s)
{
	size_t n = 0;
	struct ecw_entity **v = itest_query_all(&n, s->fx.t->client, s->records, NULL);

	itest_entities_free(v, n);
	return n;
}

static void wait_done(struct st *s, size_t want, int timeout_ms)
{
	int64_t end = itest_now_ms() + timeout_ms;
	size_t got = 0;

	while ((got = count_done(s)) < want && itest_now_ms() < end)
		itest_sleep_ms(200);
	ITEST_CHECK(got >= want, "%zu windows done after %d ms, expected %zu", got, timeout_ms, want);
}

/* Runs a worker without schedules until the job queue is empty, so the
 * records hold every message the schedules put. */
static void drain_queue(struct st *s, const char *name)
{
	struct proc p;
	long long n = -1;
	int64_t end = itest_now_ms() + 60000;

	start(&p, s, name, NULL, NULL, NULL);
	/* Its signals are handled from "start" on: a SIGTERM before it (an
	 * empty queue, on a loaded machine) killed it with 143. */
	PROC_EXPECT_LOG(&p, 1, 30000, "start");
	do {
		itest_sleep_ms(200);
		ECW_ASSERT_OK(ecw_queue_count(&n, s->fx.t->client, s->fx.t->queue));
	} while (n != 0 && itest_now_ms() < end);
	ITEST_CHECK(n == 0, "%lld messages still queued", n);
	proc_stop(&p, 15000);
}

/* The markers are exactly the hourly windows want[0..nwant) (marker keys),
 * each done with NDEV messages by its last claimant (Claims claims), and the
 * records hold exactly `copies` messages per device for each (window
 * previous: the hour before): 1 when each window was enqueued once. */
static void check_windows(struct st *s, const int64_t *want, size_t nwant, int claims, int copies)
{
	size_t n = 0, nrec = 0;
	struct ecw_entity **v = itest_query_all(&n, s->fx.t->client, s->markers, "PartitionKey eq 'rollup'");
	struct ecw_entity **rec = itest_query_all(&nrec, s->fx.t->client, s->records, NULL);

	ITEST_CHECK(n == nwant, "%zu markers, expected %zu", n, nwant);
	ITEST_CHECK(nrec == nwant * NDEV * (size_t)copies, "%zu records (messages run), expected %zu", nrec,
	            nwant * NDEV * (size_t)copies);
	for (size_t i = 0; i < nwant; i++) {
		char key[32], ws[32];
		time_t t = (time_t)(want[i] / 1000), prev = t - 3600;
		struct tm tm;
		int seen[NDEV] = {0};

		gmtime_r(&t, &tm);
		strftime(key, sizeof(key), "%Y-%m-%dT%H:%MZ", &tm);
		gmtime_r(&prev, &tm);
		strftime(ws, sizeof(ws), "%Y-%m-%dT%H:00:00Z", &tm);
		ITEST_CHECK(strcmp(ecw_entity_rk(v[i]), key) == 0, "marker %zu is %s, expected %s", i,
		            ecw_entity_rk(v[i]), key);
		ITEST_CHECK(prop(v[i], "Done", ECW_EDM_BOOLEAN)->v.b, "window %s not done: %s", key,
		            itest_entity_json(v[i]));
		ITEST_CHECK(prop(v[i], "Enqueued", ECW_EDM_INT64)->v.i64 == NDEV, "window %s: %s", key,
		            itest_entity_json(v[i]));
		ITEST_CHECK(prop(v[i], "Claims", ECW_EDM_INT32)->v.i32 == claims, "window %s: %s", key,
		            itest_entity_json(v[i]));
		prop(v[i], "ClaimedBy", ECW_EDM_STRING);
		prop(v[i], "ClaimedAt", ECW_EDM_DATETIME);
		for (size_t j = 0; j < nrec; j++) {
			if (strcmp(ecw_entity_pk(rec[j]), ws) != 0)
				continue;
			for (int d = 0; d < NDEV; d++)
				if (strncmp(ecw_entity_rk(rec[j]), devices[d], strlen(devices[d])) == 0 &&
				    ecw_entity_rk(rec[j])[strlen(devices[d])] == '~')
					seen[d]++;
		}
		for (int d = 0; d < NDEV; d++)
			ITEST_CHECK(seen[d] == copies, "window_start %s: %d message(s) for %s, expected %d",
			            ws, seen[d], devices[d], copies);
	}
	itest_entities_free(v, n);
	itest_entities_free(rec, nrec);
}

#define HOURLY                                                                                               \
	"  - {job: rollup, every: 1h, at: \"00:10\", window: previous, for_each: {table: %s, field: RowKey}%s}\n"

/* Three replicas on one simulated clock (an hour every 2 s) over the year's
 * end: every window, the 7 caught up at start and those that come while
 * they run, is enqueued by exactly one of them, once. */
static void test_schedule__three_replicas_each_window_once(void **state)
{
	struct st *s = *state;
	struct proc p[3];
	char sched[512], clk[128];
	const int scale = 1800;
	int64_t anchor = real_ms(), base = utc(2020, 12, 31, 20, 30);
	const char *env[] = {clk, NULL};
	size_t total = 0;

	snprintf(sched, sizeof(sched), HOURLY, s->devices, "");
	clock_env(clk, sizeof(clk), anchor, base, scale);
	for (int i = 0; i < 3; i++) {
		char name[32];
		snprintf(name, sizeof(name), "sched-replica%d", i);
		start(&p[i], s, name, sched, NULL, env);
	}
	/* 14:00..20:00 at once, then 21:00, ..., 2021-01-01T02:00. */
	wait_done(s, 13, 90000);
	/* Stop between two firings (minute 40 of a simulated hour), when no
	 * window is being enqueued. */
	for (;;) {
		int64_t sim = base + (real_ms() - anchor) * scale;
		int64_t minute = (sim / 60000) % 60;
		if (minute >= 35 && minute < 45)
			break;
		itest_sleep_ms(20);
	}
	for (int i = 0; i < 3; i++)
		proc_signal(&p[i], SIGTERM);
	for (int i = 0; i < 3; i++) {
		ITEST_CHECK(proc_wait(&p[i], 15000), "%s did not stop", p[i].name);
		ITEST_CHECK(proc_exit_code(&p[i]) == 0, "%s exited %d:\n%s", p[i].name, proc_exit_code(&p[i]),
		            proc_tail(p[i].log_path, 30));
	}
	drain_queue(s, "sched-drain");

	size_t n = 0;
	struct ecw_entity **v = itest_query_all(&n, s->fx.t->client, s->markers, "PartitionKey eq 'rollup'");
	itest_entities_free(v, n);
	ITEST_CHECK(n >= 13, "%zu markers", n);
	int64_t *want = calloc(n, sizeof(*want));
	assert_non_null(want);
	for (size_t i = 0; i < n; i++)
		want[i] = utc(2020, 12, 31, 14, 0) + (int64_t)i * 3600000;
	check_windows(s, want, n, 1, 1);
	free(want);
	/* One schedule_enqueued line per window over the three logs: no
	 * window was enqueued by two replicas. */
	for (int i = 0; i < 3; i++)
		total += proc_count(&p[i], "schedule_enqueued", "schedule", "rollup", "count", "3", NULL);
	ITEST_CHECK(total == n, "%zu windows enqueued over the three replicas' logs, %zu markers", total, n);
	assert_int_equal(proc_count(&p[0], "schedule_released", NULL) +
	                     proc_count(&p[1], "schedule_released", NULL) +
	                     proc_count(&p[2], "schedule_released", NULL),
	                 0);
	proc_assert_logs_clean();
}

/* A replica that was down catches up on the latest catch_up windows, and
 * only those: down from 10:20 to 17:20, it does 15:00, 16:00 and 17:00 and
 * never 11:00..14:00. A start where everything due is done enqueues nothing. */
static void test_schedule__late_replica_catches_up(void **state)
{
	struct st *s = *state;
	struct proc p;
	char sched[512], clk[128];
	const char *env[] = {clk, NULL};

	snprintf(sched, sizeof(sched), HOURLY, s->devices, ", catch_up: 3");
	/* Real speed: nothing new comes due while a phase runs. */
	clock_env(clk, sizeof(clk), real_ms(), utc(2020, 10, 11, 10, 20), 1);
	start(&p, s, "sched-late1", sched, NULL, env);
	wait_done(s, 3, 30000);
	PROC_EXPECT_LOG(&p, 3, 10000, "schedule_enqueued", "schedule", "rollup");
	proc_stop(&p, 15000);

	/* Seven simulated hours later. */
	clock_env(clk, sizeof(clk), real_ms(), utc(2020, 10, 11, 17, 20), 1);
	restart(&p, env);
	wait_done(s, 6, 30000);
	/* Oldest first: 11:00..14:00 would have come before 15:00. */
	proc_stop(&p, 15000);

	/* Again at the same time: all due windows are done. */
	clock_env(clk, sizeof(clk), real_ms(), utc(2020, 10, 11, 17, 25), 1);
	restart(&p, env);
	PROC_EXPECT_LOG(&p, 3, 20000, "schedule_skipped", "schedule", "rollup", "reason", "done");
	proc_stop(&p, 15000);
	drain_queue(s, "sched-late-drain");

	const int64_t want[] = {utc(2020, 10, 11, 8, 0),  utc(2020, 10, 11, 9, 0),  utc(2020, 10, 11, 10, 0),
	                        utc(2020, 10, 11, 15, 0), utc(2020, 10, 11, 16, 0), utc(2020, 10, 11, 17, 0)};
	check_windows(s, want, 6, 1, 1);
	/* 3 + 3 + 0 over the three runs (one log). */
	assert_int_equal(proc_count(&p, "schedule_enqueued", "schedule", "rollup", NULL), 6);
	proc_assert_logs_clean();
}

/* The messages on the job queue (peeked, so left there): exactly `want`, each
 * the 10:00 window's (window_start 09:00) for one device, every device at
 * most once. */
static void check_queued(struct st *s, size_t want)
{
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	int seen[NDEV] = {0};

	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, s->fx.t->client, s->fx.t->queue, ECW_QUEUE_MAX_BATCH));
	ITEST_CHECK(n == want, "%zu messages on the queue, expected %zu", n, want);
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_tokener_parse(m[i].text), *v;
		int d;
		ITEST_CHECK(o && json_object_object_get_ex(o, "window_start", &v) &&
		                strcmp(json_object_get_string(v), "2020-10-11T09:00:00Z") == 0 &&
		                json_object_object_get_ex(o, "job", &v) &&
		                strcmp(json_object_get_string(v), "rollup") == 0,
		            "message %zu: %s", i, m[i].text);
		ITEST_CHECK(json_object_object_get_ex(o, "device", &v), "message %zu has no device: %s", i,
		            m[i].text);
		for (d = 0; d < NDEV && strcmp(json_object_get_string(v), devices[d]) != 0; d++)
			;
		ITEST_CHECK(d < NDEV && seen[d]++ == 0, "message %zu: an unknown or repeated device: %s", i,
		            m[i].text);
		json_object_put(o);
	}
	ecw_queue_msgs_free(m, n);
}

/* A replica dies at `point` holding the claim of the 10:00 window, with `left`
 * of the window's NDEV messages put: the window is neither lost nor stolen
 * early. Another replica leaves the claim alone while it is younger than
 * schedule_lease, then takes it over (Claims 2) and enqueues the whole window
 * again, so each device's message runs 1 + (left > 0) times: what was put
 * before the crash is put again, never skipped. */
static void die_then_take_over(struct st *s, const char *point, size_t left)
{
	struct proc a, b;
	char sched[512], clk[128], crash[96];
	const char *env_crash[] = {clk, crash, NULL};
	const char *env[] = {clk, NULL};
	const char *lease = "  schedule_lease: 5s\n";
	size_t n = 0;
	struct ecw_entity **v;

	snprintf(sched, sizeof(sched), HOURLY, s->devices, ", catch_up: 1");
	snprintf(crash, sizeof(crash), "ECW_CRASH_AT=%s", point);
	clock_env(clk, sizeof(clk), real_ms(), utc(2020, 10, 11, 10, 20), 1);
	/* Its one receive comes at start, before the scheduler's first put (3
	 * requests later), and the next an hour after: what it put stays on
	 * the queue, to be counted. */
	start_polling(&a, s, "sched-crash", sched, lease, env_crash, "1h");
	ITEST_CHECK(proc_wait(&a, 30000), "the worker did not die at %s:\n%s", point,
	            proc_tail(a.log_path, 30));
	assert_int_equal(proc_exit_code(&a), 86);
	v = itest_query_all(&n, s->fx.t->client, s->markers, NULL);
	ITEST_CHECK(n == 1 && !prop(v[0], "Done", ECW_EDM_BOOLEAN)->v.b &&
	                prop(v[0], "Claims", ECW_EDM_INT32)->v.i32 == 1,
	            "after the crash: %zu markers, first %s", n, itest_entity_json(n ? v[0] : NULL));
	itest_entities_free(v, n);
	check_queued(s, left);
	assert_int_equal(count_records(s), 0);

	start(&b, s, "sched-taker", sched, lease, env);
	/* First a claim younger than the lease: left alone. */
	PROC_EXPECT_LOG(&b, 1, 20000, "schedule_skipped", "schedule", "rollup", "reason", "claimed");
	assert_int_equal(proc_count(&b, "schedule_takeover", NULL), 0);
	PROC_EXPECT_LOG(&b, 1, 30000, "schedule_takeover", "schedule", "rollup", "window",
	                "2020-10-11T10:00Z", "claims", "2");
	PROC_EXPECT_LOG(&b, 1, 10000, "schedule_enqueued", "schedule", "rollup", "count", "3", "takeover",
	                "true");
	wait_done(s, 1, 10000);
	proc_stop(&b, 15000);
	drain_queue(s, "sched-takeover-drain");

	const int64_t want[] = {utc(2020, 10, 11, 10, 0)};
	check_windows(s, want, 1, 2, left ? 2 : 1);
	proc_assert_logs_clean();
}

/* Dead right after claiming (ECW_CRASH_AT=schedule.claimed): nothing was
 * put; the window runs once. */
static void test_schedule__stale_claim_taken_over(void **state)
{
	die_then_take_over(*state, "schedule.claimed", 0);
}

/* Dead after putting the whole window, before Done (schedule.enqueued): the
 * takeover puts it all again, and every device's message runs twice (the
 * records count messages: a rollup would recompute the same window twice). */
static void test_schedule__enqueued_not_done_taken_over(void **state)
{
	die_then_take_over(*state, "schedule.enqueued", NDEV);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_schedule__three_replicas_each_window_once, st_setup,
	                                    st_teardown),
	    cmocka_unit_test_setup_teardown(test_schedule__late_replica_catches_up, st_setup, st_teardown),
	    cmocka_unit_test_setup_teardown(test_schedule__stale_claim_taken_over, st_setup, st_teardown),
	    cmocka_unit_test_setup_teardown(test_schedule__enqueued_not_done_taken_over, st_setup,
	                                    st_teardown),
	};
	return cmocka_run_group_tests_name("schedule (integration)", tests, NULL, NULL);
}
