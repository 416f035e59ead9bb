/* SPDX-License-Identifier: MIT */
/* test_pipeline.c - pipelined requests: a group's message deletes through
 * ecw_queue_delete_many, the client's ecw_client_send_pipelined and http.c's
 * ecw_http_send_pipelined, against a scripted server on a loopback port (a
 * thread here) that holds its answers until the requests it waits for have
 * come. Shown: the deletes come in one write, before any answer, each
 * signed, and their answers are read in order whatever their status; a
 * delete that cannot be made is told first and alone; a server that closes
 * after an answer, or a kept connection it dropped, costs a new connection
 * and nothing else; a server that leaves an answer out until the timeout
 * has the rest sent again one at a time and stops pipelining for the
 * process; storage.pipelining: false sends each alone; and what may not be
 * pipelined (bodies over the bound, HEAD, two origins) is refused; a group
 * refused for a SAS that the account's reload then replaces goes again,
 * each alone, with the new one. Blob puts (ecw_blob_put_many) go with their
 * bodies in the one write, a 409 among them their own; a connection closed
 * or an oversized answer in the middle sends the unanswered ones again
 * alone; bodies over the bound are split over writes. */
#include "support.h"

#include "client.h"
#include "http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char dev_key[] =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

#define NO_CONTENT "HTTP/1.1 204 No Content\r\nx-ms-request-id: r\r\n\r\n"
#define NO_CONTENT_CLOSE "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
#define NOT_FOUND_BODY                                                                                       \
	"\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>MessageNotFound</Code>"          \
	"<Message>The specified message does not exist.</Message></Error>"
#define NOT_FOUND                                                                                            \
	"HTTP/1.1 404 The specified message does not exist.\r\nx-ms-error-code: MessageNotFound\r\n"         \
	"Content-Type: application/xml\r\nContent-Length: 140\r\n\r\n" NOT_FOUND_BODY

/* ---- the scripted server ---------------------------------------------------------------------- */

#define CONNS_MAX 4
#define ANSWERS_MAX 8

/* What the server does on its i-th accepted connection: wait until `gather`
 * request heads have come (or a second has passed), send answers
 * [0, gather) in one write, then answer each further request as it comes
 * with the next answer. An answer "" is none. Once the answers are used up
 * it closes, or (hold) reads on until the client closes. */
struct conn_script {
	int gather;
	const char *answers[ANSWERS_MAX];
	bool hold;
};

struct psrv {
	int lfd, port;
	pthread_t th;
	struct conn_script conn[CONNS_MAX];
	int nconn;
	/* What it saw on each connection: heads before its first answer, and
	 * every byte of the requests. */
	int heads_first[CONNS_MAX];
	int most_waiting[CONNS_MAX]; /* most heads unanswered at an answer after the first */
	char seen[CONNS_MAX][320 * 1024];
	size_t seen_len[CONNS_MAX];
};

static int count_heads(const char *p, size_t n)
{
	int heads = 0;

	for (size_t i = 0; i + 3 < n; i++)
		if (memcmp(p + i, "\r\n\r\n", 4) == 0)
			heads++;
	return heads;
}

/* Reads what comes within ms into the connection's record; false at the
 * client's close. */
static bool read_more(struct psrv *s, int c, int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	size_t room = sizeof(s->seen[c]) - 1 - s->seen_len[c];
	ssize_t k;

	if (poll(&p, 1, ms) <= 0)
		return true;
	if ((k = recv(fd, s->seen[c] + s->seen_len[c], room, 0)) <= 0)
		return false;
	s->seen_len[c] += (size_t)k;
	s->seen[c][s->seen_len[c]] = '\0';
	return true;
}

static void send_answer(int fd, const char *a)
{
	if (a && *a)
		(void)send(fd, a, strlen(a), MSG_NOSIGNAL);
}

