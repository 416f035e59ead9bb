/* SPDX-License-Identifier: MIT */
/* http.c - the HTTP/1.1 transport under the storage client: a few keep-alive
 * connections (one per origin: the queue and table endpoints, a token
 * endpoint), plain or TLS through OpenSSL, a request written in one call and
 * its answer read into an ecw_response.
 *
 * It does what a storage request needs and no more: no redirects, no
 * cookies, no compression, no HTTP/2, no proxies (client.c hands a proxied
 * client to libcurl). What it must get exactly right, it does as RFC 9112
 * says: the status line, header fields, Content-Length against chunked (a
 * chunked body wins, several differing lengths are an error), 1xx interim
 * answers skipped, no body for HEAD, 204 and 304, a body up to the close
 * when neither length is given, and "Connection: close" honoured.
 *
 * Requests to one origin can also go pipelined (RFC 9112 section 9.3.2,
 * ecw_http_send_pipelined): written back to back in one write, bodies and
 * all (a bounded sum of them), and their answers read in order, each as a
 * lone one is read; what came past one answer stays in the connection's
 * input buffer for the next.
 *
 * The connections themselves (TCP, TLS, the reads and writes by a deadline)
 * are http_conn.c's, and reading an answer is http_answer.c's; this file is
 * the exchange on top of both (http_conn.h and http_answer.h). A
 * host's addresses come from resolve.c, which looks each name up once for
 * every thread's connections.
 *
 * Timeouts: connect_timeout_ms bounds the TCP connect and TLS handshake,
 * timeout_ms the whole exchange. Sockets are non-blocking and every wait is
 * a poll() that also watches the client's cancellation (ecw_cancel.h): once
 * it is set, the exchange stops at once, its connection is closed and it
 * fails with ECW_ECANCELED.
 *
 * Memory: an answer's body is capped by the response's body max, which the
 * client sets by the request's kind (ecw_response_cap); a body over it -
 * by its Content-Length, a chunk's size, or what came before the close -
 * fails with ECW_ETOOLARGE before more is read. Bodies are taken off the
 * connection's input buffer as they arrive, so it holds a head or one
 * read's worth, and it is let go after an exchange that grew it past 64 KiB.
 *
 * A connection kept from an earlier request
 * that turns out closed (the server drops idle ones) before any byte of the
 * answer came is opened again once and the request sent again, as libcurl
 * does; any other failure closes the connection and is the caller's to
 * retry. Why it failed goes to a caller's buffer, without the request's
 * name (client.c adds it) and never with the URL's query (a SAS). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <time.h>

#include "http.h"
#include "http_answer.h"
#include "http_conn.h"

/* ---- the URL ------------------------------------------------------------------------------- */

static int parse_url(struct target *t, const char *url, char *why, size_t why_len)
{
	const char *a, *end, *h, *hend, *colon = NULL;

	memset(t, 0, sizeof(*t));
	if (strncmp(url, "http://", 7) == 0) {
		a = url + 7;
	} else if (strncmp(url, "https://", 8) == 0) {
		a = url + 8;
		t->tls = true;
	} else {
		snprintf(why, why_len, "not an http or https URL");
		return ECW_EINVALID;
	}
	end = a + strcspn(a, "/?#");
	if (end == a || memchr(a, '@', (size_t)(end - a))) {
		snprintf(why, why_len, "a URL without a host, or with user information");
		return ECW_EINVALID;
	}
	if (*a == '[') {
		if (!(hend = memchr(a, ']', (size_t)(end - a)))) {
			snprintf(why, why_len, "a URL with an unclosed [");
			return ECW_EINVALID;
		}
		if (hend + 1 < end && hend[1] == ':')
			colon = hend + 1;
		h = a + 1; /* the host is inside the brackets */
	} else {
		colon = memchr(a, ':', (size_t)(end - a));
		hend = colon ? colon : end;
		h = a;
	}
	if ((size_t)(hend - h) >= sizeof(t->host)) {
		snprintf(why, why_len, "a URL whose host is too long");
		return ECW_EINVALID;
	}
	memcpy(t->host, h, (size_t)(hend - h));
	t->host[hend - h] = '\0';
	if (colon && colon + 1 < end) {
		size_t n = (size_t)(end - colon - 1);
		if (n >= sizeof(t->port) || strspn(colon + 1, "0123456789") < n) {
			snprintf(why, why_len, "a URL with a bad port");
			return ECW_EINVALID;
		}
		memcpy(t->port, colon + 1, n);
		t->port[n] = '\0';
	} else {
		memcpy(t->port, t->tls ? "443" : "80", t->tls ? 4 : 3);
	}
	t->authority = a;
	t->authority_len = (size_t)(end - a);
	t->path = end;
	t->origin_len = (size_t)(end - url);
	if (t->origin_len >= sizeof(((struct conn *)0)->origin)) {
		snprintf(why, why_len, "a URL whose host is too long");
		return ECW_EINVALID;
	}
	return 0;
}

