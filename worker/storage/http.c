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
 * Requests without a body to one origin can also go pipelined (RFC 9112
 * section 9.3.2, ecw_http_send_pipelined): written back to back in one
 * write and their answers read in order, each as a lone one is read; what
 * came past one answer stays in the connection's input buffer for the next.
 *
 * A host's addresses come from resolve.c, which looks each name up once for
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
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "http_private.h"
#include "resolve.h"

/* ---- TLS contexts ------------------------------------------------------------------------ */

/* One SSL_CTX per (CA file, verify) for the whole process: loading the
 * system's CA store costs a megabyte and milliseconds, and the clients of a
 * worker all use the same. Made on first use, never freed. */
#define TLS_CTXS 4
static struct {
	char *ca_file; /* NULL: the system's */
	bool verify;
	SSL_CTX *ctx;
} tls_ctxs[TLS_CTXS];
static int n_tls_ctxs;
static pthread_mutex_t tls_lock = PTHREAD_MUTEX_INITIALIZER;

static void why_ssl(char *why, size_t n, const char *what)
{
	unsigned long e = ERR_get_error();
	char text[256] = "";

	if (e)
		ERR_error_string_n(e, text, sizeof(text));
	snprintf(why, n, "%s%s%s", what, e ? ": " : "", text);
	ERR_clear_error();
}

