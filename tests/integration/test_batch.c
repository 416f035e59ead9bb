/* SPDX-License-Identifier: MIT */
/* test_batch.c - entity group transactions against a real Azurite: 100
 * inserts with per-operation status and ETag, a mix of every operation, a
 * failing operation in the middle (its index reported, nothing applied), and
 * the service's rules enforced before any request. */
#include "itest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct ecw_entity *ent(const char *pk, const char *rk, int n)
{
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "n", n));
	return e;
}

static char *rk_of(char *buf, size_t cap, int i)
{
	snprintf(buf, cap, "r%03d", i);
	return buf;
}

/* Inserts one entity outside any batch; returns its ETag (free it). */
static char *insert_one(struct itest *t, const char *tb, const char *pk, const char *rk, int n,
                        const char *extra_name)
{
	struct ecw_entity *e = ent(pk, rk, n);
	if (extra_name)
		ECW_ASSERT_OK(ecw_entity_set_string(e, extra_name, "old", 3));
	char *etag = NULL;
	ECW_ASSERT_OK(ecw_table_write(&etag, t->client, tb, e, ECW_WRITE_INSERT, NULL));
	assert_non_null(etag);
	ecw_entity_free(e);
	return etag;
}

static struct ecw_entity *get_or_null(struct itest *t, const char *tb, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	int rc = ecw_table_get(&e, t->client, tb, pk, rk);
	if (rc == ECW_ENOTFOUND)
		return NULL;
	ECW_ASSERT_OK(rc);
	return e;
}

/* Every entity of a partition, in order. */
static size_t query_partition(struct itest *t, const char *tb, const char *pk, struct ecw_entity **out,
                              size_t cap)
{
	struct ecw_buf f;
	ecw_buf_init(&f, 1024);
	ECW_ASSERT_OK(ecw_buf_adds(&f, "PartitionKey eq "));
	ECW_ASSERT_OK(ecw_escape_filter_string(&f, pk));
	struct ecw_query_options o = {.filter = ecw_buf_cstr(&f)};
	struct ecw_table_query *q = NULL;
	ECW_ASSERT_OK(ecw_table_query_new(&q, t->client, tb, &o));
	size_t n = 0;
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (e == NULL)
			break;
		if (n < cap && out)
			out[n] = e;
		else
			ecw_entity_free(e);
		n++;
	}
	ecw_table_query_free(q);
	ecw_buf_dispose(&f);
	return n;
}

#define BATCH_TEXT "batch & <json> \"quoted\" \xc3\xa9 --changeset_x\r\n--batch_y"

static void test_batch__100_inserts(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_batch *b = NULL;
	char rk[16];

	ECW_ASSERT_OK(ecw_batch_new(&b, tb));
	assert_int_equal(ecw_batch_count(b), 0);
	for (int i = 0; i < ECW_BATCH_MAX_OPS; i++) {
		struct ecw_entity *e = ent("b", rk_of(rk, sizeof(rk), i), i);
		ECW_ASSERT_OK(ecw_entity_set_string(e, "text", BATCH_TEXT, strlen(BATCH_TEXT)));
		ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL));
		ecw_entity_free(e); /* the batch copied it */
	}
	assert_int_equal(ecw_batch_count(b), 100);
	struct ecw_client_stats before = itest_stats(t->client);
	ECW_ASSERT_OK(ecw_batch_submit(t->client, b));
	/* One request for all of them. */
	assert_int_equal(itest_stats(t->client).requests, before.requests + 1);
	assert_int_equal(ecw_batch_failed_index(b), -1);

	for (size_t i = 0; i < 100; i++) {
		int st = ecw_batch_status(b, i);
		ITEST_CHECK(st == 201 || st == 204, "operation %zu: status %d", i, st);
		const char *etag = ecw_batch_etag(b, i);
		ITEST_CHECK(etag != NULL && strncmp(etag, "W/\"", 3) == 0, "operation %zu: etag %s", i,
		            etag ? etag : "(null)");
	}

	struct ecw_entity *got[100];
	size_t n = query_partition(t, tb, "b", got, 100);
	assert_int_equal(n, 100);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(ecw_entity_rk(got[i]), rk_of(rk, sizeof(rk), (int)i));
		assert_int_equal(ecw_entity_get(got[i], "n")->v.i32, (int)i);
		assert_string_equal(ecw_entity_get(got[i], "text")->v.s, BATCH_TEXT);
		/* Each operation's ETag is that entity's ETag. */
		assert_string_equal(ecw_entity_etag(got[i]), ecw_batch_etag(b, i));
		ecw_entity_free(got[i]);
	}
	ecw_batch_free(b);
}

