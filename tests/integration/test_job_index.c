/* SPDX-License-Identifier: MIT */
/* test_job_index.c - the `index` job type as a process: build/ecworker-test runs against Azurite with an
 * index job over a source table, and the tests judge it by what it leaves in storage, compared with a full
 * recomputation from the source (every expected index entry and back-reference, exact properties and EDM
 * types, nothing else; indexfx.h): the happy path, every message run twice, a changed indexed value, a
 * stale message after a newer change, a deleted source, reordered messages, two sources swapping values
 * and a duplicate key, permanent errors for a missing template property and an invalid or reserved key,
 * the `properties:` variants, every EDM type, an index in its source's own table (and never writing over
 * other data there), and the configuration errors. Each case has its own queues and tables. Runs that
 * overlap or die midway (two workers racing on quick changes, staged races in which a round that read an
 * older source finishes last, a crash right after every step) are in test_job_index_races.c. */
#include "indexfx.h"
#include "itest.h"
#include "proc.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- 1. the happy path -------------------------------------------------------------------------- */

/* Hostile keys (quotes, URL and OData specials, non-ASCII, 400-character
 * keys whose reference must be hashed), a source without LastName. */
static char long_pk[401], long_rk[401];

static void put_staff(struct wfx *x)
{
	memset(long_pk, 'P', 400);
	memset(long_rk, 'r', 400);
	long_pk[400] = long_rk[400] = '\0';
	ix_ensure_table(x, x->t->table);
	ix_upsert(x, x->t->table, ix_employee("Sales", "001", "ann@example.com", "Ann", "Lee"));
	ix_upsert(x, x->t->table,
	          ix_employee("Sales", "o'brien 002", "bob+o'brien@example.com", "Bob", "O'Brien"));
	ix_upsert(x, x->t->table,
	          ix_employee("Ops & Co", "Zo\xc3\xab 003", "zoe%20@example.com", "Zo\xc3\xab", NULL));
	ix_upsert(x, x->t->table, ix_employee("a+b&c=d%", "(x)'y'", "odd'@example.com", "Odd", "Keys"));
	ix_upsert(x, x->t->table, ix_employee(long_pk, long_rk, "long@example.com", "Long", "Keys"));
}

static void enqueue_staff(struct wfx *x)
{
	ix_enqueue(x, "Sales", "001");
	ix_enqueue(x, "Sales", "o'brien 002");
	ix_enqueue(x, "Ops & Co", "Zo\xc3\xab 003");
	ix_enqueue(x, "a+b&c=d%", "(x)'y'");
	ix_enqueue(x, long_pk, long_rk);
}

static void test_job_index__happy_path(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;

	put_staff(x);
	itest_queue(x->t);
	enqueue_staff(x);
	ix_start_worker(&p, x, "index-happy", &o, NULL);
	ix_wait_outcomes(&p, 1, 5, "succeeded", 20000);
	assert_int_equal(ix_outcomes(&p, 1, NULL), 5);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 5);

	/* One entry looked at directly: the copies and the source's keys. */
	struct ecw_entity *e = ix_get(x, x->t->table2, "email_Sales", "ann@example.com");
	ITEST_CHECK(e != NULL, "no index entry email_Sales/ann@example.com");
	assert_string_equal(ix_strp(e, "FirstName"), "Ann");
	assert_string_equal(ix_strp(e, "LastName"), "Lee");
	assert_string_equal(ix_strp(e, "SourcePartitionKey"), "Sales");
	assert_string_equal(ix_strp(e, "SourceRowKey"), "001");
	assert_null(ecw_entity_get(e, "Salary"));
	assert_null(ecw_entity_get(e, "Email"));
	assert_int_equal(ecw_entity_count(e), 4);
	ecw_entity_free(e);
	ix_finish(&p, 1);
}

/* ---- 2. every message twice --------------------------------------------------------------------- */