static void serve(struct psrv *s, int c, int fd)
{
	const struct conn_script *cs = &s->conn[c];
	int answered = 0;
	char both[8192] = "";

	for (int waited = 0; count_heads(s->seen[c], s->seen_len[c]) < cs->gather && waited < 1000;
	     waited += 10)
		if (!read_more(s, c, fd, 10))
			return;
	s->heads_first[c] = count_heads(s->seen[c], s->seen_len[c]);
	for (; answered < cs->gather && cs->answers[answered]; answered++)
		strncat(both, cs->answers[answered], sizeof(both) - strlen(both) - 1);
	send_answer(fd, both);
	while (answered < ANSWERS_MAX && cs->answers[answered]) {
		int waiting;
		while ((waiting = count_heads(s->seen[c], s->seen_len[c]) - answered) <= 0)
			if (!read_more(s, c, fd, 1000))
				return;
		(void)read_more(s, c, fd, 20); /* a pipelined rest would be here by now */
		waiting = count_heads(s->seen[c], s->seen_len[c]) - answered;
		if (waiting > s->most_waiting[c])
			s->most_waiting[c] = waiting;
		send_answer(fd, cs->answers[answered++]);
	}
	while (cs->hold && read_more(s, c, fd, 1000))
		;
}

static void *srv_main(void *arg)
{
	struct psrv *s = arg;

	for (int c = 0; c < s->nconn; c++) {
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			break;
		serve(s, c, fd);
		close(fd);
	}
	return NULL;
}

static void srv_start(struct psrv *s)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true((s->lfd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->lfd, 8), 0);
	assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &alen), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->th, NULL, srv_main, s), 0);
}

static void srv_stop(struct psrv *s)
{
	shutdown(s->lfd, SHUT_RDWR);
	pthread_join(s->th, NULL);
	close(s->lfd);
}

/* ---- the client ------------------------------------------------------------------------------- */

struct px {
	struct psrv s;
	struct ecw_account *acct;
	struct ecw_client *c;
	struct ecw_client_options o;
	struct ecw_queue_delete_item items[8];
	struct ecw_blob_put_item puts[8];
	size_t order[8], told; /* the items in the order deleted() or put() heard of them */
};

static struct px *px_new(void)
{
	static const struct ecw_client_options opts = ECW_CLIENT_OPTIONS_INIT;
	struct px *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	x->o = opts;
	x->o.retry_base_ms = x->o.retry_max_ms = 0;
	x->o.timeout_ms = 2000;
	return x;
}

static void px_start(struct px *x)
{
	char cs[512];

	srv_start(&x->s);
	snprintf(cs, sizeof(cs),
	         "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=%s;"
	         "QueueEndpoint=http://127.0.0.1:%d/devstoreaccount1;"
	         "BlobEndpoint=http://127.0.0.1:%d/devstoreaccount1",
	         dev_key, x->s.port, x->s.port);
	assert_int_equal(ecw_account_parse(&x->acct, cs), 0);
	assert_int_equal(ecw_client_new(&x->c, x->acct, &x->o), 0);
}

static void px_free(struct px *x)
{
	ecw_client_free(x->c); /* closes: a holding server returns */
	srv_stop(&x->s);
	ecw_account_free(x->acct);
	free(x);
}

static void deleted(void *payload, size_t i)
{
	struct px *x = payload;

	x->order[x->told++] = i;
}

static void add_item(struct px *x, size_t i, const char *id, const char *receipt)
{
	x->items[i] = (struct ecw_queue_delete_item){"jobs", id, receipt, 1};
}

static void delete_all(struct px *x, size_t n)
{
	x->told = 0;
	ecw_queue_delete_many(x->c, x->items, n, deleted, x);
	assert_int_equal(x->told, n);
}

static void put(void *payload, size_t i)
{
	deleted(payload, i);
}

/* Puts n blobs, puts[i] of len bytes of 'a' + i named "b{i}". */
static void put_all(struct px *x, size_t n, size_t len)
{
	static const struct ecw_blob_put_options o = {.if_none_match = "*"};
	static char bodies[8][128 * 1024];
	static char names[8][24];

	for (size_t i = 0; i < n; i++) {
		assert_true(len <= sizeof(bodies[i]));
		memset(bodies[i], 'a' + (int)i, len);
		snprintf(names[i], sizeof(names[i]), "b%zu", i);
		x->puts[i] = (struct ecw_blob_put_item){names[i], bodies[i], len, &o, 1};
	}
	x->told = 0;
	ecw_blob_put_many(x->c, "box", x->puts, n, put, x);
	assert_int_equal(x->told, n);
}

