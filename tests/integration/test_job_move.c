/* SPDX-License-Identifier: MIT */
/* test_job_move.c - the move job (archive and restore) and job chaining (`then:`), as a process:
 * build/ecworker-test runs against the real Azurite with a config written per test (its own queue, poison
 * queue and tables; movefx.h), and the tests judge it by what it leaves in the tables, the queues and its
 * JSON log. Covered: the happy path both ways; every message run twice; a source in neither table;
 * re-keying by templates (and a template the entity cannot fill, which is permanent), newest first and in
 * place; a stale archive after a restore and messages reordered (move is a command: see the notes there);
 * every EDM type under hostile keys through archive and restore; follow-up jobs enqueued for the same
 * keys; and an application using the official Azure SDK for JavaScript (tests/interop/sdk.js) on both
 * ends. Duplicates racing in two workers, a source changed during a move and a crash after each step are
 * in test_job_move_crash.c; groups (messages of one partition run together) in test_job_move_groups.c; two
 * runs of one move staged in this process in test_job_move_race.c.
 * Run one case with ECW_TEST_FILTER='test_job_move__rekey*'; tests run from the repository root (the SDK
 * driver is found there). */
#include "itest.h"
#include "movefx.h"
#include "proc.h"

#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobs_private.h"

extern char **environ;

/* ---- poison envelopes ---------------------------------------------------------------- */

/* The poison envelopes (want of them), parsed; free with envelopes_free. */
static struct json_object **poison_envelopes(struct mv *m, size_t want)
{
	struct json_object **env = calloc(want + 1, sizeof(*env));
	size_t got = 0;
	int64_t end = itest_now_ms() + 10000;

	assert_non_null(env);
	while (got < want && itest_now_ms() < end) {
		struct ecw_queue_msg *q = NULL;
		size_t n = 0;
		ECW_ASSERT_OK(ecw_queue_receive(&q, &n, m->c, m->fx.poison, 32, 60));
		for (size_t i = 0; i < n && got < want; i++) {
			env[got] = json_tokener_parse(q[i].text);
			ITEST_CHECK(env[got] != NULL, "poison message is not JSON: %.300s", q[i].text);
			got++;
		}
		ecw_queue_msgs_free(q, n);
		if (got < want)
			itest_sleep_ms(100);
	}
	ITEST_CHECK(got == want, "%zu poison envelope(s), expected %zu", got, want);
	return env;
}

static void envelopes_free(struct json_object **env)
{
	for (size_t i = 0; env && env[i]; i++)
		json_object_put(env[i]);
	free(env);
}

static const char *env_str(struct json_object *e, const char *key)
{
	struct json_object *o;
	if (!json_object_object_get_ex(e, key, &o) || !json_object_is_type(o, json_type_string))
		return "";
	return json_object_get_string(o);
}

/* ---- 1. the happy path ------------------------------------------------------------------- */

static void test_job_move__archive_happy_path(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e = mv_employee("Sales", "o'brien 001", 1),
	                  *other = mv_employee("Sales", "o'brien 002", 1);
	char jobs[512], id[64];
	struct proc p;

	mv_write_entity(m, m->emp, e);
	mv_write_entity(m, m->emp, other);
	mv_put_job(m, "archive-employee", "Sales", "o'brien 001", "t-1", false, id);
	mv_start_worker(&p, m, "move-happy", mv_std_jobs(jobs, sizeof(jobs), m), &o);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
	mv_expect_success(&p, id, "");

	mv_assert_only_in(m, m->arch, m->emp, e, "archived");
	/* Only that one moved. */
	mv_assert_only_in(m, m->emp, m->arch, other, "neighbour");
	assert_int_equal(mv_table_rows(m, m->arch), 1);
	assert_int_equal(mv_table_rows(m, m->emp), 1);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p);
	ecw_entity_free(e);
	ecw_entity_free(other);
}

/* Run twice: the second finds no source and succeeds without writing. The
 * target's keys are the source's, so one read tells it was moved already:
 * logged "already-moved" ("missing" is for an entity that was never
 * anywhere). The archived copy is untouched (same ETag). */
