/* SPDX-License-Identifier: MIT */
/* test_http.c - http.c, the HTTP/1.1 transport, against a scripted server on
 * a loopback port (a thread here): what goes on the wire for a request, and
 * every way an answer can be framed or broken - length, chunks, interim
 * answers, HEAD/204, a body up to the close, answers cut into single bytes,
 * kept and closed connections, a kept connection the server dropped, a
 * server that never answers, a socket timeout shorter than the time left,
 * answers too large or malformed (a NUL in the head among them), and the
 * URLs it takes (IPv6 hosts, ports) and refuses. The storage
 * protocol on top is test_client's (fake transport) and the integration
 * tests' (Azurite, over http and https). */
#include "support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- recv, counted ---------------------------------------------------------------------------- */

/* This executable's recv stands in for libc's (http.c is linked in, so its
 * calls come here): it counts the client's reads that found nothing (the
 * transport's reads are the MSG_DONTWAIT ones; the server's block). */
static atomic_int g_empty_reads;

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	ssize_t r = recvfrom(fd, buf, n, flags, NULL, NULL);

	if (r < 0 && (flags & MSG_DONTWAIT) && (errno == EAGAIN || errno == EWOULDBLOCK))
		atomic_fetch_add(&g_empty_reads, 1);
	return r;
}

/* ---- the scripted server ---------------------------------------------------------------------- */

#define SRV_MAX 8

struct srv {
	int lfd, port;
	pthread_t th;
	/* Answer i goes to request i; NULL: read the request and never answer
	 * (until the client closes). */
	const char *answer[SRV_MAX];
	bool close_after[SRV_MAX]; /* close the connection after answer i */
	bool bytewise;             /* send answers a byte at a time */
	int delay_ms[SRV_MAX];     /* wait before answer i */
	int split_ms[SRV_MAX];     /* > 0: send half of answer i, wait, send the rest */
	int n;                     /* answers in the script */
	char req[SRV_MAX][2048];   /* what came, head and body */
	int nreq, accepts;
	bool stopped;
	uint32_t bind_addr; /* host order; 0: 127.0.0.1 */
	int bind_port;      /* 0: any */
};

/* Reads one request (head and Content-Length body) into out; false when the
 * client closed first. */
static bool srv_read_request(int fd, char *out, size_t cap)
{
	size_t len = 0;
	char *end = NULL;
	long clen = 0;

	while (!end || len < (size_t)(end - out) + 4 + (size_t)clen) {
		ssize_t k = recv(fd, out + len, cap - 1 - len, 0);
		if (k <= 0)
			return false;
		len += (size_t)k;
		out[len] = '\0';
		if (!end && (end = strstr(out, "\r\n\r\n"))) {
			const char *cl = strstr(out, "Content-Length: ");
			clen = cl && cl < end ? strtol(cl + 16, NULL, 10) : 0;
		}
	}
	return true;
}

static void *srv_main(void *arg)
{
	struct srv *s = arg;
	int fd = -1;

	while (s->nreq < s->n) {
		if (fd < 0) {
			if ((fd = accept(s->lfd, NULL, NULL)) < 0)
				break;
			s->accepts++;
		}
		int i = s->nreq;
		if (!srv_read_request(fd, s->req[i], sizeof(s->req[i]))) {
			close(fd); /* the client gave up on this connection */
			fd = -1;
			continue;
		}
		s->nreq++;
		if (!s->answer[i]) {
			char sink[256];
			while (recv(fd, sink, sizeof(sink), 0) > 0)
				;
			close(fd);
			fd = -1;
			continue;
		}
		size_t alen = strlen(s->answer[i]), part = s->split_ms[i] ? alen / 2 : alen;
		usleep((useconds_t)s->delay_ms[i] * 1000);
		for (size_t off = 0; off < alen;) {
			if (off == part)
				usleep((useconds_t)s->split_ms[i] * 1000), part = alen;
			ssize_t k = send(fd, s->answer[i] + off, s->bytewise ? 1 : part - off, MSG_NOSIGNAL);
			if (k <= 0)
				break;
			off += (size_t)k;
		}
		if (s->close_after[i]) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void srv_start(struct srv *s)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	int one = 1;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(s->bind_addr ? s->bind_addr : INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)s->bind_port);
	assert_true((s->lfd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->lfd, 8), 0);
	assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &alen), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->th, NULL, srv_main, s), 0);
}

