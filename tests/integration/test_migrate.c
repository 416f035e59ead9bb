/* SPDX-License-Identifier: MIT */
/* test_migrate.c - `ecworker migrate` against Azurite: a five-step migration
 * with a 5,000-entity copy killed mid-copy and run again (the copy equals the
 * source, types included), status listing each migration once, two runs at
 * once applying a migration once, --dry-run and status writing nothing, a
 * failing step stopping the run and a fixed configuration resuming it, a
 * changed applied migration refused, and every step kind. */
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "proc.h"

#define N_COPY 5000
#define N_PARTS 10

static int setup(void **state)
{
	return itest_setup(state);
}

static int teardown(void **state)
{
	proc_cleanup();
	return itest_teardown(state);
}

/* A config: the storage section, then `migrations:` with vtable and body. */
static void config(char *path, size_t cap, const char *name, const char *vtable, const char *body)
{
	char text[8192];
	int k = snprintf(text, sizeof(text),
	                 "storage:\n"
	                 "  connection_string: ${ECW_TEST_CONNECTION_STRING}\n"
	                 "log: {level: info, format: json}\n"
	                 "metrics: {listen: \"\"}\n"
	                 "migrations:\n"
	                 "  table: %s\n"
	                 "  lease: 2s\n"
	                 "  wait: 30s\n"
	                 "  list:\n%s",
	                 vtable, body);
	assert_true(k > 0 && (size_t)k < sizeof(text));
	proc_write_file(path, cap, name, text);
}

/* n entities over N_PARTS partitions with one property of every EDM type. */
static void fill_typed(struct itest *t, const char *table, int n)
{
	static const unsigned char bin[] = {0, 1, 2, 0xfe, 0xff};
	int per = n / N_PARTS;

	for (int p = 0; p < N_PARTS; p++) {
		struct ecw_batch *b = NULL;
		char pk[32];
		snprintf(pk, sizeof(pk), "tank-%02d", p);
		for (int i = 0; i < per; i++) {
			struct ecw_entity *e = NULL;
			char rk[32], name[64], guid[40];
			int x = p * per + i;
			if (!b)
				ECW_ASSERT_OK(ecw_batch_new(&b, table));
			snprintf(rk, sizeof(rk), "r%05d", i);
			snprintf(name, sizeof(name), "o'brien #%d", x);
			snprintf(guid, sizeof(guid), "c0ffee00-0000-4000-8000-%012d", x);
			ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
			ECW_ASSERT_OK(ecw_entity_set_string(e, "Name", name, strlen(name)));
			ECW_ASSERT_OK(ecw_entity_set_int32(e, "N", x));
			ECW_ASSERT_OK(ecw_entity_set_int64(e, "Big", 5000000000LL + x));
			ECW_ASSERT_OK(ecw_entity_set_double(e, "Level", x + 0.25));
			ECW_ASSERT_OK(ecw_entity_set_double(e, "Whole", 5.0));
			ECW_ASSERT_OK(ecw_entity_set_bool(e, "On", x % 2 == 0));
			ECW_ASSERT_OK(ecw_entity_set_datetime(e, "When", "2026-08-19T10:00:00.1234567Z"));
			ECW_ASSERT_OK(ecw_entity_set_guid(e, "Id", guid));
			ECW_ASSERT_OK(ecw_entity_set_binary(e, "Raw", bin, sizeof(bin)));
			ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL));
			ecw_entity_free(e);
			if (ecw_batch_count(b) == 100) {
				ECW_ASSERT_OK(ecw_batch_submit(t->client, b));
				ecw_batch_free(b);
				b = NULL;
			}
		}
		if (b) {
			ECW_ASSERT_OK(ecw_batch_submit(t->client, b));
			ecw_batch_free(b);
		}
	}
}

static size_t count_entities(struct itest *t, const char *table, const char *filter)
{
	size_t n = 0;
	struct ecw_entity **v = itest_query_all(&n, t->client, table, filter);

	itest_entities_free(v, n);
	return n;
}

