/* SPDX-License-Identifier: MIT */
/* test_runtime.c - the worker's loop and its threads, as a process: build/ecworker-test (the worker with
 * the test-only job types) runs against the real Azurite with a config written per test (its own queue,
 * poison queue and tables; runtimefx.h), and the tests judge it by what it leaves in storage, by its JSON
 * log lines and by its metrics endpoint: leases renewed for long jobs and lost ones that stop a job's
 * writes; shutdown (SIGTERM hands every held and prefetched message back at once, lets short jobs finish,
 * and a second signal exits 130 at once); concurrency and prefetch bounding what it holds; start-up
 * failures, and storage that is away at start-up waited out; metrics, liveness and readiness; a SAS
 * signature kept out of every log; and exactly-once processing under load with one and with three
* workers and across lease renewals; idle work handed to the thread that went idle last. What the worker does with each message's outcome, on a real queue,
 * is in test_settle.c. */
#include "itest.h"
#include "proc.h"
#include "runtimefx.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "ecw_codec.h"

/* ---- 1. a job longer than the visibility timeout keeps its lease ------------------------------- */

static void test_runtime__long_job_keeps_lease(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char jobs[256], id[64];
	struct proc p;
	struct ecw_entity *done = NULL;

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  slow: {type: test-sleep, duration: 6s, table: %s}\n", t->table);
	o.jobs = jobs;
	o.visibility_s = 2;
	o.concurrency = 2; /* a free slot would pick the message up again if it reappeared */
	rtfx_put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"long-1\"}", id);
	rtfx_start_worker(&p, r, "runtime-longjob", &o);

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id);
	/* Longer than a visibility timeout more: a redelivery would show. */
	itest_sleep_ms(2500);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	ITEST_CHECK(proc_log_count(&log, "message", "message_id", id, NULL) == 1,
	            "%zu message lines for %s, expected exactly 1; log:\n%s",
	            proc_log_count(&log, "message", "message_id", id, NULL), id, proc_tail(p.log_path, 30));
	struct json_object *line = proc_log_find(&log, 0, "message", "message_id", id, NULL);
	assert_string_equal(proc_field(line, "outcome"), "succeeded");
	assert_int_equal(proc_field_int(line, "dequeue_count", -1), 1);
	ITEST_CHECK(proc_field_int(line, "duration_ms", -1) >= 6000, "duration_ms %lld",
	            proc_field_int(line, "duration_ms", -1));
	/* A free job thread took it at once: its wait before the run is no
	 * part of the run's 6 s. */
	ITEST_CHECK(proc_field_int(line, "waited_ms", -1) >= 0 &&
	                proc_field_int(line, "waited_ms", -1) < 2000,
	            "waited_ms %lld", proc_field_int(line, "waited_ms", -1));
	ITEST_CHECK(proc_log_count(&log, "lease_renewed", "message_id", id, NULL) >= 3,
	            "%zu lease renewals over a 6 s job with a 2 s visibility timeout",
	            proc_log_count(&log, "lease_renewed", "message_id", id, NULL));
	proc_log_dispose(&log);
	ECW_ASSERT_OK(ecw_table_get(&done, t->client, t->table, "long-1", "done"));
	ecw_entity_free(done);
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	assert_int_equal(rtfx_queue_count(r, r->fx.poison), 0);
	rtfx_finish(&p);
}

/* ---- 2. a lost lease stops the job's writes --------------------------------------------------- */

static void test_runtime__lost_lease_stops_writes(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char jobs[256], id[64];
	struct proc p;
	struct ecw_entity *done = NULL;

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  slow: {type: test-sleep, duration: 4s, table: %s}\n", t->table);
	o.jobs = jobs;
	o.visibility_s = 2;
	rtfx_put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"lost-1\"}", id);
	rtfx_start_worker(&p, r, "runtime-leaselost", &o);

	/* Received: hidden, still counted. Then take it away: the renewal at
	 * about 1 s finds no message. */
	int64_t end = itest_now_ms() + 10000;
	while (rtfx_peek_count(r, t->queue) != 0) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p),
		            "the worker did not receive the message; log:\n%s", proc_tail(p.log_path, 20));
		itest_sleep_ms(20);
	}
	ECW_ASSERT_OK(ecw_queue_clear(t->client, t->queue));

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", "message_id", id, NULL);
	assert_string_equal(proc_field(line, "outcome"), "lease-lost");
	ITEST_CHECK(proc_log_count(&log, "lease_lost", "message_id", id, NULL) >= 1,
	            "no lease_lost event; log:\n%s", proc_tail(p.log_path, 20));
	proc_log_dispose(&log);
	ECW_ASSERT_ERR(ecw_table_get(&done, t->client, t->table, "lost-1", "done"), ECW_ENOTFOUND);
	assert_int_equal(rtfx_queue_count(r, r->fx.poison), 0);
	rtfx_finish(&p);
}

/* Every metric that deploy/prometheus/ecworker-alerts.yaml uses is on a real
 * worker's page (a renamed metric would silence its alert): the rules' own
 * behaviour is checked by promtool (make rules-test). A metric of a feature
 * this worker lacks (the scheduled audits' gauges) is there by its TYPE line;
 * test_audit_schedule.c reads its samples. */
