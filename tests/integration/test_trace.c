/* SPDX-License-Identifier: MIT */
/* test_trace.c - W3C trace context end to end against a real Azurite (worker/README.md
 * "Trace context and OTLP"): a message's traceparent puts its trace on every
 * log line about its run, the `then:` follow-up joins the trace under the
 * run's span, an invalid traceparent costs one warning and nothing else,
 * `enqueue --traceparent`, a poisoned and replayed message stays in its
 * trace; and the OTLP export: a collector stub (a thread here) receives the
 * spans with their fields, and a collector that refuses or never answers
 * slows no message down: its spans are dropped and counted. */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "itest.h"
#include "proc.h"
#include "runtimefx.h"

#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT "00f067aa0ba902b7"
#define TP "00-" TRACE "-" PARENT "-01"

#define JOBS                                                                                                 \
	"  first: {type: test-noop, then: [second]}\n"                                                       \
	"  second: {type: test-noop}\n"                                                                      \
	"  bad: {type: test-fail}\n"

/* Starts a worker on the fixture's queues with JOBS and env (NULL-terminated,
 * may be NULL); returns its metrics port, the config's path in path. */
static int start(struct proc *p, struct rtfx *r, const char *name, char *path, size_t cap,
                 const char *const *env)
{
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	int port;

	o.jobs = JOBS;
	port = rtfx_write_config(path, cap, r, name, &o);
	proc_start(p, name, (const char *const[]){"run", "-c", path, NULL}, env);
	return port;
}

/* A fixture whose job queue exists before the worker starts (messages are
 * put at once). */
static int setup(void **state)
{
	struct rtfx *r = wfx_new(sizeof(*r), WFX_QUEUE);

	r->client = r->fx.t->client;
	*state = r;
	return 0;
}

/* The nth "message" line of job with outcome, from p's log (a copy: put it). */
static struct json_object *message_line(struct proc *p, const char *job, const char *outcome, size_t nth)
{
	struct proc_log log;
	struct json_object *l;

	proc_log_read(&log, p->log_path);
	l = proc_log_find(&log, nth, "message", "job", job, "outcome", outcome, NULL);
	ITEST_CHECK(l != NULL, "no message line %zu for %s %s; log:\n%s", nth, job, outcome,
	            proc_tail(p->log_path, 30));
	json_object_get(l);
	proc_log_dispose(&log);
	return l;
}

/* The message id as a trace id: its 32 hex digits, lowercase. */
static void guid_hex(char out[33], const char *id)
{
	size_t k = 0;

	for (const char *c = id; *c && k < 32; c++)
		if (*c != '-')
			out[k++] = (char)(*c >= 'A' && *c <= 'F' ? *c - 'A' + 'a' : *c);
	out[k] = '\0';
}

/* ---- log lines and the follow-up ---------------------------------------------------- */

static void test_trace__log_lines_and_follow_up(void **state)
{
	struct rtfx *r = *state;
	struct proc p;
	char path[640], id[64];

	start(&p, r, "trace_follow", path, sizeof(path), NULL);
	rtfx_put(r, "{\"job\":\"first\",\"pk\":\"p\",\"rk\":\"r\",\"traceparent\":\"" TP "\"}", id);
	PROC_EXPECT_LOG(&p, 1, 30000, "message", "job", "second", "outcome", "succeeded");
	struct json_object *first = message_line(&p, "first", "succeeded", 0);
	struct json_object *second = message_line(&p, "second", "succeeded", 0);
	/* the run of the message: its trace, a new span under the sender's */
	assert_string_equal(proc_field(first, "message_id"), id);
	assert_string_equal(proc_field(first, "trace_id"), TRACE);
	assert_string_equal(proc_field(first, "parent_span_id"), PARENT);
	assert_int_equal(strlen(proc_field(first, "span_id")), 16);
	assert_string_not_equal(proc_field(first, "span_id"), PARENT);
	/* the follow-up: the same trace, the first run's span as its parent */
	assert_string_equal(proc_field(second, "trace_id"), TRACE);
	assert_string_equal(proc_field(second, "parent_span_id"), proc_field(first, "span_id"));
	assert_string_not_equal(proc_field(second, "span_id"), proc_field(first, "span_id"));
	/* every line that names the message carries the trace */
	size_t naming = proc_count(&p, NULL, "message_id", id, NULL);
	assert_true(naming >= 1);
	assert_int_equal(proc_count(&p, NULL, "message_id", id, "trace_id", TRACE, NULL), naming);
	json_object_put(first);
	json_object_put(second);
	rtfx_finish(&p);
}

