/* SPDX-License-Identifier: MIT */
/* test_audit_schedule.c - audit schedules (schedules: audit: JOB) in running
 * workers (build/ecworker-test) against the real Azurite, on a simulated
 * clock that stays inside one hourly window: an index job whose source was
 * never indexed (three sources: missing) and whose index holds an entry no
 * source gives (orphan) is audited once across two replicas, although the
 * audit outlasts the claim's lease (the claimant renews it: no takeover);
 * the marker holds the counts and both replicas show the drift and the time
 * on /metrics. With repair: true the drift is repaired (the index then equals
 * a recomputation) and the drift shown is 0. A replica stopped while its
 * audit runs stops at once and gives the window back. The audit's rules and
 * runner are tests/unit/test_audit.c; `ecworker audit` is test_audit.c. */
#include "indexfx.h"
#include "itest.h"
#include "proc.h"

#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_entity.h"

#define WINDOW "2020-10-11T10:00Z"

struct as {
	struct wfx x;        /* first, for wfx_teardown */
	const char *markers; /* worker.schedule_table */
	char clock[128];     /* ECW_TEST_CLOCK=...: 2020-10-11 10:20 at the test's start, real speed */
	int64_t base_s;
};

static int64_t real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Three employees never indexed, and an entry of a source that does not
 * exist: drift of two kinds. */
static int setup(void **state)
{
	struct as *a = wfx_new(sizeof(struct as), 0);
	struct tm tm;
	struct ecw_entity *ghost;

	memset(&tm, 0, sizeof(tm));
	tm.tm_year = 2020 - 1900, tm.tm_mon = 9, tm.tm_mday = 11, tm.tm_hour = 10, tm.tm_min = 20;
	a->base_s = (int64_t)timegm(&tm);
	snprintf(a->clock, sizeof(a->clock), "ECW_TEST_CLOCK=%lld:%lld:1", (long long)real_ms(),
	         (long long)a->base_s * 1000);
	a->markers = itest_extra_table(a->x.t, "audsched");
	ix_ensure_table(&a->x, a->markers); /* read before the workers would create it */
	ix_ensure_table(&a->x, a->x.t->table);
	ix_ensure_table(&a->x, a->x.t->table2);
	ix_put_employee(&a->x, "Sales", "001", "e001@example.com");
	ix_put_employee(&a->x, "Sales", "002", "e002@example.com");
	ix_put_employee(&a->x, "Sales", "003", "e003@example.com");
	ghost = ix_employee("email_Sales", "ghost@example.com", "ghost@example.com", "Gone", "Away");
	ix_set_str(ghost, "SourcePartitionKey", "Sales");
	ix_set_str(ghost, "SourceRowKey", "999");
	ix_upsert(&a->x, a->x.t->table2, ghost);
	*state = a;
	return 0;
}

/* A worker with the index job and one audit schedule (its options after
 * "every: 1h"), the markers in a->markers with this lease; metrics on a free
 * port, returned. */
static int start(struct proc *p, struct as *a, const char *name, const char *audit_opts, const char *lease)
{
	struct wfx_worker w = WFX_WORKER(a->x.t->queue, a->x.poison);
	char path[640], jobs[2048], idx[1024], extra[256];
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {a->clock, NULL};
	int k;

	ix_default_job(idx, sizeof(idx), &a->x, IX_JOB, NULL, NULL, "[FirstName, LastName]");
	k = snprintf(jobs, sizeof(jobs), "%sschedules:\n  - {audit: %s, every: 1h, catch_up: 1%s}\n", idx,
	             IX_JOB, audit_opts);
	assert_true(k > 0 && (size_t)k < sizeof(jobs));
	k = snprintf(extra, sizeof(extra), "  schedule_table: %s\n  schedule_lease: %s\n", a->markers, lease);
	assert_true(k > 0 && (size_t)k < sizeof(extra));
	w.jobs = jobs;
	w.worker_extra = extra;
	w.log_level = "info";
	w.metrics_port = proc_free_port();
	wfx_write_config(path, sizeof(path), name, &w);
	proc_start(p, name, args, env);
	return w.metrics_port;
}

/* The window's marker once it is done (fails after timeout_ms). */
static struct ecw_entity *wait_done(struct as *a, int timeout_ms)
{
	int64_t end = itest_now_ms() + timeout_ms;

