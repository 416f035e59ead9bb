/* SPDX-License-Identifier: MIT */
/* test_jobs_mixed.c - every job type at once, as in production: several
 * worker processes compete on one queue that carries a mix of all the jobs
 * of config/demo.yaml over overlapping keys while producer threads act like
 * an application, and the end state is judged by a full recomputation from
 * the source tables alone, with nothing poisoned (tests/integration/mixed.c
 * runs the scenario and says what it checks).
 *
 * Two cases: a small one first (a quick sanity check of the same code), then
 * the issue's: 4 workers, 2,000 messages, at least 200 LastName moves. Each
 * runs on an in-memory Azurite of its own. ECW_TEST_SEED=N replays a run's
 * plan (the interleaving still varies). */
#include "itest.h"
#include "mixed.h"

#include <stdlib.h>

static const struct mixed_scenario SMALL = {
    .name = "mixed-small",
    .workers = 2,
    .concurrency = 4,
    .producers = 2,
    .employees = 12,
    .archived0 = 3,
    .customers = 3,
    .orders_per = 5,
    .total = 200,
    .lastname = 30,
    .email = 16,
    .both = 6,
    .handover = 4,
    .cust_change = 20,
    .cust_delete = 1,
    .cust_recreate = 1,
    .archive = 8,
    .restore = 8,
    .min_moves = 20,
    .drain_s = 60,
    .settle_ms = 2000,
};

static const struct mixed_scenario FULL = {
    .name = "mixed-full",
    .workers = 4,
    .concurrency = 8,
    .producers = 4,
    .employees = 60,
    .archived0 = 12,
    .customers = 10,
    .orders_per = 20,
    .total = 2000,
    .lastname = 300,
    .email = 170,
    .both = 60,
    .handover = 30,
    .cust_change = 200,
    .cust_delete = 6,
    .cust_recreate = 3,
    .archive = 90,
    .restore = 80,
    .min_moves = 200,
    .drain_s = 180,
    .settle_ms = 3000,
};

/* The same code on a small scale: 2 workers, 200 messages. */
static void test_jobs_mixed__small_sanity(void **state)
{
	mixed_run(state, &SMALL);
}

/* The issue's: 4 workers, 2,000 messages, at least 200 LastName moves. */
static void test_jobs_mixed__four_workers_converge(void **state)
{
	mixed_run(state, &FULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_jobs_mixed__small_sanity, mixed_setup, mixed_teardown),
	    cmocka_unit_test_setup_teardown(test_jobs_mixed__four_workers_converge, mixed_setup,
	                                    mixed_teardown),
	};
	/* ECW_TEST_FILTER=test_jobs_mixed__small* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
