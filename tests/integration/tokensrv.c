/* SPDX-License-Identifier: MIT */
/* tokensrv.c - see tokensrv.h. */
#define _GNU_SOURCE /* strcasestr */
#include "tokensrv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ecw_buf.h"
#include "ecw_codec.h"

#define MAX_REQUEST (256 * 1024)

struct tokensrv {
	struct tokensrv_config cfg;
	int fd, port;
	char base[64];
	pthread_t tid;
	volatile int stop;
	pthread_mutex_t mu;
	size_t requests, mismatches;
	char mismatch[512];
	char token[2048];
};

/* ---- a request ------------------------------------------------------------- */

struct req {
	char method[16];
	char path[512];
	char query[1024];
	char *head; /* the header lines */
	char *body;
	size_t body_len;
};

static void pct_decode(char *out, size_t cap, const char *s, size_t n)
{
	size_t w = 0;

	for (size_t i = 0; i < n && w + 1 < cap; i++) {
		unsigned v;
		if (s[i] == '%' && i + 2 < n && sscanf(s + i + 1, "%2x", &v) == 1) {
			out[w++] = (char)v;
			i += 2;
		} else {
			out[w++] = s[i] == '+' ? ' ' : s[i];
		}
	}
	out[w] = '\0';
}

/* The decoded value of name in an application/x-www-form-urlencoded string
 * (a query or a body); false when absent. *count gets how many fields the
 * string has. */
static bool form_get(char *out, size_t cap, const char *form, size_t len, const char *name, int *count)
{
	bool found = false;
	size_t nlen = strlen(name);

	*count = 0;
	for (size_t i = 0; i < len;) {
		size_t end = i;
		while (end < len && form[end] != '&')
			end++;
		if (end > i)
			(*count)++;
		const char *eq = memchr(form + i, '=', end - i);
		if (eq && (size_t)(eq - form - i) == nlen && memcmp(form + i, name, nlen) == 0 && !found) {
			pct_decode(out, cap, eq + 1, (size_t)(form + end - eq - 1));
			found = true;
		}
		i = end + 1;
	}
	return found;
}

static const char *header(const struct req *r, const char *name, char *out, size_t cap)
{
	size_t n = strlen(name);

	for (const char *p = r->head; p && *p;) {
		const char *eol = strstr(p, "\r\n");
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		if (len > n && strncasecmp(p, name, n) == 0 && p[n] == ':') {
			const char *v = p + n + 1;
			while (*v == ' ')
				v++;
			snprintf(out, cap, "%.*s", (int)(p + len - v), v);
			return out;
		}
		p += len + (eol ? 2 : 0);
	}
	return NULL;
}

/* ---- checks ---------------------------------------------------------------- */

