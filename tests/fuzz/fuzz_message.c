/* SPDX-License-Identifier: MIT */
/* fuzz_message.c - the job message decoder (worker/message.c) and its
 * traceparent (worker/telemetry/trace.c), fed whatever a
 * queue message may hold: JSON, base64 of JSON, or anything else.
 * Invariants for a message that decodes: it has no NUL byte (neither JSON
 * nor base64 has one), job is non-empty, pk and rk pass the
 * key check, every field is exactly its JSON string (no hidden NUL cutting it
 * short), and encoding those fields again (plain and base64) decodes to the
 * same fields. A message that fails keeps only what decoded. */
#include <json-c/json.h>

#include "ecw_entity.h"
#include "fuzz.h"
#include "message.h"
#include "telemetry.h"

/* f is exactly the string field name of m's object. */
static void same_as_json(const struct ecw_message *m, const char *name, const char *f)
{
	struct json_object *v;

	if (!f)
		return;
	FUZZ_CHECK(json_object_object_get_ex(m->obj, name, &v));
	FUZZ_CHECK(json_object_get_string(v) == f);
	FUZZ_CHECK((size_t)json_object_get_string_len(v) == strlen(f));
}

static void same(const char *a, const char *b)
{
	FUZZ_CHECK((a == NULL) == (b == NULL));
	FUZZ_CHECK(!a || strcmp(a, b) == 0);
}

/* A traceparent never fails the decoding; one that reads back is written
 * as version 00 and reads back to the same context (the same text when it
 * was version 00). */
static void check_traceparent(const struct ecw_message *m)
{
	struct ecw_trace_ctx c, again;
	char out[ECW_TRACEPARENT_LEN + 1];

	FUZZ_CHECK(!m->traceparent || m->traceparent_present);
	if (!m->traceparent || ecw_trace_parent_parse(&c, m->traceparent, m->traceparent_len) < 0)
		return;
	ecw_trace_parent_format(out, &c);
	FUZZ_CHECK(ecw_trace_parent_parse(&again, out, strlen(out)) == 0);
	FUZZ_CHECK(memcmp(&c, &again, sizeof(c)) == 0);
	FUZZ_CHECK(m->traceparent[0] != '0' || m->traceparent[1] != '0' || strcmp(out, m->traceparent) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_exact(data, size);
	struct ecw_message m;
	int err = ecw_message_decode(&m, text, size);

	if (err == 0) {
		/* Keys come as a pair or not at all (a keyless job's message). */
		FUZZ_CHECK(m.obj && m.job && *m.job && !m.pk == !m.rk);
		FUZZ_CHECK((ecw_message_require_keys(&m) == 0) == (m.pk != NULL));
		/* Neither JSON nor base64 has a raw NUL byte anywhere; json-c's
		 * comments (which it accepts) may hold anything. */
		FUZZ_CHECK(!memchr(data, 0, size) || memchr(data, '/', size));
		FUZZ_CHECK(!m.pk ||
		           (ecw_entity_key_check(m.pk, "pk") == 0 && ecw_entity_key_check(m.rk, "rk") == 0));
		same_as_json(&m, "job", m.job);
		same_as_json(&m, "pk", m.pk);
		same_as_json(&m, "rk", m.rk);
		same_as_json(&m, "id", m.id);
		check_traceparent(&m);
		for (int b64 = 0; b64 < 2; b64++) {
			struct ecw_buf out;
			struct ecw_message again;
			ecw_buf_init(&out, 0);
			FUZZ_CHECK(ecw_message_encode(&out, m.job, m.pk, m.rk, m.id, NULL, b64) == 0);
			FUZZ_CHECK(ecw_message_decode(&again, out.ptr, out.len) == 0);
			FUZZ_CHECK(again.base64 == (b64 != 0));
			same(again.job, m.job);
			same(again.pk, m.pk);
			same(again.rk, m.rk);
			same(again.id, m.id);
			ecw_message_dispose(&again);
			ecw_buf_dispose(&out);
		}
	} else {
		FUZZ_CHECK(err == ECW_EINVALID || err == ECW_ENOMEM);
		/* What decoded stays readable for the poison envelope. */
		if (m.job)
			FUZZ_CHECK(strlen(m.job) < size + 1);
		if (m.pk)
			FUZZ_CHECK(strlen(m.pk) < size + 1);
		if (m.rk)
			FUZZ_CHECK(strlen(m.rk) < size + 1);
	}
	ecw_message_dispose(&m);
	free(text);
	return 0;
}
