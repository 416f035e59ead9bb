/* SPDX-License-Identifier: MIT */
/* test_pause.c - `ecworker pause` and `resume` with a worker running (a
 * process on a real Azurite): once the queue is paused the worker receives
 * nothing from it (a message put then keeps dequeue count 0), finishes what
 * it holds, stays healthy and says ecw_paused 1; status shows who, when and
 * why (the reason escaped for the terminal); resume lets the message run.
 * The pause lives in the queue's metadata, and metadata that other tools put
 * there survives a pause and a resume. Bad arguments are usage errors that
 * change nothing. */
#include "runtimefx.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_storage.h"

#define REASON "deploy 7 \x1b[2J (dba)"

static char *run_cli(const char *name, const char *const *args, int want)
{
	char *out = NULL, *err = NULL;
	int code = proc_run(&out, &err, name, args, NULL, 20000);

	ITEST_CHECK(code == want, "%s exited %d, expected %d; stderr:\n%s\nstdout:\n%s", args[0], code, want,
	            err ? err : "", out ? out : "");
	free(err);
	return out;
}

static double metric(int port, const char *name, const char *queue, int *found)
{
	char *page = NULL, label[160];
	double v;

	if (proc_http_get(&page, port, "/metrics") != 200) {
		free(page);
		*found = 0;
		return -1; /* not listening yet */
	}
	snprintf(label, sizeof(label), "queue=\"%s\"", queue ? queue : "");
	v = queue ? proc_metric(page, name, found, label, NULL) : proc_metric(page, name, found, NULL);
	free(page);
	return v;
}

static long dequeue_count_of(struct rtfx *r, const char *id)
{
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	long dq = -1;

	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, r->client, r->fx.t->queue, 32));
	for (size_t i = 0; i < n; i++)
		if (strcmp(m[i].id, id) == 0)
			dq = m[i].dequeue_count;
	ecw_queue_msgs_free(m, n);
	return dq;
}

static void test_pause__the_fleet_stops_receiving_until_resume(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char jobs[256], path[640], slow_id[64], held_id[64];
	struct proc p;
	int found = 0;

	itest_queue(t);
	snprintf(jobs, sizeof(jobs),
	         "  slow: {type: test-sleep, duration: 3s, table: %s}\n  noop: {type: test-noop}\n",
	         t->table);
	o.jobs = jobs;
	o.worker_extra = "  control_poll: 1s\n";
	int port = rtfx_start_worker(&p, r, "pause-worker", &o);
	rtfx_write_config(path, sizeof(path), r, "pause-cli", &o);

	/* A message that runs while the pause comes: it is finished. */
	rtfx_put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"slow-1\"}", slow_id);
	for (int i = 0; i < 200 && metric(port, "ecw_jobs_in_flight", NULL, &found) < 1.0; i++)
		itest_sleep_ms(50);
	ITEST_CHECK(found == 1 && metric(port, "ecw_jobs_in_flight", NULL, &found) == 1.0,
	            "the slow message is not running");
	const char *pause[] = {"pause", "-c", path, "--reason", REASON, NULL};
	char *out = run_cli("pause-cli", pause, 0);
	ITEST_CHECK(strstr(out, "paused ") != NULL, "pause printed:\n%s", out);
	free(out);
	PROC_EXPECT_LOG(&p, 1, 5000, "queue_paused", "queue", t->queue, "reason", REASON);
	PROC_EXPECT_LOG(&p, 1, 10000, "message", "message_id", slow_id, "outcome", "succeeded");

	/* Put while paused: not received, so its dequeue count stays 0. */
	rtfx_put(r, "{\"job\":\"noop\",\"pk\":\"p\",\"rk\":\"held-1\"}", held_id);
	itest_sleep_ms(3000);
	assert_int_equal(proc_count(&p, "message", "message_id", held_id, NULL), 0);
	assert_int_equal(dequeue_count_of(r, held_id), 0);
	assert_true(proc_alive(&p));
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 200);
	assert_true(metric(port, "ecw_paused", t->queue, &found) == 1.0 && found == 1);
	assert_true(metric(port, "ecw_queue_approximate_messages", t->queue, &found) == 1.0 && found == 1);

	/* Who, when and why, as status shows them: the reason's escape is made
	 * harmless for the terminal, and kept whole in the JSON. */
	const char *status[] = {"status", "-c", path, NULL};
	out = run_cli("pause-status", status, 0);
	ITEST_CHECK(strstr(out, "PAUSED since ") != NULL && strstr(out, "(dba)") != NULL, "status:\n%s", out);
	ITEST_CHECK(strchr(out, '\x1b') == NULL, "status printed an escape byte:\n%s", out);
	free(out);
	const char *status_json[] = {"status", "-c", path, "--json", NULL};
	out = run_cli("pause-status-json", status_json, 0);
	struct json_object *o_json = json_tokener_parse(out), *q, *paused;
	ITEST_CHECK(o_json && json_object_object_get_ex(o_json, "queue", &q) &&
	                json_object_object_get_ex(q, "paused", &paused) &&
	                json_object_is_type(paused, json_type_object),
	            "status --json:\n%s", out);
	assert_string_equal(json_object_get_string(json_object_object_get(paused, "reason")), REASON);
	ITEST_CHECK(strchr(json_object_get_string(json_object_object_get(paused, "by")), '@') != NULL,
	            "paused by '%s'", json_object_get_string(json_object_object_get(paused, "by")));
	json_object_put(o_json);
	free(out);

	const char *resume[] = {"resume", "-c", path, NULL};
	out = run_cli("resume-cli", resume, 0);
	ITEST_CHECK(strstr(out, "resumed ") != NULL, "resume printed:\n%s", out);
	free(out);
	PROC_EXPECT_LOG(&p, 1, 5000, "queue_resumed", "queue", t->queue);
	PROC_EXPECT_LOG(&p, 1, 10000, "message", "message_id", held_id, "outcome", "succeeded");
	assert_true(metric(port, "ecw_paused", t->queue, &found) == 0.0 && found == 1);
	out = run_cli("resume-again", resume, 0);
	ITEST_CHECK(strstr(out, "was not paused") != NULL, "a second resume printed:\n%s", out);
	free(out);
	rtfx_finish(&p);
}

