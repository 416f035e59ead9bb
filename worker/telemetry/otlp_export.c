/* SPDX-License-Identifier: MIT */
/* otlp_export.c - the span exporter (see telemetry.h): a fixed ring of spans,
 * one thread that sends them in batches over libcurl, and the counters.
 *
 * The job threads only ever take the ring's lock to copy a span in: the
 * thread copies a batch out under the lock and sends it without it, so a
 * slow or absent collector costs the jobs nothing but dropped spans. The
 * collector's answer is untrusted: only its status and a Retry-After are
 * read, its body is discarded and capped (RESPONSE_MAX), redirects are not
 * followed.
 *
 * A batch the collector could not take for now is tried again, as the OTLP
 * specification asks: on 429, 502, 503 or 504, or when no answer came
 * (refused, reset, timed out). At most RETRY_MAX times, after a jittered
 * backoff (its cap RETRY_BASE_MS doubling per try) or the collector's Retry-After
 * (seconds, capped), waited on the condition variable so that a stop cuts
 * it short. Spans keep arriving in the ring meanwhile (dropped and counted
 * when it is full), so a collector that is down costs memory nothing beyond
 * the ring. Any other answer drops the batch at once.
 *
 * libcurl stays in this file; its errors are turned into a word for the
 * log here. The URL and headers are never logged (a URL may hold user
 * info, a header an API key). */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ecw_buf.h"
#include "ecw_clock.h"
#include "ecw_log.h"
#include "telemetry.h"

#define RESPONSE_MAX ((size_t)64 * 1024)
#define CONNECT_TIMEOUT_MS 5000
/* One request's body at most: a batch of 512 spans is ~600 KiB. */
#define BODY_MAX ((size_t)64 * 1024 * 1024)
/* A failed export is logged at most this often (a collector that is down
 * would otherwise log once per batch). */
#define FAIL_LOG_EVERY_MS 60000
#define RETRY_MAX 3
#define RETRY_BASE_MS 1000
#define RETRY_AFTER_MAX_MS 30000

enum send_result {
	SENT,
	SEND_AGAIN, /* not taken for now: may be tried again */
	SEND_FAILED,
};

struct ecw_otlp_exporter {
	struct ecw_otlp_config cfg;
	struct curl_slist *headers;
	CURL *curl;

	pthread_mutex_t mu;
	pthread_cond_t cv;          /* the thread: spans to send, or stop */
	struct ecw_otlp_span *ring; /* cfg.max_queue slots */
	size_t head, count;
	bool stop;
	int64_t flush_until_ms;    /* set with stop: the flush's deadline */
	_Atomic int64_t cut_at_ms; /* a send in progress gives up then (0: never) */
	pthread_t tid;
	bool started;