/* A bad traceparent: one warning (with the run's new trace, the message
 * id's), and the message succeeds as it would have without it. */
static void test_trace__invalid_traceparent(void **state)
{
	struct rtfx *r = *state;
	struct proc p;
	char path[640], id[64], id2[64], hex[33];

	start(&p, r, "trace_invalid", path, sizeof(path), NULL);
	rtfx_put(
	    r, "{\"job\":\"second\",\"pk\":\"p\",\"rk\":\"r\",\"traceparent\":\"00-" TRACE "-" PARENT "-0\"}",
	    id);
	rtfx_put(r, "{\"job\":\"second\",\"pk\":\"p\",\"rk\":\"r2\",\"traceparent\":42}", id2);
	PROC_EXPECT_LOG(&p, 2, 30000, "message", "job", "second", "outcome", "succeeded");
	assert_int_equal(proc_count(&p, "traceparent_invalid", NULL), 2);
	guid_hex(hex, id);
	assert_int_equal(proc_count(&p, "traceparent_invalid", "message_id", id, "trace_id", hex, NULL), 1);
	assert_int_equal(proc_count(&p, "traceparent_invalid", "message_id", id2, NULL), 1);
	assert_int_equal(
	    proc_count(&p, "message", "message_id", id, "outcome", "succeeded", "trace_id", hex, NULL), 1);
	assert_int_equal(proc_count(&p, "message", "parent_span_id", PROC_ANY, NULL), 0);
	assert_int_equal(proc_count(&p, NULL, "level", "error", NULL), 0);
	rtfx_finish(&p);
}

/* A run that outlives shutdown_grace is released by another thread: its
 * line carries the run's ids all the same. */
static void test_trace__released_line(void **state)
{
	struct rtfx *r = *state;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	struct proc p;
	char path[640];

	o.jobs = "  slow: {type: test-sleep, duration: 60s}\n";
	o.shutdown_grace = "1s";
	rtfx_write_config(path, sizeof(path), r, "trace_released", &o);
	proc_start(&p, "trace_released", (const char *const[]){"run", "-c", path, NULL}, NULL);
	rtfx_put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"r\",\"traceparent\":\"" TP "\"}", NULL);
	for (int i = 0; i < 100 && rtfx_peek_count(r, r->fx.t->queue) != 0; i++)
		itest_sleep_ms(50);
	itest_sleep_ms(500); /* a job thread has it */
	proc_signal(&p, SIGTERM);
	ITEST_CHECK(proc_wait(&p, 10000), "still running; log:\n%s", proc_tail(p.log_path, 20));
	assert_int_equal(
	    proc_count(&p, "message", "outcome", "released", "trace_id", TRACE, "span_id", PROC_ANY, NULL),
	    1);
	proc_assert_logs_clean();
}

/* ---- enqueue --traceparent ------------------------------------------------------------- */

