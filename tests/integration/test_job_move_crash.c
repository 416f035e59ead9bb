/* SPDX-License-Identifier: MIT */
/* test_job_move_crash.c - what a move must survive, as a process: build/ecworker-test runs the move job
 * (archive and restore) against the real Azurite with a config written per test (its own queue, poison
 * queue and tables; movefx.h), and the tests judge it by what it leaves in the tables and the queues and by
 * its JSON log and metrics: duplicates racing in two workers (If-Match lets one delete win); a source
 * changed between a run's read and its delete (a live race that must hit the 412 path, and a crash after
 * the copy followed by an application update); and a crash right after each step (ECW_CRASH_AT) with a
 * fresh worker converging to the no-crash state, never in both or neither table. The move job's other
 * cases are in test_job_move.c, its groups (with a crash after each group step) in test_job_move_groups.c.
 * Run one case with ECW_TEST_FILTER='test_job_move_crash__crash*'. */
#include "itest.h"
#include "movefx.h"
#include "proc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- 1. duplicates racing ------------------------------------------------------------------- */

/* Eight employees, each archive message three times, two workers with four
 * threads each: runs copy the same content and race to delete; If-Match lets
 * one delete win, the others see 404 or no source. All succeed, nothing is
 * retried or poisoned, every employee ends in the archive exactly. */
#define DUP_N 8
#define DUP_TIMES 3

