/* SPDX-License-Identifier: MIT */
/* test_circuit.c - the storage circuit breaker (worker/runtime/circuit.c): when it
 * opens (a streak of outage-class failures AND a probe that gets no answer),
 * when it does not (a message's own failures, failures a success broke up,
 * a probe that is answered), how it probes while open (doubling waits up to
 * the cap) and how it closes (a probe answered, or any success), with the
 * gauge /readyz reads. A fake probe and a fake clock. */
#include "support.h"

#include <stdlib.h>

#include "runtime_private.h"
#include "ecw_clock.h"
#include "telemetry.h"

struct probe {
	int answer; /* what the probe returns */
	int calls;
};

static int fake_probe(void *payload)
{
	struct probe *p = payload;

	p->calls++;
	return p->answer;
}

static const struct ecw_circuit_limits limits = {.failures = 3, .probe_min_ms = 1000, .probe_max_ms = 8000};

static bool gauge_open(void)
{
	char *page = ecw_metrics_render();
	bool open = str_contains(page, "\necw_storage_circuit_open 1\n");

	assert_true(open || str_contains(page, "\necw_storage_circuit_open 0\n"));
	free(page);
	return open;
}

static struct ecw_circuit *circuit(struct probe *p)
{
	struct ecw_circuit *c;

	clock_fake_set(1000000);
	ecw_metrics_reset();
	assert_int_equal(ecw_circuit_new(&c, &limits, fake_probe, p), 0);
	return c;
}

static void test_circuit__outage_opens_after_the_streak_and_a_failed_probe(void **state)
{
	struct probe p = {.answer = ECW_ETRANSIENT};
	struct ecw_circuit *c = circuit(&p);

	(void)state;
	assert_false(ecw_circuit_note(c, ECW_ETRANSIENT));
	assert_false(ecw_circuit_note(c, ECW_ETIMEOUT));
	assert_int_equal(p.calls, 0);
	assert_false(gauge_open());
	assert_true(ecw_circuit_note(c, ECW_EBUSY)); /* the third: probe, no answer */
	assert_int_equal(p.calls, 1);
	assert_true(ecw_circuit_is_open(c));
	assert_true(gauge_open());
	/* While open, each outage failure is the service's; no probe per failure. */
	assert_true(ecw_circuit_note(c, ECW_ETRANSIENT));
	assert_int_equal(p.calls, 1);
	/* A message's own failure is never the service's. */
	assert_false(ecw_circuit_note(c, ECW_EINVALID));
	assert_false(ecw_circuit_note(c, ECW_EPRECONDITION));
	assert_true(ecw_circuit_is_open(c));
	ecw_circuit_free(c);
}

static void test_circuit__an_answered_probe_keeps_it_closed(void **state)
{
	struct probe p = {.answer = 0};
	struct ecw_circuit *c = circuit(&p);

	(void)state;
	for (int i = 0; i < 9; i++)
		assert_false(ecw_circuit_note(c, ECW_ETRANSIENT));
	assert_int_equal(p.calls, 3); /* every third: storage answered each time */
	assert_false(ecw_circuit_is_open(c));
	/* An answer that is an error but not an outage's (a 403) is an answer. */
	p.answer = ECW_EAUTH;
	for (int i = 0; i < 3; i++)
		assert_false(ecw_circuit_note(c, ECW_ETRANSIENT));
	assert_false(ecw_circuit_is_open(c));
	assert_false(gauge_open());
	ecw_circuit_free(c);
}

static void test_circuit__a_success_breaks_the_streak(void **state)
{
	struct probe p = {.answer = ECW_ETRANSIENT};
	struct ecw_circuit *c = circuit(&p);

	(void)state;
	for (int i = 0; i < 10; i++) {
		assert_false(ecw_circuit_note(c, ECW_ETRANSIENT));
		assert_false(ecw_circuit_note(c, ECW_ETRANSIENT));
		assert_false(ecw_circuit_note(c, 0));
		/* other failures neither count nor break it */
		assert_false(ecw_circuit_note(c, ECW_ENOTFOUND));
	}
	assert_int_equal(p.calls, 0);
	assert_false(ecw_circuit_is_open(c));
	ecw_circuit_free(c);
}

static void open_it(struct ecw_circuit *c)
{
	for (int i = 0; i < limits.failures; i++)
		(void)ecw_circuit_note(c, ECW_ETRANSIENT);
	assert_true(ecw_circuit_is_open(c));
}

static void test_circuit__probes_at_doubling_intervals_then_closes(void **state)
{
	struct probe p = {.answer = ECW_ETIMEOUT};
	struct ecw_circuit *c = circuit(&p);
	static const int64_t waits[] = {1000, 2000, 4000, 8000, 8000};

	(void)state;
	assert_int_equal(ecw_circuit_probe_due_in_ms(c), -1); /* closed */
	open_it(c);
	for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
		assert_int_equal(ecw_circuit_probe_due_in_ms(c), waits[i]);
		clock_fake_advance(waits[i] - 1);
		assert_int_equal(ecw_circuit_probe_due_in_ms(c), 1);
		clock_fake_advance(1);
		assert_int_equal(ecw_circuit_probe_due_in_ms(c), 0);
		assert_false(ecw_circuit_probe(c));
		assert_true(gauge_open());
	}
	p.answer = 0;
	assert_true(ecw_circuit_probe(c));
	assert_false(ecw_circuit_is_open(c));
	assert_false(gauge_open());
	assert_int_equal(ecw_circuit_probe_due_in_ms(c), -1);
	/* Closed, a new streak starts from nothing. */
	p.answer = ECW_ETRANSIENT;
	assert_false(ecw_circuit_note(c, ECW_ETRANSIENT));
	assert_false(ecw_circuit_note(c, ECW_ETRANSIENT));
	assert_true(ecw_circuit_note(c, ECW_ETRANSIENT));
	/* ...and the waits start from the minimum again. */
	assert_int_equal(ecw_circuit_probe_due_in_ms(c), 1000);
	ecw_circuit_free(c);
}

static void test_circuit__a_success_closes_it(void **state)
{
	struct probe p = {.answer = ECW_ETRANSIENT};
	struct ecw_circuit *c = circuit(&p);

	(void)state;
	open_it(c);
	assert_false(ecw_circuit_note(c, 0));
	assert_false(ecw_circuit_is_open(c));
	assert_false(gauge_open());
	ecw_circuit_free(c);
}

static void test_circuit__zero_failures_never_opens(void **state)
{
	struct probe p = {.answer = ECW_ETRANSIENT};
	struct ecw_circuit_limits off = limits;
	struct ecw_circuit *c;

	(void)state;
	off.failures = 0;
	assert_int_equal(ecw_circuit_new(&c, &off, fake_probe, &p), 0);
	for (int i = 0; i < 100; i++)
		assert_false(ecw_circuit_note(c, ECW_ETRANSIENT));
	assert_int_equal(p.calls, 0);
	ecw_circuit_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_circuit__outage_opens_after_the_streak_and_a_failed_probe),
	    cmocka_unit_test(test_circuit__an_answered_probe_keeps_it_closed),
	    cmocka_unit_test(test_circuit__a_success_breaks_the_streak),
	    cmocka_unit_test(test_circuit__probes_at_doubling_intervals_then_closes),
	    cmocka_unit_test(test_circuit__a_success_closes_it),
	    cmocka_unit_test(test_circuit__zero_failures_never_opens),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