	for (;;) {
		size_t n = 0;
		struct ecw_entity **v = itest_query_all(&n, a->x.t->client, a->markers, NULL);
		const struct ecw_prop *d = n == 1 ? ecw_entity_get(v[0], "Done") : NULL;
		if (d && d->type == ECW_EDM_BOOLEAN && d->v.b) {
			struct ecw_entity *e = v[0];
			v[0] = NULL;
			itest_entities_free(v, n);
			return e;
		}
		itest_entities_free(v, n);
		ITEST_CHECK(itest_now_ms() < end, "the audit window was not done after %d ms", timeout_ms);
		itest_sleep_ms(200);
	}
}

static long long int64_prop(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);

	ITEST_CHECK(p && p->type == ECW_EDM_INT64, "the marker lacks %s: %s", name, itest_entity_json(e));
	return (long long)p->v.i64;
}

/* The marker's counts are these. */
static void marker_is(const struct ecw_entity *m, long long checked, long long missing, long long orphan,
                      long long repaired)
{
	const struct ecw_prop *p = ecw_entity_get(m, "FinishedAt");

	ITEST_CHECK(strcmp(ecw_entity_pk(m), IX_JOB) == 0 && strcmp(ecw_entity_rk(m), WINDOW) == 0,
	            "marker %s", itest_entity_json(m));
	ITEST_CHECK(p && p->type == ECW_EDM_DATETIME, "no FinishedAt: %s", itest_entity_json(m));
	ITEST_CHECK(int64_prop(m, "Missing") == missing && int64_prop(m, "Orphan") == orphan &&
	                int64_prop(m, "Stale") == 0 && int64_prop(m, "Conflict") == 0 &&
	                int64_prop(m, "Repaired") == repaired && int64_prop(m, "Checked") == checked,
	            "marker: %s", itest_entity_json(m));
}

/* Waits until the replica on port shows the drift of kind as want. */
static void wait_drift(int port, const char *kind, double want, int timeout_ms)
{
	int64_t end = itest_now_ms() + timeout_ms;
	char label[64];
	double got = -1;
	int found = 0;

	snprintf(label, sizeof(label), "kind=\"%s\"", kind);
	for (;;) {
		char *page = NULL;
		if (proc_http_get(&page, port, "/metrics") == 200)
			got = proc_metric(page, "ecw_audit_drift", &found, "job=\"" IX_JOB "\"", label, NULL);
		free(page);
		if (found == 1 && got == want)
			return;
		ITEST_CHECK(itest_now_ms() < end, "port %d: ecw_audit_drift{%s} = %g (%d samples), want %g",
		            port, kind, got, found, want);
		itest_sleep_ms(100);
	}
}

/* The replica on port shows a last run within the simulated minutes of the test. */
static void last_run_shown(struct as *a, int port)
{
	char *page = NULL;
	int found = 0;
	double t;

	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	t = proc_metric(page, "ecw_audit_last_run_timestamp_seconds", &found, "job=\"" IX_JOB "\"", NULL);
	ITEST_CHECK(found == 1 && t >= (double)a->base_s && t < (double)a->base_s + 600,
	            "ecw_audit_last_run_timestamp_seconds = %f (%d samples), the clock started at %lld", t,
	            found, (long long)a->base_s);
	t = proc_metric(page, "ecw_audit_period_seconds", &found, "job=\"" IX_JOB "\"", NULL);
	ITEST_CHECK(found == 1 && t == 3600, "ecw_audit_period_seconds = %f", t);
	free(page);
}

/* duration_ms of p's audit_finished line; -1 when it has none. */
static long long audit_ms(const struct proc *p)
{
	struct proc_log log;
	struct json_object *o, *v;
	long long ms = -1;

	proc_log_read(&log, p->log_path);
	if ((o = proc_log_find(&log, 0, "audit_finished", NULL)) &&
	    json_object_object_get_ex(o, "duration_ms", &v))
		ms = (long long)json_object_get_int64(v);
	proc_log_dispose(&log);
	return ms;
}

/* Two replicas, a lease of 2 s and an audit paced to take twice as long
 * (about 8 requests at 2 a second): one of them audits the window, once,
 * renewing its claim; the other never takes it over. Read-only: the index
 * is left as it was. Both show the result. */
