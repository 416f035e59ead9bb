/* SPDX-License-Identifier: MIT */
/* test_limiter.c - the adaptive concurrency limit (worker/runtime/limiter.c): halved
 * by throttling at most once a window (the answers of what was in flight at
 * the cut) and never below min, raised by one for each limit's worth of good
 * answers and never above max, fixed when min == max; which statuses are
 * throttling. */
#include "support.h"

#include "runtime_private.h"

static void test_limiter__throttling_halves_once_a_window(void **state)
{
	struct ecw_limiter l;
	(void)state;

	ecw_limiter_init(&l, 2, 64);
	assert_int_equal(ecw_limiter_limit(&l), 64);
	assert_int_equal(ecw_limiter_note(&l, 503), -1);
	assert_int_equal(ecw_limiter_limit(&l), 32);
	/* The other 63 requests in flight at the cut answer: no second cut. */
	for (int i = 0; i < 63; i++)
		assert_int_equal(ecw_limiter_note(&l, i % 2 ? 500 : 0), 0);
	assert_int_equal(ecw_limiter_limit(&l), 32);
	assert_int_equal(ecw_limiter_note(&l, 503), 0); /* the 64th answer of that window */
	assert_int_equal(ecw_limiter_note(&l, 503), -1);
	assert_int_equal(ecw_limiter_limit(&l), 16);
	for (int i = 0; i < 1000; i++)
		(void)ecw_limiter_note(&l, 503);
	assert_int_equal(ecw_limiter_limit(&l), 2); /* min */
	assert_int_equal(l.cuts, 5);                /* 64 32 16 8 4 2 */
	ecw_limiter_dispose(&l);
}

static void test_limiter__good_answers_raise_by_one_a_window(void **state)
{
	struct ecw_limiter l;
	int raised = 0;
	(void)state;

	ecw_limiter_init(&l, 1, 20);
	(void)ecw_limiter_note(&l, 503);
	assert_int_equal(ecw_limiter_limit(&l), 10);
	/* +1/limit an answer: 10 answers for 10 -> 11. */
	for (int i = 0; i < 9; i++)
		raised += ecw_limiter_note(&l, 200);
	assert_int_equal(raised, 0);
	assert_int_equal(ecw_limiter_limit(&l), 10);
	for (int i = 0; i < 2; i++)
		raised += ecw_limiter_note(&l, 404); /* an answer, not throttling */
	assert_int_equal(raised, 1);
	assert_int_equal(ecw_limiter_limit(&l), 11);
	for (int i = 0; i < 1000; i++)
		(void)ecw_limiter_note(&l, 412);
	assert_int_equal(ecw_limiter_limit(&l), 20); /* max */
	ecw_limiter_dispose(&l);
}

static void test_limiter__fixed_when_min_is_max(void **state)
{
	struct ecw_limiter l;
	(void)state;

	ecw_limiter_init(&l, 16, 16);
	assert_int_equal(ecw_limiter_note(&l, 503), 0);
	assert_int_equal(ecw_limiter_limit(&l), 16);
	ecw_limiter_dispose(&l);
	ecw_limiter_init(&l, 0, 0); /* nonsense is clamped to a limit of 1 */
	assert_int_equal(ecw_limiter_limit(&l), 1);
	ecw_limiter_dispose(&l);
}

static void test_limiter__what_is_throttling(void **state)
{
	static const int yes[] = {503, 500, 0}, no[] = {200, 201, 204, 304, 400, 403, 404, 409, 412, 413};
	(void)state;

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		assert_true(ecw_limiter_is_throttling(yes[i]));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		assert_false(ecw_limiter_is_throttling(no[i]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_limiter__throttling_halves_once_a_window),
	    cmocka_unit_test(test_limiter__good_answers_raise_by_one_a_window),
	    cmocka_unit_test(test_limiter__fixed_when_min_is_max),
	    cmocka_unit_test(test_limiter__what_is_throttling),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
