/* SPDX-License-Identifier: MIT */
/* mixed.h - the mixed-workload scenario runner of test_jobs_mixed.c and
 * test_chaos.c: worker processes (build/ecworker-test) on one queue carrying
 * every job type over overlapping keys, producer threads acting like an
 * application, and a judge that recomputes the derived tables from the
 * source tables alone. A chaos run adds SIGKILLs of random workers, a fault
 * proxy (tests/tools/faultproxy) on the workers' traffic, or a restart of an
 * on-disk Azurite, and then drains, counts and replays the poison queue
 * before judging. The fixture is cmocka's state: mixed_setup allocates it,
 * mixed_teardown stops what a failed run left and frees it. mixed.c runs it,
 * with mixed_app.c (the producers), mixed_judge.c (the recomputation) and
 * mixed_chaos.c; mixed_private.h is what those files share. */
#ifndef ECW_MIXED_H
#define ECW_MIXED_H

#include <stdbool.h>

/* What a chaos run does to the workers; all zero: a calm run, in which
 * nothing may be poisoned and every outcome must be a success, a retry or a
 * lost lease. */
struct mixed_chaos {
	bool on;           /* a chaos run: poison is counted and replayed */
	int kill_every_ms; /* SIGKILL a random worker this often and restart it (0: never) */
	int kill_for_s;    /* ... from the workers' start, and at least until the producers finish */
	/* The workers' traffic through faultproxy with these rates (per
	 * request; all 0: straight to Azurite). */
	double p503, preset, pstall;
	int stall_ms;           /* how long the proxy holds a stalled answer */
	int request_timeout_ms; /* the workers' storage.request_timeout (0: the default) */
	int visibility_timeout_s, max_dequeue_count, batch_size; /* 0: 10 s, 10, 16 */
	/* Azurite keeps its state on disk and is stopped (SIGTERM)
	 * restart_at_ms after the workers started, with a backlog, stays down
	 * down_ms, and is started again on the same ports and location; the
	 * producers wait meanwhile. */
	bool azurite_restart;
	int restart_at_ms, down_ms;
};

struct mixed_scenario {
	const char *name;
	int workers, concurrency, producers;
	int employees, archived0;  /* employees; the first archived0 start in the archive */
	int customers, orders_per; /* orders per customer, in the partition named by its RowKey */
	int total;                 /* messages the producers put, exactly */
	/* planned application operations (the rest of total: stale re-sends
	 * and duplicates) */
	int lastname, email, both, handover, cust_change, cust_delete, cust_recreate, archive, restore;
	int min_moves; /* LastName moves that must have happened */
	int drain_s;   /* the queue must be empty this long after the producers (or the chaos) finished */
	int settle_ms; /* ... and stay empty, nothing in flight, this long */
	struct mixed_chaos chaos;
};

/* cmocka setup / teardown of the fixture. */
int mixed_setup(void **state);
int mixed_teardown(void **state);

/* Runs sc on a private Azurite (the shared one when there is no azurite
 * script; never for a chaos run, which needs its own) and asserts the end
 * state; prints a summary. ECW_TEST_SEED=N replays a run's plan. */
void mixed_run(void **state, const struct mixed_scenario *sc);

#endif
