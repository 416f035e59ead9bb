/* SPDX-License-Identifier: MIT */
/* test_missing_table.c - a configuration mistake never costs derived data
 * (issue 33): a one-letter typo in the source tables of every job type
 * (index, index-list, fanout, move, rollup), on derived data that a correct
 * configuration built first.
 *
 *   - the worker creates none of the typo'd tables (a job's sources are
 *     only read, never made);
 *   - every message is held (outcome "blocked", then "requeued" at its last
 *     allowed delivery), none is poisoned, and every derived entity stays
 *     byte for byte as it was (ETags included: nothing was written);
 *   - a job_blocked line and the gauge ecw_job_blocked{job,table} name each
 *     job and its missing table;
 *   - `ecworker audit --repair` on the typo'd configuration stops at the
 *     missing table, naming it, and repairs nothing; `ecworker backfill`
 *     refuses it, enqueuing nothing;
 *   - once the tables exist, the held messages complete and the jobs are
 *     unblocked (gauge 0, job_unblocked).
 *
 * Azurite's 404 for a missing table is TableNotFound on every operation, as
 * the service's (test_table.c checks each). */
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mt {
	struct wfx w; /* first: wfx_teardown frees it */
	/* The real tables, and the typo'd names of the three sources. */
	const char *emp, *cust, *orders, *idx, *arch, *raw, *roll;
	const char *emp_typo, *cust_typo, *raw_typo;
};

static int fx_setup(void **state)
{
	struct mt *m = wfx_new(sizeof(struct mt), WFX_QUEUE);
	struct itest *t = m->w.t;

	m->emp = itest_extra_table(t, "Employees");
	m->cust = itest_extra_table(t, "Customers");
	m->orders = itest_extra_table(t, "Orders");
	m->idx = itest_extra_table(t, "Index");
	m->arch = itest_extra_table(t, "Archive");
	m->raw = itest_extra_table(t, "Telemetry");
	m->roll = itest_extra_table(t, "Rollups");
	m->emp_typo = itest_extra_table(t, "Employes");
	m->cust_typo = itest_extra_table(t, "Customer");
	m->raw_typo = itest_extra_table(t, "Telemtry");
	*state = m;
	return 0;
}

static int fx_teardown(void **state)
{
	return wfx_teardown(state);
}

/* ---- data ---------------------------------------------------------------------------------------- */

