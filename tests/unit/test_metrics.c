/* SPDX-License-Identifier: MIT */
/* test_metrics.c - the /metrics page (HELP and TYPE lines, counters that add
 * up, cumulative histogram buckets with _sum and _count, label escaping, the
 * cap on label sets) and the HTTP server on a free port, driven with libcurl:
 * /metrics, /healthz with a tiny liveness window, /readyz, 404, 405, and the
 * listen-address errors; and the scheduled audits' gauges (the latest
 * result per job: drift by kind, its time, the period). */
#include "support.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ecw_log.h"
#include "telemetry.h"

static int reset_setup(void **state)
{
	(void)state;
	ecw_metrics_reset();
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	ecw_metrics_reset();
	curl_global_cleanup();
	return 0;
}

static char *render(void)
{
	char *page = ecw_metrics_render();
	assert_non_null(page);
	return page;
}

/* The page has this exact line. */
static void has_line(const char *page, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = page; (p = strstr(p, line)); p++)
		if ((p == page || p[-1] == '\n') && p[n] == '\n')
			return;
	fail_msg("no line [%s] in:\n%s", line, page);
}

static int count_prefix(const char *page, const char *prefix)
{
	int n = 0;

	for (const char *p = page; *p;) {
		if (str_starts(p, prefix))
			n++;
		const char *nl = strchr(p, '\n');
		if (!nl)
			break;
		p = nl + 1;
	}
	return n;
}