static void test_audit_schedule__two_replicas_audit_once_and_show_it(void **state)
{
	struct as *a = *state;
	struct proc p[2];
	int port[2];
	size_t finished = 0, takeovers = 0;
	long long longest = -1;
	struct ecw_entity *m;

	port[0] = start(&p[0], a, "audsched-a", ", rate: 2", "2s");
	port[1] = start(&p[1], a, "audsched-b", ", rate: 2", "2s");
	m = wait_done(a, 30000);
	marker_is(m, 4, 3, 1, 0); /* 3 sources, 1 entry */
	ITEST_CHECK(ecw_entity_get(m, "Claims")->v.i32 == 1, "the window was taken over: %s",
	            itest_entity_json(m));
	ecw_entity_free(m);
	for (int i = 0; i < 2; i++) {
		wait_drift(port[i], "missing", 3, 10000);
		wait_drift(port[i], "orphan", 1, 1000);
		wait_drift(port[i], "stale", 0, 1000);
		last_run_shown(a, port[i]);
	}
	for (int i = 0; i < 2; i++) {
		proc_stop(&p[i], 15000);
		finished += proc_count(&p[i], "audit_finished", "job", IX_JOB, "missing", "3", "orphan", "1",
		                       "repaired", "0", NULL);
		if (audit_ms(&p[i]) > longest)
			longest = audit_ms(&p[i]);
		takeovers += proc_count(&p[i], "schedule_takeover", NULL);
	}
	ITEST_CHECK(finished == 1, "%zu audit_finished lines over the two replicas", finished);
	assert_int_equal(takeovers, 0);
	/* It outlasted the lease: the renewals kept the claim. */
	ITEST_CHECK(longest > 2000, "the audit took %lld ms, within the lease: nothing to renew", longest);
	/* The examples in the line: the orphan's keys. */
	ITEST_CHECK(proc_count(&p[0], "audit_finished", "example_orphan", PROC_ANY, NULL) +
	                    proc_count(&p[1], "audit_finished", "example_orphan", PROC_ANY, NULL) ==
	                1,
	            "no example of the orphan in audit_finished");
	/* Read-only: nothing indexed, the orphan still there. */
	assert_int_equal(ix_count_entities(&a->x, a->x.t->table2), 1);
	proc_assert_logs_clean();
}

/* repair: true: the audit repairs what it finds through the job's run; the
 * index is then what a recomputation gives, and the drift shown is 0. */
static void test_audit_schedule__repair_true_repairs_the_drift(void **state)
{
	struct as *a = *state;
	struct proc p;
	int port = start(&p, a, "audsched-repair", ", repair: true", "1m");
	struct ecw_entity *m = wait_done(a, 30000);

	marker_is(m, 7, 3, 1, 4); /* the second pass sees the 3 entries written */
	ecw_entity_free(m);
	wait_drift(port, "missing", 0, 10000);
	wait_drift(port, "orphan", 0, 1000);
	last_run_shown(a, port);
	proc_stop(&p, 15000);
	assert_int_equal(
	    proc_count(&p, "audit_finished", "job", IX_JOB, "repair", "true", "repaired", "4", NULL), 1);
	assert_int_equal(ix_check_recompute(&a->x, &IX_DEFAULT_SPEC), 3);
	proc_assert_logs_clean();
}

/* SIGTERM while the audit runs (at 1 request a second it would take about
 * 15 s): the worker stops within a couple of seconds, gives the window back
 * (its marker deleted, so another replica audits it at once) and writes no
 * result. */
static void test_audit_schedule__stop_gives_the_window_back(void **state)
{
	struct as *a = *state;
	struct proc p;
	size_t n = 0;
	int64_t t0;

	start(&p, a, "audsched-stop", ", rate: 1", "1m");
	PROC_EXPECT_LOG(&p, 1, 20000, "audit_started", "job", IX_JOB, "window", WINDOW);
	itest_sleep_ms(1500);
	t0 = itest_now_ms();
	proc_signal(&p, SIGTERM);
	ITEST_CHECK(proc_wait(&p, 10000), "the worker did not stop");
	ITEST_CHECK(itest_now_ms() - t0 < 4000, "the audit took %lld ms to stop",
	            (long long)(itest_now_ms() - t0));
	assert_int_equal(proc_exit_code(&p), 0);
	assert_int_equal(proc_count(&p, "schedule_released", "schedule", IX_JOB, "window", WINDOW, NULL), 1);
	assert_int_equal(proc_count(&p, "audit_finished", NULL), 0);
	struct ecw_entity **v = itest_query_all(&n, a->x.t->client, a->markers, NULL);
	ITEST_CHECK(n == 0, "%zu markers left, first %s", n, itest_entity_json(n ? v[0] : NULL));
	itest_entities_free(v, n);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_audit_schedule__two_replicas_audit_once_and_show_it, setup,
	                                    wfx_teardown),
	    cmocka_unit_test_setup_teardown(test_audit_schedule__repair_true_repairs_the_drift, setup,
	                                    wfx_teardown),
	    cmocka_unit_test_setup_teardown(test_audit_schedule__stop_gives_the_window_back, setup,
	                                    wfx_teardown),
	};
	return cmocka_run_group_tests_name("audit schedule (integration)", tests, NULL, NULL);
}
