/* SPDX-License-Identifier: MIT */
/* test_table.c - the Table client against a real Azurite: create, insert,
 * get, the write modes and If-Match, deletes, queries that follow
 * continuation tokens (with $filter, $select, $top and a limit), every EDM
 * type under hostile keys copied from one table to another, and keys refused
 * before any request. The "table" group gets a fresh table per test; the
 * "table_query" group shares one table of 2,500 entities. */
#include "itest.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------- */

static struct ecw_entity *new_entity(const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	assert_non_null(e);
	return e;
}

static char *write_entity(struct itest *t, const char *table, const struct ecw_entity *e,
                          enum ecw_write_mode mode, const char *if_match)
{
	char *etag = NULL;
	ECW_ASSERT_OK(ecw_table_write(&etag, t->client, table, e, mode, if_match));
	ITEST_CHECK(etag != NULL && strncmp(etag, "W/\"", 3) == 0, "etag %s", etag ? etag : "(null)");
	return etag;
}

static struct ecw_entity *get_entity(struct itest *t, const char *table, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_table_get(&e, t->client, table, pk, rk));
	assert_non_null(e);
	assert_string_equal(ecw_entity_pk(e), pk);
	assert_string_equal(ecw_entity_rk(e), rk);
	assert_non_null(ecw_entity_etag(e));
	assert_non_null(ecw_entity_timestamp(e));
	return e;
}

static void assert_gone(struct itest *t, const char *table, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	ECW_ASSERT_ERR(ecw_table_get(&e, t->client, table, pk, rk), ECW_ENOTFOUND);
	itest_assert_service_error(404, NULL); /* ResourceNotFound, or TableNotFound */
	ecw_entity_free(e);
}

static void assert_no_table(struct itest *t, const char *table)
{
	struct ecw_entity *e = NULL;
	ECW_ASSERT_ERR(ecw_table_get(&e, t->client, table, "p", "r"), ECW_ENOTABLE);
	itest_assert_service_error(404, "TableNotFound");
	assert_null(e);
}

static bool same_double(double a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	return memcmp(&a, &b, sizeof(a)) == 0;
}

/* Property by property, type by type; then ecw_entity_equal must agree. */
static void assert_same_entity(const struct ecw_entity *want, const struct ecw_entity *got)
{
	assert_string_equal(ecw_entity_pk(got), ecw_entity_pk(want));
	assert_string_equal(ecw_entity_rk(got), ecw_entity_rk(want));
	for (size_t i = 0; i < ecw_entity_count(want); i++) {
		const struct ecw_prop *w = ecw_entity_at(want, i);
		const struct ecw_prop *g = ecw_entity_get(got, w->name);
		ITEST_CHECK(g != NULL, "property %s missing", w->name);
		ITEST_CHECK(g->type == w->type, "property %s: type %s, expected %s", w->name,
		            ecw_entity_edm_name(g->type), ecw_entity_edm_name(w->type));
		switch (w->type) {
		case ECW_EDM_STRING:
		case ECW_EDM_DATETIME:
		case ECW_EDM_GUID:
			ITEST_CHECK(g->len == w->len && memcmp(g->v.s, w->v.s, w->len) == 0 &&
			                g->v.s[g->len] == '\0',
			            "property %s: \"%s\" (%zu bytes), expected \"%s\" (%zu bytes)", w->name,
			            g->v.s, g->len, w->v.s, w->len);
			break;
		case ECW_EDM_BINARY:
			ITEST_CHECK(g->len == w->len &&
			                (w->len == 0 || memcmp(g->v.bin, w->v.bin, w->len) == 0),
			            "property %s: binary of %zu bytes differs (expected %zu)", w->name,
			            g->len, w->len);
			break;
		case ECW_EDM_INT32:
			ITEST_CHECK(g->v.i32 == w->v.i32, "property %s: %" PRId32 ", expected %" PRId32,
			            w->name, g->v.i32, w->v.i32);
			break;
		case ECW_EDM_INT64:
			ITEST_CHECK(g->v.i64 == w->v.i64, "property %s: %" PRId64 ", expected %" PRId64,
			            w->name, g->v.i64, w->v.i64);
			break;
		case ECW_EDM_DOUBLE:
			ITEST_CHECK(same_double(g->v.d, w->v.d), "property %s: %.17g, expected %.17g",
			            w->name, g->v.d, w->v.d);
			break;
		case ECW_EDM_BOOLEAN:
			ITEST_CHECK(g->v.b == w->v.b, "property %s: %d, expected %d", w->name, g->v.b,
			            w->v.b);
			break;
		}
	}
	ITEST_CHECK(ecw_entity_count(got) == ecw_entity_count(want), "%zu properties, expected %zu",
	            ecw_entity_count(got), ecw_entity_count(want));
	assert_true(ecw_entity_equal(want, got));
	assert_true(ecw_entity_equal(got, want));
}

/* ---- group "table": a fresh table per test ------------------------------- */

static void test_table__create_idempotent(void **state)
{
	struct itest *t = *state;
	bool created = false;
	t->table_used = true;
	ECW_ASSERT_OK(ecw_table_create(&created, t->client, t->table));
	assert_true(created);
	created = true;
	ECW_ASSERT_OK(ecw_table_create(&created, t->client, t->table));
	assert_false(created);
	ECW_ASSERT_OK(ecw_table_create(NULL, t->client, t->table));

	/* A deleted table: reads are ECW_ENOTABLE. */
	ECW_ASSERT_OK(ecw_table_delete_table(t->client, t->table));
	assert_no_table(t, t->table);
}

static void test_table__bad_name_rejected_before_request(void **state)
{
	struct itest *t = *state;
	struct ecw_client_stats before = itest_stats(t->client);
	static const char *bad[] = {"ab",
	                            "1abc",
	                            "has-dash",
	                            "has_underscore",
	                            "sp ace",
	                            "",
	                            "a234567890123456789012345678901234567890123456789012345678901234"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bool created = true;
		ECW_ASSERT_ERR(ecw_table_create(&created, t->client, bad[i]), ECW_EINVALID);
	}
	assert_int_equal(itest_stats(t->client).requests, before.requests);
}

