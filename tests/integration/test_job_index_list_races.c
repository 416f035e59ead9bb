/* SPDX-License-Identifier: MIT */
/* test_job_index_list_races.c - the index-list job (jobs/index_list.c) when runs overlap or die midway,
 * as a process: build/ecworker-test runs against the real Azurite with a config written per test
 * (indexlistfx.h), and each test ends by comparing the list table with a full recomputation from the
 * source. Cases: a crash after every step (ECW_CRASH_AT) with a fresh worker taking the redelivered
 * message; races staged between two workers (ECW_TEST_PAUSE_AT holds one at a step); competing workers
 * moving employees between the same lists (with random pauses at every step, ECW_TEST_STEP_JITTER_MS, and
 * one worker crashing over and over; ECW_TEST_SEED replays their changes). The job's other cases are in
 * test_job_index_list.c, its poisoned messages in test_job_index_list_poison.c. */
#include "indexlistfx.h"
#include "itest.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* True when the Keys text holds the pair (pk, rk) (plain keys only). */
static bool has_key(const char *keys, const char *pk, const char *rk)
{
	char pair[256];
	snprintf(pair, sizeof(pair), "[\"%s\",\"%s\"]", pk, rk);
	return keys && strstr(keys, pair) != NULL;
}

/* ---- 1. a crash after every step ----------------------------------------------------------- */

/* One crash case: a scenario, the step to die after, and its own queue. */
struct crash_case {
	const char *scenario; /* new | move | delete | move-then-change */
	const char *point;
	char queue[64];
	char rk[32];
	char from[32], to[32], third[32];
	struct proc crashed, fresh;
};

static const char *const POINTS_NEW[] = {"index_list.read", "index_list.intent", "index_list.added",
                                         "index_list.ref", NULL};
static const char *const POINTS_MOVE[] = {"index_list.read",    "index_list.intent", "index_list.added",
                                          "index_list.removed", "index_list.ref",    NULL};
static const char *const POINTS_DELETE[] = {"index_list.read", "index_list.removed", "index_list.ref", NULL};
static const char *const POINTS_MTC[] = {"index_list.intent", "index_list.added", "index_list.removed", NULL};

