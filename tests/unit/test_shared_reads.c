/* SPDX-License-Identifier: MIT */
/* test_shared_reads.c - shared reads (jobs/shared_reads.c) against a fake
 * store that counts its GETs and queries, can hold a GET until the test
 * lets it go (so that other reads queue up behind it), and answers each key
 * with an entity of that key, absent for keys starting "absent", and a
 * failure for keys starting "fail". Reads that meet share one query; a read
 * that meets none is a plain GET; another partition never waits; a failed
 * query sends each reader to its own GET and its own error; a query names
 * at most 14 keys and a bounded number of key bytes. A read ahead takes the
 * keys of the runs waiting behind it into its query and keeps their
 * answers, each handed over once, for a few seconds. */
#include "support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shared_reads_private.h"

#define TABLE "Employees"

static struct fake {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int gets, queries, keys_queried, biggest_query;
	bool hold_gets;  /* a GET waits while this is set */
	int gets_inside; /* GETs waiting on hold_gets */
	bool fail_queries;
} fk = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void fake_reset(void)
{
	pthread_mutex_lock(&fk.mu);
	fk.gets = fk.queries = fk.keys_queried = fk.biggest_query = fk.gets_inside = 0;
	fk.hold_gets = fk.fail_queries = false;
	pthread_mutex_unlock(&fk.mu);
}

static struct ecw_entity *entity_of(const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	char etag[64];

	snprintf(etag, sizeof(etag), "W/\"%.20s\"", rk);
	assert_int_equal(ecw_entity_new(&e, pk, rk), 0);
	assert_int_equal(ecw_entity_set_etag(e, etag), 0);
	return e;
}

static int fake_get(struct ecw_entity **out, struct ecw_client *c, const char *table, const char *pk,
                    const char *rk)
{
	(void)c;
	assert_string_equal(table, TABLE);
	*out = NULL;
	pthread_mutex_lock(&fk.mu);
	fk.gets++;
	fk.gets_inside++;
	pthread_cond_broadcast(&fk.cv);
	while (fk.hold_gets)
		pthread_cond_wait(&fk.cv, &fk.mu);
	fk.gets_inside--;
	pthread_mutex_unlock(&fk.mu);
	if (strncmp(rk, "absent", 6) == 0)
		return ecw_error_set(ECW_ENOTFOUND, "GET: 404 for %s", rk);
	if (strncmp(rk, "fail", 4) == 0)
		return ecw_error_set(ECW_ETRANSIENT, "GET: 503 for %.40s", rk);
	*out = entity_of(pk, rk);
	return 0;
}

static int fake_get_many(struct ecw_entity **out, struct ecw_client *c, const char *table, const char *pk,
                         const char *const *rks, size_t n)
{
	(void)c;
	assert_string_equal(table, TABLE);
	assert_in_range(n, 2, 14);
	pthread_mutex_lock(&fk.mu);
	fk.queries++;
	fk.keys_queried += (int)n;
	if ((int)n > fk.biggest_query)
		fk.biggest_query = (int)n;
	bool fail = fk.fail_queries;
	pthread_mutex_unlock(&fk.mu);
	for (size_t i = 0; i < n; i++)
		out[i] = NULL;
	if (fail)
		return ecw_error_set(ECW_ETRANSIENT, "query: 500");
	for (size_t i = 0; i < n; i++)
		if (strncmp(rks[i], "absent", 6) != 0 && strncmp(rks[i], "fail", 4) != 0)
			out[i] = entity_of(pk, rks[i]);
	return 0;
}

static const struct shared_reads_store fake_store = {fake_get, fake_get_many};

/* ---- readers on threads --------------------------------------------------------------- */

struct reader {
	pthread_t t;
	struct ecw_shared_reads *sr;
	const char *pk;
	char rk[4100];
	int err;
	char error[600];
	struct ecw_entity *got;
	bool done;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	r->err = ecw_shared_reads_get(r->sr, &r->got, NULL, TABLE, r->pk, r->rk);
	snprintf(r->error, sizeof(r->error), "%s", r->err ? ecw_error_last()->message : "");
	pthread_mutex_lock(&fk.mu);
	r->done = true;
	pthread_mutex_unlock(&fk.mu);
	return NULL;
}

