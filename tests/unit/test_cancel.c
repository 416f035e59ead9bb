/* SPDX-License-Identifier: MIT */
/* test_cancel.c - the cancellation every wait watches (worker/base/cancel.c):
 * a fire ends a sleep and makes the fd readable, a deadline ends a sleep and
 * clamps a wait's timeout, and NULL is never set. Real time, short waits. */
#include "support.h"

#include <poll.h>
#include <pthread.h>

#include "ecw_cancel.h"
#include "ecw_clock.h"

static void test_cancel__null_is_never_set(void **state)
{
	(void)state;
	assert_false(ecw_cancel_is_set(NULL));
	assert_int_equal(ecw_cancel_fd(NULL), -1);
	assert_int_equal(ecw_cancel_clamp_ms(NULL, 1234), 1234);
	ecw_cancel_fire(NULL);
	assert_false(ecw_cancel_is_set(NULL));
}

static void test_cancel__fire_sets_it_and_wakes_poll(void **state)
{
	struct ecw_cancel *c;
	struct pollfd p;

	(void)state;
	assert_int_equal(ecw_cancel_new(&c), 0);
	assert_false(ecw_cancel_is_set(c));
	p = (struct pollfd){.fd = ecw_cancel_fd(c), .events = POLLIN};
	assert_int_equal(poll(&p, 1, 0), 0);
	assert_int_equal(ecw_cancel_clamp_ms(c, 500), 500);
	ecw_cancel_fire(c);
	ecw_cancel_fire(c); /* twice is once */
	assert_true(ecw_cancel_is_set(c));
	assert_int_equal(poll(&p, 1, 0), 1);
	assert_int_equal(ecw_cancel_clamp_ms(c, 500), 0);
	assert_true(ecw_cancel_sleep_ms(c, 60000)); /* at once */
	ecw_cancel_free(c);
}

static void *fire_later(void *p)
{
	struct timespec ts = {0, 50 * 1000000L};

	nanosleep(&ts, NULL);
	ecw_cancel_fire(p);
	return NULL;
}

static void test_cancel__fire_from_another_thread_ends_a_sleep(void **state)
{
	struct ecw_cancel *c;
	pthread_t t;
	int64_t start;

	(void)state;
	assert_int_equal(ecw_cancel_new(&c), 0);
	start = ecw_clock_now_ms();
	assert_int_equal(pthread_create(&t, NULL, fire_later, c), 0);
	assert_true(ecw_cancel_sleep_ms(c, 30000));
	assert_true(ecw_clock_now_ms() - start < 10000);
	pthread_join(t, NULL);
	ecw_cancel_free(c);
}

static void test_cancel__deadline_clamps_and_ends_a_sleep(void **state)
{
	struct ecw_cancel *c;
	int64_t start;

	(void)state;
	assert_int_equal(ecw_cancel_new(&c), 0);
	start = ecw_clock_now_ms();
	ecw_cancel_set_deadline(c, start + 100);
	assert_true(ecw_cancel_clamp_ms(c, 60000) <= 100);
	assert_int_equal(ecw_cancel_clamp_ms(c, 10), 10);
	assert_false(ecw_cancel_is_set(c));
	assert_true(ecw_cancel_sleep_ms(c, 30000));
	assert_true(ecw_clock_now_ms() - start >= 100);
	assert_true(ecw_clock_now_ms() - start < 10000);
	assert_true(ecw_cancel_is_set(c));
	/* The fd says nothing of a deadline: only a fire makes it readable. */
	struct pollfd p = {.fd = ecw_cancel_fd(c), .events = POLLIN};
	assert_int_equal(poll(&p, 1, 0), 0);
	ecw_cancel_set_deadline(c, 0); /* removed */
	assert_false(ecw_cancel_is_set(c));
	ecw_cancel_free(c);
}

static void test_cancel__a_sleep_that_is_not_cut_returns_false(void **state)
{
	struct ecw_cancel *c;

	(void)state;
	assert_int_equal(ecw_cancel_new(&c), 0);
	assert_false(ecw_cancel_sleep_ms(c, 20));
	ecw_cancel_set_deadline(c, ecw_clock_now_ms() + 60000);
	assert_false(ecw_cancel_sleep_ms(c, 20));
	ecw_cancel_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cancel__null_is_never_set),
	    cmocka_unit_test(test_cancel__fire_sets_it_and_wakes_poll),
	    cmocka_unit_test(test_cancel__fire_from_another_thread_ends_a_sleep),
	    cmocka_unit_test(test_cancel__deadline_clamps_and_ends_a_sleep),
	    cmocka_unit_test(test_cancel__a_sleep_that_is_not_cut_returns_false),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
