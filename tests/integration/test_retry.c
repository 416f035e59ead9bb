/* SPDX-License-Identifier: MIT */
/* test_retry.c - the retry policy on a real client against a real Azurite,
 * with failures injected through ecw_client_inject_faults (a -DECW_TESTING
 * seam): transient answers and resets are retried and the operation really
 * happens once; non-transient answers are final after one attempt; and what
 * "at least once" means when a request was applied but its answer was lost. */
#include "itest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct delta {
	long long requests, retries, connections;
};

static struct ecw_client_stats mark(struct itest *t)
{
	return itest_stats(t->client);
}

static struct delta since(struct itest *t, struct ecw_client_stats before)
{
	struct ecw_client_stats now = itest_stats(t->client);
	struct delta d = {(long long)(now.requests - before.requests),
	                  (long long)(now.retries - before.retries),
	                  (long long)(now.connections - before.connections)};
	return d;
}

static long long queue_count(struct itest *t, const char *q)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, t->client, q));
	return n;
}

static struct ecw_entity *ent(const char *pk, const char *rk, int n)
{
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "n", n));
	return e;
}

static void test_retry__two_503_then_success_queue(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	struct ecw_client_stats before = mark(t);

	ecw_client_inject_faults(t->client, 2, ECW_FAULT_STATUS, 503);
	ECW_ASSERT_OK(ecw_queue_put(NULL, t->client, q, "applied", 7, NULL));
	struct delta d = since(t, before);
	assert_int_equal(d.retries, 2);
	assert_int_equal(d.requests, 3);

	/* Really applied, and once. */
	assert_int_equal(queue_count(t, q), 1);
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, t->client, q, 32));
	assert_int_equal(n, 1);
	assert_string_equal(m[0].text, "applied");
	ecw_queue_msgs_free(m, n);
}

static void test_retry__two_503_then_success_table(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_entity *e = ent("p", "r", 7);
	struct ecw_client_stats before = mark(t);

	ecw_client_inject_faults(t->client, 2, ECW_FAULT_STATUS, 503);
	char *etag = NULL;
	ECW_ASSERT_OK(ecw_table_write(&etag, t->client, tb, e, ECW_WRITE_INSERT, NULL));
	struct delta d = since(t, before);
	assert_int_equal(d.retries, 2);
	assert_int_equal(d.requests, 3);
	assert_non_null(etag);

	struct ecw_entity *g = NULL;
	ECW_ASSERT_OK(ecw_table_get(&g, t->client, tb, "p", "r"));
	assert_true(ecw_entity_equal(e, g));
	assert_string_equal(ecw_entity_etag(g), etag);
	ecw_entity_free(g);
	ecw_entity_free(e);
	free(etag);
}

static void test_retry__two_503_then_success_batch(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_batch *b = NULL;
	char rk[16];
	ECW_ASSERT_OK(ecw_batch_new(&b, tb));
	for (int i = 0; i < 10; i++) {
		snprintf(rk, sizeof(rk), "r%d", i);
		struct ecw_entity *e = ent("p", rk, i);
		ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL));
		ecw_entity_free(e);
	}
	struct ecw_client_stats before = mark(t);
	ecw_client_inject_faults(t->client, 2, ECW_FAULT_STATUS, 503);
	ECW_ASSERT_OK(ecw_batch_submit(t->client, b));
	struct delta d = since(t, before);
	assert_int_equal(d.retries, 2);
	for (size_t i = 0; i < 10; i++)
		assert_non_null(ecw_batch_etag(b, i));
	ecw_batch_free(b);

	struct ecw_entity *g = NULL;
	ECW_ASSERT_OK(ecw_table_get(&g, t->client, tb, "p", "r9"));
	assert_int_equal(ecw_entity_get(g, "n")->v.i32, 9);
	ecw_entity_free(g);
}

