/* SPDX-License-Identifier: MIT */
/* test_audit_index_list.c - `ecworker audit` on an index-list job
 * (jobs/index_list_audit.c) as a process against Azurite: the job converges
 * through a worker (messages; indexlistfx.h), then its tables are changed
 * behind the worker's back, one change per kind of drift (a key taken out of
 * its list, a key whose source is gone, a key in the wrong list, a wrong
 * Count, an empty list, a source changed without a message); the audit
 * reports each kind (exit 3, the counts in --json), --repair fixes them
 * (exit 0), the list table then equals a full recomputation from the source
 * (il_check_index: every list exactly the sorted keys of its sources, Count
 * right, every reference committed with no intents), and a second audit
 * reports nothing (exit 0). And a --repair racing a worker that runs
 * messages for the same keys: the tables end consistent; and --via-queue,
 * whose messages the worker runs. The rules and the
 * repairs case by case are tests/unit/test_audit.c. */
#include "auditfx.h"
#include "indexlistfx.h"
#include "itest.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int audit(char **out, const char *config, const char *name, const char *a1, const char *a2)
{
	const char *args[] = {a1, a2, NULL};

	return auditfx_run(out, config, name, args);
}

static void counts_are(const char *out, long long missing, long long stale, long long orphan,
                       long long conflict, long long repaired)
{
	auditfx_counts_are(out, IL_JOB, missing, stale, orphan, conflict, repaired);
}

/* Writes list LastName=last behind the worker's back: Keys as given (the
 * job's JSON), Count count. */
