/* SPDX-License-Identifier: MIT */
/* test_job_move_blob_groups.c - the blob move's groups (jobs/move_blob_group.c)
 * as a worker process: messages of one partition received together are
 * archived to blobs and restored in groups (sources read by queries and
 * deleted by one transaction; restored entities inserted by one), with the
 * same outcomes as one by one: a stale blob in the way, a duplicate, a
 * message for nobody; a source changed between the group's puts and its
 * delete is archived in its newer version; and a crash right after each
 * step of both groups leaves every entity where a single run's step leaves
 * it, and a fresh worker converges. Run one case with
 * ECW_TEST_FILTER='test_job_move_blob_groups__crash*'. */
#include "itest.h"
#include "moveblobfx.h"
#include "movefx.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char container[64];

static int setup(void **state)
{
	return mbx_mv_setup(state, container);
}

static int teardown(void **state)
{
	return mbx_mv_teardown(state, container);
}

/* The largest "group" among p's message lines (0: none ran in one). */
static long long largest_group(const struct proc *p)
{
	struct proc_log log;
	long long max = 0;

	proc_log_read(&log, p->log_path);
	for (size_t i = 0; i < log.n; i++)
		if (strcmp(proc_field(log.lines[i], "event"), "message") == 0 &&
		    proc_field_int(log.lines[i], "group", 0) > max)
			max = proc_field_int(log.lines[i], "group", 0);
	proc_log_dispose(&log);
	return max;
}

static long long requests(const char *page, const char *op)
{
	char label[64];

	snprintf(label, sizeof(label), "op=\"%s\"", op);
	return (long long)proc_metric(page, "ecw_storage_requests_total", NULL, label, NULL);
}

/* A blob holding e's JSON under e's name (not what an archive writes: no
 * metadata), standing for an older archive. */
static void put_blob(struct mv *m, const struct ecw_entity *e)
{
	struct ecw_buf json;
	char name[256];

	ecw_buf_init(&json, 0);
	ECW_ASSERT_OK(ecw_entity_to_json(&json, e));
	mbx_name(name, sizeof(name), ecw_entity_pk(e), ecw_entity_rk(e));
	ECW_ASSERT_OK(ecw_blob_put(NULL, m->c, container, name, json.ptr, json.len, NULL));
	ecw_buf_dispose(&json);
}

/* One receive, archived in groups, then restored in groups. 20 employees
 * of every EDM type in one partition (keys with '%': Azurite's $batch
 * parser cuts a body at a raw U+2028, which mbx_every_type then leaves
 * out), every message enqueued before the worker starts (one job thread,
 * receives of 32); with them a message sent twice, one for an employee that
 * never existed, and for one employee a stale blob in the way (another
 * version). Its put is refused (409) and that member alone must take the
 * single path, replacing the stale blob with the source as it is. The
 * table side costs a query per 14 members and a transaction of deletes per
 * group where one by one it costs a GET and a DELETE each; the restore's
 * inserts go in one transaction per group. */