/* The table does not exist (TableNotFound, not just an absent entity). */
static void assert_no_table(struct itest *t, const char *table)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_ERR(ecw_table_get(&e, t->client, table, "p", "r"), ECW_ENOTABLE);
	ITEST_CHECK(strcmp(ecw_error_last()->service_code, "TableNotFound") == 0, "%s exists: %s", table,
	            itest_last_error());
}

/* Lines of text containing needle. */
static int lines_with(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *line = strndup(p, len);
		if (strstr(line, needle))
			n++;
		free(line);
		p = nl ? nl + 1 : NULL;
	}
	return n;
}

static struct ecw_entity *record(struct itest *t, const char *vtable, const char *rk)
{
	struct ecw_entity *e = NULL;
	int err = ecw_table_get(&e, t->client, vtable, "migration", rk);

	return err == 0 ? e : NULL;
}

static long long prop_int(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);

	if (!p)
		return -1;
	return p->type == ECW_EDM_INT64 ? p->v.i64 : p->type == ECW_EDM_INT32 ? p->v.i32 : -1;
}

static const char *prop_str(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);

	return p && p->type == ECW_EDM_STRING ? p->v.s : "";
}

/* Five steps, the third a 5,000-entity copy: SIGKILLed mid-copy (the record
 * shows a cursor past 1,000 entities), `status` then shows it running, and a
 * second run takes the expired claim over, resumes at the cursor and
 * completes; the copy equals the source entity for entity. */
static void test_migrate__kill_mid_copy_resumes(void **state)
{
	struct itest *t = *state;
	const char *src = itest_table(t), *dst = itest_table2(t);
	const char *vt = itest_extra_table(t, "ver"), *x = itest_extra_table(t, "dev");
	char cfg[640], body[2048], *out = NULL, *err = NULL;
	struct ecw_entity *rec = NULL, *e = NULL;
	struct proc p;
	bool mid = false;

	fill_typed(t, src, N_COPY);
	snprintf(
	    body, sizeof(body),
	    "    - id: 0001-telemetry\n"
	    "      version: 1\n"
	    "      description: a copy of the telemetry\n"
	    "      steps:\n"
	    "        - create_table: %s\n"
	    "        - upsert_entity: {table: %s, entity: {PartitionKey: cfg, RowKey: a, Name: \"Tank 7\", Cap: 5000000000}}\n"
	    "        - copy_table: {from: %s, to: %s}\n"
	    "        - set_property: {table: %s, filter: \"RowKey eq 'a'\", set: {Copied: true, Tag: \"{PartitionKey}-{RowKey}\"}}\n"
	    "        - insert_entity: {table: %s, entity: {PartitionKey: cfg, RowKey: done, V: 1}}\n",
	    x, x, src, dst, x, x);
	config(cfg, sizeof(cfg), "migrate-kill.yaml", vt, body);

	/* Slow batches down so there is a middle to kill it in. */
	proc_start(&p, "migrate-kill", (const char *const[]){"migrate", "-c", cfg, NULL},
	           (const char *const[]){"ECW_TEST_PAUSE_AT=migrate.batch:25", NULL});
	for (int64_t deadline = itest_now_ms() + 60000; itest_now_ms() < deadline && proc_alive(&p);) {
		if ((rec = record(t, vt, "0000000001"))) {
			mid = prop_int(rec, "Done") >= 1000 && *prop_str(rec, "CursorRK");
			ecw_entity_free(rec);
			if (mid)
				break;
		}
		itest_sleep_ms(20);
	}
	ITEST_CHECK(mid, "the copy never recorded 1,000 entities done: %s", proc_tail(p.log_path, 20));
	proc_signal(&p, SIGKILL);
	assert_true(proc_wait(&p, 10000));
	size_t partial = count_entities(t, dst, NULL);
	ITEST_CHECK(partial >= 1000 && partial < N_COPY, "killed mid-copy, yet %zu copied", partial);

	/* status: once, running, by the dead process. */
	assert_int_equal(proc_run(&out, &err, "migrate-kill-status",
	                          (const char *const[]){"migrate", "status", "-c", cfg, NULL}, NULL, 30000),
	                 0);
	ITEST_CHECK(lines_with(out, "0001-telemetry") == 1 && lines_with(out, "running by") == 1,
	            "status:\n%s", out);
	free(out);
	free(err);

	/* Again: waits out the dead owner's lease, takes over, resumes. */
	assert_int_equal(proc_run(&out, &err, "migrate-kill-rerun",
	                          (const char *const[]){"migrate", "-c", cfg, NULL}, NULL, 60000),
	                 0);
	ITEST_CHECK(strstr(out, "taking over") && strstr(out, "resuming after (tank-") &&
	                strstr(out, "0001-telemetry: applied"),
	            "rerun:\n%s\nstderr:\n%s", out, err);
	free(out);
	free(err);

	/* The copy equals the source. */
	size_t ns = 0, nd = 0;
	struct ecw_entity **vs = itest_query_all(&ns, t->client, src, NULL),
	                  **vd = itest_query_all(&nd, t->client, dst, NULL);
	assert_int_equal(ns, N_COPY);
	assert_int_equal(nd, N_COPY);
	for (size_t i = 0; i < ns; i++)
		ITEST_CHECK(ecw_entity_equal(vs[i], vd[i]), "entity %zu differs:\n  source %s\n  copy   %s",
		            i, itest_entity_json(vs[i]), itest_entity_json(vd[i]));
	itest_entities_free(vs, ns);
	itest_entities_free(vd, nd);

	/* The other steps ran, once. */
	ECW_ASSERT_OK(ecw_table_get(&e, t->client, x, "cfg", "a"));
	assert_string_equal(prop_str(e, "Tag"), "cfg-a");
	assert_non_null(ecw_entity_get(e, "Copied"));
	assert_int_equal(ecw_entity_get(e, "Cap")->type, ECW_EDM_INT64);
	ecw_entity_free(e);
	assert_int_equal(count_entities(t, x, NULL), 2);
	rec = record(t, vt, "0000000001");
	assert_non_null(rec);
	assert_string_equal(prop_str(rec, "State"), "applied");
	ecw_entity_free(rec);
	assert_int_equal(count_entities(t, vt, NULL), 1);

	assert_int_equal(proc_run(&out, NULL, "migrate-kill-status2",
	                          (const char *const[]){"migrate", "status", "-c", cfg, NULL}, NULL, 30000),
	                 0);
	ITEST_CHECK(lines_with(out, "0001-telemetry") == 1 && lines_with(out, "applied") == 1, "status:\n%s",
	            out);
	free(out);
	proc_assert_logs_clean();
}