static void test_trace__enqueue_traceparent(void **state)
{
	struct rtfx *r = *state;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char path[640], *out = NULL, *err = NULL;
	struct ecw_queue_msg *m;
	size_t got;

	o.jobs = JOBS;
	rtfx_write_config(path, sizeof(path), r, "trace_enqueue", &o);
	int code = proc_run(
	    &out, &err, "trace_enqueue_ok",
	    (const char *const[]){"enqueue", "-c", path, "first", "p", "r", "--traceparent", TP, NULL}, NULL,
	    20000);
	ITEST_CHECK(code == 0, "enqueue exited %d: %s", code, err);
	free(out);
	free(err);
	m = rtfx_receive_n(&got, r, r->fx.t->queue, 1, 30, 10000);
	assert_int_equal(got, 1);
	ITEST_CHECK(strstr(m[0].text, "\"traceparent\":\"" TP "\"") != NULL, "the message: %s", m[0].text);
	ecw_queue_msgs_free(m, got);
	/* a bad value is a usage error, and nothing is sent */
	code = proc_run(&out, &err, "trace_enqueue_bad",
	                (const char *const[]){"enqueue", "-c", path, "first", "p", "r", "--traceparent",
	                                      "00-" TRACE "-" PARENT "-1", NULL},
	                NULL, 20000);
	assert_int_equal(code, 2);
	ITEST_CHECK(strstr(err, "--traceparent: traceparent: 54 characters, not 55") != NULL, "stderr: %s",
	            err);
	free(out);
	free(err);
	code = proc_run(&out, &err, "trace_enqueue_upper",
	                (const char *const[]){"enqueue", "-c", path, "first", "p", "r", "--traceparent",
	                                      "00-4BF92F3577B34DA6A3CE929D0E0E4736-" PARENT "-01", NULL},
	                NULL, 20000);
	assert_int_equal(code, 2);
	free(out);
	free(err);
	assert_int_equal(rtfx_peek_count(r, r->fx.t->queue), 0);
	proc_assert_logs_clean();
}

/* ---- poison and replay ------------------------------------------------------------------ */

static void test_trace__poison_replay_keeps_the_trace(void **state)
{
	struct rtfx *r = *state;
	struct proc p;
	char path[640], id[64], *out = NULL, *err = NULL;
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;

	start(&p, r, "trace_poison", path, sizeof(path), NULL);
	rtfx_put(r, "{\"job\":\"bad\",\"pk\":\"p\",\"rk\":\"r\",\"traceparent\":\"" TP "\"}", id);
	PROC_EXPECT_LOG(&p, 1, 30000, "message", "job", "bad", "outcome", "poisoned");
	struct json_object *run1 = message_line(&p, "bad", "poisoned", 0);
	assert_string_equal(proc_field(run1, "trace_id"), TRACE);
	/* the envelope: the original (with its traceparent) and the failed
	 * run's context at the top */
	for (int i = 0; i < 50 && n == 0; i++) {
		ecw_queue_msgs_free(m, n);
		ECW_ASSERT_OK(ecw_queue_peek(&m, &n, r->client, r->fx.poison, 1));
		if (n == 0)
			itest_sleep_ms(100);
	}
	assert_int_equal(n, 1);
	struct json_object *env = json_tokener_parse(m[0].text), *v;
	ITEST_CHECK(env && json_object_object_get_ex(env, "traceparent", &v), "envelope: %s", m[0].text);
	char want[64];
	snprintf(want, sizeof(want), "00-%s-%s-01", TRACE, proc_field(run1, "span_id"));
	assert_string_equal(json_object_get_string(v), want);
	json_object_put(env);
	ecw_queue_msgs_free(m, n);

	/* replay puts the original back: its next run is in the same trace */
	int code = proc_run(&out, &err, "trace_replay",
	                    (const char *const[]){"poison", "replay", "-c", path, NULL}, NULL, 20000);
	ITEST_CHECK(code == 0, "replay exited %d: %s %s", code, out, err);
	free(out);
	free(err);
	PROC_EXPECT_LOG(&p, 2, 30000, "message", "job", "bad", "outcome", "poisoned");
	struct json_object *run2 = message_line(&p, "bad", "poisoned", 1);
	assert_string_not_equal(proc_field(run2, "message_id"), id);
	assert_string_equal(proc_field(run2, "trace_id"), TRACE);
	assert_string_equal(proc_field(run2, "parent_span_id"), PARENT);
	json_object_put(run1);
	json_object_put(run2);
	rtfx_finish(&p);
}

