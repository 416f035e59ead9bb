/* SPDX-License-Identifier: MIT */
/* test_poison_group.c - the group keys of `poison list --group-by` and `--group`
 * (worker/cmd/poison_group.c): what the error normalising replaces and keeps,
 * each dimension's key for envelopes, envelopes lacking the field and foreign
 * messages, hostile values escaped and long ones cut, and the count table's
 * order, times and cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "poison_group.h"

static char *normalised(const char *error)
{
	struct ecw_buf b;

	ecw_buf_init(&b, 0);
	assert_int_equal(ecw_poison_group_normalise_error(&b, error, strlen(error)), 0);
	return ecw_buf_take(&b);
}

static void expect_normalised(const char *error, const char *want)
{
	char *got = normalised(error);

	assert_string_equal(got, want);
	free(got);
}

static void test_poison_group__normalise_replaces_variable_parts(void **state)
{
	(void)state;
	/* keys in quotes, numbers, request ids (GUIDs) */
	expect_normalised("GET /devstoreaccount1/ecwsrc(PartitionKey='Sales',RowKey='emp-0042'): 404 "
	                  "ResourceNotFound (request id 5f0c2a1e-7b3d-4e8f-9a0b-1c2d3e4f5a6b)",
	                  "GET /#/ecwsrc(PartitionKey='*',RowKey='*'): # ResourceNotFound (request id #)");
	/* an ETag: W/"datetime'...'" in double quotes */
	expect_normalised(
	    "PUT /t: 412 UpdateConditionNotSatisfied (If-Match W/\"datetime'2026-11-28T10%3A00Z'\")",
	    "PUT /t: # UpdateConditionNotSatisfied (If-Match W/\"*\")");
	expect_normalised("delivered 7 times (max_dequeue_count 5): the worker holding it stopped each time",
	                  "delivered # times (max_dequeue_count #): the worker holding it stopped each time");
	/* an apostrophe inside a word opens no quote; an unclosed quote is text */
	expect_normalised("the worker's key 'a b' and it's", "the worker's key '*' and it's");
	expect_normalised("unclosed 'quote 12", "unclosed 'quote #");
	expect_normalised("unclosed \"quote", "unclosed \"quote");
	/* words without digits stay, as do other characters */
	expect_normalised("max-dequeue snake_case 1.5 MB, Zo\xc3\xab!",
	                  "max-dequeue snake_case #.# MB, Zo\xc3\xab!");
	expect_normalised("", "");
	/* Two errors that differ only in keys and numbers are one. */
	char *a = normalised("test-fail: Sales/emp-0001 can never succeed after 3 rounds in 'tbl1'");
	char *b = normalised("test-fail: Marketing9/emp-7 can never succeed after 12 rounds in 'x'");
	char *c = normalised("test-fail: Sales/emp-0001 can not succeed after 3 rounds in 'tbl1'");
	assert_string_equal(a, "test-fail: Sales/# can never succeed after # rounds in '*'");
	/* "Sales" has no digit and stays, "Marketing9" has one: unquoted words
	 * without digits are text. */
	assert_string_equal(b, "test-fail: #/# can never succeed after # rounds in '*'");
	assert_string_not_equal(a, c);
	free(a);
	free(b);
	free(c);
}

static void view(struct ecw_poison_view *v, const char *job, const char *reason, const char *error,
                 int status, const char *code)
{
	memset(v, 0, sizeof(*v));
	v->envelope = true;
	v->job = (char *)job;
	v->reason = (char *)reason;
	v->error = (char *)error;
	v->http_status = status;
	v->error_code = (char *)code;
}

static void expect_key(enum ecw_group_dim dim, const struct ecw_poison_view *v, const char *want)
{
	struct ecw_buf b;
	enum ecw_group_dim back;

	ecw_buf_init(&b, 0);
	assert_int_equal(ecw_poison_group_key(&b, dim, v), 0);
	assert_string_equal(ecw_buf_cstr(&b), want);
	/* the key names its dimension and selects the message it came from */
	assert_int_equal(ecw_poison_group_key_dim(&back, ecw_buf_cstr(&b)), 0);
	assert_int_equal(back, dim);
	assert_true(ecw_poison_group_match(dim, ecw_buf_cstr(&b), v));
	ecw_buf_dispose(&b);
}

