/* SPDX-License-Identifier: MIT */
/* test_rollup.c - the rollup job type (jobs/rollup.c) without a service:
 * window arithmetic (hours, days, weeks starting Monday across a year
 * boundary), the message's window_start and its alignment errors, the range
 * filter, aggregate values and EDM types, bad raw values, and configuration
 * errors at their line and column, through the real registry. */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_config.h"
#include "ecw_job.h"
#include "rollup_private.h"

/* ---- windows ---------------------------------------------------------------------------------------------
 */

static int64_t parse_ok(const char *text, int64_t window_ms)
{
	int64_t s = -1;
	int err = ecw_rollup_window_parse(&s, text, window_ms);

	if (err != 0)
		fail_msg("window_start \"%s\": %s", text, ecw_error_last()->message);
	return s;
}

static void parse_bad(const char *text, int64_t window_ms, const char *needle)
{
	int64_t s = 0;

	assert_int_equal(ecw_rollup_window_parse(&s, text, window_ms), ECW_EINVALID);
	if (!str_contains(ecw_error_last()->message, needle))
		fail_msg("window_start \"%s\": error \"%s\", want it to mention \"%s\"", text,
		         ecw_error_last()->message, needle);
}

static void rk_is(int64_t s, int64_t window_ms, const char *want)
{
	char rk[16];

	ecw_rollup_row_key(rk, s, window_ms);
	assert_string_equal(rk, want);
}

static void test_rollup__days(void **state)
{
	char iso[32];

	(void)state;
	/* 2020-10-11 00:00:00 UTC = 1602374400. */
	assert_int_equal(parse_ok("2020-10-11", ECW_ROLLUP_DAY_MS), 1602374400);
	assert_int_equal(parse_ok("2020-10-11T00:00Z", ECW_ROLLUP_DAY_MS), 1602374400);
	assert_int_equal(parse_ok("2020-10-11T00:00:00Z", ECW_ROLLUP_DAY_MS), 1602374400);
	rk_is(1602374400, ECW_ROLLUP_DAY_MS, "20201011");
	assert_int_equal(parse_ok("1970-01-01", ECW_ROLLUP_DAY_MS), 0);
	rk_is(0, ECW_ROLLUP_DAY_MS, "19700101");
	/* Leap days. */
	assert_int_equal(parse_ok("2024-02-29", ECW_ROLLUP_DAY_MS), 1709164800);
	rk_is(1709164800, ECW_ROLLUP_DAY_MS, "20240229");
	assert_int_equal(parse_ok("2000-02-29", ECW_ROLLUP_DAY_MS), 951782400);
	parse_bad("2023-02-29", ECW_ROLLUP_DAY_MS, "not a valid date");
	parse_bad("1900-02-29", ECW_ROLLUP_DAY_MS, "not a valid date");
	parse_bad("2020-04-31", ECW_ROLLUP_DAY_MS, "not a valid date");
	parse_bad("2020-13-01", ECW_ROLLUP_DAY_MS, "not a valid date");
	parse_bad("1969-12-31", ECW_ROLLUP_DAY_MS, "from 1970 on");
	ecw_rollup_iso(iso, 1709164800 + 13 * 3600 + 5 * 60 + 9);
	assert_string_equal(iso, "2024-02-29T13:05:09Z");
}

static void test_rollup__hours(void **state)
{
	(void)state;
	assert_int_equal(parse_ok("2020-10-11T05:00Z", ECW_ROLLUP_HOUR_MS), 1602374400 + 5 * 3600);
	assert_int_equal(parse_ok("2020-10-11T23:00:00Z", ECW_ROLLUP_HOUR_MS), 1602374400 + 23 * 3600);
	rk_is(1602374400 + 5 * 3600, ECW_ROLLUP_HOUR_MS, "2020101105");
	rk_is(1602374400 + 23 * 3600, ECW_ROLLUP_HOUR_MS, "2020101123");
	rk_is(1602374400, ECW_ROLLUP_HOUR_MS, "2020101100");
	parse_bad("2020-10-11T05:30Z", ECW_ROLLUP_HOUR_MS, "not on the hour");
	parse_bad("2020-10-11T05:00:01Z", ECW_ROLLUP_HOUR_MS, "not on the hour");
	parse_bad("2020-10-11", ECW_ROLLUP_HOUR_MS, "needs the hour");
	parse_bad("2020-10-11T24:00Z", ECW_ROLLUP_HOUR_MS, "not a valid date");
	/* A day window must start at midnight. */
	parse_bad("2020-10-11T05:00Z", ECW_ROLLUP_DAY_MS, "not midnight UTC");
}

