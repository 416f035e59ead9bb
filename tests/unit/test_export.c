/* SPDX-License-Identifier: MIT */
/* test_export.c - the export job type (jobs/export.c) without a service: the
 * order of keys the merge relies on (the table's: UTF-16 code units, not
 * bytes), and the configuration's rules at their line and column, through
 * the real registry; reading a PartitionKey back into its template's parts
 * and the audit's plan (what it cannot read back is its limit). Runs against Azurite are in
 * tests/integration/test_job_export.c. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_config.h"
#include "ecw_job.h"
#include "export_private.h"
#include "jobs_private.h"

static void test_export__key_order_is_the_tables(void **state)
{
	/* Ascending in UTF-16 code units: U+D7FF, then a character beyond
	 * U+FFFF (its surrogate pair starts with D8..DB), then U+E000 and
	 * U+FFFD; strcmp would put the 4-byte one last. */
	static const char *const keys[] = {"",
	                                   "0",
	                                   "00",
	                                   "A",
	                                   "a",
	                                   "a\x7f",
	                                   "\xc3\xa9",         /* U+00E9 */
	                                   "\xed\x9f\xbf",     /* U+D7FF */
	                                   "\xf0\x9f\x98\x80", /* U+1F600 */
	                                   "\xf0\x9f\x98\x81",
	                                   "\xf4\x8f\xbf\xbf", /* U+10FFFF */
	                                   "\xee\x80\x80",     /* U+E000 */
	                                   "\xef\xbf\xbd",     /* U+FFFD */
	                                   "\xef\xbf\xbdx",
	                                   NULL};

	(void)state;
	for (int i = 0; keys[i]; i++)
		for (int j = 0; keys[j]; j++) {
			int c = ecw_export_key_cmp(keys[i], keys[j]);
			if ((i < j && c >= 0) || (i == j && c != 0) || (i > j && c <= 0))
				fail_msg("key %d against key %d: %d", i, j, c);
		}
	/* Differing after a shared multibyte prefix. */
	assert_true(ecw_export_key_cmp("x\xc3\xa9\xf0\x9f\x98\x80", "x\xc3\xa9\xee\x80\x80") < 0);
}

/* A line's head: read without parsing the rest in the layout the export
 * writes, escapes and surrogate pairs decoded; any other layout parsed
 * whole (no ETag: ""); a line that is no entity refused. */
static void test_export__line_head(void **state)
{
	struct ecw_buf pk, rk, etag;

	(void)state;
	ecw_buf_init(&pk, 0);
	ecw_buf_init(&rk, 0);
	ecw_buf_init(&etag, 0);
	static const char fast[] =
	    "{\"PartitionKey\":\"a\\\"b\\\\c\\/\\u00e9\\ud83d\\ude00\",\"RowKey\":\"\\t x\","
	    "\"odata.etag\":\"W/\\\"datetime'2026-11-29T21%3A00Z'\\\"\",\"N\":1,\"Oops\":[}";
	/* The rest is never read: even a broken tail passes. */
	assert_int_equal(ecw_export_line_head(&pk, &rk, &etag, fast, strlen(fast)), 0);
	assert_string_equal(ecw_buf_cstr(&pk), "a\"b\\c/\xc3\xa9\xf0\x9f\x98\x80");
	assert_string_equal(ecw_buf_cstr(&rk), "\t x");
	assert_string_equal(ecw_buf_cstr(&etag), "W/\"datetime'2026-11-29T21%3A00Z'\"");

	static const char other[] = "{\"RowKey\":\"r\",\"N\":1,\"PartitionKey\":\"p\"}";
	assert_int_equal(ecw_export_line_head(&pk, &rk, &etag, other, strlen(other)), 0);
	assert_string_equal(ecw_buf_cstr(&pk), "p");
	assert_string_equal(ecw_buf_cstr(&rk), "r");
	assert_string_equal(ecw_buf_cstr(&etag), "");

	static const char *const bad[] = {"{\"PartitionKey\":\"p\"}", "not json",
	                                  "{\"PartitionKey\":\"p\",\"RowKey\":1}", NULL};
	for (int i = 0; bad[i]; i++)
		if (ecw_export_line_head(&pk, &rk, &etag, bad[i], strlen(bad[i])) == 0)
			fail_msg("line %d was read as an entity: %s", i, bad[i]);
	ecw_buf_dispose(&pk);
	ecw_buf_dispose(&rk);
	ecw_buf_dispose(&etag);
}

