/* SPDX-License-Identifier: MIT */
/* test_job_export_audit.c - `ecworker audit` of an export job
 * (jobs/export_audit.c) against Azurite, as a process: an exported window
 * is clean and the current window is not judged; a past window whose rows
 * were never exported is reported (its rows still in the table, its blob
 * missing) and --repair exports and deletes them; a late row in an
 * exported window is reported and merged in by --repair; with delete_after
 * false, rows the blob lacks are repaired and lines of rows the table lost
 * are reported, never repaired; --via-queue puts the window's message; a
 * PartitionKey the template does not give, RowKeys that are no times and a
 * blob that is no export are judged as the README says, under hostile
 * keys. The windows are in 2020, long past, but for the current one. */
#include "auditfx.h"
#include "itest.h"
#include "moveblobfx.h"
#include "proc.h"
#include "workerfx.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_config.h"
#include "ecw_job.h"

#define APP "w&b 'c%"             /* hostile: a quote, an ampersand, a space, a percent sign */
#define PK "log_" APP             /* from_partition: "log_{app}" */
#define W1 "2020-10-11T12:00:00Z" /* a window long past */
#define W1_S INT64_C(1602417600)
#define NAME APP "/2020/10/11/1200/000001.log"

struct ea {
	struct wfx x; /* first: wfx_teardown */
	char container[64];
	struct ecw_config *cfg;
	const struct ecw_job_def *def;
};

static int ea_setup(void **state)
{
	struct ea *e = wfx_new(sizeof(struct ea), WFX_QUEUE | WFX_TABLE);

	mbx_container_new(e->container, e->x.t->client, true);
	*state = e;
	return 0;
}

static int ea_teardown(void **state)
{
	struct ea *e = *state;

	mbx_container_drop(e->x.t->client, e->container);
	ecw_config_free(e->cfg);
	return wfx_teardown(state);
}

static struct ecw_client *client(struct ea *e)
{
	return e->x.t->client;
}

/* The job (jobs: lines) on this test's table and container, the config
 * file for the audit process, and the same parsed here for runs. */
static void configure(struct ea *e, bool delete_after)
{
	struct wfx_worker w = WFX_WORKER(e->x.t->queue, e->x.poison);
	char jobs[1024], text[2048];
	struct ecw_node_errors errs;

	snprintf(jobs, sizeof(jobs),
	         "  logs:\n    type: export\n    source: %s\n    from_partition: \"log_{app}\"\n"
	         "    row_keys: inverted_ticks\n    window: 1h\n"
	         "    to_blob: {container: %s, name: \"{app}/{window:yyyy/MM/dd/HH}00/000001.log\"}\n"
	         "    delete_after: %s\n",
	         e->x.t->table, e->container, delete_after ? "true" : "false");
	w.jobs = jobs;
	wfx_write_config(e->x.config, sizeof(e->x.config), "export-audit", &w);
	snprintf(text, sizeof(text),
	         "storage: {connection_string: \"${ECW_TEST_CONNECTION_STRING}\"}\njobs:\n%s", jobs);
	ecw_config_free(e->cfg);
	ecw_node_errors_init(&errs);
	if (ecw_config_parse(&e->cfg, text, strlen(text), "export-audit.yaml", &errs) < 0)
		fail_msg("config: %s", errs.n ? errs.lines[0] : "?");
	ecw_node_errors_dispose(&errs);
	e->def = ecw_config_job(e->cfg, "logs");
}

/* The export of app's window, run here as its message would. */
static void run(struct ea *e, const char *app, const char *window)
{
	atomic_bool lost = false;
	struct json_object *msg = json_object_new_object();
	struct ecw_job_ctx ctx = {.client = client(e),
	                          .job = "logs",
	                          .trace_id = "test",
	                          .message_id = "test",
	                          .dequeue_count = 1,
	                          .lease_lost = &lost,
	                          .message = msg};

	json_object_object_add(msg, "job", json_object_new_string("logs"));
	json_object_object_add(msg, "app", json_object_new_string(app));
	json_object_object_add(msg, "window_start", json_object_new_string(window));
	ecw_error_clear();
	ECW_ASSERT_OK(e->def->type->run(e->def->settings, &ctx));
	json_object_put(msg);
}