static void check_alert_metrics(const char *page)
{
	const char *path = "deploy/prometheus/ecworker-alerts.yaml";
	FILE *f = fopen(path, "r");
	static char rules[65536];
	size_t n, names = 0;

	ITEST_CHECK(f != NULL, "cannot open %s (the tests run from the source tree's top)", path);
	n = fread(rules, 1, sizeof(rules) - 1, f);
	fclose(f);
	/* A file cut short here would pass with the names past the cut unchecked. */
	ITEST_CHECK(n < sizeof(rules) - 1, "%s is %zu bytes or more: enlarge rules[]", path, n);
	rules[n] = '\0';
	for (const char *p = rules; (p = strstr(p, "ecw_"));) {
		char name[128], want[140];
		size_t k = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
		snprintf(name, sizeof(name), "%.*s", (int)(k < sizeof(name) ? k : sizeof(name) - 1), p);
		p += k;
		if (strcmp(name, "ecw_metrics_declare") == 0) /* named in a comment */
			continue;
		snprintf(want, sizeof(want), "\n%s{", name);
		if (!strstr(page, want))
			snprintf(want, sizeof(want), "\n%s ", name);
		if (!strstr(page, want))
			snprintf(want, sizeof(want), "\n# TYPE %s ", name);
		ITEST_CHECK(strstr(page, want) != NULL, "%s uses %s, which the worker's /metrics lacks", path,
		            name);
		names++;
	}
	ITEST_CHECK(names >= 5, "only %zu metric names found in %s", names, path);
}

/* ---- 3. SIGTERM hands every held message back at once --------------------------------------- */

static void test_runtime__sigterm_releases_inflight(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct proc p;
	char *page = NULL;
	int found;

	itest_queue(t);
	o.jobs = "  slow: {type: test-sleep, duration: 60s}\n";
	o.concurrency = 16;
	o.batch_size = 16;
	o.shutdown_grace = "2s";
	for (int i = 0; i < 16; i++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"held-%02d\"}", i);
		rtfx_put(r, text, NULL);
	}
	int port = rtfx_start_worker(&p, r, "runtime-sigterm", &o);

	int64_t end = itest_now_ms() + 10000;
	while (rtfx_peek_count(r, t->queue) != 0) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p),
		            "the worker did not take all 16; log:\n%s", proc_tail(p.log_path, 20));
		itest_sleep_ms(50);
	}
	itest_sleep_ms(1000);
	assert_int_equal(rtfx_queue_count(r, t->queue), 16);
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	double inflight = proc_metric(page, "ecw_jobs_in_flight", &found, NULL);
	ITEST_CHECK(found == 1 && inflight == 16, "ecw_jobs_in_flight %g (%d samples), expected 16", inflight,
	            found);
	/* Before any message finished, what alerts count from is there at 0
	 * (deploy/prometheus/ecworker-alerts.yaml): each poison reason, and the
	 * configured job's succeeded, retried and poisoned outcomes. */
	static const char *const reasons[] = {"reason=\"permanent\"", "reason=\"max-dequeue\""};
	static const char *const outcomes[] = {"outcome=\"succeeded\"", "outcome=\"retried\"",
	                                       "outcome=\"poisoned\""};
	for (int i = 0; i < 2; i++) {
		double v = proc_metric(page, "ecw_messages_poisoned_total", &found, reasons[i], NULL);
		ITEST_CHECK(found == 1 && v == 0,
		            "ecw_messages_poisoned_total{%s}: %g (%d samples), expected 0", reasons[i], v,
		            found);
	}
	for (int i = 0; i < 3; i++) {
		double v = proc_metric(page, "ecw_messages_total", &found, "job=\"slow\"", outcomes[i], NULL);
		ITEST_CHECK(found == 1 && v == 0,
		            "ecw_messages_total{job=\"slow\",%s}: %g (%d samples), expected 0", outcomes[i],
		            v, found);
	}
	check_alert_metrics(page);
	free(page);

	int64_t t0 = itest_now_ms();
	proc_signal(&p, SIGTERM);
	ITEST_CHECK(proc_wait(&p, 4000), "still running 4 s after SIGTERM with shutdown_grace 2s; log:\n%s",
	            proc_tail(p.log_path, 30));
	int64_t took = itest_now_ms() - t0;
	ITEST_CHECK(proc_exit_code(&p) == 0, "exit status %d after SIGTERM; log:\n%s", proc_exit_code(&p),
	            proc_tail(p.log_path, 30));
	ITEST_CHECK(took >= 1800, "exited %lld ms after SIGTERM: it did not wait the grace period",
	            (long long)took);

	/* Nothing deleted, everything visible again at once. */
	size_t got = 0;
	struct ecw_queue_msg *m = rtfx_receive_n(&got, r, t->queue, 32, 30, 0);
	ITEST_CHECK(got == 16, "a receive right after the exit got %zu messages, expected all 16", got);
	for (size_t i = 0; i < got; i++)
		assert_int_equal(m[i].dequeue_count, 2);
	ecw_queue_msgs_free(m, got);
	assert_int_equal(rtfx_queue_count(r, t->queue), 16);
	assert_int_equal(rtfx_queue_count(r, r->fx.poison), 0);
	assert_int_equal(proc_count(&p, "message", "outcome", "released", NULL), 16);
	assert_int_equal(proc_count(&p, "stopping", NULL), 1);
	/* Like every per-message line, a release names the job and keys. */
	assert_int_equal(
	    proc_count(&p, "message", "outcome", "released", "job", "slow", "pk", "p", "rk", PROC_ANY, NULL),
	    16);
	proc_assert_logs_clean();
}

/* ---- 4. exactly once under load ------------------------------------------------------------------ */

#define LOAD_N 2000
#define PUTTERS 8

struct putter {
	struct ecw_account *acct;
	struct ecw_client *client;
	const char *queue;
	int from, to;
	int failed;
	char error[600];
};

static void *put_thread(void *arg)
{
	struct putter *pt = arg;

	for (int i = pt->from; i < pt->to; i++) {
		char text[128];
		int n =
		    snprintf(text, sizeof(text), "{\"job\":\"count\",\"pk\":\"load\",\"rk\":\"m%05d\"}", i);
		if (ecw_queue_put(NULL, pt->client, pt->queue, text, (size_t)n, NULL) < 0) {
			pt->failed++;
			snprintf(pt->error, sizeof(pt->error), "%s", itest_last_error());
		}
	}
	return NULL;
}

