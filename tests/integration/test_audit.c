/* SPDX-License-Identifier: MIT */
/* test_audit.c - `ecworker audit` as a process against Azurite: an index job
 * converges through a worker (messages), then its tables are changed behind
 * the worker's back, one change per kind of drift, and a move job's two tables
 * are given an entity in both; the audit reports each kind (exit 3, the counts
 * in --json), --repair fixes them (exit 0) and leaves the index equal to a full
 * recomputation from the source (indexfx.h), and a second audit reports
 * nothing (exit 0). Conflicts are reported and never repaired; keys are
 * escaped in the human report; --rate paces; --via-queue leaves the repairs to
 * the workers, through the jobs' messages; a repair racing a worker on the same
 * keys ends consistent; usage errors exit 2. The comparison rules and
 * the repairs case by case are tests/unit/test_audit.c. */
#include "auditfx.h"
#include "indexfx.h"
#include "itest.h"
#include "proc.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A source row key with a bidi override, which the human report must show
 * escaped (keys may not hold control characters, but may hold this). */
#define RLO_RK "rlo \xe2\x80\xae 009"

struct au {
	struct wfx x; /* first, for wfx_teardown */
	const char *from, *to;
	char config[640];
};

static int setup(void **state)
{
	struct au *a = wfx_new(sizeof(struct au), 0);

	a->from = ix_extra_table(&a->x);
	a->to = ix_extra_table(&a->x);
	*state = a;
	return 0;
}

/* The index job by-email (the fixture's source and index) and the move
 * archive (from -> to), as a worker and the audit read them. */
static void write_config(struct au *a, const char *name)
{
	struct wfx_worker w = WFX_WORKER(a->x.t->queue, a->x.poison);
	char jobs[2048], idx[1024];
	int k;

	ix_default_job(idx, sizeof(idx), &a->x, IX_JOB, NULL, NULL, "[FirstName, LastName]");
	k = snprintf(jobs, sizeof(jobs), "%s  archive: {type: move, from: %s, to: %s}\n", idx, a->from,
	             a->to);
	assert_true(k > 0 && (size_t)k < sizeof(jobs));
	w.log_level = "info";
	w.poll_min = "20ms";
	w.poll_max = "100ms";
	w.jobs = jobs;
	wfx_write_config(a->config, sizeof(a->config), name, &w);
}

/* Four employees indexed through messages, by a worker that is then stopped. */
static void converge(struct au *a)
{
	struct proc p;
	static const char *const rks[] = {"001", "002", "003", "004"};
	char email[64];

	ix_ensure_table(&a->x, a->x.t->table);
	ix_ensure_table(&a->x, a->from);
	ix_ensure_table(&a->x, a->to);
	itest_queue(a->x.t);
	for (size_t i = 0; i < 4; i++) {
		snprintf(email, sizeof(email), "e%s@example.com", rks[i]);
		ix_put_employee(&a->x, "Sales", rks[i], email);
		ix_enqueue(&a->x, "Sales", rks[i]);
	}
	write_config(a, "audit-worker");
	proc_start_worker(&p, "audit-worker", a->config);
	ix_wait_outcomes(&p, 1, 4, "succeeded", 30000);
	ix_finish(&p, 1); /* which also deletes the test's files: the config is written again */
	assert_int_equal(ix_check_recompute(&a->x, &IX_DEFAULT_SPEC), 4);
	write_config(a, "audit");
}

/* Runs `audit -c CONFIG a1 a2 a3` (up to the first NULL); returns the exit
 * code, stdout in *out. */
static int audit(struct au *a, char **out, const char *name, const char *a1, const char *a2, const char *a3)
{
	const char *args[] = {a1, a2, a3, NULL};

	return auditfx_run(out, a->config, name, args);
}

static void put_copy(struct au *a, const char *table, const char *rk, const char *first)
{
	ix_upsert(&a->x, table, ix_employee("Sales", rk, "x@example.com", first, "Lee"));
}

/* Each kind of drift the index and the move can have, found, repaired, and
 * gone on a second audit. */
