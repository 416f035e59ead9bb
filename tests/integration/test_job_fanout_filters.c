/* SPDX-License-Identifier: MIT */
/* test_job_fanout_filters.c - no key or value can change the structure of a
 * fanout filter (issue 20), against a real Azurite. Customers whose keys are
 * pieces of OData (`0 or true`, `x' or PartitionKey ne '`, `') or (1 eq 1`)
 * are fanned out to their orders through four filters: a placeholder inside
 * quotes ('{RowKey}'), one outside them ({RowKey} against a String property,
 * {No} against an Int32 one), and a key against an Int32 property (a string
 * literal that matches nothing). After every run, each order the run was meant
 * to reach carries the copy, and every other order is byte-identical to what
 * it was (same ETag, same properties). The runs are in this process (one per
 * job and customer, so a failure names the pair); the configuration cases run
 * the worker binary: check-config names the bad placeholder at FILE:LINE:COL
 * and `run` refuses to start. */
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_config.h"
#include "ecw_job.h"

/* t->table = Customers, t->table2 = Orders. */
static int fx_setup(void **state)
{
	*state = wfx_new(sizeof(struct wfx), WFX_QUEUE | WFX_TABLE | WFX_TABLE2);
	return 0;
}

static int fx_teardown(void **state)
{
	return wfx_teardown(state);
}

#define CUSTOMERS(x) ((x)->t->table)
#define ORDERS(x) ((x)->t->table2)
#define CPK "C" /* every customer's PartitionKey */

/* The customers: three whose keys are OData and a plain one. Customer i has
 * Name "Name i" and No 100 + i; its orders have CustId = its key and CustNo
 * = its No. */
static const char *const customers[] = {"0 or true", "x' or PartitionKey ne '", "') or (1 eq 1", "alice"};
#define NCUSTOMERS 4

/* The jobs: name, filter, the target property each writes (the customer's
 * Name), and which orders of customer c each is meant to reach. */
enum reach { BY_ID, BY_NO, NONE };
static const struct {
	const char *name, *filter, *field;
	enum reach reach;
} jobs[] = {
    {"quoted", "CustId eq '{RowKey}'", "QName", BY_ID},
    {"bare", "CustId eq {RowKey}", "BName", BY_ID},
    {"bare-int", "CustNo eq {No}", "NName", BY_NO},
    /* A string literal against an Int32: no order is reached, whatever the key. */
    {"key-vs-int", "CustNo eq {RowKey}", "KName", NONE},
};
#define NJOBS 4

static void config_text(char *out, size_t cap, struct wfx *x)
{
	size_t len = (size_t)snprintf(out, cap,
	                              "storage: {connection_string: \"${ECW_TEST_CONNECTION_STRING}\"}\n"
	                              "jobs:\n");
	for (int j = 0; j < NJOBS; j++) {
		int k = snprintf(out + len, cap - len,
		                 "  %s:\n    type: fanout\n    source: %s\n    table: %s\n"
		                 "    filter: \"%s\"\n    fields: {%s: Name}\n",
		                 jobs[j].name, CUSTOMERS(x), ORDERS(x), jobs[j].filter, jobs[j].field);
		assert_true(k > 0 && len + (size_t)k < cap);
		len += (size_t)k;
	}
}

static void put_customers(struct wfx *x)
{
	for (int i = 0; i < NCUSTOMERS; i++) {
		struct ecw_entity *e = NULL;
		char name[32];
		snprintf(name, sizeof(name), "Name %d", i);
		ECW_ASSERT_OK(ecw_entity_new(&e, CPK, customers[i]));
		ECW_ASSERT_OK(ecw_entity_set_string(e, "Name", name, strlen(name)));
		ECW_ASSERT_OK(ecw_entity_set_int32(e, "No", 100 + i));
		ECW_ASSERT_OK(
		    ecw_table_write(NULL, x->t->client, CUSTOMERS(x), e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
		ecw_entity_free(e);
	}
}

static void put_order(struct wfx *x, const char *pk, const char *rk, const char *cust_id, int cust_no)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "CustId", cust_id, strlen(cust_id)));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "CustNo", cust_no));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Note", "untouched", 9));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, ORDERS(x), e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

/* Two orders of each customer in two partitions, and bystanders that belong
 * to no customer here: what an injected `or true` would reach. */
static void put_orders(struct wfx *x)
{
	char rk[16];

	for (int i = 0; i < NCUSTOMERS; i++)
		for (int k = 0; k < 2; k++) {
			snprintf(rk, sizeof(rk), "o%d%d", i, k);
			put_order(x, k ? "shard-b" : "shard-a", rk, customers[i], 100 + i);
		}
	put_order(x, "shard-a", "b1", "bob", 7);
	put_order(x, "shard-b", "b2", "0", 0);
	put_order(x, "other", "b3", "x", 1);
}

/* Whether job j run for customer c is meant to reach order o (as it was). */
static bool reaches(int j, int c, const struct ecw_entity *o)
{
	const struct ecw_prop *id = ecw_entity_get(o, "CustId"), *no = ecw_entity_get(o, "CustNo");

	switch (jobs[j].reach) {
	case BY_ID: return id && strcmp(id->v.s, customers[c]) == 0;
	case BY_NO: return no && no->v.i32 == 100 + c;
	case NONE: return false;
	}
	return false;
}