static void put_load(struct rtfx *r)
{
	struct putter pts[PUTTERS];
	pthread_t tids[PUTTERS];

	for (int i = 0; i < PUTTERS; i++) {
		memset(&pts[i], 0, sizeof(pts[i]));
		itest_client_for(&pts[i].acct, &pts[i].client, r->connstr ? r->connstr : itest_connstr(),
		                 NULL);
		pts[i].queue = r->fx.t->queue;
		pts[i].from = LOAD_N * i / PUTTERS;
		pts[i].to = LOAD_N * (i + 1) / PUTTERS;
		assert_int_equal(pthread_create(&tids[i], NULL, put_thread, &pts[i]), 0);
	}
	for (int i = 0; i < PUTTERS; i++) {
		pthread_join(tids[i], NULL);
		ITEST_CHECK(pts[i].failed == 0, "%d puts failed: %s", pts[i].failed, pts[i].error);
		ecw_client_free(pts[i].client);
		ecw_account_free(pts[i].acct);
	}
}

/* Runs `workers` processes on LOAD_N messages and checks each ran once. */
static void exactly_once(struct rtfx *r, int workers, const char *name)
{
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct proc p[3];
	char jobs[256], pname[64];
	size_t done = 0;

	assert_true(workers <= 3);
	/* Thousands of deleted messages make Azurite's next queue GC stall
	 * it for tens of seconds: use one of our own, and stop it after. */
	struct proc_azurite az;
	struct ecw_account *pacct = NULL;
	struct ecw_client *pclient = NULL;
	if (proc_azurite_start(&az, name)) {
		itest_client_for(&pacct, &pclient, az.connstr, NULL);
		r->client = pclient;
		r->connstr = az.connstr;
		snprintf(r->worker_env, sizeof(r->worker_env), "ECW_TEST_CONNECTION_STRING=%s", az.connstr);
		ECW_ASSERT_OK(ecw_queue_create(NULL, pclient, t->queue));
	} else {
		itest_queue(t);
	}
	snprintf(jobs, sizeof(jobs), "  count: {type: test-count, table: %s}\n", t->table);
	o.jobs = jobs;
	o.concurrency = 16;
	o.batch_size = 16;
	int64_t t0 = itest_now_ms();
	put_load(r);
	int64_t t1 = itest_now_ms();
	for (int w = 0; w < workers; w++) {
		snprintf(pname, sizeof(pname), "%s-w%d", name, w + 1);
		rtfx_start_worker(&p[w], r, pname, &o);
	}
	int64_t end = itest_now_ms() + 60000;
	for (;;) {
		done = 0;
		for (int w = 0; w < workers; w++) {
			ITEST_CHECK(proc_alive(&p[w]), "worker %d exited; log:\n%s", w + 1,
			            proc_tail(p[w].log_path, 30));
			done += proc_count(&p[w], "message", NULL);
		}
		if (done >= LOAD_N || itest_now_ms() > end)
			break;
		itest_sleep_ms(500);
	}
	int64_t t2 = itest_now_ms();
	print_message("%s: put %d messages in %lld ms, %d worker(s) processed %zu in %lld ms\n", name, LOAD_N,
	              (long long)(t1 - t0), workers, done, (long long)(t2 - t1));
	ITEST_CHECK(done >= LOAD_N, "only %zu of %d messages processed in 60 s", done, LOAD_N);

	size_t succeeded = 0, total = 0;
	for (int w = 0; w < workers; w++) {
		size_t s = proc_count(&p[w], "message", "outcome", "succeeded", NULL);
		print_message("  worker %d: %zu succeeded\n", w + 1, s);
		succeeded += s;
		total += proc_count(&p[w], "message", NULL);
	}
	ITEST_CHECK(succeeded == LOAD_N && total == LOAD_N,
	            "%zu message lines, %zu succeeded; expected %d of each", total, succeeded, LOAD_N);

	/* One row per message: none missing, none twice. */
	static unsigned char seen[LOAD_N];
	struct ecw_table_query *q = NULL;
	size_t rows = 0, dups = 0, strays = 0;
	memset(seen, 0, sizeof(seen));
	ECW_ASSERT_OK(ecw_table_query_new(&q, r->client, t->table, NULL));
	for (;;) {
		struct ecw_entity *e = NULL;
		int idx;
		char extra;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		rows++;
		if (sscanf(ecw_entity_pk(e), "m%5d%c", &idx, &extra) == 1 && idx >= 0 && idx < LOAD_N) {
			if (seen[idx]++)
				dups++;
		} else {
			strays++;
		}
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);
	size_t missing = 0;
	for (int i = 0; i < LOAD_N; i++)
		missing += seen[i] == 0;
	ITEST_CHECK(rows == LOAD_N && dups == 0 && missing == 0 && strays == 0,
	            "%zu rows: %zu missing, %zu run twice or more, %zu strays (expected %d, one each)", rows,
	            missing, dups, strays, LOAD_N);
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	assert_int_equal(rtfx_queue_count(r, r->fx.poison), 0);
	for (int w = 0; w < workers; w++)
		proc_stop(&p[w], 10000);
	proc_assert_logs_clean();
	r->client = t->client;
	r->connstr = NULL;
	r->worker_env[0] = '\0';
	ecw_client_free(pclient);
	ecw_account_free(pacct);
	proc_azurite_stop(&az);
}

static void test_runtime__exactly_once_one_worker(void **state)
{
	exactly_once(*state, 1, "runtime-load1");
}

static void test_runtime__exactly_once_three_workers(void **state)
{
	exactly_once(*state, 3, "runtime-load3");
}

/* Jobs that straddle lease renewals (visibility 2 s, renewed every second,
 * jobs of 0.5..2.5 s) on two workers: every message still runs once and is
 * settled once. */