/* Joins the thread: it ends once its script is done, or at the accept that
 * the shutdown fails; a thread still reading a kept connection waits for the
 * client to close it (ecw_http_free). */
static void srv_stop(struct srv *s)
{
	if (s->stopped)
		return;
	s->stopped = true;
	shutdown(s->lfd, SHUT_RDWR);
	pthread_join(s->th, NULL);
	close(s->lfd);
}

/* ---- the client side ------------------------------------------------------------------------- */

struct hx {
	struct srv s;
	struct ecw_client_options o;
	struct ecw_http *h;
	struct ecw_response resp;
	struct ecw_request r;
	char url[128];
	char why[256];
};

static struct hx *hx_new(void)
{
	static const struct ecw_client_options opts = {1,    0,    0,    2000, 1000, false,
	                                               NULL, NULL, NULL, NULL, false};
	struct hx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	x->o = opts;
	ecw_response_init(&x->resp);
	ecw_request_init(&x->r, ECW_SVC_TABLE, "GET");
	return x;
}

/* Starts the server on the script so far and makes the transport. */
static void hx_start(struct hx *x, const char *path)
{
	srv_start(&x->s);
	snprintf(x->url, sizeof(x->url), "http://127.0.0.1:%d%s", x->s.port, path);
	assert_int_equal(ecw_http_new(&x->h, &x->o), 0);
}

static int hx_send(struct hx *x)
{
	ecw_response_reset(&x->resp);
	return ecw_http_send(x->h, &x->resp, x->url, &x->r, x->why, sizeof(x->why));
}

static void hx_free(struct hx *x)
{
	ecw_http_free(x->h); /* closes: a server waiting on us returns */
	srv_stop(&x->s);
	ecw_request_dispose(&x->r);
	ecw_response_dispose(&x->resp);
	free(x);
}

static void script(struct hx *x, const char *answer, bool close_after)
{
	x->s.answer[x->s.n] = answer;
	x->s.close_after[x->s.n++] = close_after;
}

#define OK_HELLO "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: W/\"1\"\r\n\r\nhello"

static void assert_body(const struct hx *x, const char *want)
{
	assert_int_equal(x->resp.body.len, strlen(want));
	assert_memory_equal(ecw_buf_cstr(&x->resp.body), want, strlen(want));
}

/* ---- cases ----------------------------------------------------------------------------------- */

/* The request on the wire: the line, Host with the port, the headers in
 * order, our Content-Type and the body's length, then the body. */
static void test_http__request_on_the_wire(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x, OK_HELLO, false);
	hx_start(x, "/devstoreaccount1/t(PartitionKey='a',RowKey='b')?$select=A%2CB");
	x->r.method = "PUT";
	assert_int_equal(ecw_request_set_header(&x->r, "x-ms-version", "2019-02-02"), 0);
	assert_int_equal(ecw_request_set_header(&x->r, "If-Match", "*"), 0);
	x->r.content_type = "application/json";
	x->r.body = "{\"A\":1}";
	x->r.body_len = 7;
	assert_int_equal(hx_send(x), 0);
	char want[512];
	snprintf(want, sizeof(want),
	         "PUT /devstoreaccount1/t(PartitionKey='a',RowKey='b')?$select=A%%2CB HTTP/1.1\r\n"
	         "Host: 127.0.0.1:%d\r\n"
	         "x-ms-version: 2019-02-02\r\n"
	         "If-Match: *\r\n"
	         "Content-Type: application/json\r\n"
	         "Content-Length: 7\r\n"
	         "\r\n"
	         "{\"A\":1}",
	         x->s.port);
	srv_stop(&x->s); /* its script done, so its record is complete */
	assert_str(x->s.req[0], want);
	hx_free(x);
}

