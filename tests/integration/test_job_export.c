/* SPDX-License-Identifier: MIT */
/* test_job_export.c - the export job (jobs/export.c, export_run.c) against
 * Azurite, run in this process as a message would: a window of rows of
 * every EDM type under hostile keys exported as JSON lines and deleted,
 * the rows outside the window left alone, the lines read back by the
 * official SDK exactly as it read the rows; late rows merged into the
 * blob; a row changed between the commit and the delete kept and taken by
 * the next export; a window spanning several blocks; nothing written for an
 * empty window; a blob that is no export refused; compress: gzip across
 * blocks and ranges. The crash tests (a worker
 * process dying after each step) are in test_job_export_crash.c. */
#include "itest.h"
#include "moveblobfx.h"
#include "proc.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ecw_config.h"
#include "ecw_crash.h"
#include "ecw_job.h"

#define APP "w&b 'c"
#define WINDOW "2026-11-29T21:00Z"
#define WINDOW_S INT64_C(1795986000) /* 2026-11-29T21:00:00Z */
#define NAME APP "/2026/11/29/2100/000001.log"

struct xf {
	struct itest *t;
	char container[64];
	struct ecw_config *cfg;
	const struct ecw_job_def *def;
	/* When set, run() uses it: a client that counts the table queries. */
	struct ecw_account *acct;
	struct ecw_client *client;
	int queries;
};

static int setup_with(void **state, bool gzip)
{
	struct xf *x = calloc(1, sizeof(*x));
	struct ecw_node_errors errs;
	char text[1024];
	void *inner = NULL;

	assert_non_null(x);
	itest_setup(&inner);
	x->t = inner;
	itest_table(x->t);
	mbx_container_new(x->container, x->t->client, true);
	snprintf(text, sizeof(text),
	         "storage: {connection_string: \"${ECW_TEST_CONNECTION_STRING}\"}\njobs:\n"
	         "  logs:\n    type: export\n    source: %s\n    from_partition: \"{app}\"\n"
	         "    row_keys: inverted_ticks\n    window: 1h\n"
	         "    to_blob: {container: %s, name: \"{app}/{window:yyyy/MM/dd/HH}00/000001.log%s\"}\n"
	         "    delete_after: true\n    compress: %s\n",
	         x->t->table, x->container, gzip ? ".gz" : "", gzip ? "gzip" : "none");
	ecw_node_errors_init(&errs);
	if (ecw_config_parse(&x->cfg, text, strlen(text), "export.yaml", &errs) < 0)
		fail_msg("config: %s", errs.n ? errs.lines[0] : "?");
	ecw_node_errors_dispose(&errs);
	x->def = ecw_config_job(x->cfg, "logs");
	*state = x;
	return 0;
}

static int xf_setup(void **state)
{
	return setup_with(state, false);
}

static int xf_setup_gzip(void **state)
{
	return setup_with(state, true);
}

static int xf_teardown(void **state)
{
	struct xf *x = *state;
	void *inner = x->t;

	ecw_crash_point_hook(NULL, NULL);
	unsetenv("ECW_TEST_EXPORT_SPANS_MAX");
	ecw_client_free(x->client);
	ecw_account_free(x->acct);
	mbx_container_drop(x->t->client, x->container);
	ecw_config_free(x->cfg);
	itest_teardown(&inner);
	free(x);
	return 0;
}

/* Runs the export of app's window as its message would; detail (64 bytes,
 * may be NULL) receives the outcome's. */
static int run(struct xf *x, const char *app, const char *window, char *detail)
{
	atomic_bool lost = false;
	struct json_object *msg = json_object_new_object();
	struct ecw_job_ctx ctx = {.client = x->client ? x->client : x->t->client,
	                          .job = "logs",
	                          .trace_id = "test",
	                          .message_id = "test",
	                          .dequeue_count = 1,
	                          .lease_lost = &lost,
	                          .message = msg};
	int err;

	json_object_object_add(msg, "job", json_object_new_string("logs"));
	json_object_object_add(msg, "app", json_object_new_string(app));
	json_object_object_add(msg, "window_start", json_object_new_string(window));
	ecw_error_clear();
	err = x->def->type->run(x->def->settings, &ctx);
	if (detail)
		snprintf(detail, 64, "%s", ctx.outcome_detail);
	json_object_put(msg);
	return err;
}

