/* SPDX-License-Identifier: MIT */
/* faultproxy - a TCP proxy on loopback that adds latency and injects the
 * faults a storage client must ride through, for the chaos tests and the
 * benchmark's latency scenario. The kernel here has no netem and Debian has
 * no toxiproxy, so this is ours: libc and pthreads only.
 *
 *   faultproxy --map LISTEN_PORT:TARGET_HOST:TARGET_PORT [--map ...]
 *              [--latency-ms N] [--p503 F] [--preset F] [--pstall F]
 *              [--stall-ms N] [--stall-pipelined N] [--rate-limit N]
 *              [--seed N] [--stats FILE] [--ready-file FILE]
 *
 * The command line is a contract other tests rely on:
 * - --map: listen on 127.0.0.1:LISTEN_PORT (0: a free port) and forward each
 *   connection to TARGET_HOST:TARGET_PORT (resolved once, at start).
 * - --latency-ms N: each burst (data arriving in one direction after that
 *   direction was idle) waits N ms before it is forwarded; the rest of the
 *   burst is not delayed again. Order is preserved. Both directions.
 * - A request starts with the first client->server burst after the previous
 *   response began (HTTP/1.1 keep-alive without pipelining, as libcurl and
 *   the SDKs do); the fault for a request is drawn then, one of:
 *   --p503 F    answer it here with 503 ServerBusy (x-ms-error-code, an XML
 *               or, for a JSON Accept, a JSON body, Connection: close); the
 *               request is not forwarded;
 *   --preset F  reset the client's connection (RST: SO_LINGER 0), half of
 *               the time before forwarding the request, half after the
 *               service began to answer it (so the work is done and the
 *               answer lost);
 *   --pstall F  forward the request and hold the response for --stall-ms
 *               (default 60000) or until the client gives up, whichever
 *               comes first (a response still wanted is then forwarded).
 *   When none of those is drawn, --stall-pipelined N holds the responses
 *   of the first N bursts that carry more than one request (a request
 *   without a body and more after its head: a pipelining client's, written
 *   together) as --pstall holds one response: the answers that go missing
 *   from a server that does not keep to pipelining, while the requests
 *   sent alone pass.
 *   Before those draws, --rate-limit N throttles as a storage partition
 *   does: a token bucket of N requests, refilled at N a second, shared by
 *   every map; a request that finds it empty is answered 503 ServerBusy here
 *   (counted as "throttled", apart from --p503's).
 * - --seed N: the random draws' seed (default 1). Threads interleave, so a
 *   seed fixes the rates, not which request gets which fault.
 * - --ready-file FILE: written (atomically, by rename) once every listener is
 *   up, one line per map: "LISTEN_PORT TARGET_HOST:TARGET_PORT".
 * - Signals: SIGTERM/SIGINT write the stats file and exit 0; SIGUSR1 writes
 *   it now; SIGUSR2 turns faults off for good (latency stays) and writes it.
 * - --stats FILE: one JSON object, {"connections":N,"requests":N,
 *   "bytes_up":N,"bytes_down":N,"faults":{"503":N,"reset_before":N,
 *   "reset_after":N,"stall":N,"throttled":N,"stall_pipelined":N},
 *   "faults_on":true}.
 *
 * Limits: plain TCP (it reads the HTTP request only to choose the 503's body
 * type, so https passes through but the 503 is then garbage to the client);
 * a pipelining client would see faults drawn per burst, not per request; two
 * threads per connection, fine for the few hundred connections a test opens.
 * Listeners bind loopback only: this is a test tool, never a service. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_MAPS 16
#define BUF_SIZE 65536

enum fault { F_NONE, F_503, F_RESET_BEFORE, F_RESET_AFTER, F_STALL };

struct map {
	int listen_port;
	char host[256];
	int target_port;
	int lfd;
	struct sockaddr_storage addr;
	socklen_t addrlen;
};

static struct map maps[MAX_MAPS];
static int nmaps;
static long latency_ms;
static long stall_ms = 60000;
static double p503, preset, pstall;
static long rate_limit; /* requests a second; 0: none */
static const char *stats_path;