static void put(struct mt *m, const char *table, const char *pk, const char *rk, const char *const *props)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	for (size_t i = 0; props[i]; i += 2)
		ECW_ASSERT_OK(ecw_entity_set_string(e, props[i], props[i + 1], strlen(props[i + 1])));
	ECW_ASSERT_OK(ecw_table_write(NULL, m->w.t->client, table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

/* Two employees, a customer with two orders, three readings of one day. */
static void fill_sources(struct mt *m, const char *emp, const char *cust, const char *raw)
{
	put(m, emp, "staff", "e1",
	    (const char *const[]){"Email", "ada@example.com", "FirstName", "Ada", "LastName", "Lovelace",
	                          NULL});
	put(m, emp, "staff", "e2",
	    (const char *const[]){"Email", "alan@example.com", "FirstName", "Alan", "LastName", "Turing",
	                          NULL});
	put(m, cust, "cust", "c1",
	    (const char *const[]){"Name", "Contoso", "Email", "buy@contoso.com", NULL});
	for (int h = 0; h < 3; h++) {
		char rk[16], depth[12];
		snprintf(rk, sizeof(rk), "%010lld", 1601510400LL + h * 3600LL); /* 2020-10-01 */
		snprintf(depth, sizeof(depth), "%d", 10 + h);
		put(m, raw, "tank-a_raw", rk, (const char *const[]){"depth", depth, NULL});
	}
}

static void create(struct mt *m, const char *table)
{
	ECW_ASSERT_OK(ecw_table_create(NULL, m->w.t->client, table));
}

/* ---- configuration ------------------------------------------------------------------------------ */

/* The jobs over these sources (the real ones or the typo'd ones). */
static void write_config(struct mt *m, const char *name, const char *emp, const char *cust, const char *raw,
                         int max_dequeue, int metrics_port)
{
	struct wfx_worker w = WFX_WORKER(m->w.t->queue, m->w.poison);
	char jobs[4096];
	int k = snprintf(jobs, sizeof(jobs),
	                 "  email:\n"
	                 "    type: index\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    partition_key: \"email_{PartitionKey}\"\n"
	                 "    row_key: \"{Email}\"\n"
	                 "  lastname:\n"
	                 "    type: index-list\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    partition_key: \"lastname\"\n"
	                 "    row_key: \"{LastName}\"\n"
	                 "  orders:\n"
	                 "    type: fanout\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    filter: \"PartitionKey eq '{RowKey}'\"\n"
	                 "    fields: {CustomerName: Name}\n"
	                 "    on_delete: clear\n"
	                 "  archive:\n"
	                 "    type: move\n"
	                 "    from: %s\n"
	                 "    to: %s\n"
	                 "  daily:\n"
	                 "    type: rollup\n"
	                 "    source: %s\n"
	                 "    to: %s\n"
	                 "    from_partition: \"{device}_raw\"\n"
	                 "    to_partition: \"{device}_daily\"\n"
	                 "    window: 1d\n"
	                 "    aggregate: {samples: count()}\n",
	                 emp, m->idx, emp, m->idx, cust, m->orders, emp, m->arch, raw, m->roll);
	assert_true(k > 0 && (size_t)k < sizeof(jobs));
	w.max_dequeue = max_dequeue;
	w.retry_max = "1s";
	w.metrics_port = metrics_port;
	w.jobs = jobs;
	wfx_write_config(m->w.config, sizeof(m->w.config), name, &w);
}

static void send_text(struct mt *m, const char *text)
{
	ECW_ASSERT_OK(ecw_queue_put(NULL, m->w.t->client, m->w.t->queue, text, strlen(text), NULL));
}

static void send_keyed(struct mt *m, const char *job, const char *pk, const char *rk)
{
	char text[256];

	snprintf(text, sizeof(text), "{\"job\":\"%s\",\"pk\":\"%s\",\"rk\":\"%s\"}", job, pk, rk);
	send_text(m, text);
}

#define DAILY_MESSAGE "{\"job\":\"daily\",\"device\":\"tank-a\",\"window_start\":\"2020-10-01\"}"

/* ---- snapshots ---------------------------------------------------------------------------------- */

/* Every entity of the tables, as JSON with its ETag: equal snapshots mean
 * nothing was written. A missing table snapshots as "(no table)". */
static char *snapshot(struct mt *m)
{
	const char *tables[] = {m->emp, m->cust, m->orders, m->idx, m->arch, m->raw, m->roll};
	struct ecw_buf b;

	ecw_buf_init(&b, 0);
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		struct ecw_table_query *q = NULL;
		struct ecw_entity *e = NULL;
		int err;

		ECW_ASSERT_OK(ecw_buf_printf(&b, "== %s\n", tables[i]));
		ECW_ASSERT_OK(ecw_table_query_new(&q, m->w.t->client, tables[i], NULL));
		while ((err = ecw_table_query_next(&e, q)) == 0 && e) {
			ECW_ASSERT_OK(
			    ecw_buf_printf(&b, "%s %s\n", ecw_entity_etag(e), itest_entity_json(e)));
			ecw_entity_free(e);
			e = NULL;
		}
		if (err == ECW_ENOTABLE)
			ECW_ASSERT_OK(ecw_buf_adds(&b, "(no table)\n"));
		else
			ECW_ASSERT_OK(err);
		ecw_table_query_free(q);
	}
	return ecw_buf_take(&b);
}

static size_t count_entities(struct mt *m, const char *table)
{
	size_t n = 0;
	struct ecw_entity **v = itest_query_all(&n, m->w.t->client, table, NULL);

	itest_entities_free(v, n);
	return n;
}

static void assert_no_table(struct mt *m, const char *table)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_ERR(ecw_table_get(&e, m->w.t->client, table, "p", "r"), ECW_ENOTABLE);
}

static const char *prop(struct mt *m, const char *table, const char *pk, const char *rk, const char *name,
                        char *out, size_t cap)
{
	struct ecw_entity *e = itest_get_or_null(m->w.t->client, table, pk, rk);
	const struct ecw_prop *p = e ? ecw_entity_get(e, name) : NULL;

	snprintf(out, cap, "%s", p && p->type == ECW_EDM_STRING ? p->v.s : "(none)");
	ecw_entity_free(e);
	return out;
}