/* The RowKey of a row written at unix_s plus ticks (100 ns): 19 digits of
 * inverted ticks, then suffix. */
static void row_key(char out[64], int64_t unix_s, int64_t ticks, const char *suffix)
{
	int64_t t = unix_s * 10000000 + ticks + INT64_C(621355968000000000);
	snprintf(out, 64, "%019" PRId64 "%s", INT64_C(3155378975999999999) - t, suffix);
}

static struct ecw_entity *write_row(struct xf *x, int64_t unix_s, int64_t ticks, const char *suffix,
                                    int version)
{
	char rk[64];
	struct ecw_entity *e;

	row_key(rk, unix_s, ticks, suffix);
	e = mbx_every_type(APP, rk, version);
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	return e;
}

/* The row of APP at rk, or NULL. */
static struct ecw_entity *get_row(struct xf *x, const char *rk)
{
	struct ecw_entity *e = NULL;
	int err = ecw_table_get(&e, x->t->client, x->t->table, APP, rk);

	if (err == ECW_ENOTFOUND) {
		ecw_error_clear();
		return NULL;
	}
	ECW_ASSERT_OK(err);
	return e;
}

/* body, one whole gzip stream, replaced by what it inflates to. */
static void gunzip(struct ecw_buf *body)
{
	struct ecw_buf out;
	z_stream z = {0};
	char chunk[65536];
	int rc;

	ecw_buf_init(&out, 0);
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)body->ptr;
	z.avail_in = (uInt)body->len;
	do {
		z.next_out = (Bytef *)chunk;
		z.avail_out = sizeof(chunk);
		rc = inflate(&z, Z_NO_FLUSH);
		ITEST_CHECK(rc == Z_OK || rc == Z_STREAM_END, "the blob is no gzip stream (%d)", rc);
		ECW_ASSERT_OK(ecw_buf_add(&out, chunk, sizeof(chunk) - z.avail_out));
	} while (rc != Z_STREAM_END);
	ITEST_CHECK(z.avail_in == 0, "%u bytes after the gzip stream", z.avail_in);
	inflateEnd(&z);
	ecw_buf_reset(body);
	ECW_ASSERT_OK(ecw_buf_add(body, out.ptr, out.len));
	ecw_buf_dispose(&out);
}

/* The export's lines, each parsed; *n set. */
static struct ecw_entity **blob_lines(struct xf *x, const char *name, size_t *n, struct ecw_blob_info **info)
{
	struct ecw_entity **v = NULL;
	struct ecw_buf body;
	size_t cap = 0;

	*n = 0;
	ecw_buf_init(&body, 0);
	ECW_ASSERT_OK(ecw_blob_get(&body, info, x->t->client, x->container, name, 64u << 20));
	if (strlen(name) > 3 && strcmp(name + strlen(name) - 3, ".gz") == 0)
		gunzip(&body);
	for (const char *p = ecw_buf_cstr(&body), *end = p + body.len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		ITEST_CHECK(nl != NULL, "the blob's last line has no newline");
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			v = realloc(v, cap * sizeof(*v));
			assert_non_null(v);
		}
		if (ecw_entity_from_json(&v[*n], p, (size_t)(nl - p)) < 0)
			fail_msg("line %zu is no entity: %s", *n + 1, itest_last_error());
		(*n)++;
		p = nl + 1;
	}
	ecw_buf_dispose(&body);
	return v;
}

static void free_all(struct ecw_entity **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ecw_entity_free(v[i]);
	free(v);
}

/* The window's rows (3 in it, across its first and last tick) and one on
 * each side of it, of every EDM type, with a hostile RowKey suffix: the
 * export writes the three in RowKey order (newest first), deletes them,
 * and leaves the two; the SDK reads each line as it read the row. */
