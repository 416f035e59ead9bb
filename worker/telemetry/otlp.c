/* SPDX-License-Identifier: MIT */
/* otlp.c - the OTEL_* variables read and checked, and spans encoded as
 * OTLP/JSON (see telemetry.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ecw_codec.h"
#include "ecw_log.h"
#include "ecw_version.h"
#include "telemetry.h"

#define DEFAULT_TIMEOUT_MS 10000
#define DEFAULT_SCHEDULE_DELAY_MS 5000
#define DEFAULT_MAX_QUEUE 2048
#define DEFAULT_MAX_BATCH 512
#define MS_MAX 600000 /* ten minutes: a timeout or a delay longer is a mistake */

/* A variable's value, "" when unset; the traces-specific one first. */
static const char *var(ecw_otlp_env_fn env, const char *specific, const char *general)
{
	const char *v = specific ? env(specific) : NULL;

	if (v && *v)
		return v;
	v = general ? env(general) : NULL;
	return v ? v : "";
}

static const char *var_name(ecw_otlp_env_fn env, const char *specific, const char *general)
{
	const char *v = specific ? env(specific) : NULL;
	return v && *v ? specific : general;
}

/* A whole number in [min, max], or def when text is "". */
static int read_number(int64_t *out, const char *name, const char *text, int64_t def, int64_t min,
		       int64_t max)
{
	char *end;
	long long v;

	if (!*text) {
		*out = def;
		return 0;
	}
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno || end == text || *end || v < min || v > max || !(*text >= '0' && *text <= '9'))
		return ecw_error_set(ECW_EINVALID, "%s: '%.32s' is not a whole number from %lld to %lld",
				     name, text, (long long)min, (long long)max);
	*out = v;
	return 0;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* s[0..n) percent-decoded and trimmed into out (cap bytes with the NUL);
 * false when too long, a % escape is bad, or it holds a control byte. */
static bool decode_part(char *out, size_t cap, const char *s, size_t n)
{
	size_t k = 0;

	while (n > 0 && (*s == ' ' || *s == '\t'))
		s++, n--;
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '%') {
			int hi, lo;
			if (i + 2 >= n)
				return false;
			if ((hi = hex_digit(s[i + 1])) < 0 || (lo = hex_digit(s[i + 2])) < 0)
				return false;
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (c < 0x20 || c == 0x7f || k + 1 >= cap)
			return false;
		out[k++] = (char)c;
	}
	out[k] = '\0';
	return true;
}

/* "k1=v1,k2=v2" (W3C Baggage-like, values percent-encoded) into kv.
 * secret: never quote a part in the error. */
static int read_pairs(struct ecw_otlp_kv *kv, size_t *n, size_t max, const char *name, const char *text,
		      bool secret)
{
	size_t entry = 0;

	for (const char *p = text; *p;) {
		const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));

		entry++;
		if (!eq) {
			if (strspn(p, " \t") == (size_t)(end - p) && comma) /* an empty entry: "a=b,,c=d" */
				goto next;
			return ecw_error_set(ECW_EINVALID, "%s: entry %zu is not key=value", name, entry);
		}
		if (*n == max)
			return ecw_error_set(ECW_EINVALID, "%s: more than %zu entries", name, max);
		if (!decode_part(kv[*n].key, sizeof(kv[*n].key), p, (size_t)(eq - p)) || !kv[*n].key[0] ||
		    strpbrk(kv[*n].key, " :\"\\"))
			return secret ? ecw_error_set(ECW_EINVALID, "%s: the key of entry %zu is not valid",
						      name, entry)
				      : ecw_error_set(ECW_EINVALID,
						      "%s: the key of entry %zu ('%.64s') is not valid", name,
						      entry, p);
		if (!decode_part(kv[*n].value, sizeof(kv[*n].value), eq + 1, (size_t)(end - eq - 1)))
			return ecw_error_set(
				ECW_EINVALID,
				"%s: the value of entry %zu is not valid (too long, a bad %%-escape, "
				"or a control character)",
				name, entry);
		(*n)++;
next:
		p = comma ? comma + 1 : end;
	}
	return 0;
}

