/* SPDX-License-Identifier: MIT */
/* request.h - one storage request as the client signs and sends it: method,
 * path, query, headers and a borrowed body (request.c). The bottom of the
 * storage room: the transport (http.h), the signer (auth.h), the token
 * fetcher (token.h) and the client (client.h) all read it; it calls none of
 * them.
 *
 * Ownership: a request is a caller-owned struct (_init / _dispose). It owns
 * its path buffer and copies of every query and header name and value; the
 * body, method, op, content type and label are borrowed and must outlive
 * the request's use. */
#ifndef ECW_STORAGE_REQUEST_H
#define ECW_STORAGE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "ecw_buf.h"
#include "ecw_storage.h"

struct ecw_kv {
	char *name;  /* one allocation holds name and value: freeing name frees both */
	char *value; /* points into it */
};

#define ECW_REQ_MAX_QUERY 8
/* A blob put's metadata (ECW_BLOB_META_MAX pairs) beside its own headers
 * and the client's. */
#define ECW_REQ_MAX_HEADERS 32

struct ecw_request {
	enum ecw_service svc;
	const char *method;                     /* static string: "GET", "MERGE", ... */
	const char *op;                         /* static string naming the operation, for metrics */
	struct ecw_buf path;                    /* percent-encoded, after the endpoint: "/q/messages" */
	struct ecw_kv query[ECW_REQ_MAX_QUERY]; /* values DECODED: signed decoded, sent encoded */
	size_t nquery;
	struct ecw_kv
		headers[ECW_REQ_MAX_HEADERS]; /* without x-ms-date/Authorization: the client adds them */
	size_t nheaders;
	const char *content_type; /* NULL: no body type (an empty Content-Type: is sent) */
	const char *body;         /* not owned */
	size_t body_len;
	const char *label; /* names the request in messages (not owned); NULL:
				     * METHOD, endpoint path and path */
	size_t answer_max; /* the most the answer's body may hold; 0: by op
			    * (ecw_response_cap) */
};

void ecw_request_init(struct ecw_request *r, enum ecw_service svc, const char *method);
void ecw_request_dispose(struct ecw_request *r);
int ecw_request_add_query(struct ecw_request *r, const char *name, const char *value) ECW_MUST_USE;
/* Adds or replaces (names compare case-insensitively). */
int ecw_request_set_header(struct ecw_request *r, const char *name, const char *value) ECW_MUST_USE;
/* The header's value (owned by r); NULL when absent. */
const char *ecw_request_header(const struct ecw_request *r, const char *name);
/* Whether the request sends a body (and so Content-Length and Content-Type):
 * PUT, POST and MERGE always do, if only an empty one. */
bool ecw_request_has_body(const struct ecw_request *r);
/* Appends endpoint + path + "?" + encoded query (+ "&" + SAS) to out. For
 * logs use the path only: the URL may carry a SAS signature. */
int ecw_request_url(struct ecw_buf *out, const struct ecw_account *a,
		    const struct ecw_request *r) ECW_MUST_USE;

#endif
