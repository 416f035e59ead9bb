/* SPDX-License-Identifier: MIT */
/* test_queue_watch.c - the worker's look at its queues (worker/runtime/queue_watch.c)
 * on a real Azurite, judged by its /metrics: the backlog gauges of the job
 * and poison queues, and the idle budget - an idle worker makes one request
 * a poll (the look, in place of the empty receive it made before), and no
 * receive at all while the queue is empty; and under a steady flow of
 * messages, no backoff at all (issue 35). */
#include "runtimefx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_storage.h"

/* The sum of metric's samples carrying label (NULL: all); -1 while the
 * endpoint does not answer yet. */
static double metric(int port, const char *name, const char *label, int *found)
{
	char *page = NULL;
	double v;

	if (proc_http_get(&page, port, "/metrics") != 200) {
		free(page);
		*found = 0;
		return -1;
	}
	v = label ? proc_metric(page, name, found, label, NULL) : proc_metric(page, name, found, NULL);
	free(page);
	return v;
}

/* One reading of the page: the requests in all, the looks and the receives,
 * all at one instant (three readings let a look fall between them: "19
 * requests, of which 20 looks"). */
struct counts {
	double all, looks, receives;
};

static struct counts counts_now(int port)
{
	struct counts k = {-1, -1, -1};
	char *page = NULL;
	int found = 0;

	if (proc_http_get(&page, port, "/metrics") == 200) {
		k.all = proc_metric(page, "ecw_storage_requests_total", &found, NULL);
		k.looks =
		    proc_metric(page, "ecw_storage_requests_total", &found, "op=\"queue.metadata\"", NULL);
		k.receives =
		    proc_metric(page, "ecw_storage_requests_total", &found, "op=\"queue.receive\"", NULL);
	}
	free(page);
	return k;
}

/* Both queues' gauges from the first look: the poison queue holds 3
 * messages, the oldest put before the worker started; the job queue none. */
static void test_queue_watch__backlog_gauges(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct ecw_queue_msg put;
	char label[160];
	struct proc p;
	int found = 0;

	itest_queue(t);
	ECW_ASSERT_OK(ecw_queue_create(NULL, r->client, r->fx.poison));
	for (int i = 0; i < 3; i++)
		ECW_ASSERT_OK(ecw_queue_put(&put, r->client, r->fx.poison, "{\"x\":1}", 7, NULL));
	itest_sleep_ms(2100); /* the oldest is 2 s old at least */
	int port = rtfx_start_worker(&p, r, "watch-gauges", &o);
	snprintf(label, sizeof(label), "queue=\"%s\"", r->fx.poison);
	double n = -1;
	/* Until the first look has set the gauge: the endpoint answers from the
	 * start, before it (under load, CI once read the page in between). */
	for (int i = 0; i < 200 && ((n = metric(port, "ecw_queue_approximate_messages", label, &found)) < 0 ||
	                            found == 0);
	     i++)
		itest_sleep_ms(50);
	ITEST_CHECK(n == 3.0 && found == 1, "poison queue gauge %g (%d samples)", n, found);
	double age = metric(port, "ecw_queue_oldest_message_age_seconds", label, &found);
	ITEST_CHECK(age >= 2.0 && age < 60.0 && found == 1, "poison queue oldest age %g", age);
	snprintf(label, sizeof(label), "queue=\"%s\"", t->queue);
	ITEST_CHECK(metric(port, "ecw_queue_approximate_messages", label, &found) == 0.0 && found == 1,
	            "job queue gauge");
	ITEST_CHECK(metric(port, "ecw_queue_oldest_message_age_seconds", label, &found) == 0.0 && found == 1,
	            "job queue age");
	ITEST_CHECK(metric(port, "ecw_paused", label, &found) == 0.0 && found == 1, "ecw_paused");
	rtfx_finish(&p);
}

/* Idle at poll_interval.max 200ms for 4 s, with the features that could
 * cost requests at rest turned on at their busiest (the pause checked every
 * second, the gauges refreshed every second, adaptive concurrency, spans
 * exported over OTLP): about 20
 * looks and not one receive (before the watch: about 20 empty receives),
 * nothing else; then a message put is seen by the next look and received. */