static int read_endpoint(struct ecw_otlp_config *out, ecw_otlp_env_fn env)
{
	const char *traces = var(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", NULL);
	const char *base = var(env, "OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
	const char *name = *traces ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT";
	const char *url = *traces ? traces : base;
	size_t n = strlen(url);

	if (!*url)
		return 0;
	if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
		return ecw_error_set(ECW_EINVALID, "%s: not an http:// or https:// URL", name);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f)
			return ecw_error_set(ECW_EINVALID, "%s: the URL holds a space or control character",
					     name);
	/* The base URL gets the signal's path; the traces URL is taken as given. */
	if (!*traces)
		while (n > 0 && url[n - 1] == '/')
			n--;
	if (n + sizeof("/v1/traces") > sizeof(out->url))
		return ecw_error_set(ECW_EINVALID, "%s: longer than %d characters", name,
				     ECW_OTLP_URL_MAX - 10);
	snprintf(out->url, sizeof(out->url), "%.*s%s", (int)n, url, *traces ? "" : "/v1/traces");
	return 0;
}

/* "true"/"false" (any case) or unset. */
static int read_bool(bool *out, const char *name, const char *text)
{
	*out = false;
	if (!*text || strcasecmp(text, "false") == 0)
		return 0;
	if (strcasecmp(text, "true") == 0) {
		*out = true;
		return 0;
	}
	return ecw_error_set(ECW_EINVALID, "%s: '%.32s' is neither true nor false", name, text);
}

static int read_resource(struct ecw_otlp_config *out, ecw_otlp_env_fn env)
{
	struct ecw_otlp_kv attrs[ECW_OTLP_ATTRS_MAX];
	size_t n = 0;
	const char *service = var(env, "OTEL_SERVICE_NAME", NULL);
	int err;

	if ((err = read_pairs(attrs, &n, ECW_OTLP_ATTRS_MAX - 1, "OTEL_RESOURCE_ATTRIBUTES",
			      var(env, "OTEL_RESOURCE_ATTRIBUTES", NULL), false)) < 0)
		return err;
	/* service.name first: OTEL_SERVICE_NAME wins over the attribute. */
	snprintf(out->resource[0].key, sizeof(out->resource[0].key), "service.name");
	if (strlen(service) > ECW_OTLP_VALUE_MAX)
		return ecw_error_set(ECW_EINVALID, "OTEL_SERVICE_NAME: longer than %d characters",
				     ECW_OTLP_VALUE_MAX);
	snprintf(out->resource[0].value, sizeof(out->resource[0].value), "%s",
		 *service ? service : "ecworker");
	out->nresource = 1;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(attrs[i].key, "service.name") == 0) {
			if (!*service)
				memcpy(out->resource[0].value, attrs[i].value, sizeof(attrs[i].value));
			continue;
		}
		out->resource[out->nresource++] = attrs[i];
	}
	return 0;
}