/* The value on the line that starts with "sample " (sample is name{labels}). */
static double sample_value(const char *page, const char *sample)
{
	size_t n = strlen(sample);

	for (const char *p = page; (p = strstr(p, sample)); p++)
		if ((p == page || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	fail_msg("no sample %s in:\n%s", sample, page);
	return 0;
}

/* ---- the page ------------------------------------------------------------ */

static void test_metrics__help_and_type(void **state)
{
	(void)state;
	static const char *const metrics[][2] = {
	    {"ecw_messages_total", "counter"},          {"ecw_job_duration_seconds", "histogram"},
	    {"ecw_storage_requests_total", "counter"},  {"ecw_storage_retries_total", "counter"},
	    {"ecw_messages_poisoned_total", "counter"}, {"ecw_jobs_in_flight", "gauge"},
	    {"ecw_messages_received_total", "counter"}, {"ecw_last_receive_timestamp_seconds", "gauge"},
	};
	ecw_metrics_message("move", "succeeded", 0.2);
	ecw_metrics_storage("queue.receive", 200);
	ecw_metrics_poisoned("permanent");
	char *page = render();
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++) {
		char help[128], type[128];
		snprintf(help, sizeof(help), "# HELP %s ", metrics[i][0]);
		snprintf(type, sizeof(type), "# TYPE %s %s\n", metrics[i][0], metrics[i][1]);
		const char *h = strstr(page, help), *t = strstr(page, type);
		if (!h || !t)
			fail_msg("no HELP/TYPE for %s in:\n%s", metrics[i][0], page);
		assert_true(h < t);
		assert_int_equal(count_prefix(page, help), 1);
		/* The samples of a metric follow its TYPE line. */
		const char *sample = strstr(t + strlen(type), metrics[i][0]);
		assert_non_null(sample);
		assert_true(sample == t + strlen(type));
	}
	/* Every line is a comment or "name[{labels}] value". */
	for (const char *p = page; *p;) {
		const char *nl = strchr(p, '\n');
		assert_non_null(nl);
		if (*p != '#')
			assert_non_null(memchr(p, ' ', (size_t)(nl - p)));
		p = nl + 1;
	}
	free(page);
}

static void test_metrics__counters_add_up(void **state)
{
	(void)state;
	for (int i = 0; i < 3; i++)
		ecw_metrics_message("move", "succeeded", 0.1);
	ecw_metrics_message("move", "retried", 0.1);
	ecw_metrics_message("move", "retried", 0.1);
	ecw_metrics_message("index", "succeeded", 0.1);
	ecw_metrics_message("", "poisoned", 0);
	ecw_metrics_storage("queue.receive", 200);
	ecw_metrics_storage("queue.receive", 200);
	ecw_metrics_storage("table.get", 404);
	ecw_metrics_storage("queue.put", 0);
	ecw_metrics_retry();
	ecw_metrics_retry();
	ecw_metrics_retry();
	ecw_metrics_inflight_add(3);
	ecw_metrics_inflight_add(-1);
	ecw_metrics_poisoned("permanent");
	ecw_metrics_poisoned("permanent");
	ecw_metrics_poisoned("max-dequeue");
	ecw_metrics_received(1700000000, 5);
	ecw_metrics_received(1700000100, 0); /* an empty receive counts no message */
	ecw_metrics_received(1700000050, 2);

	char *page = render();
	has_line(page, "ecw_messages_total{job=\"move\",outcome=\"succeeded\"} 3");
	has_line(page, "ecw_messages_total{job=\"move\",outcome=\"retried\"} 2");
	has_line(page, "ecw_messages_total{job=\"index\",outcome=\"succeeded\"} 1");
	has_line(page, "ecw_messages_total{job=\"\",outcome=\"poisoned\"} 1");
	has_line(page, "ecw_job_duration_seconds_count{job=\"move\"} 5");
	has_line(page, "ecw_storage_requests_total{op=\"queue.receive\",status=\"200\"} 2");
	has_line(page, "ecw_storage_requests_total{op=\"table.get\",status=\"404\"} 1");
	has_line(page, "ecw_storage_requests_total{op=\"queue.put\",status=\"0\"} 1");
	has_line(page, "ecw_storage_retries_total 3");
	has_line(page, "ecw_jobs_in_flight 2");
	has_line(page, "ecw_messages_poisoned_total{reason=\"permanent\"} 2");
	has_line(page, "ecw_messages_poisoned_total{reason=\"max-dequeue\"} 1");
	has_line(page, "ecw_messages_received_total 7");
	has_line(page, "ecw_last_receive_timestamp_seconds 1700000050");
	free(page);
	/* An empty but successful receive still moves the timestamp. */
	ecw_metrics_received(1700000200, 0);
	page = render();
	has_line(page, "ecw_messages_received_total 7");
	has_line(page, "ecw_last_receive_timestamp_seconds 1700000200");
	free(page);
}

static void test_metrics__empty_page(void **state)
{
	(void)state;
	char *page = render();
	has_line(page, "ecw_storage_retries_total 0");
	has_line(page, "ecw_jobs_in_flight 0");
	has_line(page, "ecw_messages_received_total 0");
	has_line(page, "ecw_last_receive_timestamp_seconds 0");
	assert_false(str_contains(page, "ecw_messages_total{"));
	assert_false(str_contains(page, "_bucket"));
	free(page);

	/* reset really zeroes. */
	ecw_metrics_message("move", "succeeded", 1);
	ecw_metrics_retry();
	ecw_metrics_inflight_add(4);
	ecw_metrics_received(5, 1);
	ecw_metrics_reset();
	page = render();
	assert_false(str_contains(page, "job=\"move\""));
	has_line(page, "ecw_storage_retries_total 0");
	has_line(page, "ecw_jobs_in_flight 0");
	has_line(page, "ecw_last_receive_timestamp_seconds 0");
	free(page);
}

/* What alerts count from is there at 0 before the first event, and counts
 * on from there; the duration histogram is not declared (no alert needs it). */
static void test_metrics__declared_series_start_at_zero(void **state)
{
	static const char *const jobs[] = {"archive", "index-by-email"};
	(void)state;

	ecw_metrics_declare(jobs[0]);
	ecw_metrics_declare(jobs[1]);
	char *page = render();
	has_line(page, "ecw_messages_poisoned_total{reason=\"permanent\"} 0");
	has_line(page, "ecw_messages_poisoned_total{reason=\"max-dequeue\"} 0");
	for (size_t j = 0; j < 2; j++)
		for (int o = 0; o < 3; o++) {
			char want[128];
			snprintf(want, sizeof(want), "ecw_messages_total{job=\"%s\",outcome=\"%s\"} 0",
			         jobs[j], (const char *[]){"succeeded", "retried", "poisoned"}[o]);
			has_line(page, want);
		}
	has_line(page, "ecw_messages_deduplicated_total{job=\"archive\"} 0");
	has_line(page, "ecw_messages_deduplicated_total{job=\"index-by-email\"} 0");
	assert_false(str_contains(page, "ecw_job_duration_seconds_count{"));
	free(page);

	/* Declared again (a second start in one process): still one series each. */
	ecw_metrics_declare(jobs[0]);
	ecw_metrics_poisoned("permanent");
	ecw_metrics_message("archive", "poisoned", 0.5);
	page = render();
	has_line(page, "ecw_messages_poisoned_total{reason=\"permanent\"} 1");
	has_line(page, "ecw_messages_total{job=\"archive\",outcome=\"poisoned\"} 1");
	has_line(page, "ecw_messages_total{job=\"archive\",outcome=\"succeeded\"} 0");
	size_t n = 0;
	for (const char *p = page;
	     (p = strstr(p, "ecw_messages_total{job=\"archive\",outcome=\"poisoned\"}")); p++)
		n++;
	assert_int_equal(n, 1);
	free(page);
}

static void test_metrics__histogram_cumulative(void **state)
{
	(void)state;
	static const char *const le[] = {"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
	                                 "1",     "2.5",  "5",     "10",   "30",  "60",   "+Inf"};
	/* le is inclusive: 0.005 lands in the first bucket. NaN and negative
	 * times count as 0. */
	static const double obs[] = {0.001, 0.005, 0.3, 2, 100, 0.0 / 0.0, -1, 0.0100001};
	static const long want[] = {4, 4, 5, 5, 5, 5, 6, 6, 7, 7, 7, 7, 7, 8};
	for (size_t i = 0; i < sizeof(obs) / sizeof(obs[0]); i++)
		ecw_metrics_message("move", "succeeded", obs[i]);
	ecw_metrics_message("index", "succeeded", 45);

	char *page = render();
	double prev = 0;
	for (size_t i = 0; i < sizeof(le) / sizeof(le[0]); i++) {
		char sample[128];
		snprintf(sample, sizeof(sample), "ecw_job_duration_seconds_bucket{job=\"move\",le=\"%s\"}",
		         le[i]);
		double v = sample_value(page, sample);
		if (v != (double)want[i])
			fail_msg("%s is %g, want %ld", sample, v, want[i]);
		assert_true(v >= prev);
		prev = v;
	}
	has_line(page, "ecw_job_duration_seconds_count{job=\"move\"} 8");
	double sum = sample_value(page, "ecw_job_duration_seconds_sum{job=\"move\"}");
	assert_true(sum > 102.3160001 - 1e-9 && sum < 102.3160001 + 1e-9);
	has_line(page, "ecw_job_duration_seconds_bucket{job=\"index\",le=\"30\"} 0");
	has_line(page, "ecw_job_duration_seconds_bucket{job=\"index\",le=\"60\"} 1");
	has_line(page, "ecw_job_duration_seconds_bucket{job=\"index\",le=\"+Inf\"} 1");
	has_line(page, "ecw_job_duration_seconds_sum{job=\"index\"} 45");
	has_line(page, "ecw_job_duration_seconds_count{job=\"index\"} 1");
	assert_int_equal(count_prefix(page, "ecw_job_duration_seconds_bucket{job=\"move\""), 14);
	free(page);
}

static void test_metrics__label_escaping(void **state)
{
	(void)state;
	char long_job[300];
	memset(long_job, 'j', sizeof(long_job) - 1);
	long_job[sizeof(long_job) - 1] = '\0';

	ecw_metrics_message("a\"b\\c\nd", "succeeded", 0);
	ecw_metrics_message("bad\xff", "succeeded", 0);
	ecw_metrics_message(long_job, "succeeded", 0);
	ecw_metrics_message(NULL, NULL, 0);
	ecw_metrics_storage(NULL, 503);
	char *page = render();
	has_line(page, "ecw_messages_total{job=\"a\\\"b\\\\c\\nd\",outcome=\"succeeded\"} 1");
	has_line(page, "ecw_messages_total{job=\"bad\xef\xbf\xbd\",outcome=\"succeeded\"} 1");
	char line[512];
	snprintf(line, sizeof(line), "ecw_messages_total{job=\"%.128s\",outcome=\"succeeded\"} 1", long_job);
	has_line(page, line);
	has_line(page, "ecw_messages_total{job=\"\",outcome=\"\"} 1");
	has_line(page, "ecw_storage_requests_total{op=\"\",status=\"503\"} 1");
	free(page);
}

static void test_metrics__label_sets_capped(void **state)
{
	(void)state;
	char job[32];
	for (int i = 0; i < 3000; i++) {
		snprintf(job, sizeof(job), "flood-%d", i);
		ecw_metrics_message(job, i % 2 ? "succeeded" : "poisoned", 0.01);
		snprintf(job, sizeof(job), "op-%d", i);
		ecw_metrics_storage(job, 200 + i % 300);
		ecw_metrics_poisoned(job);
	}
	char *page = render();
	int series = count_prefix(page, "ecw_messages_total{");
	assert_true(series <= 1024 + 64 + 1);
	assert_true(series >= 1024);
	has_line(page, "ecw_messages_total{job=\"flood-0\",outcome=\"poisoned\"} 1");
	assert_true(str_contains(page, "ecw_messages_total{job=\"other\",outcome=\"succeeded\"} "));
	assert_false(str_contains(page, "job=\"flood-2999\""));
	assert_true(count_prefix(page, "ecw_job_duration_seconds_count{") <= 1024 + 64 + 1);
	assert_true(count_prefix(page, "ecw_storage_requests_total{") <= 1024 + 64 + 1);
	assert_true(str_contains(page, "ecw_storage_requests_total{op=\"other\","));
	assert_true(count_prefix(page, "ecw_messages_poisoned_total{") <= 1024 + 64 + 1);
	has_line(page, "ecw_messages_poisoned_total{reason=\"other\"} 1976");

	/* Nothing is lost: folded counts add up to everything recorded. */
	double total = 0, storage = 0, count = 0;
	for (const char *p = page; *p;) {
		const char *nl = strchr(p, '\n');
		const char *sp = memchr(p, ' ', (size_t)(nl - p));
		if (str_starts(p, "ecw_messages_total{"))
			total += strtod(sp + 1, NULL);
		if (str_starts(p, "ecw_storage_requests_total{"))
			storage += strtod(sp + 1, NULL);
		if (str_starts(p, "ecw_job_duration_seconds_count{"))
			count += strtod(sp + 1, NULL);
		p = nl + 1;
	}
	assert_true(total == 3000);
	assert_true(storage == 3000);
	assert_true(count == 3000);
	free(page);
}

#define THREADS 8
#define PER_THREAD 2000

static void *record_many(void *arg)
{
	(void)arg;
	for (int i = 0; i < PER_THREAD; i++) {
		ecw_metrics_inflight_add(1);
		ecw_metrics_message(i % 2 ? "move" : "index", "succeeded", 0.5);
		ecw_metrics_storage("queue.delete", 204);
		ecw_metrics_retry();
		ecw_metrics_inflight_add(-1);
		if (i % 100 == 0)
			free(ecw_metrics_render());
	}
	return NULL;
}

static void test_metrics__concurrent_recording(void **state)
{
	(void)state;
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, record_many, NULL), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	char *page = render();
	has_line(page, "ecw_messages_total{job=\"move\",outcome=\"succeeded\"} 8000");
	has_line(page, "ecw_messages_total{job=\"index\",outcome=\"succeeded\"} 8000");
	has_line(page, "ecw_job_duration_seconds_sum{job=\"move\"} 4000");
	has_line(page, "ecw_storage_requests_total{op=\"queue.delete\",status=\"204\"} 16000");
	has_line(page, "ecw_storage_retries_total 16000");
	has_line(page, "ecw_jobs_in_flight 0");
	free(page);
}