static void test_table__insert_then_conflict(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_entity *e = new_entity("p", "r1");
	ECW_ASSERT_OK(ecw_entity_set_string(e, "name", "first", 5));

	char *etag = write_entity(t, tb, e, ECW_WRITE_INSERT, NULL);
	ECW_ASSERT_OK(ecw_entity_set_string(e, "name", "second", 6));
	char *etag2 = NULL;
	ECW_ASSERT_ERR(ecw_table_write(&etag2, t->client, tb, e, ECW_WRITE_INSERT, NULL), ECW_ECONFLICT);
	itest_assert_service_error(409, "EntityAlreadyExists");
	assert_null(etag2);

	/* The first insert stands. */
	struct ecw_entity *g = get_entity(t, tb, "p", "r1");
	assert_string_equal(ecw_entity_get(g, "name")->v.s, "first");
	assert_string_equal(ecw_entity_etag(g), etag);
	ecw_entity_free(g);
	ecw_entity_free(e);
	free(etag);
}

static void test_table__get_and_not_found(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_entity *e = new_entity("p", "r");
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "n", 42));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "s", "str", 3));
	char *etag = write_entity(t, tb, e, ECW_WRITE_INSERT, NULL);

	struct ecw_entity *g = get_entity(t, tb, "p", "r");
	assert_same_entity(e, g);
	assert_string_equal(ecw_entity_etag(g), etag);
	ecw_entity_free(g);

	assert_gone(t, tb, "p", "missing");
	assert_gone(t, tb, "missing", "r");
	/* A missing table reads as one: ECW_ENOTABLE. */
	assert_no_table(t, t->table2);
	ecw_entity_free(e);
	free(etag);
}

static void test_table__insert_or_merge_keeps_insert_or_replace_drops(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);

	/* Both modes also create a missing entity. */
	struct ecw_entity *m = new_entity("p", "merged");
	ECW_ASSERT_OK(ecw_entity_set_int32(m, "a", 1));
	ECW_ASSERT_OK(ecw_entity_set_string(m, "b", "x", 1));
	free(write_entity(t, tb, m, ECW_WRITE_INSERT_OR_MERGE, NULL));
	struct ecw_entity *r = new_entity("p", "replaced");
	ECW_ASSERT_OK(ecw_entity_set_int32(r, "a", 1));
	ECW_ASSERT_OK(ecw_entity_set_string(r, "b", "x", 1));
	free(write_entity(t, tb, r, ECW_WRITE_INSERT_OR_REPLACE, NULL));

	/* Merge: c is added, a changes, b stays. */
	struct ecw_entity *m2 = new_entity("p", "merged");
	ECW_ASSERT_OK(ecw_entity_set_bool(m2, "c", true));
	ECW_ASSERT_OK(ecw_entity_set_int32(m2, "a", 2));
	free(write_entity(t, tb, m2, ECW_WRITE_INSERT_OR_MERGE, NULL));
	struct ecw_entity *g = get_entity(t, tb, "p", "merged");
	assert_int_equal(ecw_entity_count(g), 3);
	assert_int_equal(ecw_entity_get(g, "a")->v.i32, 2);
	assert_string_equal(ecw_entity_get(g, "b")->v.s, "x");
	assert_true(ecw_entity_get(g, "c")->v.b);
	ecw_entity_free(g);

	/* Replace: only d remains. */
	struct ecw_entity *r2 = new_entity("p", "replaced");
	ECW_ASSERT_OK(ecw_entity_set_int32(r2, "d", 5));
	free(write_entity(t, tb, r2, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	g = get_entity(t, tb, "p", "replaced");
	assert_same_entity(r2, g);
	assert_null(ecw_entity_get(g, "a"));
	assert_null(ecw_entity_get(g, "b"));
	ecw_entity_free(g);

	ecw_entity_free(m);
	ecw_entity_free(m2);
	ecw_entity_free(r);
	ecw_entity_free(r2);
}

static void test_table__if_match_argument_checked(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_entity *e = new_entity("p", "r");
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "n", 1));
	struct ecw_client_stats before = itest_stats(t->client);
	char *etag = NULL;
	/* UPDATE and MERGE need an If-Match; the others must not get one. */
	ECW_ASSERT_ERR(ecw_table_write(&etag, t->client, tb, e, ECW_WRITE_UPDATE, NULL), ECW_EINVALID);
	ECW_ASSERT_ERR(ecw_table_write(&etag, t->client, tb, e, ECW_WRITE_MERGE, NULL), ECW_EINVALID);
	ECW_ASSERT_ERR(ecw_table_write(&etag, t->client, tb, e, ECW_WRITE_INSERT, "*"), ECW_EINVALID);
	ECW_ASSERT_ERR(ecw_table_write(&etag, t->client, tb, e, ECW_WRITE_INSERT_OR_REPLACE, "*"),
	               ECW_EINVALID);
	ECW_ASSERT_ERR(ecw_table_write(&etag, t->client, tb, e, ECW_WRITE_INSERT_OR_MERGE, "*"),
	               ECW_EINVALID);
	assert_null(etag);
	assert_int_equal(itest_stats(t->client).requests, before.requests);
	assert_gone(t, tb, "p", "r");
	ecw_entity_free(e);
}

static void test_table__update_if_match(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_entity *e = new_entity("p", "r");
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "v", 1));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "keep", "only in v1", 10));
	char *etag1 = write_entity(t, tb, e, ECW_WRITE_INSERT, NULL);

	/* Right ETag: replaced (keep is gone), new ETag. */
	struct ecw_entity *e2 = new_entity("p", "r");
	ECW_ASSERT_OK(ecw_entity_set_int32(e2, "v", 2));
	char *etag2 = write_entity(t, tb, e2, ECW_WRITE_UPDATE, etag1);
	assert_string_not_equal(etag2, etag1);
	struct ecw_entity *g = get_entity(t, tb, "p", "r");
	assert_same_entity(e2, g);
	assert_string_equal(ecw_entity_etag(g), etag2);
	ecw_entity_free(g);

	/* Stale ETag: refused, nothing changes. */
	struct ecw_entity *e3 = new_entity("p", "r");
	ECW_ASSERT_OK(ecw_entity_set_int32(e3, "v", 3));
	char *etag3 = NULL;
	ECW_ASSERT_ERR(ecw_table_write(&etag3, t->client, tb, e3, ECW_WRITE_UPDATE, etag1),
	               ECW_EPRECONDITION);
	itest_assert_service_error(412, "UpdateConditionNotSatisfied");
	assert_null(etag3);
	g = get_entity(t, tb, "p", "r");
	assert_int_equal(ecw_entity_get(g, "v")->v.i32, 2);
	ecw_entity_free(g);

	/* "*": unconditional. */
	etag3 = write_entity(t, tb, e3, ECW_WRITE_UPDATE, "*");
	g = get_entity(t, tb, "p", "r");
	assert_same_entity(e3, g);
	assert_string_equal(ecw_entity_etag(g), etag3);
	ecw_entity_free(g);

	/* UPDATE never creates. */
	struct ecw_entity *nx = new_entity("p", "absent");
	ECW_ASSERT_OK(ecw_entity_set_int32(nx, "v", 1));
	char *etag4 = NULL;
	ECW_ASSERT_ERR(ecw_table_write(&etag4, t->client, tb, nx, ECW_WRITE_UPDATE, "*"), ECW_ENOTFOUND);
	assert_gone(t, tb, "p", "absent");

	ecw_entity_free(nx);
	ecw_entity_free(e);
	ecw_entity_free(e2);
	ecw_entity_free(e3);
	free(etag1);
	free(etag2);
	free(etag3);
}