static void test_job_index__run_twice(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;

	put_staff(x);
	itest_queue(x->t);
	enqueue_staff(x);
	enqueue_staff(x);
	ix_start_worker(&p, x, "index-twice", &o, NULL);
	ix_wait_outcomes(&p, 1, 10, "succeeded", 20000);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 5);

	/* A third time, after everything settled: the entries are not even
	 * rewritten (same ETag), the result is the same. */
	struct ecw_entity *before = ix_get(x, x->t->table2, "email_Sales", "ann@example.com");
	assert_non_null(before);
	enqueue_staff(x);
	ix_wait_outcomes(&p, 1, 15, "succeeded", 20000);
	assert_int_equal(ix_outcomes(&p, 1, NULL), 15);
	struct ecw_entity *after = ix_get(x, x->t->table2, "email_Sales", "ann@example.com");
	assert_non_null(after);
	assert_string_equal(ecw_entity_etag(before), ecw_entity_etag(after));
	ecw_entity_free(before);
	ecw_entity_free(after);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 5);
	ix_finish(&p, 1);
}

/* ---- 3. the indexed value changes --------------------------------------------------------------- */

static void test_job_index__indexed_value_changed(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;
	struct ecw_entity *e;

	ix_ensure_table(x, x->t->table);
	ix_put_employee(x, "Sales", "001", "old@example.com");
	ix_put_employee(x, "Sales", "002", "other@example.com");
	itest_queue(x->t);
	ix_enqueue(x, "Sales", "001");
	ix_enqueue(x, "Sales", "002");
	ix_start_worker(&p, x, "index-changed", &o, NULL);
	ix_wait_outcomes(&p, 1, 2, "succeeded", 20000);
	assert_non_null(e = ix_get(x, x->t->table2, "email_Sales", "old@example.com"));
	ecw_entity_free(e);

	ix_put_employee(x, "Sales", "001", "new@example.com");
	ix_enqueue(x, "Sales", "001");
	ix_wait_outcomes(&p, 1, 3, "succeeded", 20000);
	assert_null(ix_get(x, x->t->table2, "email_Sales", "old@example.com"));
	assert_non_null(e = ix_get(x, x->t->table2, "email_Sales", "new@example.com"));
	assert_string_equal(ix_strp(e, "SourceRowKey"), "001");
	ecw_entity_free(e);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 2);

	/* A copied property changes, the key does not: replaced in place. */
	ix_upsert(x, x->t->table, ix_employee("Sales", "001", "new@example.com", "Annie", "Lee"));
	ix_enqueue(x, "Sales", "001");
	ix_wait_outcomes(&p, 1, 4, "succeeded", 20000);
	assert_non_null(e = ix_get(x, x->t->table2, "email_Sales", "new@example.com"));
	assert_string_equal(ix_strp(e, "FirstName"), "Annie");
	ecw_entity_free(e);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 2);
	ix_finish(&p, 1);
}

/* ---- 4. a stale message after a newer change ---------------------------------------------------- */

static void test_job_index__stale_message_after_newer_change(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;

	ix_ensure_table(x, x->t->table);
	itest_queue(x->t);
	ix_start_worker(&p, x, "index-stale", &o, NULL);
	/* v1, its message held back (the "stale" one, delivered last). */
	ix_put_employee(x, "Sales", "001", "v1@example.com");
	ix_enqueue_on(x, NULL, IX_JOB, "Sales", "001", 3);
	/* v2 and v3, each with its message, processed first. */
	ix_put_employee(x, "Sales", "001", "v2@example.com");
	ix_enqueue(x, "Sales", "001");
	ix_wait_outcomes(&p, 1, 1, "succeeded", 20000);
	ix_put_employee(x, "Sales", "001", "v3@example.com");
	ix_enqueue(x, "Sales", "001");
	ix_wait_outcomes(&p, 1, 2, "succeeded", 20000);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 1);
	/* The held-back v1 message arrives after v3 was indexed. */
	ix_wait_outcomes(&p, 1, 3, "succeeded", 20000);
	assert_int_equal(ix_outcomes(&p, 1, NULL), 3);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 1);
	assert_null(ix_get(x, x->t->table2, "email_Sales", "v1@example.com"));
	assert_null(ix_get(x, x->t->table2, "email_Sales", "v2@example.com"));
	ix_finish(&p, 1);
}

