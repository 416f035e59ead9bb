/* SPDX-License-Identifier: MIT */
/* test_audit_layout.c - the audit on jobs/README.md's own layout
 * (config/demo.yaml's employee jobs): an index and an index-list sharing one
 * table, and archive and restore moves that chain into both (issue 33).
 *
 *   - converged data audits clean: the index-list's audit judges only the
 *     entities its partition_key could have written, so the email job's
 *     entries beside its lists are neither conflicts nor orphans;
 *   - a move stopped half way (identical copies in both tables) is repaired
 *     by one `audit --repair archive-employee` (a repair names the direction
 *     of the two opposite moves), which also runs the move's `then:` jobs,
 *     so the archived employee's email entry and list key go too: a second
 *     audit of every job finds nothing. */
#include "auditfx.h"
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lx {
	struct wfx w; /* first: wfx_teardown frees it */
	const char *emp, *arch, *idx;
};

static int fx_setup(void **state)
{
	struct lx *x = wfx_new(sizeof(struct lx), WFX_QUEUE);

	x->emp = itest_extra_table(x->w.t, "Employees");
	x->arch = itest_extra_table(x->w.t, "EmployeesArchive");
	x->idx = itest_extra_table(x->w.t, "EmployeeIndex");
	*state = x;
	return 0;
}

static int fx_teardown(void **state)
{
	return wfx_teardown(state);
}

static const char *const people[][4] = {
    {"e1", "ada@example.com", "Ada", "Lovelace"},
    {"e2", "alan@example.com", "Alan", "Turing"},
    {"e3", "grace@example.com", "Grace", "Hopper"},
    {"e4", "alan.kay@example.com", "Alan", "Turing"}, /* a second Turing: a list of two */
};
#define NPEOPLE (sizeof(people) / sizeof(people[0]))

static struct ecw_entity *person(size_t i)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, "Sales", people[i][0]));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Email", people[i][1], strlen(people[i][1])));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "FirstName", people[i][2], strlen(people[i][2])));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "LastName", people[i][3], strlen(people[i][3])));
	return e;
}

/* config/demo.yaml's employee jobs, on this test's tables. */
static int write_config(struct lx *x)
{
	struct wfx_worker w = WFX_WORKER(x->w.t->queue, x->w.poison);
	char jobs[2048];
	int port = proc_free_port();
	int k = snprintf(jobs, sizeof(jobs),
	                 "  archive-employee:\n"
	                 "    type: move\n"
	                 "    from: %s\n"
	                 "    to: %s\n"
	                 "    then: [employee-by-email, employees-by-lastname]\n"
	                 "  restore-employee:\n"
	                 "    type: move\n"
	                 "    from: %s\n"
	                 "    to: %s\n"
	                 "    then: [employee-by-email, employees-by-lastname]\n"
	                 "  employee-by-email:\n"
	                 "    type: index\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    partition_key: \"email\"\n"
	                 "    row_key: \"{Email}\"\n"
	                 "    properties: [FirstName, LastName]\n"
	                 "  employees-by-lastname:\n"
	                 "    type: index-list\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    partition_key: \"lastname\"\n"
	                 "    row_key: \"{LastName}\"\n",
	                 x->emp, x->arch, x->arch, x->emp, x->emp, x->idx, x->emp, x->idx);
	assert_true(k > 0 && (size_t)k < sizeof(jobs));
	w.metrics_port = port;
	w.jobs = jobs;
	wfx_write_config(x->w.config, sizeof(x->w.config), "layout", &w);
	return port;
}

static void enqueue(struct lx *x, const char *job, const char *rk)
{
	char text[256];

	snprintf(text, sizeof(text), "{\"job\":\"%s\",\"pk\":\"Sales\",\"rk\":\"%s\"}", job, rk);
	ECW_ASSERT_OK(ecw_queue_put(NULL, x->w.t->client, x->w.t->queue, text, strlen(text), NULL));
}

static void all_clean(const char *out)
{
	static const char *const jobs[] = {"archive-employee", "restore-employee", "employee-by-email",
	                                   "employees-by-lastname"};
	for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++)
		auditfx_counts_are(out, jobs[i], 0, 0, 0, 0, 0);
}

static void test_audit_layout__converged_audits_clean_and_one_repair_suffices(void **state)
{
	struct lx *x = *state;
	const char *json[] = {"--json", NULL};
	/* Archive and restore move between the same tables: a repair names the
	 * direction that completes a move found in both (the command refuses
	 * to guess); only the move is named, its chain does the rest. */
	const char *repair[] = {"--repair", "--json", "archive-employee", NULL};
	char *out = NULL;
	int port, rc;

	/* The application's employees; the worker builds the index and the
	 * lists. */
	ECW_ASSERT_OK(ecw_table_create(NULL, x->w.t->client, x->emp));
	for (size_t i = 0; i < NPEOPLE; i++) {
		struct ecw_entity *e = person(i);
		ECW_ASSERT_OK(ecw_table_write(NULL, x->w.t->client, x->emp, e, ECW_WRITE_INSERT, NULL));
		ecw_entity_free(e);
		enqueue(x, "employee-by-email", people[i][0]);
		enqueue(x, "employees-by-lastname", people[i][0]);
	}
	port = write_config(x);
	(void)wfx_run(&x->w, "layout-build", port, 2 * NPEOPLE, 30000, NULL);

	/* Converged: clean, though the two jobs share the table. */
	rc = auditfx_run(&out, x->w.config, "layout-audit-1", json);
	ITEST_CHECK(rc == 0, "audit of converged data exited %d:\n%s", rc, out);
	all_clean(out);
	free(out);

	/* A move of e4 stopped after its copy: identical in both tables, its
	 * email entry and its key in the Turing list still there. */
	struct ecw_entity *e4 = person(3);
	ECW_ASSERT_OK(ecw_table_create(NULL, x->w.t->client, x->arch));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->w.t->client, x->arch, e4, ECW_WRITE_INSERT, NULL));
	ecw_entity_free(e4);
	rc = auditfx_run(&out, x->w.config, "layout-audit-2", repair);
	ITEST_CHECK(rc == 0, "audit --repair exited %d:\n%s", rc, out);
	auditfx_counts_are(out, "archive-employee", 0, 1, 0, 0, 1);
	free(out);

	/* One repair was enough. */
	rc = auditfx_run(&out, x->w.config, "layout-audit-3", json);
	ITEST_CHECK(rc == 0, "the audit after one repair exited %d:\n%s", rc, out);
	all_clean(out);
	free(out);
	struct ecw_entity *entry = itest_get_or_null(x->w.t->client, x->idx, "email", "alan.kay@example.com");
	ITEST_CHECK(entry == NULL, "the archived employee's email entry is left: %s",
	            itest_entity_json(entry));
	assert_null(itest_get_or_null(x->w.t->client, x->emp, "Sales", "e4"));
	struct ecw_entity *moved = itest_get_or_null(x->w.t->client, x->arch, "Sales", "e4");
	assert_non_null(moved);
	ecw_entity_free(moved);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_audit_layout__converged_audits_clean_and_one_repair_suffices,
	                                    fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests_name("audit_layout", tests, NULL, NULL);
}
