/* SPDX-License-Identifier: MIT */
/* itest.h - shared helpers for the integration tests, which run against a real
 * Azurite started by tests/run-tests.sh: an account and client built from
 * ECW_TEST_CONNECTION_STRING, names no two tests share, and assertions that
 * print ecw_error_last() when a call fails. The fixture (struct itest) is
 * owned by cmocka's state pointer: itest_setup allocates it, itest_teardown
 * deletes the test's queue and table and frees it. */
#ifndef ECW_ITEST_H
#define ECW_ITEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ecw_err.h"
#include "ecw_storage.h"
#include "auth.h"
#include "client.h"
#include "escape.h"
#include "resolve.h"

/* Small, fast retries: base 10 ms, cap 100 ms, 4 tries. */
/* clang-format 14 and 19 lay a braced macro out differently: */
/* clang-format off */
#define ITEST_OPTIONS {4, 10, 100, 30000, 2000, false, NULL, NULL, NULL, NULL, false}
/* clang-format on */

#define ITEST_MAX_EXTRA 64

struct itest {
	struct ecw_account *acct;
	struct ecw_client *client;
	char queue[64];  /* unique queue name, not yet created */
	char table[64];  /* unique table name, not yet created */
	char table2[64]; /* a second unique table name, not yet created */
	char poison[64]; /* a unique poison queue name (itest_poison) */
	bool queue_used; /* set by itest_queue/itest_table: teardown deletes them */
	bool table_used;
	bool table2_used;
	bool poison_used;
	/* More queues and tables a test used (itest_extra_queue ...): teardown
	 * deletes them. */
	char extra_q[ITEST_MAX_EXTRA][64], extra_t[ITEST_MAX_EXTRA][64];
	int nq, nt;
};

/* cmocka setup/teardown: a fresh client and fresh names per test. */
int itest_setup(void **state);
int itest_teardown(void **state);

/* Creates the fixture's queue / tables and returns the name. */
const char *itest_queue(struct itest *t);
const char *itest_table(struct itest *t);
const char *itest_table2(struct itest *t);

/* Names teardown deletes, whoever creates them (the worker does, with
 * create_missing); none is created here. itest_poison: the fixture's poison
 * queue name. itest_extra_queue/itest_extra_table: one more unique name
 * (hint as in itest_unique_name). itest_keep_queue: a name made elsewhere.
 * At most ITEST_MAX_EXTRA of each kind. */
const char *itest_poison(struct itest *t);
const char *itest_extra_queue(struct itest *t, const char *hint);
const char *itest_extra_table(struct itest *t, const char *hint);
void itest_keep_queue(struct itest *t, const char *name);

/* ECW_TEST_CONNECTION_STRING, or a failed test with a clear message. */
const char *itest_connstr(void);

/* A connection string like the test one, with the AccountKey replaced (key
 * != NULL) and/or both endpoints moved to 127.0.0.1:port (port > 0).
 * Returns a heap string; free() it. */
char *itest_connstr_with(const char *key, int port);
/* The same with each endpoint moved on its own (a port <= 0 leaves it). */
char *itest_connstr_with_ports(const char *key, int queue_port, int table_port);

/* A local TCP port nothing listens on (bound, read and closed again). */
int itest_closed_port(void);

/* Account + client for a connection string, with options (NULL: ITEST_OPTIONS). */
void itest_client_for(struct ecw_account **acct, struct ecw_client **client, const char *connstr,
                      const struct ecw_client_options *opts);

/* A name unique across processes and tests. kind 'q': a queue name (lowercase
 * letters, digits, single dashes, 3..63); kind 't': a table name (letters and
 * digits, starting with a letter, 3..63). */
void itest_unique_name(char *out, size_t cap, char kind, const char *hint);

/* Every entity of table matching filter (NULL: all), in the service's order,
 * following continuation tokens; fails the test on any error. Free the
 * result with itest_entities_free. */
/* The entity at pk/rk, or NULL when there is none (any other error fails
 * the test). Free with ecw_entity_free. */
struct ecw_entity *itest_get_or_null(struct ecw_client *c, const char *table, const char *pk, const char *rk);
struct ecw_entity **itest_query_all(size_t *n, struct ecw_client *c, const char *table, const char *filter);
void itest_entities_free(struct ecw_entity **v, size_t n);

/* An entity as JSON for a failure message ("(none)" for NULL), cut at 8 KiB.
 * The text lives in one of 4 static slots, so up to 4 may appear in one
 * message; not thread-safe. */
const char *itest_entity_json(const struct ecw_entity *e);

/* Current stats of a client. */
struct ecw_client_stats itest_stats(const struct ecw_client *c);

void itest_sleep_ms(long ms);
int64_t itest_now_ms(void);

/* The last error came from the service: this HTTP status and service error
 * code (NULL: any non-empty code), a request id, and a message naming both. */
void itest_assert_service_error(int http_status, const char *service_code);

/* ecw_queue_delete_many through c on queue q (created here): six messages
 * received, the fourth updated since (its first receipt stale); the five
 * deleted and the fourth ECW_ENOTFOUND (the service's 400 or 404), told in
 * order, in six requests on one connection: pipelined, nothing sent again.
 * The queue then holds the fourth. */
void itest_check_delete_many(struct ecw_client *c, const char *q);

/* A copy of text (free() it) with its one occurrence of from replaced by
 * to; fails the test when text does not hold from. */
char *itest_replace(const char *text, const char *from, const char *to);

/* Formats the last error for a failure message. */
const char *itest_last_error(void);

/* ---- assertions ---------------------------------------------------------- */

/* expr must return 0; otherwise fail showing the code and the last error. */
#define ECW_ASSERT_OK(expr)                                                                                  \
	do {                                                                                                 \
		int itest_rc_ = (expr);                                                                      \
		if (itest_rc_ != 0)                                                                          \
			fail_msg("%s\n  returned %s (%d): %s", #expr, ecw_error_name(itest_rc_), itest_rc_,  \
			         itest_last_error());                                                        \
	} while (0)

/* expr must return exactly code. */
#define ECW_ASSERT_ERR(expr, code)                                                                           \
	do {                                                                                                 \
		int itest_rc_ = (expr);                                                                      \
		int itest_want_ = (code);                                                                    \
		if (itest_rc_ != itest_want_)                                                                \
			fail_msg("%s\n  returned %s (%d), expected %s (%d); last error: %s", #expr,          \
			         ecw_error_name(itest_rc_), itest_rc_, ecw_error_name(itest_want_),          \
			         itest_want_, itest_last_error());                                           \
	} while (0)

/* A message for non-ECW assertions. */
#define ITEST_CHECK(cond, ...)                                                                               \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			print_error("check failed: %s\n  ", #cond);                                          \
			fail_msg(__VA_ARGS__);                                                               \
		}                                                                                            \
	} while (0)

#endif
