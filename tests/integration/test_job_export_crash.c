/* SPDX-License-Identifier: MIT */
/* test_job_export_crash.c - the export job as a worker process dying right
 * after each of its steps (ECW_CRASH_AT): after a block put, after the
 * commit, after a transaction of deletes. Right after each crash every row
 * of the window is in the table or in the blob, and the blob holds none
 * twice; a fresh worker then converges on the redelivered message: the
 * blob holds every row once, the window's rows are gone from the table,
 * the rows outside it are untouched, nothing is poisoned. The job's other
 * cases run in this process in test_job_export.c. */
#include "itest.h"
#include "moveblobfx.h"
#include "proc.h"
#include "workerfx.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define APP "app 'crash'"
#define WINDOW_S INT64_C(1795986000) /* 2026-11-29T21:00:00Z */
/* More than one transaction of deletes (100), so that a crash can come
 * between two. */
#define ROWS 130

struct cx {
	struct wfx w; /* first: wfx_teardown */
	char container[64];
};

static int cx_setup(void **state)
{
	struct cx *x = wfx_new(sizeof(struct cx), WFX_QUEUE | WFX_TABLE);

	mbx_container_new(x->container, x->w.t->client, false); /* the worker creates it */
	*state = x;
	return 0;
}

static int cx_teardown(void **state)
{
	struct cx *x = *state;

	mbx_container_drop(x->w.t->client, x->container);
	return wfx_teardown(state);
}

/* Returns the worker's metrics port. */
static int write_config(struct cx *x, const char *name)
{
	char jobs[1024];

	snprintf(jobs, sizeof(jobs),
	         "  logs:\n    type: export\n    source: %s\n    from_partition: \"{app}\"\n"
	         "    row_keys: unix\n    window: 1h\n"
	         "    to_blob: {container: %s, name: \"{app}/{window:yyyy/MM/dd/HH}00/000001.log\"}\n"
	         "    delete_after: true\n",
	         x->w.t->table, x->container);
	return wfx_job_config(&x->w, name, 1, 2, jobs);
}

/* The window's rows at second i of the hour (Unix-second RowKeys), and two
 * outside it. */
static void write_rows(struct cx *x, struct ecw_entity **in, struct ecw_entity **out)
{
	char rk[32];

	for (int i = 0; i < ROWS; i++) {
		snprintf(rk, sizeof(rk), "%010" PRId64 "-%03d", WINDOW_S + i * 27, i);
		in[i] = mbx_every_type(APP, rk, i);
		ECW_ASSERT_OK(
		    ecw_table_write(NULL, x->w.t->client, x->w.t->table, in[i], ECW_WRITE_INSERT, NULL));
	}
	for (int i = 0; i < 2; i++) {
		snprintf(rk, sizeof(rk), "%010" PRId64, i ? WINDOW_S + 3600 : WINDOW_S - 1);
		out[i] = mbx_every_type(APP, rk, 1000 + i);
		ECW_ASSERT_OK(
		    ecw_table_write(NULL, x->w.t->client, x->w.t->table, out[i], ECW_WRITE_INSERT, NULL));
	}
}

static void put_message(struct cx *x)
{
	static const char text[] =
	    "{\"job\":\"logs\",\"app\":\"" APP "\",\"window_start\":\"2026-11-29T21:00Z\"}";

	ECW_ASSERT_OK(ecw_queue_put(NULL, x->w.t->client, x->w.t->queue, text, strlen(text), NULL));
}

/* How many times each row is in the blob (0 when there is none), and that
 * each line equals its row. */
