/* SPDX-License-Identifier: MIT */
/* test_job_index_races.c - the `index` job type when runs of one source overlap or die midway, as a
 * process: build/ecworker-test runs against Azurite with an index job over a source table (indexfx.h), and
 * each test ends by comparing the index table with a full recomputation from the source: two workers
 * racing on quick changes to the same few sources (with random pauses between steps); three staged races
 * (ECW_TEST_PAUSE_AT) in which a round that read an older source finishes last; and a crash right after
 * every step (ECW_CRASH_AT) followed by a fresh worker on the redelivered message. Each case has its own
 * queues and tables. The job's other cases (one run at a time, permanent errors, the `properties:`
 * variants, EDM types, an index in its source's table, configuration errors) are in test_job_index.c. */
#include "indexfx.h"
#include "itest.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *extra_queue(struct wfx *x)
{
	return itest_extra_queue(x->t, "ixq");
}

/* ---- 1. two workers, quick changes -------------------------------------------------------------- */

/* Two workers with eight job threads each, and a stream of changes to the
 * same few employees (new values, deletions, re-creations), each followed
 * by its message at once: many runs of one source overlap, on different
 * versions. When all messages are done the index equals the recomputation. */
static void test_job_index_races__concurrent_workers(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p[2];
	enum { NE = 3, NCHANGES = 90 };
	unsigned seed = 12345;

	o.concurrency = 8;
	ix_ensure_table(x, x->t->table);
	itest_queue(x->t);
	/* Random pauses between steps make rounds of one source overlap more. */
	ix_start_worker(&p[0], x, "index-conc-w1", &o, "ECW_TEST_STEP_JITTER_MS=15");
	ix_start_worker(&p[1], x, "index-conc-w2", &o, "ECW_TEST_STEP_JITTER_MS=15");
	for (int c = 0; c < NCHANGES; c++) {
		char rk[16], email[64];
		int i = c % NE;
		seed = seed * 1103515245u + 12345u;
		unsigned r = (seed >> 16) % 10;
		snprintf(rk, sizeof(rk), "c%d", i);
		snprintf(email, sizeof(email), "c%d-%u@example.com", i, r % 5);
		if (r == 9 && c < NCHANGES - NE)
			ECW_ASSERT_OK(ecw_table_delete_if_exists(NULL, x->t->client, x->t->table, "C", rk));
		else
			ix_upsert(x, x->t->table, ix_employee("C", rk, email, r % 2 ? "Odd" : "Even", "L"));
		ix_enqueue(x, "C", rk);
		if (c % 10 == 9)
			itest_sleep_ms(20);
	}
	ix_wait_outcomes(p, 2, NCHANGES, "succeeded", 45000);
	assert_int_equal(ix_outcomes(p, 2, "poisoned"), 0);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), NE);
	ix_finish(p, 2);
}

/* ---- 2. staged races: a round that read an older source finishes last -------------------------- */

static size_t visible(struct wfx *x, const char *queue)
{
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;

	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, x->t->client, queue, 32));
	ecw_queue_msgs_free(m, n);
	return n;
}

/* Waits until worker p has taken every message of queue and is at its
 * pause (its log says so as the pause begins). */
static void wait_taken(struct wfx *x, struct proc *p, const char *queue)
{
	int64_t end = itest_now_ms() + 10000;

	while (visible(x, queue) > 0) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(p),
		            "worker %s did not take its message; log:\n%s", p->name,
		            proc_tail(p->log_path, 20));
		itest_sleep_ms(20);
	}
	PROC_EXPECT_LOG(p, 1, 10000, "test_paused");
}

/* The run's log line says it went round again ("... rounds=N"). */
static void expect_rounds(struct proc *a)
{
	struct proc_log log;

	proc_log_read(&log, a->log_path);
	const char *detail = proc_field(proc_log_find(&log, 0, "message", NULL), "detail");
	ITEST_CHECK(strstr(detail, "rounds=") != NULL, "%s should have gone round again: detail '%s'",
	            a->name, detail);
	proc_log_dispose(&log);
}

