/* test_template.c - key and filter templates (jobs/template.c), and the key
 * helpers: inverted ticks, unix, date_int, hash4 and {now:...} (against a
 * wall clock fixed through support.c's --wrap=ecw_wall_ms). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "ecw_config.h"
#include "jobs_private.h"
#include "support.h"

static struct ecw_entity *employee(void)
{
	struct ecw_entity *e = NULL;

	assert_int_equal(ecw_entity_new(&e, "Sales", "o'brien 001"), 0);
	assert_int_equal(ecw_entity_set_string(e, "Email", "obrien@example.com", 18), 0);
	assert_int_equal(ecw_entity_set_string(e, "LastName", "O'Brien", 7), 0);
	assert_int_equal(ecw_entity_set_int32(e, "Year", 26), 0);
	assert_int_equal(ecw_entity_set_int64(e, "Big", 9007199254740993LL), 0);
	assert_int_equal(ecw_entity_set_double(e, "Rate", 0.1), 0);
	assert_int_equal(ecw_entity_set_bool(e, "Active", true), 0);
	assert_int_equal(ecw_entity_set_string(e, "City", "Zo\xc3\xab", 4), 0);
	assert_int_equal(ecw_entity_set_binary(e, "Photo", "\x00\x01", 2), 0);
	return e;
}

static void render_is(const char *tmpl, enum ecw_template_mode mode, const char *want)
{
	struct ecw_template *t = NULL;
	struct ecw_entity *e = employee();
	struct ecw_buf out;

	ecw_buf_init(&out, 0);
	assert_int_equal(ecw_template_compile(&t, tmpl, "row_key"), 0);
	assert_int_equal(ecw_template_render(&out, t, e, mode), 0);
	assert_string_equal(ecw_buf_cstr(&out), want);
	ecw_buf_dispose(&out);
	ecw_template_free(t);
	ecw_entity_free(e);
}

static void test_template__properties_and_keys(void **state)
{
	(void)state;
	render_is("email_{PartitionKey}", ECW_TEMPLATE_PLAIN, "email_Sales");
	render_is("{Email}", ECW_TEMPLATE_PLAIN, "obrien@example.com");
	render_is("{RowKey}|{Year}|{Big}|{Rate}|{Active}", ECW_TEMPLATE_PLAIN,
	          "o'brien 001|26|9007199254740993|0.1|true");
	render_is("plain", ECW_TEMPLATE_PLAIN, "plain");
}

static void test_template__padding(void **state)
{
	(void)state;
	render_is("{Year:0>6}", ECW_TEMPLATE_PLAIN, "000026");
	render_is("{Year:_<4}x", ECW_TEMPLATE_PLAIN, "26__x");
	render_is("{Year:0>2}", ECW_TEMPLATE_PLAIN, "26");           /* already wide enough */
	render_is("{City:.>5}", ECW_TEMPLATE_PLAIN, "..Zo\xc3\xab"); /* 3 characters (4 bytes): two dots */
}

static void test_template__literal_braces(void **state)
{
	(void)state;
	render_is("{{{Year}}}", ECW_TEMPLATE_PLAIN, "{26}");
	render_is("a{{b}}c", ECW_TEMPLATE_PLAIN, "a{b}c");
}

/* A quote in a value can never end the OData string literal it sits in. */
static void test_template__odata_escaping(void **state)
{
	(void)state;
	render_is("PartitionKey eq '{RowKey}'", ECW_TEMPLATE_ODATA, "PartitionKey eq 'o''brien 001'");
	render_is("LastName eq '{LastName}'", ECW_TEMPLATE_ODATA, "LastName eq 'O''Brien'");
	render_is("{LastName}", ECW_TEMPLATE_PLAIN, "O'Brien");
}

