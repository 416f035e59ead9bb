/* SPDX-License-Identifier: MIT */
/* http_answer.c - reading one HTTP/1.1 answer off a connection of http.c
 * (http_answer.h): the status line and header fields, then the body by
 * Content-Length, chunks or the close, under the response's cap, as RFC
 * 9112 says (see http.c's header for what is done and why). Also
 * ecw_http_read_fd, the way in for the fuzzer. The bytes come from
 * ecw_http_conn_read; this file never writes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "http_answer.h"

static bool token_in(const char *v, size_t n, const char *tok)
{
	size_t tl = strlen(tok);

	for (size_t i = 0; i < n;) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		size_t s = i;
		while (i < n && v[i] != ',')
			i++;
		size_t e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - s == tl && strncasecmp(v + s, tok, tl) == 0)
			return true;
	}
	return false;
}

/* Parses one status line and header block (head, len bytes, ending with the
 * empty line); headers go to resp. */
static int parse_head(struct framing *f, struct ecw_response *resp, const char *head, size_t len, char *why,
		      size_t why_len)
{
	const char *p = head, *end = head + len, *eol;
	bool keep_alive = false;
	int err;

	memset(f, 0, sizeof(*f));
	f->length = -1;
	/* RFC 9110 5.5: a NUL in a field is refused. Kept, it would also cut
	 * the header in the response's store of C strings short. */
	if (memchr(head, '\0', len)) {
		snprintf(why, why_len, "an answer with a NUL byte in its headers");
		return ECW_ETRANSIENT;
	}
	eol = memchr(p, '\n', (size_t)(end - p));
	if (!eol || eol - p < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') ||
	    p[8] != ' ' || p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' ||
	    p[11] > '9' || (eol - p > 13 && p[12] != ' ' && p[12] != '\r')) {
		snprintf(why, why_len, "not an HTTP/1.x status line");
		return ECW_ETRANSIENT;
	}
	f->minor = p[7] - '0';
	f->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	for (p = eol + 1; p < end; p = eol + 1) {
		const char *colon, *v;
		size_t nlen, vlen;

		eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			break;
		vlen = (size_t)(eol - p);
		if (vlen && p[vlen - 1] == '\r')
			vlen--;
		if (vlen == 0)
			break; /* the empty line */
		if (*p == ' ' || *p == '\t' || !(colon = memchr(p, ':', vlen)) || colon == p) {
			snprintf(why, why_len, "a malformed header line in the answer");
			return ECW_ETRANSIENT;
		}
		nlen = (size_t)(colon - p);
		v = colon + 1;
		vlen -= nlen + 1;
		if ((err = ecw_response_add_header(resp, p, nlen, v, vlen)) < 0)
			return err;
		if (nlen == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
			long long n = 0;
			size_t i = 0, digits = 0;

			while (i < vlen && (v[i] == ' ' || v[i] == '\t'))
				i++;
			for (; i < vlen && v[i] >= '0' && v[i] <= '9'; i++, digits++) {
				if (n > (1LL << 50)) {
					snprintf(why, why_len, "an answer with a Content-Length too large");
					return ECW_ETRANSIENT;
				}
				n = n * 10 + (v[i] - '0');
			}
			while (i < vlen && (v[i] == ' ' || v[i] == '\t'))
				i++;
			if (!digits || i != vlen || (f->length >= 0 && f->length != n)) {
				snprintf(why, why_len, "an answer with a bad Content-Length");
				return ECW_ETRANSIENT;
			}
			f->length = n;
		} else if (nlen == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0) {
			if (!token_in(v, vlen, "chunked")) {
				snprintf(why, why_len, "an answer with a transfer coding other than chunked");
				return ECW_ETRANSIENT;
			}
			f->chunked = true;
		} else if (nlen == 10 && strncasecmp(p, "Connection", 10) == 0) {
			if (token_in(v, vlen, "close"))
				f->close = true;
			if (token_in(v, vlen, "keep-alive"))
				keep_alive = true;
		}
	}
	if (f->minor == 0 && !keep_alive)
		f->close = true;
	return 0;
}

/* Takes n bytes from the front of k->in. */
static void consume(struct conn *k, size_t n)
{
	memmove(k->in, k->in + n, k->in_len - n);
	k->in_len -= n;
}

/* Over the answer's cap (its body's max, which the client sets by the
 * request's kind): fail before reading more. The connection is closed by
 * the caller, so whatever the server still sends is never read. */
