/* SPDX-License-Identifier: MIT */
/* test_job_index_list.c - the index-list job (jobs/index_list.c) as a process: build/ecworker-test runs
 * against the real Azurite with a config written per test (its own queue, source table Employees =
 * t->table and list table = t->table2; indexlistfx.h), and each test judges it by what it leaves in
 * storage, above all by comparing the list table with a full recomputation from the source (every list
 * exactly the sorted keys of the employees with that LastName, no stale list, one reference per employee
 * naming its list). Cases: happy path, every message twice, a value change, a stale message after a newer
 * change, a deleted source, reordered messages, the size limit, values that make no key, a missing table,
 * and configuration errors. A crash after every step, races staged between two workers and competing
 * workers are in test_job_index_list_races.c; poisoned messages handing their intents over (abandon) in
 * test_job_index_list_poison.c. */
#include "index_list_private.h"
#include "indexlistfx.h"
#include "itest.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- 1. happy path ------------------------------------------------------------------------ */

/* Keys from every corner: quotes, '&', '%', '+', non-ASCII, a double quote. */
static const char *const EMP[5][3] = {
    {"Sales", "o'brien 001", "Jones"}, {"Sales", "Zo\xc3\xab 002", "Jones"},
    {"R&D", "a+b&c=d% 003", "Jones"},  {"Sales", "say \"hi\" 004", "Smith"},
    {"Ops", "005", "Smith"},
};

#define JONES3 "[[\"R&D\",\"a+b&c=d% 003\"],[\"Sales\",\"Zo\xc3\xab 002\"],[\"Sales\",\"o'brien 001\"]]"
#define SMITH2 "[[\"Ops\",\"005\"],[\"Sales\",\"say \\\"hi\\\" 004\"]]"

static void seed_five(struct wfx *x, const char *name)
{
	for (int i = 0; i < 5; i++)
		il_change(x, EMP[i][0], EMP[i][1], EMP[i][2]);
	il_run_worker(x, name, 5, 4);
}

static void test_job_index_list__happy_path(void **state)
{
	struct wfx *x = *state;
	struct proc_log log;

	seed_five(x, "il-happy");
	il_expect_list(x, "Jones", JONES3);
	il_expect_list(x, "Smith", SMITH2);
	assert_int_equal(il_check_index(x), 2);

	/* The ref of one employee, field by field. */
	struct ecw_entity *ref = il_get_ref(x, "Sales", "o'brien 001");
	ITEST_CHECK(ref != NULL, "no ref for (Sales, o'brien 001)");
	assert_string_equal(il_str_prop(ref, "ListPartitionKey"), IL_LIST_PK);
	assert_string_equal(il_str_prop(ref, "ListRowKey"), "Jones");
	assert_string_equal(il_str_prop(ref, "SourceRowKey"), "o'brien 001");
	ecw_entity_free(ref);

	/* The source is untouched and the log says what happened. */
	struct ecw_entity *e = il_get_or_null(x, x->t->table, "Sales", "o'brien 001");
	assert_non_null(e);
	assert_string_equal(il_str_prop(e, "LastName"), "Jones");
	assert_int_equal(ecw_entity_count(e), 3);
	ecw_entity_free(e);
	char path[640];
	proc_path(path, sizeof(path), "il-happy.log");
	proc_log_read(&log, path);
	assert_int_equal(proc_log_count(&log, "message", "outcome", "succeeded", "job", IL_JOB, NULL), 5);
	struct json_object *line = proc_log_find(&log, 0, "message", NULL);
	ITEST_CHECK(strncmp(proc_field(line, "detail"), "added rounds=1", 14) == 0, "detail: %s",
	            proc_field(line, "detail"));
	proc_log_dispose(&log);
	proc_assert_logs_clean();
}

/* ---- 2. every message twice -------------------------------------------------------------- */