static void test_job_move_crash__duplicates_in_two_workers(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e[DUP_N];
	char jobs[512], rk[32];
	struct proc p1, p2;

	for (int i = 0; i < DUP_N; i++) {
		snprintf(rk, sizeof(rk), "dup %02d", i);
		e[i] = mv_employee("Sales", rk, i);
		mv_write_entity(m, m->emp, e[i]);
	}
	for (int k = 0; k < DUP_TIMES; k++)
		for (int i = 0; i < DUP_N; i++)
			mv_put_job(m, "archive-employee", "Sales", ecw_entity_rk(e[i]), NULL, k == 1, NULL);
	mv_std_jobs(jobs, sizeof(jobs), m);
	mv_start_worker(&p1, m, "move-dup-1", jobs, &o);
	mv_start_worker(&p2, m, "move-dup-2", jobs, &o);

	int64_t end = itest_now_ms() + 20000;
	size_t n1 = 0, n2 = 0;
	while (itest_now_ms() < end) {
		n1 = proc_count(&p1, "message", "outcome", "succeeded", NULL);
		n2 = proc_count(&p2, "message", "outcome", "succeeded", NULL);
		if (n1 + n2 >= DUP_N * DUP_TIMES)
			break;
		itest_sleep_ms(100);
	}
	ITEST_CHECK(n1 + n2 == DUP_N * DUP_TIMES, "%zu + %zu messages succeeded, expected %d", n1, n2,
	            DUP_N * DUP_TIMES);
	assert_int_equal(proc_count(&p1, "message", "outcome", "retried", NULL) +
	                     proc_count(&p2, "message", "outcome", "retried", NULL),
	                 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	for (int i = 0; i < DUP_N; i++) {
		mv_assert_only_in(m, m->arch, m->emp, e[i], "after duplicates");
		ecw_entity_free(e[i]);
	}
	assert_int_equal(mv_table_rows(m, m->arch), DUP_N);
	assert_int_equal(mv_table_rows(m, m->emp), 0);
	mv_finish(&p1);
	mv_finish(&p2);
}

/* ---- 2. changed between read and delete ----------------------------------------------------- */

struct updater {
	const char *table, *pk, *rk;
	atomic_bool stop;
	long long last_ok; /* the Version of the last update the service accepted */
	long long attempts;
	int pause_ms;
	int err; /* 0, or the error that ended it other than 404 */
	char error[600];
};

/* An application updating the employee every pause_ms, only while it exists
 * (If-Match: *), until the move deletes it, it is told to stop, or 4 s pass. */
static void *updater_main(void *arg)
{
	struct updater *u = arg;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	int64_t end = itest_now_ms() + 4000;

	if (ecw_account_parse(&acct, itest_connstr()) < 0 || ecw_client_new(&c, acct, NULL) < 0) {
		u->err = ECW_EINVALID;
		snprintf(u->error, sizeof(u->error), "client: %s", ecw_error_last()->message);
		goto done;
	}
	for (long long v = 2; !atomic_load(&u->stop) && itest_now_ms() < end; v++) {
		struct ecw_entity *e = mv_employee(u->pk, u->rk, (int)v);
		int err = ecw_table_write(NULL, c, u->table, e, ECW_WRITE_UPDATE, "*");
		ecw_entity_free(e);
		u->attempts++;
		if (err == ECW_ENOTFOUND)
			break; /* moved: the application would now see it archived */
		if (err < 0) {
			u->err = err;
			snprintf(u->error, sizeof(u->error), "%s", ecw_error_last()->message);
			break;
		}
		u->last_ok = v;
		/* An application, not a flood: a flood livelocks any
		 * read-then-conditional-delete (each round loses to the next
		 * update; the job is then retried after backoff, which is
		 * right, but not what this test is about). */
		itest_sleep_ms(u->pause_ms);
	}
done:
	ecw_client_free(c);
	ecw_account_free(acct);
	return NULL;
}

/* The live race: an application keeps updating the employee while the
 * archive runs. Whatever interleaving happens, the archive must end with the
 * last version the application successfully wrote (never an older one: that
 * version would be lost), and the worker must have hit at least one 412 on
 * the delete (so the "start over with the newer version" path really ran;
 * the metrics endpoint counts storage answers by operation and status). */
#define RACERS 4

static void test_job_move_crash__source_changed_during_move_is_never_lost(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	char jobs[512], pk[RACERS][24], rk[RACERS][32], id[RACERS][64], *page = NULL;
	struct proc p;
	long long conflicts = 0;
	int round;

	o.concurrency = RACERS;
	o.metrics_port = proc_free_port();
	mv_start_worker(&p, m, "move-race", mv_std_jobs(jobs, sizeof(jobs), m), &o);
	PROC_EXPECT_LOG(&p, 1, 10000, "start");
	/* Each round races RACERS employees, each with its own updater; about
	 * half of the races see a 412, so the first round nearly always has one
	 * and further rounds run only until one did. */
	for (round = 0; round < 5 && conflicts == 0; round++) {
		struct updater u[RACERS];
		pthread_t th[RACERS];

		memset(u, 0, sizeof(u));
		for (int i = 0; i < RACERS; i++) {
			struct ecw_entity *v1;
			/* A partition each: the single move's path, whose source
			 * delete answers 412 (a group's transaction fails whole,
			 * and its members take that path only sometimes;
			 * test_job_move_groups races groups). */
			snprintf(pk[i], sizeof(pk[i]), "Race %d", i);
			snprintf(rk[i], sizeof(rk[i]), "racer %d.%d", round, i);
			u[i] = (struct updater){
			    .table = m->emp, .pk = pk[i], .rk = rk[i], .pause_ms = 5, .last_ok = 1};
			v1 = mv_employee(pk[i], rk[i], 1);
			mv_write_entity(m, m->emp, v1);
			ecw_entity_free(v1);
			assert_int_equal(pthread_create(&th[i], NULL, updater_main, &u[i]), 0);
		}
		itest_sleep_ms(30);
		for (int i = 0; i < RACERS; i++)
			mv_put_job(m, "archive-employee", pk[i], rk[i], NULL, false, id[i]);
		for (int i = 0; i < RACERS; i++)
			PROC_EXPECT_LOG(&p, 1, 20000, "message", "message_id", id[i], "outcome", "succeeded");
		for (int i = 0; i < RACERS; i++) {
			/* Most updaters have stopped on their own (404: moved). */
			atomic_store(&u[i].stop, true);
			pthread_join(th[i], NULL);
		}
		for (int i = 0; i < RACERS; i++) {
			ITEST_CHECK(u[i].err == 0, "updater %d failed: %s (%s)", i, ecw_error_name(u[i].err),
			            u[i].error);
			/* The last version the application saw accepted is the
			 * archived one; an update (If-Match: *) cannot recreate
			 * the source after the move deleted it. */
			struct ecw_entity *want = mv_employee(pk[i], rk[i], (int)u[i].last_ok);
			mv_assert_only_in(m, m->arch, m->emp, want, "after the race");
			ecw_entity_free(want);
		}
		free(page);
		page = NULL;
		assert_int_equal(proc_http_get(&page, o.metrics_port, "/metrics"), 200);
		conflicts = (long long)proc_metric(page, "ecw_storage_requests_total", NULL,
		                                   "op=\"table.delete\"", "status=\"412\"", NULL);
		print_message("  round %d: %lld+%lld+%lld+%lld updates, %lld deletes answered 412 so far\n",
		              round, u[0].attempts, u[1].attempts, u[2].attempts, u[3].attempts, conflicts);
	}
	ITEST_CHECK(conflicts > 0,
	            "no delete ever failed with 412 in %d rounds: the retry path did not run; "
	            "metrics:\n%s",
	            round, page);
	free(page);
	mv_finish(&p);
}

/* The crash variant the issue describes: the worker dies right after the copy
 * (both tables hold v1), the application then changes the source (v2), and a
 * fresh worker gets the redelivered message. The archive must end with v2 and
 * the source gone: the fresh run reads v2, so the stale copy is replaced. */
static void test_job_move_crash__changed_after_copy_then_crash(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *v1 = mv_employee("Sales", "o'brien 001", 1),
	                  *v2 = mv_employee("Sales", "o'brien 001", 2);
	char jobs[512], id[64];
	struct proc p1, p2;

	o.visibility_s = 2;
	mv_std_jobs(jobs, sizeof(jobs), m);
	mv_write_entity(m, m->emp, v1);
	mv_put_job(m, "archive-employee", "Sales", "o'brien 001", NULL, false, id);
	o.crash_at = "move.copied";
	mv_start_worker(&p1, m, "move-changed-crash", jobs, &o);
	ITEST_CHECK(proc_wait(&p1, 15000), "the worker did not crash at move.copied; log:\n%s",
	            proc_tail(p1.log_path, 20));
	assert_int_equal(proc_exit_code(&p1), 86);
	/* Right after the copy: in both, identical. */
	struct ecw_entity *a = mv_get_or_null(m, m->arch, "Sales", "o'brien 001");
	struct ecw_entity *s = mv_get_or_null(m, m->emp, "Sales", "o'brien 001");
	mv_assert_same_entity(v1, a, "the copy after the crash");
	mv_assert_same_entity(v1, s, "the source after the crash");
	ecw_entity_free(a);
	ecw_entity_free(s);

	ECW_ASSERT_OK(ecw_table_write(NULL, m->c, m->emp, v2, ECW_WRITE_UPDATE, "*"));
	o.crash_at = NULL;
	mv_start_worker(&p2, m, "move-changed-rerun", jobs, &o);
	PROC_EXPECT_LOG(&p2, 1, 15000, "message", "message_id", id, "outcome", "succeeded", "dequeue_count",
	                "2");
	mv_expect_success(&p2, id, "");
	mv_assert_only_in(m, m->arch, m->emp, v2, "the newer version won");
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	mv_finish(&p2);
	ecw_entity_free(v1);
	ecw_entity_free(v2);
}

/* ---- 3. a crash after each step ---------------------------------------------------------- */

/* Starts a worker that dies right after `point`, checks where the entity is
 * then, and starts a fresh worker that must converge to the no-crash state
 * (only in the archive, identical) on the redelivered message. */
static void crash_after(struct mv *m, const char *point, enum mv_where then, const char *rerun_detail)
{
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e = mv_employee("a+b&c=d%", "o'brien 001", 5);
	char jobs[512], id[64], name[64];
	struct proc p1, p2;

	o.visibility_s = 2; /* the redelivery comes quickly */
	mv_std_jobs(jobs, sizeof(jobs), m);
	mv_write_entity(m, m->emp, e);
	mv_put_job(m, "archive-employee", "a+b&c=d%", "o'brien 001", NULL, false, id);
	o.crash_at = point;
	snprintf(name, sizeof(name), "move-crash-%s", point + 5);
	mv_start_crashing_worker(&p1, m, name, jobs, &o);
	/* Dead: it logged no outcome, and the message is still there. */
	assert_int_equal(proc_count(&p1, "message", NULL), 0);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 1);

	struct ecw_entity *s = mv_get_or_null(m, m->emp, "a+b&c=d%", "o'brien 001");
	struct ecw_entity *a = mv_get_or_null(m, m->arch, "a+b&c=d%", "o'brien 001");
	ITEST_CHECK(s || a, "after %s: in neither table", point);
	if (then == MV_IN_SOURCE || then == MV_IN_BOTH)
		mv_assert_same_entity(e, s, "the source after the crash");
	else
		ITEST_CHECK(s == NULL, "after %s the source is still there", point);
	if (then == MV_IN_TARGET || then == MV_IN_BOTH)
		mv_assert_same_entity(e, a, "the copy after the crash");
	else
		ITEST_CHECK(a == NULL, "after %s a copy exists already", point);
	ecw_entity_free(s);
	ecw_entity_free(a);

	o.crash_at = NULL;
	snprintf(name, sizeof(name), "move-rerun-%s", point + 5);
	mv_start_worker(&p2, m, name, jobs, &o);
	PROC_EXPECT_LOG(&p2, 1, 15000, "message", "message_id", id, "outcome", "succeeded", "dequeue_count",
	                "2");
	mv_expect_success(&p2, id, rerun_detail);
	/* The no-crash end state: only in the archive, identical. */
	mv_assert_only_in(m, m->arch, m->emp, e, point);
	assert_int_equal(mv_table_rows(m, m->arch), 1);
	assert_int_equal(mv_table_rows(m, m->emp), 0);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p2);
	ecw_entity_free(e);
}

static void test_job_move_crash__crash_after_read(void **state)
{
	crash_after(*state, "move.read", MV_IN_SOURCE, "");
}

static void test_job_move_crash__crash_after_copied(void **state)
{
	crash_after(*state, "move.copied", MV_IN_BOTH, "");
}

static void test_job_move_crash__crash_after_deleted(void **state)
{
	/* The rerun finds no source: already moved. */
	crash_after(*state, "move.deleted", MV_IN_TARGET, "already-moved");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_move_crash__duplicates_in_two_workers, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_crash__source_changed_during_move_is_never_lost,
	                                    mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_crash__changed_after_copy_then_crash, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_crash__crash_after_read, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_crash__crash_after_copied, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_crash__crash_after_deleted, mv_setup, mv_teardown),
	};
	/* ECW_TEST_FILTER=test_job_move_crash__crash* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("job_move_crash", tests, NULL, NULL);
}
