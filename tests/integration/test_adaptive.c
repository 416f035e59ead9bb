/* SPDX-License-Identifier: MIT */
/* test_adaptive.c - the adaptive concurrency limit (worker/runtime/limiter.c) against
 * a table service that throttles: tests/tools/faultproxy in front of
 * Azurite's table port answers 503 ServerBusy beyond RATE requests a second
 * (a token bucket, as a partition's scalability target) and adds LATENCY_MS
 * each way, so that a worker at concurrency 16 asks about ten times what it
 * may. The same backlog of archive moves runs twice: with a fixed
 * concurrency (concurrency_min = concurrency) and adaptive (concurrency_min
 * 1). Adaptive must poison nothing and retry less than half as often; the
 * figures of both runs are printed for the notes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_storage.h"
#include "itest.h"
#include "movefx.h"
#include "proc.h"
#include "workerfx.h"

#define BACKLOG 80
#define RATE "40"
#define LATENCY_MS "10"
#define CONCURRENCY 16

struct figures {
	double retries, requests, throttled_seen;
	size_t succeeded, poisoned;
	long long ms;
	size_t cuts;      /* times the limit was lowered (ecw_concurrency_limit_cuts_total) */
	size_t cut_lines; /* log lines saying so: one each 5 s at most */
};

static double metric(int port, const char *name, const char *label)
{
	char *page = NULL;
	int found = 0;
	double v;

	ITEST_CHECK(proc_http_get(&page, port, "/metrics") == 200, "no /metrics page");
	v = label ? proc_metric(page, name, &found, label, NULL) : proc_metric(page, name, &found, NULL);
	free(page);
	return v;
}

/* One run of the backlog, partition pk, with concurrency_min min_c. */
static void run(struct mv *m, const char *pk, int min_c, struct figures *f)
{
	struct wfx_worker w = WFX_WORKER(m->fx.t->queue, m->fx.poison);
	struct proc worker, proxy;
	char map[64], env_cs[1024], path[640], jobs[512], extra[64], rk[32], *cs;
	int tport = proc_free_port(), mport = proc_free_port();
	const char *azt = getenv("ECW_TEST_TABLE_PORT");

	ITEST_CHECK(azt, "needs ECW_TEST_TABLE_PORT (the Azurite table port)");
	/* A partition each: no two moves form a group (one query and two
	 * transactions for many), so each makes its own three table requests. */
	for (int i = 0; i < BACKLOG; i++) {
		snprintf(rk, sizeof(rk), "%s-%03d", pk, i);
		struct ecw_entity *e = mv_employee(rk, rk, 1);
		mv_write_entity(m, m->emp, e);
		ecw_entity_free(e);
	}
	snprintf(map, sizeof(map), "%d:127.0.0.1:%s", tport, azt);
	const char *pargs[] = {"--map", map, "--rate-limit", RATE, "--latency-ms", LATENCY_MS, NULL};
	proc_start_program(&proxy, "adaptive-proxy", proc_tool_bin("faultproxy"), pargs, NULL);
	cs = itest_connstr_with_ports(NULL, 0, tport);
	snprintf(env_cs, sizeof(env_cs), "ECW_TEST_CONNECTION_STRING=%s", cs);
	free(cs);
	snprintf(extra, sizeof(extra), "  concurrency_min: %d\n", min_c);
	w.batch_size = 16;
	w.concurrency = CONCURRENCY;
	w.max_dequeue = 3;
	w.retry_max = "2s";
	w.metrics_port = mport;
	w.log_level = "info";
	w.worker_extra = extra;
	w.jobs = mv_std_jobs(jobs, sizeof(jobs), m);
	wfx_write_config(path, sizeof(path), pk, &w);
	for (int i = 0; i < BACKLOG; i++) {
		snprintf(rk, sizeof(rk), "%s-%03d", pk, i);
		mv_put_job(m, "archive-employee", rk, rk, NULL, false, NULL);
	}
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {env_cs, NULL};
	int64_t start = itest_now_ms();
	proc_start(&worker, pk, args, env);
	for (;;) {
		f->succeeded = proc_count(&worker, "message", "outcome", "succeeded", NULL);
		f->poisoned = proc_count(&worker, "message", "outcome", "poisoned", NULL);
		if (f->succeeded + f->poisoned >= BACKLOG)
			break;
		ITEST_CHECK(itest_now_ms() - start < 150000 && proc_alive(&worker),
		            "%s: %zu succeeded and %zu poisoned of %d after %lld ms; log:\n%s", pk,
		            f->succeeded, f->poisoned, BACKLOG, (long long)(itest_now_ms() - start),
		            proc_tail(worker.log_path, 20));
		itest_sleep_ms(200);
	}
	f->ms = itest_now_ms() - start;
	f->retries = metric(mport, "ecw_storage_retries_total", NULL);
	f->requests = metric(mport, "ecw_storage_requests_total", NULL);
	f->throttled_seen = metric(mport, "ecw_storage_requests_total", "status=\"503\"");
	f->cuts = (size_t)metric(mport, "ecw_concurrency_limit_cuts_total", NULL);
	f->cut_lines = proc_count(&worker, "concurrency_limit", "msg",
	                          "storage is throttling: fewer jobs run at once", NULL);
	printf("# %s (concurrency %d, concurrency_min %d): %d messages in %lld ms, %zu succeeded, %zu "
	       "poisoned; %.0f storage requests, %.0f answered 503, %.0f retries; %zu cuts of the limit (%zu "
	       "log lines)\n",
	       pk, CONCURRENCY, min_c, BACKLOG, f->ms, f->succeeded, f->poisoned, f->requests,
	       f->throttled_seen, f->retries, f->cuts, f->cut_lines);
	mv_finish(&worker);
	proc_stop(&proxy, 10000);
}

static void test_adaptive__throttled_storage_fewer_retries_no_poison(void **state)
{
	struct mv *m = *state;
	struct figures fixed = {0}, adaptive = {0};

	run(m, "fixed", CONCURRENCY, &fixed);
	ITEST_CHECK(fixed.cuts == 0 && fixed.cut_lines == 0, "a fixed concurrency was cut %zu times",
	            fixed.cuts);
	ITEST_CHECK(fixed.throttled_seen > 0, "the proxy throttled nothing: the test proves nothing");
	run(m, "adaptive", 1, &adaptive);
	ITEST_CHECK(adaptive.cuts > 0, "throttled, the adaptive limit was never cut");
	ITEST_CHECK(adaptive.cut_lines >= 1 && adaptive.cut_lines <= 1 + (size_t)(adaptive.ms / 5000),
	            "%zu log lines for %zu cuts in %lld ms: one each 5 s at most", adaptive.cut_lines,
	            adaptive.cuts, adaptive.ms);
	ITEST_CHECK(adaptive.poisoned == 0, "adaptive: %zu poisoned", adaptive.poisoned);
	ITEST_CHECK(adaptive.retries * 2 < fixed.retries, "adaptive retried %.0f times, fixed %.0f",
	            adaptive.retries, fixed.retries);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_adaptive__throttled_storage_fewer_retries_no_poison,
	                                    mv_setup, mv_teardown),
	};
	return cmocka_run_group_tests_name("adaptive", tests, NULL, NULL);
}