/* ---- 5. the source is deleted ------------------------------------------------------------------- */

static void test_job_index__source_deleted(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;

	put_staff(x);
	itest_queue(x->t);
	enqueue_staff(x);
	ix_start_worker(&p, x, "index-deleted", &o, NULL);
	ix_wait_outcomes(&p, 1, 5, "succeeded", 20000);
	assert_int_equal(ix_count_entities(x, x->t->table2), 10);

	ECW_ASSERT_OK(ecw_table_delete(x->t->client, x->t->table, "Sales", "001", "*"));
	ECW_ASSERT_OK(ecw_table_delete(x->t->client, x->t->table, long_pk, long_rk, "*"));
	ix_enqueue(x, "Sales", "001");
	ix_enqueue(x, long_pk, long_rk);
	ix_wait_outcomes(&p, 1, 7, "succeeded", 20000);
	assert_int_equal(proc_count(&p, "message", "outcome", "succeeded", "detail", "removed", NULL), 2);
	assert_null(ix_get(x, x->t->table2, "email_Sales", "ann@example.com"));
	assert_int_equal(ix_count_entities(x, x->t->table2), 6);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 3);

	/* Again: nothing left to remove; and a source that never existed. */
	ix_enqueue(x, "Sales", "001");
	ix_enqueue(x, "Nobody", "000");
	ix_wait_outcomes(&p, 1, 9, "succeeded", 20000);
	assert_int_equal(proc_count(&p, "message", "outcome", "succeeded", "detail", "missing", NULL), 2);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 3);
	ix_finish(&p, 1);
}

/* ---- 6. messages out of order ------------------------------------------------------------------- */

/* Five employees go through four versions each (new e-mail, new name, gone,
 * back); the message of each change is put with a visibility delay that
 * makes the earliest change's message arrive last. */
static void test_job_index__reordered_messages(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;
	enum { NE = 5, NV = 4 };
	size_t total = 0;

	ix_ensure_table(x, x->t->table);
	itest_queue(x->t);
	ix_start_worker(&p, x, "index-reorder", &o, NULL);
	for (int v = 0; v < NV; v++) {
		for (int i = 0; i < NE; i++) {
			char rk[16], email[64], first[16];
			snprintf(rk, sizeof(rk), "e%02d", i);
			snprintf(email, sizeof(email), "e%02d-v%d@example.com", i, v == 3 ? 1 : v);
			snprintf(first, sizeof(first), "F%d", v);
			if (v == 2 && i % 2 == 0)
				ECW_ASSERT_OK(
				    ecw_table_delete_if_exists(NULL, x->t->client, x->t->table, "R", rk));
			else
				ix_upsert(x, x->t->table, ix_employee("R", rk, email, first, "L"));
			ix_enqueue_on(x, NULL, IX_JOB, "R", rk, NV - 1 - v);
			total++;
		}
		itest_sleep_ms(150);
	}
	ix_wait_outcomes(&p, 1, total, "succeeded", 30000);
	assert_int_equal(ix_outcomes(&p, 1, NULL), total);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), NE);
	ix_finish(&p, 1);
}

/* ---- 7. two sources swap values; a duplicate key ------------------------------------------------ */

