/* SPDX-License-Identifier: MIT */
/* test_job_index_list_hot.c - one hot index list (every employee named Jones) against the real Azurite:
 * the changes that the runs of one worker make to it at the same time are written together
 * (jobs/index_list_combine.c). Cases: 1,000 keys of one value with one worker at concurrency 16 (the
 * list ends exact, in far fewer list writes than messages, and the sources' reads shared as queries);
 * two workers x 16 on one value (they converge, nothing poisoned, the 412s per message reported); a crash
 * right after a save holding several runs' keys (every message comes back, the state converges). The
 * job's other cases are in test_job_index_list*.c. */
#include "indexlistfx.h"
#include "itest.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOT "Jones"

/* n employees named Jones, each with its message. */
static void seed_hot(struct wfx *x, int n)
{
	for (int i = 0; i < n; i++) {
		char rk[16];
		snprintf(rk, sizeof(rk), "h%04d", i);
		il_change(x, "Staff", rk, HOT);
	}
}

/* What a worker's /metrics says: table writes attempted, and 412 answers. */
static void worker_counts(long long *writes, long long *m412, int port)
{
	char *page = NULL;

	ITEST_CHECK(proc_http_get(&page, port, "/metrics") == 200, "no /metrics on port %d", port);
	*writes = proc_table_writes(page);
	*m412 = (long long)proc_metric(page, "ecw_storage_requests_total", NULL, "status=\"412\"", NULL);
	free(page);
}

/* Table reads the worker sent: single GETs and queries. */
static void worker_reads(long long *gets, long long *queries, int port)
{
	char *page = NULL;

	ITEST_CHECK(proc_http_get(&page, port, "/metrics") == 200, "no /metrics on port %d", port);
	*gets = (long long)proc_metric(page, "ecw_storage_requests_total", NULL, "op=\"table.get\"", NULL);
	*queries =
	    (long long)proc_metric(page, "ecw_storage_requests_total", NULL, "op=\"table.query\"", NULL);
	free(page);
}

/* Waits until the queue drained with every worker alive; nothing poisoned. */
static void drain(struct wfx *x, struct proc *p, size_t np, int timeout_ms)
{
	il_wait_drained(x, x->t->queue, p, np, timeout_ms);
	for (size_t w = 0; w < np; w++)
		ITEST_CHECK(proc_alive(&p[w]), "worker %zu exited:\n%s", w + 1, proc_tail(p[w].log_path, 20));
	assert_int_equal(il_queue_count(x, x->poison), 0);
}

/* The list holds n keys, and the index is the recomputation's. */
static void expect_hot_list(struct wfx *x, int n)
{
	char *keys = il_list_keys(x, HOT, NULL);
	int count = 0;

	ITEST_CHECK(keys != NULL, "no list %s", HOT);
	for (const char *s = keys; (s = strstr(s, "[\"Staff\"")) != NULL; s++)
		count++;
	ITEST_CHECK(count == n, "list %s holds %d keys, expected %d", HOT, count, n);
	free(keys);
	assert_int_equal(il_check_index(x), 1);
}

/* ---- 1. one worker: the runs' changes written together ------------------------------------------ */

#define ONE_N 1000

static void test_job_index_list_hot__one_worker_combines(void **state)
{
	struct wfx *x = *state;
	struct il_wopts o = IL_WOPTS_DEFAULT;
	struct proc p;
	long long writes, m412;

	seed_hot(x, ONE_N);
	o.concurrency = 16;
	int64_t t0 = itest_now_ms();
	int port = il_start_worker(&p, x, "il-hot-one", &o, NULL);
	PROC_EXPECT_LOG(&p, ONE_N, 60000, "message", "outcome", "succeeded");
	int64_t ms = itest_now_ms() - t0;
	drain(x, &p, 1, 10000);
	worker_counts(&writes, &m412, port);
	long long gets, queries;
	worker_reads(&gets, &queries, port);
	proc_stop(&p, 10000);
	expect_hot_list(x, ONE_N);
	print_message("reads: %lld GETs, %lld queries (%.2f per message)\n", gets, queries,
	              (double)(gets + queries) / ONE_N);
	/* Each message reads its source twice and its ref once (3.26 reads a
	 * message with every read a GET, on this run's shape); 16 runs on one
	 * partition meet, and their source reads go out as shared queries
	 * (jobs/shared_reads.c: 1.86 a message when measured). */
	ITEST_CHECK(queries > 0 && gets + queries <= ONE_N * 26 / 10,
	            "%lld GETs and %lld queries for %d messages: the source reads were not shared", gets,
	            queries, ONE_N);

	/* Each message writes its ref twice (the intent, the commit); the rest
	 * are the list's writes, every attempt counted. */
	long long list_writes = writes - 2LL * ONE_N;
	print_message("hot list, one worker x 16: %d messages in %lld ms, %lld list writes (%.3f per "
	              "message), %lld 412s\n",
	              ONE_N, (long long)ms, list_writes, (double)list_writes / ONE_N, m412);
	ITEST_CHECK(list_writes > 0 && list_writes <= ONE_N / 2,
	            "%lld list writes for %d messages: the changes were not combined", list_writes, ONE_N);
	proc_assert_logs_clean();
}

/* ---- 1b. reads ahead: one job thread, the messages waiting behind it -------------------------- */

#define AHEAD_N 200