/* Everything below is guarded by g_lock. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rng_state = 1;
static bool faults_on = true;
static unsigned long long n_conns, n_requests, bytes_up, bytes_down;
static unsigned long long n_503, n_reset_before, n_reset_after, n_stall, n_throttled, n_stall_pipelined;
static long stall_pipelined; /* --stall-pipelined's bursts still to hold */
static double bucket;        /* --rate-limit's tokens */
static int64_t bucket_at_ms; /* when they were counted */

/* One proxied connection: two threads (client->server "up", server->client
 * "down") share it; the last one out closes both sockets and frees it, so a
 * descriptor is never closed while the other thread may still use it. */
struct conn {
	int cfd, sfd;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* closing or client_eof changed */
	int refs;
	bool closing;       /* torn down: both threads leave */
	bool client_eof;    /* the client closed its side */
	bool req_open;      /* a request began and its response has not */
	enum fault pending; /* the open request's fault, for the down thread */
};

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "faultproxy: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	exit(2);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* xorshift64*: a uniform double in [0, 1). Caller holds g_lock. */
static double rnd_locked(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (double)((rng_state * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* Draws the fault of a new request and counts it. */
static enum fault draw_fault(void)
{
	enum fault f = F_NONE;
	pthread_mutex_lock(&g_lock);
	n_requests++;
	if (faults_on && rate_limit > 0) {
		int64_t now = now_ms();
		bucket += (double)(now - bucket_at_ms) * (double)rate_limit / 1000.0;
		if (bucket > (double)rate_limit)
			bucket = (double)rate_limit;
		bucket_at_ms = now;
		if (bucket < 1.0) {
			n_throttled++;
			pthread_mutex_unlock(&g_lock);
			return F_503;
		}
		bucket -= 1.0;
	}
	if (faults_on) {
		double r = rnd_locked();
		if (r < p503) {
			f = F_503;
			n_503++;
		} else if (r < p503 + preset) {
			if (rnd_locked() < 0.5) {
				f = F_RESET_BEFORE;
				n_reset_before++;
			} else {
				f = F_RESET_AFTER;
				n_reset_after++;
			}
		} else if (r < p503 + preset + pstall) {
			f = F_STALL;
			n_stall++;
		}
	}
	pthread_mutex_unlock(&g_lock);
	return f;
}

/* The value of header name (lower case, with its colon) in the head of
 * head_len bytes at p, or NULL. */
static const char *header(const char *p, size_t head_len, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i + 2 + len <= head_len; i++)
		if (p[i] == '\r' && p[i + 1] == '\n' && strncasecmp(p + i + 2, name, len) == 0)
			return p + i + 2 + len;
	return NULL;
}

/* Whether a burst carries more than one request: its first request has no
 * body and more bytes follow its head (a pipelining client's requests,
 * written together). The requests a table batch carries in its body are
 * not counted. */
static bool pipelined(const char *p, size_t n)
{
	size_t head_len = 0;
	const char *cl;

	for (size_t i = 0; i + 4 <= n && !head_len; i++)
		if (memcmp(p + i, "\r\n\r\n", 4) == 0)
			head_len = i + 2;
	if (!head_len || head_len + 2 >= n || header(p, head_len, "transfer-encoding:"))
		return false;
	cl = header(p, head_len, "content-length:");
	return !cl || strtol(cl, NULL, 10) == 0;
}

/* Whether a pipelined burst's responses are to be held (--stall-pipelined),
 * counting it. */
static bool take_pipelined_stall(void)
{
	bool hold = false;
	pthread_mutex_lock(&g_lock);
	if (faults_on && stall_pipelined > 0) {
		stall_pipelined--;
		n_stall_pipelined++;
		hold = true;
	}
	pthread_mutex_unlock(&g_lock);
	return hold;
}

static void count_bytes(unsigned long long *counter, size_t n)
{
	pthread_mutex_lock(&g_lock);
	*counter += n;
	pthread_mutex_unlock(&g_lock);
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* ---- a connection's life ------------------------------------------------- */

/* Tears the connection down and wakes the other thread: its blocked recv
 * returns. With rst, the client gets an RST when the last thread closes its
 * socket (SO_LINGER 0); SHUT_RD wakes a reader without sending a FIN. */
static void conn_abort(struct conn *c, bool rst)
{
	pthread_mutex_lock(&c->lock);
	c->closing = true;
	if (rst) {
		struct linger lg = {1, 0};
		setsockopt(c->cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		shutdown(c->cfd, SHUT_RD);
	} else {
		shutdown(c->cfd, SHUT_RDWR);
	}
	shutdown(c->sfd, SHUT_RDWR);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static bool conn_closing(struct conn *c)
{
	pthread_mutex_lock(&c->lock);
	bool closing = c->closing;
	pthread_mutex_unlock(&c->lock);
	return closing;
}

static void conn_release(struct conn *c)
{
	pthread_mutex_lock(&c->lock);
	int left = --c->refs;
	pthread_mutex_unlock(&c->lock);
	if (left > 0)
		return;
	close(c->cfd);
	close(c->sfd);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

/* Reads the next chunk: blocking when the direction is idle (a new burst,
 * *fresh set), else only what is already there. Returns bytes, 0 at EOF, -1
 * on error, -2 when the burst is over (nothing more right now). */
static ssize_t next_chunk(int fd, char *buf, bool idle, bool *fresh)
{
	for (;;) {
		ssize_t n = recv(fd, buf, BUF_SIZE, idle ? 0 : MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && !idle && (errno == EAGAIN || errno == EWOULDBLOCK))
			return -2;
		*fresh = idle;
		return n;
	}
}

/* The next chunk of one direction, the first of a burst delayed by
 * --latency-ms. Returns bytes, 0 at EOF, -1 on an error. */
static ssize_t next_data(int fd, char *buf, bool *idle)
{
	for (;;) {
		bool fresh = false;
		ssize_t n = next_chunk(fd, buf, *idle, &fresh);
		if (n == -2) {
			*idle = true;
			continue;
		}
		if (n > 0) {
			*idle = false;
			if (fresh && latency_ms > 0)
				sleep_ms(latency_ms);
		}
		return n;
	}
}

/* The 503 a busy service sends, in the body type the client asked for. */
static void answer_503(struct conn *c, const char *req, size_t n)
{
	char head[512], body[512];
	bool json = false;
	for (size_t i = 0; i + 16 <= n && !json; i++)
		json = strncasecmp(req + i, "application/json", 16) == 0;
	int blen = json
	               ? snprintf(body, sizeof(body),
	                          "{\"odata.error\":{\"code\":\"ServerBusy\",\"message\":{\"lang\":\"en-US\","
	                          "\"value\":\"The server is busy (faultproxy).\"}}}")
	               : snprintf(body, sizeof(body),
	                          "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>ServerBusy</Code>"
	                          "<Message>The server is busy (faultproxy).</Message></Error>");
	int hlen =
	    snprintf(head, sizeof(head),
	             "HTTP/1.1 503 Server Busy\r\n"
	             "Content-Type: %s\r\n"
	             "x-ms-error-code: ServerBusy\r\n"
	             "x-ms-request-id: faultproxy\r\n"
	             "Content-Length: %d\r\n"
	             "Connection: close\r\n\r\n",
	             json ? "application/json;odata=minimalmetadata;charset=utf-8" : "application/xml", blen);
	if (blen < 0 || hlen < 0 || (size_t)blen >= sizeof(body) || (size_t)hlen >= sizeof(head))
		return;
	if (send_all(c->cfd, head, (size_t)hlen) == 0 && send_all(c->cfd, body, (size_t)blen) == 0)
		shutdown(c->cfd, SHUT_WR);
}

/* Reads what the client still sends (the rest of the request) until it
 * closes, at most 2 s: closing with unread data would send an RST that
 * could destroy the 503 before the client reads it. */
static void drain_client(int fd)
{
	char buf[4096];
	int64_t end = now_ms() + 2000;
	struct timeval tv = {0, 200000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (now_ms() < end) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
			break;
	}
}

/* Client -> server: draws each request's fault. */
static void *up_thread(void *arg)
{
	struct conn *c = arg;
	char *buf = malloc(BUF_SIZE);
	bool idle = true;
	while (buf) {
		ssize_t n = next_data(c->cfd, buf, &idle);
		if (n <= 0) {
			if (conn_closing(c))
				break;
			if (n == 0) {
				/* The client is done sending: pass the half-close on. */
				pthread_mutex_lock(&c->lock);
				c->client_eof = true;
				shutdown(c->sfd, SHUT_WR);
				pthread_cond_broadcast(&c->cond);
				pthread_mutex_unlock(&c->lock);
			} else {
				conn_abort(c, false);
			}
			break;
		}
		if (conn_closing(c))
			break;

		enum fault f = F_NONE;
		pthread_mutex_lock(&c->lock);
		bool new_request = !c->req_open;
		c->req_open = true;
		pthread_mutex_unlock(&c->lock);
		if (new_request)
			f = draw_fault();
		if (new_request && f == F_NONE && pipelined(buf, (size_t)n) && take_pipelined_stall())
			f = F_STALL;
		if (f == F_503) {
			/* Take the connection from the down thread first: nothing
			 * of the service's may follow the 503. */
			pthread_mutex_lock(&c->lock);
			c->closing = true;
			shutdown(c->sfd, SHUT_RDWR);
			pthread_mutex_unlock(&c->lock);
			answer_503(c, buf, (size_t)n);
			drain_client(c->cfd);
			conn_abort(c, false);
			break;
		}
		if (f == F_RESET_BEFORE) {
			conn_abort(c, true);
			break;
		}
		if (f != F_NONE) {
			pthread_mutex_lock(&c->lock);
			c->pending = f;
			pthread_mutex_unlock(&c->lock);
		}
		if (send_all(c->sfd, buf, (size_t)n) != 0) {
			conn_abort(c, false);
			break;
		}
		count_bytes(&bytes_up, (size_t)n);
	}
	free(buf);
	conn_release(c);
	return NULL;
}

/* Holds a response: until the client gives up (true) or stall_ms pass. */
static bool stall(struct conn *c)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += stall_ms / 1000;
	until.tv_nsec += (stall_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->lock);
	while (!c->closing && !c->client_eof)
		if (pthread_cond_timedwait(&c->cond, &c->lock, &until) == ETIMEDOUT)
			break;
	bool gone = c->closing || c->client_eof;
	pthread_mutex_unlock(&c->lock);
	return gone;
}

/* Server -> client: carries out the faults that wait for the response. */
static void *down_thread(void *arg)
{
	struct conn *c = arg;
	char *buf = malloc(BUF_SIZE);
	bool idle = true;
	while (buf) {
		ssize_t n = next_data(c->sfd, buf, &idle);
		if (n <= 0) {
			if (conn_closing(c))
				break;
			if (n == 0)
				shutdown(c->cfd, SHUT_WR); /* the service is done: pass it on */
			else
				conn_abort(c, false);
			break;
		}

		pthread_mutex_lock(&c->lock);
		enum fault f = F_NONE;
		if (c->req_open) {
			/* The response begins: the next client burst is a new request. */
			c->req_open = false;
			f = c->pending;
			c->pending = F_NONE;
		}
		bool closing = c->closing;
		pthread_mutex_unlock(&c->lock);
		if (closing)
			break;
		if (f == F_RESET_AFTER) {
			conn_abort(c, true);
			break;
		}
		if (f == F_STALL && stall(c)) {
			conn_abort(c, false);
			break;
		}
		if (send_all(c->cfd, buf, (size_t)n) != 0) {
			conn_abort(c, false);
			break;
		}
		count_bytes(&bytes_down, (size_t)n);
	}
	free(buf);
	conn_release(c);
	return NULL;
}

static bool spawn(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	int rc = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return rc == 0;
}

/* Accepts on one map's listener; each connection gets its upstream socket
 * and its two threads. */
static void *accept_thread(void *arg)
{
	struct map *m = arg;
	for (;;) {
		int cfd = accept(m->lfd, NULL, NULL);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
				sleep_ms(errno == EMFILE || errno == ENFILE ? 50 : 0);
			continue;
		}
		pthread_mutex_lock(&g_lock);
		n_conns++;
		pthread_mutex_unlock(&g_lock);
		int one = 1;
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		int sfd = socket(m->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (sfd < 0 || connect(sfd, (struct sockaddr *)&m->addr, m->addrlen) != 0) {
			/* The service is down (a restart): the client sees a reset. */
			struct linger lg = {1, 0};
			setsockopt(cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			if (sfd >= 0)
				close(sfd);
			close(cfd);
			continue;
		}
		setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(cfd);
			close(sfd);
			continue;
		}
		c->cfd = cfd;
		c->sfd = sfd;
		c->refs = 2;
		pthread_mutex_init(&c->lock, NULL);
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&c->cond, &ca);
		pthread_condattr_destroy(&ca);
		if (!spawn(up_thread, c)) {
			close(cfd);
			close(sfd);
			free(c);
			continue;
		}
		if (!spawn(down_thread, c)) {
			conn_abort(c, false);
			conn_release(c);
		}
	}
	return NULL;
}

/* ---- files ------------------------------------------------------------- */

/* Writes text to path through a temporary file and rename, so a reader
 * sees the old file or the new one, never half of one. */
static void write_atomic(const char *path, const char *text)
{
	char tmp[4096];
	int n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		fprintf(stderr, "faultproxy: path too long: %s\n", path);
		return;
	}
	FILE *f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "faultproxy: cannot write %s: %s\n", tmp, strerror(errno));
		return;
	}
	bool ok = fputs(text, f) >= 0;
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) != 0) {
		fprintf(stderr, "faultproxy: cannot write %s: %s\n", path, strerror(errno));
		unlink(tmp);
	}
}