static int too_large(const struct ecw_http *h, const struct ecw_response *resp, char *why, size_t why_len)
{
	ecw_response_cap_text(why, why_len, resp->body.max, h->op);
	return ECW_ETOOLARGE;
}

/* Appends n bytes of k->in's front to the body and takes them off k->in. */
static int body_take(const struct ecw_http *h, struct conn *k, struct ecw_response *resp, size_t n, char *why,
		     size_t why_len)
{
	int err;

	if (n > resp->body.max - resp->body.len)
		return too_large(h, resp, why, why_len);
	if ((err = ecw_buf_add(&resp->body, k->in, n)) < 0) {
		snprintf(why, why_len, "out of memory");
		return err;
	}
	consume(k, n);
	return 0;
}

/* Why a read ended the exchange: a timeout or a broken connection. */
static int read_failed(ssize_t n, const struct ecw_http *h, char *why, size_t why_len, const char *where)
{
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		snprintf(why, why_len, "timed out after %d ms %s", h->opts->timeout_ms, where);
		return ECW_ETIMEOUT;
	}
	if (n < 0 && errno == ECANCELED) {
		snprintf(why, why_len, "the worker is stopping (%s)", where);
		return ECW_ECANCELED;
	}
	if (n < 0 && errno == ENOMEM) {
		snprintf(why, why_len, "out of memory");
		return ECW_ENOMEM;
	}
	if (n < 0) {
		char text[96];

		snprintf(why, why_len, "connection broken %s: %s", where, errtext(errno, text, sizeof(text)));
	} else
		snprintf(why, why_len, "connection closed %s", where);
	return ECW_ETRANSIENT;
}

/* Reads the next size bytes of the body, taking each read's worth off k->in
 * as it comes; over the cap before any is read. */
static int read_exactly(struct ecw_http *h, struct conn *k, struct ecw_response *resp, size_t size,
			int64_t deadline, char *why, size_t why_len)
{
	ssize_t n;
	int err;

	if (size > resp->body.max - resp->body.len)
		return too_large(h, resp, why, why_len);
	while (size > 0) {
		if (k->in_len == 0 && (n = ecw_http_conn_read(h, k, deadline)) <= 0)
			return read_failed(n, h, why, why_len, "in the answer's body");
		size_t take = size < k->in_len ? size : k->in_len;
		if ((err = body_take(h, k, resp, take, why, why_len)) < 0)
			return err;
		size -= take;
	}
	return 0;
}

/* Reads a chunked body (RFC 9112 7.1): sizes in hex, extensions and
 * trailers read past. */
static int read_chunked(struct ecw_http *h, struct conn *k, struct ecw_response *resp, int64_t deadline,
			char *why, size_t why_len)
{
	for (;;) {
		char *eol;
		ssize_t n;

		while (!(eol = memchr(k->in, '\n', k->in_len))) {
			if (k->in_len > 1024) {
				snprintf(why, why_len, "a malformed chunk in the answer");
				return ECW_ETRANSIENT;
			}
			if ((n = ecw_http_conn_read(h, k, deadline)) <= 0)
				return read_failed(n, h, why, why_len, "in the answer's body");
		}
		size_t size = 0, i = 0, digits = 0;
		for (; k->in + i < eol; i++, digits++) {
			int c = k->in[i], d = c >= '0' && c <= '9'   ? c - '0'
					      : c >= 'a' && c <= 'f' ? c - 'a' + 10
					      : c >= 'A' && c <= 'F' ? c - 'A' + 10
								     : -1;
			if (d < 0)
				break;
			if (size > ((size_t)1 << 40)) {
				snprintf(why, why_len, "a chunk too large in the answer");
				return ECW_ETRANSIENT;
			}
			size = size * 16 + (size_t)d;
		}
		if (!digits || (k->in[i] != ';' && k->in[i] != '\r' && k->in[i] != '\n' && k->in[i] != ' ' &&
				k->in[i] != '\t')) {
			snprintf(why, why_len, "a malformed chunk size in the answer");
			return ECW_ETRANSIENT;
		}
		consume(k, (size_t)(eol - k->in) + 1);
		if (size == 0)
			break;
		/* The data as it comes (a chunk may be any size: it is never
		 * held whole), then its CRLF. */
		int err = read_exactly(h, k, resp, size, deadline, why, why_len);
		if (err < 0)
			return err;
		while (k->in_len < 2)
			if ((n = ecw_http_conn_read(h, k, deadline)) <= 0)
				return read_failed(n, h, why, why_len, "in the answer's body");
		if (k->in[0] != '\r' || k->in[1] != '\n') {
			snprintf(why, why_len, "a chunk without its CRLF in the answer");
			return ECW_ETRANSIENT;
		}
		consume(k, 2);
	}
	/* Trailer fields up to the empty line. */
	for (;;) {
		char *eol;
		ssize_t n;

		while (!(eol = memchr(k->in, '\n', k->in_len))) {
			if (k->in_len > HTTP_HEAD_MAX) {
				snprintf(why, why_len, "trailers too large in the answer");
				return ECW_ETRANSIENT;
			}
			if ((n = ecw_http_conn_read(h, k, deadline)) <= 0)
				return read_failed(n, h, why, why_len, "in the answer's trailers");
		}
		size_t len = (size_t)(eol - k->in);
		bool empty = len == 0 || (len == 1 && k->in[0] == '\r');

		consume(k, len + 1);
		if (empty)
			return 0;
	}
}

