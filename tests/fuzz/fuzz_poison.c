/* SPDX-License-Identifier: MIT */
/* fuzz_poison.c - reading poison messages (ecw_poison_parse, worker/poison.c):
 * whatever text an operator's poison queue holds, an ecworker envelope or a
 * foreign message, then its `poison list --json` form, the filters, and the
 * --since parser on the same text.
 * Invariants: parsing never fails on content; a foreign message's original
 * is the whole text byte for byte; an envelope's fields written into a new
 * envelope read back the same (original byte for byte). */
#include <json-c/json.h>

#include "fuzz.h"
#include "poison.h"

static void same(const char *a, const char *b)
{
	FUZZ_CHECK((a == NULL) == (b == NULL));
	FUZZ_CHECK(!a || strcmp(a, b) == 0);
}

static void round_trip(const struct ecw_poison_view *v)
{
	struct ecw_poison_info in = {
	    .original = v->original,
	    .original_len = v->original_len,
	    .queue = v->queue,
	    .message_id = v->message_id,
	    .inserted_at = v->inserted_at,
	    .dequeue_count = v->dequeue_count,
	    .failed_at = v->failed_at,
	    .reason = v->reason,
	    .error = v->error,
	    .job = v->job,
	    .pk = v->pk,
	    .rk = v->rk,
	    .worker = v->worker,
	};
	struct ecw_poison_view w;
	struct ecw_buf out;

	ecw_buf_init(&out, 0);
	FUZZ_CHECK(ecw_poison_envelope(&out, &in) == 0);
	FUZZ_CHECK(ecw_poison_parse(&w, out.ptr, out.len) == 0);
	FUZZ_CHECK(w.envelope);
	FUZZ_CHECK(w.original_len == v->original_len &&
	           memcmp(w.original, v->original, v->original_len) == 0);
	same(w.job, v->job);
	same(w.pk, v->pk);
	same(w.rk, v->rk);
	same(w.reason, v->reason);
	same(w.error, v->error);
	same(w.queue, v->queue);
	same(w.message_id, v->message_id);
	same(w.worker, v->worker);
	FUZZ_CHECK(w.dequeue_count == v->dequeue_count);
	FUZZ_CHECK(w.failed_at == v->failed_at && w.inserted_at == v->inserted_at);
	ecw_poison_view_dispose(&w);
	ecw_buf_dispose(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_exact(data, size), *s = fuzz_cstr(data, size);
	struct ecw_poison_view v;
	struct json_object *j;
	time_t since;

	FUZZ_CHECK(ecw_poison_parse(&v, text, size) == 0);
	FUZZ_CHECK(v.original && v.original[v.original_len] == '\0');
	if (!v.envelope) {
		FUZZ_CHECK(v.original_len == size && memcmp(v.original, data, size) == 0);
		FUZZ_CHECK(!v.job && !v.pk && !v.rk && !v.reason && v.dequeue_count == -1);
	} else {
		round_trip(&v);
	}
	FUZZ_CHECK((j = ecw_poison_view_json(&v, "id-1", 1700000000)) != NULL);
	FUZZ_CHECK(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN) != NULL);
	json_object_put(j);
	{
		char *ids[] = {"id-1"};
		struct ecw_poison_filter f = {.job = v.job ? v.job : "j",
		                              .reason = "permanent",
		                              .since = 1,
		                              .grep = s[0] ? s : "x",
		                              .ids = ids,
		                              .nids = 1};
		(void)ecw_poison_filter_match(&f, "id-1", 1700000000, &v);
		FUZZ_CHECK(!ecw_poison_filter_empty(&f));
	}
	if (ecw_poison_parse_since(&since, s, 1700000000) == 0)
		FUZZ_CHECK(since > 0);
	ecw_poison_view_dispose(&v);
	free(text);
	free(s);
	return 0;
}
