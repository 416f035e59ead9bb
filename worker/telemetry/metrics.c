/* SPDX-License-Identifier: MIT */
/* metrics.c - the worker's counters and the page they render (see telemetry.h);
 * the HTTP endpoint that serves it is metrics_server.c.
 *
 * All counters live in one process-wide table under one mutex: recording is
 * a lookup in a short array and an add, and label sets are few. Labels come
 * partly from messages (a job name), so each labelled metric keeps at most
 * SERIES_MAX distinct label sets; past that a new set has its first label
 * (job, op, reason) folded into "other", and past SERIES_MAX + SERIES_SPARE
 * every label is "other". Label values are cut to LABEL_VALUE_MAX bytes and
 * bad UTF-8 becomes U+FFFD, since one invalid byte would make Prometheus
 * reject the whole page. Memory is therefore bounded whatever the queue holds. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_buf.h"
#include "ecw_clock.h"
#include "ecw_codec.h"
#include "ecw_log.h"
#include "telemetry.h"
#include "telemetry_private.h"

#define SERIES_MAX 1024
#define SERIES_SPARE 64
#define LABEL_VALUE_MAX 128
#define LABELS_MAX 2
#define NBUCKETS 14
#define LIVENESS_DEFAULT_MS 60000
#define HEARTBEAT_NEVER INT64_MIN

static const double bucket_le[NBUCKETS - 1] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
					       1,     2.5,  5,     10,   30,  60};
static const char *const bucket_name[NBUCKETS] = {"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
						  "1",     "2.5",  "5",     "10",   "30",  "60",   "+Inf"};

struct series {
	uint64_t hash;
	char *labels[LABELS_MAX];
	uint64_t count;             /* the counter, the gauge, or the histogram's _count */
	double sum;                 /* histogram */
	uint64_t buckets[NBUCKETS]; /* histogram, per bucket; rendered cumulative */
};