static void test_job_index_list_races__crash_after_every_step(void **state)
{
	struct wfx *x = *state;
	static struct crash_case cs[24];
	size_t n = 0;
	const struct {
		const char *name;
		const char *const *points;
	} scen[] = {{"new", POINTS_NEW},
	            {"move", POINTS_MOVE},
	            {"delete", POINTS_DELETE},
	            {"move-then-change", POINTS_MTC}};

	memset(cs, 0, sizeof(cs));
	for (size_t s = 0; s < sizeof(scen) / sizeof(scen[0]); s++)
		for (size_t k = 0; scen[s].points[k]; k++) {
			struct crash_case *c = &cs[n];
			c->scenario = scen[s].name;
			c->point = scen[s].points[k];
			snprintf(c->rk, sizeof(c->rk), "c%zu-%zu", s, k);
			snprintf(c->from, sizeof(c->from), "From%zu-%zu", s, k);
			snprintf(c->to, sizeof(c->to), "To%zu-%zu", s, k);
			snprintf(c->third, sizeof(c->third), "Third%zu-%zu", s, k);
			itest_unique_name(c->queue, sizeof(c->queue), 'q', "crash");
			itest_keep_queue(x->t, c->queue);
			n++;
		}

	/* The state before: each move/delete case's employee in its From list,
	 * with a companion in the move cases (so removal updates the list) and
	 * alone in the delete cases (so removal deletes it). */
	size_t seeded = 0;
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		if (strcmp(c->scenario, "new") == 0)
			continue;
		il_change(x, "Crash", c->rk, c->from);
		seeded++;
		if (strcmp(c->scenario, "move") == 0) {
			char buddy[40];
			snprintf(buddy, sizeof(buddy), "%s-buddy", c->rk);
			il_change(x, "Crash", buddy, c->from);
			seeded++;
		}
	}
	il_run_worker(x, "il-crash-seed", seeded, 8);
	il_check_index(x);

	/* The change, its message on the case's own queue, and a worker that
	 * dies right after the step. */
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		struct il_wopts o = {
		    .queue = c->queue, .concurrency = 1, .visibility_s = 2, .max_dequeue = 20};
		char name[96];
		ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, c->queue));
		il_emp_set(x, "Crash", c->rk, strcmp(c->scenario, "delete") == 0 ? NULL : c->to);
		il_msg_put(x, c->queue, "Crash", c->rk);
		snprintf(name, sizeof(name), "il-crash-%zu-%s", i, c->point + strlen("index_list."));
		il_start_worker(&c->crashed, x, name, &o, c->point);
	}
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		ITEST_CHECK(proc_wait(&c->crashed, 20000), "%s/%s: the worker did not die", c->scenario,
		            c->point);
		ITEST_CHECK(proc_exit_code(&c->crashed) == 86,
		            "%s/%s: exit status %d, expected 86 (the crash point was not reached?); log:\n%s",
		            c->scenario, c->point, proc_exit_code(&c->crashed),
		            proc_tail(c->crashed.log_path, 20));
	}

	/* What a crash leaves, where the header comment says so. */
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		if (strcmp(c->scenario, "move") != 0)
			continue;
		char *from = il_list_keys(x, c->from, NULL), *to = il_list_keys(x, c->to, NULL);
		struct ecw_entity *ref = il_get_ref(x, "Crash", c->rk);
		bool in_from = has_key(from, "Crash", c->rk), in_to = has_key(to, "Crash", c->rk);
		const char *pending = il_str_prop(ref, "Pending"),
		           *committed = il_str_prop(ref, "ListRowKey");
		bool intent = pending && strstr(pending, c->to);
		ITEST_CHECK(committed, "%s: the ref names no list", c->point);
		if (strcmp(c->point, "index_list.read") == 0)
			ITEST_CHECK(in_from && !in_to && !intent && strcmp(committed, c->from) == 0,
			            "after .read nothing changed: %s / %s / %s", from, to, pending);
		else if (strcmp(c->point, "index_list.intent") == 0)
			ITEST_CHECK(in_from && !in_to && intent && strcmp(committed, c->from) == 0,
			            "after .intent: only the intent; %s / %s / %s", from, to, pending);
		else if (strcmp(c->point, "index_list.added") == 0)
			ITEST_CHECK(in_from && in_to && intent && strcmp(committed, c->from) == 0,
			            "after .added: in both lists, the intent; %s / %s / %s", from, to,
			            pending);
		else if (strcmp(c->point, "index_list.removed") == 0)
			ITEST_CHECK(!in_from && in_to && intent && strcmp(committed, c->from) == 0,
			            "after .removed: only in %s, the ref as before; %s / %s / %s", c->to,
			            from, to, pending);
		else
			ITEST_CHECK(!in_from && in_to && !intent && strcmp(committed, c->to) == 0,
			            "after .ref: done but the check; %s / %s / %s / %s", from, to, pending,
			            committed);
		free(from);
		free(to);
		ecw_entity_free(ref);
	}

	/* The application changes some again while the message is held. */
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		if (strcmp(c->scenario, "move-then-change") == 0) {
			il_emp_set(x, "Crash", c->rk, c->third);
			il_msg_put(x, c->queue, "Crash", c->rk);
		}
	}

	/* A fresh worker per queue takes the redelivered message. */
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		struct il_wopts o = {
		    .queue = c->queue, .concurrency = 1, .visibility_s = 30, .max_dequeue = 20};
		char name[96];
		snprintf(name, sizeof(name), "il-fresh-%zu-%s", i, c->point + strlen("index_list."));
		il_start_worker(&c->fresh, x, name, &o, NULL);
	}
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		size_t want = strcmp(c->scenario, "move-then-change") == 0 ? 2 : 1;
		ITEST_CHECK(proc_wait_count(&c->fresh, want, 20000, "message", "outcome", "succeeded", NULL),
		            "%s/%s: the fresh worker did not finish; log:\n%s", c->scenario, c->point,
		            proc_tail(c->fresh.log_path, 20));
		ITEST_CHECK(
		    proc_count(&c->fresh, "message", "outcome", "succeeded", "dequeue_count", "2", NULL) == 1,
		    "%s/%s: the redelivered message (dequeue_count 2) should have succeeded:\n%s",
		    c->scenario, c->point, proc_tail(c->fresh.log_path, 20));
	}
	for (size_t i = 0; i < n; i++) {
		il_wait_drained(x, cs[i].queue, &cs[i].fresh, 1, 10000);
		proc_stop(&cs[i].fresh, 10000);
	}
	/* The end state is the no-crash state: the recomputation. */
	il_check_index(x);
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		if (strcmp(c->scenario, "move") == 0) {
			char want[96];
			snprintf(want, sizeof(want), "[[\"Crash\",\"%s-buddy\"]]", c->rk);
			il_expect_list(x, c->from, want);
		} else {
			il_expect_list(x, c->from, NULL);
		}
	}
	proc_assert_logs_clean();
}