static void test_template__missing_property_is_named(void **state)
{
	struct ecw_template *t = NULL;
	struct ecw_entity *e = employee();
	struct ecw_buf out;

	(void)state;
	ecw_buf_init(&out, 0);
	assert_int_equal(ecw_template_compile(&t, "x_{Nickname}", "row_key"), 0);
	assert_int_equal(ecw_template_render(&out, t, e, ECW_TEMPLATE_PLAIN), ECW_EINVALID);
	assert_non_null(strstr(ecw_error_last()->message, "Nickname"));
	ecw_template_free(t);
	assert_int_equal(ecw_template_compile(&t, "{Photo}", "row_key"), 0);
	assert_int_equal(ecw_template_render(&out, t, e, ECW_TEMPLATE_PLAIN), ECW_EINVALID);
	assert_non_null(strstr(ecw_error_last()->message, "Photo"));
	ecw_template_free(t);
	ecw_buf_dispose(&out);
	ecw_entity_free(e);
}

static void test_template__compile_errors(void **state)
{
	static const char *const bad[] = {"{",          "a{b",      "}",      "x}y",     "{}",
	                                  "{1a}",       "{a b}",    "{Id:0}", "{Id:0>}", "{Id:0>0}",
	                                  "{Id:0>999}", "{Id:0^3}", "",       NULL};
	struct ecw_template *t = NULL;

	(void)state;
	for (int i = 0; bad[i]; i++) {
		if (ecw_template_compile(&t, bad[i], "row_key") != ECW_EINVALID)
			fail_msg("'%s' compiled", bad[i]);
		assert_null(t);
		assert_non_null(strstr(ecw_error_last()->message, "row_key"));
	}
}

/* ---- key helpers -------------------------------------------------------- */

/* An entity with one property, When, of the given kind ('d' DateTime, 's'
 * String, 'i' Int32, 'l' Int64, 'b' Boolean, 'f' Double). */
static struct ecw_entity *when(char kind, const char *text, int64_t n)
{
	struct ecw_entity *e = NULL;

	assert_int_equal(ecw_entity_new(&e, "p", "r"), 0);
	switch (kind) {
	case 'd': assert_int_equal(ecw_entity_set_datetime(e, "When", text), 0); break;
	case 's': assert_int_equal(ecw_entity_set_string(e, "When", text, strlen(text)), 0); break;
	case 'i': assert_int_equal(ecw_entity_set_int32(e, "When", (int32_t)n), 0); break;
	case 'l': assert_int_equal(ecw_entity_set_int64(e, "When", n), 0); break;
	case 'b': assert_int_equal(ecw_entity_set_bool(e, "When", true), 0); break;
	default: assert_int_equal(ecw_entity_set_double(e, "When", 1602419696.0), 0); break;
	}
	return e;
}

/* Renders tmpl against e (freed here) into out (a caller's buffer of 128). */
static int render_when(char out[128], const char *tmpl, struct ecw_entity *e)
{
	struct ecw_template *t = NULL;
	struct ecw_buf b;
	int err;

	ecw_buf_init(&b, 0);
	assert_int_equal(ecw_template_compile(&t, tmpl, "to_row_key"), 0);
	err = ecw_template_render(&b, t, e, ECW_TEMPLATE_PLAIN);
	snprintf(out, 128, "%s", err == 0 ? ecw_buf_cstr(&b) : "");
	ecw_buf_dispose(&b);
	ecw_template_free(t);
	ecw_entity_free(e);
	return err;
}

static void inverted_is(const char *iso, const char *want)
{
	char got[128];

	assert_int_equal(render_when(got, "{When:inverted_ticks}", when('d', iso, 0)), 0);
	assert_string_equal(got, want);
	assert_int_equal(strlen(got), 19);
}

/* 19 digits at both ends of DateTime's range, and every tick counts. */
static void test_template__inverted_ticks_extremes(void **state)
{
	(void)state;
	inverted_is("0001-01-01T00:00:00.0000000Z", "3155378975999999999");
	inverted_is("9999-12-31T23:59:59.9999999Z", "0000000000000000000");
	inverted_is("9999-12-31T23:59:59.9999998Z", "0000000000000000001");
	inverted_is("2020-10-11T12:34:56.1234567Z", "2517998811038765432");
	inverted_is("1970-01-01T00:00:00Z", "2534023007999999999");
}