static void test_audit__finds_repairs_and_converges(void **state)
{
	struct au *a = *state;
	char *out = NULL;
	char pk[640], rk[80];

	converge(a);
	/* missing: 001's entry deleted */
	ECW_ASSERT_OK(
	    ecw_table_delete(a->x.t->client, a->x.t->table2, "email_Sales", "e001@example.com", "*"));
	/* stale: 002's copied FirstName changed */
	struct ecw_entity *e = ix_get(&a->x, a->x.t->table2, "email_Sales", "e002@example.com");
	ITEST_CHECK(e != NULL, "no entry for 002");
	ix_set_str(e, "FirstName", "Changed");
	ix_upsert(&a->x, a->x.t->table2, e);
	/* orphan: 003 deleted behind the worker's back */
	ECW_ASSERT_OK(ecw_table_delete(a->x.t->client, a->x.t->table, "Sales", "003", "*"));
	/* missing, with a key to escape: a source never indexed */
	ix_put_employee(&a->x, "Sales", RLO_RK, "rlo@example.com");
	/* move: an entity in both tables, identical (an unfinished move) */
	put_copy(a, a->from, "m01", "Mo");
	put_copy(a, a->to, "m01", "Mo");
	put_copy(a, a->from, "m02", "Only in from");

	assert_int_equal(audit(a, &out, "audit-json", "--json", NULL, NULL), 3);
	auditfx_counts_are(out, IX_JOB, 2, 1, 1, 0, 0);
	auditfx_counts_are(out, "archive", 0, 1, 0, 0, 0);
	{
		/* Its cost: a GET or more per entity compared, and the query pages. */
		struct json_object *o = auditfx_job_line(out, IX_JOB);
		ITEST_CHECK(auditfx_field(o, "requests") > auditfx_field(o, "checked"),
		            "requests not counted: %s", json_object_to_json_string(o));
		json_object_put(o);
	}
	free(out);

	/* The human report: the table, and the keys escaped. */
	assert_int_equal(audit(a, &out, "audit-human", NULL, NULL, NULL), 3);
	ITEST_CHECK(strstr(out, "checked") && strstr(out, "conflict") && strstr(out, "repaired"),
	            "no header:\n%s", out);
	ITEST_CHECK(strstr(out, "rlo \\u202e 009") != NULL, "key not escaped:\n%s", out);
	ITEST_CHECK(strstr(out, "\xe2\x80\xae") == NULL, "a raw bidi override reached the terminal:\n%s",
	            out);
	free(out);

	assert_int_equal(audit(a, &out, "audit-repair", "--repair", "--json", NULL), 0);
	auditfx_counts_are(out, IX_JOB, 2, 1, 1, 0, 4);
	auditfx_counts_are(out, "archive", 0, 1, 0, 0, 1);
	free(out);

	/* The index is what a recomputation from the source gives, entries and
	 * back-references; the move was completed in its direction. */
	assert_int_equal(ix_check_recompute(&a->x, &IX_DEFAULT_SPEC), 4);
	ix_ref_keys(pk, sizeof(pk), rk, sizeof(rk), IX_JOB, "Sales", "003");
	ITEST_CHECK(ix_get(&a->x, a->x.t->table2, pk, rk) == NULL, "003's back-reference left behind");
	ITEST_CHECK(ix_get(&a->x, a->from, "Sales", "m01") == NULL, "the unfinished move was not completed");
	e = ix_get(&a->x, a->to, "Sales", "m01");
	ITEST_CHECK(e != NULL, "the moved entity is gone");
	ecw_entity_free(e);
	e = ix_get(&a->x, a->from, "Sales", "m02");
	ITEST_CHECK(e != NULL, "an entity waiting for its move was touched");
	ecw_entity_free(e);

	assert_int_equal(audit(a, &out, "audit-again", "--json", NULL, NULL), 0);
	auditfx_counts_are(out, IX_JOB, 0, 0, 0, 0, 0);
	auditfx_counts_are(out, "archive", 0, 0, 0, 0, 0);
	free(out);
	proc_assert_logs_clean();
}

/* Conflicts: two sources claiming one key, a move's two differing copies.
 * Reported, never repaired: --repair still exits 3 and changes neither. */