static void test_job_export__window_exported_and_deleted(void **state)
{
	struct xf *x = *state;
	struct ecw_entity *in[3], *before, *after, **lines;
	struct ecw_blob_info *info = NULL;
	char detail[64], *sdk_rows[3], *sdk_lines = NULL;
	size_t n = 0;

	in[0] = write_row(x, WINDOW_S, 0, " a'b%", 1);         /* the window's first tick */
	in[1] = write_row(x, WINDOW_S + 1800, 1234567, "", 2); /* 21:30:00.1234567 */
	in[2] = write_row(x, WINDOW_S + 3599, 9999999, " \xc3\xa9\xf0\x9f\x98\x80", 3); /* its last tick */
	before = write_row(x, WINDOW_S - 1, 9999999, "", 4);
	after = write_row(x, WINDOW_S + 3600, 0, "", 5);
	for (int i = 0; i < 3; i++)
		assert_int_equal(proc_sdk(&sdk_rows[i], (const char *const[]){"read-entity", x->t->table, APP,
		                                                              ecw_entity_rk(in[i]), NULL}),
		                 0);

	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "3 rows, 3 lines, 3 deleted");
	lines = blob_lines(x, NAME, &n, &info);
	assert_int_equal(n, 3);
	/* Newest first: the RowKeys of inverted ticks ascend. */
	for (int i = 0; i < 3; i++)
		mv_assert_same_entity(in[2 - i], lines[i], "a line of the export");
	assert_string_equal(info->content_type, "application/x-ndjson");
	assert_string_equal(ecw_blob_info_meta(info, "ecw_count"), "3");
	assert_string_equal(ecw_blob_info_meta(info, "ecw_format"), "jsonl");
	assert_string_equal(ecw_blob_info_meta(info, "ecw_first_time"), "2026-11-29T21:00:00.0000000Z");
	assert_string_equal(ecw_blob_info_meta(info, "ecw_last_time"), "2026-11-29T21:59:59.9999999Z");
	assert_string_equal(ecw_blob_info_meta(info, "ecw_window_start"), "2026-11-29T21:00:00Z");
	assert_string_equal(ecw_blob_info_meta(info, "ecw_partition_key"), "w%26b%20'c");
	free_all(lines, n);
	ecw_blob_info_free(info);
	for (int i = 0; i < 3; i++)
		assert_null(get_row(x, ecw_entity_rk(in[i])));

	/* Outside the window: untouched. */
	struct ecw_entity *b = get_row(x, ecw_entity_rk(before)), *a = get_row(x, ecw_entity_rk(after));
	mv_assert_same_entity(before, b, "the row before the window");
	mv_assert_same_entity(after, a, "the row after the window");

	/* The SDK reads each line as it read the row (an integral Double
	 * aside: the SDK reads the table's as Int32, the line says Double). */
	assert_int_equal(
	    proc_sdk(&sdk_lines, (const char *const[]){"read-blob-lines", x->container, NAME, NULL}), 0);
	const char *p = sdk_lines;
	for (int i = 2; i >= 0; i--) {
		const char *nl = strchr(p, '\n');
		char *want = itest_replace(sdk_rows[i], "\"Whole\":{\"value\":\"50000\",\"type\":\"Int32\"}",
		                           "\"Whole\":{\"value\":\"50000\",\"type\":\"Double\"}");
		ITEST_CHECK(nl && (size_t)(nl - p) == strlen(want) && memcmp(p, want, strlen(want)) == 0,
		            "line %d as the SDK reads it:\n  %.*s\nthe row as it read it:\n  %s", 3 - i,
		            nl ? (int)(nl - p) : (int)strlen(p), p, want);
		p = nl + 1;
		free(want);
		free(sdk_rows[i]);
	}
	free(sdk_lines);
	for (int i = 0; i < 3; i++)
		ecw_entity_free(in[i]);
	ecw_entity_free(before);
	ecw_entity_free(after);
	ecw_entity_free(a);
	ecw_entity_free(b);
}

/* Late rows: a window exported and deleted, then a row arrives late in it
 * (and one outside it): the next export merges the late row into the
 * blob, in its place among the lines, and deletes it. A run with nothing
 * new writes nothing. */
