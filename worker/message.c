/* SPDX-License-Identifier: MIT */
/* message.c - decoding and encoding job messages (see message.h). */
#include <json-c/json.h>
#include <string.h>

#include "ecw_codec.h"
#include "ecw_entity.h"
#include "ecw_log.h"
#include "message.h"

static size_t skip_ws(const char *s, size_t len, size_t i)
{
	while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
		i++;
	return i;
}

static int parse_object(struct ecw_message *out, const char *json, size_t len, const char *how)
{
	struct json_tokener *tok;
	struct json_object *obj;
	enum json_tokener_error jerr;

	if (!ecw_utf8_valid(json, len))
		return ecw_error_set(ECW_EINVALID, "message%s is not valid UTF-8", how);
	if (!(tok = json_tokener_new_ex(32)))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	obj = json_tokener_parse_ex(tok, json, (int)len);
	jerr = json_tokener_get_error(tok);
	if (obj && skip_ws(json, len, (size_t)json_tokener_get_parse_end(tok)) != len) {
		json_object_put(obj);
		obj = NULL;
		jerr = json_tokener_error_parse_unexpected;
	}
	json_tokener_free(tok);
	if (!obj)
		return ecw_error_set(ECW_EINVALID, "message%s is not valid JSON: %s", how,
				     jerr == json_tokener_continue ? "unexpected end"
								   : json_tokener_error_desc(jerr));
	if (!json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		return ecw_error_set(ECW_EINVALID, "message%s is JSON but not an object", how);
	}
	out->obj = obj;
	return 0;
}