struct family {
	const char *name;
	const char *help;
	bool histogram;
	bool gauge; /* set, not added to: rendered as a gauge */
	size_t nlabels;
	const char *label_names[LABELS_MAX];
	struct series *series; /* in order of first use */
	size_t n, cap;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static struct family f_messages = {
	.name = "ecw_messages_total",
	.help = "Messages finished, by job and outcome.",
	.nlabels = 2,
	.label_names = {"job", "outcome"},
};
static struct family f_duration = {
	.name = "ecw_job_duration_seconds",
	.help = "Time from a message's receipt to its outcome, by job.",
	.histogram = true,
	.nlabels = 1,
	.label_names = {"job"},
};
static struct family f_storage = {
	.name = "ecw_storage_requests_total",
	.help = "Storage HTTP attempts, by operation and HTTP status (0: no answer).",
	.nlabels = 2,
	.label_names = {"op", "status"},
};
static struct family f_poisoned = {
	.name = "ecw_messages_poisoned_total",
	.help = "Messages moved to the poison queue, by reason.",
	.nlabels = 1,
	.label_names = {"reason"},
};

/* Duplicates that rode with a run of the same job and keys (deliver.c)
 * instead of running again. */
static struct family f_deduplicated = {
	.name = "ecw_messages_deduplicated_total",
	.help = "Messages concluded with the run of a duplicate in flight with them (same job and keys), "
		"by job.",
	.nlabels = 1,
	.label_names = {"job"},
};

static struct family f_otlp_exported = {
	.name = "ecw_otlp_spans_exported_total",
	.help = "Spans the OTLP collector accepted.",
	.nlabels = 0,
};
static struct family f_otlp_retries = {
	.name = "ecw_otlp_export_retries_total",
	.help = "OTLP export requests sent again after the collector answered 429, 502, 503 or 504, or "
		"not at all.",
	.nlabels = 0,
};
static struct family f_otlp_dropped = {
	.name = "ecw_otlp_spans_dropped_total",
	.help = "Spans not exported, by reason: queue_full (the export queue was full), export_failed (the "
		"collector did not take the batch), shutdown (left at the flush deadline).",
	.nlabels = 1,
	.label_names = {"reason"},
};

static struct family f_scheduled = {
	.name = "ecw_scheduled_messages_total",
	.help = "Messages this replica enqueued for schedules, by schedule.",
	.nlabels = 1,
	.label_names = {"schedule"},
};

/* The scheduled audits' latest finished results (schedules: audit:), as
 * every replica reads them from the markers. Gauges: drift is found and not
 * repaired (ecw_audit_drift). */
static struct family f_audit_drift = {
	.name = "ecw_audit_drift",
	.help = "Drift the latest finished scheduled audit of a job left: found and not repaired, by kind.",
	.gauge = true,
	.nlabels = 2,
	.label_names = {"job", "kind"},
};
static struct family f_audit_last_run = {
	.name = "ecw_audit_last_run_timestamp_seconds",
	.help = "Unix time the latest scheduled audit of a job finished (absent: none known yet).",
	.gauge = true,
	.nlabels = 1,
	.label_names = {"job"},
};
static struct family f_audit_period = {
	.name = "ecw_audit_period_seconds",
	.help = "How often a job is audited on schedule (its shortest schedule's period).",
	.gauge = true,
	.nlabels = 1,
	.label_names = {"job"},
};

/* The queues as the workers last looked at them (queue_watch.c): one Get
 * Queue Metadata, and a peek for the oldest message's age when there are
 * messages. */
static struct family f_queue_messages = {
	.name = "ecw_queue_approximate_messages",
	.help = "Messages on the queue, visible or not, as the service last counted them (approximate).",
	.gauge = true,
	.nlabels = 1,
	.label_names = {"queue"},
};
static struct family f_queue_age = {
	.name = "ecw_queue_oldest_message_age_seconds",
	.help = "Age of the queue's oldest visible message when last looked at (0: none visible).",
	.gauge = true,
	.nlabels = 1,
	.label_names = {"queue"},
};
static struct family f_paused = {
	.name = "ecw_paused",
	.help = "1 while the queue is paused for the fleet (ecworker pause): nothing is received from it.",
	.gauge = true,
	.nlabels = 1,
	.label_names = {"queue"},
};

static struct family f_job_blocked = {
	.name = "ecw_job_blocked",
	.help = "1 while the job is blocked by a table that does not exist: its messages are held, never "
		"poisoned.",
	.gauge = true,
	.nlabels = 2,
	.label_names = {"job", "table"},
};

/* Under g_lock. */
static uint64_t g_retries;
static int64_t g_in_flight;
static int64_t g_last_receive;
static uint64_t g_received;

static _Atomic int64_t g_heartbeat_ms = HEARTBEAT_NEVER;
static _Atomic int64_t g_window_ms = LIVENESS_DEFAULT_MS;
static atomic_bool g_ready;
static atomic_bool g_circuit_open;     /* circuit.c: /readyz says not ready while it is */
static atomic_int g_stalled;           /* job threads stalled: /healthz fails while any is */
static atomic_int g_concurrency_limit; /* the adaptive limit; 0 before the runtime sets it */
static atomic_ullong g_limit_cuts;     /* times it was lowered */

/* ---- recording --------------------------------------------------------- */

/* Copies src into dst (cap LABEL_VALUE_MAX + 1), whole characters only, bad
 * bytes as U+FFFD. */
static void label_copy(char *dst, const char *src)
{
	size_t n = strlen(src ? src : ""), i, k, out = 0;
	uint32_t cp;

	for (i = 0; i < n; i += k) {
		const char *from = src + i;

		if (!(k = ecw_utf8_decode(src + i, n - i, &cp))) {
			from = "\xEF\xBF\xBD";
			if (out + 3 > LABEL_VALUE_MAX)
				break;
			memcpy(dst + out, from, 3);
			out += 3;
			k = 1;
			continue;
		}
		if (out + k > LABEL_VALUE_MAX)
			break;
		memcpy(dst + out, from, k);
		out += k;
	}
	dst[out] = '\0';
}

static uint64_t labels_hash(char vals[][LABEL_VALUE_MAX + 1], size_t n)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	for (size_t i = 0; i < n; i++) {
		for (const unsigned char *p = (const unsigned char *)vals[i]; *p; p++)
			h = (h ^ *p) * 1099511628211ULL;
		h = (h ^ 0xFF) * 1099511628211ULL; /* never in UTF-8: separates values */
	}
	return h;
}

static struct series *series_find(struct family *f, char vals[][LABEL_VALUE_MAX + 1], uint64_t h)
{
	for (size_t i = 0; i < f->n; i++) {
		struct series *s = &f->series[i];
		size_t j;

		if (s->hash != h)
			continue;
		for (j = 0; j < f->nlabels && strcmp(s->labels[j], vals[j]) == 0; j++)
			;
		if (j == f->nlabels)
			return s;
	}
	return NULL;
}

