/* SPDX-License-Identifier: MIT */
/* fuzz_http_answer.c - http.c's reading of an HTTP/1.1 answer: status line,
 * headers, interim 1xx answers, Content-Length, chunked bodies with
 * extensions and trailers, bodies up to the close (ecw_http_read_fd on one
 * end of a socket pair whose other end wrote the input and shut down).
 * Byte 0: bit 0 = the request was a HEAD; the rest is what the server sent.
 * Invariants: an answer that reads has a final status (200-599); a HEAD, 204
 * or 304 has no body; a body is no longer than what came; one with neither
 * length nor chunks runs to the close and closes; a failure says why
 * and is a transient, too-large or out-of-memory one (the input ended, so it
 * is never a timeout). */
#include <sys/socket.h>
#include <unistd.h>

#include "ecw_storage.h"
#include "fuzz.h"
#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ecw_response resp;
	char why[256];
	bool head_only, closes = false;
	size_t left = 0;
	int sv[2], err;

	/* The whole input must fit in the socket's buffer before it is read. */
	if (size < 1 || size > 64 * 1024)
		return 0;
	head_only = data[0] & 1;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		abort();
	int sz = 256 * 1024;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	for (size_t off = 1; off < size;) {
		ssize_t w = write(sv[0], data + off, size - off);
		FUZZ_CHECK(w > 0);
		off += (size_t)w;
	}
	shutdown(sv[0], SHUT_WR);
	ecw_response_init(&resp);
	err = ecw_http_read_fd(&resp, sv[1], head_only, 5000, &closes, &left, why, sizeof(why));
	if (err == 0) {
		FUZZ_CHECK(resp.status >= 200 && resp.status <= 599);
		if (head_only || resp.status == 204 || resp.status == 304)
			FUZZ_CHECK(resp.body.len == 0);
		FUZZ_CHECK(resp.body.len + left < size);
		/* A body with neither length nor chunks ends with the connection,
		 * which then cannot be kept. (Seen only while the response kept
		 * every header: it keeps the first ECW_RESP_MAX_HEADERS, and those
		 * after still frame the answer.) */
		if (resp.nheaders < ECW_RESP_MAX_HEADERS && !head_only && resp.status != 204 &&
		    resp.status != 304 && !ecw_response_header(&resp, "Content-Length") &&
		    !ecw_response_header(&resp, "Transfer-Encoding"))
			FUZZ_CHECK(closes && left == 0);
	} else {
		FUZZ_CHECK(why[0] != '\0' && strlen(why) < sizeof(why));
		FUZZ_CHECK(err == ECW_ETRANSIENT || err == ECW_ETOOLARGE || err == ECW_ENOMEM);
	}
	ecw_response_dispose(&resp);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