static void reader_start(struct reader *r, struct ecw_shared_reads *sr, const char *pk, const char *rk)
{
	memset(r, 0, sizeof(*r));
	r->sr = sr;
	r->pk = pk;
	snprintf(r->rk, sizeof(r->rk), "%s", rk);
	assert_int_equal(pthread_create(&r->t, NULL, reader_main, r), 0);
}

/* The reader's answer is its own key's entity (or the error named). */
static void reader_check(struct reader *r)
{
	assert_int_equal(pthread_join(r->t, NULL), 0);
	if (strncmp(r->rk, "absent", 6) == 0) {
		assert_int_equal(r->err, ECW_ENOTFOUND);
		assert_null(r->got);
	} else if (strncmp(r->rk, "fail", 4) == 0) {
		assert_int_equal(r->err, ECW_ETRANSIENT);
		char own[24];
		snprintf(own, sizeof(own), "for %.16s", r->rk);
		assert_non_null(strstr(r->error, own)); /* its own GET's error */
		assert_null(r->got);
	} else {
		assert_int_equal(r->err, 0);
		assert_non_null(r->got);
		assert_string_equal(ecw_entity_pk(r->got), r->pk);
		assert_string_equal(ecw_entity_rk(r->got), r->rk);
		assert_non_null(ecw_entity_etag(r->got));
	}
	ecw_entity_free(r->got);
}

static void nap_ms(int ms)
{
	struct timespec ts = {0, (long)ms * 1000000L};
	nanosleep(&ts, NULL);
}

/* Waits (up to 10 s) until want reads are queued in sr. */
static void wait_queued(struct ecw_shared_reads *sr, size_t want)
{
	for (int i = 0; i < 10000 && ecw_shared_reads_waiting(sr, NULL) < want; i++)
		nap_ms(1);
	assert_int_equal(ecw_shared_reads_waiting(sr, NULL), want);
}

/* Holds every GET until release_gets; returns once one is held. */
static void hold_gets(void)
{
	pthread_mutex_lock(&fk.mu);
	fk.hold_gets = true;
	pthread_mutex_unlock(&fk.mu);
}

static void wait_get_held(void)
{
	pthread_mutex_lock(&fk.mu);
	while (fk.gets_inside == 0)
		pthread_cond_wait(&fk.cv, &fk.mu);
	pthread_mutex_unlock(&fk.mu);
}

static void release_gets(void)
{
	pthread_mutex_lock(&fk.mu);
	fk.hold_gets = false;
	pthread_cond_broadcast(&fk.cv);
	pthread_mutex_unlock(&fk.mu);
}

/* A read in partition "Sales" held in flight; then the others of `rks`
 * queue behind it and are let go: returns the first reader. */
static void queue_behind_one(struct reader *first, struct reader *rs, struct ecw_shared_reads *sr,
                             const char *const *rks, size_t n)
{
	hold_gets();
	reader_start(first, sr, "Sales", "first");
	wait_get_held();
	for (size_t i = 0; i < n; i++)
		reader_start(&rs[i], sr, "Sales", rks[i]);
	wait_queued(sr, n);
	release_gets();
	reader_check(first);
	for (size_t i = 0; i < n; i++)
		reader_check(&rs[i]);
}

/* ---- tests ---------------------------------------------------------------------------- */

static void test_shared_reads__alone_is_a_get(void **state)
{
	struct ecw_shared_reads *sr = NULL;
	struct reader r;

	(void)state;
	fake_reset();
	assert_int_equal(ecw_shared_reads_new(&sr, &fake_store), 0);
	reader_start(&r, sr, "Sales", "jones 000001");
	reader_check(&r);
	reader_start(&r, sr, "Sales", "absent 1");
	reader_check(&r);
	assert_int_equal(fk.gets, 2);
	assert_int_equal(fk.queries, 0);
	size_t parts = 9;
	assert_int_equal(ecw_shared_reads_waiting(sr, &parts), 0);
	assert_int_equal(parts, 0); /* an idle partition leaves the map */
	ecw_shared_reads_free(sr);
}