static void write_stats(void)
{
	char text[640];
	if (!stats_path)
		return;
	pthread_mutex_lock(&g_lock);
	int n = snprintf(text, sizeof(text),
	                 "{\"connections\":%llu,\"requests\":%llu,\"bytes_up\":%llu,\"bytes_down\":%llu,"
	                 "\"faults\":{\"503\":%llu,\"reset_before\":%llu,\"reset_after\":%llu,\"stall\":%llu,"
	                 "\"throttled\":%llu,\"stall_pipelined\":%llu},\"faults_on\":%s}\n",
	                 n_conns, n_requests, bytes_up, bytes_down, n_503, n_reset_before, n_reset_after,
	                 n_stall, n_throttled, n_stall_pipelined, faults_on ? "true" : "false");
	pthread_mutex_unlock(&g_lock);
	if (n > 0 && (size_t)n < sizeof(text))
		write_atomic(stats_path, text);
}

/* ---- the command line ------------------------------------------------------ */

static long parse_long(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "faultproxy: %s wants an integer in %ld..%ld, not \"%s\"\n", opt, lo, hi, s);
		exit(2);
	}
	return v;
}

static double parse_prob(const char *opt, const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0.0 && v <= 1.0)) {
		fprintf(stderr, "faultproxy: %s wants a probability in 0..1, not \"%s\"\n", opt, s);
		exit(2);
	}
	return v;
}

