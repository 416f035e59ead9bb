/* SPDX-License-Identifier: MIT */
/* test_outage.c - a whole-service outage does not poison the backlog (the
 * storage circuit, worker/runtime/circuit.c): the table service goes away while the
 * queue stays up, for longer than three times max_dequeue_count ×
 * retry_backoff.max, with a backlog of archive moves waiting; then it comes
 * back. The worker opens the circuit (one log line, /readyz not ready, the
 * gauge at 1), receives nothing while it is open, closes it when a probe is
 * answered, and then moves every employee: nothing poisoned, nothing left
 * in both tables.
 *
 * The table service is a port with nothing behind it (connection refused),
 * then faultproxy on that port passing to Azurite; the queue endpoint is
 * Azurite itself. Without the circuit the same run poisons most of the
 * backlog (max_dequeue_count 3 is spent in about 6 s of retries). */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_storage.h"
#include "itest.h"
#include "movefx.h"
#include "proc.h"
#include "workerfx.h"

#define BACKLOG 40
#define OUTAGE_MS 20000 /* > 3 × (max_dequeue_count 3 × retry_backoff.max 2 s) = 18 s */

static void start_table_proxy(struct proc *proxy, int tport)
{
	char map[64];
	const char *azt = getenv("ECW_TEST_TABLE_PORT");

	ITEST_CHECK(azt, "needs ECW_TEST_TABLE_PORT (the Azurite table port)");
	snprintf(map, sizeof(map), "%d:127.0.0.1:%s", tport, azt);
	const char *args[] = {"--map", map, NULL};
	proc_start_program(proxy, "outage-table-proxy", proc_tool_bin("faultproxy"), args, NULL);
}

static int wait_status(int port, const char *path, int want, int timeout_ms, struct proc *p)
{
	int status = 0;

	for (int64_t end = itest_now_ms() + timeout_ms; (status = proc_http_get(NULL, port, path)) != want;) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(p),
		            "%s answers %d, not %d, after %d ms; log:\n%s", path, status, want, timeout_ms,
		            proc_tail(p->log_path, 20));
		itest_sleep_ms(100);
	}
	return status;
}

static double gauge(int port, const char *name)
{
	char *page = NULL;
	int found = 0;
	double v;

	ITEST_CHECK(proc_http_get(&page, port, "/metrics") == 200, "no /metrics page");
	v = proc_metric(page, name, &found, NULL);
	free(page);
	ITEST_CHECK(found, "/metrics has no %s", name);
	return v;
}

/* One run: employees in the source table, a worker whose table endpoint is
 * a faultproxy on tport (the queue endpoint is Azurite's), started while
 * the proxy is up and ready. */
struct run {
	struct proc worker, proxy;
	int tport, mport;
	char rk[BACKLOG][32];
	char id[BACKLOG][64]; /* put_veterans: the queue's message ids */
	struct ecw_entity *emp[BACKLOG];
	char env_cs[1024], path[640], jobs[512];
};

static void put_veterans(struct run *r, struct mv *m);

/* veterans: the backlog is put before the worker starts and delivered
 * twice by the test (put_veterans). */
static void start_run(struct run *r, struct mv *m, const char *circuit, bool veterans)
{
	struct wfx_worker w = WFX_WORKER(m->fx.t->queue, m->fx.poison);
	char *cs;

	r->tport = proc_free_port();
	r->mport = proc_free_port();
	cs = itest_connstr_with_ports(NULL, 0, r->tport);
	snprintf(r->env_cs, sizeof(r->env_cs), "ECW_TEST_CONNECTION_STRING=%s", cs);
	free(cs);
	for (int i = 0; i < BACKLOG; i++) {
		snprintf(r->rk[i], sizeof(r->rk[i]), "e%03d", i);
		r->emp[i] = mv_employee("sales", r->rk[i], 1);
		mv_write_entity(m, m->emp, r->emp[i]);
	}
	/* One message at a time per thread: a delivery fails within the
	 * client's own retries (about 1.5 s), so without the circuit the three
	 * deliveries are spent well inside the outage (27 of 40 poisoned). */
	w.batch_size = 1;
	w.concurrency = 4;
	w.max_dequeue = 3;
	w.retry_max = "2s"; /* retry_backoff {base: 1s, max: 2s} */
	w.metrics_port = r->mport;
	w.log_level = "info";
	w.worker_extra = circuit;
	w.jobs = mv_std_jobs(r->jobs, sizeof(r->jobs), m);
	wfx_write_config(r->path, sizeof(r->path), "outage", &w);
	const char *args[] = {"run", "-c", r->path, NULL};
	const char *env[] = {r->env_cs, NULL};

	if (veterans)
		put_veterans(r, m);
	start_table_proxy(&r->proxy, r->tport);
	proc_start(&r->worker, "outage", args, env);
	wait_status(r->mport, "/readyz", 200, 30000, &r->worker);
}

