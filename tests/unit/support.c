/* SPDX-License-Identifier: MIT */
/* support.c - the sleep recorder, the clock, the fake transport and the string helpers
 * the unit tests share (see support.h). */
#include "support.h"
#include "ecw_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- sleeps -------------------------------------------------------------- */

static int64_t sleep_log[SLEEP_LOG_MAX];
static size_t sleep_n;

void __wrap_ecw_clock_sleep_ms(int64_t ms);

void __wrap_ecw_clock_sleep_ms(int64_t ms)
{
	if (sleep_n < SLEEP_LOG_MAX)
		sleep_log[sleep_n] = ms;
	sleep_n++;
}

size_t sleeps_count(void)
{
	return sleep_n;
}

int64_t sleeps_at(size_t i)
{
	assert_true(i < SLEEP_LOG_MAX && i < sleep_n);
	return sleep_log[i];
}

void sleeps_reset(void)
{
	memset(sleep_log, 0, sizeof(sleep_log));
	sleep_n = 0;
}

/* ---- clock ---------------------------------------------------------------- */

static bool clock_is_fake;
static int64_t clock_fake_ms;

int64_t __real_ecw_clock_now_ms(void);
int64_t __wrap_ecw_clock_now_ms(void);

int64_t __wrap_ecw_clock_now_ms(void)
{
	return clock_is_fake ? clock_fake_ms : __real_ecw_clock_now_ms();
}

void clock_fake_set(int64_t ms)
{
	clock_is_fake = true;
	clock_fake_ms = ms;
}

void clock_fake_advance(int64_t ms)
{
	assert_true(clock_is_fake);
	clock_fake_ms += ms;
}

void clock_real(void)
{
	clock_is_fake = false;
}

static bool wall_is_fake;
static int64_t wall_fake_ms;

int64_t __real_ecw_clock_wall_ms(void);
int64_t __wrap_ecw_clock_wall_ms(void);

int64_t __wrap_ecw_clock_wall_ms(void)
{
	return wall_is_fake ? wall_fake_ms : __real_ecw_clock_wall_ms();
}

void wall_fake_set(int64_t unix_ms)
{
	wall_is_fake = true;
	wall_fake_ms = unix_ms;
}

void wall_real(void)
{
	wall_is_fake = false;
}

/* ---- strings ------------------------------------------------------------- */