/* ---- the exchange ---------------------------------------------------------------------------- */

int ecw_http_new(struct ecw_http **out, const struct ecw_client_options *o)
{
	struct ecw_http *h = calloc(1, sizeof(*h));

	*out = NULL;
	if (!h)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	h->opts = o;
	for (int i = 0; i < HTTP_CONNS; i++)
		h->conns[i].fd = -1;
	ecw_buf_init(&h->head, HTTP_HEAD_MAX);
	*out = h;
	return 0;
}

void ecw_http_close_all(struct ecw_http *h)
{
	for (int i = 0; i < HTTP_CONNS; i++)
		ecw_http_conn_close(&h->conns[i]);
}

void ecw_http_free(struct ecw_http *h)
{
	if (!h)
		return;
	ecw_http_close_all(h);
	for (int i = 0; i < HTTP_CONNS; i++)
		free(h->conns[i].in);
	ecw_buf_dispose(&h->head);
	free(h);
}

uint64_t ecw_http_connections(const struct ecw_http *h)
{
	return h->connections;
}

size_t ecw_http_buffered(const struct ecw_http *h)
{
	size_t n = 0;

	for (int i = 0; i < HTTP_CONNS; i++)
		n += h->conns[i].in_cap;
	return n;
}

/* After an exchange: an input buffer that a large head (or many pipelined
 * bytes) grew past HTTP_IN_KEEP is let go, so a worker's idle connections
 * hold a few KiB each whatever they once read. Bytes left in it would be
 * dropped before the next request anyway. */
static void conn_shrink(struct conn *k)
{
	if (k->in_cap <= HTTP_IN_KEEP)
		return;
	free(k->in);
	k->in = NULL;
	k->in_len = k->in_cap = 0;
}

/* The connection kept for url's origin, or the least recently used one. */
static struct conn *conn_for(struct ecw_http *h, const char *url, const struct target *t)
{
	struct conn *k = NULL;

	for (int i = 0; i < HTTP_CONNS; i++)
		if (strncmp(h->conns[i].origin, url, t->origin_len) == 0 &&
		    h->conns[i].origin[t->origin_len] == '\0')
			return &h->conns[i];
	for (int i = 0; i < HTTP_CONNS; i++)
		if (!k || h->conns[i].used < k->used)
			k = &h->conns[i];
	ecw_http_conn_close(k);
	memcpy(k->origin, url, t->origin_len);
	k->origin[t->origin_len] = '\0';
	return k;
}

/* Appends r's request line and headers to b. */
static int write_head(struct ecw_buf *b, const struct target *t, const struct ecw_request *r, bool body)
{
	int err;

	if ((err = ecw_buf_adds(b, r->method)) < 0 || (err = ecw_buf_addc(b, ' ')) < 0 ||
	    (err = *t->path == '/' ? ecw_buf_adds(b, t->path) : ecw_buf_addc(b, '/')) < 0 ||
	    (err = *t->path == '?' ? ecw_buf_adds(b, t->path) : 0) < 0 ||
	    (err = ecw_buf_adds(b, " HTTP/1.1\r\nHost: ")) < 0 ||
	    (err = ecw_buf_add(b, t->authority, t->authority_len)) < 0 ||
	    (err = ecw_buf_add(b, "\r\n", 2)) < 0)
		return err;
	for (size_t i = 0; i < r->nheaders; i++)
		if ((err = ecw_buf_adds(b, r->headers[i].name)) < 0 || (err = ecw_buf_add(b, ": ", 2)) < 0 ||
		    (err = ecw_buf_adds(b, r->headers[i].value)) < 0 || (err = ecw_buf_add(b, "\r\n", 2)) < 0)
			return err;
	if (r->content_type &&
	    ((err = ecw_buf_adds(b, "Content-Type: ")) < 0 || (err = ecw_buf_adds(b, r->content_type)) < 0 ||
	     (err = ecw_buf_add(b, "\r\n", 2)) < 0))
		return err;
	if (body && (err = ecw_buf_printf(b, "Content-Length: %zu\r\n", r->body_len)) < 0)
		return err;
	return ecw_buf_add(b, "\r\n", 2);
}

/* No CR or LF may reach the request's head from a header. */
static int check_headers(const struct ecw_request *r, char *why, size_t why_len)
{
	for (size_t i = 0; i < r->nheaders; i++)
		if (strpbrk(r->headers[i].name, "\r\n:") || strpbrk(r->headers[i].value, "\r\n")) {
			snprintf(why, why_len, "a request header with a line break");
			return ECW_EINVALID;
		}
	return 0;
}

