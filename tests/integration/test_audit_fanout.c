/* SPDX-License-Identifier: MIT */
/* test_audit_fanout.c - `ecworker audit` of fanout jobs as a process against
 * Azurite: customers (the source) whose Name is copied into their orders (the
 * targets, selected by CustomerId eq '{RowKey}', spread over two partitions)
 * by two jobs, `names` (as CustomerName, on_delete: clear) and `kept` (as
 * KeptName, on_delete: keep), converged through messages by a worker. Then,
 * behind the worker's back, a customer is renamed, one order's copy is edited
 * and a customer is deleted, all without a message: the audit reports the
 * stale targets and, for `names` only, the orphan copies of the deleted
 * customer (exit 3, the counts in --json); --repair fixes them (exit 0) and
 * leaves every order equal to a recomputation from the customers; a second
 * audit finds nothing. A job whose filter the keys do not invert reports the
 * limit instead of pretending it checked orphans. The comparison rule, the
 * filter's inversion and the scans case by case are unit-tested
 * (tests/unit/test_audit.c, tests/unit/test_template.c). */
#include "auditfx.h"
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CPK "C" /* every customer's PartitionKey */
#define CUSTOMERS(x) ((x)->t->table)
#define ORDERS(x) ((x)->t->table2)

static int setup(void **state)
{
	*state = wfx_new(sizeof(struct wfx), WFX_QUEUE | WFX_TABLE | WFX_TABLE2);
	return 0;
}

/* The worker's and the audit's config; returns the metrics port. */
static int write_config(struct wfx *x, const char *name)
{
	char jobs[2048];
	int k = snprintf(jobs, sizeof(jobs),
	                 "  names:\n"
	                 "    type: fanout\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    filter: \"CustomerId eq '{RowKey}'\"\n"
	                 "    fields: {CustomerName: Name}\n"
	                 "    on_delete: clear\n"
	                 "  kept:\n"
	                 "    type: fanout\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    filter: \"CustomerId eq '{RowKey}'\"\n"
	                 "    fields: {KeptName: Name}\n"
	                 "    on_delete: keep\n"
	                 "  either:\n"
	                 "    type: fanout\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    filter: \"Ref eq '{RowKey}' or Ref eq 'old-{RowKey}'\"\n"
	                 "    fields: {RefName: Name}\n"
	                 "    on_delete: clear\n",
	                 CUSTOMERS(x), ORDERS(x), CUSTOMERS(x), ORDERS(x), CUSTOMERS(x), ORDERS(x));

	assert_true(k > 0 && (size_t)k < sizeof(jobs));
	return wfx_job_config(x, name, 30, 4, jobs);
}

static void put_customer(struct wfx *x, const char *rk, const char *name)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, CPK, rk));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Name", name, strlen(name)));
	ECW_ASSERT_OK(
	    ecw_table_write(NULL, x->t->client, CUSTOMERS(x), e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

static void put_order(struct wfx *x, const char *pk, const char *rk, const char *customer)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "CustomerId", customer, strlen(customer)));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Amount", 5));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, ORDERS(x), e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

static void put_message(struct wfx *x, const char *job, const char *customer)
{
	char text[128];
	int k =
	    snprintf(text, sizeof(text), "{\"job\":\"%s\",\"pk\":\"%s\",\"rk\":\"%s\"}", job, CPK, customer);

	assert_true(k > 0 && (size_t)k < sizeof(text));
	ECW_ASSERT_OK(ecw_queue_put(NULL, x->t->client, x->t->queue, text, strlen(text), NULL));
}

/* c1 (three orders), c2 (two), c3 (two), the orders over two partitions,
 * fanned out by both jobs through messages. */
