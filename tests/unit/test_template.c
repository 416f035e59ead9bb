/* SPDX-License-Identifier: MIT */
/* test_template.c - key and filter templates (jobs/template.c), and the key
 * helpers: inverted ticks, unix, date_int, hash4 and {now:...} (against a
 * wall clock fixed through support.c's --wrap=ecw_clock_wall_ms). Filters: the
 * OData lexing at compile time (each refusal at its column), the typed
 * literals of placeholders outside quotes, and values written to change a
 * filter's structure rendering as one literal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Renders tmpl, compiled as a filter, against e as OData: 0 and the text in
 * *got (the caller frees), or the error. */
static int render_filter(char **got, const char *tmpl, const struct ecw_entity *e)
{
	struct ecw_template *t = NULL;
	struct ecw_buf out;
	int err;

	ecw_buf_init(&out, 0);
	assert_int_equal(ecw_template_compile_flags(&t, tmpl, "filter", ECW_TEMPLATE_FILTER), 0);
	err = ecw_template_render(&out, t, e, ECW_TEMPLATE_ODATA);
	*got = err == 0 ? ecw_buf_take(&out) : NULL;
	ecw_buf_dispose(&out);
	ecw_template_free(t);
	return err;
}

static void filter_is(const char *tmpl, const struct ecw_entity *e, const char *want)
{
	char *got = NULL;

	if (render_filter(&got, tmpl, e) != 0)
		fail_msg("'%s': %s", tmpl, ecw_error_last()->message);
	if (strcmp(got, want) != 0)
		fail_msg("'%s' rendered\n  %s\nnot\n  %s", tmpl, got, want);
	free(got);
}

/* A quote in a value can never end the OData string literal it sits in; the
 * quoted case renders as it always did. */
static void test_template__odata_escaping(void **state)
{
	struct ecw_entity *e = employee();

	(void)state;
	filter_is("PartitionKey eq '{RowKey}'", e, "PartitionKey eq 'o''brien 001'");
	filter_is("LastName eq '{LastName}'", e, "LastName eq 'O''Brien'");
	filter_is("Key eq '{Year:0>4}-{LastName}' and N eq 'it''s {Year}'", e,
	          "Key eq '0026-O''Brien' and N eq 'it''s 26'");
	filter_is("Rate eq '{Rate}' and Big eq '{Big}L'", e, "Rate eq '0.1' and Big eq '9007199254740993L'");
	render_is("{LastName}", ECW_TEMPLATE_PLAIN, "O'Brien");
	ecw_entity_free(e);
}

/* Outside quotes a placeholder is one literal of the property's EDM type. */
static void test_template__filter_typed_literals(void **state)
{
	struct ecw_entity *e = employee();

	(void)state;
	assert_int_equal(ecw_entity_set_guid(e, "Id", "C9DA6455-213d-42c9-9a79-3e9149a57833"), 0);
	assert_int_equal(ecw_entity_set_datetime(e, "When", "2026-08-19T10:00:00.5Z"), 0);
	assert_int_equal(ecw_entity_set_datetime(e, "Day", "2026-08-19T00:00:00Z"), 0);
	assert_int_equal(ecw_entity_set_datetime(e, "Tick", "2026-08-19T10:00:00.0000001Z"), 0);
	assert_int_equal(ecw_entity_set_int32(e, "Neg", INT32_MIN), 0);
	assert_int_equal(ecw_entity_set_int64(e, "NegL", INT64_MIN), 0);
	assert_int_equal(ecw_entity_set_bool(e, "Off", false), 0);
	filter_is("RowKey eq {RowKey}", e, "RowKey eq 'o''brien 001'");
	filter_is("(PartitionKey eq {PartitionKey})", e, "(PartitionKey eq 'Sales')");
	filter_is("LastName eq {LastName}", e, "LastName eq 'O''Brien'");
	filter_is("Year eq {Year} or Neg eq {Neg}", e, "Year eq 26 or Neg eq -2147483648");
	filter_is("Big eq {Big} or NegL eq {NegL}", e,
	          "Big eq 9007199254740993L or NegL eq -9223372036854775808L");
	filter_is("Rate eq {Rate}", e, "Rate eq 0.1");
	filter_is("Active eq {Active} and Off eq {Off}", e, "Active eq true and Off eq false");
	filter_is("Id eq {Id}", e, "Id eq guid'C9DA6455-213d-42c9-9a79-3e9149a57833'");
	/* As the service writes a DateTime: trailing zeros of the fraction trimmed. */
	filter_is("When eq {When} or Day eq {Day}", e,
	          "When eq datetime'2026-08-19T10:00:00.5Z' or Day eq datetime'2026-08-19T00:00:00Z'");
	filter_is("Tick eq {Tick}", e, "Tick eq datetime'2026-08-19T10:00:00.0000001Z'");
	filter_is("Photo eq {Photo}", e, "Photo eq X'0001'");
	/* Formatted or padded: a string. */
	filter_is("RowKey ge {Year:0>4}\tand\nRowKey lt {Email:hash4}", e,
	          "RowKey ge '0026'\tand\nRowKey lt 'a622'");
	filter_is("{Active}", e, "true");
	ecw_entity_free(e);
}