static void test_rollup__weeks_start_monday(void **state)
{
	(void)state;
	/* 2020-12-28 is a Monday; its week runs into 2021. */
	int64_t s = parse_ok("2020-12-28", ECW_ROLLUP_WEEK_MS);
	assert_int_equal(s, 1609113600);
	rk_is(s, ECW_ROLLUP_WEEK_MS, "20201228");
	/* The next Monday, in the new year. */
	rk_is(s + ECW_ROLLUP_WEEK_MS / 1000, ECW_ROLLUP_WEEK_MS, "20210104");
	assert_int_equal(parse_ok("2021-01-04T00:00Z", ECW_ROLLUP_WEEK_MS), s + 7 * 86400);
	/* 2021-01-01 is a Friday, 2020-12-27 a Sunday, 1970-01-01 a Thursday. */
	parse_bad("2021-01-01", ECW_ROLLUP_WEEK_MS, "not a Monday");
	parse_bad("2020-12-27", ECW_ROLLUP_WEEK_MS, "not a Monday");
	parse_bad("1970-01-01", ECW_ROLLUP_WEEK_MS, "not a Monday");
	assert_int_equal(parse_ok("1970-01-05", ECW_ROLLUP_WEEK_MS), 4 * 86400);
	parse_bad("2020-12-28T01:00Z", ECW_ROLLUP_WEEK_MS, "not midnight UTC");
	/* Weeks of a leap year's end: 2024-12-30 is a Monday. */
	rk_is(parse_ok("2024-12-30", ECW_ROLLUP_WEEK_MS), ECW_ROLLUP_WEEK_MS, "20241230");
}

static void test_rollup__window_start_syntax(void **state)
{
	(void)state;
	const char *bad[] = {"",
	                     "2020-10-1",
	                     "2020/10/11",
	                     "20201011",
	                     "2020-10-11T05:00",
	                     "2020-10-11 05:00Z",
	                     "2020-10-11T5:00Z",
	                     "2020-10-11T05:00:00.000Z",
	                     "2020-10-11T05:00+01:00",
	                     "+020-10-11",
	                     "2020-10-11x",
	                     NULL};
	for (size_t i = 0; bad[i]; i++)
		parse_bad(bad[i], ECW_ROLLUP_DAY_MS, "is not YYYY-MM-DD");
	/* Beyond 10-digit Unix seconds: the RowKey range would not sort. */
	parse_bad("2286-11-20", ECW_ROLLUP_DAY_MS, "10-digit");
	assert_int_equal(parse_ok("2286-11-19", ECW_ROLLUP_DAY_MS), INT64_C(9999849600));
}

static void test_rollup__filter(void **state)
{
	struct ecw_buf b;

	(void)state;
	ecw_buf_init(&b, 0);
	assert_int_equal(ecw_rollup_filter(&b, "tank-7_raw", 1602374400, 1602460800), 0);
	assert_string_equal(
	    ecw_buf_cstr(&b),
	    "PartitionKey eq 'tank-7_raw' and RowKey ge '1602374400' and RowKey lt '1602460800'");
	ecw_buf_reset(&b);
	/* Small times keep ten digits, so string order is time order; a
	 * quote in a device name stays inside the literal. */
	assert_int_equal(ecw_rollup_filter(&b, "o'x", 0, 3600), 0);
	assert_string_equal(ecw_buf_cstr(&b),
	                    "PartitionKey eq 'o''x' and RowKey ge '0000000000' and RowKey lt '0000003600'");
	ecw_buf_dispose(&b);
}

/* ---- configuration
 * ----------------------------------------------------------------------------------------- */

#define HEAD "storage: {connection_string: \"UseDevelopmentStorage=true\"}\njobs:\n  j:\n"
#define JOB(agg)                                                                                             \
	HEAD "    type: rollup\n    source: Telemetry\n    from_partition: \"{device}_raw\"\n"               \
	     "    to_partition: \"{device}_daily\"\n    window: 1d\n    aggregate: " agg "\n"

static struct ecw_config *config_ok(const char *text)
{
	return config_parse_ok(text, "r.yaml");
}

static void config_bad(const char *text, const char *pos, const char *needle)
{
	config_parse_bad(text, "r.yaml", pos, needle);
}

