/* SPDX-License-Identifier: MIT */
/* test_outcome.c - the outcome rules (worker/runtime/outcome.c), row by row as the
 * worker/README.md's table states them, with each boundary: what the worker does with
 * a message after it ran, before it runs, when its envelope could not be put
 * and when its lease is gone. No process, no service: the rules are a pure
 * function. test_settle (integration) keeps what needs a running worker:
 * that the answer is carried out on a real queue. */
#include "support.h"

#include <stdint.h>

#include "ecw_clock.h"
#include "runtime_private.h"

/* The draw a retry's jitter gets: 0, so a hidden time is the backoff's
 * ceiling itself. */
static uint32_t no_jitter(void)
{
	return 0;
}

/* base 2 s, max 5 min, 5 deliveries: the configuration's defaults. */
static const struct ecw_outcome_limits defaults = {
    .max_dequeue_count = 5,
    .retry_backoff_base_ms = 2000,
    .retry_backoff_max_ms = 300000,
};

static struct ecw_outcome ran(int err, long dequeue_count)
{
	struct ecw_outcome o;
	struct ecw_outcome_facts f = {.stage = ECW_STAGE_RAN,
	                              .decoded = true,
	                              .runnable = true,
	                              .err = err,
	                              .dequeue_count = dequeue_count};

	ecw_outcome_decide(&o, &f, &defaults, no_jitter);
	return o;
}

static struct ecw_outcome received(bool decoded, bool runnable, long dequeue_count)
{
	struct ecw_outcome o;
	struct ecw_outcome_facts f = {.stage = ECW_STAGE_RECEIVED,
	                              .decoded = decoded,
	                              .runnable = runnable,
	                              .dequeue_count = dequeue_count};

	ecw_outcome_decide(&o, &f, &defaults, no_jitter);
	return o;
}

static void is(const struct ecw_outcome *o, enum ecw_outcome_action action, enum ecw_poison_reason reason,
               const char *word)
{
	assert_int_equal(o->action, action);
	assert_int_equal(o->reason, reason);
	assert_string_equal(o->word, word);
}

/* Row 1: the job succeeded: delete, on any delivery, the last one included. */
static void test_outcome__success_deletes(void **state)
{
	(void)state;
	for (long n = 1; n <= defaults.max_dequeue_count; n++) {
		struct ecw_outcome o = ran(0, n);
		is(&o, ECW_ACTION_DELETE, ECW_REASON_NONE, "succeeded");
	}
}

/* Row 2: a transient failure before the last delivery keeps the message,
 * hidden for base * 2^(dequeue_count-1); every class but the permanent ones
 * is transient. */
static void test_outcome__transient_failure_retries(void **state)
{
	static const int transient[] = {ECW_ERROR,     ECW_ENOMEM,        ECW_ENOTFOUND,
	                                ECW_ECONFLICT, ECW_EPRECONDITION, ECW_EAUTH,
	                                ECW_EBUSY,     ECW_ETIMEOUT,      ECW_ETRANSIENT};
	(void)state;
	for (size_t i = 0; i < sizeof(transient) / sizeof(transient[0]); i++) {
		struct ecw_outcome o = ran(transient[i], 1);
		is(&o, ECW_ACTION_RETRY, ECW_REASON_NONE, "retried");
		assert_int_equal(o.hide_s, 2);
	}
	struct ecw_outcome o = ran(ECW_ETRANSIENT, 3);
	assert_int_equal(o.hide_s, 8);
	o = ran(ECW_ETRANSIENT, 4);
	assert_int_equal(o.hide_s, 16);
}

/* The backoff: a ceiling doubling from base, capped at max, in whole
 * seconds rounded up, 1 s at least, 7 days at most; the hidden time is drawn
 * from 1 s to the ceiling (full jitter), every value as likely. */
