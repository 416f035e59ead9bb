/* test_job_move.c - the move job (archive and restore) and job chaining
 * (`then:`), as a process: build/ecworker-test runs against the real Azurite
 * with a config written per test (its own queue, poison queue and tables), and
 * the tests judge it by what it leaves in the tables, the queues and its JSON
 * log. Covered: the happy path both ways; every message run twice; a source
 * in neither table; re-keying by templates (and a template the entity cannot
 * fill, which is permanent); a stale archive after a restore and messages
 * reordered (move is a command: see the notes there); duplicates racing in
 * two workers; a source changed between a run's read and its delete (a live
 * race that must hit the 412 path, and a crash after the copy followed by an
 * application update); a crash right after each step (ECW_CRASH_AT) and a
 * fresh worker converging to the no-crash state, never in both or neither
 * table; every EDM type under hostile keys through archive and restore;
 * follow-up jobs enqueued for the same keys; an application using the
 * official Azure SDK for JavaScript (tests/interop/sdk.js) on both ends; and
 * groups (messages of one partition run together with entity group
 * transactions): a receive moved in fewer writes than entities, with a
 * duplicate, a missing source and a refused transaction among them; a crash
 * after each group step; a member changed between the group's copy and its
 * delete.
 * Run one case with ECW_TEST_FILTER='test_job_move__crash*'; tests run from
 * the repository root (the SDK driver is found there). */
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobs_private.h"
#include "message.h"

extern char **environ;

/* ---- fixture ---------------------------------------------------------------------- */

struct mv {
	struct wfx fx;    /* first, for wfx_teardown; fx.t->table is Employees, fx.t->table2 the archive */
	const char *emp;  /* Employees (the source of archive-employee) */
	const char *arch; /* EmployeesArchive */
	const char *note; /* a third table, for follow-up jobs */
	struct ecw_client *c;
};

static int mv_setup(void **state)
{
	struct mv *m = wfx_new(sizeof(*m), WFX_QUEUE | WFX_TABLE | WFX_TABLE2);

	m->c = m->fx.t->client;
	m->emp = m->fx.t->table;
	m->arch = m->fx.t->table2;
	m->note = itest_extra_table(m->fx.t, "note");
	/* Creating the queue again succeeds. */
	ECW_ASSERT_OK(ecw_queue_create(NULL, m->c, m->fx.t->queue));
	*state = m;
	return 0;
}

static int mv_teardown(void **state)
{
	return wfx_teardown(state);
}

/* ---- the worker ------------------------------------------------------------------ */

/* The two jobs of the issue, on this test's tables. */
static const char *std_jobs(char *buf, size_t cap, const struct mv *m)
{
	int k = snprintf(buf, cap,
	                 "  archive-employee: {type: move, from: %s, to: %s}\n"
	                 "  restore-employee: {type: move, from: %s, to: %s}\n",
	                 m->emp, m->arch, m->arch, m->emp);
	assert_true(k > 0 && (size_t)k < cap);
	return buf;
}

struct wopts {
	int visibility_s, concurrency, batch_size;
	int metrics_port;     /* 0: metrics off */
	const char *crash_at; /* ECW_CRASH_AT, or NULL */
	const char *pause_at; /* ECW_TEST_PAUSE_AT ("point:ms"), or NULL */
};

#define WOPTS_DEFAULT                                                                                        \
	{                                                                                                    \
		30, 4, 16, 0, NULL, NULL                                                                     \
	}

/* Writes NAME.yaml and starts the worker with it. */
static void start_worker(struct proc *p, const struct mv *m, const char *name, const char *jobs,
                         const struct wopts *o)
{
	struct wfx_worker w = WFX_WORKER(m->fx.t->queue, m->fx.poison);
	char path[640], crash[96], pause[96];
	const char *env[3] = {NULL, NULL, NULL};
	int nenv = 0;

	w.batch_size = o->batch_size;
	w.concurrency = o->concurrency;
	w.visibility_s = o->visibility_s;
	w.metrics_port = o->metrics_port;
	w.jobs = jobs;
	wfx_write_config(path, sizeof(path), name, &w);
	const char *args[] = {"run", "-c", path, NULL};
	if (o->crash_at) {
		snprintf(crash, sizeof(crash), "ECW_CRASH_AT=%s", o->crash_at);
		env[nenv++] = crash;
	}
	if (o->pause_at) {
		snprintf(pause, sizeof(pause), "ECW_TEST_PAUSE_AT=%s", o->pause_at);
		env[nenv++] = pause;
	}
	proc_start(p, name, args, nenv ? env : NULL);
}

/* The nth "message" line for a message id (a copy of the field values is not
 * needed: the caller reads it before disposing of log). */
/* Starts a worker that must die at o->crash_at (exit 86, the test build's
 * crash status) and waits for it. */
static void start_crashing_worker(struct proc *p, const struct mv *m, const char *name, const char *jobs,
				  const struct wopts *o)
{
	start_worker(p, m, name, jobs, o);
	ITEST_CHECK(proc_wait(p, 15000), "the worker did not crash at %s; log:\n%s", o->crash_at,
	            proc_tail(p->log_path, 20));
	ITEST_CHECK(proc_exit_code(p) == 86, "exit status %d after %s, expected 86; log:\n%s", proc_exit_code(p),
	            o->crash_at, proc_tail(p->log_path, 20));
}

static struct json_object *msg_line(struct proc_log *log, const struct proc *p, const char *id,
                                    const char *outcome)
{
	struct json_object *l;

	proc_log_read(log, p->log_path);
	l = proc_log_find(log, 0, "message", "message_id", id, "outcome", outcome, NULL);
	ITEST_CHECK(l != NULL, "no '%s' line for message %s in %s:\n%s", outcome, id, p->log_path,
	            proc_tail(p->log_path, 20));
	return l;
}

/* The message for id succeeded with this detail ("" for none) and no error. */
static void expect_success(const struct proc *p, const char *id, const char *detail)
{
	struct proc_log log;
	struct json_object *l = msg_line(&log, p, id, "succeeded");

	ITEST_CHECK(strcmp(proc_field(l, "detail"), detail) == 0, "message %s: detail '%s', expected '%s'",
	            id, proc_field(l, "detail"), detail);
	ITEST_CHECK(proc_field(l, "error")[0] == '\0', "a success has no error: %s", proc_field(l, "error"));
	assert_int_equal(proc_log_count(&log, "message", "message_id", id, NULL), 1);
	proc_log_dispose(&log);
}

static void finish(struct proc *p)
{
	proc_stop(p, 10000);
	proc_assert_logs_clean();
}

/* ---- messages ---------------------------------------------------------------------- */

/* Puts {"job","pk","rk"[,"id"]} (base64 of it when asked) and returns the
 * queue's message id in id_out (64 bytes). */
static void put_job(struct mv *m, const char *job, const char *pk, const char *rk, const char *trace,
                    bool base64, char *id_out)
{
	struct ecw_buf text;
	struct ecw_queue_msg qm;

	ecw_buf_init(&text, 0);
	memset(&qm, 0, sizeof(qm));
	ECW_ASSERT_OK(ecw_message_encode(&text, job, pk, rk, trace, NULL, base64));
	ECW_ASSERT_OK(ecw_queue_put(&qm, m->c, m->fx.t->queue, text.ptr, text.len, NULL));
	if (id_out)
		memcpy(id_out, qm.id, sizeof(qm.id));
	ecw_buf_dispose(&text);
}

static long long queue_count(struct mv *m, const char *q)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, m->c, q));
	return n;
}

/* The poison envelopes (want of them), parsed; free with envelopes_free. */
static struct json_object **poison_envelopes(struct mv *m, size_t want)
{
	struct json_object **env = calloc(want + 1, sizeof(*env));
	size_t got = 0;
	int64_t end = itest_now_ms() + 10000;

	assert_non_null(env);
	while (got < want && itest_now_ms() < end) {
		struct ecw_queue_msg *q = NULL;
		size_t n = 0;
		ECW_ASSERT_OK(ecw_queue_receive(&q, &n, m->c, m->fx.poison, 32, 60));
		for (size_t i = 0; i < n && got < want; i++) {
			env[got] = json_tokener_parse(q[i].text);
			ITEST_CHECK(env[got] != NULL, "poison message is not JSON: %.300s", q[i].text);
			got++;
		}
		ecw_queue_msgs_free(q, n);
		if (got < want)
			itest_sleep_ms(100);
	}
	ITEST_CHECK(got == want, "%zu poison envelope(s), expected %zu", got, want);
	return env;
}

static void envelopes_free(struct json_object **env)
{
	for (size_t i = 0; env && env[i]; i++)
		json_object_put(env[i]);
	free(env);
}

static const char *env_str(struct json_object *e, const char *key)
{
	struct json_object *o;
	if (!json_object_object_get_ex(e, key, &o) || !json_object_is_type(o, json_type_string))
		return "";
	return json_object_get_string(o);
}

/* ---- entities ---------------------------------------------------------------------- */

