/* SPDX-License-Identifier: MIT */
/* test_job_index_groups.c - the index job's groups (index_run_group), as a process against Azurite:
 * messages on sources of one partition that a receive brings together run together, their sources read
 * with one query per 14 and their entries written in one entity group transaction per index partition.
 * The tests judge the worker by the index it leaves (the recomputation of indexfx.h), its log and its
 * metrics: 200 messages over 2 partitions in fewer requests per message than one by one; a member that
 * fails (a permanent error) or leaves the group (a duplicate, a key held by other data) never fails or
 * deletes its neighbours' messages; a crash right after each group step converges on the redelivery.
 * Run one case with ECW_TEST_FILTER='test_job_index_groups__crash*'. */
#include "indexfx.h"
#include "itest.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_clock.h"

/* A worker on one receive of 32 at a time, so that what is enqueued before
 * it starts arrives together; metrics on metrics_port (0: none). */
static void start_grouping_worker(struct proc *p, struct wfx *x, const char *name, const char *queue,
                                  const char *jobs, int concurrency, int metrics_port, const char *env)
{
	struct wfx_worker w = WFX_WORKER(queue ? queue : x->t->queue, x->poison);
	char path[640], job[1024];
	const char *args[] = {"run", "-c", path, NULL};
	const char *envv[] = {env, NULL};

	if (!jobs)
		ix_default_job(job, sizeof(job), x, IX_JOB, NULL, NULL, "[FirstName, LastName]");
	w.batch_size = 32;
	w.concurrency = concurrency;
	w.visibility_s = 3;
	w.max_dequeue = 5;
	w.poll_min = "20ms";
	w.poll_max = "100ms";
	w.log_level = "info";
	w.metrics_port = metrics_port;
	w.jobs = jobs ? jobs : job;
	wfx_write_config(path, sizeof(path), name, &w);
	proc_start(p, name, args, env ? envv : NULL);
}

/* Message lines that ran in a group of 2 or more. */
static size_t grouped_lines(const struct proc *p)
{
	struct proc_log log;
	size_t n = 0;

	proc_log_read(&log, p->log_path);
	for (size_t i = 0; i < log.n; i++)
		if (strcmp(proc_field(log.lines[i], "event"), "message") == 0 &&
		    proc_field_int(log.lines[i], "group", 0) >= 2)
			n++;
	proc_log_dispose(&log);
	return n;
}

static double requests_of(const char *page, const char *op)
{
	char label[64];

	snprintf(label, sizeof(label), "op=\"%s\"", op);
	return proc_metric(page, "ecw_storage_requests_total", NULL, label, NULL);
}

/* ---- requests per message ---------------------------------------------------------------------- */

/* 200 new employees over 2 partitions, every message enqueued before the
 * worker starts. One by one an index message costs 7 table requests (the
 * source, the reference read and registered, the entry's place read and
 * written, the source again, the commit); a group of 14 shares the reads of
 * the sources (twice) and of the entries' places, and the entries' writes:
 * about 3 + 4/14. */
static void test_job_index_groups__fewer_requests_per_message(void **state)
{
	enum { N = 200 };
	struct wfx *x = *state;
	struct proc p;
	char rk[32], email[64], *page = NULL;
	int port = proc_free_port();

	itest_queue(x->t);
	ix_ensure_table(x, x->t->table);
	for (int i = 0; i < N; i++) {
		const char *pk = i % 2 ? "East" : "West";
		snprintf(rk, sizeof(rk), "emp '%03d", i);
		snprintf(email, sizeof(email), "e%03d@example.com", i);
		ix_upsert(x, x->t->table, ix_employee(pk, rk, email, "Ann", "Lee"));
		ix_enqueue(x, pk, rk);
	}
	int64_t t0 = ecw_clock_now_ms();
	start_grouping_worker(&p, x, "index-groups-requests", NULL, NULL, 4, port, NULL);
	ix_wait_outcomes(&p, 1, N, "succeeded", 60000);
	long long ms = (long long)(ecw_clock_now_ms() - t0);
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	double all = proc_metric(page, "ecw_storage_requests_total", NULL, NULL), queue = 0;
	static const char *const qops[] = {"queue.receive", "queue.delete", "queue.update",
	                                   "queue.create",  "queue.put",    NULL};
	for (size_t i = 0; qops[i]; i++)
		queue += requests_of(page, qops[i]);
	double table = all - queue - requests_of(page, "table.create");
	size_t grouped = grouped_lines(&p);
	print_message("  %d index messages over 2 partitions in %lld ms: %.2f table requests per message "
	              "(%.0f queries, %.0f GETs, %.0f batches), %.2f storage requests per message in all; "
	              "%zu ran in groups\n",
	              N, ms, table / N, requests_of(page, "table.query"), requests_of(page, "table.get"),
	              requests_of(page, "table.batch"), all / N, grouped);
	assert_int_equal(ix_outcomes(&p, 1, "poisoned"), 0);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), N);
	ITEST_CHECK(grouped >= N / 2, "only %zu of %d messages ran in groups; log %s", grouped, N,
	            p.log_path);
	ITEST_CHECK(table / N <= 4.5,
	            "%.2f table requests per index message: the groups did not share the reads and writes "
	            "(one by one: 7)",
	            table / N);
	free(page);
	ix_finish(&p, 1);
}

