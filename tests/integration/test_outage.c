/* test_outage.c - a whole-service outage does not poison the backlog (the
 * storage circuit, worker/circuit.c): the table service goes away while the
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

static void test_outage__table_service_down_poisons_nothing(void **state)
{
	struct mv *m = *state;
	struct wfx_worker w = WFX_WORKER(m->fx.t->queue, m->fx.poison);
	struct proc worker, proxy;
	struct ecw_entity *emp[BACKLOG];
	char jobs[512], path[640], env_cs[1024], rk[BACKLOG][32];
	int tport = proc_free_port(), mport = proc_free_port();
	char *cs = itest_connstr_with_ports(NULL, 0, tport);

	snprintf(env_cs, sizeof(env_cs), "ECW_TEST_CONNECTION_STRING=%s", cs);
	free(cs);
	const char *env[] = {env_cs, NULL};
	for (int i = 0; i < BACKLOG; i++) {
		snprintf(rk[i], sizeof(rk[i]), "e%03d", i);
		emp[i] = mv_employee("sales", rk[i], 1);
		mv_write_entity(m, m->emp, emp[i]);
	}

	w.concurrency = 4;
	w.max_dequeue = 3;
	w.retry_max = "2s"; /* retry_backoff {base: 1s, max: 2s} */
	w.metrics_port = mport;
	w.log_level = "info";
	w.worker_extra = "circuit: {failures: 3, probe_min: 200ms, probe_max: 1s}\n";
	w.jobs = mv_std_jobs(jobs, sizeof(jobs), m);
	wfx_write_config(path, sizeof(path), "outage", &w);
	const char *args[] = {"run", "-c", path, NULL};

	start_table_proxy(&proxy, tport);
	proc_start(&worker, "outage", args, env);
	wait_status(mport, "/readyz", 200, 30000, &worker);

	/* The table service goes away; the backlog arrives. */
	proc_stop(&proxy, 10000);
	for (int i = 0; i < BACKLOG; i++)
		mv_put_job(m, "archive-employee", "sales", rk[i], NULL, false, NULL);
	int64_t down_at = itest_now_ms();
	PROC_EXPECT_LOG(&worker, 1, 30000, "storage_circuit_open");
	wait_status(mport, "/readyz", 503, 5000, &worker);
	ITEST_CHECK(gauge(mport, "ecw_storage_circuit_open") == 1, "the circuit gauge is not 1 while open");
	while (itest_now_ms() - down_at < OUTAGE_MS) {
		ITEST_CHECK(proc_alive(&worker), "the worker exited during the outage; log:\n%s",
		            proc_tail(worker.log_path, 20));
		itest_sleep_ms(500);
	}
	ITEST_CHECK(proc_count(&worker, "message", "outcome", "poisoned", NULL) == 0,
	            "messages were poisoned during the outage; log:\n%s", proc_tail(worker.log_path, 30));

	/* It comes back: every employee moves, nothing is poisoned. */
	start_table_proxy(&proxy, tport);
	PROC_EXPECT_LOG(&worker, 1, 30000, "storage_circuit_closed");
	for (int64_t end = itest_now_ms() + 60000; mv_table_rows(m, m->arch) < BACKLOG;) {
		ITEST_CHECK(itest_now_ms() < end,
		            "%zu of %d moved 60 s after the table service came back; log:\n%s",
		            mv_table_rows(m, m->arch), BACKLOG, proc_tail(worker.log_path, 30));
		itest_sleep_ms(200);
	}
	for (int i = 0; i < BACKLOG; i++) {
		mv_assert_only_in(m, m->arch, m->emp, emp[i], "after the outage");
		ecw_entity_free(emp[i]);
	}
	wait_status(mport, "/readyz", 200, 10000, &worker);
	ITEST_CHECK(gauge(mport, "ecw_storage_circuit_open") == 0, "the circuit gauge is not 0 once closed");
	assert_int_equal(proc_count(&worker, "message", "outcome", "poisoned", NULL), 0);
	assert_int_equal(proc_count(&worker, "storage_circuit_open", NULL), 1);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&worker);
	proc_stop(&proxy, 10000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_outage__table_service_down_poisons_nothing, mv_setup,
	                                    mv_teardown),
	};
	return cmocka_run_group_tests_name("outage", tests, NULL, NULL);
}