static struct series *series_add(struct family *f, char vals[][LABEL_VALUE_MAX + 1], uint64_t h)
{
	struct series *s;

	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 8;

		if (!(s = realloc(f->series, cap * sizeof(*s))))
			return NULL;
		f->series = s;
		f->cap = cap;
	}
	s = &f->series[f->n];
	memset(s, 0, sizeof(*s));
	s->hash = h;
	for (size_t j = 0; j < f->nlabels; j++) {
		if (!(s->labels[j] = strdup(vals[j]))) {
			while (j-- > 0)
				free(s->labels[j]);
			return NULL;
		}
	}
	f->n++;
	return s;
}

/* The series for these label values, created if need be (folded into
 * "other" past the caps). Under g_lock. NULL only when out of memory. */
static struct series *series_get(struct family *f, const char *v0, const char *v1)
{
	char vals[LABELS_MAX][LABEL_VALUE_MAX + 1];
	const char *in[LABELS_MAX] = {v0, v1};
	struct series *s;
	uint64_t h;

	for (size_t j = 0; j < f->nlabels; j++)
		label_copy(vals[j], in[j]);
	h = labels_hash(vals, f->nlabels);
	if ((s = series_find(f, vals, h)) || f->n < SERIES_MAX)
		return s ? s : series_add(f, vals, h);
	memcpy(vals[0], "other", 6);
	h = labels_hash(vals, f->nlabels);
	if ((s = series_find(f, vals, h)) || f->n < SERIES_MAX + SERIES_SPARE)
		return s ? s : series_add(f, vals, h);
	for (size_t j = 0; j < f->nlabels; j++)
		memcpy(vals[j], "other", 6);
	h = labels_hash(vals, f->nlabels);
	return (s = series_find(f, vals, h)) ? s : series_add(f, vals, h);
}

static void family_clear(struct family *f)
{
	for (size_t i = 0; i < f->n; i++)
		for (size_t j = 0; j < f->nlabels; j++)
			free(f->series[i].labels[j]);
	free(f->series);
	f->series = NULL;
	f->n = f->cap = 0;
}

/* An out-of-memory loses one count rather than failing the caller: metrics
 * are never a reason for a message to fail. */
void ecw_metrics_message(const char *job, const char *outcome, double seconds)
{
	struct series *s;
	size_t b;

	/* NaN or a clock step backwards counts as zero time. */
	if (!(seconds >= 0))
		seconds = 0;
	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_messages, job, outcome)))
		s->count++;
	if ((s = series_get(&f_duration, job, NULL))) {
		for (b = 0; b < NBUCKETS - 1 && seconds > bucket_le[b]; b++)
			;
		s->buckets[b]++;
		s->sum += seconds;
		s->count++;
	}
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_storage(const char *op, int status)
{
	struct series *s;
	char st[ECW_INT_TEXT_MAX + 1];

	st[ecw_buf_int_text(st, status)] = '\0'; /* on every request: no snprintf */
	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_storage, op, st)))
		s->count++;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_retry(void)
{
	pthread_mutex_lock(&g_lock);
	g_retries++;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_inflight_add(int delta)
{
	pthread_mutex_lock(&g_lock);
	g_in_flight += delta;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_poisoned(const char *reason)
{
	struct series *s;

	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_poisoned, reason, NULL)))
		s->count++;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_deduplicated(const char *job, int64_t count)
{
	struct series *s;

	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_deduplicated, job, NULL)))
		s->count += (uint64_t)count;
	pthread_mutex_unlock(&g_lock);
}

/* Series an alert computes increase() or rate() over must exist before their
 * first event: Prometheus cannot tell how a counter that appears already at
 * 1 got there, so it sees no increase, and the first poisoned message would
 * raise no alert (deploy/prometheus/ecworker-alerts.yaml). */