/* Where request i's body, len bytes of 'a' + i, lies in what conn c saw,
 * right after its head: NULL when not there whole. */
static const char *body_seen(const struct px *x, int c, size_t i, size_t len)
{
	char path[32];
	const char *at, *body;

	snprintf(path, sizeof(path), "PUT /devstoreaccount1/box/b%zu ", i);
	if (!(at = strstr(x->s.seen[c], path)) || !(body = strstr(at, "\r\n\r\n")))
		return NULL;
	body += 4;
	if ((size_t)(x->s.seen[c] + x->s.seen_len[c] - body) < len)
		return NULL;
	for (size_t j = 0; j < len; j++)
		if (body[j] != 'a' + (char)i)
			return NULL;
	return body;
}

static struct ecw_client_stats stats(const struct px *x)
{
	struct ecw_client_stats st;

	ecw_client_stats(&st, x->c);
	return st;
}

/* ---- cases ------------------------------------------------------------------------------------ */

/* Three deletes reach the server together, before any answer, each with its
 * own signature; the answers, a 404 among them, are each the right
 * message's. A delete with no receipt is told first and never sent. */
static void test_pipeline__deletes_in_one_write_answers_in_order(void **state)
{
	struct px *x = px_new();
	const char *seen;
	(void)state;

	x->s.conn[0] =
	    (struct conn_script){.gather = 3, .answers = {NO_CONTENT, NOT_FOUND, NO_CONTENT}, .hold = true};
	x->s.nconn = 1;
	px_start(x);
	add_item(x, 0, "m0", "r0");
	add_item(x, 1, "bad", "");
	add_item(x, 2, "m2", "r2");
	add_item(x, 3, "m3", "r3");
	delete_all(x, 4);

	assert_int_equal(x->s.heads_first[0], 3);
	assert_int_equal(x->order[0], 1); /* the one never sent, first */
	assert_int_equal(x->items[1].err, ECW_EINVALID);
	assert_int_equal(x->order[1], 0);
	assert_int_equal(x->order[2], 2);
	assert_int_equal(x->order[3], 3);
	assert_int_equal(x->items[0].err, 0);
	assert_int_equal(x->items[2].err, ECW_ENOTFOUND);
	assert_int_equal(x->items[3].err, 0);
	seen = x->s.seen[0];
	assert_non_null(strstr(seen, "DELETE /devstoreaccount1/jobs/messages/m0?popreceipt=r0 HTTP/1.1\r\n"));
	assert_true(strstr(seen, "/messages/m0?") < strstr(seen, "/messages/m2?"));
	assert_true(strstr(seen, "/messages/m2?") < strstr(seen, "/messages/m3?"));
	assert_null(strstr(seen, "/messages/bad"));
	/* Each signed for itself: three different SharedKey signatures. */
	const char *a1 = strstr(seen, "Authorization: SharedKey devstoreaccount1:");
	assert_non_null(a1);
	const char *a2 = strstr(a1 + 1, "Authorization: SharedKey devstoreaccount1:");
	assert_non_null(a2);
	const char *a3 = strstr(a2 + 1, "Authorization: SharedKey devstoreaccount1:");
	assert_non_null(a3);
	assert_true(strncmp(a1 + 42, a2 + 42, 44) != 0 && strncmp(a2 + 42, a3 + 42, 44) != 0);
	assert_int_equal(stats(x).requests, 3);
	assert_int_equal(stats(x).connections, 1);
	assert_false(ecw_client_pipelining_stopped());
	px_free(x);
}

/* The server answers the first and closes ("Connection: close"): the other
 * two go again, alone, on a new connection, and succeed. */