/* ---- a collector stub --------------------------------------------------------------------- */

#define STUB_BODIES 64

struct stub {
	int fd, port;
	pthread_t tid;
	pthread_mutex_t mu;
	char *bodies[STUB_BODIES]; /* each request's body */
	size_t n;
	char head[4096]; /* the first request's head */
};

/* Reads one request (head, then Content-Length bytes) from c; false at the
 * end of the connection. */
static bool stub_request(struct stub *s, int c)
{
	char buf[1 << 16];
	size_t len = 0;
	char *head_end = NULL;

	for (;;) {
		ssize_t k = read(c, buf + len, sizeof(buf) - 1 - len);
		if (k <= 0)
			return false;
		len += (size_t)k;
		buf[len] = '\0';
		if ((head_end = strstr(buf, "\r\n\r\n")))
			break;
	}
	const char *cl = strcasestr(buf, "\r\ncontent-length:");
	size_t body_len = cl ? (size_t)atol(cl + 17) : 0, have = len - (size_t)(head_end + 4 - buf);
	char *body = malloc(body_len + 1);
	assert_non_null(body);
	memcpy(body, head_end + 4, have < body_len ? have : body_len);
	while (have < body_len) {
		ssize_t k = read(c, body + have, body_len - have);
		if (k <= 0) {
			free(body);
			return false;
		}
		have += (size_t)k;
	}
	body[body_len] = '\0';
	pthread_mutex_lock(&s->mu);
	if (s->n == 0)
		snprintf(s->head, sizeof(s->head), "%.*s", (int)(head_end - buf), buf);
	if (s->n < STUB_BODIES)
		s->bodies[s->n++] = body;
	else
		free(body);
	pthread_mutex_unlock(&s->mu);
	const char *ok = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
	return write(c, ok, strlen(ok)) == (ssize_t)strlen(ok);
}

static void *stub_thread(void *p)
{
	struct stub *s = p;
	int c;

	while ((c = accept(s->fd, NULL, NULL)) >= 0) {
		while (stub_request(s, c))
			;
		close(c);
	}
	return NULL;
}

/* listen only: a collector that takes connections and never answers */
static void stub_listen(struct stub *s)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(s->fd >= 0);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->fd, 8), 0);
	assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &al), 0);
	s->port = ntohs(a.sin_port);
}

static void stub_start(struct stub *s)
{
	stub_listen(s);
	assert_int_equal(pthread_create(&s->tid, NULL, stub_thread, s), 0);
}

static void stub_stop(struct stub *s, bool thread)
{
	shutdown(s->fd, SHUT_RDWR);
	if (thread)
		pthread_join(s->tid, NULL);
	close(s->fd);
	for (size_t i = 0; i < s->n; i++)
		free(s->bodies[i]);
	pthread_mutex_destroy(&s->mu);
}

/* The span named name in what the stub received (a new reference), or NULL;
 * the service.name of its resource in *service. */
