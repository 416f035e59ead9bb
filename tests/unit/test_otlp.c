/* SPDX-License-Identifier: MIT */
/* test_otlp.c - the OTLP trace export (worker/telemetry/otlp.c, otlp_export.c): the
 * OTEL_* variables read and refused, a span's exact OTLP/JSON, and the
 * exporter: its queue bound and drop counting, a batch a collector stub
 * (a thread here) receives with the configured headers, and a shutdown that
 * a collector that never answers cannot hold up. */
#define _GNU_SOURCE /* strcasestr */
#include "support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ecw_clock.h"
#include "ecw_log.h"
#include "ecw_version.h"
#include "telemetry.h"

/* ---- a fake environment ------------------------------------------------------ */

static const char *const *g_env;

static const char *fake_env(const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; g_env && g_env[i]; i++)
		if (strncmp(g_env[i], name, n) == 0 && g_env[i][n] == '=')
			return g_env[i] + n + 1;
	return NULL;
}

static int read_with(struct ecw_otlp_config *out, const char *const *env)
{
	g_env = env;
	return ecw_otlp_config_read(out, fake_env);
}

static struct ecw_otlp_config g_cfg; /* ~70 KiB: not on a test's stack */

static void test_otlp__config_defaults(void **state)
{
	(void)state;
	/* no endpoint: nothing to export to */
	assert_int_equal(read_with(&g_cfg, (const char *const[]){NULL}), 0);
	assert_false(g_cfg.enabled);
	assert_int_equal(
	    read_with(&g_cfg, (const char *const[]){"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318/", NULL}), 0);
	assert_true(g_cfg.enabled);
	assert_string_equal(g_cfg.url, "http://c:4318/v1/traces");
	assert_int_equal(g_cfg.timeout_ms, 10000);
	assert_int_equal(g_cfg.schedule_delay_ms, 5000);
	assert_int_equal(g_cfg.max_queue, 2048);
	assert_int_equal(g_cfg.max_batch, 512);
	assert_int_equal(g_cfg.nresource, 1);
	assert_string_equal(g_cfg.resource[0].key, "service.name");
	assert_string_equal(g_cfg.resource[0].value, "ecworker");
}

static void test_otlp__config_values(void **state)
{
	(void)state;
	assert_int_equal(
	    read_with(&g_cfg,
	              (const char *const[]){
	                  "OTEL_EXPORTER_OTLP_ENDPOINT=http://ignored:4318",
	                  "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=https://c.example/custom/path",
	                  "OTEL_EXPORTER_OTLP_HEADERS=api-key=s3cr3t%2Fvalue-123, x-team = blue ",
	                  "OTEL_EXPORTER_OTLP_TIMEOUT=2500",
	                  "OTEL_SERVICE_NAME=orders-worker",
	                  "OTEL_RESOURCE_ATTRIBUTES=service.name=other,deployment.environment=prod%20eu",
	                  "OTEL_BSP_SCHEDULE_DELAY=100",
	                  "OTEL_BSP_MAX_QUEUE_SIZE=64",
	                  "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=16",
	                  "OTEL_EXPORTER_OTLP_PROTOCOL=http/json",
	                  "OTEL_TRACES_EXPORTER=otlp",
	                  "OTEL_SDK_DISABLED=false",
	                  NULL,
	              }),
	    0);
	assert_true(g_cfg.enabled);
	assert_string_equal(g_cfg.url, "https://c.example/custom/path"); /* the traces URL as given */
	assert_int_equal(g_cfg.nheaders, 2);
	assert_string_equal(g_cfg.headers[0].key, "api-key");
	assert_string_equal(g_cfg.headers[0].value, "s3cr3t/value-123");
	assert_string_equal(g_cfg.headers[1].key, "x-team");
	assert_string_equal(g_cfg.headers[1].value, "blue");
	assert_int_equal(g_cfg.timeout_ms, 2500);
	assert_int_equal(g_cfg.schedule_delay_ms, 100);
	assert_int_equal(g_cfg.max_queue, 64);
	assert_int_equal(g_cfg.max_batch, 16);
	assert_int_equal(g_cfg.nresource, 2);
	assert_string_equal(g_cfg.resource[0].value, "orders-worker"); /* OTEL_SERVICE_NAME wins */
	assert_string_equal(g_cfg.resource[1].key, "deployment.environment");
	assert_string_equal(g_cfg.resource[1].value, "prod eu");
	/* the attribute names the service when OTEL_SERVICE_NAME does not */
	assert_int_equal(
	    read_with(&g_cfg, (const char *const[]){"OTEL_RESOURCE_ATTRIBUTES=service.name=other", NULL}), 0);
	assert_string_equal(g_cfg.resource[0].value, "other");
	/* switched off, each way */
	assert_int_equal(read_with(&g_cfg, (const char *const[]){"OTEL_EXPORTER_OTLP_ENDPOINT=http://c",
	                                                         "OTEL_SDK_DISABLED=TRUE", NULL}),
	                 0);
	assert_false(g_cfg.enabled);
	assert_int_equal(read_with(&g_cfg, (const char *const[]){"OTEL_EXPORTER_OTLP_ENDPOINT=http://c",
	                                                         "OTEL_TRACES_EXPORTER=none", NULL}),
	                 0);
	assert_false(g_cfg.enabled);
}

