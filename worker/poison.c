/* SPDX-License-Identifier: MIT */
/* poison.c - building and reading poison envelopes, and filtering them (see
 * poison.h). */
#define _XOPEN_SOURCE 700 /* strptime */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_duration.h"
#include "poison.h"

/* Absent when 0. */
static void add_time(struct json_object *obj, const char *key, time_t t)
{
	char iso[32];
	struct tm tm;

	if (!t)
		return;
	gmtime_r(&t, &tm);
	strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_object_object_add(obj, key, json_object_new_string(iso));
}

static void add_str(struct json_object *obj, const char *key, const char *v)
{
	if (v)
		json_object_object_add(obj, key, json_object_new_string(v));
}

int ecw_poison_envelope(struct ecw_buf *out, const struct ecw_poison_info *in)
{
	struct json_object *obj = json_object_new_object();
	const char *json;
	int err;

	if (!obj)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	json_object_object_add(obj, "ecw_poison", json_object_new_int(1));
	/* The text came through XML, so it is valid UTF-8: a JSON string holds
	 * it exactly. */
	json_object_object_add(obj, "original",
			       json_object_new_string_len(in->original, (int)in->original_len));
	add_str(obj, "queue", in->queue);
	add_str(obj, "message_id", in->message_id);
	add_time(obj, "inserted_at", in->inserted_at);
	json_object_object_add(obj, "dequeue_count", json_object_new_int64(in->dequeue_count));
	add_time(obj, "failed_at", in->failed_at);
	add_str(obj, "reason", in->reason);
	add_str(obj, "error", in->error);
	if (in->http_status > 0)
		json_object_object_add(obj, "http_status", json_object_new_int(in->http_status));
	if (in->error_code && *in->error_code)
		add_str(obj, "error_code", in->error_code);
	add_str(obj, "job", in->job);
	add_str(obj, "pk", in->pk);
	add_str(obj, "rk", in->rk);
	add_str(obj, "worker", in->worker);
	add_str(obj, "traceparent", in->traceparent);
	json = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	err = json ? ecw_buf_adds(out, json) : ecw_error_set(ECW_ENOMEM, "out of memory");
	json_object_put(obj);
	return err;
}

/* ---- reading -------------------------------------------------------------- */

static int dup_field(char **out, struct json_object *obj, const char *key)
{
	struct json_object *v;

	*out = NULL;
	if (!json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_string))
		return 0;
	if (!(*out = strdup(json_object_get_string(v))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	return 0;
}

/* "2026-11-20T10:00:00Z" (seconds optional) or "2026-11-20": 0 when it is neither. */
static time_t parse_utc(const char *s)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	if (!(end = strptime(s, "%Y-%m-%d", &tm)))
		return 0;
	if (*end == 'T' || *end == ' ') {
		const char *t = strptime(end + 1, "%H:%M:%S", &tm);
		if (!t)
			t = strptime(end + 1, "%H:%M", &tm);
		if (!t)
			return 0;
		end = t;
		if (*end == 'Z')
			end++;
	}
	if (*end)
		return 0;
	return timegm(&tm);
}

static time_t field_time(struct json_object *obj, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_string))
		return 0;
	return parse_utc(json_object_get_string(v));
}

static int read_foreign(struct ecw_poison_view *out, const char *text, size_t len)
{
	if (!(out->original = malloc(len + 1)))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	memcpy(out->original, text, len);
	out->original[len] = '\0';
	out->original_len = len;
	return 0;
}

