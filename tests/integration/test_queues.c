/* SPDX-License-Identifier: MIT */
/* test_queues.c - several job queues with weights (worker.queues) on a real
 * Azurite: with both backlogged, receives are shared by weight (4:1); each
 * queue's failures go to its own poison queue; pausing one leaves the other
 * running; an idle queue costs only its looks; enqueue --queue. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_storage.h"
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

struct two {
	struct itest *t;
	char a[96], b[96], pa[112], pb[112];
	char path[640];
	int port;
};

static int two_setup(void **state)
{
	struct two *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	if (itest_setup((void **)&x->t) != 0)
		return -1;
	snprintf(x->a, sizeof(x->a), "%s-a", x->t->queue);
	snprintf(x->b, sizeof(x->b), "%s-b", x->t->queue);
	snprintf(x->pa, sizeof(x->pa), "%s-poison", x->a);
	snprintf(x->pb, sizeof(x->pb), "%s-poison", x->b);
	*state = x;
	return 0;
}

static int two_teardown(void **state)
{
	struct two *x = *state;
	const char *qs[] = {x->a, x->b, x->pa, x->pb};

	proc_cleanup();
	for (size_t i = 0; i < 4; i++)
		(void)!ecw_queue_delete_queue(x->t->client, qs[i]);
	itest_teardown((void **)&x->t);
	free(x);
	return 0;
}

/* A worker on queues a (weight wa) and b (weight 1). */
static void config(struct two *x, const char *name, int wa, int batch, int concurrency)
{
	char extra[512];
	struct wfx_worker w = WFX_WORKER(x->a, x->pa);

	snprintf(extra, sizeof(extra), "  queues:\n    - {name: %s, weight: %d}\n    - {name: %s}\n", x->a,
	         wa, x->b);
	w.queue = NULL; /* worker.queues instead */
	w.worker_extra = extra;
	w.batch_size = batch;
	w.concurrency = concurrency;
	w.metrics_port = x->port = proc_free_port();
	w.jobs = "  a-noop: {type: test-noop}\n  b-noop: {type: test-noop}\n  b-fail: {type: test-fail}\n";
	wfx_write_config(x->path, sizeof(x->path), name, &w);
}

static void put_n(struct two *x, const char *queue, const char *job, int n)
{
	char text[128];

	ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, queue));
	for (int i = 0; i < n; i++) {
		int k = snprintf(text, sizeof(text), "{\"job\":\"%s\",\"pk\":\"p\",\"rk\":\"%s-%04d\"}", job,
		                 job, i);
		ECW_ASSERT_OK(ecw_queue_put(NULL, x->t->client, queue, text, (size_t)k, NULL));
	}
}

/* Both backlogged: of the first 200 messages run, about 4 in 5 are a's. */
static void test_queues__shares_by_weight(void **state)
{
	struct two *x = *state;
	struct proc p;
	struct proc_log log;
	size_t a = 0, b = 0;

	put_n(x, x->a, "a-noop", 400);
	put_n(x, x->b, "b-noop", 150);
	config(x, "queues-weight", 4, 4, 1);
	const char *args[] = {"run", "-c", x->path, NULL};
	proc_start(&p, "queues-weight", args, NULL);
	PROC_EXPECT_LOG(&p, 200, 60000, "message", "outcome", "succeeded");
	proc_log_read(&log, p.log_path);
	for (size_t i = 0; i < 200; i++) {
		struct json_object *line = proc_log_find(&log, i, "message", "outcome", "succeeded", NULL);
		const char *job = proc_field(line, "job");
		a += strcmp(job, "a-noop") == 0;
		b += strcmp(job, "b-noop") == 0;
	}
	proc_log_dispose(&log);
	printf("# weights 4:1, both backlogged: of the first 200 messages %zu from a, %zu from b (%.2f:1)\n",
	       a, b, b ? (double)a / (double)b : 0.0);
	ITEST_CHECK(a + b == 200 && a >= 150 && a <= 170, "a %zu, b %zu of the first 200: not about 4:1", a,
	            b);
	proc_stop(&p, 10000);
}