static char *xstrndup(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	assert_non_null(p);
	if (n)
		memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

bool str_starts(const char *s, const char *prefix)
{
	return s && prefix && strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_contains(const char *hay, const char *needle)
{
	return hay && needle && strstr(hay, needle) != NULL;
}

bool str_contains_ci(const char *hay, const char *needle)
{
	if (!hay || !needle)
		return false;
	size_t n = strlen(needle);
	for (const char *p = hay; *p; p++)
		if (strncasecmp(p, needle, n) == 0)
			return true;
	return n == 0;
}

/* ---- fake transport ------------------------------------------------------ */

void fake_init(struct fake_transport *f, const struct ecw_account *acct)
{
	memset(f, 0, sizeof(*f));
	f->acct = acct;
}

static void request_free(struct fake_request *q)
{
	free(q->url);
	free(q->path);
	for (size_t i = 0; i < q->nheaders; i++) {
		free(q->hname[i]);
		free(q->hvalue[i]);
	}
	free(q->content_type);
	free(q->body);
	memset(q, 0, sizeof(*q));
}

void fake_dispose(struct fake_transport *f)
{
	for (size_t i = 0; i < f->nreqs; i++)
		request_free(&f->reqs[i]);
	f->nreqs = 0;
}

static void push(struct fake_transport *f, struct fake_step s)
{
	assert_true(f->nsteps < FAKE_MAX_STEPS);
	f->steps[f->nsteps++] = s;
}

void fake_respond(struct fake_transport *f, long status, const char *headers, const char *body)
{
	push(f, (struct fake_step){.status = status, .headers = headers, .body = body});
}

void fake_net_error(struct fake_transport *f, int err)
{
	assert_true(err < 0);
	push(f, (struct fake_step){.net_err = err});
}

void fake_always(struct fake_transport *f, long status, const char *headers, const char *body)
{
	f->fallback = (struct fake_step){.status = status, .headers = headers, .body = body};
	f->has_fallback = true;
}

void fake_always_net_error(struct fake_transport *f, int err)
{
	assert_true(err < 0);
	f->fallback = (struct fake_step){.net_err = err};
	f->has_fallback = true;
}

static char *url_path_of(const char *url)
{
	const char *p = strstr(url, "://");
	p = p ? p + 3 : url;
	p = p + strcspn(p, "/?");
	return xstrndup(p, strcspn(p, "?"));
}

static void record(struct fake_transport *f, const char *url, const struct ecw_request *r)
{
	assert_true(f->nreqs < FAKE_MAX_REQUESTS);
	struct fake_request *q = &f->reqs[f->nreqs++];
	memset(q, 0, sizeof(*q));
	snprintf(q->method, sizeof(q->method), "%s", r->method ? r->method : "(null)");
	q->url = xstrdup(url);
	q->path = url_path_of(url);
	for (size_t i = 0; i < r->nheaders && q->nheaders < FAKE_MAX_HEADERS; i++) {
		q->hname[q->nheaders] = xstrdup(r->headers[i].name ? r->headers[i].name : "");
		q->hvalue[q->nheaders] = xstrdup(r->headers[i].value ? r->headers[i].value : "");
		q->nheaders++;
	}
	if (r->content_type)
		q->content_type = xstrdup(r->content_type);
	if (r->body) {
		q->body = xstrndup(r->body, r->body_len);
		q->body_len = r->body_len;
	}
	q->answer_max = r->answer_max;
	q->auth_ok = false;
	const char *auth = fake_header(q, "Authorization");
	if (f->acct && f->acct->key && auth) {
		struct ecw_buf want;
		ecw_buf_init(&want, ECW_BUF_DEFAULT_MAX);
		if (ecw_auth_header(&want, f->acct, r) == 0)
			q->auth_ok = strcmp(ecw_buf_cstr(&want), auth) == 0;
		ecw_buf_dispose(&want);
	}
}

static void fill(struct ecw_response *resp, const struct fake_step *s)
{
	resp->status = s->status;
	for (const char *line = s->headers; line && *line;) {
		size_t len = strcspn(line, "\n");
		const char *colon = memchr(line, ':', len);
		assert_non_null(colon);
		const char *v = colon + 1;
		while (v < line + len && *v == ' ')
			v++;
		assert_int_equal(
		    ecw_response_add_header(resp, line, (size_t)(colon - line), v, (size_t)(line + len - v)),
		    0);
		line += len;
		if (*line == '\n')
			line++;
	}
	if (s->body)
		assert_int_equal(ecw_buf_add(&resp->body, s->body, strlen(s->body)), 0);
}

int fake_send(void *ctx, struct ecw_response *resp, const char *url, const struct ecw_request *r)
{
	struct fake_transport *f = ctx;
	record(f, url, r);
	if (f->real_sleep_ms > 0) {
		struct timespec ts = {f->real_sleep_ms / 1000, (long)(f->real_sleep_ms % 1000) * 1000000L};
		f->real_sleep_ms = 0;
		while (nanosleep(&ts, &ts) != 0)
			;
	}
	const struct fake_step *s;
	if (f->next < f->nsteps) {
		s = &f->steps[f->next++];
	} else if (f->has_fallback) {
		s = &f->fallback;
	} else {
		static const struct fake_step overrun = {.status = 599};
		f->overruns++;
		s = &overrun;
	}
	if (s->net_err < 0)
		return ecw_error_set(s->net_err, "fake transport: simulated network failure");
	fill(resp, s);
	return 0;
}

const char *fake_header(const struct fake_request *q, const char *name)
{
	for (size_t i = 0; i < q->nheaders; i++)
		if (strcasecmp(q->hname[i], name) == 0)
			return q->hvalue[i];
	return NULL;
}

int fake_header_count(const struct fake_request *q, const char *name)
{
	int n = 0;
	for (size_t i = 0; i < q->nheaders; i++)
		if (strcasecmp(q->hname[i], name) == 0)
			n++;
	return n;
}

bool url_has_param(const char *url, const char *pair)
{
	const char *p = strchr(url, '?');
	if (!p)
		return false;
	size_t n = strlen(pair);
	for (p++; *p;) {
		size_t len = strcspn(p, "&");
		if (len == n && memcmp(p, pair, n) == 0)
			return true;
		p += len;
		if (*p == '&')
			p++;
	}
	return false;
}

int url_nparams(const char *url)
{
	const char *p = strchr(url, '?');
	if (!p || !p[1])
		return 0;
	int n = 1;
	for (p++; *p; p++)
		if (*p == '&')
			n++;
	return n;
}

/* ---- client fixture ------------------------------------------------------ */

int client_fixture_setup(struct client_fixture **out, const char *connstr,
                         const struct ecw_client_options *opts)
{
	struct client_fixture *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	assert_int_equal(ecw_account_parse(&fx->acct, connstr), 0);
	assert_int_equal(ecw_client_new(&fx->c, fx->acct, opts), 0);
	fake_init(&fx->fake, fx->acct);
	ecw_client_set_transport(fx->c, fake_send, &fx->fake);
	sleeps_reset();
	ecw_error_clear();
	*out = fx;
	return 0;
}

void client_fixture_teardown(struct client_fixture *fx)
{
	if (!fx)
		return;
	ecw_client_free(fx->c);
	fake_dispose(&fx->fake);
	ecw_account_free(fx->acct);
	free(fx);
}

void config_dump(const struct ecw_node_errors *errs)
{
	for (size_t i = 0; i < errs->n; i++)
		print_message("  error: %s\n", errs->lines[i]);
}

struct ecw_config *config_parse_ok(const char *text, const char *file)
{
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;
	int err;

	ecw_node_errors_init(&errs);
	err = ecw_config_parse(&cfg, text, strlen(text), file, &errs);
	if (err != 0 || errs.n != 0) {
		config_dump(&errs);
		fail_msg("parse of \"%s\" = %s with %zu errors", text, ecw_error_name(err), errs.n);
	}
	assert_non_null(cfg);
	ecw_node_errors_dispose(&errs);
	return cfg;
}

void config_parse_bad(const char *text, const char *file, const char *pos, const char *needle)
{
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;
	char prefix[128];
	bool found = false;

	ecw_node_errors_init(&errs);
	assert_int_equal(ecw_config_parse(&cfg, text, strlen(text), file, &errs), ECW_EINVALID);
	assert_null(cfg);
	snprintf(prefix, sizeof(prefix), "%s:%s: ", file, pos);
	for (size_t i = 0; i < errs.n; i++)
		found |= str_starts(errs.lines[i], prefix) && str_contains(errs.lines[i], needle);
	if (!found) {
		config_dump(&errs);
		fail_msg("no error \"%s...%s...\" for:\n%s", prefix, needle, text);
	}
	ecw_node_errors_dispose(&errs);
}
