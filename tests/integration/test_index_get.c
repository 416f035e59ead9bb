/* SPDX-License-Identifier: MIT */
/* test_index_get.c - reading an index list as operators and applications do,
 * against Azurite: `ecworker index get` (worker/cmd/index.c) prints the list
 * a worker built, in order, its keys escaped for the terminal or quoted in
 * --json; jobs/README.md's JavaScript reader (tests/interop/index-list-reader.js,
 * through sdk.js read-list, the official SDK) reads the same keys; a value
 * no source has is an empty list, not an error; and the usage errors. */
#include "indexlistfx.h"
#include "itest.h"
#include "proc.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keys a source may hold (not control characters: the service refuses
 * those in keys): quotes, URL and JSON specials, non-ASCII. */
static const char *const keys[][2] = {
    {"Ops", "o'brien 003"},
    {"Sales", "\"q\" 002"},
    {"Sales", "a&b=c%d+e 004"},
    {"Z\xc3\xb6 \xe2\x9c\x93", "001"},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* The worker indexes the employees above (all Jones) and one Smith; config
 * gets the configuration (640 bytes). */
static void build_lists(struct wfx *x, char *config)
{
	struct il_wopts o = IL_WOPTS_DEFAULT;

	for (size_t i = 0; i < NKEYS; i++)
		il_change(x, keys[i][0], keys[i][1], "Jones");
	il_change(x, "Ops", "004", "Smith");
	il_run_worker(x, "ig-build", NKEYS + 1, 4);
	assert_int_equal(il_check_index(x), 2);
	il_write_config(config, 640, x, "ig-get", &o);
}

static int index_get(char **out, char **err, const char *config, const char *const *more)
{
	const char *argv[12] = {"index", "get", "-c", config};
	size_t n = 4;

	for (; more && *more && n < 11; more++)
		argv[n++] = *more;
	argv[n] = NULL;
	return proc_run(out, err, "ig-cli", argv, NULL, 30000);
}

/* The keys of a JSON array of [pk, rk] pairs, compared with keys[] in order. */
static void expect_keys(struct json_object *arr, const char *who)
{
	ITEST_CHECK(json_object_is_type(arr, json_type_array) && json_object_array_length(arr) == NKEYS,
	            "%s: not %zu keys: %s", who, NKEYS, json_object_to_json_string(arr));
	for (size_t i = 0; i < NKEYS; i++) {
		struct json_object *pair = json_object_array_get_idx(arr, i);
		assert_string_equal(json_object_get_string(json_object_array_get_idx(pair, 0)), keys[i][0]);
		assert_string_equal(json_object_get_string(json_object_array_get_idx(pair, 1)), keys[i][1]);
	}
}

/* The human output: a line naming the list, one key per line (PartitionKey
 * TAB RowKey) in the list's order, a count; and a list table written by
 * someone else (keys with control characters no source could have) does not
 * reach the terminal raw. */
static void test_index_get__prints_the_list_escaped(void **state)
{
	struct wfx *x = *state;
	char config[640], *out = NULL, *err = NULL;
	static const char head[] = "# " IL_JOB ": the list Jones in ";

	build_lists(x, config);
	assert_int_equal(index_get(&out, &err, config, (const char *const[]){IL_JOB, "Jones", NULL}), 0);
	ITEST_CHECK(strncmp(out, head, strlen(head)) == 0, "first line:\n%s", out);
	const char *at = strchr(out, '\n') + 1;
	for (size_t i = 0; i < NKEYS; i++) {
		char line[128];
		snprintf(line, sizeof(line), "%s\t%s\n", keys[i][0], keys[i][1]);
		ITEST_CHECK(strncmp(at, line, strlen(line)) == 0, "line %zu: expected %s in:\n%s", i + 1,
		            line, out);
		at += strlen(line);
	}
	assert_string_equal(at, "# 4 keys\n");
	free(out);
	free(err);

	static const char evil[] = "[[\"Sales\",\"esc \\u001b[31mred\"],[\"Sales\",\"tab\\there\"]]";
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_entity_new(&e, IL_LIST_PK, "Evil"));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Keys", evil, strlen(evil)));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Count", 2));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table2, e, ECW_WRITE_INSERT, NULL));
	ecw_entity_free(e);
	assert_int_equal(index_get(&out, &err, config, (const char *const[]){IL_JOB, "Evil", NULL}), 0);
	ITEST_CHECK(strchr(out, '\x1b') == NULL, "a raw escape reached the terminal:\n%s", out);
	ITEST_CHECK(strstr(out, "\nSales\tesc \\e[31mred\nSales\ttab\\there\n# 2 keys\n") != NULL,
	            "the keys, escaped:\n%s", out);
	free(out);
	free(err);
	proc_assert_logs_clean();
}