/* A GET sends no Content-Length and no Content-Type; a PUT without a body
 * still says Content-Length: 0 (the service wants it, and it is signed). */
static void test_http__lengths_by_method(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x, OK_HELLO, false);
	script(x, OK_HELLO, false);
	hx_start(x, "/q");
	assert_int_equal(hx_send(x), 0);
	x->r.method = "PUT";
	assert_int_equal(hx_send(x), 0);
	srv_stop(&x->s);
	assert_null(strstr(x->s.req[0], "Content-Length"));
	assert_null(strstr(x->s.req[0], "Content-Type"));
	assert_non_null(strstr(x->s.req[1], "\r\nContent-Length: 0\r\n\r\n"));
	assert_int_equal(x->s.accepts, 1); /* kept alive */
	hx_free(x);
}

static void test_http__content_length_answer(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(
	    x,
	    "HTTP/1.1 201 Created\r\nContent-Length: 5\r\nETag:   W/\"x\"  \r\nx-ms-request-id: r1\r\n\r\nhello",
	    false);
	hx_start(x, "/t");
	assert_int_equal(hx_send(x), 0);
	assert_int_equal(x->resp.status, 201);
	assert_body(x, "hello");
	assert_str(ecw_response_header(&x->resp, "etag"), "W/\"x\"");
	assert_str(ecw_response_header(&x->resp, "X-MS-Request-Id"), "r1");
	hx_free(x);
}

/* Right after a request goes out the transport waits for the answer rather
 * than trying a read that can only find nothing: a request is a sendmsg, a
 * poll and a recv. Later reads of the same answer (here a body sent in two
 * halves 50 ms apart) are still tried before they wait. */
static void test_http__no_read_before_the_answer_can_come(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x, OK_HELLO, false);
	script(x, OK_HELLO, false);
	script(x, OK_HELLO, false);
	x->s.delay_ms[0] = 30;
	x->s.split_ms[2] = 50;
	hx_start(x, "/t");
	atomic_store(&g_empty_reads, 0);
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "hello");
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "hello");
	assert_int_equal(atomic_load(&g_empty_reads), 0);
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "hello");
	assert_int_equal(atomic_load(&g_empty_reads), 1); /* the second half's */
	hx_free(x);
}

/* Every byte in its own segment: nothing may assume an answer arrives whole. */
static void test_http__answer_a_byte_at_a_time(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	x->s.bytewise = true;
	script(x, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
	       false);
	script(x, OK_HELLO, false);
	hx_start(x, "/t");
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "abcde");
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "hello");
	hx_free(x);
}

/* Chunks with extensions, a trailer, and the connection kept for the next. */
static void test_http__chunked_with_trailer(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x,
	       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "A;name=v\r\n0123456789\r\n1\r\n!\r\n0\r\nX-Trailer: t\r\n\r\n",
	       false);
	script(x, OK_HELLO, false);
	hx_start(x, "/t");
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "0123456789!");
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "hello");
	assert_int_equal(ecw_http_connections(x->h), 1);
	hx_free(x);
}

/* A 100 Continue before the answer: skipped, and its headers are not kept. */
static void test_http__interim_answer_skipped(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x, "HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\nHTTP/1.1 204 No Content\r\nETag: e\r\n\r\n",
	       false);
	script(x, OK_HELLO, false);
	hx_start(x, "/t");
	assert_int_equal(hx_send(x), 0);
	assert_int_equal(x->resp.status, 204);
	assert_int_equal(x->resp.body.len, 0);
	assert_null(ecw_response_header(&x->resp, "X-Interim"));
	assert_str(ecw_response_header(&x->resp, "ETag"), "e");
	/* 204 has no body, so the next answer is read from the same stream. */
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "hello");
	hx_free(x);
}