/* ---- the test ----------------------------------------------------------------------------------- */

/* Phase 1: the correct configuration builds the derived data. */
static void build_derived(struct mt *m)
{
	char buf[128];
	int port = proc_free_port();

	create(m, m->emp);
	create(m, m->cust);
	create(m, m->orders);
	create(m, m->raw);
	fill_sources(m, m->emp, m->cust, m->raw);
	put(m, m->orders, "c1", "o1", (const char *const[]){"Amount", "10", NULL});
	put(m, m->orders, "c1", "o2", (const char *const[]){"Amount", "20", NULL});
	write_config(m, "missing-build", m->emp, m->cust, m->raw, 5, port);
	send_keyed(m, "email", "staff", "e1");
	send_keyed(m, "email", "staff", "e2");
	send_keyed(m, "lastname", "staff", "e1");
	send_keyed(m, "lastname", "staff", "e2");
	send_keyed(m, "orders", "cust", "c1");
	send_text(m, DAILY_MESSAGE);
	(void)wfx_run(&m->w, "missing-build", port, 6, 30000, NULL);
	assert_string_equal(prop(m, m->orders, "c1", "o1", "CustomerName", buf, sizeof(buf)), "Contoso");
	assert_true(count_entities(m, m->idx) >= 4); /* two entries, their refs, the lists */
	assert_int_equal(count_entities(m, m->roll), 1);
}

static void expect_blocked(struct proc *p, const char *job, const char *table)
{
	PROC_EXPECT_LOG(p, 1, 20000, "job_blocked", "job", job, "table", table);
	PROC_EXPECT_LOG(p, 1, 20000, "message", "job", job, "outcome", "blocked");
	PROC_EXPECT_LOG(p, 1, 20000, "message", "job", job, "outcome", "requeued");
}

static void expect_gauge(int port, const char *job, const char *table, double want)
{
	char *page = NULL, jl[96], tl[96];
	int found = 0;

	snprintf(jl, sizeof(jl), "job=\"%s\"", job);
	snprintf(tl, sizeof(tl), "table=\"%s\"", table);
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	double v = proc_metric(page, "ecw_job_blocked", &found, jl, tl, NULL);
	ITEST_CHECK(found == 1 && v == want, "ecw_job_blocked{%s,%s}: %d samples, %g (want %g)", jl, tl,
	            found, v, want);
	free(page);
}

/* Audit and repair on the typo'd configuration: refused at the missing
 * table, nothing written. */
static void audit_refuses(struct mt *m)
{
	const char *args[] = {"audit", "--repair", "-c", m->w.config, NULL};
	char *out = NULL, *err = NULL;
	int rc = proc_run(&out, &err, "missing-audit", args, NULL, 60000);

	ITEST_CHECK(rc == 1, "audit --repair exited %d on missing source tables (want 1):\n%s\n%s", rc, out,
	            err);
	ITEST_CHECK(strstr(out, m->emp_typo) || strstr(err, m->emp_typo),
	            "audit names no missing table %s:\n%s\n%s", m->emp_typo, out, err);
	ITEST_CHECK(strstr(out, "does not exist") || strstr(err, "does not exist"),
	            "audit does not say the table does not exist:\n%s\n%s", out, err);
	free(out);
	free(err);
}