/* --json and jobs/README.md's JavaScript reader read the same keys, in order. */
static void test_index_get__json_and_the_sdk_reader_agree(void **state)
{
	struct wfx *x = *state;
	char config[640], *out = NULL, *err = NULL, *js = NULL;

	build_lists(x, config);
	assert_int_equal(
	    index_get(&out, &err, config, (const char *const[]){IL_JOB, "Jones", "--json", NULL}), 0);
	struct json_object *o = json_tokener_parse(out);
	ITEST_CHECK(o != NULL, "--json printed no JSON object:\n%s", out);
	struct json_object *v;
	assert_true(json_object_object_get_ex(o, "count", &v) && json_object_get_int(v) == (int)NKEYS);
	assert_true(json_object_object_get_ex(o, "exists", &v) && json_object_get_boolean(v));
	assert_true(json_object_object_get_ex(o, "row_key", &v));
	assert_string_equal(json_object_get_string(v), "Jones");
	assert_true(json_object_object_get_ex(o, "keys", &v));
	expect_keys(v, "--json");

	assert_int_equal(
	    proc_sdk(&js, (const char *const[]){"read-list", x->t->table2, IL_LIST_PK, "Jones", NULL}), 0);
	struct json_object *sdk_keys = json_tokener_parse(js);
	expect_keys(sdk_keys, "the SDK reader");
	json_object_put(sdk_keys);
	json_object_put(o);
	free(js);
	free(out);
	free(err);
	proc_assert_logs_clean();
}

/* A value no source has: no list, count 0, exit 0, for both readers. */
static void test_index_get__a_value_without_a_list_is_empty(void **state)
{
	struct wfx *x = *state;
	char config[640], *out = NULL, *err = NULL, *js = NULL;

	build_lists(x, config);
	assert_int_equal(
	    index_get(&out, &err, config, (const char *const[]){IL_JOB, "Nobody", "--json", NULL}), 0);
	ITEST_CHECK(strstr(out, "\"keys\":[],\"exists\":false,\"count\":0}") != NULL, "%s", out);
	free(out);
	free(err);
	assert_int_equal(index_get(&out, &err, config, (const char *const[]){IL_JOB, "Nobody", NULL}), 0);
	ITEST_CHECK(strstr(out, "# 0 keys (no list: no source has that value)\n") != NULL, "%s", out);
	assert_int_equal(
	    proc_sdk(&js, (const char *const[]){"read-list", x->t->table2, IL_LIST_PK, "Nobody", NULL}), 0);
	assert_string_equal(js, "[]");
	free(js);
	free(out);
	free(err);
}

/* What is not a list lookup is a usage error (exit 2) with a clear message. */
static void test_index_get__usage_errors(void **state)
{
	struct wfx *x = *state;
	char config[640], *out = NULL, *err = NULL;
	struct il_wopts o = IL_WOPTS_DEFAULT;
	static const struct {
		const char *args[4];
		const char *says;
	} cases[] = {
	    {{"no-such-job", "Jones", NULL}, "no job named 'no-such-job'"},
	    {{IL_JOB, NULL}, "expected get JOB VALUE"},
	    {{IL_JOB, "a/b", NULL}, "VALUE"},
	    {{IL_JOB, "Jones", "--partition=x#y", NULL}, "--partition"},
	};

	il_write_config(config, sizeof(config), x, "ig-usage", &o);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int code = index_get(&out, &err, config, cases[i].args);
		ITEST_CHECK(code == 2 && strstr(err, cases[i].says), "case %zu: exit %d, stderr: %s", i, code,
		            err);
		free(out);
		free(err);
		out = err = NULL;
	}
}

/* A list across a head and pages, built by a worker: `index get --json` and
 * the SDK reader read every key, in order. The workers and the command run
 * with small chunks and entities (ECW_TEST_IL_CHUNK_UNITS, _ENTITY_CHUNKS:
 * 1,000 units, 2 per entity), so 300 keys span pages. */
