/* SPDX-License-Identifier: MIT */
/* test_transport.c - the client's transports (http.c, and libcurl when a
 * proxy is set) against a hostile or hung endpoint on a loopback port (a
 * thread here): memory stays bounded whatever the endpoint sends (a body to
 * the close, one giant chunk, many chunks, a huge Content-Length: each
 * fails naming the cap and the request's kind, and a forked child doing the
 * request peaks well under 40 MB while the server offers 400 MB), a large
 * answer within its cap still works and leaves no big buffer behind, and a
 * cancellation (fired, or its deadline) ends every wait at once: an answer
 * that never comes, a connect that never completes, a retry's backoff. */
#include "support.h"

#include "ecw_clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1024 * 1024)
#define OFFERED ((size_t)400 * MiB) /* what a hostile server offers */

static const char dev_key[] =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/* Real time, whatever the wrapped ecw_clock_now_ms does. */
static int64_t real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void real_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* ---- the server --------------------------------------------------------------------------------- */

enum shape {
	SHAPE_SILENT,      /* reads the request, never answers */
	SHAPE_TO_CLOSE,    /* no length: the body runs to the close */
	SHAPE_ONE_CHUNK,   /* chunked, one chunk of all of it */
	SHAPE_MANY_CHUNKS, /* chunked, 64 KiB chunks */
	SHAPE_LENGTH,      /* Content-Length: all of it */
	SHAPE_BIG_HEAD,    /* 60 KiB of headers, then "ok" */
};

struct srv {
	int lfd, port;
	pthread_t th;
	enum shape shape;
	size_t total; /* body bytes offered */
	int backlog;  /* listen's */
	bool no_accept;
};

static bool read_head(int fd)
{
	char buf[8192];
	size_t len = 0;

	for (;;) {
		ssize_t k = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (k <= 0)
			return false;
		len += (size_t)k;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			return true;
		if (len == sizeof(buf) - 1)
			return false;
	}
}

static bool send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

/* Sends the answer until all is sent or the client has gone. */
static void serve(const struct srv *s, int fd)
{
	static char block[64 * 1024];
	char head[256];
	bool chunked = s->shape == SHAPE_ONE_CHUNK || s->shape == SHAPE_MANY_CHUNKS;

	memset(block, 'x', sizeof(block));
	if (s->shape == SHAPE_BIG_HEAD) {
		size_t n = 0;

		n += (size_t)snprintf(block, sizeof(block), "HTTP/1.1 200 OK\r\n");
		while (n < 60 * 1024)
			n += (size_t)snprintf(block + n, sizeof(block) - n, "X-Filler: %0100d\r\n", 0);
		n += (size_t)snprintf(block + n, sizeof(block) - n, "Content-Length: 2\r\n\r\nok");
		/* In three parts (40 KiB, 10 KiB, the rest), so that the
		 * reader's buffer steps past 64 KiB to hold it. */
		static const size_t cut[] = {0, 40 * 1024, 50 * 1024};
		for (int i = 0; i < 3; i++) {
			size_t end = i < 2 ? cut[i + 1] : n;
			if (i)
				real_sleep_ms(30);
			if (!send_all(fd, block + cut[i], end - cut[i]))
				return;
		}
		while (recv(fd, head, sizeof(head), 0) > 0)
			;
		return;
	}
	if (s->shape == SHAPE_SILENT) {
		while (recv(fd, head, sizeof(head), 0) > 0)
			;
		return;
	}
	snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%s",
	         s->shape == SHAPE_TO_CLOSE ? "\r\n"
	         : chunked                  ? "Transfer-Encoding: chunked\r\n\r\n"
	                                    : "");
	if (s->shape == SHAPE_LENGTH)
		snprintf(head + strlen(head), sizeof(head) - strlen(head), "Content-Length: %zu\r\n\r\n",
		         s->total);
	if (s->shape == SHAPE_ONE_CHUNK)
		snprintf(head + strlen(head), sizeof(head) - strlen(head), "%zx\r\n", s->total);
	if (!send_all(fd, head, strlen(head)))
		return;
	for (size_t sent = 0; sent < s->total; sent += sizeof(block)) {
		char size[16];

		snprintf(size, sizeof(size), "%zx\r\n", sizeof(block));
		if (s->shape == SHAPE_MANY_CHUNKS && !send_all(fd, size, strlen(size)))
			return;
		if (!send_all(fd, block, sizeof(block)))
			return;
		if (s->shape == SHAPE_MANY_CHUNKS && !send_all(fd, "\r\n", 2))
			return;
	}
	if (s->shape == SHAPE_ONE_CHUNK)
		send_all(fd, "\r\n0\r\n\r\n", 7);
	else if (s->shape == SHAPE_MANY_CHUNKS)
		send_all(fd, "0\r\n\r\n", 5);
}

