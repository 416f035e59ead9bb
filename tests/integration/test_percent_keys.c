/* SPDX-License-Identifier: MIT */
/* test_percent_keys.c - keys holding '%' against Azurite: the client reads
 * such an entity through a $filter query and writes or deletes it through a
 * one-operation $batch (worker/storage/table.c; Azure has been reported to
 * decode an entity's URL path twice). Azurite decodes once, so this shows the
 * detour answers exactly as the direct calls do: the entity with the ETag the
 * last write returned, 412 for a stale ETag, 404 for an absent entity,
 * ECW_ENOTABLE for a missing table, and the neighbour whose key the path
 * would name when decoded twice left alone. The jobs' steps on such keys are
 * in tests/unit/test_percent_keys.c (a fake that decodes twice) and the move
 * and index tests here (a+b&c=d%). */
#include "itest.h"

#include <stdlib.h>
#include <string.h>

static struct ecw_entity *entity(const char *pk, const char *rk, const char *who)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Who", who, strlen(who)));
	return e;
}

/* The entity's Who and ETag as a get reads them. */
static void read_is(struct itest *t, const char *tb, const char *pk, const char *rk, const char *who,
                    const char *etag)
{
	struct ecw_entity *g = NULL;

	ECW_ASSERT_OK(ecw_table_get(&g, t->client, tb, pk, rk));
	assert_string_equal(ecw_entity_pk(g), pk);
	assert_string_equal(ecw_entity_rk(g), rk);
	assert_string_equal(ecw_entity_get(g, "Who")->v.s, who);
	assert_non_null(ecw_entity_etag(g));
	assert_string_equal(ecw_entity_etag(g), etag);
	ecw_entity_free(g);
}

static void test_percent_keys__answers_as_direct_calls(void **state)
{
	static const char *const keys[][3] = {
	    /* pk, rk, the keys decoded once more */
	    {"p", "pct%41", "pctA"},
	    {"100%", "50%25 o'brien", "50% o'brien"},
	    {"a+b&c=d%", "%", "%"},
	};
	struct itest *t = *state;
	const char *tb = itest_table(t);
	char *etag = NULL, *etag2 = NULL, *etag3 = NULL;
	struct ecw_entity *e, *g = NULL;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *pk = keys[i][0], *rk = keys[i][1];
		struct ecw_entity *decoy = entity("p", "pctA", "decoy");

		ECW_ASSERT_OK(ecw_table_write(NULL, t->client, tb, decoy, ECW_WRITE_INSERT_OR_REPLACE, NULL));
		/* Insert-or-replace creates: its ETag is the one a get reads. */
		e = entity(pk, rk, "one");
		ECW_ASSERT_OK(ecw_table_write(&etag, t->client, tb, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
		read_is(t, tb, pk, rk, "one", etag);
		/* Update If-Match: the current ETag applies, the stale one is 412. */
		ecw_entity_free(e);
		e = entity(pk, rk, "two");
		ECW_ASSERT_OK(ecw_table_write(&etag2, t->client, tb, e, ECW_WRITE_UPDATE, etag));
		read_is(t, tb, pk, rk, "two", etag2);
		ECW_ASSERT_ERR(ecw_table_write(NULL, t->client, tb, e, ECW_WRITE_UPDATE, etag),
		               ECW_EPRECONDITION);
		itest_assert_service_error(412, "UpdateConditionNotSatisfied");
		/* Merge If-Match and insert-or-merge. */
		ecw_entity_free(e);
		e = entity(pk, rk, "three");
		ECW_ASSERT_ERR(ecw_table_write(NULL, t->client, tb, e, ECW_WRITE_MERGE, etag),
		               ECW_EPRECONDITION);
		ECW_ASSERT_OK(ecw_table_write(&etag3, t->client, tb, e, ECW_WRITE_MERGE, etag2));
		read_is(t, tb, pk, rk, "three", etag3);
		free(etag);
		etag = NULL;
		ECW_ASSERT_OK(ecw_table_write(&etag, t->client, tb, e, ECW_WRITE_INSERT_OR_MERGE, NULL));
		read_is(t, tb, pk, rk, "three", etag);
		/* Delete If-Match: stale 412, current done, then 404 everywhere. */
		ECW_ASSERT_ERR(ecw_table_delete(t->client, tb, pk, rk, etag3), ECW_EPRECONDITION);
		ECW_ASSERT_OK(ecw_table_delete(t->client, tb, pk, rk, etag));
		ECW_ASSERT_ERR(ecw_table_get(&g, t->client, tb, pk, rk), ECW_ENOTFOUND);
		assert_null(g);
		itest_assert_service_error(404, "ResourceNotFound");
		ECW_ASSERT_ERR(ecw_table_delete(t->client, tb, pk, rk, "*"), ECW_ENOTFOUND);
		itest_assert_service_error(404, "ResourceNotFound");
		ECW_ASSERT_ERR(ecw_table_write(NULL, t->client, tb, e, ECW_WRITE_UPDATE, "*"), ECW_ENOTFOUND);
		ECW_ASSERT_OK(ecw_table_delete_if_exists(NULL, t->client, tb, pk, rk));
		/* The neighbour a twice-decoded path would name is untouched. */
		ECW_ASSERT_OK(ecw_table_get(&g, t->client, tb, "p", "pctA"));
		assert_string_equal(ecw_entity_get(g, "Who")->v.s, "decoy");
		ecw_entity_free(g);
		g = NULL;
		ecw_entity_free(decoy);
		ecw_entity_free(e);
		free(etag);
		free(etag2);
		free(etag3);
		etag = etag2 = etag3 = NULL;
	}
}

static void test_percent_keys__missing_table(void **state)
{
	struct itest *t = *state;
	const char *missing = t->table2; /* never created */
	struct ecw_entity *e = entity("p", "pct%41", "x"), *g = NULL;

	ECW_ASSERT_ERR(ecw_table_get(&g, t->client, missing, "p", "pct%41"), ECW_ENOTABLE);
	assert_null(g);
	ECW_ASSERT_ERR(ecw_table_write(NULL, t->client, missing, e, ECW_WRITE_INSERT_OR_REPLACE, NULL),
	               ECW_ENOTABLE);
	ECW_ASSERT_ERR(ecw_table_write(NULL, t->client, missing, e, ECW_WRITE_UPDATE, "*"), ECW_ENOTABLE);
	ECW_ASSERT_ERR(ecw_table_delete(t->client, missing, "p", "pct%41", "*"), ECW_ENOTABLE);
	ECW_ASSERT_ERR(ecw_table_delete_if_exists(NULL, t->client, missing, "p", "pct%41"), ECW_ENOTABLE);
	ecw_entity_free(e);
}

#define T(f) cmocka_unit_test_setup_teardown(f, itest_setup, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_percent_keys__answers_as_direct_calls),
	    T(test_percent_keys__missing_table),
	};
	return cmocka_run_group_tests_name("percent_keys", tests, NULL, NULL);
}
