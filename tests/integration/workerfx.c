/* SPDX-License-Identifier: MIT */
/* workerfx.c - see workerfx.h. */
#include "workerfx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_buf.h"

void *wfx_new(size_t size, unsigned make)
{
	struct wfx *x;
	void *t = NULL;

	assert_true(size >= sizeof(*x));
	x = calloc(1, size);
	assert_non_null(x);
	itest_setup(&t);
	x->t = t;
	x->poison = itest_poison(x->t);
	if (make & WFX_QUEUE)
		itest_queue(x->t);
	if (make & WFX_TABLE)
		itest_table(x->t);
	if (make & WFX_TABLE2)
		itest_table2(x->t);
	return x;
}

int wfx_teardown(void **state)
{
	struct wfx *x = *state;
	void *t;

	if (!x)
		return 0;
	proc_cleanup(); /* a failed assertion may have left workers running */
	/* The worker creates what the test did not (create_missing); a name
	 * nobody created costs one DELETE answered 404. */
	x->t->queue_used = x->t->table_used = x->t->table2_used = true;
	t = x->t;
	itest_teardown(&t);
	free(x);
	*state = NULL;
	return 0;
}

/* ---- the worker's config ------------------------------------------------------------------------ */

/* Appends to the config; the cap only catches a runaway test. */
#define ADD(b, ...) assert_int_equal(ecw_buf_printf((b), __VA_ARGS__), 0)

void wfx_write_config(char *path, size_t cap, const char *name, const struct wfx_worker *w)
{
	struct ecw_buf b;
	char file[128];
	int k;

	ecw_buf_init(&b, 1024 * 1024);
	ADD(&b, "storage:\n  connection_string: ${ECW_TEST_CONNECTION_STRING}\n%s",
	    w->storage_extra ? w->storage_extra : "");
	ADD(&b, "worker:\n");
	if (w->queue) /* NULL: the test gives worker.queues in worker_extra */
		ADD(&b, "  queue: %s\n  poison_queue: %s\n", w->queue, w->poison);
	if (w->batch_size)
		ADD(&b, "  batch_size: %d\n", w->batch_size);
	ADD(&b, "  concurrency: %d\n  visibility_timeout: %ds\n", w->concurrency, w->visibility_s);
	if (w->max_dequeue)
		ADD(&b, "  max_dequeue_count: %d\n", w->max_dequeue);
	if (w->retry_max)
		ADD(&b, "  retry_backoff: {base: 1s, max: %s}\n", w->retry_max);
	ADD(&b, "  poll_interval: {min: %s, max: %s}\n  shutdown_grace: %s\n%s", w->poll_min, w->poll_max,
	    w->shutdown_grace, w->worker_extra ? w->worker_extra : "");
	ADD(&b, "log: {level: %s, format: json}\n", w->log_level);
	if (w->metrics_port > 0)
		ADD(&b, "metrics: {listen: \"127.0.0.1:%d\"", w->metrics_port);
	else
		ADD(&b, "metrics: {listen: \"%s\"", w->metrics_listen ? w->metrics_listen : "");
	if (w->queue_refresh)
		ADD(&b, ", queue_refresh: %s", w->queue_refresh);
	ADD(&b, "}\n");
	ADD(&b, "jobs:\n%s", w->jobs);
	k = snprintf(file, sizeof(file), "%s.yaml", name);
	assert_true(k > 0 && (size_t)k < sizeof(file));
	proc_write_file(path, cap, file, ecw_buf_cstr(&b));
	ecw_buf_dispose(&b);
}

/* ---- one worker, judged by storage and its metrics ------------------------------------------------ */

int wfx_job_config(struct wfx *x, const char *name, int visibility_s, int concurrency, const char *jobs)
{
	struct wfx_worker w = WFX_WORKER(x->t->queue, x->poison);

	w.concurrency = concurrency;
	w.visibility_s = visibility_s;
	w.max_dequeue = 10;
	w.metrics_port = proc_free_port();
	w.jobs = jobs;
	wfx_write_config(x->config, sizeof(x->config), name, &w);
	return w.metrics_port;
}

long long wfx_run(struct wfx *x, const char *name, int port, size_t want, int timeout_ms, struct proc *keep)
{
	return wfx_run_env(x, name, port, want, timeout_ms, keep, NULL);
}

long long wfx_run_env(struct wfx *x, const char *name, int port, size_t want, int timeout_ms,
                      struct proc *keep, const char *const *env)
{
	struct proc p;
	char *page = NULL;
	const char *args[] = {"run", "-c", x->config, NULL};
	long long writes;

	proc_start(&p, name, args, env);
	PROC_EXPECT_LOG(&p, want, timeout_ms, "message", "outcome", "succeeded");
	ITEST_CHECK(proc_count(&p, "message", NULL) == want, "%zu message lines, expected %zu:\n%s",
	            proc_count(&p, "message", NULL), want, proc_tail(p.log_path, 20));
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	writes = proc_table_writes(page);
	free(page);
	proc_stop(&p, 10000);
	if (keep)
		*keep = p;
	return writes;
}

void wfx_run_until_crash(struct wfx *x, const char *name, const char *point)
{
	struct proc p;
	char env_crash[128];
	const char *args[] = {"run", "-c", x->config, NULL};
	const char *env[] = {env_crash, NULL};
	int k = snprintf(env_crash, sizeof(env_crash), "ECW_CRASH_AT=%s", point);

	assert_true(k > 0 && (size_t)k < sizeof(env_crash));
	proc_start(&p, name, args, env);
	ITEST_CHECK(proc_wait(&p, 20000), "%s: still running 20 s with ECW_CRASH_AT=%s; log:\n%s", name,
	            point, proc_tail(p.log_path, 20));
	ITEST_CHECK(proc_exit_code(&p) == 86, "%s: exit %d, expected 86 (crash at %s); log:\n%s", name,
	            proc_exit_code(&p), point, proc_tail(p.log_path, 20));
}

void wfx_assert_queues_empty(struct wfx *x)
{
	long long n = -1;

	ECW_ASSERT_OK(ecw_queue_count(&n, x->t->client, x->t->queue));
	assert_int_equal(n, 0);
	ECW_ASSERT_OK(ecw_queue_count(&n, x->t->client, x->poison));
	assert_int_equal(n, 0);
}
