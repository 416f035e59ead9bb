/* SPDX-License-Identifier: MIT */
/* response.h - one answer as the transport reads it: status, the headers
 * kept, and the body (response.c). Beside request.h at the bottom of the
 * storage room: the transports fill it, everything above reads it.
 *
 * Ownership: a response is a caller-owned struct (_init / _dispose) that
 * owns its header and body buffers; a header value returned by
 * ecw_response_header points into it and lives until the next reset. */
#ifndef ECW_STORAGE_RESPONSE_H
#define ECW_STORAGE_RESPONSE_H

#include <stddef.h>

#include "ecw_buf.h"

#define ECW_RESP_MAX_HEADERS 48

struct ecw_response {
	long status;                      /* 0 until a response arrived */
	struct ecw_buf hdrs;              /* "name\0value\0" for each header kept, values trimmed */
	size_t hat[ECW_RESP_MAX_HEADERS]; /* where each header's name starts in hdrs */
	size_t nheaders;
	struct ecw_buf body;
};

void ecw_response_init(struct ecw_response *resp);
void ecw_response_dispose(struct ecw_response *resp);
/* Empties it for the next attempt (status 0, no headers, no body). */
void ecw_response_reset(struct ecw_response *resp);
/* Forgets the headers only: a new status line (after a 100 Continue) starts
 * a new set. */
void ecw_response_clear_headers(struct ecw_response *resp);
/* Keeps a copy of the header (value trimmed); headers past the count or the
 * size cap are dropped, not an error. */
int ecw_response_add_header(struct ecw_response *resp, const char *name, size_t nlen, const char *value,
			    size_t vlen) ECW_MUST_USE;
/* Case-insensitive; NULL when absent. */
const char *ecw_response_header(const struct ecw_response *resp, const char *name);
/* Header i (0 .. nheaders-1) as kept: *name and *value point into resp. */
void ecw_response_header_at(const struct ecw_response *resp, size_t i, const char **name, const char **value);

/* The most an answer's body to a request of kind op ("table.get",
 * "queue.receive", ...; NULL or unknown: a small answer) may hold: the
 * client sets it as the body's max before each exchange, so no endpoint,
 * however broken or hostile, makes a thread buffer more. The numbers and
 * their reasons are in response.c. */
size_t ecw_response_cap(const char *op);
/* Writes "an answer over the 8 MiB cap for table.query" (without " for
 * ..." when op is NULL) to out: the message of every ECW_ETOOLARGE for an
 * answer, from either transport. */
void ecw_response_cap_text(char *out, size_t n, size_t cap, const char *op);

#endif
