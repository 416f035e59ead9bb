/* SPDX-License-Identifier: MIT */
/* audit_run.h - one job's audit run to its end (worker/schedule/audit_run.c), for
 * both `ecworker audit` (worker/cmd/audit.c: options, report, exit status)
 * and the audits the runtime runs on a schedule (worker/schedule/schedule_audit.c):
 * the pacing at a chosen rate of storage requests, the stop, the counts, and
 * the findings handed on. What an audit compares is the job's
 * (ecw_audit.h). */
#ifndef ECW_AUDIT_RUN_H
#define ECW_AUDIT_RUN_H

#include <stdatomic.h>
#include <stdbool.h>
#include "ecw_audit.h"
#include "ecw_config.h"

struct ecw_audit_run_opts {
	const char *partition; /* only sources of this PartitionKey; NULL: all */
	bool repair;
	double rate;             /* storage requests a second, repairs included; 0: unpaced */
	const atomic_bool *stop; /* set (by a signal handler or another thread): stop soon; may be NULL */
	/* Called before each storage request the audit makes, after its pacing;
	 * false stops the audit (the runtime renews its claim here). May be NULL. */
	bool (*on_request)(void *payload);
	/* As in struct ecw_audit_ctx; may be NULL. */
	void (*on_finding)(const struct ecw_audit_finding *f, void *payload);
	void (*on_checked)(const struct ecw_audit_counts *c, void *payload);
	/* --via-queue: as ctx->requeue (a repair is the job's message); NULL:
	 * repairs run here. */
	int (*requeue)(const char *pk, const char *rk, void *payload);
	/* The configuration the job is in: a repair run here then runs the
	 * jobs its `then:` names (and theirs) for the same keys, as the
	 * job's message would. NULL: none. */
	const struct ecw_config *cfg;
	void *payload;
};

/* Audits job (whose type->audit is not NULL) on c. *out receives the counts,
 * also those of an audit that failed or stopped part way; *stopped (may be
 * NULL) whether it stopped before its end (o->stop, or on_request said so).
 * Returns 0, or the audit's error (the last error says why). */
int ecw_audit_run(struct ecw_audit_counts *out, bool *stopped, struct ecw_client *c,
		  const struct ecw_job_def *job, const struct ecw_audit_run_opts *o) ECW_MUST_USE;

#endif