static void test_pipeline__close_after_an_answer_sends_the_rest_alone(void **state)
{
	struct px *x = px_new();
	(void)state;

	x->s.conn[0] = (struct conn_script){.gather = 3, .answers = {NO_CONTENT_CLOSE}};
	x->s.conn[1] = (struct conn_script){.gather = 1, .answers = {NO_CONTENT, NO_CONTENT}, .hold = true};
	x->s.nconn = 2;
	px_start(x);
	add_item(x, 0, "m0", "r0");
	add_item(x, 1, "m1", "r1");
	add_item(x, 2, "m2", "r2");
	delete_all(x, 3);

	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(x->order[i], i);
		assert_int_equal(x->items[i].err, 0);
	}
	assert_int_equal(x->s.heads_first[0], 3);
	assert_int_equal(x->s.heads_first[1], 1); /* one at a time */
	assert_non_null(strstr(x->s.seen[1], "/messages/m1?"));
	assert_non_null(strstr(x->s.seen[1], "/messages/m2?"));
	assert_null(strstr(x->s.seen[1], "/messages/m0?"));
	assert_int_equal(stats(x).requests, 5);
	assert_int_equal(stats(x).connections, 2);
	assert_false(ecw_client_pipelining_stopped());
	px_free(x);
}

/* A kept connection the server dropped without a word: the pipeline goes
 * again, once, on a new connection. */
static void test_pipeline__dropped_kept_connection_opened_again(void **state)
{
	struct px *x = px_new();
	(void)state;

	x->s.conn[0] = (struct conn_script){.gather = 1, .answers = {NO_CONTENT}}; /* then closes */
	x->s.conn[1] = (struct conn_script){.gather = 2, .answers = {NO_CONTENT, NO_CONTENT}, .hold = true};
	x->s.nconn = 2;
	px_start(x);
	assert_int_equal(ecw_queue_delete(x->c, "jobs", "m0", "r0"), 0);
	usleep(50 * 1000); /* the close has come */
	add_item(x, 0, "m1", "r1");
	add_item(x, 1, "m2", "r2");
	delete_all(x, 2);

	assert_int_equal(x->items[0].err, 0);
	assert_int_equal(x->items[1].err, 0);
	assert_int_equal(x->s.heads_first[1], 2); /* still pipelined */
	assert_int_equal(stats(x).connections, 2);
	px_free(x);
}

/* storage.pipelining: false: each delete waits for the one before. */
static void test_pipeline__turned_off_sends_each_alone(void **state)
{
	struct px *x = px_new();
	(void)state;

	x->o.no_pipelining = true;
	x->s.conn[0] =
	    (struct conn_script){.gather = 1, .answers = {NO_CONTENT, NO_CONTENT, NO_CONTENT}, .hold = true};
	x->s.nconn = 1;
	px_start(x);
	add_item(x, 0, "m0", "r0");
	add_item(x, 1, "m1", "r1");
	add_item(x, 2, "m2", "r2");
	delete_all(x, 3);

	for (size_t i = 0; i < 3; i++)
		assert_int_equal(x->items[i].err, 0);
	assert_int_equal(x->s.heads_first[0], 1);
	assert_int_equal(x->s.most_waiting[0], 1);
	assert_int_equal(stats(x).requests, 3);
	px_free(x);
}

/* What http.c will not pipeline: bodies over the bound, HEAD, two origins,
 * none or too many. */
static void test_pipeline__refuses_what_may_not_be_pipelined(void **state)
{
	static const struct ecw_client_options o = ECW_CLIENT_OPTIONS_INIT;
	struct ecw_response resps[2];
	struct ecw_request a, b;
	const struct ecw_request *rs[2] = {&a, &b};
	const char *same[2] = {"http://127.0.0.1:1/x", "http://127.0.0.1:1/y"};
	const char *two[2] = {"http://127.0.0.1:1/x", "http://127.0.0.1:2/y"};
	struct ecw_http *h;
	size_t answered = 9;
	char why[256];
	(void)state;

	assert_int_equal(ecw_http_new(&h, &o), 0);
	ecw_response_init(&resps[0]);
	ecw_response_init(&resps[1]);
	ecw_request_init(&a, ECW_SVC_QUEUE, "DELETE");
	ecw_request_init(&b, ECW_SVC_QUEUE, "PUT");
	b.body = "";
	b.body_len = ECW_HTTP_PIPELINE_BODY_MAX + 1; /* never read: refused first */
	assert_int_equal(ecw_http_send_pipelined(h, resps, same, rs, 2, &answered, why, sizeof(why)),
	                 ECW_EINVALID);
	assert_int_equal(answered, 0);
	assert_non_null(strstr(why, "bytes of bodies"));
	b.body_len = 0;
	b.method = "HEAD";
	assert_int_equal(ecw_http_send_pipelined(h, resps, same, rs, 2, &answered, why, sizeof(why)),
	                 ECW_EINVALID);
	b.method = "DELETE";
	assert_int_equal(ecw_http_send_pipelined(h, resps, two, rs, 2, &answered, why, sizeof(why)),
	                 ECW_EINVALID);
	assert_int_equal(ecw_http_send_pipelined(h, resps, same, rs, 0, &answered, why, sizeof(why)),
	                 ECW_EINVALID);
	assert_int_equal(ecw_http_send_pipelined(h, resps, same, rs, ECW_HTTP_PIPELINE_MAX + 1, &answered,
	                                         why, sizeof(why)),
	                 ECW_EINVALID);
	assert_int_equal(ecw_http_connections(h), 0);
	ecw_request_dispose(&a);
	ecw_request_dispose(&b);
	ecw_response_dispose(&resps[0]);
	ecw_response_dispose(&resps[1]);
	ecw_http_free(h);
}