static void test_job_index_list_hot__reads_ahead(void **state)
{
	struct wfx *x = *state;
	struct il_wopts o = IL_WOPTS_DEFAULT;
	struct proc p;
	long long gets, queries;

	/* Distinct values in one partition, one job thread: no two reads ever
	 * meet, so any query is a read ahead, made by a run for the messages
	 * waiting behind it (its peers) and taken by their step 1. */
	for (int i = 0; i < AHEAD_N; i++) {
		char rk[16], last[16];
		snprintf(rk, sizeof(rk), "a%04d", i);
		snprintf(last, sizeof(last), "Name%04d", i);
		il_change(x, "Staff", rk, last);
	}
	o.concurrency = 1;
	o.batch_size = 32; /* and as many waiting (prefetch) */
	int port = il_start_worker(&p, x, "il-ahead", &o, NULL);
	PROC_EXPECT_LOG(&p, AHEAD_N, 60000, "message", "outcome", "succeeded");
	drain(x, &p, 1, 10000);
	worker_reads(&gets, &queries, port);
	proc_stop(&p, 10000);
	assert_int_equal(il_check_index(x), AHEAD_N);
	print_message("reads ahead, one worker x 1: %lld GETs, %lld queries (%.2f reads per message)\n", gets,
	              queries, (double)(gets + queries) / AHEAD_N);
	/* Each message reads its source twice, its ref and its (new) list
	 * once: 4 GETs without reading ahead. With it, most first reads of
	 * the source come from a query made for up to 14 messages. */
	ITEST_CHECK(queries > 0 && gets + queries <= AHEAD_N * 35 / 10,
	            "%lld GETs and %lld queries for %d messages: no source was read ahead", gets, queries,
	            AHEAD_N);
	proc_assert_logs_clean();
}

/* ---- 2. two workers x 16 on one value ---------------------------------------------------------- */

#define TWO_N 600

static void test_job_index_list_hot__two_workers_converge(void **state)
{
	struct wfx *x = *state;
	struct il_wopts o = IL_WOPTS_DEFAULT;
	struct proc p[2];
	int port[2];
	long long writes[2], m412[2];

	seed_hot(x, TWO_N);
	o.concurrency = 16;
	int64_t t0 = itest_now_ms();
	port[0] = il_start_worker(&p[0], x, "il-hot-w1", &o, NULL);
	port[1] = il_start_worker(&p[1], x, "il-hot-w2", &o, NULL);
	drain(x, p, 2, 60000);
	int64_t ms = itest_now_ms() - t0;
	for (int w = 0; w < 2; w++) {
		worker_counts(&writes[w], &m412[w], port[w]);
		proc_stop(&p[w], 10000);
	}
	expect_hot_list(x, TWO_N);

	long long list_writes = writes[0] + writes[1] - 2LL * TWO_N, races = m412[0] + m412[1];
	print_message("hot list, two workers x 16: %d messages in %lld ms, %lld list writes, %lld 412s "
	              "(%.3f per message)\n",
	              TWO_N, (long long)ms, list_writes, races, (double)races / TWO_N);
	/* Without combining, about 1.5 per message (issue 22's baseline). */
	ITEST_CHECK((double)races / TWO_N < 0.5, "%lld 412s for %d messages", races, TWO_N);
	proc_assert_logs_clean();
}

/* ---- 3. a crash right after a combined save ---------------------------------------------------- */

#define CRASH_N 200

static void test_job_index_list_hot__crash_after_combined_save(void **state)
{
	struct wfx *x = *state;
	struct il_wopts o = IL_WOPTS_DEFAULT;
	struct proc crashed, fresh;

	seed_hot(x, CRASH_N);
	o.concurrency = 16;
	o.visibility_s = 2;
	il_start_worker(&crashed, x, "il-hot-crash", &o, "index_list.combined");
	ITEST_CHECK(proc_wait(&crashed, 30000), "the worker did not die:\n%s",
	            proc_tail(crashed.log_path, 20));
	ITEST_CHECK(proc_exit_code(&crashed) == 86, "exit status %d, expected 86 (no combined save?):\n%s",
	            proc_exit_code(&crashed), proc_tail(crashed.log_path, 20));

	/* The save holds keys of at least two runs that never returned: more
	 * keys in the list than messages that succeeded. */
	size_t done = proc_count(&crashed, "message", "outcome", "succeeded", NULL);
	char *keys = il_list_keys(x, HOT, NULL);
	size_t listed = 0;
	for (const char *s = keys; s && (s = strstr(s, "[\"Staff\"")) != NULL; s++)
		listed++;
	free(keys);
	ITEST_CHECK(listed >= done + 2, "%zu keys listed, %zu messages succeeded: no combined save?", listed,
	            done);
	ITEST_CHECK(il_queue_count(x, x->t->queue) >= (long long)(listed - done),
	            "messages of the combined save are gone");

	/* A fresh worker: the messages come back, the index converges. */
	o.visibility_s = 30;
	il_start_worker(&fresh, x, "il-hot-fresh", &o, NULL);
	drain(x, &fresh, 1, 30000);
	size_t again = proc_count(&fresh, "message", "outcome", "succeeded", NULL);
	print_message("crash after a combined save: %zu succeeded before, %zu keys listed at the crash, %zu "
	              "succeeded after\n",
	              done, listed, again);
	/* (done may miss a message deleted just before the crash, its log line
	 * lost with the process.) */
	ITEST_CHECK(again >= listed - done,
	            "%zu messages succeeded after the crash, fewer than the %zu keys "
	            "written for runs that never returned",
	            again, listed - done);
	proc_stop(&fresh, 10000);
	expect_hot_list(x, CRASH_N);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_index_list_hot__reads_ahead, il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list_hot__one_worker_combines, il_setup,
	                                    il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list_hot__two_workers_converge, il_setup,
	                                    il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list_hot__crash_after_combined_save, il_setup,
	                                    il_teardown),
	};
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