void ecw_metrics_declare(const char *job)
{
	static const char *const reasons[] = {"permanent", "max-dequeue"};
	static const char *const outcomes[] = {"succeeded", "retried", "poisoned"};

	pthread_mutex_lock(&g_lock);
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		(void)series_get(&f_poisoned, reasons[i], NULL);
	for (size_t i = 0; job && i < sizeof(outcomes) / sizeof(outcomes[0]); i++)
		(void)series_get(&f_messages, job, outcomes[i]);
	if (job)
		(void)series_get(&f_deduplicated, job, NULL);
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_otlp_exported(int64_t spans)
{
	struct series *s;

	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_otlp_exported, NULL, NULL)))
		s->count += (uint64_t)spans;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_otlp_dropped(const char *reason, int64_t spans)
{
	struct series *s;

	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_otlp_dropped, reason, NULL)))
		s->count += (uint64_t)spans;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_otlp_retry(void)
{
	struct series *s;

	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_otlp_retries, NULL, NULL)))
		s->count++;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_otlp_declare(void)
{
	static const char *const reasons[] = {"queue_full", "export_failed", "shutdown"};

	pthread_mutex_lock(&g_lock);
	(void)series_get(&f_otlp_exported, NULL, NULL);
	(void)series_get(&f_otlp_retries, NULL, NULL);
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		(void)series_get(&f_otlp_dropped, reasons[i], NULL);
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_scheduled(const char *schedule, int64_t count)
{
	struct series *s;

	if (count <= 0)
		return;
	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_scheduled, schedule, NULL)))
		s->count += (uint64_t)count;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_audit_declare(const char *job, int64_t period_s)
{
	struct series *s;

	if (period_s <= 0)
		return;
	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_audit_period, job, NULL)) && (s->count == 0 || (uint64_t)period_s < s->count))
		s->count = (uint64_t)period_s;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_queue(const char *queue, long long approximate, int64_t oldest_age_s)
{
	struct series *s;

	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_queue_messages, queue, NULL)))
		s->count = approximate > 0 ? (uint64_t)approximate : 0;
	if ((s = series_get(&f_queue_age, queue, NULL)))
		s->count = oldest_age_s > 0 ? (uint64_t)oldest_age_s : 0;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_paused(const char *queue, bool paused)
{
	struct series *s;

	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_paused, queue, NULL)))
		s->count = paused;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_job_blocked(const char *job, const char *table, bool blocked)
{
	struct series *s;

	pthread_mutex_lock(&g_lock);
	if ((s = series_get(&f_job_blocked, job, table)))
		s->count = blocked;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_audit(const char *job, int64_t finished_s, const char *const *kinds, const uint64_t *drift,
		       size_t n)
{
	struct series *s;

	if (finished_s <= 0)
		return;
	pthread_mutex_lock(&g_lock);
	/* An older result (another schedule's, read late) never hides a newer one. */
	if ((s = series_get(&f_audit_last_run, job, NULL)) && s->count <= (uint64_t)finished_s) {
		s->count = (uint64_t)finished_s;
		for (size_t i = 0; i < n; i++) {
			struct series *d = series_get(&f_audit_drift, job, kinds[i]);
			if (d)
				d->count = drift[i];
		}
	}
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_received(int64_t unix_time, int count)
{
	/* Every successful receive counts for the timestamp, an empty one too:
	 * an idle worker that polls fine is not a stuck one. */
	if (count < 0)
		return;
	pthread_mutex_lock(&g_lock);
	g_received += (uint64_t)count;
	g_last_receive = unix_time;
	pthread_mutex_unlock(&g_lock);
}

void ecw_metrics_heartbeat(void)
{
	atomic_store(&g_heartbeat_ms, ecw_clock_now_ms());
}

void ecw_metrics_set_ready(bool storage_ok)
{
	atomic_store(&g_ready, storage_ok);
}

void ecw_metrics_set_circuit_open(bool open)
{
	atomic_store(&g_circuit_open, open);
}

void ecw_metrics_set_concurrency_limit(int limit, bool cut)
{
	atomic_store(&g_concurrency_limit, limit);
	if (cut)
		atomic_fetch_add(&g_limit_cuts, 1);
}

void ecw_metrics_set_stalled(int jobs)
{
	atomic_store(&g_stalled, jobs > 0 ? jobs : 0);
}

void ecw_metrics_set_liveness_window(int64_t max_silence_ms)
{
	atomic_store(&g_window_ms, max_silence_ms > 0 ? max_silence_ms : 0);
}

/* Never alive before the first heartbeat: the loop has not gone round yet. */
bool ecw_metrics_alive(void)
{
	int64_t beat = atomic_load(&g_heartbeat_ms);

	return beat != HEARTBEAT_NEVER && ecw_clock_now_ms() - beat <= atomic_load(&g_window_ms);
}

bool ecw_metrics_stalled(void)
{
	return atomic_load(&g_stalled) > 0;
}

bool ecw_metrics_circuit_open(void)
{
	return atomic_load(&g_circuit_open);
}

bool ecw_metrics_ready(void)
{
	return atomic_load(&g_ready);
}

void ecw_metrics_reset(void)
{
	pthread_mutex_lock(&g_lock);
	family_clear(&f_messages);
	family_clear(&f_duration);
	family_clear(&f_storage);
	family_clear(&f_poisoned);
	family_clear(&f_deduplicated);
	family_clear(&f_scheduled);
	family_clear(&f_otlp_exported);
	family_clear(&f_otlp_dropped);
	family_clear(&f_otlp_retries);
	family_clear(&f_audit_drift);
	family_clear(&f_audit_last_run);
	family_clear(&f_audit_period);
	family_clear(&f_queue_messages);
	family_clear(&f_queue_age);
	family_clear(&f_paused);
	family_clear(&f_job_blocked);
	g_retries = 0;
	g_in_flight = 0;
	g_last_receive = 0;
	g_received = 0;
	pthread_mutex_unlock(&g_lock);
	atomic_store(&g_heartbeat_ms, HEARTBEAT_NEVER);
	atomic_store(&g_window_ms, LIVENESS_DEFAULT_MS);
	atomic_store(&g_ready, false);
	atomic_store(&g_circuit_open, false);
	atomic_store(&g_stalled, 0);
	atomic_store(&g_concurrency_limit, 0);
	atomic_store(&g_limit_cuts, 0);
}

/* ---- the page ------------------------------------------------------------ */

/* Label values escape \, " and newline (exposition format 0.0.4). */
static int add_label_value(struct ecw_buf *b, const char *v)
{
	size_t run = 0, i;
	int err = 0;

	for (i = 0; v[i]; i++) {
		const char *esc = v[i] == '\\' ? "\\\\" : v[i] == '"' ? "\\\"" : v[i] == '\n' ? "\\n" : NULL;

		if (!esc)
			continue;
		if ((err = ecw_buf_add(b, v + run, i - run)) < 0 || (err = ecw_buf_adds(b, esc)) < 0)
			return err;
		run = i + 1;
	}
	return ecw_buf_add(b, v + run, i - run);
}

/* name{l1="v1",...,le="x"} - le may be NULL; no braces without labels. */
static int add_sample_name(struct ecw_buf *b, const struct family *f, const struct series *s,
			   const char *suffix, const char *le)
{
	int err;

	if ((err = ecw_buf_printf(b, "%s%s", f->name, suffix)) < 0)
		return err;
	if (f->nlabels == 0 && !le)
		return 0;
	if ((err = ecw_buf_addc(b, '{')) < 0)
		return err;
	for (size_t j = 0; j < f->nlabels; j++) {
		if ((err = ecw_buf_printf(b, "%s%s=\"", j ? "," : "", f->label_names[j])) < 0 ||
		    (err = add_label_value(b, s->labels[j])) < 0 || (err = ecw_buf_addc(b, '"')) < 0)
			return err;
	}
	if (le && (err = ecw_buf_printf(b, "%sle=\"%s\"", f->nlabels ? "," : "", le)) < 0)
		return err;
	return ecw_buf_addc(b, '}');
}

static int add_header(struct ecw_buf *b, const char *name, const char *help, const char *type)
{
	return ecw_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The shortest %g form that reads back as the same double. */
static void format_double(char *out, size_t cap, double v)
{
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(out, cap, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			break;
	}
}

static int render_family(struct ecw_buf *b, const struct family *f)
{
	char num[40];
	int err;

	if ((err = add_header(b, f->name, f->help,
			      f->histogram ? "histogram"
			      : f->gauge   ? "gauge"
					   : "counter")) < 0)
		return err;
	for (size_t i = 0; i < f->n; i++) {
		const struct series *s = &f->series[i];
		uint64_t cum = 0;

		if (!f->histogram) {
			if ((err = add_sample_name(b, f, s, "", NULL)) < 0 ||
			    (err = ecw_buf_printf(b, " %" PRIu64 "\n", s->count)) < 0)
				return err;
			continue;
		}
		for (size_t k = 0; k < NBUCKETS; k++) {
			cum += s->buckets[k];
			if ((err = add_sample_name(b, f, s, "_bucket", bucket_name[k])) < 0 ||
			    (err = ecw_buf_printf(b, " %" PRIu64 "\n", cum)) < 0)
				return err;
		}
		format_double(num, sizeof(num), s->sum);
		if ((err = add_sample_name(b, f, s, "_sum", NULL)) < 0 ||
		    (err = ecw_buf_printf(b, " %s\n", num)) < 0 ||
		    (err = add_sample_name(b, f, s, "_count", NULL)) < 0 ||
		    (err = ecw_buf_printf(b, " %" PRIu64 "\n", s->count)) < 0)
			return err;
	}
	return 0;
}

char *ecw_metrics_render(void)
{
	struct ecw_buf b;
	char *page = NULL;
	int err;

	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	pthread_mutex_lock(&g_lock);
	if ((err = render_family(&b, &f_messages)) < 0 || (err = render_family(&b, &f_duration)) < 0 ||
	    (err = render_family(&b, &f_storage)) < 0)
		goto unlock;
	if ((err = add_header(&b, "ecw_storage_retries_total",
			      "Storage attempts retried after a transient failure.", "counter")) < 0 ||
	    (err = ecw_buf_printf(&b, "ecw_storage_retries_total %" PRIu64 "\n", g_retries)) < 0)
		goto unlock;
	if ((err = render_family(&b, &f_poisoned)) < 0 || (err = render_family(&b, &f_deduplicated)) < 0 ||
	    (err = render_family(&b, &f_scheduled)) < 0 || (err = render_family(&b, &f_audit_drift)) < 0 ||
	    (err = render_family(&b, &f_audit_last_run)) < 0 ||
	    (err = render_family(&b, &f_audit_period)) < 0 ||
	    (err = render_family(&b, &f_queue_messages)) < 0 || (err = render_family(&b, &f_queue_age)) < 0 ||
	    (err = render_family(&b, &f_paused)) < 0 || (err = render_family(&b, &f_job_blocked)) < 0 ||
	    (err = render_family(&b, &f_otlp_exported)) < 0 ||
	    (err = render_family(&b, &f_otlp_dropped)) < 0 || (err = render_family(&b, &f_otlp_retries)) < 0)
		goto unlock;
	if ((err = add_header(&b, "ecw_jobs_in_flight",
			      "Messages held now: running, or waiting for a job thread (prefetch).",
			      "gauge")) < 0 ||
	    (err = ecw_buf_printf(&b, "ecw_jobs_in_flight %" PRId64 "\n", g_in_flight)) < 0 ||
	    (err = add_header(&b, "ecw_messages_received_total", "Messages received from the queue.",
			      "counter")) < 0 ||
	    (err = ecw_buf_printf(&b, "ecw_messages_received_total %" PRIu64 "\n", g_received)) < 0 ||
	    (err = add_header(
		     &b, "ecw_last_receive_timestamp_seconds",
		     "Unix time of the last successful receive, empty or not, or look at the queue (0: none yet).",
		     "gauge")) < 0 ||
	    (err = ecw_buf_printf(&b, "ecw_last_receive_timestamp_seconds %" PRId64 "\n", g_last_receive)) <
		    0 ||
	    (err = add_header(&b, "ecw_storage_circuit_open",
			      "1 while storage does not answer (the circuit is open): nothing is received.",
			      "gauge")) < 0 ||
	    (err = ecw_buf_printf(&b, "ecw_storage_circuit_open %d\n",
				  atomic_load(&g_circuit_open) ? 1 : 0)) < 0 ||
	    (err = add_header(&b, "ecw_jobs_stalled",
			      "Jobs that completed no storage call for worker.stall_timeout.", "gauge")) <
		    0 ||
	    (err = ecw_buf_printf(&b, "ecw_jobs_stalled %d\n", atomic_load(&g_stalled))) < 0)
		goto unlock;
	if (atomic_load(&g_concurrency_limit) > 0 &&
	    ((err = add_header(&b, "ecw_concurrency_limit",
			       "Jobs that may run at once now: worker.concurrency, lowered while storage "
			       "throttles (not below worker.concurrency_min).",
			       "gauge")) < 0 ||
	     (err = ecw_buf_printf(&b, "ecw_concurrency_limit %d\n", atomic_load(&g_concurrency_limit))) <
		     0 ||
	     (err = add_header(&b, "ecw_concurrency_limit_cuts_total",
			       "Times storage throttling lowered the concurrency limit.", "counter")) < 0 ||
	     (err = ecw_buf_printf(&b, "ecw_concurrency_limit_cuts_total %llu\n",
				   (unsigned long long)atomic_load(&g_limit_cuts))) < 0))
		goto unlock;
unlock:
	pthread_mutex_unlock(&g_lock);
	if (err == 0)
		page = ecw_buf_take(&b);
	ecw_buf_dispose(&b);
	return page;
}