static void test_runtime__exactly_once_across_renewals(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct proc p[2];
	char jobs[256];
	enum { N = 160 };

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  slow: {type: test-sleep, table: %s}\n", t->table);
	o.jobs = jobs;
	o.visibility_s = 2;
	o.concurrency = 32;
	for (int i = 0; i < N; i++) {
		char text[160];
		snprintf(text, sizeof(text),
		         "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"s%03d\",\"sleep_ms\":%d}", i,
		         500 + (i * 137) % 2000);
		rtfx_put(r, text, NULL);
	}
	rtfx_start_worker(&p[0], r, "runtime-renewals-w1", &o);
	rtfx_start_worker(&p[1], r, "runtime-renewals-w2", &o);
	int64_t end = itest_now_ms() + 40000;
	size_t done = 0;
	while (done < N && itest_now_ms() < end) {
		itest_sleep_ms(250);
		done = proc_count(&p[0], "message", NULL) + proc_count(&p[1], "message", NULL);
	}
	/* A message that reappeared would run again: wait one lease longer. */
	itest_sleep_ms(2500);
	size_t ok = 0, lines = 0, renewals = 0;
	for (int w = 0; w < 2; w++) {
		ok += proc_count(&p[w], "message", "outcome", "succeeded", NULL);
		lines += proc_count(&p[w], "message", NULL);
		renewals += proc_count(&p[w], "lease_renewed", NULL);
	}
	ITEST_CHECK(ok == N && lines == N,
	            "%zu message lines, %zu succeeded; expected %d of each (logs %s, %s)", lines, ok, N,
	            p[0].log_path, p[1].log_path);
	ITEST_CHECK(renewals >= N / 2, "only %zu lease renewals", renewals);
	for (int i = 0; i < N; i++) {
		char rk[16];
		snprintf(rk, sizeof(rk), "s%03d", i);
		ITEST_CHECK(rtfx_rows_with_pk(r, t->table, rk, NULL, 0) == 1, "message %s has no done row",
		            rk);
	}
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	assert_int_equal(rtfx_queue_count(r, r->fx.poison), 0);
	proc_stop(&p[0], 10000);
	proc_stop(&p[1], 10000);
	proc_assert_logs_clean();
}

/* ---- 5. shutdown -------------------------------------------------------------------------------- */

static void wait_all_received(struct rtfx *r, struct proc *p)
{
	int64_t end = itest_now_ms() + 10000;

	while (rtfx_peek_count(r, r->fx.t->queue) != 0) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(p),
		            "the worker did not receive the messages; log:\n%s", proc_tail(p->log_path, 20));
		itest_sleep_ms(20);
	}
}

/* SIGTERM waits for a job that finishes within the grace period, which then
 * settles its message as usual, and exits as soon as it did. */
static void test_runtime__sigterm_lets_short_jobs_finish(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char jobs[256], id[64];
	struct proc p;
	struct ecw_entity *done = NULL;

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  slow: {type: test-sleep, duration: 2s, table: %s}\n", t->table);
	o.jobs = jobs;
	o.shutdown_grace = "20s";
	rtfx_put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"finish-me\"}", id);
	rtfx_start_worker(&p, r, "runtime-drain", &o);
	wait_all_received(r, &p);
	/* Received is not yet started: a signal in between releases it (an
	 * ASan run on the loaded machine sent it 9 ms after the receive). The
	 * job takes 2 s, so 300 ms from now it runs. */
	itest_sleep_ms(300);

	int64_t t0 = itest_now_ms();
	proc_signal(&p, SIGTERM);
	ITEST_CHECK(proc_wait(&p, 8000), "still running 8 s after SIGTERM; log:\n%s",
	            proc_tail(p.log_path, 20));
	int64_t took = itest_now_ms() - t0;
	ITEST_CHECK(proc_exit_code(&p) == 0, "exit status %d; log:\n%s", proc_exit_code(&p),
	            proc_tail(p.log_path, 20));
	ITEST_CHECK(took < 5000, "exited %lld ms after SIGTERM: a 2 s job should not wait out a 20 s grace",
	            (long long)took);
	assert_int_equal(proc_count(&p, "message", "message_id", id, "outcome", "succeeded", NULL), 1);
	ECW_ASSERT_OK(ecw_table_get(&done, t->client, t->table, "finish-me", "done"));
	ecw_entity_free(done);
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	proc_assert_logs_clean();
}

/* What waits in the prefetch has not started: SIGTERM gives it back at once
 * (visible again, a `released` line each) for another replica, while the
 * job already running finishes within the grace. */
static void test_runtime__sigterm_releases_prefetched_at_once(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char jobs[256];
	struct proc p;

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  slow: {type: test-sleep, duration: 3s, table: %s}\n", t->table);
	o.jobs = jobs;
	o.concurrency = 1;
	o.shutdown_grace = "20s";
	o.worker_extra = "  prefetch: 4\n";
	for (int i = 0; i < 5; i++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"r-%d\"}", i);
		rtfx_put(r, text, NULL);
	}
	rtfx_start_worker(&p, r, "runtime-drain-prefetch", &o);
	wait_all_received(r, &p); /* 1 running, 4 waiting */

	int64_t t0 = itest_now_ms();
	proc_signal(&p, SIGTERM);
	while (rtfx_peek_count(r, t->queue) < 4) {
		ITEST_CHECK(itest_now_ms() - t0 < 2000,
		            "the 4 waiting messages were not visible again within 2 s "
		            "of SIGTERM (the running job takes 3 s); log:\n%s",
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(20);
	}
	ITEST_CHECK(proc_wait(&p, 8000), "still running 8 s after SIGTERM; log:\n%s",
	            proc_tail(p.log_path, 20));
	ITEST_CHECK(proc_exit_code(&p) == 0, "exit status %d; log:\n%s", proc_exit_code(&p),
	            proc_tail(p.log_path, 20));
	assert_int_equal(proc_count(&p, "message", "outcome", "released", NULL), 4);
	assert_int_equal(proc_count(&p, "message", "outcome", "succeeded", NULL), 1);
	assert_int_equal(rtfx_queue_count(r, t->queue), 4);
	proc_assert_logs_clean();
}

