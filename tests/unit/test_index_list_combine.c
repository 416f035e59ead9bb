/* SPDX-License-Identifier: MIT */
/* test_index_list_combine.c - the combiner of the index-list job
 * (jobs/index_list_combine.c) against a fake list store: one list in memory
 * with a version, a load and a conditional save that count themselves, a
 * cap on the keys (the store's "too large"), a cap on the changes per save
 * (its "too big for one transaction"), lost races on demand and a slow save
 * so that runs queue up behind a leader. Many threads change one list: every
 * change is applied, in far fewer saves than changes; a lost race reloads and
 * reapplies; an add too large fails only its run; a run whose lease is lost
 * or that is stopping leaves; an add without its intent is sent back. */
#include "support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_job.h"
#include "index_list_combine_private.h"

#define TABLE "Lists"
#define LPK "lastname"
#define LRK "Jones"

/* ---- the fake store ------------------------------------------------------------------- */

static struct fake {
	pthread_mutex_t mu;
	struct tuples keys;
	unsigned version;
	int loads, saves, races_to_lose;
	size_t cap;        /* keys a list may hold (0: any) */
	size_t txn_max;    /* changes one save may hold (0: any) */
	int slow_save_ms;  /* a save takes this long */
	int biggest_batch; /* the most changes one save held */
} fk = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void fake_reset(void)
{
	pthread_mutex_t mu = fk.mu;

	ecw_index_list_tuples_dispose(&fk.keys);
	memset(&fk, 0, sizeof(fk));
	fk.mu = mu;
	ecw_index_list_tuples_init(&fk.keys, 2);
}

static void nap_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int fake_load(struct il_list *out, struct ecw_client *c, const char *table, const char *lpk,
                     const char *lrk)
{
	char etag[32];

	(void)c;
	(void)table;
	memset(out, 0, sizeof(*out));
	ecw_index_list_tuples_init(&out->keys, 2);
	pthread_mutex_lock(&fk.mu);
	fk.loads++;
	for (size_t i = 0; i < fk.keys.n; i++)
		assert_int_equal(ecw_index_list_tuples_add(&out->keys, (const char *const *)fk.keys.v[i].s),
		                 0);
	out->exists = fk.keys.n > 0;
	snprintf(etag, sizeof(etag), "v%u", fk.version);
	pthread_mutex_unlock(&fk.mu);
	out->lpk = strdup(lpk);
	out->lrk = strdup(lrk);
	out->etag = strdup(etag);
	return 0;
}

static size_t changes_between(const struct tuples *a, const struct tuples *b)
{
	size_t n = 0, pos;

	for (size_t i = 0; i < a->n; i++)
		n += !ecw_index_list_tuples_find(b, (const char *const *)a->v[i].s, &pos);
	for (size_t i = 0; i < b->n; i++)
		n += !ecw_index_list_tuples_find(a, (const char *const *)b->v[i].s, &pos);
	return n;
}

static int fake_check(const struct il_list *read, const struct tuples *keys)
{
	(void)read;
	if (fk.cap && keys->n > fk.cap)
		return ecw_error_set_http(ECW_ETOOLARGE, 413, "RequestBodyTooLarge", "req-1",
		                          "%s/%s is too large: %zu keys", LPK, LRK, keys->n);
	return 0;
}

static int fake_save(struct ecw_client *c, const char *table, const struct il_list *read,
                     const struct tuples *keys)
{
	char etag[32];
	size_t changes;
	int err = 0;

	(void)c;
	(void)table;
	if ((err = fake_check(read, keys)) < 0)
		return err;
	if (fk.slow_save_ms)
		nap_ms(fk.slow_save_ms);
	pthread_mutex_lock(&fk.mu);
	changes = changes_between(&read->keys, keys);
	snprintf(etag, sizeof(etag), "v%u", fk.version);
	if (fk.races_to_lose > 0) {
		/* another worker's write got there first: it adds a key of its own */
		const char *other[2] = {"other", etag};
		fk.races_to_lose--;
		assert_int_equal(ecw_index_list_tuples_add(&fk.keys, other), 0);
		fk.version++;
		err = ecw_error_set(ECW_EPRECONDITION, "412");
	} else if (strcmp(etag, read->etag) != 0) {
		err = ecw_error_set(ECW_EPRECONDITION, "412");
	} else if (fk.txn_max && changes > fk.txn_max) {
		err = 1;
	} else {
		fk.saves++;
		if ((int)changes > fk.biggest_batch)
			fk.biggest_batch = (int)changes;
		ecw_index_list_tuples_dispose(&fk.keys);
		for (size_t i = 0; i < keys->n; i++)
			assert_int_equal(
			    ecw_index_list_tuples_add(&fk.keys, (const char *const *)keys->v[i].s), 0);
		fk.version++;
	}
	pthread_mutex_unlock(&fk.mu);
	return err;
}