static SSL_CTX *tls_ctx(const struct ecw_client_options *o, char *why, size_t why_len)
{
	bool verify = !o->insecure_skip_tls_verify_for_tests;
	SSL_CTX *ctx = NULL;

	pthread_mutex_lock(&tls_lock);
	for (int i = 0; i < n_tls_ctxs && !ctx; i++)
		if (tls_ctxs[i].verify == verify &&
		    (tls_ctxs[i].ca_file ? o->ca_file && strcmp(tls_ctxs[i].ca_file, o->ca_file) == 0
					 : !o->ca_file))
			ctx = tls_ctxs[i].ctx;
	if (ctx)
		goto done;
	if (n_tls_ctxs == TLS_CTXS) {
		snprintf(why, why_len, "TLS: more than %d CA settings in one process", TLS_CTXS);
		goto done;
	}
	if (!(ctx = SSL_CTX_new(TLS_client_method()))) {
		why_ssl(why, why_len, "TLS: cannot make a context");
		goto done;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
	SSL_CTX_set_verify(ctx, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
	/* ca_file adds to the system's CAs: a private CA beside the public ones. */
	if (verify && (SSL_CTX_set_default_verify_paths(ctx) != 1 ||
		       (o->ca_file && SSL_CTX_load_verify_locations(ctx, o->ca_file, NULL) != 1))) {
		why_ssl(why, why_len,
			o->ca_file ? "TLS: cannot read the CA file" : "TLS: cannot load the system's CAs");
		SSL_CTX_free(ctx);
		ctx = NULL;
		goto done;
	}
	if (o->ca_file && !(tls_ctxs[n_tls_ctxs].ca_file = strdup(o->ca_file))) {
		snprintf(why, why_len, "out of memory");
		SSL_CTX_free(ctx);
		ctx = NULL;
		goto done;
	}
	tls_ctxs[n_tls_ctxs].verify = verify;
	tls_ctxs[n_tls_ctxs++].ctx = ctx;
done:
	pthread_mutex_unlock(&tls_lock);
	return ctx;
}

/* TLS goes over OpenSSL's own socket BIO (SSL_set_fd), whose writes can
 * raise SIGPIPE on a connection the peer closed: main.c ignores SIGPIPE for
 * the whole process, so such a write fails with EPIPE. (A BIO of our own
 * that sent with MSG_NOSIGNAL needed BIO_meth_get_*, deprecated in OpenSSL
 * 3.5.) Plain sockets still send with MSG_NOSIGNAL, for programs that link
 * the client without main.c. */

/* ---- connections ------------------------------------------------------------------------- */

struct target {
	bool tls;
	char host[256]; /* without [] for IPv6 */
	char port[8];
	const char *authority; /* into the URL: host[:port], for Host: */
	size_t authority_len;
	const char *path;  /* into the URL: path and query; "" means "/" */
	size_t origin_len; /* of "scheme://authority" */
};

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

static void conn_close(struct conn *k)
{
	if (k->ssl) {
		SSL_free(k->ssl); /* no close_notify: the peer sees the TCP close */
		k->ssl = NULL;
	}
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	k->in_len = 0;
}

/* Waits until fd is ready for events (POLLIN or POLLOUT), the deadline
 * passes or the cancellation is set: 1 ready, or -1 with errno EAGAIN (the
 * deadline) or ECANCELED (the worker is stopping). Every wait of this file
 * is one of these, on a non-blocking socket, so none outlasts a
 * cancellation. */
static int wait_ready(int fd, short events, int64_t deadline, const struct ecw_cancel *cancel)
{
	struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = ecw_cancel_fd(cancel), .events = POLLIN}};
	int rc;

	for (;;) {
		int64_t left = ecw_cancel_clamp_ms(cancel, deadline - now_ms());

		if (ecw_cancel_is_set(cancel)) {
			errno = ECANCELED;
			return -1;
		}
		if (left <= 0) {
			errno = EAGAIN;
			return -1;
		}
		rc = poll(p, p[1].fd >= 0 ? 2 : 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (rc < 0 && errno != EINTR)
			return -1;
		if (rc > 0 && p[0].revents)
			return 1; /* readable, writable, or an error the next call reports */
	}
}

/* Connects to the first of addrs that takes it by the deadline: the socket
 * (non-blocking), or -1 with the last error in *saved (ECANCELED when the
 * cancellation cut it short). */
static int connect_any(const struct ecw_addrs *addrs, int64_t deadline, const struct ecw_cancel *cancel,
		       int *saved)
{
	int fd = -1;

	for (size_t i = 0; i < addrs->n; i++) {
		socklen_t len = sizeof(*saved);

		if (deadline - now_ms() <= 0) {
			*saved = ETIMEDOUT;
			break;
		}
		if ((fd = socket(addrs->a[i].family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
			*saved = errno;
			continue;
		}
		if (connect(fd, (const struct sockaddr *)&addrs->a[i].sa, addrs->a[i].len) == 0)
			return fd;
		if (errno != EINPROGRESS) {
			*saved = errno;
			goto next;
		}
		if (wait_ready(fd, POLLOUT, deadline, cancel) < 0) {
			*saved = errno == EAGAIN ? ETIMEDOUT : errno;
			close(fd);
			if (*saved == ECANCELED)
				return -1; /* no other address either */
			fd = -1;
			continue;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, saved, &len) < 0)
			*saved = errno;
		if (*saved == 0)
			return fd;
next:
		close(fd);
		fd = -1;
	}
	return -1;
}

static bool same_addrs(const struct ecw_addrs *a, const struct ecw_addrs *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (a->a[i].len != b->a[i].len || memcmp(&a->a[i].sa, &b->a[i].sa, a->a[i].len) != 0)
			return false;
	return true;
}

/* A TCP connection to one of the host's addresses within ms. The addresses
 * come from resolve.c's cache. When none of them takes the connection they
 * are forgotten; when they were kept from an earlier lookup, the name is
 * looked up again at once and new addresses tried in the time left, so an
 * account whose addresses moved (a failover) costs no failed request. */
static int tcp_connect(int *out, const struct target *t, long ms, const struct ecw_cancel *cancel, char *why,
		       size_t why_len)
{
	struct ecw_addrs addrs, again;
	int64_t deadline = now_ms() + ms;
	int rc, fd, one = 1, saved = 0;
	bool kept;
	char text[96];

	if ((rc = ecw_resolve(t->host, t->port, &addrs, &kept, why, why_len)) < 0)
		return rc;
	fd = connect_any(&addrs, deadline, cancel, &saved);
	if (fd < 0 && saved == ECANCELED) {
		snprintf(why, why_len, "connecting to %s port %s: the worker is stopping", t->host, t->port);
		return ECW_ECANCELED;
	}
	if (fd < 0) {
		ecw_resolve_forget(t->host, t->port);
		if (kept && saved != ETIMEDOUT &&
		    ecw_resolve(t->host, t->port, &again, &kept, why, why_len) == 0 &&
		    !same_addrs(&addrs, &again)) {
			saved = 0;
			if ((fd = connect_any(&again, deadline, cancel, &saved)) < 0 && saved != ECANCELED)
				ecw_resolve_forget(t->host, t->port);
		}
	}
	if (fd < 0) {
		if (saved == ECANCELED)
			snprintf(why, why_len, "connecting to %s port %s: the worker is stopping", t->host,
				 t->port);
		else if (saved == ETIMEDOUT)
			snprintf(why, why_len, "connecting to %s port %s: timed out after %ld ms", t->host,
				 t->port, ms);
		else
			snprintf(why, why_len, "connecting to %s port %s: %s", t->host, t->port,
				 errtext(saved, text, sizeof(text)));
		return saved == ECANCELED   ? ECW_ECANCELED
		       : saved == ETIMEDOUT ? ECW_ETIMEOUT
					    : ECW_ETRANSIENT;
	}
	/* Non-blocking for good: every wait is wait_ready's. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	*out = fd;
	return 0;
}

static bool is_ip_literal(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	return inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
}

static int tls_start(struct conn *k, const struct target *t, const struct ecw_client_options *o,
		     int64_t deadline, char *why, size_t why_len)
{
	SSL_CTX *ctx = tls_ctx(o, why, why_len);
	int rc, e, saved;

	if (!ctx)
		return ECW_ERROR;
	if (!(k->ssl = SSL_new(ctx)) || SSL_set_fd(k->ssl, k->fd) != 1) {
		why_ssl(why, why_len, "TLS: out of memory");
		return ECW_ENOMEM;
	}
	if (is_ip_literal(t->host)) {
		if (!o->insecure_skip_tls_verify_for_tests &&
		    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(k->ssl), t->host) != 1) {
			why_ssl(why, why_len, "TLS: bad address");
			return ECW_ERROR;
		}
	} else if (SSL_set_tlsext_host_name(k->ssl, t->host) != 1 ||
		   (!o->insecure_skip_tls_verify_for_tests && SSL_set1_host(k->ssl, t->host) != 1)) {
		why_ssl(why, why_len, "TLS: bad host name");
		return ECW_ERROR;
	}
	for (;;) {
		ERR_clear_error();
		if ((rc = SSL_connect(k->ssl)) == 1)
			return 0;
		saved = errno;
		e = SSL_get_error(k->ssl, rc);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			break;
		if (wait_ready(k->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, o->cancel) < 0) {
			bool stopping = errno == ECANCELED;

			snprintf(why, why_len, "TLS handshake with %s: %s", t->host,
				 stopping ? "the worker is stopping" : "timed out");
			ERR_clear_error();
			return stopping ? ECW_ECANCELED : ECW_ETIMEOUT;
		}
	}
	long vr = SSL_get_verify_result(k->ssl);

	if (vr != X509_V_OK) {
		snprintf(why, why_len, "TLS handshake with %s: certificate verification failed: %s", t->host,
			 X509_verify_cert_error_string(vr));
		ERR_clear_error();
		return ECW_ERROR;
	}
	if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN) {
		char text[96];

		snprintf(why, why_len, "TLS handshake with %s: connection closed%s%s", t->host,
			 saved ? ": " : "", saved ? errtext(saved, text, sizeof(text)) : "");
		ERR_clear_error();
		return ECW_ETRANSIENT;
	}
	why_ssl(why, why_len, "TLS handshake failed");
	return ECW_ERROR;
}

static int conn_open(struct ecw_http *h, struct conn *k, const struct target *t, int64_t deadline, char *why,
		     size_t why_len)
{
	long ms = h->opts->connect_timeout_ms;
	int err;

	if (deadline - now_ms() < ms)
		ms = (long)(deadline - now_ms());
	if (ms < 1)
		ms = 1;
	if ((err = tcp_connect(&k->fd, t, ms, h->opts->cancel, why, why_len)) < 0)
		return err;
	h->connections++;
	if (t->tls && (err = tls_start(k, t, h->opts, now_ms() + ms, why, why_len)) < 0) {
		conn_close(k);
		return err;
	}
	return 0;
}

/* ---- reading and writing ------------------------------------------------------------------- */

/* What an SSL_read or SSL_write that returned r <= 0 asks for: POLLIN or
 * POLLOUT, to wait for and call again; or 0 when it failed, with errno 0 at
 * the end of the stream (close_notify, or a TCP close) and EPROTO for a TLS
 * error. */
static short ssl_want(struct conn *k, int r)
{
	int e = SSL_get_error(k->ssl, r);
	short want = 0;

	if (e == SSL_ERROR_WANT_READ)
		want = POLLIN;
	else if (e == SSL_ERROR_WANT_WRITE)
		want = POLLOUT;
	else if (e == SSL_ERROR_ZERO_RETURN ||
		 (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0))
		errno = 0;
	else if (e != SSL_ERROR_SYSCALL || errno == EAGAIN || errno == EWOULDBLOCK)
		errno = EPROTO;
	ERR_clear_error();
	return want;
}

/* Sends all of the n iovecs by the deadline: 0, or -1 with errno (EAGAIN:
 * timed out; ECANCELED: the worker is stopping). */
static int conn_write(struct ecw_http *h, struct conn *k, struct iovec *iov, int n, int64_t deadline)
{
	const struct ecw_cancel *cancel = h->opts->cancel;

	if (k->ssl) {
		for (int i = 0; i < n; i++) {
			int r;
			short want;

			if (!iov[i].iov_len)
				continue;
			/* A write that must be repeated is repeated with the same
			 * arguments, as OpenSSL asks. */
			for (;;) {
				ERR_clear_error();
				if ((r = SSL_write(k->ssl, iov[i].iov_base, (int)iov[i].iov_len)) > 0)
					break;
				if (!(want = ssl_want(k, r))) {
					if (errno == 0)
						errno = EPIPE;
					return -1;
				}
				if (wait_ready(k->fd, want, deadline, cancel) < 0)
					return -1;
			}
		}
		return 0;
	}
	struct msghdr mh;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = iov;
	mh.msg_iovlen = (size_t)n;
	while (mh.msg_iovlen) {
		ssize_t w;

		if ((w = sendmsg(k->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0) {
			if (errno == EINTR)
				continue;
			if ((errno != EAGAIN && errno != EWOULDBLOCK) ||
			    wait_ready(k->fd, POLLOUT, deadline, cancel) < 0)
				return -1;
			continue;
		}
		while (mh.msg_iovlen && (size_t)w >= mh.msg_iov->iov_len) {
			w -= (ssize_t)mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + w;
			mh.msg_iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* Reads what comes next onto k->in: > 0 bytes, 0 at the end of the stream,
 * < 0 on an error (errno EAGAIN: timed out; ECANCELED: the worker is
 * stopping). The socket is tried first and waited on only when it has
 * nothing: a stream that keeps coming costs no poll, and the deadline and
 * the cancellation are still looked at before every read. k->in grows by
 * HTTP_READ_CHUNK at a time; the readers below take bodies off it as they
 * come, so it holds a head, a chunk's size line or one read's worth of
 * body, never a whole body. */
ssize_t ecw_http_conn_read(struct ecw_http *h, struct conn *k, int64_t deadline)
{
	const struct ecw_cancel *cancel = h->opts->cancel;
	ssize_t n;

	if (k->in_cap - k->in_len < HTTP_READ_CHUNK) {
		size_t cap = k->in_cap ? k->in_cap : HTTP_READ_CHUNK;
		char *p;

		while (cap - k->in_len < HTTP_READ_CHUNK)
			cap *= 2;
		if (!(p = realloc(k->in, cap))) {
			errno = ENOMEM;
			return -1;
		}
		k->in = p;
		k->in_cap = cap;
	}
	for (;;) {
		short want = POLLIN;

		if (ecw_cancel_is_set(cancel)) {
			errno = ECANCELED;
			return -1;
		}
		if (deadline - now_ms() <= 0) {
			errno = EAGAIN;
			return -1;
		}
		if (k->ssl) {
			ERR_clear_error();
			int r = SSL_read(k->ssl, k->in + k->in_len, (int)(k->in_cap - k->in_len));
			if (r > 0) {
				n = r;
				break;
			}
			if (!(want = ssl_want(k, r)))
				return errno ? -1 : 0;
		} else {
			/* Right after a request the answer cannot have come
			 * yet: wait first rather than spend a system call on
			 * a recv that says EAGAIN. */
			if (k->sent) {
				k->sent = false;
				if (wait_ready(k->fd, POLLIN, deadline, cancel) < 0)
					return -1;
			}
			/* MSG_DONTWAIT: ecw_http_read_fd's descriptor may be
			 * blocking. */
			n = recv(k->fd, k->in + k->in_len, k->in_cap - k->in_len, MSG_DONTWAIT);
			if (n >= 0)
				break;
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -1;
		}
		if (wait_ready(k->fd, want, deadline, cancel) < 0)
			return -1;
	}
	k->in_len += (size_t)n;
	return n;
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
		conn_close(&h->conns[i]);
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
	conn_close(k);
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

		if (!reused && (err = conn_open(h, k, &t, deadline, why, why_len)) < 0)
			return err;
		k->in_len = 0;
		k->sent = false;
		if (conn_write(h, k, iov, 2, deadline) < 0) {
			err = write_failed(why, why_len, &none);
		} else {
			k->sent = !k->ssl;
			err = ecw_http_read_answer(h, k, resp, head_only, deadline, &f, &none, why, why_len);
		}
		if (err == 0) {
			resp->status = f.status;
			if (f.close)
				conn_close(k);
			conn_shrink(k);
			return 0;
		}
		conn_close(k);
		conn_shrink(k);
		/* A kept connection the server had closed: once more on a new one. */
		if (!(reused && none && attempt == 1 && err == ECW_ETRANSIENT))
			return err;
		ecw_response_reset(resp);
	}
}

int ecw_http_send_pipelined(struct ecw_http *h, struct ecw_response *resps, const char *const *urls,
			    const struct ecw_request *const *rs, size_t n, size_t *answered, char *why,
			    size_t why_len)
{
	int64_t deadline = now_ms() + h->opts->timeout_ms;
	struct target t;
	struct conn *k;
	int err;

	*answered = 0;
	why[0] = '\0';
	if (n == 0 || n > ECW_HTTP_PIPELINE_MAX) {
		snprintf(why, why_len, "%zu requests to pipeline (1 to %d)", n, ECW_HTTP_PIPELINE_MAX);
		return ECW_EINVALID;
	}
	/* Every request line and head, back to back in one buffer: one write
	 * (one TLS record, one system call) for them all. */
	ecw_buf_reset(&h->head);
	for (size_t i = 0; i < n; i++) {
		struct target ti;

		if ((err = parse_url(&ti, urls[i], why, why_len)) < 0 ||
		    (err = check_headers(rs[i], why, why_len)) < 0)
			return err;
		if (i == 0)
			t = ti;
		if (ecw_request_has_body(rs[i]) || strcmp(rs[i]->method, "HEAD") == 0 ||
		    ti.origin_len != t.origin_len || strncmp(urls[i], urls[0], t.origin_len) != 0) {
			snprintf(why, why_len, "only requests without a body, to one origin, are pipelined");
			return ECW_EINVALID;
		}
		if ((err = write_head(&h->head, &ti, rs[i], false)) < 0) {
			snprintf(why, why_len, "request headers too large");
			return err;
		}
	}
	if (ecw_cancel_is_set(h->opts->cancel)) {
		snprintf(why, why_len, "the worker is stopping");
		return ECW_ECANCELED;
	}
	h->op = rs[0]->op;
	k = conn_for(h, urls[0], &t);
	k->used = ++h->uses;
	for (int attempt = 1;; attempt++) {
		struct iovec iov = {h->head.ptr, h->head.len};
		bool reused = k->fd >= 0, none = false, close = false;

		if (!reused && (err = conn_open(h, k, &t, deadline, why, why_len)) < 0)
			return err;
		k->in_len = 0;
		k->sent = false;
		if (conn_write(h, k, &iov, 1, deadline) < 0) {
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
		conn_close(k);
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