int ecw_otlp_config_read(struct ecw_otlp_config *out, ecw_otlp_env_fn env)
{
	const char *protocol = var(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL");
	const char *exporter = var(env, "OTEL_TRACES_EXPORTER", NULL);
	int64_t queue, batch;
	bool disabled;
	int err;

	memset(out, 0, sizeof(*out));
	if ((err = read_bool(&disabled, "OTEL_SDK_DISABLED", var(env, "OTEL_SDK_DISABLED", NULL))) < 0)
		return err;
	if (*exporter && strcmp(exporter, "otlp") != 0 && strcmp(exporter, "none") != 0)
		return ecw_error_set(ECW_EINVALID,
				     "OTEL_TRACES_EXPORTER: '%.32s' is not supported (otlp or none)",
				     exporter);
	if (*protocol && strcmp(protocol, "http/json") != 0)
		return ecw_error_set(
			ECW_EINVALID,
			"%s: '%.32s' is not supported: ecworker exports OTLP over HTTP with JSON "
			"only (http/json)",
			var_name(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
			protocol);
	if ((err = read_endpoint(out, env)) < 0)
		return err;
	const char *headers_name =
		var_name(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS");
	const char *headers = var(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS");
	/* Registered before anything can fail, so no later line shows them. */
	ecw_log_add_secret(headers);
	if ((err = read_pairs(out->headers, &out->nheaders, ECW_OTLP_HEADERS_MAX, headers_name, headers,
			      true)) < 0)
		return err;
	for (size_t i = 0; i < out->nheaders; i++)
		ecw_log_add_secret(out->headers[i].value);
	if ((err = read_number(
		     &out->timeout_ms,
		     var_name(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"),
		     var(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"),
		     DEFAULT_TIMEOUT_MS, 1, MS_MAX)) < 0 ||
	    (err = read_number(&out->schedule_delay_ms, "OTEL_BSP_SCHEDULE_DELAY",
			       var(env, "OTEL_BSP_SCHEDULE_DELAY", NULL), DEFAULT_SCHEDULE_DELAY_MS, 1,
			       MS_MAX)) < 0 ||
	    (err = read_number(&queue, "OTEL_BSP_MAX_QUEUE_SIZE", var(env, "OTEL_BSP_MAX_QUEUE_SIZE", NULL),
			       DEFAULT_MAX_QUEUE, 1, ECW_OTLP_QUEUE_MAX)) < 0 ||
	    (err = read_number(&batch, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
			       var(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", NULL),
			       DEFAULT_MAX_BATCH < queue ? DEFAULT_MAX_BATCH : queue, 1,
			       ECW_OTLP_QUEUE_MAX)) < 0)
		return err;
	if (batch > queue)
		return ecw_error_set(
			ECW_EINVALID,
			"OTEL_BSP_MAX_EXPORT_BATCH_SIZE: %lld is more than OTEL_BSP_MAX_QUEUE_SIZE (%lld)",
			(long long)batch, (long long)queue);
	out->max_queue = (size_t)queue;
	out->max_batch = (size_t)batch;
	if ((err = read_resource(out, env)) < 0)
		return err;
	out->enabled = !disabled && strcmp(exporter, "none") != 0 && out->url[0];
	return 0;
}

/* ---- encoding ------------------------------------------------------------ */

/* s as a JSON string; bytes that are not UTF-8 become '?' (a job name or an
 * error text is the worker's, but may quote what a message sent). */
static int add_string(struct ecw_buf *b, const char *s)
{
	size_t n = strlen(s);
	char clean[ECW_OTLP_VALUE_MAX + 1];
	uint32_t cp;

	if (ecw_utf8_valid(s, n))
		return ecw_json_quote(b, s, n);
	if (n >= sizeof(clean))
		n = sizeof(clean) - 1;
	for (size_t i = 0, k; i < n; i += k) {
		if ((k = ecw_utf8_decode(s + i, n - i, &cp)) > 0) {
			memcpy(clean + i, s + i, k);
		} else {
			clean[i] = '?';
			k = 1;
		}
	}
	return ecw_json_quote(b, clean, n);
}

static int add_attr_str(struct ecw_buf *b, bool first, const char *key, const char *value)
{
	int err;

	if ((err = ecw_buf_adds(b, first ? "{\"key\":" : ",{\"key\":")) < 0 ||
	    (err = add_string(b, key)) < 0 || (err = ecw_buf_adds(b, ",\"value\":{\"stringValue\":")) < 0 ||
	    (err = add_string(b, value)) < 0)
		return err;
	return ecw_buf_adds(b, "}}");
}

/* int64 values are strings in OTLP/JSON (proto3's JSON mapping). */
static int add_attr_int(struct ecw_buf *b, const char *key, int64_t value)
{
	return ecw_buf_printf(b, ",{\"key\":\"%s\",\"value\":{\"intValue\":\"%lld\"}}", key,
			      (long long)value);
}

static int add_span(struct ecw_buf *b, const struct ecw_otlp_span *s)
{
	char parent[17];
	int err;

	ecw_trace_hex(parent, s->ids.parent_id, sizeof(s->ids.parent_id));
	if ((err = ecw_buf_cat(b, "{\"traceId\":\"", s->ids.trace_hex, "\",\"spanId\":\"", s->ids.span_hex,
			       "\"", NULL)) < 0 ||
	    (s->ids.has_parent && (err = ecw_buf_cat(b, ",\"parentSpanId\":\"", parent, "\"", NULL)) < 0) ||
	    (err = ecw_buf_adds(b, ",\"name\":")) < 0 || (err = add_string(b, s->name)) < 0 ||
	    /* SPAN_KIND_CONSUMER: the run of a message someone sent */
	    (err = ecw_buf_printf(b,
				  ",\"kind\":5,\"startTimeUnixNano\":\"%lld\",\"endTimeUnixNano\":\"%lld\","
				  "\"attributes\":[",
				  (long long)s->start_unix_ns, (long long)s->end_unix_ns)) < 0 ||
	    (err = add_attr_str(b, true, "ecworker.job", s->job)) < 0 ||
	    (err = add_attr_str(b, false, "ecworker.outcome", s->outcome)) < 0 ||
	    (err = add_attr_int(b, "ecworker.dequeue_count", s->dequeue_count)) < 0 ||
	    (err = add_attr_int(b, "ecworker.storage_requests", s->storage_requests)) < 0 ||
	    (s->group > 1 && (err = add_attr_int(b, "ecworker.group", s->group)) < 0) ||
	    (err = add_attr_str(b, false, "messaging.message.id", s->message_id)) < 0 ||
	    (err = add_attr_str(b, false, "messaging.destination.name", s->queue)) < 0 ||
	    (err = ecw_buf_adds(b, "],\"status\":")) < 0)
		return err;
	/* STATUS_CODE_ERROR with its text; otherwise unset, as the spec asks of
	 * instrumentation that has nothing to say about success. */
	if (!s->error)
		return ecw_buf_adds(b, "{}}");
	if ((err = ecw_buf_adds(b, "{\"code\":2,\"message\":")) < 0 ||
	    (err = add_string(b, s->status_message)) < 0)
		return err;
	return ecw_buf_adds(b, "}}");
}

int ecw_otlp_encode(struct ecw_buf *out, const struct ecw_otlp_config *cfg, const struct ecw_otlp_span *spans,
		    size_t n)
{
	int err;

	if ((err = ecw_buf_adds(out, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[")) < 0)
		return err;
	for (size_t i = 0; i < cfg->nresource; i++)
		if ((err = add_attr_str(out, i == 0, cfg->resource[i].key, cfg->resource[i].value)) < 0)
			return err;
	if ((err = ecw_buf_adds(
		     out, "]},\"scopeSpans\":[{\"scope\":{\"name\":\"ecworker\",\"version\":\"" ECW_VERSION
			  "\"},\"spans\":[")) < 0)
		return err;
	for (size_t i = 0; i < n; i++)
		if ((i > 0 && (err = ecw_buf_adds(out, ",")) < 0) || (err = add_span(out, &spans[i])) < 0)
			return err;
	return ecw_buf_adds(out, "]}]}]}");
}
