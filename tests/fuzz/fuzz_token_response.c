/* SPDX-License-Identifier: MIT */
/* fuzz_token_response.c - what a token endpoint (Entra ID, the instance
 * metadata service, App Service) answers, as worker/storage/token.c reads it.
 * Byte 0 picks the reader, the rest is the answer's body:
 *   even  a 200 answer (ecw_token_parse_response): a token comes back only
 *         with a lifetime in the future and no space or control character
 *         in it; a failure says one of the reader's own sentences, so it
 *         never echoes the answer (which holds the token);
 *   odd   an error answer (ecw_token_error_summary), quoted in the worker's
 *         error messages and logs: one line, within its buffer, and no JWT
 *         (an endpoint may quote the client assertion it refused). */
#include "fuzz.h"
#include "token.h"

static const char *const reasons[] = {
    "the token endpoint's answer is not a JSON object",
    "the token endpoint's answer has no access_token",
    "the token endpoint's access_token is not a token",
    "the token endpoint's expires_in is not a number of seconds",
    "the token endpoint's expires_on is not a time in seconds",
    "the token endpoint's answer has neither expires_in nor expires_on",
    "the token endpoint returned a token that has already expired",
    "out of memory",
};

static void check_parse(const char *body, size_t n)
{
	char *token = NULL;
	int64_t lifetime = -1, refresh = -1;
	int err = ecw_token_parse_response(&token, &lifetime, &refresh, body, n, 1800000000);

	if (err == 0) {
		FUZZ_CHECK(token != NULL && token[0] != '\0');
		for (const char *p = token; *p; p++)
			FUZZ_CHECK((unsigned char)*p > ' ' && *p != 0x7f);
		FUZZ_CHECK(lifetime > 0);
		FUZZ_CHECK(refresh >= 0);
		free(token);
		return;
	}
	FUZZ_CHECK(token == NULL);
	const char *msg = ecw_error_last()->message;
	bool known = false;
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		known |= strcmp(msg, reasons[i]) == 0;
	if (!known) {
		fprintf(stderr, "an error that is not the reader's own: %s\n", msg);
		abort();
	}
}

static void check_summary(const char *body, size_t n)
{
	char out[64];

	memset(out, 'x', sizeof(out));
	ecw_token_error_summary(out, sizeof(out), body, n);
	FUZZ_CHECK(memchr(out, '\0', sizeof(out)) != NULL);
	FUZZ_CHECK(strchr(out, '\n') == NULL && strchr(out, '\r') == NULL);
	FUZZ_CHECK(strstr(out, "eyJ") == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	char *body = fuzz_exact(data + 1, size - 1);

	if (data[0] & 1)
		check_summary(body, size - 1);
	else
		check_parse(body, size - 1);
	free(body);
	ecw_error_clear();
	return 0;
}