static void test_rollup__config(void **state)
{
	(void)state;
	struct ecw_config *cfg = config_ok(JOB("{avgD: avg(depth), lo: min( depth ), n: count()}"));
	const struct ecw_job_def *j = ecw_config_job(cfg, "j");
	assert_string_equal(j->type->name, "rollup");
	assert_true(j->type->keyless);
	assert_int_equal(j->type->window_ms(j->settings), ECW_ROLLUP_DAY_MS);
	const char *const *f = j->type->message_fields(j->settings);
	assert_string_equal(f[0], "device");
	assert_null(f[1]);
	assert_string_equal(j->type->source_table(j->settings), "Telemetry");
	assert_string_equal(j->type->target_table(j->settings), "Telemetry"); /* to defaults to source */
	ecw_config_free(cfg);

	/* Another table, two fields, window_start in a template (not a
	 * message field a schedule must provide), 1w spelt as 7d. */
	cfg = config_ok(HEAD "    type: rollup\n    source: Telemetry\n    to: Rollups\n"
	                     "    from_partition: \"{site}-{device}\"\n"
	                     "    to_partition: \"{site}-{device}-{window_start}\"\n    window: 7d\n"
	                     "    aggregate: {s: sum(v)}\n");
	j = ecw_config_job(cfg, "j");
	assert_int_equal(j->type->window_ms(j->settings), ECW_ROLLUP_WEEK_MS);
	assert_string_equal(j->type->target_table(j->settings), "Rollups");
	f = j->type->message_fields(j->settings);
	assert_string_equal(f[0], "site");
	assert_string_equal(f[1], "device");
	assert_null(f[2]);
	ecw_config_free(cfg);
}

static void test_rollup__config_errors(void **state)
{
	(void)state;
	config_bad(JOB("{a: median(depth)}"), "9:20", "unknown function");
	config_bad(JOB("{a: avg()}"), "9:20", "avg() needs a property");
	config_bad(JOB("{a: count(depth)}"), "9:20", "count() takes no property");
	config_bad(JOB("{a: avg(depth}"), "9:20", "a function such as");
	config_bad(JOB("{a: avg(1depth)}"), "9:20", "not a property name");
	config_bad(JOB("{a: avg(RowKey)}"), "9:20", "not a property name");
	config_bad(JOB("{a: avg(Timestamp)}"), "9:20", "not a property name");
	config_bad(JOB("{1a: avg(depth)}"), "9:17", "cannot be a property");
	config_bad(JOB("{WindowStart: avg(depth)}"), "9:17", "WindowStart");
	config_bad(JOB("{}"), "9:16", "a map of property: function");
	config_bad(JOB("[avg(depth)]"), "9:16", "a map of property: function");
	config_bad(HEAD "    type: rollup\n    source: T1x\n    from_partition: \"{device}_raw\"\n"
	                "    to_partition: \"{device}_daily\"\n    window: 1d\n",
	           "4:5", "missing required key 'aggregate'");
#define WIN(w)                                                                                               \
	HEAD "    type: rollup\n    source: T1x\n    from_partition: \"{device}_raw\"\n"                     \
	     "    to_partition: \"{device}_daily\"\n    window: " w "\n    aggregate: {n: count()}\n"
	config_bad(WIN("2d"), "8:13", "window: 1h, 1d or 1w");
	config_bad(WIN("30m"), "8:13", "window: 1h, 1d or 1w");
	config_bad(WIN("daily"), "8:13", "window: 1h, 1d or 1w");
#undef WIN
#define PARTS(from, to)                                                                                      \
	HEAD "    type: rollup\n    source: T1x\n    from_partition: \"" from "\"\n"                         \
	     "    to_partition: \"" to "\"\n    window: 1h\n    aggregate: {n: count()}\n"
	config_bad(PARTS("{device}_raw", "daily"), "7:19", "to_partition: needs a message field");
	config_bad(PARTS("{site}_{device}", "{device}_daily"), "7:19", "{site} is missing");
	config_bad(PARTS("{device}", "{device}"), "7:19", "land among the raw rows");
	config_bad(PARTS("{RowKey}_raw", "{RowKey}_daily"), "6:21", "names no entity");
	config_bad(PARTS("{device_raw", "{device}_daily"), "6:21", "never closed");
	config_bad(PARTS("{Timestamp}_raw", "{Timestamp}_daily"), "6:21", "cannot be a message field");
#undef PARTS
	config_bad(HEAD "    type: rollup\n    source: T1x\n    from_partition: \"{device}_raw\"\n"
	                "    to_partition: \"{device}_daily\"\n    window: 1d\n    aggregate: {n: count()}\n"
	                "    extra: 1\n",
	           "10:5", "extra");
	config_bad(HEAD "    type: rollup\n    source: 9x\n    from_partition: \"{device}_raw\"\n"
	                "    to_partition: \"{device}_daily\"\n    window: 1d\n    aggregate: {n: count()}\n",
	           "5:13", "table name");
}