/* A second signal cuts the grace period short: status 130 at once. */
static void test_runtime__second_signal_exits_130(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct proc p;

	itest_queue(t);
	o.jobs = "  slow: {type: test-sleep, duration: 60s}\n";
	o.concurrency = 2;
	o.shutdown_grace = "30s";
	rtfx_put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"a\"}", NULL);
	rtfx_put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"b\"}", NULL);
	rtfx_start_worker(&p, r, "runtime-sigint2", &o);
	wait_all_received(r, &p);

	proc_signal(&p, SIGTERM);
	itest_sleep_ms(300);
	ITEST_CHECK(proc_alive(&p), "exited on the first signal with jobs running and a 30 s grace");
	proc_signal(&p, SIGINT);
	ITEST_CHECK(proc_wait(&p, 3000), "still running 3 s after the second signal; log:\n%s",
	            proc_tail(p.log_path, 20));
	ITEST_CHECK(proc_exit_code(&p) == 130, "exit status %d after a second signal, expected 130; log:\n%s",
	            proc_exit_code(&p), proc_tail(p.log_path, 20));
	assert_int_equal(proc_count(&p, "stopping_now", NULL), 1);
	proc_assert_logs_clean();
}

/* ---- 6. concurrency --------------------------------------------------------------------------- */

/* The worker holds at most `concurrency` messages running plus `prefetch`
 * waiting for a job thread: the rest stay visible for other replicas. Both
 * are checked against the queue itself, with 4 jobs that take 3 s. */
static void concurrency_case(struct rtfx *r, int prefetch, size_t want_visible)
{
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct proc p;
	char *page = NULL, extra[64];
	int found;

	itest_queue(t);
	o.jobs = "  slow: {type: test-sleep, duration: 3s}\n";
	o.concurrency = 4;
	o.batch_size = 16;
	snprintf(extra, sizeof(extra), "  prefetch: %d\n", prefetch);
	o.worker_extra = extra;
	for (int i = 0; i < 10; i++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"c-%d\"}", i);
		rtfx_put(r, text, NULL);
	}
	int port = rtfx_start_worker(&p, r, "runtime-concurrency", &o);
	int64_t end = itest_now_ms() + 10000;
	while (rtfx_peek_count(r, t->queue) == 10) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p), "nothing received; log:\n%s",
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(20);
	}
	itest_sleep_ms(1000); /* the jobs take 3 s: nothing finished yet */
	size_t visible = rtfx_peek_count(r, t->queue);
	ITEST_CHECK(visible == want_visible,
	            "%zu of 10 messages visible with 4 jobs running and prefetch %d, expected %zu", visible,
	            prefetch, want_visible);
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	double inflight = proc_metric(page, "ecw_jobs_in_flight", &found, NULL);
	ITEST_CHECK(found == 1 && inflight == (double)(10 - want_visible),
	            "ecw_jobs_in_flight %g, expected %zu", inflight, 10 - want_visible);
	free(page);
	rtfx_finish(&p);
}

static void test_runtime__concurrency_limits_messages_held(void **state)
{
	concurrency_case(*state, 0, 6);
}

static void test_runtime__prefetch_holds_more_waiting(void **state)
{
	concurrency_case(*state, 3, 3);
}

/* ---- 7. start-up failures ------------------------------------------------------------------------- */

static void test_runtime__startup_failures_exit_1(void **state)
{
	struct rtfx *r = *state;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char path[640], envcs[1024];
	struct proc p;
	const char *args[] = {"run", "-c", path, NULL};

	/* A wrong key: the service refuses, the worker says so and exits 1,
	 * and the key it was given never reaches its log. */
	static const char wrong_key[] =
	    "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ==";
	char *cs = itest_connstr_with(wrong_key, 0);
	snprintf(envcs, sizeof(envcs), "ECW_TEST_CONNECTION_STRING=%s", cs);
	free(cs);
	proc_add_secret(wrong_key);
	rtfx_write_config(path, sizeof(path), r, "runtime-badkey", &o);
	const char *env1[] = {envcs, NULL};
	proc_start(&p, "runtime-badkey", args, env1);
	ITEST_CHECK(proc_wait(&p, 20000), "still running 20 s with a wrong key; log:\n%s",
	            proc_tail(p.log_path, 20));
	ITEST_CHECK(proc_exit_code(&p) == 1, "exit status %d with a wrong key, expected 1; log:\n%s",
	            proc_exit_code(&p), proc_tail(p.log_path, 20));
	assert_int_equal(proc_count(&p, "start_failed", NULL), 1);

	/* The metrics address is taken. */
	int port = rtfx_write_config(path, sizeof(path), r, "runtime-portbusy", &o);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	proc_start(&p, "runtime-portbusy", args, NULL);
	bool exited = proc_wait(&p, 20000);
	close(fd);
	ITEST_CHECK(exited, "still running 20 s with its metrics port taken; log:\n%s",
	            proc_tail(p.log_path, 20));
	ITEST_CHECK(proc_exit_code(&p) == 1,
	            "exit status %d with the metrics port taken, expected 1; log:\n%s", proc_exit_code(&p),
	            proc_tail(p.log_path, 20));
	assert_int_equal(proc_count(&p, "start_failed", NULL), 1);

	/* A configuration error is a usage error. */
	proc_write_file(path, sizeof(path), "runtime-badcfg.yaml", "worker:\n  concurrency: lots\n");
	proc_start(&p, "runtime-badcfg", args, NULL);
	ITEST_CHECK(proc_wait(&p, 10000), "still running with a bad config");
	ITEST_CHECK(proc_exit_code(&p) == 2, "exit status %d with a bad config, expected 2; log:\n%s",
	            proc_exit_code(&p), proc_tail(p.log_path, 20));
	proc_assert_logs_clean();
}

/* Storage that is away at start-up (a restart, a network blip) is waited
 * out: the worker says so (start_retry), is alive but not ready, and starts
 * working once storage answers. Storage here is a pair of free ports with
 * nothing behind them, then faultproxy passing them to Azurite. A signal
 * during the wait ends it with a clean exit. */
