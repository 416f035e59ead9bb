/* SPDX-License-Identifier: MIT */
/* http_conn.h - the transport's connections (http_conn.c: connect, TLS,
 * read, write), below the rest of the transport and seen by it alone: the
 * answer reader (http_answer.c, http_answer.h) and the exchange (http.c)
 * use them; they call neither. Here: a client's connections and their input
 * buffers, the transport's clock, a URL's parts. http.c owns the
 * connections (it frees their buffers); http_answer.c only takes bytes off
 * their input. */
#ifndef ECW_STORAGE_HTTP_CONN_H
#define ECW_STORAGE_HTTP_CONN_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "ecw_buf.h"
#include "ecw_storage.h"

#define HTTP_CONNS 3                      /* queue, table, a token endpoint */
#define HTTP_HEAD_MAX ((size_t)64 * 1024) /* a status line and headers */
#define HTTP_READ_CHUNK ((size_t)16 * 1024)
#define HTTP_JOIN_MAX ((size_t)16 * 1024) /* a TLS body sent in one write with its head */
#define HTTP_IN_KEEP ((size_t)64 * 1024)  /* a connection's input buffer kept between requests */

struct conn {
	char origin[272]; /* "scheme://authority" as in the URL; "" unused */
	int fd;           /* -1: none */
	SSL *ssl;         /* NULL for http */
	char *in;         /* bytes read and not yet taken */
	size_t in_len, in_cap;
	uint64_t used; /* for choosing which to close */
	bool sent;     /* a request just went out: its answer cannot be there yet */
};

struct ecw_http {
	const struct ecw_client_options *opts; /* the client's */
	uint64_t connections;                  /* opened so far */
	struct conn conns[HTTP_CONNS];
	uint64_t uses;
	struct ecw_buf head; /* the request line and headers being written */
	const char *op;      /* the exchange's kind, for the cap's message; may be NULL */
};

/* The transport's own clock: real time even where tests wrap ecw_clock_now_ms. */
static inline int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* strerror is not thread-safe. */
static inline const char *errtext(int e, char *buf, size_t n)
{
	if (strerror_r(e, buf, n) != 0)
		snprintf(buf, n, "error %d", e);
	return buf;
}

/* Where a URL points: its parts, as http.c's parse_url finds them. */
struct target {
	bool tls;
	char host[256]; /* without [] for IPv6 */
	char port[8];
	const char *authority; /* into the URL: host[:port], for Host: */
	size_t authority_len;
	const char *path;  /* into the URL: path and query; "" means "/" */
	size_t origin_len; /* of "scheme://authority" */
};

/* Opens k to t (TCP, then TLS for https) within the connect timeout and
 * the deadline: 0, or a negative ecw_err with why; counts h->connections. */
int ecw_http_conn_open(struct ecw_http *h, struct conn *k, const struct target *t, int64_t deadline,
		       char *why, size_t why_len);
/* Closes k's socket (and TLS) and drops its unread input; k stays usable. */
void ecw_http_conn_close(struct conn *k);
/* Sends all of the n iovecs by the deadline: 0, or -1 with errno (EAGAIN:
 * timed out; ECANCELED: the worker is stopping). */
int ecw_http_conn_write(struct ecw_http *h, struct conn *k, struct iovec *iov, int n, int64_t deadline);
/* Reads what comes next onto k->in: > 0 bytes, 0 at the end of the stream,
 * < 0 with errno (EAGAIN: timed out; ECANCELED: the worker is stopping;
 * ENOMEM). */
ssize_t ecw_http_conn_read(struct ecw_http *h, struct conn *k, int64_t deadline);

#endif