static void test_poison_group__keys_of_each_dimension(void **state)
{
	struct ecw_poison_view v, bare, foreign;

	(void)state;
	view(&v, "archive", "permanent", "GET /t(PartitionKey='p'): 409 EntityAlreadyExists", 409,
	     "EntityAlreadyExists");
	expect_key(ECW_GROUP_REASON, &v, "reason:permanent");
	expect_key(ECW_GROUP_JOB, &v, "job:archive");
	expect_key(ECW_GROUP_ERROR, &v, "error:GET /t(PartitionKey='*'): # EntityAlreadyExists");
	expect_key(ECW_GROUP_STATUS, &v, "status:409 EntityAlreadyExists");
	v.error_code = NULL;
	expect_key(ECW_GROUP_STATUS, &v, "status:409");
	v.http_status = 0;
	v.error_code = (char *)"OperationTimedOut";
	expect_key(ECW_GROUP_STATUS, &v, "status:OperationTimedOut");

	/* an envelope without the field (an undecodable message has no job) */
	view(&bare, NULL, NULL, NULL, 0, NULL);
	expect_key(ECW_GROUP_REASON, &bare, "reason:-");
	expect_key(ECW_GROUP_JOB, &bare, "job:-");
	expect_key(ECW_GROUP_ERROR, &bare, "error:-");
	expect_key(ECW_GROUP_STATUS, &bare, "status:-");

	memset(&foreign, 0, sizeof(foreign));
	foreign.original = (char *)"{\"job\":\"x\"}";
	foreign.original_len = strlen(foreign.original);
	expect_key(ECW_GROUP_JOB, &foreign, "job:(not an envelope)");
	expect_key(ECW_GROUP_STATUS, &foreign, "status:(not an envelope)");
	assert_false(ecw_poison_group_match(ECW_GROUP_JOB, "job:-", &foreign));
	assert_false(ecw_poison_group_match(ECW_GROUP_JOB, "job:(not an envelope)", &bare));
	assert_false(ecw_poison_group_match(ECW_GROUP_JOB, "job:archiv", &v));
}

/* A key holds no control character and stays within ECW_GROUP_KEY_MAX. */
static void test_poison_group__hostile_and_long_values(void **state)
{
	struct ecw_poison_view v;
	char long_job[1000];

	(void)state;
	view(&v,
	     "evil\x1b]0;pwned\x07\x1b[2J\xc2\x9b"
	     "31m\r\n\xff\xe2\x80\xae",
	     "permanent\x1b[31m", NULL, 0, NULL);
	expect_key(ECW_GROUP_JOB, &v, "job:evil\\e]0;pwned\\x07\\e[2J\\u009b31m\\r\\n\\xff\\u202e");
	expect_key(ECW_GROUP_REASON, &v, "reason:permanent\\e[31m");
	v.error = (char *)"bad \x1b[1m'\x1b[31m' 7\x1b";
	/* "1m" holds a digit, and the quote after it is no quote */
	expect_key(ECW_GROUP_ERROR, &v, "error:bad \\e[#'\\e[#' #\\e");

	/* cut to ECW_GROUP_VALUE_MAX bytes ending in "...", never inside a
	 * multi-byte character */
	memset(long_job, 'j', sizeof(long_job));
	memcpy(long_job + ECW_GROUP_VALUE_MAX - 4, "\xc3\xab", 2); /* ends at VALUE_MAX - 2 */
	long_job[sizeof(long_job) - 1] = '\0';
	view(&v, long_job, NULL, NULL, 0, NULL);
	struct ecw_buf b;
	ecw_buf_init(&b, 0);
	assert_int_equal(ecw_poison_group_key(&b, ECW_GROUP_JOB, &v), 0);
	assert_true(b.len <= ECW_GROUP_KEY_MAX);
	assert_int_equal(b.len, strlen("job:") + ECW_GROUP_VALUE_MAX - 4 + strlen("..."));
	assert_string_equal(b.ptr + b.len - 3, "...");
	assert_true(ecw_poison_group_match(ECW_GROUP_JOB, b.ptr, &v));
	ecw_buf_dispose(&b);
}