static void test_job_move__run_twice(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e = mv_employee("Sales", "Zo\xc3\xab 7", 3), *copy;
	char jobs[512], id1[64], id2[64], *etag;
	struct proc p;

	mv_write_entity(m, m->emp, e);
	mv_start_worker(&p, m, "move-twice", mv_std_jobs(jobs, sizeof(jobs), m), &o);
	mv_put_job(m, "archive-employee", "Sales", "Zo\xc3\xab 7", NULL, false, id1);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	mv_expect_success(&p, id1, "");
	copy = mv_get_or_null(m, m->arch, "Sales", "Zo\xc3\xab 7");
	assert_non_null(copy);
	etag = strdup(ecw_entity_etag(copy));
	ecw_entity_free(copy);

	/* The same message again (base64 this time: the same job). */
	mv_put_job(m, "archive-employee", "Sales", "Zo\xc3\xab 7", NULL, true, id2);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	mv_expect_success(&p, id2, "already-moved");

	mv_assert_only_in(m, m->arch, m->emp, e, "after the second run");
	copy = mv_get_or_null(m, m->arch, "Sales", "Zo\xc3\xab 7");
	ITEST_CHECK(strcmp(ecw_entity_etag(copy), etag) == 0,
	            "the second run rewrote the copy (ETag %s, was %s)", ecw_entity_etag(copy), etag);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p);
	free(etag);
	ecw_entity_free(copy);
	ecw_entity_free(e);
}

/* In neither table: success, detail "missing", nothing created anywhere. */
static void test_job_move__missing_in_both(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	char jobs[512], id[64];
	struct proc p;

	mv_start_worker(&p, m, "move-missing", mv_std_jobs(jobs, sizeof(jobs), m), &o);
	mv_put_job(m, "archive-employee", "Nowhere", "ghost 404", "t-ghost", false, id);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
	mv_expect_success(&p, id, "missing");
	assert_int_equal(mv_table_rows(m, m->emp), 0);
	assert_int_equal(mv_table_rows(m, m->arch), 0);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p);
}

/* Archive, then restore: back in Employees exactly as it was. */
static void test_job_move__archive_then_restore(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e = mv_employee("Sales", "a+b&c=d%", 2);
	char jobs[512], id1[64], id2[64];
	struct proc p;

	mv_write_entity(m, m->emp, e);
	mv_start_worker(&p, m, "move-restore", mv_std_jobs(jobs, sizeof(jobs), m), &o);
	mv_put_job(m, "archive-employee", "Sales", "a+b&c=d%", NULL, false, id1);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	mv_expect_success(&p, id1, "");
	mv_assert_only_in(m, m->arch, m->emp, e, "archived");

	mv_put_job(m, "restore-employee", "Sales", "a+b&c=d%", NULL, false, id2);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	mv_expect_success(&p, id2, "");
	mv_assert_only_in(m, m->emp, m->arch, e, "restored");
	assert_int_equal(mv_table_rows(m, m->arch), 0);
	mv_finish(&p);
	ecw_entity_free(e);
}

/* ---- 2. re-keying ------------------------------------------------------------------------ */

/* A clone of e under other keys: what a re-keyed copy must be. */
static struct ecw_entity *rekeyed(const struct ecw_entity *e, const char *pk, const char *rk)
{
	struct ecw_entity *c = NULL;
	ECW_ASSERT_OK(ecw_entity_clone(&c, e));
	ECW_ASSERT_OK(ecw_entity_set_keys(c, pk, rk));
	return c;
}