/* The server answers the first and never the others: after the timeout the
 * two go again alone and succeed, and pipelining stops for the process (so
 * this case runs last): the next group's deletes go one at a time. */
static void test_pipeline__unanswered_after_an_answer_stops_pipelining(void **state)
{
	struct px *x = px_new();
	(void)state;

	x->o.timeout_ms = 300;
	x->s.conn[0] = (struct conn_script){.gather = 3, .answers = {NO_CONTENT}, .hold = true};
	x->s.conn[1] = (struct conn_script){
	    .gather = 1, .answers = {NO_CONTENT, NO_CONTENT, NO_CONTENT, NO_CONTENT}, .hold = true};
	x->s.nconn = 2;
	px_start(x);
	add_item(x, 0, "m0", "r0");
	add_item(x, 1, "m1", "r1");
	add_item(x, 2, "m2", "r2");
	assert_false(ecw_client_pipelining_stopped());
	delete_all(x, 3);

	for (size_t i = 0; i < 3; i++)
		assert_int_equal(x->items[i].err, 0);
	assert_true(ecw_client_pipelining_stopped());
	assert_int_equal(x->s.heads_first[1], 1);
	add_item(x, 0, "m3", "r3");
	add_item(x, 1, "m4", "r4");
	delete_all(x, 2);
	assert_int_equal(x->items[0].err, 0);
	assert_int_equal(x->items[1].err, 0);
	/* One at a time on the second connection: the server never had two
	 * requests waiting; no third connection. */
	assert_int_equal(x->s.most_waiting[1], 1);
	assert_int_equal(stats(x).connections, 2);
	assert_non_null(strstr(x->s.seen[1], "/messages/m4?"));
	px_free(x);
}

#define CREATED "HTTP/1.1 201 Created\r\nETag: \"0x1\"\r\nContent-Length: 0\r\n\r\n"
#define EXISTS                                                                                               \
	"HTTP/1.1 409 The specified blob already exists.\r\nx-ms-error-code: BlobAlreadyExists\r\n"          \
	"Content-Length: 0\r\n\r\n"
#define HUGE "HTTP/1.1 201 Created\r\nContent-Length: 999999999\r\n\r\n"

/* Three blob puts go in one write, each head with its Content-Length and
 * its body whole right after it, before any answer; the 409 in the middle
 * is the second's alone. */
static void test_pipeline__puts_with_bodies_in_one_write(void **state)
{
	struct px *x = px_new();
	(void)state;

	x->s.conn[0] = (struct conn_script){.gather = 3, .answers = {CREATED, EXISTS, CREATED}, .hold = true};
	x->s.nconn = 1;
	px_start(x);
	put_all(x, 3, 700);

	assert_int_equal(x->s.heads_first[0], 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(x->order[i], i);
		assert_non_null(body_seen(x, 0, i, 700));
	}
	assert_int_equal(x->puts[0].err, 0);
	assert_int_equal(x->puts[1].err, ECW_ECONFLICT);
	assert_int_equal(x->puts[2].err, 0);
	assert_non_null(strstr(x->s.seen[0], "Content-Length: 700\r\n"));
	assert_true(body_seen(x, 0, 0, 700) < body_seen(x, 0, 1, 700));
	assert_true(body_seen(x, 0, 1, 700) < body_seen(x, 0, 2, 700));
	assert_int_equal(stats(x).requests, 3);
	assert_int_equal(stats(x).connections, 1);
	px_free(x);
}