static void test_poison_group__dimension_and_key_parsing(void **state)
{
	enum ecw_group_dim d;
	static const char *const names[] = {"reason", "job", "error", "status"};
	static const enum ecw_group_dim dims[] = {ECW_GROUP_REASON, ECW_GROUP_JOB, ECW_GROUP_ERROR,
	                                          ECW_GROUP_STATUS};

	(void)state;
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(ecw_poison_group_dim_parse(&d, names[i]), 0);
		assert_int_equal(d, dims[i]);
	}
	static const char *const bad_dims[] = {"", "Job", "jobs", "code", "error:"};
	for (size_t i = 0; i < sizeof(bad_dims) / sizeof(bad_dims[0]); i++) {
		assert_int_equal(ecw_poison_group_dim_parse(&d, bad_dims[i]), ECW_EINVALID);
		assert_non_null(strstr(ecw_error_last()->message, "--group-by"));
	}
	assert_int_equal(ecw_poison_group_key_dim(&d, "error:a: b"), 0);
	assert_int_equal(d, ECW_GROUP_ERROR);
	assert_int_equal(ecw_poison_group_key_dim(&d, "status:-"), 0);
	assert_int_equal(d, ECW_GROUP_STATUS);
	static const char *const bad_keys[] = {"", "archive", "jobs:x", "job", "Job:x", ":x"};
	for (size_t i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); i++) {
		assert_int_equal(ecw_poison_group_key_dim(&d, bad_keys[i]), ECW_EINVALID);
		assert_non_null(strstr(ecw_error_last()->message, "--group"));
	}
}

static void test_poison_group__table_counts_sorts_and_caps(void **state)
{
	struct ecw_group_table *t = ecw_poison_group_table_new(3);
	const struct ecw_group *g, *other;
	size_t n;

	(void)state;
	assert_non_null(t);
	assert_int_equal(ecw_poison_group_table_add(t, "job:b", 300), 0);
	assert_int_equal(ecw_poison_group_table_add(t, "job:a", 500), 0);
	assert_int_equal(ecw_poison_group_table_add(t, "job:c", 100), 0);
	assert_int_equal(ecw_poison_group_table_add(t, "job:b", 100), 0);
	assert_int_equal(ecw_poison_group_table_add(t, "job:a", 200), 0);
	assert_int_equal(ecw_poison_group_table_add(t, "job:c", 0), 0); /* unknown time */
	assert_int_equal(ecw_poison_group_table_add(t, "job:b", 900), 0);
	/* beyond the cap of 3: counted together */
	assert_int_equal(ecw_poison_group_table_add(t, "job:d", 50), 0);
	assert_int_equal(ecw_poison_group_table_add(t, "job:e", 950), 0);
	assert_int_equal(ecw_poison_group_table_add(t, "job:d", 60), 0);

	g = ecw_poison_group_table_sorted(&n, t);
	assert_int_equal(n, 3);
	assert_string_equal(g[0].key, "job:b");
	assert_int_equal(g[0].count, 3);
	assert_int_equal(g[0].oldest, 100);
	assert_int_equal(g[0].newest, 900);
	/* a tie (2 each) goes by key */
	assert_string_equal(g[1].key, "job:a");
	assert_int_equal(g[1].count, 2);
	assert_int_equal(g[1].oldest, 200);
	assert_int_equal(g[1].newest, 500);
	assert_string_equal(g[2].key, "job:c");
	assert_int_equal(g[2].count, 2);
	assert_int_equal(g[2].oldest, 100);
	assert_int_equal(g[2].newest, 100);
	other = ecw_poison_group_table_other(t);
	assert_null(other->key);
	assert_int_equal(other->count, 3);
	assert_int_equal(other->oldest, 50);
	assert_int_equal(other->newest, 950);
	assert_int_equal(ecw_poison_group_table_add(t, "job:a", 1), ECW_EINVALID);
	ecw_poison_group_table_free(t);
	ecw_poison_group_table_free(NULL);

	t = ecw_poison_group_table_new(10);
	g = ecw_poison_group_table_sorted(&n, t);
	assert_int_equal(n, 0);
	assert_int_equal(ecw_poison_group_table_other(t)->count, 0);
	ecw_poison_group_table_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_poison_group__normalise_replaces_variable_parts),
	    cmocka_unit_test(test_poison_group__keys_of_each_dimension),
	    cmocka_unit_test(test_poison_group__hostile_and_long_values),
	    cmocka_unit_test(test_poison_group__dimension_and_key_parsing),
	    cmocka_unit_test(test_poison_group__table_counts_sorts_and_caps),
	};
	return cmocka_run_group_tests_name("poison_group", tests, NULL, NULL);
}