/* LISTEN_PORT:TARGET_HOST:TARGET_PORT, the host without colons. */
static void parse_map(const char *s)
{
	if (nmaps == MAX_MAPS)
		die("at most 16 --map options%s", "");
	struct map *m = &maps[nmaps++];
	const char *c1 = strchr(s, ':');
	const char *c2 = c1 ? strrchr(s, ':') : NULL;
	if (!c1 || c2 == c1 || (size_t)(c2 - c1 - 1) >= sizeof(m->host) || c2 == c1 + 1)
		die("--map wants LISTEN_PORT:TARGET_HOST:TARGET_PORT, not \"%s\"", s);
	char port[16];
	size_t plen = (size_t)(c1 - s);
	if (plen == 0 || plen >= sizeof(port))
		die("--map wants LISTEN_PORT:TARGET_HOST:TARGET_PORT, not \"%s\"", s);
	memcpy(port, s, plen);
	port[plen] = '\0';
	m->listen_port = (int)parse_long("--map (listen port)", port, 0, 65535);
	memcpy(m->host, c1 + 1, (size_t)(c2 - c1 - 1));
	m->host[c2 - c1 - 1] = '\0';
	m->target_port = (int)parse_long("--map (target port)", c2 + 1, 1, 65535);

	struct addrinfo hints = {0}, *res = NULL;
	hints.ai_socktype = SOCK_STREAM;
	char tport[16];
	snprintf(tport, sizeof(tport), "%d", m->target_port);
	int rc = getaddrinfo(m->host, tport, &hints, &res);
	if (rc != 0 || !res)
		die("cannot resolve the target host \"%s\"", m->host);
	memcpy(&m->addr, res->ai_addr, res->ai_addrlen);
	m->addrlen = res->ai_addrlen;
	freeaddrinfo(res);
}

