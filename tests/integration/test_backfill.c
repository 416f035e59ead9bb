/* SPDX-License-Identifier: MIT */
/* test_backfill.c - `ecworker backfill`: one message per source entity, the
 * filter, the pacing, the summary, and the worker building derived data from
 * what backfill enqueued. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "proc.h"

#define N_ENTITIES 120

static int setup(void **state)
{
	return itest_setup(state);
}

static int teardown(void **state)
{
	proc_cleanup();
	return itest_teardown(state);
}

/* archive: a move from the fixture's table to table2, on the fixture's queue. */
static void config(char *path, size_t cap, struct itest *t)
{
	char text[2048];
	int k = snprintf(text, sizeof(text),
	                 "storage:\n"
	                 "  connection_string: ${ECW_TEST_CONNECTION_STRING}\n"
	                 "worker:\n"
	                 "  queue: %s\n"
	                 "  poll_interval: {min: 50ms, max: 200ms}\n"
	                 "log: {level: info, format: json}\n"
	                 "metrics: {listen: \"\"}\n"
	                 "jobs:\n"
	                 "  archive: {type: move, from: %s, to: %s}\n",
	                 t->queue, t->table, t->table2);
	assert_true(k > 0 && (size_t)k < sizeof(text));
	proc_write_file(path, cap, "backfill.yaml", text);
}

/* N_ENTITIES employees: half in "Sales", half in "Ops", hostile row keys. */
static void fill_source(struct itest *t)
{
	struct ecw_batch *b[2] = {NULL, NULL};

	itest_table(t);
	t->table2_used = true;
	for (int i = 0; i < N_ENTITIES; i++) {
		struct ecw_entity *e = NULL;
		char rk[64];
		int part = i % 2;
		snprintf(rk, sizeof(rk), "o'brien %03d & co", i);
		if (!b[part])
			ECW_ASSERT_OK(ecw_batch_new(&b[part], t->table));
		ECW_ASSERT_OK(ecw_entity_new(&e, part ? "Ops" : "Sales", rk));
		ECW_ASSERT_OK(ecw_entity_set_int32(e, "N", i));
		ECW_ASSERT_OK(ecw_batch_add(b[part], ECW_BATCH_INSERT, e, NULL));
		ecw_entity_free(e);
		if (ecw_batch_count(b[part]) == 100) {
			ECW_ASSERT_OK(ecw_batch_submit(t->client, b[part]));
			ecw_batch_free(b[part]);
			b[part] = NULL;
		}
	}
	for (int p = 0; p < 2; p++)
		if (b[p]) {
			ECW_ASSERT_OK(ecw_batch_submit(t->client, b[p]));
			ecw_batch_free(b[p]);
		}
}

/* Receives every message on the queue (deleting them) and checks each is a
 * well-formed archive message for a distinct source entity. */
static int drain_messages(struct itest *t, const char *want_pk)
{
	char seen[N_ENTITIES] = {0};
	int total = 0;

	for (;;) {
		struct ecw_queue_msg *m = NULL;
		size_t n = 0;
		ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, t->queue, 32, 60));
		if (n == 0)
			break;
		for (size_t i = 0; i < n; i++) {
			struct json_object *o = json_tokener_parse(m[i].text), *v;
			int idx = -1;
			ITEST_CHECK(o != NULL, "not JSON: %s", m[i].text);
			assert_true(json_object_object_get_ex(o, "job", &v));
			assert_string_equal(json_object_get_string(v), "archive");
			assert_true(json_object_object_get_ex(o, "pk", &v));
			if (want_pk)
				assert_string_equal(json_object_get_string(v), want_pk);
			assert_true(json_object_object_get_ex(o, "rk", &v));
			ITEST_CHECK(sscanf(json_object_get_string(v), "o'brien %d & co", &idx) == 1 &&
			                idx >= 0 && idx < N_ENTITIES,
			            "bad rk %s", json_object_get_string(v));
			ITEST_CHECK(!seen[idx], "entity %d enqueued twice", idx);
			seen[idx] = 1;
			total++;
			json_object_put(o);
			ECW_ASSERT_OK(ecw_queue_delete(t->client, t->queue, m[i].id, m[i].pop_receipt));
		}
		ecw_queue_msgs_free(m, n);
	}
	return total;
}

static void test_backfill__one_message_per_entity(void **state)
{
	struct itest *t = *state;
	char cfg[512], *out = NULL;

	fill_source(t);
	config(cfg, sizeof(cfg), t);
	int code = proc_run(&out, NULL, "backfill-all",
	                    (const char *const[]){"backfill", "-c", cfg, "archive", NULL}, NULL, 60000);
	assert_int_equal(code, 0);
	ITEST_CHECK(strstr(out, "120 scanned, 120 enqueued, 0 failed") != NULL, "summary: %s", out);
	free(out);
	assert_int_equal(drain_messages(t, NULL), N_ENTITIES);
}

static void test_backfill__filter_selects(void **state)
{
	struct itest *t = *state;
	char cfg[512], *out = NULL;

	fill_source(t);
	config(cfg, sizeof(cfg), t);
	int code = proc_run(&out, NULL, "backfill-filter",
	                    (const char *const[]){"backfill", "-c", cfg, "archive", "--filter",
	                                          "PartitionKey eq 'Ops'", NULL},
	                    NULL, 60000);
	assert_int_equal(code, 0);
	ITEST_CHECK(strstr(out, "60 scanned, 60 enqueued") != NULL, "summary: %s", out);
	free(out);
	assert_int_equal(drain_messages(t, "Ops"), N_ENTITIES / 2);
}