static void converge(struct wfx *x)
{
	static const char *const customers[] = {"c1", "c2", "c3"};
	static const struct {
		const char *pk, *rk, *customer;
	} orders[] = {{"P1", "o1", "c1"}, {"P2", "o2", "c1"}, {"P2", "o3", "c1"}, {"P1", "o4", "c2"},
	              {"P2", "o5", "c2"}, {"P1", "o6", "c3"}, {"P2", "o7", "c3"}};

	put_customer(x, "c1", "Ann");
	put_customer(x, "c2", "Bob");
	put_customer(x, "c3", "Cy");
	for (size_t i = 0; i < sizeof(orders) / sizeof(orders[0]); i++)
		put_order(x, orders[i].pk, orders[i].rk, orders[i].customer);
	for (size_t i = 0; i < 3; i++) {
		put_message(x, "names", customers[i]);
		put_message(x, "kept", customers[i]);
	}
	wfx_run(x, "audit-fo-worker", write_config(x, "audit-fo-worker"), 6, 30000, NULL);
	write_config(x, "audit-fo");
}

/* A string property of an order, NULL when absent. */
static const char *str(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);

	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

static bool same(const char *a, const char *b)
{
	return a && b ? strcmp(a, b) == 0 : a == b;
}

/* Every order as a recomputation from the customers gives it: CustomerName
 * its customer's Name, absent once the customer is gone (clear); KeptName
 * the Name, or what it was when a customer is gone (keep: kept_c3). Returns
 * the number of orders. */
static size_t check_recomputed(struct wfx *x, const char *kept_c3)
{
	size_t n = 0;
	struct ecw_entity **orders = itest_query_all(&n, x->t->client, ORDERS(x), NULL);

	for (size_t i = 0; i < n; i++) {
		const char *cust = str(orders[i], "CustomerId");
		struct ecw_entity *c = NULL;
		int err = ecw_table_get(&c, x->t->client, CUSTOMERS(x), CPK, cust);
		if (err == ECW_ENOTFOUND) {
			ecw_error_clear();
			c = NULL;
		} else {
			ECW_ASSERT_OK(err);
		}
		const char *name = c ? str(c, "Name") : NULL;
		const char *kept = c ? name : strcmp(cust, "c3") == 0 ? kept_c3 : NULL;
		ITEST_CHECK(same(str(orders[i], "CustomerName"), name) &&
		                same(str(orders[i], "KeptName"), kept) &&
		                !ecw_entity_get(orders[i], "RefName"),
		            "order %s/%s of %s: CustomerName %s KeptName %s, recomputed %s %s",
		            ecw_entity_pk(orders[i]), ecw_entity_rk(orders[i]), cust,
		            str(orders[i], "CustomerName") ? str(orders[i], "CustomerName") : "(none)",
		            str(orders[i], "KeptName") ? str(orders[i], "KeptName") : "(none)",
		            name ? name : "(none)", kept ? kept : "(none)");
		ecw_entity_free(c);
	}
	itest_entities_free(orders, n);
	return n;
}

static int audit(struct wfx *x, char **out, const char *name, const char *const *args)
{
	return auditfx_run(out, x->config, name, args);
}

/* The counts of job's line, and how many limits it names. */
static void counts_are(const char *out, const char *job, long long stale, long long orphan,
                       long long repaired, size_t limits)
{
	struct json_object *o = auditfx_job_line(out, job), *l = NULL;

	ITEST_CHECK(json_object_object_get_ex(o, "limits", &l) && json_object_is_type(l, json_type_array),
	            "no limits array in %s", json_object_to_json_string(o));
	if (auditfx_field(o, "missing") != 0 || auditfx_field(o, "stale") != stale ||
	    auditfx_field(o, "orphan") != orphan || auditfx_field(o, "conflict") != 0 ||
	    auditfx_field(o, "repaired") != repaired || json_object_array_length(l) != limits)
		fail_msg("%s: got %s; want stale %lld orphan %lld repaired %lld, %zu limits", job,
		         json_object_to_json_string(o), stale, orphan, repaired, limits);
	json_object_put(o);
}