static void config_refused(const char *var, const char *needle)
{
	const char *env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318", var, NULL};

	if (read_with(&g_cfg, env) != ECW_EINVALID)
		fail_msg("%s was accepted", var);
	if (!str_contains(ecw_error_last()->message, needle))
		fail_msg("%s: '%s' does not say '%s'", var, ecw_error_last()->message, needle);
}

static void test_otlp__config_errors(void **state)
{
	(void)state;
	config_refused("OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
	               "OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' is not supported");
	config_refused("OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "only (http/json)");
	config_refused("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL");
	config_refused("OTEL_TRACES_EXPORTER=zipkin", "OTEL_TRACES_EXPORTER: 'zipkin' is not supported");
	config_refused("OTEL_SDK_DISABLED=yes", "OTEL_SDK_DISABLED");
	config_refused("OTEL_EXPORTER_OTLP_TIMEOUT=10s",
	               "OTEL_EXPORTER_OTLP_TIMEOUT: '10s' is not a whole number");
	config_refused("OTEL_EXPORTER_OTLP_TIMEOUT=0", "OTEL_EXPORTER_OTLP_TIMEOUT");
	config_refused("OTEL_BSP_SCHEDULE_DELAY=-5", "OTEL_BSP_SCHEDULE_DELAY");
	config_refused("OTEL_BSP_MAX_QUEUE_SIZE=1000000", "OTEL_BSP_MAX_QUEUE_SIZE");
	config_refused("OTEL_BSP_MAX_EXPORT_BATCH_SIZE=4096", "more than OTEL_BSP_MAX_QUEUE_SIZE");
	config_refused("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=ftp://c/x",
	               "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: not an http");
	config_refused("OTEL_RESOURCE_ATTRIBUTES=novalue",
	               "OTEL_RESOURCE_ATTRIBUTES: entry 1 is not key=value");
	config_refused("OTEL_RESOURCE_ATTRIBUTES=a=%zz", "OTEL_RESOURCE_ATTRIBUTES: the value of entry 1");
	/* a header's value is a secret: never quoted, and redacted in the log */
	config_refused("OTEL_EXPORTER_OTLP_HEADERS=api-key=TopSecretKey%0d%0aX: y", "entry 1 is not valid");
	assert_false(str_contains(ecw_error_last()->message, "TopSecretKey"));
	config_refused("OTEL_EXPORTER_OTLP_HEADERS=TopSecretKey2", "OTEL_EXPORTER_OTLP_HEADERS: entry 1");
	assert_false(str_contains(ecw_error_last()->message, "TopSecretKey2"));
}

static void test_otlp__header_values_are_redacted(void **state)
{
	struct ecw_buf out;
	const char *line = "authorization: Bearer abcdef0123456789";

	(void)state;
	assert_int_equal(
	    read_with(&g_cfg,
	              (const char *const[]){
	                  "OTEL_EXPORTER_OTLP_ENDPOINT=http://c",
	                  "OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20abcdef0123456789", NULL}),
	    0);
	ecw_buf_init(&out, 0);
	assert_int_equal(ecw_log_redact(&out, line, strlen(line)), 0);
	assert_false(str_contains(ecw_buf_cstr(&out), "abcdef0123456789"));
	assert_true(str_contains(ecw_buf_cstr(&out), "[REDACTED]"));
	ecw_buf_dispose(&out);
}

/* ---- encoding ------------------------------------------------------------------ */

static void sample_span(struct ecw_otlp_span *sp, bool error)
{
	struct ecw_trace_ctx parent;
	const char *tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

	memset(sp, 0, sizeof(*sp));
	assert_int_equal(ecw_trace_parent_parse(&parent, tp, strlen(tp)), 0);
	ecw_trace_span_start(&sp->ids, &parent, NULL);
	/* a fixed span id, for the exact text */
	memcpy(sp->ids.span_id, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
	ecw_trace_hex(sp->ids.span_hex, sp->ids.span_id, 8);
	snprintf(sp->name, sizeof(sp->name), "archive");
	snprintf(sp->job, sizeof(sp->job), "archive");
	snprintf(sp->outcome, sizeof(sp->outcome), error ? "retried" : "succeeded");
	snprintf(sp->message_id, sizeof(sp->message_id), "m-1");
	snprintf(sp->queue, sizeof(sp->queue), "jobs");
	sp->dequeue_count = 2;
	sp->storage_requests = 7;
	sp->group = 1;
	sp->start_unix_ns = 1764331200123456789LL;
	sp->end_unix_ns = 1764331200223456789LL;
	sp->error = error;
	if (error)
		snprintf(sp->status_message, sizeof(sp->status_message), "table \"x\" busy");
}

static void test_otlp__encode(void **state)
{
	struct ecw_otlp_span sp[2];
	struct ecw_buf out;

	(void)state;
	assert_int_equal(
	    read_with(&g_cfg, (const char *const[]){"OTEL_EXPORTER_OTLP_ENDPOINT=http://c",
	                                            "OTEL_RESOURCE_ATTRIBUTES=host.name=w1", NULL}),
	    0);
	sample_span(&sp[0], false);
	sample_span(&sp[1], true);
	sp[1].ids.has_parent = false; /* a root span has no parentSpanId */
	ecw_buf_init(&out, 0);
	assert_int_equal(ecw_otlp_encode(&out, &g_cfg, sp, 2), 0);
#define SPAN_FMT                                                                                             \
	"{\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"spanId\":\"0102030405060708\"%s"                \
	",\"name\":\"archive\",\"kind\":5,"                                                                  \
	"\"startTimeUnixNano\":\"1764331200123456789\",\"endTimeUnixNano\":\"1764331200223456789\","         \
	"\"attributes\":["                                                                                   \
	"{\"key\":\"ecworker.job\",\"value\":{\"stringValue\":\"archive\"}},"                                \
	"{\"key\":\"ecworker.outcome\",\"value\":{\"stringValue\":\"%s\"}},"                                 \
	"{\"key\":\"ecworker.dequeue_count\",\"value\":{\"intValue\":\"2\"}},"                               \
	"{\"key\":\"ecworker.storage_requests\",\"value\":{\"intValue\":\"7\"}},"                            \
	"{\"key\":\"messaging.message.id\",\"value\":{\"stringValue\":\"m-1\"}},"                            \
	"{\"key\":\"messaging.destination.name\",\"value\":{\"stringValue\":\"jobs\"}}],"                    \
	"\"status\":%s}"

	char s0[2048], s1[2048], want[8192];
	snprintf(s0, sizeof(s0), SPAN_FMT, ",\"parentSpanId\":\"00f067aa0ba902b7\"", "succeeded", "{}");
	snprintf(s1, sizeof(s1), SPAN_FMT, "", "retried",
	         "{\"code\":2,\"message\":\"table \\\"x\\\" busy\"}");
	snprintf(want, sizeof(want),
	         "{\"resourceSpans\":[{\"resource\":{\"attributes\":["
	         "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"ecworker\"}},"
	         "{\"key\":\"host.name\",\"value\":{\"stringValue\":\"w1\"}}]},"
	         "\"scopeSpans\":[{\"scope\":{\"name\":\"ecworker\",\"version\":\"" ECW_VERSION "\"},"
	         "\"spans\":[%s,%s]}]}]}",
	         s0, s1);
	assert_string_equal(ecw_buf_cstr(&out), want);
	ecw_buf_dispose(&out);
}

/* ---- the exporter --------------------------------------------------------------- */

/* ecw_clock_sleep_ms is wrapped in the unit tests (it returns at once). */
static void nap_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* A local port nothing listens on. */
static int closed_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static long long metric(const char *series)
{
	char *page = ecw_metrics_render();
	char line[160];
	const char *at;
	long long v = -1;

	assert_non_null(page);
	snprintf(line, sizeof(line), "\n%s ", series); /* the sample, not its # HELP line */
	if ((at = strstr(page, line)))
		v = atoll(at + strlen(line));
	free(page);
	return v;
}

static void exporter_config(const char *url, int64_t delay_ms, size_t queue, size_t batch)
{
	char endpoint[128];

	snprintf(endpoint, sizeof(endpoint), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=%s", url);
	assert_int_equal(
	    read_with(&g_cfg,
	              (const char *const[]){
	                  endpoint, "OTEL_EXPORTER_OTLP_TIMEOUT=60000",
	                  "OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20tok-0123456789", NULL}),
	    0);
	g_cfg.schedule_delay_ms = delay_ms;
	g_cfg.max_queue = queue;
	g_cfg.max_batch = batch;
}

/* An exporter to 127.0.0.1:port (metrics back at 0), and a span to give it. */
static struct ecw_otlp_exporter *exporter_at(int port, int64_t delay_ms, size_t queue, size_t batch,
                                             struct ecw_otlp_span *sp)
{
	struct ecw_otlp_exporter *e;
	char url[64];

	ecw_metrics_reset();
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", port);
	exporter_config(url, delay_ms, queue, batch);
	assert_int_equal(ecw_otlp_exporter_new(&e, &g_cfg), 0);
	sample_span(sp, false);
	return e;
}

/* A full queue drops (and counts) at once; submitting never waits. What is
 * left at shutdown goes to the collector (here: nothing listens) and is
 * counted as failed. */
static void test_otlp__queue_bound(void **state)
{
	struct ecw_otlp_span sp;
	int64_t t0;

	(void)state;
	/* a batch larger than the queue, and a long delay: nothing leaves before the stop */
	struct ecw_otlp_exporter *e = exporter_at(closed_port(), 600000, 4, 8, &sp);
	t0 = ecw_clock_now_ms();
	for (int i = 0; i < 10; i++)
		ecw_otlp_submit(e, &sp);
	assert_true(ecw_clock_now_ms() - t0 < 100);
	assert_int_equal(metric("ecw_otlp_spans_dropped_total{reason=\"queue_full\"}"), 6);
	assert_int_equal(metric("ecw_otlp_spans_dropped_total{reason=\"export_failed\"}"), 0);
	ecw_otlp_exporter_free(e, 3000);
	assert_int_equal(metric("ecw_otlp_spans_dropped_total{reason=\"export_failed\"}"), 4);
	assert_int_equal(metric("ecw_otlp_spans_exported_total"), 0);
}

/* ---- a collector stub ------------------------------------------------------------ */

struct stub {
	int fd;
	int port;
	bool answer;         /* false: accept, read, never answer */
	char request[65536]; /* the first request, head and body */
	size_t len;
	/* The answers, one a connection: "HTTP/1.1 ..." heads (the last one
	 * repeats); none: 200. */
	const char *const *answers;
	size_t nanswers;
	int requests;     /* connections answered */
	int64_t at_ms[8]; /* when the first ones came */
	pthread_t tid;
};

/* Reads one request from c into s->request (the first one only is kept):
 * until its Content-Length bytes of body are in. */
static void stub_read_request(struct stub *s, int c)
{
	char buf[65536];
	size_t len = 0;
	ssize_t n;

	for (;;) {
		n = read(c, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		const char *head_end = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "content-length:");
		if (head_end && cl && len - (size_t)(head_end + 4 - buf) >= (size_t)atol(cl + 15))
			break;
	}
	if (s->requests == 0) {
		memcpy(s->request, buf, len + 1);
		s->len = len;
	}
}

static void *stub_thread(void *p)
{
	struct stub *s = p;
	int c;

	while ((c = accept(s->fd, NULL, NULL)) >= 0) {
		stub_read_request(s, c);
		if (s->requests < 8)
			s->at_ms[s->requests] = ecw_clock_now_ms();
		if (s->answer) {
			const char *ok =
			    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
			    "Connection: close\r\n\r\n{}";
			const char *a =
			    s->nanswers == 0
			        ? ok
			        : s->answers[(size_t)s->requests < s->nanswers ? (size_t)s->requests
			                                                       : s->nanswers - 1];
			(void)!write(c, a, strlen(a));
		} else {
			char sink[4096];
			while (read(c, sink, sizeof(sink)) > 0) /* until the exporter gives up */
				;
		}
		s->requests++;
		close(c);
	}
	return NULL;
}

static void stub_start_with(struct stub *s, bool answer, const char *const *answers, size_t nanswers)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	memset(s, 0, sizeof(*s));
	s->answer = answer;
	s->answers = answers;
	s->nanswers = nanswers;
	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(s->fd >= 0);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->fd, 4), 0);
	assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &al), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->tid, NULL, stub_thread, s), 0);
}

