/* SPDX-License-Identifier: MIT */
/* auth.h - Shared Key signing (auth.c): reads an account and a request,
 * appends to the caller's buffer. Above request.h, below the client. */
#ifndef ECW_STORAGE_AUTH_H
#define ECW_STORAGE_AUTH_H

#include <stddef.h>

#include "account.h"
#include "request.h"

/* The Shared Key string-to-sign for r (layout depends on r->svc; r must carry
 * x-ms-date already). */
int ecw_auth_string_to_sign(struct ecw_buf *out, const struct ecw_account *a,
			    const struct ecw_request *r) ECW_MUST_USE;
/* "SharedKey account:signature" */
int ecw_auth_header(struct ecw_buf *out, const struct ecw_account *a,
		    const struct ecw_request *r) ECW_MUST_USE;
int ecw_auth_hmac_sha256_base64(struct ecw_buf *out, const unsigned char *key, size_t key_len,
				const char *msg, size_t msg_len) ECW_MUST_USE;

#endif