/* A queue paused before a worker starts: the worker starts (creating a
 * queue that exists with metadata answers 409 QueueAlreadyExists, which is
 * "it exists"), receives nothing, and runs the message once resumed;
 * enqueue (which creates the queue too) works on a paused queue. */
static void test_pause__a_worker_starts_on_a_paused_queue(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char path[640], id[64];
	struct proc p;

	itest_queue(t);
	o.worker_extra = "  control_poll: 1s\n";
	rtfx_write_config(path, sizeof(path), r, "pause-first", &o);
	const char *pause[] = {"pause", "-c", path, NULL};
	free(run_cli("pause-first", pause, 0));
	const char *enq[] = {"enqueue", "-c", path, "noop", "p", "while-paused", NULL};
	char *out = run_cli("pause-enqueue", enq, 0);
	snprintf(id, sizeof(id), "%s", out);
	id[strcspn(id, "\n")] = '\0';
	free(out);
	int port = rtfx_start_worker(&p, r, "pause-first-worker", &o);
	PROC_EXPECT_LOG(&p, 1, 10000, "queue_paused", "queue", t->queue);
	assert_int_equal(proc_count(&p, "start_retry", NULL), 0);
	itest_sleep_ms(1500);
	assert_int_equal(proc_count(&p, "message", "message_id", id, NULL), 0);
	assert_int_equal(dequeue_count_of(r, id), 0);
	(void)port;
	const char *resume[] = {"resume", "-c", path, NULL};
	free(run_cli("resume-first", resume, 0));
	PROC_EXPECT_LOG(&p, 1, 10000, "message", "message_id", id, "outcome", "succeeded");
	rtfx_finish(&p);
}

/* Set Queue Metadata replaces all of it: pause and resume keep what other
 * tools put there. */
static void test_pause__other_metadata_survives(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct ecw_queue_meta *m = calloc(1, sizeof(*m));
	char path[640];

	itest_queue(t);
	assert_non_null(m);
	ECW_ASSERT_OK(ecw_queue_meta_put(m, "owner", "team-x"));
	ECW_ASSERT_OK(ecw_queue_meta_set(r->client, t->queue, m));
	rtfx_write_config(path, sizeof(path), r, "pause-meta", &o);

	const char *pause[] = {"pause", "-c", path, NULL};
	free(run_cli("pause-meta", pause, 0));
	ECW_ASSERT_OK(ecw_queue_meta_get(m, r->client, t->queue));
	assert_non_null(ecw_queue_meta_value(m, "ecworkerpausedat"));
	assert_string_equal(ecw_queue_meta_value(m, "owner"), "team-x");
	const char *resume[] = {"resume", "-c", path, NULL};
	free(run_cli("resume-meta", resume, 0));
	ECW_ASSERT_OK(ecw_queue_meta_get(m, r->client, t->queue));
	assert_null(ecw_queue_meta_value(m, "ecworkerpausedat"));
	assert_null(ecw_queue_meta_value(m, "ecworkerpausedby"));
	assert_string_equal(ecw_queue_meta_value(m, "owner"), "team-x");
	assert_int_equal(m->n, 1);
	free(m);
}

/* Usage errors (exit 2) write nothing. */
static void test_pause__usage_errors_change_nothing(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct ecw_queue_meta *m = calloc(1, sizeof(*m));
	char path[640], longer[300];

	itest_queue(t);
	assert_non_null(m);
	rtfx_write_config(path, sizeof(path), r, "pause-bad", &o);
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	const char *other_queue[] = {"pause", "-c", path, "--queue", "some-other-queue", NULL};
	const char *too_long[] = {"pause", "-c", path, "--reason", longer, NULL};
	const char *not_utf8[] = {"pause", "-c", path, "--reason", "caf\xe9", NULL};
	const char *resume_reason[] = {"resume", "-c", path, "--reason", "x", NULL};
	const char *extra[] = {"pause", "-c", path, "now", NULL};
	free(run_cli("pause-other", other_queue, 2));
	free(run_cli("pause-long", too_long, 2));
	free(run_cli("pause-utf8", not_utf8, 2));
	free(run_cli("resume-reason", resume_reason, 2));
	free(run_cli("pause-extra", extra, 2));
	ECW_ASSERT_OK(ecw_queue_meta_get(m, r->client, t->queue));
	assert_int_equal(m->n, 0);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_pause__the_fleet_stops_receiving_until_resume, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_pause__a_worker_starts_on_a_paused_queue, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_pause__other_metadata_survives, rtfx_setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_pause__usage_errors_change_nothing, rtfx_setup,
	                                    rtfx_teardown),
	};
	return cmocka_run_group_tests_name("pause", tests, NULL, NULL);
}
