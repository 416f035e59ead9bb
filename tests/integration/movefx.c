/* SPDX-License-Identifier: MIT */
/* movefx.c - see movefx.h. */
#include "movefx.h"

#include <stdio.h>
#include <string.h>

#include "ecw_buf.h"
#include "message.h"

/* ---- fixture ---------------------------------------------------------------------- */

int mv_setup(void **state)
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

int mv_teardown(void **state)
{
	return wfx_teardown(state);
}

/* ---- the worker ------------------------------------------------------------------ */

const char *mv_std_jobs(char *buf, size_t cap, const struct mv *m)
{
	int k = snprintf(buf, cap,
	                 "  archive-employee: {type: move, from: %s, to: %s}\n"
	                 "  restore-employee: {type: move, from: %s, to: %s}\n",
	                 m->emp, m->arch, m->arch, m->emp);
	assert_true(k > 0 && (size_t)k < cap);
	return buf;
}

void mv_start_worker(struct proc *p, const struct mv *m, const char *name, const char *jobs,
                     const struct mv_wopts *o)
{
	struct wfx_worker w = WFX_WORKER(m->fx.t->queue, m->fx.poison);
	char path[640], crash[96], pause[96];
	const char *env[4] = {NULL, NULL, NULL, NULL};
	int nenv = 0;

	w.batch_size = o->batch_size;
	w.concurrency = o->concurrency;
	w.visibility_s = o->visibility_s;
	w.metrics_port = o->metrics_port;
	w.jobs = jobs;
	w.storage_extra = o->storage_extra;
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
	if (o->env)
		env[nenv++] = o->env;
	proc_start(p, name, args, nenv ? env : NULL);
}

void mv_start_crashing_worker(struct proc *p, const struct mv *m, const char *name, const char *jobs,
                              const struct mv_wopts *o)
{
	mv_start_worker(p, m, name, jobs, o);
	ITEST_CHECK(proc_wait(p, 15000), "the worker did not crash at %s; log:\n%s", o->crash_at,
	            proc_tail(p->log_path, 20));
	ITEST_CHECK(proc_exit_code(p) == 86, "exit status %d after %s, expected 86; log:\n%s",
	            proc_exit_code(p), o->crash_at, proc_tail(p->log_path, 20));
}

struct json_object *mv_msg_line(struct proc_log *log, const struct proc *p, const char *id,
                                const char *outcome)
{
	struct json_object *l;

	proc_log_read(log, p->log_path);
	l = proc_log_find(log, 0, "message", "message_id", id, "outcome", outcome, NULL);
	ITEST_CHECK(l != NULL, "no '%s' line for message %s in %s:\n%s", outcome, id, p->log_path,
	            proc_tail(p->log_path, 20));
	return l;
}

void mv_expect_success(const struct proc *p, const char *id, const char *detail)
{
	struct proc_log log;
	struct json_object *l = mv_msg_line(&log, p, id, "succeeded");

	ITEST_CHECK(strcmp(proc_field(l, "detail"), detail) == 0, "message %s: detail '%s', expected '%s'",
	            id, proc_field(l, "detail"), detail);
	ITEST_CHECK(proc_field(l, "error")[0] == '\0', "a success has no error: %s", proc_field(l, "error"));
	assert_int_equal(proc_log_count(&log, "message", "message_id", id, NULL), 1);
	proc_log_dispose(&log);
}

void mv_finish(struct proc *p)
{
	proc_stop(p, 10000);
	proc_assert_logs_clean();
}

/* ---- messages ---------------------------------------------------------------------- */

void mv_put_job(struct mv *m, const char *job, const char *pk, const char *rk, const char *trace, bool base64,
                char *id_out)
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

long long mv_queue_count(struct mv *m, const char *q)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, m->c, q));
	return n;
}

/* ---- entities ---------------------------------------------------------------------- */

struct ecw_entity *mv_employee(const char *pk, const char *rk, int version)
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

void mv_write_entity(struct mv *m, const char *table, const struct ecw_entity *e)
{
	ECW_ASSERT_OK(ecw_table_write(NULL, m->c, table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
}

struct ecw_entity *mv_get_or_null(struct mv *m, const char *table, const char *pk, const char *rk)
{
	return itest_get_or_null(m->c, table, pk, rk);
}

size_t mv_table_rows(struct mv *m, const char *table)
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
	case ECW_EDM_GUID: return a->len == b->len && memcmp(a->v.s, b->v.s, a->len) == 0;
	case ECW_EDM_BINARY:
		return a->len == b->len && (a->len == 0 || memcmp(a->v.bin, b->v.bin, a->len) == 0);
	case ECW_EDM_INT32: return a->v.i32 == b->v.i32;
	case ECW_EDM_INT64: return a->v.i64 == b->v.i64;
	case ECW_EDM_DOUBLE: return memcmp(&a->v.d, &b->v.d, sizeof(double)) == 0; /* NaN == NaN, -0 != 0 */
	case ECW_EDM_BOOLEAN: return a->v.b == b->v.b;
	}
	return false;
}

/* got has want's keys and exactly want's properties, type by type and value
 * by value (bitwise for doubles); each difference is named. */
void mv_assert_same_entity(const struct ecw_entity *want, const struct ecw_entity *got, const char *where)
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
void mv_assert_only_in(struct mv *m, const char *in, const char *out, const struct ecw_entity *want,
                       const char *where)
{
	struct ecw_entity *a = mv_get_or_null(m, in, ecw_entity_pk(want), ecw_entity_rk(want));
	struct ecw_entity *b = mv_get_or_null(m, out, ecw_entity_pk(want), ecw_entity_rk(want));

	ITEST_CHECK(a != NULL || b != NULL, "%s: %s/%s is in NEITHER table (lost)", where,
	            ecw_entity_pk(want), ecw_entity_rk(want));
	ITEST_CHECK(b == NULL, "%s: %s/%s is still in %s", where, ecw_entity_pk(want), ecw_entity_rk(want),
	            out);
	mv_assert_same_entity(want, a, where);
	ecw_entity_free(a);
	ecw_entity_free(b);
}