/* Worker A (its own queue, one job thread) is paused inside a run while
 * worker B runs a newer message for the same source from start to end;
 * then A carries on. Two interleavings the header argues about:
 *   1. A read v1 and pauses; the source becomes v2 and B indexes it
 *      (cleaning v1's entry). A then writes v1's entry again: only its
 *      verify step (the source changed) sends it round again, to clean it.
 *   2. The same, A paused after its registration (nothing to register:
 *      v1's entry is the current one), so B cleans v1's entry before A
 *      writes it again: A's next round must remember that write to clean it.
 *   3. A runs for a deleted source and pauses after verifying it is gone;
 *      the source comes back with the same value and B finds its entry in
 *      place (nothing to write). A then deletes that entry: only the commit
 *      B made anyway (it changes the reference's ETag) makes A's delete of
 *      the reference fail, so A goes round again and restores the entry. */
static void test_job_index_races__stale_round_finishes_last(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT, oa = IX_WOPTS_DEFAULT;
	struct proc b, a;
	const char *qa = extra_queue(x);

	ix_ensure_table(x, x->t->table);
	itest_queue(x->t);
	ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, qa));
	ix_put_employee(x, "Sales", "001", "v1@example.com");
	ix_enqueue(x, "Sales", "001");
	ix_start_worker(&b, x, "index-race-b", &o, NULL);
	ix_wait_outcomes(&b, 1, 1, "succeeded", 20000);
	oa.queue = qa;
	oa.concurrency = 1;
	/* A's run must keep its lease through its pause and B's whole run:
	 * a lost lease (say, Azurite's queue clean-up freezing it for seconds
	 * under make test) would redeliver A's message and unstage the race. */
	oa.visibility_s = 30;

	/* 1. */
	ix_start_worker(&a, x, "index-race-a1", &oa, "ECW_TEST_PAUSE_AT=index.read:2500");
	ix_enqueue_on(x, qa, IX_JOB, "Sales", "001", 0);
	wait_taken(x, &a, qa);
	ix_put_employee(x, "Sales", "001", "v2@example.com");
	ix_enqueue(x, "Sales", "001");
	ix_wait_outcomes(&b, 1, 2, "succeeded", 20000);
	ITEST_CHECK(ix_outcomes(&a, 1, NULL) == 0, "A finished before B: the race was not staged; log:\n%s",
	            proc_tail(a.log_path, 10));
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 1);
	ix_wait_outcomes(&a, 1, 1, "succeeded", 20000);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 1);
	expect_rounds(&a);
	assert_null(ix_get(x, x->t->table2, "email_Sales", "v1@example.com"));
	proc_stop(&a, 10000);

	/* 2. */
	ix_put_employee(x, "Sales", "001", "v3@example.com");
	ix_enqueue(x, "Sales", "001");
	ix_wait_outcomes(&b, 1, 3, "succeeded", 20000);
	ix_start_worker(&a, x, "index-race-a2", &oa, "ECW_TEST_PAUSE_AT=index.registered:2500");
	ix_enqueue_on(x, qa, IX_JOB, "Sales", "001", 0);
	wait_taken(x, &a, qa);
	ix_put_employee(x, "Sales", "001", "v4@example.com");
	ix_enqueue(x, "Sales", "001");
	ix_wait_outcomes(&b, 1, 4, "succeeded", 20000);
	ITEST_CHECK(ix_outcomes(&a, 1, NULL) == 0, "A finished before B: the race was not staged; log:\n%s",
	            proc_tail(a.log_path, 10));
	ix_wait_outcomes(&a, 1, 1, "succeeded", 20000);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 1);
	assert_null(ix_get(x, x->t->table2, "email_Sales", "v3@example.com"));
	expect_rounds(&a);
	proc_stop(&a, 10000);

	/* 3. */
	ECW_ASSERT_OK(ecw_table_delete(x->t->client, x->t->table, "Sales", "001", "*"));
	ix_start_worker(&a, x, "index-race-a3", &oa, "ECW_TEST_PAUSE_AT=index.verified:2500");
	ix_enqueue_on(x, qa, IX_JOB, "Sales", "001", 0);
	wait_taken(x, &a, qa);
	ix_put_employee(x, "Sales", "001", "v4@example.com");
	ix_enqueue(x, "Sales", "001");
	ix_wait_outcomes(&b, 1, 5, "succeeded", 20000);
	ITEST_CHECK(ix_outcomes(&a, 1, NULL) == 0, "A finished before B: the race was not staged; log:\n%s",
	            proc_tail(a.log_path, 10));
	ix_wait_outcomes(&a, 1, 1, "succeeded", 20000);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 1);
	expect_rounds(&a);
	proc_stop(&a, 10000);
	ix_finish(&b, 1);
}