static void test_shared_reads__waiting_reads_share_one_query(void **state)
{
	static const char *const rks[] = {"jones 1", "smith 2", "absent 3", "jones 1", "lee 5"};
	struct ecw_shared_reads *sr = NULL;
	struct reader first, rs[5];

	(void)state;
	fake_reset();
	assert_int_equal(ecw_shared_reads_new(&sr, &fake_store), 0);
	queue_behind_one(&first, rs, sr, rks, 5);
	assert_int_equal(fk.gets, 1); /* the first, alone */
	assert_int_equal(fk.queries, 1);
	assert_int_equal(fk.keys_queried, 5); /* a key twice: each its own copy */
	ecw_shared_reads_free(sr);
}

static void test_shared_reads__other_partition_does_not_wait(void **state)
{
	struct ecw_shared_reads *sr = NULL;
	struct reader held, other;

	(void)state;
	fake_reset();
	assert_int_equal(ecw_shared_reads_new(&sr, &fake_store), 0);
	hold_gets();
	reader_start(&held, sr, "Sales", "held");
	wait_get_held();
	reader_start(&other, sr, "Ops", "other"); /* its GET is held too, but it is sent */
	pthread_mutex_lock(&fk.mu);
	while (fk.gets < 2)
		pthread_cond_wait(&fk.cv, &fk.mu);
	pthread_mutex_unlock(&fk.mu);
	assert_int_equal(ecw_shared_reads_waiting(sr, NULL), 0);
	release_gets();
	reader_check(&held);
	reader_check(&other);
	assert_int_equal(fk.queries, 0);
	ecw_shared_reads_free(sr);
}

static void test_shared_reads__failed_query_each_reads_alone(void **state)
{
	static const char *const rks[] = {"jones 1", "fail 2", "absent 3"};
	struct ecw_shared_reads *sr = NULL;
	struct reader first, rs[3];

	(void)state;
	fake_reset();
	fk.fail_queries = true;
	assert_int_equal(ecw_shared_reads_new(&sr, &fake_store), 0);
	queue_behind_one(&first, rs, sr, rks, 3);
	assert_int_equal(fk.queries, 1);
	assert_int_equal(fk.gets, 1 + 3); /* the first, then each its own */
	ecw_shared_reads_free(sr);
}

static void test_shared_reads__failed_gets_are_each_readers_own(void **state)
{
	static char k1[4001], k2[4001];
	const char *rks[] = {k1, k2};
	struct ecw_shared_reads *sr = NULL;
	struct reader first, rs[2];

	(void)state;
	fake_reset();
	memcpy(k1, "fail 1 ", 7);
	memset(k1 + 7, 'a', 3993);
	memcpy(k2, "fail 2 ", 7);
	memset(k2 + 7, 'b', 3993);
	assert_int_equal(ecw_shared_reads_new(&sr, &fake_store), 0);
	/* Too long to share a query: two single GETs, the second possibly sent
	 * by the first's reader for it. Whoever sent it, the error each reader
	 * returns is its own GET's, naming its own key (reader_check). */
	queue_behind_one(&first, rs, sr, rks, 2);
	assert_in_range(fk.gets, 3, 4);
	assert_int_equal(fk.queries, 0);
	ecw_shared_reads_free(sr);
}