/* Why a write ended the exchange: the errno conn_write left. *none: the
 * connection was found broken, so no byte of an answer can come. */
static int write_failed(char *why, size_t why_len, bool *none)
{
	int saved = errno;
	bool timed_out = saved == EAGAIN || saved == EWOULDBLOCK;
	char text[96];

	if (saved == ECANCELED)
		snprintf(why, why_len, "the worker is stopping (sending the request)");
	else
		snprintf(why, why_len, "%s sending the request%s%s",
			 timed_out ? "timed out" : "connection broken", timed_out ? "" : ": ",
			 timed_out ? "" : errtext(saved, text, sizeof(text)));
	*none = !timed_out && saved != ECANCELED;
	return saved == ECANCELED ? ECW_ECANCELED : timed_out ? ECW_ETIMEOUT : ECW_ETRANSIENT;
}

int ecw_http_send(struct ecw_http *h, struct ecw_response *resp, const char *url, const struct ecw_request *r,
		  char *why, size_t why_len)
{
	int64_t deadline = now_ms() + h->opts->timeout_ms;
	bool body = ecw_request_has_body(r), head_only = strcmp(r->method, "HEAD") == 0;
	struct target t;
	struct conn *k;
	int err;

	why[0] = '\0';
	if ((err = parse_url(&t, url, why, why_len)) < 0 || (err = check_headers(r, why, why_len)) < 0)
		return err;
	ecw_buf_reset(&h->head);
	if ((err = write_head(&h->head, &t, r, body)) < 0) {
		snprintf(why, why_len, "request headers too large");
		return err;
	}
	/* Over TLS a body of ordinary size goes out with the head: one record
	 * and one system call rather than two of each. */
	bool joined =
		t.tls && body && r->body_len <= HTTP_JOIN_MAX && r->body_len <= h->head.max - h->head.len;
	if (joined && (err = ecw_buf_add(&h->head, r->body, r->body_len)) < 0) {
		snprintf(why, why_len, "out of memory");
		return err;
	}
	if (ecw_cancel_is_set(h->opts->cancel)) {
		snprintf(why, why_len, "the worker is stopping");
		return ECW_ECANCELED;
	}
	h->op = r->op;
	k = conn_for(h, url, &t);
	k->used = ++h->uses;
	for (int attempt = 1;; attempt++) {
		struct iovec iov[2] = {{h->head.ptr, h->head.len},
				       {(void *)(r->body ? r->body : ""), body && !joined ? r->body_len : 0}};
		struct framing f;
		bool reused = k->fd >= 0, none = false;

		if (!reused && (err = ecw_http_conn_open(h, k, &t, deadline, why, why_len)) < 0)
			return err;
		k->in_len = 0;
		k->sent = false;
		if (ecw_http_conn_write(h, k, iov, 2, deadline) < 0) {
			err = write_failed(why, why_len, &none);
		} else {
			k->sent = !k->ssl;
			err = ecw_http_read_answer(h, k, resp, head_only, deadline, &f, &none, why, why_len);
		}
		if (err == 0) {
			resp->status = f.status;
			if (f.close)
				ecw_http_conn_close(k);
			conn_shrink(k);
			return 0;
		}
		ecw_http_conn_close(k);
		conn_shrink(k);
		/* A kept connection the server had closed: once more on a new one. */
		if (!(reused && none && attempt == 1 && err == ECW_ETRANSIENT))
			return err;
		ecw_response_reset(resp);
	}
}

/* Where request i's head ends in h->head, and its body: the iovecs of a
 * pipelined write. Over TLS a body of ordinary size joins the heads (one
 * record and one call for them all); on plain TCP writev takes it where it
 * is, uncopied. */
struct piece {
	size_t head_end;  /* h->head.len after this request's head (and joined body) */
	const char *body; /* NULL: none, or joined */
	size_t body_len;
};

/* Every request line and head, and every body, back to back in one
 * write, as pieces of h->head and the callers' bodies. */