/* Doubles: the shortest digits that read back as the value, written out with
 * a '.', never an exponent (Azurite's lexer has none) and never bare digits
 * (an Int32). NaN and the infinities have no literal: an error naming them. */
static void test_template__filter_double_literals(void **state)
{
	static const struct {
		double d;
		const char *want;
	} cases[] = {
	    {5.0, "5.0"},
	    {-0.5, "-0.5"},
	    {0.0, "0.0"},
	    {-0.0, "-0.0"},
	    {1e21, "1000000000000000000000.0"},
	    {1.5e-7, "0.00000015"},
	    {123456.789, "123456.789"},
	    {0.1 + 0.2, "0.30000000000000004"},
	    {9007199254740993.0, "9007199254740992.0"},
	};
	static const double round_trip[] = {DBL_MAX, -DBL_MAX, DBL_MIN, 5e-324, 1.7976931348623157e308 / 3};
	const double bad[] = {NAN, INFINITY, -INFINITY};
	struct ecw_entity *e = NULL;
	char *got = NULL;

	(void)state;
	assert_int_equal(ecw_entity_new(&e, "p", "r"), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(ecw_entity_set_double(e, "D", cases[i].d), 0);
		assert_int_equal(render_filter(&got, "{D}", e), 0);
		if (strcmp(got, cases[i].want) != 0)
			fail_msg("%.17g rendered %s, not %s", cases[i].d, got, cases[i].want);
		free(got);
	}
	for (size_t i = 0; i < sizeof(round_trip) / sizeof(round_trip[0]); i++) {
		assert_int_equal(ecw_entity_set_double(e, "D", round_trip[i]), 0);
		assert_int_equal(render_filter(&got, "{D}", e), 0);
		assert_non_null(strchr(got, '.'));
		assert_null(strpbrk(got, "eE"));
		assert_true(strlen(got) <= 330);
		assert_true(strtod(got, NULL) == round_trip[i]);
		free(got);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(ecw_entity_set_double(e, "D", bad[i]), 0);
		assert_int_equal(render_filter(&got, "D eq {D}", e), ECW_EINVALID);
		assert_non_null(strstr(ecw_error_last()->message, "'D'"));
	}
	/* Inside quotes, a double is its text as before. */
	assert_int_equal(ecw_entity_set_double(e, "D", 5.0), 0);
	filter_is("D eq '{D}'", e, "D eq '5'");
	ecw_entity_free(e);
}

/* Keys and values written to break out of a filter: each is one literal,
 * quoted or not, so the filter keeps its structure. */
static void test_template__filter_hostile_values(void **state)
{
	static const struct {
		const char *value, *literal;
	} cases[] = {
	    {"0 or true", "'0 or true'"},
	    {"x' or PartitionKey ne '", "'x'' or PartitionKey ne '''"},
	    {"') or (1 eq 1", "''') or (1 eq 1'"},
	    {"1) or (true", "'1) or (true'"},
	    {"'", "''''"},
	};
	char want[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ecw_entity *e = NULL;
		const char *v = cases[i].value;
		assert_int_equal(ecw_entity_new(&e, "p", v), 0);
		assert_int_equal(ecw_entity_set_string(e, "CustId", v, strlen(v)), 0);
		snprintf(want, sizeof(want), "CustId eq %s", cases[i].literal);
		filter_is("CustId eq {RowKey}", e, want);
		filter_is("CustId eq {CustId}", e, want);
		filter_is("CustId eq '{RowKey}'", e, want);
		snprintf(want, sizeof(want), "(CustId eq %s)", cases[i].literal);
		filter_is("(CustId eq {CustId})", e, want);
		ecw_entity_free(e);
	}
}

