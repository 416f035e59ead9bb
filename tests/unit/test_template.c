/* test_template.c - key and filter templates (jobs/template.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "jobs_private.h"

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
	render_is("{Year:0>2}", ECW_TEMPLATE_PLAIN, "26");      /* already wide enough */
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
	static const char *const bad[] = {"{", "a{b", "}", "x}y", "{}", "{1a}", "{a b}", "{Id:0}", "{Id:0>}",
					  "{Id:0>0}", "{Id:0>999}", "{Id:0^3}", "", NULL};
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
	};
	return cmocka_run_group_tests_name("template", tests, NULL, NULL);
}