static void test_batch__mixed_operations(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	const char *pk = "o'brien & co";
	char *etag_upd = insert_one(t, tb, pk, "upd", 1, "gone_after_update");
	char *etag_mrg = insert_one(t, tb, pk, "mrg", 1, "kept_after_merge");
	char *etag_del = insert_one(t, tb, pk, "del", 1, NULL);
	free(insert_one(t, tb, pk, "ior", 1, "gone_after_replace"));
	free(insert_one(t, tb, pk, "iom", 1, "kept_after_upsert_merge"));

	struct ecw_batch *b = NULL;
	ECW_ASSERT_OK(ecw_batch_new(&b, tb));
	struct ecw_entity *e;
	e = ent(pk, "new", 10);
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL)); /* 0 */
	ecw_entity_free(e);
	e = ent(pk, "ior", 11);
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT_OR_REPLACE, e, NULL)); /* 1 */
	ecw_entity_free(e);
	e = ent(pk, "iom", 12);
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT_OR_MERGE, e, NULL)); /* 2 */
	ecw_entity_free(e);
	e = ent(pk, "upd", 13);
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_UPDATE, e, etag_upd)); /* 3 */
	ecw_entity_free(e);
	e = ent(pk, "mrg", 14);
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_MERGE, e, etag_mrg)); /* 4 */
	ecw_entity_free(e);
	e = ent(pk, "del", 0);
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_DELETE, e, etag_del)); /* 5 */
	ecw_entity_free(e);
	e = ent(pk, "new-upsert", 16);
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT_OR_REPLACE, e, NULL)); /* 6: creates */
	ecw_entity_free(e);
	assert_int_equal(ecw_batch_count(b), 7);

	ECW_ASSERT_OK(ecw_batch_submit(t->client, b));
	assert_int_equal(ecw_batch_failed_index(b), -1);
	int st0 = ecw_batch_status(b, 0);
	ITEST_CHECK(st0 == 201 || st0 == 204, "insert status %d", st0);
	for (size_t i = 1; i < 7; i++)
		ITEST_CHECK(ecw_batch_status(b, i) == 204, "operation %zu: status %d", i,
		            ecw_batch_status(b, i));
	for (size_t i = 0; i < 7; i++) {
		if (i == 5)
			assert_null(ecw_batch_etag(b, i)); /* deletes have none */
		else
			ITEST_CHECK(ecw_batch_etag(b, i) != NULL, "operation %zu: no etag", i);
	}

	struct ecw_entity *g;
	g = get_or_null(t, tb, pk, "new");
	assert_non_null(g);
	assert_int_equal(ecw_entity_get(g, "n")->v.i32, 10);
	assert_string_equal(ecw_entity_etag(g), ecw_batch_etag(b, 0));
	ecw_entity_free(g);

	g = get_or_null(t, tb, pk, "ior");
	assert_non_null(g);
	assert_int_equal(ecw_entity_get(g, "n")->v.i32, 11);
	assert_null(ecw_entity_get(g, "gone_after_replace"));
	assert_string_equal(ecw_entity_etag(g), ecw_batch_etag(b, 1));
	ecw_entity_free(g);

	g = get_or_null(t, tb, pk, "iom");
	assert_non_null(g);
	assert_int_equal(ecw_entity_get(g, "n")->v.i32, 12);
	assert_non_null(ecw_entity_get(g, "kept_after_upsert_merge"));
	ecw_entity_free(g);

	g = get_or_null(t, tb, pk, "upd");
	assert_non_null(g);
	assert_int_equal(ecw_entity_get(g, "n")->v.i32, 13);
	assert_null(ecw_entity_get(g, "gone_after_update"));
	assert_string_equal(ecw_entity_etag(g), ecw_batch_etag(b, 3));
	assert_string_not_equal(ecw_entity_etag(g), etag_upd);
	ecw_entity_free(g);

	g = get_or_null(t, tb, pk, "mrg");
	assert_non_null(g);
	assert_int_equal(ecw_entity_get(g, "n")->v.i32, 14);
	assert_non_null(ecw_entity_get(g, "kept_after_merge"));
	assert_string_equal(ecw_entity_etag(g), ecw_batch_etag(b, 4));
	ecw_entity_free(g);

	assert_null(get_or_null(t, tb, pk, "del"));

	g = get_or_null(t, tb, pk, "new-upsert");
	assert_non_null(g);
	assert_int_equal(ecw_entity_get(g, "n")->v.i32, 16);
	ecw_entity_free(g);

	assert_int_equal(query_partition(t, tb, pk, NULL, 0), 6);
	ecw_batch_free(b);
	free(etag_upd);
	free(etag_mrg);
	free(etag_del);
}

