/* SPDX-License-Identifier: MIT */
/* itest.c - see itest.h. */
#include "itest.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

const char *itest_connstr(void)
{
	const char *cs = getenv("ECW_TEST_CONNECTION_STRING");
	if (cs == NULL || *cs == '\0')
		fail_msg("ECW_TEST_CONNECTION_STRING is not set: integration tests need a "
		         "running Azurite; run them with tests/run-tests.sh BUILD_DIR "
		         "(or make integration)");
	return cs;
}

const char *itest_last_error(void)
{
	static _Thread_local char text[768];
	const struct ecw_error *e = ecw_error_last();
	snprintf(text, sizeof(text), "[%s http=%d service=\"%s\" request=\"%s\"] %s", ecw_error_name(e->code),
	         e->http_status, e->service_code, e->request_id, e->message);
	return text;
}

void itest_assert_service_error(int http_status, const char *service_code)
{
	const struct ecw_error *e = ecw_error_last();
	if (e->http_status != http_status)
		fail_msg("http_status %d, expected %d; last error: %s", e->http_status, http_status,
		         itest_last_error());
	if (service_code ? strcmp(e->service_code, service_code) != 0 : e->service_code[0] == '\0')
		fail_msg("service_code \"%s\", expected \"%s\"; last error: %s", e->service_code,
		         service_code ? service_code : "(any)", itest_last_error());
	/* Azurite sends x-ms-request-id on every answer, errors included. */
	if (e->request_id[0] == '\0')
		fail_msg("no request id; last error: %s", itest_last_error());
	if (strstr(e->message, e->service_code) == NULL || strstr(e->message, e->request_id) == NULL)
		fail_msg("the message lacks the service code or request id: %s", itest_last_error());
}

/* Appends "name=value;" to a malloc'd string being built. */
static void append(char **s, size_t *len, size_t *cap, const char *p, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t ncap = (*cap + n + 1) * 2;
		char *ns = realloc(*s, ncap);
		assert_non_null(ns);
		*s = ns;
		*cap = ncap;
	}
	memcpy(*s + *len, p, n);
	*len += n;
	(*s)[*len] = '\0';
}

char *itest_connstr_with(const char *key, int port)
{
	return itest_connstr_with_ports(key, port, port);
}

char *itest_connstr_with_ports(const char *key, int queue_port, int table_port)
{
	const char *cs = itest_connstr();
	char *out = NULL;
	size_t len = 0, cap = 0;
	char buf[256];

	append(&out, &len, &cap, "", 0);
	while (*cs != '\0') {
		const char *end = strchr(cs, ';');
		size_t n = end ? (size_t)(end - cs) : strlen(cs);
		const char *eq = memchr(cs, '=', n);
		size_t nlen = eq ? (size_t)(eq - cs) : n;

		if (n == 0) {
			/* empty part */
		} else if (key != NULL && nlen == 10 && strncasecmp(cs, "AccountKey", 10) == 0) {
			append(&out, &len, &cap, "AccountKey=", 11);
			append(&out, &len, &cap, key, strlen(key));
			append(&out, &len, &cap, ";", 1);
		} else if (nlen == 13 && ((queue_port > 0 && strncasecmp(cs, "QueueEndpoint", 13) == 0) ||
		                          (table_port > 0 && strncasecmp(cs, "TableEndpoint", 13) == 0))) {
			int port = tolower((unsigned char)cs[0]) == 'q' ? queue_port : table_port;
			int k = snprintf(buf, sizeof(buf), "%.*s=http://127.0.0.1:%d/devstoreaccount1;",
			                 (int)nlen, cs, port);
			assert_true(k > 0 && (size_t)k < sizeof(buf));
			append(&out, &len, &cap, buf, (size_t)k);
		} else {
			append(&out, &len, &cap, cs, n);
			append(&out, &len, &cap, ";", 1);
		}
		cs += n;
		if (*cs == ';')
			cs++;
	}
	return out;
}

int itest_closed_port(void)
{
	struct sockaddr_in sa;
	socklen_t slen = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = 0;
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &slen), 0);
	close(fd); /* bound but never listened on: connecting is refused */
	return ntohs(sa.sin_port);
}

void itest_client_for(struct ecw_account **acct, struct ecw_client **client, const char *connstr,
                      const struct ecw_client_options *opts)
{
	static const struct ecw_client_options def = ITEST_OPTIONS;
	*acct = NULL;
	*client = NULL;
	ECW_ASSERT_OK(ecw_account_parse(acct, connstr));
	assert_non_null(*acct);
	ECW_ASSERT_OK(ecw_client_new(client, *acct, opts ? opts : &def));
	assert_non_null(*client);
}