static void test_runtime__startup_waits_for_storage(void **state)
{
	struct rtfx *r = *state;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char path[640];
	struct proc p, quitter, proxy;
	const char *args[] = {"run", "-c", path, NULL};
	struct proc_proxied st;

	proc_proxied_storage(&st);
	const char *env[] = {st.envcs, NULL};

	/* Stopped while it waits: exit 0, nothing processed. */
	rtfx_write_config(path, sizeof(path), r, "runtime-startwait-quit", &o);
	proc_start(&quitter, "runtime-startwait-quit", args, env);
	PROC_EXPECT_LOG(&quitter, 1, 30000, "start_retry");
	proc_stop(&quitter, 10000);
	assert_int_equal(proc_count(&quitter, "start_failed", NULL), 0);

	int port = rtfx_write_config(path, sizeof(path), r, "runtime-startwait", &o);
	proc_start(&p, "runtime-startwait", args, env);
	PROC_EXPECT_LOG(&p, 2, 30000, "start_retry");
	ITEST_CHECK(proc_alive(&p), "the worker exited while storage was away; log:\n%s",
	            proc_tail(p.log_path, 20));
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 200);
	assert_int_equal(proc_http_get(NULL, port, "/readyz"), 503);

	/* Storage comes back. */
	const char *pargs[] = {"--map", st.map_q, "--map", st.map_t, NULL};
	proc_start_program(&proxy, "runtime-startwait-proxy", proc_tool_bin("faultproxy"), pargs, NULL);
	int status = 0;
	for (int64_t end = itest_now_ms() + 40000; (status = proc_http_get(NULL, port, "/readyz")) != 200;) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p),
		            "/readyz answers %d 40 s after storage came back; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(100);
	}
	char id[64];
	rtfx_put(r, "{\"job\":\"noop\",\"pk\":\"p\",\"rk\":\"after-wait\"}", id);
	PROC_EXPECT_LOG(&p, 1, 10000, "message", "message_id", id, "outcome", "succeeded");
	assert_int_equal(proc_count(&p, "start_failed", NULL), 0);
	proc_stop(&p, 10000);
	proc_stop(&proxy, 10000);
	proc_assert_logs_clean();
}

/* Work goes to the job thread that went idle last, so a worker that is
 * not busy keeps using one warm thread and its connections instead of
 * handing each message to the next of its threads in turn (glibc's
 * condition variable wakes the oldest waiter). Here 12 messages, one at a
 * time, reach a worker of 8 job threads through faultproxy, which counts
 * the connections: the receive loop's and one job thread's (for the
 * deletes), with room for one or two more; the eight threads in turn
 * (each wake to the oldest waiter) opened nine. */
static void test_runtime__idle_work_goes_to_the_last_idle_thread(void **state)
{
	struct rtfx *r = *state;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char path[640], stats[640], id[64], text[128];
	struct proc p, proxy;
	const char *args[] = {"run", "-c", path, NULL};
	struct proc_proxied ps;

	proc_proxied_storage(&ps);
	const char *env[] = {ps.envcs, NULL};
	proc_path(stats, sizeof(stats), "runtime-lifo-proxy.json");
	const char *pargs[] = {"--map", ps.map_q, "--map", ps.map_t, "--stats", stats, NULL};
	proc_start_program(&proxy, "runtime-lifo-proxy", proc_tool_bin("faultproxy"), pargs, NULL);

	o.concurrency = 8;
	int port = rtfx_write_config(path, sizeof(path), r, "runtime-lifo", &o);
	proc_start(&p, "runtime-lifo", args, env);
	for (int64_t end = itest_now_ms() + 30000; proc_http_get(NULL, port, "/readyz") != 200;) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p), "never ready; log:\n%s",
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(50);
	}
	for (int i = 0; i < 12; i++) {
		snprintf(text, sizeof(text), "{\"job\":\"noop\",\"pk\":\"p\",\"rk\":\"one-at-a-time-%d\"}",
		         i);
		rtfx_put(r, text, id);
		PROC_EXPECT_LOG(&p, 1, 10000, "message", "message_id", id, "outcome", "succeeded");
	}
	proc_stop(&p, 10000);
	proc_stop(&proxy, 10000);
	long long n = proc_proxy_stat(stats, "connections");
	ITEST_CHECK(n >= 2 && n <= 4,
	            "%lld connections for 12 messages one at a time (want 2..4: one job thread "
	            "at work, not each of the 8 in turn)",
	            n);
	proc_assert_logs_clean();
}

/* ---- 8. metrics, liveness and readiness ----------------------------------------------------------- */

/* A job that makes no progress is noticed: no storage call of its job
 * completes for the stall timeout (here 1.5 s, through the test build's
 * ECW_TEST_STALL_TIMEOUT_MS; the configuration allows 1m..24h), so the
 * worker logs it once with the job and the message, ecw_jobs_stalled says
 * 1 and /healthz fails (the orchestrator restarts the pod; the message
 * comes back through its lease). When the job moves on, all is well
 * again. */
static void test_runtime__stalled_job_fails_healthz(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct proc p;
	char path[640], id[64], *page = NULL;
	int found = 0;

	itest_queue(t);
	o.jobs = "  slow: {type: test-sleep, duration: 6s}\n";
	int port = rtfx_write_config(path, sizeof(path), r, "runtime-stall", &o);
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {"ECW_TEST_STALL_TIMEOUT_MS=1500", r->worker_env[0] ? r->worker_env : NULL, NULL};
	proc_start(&p, "runtime-stall", args, env);
	for (int64_t end = itest_now_ms() + 20000; proc_http_get(NULL, port, "/healthz") != 200;) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p), "never healthy; log:\n%s",
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(100);
	}
	rtfx_put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"stuck\"}", id);
	PROC_EXPECT_LOG(&p, 1, 10000, "job_stalled", "job", "slow", "message_id", id);
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 503);
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	ITEST_CHECK(proc_metric(page, "ecw_jobs_stalled", &found, NULL) == 1 && found == 1,
	            "ecw_jobs_stalled is not 1 while the job is stalled:\n%s", page);
	free(page);
	page = NULL;
	/* Logged once, however long it lasts. */
	itest_sleep_ms(1000);
	assert_int_equal(proc_count(&p, "job_stalled", NULL), 1);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
	for (int64_t end = itest_now_ms() + 5000; proc_http_get(NULL, port, "/healthz") != 200;) {
		ITEST_CHECK(itest_now_ms() < end, "/healthz still fails after the job finished");
		itest_sleep_ms(100);
	}
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	assert_true(proc_metric(page, "ecw_jobs_stalled", &found, NULL) == 0);
	free(page);
	rtfx_finish(&p);
}