static void test_job_move__rekey_by_template(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	char jobs[1024], id[5][64];
	struct proc p;
	struct ecw_entity *a = mv_employee("Sales", "o'brien 001", 1),
	                  *b = mv_employee("Sales", "Zo\xc3\xab 7", 2);
	struct ecw_entity *noyear = mv_employee("Sales", "no-year", 1),
	                  *slash = mv_employee("Sales", "slash", 1);

	ECW_ASSERT_OK(ecw_entity_set_string(a, "Dept", "Sales", 5));
	ECW_ASSERT_OK(ecw_entity_set_int64(b, "HireYear", 2021)); /* Int64 renders as digits too */
	assert_true(ecw_entity_remove(noyear, "HireYear"));
	/* A value the service forbids in a key: refused before any write. */
	ECW_ASSERT_OK(ecw_entity_set_string(slash, "HireYear", "20/19", 5));
	mv_write_entity(m, m->emp, a);
	mv_write_entity(m, m->emp, b);
	mv_write_entity(m, m->emp, noyear);
	mv_write_entity(m, m->emp, slash);
	snprintf(jobs, sizeof(jobs),
	         "  archive-by-year: {type: move, from: %s, to: %s, to_partition_key: \"{HireYear}\", "
	         "to_row_key: \"{RowKey}\"}\n"
	         "  restore-by-dept: {type: move, from: %s, to: %s, to_partition_key: \"{Dept}\"}\n",
	         m->emp, m->arch, m->arch, m->emp);
	mv_put_job(m, "archive-by-year", "Sales", "o'brien 001", NULL, false, id[0]);
	mv_put_job(m, "archive-by-year", "Sales", "Zo\xc3\xab 7", NULL, false, id[1]);
	mv_put_job(m, "archive-by-year", "Sales", "no-year", NULL, false, id[2]);
	mv_put_job(m, "archive-by-year", "Sales", "slash", NULL, false, id[3]);
	mv_start_worker(&p, m, "move-rekey", jobs, &o);
	for (int i = 0; i < 2; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded");
	for (int i = 2; i < 4; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "poisoned", "reason",
		                "permanent");

	struct ecw_entity *ra = rekeyed(a, "2019", "o'brien 001"), *rb = rekeyed(b, "2021", "Zo\xc3\xab 7");
	mv_assert_only_in(m, m->arch, m->emp, ra, "re-keyed by HireYear (Int32)");
	mv_assert_only_in(m, m->arch, m->emp, rb, "re-keyed by HireYear (Int64)");
	ITEST_CHECK(mv_get_or_null(m, m->emp, "Sales", "o'brien 001") == NULL, "the source stayed");
	/* The two it could not key stay where they are, untouched, and nothing
	 * half-made appears in the archive. */
	mv_assert_only_in(m, m->emp, m->arch, noyear, "no HireYear");
	mv_assert_only_in(m, m->emp, m->arch, slash, "HireYear with a slash");
	assert_int_equal(mv_table_rows(m, m->arch), 2);

	/* The errors name what is wrong: the property, and the key result. */
	struct proc_log log;
	struct json_object *l = mv_msg_line(&log, &p, id[2], "poisoned");
	ITEST_CHECK(strstr(proc_field(l, "error"), "HireYear") != NULL, "error '%s' does not name HireYear",
	            proc_field(l, "error"));
	proc_log_dispose(&log);
	l = mv_msg_line(&log, &p, id[3], "poisoned");
	ITEST_CHECK(strstr(proc_field(l, "error"), "to_partition_key") != NULL,
	            "error '%s' does not name to_partition_key", proc_field(l, "error"));
	proc_log_dispose(&log);
	struct json_object **env = poison_envelopes(m, 2);
	for (int i = 0; i < 2; i++) {
		ITEST_CHECK(strcmp(env_str(env[i], "reason"), "permanent") == 0, "reason %s",
		            env_str(env[i], "reason"));
		ITEST_CHECK(strcmp(env_str(env[i], "job"), "archive-by-year") == 0, "job %s",
		            env_str(env[i], "job"));
	}
	envelopes_free(env);

	/* And back, re-keyed by a property the other way. */
	mv_put_job(m, "restore-by-dept", "2019", "o'brien 001", NULL, false, id[4]);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[4], "outcome", "succeeded");
	mv_assert_only_in(m, m->emp, m->arch, a, "restored by Dept");
	assert_int_equal(mv_table_rows(m, m->arch), 1);
	mv_finish(&p);
	ecw_entity_free(a);
	ecw_entity_free(b);
	ecw_entity_free(ra);
	ecw_entity_free(rb);
	ecw_entity_free(noyear);
	ecw_entity_free(slash);
}