/* Newer times give smaller keys, down to one tick apart, so a query (which
 * returns keys in text order) lists the newest first. */
static void test_template__inverted_ticks_newest_first(void **state)
{
	static const char *const times[] = {
	    "1999-12-31T23:59:59.9999999Z", "2000-01-01T00:00:00.0000000Z", "2000-01-01T00:00:00.0000001Z",
	    "2019-03-04T08:09:10.1234567Z", "2020-10-11T00:00:00.0000000Z", "2101-01-01T00:00:00.0000000Z",
	};
	char prev[128] = "", got[128];

	(void)state;
	for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
		assert_int_equal(render_when(got, "{When:inverted_ticks}", when('d', times[i], 0)), 0);
		if (i)
			assert_true(strcmp(got, prev) < 0);
		memcpy(prev, got, sizeof(prev));
	}
}

/* A key made by inverted_ticks (with a suffix) gives the original time back. */
static void test_template__inverted_ticks_round_trip(void **state)
{
	static const char *const times[] = {"0001-01-01T00:00:00.0000000Z", "1970-01-01T00:00:00.0000000Z",
	                                    "2019-03-04T08:09:10.1234567Z", "2020-02-29T23:59:59.0000001Z",
	                                    "9999-12-31T23:59:59.9999999Z"};
	char key[128], iso[ECW_ISO_TICKS_SIZE];

	(void)state;
	for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
		assert_int_equal(render_when(key, "{When:inverted_ticks}_{RowKey}", when('d', times[i], 0)),
		                 0);
		assert_int_equal(ecw_inverted_ticks_to_iso(iso, key), 0);
		assert_string_equal(iso, times[i]);
	}
	/* Unix seconds in, the same second out. */
	assert_int_equal(render_when(key, "{When:inverted_ticks}", when('i', NULL, 1602419696)), 0);
	assert_int_equal(ecw_inverted_ticks_to_iso(iso, key), 0);
	assert_string_equal(iso, "2020-10-11T12:34:56.0000000Z");
	assert_int_equal(ecw_inverted_ticks_to_iso(iso, "25179988110387654x2"), ECW_EINVALID);
	assert_int_equal(ecw_inverted_ticks_to_iso(iso, "9999999999999999999"), ECW_EINVALID);
	assert_int_equal(ecw_inverted_ticks_to_iso(iso, "123"), ECW_EINVALID);
}

static void test_template__unix_date_int_hash4(void **state)
{
	char got[128];

	(void)state;
	assert_int_equal(render_when(got, "{When:unix}", when('d', "2020-10-11T12:34:56.9999999Z", 0)), 0);
	assert_string_equal(got, "1602419696"); /* seconds, truncated */
	assert_int_equal(render_when(got, "{When:unix}", when('d', "1970-01-01T00:00:07Z", 0)), 0);
	assert_string_equal(got, "0000000007"); /* ten digits: text order is time order */
	assert_int_equal(render_when(got, "{When:unix}", when('i', NULL, 86400)), 0);
	assert_string_equal(got, "0000086400");
	assert_int_equal(render_when(got, "{When:unix}", when('l', NULL, 1602419696)), 0);
	assert_string_equal(got, "1602419696");
	assert_int_equal(render_when(got, "{When:unix}", when('s', "1602419696", 0)), 0);
	assert_string_equal(got, "1602419696");
	assert_int_equal(render_when(got, "{When:date_int}", when('d', "2020-10-11T23:59:59.9999999Z", 0)),
	                 0);
	assert_string_equal(got, "20201011");
	assert_int_equal(render_when(got, "{When:date_int}", when('d', "0001-01-01T00:00:00Z", 0)), 0);
	assert_string_equal(got, "00010101");
	assert_int_equal(render_when(got, "{When:date_int}", when('l', NULL, 1602374399)), 0);
	assert_string_equal(got, "20201010");
	assert_int_equal(render_when(got, "{When:date_int}", when('s', "1602374400", 0)), 0);
	assert_string_equal(got, "20201011");
	/* hash4: the first two bytes of SHA-256 of the text, and stable. */
	render_is("{Email:hash4}_{Email}", ECW_TEMPLATE_PLAIN, "a622_obrien@example.com");
	render_is("{PartitionKey:hash4}", ECW_TEMPLATE_PLAIN, "8de4");
	render_is("{Year:hash4}", ECW_TEMPLATE_PLAIN, "5f9c"); /* of "26" */
	render_is("{PartitionKey:hash4}-{Year:0>4}", ECW_TEMPLATE_PLAIN, "8de4-0026");
}

