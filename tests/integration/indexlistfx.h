/* SPDX-License-Identifier: MIT */
/* indexlistfx.h - the fixture of the tests of the index-list job run as a process (test_job_index_list.c,
 * test_job_index_list_races.c, test_job_index_list_poison.c): cmocka's state owns a struct wfx (the job
 * queue t->queue, Employees t->table and the list table t->table2, created), the workers on the job
 * IL_JOB with the options those tests vary (struct il_wopts: il_write_config, il_start_worker, and
 * il_run_worker for one worker run until the queue drains; il_queue_count, il_wait_drained), the
 * application's side (il_emp_set, il_msg_put, il_change), the list table read back (il_list_keys,
 * il_get_ref, il_ref_rk, il_get_or_null, il_str_prop, il_expect_list), and the recomputation that judges
 * it: every list exactly the sorted keys of the employees with that LastName, no stale list, one
 * reference per employee naming its list (il_check_index). */
#ifndef ECW_INDEXLISTFX_H
#define ECW_INDEXLISTFX_H

#include <stdbool.h>
#include <stddef.h>

#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#define IL_JOB "emp-idx"
#define IL_REF_PREFIX "~ref~" IL_JOB "~"
#define IL_LIST_PK "lastname"

/* ---- fixture ---------------------------------------------------------------------- */

/* t->queue is the job queue, t->table Employees, t->table2 the lists. The
 * application's tables exist before it writes (the worker would create them
 * too). The teardown deletes them, the poison queue and the queues given to
 * itest_keep_queue. */
int il_setup(void **state);

/* cmocka teardown: wfx_teardown. */
int il_teardown(void **state);

/* ---- workers ------------------------------------------------------------------------ */

struct il_wopts {
	const char *queue; /* NULL: the fixture's */
	int concurrency, visibility_s, max_dequeue;
	int jitter_ms;        /* ECW_TEST_STEP_JITTER_MS: a random pause after each step */
	const char *pause_at; /* ECW_TEST_PAUSE_AT: "step:ms" */
	const char *source;   /* NULL: the fixture's table */
	const char *poison;   /* NULL: the fixture's poison queue */
	bool no_create;       /* create_missing: false */
	int batch_size;       /* 0: concurrency */
};

/* clang-format 14 and 19 lay a braced macro out differently: */
/* clang-format off */
#define IL_WOPTS_DEFAULT {.concurrency = 4, .visibility_s = 30, .max_dequeue = 5}
/* clang-format on */

/* Writes NAME.yaml; returns the metrics port. */
int il_write_config(char *path, size_t cap, struct wfx *x, const char *name, const struct il_wopts *o);

/* Starts a worker; crash_at (may be NULL) sets ECW_CRASH_AT. Returns the
 * metrics port. */
int il_start_worker(struct proc *p, struct wfx *x, const char *name, const struct il_wopts *o,
                    const char *crash_at);

/* The approximate message count of queue q. */
long long il_queue_count(struct wfx *x, const char *q);

/* Waits until the queue is empty (every message deleted: succeeded, or
 * poisoned, which the callers check) and stays empty for a moment; on a
 * timeout the last of the np workers in ps shows its log. */
void il_wait_drained(struct wfx *x, const char *q, struct proc *ps, size_t np, int timeout_ms);

/* Runs one worker over the fixture's queue until `succeeded` messages
 * succeeded and the queue is empty; nothing may be retried or poisoned. */
void il_run_worker(struct wfx *x, const char *name, size_t succeeded, int concurrency);

/* ---- the application's side ------------------------------------------------------------ */

/* Writes the employee (insert-or-replace) with last (NULL: deletes it). */
void il_emp_set(struct wfx *x, const char *pk, const char *rk, const char *last);

/* The message for (pk, rk) on queue q (NULL: the fixture's). */
void il_msg_put(struct wfx *x, const char *q, const char *pk, const char *rk);

/* The application's update: change the entity, then enqueue. */
void il_change(struct wfx *x, const char *pk, const char *rk, const char *last);

/* ---- reading the index ------------------------------------------------------------------- */

/* The ref's RowKey: the hex SHA-256 of pk NUL rk (free() it). */
char *il_ref_rk(const char *pk, const char *rk);

/* The entity or NULL. */
struct ecw_entity *il_get_or_null(struct wfx *x, const char *table, const char *pk, const char *rk);

/* The String property name of e (may be NULL), or NULL. */
const char *il_str_prop(const struct ecw_entity *e, const char *name);

/* The Keys of list LastName=last as stored (heap copy), or NULL when there is
 * no such list; *etag (may be NULL) gets its ETag. */
char *il_list_keys(struct wfx *x, const char *last, char **etag);

/* The ref of (pk, rk), or NULL; its keys: ("~ref~<job>~" + h[0..1], h). */
struct ecw_entity *il_get_ref(struct wfx *x, const char *pk, const char *rk);

/* List LastName=last holds exactly want_keys (NULL: there is no such list). */
void il_expect_list(struct wfx *x, const char *last, const char *want_keys);

/* ---- the recomputation ------------------------------------------------------------------------ */

/* The whole list table against a recomputation from the source: the lists,
 * read as jobs/README.md's reader reads them (the head's Keys, Keys2, ..., then
 * its Pages' in order; every page in some head's Pages) (exact members,
 * sorted, Count, no empty or stale list) and the refs (one per
 * employee, at the hashed RowKey, naming its list, no intents left). Returns
 * how many lists there are. */
size_t il_check_index(struct wfx *x);

#endif