static void test_table__merge_if_match(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_entity *e = new_entity("p", "r");
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "v", 1));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "keep", "kept", 4));
	char *etag1 = write_entity(t, tb, e, ECW_WRITE_INSERT, NULL);

	struct ecw_entity *m = new_entity("p", "r");
	ECW_ASSERT_OK(ecw_entity_set_int32(m, "v", 2));
	ECW_ASSERT_OK(ecw_entity_set_int64(m, "added", INT64_C(9007199254740993)));
	char *etag2 = write_entity(t, tb, m, ECW_WRITE_MERGE, etag1);
	assert_string_not_equal(etag2, etag1);
	struct ecw_entity *g = get_entity(t, tb, "p", "r");
	assert_int_equal(ecw_entity_count(g), 3);
	assert_int_equal(ecw_entity_get(g, "v")->v.i32, 2);
	assert_string_equal(ecw_entity_get(g, "keep")->v.s, "kept");
	assert_int_equal(ecw_entity_get(g, "added")->type, ECW_EDM_INT64);
	assert_true(ecw_entity_get(g, "added")->v.i64 == INT64_C(9007199254740993));
	assert_string_equal(ecw_entity_etag(g), etag2);
	ecw_entity_free(g);

	/* Stale. */
	struct ecw_entity *m2 = new_entity("p", "r");
	ECW_ASSERT_OK(ecw_entity_set_int32(m2, "v", 3));
	char *etag3 = NULL;
	ECW_ASSERT_ERR(ecw_table_write(&etag3, t->client, tb, m2, ECW_WRITE_MERGE, etag1), ECW_EPRECONDITION);
	itest_assert_service_error(412, "UpdateConditionNotSatisfied");
	g = get_entity(t, tb, "p", "r");
	assert_int_equal(ecw_entity_get(g, "v")->v.i32, 2);
	ecw_entity_free(g);

	/* "*". */
	etag3 = write_entity(t, tb, m2, ECW_WRITE_MERGE, "*");
	g = get_entity(t, tb, "p", "r");
	assert_int_equal(ecw_entity_get(g, "v")->v.i32, 3);
	assert_string_equal(ecw_entity_get(g, "keep")->v.s, "kept");
	ecw_entity_free(g);

	/* MERGE never creates. */
	struct ecw_entity *nx = new_entity("p", "absent");
	ECW_ASSERT_OK(ecw_entity_set_int32(nx, "v", 1));
	char *etag4 = NULL;
	ECW_ASSERT_ERR(ecw_table_write(&etag4, t->client, tb, nx, ECW_WRITE_MERGE, "*"), ECW_ENOTFOUND);
	assert_gone(t, tb, "p", "absent");

	ecw_entity_free(nx);
	ecw_entity_free(e);
	ecw_entity_free(m);
	ecw_entity_free(m2);
	free(etag1);
	free(etag2);
	free(etag3);
}

static void test_table__delete_if_match(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_entity *e = new_entity("p", "r");
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "v", 1));
	char *etag1 = write_entity(t, tb, e, ECW_WRITE_INSERT, NULL);
	char *etag2 = write_entity(t, tb, e, ECW_WRITE_UPDATE, etag1);

	ECW_ASSERT_ERR(ecw_table_delete(t->client, tb, "p", "r", etag1), ECW_EPRECONDITION);
	itest_assert_service_error(412, "UpdateConditionNotSatisfied");
	struct ecw_entity *g = get_entity(t, tb, "p", "r");
	ecw_entity_free(g);

	ECW_ASSERT_OK(ecw_table_delete(t->client, tb, "p", "r", etag2));
	assert_gone(t, tb, "p", "r");
	ECW_ASSERT_ERR(ecw_table_delete(t->client, tb, "p", "r", "*"), ECW_ENOTFOUND);
	itest_assert_service_error(404, "ResourceNotFound");

	/* "*" deletes whatever version exists. */
	free(write_entity(t, tb, e, ECW_WRITE_INSERT, NULL));
	ECW_ASSERT_OK(ecw_table_delete(t->client, tb, "p", "r", "*"));
	assert_gone(t, tb, "p", "r");

	ecw_entity_free(e);
	free(etag1);
	free(etag2);
}

static void test_table__delete_if_exists(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	bool deleted = true;
	ECW_ASSERT_OK(ecw_table_delete_if_exists(&deleted, t->client, tb, "p", "missing"));
	assert_false(deleted);

	struct ecw_entity *e = new_entity("p", "r");
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "v", 1));
	free(write_entity(t, tb, e, ECW_WRITE_INSERT, NULL));
	deleted = false;
	ECW_ASSERT_OK(ecw_table_delete_if_exists(&deleted, t->client, tb, "p", "r"));
	assert_true(deleted);
	assert_gone(t, tb, "p", "r");
	ECW_ASSERT_OK(ecw_table_delete_if_exists(NULL, t->client, tb, "p", "r"));
	ecw_entity_free(e);
}