static void test_runtime__metrics_endpoint(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct proc p;
	char *page = NULL;
	int status = 0, found;

	itest_queue(t);
	o.jobs = "  noop: {type: test-noop}\n  broken: {type: test-fail}\n";
	int port = rtfx_start_worker(&p, r, "runtime-metrics", &o);

	int64_t end = itest_now_ms() + 10000;
	while ((status = proc_http_get(NULL, port, "/readyz")) != 200) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p), "/readyz answers %d; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(100);
	}
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 200);

	for (int i = 0; i < 5; i++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"job\":\"noop\",\"pk\":\"p\",\"rk\":\"ok-%d\"}", i);
		rtfx_put(r, text, NULL);
	}
	rtfx_put(r, "{\"job\":\"broken\",\"pk\":\"p\",\"rk\":\"bad\"}", NULL);
	PROC_EXPECT_LOG(&p, 6, 15000, "message", NULL);

	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	double v =
	    proc_metric(page, "ecw_messages_total", &found, "job=\"noop\"", "outcome=\"succeeded\"", NULL);
	ITEST_CHECK(found == 1 && v == 5,
	            "ecw_messages_total{job=\"noop\",outcome=\"succeeded\"} = %g (%d samples), "
	            "expected 5; page:\n%s",
	            v, found, page);
	v = proc_metric(page, "ecw_messages_total", &found, "job=\"broken\"", "outcome=\"poisoned\"", NULL);
	ITEST_CHECK(found == 1 && v == 1,
	            "ecw_messages_total{job=\"broken\",outcome=\"poisoned\"} = %g (%d samples), "
	            "expected 1; page:\n%s",
	            v, found, page);
	ITEST_CHECK(
	    strstr(page, "ecw_messages_total{job=\"noop\",outcome=\"succeeded\"} 5") != NULL,
	    "the page lacks the exact sample ecw_messages_total{job=\"noop\",outcome=\"succeeded\"} 5:\n%s",
	    page);
	v = proc_metric(page, "ecw_jobs_in_flight", &found, NULL);
	ITEST_CHECK(found == 1 && v == 0, "ecw_jobs_in_flight = %g (%d samples), expected 0", v, found);
	v = proc_metric(page, "ecw_messages_received_total", &found, NULL);
	ITEST_CHECK(found == 1 && v == 6, "ecw_messages_received_total = %g, expected 6", v);
	v = proc_metric(page, "ecw_messages_poisoned_total", &found, "reason=\"permanent\"", NULL);
	ITEST_CHECK(found == 1 && v == 1,
	            "ecw_messages_poisoned_total{reason=\"permanent\"} = %g, expected 1", v);
	v = proc_metric(page, "ecw_job_duration_seconds_count", &found, "job=\"noop\"", NULL);
	ITEST_CHECK(found == 1 && v == 5, "ecw_job_duration_seconds_count{job=\"noop\"} = %g, expected 5", v);
	v = proc_metric(page, "ecw_storage_requests_total", &found, NULL);
	ITEST_CHECK(found >= 1 && v >= 12,
	            "ecw_storage_requests_total sums to %g over %d samples; expected at least "
	            "the 6 deletes, the poison put and the receives",
	            v, found);
	free(page);
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 200);
	assert_int_equal(proc_http_get(NULL, port, "/readyz"), 200);
	rtfx_finish(&p);
}

/* An idle worker still receives (empty answers): the gauge says when it
 * last did, "empty or not" as its help text says, so an alert on it tells a
 * stuck worker from an idle one. */
static void test_runtime__metrics_last_receive_on_idle_worker(void **state)
{
	struct rtfx *r = *state;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct proc p;
	char *page = NULL;
	int status = 0, found;

	itest_queue(r->fx.t);
	int port = rtfx_start_worker(&p, r, "runtime-idle", &o);
	int64_t end = itest_now_ms() + 10000;
	while ((status = proc_http_get(NULL, port, "/readyz")) != 200) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p), "/readyz answers %d; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(100);
	}
	itest_sleep_ms(1000);
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	double last = proc_metric(page, "ecw_last_receive_timestamp_seconds", &found, NULL);
	long long now = (long long)time(NULL);
	free(page);
	ITEST_CHECK(
	    found == 1 && last >= (double)(now - 5) && last <= (double)(now + 5),
	    "ecw_last_receive_timestamp_seconds %.0f on an idle worker polling every 200 ms; now is %lld",
	    last, now);
	rtfx_finish(&p);
}

/* /readyz answers 503 while the worker cannot receive (its queue is missing
 * and create_missing is off: the start says so, queue_missing, and waits),
 * and 200 again once it can; /healthz stays 200: the process is alive. (Its
 * poison queue must be there: without it the worker refuses to start,
 * test_missing_table.) */
static void test_runtime__readyz_follows_storage(void **state)
{
	struct rtfx *r = *state;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct proc p;
	int status = 0;

	o.worker_extra = "  create_missing: false\n";
	ECW_ASSERT_OK(ecw_queue_create(NULL, r->fx.t->client, r->fx.poison));
	int port = rtfx_start_worker(&p, r, "runtime-readyz", &o);
	PROC_EXPECT_LOG(&p, 1, 10000, "queue_missing", "queue", r->fx.t->queue);
	int64_t end = itest_now_ms() + 10000;
	while ((status = proc_http_get(NULL, port, "/readyz")) != 503) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p),
		            "/readyz answers %d without a queue; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(50);
	}
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 200);
	itest_queue(r->fx.t);
	end = itest_now_ms() + 10000;
	while ((status = proc_http_get(NULL, port, "/readyz")) != 200) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p),
		            "/readyz answers %d with the queue back; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(50);
	}
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 200);
	char id[64];
	rtfx_put(r, "{\"job\":\"noop\",\"pk\":\"p\",\"rk\":\"after\"}", id);
	PROC_EXPECT_LOG(&p, 1, 10000, "message", "message_id", id, "outcome", "succeeded");
	rtfx_finish(&p);
}

