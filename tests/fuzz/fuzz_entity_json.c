/* SPDX-License-Identifier: MIT */
/* fuzz_entity_json.c - reading an entity as the Table service returns it
 * (ecw_entity_from_json, worker/storage/entity.c) and the round trip through
 * ecw_entity_to_json: an entity that parses writes JSON that parses back to
 * an equal entity (keys, names, EDM types and values, bit for bit), and
 * writing that again gives the same bytes; JSON that parses has no NUL byte.
 * ecw_entity_from_json reads the common flat form itself and the rest with
 * json-c: the result (the entity with its ETag and Timestamp, or the error)
 * must be the one json-c's path alone gives. The same input also goes through
 * the service error-body reader (ecw_jsonparse_error). */
#include <json-c/json.h>

#include "ecw_entity.h"
#include "fuzz.h"
#include "entity.h"
#include "jsonparse.h"

static bool same_text(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* rc, e and error: what ecw_entity_from_json gave for text. */
static void check_as_json_c(const char *text, size_t size, int rc, const struct ecw_entity *e,
                            const char *error)
{
	struct json_object *obj = ecw_jsonparse_value(text, size);
	struct ecw_entity *ref = NULL;
	struct ecw_buf a, b;
	int ref_rc;

	ecw_error_clear();
	ref_rc = obj ? ecw_entity_from_json_object(&ref, obj) : -1;
	json_object_put(obj);
	if ((rc == 0) != (ref_rc == 0)) {
		fprintf(stderr, "the readers disagree: ecw_entity_from_json %s, json-c %s (%s)\n",
		        rc == 0 ? "reads it" : error, ref_rc == 0 ? "reads it" : "refuses it",
		        ecw_error_last()->message);
		abort();
	}
	if (rc == 0) {
		ecw_buf_init(&a, 0);
		ecw_buf_init(&b, 0);
		FUZZ_CHECK(ecw_entity_equal(e, ref));
		FUZZ_CHECK(same_text(ecw_entity_etag(e), ecw_entity_etag(ref)));
		FUZZ_CHECK(same_text(ecw_entity_timestamp(e), ecw_entity_timestamp(ref)));
		FUZZ_CHECK(ecw_entity_to_json(&a, e) == 0 && ecw_entity_to_json(&b, ref) == 0);
		FUZZ_CHECK(a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0);
		ecw_buf_dispose(&a);
		ecw_buf_dispose(&b);
	} else if (obj) {
		FUZZ_CHECK(strcmp(error, ecw_error_last()->message) == 0);
	}
	ecw_entity_free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_exact(data, size);
	struct ecw_entity *e = NULL, *again = NULL, *copy = NULL;
	struct ecw_buf j1, j2;
	char code[64], msg[300];

	ecw_buf_init(&j1, 0);
	ecw_buf_init(&j2, 0);
	ecw_error_clear();
	int rc = ecw_entity_from_json(&e, text, size);
	char error[sizeof(ecw_error_last()->message)];
	snprintf(error, sizeof(error), "%s", ecw_error_last()->message);
	check_as_json_c(text, size, rc, e, error);
	if (rc == 0) {
		FUZZ_CHECK(e != NULL);
		/* JSON has no raw NUL byte, inside strings or out; json-c's
		 * comments (which it accepts) may hold anything. */
		FUZZ_CHECK(!memchr(data, 0, size) || memchr(data, '/', size));
		FUZZ_CHECK(ecw_entity_key_check(ecw_entity_pk(e), "pk") == 0 &&
		           ecw_entity_key_check(ecw_entity_rk(e), "rk") == 0);
		FUZZ_CHECK(ecw_entity_to_json(&j1, e) == 0);
		if (ecw_entity_from_json(&again, j1.ptr, j1.len) != 0) {
			fprintf(stderr, "written JSON does not parse back: %s\n  %s\n",
			        ecw_error_last()->message, j1.ptr);
			abort();
		}
		FUZZ_CHECK(ecw_entity_equal(e, again));
		FUZZ_CHECK(ecw_entity_to_json(&j2, again) == 0);
		FUZZ_CHECK(j1.len == j2.len && memcmp(j1.ptr, j2.ptr, j1.len) == 0);
		FUZZ_CHECK(ecw_entity_clone(&copy, e) == 0 && ecw_entity_equal(copy, e));
		for (size_t i = 0; i < ecw_entity_count(e); i++) {
			const struct ecw_prop *p = ecw_entity_at(e, i);
			FUZZ_CHECK(ecw_entity_get(e, p->name) == p);
		}
	} else {
		FUZZ_CHECK(e == NULL);
	}
	ecw_jsonparse_error(code, sizeof(code), msg, sizeof(msg), text, size);
	FUZZ_CHECK(strlen(code) < sizeof(code) && strlen(msg) < sizeof(msg));
	ecw_entity_free(e);
	ecw_entity_free(again);
	ecw_entity_free(copy);
	ecw_buf_dispose(&j1);
	ecw_buf_dispose(&j2);
	free(text);
	return 0;
}
