/* SPDX-License-Identifier: MIT */
/* test_job_move_blob_crash.c - the move between a table and blobs as a
 * worker process (movefx.h's worker, moveblobfx.h's jobs and container): a
 * crash right after each step of the archive and of the restore
 * (ECW_CRASH_AT), each followed by a fresh worker that must converge on the
 * redelivered message to the no-crash state, never in both places or
 * neither after it; a missing container holding the messages (outcome
 * `blocked`, the container named, nothing poisoned or deleted); and a blob
 * that is no entity poisoned at once, with the reason; `then:` after an
 * archive; backfill of a restore. The job's other cases
 * run in this process in test_job_move_blob.c. Run one case with
 * ECW_TEST_FILTER='test_job_move_blob_crash__archive*'. */
#include "itest.h"
#include "moveblobfx.h"
#include "movefx.h"
#include "proc.h"
#include "workerfx.h"

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

/* The message of job for the employee crashes a worker right after point,
 * leaving it at `then` (MV_IN_SOURCE: where the job found it); a fresh
 * worker converges to the other side with rerun_detail. */
static void crash_after(struct mv *m, bool restore, const char *point, enum mv_where then,
                        const char *rerun_detail)
{
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e = mbx_every_type("a+b&c=d%", "o'brien 001.", 5);
	const char *job = restore ? "restore-blob" : "archive-blob";
	enum mv_where start = restore ? MV_IN_TARGET : MV_IN_SOURCE,
	              end = restore ? MV_IN_SOURCE : MV_IN_TARGET;
	char jobs[768], id[64], name[64];
	struct proc p1, p2;

	o.visibility_s = 2; /* the redelivery comes quickly */
	mbx_jobs(jobs, sizeof(jobs), m->emp, container);
	mv_write_entity(m, m->emp, e);
	if (restore) { /* archived first, by a worker that ends cleanly */
		mv_put_job(m, "archive-blob", ecw_entity_pk(e), ecw_entity_rk(e), NULL, false, id);
		mv_start_worker(&p1, m, "moveblob-archive-first", jobs, &o);
		PROC_EXPECT_LOG(&p1, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
		mv_finish(&p1);
	}
	assert_int_equal(mbx_where_is(m, container, e, "before"), start);
	mv_put_job(m, job, ecw_entity_pk(e), ecw_entity_rk(e), NULL, false, id);
	o.crash_at = point;
	snprintf(name, sizeof(name), "moveblob-crash-%s", point + 5);
	mv_start_crashing_worker(&p1, m, name, jobs, &o);
	assert_int_equal(proc_count(&p1, "message", "message_id", id, NULL), 0);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 1);
	enum mv_where after = mbx_where_is(m, container, e, "after the crash");
	ITEST_CHECK(after == (then == MV_IN_BOTH     ? MV_IN_BOTH
	                      : then == MV_IN_SOURCE ? start
	                                             : end),
	            "after %s the employee is at %d", point, (int)after);

	o.crash_at = NULL;
	snprintf(name, sizeof(name), "moveblob-rerun-%s", point + 5);
	mv_start_worker(&p2, m, name, jobs, &o);
	PROC_EXPECT_LOG(&p2, 1, 15000, "message", "message_id", id, "outcome", "succeeded", "dequeue_count",
	                "2");
	mv_expect_success(&p2, id, rerun_detail);
	assert_int_equal(mbx_where_is(m, container, e, "after the rerun"), end);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p2);
	ecw_entity_free(e);
}

static void test_job_move_blob_crash__archive_after_read(void **state)
{
	crash_after(*state, false, "move.to_blob.read", MV_IN_SOURCE, "");
}

static void test_job_move_blob_crash__archive_after_written(void **state)
{
	crash_after(*state, false, "move.to_blob.written", MV_IN_BOTH, "");
}

static void test_job_move_blob_crash__archive_after_deleted(void **state)
{
	crash_after(*state, false, "move.to_blob.deleted", MV_IN_TARGET, "already-moved");
}

static void test_job_move_blob_crash__restore_after_read(void **state)
{
	crash_after(*state, true, "move.from_blob.read", MV_IN_SOURCE, "");
}

static void test_job_move_blob_crash__restore_after_written(void **state)
{
	crash_after(*state, true, "move.from_blob.written", MV_IN_BOTH, "");
}

static void test_job_move_blob_crash__restore_after_deleted(void **state)
{
	crash_after(*state, true, "move.from_blob.deleted", MV_IN_TARGET, "already-moved");
}

/* A restore from a container nobody created: check-config --online names
 * it; its message is held (`blocked`, naming the container), never
 * poisoned; the worker does not create a container it only reads. */
