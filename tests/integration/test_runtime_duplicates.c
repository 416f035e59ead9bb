/* SPDX-License-Identifier: MIT */
/* test_runtime_duplicates.c - what the worker does with messages of one job and keys held at once, and
 * how much it holds together, as a process: build/ecworker-test runs against the real Azurite with a
 * config written per test (runtimefx.h), judged by the rows its test jobs write (test-count: one row per
 * run, keyed by the message's rk, id and dequeue count; test-flaky: one per attempt), by its JSON log lines
 * and by its metrics. Duplicates received together run once and each is concluded with that run; a
 * duplicate arriving while its twin runs waits and runs after it, never beside it; a failing run gives
 * each rider its own outcome from its own dequeue count and deletes none of them; and a deep queue is
 * received several batches at a time, so that groups form over more than one receive. */
#include "itest.h"
#include "proc.h"
#include "runtimefx.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The message lines about rk (outcome any), in log order, up to max;
 * returns how many there are. Owned by log. */
static size_t lines_for_rk(struct json_object **out, size_t max, const struct proc_log *log, const char *rk)
{
	size_t n = proc_log_count(log, "message", "rk", rk, NULL);

	for (size_t i = 0; i < n && i < max; i++)
		out[i] = proc_log_find(log, i, "message", "rk", rk, NULL);
	return n;
}

/* The one row of rows[0..n) written by message id (NULL: none). */
static struct ecw_entity *row_of(struct ecw_entity **rows, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++) {
		const struct ecw_prop *mid = ecw_entity_get(rows[i], "MessageId");
		if (mid && mid->type == ECW_EDM_STRING && strcmp(mid->v.s, id) == 0)
			return rows[i];
	}
	return NULL;
}

/* The jobs: line "  JOB: {type: ..., table: T}" for job (its text up to
 * the table) in jobs, with the test's queue and table marked for teardown. */
static const char *use_job(char *jobs, size_t cap, struct itest *t, const char *job)
{
	itest_queue(t);
	t->table_used = true;
	snprintf(jobs, cap, "  %s, table: %s}\n", job, t->table);
	return jobs;
}

static void rows_free(struct ecw_entity **rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ecw_entity_free(rows[i]);
}

/* ---- 1. duplicates received together run once ----------------------------------------------------- */

/* 20 copies of one message and 5 distinct ones, all enqueued before the
 * worker starts (one receive holds them all): the job runs once for the 20
 * (one row), each copy is deleted and has its own line: the leader with
 * "duplicates": 19, each rider with "ran_with" naming it; the metric counts
 * the riders. Without riding, 20 rows. */
#define DUP_COPIES 20
#define DUP_DISTINCT 5