static void test_outcome__backoff_cap_and_jitter(void **state)
{
	struct ecw_outcome_limits l = {
	    .max_dequeue_count = 100, .retry_backoff_base_ms = 2000, .retry_backoff_max_ms = 30000};
	(void)state;
	assert_int_equal(ecw_outcome_retry_hide_s(&l, 1, 0), 2);
	assert_int_equal(ecw_outcome_retry_hide_s(&l, 4, 0), 16);
	assert_int_equal(ecw_outcome_retry_hide_s(&l, 5, 0), 30); /* 32 s capped at 30 */
	assert_int_equal(ecw_outcome_retry_hide_s(&l, 99, 0), 30);
	assert_int_equal(ecw_outcome_retry_hide_s(&l, 0, 0), 2); /* never below base */
	/* The window's ends: draw ceiling - 1 gives 1 s, draw ceiling wraps to
	 * the ceiling again. */
	assert_int_equal(ecw_outcome_retry_hide_s(&l, 10, 29), 1);
	assert_int_equal(ecw_outcome_retry_hide_s(&l, 10, 30), 30);
	assert_int_equal(ecw_outcome_retry_hide_s(&l, 1, 1), 1); /* a first retry: 1 or 2 s */
	/* 30,000 draws over a 30 s window: each second 1..30 drawn about 1,000
	 * times, none outside it. */
	int seen[32] = {0};
	for (uint32_t r = 0; r < 30000; r++) {
		int s = ecw_outcome_retry_hide_s(&l, 10, r * 2654435761u);
		assert_in_range(s, 1, 30);
		seen[s]++;
	}
	for (int s = 1; s <= 30; s++)
		assert_in_range(seen[s], 800, 1200);
	/* Bounds: a 100 ms base still hides a whole second; 8 days are cut to 7. */
	l = (struct ecw_outcome_limits){
	    .max_dequeue_count = 5, .retry_backoff_base_ms = 100, .retry_backoff_max_ms = 100};
	assert_int_equal(ecw_outcome_retry_hide_s(&l, 1, 99), 1);
	l = (struct ecw_outcome_limits){.max_dequeue_count = 5,
	                                .retry_backoff_base_ms = 8LL * 86400000,
	                                .retry_backoff_max_ms = 8LL * 86400000};
	assert_int_equal(ecw_outcome_retry_hide_s(&l, 1, 0), 604800);
	assert_int_equal(ecw_outcome_retry_hide_s(&l, 1, 604799), 1);
	/* Equal facts, equal answers: the rules keep no state. */
	assert_int_equal(ecw_outcome_retry_hide_s(&defaults, 7, 12345),
	                 ecw_outcome_retry_hide_s(&defaults, 7, 12345));
}

/* A burst that failed together does not come back together: 100 messages
 * failing on their second delivery (a 4 s window) with the worker's own
 * random draws are hidden for every second of the window, and no second
 * holds more than half of them. Before full jitter all 100 were hidden 4 s. */
static void test_outcome__a_burst_spreads_over_the_window(void **state)
{
	int seen[5] = {0};
	(void)state;
	for (int i = 0; i < 100; i++) {
		struct ecw_outcome o;
		struct ecw_outcome_facts f = {.stage = ECW_STAGE_RAN,
		                              .decoded = true,
		                              .runnable = true,
		                              .err = ECW_ETRANSIENT,
		                              .dequeue_count = 2};
		ecw_outcome_decide(&o, &f, &defaults, ecw_clock_random_u32);
		assert_in_range(o.hide_s, 1, 4);
		seen[o.hide_s]++;
	}
	for (int s = 1; s <= 4; s++) {
		assert_true(seen[s] > 0);
		assert_true(seen[s] <= 50);
	}
}

/* Row 3: a permanent failure poisons at once, on the first delivery. */
static void test_outcome__permanent_failure_poisons_at_once(void **state)
{
	(void)state;
	struct ecw_outcome o = ran(ECW_EINVALID, 1);
	is(&o, ECW_ACTION_POISON, ECW_REASON_PERMANENT, "poisoned");
	o = ran(ECW_ETOOLARGE, 1);
	is(&o, ECW_ACTION_POISON, ECW_REASON_PERMANENT, "poisoned");
	/* Permanent wins over the count on the last delivery too. */
	o = ran(ECW_EINVALID, defaults.max_dequeue_count);
	is(&o, ECW_ACTION_POISON, ECW_REASON_PERMANENT, "poisoned");
}

/* Row 3, before running: text that is no job message, an unknown job or
 * missing keys is poisoned as permanent without running. */
static void test_outcome__refused_before_running(void **state)
{
	(void)state;
	struct ecw_outcome o = received(false, false, 1);
	is(&o, ECW_ACTION_POISON, ECW_REASON_PERMANENT, "poisoned");
	o = received(true, false, 1);
	is(&o, ECW_ACTION_POISON, ECW_REASON_PERMANENT, "poisoned");
	o = received(true, true, 1);
	is(&o, ECW_ACTION_RUN, ECW_REASON_NONE, "run");
}