/* ---- 2. staged races between two workers --------------------------------------------------- */

/* Waits until a worker received the only message of q (none visible). */
static void wait_taken(struct wfx *x, const char *q, struct proc *p)
{
	int64_t end = itest_now_ms() + 10000;

	for (;;) {
		struct ecw_queue_msg *m = NULL;
		size_t n = 0;
		ECW_ASSERT_OK(ecw_queue_peek(&m, &n, x->t->client, q, 1));
		ecw_queue_msgs_free(m, n);
		if (n == 0)
			break;
		ITEST_CHECK(itest_now_ms() < end, "%s did not take its message:\n%s", p->name,
		            proc_tail(p->log_path, 20));
		itest_sleep_ms(20);
	}
	PROC_EXPECT_LOG(p, 1, 10000, "test_paused"); /* it runs on to the step where it pauses */
}

static void test_job_index_list_races__staged_races(void **state)
{
	struct wfx *x = *state;
	char qa[64], qb[64];
	struct proc a, b, fresh;

	itest_unique_name(qa, sizeof(qa), 'q', "slow");
	itest_unique_name(qb, sizeof(qb), 'q', "fast");
	itest_keep_queue(x->t, qa);
	itest_keep_queue(x->t, qb);
	ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, qa));
	ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, qb));
	il_change(x, "Race", "r1", "Jones");
	il_change(x, "Race", "r2", "Jones");
	il_run_worker(x, "il-race-seed", 2, 2);

	/* (a) A reads r1 = Smith and stalls; meanwhile r1 becomes Brown and B
	 * runs that message to the end. A's round worked from a stale value: its
	 * check after the commit sees the new ETag, and its next round moves r1
	 * back to Brown. */
	struct il_wopts oa = {.queue = qa,
	                      .concurrency = 1,
	                      .visibility_s = 30,
	                      .max_dequeue = 20,
	                      .pause_at = "index_list.read:2500"};
	struct il_wopts ob = {.queue = qb, .concurrency = 1, .visibility_s = 30, .max_dequeue = 20};
	il_emp_set(x, "Race", "r1", "Smith");
	il_msg_put(x, qa, "Race", "r1");
	il_start_worker(&a, x, "il-race-a1", &oa, NULL);
	wait_taken(x, qa, &a);
	il_emp_set(x, "Race", "r1", "Brown");
	il_msg_put(x, qb, "Race", "r1");
	il_start_worker(&b, x, "il-race-b1", &ob, NULL);
	ITEST_CHECK(proc_wait_count(&b, 1, 10000, "message", "outcome", "succeeded", NULL), "B:\n%s",
	            proc_tail(b.log_path, 20));
	ITEST_CHECK(proc_count(&a, "message", NULL) == 0, "A finished before B: the race was not staged");
	il_expect_list(x, "Brown", "[[\"Race\",\"r1\"]]");
	ITEST_CHECK(proc_wait_count(&a, 1, 30000, "message", "outcome", "succeeded", NULL), "A:\n%s",
	            proc_tail(a.log_path, 20));
	struct proc_log log;
	proc_log_read(&log, a.log_path);
	const char *detail = proc_field(proc_log_find(&log, 0, "message", NULL), "detail");
	ITEST_CHECK(strstr(detail, "rounds=1 ") == NULL, "A should have needed a second round: %s", detail);
	proc_log_dispose(&log);
	proc_stop(&a, 10000);
	proc_stop(&b, 10000);
	il_expect_list(x, "Smith", NULL);
	il_expect_list(x, "Brown", "[[\"Race\",\"r1\"]]");
	il_check_index(x);

	/* (b) A records its intent to add r2 to Smith and stalls; r2 becomes
	 * Brown and B runs that to the end (removing r2 from Smith, where it is
	 * not yet, and keeping A's intent); then A adds r2 to Smith and dies
	 * right there. Only A's intent tells the redelivered message where to
	 * clean up. */
	struct il_wopts oa2 = {.queue = qa,
	                       .concurrency = 1,
	                       .visibility_s = 2,
	                       .max_dequeue = 20,
	                       .pause_at = "index_list.intent:2500"};
	il_emp_set(x, "Race", "r2", "Smith");
	il_msg_put(x, qa, "Race", "r2");
	il_start_worker(&a, x, "il-race-a2", &oa2, "index_list.added");
	wait_taken(x, qa, &a);
	il_emp_set(x, "Race", "r2", "Brown");
	il_msg_put(x, qb, "Race", "r2");
	il_start_worker(&b, x, "il-race-b2", &ob, NULL);
	ITEST_CHECK(proc_wait_count(&b, 1, 10000, "message", "outcome", "succeeded", NULL), "B:\n%s",
	            proc_tail(b.log_path, 20));
	ITEST_CHECK(proc_alive(&a), "A died before B finished: the race was not staged");
	struct ecw_entity *ref = il_get_ref(x, "Race", "r2");
	ITEST_CHECK(ref && il_str_prop(ref, "Pending") && strstr(il_str_prop(ref, "Pending"), "Smith") &&
	                strcmp(il_str_prop(ref, "ListRowKey"), "Brown") == 0,
	            "B should commit Brown and keep A's intent: %s / %s", il_str_prop(ref, "ListRowKey"),
	            il_str_prop(ref, "Pending"));
	ecw_entity_free(ref);
	ITEST_CHECK(proc_wait(&a, 10000) && proc_exit_code(&a) == 86,
	            "A should die after adding, exit %d:\n%s", proc_exit_code(&a), proc_tail(a.log_path, 20));
	il_expect_list(x, "Smith", "[[\"Race\",\"r2\"]]"); /* the stale add */
	struct il_wopts of = {.queue = qa, .concurrency = 1, .visibility_s = 30, .max_dequeue = 20};
	il_start_worker(&fresh, x, "il-race-fresh", &of, NULL);
	ITEST_CHECK(proc_wait_count(&fresh, 1, 15000, "message", "outcome", "succeeded", NULL), "fresh:\n%s",
	            proc_tail(fresh.log_path, 20));
	proc_stop(&fresh, 10000);
	proc_stop(&b, 10000);
	il_expect_list(x, "Smith", NULL);
	il_expect_list(x, "Brown", "[[\"Race\",\"r1\"],[\"Race\",\"r2\"]]");
	il_check_index(x);
	proc_assert_logs_clean();
}

