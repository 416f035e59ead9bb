/* SPDX-License-Identifier: MIT */
/* token.h - the token cache's private side (token.c; the credential itself is
 * public, ecw_token.h): reading a token endpoint's answers, when to refresh,
 * and getting a valid token. Above request.h and response.h, below the
 * client: a fetch goes out through the exchange function the client passes
 * in, so token.c never calls the client.
 *
 * Ownership: the cache and its token belong to the credential; callers get
 * a copy in their own buffer (a secret: wipe it). */
#ifndef ECW_STORAGE_TOKEN_H
#define ECW_STORAGE_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ecw_buf.h"
#include "ecw_token.h"
#include "request.h"
#include "response.h"

/* Reads a token endpoint's 200 answer: access_token, and its lifetime from
 * expires_in (a number or a string of digits, seconds from now) or else
 * expires_on (seconds since the epoch, number or string; now_unix converts
 * it). refresh_in (optional) comes back in *refresh_in_s, 0 when absent.
 * *token_out is heap (a secret: wipe and free it). */
int ecw_token_parse_response(char **token_out, int64_t *lifetime_s, int64_t *refresh_in_s, const char *body,
			     size_t len, int64_t now_unix) ECW_MUST_USE;
/* "invalid_client: AADSTS7000215: ..." from a token endpoint's error answer
 * (OAuth's error and the first line of error_description, or App Service's
 * {"message": ...}), for an error message: one line, JWTs cut out; "" when
 * the answer has neither. */
void ecw_token_error_summary(char *out, size_t cap, const char *body, size_t len);
/* When a token of this lifetime is due for refresh, in ms after it was
 * obtained: 5 minutes before expiry, or at half-life for short tokens, or
 * earlier when the endpoint said so (refresh_in_ms > 0). */
int64_t ecw_token_refresh_after_ms(int64_t lifetime_ms, int64_t refresh_in_ms);
/* Until when (ms after it was obtained) a token may still be sent: a margin
 * before expiry for clock skew and requests in flight. */
int64_t ecw_token_usable_ms(int64_t lifetime_ms);
/* Sends one request to a token endpoint and reads its answer into resp (reset
 * by the callee): url is absolute, nothing is signed or retried, and the
 * answer's status is left to the caller. Returns 0 when an answer came, or a
 * negative ecw_err for a network failure (last error set). */
typedef int (*ecw_token_exchange_fn)(struct ecw_response *resp, const char *url, const struct ecw_request *r,
				     void *payload);
/* Puts a valid token for cred into out (replacing its content): the cached
 * one, or a new one fetched with exchange(..., payload) (one caller fetches
 * while the others keep using a still-valid token or wait). *gen_out
 * identifies the token for ecw_token_refused. Errors: ECW_EAUTH for a refusal
 * by the token endpoint (400/401/403: a configuration problem), transient
 * codes for 5xx and network failures. */
int ecw_token_get(struct ecw_buf *out, uint64_t *gen_out, struct ecw_token_credential *cred,
		  ecw_token_exchange_fn exchange, void *payload) ECW_MUST_USE;
/* The service refused token gen: forget it. True when asking again may help
 * (a newer token exists, or this one was not freshly minted). */
bool ecw_token_refused(struct ecw_token_credential *cred, uint64_t gen);

#endif