static const struct il_store fake_store = {fake_load, fake_save, fake_check};

static bool fake_has(const char *pk, const char *rk)
{
	const char *key[2] = {pk, rk};
	size_t pos;
	bool has;

	pthread_mutex_lock(&fk.mu);
	has = ecw_index_list_tuples_find(&fk.keys, key, &pos);
	pthread_mutex_unlock(&fk.mu);
	return has;
}

static void fake_put(const char *pk, const char *rk)
{
	const char *key[2] = {pk, rk};
	assert_int_equal(ecw_index_list_tuples_add(&fk.keys, key), 0);
}

/* ---- runs ----------------------------------------------------------------------------- */

/* One run's change, on a thread of its own. */
struct run {
	pthread_t th;
	struct il_combiners *cs;
	struct ecw_job_ctx ctx;
	atomic_bool lease_lost, stopping;
	char rk[32];
	bool add, intent;
	int repeat; /* changes made one after another (keys rk-0, rk-1, ...) */
	int delay_ms;
	/* A change that ends in ECW_ETRANSIENT (races lost MAX_CAS times in a
	 * row) is made again up to this many times, as its message would be
	 * delivered again; counted in redelivered. */
	int redeliveries;
	int redelivered;
	/* out */
	int err, conflicts;
	enum il_change_result result;
	char msg[512];
	int http_status; /* the storage answer behind err, as its thread's last error has it */
	char service_code[64];
};

static void *run_main(void *p)
{
	struct run *r = p;

	if (r->delay_ms)
		nap_ms(r->delay_ms);
	for (int i = 0; i < (r->repeat ? r->repeat : 1); i++) {
		char rk[48];
		struct il_change ch = {.ctx = &r->ctx,
		                       .table = TABLE,
		                       .lpk = LPK,
		                       .lrk = LRK,
		                       .add = r->add,
		                       .intent = r->intent};

		snprintf(rk, sizeof(rk), r->repeat ? "%s-%d" : "%s", r->rk, i);
		ch.key[0] = "emp";
		ch.key[1] = rk;
		r->err = ecw_index_list_combine(r->cs, &ch);
		for (int k = 0; r->err == ECW_ETRANSIENT && k < r->redeliveries; k++) {
			r->conflicts += ch.conflicts;
			r->redelivered++;
			r->err = ecw_index_list_combine(r->cs, &ch);
		}
		r->conflicts += ch.conflicts;
		r->result = ch.result;
		snprintf(r->msg, sizeof(r->msg), "%s", ecw_error_last()->message);
		r->http_status = ecw_error_last()->http_status;
		snprintf(r->service_code, sizeof(r->service_code), "%s", ecw_error_last()->service_code);
		if (r->err < 0)
			break;
	}
	return NULL;
}

static void run_init(struct run *r, struct il_combiners *cs, const char *rk, bool add)
{
	memset(r, 0, sizeof(*r));
	r->cs = cs;
	r->ctx.lease_lost = &r->lease_lost;
	r->ctx.stopping = &r->stopping;
	r->ctx.message_id = rk;
	snprintf(r->rk, sizeof(r->rk), "%s", rk);
	r->add = add;
	r->intent = add;
}

static void run_start(struct run *r)
{
	assert_int_equal(pthread_create(&r->th, NULL, run_main, r), 0);
}

static void run_join(struct run *r)
{
	assert_int_equal(pthread_join(r->th, NULL), 0);
}

static struct il_combiners *combiners(void)
{
	struct il_combiners *cs;