/* ---- aggregation
 * ------------------------------------------------------------------------------------------- */

struct fx {
	struct ecw_config *cfg;
	const void *settings;
	struct ecw_rollup_acc *acc;
};

static struct fx *fx_new(const char *agg)
{
	char text[1024];
	struct fx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	snprintf(text, sizeof(text), JOB("%s"), agg);
	x->cfg = config_ok(text);
	x->settings = ecw_config_job(x->cfg, "j")->settings;
	assert_int_equal(ecw_rollup_acc_new(&x->acc, x->settings), 0);
	return x;
}

static void fx_free(struct fx *x)
{
	ecw_rollup_acc_free(x->acc);
	ecw_config_free(x->cfg);
	free(x);
}

/* A raw row at second s; kind 'i' Int32, 'l' Int64, 'd' Double, 0 absent. */
static struct ecw_entity *row(int64_t s, char kind, double v)
{
	struct ecw_entity *e = NULL;
	char rk[16];

	snprintf(rk, sizeof(rk), "%010lld", (long long)s);
	assert_int_equal(ecw_entity_new(&e, "tank-7_raw", rk), 0);
	if (kind == 'i')
		assert_int_equal(ecw_entity_set_int32(e, "depth", (int32_t)v), 0);
	else if (kind == 'l')
		assert_int_equal(ecw_entity_set_int64(e, "depth", (int64_t)v), 0);
	else if (kind == 'd')
		assert_int_equal(ecw_entity_set_double(e, "depth", v), 0);
	return e;
}

static void add(struct fx *x, struct ecw_entity *e)
{
	int err = ecw_rollup_acc_add(x->acc, e);
	if (err != 0)
		fail_msg("add: %s", ecw_error_last()->message);
	ecw_entity_free(e);
}

static struct ecw_entity *finish(struct fx *x)
{
	struct ecw_entity *out = NULL;

	assert_int_equal(ecw_rollup_acc_finish(&out, x->acc, "tank-7_daily", "20201011", 1602374400), 0);
	return out;
}

static const struct ecw_prop *prop(const struct ecw_entity *e, const char *name, enum ecw_edm type)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);

	if (!p)
		fail_msg("no property %s", name);
	if (p->type != type)
		fail_msg("%s is %s, want %s", name, ecw_entity_edm_name(p->type), ecw_entity_edm_name(type));
	return p;
}

#define AGGS "{a: avg(depth), lo: min(depth), hi: max(depth), s: sum(depth), n: count()}"

static void test_rollup__integers(void **state)
{
	(void)state;
	struct fx *x = fx_new(AGGS);
	add(x, row(1602374400, 'i', 10));
	add(x, row(1602378000, 'i', -3));
	add(x, row(1602381600, 0, 0)); /* no reading: counted, not averaged */
	add(x, row(1602385200, 'l', 5000000000.0));
	struct ecw_entity *e = finish(x);
	assert_string_equal(ecw_entity_pk(e), "tank-7_daily");
	assert_string_equal(ecw_entity_rk(e), "20201011");
	assert_int_equal(prop(e, "n", ECW_EDM_INT32)->v.i32, 4);
	assert_true(prop(e, "a", ECW_EDM_DOUBLE)->v.d == (10.0 - 3.0 + 5000000000.0) / 3.0);
	assert_int_equal(prop(e, "lo", ECW_EDM_INT64)->v.i64, -3);
	assert_int_equal(prop(e, "hi", ECW_EDM_INT64)->v.i64, 5000000000LL);
	assert_int_equal(prop(e, "s", ECW_EDM_INT64)->v.i64, 5000000007LL);
	assert_string_equal(prop(e, "WindowStart", ECW_EDM_DATETIME)->v.s, "2020-10-11T00:00:00.0000000Z");
	assert_int_equal(ecw_entity_count(e), 6);
	ecw_entity_free(e);
	fx_free(x);
}