/* ---- one member's failure is its own ------------------------------------------------------------ */

/* Fourteen employees of one partition in one receive: one without an Email
 * (its index key cannot be computed: a permanent error, poisoned at once),
 * one whose key is held by an entity that is no index entry (the group
 * leaves it to run, which refuses to overwrite it: permanent too), and one
 * sent twice. Every other message must succeed and be deleted, its entry
 * written; the two failures must write no entry and be poisoned. */
static void test_job_index_groups__member_failure_spares_neighbours(void **state)
{
	enum { N = 14, NO_EMAIL = 3, BLOCKED = 8, DUP = 11 };
	struct wfx *x = *state;
	struct proc p;
	char rk[N][32], email[N][64];
	struct ecw_entity *other = NULL, *e;

	itest_queue(x->t);
	ix_ensure_table(x, x->t->table);
	ix_ensure_table(x, x->t->table2);
	ECW_ASSERT_OK(ecw_entity_new(&other, "email_F", "blocked@example.com"));
	ix_set_str(other, "Owner", "someone else's data");
	ix_upsert(x, x->t->table2, other);
	for (int i = 0; i < N; i++) {
		snprintf(rk[i], sizeof(rk[i]), "m'%02d", i);
		snprintf(email[i], sizeof(email[i]),
		         i == BLOCKED ? "blocked@example.com" : "f%02d@example.com", i);
		ix_upsert(x, x->t->table,
		          ix_employee("F", rk[i], i == NO_EMAIL ? NULL : email[i], "Bo", "Ng"));
		ix_enqueue(x, "F", rk[i]);
		if (i == DUP)
			ix_enqueue(x, "F", rk[i]);
	}
	start_grouping_worker(&p, x, "index-groups-failure", NULL, NULL, 1, 0, NULL);
	ix_wait_outcomes(&p, 1, N + 1, NULL, 30000);
	assert_int_equal(ix_outcomes(&p, 1, "succeeded"), N - 1);
	assert_int_equal(ix_outcomes(&p, 1, "poisoned"), 2);
	assert_int_equal(ix_outcomes(&p, 1, "retried"), 0);
	ITEST_CHECK(grouped_lines(&p) >= N - 2, "the receive did not run as a group; log %s", p.log_path);
	for (int i = 0; i < N; i++) {
		if (i == NO_EMAIL)
			continue;
		e = ix_get(x, x->t->table2, "email_F", email[i]);
		assert_non_null(e);
		if (i == BLOCKED) {
			ITEST_CHECK(ix_strp(e, "SourceRowKey") == NULL && ix_strp(e, "Owner") != NULL,
			            "the other data at blocked@example.com was overwritten");
		} else {
			ITEST_CHECK(ix_strp(e, "SourceRowKey") &&
			                strcmp(ix_strp(e, "SourceRowKey"), rk[i]) == 0,
			            "member %d: its entry is not there", i);
		}
		ecw_entity_free(e);
	}
	/* N - 2 entries, their references, the other data and the blocked
	 * one's registration (bookkeeping that stays, as run leaves it). */
	assert_int_equal(ix_count_entities(x, x->t->table2), 2 * (N - 2) + 2);
	long long left = -1;
	ECW_ASSERT_OK(ecw_queue_count(&left, x->t->client, x->t->queue));
	assert_int_equal(left, 0);
	ix_finish(&p, 1);
}

/* ---- a crash right after each group step ----------------------------------------------------------- */

/* Each case: six employees of partition G, three of them indexed first by a
 * worker that does not crash; then two of those change their e-mail, one is
 * deleted, three are new, and their six messages reach a worker that dies
 * (ECW_CRASH_AT, exit 86) right after one step of the group. A fresh worker
 * gets the redelivered messages: the index must then equal the
 * recomputation from the sources. All cases run side by side. */
static const char *const GROUP_POINTS[] = {"index.group.read", "index.group.registered",
                                           "index.group.written", "index.group.verified", NULL};

struct crash_case {
	char queue[64], source[64], index[64], job[16];
	struct proc crash, fresh;
};