static void test_audit__conflicts_are_never_repaired(void **state)
{
	struct au *a = *state;
	char *out = NULL;

	converge(a);
	ix_put_employee(&a->x, "Sales", "005", "e004@example.com");
	put_copy(a, a->from, "m01", "Mo");
	put_copy(a, a->to, "m01", "Moe");

	assert_int_equal(audit(a, &out, "audit-conflict", "--repair", "--json", NULL), 3);
	auditfx_counts_are(out, IX_JOB, 0, 0, 0, 1, 0);
	auditfx_counts_are(out, "archive", 0, 0, 0, 1, 0);
	free(out);
	struct ecw_entity *e = ix_get(&a->x, a->x.t->table2, "email_Sales", "e004@example.com");
	ITEST_CHECK(e != NULL && strcmp(ix_strp(e, "SourceRowKey"), "004") == 0, "the entry changed hands");
	ecw_entity_free(e);
	e = ix_get(&a->x, a->from, "Sales", "m01");
	ITEST_CHECK(e != NULL, "a differing copy was deleted");
	ecw_entity_free(e);
	/* --partition: only Ops, where nothing is wrong. */
	assert_int_equal(audit(a, &out, "audit-partition", "--json", "--partition", "Ops"), 0);
	auditfx_counts_are(out, IX_JOB, 0, 0, 0, 0, 0);
	free(out);
	/* One job named: only its line. */
	assert_int_equal(audit(a, &out, "audit-one", "--json", "archive", NULL), 3);
	ITEST_CHECK(strstr(out, IX_JOB) == NULL, "a job not named was audited:\n%s", out);
	free(out);
	proc_assert_logs_clean();
}

/* --rate caps the storage requests: this audit makes about a dozen (two
 * query pages and four GETs per pass of the index, a page of the move's
 * table), which at 4 a second cannot take less than about two seconds (one
 * second's worth may go at once); unpaced it takes a few milliseconds. A lower
 * bound only: a slow machine cannot fail it. */
static void test_audit__rate_paces(void **state)
{
	struct au *a = *state;
	char *out = NULL;
	int64_t t0;

	converge(a);
	t0 = itest_now_ms();
	assert_int_equal(audit(a, &out, "audit-rate-paced", "--json", "--rate", "4"), 0);
	ITEST_CHECK(itest_now_ms() - t0 >= 1500, "11+ requests at 4/s took %lld ms",
	            (long long)(itest_now_ms() - t0));
	auditfx_counts_are(out, IX_JOB, 0, 0, 0, 0, 0);
	free(out);
	proc_assert_logs_clean();
}

/* --repair --via-queue: each repair is the job's message for its source,
 * put on the worker's queue rather than run by the audit. Nothing is repaired
 * until a worker runs them; then the state equals a recomputation and a
 * second audit finds nothing. */
static void test_audit__via_queue_repairs_through_the_workers(void **state)
{
	struct au *a = *state;
	struct proc p;
	char *out = NULL;
	struct json_object *o, *v;

	converge(a);
	ECW_ASSERT_OK(
	    ecw_table_delete(a->x.t->client, a->x.t->table2, "email_Sales", "e001@example.com", "*"));
	ECW_ASSERT_OK(ecw_table_delete(a->x.t->client, a->x.t->table, "Sales", "003", "*"));
	put_copy(a, a->from, "m01", "Mo");
	put_copy(a, a->to, "m01", "Mo");

	assert_int_equal(audit(a, &out, "audit-via-queue", "--repair", "--via-queue", "--json"), 0);
	auditfx_counts_are(out, IX_JOB, 1, 0, 1, 0, 2);
	auditfx_counts_are(out, "archive", 0, 1, 0, 0, 1);
	o = auditfx_job_line(out, IX_JOB);
	ITEST_CHECK(json_object_object_get_ex(o, "via_queue", &v) && json_object_get_boolean(v),
	            "no via_queue in %s", json_object_to_json_string(o));
	json_object_put(o);
	free(out);
	/* Enqueued, not run: the entry is still missing, the move unfinished. */
	ITEST_CHECK(ix_get(&a->x, a->x.t->table2, "email_Sales", "e001@example.com") == NULL,
	            "the audit repaired by itself");
	struct ecw_entity *e = ix_get(&a->x, a->from, "Sales", "m01");
	ITEST_CHECK(e != NULL, "the audit completed the move by itself");
	ecw_entity_free(e);

	proc_start_worker(&p, "audit-via-queue-worker", a->config);
	ix_wait_outcomes(&p, 1, 3, "succeeded", 30000);
	ix_finish(&p, 1);
	assert_int_equal(ix_check_recompute(&a->x, &IX_DEFAULT_SPEC), 3);
	ITEST_CHECK(ix_get(&a->x, a->from, "Sales", "m01") == NULL, "the queued move did not complete");
	write_config(a, "audit-via-queue-again");
	assert_int_equal(audit(a, &out, "audit-via-queue-again", "--json", NULL, NULL), 0);
	auditfx_counts_are(out, IX_JOB, 0, 0, 0, 0, 0);
	auditfx_counts_are(out, "archive", 0, 0, 0, 0, 0);
	free(out);
	proc_assert_logs_clean();
}