static void test_job_move_blob_groups__archive_and_restore_a_receive_together(void **state)
{
	enum { N = 20, STALE = 11, DUP = 3 };
	static const char pk[] = "North 100%";
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e[N], *stale;
	char jobs[768], rk[32], id[N][64], dup_id[64], ghost_id[64], *page = NULL;
	struct proc p;

	for (int i = 0; i < N; i++) {
		snprintf(rk, sizeof(rk), "emp '%02d.", i);
		e[i] = mbx_every_type(pk, rk, i + 1);
		mv_write_entity(m, m->emp, e[i]);
	}
	ECW_ASSERT_OK(ecw_blob_container_create(NULL, m->c, container));
	stale = mbx_every_type(pk, ecw_entity_rk(e[STALE]), 99);
	ECW_ASSERT_OK(ecw_entity_set_string(stale, "Obsolete", "an older archive's", 18));
	put_blob(m, stale);
	for (int i = 0; i < N; i++) {
		mv_put_job(m, "archive-blob", pk, ecw_entity_rk(e[i]), NULL, false, id[i]);
		if (i == 9) {
			mv_put_job(m, "archive-blob", pk, ecw_entity_rk(e[DUP]), NULL, false, dup_id);
			mv_put_job(m, "archive-blob", pk, "nobody", NULL, false, ghost_id);
		}
	}
	o.concurrency = 1;
	o.batch_size = 32;
	o.metrics_port = proc_free_port();
	mbx_jobs(jobs, sizeof(jobs), m->emp, container);
	mv_start_worker(&p, m, "moveblob-group-archive", jobs, &o);
	PROC_EXPECT_LOG(&p, N + 2, 30000, "message", "outcome", "succeeded");
	for (int i = 0; i < N; i++)
		if (i != DUP)
			mv_expect_success(&p, id[i], "");
	mv_expect_success(&p, ghost_id, "missing");
	assert_int_equal(proc_count(&p, "message", "outcome", "retried", NULL), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(mbx_where_is(m, container, e[i], "archived in a group"), MV_IN_TARGET);
	assert_int_equal(mv_table_rows(m, m->emp), 0);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);

	long long largest = largest_group(&p);
	assert_int_equal(proc_http_get(&page, o.metrics_port, "/metrics"), 200);
	long long gets = requests(page, "table.get"), queries = requests(page, "table.query"),
	          deletes = requests(page, "table.delete"), batches = requests(page, "table.batch"),
	          puts = requests(page, "blob.put");
	print_message("  archive: %lld GETs, %lld queries, %lld deletes, %lld transactions, %lld puts for %d "
	              "entities (largest group %lld)\n",
	              gets, queries, deletes, batches, puts, N, largest);
	ITEST_CHECK(largest >= 2, "no message ran in a group; log %s", p.log_path);
	ITEST_CHECK(queries >= 1 && gets < N / 2,
	            "%lld GETs and %lld queries for %d entities: the group read its sources one by one", gets,
	            queries, N);
	/* One by one, a delete each (a transaction each: the client writes an
	 * entity whose keys hold '%' through $batch, table.c). */
	ITEST_CHECK(batches >= 1 && deletes + batches < N / 2,
	            "%lld deletes and %lld transactions for %d entities: the group deleted one by one",
	            deletes, batches, N);
	/* The stale blob: refused once in the group, then replaced If-Match. */
	ITEST_CHECK(puts >= N + 1, "%lld puts for %d blobs and a stale one", puts, N);
	free(page);
	mv_finish(&p);

	/* The restore, in groups as well. */
	for (int i = 0; i < N; i++)
		mv_put_job(m, "restore-blob", pk, ecw_entity_rk(e[i]), NULL, false, id[i]);
	mv_put_job(m, "restore-blob", pk, "nobody", NULL, false, ghost_id);
	o.metrics_port = proc_free_port();
	mv_start_worker(&p, m, "moveblob-group-restore", jobs, &o);
	PROC_EXPECT_LOG(&p, N + 1, 30000, "message", "outcome", "succeeded");
	for (int i = 0; i < N; i++)
		mv_expect_success(&p, id[i], "");
	mv_expect_success(&p, ghost_id, "missing");
	for (int i = 0; i < N; i++)
		assert_int_equal(mbx_where_is(m, container, e[i], "restored in a group"), MV_IN_SOURCE);
	assert_int_equal(mv_table_rows(m, m->emp), N);
	largest = largest_group(&p);
	assert_int_equal(proc_http_get(&page, o.metrics_port, "/metrics"), 200);
	long long inserts = requests(page, "table.insert"), blob_deletes = requests(page, "blob.delete");
	batches = requests(page, "table.batch");
	print_message(
	    "  restore: %lld inserts, %lld transactions, %lld blob deletes for %d entities (largest "
	    "group %lld)\n",
	    inserts, batches, blob_deletes, N, largest);
	ITEST_CHECK(largest >= 2, "no restore ran in a group; log %s", p.log_path);
	ITEST_CHECK(batches >= 1 && inserts + batches < N / 2,
	            "%lld inserts and %lld transactions for %d entities: the group inserted one by one",
	            inserts, batches, N);
	assert_int_equal(blob_deletes, N);
	free(page);
	mv_finish(&p);
	for (int i = 0; i < N; i++)
		ecw_entity_free(e[i]);
	ecw_entity_free(stale);
}

