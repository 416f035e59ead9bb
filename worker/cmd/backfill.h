/* SPDX-License-Identifier: MIT */
/* backfill.h - `ecworker backfill`: scan a job's source table and enqueue one
 * message per entity, so a new index (or any derived data) is built over what
 * already exists. */
#ifndef ECW_BACKFILL_H
#define ECW_BACKFILL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include "ecw_config.h"

struct ecw_backfill_options {
	const char *filter;          /* OData $filter on the source, NULL for all */
	const char *queue;           /* the job queue to put on; NULL: the first (worker.queue) */
	double rate;                 /* messages per second, 0 = as fast as storage allows */
	bool progress;               /* count, rate and elapsed time on stderr each second */
	volatile sig_atomic_t *stop; /* set (by a signal) to stop after the message in hand */
};

struct ecw_backfill_result {
	uint64_t scanned, enqueued, failed;
	double seconds;
	bool stopped; /* interrupted before the end of the table */
};

/* Returns 0 when the scan finished (puts may still have failed: see
 * result->failed), or an ecw_err when the scan itself failed. */
int ecw_backfill(struct ecw_backfill_result *result, const struct ecw_config *cfg,
		 const struct ecw_job_def *job, const struct ecw_backfill_options *opts) ECW_MUST_USE;

#endif
