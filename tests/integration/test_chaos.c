/* SPDX-License-Identifier: MIT */
/* test_chaos.c - the mixed workload of test_jobs_mixed.c under chaos
 * (tests/integration/mixed.c runs it and says what it checks): 4 workers on
 * one queue, every job type over overlapping keys, while
 * - chaos_small: every 300 ms a random worker is SIGKILLed and restarted,
 *   and the workers' traffic passes through tests/tools/faultproxy, which
 *   answers some requests with 503 ServerBusy, resets some connections
 *   (before forwarding the request, or after the service did the work) and
 *   stalls others past the workers' storage.request_timeout (2 s). 400
 *   messages; it runs in `make test`.
 * - chaos_full: the same with the 3,000 messages; registered only
 *   when ECW_CHAOS=full (`make chaos`), so nothing is skipped as passed.
 * - azurite_restart: an on-disk Azurite is stopped (SIGTERM) 2 s after the
 *   workers started on a backlog (the producers wait meanwhile), stays
 *   down 2 s and comes back on the same ports and location; the workers are
 *   left alone and must ride through.
 * At the end the kills stop, the faults are turned off, the queue drains,
 * the poison queue is listed (every envelope with a reason) and replayed
 * with the operator's commands, the queue drains again, and every message
 * put must be accounted for. Then the run ends as production ends it:
 * `ecworker audit` of every job may find only what jobs/index.c documents
 * as not covered (an email entry no reference names, left when a worker
 * dies or loses its lease right after a write that another worker's round
 * of the same employee had already cleaned up after: an orphan of the
 * email index), `audit --repair employee-by-email` removes those, and a
 * second audit of every job must find nothing; the line "the index window
 * was hit N time(s)" says how often. Last, the derived tables must equal the
 * recomputation from the sources, every employee in exactly one of
 * Employees/EmployeesArchive. Each case runs on an Azurite of its own.
 * ECW_TEST_SEED=N replays a run's plan (the producers' plan and the kills'
 * victims; the timing, and so the window's hits, differ). */
#include "itest.h"
#include "mixed.h"

#include <stdlib.h>
#include <string.h>

/* Kills every 300 ms, and faults on the worker's requests: each kind several
 * times in a run (the run fails if one never happened). */
#define CHAOS                                                                                                \
	.on = true, .kill_every_ms = 300, .p503 = 0.02, .preset = 0.02, .pstall = 0.006, .stall_ms = 20000,  \
	.request_timeout_ms = 2000, .visibility_timeout_s = 4, .max_dequeue_count = 2, .batch_size = 8

/* 4 workers, 400 messages: the size that runs in `make test`. */
#define SMALL_WORKLOAD                                                                                       \
	.workers = 4, .concurrency = 4, .producers = 2, .employees = 24, .archived0 = 6, .customers = 4,     \
	.orders_per = 5, .total = 400, .lastname = 60, .email = 32, .both = 12, .handover = 8,               \
	.cust_change = 40, .cust_delete = 2, .cust_recreate = 1, .archive = 16, .restore = 16,               \
	.min_moves = 40, .drain_s = 180, .settle_ms = 2000

static const struct mixed_scenario CHAOS_SMALL = {
    .name = "chaos-small",
    SMALL_WORKLOAD,
    .chaos = {CHAOS, .kill_for_s = 45},
};

static const struct mixed_scenario CHAOS_FULL = {
    .name = "chaos-full",
    .workers = 4,
    .concurrency = 8,
    .producers = 4,
    .employees = 60,
    .archived0 = 12,
    .customers = 10,
    .orders_per = 20,
    .total = 3000,
    .lastname = 450,
    .email = 250,
    .both = 90,
    .handover = 45,
    .cust_change = 300,
    .cust_delete = 9,
    .cust_recreate = 4,
    .archive = 135,
    .restore = 120,
    .min_moves = 300,
    .drain_s = 600,
    .settle_ms = 3000,
    .chaos = {CHAOS, .kill_for_s = 60},
};

static const struct mixed_scenario AZURITE_RESTART = {
    .name = "azurite-restart",
    SMALL_WORKLOAD,
    .chaos = {.on = true,
              .azurite_restart = true,
              .restart_at_ms = 2000,
              .down_ms = 2000,
              .visibility_timeout_s = 4},
};

static void test_chaos__small(void **state)
{
	mixed_run(state, &CHAOS_SMALL);
}

static void test_chaos__full(void **state)
{
	mixed_run(state, &CHAOS_FULL);
}

static void test_chaos__azurite_restart(void **state)
{
	mixed_run(state, &AZURITE_RESTART);
}

int main(void)
{
	const char *level = getenv("ECW_CHAOS");
	struct CMUnitTest tests[3] = {
	    cmocka_unit_test_setup_teardown(test_chaos__small, mixed_setup, mixed_teardown),
	    cmocka_unit_test_setup_teardown(test_chaos__azurite_restart, mixed_setup, mixed_teardown),
	    cmocka_unit_test_setup_teardown(test_chaos__full, mixed_setup, mixed_teardown),
	};
	/* The size only when asked for (`make chaos`): not registered
	 * otherwise, so it is never counted as run. */
	size_t n = level && strcmp(level, "full") == 0 ? 3 : 2;

	/* ECW_TEST_FILTER=test_chaos__small runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return _cmocka_run_group_tests("test_chaos", tests, n, NULL, NULL);
}