/* A value that is not a time is a permanent error naming the property. */
static void test_template__time_formatters_refuse_other_types(void **state)
{
	static const char *const tmpls[] = {"{When:unix}", "{When:date_int}", "{When:inverted_ticks}"};
	char got[128];

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		struct ecw_entity *bad[] = {when('s', "2020-10-11", 0), when('s', "", 0),
		                            when('s', "-5", 0),         when('s', "12a", 0),
		                            when('b', NULL, 0),         when('f', NULL, 0),
		                            when('i', NULL, -1),        when('l', NULL, 253402300800LL)};
		for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
			if (render_when(got, tmpls[i], bad[k]) != ECW_EINVALID)
				fail_msg("%s rendered case %zu as '%s'", tmpls[i], k, got);
			assert_non_null(strstr(ecw_error_last()->message, "'When'"));
		}
	}
	/* :unix holds 1970..2286 only: earlier or later would break text order. */
	assert_int_equal(render_when(got, "{When:unix}", when('d', "1969-12-31T23:59:59Z", 0)), ECW_EINVALID);
	assert_int_equal(render_when(got, "{When:unix}", when('d', "2286-11-20T17:46:40Z", 0)), ECW_EINVALID);
	assert_int_equal(render_when(got, "{When:unix}", when('d', "2286-11-20T17:46:39Z", 0)), 0);
	assert_string_equal(got, "9999999999");
	/* Binary has no text to hash. */
	struct ecw_template *t = NULL;
	struct ecw_entity *e = employee();
	struct ecw_buf out;
	ecw_buf_init(&out, 0);
	assert_int_equal(ecw_template_compile(&t, "{Photo:hash4}", "row_key"), 0);
	assert_int_equal(ecw_template_render(&out, t, e, ECW_TEMPLATE_PLAIN), ECW_EINVALID);
	assert_non_null(strstr(ecw_error_last()->message, "Photo"));
	ecw_buf_dispose(&out);
	ecw_template_free(t);
	ecw_entity_free(e);
}

/* {now:...} changes on every rerun: refused unless the caller opts in, and
 * then it reads the wall clock. */
