/* SPDX-License-Identifier: MIT */
/* test_queue_pick.c - weighted shares of the receives (worker/runtime/queue_pick.c):
 * exact shares by weight when all queues have work, spread out rather than
 * in bursts; an idle queue takes no share and gets no burst when it comes
 * back; none ready: -1. */
#include "support.h"

#include "runtime_private.h"

static void test_queue_pick__shares_by_weight_spread_out(void **state)
{
	static const int w[] = {4, 1};
	struct ecw_queue_pick p;
	int count[2] = {0}, run = 0, longest = 0, last = -1;
	(void)state;

	ecw_queue_pick_init(&p, w, 2);
	ecw_queue_pick_set_ready(&p, 0, true);
	ecw_queue_pick_set_ready(&p, 1, true);
	for (int i = 0; i < 500; i++) {
		int q = ecw_queue_pick_next(&p);
		assert_in_range(q, 0, 1);
		count[q]++;
		run = q == last ? run + 1 : 1;
		longest = run > longest ? run : longest;
		last = q;
	}
	assert_int_equal(count[0], 400);
	assert_int_equal(count[1], 100);
	assert_true(longest <= 4); /* never a burst of the heavy queue */
}

static void test_queue_pick__three_queues_exact_shares(void **state)
{
	static const int w[] = {5, 3, 2};
	struct ecw_queue_pick p;
	int count[3] = {0};
	(void)state;

	ecw_queue_pick_init(&p, w, 3);
	for (size_t i = 0; i < 3; i++)
		ecw_queue_pick_set_ready(&p, i, true);
	for (int i = 0; i < 1000; i++)
		count[ecw_queue_pick_next(&p)]++;
	assert_int_equal(count[0], 500);
	assert_int_equal(count[1], 300);
	assert_int_equal(count[2], 200);
}

static void test_queue_pick__idle_queue_takes_no_share(void **state)
{
	static const int w[] = {1, 4};
	struct ecw_queue_pick p;
	int count[2] = {0};
	(void)state;

	ecw_queue_pick_init(&p, w, 2);
	assert_int_equal(ecw_queue_pick_next(&p), -1); /* none ready */
	ecw_queue_pick_set_ready(&p, 0, true);
	for (int i = 0; i < 50; i++)
		assert_int_equal(ecw_queue_pick_next(&p), 0); /* the heavy queue is idle */
	/* It comes back: shares by weight from the first pick, no catching up
	 * on the picks it missed. */
	ecw_queue_pick_set_ready(&p, 1, true);
	for (int i = 0; i < 5; i++)
		count[ecw_queue_pick_next(&p)]++;
	assert_int_equal(count[0], 1);
	assert_int_equal(count[1], 4);
	/* Idle again: its credit is dropped. */
	ecw_queue_pick_set_ready(&p, 1, false);
	assert_int_equal(p.q[1].credit, 0);
	assert_int_equal(ecw_queue_pick_next(&p), 0);
}

static void test_queue_pick__bounds(void **state)
{
	int w[ECW_QUEUES_MAX + 2] = {0, -3, 2};
	struct ecw_queue_pick p;
	(void)state;

	ecw_queue_pick_init(&p, w, ECW_QUEUES_MAX + 2);
	assert_int_equal(p.n, ECW_QUEUES_MAX);
	assert_int_equal(p.q[0].weight, 1); /* weights below 1 count as 1 */
	assert_int_equal(p.q[1].weight, 1);
	ecw_queue_pick_set_ready(&p, ECW_QUEUES_MAX + 1, true); /* out of range: ignored */
	assert_int_equal(ecw_queue_pick_next(&p), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_queue_pick__shares_by_weight_spread_out),
	    cmocka_unit_test(test_queue_pick__three_queues_exact_shares),
	    cmocka_unit_test(test_queue_pick__idle_queue_takes_no_share),
	    cmocka_unit_test(test_queue_pick__bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
