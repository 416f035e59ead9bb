/* SPDX-License-Identifier: MIT */
/* ecw_token.h - the Entra ID token credential: where a storage access token
 * comes from (a Kubernetes workload identity's federated token exchanged at
 * the Entra token endpoint, or a managed identity's IMDS / App Service style
 * endpoint), and the cache that all clients of one account share (thread-safe,
 * refreshed before expiry by whichever client needs it first). A credential is
 * a heap object (_new / _free); an account takes it with
 * ecw_account_take_credential and frees it with itself. Tokens and federated
 * assertions never appear in an error message. */
#ifndef ECW_TOKEN_H
#define ECW_TOKEN_H

#include "ecw_err.h"

enum ecw_token_source {
	ECW_TOKEN_WORKLOAD_IDENTITY, /* federated token file -> {authority}{tenant}/oauth2/v2.0/token */
	ECW_TOKEN_MANAGED_IDENTITY,  /* IMDS, or IDENTITY_ENDPOINT + IDENTITY_HEADER */
};

#define ECW_TOKEN_DEFAULT_AUTHORITY "https://login.microsoftonline.com/"
#define ECW_TOKEN_DEFAULT_IMDS "http://169.254.169.254/metadata/identity/oauth2/token"

/* Strings are copied by ecw_token_credential_new. */
struct ecw_token_options {
	enum ecw_token_source source;
	/* workload identity: all required but authority_host (NULL: the default) */
	const char *authority_host;
	const char *tenant_id;
	const char *client_id;
	const char *federated_token_file; /* read again for every token: kubelet rotates it */
	/* managed identity */
	const char *endpoint;        /* NULL: ECW_TOKEN_DEFAULT_IMDS */
	const char *identity_header; /* non-NULL: App Service style (X-IDENTITY-HEADER,
	                              * api-version 2019-08-01); NULL: IMDS style */
	const char *mi_client_id;    /* a user-assigned identity; NULL: the system one */
};

struct ecw_token_credential;

/* Checks the options (an error names the missing or bad one) and makes an
 * empty cache; no request is made until a client needs a token. */
int ecw_token_credential_new(struct ecw_token_credential **out,
			     const struct ecw_token_options *o) ECW_MUST_USE;
void ecw_token_credential_free(struct ecw_token_credential *cred);
/* "workload-identity" or "managed-identity". */
const char *ecw_token_source_name(enum ecw_token_source src);
enum ecw_token_source ecw_token_credential_source(const struct ecw_token_credential *cred);

#endif