	struct ecw_otlp_span *batch; /* the thread's: cfg.max_batch slots */
	struct ecw_buf body, redacted;
	int64_t last_fail_log_ms;
	int64_t retry_after_ms; /* the last answer's Retry-After (-1: none) */
	uint64_t jitter;        /* the backoff's random state */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init(void)
{
	curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The collector's body: counted, never kept; over RESPONSE_MAX the transfer
 * is cut (the status was already read). */
static size_t discard_body(char *p, size_t size, size_t n, void *payload)
{
	size_t *seen = payload;

	(void)p;
	*seen += size * n;
	return *seen > RESPONSE_MAX ? 0 : size * n;
}

/* Cuts a send short once shutdown's flush deadline has passed. */
static int on_progress(void *payload, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct ecw_otlp_exporter *e = payload;
	int64_t cut = atomic_load(&e->cut_at_ms);

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return cut && ecw_clock_now_ms() >= cut;
}

/* Logs a failed export, at most once a FAIL_LOG_EVERY_MS. */
static void log_failure(struct ecw_otlp_exporter *e, const char *why, long status, size_t spans)
{
	int64_t now = ecw_clock_now_ms();
	struct ecw_log_line *l;

	if (e->last_fail_log_ms && now - e->last_fail_log_ms < FAIL_LOG_EVERY_MS)
		return;
	e->last_fail_log_ms = now;
	l = ecw_log_begin(ECW_LOG_WARN, "otlp_export_failed");
	ecw_log_str(l, "error", why);
	if (status)
		ecw_log_int(l, "status", status);
	ecw_log_int(l, "spans_dropped", (int64_t)spans);
	ecw_log_end(l);
}

/* "Retry-After: <seconds>" of the collector's answer, capped; an HTTP date
 * or anything else is ignored (the backoff applies). */
static size_t read_header(char *p, size_t size, size_t n, void *payload)
{
	struct ecw_otlp_exporter *e = payload;
	size_t len = size * n, i = 12;
	int64_t secs = 0;

	if (len < 13 || strncasecmp(p, "Retry-After:", 12) != 0)
		return len;
	while (i < len && (p[i] == ' ' || p[i] == '\t'))
		i++;
	if (i >= len || p[i] < '0' || p[i] > '9')
		return len;
	for (; i < len && p[i] >= '0' && p[i] <= '9'; i++)
		if ((secs = secs * 10 + (p[i] - '0')) * 1000 > RETRY_AFTER_MAX_MS)
			secs = RETRY_AFTER_MAX_MS / 1000;
	e->retry_after_ms = secs * 1000;
	return len;
}

/* Encodes spans[0..n) into e->redacted: false (logged) when it cannot. */
static bool encode_batch(struct ecw_otlp_exporter *e, size_t n)
{
	ecw_buf_reset(&e->body);
	ecw_buf_reset(&e->redacted);
	/* The spans hold error texts: they leave the process redacted, as a
	 * log line would. */
	if (ecw_otlp_encode(&e->body, &e->cfg, e->batch, n) < 0 ||
	    ecw_log_redact(&e->redacted, e->body.ptr, e->body.len) < 0) {
		log_failure(e, "the batch could not be encoded (out of memory)", 0, n);
		return false;
	}
	return true;
}

/* POSTs the encoded batch of n spans within timeout_ms. A failure is logged
 * only when it is the last try (last). */
static enum send_result post_batch(struct ecw_otlp_exporter *e, size_t n, int64_t timeout_ms, bool last)
{
	size_t seen = 0;
	long status = 0;
	CURLcode rc;
	bool again;

	e->retry_after_ms = -1;
	curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, e->redacted.ptr);
	curl_easy_setopt(e->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)e->redacted.len);
	curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, (long)(timeout_ms > 0 ? timeout_ms : 1));
	curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, &seen);
	rc = curl_easy_perform(e->curl);
	if (rc == CURLE_OK || rc == CURLE_WRITE_ERROR)
		curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 200 && status < 300)
		return SENT;
	/* No answer (but not cut short by the stop), or one that says "later". */
	again = status == 0 ? rc != CURLE_ABORTED_BY_CALLBACK
			    : status == 429 || status == 502 || status == 503 || status == 504;
	if (!again || last)
		log_failure(e,
			    rc != CURLE_OK && status == 0 ? curl_easy_strerror(rc)
							  : "the collector refused the batch",
			    status, n);
	return again ? SEND_AGAIN : SEND_FAILED;
}

/* The wait before try number attempt + 1 (attempt >= 1): the collector's
 * Retry-After, else a random wait in [RETRY_BASE_MS / 2,
 * RETRY_BASE_MS * 2^(attempt-1)] (jittered, never shorter than half the base). */
static int64_t backoff_ms(struct ecw_otlp_exporter *e, int attempt)
{
	int64_t cap = (int64_t)RETRY_BASE_MS << (attempt - 1);

	if (e->retry_after_ms >= 0)
		return e->retry_after_ms;
	e->jitter = e->jitter * 6364136223846793005u + 1442695040888963407u; /* an LCG is enough here */
	return RETRY_BASE_MS / 2 + (int64_t)((e->jitter >> 33) % (uint64_t)(cap - RETRY_BASE_MS / 2 + 1));
}

/* Waits ms before the next try: false when the exporter stops and the
 * wait would end after the stop's flush deadline. Under e->mu. */