/* Archive re-keyed newest first: to_row_key "{HireDate:inverted_ticks}_{RowKey}"
 * puts the most recent hire first in the archive's key order, which is the
 * order a query returns, down to one tick (7 fractional digits); each key
 * gives its hire date back, and every entity arrives whole. */
static void test_job_move__rekey_newest_first(void **state)
{
	static const char *const hired[] = {
	    "2019-03-04T08:09:10.1234567Z", "2021-06-30T23:59:59.9999999Z", "1999-12-31T00:00:00.0000000Z",
	    "2021-06-30T23:59:59.9999998Z", "2020-10-11T12:34:56.0000001Z",
	};
	enum { N = sizeof(hired) / sizeof(hired[0]) };
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e[N];
	char jobs[512], id[N][64], rk[32];
	struct proc p;

	for (int i = 0; i < N; i++) {
		snprintf(rk, sizeof(rk), "emp %d", i);
		e[i] = mv_employee("Sales", rk, 1);
		ECW_ASSERT_OK(ecw_entity_set_datetime(e[i], "HireDate", hired[i]));
		mv_write_entity(m, m->emp, e[i]);
		mv_put_job(m, "archive-newest-first", "Sales", rk, NULL, false, id[i]);
	}
	snprintf(jobs, sizeof(jobs),
	         "  archive-newest-first: {type: move, from: %s, to: %s, "
	         "to_row_key: \"{HireDate:inverted_ticks}_{RowKey}\"}\n",
	         m->emp, m->arch);
	mv_start_worker(&p, m, "move-newest-first", jobs, &o);
	for (int i = 0; i < N; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded");

	size_t n = 0;
	struct ecw_entity **got = itest_query_all(&n, m->c, m->arch, "PartitionKey eq 'Sales'");
	assert_int_equal(n, N);
	/* Newest first: 2021 (.9999999, then .9999998), 2020, 2019, 1999. */
	static const int order[N] = {1, 3, 4, 0, 2};
	for (int k = 0; k < N; k++) {
		const char *key = ecw_entity_rk(got[k]);
		char iso[ECW_ISO_TICKS_SIZE], want_rk[64];
		ECW_ASSERT_OK(ecw_template_inverted_ticks_to_iso(iso, key));
		ITEST_CHECK(strcmp(iso, hired[order[k]]) == 0,
		            "archive row %d is %s (%s), expected hire date %s", k, key, iso, hired[order[k]]);
		snprintf(want_rk, sizeof(want_rk), "%.19s_emp %d", key, order[k]);
		ITEST_CHECK(strcmp(key, want_rk) == 0, "archive row %d key %s, expected %s", k, key, want_rk);
		struct ecw_entity *r = rekeyed(e[order[k]], "Sales", key);
		mv_assert_only_in(m, m->arch, m->emp, r, "archived newest first");
		ecw_entity_free(r);
	}
	itest_entities_free(got, n);
	assert_int_equal(mv_table_rows(m, m->emp), 0);
	mv_finish(&p);
	for (int i = 0; i < N; i++)
		ecw_entity_free(e[i]);
}

/* Re-keying inside one table (from == to): the usual case moves the entity to
 * its new keys; an entity whose keys already are what the templates render
 * (a message for an employee already re-keyed) must be left as it is and the
 * message succeed. A copy onto the source replaces it (new ETag), so deleting
 * the source "as read" can only fail with 412; starting over cannot help, and
 * deleting it without If-Match would delete the only copy. */
static void test_job_move__rekey_in_place(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	char jobs[512], id1[64], id2[64];
	struct proc p;
	struct proc_log log;
	struct json_object *l;
	struct ecw_entity *old = mv_employee("Old", "x 1", 1), *there = mv_employee("Sales", "x 2", 1);

	ECW_ASSERT_OK(ecw_entity_set_string(old, "Dept", "Sales", 5));
	ECW_ASSERT_OK(ecw_entity_set_string(there, "Dept", "Sales", 5));
	mv_write_entity(m, m->emp, old);
	mv_write_entity(m, m->emp, there);
	snprintf(jobs, sizeof(jobs),
	         "  by-dept: {type: move, from: %s, to: %s, to_partition_key: \"{Dept}\"}\n", m->emp, m->emp);
	mv_put_job(m, "by-dept", "Old", "x 1", NULL, false, id1);
	mv_put_job(m, "by-dept", "Sales", "x 2", NULL, false, id2);
	mv_start_worker(&p, m, "move-in-place", jobs, &o);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	struct ecw_entity *moved = rekeyed(old, "Sales", "x 1");
	struct ecw_entity *a = mv_get_or_null(m, m->emp, "Sales", "x 1"),
	                  *b = mv_get_or_null(m, m->emp, "Old", "x 1");
	mv_assert_same_entity(moved, a, "re-keyed in place");
	ITEST_CHECK(b == NULL, "the old keys are still there");
	ecw_entity_free(a);
	ecw_entity_free(moved);

	/* Already at its keys: the first delivery must settle it. What it
	 * did is read first and checked after cleaning up, so that this known
	 * failure (see the report) leaks nothing under the sanitizers. */
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", PROC_ANY);
	char outcome[32], error[512];
	proc_log_read(&log, p.log_path);
	l = proc_log_find(&log, 0, "message", "message_id", id2, NULL);
	snprintf(outcome, sizeof(outcome), "%s", proc_field(l, "outcome"));
	snprintf(error, sizeof(error), "%s", proc_field(l, "error"));
	proc_log_dispose(&log);
	a = mv_get_or_null(m, m->emp, "Sales", "x 2");
	bool same = a && ecw_entity_equal(a, there);
	ecw_entity_free(a);
	ecw_entity_free(old);
	ecw_entity_free(there);
	proc_stop(&p, 10000);
	ITEST_CHECK(same, "the entity already at its keys was deleted or changed");
	ITEST_CHECK(strcmp(outcome, "succeeded") == 0,
	            "a message for an entity already at its target keys: outcome '%s' (error '%s'), expected "
	            "succeeded at the first delivery",
	            outcome, error);
	proc_assert_logs_clean();
}

/* ---- 3. stale and reordered messages ------------------------------------------------------- */

/* The application archives, then restores; then a stale copy of the archive
 * message arrives (a redelivery of a message whose worker died after the
 * delete but before removing the message, say). A move is a command with no
 * version in it, so move.c moves the employee again: the restore is undone.
 * That is what is asserted here, as the implemented behaviour; the report
 * questions it (the issue wants jobs to converge on the current state). */
static void test_job_move__stale_archive_after_restore_moves_again(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e = mv_employee("Sales", "o'brien 001", 1);
	char jobs[512], id1[64], id2[64], id3[64];
	struct proc p;

	mv_write_entity(m, m->emp, e);
	mv_start_worker(&p, m, "move-stale", mv_std_jobs(jobs, sizeof(jobs), m), &o);
	mv_put_job(m, "archive-employee", "Sales", "o'brien 001", "archive-1", false, id1);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	mv_put_job(m, "restore-employee", "Sales", "o'brien 001", "restore-1", false, id2);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	mv_assert_only_in(m, m->emp, m->arch, e, "restored");

	mv_put_job(m, "archive-employee", "Sales", "o'brien 001", "archive-1", false, id3);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id3, "outcome", "succeeded");
	mv_expect_success(&p, id3, "");
	mv_assert_only_in(m, m->arch, m->emp, e, "the stale archive moved it again");
	mv_finish(&p);
	ecw_entity_free(e);
}