/* HEAD: the Content-Length describes a body that is not sent. */
static void test_http__head_reads_no_body(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nx-ms-approximate-messages-count: 7\r\n\r\n",
	       false);
	script(x, OK_HELLO, false);
	hx_start(x, "/q");
	x->r.method = "HEAD";
	assert_int_equal(hx_send(x), 0);
	assert_int_equal(x->resp.body.len, 0);
	assert_str(ecw_response_header(&x->resp, "x-ms-approximate-messages-count"), "7");
	x->r.method = "GET";
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "hello");
	assert_int_equal(ecw_http_connections(x->h), 1);
	hx_free(x);
}

/* Neither length nor chunks: the body is what comes until the close. */
static void test_http__body_until_close(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x, "HTTP/1.1 200 OK\r\n\r\nall of it", true);
	script(x, OK_HELLO, false);
	hx_start(x, "/t");
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "all of it");
	assert_int_equal(hx_send(x), 0);
	assert_int_equal(ecw_http_connections(x->h), 2);
	hx_free(x);
}

/* Connection: close, and an HTTP/1.0 answer without keep-alive, end the
 * connection; the next request opens another. */
static void test_http__close_honoured(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	/* The server keeps both open: only the client's own close makes the
	 * third request come on a new connection. */
	script(x, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\na", false);
	script(x, "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nb", false);
	script(x, OK_HELLO, false);
	hx_start(x, "/t");
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "a");
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "b");
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "hello");
	assert_int_equal(ecw_http_connections(x->h), 3);
	hx_free(x);
}

/* The server drops a kept connection without saying so (as idle ones are
 * dropped): the request goes again, once, on a new connection. */
static void test_http__dropped_kept_connection_reopened(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x, OK_HELLO, true); /* no Connection: close, but closed */
	script(x, OK_HELLO, false);
	hx_start(x, "/t");
	assert_int_equal(hx_send(x), 0);
	usleep(50 * 1000); /* the close has arrived */
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "hello");
	assert_int_equal(ecw_http_connections(x->h), 2);
	assert_int_equal(x->s.nreq, 2);
	hx_free(x);
}

/* A server that never answers: a timeout after timeout_ms, the connection
 * closed (its state is unknown). */
static void test_http__no_answer_times_out(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	x->o.timeout_ms = 300;
	script(x, NULL, false);
	script(x, OK_HELLO, false);
	hx_start(x, "/t");
	assert_int_equal(hx_send(x), ECW_ETIMEOUT);
	assert_non_null(strstr(x->why, "timed out after 300 ms"));
	assert_int_equal(x->resp.status, 0);
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "hello");
	assert_int_equal(ecw_http_connections(x->h), 2);
	hx_free(x);
}

/* Waits follow the request's deadline, not a fixed timeout: the first
 * answer's first half comes after 400 ms and its second half 50 ms later;
 * the second answer comes after 800 ms, within the 1,000 ms a request has,
 * and must be read. */
static void test_http__socket_timeout_is_not_the_deadline(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	x->o.timeout_ms = 1000;
	x->o.connect_timeout_ms = 1000;
	script(x, OK_HELLO, false);
	x->s.delay_ms[0] = 400;
	x->s.split_ms[0] = 50;
	script(x, OK_HELLO, false);
	x->s.delay_ms[1] = 800;
	hx_start(x, "/t");
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "hello");
	if (hx_send(x) != 0)
		fail_msg("the second request failed: %s", x->why);
	assert_body(x, "hello");
	assert_int_equal(ecw_http_connections(x->h), 1);
	hx_free(x);
}