static void test_runtime_duplicates__run_once(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct ecw_entity *rows[DUP_COPIES + 1];
	struct json_object *lines[DUP_COPIES + 1];
	char jobs[256], msg[128], ids[DUP_COPIES][64], *page = NULL;
	struct proc p;
	struct proc_log log;
	int port;

	o.jobs = use_job(jobs, sizeof(jobs), t, "count: {type: test-count");
	o.batch_size = 32;
	for (int i = 0; i < DUP_COPIES; i++) {
		rtfx_put(r, "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"hot\"}", ids[i]);
		if (i % 4 == 0) {
			snprintf(msg, sizeof(msg), "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"cold-%d\"}",
			         i / 4);
			rtfx_put(r, msg, NULL);
		}
	}
	port = rtfx_start_worker(&p, r, "dups-run-once", &o);
	PROC_EXPECT_LOG(&p, DUP_COPIES + DUP_DISTINCT, 20000, "message", "outcome", "succeeded");

	size_t nrows = rtfx_rows_with_pk(r, t->table, "hot", rows, DUP_COPIES + 1);
	ITEST_CHECK(nrows == 1, "the job ran %zu times for %d copies of one message, expected once", nrows,
	            DUP_COPIES);
	rows_free(rows, nrows < DUP_COPIES + 1 ? nrows : DUP_COPIES + 1);
	for (int i = 0; i < DUP_DISTINCT; i++) {
		struct ecw_entity *cold[2];
		snprintf(msg, sizeof(msg), "cold-%d", i);
		size_t n = rtfx_rows_with_pk(r, t->table, msg, cold, 2);
		ITEST_CHECK(n == 1, "%zu runs for %s, expected 1", n, msg);
		rows_free(cold, n < 2 ? n : 2);
	}

	proc_log_read(&log, p.log_path);
	size_t nlines = lines_for_rk(lines, DUP_COPIES + 1, &log, "hot");
	assert_int_equal(nlines, DUP_COPIES);
	const char *leader = NULL;
	for (size_t i = 0; i < nlines; i++)
		if (proc_field_int(lines[i], "duplicates", 0) == DUP_COPIES - 1)
			leader = proc_field(lines[i], "message_id");
	ITEST_CHECK(leader != NULL, "no line says \"duplicates\": %d; log:\n%s", DUP_COPIES - 1,
	            proc_tail(p.log_path, 30));
	for (int i = 0; i < DUP_COPIES; i++) {
		struct json_object *l = proc_log_find(&log, 0, "message", "message_id", ids[i], NULL);
		ITEST_CHECK(l != NULL, "no line for copy %d (%s)", i, ids[i]);
		assert_string_equal(proc_field(l, "outcome"), "succeeded");
		if (strcmp(ids[i], leader) != 0)
			ITEST_CHECK(strcmp(proc_field(l, "ran_with"), leader) == 0,
			            "copy %s ran_with '%s', expected the leader %s", ids[i],
			            proc_field(l, "ran_with"), leader);
	}
	proc_log_dispose(&log);

	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	assert_int_equal(rtfx_queue_count(r, r->fx.poison), 0);
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	double dedup = proc_metric(page, "ecw_messages_deduplicated_total", NULL, "job=\"count\"", NULL);
	ITEST_CHECK(dedup == DUP_COPIES - 1,
	            "ecw_messages_deduplicated_total{job=\"count\"} %.0f, expected %d", dedup,
	            DUP_COPIES - 1);
	free(page);
	rtfx_finish(&p);
}

/* A redelivered duplicate does not ride: its earlier delivery may have left
 * state only its own run cleans (chaos: an index-list reference kept the
 * intent of a message that rode on its second delivery). Three copies, one
 * received once by the test and visible again after the other two (dequeue
 * count 2, last in line): the two first deliveries run once together, the
 * redelivered one runs on its own, after them. (A redelivered copy that
 * leads may take first deliveries along: they left nothing.) */
static void test_runtime_duplicates__redelivered_copy_runs_itself(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct ecw_entity *rows[4];
	char jobs[256], first[64], ids[2][64];
	struct proc p;
	struct proc_log log;
	size_t got = 0;

	o.jobs = use_job(jobs, sizeof(jobs), t, "count: {type: test-count");
	o.batch_size = 32;
	rtfx_put(r, "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"again\"}", first);
	struct ecw_queue_msg *m = rtfx_receive_n(&got, r, t->queue, 1, 3, 5000);
	assert_int_equal(got, 1);
	ecw_queue_msgs_free(m, got);
	rtfx_put(r, "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"again\"}", ids[0]);
	rtfx_put(r, "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"again\"}", ids[1]);
	itest_sleep_ms(3300); /* the received copy is visible again, behind the other two */
	rtfx_start_worker(&p, r, "dups-redelivered", &o);
	PROC_EXPECT_LOG(&p, 3, 20000, "message", "outcome", "succeeded");
	proc_log_read(&log, p.log_path);
	struct json_object *l = proc_log_find(&log, 0, "message", "message_id", first, NULL);
	assert_int_equal(proc_field_int(l, "dequeue_count", -1), 2);
	ITEST_CHECK(proc_field(l, "ran_with")[0] == '\0', "the redelivered copy rode with %s",
	            proc_field(l, "ran_with"));
	proc_log_dispose(&log);
	size_t nrows = rtfx_rows_with_pk(r, t->table, "again", rows, 4);
	ITEST_CHECK(nrows == 2, "%zu runs for three copies, one redelivered: expected 2", nrows);
	rows_free(rows, nrows < 4 ? nrows : 4);
	rtfx_finish(&p);
}

/* ---- 2. a duplicate arriving while its twin runs waits for it --------------------------------------- */