static int string_field(const char **out, struct json_object *obj, const char *name, bool required)
{
	struct json_object *v;

	*out = NULL;
	if (!json_object_object_get_ex(obj, name, &v) || json_object_is_type(v, json_type_null))
		return required ? ecw_error_set(ECW_EINVALID, "message has no \"%s\"", name) : 0;
	if (!json_object_is_type(v, json_type_string))
		return ecw_error_set(ECW_EINVALID, "message field \"%s\" is not a string", name);
	/* "\u0000" decodes to a NUL byte: as a C string the field would end
	 * there ("arc\u0000hive" would name the job "arc"). */
	if (strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
		return ecw_error_set(ECW_EINVALID, "message field \"%s\" contains U+0000", name);
	*out = json_object_get_string(v);
	return 0;
}

/* Never an error: a bad traceparent is ignored (with a warning, deliver.c). */
static void read_traceparent(struct ecw_message *out)
{
	struct json_object *v;

	if (!json_object_object_get_ex(out->obj, "traceparent", &v) || json_object_is_type(v, json_type_null))
		return;
	out->traceparent_present = true;
	if (json_object_is_type(v, json_type_string)) {
		out->traceparent = json_object_get_string(v);
		out->traceparent_len = (size_t)json_object_get_string_len(v);
	}
}

int ecw_message_decode(struct ecw_message *out, const char *text, size_t len)
{
	struct ecw_buf raw;
	size_t start = skip_ws(text, len, 0);
	int err;

	memset(out, 0, sizeof(*out));
	ecw_buf_init(&raw, len + 1);
	if (start == len) {
		err = ecw_error_set(ECW_EINVALID, "message is empty");
		goto done;
	}
	if (text[start] == '{') {
		err = parse_object(out, text, len, "");
	} else {
		/* Base64 as Azure Functions and some SDKs send it: whitespace
		 * around it is tolerated, inside it is not. */
		size_t end = len;
		while (end > start && memchr(" \t\r\n", text[end - 1], 4)) /* not strchr: it finds NUL too */
			end--;
		if (ecw_base64_decode(&raw, text + start, end - start) < 0) {
			err = ecw_error_set(ECW_EINVALID, "message is neither a JSON object nor base64");
			goto done;
		}
		if (skip_ws(raw.ptr, raw.len, 0) == raw.len || raw.ptr[skip_ws(raw.ptr, raw.len, 0)] != '{') {
			err = ecw_error_set(ECW_EINVALID,
					    "message is base64, but what it encodes is not a JSON object");
			goto done;
		}
		out->base64 = true;
		err = parse_object(out, raw.ptr, raw.len, " (base64-decoded)");
	}
	if (err < 0)
		goto done;
	read_traceparent(out);
	/* Keep whatever decodes, for the poison envelope, then judge. */
	const char *job, *pk, *rk, *id;
	int ej = string_field(&job, out->obj, "job", true);
	int ep = string_field(&pk, out->obj, "pk", false);
	int er = string_field(&rk, out->obj, "rk", false);
	int ei = string_field(&id, out->obj, "id", false);
	out->job = ej == 0 ? job : NULL;
	out->pk = ep == 0 ? pk : NULL;
	out->rk = er == 0 ? rk : NULL;
	out->id = ei == 0 ? id : NULL;
	if ((err = ej) < 0 || (err = ep) < 0 || (err = er) < 0 || (err = ei) < 0)
		goto done;
	if (!*out->job) {
		err = ecw_error_set(ECW_EINVALID, "message field \"job\" is empty");
		goto done;
	}
	/* Keys come as a pair or not at all (a keyless job's message). */
	if (!out->pk != !out->rk) {
		err = ecw_error_set(ECW_EINVALID, "message has \"%s\" but no \"%s\"", out->pk ? "pk" : "rk",
				    out->pk ? "rk" : "pk");
		goto done;
	}
	if (out->pk && ((err = ecw_entity_key_check(out->pk, "message field \"pk\"")) < 0 ||
			(err = ecw_entity_key_check(out->rk, "message field \"rk\"")) < 0))
		goto done;
done:
	ecw_buf_dispose(&raw);
	return err;
}

int ecw_message_require_keys(const struct ecw_message *m)
{
	if (!m->pk)
		return ecw_error_set(ECW_EINVALID,
				     "message has no \"pk\" and \"rk\" (job '%.100s' acts on an entity)",
				     m->job ? m->job : "");
	return 0;
}

void ecw_message_dispose(struct ecw_message *m)
{
	if (!m)
		return;
	json_object_put(m->obj);
	memset(m, 0, sizeof(*m));
}

int ecw_message_encode(struct ecw_buf *out, const char *job, const char *pk, const char *rk, const char *id,
		       char *const *fields, bool base64)
{
	struct json_object *obj = json_object_new_object();
	const char *json;
	size_t n;
	int err = 0;

	if (!obj)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	json_object_object_add(obj, "job", json_object_new_string(job));
	if (!pk != !rk) {
		json_object_put(obj);
		return ecw_error_set(ECW_EINVALID, "a message has both keys or neither");
	}
	if (pk) {
		json_object_object_add(obj, "pk", json_object_new_string(pk));
		json_object_object_add(obj, "rk", json_object_new_string(rk));
	}
	if (id)
		json_object_object_add(obj, "id", json_object_new_string(id));
	for (size_t i = 0; fields && fields[i]; i++) {
		const char *eq = strchr(fields[i], '=');
		char key[256];
		if (!eq || eq == fields[i] || (size_t)(eq - fields[i]) >= sizeof(key)) {
			err = ecw_error_set(ECW_EINVALID, "field '%.64s' is not key=value", fields[i]);
			goto done;
		}
		memcpy(key, fields[i], (size_t)(eq - fields[i]));
		key[eq - fields[i]] = '\0';
		if (json_object_object_get_ex(obj, key, NULL)) {
			err = ecw_error_set(ECW_EINVALID,
					    "field '%s' is given twice or replaces job/pk/rk/id", key);
			goto done;
		}
		json_object_object_add(obj, key, json_object_new_string(eq + 1));
	}
	json = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	n = strlen(json);
	err = base64 ? ecw_base64_encode(out, json, n) : ecw_buf_add(out, json, n);
done:
	json_object_put(obj);
	return err;
}

/* The fields a keyless message is logged with: window_start, then its job
 * type's message_fields (a rollup's device). Bounded, as a message may be 64 KiB:
 * at most LOG_FIELDS fields of at most LOG_FIELD_MAX bytes. A longer value is
 * left out whole, not cut (half a secret would escape redaction), as is a
 * field named like one of the line's own keys or that is no string or
 * number; fields_omitted counts them. */
#define LOG_FIELDS 8
#define LOG_FIELD_MAX 256

static const char *const message_line_keys[] = {
	"time",     "level",      "event",         "outcome",        "job",      "pk",      "rk",
	"id",       "message_id", "dequeue_count", "duration_ms",    "group",    "reason",  "detail",
	"hidden_s", "error",      "truncated",     "fields_omitted", "trace_id", "span_id", "traceparent",
	NULL};

static bool log_one_field(struct ecw_log_line *l, const char *name, struct json_object *v)
{
	for (size_t i = 0; message_line_keys[i]; i++)
		if (strcmp(message_line_keys[i], name) == 0)
			return false;
	switch (json_object_get_type(v)) {
	case json_type_string:
		if (json_object_get_string_len(v) > LOG_FIELD_MAX)
			return false;
		ecw_log_str(l, name, json_object_get_string(v));
		return true;
	case json_type_int: ecw_log_int(l, name, json_object_get_int64(v)); return true;
	case json_type_double: ecw_log_double(l, name, json_object_get_double(v)); return true;
	default: return false;
	}
}

void ecw_message_log_fields(struct ecw_log_line *l, const struct ecw_message *m, const char *const *fields)
{
	int64_t logged = 0, omitted = 0;

	if (!l || !m->obj)
		return;
	for (size_t i = 0;; i++) {
		const char *name = i == 0 ? "window_start" : fields ? fields[i - 1] : NULL;
		struct json_object *v = NULL;

		if (!name)
			break;
		if (i > 0 && strcmp(name, "window_start") == 0)
			continue; /* logged first */
		/* Absent (or null) fields are the job's to report. */
		if (!json_object_object_get_ex(m->obj, name, &v) || !v)
			continue;
		if (logged < LOG_FIELDS && log_one_field(l, name, v))
			logged++;
		else
			omitted++;
	}
	if (omitted)
		ecw_log_int(l, "fields_omitted", omitted);
}