/* An employee; version changes a few values, so versions differ. */
static struct ecw_entity *employee(const char *pk, const char *rk, int version)
{
	struct ecw_entity *e = NULL;
	char name[64];
	static const unsigned char photo[] = {0x00, 0x01, 0x00, 0xff, 0x00};

	snprintf(name, sizeof(name), "Zo\xc3\xab O'Brien v%d", version);
	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Name", name, strlen(name)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Email", "zoe@example.com", 15));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Version", version));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "HireYear", 2019));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "EmployeeNo", 9007199254740993LL));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Salary", 50000.0 + version));
	ECW_ASSERT_OK(ecw_entity_set_bool(e, "Active", version % 2 == 1));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "Hired", "2019-03-04T08:09:10.1234567Z"));
	ECW_ASSERT_OK(ecw_entity_set_guid(e, "BadgeId", "c9da6455-213d-42c9-9a79-3e9149a57833"));
	ECW_ASSERT_OK(ecw_entity_set_binary(e, "Photo", photo, sizeof(photo)));
	return e;
}

static void write_entity(struct mv *m, const char *table, const struct ecw_entity *e)
{
	ECW_ASSERT_OK(ecw_table_write(NULL, m->c, table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
}

/* The entity, or NULL when it does not exist; any other error fails. */
static struct ecw_entity *get_or_null(struct mv *m, const char *table, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	int err = ecw_table_get(&e, m->c, table, pk, rk);

	if (err == ECW_ENOTFOUND)
		return NULL;
	ECW_ASSERT_OK(err);
	return e;
}

static size_t table_rows(struct mv *m, const char *table)
{
	struct ecw_table_query *q = NULL;
	size_t n = 0;

	ECW_ASSERT_OK(ecw_table_query_new(&q, m->c, table, NULL));
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		ecw_entity_free(e);
		n++;
	}
	ecw_table_query_free(q);
	return n;
}

static bool prop_value_equal(const struct ecw_prop *a, const struct ecw_prop *b)
{
	switch (a->type) {
	case ECW_EDM_STRING:
	case ECW_EDM_DATETIME:
	case ECW_EDM_GUID:
		return a->len == b->len && memcmp(a->v.s, b->v.s, a->len) == 0;
	case ECW_EDM_BINARY:
		return a->len == b->len && (a->len == 0 || memcmp(a->v.bin, b->v.bin, a->len) == 0);
	case ECW_EDM_INT32:
		return a->v.i32 == b->v.i32;
	case ECW_EDM_INT64:
		return a->v.i64 == b->v.i64;
	case ECW_EDM_DOUBLE:
		return memcmp(&a->v.d, &b->v.d, sizeof(double)) == 0; /* NaN == NaN, -0 != 0 */
	case ECW_EDM_BOOLEAN:
		return a->v.b == b->v.b;
	}
	return false;
}

/* got has want's keys and exactly want's properties, type by type and value
 * by value (bitwise for doubles); each difference is named. */
static void assert_same_entity(const struct ecw_entity *want, const struct ecw_entity *got, const char *where)
{
	ITEST_CHECK(got != NULL, "%s: %s/%s is missing", where, ecw_entity_pk(want), ecw_entity_rk(want));
	ITEST_CHECK(strcmp(ecw_entity_pk(got), ecw_entity_pk(want)) == 0 &&
	                strcmp(ecw_entity_rk(got), ecw_entity_rk(want)) == 0,
	            "%s: keys '%s'/'%s', expected '%s'/'%s'", where, ecw_entity_pk(got), ecw_entity_rk(got),
	            ecw_entity_pk(want), ecw_entity_rk(want));
	for (size_t i = 0; i < ecw_entity_count(want); i++) {
		const struct ecw_prop *a = ecw_entity_at(want, i), *b = ecw_entity_get(got, a->name);
		ITEST_CHECK(b != NULL, "%s: %s/%s lost property %s", where, ecw_entity_pk(want),
		            ecw_entity_rk(want), a->name);
		ITEST_CHECK(b->type == a->type, "%s: %s is %s, expected %s", where, a->name,
		            ecw_entity_edm_name(b->type), ecw_entity_edm_name(a->type));
		ITEST_CHECK(prop_value_equal(a, b), "%s: %s (%s) changed value", where, a->name,
		            ecw_entity_edm_name(a->type));
	}
	ITEST_CHECK(ecw_entity_count(got) == ecw_entity_count(want), "%s: %zu properties, expected %zu",
	            where, ecw_entity_count(got), ecw_entity_count(want));
	ITEST_CHECK(ecw_entity_equal(want, got), "%s: ecw_entity_equal says they differ", where);
}

/* want is in `in` (identical) and absent from `out`: moved, never in both or
 * neither. */
static void assert_only_in(struct mv *m, const char *in, const char *out, const struct ecw_entity *want,
                           const char *where)
{
	struct ecw_entity *a = get_or_null(m, in, ecw_entity_pk(want), ecw_entity_rk(want));
	struct ecw_entity *b = get_or_null(m, out, ecw_entity_pk(want), ecw_entity_rk(want));

	ITEST_CHECK(a != NULL || b != NULL, "%s: %s/%s is in NEITHER table (lost)", where,
	            ecw_entity_pk(want), ecw_entity_rk(want));
	ITEST_CHECK(b == NULL, "%s: %s/%s is still in %s", where, ecw_entity_pk(want), ecw_entity_rk(want),
	            out);
	assert_same_entity(want, a, where);
	ecw_entity_free(a);
	ecw_entity_free(b);
}

/* ---- 1. the happy path ------------------------------------------------------------------- */

static void test_job_move__archive_happy_path(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e = employee("Sales", "o'brien 001", 1),
	                  *other = employee("Sales", "o'brien 002", 1);
	char jobs[512], id[64];
	struct proc p;

	write_entity(m, m->emp, e);
	write_entity(m, m->emp, other);
	put_job(m, "archive-employee", "Sales", "o'brien 001", "t-1", false, id);
	start_worker(&p, m, "move-happy", std_jobs(jobs, sizeof(jobs), m), &o);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
	expect_success(&p, id, "");

	assert_only_in(m, m->arch, m->emp, e, "archived");
	/* Only that one moved. */
	assert_only_in(m, m->emp, m->arch, other, "neighbour");
	assert_int_equal(table_rows(m, m->arch), 1);
	assert_int_equal(table_rows(m, m->emp), 1);
	assert_int_equal(queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(queue_count(m, m->fx.poison), 0);
	finish(&p);
	ecw_entity_free(e);
	ecw_entity_free(other);
}

/* Run twice: the second finds no source and succeeds without writing. The
 * target's keys are the source's, so one read tells it was moved already:
 * logged "already-moved" ("missing" is for an entity that was never
 * anywhere). The archived copy is untouched (same ETag). */
static void test_job_move__run_twice(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e = employee("Sales", "Zo\xc3\xab 7", 3), *copy;
	char jobs[512], id1[64], id2[64], *etag;
	struct proc p;

	write_entity(m, m->emp, e);
	start_worker(&p, m, "move-twice", std_jobs(jobs, sizeof(jobs), m), &o);
	put_job(m, "archive-employee", "Sales", "Zo\xc3\xab 7", NULL, false, id1);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	expect_success(&p, id1, "");
	copy = get_or_null(m, m->arch, "Sales", "Zo\xc3\xab 7");
	assert_non_null(copy);
	etag = strdup(ecw_entity_etag(copy));
	ecw_entity_free(copy);

	/* The same message again (base64 this time: the same job). */
	put_job(m, "archive-employee", "Sales", "Zo\xc3\xab 7", NULL, true, id2);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	expect_success(&p, id2, "already-moved");

	assert_only_in(m, m->arch, m->emp, e, "after the second run");
	copy = get_or_null(m, m->arch, "Sales", "Zo\xc3\xab 7");
	ITEST_CHECK(strcmp(ecw_entity_etag(copy), etag) == 0,
	            "the second run rewrote the copy (ETag %s, was %s)", ecw_entity_etag(copy), etag);
	assert_int_equal(queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(queue_count(m, m->fx.poison), 0);
	finish(&p);
	free(etag);
	ecw_entity_free(copy);
	ecw_entity_free(e);
}

/* In neither table: success, detail "missing", nothing created anywhere. */
static void test_job_move__missing_in_both(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	char jobs[512], id[64];
	struct proc p;

	start_worker(&p, m, "move-missing", std_jobs(jobs, sizeof(jobs), m), &o);
	put_job(m, "archive-employee", "Nowhere", "ghost 404", "t-ghost", false, id);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
	expect_success(&p, id, "missing");
	assert_int_equal(table_rows(m, m->emp), 0);
	assert_int_equal(table_rows(m, m->arch), 0);
	assert_int_equal(queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(queue_count(m, m->fx.poison), 0);
	finish(&p);
}

/* Archive, then restore: back in Employees exactly as it was. */
static void test_job_move__archive_then_restore(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e = employee("Sales", "a+b&c=d%", 2);
	char jobs[512], id1[64], id2[64];
	struct proc p;

	write_entity(m, m->emp, e);
	start_worker(&p, m, "move-restore", std_jobs(jobs, sizeof(jobs), m), &o);
	put_job(m, "archive-employee", "Sales", "a+b&c=d%", NULL, false, id1);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	expect_success(&p, id1, "");
	assert_only_in(m, m->arch, m->emp, e, "archived");

	put_job(m, "restore-employee", "Sales", "a+b&c=d%", NULL, false, id2);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	expect_success(&p, id2, "");
	assert_only_in(m, m->emp, m->arch, e, "restored");
	assert_int_equal(table_rows(m, m->arch), 0);
	finish(&p);
	ecw_entity_free(e);
}

/* ---- 2. re-keying ------------------------------------------------------------------------ */

/* A clone of e under other keys: what a re-keyed copy must be. */
static struct ecw_entity *rekeyed(const struct ecw_entity *e, const char *pk, const char *rk)
{
	struct ecw_entity *c = NULL;
	ECW_ASSERT_OK(ecw_entity_clone(&c, e));
	ECW_ASSERT_OK(ecw_entity_set_keys(c, pk, rk));
	return c;
}

static void test_job_move__rekey_by_template(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	char jobs[1024], id[5][64];
	struct proc p;
	struct ecw_entity *a = employee("Sales", "o'brien 001", 1), *b = employee("Sales", "Zo\xc3\xab 7", 2);
	struct ecw_entity *noyear = employee("Sales", "no-year", 1), *slash = employee("Sales", "slash", 1);

	ECW_ASSERT_OK(ecw_entity_set_string(a, "Dept", "Sales", 5));
	ECW_ASSERT_OK(ecw_entity_set_int64(b, "HireYear", 2021)); /* Int64 renders as digits too */
	assert_true(ecw_entity_remove(noyear, "HireYear"));
	/* A value the service forbids in a key: refused before any write. */
	ECW_ASSERT_OK(ecw_entity_set_string(slash, "HireYear", "20/19", 5));
	write_entity(m, m->emp, a);
	write_entity(m, m->emp, b);
	write_entity(m, m->emp, noyear);
	write_entity(m, m->emp, slash);
	snprintf(jobs, sizeof(jobs),
	         "  archive-by-year: {type: move, from: %s, to: %s, to_partition_key: \"{HireYear}\", "
	         "to_row_key: \"{RowKey}\"}\n"
	         "  restore-by-dept: {type: move, from: %s, to: %s, to_partition_key: \"{Dept}\"}\n",
	         m->emp, m->arch, m->arch, m->emp);
	put_job(m, "archive-by-year", "Sales", "o'brien 001", NULL, false, id[0]);
	put_job(m, "archive-by-year", "Sales", "Zo\xc3\xab 7", NULL, false, id[1]);
	put_job(m, "archive-by-year", "Sales", "no-year", NULL, false, id[2]);
	put_job(m, "archive-by-year", "Sales", "slash", NULL, false, id[3]);
	start_worker(&p, m, "move-rekey", jobs, &o);
	for (int i = 0; i < 2; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded");
	for (int i = 2; i < 4; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "poisoned", "reason",
		                "permanent");

	struct ecw_entity *ra = rekeyed(a, "2019", "o'brien 001"), *rb = rekeyed(b, "2021", "Zo\xc3\xab 7");
	assert_only_in(m, m->arch, m->emp, ra, "re-keyed by HireYear (Int32)");
	assert_only_in(m, m->arch, m->emp, rb, "re-keyed by HireYear (Int64)");
	ITEST_CHECK(get_or_null(m, m->emp, "Sales", "o'brien 001") == NULL, "the source stayed");
	/* The two it could not key stay where they are, untouched, and nothing
	 * half-made appears in the archive. */
	assert_only_in(m, m->emp, m->arch, noyear, "no HireYear");
	assert_only_in(m, m->emp, m->arch, slash, "HireYear with a slash");
	assert_int_equal(table_rows(m, m->arch), 2);

	/* The errors name what is wrong: the property, and the key result. */
	struct proc_log log;
	struct json_object *l = msg_line(&log, &p, id[2], "poisoned");
	ITEST_CHECK(strstr(proc_field(l, "error"), "HireYear") != NULL, "error '%s' does not name HireYear",
	            proc_field(l, "error"));
	proc_log_dispose(&log);
	l = msg_line(&log, &p, id[3], "poisoned");
	ITEST_CHECK(strstr(proc_field(l, "error"), "to_partition_key") != NULL,
	            "error '%s' does not name to_partition_key", proc_field(l, "error"));
	proc_log_dispose(&log);
	struct json_object **env = poison_envelopes(m, 2);
	for (int i = 0; i < 2; i++) {
		ITEST_CHECK(strcmp(env_str(env[i], "reason"), "permanent") == 0, "reason %s",
		            env_str(env[i], "reason"));
		ITEST_CHECK(strcmp(env_str(env[i], "job"), "archive-by-year") == 0, "job %s",
		            env_str(env[i], "job"));
	}
	envelopes_free(env);

	/* And back, re-keyed by a property the other way. */
	put_job(m, "restore-by-dept", "2019", "o'brien 001", NULL, false, id[4]);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[4], "outcome", "succeeded");
	assert_only_in(m, m->emp, m->arch, a, "restored by Dept");
	assert_int_equal(table_rows(m, m->arch), 1);
	finish(&p);
	ecw_entity_free(a);
	ecw_entity_free(b);
	ecw_entity_free(ra);
	ecw_entity_free(rb);
	ecw_entity_free(noyear);
	ecw_entity_free(slash);
}

/* Archive re-keyed newest first: to_row_key "{HireDate:inverted_ticks}_{RowKey}"
 * puts the most recent hire first in the archive's key order, which is the
 * order a query returns, down to one tick (7 fractional digits); each key
 * gives its hire date back, and every entity arrives whole. */
static void test_job_move__rekey_newest_first(void **state)
{
	static const char *const hired[] = {
		"2019-03-04T08:09:10.1234567Z", "2021-06-30T23:59:59.9999999Z", "1999-12-31T00:00:00.0000000Z",
		"2021-06-30T23:59:59.9999998Z", "2020-10-11T12:34:56.0000001Z",
	};
	enum { N = sizeof(hired) / sizeof(hired[0]) };
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e[N];
	char jobs[512], id[N][64], rk[32];
	struct proc p;

	for (int i = 0; i < N; i++) {
		snprintf(rk, sizeof(rk), "emp %d", i);
		e[i] = employee("Sales", rk, 1);
		ECW_ASSERT_OK(ecw_entity_set_datetime(e[i], "HireDate", hired[i]));
		write_entity(m, m->emp, e[i]);
		put_job(m, "archive-newest-first", "Sales", rk, NULL, false, id[i]);
	}
	snprintf(jobs, sizeof(jobs),
	         "  archive-newest-first: {type: move, from: %s, to: %s, "
	         "to_row_key: \"{HireDate:inverted_ticks}_{RowKey}\"}\n",
	         m->emp, m->arch);
	start_worker(&p, m, "move-newest-first", jobs, &o);
	for (int i = 0; i < N; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded");

	size_t n = 0;
	struct ecw_entity **got = itest_query_all(&n, m->c, m->arch, "PartitionKey eq 'Sales'");
	assert_int_equal(n, N);
	/* Newest first: 2021 (.9999999, then .9999998), 2020, 2019, 1999. */
	static const int order[N] = {1, 3, 4, 0, 2};
	for (int k = 0; k < N; k++) {
		const char *key = ecw_entity_rk(got[k]);
		char iso[ECW_ISO_TICKS_SIZE], want_rk[64];
		ECW_ASSERT_OK(ecw_inverted_ticks_to_iso(iso, key));
		ITEST_CHECK(strcmp(iso, hired[order[k]]) == 0, "archive row %d is %s (%s), expected hire date %s", k,
		            key, iso, hired[order[k]]);
		snprintf(want_rk, sizeof(want_rk), "%.19s_emp %d", key, order[k]);
		ITEST_CHECK(strcmp(key, want_rk) == 0, "archive row %d key %s, expected %s", k, key, want_rk);
		struct ecw_entity *r = rekeyed(e[order[k]], "Sales", key);
		assert_only_in(m, m->arch, m->emp, r, "archived newest first");
		ecw_entity_free(r);
	}
	itest_entities_free(got, n);
	assert_int_equal(table_rows(m, m->emp), 0);
	finish(&p);
	for (int i = 0; i < N; i++)
		ecw_entity_free(e[i]);
}

/* Re-keying inside one table (from == to): the usual case moves the entity to
 * its new keys; an entity whose keys already are what the templates render
 * (a message for an employee already re-keyed) must be left as it is and the
 * message succeed. A copy onto the source replaces it (new ETag), so deleting
 * the source "as read" can only fail with 412; starting over cannot help, and
 * deleting it without If-Match would delete the only copy. */
static void test_job_move__rekey_in_place(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	char jobs[512], id1[64], id2[64];
	struct proc p;
	struct proc_log log;
	struct json_object *l;
	struct ecw_entity *old = employee("Old", "x 1", 1), *there = employee("Sales", "x 2", 1);

	ECW_ASSERT_OK(ecw_entity_set_string(old, "Dept", "Sales", 5));
	ECW_ASSERT_OK(ecw_entity_set_string(there, "Dept", "Sales", 5));
	write_entity(m, m->emp, old);
	write_entity(m, m->emp, there);
	snprintf(jobs, sizeof(jobs),
	         "  by-dept: {type: move, from: %s, to: %s, to_partition_key: \"{Dept}\"}\n", m->emp, m->emp);
	put_job(m, "by-dept", "Old", "x 1", NULL, false, id1);
	put_job(m, "by-dept", "Sales", "x 2", NULL, false, id2);
	start_worker(&p, m, "move-in-place", jobs, &o);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	struct ecw_entity *moved = rekeyed(old, "Sales", "x 1");
	struct ecw_entity *a = get_or_null(m, m->emp, "Sales", "x 1"),
	                  *b = get_or_null(m, m->emp, "Old", "x 1");
	assert_same_entity(moved, a, "re-keyed in place");
	ITEST_CHECK(b == NULL, "the old keys are still there");
	ecw_entity_free(a);
	ecw_entity_free(moved);

	/* Already at its keys: the first delivery must settle it. What it
	 * did is read first and checked after cleaning up, so that this known
	 * failure (see the report) leaks nothing under the sanitizers. */
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", PROC_ANY);
	char outcome[32], error[512];
	proc_log_read(&log, p.log_path);
	l = proc_log_find(&log, 0, "message", "message_id", id2, NULL);
	snprintf(outcome, sizeof(outcome), "%s", proc_field(l, "outcome"));
	snprintf(error, sizeof(error), "%s", proc_field(l, "error"));
	proc_log_dispose(&log);
	a = get_or_null(m, m->emp, "Sales", "x 2");
	bool same = a && ecw_entity_equal(a, there);
	ecw_entity_free(a);
	ecw_entity_free(old);
	ecw_entity_free(there);
	proc_stop(&p, 10000);
	ITEST_CHECK(same, "the entity already at its keys was deleted or changed");
	ITEST_CHECK(strcmp(outcome, "succeeded") == 0,
	            "a message for an entity already at its target keys: outcome '%s' (error '%s'), expected "
	            "succeeded at the first delivery",
	            outcome, error);
	proc_assert_logs_clean();
}

/* ---- 3. stale and reordered messages ------------------------------------------------------- */

/* The application archives, then restores; then a stale copy of the archive
 * message arrives (a redelivery of a message whose worker died after the
 * delete but before removing the message, say). A move is a command with no
 * version in it, so move.c moves the employee again: the restore is undone.
 * That is what is asserted here, as the implemented behaviour; the report
 * questions it (the issue wants jobs to converge on the current state). */
static void test_job_move__stale_archive_after_restore_moves_again(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e = employee("Sales", "o'brien 001", 1);
	char jobs[512], id1[64], id2[64], id3[64];
	struct proc p;

	write_entity(m, m->emp, e);
	start_worker(&p, m, "move-stale", std_jobs(jobs, sizeof(jobs), m), &o);
	put_job(m, "archive-employee", "Sales", "o'brien 001", "archive-1", false, id1);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	put_job(m, "restore-employee", "Sales", "o'brien 001", "restore-1", false, id2);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	assert_only_in(m, m->emp, m->arch, e, "restored");

	put_job(m, "archive-employee", "Sales", "o'brien 001", "archive-1", false, id3);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id3, "outcome", "succeeded");
	expect_success(&p, id3, "");
	assert_only_in(m, m->arch, m->emp, e, "the stale archive moved it again");
	finish(&p);
	ecw_entity_free(e);
}

/* Reordered: the restore arrives before the archive it undoes. The restore
 * finds no source and the entity already in Employees ("already-moved"),
 * the archive then moves: the end state is
 * "archived", whatever order the application meant. Still never lost. */
static void test_job_move__reordered_restore_before_archive(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e = employee("Sales", "late", 1);
	char jobs[512], id1[64], id2[64];
	struct proc p;

	write_entity(m, m->emp, e);
	start_worker(&p, m, "move-reorder", std_jobs(jobs, sizeof(jobs), m), &o);
	put_job(m, "restore-employee", "Sales", "late", NULL, false, id1);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	expect_success(&p, id1, "already-moved");
	assert_only_in(m, m->emp, m->arch, e, "restore before archive changes nothing");
	put_job(m, "archive-employee", "Sales", "late", NULL, false, id2);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	expect_success(&p, id2, "");
	assert_only_in(m, m->arch, m->emp, e, "archived");
	finish(&p);
	ecw_entity_free(e);
}

/* ---- 4. duplicates racing ------------------------------------------------------------------- */

/* Eight employees, each archive message three times, two workers with four
 * threads each: runs copy the same content and race to delete; If-Match lets
 * one delete win, the others see 404 or no source. All succeed, nothing is
 * retried or poisoned, every employee ends in the archive exactly. */
#define DUP_N 8
#define DUP_TIMES 3

static void test_job_move__duplicates_in_two_workers(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e[DUP_N];
	char jobs[512], rk[32];
	struct proc p1, p2;

	for (int i = 0; i < DUP_N; i++) {
		snprintf(rk, sizeof(rk), "dup %02d", i);
		e[i] = employee("Sales", rk, i);
		write_entity(m, m->emp, e[i]);
	}
	for (int k = 0; k < DUP_TIMES; k++)
		for (int i = 0; i < DUP_N; i++)
			put_job(m, "archive-employee", "Sales", ecw_entity_rk(e[i]), NULL, k == 1, NULL);
	std_jobs(jobs, sizeof(jobs), m);
	start_worker(&p1, m, "move-dup-1", jobs, &o);
	start_worker(&p2, m, "move-dup-2", jobs, &o);

	int64_t end = itest_now_ms() + 20000;
	size_t n1 = 0, n2 = 0;
	while (itest_now_ms() < end) {
		n1 = proc_count(&p1, "message", "outcome", "succeeded", NULL);
		n2 = proc_count(&p2, "message", "outcome", "succeeded", NULL);
		if (n1 + n2 >= DUP_N * DUP_TIMES)
			break;
		itest_sleep_ms(100);
	}
	ITEST_CHECK(n1 + n2 == DUP_N * DUP_TIMES, "%zu + %zu messages succeeded, expected %d", n1, n2,
	            DUP_N * DUP_TIMES);
	assert_int_equal(proc_count(&p1, "message", "outcome", "retried", NULL) +
	                     proc_count(&p2, "message", "outcome", "retried", NULL),
	                 0);
	assert_int_equal(queue_count(m, m->fx.poison), 0);
	for (int i = 0; i < DUP_N; i++) {
		assert_only_in(m, m->arch, m->emp, e[i], "after duplicates");
		ecw_entity_free(e[i]);
	}
	assert_int_equal(table_rows(m, m->arch), DUP_N);
	assert_int_equal(table_rows(m, m->emp), 0);
	finish(&p1);
	finish(&p2);
}

/* ---- 5. changed between read and delete ----------------------------------------------------- */

struct updater {
	const char *table, *pk, *rk;
	atomic_bool stop;
	long long last_ok; /* the Version of the last update the service accepted */
	long long attempts;
	int pause_ms;
	int err; /* 0, or the error that ended it other than 404 */
	char error[600];
};

/* An application updating the employee every pause_ms, only while it exists
 * (If-Match: *), until the move deletes it, it is told to stop, or 4 s pass. */
static void *updater_main(void *arg)
{
	struct updater *u = arg;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	int64_t end = itest_now_ms() + 4000;

	if (ecw_account_parse(&acct, itest_connstr()) < 0 || ecw_client_new(&c, acct, NULL) < 0) {
		u->err = ECW_EINVALID;
		snprintf(u->error, sizeof(u->error), "client: %s", ecw_error_last()->message);
		goto done;
	}
	for (long long v = 2; !atomic_load(&u->stop) && itest_now_ms() < end; v++) {
		struct ecw_entity *e = employee(u->pk, u->rk, (int)v);
		int err = ecw_table_write(NULL, c, u->table, e, ECW_WRITE_UPDATE, "*");
		ecw_entity_free(e);
		u->attempts++;
		if (err == ECW_ENOTFOUND)
			break; /* moved: the application would now see it archived */
		if (err < 0) {
			u->err = err;
			snprintf(u->error, sizeof(u->error), "%s", ecw_error_last()->message);
			break;
		}
		u->last_ok = v;
		/* An application, not a flood: a flood livelocks any
		 * read-then-conditional-delete (each round loses to the next
		 * update; the job is then retried after backoff, which is
		 * right, but not what this test is about). */
		itest_sleep_ms(u->pause_ms);
	}
done:
	ecw_client_free(c);
	ecw_account_free(acct);
	return NULL;
}

/* The live race: an application keeps updating the employee while the
 * archive runs. Whatever interleaving happens, the archive must end with the
 * last version the application successfully wrote (never an older one: that
 * version would be lost), and the worker must have hit at least one 412 on
 * the delete (so the "start over with the newer version" path really ran;
 * the metrics endpoint counts storage answers by operation and status). */
#define RACERS 4

static void test_job_move__source_changed_during_move_is_never_lost(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	char jobs[512], rk[RACERS][32], id[RACERS][64], *page = NULL;
	struct proc p;
	long long conflicts = 0;
	int round;

	o.concurrency = RACERS;
	o.metrics_port = proc_free_port();
	start_worker(&p, m, "move-race", std_jobs(jobs, sizeof(jobs), m), &o);
	PROC_EXPECT_LOG(&p, 1, 10000, "start");
	/* Each round races RACERS employees, each with its own updater; about
	 * half of the races see a 412, so the first round nearly always has one
	 * and further rounds run only until one did. */
	for (round = 0; round < 5 && conflicts == 0; round++) {
		struct updater u[RACERS];
		pthread_t th[RACERS];

		memset(u, 0, sizeof(u));
		for (int i = 0; i < RACERS; i++) {
			struct ecw_entity *v1;
			snprintf(rk[i], sizeof(rk[i]), "racer %d.%d", round, i);
			u[i] = (struct updater){
			    .table = m->emp, .pk = "Race", .rk = rk[i], .pause_ms = 5, .last_ok = 1};
			v1 = employee("Race", rk[i], 1);
			write_entity(m, m->emp, v1);
			ecw_entity_free(v1);
			assert_int_equal(pthread_create(&th[i], NULL, updater_main, &u[i]), 0);
		}
		itest_sleep_ms(30);
		for (int i = 0; i < RACERS; i++)
			put_job(m, "archive-employee", "Race", rk[i], NULL, false, id[i]);
		for (int i = 0; i < RACERS; i++)
			PROC_EXPECT_LOG(&p, 1, 20000, "message", "message_id", id[i], "outcome", "succeeded");
		for (int i = 0; i < RACERS; i++) {
			/* Most updaters have stopped on their own (404: moved). */
			atomic_store(&u[i].stop, true);
			pthread_join(th[i], NULL);
		}
		for (int i = 0; i < RACERS; i++) {
			ITEST_CHECK(u[i].err == 0, "updater %d failed: %s (%s)", i, ecw_err_name(u[i].err),
			            u[i].error);
			/* The last version the application saw accepted is the
			 * archived one; an update (If-Match: *) cannot recreate
			 * the source after the move deleted it. */
			struct ecw_entity *want = employee("Race", rk[i], (int)u[i].last_ok);
			assert_only_in(m, m->arch, m->emp, want, "after the race");
			ecw_entity_free(want);
		}
		free(page);
		page = NULL;
		assert_int_equal(proc_http_get(&page, o.metrics_port, "/metrics"), 200);
		conflicts = (long long)proc_metric(page, "ecw_storage_requests_total", NULL,
		                                   "op=\"table.delete\"", "status=\"412\"", NULL);
		print_message("  round %d: %lld+%lld+%lld+%lld updates, %lld deletes answered 412 so far\n",
		              round, u[0].attempts, u[1].attempts, u[2].attempts, u[3].attempts, conflicts);
	}
	ITEST_CHECK(conflicts > 0,
	            "no delete ever failed with 412 in %d rounds: the retry path did not run; "
	            "metrics:\n%s",
	            round, page);
	free(page);
	finish(&p);
}

/* The crash variant the issue describes: the worker dies right after the copy
 * (both tables hold v1), the application then changes the source (v2), and a
 * fresh worker gets the redelivered message. The archive must end with v2 and
 * the source gone: the fresh run reads v2, so the stale copy is replaced. */
static void test_job_move__changed_after_copy_then_crash(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *v1 = employee("Sales", "o'brien 001", 1),
	                  *v2 = employee("Sales", "o'brien 001", 2);
	char jobs[512], id[64];
	struct proc p1, p2;

	o.visibility_s = 2;
	std_jobs(jobs, sizeof(jobs), m);
	write_entity(m, m->emp, v1);
	put_job(m, "archive-employee", "Sales", "o'brien 001", NULL, false, id);
	o.crash_at = "move.copied";
	start_worker(&p1, m, "move-changed-crash", jobs, &o);
	ITEST_CHECK(proc_wait(&p1, 15000), "the worker did not crash at move.copied; log:\n%s",
	            proc_tail(p1.log_path, 20));
	assert_int_equal(proc_exit_code(&p1), 86);
	/* Right after the copy: in both, identical. */
	struct ecw_entity *a = get_or_null(m, m->arch, "Sales", "o'brien 001");
	struct ecw_entity *s = get_or_null(m, m->emp, "Sales", "o'brien 001");
	assert_same_entity(v1, a, "the copy after the crash");
	assert_same_entity(v1, s, "the source after the crash");
	ecw_entity_free(a);
	ecw_entity_free(s);

	ECW_ASSERT_OK(ecw_table_write(NULL, m->c, m->emp, v2, ECW_WRITE_UPDATE, "*"));
	o.crash_at = NULL;
	start_worker(&p2, m, "move-changed-rerun", jobs, &o);
	PROC_EXPECT_LOG(&p2, 1, 15000, "message", "message_id", id, "outcome", "succeeded", "dequeue_count",
	                "2");
	expect_success(&p2, id, "");
	assert_only_in(m, m->arch, m->emp, v2, "the newer version won");
	assert_int_equal(queue_count(m, m->fx.t->queue), 0);
	finish(&p2);
	ecw_entity_free(v1);
	ecw_entity_free(v2);
}

/* ---- 6. a crash after each step ---------------------------------------------------------- */

enum where { IN_SOURCE, IN_BOTH, IN_TARGET };

/* Starts a worker that dies right after `point`, checks where the entity is
 * then, and starts a fresh worker that must converge to the no-crash state
 * (only in the archive, identical) on the redelivered message. */
static void crash_after(struct mv *m, const char *point, enum where then, const char *rerun_detail)
{
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e = employee("a+b&c=d%", "o'brien 001", 5);
	char jobs[512], id[64], name[64];
	struct proc p1, p2;

	o.visibility_s = 2; /* the redelivery comes quickly */
	std_jobs(jobs, sizeof(jobs), m);
	write_entity(m, m->emp, e);
	put_job(m, "archive-employee", "a+b&c=d%", "o'brien 001", NULL, false, id);
	o.crash_at = point;
	snprintf(name, sizeof(name), "move-crash-%s", point + 5);
	start_crashing_worker(&p1, m, name, jobs, &o);
	/* Dead: it logged no outcome, and the message is still there. */
	assert_int_equal(proc_count(&p1, "message", NULL), 0);
	assert_int_equal(queue_count(m, m->fx.t->queue), 1);

	struct ecw_entity *s = get_or_null(m, m->emp, "a+b&c=d%", "o'brien 001");
	struct ecw_entity *a = get_or_null(m, m->arch, "a+b&c=d%", "o'brien 001");
	ITEST_CHECK(s || a, "after %s: in neither table", point);
	if (then == IN_SOURCE || then == IN_BOTH)
		assert_same_entity(e, s, "the source after the crash");
	else
		ITEST_CHECK(s == NULL, "after %s the source is still there", point);
	if (then == IN_TARGET || then == IN_BOTH)
		assert_same_entity(e, a, "the copy after the crash");
	else
		ITEST_CHECK(a == NULL, "after %s a copy exists already", point);
	ecw_entity_free(s);
	ecw_entity_free(a);

	o.crash_at = NULL;
	snprintf(name, sizeof(name), "move-rerun-%s", point + 5);
	start_worker(&p2, m, name, jobs, &o);
	PROC_EXPECT_LOG(&p2, 1, 15000, "message", "message_id", id, "outcome", "succeeded", "dequeue_count",
	                "2");
	expect_success(&p2, id, rerun_detail);
	/* The no-crash end state: only in the archive, identical. */
	assert_only_in(m, m->arch, m->emp, e, point);
	assert_int_equal(table_rows(m, m->arch), 1);
	assert_int_equal(table_rows(m, m->emp), 0);
	assert_int_equal(queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(queue_count(m, m->fx.poison), 0);
	finish(&p2);
	ecw_entity_free(e);
}

static void test_job_move__crash_after_read(void **state)
{
	crash_after(*state, "move.read", IN_SOURCE, "");
}

static void test_job_move__crash_after_copied(void **state)
{
	crash_after(*state, "move.copied", IN_BOTH, "");
}

static void test_job_move__crash_after_deleted(void **state)
{
	/* The rerun finds no source: already moved. */
	crash_after(*state, "move.deleted", IN_TARGET, "already-moved");
}

/* ---- 7. type fidelity under hostile keys ------------------------------------------------------ */

static struct ecw_entity *every_type(const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	static const char multi[] =
	    "Zo\xc3\xab \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 'q' \"d\" <&>";
	static const unsigned char bytes[] = {0x00, 0x00, 0x01, 0x00, 0xff, 0x7f, 0x80, 0x00};

	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Str", multi, strlen(multi)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Empty", "", 0));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Digits", "00123", 5)); /* a String, never a number */
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "I32", -2147483647 - 1));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "I32max", 2147483647));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "Big", 9007199254740993LL));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "Min", INT64_MIN));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "Small", 5)); /* an Int64 that fits an Int32 */
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Whole", 50000.0));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Tenth", 0.1));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Tiny", 5e-324));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Huge", 1.7976931348623157e308));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "NaN", NAN));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "PosInf", INFINITY));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "NegInf", -INFINITY));
	ECW_ASSERT_OK(ecw_entity_set_bool(e, "True", true));
	ECW_ASSERT_OK(ecw_entity_set_bool(e, "False", false));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "When", "2026-08-19T10:00:00.1234567Z"));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "Epoch", "1601-01-01T00:00:00.0000001Z"));
	ECW_ASSERT_OK(ecw_entity_set_guid(e, "Id", "c9da6455-213d-42c9-9a79-3e9149a57833"));
	ECW_ASSERT_OK(ecw_entity_set_binary(e, "Bytes", bytes, sizeof(bytes)));
	return e;
}