/* The first message runs for 2 s; its twin is put once the worker holds the
 * first (ecw_jobs_in_flight 1), with free job threads beside it. The twin
 * must not ride (the run may have read before the twin's change) nor run
 * beside it: it runs after, so its row is written after the first's.
 * Without the wait it runs at once on another thread and writes its row
 * about 2 s before the first. */
static void test_runtime_duplicates__twin_in_flight_runs_after(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct ecw_entity *rows[3];
	char jobs[256], first[64], twin[64], *page = NULL;
	struct proc p;
	struct proc_log log;
	int port;

	o.jobs = use_job(jobs, sizeof(jobs), t, "count: {type: test-count");
	rtfx_put(r, "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"twin\",\"sleep_ms\":2000}", first);
	port = rtfx_start_worker(&p, r, "dups-twin", &o);
	double held = 0;
	for (int i = 0; i < 400 && held < 1; i++) {
		itest_sleep_ms(20);
		if (proc_http_get(&page, port, "/metrics") == 200)
			held = proc_metric(page, "ecw_jobs_in_flight", NULL, NULL);
		free(page);
		page = NULL;
	}
	ITEST_CHECK(held >= 1, "the worker never held the first message");
	rtfx_put(r, "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"twin\"}", twin);
	PROC_EXPECT_LOG(&p, 2, 15000, "message", "outcome", "succeeded");

	size_t n = rtfx_rows_with_pk(r, t->table, "twin", rows, 3);
	ITEST_CHECK(n == 2, "%zu runs for two messages that did not arrive together, expected 2", n);
	struct ecw_entity *a = row_of(rows, n, first), *b = row_of(rows, n, twin);
	assert_non_null(a);
	assert_non_null(b);
	const struct ecw_prop *a_at = ecw_entity_get(a, "MonoMs"), *b_at = ecw_entity_get(b, "MonoMs");
	assert_true(a_at && b_at && a_at->type == ECW_EDM_INT64 && b_at->type == ECW_EDM_INT64);
	int64_t a_ms = a_at->v.i64, b_ms = b_at->v.i64;
	ITEST_CHECK(b_ms >= a_ms, "the twin finished %lld ms before the first: it ran beside it",
	            (long long)(a_ms - b_ms));
	rows_free(rows, n < 3 ? n : 3);

	proc_log_read(&log, p.log_path);
	struct json_object *lt = proc_log_find(&log, 0, "message", "message_id", twin, NULL);
	assert_non_null(lt);
	assert_string_equal(proc_field(lt, "ran_with"), "");
	assert_int_equal(proc_log_count(&log, "message", "duplicates", PROC_ANY, NULL), 0);
	proc_log_dispose(&log);
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	rtfx_finish(&p);
}

/* ---- 3. a failing run: each rider its own outcome, none deleted ------------------------------------- */

/* Two copies of a message whose job always fails (transiently), received
 * together with dequeue counts 1 and 2 (the test received one copy before):
 * with max_dequeue_count 2 the rules retry the first and poison the second.
 * The job runs once (one attempt row), the copy on its first delivery stays
 * on the queue (retried, hidden), the other is in the poison queue with the
 * run's error, and each line says so. Without riding, two attempts. */