static void test_job_export__late_rows_merged(void **state)
{
	struct xf *x = *state;
	struct ecw_entity *e[3], **lines;
	char detail[64];
	size_t n = 0;

	e[0] = write_row(x, WINDOW_S + 1800, 0, "", 1);
	e[2] = write_row(x, WINDOW_S + 60, 0, "", 2);
	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "2 rows, 2 lines, 2 deleted");
	e[1] = write_row(x, WINDOW_S + 900, 5, "late", 3);
	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "1 rows, 3 lines, 1 deleted");
	lines = blob_lines(x, NAME, &n, NULL);
	assert_int_equal(n, 3);
	for (int i = 0; i < 3; i++)
		mv_assert_same_entity(e[i], lines[i], "merged in its place");
	free_all(lines, n);
	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "0 rows, 0 lines, 0 deleted");
	for (int i = 0; i < 3; i++) {
		assert_null(get_row(x, ecw_entity_rk(e[i])));
		ecw_entity_free(e[i]);
	}
}

struct change {
	struct xf *x;
	struct ecw_entity *v2;
	bool fired;
};

static void change_at_commit(const char *point, void *payload)
{
	struct change *c = payload;

	if (strcmp(point, "export.committed") != 0 || c->fired)
		return;
	c->fired = true;
	ECW_ASSERT_OK(
	    ecw_table_write(NULL, c->x->t->client, c->x->t->table, c->v2, ECW_WRITE_INSERT_OR_REPLACE, NULL));
}

/* A row changed between the commit and the delete is kept (the blob holds
 * its older version), and the next export replaces that line with the
 * newer version and deletes the row: nothing lost, nothing twice. */
static void test_job_export__row_changed_before_delete_is_kept(void **state)
{
	struct xf *x = *state;
	struct ecw_entity *a = write_row(x, WINDOW_S + 10, 0, "", 1),
	                  *b = write_row(x, WINDOW_S + 20, 0, "", 1);
	struct change c = {.x = x, .v2 = mbx_every_type(APP, ecw_entity_rk(b), 9)};
	struct ecw_entity **lines, *left;
	char detail[64];
	size_t n = 0;

	ecw_crash_point_hook(change_at_commit, &c);
	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	ecw_crash_point_hook(NULL, NULL);
	assert_true(c.fired);
	assert_string_equal(detail, "2 rows, 2 lines, 1 deleted");
	left = get_row(x, ecw_entity_rk(b));
	mv_assert_same_entity(c.v2, left, "the row changed after the commit, kept");
	lines = blob_lines(x, NAME, &n, NULL);
	assert_int_equal(n, 2);
	mv_assert_same_entity(b, lines[0], "the version committed");
	free_all(lines, n);

	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "1 rows, 2 lines, 1 deleted");
	lines = blob_lines(x, NAME, &n, NULL);
	assert_int_equal(n, 2);
	mv_assert_same_entity(c.v2, lines[0], "the newer version, in place of the older");
	mv_assert_same_entity(a, lines[1], "the other row");
	free_all(lines, n);
	assert_null(get_row(x, ecw_entity_rk(a)));
	assert_null(get_row(x, ecw_entity_rk(b)));
	ecw_entity_free(left);
	ecw_entity_free(a);
	ecw_entity_free(b);
	ecw_entity_free(c.v2);
}

/* A window larger than a block (4 MiB) and than a ranged read: 90 rows of
 * about 60 KB, so that blocks are cut and lines cross reads, merged with a
 * late row and deleted in a second pass. */