/* An answer cut short is a transient failure, not a short body. */
static void test_http__truncated_body_fails(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", true);
	hx_start(x, "/t");
	assert_int_equal(hx_send(x), ECW_ETRANSIENT);
	assert_non_null(strstr(x->why, "connection closed in the answer's body"));
	hx_free(x);
}

/* A body over the response's cap: ECW_ETOOLARGE, before reading it, the
 * message naming the cap and the request's kind. */
static void test_http__too_large(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", true);
	hx_start(x, "/t");
	x->resp.body.max = 10;
	x->r.op = "table.get";
	assert_int_equal(hx_send(x), ECW_ETOOLARGE);
	assert_str(x->why, "an answer over the 10-byte cap for table.get");
	hx_free(x);
}

static void test_http__malformed_answers(void **state)
{
	static const char *const bad[] = {
	    "HTTP/2 200 OK\r\n\r\n",
	    "SSH-2.0-OpenSSH\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
	    "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	    "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct hx *x = hx_new();

		script(x, bad[i], true);
		hx_start(x, "/t");
		assert_int_equal(hx_send(x), ECW_ETRANSIENT);
		assert_true(x->why[0] != '\0');
		hx_free(x);
	}
}

/* A NUL in the head is refused (RFC 9110 5.5): kept, it cut the stored
 * header short and hid the ones after it, Transfer-Encoding among them
 * (found by fuzz_http_answer). Read off a socket pair: the scripted server
 * sends C strings. */
static void test_http__nul_in_headers_refused(void **state)
{
	static const char answer[] = "HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 2\r\n\r\nok";
	struct ecw_response resp;
	char why[128];
	bool closes;
	size_t left;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[0], answer, sizeof(answer) - 1), (ssize_t)(sizeof(answer) - 1));
	shutdown(sv[0], SHUT_WR);
	ecw_response_init(&resp);
	assert_int_equal(ecw_http_read_fd(&resp, sv[1], false, 1000, &closes, &left, why, sizeof(why)),
	                 ECW_ETRANSIENT);
	assert_string_equal(why, "an answer with a NUL byte in its headers");
	ecw_response_dispose(&resp);
	close(sv[0]);
	close(sv[1]);
}

/* A header value with a line break would smuggle a header: refused before
 * anything is sent. */
static void test_http__header_injection_refused(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x, OK_HELLO, false);
	hx_start(x, "/t");
	assert_int_equal(ecw_request_set_header(&x->r, "x-ms-meta", "a\r\nAuthorization: b"), 0);
	assert_int_equal(hx_send(x), ECW_EINVALID);
	assert_int_equal(ecw_http_connections(x->h), 0);
	/* Let the server thread finish its script. */
	ecw_request_dispose(&x->r);
	ecw_request_init(&x->r, ECW_SVC_TABLE, "GET");
	assert_int_equal(hx_send(x), 0);
	hx_free(x);
}

static void test_http__refused_connection(void **state)
{
	struct hx *x = hx_new();
	(void)state;

	script(x, OK_HELLO, false);
	hx_start(x, "/t");
	assert_int_equal(hx_send(x), 0);
	snprintf(x->url, sizeof(x->url), "http://127.0.0.1:1/t");
	assert_int_equal(hx_send(x), ECW_ETRANSIENT);
	assert_non_null(strstr(x->why, "connecting to 127.0.0.1 port 1: Connection refused"));
	hx_free(x);
}

/* What the URL is read as: an IPv6 host without its brackets, the port, and
 * clear refusals of what is not an http(s) URL with a host. */
