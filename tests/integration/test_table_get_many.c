/* SPDX-License-Identifier: MIT */
/* test_table_get_many.c - ecw_table_get_many against a real Azurite: one
 * query per 14 distinct RowKeys (a filter of 15 comparisons is accepted),
 * each entity with the ETag a GET gives (the one to write If-Match with), the
 * absent ones NULL, a key named twice copied, continuations followed over a
 * partition of more than a page (Azurite answers such a filter in one page;
 * the fake of tests/unit/test_table_many.c forces continuations), and hostile keys (quotes, "or",
 * parentheses, '%', non-ASCII, Azurite's longest) read only as values: the
 * decoys a pasted-in key would match are never returned. The fake service of
 * tests/unit/test_table_many.c checks the same with 1 KiB keys, which
 * Azurite refuses to store (over 512 characters). */
#include "itest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(struct itest *t, const char *table, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Was", rk, strlen(rk)));
	ECW_ASSERT_OK(ecw_table_write(NULL, t->client, table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

static uint64_t requests(struct itest *t)
{
	struct ecw_client_stats st;

	ecw_client_stats(&st, t->client);
	return st.requests;
}

/* out[i] is what a GET of (pk, rks[i]) gives, ETag included, or NULL when
 * the GET finds nothing. */
static void check_against_get(struct itest *t, const char *table, struct ecw_entity **out, const char *pk,
                              const char *const *rks, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct ecw_entity *e = NULL;
		int err = ecw_table_get(&e, t->client, table, pk, rks[i]);
		if (err == ECW_ENOTFOUND) {
			ITEST_CHECK(out[i] == NULL, "key %zu: absent, but get_many returned %s", i,
			            itest_entity_json(out[i]));
			continue;
		}
		ECW_ASSERT_OK(err);
		ITEST_CHECK(out[i] != NULL, "key %zu (%.40s): present, but get_many returned nothing", i,
		            rks[i]);
		assert_string_equal(ecw_entity_rk(out[i]), rks[i]);
		assert_string_equal(ecw_entity_etag(out[i]), ecw_entity_etag(e));
		ITEST_CHECK(ecw_entity_equal(out[i], e), "key %zu: %s, a GET gives %s", i,
		            itest_entity_json(out[i]), itest_entity_json(e));
		ecw_entity_free(e);
	}
}

static void test_table_get_many__queries_of_fourteen(void **state)
{
	enum { N = 40 };
	struct itest *t = *state;
	const char *table = itest_table(t);
	char keys[N][16];
	const char *rks[N + 2];
	struct ecw_entity *out[N + 2];
	uint64_t before;

	ECW_ASSERT_OK(ecw_table_create(NULL, t->client, table));
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%02d", i);
		rks[i] = keys[i];
		if (i % 4)
			put(t, table, "p", keys[i]);
		put(t, table, "q", keys[i]); /* same RowKeys, another partition */
	}
	rks[N] = keys[1]; /* twice */
	rks[N + 1] = keys[5];
	before = requests(t);
	ECW_ASSERT_OK(ecw_table_get_many(out, t->client, table, "p", rks, 14));
	assert_int_equal(requests(t) - before, 1); /* 15 comparisons: accepted */
	check_against_get(t, table, out, "p", rks, 14);
	for (int i = 0; i < 14; i++)
		ecw_entity_free(out[i]);
	before = requests(t);
	ECW_ASSERT_OK(ecw_table_get_many(out, t->client, table, "p", rks, N + 2));
	assert_int_equal(requests(t) - before, 3);
	check_against_get(t, table, out, "p", rks, N + 2);
	assert_ptr_not_equal(out[1], out[N]);
	for (int i = 0; i < N + 2; i++)
		ecw_entity_free(out[i]);
}

static void test_table_get_many__hostile_keys_are_values(void **state)
{
	struct itest *t = *state;
	const char *table = itest_table(t);
	const char *pk = "it's (p) or 'x' eq 'x' 100%";
	char longest[513];
	const char *rks[] = {"o'neil",
	                     "x' or RowKey ne '",
	                     "a') or (PartitionKey ne 'z",
	                     "50% off %41 %2541",
	                     "Straße · 東京 · \xf0\x9f\x94\x91",
	                     "'",
	                     "''",
	                     longest,
	                     "never written",
	                     "RowKey eq 'decoy'"};
	size_t n = sizeof(rks) / sizeof(rks[0]);
	struct ecw_entity *out[sizeof(rks) / sizeof(rks[0])];

	memset(longest, 'k', 512);
	memcpy(longest + 500, "'or''or'(')'", 12);
	longest[512] = '\0';
	ECW_ASSERT_OK(ecw_table_create(NULL, t->client, table));
	for (size_t i = 0; i < n; i++)
		if (strcmp(rks[i], "never written") != 0 && strcmp(rks[i], "x' or RowKey ne '") != 0)
			put(t, table, pk, rks[i]);
	put(t, table, pk, "decoy");
	put(t, table, "z", "a");
	put(t, table, "p", "o'neil");
	ECW_ASSERT_OK(ecw_table_get_many(out, t->client, table, pk, rks, n));
	check_against_get(t, table, out, pk, rks, n);
	assert_null(out[1]);
	assert_null(out[8]);
	for (size_t i = 0; i < n; i++)
		ecw_entity_free(out[i]);
}

static void test_table_get_many__continuations_and_no_table(void **state)
{
	enum { N = 1100 };
	struct itest *t = *state;
	const char *table = itest_table(t);
	struct ecw_batch *b = NULL;
	const char *rks[3] = {"r0000", "r1099", "r0550"};
	struct ecw_entity *out[3];
	char rk[16];

	/* More than a page of the partition around the keys asked for. */
	ECW_ASSERT_OK(ecw_table_create(NULL, t->client, table));
	for (int i = 0; i < N; i++) {
		struct ecw_entity *e = NULL;
		if (!b)
			ECW_ASSERT_OK(ecw_batch_new(&b, table));
		snprintf(rk, sizeof(rk), "r%04d", i);
		ECW_ASSERT_OK(ecw_entity_new(&e, "p", rk));
		ECW_ASSERT_OK(ecw_entity_set_string(e, "Was", rk, strlen(rk)));
		ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL));
		ecw_entity_free(e);
		if (ecw_batch_count(b) == ECW_BATCH_MAX_OPS || i == N - 1) {
			ECW_ASSERT_OK(ecw_batch_submit(t->client, b));
			ecw_batch_free(b);
			b = NULL;
		}
	}
	ECW_ASSERT_OK(ecw_table_get_many(out, t->client, table, "p", rks, 3));
	check_against_get(t, table, out, "p", rks, 3);
	for (int i = 0; i < 3; i++)
		ecw_entity_free(out[i]);
	ECW_ASSERT_ERR(ecw_table_get_many(out, t->client, "NoSuchTable0", "p", rks, 3), ECW_ENOTABLE);
	assert_null(out[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_table_get_many__queries_of_fourteen, itest_setup,
	                                    itest_teardown),
	    cmocka_unit_test_setup_teardown(test_table_get_many__hostile_keys_are_values, itest_setup,
	                                    itest_teardown),
	    cmocka_unit_test_setup_teardown(test_table_get_many__continuations_and_no_table, itest_setup,
	                                    itest_teardown),
	};
	return cmocka_run_group_tests_name("table_get_many", tests, NULL, NULL);
}