/* Reordered: the restore arrives before the archive it undoes. The restore
 * finds no source and the entity already in Employees ("already-moved"),
 * the archive then moves: the end state is
 * "archived", whatever order the application meant. Still never lost. */
static void test_job_move__reordered_restore_before_archive(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e = mv_employee("Sales", "late", 1);
	char jobs[512], id1[64], id2[64];
	struct proc p;

	mv_write_entity(m, m->emp, e);
	mv_start_worker(&p, m, "move-reorder", mv_std_jobs(jobs, sizeof(jobs), m), &o);
	mv_put_job(m, "restore-employee", "Sales", "late", NULL, false, id1);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	mv_expect_success(&p, id1, "already-moved");
	mv_assert_only_in(m, m->emp, m->arch, e, "restore before archive changes nothing");
	mv_put_job(m, "archive-employee", "Sales", "late", NULL, false, id2);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	mv_expect_success(&p, id2, "");
	mv_assert_only_in(m, m->arch, m->emp, e, "archived");
	mv_finish(&p);
	ecw_entity_free(e);
}

/* ---- 4. type fidelity under hostile keys ------------------------------------------------------ */

static struct ecw_entity *every_type(const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	static const char multi[] =
	    "Zo\xc3\xab \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 'q' \"d\" <&>";
	static const unsigned char bytes[] = {0x00, 0x00, 0x01, 0x00, 0xff, 0x7f, 0x80, 0x00};

	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Str", multi, strlen(multi)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Empty", "", 0));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Digits", "00123", 5)); /* a String, never a number */
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "I32", -2147483647 - 1));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "I32max", 2147483647));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "Big", 9007199254740993LL));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "Min", INT64_MIN));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "Small", 5)); /* an Int64 that fits an Int32 */
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Whole", 50000.0));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Tenth", 0.1));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Tiny", 5e-324));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Huge", 1.7976931348623157e308));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "NaN", NAN));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "PosInf", INFINITY));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "NegInf", -INFINITY));
	ECW_ASSERT_OK(ecw_entity_set_bool(e, "True", true));
	ECW_ASSERT_OK(ecw_entity_set_bool(e, "False", false));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "When", "2026-08-19T10:00:00.1234567Z"));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "Epoch", "1601-01-01T00:00:00.0000001Z"));
	ECW_ASSERT_OK(ecw_entity_set_guid(e, "Id", "c9da6455-213d-42c9-9a79-3e9149a57833"));
	ECW_ASSERT_OK(ecw_entity_set_binary(e, "Bytes", bytes, sizeof(bytes)));
	return e;
}