void itest_unique_name(char *out, size_t cap, char kind, const char *hint)
{
	static unsigned counter;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	unsigned long stamp = (unsigned long)(ts.tv_nsec / 1000) ^ ((unsigned long)ts.tv_sec << 20);
	char clean[24];
	size_t n = 0;

	/* Keep only what both naming rules allow from the hint. */
	for (const char *p = hint; p && *p && n + 1 < sizeof(clean) && n < 12; p++) {
		char ch = *p;
		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch - 'A' + 'a');
		if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))
			clean[n++] = ch;
	}
	clean[n] = '\0';
	counter++;
	int k;
	if (kind == 'q')
		k = snprintf(out, cap, "itq-%s-%ld-%u-%lx", n ? clean : "x", (long)getpid(), counter,
		             stamp & 0xffffffUL);
	else
		k = snprintf(out, cap, "it%s%ldx%ux%lx", clean, (long)getpid(), counter, stamp & 0xffffffUL);
	assert_true(k > 2 && k < 64 && (size_t)k < cap);
}

struct ecw_client_stats itest_stats(const struct ecw_client *c)
{
	struct ecw_client_stats s;
	memset(&s, 0, sizeof(s));
	ecw_client_stats(&s, c);
	return s;
}

void itest_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int64_t itest_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int itest_setup(void **state)
{
	struct itest *t = calloc(1, sizeof(*t));
	assert_non_null(t);
	*state = t;
	itest_client_for(&t->acct, &t->client, itest_connstr(), NULL);
	itest_unique_name(t->queue, sizeof(t->queue), 'q', "q");
	itest_unique_name(t->table, sizeof(t->table), 't', "a");
	itest_unique_name(t->table2, sizeof(t->table2), 't', "b");
	itest_unique_name(t->poison, sizeof(t->poison), 'q', "poison");
	ecw_error_clear();
	return 0;
}

int itest_teardown(void **state)
{
	struct itest *t = *state;
	if (t == NULL)
		return 0;
	/* Best effort: a test may have deleted them itself, or failed midway. A
	 * fresh client, so faults a test left queued cannot get in the way. */
	if (t->acct != NULL &&
	    (t->queue_used || t->table_used || t->table2_used || t->poison_used || t->nq || t->nt)) {
		struct ecw_client *c = NULL;
		static const struct ecw_client_options o = ITEST_OPTIONS;
		if (ecw_client_new(&c, t->acct, &o) == 0) {
			if (t->queue_used)
				(void)!ecw_queue_delete_queue(c, t->queue);
			if (t->table_used)
				(void)!ecw_table_delete_table(c, t->table);
			if (t->table2_used)
				(void)!ecw_table_delete_table(c, t->table2);
			if (t->poison_used)
				(void)!ecw_queue_delete_queue(c, t->poison);
			for (int i = 0; i < t->nq; i++)
				(void)!ecw_queue_delete_queue(c, t->extra_q[i]);
			for (int i = 0; i < t->nt; i++)
				(void)!ecw_table_delete_table(c, t->extra_t[i]);
			ecw_client_free(c);
		}
	}
	ecw_client_free(t->client);
	ecw_account_free(t->acct);
	free(t);
	*state = NULL;
	return 0;
}

const char *itest_queue(struct itest *t)
{
	bool created = false;
	t->queue_used = true;
	ECW_ASSERT_OK(ecw_queue_create(&created, t->client, t->queue));
	assert_true(created);
	return t->queue;
}

const char *itest_table(struct itest *t)
{
	bool created = false;
	t->table_used = true;
	ECW_ASSERT_OK(ecw_table_create(&created, t->client, t->table));
	assert_true(created);
	return t->table;
}

const char *itest_table2(struct itest *t)
{
	bool created = false;
	t->table2_used = true;
	ECW_ASSERT_OK(ecw_table_create(&created, t->client, t->table2));
	assert_true(created);
	return t->table2;
}

struct ecw_entity **itest_query_all(size_t *n, struct ecw_client *c, const char *table, const char *filter)
{
	struct ecw_query_options qo = {.filter = filter};
	struct ecw_table_query *q = NULL;
	struct ecw_entity **v = NULL;
	size_t cap = 0;

	*n = 0;
	ECW_ASSERT_OK(ecw_table_query_new(&q, c, table, &qo));
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			v = realloc(v, cap * sizeof(*v));
			assert_non_null(v);
		}
		v[(*n)++] = e;
	}
	ecw_table_query_free(q);
	return v;
}

void itest_entities_free(struct ecw_entity **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ecw_entity_free(v[i]);
	free(v);
}

