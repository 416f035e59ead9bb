/* SPDX-License-Identifier: MIT */
/* poisonfx.h - the fixture of the tests of `ecworker poison list | replay | purge` (test_poison_list.c,
 * test_poison_replay.c), run as an operator runs them: cmocka's state owns a struct px (a job queue and
 * its poison queue, created, on the shared Azurite or on one of the test's own, and a client for them),
 * the config the command reads (px_write_config), the command run as a process (px_cmdv, px_cmd_expect),
 * poison envelopes built and put as the worker writes them (px_put_envelope, px_put_job,
 * px_put_job_answer), a queue read
 * back in full (px_read_queue) and compared with what was put (px_expect_poison_exactly), and the ids
 * `poison list --json` prints (px_list_ids). */
#ifndef ECW_POISONFX_H
#define ECW_POISONFX_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "itest.h"
#include "proc.h"

struct json_object;

/* ---- fixture ------------------------------------------------------------------------- */

struct px {
	struct proc_azurite az;
	bool private_az;
	const char *connstr;
	char env_conn[700]; /* ECW_TEST_CONNECTION_STRING=... for the processes */
	const char *env[2];
	struct ecw_account *acct;
	struct ecw_client *c;
	char queue[64], poison[80], table[64];
	bool queues_made, table_used;
	char cfg[640];
};

/* cmocka setups: fresh names, the job queue and poison queue created on the
 * shared Azurite (px_setup) or on an Azurite of the test's own (px_setup_private:
 * for hundreds of deletes, after which Azurite's queue GC stalls the whole
 * service; the shared one if it cannot start). */
int px_setup(void **state);
int px_setup_private(void **state);

/* cmocka teardown: kills what the test left running, deletes the queues and
 * the table (or stops the private Azurite) and frees *state. */
int px_teardown(void **state);

/* The configuration: the fixture's queues, and jobs (YAML lines under jobs:,
 * "%T" standing for the fixture's table). */
void px_write_config(struct px *x, const char *jobs);

/* Runs `poison SUB -c CFG ARGS...` (args NULL-terminated); returns the exit
 * code, *out and *err (may be NULL) what it printed. */
int px_cmdv(char **out, char **err, struct px *x, const char *sub, const char *const *args);

/* The same, failing unless it exits with want. */
void px_cmd_expect(char **out, char **err, struct px *x, int want, const char *sub, const char *const *args);

/* ---- messages ------------------------------------------------------------------------ */

/* Puts text on queue; id (may be NULL) receives the message id. */
void px_put_text(char *id, struct px *x, const char *queue, const char *text, size_t len);

/* A job message {"job":..,"pk":..,"rk":..} plus extra JSON members (may be ""). */
char *px_job_message(const char *job, const char *pk, const char *rk, const char *extra);

/* Every message of a queue, read with receive (hidden for 120 s), and,
 * when release is set, made visible again afterwards (text unchanged). */
struct px_qmsg {
	char id[64];
	char *text;
	size_t len;
};

struct px_qset {
	struct px_qmsg *v;
	size_t n, cap;
};

void px_qset_free(struct px_qset *s);
void px_read_queue(struct px_qset *out, struct px *x, const char *queue, bool release);
const struct px_qmsg *px_qset_find_id(const struct px_qset *s, const char *id);

/* How many messages of s have exactly this text. */
size_t px_qset_count_text(const struct px_qset *s, const char *text, size_t len);

/* What the test put on the poison queue: id and text. */
struct px_put {
	char id[64];
	char *text;
	size_t len;
	char *original; /* for envelopes: the original; foreign: NULL */
	size_t original_len;
};

/* The poison queue holds exactly the messages of want for which keep[i] is
 * true (keep NULL: all), same ids, same texts, and nothing else. */
void px_expect_poison_exactly(struct px *x, const struct px_put *want, size_t n, const bool *keep,
                              bool release);

long long px_queue_count(struct px *x, const char *queue);

/* Frees what each element holds; px_puts_free also the array. */
void px_puts_clear(struct px_put *p, size_t n);
void px_puts_free(struct px_put *p, size_t n);

/* Puts an envelope for original on the poison queue and records it. */
void px_put_envelope(struct px_put *p, struct px *x, const char *job, const char *reason, time_t failed_at,
                     const char *error, const char *original, size_t original_len, const char *pk,
                     const char *rk);

/* px_put_envelope for the job message {"job":job,"pk":pk,"rk":rk,extra}. */
void px_put_job(struct px_put *p, struct px *x, const char *job, const char *reason, time_t failed_at,
                const char *error, const char *pk, const char *rk, const char *extra);

/* The storage answer an envelope records (http_status, error_code; NULL: none). */
struct px_answer {
	int http_status;
	const char *error_code;
};

/* px_put_job without extra members, for a failure that had the storage answer
 * answer (NULL: none). */
void px_put_job_answer(struct px_put *p, struct px *x, const char *job, const char *reason, time_t failed_at,
                       const char *error, const struct px_answer *answer, const char *pk, const char *rk);

/* ---- listing ------------------------------------------------------------------------- */

/* strcmp for qsort and bsearch over an array of strings. */
int px_cmp_str(const void *a, const void *b);

struct px_idset {
	char **v;
	size_t n;
};

void px_idset_free(struct px_idset *s);

/* `poison list --json ARGS`: the ids it printed, sorted; every line must be a
 * JSON object with an "id" and "envelope". lines (may be NULL) receives the
 * objects, in order (put them). */
void px_list_ids(struct px_idset *out, struct px *x, const char *const *args, struct json_object **lines);

#endif