/* A filter that a value could change is refused when compiled, at the
 * placeholder's (or quote's) column; keys compile as before. */
static void test_template__filter_refusals(void **state)
{
	static const struct {
		const char *tmpl, *says;
	} bad[] = {
	    {"CustId eq Cust{RowKey}", "the placeholder at column 15 is outside quotes"},
	    {"CustId eq {RowKey}x",
	     "the placeholder at column 11 is outside quotes, so it must be a whole operand (followed by the end, "
	     "a space or ')')"},
	    {"{A}{B}", "the placeholder at column 4 is outside quotes"},
	    {"A eq {A} and B eq {A}{B}", "column 22"},
	    {"A eq -{A}",
	     "column 7 is outside quotes, so it must be a whole operand (after the start, a space or '(')"},
	    {"A eq {A}'x'", "column 6"},
	    {"A eq 'x'{A}", "column 9"},
	    {"A eq {{{A}", "column 8"},
	    {"A eq {A}}}", "column 6"},
	    {"A eq x{A:0>4}", "column 7"},
	    {"A eq '{A}", "the ' at column 6 opens a string that is never closed"},
	    {"A eq 'it''s' and B eq 'x", "the ' at column 23 opens"},
	    {"A eq \"{A}\"", "the \" at column 6"},
	};
	static const char *const good[] = {
	    "A eq {A}",      "(A eq {A})", "not {A}",
	    "{A}",           "({A})",      "A eq '{A}{B}' and B eq 'x''{A}'",
	    "A eq 'x\"{A}'", "A eq {A}\n", "D eq datetime'{D}'",
	};
	struct ecw_template *t = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (ecw_template_compile_flags(&t, bad[i].tmpl, "filter", ECW_TEMPLATE_FILTER) !=
		    ECW_EINVALID)
			fail_msg("'%s' compiled as a filter", bad[i].tmpl);
		assert_null(t);
		if (!strstr(ecw_error_last()->message, bad[i].says) ||
		    strncmp(ecw_error_last()->message, "filter: ", 8) != 0)
			fail_msg("'%s': \"%s\" does not say \"%s\"", bad[i].tmpl, ecw_error_last()->message,
			         bad[i].says);
		/* As a key (not lexed) it is fine. */
		assert_int_equal(ecw_template_compile(&t, bad[i].tmpl, "row_key"), 0);
		ecw_template_free(t);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (ecw_template_compile_flags(&t, good[i], "filter", ECW_TEMPLATE_FILTER) != 0)
			fail_msg("'%s' refused: %s", good[i], ecw_error_last()->message);
		ecw_template_free(t);
	}
}

/* A template not compiled as a filter cannot render as one: its
 * placeholders were never lexed. */
static void test_template__odata_needs_a_filter(void **state)
{
	struct ecw_template *t = NULL;
	struct ecw_entity *e = employee();
	struct ecw_buf out;

	(void)state;
	ecw_buf_init(&out, 0);
	assert_int_equal(ecw_template_compile(&t, "RowKey eq '{RowKey}'", "row_key"), 0);
	assert_int_equal(ecw_template_render(&out, t, e, ECW_TEMPLATE_ODATA), ECW_EINVALID);
	assert_int_equal(out.len, 0);
	ecw_template_free(t);
	ecw_buf_dispose(&out);
	ecw_entity_free(e);
}