static void test_job_move__every_type_and_hostile_keys_survive_archive_and_restore(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	static const char *const keys[][2] = {
	    {"o'brien 001", "a+b&c=d%"},
	    {"a+b&c=d%", "o'brien 001"},
	    {"Zo\xc3\xab", "Zo\xc3\xab \xe2\x9c\x93 \xf0\x9f\x98\x80"},
	    {" lead and  trail ", "  two  spaces  "},
	    {"''", "%2F %20 + = & ; : @ $ , ( ) * ! ~ [ ]"},
	};
	enum { NK = sizeof(keys) / sizeof(keys[0]) };
	struct ecw_entity *e[NK];
	char jobs[512], id[NK][64];
	struct proc p;

	for (int i = 0; i < NK; i++) {
		e[i] = every_type(keys[i][0], keys[i][1]);
		mv_write_entity(m, m->emp, e[i]);
		/* The service kept every type as written, or the rest proves nothing. */
		struct ecw_entity *back = mv_get_or_null(m, m->emp, keys[i][0], keys[i][1]);
		mv_assert_same_entity(e[i], back, "as written");
		ecw_entity_free(back);
		mv_put_job(m, "archive-employee", keys[i][0], keys[i][1], NULL, i % 2 == 1, id[i]);
	}
	mv_start_worker(&p, m, "move-types", mv_std_jobs(jobs, sizeof(jobs), m), &o);
	for (int i = 0; i < NK; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded");
	for (int i = 0; i < NK; i++)
		mv_assert_only_in(m, m->arch, m->emp, e[i], "archived");
	for (int i = 0; i < NK; i++)
		mv_put_job(m, "restore-employee", keys[i][0], keys[i][1], NULL, i % 2 == 0, id[i]);
	for (int i = 0; i < NK; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded");
	for (int i = 0; i < NK; i++) {
		mv_assert_only_in(m, m->emp, m->arch, e[i], "restored");
		ecw_entity_free(e[i]);
	}
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p);
}

/* ---- 5. chaining ------------------------------------------------------------------------------ */

/* The runs test-count recorded for rk (its rows have PartitionKey = the
 * message's rk). */
static size_t note_rows(struct mv *m, const char *rk)
{
	struct ecw_buf f;
	struct ecw_table_query *q = NULL;
	size_t n = 0;

	ecw_buf_init(&f, 0);
	ECW_ASSERT_OK(ecw_buf_adds(&f, "PartitionKey eq "));
	ECW_ASSERT_OK(ecw_escape_filter_string(&f, rk));
	struct ecw_query_options qo = {.filter = ecw_buf_cstr(&f)};
	ECW_ASSERT_OK(ecw_table_query_new(&q, m->c, m->note, &qo));
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		ecw_entity_free(e);
		n++;
	}
	ecw_table_query_free(q);
	ecw_buf_dispose(&f);
	return n;
}