/* Two runs at once: one applies, the other waits and finds it applied. The
 * insert_entity step would fail with 409 on a second apply. */
static void test_migrate__concurrent_runs_apply_once(void **state)
{
	struct itest *t = *state;
	const char *vt = itest_extra_table(t, "ver"), *x = itest_extra_table(t, "mark");
	char cfg[640], body[1024];
	struct proc p[2];
	struct proc_log log;
	int applying = 0;

	snprintf(body, sizeof(body),
	         "    - id: 0001-marker\n"
	         "      version: 1\n"
	         "      steps:\n"
	         "        - create_table: %s\n"
	         "        - insert_entity: {table: %s, entity: {PartitionKey: m, RowKey: once, N: 1}}\n",
	         x, x);
	config(cfg, sizeof(cfg), "migrate-race.yaml", vt, body);
	/* Each step pauses, so the second run finds the claim held. */
	for (int i = 0; i < 2; i++)
		proc_start(&p[i], i ? "migrate-race-b" : "migrate-race-a",
		           (const char *const[]){"migrate", "-c", cfg, NULL},
		           (const char *const[]){"ECW_TEST_PAUSE_AT=migrate.step:400", NULL});
	for (int i = 0; i < 2; i++) {
		ITEST_CHECK(proc_wait(&p[i], 60000), "migrate %d did not finish", i);
		ITEST_CHECK(proc_exit_code(&p[i]) == 0, "migrate %d exited %d: %s", i, proc_exit_code(&p[i]),
		            proc_tail(p[i].log_path, 20));
		proc_log_read(&log, p[i].log_path);
		applying += strstr(log.text, "0001-marker: applying") != NULL;
		proc_log_dispose(&log);
	}
	assert_int_equal(applying, 1);
	assert_int_equal(count_entities(t, x, NULL), 1);
	assert_int_equal(count_entities(t, vt, NULL), 1);
	proc_assert_logs_clean();
}