/* The connection closes after the first answer, without a word: the two
 * unanswered puts go again, alone, on a new connection, bodies whole; the
 * second meets its own blob (its first sending had applied): 409, as a
 * retried put may. */
static void test_pipeline__puts_connection_closed_mid_pipeline(void **state)
{
	struct px *x = px_new();
	(void)state;

	x->s.conn[0] = (struct conn_script){.gather = 3, .answers = {CREATED}}; /* then closes */
	x->s.conn[1] = (struct conn_script){.gather = 1, .answers = {EXISTS, CREATED}, .hold = true};
	x->s.nconn = 2;
	px_start(x);
	put_all(x, 3, 500);

	for (size_t i = 0; i < 3; i++)
		assert_int_equal(x->order[i], i);
	assert_int_equal(x->puts[0].err, 0);
	assert_int_equal(x->puts[1].err, ECW_ECONFLICT);
	assert_int_equal(x->puts[2].err, 0);
	assert_int_equal(x->s.heads_first[0], 3);
	assert_int_equal(x->s.heads_first[1], 1); /* one at a time */
	assert_null(body_seen(x, 1, 0, 500));
	assert_non_null(body_seen(x, 1, 1, 500));
	assert_non_null(body_seen(x, 1, 2, 500));
	assert_int_equal(stats(x).requests, 5);
	assert_int_equal(stats(x).connections, 2);
	assert_false(ecw_client_pipelining_stopped());
	px_free(x);
}

/* The second answer's body is over the put's cap: the exchange stops there
 * (no byte more is read, the connection closed, nothing big kept), and the
 * two it left go again alone. */
static void test_pipeline__puts_oversized_answer_mid_pipeline(void **state)
{
	struct px *x = px_new();
	(void)state;

	x->s.conn[0] = (struct conn_script){.gather = 3, .answers = {CREATED, HUGE, CREATED}, .hold = true};
	x->s.conn[1] = (struct conn_script){.gather = 1, .answers = {CREATED, CREATED}, .hold = true};
	x->s.nconn = 2;
	px_start(x);
	put_all(x, 3, 300);

	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(x->order[i], i);
		assert_int_equal(x->puts[i].err, 0);
	}
	assert_int_equal(x->s.heads_first[1], 1);
	assert_non_null(body_seen(x, 1, 1, 300));
	assert_non_null(body_seen(x, 1, 2, 300));
	assert_int_equal(stats(x).requests, 5);
	assert_int_equal(stats(x).connections, 2);
	assert_false(ecw_client_pipelining_stopped());
	px_free(x);
}

/* Bodies are bounded in a write: of three puts of 100 KiB the first two
 * fill ECW_HTTP_PIPELINE_BODY_MAX's 256 KiB as far as they may, and the
 * third goes after their answers. */
static void test_pipeline__puts_split_at_the_bodies_bound(void **state)
{
	struct px *x = px_new();
	(void)state;

	x->s.conn[0] =
	    (struct conn_script){.gather = 2, .answers = {CREATED, CREATED, CREATED}, .hold = true};
	x->s.nconn = 1;
	px_start(x);
	put_all(x, 3, 100 * 1024);

	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(x->puts[i].err, 0);
		assert_non_null(body_seen(x, 0, i, 100 * 1024));
	}
	assert_int_equal(x->s.heads_first[0], 2);
	assert_int_equal(x->s.most_waiting[0], 1);
	assert_int_equal(stats(x).connections, 1);
	px_free(x);
}

#define REFUSED                                                                                                \
	"HTTP/1.1 403 Server failed to authenticate the request.\r\nx-ms-error-code: AuthenticationFailed\r\n" \
	"Content-Length: 0\r\n\r\n"