static void test_retry__resets_then_success(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	const char *tb = itest_table(t);

	/* A read: the count survives two resets. */
	ECW_ASSERT_OK(ecw_queue_put(NULL, t->client, q, "x", 1, NULL));
	struct ecw_client_stats before = mark(t);
	ecw_client_inject_faults(t->client, 2, ECW_FAULT_RESET, 0);
	assert_int_equal(queue_count(t, q), 1);
	struct delta d = since(t, before);
	assert_int_equal(d.retries, 2);
	assert_int_equal(d.requests, 3);
	/* After a reset the client opens a new connection. */
	ITEST_CHECK(d.connections >= 1, "connections +%lld after a reset", d.connections);

	/* An idempotent write survives them too. */
	struct ecw_entity *e = ent("p", "r", 1);
	before = mark(t);
	ecw_client_inject_faults(t->client, 2, ECW_FAULT_RESET, 0);
	ECW_ASSERT_OK(ecw_table_write(NULL, t->client, tb, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	d = since(t, before);
	assert_int_equal(d.retries, 2);
	struct ecw_entity *g = NULL;
	ECW_ASSERT_OK(ecw_table_get(&g, t->client, tb, "p", "r"));
	assert_true(ecw_entity_equal(e, g));
	ecw_entity_free(g);
	ecw_entity_free(e);

	/* Too many resets: ECW_ETRANSIENT after max_tries attempts, no status. */
	before = mark(t);
	ecw_client_inject_faults(t->client, 4, ECW_FAULT_RESET, 0);
	long long n = 0;
	ECW_ASSERT_ERR(ecw_queue_count(&n, t->client, q), ECW_ETRANSIENT);
	assert_int_equal(ecw_error_last()->http_status, 0);
	d = since(t, before);
	assert_int_equal(d.requests, 4);
	assert_int_equal(d.retries, 3);
	/* And the client still works afterwards. */
	assert_int_equal(queue_count(t, q), 1);
}

struct status_case {
	long status;
	int err;
};

static void test_retry__non_transient_one_attempt(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	const char *tb = itest_table(t);
	static const struct status_case cases[] = {
	    {400, ECW_EINVALID},  {401, ECW_EAUTH},         {403, ECW_EAUTH},     {404, ECW_ENOTFOUND},
	    {409, ECW_ECONFLICT}, {412, ECW_EPRECONDITION}, {413, ECW_ETOOLARGE},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* Queue. */
		struct ecw_client_stats before = mark(t);
		ecw_client_inject_faults(t->client, 1, ECW_FAULT_STATUS, cases[i].status);
		long long n = 0;
		ECW_ASSERT_ERR(ecw_queue_count(&n, t->client, q), cases[i].err);
		assert_int_equal(ecw_error_last()->http_status, cases[i].status);
		struct delta d = since(t, before);
		ITEST_CHECK(d.requests == 1 && d.retries == 0, "status %ld: %lld requests, %lld retries",
		            cases[i].status, d.requests, d.retries);

		/* Table. */
		before = mark(t);
		ecw_client_inject_faults(t->client, 1, ECW_FAULT_STATUS, cases[i].status);
		struct ecw_entity *e = ent("p", "r", (int)i);
		ECW_ASSERT_ERR(ecw_table_write(NULL, t->client, tb, e, ECW_WRITE_INSERT_OR_REPLACE, NULL),
		               cases[i].err);
		ecw_entity_free(e);
		assert_int_equal(ecw_error_last()->http_status, cases[i].status);
		d = since(t, before);
		ITEST_CHECK(d.requests == 1 && d.retries == 0,
		            "table, status %ld: %lld requests, %lld retries", cases[i].status, d.requests,
		            d.retries);

		/* The fault was used up: the next call goes through. */
		assert_int_equal(queue_count(t, q), 0);
	}
	/* None of the injected table writes reached the service. */
	struct ecw_entity *g = NULL;
	ECW_ASSERT_ERR(ecw_table_get(&g, t->client, tb, "p", "r"), ECW_ENOTFOUND);
}

static void test_retry__transient_exhausted_maps_code(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	static const struct status_case cases[] = {
	    {500, ECW_ETRANSIENT}, {502, ECW_ETRANSIENT}, {503, ECW_EBUSY},
	    {429, ECW_EBUSY},      {408, ECW_ETIMEOUT},   {504, ECW_ETIMEOUT},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ecw_client_stats before = mark(t);
		int64_t start = itest_now_ms();
		ecw_client_inject_faults(t->client, 4, ECW_FAULT_STATUS, cases[i].status);
		long long n = 0;
		ECW_ASSERT_ERR(ecw_queue_count(&n, t->client, q), cases[i].err);
		int64_t elapsed = itest_now_ms() - start;
		assert_int_equal(ecw_error_last()->http_status, cases[i].status);
		assert_true(ecw_error_is_transient(cases[i].err));
		struct delta d = since(t, before);
		ITEST_CHECK(d.requests == 4 && d.retries == 3,
		            "status %ld: %lld requests, %lld retries (max_tries 4)", cases[i].status,
		            d.requests, d.retries);
		/* Backoff base 10 ms, cap 100 ms: three sleeps of at most 10, 20, 40. */
		ITEST_CHECK(elapsed < 1000, "status %ld: took %lld ms", cases[i].status, (long long)elapsed);
	}

	/* One fault fewer than max_tries: the last attempt succeeds. */
	struct ecw_client_stats before = mark(t);
	ecw_client_inject_faults(t->client, 3, ECW_FAULT_STATUS, 500);
	assert_int_equal(queue_count(t, q), 0);
	struct delta d = since(t, before);
	assert_int_equal(d.requests, 4);
	assert_int_equal(d.retries, 3);
}

static void test_retry__applied_put_retried_duplicates(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	struct ecw_client_stats before = mark(t);

	/* The first attempt reaches Azurite and enqueues the message; only its
	 * answer is replaced by a 500. The client cannot tell "failed" from
	 * "applied, answer lost", so it retries and enqueues a second copy. This
	 * is the queue's at-least-once contract: the client does not (and cannot)
	 * deduplicate, so consumers must be idempotent. */
	ecw_client_inject_faults(t->client, 1, ECW_FAULT_STATUS_AFTER_SEND, 500);
	ECW_ASSERT_OK(ecw_queue_put(NULL, t->client, q, "dup", 3, NULL));
	struct delta d = since(t, before);
	assert_int_equal(d.requests, 2);
	assert_int_equal(d.retries, 1);

	assert_int_equal(queue_count(t, q), 2);
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 32, 30));
	assert_int_equal(n, 2);
	assert_string_equal(m[0].text, "dup");
	assert_string_equal(m[1].text, "dup");
	assert_string_not_equal(m[0].id, m[1].id);
	ecw_queue_msgs_free(m, n);
}