static void test_job_index_list__run_twice(void **state)
{
	struct wfx *x = *state;
	char *etags[2], *ref_etags[5];
	char path[640];
	struct proc_log log;

	seed_five(x, "il-twice-1");
	free(il_list_keys(x, "Jones", &etags[0]));
	free(il_list_keys(x, "Smith", &etags[1]));
	for (int i = 0; i < 5; i++) {
		struct ecw_entity *r = il_get_ref(x, EMP[i][0], EMP[i][1]);
		assert_non_null(r);
		ref_etags[i] = strdup(ecw_entity_etag(r));
		ecw_entity_free(r);
	}
	/* Every message again, twice. */
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 5; i++)
			il_msg_put(x, NULL, EMP[i][0], EMP[i][1]);
	il_run_worker(x, "il-twice-2", 10, 4);

	il_expect_list(x, "Jones", JONES3);
	il_expect_list(x, "Smith", SMITH2);
	assert_int_equal(il_check_index(x), 2);
	/* A rerun with nothing to do writes nothing at all. */
	char *now[2];
	free(il_list_keys(x, "Jones", &now[0]));
	free(il_list_keys(x, "Smith", &now[1]));
	for (int i = 0; i < 2; i++) {
		assert_string_equal(now[i], etags[i]);
		free(now[i]);
		free(etags[i]);
	}
	for (int i = 0; i < 5; i++) {
		struct ecw_entity *r = il_get_ref(x, EMP[i][0], EMP[i][1]);
		assert_non_null(r);
		assert_string_equal(ecw_entity_etag(r), ref_etags[i]);
		ecw_entity_free(r);
		free(ref_etags[i]);
	}
	proc_path(path, sizeof(path), "il-twice-2.log");
	proc_log_read(&log, path);
	ITEST_CHECK(proc_log_count(&log, "message", "detail", "unchanged rounds=1 conflicts=0", NULL) == 10,
	            "every rerun should be \"unchanged\":\n%s", proc_tail(path, 12));
	proc_log_dispose(&log);
	proc_assert_logs_clean();
}

/* ---- 3. a value changes: the employee moves between lists --------------------------------- */

static void test_job_index_list__value_changed(void **state)
{
	struct wfx *x = *state;

	seed_five(x, "il-change-1");
	il_change(x, "Sales", "o'brien 001", "Smith");
	il_change(x, "Ops", "005", "Brown"); /* to a list that does not exist yet */
	il_run_worker(x, "il-change-2", 2, 1);
	il_expect_list(x, "Jones", "[[\"R&D\",\"a+b&c=d% 003\"],[\"Sales\",\"Zo\xc3\xab 002\"]]");
	il_expect_list(x, "Smith", "[[\"Sales\",\"o'brien 001\"],[\"Sales\",\"say \\\"hi\\\" 004\"]]");
	il_expect_list(x, "Brown", "[[\"Ops\",\"005\"]]");
	assert_int_equal(il_check_index(x), 3);
	struct ecw_entity *ref = il_get_ref(x, "Sales", "o'brien 001");
	assert_non_null(ref);
	assert_string_equal(il_str_prop(ref, "ListRowKey"), "Smith");
	ecw_entity_free(ref);

	/* A change that keeps the LastName moves nothing. */
	struct ecw_entity *e = il_get_or_null(x, x->t->table, "Ops", "005");
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Age", 43));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table, e, ECW_WRITE_UPDATE, "*"));
	ecw_entity_free(e);
	il_msg_put(x, NULL, "Ops", "005");
	il_run_worker(x, "il-change-3", 1, 1);
	il_expect_list(x, "Brown", "[[\"Ops\",\"005\"]]");
	assert_int_equal(il_check_index(x), 3);
	proc_assert_logs_clean();
}

/* ---- 4. a stale message after a newer change ---------------------------------------------- */