/* ---- configuration ---------------------------------------------------------------------------- */

#define HEAD "storage: {connection_string: \"UseDevelopmentStorage=true\"}\njobs:\n  j:\n    type: export\n"

static struct ecw_config *config_ok(const char *text)
{
	return config_parse_ok(text, "x.yaml");
}

static void config_bad(const char *text, const char *pos, const char *needle)
{
	config_parse_bad(text, "x.yaml", pos, needle);
}

static void test_export__config(void **state)
{
	(void)state;
	struct ecw_config *cfg = config_ok(
	    HEAD "    source: AppLogs\n    from_partition: \"{app}_{window:yyyyMMddHH}\"\n    window: 1h\n"
	         "    to_blob: {container: logs, name: \"{app}/{window:yyyy/MM/dd/HH}00/000001.log\"}\n"
	         "    delete_after: true\n");
	const struct ecw_job_def *j = ecw_config_job(cfg, "j");
	assert_string_equal(j->type->name, "export");
	assert_true(j->type->keyless);
	assert_int_equal(j->type->window_ms(j->settings), 3600000);
	assert_string_equal(j->type->source_table(j->settings), "AppLogs");
	const char *const *f = j->type->message_fields(j->settings);
	assert_string_equal(f[0], "app"); /* window is the window's, not the message's */
	assert_null(f[1]);
	ecw_config_free(cfg);

	/* A day's RowKey range of one partition per app and host. */
	cfg = config_ok(
	    HEAD
	    "    source: AppLogs\n    from_partition: \"{app}-{host}\"\n    row_keys: inverted_ticks\n"
	    "    window: 1d\n    to_blob: {container: logs, name: \"{host}/{app}/{window:yyyy-MM-dd}.log\"}\n");
	f = ecw_config_job(cfg, "j")->type->message_fields(ecw_config_job(cfg, "j")->settings);
	assert_string_equal(f[0], "app");
	assert_string_equal(f[1], "host");
	assert_null(f[2]);
	ecw_config_free(cfg);
}

static void test_export__config_refusals(void **state)
{
	(void)state;
	/* Two windows in one blob. */
	config_bad(HEAD
	           "    source: Logs\n    from_partition: \"{app}\"\n    row_keys: unix\n    window: 1h\n"
	           "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMdd}.log\"}\n",
	           "9:14", "two windows would share the blob");
	/* Two partitions in one blob. */
	config_bad(
	    HEAD
	    "    source: Logs\n    from_partition: \"{app}-{host}\"\n    row_keys: unix\n    window: 1d\n"
	    "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMdd}.log\"}\n",
	    "9:14", "{host} is missing");
	/* The partition is the window with row_keys: any. */
	config_bad(HEAD "    source: Logs\n    from_partition: \"{app}\"\n    window: 1d\n"
	                "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMdd}.log\"}\n",
	           "6:21", "the partition is the window");
	/* No entity to name. */
	config_bad(HEAD "    source: Logs\n    from_partition: \"{RowKey}\"\n    window: 1d\n"
	                "    to_blob: {container: logs, name: \"{RowKey}/{window:yyyyMMdd}.log\"}\n",
	           "6:21", "names no entity");
	/* An invalid blob name, a bad container, row_keys, window, compress. */
	config_bad(HEAD "    source: Logs\n    from_partition: \"{app}_{window:yyyyMMdd}\"\n    window: 1d\n"
	                "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMdd}/\"}\n",
	           "8:14", "no valid blob name");
	config_bad(HEAD "    source: Logs\n    from_partition: \"{app}_{window:yyyyMMdd}\"\n    window: 1d\n"
	                "    to_blob: {container: Logs, name: \"{app}/{window:yyyyMMdd}\"}\n",
	           "8:26", "invalid container name");
	config_bad(HEAD
	           "    source: Logs\n    from_partition: \"{app}\"\n    row_keys: ticks\n    window: 1d\n"
	           "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMdd}\"}\n",
	           "7:15", "row_keys: any");
	config_bad(HEAD "    source: Logs\n    from_partition: \"{app}_{window:yyyyMMdd}\"\n    window: 2h\n"
	                "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMdd}\"}\n",
	           "7:13", "window: 1h, 1d or 1w");
	config_bad(HEAD
	           "    source: Logs\n    from_partition: \"{app}_{window:yyyyMMdd}\"\n    window: 1d\n"
	           "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMdd}\"}\n    compress: zip\n",
	           "9:15", "compress: none or gzip");
	/* gzip and the name's .gz go together. */
	config_bad(
	    HEAD
	    "    source: Logs\n    from_partition: \"{app}_{window:yyyyMMdd}\"\n    window: 1d\n"
	    "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMdd}.log\"}\n    compress: gzip\n",
	    "8:14", "ends in .gz");
	config_bad(HEAD "    source: Logs\n    from_partition: \"{app}_{window:yyyyMMdd}\"\n    window: 1d\n"
	                "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMdd}.log.gz\"}\n",
	           "8:14", "needs compress: gzip");
	config_bad(HEAD "    source: Logs\n    from_partition: \"{app}_{window:yyyyMMdd}\"\n    window: 1d\n",
	           "4:5", "to_blob");
}