static void test_job_index__swap_and_duplicate_key(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;
	struct ecw_entity *e;

	ix_ensure_table(x, x->t->table);
	itest_queue(x->t);
	ix_put_employee(x, "S", "a", "x@example.com");
	ix_put_employee(x, "S", "b", "y@example.com");
	ix_enqueue(x, "S", "a");
	ix_enqueue(x, "S", "b");
	ix_start_worker(&p, x, "index-swap", &o, NULL);
	ix_wait_outcomes(&p, 1, 2, "succeeded", 20000);

	/* Swap, the messages in the order that finds the key still taken. */
	ix_put_employee(x, "S", "a", "y@example.com");
	ix_put_employee(x, "S", "b", "x@example.com");
	ix_enqueue(x, "S", "a");
	ix_enqueue(x, "S", "b");
	ix_wait_outcomes(&p, 1, 4, "succeeded", 20000);
	assert_non_null(e = ix_get(x, x->t->table2, "email_S", "y@example.com"));
	assert_string_equal(ix_strp(e, "SourceRowKey"), "a");
	ecw_entity_free(e);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 2);

	/* A true duplicate: c takes a's e-mail. Its message is retried, the
	 * error naming the holder, until c changes. */
	ix_put_employee(x, "S", "c", "y@example.com");
	ix_enqueue(x, "S", "c");
	ix_wait_outcomes(&p, 1, 1, "retried", 20000);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", "outcome", "retried", "rk", "c", NULL);
	ITEST_CHECK(line && strstr(proc_field(line, "error"), "taken by source S/a"),
	            "the retried line should name the holder: %s",
	            line ? proc_field(line, "error") : "(none)");
	proc_log_dispose(&log);
	assert_non_null(e = ix_get(x, x->t->table2, "email_S", "y@example.com"));
	assert_string_equal(ix_strp(e, "SourceRowKey"), "a");
	ecw_entity_free(e);
	ix_put_employee(x, "S", "c", "z@example.com");
	ix_enqueue(x, "S", "c");
	ix_wait_outcomes(&p, 1, 6, "succeeded", 20000);
	assert_int_equal(ix_outcomes(&p, 1, "poisoned"), 0);
	assert_int_equal(ix_check_recompute(x, &IX_DEFAULT_SPEC), 3);
	ix_finish(&p, 1);
}

/* ---- 8. permanent errors ----------------------------------------------------------------------- */

static struct json_object *message_line(struct proc_log *log, const char *rk)
{
	struct json_object *l = proc_log_find(log, 0, "message", "rk", rk, NULL);
	ITEST_CHECK(l != NULL, "no message line for rk %s", rk);
	return l;
}

static void test_job_index__missing_template_property(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;
	struct proc_log log;

	ix_ensure_table(x, x->t->table);
	itest_queue(x->t);
	ix_upsert(x, x->t->table, ix_employee("Sales", "no-email", NULL, "Ann", "Lee"));
	ix_enqueue(x, "Sales", "no-email");
	ix_start_worker(&p, x, "index-missing-prop", &o, NULL);
	ix_wait_outcomes(&p, 1, 1, "poisoned", 20000);
	proc_log_read(&log, p.log_path);
	struct json_object *l = message_line(&log, "no-email");
	assert_string_equal(proc_field(l, "reason"), "permanent");
	assert_int_equal(proc_field_int(l, "dequeue_count", -1), 1);
	ITEST_CHECK(strstr(proc_field(l, "error"), "'Email'") != NULL, "the error should name Email: %s",
	            proc_field(l, "error"));
	proc_log_dispose(&log);
	assert_int_equal(ix_count_entities(x, x->t->table2), 0);

	/* The envelope on the poison queue says the same. */
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, x->t->client, x->poison, 1, 30));
	assert_int_equal(n, 1);
	struct json_object *env = json_tokener_parse(m[0].text), *v;
	ITEST_CHECK(env != NULL, "the poison message is not JSON: %s", m[0].text);
	assert_true(json_object_object_get_ex(env, "reason", &v));
	assert_string_equal(json_object_get_string(v), "permanent");
	assert_true(json_object_object_get_ex(env, "error", &v));
	ITEST_CHECK(strstr(json_object_get_string(v), "'Email'") != NULL, "envelope error: %s",
	            json_object_get_string(v));
	json_object_put(env);
	ecw_queue_msgs_free(m, n);
	ix_finish(&p, 1);
}

/* A '/' and a control character in the value, a key over 1 KiB, and a
 * result in the reserved back-reference partitions. */