static void test_http__url_forms(void **state)
{
	static const struct {
		const char *url, *why;
	} bad[] = {
	    {"ftp://127.0.0.1/t", "not an http or https URL"},
	    {"http:///t", "a URL without a host"},
	    {"http://user@127.0.0.1/t", "with user information"},
	    {"http://[::1/t", "a URL with an unclosed ["},
	    {"http://127.0.0.1:8x/t", "a URL with a bad port"},
	    {"http://127.0.0.1:123456789/t", "a URL with a bad port"},
	};
	struct hx *x = hx_new();
	char host[300];
	(void)state;

	hx_start(x, "/t");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(x->url, sizeof(x->url), "%s", bad[i].url);
		assert_int_equal(hx_send(x), ECW_EINVALID);
		if (!strstr(x->why, bad[i].why))
			fail_msg("%s: \"%s\", want \"%s\"", bad[i].url, x->why, bad[i].why);
	}
	memset(host, 'h', sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	for (int v6 = 0; v6 < 2; v6++) {
		char *url = malloc(sizeof(host) + 32);
		assert_non_null(url);
		snprintf(url, sizeof(host) + 32, v6 ? "http://[%s]:80/t" : "http://%s/t", host);
		assert_int_equal(ecw_http_send(x->h, &x->resp, url, &x->r, x->why, sizeof(x->why)),
		                 ECW_EINVALID);
		assert_non_null(strstr(x->why, "a URL whose host is too long"));
		free(url);
	}
	/* The brackets are not part of the host (the address may be missing
	 * here: what matters is what was connected to). */
	snprintf(x->url, sizeof(x->url), "http://[::1]:1/t");
	assert_int_equal(hx_send(x), ECW_ETRANSIENT);
	if (!strstr(x->why, "connecting to ::1 port 1: "))
		fail_msg("got \"%s\"", x->why);
	assert_int_equal(x->s.nreq, 0);
	hx_free(x);
}