static void test_runtime_duplicates__failed_run_each_own_outcome(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct ecw_entity *rows[3];
	const char *text = "{\"job\":\"flaky\",\"pk\":\"p\",\"rk\":\"bad\"}";
	char jobs[256], early[64], late[64];
	struct proc p;
	struct proc_log log;
	size_t got = 0;

	o.jobs = use_job(jobs, sizeof(jobs), t, "flaky: {type: test-flaky, fail_times: 9");
	o.max_dequeue = 2;
	rtfx_put(r, text, early);
	struct ecw_queue_msg *m = rtfx_receive_n(&got, r, t->queue, 1, 1, 5000);
	assert_int_equal(got, 1);
	ecw_queue_msgs_free(m, got);
	itest_sleep_ms(1300); /* the received copy is visible again, delivered once */
	/* Put after it is visible again, so the redelivered copy comes first
	 * and leads: only a first delivery may ride. */
	rtfx_put(r, text, late);
	rtfx_start_worker(&p, r, "dups-failed", &o);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "outcome", "retried");
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "outcome", "poisoned");

	size_t n = rtfx_rows_with_pk(r, t->table, "bad", rows, 3);
	ITEST_CHECK(n == 1, "%zu attempts for two copies received together, expected 1", n);
	rows_free(rows, n < 3 ? n : 3);
	proc_log_read(&log, p.log_path);
	struct json_object *le = proc_log_find(&log, 0, "message", "message_id", early, NULL);
	struct json_object *ll = proc_log_find(&log, 0, "message", "message_id", late, NULL);
	assert_non_null(le);
	assert_non_null(ll);
	assert_int_equal(proc_field_int(le, "dequeue_count", -1), 2);
	assert_string_equal(proc_field(le, "outcome"), "poisoned");
	assert_int_equal(proc_field_int(ll, "dequeue_count", -1), 1);
	assert_string_equal(proc_field(ll, "outcome"), "retried");
	ITEST_CHECK(strcmp(proc_field(le, "ran_with"), late) == 0 ||
	                strcmp(proc_field(ll, "ran_with"), early) == 0,
	            "neither copy rode with the other: ran_with '%s' and '%s'", proc_field(le, "ran_with"),
	            proc_field(ll, "ran_with"));
	ITEST_CHECK(strstr(proc_field(le, "error"), "test-flaky") &&
	                strstr(proc_field(ll, "error"), "test-flaky"),
	            "the run's error is not on both lines: '%s', '%s'", proc_field(le, "error"),
	            proc_field(ll, "error"));
	proc_log_dispose(&log);
	assert_int_equal(rtfx_queue_count(r, t->queue), 1); /* the retried copy, hidden */
	assert_int_equal(rtfx_queue_count(r, r->fx.poison), 1);
	rtfx_finish(&p);
}

/* ---- 4. a deep queue forms groups over several receives -------------------------------------------- */

/* 96 move messages over 6 partitions, interleaved (a receive of 32 holds
 * about 5 of each), all enqueued before the worker starts, with room for
 * all (prefetch 96). Received a batch at a time the job threads took groups
 * of about 5; received together they form groups of up to move's
 * group_max. The mean of the "group" field over the message lines must be
 * above what one receive can give. */
#define DEEP_PARTS 6
#define DEEP_EACH 16

static void test_runtime_duplicates__groups_span_receives(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char jobs[256], msg[128];
	struct proc p;
	struct proc_log log;

	itest_queue(t);
	t->table_used = t->table2_used = true;
	snprintf(jobs, sizeof(jobs), "  archive: {type: move, from: %s, to: %s}\n", t->table, t->table2);
	/* The move's source is the application's table: the worker never
	 * creates it (its entities are absent: each move is "missing"). */
	ECW_ASSERT_OK(ecw_table_create(NULL, t->client, t->table));
	o.jobs = jobs;
	o.batch_size = 32;
	o.concurrency = 8;
	o.worker_extra = "  prefetch: 96\n";
	for (int i = 0; i < DEEP_EACH; i++)
		for (int k = 0; k < DEEP_PARTS; k++) {
			snprintf(msg, sizeof(msg),
			         "{\"job\":\"archive\",\"pk\":\"part-%d\",\"rk\":\"e-%02d\"}", k, i);
			rtfx_put(r, msg, NULL);
		}
	rtfx_start_worker(&p, r, "dups-deep", &o);
	PROC_EXPECT_LOG(&p, DEEP_PARTS * DEEP_EACH, 30000, "message", "outcome", "succeeded");

	proc_log_read(&log, p.log_path);
	size_t n = proc_log_count(&log, "message", NULL);
	long long sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += proc_field_int(proc_log_find(&log, i, "message", NULL), "group", 1);
	double mean = n ? (double)sum / (double)n : 0;
	ITEST_CHECK(mean >= 10.0,
	            "mean group %.2f over %zu messages: groups did not span receives (one receive "
	            "of 32 over %d partitions gives about %d)",
	            mean, n, DEEP_PARTS, 32 / DEEP_PARTS);
	proc_log_dispose(&log);
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	rtfx_finish(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_runtime_duplicates__run_once, rtfx_setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime_duplicates__redelivered_copy_runs_itself, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime_duplicates__twin_in_flight_runs_after, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime_duplicates__failed_run_each_own_outcome, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime_duplicates__groups_span_receives, rtfx_setup,
	                                    rtfx_teardown),
	};
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("runtime_duplicates", tests, NULL, NULL);
}
