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
 * A host's addresses come from resolve.c, which looks each name up once for
 * every thread's connections.
 *
 * Timeouts: connect_timeout_ms bounds the TCP connect and TLS handshake,
 * timeout_ms the whole exchange (the blocking socket's send and receive
 * timeouts follow the time left). A connection kept from an earlier request
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
#include "resolve.h"

#define HTTP_CONNS 3                      /* queue, table, a token endpoint */
#define HTTP_HEAD_MAX ((size_t)64 * 1024) /* a status line and headers */
#define HTTP_READ_CHUNK ((size_t)16 * 1024)
#define HTTP_JOIN_MAX ((size_t)16 * 1024) /* a TLS body sent in one write with its head */

struct conn {
	char origin[272]; /* "scheme://authority" as in the URL; "" unused */
	int fd;           /* -1: none */
	SSL *ssl;         /* NULL for http */
	char *in;         /* bytes read and not yet taken */
	size_t in_len, in_cap;
	long timeo_ms; /* the socket's send/receive timeout now */
	uint64_t used; /* for choosing which to close */
};

struct ecw_http {
	const struct ecw_client_options *opts; /* the client's */
	uint64_t connections;                  /* opened so far */
	struct conn conns[HTTP_CONNS];
	uint64_t uses;
	struct ecw_buf head; /* the request line and headers being written */
};

/* The transport's own clock: real time even where tests wrap ecw_now_ms. */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* strerror is not thread-safe. */
static const char *errtext(int e, char *buf, size_t n)
{
	if (strerror_r(e, buf, n) != 0)
		snprintf(buf, n, "error %d", e);
	return buf;
}

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

/* A socket BIO whose writes never raise SIGPIPE (send with MSG_NOSIGNAL): a
 * peer that closed must be an error, not the end of the process. */
static BIO_METHOD *nosig_method;
static pthread_once_t nosig_once = PTHREAD_ONCE_INIT;

static int nosig_write(BIO *b, const char *p, int n)
{
	ssize_t k;

	BIO_clear_retry_flags(b);
	do
		k = send(BIO_get_fd(b, NULL), p, (size_t)n, MSG_NOSIGNAL);
	while (k < 0 && errno == EINTR);
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_write(b); /* the socket's timeout: SSL_write may be called again */
	return (int)k;
}

static int nosig_read(BIO *b, char *p, int n)
{
	ssize_t k;

	BIO_clear_retry_flags(b);
	do
		k = recv(BIO_get_fd(b, NULL), p, (size_t)n, 0);
	while (k < 0 && errno == EINTR);
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_read(b);
	return (int)k;
}

static void nosig_init(void)
{
	const BIO_METHOD *sock = BIO_s_socket();
	BIO_METHOD *m = BIO_meth_new(BIO_TYPE_SOCKET, "ecworker socket");

	if (!m)
		return;
	BIO_meth_set_write(m, nosig_write);
	BIO_meth_set_read(m, nosig_read);
	BIO_meth_set_puts(m, BIO_meth_get_puts(sock));
	BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(sock));
	BIO_meth_set_create(m, BIO_meth_get_create(sock));
	BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock));
	nosig_method = m;
}

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

/* The socket's send and receive timeouts bound each blocking call, and the
 * deadline is checked after every call that met them (timed_out_early), so
 * a timeout shorter than the time left costs one more call and one longer
 * would overrun the deadline. Setting them takes two system calls, so they
 * are set only when they would overrun, or are under half the time left: on
 * a kept connection, a request seldom sets them at all. */