/* One member changes between the group's puts and its delete: five
 * employees in one group, the worker held for 3 s right after the puts
 * (ECW_TEST_PAUSE_AT=move.to_blob.group.written) while the application
 * updates one. The transaction of deletes is If-Match the versions read, so
 * it is refused (412) as a whole; each member then runs alone, and the
 * changed one must end archived in its NEWER version (a delete that ignored
 * the change would lose it), the others as they were. */
static void test_job_move_blob_groups__member_changed_before_delete(void **state)
{
	enum { N = 5, CHANGED = 2 };
	static const char pk[] = "Sales%";
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e[N], *v2;
	char jobs[768], rk[32], id[N][64], group[16];
	struct proc p;

	for (int i = 0; i < N; i++) {
		snprintf(rk, sizeof(rk), "a+b&c=d %d", i);
		e[i] = mbx_every_type(pk, rk, 1);
		mv_write_entity(m, m->emp, e[i]);
		mv_put_job(m, "archive-blob", pk, rk, NULL, false, id[i]);
	}
	v2 = mbx_every_type(pk, ecw_entity_rk(e[CHANGED]), 2);
	o.pause_at = "move.to_blob.group.written:3000";
	mv_start_worker(&p, m, "moveblob-group-changed", mbx_jobs(jobs, sizeof(jobs), m->emp, container), &o);

	/* The blobs are in: the group is paused before its delete. */
	for (int64_t end = itest_now_ms() + 15000; itest_now_ms() < end; itest_sleep_ms(20)) {
		struct ecw_entity *last = mbx_blob_entity(m->c, container, pk, ecw_entity_rk(e[N - 1]), NULL);
		bool in = last != NULL;
		ecw_entity_free(last);
		if (in)
			break;
	}
	int err = ecw_table_write(NULL, m->c, m->emp, v2, ECW_WRITE_UPDATE, "*");
	ITEST_CHECK(err == 0, "updating %s during the pause: %s (the group deleted the source first?)",
	            ecw_entity_rk(v2), itest_last_error());

	snprintf(group, sizeof(group), "%d", N);
	for (int i = 0; i < N; i++) {
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded", "group",
		                group);
		mv_expect_success(&p, id[i], "");
	}
	assert_int_equal(proc_count(&p, "message", "outcome", "retried", NULL), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(
		    mbx_where_is(m, container, i == CHANGED ? v2 : e[i],
		                 i == CHANGED ? "the version written after the group's read" : "unchanged"),
		    MV_IN_TARGET);
	assert_int_equal(mv_table_rows(m, m->emp), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p);
	for (int i = 0; i < N; i++)
		ecw_entity_free(e[i]);
	ecw_entity_free(v2);
}

/* ---- a crash after each step of a group ------------------------------------------------------- */

/* Five employees of one partition (its own per point, so that the rounds
 * do not meet), their messages enqueued before the worker starts so that
 * one receive brings them and one group takes them: the worker dies right
 * after point. Each member must then be in a place a single run's step
 * leaves it: `then` for all of them, or, for a point passed per member
 * (first_then != then), the first member at first_then and the others at
 * then (for the archive's pipelined puts, the others at either). A fresh
 * worker converges on the redelivered messages. */
#define CRASH_N 5

static void crash_after(struct mv *m, bool restore, const char *point, enum mv_where first_then,
                        enum mv_where then, const char *rerun_detail)
{
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e[CRASH_N];
	const char *job = restore ? "restore-blob" : "archive-blob";
	enum mv_where end = restore ? MV_IN_SOURCE : MV_IN_TARGET;
	char jobs[768], rk[32], id[CRASH_N][64], pk[64], name[96];
	struct proc p1, p2;