static void test_job_index_list__stale_message_after_newer_change(void **state)
{
	struct wfx *x = *state;
	char *etag_before, *etag_after;

	il_change(x, "Sales", "e1", "Jones");
	il_change(x, "Sales", "e2", "Jones");
	il_run_worker(x, "il-stale-1", 2, 1);
	il_expect_list(x, "Jones", "[[\"Sales\",\"e1\"],[\"Sales\",\"e2\"]]");

	/* Jones -> Smith, processed; then the message of the Jones write
	 * arrives late (a duplicate of the first), and once more. */
	il_change(x, "Sales", "e1", "Smith");
	il_run_worker(x, "il-stale-2", 1, 1);
	free(il_list_keys(x, "Smith", &etag_before));
	il_msg_put(x, NULL, "Sales", "e1");
	il_msg_put(x, NULL, "Sales", "e1");
	il_run_worker(x, "il-stale-3", 2, 1);
	il_expect_list(x, "Jones", "[[\"Sales\",\"e2\"]]");
	il_expect_list(x, "Smith", "[[\"Sales\",\"e1\"]]");
	free(il_list_keys(x, "Smith", &etag_after));
	assert_string_equal(etag_before, etag_after);
	free(etag_before);
	free(etag_after);

	/* Both messages of two quick changes arrive after the second change:
	 * the first runs with the newer value. */
	il_emp_set(x, "Sales", "e2", "Brown");
	il_msg_put(x, NULL, "Sales", "e2");
	il_emp_set(x, "Sales", "e2", "Green");
	il_msg_put(x, NULL, "Sales", "e2");
	il_run_worker(x, "il-stale-4", 2, 1);
	il_expect_list(x, "Jones", NULL);
	il_expect_list(x, "Brown", NULL);
	il_expect_list(x, "Green", "[[\"Sales\",\"e2\"]]");
	assert_int_equal(il_check_index(x), 2);
	proc_assert_logs_clean();
}

/* ---- 5. the source is deleted ------------------------------------------------------------ */

static void test_job_index_list__source_deleted(void **state)
{
	struct wfx *x = *state;

	seed_five(x, "il-del-1");
	/* The last Smith goes with its list; a Jones goes from its list. */
	il_change(x, "Ops", "005", NULL);
	il_change(x, "Sales", "say \"hi\" 004", NULL);
	il_change(x, "Sales", "o'brien 001", NULL);
	/* Never existed: nothing to do. */
	il_msg_put(x, NULL, "Nobody", "000");
	il_run_worker(x, "il-del-2", 4, 2);
	il_expect_list(x, "Smith", NULL);
	il_expect_list(x, "Jones", "[[\"R&D\",\"a+b&c=d% 003\"],[\"Sales\",\"Zo\xc3\xab 002\"]]");
	struct ecw_entity *ref = il_get_ref(x, "Ops", "005");
	ITEST_CHECK(ref == NULL, "the ref of a deleted employee is still there");
	ref = il_get_ref(x, "Nobody", "000");
	ITEST_CHECK(ref == NULL, "a ref was made for an employee that never existed");
	assert_int_equal(il_check_index(x), 1);

	/* The delete's message again, and the rest gone too: an empty table. */
	il_msg_put(x, NULL, "Ops", "005");
	il_change(x, "R&D", "a+b&c=d% 003", NULL);
	il_change(x, "Sales", "Zo\xc3\xab 002", NULL);
	il_run_worker(x, "il-del-3", 3, 2);
	assert_int_equal(il_check_index(x), 0);
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_table_query_new(&q, x->t->client, x->t->table2, NULL));
	ECW_ASSERT_OK(ecw_table_query_next(&e, q));
	ITEST_CHECK(e == NULL, "the list table should be empty, holds %s/%s", ecw_entity_pk(e),
	            ecw_entity_rk(e));
	ecw_table_query_free(q);
	proc_assert_logs_clean();
}

/* ---- 6. messages out of order ------------------------------------------------------------ */

static void test_job_index_list__reordered(void **state)
{
	struct wfx *x = *state;
	static const char *const names[] = {"Jones", "Smith", "Brown", NULL};
	struct {
		char rk[16];
		const char *last;
	} hist[40];
	int n = 0;

	/* A history of changes to 8 employees (moves, deletes, re-creations)
	 * applied in order; the messages go out afterwards, last first. */
	for (int step = 0; step < 40; step++) {
		int who = (step * 5 + step / 8) % 8;
		const char *last = names[(step * 7 + who) % 4];
		snprintf(hist[n].rk, sizeof(hist[n].rk), "emp-%02d", who);
		hist[n].last = last;
		il_emp_set(x, "Staff", hist[n].rk, last);
		n++;
	}
	for (int i = n - 1; i >= 0; i--)
		il_msg_put(x, NULL, "Staff", hist[i].rk);
	il_run_worker(x, "il-reorder-1", (size_t)n, 1);
	il_check_index(x);

	/* Interleaved: half the messages run before the changes they follow
	 * are all made, the rest in a shuffled order. */
	for (int i = 0; i < 8; i++) {
		char rk[16];
		snprintf(rk, sizeof(rk), "emp-%02d", i);
		il_emp_set(x, "Staff", rk, names[(i + 1) % 3]);
		if (i % 2)
			il_msg_put(x, NULL, "Staff", rk);
	}
	il_run_worker(x, "il-reorder-2", 4, 4);
	for (int i = 0; i < 8; i++) {
		char rk[16];
		snprintf(rk, sizeof(rk), "emp-%02d", (i * 3) % 8);
		il_msg_put(x, NULL, "Staff", rk);
	}
	il_run_worker(x, "il-reorder-3", 8, 4);
	il_check_index(x);
	proc_assert_logs_clean();
}