static void test_job_index__invalid_key_result(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;
	struct proc_log log;
	char jobs[2048], big[1100];
	struct ecw_entity *e;
	struct {
		const char *rk, *needle;
	} want[] = {
	    {"slash", "'/'"}, {"ctrl", "control character"}, {"long", "limit is 1024"}, {"dept", "reserved"}};

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ix_ensure_table(x, x->t->table);
	itest_queue(x->t);
	ix_upsert(x, x->t->table, ix_employee("Sales", "slash", "a/b@example.com", "Ann", "Lee"));
	ix_upsert(x, x->t->table, ix_employee("Sales", "ctrl", "a\tb@example.com", "Ann", "Lee"));
	ix_upsert(x, x->t->table, ix_employee("Sales", "long", big, "Ann", "Lee"));
	e = ix_employee("Sales", "dept", "ok@example.com", "Ann", "Lee");
	ix_set_str(e, "Dept", "~ref~00");
	ix_upsert(x, x->t->table, e);
	ix_default_job(jobs, sizeof(jobs), x, IX_JOB, NULL, NULL, "[]");
	snprintf(jobs + strlen(jobs), sizeof(jobs) - strlen(jobs),
	         "  by-dept: {type: index, source: %s, table: %s, partition_key: \"{Dept}\", row_key: "
	         "\"{RowKey}\"}\n",
	         x->t->table, x->t->table2);
	o.jobs = jobs;
	ix_enqueue(x, "Sales", "slash");
	ix_enqueue(x, "Sales", "ctrl");
	ix_enqueue(x, "Sales", "long");
	ix_enqueue_on(x, NULL, "by-dept", "Sales", "dept", 0);
	ix_start_worker(&p, x, "index-invalid-key", &o, NULL);
	ix_wait_outcomes(&p, 1, 4, "poisoned", 20000);
	proc_log_read(&log, p.log_path);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct json_object *l = message_line(&log, want[i].rk);
		assert_string_equal(proc_field(l, "reason"), "permanent");
		ITEST_CHECK(strstr(proc_field(l, "error"), want[i].needle) != NULL,
		            "%s: the error should say %s: %s", want[i].rk, want[i].needle,
		            proc_field(l, "error"));
	}
	proc_log_dispose(&log);
	assert_int_equal(ix_count_entities(x, x->t->table2), 0);
	ix_finish(&p, 1);
}

/* ---- 9. properties: [] and omitted (= all) ----------------------------------------------------- */

static void test_job_index__properties_none_and_all(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;
	const char *all = ix_extra_table(x);
	char jobs[2048];
	static const char *const none[] = {NULL};
	struct ix_spec sp_none = {"idx-none", NULL, NULL, none}, sp_all = {"idx-all", NULL, all, NULL};

	put_staff(x);
	itest_queue(x->t);
	ix_default_job(jobs, sizeof(jobs), x, "idx-none", NULL, NULL, "[]");
	ix_default_job(jobs + strlen(jobs), sizeof(jobs) - strlen(jobs), x, "idx-all", NULL, all, NULL);
	o.jobs = jobs;
	const char *keys[][2] = {{"Sales", "001"}, {"Sales", "o'brien 002"}, {"Ops & Co", "Zo\xc3\xab 003"}};
	for (int i = 0; i < 3; i++) {
		ix_enqueue_on(x, NULL, "idx-none", keys[i][0], keys[i][1], 0);
		ix_enqueue_on(x, NULL, "idx-all", keys[i][0], keys[i][1], 0);
	}
	/* The other two staff are not indexed: remove them from the source so
	 * the recomputation is over what was sent. */
	ECW_ASSERT_OK(ecw_table_delete(x->t->client, x->t->table, "a+b&c=d%", "(x)'y'", "*"));
	ECW_ASSERT_OK(ecw_table_delete(x->t->client, x->t->table, long_pk, long_rk, "*"));
	ix_start_worker(&p, x, "index-props", &o, NULL);
	ix_wait_outcomes(&p, 1, 6, "succeeded", 20000);
	assert_int_equal(ix_check_recompute(x, &sp_none), 3);
	assert_int_equal(ix_check_recompute(x, &sp_all), 3);
	struct ecw_entity *e = ix_get(x, x->t->table2, "email_Sales", "ann@example.com");
	assert_non_null(e);
	assert_int_equal(ecw_entity_count(e), 2); /* the source's keys only */
	ecw_entity_free(e);
	e = ix_get(x, all, "email_Sales", "ann@example.com");
	assert_non_null(e);
	assert_int_equal(ecw_entity_count(e), 7); /* Email, FirstName, LastName, Salary, Grade + keys */
	assert_int_equal(ecw_entity_get(e, "Salary")->type, ECW_EDM_DOUBLE);
	ecw_entity_free(e);
	ix_finish(&p, 1);
}