/* Row 4: received with dequeue_count > max_dequeue_count (a worker died
 * holding it every time): poisoned without running; at max it still runs. */
static void test_outcome__over_max_on_receipt_poisons_without_running(void **state)
{
	(void)state;
	struct ecw_outcome o = received(true, true, defaults.max_dequeue_count);
	is(&o, ECW_ACTION_RUN, ECW_REASON_NONE, "run");
	o = received(true, true, defaults.max_dequeue_count + 1);
	is(&o, ECW_ACTION_POISON, ECW_REASON_MAX_DEQUEUE, "poisoned");
	/* The order of the checks: undecodable text is permanent whatever its
	 * count; a decoded one over the count is max-dequeue even when it could
	 * not run anyway. */
	o = received(false, false, defaults.max_dequeue_count + 1);
	is(&o, ECW_ACTION_POISON, ECW_REASON_PERMANENT, "poisoned");
	o = received(true, false, defaults.max_dequeue_count + 1);
	is(&o, ECW_ACTION_POISON, ECW_REASON_MAX_DEQUEUE, "poisoned");
}

/* Row 5: a transient failure on delivery max_dequeue_count poisons; one
 * delivery earlier it retries. max_dequeue_count 1: the first failure. */
static void test_outcome__transient_on_last_delivery_poisons(void **state)
{
	(void)state;
	struct ecw_outcome o = ran(ECW_EBUSY, defaults.max_dequeue_count - 1);
	is(&o, ECW_ACTION_RETRY, ECW_REASON_NONE, "retried");
	o = ran(ECW_EBUSY, defaults.max_dequeue_count);
	is(&o, ECW_ACTION_POISON, ECW_REASON_MAX_DEQUEUE, "poisoned");
	o = ran(ECW_EBUSY, defaults.max_dequeue_count + 1);
	is(&o, ECW_ACTION_POISON, ECW_REASON_MAX_DEQUEUE, "poisoned");

	struct ecw_outcome_limits one = defaults;
	struct ecw_outcome_facts f = {.stage = ECW_STAGE_RAN,
	                              .decoded = true,
	                              .runnable = true,
	                              .err = ECW_ETIMEOUT,
	                              .dequeue_count = 1};
	one.max_dequeue_count = 1;
	ecw_outcome_decide(&o, &f, &one, no_jitter);
	is(&o, ECW_ACTION_POISON, ECW_REASON_MAX_DEQUEUE, "poisoned");
}

/* Row 6: the lease was lost: whatever the job did, the message is left
 * alone (another worker may hold it); the reason it would have been
 * poisoned for stays, for the log. */
static void test_outcome__lease_lost_leaves_it_alone(void **state)
{
	static const int errs[] = {0, ECW_ETRANSIENT, ECW_EINVALID};
	(void)state;
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		struct ecw_outcome o;
		struct ecw_outcome_facts f = {.stage = ECW_STAGE_RAN,
		                              .decoded = true,
		                              .runnable = true,
		                              .err = errs[i],
		                              .dequeue_count = 1,
		                              .lease_lost = true};
		ecw_outcome_decide(&o, &f, &defaults, no_jitter);
		is(&o, ECW_ACTION_LEAVE, errs[i] == ECW_EINVALID ? ECW_REASON_PERMANENT : ECW_REASON_NONE,
		   "lease-lost");
	}
	struct ecw_outcome o;
	struct ecw_outcome_facts f = {
	    .stage = ECW_STAGE_RECEIVED, .decoded = false, .dequeue_count = 1, .lease_lost = true};
	ecw_outcome_decide(&o, &f, &defaults, no_jitter);
	is(&o, ECW_ACTION_LEAVE, ECW_REASON_PERMANENT, "lease-lost");
}

/* Shutdown released the message (visible again for another replica):
 * nobody settles it, lease or not. */
static void test_outcome__released_is_left_alone(void **state)
{
	(void)state;
	struct ecw_outcome o;
	struct ecw_outcome_facts f = {.stage = ECW_STAGE_RAN,
	                              .decoded = true,
	                              .runnable = true,
	                              .err = 0,
	                              .dequeue_count = 1,
	                              .lease_lost = true,
	                              .released = true};
	ecw_outcome_decide(&o, &f, &defaults, no_jitter);
	is(&o, ECW_ACTION_LEAVE, ECW_REASON_NONE, "released");
}

