/* SPDX-License-Identifier: MIT */
/* workerfx.h - the fixture of the integration tests that run the worker over a queue and tables of their
 * own: cmocka's state owns a struct wfx (wfx_new allocates it, alone or at the head of a test's larger
 * struct; wfx_teardown kills what the test left running, deletes its queues and tables and frees it), the
 * worker config those tests write (wfx_write_config), and one worker run to its end (wfx_run*). */
#ifndef ECW_WORKERFX_H
#define ECW_WORKERFX_H

#include <stddef.h>

#include "itest.h"
#include "proc.h"

struct wfx {
	struct itest *t;    /* client; queue, table, table2 and poison: names teardown deletes */
	const char *poison; /* t->poison */
	char config[640];   /* the config wfx_job_config wrote last */
};

/* What wfx_new creates; the worker creates the rest when it needs them. */
#define WFX_QUEUE 1u
#define WFX_TABLE 2u
#define WFX_TABLE2 4u

/* A fixture of size bytes (at least a struct wfx, which it starts with):
 * fresh names (itest_setup), the poison queue's among them, and the queue
 * and tables in make (WFX_*) created. Fails the test when it cannot. */
void *wfx_new(size_t size, unsigned make);

/* cmocka teardown: SIGKILLs the processes the test started (proc_cleanup),
 * deletes the fixture's queue, tables and poison queue, whoever created
 * them, and the extra ones itest knows of, and frees *state. */
int wfx_teardown(void **state);

/* ---- the worker's config ------------------------------------------------------------------------ */

/* A worker's config as a test chooses it; WFX_WORKER gives the values most of
 * these tests share. */
struct wfx_worker {
	const char *storage_extra; /* more lines under storage: (indented two spaces), or NULL */
	const char *queue, *poison;
	int batch_size; /* 0: none written (the worker's default) */
	int concurrency, visibility_s;
	int max_dequeue;       /* 0: none written */
	const char *retry_max; /* retry_backoff: {base: 1s, max: retry_max}; NULL: none written */
	const char *poll_min, *poll_max;
	const char *shutdown_grace;
	const char *worker_extra;   /* more lines under worker: (indented two spaces), or NULL */
	const char *log_level;      /* the log is JSON */
	int metrics_port;           /* > 0: metrics on 127.0.0.1:metrics_port ... */
	const char *metrics_listen; /* ... else on this address (NULL or "": no endpoint) */
	const char *queue_refresh;  /* metrics.queue_refresh; NULL: none written */
	/* What follows "jobs:": the job lines (indented two spaces), and
	 * whatever top-level sections a test adds after them (schedules:). */
	const char *jobs;
};

/* clang-format 14 and 19 lay a braced macro out differently: */
/* clang-format off */
#define WFX_WORKER(queue_, poison_) \
	{.queue = (queue_), .poison = (poison_), .batch_size = 16, .concurrency = 4, .visibility_s = 30, \
	 .max_dequeue = 5, .retry_max = "2s", .poll_min = "50ms", .poll_max = "200ms", .shutdown_grace = "5s", \
	 .log_level = "debug"}
/* clang-format on */

/* Writes w as NAME.yaml (proc_write_file) and returns its path in path. */
void wfx_write_config(char *path, size_t cap, const char *name, const struct wfx_worker *w);

/* ---- one worker, judged by storage and its metrics ------------------------------------------------ */

/* The config of those tests: WFX_WORKER on the fixture's queues with
 * visibility_s, concurrency, max_dequeue_count 10 and these jobs, metrics on
 * a free port (returned); the path in x->config. */
int wfx_job_config(struct wfx *x, const char *name, int visibility_s, int concurrency, const char *jobs);

/* Starts a worker on x->config, waits up to timeout_ms until want messages
 * succeeded (and no other message line), reads the table write requests it
 * made from its metrics (on port), and stops it; keep (may be NULL) receives
 * the stopped process, to read its log. */
long long wfx_run(struct wfx *x, const char *name, int port, size_t want, int timeout_ms, struct proc *keep);
/* The same with more environment for the worker (NULL-terminated "K=V"). */
long long wfx_run_env(struct wfx *x, const char *name, int port, size_t want, int timeout_ms,
                      struct proc *keep, const char *const *env);

/* A worker started on x->config with ECW_CRASH_AT=point must die there
 * (exit 86, the test build's crash status) within 20 s. */
void wfx_run_until_crash(struct wfx *x, const char *name, const char *point);

/* The fixture's queue and poison queue are empty. */
void wfx_assert_queues_empty(struct wfx *x);

#endif