/* --queue NAME puts the messages on that one of worker.queues (a bulk
 * queue), none on the first; a queue the configuration does not name is a
 * usage error. */
static void test_backfill__to_a_named_queue(void **state)
{
	struct itest *t = *state;
	char cfg[640], text[1024], *out = NULL;
	const char *bulk = itest_extra_queue(t, "bulk");
	char bulk_poison[96];
	long long n = -1;

	fill_source(t);
	snprintf(bulk_poison, sizeof(bulk_poison), "%s-p", bulk);
	itest_queue(t);
	int k = snprintf(text, sizeof(text),
	                 "storage:\n"
	                 "  connection_string: ${ECW_TEST_CONNECTION_STRING}\n"
	                 "worker:\n"
	                 "  create_missing: false\n"
	                 "  queues:\n"
	                 "    - {name: %s, weight: 4, poison_queue: %s}\n"
	                 "    - {name: %s, poison_queue: %s}\n"
	                 "log: {level: info, format: json}\n"
	                 "metrics: {listen: \"\"}\n"
	                 "jobs:\n"
	                 "  archive: {type: move, from: %s, to: %s}\n",
	                 t->queue, t->poison, bulk, bulk_poison, t->table, t->table2);
	assert_true(k > 0 && (size_t)k < sizeof(text));
	proc_write_file(cfg, sizeof(cfg), "backfill-queues.yaml", text);
	ECW_ASSERT_OK(ecw_queue_create(NULL, t->client, bulk));
	int code = proc_run(&out, NULL, "backfill-bulk",
	                    (const char *const[]){"backfill", "-c", cfg, "archive", "--filter",
	                                          "PartitionKey eq 'Ops'", "--queue", bulk, NULL},
	                    NULL, 60000);
	assert_int_equal(code, 0);
	ITEST_CHECK(strstr(out, "60 scanned, 60 enqueued") != NULL, "summary: %s", out);
	free(out);
	ECW_ASSERT_OK(ecw_queue_count(&n, t->client, bulk));
	assert_int_equal(n, N_ENTITIES / 2);
	ECW_ASSERT_OK(ecw_queue_count(&n, t->client, t->queue));
	assert_int_equal(n, 0);
	assert_int_equal(proc_run(NULL, NULL, "backfill-noqueue",
	                          (const char *const[]){"backfill", "-c", cfg, "archive", "--queue",
	                                                "no-such-queue", NULL},
	                          NULL, 60000),
	                 2);
}

/* --rate paces: 120 messages at 40/s cannot take less than ~2 s (one
 * second's worth may go at once). A lower bound only: a slow machine can't
 * fail it. */
static void test_backfill__rate_paces(void **state)
{
	struct itest *t = *state;
	char cfg[512];

	fill_source(t);
	config(cfg, sizeof(cfg), t);
	int64_t t0 = itest_now_ms();
	int code = proc_run(NULL, NULL, "backfill-rate",
	                    (const char *const[]){"backfill", "-c", cfg, "archive", "--rate", "40", NULL},
	                    NULL, 60000);
	int64_t ms = itest_now_ms() - t0;
	assert_int_equal(code, 0);
	ITEST_CHECK(ms >= 1900, "120 messages at 40/s took only %lld ms", (long long)ms);
	assert_int_equal(drain_messages(t, NULL), N_ENTITIES);
}

static void test_backfill__bad_input_exits_2(void **state)
{
	struct itest *t = *state;
	char cfg[512];

	config(cfg, sizeof(cfg), t);
	assert_int_equal(proc_run(NULL, NULL, "backfill-nojob",
	                          (const char *const[]){"backfill", "-c", cfg, "nope", NULL}, NULL, 20000),
	                 2);
	assert_int_equal(proc_run(NULL, NULL, "backfill-noarg",
	                          (const char *const[]){"backfill", "-c", cfg, NULL}, NULL, 20000),
	                 2);
	assert_int_equal(
	    proc_run(NULL, NULL, "backfill-rate0",
	             (const char *const[]){"backfill", "-c", cfg, "archive", "--rate", "0", NULL}, NULL,
	             20000),
	    2);
}

/* What backfill enqueues, the worker processes: every entity archived. */
static void test_backfill__worker_builds_from_backfill(void **state)
{
	struct itest *t = *state;
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	struct proc p;
	char cfg[512];
	int archived = 0;

	fill_source(t);
	config(cfg, sizeof(cfg), t);
	assert_int_equal(proc_run(NULL, NULL, "backfill-then-run",
	                          (const char *const[]){"backfill", "-c", cfg, "archive", NULL}, NULL, 60000),
	                 0);
	proc_start_worker(&p, "backfill-worker", cfg);
	ITEST_CHECK(proc_wait_count(&p, N_ENTITIES, 60000, "message", "outcome", "succeeded", NULL),
	            "the worker did not archive all %d", N_ENTITIES);
	proc_stop(&p, 10000);
	ECW_ASSERT_OK(ecw_table_query_new(&q, t->client, t->table2, NULL));
	while (ecw_table_query_next(&e, q) == 0 && e) {
		archived++;
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);
	assert_int_equal(archived, N_ENTITIES);
	ECW_ASSERT_OK(ecw_table_query_new(&q, t->client, t->table, NULL));
	ECW_ASSERT_OK(ecw_table_query_next(&e, q));
	assert_null(e); /* the source is empty */
	ecw_table_query_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_backfill__one_message_per_entity, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_backfill__filter_selects, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_backfill__to_a_named_queue, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_backfill__rate_paces, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_backfill__bad_input_exits_2, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_backfill__worker_builds_from_backfill, setup, teardown),
	};
	return cmocka_run_group_tests_name("backfill", tests, NULL, NULL);
}