	o.visibility_s = 2; /* the redelivery comes quickly */
	snprintf(pk, sizeof(pk), "%s%%", point + strlen("move."));
	mbx_jobs(jobs, sizeof(jobs), m->emp, container);
	for (int i = 0; i < CRASH_N; i++) {
		snprintf(rk, sizeof(rk), "o'brien %03d.", i);
		e[i] = mbx_every_type(pk, rk, i + 1);
		mv_write_entity(m, m->emp, e[i]);
	}
	if (restore) { /* archived first, by a worker that ends cleanly */
		for (int i = 0; i < CRASH_N; i++)
			mv_put_job(m, "archive-blob", pk, ecw_entity_rk(e[i]), NULL, false, id[i]);
		mv_start_worker(&p1, m, "moveblob-group-archive-first", jobs, &o);
		PROC_EXPECT_LOG(&p1, CRASH_N, 15000, "message", "outcome", "succeeded");
		mv_finish(&p1);
	}
	for (int i = 0; i < CRASH_N; i++)
		mv_put_job(m, job, pk, ecw_entity_rk(e[i]), NULL, false, id[i]);
	o.crash_at = point;
	snprintf(name, sizeof(name), "moveblob-group-crash-%s", point + strlen("move."));
	mv_start_crashing_worker(&p1, m, name, jobs, &o);
	assert_int_equal(proc_count(&p1, "message", NULL), 0);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), CRASH_N);
	for (int i = 0; i < CRASH_N; i++) {
		enum mv_where w = mbx_where_is(m, container, e[i], point);
		/* Members run in their order: the first is the one past the point.
		 * The archive's puts go pipelined, all in one write before the
		 * first answer: the later members' may have applied too, each
		 * then at its own step 2. */
		bool either = i > 0 && strcmp(point, "move.to_blob.group.put") == 0 && w == first_then;
		ITEST_CHECK(either || w == (i == 0 ? first_then : then),
		            "after %s, member %d is at %d (expected %d)", point, i, (int)w,
		            (int)(i == 0 ? first_then : then));
	}

	o.crash_at = NULL;
	snprintf(name, sizeof(name), "moveblob-group-rerun-%s", point + strlen("move."));
	mv_start_worker(&p2, m, name, jobs, &o);
	for (int i = 0; i < CRASH_N; i++) {
		PROC_EXPECT_LOG(&p2, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded",
		                "dequeue_count", "2");
		mv_expect_success(&p2, id[i], i == 0 ? rerun_detail : then == end ? "already-moved" : "");
	}
	for (int i = 0; i < CRASH_N; i++) {
		assert_int_equal(mbx_where_is(m, container, e[i], "after the rerun"), end);
		ecw_entity_free(e[i]);
	}
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p2);
}

static void test_job_move_blob_groups__crash_after_each_archive_step(void **state)
{
	crash_after(*state, false, "move.to_blob.group.read", MV_IN_SOURCE, MV_IN_SOURCE, "");
	/* The first blob is put, the others not yet. */
	crash_after(*state, false, "move.to_blob.group.put", MV_IN_BOTH, MV_IN_SOURCE, "");
	crash_after(*state, false, "move.to_blob.group.written", MV_IN_BOTH, MV_IN_BOTH, "");
	crash_after(*state, false, "move.to_blob.group.deleted", MV_IN_TARGET, MV_IN_TARGET, "already-moved");
}

static void test_job_move_blob_groups__crash_after_each_restore_step(void **state)
{
	crash_after(*state, true, "move.from_blob.group.read", MV_IN_TARGET, MV_IN_TARGET, "");
	crash_after(*state, true, "move.from_blob.group.written", MV_IN_BOTH, MV_IN_BOTH, "");
	/* The first blob is deleted, the others not yet. */
	crash_after(*state, true, "move.from_blob.group.blob_deleted", MV_IN_SOURCE, MV_IN_BOTH,
	            "already-moved");
	crash_after(*state, true, "move.from_blob.group.deleted", MV_IN_SOURCE, MV_IN_SOURCE,
	            "already-moved");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_move_blob_groups__archive_and_restore_a_receive_together,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_groups__member_changed_before_delete, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_groups__crash_after_each_archive_step, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_groups__crash_after_each_restore_step, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests_name("job_move_blob_groups", tests, NULL, NULL);
}