static struct json_object *stub_span(struct stub *s, const char *name, char *service, size_t cap)
{
	struct json_object *found = NULL;

	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n && !found; i++) {
		struct json_object *req = json_tokener_parse(s->bodies[i]), *rs, *r0, *res, *attrs, *ss, *s0,
		                   *spans;
		ITEST_CHECK(req != NULL, "not JSON: %.300s", s->bodies[i]);
		if (!json_object_object_get_ex(req, "resourceSpans", &rs) ||
		    !(r0 = json_object_array_get_idx(rs, 0)) ||
		    !json_object_object_get_ex(r0, "resource", &res) ||
		    !json_object_object_get_ex(res, "attributes", &attrs) ||
		    !json_object_object_get_ex(r0, "scopeSpans", &ss) ||
		    !(s0 = json_object_array_get_idx(ss, 0)) ||
		    !json_object_object_get_ex(s0, "spans", &spans))
			fail_msg("not an ExportTraceServiceRequest: %.300s", s->bodies[i]);
		for (size_t k = 0; k < json_object_array_length(spans) && !found; k++) {
			struct json_object *sp = json_object_array_get_idx(spans, k), *nm;
			if (json_object_object_get_ex(sp, "name", &nm) &&
			    strcmp(json_object_get_string(nm), name) == 0)
				found = json_object_get(sp);
		}
		if (found) {
			struct json_object *a0 = json_object_array_get_idx(attrs, 0), *v, *sv;
			if (a0 && json_object_object_get_ex(a0, "value", &v) &&
			    json_object_object_get_ex(v, "stringValue", &sv))
				snprintf(service, cap, "%s", json_object_get_string(sv));
		}
		json_object_put(req);
	}
	pthread_mutex_unlock(&s->mu);
	return found;
}

static const char *span_str(struct json_object *sp, const char *key)
{
	struct json_object *v;
	return json_object_object_get_ex(sp, key, &v) ? json_object_get_string(v) : "";
}

/* An attribute's value as text (stringValue or intValue). */
static const char *span_attr(struct json_object *sp, const char *key)
{
	struct json_object *attrs, *v;

	if (!json_object_object_get_ex(sp, "attributes", &attrs))
		return "";
	for (size_t i = 0; i < json_object_array_length(attrs); i++) {
		struct json_object *a = json_object_array_get_idx(attrs, i), *k, *val;
		if (json_object_object_get_ex(a, "key", &k) && strcmp(json_object_get_string(k), key) == 0 &&
		    json_object_object_get_ex(a, "value", &val)) {
			if (json_object_object_get_ex(val, "stringValue", &v) ||
			    json_object_object_get_ex(val, "intValue", &v))
				return json_object_get_string(v);
		}
	}
	return "";
}

static struct json_object *wait_span(struct stub *s, const char *name, char *service, size_t cap)
{
	struct json_object *sp = NULL;

	for (int i = 0; i < 300 && !(sp = stub_span(s, name, service, cap)); i++)
		itest_sleep_ms(100);
	ITEST_CHECK(sp != NULL, "no span '%s' reached the collector (%zu requests)", name, s->n);
	return sp;
}

static struct stub g_stub;