/* The table service is back: every employee is moved once (each message's
 * line written), nothing is poisoned, the circuit closed. The worker still
 * runs: its log is read before stop_run. */
static void finish_run(struct run *r, struct mv *m)
{
	start_table_proxy(&r->proxy, r->tport);
	PROC_EXPECT_LOG(&r->worker, 1, 30000, "storage_circuit_closed");
	for (int64_t end = itest_now_ms() + 60000; mv_table_rows(m, m->arch) < BACKLOG;) {
		ITEST_CHECK(itest_now_ms() < end,
		            "%zu of %d moved 60 s after the table service came back; log:\n%s",
		            mv_table_rows(m, m->arch), BACKLOG, proc_tail(r->worker.log_path, 30));
		itest_sleep_ms(200);
	}
	for (int i = 0; i < BACKLOG; i++) {
		mv_assert_only_in(m, m->arch, m->emp, r->emp[i], "after the outage");
		ecw_entity_free(r->emp[i]);
	}
	wait_status(r->mport, "/readyz", 200, 10000, &r->worker);
	ITEST_CHECK(gauge(r->mport, "ecw_storage_circuit_open") == 0,
	            "the circuit gauge is not 0 once closed");
	PROC_EXPECT_LOG(&r->worker, BACKLOG, 10000, "message", "outcome", "succeeded");
	assert_int_equal(proc_count(&r->worker, "message", "outcome", "poisoned", NULL), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
}

/* Stops the worker (a clean exit, its logs checked for secrets, and then
 * removed) and the proxy. */
static void stop_run(struct run *r)
{
	mv_finish(&r->worker);
	proc_stop(&r->proxy, 10000);
}

static void test_outage__table_service_down_poisons_nothing(void **state)
{
	struct mv *m = *state;
	struct run r;

	start_run(&r, m, "  circuit: {failures: 3, probe_min: 200ms, probe_max: 1s}\n", false);
	/* The table service goes away; the backlog arrives. */
	proc_stop(&r.proxy, 10000);
	for (int i = 0; i < BACKLOG; i++)
		mv_put_job(m, "archive-employee", "sales", r.rk[i], NULL, false, NULL);
	int64_t down_at = itest_now_ms();
	PROC_EXPECT_LOG(&r.worker, 1, 30000, "storage_circuit_open");
	wait_status(r.mport, "/readyz", 503, 5000, &r.worker);
	ITEST_CHECK(gauge(r.mport, "ecw_storage_circuit_open") == 1, "the circuit gauge is not 1 while open");
	while (itest_now_ms() - down_at < OUTAGE_MS) {
		ITEST_CHECK(proc_alive(&r.worker), "the worker exited during the outage; log:\n%s",
		            proc_tail(r.worker.log_path, 20));
		itest_sleep_ms(500);
	}
	ITEST_CHECK(proc_count(&r.worker, "message", "outcome", "poisoned", NULL) == 0,
	            "messages were poisoned during the outage; log:\n%s", proc_tail(r.worker.log_path, 30));
	finish_run(&r, m);
	assert_int_equal(proc_count(&r.worker, "storage_circuit_open", NULL), 1);
	stop_run(&r);
}

/* The backlog with two deliveries behind each message (dequeue count 2),
 * hidden for VETERAN_HIDE_S more: the worker meets each on its third. */
#define VETERAN_HIDE_S 8
static void put_veterans(struct run *r, struct mv *m)
{
	for (int i = 0; i < BACKLOG; i++)
		mv_put_job(m, "archive-employee", "sales", r->rk[i], NULL, false, r->id[i]);
	/* Each round receives every message once: hidden 3 s after the first
	 * (the round takes two requests), then VETERAN_HIDE_S after the second,
	 * whose count must say 2. */
	for (int round = 1; round <= 2; round++) {
		size_t got = 0;
		if (round == 2)
			itest_sleep_ms(3100);
		for (int64_t end = itest_now_ms() + 3000; got < BACKLOG;) {
			struct ecw_queue_msg *msgs = NULL;
			size_t n = 0;
			ECW_ASSERT_OK(ecw_queue_receive(&msgs, &n, m->c, m->fx.t->queue, 32,
			                                round == 1 ? 3 : VETERAN_HIDE_S));
			for (size_t k = 0; k < n; k++)
				ITEST_CHECK(msgs[k].dequeue_count == round,
				            "a message received %ld times in round %d", msgs[k].dequeue_count,
				            round);
			got += n;
			ecw_queue_msgs_free(msgs, n);
			ITEST_CHECK(itest_now_ms() < end, "the test received %zu of %d in round %d", got,
			            BACKLOG, round);
		}
	}
}

/* Messages delivered twice already (max_dequeue_count 3) meet the outage on
 * their last allowed delivery: each is requeued as a fresh message (its
 * count starts again), where hidden it would have been poisoned on its next
 * receipt. The originals are gone; the copies run once storage is back. */
static void test_outage__last_delivery_is_requeued(void **state)
{
	struct mv *m = *state;
	struct run r;

	start_run(&r, m, "  circuit: {failures: 1, probe_min: 200ms, probe_max: 1s}\n", true);
	proc_stop(&r.proxy, 10000);
	PROC_EXPECT_LOG(&r.worker, 1, 30000, "storage_circuit_open");
	PROC_EXPECT_LOG(&r.worker, 1, 30000, "message", "outcome", "requeued");
	itest_sleep_ms(3000);
	finish_run(&r, m);
	for (int i = 0; i < BACKLOG; i++) {
		size_t done =
		    proc_count(&r.worker, "message", "message_id", r.id[i], "outcome", "succeeded", NULL) +
		    proc_count(&r.worker, "message", "message_id", r.id[i], "outcome", "requeued", NULL);
		if (done != 1) {
			char cmd[1024];
			snprintf(cmd, sizeof(cmd), "grep -e '%s' -e '\"rk\":\"%s\"' %s >&2", r.id[i], r.rk[i],
			         r.worker.log_path);
			if (system(cmd) != 0)
				print_message("no line names it\n");
		}
		ITEST_CHECK(done == 1, "message %s (%s) succeeded or was requeued %zu times, not once",
		            r.id[i], r.rk[i], done);
	}
	ITEST_CHECK(proc_count(&r.worker, "message", "outcome", "requeued", NULL) > 0,
	            "nothing was requeued");
	stop_run(&r);
}

/* Storage hangs (every request through the proxy is held, never
 * answered) while a job runs and the receive loop waits for an answer:
 * SIGTERM still ends the worker within shutdown_grace (3 s) + 2 s, leaving
 * the unfinished message to its lease; a worker started once storage
 * answers again moves it. Every wait (the job's request, the receive, the
 * renewal, the release) ends on shutdown's cancellation. */
static void test_outage__sigterm_while_storage_hangs(void **state)
{
	struct mv *m = *state;
	struct wfx_worker w = WFX_WORKER(m->fx.t->queue, m->fx.poison);
	struct proc worker, again, proxy, stall;
	struct ecw_entity *emp = mv_employee("sales", "hang", 1);
	char jobs[512], path[640], env_cs[1024], map_q[64], map_t[64];
	int qport = proc_free_port(), tport = proc_free_port();
	const char *azq = getenv("ECW_TEST_QUEUE_PORT"), *azt = getenv("ECW_TEST_TABLE_PORT");
	char *cs = itest_connstr_with_ports(NULL, qport, tport);

	ITEST_CHECK(azq && azt, "needs the Azurite ports");
	snprintf(env_cs, sizeof(env_cs), "ECW_TEST_CONNECTION_STRING=%s", cs);
	free(cs);
	snprintf(map_q, sizeof(map_q), "%d:127.0.0.1:%s", qport, azq);
	snprintf(map_t, sizeof(map_t), "%d:127.0.0.1:%s", tport, azt);
	mv_write_entity(m, m->emp, emp);
	w.shutdown_grace = "3s";
	w.visibility_s = 10; /* the lease the interrupted message waits out */
	w.log_level = "info";
	w.jobs = mv_std_jobs(jobs, sizeof(jobs), m);
	wfx_write_config(path, sizeof(path), "outage-hang", &w);
	const char *args[] = {"run", "-c", path, NULL};
	/* The job pauses 3 s after reading the employee: time to make storage hang. */
	const char *env[] = {env_cs, "ECW_TEST_PAUSE_AT=move.read:3000", NULL};
	const char *pass[] = {"--map", map_q, "--map", map_t, NULL};
	const char *hold[] = {"--map", map_q, "--map", map_t, "--pstall", "1", "--stall-ms", "600000", NULL};

	proc_start_program(&proxy, "outage-hang-proxy", proc_tool_bin("faultproxy"), pass, NULL);
	proc_start(&worker, "outage-hang", args, env);
	mv_put_job(m, "archive-employee", "sales", "hang", NULL, false, NULL);
	PROC_EXPECT_LOG(&worker, 1, 20000, "start");
	PROC_EXPECT_LOG(&worker, 1, 20000, "test_paused", "at",
	                "move.read"); /* received, paused after its read */
	proc_stop(&proxy, 10000);
	proc_start_program(&stall, "outage-hang-stall", proc_tool_bin("faultproxy"), hold, NULL);
	itest_sleep_ms(3000); /* the job's next request, and the next receive, now hang */

	int64_t t0 = itest_now_ms();
	proc_signal(&worker, SIGTERM);
	if (getenv("ECW_DEBUG_HANG") && !proc_wait(&worker, 5000)) {
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "gdb -p %d -batch -ex 'thread apply all bt' > /tmp/hang.txt 2>&1",
		         (int)worker.pid);
		if (system(cmd) != 0)
			print_message("gdb failed\n");
	}
	ITEST_CHECK(proc_wait(&worker, 5000), "the worker still ran 5 s after SIGTERM (grace 3 s); log:\n%s",
	            proc_tail(worker.log_path, 20));
	int64_t took = itest_now_ms() - t0;
	ITEST_CHECK(proc_exit_code(&worker) == 0, "exit status %d; log:\n%s", proc_exit_code(&worker),
	            proc_tail(worker.log_path, 20));
	print_message("  stopped %lld ms after SIGTERM with storage hanging (grace 3 s)\n", (long long)took);
	proc_stop(&stall, 10000);

	/* Nothing lost: with storage back, a new worker moves it once the
	 * lease (10 s) runs out, or at once if it was given back. */
	const char *env2[] = {env_cs, NULL};
	proc_start_program(&proxy, "outage-hang-proxy2", proc_tool_bin("faultproxy"), pass, NULL);
	proc_start(&again, "outage-hang-again", args, env2);
	PROC_EXPECT_LOG(&again, 1, 30000, "message", "outcome", "succeeded");
	mv_assert_only_in(m, m->arch, m->emp, emp, "after the restart");
	ecw_entity_free(emp);
	mv_finish(&again);
	proc_stop(&proxy, 10000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_outage__table_service_down_poisons_nothing, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_outage__last_delivery_is_requeued, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_outage__sigterm_while_storage_hangs, mv_setup, mv_teardown),
	};
	/* ECW_TEST_FILTER=*sigterm* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("outage", tests, NULL, NULL);
}