/* ---- 10. every EDM type copied exactly ---------------------------------------------------------- */

static void test_job_index__every_edm_type_copied_exactly(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;
	struct ecw_entity *e = NULL;
	static const unsigned char bin[] = {0, 1, 2, 0xff, 0xfe, '\'', '"', 0};
	static const char *const listed[] = {"Big", "Ratio", "When", "Id", "Blob", "Nope", NULL};
	struct ix_spec sp_all = {NULL, NULL, NULL, NULL}, sp_listed = {"edm-listed", NULL, NULL, listed};
	const char *second = ix_extra_table(x);
	char jobs[2048];

	ix_ensure_table(x, x->t->table);
	itest_queue(x->t);
	ECW_ASSERT_OK(ecw_entity_new(&e, "Types", "all"));
	ix_set_str(e, "Email", "types@example.com");
	ix_set_str(e, "Text", "Zo\xc3\xab \xf0\x9f\x98\x80 'quoted' \"double\"");
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Small", -2147483647 - 1));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "Big", (int64_t)9007199254740993LL));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Round", 50000.0));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Ratio", 0.1));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "NotANumber", NAN));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Low", -INFINITY));
	ECW_ASSERT_OK(ecw_entity_set_bool(e, "Flag", false));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "When", "2026-08-19T10:00:00.1234567Z"));
	ECW_ASSERT_OK(ecw_entity_set_guid(e, "Id", "c9da6455-213d-42c9-9a79-3e9149a57833"));
	ECW_ASSERT_OK(ecw_entity_set_binary(e, "Blob", bin, sizeof(bin)));
	ix_upsert(x, x->t->table, e);
	ix_default_job(jobs, sizeof(jobs), x, IX_JOB, NULL, NULL, NULL);
	ix_default_job(jobs + strlen(jobs), sizeof(jobs) - strlen(jobs), x, "edm-listed", NULL, second,
	               "[Big, Ratio, When, Id, Blob, Nope]");
	o.jobs = jobs;
	ix_enqueue(x, "Types", "all");
	ix_enqueue_on(x, NULL, "edm-listed", "Types", "all", 0);
	ix_start_worker(&p, x, "index-edm", &o, NULL);
	ix_wait_outcomes(&p, 1, 2, "succeeded", 20000);
	sp_listed.index = second;
	assert_int_equal(ix_check_recompute(x, &sp_all), 1);
	assert_int_equal(ix_check_recompute(x, &sp_listed), 1);

	e = ix_get(x, x->t->table2, "email_Types", "types@example.com");
	assert_non_null(e);
	assert_int_equal(ecw_entity_get(e, "Big")->type, ECW_EDM_INT64);
	assert_true(ecw_entity_get(e, "Big")->v.i64 == (int64_t)9007199254740993LL);
	assert_int_equal(ecw_entity_get(e, "Round")->type, ECW_EDM_DOUBLE);
	assert_true(isnan(ecw_entity_get(e, "NotANumber")->v.d));
	assert_int_equal(ecw_entity_get(e, "When")->type, ECW_EDM_DATETIME);
	assert_string_equal(ecw_entity_get(e, "When")->v.s, "2026-08-19T10:00:00.1234567Z");
	assert_int_equal(ecw_entity_get(e, "Blob")->len, sizeof(bin));
	ecw_entity_free(e);
	ix_finish(&p, 1);
}

/* ---- 11. an index in its source's own table ----------------------------------------------------- */

/* The inter-partition pattern: entries under "email_<dept>" next to the
 * employees. Messages naming an entry or a reference (as a backfill over
 * the table sends) are skipped, and change nothing. */
