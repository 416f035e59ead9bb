/* SPDX-License-Identifier: MIT */
/* metrics_server.c - the HTTP endpoint of the metrics (see telemetry.h):
 * GET /metrics renders the counters (metrics.c), /healthz and /readyz ask
 * them for the probes' verdicts (telemetry_private.h).
 *
 * The server is libmicrohttpd with one internal polling thread (epoll, not a
 * thread per connection): a scrape is a few kilobytes rendered from memory and
 * written without blocking, so one thread answers every client quickly, and a
 * burst of connections cannot turn into a burst of threads in the worker. The
 * listening socket is created here and handed to libmicrohttpd, so a bind
 * failure is reported with its errno and the address, and port 0 can be read
 * back with getsockname.
 *
 * The server must stay up for the kubelet's probes whatever other clients do
 * (a /healthz that times out gets a healthy pod restarted), so a new
 * connection is never refused: when its address already holds
 * CONN_PER_ADDRESS_MAX connections, that address's oldest one is closed, and
 * when CONN_MAX are open, the oldest of all. Every answer is immediate, so the
 * oldest connections are the idle and slow ones (slowloris: a header byte every
 * few seconds, which an idle timeout alone never catches); a probe is answered
 * within one round of the polling thread, long before a flood could make it the
 * oldest. libmicrohttpd's own limits (refuse the newest) are only a backstop;
 * a connection silent for CONN_IDLE_SECONDS is closed; each connection's memory
 * is capped at CONN_MEMORY_MAX. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ecw_clock.h"
#include "ecw_log.h"
#include "telemetry.h"
#include "telemetry_private.h"

#define CONTENT_TYPE_METRICS "text/plain; version=0.0.4; charset=utf-8"
#define CONTENT_TYPE_TEXT "text/plain; charset=utf-8"

/* The listener's caps (see the top of the file). A probe or a scrape is one
 * short request, so these leave room for many monitoring clients while one
 * client address can never hold more than a few. */
#define CONN_MAX 128
#define CONN_PER_ADDRESS_MAX 16
#define CONN_IDLE_SECONDS 3u
#define CONN_MEMORY_MAX (16u * 1024) /* request headers, well over a probe's */
/* libmicrohttpd's limit, above ours: an evicted connection still counts there
 * until the polling thread sees it closed, on its next round. */
#define CONN_MHD_LIMIT (2u * CONN_MAX)

/* ---- the server ------------------------------------------------------------ */

/* One open connection, as the caps see it. */
struct conn_slot {
	struct MHD_Connection *conn;
	int fd;
	uint64_t seq; /* order of arrival: the smallest is the oldest */
	int family;
	unsigned char addr[16]; /* the client's address, without its port */
};

struct ecw_metrics_server {
	struct MHD_Daemon *daemon;
	int port;
	/* Only libmicrohttpd's polling thread touches these (connection notices),
	 * so they need no lock. */
	struct conn_slot conns[CONN_MAX];
	size_t nconns;
	uint64_t next_seq;
};

/* Lines a flood of clients would repeat per connection (libmicrohttpd's
 * complaints, the caps closing connections) get at most LOG_LINES_PER_MINUTE
 * lines a minute each; the next line let through tells how many were left
 * out. */
#define LOG_LINES_PER_MINUTE 10

struct log_budget {
	pthread_mutex_t lock;
	int64_t window_ms; /* start of the current minute; 0: none yet */
	unsigned lines;    /* written in it */
	uint64_t left_out; /* since the last line written */
};

static struct log_budget g_mhd_log_budget = {.lock = PTHREAD_MUTEX_INITIALIZER};
static struct log_budget g_closed_log_budget = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* True when a line may be written now; *left_out is then how many were not
 * since the last one. */