static void set_timeout(struct conn *k, long ms)
{
	struct timeval tv;

	if (ms < 1)
		ms = 1;
	if (k->timeo_ms > 0 && k->timeo_ms <= ms && k->timeo_ms >= ms / 2)
		return;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	setsockopt(k->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(k->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	k->timeo_ms = ms;
}

/* Connects to the first of addrs that takes it by the deadline: the socket
 * (non-blocking still), or -1 with the last error in *saved. */
static int connect_any(const struct ecw_addrs *addrs, int64_t deadline, int *saved)
{
	int fd = -1, rc;

	for (size_t i = 0; i < addrs->n; i++) {
		struct pollfd pfd;
		socklen_t len = sizeof(*saved);
		int64_t left = deadline - now_ms();

		if (left <= 0) {
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
		pfd.fd = fd;
		pfd.events = POLLOUT;
		do
			rc = poll(&pfd, 1, (int)left);
		while (rc < 0 && errno == EINTR && (left = deadline - now_ms()) > 0);
		if (rc == 0) {
			*saved = ETIMEDOUT;
			goto next;
		}
		if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, saved, &len) < 0)
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
static int tcp_connect(int *out, const struct target *t, long ms, char *why, size_t why_len)
{
	struct ecw_addrs addrs, again;
	int64_t deadline = now_ms() + ms;
	int rc, fd, one = 1, saved = 0;
	bool kept;
	char text[96];

	if ((rc = ecw_resolve(t->host, t->port, &addrs, &kept, why, why_len)) < 0)
		return rc;
	fd = connect_any(&addrs, deadline, &saved);
	if (fd < 0) {
		ecw_resolve_forget(t->host, t->port);
		if (kept && saved != ETIMEDOUT &&
		    ecw_resolve(t->host, t->port, &again, &kept, why, why_len) == 0 &&
		    !same_addrs(&addrs, &again)) {
			saved = 0;
			if ((fd = connect_any(&again, deadline, &saved)) < 0)
				ecw_resolve_forget(t->host, t->port);
		}
	}
	if (fd < 0) {
		if (saved == ETIMEDOUT)
			snprintf(why, why_len, "connecting to %s port %s: timed out after %ld ms", t->host,
				 t->port, ms);
		else
			snprintf(why, why_len, "connecting to %s port %s: %s", t->host, t->port,
				 errtext(saved, text, sizeof(text)));
		return saved == ETIMEDOUT ? ECW_ETIMEOUT : ECW_ETRANSIENT;
	}
	/* Blocking from here on, under the socket's timeouts. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
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

static int tls_start(struct conn *k, const struct target *t, const struct ecw_client_options *o, char *why,
		     size_t why_len)
{
	SSL_CTX *ctx = tls_ctx(o, why, why_len);
	BIO *bio;
	int rc;

	pthread_once(&nosig_once, nosig_init);
	if (!ctx)
		return ECW_ERROR;
	if (!nosig_method || !(k->ssl = SSL_new(ctx)) || !(bio = BIO_new(nosig_method))) {
		why_ssl(why, why_len, "TLS: out of memory");
		return ECW_ENOMEM;
	}
	BIO_set_fd(bio, k->fd, BIO_NOCLOSE);
	SSL_set_bio(k->ssl, bio, bio);
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
	ERR_clear_error();
	if ((rc = SSL_connect(k->ssl)) == 1)
		return 0;
	long vr = SSL_get_verify_result(k->ssl);
	int e = SSL_get_error(k->ssl, rc);

	if (vr != X509_V_OK) {
		snprintf(why, why_len, "TLS handshake with %s: certificate verification failed: %s", t->host,
			 X509_verify_cert_error_string(vr));
		ERR_clear_error();
		return ECW_ERROR;
	}
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ||
	    (e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))) {
		snprintf(why, why_len, "TLS handshake with %s: timed out", t->host);
		ERR_clear_error();
		return ECW_ETIMEOUT;
	}
	if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN) {
		int saved = errno;
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
	if ((err = tcp_connect(&k->fd, t, ms, why, why_len)) < 0)
		return err;
	h->connections++;
	k->timeo_ms = 0;
	set_timeout(k, ms);
	if (t->tls && (err = tls_start(k, t, h->opts, why, why_len)) < 0) {
		conn_close(k);
		return err;
	}
	return 0;
}

/* ---- reading and writing ------------------------------------------------------------------- */

/* After a blocking call failed: whether it only met the socket's timeout
 * with time left before the deadline (see set_timeout), to be made again. */
static bool timed_out_early(int64_t deadline)
{
	return (errno == EAGAIN || errno == EWOULDBLOCK) && deadline - now_ms() > 0;
}

/* What an SSL_read or SSL_write that returned r <= 0 means for errno: EAGAIN
 * when the socket's timeout ended it (the BIO asked for a retry). */
static void ssl_errno(struct conn *k, int r)
{
	int e = SSL_get_error(k->ssl, r);

	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		errno = EAGAIN;
	else if (e == SSL_ERROR_ZERO_RETURN ||
		 (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0))
		errno = 0;
	else if (e != SSL_ERROR_SYSCALL || errno == EAGAIN || errno == EWOULDBLOCK)
		errno = EPROTO;
	ERR_clear_error();
}

/* Sends all of the n iovecs. */
static int conn_write(struct conn *k, struct iovec *iov, int n, int64_t deadline)
{
	if (k->ssl) {
		for (int i = 0; i < n; i++) {
			int r;

			if (!iov[i].iov_len)
				continue;
			do {
				set_timeout(k, (long)(deadline - now_ms()));
				ERR_clear_error();
				if ((r = SSL_write(k->ssl, iov[i].iov_base, (int)iov[i].iov_len)) <= 0)
					ssl_errno(k, r);
			} while (r <= 0 && timed_out_early(deadline));
			if (r <= 0) {
				if (errno == 0)
					errno = EPIPE;
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

		set_timeout(k, (long)(deadline - now_ms()));
		if ((w = sendmsg(k->fd, &mh, MSG_NOSIGNAL)) < 0) {
			if (errno == EINTR || timed_out_early(deadline))
				continue;
			return -1;
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
 * < 0 on an error (errno EAGAIN: timed out). */
static ssize_t conn_read(struct conn *k, int64_t deadline)
{
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
	do {
		if (deadline - now_ms() <= 0) {
			errno = EAGAIN;
			return -1;
		}
		set_timeout(k, (long)(deadline - now_ms()));
		if (k->ssl) {
			ERR_clear_error();
			int r = SSL_read(k->ssl, k->in + k->in_len, (int)(k->in_cap - k->in_len));
			if (r > 0) {
				n = r;
			} else {
				ssl_errno(k, r);
				n = errno ? -1 : 0;
			}
		} else {
			n = recv(k->fd, k->in + k->in_len, k->in_cap - k->in_len, 0);
		}
	} while (n < 0 && (errno == EINTR || timed_out_early(deadline)));
	if (n > 0)
		k->in_len += (size_t)n;
	return n;
}

/* ---- the answer ------------------------------------------------------------------------------ */

struct framing {
	long status;
	int minor; /* HTTP/1.minor */
	bool chunked;
	bool close;       /* Connection: close, or HTTP/1.0 without keep-alive */
	long long length; /* Content-Length; -1 none */
};

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

static int body_add(struct ecw_response *resp, const char *p, size_t n, char *why, size_t why_len)
{
	if (n > resp->body.max - resp->body.len) {
		snprintf(why, why_len, "response larger than %zu bytes", resp->body.max);
		return ECW_ETOOLARGE;
	}
	return ecw_buf_add(&resp->body, p, n);
}

/* Why a read ended the exchange: a timeout or a broken connection. */
static int read_failed(ssize_t n, const struct ecw_http *h, char *why, size_t why_len, const char *where)
{
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		snprintf(why, why_len, "timed out after %d ms %s", h->opts->timeout_ms, where);
		return ECW_ETIMEOUT;
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
			if ((n = conn_read(k, deadline)) <= 0)
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
		/* The data and its CRLF. */
		while (k->in_len < size + 2)
			if ((n = conn_read(k, deadline)) <= 0)
				return read_failed(n, h, why, why_len, "in the answer's body");
		if (k->in[size] != '\r' || k->in[size + 1] != '\n') {
			snprintf(why, why_len, "a chunk without its CRLF in the answer");
			return ECW_ETRANSIENT;
		}
		int err = body_add(resp, k->in, size, why, why_len);
		if (err < 0)
			return err;
		consume(k, size + 2);
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
			if ((n = conn_read(k, deadline)) <= 0)
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
static int read_answer(struct ecw_http *h, struct conn *k, struct ecw_response *resp, bool head_only,
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
			if ((n = conn_read(k, deadline)) <= 0) {
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
		if ((unsigned long long)f->length > resp->body.max - resp->body.len) {
			snprintf(why, why_len, "response larger than %zu bytes", resp->body.max);
			return ECW_ETOOLARGE;
		}
		while (k->in_len < (size_t)f->length)
			if ((n = conn_read(k, deadline)) <= 0)
				return read_failed(n, h, why, why_len, "in the answer's body");
		if ((err = body_add(resp, k->in, (size_t)f->length, why, why_len)) < 0)
			return err;
		consume(k, (size_t)f->length);
		return 0;
	}
	/* Neither: the body runs to the end of the connection. */
	f->close = true;
	while ((n = conn_read(k, deadline)) > 0)
		;
	if (n < 0)
		return read_failed(n, h, why, why_len, "in the answer's body");
	err = body_add(resp, k->in, k->in_len, why, why_len);
	k->in_len = 0;
	return err;
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
	err = read_answer(&h, &k, resp, head_only, now_ms() + timeout_ms, &f, &none, why, why_len);
	if (err == 0)
		resp->status = f.status;
	*close = f.close;
	*left = k.in_len;
	free(k.in);
	return err;
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

static int write_head(struct ecw_buf *b, const struct target *t, const struct ecw_request *r, bool body)
{
	int err;

	ecw_buf_reset(b);
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

int ecw_http_send(struct ecw_http *h, struct ecw_response *resp, const char *url, const struct ecw_request *r,
		  char *why, size_t why_len)
{
	int64_t deadline = now_ms() + h->opts->timeout_ms;
	bool body = ecw_request_has_body(r), head_only = strcmp(r->method, "HEAD") == 0;
	struct target t;
	struct conn *k;
	int err;

	why[0] = '\0';
	if ((err = parse_url(&t, url, why, why_len)) < 0)
		return err;
	/* No CR or LF may reach the request's head from a header. */
	for (size_t i = 0; i < r->nheaders; i++)
		if (strpbrk(r->headers[i].name, "\r\n:") || strpbrk(r->headers[i].value, "\r\n")) {
			snprintf(why, why_len, "a request header with a line break");
			return ECW_EINVALID;
		}
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
		if (conn_write(k, iov, 2, deadline) < 0) {
			int saved = errno;
			bool timed_out = saved == EAGAIN || saved == EWOULDBLOCK;
			char text[96];

			snprintf(why, why_len, "%s sending the request%s%s",
				 timed_out ? "timed out" : "connection broken", timed_out ? "" : ": ",
				 timed_out ? "" : errtext(saved, text, sizeof(text)));
			err = timed_out ? ECW_ETIMEOUT : ECW_ETRANSIENT;
			none = !timed_out;
		} else {
			err = read_answer(h, k, resp, head_only, deadline, &f, &none, why, why_len);
		}
		if (err == 0) {
			resp->status = f.status;
			if (f.close)
				conn_close(k);
			return 0;
		}
		conn_close(k);
		/* A kept connection the server had closed: once more on a new one. */
		if (!(reused && none && attempt == 1 && err == ECW_ETRANSIENT))
			return err;
		ecw_response_reset(resp);
	}
}