static bool wait_to_retry(struct ecw_otlp_exporter *e, int64_t ms)
{
	int64_t until = ecw_clock_now_ms() + ms, now;

	while ((now = ecw_clock_now_ms()) < until) {
		if (e->stop && until > e->flush_until_ms)
			return false;
		ecw_clock_cond_wait_ms(&e->cv, &e->mu, until - now);
	}
	return true;
}

/* Sends the n spans of e->batch, trying again as the top of the file says,
 * and counts them exported or dropped. Called without e->mu, which it takes
 * only to wait between tries. */
static void deliver(struct ecw_otlp_exporter *e, size_t n)
{
	enum send_result r = SEND_FAILED;

	if (encode_batch(e, n)) {
		for (int attempt = 0;; attempt++) {
			int64_t timeout;
			bool go;

			pthread_mutex_lock(&e->mu);
			timeout = e->stop ? e->flush_until_ms - ecw_clock_now_ms() : e->cfg.timeout_ms;
			if (timeout > e->cfg.timeout_ms)
				timeout = e->cfg.timeout_ms;
			pthread_mutex_unlock(&e->mu);
			if ((r = post_batch(e, n, timeout, attempt == RETRY_MAX)) != SEND_AGAIN ||
			    attempt == RETRY_MAX)
				break;
			pthread_mutex_lock(&e->mu);
			go = wait_to_retry(e, backoff_ms(e, attempt + 1));
			pthread_mutex_unlock(&e->mu);
			if (!go) {
				log_failure(e, "the collector did not take the batch before the stop", 0, n);
				break;
			}
			ecw_metrics_otlp_retry();
		}
	}
	if (r == SENT)
		ecw_metrics_otlp_exported((int64_t)n);
	else
		ecw_metrics_otlp_dropped("export_failed", (int64_t)n);
}

/* Takes up to max_batch spans off the ring (under e->mu). */
static size_t take_batch(struct ecw_otlp_exporter *e)
{
	size_t n = e->count < e->cfg.max_batch ? e->count : e->cfg.max_batch;

	for (size_t i = 0; i < n; i++) {
		e->batch[i] = e->ring[e->head];
		e->head = (e->head + 1) % e->cfg.max_queue;
	}
	e->count -= n;
	return n;
}

/* Sends a batch when one is full or the oldest span waited schedule_delay;
 * at stop, sends what is left until the flush deadline and drops the rest. */
static void *export_thread(void *p)
{
	struct ecw_otlp_exporter *e = p;
	int64_t next_ms = ecw_clock_now_ms() + e->cfg.schedule_delay_ms;

	pthread_mutex_lock(&e->mu);
	for (;;) {
		int64_t now = ecw_clock_now_ms();
		if (e->stop && (e->count == 0 || now >= e->flush_until_ms))
			break;
		if (!e->stop && e->count < e->cfg.max_batch && now < next_ms) {
			ecw_clock_cond_wait_ms(&e->cv, &e->mu, next_ms - now);
			continue;
		}
		size_t n = take_batch(e);
		pthread_mutex_unlock(&e->mu);
		if (n > 0)
			deliver(e, n);
		pthread_mutex_lock(&e->mu);
		next_ms = ecw_clock_now_ms() + e->cfg.schedule_delay_ms;
	}
	if (e->count > 0)
		ecw_metrics_otlp_dropped("shutdown", (int64_t)e->count);
	e->count = 0;
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

static int set_up_curl(struct ecw_otlp_exporter *e)
{
	char line[ECW_OTLP_KEY_MAX + ECW_OTLP_VALUE_MAX + 3];
	struct curl_slist *h;

	pthread_once(&curl_once, curl_init);
	if (curl_init_result != CURLE_OK)
		return ecw_error_set(ECW_ERROR, "libcurl initialisation failed: %s",
				     curl_easy_strerror(curl_init_result));
	if (!(e->curl = curl_easy_init()))
		return ecw_error_set(ECW_ENOMEM, "curl_easy_init failed");
	if (!(h = curl_slist_append(NULL, "Content-Type: application/json")))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	e->headers = h;
	/* No "Expect: 100-continue" wait on a large batch. */
	if (!(h = curl_slist_append(e->headers, "Expect:")))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	for (size_t i = 0; i < e->cfg.nheaders; i++) {
		snprintf(line, sizeof(line), "%s: %s", e->cfg.headers[i].key, e->cfg.headers[i].value);
		h = curl_slist_append(e->headers, line);
		memset(line, 0, sizeof(line)); /* an API key does not linger on the stack */
		if (!h)
			return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	curl_easy_setopt(e->curl, CURLOPT_URL, e->cfg.url);
	curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, e->headers);
	curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, discard_body);
	curl_easy_setopt(e->curl, CURLOPT_HEADERFUNCTION, read_header);
	curl_easy_setopt(e->curl, CURLOPT_HEADERDATA, e);
	curl_easy_setopt(e->curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)RESPONSE_MAX);
	curl_easy_setopt(e->curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(e->curl, CURLOPT_XFERINFODATA, e);
	curl_easy_setopt(e->curl, CURLOPT_NOPROGRESS, 0L);
	return 0;
}