/* A repair racing a worker on the same keys: 30 sources never indexed get
 * their messages while `audit --repair` repairs them too, then a third of
 * them change value (messages put) while a second repairing audit runs.
 * Whatever the interleaving, once the worker is done the index is exactly
 * what the sources give, and an audit finds nothing: a repair is one more
 * duplicate message. */
static void test_audit__repair_racing_a_worker_ends_consistent(void **state)
{
	struct au *a = *state;
	struct proc p;
	char *out = NULL, rk[16], email[64];
	int code;

	converge(a);
	for (int i = 0; i < 30; i++) {
		snprintf(rk, sizeof(rk), "r%02d", i);
		snprintf(email, sizeof(email), "r%02d@example.com", i);
		ix_put_employee(&a->x, "Ops", rk, email);
	}
	proc_start_worker(&p, "audit-race-worker", a->config);
	for (int i = 0; i < 30; i++) {
		snprintf(rk, sizeof(rk), "r%02d", i);
		ix_enqueue(&a->x, "Ops", rk);
	}
	code = audit(a, &out, "audit-race-1", "--repair", "--json", IX_JOB);
	ITEST_CHECK(code == 0 || code == 3, "racing audit exited %d", code);
	free(out);
	for (int i = 0; i < 30; i += 3) {
		snprintf(rk, sizeof(rk), "r%02d", i);
		snprintf(email, sizeof(email), "r%02d-new@example.com", i);
		ix_put_employee(&a->x, "Ops", rk, email);
		ix_enqueue(&a->x, "Ops", rk);
	}
	code = audit(a, &out, "audit-race-2", "--repair", "--json", IX_JOB);
	ITEST_CHECK(code == 0 || code == 3, "racing audit exited %d", code);
	free(out);
	ix_wait_outcomes(&p, 1, 40, "succeeded", 60000);
	ix_finish(&p, 1);
	assert_int_equal(ix_check_recompute(&a->x, &IX_DEFAULT_SPEC), 34);
	write_config(a, "audit-race-after");
	assert_int_equal(audit(a, &out, "audit-race-after", "--json", IX_JOB, NULL), 0);
	auditfx_counts_are(out, IX_JOB, 0, 0, 0, 0, 0);
	free(out);
	proc_assert_logs_clean();
}

static void test_audit__usage_errors_exit_2(void **state)
{
	struct au *a = *state;
	char *out = NULL;

	write_config(a, "audit-usage");
	assert_int_equal(audit(a, &out, "audit-nojob", "no-such-job", NULL, NULL), 2);
	free(out);
	assert_int_equal(audit(a, &out, "audit-rate", "--rate", "0", NULL), 2);
	free(out);
	assert_int_equal(audit(a, &out, "audit-rate2", "--rate", "x", NULL), 2);
	free(out);
	assert_int_equal(audit(a, &out, "audit-part", "--partition", "a/b", NULL), 2);
	free(out);
	assert_int_equal(audit(a, &out, "audit-opt", "--bogus", NULL, NULL), 2);
	free(out);
	assert_int_equal(audit(a, &out, "audit-vq", "--via-queue", NULL, NULL), 2);
	free(out);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_audit__finds_repairs_and_converges, setup, wfx_teardown),
	    cmocka_unit_test_setup_teardown(test_audit__conflicts_are_never_repaired, setup, wfx_teardown),
	    cmocka_unit_test_setup_teardown(test_audit__rate_paces, setup, wfx_teardown),
	    cmocka_unit_test_setup_teardown(test_audit__via_queue_repairs_through_the_workers, setup,
	                                    wfx_teardown),
	    cmocka_unit_test_setup_teardown(test_audit__repair_racing_a_worker_ends_consistent, setup,
	                                    wfx_teardown),
	    cmocka_unit_test_setup_teardown(test_audit__usage_errors_exit_2, setup, wfx_teardown),
	};
	return cmocka_run_group_tests_name("audit", tests, NULL, NULL);
}