/* Reads one answer (after any 1xx ones) into resp. *none: the connection
 * ended before its first byte. */
int ecw_http_read_answer(struct ecw_http *h, struct conn *k, struct ecw_response *resp, bool head_only,
			 int64_t deadline, struct framing *f, bool *none, char *why, size_t why_len)
{
	size_t scanned = 0;
	ssize_t n;
	int err;

	*none = false;
	for (;;) {
		char *end = NULL;

		/* The head ends at the first empty line ("\r\n\r\n" or "\n\n"). */
		while (!end) {
			for (size_t i = scanned > 3 ? scanned - 3 : 0; i + 1 < k->in_len && !end; i++)
				if (k->in[i] == '\n' &&
				    (k->in[i + 1] == '\n' ||
				     (k->in[i + 1] == '\r' && i + 2 < k->in_len && k->in[i + 2] == '\n')))
					end = k->in + i + (k->in[i + 1] == '\n' ? 2 : 3);
			scanned = k->in_len;
			if (end)
				break;
			if (k->in_len > HTTP_HEAD_MAX) {
				snprintf(why, why_len, "an answer whose headers pass %zu bytes",
					 HTTP_HEAD_MAX);
				return ECW_ETRANSIENT;
			}
			if ((n = ecw_http_conn_read(h, k, deadline)) <= 0) {
				*none = k->in_len == 0;
				return read_failed(n, h, why, why_len, "before the answer");
			}
		}
		size_t hlen = (size_t)(end - k->in);

		if ((err = parse_head(f, resp, k->in, hlen, why, why_len)) < 0)
			return err;
		consume(k, hlen);
		scanned = 0;
		if (f->status >= 200)
			break;
		/* An interim answer (100 Continue, 103 Early Hints): its headers
		 * are not the answer's. */
		ecw_buf_reset(&resp->hdrs);
		resp->nheaders = 0;
	}
	if (head_only || f->status == 204 || f->status == 304)
		return 0;
	if (f->chunked)
		return read_chunked(h, k, resp, deadline, why, why_len);
	if (f->length >= 0) {
		if ((unsigned long long)f->length > resp->body.max - resp->body.len)
			return too_large(h, resp, why, why_len);
		return read_exactly(h, k, resp, (size_t)f->length, deadline, why, why_len);
	}
	/* Neither: the body runs to the end of the connection, under the cap
	 * as it comes. */
	f->close = true;
	for (;;) {
		if ((err = body_take(h, k, resp, k->in_len, why, why_len)) < 0)
			return err;
		if ((n = ecw_http_conn_read(h, k, deadline)) <= 0)
			break;
	}
	if (n < 0)
		return read_failed(n, h, why, why_len, "in the answer's body");
	return 0;
}

int ecw_http_read_fd(struct ecw_response *resp, int fd, bool head_only, int timeout_ms, bool *close,
		     size_t *left, char *why, size_t why_len)
{
	struct ecw_client_options o = {.timeout_ms = timeout_ms};
	struct ecw_http h = {.opts = &o};
	struct conn k = {.fd = fd};
	struct framing f = {.length = -1};
	bool none;
	int err;

	why[0] = '\0';
	err = ecw_http_read_answer(&h, &k, resp, head_only, now_ms() + timeout_ms, &f, &none, why, why_len);
	if (err == 0)
		resp->status = f.status;
	*close = f.close;
	*left = k.in_len;
	free(k.in);
	return err;
}
