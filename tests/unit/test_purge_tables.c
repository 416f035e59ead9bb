/* SPDX-License-Identifier: MIT */
/* test_purge_tables.c - the purge-tables job type (jobs/purge_tables.c): the
 * name_date pattern (exact matches only, valid dates only), the expiry rule at
 * its boundary, the job's settings and their errors at line:col, and a run
 * against the fake transport with the wall clock fixed (support.c wraps
 * ecw_clock_wall_ms): which tables it lists, which it deletes, and 404 as success. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_config.h"
#include "ecw_job.h"
#include "jobs_private.h"

#define DAY_MS INT64_C(86400000)
#define T20201011 INT64_C(1602374400000) /* 2020-10-11T00:00:00Z */

static struct ecw_name_date *compile_ok(const char *pattern, const char *prefix)
{
	struct ecw_name_date *p = NULL;

	if (ecw_purge_tables_name_date_compile(&p, pattern, prefix) != 0)
		fail_msg("'%s' did not compile: %s", pattern, ecw_error_last()->message);
	return p;
}

static void test_purge_tables__pattern_matches_exactly(void **state)
{
	static const char *const decoys[] = {
	    "LoginsArchive",  "Logins2020",      "Logins20201301",  "Logins20201011x",
	    "logins20201011", "LOGINS20201011",  "Logins20200230",  "Logins20210229",
	    "Logins00001011", "Logins2020101a",  "Logins202010110", "Logins20201000",
	    "Logins20201032", "XLogins20201011", "Logins",          NULL};
	struct ecw_name_date *p = compile_ok("Logins{yyyyMMdd}", "Logins");
	int64_t start = 0, span = 0;

	(void)state;
	assert_true(ecw_purge_tables_name_date_match(&start, &span, p, "Logins20201011"));
	assert_int_equal(start, T20201011);
	assert_int_equal(span, DAY_MS);
	assert_true(ecw_purge_tables_name_date_match(&start, &span, p, "Logins20200229")); /* a leap day */
	assert_int_equal(start, INT64_C(1582934400000));
	for (int i = 0; decoys[i]; i++)
		if (ecw_purge_tables_name_date_match(&start, &span, p, decoys[i]))
			fail_msg("'%s' matched Logins{yyyyMMdd}", decoys[i]);
	ecw_purge_tables_name_date_free(p);

	/* Hours, another token order, literal text after the date. */
	p = compile_ok("Logs{ddMMyyyyHH}Eu", "Logs");
	assert_true(ecw_purge_tables_name_date_match(&start, &span, p, "Logs1110202023Eu"));
	assert_int_equal(start, T20201011 + 23 * 3600000);
	assert_int_equal(span, 3600000);
	assert_false(ecw_purge_tables_name_date_match(&start, &span, p, "Logs1110202024Eu"));
	assert_false(ecw_purge_tables_name_date_match(&start, &span, p, "Logs1110202023EU"));
	assert_false(ecw_purge_tables_name_date_match(&start, &span, p, "Logs1110202023"));
	ecw_purge_tables_name_date_free(p);
}

static void test_purge_tables__pattern_errors(void **state)
{
	static const struct {
		const char *pattern, *prefix, *needle;
	} bad[] = {
	    {"Logins", "Logins", "one {...}"},
	    {"Logins{yyyyMMdd", "Logins", "one {...}"},
	    {"Logins{yyyy}{MMdd}", "Logins", "one {...}"},
	    {"Logins{yyyyMM}", "Logins", "yyyy, MM and dd"},
	    {"Logins{yyyyMMddyyyy}", "Logins", "once each"},
	    {"Logins{yyyy-MM-dd}", "Logins", "once each"},
	    {"Logins{yyyyMMddmm}", "Logins", "once each"},
	    {"Other{yyyyMMdd}", "Logins", "prefix 'Logins'"},
	    {"Log{yyyyMMdd}ins", "Logins", "prefix 'Logins'"},
	    {"Logins_{yyyyMMdd}", "Logins", "letters and digits"},
	    {"Logins{yyyyMMdd}AbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghij", "Logins", "3-63"},
	};
	struct ecw_name_date *p = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (ecw_purge_tables_name_date_compile(&p, bad[i].pattern, bad[i].prefix) != ECW_EINVALID)
			fail_msg("'%s' compiled", bad[i].pattern);
		assert_null(p);
		if (!str_contains(ecw_error_last()->message, bad[i].needle))
			fail_msg("'%s': error '%s' lacks '%s'", bad[i].pattern, ecw_error_last()->message,
			         bad[i].needle);
	}
}

