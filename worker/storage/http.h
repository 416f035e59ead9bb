/* SPDX-License-Identifier: MIT */
/* http.h - the HTTP/1.1 transport under the client (http.c): a client's
 * keep-alive connections, a request written, its answer read into a
 * response. Below the client, above request.h, response.h and resolve.h; it
 * never calls the client.
 *
 * Ownership: ecw_http_new makes a heap object freed with ecw_http_free,
 * which closes its connections. The request and the response stay the
 * caller's. */
#ifndef ECW_STORAGE_HTTP_H
#define ECW_STORAGE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ecw_storage.h"
#include "request.h"
#include "response.h"

/* A client's HTTP/1.1 connections. o is the client's and must outlive it:
 * timeouts, CA file, TLS verification. */
struct ecw_http;
int ecw_http_new(struct ecw_http **out, const struct ecw_client_options *o) ECW_MUST_USE;
void ecw_http_free(struct ecw_http *h);
/* The next request opens a new connection. */
void ecw_http_close_all(struct ecw_http *h);
/* Connections opened so far. */
uint64_t ecw_http_connections(const struct ecw_http *h);
/* Bytes the connections' input buffers hold between requests (for tests:
 * a big answer must not leave a big buffer behind). */
size_t ecw_http_buffered(const struct ecw_http *h);
/* Sends r (headers already signed) to url and reads the answer into resp,
 * which the caller has reset, its body capped at resp->body.max. Returns 0
 * when an answer came (any status), or a negative ecw_err with why it
 * failed in why (no URL, no request name): ECW_ETOOLARGE over the cap,
 * ECW_ECANCELED when the options' cancellation was set. */
int ecw_http_send(struct ecw_http *h, struct ecw_response *resp, const char *url, const struct ecw_request *r,
		  char *why, size_t why_len) ECW_MUST_USE;
/* The most requests ecw_http_send_pipelined sends at once, and the most
 * bytes of bodies among them: the answers are read only once all is
 * written, so what one write may hold is bounded (a server that stops
 * reading until its answers are taken leaves the rest in the sockets'
 * buffers). */
#define ECW_HTTP_PIPELINE_MAX 32
#define ECW_HTTP_PIPELINE_BODY_MAX ((size_t)256 * 1024)
/* Sends the n requests (1 to ECW_HTTP_PIPELINE_MAX, none a HEAD, their
 * bodies ECW_HTTP_PIPELINE_BODY_MAX together at most, all to one origin:
 * the caller's to guarantee idempotent) on that origin's connection back to
 * back, in one write, and reads their answers in order (HTTP/1.1
 * pipelining, RFC 9112 section 9.3.2) into resps[0..n), reset by the
 * caller, each as ecw_http_send reads one. *answered: how many got their
 * answer, in order. Returns 0 when all did; else a negative ecw_err with why
 * for the first that did not, and the connection is closed: the unanswered
 * ones are the caller's to send again, one at a time, as the RFC advises. A
 * kept connection found closed before any answer is opened again once, as
 * in ecw_http_send. */
int ecw_http_send_pipelined(struct ecw_http *h, struct ecw_response *resps, const char *const *urls,
			    const struct ecw_request *const *rs, size_t n, size_t *answered, char *why,
			    size_t why_len) ECW_MUST_USE;
/* Reads one answer from fd (the caller's, left open) as ecw_http_send reads
 * one from a connection: the way in for tests/fuzz/fuzz_http_answer.c, as
 * the framing is this file's parser of bytes from outside. *close: the
 * connection would not be kept; *left: bytes read past the answer. */
int ecw_http_read_fd(struct ecw_response *resp, int fd, bool head_only, int timeout_ms, bool *close,
		     size_t *left, char *why, size_t why_len) ECW_MUST_USE;

#endif