static void test_job_move_blob_crash__missing_container_blocks(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	char jobs[768], id[64];
	struct proc p;
	struct proc_log log;

	snprintf(jobs, sizeof(jobs),
	         "  restore-blob: {type: move, from_blob: {container: %s, name: \"" MBX_TEMPLATE
	         "\"}, to: %s}\n",
	         container, m->emp);
	/* check-config --online names the restore's container (preflight.c,
	 * the job type's container). */
	struct wfx_worker w = WFX_WORKER(m->fx.t->queue, m->fx.poison);
	char path[640], line[256], *out = NULL, *err = NULL;
	w.jobs = jobs;
	wfx_write_config(path, sizeof(path), "moveblob-online", &w);
	const char *online[] = {"check-config", "--online", "-c", path, NULL};
	int rc = proc_run(&out, &err, "moveblob-online", online, NULL, 30000);
	ITEST_CHECK(rc == 1, "check-config --online exited %d:\n%s\n%s", rc, out, err);
	snprintf(line, sizeof(line), "job 'restore-blob' works in blob container '%s', which does not exist",
	         container);
	ITEST_CHECK(strstr(out, line), "no line \"%s\" in:\n%s", line, out);
	free(out);
	free(err);
	mv_put_job(m, "restore-blob", "Sales", "e1", NULL, false, id);
	mv_start_worker(&p, m, "moveblob-blocked", jobs, &o);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "blocked");
	struct json_object *l = mv_msg_line(&log, &p, id, "blocked");
	ITEST_CHECK(strstr(proc_field(l, "error"), container), "error: %s", proc_field(l, "error"));
	proc_log_dispose(&log);
	mv_finish(&p);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 1);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	assert_int_equal(ecw_blob_container_delete(m->c, container), ECW_ENOCONTAINER);
	ecw_error_clear();
}

/* A blob that is no entity: poisoned at the first delivery, the reason
 * naming the blob; the blob stays, nothing is restored. */
static void test_job_move_blob_crash__unparsable_blob_poisons(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	char jobs[768], id[64], name[256];
	struct proc p;
	struct proc_log log;

	ECW_ASSERT_OK(ecw_blob_container_create(NULL, m->c, container));
	mbx_name(name, sizeof(name), "Sales", "e1");
	ECW_ASSERT_OK(ecw_blob_put(NULL, m->c, container, name, "{\"PartitionKey\":", 16, NULL));
	mv_put_job(m, "restore-blob", "Sales", "e1", NULL, false, id);
	mv_start_worker(&p, m, "moveblob-poison", mbx_jobs(jobs, sizeof(jobs), m->emp, container), &o);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "poisoned", "reason",
	                "permanent");
	struct json_object *l = mv_msg_line(&log, &p, id, "poisoned");
	ITEST_CHECK(strstr(proc_field(l, "error"), "no table entity") && strstr(proc_field(l, "error"), name),
	            "error: %s", proc_field(l, "error"));
	proc_log_dispose(&log);
	mv_finish(&p);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 1);
	assert_null(mv_get_or_null(m, m->emp, "Sales", "e1"));
	struct ecw_blob_info *info = NULL;
	ECW_ASSERT_OK(ecw_blob_props(&info, m->c, container, name));
	ecw_blob_info_free(info);
}

/* `then:` after an archive to blobs: three messages of one partition (run
 * as a group) each enqueue the follow-up for the same keys and trace id
 * once the entity is in its blob, and a message for nobody ("missing")
 * too, as after a table move. */
static void test_job_move_blob_crash__then_follows_an_archive(void **state)
{
	static const char *const rks[] = {"o'brien 001.", "e2", "%41"};
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e[3];
	char jobs[1024], id[64];
	struct proc p;
	struct proc_log log;

	snprintf(jobs, sizeof(jobs),
	         "  archive-blob: {type: move, from: %s, to_blob: {container: %s, name: \"" MBX_TEMPLATE
	         "\"}, then: [note]}\n"
	         "  note: {type: test-count, table: %s}\n",
	         m->emp, container, m->note);
	for (int i = 0; i < 3; i++) {
		e[i] = mbx_every_type("Sales%", rks[i], i);
		mv_write_entity(m, m->emp, e[i]);
		mv_put_job(m, "archive-blob", "Sales%", rks[i], "trace-36", false, id);
	}
	mv_put_job(m, "archive-blob", "Sales%", "nobody", "trace-36", false, id);
	o.concurrency = 1;
	mv_start_worker(&p, m, "moveblob-then", jobs, &o);
	PROC_EXPECT_LOG(&p, 4, 15000, "message", "job", "archive-blob", "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 4, 15000, "message", "job", "note", "outcome", "succeeded");
	itest_sleep_ms(600); /* a second run of anything would be a bug */
	proc_log_read(&log, p.log_path);
	assert_int_equal(proc_log_count(&log, "message", "job", "archive-blob", NULL), 4);
	assert_int_equal(proc_log_count(&log, "message", "job", "note", NULL), 4);
	for (int i = 0; i < 4; i++) {
		const char *rk = i < 3 ? rks[i] : "nobody";
		struct json_object *l = proc_log_find(&log, 0, "message", "job", "note", "rk", rk, NULL);
		ITEST_CHECK(l != NULL, "no follow-up line for %s", rk);
		assert_string_equal(proc_field(l, "pk"), "Sales%");
		assert_string_equal(proc_field(l, "id"), "trace-36"); /* the trace follows the chain */
	}
	proc_log_dispose(&log);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(mbx_where_is(m, container, e[i], "archived, then noted"), MV_IN_TARGET);
		ecw_entity_free(e[i]);
	}
	assert_int_equal(mv_table_rows(m, m->note), 4);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p);
}