	fake_reset();
	assert_int_equal(ecw_index_list_combiners_new(&cs, &fake_store), 0);
	return cs;
}

/* ---- cases ------------------------------------------------------------------------------ */

/* 16 threads, 40 adds each to one list: every key lands, one load and one
 * save per batch, far fewer saves than changes. */
static void test_index_list_combine__many_threads_one_list(void **state)
{
	struct il_combiners *cs = combiners();
	static struct run runs[16];
	char rk[32];

	(void)state;
	fk.slow_save_ms = 2;
	for (int i = 0; i < 16; i++) {
		snprintf(rk, sizeof(rk), "t%02d", i);
		run_init(&runs[i], cs, rk, true);
		runs[i].repeat = 40;
		run_start(&runs[i]);
	}
	for (int i = 0; i < 16; i++) {
		run_join(&runs[i]);
		assert_int_equal(runs[i].err, 0);
		assert_int_equal(runs[i].result, IL_CHANGED);
	}
	assert_int_equal(fk.keys.n, 16 * 40);
	for (int i = 0; i < 16; i++)
		for (int k = 0; k < 40; k++) {
			snprintf(rk, sizeof(rk), "t%02d-%d", i, k);
			assert_true(fake_has("emp", rk));
		}
	printf("# 640 changes: %d loads, %d saves, at most %d changes in one save\n", fk.loads, fk.saves,
	       fk.biggest_batch);
	assert_true(fk.saves <= 640 / 4);
	assert_int_equal(fk.loads, fk.saves); /* no race lost: one load per save */
	assert_true(fk.biggest_batch > 1 && fk.biggest_batch <= 64);
	ecw_index_list_combiners_free(cs);
}

/* The same list from threads of two "workers" (two maps) racing on its
 * version: every key lands all the same. */
static void test_index_list_combine__two_maps_race(void **state)
{
	struct il_combiners *a = combiners(), *b;
	static struct run runs[8];
	char rk[32];
	int conflicts = 0;

	(void)state;
	assert_int_equal(ecw_index_list_combiners_new(&b, &fake_store), 0);
	fk.slow_save_ms = 1;
	for (int i = 0; i < 8; i++) {
		snprintf(rk, sizeof(rk), "w%d", i);
		run_init(&runs[i], i % 2 ? a : b, rk, true);
		runs[i].repeat = 20;
		/* The test build's backoff does not wait (support.c), so under
		 * valgrind's one-thread-at-a-time scheduling two maps can keep
		 * beating each other past MAX_CAS: the change then fails
		 * transiently and its message would come again. */
		runs[i].redeliveries = 5;
		run_start(&runs[i]);
	}
	int redelivered = 0;
	for (int i = 0; i < 8; i++) {
		run_join(&runs[i]);
		assert_int_equal(runs[i].err, 0);
		conflicts += runs[i].conflicts;
		redelivered += runs[i].redelivered;
	}
	assert_int_equal(fk.keys.n, 160);
	printf("# 160 changes from two maps: %d saves, %d lost races, %d changes made again\n", fk.saves,
	       conflicts, redelivered);
	ecw_index_list_combiners_free(a);
	ecw_index_list_combiners_free(b);
}

/* Lost races: the leader backs off, reloads and reapplies; the other
 * writer's key stays; the races are the leader's conflicts. */
static void test_index_list_combine__lost_race_reapplies(void **state)
{
	struct il_combiners *cs = combiners();
	struct run r;

	(void)state;
	fake_put("emp", "old");
	fk.version = 7;
	fk.races_to_lose = 3;
	sleeps_reset();
	run_init(&r, cs, "new", true);
	run_main(&r);
	assert_int_equal(r.err, 0);
	assert_int_equal(r.result, IL_CHANGED);
	assert_int_equal(r.conflicts, 3);
	assert_int_equal(fk.loads, 4);
	assert_int_equal(fk.saves, 1);
	assert_int_equal(fk.keys.n, 5); /* old, new, and the three others' */
	assert_true(fake_has("emp", "old") && fake_has("emp", "new"));
	assert_int_equal(sleeps_count(), 3); /* a jittered backoff before each reload */
	ecw_index_list_combiners_free(cs);
}

