/* SPDX-License-Identifier: MIT */
/* migrate.h - the migrations room's public face (worker/migrate/): the
 * `migrations:` set of the configuration (parsed by
 * worker/config/migrations.c, ecw_config.h) planned (migrate.c) and applied,
 * its version table read (migrate_apply.c); `ecworker migrate`
 * (worker/cmd/migrate.c) drives both. The set is the configuration's; texts
 * go to caller-owned buffers. */
#ifndef ECW_MIGRATE_H
#define ECW_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>
#include "ecw_buf.h"
#include "ecw_config.h"

struct ecw_client;
struct ecw_migration_set;

/* ---- the plan (worker/migrate/migrate.c) ---- */

/* Appends migration i as the plan prints it: one line per step, from step
 * `from` (0-based) on. */
int ecw_migrate_plan(struct ecw_buf *out, const struct ecw_migration_set *m, size_t i,
		     size_t from) ECW_MUST_USE;

/* ---- applying (worker/migrate/migrate_apply.c) ----------------------------------- */

/* How applying tells the operator what it does, one line at a time (without
 * its newline): problem marks refusals, failures and warnings (stderr); the
 * other lines report progress (stdout). */
typedef void ecw_migrate_say_fn(bool problem, const char *line, void *payload);

struct ecw_migrate_counts {
	size_t applied; /* by this call */
	size_t already; /* found applied: earlier, or by another process meanwhile */
};

/* Applies m's pending migrations through c in list (version) order, stopping
 * at the first failing step; the next call resumes there. Each is claimed in
 * the version table first; a live claim of another process is waited for (up
 * to migrations.wait), an expired or failed one taken over. A history that
 * must not be applied (an applied migration whose definition changed, a
 * pending one older than an applied one) is refused with ECW_EINVALID.
 * progress: a progress line on stderr during the long steps. Every step and
 * every problem is told through say; returns 0 or the error that stopped it
 * (already told). */
int ecw_migrate_apply(struct ecw_migrate_counts *out, struct ecw_client *c, const struct ecw_migration_set *m,
		      bool progress, ecw_migrate_say_fn *say, void *payload) ECW_MUST_USE;
/* The dry run: reads the version table, refuses what ecw_migrate_apply
 * would, and appends to plan each pending migration from the step a run would
 * start at; *pending: how many. Writes nothing to storage. */
int ecw_migrate_dry_run(struct ecw_buf *plan, size_t *pending, struct ecw_client *c,
			const struct ecw_migration_set *m, ecw_migrate_say_fn *say,
			void *payload) ECW_MUST_USE;

/* One line of `migrate status`. */
struct ecw_migrate_row {
	long long version;
	char *id;    /* "?" for a record without one */
	char *state; /* "pending", "applied <when> by <owner>", "running by <owner>, at step
			   * N, ...", "failed at step N: <error>" */
	bool listed; /* false: a record of the version table the configuration no longer lists */
};

/* What the version table says of each migration m lists, in list order, then
 * of each record it does not list. *out is a heap array of *n rows, freed
 * with ecw_migrate_rows_free. Reads only. */
int ecw_migrate_status(struct ecw_migrate_row **out, size_t *n, struct ecw_client *c,
		       const struct ecw_migration_set *m) ECW_MUST_USE;
void ecw_migrate_rows_free(struct ecw_migrate_row *rows, size_t n);

#endif
