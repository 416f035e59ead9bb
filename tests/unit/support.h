/* SPDX-License-Identifier: MIT */
/* support.h - what the unit tests share: a recorder for ecw_clock_sleep_ms (the
 * binaries link with -Wl,--wrap=ecw_clock_sleep_ms, so backoff never waits), a
 * clock tests can stop and move (ecw_clock_now_ms, wrapped likewise), a fake
 * HTTP transport that answers from a script and records every request it
 * sees, and a few string helpers. Everything a helper returns is owned by the
 * fake or the recorder and stays valid until fake_dispose / sleeps_reset. */
#ifndef ECW_TEST_SUPPORT_H
#define ECW_TEST_SUPPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <cmocka.h>

#include "account.h"
#include "auth.h"
#include "batch.h"
#include "client.h"
#include "date.h"
#include "entity.h"
#include "escape.h"
#include "http.h"
#include "jsonparse.h"
#include "request.h"
#include "resolve.h"
#include "response.h"
#include "status.h"
#include "token.h"
#include "xml.h"

/* assert_string_equal() crashes on NULL; this fails cleanly instead. */
#define assert_str(actual, expected)                                                                         \
	do {                                                                                                 \
		const char *str_a_ = (actual);                                                               \
		assert_non_null(str_a_);                                                                     \
		assert_string_equal(str_a_, (expected));                                                     \
	} while (0)

/* ---- sleeps -------------------------------------------------------------- */

#define SLEEP_LOG_MAX 64

/* Number of ecw_clock_sleep_ms calls since the last reset (may exceed SLEEP_LOG_MAX). */
size_t sleeps_count(void);
/* The i-th requested sleep (0-based, i < SLEEP_LOG_MAX). */
int64_t sleeps_at(size_t i);
void sleeps_reset(void);

/* ---- clock ---------------------------------------------------------------- */

/* The binaries also link with -Wl,--wrap=ecw_clock_now_ms: the real monotonic
 * clock until a test sets a fake time, which stays put until advanced. */
void clock_fake_set(int64_t ms);
void clock_fake_advance(int64_t ms);
void clock_real(void);
/* And with -Wl,--wrap=ecw_clock_wall_ms: the real wall clock (ECW_TEST_CLOCK
 * included) until a test fixes it at a Unix time in ms; wall_real() undoes. */
void wall_fake_set(int64_t unix_ms);
void wall_real(void);

/* ---- fake transport ------------------------------------------------------ */

#define FAKE_MAX_STEPS 128
#define FAKE_MAX_REQUESTS 128
#define FAKE_MAX_HEADERS 32

struct fake_step {
	int net_err; /* < 0: fail the attempt with this ecw_err, no response */
	long status;
	const char *headers; /* "Name: value\n" lines, may be NULL */
	const char *body;    /* may be NULL */
};

struct fake_request {
	char method[16];
	char *url;
	char *path; /* url without scheme, host and query */
	size_t nheaders;
	char *hname[FAKE_MAX_HEADERS];
	char *hvalue[FAKE_MAX_HEADERS];
	char *content_type; /* NULL when the request carried none */
	char *body;         /* NUL-terminated copy; NULL when there was none */
	size_t body_len;
	size_t answer_max; /* the request's own cap on its answer (0: by op) */
	/* When the account has a key: the Authorization header equals what
	 * ecw_auth_header computes for the request as sent. */
	bool auth_ok;
};

struct fake_transport {
	const struct ecw_account *acct;
	struct fake_step steps[FAKE_MAX_STEPS];
	size_t nsteps;
	size_t next;
	struct fake_step fallback; /* answer once the script is used up */
	bool has_fallback;
	size_t overruns; /* attempts made after the script ran out */
	struct fake_request reqs[FAKE_MAX_REQUESTS];
	size_t nreqs;
	int real_sleep_ms; /* really sleep this long inside the next attempt (once) */
};

void fake_init(struct fake_transport *f, const struct ecw_account *acct);
void fake_dispose(struct fake_transport *f);
/* Script the next answer; headers are "Name: value\n" lines. */
void fake_respond(struct fake_transport *f, long status, const char *headers, const char *body);
/* Script a network failure (e.g. ECW_ETRANSIENT for a reset). */
void fake_net_error(struct fake_transport *f, int err);
/* Answer every attempt after the script with this status (instead of 599). */
void fake_always(struct fake_transport *f, long status, const char *headers, const char *body);
void fake_always_net_error(struct fake_transport *f, int err);
/* The ecw_send_fn to give to ecw_client_set_transport with ctx = f. */
int fake_send(void *ctx, struct ecw_response *resp, const char *url, const struct ecw_request *r);

/* Case-insensitive header lookup in a recorded request; NULL when absent. */
const char *fake_header(const struct fake_request *q, const char *name);
/* Times a header (case-insensitive name) occurs in a recorded request. */
int fake_header_count(const struct fake_request *q, const char *name);

/* True when the URL's query string holds exactly the pair "name=value"
 * (compared as sent, i.e. percent-encoded). */
bool url_has_param(const char *url, const char *pair);
/* Number of parameters in the URL's query string. */
int url_nparams(const char *url);

/* A client on "UseDevelopmentStorage=true" whose transport is the fake. */
struct client_fixture {
	struct ecw_account *acct;
	struct ecw_client *c;
	struct fake_transport fake;
};

/* opts may be NULL. For cmocka setups: returns 0 or fails the test. */
int client_fixture_setup(struct client_fixture **out, const char *connstr,
                         const struct ecw_client_options *opts);
void client_fixture_teardown(struct client_fixture *fx);

/* ---- strings ------------------------------------------------------------- */

bool str_starts(const char *s, const char *prefix);
bool str_contains(const char *hay, const char *needle);
bool str_contains_ci(const char *hay, const char *needle);

/* Configuration text that must parse without a single error (file names it
 * in messages); fails the test printing every error otherwise. */
struct ecw_config;
struct ecw_node_errors;
void config_dump(const struct ecw_node_errors *errs);
struct ecw_config *config_parse_ok(const char *text, const char *file);
/* Configuration text that must be refused with an error at FILE:pos (a
 * "LINE:COL") that mentions needle; fails the test printing every error
 * otherwise. */
void config_parse_bad(const char *text, const char *file, const char *pos, const char *needle);

#endif