static void test_job_move__every_type_and_hostile_keys_survive_archive_and_restore(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	static const char *const keys[][2] = {
	    {"o'brien 001", "a+b&c=d%"},
	    {"a+b&c=d%", "o'brien 001"},
	    {"Zo\xc3\xab", "Zo\xc3\xab \xe2\x9c\x93 \xf0\x9f\x98\x80"},
	    {" lead and  trail ", "  two  spaces  "},
	    {"''", "%2F %20 + = & ; : @ $ , ( ) * ! ~ [ ]"},
	};
	enum { NK = sizeof(keys) / sizeof(keys[0]) };
	struct ecw_entity *e[NK];
	char jobs[512], id[NK][64];
	struct proc p;

	for (int i = 0; i < NK; i++) {
		e[i] = every_type(keys[i][0], keys[i][1]);
		write_entity(m, m->emp, e[i]);
		/* The service kept every type as written, or the rest proves nothing. */
		struct ecw_entity *back = get_or_null(m, m->emp, keys[i][0], keys[i][1]);
		assert_same_entity(e[i], back, "as written");
		ecw_entity_free(back);
		put_job(m, "archive-employee", keys[i][0], keys[i][1], NULL, i % 2 == 1, id[i]);
	}
	start_worker(&p, m, "move-types", std_jobs(jobs, sizeof(jobs), m), &o);
	for (int i = 0; i < NK; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded");
	for (int i = 0; i < NK; i++)
		assert_only_in(m, m->arch, m->emp, e[i], "archived");
	for (int i = 0; i < NK; i++)
		put_job(m, "restore-employee", keys[i][0], keys[i][1], NULL, i % 2 == 0, id[i]);
	for (int i = 0; i < NK; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded");
	for (int i = 0; i < NK; i++) {
		assert_only_in(m, m->emp, m->arch, e[i], "restored");
		ecw_entity_free(e[i]);
	}
	assert_int_equal(queue_count(m, m->fx.poison), 0);
	finish(&p);
}

/* ---- 8. chaining ------------------------------------------------------------------------------ */

/* The runs test-count recorded for rk (its rows have PartitionKey = the
 * message's rk). */
static size_t note_rows(struct mv *m, const char *rk)
{
	struct ecw_buf f;
	struct ecw_table_query *q = NULL;
	size_t n = 0;

	ecw_buf_init(&f, 0);
	ECW_ASSERT_OK(ecw_buf_adds(&f, "PartitionKey eq "));
	ECW_ASSERT_OK(ecw_escape_filter_string(&f, rk));
	struct ecw_query_options qo = {.filter = ecw_buf_cstr(&f)};
	ECW_ASSERT_OK(ecw_table_query_new(&q, m->c, m->note, &qo));
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		ecw_entity_free(e);
		n++;
	}
	ecw_table_query_free(q);
	ecw_buf_dispose(&f);
	return n;
}

/* After the archive succeeds, each follow-up job runs once for the same keys
 * and trace id; the original message is deleted once, not run again. A
 * follow-up runs after a "missing" success too: the keys still changed
 * meaning (e.g. drop a never-archived employee from the email index). */
static void test_job_move__then_enqueues_follow_ups(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e = employee("Sales", "o'brien 001", 1);
	char jobs[1024], id[64], id2[64];
	struct proc p;
	struct proc_log log;

	write_entity(m, m->emp, e);
	snprintf(jobs, sizeof(jobs),
	         "  archive-employee: {type: move, from: %s, to: %s, then: [note, note-again]}\n"
	         "  note: {type: test-count, table: %s}\n"
	         "  note-again: {type: test-count, table: %s}\n",
	         m->emp, m->arch, m->note, m->note);
	put_job(m, "archive-employee", "Sales", "o'brien 001", "trace-42", false, id);
	put_job(m, "archive-employee", "Sales", "never there", "trace-43", true, id2);
	start_worker(&p, m, "move-then", jobs, &o);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 2, 15000, "message", "job", "note", "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 2, 15000, "message", "job", "note-again", "outcome", "succeeded");
	/* Wait a little for anything extra (a second run would be a bug). */
	itest_sleep_ms(600);

	assert_only_in(m, m->arch, m->emp, e, "archived");
	assert_int_equal(note_rows(m, "o'brien 001"), 2);
	assert_int_equal(note_rows(m, "never there"), 2);
	proc_log_read(&log, p.log_path);
	assert_int_equal(proc_log_count(&log, "message", "job", "archive-employee", NULL), 2);
	assert_int_equal(proc_log_count(&log, "message", "job", "note", NULL), 2);
	assert_int_equal(proc_log_count(&log, "message", "job", "note-again", NULL), 2);
	for (int k = 0; k < 2; k++) {
		struct json_object *l = proc_log_find(&log, 0, "message", "job", k ? "note-again" : "note",
		                                      "rk", "o'brien 001", NULL);
		ITEST_CHECK(l != NULL, "no follow-up line for o'brien 001");
		assert_string_equal(proc_field(l, "outcome"), "succeeded");
		assert_string_equal(proc_field(l, "pk"), "Sales");
		assert_string_equal(proc_field(l, "id"), "trace-42"); /* the trace follows the chain */
		assert_int_equal(proc_field_int(l, "dequeue_count", -1), 1);
	}
	struct json_object *l = proc_log_find(&log, 0, "message", "job", "note", "rk", "never there", NULL);
	ITEST_CHECK(l != NULL, "no follow-up after the missing success");
	assert_string_equal(proc_field(l, "id"), "trace-43");
	proc_log_dispose(&log);
	assert_int_equal(queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(queue_count(m, m->fx.poison), 0);
	finish(&p);
	ecw_entity_free(e);
}

/* A follow-up that fails for good is poisoned on its own; the move it
 * follows stays done (the original message was deleted, not retried). */
static void test_job_move__failed_follow_up_does_not_undo_the_move(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e = employee("Sales", "o'brien 001", 1);
	char jobs[1024], id[64];
	struct proc p;

	write_entity(m, m->emp, e);
	snprintf(jobs, sizeof(jobs),
	         "  archive-employee: {type: move, from: %s, to: %s, then: [boom]}\n"
	         "  boom: {type: test-fail}\n",
	         m->emp, m->arch);
	put_job(m, "archive-employee", "Sales", "o'brien 001", "trace-boom", false, id);
	start_worker(&p, m, "move-then-fail", jobs, &o);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "job", "boom", "outcome", "poisoned", "reason", "permanent");
	itest_sleep_ms(600);

	assert_only_in(m, m->arch, m->emp, e, "archived despite the failed follow-up");
	assert_int_equal(proc_count(&p, "message", "job", "archive-employee", NULL), 1);
	struct json_object **env = poison_envelopes(m, 1);
	assert_string_equal(env_str(env[0], "job"), "boom");
	assert_string_equal(env_str(env[0], "pk"), "Sales");
	assert_string_equal(env_str(env[0], "rk"), "o'brien 001");
	assert_string_equal(env_str(env[0], "reason"), "permanent");
	envelopes_free(env);
	assert_int_equal(queue_count(m, m->fx.t->queue), 0);
	finish(&p);
	ecw_entity_free(e);
}

/* ---- 9. interop: an application using the official Azure SDK ------------------------------------ */

/* Runs `node tests/interop/sdk.js args...`; returns its exit status, with
 * stdout in *out (may be NULL; free() it) and stderr shown on failure. */
static int sdk(char **out, const char *const *args)
{
	const char *argv[16] = {"node", "tests/interop/sdk.js"};
	char err_path[640];
	int outp[2], status = -1;
	posix_spawn_file_actions_t fa;
	struct ecw_buf b;
	pid_t pid;
	size_t n = 2;

	if (access("tests/interop/sdk.js", R_OK) != 0)
		fail_msg("tests/interop/sdk.js not found: run from the repository root");
	for (; args[n - 2] && n < 15; n++)
		argv[n] = args[n - 2];
	argv[n] = NULL;
	proc_path(err_path, sizeof(err_path), "sdk.err");
	assert_int_equal(pipe(outp), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addclose(&fa, outp[0]);
	assert_int_equal(posix_spawnp(&pid, "node", &fa, NULL, (char *const *)argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(outp[1]);
	ecw_buf_init(&b, 0);
	for (;;) {
		char buf[4096];
		ssize_t k = read(outp[0], buf, sizeof(buf));
		if (k <= 0)
			break;
		assert_int_equal(ecw_buf_add(&b, buf, (size_t)k), 0);
	}
	close(outp[0]);
	waitpid(pid, &status, 0);
	status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	if (status != 0)
		print_error("sdk.js %s %s: exit %d: %s\n", args[0], args[1] ? args[1] : "", status,
		            proc_tail(err_path, 5));
	unlink(err_path);
	if (out)
		*out = ecw_buf_take(&b);
	ecw_buf_dispose(&b);
	return status;
}

/* The application writes employees and enqueues archive messages with the
 * SDK (plain JSON, and base64 as Azure Functions sends); ecworker archives
 * them; the application reads the archive back with the SDK and finds every
 * value with its type, and the source gone. */
static void test_job_move__interop_sdk_application(void **state)
{
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	static const char *const keys[][2] = {{"o'brien 001", "a+b&c=d%"},
	                                      {"Zo\xc3\xab", "two  spaces ' \xe2\x9c\x93"}};
	char jobs[512], *msgid[2] = {NULL, NULL};
	struct proc p;

	if (access("tests/node_modules/@azure/data-tables", R_OK) != 0)
		fail_msg("the Azure SDK is not installed under tests/node_modules: run make deps");
	for (int i = 0; i < 2; i++) {
		char v[16];
		snprintf(v, sizeof(v), "%d", i + 3);
		assert_int_equal(sdk(NULL, (const char *const[]){"upsert-employee", m->emp, keys[i][0],
		                                                 keys[i][1], v, NULL}),
		                 0);
		assert_int_equal(
		    sdk(&msgid[i],
		        (const char *const[]){"enqueue", m->fx.t->queue, "archive-employee", keys[i][0],
		                              keys[i][1], "sdk-trace", i ? "--base64" : NULL, NULL}),
		    0);
		msgid[i][strcspn(msgid[i], "\n")] = '\0';
	}
	start_worker(&p, m, "move-interop", std_jobs(jobs, sizeof(jobs), m), &o);
	for (int i = 0; i < 2; i++) {
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", msgid[i], "outcome", "succeeded");
		expect_success(&p, msgid[i], "");
	}
	for (int i = 0; i < 2; i++) {
		char v[16];
		snprintf(v, sizeof(v), "%d", i + 3);
		ITEST_CHECK(sdk(NULL, (const char *const[]){"check-employee", m->arch, keys[i][0], keys[i][1],
		                                            v, NULL}) == 0,
		            "the SDK found the archived %s/%s different (see above)", keys[i][0], keys[i][1]);
		ITEST_CHECK(get_or_null(m, m->emp, keys[i][0], keys[i][1]) == NULL,
		            "%s/%s is still in Employees", keys[i][0], keys[i][1]);
		/* The SDK reads an integral Double as Int32 (its own quirk): the
		 * exact type, checked through ecworker's client. */
		struct ecw_entity *a = get_or_null(m, m->arch, keys[i][0], keys[i][1]);
		assert_non_null(a);
		const struct ecw_prop *s = ecw_entity_get(a, "Salary");
		ITEST_CHECK(s && s->type == ECW_EDM_DOUBLE && s->v.d == 50000.0,
		            "Salary lost its Double type");
		ecw_entity_free(a);
		free(msgid[i]);
	}
	finish(&p);
}

/* ---- 10. groups: messages of one partition run together ---------------------------------------- */

/* The largest "group" among p's message lines (0: none ran in one), and in
 * *grouped how many lines carry one. */
static long long largest_group(const struct proc *p, size_t *grouped)
{
	struct proc_log log;
	long long max = 0;

	*grouped = 0;
	proc_log_read(&log, p->log_path);
	for (size_t i = 0; i < log.n; i++) {
		if (strcmp(proc_field(log.lines[i], "event"), "message") != 0)
			continue;
		long long g = proc_field_int(log.lines[i], "group", 0);
		if (g >= 2)
			(*grouped)++;
		if (g > max)
			max = g;
	}
	proc_log_dispose(&log);
	return max;
}

/* Waits for every message of the list to be logged a success with the
 * detail its run must give. */
static void expect_successes(struct proc *p, char (*id)[64], size_t n, const char *detail)
{
	for (size_t i = 0; i < n; i++) {
		PROC_EXPECT_LOG(p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded");
		expect_success(p, id[i], detail);
	}
}

/* One receive, run in groups. 28 employees in North and 4 in South, every
 * message enqueued before the worker starts (one job thread, receives of
 * 32) so that a receive brings them together; with them a message sent
 * twice (a group may hold one key twice: the second finds the move done),
 * one for an employee that never existed (nothing may be written for it),
 * and in South a stale archive copy of one employee (another version, with
 * a property the source lacks). The South transaction of copies is then
 * refused (409) as a whole, and its members must take the single path,
 * which replaces the stale copy with the source as it is (not merged into
 * it). A group writes twice (a transaction of inserts, one of deletes)
 * where its members alone would write twice each: with South's members all
 * alone (two writes each, one more for the stale copy, one for the refused
 * transaction: 10) and North's 30 messages in groups of at most 16, a few
 * per receive, the worker must write fewer times than it moves entities
 * (32; it wrote 16 when this was written), where one message at a time
 * would write 65. */
#define GRP_NORTH 28
#define GRP_SOUTH 4

static void test_job_move__group_moves_a_receive_together(void **state)
{
	enum { N = GRP_NORTH + GRP_SOUTH, STALE = GRP_NORTH + 1, DUP = 3 };
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e[N], *stale;
	char jobs[512], rk[32], id[N][64], dup_id[64], ghost_id[64], *page = NULL;
	struct proc p;
	struct proc_log log;

	for (int i = 0; i < N; i++) {
		snprintf(rk, sizeof(rk), "emp '%02d", i);
		e[i] = employee(i < GRP_NORTH ? "North" : "South", rk, i % 5 + 1);
		write_entity(m, m->emp, e[i]);
	}
	stale = employee("South", ecw_entity_rk(e[STALE]), 9);
	ECW_ASSERT_OK(ecw_entity_set_string(stale, "Obsolete", "an older archive's", 18));
	write_entity(m, m->arch, stale);
	/* South, then North with the duplicate and the ghost among them: in
	 * queue order the duplicate shares a group of 16 with the original. */
	for (int i = GRP_NORTH; i < N; i++)
		put_job(m, "archive-employee", "South", ecw_entity_rk(e[i]), NULL, false, id[i]);
	for (int i = 0; i < GRP_NORTH; i++) {
		put_job(m, "archive-employee", "North", ecw_entity_rk(e[i]), NULL, i % 2 == 1, id[i]);
		if (i == 13) {
			put_job(m, "archive-employee", "North", ecw_entity_rk(e[DUP]), NULL, false, dup_id);
			put_job(m, "archive-employee", "North", "nobody", NULL, false, ghost_id);
		}
	}
	o.concurrency = 1;
	o.batch_size = 32;
	o.metrics_port = proc_free_port();
	start_worker(&p, m, "move-group", std_jobs(jobs, sizeof(jobs), m), &o);
	PROC_EXPECT_LOG(&p, N + 2, 20000, "message", "outcome", "succeeded");

	for (int i = 0; i < N; i++)
		if (i != DUP)
			expect_success(&p, id[i], "");
	expect_success(&p, ghost_id, "missing");
	/* The duplicate pair: one moved it, the other found it moved. */
	char d1[64], d2[64];
	snprintf(d1, sizeof(d1), "%s", proc_field(msg_line(&log, &p, id[DUP], "succeeded"), "detail"));
	proc_log_dispose(&log);
	snprintf(d2, sizeof(d2), "%s", proc_field(msg_line(&log, &p, dup_id, "succeeded"), "detail"));
	proc_log_dispose(&log);
	ITEST_CHECK((strcmp(d1, "") == 0 && strcmp(d2, "already-moved") == 0) ||
	                (strcmp(d1, "already-moved") == 0 && strcmp(d2, "") == 0),
	            "the duplicate messages' details are '%s' and '%s', expected '' and 'already-moved'", d1,
	            d2);
	assert_int_equal(proc_count(&p, "message", "message_id", id[DUP], NULL), 1);
	assert_int_equal(proc_count(&p, "message", "message_id", dup_id, NULL), 1);
	assert_int_equal(proc_count(&p, "message", "outcome", "retried", NULL), 0);
	assert_int_equal(proc_count(&p, "message", "outcome", "poisoned", NULL), 0);

	for (int i = 0; i < N; i++)
		assert_only_in(m, m->arch, m->emp, e[i],
		               i == STALE ? "the stale copy replaced" : "moved in a group");
	assert_int_equal(table_rows(m, m->arch), N); /* nothing for the ghost */
	assert_int_equal(table_rows(m, m->emp), 0);
	assert_int_equal(queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(queue_count(m, m->fx.poison), 0);

	size_t grouped = 0;
	long long largest = largest_group(&p, &grouped);
	assert_int_equal(proc_http_get(&page, o.metrics_port, "/metrics"), 200);
	/* The table writes the worker attempted: what a group saves (reads are
	 * one GET per entity either way). */
	long long writes = proc_table_writes(page);
	print_message(
	    "  %lld table writes for %d entities; %zu of %d messages ran in groups (largest %lld)\n", writes,
	    N, grouped, N + 2, largest);
	ITEST_CHECK(writes < N,
	            "%lld table writes to move %d entities: the groups did not save writes; metrics:\n%s",
	            writes, N, page);
	ITEST_CHECK(largest >= 2, "no message ran in a group (no \"group\" in any message line); log %s",
	            p.log_path);
	ITEST_CHECK(largest <= 16, "a group of %lld, over move's group_max of 16", largest);
	/* South's members took the single path: the stale copy was replaced by
	 * an update If-Match the copy as read, never written over blindly. */
	long long updates =
	    (long long)proc_metric(page, "ecw_storage_requests_total", NULL, "op=\"table.update\"", NULL);
	ITEST_CHECK(updates >= 1, "no table.update: the stale copy was not replaced by the single path");
	assert_int_equal(
	    (long long)proc_metric(page, "ecw_storage_requests_total", NULL, "op=\"table.upsert\"", NULL), 0);
	free(page);
	finish(&p);
	for (int i = 0; i < N; i++)
		ecw_entity_free(e[i]);
	ecw_entity_free(stale);
}

/* A group's crash right after each of its steps: five employees of one
 * partition, their messages enqueued before the worker starts so that one
 * receive brings them and one group takes them (a worker can only die at a
 * move.group point in a group). A transaction applies all or nothing, so
 * right after the crash every member must be where run's own step leaves
 * its entity (never some copied and others not), and a fresh worker must
 * converge on the redelivered messages to the no-crash state. Each point
 * has its own partition, so that the rounds do not meet. */
#define GRP_CRASH_N 5

static void group_crash_after(struct mv *m, const char *point, enum where then, const char *rerun_detail)
{
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e[GRP_CRASH_N];
	char jobs[512], rk[32], id[GRP_CRASH_N][64], name[64], filter[64];
	const char *pk = point + strlen("move.group."); /* read, copied, deleted */
	struct proc p1, p2;

	o.visibility_s = 2; /* the redelivery comes quickly */
	std_jobs(jobs, sizeof(jobs), m);
	for (int i = 0; i < GRP_CRASH_N; i++) {
		snprintf(rk, sizeof(rk), "o'brien %03d", i);
		e[i] = employee(pk, rk, i + 1);
		write_entity(m, m->emp, e[i]);
		put_job(m, "archive-employee", pk, rk, NULL, false, id[i]);
	}
	o.crash_at = point;
	snprintf(name, sizeof(name), "move-group-crash-%s", pk);
	start_crashing_worker(&p1, m, name, jobs, &o);
	assert_int_equal(proc_count(&p1, "message", NULL), 0);
	assert_int_equal(queue_count(m, m->fx.t->queue), GRP_CRASH_N);

	for (int i = 0; i < GRP_CRASH_N; i++) {
		struct ecw_entity *s = get_or_null(m, m->emp, pk, ecw_entity_rk(e[i]));
		struct ecw_entity *a = get_or_null(m, m->arch, pk, ecw_entity_rk(e[i]));
		ITEST_CHECK(s || a, "after %s: %s is in neither table", point, ecw_entity_rk(e[i]));
		if (then == IN_SOURCE || then == IN_BOTH)
			assert_same_entity(e[i], s, "the source after the crash");
		else
			ITEST_CHECK(s == NULL, "after %s the source of %s is still there", point,
			            ecw_entity_rk(e[i]));
		if (then == IN_TARGET || then == IN_BOTH)
			assert_same_entity(e[i], a, "the copy after the crash");
		else
			ITEST_CHECK(a == NULL, "after %s a copy of %s exists already", point,
			            ecw_entity_rk(e[i]));
		ecw_entity_free(s);
		ecw_entity_free(a);
	}

	o.crash_at = NULL;
	snprintf(name, sizeof(name), "move-group-rerun-%s", pk);
	start_worker(&p2, m, name, jobs, &o);
	for (int i = 0; i < GRP_CRASH_N; i++)
		PROC_EXPECT_LOG(&p2, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded",
		                "dequeue_count", "2");
	expect_successes(&p2, id, GRP_CRASH_N, rerun_detail);
	for (int i = 0; i < GRP_CRASH_N; i++) {
		assert_only_in(m, m->arch, m->emp, e[i], point);
		ecw_entity_free(e[i]);
	}
	size_t n = 0;
	snprintf(filter, sizeof(filter), "PartitionKey eq '%s'", pk);
	struct ecw_entity **all = itest_query_all(&n, m->c, m->arch, filter); /* n is set by the call */
	itest_entities_free(all, n);
	assert_int_equal(n, GRP_CRASH_N);
	assert_int_equal(queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(queue_count(m, m->fx.poison), 0);
	finish(&p2);
}

static void test_job_move__group_crash_after_each_step(void **state)
{
	group_crash_after(*state, "move.group.read", IN_SOURCE, "");
	group_crash_after(*state, "move.group.copied", IN_BOTH, "");
	/* The rerun finds no sources: already moved. */
	group_crash_after(*state, "move.group.deleted", IN_TARGET, "already-moved");
}

/* One member changes between the group's copy and its delete: five
 * employees of one partition in one group, the worker held for 3 s right
 * after its transaction of copies (ECW_TEST_PAUSE_AT=move.group.copied)
 * while the application updates one of them. The transaction of deletes is
 * If-Match the versions read, so it must be refused (412) as a whole; each
 * member then runs alone, and the changed one must end archived in its
 * NEWER version (a delete that ignored the change would lose it, keeping
 * the old copy), the others as they were. */
static void test_job_move__group_member_changed_before_delete(void **state)
{
	enum { N = 5, CHANGED = 2 };
	struct mv *m = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct ecw_entity *e[N], *v2;
	char jobs[512], rk[32], id[N][64], group[16];
	struct proc p;
	size_t n = 0;

	for (int i = 0; i < N; i++) {
		snprintf(rk, sizeof(rk), "a+b&c=d%% %d", i);
		e[i] = employee("Sales", rk, 1);
		write_entity(m, m->emp, e[i]);
		put_job(m, "archive-employee", "Sales", rk, NULL, false, id[i]);
	}
	v2 = employee("Sales", ecw_entity_rk(e[CHANGED]), 2);
	o.pause_at = "move.group.copied:3000";
	start_worker(&p, m, "move-group-changed", std_jobs(jobs, sizeof(jobs), m), &o);

	/* The copies are in: the group is paused before its delete. */
	for (int64_t end = itest_now_ms() + 15000; itest_now_ms() < end; itest_sleep_ms(20)) {
		struct ecw_entity **all = itest_query_all(&n, m->c, m->arch, NULL); /* n is set by the call */
		itest_entities_free(all, n);
		if (n == N)
			break;
	}
	ITEST_CHECK(n == N, "%zu of %d copies appeared; log:\n%s", n, N, proc_tail(p.log_path, 20));
	int err = ecw_table_write(NULL, m->c, m->emp, v2, ECW_WRITE_UPDATE, "*");
	ITEST_CHECK(err == 0, "updating %s during the pause: %s (the group deleted the source first?)",
	            ecw_entity_rk(v2), itest_last_error());

	snprintf(group, sizeof(group), "%d", N);
	for (int i = 0; i < N; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded", "group",
		                group);
	expect_successes(&p, id, N, "");
	assert_int_equal(proc_count(&p, "message", "outcome", "retried", NULL), 0);
	for (int i = 0; i < N; i++)
		assert_only_in(m, m->arch, m->emp, i == CHANGED ? v2 : e[i],
		               i == CHANGED ? "the version written after the group's read" : "unchanged");
	assert_int_equal(table_rows(m, m->arch), N);
	assert_int_equal(queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(queue_count(m, m->fx.poison), 0);
	finish(&p);
	for (int i = 0; i < N; i++)
		ecw_entity_free(e[i]);
	ecw_entity_free(v2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_move__archive_happy_path, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__run_twice, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__missing_in_both, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__archive_then_restore, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__rekey_by_template, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__rekey_newest_first, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__rekey_in_place, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__stale_archive_after_restore_moves_again, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__reordered_restore_before_archive, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__duplicates_in_two_workers, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__source_changed_during_move_is_never_lost, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__changed_after_copy_then_crash, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__crash_after_read, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__crash_after_copied, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__crash_after_deleted, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_job_move__every_type_and_hostile_keys_survive_archive_and_restore, mv_setup,
	        mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__then_enqueues_follow_ups, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__failed_follow_up_does_not_undo_the_move, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__interop_sdk_application, mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__group_moves_a_receive_together, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__group_crash_after_each_step, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move__group_member_changed_before_delete, mv_setup,
	                                    mv_teardown),
	};
	/* ECW_TEST_FILTER=test_job_move__crash* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("job_move", tests, NULL, NULL);
}