/* A list that keeps changing: after MAX_CAS lost races, a transient error. */
static void test_index_list_combine__keeps_losing_is_transient(void **state)
{
	struct il_combiners *cs = combiners();
	struct run r;

	(void)state;
	fk.races_to_lose = 1000;
	run_init(&r, cs, "k", true);
	run_main(&r);
	assert_int_equal(r.err, ECW_ETRANSIENT);
	assert_non_null(strstr(r.msg, "changed under us"));
	assert_false(fake_has("emp", "k"));
	ecw_index_list_combiners_free(cs);
}

/* Starts a blocker (its slow save holds the lead) and then the runs, which
 * queue behind it and go in one batch. */
static void behind_a_blocker(struct run *blocker, struct run *runs, size_t n)
{
	run_start(blocker);
	nap_ms(30);
	for (size_t i = 0; i < n; i++)
		run_start(&runs[i]);
	run_join(blocker);
	for (size_t i = 0; i < n; i++)
		run_join(&runs[i]);
	assert_int_equal(blocker->err, 0);
}

/* Adds past the list's cap in one batch: only the adds that do not fit
 * fail, with the store's error (its storage answer too, which the poison
 * envelope records); the others are saved in the same write. */
static void test_index_list_combine__too_large_fails_only_it(void **state)
{
	struct il_combiners *cs = combiners();
	struct run blocker, runs[4];
	char rk[16];
	int failed = 0;

	(void)state;
	for (int i = 0; i < 7; i++) {
		snprintf(rk, sizeof(rk), "pre%d", i);
		fake_put("emp", rk);
	}
	fk.cap = 10;
	fk.slow_save_ms = 150;
	run_init(&blocker, cs, "blocker", true);
	for (int i = 0; i < 4; i++) {
		snprintf(rk, sizeof(rk), "b%d", i);
		run_init(&runs[i], cs, rk, true);
	}
	behind_a_blocker(&blocker, runs, 4); /* 8 keys, and 4 adds in one batch */
	for (int i = 0; i < 4; i++)
		if (runs[i].err == ECW_ETOOLARGE) {
			failed++;
			assert_non_null(strstr(runs[i].msg, "too large"));
			assert_int_equal(runs[i].http_status, 413);
			assert_string_equal(runs[i].service_code, "RequestBodyTooLarge");
			assert_false(fake_has("emp", runs[i].rk));
		} else {
			assert_int_equal(runs[i].err, 0);
			assert_int_equal(runs[i].result, IL_CHANGED);
		}
	assert_int_equal(failed, 2);
	assert_int_equal(fk.keys.n, 10);
	assert_int_equal(fk.saves, 2); /* the blocker's, and one for the batch */
	ecw_index_list_combiners_free(cs);
}

/* A run whose lease is lost is dropped before the save; the others are
 * written. */
static void test_index_list_combine__lease_lost_dropped(void **state)
{
	struct il_combiners *cs = combiners();
	struct run blocker, runs[3];
	char rk[16];

	(void)state;
	fk.slow_save_ms = 150;
	run_init(&blocker, cs, "blocker", true);
	for (int i = 0; i < 3; i++) {
		snprintf(rk, sizeof(rk), "l%d", i);
		run_init(&runs[i], cs, rk, true);
	}
	atomic_store(&runs[1].lease_lost, true);
	behind_a_blocker(&blocker, runs, 3);
	assert_int_equal(runs[1].err, ECW_ETRANSIENT);
	assert_non_null(strstr(runs[1].msg, "lease lost"));
	assert_false(fake_has("emp", "l1"));
	assert_int_equal(runs[0].err, 0);
	assert_int_equal(runs[2].err, 0);
	assert_true(fake_has("emp", "l0") && fake_has("emp", "l2"));
	assert_int_equal(fk.saves, 2);
	ecw_index_list_combiners_free(cs);
}

/* A queued run whose worker is stopping leaves without waiting for the
 * leader's slow write; its change is not made. */
