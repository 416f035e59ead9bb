/* SPDX-License-Identifier: MIT */
/* runtime.h - the runtime room's public face (worker/runtime/): `ecworker run`
 * (worker/runtime/runtime.c) and the preflight that `run` makes at start and
 * `ecworker check-config --online` before a deploy (preflight.c). What the
 * room's files share besides is in runtime_private.h. */
#ifndef ECW_RUNTIME_H
#define ECW_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include "ecw_config.h"
#include "ecw_storage.h"

/* runtime.c - `ecworker run`: receive messages, run the jobs they name, and
 * apply the outcome rules, until SIGTERM or SIGINT. */

/* Returns the process exit status: 0 after a clean stop, 1 when the worker
 * could not start (storage unreachable, bad credentials, metrics address in
 * use), 130 after a second signal cut the shutdown short. *threads_done is
 * false when job threads still run (shutdown_grace ran out, or a second
 * signal): then cfg must stay alive until the process exits. */
int ecw_runtime_run(const struct ecw_config *cfg, bool *threads_done);

/* preflight.c - a configuration checked against storage with its own
 * credentials: `ecworker check-config --online` before a deploy, and `run`
 * at start. What it finds, each naming what it concerns:
 *   credentials   refused (403/401): nothing else can be told;
 *   queue         a work or poison queue that does not exist while
 *                 create_missing is off, or that the credential could not
 *                 create;
 *   source        a table a job reads (its source, a move's `from`) that
 *                 does not exist: the worker never creates one (a typo'd
 *                 source made empty would read as "every entity deleted");
 *                 likewise a blob container a job works in (blob-ref);
 *   target        a table a job writes that does not exist while
 *                 create_missing is off, or that the credential could not
 *                 create; the schedules' table likewise.
 * A problem is a fact about the deployment, not an error of the check:
 * ecw_preflight returns how many it reported, and an ecw_err only when
 * storage could not be asked (no answer, throttled: try again). */

enum ecw_preflight_kind {
	ECW_PREFLIGHT_CREDENTIALS,
	ECW_PREFLIGHT_QUEUE,
	ECW_PREFLIGHT_POISON_QUEUE,
	ECW_PREFLIGHT_SOURCE,
	ECW_PREFLIGHT_TARGET,
};

struct ecw_preflight_problem {
	enum ecw_preflight_kind kind;
	const char *job;  /* the job it concerns; NULL for credentials and queues */
	const char *name; /* the queue or table; NULL for credentials */
	const char *text; /* one line: what is wrong and what to do */
};

/* Checks cfg through c, calling report for each problem (the problem and
 * its strings live until report returns). Returns the number of problems,
 * or a negative ecw_err (last error set) when storage did not answer. */
int ecw_preflight(const struct ecw_config *cfg, struct ecw_client *c, const struct ecw_account *acct,
		  void (*report)(const struct ecw_preflight_problem *p, void *payload), void *payload);

#endif
