/* SPDX-License-Identifier: MIT */
/* http_answer.h - reading one answer off a connection (http_answer.c), above
 * the connections (http_conn.h) and below the exchange (http.c), the only
 * file besides that sees it. */
#ifndef ECW_STORAGE_HTTP_ANSWER_H
#define ECW_STORAGE_HTTP_ANSWER_H

#include <stdbool.h>
#include <stdint.h>

#include "http_conn.h"
#include "response.h"

/* What an answer's head says of its body and its connection. */
struct framing {
	long status;
	int minor; /* HTTP/1.minor */
	bool chunked;
	bool close;       /* Connection: close, or HTTP/1.0 without keep-alive */
	long long length; /* Content-Length; -1 none */
};

/* Reads one answer (after any 1xx ones) off k into resp, its framing in f
 * (http_answer.c): 0, or a negative ecw_err with why. *none: the connection
 * ended before the answer's first byte. What came past the answer stays in
 * k->in. */
int ecw_http_read_answer(struct ecw_http *h, struct conn *k, struct ecw_response *resp, bool head_only,
			 int64_t deadline, struct framing *f, bool *none, char *why, size_t why_len);

#endif