static void test_index_get__a_list_across_entities(void **state)
{
	struct wfx *x = *state;
	struct il_wopts o = IL_WOPTS_DEFAULT;
	char config[640], pk[32], rk[32], *out = NULL, *err = NULL, *js = NULL;
	enum { N = 300 };

	setenv("ECW_TEST_IL_CHUNK_UNITS", "1000", 1);
	setenv("ECW_TEST_IL_ENTITY_CHUNKS", "2", 1);
	for (int i = 0; i < N; i++) {
		snprintf(pk, sizeof(pk), "Dept %d", i % 7);
		snprintf(rk, sizeof(rk), "jones %06d", i);
		il_change(x, pk, rk, "Jones");
	}
	il_run_worker(x, "ig-pages", N, 8);
	il_write_config(config, sizeof(config), x, "ig-pages-get", &o);
	struct ecw_entity *head = il_get_or_null(x, x->t->table2, IL_LIST_PK, "Jones");
	ITEST_CHECK(head && il_str_prop(head, "Pages"), "300 keys should span pages");
	ecw_entity_free(head);

	assert_int_equal(
	    index_get(&out, &err, config, (const char *const[]){IL_JOB, "Jones", "--json", NULL}), 0);
	assert_int_equal(
	    proc_sdk(&js, (const char *const[]){"read-list", x->t->table2, IL_LIST_PK, "Jones", NULL}), 0);
	struct json_object *o1 = json_tokener_parse(out), *keys = NULL, *o2 = json_tokener_parse(js);
	ITEST_CHECK(o1 && json_object_object_get_ex(o1, "keys", &keys), "--json:\n%.300s", out);
	ITEST_CHECK(json_object_array_length(keys) == N && o2 && json_object_array_length(o2) == N,
	            "index get read %zu keys, the SDK reader %zu", json_object_array_length(keys),
	            o2 ? json_object_array_length(o2) : 0);
	for (size_t i = 0; i < N; i++) {
		struct json_object *a = json_object_array_get_idx(keys, i),
		                   *b = json_object_array_get_idx(o2, i);
		for (size_t k = 0; k < 2; k++)
			assert_string_equal(json_object_get_string(json_object_array_get_idx(a, k)),
			                    json_object_get_string(json_object_array_get_idx(b, k)));
		if (i > 0) { /* sorted: PartitionKey, then RowKey */
			struct json_object *p = json_object_array_get_idx(keys, i - 1);
			int c = strcmp(json_object_get_string(json_object_array_get_idx(p, 0)),
			               json_object_get_string(json_object_array_get_idx(a, 0)));
			if (c == 0)
				c = strcmp(json_object_get_string(json_object_array_get_idx(p, 1)),
				           json_object_get_string(json_object_array_get_idx(a, 1)));
			assert_true(c < 0);
		}
	}
	json_object_put(o1);
	json_object_put(o2);
	unsetenv("ECW_TEST_IL_CHUNK_UNITS");
	unsetenv("ECW_TEST_IL_ENTITY_CHUNKS");
	free(js);
	free(out);
	free(err);
	proc_assert_logs_clean();
}

/* The text of the function that starts with sig in the file's text: up to
 * its closing brace at the start of a line; NULL when absent. */
static char *function_text(const char *text, const char *sig)
{
	const char *at = strstr(text, sig), *end = at ? strstr(at, "\n}\n") : NULL;

	return end ? strndup(at, (size_t)(end - at)) : NULL;
}

/* jobs/README.md's reader is the code the tests run, function by function. */
static void test_index_get__the_readme_shows_the_tested_reader(void **state)
{
	static const char *const sigs[] = {"async function readIndexList(", "async function getOrNull(",
	                                   "function chunks("};
	char *readme = proc_read_file("jobs/README.md", NULL),
	     *js = proc_read_file("tests/interop/index-list-reader.js", NULL);

	(void)state;
	assert_non_null(readme);
	assert_non_null(js);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		char *a = function_text(readme, sigs[i]), *b = function_text(js, sigs[i]);
		ITEST_CHECK(a && b, "%s: README %s, reader %s", sigs[i], a ? "has it" : "lacks it",
		            b ? "has it" : "lacks it");
		ITEST_CHECK(strcmp(a, b) == 0, "README and tests/interop/index-list-reader.js differ in %s",
		            sigs[i]);
		free(a);
		free(b);
	}
	free(readme);
	free(js);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_index_get__prints_the_list_escaped, il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_index_get__json_and_the_sdk_reader_agree, il_setup,
	                                    il_teardown),
	    cmocka_unit_test_setup_teardown(test_index_get__a_value_without_a_list_is_empty, il_setup,
	                                    il_teardown),
	    cmocka_unit_test_setup_teardown(test_index_get__usage_errors, il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_index_get__a_list_across_entities, il_setup, il_teardown),
	    cmocka_unit_test(test_index_get__the_readme_shows_the_tested_reader),
	};
	return cmocka_run_group_tests_name("index_get", tests, NULL, NULL);
}