static bool log_budget_take(struct log_budget *b, uint64_t *left_out)
{
	int64_t now = ecw_clock_now_ms();
	bool ok;

	pthread_mutex_lock(&b->lock);
	if (b->window_ms == 0 || now - b->window_ms >= 60000) {
		b->window_ms = now;
		b->lines = 0;
	}
	if ((ok = b->lines < LOG_LINES_PER_MINUTE)) {
		b->lines++;
		*left_out = b->left_out;
		b->left_out = 0;
	} else {
		b->left_out++;
	}
	pthread_mutex_unlock(&b->lock);
	return ok;
}

/* body is a string literal, or (owned) a heap page that libmicrohttpd frees. */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned int status, const char *content_type,
			       const char *body, bool owned)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(strlen(body), (void *)body,
					    owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		if (owned)
			free((void *)body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* Answers on the first call, before any request body is read: none of these
 * resources takes one. An unknown path is 404 whatever the method; a known
 * one with a method other than GET or HEAD is 405. */
static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload_data, size_t *upload_data_size,
			      void **req_cls)
{
	bool known =
		strcmp(url, "/metrics") == 0 || strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0;
	char *page;

	(void)cls, (void)version, (void)upload_data, (void)upload_data_size, (void)req_cls;
	if (!known)
		return respond(c, MHD_HTTP_NOT_FOUND, CONTENT_TYPE_TEXT, "not found\n", false);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, CONTENT_TYPE_TEXT, "method not allowed\n",
			       false);
	if (strcmp(url, "/healthz") == 0) {
		if (!ecw_metrics_alive())
			return respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, CONTENT_TYPE_TEXT,
				       "no heartbeat within the liveness window\n", false);
		if (ecw_metrics_stalled())
			return respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, CONTENT_TYPE_TEXT,
				       "a job made no storage call within worker.stall_timeout\n", false);
		return respond(c, MHD_HTTP_OK, CONTENT_TYPE_TEXT, "ok\n", false);
	}
	if (strcmp(url, "/readyz") == 0) {
		if (ecw_metrics_circuit_open())
			return respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, CONTENT_TYPE_TEXT,
				       "not ready: storage does not answer (circuit open)\n", false);
		return ecw_metrics_ready() ? respond(c, MHD_HTTP_OK, CONTENT_TYPE_TEXT, "ok\n", false)
					   : respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, CONTENT_TYPE_TEXT,
						     "not ready\n", false);
	}
	if (!(page = ecw_metrics_render()))
		return respond(c, MHD_HTTP_INTERNAL_SERVER_ERROR, CONTENT_TYPE_TEXT, "out of memory\n",
			       false);
	return respond(c, MHD_HTTP_OK, CONTENT_TYPE_METRICS, page, true);
}

/* libmicrohttpd's own complaints (a failed accept, a broken client) go to
 * the log instead of straight to stderr, within their budget: it writes one
 * for every client that leaves mid-request. */
__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct ecw_log_line *l;
	char msg[512];
	size_t n;
	uint64_t left_out;

	(void)cls;
	if (!log_budget_take(&g_mhd_log_budget, &left_out))
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	for (n = strlen(msg); n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'); n--)
		msg[n - 1] = '\0';
	l = ecw_log_begin(ECW_LOG_WARN, "metrics.http_error");
	ecw_log_str(l, "msg", msg);
	if (left_out)
		ecw_log_int(l, "more_not_logged", (int64_t)left_out);
	ecw_log_end(l);
}

/* ---- the caps on connections ------------------------------------------------- */