static void test_audit_fanout__finds_repairs_and_converges(void **state)
{
	struct wfx *x = *state;
	struct ecw_entity *e = NULL;
	char *out = NULL;

	converge(x);
	assert_int_equal(check_recomputed(x, "Cy"), 7);
	{
		const char *args[] = {"--json", "names", "kept", NULL};
		assert_int_equal(audit(x, &out, "audit-fo-clean", args), 0);
		counts_are(out, "names", 0, 0, 0, 0);
		counts_are(out, "kept", 0, 0, 0, 0);
		free(out);
	}

	/* Behind the worker's back: c1 renamed (its three orders stale, for
	 * both jobs), o5's copy edited (stale for names), c3 deleted (its two
	 * orders keep copies: orphans for names, by design for kept). */
	put_customer(x, "c1", "Anna");
	ECW_ASSERT_OK(ecw_table_get(&e, x->t->client, ORDERS(x), "P2", "o5"));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "CustomerName", "Robert", 6));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, ORDERS(x), e, ECW_WRITE_UPDATE, "*"));
	ecw_entity_free(e);
	ECW_ASSERT_OK(ecw_table_delete(x->t->client, CUSTOMERS(x), CPK, "c3", "*"));

	const char *json[] = {"--json", "names", "kept", NULL};
	assert_int_equal(audit(x, &out, "audit-fo-found", json), 3);
	counts_are(out, "names", 4, 2, 0, 0);
	counts_are(out, "kept", 3, 0, 0, 0);
	free(out);

	/* The human report: examples with their sources; the filter binds
	 * only RowKey, so an orphan names its gone source by that ("" for the
	 * PartitionKey, which the filter does not use). */
	const char *human[] = {"names", NULL};
	assert_int_equal(audit(x, &out, "audit-fo-human", human), 3);
	ITEST_CHECK(strstr(out, "P1/o1 (source C/c1)") && strstr(out, "P2/o5 (source C/c2)") &&
	                strstr(out, "P1/o6 (source /c3)") && !strstr(out, "limit:"),
	            "examples:\n%s", out);
	free(out);

	const char *repair[] = {"--json", "--repair", "names", "kept", NULL};
	assert_int_equal(audit(x, &out, "audit-fo-repair", repair), 0);
	counts_are(out, "names", 4, 2, 6, 0);
	counts_are(out, "kept", 3, 0, 3, 0);
	free(out);
	assert_int_equal(check_recomputed(x, "Cy"), 7);

	assert_int_equal(audit(x, &out, "audit-fo-again", json), 0);
	counts_are(out, "names", 0, 0, 0, 0);
	counts_are(out, "kept", 0, 0, 0, 0);
	free(out);
	proc_assert_logs_clean();
}

/* A filter the keys do not invert (an or at its top): the targets' pass
 * cannot run, and the report says so, in --json and in the table. */
static void test_audit_fanout__uninvertible_filter_is_a_limit(void **state)
{
	struct wfx *x = *state;
	char *out = NULL;

	put_customer(x, "c1", "Ann");
	put_order(x, "P1", "o1", "c1");
	write_config(x, "audit-fo-limit");
	const char *json[] = {"--json", "either", NULL};
	assert_int_equal(audit(x, &out, "audit-fo-limit-json", json), 0);
	counts_are(out, "either", 0, 0, 0, 1);
	ITEST_CHECK(strstr(out, "orphans not checked") != NULL, "%s", out);
	free(out);
	const char *human[] = {"either", NULL};
	assert_int_equal(audit(x, &out, "audit-fo-limit-human", human), 0);
	ITEST_CHECK(strstr(out, "  limit: orphans not checked") != NULL, "%s", out);
	free(out);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_audit_fanout__finds_repairs_and_converges, setup,
	                                    wfx_teardown),
	    cmocka_unit_test_setup_teardown(test_audit_fanout__uninvertible_filter_is_a_limit, setup,
	                                    wfx_teardown),
	};
	return cmocka_run_group_tests_name("audit_fanout", tests, NULL, NULL);
}