/* A 50-operation batch whose operation at 0-based index 36 (the 37th) is
 * `bad`; everything else would succeed on its own. */
static void run_failing_batch(struct itest *t, const char *tb, const char *pk, enum ecw_batch_op bad_op,
                              const char *bad_rk, const char *bad_if_match, int want_err, int want_status,
                              const char *want_code)
{
	char rk[16];
	struct ecw_batch *b = NULL;
	ECW_ASSERT_OK(ecw_batch_new(&b, tb));
	for (int i = 0; i < 50; i++) {
		struct ecw_entity *e;
		if (i == 36) {
			e = ent(pk, bad_rk, 36);
			ECW_ASSERT_OK(ecw_batch_add(b, bad_op, e, bad_if_match));
		} else {
			e = ent(pk, rk_of(rk, sizeof(rk), i), i);
			ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL));
		}
		ecw_entity_free(e);
	}
	ECW_ASSERT_ERR(ecw_batch_submit(t->client, b), want_err);
	/* The failing operation's status and code; the request id is the
	 * $batch request's (the sub-responses carry none). */
	itest_assert_service_error(want_status, want_code);
	ITEST_CHECK(ecw_batch_failed_index(b) == 36, "failed index %d, expected 36",
	            ecw_batch_failed_index(b));
	ecw_batch_free(b);
}

static void test_batch__37th_insert_conflict_nothing_applied(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	char *etag = insert_one(t, tb, "f", "existing", 1, "untouched");

	run_failing_batch(t, tb, "f", ECW_BATCH_INSERT, "existing", NULL, ECW_ECONFLICT, 409,
	                  "EntityAlreadyExists");

	struct ecw_entity *all[60];
	size_t n = query_partition(t, tb, "f", all, 60);
	ITEST_CHECK(n == 1, "%zu entities in the partition: the batch was partly applied", n);
	assert_string_equal(ecw_entity_rk(all[0]), "existing");
	assert_string_equal(ecw_entity_etag(all[0]), etag);
	ecw_entity_free(all[0]);
	free(etag);
}

static void test_batch__37th_update_missing_nothing_applied(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);

	run_failing_batch(t, tb, "g", ECW_BATCH_UPDATE, "missing", "*", ECW_ENOTFOUND, 404,
	                  "ResourceNotFound");
	size_t n = query_partition(t, tb, "g", NULL, 0);
	ITEST_CHECK(n == 0, "%zu entities in the partition: the batch was partly applied", n);
}