/* Poisoning decided, the envelope could not be put: the original must stay
 * until an envelope holds it, so it waits as a transient failure would. */
static void test_outcome__failed_poisoning_keeps_the_message(void **state)
{
	(void)state;
	struct ecw_outcome o;
	struct ecw_outcome_facts f = {.stage = ECW_STAGE_POISON_FAILED,
	                              .decoded = true,
	                              .runnable = true,
	                              .err = ECW_ETRANSIENT,
	                              .dequeue_count = 3};
	ecw_outcome_decide(&o, &f, &defaults, no_jitter);
	assert_int_equal(o.action, ECW_ACTION_RETRY);
	assert_string_equal(o.word, "poison-failed");
	assert_int_equal(o.hide_s, 8);
	f.lease_lost = true;
	ecw_outcome_decide(&o, &f, &defaults, no_jitter);
	is(&o, ECW_ACTION_LEAVE, ECW_REASON_NONE, "lease-lost");
}

/* The guard the runtime applies again at the moment of the queue call. */
static void test_outcome__guard(void **state)
{
	(void)state;
	struct ecw_outcome o = ran(0, 1);
	ecw_outcome_guard(&o, false, false);
	is(&o, ECW_ACTION_DELETE, ECW_REASON_NONE, "succeeded");
	ecw_outcome_guard(&o, true, false);
	is(&o, ECW_ACTION_LEAVE, ECW_REASON_NONE, "lease-lost");
	o = ran(ECW_EINVALID, 1);
	ecw_outcome_guard(&o, false, true);
	is(&o, ECW_ACTION_LEAVE, ECW_REASON_PERMANENT, "released");
	o = received(true, true, 1);
	ecw_outcome_guard(&o, true, true);
	is(&o, ECW_ACTION_RUN, ECW_REASON_NONE, "run"); /* jobs check the lease themselves */
}

static void test_outcome__reason_names(void **state)
{
	(void)state;
	assert_string_equal(ecw_outcome_reason_name(ECW_REASON_PERMANENT), "permanent");
	assert_string_equal(ecw_outcome_reason_name(ECW_REASON_MAX_DEQUEUE), "max-dequeue");
	assert_null(ecw_outcome_reason_name(ECW_REASON_NONE));
}

/* The jitter is drawn for a retry only: the shared random state stays off
 * every other message's path. */
static int draws;
static uint32_t counted_draw(void)
{
	draws++;
	return 0;
}

static void test_outcome__random_drawn_for_retries_only(void **state)
{
	struct ecw_outcome o;
	struct ecw_outcome_facts f = {
	    .stage = ECW_STAGE_RECEIVED, .decoded = true, .runnable = true, .dequeue_count = 1};
	(void)state;
	draws = 0;
	ecw_outcome_decide(&o, &f, &defaults, counted_draw);
	f.stage = ECW_STAGE_RAN;
	ecw_outcome_decide(&o, &f, &defaults, counted_draw);
	f.err = ECW_EINVALID;
	ecw_outcome_decide(&o, &f, &defaults, counted_draw);
	assert_int_equal(draws, 0);
	f.err = ECW_ETRANSIENT;
	ecw_outcome_decide(&o, &f, &defaults, counted_draw);
	assert_int_equal(o.action, ECW_ACTION_RETRY);
	assert_int_equal(draws, 1);
}

/* The storage circuit is open: the facts of a delivery during an outage. */
static struct ecw_outcome in_outage(enum ecw_outcome_stage stage, int err, long dequeue_count)
{
	struct ecw_outcome o;
	struct ecw_outcome_facts f = {.stage = stage,
	                              .decoded = true,
	                              .runnable = true,
	                              .err = err,
	                              .dequeue_count = dequeue_count,
	                              .outage = true};

	ecw_outcome_decide(&o, &f, &defaults, no_jitter);
	return o;
}

/* Outage rows: a held message is not run while the circuit is open, and a
 * transient failure then is the service's: hidden for the usual backoff,
 * never poisoned, on every delivery up to the last allowed one, where it is
 * requeued (its next delivery would be over the limit and poisoned on
 * receipt). Without the outage the same last delivery is poisoned. */