#define SAS_OLD "sv=2019-02-02&ss=q&srt=o&sp=d&se=2099-01-01T00%3A00%3A00Z&sig=0ldSiGnAtUrE0ldSiGnAtUrE%3D"
#define SAS_NEW "sv=2019-02-02&ss=q&srt=o&sp=d&se=2099-01-01T00%3A00%3A00Z&sig=NeWsIgNaTuReNeWsIgNaTuRe%3D"

struct sas_reload {
	int calls;
	char connstr[512];
};

/* A reload that finds the SAS rewritten (issue 33). */
static int sas_reloaded(struct ecw_account *a, void *payload)
{
	struct sas_reload *r = payload;

	r->calls++;
	return ecw_account_update_secret(a, r->connstr);
}

static size_t occurrences(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* A SAS that expired under a pipelined group: the three refusals ask the
 * account's reload once, and each delete goes again alone with the new SAS
 * and succeeds; none is told a failure. */
static void test_pipeline__refused_sas_replaced_sends_them_again(void **state)
{
	struct px *x = px_new();
	struct sas_reload r = {0, ""};
	char cs[512];
	(void)state;

	x->s.conn[0] =
	    (struct conn_script){.gather = 3,
	                         .answers = {REFUSED, REFUSED, REFUSED, NO_CONTENT, NO_CONTENT, NO_CONTENT},
	                         .hold = true};
	x->s.nconn = 1;
	srv_start(&x->s);
	static const char fmt[] =
	    "QueueEndpoint=http://127.0.0.1:%d/devstoreaccount1;"
	    "TableEndpoint=http://127.0.0.1:%d/devstoreaccount1;SharedAccessSignature=%s";
	snprintf(cs, sizeof(cs), fmt, x->s.port, x->s.port, SAS_OLD);
	snprintf(r.connstr, sizeof(r.connstr), fmt, x->s.port, x->s.port, SAS_NEW);
	assert_int_equal(ecw_account_parse(&x->acct, cs), 0);
	ecw_account_set_reload(x->acct, sas_reloaded, &r, NULL, 10000);
	assert_int_equal(ecw_client_new(&x->c, x->acct, &x->o), 0);
	add_item(x, 0, "m0", "r0");
	add_item(x, 1, "m1", "r1");
	add_item(x, 2, "m2", "r2");
	delete_all(x, 3);

	assert_int_equal(x->s.heads_first[0], 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(x->order[i], i);
		assert_int_equal(x->items[i].err, 0);
	}
	assert_int_equal(r.calls, 1);
	assert_int_equal(occurrences(x->s.seen[0], "sig=0ldSiGnAtUrE"), 3);
	assert_int_equal(occurrences(x->s.seen[0], "sig=NeWsIgNaTuRe"), 3);
	assert_true(
	    strstr(
	        x->s.seen[0],
	        "/messages/m2?popreceipt=r2&sv=2019-02-02&ss=q&srt=o&sp=d&se=2099-01-01T00%3A00%3A00Z&sig=0ld") <
	    strstr(x->s.seen[0], "sig=NeWsIgNaTuRe"));
	assert_int_equal(stats(x).requests, 6);
	assert_int_equal(stats(x).connections, 1);
	px_free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pipeline__deletes_in_one_write_answers_in_order),
	    cmocka_unit_test(test_pipeline__close_after_an_answer_sends_the_rest_alone),
	    cmocka_unit_test(test_pipeline__dropped_kept_connection_opened_again),
	    cmocka_unit_test(test_pipeline__turned_off_sends_each_alone),
	    cmocka_unit_test(test_pipeline__refuses_what_may_not_be_pipelined),
	    cmocka_unit_test(test_pipeline__refused_sas_replaced_sends_them_again),
	    cmocka_unit_test(test_pipeline__puts_with_bodies_in_one_write),
	    cmocka_unit_test(test_pipeline__puts_connection_closed_mid_pipeline),
	    cmocka_unit_test(test_pipeline__puts_oversized_answer_mid_pipeline),
	    cmocka_unit_test(test_pipeline__puts_split_at_the_bodies_bound),
	    /* Last: it stops pipelining for the whole process. */
	    cmocka_unit_test(test_pipeline__unanswered_after_an_answer_stops_pipelining),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