/* After the archive succeeds, each follow-up job runs once for the same keys
 * and trace id; the original message is deleted once, not run again. A
 * follow-up runs after a "missing" success too: the keys still changed
 * meaning (e.g. drop a never-archived employee from the email index). */
static void test_job_move__then_enqueues_follow_ups(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e = mv_employee("Sales", "o'brien 001", 1);
	char jobs[1024], id[64], id2[64];
	struct proc p;
	struct proc_log log;

	mv_write_entity(m, m->emp, e);
	snprintf(jobs, sizeof(jobs),
	         "  archive-employee: {type: move, from: %s, to: %s, then: [note, note-again]}\n"
	         "  note: {type: test-count, table: %s}\n"
	         "  note-again: {type: test-count, table: %s}\n",
	         m->emp, m->arch, m->note, m->note);
	mv_put_job(m, "archive-employee", "Sales", "o'brien 001", "trace-42", false, id);
	mv_put_job(m, "archive-employee", "Sales", "never there", "trace-43", true, id2);
	mv_start_worker(&p, m, "move-then", jobs, &o);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 2, 15000, "message", "job", "note", "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 2, 15000, "message", "job", "note-again", "outcome", "succeeded");
	/* Wait a little for anything extra (a second run would be a bug). */
	itest_sleep_ms(600);

	mv_assert_only_in(m, m->arch, m->emp, e, "archived");
	assert_int_equal(note_rows(m, "o'brien 001"), 2);
	assert_int_equal(note_rows(m, "never there"), 2);
	proc_log_read(&log, p.log_path);
	assert_int_equal(proc_log_count(&log, "message", "job", "archive-employee", NULL), 2);
	assert_int_equal(proc_log_count(&log, "message", "job", "note", NULL), 2);
	assert_int_equal(proc_log_count(&log, "message", "job", "note-again", NULL), 2);
	for (int k = 0; k < 2; k++) {
		struct json_object *l = proc_log_find(&log, 0, "message", "job", k ? "note-again" : "note",
		                                      "rk", "o'brien 001", NULL);
		ITEST_CHECK(l != NULL, "no follow-up line for o'brien 001");
		assert_string_equal(proc_field(l, "outcome"), "succeeded");
		assert_string_equal(proc_field(l, "pk"), "Sales");
		assert_string_equal(proc_field(l, "id"), "trace-42"); /* the trace follows the chain */
		assert_int_equal(proc_field_int(l, "dequeue_count", -1), 1);
	}
	struct json_object *l = proc_log_find(&log, 0, "message", "job", "note", "rk", "never there", NULL);
	ITEST_CHECK(l != NULL, "no follow-up after the missing success");
	assert_string_equal(proc_field(l, "id"), "trace-43");
	proc_log_dispose(&log);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p);
	ecw_entity_free(e);
}

/* A follow-up that fails for good is poisoned on its own; the move it
 * follows stays done (the original message was deleted, not retried). */
static void test_job_move__failed_follow_up_does_not_undo_the_move(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e = mv_employee("Sales", "o'brien 001", 1);
	char jobs[1024], id[64];
	struct proc p;

	mv_write_entity(m, m->emp, e);
	snprintf(jobs, sizeof(jobs),
	         "  archive-employee: {type: move, from: %s, to: %s, then: [boom]}\n"
	         "  boom: {type: test-fail}\n",
	         m->emp, m->arch);
	mv_put_job(m, "archive-employee", "Sales", "o'brien 001", "trace-boom", false, id);
	mv_start_worker(&p, m, "move-then-fail", jobs, &o);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "job", "boom", "outcome", "poisoned", "reason", "permanent");
	itest_sleep_ms(600);

	mv_assert_only_in(m, m->arch, m->emp, e, "archived despite the failed follow-up");
	assert_int_equal(proc_count(&p, "message", "job", "archive-employee", NULL), 1);
	struct json_object **env = poison_envelopes(m, 1);
	assert_string_equal(env_str(env[0], "job"), "boom");
	assert_string_equal(env_str(env[0], "pk"), "Sales");
	assert_string_equal(env_str(env[0], "rk"), "o'brien 001");
	assert_string_equal(env_str(env[0], "reason"), "permanent");
	envelopes_free(env);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	mv_finish(&p);
	ecw_entity_free(e);
}