static void test_batch__37th_stale_etag_nothing_applied(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	char *etag1 = insert_one(t, tb, "h", "versioned", 1, NULL);
	struct ecw_entity *e = ent("h", "versioned", 2);
	char *etag2 = NULL;
	ECW_ASSERT_OK(ecw_table_write(&etag2, t->client, tb, e, ECW_WRITE_UPDATE, etag1));
	ecw_entity_free(e);

	run_failing_batch(t, tb, "h", ECW_BATCH_MERGE, "versioned", etag1, ECW_EPRECONDITION, 412,
	                  "UpdateConditionNotSatisfied");
	struct ecw_entity *all[60];
	size_t n = query_partition(t, tb, "h", all, 60);
	ITEST_CHECK(n == 1, "%zu entities in the partition: the batch was partly applied", n);
	assert_string_equal(ecw_entity_etag(all[0]), etag2);
	assert_int_equal(ecw_entity_get(all[0], "n")->v.i32, 2);
	ecw_entity_free(all[0]);
	free(etag1);
	free(etag2);
}

static void test_batch__first_op_fails_index_0(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_batch *b = NULL;
	ECW_ASSERT_OK(ecw_batch_new(&b, tb));
	struct ecw_entity *e = ent("z", "missing", 0);
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_DELETE, e, "*"));
	ecw_entity_free(e);
	e = ent("z", "other", 1);
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL));
	ecw_entity_free(e);
	ECW_ASSERT_ERR(ecw_batch_submit(t->client, b), ECW_ENOTFOUND);
	assert_int_equal(ecw_batch_failed_index(b), 0);
	assert_int_equal(query_partition(t, tb, "z", NULL, 0), 0);
	ecw_batch_free(b);
}

static void test_batch__101st_op_refused(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_batch *b = NULL;
	char rk[16];
	ECW_ASSERT_OK(ecw_batch_new(&b, tb));
	for (int i = 0; i < 100; i++) {
		struct ecw_entity *e = ent("l", rk_of(rk, sizeof(rk), i), i);
		ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT_OR_REPLACE, e, NULL));
		ecw_entity_free(e);
	}
	struct ecw_entity *e = ent("l", "r100", 100);
	ECW_ASSERT_ERR(ecw_batch_add(b, ECW_BATCH_INSERT_OR_REPLACE, e, NULL), ECW_EINVALID);
	ecw_entity_free(e);
	assert_int_equal(ecw_batch_count(b), 100);
	/* The refusal left a batch that still works. */
	ECW_ASSERT_OK(ecw_batch_submit(t->client, b));
	assert_int_equal(query_partition(t, tb, "l", NULL, 0), 100);
	ecw_batch_free(b);
}

static void test_batch__rules_enforced_before_request(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_client_stats before = itest_stats(t->client);
	struct ecw_batch *b = NULL;
	ECW_ASSERT_OK(ecw_batch_new(&b, tb));
	struct ecw_entity *e = ent("p1", "a", 1);
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL));
	/* The same RowKey twice. */
	ECW_ASSERT_ERR(ecw_batch_add(b, ECW_BATCH_INSERT_OR_MERGE, e, NULL), ECW_EINVALID);
	ecw_entity_free(e);
	/* Another PartitionKey (Azurite would accept it; the service does not). */
	e = ent("p2", "b", 2);
	ECW_ASSERT_ERR(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL), ECW_EINVALID);
	ecw_entity_free(e);
	/* UPDATE, MERGE and DELETE need an If-Match. */
	e = ent("p1", "c", 3);
	ECW_ASSERT_ERR(ecw_batch_add(b, ECW_BATCH_UPDATE, e, NULL), ECW_EINVALID);
	ECW_ASSERT_ERR(ecw_batch_add(b, ECW_BATCH_MERGE, e, NULL), ECW_EINVALID);
	ECW_ASSERT_ERR(ecw_batch_add(b, ECW_BATCH_DELETE, e, NULL), ECW_EINVALID);
	ecw_entity_free(e);
	assert_int_equal(ecw_batch_count(b), 1);
	assert_int_equal(itest_stats(t->client).requests, before.requests);
	ecw_batch_free(b);

	/* An empty batch sends nothing. */
	ECW_ASSERT_OK(ecw_batch_new(&b, tb));
	before = itest_stats(t->client);
	int rc = ecw_batch_submit(t->client, b);
	assert_true(rc == 0 || rc == ECW_EINVALID);
	assert_int_equal(itest_stats(t->client).requests, before.requests);
	ecw_batch_free(b);
}

