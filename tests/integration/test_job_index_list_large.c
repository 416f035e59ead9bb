/* SPDX-License-Identifier: MIT */
/* test_job_index_list_large.c - index lists past one property and one entity
 * (jobs/index_list_store.c), run by real workers against Azurite: one hot
 * value grown by two competing workers from one property to several to a
 * head and pages, then shrunk back to nothing, the whole list table equal
 * to a recomputation at each step (il_check_index reads a list as the
 * jobs/README.md's reader does) and nothing poisoned; and a worker killed after
 * every step of a change of a list that spans entities, the rerun ending
 * consistent. The workers run with small chunks and entities
 * (ECW_TEST_IL_CHUNK_UNITS 2,000 units, ECW_TEST_IL_ENTITY_CHUNKS 4; the
 * store's real limits are 32,000 and 15), so that a few hundred keys of the
 * bench's shape span properties and pages and the test moves kilobytes:
 * the layout rules are the same at any size (tests/unit/test_index_list_store.c
 * checks the real limits). */
#include "indexlistfx.h"
#include "itest.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Employee i of the hot value, keys of the bench's shape: ["Dept 3","jones 000123"]. */
static void emp_keys(char pk[512], char rk[512], size_t i)
{
	snprintf(pk, 512, "Dept %zu", i % 7);
	snprintf(rk, 512, "jones %06zu", i);
}

static size_t list_entities(struct wfx *x)
{
	struct ecw_query_options o = {.filter = "PartitionKey eq 'lastname' and RowKey ge 'Jones' and "
	                                        "RowKey lt 'Jonet'",
	                              .select = "RowKey"};
	struct ecw_table_query *q = NULL;
	size_t n = 0;

	ECW_ASSERT_OK(ecw_table_query_new(&q, x->t->client, x->t->table2, &o));
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		n++;
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);
	return n;
}

/* Employees [from, to) set to last (NULL: deleted), then two workers x 8
 * until the queue drains; nothing poisoned; the index recomputed. */
static void step(struct wfx *x, const char *name, size_t from, size_t to, const char *last)
{
	struct il_wopts o = IL_WOPTS_DEFAULT;
	struct proc p[2];
	char pk[512], rk[512], wname[64];

	for (size_t i = from; i < to; i++) {
		emp_keys(pk, rk, i);
		il_change(x, pk, rk, last);
	}
	o.concurrency = 8;
	for (int w = 0; w < 2; w++) {
		snprintf(wname, sizeof(wname), "%s-%d", name, w);
		il_start_worker(&p[w], x, wname, &o, NULL);
	}
	il_wait_drained(x, x->t->queue, p, 2, 120000);
	for (int w = 0; w < 2; w++)
		proc_stop(&p[w], 10000);
	assert_int_equal(il_queue_count(x, x->poison), 0);
	il_check_index(x);
}

static const char *const POINTS[] = {"index_list.read",    "index_list.intent", "index_list.added",
                                     "index_list.removed", "index_list.ref",    NULL};

/* A worker that must die at point. */
static void crash_at(struct wfx *x, const char *name, const char *point)
{
	struct il_wopts o = {.concurrency = 1, .visibility_s = 2, .max_dequeue = 20};
	struct proc p;

	il_start_worker(&p, x, name, &o, point);
	ITEST_CHECK(proc_wait(&p, 30000), "%s: the worker did not die", point);
	ITEST_CHECK(proc_exit_code(&p) == 86, "%s: exit status %d; log:\n%s", point, proc_exit_code(&p),
	            proc_tail(p.log_path, 20));
}

/* Each crash point, on a change of the list that spans entities: a key
 * leaves it (moves to Smith), a new one joins it (no removal: not at
 * .removed); the redeliveries then run to the end. */
static void crashes(struct wfx *x)
{
	char pk[512], rk[512], name[64];

	for (size_t k = 0; POINTS[k]; k++) {
		emp_keys(pk, rk, 10 + 40 * k);
		il_change(x, pk, rk, "Smith");
		snprintf(name, sizeof(name), "crash-%zu", k);
		crash_at(x, name, POINTS[k]);
		if (strcmp(POINTS[k], "index_list.removed") != 0) {
			emp_keys(pk, rk, 700 + k);
			il_change(x, pk, rk, "Jones");
			snprintf(name, sizeof(name), "crash-new-%zu", k);
			crash_at(x, name, POINTS[k]);
		}
		step(x, "rerun", 0, 0, "Jones");
	}
}

static void test_job_index_list_large__grows_to_pages_crashes_and_back(void **state)
{
	struct wfx *x = *state;
	struct ecw_entity *head;
	size_t most;

	step(x, "grow-1", 0, 20, "Jones"); /* one property */
	head = il_get_or_null(x, x->t->table2, IL_LIST_PK, "Jones");
	ITEST_CHECK(head && !ecw_entity_get(head, "Keys2"), "20 keys should fit one property");
	ecw_entity_free(head);

	step(x, "grow-2", 20, 80, "Jones"); /* several properties */
	head = il_get_or_null(x, x->t->table2, IL_LIST_PK, "Jones");
	ITEST_CHECK(head && ecw_entity_get(head, "Keys2") && !ecw_entity_get(head, "Pages"),
	            "80 keys: several properties of one entity");
	ecw_entity_free(head);

	step(x, "grow-3", 80, 560, "Jones"); /* a head and pages */
	most = list_entities(x);
	ITEST_CHECK(most >= 2, "560 keys: a head and pages, found %zu entities", most);

	crashes(x);

	step(x, "shrink", 0, 450, NULL); /* pages join and go */
	ITEST_CHECK(list_entities(x) < most, "fewer keys, as many entities: %zu", list_entities(x));
	step(x, "delete", 450, 705, NULL); /* all gone: no list */
	assert_int_equal(list_entities(x), 0);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_index_list_large__grows_to_pages_crashes_and_back,
	                                    il_setup, il_teardown),
	};
	setenv("ECW_TEST_IL_CHUNK_UNITS", "2000", 1); /* the workers inherit them */
	setenv("ECW_TEST_IL_ENTITY_CHUNKS", "4", 1);
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