static void blob_counts(struct cx *x, int counts[ROWS], struct ecw_entity **in, const char *when)
{
	struct ecw_buf body;
	int err;

	memset(counts, 0, sizeof(int) * ROWS);
	ecw_buf_init(&body, 0);
	err = ecw_blob_get(&body, NULL, x->w.t->client, x->container, APP "/2026/11/29/2100/000001.log",
	                   64u << 20);
	if (err == ECW_EBLOBNOTFOUND || err == ECW_ENOCONTAINER) {
		ecw_error_clear();
		ecw_buf_dispose(&body);
		return;
	}
	ECW_ASSERT_OK(err);
	for (const char *p = ecw_buf_cstr(&body), *end = p + body.len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct ecw_entity *e = NULL;
		ITEST_CHECK(nl != NULL, "%s: the blob's last line has no newline", when);
		ECW_ASSERT_OK(ecw_entity_from_json(&e, p, (size_t)(nl - p)));
		int i = atoi(ecw_entity_rk(e) + 11);
		ITEST_CHECK(i >= 0 && i < ROWS && strcmp(ecw_entity_rk(e), ecw_entity_rk(in[i])) == 0,
		            "%s: a line of another row: %s", when, ecw_entity_rk(e));
		mv_assert_same_entity(in[i], e, when);
		counts[i]++;
		ecw_entity_free(e);
		p = nl + 1;
	}
	ecw_buf_dispose(&body);
}

static bool in_table(struct cx *x, const struct ecw_entity *e)
{
	struct ecw_entity *got = NULL;
	int err = ecw_table_get(&got, x->w.t->client, x->w.t->table, ecw_entity_pk(e), ecw_entity_rk(e));

	if (err == ECW_ENOTFOUND) {
		ecw_error_clear();
		return false;
	}
	ECW_ASSERT_OK(err);
	mv_assert_same_entity(e, got, "a row in the table");
	ecw_entity_free(got);
	return true;
}

static void crash_after(struct cx *x, const char *point, bool some_in_blob, bool some_deleted)
{
	struct ecw_entity *in[ROWS], *out[2];
	int counts[ROWS];
	char name[64];
	int blob = 0, table = 0;

	write_rows(x, in, out);
	put_message(x);
	snprintf(name, sizeof(name), "export-crash-%s", point + strlen("export."));
	(void)write_config(x, name);
	wfx_run_until_crash(&x->w, name, point);

	blob_counts(x, counts, in, "after the crash");
	for (int i = 0; i < ROWS; i++) {
		bool t = in_table(x, in[i]);
		ITEST_CHECK(counts[i] <= 1, "after %s row %d is %d times in the blob", point, i, counts[i]);
		ITEST_CHECK(t || counts[i] == 1, "after %s row %d is in neither place (lost)", point, i);
		blob += counts[i];
		table += t;
	}
	print_message("  after %s: %d rows in the blob, %d in the table\n", point, blob, table);
	ITEST_CHECK(some_in_blob ? blob == ROWS : blob == 0, "after %s: %d rows in the blob", point, blob);
	ITEST_CHECK(some_deleted ? table > 0 && table < ROWS : table == ROWS,
	            "after %s: %d rows in the table", point, table);

	snprintf(name, sizeof(name), "export-rerun-%s", point + strlen("export."));
	wfx_run(&x->w, name, write_config(x, name), 1, 60000, NULL);
	blob_counts(x, counts, in, "after the rerun");
	for (int i = 0; i < ROWS; i++) {
		ITEST_CHECK(counts[i] == 1, "after the rerun row %d is %d times in the blob", i, counts[i]);
		ITEST_CHECK(!in_table(x, in[i]), "after the rerun row %d is still in the table", i);
		ecw_entity_free(in[i]);
	}
	for (int i = 0; i < 2; i++) {
		ITEST_CHECK(in_table(x, out[i]), "the row outside the window %d was touched", i);
		ecw_entity_free(out[i]);
	}
	wfx_assert_queues_empty(&x->w);
}

static void test_job_export_crash__after_a_block(void **state)
{
	crash_after(*state, "export.block", false, false);
}

static void test_job_export_crash__after_the_commit(void **state)
{
	crash_after(*state, "export.committed", true, false);
}

static void test_job_export_crash__after_a_transaction_of_deletes(void **state)
{
	crash_after(*state, "export.deleted", true, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_export_crash__after_a_block, cx_setup, cx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export_crash__after_the_commit, cx_setup, cx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export_crash__after_a_transaction_of_deletes, cx_setup,
	                                    cx_teardown),
	};
	return cmocka_run_group_tests_name("job_export_crash", tests, NULL, NULL);
}
