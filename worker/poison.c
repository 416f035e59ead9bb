/* poison.c - building poison envelopes (see poison.h). */
#include <json-c/json.h>
#include <string.h>

#include "poison.h"

static void add_time(struct json_object *obj, const char *key, time_t t)
{
	char iso[32];
	struct tm tm;

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
	json_object_object_add(obj, "original", json_object_new_string_len(in->original, (int)in->original_len));
	add_str(obj, "queue", in->queue);
	add_str(obj, "message_id", in->message_id);
	add_time(obj, "inserted_at", in->inserted_at);
	json_object_object_add(obj, "dequeue_count", json_object_new_int64(in->dequeue_count));
	add_time(obj, "failed_at", in->failed_at);
	add_str(obj, "reason", in->reason);
	add_str(obj, "error", in->error);
	add_str(obj, "job", in->job);
	add_str(obj, "pk", in->pk);
	add_str(obj, "rk", in->rk);
	add_str(obj, "worker", in->worker);
	json = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	err = json ? ecw_buf_adds(out, json) : ecw_error_set(ECW_ENOMEM, "out of memory");
	json_object_put(obj);
	return err;
}