static void test_job_export__window_over_several_blocks(void **state)
{
	enum { N = 90 };
	struct xf *x = *state;
	struct ecw_entity *e[N + 1], **lines;
	struct ecw_blob_info *info = NULL;
	char detail[64], *big = malloc(30000);
	size_t n = 0;

	assert_non_null(big);
	for (int i = 0; i < N + 1; i++) {
		char rk[64];
		memset(big, 'a' + i % 26, 29999);
		big[29999] = '\0';
		row_key(rk, WINDOW_S + 3599 - i * 30, 0, "");
		e[i] = mbx_every_type(APP, rk, i);
		/* Two bytes a character: a property holds 32 K of UTF-16. */
		ECW_ASSERT_OK(ecw_entity_set_string(e[i], "Big", big, 29999));
		ECW_ASSERT_OK(ecw_entity_set_string(e[i], "Big2", big, 29999));
		if (i < N)
			ECW_ASSERT_OK(
			    ecw_table_write(NULL, x->t->client, x->t->table, e[i], ECW_WRITE_INSERT, NULL));
	}
	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "90 rows, 90 lines, 90 deleted");
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table, e[N], ECW_WRITE_INSERT, NULL));
	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "1 rows, 91 lines, 1 deleted");
	lines = blob_lines(x, NAME, &n, &info);
	ITEST_CHECK(info->content_length > (long long)(5u << 20), "the blob is %lld bytes",
	            info->content_length);
	assert_int_equal(n, N + 1);
	for (int i = 0; i < N + 1; i++) {
		mv_assert_same_entity(e[i], lines[i], "a line of a large window");
		ecw_entity_free(e[i]);
	}
	free_all(lines, n);
	ecw_blob_info_free(info);
	free(big);
}

/* An empty window writes no blob; a blob in the export's place that no
 * export wrote is never merged over: a permanent error naming it, and the
 * rows stay. */
static void test_job_export__empty_window_and_foreign_blob(void **state)
{
	struct xf *x = *state;
	struct ecw_blob_info *info = NULL;
	struct ecw_entity *e, *left;
	char detail[64];

	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "0 rows, 0 lines, 0 deleted");
	assert_int_equal(ecw_blob_props(&info, x->t->client, x->container, NAME), ECW_EBLOBNOTFOUND);
	ecw_error_clear();

	e = write_row(x, WINDOW_S, 0, "", 1);
	ECW_ASSERT_OK(ecw_blob_put(NULL, x->t->client, x->container, NAME, "a person's notes\n", 17, NULL));
	assert_int_equal(run(x, APP, WINDOW, detail), ECW_EINVALID);
	ITEST_CHECK(strstr(itest_last_error(), "is no export"), "error: %s", itest_last_error());
	left = get_row(x, ecw_entity_rk(e));
	mv_assert_same_entity(e, left, "a row the foreign blob's export did not take");
	ecw_entity_free(left);
	ecw_entity_free(e);
}

/* compress: gzip: one gzip stream across blocks (rows of random text, so
 * that it takes more than one 4 MiB block), read back across ranges when a
 * late row is merged in; content type application/gzip, ecw_format
 * jsonl+gzip; the rows deleted as without compression. */
static void test_job_export__gzip_across_blocks_and_ranges(void **state)
{
	enum { N = 120 };
	struct xf *x = *state;
	struct ecw_entity *e[N + 1], **lines;
	struct ecw_blob_info *info = NULL;
	char detail[64], *text = malloc(30000);
	uint64_t seed = 36;
	size_t n = 0;

	assert_non_null(text);
	for (int i = 0; i < N + 1; i++) {
		char rk[64];
		row_key(rk, WINDOW_S + 3599 - i * 29, 0, "");
		e[i] = mbx_every_type(APP, rk, i);
		for (int prop = 0; prop < 2; prop++) {
			for (int k = 0; k < 29999;
			     k++) { /* printable, incompressible: xorshift's high bits */
				seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
				text[k] = (char)(' ' + (seed >> 40) % 95);
			}
			ECW_ASSERT_OK(ecw_entity_set_string(e[i], prop ? "Noise2" : "Noise", text, 29999));
		}
		if (i != N / 2)
			ECW_ASSERT_OK(
			    ecw_table_write(NULL, x->t->client, x->t->table, e[i], ECW_WRITE_INSERT, NULL));
	}
	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "120 rows, 120 lines, 120 deleted");
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table, e[N / 2], ECW_WRITE_INSERT, NULL));
	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "1 rows, 121 lines, 1 deleted");
	lines = blob_lines(x, NAME ".gz", &n, &info);
	ITEST_CHECK(info->content_length > (long long)(9u << 19), "the gzip blob is %lld bytes: one block?",
	            info->content_length);
	assert_string_equal(info->content_type, "application/gzip");
	assert_string_equal(ecw_blob_info_meta(info, "ecw_format"), "jsonl+gzip");
	assert_string_equal(ecw_blob_info_meta(info, "ecw_count"), "121");
	assert_int_equal(n, N + 1);
	for (int i = 0; i < N + 1; i++) {
		mv_assert_same_entity(e[i], lines[i], "a line of the gzip export");
		assert_null(get_row(x, ecw_entity_rk(e[i])));
		ecw_entity_free(e[i]);
	}
	free_all(lines, n);
	ecw_blob_info_free(info);
	free(text);
}