static void test_job_index__same_table(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;
	char jobs[1024], rpk[96], rrk[80];
	struct ix_spec sp = {NULL, NULL, NULL, IX_FIRST_LAST};

	put_staff(x);
	itest_queue(x->t);
	sp.index = x->t->table;
	ix_default_job(jobs, sizeof(jobs), x, IX_JOB, NULL, x->t->table, "[FirstName, LastName]");
	o.jobs = jobs;
	enqueue_staff(x);
	ix_start_worker(&p, x, "index-same", &o, NULL);
	ix_wait_outcomes(&p, 1, 5, "succeeded", 20000);
	assert_int_equal(ix_check_recompute(x, &sp), 5);
	assert_int_equal(ix_count_entities(x, x->t->table), 15);

	ix_ref_keys(rpk, sizeof(rpk), rrk, sizeof(rrk), IX_JOB, "Sales", "001");
	ix_enqueue(x, "email_Sales", "ann@example.com");
	ix_enqueue(x, rpk, rrk);
	ix_wait_outcomes(&p, 1, 7, "succeeded", 20000);
	assert_int_equal(proc_count(&p, "message", "outcome", "succeeded", "detail", "not-a-source", NULL),
	                 2);
	assert_int_equal(ix_check_recompute(x, &sp), 5);
	assert_int_equal(ix_count_entities(x, x->t->table), 15);

	/* A source change moves its entry within the shared table. */
	ix_upsert(x, x->t->table, ix_employee("Sales", "001", "ann2@example.com", "Ann", "Lee"));
	ix_enqueue(x, "Sales", "001");
	ix_wait_outcomes(&p, 1, 8, "succeeded", 20000);
	assert_int_equal(ix_check_recompute(x, &sp), 5);
	assert_int_equal(ix_count_entities(x, x->t->table), 15);
	ix_finish(&p, 1);
}

/* In a shared table the index never writes over data that is not its own
 * entry: an entity already at the entry's keys, or the source itself. */
static void test_job_index__never_overwrites_other_data(void **state)
{
	struct wfx *x = *state;
	struct ix_wopts o = IX_WOPTS_DEFAULT;
	struct proc p;
	struct proc_log log;
	char jobs[1024];
	struct ecw_entity *e = NULL;

	ix_ensure_table(x, x->t->table);
	itest_queue(x->t);
	ECW_ASSERT_OK(ecw_entity_new(&e, "email_Sales", "clash@example.com"));
	ix_set_str(e, "Note", "someone else's data");
	ix_upsert(x, x->t->table, e);
	ix_put_employee(x, "Sales", "001", "clash@example.com");
	ix_put_employee(x, "Sales", "me@example.com", "me@example.com");
	ix_default_job(jobs, sizeof(jobs), x, IX_JOB, NULL, x->t->table, "[]");
	snprintf(jobs + strlen(jobs), sizeof(jobs) - strlen(jobs),
	         "  self: {type: index, source: %s, table: %s, partition_key: \"{PartitionKey}\", row_key: "
	         "\"{Email}\"}\n",
	         x->t->table, x->t->table);
	o.jobs = jobs;
	ix_enqueue(x, "Sales", "001");
	ix_enqueue_on(x, NULL, "self", "Sales", "me@example.com", 0);
	ix_start_worker(&p, x, "index-no-overwrite", &o, NULL);
	ix_wait_outcomes(&p, 1, 2, "poisoned", 20000);
	proc_log_read(&log, p.log_path);
	struct json_object *l = message_line(&log, "001");
	assert_string_equal(proc_field(l, "reason"), "permanent");
	ITEST_CHECK(strstr(proc_field(l, "error"), "no index entry") != NULL, "error: %s",
	            proc_field(l, "error"));
	l = message_line(&log, "me@example.com");
	assert_string_equal(proc_field(l, "reason"), "permanent");
	ITEST_CHECK(strstr(proc_field(l, "error"), "its own source") != NULL, "error: %s",
	            proc_field(l, "error"));
	proc_log_dispose(&log);
	assert_non_null(e = ix_get(x, x->t->table, "email_Sales", "clash@example.com"));
	assert_string_equal(ix_strp(e, "Note"), "someone else's data");
	assert_int_equal(ecw_entity_count(e), 1);
	ecw_entity_free(e);
	assert_non_null(e = ix_get(x, x->t->table, "Sales", "me@example.com"));
	assert_string_equal(ix_strp(e, "FirstName"), "Ann");
	ecw_entity_free(e);
	/* Besides the three entities, only Sales/001's back-reference: it had
	 * registered the location before finding it taken by other data (the
	 * registration is bookkeeping; a later run cleans it up). */
	char rpk[96], rrk[80];
	ix_ref_keys(rpk, sizeof(rpk), rrk, sizeof(rrk), IX_JOB, "Sales", "001");
	assert_non_null(e = ix_get(x, x->t->table, rpk, rrk));
	assert_null(ecw_entity_get(e, "IndexPartitionKey"));
	assert_string_equal(ix_strp(e, "Pending1RowKey"), "clash@example.com");
	ecw_entity_free(e);
	assert_int_equal(ix_count_entities(x, x->t->table), 4);
	ix_finish(&p, 1);
}