/* Keys the URL, the signature, $filter and JSON all have to get right. */
static const char *const hostile_keys[][2] = {
    {"o'brien 001", "a+b&c=d%"},
    {"Zo\xc3\xab", "key with  spaces "},
    {" leading space", "(parens) 'quotes'' ~!*"},
    {"\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "%41%2F%25 literal"},
    {"semi;colon,comma:colon@at$dollar", "ends with quote'"},
    {"'", "''"},
    {"nbsp\xc2\xa0 and \xe2\x82\xac", "=&"},
};

static struct ecw_entity *every_type_entity(const char *pk, const char *rk)
{
	struct ecw_entity *e = new_entity(pk, rk);
	static const char multi[] =
	    "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac";
	static const char tricky[] = "quote\" back\\slash /slash \t\n\r ctl\x01\x1f end";
	static const unsigned char bin_zeros[] = {0, 1, 0, 255, 0, 0};
	unsigned char bin_all[256];
	for (int i = 0; i < 256; i++)
		bin_all[i] = (unsigned char)i;

	ECW_ASSERT_OK(ecw_entity_set_string(e, "str", multi, strlen(multi)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "strEmpty", "", 0));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "strTricky", tricky, strlen(tricky)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "strLooksLikeNumber", "12345", 5));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "i32", 42));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "i32Min", INT32_MIN));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "i32Max", INT32_MAX));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "i32Zero", 0));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "i64Big", INT64_C(9007199254740993)));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "i64Min", INT64_MIN));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "i64Max", INT64_MAX));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "i64Small", 7)); /* small, still Int64 */
	ECW_ASSERT_OK(ecw_entity_set_double(e, "dIntegral", 50000.0));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "dTenth", 0.1));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "dThird", 1.0 / 3.0));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "dZero", 0.0));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "dNegSmall", -2.5e-300));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "dHuge", 1e300));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "dDenormal", 5e-324));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "dBeyondInt64", 1.2345678901234567e19));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "dNaN", NAN));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "dInf", INFINITY));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "dNegInf", -INFINITY));
	ECW_ASSERT_OK(ecw_entity_set_bool(e, "bTrue", true));
	ECW_ASSERT_OK(ecw_entity_set_bool(e, "bFalse", false));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "dt7", "2026-08-19T10:00:00.1234567Z"));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "dtShort", "2026-08-19T10:00:00.5Z"));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "dtNoFrac", "1601-01-01T00:00:00Z"));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "dtMax", "9999-12-31T23:59:59.9999999Z"));
	ECW_ASSERT_OK(ecw_entity_set_guid(e, "guid", "6f9619ff-8b86-d011-b42d-00c04fc964ff"));
	ECW_ASSERT_OK(ecw_entity_set_guid(e, "guidUpper", "6F9619FF-8B86-D011-B42D-00C04FC964FF"));
	ECW_ASSERT_OK(ecw_entity_set_binary(e, "binZeros", bin_zeros, sizeof(bin_zeros)));
	ECW_ASSERT_OK(ecw_entity_set_binary(e, "binAll", bin_all, sizeof(bin_all)));
	ECW_ASSERT_OK(ecw_entity_set_binary(e, "binOneZero", bin_zeros, 1));
	return e;
}

static void test_table__every_edm_type_hostile_keys_copy(void **state)
{
	struct itest *t = *state;
	const char *ta = itest_table(t);
	const char *tbl = itest_table2(t);

	/* What the entity module keeps: 7 fractional digits. */
	struct ecw_entity *probe = every_type_entity("p", "r");
	assert_string_equal(ecw_entity_get(probe, "dt7")->v.s, "2026-08-19T10:00:00.1234567Z");
	assert_string_equal(ecw_entity_get(probe, "dtShort")->v.s, "2026-08-19T10:00:00.5000000Z");
	assert_string_equal(ecw_entity_get(probe, "dtNoFrac")->v.s, "1601-01-01T00:00:00.0000000Z");
	ecw_entity_free(probe);

	for (size_t k = 0; k < sizeof(hostile_keys) / sizeof(hostile_keys[0]); k++) {
		const char *pk = hostile_keys[k][0];
		const char *rk = hostile_keys[k][1];
		struct ecw_entity *orig = every_type_entity(pk, rk);

		char *etag_a = write_entity(t, ta, orig, ECW_WRITE_INSERT, NULL);
		struct ecw_entity *a = get_entity(t, ta, pk, rk);
		assert_same_entity(orig, a);
		assert_string_equal(ecw_entity_etag(a), etag_a);
		/* The read entity has types the literal JSON could not tell apart. */
		assert_int_equal(ecw_entity_get(a, "dIntegral")->type, ECW_EDM_DOUBLE);
		assert_int_equal(ecw_entity_get(a, "i64Small")->type, ECW_EDM_INT64);
		assert_int_equal(ecw_entity_get(a, "strLooksLikeNumber")->type, ECW_EDM_STRING);
		assert_string_equal(ecw_entity_get(a, "dt7")->v.s, "2026-08-19T10:00:00.1234567Z");

		/* Copy to B as it was read (ETag and all), read back, compare. */
		char *etag_b = write_entity(t, tbl, a, ECW_WRITE_INSERT_OR_REPLACE, NULL);
		struct ecw_entity *b = get_entity(t, tbl, pk, rk);
		assert_same_entity(orig, b);
		assert_same_entity(a, b);

		/* The same entity found by a $filter on the hostile keys. */
		struct ecw_buf f;
		ecw_buf_init(&f, 4096);
		ECW_ASSERT_OK(ecw_buf_adds(&f, "PartitionKey eq "));
		ECW_ASSERT_OK(ecw_escape_filter_string(&f, pk));
		ECW_ASSERT_OK(ecw_buf_adds(&f, " and RowKey eq "));
		ECW_ASSERT_OK(ecw_escape_filter_string(&f, rk));
		struct ecw_query_options qo = {.filter = ecw_buf_cstr(&f)};
		struct ecw_table_query *q = NULL;
		ECW_ASSERT_OK(ecw_table_query_new(&q, t->client, tbl, &qo));
		struct ecw_entity *found = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&found, q));
		ITEST_CHECK(found != NULL, "filter %s found nothing", ecw_buf_cstr(&f));
		assert_same_entity(orig, found);
		ecw_entity_free(found);
		found = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&found, q));
		assert_null(found);
		ecw_table_query_free(q);
		ecw_buf_dispose(&f);

		/* MERGE and DELETE on the hostile path as well. */
		struct ecw_entity *m = new_entity(pk, rk);
		ECW_ASSERT_OK(ecw_entity_set_string(m, "merged", "yes", 3));
		char *etag_m = write_entity(t, ta, m, ECW_WRITE_MERGE, etag_a);
		struct ecw_entity *am = get_entity(t, ta, pk, rk);
		assert_int_equal(ecw_entity_count(am), ecw_entity_count(orig) + 1);
		ECW_ASSERT_OK(ecw_table_delete(t->client, ta, pk, rk, etag_m));
		assert_gone(t, ta, pk, rk);

		ecw_entity_free(am);
		ecw_entity_free(m);
		ecw_entity_free(orig);
		ecw_entity_free(a);
		ecw_entity_free(b);
		free(etag_a);
		free(etag_b);
		free(etag_m);
	}
}