/* Parses a configuration: 0, or the one error line it must give. */
static void config_gives(const char *text, const char *error_line)
{
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;

	ecw_node_errors_init(&errs);
	if (!error_line) {
		if (ecw_config_parse(&cfg, text, strlen(text), "t.yaml", &errs) != 0)
			fail_msg("refused: %s", errs.n ? errs.lines[0] : ecw_error_last()->message);
	} else {
		assert_int_equal(ecw_config_parse(&cfg, text, strlen(text), "t.yaml", &errs), ECW_EINVALID);
		assert_null(cfg);
		assert_int_equal(errs.n, 1);
		assert_string_equal(errs.lines[0], error_line);
	}
	ecw_config_free(cfg);
	ecw_node_errors_dispose(&errs);
}

/* check-config's view: the error at the filter value's FILE:LINE:COL, the
 * placeholder's column in the message. */
static void test_template__filter_refused_in_job_config(void **state)
{
	(void)state;
	config_gives(
	    "jobs:\n"
	    "  copy:\n"
	    "    type: fanout\n"
	    "    source: Customers\n"
	    "    table: Orders\n"
	    "    filter: \"CustId eq Cust{RowKey}\"\n"
	    "    fields: {CustomerName: Name}\n",
	    "t.yaml:6:13: filter: the placeholder at column 15 is outside quotes, so it must be a whole "
	    "operand (after the start, a space or '('); write '...{Name}...' to put a value inside a "
	    "string");
	config_gives("jobs:\n"
	             "  copy:\n"
	             "    type: fanout\n"
	             "    source: Customers\n"
	             "    table: Orders\n"
	             "    filter: \"CustId eq {RowKey} and Region eq '{Region}'\"\n"
	             "    fields: {CustomerName: Name}\n",
	             NULL);
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
		assert_int_equal(ecw_template_inverted_ticks_to_iso(iso, key), 0);
		assert_string_equal(iso, times[i]);
	}
	/* Unix seconds in, the same second out. */
	assert_int_equal(render_when(key, "{When:inverted_ticks}", when('i', NULL, 1602419696)), 0);
	assert_int_equal(ecw_template_inverted_ticks_to_iso(iso, key), 0);
	assert_string_equal(iso, "2020-10-11T12:34:56.0000000Z");
	assert_int_equal(ecw_template_inverted_ticks_to_iso(iso, "25179988110387654x2"), ECW_EINVALID);
	assert_int_equal(ecw_template_inverted_ticks_to_iso(iso, "9999999999999999999"), ECW_EINVALID);
	assert_int_equal(ecw_template_inverted_ticks_to_iso(iso, "123"), ECW_EINVALID);
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

/* A date pattern: yyyy MM dd HH mm ss zero-padded in UTC, with / - _ . T
 * between; a DateTime (its fraction dropped) or Unix seconds. */
static void test_template__date_pattern(void **state)
{
	static const char *const bad[] = {"{When:yyyy/MM/dx}", "{When:YYYY}",    "{When:yyyy MM}", "{When:/}",
	                                  "{When:yyy}",        "{now:yyyyMMdd}", "{When:yyyy:MM}", NULL};
	struct ecw_template *t = NULL;
	char got[128];

	(void)state;
	assert_int_equal(render_when(got, "{When:yyyy/MM/dd/HH}00/000001.log",
	                             when('d', "2026-11-29T21:59:59.9999999Z", 0)),
	                 0);
	assert_string_equal(got, "2026/11/29/2100/000001.log");
	assert_int_equal(render_when(got, "{When:yyyyMMddHH}", when('d', "0001-01-01T00:00:00Z", 0)), 0);
	assert_string_equal(got, "0001010100");
	assert_int_equal(render_when(got, "{When:yyyy-MM-ddTHH.mm.ss_}", when('l', NULL, 1602419696)), 0);
	assert_string_equal(got, "2020-10-11T12.34.56_");
	assert_int_equal(render_when(got, "x{When:dd}", when('s', "1602374400", 0)), 0);
	assert_string_equal(got, "x11");
	assert_int_equal(render_when(got, "{When:yyyy}", when('b', NULL, 0)), ECW_EINVALID);
	assert_non_null(strstr(ecw_error_last()->message, "'When'"));
	for (int i = 0; bad[i]; i++) {
		if (ecw_template_compile_flags(&t, bad[i], "name", ECW_TEMPLATE_ALLOW_NOW) != ECW_EINVALID)
			fail_msg("'%s' compiled", bad[i]);
		assert_null(t);
	}
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
	assert_int_equal(ecw_template_inverted_ticks_to_iso(iso, ecw_buf_cstr(&out)), 0);
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
	(void)state;
	config_gives("jobs:\n"
	             "  archive:\n"
	             "    type: move\n"
	             "    from: Logins\n"
	             "    to: LoginsArchive\n"
	             "    to_row_key: \"{now:inverted_ticks}_{RowKey}\"\n",
	             "t.yaml:6:17: {now:...} is not allowed in to_row_key: a rerun would write another key "
	             "(column 1)");
}