static void *srv_main(void *arg)
{
	struct srv *s = arg;
	int fd;

	while ((fd = accept(s->lfd, NULL, NULL)) >= 0) {
		if (read_head(fd))
			serve(s, fd);
		close(fd);
	}
	return NULL;
}

static void srv_start(struct srv *s, enum shape shape, size_t total)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);

	s->shape = shape;
	s->total = total;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true((s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->lfd, s->backlog ? s->backlog : 8), 0);
	assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &alen), 0);
	s->port = ntohs(a.sin_port);
	if (!s->no_accept)
		assert_int_equal(pthread_create(&s->th, NULL, srv_main, s), 0);
}

static void srv_stop(struct srv *s)
{
	shutdown(s->lfd, SHUT_RDWR);
	if (!s->no_accept)
		pthread_join(s->th, NULL);
	close(s->lfd);
}

/* ---- the client ------------------------------------------------------------------------------- */

struct cx {
	struct ecw_account *acct;
	struct ecw_client *c;
};

/* A client of an account whose endpoints are port; through libcurl when
 * proxy_port is not 0 (the server there plays the proxy: it answers a
 * proxied request as any other). */
static void cx_new(struct cx *x, int port, int proxy_port, const struct ecw_client_options *o)
{
	char cs[512], proxy[64];

	snprintf(cs, sizeof(cs),
	         "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=%s;"
	         "QueueEndpoint=http://127.0.0.1:%d/devstoreaccount1;"
	         "TableEndpoint=http://127.0.0.1:%d/devstoreaccount1",
	         dev_key, port, port);
	assert_int_equal(ecw_account_parse(&x->acct, cs), 0);
	unsetenv("no_proxy");
	unsetenv("NO_PROXY");
	if (proxy_port) {
		snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", proxy_port);
		setenv("http_proxy", proxy, 1);
	}
	assert_int_equal(ecw_client_new(&x->c, x->acct, o), 0);
	unsetenv("http_proxy");
}

static void cx_free(struct cx *x)
{
	ecw_client_free(x->c);
	ecw_account_free(x->acct);
}

/* ---- bounded memory ------------------------------------------------------------------------------ */

static long status_kb(const char *field)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, strlen(field)) == 0)
			kb = strtol(line + strlen(field), NULL, 10);
	fclose(f);
	return kb;
}

struct outcome {
	int err;
	long rss_before_kb, peak_kb;
	char message[512];
};

/* In a forked child, so its peak RSS is this request's alone: a server of
 * the shape offering 400 MB, and one call of the kind (a table get, or a
 * queue receive) through http.c or libcurl. */