static void test_table__empty_keys(void **state)
{
	/* The service allows empty PartitionKey and RowKey values. */
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_entity *e = new_entity("", "");
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "n", 1));
	char *etag = write_entity(t, tb, e, ECW_WRITE_INSERT, NULL);
	struct ecw_entity *g = get_entity(t, tb, "", "");
	assert_same_entity(e, g);
	ECW_ASSERT_OK(ecw_table_delete(t->client, tb, "", "", etag));
	assert_gone(t, tb, "", "");
	ecw_entity_free(g);
	ecw_entity_free(e);
	free(etag);
}

static void test_table__invalid_keys_rejected_before_request(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	char longkey[ECW_KEY_MAX + 2];
	memset(longkey, 'k', ECW_KEY_MAX + 1);
	longkey[ECW_KEY_MAX + 1] = '\0'; /* 1025 bytes */
	char longmb[ECW_KEY_MAX + 2];    /* 512 x "é" + "a": 1025 bytes, 513 characters */
	for (int i = 0; i < 512; i++)
		memcpy(longmb + 2 * i, "\xc3\xa9", 2);
	longmb[1024] = 'a';
	longmb[1025] = '\0';
	const char *bad[] = {
	    "a/b",  "a\\b",    "a#b",        "a?b",        "tab\there",     "new\nline",      "nul\x01",
	    "\x1f", "del\x7f", "c1\xc2\x80", "c1\xc2\x9f", "bad utf8 \xff", "truncated \xc3", longkey,
	    longmb,
	};
	struct ecw_client_stats before = itest_stats(t->client);
	struct ecw_entity *ok = new_entity("p", "r");

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *k = bad[i];
		struct ecw_entity *e = NULL;
		bool deleted = false;
		ECW_ASSERT_ERR(ecw_entity_key_check(k, "PartitionKey"), ECW_EINVALID);
		ECW_ASSERT_ERR(ecw_entity_new(&e, k, "r"), ECW_EINVALID);
		ECW_ASSERT_ERR(ecw_entity_new(&e, "p", k), ECW_EINVALID);
		ECW_ASSERT_ERR(ecw_entity_set_keys(ok, k, "r"), ECW_EINVALID);
		ECW_ASSERT_ERR(ecw_entity_set_keys(ok, "p", k), ECW_EINVALID);
		ECW_ASSERT_ERR(ecw_table_get(&e, t->client, tb, k, "r"), ECW_EINVALID);
		ECW_ASSERT_ERR(ecw_table_get(&e, t->client, tb, "p", k), ECW_EINVALID);
		ECW_ASSERT_ERR(ecw_table_delete(t->client, tb, k, "r", "*"), ECW_EINVALID);
		ECW_ASSERT_ERR(ecw_table_delete(t->client, tb, "p", k, "*"), ECW_EINVALID);
		ECW_ASSERT_ERR(ecw_table_delete_if_exists(&deleted, t->client, tb, k, "r"), ECW_EINVALID);
		assert_null(e);
	}
	/* A refused set_keys leaves the entity as it was. */
	assert_string_equal(ecw_entity_pk(ok), "p");
	assert_string_equal(ecw_entity_rk(ok), "r");
	assert_int_equal(itest_stats(t->client).requests, before.requests);

	/* The boundaries: exactly 1 KiB passes the check, and so do non-control
	 * characters above U+009F. */
	longkey[ECW_KEY_MAX] = '\0';
	ECW_ASSERT_OK(ecw_entity_key_check(longkey, "RowKey"));
	longmb[1024] = '\0';
	ECW_ASSERT_OK(ecw_entity_key_check(longmb, "RowKey"));
	ECW_ASSERT_OK(ecw_entity_key_check("nbsp\xc2\xa0 ok", "RowKey"));
	ecw_entity_free(ok);
}