/* --dry-run prints the plan and writes nothing, not even the version table;
 * status creates nothing either. */
static void test_migrate__dry_run_and_status_write_nothing(void **state)
{
	struct itest *t = *state;
	const char *vt = itest_extra_table(t, "ver"), *x = itest_extra_table(t, "new");
	char cfg[640], body[1024], expect[128], *out = NULL;

	snprintf(body, sizeof(body),
	         "    - id: 0001-new\n"
	         "      version: 1\n"
	         "      description: a new table\n"
	         "      steps:\n"
	         "        - create_table: %s\n"
	         "        - upsert_entity: {table: %s, entity: {PartitionKey: a, RowKey: b}}\n",
	         x, x);
	config(cfg, sizeof(cfg), "migrate-dry.yaml", vt, body);
	assert_int_equal(proc_run(&out, NULL, "migrate-dry",
	                          (const char *const[]){"migrate", "-c", cfg, "--dry-run", NULL}, NULL,
	                          30000),
	                 0);
	snprintf(expect, sizeof(expect), "step 1/2: create_table %s", x);
	ITEST_CHECK(strstr(out, "nothing written") && strstr(out, "1 0001-new: a new table") &&
	                strstr(out, expect),
	            "dry run:\n%s", out);
	free(out);
	assert_no_table(t, vt);
	assert_no_table(t, x);
	assert_int_equal(proc_run(&out, NULL, "migrate-dry-status",
	                          (const char *const[]){"migrate", "status", "-c", cfg, NULL}, NULL, 30000),
	                 0);
	ITEST_CHECK(lines_with(out, "0001-new") == 1 && strstr(out, "pending"), "status:\n%s", out);
	free(out);
	assert_no_table(t, vt);
	assert_no_table(t, x);
	proc_assert_logs_clean();
}

/* The version table is storage anyone with access to it may edit: what
 * `migrate status` prints of a record (its id, its state, its error) is
 * escaped for the terminal, so a record holding escape sequences cannot
 * rewrite the operator's screen. */
