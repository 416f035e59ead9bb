/* SPDX-License-Identifier: MIT */
/* http_conn.c - the connections under http.c's exchange: a TCP connect to
 * one of a host's addresses (resolve.c), TLS over it through OpenSSL (one
 * SSL_CTX per CA setting for the whole process), and the reads and writes
 * of bytes by a deadline. Sockets are non-blocking and every wait is a
 * poll() that also watches the client's cancellation (ecw_cancel.h), so no
 * wait outlasts it. This file knows nothing of HTTP: http_answer.c reads an
 * answer with ecw_http_conn_read, http.c writes requests with
 * ecw_http_conn_write; both sit above it (http_conn.h). */
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

#include "http_conn.h"
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

void ecw_http_conn_close(struct conn *k)
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

int ecw_http_conn_open(struct ecw_http *h, struct conn *k, const struct target *t, int64_t deadline,
		       char *why, size_t why_len)
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
		ecw_http_conn_close(k);
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
int ecw_http_conn_write(struct ecw_http *h, struct conn *k, struct iovec *iov, int n, int64_t deadline)
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
 * HTTP_READ_CHUNK at a time; http_answer.c takes bodies off it as they
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