/* ---- 3. competing workers ---------------------------------------------------------------- */

#define COMPETE_EMPS 16
#define COMPETE_CHANGES 200
#define COMPETE_WORKERS 4

static void test_job_index_list_races__competing_workers(void **state)
{
	struct wfx *x = *state;
	static const char *const names[] = {"Jones", "Smith", "Brown", "Green"};
	static const char *const chaos[] = {"index_list.added",
	                                    "index_list.intent",
	                                    "index_list.removed",
	                                    "index_list.ref",
	                                    "index_list.added",
	                                    "index_list.removed",
	                                    NULL};
	struct proc p[COMPETE_WORKERS];
	int port[COMPETE_WORKERS];
	struct il_wopts o = {.concurrency = 4, .visibility_s = 2, .max_dequeue = 100, .jitter_ms = 15};
	/* ECW_TEST_SEED replays a run. */
	unsigned seed = getenv("ECW_TEST_SEED") ? (unsigned)strtoul(getenv("ECW_TEST_SEED"), NULL, 10)
	                                        : (unsigned)getpid();
	size_t crashes = 0;

	print_message("competing workers: seed %u\n", seed);
	srand(seed);
	/* Workers 1-3 plain; worker 4 crashes at a step, is restarted, crashes
	 * at the next, ... then runs on without crashing. */
	for (int w = 0; w < COMPETE_WORKERS; w++) {
		char name[32];
		snprintf(name, sizeof(name), "il-compete-w%d", w + 1);
		port[w] = il_start_worker(&p[w], x, name, &o, w == COMPETE_WORKERS - 1 ? chaos[0] : NULL);
	}
	for (int i = 0; i < COMPETE_CHANGES; i++) {
		char rk[16];
		int who = rand() % COMPETE_EMPS;
		int r = rand() % 20;
		snprintf(rk, sizeof(rk), "emp-%02d", who);
		/* Mostly moves between the same four lists; a few deletes. */
		il_change(x, "Staff", rk, r == 0 ? NULL : names[r % 4]);
		if (i % 10 == 9)
			itest_sleep_ms(30);
		if (!proc_alive(&p[COMPETE_WORKERS - 1])) {
			struct proc *c = &p[COMPETE_WORKERS - 1];
			char name[32];
			ITEST_CHECK(proc_exit_code(c) == 86, "the chaos worker exited %d:\n%s",
			            proc_exit_code(c), proc_tail(c->log_path, 20));
			crashes++;
			snprintf(name, sizeof(name), "il-compete-c%zu", crashes);
			port[COMPETE_WORKERS - 1] = il_start_worker(c, x, name, &o, chaos[crashes]);
		}
	}
	/* Drain, restarting the chaos worker whenever it dies. */
	int64_t end = itest_now_ms() + 60000;
	int zeros = 0;
	while (zeros < 3) {
		struct proc *c = &p[COMPETE_WORKERS - 1];
		if (!proc_alive(c)) {
			char name[32];
			ITEST_CHECK(proc_exit_code(c) == 86, "the chaos worker exited %d:\n%s",
			            proc_exit_code(c), proc_tail(c->log_path, 20));
			crashes++;
			snprintf(name, sizeof(name), "il-compete-c%zu", crashes);
			port[COMPETE_WORKERS - 1] = il_start_worker(c, x, name, &o, chaos[crashes]);
		}
		for (int w = 0; w < COMPETE_WORKERS - 1; w++)
			ITEST_CHECK(proc_alive(&p[w]), "worker %d exited:\n%s", w + 1,
			            proc_tail(p[w].log_path, 20));
		zeros = il_queue_count(x, x->t->queue) == 0 ? zeros + 1 : 0;
		ITEST_CHECK(itest_now_ms() < end, "the queue did not drain in 60 s; worker 1:\n%s",
		            proc_tail(p[0].log_path, 20));
		itest_sleep_ms(200);
	}
	assert_int_equal(il_queue_count(x, x->poison), 0);

	/* 412s happened, and the log says how many each run met. */
	long long m412 = 0, conflicts = 0, succeeded = 0, retried = 0;
	for (int w = 0; w < COMPETE_WORKERS; w++) {
		char *page = NULL;
		if (proc_alive(&p[w]) && proc_http_get(&page, port[w], "/metrics") == 200)
			m412 += (long long)proc_metric(page, "ecw_storage_requests_total", NULL,
			                               "status=\"412\"", NULL);
		free(page);
		struct proc_log log;
		proc_log_read(&log, p[w].log_path);
		for (size_t i = 0; i < log.n; i++) {
			const char *d = proc_field(log.lines[i], "detail");
			const char *c = strstr(d, "conflicts=");
			if (c)
				conflicts += strtoll(c + 10, NULL, 10);
		}
		succeeded += (long long)proc_log_count(&log, "message", "outcome", "succeeded", NULL);
		retried += (long long)proc_log_count(&log, "message", "outcome", "retried", NULL);
		proc_log_dispose(&log);
	}
	print_message(
	    "competing workers: %lld succeeded (plus %zu crashes), %lld retried, %lld lost races in "
	    "the log, %lld 412 answers in the metrics of the running workers\n",
	    succeeded, crashes, retried, conflicts, m412);
	ITEST_CHECK(crashes >= 3, "the chaos worker crashed only %zu times", crashes);
	ITEST_CHECK(conflicts > 0 && m412 > 0, "no lost race seen (%lld in the log, %lld 412s in metrics)",
	            conflicts, m412);

	/* The end state is the recomputation: nobody lost, nobody stale. */
	size_t lists = il_check_index(x);
	ITEST_CHECK(lists >= 1, "no list at all");
	for (int w = 0; w < COMPETE_WORKERS; w++)
		proc_stop(&p[w], 10000);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_index_list_races__crash_after_every_step, il_setup,
	                                    il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list_races__staged_races, il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list_races__competing_workers, il_setup,
	                                    il_teardown),
	};
	/* ECW_TEST_FILTER=test_job_index_list_races__crash* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