static void slot_address(struct conn_slot *slot, const struct sockaddr *sa)
{
	slot->family = sa ? sa->sa_family : AF_UNSPEC;
	memset(slot->addr, 0, sizeof(slot->addr));
	if (slot->family == AF_INET)
		memcpy(slot->addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else if (slot->family == AF_INET6)
		memcpy(slot->addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

static bool same_address(const struct conn_slot *a, const struct conn_slot *b)
{
	return a->family == b->family && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

static void log_closed_oldest(void)
{
	struct ecw_log_line *l;
	uint64_t left_out;

	if (!log_budget_take(&g_closed_log_budget, &left_out))
		return;
	l = ecw_log_begin(ECW_LOG_WARN, "metrics.connection_closed");
	ecw_log_str(l, "msg", "too many open connections to the metrics port: closed the oldest");
	if (left_out)
		ecw_log_int(l, "more_not_logged", (int64_t)left_out);
	ecw_log_end(l);
}

/* Closes the connection of slot i and forgets it. shutdown, not close: the
 * descriptor stays libmicrohttpd's, never reused under it, and its next poll
 * sees the end of the stream and cleans up as for any client that left. */
static void conn_close_oldest(struct ecw_metrics_server *s, size_t i)
{
	shutdown(s->conns[i].fd, SHUT_RDWR);
	s->conns[i] = s->conns[--s->nconns];
	log_closed_oldest();
}

/* A new connection: make room under the caps (see the top of the file), then
 * count it. */
static void conn_started(struct ecw_metrics_server *s, struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *info;
	struct conn_slot slot = {.conn = c, .seq = s->next_seq++};
	size_t same = 0, oldest_same = 0, oldest = 0;

	/* Each answer is read before the next question: libmicrohttpd 1.0
	 * (Debian 13) answers every MHD_get_connection_info in one per-connection
	 * union, so a second call overwrites the first answer (0.9, Debian 12,
	 * did not). */
	if (!(info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD)))
		return; /* not expected; libmicrohttpd's own limits still hold */
	slot.fd = info->connect_fd;
	info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	slot_address(&slot, info ? info->client_addr : NULL);
	for (size_t i = 0; i < s->nconns; i++) {
		if (s->conns[i].seq < s->conns[oldest].seq)
			oldest = i;
		if (same_address(&s->conns[i], &slot) &&
		    (same++ == 0 || s->conns[i].seq < s->conns[oldest_same].seq))
			oldest_same = i;
	}
	if (same >= CONN_PER_ADDRESS_MAX)
		conn_close_oldest(s, oldest_same);
	else if (s->nconns >= CONN_MAX)
		conn_close_oldest(s, oldest);
	s->conns[s->nconns++] = slot;
}

static void conn_closed(struct ecw_metrics_server *s, struct MHD_Connection *c)
{
	for (size_t i = 0; i < s->nconns; i++) {
		if (s->conns[i].conn == c) {
			s->conns[i] = s->conns[--s->nconns];
			return;
		}
	}
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode what)
{
	(void)socket_context;
	if (what == MHD_CONNECTION_NOTIFY_STARTED)
		conn_started(cls, c);
	else if (what == MHD_CONNECTION_NOTIFY_CLOSED)
		conn_closed(cls, c);
}

/* "host:port": an IPv4 literal, "localhost" (127.0.0.1) or "[IPv6]", and a
 * decimal port 0..65535. */
static int parse_listen(struct sockaddr_storage *out, socklen_t *out_len, const char *where)
{
	char host[64];
	const char *colon, *port, *h;
	size_t hn;
	unsigned long p = 0;

	memset(out, 0, sizeof(*out));
	if (!where || !*where)
		return ecw_error_set(ECW_EINVALID, "metrics listen address is empty");
	if (where[0] == '[') {
		const char *close = strchr(where, ']');

		if (!close || close[1] != ':')
			return ecw_error_set(ECW_EINVALID,
					     "metrics listen address \"%s\": expected [IPv6 address]:port",
					     where);
		h = where + 1;
		hn = (size_t)(close - h);
		port = close + 2;
	} else {
		if (!(colon = strrchr(where, ':')))
			return ecw_error_set(ECW_EINVALID,
					     "metrics listen address \"%s\": expected host:port", where);
		h = where;
		hn = (size_t)(colon - where);
		port = colon + 1;
		if (memchr(h, ':', hn))
			return ecw_error_set(
				ECW_EINVALID,
				"metrics listen address \"%s\": write an IPv6 address in brackets, "
				"[addr]:port",
				where);
	}
	if (!*port || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port))
		return ecw_error_set(ECW_EINVALID, "metrics listen address \"%s\": the port must be a number",
				     where);
	for (const char *d = port; *d; d++)
		p = p * 10 + (unsigned long)(*d - '0');
	if (p > 65535)
		return ecw_error_set(ECW_EINVALID, "metrics listen address \"%s\": port %lu is above 65535",
				     where, p);
	if (hn == 0 || hn >= sizeof(host))
		goto bad_host;
	memcpy(host, h, hn);
	host[hn] = '\0';
	if (where[0] == '[') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)out;

		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			goto bad_host;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)p);
		*out_len = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)out;

		if (strcmp(host, "localhost") == 0)
			a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			goto bad_host;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)p);
		*out_len = sizeof(*a4);
	}
	return 0;
