/* SPDX-License-Identifier: MIT */
/* movefx.h - the fixture of the tests of the move job run as a process (test_job_move.c,
 * test_job_move_crash.c, test_job_move_groups.c): cmocka's state owns a struct mv (a struct wfx with the
 * job queue, Employees and EmployeesArchive created, and the name of a third table for follow-up jobs),
 * the two jobs of the issue on those tables (mv_std_jobs), the worker started with the options those tests
 * vary (struct mv_wopts: mv_start_worker, mv_start_crashing_worker, mv_finish) and judged by its message
 * lines (mv_msg_line, mv_expect_success), archive messages put (mv_put_job) and queues counted
 * (mv_queue_count), employees written and read back (mv_employee, mv_write_entity, mv_get_or_null,
 * mv_table_rows), and where an entity is found (mv_assert_same_entity, mv_assert_only_in; enum mv_where
 * for where a crash leaves it). */
#ifndef ECW_MOVEFX_H
#define ECW_MOVEFX_H

#include <stdbool.h>
#include <stddef.h>

#include "itest.h"
#include "proc.h"
#include "workerfx.h"

struct json_object;

/* ---- fixture ---------------------------------------------------------------------- */

struct mv {
	struct wfx fx;    /* first, for wfx_teardown; fx.t->table is Employees, fx.t->table2 the archive */
	const char *emp;  /* Employees (the source of archive-employee) */
	const char *arch; /* EmployeesArchive */
	const char *note; /* a third table, for follow-up jobs */
	struct ecw_client *c;
};

/* cmocka setup: fresh names, the job queue and the two tables created (the
 * third table is only named: the follow-up jobs create it). */
int mv_setup(void **state);

/* cmocka teardown: wfx_teardown. */
int mv_teardown(void **state);

/* ---- the worker ------------------------------------------------------------------ */

/* The two jobs of the issue, on this test's tables (written in buf, cap bytes;
 * returns buf). */
const char *mv_std_jobs(char *buf, size_t cap, const struct mv *m);

struct mv_wopts {
	int visibility_s, concurrency, batch_size;
	int metrics_port;          /* 0: metrics off */
	const char *crash_at;      /* ECW_CRASH_AT, or NULL */
	const char *pause_at;      /* ECW_TEST_PAUSE_AT ("point:ms"), or NULL */
	const char *env;           /* one more environment entry ("NAME=value"), or NULL */
	const char *storage_extra; /* lines under storage: (indented two spaces), or NULL */
};

/* clang-format 14 and 19 lay a braced macro out differently: */
/* clang-format off */
#define MV_WOPTS_DEFAULT {30, 4, 16, 0, NULL, NULL, NULL, NULL}
/* clang-format on */

/* Writes NAME.yaml and starts the worker with it. */
void mv_start_worker(struct proc *p, const struct mv *m, const char *name, const char *jobs,
                     const struct mv_wopts *o);

/* Starts a worker that must die at o->crash_at (exit 86, the test build's
 * crash status) and waits for it. */
void mv_start_crashing_worker(struct proc *p, const struct mv *m, const char *name, const char *jobs,
                              const struct mv_wopts *o);

/* The first "message" line for a message id with this outcome, read into log
 * (a copy of the field values is not needed: the caller reads them before
 * disposing of log); fails the test when there is none. */
struct json_object *mv_msg_line(struct proc_log *log, const struct proc *p, const char *id,
                                const char *outcome);

/* The message for id succeeded once, with this detail ("" for none) and no
 * error. */
void mv_expect_success(const struct proc *p, const char *id, const char *detail);

/* Stops the worker cleanly and checks every log for secrets. */
void mv_finish(struct proc *p);

/* ---- messages ---------------------------------------------------------------------- */

/* Puts {"job","pk","rk"[,"id"]} (base64 of it when asked) and returns the
 * queue's message id in id_out (64 bytes) unless NULL. */
void mv_put_job(struct mv *m, const char *job, const char *pk, const char *rk, const char *trace, bool base64,
                char *id_out);

/* The approximate message count of queue q. */
long long mv_queue_count(struct mv *m, const char *q);

/* ---- entities ---------------------------------------------------------------------- */

/* An employee; version changes a few values, so versions differ. */
struct ecw_entity *mv_employee(const char *pk, const char *rk, int version);

/* Writes e into table (insert or replace). */
void mv_write_entity(struct mv *m, const char *table, const struct ecw_entity *e);

/* The entity, or NULL when it does not exist; any other error fails. */
struct ecw_entity *mv_get_or_null(struct mv *m, const char *table, const char *pk, const char *rk);

/* How many entities table holds. */
size_t mv_table_rows(struct mv *m, const char *table);

/* got has want's keys and exactly want's properties, type by type and value
 * by value (bitwise for doubles); each difference is named. */
void mv_assert_same_entity(const struct ecw_entity *want, const struct ecw_entity *got, const char *where);

/* want is in `in` (identical) and absent from `out`: moved, never in both or
 * neither. */
void mv_assert_only_in(struct mv *m, const char *in, const char *out, const struct ecw_entity *want,
                       const char *where);

/* Where an entity is right after a crash: still only in the source, in both
 * tables, or already only in the target. */
enum mv_where { MV_IN_SOURCE, MV_IN_BOTH, MV_IN_TARGET };

#endif