static void test_rollup__doubles(void **state)
{
	(void)state;
	/* One Double among integers makes min, max and sum Doubles. */
	struct fx *x = fx_new(AGGS);
	add(x, row(1602374400, 'i', 2));
	add(x, row(1602378000, 'd', 0.5));
	add(x, row(1602381600, 'i', 4));
	struct ecw_entity *e = finish(x);
	assert_true(prop(e, "a", ECW_EDM_DOUBLE)->v.d == 6.5 / 3.0);
	assert_true(prop(e, "lo", ECW_EDM_DOUBLE)->v.d == 0.5);
	assert_true(prop(e, "hi", ECW_EDM_DOUBLE)->v.d == 4.0);
	assert_true(prop(e, "s", ECW_EDM_DOUBLE)->v.d == 6.5);
	assert_int_equal(prop(e, "n", ECW_EDM_INT32)->v.i32, 3);
	ecw_entity_free(e);
	fx_free(x);

	/* An integral average is still a Double (5, not Int32 5). */
	x = fx_new(AGGS);
	add(x, row(1602374400, 'i', 4));
	add(x, row(1602378000, 'i', 6));
	e = finish(x);
	assert_true(prop(e, "a", ECW_EDM_DOUBLE)->v.d == 5.0);
	ecw_entity_free(e);
	fx_free(x);
}

static void test_rollup__missing_property_and_empty(void **state)
{
	(void)state;
	/* No row has depth: only the count (and WindowStart). */
	struct fx *x = fx_new(AGGS);
	add(x, row(1602374400, 0, 0));
	add(x, row(1602378000, 0, 0));
	struct ecw_entity *e = finish(x);
	assert_int_equal(prop(e, "n", ECW_EDM_INT32)->v.i32, 2);
	assert_null(ecw_entity_get(e, "a"));
	assert_null(ecw_entity_get(e, "lo"));
	assert_null(ecw_entity_get(e, "s"));
	assert_int_equal(ecw_entity_count(e), 2);
	ecw_entity_free(e);
	fx_free(x);

	/* No rows at all: no aggregate. */
	x = fx_new(AGGS);
	e = (struct ecw_entity *)1;
	assert_int_equal(ecw_rollup_acc_finish(&e, x->acc, "p", "r", 0), 0);
	assert_null(e);
	fx_free(x);
}

static void add_bad(const char *agg, struct ecw_entity *e, const char *needle)
{
	struct fx *x = fx_new(agg);

	assert_int_equal(ecw_rollup_acc_add(x->acc, e), ECW_EINVALID);
	if (!str_contains(ecw_error_last()->message, needle) ||
	    !str_contains(ecw_error_last()->message, "depth"))
		fail_msg("error \"%s\", want \"%s\" and the property", ecw_error_last()->message, needle);
	ecw_entity_free(e);
	fx_free(x);
}

static void test_rollup__bad_values(void **state)
{
	(void)state;
	struct ecw_entity *e = row(1602378000, 0, 0);
	assert_int_equal(ecw_entity_set_string(e, "depth", "abc", 3), 0);
	add_bad("{a: avg(depth)}", e, "1602378000");
	e = row(1602378000, 0, 0);
	assert_int_equal(ecw_entity_set_bool(e, "depth", true), 0);
	add_bad("{a: max(depth)}", e, "Edm.Boolean");
	add_bad("{a: min(depth)}", row(1602378000, 'd', NAN), "not finite");
	/* count() reads no property: a bad value elsewhere is not its concern. */
	struct fx *x = fx_new("{n: count()}");
	e = row(1602378000, 0, 0);
	assert_int_equal(ecw_entity_set_string(e, "depth", "abc", 3), 0);
	add(x, e);
	fx_free(x);
	/* A sum that leaves Int64's range is an error, not a wrap. */
	x = fx_new("{s: sum(depth)}");
	add(x, row(1602374400, 'l', 0));
	e = row(1602378000, 0, 0);
	assert_int_equal(ecw_entity_set_int64(e, "depth", INT64_MAX), 0);
	add(x, e);
	e = row(1602381600, 'i', 1);
	assert_int_equal(ecw_rollup_acc_add(x->acc, e), ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "Int64"));
	ecw_entity_free(e);
	fx_free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rollup__days),
	    cmocka_unit_test(test_rollup__hours),
	    cmocka_unit_test(test_rollup__weeks_start_monday),
	    cmocka_unit_test(test_rollup__window_start_syntax),
	    cmocka_unit_test(test_rollup__filter),
	    cmocka_unit_test(test_rollup__config),
	    cmocka_unit_test(test_rollup__config_errors),
	    cmocka_unit_test(test_rollup__integers),
	    cmocka_unit_test(test_rollup__doubles),
	    cmocka_unit_test(test_rollup__missing_property_and_empty),
	    cmocka_unit_test(test_rollup__bad_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
