/* SPDX-License-Identifier: MIT */
/* fuzz_connstr.c - connection strings (ecw_account_parse and
 * ecw_account_parse_endpoints, worker/storage/account.c), then a request URL
 * and, with a key, a Shared Key signature made from the parsed account.
 * Invariants: a parsed account has queue and table http(s) endpoints (and a
 * blob one, or why not) without a trailing
 * '/', each endpoint_path a suffix of its endpoint, and a key or a SAS
 * (endpoints-only: neither); an error never shows an AccountKey or
 * SharedAccessSignature value. */
#define _GNU_SOURCE /* memmem, strcasestr */
#include <strings.h>

#include "ecw_storage.h"
#include "fuzz.h"
#include "account.h"
#include "auth.h"
#include "request.h"

/* s with the letters of every AccountKey and SharedAccessSignature value in
 * the other case (same length, same validity but for base64's padding bits);
 * NULL when no such value has a letter. */
static char *swap_secrets(const char *s)
{
	char *t = strdup(s);
	bool any = false;

	FUZZ_CHECK(t != NULL);
	for (char *p = t; *p;) {
		char *end = strchr(p, ';'), *eq;
		size_t n = end ? (size_t)(end - p) : strlen(p);
		eq = memchr(p, '=', n);
		if (eq && ((eq - p == 10 && strncasecmp(p, "AccountKey", 10) == 0) ||
		           (eq - p == 21 && strncasecmp(p, "SharedAccessSignature", 21) == 0)))
			for (char *c = eq + 1; c < p + n; c++)
				if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) {
					*c ^= 0x20;
					any = true;
				}
		p += n + (end != NULL);
	}
	if (!any) {
		free(t);
		return NULL;
	}
	return t;
}

/* No secret value of s shows in the error message msg: the value is in msg,
 * and the case-swapped value is in the message for the case-swapped input,
 * so it came from the input, not from the message's own words. */
static void no_secret_in(const char *msg, const char *s, bool endpoints_only)
{
	char *t = swap_secrets(s), msg2[sizeof(ecw_error_last()->message)];
	struct ecw_account *a = NULL;

	if (!t)
		return;
	if ((endpoints_only ? ecw_account_parse_endpoints(&a, t) : ecw_account_parse(&a, t)) < 0) {
		snprintf(msg2, sizeof(msg2), "%s", ecw_error_last()->message);
		for (const char *p = s, *q = t; *p;) {
			const char *end = strchr(p, ';'), *eq;
			size_t n = end ? (size_t)(end - p) : strlen(p);
			eq = memchr(p, '=', n);
			size_t vlen = eq ? n - (size_t)(eq + 1 - p) : 0;
			/* Both forms in one message: it came from elsewhere too. */
			if (vlen >= 4 && strncmp(p, q, n) != 0 && memmem(msg, strlen(msg), eq + 1, vlen) &&
			    !memmem(msg, strlen(msg), q + (eq + 1 - p), vlen) &&
			    memmem(msg2, strlen(msg2), q + (eq + 1 - p), vlen) &&
			    !memmem(msg2, strlen(msg2), eq + 1, vlen)) {
				fprintf(stderr, "error message shows a secret: %s\n", msg);
				abort();
			}
			p += n + (end != NULL);
			q += n + (end != NULL);
		}
	}
	ecw_account_free(a);
	free(t);
}

static void check_account(const struct ecw_account *a, bool endpoints_only)
{
	for (int svc = 0; svc < ECW_SVC_COUNT; svc++) {
		const char *ep = a->endpoint[svc];
		size_t n;
		/* The blob endpoint may be missing; then blob_none says why. */
		if (svc == ECW_SVC_BLOB && !ep) {
			FUZZ_CHECK(a->blob_none && *a->blob_none && !*a->endpoint_path[svc]);
			continue;
		}
		FUZZ_CHECK(ep && (strncasecmp(ep, "http://", 7) == 0 || strncasecmp(ep, "https://", 8) == 0));
		n = strlen(ep);
		FUZZ_CHECK(ep[n - 1] != '/');
		FUZZ_CHECK(a->endpoint_path[svc] >= ep && a->endpoint_path[svc] <= ep + n);
		FUZZ_CHECK(ecw_account_endpoint(a, (enum ecw_service)svc) == ep);
	}
	FUZZ_CHECK(a->name != NULL);
	if (endpoints_only)
		FUZZ_CHECK(!a->key && !a->sas);
	else
		FUZZ_CHECK(a->key || a->sas);
	FUZZ_CHECK(!a->key == !a->key_len);
}

static void use_account(const struct ecw_account *a)
{
	struct ecw_request r;
	struct ecw_buf out;

	ecw_request_init(&r, ECW_SVC_QUEUE, "GET");
	ecw_buf_init(&out, 0);
	FUZZ_CHECK(ecw_buf_adds(&r.path, "/fuzzq/messages") == 0);
	FUZZ_CHECK(ecw_request_add_query(&r, "numofmessages", "32") == 0);
	FUZZ_CHECK(ecw_request_set_header(&r, "x-ms-date", "Wed, 19 Aug 2026 10:00:00 GMT") == 0);
	FUZZ_CHECK(ecw_request_url(&out, a, &r) == 0);
	FUZZ_CHECK(strncmp(out.ptr, a->endpoint[ECW_SVC_QUEUE], strlen(a->endpoint[ECW_SVC_QUEUE])) == 0);
	if (a->key) {
		ecw_buf_reset(&out);
		FUZZ_CHECK(ecw_auth_header(&out, a, &r) == 0);
	}
	ecw_buf_dispose(&out);
	ecw_request_dispose(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_cstr(data, size);

	for (int endpoints_only = 0; endpoints_only < 2; endpoints_only++) {
		struct ecw_account *a = (struct ecw_account *)1;
		int err = endpoints_only ? ecw_account_parse_endpoints(&a, s) : ecw_account_parse(&a, s);
		if (err == 0) {
			FUZZ_CHECK(a != NULL);
			check_account(a, endpoints_only);
			use_account(a);
		} else {
			FUZZ_CHECK(a == NULL);
			FUZZ_CHECK(err == ECW_EINVALID || err == ECW_ENOMEM);
			char msg[sizeof(ecw_error_last()->message)];
			snprintf(msg, sizeof(msg), "%s", ecw_error_last()->message);
			no_secret_in(msg, s, endpoints_only);
		}
		ecw_account_free(a);
	}
	free(s);
	return 0;
}