static void test_outcome__outage_never_poisons(void **state)
{
	static const int outage[] = {ECW_EBUSY, ECW_ETIMEOUT, ECW_ETRANSIENT};
	(void)state;
	for (size_t i = 0; i < sizeof(outage) / sizeof(outage[0]); i++) {
		for (long n = 1; n < defaults.max_dequeue_count; n++) {
			struct ecw_outcome o = in_outage(ECW_STAGE_RAN, outage[i], n);
			is(&o, ECW_ACTION_RETRY, ECW_REASON_NONE, "retried");
			assert_int_equal(o.hide_s, ecw_outcome_retry_hide_s(&defaults, n, 0));
			o = in_outage(ECW_STAGE_RECEIVED, 0, n);
			is(&o, ECW_ACTION_RETRY, ECW_REASON_NONE, "deferred");
			assert_int_equal(o.hide_s, ecw_outcome_retry_hide_s(&defaults, n, 0));
		}
		long last = defaults.max_dequeue_count;
		struct ecw_outcome o = in_outage(ECW_STAGE_RAN, outage[i], last);
		is(&o, ECW_ACTION_REQUEUE, ECW_REASON_NONE, "requeued");
		assert_true(o.hide_s >= 1);
		o = in_outage(ECW_STAGE_RECEIVED, 0, last);
		is(&o, ECW_ACTION_REQUEUE, ECW_REASON_NONE, "requeued");
		o = ran(outage[i], last);
		is(&o, ECW_ACTION_POISON, ECW_REASON_MAX_DEQUEUE, "poisoned");
	}
}

/* What an outage does not excuse: a permanent failure, undecodable text, a
 * message over the limit on receipt (the worker died holding it each time);
 * and a success is a success. */
static void test_outcome__outage_keeps_the_other_rows(void **state)
{
	struct ecw_outcome o;
	struct ecw_outcome_facts f = {.stage = ECW_STAGE_RECEIVED,
	                              .decoded = false,
	                              .runnable = false,
	                              .dequeue_count = 1,
	                              .outage = true};

	(void)state;
	o = in_outage(ECW_STAGE_RAN, ECW_EINVALID, 1);
	is(&o, ECW_ACTION_POISON, ECW_REASON_PERMANENT, "poisoned");
	o = in_outage(ECW_STAGE_RAN, 0, 1);
	is(&o, ECW_ACTION_DELETE, ECW_REASON_NONE, "succeeded");
	o = in_outage(ECW_STAGE_RECEIVED, 0, defaults.max_dequeue_count + 1);
	is(&o, ECW_ACTION_POISON, ECW_REASON_MAX_DEQUEUE, "poisoned");
	ecw_outcome_decide(&o, &f, &defaults, no_jitter);
	is(&o, ECW_ACTION_POISON, ECW_REASON_PERMANENT, "poisoned");
	/* A requeue is a call on the queue: a lost lease leaves it alone. */
	f = (struct ecw_outcome_facts){.stage = ECW_STAGE_RAN,
	                               .decoded = true,
	                               .runnable = true,
	                               .err = ECW_ETRANSIENT,
	                               .dequeue_count = defaults.max_dequeue_count,
	                               .outage = true,
	                               .lease_lost = true};
	ecw_outcome_decide(&o, &f, &defaults, no_jitter);
	is(&o, ECW_ACTION_LEAVE, ECW_REASON_NONE, "lease-lost");
}

/* Shutdown cut the job's storage calls short (ECW_ECANCELED): no call on
 * the message, whatever its count: its lease brings it back. */
static void test_outcome__interrupted_is_left_to_its_lease(void **state)
{
	(void)state;
	for (long n = 1; n <= defaults.max_dequeue_count; n++) {
		struct ecw_outcome o = ran(ECW_ECANCELED, n);
		is(&o, ECW_ACTION_LEAVE, ECW_REASON_NONE, "interrupted");
	}
}

/* A missing table (ECW_ENOTABLE) blocks the job: its message is held as in
 * an outage, with no outage going on: hidden for the backoff on every
 * delivery, requeued at the last allowed one, never poisoned. */