static void stub_start(struct stub *s, bool answer)
{
	stub_start_with(s, answer, NULL, 0);
}

static void stub_stop(struct stub *s)
{
	shutdown(s->fd, SHUT_RDWR);
	pthread_join(s->tid, NULL);
	close(s->fd);
}

static struct stub g_stub;

static void test_otlp__exports_a_batch(void **state)
{
	struct ecw_otlp_span sp;

	(void)state;
	stub_start(&g_stub, true);
	/* the batch leaves when it is full: one request holds both */
	struct ecw_otlp_exporter *e = exporter_at(g_stub.port, 600000, 16, 2, &sp);
	ecw_otlp_submit(e, &sp);
	ecw_otlp_submit(e, &sp);
	for (int i = 0; i < 200 && metric("ecw_otlp_spans_exported_total") < 2; i++)
		nap_ms(10);
	assert_int_equal(metric("ecw_otlp_spans_exported_total"), 2);
	ecw_otlp_exporter_free(e, 1000);
	stub_stop(&g_stub);
	assert_true(str_contains(g_stub.request, "POST /v1/traces HTTP/1.1\r\n"));
	assert_true(str_contains_ci(g_stub.request, "\r\nContent-Type: application/json\r\n"));
	assert_true(str_contains(g_stub.request, "\r\nauthorization: Bearer tok-0123456789\r\n"));
	assert_true(str_contains(g_stub.request, "\"spanId\":\"0102030405060708\""));
	assert_true(str_contains(g_stub.request, "},{\"traceId\"")); /* two spans in one request */
}

