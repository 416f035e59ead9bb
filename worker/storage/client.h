/* SPDX-License-Identifier: MIT */
/* client.h - the client's private side (client.c; the client itself is
 * public, ecw_storage.h): sending a request with signing, retries and the
 * classification of failures. The top of the request path: queue.c, table.c,
 * batch.c and blob.c call it; it drives http.c (or libcurl), auth.c and token.c,
 * none of which calls it back.
 *
 * Ownership: the request and the response are the caller's; the client only
 * adds headers to the request (x-ms-version, x-ms-date, Authorization, the
 * last wiped after use). */
#ifndef ECW_STORAGE_CLIENT_H
#define ECW_STORAGE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ecw_storage.h"
#include "request.h"
#include "response.h"

#define ECW_QUEUE_API_VERSION "2021-12-02"
#define ECW_TABLE_API_VERSION "2019-02-02"
#define ECW_BLOB_API_VERSION "2021-12-02"

/* Dates, signs, sends (retrying transient failures), and maps a non-2xx
 * answer to an ecw_err with the last error set from the body and headers. */
int ecw_client_send(struct ecw_response *resp, struct ecw_client *c, struct ecw_request *r) ECW_MUST_USE;
/* Told of each request of ecw_client_send_pipelined, in order: err as
 * ecw_client_send would have returned it, with the last error set for it
 * when it failed. */
typedef void (*ecw_client_done_fn)(void *payload, size_t i, int err);
/* Sends the n requests as ecw_client_send sends each, but pipelined on one
 * connection (ecw_http_send_pipelined), at most ECW_HTTP_PIPELINE_MAX in a
 * write and ECW_HTTP_PIPELINE_BODY_MAX bytes of bodies (one over it goes
 * alone), when the client can: http.c's transport, more than one request,
 * pipelining neither turned off (no_pipelining) nor stopped. Each request
 * must be idempotent (a PUT, a DELETE, a GET: never a POST), not a HEAD and
 * to the same service. A request left without its answer (the connection
 * closed or broke), or answered with a failure worth another try, is sent
 * again alone with ecw_client_send's whole retry policy; as with any retry
 * of a lost answer, it may then meet what its first sending did (a delete:
 * 404; a put If-None-Match "*": 409). done is called once for each, in
 * order; resps (n of them) are the caller's. */
void ecw_client_send_pipelined(struct ecw_client *c, struct ecw_request **rs, struct ecw_response *resps,
			       size_t n, ecw_client_done_fn done, void *payload);
const struct ecw_account *ecw_client_account(const struct ecw_client *c);
/* Full jitter: uniform in [0, min(max, base * 2^(retry-1))]; retry is 1-based. */
int64_t ecw_client_retry_delay_ms(const struct ecw_client_options *o, int retry, uint32_t rnd);

#ifdef ECW_TESTING
/* Test-only seams, compiled only into test builds (-DECW_TESTING). */
enum ecw_fault_kind {
	ECW_FAULT_STATUS,            /* answer with `status`, request never sent */
	ECW_FAULT_STATUS_AFTER_SEND, /* send for real, then replace the answer with `status` */
	ECW_FAULT_RESET,             /* connection reset before any answer; next request reconnects */
};
/* The next `count` requests (attempts, not calls) fail as described. */
void ecw_client_inject_faults(struct ecw_client *c, int count, enum ecw_fault_kind kind, long status);
/* Replaces the HTTP transport: fn gets the full URL and the signed request
 * (headers include x-ms-date and Authorization) and fills resp; it returns 0,
 * or a negative ecw_err for a network failure. */
typedef int (*ecw_send_fn)(void *ctx, struct ecw_response *resp, const char *url,
			   const struct ecw_request *r);
void ecw_client_set_transport(struct ecw_client *c, ecw_send_fn fn, void *ctx);
#endif

#endif