/* `ecworker audit --repair` over both directions (archive-blob and
 * restore-blob) is refused, naming both jobs and what they move between: a
 * pair found in both places would be completed in whichever direction ran
 * first. Naming one job is accepted. */
static void test_job_move_blob_crash__audit_repair_of_both_directions_is_refused(void **state)
{
	struct mv *m = *state;
	struct wfx_worker w = WFX_WORKER(m->fx.t->queue, m->fx.poison);
	char jobs[768], cfg[640], *out = NULL, *err = NULL;

	w.jobs = mbx_jobs(jobs, sizeof(jobs), m->emp, container);
	wfx_write_config(cfg, sizeof(cfg), "moveblob-audit-both", &w);
	int code = proc_run(&out, &err, "moveblob-audit-both",
	                    (const char *const[]){"audit", "-c", cfg, "--repair", NULL}, NULL, 30000);
	assert_int_equal(code, 2);
	ITEST_CHECK(strstr(err, "jobs 'archive-blob' and 'restore-blob' move between the same table and "
	                        "blobs in opposite directions"),
	            "stderr: %s", err);
	free(out);
	free(err);
	code = proc_run(&out, &err, "moveblob-audit-one",
	                (const char *const[]){"audit", "-c", cfg, "--repair", "archive-blob", NULL}, NULL,
	                30000);
	ITEST_CHECK(code == 0, "exit %d; stderr: %s", code, err);
	free(out);
	free(err);
}

/* `ecworker backfill` of a restore lists its container and enqueues the
 * keys of each blob its name template can have made (names escaped, a blob
 * of another kind passed over); a worker then restores them all. --filter
 * (a table's) is refused for it. */
static void test_job_move_blob_crash__backfill_restore_lists_the_container(void **state)
{
	static const char *const rks[] = {"e1", "o'brien 001.", "%41"};
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct wfx_worker w = WFX_WORKER(m->fx.t->queue, m->fx.poison);
	struct ecw_entity *e[3];
	char jobs[768], cfg[640], name[256], *out = NULL, *err = NULL;
	struct proc p;

	ECW_ASSERT_OK(ecw_blob_container_create(NULL, m->c, container));
	for (int i = 0; i < 3; i++) {
		struct ecw_buf json;
		e[i] = mbx_every_type("Sales.", rks[i], i);
		ecw_buf_init(&json, 0);
		ECW_ASSERT_OK(ecw_entity_to_json(&json, e[i]));
		mbx_name(name, sizeof(name), "Sales.", rks[i]);
		ECW_ASSERT_OK(ecw_blob_put(NULL, m->c, container, name, json.ptr, json.len, NULL));
		ecw_buf_dispose(&json);
	}
	ECW_ASSERT_OK(ecw_blob_put(NULL, m->c, container, "notes/readme.txt", "hi", 2, NULL));
	w.jobs = mbx_jobs(jobs, sizeof(jobs), m->emp, container);
	wfx_write_config(cfg, sizeof(cfg), "moveblob-backfill", &w);
	int code = proc_run(&out, &err, "moveblob-backfill-filter",
	                    (const char *const[]){"backfill", "-c", cfg, "restore-blob", "--filter",
	                                          "PartitionKey eq 'x'", NULL},
	                    NULL, 30000);
	assert_int_equal(code, 1);
	ITEST_CHECK(strstr(err, "reads blobs, not a table"), "stderr: %s", err);
	free(out);
	free(err);
	code = proc_run(&out, NULL, "moveblob-backfill",
	                (const char *const[]){"backfill", "-c", cfg, "restore-blob", NULL}, NULL, 30000);
	assert_int_equal(code, 0);
	ITEST_CHECK(strstr(out, "3 scanned, 3 enqueued, 0 failed"), "summary: %s", out);
	free(out);
	mv_start_worker(&p, m, "moveblob-backfill-worker", jobs, &o);
	PROC_EXPECT_LOG(&p, 3, 15000, "message", "job", "restore-blob", "outcome", "succeeded");
	mv_finish(&p);
	for (int i = 0; i < 3; i++) {
		struct ecw_entity *t = mv_get_or_null(m, m->emp, "Sales.", rks[i]);
		mv_assert_same_entity(e[i], t, "restored by the backfill's message");
		ecw_entity_free(t);
		ecw_entity_free(e[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_move_blob_crash__archive_after_read, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_crash__then_follows_an_archive, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(
	        test_job_move_blob_crash__audit_repair_of_both_directions_is_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_crash__archive_after_written, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_crash__archive_after_deleted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_crash__restore_after_read, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_crash__restore_after_written, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_crash__restore_after_deleted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_crash__missing_container_blocks, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_crash__unparsable_blob_poisons, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob_crash__backfill_restore_lists_the_container,
	                                    setup, teardown),
	};
	return cmocka_run_group_tests_name("job_move_blob_crash", tests, NULL, NULL);
}