static void test_migrate__status_escapes_what_the_table_holds(void **state)
{
	struct itest *t = *state;
	const char *vt = itest_extra_table(t, "ver");
	char cfg[640], body[512], *out = NULL;
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_table_create(NULL, t->client, vt));
	ECW_ASSERT_OK(ecw_entity_new(&e, "migration", "0000000007"));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "Version", 7));
	static const char id[] = "evil\x1b]0;pwned\x07", error[] = "boom\x1b[2J\xc2\x9b"
	                                                           "31m";
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Id", id, strlen(id)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "State", "failed", 6));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Error", error, strlen(error)));
	ECW_ASSERT_OK(ecw_table_write(NULL, t->client, vt, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
	snprintf(body, sizeof(body),
	         "    - id: 0001-new\n"
	         "      version: 1\n"
	         "      steps:\n"
	         "        - create_table: %s\n",
	         itest_extra_table(t, "new"));
	config(cfg, sizeof(cfg), "migrate-escape.yaml", vt, body);
	assert_int_equal(proc_run(&out, NULL, "migrate-escape-status",
	                          (const char *const[]){"migrate", "status", "-c", cfg, NULL}, NULL, 30000),
	                 0);
	ITEST_CHECK(!strchr(out, '\x1b') && !strchr(out, '\x07') && !strstr(out, "\xc2\x9b"),
	            "status printed a control character:\n%s", out);
	ITEST_CHECK(strstr(out, "evil\\e]0;pwned") && strstr(out, "not in the configuration"), "status:\n%s",
	            out);
	free(out);
	proc_assert_logs_clean();
}

/* Three migrations; v is 0001's property value, t2 the table of 0002's step 2. */
static void fail_body(char *out, size_t cap, const char *x, int v, const char *t2, const char *y)
{
	int k = snprintf(out, cap,
	                 "    - id: 0001-x\n"
	                 "      version: 1\n"
	                 "      steps:\n"
	                 "        - create_table: %s\n"
	                 "        - insert_entity: {table: %s, entity: {PartitionKey: p, RowKey: a, V: %d}}\n"
	                 "    - id: 0002-more\n"
	                 "      version: 2\n"
	                 "      steps:\n"
	                 "        - insert_entity: {table: %s, entity: {PartitionKey: p, RowKey: b}}\n"
	                 "        - upsert_entity: {table: %s, entity: {PartitionKey: p, RowKey: fixed}}\n"
	                 "        - insert_entity: {table: %s, entity: {PartitionKey: p, RowKey: c}}\n"
	                 "    - id: 0003-y\n"
	                 "      version: 3\n"
	                 "      steps:\n"
	                 "        - create_table: %s\n",
	                 x, x, v, x, t2, x, y);

	assert_true(k > 0 && (size_t)k < cap);
}

/* A failing step stops the run (exit 1, which migration, which step, the
 * storage error) before any later migration; status shows it failed; the
 * fixed configuration resumes at that step (the steps before it are not run
 * again: the first is an insert that would 409) and goes on. Then an edit of
 * an applied migration is refused. */
static void test_migrate__failing_step_then_fixed_config_resumes(void **state)
{
	struct itest *t = *state;
	const char *vt = itest_extra_table(t, "ver"), *x = itest_extra_table(t, "x"),
	           *y = itest_extra_table(t, "y");
	const char *missing = itest_extra_table(t, "missing");
	char cfg[640], body[2048], *out = NULL, *err = NULL;

	fail_body(body, sizeof(body), x, 1, missing, y);
	config(cfg, sizeof(cfg), "migrate-fail.yaml", vt, body);
	assert_int_equal(proc_run(&out, &err, "migrate-fail",
	                          (const char *const[]){"migrate", "-c", cfg, NULL}, NULL, 30000),
	                 1);
	ITEST_CHECK(strstr(err, "0002-more (version 2) failed: step 2/3 (upsert_entity") &&
	                strstr(err, "TableNotFound") && strstr(err, "1 later migration not attempted"),
	            "stderr:\n%s", err);
	ITEST_CHECK(strstr(out, "0001-x: applied") != NULL, "stdout:\n%s", out);
	free(out);
	free(err);
	assert_no_table(t, y);
	assert_int_equal(proc_run(&out, NULL, "migrate-fail-status",
	                          (const char *const[]){"migrate", "status", "-c", cfg, NULL}, NULL, 30000),
	                 0);
	ITEST_CHECK(lines_with(out, "0002-more") == 1 && strstr(out, "failed at step 2: step 2/3") &&
	                lines_with(out, "0003-y") == 1 && strstr(out, "pending"),
	            "status:\n%s", out);
	free(out);

	/* Fixed: step 2 names the right table. */
	fail_body(body, sizeof(body), x, 1, x, y);
	config(cfg, sizeof(cfg), "migrate-fail.yaml", vt, body);
	assert_int_equal(proc_run(&out, &err, "migrate-fixed",
	                          (const char *const[]){"migrate", "-c", cfg, NULL}, NULL, 30000),
	                 0);
	ITEST_CHECK(strstr(out, "resuming after a failed attempt") && strstr(out, "0002-more: applied") &&
	                strstr(out, "0003-y: applied") && !strstr(out, "step 1/3"),
	            "stdout:\n%s\nstderr:\n%s", out, err);
	free(out);
	free(err);
	assert_int_equal(count_entities(t, x, NULL), 4); /* a, b, fixed, c */
	assert_int_equal(count_entities(t, y, NULL), 0);
	assert_int_equal(count_entities(t, vt, NULL), 3);

	/* An applied migration edited: refused, nothing run. */
	fail_body(body, sizeof(body), x, 2, x, y);
	config(cfg, sizeof(cfg), "migrate-fail.yaml", vt, body);
	assert_int_equal(proc_run(NULL, &err, "migrate-edited",
	                          (const char *const[]){"migrate", "-c", cfg, NULL}, NULL, 30000),
	                 1);
	ITEST_CHECK(strstr(err, "0001-x (version 1) was applied with another definition"), "stderr:\n%s",
	            err);
	free(err);
	proc_assert_logs_clean();
}

/* rename_table, set_property with a template over many entities,
 * delete_partition, delete_entity, clear_table. */
static void test_migrate__step_kinds(void **state)
{
	struct itest *t = *state;
	const char *src = itest_table(t), *dst = itest_table2(t);
	const char *vt = itest_extra_table(t, "ver"), *x = itest_extra_table(t, "tmp");
	char cfg[640], body[2048], *out = NULL, *err = NULL;
	struct ecw_entity **v;
	size_t n = 0;

	/* 300 entities: partitions tank-00..09, 30 each; odd N in cm. */
	fill_typed(t, src, 300);
	snprintf(
	    body, sizeof(body),
	    "    - id: 0001-kinds\n"
	    "      version: 1\n"
	    "      steps:\n"
	    "        - rename_table: {from: %s, to: %s}\n"
	    "        - set_property: {table: %s, filter: \"On eq false\", set: {Unit: mm, Source: \"{PartitionKey}/{N}\", Scale: 10}}\n"
	    "        - delete_partition: {table: %s, pk: tank-09}\n"
	    "        - delete_entity: {table: %s, pk: tank-00, rk: r00000}\n"
	    "        - create_table: %s\n"
	    "        - upsert_entity: {table: %s, entity: {PartitionKey: a, RowKey: b, T: {type: Edm.Int64, value: \"7\"}}}\n"
	    "        - clear_table: %s\n",
	    src, dst, dst, dst, dst, x, x, x);
	config(cfg, sizeof(cfg), "migrate-kinds.yaml", vt, body);
	assert_int_equal(proc_run(&out, &err, "migrate-kinds",
	                          (const char *const[]){"migrate", "-c", cfg, NULL}, NULL, 60000),
	                 0);
	ITEST_CHECK(strstr(out, "0001-kinds: applied"), "stdout:\n%s\nstderr:\n%s", out, err);
	free(out);
	free(err);
	assert_no_table(t, src);
	v = itest_query_all(&n, t->client, dst, NULL);
	assert_int_equal(n, 300 - 30 - 1);
	for (size_t i = 0; i < n; i++) {
		const struct ecw_prop *on = ecw_entity_get(v[i], "On"), *num = ecw_entity_get(v[i], "N");
		char want[64];
		assert_string_not_equal(ecw_entity_pk(v[i]), "tank-09");
		if (on->v.b) {
			ITEST_CHECK(!ecw_entity_get(v[i], "Unit"), "set on a non-match: %s",
			            itest_entity_json(v[i]));
			continue;
		}
		snprintf(want, sizeof(want), "%s/%d", ecw_entity_pk(v[i]), num->v.i32);
		ITEST_CHECK(strcmp(prop_str(v[i], "Unit"), "mm") == 0 &&
		                strcmp(prop_str(v[i], "Source"), want) == 0 &&
		                ecw_entity_get(v[i], "Scale")->type == ECW_EDM_INT32 &&
		                ecw_entity_get(v[i], "Scale")->v.i32 == 10 &&
		                ecw_entity_get(v[i], "Big")->type == ECW_EDM_INT64,
		            "not merged: %s", itest_entity_json(v[i]));
	}
	itest_entities_free(v, n);
	assert_int_equal(count_entities(t, x, NULL), 0);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_migrate__kill_mid_copy_resumes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_migrate__concurrent_runs_apply_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_migrate__dry_run_and_status_write_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_migrate__status_escapes_what_the_table_holds, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_migrate__failing_step_then_fixed_config_resumes, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_migrate__step_kinds, setup, teardown),
	};
	return cmocka_run_group_tests_name("migrate", tests, NULL, NULL);
}