/* ---- 3. a crash right after every step ---------------------------------------------------------- */

/* Each scenario starts from a built index (CREATE: from none), changes the
 * source (DELETE: deletes it), and runs the message on a worker that dies
 * (ECW_CRASH_AT, exit 86) right after one step; a fresh worker then gets the
 * redelivered message, and the end state must equal the recomputation.
 * CHANGE_AGAIN changes the source once more (with its message) while the
 * crashed message waits: what the dead run left must still be found. All
 * run side by side, each with its own queue and tables. */
struct crash_case {
	const char *point;
	enum { CHANGE, DELETE, CREATE, CHANGE_AGAIN } what;
	char queue[64], source[64], index[64], job[16];
	struct proc crash, fresh;
};

static const char *const CHANGE_POINTS[] = {
    "index.read", "index.registered", "index.written", "index.verified", "index.cleaned", "index.committed",
    NULL};
static const char *const DELETE_POINTS[] = {"index.read",    "index.registered", "index.verified",
                                            "index.cleaned", "index.committed",  NULL};

static void test_job_index_races__crash_after_every_step(void **state)
{
	struct wfx *x = *state;
	struct crash_case cc[28];
	int n = 0;
	char jobs[16384], one[1024];
	size_t used = 0;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc builder;

	for (int what = CHANGE; what <= CHANGE_AGAIN; what++) {
		const char *const *pts = what == DELETE ? DELETE_POINTS : CHANGE_POINTS;
		for (int i = 0; pts[i]; i++) {
			struct crash_case *c = &cc[n];
			memset(c, 0, sizeof(*c));
			c->point = pts[i];
			c->what = what;
			snprintf(c->queue, sizeof(c->queue), "%s", extra_queue(x));
			snprintf(c->source, sizeof(c->source), "%s", ix_extra_table(x));
			snprintf(c->index, sizeof(c->index), "%s", ix_extra_table(x));
			snprintf(c->job, sizeof(c->job), "crash%d", n);
			ix_default_job(one, sizeof(one), x, c->job, c->source, c->index,
			               "[FirstName, LastName]");
			assert_true(used + strlen(one) < sizeof(jobs));
			memcpy(jobs + used, one, strlen(one) + 1);
			used += strlen(one);
			n++;
		}
	}

	/* The starting state, built by a worker that does not crash: an
	 * indexed employee (CHANGE, DELETE) or nothing at all (CREATE). */
	itest_queue(x->t);
	size_t built = 0;
	for (int i = 0; i < n; i++) {
		ix_ensure_table(x, cc[i].source);
		if (cc[i].what != CREATE) {
			ix_upsert(x, cc[i].source,
			          ix_employee("D", "k'1", "before@example.com", "Ann", "Lee"));
			ix_enqueue_on(x, NULL, cc[i].job, "D", "k'1", 0);
			built++;
		}
	}
	o.jobs = jobs;
	ix_start_worker(&builder, x, "index-crash-builder", &o, NULL);
	ix_wait_outcomes(&builder, 1, built, "succeeded", 30000);
	proc_stop(&builder, 10000);
	for (int i = 0; i < n; i++) {
		struct ix_spec sp = {cc[i].job, cc[i].source, cc[i].index, IX_FIRST_LAST};
		if (cc[i].what != CREATE)
			assert_int_equal(ix_check_recompute(x, &sp), 1);
	}

	/* The change, and its message on the case's own queue. */
	for (int i = 0; i < n; i++) {
		struct crash_case *c = &cc[i];
		ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, c->queue));
		if (c->what == DELETE)
			ECW_ASSERT_OK(ecw_table_delete(x->t->client, c->source, "D", "k'1", "*"));
		else
			ix_upsert(x, c->source, ix_employee("D", "k'1", "after@example.com", "Ann", "Leigh"));
		ix_enqueue_on(x, c->queue, c->job, "D", "k'1", 0);
	}
	/* Crash. 4 s of lease: 23 workers start at once here, and on a loaded
	 * machine a run once took 2.7 s, its 2 s lease lost before the renewal
	 * (a "message" line, lease-lost, before the crash point). */
	o.visibility_s = 4;
	o.concurrency = 1;
	for (int i = 0; i < n; i++) {
		char name[64];
		o.queue = cc[i].queue;
		snprintf(name, sizeof(name), "index-crash-%d", i);
		char env[96];
		snprintf(env, sizeof(env), "ECW_CRASH_AT=%s", cc[i].point);
		ix_start_worker(&cc[i].crash, x, name, &o, env);
	}
	for (int i = 0; i < n; i++) {
		struct crash_case *c = &cc[i];
		ITEST_CHECK(proc_wait(&c->crash, 20000), "case %d (%s): the worker did not crash; log:\n%s",
		            i, c->point, proc_tail(c->crash.log_path, 20));
		ITEST_CHECK(proc_exit_code(&c->crash) == 86,
		            "case %d (%s): exit status %d, expected 86; log:\n%s", i, c->point,
		            proc_exit_code(&c->crash), proc_tail(c->crash.log_path, 20));
		assert_int_equal(proc_count(&c->crash, "message", NULL), 0);
	}
	for (int i = 0; i < n; i++) {
		if (cc[i].what == CHANGE_AGAIN) {
			ix_upsert(x, cc[i].source,
			          ix_employee("D", "k'1", "again@example.com", "Ann", "Lee"));
			ix_enqueue_on(x, cc[i].queue, cc[i].job, "D", "k'1", 0);
		}
	}
	/* A fresh worker gets the redelivered message. */
	for (int i = 0; i < n; i++) {
		char name[64];
		o.queue = cc[i].queue;
		snprintf(name, sizeof(name), "index-fresh-%d", i);
		ix_start_worker(&cc[i].fresh, x, name, &o, NULL);
	}
	for (int i = 0; i < n; i++) {
		struct crash_case *c = &cc[i];
		struct ix_spec sp = {c->job, c->source, c->index, IX_FIRST_LAST};
		ix_wait_outcomes(&c->fresh, 1, c->what == CHANGE_AGAIN ? 2 : 1, "succeeded", 20000);
		assert_int_equal(proc_count(&c->fresh, "message", "dequeue_count", "2", NULL), 1);
		assert_int_equal(ix_check_recompute(x, &sp), c->what == DELETE ? 0 : 1);
		if (c->what == DELETE)
			ITEST_CHECK(ix_count_entities(x, c->index) == 0,
			            "case %d (%s): the index table is not empty", i, c->point);
		proc_stop(&c->fresh, 10000);
	}
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_index_races__concurrent_workers, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_races__stale_round_finishes_last, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_races__crash_after_every_step, ix_setup,
	                                    ix_teardown),
	};
	/* ECW_TEST_FILTER=test_job_index_races__crash* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("job_index_races", tests, NULL, NULL);
}