static void request_in_child(struct outcome *out, enum shape shape, bool queue, bool curl)
{
	static const struct ecw_client_options opts = {1,    0,    0,    20000, 5000, false,
	                                               NULL, NULL, NULL, NULL,  false};
	int pipefd[2], status;
	pid_t pid;

	assert_int_equal(pipe(pipefd), 0);
	assert_true((pid = fork()) >= 0);
	if (pid == 0) {
		struct outcome o = {0};
		struct srv s = {0};
		struct cx x;

		close(pipefd[0]);
		srv_start(&s, shape, OFFERED);
		cx_new(&x, s.port, curl ? s.port : 0, &opts);
		o.rss_before_kb = status_kb("VmRSS:");
		if (queue) {
			struct ecw_queue_msg *msgs = NULL;
			size_t n = 0;

			o.err = ecw_queue_receive(&msgs, &n, x.c, "jobs", 32, 30);
			ecw_queue_msgs_free(msgs, n);
		} else {
			struct ecw_entity *e = NULL;

			o.err = ecw_table_get(&e, x.c, "Things", "p", "r");
			ecw_entity_free(e);
		}
		o.peak_kb = status_kb("VmHWM:");
		snprintf(o.message, sizeof(o.message), "%s", ecw_error_last()->message);
		cx_free(&x);
		srv_stop(&s);
		if (write(pipefd[1], &o, sizeof(o)) != (ssize_t)sizeof(o))
			_exit(2);
		_exit(0);
	}
	close(pipefd[1]);
	assert_int_equal(read(pipefd[0], out, sizeof(*out)), (ssize_t)sizeof(*out));
	close(pipefd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* AddressSanitizer, or valgrind (make valgrind runs the tests through
 * ECW_TEST_WRAPPER): freed blocks wait in the tool's quarantine instead of
 * being reused, and valgrind's own memory is in the RSS. */
static bool under_memory_tool(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return true;
#else
	const char *wrapper = getenv("ECW_TEST_WRAPPER");
	return wrapper && *wrapper;
#endif
}

/* One request in a child (request_in_child) must fail with ECW_ETOOLARGE
 * and the message want. The peak must stay under 40 MB: asserted on the child's own growth (the
 * binary and cmocka start at a few MB), and on the whole when not sanitized.
 * Under a memory tool (under_memory_tool) a buffer that grew by doubling
 * counts every size it had: there the growth must only stay well below the
 * 400 MB the server offers. */
static void assert_bounded(enum shape shape, bool queue, bool curl, const char *want)
{
	struct outcome out, *o = &out;

	request_in_child(o, shape, queue, curl);
	if (o->err != ECW_ETOOLARGE || !strstr(o->message, want))
		fail_msg("got %s \"%s\", want ECW_ETOOLARGE with \"%s\"", ecw_error_name(o->err), o->message,
		         want);
	print_message("      peak RSS %ld kB (%ld kB before the request)\n", o->peak_kb, o->rss_before_kb);
	if (!under_memory_tool()) {
		assert_true(o->peak_kb - o->rss_before_kb < 32 * 1024);
		assert_true(o->peak_kb < 40 * 1024);
	} else {
		assert_true(o->peak_kb - o->rss_before_kb < 128 * 1024);
	}
}

static void test_transport__body_to_close_capped(void **state)
{
	(void)state;
	assert_bounded(SHAPE_TO_CLOSE, false, false, "an answer over the 8 MiB cap for table.get");
}

static void test_transport__one_giant_chunk_capped(void **state)
{
	(void)state;
	assert_bounded(SHAPE_ONE_CHUNK, false, false, "an answer over the 8 MiB cap for table.get");
}

static void test_transport__many_chunks_capped(void **state)
{
	(void)state;
	assert_bounded(SHAPE_MANY_CHUNKS, true, false, "an answer over the 16 MiB cap for queue.receive");
}

static void test_transport__huge_content_length_capped(void **state)
{
	(void)state;
	assert_bounded(SHAPE_LENGTH, true, false, "an answer over the 16 MiB cap for queue.receive");
}

/* libcurl (a proxied client): the same caps, the same message. */
static void test_transport__curl_capped(void **state)
{
	static const enum shape shapes[] = {SHAPE_TO_CLOSE, SHAPE_MANY_CHUNKS, SHAPE_LENGTH};
	(void)state;

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		assert_bounded(shapes[i], false, true, "an answer over the 8 MiB cap for table.get");
}

/* A GET through http.c alone of a server of the shape offering total bytes,
 * its answer's cap that of op: read whole, and afterwards the connection
 * holds no input buffer over 64 KiB. */
static void get_within_cap(enum shape shape, size_t total, const char *op, size_t want_len)
{
	static const struct ecw_client_options opts = {1,    0,    0,    20000, 5000, false,
	                                               NULL, NULL, NULL, NULL,  false};
	struct srv s = {0};
	struct ecw_http *h;
	struct ecw_response resp;
	struct ecw_request r;
	char url[96], why[256];

	srv_start(&s, shape, total);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/t", s.port);
	assert_int_equal(ecw_http_new(&h, &opts), 0);
	ecw_response_init(&resp);
	ecw_request_init(&r, ECW_SVC_TABLE, "GET");
	r.op = op;
	resp.body.max = ecw_response_cap(r.op);
	if (ecw_http_send(h, &resp, url, &r, why, sizeof(why)) != 0)
		fail_msg("shape %d: %s", (int)shape, why);
	assert_int_equal(resp.status, 200);
	assert_int_equal(resp.body.len, want_len);
	assert_int_equal(ecw_http_connections(h), 1);
	assert_true(ecw_http_buffered(h) <= 64 * 1024);
	ecw_http_free(h);
	srv_stop(&s);
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
}

/* A large answer within its cap is read whole, in every framing, and the
 * connection keeps no big buffer after it. */
static void test_transport__allowed_answer_read_and_buffer_let_go(void **state)
{
	static const enum shape shapes[] = {SHAPE_LENGTH, SHAPE_ONE_CHUNK, SHAPE_MANY_CHUNKS, SHAPE_TO_CLOSE};
	(void)state;

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		get_within_cap(shapes[i], 6 * MiB, "table.get", 6 * MiB);
}

/* A head that grows the input buffer past 64 KiB (headers just under the
 * head's cap): the buffer is let go after the exchange. */
static void test_transport__big_head_buffer_let_go(void **state)
{
	(void)state;
	get_within_cap(SHAPE_BIG_HEAD, 0, NULL, 2);
}

/* ---- cancellation ------------------------------------------------------------------------------------ */

struct firing {
	struct ecw_cancel *cancel;
	int after_ms;
	pthread_t th;
};

static void *fire_later(void *arg)
{
	struct firing *f = arg;

	real_sleep_ms(f->after_ms);
	ecw_cancel_fire(f->cancel);
	return NULL;
}

/* Long timeouts and backoff, so only the cancellation can end the call
 * within a second. */
static struct ecw_client_options patient(const struct ecw_cancel *cancel)
{
	struct ecw_client_options o = ECW_CLIENT_OPTIONS_INIT;

	o.max_tries = 4;
	o.retry_base_ms = 5000;
	o.retry_max_ms = 5000;
	o.timeout_ms = 30000;
	o.connect_timeout_ms = 30000;
	o.cancel = cancel;
	return o;
}

/* A get through a client of port (through libcurl when curl), its
 * cancellation fired after 200 ms or (fire false) due by a deadline 300 ms
 * ahead: it must end with ECW_ECANCELED within a second of that. */
static void get_cancelled(int port, bool curl, bool fire, const char *want)
{
	struct ecw_cancel *cancel;
	struct firing f = {.after_ms = 200};
	struct ecw_entity *e = NULL;
	struct ecw_client_options o;
	struct cx x;
	int64_t start, took;
	int err;

	assert_int_equal(ecw_cancel_new(&cancel), 0);
	o = patient(cancel);
	cx_new(&x, port, curl ? port : 0, &o);
	f.cancel = cancel;
	start = real_ms();
	if (fire)
		assert_int_equal(pthread_create(&f.th, NULL, fire_later, &f), 0);
	else
		ecw_cancel_set_deadline(cancel, ecw_clock_now_ms() + 300);
	err = ecw_table_get(&e, x.c, "Things", "p", "r");
	took = real_ms() - start;
	if (fire)
		pthread_join(f.th, NULL);
	if (err != ECW_ECANCELED || !strstr(ecw_error_last()->message, want))
		fail_msg("got %s \"%s\" after %lld ms, want ECW_ECANCELED with \"%s\"", ecw_error_name(err),
		         ecw_error_last()->message, (long long)took, want);
	print_message("      ended %lld ms after the start\n", (long long)took);
	assert_true(took < (fire ? 200 : 300) + 500);
	cx_free(&x);
	ecw_cancel_free(cancel);
}

/* An answer that never comes: the wait for it ends at once. */
static void test_transport__cancel_ends_wait_for_answer(void **state)
{
	struct srv s = {0};
	(void)state;

	srv_start(&s, SHAPE_SILENT, 0);
	get_cancelled(s.port, false, true, "the worker is stopping");
	get_cancelled(s.port, false, false, "the worker is stopping");
	srv_stop(&s);
}

/* libcurl's wait (its progress callback) ends too, within its second. */
static void test_transport__cancel_ends_curl_wait(void **state)
{
	struct srv s = {0};
	(void)state;

	srv_start(&s, SHAPE_SILENT, 0);
	get_cancelled(s.port, true, true, "the worker is stopping");
	get_cancelled(s.port, true, false, "the worker is stopping");
	srv_stop(&s);
}

/* A connect that never completes: a listener that accepts nothing, its
 * backlog filled, drops further SYNs, so the connect hangs. */
static void test_transport__cancel_ends_connect(void **state)
{
	struct srv s = {.backlog = 1, .no_accept = true};
	struct sockaddr_in a;
	int fill[4];
	(void)state;

	srv_start(&s, SHAPE_SILENT, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)s.port);
	for (int i = 0; i < 4; i++) {
		assert_true((fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) >= 0);
		(void)connect(fill[i], (struct sockaddr *)&a, sizeof(a));
	}
	real_sleep_ms(50);
	get_cancelled(s.port, false, true, "connecting to 127.0.0.1");
	get_cancelled(s.port, false, false, "connecting to 127.0.0.1");
	for (int i = 0; i < 4; i++)
		close(fill[i]);
	srv_stop(&s);
}

/* A refused port: the attempts fail at once and the client backs off for
 * up to 5 s, 10 s, 20 s; the cancellation ends the backoff. */
static void test_transport__cancel_ends_retry_backoff(void **state)
{
	struct srv s = {0};
	int port;
	(void)state;

	srv_start(&s, SHAPE_SILENT, 0);
	port = s.port;
	srv_stop(&s); /* nothing listens there now */
	sleeps_reset();
	get_cancelled(port, false, true, "the worker is stopping");
	get_cancelled(port, false, false, "the worker is stopping");
	assert_int_equal(sleeps_count(), 0); /* a client with a cancellation sleeps on it */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_transport__body_to_close_capped),
	    cmocka_unit_test(test_transport__one_giant_chunk_capped),
	    cmocka_unit_test(test_transport__many_chunks_capped),
	    cmocka_unit_test(test_transport__huge_content_length_capped),
	    cmocka_unit_test(test_transport__curl_capped),
	    cmocka_unit_test(test_transport__allowed_answer_read_and_buffer_let_go),
	    cmocka_unit_test(test_transport__big_head_buffer_let_go),
	    cmocka_unit_test(test_transport__cancel_ends_wait_for_answer),
	    cmocka_unit_test(test_transport__cancel_ends_curl_wait),
	    cmocka_unit_test(test_transport__cancel_ends_connect),
	    cmocka_unit_test(test_transport__cancel_ends_retry_backoff),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
