/* SPDX-License-Identifier: MIT */
/* runtimefx.h - the fixture of the tests that run the worker as a process on a queue of their own
 * (test_runtime.c, test_settle.c): cmocka's state owns a struct rtfx (a struct wfx, and the client the
 * helpers use, which a test may point at a private Azurite), the worker's config as those tests vary it
 * (struct rtfx_wopts), a worker started and stopped on it, and the storage helpers that judge what it
 * left: messages put, counted, peeked and received, and a table's rows for one PartitionKey. */
#ifndef ECW_RUNTIMEFX_H
#define ECW_RUNTIMEFX_H

#include <stddef.h>

#include "itest.h"
#include "proc.h"
#include "workerfx.h"

/* ---- fixture ---------------------------------------------------------------------- */

struct rtfx {
	struct wfx fx;             /* first, for wfx_teardown: client, queue name (the job queue), tables */
	struct ecw_client *client; /* what the helpers use: fx.t->client, or one
	                            * for a test's private Azurite */
	const char *connstr;       /* NULL: ECW_TEST_CONNECTION_STRING */
	char worker_env[640];      /* "" or ECW_TEST_CONNECTION_STRING=... for workers */
};

/* cmocka setup: a fixture with fresh names and nothing created (the worker
 * creates the tables and queues it needs). */
int rtfx_setup(void **state);

/* cmocka teardown: wfx_teardown. */
int rtfx_teardown(void **state);

/* ---- the worker's configuration --------------------------------------------------- */

struct rtfx_wopts {
	int concurrency, batch_size, visibility_s, max_dequeue;
	const char *shutdown_grace;
	const char *jobs;         /* lines under jobs:, indented two spaces */
	const char *worker_extra; /* more lines under worker:, indented two spaces */
};

/* clang-format 14 and 19 lay a braced macro out differently: */
/* clang-format off */
#define RTFX_WOPTS_DEFAULT {4, 16, 30, 5, "5s", NULL, NULL}
/* clang-format on */

/* Writes NAME.yaml for this test and returns the metrics port it listens on. */
int rtfx_write_config(char *path, size_t cap, struct rtfx *r, const char *name, const struct rtfx_wopts *o);

/* Writes the config and starts the worker; returns its metrics port. */
int rtfx_start_worker(struct proc *p, struct rtfx *r, const char *name, const struct rtfx_wopts *o);

/* Stops the worker cleanly (status 0) and checks every log for secrets. */
void rtfx_finish(struct proc *p);

/* ---- storage helpers --------------------------------------------------------------- */

/* Puts text (len bytes) on the fixture's queue; its id in id_out (64 bytes)
 * unless NULL. */
void rtfx_put_len(struct rtfx *r, const char *text, size_t len, char *id_out);
void rtfx_put(struct rtfx *r, const char *text, char *id_out);

/* The approximate message count of queue q. */
long long rtfx_queue_count(struct rtfx *r, const char *q);

/* How many messages of q are visible (a peek, up to 32). */
size_t rtfx_peek_count(struct rtfx *r, const char *q);

/* Receives until want messages arrived (or timeout_ms passed); each is held
 * for visibility_s. The caller frees them. */
struct ecw_queue_msg *rtfx_receive_n(size_t *got, struct rtfx *r, const char *q, size_t want,
                                     int visibility_s, int timeout_ms);

/* The entities of table whose PartitionKey is pk (up to max; returns how
 * many there are). */
size_t rtfx_rows_with_pk(struct rtfx *r, const char *table, const char *pk, struct ecw_entity **out,
                         size_t max);

#endif
