/* fuzz_entity_json.c - reading an entity as the Table service returns it
 * (ecw_entity_from_json, worker/storage/entity.c) and the round trip through
 * ecw_entity_to_json: an entity that parses writes JSON that parses back to
 * an equal entity (keys, names, EDM types and values, bit for bit), and
 * writing that again gives the same bytes; JSON that parses has no NUL byte. The same input also goes through
 * the service error-body reader (ecw_json_parse_error). */
#include "ecw_entity.h"
#include "fuzz.h"
#include "storage_private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_exact(data, size);
	struct ecw_entity *e = NULL, *again = NULL, *copy = NULL;
	struct ecw_buf j1, j2;
	char code[64], msg[300];

	ecw_buf_init(&j1, 0);
	ecw_buf_init(&j2, 0);
	if (ecw_entity_from_json(&e, text, size) == 0) {
		FUZZ_CHECK(e != NULL);
		/* JSON has no raw NUL byte, inside strings or out; json-c's
		 * comments (which it accepts) may hold anything. */
		FUZZ_CHECK(!memchr(data, 0, size) || memchr(data, '/', size));
		FUZZ_CHECK(ecw_key_check(ecw_entity_pk(e), "pk") == 0 && ecw_key_check(ecw_entity_rk(e), "rk") == 0);
		FUZZ_CHECK(ecw_entity_to_json(&j1, e) == 0);
		if (ecw_entity_from_json(&again, j1.ptr, j1.len) != 0) {
			fprintf(stderr, "written JSON does not parse back: %s\n  %s\n", ecw_error_last()->message,
				j1.ptr);
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
	ecw_json_parse_error(code, sizeof(code), msg, sizeof(msg), text, size);
	FUZZ_CHECK(strlen(code) < sizeof(code) && strlen(msg) < sizeof(msg));
	ecw_entity_free(e);
	ecw_entity_free(again);
	ecw_entity_free(copy);
	ecw_buf_dispose(&j1);
	ecw_buf_dispose(&j2);
	free(text);
	return 0;
}