/* A day's table goes once the whole day is older than keep. */
static void test_purge_tables__expiry_boundary(void **state)
{
	int64_t keep = 60 * DAY_MS, aug11 = T20201011 - 61 * DAY_MS, aug12 = aug11 + DAY_MS;

	(void)state;
	/* now - keep = 2020-08-12T00:00: the day 08-11 ended exactly then. */
	assert_true(ecw_purge_tables_expired(aug11, DAY_MS, T20201011, keep));
	assert_false(ecw_purge_tables_expired(aug11, DAY_MS, T20201011 - 1, keep));
	assert_false(ecw_purge_tables_expired(aug12, DAY_MS, T20201011, keep));
	assert_true(ecw_purge_tables_expired(aug12, DAY_MS, T20201011 + DAY_MS, keep));
	/* An hour's table, an hour at a time. */
	assert_true(ecw_purge_tables_expired(T20201011 - 3600000, 3600000, T20201011 + 3600000, 3600000));
	assert_false(ecw_purge_tables_expired(T20201011 - 3600000, 3600000, T20201011 + 3599999, 3600000));
}

/* ---- settings -------------------------------------------------------------- */

static struct ecw_config *parse(const char *job_yaml, struct ecw_node_errors *errs)
{
	char text[1024];
	struct ecw_config *cfg = NULL;

	snprintf(text, sizeof(text), "jobs:\n  purge-logins:\n%s", job_yaml);
	ecw_node_errors_init(errs);
	(void)!ecw_config_parse(&cfg, text, strlen(text), "t.yaml", errs);
	return cfg;
}

static void one_error(const char *job_yaml, const char *pos, const char *needle)
{
	struct ecw_node_errors errs;
	struct ecw_config *cfg = parse(job_yaml, &errs);
	char want[64];

	snprintf(want, sizeof(want), "t.yaml:%s: ", pos);
	if (cfg || errs.n != 1 || !str_starts(errs.lines[0], want) || !str_contains(errs.lines[0], needle)) {
		for (size_t i = 0; i < errs.n; i++)
			print_message("  error: %s\n", errs.lines[i]);
		fail_msg("for\n%s expected one error at %s containing '%s'", job_yaml, pos, needle);
	}
	ecw_node_errors_dispose(&errs);
}

static void test_purge_tables__config_errors(void **state)
{
	(void)state;
	one_error("    type: purge-tables\n    name_date: \"Logins{yyyyMMdd}\"\n    keep: 60d\n", "3:5",
	          "prefix");
	one_error(
	    "    type: purge-tables\n    prefix: Log_ins\n    name_date: \"Log_ins{yyyyMMdd}\"\n    keep: 60d\n",
	    "4:13", "prefix: the start of a table name");
	one_error(
	    "    type: purge-tables\n    prefix: Logins\n    name_date: \"Other{yyyyMMdd}\"\n    keep: 60d\n",
	    "5:16", "must start with the prefix 'Logins'");
	one_error(
	    "    type: purge-tables\n    prefix: Logins\n    name_date: \"Logins{yyyyMM}\"\n    keep: 60d\n",
	    "5:16", "yyyy, MM and dd");
	one_error(
	    "    type: purge-tables\n    prefix: Logins\n    name_date: \"Logins{yyyyMMdd}\"\n    keep: 60 days\n",
	    "6:11", "keep: not a duration");
	one_error(
	    "    type: purge-tables\n    prefix: Logins\n    name_date: \"Logins{yyyyMMdd}\"\n    keep: 59m\n",
	    "6:11", "keep: too short");
	one_error("    type: purge-tables\n    prefix: Logins\n    name_date: \"Logins{yyyyMMdd}\"\n", "3:5",
	          "keep");
	one_error(
	    "    type: purge-tables\n    prefix: Logins\n    name_date: \"Logins{yyyyMMdd}\"\n    keep: 8w\n"
	    "    table: Logins\n",
	    "7:5", "table");

	struct ecw_node_errors errs;
	struct ecw_config *cfg = parse(
	    "    type: purge-tables\n    prefix: Logins\n    name_date: \"Logins{yyyyMMdd}\"\n    keep: 8w\n",
	    &errs);
	assert_non_null(cfg);
	assert_int_equal(errs.n, 0);
	const struct ecw_job_def *def = ecw_config_job(cfg, "purge-logins");
	assert_non_null(def);
	assert_true(def->type->keyless);
	assert_null(def->type->message_fields);
	ecw_config_free(cfg);
	ecw_node_errors_dispose(&errs);
}