static void test_batch__hostile_keys(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	const char *pk = "o'brien 001 Zo\xc3\xab";
	static const char *rks[] = {"a+b&c=d%", "key with  spaces ", "'", "(x)'y'' ~!*",
	                            "\xf0\x9f\x98\x80 emoji"};
	size_t nr = sizeof(rks) / sizeof(rks[0]);
	struct ecw_batch *b = NULL;
	ECW_ASSERT_OK(ecw_batch_new(&b, tb));
	for (size_t i = 0; i < nr; i++) {
		struct ecw_entity *e = ent(pk, rks[i], (int)i);
		ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT_OR_REPLACE, e, NULL));
		ecw_entity_free(e);
	}
	ECW_ASSERT_OK(ecw_batch_submit(t->client, b));
	char *etags[8];
	for (size_t i = 0; i < nr; i++) {
		struct ecw_entity *g = get_or_null(t, tb, pk, rks[i]);
		ITEST_CHECK(g != NULL, "entity %s missing", rks[i]);
		assert_int_equal(ecw_entity_get(g, "n")->v.i32, (int)i);
		etags[i] = strdup(ecw_entity_etag(g));
		assert_string_equal(etags[i], ecw_batch_etag(b, i));
		ecw_entity_free(g);
	}
	ecw_batch_free(b);

	/* Update and delete with ETags through the batch paths. */
	ECW_ASSERT_OK(ecw_batch_new(&b, tb));
	for (size_t i = 0; i < nr; i++) {
		struct ecw_entity *e = ent(pk, rks[i], 100 + (int)i);
		ECW_ASSERT_OK(ecw_batch_add(b, i % 2 ? ECW_BATCH_DELETE : ECW_BATCH_UPDATE, e, etags[i]));
		ecw_entity_free(e);
	}
	ECW_ASSERT_OK(ecw_batch_submit(t->client, b));
	for (size_t i = 0; i < nr; i++) {
		struct ecw_entity *g = get_or_null(t, tb, pk, rks[i]);
		if (i % 2) {
			assert_null(g);
		} else {
			assert_non_null(g);
			assert_int_equal(ecw_entity_get(g, "n")->v.i32, 100 + (int)i);
		}
		ecw_entity_free(g);
		free(etags[i]);
	}
	ecw_batch_free(b);
}

static void test_batch__every_type_survives(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	static const unsigned char bin[] = {0, 0, 1, 0};
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_entity_new(&e, "t", "all"));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "s", "\xc3\xa9\"\\\n", 5));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "i", -7));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "l", INT64_MIN));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "d", 50000.0));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "inf", -INFINITY));
	ECW_ASSERT_OK(ecw_entity_set_bool(e, "b", false));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "dt", "2026-08-19T10:00:00.1234567Z"));
	ECW_ASSERT_OK(ecw_entity_set_guid(e, "g", "6f9619ff-8b86-d011-b42d-00c04fc964ff"));
	ECW_ASSERT_OK(ecw_entity_set_binary(e, "bin", bin, sizeof(bin)));
	struct ecw_batch *b = NULL;
	ECW_ASSERT_OK(ecw_batch_new(&b, tb));
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL));
	ECW_ASSERT_OK(ecw_batch_submit(t->client, b));
	struct ecw_entity *g = get_or_null(t, tb, "t", "all");
	assert_non_null(g);
	assert_true(ecw_entity_equal(e, g));
	ecw_entity_free(g);
	ecw_entity_free(e);
	ecw_batch_free(b);
}

#define T(name) cmocka_unit_test_setup_teardown(name, itest_setup, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_batch__100_inserts),
	    T(test_batch__mixed_operations),
	    T(test_batch__37th_insert_conflict_nothing_applied),
	    T(test_batch__37th_update_missing_nothing_applied),
	    T(test_batch__37th_stale_etag_nothing_applied),
	    T(test_batch__first_op_fails_index_0),
	    T(test_batch__101st_op_refused),
	    T(test_batch__rules_enforced_before_request),
	    T(test_batch__hostile_keys),
	    T(test_batch__every_type_survives),
	};
	return cmocka_run_group_tests_name("batch", tests, NULL, NULL);
}