int ecw_poison_parse(struct ecw_poison_view *out, const char *text, size_t len)
{
	struct json_tokener *tok;
	struct json_object *obj = NULL, *v;
	int err;

	memset(out, 0, sizeof(*out));
	out->dequeue_count = -1;
	if (len < INT32_MAX && (tok = json_tokener_new())) {
		obj = json_tokener_parse_ex(tok, text, (int)len);
		/* Trailing bytes after the object mean it is not one of ours. */
		if (obj &&
		    (json_tokener_get_error(tok) != json_tokener_success || tok->char_offset != (int)len)) {
			json_object_put(obj);
			obj = NULL;
		}
		json_tokener_free(tok);
	}
	if (!obj || !json_object_is_type(obj, json_type_object) ||
	    !json_object_object_get_ex(obj, "ecw_poison", &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) != 1 || !json_object_object_get_ex(obj, "original", &v) ||
	    !json_object_is_type(v, json_type_string)) {
		json_object_put(obj);
		return read_foreign(out, text, len);
	}
	out->envelope = true;
	out->original_len = (size_t)json_object_get_string_len(v);
	if (!(out->original = malloc(out->original_len + 1))) {
		json_object_put(obj);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	memcpy(out->original, json_object_get_string(v), out->original_len);
	out->original[out->original_len] = '\0';
	if ((err = dup_field(&out->job, obj, "job")) < 0 || (err = dup_field(&out->pk, obj, "pk")) < 0 ||
	    (err = dup_field(&out->rk, obj, "rk")) < 0 ||
	    (err = dup_field(&out->reason, obj, "reason")) < 0 ||
	    (err = dup_field(&out->error, obj, "error")) < 0 ||
	    (err = dup_field(&out->error_code, obj, "error_code")) < 0 ||
	    (err = dup_field(&out->queue, obj, "queue")) < 0 ||
	    (err = dup_field(&out->message_id, obj, "message_id")) < 0 ||
	    (err = dup_field(&out->worker, obj, "worker")) < 0 ||
	    (err = dup_field(&out->traceparent, obj, "traceparent")) < 0) {
		json_object_put(obj);
		return err;
	}
	if (json_object_object_get_ex(obj, "dequeue_count", &v) && json_object_is_type(v, json_type_int))
		out->dequeue_count = (long)json_object_get_int64(v);
	if (json_object_object_get_ex(obj, "http_status", &v) && json_object_is_type(v, json_type_int) &&
	    json_object_get_int64(v) > 0 && json_object_get_int64(v) < 1000)
		out->http_status = (int)json_object_get_int64(v);
	out->failed_at = field_time(obj, "failed_at");
	out->inserted_at = field_time(obj, "inserted_at");
	json_object_put(obj);
	return 0;
}

void ecw_poison_view_dispose(struct ecw_poison_view *v)
{
	free(v->original);
	free(v->job);
	free(v->pk);
	free(v->rk);
	free(v->reason);
	free(v->error);
	free(v->error_code);
	free(v->queue);
	free(v->message_id);
	free(v->worker);
	free(v->traceparent);
	memset(v, 0, sizeof(*v));
}

/* ---- filters -------------------------------------------------------------- */

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle);
}

bool ecw_poison_filter_empty(const struct ecw_poison_filter *f)
{
	return !f->job && !f->reason && !f->since && !f->grep && !f->nids;
}

bool ecw_poison_filter_match(const struct ecw_poison_filter *f, const char *msg_id, time_t msg_inserted,
			     const struct ecw_poison_view *v)
{
	if (f->nids) {
		size_t i;
		for (i = 0; i < f->nids && strcmp(f->ids[i], msg_id) != 0; i++)
			;
		if (i == f->nids)
			return false;
	}
	if (f->job && (!v->envelope || !v->job || strcmp(f->job, v->job) != 0))
		return false;
	if (f->reason && (!v->envelope || !v->reason || strcmp(f->reason, v->reason) != 0))
		return false;
	if (f->since && (v->envelope && v->failed_at ? v->failed_at : msg_inserted) < f->since)
		return false;
	/* The original may hold NUL bytes: strstr sees its text up to the first. */
	if (f->grep && !has(v->error, f->grep) && !has(v->original, f->grep) && !has(v->job, f->grep) &&
	    !has(v->pk, f->grep) && !has(v->rk, f->grep))
		return false;
	return true;
}

int ecw_poison_parse_since(time_t *out, const char *text, time_t now)
{
	int64_t ms;
	time_t t;

	if ((t = parse_utc(text)) > 0) {
		*out = t;
		return 0;
	}
	if (ecw_duration_parse(&ms, text, true) == 0 && ms > 0 && ms / 1000 < (int64_t)now) {
		*out = now - (time_t)(ms / 1000);
		return 0;
	}
	return ecw_error_set(
		ECW_EINVALID,
		"--since '%s': expected a duration back from now (90m, 2h, 7d, 1w) or a UTC time "
		"(2026-11-20 or 2026-11-20T10:00:00Z)",
		text);
}

/* ---- the JSON form ------------------------------------------------------- */

struct json_object *ecw_poison_view_json(const struct ecw_poison_view *v, const char *id,
					 time_t poison_inserted)
{
	struct json_object *obj = json_object_new_object();

	if (!obj)
		return NULL;
	add_str(obj, "id", id);
	json_object_object_add(obj, "envelope", json_object_new_boolean(v->envelope));
	add_time(obj, "poison_inserted_at", poison_inserted);
	if (!v->envelope) {
		json_object_object_add(obj, "text",
				       json_object_new_string_len(v->original, (int)v->original_len));
		return obj;
	}
	add_str(obj, "job", v->job);
	add_str(obj, "pk", v->pk);
	add_str(obj, "rk", v->rk);
	add_str(obj, "reason", v->reason);
	add_str(obj, "error", v->error);
	if (v->http_status > 0)
		json_object_object_add(obj, "http_status", json_object_new_int(v->http_status));
	add_str(obj, "error_code", v->error_code);
	if (v->dequeue_count >= 0)
		json_object_object_add(obj, "dequeue_count", json_object_new_int64(v->dequeue_count));
	add_time(obj, "failed_at", v->failed_at);
	add_time(obj, "inserted_at", v->inserted_at);
	add_str(obj, "queue", v->queue);
	add_str(obj, "message_id", v->message_id);
	add_str(obj, "worker", v->worker);
	add_str(obj, "traceparent", v->traceparent);
	json_object_object_add(obj, "original",
			       json_object_new_string_len(v->original, (int)v->original_len));
	return obj;
}