/* ---- 7. a list over the size limit ------------------------------------------------------------ */

/* A copy of t (keys in order: appended). */
static int tuples_copy_for_test(struct tuples *out, const struct tuples *t)
{
	ecw_index_list_tuples_init(out, 2);
	for (size_t i = 0; i < t->n; i++)
		ECW_ASSERT_OK(ecw_index_list_tuples_add(out, (const char *const *)t->v[i].s));
	return 0;
}

/* Adds key (pk, rk) to t. */
static void key_add(struct tuples *t, const char *pk, const char *rk)
{
	const char *key[2] = {pk, rk};
	ECW_ASSERT_OK(ecw_index_list_tuples_add(t, key));
}

/* ecw_index_list_store_check of list read with keys plus (pk, rk). */
static int check_with(const struct il_list *read, struct tuples *keys, const char *pk, const char *rk)
{
	const char *key[2] = {pk, rk};
	size_t pos;
	int err;

	key_add(keys, pk, rk);
	err = ecw_index_list_store_check(read, keys);
	ITEST_CHECK(ecw_index_list_tuples_find(keys, key, &pos), "the key went");
	ecw_index_list_tuples_remove_at(keys, pos);
	return err;
}

static void test_job_index_list__list_too_large(void **state)
{
	struct wfx *x = *state;
	char pk_b[1001], rk[1100], *etag_before = NULL, *etag_after = NULL;
	struct il_list big;
	struct tuples cur;
	size_t n = 0;
	int err;

	/* Seed list Big, in parts of at most one transaction, with 1,000-unit
	 * keys up to about 150,000 units short of the largest list the store
	 * takes (15,360,000 UTF-16 units of JSON, in a head and pages). */
	while (n < 15030) {
		ECW_ASSERT_OK(ecw_index_list_store_load(&big, x->t->client, x->t->table2, IL_LIST_PK, "Big"));
		ECW_ASSERT_OK(tuples_copy_for_test(&cur, &big.keys));
		for (size_t end = n + 3000; n < end && n < 15030; n++) {
			snprintf(rk, sizeof(rk), "s%05zu-%0988d", n, 0);
			key_add(&cur, "Seed", rk);
		}
		ECW_ASSERT_OK(ecw_index_list_store_save(x->t->client, x->t->table2, &big, &cur));
		ecw_index_list_tuples_dispose(&cur);
		ecw_index_list_store_dispose(&big);
	}
	/* Then 200-unit keys until B (a 520-unit key) no longer fits, while A
	 * (a short one) still does: computed here, written in one change. */
	memset(pk_b, 'q', 500); /* Azurite takes keys up to 512 characters */
	pk_b[500] = '\0';
	ECW_ASSERT_OK(ecw_index_list_store_load(&big, x->t->client, x->t->table2, IL_LIST_PK, "Big"));
	ECW_ASSERT_OK(tuples_copy_for_test(&cur, &big.keys));
	while ((err = check_with(&big, &cur, pk_b, "B")) == 0) {
		snprintf(rk, sizeof(rk), "t%05zu-%0188d", n++, 0);
		key_add(&cur, "Seed", rk);
	}
	assert_int_equal(err, ECW_ETOOLARGE);
	assert_int_equal(check_with(&big, &cur, "Emp", "A"), 0);
	ECW_ASSERT_OK(ecw_index_list_store_save(x->t->client, x->t->table2, &big, &cur));
	ecw_index_list_store_dispose(&big);

	/* A fits. */
	il_change(x, "Emp", "A", "Big");
	il_run_worker(x, "il-large-1", 1, 1);
	ECW_ASSERT_OK(ecw_index_list_store_load(&big, x->t->client, x->t->table2, IL_LIST_PK, "Big"));
	assert_int_equal(big.keys.n, cur.n + 1);
	assert_int_equal(big.count, (int32_t)cur.n + 1);
	etag_before = strdup(big.etag);
	ecw_index_list_store_dispose(&big);

	/* B does not: poisoned at once, with a message naming the list. */
	il_change(x, pk_b, "B", "Big");
	struct il_wopts o = IL_WOPTS_DEFAULT;
	struct proc p;
	il_start_worker(&p, x, "il-large-2", &o, NULL);
	ITEST_CHECK(proc_wait_count(&p, 1, 60000, "message", NULL), "no outcome for B:\n%s",
	            proc_tail(p.log_path, 20));
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", NULL);
	assert_string_equal(proc_field(line, "outcome"), "poisoned");
	assert_string_equal(proc_field(line, "reason"), "permanent");
	assert_int_equal(proc_field_int(line, "dequeue_count", -1), 1);
	const char *msg = proc_field(line, "error");
	ITEST_CHECK(strstr(msg, "lastname/Big is too large") && strstr(msg, "15360000") &&
	                strstr(msg, IL_JOB) && strstr(msg, ", B)"),
	            "error: %s", msg);
	proc_log_dispose(&log);
	il_wait_drained(x, x->t->queue, &p, 1, 10000);
	assert_int_equal(il_queue_count(x, x->poison), 1);
	proc_stop(&p, 10000);

	/* Nothing was written for B: the list as it was, no ref. */
	ECW_ASSERT_OK(ecw_index_list_store_load(&big, x->t->client, x->t->table2, IL_LIST_PK, "Big"));
	etag_after = strdup(big.etag);
	assert_string_equal(etag_before, etag_after);
	assert_int_equal(big.keys.n, cur.n + 1);
	ecw_index_list_store_dispose(&big);
	struct ecw_entity *ref = il_get_ref(x, pk_b, "B");
	ITEST_CHECK(ref == NULL, "B has a ref: %s", il_str_prop(ref, "Pending"));
	free(etag_before);
	free(etag_after);
	ecw_index_list_tuples_dispose(&cur);
	proc_assert_logs_clean();
}