/* Splits s by text, 1 when one split exists (out: each part's text joined
 * by '|'), else the count. */
static int split(char *out, size_t cap, const char *tmpl, const char *s)
{
	struct ecw_template *t = NULL;
	size_t spans[32];
	int rc;

	assert_int_equal(ecw_template_compile(&t, tmpl, "t"), 0);
	assert_true(ecw_template_nparts(t) <= 16);
	rc = ecw_template_split(spans, t, s);
	out[0] = '\0';
	for (size_t i = 0, at = 0; rc == 1 && i < ecw_template_nparts(t); i++)
		at += (size_t)snprintf(out + at, cap - at, "%s%.*s", i ? "|" : "", (int)spans[2 * i + 1],
		                       s + spans[2 * i]);
	ecw_template_free(t);
	return rc;
}

static void test_export__template_split(void **state)
{
	char out[512], hostile[1100];

	(void)state;
	assert_int_equal(split(out, sizeof(out), "log_{app}", "log_w&b 'c%"), 1);
	assert_string_equal(out, "log_|w&b 'c%");
	assert_int_equal(split(out, sizeof(out), "log_{app}", "LOG_x"), 0);
	assert_int_equal(split(out, sizeof(out), "{app}_{window:yyyyMMddHH}", "a_b_2020101112"), 1);
	assert_string_equal(out, "a_b|_|2020101112");
	assert_int_equal(split(out, sizeof(out), "{app}_{window:yyyyMMddHH}", "a_b_20201011"), 0);
	assert_int_equal(split(out, sizeof(out), "{app}_{window:yyyy/MM/dd}", "x_2020/1a/11"), 0);
	/* Two readings: which field holds the '_' is unknown. */
	assert_int_equal(split(out, sizeof(out), "{app}_{host}", "a_b_c"), 2);
	assert_int_equal(split(out, sizeof(out), "{app}{host}", "ab"), 2);
	assert_int_equal(split(out, sizeof(out), "{app}-{x:unix}", "a-1602417600"), 1);
	assert_int_equal(split(out, sizeof(out), "{h:hash4}{app}", "a62Fx"), 0);
	assert_int_equal(split(out, sizeof(out), "{h:hash4}{app}", "a62fx"), 1);
	assert_string_equal(out, "a62f|x");
	/* A key made to make the search long is taken as ambiguous, fast. */
	memset(hostile, '_', sizeof(hostile) - 1);
	hostile[sizeof(hostile) - 1] = '\0';
	assert_int_equal(split(out, sizeof(out), "{a}_{b}_{c}_{d}x", hostile), 2);
}