static void test_outcome__missing_table_holds_never_poisons(void **state)
{
	(void)state;
	for (long n = 1; n < defaults.max_dequeue_count; n++) {
		struct ecw_outcome o = ran(ECW_ENOTABLE, n);
		is(&o, ECW_ACTION_RETRY, ECW_REASON_NONE, "blocked");
		assert_int_equal(o.hide_s, ecw_outcome_retry_hide_s(&defaults, n, 0));
	}
	struct ecw_outcome o = ran(ECW_ENOTABLE, defaults.max_dequeue_count);
	is(&o, ECW_ACTION_REQUEUE, ECW_REASON_NONE, "requeued");
	assert_true(o.hide_s >= 1);
	o = in_outage(ECW_STAGE_RAN, ECW_ENOTABLE, defaults.max_dequeue_count);
	is(&o, ECW_ACTION_REQUEUE, ECW_REASON_NONE, "requeued");
}

/* A missing blob container (ECW_ENOCONTAINER) blocks the job as a missing
 * table does. */
static void test_outcome__missing_container_holds_never_poisons(void **state)
{
	(void)state;
	for (long n = 1; n < defaults.max_dequeue_count; n++) {
		struct ecw_outcome o = ran(ECW_ENOCONTAINER, n);
		is(&o, ECW_ACTION_RETRY, ECW_REASON_NONE, "blocked");
	}
	struct ecw_outcome o = ran(ECW_ENOCONTAINER, defaults.max_dequeue_count);
	is(&o, ECW_ACTION_REQUEUE, ECW_REASON_NONE, "requeued");
}

/* A job that asked to run again later (ECW_ELATER: blob-ref's blobs in
 * their grace) is hidden exactly as long as it asked (within 1 s .. 7 days),
 * whatever the backoff, and requeued at its last allowed delivery: never
 * poisoned for waiting. */
static void test_outcome__later_waits_as_asked_never_poisons(void **state)
{
	static const int asked[] = {1, 7, 601, 604800, 0, 900000};
	static const int want[] = {1, 7, 601, 604800, 1, 604800};

	(void)state;
	for (size_t i = 0; i < sizeof(asked) / sizeof(asked[0]); i++)
		for (long n = 1; n <= defaults.max_dequeue_count; n++) {
			struct ecw_outcome o;
			struct ecw_outcome_facts f = {.stage = ECW_STAGE_RAN,
			                              .decoded = true,
			                              .runnable = true,
			                              .err = ECW_ELATER,
			                              .later_s = asked[i],
			                              .dequeue_count = n};
			ecw_outcome_decide(&o, &f, &defaults, no_jitter);
			if (n < defaults.max_dequeue_count)
				is(&o, ECW_ACTION_RETRY, ECW_REASON_NONE, "waiting");
			else
				is(&o, ECW_ACTION_REQUEUE, ECW_REASON_NONE, "requeued");
			assert_int_equal(o.hide_s, want[i]);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_outcome__success_deletes),
	    cmocka_unit_test(test_outcome__transient_failure_retries),
	    cmocka_unit_test(test_outcome__backoff_cap_and_jitter),
	    cmocka_unit_test(test_outcome__a_burst_spreads_over_the_window),
	    cmocka_unit_test(test_outcome__permanent_failure_poisons_at_once),
	    cmocka_unit_test(test_outcome__refused_before_running),
	    cmocka_unit_test(test_outcome__over_max_on_receipt_poisons_without_running),
	    cmocka_unit_test(test_outcome__transient_on_last_delivery_poisons),
	    cmocka_unit_test(test_outcome__lease_lost_leaves_it_alone),
	    cmocka_unit_test(test_outcome__released_is_left_alone),
	    cmocka_unit_test(test_outcome__failed_poisoning_keeps_the_message),
	    cmocka_unit_test(test_outcome__guard),
	    cmocka_unit_test(test_outcome__reason_names),
	    cmocka_unit_test(test_outcome__random_drawn_for_retries_only),
	    cmocka_unit_test(test_outcome__outage_never_poisons),
	    cmocka_unit_test(test_outcome__interrupted_is_left_to_its_lease),
	    cmocka_unit_test(test_outcome__outage_keeps_the_other_rows),
	    cmocka_unit_test(test_outcome__missing_table_holds_never_poisons),
	    cmocka_unit_test(test_outcome__missing_container_holds_never_poisons),
	    cmocka_unit_test(test_outcome__later_waits_as_asked_never_poisons),
	};
	return cmocka_run_group_tests_name("outcome", tests, NULL, NULL);
}
