/* SPDX-License-Identifier: MIT */
/* test_table_many.c - ecw_table_get_many against the in-memory Table service
 * (tests/unit/table_server.h, which refuses a $filter of more than 15
 * comparisons as the service does): one request per 14 distinct RowKeys,
 * every entity with its ETag, the absent ones NULL, continuations followed,
 * duplicates copied, and keys that would change the filter's structure if
 * pasted in (quotes, "or", parentheses, '%', non-ASCII, 1 KiB) read only as
 * values. */
#include "support.h"
#include "table_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T "Many"

struct fx {
	struct ecw_account *acct;
	struct ecw_client *c;
	struct table_server *s;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	table_server_connect(&f->acct, &f->c, &f->s, false);
	table_server_create_table(f->s, T);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	table_server_disconnect(f->acct, f->c, f->s);
	free(f);
	return 0;
}

static void seed(struct fx *f, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;

	assert_int_equal(ecw_entity_new(&e, pk, rk), 0);
	assert_int_equal(ecw_entity_set_string(e, "Was", rk, strlen(rk)), 0);
	table_server_put(f->s, T, e);
	ecw_entity_free(e);
}

static uint64_t requests(struct fx *f)
{
	struct ecw_client_stats st;

	ecw_client_stats(&st, f->c);
	return st.requests;
}

static void get_many(struct fx *f, struct ecw_entity **out, const char *pk, const char *const *rks, size_t n)
{
	int err = ecw_table_get_many(out, f->c, T, pk, rks, n);
	if (err != 0)
		fail_msg("get_many: %s: %s", ecw_error_name(err), ecw_error_last()->message);
}

/* out[i] is the stored (pk, rks[i]) with its ETag, or NULL when absent. */
static void check(struct fx *f, struct ecw_entity **out, const char *pk, const char *const *rks, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct ecw_entity *stored = table_server_find(f->s, T, pk, rks[i]);
		if (!stored) {
			assert_null(out[i]);
			continue;
		}
		assert_non_null(out[i]);
		assert_str(ecw_entity_pk(out[i]), pk);
		assert_str(ecw_entity_rk(out[i]), rks[i]);
		assert_str(ecw_entity_get(out[i], "Was")->v.s, rks[i]);
		assert_str(ecw_entity_etag(out[i]), ecw_entity_etag(stored));
	}
}

static void free_all(struct ecw_entity **out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ecw_entity_free(out[i]);
}

static void test_table_many__one_request_marks_absent(void **state)
{
	struct fx *f = *state;
	const char *rks[] = {"a", "b", "gone1", "c", "gone2", "d"};
	struct ecw_entity *out[6];
	uint64_t before;

	seed(f, "p", "a");
	seed(f, "p", "b");
	seed(f, "p", "c");
	seed(f, "p", "d");
	seed(f, "other", "gone1"); /* same RowKey, another partition: not ours */
	before = requests(f);
	get_many(f, out, "p", rks, 6);
	assert_int_equal(requests(f) - before, 1);
	check(f, out, "p", rks, 6);
	assert_null(out[2]);
	assert_null(out[4]);
	free_all(out, 6);
}

static void test_table_many__fourteen_keys_a_query(void **state)
{
	struct fx *f = *state;
	char keys[40][16];
	const char *rks[40];
	struct ecw_entity *out[40];
	uint64_t before;

	for (int i = 0; i < 40; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%02d", i);
		rks[i] = keys[i];
		if (i % 3)
			seed(f, "p", keys[i]);
	}
	/* 14 keys a query: 15 comparisons, the service's most; the fake
	 * refuses 16, so a 15th key would fail here. */
	before = requests(f);
	get_many(f, out, "p", rks, 14);
	assert_int_equal(requests(f) - before, 1);
	check(f, out, "p", rks, 14);
	free_all(out, 14);
	before = requests(f);
	get_many(f, out, "p", rks, 40);
	assert_int_equal(requests(f) - before, 3);
	check(f, out, "p", rks, 40);
	free_all(out, 40);
}