static void mismatch(struct tokensrv *s, char *why, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void mismatch(struct tokensrv *s, char *why, size_t cap, const char *fmt, ...)
{
	va_list ap;

	(void)s;
	if (why[0])
		return; /* the first one says it */
	va_start(ap, fmt);
	vsnprintf(why, cap, fmt, ap);
	va_end(ap);
}

static void expect_field(struct tokensrv *s, char *why, size_t cap, const char *form, size_t len,
                         const char *name, const char *want)
{
	char got[8192];
	int n;

	if (!form_get(got, sizeof(got), form, len, name, &n))
		mismatch(s, why, cap, "no %s", name);
	else if (strcmp(got, want) != 0)
		mismatch(s, why, cap, "%s is '%.200s', want '%.200s'", name, got, want);
}

/* Fills why (empty when the request is as expected). */
static void check(struct tokensrv *s, const struct req *r, char *why, size_t cap)
{
	const struct tokensrv_config *c = &s->cfg;
	char h[256];
	int n = 0;

	why[0] = '\0';
	if (c->mode == TOKENSRV_ENTRA) {
		if (strcmp(r->method, "POST") != 0)
			mismatch(s, why, cap, "method %s, want POST", r->method);
		if (strcmp(r->path, "/" TOKENSRV_TENANT "/oauth2/v2.0/token") != 0)
			mismatch(s, why, cap, "path %s", r->path);
		if (r->query[0])
			mismatch(s, why, cap, "a query string: %s", r->query);
		if (!header(r, "Content-Type", h, sizeof(h)) ||
		    strcmp(h, "application/x-www-form-urlencoded") != 0)
			mismatch(s, why, cap, "Content-Type %s",
			         header(r, "Content-Type", h, sizeof(h)) ? h : "(none)");
		expect_field(s, why, cap, r->body, r->body_len, "client_id", TOKENSRV_CLIENT_ID);
		expect_field(s, why, cap, r->body, r->body_len, "scope",
		             "https://storage.azure.com/.default");
		expect_field(s, why, cap, r->body, r->body_len, "client_assertion_type",
		             "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
		expect_field(s, why, cap, r->body, r->body_len, "client_assertion",
		             c->assertion ? c->assertion : "");
		expect_field(s, why, cap, r->body, r->body_len, "grant_type", "client_credentials");
		form_get(h, sizeof(h), r->body, r->body_len, "", &n);
		if (n != 5)
			mismatch(s, why, cap, "%d form fields, want exactly 5", n);
		return;
	}
	if (strcmp(r->method, "GET") != 0)
		mismatch(s, why, cap, "method %s, want GET", r->method);
	if (r->body_len)
		mismatch(s, why, cap, "a body on a GET");
	if (c->mode == TOKENSRV_IMDS) {
		if (strcmp(r->path, "/metadata/identity/oauth2/token") != 0)
			mismatch(s, why, cap, "path %s", r->path);
		if (!header(r, "Metadata", h, sizeof(h)) || strcmp(h, "true") != 0)
			mismatch(s, why, cap, "no Metadata: true");
		expect_field(s, why, cap, r->query, strlen(r->query), "api-version", "2018-02-01");
	} else {
		if (strcmp(r->path, "/msi/token") != 0)
			mismatch(s, why, cap, "path %s", r->path);
		if (!header(r, "X-IDENTITY-HEADER", h, sizeof(h)) || strcmp(h, TOKENSRV_IDENTITY_HEADER) != 0)
			mismatch(s, why, cap, "no or wrong X-IDENTITY-HEADER");
		expect_field(s, why, cap, r->query, strlen(r->query), "api-version", "2019-08-01");
	}
	expect_field(s, why, cap, r->query, strlen(r->query), "resource", "https://storage.azure.com/");
	if (c->mi_client_id)
		expect_field(s, why, cap, r->query, strlen(r->query), "client_id", c->mi_client_id);
	form_get(h, sizeof(h), r->query, strlen(r->query), "", &n);
	if (n != (c->mi_client_id ? 3 : 2))
		mismatch(s, why, cap, "%d query parameters, want %d", n, c->mi_client_id ? 3 : 2);
}

/* ---- tokens ---------------------------------------------------------------- */

static void b64url(struct ecw_buf *out, const char *s)
{
	struct ecw_buf b;

	ecw_buf_init(&b, 0);
	assert_int_equal(ecw_base64_encode(&b, s, strlen(s)), 0);
	for (size_t i = 0; i < b.len; i++) {
		char ch = b.ptr[i];
		if (ch == '=')
			break;
		assert_int_equal(ecw_buf_addc(out, ch == '+' ? '-' : ch == '/' ? '_' : ch), 0);
	}
	ecw_buf_dispose(&b);
}

/* A JWT shaped like Entra ID's for storage; the signature is not checked
 * by Azurite's basic mode, so it is a placeholder. */
static void mint(struct tokensrv *s, char *out, size_t cap)
{
	const struct tokensrv_config *c = &s->cfg;
	long now = (long)time(NULL), exp = now + (c->exp_offset_s ? c->exp_offset_s : 3600);
	char payload[1024];
	struct ecw_buf b;

	snprintf(payload, sizeof(payload),
	         "{\"aud\":\"%s\",\"iss\":\"https://sts.windows.net/" TOKENSRV_TENANT
	         "/\",\"iat\":%ld,\"nbf\":%ld,"
	         "\"exp\":%ld,\"appid\":\"" TOKENSRV_CLIENT_ID
	         "\",\"oid\":\"5d1e6b9a-3c21-4b8e-8f2b-0c4bd8c56a1e\","
	         "\"tid\":\"" TOKENSRV_TENANT "\",\"ver\":\"1.0\"}",
	         c->audience ? c->audience : "https://storage.azure.com", now - 300, now - 300, exp);
	ecw_buf_init(&b, 0);
	b64url(&b, "{\"typ\":\"JWT\",\"alg\":\"RS256\",\"kid\":\"test\"}");
	assert_int_equal(ecw_buf_addc(&b, '.'), 0);
	b64url(&b, payload);
	assert_int_equal(ecw_buf_addc(&b, '.'), 0);
	b64url(&b, "not-a-signature");
	snprintf(out, cap, "%s", b.ptr);
	ecw_buf_dispose(&b);
}

/* ---- the server ------------------------------------------------------------- */

/* Reads one request (headers, then Content-Length bytes of body) into in. */
static bool read_request(int fd, struct ecw_buf *in, struct req *r)
{
	char chunk[4096];
	size_t head_len = 0, need = 0;

	memset(r, 0, sizeof(*r));
	for (;;) {
		const char *end;
		if (!head_len && in->ptr && (end = strstr(in->ptr, "\r\n\r\n"))) {
			const char *cl = strcasestr(in->ptr, "\r\nContent-Length:");
			head_len = (size_t)(end - in->ptr) + 4;
			need = head_len + (cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0);
		}
		if (head_len && in->len >= need)
			break;
		ssize_t got = recv(fd, chunk, sizeof(chunk), 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0 || ecw_buf_add(in, chunk, (size_t)got) < 0)
			return false;
	}
	in->ptr[head_len - 4] = '\0'; /* the request line and headers, as one string */
	char target[1536];
	if (sscanf(in->ptr, "%15s %1535s", r->method, target) != 2)
		return false;
	char *q = strchr(target, '?');
	snprintf(r->path, sizeof(r->path), "%.*s", (int)(q ? q - target : (long)strlen(target)), target);
	snprintf(r->query, sizeof(r->query), "%s", q ? q + 1 : "");
	r->head = strstr(in->ptr, "\r\n") ? strstr(in->ptr, "\r\n") + 2 : NULL;
	r->body = in->ptr + head_len;
	r->body_len = need - head_len;
	return true;
}

static void respond(int fd, int status, const char *body)
{
	char head[256];
	int n = snprintf(
	    head, sizeof(head),
	    "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n",
	    status, status == 200 ? "OK" : "Error", strlen(body));
	if (send(fd, head, (size_t)n, MSG_NOSIGNAL) < 0 || send(fd, body, strlen(body), MSG_NOSIGNAL) < 0)
		return;
}

static void serve(struct tokensrv *s, int fd)
{
	struct ecw_buf in;
	struct req r;
	char why[512], token[2048], body[4096];

	ecw_buf_init(&in, MAX_REQUEST);
	if (!read_request(fd, &in, &r)) {
		ecw_buf_dispose(&in);
		return;
	}
	check(s, &r, why, sizeof(why));
	pthread_mutex_lock(&s->mu);
	s->requests++;
	if (why[0]) {
		if (s->mismatches++ == 0)
			snprintf(s->mismatch, sizeof(s->mismatch), "%s", why);
	}
	pthread_mutex_unlock(&s->mu);
	if (why[0]) {
		snprintf(body, sizeof(body),
		         "{\"error\":\"invalid_request\",\"error_description\":\"test token endpoint: %s\"}",
		         why);
		respond(fd, 400, body);
	} else if (s->cfg.status) {
		respond(
		    fd, s->cfg.status,
		    "{\"error\":\"invalid_client\",\"error_description\":\"AADSTS700213: No matching federated identity "
		    "record found for presented assertion subject.\\r\\nTrace ID: 0\",\"error_codes\":[700213]}");
	} else {
		long life = s->cfg.exp_offset_s > 0 ? s->cfg.exp_offset_s : 3600;
		mint(s, token, sizeof(token));
		pthread_mutex_lock(&s->mu);
		snprintf(s->token, sizeof(s->token), "%s", token);
		pthread_mutex_unlock(&s->mu);
		if (s->cfg.mode == TOKENSRV_ENTRA)
			snprintf(
			    body, sizeof(body),
			    "{\"token_type\":\"Bearer\",\"expires_in\":%ld,\"ext_expires_in\":%ld,\"access_token\":\"%s\"}",
			    life, life, token);
		else if (s->cfg.mode == TOKENSRV_IMDS)
			snprintf(
			    body, sizeof(body),
			    "{\"access_token\":\"%s\",\"refresh_token\":\"\",\"expires_in\":\"%ld\",\"expires_on\":\"%ld\","
			    "\"not_before\":\"%ld\",\"resource\":\"https://storage.azure.com/\",\"token_type\":\"Bearer\"}",
			    token, life, (long)time(NULL) + life, (long)time(NULL));
		else
			snprintf(
			    body, sizeof(body),
			    "{\"access_token\":\"%s\",\"expires_on\":\"%ld\",\"resource\":\"https://storage.azure.com/\","
			    "\"token_type\":\"Bearer\"}",
			    token, (long)time(NULL) + life);
		respond(fd, 200, body);
	}
	ecw_buf_dispose(&in);
}

static void *server_main(void *arg)
{
	struct tokensrv *s = arg;

	while (!s->stop) {
		struct pollfd p = {.fd = s->fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		int c = accept(s->fd, NULL, NULL);
		if (c < 0)
			continue;
		struct timeval tv = {5, 0};
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		serve(s, c);
		close(c);
	}
	return NULL;
}

struct tokensrv *tokensrv_start(const struct tokensrv_config *cfg)
{
	struct tokensrv *s = calloc(1, sizeof(*s));
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);

	assert_non_null(s);
	s->cfg = *cfg;
	pthread_mutex_init(&s->mu, NULL);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->fd >= 0);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s->fd, 64), 0);
	assert_int_equal(getsockname(s->fd, (struct sockaddr *)&sa, &len), 0);
	s->port = ntohs(sa.sin_port);
	snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%d", s->port);
	assert_int_equal(pthread_create(&s->tid, NULL, server_main, s), 0);
	return s;
}

void tokensrv_stop(struct tokensrv *s)
{
	if (!s)
		return;
	s->stop = 1;
	pthread_join(s->tid, NULL);
	close(s->fd);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

int tokensrv_port(const struct tokensrv *s)
{
	return s->port;
}

const char *tokensrv_base(const struct tokensrv *s)
{
	return s->base;
}

size_t tokensrv_requests(struct tokensrv *s)
{
	pthread_mutex_lock(&s->mu);
	size_t n = s->requests;
	pthread_mutex_unlock(&s->mu);
	return n;
}

size_t tokensrv_mismatches(struct tokensrv *s)
{
	pthread_mutex_lock(&s->mu);
	size_t n = s->mismatches;
	pthread_mutex_unlock(&s->mu);
	return n;
}

const char *tokensrv_mismatch(struct tokensrv *s)
{
	return s->mismatch;
}

const char *tokensrv_last_token(struct tokensrv *s)
{
	return s->token;
}