static void test_template__now_refused_by_default(void **state)
{
	struct ecw_template *t = NULL;
	struct ecw_entity *e = employee();
	struct ecw_buf out;
	char iso[ECW_ISO_TICKS_SIZE];

	(void)state;
	ecw_buf_init(&out, 0);
	assert_int_equal(ecw_template_compile(&t, "{now:inverted_ticks}_{RowKey}", "to_row_key"),
	                 ECW_EINVALID);
	assert_null(t);
	assert_str(ecw_error_last()->message,
	           "{now:...} is not allowed in to_row_key: a rerun would write another key (column 1)");
	assert_int_equal(ecw_template_compile(&t, "x{now:unix}", "to_row_key"), ECW_EINVALID);
	assert_int_equal(ecw_template_compile(&t, "{now:hash4}", "to_row_key"), ECW_EINVALID);
	assert_int_equal(ecw_template_compile_flags(&t, "{now:hash4}", "k", ECW_TEMPLATE_ALLOW_NOW),
	                 ECW_EINVALID);

	wall_fake_set(1602419696123LL); /* 2020-10-11T12:34:56.123Z */
	assert_int_equal(ecw_template_compile_flags(&t, "{now:inverted_ticks}_{now:unix}_{now:date_int}", "k",
	                                            ECW_TEMPLATE_ALLOW_NOW),
	                 0);
	assert_int_equal(ecw_template_render(&out, t, e, ECW_TEMPLATE_PLAIN), 0);
	assert_string_equal(ecw_buf_cstr(&out), "2517998811038769999_1602419696_20201011");
	assert_int_equal(ecw_inverted_ticks_to_iso(iso, ecw_buf_cstr(&out)), 0);
	assert_string_equal(iso, "2020-10-11T12:34:56.1230000Z");
	/* A later clock sorts first. */
	wall_fake_set(1602419696124LL);
	ecw_buf_reset(&out);
	assert_int_equal(ecw_template_render(&out, t, e, ECW_TEMPLATE_PLAIN), 0);
	assert_true(strncmp(ecw_buf_cstr(&out), "2517998811038769999", 19) < 0);
	wall_real();
	ecw_template_free(t);
	/* "now" with padding, or without a formatter, is still a property. */
	assert_int_equal(ecw_template_compile(&t, "{now}", "to_row_key"), 0);
	ecw_template_free(t);
	ecw_buf_dispose(&out);
	ecw_entity_free(e);
}

/* Through a job's configuration: the error is at the value's line:col. */
static void test_template__now_refused_in_job_config(void **state)
{
	static const char text[] = "jobs:\n"
	                           "  archive:\n"
	                           "    type: move\n"
	                           "    from: Logins\n"
	                           "    to: LoginsArchive\n"
	                           "    to_row_key: \"{now:inverted_ticks}_{RowKey}\"\n";
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;

	(void)state;
	ecw_node_errors_init(&errs);
	assert_int_equal(ecw_config_parse(&cfg, text, strlen(text), "t.yaml", &errs), ECW_EINVALID);
	assert_null(cfg);
	assert_int_equal(errs.n, 1);
	assert_string_equal(errs.lines[0],
	                    "t.yaml:6:17: {now:...} is not allowed in to_row_key: a rerun would "
	                    "write another key (column 1)");
	ecw_node_errors_dispose(&errs);
}

static void test_template__formatter_compile_errors(void **state)
{
	static const char *const bad[] = {"{When:ticks}",    "{When:Unix}", "{When:hash}",
	                                  "{When:unix:0>3}", "{When:}",     NULL};
	struct ecw_template *t = NULL;

	(void)state;
	for (int i = 0; bad[i]; i++) {
		if (ecw_template_compile(&t, bad[i], "row_key") != ECW_EINVALID)
			fail_msg("'%s' compiled", bad[i]);
		assert_null(t);
		assert_non_null(strstr(ecw_error_last()->message, "row_key"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_template__properties_and_keys),
	    cmocka_unit_test(test_template__padding),
	    cmocka_unit_test(test_template__literal_braces),
	    cmocka_unit_test(test_template__odata_escaping),
	    cmocka_unit_test(test_template__missing_property_is_named),
	    cmocka_unit_test(test_template__compile_errors),
	    cmocka_unit_test(test_template__inverted_ticks_extremes),
	    cmocka_unit_test(test_template__inverted_ticks_newest_first),
	    cmocka_unit_test(test_template__inverted_ticks_round_trip),
	    cmocka_unit_test(test_template__unix_date_int_hash4),
	    cmocka_unit_test(test_template__time_formatters_refuse_other_types),
	    cmocka_unit_test(test_template__now_refused_by_default),
	    cmocka_unit_test(test_template__now_refused_in_job_config),
	    cmocka_unit_test(test_template__formatter_compile_errors),
	};
	return cmocka_run_group_tests_name("template", tests, NULL, NULL);
}