static void list_put(struct wfx *x, const char *last, const char *keys, int32_t count)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, IL_LIST_PK, last));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Keys", keys, strlen(keys)));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Count", count));
	ECW_ASSERT_OK(
	    ecw_table_write(NULL, x->t->client, x->t->table2, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

/* Seven employees in four lists, indexed through messages by a worker that
 * is then stopped; config (640 bytes) gets the audit's configuration. */
static void converge(struct wfx *x, const char *name, char *config)
{
	struct il_wopts o = IL_WOPTS_DEFAULT;
	char audit_name[64];

	il_change(x, "Sales", "001", "Jones");
	il_change(x, "Sales", "002", "Jones");
	il_change(x, "Sales", "003", "Smith");
	il_change(x, "Ops", "004", "Smith");
	il_change(x, "Ops", "005", "Brown");
	il_change(x, "Ops", "006", "Lee");
	il_change(x, "Ops", "007", "Lee");
	il_run_worker(x, name, 7, 4);
	assert_int_equal(il_check_index(x), 4);
	snprintf(audit_name, sizeof(audit_name), "%s-audit", name);
	il_write_config(config, 640, x, audit_name, &o);
}

/* Each kind of drift, found, repaired, and gone on a second audit. */
static void test_audit_index_list__finds_repairs_and_converges(void **state)
{
	struct wfx *x = *state;
	char config[640], *out = NULL;

	converge(x, "ail", config);
	/* missing: 001 taken out of Jones */
	list_put(x, "Jones", "[[\"Sales\",\"002\"]]", 1);
	/* orphan: a key whose source is gone, in Smith */
	list_put(x, "Smith", "[[\"Ops\",\"004\"],[\"Sales\",\"003\"],[\"Sales\",\"gone\"]]", 3);
	/* stale: 003 in the wrong list as well */
	list_put(x, "Brown", "[[\"Ops\",\"005\"],[\"Sales\",\"003\"]]", 2);
	/* stale: Lee's Count wrong */
	list_put(x, "Lee", "[[\"Ops\",\"006\"],[\"Ops\",\"007\"]]", 5);
	/* orphan: an empty list left behind */
	list_put(x, "Empty", "[]", 0);
	/* missing (no Green list) and stale (007 still in Lee): a change
	 * without its message */
	il_emp_set(x, "Ops", "007", "Green");

	assert_int_equal(audit(&out, config, "ail-json", "--json", NULL), 3);
	counts_are(out, 2, 3, 2, 0, 0);
	free(out);

	/* The repairs go as the scan goes: 007's run (pass 1, sources first)
	 * takes it out of Lee and rewrites Lee with its Count, so pass 2 finds
	 * neither of those two. */
	assert_int_equal(audit(&out, config, "ail-repair", "--repair", "--json"), 0);
	counts_are(out, 2, 1, 2, 0, 5);
	free(out);
	assert_int_equal(il_check_index(x), 5);
	il_expect_list(x, "Green", "[[\"Ops\",\"007\"]]");
	il_expect_list(x, "Brown", "[[\"Ops\",\"005\"]]");
	il_expect_list(x, "Empty", NULL);
	struct ecw_entity *ref = il_get_ref(x, "Sales", "gone");
	ITEST_CHECK(ref == NULL, "the gone source's reference was left behind");

	assert_int_equal(audit(&out, config, "ail-again", "--json", NULL), 0);
	counts_are(out, 0, 0, 0, 0, 0);
	free(out);
	proc_assert_logs_clean();
}

/* --repair while a worker runs messages changing the same employees (with a
 * pause after each step, so that their runs overlap the audit's): whatever
 * the interleaving, once the queue drains the tables equal a recomputation
 * and a second audit finds nothing. The stray keys are in lists no
 * reference names: only the audit's repair can clean them. */
static void test_audit_index_list__repair_races_a_worker(void **state)
{
	struct wfx *x = *state;
	struct il_wopts o = IL_WOPTS_DEFAULT;
	struct proc p;
	char config[640], *out = NULL;
	static const char *const lasts[] = {"Jones", "Smith", "Lee"};
	int code;

	converge(x, "ail-race", config);
	list_put(x, "Brown", "[[\"Ops\",\"005\"],[\"Sales\",\"001\"],[\"Sales\",\"003\"]]", 3);
	list_put(x, "Jones", "[[\"Sales\",\"002\"]]", 1);
	o.jitter_ms = 5;
	o.concurrency = 2;
	il_start_worker(&p, x, "ail-race-worker", &o, NULL);
	for (int round = 0; round < 6; round++) {
		il_change(x, "Sales", "001", lasts[round % 3]);
		il_change(x, "Sales", "003", lasts[(round + 1) % 3]);
		il_change(x, "Ops", "004", lasts[(round + 2) % 3]);
	}
	code = audit(&out, config, "ail-race-repair", "--repair", "--json");
	ITEST_CHECK(code == 0 || code == 3, "audit --repair exited %d", code);
	free(out);
	il_wait_drained(x, x->t->queue, &p, 1, 20000);
	proc_stop(&p, 10000);

	assert_int_equal(audit(&out, config, "ail-race-again", "--json", NULL), 0);
	counts_are(out, 0, 0, 0, 0, 0);
	free(out);
	il_check_index(x);
	il_expect_list(x, "Brown", "[[\"Ops\",\"005\"]]");
	proc_assert_logs_clean();
}

/* --repair --via-queue: each repair is the job's message for its source (a
 * stray key's list registered first, here); the worker's runs repair it. */
static void test_audit_index_list__via_queue_repairs_through_the_worker(void **state)
{
	struct wfx *x = *state;
	char config[640], *out = NULL;

	converge(x, "ail-vq", config);
	list_put(x, "Jones", "[[\"Sales\",\"002\"]]", 1);
	list_put(x, "Brown", "[[\"Ops\",\"005\"],[\"Sales\",\"003\"]]", 2);

	assert_int_equal(audit(&out, config, "ail-vq", "--repair", "--via-queue"), 0);
	free(out);
	/* Nothing repaired yet but the registration: 003 is still in Brown. */
	il_expect_list(x, "Brown", "[[\"Ops\",\"005\"],[\"Sales\",\"003\"]]");
	il_run_worker(x, "ail-vq-worker", 2, 2);
	il_expect_list(x, "Brown", "[[\"Ops\",\"005\"]]");
	assert_int_equal(il_check_index(x), 4);
	assert_int_equal(audit(&out, config, "ail-vq-again", "--json", NULL), 0);
	counts_are(out, 0, 0, 0, 0, 0);
	free(out);
	proc_assert_logs_clean();
}

/* --via-queue --queue NAME: the repairs' messages go to that one of
 * worker.queues, none to the first. The config is the fixture's with its one
 * queue made the first of two. */
static void test_audit_index_list__via_queue_to_a_named_queue(void **state)
{
	struct wfx *x = *state;
	char config[640], text[8192], with_queues[8192], *out = NULL, line[512];
	const char *bulk = itest_extra_queue(x->t, "bulk");
	char bulk_poison[96];
	long long n = -1;
	FILE *f;
	size_t len;

	converge(x, "ail-vqn", config);
	list_put(x, "Jones", "[[\"Sales\",\"002\"]]", 1);
	list_put(x, "Brown", "[[\"Ops\",\"005\"],[\"Sales\",\"003\"]]", 2);
	assert_non_null(f = fopen(config, "r"));
	len = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[len] = '\0';
	snprintf(line, sizeof(line), "  queue: %s\n  poison_queue: %s\n", x->t->queue, x->poison);
	char *at = strstr(text, line);
	assert_non_null(at);
	snprintf(bulk_poison, sizeof(bulk_poison), "%s-p", bulk);
	snprintf(with_queues, sizeof(with_queues),
	         "%.*s  queues:\n    - {name: %s, poison_queue: %s}\n    - {name: %s, poison_queue: %s}\n%s",
	         (int)(at - text), text, x->t->queue, x->poison, bulk, bulk_poison, at + strlen(line));
	proc_write_file(config, sizeof(config), "ail-vqn-queues.yaml", with_queues);

	const char *args[] = {"--repair", "--via-queue", "--queue", bulk, NULL};
	assert_int_equal(auditfx_run(&out, config, "ail-vqn", args), 0);
	free(out);
	ECW_ASSERT_OK(ecw_queue_count(&n, x->t->client, bulk));
	ITEST_CHECK(n >= 2, "%lld repair messages on %s, expected those of 002 and 003", n, bulk);
	ECW_ASSERT_OK(ecw_queue_count(&n, x->t->client, x->t->queue));
	assert_int_equal(n, 0);
	const char *alone[] = {"--queue", bulk, NULL};
	assert_int_equal(auditfx_run(NULL, config, "ail-vqn-alone", alone), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_audit_index_list__finds_repairs_and_converges, il_setup,
	                                    il_teardown),
	    cmocka_unit_test_setup_teardown(test_audit_index_list__repair_races_a_worker, il_setup,
	                                    il_teardown),
	    cmocka_unit_test_setup_teardown(test_audit_index_list__via_queue_repairs_through_the_worker,
	                                    il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_audit_index_list__via_queue_to_a_named_queue, il_setup,
	                                    il_teardown),
	};
	return cmocka_run_group_tests_name("audit_index_list", tests, NULL, NULL);
}