/* ---- 6. interop: an application using the official Azure SDK ------------------------------------ */

/* The application writes employees and enqueues archive messages with the
 * SDK (plain JSON, and base64 as Azure Functions sends); ecworker archives
 * them; the application reads the archive back with the SDK and finds every
 * value with its type, and the source gone. */
static void test_job_move__interop_sdk_application(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	static const char *const keys[][2] = {{"o'brien 001", "a+b&c=d%"},
	                                      {"Zo\xc3\xab", "two  spaces ' \xe2\x9c\x93"}};
	char jobs[512], *msgid[2] = {NULL, NULL};
	struct proc p;

	if (access("tests/node_modules/@azure/data-tables", R_OK) != 0)
		fail_msg("the Azure SDK is not installed under tests/node_modules: run make deps");
	for (int i = 0; i < 2; i++) {
		char v[16];
		snprintf(v, sizeof(v), "%d", i + 3);
		assert_int_equal(proc_sdk(NULL, (const char *const[]){"upsert-employee", m->emp, keys[i][0],
		                                                      keys[i][1], v, NULL}),
		                 0);
		assert_int_equal(
		    proc_sdk(&msgid[i],
		             (const char *const[]){"enqueue", m->fx.t->queue, "archive-employee", keys[i][0],
		                                   keys[i][1], "sdk-trace", i ? "--base64" : NULL, NULL}),
		    0);
		msgid[i][strcspn(msgid[i], "\n")] = '\0';
	}
	mv_start_worker(&p, m, "move-interop", mv_std_jobs(jobs, sizeof(jobs), m), &o);
	for (int i = 0; i < 2; i++) {
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", msgid[i], "outcome", "succeeded");
		mv_expect_success(&p, msgid[i], "");
	}
	for (int i = 0; i < 2; i++) {
		char v[16];
		snprintf(v, sizeof(v), "%d", i + 3);
		ITEST_CHECK(proc_sdk(NULL, (const char *const[]){"check-employee", m->arch, keys[i][0],
		                                                 keys[i][1], v, NULL}) == 0,
		            "the SDK found the archived %s/%s different (see above)", keys[i][0], keys[i][1]);
		ITEST_CHECK(mv_get_or_null(m, m->emp, keys[i][0], keys[i][1]) == NULL,
		            "%s/%s is still in Employees", keys[i][0], keys[i][1]);
		/* The SDK reads an integral Double as Int32 (its own quirk): the
		 * exact type, checked through ecworker's client. */
		struct ecw_entity *a = mv_get_or_null(m, m->arch, keys[i][0], keys[i][1]);
		assert_non_null(a);
		const struct ecw_prop *s = ecw_entity_get(a, "Salary");
		ITEST_CHECK(s && s->type == ECW_EDM_DOUBLE && s->v.d == 50000.0,
		            "Salary lost its Double type");
		ecw_entity_free(a);
		free(msgid[i]);
	}
	mv_finish(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_move__archive_happy_path, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__run_twice, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__missing_in_both, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__archive_then_restore, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__rekey_by_template, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__rekey_newest_first, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__rekey_in_place, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__stale_archive_after_restore_moves_again, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__reordered_restore_before_archive, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_job_move__every_type_and_hostile_keys_survive_archive_and_restore, mv_setup,
	        mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__then_enqueues_follow_ups, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__failed_follow_up_does_not_undo_the_move, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__interop_sdk_application, mv_setup, mv_teardown),
	};
	/* ECW_TEST_FILTER=test_job_move__rekey* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("job_move", tests, NULL, NULL);
}