/* ---- 12. configuration errors ------------------------------------------------------------------- */

static void test_job_index__config_errors(void **state)
{
	struct wfx *x = *state;
	char path[640], text[2048];
	char *out = NULL, *err = NULL;
	const char *args[] = {"check-config", "-c", path, NULL};
	struct {
		const char *job, *needle;
	} bad[] = {
	    {"{type: index, source: Emp, table: Idx, partition_key: \"~ref~{Dept}\", row_key: \"{Email}\"}",
	     "reserved"},
	    {"{type: index, source: Emp, table: Idx, partition_key: \"p\", row_key: \"{Email}\", properties: "
	     "[FirstName, SourceRowKey]}",
	     "SourceRowKey"},
	    {"{type: index, source: Emp, table: Idx, partition_key: \"p\"}", "row_key"},
	    {"{type: index, source: Emp, table: Idx, partition_key: \"p\", row_key: \"{Email\"}",
	     "never closed"},
	    {"{type: index, source: Emp, table: Idx, partition_key: \"p\", row_key: \"r\", colour: red}",
	     "colour"},
	    {"{type: index, source: E, table: Idx, partition_key: \"p\", row_key: \"r\"}", "source"},
	};

	(void)x;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(
		    text, sizeof(text),
		    "storage: {connection_string: \"UseDevelopmentStorage=true\"}\njobs:\n  by-email: %s\n",
		    bad[i].job);
		proc_write_file(path, sizeof(path), "index-badcfg.yaml", text);
		int code = proc_run(&out, &err, "index-badcfg", args, NULL, 10000);
		ITEST_CHECK(code == 2, "config %zu: exit %d, expected 2; stderr: %s", i, code, err);
		ITEST_CHECK(strstr(err, bad[i].needle) != NULL, "config %zu: stderr lacks '%s': %s", i,
		            bad[i].needle, err);
		free(out);
		free(err);
	}
	snprintf(
	    text, sizeof(text),
	    "storage: {connection_string: \"UseDevelopmentStorage=true\"}\njobs:\n"
	    "  by-email: {type: index, source: Emp, table: Idx, partition_key: \"email_{PartitionKey}\", "
	    "row_key: \"{Email:0>6}\", properties: []}\n");
	proc_write_file(path, sizeof(path), "index-goodcfg.yaml", text);
	int code = proc_run(&out, &err, "index-goodcfg", args, NULL, 10000);
	ITEST_CHECK(code == 0, "a good config: exit %d; stderr: %s", code, err);
	free(out);
	free(err);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_index__happy_path, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__run_twice, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__indexed_value_changed, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__stale_message_after_newer_change, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__source_deleted, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__reordered_messages, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__swap_and_duplicate_key, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__missing_template_property, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__invalid_key_result, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__properties_none_and_all, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__every_edm_type_copied_exactly, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__same_table, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__never_overwrites_other_data, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__config_errors, ix_setup, ix_teardown),
	};
	/* ECW_TEST_FILTER=test_job_index__same* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("job_index", tests, NULL, NULL);
}