/* A failure on b goes to b's poison queue; pausing b leaves a running. */
static void test_queues__own_poison_and_pause(void **state)
{
	struct two *x = *state;
	struct proc p;
	long long n = -1;
	char id[64];

	put_n(x, x->b, "b-fail", 1);
	config(x, "queues-poison", 2, 16, 2);
	const char *args[] = {"run", "-c", x->path, NULL};
	proc_start(&p, "queues-poison", args, NULL);
	PROC_EXPECT_LOG(&p, 1, 20000, "message", "outcome", "poisoned");
	ECW_ASSERT_OK(ecw_queue_count(&n, x->t->client, x->pb));
	assert_int_equal(n, 1);
	ECW_ASSERT_OK(ecw_queue_count(&n, x->t->client, x->pa));
	assert_int_equal(n, 0);

	const char *pause[] = {"pause", "-c", x->path, "--queue", x->b, NULL};
	char *out = NULL, *err = NULL;
	assert_int_equal(proc_run(&out, &err, "queues-pause", pause, NULL, 20000), 0);
	free(out);
	free(err);
	PROC_EXPECT_LOG(&p, 1, 15000, "queue_paused", "queue", x->b);
	put_n(x, x->b, "b-noop", 1);
	const char *enq[] = {"enqueue", "-c", x->path, "--queue", x->a, "a-noop", "p", "via-cli", NULL};
	out = NULL;
	assert_int_equal(proc_run(&out, NULL, "queues-enqueue", enq, NULL, 20000), 0);
	snprintf(id, sizeof(id), "%s", out ? out : "");
	id[strcspn(id, "\n")] = '\0';
	free(out);
	PROC_EXPECT_LOG(&p, 1, 10000, "message", "message_id", id, "outcome", "succeeded");
	itest_sleep_ms(1500);
	assert_int_equal(proc_count(&p, "message", "job", "b-noop", NULL), 0); /* b is paused */
	const char *bad[] = {"enqueue", "-c", x->path, "--queue", "not-configured", "a-noop", "p", "r", NULL};
	assert_int_equal(proc_run(NULL, NULL, "queues-enqueue-bad", bad, NULL, 20000), 2);

	/* The operator's commands take --queue: b's poison queue holds the
	 * envelope, a's none; status shows b paused and lists both queues. */
	const char *list_b[] = {"poison", "list", "-c", x->path, "--queue", x->b, "--json", NULL};
	const char *list_a[] = {"poison", "list", "-c", x->path, "--queue", x->a, "--json", NULL};
	out = NULL;
	assert_int_equal(proc_run(&out, NULL, "queues-poison-b", list_b, NULL, 20000), 0);
	ITEST_CHECK(out && strstr(out, "b-fail") && strchr(out, '\n') == strrchr(out, '\n'),
	            "poison list --queue b:\n%s", out ? out : "");
	free(out);
	out = NULL;
	assert_int_equal(proc_run(&out, NULL, "queues-poison-a", list_a, NULL, 20000), 0);
	ITEST_CHECK(!out || !strstr(out, "b-fail"), "poison list --queue a shows b's envelope:\n%s", out);
	free(out);
	const char *status_b[] = {"status", "-c", x->path, "--queue", x->b, NULL};
	out = NULL;
	assert_int_equal(proc_run(&out, NULL, "queues-status-b", status_b, NULL, 20000), 0);
	ITEST_CHECK(out && strstr(out, "PAUSED") && strstr(out, "(weight 2)"), "status --queue b:\n%s",
	            out ? out : "");
	free(out);
	/* Without --queue: a in detail, and every queue at a glance, b's held
	 * message, its pause and its poisoned one among them. */
	const char *status_json[] = {"status", "-c", x->path, "--json", NULL};
	out = NULL;
	assert_int_equal(proc_run(&out, NULL, "queues-status-json", status_json, NULL, 20000), 0);
	struct json_object *st = json_tokener_parse(out ? out : "");
	ITEST_CHECK(st != NULL, "status --json:\n%s", out ? out : "");
	struct json_object *qs = json_object_object_get(st, "queues"), *qb = json_object_array_get_idx(qs, 1);
	ITEST_CHECK(json_object_array_length(qs) == 2 &&
	                strcmp(json_object_get_string(json_object_object_get(qb, "name")), x->b) == 0 &&
	                json_object_get_int64(json_object_object_get(qb, "approximate_messages")) == 1 &&
	                json_object_get_boolean(json_object_object_get(qb, "paused")) &&
	                json_object_get_int64(json_object_object_get(qb, "poison_approximate_messages")) == 1,
	            "status --json queues:\n%s", out);
	json_object_put(st);
	free(out);
	const char *status_all[] = {"status", "-c", x->path, NULL};
	out = NULL;
	assert_int_equal(proc_run(&out, NULL, "queues-status", status_all, NULL, 20000), 0);
	char want[160];
	snprintf(want, sizeof(want), "%s (weight 1)", x->b);
	ITEST_CHECK(out && strstr(out, want) && strstr(out, "~1 messages") &&
	                strstr(out, "poison ~1, PAUSED"),
	            "status:\n%s", out ? out : "");
	free(out);
	proc_stop(&p, 10000);
}

/* Idle, each queue costs its looks and nothing more: two queues at
 * poll_interval.max 200ms, about 2 x 20 looks in 4 s and no receive. */
static void test_queues__idle_costs_looks_per_queue(void **state)
{
	struct two *x = *state;
	struct proc p;
	char *page = NULL;
	int found = 0;

	config(x, "queues-idle", 3, 16, 2);
	const char *args[] = {"run", "-c", x->path, NULL};
	proc_start(&p, "queues-idle", args, NULL);
	for (int i = 0; i < 100 && proc_http_get(NULL, x->port, "/metrics") != 200; i++)
		itest_sleep_ms(50);
	itest_sleep_ms(1500);
	assert_int_equal(proc_http_get(&page, x->port, "/metrics"), 200);
	double looks0 =
	    proc_metric(page, "ecw_storage_requests_total", &found, "op=\"queue.metadata\"", NULL);
	double recv0 = proc_metric(page, "ecw_storage_requests_total", &found, "op=\"queue.receive\"", NULL);
	free(page);
	itest_sleep_ms(4000);
	assert_int_equal(proc_http_get(&page, x->port, "/metrics"), 200);
	double looks =
	    proc_metric(page, "ecw_storage_requests_total", &found, "op=\"queue.metadata\"", NULL) - looks0;
	double recv =
	    proc_metric(page, "ecw_storage_requests_total", &found, "op=\"queue.receive\"", NULL) - recv0;
	free(page);
	ITEST_CHECK(recv == 0, "%g receives from two empty queues", recv);
	ITEST_CHECK(looks >= 24 && looks <= 42, "%g looks in 4 s for two queues at one per 200 ms each",
	            looks);
	proc_stop(&p, 10000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_queues__shares_by_weight, two_setup, two_teardown),
	    cmocka_unit_test_setup_teardown(test_queues__own_poison_and_pause, two_setup, two_teardown),
	    cmocka_unit_test_setup_teardown(test_queues__idle_costs_looks_per_queue, two_setup, two_teardown),
	};
	return cmocka_run_group_tests_name("queues", tests, NULL, NULL);
}