static void test_shared_reads__at_most_14_keys_a_query(void **state)
{
	char names[20][24];
	const char *rks[20];
	struct ecw_shared_reads *sr = NULL;
	struct reader first, rs[20];

	(void)state;
	fake_reset();
	for (int i = 0; i < 20; i++) {
		snprintf(names[i], sizeof(names[i]), "jones %02d", i);
		rks[i] = names[i];
	}
	assert_int_equal(ecw_shared_reads_new(&sr, &fake_store), 0);
	queue_behind_one(&first, rs, sr, rks, 20);
	assert_int_equal(fk.queries, 2); /* 14, then 6 */
	assert_int_equal(fk.biggest_query, 14);
	assert_int_equal(fk.keys_queried, 20);
	assert_int_equal(fk.gets, 1);
	ecw_shared_reads_free(sr);
}

static void test_shared_reads__long_keys_split_queries(void **state)
{
	static char keys[6][1001];
	const char *rks[6];
	struct ecw_shared_reads *sr = NULL;
	struct reader first, rs[6];

	(void)state;
	fake_reset();
	for (int i = 0; i < 6; i++) {
		memset(keys[i], 'a' + i, 1000); /* the longest a key may be: 1 KiB */
		rks[i] = keys[i];
	}
	assert_int_equal(ecw_shared_reads_new(&sr, &fake_store), 0);
	queue_behind_one(&first, rs, sr, rks, 6);
	/* 4,000 bytes of keys in one query; a fifth would pass 4,096. */
	assert_int_equal(fk.queries, 2);
	assert_int_equal(fk.biggest_query, 4);
	assert_int_equal(fk.keys_queried, 6);
	assert_int_equal(fk.gets, 1);
	ecw_shared_reads_free(sr);
}

static void *hammer_main(void *arg)
{
	struct ecw_shared_reads *sr = arg;
	char rk[32];

	for (int i = 0; i < 200; i++) {
		struct ecw_entity *e = NULL;
		snprintf(rk, sizeof(rk), "%s %d", i % 7 == 0 ? "absent" : "jones", i);
		int err = ecw_shared_reads_get(sr, &e, NULL, TABLE, i % 2 ? "Sales" : "Ops", rk);
		if (i % 7 == 0) {
			assert_int_equal(err, ECW_ENOTFOUND);
		} else {
			assert_int_equal(err, 0);
			assert_string_equal(ecw_entity_rk(e), rk);
		}
		ecw_entity_free(e);
	}
	return NULL;
}

static void test_shared_reads__many_threads(void **state)
{
	struct ecw_shared_reads *sr = NULL;
	pthread_t t[16];
	size_t parts = 9;

	(void)state;
	fake_reset();
	assert_int_equal(ecw_shared_reads_new(&sr, &fake_store), 0);
	for (int i = 0; i < 16; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer_main, sr), 0);
	for (int i = 0; i < 16; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	/* Every read answered once, by a GET or a place in a query. */
	assert_int_equal(fk.gets + fk.keys_queried, 16 * 200);
	assert_int_equal(ecw_shared_reads_waiting(sr, &parts), 0);
	assert_int_equal(parts, 0);
	ecw_shared_reads_free(sr);
}

static void expect_kept(struct ecw_shared_reads *sr, const char *rk, bool kept, bool exists)
{
	struct ecw_entity *e = NULL;

	assert_int_equal(ecw_shared_reads_kept(sr, &e, TABLE, "Sales", rk), kept ? 1 : 0);
	if (kept && exists) {
		assert_non_null(e);
		assert_string_equal(ecw_entity_rk(e), rk);
	} else {
		assert_null(e);
	}
	ecw_entity_free(e);
}