/* ---- the server ------------------------------------------------------------ */

struct answer {
	long status;
	struct ecw_buf body;
	char content_type[128];
	char allow[64];
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct answer *a = ud;
	return ecw_buf_add(&a->body, p, size * n) == 0 ? size * n : 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct answer *a = ud;
	size_t len = size * n;
	if (len > 6 && strncasecmp(p, "Allow:", 6) == 0) {
		size_t v = len - 6;
		while (v > 0 && (p[6 + v - 1] == '\r' || p[6 + v - 1] == '\n'))
			v--;
		snprintf(a->allow, sizeof(a->allow), "%.*s", (int)v, p + 6);
	}
	return len;
}

/* One request to 127.0.0.1:port; answer_dispose when done. */
static void http(struct answer *a, const char *method, const char *host, int port, const char *path)
{
	char url[256];
	char *ct = NULL;
	CURL *c = curl_easy_init();

	assert_non_null(c);
	memset(a, 0, sizeof(*a));
	ecw_buf_init(&a->body, 1 << 20);
	snprintf(url, sizeof(url), "http://%s:%d%s", host, port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROXY, ""); /* never an http_proxy from the environment */
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "POST") == 0)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "a=1");
	else if (strcmp(method, "GET") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	CURLcode rc = curl_easy_perform(c);
	if (rc != CURLE_OK)
		fail_msg("%s %s: %s", method, url, curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
	curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
	snprintf(a->content_type, sizeof(a->content_type), "%s", ct ? ct : "");
	curl_easy_cleanup(c);
}

static void answer_dispose(struct answer *a)
{
	ecw_buf_dispose(&a->body);
}

static void expect(const char *method, int port, const char *path, long status, const char *body)
{
	struct answer a;
	http(&a, method, "127.0.0.1", port, path);
	if (a.status != status)
		fail_msg("%s %s: status %ld, want %ld", method, path, a.status, status);
	if (body)
		assert_string_equal(ecw_buf_cstr(&a.body), body);
	answer_dispose(&a);
}

static void sleep_real_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

static struct ecw_metrics_server *start(const char *listen)
{
	struct ecw_metrics_server *s = NULL;
	int err = ecw_metrics_start(&s, listen);
	if (err < 0)
		fail_msg("ecw_metrics_start(%s): %s", listen, ecw_error_last()->message);
	assert_non_null(s);
	assert_true(ecw_metrics_port(s) > 0);
	return s;
}

static void test_metrics__http_metrics(void **state)
{
	(void)state;
	struct ecw_metrics_server *s = start("127.0.0.1:0");
	int port = ecw_metrics_port(s);
	struct answer a;

	ecw_metrics_message("move", "succeeded", 0.02);
	http(&a, "GET", "127.0.0.1", port, "/metrics");
	assert_int_equal(a.status, 200);
	assert_string_equal(a.content_type, "text/plain; version=0.0.4; charset=utf-8");
	char *page = render();
	assert_string_equal(ecw_buf_cstr(&a.body), page);
	free(page);
	has_line(ecw_buf_cstr(&a.body), "ecw_messages_total{job=\"move\",outcome=\"succeeded\"} 1");
	answer_dispose(&a);

	http(&a, "HEAD", "127.0.0.1", port, "/metrics");
	assert_int_equal(a.status, 200);
	assert_int_equal(a.body.len, 0);
	answer_dispose(&a);

	/* A query string does not change the resource. */
	expect("GET", port, "/metrics?x=1", 200, NULL);
	ecw_metrics_stop(s);
}

static void test_metrics__http_healthz_window(void **state)
{
	(void)state;
	struct ecw_metrics_server *s = start("127.0.0.1:0");
	int port = ecw_metrics_port(s);

	/* No heartbeat yet: the loop has not gone round. */
	expect("GET", port, "/healthz", 503, NULL);
	ecw_metrics_set_liveness_window(500);
	ecw_metrics_heartbeat();
	expect("GET", port, "/healthz", 200, "ok\n");
	expect("HEAD", port, "/healthz", 200, "");
	sleep_real_ms(1000);
	expect("GET", port, "/healthz", 503, NULL);
	ecw_metrics_heartbeat();
	expect("GET", port, "/healthz", 200, "ok\n");
	ecw_metrics_stop(s);
}

static void test_metrics__http_readyz(void **state)
{
	(void)state;
	struct ecw_metrics_server *s = start("localhost:0");
	int port = ecw_metrics_port(s);

	expect("GET", port, "/readyz", 503, NULL);
	ecw_metrics_set_ready(true);
	expect("GET", port, "/readyz", 200, "ok\n");
	ecw_metrics_set_ready(false);
	expect("GET", port, "/readyz", 503, NULL);
	ecw_metrics_set_ready(true);
	expect("GET", port, "/readyz", 200, "ok\n");
	ecw_metrics_stop(s);
}

static void test_metrics__http_404_and_405(void **state)
{
	(void)state;
	struct ecw_metrics_server *s = start("127.0.0.1:0");
	int port = ecw_metrics_port(s);
	struct answer a;

	expect("GET", port, "/", 404, NULL);
	expect("GET", port, "/nope", 404, NULL);
	expect("GET", port, "/metrics/", 404, NULL);
	expect("GET", port, "/Metrics", 404, NULL);
	expect("POST", port, "/nope", 404, NULL);

	http(&a, "POST", "127.0.0.1", port, "/metrics");
	assert_int_equal(a.status, 405);
	assert_true(str_contains(a.allow, "GET"));
	assert_true(str_contains(a.allow, "HEAD"));
	answer_dispose(&a);
	expect("DELETE", port, "/healthz", 405, NULL);
	expect("PUT", port, "/readyz", 405, NULL);
	/* The server is still fine afterwards. */
	expect("GET", port, "/metrics", 200, NULL);
	ecw_metrics_stop(s);
}

static void test_metrics__ipv6(void **state)
{
	(void)state;
	struct ecw_metrics_server *s = NULL;
	if (ecw_metrics_start(&s, "[::1]:0") < 0) {
		/* A machine without IPv6 loopback: then the promise is a clear
		 * error naming the address, and no server. */
		assert_null(s);
		assert_non_null(strstr(ecw_error_last()->message, "::1"));
		return;
	}
	struct answer a;
	http(&a, "GET", "[::1]", ecw_metrics_port(s), "/metrics");
	assert_int_equal(a.status, 200);
	answer_dispose(&a);
	ecw_metrics_stop(s);
}

static void start_fails(const char *listen, int code, const char *in_message)
{
	struct ecw_metrics_server *s = (struct ecw_metrics_server *)1;
	int err = ecw_metrics_start(&s, listen);
	if (err != code)
		fail_msg("ecw_metrics_start(%s): %s, want %s (%s)", listen ? listen : "NULL",
		         ecw_error_name(err), ecw_error_name(code), ecw_error_last()->message);
	assert_null(s);
	assert_int_equal(ecw_error_last()->code, code);
	if (!str_contains(ecw_error_last()->message, in_message))
		fail_msg("message [%s] lacks [%s]", ecw_error_last()->message, in_message);
}

static void test_metrics__start_errors(void **state)
{
	(void)state;
	start_fails(NULL, ECW_EINVALID, "empty");
	start_fails("", ECW_EINVALID, "empty");
	start_fails("nonsense", ECW_EINVALID, "\"nonsense\"");
	start_fails("127.0.0.1", ECW_EINVALID, "\"127.0.0.1\"");
	start_fails("127.0.0.1:", ECW_EINVALID, "port");
	start_fails("127.0.0.1:http", ECW_EINVALID, "port");
	start_fails("127.0.0.1:-1", ECW_EINVALID, "port");
	start_fails("127.0.0.1:65536", ECW_EINVALID, "65536");
	start_fails("127.0.0.1:123456", ECW_EINVALID, "port");
	start_fails("1.2.3:80", ECW_EINVALID, "\"1.2.3:80\"");
	start_fails("example.com:80", ECW_EINVALID, "example.com:80");
	start_fails(":9464", ECW_EINVALID, "\":9464\"");
	start_fails("::1:9464", ECW_EINVALID, "brackets");
	start_fails("[::1:9464", ECW_EINVALID, "[::1:9464");
	start_fails("[::1]9464", ECW_EINVALID, "[::1]9464");
	start_fails("[1.2.3.4]:80", ECW_EINVALID, "[1.2.3.4]:80");
	/* Not an address of this machine (TEST-NET-1). */
	start_fails("192.0.2.1:0", ECW_EINVALID, "192.0.2.1:0");

	/* A port in use. */
	struct ecw_metrics_server *s = start("127.0.0.1:0");
	char busy[64];
	snprintf(busy, sizeof(busy), "127.0.0.1:%d", ecw_metrics_port(s));
	start_fails(busy, ECW_ERROR, busy);
	assert_true(str_contains(ecw_error_last()->message, "in use"));
	ecw_metrics_stop(s);

	/* Once stopped, the port is free again. */
	s = start(busy);
	ecw_metrics_stop(s);
	ecw_metrics_stop(NULL);
}

/* The scheduled audits' gauges: set, not added up; the newest result per
 * job wins whatever order they are shown in; labels escaped like the others. */
static void test_metrics__audit_gauges(void **state)
{
	static const char *const kinds[] = {"missing", "stale", "orphan", "conflict"};
	const uint64_t first[] = {3, 0, 1, 0}, second[] = {0, 0, 0, 2}, older[] = {9, 9, 9, 9};
	(void)state;

	char *page = render();
	assert_false(str_contains(page, "ecw_audit_drift{"));
	assert_false(str_contains(page, "ecw_audit_last_run_timestamp_seconds{"));
	free(page);

	ecw_metrics_audit_declare("by-email", 86400);
	ecw_metrics_audit_declare("by-email", 3600); /* the shortest schedule's */
	ecw_metrics_audit_declare("by-email", 604800);
	ecw_metrics_audit("by-email", 1700000000, kinds, first, 4);
	page = render();
	assert_true(str_contains(page, "# TYPE ecw_audit_drift gauge\n"));
	assert_true(str_contains(page, "# TYPE ecw_audit_last_run_timestamp_seconds gauge\n"));
	assert_true(str_contains(page, "# TYPE ecw_audit_period_seconds gauge\n"));
	has_line(page, "ecw_audit_drift{job=\"by-email\",kind=\"missing\"} 3");
	has_line(page, "ecw_audit_drift{job=\"by-email\",kind=\"stale\"} 0");
	has_line(page, "ecw_audit_drift{job=\"by-email\",kind=\"orphan\"} 1");
	has_line(page, "ecw_audit_drift{job=\"by-email\",kind=\"conflict\"} 0");
	has_line(page, "ecw_audit_last_run_timestamp_seconds{job=\"by-email\"} 1700000000");
	has_line(page, "ecw_audit_period_seconds{job=\"by-email\"} 3600");
	free(page);

	/* A newer result replaces it (a gauge, not a sum); an older one, read
	 * late from another schedule's marker, does not. */
	ecw_metrics_audit("by-email", 1700003600, kinds, second, 4);
	ecw_metrics_audit("by-email", 1699990000, kinds, older, 4);
	ecw_metrics_audit("a\"b\nc", 1700000000, kinds, first, 4);
	page = render();
	has_line(page, "ecw_audit_drift{job=\"by-email\",kind=\"missing\"} 0");
	has_line(page, "ecw_audit_drift{job=\"by-email\",kind=\"conflict\"} 2");
	has_line(page, "ecw_audit_last_run_timestamp_seconds{job=\"by-email\"} 1700003600");
	has_line(page, "ecw_audit_drift{job=\"a\\\"b\\nc\",kind=\"missing\"} 3");
	free(page);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_metrics__help_and_type, reset_setup),
	    cmocka_unit_test_setup(test_metrics__counters_add_up, reset_setup),
	    cmocka_unit_test_setup(test_metrics__empty_page, reset_setup),
	    cmocka_unit_test_setup(test_metrics__declared_series_start_at_zero, reset_setup),
	    cmocka_unit_test_setup(test_metrics__histogram_cumulative, reset_setup),
	    cmocka_unit_test_setup(test_metrics__label_escaping, reset_setup),
	    cmocka_unit_test_setup(test_metrics__label_sets_capped, reset_setup),
	    cmocka_unit_test_setup(test_metrics__concurrent_recording, reset_setup),
	    cmocka_unit_test_setup(test_metrics__http_metrics, reset_setup),
	    cmocka_unit_test_setup(test_metrics__http_healthz_window, reset_setup),
	    cmocka_unit_test_setup(test_metrics__http_readyz, reset_setup),
	    cmocka_unit_test_setup(test_metrics__http_404_and_405, reset_setup),
	    cmocka_unit_test_setup(test_metrics__ipv6, reset_setup),
	    cmocka_unit_test_setup(test_metrics__start_errors, reset_setup),
	    cmocka_unit_test_setup(test_metrics__audit_gauges, reset_setup),
	};
	return cmocka_run_group_tests_name("metrics", tests, group_setup, group_teardown);
}