static void test_trace__otlp_export(void **state)
{
	struct rtfx *r = *state;
	struct proc p;
	char path[640], id[64], endpoint[96], service[64] = "";

	stub_start(&g_stub);
	snprintf(endpoint, sizeof(endpoint), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", g_stub.port);
	proc_add_secret("itest-otlp-secret-42");
	int port = start(&p, r, "trace_otlp", path, sizeof(path),
	                 (const char *const[]){
	                     endpoint, "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=itest-svc",
	                     "OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20itest-otlp-secret-42", NULL});
	rtfx_put(r, "{\"job\":\"first\",\"pk\":\"p\",\"rk\":\"r\",\"traceparent\":\"" TP "\"}", id);
	rtfx_put(r, "{\"job\":\"bad\",\"pk\":\"p\",\"rk\":\"r\"}", NULL);
	PROC_EXPECT_LOG(&p, 1, 30000, "message", "job", "second", "outcome", "succeeded");
	struct json_object *line = message_line(&p, "first", "succeeded", 0);
	struct json_object *first = wait_span(&g_stub, "first", service, sizeof(service));
	struct json_object *second = wait_span(&g_stub, "second", service, sizeof(service));
	struct json_object *bad = wait_span(&g_stub, "bad", service, sizeof(service));

	assert_string_equal(service, "itest-svc");
	assert_string_equal(span_str(first, "traceId"), TRACE);
	assert_string_equal(span_str(first, "parentSpanId"), PARENT);
	assert_string_equal(span_str(first, "spanId"), proc_field(line, "span_id"));
	assert_string_equal(span_attr(first, "ecworker.job"), "first");
	assert_string_equal(span_attr(first, "ecworker.outcome"), "succeeded");
	assert_string_equal(span_attr(first, "ecworker.dequeue_count"), "1");
	assert_string_equal(span_attr(first, "messaging.message.id"), id);
	/* the run put the follow-up and deleted the message, at least */
	ITEST_CHECK(atoll(span_attr(first, "ecworker.storage_requests")) >= 2, "storage_requests %s",
	            span_attr(first, "ecworker.storage_requests"));
	long long t0 = atoll(span_str(first, "startTimeUnixNano")),
	          t1 = atoll(span_str(first, "endTimeUnixNano"));
	ITEST_CHECK(t0 > 1600000000000000000LL && t1 >= t0, "times %lld %lld", t0, t1);
	struct json_object *st, *code;
	assert_true(json_object_object_get_ex(first, "status", &st));
	assert_false(json_object_object_get_ex(st, "code", NULL)); /* unset: not an error */
	assert_string_equal(span_str(second, "traceId"), TRACE);
	assert_string_equal(span_str(second, "parentSpanId"), span_str(first, "spanId"));
	/* a failure: status ERROR with the error's text */
	assert_true(json_object_object_get_ex(bad, "status", &st) &&
	            json_object_object_get_ex(st, "code", &code));
	assert_int_equal(json_object_get_int(code), 2);
	assert_string_equal(span_attr(bad, "ecworker.outcome"), "poisoned");
	assert_true(json_object_object_get_ex(bad, "status", &st) &&
	            json_object_object_get_ex(st, "message", &code));
	ITEST_CHECK(strstr(json_object_get_string(code), "can never succeed") != NULL, "status message %s",
	            json_object_get_string(code));
	assert_string_equal(span_str(bad, "parentSpanId"), "");
	ITEST_CHECK(strcasestr(g_stub.head, "\r\nauthorization: Bearer itest-otlp-secret-42") != NULL,
	            "head: %s", g_stub.head);
	ITEST_CHECK(strncmp(g_stub.head, "POST /v1/traces HTTP/1.1\r\n", 26) == 0, "head: %s", g_stub.head);
	ITEST_CHECK(strcasestr(g_stub.head, "\r\ncontent-type: application/json") != NULL, "head: %s",
	            g_stub.head);
	char *page = NULL;
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	ITEST_CHECK(proc_metric(page, "ecw_otlp_spans_exported_total", NULL, NULL) >= 3, "%s", page);
	free(page);
	json_object_put(line);
	json_object_put(first);
	json_object_put(second);
	json_object_put(bad);
	rtfx_finish(&p); /* also: the header's value is in no log */
	stub_stop(&g_stub, true);
}

/* An OTEL_* variable the worker cannot honour stops it at start, with a
 * line naming the variable, never a header's value. */
static void test_trace__otel_errors_stop_the_start(void **state)
{
	struct rtfx *r = *state;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char path[640], *out = NULL, *err = NULL;
	static const struct {
		const char *var, *says;
	} cases[] = {
	    {"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' is not supported"},
	    {"OTEL_BSP_MAX_QUEUE_SIZE=lots", "OTEL_BSP_MAX_QUEUE_SIZE: 'lots' is not a whole number"},
	    {"OTEL_EXPORTER_OTLP_HEADERS=itest-header-secret-77",
	     "OTEL_EXPORTER_OTLP_HEADERS: entry 1 is not"},
	};

	o.jobs = JOBS;
	rtfx_write_config(path, sizeof(path), r, "trace_otel_bad", &o);
	proc_add_secret("itest-header-secret-77");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int code =
		    proc_run(&out, &err, "trace_otel_bad", (const char *const[]){"run", "-c", path, NULL},
		             (const char *const[]){"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9",
		                                   cases[i].var, NULL},
		             20000);
		ITEST_CHECK(code == 1, "%s: exit %d; stderr:\n%s", cases[i].var, code, err);
		ITEST_CHECK(strstr(err, "\"event\":\"start_failed\"") && strstr(err, cases[i].says),
		            "%s: stderr:\n%s", cases[i].var, err);
		free(out);
		free(err);
	}
	proc_assert_logs_clean();
}