static void test_table__keep_alive_one_connection(void **state)
{
	struct itest *t = *state;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	itest_client_for(&acct, &c, itest_connstr(), NULL);
	t->table_used = true;
	ECW_ASSERT_OK(ecw_table_create(NULL, c, t->table)); /* 1 */
	char rk[16];
	for (int i = 0; i < 5; i++) { /* 5 x 3 = 15: 16 */
		snprintf(rk, sizeof(rk), "r%d", i);
		struct ecw_entity *e = new_entity("p", rk);
		ECW_ASSERT_OK(ecw_entity_set_int32(e, "n", i));
		char *etag = NULL;
		ECW_ASSERT_OK(ecw_table_write(&etag, c, t->table, e, ECW_WRITE_INSERT, NULL));
		struct ecw_entity *g = NULL;
		ECW_ASSERT_OK(ecw_table_get(&g, c, t->table, "p", rk));
		assert_same_entity(e, g);
		ECW_ASSERT_OK(ecw_table_delete(c, t->table, "p", rk, etag));
		ecw_entity_free(g);
		ecw_entity_free(e);
		free(etag);
	}
	for (int i = 0; i < 3; i++) { /* 19 */
		struct ecw_entity *e = new_entity("p", "same");
		ECW_ASSERT_OK(ecw_entity_set_int32(e, "n", i));
		ECW_ASSERT_OK(ecw_table_write(NULL, c, t->table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
		ecw_entity_free(e);
	}
	struct ecw_table_query *q = NULL; /* one page: 20 */
	ECW_ASSERT_OK(ecw_table_query_new(&q, c, t->table, NULL));
	struct ecw_entity *e = NULL;
	size_t n = 0;
	do {
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (e != NULL)
			n++;
		ecw_entity_free(e);
	} while (e != NULL);
	assert_int_equal(n, 1);
	assert_int_equal(ecw_table_query_pages(q), 1);
	ecw_table_query_free(q);

	struct ecw_client_stats s = itest_stats(c);
	assert_int_equal(s.requests, 20);
	assert_int_equal(s.retries, 0);
	assert_int_equal(s.connections, 1);
	ecw_client_free(c);
	ecw_account_free(acct);
}

/* Clients on many threads (a worker's job threads) look each endpoint's name
 * up once between them (resolve.c). The endpoints here are "localhost",
 * looked up for real through /etc/hosts, which may also answer ::1, where
 * Azurite does not listen: the connection then goes to the next address. */
#define NAME_THREADS 8

struct name_user {
	pthread_t th;
	struct ecw_client *c;
	const char *table, *queue;
	int i, rc[3];
};

static void *use_names(void *p)
{
	struct name_user *u = p;
	char rk[16];
	struct ecw_entity *e = NULL, *g = NULL;

	snprintf(rk, sizeof(rk), "t%d", u->i);
	u->rc[0] = ecw_entity_new(&e, "p", rk);
	if (u->rc[0] == 0)
		u->rc[0] = ecw_table_write(NULL, u->c, u->table, e, ECW_WRITE_INSERT, NULL);
	u->rc[1] = ecw_table_get(&g, u->c, u->table, "p", rk);
	u->rc[2] = ecw_queue_put(NULL, u->c, u->queue, rk, strlen(rk), NULL);
	ecw_entity_free(e);
	ecw_entity_free(g);
	return NULL;
}

static void test_table__threads_share_name_lookups(void **state)
{
	struct itest *t = *state;
	struct name_user u[NAME_THREADS];
	struct ecw_account *acct[NAME_THREADS];
	const char *cs = itest_connstr();
	char *local = calloc(1, strlen(cs) * 2 + 1);
	long long queued = 0;

	assert_non_null(local);
	for (char *o = local; *cs;) { /* every 127.0.0.1 becomes localhost */
		if (strncmp(cs, "127.0.0.1", 9) == 0) {
			o = stpcpy(o, "localhost");
			cs += 9;
		} else {
			*o++ = *cs++;
		}
	}
	assert_non_null(strstr(local, "localhost"));
	const char *tb = itest_table(t), *q = itest_queue(t);
	ecw_resolve_flush();
	uint64_t before = ecw_resolve_lookups();
	for (int i = 0; i < NAME_THREADS; i++) {
		u[i] = (struct name_user){.table = tb, .queue = q, .i = i};
		itest_client_for(&acct[i], &u[i].c, local, NULL);
	}
	for (int i = 0; i < NAME_THREADS; i++)
		assert_int_equal(pthread_create(&u[i].th, NULL, use_names, &u[i]), 0);
	for (int i = 0; i < NAME_THREADS; i++) {
		pthread_join(u[i].th, NULL);
		for (int k = 0; k < 3; k++)
			if (u[i].rc[k] != 0)
				fail_msg("thread %d, call %d: %s", i, k, ecw_error_name(u[i].rc[k]));
		assert_int_equal(itest_stats(u[i].c).connections, 2);
	}
	/* Two names: the table endpoint's and the queue endpoint's (each a
	 * host and port), for 16 connections. */
	assert_int_equal(ecw_resolve_lookups() - before, 2);
	ECW_ASSERT_OK(ecw_queue_count(&queued, t->client, q));
	assert_int_equal(queued, NAME_THREADS);
	for (int i = 0; i < NAME_THREADS; i++) {
		ecw_client_free(u[i].c);
		ecw_account_free(acct[i]);
	}
	free(local);
}

/* ---- group "table_query": one table of 2,500 entities ---------------------- */

#define QN 2500
static struct itest *g_q; /* the shared fixture */

static const char SPECIAL[] = "a&b=c+d%2F #?/ \xc3\xa9 '";

static const char *who_of(int i)
{
	if (i % 500 == 7)
		return "o'brien";
	if (i % 500 == 11)
		return SPECIAL;
	return "smith";
}

static int query_group_setup(void **state)
{
	(void)state;
	void *s = NULL;
	itest_setup(&s);
	g_q = s;
	const char *tb = itest_table(g_q);
	char rk[16];
	for (int first = 0; first < QN; first += ECW_BATCH_MAX_OPS) {
		struct ecw_batch *b = NULL;
		ECW_ASSERT_OK(ecw_batch_new(&b, tb));
		for (int i = first; i < first + ECW_BATCH_MAX_OPS; i++) {
			snprintf(rk, sizeof(rk), "r%05d", i);
			struct ecw_entity *e = new_entity("p", rk);
			ECW_ASSERT_OK(ecw_entity_set_int32(e, "n", i));
			ECW_ASSERT_OK(ecw_entity_set_string(e, "who", who_of(i), strlen(who_of(i))));
			ECW_ASSERT_OK(ecw_entity_set_int64(e, "big", (int64_t)i * INT64_C(1000000000000)));
			ECW_ASSERT_OK(ecw_entity_set_bool(e, "odd", i % 2 == 1));
			ECW_ASSERT_OK(ecw_entity_set_string(e, "pad", "some padding text", 17));
			ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL));
			ecw_entity_free(e);
		}
		ECW_ASSERT_OK(ecw_batch_submit(g_q->client, b));
		ecw_batch_free(b);
	}
	return 0;
}

static int query_group_teardown(void **state)
{
	(void)state;
	void *s = g_q;
	g_q = NULL;
	return itest_teardown(&s);
}

/* Runs a query to the end; returns the row numbers (n) seen, in order. */
static int *run_query(size_t *count, int *pages, const struct ecw_query_options *o,
                      void (*check)(const struct ecw_entity *))
{
	struct ecw_table_query *q = NULL;
	int *seen = calloc(QN + 1, sizeof(int));
	assert_non_null(seen);
	*count = 0;
	ECW_ASSERT_OK(ecw_table_query_new(&q, g_q->client, g_q->table, o));
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (e == NULL)
			break;
		assert_true(*count < QN);
		if (check)
			check(e);
		const struct ecw_prop *n = ecw_entity_get(e, "n");
		seen[(*count)++] = n && n->type == ECW_EDM_INT32 ? n->v.i32 : -1;
		ecw_entity_free(e);
	}
	*pages = ecw_table_query_pages(q);
	/* After the end, next keeps answering NULL. */
	struct ecw_entity *e = (struct ecw_entity *)1;
	ECW_ASSERT_OK(ecw_table_query_next(&e, q));
	assert_null(e);
	ecw_table_query_free(q);
	return seen;
}

static void check_full_entity(const struct ecw_entity *e)
{
	const struct ecw_prop *n = ecw_entity_get(e, "n");
	assert_non_null(n);
	char rk[16];
	snprintf(rk, sizeof(rk), "r%05d", n->v.i32);
	assert_string_equal(ecw_entity_pk(e), "p");
	assert_string_equal(ecw_entity_rk(e), rk);
	assert_int_equal(ecw_entity_count(e), 5);
	assert_string_equal(ecw_entity_get(e, "who")->v.s, who_of(n->v.i32));
	assert_int_equal(ecw_entity_get(e, "big")->type, ECW_EDM_INT64);
	assert_true(ecw_entity_get(e, "big")->v.i64 == (int64_t)n->v.i32 * INT64_C(1000000000000));
	assert_non_null(ecw_entity_etag(e));
}