static void listen_map(struct map *m)
{
	struct sockaddr_in a = {0};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)m->listen_port);
	int one = 1;
	m->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (m->lfd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(m->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(m->lfd, 512) != 0) {
		fprintf(stderr, "faultproxy: cannot listen on 127.0.0.1:%d: %s\n", m->listen_port,
		        strerror(errno));
		exit(2);
	}
	socklen_t len = sizeof(a);
	if (getsockname(m->lfd, (struct sockaddr *)&a, &len) != 0)
		die("getsockname: %s", strerror(errno));
	m->listen_port = ntohs(a.sin_port);
}

static void usage(void)
{
	fprintf(stderr,
	        "usage: faultproxy --map LISTEN_PORT:TARGET_HOST:TARGET_PORT [--map ...]\n"
	        "                  [--latency-ms N] [--p503 F] [--preset F] [--pstall F] [--stall-ms N]\n"
	        "                  [--stall-pipelined N] [--rate-limit N] [--seed N] [--stats FILE]\n"
	        "                  [--ready-file FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *ready_path = NULL;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0)
			usage();
		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];
		if (strcmp(o, "--map") == 0)
			parse_map(v);
		else if (strcmp(o, "--latency-ms") == 0)
			latency_ms = parse_long(o, v, 0, 600000);
		else if (strcmp(o, "--p503") == 0)
			p503 = parse_prob(o, v);
		else if (strcmp(o, "--preset") == 0)
			preset = parse_prob(o, v);
		else if (strcmp(o, "--pstall") == 0)
			pstall = parse_prob(o, v);
		else if (strcmp(o, "--rate-limit") == 0)
			rate_limit = parse_long(o, v, 1, 1000000);
		else if (strcmp(o, "--stall-ms") == 0)
			stall_ms = parse_long(o, v, 0, 3600000);
		else if (strcmp(o, "--stall-pipelined") == 0)
			stall_pipelined = parse_long(o, v, 0, 1000000);
		else if (strcmp(o, "--seed") == 0)
			rng_state = (uint64_t)parse_long(o, v, 0, 0x7fffffffL) * 2654435761ULL +
			            0x9E3779B97F4A7C15ULL;
		else if (strcmp(o, "--stats") == 0)
			stats_path = v;
		else if (strcmp(o, "--ready-file") == 0)
			ready_path = v;
		else
			usage();
	}
	if (nmaps == 0)
		usage();
	bucket = (double)rate_limit;
	bucket_at_ms = now_ms();
	if (p503 + preset + pstall > 1.0) {
		fprintf(stderr, "faultproxy: --p503 + --preset + --pstall must not exceed 1\n");
		exit(2);
	}

	/* Every thread inherits this mask; main takes the signals with sigwait. */
	signal(SIGPIPE, SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	char ready[MAX_MAPS * 300] = "";
	size_t used = 0;
	for (int i = 0; i < nmaps; i++) {
		listen_map(&maps[i]);
		int n = snprintf(ready + used, sizeof(ready) - used, "%d %s:%d\n", maps[i].listen_port,
		                 maps[i].host, maps[i].target_port);
		if (n < 0 || (size_t)n >= sizeof(ready) - used)
			die("ready file too long%s", "");
		used += (size_t)n;
	}
	for (int i = 0; i < nmaps; i++)
		if (!spawn(accept_thread, &maps[i]))
			die("cannot start a thread%s", "");
	if (ready_path)
		write_atomic(ready_path, ready);

	for (;;) {
		int sig = 0;
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig == SIGUSR2) {
			pthread_mutex_lock(&g_lock);
			faults_on = false;
			pthread_mutex_unlock(&g_lock);
		}
		write_stats();
		if (sig == SIGTERM || sig == SIGINT)
			return 0;
	}
}