/* A template's properties as a $select list: each once, PartitionKey and
 * RowKey included, {now} and literal text not. */
static void test_template__select_lists_what_it_reads(void **state)
{
	struct ecw_template *t = NULL, *u = NULL;
	struct ecw_buf sel;

	(void)state;
	ecw_buf_init(&sel, 4096);
	assert_int_equal(ecw_template_compile(&t, "{Region}_{Id:0>4}-{{x}}-{Region}", "t"), 0);
	assert_int_equal(
	    ecw_template_compile_flags(&u, "{RowKey}_{now:unix}_{Id}", "u", ECW_TEMPLATE_ALLOW_NOW), 0);
	assert_int_equal(ecw_template_select_add(&sel, "PartitionKey"), 0);
	assert_int_equal(ecw_template_select(&sel, t), 0);
	assert_int_equal(ecw_template_select(&sel, u), 0);
	assert_string_equal(ecw_buf_cstr(&sel), "PartitionKey,Region,Id,RowKey");
	/* A name that is a prefix of one listed is still added. */
	assert_int_equal(ecw_template_select_add(&sel, "Reg"), 0);
	assert_int_equal(ecw_template_select_add(&sel, "Id"), 0);
	assert_string_equal(ecw_buf_cstr(&sel), "PartitionKey,Region,Id,RowKey,Reg");
	ecw_buf_dispose(&sel);
	ecw_template_free(t);
	ecw_template_free(u);
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

/* ---- inverting a filter (ecw_template_filter_keys) ---- */

static void keys_are(const char *filter, const char *pk_prop, const char *rk_prop)
{
	struct ecw_template *t = NULL;
	struct ecw_template_keys k;

	assert_int_equal(ecw_template_compile_flags(&t, filter, "filter", ECW_TEMPLATE_FILTER), 0);
	if (ecw_template_filter_keys(&k, t) != 0)
		fail_msg("%s: refused: %s", filter, ecw_error_last()->message);
	if (strcmp(k.pk, pk_prop) != 0 || strcmp(k.rk, rk_prop) != 0)
		fail_msg("%s: bound pk '%s' rk '%s', want '%s' '%s'", filter, k.pk, k.rk, pk_prop, rk_prop);
	ecw_template_free(t);
}

static void refused(const char *filter)
{
	struct ecw_template *t = NULL;
	struct ecw_template_keys k;

	assert_int_equal(ecw_template_compile_flags(&t, filter, "filter", ECW_TEMPLATE_FILTER), 0);
	if (ecw_template_filter_keys(&k, t) != ECW_EINVALID)
		fail_msg("%s: inverted (pk '%s', rk '%s'), want refused", filter, k.pk, k.rk);
	assert_string_equal(k.pk, "");
	assert_string_equal(k.rk, "");
	assert_true(ecw_error_last()->message[0] != '\0');
	ecw_error_clear();
	ecw_template_free(t);
}

static void test_template__filter_keys_inverts_equalities(void **state)
{
	(void)state;
	/* Quoted or not, either side. */
	keys_are("CustomerId eq '{RowKey}'", "", "CustomerId");
	keys_are("CustomerId eq {RowKey}", "", "CustomerId");
	keys_are("'{RowKey}' eq CustomerId", "", "CustomerId");
	keys_are("{PartitionKey} eq Region", "Region", "");
	keys_are("PartitionKey eq '{RowKey}'", "", "PartitionKey");
	/* Both, among other terms, parenthesised, nested ands. */
	keys_are("Region eq '{PartitionKey}' and CustomerId eq '{RowKey}'", "Region", "CustomerId");
	keys_are("(Region eq {PartitionKey}) and (Status ne 'x' and (CustomerId eq '{RowKey}'))", "Region",
	         "CustomerId");
	keys_are("((Region eq {PartitionKey} and CustomerId eq '{RowKey}'))", "Region", "CustomerId");
	/* An `or` inside another term does not undo the top-level binding. */
	keys_are("CustomerId eq '{RowKey}' and (Status eq 'a' or Status eq 'b')", "", "CustomerId");
	/* The first of two bindings; a key also used elsewhere once bound. */
	keys_are("A eq '{RowKey}' and B eq '{RowKey}'", "", "A");
	keys_are("A eq '{RowKey}' and B ne 'x-{RowKey}'", "", "A");
	/* Literals with quotes and typed literals around it. */
	keys_are("Note eq 'it''s' and A eq '{RowKey}' and At gt datetime'2024-01-01T00:00:00Z'", "", "A");
}

static void test_template__filter_keys_refusals(void **state)
{
	(void)state;
	/* An or at the top: neither side must hold. */
	refused("CustomerId eq '{RowKey}' or Status eq 'x'");
	refused("(CustomerId eq '{RowKey}') or (A eq {PartitionKey})");
	refused("A eq {PartitionKey} and B eq 'x' OR C eq 'y'");
	/* not, and comparisons other than eq. */
	refused("not (CustomerId eq '{RowKey}')");
	refused("CustomerId ne '{RowKey}'");
	refused("CustomerId gt '{RowKey}'");
	refused("CustomerId ge {RowKey} and CustomerId le {RowKey}");
	/* A placeholder inside a longer string, or formatted. */
	refused("CustomerId eq 'C-{RowKey}'");
	refused("CustomerId eq '{RowKey}{RowKey}'");
	refused("CustomerId eq '{RowKey}''s'");
	refused("CustomerId eq '{RowKey:0>6}'");
	refused("Bucket eq '{RowKey:hash4}'");
	/* A key used but not bound: the other one alone cannot name the source. */
	refused("A eq '{RowKey}' and B ne '{PartitionKey}'");
	refused("A eq '{RowKey}' and (B eq '{PartitionKey}' or C eq 'x')");
	/* No key at all, a keyword as the property, another property used. */
	refused("Status eq 'x'");
	refused("true eq {RowKey}");
	refused("A eq '{RowKey}' and B eq {Name}");
	/* Parentheses that do not match. */
	refused("(A eq '{RowKey}'");
	refused("A eq '{RowKey}')");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_template__properties_and_keys),
	    cmocka_unit_test(test_template__padding),
	    cmocka_unit_test(test_template__literal_braces),
	    cmocka_unit_test(test_template__odata_escaping),
	    cmocka_unit_test(test_template__filter_typed_literals),
	    cmocka_unit_test(test_template__filter_double_literals),
	    cmocka_unit_test(test_template__filter_hostile_values),
	    cmocka_unit_test(test_template__filter_refusals),
	    cmocka_unit_test(test_template__odata_needs_a_filter),
	    cmocka_unit_test(test_template__filter_refused_in_job_config),
	    cmocka_unit_test(test_template__missing_property_is_named),
	    cmocka_unit_test(test_template__compile_errors),
	    cmocka_unit_test(test_template__inverted_ticks_extremes),
	    cmocka_unit_test(test_template__inverted_ticks_newest_first),
	    cmocka_unit_test(test_template__inverted_ticks_round_trip),
	    cmocka_unit_test(test_template__unix_date_int_hash4),
	    cmocka_unit_test(test_template__date_pattern),
	    cmocka_unit_test(test_template__time_formatters_refuse_other_types),
	    cmocka_unit_test(test_template__now_refused_by_default),
	    cmocka_unit_test(test_template__now_refused_in_job_config),
	    cmocka_unit_test(test_template__formatter_compile_errors),
	    cmocka_unit_test(test_template__select_lists_what_it_reads),
	    cmocka_unit_test(test_template__filter_keys_inverts_equalities),
	    cmocka_unit_test(test_template__filter_keys_refusals),
	};
	return cmocka_run_group_tests_name("template", tests, NULL, NULL);
}