/* A row of pk written at unix_s (19 digits of inverted ticks, then
 * suffix); its RowKey in rk (64 bytes). */
static void write_row(struct ea *e, const char *pk, int64_t unix_s, const char *suffix, char *rk)
{
	int64_t t = unix_s * 10000000 + INT64_C(621355968000000000);
	struct ecw_entity *row = NULL;
	char key[64];

	snprintf(key, sizeof(key), "%019" PRId64 "%s", INT64_C(3155378975999999999) - t, suffix);
	if (rk)
		snprintf(rk, 64, "%s", key);
	ECW_ASSERT_OK(ecw_entity_new(&row, pk, key));
	ECW_ASSERT_OK(ecw_entity_set_string(row, "Message", "hello", 5));
	ECW_ASSERT_OK(
	    ecw_table_write(NULL, client(e), e->x.t->table, row, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(row);
}

/* The rows left in partition pk. */
static size_t rows_in(struct ea *e, const char *pk)
{
	struct ecw_entity **v;
	struct ecw_buf filter;
	size_t n = 0;

	ecw_buf_init(&filter, 0);
	ECW_ASSERT_OK(ecw_buf_adds(&filter, "PartitionKey eq "));
	ECW_ASSERT_OK(ecw_escape_filter_string(&filter, pk));
	v = itest_query_all(&n, client(e), e->x.t->table, ecw_buf_cstr(&filter));
	itest_entities_free(v, n);
	ecw_buf_dispose(&filter);
	return n;
}

/* The lines of blob name (-1 when there is none), and its ecw_count. */
static long lines_of(struct ea *e, const char *name, char count[24])
{
	struct ecw_blob_info *info = NULL;
	struct ecw_buf body;
	long n = 0;
	int err;

	ecw_buf_init(&body, 0);
	err = ecw_blob_get(&body, &info, client(e), e->container, name, 64u << 20);
	if (err == ECW_EBLOBNOTFOUND) {
		ecw_error_clear();
		ecw_buf_dispose(&body);
		return -1;
	}
	ECW_ASSERT_OK(err);
	for (size_t i = 0; i < body.len; i++)
		n += body.ptr[i] == '\n';
	snprintf(count, 24, "%s",
	         ecw_blob_info_meta(info, "ecw_count") ? ecw_blob_info_meta(info, "ecw_count") : "");
	ecw_blob_info_free(info);
	ecw_buf_dispose(&body);
	return n;
}

/* The audit's --json line for logs, its exit code checked. */
static char *audit(struct ea *e, const char *name, int want_code, const char *const *args)
{
	char *out = NULL;

	assert_int_equal(auditfx_run(&out, e->x.config, name, args), want_code);
	return out;
}

static const char *const json_args[] = {"--json", NULL};
static const char *const repair_args[] = {"--repair", "--json", NULL};

/* (a) An exported window reports nothing; rows of the current window are
 * not judged yet (no export has had its turn). */
static void test_job_export_audit__exported_window_is_clean(void **state)
{
	struct ea *e = *state;
	struct json_object *o;
	char *out;

	configure(e, true);
	write_row(e, PK, W1_S + 10, "", NULL);
	write_row(e, PK, W1_S + 20, "_x", NULL);
	run(e, APP, W1);
	write_row(e, PK, time(NULL), "", NULL); /* now: its window is not due */
	out = audit(e, "export-audit-clean", 0, json_args);
	auditfx_counts_are(out, "logs", 0, 0, 0, 0, 0);
	o = auditfx_job_line(out, "logs");
	assert_int_equal(auditfx_field(o, "checked"), 0);
	json_object_put(o);
	free(out);
}

/* (b) A past window never exported: its 3 rows are past the window and
 * still in the table (stale, one per row) and its blob does not exist
 * (missing); --repair exports and deletes them, and the next audit is
 * clean. */
static void test_job_export_audit__unexported_window_reported_and_repaired(void **state)
{
	struct ea *e = *state;
	char count[24], *out;

	configure(e, true);
	for (int i = 0; i < 3; i++)
		write_row(e, PK, W1_S + 600 * i, "", NULL);
	out = audit(e, "export-audit-unexported", 3, json_args);
	auditfx_counts_are(out, "logs", 1, 3, 0, 0, 0);
	ITEST_CHECK(strstr(out, "past its window and still in the table"), "no row finding in %s", out);
	ITEST_CHECK(strstr(out, "\"source_rk\":\"" W1 "\""), "the window is not the source in %s", out);
	free(out);
	assert_int_equal(lines_of(e, NAME, count), -1);
	assert_int_equal(rows_in(e, PK), 3); /* read-only */

	out = audit(e, "export-audit-unexported-repair", 0, repair_args);
	auditfx_counts_are(out, "logs", 1, 3, 0, 0, 4);
	free(out);
	assert_int_equal(lines_of(e, NAME, count), 3);
	assert_string_equal(count, "3");
	assert_int_equal(rows_in(e, PK), 0);

	out = audit(e, "export-audit-unexported-again", 0, json_args);
	auditfx_counts_are(out, "logs", 0, 0, 0, 0, 0);
	free(out);
}

/* (c) A row written into a window after its export deleted the rest: it
 * is past its window (stale row) and the blob lacks it (stale window);
 * --repair merges it into the blob and deletes it. */
static void test_job_export_audit__late_row_merged(void **state)
{
	struct ea *e = *state;
	char count[24], *out;

	configure(e, true);
	write_row(e, PK, W1_S + 5, "", NULL);
	write_row(e, PK, W1_S + 6, "", NULL);
	run(e, APP, W1);
	assert_int_equal(rows_in(e, PK), 0);
	write_row(e, PK, W1_S + 3000, "_late", NULL);
	out = audit(e, "export-audit-late", 3, json_args);
	auditfx_counts_are(out, "logs", 0, 2, 0, 0, 0);
	ITEST_CHECK(strstr(out, "lacks rows of the table"), "no window finding in %s", out);
	free(out);

	out = audit(e, "export-audit-late-repair", 0, repair_args);
	auditfx_counts_are(out, "logs", 0, 2, 0, 0, 2);
	free(out);
	assert_int_equal(lines_of(e, NAME, count), 3);
	assert_string_equal(count, "3");
	assert_int_equal(rows_in(e, PK), 0);
	out = audit(e, "export-audit-late-again", 0, json_args);
	auditfx_counts_are(out, "logs", 0, 0, 0, 0, 0);
	free(out);
}

/* (d) delete_after: false: rows stay, and the blob must hold each in its
 * version. Clean after the export (3 rows checked); a row added and a row
 * changed make the blob stale; a row deleted from the table makes the
 * counts differ (orphan). --repair merges the first two and never the
 * third: exit 3. */
static void test_job_export_audit__kept_rows_against_the_blob(void **state)
{
	struct ea *e = *state;
	char rk[3][64], count[24], *out;
	struct json_object *o;

	configure(e, false);
	for (int i = 0; i < 3; i++)
		write_row(e, PK, W1_S + 60 * i, "", rk[i]);
	run(e, APP, W1);
	out = audit(e, "export-audit-kept-clean", 0, json_args);
	auditfx_counts_are(out, "logs", 0, 0, 0, 0, 0);
	o = auditfx_job_line(out, "logs");
	assert_int_equal(auditfx_field(o, "checked"), 3);
	json_object_put(o);
	free(out);

	write_row(e, PK, W1_S + 900, "_new", NULL); /* not in the blob */
	write_row(e, PK, W1_S + 60, "", NULL);      /* rk[1] again: a new version */
	ECW_ASSERT_OK(ecw_table_delete(client(e), e->x.t->table, PK, rk[2], "*")); /* the blob keeps it */
	out = audit(e, "export-audit-kept", 3, json_args);
	auditfx_counts_are(out, "logs", 0, 1, 1, 0, 0);
	free(out);
	out = audit(e, "export-audit-kept-repair", 3, repair_args);
	auditfx_counts_are(out, "logs", 0, 1, 1, 0, 1);
	free(out);
	assert_int_equal(lines_of(e, NAME, count), 4);
	assert_string_equal(count, "4");
	assert_int_equal(rows_in(e, PK), 3);
	out = audit(e, "export-audit-kept-again", 3, json_args);
	auditfx_counts_are(out, "logs", 0, 0, 1, 0, 0);
	free(out);
}

/* --repair --via-queue: the window's message (its fields and window_start)
 * is put, nothing is exported here. */
static void test_job_export_audit__via_queue_puts_the_window_message(void **state)
{
	struct ea *e = *state;
	const char *args[] = {"--repair", "--via-queue", "--json", NULL};
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	char *out;

	configure(e, true);
	write_row(e, PK, W1_S + 1, "", NULL);
	out = audit(e, "export-audit-via-queue", 0, args);
	auditfx_counts_are(out, "logs", 1, 1, 0, 0, 2);
	free(out);
	assert_int_equal(rows_in(e, PK), 1);
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, client(e), e->x.t->queue, 32, 30));
	assert_int_equal(n, 1);
	ITEST_CHECK(strstr(m[0].text, "\"app\":\"w&b 'c%\"") &&
	                strstr(m[0].text, "\"window_start\":\"" W1 "\"") &&
	                strstr(m[0].text, "\"job\":\"logs\""),
	            "message: %s", m[0].text);
	ecw_queue_msgs_free(m, n);
}

