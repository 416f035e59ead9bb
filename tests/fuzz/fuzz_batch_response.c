/* SPDX-License-Identifier: MIT */
/* fuzz_batch_response.c - the entity group transaction ($batch) response
 * parser (ecw_batch_parse_response, worker/storage/batch.c): multipart
 * bodies with boundaries read from Content-Type headers, a changeset of
 * application/http sub-responses, and the failing operation's index in an
 * OData error message.
 * Input: byte 0 picks how many operations the batch holds (1..100), byte 1
 * their kinds; then the response's Content-Type up to the first '\n'; then
 * the body. Invariants: success means one 2xx status per operation; failure
 * names an operation of the batch or none (-1). */
#include "ecw_entity.h"
#include "ecw_storage.h"
#include "fuzz.h"
#include "batch.h"

static struct ecw_batch *make_batch(size_t n, unsigned kinds)
{
	struct ecw_batch *b;

	FUZZ_CHECK(ecw_batch_new(&b, "fuzztable") == 0);
	for (size_t i = 0; i < n; i++) {
		enum ecw_batch_op op = (enum ecw_batch_op)((kinds + i) % 6);
		bool cond = op == ECW_BATCH_UPDATE || op == ECW_BATCH_MERGE || op == ECW_BATCH_DELETE;
		struct ecw_entity *e;
		char rk[16];
		snprintf(rk, sizeof(rk), "r%zu", i);
		FUZZ_CHECK(ecw_entity_new(&e, "p", rk) == 0);
		FUZZ_CHECK(ecw_batch_add(b, op, e, cond ? "*" : NULL) == 0);
		ecw_entity_free(e);
	}
	return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl;
	size_t n, ct_len;
	char *ct, *body;
	struct ecw_batch *b;
	int err;

	if (size < 2)
		return 0;
	n = 1 + data[0] % ECW_BATCH_MAX_OPS;
	b = make_batch(n, data[1]);
	data += 2;
	size -= 2;
	nl = memchr(data, '\n', size);
	ct_len = nl ? (size_t)(nl - data) : size;
	ct = fuzz_cstr(data, ct_len);
	data += nl ? ct_len + 1 : ct_len;
	size -= nl ? ct_len + 1 : ct_len;
	body = fuzz_exact(data, size);

	err = ecw_batch_parse_response(b, ct, body, size);
	if (err == 0) {
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(ecw_batch_status(b, i) >= 200 && ecw_batch_status(b, i) < 300);
	} else {
		int fi = ecw_batch_failed_index(b);
		FUZZ_CHECK(fi >= -1 && fi < (int)n);
		FUZZ_CHECK(ecw_error_last()->code == err);
	}
	for (size_t i = 0; i < n; i++) {
		const char *etag = ecw_batch_etag(b, i);
		FUZZ_CHECK(!etag || strlen(etag) <= size);
	}
	/* Parsing again (a retried batch) starts from a clean slate. */
	FUZZ_CHECK(ecw_batch_parse_response(b, ct, body, size) == err);
	ecw_batch_free(b);
	free(ct);
	free(body);
	return 0;
}