static void test_missing_table__typo_costs_nothing_and_held_messages_complete(void **state)
{
	struct mt *m = *state;
	struct proc p;
	char buf[128];
	int port = proc_free_port();

	build_derived(m);
	char *before = snapshot(m);

	/* Phase 2: the typo. create_missing is on (the default). */
	write_config(m, "missing-typo", m->emp_typo, m->cust_typo, m->raw_typo, 2, port);
	send_keyed(m, "email", "staff", "e1");
	send_keyed(m, "lastname", "staff", "e1");
	send_keyed(m, "orders", "cust", "c1");
	send_keyed(m, "archive", "staff", "e2");
	send_text(m, DAILY_MESSAGE);
	proc_start_worker(&p, "missing-typo", m->w.config);
	expect_blocked(&p, "email", m->emp_typo);
	expect_blocked(&p, "lastname", m->emp_typo);
	expect_blocked(&p, "orders", m->cust_typo);
	expect_blocked(&p, "archive", m->emp_typo);
	expect_blocked(&p, "daily", m->raw_typo);
	expect_gauge(port, "email", m->emp_typo, 1);
	expect_gauge(port, "orders", m->cust_typo, 1);
	expect_gauge(port, "daily", m->raw_typo, 1);
	audit_refuses(m);

	assert_int_equal(proc_count(&p, "message", "outcome", "poisoned", NULL), 0);
	assert_int_equal(proc_count(&p, "message", "outcome", "succeeded", NULL), 0);
	assert_no_table(m, m->emp_typo);
	assert_no_table(m, m->cust_typo);
	assert_no_table(m, m->raw_typo);
	char *after = snapshot(m);
	ITEST_CHECK(strcmp(before, after) == 0, "derived data changed under a typo:\nbefore:\n%s\nafter:\n%s",
	            before, after);
	free(after);
	free(before);
	long long poisoned = -1;
	ECW_ASSERT_OK(ecw_queue_count(&poisoned, m->w.t->client, m->w.poison));
	assert_int_equal(poisoned, 0);

	/* Phase 3: the tables appear (renamed, say): the held messages
	 * complete, and the jobs are unblocked. */
	create(m, m->emp_typo);
	create(m, m->cust_typo);
	create(m, m->raw_typo);
	fill_sources(m, m->emp_typo, m->cust_typo, m->raw_typo);
	PROC_EXPECT_LOG(&p, 5, 30000, "message", "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 1, 5000, "job_unblocked", "job", "daily", "table", m->raw_typo);
	expect_gauge(port, "daily", m->raw_typo, 0);
	expect_gauge(port, "email", m->emp_typo, 0);
	assert_int_equal(proc_count(&p, "message", "outcome", "poisoned", NULL), 0);
	assert_string_equal(prop(m, m->arch, "staff", "e2", "LastName", buf, sizeof(buf)), "Turing");
	assert_null(itest_get_or_null(m->w.t->client, m->emp_typo, "staff", "e2"));
	assert_int_equal(count_entities(m, m->roll), 1);
	assert_string_equal(prop(m, m->orders, "c1", "o2", "CustomerName", buf, sizeof(buf)), "Contoso");
	proc_stop(&p, 10000);
	assert_int_equal(proc_exit_code(&p), 0);
	wfx_assert_queues_empty(&m->w);
}

/* backfill over a typo'd source: an error naming the table, nothing
 * enqueued (a missing table is never an empty one). */
static void test_missing_table__backfill_refuses(void **state)
{
	struct mt *m = *state;
	const char *args[] = {"backfill", "-c", m->w.config, "email", NULL};
	char *out = NULL, *err = NULL;
	long long queued = -1;
	int rc;

	write_config(m, "missing-backfill", m->emp_typo, m->cust_typo, m->raw_typo, 5, proc_free_port());
	rc = proc_run(&out, &err, "missing-backfill", args, NULL, 30000);
	ITEST_CHECK(rc == 1 && strstr(err, m->emp_typo) && strstr(err, "does not exist"),
	            "backfill exited %d:\n%s\n%s", rc, out, err);
	ECW_ASSERT_OK(ecw_queue_count(&queued, m->w.t->client, m->w.t->queue));
	assert_int_equal(queued, 0);
	assert_no_table(m, m->emp_typo);
	free(out);
	free(err);
}

/* ---- before a deploy, and at start ------------------------------------------------------------- */

/* check-config --online names each problem with its job and table (or its
 * queue), and exits 1; on a sound configuration it says so and exits 0; on
 * refused credentials it says that alone. */
static void test_missing_table__check_config_online(void **state)
{
	struct mt *m = *state;
	struct wfx_worker w = WFX_WORKER(m->w.t->queue, m->w.poison);
	const char *args[] = {"check-config", "--online", "-c", m->w.config, NULL};
	char jobs[1024], *out = NULL, *err = NULL;
	int rc;

	create(m, m->emp);
	snprintf(jobs, sizeof(jobs),
	         "  email:\n    type: index\n    source: %s\n    table: %s\n"
	         "    partition_key: \"email_{PartitionKey}\"\n    row_key: \"{Email}\"\n"
	         "  archive:\n    type: move\n    from: %s\n    to: %s\n",
	         m->emp_typo, m->idx, m->emp, m->arch);
	w.jobs = jobs;
	w.worker_extra = "  create_missing: false\n";
	wfx_write_config(m->w.config, sizeof(m->w.config), "missing-online", &w);
	rc = proc_run(&out, &err, "missing-online", args, NULL, 30000);
	ITEST_CHECK(rc == 1, "check-config --online exited %d:\n%s\n%s", rc, out, err);
	const char *want[][3] = {
	    {"job 'email' reads table", m->emp_typo, "does not exist"},
	    {"job 'email' writes table", m->idx, "create_missing is false"},
	    {"job 'archive' writes table", m->arch, "create_missing is false"},
	    {"poison queue", m->w.poison, "create_missing is false"},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char line[512];
		snprintf(line, sizeof(line), "%s '%s'", want[i][0], want[i][1]);
		const char *at = strstr(out, line);
		ITEST_CHECK(at && strstr(at, want[i][2]) && strcspn(at, "\n") > strlen(line),
		            "no line \"%s ... %s\" in:\n%s", line, want[i][2], out);
	}
	ITEST_CHECK(!strstr(out, m->emp) || strstr(out, m->emp_typo), "the existing source named:\n%s", out);
	free(out);
	free(err);

	/* Mended: every table and queue there. */
	create(m, m->emp_typo);
	create(m, m->idx);
	create(m, m->arch);
	ECW_ASSERT_OK(ecw_queue_create(NULL, m->w.t->client, m->w.poison));
	rc = proc_run(&out, &err, "missing-online-ok", args, NULL, 30000);
	ITEST_CHECK(rc == 0 && strstr(out, "storage OK"), "exited %d:\n%s\n%s", rc, out, err);
	free(out);
	free(err);

	/* Refused credentials: said once, nothing else can be told. */
	char *bad = itest_connstr_with("AAAA", 0), env[1024];
	snprintf(env, sizeof(env), "ECW_TEST_CONNECTION_STRING=%s", bad);
	const char *envs[] = {env, NULL};
	rc = proc_run(&out, &err, "missing-online-key", args, envs, 30000);
	ITEST_CHECK(rc == 1 && strstr(out, "credentials: the service refused them") &&
	                !strstr(out, "does not exist"),
	            "exited %d:\n%s\n%s", rc, out, err);
	free(out);
	free(err);
	free(bad);
}

/* create_missing off and no poison queue: the worker refuses to start,
 * naming it, rather than fail every poisoning. A missing source table at
 * start blocks its job before any message arrives, not the worker. */
static void test_missing_table__start_checks(void **state)
{
	struct mt *m = *state;
	struct wfx_worker w = WFX_WORKER(m->w.t->queue, m->w.poison);
	struct proc p;
	char jobs[512];

	snprintf(jobs, sizeof(jobs), "  archive:\n    type: move\n    from: %s\n    to: %s\n", m->emp_typo,
	         m->arch);
	w.jobs = jobs;
	w.worker_extra = "  create_missing: false\n";
	create(m, m->arch);
	wfx_write_config(m->w.config, sizeof(m->w.config), "missing-nopoison", &w);
	proc_start_worker(&p, "missing-nopoison", m->w.config);
	ITEST_CHECK(proc_wait(&p, 20000), "the worker started without its poison queue:\n%s",
	            proc_tail(p.log_path, 20));
	assert_int_not_equal(proc_exit_code(&p), 0);
	PROC_EXPECT_LOG(&p, 1, 1000, "start_failed", "queue", m->w.poison);

	/* The poison queue there: it starts, with the job blocked at once. */
	ECW_ASSERT_OK(ecw_queue_create(NULL, m->w.t->client, m->w.poison));
	proc_start_worker(&p, "missing-start", m->w.config);
	PROC_EXPECT_LOG(&p, 1, 20000, "job_blocked", "job", "archive", "table", m->emp_typo);
	itest_sleep_ms(500); /* the start-up's check came first: it goes on receiving */
	ITEST_CHECK(proc_alive(&p), "a missing source table stopped the worker:\n%s",
	            proc_tail(p.log_path, 20));
	proc_stop(&p, 10000);
	assert_int_equal(proc_exit_code(&p), 0);
	assert_no_table(m, m->emp_typo);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_missing_table__typo_costs_nothing_and_held_messages_complete,
	                                    fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_missing_table__backfill_refuses, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_missing_table__check_config_online, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_missing_table__start_checks, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests_name("missing_table", tests, NULL, NULL);
}