/* Runs job j for customer c in this process, on the fixture's client. */
static int run_job(struct wfx *x, int j, int c)
{
	char text[4096];
	struct ecw_config *cfg = NULL;
	struct ecw_node_errors errs;
	int err;

	config_text(text, sizeof(text), x);
	ecw_node_errors_init(&errs);
	err = ecw_config_parse(&cfg, text, strlen(text), "filters.yaml", &errs);
	ITEST_CHECK(err == 0, "config: %s", errs.n ? errs.lines[0] : itest_last_error());
	ecw_node_errors_dispose(&errs);
	const struct ecw_job_def *def = ecw_config_job(cfg, jobs[j].name);
	assert_non_null(def);
	struct ecw_job_ctx ctx = {
	    .client = x->t->client,
	    .job = def->name,
	    .pk = CPK,
	    .rk = customers[c],
	    .trace_id = "filters",
	    .message_id = "filters",
	    .dequeue_count = 1,
	};
	ecw_error_clear();
	err = def->type->run(def->settings, &ctx);
	print_message("%s for \"%s\": %s %s\n", jobs[j].name, customers[c],
	              err < 0 ? ecw_error_name(err) : "ok",
	              err < 0 ? itest_last_error() : ctx.outcome_detail);
	ecw_config_free(cfg);
	return err;
}

/* Every order against its state before the run of job j for customer c: the
 * ones meant to be reached carry field = "Name c" and are otherwise as they
 * were; every other one is byte-identical (same ETag). Returns how many were
 * reached. */
static size_t check_only_targets_changed(struct wfx *x, struct ecw_entity **before, size_t n, int j, int c)
{
	size_t m = 0, reached = 0;
	struct ecw_entity **after = itest_query_all(&m, x->t->client, ORDERS(x), NULL);
	size_t changed_wrongly = 0;
	char name[32];

	snprintf(name, sizeof(name), "Name %d", c);
	assert_int_equal(m, n);
	for (size_t i = 0; i < n; i++) {
		const struct ecw_entity *o = before[i], *a = after[i];
		assert_string_equal(ecw_entity_pk(o), ecw_entity_pk(a));
		assert_string_equal(ecw_entity_rk(o), ecw_entity_rk(a));
		if (!reaches(j, c, o)) {
			bool same =
			    ecw_entity_equal(o, a) && strcmp(ecw_entity_etag(o), ecw_entity_etag(a)) == 0;
			if (!same)
				print_error("  %s/%s changed: %s\n", ecw_entity_pk(a), ecw_entity_rk(a),
				            itest_entity_json(a));
			changed_wrongly += !same;
			continue;
		}
		struct ecw_entity *want = NULL;
		ECW_ASSERT_OK(ecw_entity_clone(&want, o));
		ECW_ASSERT_OK(ecw_entity_set_string(want, jobs[j].field, name, strlen(name)));
		ITEST_CHECK(ecw_entity_equal(want, a), "%s for \"%s\": target %s/%s is %s", jobs[j].name,
		            customers[c], ecw_entity_pk(a), ecw_entity_rk(a), itest_entity_json(a));
		ecw_entity_free(want);
		reached++;
	}
	ITEST_CHECK(changed_wrongly == 0,
	            "%s (filter %s) for \"%s\": %zu of %zu orders that are not its targets changed",
	            jobs[j].name, jobs[j].filter, customers[c], changed_wrongly, n - reached);
	itest_entities_free(after, m);
	return reached;
}

static void test_job_fanout_filters__hostile_keys_reach_only_their_targets(void **state)
{
	struct wfx *x = *state;

	put_customers(x);
	put_orders(x);
	for (int j = 0; j < NJOBS; j++)
		for (int c = 0; c < NCUSTOMERS; c++) {
			size_t n = 0;
			struct ecw_entity **before = itest_query_all(&n, x->t->client, ORDERS(x), NULL);
			assert_int_equal(n, 2 * NCUSTOMERS + 3);
			int err = run_job(x, j, c);
			/* The table first: on a failed run, what it wrote before failing. */
			size_t reached = check_only_targets_changed(x, before, n, j, c);
			ECW_ASSERT_OK(err);
			assert_int_equal(reached, jobs[j].reach == NONE ? 0 : 2);
			itest_entities_free(before, n);
		}
}

/* ---- configuration: check-config and run, as the binary ------------------------------------------ */

static void test_job_fanout_filters__glued_placeholder_refused_at_its_position(void **state)
{
	struct wfx *x = *state;
	char path[640], want[800];
	char *out = NULL, *err = NULL;

	/* Line 7, column 13: the filter's value; the placeholder is at column
	 * 15 of the filter. */
	proc_write_file(path, sizeof(path), "filters-glued.yaml",
	                "storage:\n"
	                "  connection_string: ${ECW_TEST_CONNECTION_STRING}\n"
	                "jobs:\n"
	                "  glued:\n"
	                "    type: fanout\n"
	                "    source: Customers\n"
	                "    filter: \"CustId eq Cust{RowKey}\"\n"
	                "    table: Orders\n"
	                "    fields: {CustomerName: Name}\n");
	const char *check[] = {"check-config", "-c", path, NULL};
	int code = proc_run(&out, &err, "filters-check", check, NULL, 10000);
	snprintf(want, sizeof(want), "%s:7:13: filter: the placeholder at column 15 is outside quotes", path);
	ITEST_CHECK(code == 2 && strstr(err, want), "check-config exited %d, wanted 2 and '%s...' in:\n%s",
	            code, want, err);
	free(out);
	free(err);

	/* run refuses the same file before it touches the queue. */
	const char *run[] = {"run", "-c", path, NULL};
	code = proc_run(&out, &err, "filters-run", run, NULL, 10000);
	ITEST_CHECK(code == 2 && strstr(err, want), "run exited %d, wanted 2 and '%s...' in:\n%s", code, want,
	            err);
	free(out);
	free(err);
	(void)x;
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_fanout_filters__hostile_keys_reach_only_their_targets,
	                                    fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_job_fanout_filters__glued_placeholder_refused_at_its_position, fx_setup, fx_teardown),
	};
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("job_fanout_filters", tests, NULL, NULL);
}