/* ---- a run against the fake transport ------------------------------------------ */

static void test_purge_tables__run_deletes_exactly_the_expired(void **state)
{
	struct client_fixture *fx = NULL;
	struct ecw_node_errors errs;
	struct ecw_config *cfg = parse(
	    "    type: purge-tables\n    prefix: Logins\n    name_date: \"Logins{yyyyMMdd}\"\n    keep: 60d\n",
	    &errs);
	struct ecw_job_ctx ctx;
	const struct ecw_job_def *def;

	(void)state;
	assert_non_null(cfg);
	def = ecw_config_job(cfg, "purge-logins");
	client_fixture_setup(&fx, "UseDevelopmentStorage=true", NULL);
	/* Two pages of names (the second after a continuation), then deletes. */
	fake_respond(&fx->fake, 200, "x-ms-continuation-NextTableName: Logins20200812\n",
	             "{\"value\":[{\"TableName\":\"Logins20200810\"},{\"TableName\":\"Logins20200811\"},"
	             "{\"TableName\":\"Logins2020081\"},{\"TableName\":\"LoginsArchive\"}]}");
	fake_respond(&fx->fake, 200, NULL,
	             "{\"value\":[{\"TableName\":\"Logins20200812\"},{\"TableName\":\"Logins20201011\"},"
	             "{\"TableName\":\"Logins20200231\"},{\"TableName\":\"Logins20200801x\"}]}");
	fake_respond(&fx->fake, 204, NULL, NULL);
	fake_respond(&fx->fake, 404, "x-ms-error-code: ResourceNotFound\n",
	             "{\"odata.error\":{\"code\":\"ResourceNotFound\",\"message\":{\"value\":\"gone\"}}}");
	memset(&ctx, 0, sizeof(ctx));
	ctx.client = fx->c;
	ctx.job = "purge-logins";
	ctx.message_id = "m1";
	wall_fake_set(T20201011 + 12 * 3600000); /* 2020-10-11T12:00Z: now - 60d = 08-12T12:00 */
	int err = def->type->run(def->settings, &ctx);
	wall_real();
	if (err != 0)
		fail_msg("run: %s", ecw_error_last()->message);
	assert_int_equal(fx->fake.nreqs, 4);
	assert_string_equal(fx->fake.reqs[0].method, "GET");
	assert_str(fx->fake.reqs[0].path, "/devstoreaccount1/Tables");
	assert_true(url_has_param(fx->fake.reqs[0].url,
	                          "%24filter=TableName%20ge%20'Logins'%20and%20TableName%20lt%20'Logint'"));
	assert_true(url_has_param(fx->fake.reqs[1].url, "NextTableName=Logins20200812"));
	assert_true(fx->fake.reqs[0].auth_ok && fx->fake.reqs[1].auth_ok);
	/* 08-10 and 08-11 ended by 08-12T12:00; 08-12 has not: kept with 10-11. */
	assert_string_equal(fx->fake.reqs[2].method, "DELETE");
	assert_str(fx->fake.reqs[2].path, "/devstoreaccount1/Tables('Logins20200810')");
	assert_string_equal(fx->fake.reqs[3].method, "DELETE");
	assert_str(fx->fake.reqs[3].path, "/devstoreaccount1/Tables('Logins20200811')");
	assert_string_equal(ctx.outcome_detail, "deleted 1, kept 2"); /* the 404 was gone already */
	client_fixture_teardown(fx);
	ecw_config_free(cfg);
	ecw_node_errors_dispose(&errs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_purge_tables__pattern_matches_exactly),
	    cmocka_unit_test(test_purge_tables__pattern_errors),
	    cmocka_unit_test(test_purge_tables__expiry_boundary),
	    cmocka_unit_test(test_purge_tables__config_errors),
	    cmocka_unit_test(test_purge_tables__run_deletes_exactly_the_expired),
	};
	return cmocka_run_group_tests_name("purge_tables", tests, NULL, NULL);
}