static int pipeline_heads(struct ecw_http *h, struct piece *pieces, struct target *t, const char *const *urls,
			  const struct ecw_request *const *rs, size_t n, char *why, size_t why_len)
{
	size_t body_total = 0;
	int err;

	ecw_buf_reset(&h->head);
	for (size_t i = 0; i < n; i++) {
		bool body = ecw_request_has_body(rs[i]);
		struct target ti;

		if ((err = parse_url(&ti, urls[i], why, why_len)) < 0 ||
		    (err = check_headers(rs[i], why, why_len)) < 0)
			return err;
		if (i == 0)
			*t = ti;
		if (strcmp(rs[i]->method, "HEAD") == 0 || ti.origin_len != t->origin_len ||
		    strncmp(urls[i], urls[0], t->origin_len) != 0) {
			snprintf(why, why_len, "only requests other than HEAD, to one origin, are pipelined");
			return ECW_EINVALID;
		}
		body_total += body ? rs[i]->body_len : 0;
		if (body_total > ECW_HTTP_PIPELINE_BODY_MAX) {
			snprintf(why, why_len, "over %zu bytes of bodies to pipeline",
				 (size_t)ECW_HTTP_PIPELINE_BODY_MAX);
			return ECW_EINVALID;
		}
		if ((err = write_head(&h->head, &ti, rs[i], body)) < 0) {
			snprintf(why, why_len, "request headers too large");
			return err;
		}
		pieces[i] = (struct piece){0, NULL, 0};
		if (body && rs[i]->body_len) {
			bool joined = ti.tls && rs[i]->body_len <= HTTP_JOIN_MAX &&
				      rs[i]->body_len <= h->head.max - h->head.len;
			if (joined && (err = ecw_buf_add(&h->head, rs[i]->body, rs[i]->body_len)) < 0) {
				snprintf(why, why_len, "out of memory");
				return err;
			}
			if (!joined)
				pieces[i] = (struct piece){0, rs[i]->body, rs[i]->body_len};
		}
		pieces[i].head_end = h->head.len;
	}
	return 0;
}

/* The iovecs of pieces[0..n) over h->head: each run of heads up to a body,
 * then the body. Returns how many (at most 2n). */
static int pipeline_iov(struct iovec *iov, const struct ecw_http *h, const struct piece *pieces, size_t n)
{
	size_t from = 0;
	int k = 0;

	for (size_t i = 0; i < n; i++) {
		if (!pieces[i].body && i + 1 < n)
			continue;
		iov[k++] = (struct iovec){h->head.ptr + from, pieces[i].head_end - from};
		from = pieces[i].head_end;
		if (pieces[i].body)
			iov[k++] = (struct iovec){(void *)pieces[i].body, pieces[i].body_len};
	}
	return k;
}

int ecw_http_send_pipelined(struct ecw_http *h, struct ecw_response *resps, const char *const *urls,
			    const struct ecw_request *const *rs, size_t n, size_t *answered, char *why,
			    size_t why_len)
{
	int64_t deadline = now_ms() + h->opts->timeout_ms;
	struct piece pieces[ECW_HTTP_PIPELINE_MAX];
	struct target t;
	struct conn *k;
	int err;

	*answered = 0;
	why[0] = '\0';
	if (n == 0 || n > ECW_HTTP_PIPELINE_MAX) {
		snprintf(why, why_len, "%zu requests to pipeline (1 to %d)", n, ECW_HTTP_PIPELINE_MAX);
		return ECW_EINVALID;
	}
	if ((err = pipeline_heads(h, pieces, &t, urls, rs, n, why, why_len)) < 0)
		return err;
	if (ecw_cancel_is_set(h->opts->cancel)) {
		snprintf(why, why_len, "the worker is stopping");
		return ECW_ECANCELED;
	}
	h->op = rs[0]->op;
	k = conn_for(h, urls[0], &t);
	k->used = ++h->uses;
	for (int attempt = 1;; attempt++) {
		struct iovec iov[2 * ECW_HTTP_PIPELINE_MAX];
		int niov = pipeline_iov(iov, h, pieces, n);
		bool reused = k->fd >= 0, none = false, close = false;

		if (!reused && (err = ecw_http_conn_open(h, k, &t, deadline, why, why_len)) < 0)
			return err;
		k->in_len = 0;
		k->sent = false;
		if (ecw_http_conn_write(h, k, iov, niov, deadline) < 0) {
			err = write_failed(why, why_len, &none);
		} else {
			/* The first answer cannot be there yet; the ones after it
			 * may have come with it. */
			k->sent = !k->ssl;
			for (err = 0; *answered < n && !close && err == 0;) {
				struct framing f;

				if ((err = ecw_http_read_answer(h, k, &resps[*answered], false, deadline, &f,
								&none, why, why_len)) == 0) {
					resps[(*answered)++].status = f.status;
					close = f.close;
				}
			}
		}
		if (err == 0 && !close) {
			conn_shrink(k);
			return 0;
		}
		ecw_http_conn_close(k);
		conn_shrink(k);
		if (err == 0) {
			/* The server closed after an answer: the rest are unanswered. */
			if (*answered < n)
				snprintf(why, why_len,
					 "the server closed the connection after %zu of %zu answers",
					 *answered, n);
			return *answered < n ? ECW_ETRANSIENT : 0;
		}
		/* A kept connection the server had closed: once more on a new one. */
		if (!(*answered == 0 && reused && none && attempt == 1 && err == ECW_ETRANSIENT))
			return err;
		ecw_response_reset(&resps[0]);
	}
}