/* A collector that takes the request and never answers holds neither the
 * submitter nor, past the flush deadline, the shutdown (its timeout is a
 * minute here). */
static void test_otlp__silent_collector(void **state)
{
	struct ecw_otlp_span sp;
	int64_t t0;

	(void)state;
	stub_start(&g_stub, false);
	struct ecw_otlp_exporter *e = exporter_at(g_stub.port, 10, 4, 2, &sp);
	t0 = ecw_clock_now_ms();
	for (int i = 0; i < 50; i++) {
		ecw_otlp_submit(e, &sp);
		if (i == 1)
			nap_ms(50); /* the first batch is on its way: the thread waits for the answer */
	}
	assert_true(ecw_clock_now_ms() - t0 < 200);
	assert_true(metric("ecw_otlp_spans_dropped_total{reason=\"queue_full\"}") >= 40);
	t0 = ecw_clock_now_ms();
	ecw_otlp_exporter_free(e, 300);
	assert_true(ecw_clock_now_ms() - t0 < 2000);
	assert_int_equal(metric("ecw_otlp_spans_exported_total"), 0);
	stub_stop(&g_stub);
}

#define UNAVAILABLE(retry_after)                                                                             \
	"HTTP/1.1 503 Service Unavailable\r\nRetry-After: " retry_after "\r\nContent-Length: 0\r\n"          \
	"Connection: close\r\n\r\n"