static void test_table__query_all_pages(void **state)
{
	(void)state;
	size_t count = 0;
	int pages = 0;
	int *seen = run_query(&count, &pages, NULL, check_full_entity);
	assert_int_equal(count, QN);
	for (int i = 0; i < QN; i++)
		ITEST_CHECK(seen[i] == i, "position %d holds entity %d", i, seen[i]);
	/* At most 1,000 entities a page. */
	ITEST_CHECK(pages >= 3, "%d pages", pages);
	free(seen);

	/* Options with every field zero/NULL mean the same. */
	struct ecw_query_options o = {NULL, NULL, 0, 0};
	seen = run_query(&count, &pages, &o, NULL);
	assert_int_equal(count, QN);
	ITEST_CHECK(pages >= 3, "%d pages", pages);
	free(seen);
}

static void test_table__query_top_and_limit(void **state)
{
	(void)state;
	size_t count = 0;
	int pages = 0;

	/* $top is the page size. */
	struct ecw_query_options o = {.top = 100};
	int *seen = run_query(&count, &pages, &o, check_full_entity);
	assert_int_equal(count, QN);
	for (int i = 0; i < QN; i++)
		assert_int_equal(seen[i], i);
	ITEST_CHECK(pages >= 25, "%d pages", pages);
	free(seen);

	/* limit stops early, without fetching more pages than it needs. */
	struct ecw_query_options l = {.top = 100, .limit = 250};
	seen = run_query(&count, &pages, &l, NULL);
	assert_int_equal(count, 250);
	for (int i = 0; i < 250; i++)
		assert_int_equal(seen[i], i);
	assert_int_equal(pages, 3);
	free(seen);

	struct ecw_query_options l5 = {.limit = 5};
	seen = run_query(&count, &pages, &l5, NULL);
	assert_int_equal(count, 5);
	assert_int_equal(seen[4], 4);
	assert_int_equal(pages, 1);
	free(seen);

	struct ecw_query_options l1000 = {.limit = 1000};
	seen = run_query(&count, &pages, &l1000, NULL);
	assert_int_equal(count, 1000);
	assert_int_equal(pages, 1);
	free(seen);

	struct ecw_query_options lall = {.top = 1000, .limit = QN + 100};
	seen = run_query(&count, &pages, &lall, NULL);
	assert_int_equal(count, QN);
	free(seen);

	/* $top outside 1..1000 is refused. */
	struct ecw_table_query *q = NULL;
	struct ecw_query_options bad = {.top = 1001};
	struct ecw_entity *e = NULL;
	int rc = ecw_table_query_new(&q, g_q->client, g_q->table, &bad);
	if (rc == 0) {
		rc = ecw_table_query_next(&e, q);
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);
	ECW_ASSERT_ERR(rc, ECW_EINVALID);
}

static void test_table__query_filter_int(void **state)
{
	(void)state;
	size_t count = 0;
	int pages = 0;
	struct ecw_query_options o = {.filter = "n ge 1000 and n lt 1010"};
	int *seen = run_query(&count, &pages, &o, check_full_entity);
	assert_int_equal(count, 10);
	for (int i = 0; i < 10; i++)
		assert_int_equal(seen[i], 1000 + i);
	free(seen);

	/* A filtered result spread over several pages. */
	struct ecw_query_options o2 = {.filter = "n ge 1500 and odd eq true", .top = 100};
	seen = run_query(&count, &pages, &o2, NULL);
	assert_int_equal(count, 500);
	for (int i = 0; i < 500; i++)
		assert_int_equal(seen[i], 1501 + 2 * i);
	ITEST_CHECK(pages >= 5, "%d pages", pages);
	free(seen);

	/* Int64 comparison and key ranges. */
	struct ecw_query_options o3 = {
	    .filter = "PartitionKey eq 'p' and RowKey ge 'r02490' and big ge 2495000000000000L"};
	seen = run_query(&count, &pages, &o3, NULL);
	assert_int_equal(count, 5);
	assert_int_equal(seen[0], 2495);
	free(seen);

	struct ecw_query_options none = {.filter = "n lt 0"};
	seen = run_query(&count, &pages, &none, NULL);
	assert_int_equal(count, 0);
	free(seen);
}

static void test_table__query_filter_strings(void **state)
{
	(void)state;
	size_t count = 0;
	int pages = 0;
	struct ecw_buf f;
	ecw_buf_init(&f, 1024);

	ECW_ASSERT_OK(ecw_buf_adds(&f, "who eq "));
	ECW_ASSERT_OK(ecw_escape_filter_string(&f, "o'brien"));
	assert_string_equal(ecw_buf_cstr(&f), "who eq 'o''brien'");
	struct ecw_query_options o = {.filter = ecw_buf_cstr(&f)};
	int *seen = run_query(&count, &pages, &o, check_full_entity);
	assert_int_equal(count, QN / 500);
	for (size_t i = 0; i < count; i++)
		assert_int_equal(seen[i], 7 + 500 * (int)i);
	free(seen);

	/* Characters that mean something in a URL query. */
	ecw_buf_reset(&f);
	ECW_ASSERT_OK(ecw_buf_adds(&f, "who eq "));
	ECW_ASSERT_OK(ecw_escape_filter_string(&f, SPECIAL));
	o.filter = ecw_buf_cstr(&f);
	seen = run_query(&count, &pages, &o, check_full_entity);
	assert_int_equal(count, QN / 500);
	for (size_t i = 0; i < count; i++)
		assert_int_equal(seen[i], 11 + 500 * (int)i);
	free(seen);

	/* A quote-only literal. */
	ecw_buf_reset(&f);
	ECW_ASSERT_OK(ecw_escape_filter_string(&f, "'"));
	assert_string_equal(ecw_buf_cstr(&f), "''''");
	ecw_buf_dispose(&f);
}