static void test_shared_reads__read_ahead_keeps_answers(void **state)
{
	static const char *const ahead[] = {"smith 2", "absent 3", "lee 4"};
	struct ecw_shared_reads *sr = NULL;
	struct ecw_entity *e = NULL;

	(void)state;
	fake_reset();
	clock_fake_set(1000000);
	assert_int_equal(ecw_shared_reads_new(&sr, &fake_store), 0);
	assert_int_equal(ecw_shared_reads_ahead(sr, &e, NULL, TABLE, "Sales", "jones 1", ahead, 3), 0);
	assert_string_equal(ecw_entity_rk(e), "jones 1");
	ecw_entity_free(e);
	assert_int_equal(fk.queries, 1);
	assert_int_equal(fk.keys_queried, 4);
	assert_int_equal(fk.gets, 0);
	expect_kept(sr, "smith 2", true, true);
	expect_kept(sr, "smith 2", false, false); /* once */
	expect_kept(sr, "absent 3", true, false); /* a sure absence */
	expect_kept(sr, "jones 1", false, false); /* the reader's own is not kept */
	clock_fake_advance(3001);
	expect_kept(sr, "lee 4", false, false); /* too old */
	/* Read ahead of nothing: a plain read. */
	assert_int_equal(ecw_shared_reads_ahead(sr, &e, NULL, TABLE, "Sales", "absent 9", NULL, 0),
	                 ECW_ENOTFOUND);
	assert_null(e);
	assert_int_equal(fk.gets, 1);
	assert_int_equal(fk.queries, 1);
	ecw_shared_reads_free(sr);
	clock_real();
}

static void test_shared_reads__read_ahead_failed_reads_alone(void **state)
{
	static const char *const ahead[] = {"smith 2"};
	struct ecw_shared_reads *sr = NULL;
	struct ecw_entity *e = NULL;

	(void)state;
	fake_reset();
	fk.fail_queries = true;
	assert_int_equal(ecw_shared_reads_new(&sr, &fake_store), 0);
	assert_int_equal(ecw_shared_reads_ahead(sr, &e, NULL, TABLE, "Sales", "fail 1", ahead, 1),
	                 ECW_ETRANSIENT);
	assert_non_null(strstr(ecw_error_last()->message, "for fail 1")); /* its own GET's error */
	assert_null(e);
	assert_int_equal(fk.queries, 1);
	assert_int_equal(fk.gets, 1);
	expect_kept(sr, "smith 2", false, false);
	ecw_shared_reads_free(sr);
}

static void test_shared_reads__kept_answers_are_bounded(void **state)
{
	struct ecw_shared_reads *sr = NULL;
	char names[300][16];
	const char *ahead[13];
	struct ecw_entity *e = NULL;

	(void)state;
	fake_reset();
	assert_int_equal(ecw_shared_reads_new(&sr, &fake_store), 0);
	for (int i = 0; i < 300; i++)
		snprintf(names[i], sizeof(names[i]), "k %03d", i);
	/* 23 reads ahead of 13 each: 299 answers for at most 256 places. */
	for (int q = 0; q < 23; q++) {
		for (int j = 0; j < 13; j++)
			ahead[j] = names[q * 13 + j];
		assert_int_equal(ecw_shared_reads_ahead(sr, &e, NULL, TABLE, "Sales", "own", ahead, 13), 0);
		ecw_entity_free(e);
	}
	expect_kept(sr, names[0], false, false); /* the oldest went */
	expect_kept(sr, names[298], true, true);
	int kept = 1;
	for (int i = 0; i < 298; i++) {
		if (ecw_shared_reads_kept(sr, &e, TABLE, "Sales", names[i]) == 1)
			kept++;
		ecw_entity_free(e);
	}
	assert_int_equal(kept, 256);
	ecw_shared_reads_free(sr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shared_reads__alone_is_a_get),
	    cmocka_unit_test(test_shared_reads__waiting_reads_share_one_query),
	    cmocka_unit_test(test_shared_reads__other_partition_does_not_wait),
	    cmocka_unit_test(test_shared_reads__failed_query_each_reads_alone),
	    cmocka_unit_test(test_shared_reads__failed_gets_are_each_readers_own),
	    cmocka_unit_test(test_shared_reads__at_most_14_keys_a_query),
	    cmocka_unit_test(test_shared_reads__long_keys_split_queries),
	    cmocka_unit_test(test_shared_reads__many_threads),
	    cmocka_unit_test(test_shared_reads__read_ahead_keeps_answers),
	    cmocka_unit_test(test_shared_reads__read_ahead_failed_reads_alone),
	    cmocka_unit_test(test_shared_reads__kept_answers_are_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