#define OK_ANSWER "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"

/* Waits up to 5 s for the export's outcome: spans exported or dropped. */
static void wait_outcome(long long spans)
{
	for (int i = 0; i < 500; i++) {
		if (metric("ecw_otlp_spans_exported_total") +
		        metric("ecw_otlp_spans_dropped_total{reason=\"export_failed\"}") >=
		    spans)
			return;
		nap_ms(10);
	}
}

/* Two spans (one batch) to a stub answering answers[], until they are
 * exported or dropped; then the exporter and the stub are stopped (the
 * metrics stay for the caller). */
static void export_two(const char *const *answers, size_t nanswers)
{
	struct ecw_otlp_span sp;

	stub_start_with(&g_stub, true, answers, nanswers);
	struct ecw_otlp_exporter *e = exporter_at(g_stub.port, 600000, 16, 2, &sp);
	ecw_otlp_submit(e, &sp);
	ecw_otlp_submit(e, &sp);
	wait_outcome(2);
	ecw_otlp_exporter_free(e, 1000);
	stub_stop(&g_stub);
}

/* 503 with Retry-After: 0, then 200: the batch is sent again and taken,
 * nothing dropped; the retry is counted. */
static void test_otlp__retries_a_batch_the_collector_could_not_take(void **state)
{
	static const char *const answers[] = {UNAVAILABLE("0"), OK_ANSWER};

	(void)state;
	export_two(answers, 2);
	assert_int_equal(metric("ecw_otlp_spans_exported_total"), 2);
	assert_int_equal(metric("ecw_otlp_spans_dropped_total{reason=\"export_failed\"}"), 0);
	assert_int_equal(metric("ecw_otlp_export_retries_total"), 1);
	assert_int_equal(g_stub.requests, 2);
}