static void test_index_list_combine__stopping_waiter_leaves(void **state)
{
	struct il_combiners *cs = combiners();
	struct run blocker, waiter;
	struct timespec t0, t1;

	(void)state;
	fk.slow_save_ms = 1500;
	run_init(&blocker, cs, "blocker", true);
	run_init(&waiter, cs, "waiter", true);
	run_start(&blocker);
	nap_ms(30);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	run_start(&waiter);
	nap_ms(30);
	atomic_store(&waiter.stopping, true);
	run_join(&waiter);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(waiter.err, ECW_ECANCELED);
	assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 1000);
	run_join(&blocker);
	assert_int_equal(blocker.err, 0);
	assert_false(fake_has("emp", "waiter"));
	ecw_index_list_combiners_free(cs);
}

/* An add without its intent: sent back when the key is absent (nothing
 * written), "unchanged" when it is there; a remove of an absent key too. */
static void test_index_list_combine__intent_first(void **state)
{
	struct il_combiners *cs = combiners();
	struct run r;

	(void)state;
	fake_put("emp", "here");
	run_init(&r, cs, "absent", true);
	r.intent = false;
	run_main(&r);
	assert_int_equal(r.err, 0);
	assert_int_equal(r.result, IL_NEED_INTENT);
	run_init(&r, cs, "here", true);
	r.intent = false;
	run_main(&r);
	assert_int_equal(r.err, 0);
	assert_int_equal(r.result, IL_UNCHANGED);
	run_init(&r, cs, "absent", false);
	run_main(&r);
	assert_int_equal(r.result, IL_UNCHANGED);
	assert_int_equal(fk.saves, 0);
	assert_false(fake_has("emp", "absent"));
	ecw_index_list_combiners_free(cs);
}

/* The store says a batch is too big for one transaction: fewer changes go
 * at once, all of them in the end. */
static void test_index_list_combine__transaction_too_big_splits(void **state)
{
	struct il_combiners *cs = combiners();
	struct run blocker, runs[6];
	char rk[16];

	(void)state;
	fk.slow_save_ms = 150;
	fk.txn_max = 2;
	run_init(&blocker, cs, "blocker", true);
	for (int i = 0; i < 6; i++) {
		snprintf(rk, sizeof(rk), "s%d", i);
		run_init(&runs[i], cs, rk, true);
	}
	behind_a_blocker(&blocker, runs, 6);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(runs[i].err, 0);
		assert_int_equal(runs[i].result, IL_CHANGED);
	}
	assert_int_equal(fk.keys.n, 7);
	assert_true(fk.biggest_batch <= 2);
	assert_true(fk.saves >= 1 + 3 && fk.saves <= 1 + 6); /* halved until they fit */
	ecw_index_list_combiners_free(cs);
}

/* Many lists one after another: each combiner goes when idle, so the map
 * never fills (a full map would still work, uncombined). */
static void test_index_list_combine__idle_lists_leave_the_map(void **state)
{
	struct il_combiners *cs = combiners();
	struct ecw_job_ctx ctx = {0};

	(void)state;
	for (int i = 0; i < 3000; i++) {
		char lrk[16];
		struct il_change ch = {.ctx = &ctx,
		                       .table = TABLE,
		                       .lpk = LPK,
		                       .lrk = lrk,
		                       .add = true,
		                       .intent = true,
		                       .key = {"emp", "k"}};
		snprintf(lrk, sizeof(lrk), "v%d", i);
		assert_int_equal(ecw_index_list_combine(cs, &ch), 0);
	}
	assert_int_equal(ecw_index_list_combiners_size(cs), 0);
	ecw_index_list_combiners_free(cs);
	ecw_index_list_tuples_dispose(&fk.keys);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_index_list_combine__many_threads_one_list),
	    cmocka_unit_test(test_index_list_combine__two_maps_race),
	    cmocka_unit_test(test_index_list_combine__lost_race_reapplies),
	    cmocka_unit_test(test_index_list_combine__keeps_losing_is_transient),
	    cmocka_unit_test(test_index_list_combine__too_large_fails_only_it),
	    cmocka_unit_test(test_index_list_combine__lease_lost_dropped),
	    cmocka_unit_test(test_index_list_combine__stopping_waiter_leaves),
	    cmocka_unit_test(test_index_list_combine__intent_first),
	    cmocka_unit_test(test_index_list_combine__transaction_too_big_splits),
	    cmocka_unit_test(test_index_list_combine__idle_lists_leave_the_map),
	};
	ecw_index_list_tuples_init(&fk.keys, 2);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