static void test_table_many__follows_continuations(void **state)
{
	struct fx *f = *state;
	const char *rks[] = {"a", "b", "c", "d", "e", "f", "g"};
	struct ecw_entity *out[7];
	uint64_t before;

	for (size_t i = 0; i < 7; i++)
		seed(f, "p", rks[i]);
	table_server_set_page_max(f->s, 2);
	before = requests(f);
	get_many(f, out, "p", rks, 7);
	assert_int_equal(requests(f) - before, 4); /* pages of 2, 2, 2, 1 */
	check(f, out, "p", rks, 7);
	free_all(out, 7);
}

static void test_table_many__duplicates_each_get_a_copy(void **state)
{
	struct fx *f = *state;
	const char *rks[] = {"a", "b", "a", "x", "a", "x", "c", "d", "e", "f", "g",
	                     "h", "i", "j", "k", "l", "m", "b", "n", "a", "l", "gone"};
	size_t n = sizeof(rks) / sizeof(rks[0]);
	struct ecw_entity *out[sizeof(rks) / sizeof(rks[0])];
	uint64_t before;

	for (size_t i = 0; i < n; i++)
		if (strcmp(rks[i], "gone") != 0 && strcmp(rks[i], "x") != 0)
			seed(f, "p", rks[i]);
	/* 16 distinct keys: two queries, however often each is named. */
	before = requests(f);
	get_many(f, out, "p", rks, n);
	assert_int_equal(requests(f) - before, 2);
	check(f, out, "p", rks, n);
	assert_ptr_not_equal(out[0], out[2]); /* copies, freed one by one */
	free_all(out, n);
}

static void test_table_many__keys_are_values_never_structure(void **state)
{
	struct fx *f = *state;
	char big[1025], bigger[1025];
	const char *pk = "it's (p) or 'x' eq 'x' 100%";
	const char *rks[] = {"o'neil",
	                     "x' or RowKey ne '",
	                     "a') or (PartitionKey ne 'z",
	                     "50% off %41 %2541",
	                     "Straße · 東京 · \xf0\x9f\x94\x91",
	                     "'",
	                     "''",
	                     big,
	                     bigger,
	                     "RowKey eq 'decoy'"};
	struct ecw_entity *out[10];

	memset(big, 'k', 1024);
	big[1024] = '\0';
	memset(bigger, 'k', 1024);
	memcpy(bigger + 1012, "'or''or'(')'", 12);
	bigger[1024] = '\0';
	for (size_t i = 0; i < 10; i++)
		if (i != 1 && i != 8)
			seed(f, pk, rks[i]);
	/* Decoys: what a filter with a key pasted in as structure would match. */
	seed(f, pk, "decoy");
	seed(f, "z", "a");
	seed(f, "p", "o'neil");
	get_many(f, out, pk, rks, 10);
	check(f, out, pk, rks, 10);
	assert_null(out[1]);
	assert_null(out[8]);
	free_all(out, 10);
}

static void test_table_many__refusals(void **state)
{
	struct fx *f = *state;
	const char *bad[] = {"ok", "no/slash"};
	const char *rks[] = {"a"};
	struct ecw_entity *out[2] = {(void *)1, (void *)1};
	uint64_t before = requests(f);

	/* A key the service would refuse: nothing is sent. */
	assert_int_equal(ecw_table_get_many(out, f->c, T, "p", bad, 2), ECW_EINVALID);
	assert_null(out[0]);
	assert_null(out[1]);
	assert_int_equal(requests(f) - before, 0);
	/* No table: ECW_ENOTABLE, not "absent". */
	assert_int_equal(ecw_table_get_many(out, f->c, "Nope", "p", rks, 1), ECW_ENOTABLE);
	assert_null(out[0]);
	/* Nothing asked: nothing sent. */
	before = requests(f);
	assert_int_equal(ecw_table_get_many(out, f->c, T, "p", rks, 0), 0);
	assert_int_equal(requests(f) - before, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_table_many__one_request_marks_absent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_table_many__fourteen_keys_a_query, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_table_many__follows_continuations, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_table_many__duplicates_each_get_a_copy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_table_many__keys_are_values_never_structure, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_table_many__refusals, setup, teardown),
	};
	return cmocka_run_group_tests_name("table_many", tests, NULL, NULL);
}