/* on_attempt of x->client: counts its table queries. */
static void count_queries(void *payload, const char *op, int status, int attempt)
{
	struct xf *x = payload;

	(void)status;
	(void)attempt;
	if (strcmp(op, "table.query") == 0)
		x->queries++;
}

/* Six rows exported and deleted, then three late rows, each between two of
 * their lines (three spans of row lines in the merge): the second export
 * merges them in their places and deletes exactly them, rows with their
 * lines' ETags. Returns the table queries of the second export. */
static int late_rows_between_lines(struct xf *x)
{
	struct ecw_client_options o = ITEST_OPTIONS;
	struct ecw_entity *e[9], **lines;
	char detail[64];
	size_t n = 0;

	o.on_attempt = count_queries;
	o.on_attempt_payload = x;
	itest_client_for(&x->acct, &x->client, getenv("ECW_TEST_CONNECTION_STRING"), &o);
	/* e[] in the blob's order: newest first (inverted ticks). */
	for (int i = 0; i < 9; i += 3) {
		e[i] = write_row(x, WINDOW_S + 3000 - 300 * i, 0, "", 1);
		e[i + 2] = write_row(x, WINDOW_S + 3000 - 300 * i - 200, 0, "", 1);
	}
	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "6 rows, 6 lines, 6 deleted");
	for (int i = 1; i < 9; i += 3)
		e[i] = write_row(x, WINDOW_S + 3000 - 300 * (i - 1) - 100, 0, "late", 2);
	x->queries = 0;
	ECW_ASSERT_OK(run(x, APP, WINDOW, detail));
	assert_string_equal(detail, "3 rows, 9 lines, 3 deleted");
	lines = blob_lines(x, NAME, &n, NULL);
	assert_int_equal(n, 9);
	for (int i = 0; i < 9; i++) {
		mv_assert_same_entity(e[i], lines[i], "the old lines and the late rows in key order");
		assert_null(get_row(x, ecw_entity_rk(e[i])));
		ecw_entity_free(e[i]);
	}
	free_all(lines, n);
	return x->queries;
}

/* The delete pass reads only the committed blob: the merge's query is the
 * export's only one (a second, of keys and ETags, cost a fifth of its CPU
 * in the bench). */
static void test_job_export__delete_pass_reads_the_table_once(void **state)
{
	assert_int_equal(late_rows_between_lines(*state), 1);
}

/* With more spans than the merge keeps, the delete pass queries the
 * window's keys and ETags instead, and deletes the same rows. */
static void test_job_export__too_many_spans_query_again(void **state)
{
	setenv("ECW_TEST_EXPORT_SPANS_MAX", "2", 1);
	assert_int_equal(late_rows_between_lines(*state), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_export__window_exported_and_deleted, xf_setup,
	                                    xf_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export__late_rows_merged, xf_setup, xf_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export__row_changed_before_delete_is_kept, xf_setup,
	                                    xf_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export__window_over_several_blocks, xf_setup,
	                                    xf_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export__empty_window_and_foreign_blob, xf_setup,
	                                    xf_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export__gzip_across_blocks_and_ranges, xf_setup_gzip,
	                                    xf_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export__delete_pass_reads_the_table_once, xf_setup,
	                                    xf_teardown),
	    cmocka_unit_test_setup_teardown(test_job_export__too_many_spans_query_again, xf_setup,
	                                    xf_teardown),
	};
	return cmocka_run_group_tests_name("job_export", tests, NULL, NULL);
}