/* (e) Rows that are not the job's are passed over: a PartitionKey the
 * template does not give, and RowKeys that are no inverted ticks (a
 * limit says so); a blob in a window's place that no export wrote is a
 * conflict, never repaired (the rows stay). Hostile partitions and keys
 * all through. */
static void test_job_export_audit__foreign_rows_and_blobs(void **state)
{
	struct ea *e = *state;
	struct ecw_entity *row = NULL;
	struct json_object *o;
	char *out;

	configure(e, true);
	write_row(e, "other 'x'", W1_S + 1, "", NULL); /* no log_ prefix */
	write_row(e, "LOG_x", W1_S + 1, "", NULL);
	ECW_ASSERT_OK(ecw_entity_new(&row, PK, "not a time ' or 1 eq 1"));
	ECW_ASSERT_OK(
	    ecw_table_write(NULL, client(e), e->x.t->table, row, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(row);
	write_row(e, "log_z", W1_S + 1, "", NULL);
	ECW_ASSERT_OK(ecw_blob_put(NULL, client(e), e->container, "z/2020/10/11/1200/000001.log", "mine\n", 5,
	                           &(struct ecw_blob_put_options){.content_type = "text/plain"}));
	out = audit(e, "export-audit-foreign", 3, repair_args);
	auditfx_counts_are(out, "logs", 0, 0, 0, 1, 0);
	o = auditfx_job_line(out, "logs");
	ITEST_CHECK(strstr(json_object_to_json_string(o), "RowKey does not start with the digits"),
	            "no limit in %s", out);
	assert_int_equal(auditfx_field(o, "checked"), 1);
	json_object_put(o);
	free(out);
	assert_int_equal(rows_in(e, "other 'x'"), 1);
	assert_int_equal(rows_in(e, "LOG_x"), 1);
	assert_int_equal(rows_in(e, PK), 1);
	assert_int_equal(rows_in(e, "log_z"), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_export_audit__exported_window_is_clean, ea_setup,
	                                    ea_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export_audit__unexported_window_reported_and_repaired,
	                                    ea_setup, ea_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export_audit__late_row_merged, ea_setup, ea_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export_audit__kept_rows_against_the_blob, ea_setup,
	                                    ea_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export_audit__via_queue_puts_the_window_message,
	                                    ea_setup, ea_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export_audit__foreign_rows_and_blobs, ea_setup,
	                                    ea_teardown),
	};
	return cmocka_run_group_tests_name("job_export_audit", tests, NULL, NULL);
}