/* ---- 8. values that make no list --------------------------------------------------------- */

static void test_job_index_list__bad_values_poisoned(void **state)
{
	struct wfx *x = *state;
	struct ecw_entity *e = NULL;
	struct il_wopts o = IL_WOPTS_DEFAULT;
	struct proc p;
	struct proc_log log;

	/* A value the service refuses in a key, and no LastName at all: both
	 * permanent, each named in the error; an empty LastName is a list
	 * like any other (RowKey ""). */
	il_change(x, "Odd", "slash", "AC/DC");
	ECW_ASSERT_OK(ecw_entity_new(&e, "Odd", "nameless"));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "FirstName", "Bo", 2));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
	il_msg_put(x, NULL, "Odd", "nameless");
	il_change(x, "Odd", "empty", "");
	il_start_worker(&p, x, "il-bad", &o, NULL);
	ITEST_CHECK(proc_wait_count(&p, 3, 20000, "message", NULL), "3 outcomes expected:\n%s",
	            proc_tail(p.log_path, 20));
	il_wait_drained(x, x->t->queue, &p, 1, 10000);
	proc_log_read(&log, p.log_path);
	struct json_object *slash = proc_log_find(&log, 0, "message", "rk", "slash", NULL);
	struct json_object *nameless = proc_log_find(&log, 0, "message", "rk", "nameless", NULL);
	struct json_object *empty = proc_log_find(&log, 0, "message", "rk", "empty", NULL);
	assert_string_equal(proc_field(slash, "outcome"), "poisoned");
	assert_string_equal(proc_field(slash, "reason"), "permanent");
	ITEST_CHECK(strstr(proc_field(slash, "error"), "row_key result contains '/'") &&
	                strstr(proc_field(slash, "error"), IL_JOB),
	            "error: %s", proc_field(slash, "error"));
	assert_string_equal(proc_field(nameless, "outcome"), "poisoned");
	ITEST_CHECK(strstr(proc_field(nameless, "error"), "LastName") != NULL, "error: %s",
	            proc_field(nameless, "error"));
	assert_string_equal(proc_field(empty, "outcome"), "succeeded");
	proc_log_dispose(&log);
	assert_int_equal(il_queue_count(x, x->poison), 2);
	proc_stop(&p, 10000);

	il_expect_list(x, "", "[[\"Odd\",\"empty\"]]");
	e = il_get_ref(x, "Odd", "slash");
	ITEST_CHECK(e == NULL, "a poisoned run left a ref");
	e = il_get_ref(x, "Odd", "nameless");
	ITEST_CHECK(e == NULL, "a poisoned run left a ref");
	proc_assert_logs_clean();
}