static void test_retry__applied_insert_retried_conflicts(void **state)
{
	struct itest *t = *state;
	const char *tb = itest_table(t);
	struct ecw_entity *e = ent("p", "r", 1);
	struct ecw_client_stats before = mark(t);

	/* The first attempt inserts the entity, its answer becomes a 500, and the
	 * retry then finds the entity it just created: an insert that was retried
	 * can end in ECW_ECONFLICT although the caller's write took effect. Callers
	 * that need "exactly this entity" use insert-or-replace, or treat a
	 * conflict after a retry by reading the entity back. */
	ecw_client_inject_faults(t->client, 1, ECW_FAULT_STATUS_AFTER_SEND, 500);
	ECW_ASSERT_ERR(ecw_table_write(NULL, t->client, tb, e, ECW_WRITE_INSERT, NULL), ECW_ECONFLICT);
	assert_int_equal(ecw_error_last()->http_status, 409);
	struct delta d = since(t, before);
	assert_int_equal(d.requests, 2);
	assert_int_equal(d.retries, 1);

	struct ecw_entity *g = NULL;
	ECW_ASSERT_OK(ecw_table_get(&g, t->client, tb, "p", "r"));
	assert_true(ecw_entity_equal(e, g));
	ecw_entity_free(g);

	/* The same lost answer on an idempotent write is harmless. */
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "n", 2));
	before = mark(t);
	ecw_client_inject_faults(t->client, 1, ECW_FAULT_STATUS_AFTER_SEND, 500);
	ECW_ASSERT_OK(ecw_table_write(NULL, t->client, tb, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	assert_int_equal(since(t, before).retries, 1);
	ECW_ASSERT_OK(ecw_table_get(&g, t->client, tb, "p", "r"));
	assert_int_equal(ecw_entity_get(g, "n")->v.i32, 2);
	ecw_entity_free(g);

	/* delete-if-exists: the first attempt deletes, the retry finds nothing;
	 * absent is success. */
	ecw_client_inject_faults(t->client, 1, ECW_FAULT_STATUS_AFTER_SEND, 500);
	ECW_ASSERT_OK(ecw_table_delete_if_exists(NULL, t->client, tb, "p", "r"));
	ECW_ASSERT_ERR(ecw_table_get(&g, t->client, tb, "p", "r"), ECW_ENOTFOUND);
	ecw_entity_free(e);
}

static void test_retry__applied_queue_delete_retried(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	ECW_ASSERT_OK(ecw_queue_put(NULL, t->client, q, "x", 1, NULL));
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 1, 30));
	assert_int_equal(n, 1);

	/* The first attempt deletes the message; the retry finds it gone. The
	 * client may report that as ECW_ENOTFOUND ("gone") or hide it; either
	 * way the message must be gone and nothing else may be reported. */
	ecw_client_inject_faults(t->client, 1, ECW_FAULT_STATUS_AFTER_SEND, 500);
	int rc = ecw_queue_delete(t->client, q, m[0].id, m[0].pop_receipt);
	ITEST_CHECK(rc == 0 || rc == ECW_ENOTFOUND, "delete returned %s: %s", ecw_error_name(rc),
	            itest_last_error());
	assert_int_equal(queue_count(t, q), 0);
	ecw_queue_msgs_free(m, n);
}

#define T(name) cmocka_unit_test_setup_teardown(name, itest_setup, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_retry__two_503_then_success_queue),     T(test_retry__two_503_then_success_table),
	    T(test_retry__two_503_then_success_batch),     T(test_retry__resets_then_success),
	    T(test_retry__non_transient_one_attempt),      T(test_retry__transient_exhausted_maps_code),
	    T(test_retry__applied_put_retried_duplicates), T(test_retry__applied_insert_retried_conflicts),
	    T(test_retry__applied_queue_delete_retried),
	};
	return cmocka_run_group_tests_name("retry", tests, NULL, NULL);
}