/* Two origins on one transport: each keeps its own connection. */
static void test_http__a_connection_per_origin(void **state)
{
	struct hx *x = hx_new(), *y = hx_new();
	char url_x[128];
	(void)state;

	script(x, OK_HELLO, false);
	script(x, OK_HELLO, false);
	script(y, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\ny", false);
	script(y, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\ny", false);
	hx_start(x, "/a");
	srv_start(&y->s);
	snprintf(url_x, sizeof(url_x), "%s", x->url);
	snprintf(y->url, sizeof(y->url), "http://127.0.0.1:%d/b", y->s.port);
	for (int i = 0; i < 2; i++) {
		snprintf(x->url, sizeof(x->url), "%s", url_x);
		assert_int_equal(hx_send(x), 0);
		assert_body(x, "hello");
		snprintf(x->url, sizeof(x->url), "%s", y->url);
		assert_int_equal(hx_send(x), 0);
		assert_body(x, "y");
	}
	assert_int_equal(ecw_http_connections(x->h), 2);
	srv_stop(&y->s);
	assert_int_equal(y->s.accepts, 1);
	ecw_request_dispose(&y->r);
	ecw_response_dispose(&y->resp);
	free(y);
	hx_free(x);
}

/* The name svc.test, for the lookup below: the address it has now. */
static _Atomic uint32_t svc_addr;

static int svc_lookup(const char *host, const char *port, const struct addrinfo *hints, struct addrinfo **res)
{
	char a[INET_ADDRSTRLEN];
	struct in_addr in = {htonl(atomic_load(&svc_addr))};

	if (strcmp(host, "svc.test") != 0)
		return getaddrinfo(host, port, hints, res);
	inet_ntop(AF_INET, &in, a, sizeof(a));
	return getaddrinfo(a, port, hints, res);
}

/* A name is looked up once for the connections of every transport; when
 * its addresses move (an account's failover) and the kept one refuses, the
 * name is looked up again at once and the request goes to the new address
 * without failing. */
static void test_http__names_looked_up_once_and_again_when_moved(void **state)
{
	struct hx *x = hx_new(), *y = hx_new();
	struct ecw_http *h2;
	uint64_t before;
	(void)state;

	ecw_resolve_flush();
	ecw_resolve_set_lookup(svc_lookup);
	atomic_store(&svc_addr, INADDR_LOOPBACK);
	script(x, OK_HELLO, false);
	script(x, OK_HELLO, false);
	hx_start(x, "/t");
	snprintf(x->url, sizeof(x->url), "http://svc.test:%d/t", x->s.port);
	assert_int_equal(ecw_http_new(&h2, &x->o), 0);
	before = ecw_resolve_lookups();
	assert_int_equal(hx_send(x), 0);
	ecw_http_close_all(x->h); /* the server serves one connection at a time */
	ecw_response_reset(&x->resp);
	assert_int_equal(ecw_http_send(h2, &x->resp, x->url, &x->r, x->why, sizeof(x->why)), 0);
	assert_body(x, "hello");
	assert_int_equal(ecw_resolve_lookups() - before, 1);
	assert_int_equal(x->s.accepts, 2);

	/* The service moves to 127.0.0.2, same port; the old address refuses. */
	ecw_http_close_all(x->h);
	ecw_http_close_all(h2);
	srv_stop(&x->s);
	y->s.bind_addr = INADDR_LOOPBACK + 1;
	y->s.bind_port = x->s.port;
	script(y, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nmoved", false);
	script(y, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nmoved", false);
	srv_start(&y->s);
	atomic_store(&svc_addr, INADDR_LOOPBACK + 1);
	assert_int_equal(hx_send(x), 0);
	assert_body(x, "moved");
	assert_int_equal(ecw_resolve_lookups() - before, 2);
	ecw_http_close_all(x->h);
	ecw_response_reset(&x->resp);
	assert_int_equal(ecw_http_send(h2, &x->resp, x->url, &x->r, x->why, sizeof(x->why)), 0);
	assert_body(x, "moved");
	assert_int_equal(ecw_resolve_lookups() - before, 2);

	/* Gone for good: the request fails, saying where it tried. */
	ecw_http_close_all(x->h);
	ecw_http_free(h2);
	srv_stop(&y->s);
	assert_int_equal(hx_send(x), ECW_ETRANSIENT);
	char want[96];
	snprintf(want, sizeof(want), "connecting to svc.test port %d: Connection refused", x->s.port);
	if (!strstr(x->why, want))
		fail_msg("got \"%s\"", x->why);
	ecw_request_dispose(&y->r);
	ecw_response_dispose(&y->resp);
	free(y);
	hx_free(x);
	ecw_resolve_set_lookup(NULL);
	ecw_resolve_flush();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_http__request_on_the_wire),
	    cmocka_unit_test(test_http__lengths_by_method),
	    cmocka_unit_test(test_http__content_length_answer),
	    cmocka_unit_test(test_http__no_read_before_the_answer_can_come),
	    cmocka_unit_test(test_http__answer_a_byte_at_a_time),
	    cmocka_unit_test(test_http__chunked_with_trailer),
	    cmocka_unit_test(test_http__interim_answer_skipped),
	    cmocka_unit_test(test_http__head_reads_no_body),
	    cmocka_unit_test(test_http__body_until_close),
	    cmocka_unit_test(test_http__close_honoured),
	    cmocka_unit_test(test_http__dropped_kept_connection_reopened),
	    cmocka_unit_test(test_http__no_answer_times_out),
	    cmocka_unit_test(test_http__socket_timeout_is_not_the_deadline),
	    cmocka_unit_test(test_http__truncated_body_fails),
	    cmocka_unit_test(test_http__too_large),
	    cmocka_unit_test(test_http__malformed_answers),
	    cmocka_unit_test(test_http__nul_in_headers_refused),
	    cmocka_unit_test(test_http__header_injection_refused),
	    cmocka_unit_test(test_http__refused_connection),
	    cmocka_unit_test(test_http__url_forms),
	    cmocka_unit_test(test_http__a_connection_per_origin),
	    cmocka_unit_test(test_http__names_looked_up_once_and_again_when_moved),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