/* A missing source table is a deployment problem, not a deleted source:
 * the run fails naming it, the message is held ("blocked"), and no list is
 * touched. */
static void test_job_index_list__missing_table_is_an_error(void **state)
{
	struct wfx *x = *state;
	struct il_wopts o = IL_WOPTS_DEFAULT;
	char missing[64];
	struct proc p;
	struct proc_log log;

	seed_five(x, "il-missing-1");
	itest_unique_name(missing, sizeof(missing), 't', "nosuch");
	o.source = missing;
	o.no_create = true;
	il_msg_put(x, NULL, "Sales", "o'brien 001");
	il_start_worker(&p, x, "il-missing-2", &o, NULL);
	ITEST_CHECK(proc_wait_count(&p, 1, 20000, "message", NULL), "no outcome:\n%s",
	            proc_tail(p.log_path, 20));
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", NULL);
	assert_string_equal(proc_field(line, "outcome"), "blocked");
	ITEST_CHECK(strstr(proc_field(line, "error"), "TableNotFound") &&
	                strstr(proc_field(line, "error"), missing),
	            "error: %s", proc_field(line, "error"));
	proc_log_dispose(&log);
	proc_stop(&p, 10000);
	il_expect_list(x, "Jones", JONES3);
	assert_int_equal(il_check_index(x), 2);
	proc_assert_logs_clean();
}

/* ---- 9. configuration errors ------------------------------------------------------------------ */

static void test_job_index_list__config_errors(void **state)
{
	(void)state;
	char path[640];
	char *out = NULL, *err = NULL;

	proc_write_file(path, sizeof(path), "il-badconfig.yaml",
	                "storage: {connection_string: UseDevelopmentStorage=true}\n"
	                "jobs:\n"
	                "  same-table:\n"
	                "    type: index-list\n"
	                "    source: Employees\n"
	                "    table: employees\n"
	                "    partition_key: lastname\n"
	                "    row_key: \"{LastName}\"\n"
	                "  missing:\n"
	                "    type: index-list\n"
	                "    source: Employees\n"
	                "    table: EmployeeIndex\n"
	                "    row_key: \"{LastName\"\n"
	                "    colour: blue\n"
	                "  reserved:\n"
	                "    type: index-list\n"
	                "    source: Employees\n"
	                "    table: EmployeeIndex\n"
	                "    partition_key: \"~ref~{Dept}\"\n"
	                "    row_key: \"{LastName}\"\n");
	const char *args[] = {"check-config", "-c", path, NULL};
	int rc = proc_run(&out, &err, "il-badconfig", args, NULL, 10000);
	assert_int_equal(rc, 2);
	ITEST_CHECK(strstr(err, "table: the lists need a table of their own") &&
	                strstr(err, "partition_key") && strstr(err, "row_key") && strstr(err, "colour") &&
	                strstr(err, "starts the partitions of the index's references"),
	            "check-config said:\n%s%s", out, err);
	free(out);
	free(err);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_index_list__happy_path, il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__run_twice, il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__value_changed, il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__stale_message_after_newer_change, il_setup,
	                                    il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__source_deleted, il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__reordered, il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__list_too_large, il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__bad_values_poisoned, il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__missing_table_is_an_error, il_setup,
	                                    il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__config_errors, il_setup, il_teardown),
	};
	/* ECW_TEST_FILTER=test_job_index_list__bad* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
