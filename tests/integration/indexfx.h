/* SPDX-License-Identifier: MIT */
/* indexfx.h - the fixture of the tests of the `index` job run as a process (test_job_index.c,
 * test_job_index_races.c): cmocka's state owns a struct wfx (the job queue t->queue, the source t->table
 * and the index t->table2, named only: the workers create them; ix_extra_table names more), the workers
 * started on the default job or on the jobs a test writes (struct ix_wopts, ix_default_job,
 * ix_start_worker) and waited for by their message lines (ix_outcomes, ix_wait_outcomes, ix_finish),
 * messages put (ix_enqueue, ix_enqueue_on), employees written and read back (ix_employee, ix_set_str,
 * ix_upsert, ix_put_employee, ix_ensure_table, ix_get, ix_strp, ix_count_entities), and the recomputation
 * that judges an index table: every entry and back-reference the sources give, exactly, and nothing else
 * (struct ix_spec, ix_check_recompute, ix_ref_keys). */
#ifndef ECW_INDEXFX_H
#define ECW_INDEXFX_H

#include <stdbool.h>
#include <stddef.h>

#include "itest.h"
#include "proc.h"
#include "workerfx.h"

/* The default job's name. */
#define IX_JOB "by-email"

/* ---- fixture ------------------------------------------------------------------------------------ */

/* cmocka setup: t->queue is the job queue, t->table the source, t->table2
 * the index: the workers create them. */
int ix_setup(void **state);

/* cmocka teardown: wfx_teardown. */
int ix_teardown(void **state);

/* One more table name, deleted by the teardown. */
const char *ix_extra_table(struct wfx *x);

/* ---- the worker --------------------------------------------------------------------------------- */

struct ix_wopts {
	const char *queue;      /* NULL: the fixture's */
	const char *jobs;       /* lines under jobs:, indented two spaces; NULL: the default job */
	const char *properties; /* the default job's `properties:` value; NULL: omitted */
	int visibility_s, concurrency, max_dequeue;
};

/* clang-format 14 and 19 lay a braced macro out differently: */
/* clang-format off */
#define IX_WOPTS_DEFAULT {NULL, NULL, "[FirstName, LastName]", 10, 4, 20}
/* clang-format on */

/* The default job: employees by e-mail, from source (NULL: t->table) into
 * index (NULL: t->table2), copying properties (NULL: the line is omitted, so
 * all of them), under the job name name; written in out (cap bytes). */
void ix_default_job(char *out, size_t cap, struct wfx *x, const char *name, const char *source,
                    const char *index, const char *properties);

/* Writes NAME.yaml and starts a worker with it. env: NULL, or one "K=V" for
 * the worker's environment (ECW_CRASH_AT=..., ECW_TEST_PAUSE_AT=...,
 * ECW_TEST_STEP_JITTER_MS=...). */
void ix_start_worker(struct proc *p, struct wfx *x, const char *name, const struct ix_wopts *o,
                     const char *env);

/* Lines "message" with this outcome (NULL: any) summed over n workers. */
size_t ix_outcomes(struct proc *p, int n, const char *outcome);

/* Waits until n workers logged want outcomes (NULL: any) between them. */
void ix_wait_outcomes(struct proc *p, int n, size_t want, const char *outcome, int timeout_ms);

/* Stops the workers and checks their logs for secrets. */
void ix_finish(struct proc *p, int n);

/* ---- storage helpers ---------------------------------------------------------------------------- */

/* Puts {"job","pk","rk"} on queue (NULL: the fixture's), visible after
 * delay_s. */
void ix_enqueue_on(struct wfx *x, const char *queue, const char *job, const char *pk, const char *rk,
                   int delay_s);

/* The default job's message for (pk, rk) on the fixture's queue. */
void ix_enqueue(struct wfx *x, const char *pk, const char *rk);

/* Sets the String property name to v. */
void ix_set_str(struct ecw_entity *e, const char *name, const char *v);

/* An employee; first/last/email NULL: absent. */
struct ecw_entity *ix_employee(const char *pk, const char *rk, const char *email, const char *first,
                               const char *last);

/* Writes e (insert-or-replace) into table and frees it. */
void ix_upsert(struct wfx *x, const char *table, struct ecw_entity *e);

/* Writes the employee (pk, rk) with this Email, Ann Lee, into t->table. */
void ix_put_employee(struct wfx *x, const char *pk, const char *rk, const char *email);

/* Creates table. */
void ix_ensure_table(struct wfx *x, const char *table);

/* How many entities table holds. */
size_t ix_count_entities(struct wfx *x, const char *table);

/* The entity, NULL when absent. */
struct ecw_entity *ix_get(struct wfx *x, const char *table, const char *pk, const char *rk);

/* ---- the recomputation -------------------------------------------------------------------------- */

struct ix_spec {
	const char *job;            /* NULL: IX_JOB */
	const char *source, *index; /* NULL: t->table, t->table2 */
	const char *const *props;   /* copied properties, NULL-terminated; NULL: all */
};

/* {"FirstName", "LastName"}: the default job's properties. */
extern const char *const IX_FIRST_LAST[];

/* The String property name of e, or NULL. */
const char *ix_strp(const struct ecw_entity *e, const char *name);

/* The back-reference's keys, computed here from the documented rule:
 * ("~ref~" + job + "~" + h[0..1], h), h = hex SHA-256 of pk NUL rk. */
void ix_ref_keys(char *pk, size_t pkcap, char *rk, size_t rkcap, const char *job, const char *spk,
                 const char *srk);

/* The index table (minus source data when it is the source's table) must
 * hold exactly the entries and references a recomputation from the source
 * gives: same keys, same properties, same EDM types, nothing more. Returns
 * how many sources there were. */
size_t ix_check_recompute(struct wfx *x, const struct ix_spec *sp);

/* The default job's: IX_JOB, from t->table into t->table2, IX_FIRST_LAST. */
extern const struct ix_spec IX_DEFAULT_SPEC;

#endif