int ecw_otlp_exporter_new(struct ecw_otlp_exporter **out, const struct ecw_otlp_config *cfg)
{
	struct ecw_otlp_exporter *e = calloc(1, sizeof(*e));
	int err;

	*out = NULL;
	if (!e)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	e->cfg = *cfg;
	e->jitter = (uint64_t)ecw_clock_wall_ms() ^ (uint64_t)(uintptr_t)e;
	pthread_mutex_init(&e->mu, NULL);
	ecw_clock_cond_init(&e->cv);
	ecw_buf_init(&e->body, BODY_MAX);
	ecw_buf_init(&e->redacted, BODY_MAX);
	e->ring = calloc(cfg->max_queue, sizeof(*e->ring));
	e->batch = calloc(cfg->max_batch, sizeof(*e->batch));
	if (!e->ring || !e->batch) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto fail;
	}
	if ((err = set_up_curl(e)) < 0)
		goto fail;
	if (pthread_create(&e->tid, NULL, export_thread, e) != 0) {
		err = ecw_error_set(ECW_ERROR, "could not start the OTLP export thread");
		goto fail;
	}
	e->started = true;
	ecw_metrics_otlp_declare();
	*out = e;
	return 0;
fail:
	ecw_otlp_exporter_free(e, 0);
	return err;
}

void ecw_otlp_submit(struct ecw_otlp_exporter *e, const struct ecw_otlp_span *span)
{
	bool wake;

	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	if (e->stop || e->count == e->cfg.max_queue) {
		bool stopping = e->stop;
		pthread_mutex_unlock(&e->mu);
		ecw_metrics_otlp_dropped(stopping ? "shutdown" : "queue_full", 1);
		return;
	}
	e->ring[(e->head + e->count) % e->cfg.max_queue] = *span;
	e->count++;
	wake = e->count == e->cfg.max_batch;
	pthread_mutex_unlock(&e->mu);
	if (wake)
		pthread_cond_signal(&e->cv);
}

void ecw_otlp_exporter_free(struct ecw_otlp_exporter *e, int64_t flush_ms)
{
	if (!e)
		return;
	if (e->started) {
		pthread_mutex_lock(&e->mu);
		e->stop = true;
		e->flush_until_ms = ecw_clock_now_ms() + (flush_ms > 0 ? flush_ms : 0);
		atomic_store(&e->cut_at_ms, e->flush_until_ms > 0 ? e->flush_until_ms : 1);
		pthread_cond_signal(&e->cv);
		pthread_mutex_unlock(&e->mu);
		pthread_join(e->tid, NULL);
	}
	curl_slist_free_all(e->headers);
	if (e->curl)
		curl_easy_cleanup(e->curl);
	ecw_buf_dispose(&e->body);
	ecw_buf_dispose(&e->redacted);
	free(e->ring);
	free(e->batch);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv);
	/* The config holds the header values: wiped before the memory goes back. */
	memset(&e->cfg, 0, sizeof(e->cfg));
	free(e);
}
