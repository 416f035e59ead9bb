/* SPDX-License-Identifier: MIT */
/* test_jsonparse.c - the query page splitter (ecw_jsonparse_object_array):
 * the common form gives each entity's text; anything else says "parse it in
 * full" (1), so that json-c judges every other input exactly as before. */
#include "support.h"

#include <stdlib.h>
#include <string.h>

static void expect_spans(const char *body, const char *const *want, size_t nwant)
{
	struct ecw_json_span *spans = NULL;
	size_t n = 99;

	assert_int_equal(ecw_jsonparse_object_array(&spans, &n, body, strlen(body), "value"), 0);
	assert_int_equal(n, nwant);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(spans[i].len, strlen(want[i]));
		assert_memory_equal(spans[i].ptr, want[i], spans[i].len);
	}
	free(spans);
}

static void expect_full_parse(const char *body)
{
	struct ecw_json_span *spans = (struct ecw_json_span *)1;
	size_t n = 99;

	assert_int_equal(ecw_jsonparse_object_array(&spans, &n, body, strlen(body), "value"), 1);
	assert_null(spans);
	assert_int_equal(n, 0);
}

static void test_jsonparse__common_form_split(void **state)
{
	static const char *const two[] = {"{\"PartitionKey\":\"a\",\"RowKey\":\"}]\\\"[{\"}",
	                                  "{ \"x\" : [1,{\"y\":2}] }"};

	(void)state;
	expect_spans("{\"odata.metadata\":\"http://h/a/$metadata#T\",\"value\":["
	             "{\"PartitionKey\":\"a\",\"RowKey\":\"}]\\\"[{\"}"
	             " , { \"x\" : [1,{\"y\":2}] }]}",
	             two, 2);
	expect_spans(" {\"value\": [ ] , \"odata.metadata\":\"a\\/b\\\\c\\\"\"} \n", NULL, 0);
}

static void test_jsonparse__anything_else_is_parsed_in_full(void **state)
{
	static const char *const bodies[] = {
	    "",
	    "[]",
	    "{}",
	    "{\"odata.metadata\":\"x\"}",                        /* no value */
	    "{\"value\":[],\"value\":[]}",                       /* twice */
	    "{\"value\":{}}",                                    /* not an array */
	    "{\"value\":[1]}",                                   /* an element not an object */
	    "{\"value\":[{}],}",                                 /* trailing comma */
	    "{\"value\":[{},]}",                                 /* trailing comma in the array */
	    "{\"value\":[{}]} x",                                /* trailing text */
	    "{\"value\":[{\"a\":\"}\"]}",                        /* an object that does not end */
	    "{\"odata.metadata\":1,\"value\":[]}",               /* a member not a string */
	    "{\"odata.metadata\":\"\\u0041\",\"value\":[]}",     /* an escape other than \" \\ \/ */
	    "{\"odata.metadata\":\"caf\xc3\xa9\",\"value\":[]}", /* not ASCII */
	    "{\"value\":[] \"odata.metadata\":\"x\"}",           /* no comma */
	    "{\"value\" [] }",                                   /* no colon */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
		expect_full_parse(bodies[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_jsonparse__common_form_split),
	    cmocka_unit_test(test_jsonparse__anything_else_is_parsed_in_full),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
