/* SPDX-License-Identifier: MIT */
/* tokensrv.h - a token endpoint for the OAuth tests: a tiny HTTP/1.1 server
 * on 127.0.0.1 (one thread, one request per connection) that plays Entra ID's
 * v2.0 token endpoint (workload identity), IMDS, or an App Service identity
 * endpoint. It checks every request exactly (method, path, query, headers,
 * and each form field: the federated assertion must be the token file's
 * content) and answers with a JWT that Azurite's `--oauth basic` accepts,
 * minted for the moment (audience and expiry can be set wrong on purpose).
 * A request that does not match gets a 400 and is recorded as a mismatch.
 * The server is owned by the test: tokensrv_start / tokensrv_stop. */
#ifndef ECW_TOKENSRV_H
#define ECW_TOKENSRV_H

#include <stdbool.h>
#include <stddef.h>

enum tokensrv_mode {
	TOKENSRV_ENTRA,       /* POST /{tenant}/oauth2/v2.0/token, expires_in a number */
	TOKENSRV_IMDS,        /* GET /metadata/identity/oauth2/token, Metadata: true, expires_in a string */
	TOKENSRV_APP_SERVICE, /* GET /msi/token, X-IDENTITY-HEADER, expires_on a string */
};

#define TOKENSRV_TENANT "72f988bf-86f1-41af-91ab-2d7cd011db47"
#define TOKENSRV_CLIENT_ID "0c4bd8c5-6a1e-4b8e-8f2b-5d1e6b9a3c21"
#define TOKENSRV_IDENTITY_HEADER "test-identity-header-7f3a9c"

struct tokensrv_config {
	enum tokensrv_mode mode;
	const char *assertion;    /* ENTRA: the client_assertion expected */
	const char *mi_client_id; /* IMDS / APP_SERVICE: the client_id expected, NULL: none */
	const char *audience;     /* the token's aud; NULL: https://storage.azure.com */
	long exp_offset_s;        /* the token's exp from now; 0: 3600 */
	int status;               /* answer this status with an OAuth error instead; 0: a token */
};

struct tokensrv;

/* Starts listening on a free port; fails the test when it cannot. */
struct tokensrv *tokensrv_start(const struct tokensrv_config *cfg);
void tokensrv_stop(struct tokensrv *s);
int tokensrv_port(const struct tokensrv *s);
/* "http://127.0.0.1:PORT" */
const char *tokensrv_base(const struct tokensrv *s);
/* Requests answered, and how many did not match what was expected. */
size_t tokensrv_requests(struct tokensrv *s);
size_t tokensrv_mismatches(struct tokensrv *s);
/* What the first mismatch was ("" when none); owned by s. */
const char *tokensrv_mismatch(struct tokensrv *s);
/* The last token minted ("" before any); owned by s. */
const char *tokensrv_last_token(struct tokensrv *s);

#endif