/* 20 messages with a collector that is down (refused) or never answers:
 * all succeed as fast as without one, the worker stops within its flush
 * deadline, and the spans are counted as dropped (after their retries,
 * ecw_otlp_export_retries_total, when refused). */
static void collector_down(struct rtfx *r, const char *name, int port, const char *reason)
{
	struct proc p;
	char path[640], endpoint[96], *page = NULL;
	int64_t t0;

	snprintf(endpoint, sizeof(endpoint),
	         "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:%d/v1/traces", port);
	int mport = start(&p, r, name, path, sizeof(path),
	                  (const char *const[]){
	                      endpoint, "OTEL_BSP_SCHEDULE_DELAY=20", "OTEL_BSP_MAX_QUEUE_SIZE=4",
	                      "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=2", "OTEL_EXPORTER_OTLP_TIMEOUT=60000", NULL});
	PROC_EXPECT_LOG(&p, 1, 30000, "start");
	t0 = itest_now_ms();
	for (int i = 0; i < 20; i++) {
		char text[96];
		snprintf(text, sizeof(text), "{\"job\":\"second\",\"pk\":\"p\",\"rk\":\"r%d\"}", i);
		rtfx_put(r, text, NULL);
	}
	PROC_EXPECT_LOG(&p, 20, 30000, "message", "job", "second", "outcome", "succeeded");
	/* a span waiting on a 60 s export would take minutes */
	ITEST_CHECK(itest_now_ms() - t0 < 15000, "20 messages took %lld ms",
	            (long long)(itest_now_ms() - t0));
	/* A refused batch is tried 3 more times first (up to 1 + 2 + 4 s). */
	for (int i = 0; i < 200; i++) {
		free(page);
		page = NULL;
		assert_int_equal(proc_http_get(&page, mport, "/metrics"), 200);
		char label[64];
		snprintf(label, sizeof(label), "reason=\"%s\"", reason);
		if (proc_metric(page, "ecw_otlp_spans_dropped_total", NULL, label, NULL) > 0)
			break;
		itest_sleep_ms(100);
	}
	char label[64];
	snprintf(label, sizeof(label), "reason=\"%s\"", reason);
	ITEST_CHECK(proc_metric(page, "ecw_otlp_spans_dropped_total", NULL, label, NULL) > 0, "%s", page);
	if (strcmp(reason, "export_failed") == 0)
		ITEST_CHECK(proc_metric(page, "ecw_otlp_export_retries_total", NULL, NULL) >= 3, "%s", page);
	assert_true(proc_metric(page, "ecw_otlp_spans_exported_total", NULL, NULL) == 0);
	free(page);
	t0 = itest_now_ms();
	rtfx_finish(&p);
	ITEST_CHECK(itest_now_ms() - t0 < 6000, "the stop took %lld ms", (long long)(itest_now_ms() - t0));
}

static void test_trace__collector_refuses(void **state)
{
	collector_down(*state, "trace_refused", proc_free_port(), "export_failed");
}

static void test_trace__collector_never_answers(void **state)
{
	stub_listen(&g_stub); /* connections queue up; nobody reads them */
	collector_down(*state, "trace_silent", g_stub.port, "queue_full");
	stub_stop(&g_stub, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_trace__log_lines_and_follow_up, setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_trace__invalid_traceparent, setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_trace__released_line, setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_trace__enqueue_traceparent, setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_trace__poison_replay_keeps_the_trace, setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_trace__otlp_export, setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_trace__otel_errors_stop_the_start, setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_trace__collector_refuses, setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_trace__collector_never_answers, setup, rtfx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