static void test_queue_watch__idle_costs_one_look_a_poll(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct wfx_worker w = WFX_WORKER(t->queue, r->fx.poison);
	struct proc p;
	char id[64], path[640];
	int found = 0, port = proc_free_port();

	itest_queue(t);
	w.metrics_port = port;
	w.queue_refresh = "1s";
	w.worker_extra = "  control_poll: 1s\n  concurrency_min: 1\n";
	w.jobs = "  noop: {type: test-noop}\n";
	wfx_write_config(path, sizeof(path), "watch-idle", &w);
	const char *args[] = {"run", "-c", path, NULL};
	char otlp[96];
	snprintf(otlp, sizeof(otlp), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", itest_closed_port());
	const char *env[] = {otlp, NULL};
	proc_start(&p, "watch-idle", args, env);
	for (int i = 0; i < 100 && metric(port, "ecw_storage_requests_total", NULL, &found) < 0; i++)
		itest_sleep_ms(50);
	itest_sleep_ms(1500); /* the poll has grown to its max */
	struct counts k0 = counts_now(port);
	itest_sleep_ms(4000);
	struct counts k1 = counts_now(port);
	double looks = k1.looks - k0.looks, receives = k1.receives - k0.receives, all = k1.all - k0.all;
	ITEST_CHECK(receives == 0, "%g receives from an empty queue in 4 s", receives);
	ITEST_CHECK(looks >= 12 && looks <= 21, "%g looks in 4 s at one per 200 ms", looks);
	ITEST_CHECK(all == looks, "%g requests in 4 s, of which %g looks", all, looks);

	rtfx_put(r, "{\"job\":\"noop\",\"pk\":\"p\",\"rk\":\"after-rest\"}", id);
	PROC_EXPECT_LOG(&p, 1, 5000, "message", "message_id", id, "outcome", "succeeded");
	rtfx_finish(&p);
}

/* Messages put one every 50 ms for 5 s, on poll_interval {min: 100ms, max:
 * 10s}, with the scheduled looks (pause, gauges) set 10 minutes apart: while
 * they come, the worker never rests. Resting is what a look stands for (a
 * resting queue is looked at before it is received from again), so from 1 s
 * into the flow to 4 s it makes no look at all, and between receives it
 * waits with the flow: fewer than 4 receives a message. Before issue 35, an
 * empty receive between two arrivals started the backoff (waits of 50 to
 * 100 ms, then 100 to 200, 200 to 400...), each rest ending with a look: about
 * one look a message here. Counts, not times: a slow machine changes
 * neither. Then the flow stops, and the queue cools: within a few seconds
 * it is looked at, not received from. */
static void test_queue_watch__no_backoff_under_steady_flow(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct wfx_worker w = WFX_WORKER(t->queue, r->fx.poison);
	struct proc p;
	char id[64], path[640], text[96];
	int found = 0, port = proc_free_port();
	struct counts k0 = {0, 0, 0}, k1 = {0, 0, 0};

	itest_queue(t);
	w.metrics_port = port;
	w.poll_min = "100ms";
	w.poll_max = "10s";
	w.concurrency = 16;
	w.queue_refresh = "10m";
	w.worker_extra = "  control_poll: 10m\n";
	w.jobs = "  noop: {type: test-noop}\n";
	wfx_write_config(path, sizeof(path), "watch-flow", &w);
	const char *args[] = {"run", "-c", path, NULL};
	proc_start(&p, "watch-flow", args, NULL);
	for (int i = 0; i < 100 && metric(port, "ecw_storage_requests_total", NULL, &found) < 0; i++)
		itest_sleep_ms(50);
	for (int i = 0; i < 100; i++) {
		if (i == 20)
			k0 = counts_now(port);
		else if (i == 80)
			k1 = counts_now(port);
		snprintf(text, sizeof(text), "{\"job\":\"noop\",\"pk\":\"p%d\",\"rk\":\"r%d\"}", i % 50, i);
		rtfx_put(r, text, id);
		itest_sleep_ms(50);
	}
	PROC_EXPECT_LOG(&p, 1, 10000, "message", "message_id", id, "outcome", "succeeded");
	double looks = k1.looks - k0.looks, receives = k1.receives - k0.receives;
	print_message("  from 1 s to 4 s of a message every 50 ms: %g looks, %g receives\n", looks, receives);
	ITEST_CHECK(looks == 0,
	            "%g looks (rests) while a message came every 50 ms, from 1 s to 4 s of the flow", looks);
	ITEST_CHECK(receives >= 20 && receives < 4 * 60,
	            "%g receives for the 60 messages put from 1 s to 4 s", receives);

	/* The flow stopped: the queue cools within WARM_MIN_MS (2 s) and
	 * rests, looked at and no longer received from. */
	itest_sleep_ms(3000);
	struct counts k2 = counts_now(port), k3 = k2;
	/* The next look comes after the backoff's next interval (jittered,
	 * doubling from poll_interval.min): wait for it, up to 8 s. */
	for (int i = 0; i < 32 && k3.looks == k2.looks; i++) {
		itest_sleep_ms(250);
		k3 = counts_now(port);
	}
	ITEST_CHECK(k3.receives == k2.receives, "receives from an empty queue 3 s after the flow");
	ITEST_CHECK(k3.looks > k2.looks, "no look within 8 s, 3 s after the flow");
	rtfx_finish(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_queue_watch__backlog_gauges, rtfx_setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_queue_watch__idle_costs_one_look_a_poll, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_queue_watch__no_backoff_under_steady_flow, rtfx_setup,
	                                    rtfx_teardown),
	};
	return cmocka_run_group_tests_name("queue_watch", tests, NULL, NULL);
}