static void test_export__template_part_time(void **state)
{
	struct ecw_template *t = NULL;
	int64_t s;

	(void)state;
	assert_int_equal(ecw_template_compile(
	                     &t, "{app}_{window:yyyy/MM/dd/HH}{x:unix}{y:inverted_ticks}{z:date_int}", "t"),
	                 0);
	assert_int_equal(ecw_template_part_date_fields(t, 0), 0);
	assert_int_equal(ecw_template_part_date_fields(t, 2), 0xf);
	assert_int_equal(ecw_template_part_date_fields(t, 3), 0x3f);
	assert_int_equal(ecw_template_part_date_fields(t, 5), 0x7);
	assert_int_equal(ecw_template_part_time(&s, t, 2, "2020/10/11/12", 13), 0);
	assert_int_equal(s, 1602417600);
	assert_int_equal(ecw_template_part_time(&s, t, 2, "2020/02/30/12", 13), ECW_EINVALID);
	assert_int_equal(ecw_template_part_time(&s, t, 2, "2020/10/11/24", 13), ECW_EINVALID);
	assert_int_equal(ecw_template_part_time(&s, t, 3, "1602417600", 10), 0);
	assert_int_equal(s, 1602417600);
	/* 2020-10-11T12:00:00.5Z in inverted ticks: rounded down to the second. */
	assert_int_equal(ecw_template_part_time(&s, t, 4, "2517998831994999999", 19), 0);
	assert_int_equal(s, 1602417600);
	assert_int_equal(ecw_template_part_time(&s, t, 4, "9999999999999999999", 19), ECW_EINVALID);
	assert_int_equal(ecw_template_part_time(&s, t, 5, "20201011", 8), 0);
	assert_int_equal(s, 1602374400);
	assert_int_equal(ecw_template_part_time(&s, t, 0, "app", 3), ECW_EINVALID);
	ecw_error_clear();
	ecw_template_free(t);
}

/* What the audit cannot read back from a PartitionKey is its limit,
 * naming the placeholder; a job it can read has none. */
static void test_export__audit_plan(void **state)
{
	static const struct {
		const char *job, *limit;
	} cases[] = {
	    {"    from_partition: \"{app}\"\n    row_keys: unix\n    window: 1h\n"
	     "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMddHH}.log\"}\n",
	     ""},
	    {"    from_partition: \"{app}_{window:yyyyMMdd}\"\n    window: 1d\n"
	     "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMdd}.log\"}\n",
	     ""},
	    {"    from_partition: \"{app:0>6}\"\n    row_keys: unix\n    window: 1h\n"
	     "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMddHH}.log\"}\n",
	     "from_partition's {app:...} is padded or formatted"},
	    {"    from_partition: \"{app}\"\n    row_keys: unix\n    window: 1h\n"
	     "    to_blob: {container: logs, name: \"{host}/{app}/{window:yyyyMMddHH}.log\"}\n",
	     "to_blob.name uses {host}, which from_partition does not"},
	    {"    from_partition: \"{app}_{window:ddHH}\"\n    window: 1h\n"
	     "    to_blob: {container: logs, name: \"{app}/{window:yyyyMMddHH}.log\"}\n",
	     "with row_keys: any, from_partition gives no window start"},
	};
	char text[1024];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text), HEAD "    source: Logs\n%s", cases[i].job);
		struct ecw_config *cfg = config_ok(text);
		const struct ecw_export *x = ecw_config_job(cfg, "j")->settings;
		if (!cases[i].limit[0])
			assert_string_equal(x->audit_limit, "");
		else if (!strstr(x->audit_limit, cases[i].limit))
			fail_msg("case %zu: limit \"%s\", want \"%s\"", i, x->audit_limit, cases[i].limit);
		ecw_config_free(cfg);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_export__key_order_is_the_tables),
	    cmocka_unit_test(test_export__line_head),
	    cmocka_unit_test(test_export__config),
	    cmocka_unit_test(test_export__config_refusals),
	    cmocka_unit_test(test_export__template_split),
	    cmocka_unit_test(test_export__template_part_time),
	    cmocka_unit_test(test_export__audit_plan),
	};
	return cmocka_run_group_tests_name("export", tests, NULL, NULL);
}