/* ---- 9. SAS credentials --------------------------------------------------------------------------- */

#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

/* An account SAS for devstoreaccount1 (see test_sas.c): "sv=...&sig=..."
 * (heap), and its signature as signed and as percent-encoded in the token. */
static char *account_sas(bool break_signature, char *sig_out, size_t sig_cap, char *pct_out, size_t pct_cap)
{
	const char *perms = "rwdlacup";
	struct ecw_buf key, sts, sig, pct, token;

	ecw_buf_init(&key, 0);
	ecw_buf_init(&sts, 0);
	ecw_buf_init(&sig, 0);
	ecw_buf_init(&pct, 0);
	ecw_buf_init(&token, 0);
	ECW_ASSERT_OK(ecw_base64_decode(&key, DEV_KEY, strlen(DEV_KEY)));
	ECW_ASSERT_OK(ecw_buf_printf(
	    &sts, "devstoreaccount1\n%s\nqt\nsco\n\n2099-01-01T00:00:00Z\n\nhttps,http\n2019-02-02\n",
	    perms));
	ECW_ASSERT_OK(ecw_auth_hmac_sha256_base64(&sig, (unsigned char *)key.ptr, key.len, sts.ptr, sts.len));
	if (break_signature)
		sig.ptr[0] = sig.ptr[0] == 'A' ? 'B' : 'A';
	ECW_ASSERT_OK(ecw_escape_pct(&pct, sig.ptr, sig.len));
	ECW_ASSERT_OK(ecw_buf_printf(&token,
	                             "sv=2019-02-02&ss=qt&srt=sco&sp=%s&se=2099-01-01T00%%3A00%%3A00Z"
	                             "&spr=https,http&sig=%s",
	                             perms, ecw_buf_cstr(&pct)));
	snprintf(sig_out, sig_cap, "%s", ecw_buf_cstr(&sig));
	snprintf(pct_out, pct_cap, "%s", ecw_buf_cstr(&pct));
	ecw_buf_dispose(&key);
	ecw_buf_dispose(&sts);
	ecw_buf_dispose(&sig);
	ecw_buf_dispose(&pct);
	return ecw_buf_take(&token);
}

/* Runs the worker on a SAS-only connection string: with a good SAS it
 * works, with a bad one it exits 1, and the signature is in no log. */
static void test_runtime__sas_signature_stays_out_of_logs(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	const char *qp = getenv("ECW_TEST_QUEUE_PORT"), *tp = getenv("ECW_TEST_TABLE_PORT");
	char path[640], envcs[2048], sig[128], pct[256], jobs[256], id[64];
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {envcs, NULL};
	struct proc p;

	ITEST_CHECK(qp && tp, "ECW_TEST_QUEUE_PORT / ECW_TEST_TABLE_PORT are not set");
	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  count: {type: test-count, table: %s}\n", t->table);
	o.jobs = jobs;
	for (int bad = 0; bad < 2; bad++) {
		char *sas = account_sas(bad, sig, sizeof(sig), pct, sizeof(pct));
		snprintf(envcs, sizeof(envcs),
		         "ECW_TEST_CONNECTION_STRING=QueueEndpoint=http://127.0.0.1:%s/devstoreaccount1;"
		         "TableEndpoint=http://127.0.0.1:%s/devstoreaccount1;SharedAccessSignature=%s",
		         qp, tp, sas);
		free(sas);
		proc_add_secret(sig);
		proc_add_secret(pct);
		rtfx_write_config(path, sizeof(path), r, bad ? "runtime-sas-bad" : "runtime-sas", &o);
		proc_start(&p, bad ? "runtime-sas-bad" : "runtime-sas", args, env);
		if (bad) {
			ITEST_CHECK(proc_wait(&p, 20000), "still running 20 s with a bad SAS; log:\n%s",
			            proc_tail(p.log_path, 20));
			ITEST_CHECK(proc_exit_code(&p) == 1,
			            "exit status %d with a bad SAS, expected 1; log:\n%s", proc_exit_code(&p),
			            proc_tail(p.log_path, 20));
			assert_int_equal(proc_count(&p, "start", "auth", "sas", NULL), 1);
		} else {
			rtfx_put(r, "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"via-sas\"}", id);
			PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
			assert_int_equal(rtfx_rows_with_pk(r, t->table, "via-sas", NULL, 0), 1);
			proc_stop(&p, 10000);
		}
	}
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_runtime__long_job_keeps_lease, rtfx_setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__lost_lease_stops_writes, rtfx_setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__sigterm_releases_inflight, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__exactly_once_one_worker, rtfx_setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__exactly_once_three_workers, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__exactly_once_across_renewals, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__metrics_endpoint, rtfx_setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__stalled_job_fails_healthz, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__metrics_last_receive_on_idle_worker, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__readyz_follows_storage, rtfx_setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__sas_signature_stays_out_of_logs, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__sigterm_lets_short_jobs_finish, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__sigterm_releases_prefetched_at_once, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__second_signal_exits_130, rtfx_setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__concurrency_limits_messages_held, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__prefetch_holds_more_waiting, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__startup_failures_exit_1, rtfx_setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__startup_waits_for_storage, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__idle_work_goes_to_the_last_idle_thread, rtfx_setup,
	                                    rtfx_teardown),
	};
	/* ECW_TEST_FILTER=test_runtime__sig* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("runtime", tests, NULL, NULL);
}