bad_host:
	return ecw_error_set(ECW_EINVALID,
			     "metrics listen address \"%s\": the host must be an IPv4 address, localhost or "
			     "[IPv6 address]",
			     where);
}

static int listen_socket(int *out_fd, int *out_port, const char *where)
{
	struct sockaddr_storage addr;
	socklen_t len = 0;
	char why[128] = "";
	int fd = -1, one = 1, err, e;

	if ((err = parse_listen(&addr, &len, where)) < 0)
		goto done;
	if ((fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		e = errno;
		strerror_r(e, why, sizeof(why));
		err = ecw_error_set(e == EAFNOSUPPORT ? ECW_EINVALID : ECW_ERROR,
				    "metrics: cannot open a socket for %s: %s", where, why);
		goto done;
	}
	/* A restarted worker can listen again while old connections linger in
	 * TIME_WAIT; on Linux this does not let two listeners share a port. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&addr, len) < 0 || listen(fd, 64) < 0) {
		e = errno;
		strerror_r(e, why, sizeof(why));
		err = ecw_error_set(e == EADDRNOTAVAIL ? ECW_EINVALID : ECW_ERROR,
				    "metrics: cannot listen on %s: %s", where, why);
		goto done;
	}
	len = sizeof(addr);
	if (getsockname(fd, (struct sockaddr *)&addr, &len) < 0) {
		e = errno;
		strerror_r(e, why, sizeof(why));
		err = ecw_error_set(ECW_ERROR, "metrics: cannot read the port bound for %s: %s", where, why);
		goto done;
	}
	*out_port = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
						     : ((struct sockaddr_in *)&addr)->sin_port);
	*out_fd = fd;
	fd = -1;
done:
	if (fd >= 0)
		close(fd);
	return err;
}

int ecw_metrics_start(struct ecw_metrics_server **out, const char *where)
{
	struct ecw_metrics_server *s = NULL;
	int fd = -1, port = 0, err;

	*out = NULL;
	if ((err = listen_socket(&fd, &port, where)) < 0)
		goto done;
	if (!(s = calloc(1, sizeof(*s)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	/* The logger option comes first so start-up messages use it too. Every
	 * option here exists in libmicrohttpd 0.9.75 (Debian 12) and 1.0. */
	s->daemon = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle,
		NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_CONNECTION_LIMIT, CONN_MHD_LIMIT,
		MHD_OPTION_CONNECTION_TIMEOUT, CONN_IDLE_SECONDS, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
		(size_t)CONN_MEMORY_MAX, MHD_OPTION_END);
	if (!s->daemon) {
		err = ecw_error_set(ECW_ERROR, "metrics: could not start the HTTP server on %s", where);
		goto done;
	}
	fd = -1; /* the daemon's now: MHD_stop_daemon closes it */
	s->port = port;
	*out = s;
	s = NULL;
done:
	if (fd >= 0)
		close(fd);
	free(s);
	return err;
}

int ecw_metrics_port(const struct ecw_metrics_server *s)
{
	return s ? s->port : 0;
}

void ecw_metrics_stop(struct ecw_metrics_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->daemon);
	free(s);
}