static void test_table__query_select(void **state)
{
	(void)state;
	struct ecw_query_options o = {.select = "n,big", .top = 500, .limit = 600};
	struct ecw_table_query *q = NULL;
	ECW_ASSERT_OK(ecw_table_query_new(&q, g_q->client, g_q->table, &o));
	size_t count = 0;
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (e == NULL)
			break;
		/* Only the selected properties come back. */
		ITEST_CHECK(ecw_entity_count(e) == 2, "%zu properties", ecw_entity_count(e));
		const struct ecw_prop *n = ecw_entity_get(e, "n");
		const struct ecw_prop *big = ecw_entity_get(e, "big");
		assert_non_null(n);
		assert_non_null(big);
		assert_int_equal(n->type, ECW_EDM_INT32);
		assert_int_equal(n->v.i32, (int)count);
		assert_int_equal(big->type, ECW_EDM_INT64);
		assert_true(big->v.i64 == (int64_t)count * INT64_C(1000000000000));
		assert_null(ecw_entity_get(e, "who"));
		assert_null(ecw_entity_get(e, "pad"));
		count++;
		ecw_entity_free(e);
	}
	assert_int_equal(count, 600);
	assert_int_equal(ecw_table_query_pages(q), 2);
	ecw_table_query_free(q);

	/* With the keys selected, they come back too. */
	struct ecw_query_options k = {.select = "PartitionKey,RowKey,who", .filter = "n eq 7"};
	ECW_ASSERT_OK(ecw_table_query_new(&q, g_q->client, g_q->table, &k));
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_table_query_next(&e, q));
	assert_non_null(e);
	assert_string_equal(ecw_entity_pk(e), "p");
	assert_string_equal(ecw_entity_rk(e), "r00007");
	assert_int_equal(ecw_entity_count(e), 1);
	assert_string_equal(ecw_entity_get(e, "who")->v.s, "o'brien");
	ecw_entity_free(e);
	ECW_ASSERT_OK(ecw_table_query_next(&e, q));
	assert_null(e);
	ecw_table_query_free(q);
}

static void test_table__query_missing_table(void **state)
{
	struct itest *t = *state;
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	int rc = ecw_table_query_new(&q, t->client, t->table2, NULL); /* never created */
	if (rc == 0)
		rc = ecw_table_query_next(&e, q);
	ECW_ASSERT_ERR(rc, ECW_ENOTABLE);
	assert_null(e);
	ecw_table_query_free(q);
}

/* Every call on a table that does not exist is ECW_ENOTABLE (Azurite and the
 * service answer 404 TableNotFound), which the client tells apart from a
 * missing entity in a table that exists (404 ResourceNotFound, ECW_ENOTFOUND).
 * Deleting the missing table itself is ECW_ENOTFOUND: 404 ResourceNotFound. */
static void test_table__missing_table_is_enotable(void **state)
{
	struct itest *t = *state;
	const char *missing = t->table2; /* never created */
	const char *tb = itest_table(t);
	struct ecw_entity *e = new_entity("p", "r"), *g = NULL, *row = NULL;
	struct ecw_table_query *q = NULL;
	struct ecw_batch *b = NULL;
	struct ecw_client_stats before = itest_stats(t->client);
	bool deleted = true;

	ECW_ASSERT_OK(ecw_entity_set_int32(e, "n", 1));
	ECW_ASSERT_ERR(ecw_table_get(&g, t->client, missing, "p", "r"), ECW_ENOTABLE);
	itest_assert_service_error(404, "TableNotFound");
	assert_null(g);
	ECW_ASSERT_ERR(ecw_table_write(NULL, t->client, missing, e, ECW_WRITE_INSERT, NULL), ECW_ENOTABLE);
	itest_assert_service_error(404, "TableNotFound");
	ECW_ASSERT_ERR(ecw_table_write(NULL, t->client, missing, e, ECW_WRITE_INSERT_OR_REPLACE, NULL),
	               ECW_ENOTABLE);
	ECW_ASSERT_ERR(ecw_table_write(NULL, t->client, missing, e, ECW_WRITE_MERGE, "*"), ECW_ENOTABLE);
	ECW_ASSERT_OK(ecw_table_query_new(&q, t->client, missing, NULL));
	ECW_ASSERT_ERR(ecw_table_query_next(&row, q), ECW_ENOTABLE);
	itest_assert_service_error(404, "TableNotFound");
	assert_null(row);
	ecw_table_query_free(q);
	ECW_ASSERT_ERR(ecw_table_delete(t->client, missing, "p", "r", "*"), ECW_ENOTABLE);
	ECW_ASSERT_ERR(ecw_table_delete_if_exists(&deleted, t->client, missing, "p", "r"), ECW_ENOTABLE);
	assert_false(deleted);
	ECW_ASSERT_OK(ecw_batch_new(&b, missing));
	ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL));
	ECW_ASSERT_ERR(ecw_batch_submit(t->client, b), ECW_ENOTABLE);
	itest_assert_service_error(404, "TableNotFound");
	ecw_batch_free(b);
	ECW_ASSERT_ERR(ecw_table_delete_table(t->client, missing), ECW_ENOTFOUND);
	itest_assert_service_error(404, "ResourceNotFound");
	/* Not one of them was retried. */
	struct ecw_client_stats after = itest_stats(t->client);
	ITEST_CHECK(after.retries == before.retries, "%llu retries",
	            (unsigned long long)(after.retries - before.retries));

	/* A missing entity in a table that exists stays ECW_ENOTFOUND. */
	ECW_ASSERT_ERR(ecw_table_get(&g, t->client, tb, "p", "r"), ECW_ENOTFOUND);
	itest_assert_service_error(404, "ResourceNotFound");
	ECW_ASSERT_ERR(ecw_table_delete(t->client, tb, "p", "r", "*"), ECW_ENOTFOUND);
	ecw_entity_free(e);
}

#define T(name) cmocka_unit_test_setup_teardown(name, itest_setup, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_table__create_idempotent),
	    T(test_table__bad_name_rejected_before_request),
	    T(test_table__insert_then_conflict),
	    T(test_table__get_and_not_found),
	    T(test_table__insert_or_merge_keeps_insert_or_replace_drops),
	    T(test_table__if_match_argument_checked),
	    T(test_table__update_if_match),
	    T(test_table__merge_if_match),
	    T(test_table__delete_if_match),
	    T(test_table__delete_if_exists),
	    T(test_table__every_edm_type_hostile_keys_copy),
	    T(test_table__empty_keys),
	    T(test_table__invalid_keys_rejected_before_request),
	    T(test_table__keep_alive_one_connection),
	    T(test_table__threads_share_name_lookups),
	    T(test_table__query_missing_table),
	    T(test_table__missing_table_is_enotable),
	};
	const struct CMUnitTest query_tests[] = {
	    cmocka_unit_test(test_table__query_all_pages),
	    cmocka_unit_test(test_table__query_top_and_limit),
	    cmocka_unit_test(test_table__query_filter_int),
	    cmocka_unit_test(test_table__query_filter_strings),
	    cmocka_unit_test(test_table__query_select),
	};
	int failed = cmocka_run_group_tests_name("table", tests, NULL, NULL);
	failed +=
	    cmocka_run_group_tests_name("table_query", query_tests, query_group_setup, query_group_teardown);
	return failed;
}