const char *itest_entity_json(const struct ecw_entity *e)
{
	static char text[4][8192];
	static int k;
	struct ecw_buf b;

	k = (k + 1) % 4;
	ecw_buf_init(&b, 0);
	if (!e)
		snprintf(text[k], sizeof(text[k]), "(none)");
	else if (ecw_entity_to_json(&b, e) == 0)
		snprintf(text[k], sizeof(text[k]), "%s", ecw_buf_cstr(&b));
	else
		snprintf(text[k], sizeof(text[k]), "(unprintable)");
	ecw_buf_dispose(&b);
	return text[k];
}

const char *itest_poison(struct itest *t)
{
	t->poison_used = true;
	return t->poison;
}

const char *itest_extra_queue(struct itest *t, const char *hint)
{
	assert_true(t->nq < ITEST_MAX_EXTRA);
	itest_unique_name(t->extra_q[t->nq], sizeof(t->extra_q[0]), 'q', hint);
	return t->extra_q[t->nq++];
}

const char *itest_extra_table(struct itest *t, const char *hint)
{
	assert_true(t->nt < ITEST_MAX_EXTRA);
	itest_unique_name(t->extra_t[t->nt], sizeof(t->extra_t[0]), 't', hint);
	return t->extra_t[t->nt++];
}

void itest_keep_queue(struct itest *t, const char *name)
{
	assert_true(t->nq < ITEST_MAX_EXTRA && strlen(name) < sizeof(t->extra_q[0]));
	memcpy(t->extra_q[t->nq++], name, strlen(name) + 1);
}

struct ecw_entity *itest_get_or_null(struct ecw_client *c, const char *table, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	int err = ecw_table_get(&e, c, table, pk, rk);

	if (err == ECW_ENOTFOUND)
		return NULL;
	ECW_ASSERT_OK(err);
	return e;
}

struct told {
	size_t order[8], n;
	int status[8];
	char code[8][64];
};

static void told_one(void *payload, size_t i)
{
	struct told *t = payload;

	t->status[t->n] = ecw_error_last()->http_status;
	snprintf(t->code[t->n], sizeof(t->code[0]), "%s", ecw_error_last()->service_code);
	t->order[t->n++] = i;
}

void itest_check_delete_many(struct ecw_client *c, const char *q)
{
	enum { N = 6, STALE = 3 };
	struct ecw_queue_delete_item items[N];
	struct ecw_queue_msg *m = NULL;
	struct ecw_client_stats before, after;
	struct told told = {0};
	size_t n = 0;
	long long left = -1;

	ECW_ASSERT_OK(ecw_queue_create(NULL, c, q));
	for (int i = 0; i < N; i++)
		ECW_ASSERT_OK(ecw_queue_put(NULL, c, q, "pipelined", 9, NULL));
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, c, q, 32, 30));
	assert_int_equal(n, N);
	for (size_t i = 0; i < N; i++)
		items[i] = (struct ecw_queue_delete_item){q, m[i].id, m[i].pop_receipt, 1};
	struct ecw_queue_msg moved = m[STALE];
	ECW_ASSERT_OK(ecw_queue_update(&moved, c, q, 30, NULL, 0));
	before = itest_stats(c);
	ecw_queue_delete_many(c, items, N, told_one, &told);
	after = itest_stats(c);
	assert_int_equal(told.n, N);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(told.order[i], i);
		assert_int_equal(items[i].err, i == STALE ? ECW_ENOTFOUND : 0);
	}
	/* The service's answer to a receipt that is no longer the message's:
	 * 400 PopReceiptMismatch (404 MessageNotFound has been seen too). */
	ITEST_CHECK((told.status[STALE] == 400 && strcmp(told.code[STALE], "PopReceiptMismatch") == 0) ||
	                (told.status[STALE] == 404 && strcmp(told.code[STALE], "MessageNotFound") == 0),
	            "the stale receipt's delete was answered %d %s", told.status[STALE], told.code[STALE]);
	assert_int_equal(after.requests - before.requests, N);
	assert_int_equal(after.connections - before.connections, 0);
	ECW_ASSERT_OK(ecw_queue_count(&left, c, q));
	assert_int_equal(left, 1);
	ecw_queue_msgs_free(m, n);
}

char *itest_replace(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	size_t head, n;
	char *out;

	ITEST_CHECK(at != NULL, "%s\n  expected to contain %s", text, from);
	head = (size_t)(at - text);
	n = strlen(text) - strlen(from) + strlen(to);
	out = malloc(n + 1);
	assert_non_null(out);
	memcpy(out, text, head);
	memcpy(out + head, to, strlen(to));
	memcpy(out + head + strlen(to), at + strlen(from), strlen(at + strlen(from)) + 1);
	return out;
}