static void test_job_index_groups__crash_after_each_group_step(void **state)
{
	enum { CASES = 4, EMPS = 6 };
	struct wfx *x = *state;
	struct crash_case cc[CASES];
	char jobs[8192], one[1024], rk[32], email[64];
	size_t used = 0;
	struct proc builder;

	for (int i = 0; i < CASES; i++) {
		struct crash_case *c = &cc[i];
		memset(c, 0, sizeof(*c));
		snprintf(c->queue, sizeof(c->queue), "%s", itest_extra_queue(x->t, "ixg"));
		snprintf(c->source, sizeof(c->source), "%s", ix_extra_table(x));
		snprintf(c->index, sizeof(c->index), "%s", ix_extra_table(x));
		snprintf(c->job, sizeof(c->job), "grp%d", i);
		ix_default_job(one, sizeof(one), x, c->job, c->source, c->index, "[FirstName, LastName]");
		assert_true(used + strlen(one) < sizeof(jobs));
		memcpy(jobs + used, one, strlen(one) + 1);
		used += strlen(one);
	}
	itest_queue(x->t);
	for (int i = 0; i < CASES; i++) {
		ix_ensure_table(x, cc[i].source);
		ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, cc[i].queue));
		for (int k = 0; k < 3; k++) {
			snprintf(rk, sizeof(rk), "g'%d", k);
			snprintf(email, sizeof(email), "before%d@example.com", k);
			ix_upsert(x, cc[i].source, ix_employee("G", rk, email, "Cy", "Oh"));
			ix_enqueue_on(x, NULL, cc[i].job, "G", rk, 0);
		}
	}
	start_grouping_worker(&builder, x, "index-group-crash-builder", NULL, jobs, 2, 0, NULL);
	ix_wait_outcomes(&builder, 1, 3 * CASES, "succeeded", 30000);
	proc_stop(&builder, 10000);

	for (int i = 0; i < CASES; i++) {
		struct crash_case *c = &cc[i];
		struct ix_spec sp = {c->job, c->source, c->index, IX_FIRST_LAST};
		assert_int_equal(ix_check_recompute(x, &sp), 3);
		for (int k = 0; k < EMPS; k++) {
			snprintf(rk, sizeof(rk), "g'%d", k);
			snprintf(email, sizeof(email), "after%d@example.com", k);
			if (k == 2)
				ECW_ASSERT_OK(ecw_table_delete(x->t->client, c->source, "G", rk, "*"));
			else
				ix_upsert(x, c->source, ix_employee("G", rk, email, "Cy", "Oh"));
			ix_enqueue_on(x, c->queue, c->job, "G", rk, 0);
		}
	}
	for (int i = 0; i < CASES; i++) {
		char name[64], env[96];
		snprintf(name, sizeof(name), "index-group-crash-%d", i);
		snprintf(env, sizeof(env), "ECW_CRASH_AT=%s", GROUP_POINTS[i]);
		start_grouping_worker(&cc[i].crash, x, name, cc[i].queue, jobs, 1, 0, env);
	}
	for (int i = 0; i < CASES; i++) {
		struct crash_case *c = &cc[i];
		ITEST_CHECK(proc_wait(&c->crash, 20000), "case %s: the worker did not crash; log:\n%s",
		            GROUP_POINTS[i], proc_tail(c->crash.log_path, 20));
		ITEST_CHECK(proc_exit_code(&c->crash) == 86, "case %s: exit status %d, expected 86; log:\n%s",
		            GROUP_POINTS[i], proc_exit_code(&c->crash), proc_tail(c->crash.log_path, 20));
	}
	for (int i = 0; i < CASES; i++) {
		char name[64];
		snprintf(name, sizeof(name), "index-group-fresh-%d", i);
		start_grouping_worker(&cc[i].fresh, x, name, cc[i].queue, jobs, 1, 0, NULL);
	}
	for (int i = 0; i < CASES; i++) {
		struct crash_case *c = &cc[i];
		struct ix_spec sp = {c->job, c->source, c->index, IX_FIRST_LAST};
		/* What the crashed worker did not finish (a removal may have run
		 * alone before the group, and finished). */
		size_t crashed = proc_count(&c->crash, "message", "outcome", "succeeded", NULL);
		ix_wait_outcomes(&c->fresh, 1, EMPS - crashed, "succeeded", 30000);
		assert_int_equal(ix_outcomes(&c->fresh, 1, "poisoned"), 0);
		ITEST_CHECK(ix_check_recompute(x, &sp) == EMPS - 1, "case %s: the index did not converge",
		            GROUP_POINTS[i]);
		proc_stop(&c->fresh, 10000);
	}
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_index_groups__fewer_requests_per_message, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_groups__member_failure_spares_neighbours, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_groups__crash_after_each_group_step, ix_setup,
	                                    ix_teardown),
	};
	/* ECW_TEST_FILTER=test_job_index_groups__crash* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("job_index_groups", tests, NULL, NULL);
}