/* A collector that keeps answering 503 gets the batch 1 + 3 times, then it
 * is dropped as export_failed; one that answers 400 gets it once. */
static void test_otlp__gives_up_after_three_retries_and_never_retries_a_400(void **state)
{
	static const char *const busy[] = {UNAVAILABLE("0")};
	static const char *const bad[] = {"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"};

	(void)state;
	export_two(busy, 1);
	assert_int_equal(metric("ecw_otlp_spans_dropped_total{reason=\"export_failed\"}"), 2);
	assert_int_equal(metric("ecw_otlp_export_retries_total"), 3);
	assert_int_equal(g_stub.requests, 4);
	export_two(bad, 1);
	assert_int_equal(metric("ecw_otlp_spans_dropped_total{reason=\"export_failed\"}"), 2);
	assert_int_equal(metric("ecw_otlp_export_retries_total"), 0);
	assert_int_equal(g_stub.requests, 1);
}

/* The collector's Retry-After (1 s) is waited before the next try. */
static void test_otlp__waits_the_collectors_retry_after(void **state)
{
	static const char *const answers[] = {UNAVAILABLE("1"), OK_ANSWER};

	(void)state;
	export_two(answers, 2);
	assert_int_equal(metric("ecw_otlp_spans_exported_total"), 2);
	assert_int_equal(g_stub.requests, 2);
	int64_t waited = g_stub.at_ms[1] - g_stub.at_ms[0];
	if (waited < 950 || waited > 3000)
		fail_msg("the second try came %lld ms after the first; Retry-After said 1 s",
		         (long long)waited);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_otlp__config_defaults),
	    cmocka_unit_test(test_otlp__config_values),
	    cmocka_unit_test(test_otlp__config_errors),
	    cmocka_unit_test(test_otlp__header_values_are_redacted),
	    cmocka_unit_test(test_otlp__encode),
	    cmocka_unit_test(test_otlp__queue_bound),
	    cmocka_unit_test(test_otlp__exports_a_batch),
	    cmocka_unit_test(test_otlp__silent_collector),
	    cmocka_unit_test(test_otlp__retries_a_batch_the_collector_could_not_take),
	    cmocka_unit_test(test_otlp__gives_up_after_three_retries_and_never_retries_a_400),
	    cmocka_unit_test(test_otlp__waits_the_collectors_retry_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
