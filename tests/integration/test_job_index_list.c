/* test_job_index_list.c - the index-list job (jobs/index_list.c) as a
 * process: build/ecworker-test runs against the real Azurite with a config
 * written per test (its own queue, source table Employees = t->table and list
 * table = t->table2), and each test judges it by what it leaves in storage,
 * above all by comparing the list table with a full recomputation from the
 * source (every list exactly the sorted keys of the employees with that
 * LastName, no stale list, one reference per employee naming its list).
 * Cases: happy path, every message twice, a value change, a stale message after
 * a newer change, a deleted source, reordered messages, a crash after every
 * step (ECW_CRASH_AT) with a fresh worker taking the redelivered message,
 * races staged between two workers (ECW_TEST_PAUSE_AT holds one at a step),
 * competing workers moving employees between the same lists (with random
 * pauses at every step, ECW_TEST_STEP_JITTER_MS, and one worker crashing over
 * and over), the size limit, values that make no key, a missing table,
 * configuration errors, and poisoned messages handing their intents over
 * (abandon, called in-process and by the worker as it poisons a message whose
 * run died after writing an intent, then `poison replay`). ECW_TEST_SEED
 * replays the competing workers' changes. */
#include "ecw_config.h"
#include "ecw_job.h"
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <json-c/json.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define JOB "emp-idx"
#define REF_PREFIX "~ref~" JOB "~"
#define LIST_PK "lastname"
#define KEYS_MAX_UTF16 32000

/* ---- fixture ---------------------------------------------------------------------- */

/* t->queue is the job queue, t->table Employees, t->table2 the lists. The
 * application's tables exist before it writes (the worker would create them
 * too). The teardown deletes them, the poison queue and the queues given to
 * itest_keep_queue. */
static int ix_setup(void **state)
{
	*state = wfx_new(sizeof(struct wfx), WFX_QUEUE | WFX_TABLE | WFX_TABLE2);
	return 0;
}

static int ix_teardown(void **state)
{
	return wfx_teardown(state);
}

/* ---- workers ------------------------------------------------------------------------ */

struct wopts {
	const char *queue; /* NULL: the fixture's */
	int concurrency, visibility_s, max_dequeue;
	int jitter_ms;        /* ECW_TEST_STEP_JITTER_MS: a random pause after each step */
	const char *pause_at; /* ECW_TEST_PAUSE_AT: "step:ms" */
	const char *source;   /* NULL: the fixture's table */
	const char *poison;   /* NULL: the fixture's poison queue */
	bool no_create;       /* create_missing: false */
};

#define WOPTS_DEFAULT                                                                                        \
	{                                                                                                    \
		.concurrency = 4, .visibility_s = 30, .max_dequeue = 5                                       \
	}

/* Writes NAME.yaml; returns the metrics port. */
static int write_config(char *path, size_t cap, struct wfx *x, const char *name, const struct wopts *o)
{
	struct wfx_worker w =
	    WFX_WORKER(o->queue ? o->queue : x->t->queue, o->poison ? o->poison : x->poison);
	char jobs[1024];
	int k = snprintf(jobs, sizeof(jobs),
	                 "  " JOB ":\n"
	                 "    type: index-list\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    partition_key: \"" LIST_PK "\"\n"
	                 "    row_key: \"{LastName}\"\n",
	                 o->source ? o->source : x->t->table, x->t->table2);

	assert_true(k > 0 && (size_t)k < sizeof(jobs));
	w.batch_size = o->concurrency;
	w.concurrency = o->concurrency;
	w.visibility_s = o->visibility_s;
	w.max_dequeue = o->max_dequeue;
	w.poll_min = "20ms";
	w.poll_max = "100ms";
	w.worker_extra = o->no_create ? "  create_missing: false\n" : "  create_missing: true\n";
	w.log_level = "info";
	w.metrics_port = proc_free_port();
	w.jobs = jobs;
	wfx_write_config(path, cap, name, &w);
	return w.metrics_port;
}

/* Starts a worker; crash_at (may be NULL) sets ECW_CRASH_AT. Returns the
 * metrics port. */
static int start_worker(struct proc *p, struct wfx *x, const char *name, const struct wopts *o,
                        const char *crash_at)
{
	char path[640], env0[128], env1[64], env2[128];
	int port = write_config(path, sizeof(path), x, name, o);
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {env0, env1, env2, NULL};

	snprintf(env0, sizeof(env0), "ECW_CRASH_AT=%s", crash_at ? crash_at : "");
	snprintf(env1, sizeof(env1), "ECW_TEST_STEP_JITTER_MS=%d", o->jitter_ms);
	snprintf(env2, sizeof(env2), "ECW_TEST_PAUSE_AT=%s", o->pause_at ? o->pause_at : "");
	proc_start(p, name, args, env);
	return port;
}

static long long queue_count(struct wfx *x, const char *q)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, x->t->client, q));
	return n;
}

/* Waits until the queue is empty (every message deleted: succeeded, or
 * poisoned, which the callers check) and stays empty for a moment. */
static void wait_drained(struct wfx *x, const char *q, struct proc *ps, size_t np, int timeout_ms)
{
	int64_t end = itest_now_ms() + timeout_ms;
	int zeros = 0;

	while (zeros < 2) {
		long long n = queue_count(x, q);
		zeros = n == 0 ? zeros + 1 : 0;
		if (zeros >= 2)
			break;
		if (itest_now_ms() > end)
			fail_msg("queue %s still holds %lld message(s) after %d ms; last worker log %s:\n%s",
			         q, n, timeout_ms, np ? ps[np - 1].log_path : "-",
			         np ? proc_tail(ps[np - 1].log_path, 30) : "");
		itest_sleep_ms(100);
	}
}

/* Runs one worker over the fixture's queue until `succeeded` messages
 * succeeded and the queue is empty; nothing may be retried or poisoned. */
static void run_worker(struct wfx *x, const char *name, size_t succeeded, int concurrency)
{
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;

	o.concurrency = concurrency;
	start_worker(&p, x, name, &o, NULL);
	if (!proc_wait_count(&p, succeeded, 20000, "message", "outcome", "succeeded", NULL))
		fail_msg("%s: %zu message(s) did not succeed in 20 s; log %s:\n%s", name, succeeded,
		         p.log_path, proc_tail(p.log_path, 30));
	wait_drained(x, x->t->queue, &p, 1, 10000);
	ITEST_CHECK(proc_count(&p, "message", NULL) == succeeded, "%s: %zu message lines, expected %zu:\n%s",
	            name, proc_count(&p, "message", NULL), succeeded, proc_tail(p.log_path, 30));
	proc_stop(&p, 10000);
}

/* ---- the application's side ------------------------------------------------------------ */

/* Writes the employee (insert-or-replace) with last (NULL: deletes it). */
static void emp_set(struct wfx *x, const char *pk, const char *rk, const char *last)
{
	struct ecw_entity *e = NULL;

	if (!last) {
		ECW_ASSERT_OK(ecw_table_delete_if_exists(NULL, x->t->client, x->t->table, pk, rk));
		return;
	}
	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "LastName", last, strlen(last)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "FirstName", "Ann", 3));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Age", 42));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

/* The message for (pk, rk) on queue q (NULL: the fixture's). */
static void msg_put(struct wfx *x, const char *q, const char *pk, const char *rk)
{
	struct json_object *o = json_object_new_object();
	const char *text;

	json_object_object_add(o, "job", json_object_new_string(JOB));
	json_object_object_add(o, "pk", json_object_new_string(pk));
	json_object_object_add(o, "rk", json_object_new_string(rk));
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	ECW_ASSERT_OK(ecw_queue_put(NULL, x->t->client, q ? q : x->t->queue, text, strlen(text), NULL));
	json_object_put(o);
}

/* The application's update: change the entity, then enqueue. */
static void change(struct wfx *x, const char *pk, const char *rk, const char *last)
{
	emp_set(x, pk, rk, last);
	msg_put(x, NULL, pk, rk);
}

/* ---- reading the index ------------------------------------------------------------------- */

static char *ref_rk(const char *pk, const char *rk)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	size_t a = strlen(pk), b = strlen(rk);
	char *in = malloc(a + b + 1), *out = malloc(65);

	assert_non_null(in);
	assert_non_null(out);
	memcpy(in, pk, a);
	in[a] = '\0';
	memcpy(in + a + 1, rk, b);
	assert_true(EVP_Digest(in, a + b + 1, md, &mdlen, EVP_sha256(), NULL) == 1 && mdlen == 32);
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
	free(in);
	return out;
}

/* The entity or NULL. */
static struct ecw_entity *get_or_null(struct wfx *x, const char *table, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	int err = ecw_table_get(&e, x->t->client, table, pk, rk);

	if (err == ECW_ENOTFOUND)
		return NULL;
	ECW_ASSERT_OK(err);
	return e;
}

static const char *str_prop(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = e ? ecw_entity_get(e, name) : NULL;
	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

/* The Keys of list LastName=last as stored (heap copy), or NULL when there is
 * no such list; *etag (may be NULL) gets its ETag. */
static char *list_keys(struct wfx *x, const char *last, char **etag)
{
	struct ecw_entity *e = get_or_null(x, x->t->table2, LIST_PK, last);
	char *keys = NULL;

	if (etag)
		*etag = NULL;
	if (!e)
		return NULL;
	ITEST_CHECK(str_prop(e, "Keys") != NULL, "list %s has no Keys string", last);
	keys = strdup(str_prop(e, "Keys"));
	if (etag)
		*etag = strdup(ecw_entity_etag(e));
	ecw_entity_free(e);
	return keys;
}

/* The ref's keys: ("~ref~<job>~" + h[0..1], h). */
static struct ecw_entity *get_ref(struct wfx *x, const char *pk, const char *rk)
{
	char *h = ref_rk(pk, rk), rpk[64];
	snprintf(rpk, sizeof(rpk), "%s%.2s", REF_PREFIX, h);
	struct ecw_entity *e = get_or_null(x, x->t->table2, rpk, h);
	free(h);
	return e;
}

/* True when the Keys text holds the pair (pk, rk) (plain keys only). */
static bool has_key(const char *keys, const char *pk, const char *rk)
{
	char pair[256];
	snprintf(pair, sizeof(pair), "[\"%s\",\"%s\"]", pk, rk);
	return keys && strstr(keys, pair) != NULL;
}

static void expect_list(struct wfx *x, const char *last, const char *want_keys)
{
	char *keys = list_keys(x, last, NULL);

	if (!want_keys)
		ITEST_CHECK(keys == NULL, "list %s should be gone, holds %s", last, keys);
	else
		ITEST_CHECK(keys && strcmp(keys, want_keys) == 0, "list %s holds\n  %s\nexpected\n  %s", last,
		            keys ? keys : "(no list)", want_keys);
	free(keys);
}

/* ---- the recomputation ------------------------------------------------------------------------ */

/* (list pk, list rk, source pk, source rk), for the lists and the refs alike. */
struct row {
	char *a[4];
};

struct rows {
	struct row *v;
	size_t n, cap;
};

static void rows_add(struct rows *r, const char *a, const char *b, const char *c, const char *d)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 64;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
		assert_non_null(r->v);
	}
	r->v[r->n].a[0] = strdup(a);
	r->v[r->n].a[1] = strdup(b);
	r->v[r->n].a[2] = strdup(c);
	r->v[r->n].a[3] = strdup(d);
	r->n++;
}

static void rows_free(struct rows *r)
{
	for (size_t i = 0; i < r->n; i++)
		for (int k = 0; k < 4; k++)
			free(r->v[i].a[k]);
	free(r->v);
	memset(r, 0, sizeof(*r));
}

static int row_cmp(const void *pa, const void *pb)
{
	const struct row *a = pa, *b = pb;
	for (int k = 0; k < 4; k++) {
		int c = strcmp(a->a[k], b->a[k]);
		if (c)
			return c;
	}
	return 0;
}

static const char *row_text(const struct row *r)
{
	static char buf[4][400];
	static int next;
	char *b = buf[next++ & 3];
	snprintf(b, sizeof(buf[0]), "(%.80s/%.80s: %.80s, %.80s)", r->a[0], r->a[1], r->a[2], r->a[3]);
	return b;
}

/* Fails unless want and got hold the same rows. */
static void rows_compare(struct rows *want, struct rows *got, const char *what)
{
	if (want->n)
		qsort(want->v, want->n, sizeof(*want->v), row_cmp);
	if (got->n)
		qsort(got->v, got->n, sizeof(*got->v), row_cmp);
	size_t i = 0, j = 0;
	char diff[2048] = "";
	size_t dl = 0;
	int ndiff = 0;
	while (i < want->n || j < got->n) {
		int c = i == want->n ? 1 : j == got->n ? -1 : row_cmp(&want->v[i], &got->v[j]);
		if (c == 0) {
			i++, j++;
			continue;
		}
		if (ndiff++ < 8 && dl < sizeof(diff) - 1)
			dl += (size_t)snprintf(diff + dl, sizeof(diff) - dl, "\n  %s %s",
			                       c < 0 ? "missing" : "stale  ",
			                       row_text(c < 0 ? &want->v[i] : &got->v[j]));
		if (dl >= sizeof(diff))
			dl = sizeof(diff) - 1;
		if (c < 0)
			i++;
		else
			j++;
	}
	ITEST_CHECK(ndiff == 0,
	            "%s differ from the recomputation (%zu expected, %zu found, %d differences):%s", what,
	            want->n, got->n, ndiff, diff);
}

/* Parses a list's Keys: pairs strictly sorted by (pk, rk), into rows. */
static void keys_to_rows(struct rows *out, const char *lpk, const char *lrk, const char *keys, int32_t count)
{
	struct json_object *arr = json_tokener_parse(keys);
	const char *prev_pk = NULL, *prev_rk = NULL;

	ITEST_CHECK(arr && json_object_is_type(arr, json_type_array),
	            "list %s/%s: Keys is not an array: %.200s", lpk, lrk, keys);
	size_t n = json_object_array_length(arr);
	ITEST_CHECK(n > 0, "list %s/%s is empty: an emptied list must be deleted", lpk, lrk);
	ITEST_CHECK((size_t)count == n, "list %s/%s: Count %d, Keys holds %zu", lpk, lrk, count, n);
	for (size_t i = 0; i < n; i++) {
		struct json_object *p = json_object_array_get_idx(arr, i);
		ITEST_CHECK(json_object_is_type(p, json_type_array) && json_object_array_length(p) == 2,
		            "list %s/%s: item %zu is not a pair", lpk, lrk, i);
		const char *pk = json_object_get_string(json_object_array_get_idx(p, 0));
		const char *rk = json_object_get_string(json_object_array_get_idx(p, 1));
		if (prev_pk) {
			int c = strcmp(prev_pk, pk);
			ITEST_CHECK(c < 0 || (c == 0 && strcmp(prev_rk, rk) < 0),
			            "list %s/%s: not sorted and unique at item %zu: %s", lpk, lrk, i, keys);
		}
		prev_pk = pk;
		prev_rk = rk;
		rows_add(out, lpk, lrk, pk, rk);
	}
	json_object_put(arr);
}

/* The whole list table against a recomputation from the source: the lists
 * (exact members, sorted, Count, no empty or stale list) and the refs (one per
 * employee, at the hashed RowKey, naming its list, no intents left). Returns
 * how many lists there are. */
static size_t check_index(struct wfx *x)
{
	struct rows want_lists = {0}, got_lists = {0}, want_refs = {0}, got_refs = {0};
	struct ecw_table_query *q = NULL;
	size_t nlists = 0;

	ECW_ASSERT_OK(ecw_table_query_new(&q, x->t->client, x->t->table, NULL));
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		const char *last = str_prop(e, "LastName");
		ITEST_CHECK(last != NULL, "employee %s/%s has no LastName", ecw_entity_pk(e),
		            ecw_entity_rk(e));
		rows_add(&want_lists, LIST_PK, last, ecw_entity_pk(e), ecw_entity_rk(e));
		rows_add(&want_refs, LIST_PK, last, ecw_entity_pk(e), ecw_entity_rk(e));
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);

	ECW_ASSERT_OK(ecw_table_query_new(&q, x->t->client, x->t->table2, NULL));
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		const char *pk = ecw_entity_pk(e), *rk = ecw_entity_rk(e);
		if (strncmp(pk, REF_PREFIX, strlen(REF_PREFIX)) == 0) {
			const char *spk = str_prop(e, "SourcePartitionKey"),
			           *srk = str_prop(e, "SourceRowKey");
			const char *lpk = str_prop(e, "ListPartitionKey"), *lrk = str_prop(e, "ListRowKey");
			const char *pending = str_prop(e, "Pending");
			ITEST_CHECK(spk && srk, "ref %s lacks its source keys", rk);
			char *h = ref_rk(spk, srk);
			ITEST_CHECK(strcmp(h, rk) == 0 && strncmp(pk + strlen(REF_PREFIX), h, 2) == 0 &&
			                strlen(pk) == strlen(REF_PREFIX) + 2,
			            "ref of (%s, %s) has keys (%s, %s), expected the hash %s", spk, srk, pk,
			            rk, h);
			free(h);
			ITEST_CHECK(!pending || strcmp(pending, "[]") == 0,
			            "ref of (%s, %s) still holds intents: %s", spk, srk, pending);
			rows_add(&got_refs, lpk ? lpk : "(none)", lrk ? lrk : "(none)", spk, srk);
		} else {
			ITEST_CHECK(strncmp(pk, "~ref~", 5) != 0, "a ref partition %s of another job", pk);
			const struct ecw_prop *count = ecw_entity_get(e, "Count");
			ITEST_CHECK(count && count->type == ECW_EDM_INT32, "list %s/%s has no Int32 Count",
			            pk, rk);
			ITEST_CHECK(str_prop(e, "Keys"), "list %s/%s has no Keys", pk, rk);
			keys_to_rows(&got_lists, pk, rk, str_prop(e, "Keys"), count->v.i32);
			nlists++;
		}
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);
	rows_compare(&want_lists, &got_lists, "the lists");
	rows_compare(&want_refs, &got_refs, "the references");
	rows_free(&want_lists);
	rows_free(&got_lists);
	rows_free(&want_refs);
	rows_free(&got_refs);
	return nlists;
}

/* ---- 1. happy path ------------------------------------------------------------------------ */

/* Keys from every corner: quotes, '&', '%', '+', non-ASCII, a double quote. */
static const char *const EMP[5][3] = {
    {"Sales", "o'brien 001", "Jones"}, {"Sales", "Zo\xc3\xab 002", "Jones"},
    {"R&D", "a+b&c=d% 003", "Jones"},  {"Sales", "say \"hi\" 004", "Smith"},
    {"Ops", "005", "Smith"},
};

#define JONES3 "[[\"R&D\",\"a+b&c=d% 003\"],[\"Sales\",\"Zo\xc3\xab 002\"],[\"Sales\",\"o'brien 001\"]]"
#define SMITH2 "[[\"Ops\",\"005\"],[\"Sales\",\"say \\\"hi\\\" 004\"]]"

static void seed_five(struct wfx *x, const char *name)
{
	for (int i = 0; i < 5; i++)
		change(x, EMP[i][0], EMP[i][1], EMP[i][2]);
	run_worker(x, name, 5, 4);
}

static void test_job_index_list__happy_path(void **state)
{
	struct wfx *x = *state;
	struct proc_log log;

	seed_five(x, "il-happy");
	expect_list(x, "Jones", JONES3);
	expect_list(x, "Smith", SMITH2);
	assert_int_equal(check_index(x), 2);

	/* The ref of one employee, field by field. */
	struct ecw_entity *ref = get_ref(x, "Sales", "o'brien 001");
	ITEST_CHECK(ref != NULL, "no ref for (Sales, o'brien 001)");
	assert_string_equal(str_prop(ref, "ListPartitionKey"), LIST_PK);
	assert_string_equal(str_prop(ref, "ListRowKey"), "Jones");
	assert_string_equal(str_prop(ref, "SourceRowKey"), "o'brien 001");
	ecw_entity_free(ref);

	/* The source is untouched and the log says what happened. */
	struct ecw_entity *e = get_or_null(x, x->t->table, "Sales", "o'brien 001");
	assert_non_null(e);
	assert_string_equal(str_prop(e, "LastName"), "Jones");
	assert_int_equal(ecw_entity_count(e), 3);
	ecw_entity_free(e);
	char path[640];
	proc_path(path, sizeof(path), "il-happy.log");
	proc_log_read(&log, path);
	assert_int_equal(proc_log_count(&log, "message", "outcome", "succeeded", "job", JOB, NULL), 5);
	struct json_object *line = proc_log_find(&log, 0, "message", NULL);
	ITEST_CHECK(strncmp(proc_field(line, "detail"), "added rounds=1", 14) == 0, "detail: %s",
	            proc_field(line, "detail"));
	proc_log_dispose(&log);
	proc_assert_logs_clean();
}

/* ---- 2. every message twice -------------------------------------------------------------- */

static void test_job_index_list__run_twice(void **state)
{
	struct wfx *x = *state;
	char *etags[2], *ref_etags[5];
	char path[640];
	struct proc_log log;

	seed_five(x, "il-twice-1");
	free(list_keys(x, "Jones", &etags[0]));
	free(list_keys(x, "Smith", &etags[1]));
	for (int i = 0; i < 5; i++) {
		struct ecw_entity *r = get_ref(x, EMP[i][0], EMP[i][1]);
		assert_non_null(r);
		ref_etags[i] = strdup(ecw_entity_etag(r));
		ecw_entity_free(r);
	}
	/* Every message again, twice. */
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 5; i++)
			msg_put(x, NULL, EMP[i][0], EMP[i][1]);
	run_worker(x, "il-twice-2", 10, 4);

	expect_list(x, "Jones", JONES3);
	expect_list(x, "Smith", SMITH2);
	assert_int_equal(check_index(x), 2);
	/* A rerun with nothing to do writes nothing at all. */
	char *now[2];
	free(list_keys(x, "Jones", &now[0]));
	free(list_keys(x, "Smith", &now[1]));
	for (int i = 0; i < 2; i++) {
		assert_string_equal(now[i], etags[i]);
		free(now[i]);
		free(etags[i]);
	}
	for (int i = 0; i < 5; i++) {
		struct ecw_entity *r = get_ref(x, EMP[i][0], EMP[i][1]);
		assert_non_null(r);
		assert_string_equal(ecw_entity_etag(r), ref_etags[i]);
		ecw_entity_free(r);
		free(ref_etags[i]);
	}
	proc_path(path, sizeof(path), "il-twice-2.log");
	proc_log_read(&log, path);
	ITEST_CHECK(proc_log_count(&log, "message", "detail", "unchanged rounds=1 conflicts=0", NULL) == 10,
	            "every rerun should be \"unchanged\":\n%s", proc_tail(path, 12));
	proc_log_dispose(&log);
	proc_assert_logs_clean();
}

/* ---- 3. a value changes: the employee moves between lists --------------------------------- */

static void test_job_index_list__value_changed(void **state)
{
	struct wfx *x = *state;

	seed_five(x, "il-change-1");
	change(x, "Sales", "o'brien 001", "Smith");
	change(x, "Ops", "005", "Brown"); /* to a list that does not exist yet */
	run_worker(x, "il-change-2", 2, 1);
	expect_list(x, "Jones", "[[\"R&D\",\"a+b&c=d% 003\"],[\"Sales\",\"Zo\xc3\xab 002\"]]");
	expect_list(x, "Smith", "[[\"Sales\",\"o'brien 001\"],[\"Sales\",\"say \\\"hi\\\" 004\"]]");
	expect_list(x, "Brown", "[[\"Ops\",\"005\"]]");
	assert_int_equal(check_index(x), 3);
	struct ecw_entity *ref = get_ref(x, "Sales", "o'brien 001");
	assert_non_null(ref);
	assert_string_equal(str_prop(ref, "ListRowKey"), "Smith");
	ecw_entity_free(ref);

	/* A change that keeps the LastName moves nothing. */
	struct ecw_entity *e = get_or_null(x, x->t->table, "Ops", "005");
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Age", 43));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table, e, ECW_WRITE_UPDATE, "*"));
	ecw_entity_free(e);
	msg_put(x, NULL, "Ops", "005");
	run_worker(x, "il-change-3", 1, 1);
	expect_list(x, "Brown", "[[\"Ops\",\"005\"]]");
	assert_int_equal(check_index(x), 3);
	proc_assert_logs_clean();
}

/* ---- 4. a stale message after a newer change ---------------------------------------------- */

static void test_job_index_list__stale_message_after_newer_change(void **state)
{
	struct wfx *x = *state;
	char *etag_before, *etag_after;

	change(x, "Sales", "e1", "Jones");
	change(x, "Sales", "e2", "Jones");
	run_worker(x, "il-stale-1", 2, 1);
	expect_list(x, "Jones", "[[\"Sales\",\"e1\"],[\"Sales\",\"e2\"]]");

	/* Jones -> Smith, processed; then the message of the Jones write
	 * arrives late (a duplicate of the first), and once more. */
	change(x, "Sales", "e1", "Smith");
	run_worker(x, "il-stale-2", 1, 1);
	free(list_keys(x, "Smith", &etag_before));
	msg_put(x, NULL, "Sales", "e1");
	msg_put(x, NULL, "Sales", "e1");
	run_worker(x, "il-stale-3", 2, 1);
	expect_list(x, "Jones", "[[\"Sales\",\"e2\"]]");
	expect_list(x, "Smith", "[[\"Sales\",\"e1\"]]");
	free(list_keys(x, "Smith", &etag_after));
	assert_string_equal(etag_before, etag_after);
	free(etag_before);
	free(etag_after);

	/* Both messages of two quick changes arrive after the second change:
	 * the first runs with the newer value. */
	emp_set(x, "Sales", "e2", "Brown");
	msg_put(x, NULL, "Sales", "e2");
	emp_set(x, "Sales", "e2", "Green");
	msg_put(x, NULL, "Sales", "e2");
	run_worker(x, "il-stale-4", 2, 1);
	expect_list(x, "Jones", NULL);
	expect_list(x, "Brown", NULL);
	expect_list(x, "Green", "[[\"Sales\",\"e2\"]]");
	assert_int_equal(check_index(x), 2);
	proc_assert_logs_clean();
}

/* ---- 5. the source is deleted ------------------------------------------------------------ */

static void test_job_index_list__source_deleted(void **state)
{
	struct wfx *x = *state;

	seed_five(x, "il-del-1");
	/* The last Smith goes with its list; a Jones goes from its list. */
	change(x, "Ops", "005", NULL);
	change(x, "Sales", "say \"hi\" 004", NULL);
	change(x, "Sales", "o'brien 001", NULL);
	/* Never existed: nothing to do. */
	msg_put(x, NULL, "Nobody", "000");
	run_worker(x, "il-del-2", 4, 2);
	expect_list(x, "Smith", NULL);
	expect_list(x, "Jones", "[[\"R&D\",\"a+b&c=d% 003\"],[\"Sales\",\"Zo\xc3\xab 002\"]]");
	struct ecw_entity *ref = get_ref(x, "Ops", "005");
	ITEST_CHECK(ref == NULL, "the ref of a deleted employee is still there");
	ref = get_ref(x, "Nobody", "000");
	ITEST_CHECK(ref == NULL, "a ref was made for an employee that never existed");
	assert_int_equal(check_index(x), 1);

	/* The delete's message again, and the rest gone too: an empty table. */
	msg_put(x, NULL, "Ops", "005");
	change(x, "R&D", "a+b&c=d% 003", NULL);
	change(x, "Sales", "Zo\xc3\xab 002", NULL);
	run_worker(x, "il-del-3", 3, 2);
	assert_int_equal(check_index(x), 0);
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_table_query_new(&q, x->t->client, x->t->table2, NULL));
	ECW_ASSERT_OK(ecw_table_query_next(&e, q));
	ITEST_CHECK(e == NULL, "the list table should be empty, holds %s/%s", ecw_entity_pk(e),
	            ecw_entity_rk(e));
	ecw_table_query_free(q);
	proc_assert_logs_clean();
}

/* ---- 6. messages out of order ------------------------------------------------------------ */

static void test_job_index_list__reordered(void **state)
{
	struct wfx *x = *state;
	static const char *const names[] = {"Jones", "Smith", "Brown", NULL};
	struct {
		char rk[16];
		const char *last;
	} hist[40];
	int n = 0;

	/* A history of changes to 8 employees (moves, deletes, re-creations)
	 * applied in order; the messages go out afterwards, last first. */
	for (int step = 0; step < 40; step++) {
		int who = (step * 5 + step / 8) % 8;
		const char *last = names[(step * 7 + who) % 4];
		snprintf(hist[n].rk, sizeof(hist[n].rk), "emp-%02d", who);
		hist[n].last = last;
		emp_set(x, "Staff", hist[n].rk, last);
		n++;
	}
	for (int i = n - 1; i >= 0; i--)
		msg_put(x, NULL, "Staff", hist[i].rk);
	run_worker(x, "il-reorder-1", (size_t)n, 1);
	check_index(x);

	/* Interleaved: half the messages run before the changes they follow
	 * are all made, the rest in a shuffled order. */
	for (int i = 0; i < 8; i++) {
		char rk[16];
		snprintf(rk, sizeof(rk), "emp-%02d", i);
		emp_set(x, "Staff", rk, names[(i + 1) % 3]);
		if (i % 2)
			msg_put(x, NULL, "Staff", rk);
	}
	run_worker(x, "il-reorder-2", 4, 4);
	for (int i = 0; i < 8; i++) {
		char rk[16];
		snprintf(rk, sizeof(rk), "emp-%02d", (i * 3) % 8);
		msg_put(x, NULL, "Staff", rk);
	}
	run_worker(x, "il-reorder-3", 8, 4);
	check_index(x);
	proc_assert_logs_clean();
}

/* ---- 7. a crash after every step ----------------------------------------------------------- */

/* One crash case: a scenario, the step to die after, and its own queue. */
struct crash_case {
	const char *scenario; /* new | move | delete | move-then-change */
	const char *point;
	char queue[64];
	char rk[32];
	char from[32], to[32], third[32];
	struct proc crashed, fresh;
};

static const char *const POINTS_NEW[] = {"index_list.read", "index_list.intent", "index_list.added",
                                         "index_list.ref", NULL};
static const char *const POINTS_MOVE[] = {"index_list.read",    "index_list.intent", "index_list.added",
                                          "index_list.removed", "index_list.ref",    NULL};
static const char *const POINTS_DELETE[] = {"index_list.read", "index_list.removed", "index_list.ref", NULL};
static const char *const POINTS_MTC[] = {"index_list.intent", "index_list.added", "index_list.removed", NULL};

static void test_job_index_list__crash_after_every_step(void **state)
{
	struct wfx *x = *state;
	static struct crash_case cs[24];
	size_t n = 0;
	const struct {
		const char *name;
		const char *const *points;
	} scen[] = {{"new", POINTS_NEW},
	            {"move", POINTS_MOVE},
	            {"delete", POINTS_DELETE},
	            {"move-then-change", POINTS_MTC}};

	memset(cs, 0, sizeof(cs));
	for (size_t s = 0; s < sizeof(scen) / sizeof(scen[0]); s++)
		for (size_t k = 0; scen[s].points[k]; k++) {
			struct crash_case *c = &cs[n];
			c->scenario = scen[s].name;
			c->point = scen[s].points[k];
			snprintf(c->rk, sizeof(c->rk), "c%zu-%zu", s, k);
			snprintf(c->from, sizeof(c->from), "From%zu-%zu", s, k);
			snprintf(c->to, sizeof(c->to), "To%zu-%zu", s, k);
			snprintf(c->third, sizeof(c->third), "Third%zu-%zu", s, k);
			itest_unique_name(c->queue, sizeof(c->queue), 'q', "crash");
			itest_keep_queue(x->t, c->queue);
			n++;
		}

	/* The state before: each move/delete case's employee in its From list,
	 * with a companion in the move cases (so removal updates the list) and
	 * alone in the delete cases (so removal deletes it). */
	size_t seeded = 0;
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		if (strcmp(c->scenario, "new") == 0)
			continue;
		change(x, "Crash", c->rk, c->from);
		seeded++;
		if (strcmp(c->scenario, "move") == 0) {
			char buddy[40];
			snprintf(buddy, sizeof(buddy), "%s-buddy", c->rk);
			change(x, "Crash", buddy, c->from);
			seeded++;
		}
	}
	run_worker(x, "il-crash-seed", seeded, 8);
	check_index(x);

	/* The change, its message on the case's own queue, and a worker that
	 * dies right after the step. */
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		struct wopts o = {.queue = c->queue, .concurrency = 1, .visibility_s = 2, .max_dequeue = 20};
		char name[96];
		ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, c->queue));
		emp_set(x, "Crash", c->rk, strcmp(c->scenario, "delete") == 0 ? NULL : c->to);
		msg_put(x, c->queue, "Crash", c->rk);
		snprintf(name, sizeof(name), "il-crash-%zu-%s", i, c->point + strlen("index_list."));
		start_worker(&c->crashed, x, name, &o, c->point);
	}
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		ITEST_CHECK(proc_wait(&c->crashed, 20000), "%s/%s: the worker did not die", c->scenario,
		            c->point);
		ITEST_CHECK(proc_exit_code(&c->crashed) == 86,
		            "%s/%s: exit status %d, expected 86 (the crash point was not reached?); log:\n%s",
		            c->scenario, c->point, proc_exit_code(&c->crashed),
		            proc_tail(c->crashed.log_path, 20));
	}

	/* What a crash leaves, where the header comment says so. */
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		if (strcmp(c->scenario, "move") != 0)
			continue;
		char *from = list_keys(x, c->from, NULL), *to = list_keys(x, c->to, NULL);
		struct ecw_entity *ref = get_ref(x, "Crash", c->rk);
		bool in_from = has_key(from, "Crash", c->rk), in_to = has_key(to, "Crash", c->rk);
		const char *pending = str_prop(ref, "Pending"), *committed = str_prop(ref, "ListRowKey");
		bool intent = pending && strstr(pending, c->to);
		ITEST_CHECK(committed, "%s: the ref names no list", c->point);
		if (strcmp(c->point, "index_list.read") == 0)
			ITEST_CHECK(in_from && !in_to && !intent && strcmp(committed, c->from) == 0,
			            "after .read nothing changed: %s / %s / %s", from, to, pending);
		else if (strcmp(c->point, "index_list.intent") == 0)
			ITEST_CHECK(in_from && !in_to && intent && strcmp(committed, c->from) == 0,
			            "after .intent: only the intent; %s / %s / %s", from, to, pending);
		else if (strcmp(c->point, "index_list.added") == 0)
			ITEST_CHECK(in_from && in_to && intent && strcmp(committed, c->from) == 0,
			            "after .added: in both lists, the intent; %s / %s / %s", from, to,
			            pending);
		else if (strcmp(c->point, "index_list.removed") == 0)
			ITEST_CHECK(!in_from && in_to && intent && strcmp(committed, c->from) == 0,
			            "after .removed: only in %s, the ref as before; %s / %s / %s", c->to,
			            from, to, pending);
		else
			ITEST_CHECK(!in_from && in_to && !intent && strcmp(committed, c->to) == 0,
			            "after .ref: done but the check; %s / %s / %s / %s", from, to, pending,
			            committed);
		free(from);
		free(to);
		ecw_entity_free(ref);
	}

	/* The application changes some again while the message is held. */
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		if (strcmp(c->scenario, "move-then-change") == 0) {
			emp_set(x, "Crash", c->rk, c->third);
			msg_put(x, c->queue, "Crash", c->rk);
		}
	}

	/* A fresh worker per queue takes the redelivered message. */
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		struct wopts o = {.queue = c->queue, .concurrency = 1, .visibility_s = 30, .max_dequeue = 20};
		char name[96];
		snprintf(name, sizeof(name), "il-fresh-%zu-%s", i, c->point + strlen("index_list."));
		start_worker(&c->fresh, x, name, &o, NULL);
	}
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		size_t want = strcmp(c->scenario, "move-then-change") == 0 ? 2 : 1;
		ITEST_CHECK(proc_wait_count(&c->fresh, want, 20000, "message", "outcome", "succeeded", NULL),
		            "%s/%s: the fresh worker did not finish; log:\n%s", c->scenario, c->point,
		            proc_tail(c->fresh.log_path, 20));
		ITEST_CHECK(
		    proc_count(&c->fresh, "message", "outcome", "succeeded", "dequeue_count", "2", NULL) == 1,
		    "%s/%s: the redelivered message (dequeue_count 2) should have succeeded:\n%s",
		    c->scenario, c->point, proc_tail(c->fresh.log_path, 20));
	}
	for (size_t i = 0; i < n; i++) {
		wait_drained(x, cs[i].queue, &cs[i].fresh, 1, 10000);
		proc_stop(&cs[i].fresh, 10000);
	}
	/* The end state is the no-crash state: the recomputation. */
	check_index(x);
	for (size_t i = 0; i < n; i++) {
		struct crash_case *c = &cs[i];
		if (strcmp(c->scenario, "move") == 0) {
			char want[96];
			snprintf(want, sizeof(want), "[[\"Crash\",\"%s-buddy\"]]", c->rk);
			expect_list(x, c->from, want);
		} else {
			expect_list(x, c->from, NULL);
		}
	}
	proc_assert_logs_clean();
}

/* ---- 8. staged races between two workers --------------------------------------------------- */

/* Waits until a worker received the only message of q (none visible). */
static void wait_taken(struct wfx *x, const char *q, struct proc *p)
{
	int64_t end = itest_now_ms() + 10000;

	for (;;) {
		struct ecw_queue_msg *m = NULL;
		size_t n = 0;
		ECW_ASSERT_OK(ecw_queue_peek(&m, &n, x->t->client, q, 1));
		ecw_queue_msgs_free(m, n);
		if (n == 0)
			break;
		ITEST_CHECK(itest_now_ms() < end, "%s did not take its message:\n%s", p->name,
		            proc_tail(p->log_path, 20));
		itest_sleep_ms(20);
	}
	itest_sleep_ms(300); /* it runs on to the step where it pauses */
}

static void test_job_index_list__staged_races(void **state)
{
	struct wfx *x = *state;
	char qa[64], qb[64];
	struct proc a, b, fresh;

	itest_unique_name(qa, sizeof(qa), 'q', "slow");
	itest_unique_name(qb, sizeof(qb), 'q', "fast");
	itest_keep_queue(x->t, qa);
	itest_keep_queue(x->t, qb);
	ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, qa));
	ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, qb));
	change(x, "Race", "r1", "Jones");
	change(x, "Race", "r2", "Jones");
	run_worker(x, "il-race-seed", 2, 2);

	/* (a) A reads r1 = Smith and stalls; meanwhile r1 becomes Brown and B
	 * runs that message to the end. A's round worked from a stale value: its
	 * check after the commit sees the new ETag, and its next round moves r1
	 * back to Brown. */
	struct wopts oa = {.queue = qa,
	                   .concurrency = 1,
	                   .visibility_s = 30,
	                   .max_dequeue = 20,
	                   .pause_at = "index_list.read:2500"};
	struct wopts ob = {.queue = qb, .concurrency = 1, .visibility_s = 30, .max_dequeue = 20};
	emp_set(x, "Race", "r1", "Smith");
	msg_put(x, qa, "Race", "r1");
	start_worker(&a, x, "il-race-a1", &oa, NULL);
	wait_taken(x, qa, &a);
	emp_set(x, "Race", "r1", "Brown");
	msg_put(x, qb, "Race", "r1");
	start_worker(&b, x, "il-race-b1", &ob, NULL);
	ITEST_CHECK(proc_wait_count(&b, 1, 10000, "message", "outcome", "succeeded", NULL), "B:\n%s",
	            proc_tail(b.log_path, 20));
	ITEST_CHECK(proc_count(&a, "message", NULL) == 0, "A finished before B: the race was not staged");
	expect_list(x, "Brown", "[[\"Race\",\"r1\"]]");
	ITEST_CHECK(proc_wait_count(&a, 1, 10000, "message", "outcome", "succeeded", NULL), "A:\n%s",
	            proc_tail(a.log_path, 20));
	struct proc_log log;
	proc_log_read(&log, a.log_path);
	const char *detail = proc_field(proc_log_find(&log, 0, "message", NULL), "detail");
	ITEST_CHECK(strstr(detail, "rounds=1 ") == NULL, "A should have needed a second round: %s", detail);
	proc_log_dispose(&log);
	proc_stop(&a, 10000);
	proc_stop(&b, 10000);
	expect_list(x, "Smith", NULL);
	expect_list(x, "Brown", "[[\"Race\",\"r1\"]]");
	check_index(x);

	/* (b) A records its intent to add r2 to Smith and stalls; r2 becomes
	 * Brown and B runs that to the end (removing r2 from Smith, where it is
	 * not yet, and keeping A's intent); then A adds r2 to Smith and dies
	 * right there. Only A's intent tells the redelivered message where to
	 * clean up. */
	struct wopts oa2 = {.queue = qa,
	                    .concurrency = 1,
	                    .visibility_s = 2,
	                    .max_dequeue = 20,
	                    .pause_at = "index_list.intent:2500"};
	emp_set(x, "Race", "r2", "Smith");
	msg_put(x, qa, "Race", "r2");
	start_worker(&a, x, "il-race-a2", &oa2, "index_list.added");
	wait_taken(x, qa, &a);
	emp_set(x, "Race", "r2", "Brown");
	msg_put(x, qb, "Race", "r2");
	start_worker(&b, x, "il-race-b2", &ob, NULL);
	ITEST_CHECK(proc_wait_count(&b, 1, 10000, "message", "outcome", "succeeded", NULL), "B:\n%s",
	            proc_tail(b.log_path, 20));
	ITEST_CHECK(proc_alive(&a), "A died before B finished: the race was not staged");
	struct ecw_entity *ref = get_ref(x, "Race", "r2");
	ITEST_CHECK(ref && str_prop(ref, "Pending") && strstr(str_prop(ref, "Pending"), "Smith") &&
	                strcmp(str_prop(ref, "ListRowKey"), "Brown") == 0,
	            "B should commit Brown and keep A's intent: %s / %s", str_prop(ref, "ListRowKey"),
	            str_prop(ref, "Pending"));
	ecw_entity_free(ref);
	ITEST_CHECK(proc_wait(&a, 10000) && proc_exit_code(&a) == 86,
	            "A should die after adding, exit %d:\n%s", proc_exit_code(&a), proc_tail(a.log_path, 20));
	expect_list(x, "Smith", "[[\"Race\",\"r2\"]]"); /* the stale add */
	struct wopts of = {.queue = qa, .concurrency = 1, .visibility_s = 30, .max_dequeue = 20};
	start_worker(&fresh, x, "il-race-fresh", &of, NULL);
	ITEST_CHECK(proc_wait_count(&fresh, 1, 15000, "message", "outcome", "succeeded", NULL), "fresh:\n%s",
	            proc_tail(fresh.log_path, 20));
	proc_stop(&fresh, 10000);
	proc_stop(&b, 10000);
	expect_list(x, "Smith", NULL);
	expect_list(x, "Brown", "[[\"Race\",\"r1\"],[\"Race\",\"r2\"]]");
	check_index(x);
	proc_assert_logs_clean();
}

/* ---- 9. competing workers ---------------------------------------------------------------- */

#define COMPETE_EMPS 16
#define COMPETE_CHANGES 200
#define COMPETE_WORKERS 4

static void test_job_index_list__competing_workers(void **state)
{
	struct wfx *x = *state;
	static const char *const names[] = {"Jones", "Smith", "Brown", "Green"};
	static const char *const chaos[] = {"index_list.added",
	                                    "index_list.intent",
	                                    "index_list.removed",
	                                    "index_list.ref",
	                                    "index_list.added",
	                                    "index_list.removed",
	                                    NULL};
	struct proc p[COMPETE_WORKERS];
	int port[COMPETE_WORKERS];
	struct wopts o = {.concurrency = 4, .visibility_s = 2, .max_dequeue = 100, .jitter_ms = 15};
	/* ECW_TEST_SEED replays a run. */
	unsigned seed = getenv("ECW_TEST_SEED") ? (unsigned)strtoul(getenv("ECW_TEST_SEED"), NULL, 10)
	                                        : (unsigned)getpid();
	size_t crashes = 0;

	print_message("competing workers: seed %u\n", seed);
	srand(seed);
	/* Workers 1-3 plain; worker 4 crashes at a step, is restarted, crashes
	 * at the next, ... then runs on without crashing. */
	for (int w = 0; w < COMPETE_WORKERS; w++) {
		char name[32];
		snprintf(name, sizeof(name), "il-compete-w%d", w + 1);
		port[w] = start_worker(&p[w], x, name, &o, w == COMPETE_WORKERS - 1 ? chaos[0] : NULL);
	}
	for (int i = 0; i < COMPETE_CHANGES; i++) {
		char rk[16];
		int who = rand() % COMPETE_EMPS;
		int r = rand() % 20;
		snprintf(rk, sizeof(rk), "emp-%02d", who);
		/* Mostly moves between the same four lists; a few deletes. */
		change(x, "Staff", rk, r == 0 ? NULL : names[r % 4]);
		if (i % 10 == 9)
			itest_sleep_ms(30);
		if (!proc_alive(&p[COMPETE_WORKERS - 1])) {
			struct proc *c = &p[COMPETE_WORKERS - 1];
			char name[32];
			ITEST_CHECK(proc_exit_code(c) == 86, "the chaos worker exited %d:\n%s",
			            proc_exit_code(c), proc_tail(c->log_path, 20));
			crashes++;
			snprintf(name, sizeof(name), "il-compete-c%zu", crashes);
			port[COMPETE_WORKERS - 1] = start_worker(c, x, name, &o, chaos[crashes]);
		}
	}
	/* Drain, restarting the chaos worker whenever it dies. */
	int64_t end = itest_now_ms() + 60000;
	int zeros = 0;
	while (zeros < 3) {
		struct proc *c = &p[COMPETE_WORKERS - 1];
		if (!proc_alive(c)) {
			char name[32];
			ITEST_CHECK(proc_exit_code(c) == 86, "the chaos worker exited %d:\n%s",
			            proc_exit_code(c), proc_tail(c->log_path, 20));
			crashes++;
			snprintf(name, sizeof(name), "il-compete-c%zu", crashes);
			port[COMPETE_WORKERS - 1] = start_worker(c, x, name, &o, chaos[crashes]);
		}
		for (int w = 0; w < COMPETE_WORKERS - 1; w++)
			ITEST_CHECK(proc_alive(&p[w]), "worker %d exited:\n%s", w + 1,
			            proc_tail(p[w].log_path, 20));
		zeros = queue_count(x, x->t->queue) == 0 ? zeros + 1 : 0;
		ITEST_CHECK(itest_now_ms() < end, "the queue did not drain in 60 s; worker 1:\n%s",
		            proc_tail(p[0].log_path, 20));
		itest_sleep_ms(200);
	}
	assert_int_equal(queue_count(x, x->poison), 0);

	/* 412s happened, and the log says how many each run met. */
	long long m412 = 0, conflicts = 0, succeeded = 0, retried = 0;
	for (int w = 0; w < COMPETE_WORKERS; w++) {
		char *page = NULL;
		if (proc_alive(&p[w]) && proc_http_get(&page, port[w], "/metrics") == 200)
			m412 += (long long)proc_metric(page, "ecw_storage_requests_total", NULL,
			                               "status=\"412\"", NULL);
		free(page);
		struct proc_log log;
		proc_log_read(&log, p[w].log_path);
		for (size_t i = 0; i < log.n; i++) {
			const char *d = proc_field(log.lines[i], "detail");
			const char *c = strstr(d, "conflicts=");
			if (c)
				conflicts += strtoll(c + 10, NULL, 10);
		}
		succeeded += (long long)proc_log_count(&log, "message", "outcome", "succeeded", NULL);
		retried += (long long)proc_log_count(&log, "message", "outcome", "retried", NULL);
		proc_log_dispose(&log);
	}
	print_message(
	    "competing workers: %lld succeeded (plus %zu crashes), %lld retried, %lld lost races in "
	    "the log, %lld 412 answers in the metrics of the running workers\n",
	    succeeded, crashes, retried, conflicts, m412);
	ITEST_CHECK(crashes >= 3, "the chaos worker crashed only %zu times", crashes);
	ITEST_CHECK(conflicts > 0 && m412 > 0, "no lost race seen (%lld in the log, %lld 412s in metrics)",
	            conflicts, m412);

	/* The end state is the recomputation: nobody lost, nobody stale. */
	size_t lists = check_index(x);
	ITEST_CHECK(lists >= 1, "no list at all");
	for (int w = 0; w < COMPETE_WORKERS; w++)
		proc_stop(&p[w], 10000);
	proc_assert_logs_clean();
}

/* ---- 10. a list over the size limit ------------------------------------------------------------ */

/* UTF-16 code units of a UTF-8 string. */
static size_t u16(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xC0) != 0x80)
			n += (unsigned char)*s >= 0xF0 ? 2 : 1;
	return n;
}

static void test_job_index_list__list_too_large(void **state)
{
	struct wfx *x = *state;
	/* A's RowKey: an emoji (2 UTF-16 units) and 'ë's (1 unit, 2 bytes). */
	char rk_a[512] = "A-\xf0\x9f\x98\x80", rk_b[8] = "B";
	struct ecw_buf keys;
	char *etag_before, *etag_after, *after;
	int i;

	for (i = 0; i < 100; i++)
		strcat(rk_a, "\xc3\xab");
	/* Seed list Big with made-up keys so that adding A makes its Keys
	 * exactly KEYS_MAX_UTF16 units long. Each pair ["Seed","k"] is
	 * len(k) + 11 units plus a comma; the seeds are mostly 'ë' too, so
	 * the list is ~60,000 bytes of UTF-8 and still within the limit. */
	size_t a_units = 1 + strlen("[\"Emp\",\"\"]") + u16(rk_a);
	size_t target = KEYS_MAX_UTF16 - a_units; /* Keys of the seed */
	ecw_buf_init(&keys, 0);
	ECW_ASSERT_OK(ecw_buf_adds(&keys, "["));
	size_t units = 2;
	int nseed = 0;
	while (units < target) {
		char k[1200];
		size_t left = target - units - (nseed ? 1 : 0) - strlen("[\"Seed\",\"\"]");
		/* 400 units a seed; the last two share what is left. */
		size_t body = left > 800 ? 400 : left > 400 ? left - 300 : left;
		int off = snprintf(k, sizeof(k), "s%03d-", nseed);
		ITEST_CHECK(body >= (size_t)off, "the seed arithmetic went wrong");
		for (size_t j = (size_t)off; j < body; j++) {
			memcpy(k + off, "\xc3\xab", 2);
			off += 2;
		}
		k[off] = '\0';
		ECW_ASSERT_OK(ecw_buf_printf(&keys, "%s[\"Seed\",\"%s\"]", nseed ? "," : "", k));
		units += (nseed ? 1 : 0) + strlen("[\"Seed\",\"\"]") + u16(k);
		nseed++;
	}
	ECW_ASSERT_OK(ecw_buf_adds(&keys, "]"));
	ITEST_CHECK(u16(keys.ptr) == target, "seed is %zu units, wanted %zu", u16(keys.ptr), target);
	struct ecw_entity *list = NULL;
	ECW_ASSERT_OK(ecw_entity_new(&list, LIST_PK, "Big"));
	ECW_ASSERT_OK(ecw_entity_set_string(list, "Keys", keys.ptr, keys.len));
	ECW_ASSERT_OK(ecw_entity_set_int32(list, "Count", nseed));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table2, list, ECW_WRITE_INSERT, NULL));
	ecw_entity_free(list);

	/* A fits exactly (32,000 units: the emoji counted twice). */
	change(x, "Emp", rk_a, "Big");
	run_worker(x, "il-large-1", 1, 1);
	after = list_keys(x, "Big", &etag_before);
	ITEST_CHECK(after && u16(after) == KEYS_MAX_UTF16 && strstr(after, rk_a),
	            "A should be in Big, now %zu units long", after ? u16(after) : 0);
	free(after);

	/* B does not: poisoned at once, with a message naming the list. */
	change(x, "Emp", rk_b, "Big");
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	start_worker(&p, x, "il-large-2", &o, NULL);
	ITEST_CHECK(proc_wait_count(&p, 1, 20000, "message", NULL), "no outcome for B:\n%s",
	            proc_tail(p.log_path, 20));
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", NULL);
	assert_string_equal(proc_field(line, "outcome"), "poisoned");
	assert_string_equal(proc_field(line, "reason"), "permanent");
	assert_int_equal(proc_field_int(line, "dequeue_count", -1), 1);
	const char *err = proc_field(line, "error");
	ITEST_CHECK(strstr(err, "lastname/Big is too large") && strstr(err, "32012 UTF-16") &&
	                strstr(err, JOB) && strstr(err, "(Emp, B)"),
	            "error: %s", err);
	proc_log_dispose(&log);
	wait_drained(x, x->t->queue, &p, 1, 10000);
	assert_int_equal(queue_count(x, x->poison), 1);
	proc_stop(&p, 10000);

	/* Nothing was written for B: the list as it was, no ref. */
	free(list_keys(x, "Big", &etag_after));
	assert_string_equal(etag_before, etag_after);
	struct ecw_entity *ref = get_ref(x, "Emp", rk_b);
	ITEST_CHECK(ref == NULL, "B has a ref: %s", str_prop(ref, "Pending"));
	free(etag_before);
	free(etag_after);
	ecw_buf_dispose(&keys);
	proc_assert_logs_clean();
}

/* ---- 11. values that make no list --------------------------------------------------------- */

static void test_job_index_list__bad_values_poisoned(void **state)
{
	struct wfx *x = *state;
	struct ecw_entity *e = NULL;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	struct proc_log log;

	/* A value the service refuses in a key, and no LastName at all: both
	 * permanent, each named in the error; an empty LastName is a list
	 * like any other (RowKey ""). */
	change(x, "Odd", "slash", "AC/DC");
	ECW_ASSERT_OK(ecw_entity_new(&e, "Odd", "nameless"));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "FirstName", "Bo", 2));
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
	msg_put(x, NULL, "Odd", "nameless");
	change(x, "Odd", "empty", "");
	start_worker(&p, x, "il-bad", &o, NULL);
	ITEST_CHECK(proc_wait_count(&p, 3, 20000, "message", NULL), "3 outcomes expected:\n%s",
	            proc_tail(p.log_path, 20));
	wait_drained(x, x->t->queue, &p, 1, 10000);
	proc_log_read(&log, p.log_path);
	struct json_object *slash = proc_log_find(&log, 0, "message", "rk", "slash", NULL);
	struct json_object *nameless = proc_log_find(&log, 0, "message", "rk", "nameless", NULL);
	struct json_object *empty = proc_log_find(&log, 0, "message", "rk", "empty", NULL);
	assert_string_equal(proc_field(slash, "outcome"), "poisoned");
	assert_string_equal(proc_field(slash, "reason"), "permanent");
	ITEST_CHECK(strstr(proc_field(slash, "error"), "row_key result contains '/'") &&
	                strstr(proc_field(slash, "error"), JOB),
	            "error: %s", proc_field(slash, "error"));
	assert_string_equal(proc_field(nameless, "outcome"), "poisoned");
	ITEST_CHECK(strstr(proc_field(nameless, "error"), "LastName") != NULL, "error: %s",
	            proc_field(nameless, "error"));
	assert_string_equal(proc_field(empty, "outcome"), "succeeded");
	proc_log_dispose(&log);
	assert_int_equal(queue_count(x, x->poison), 2);
	proc_stop(&p, 10000);

	expect_list(x, "", "[[\"Odd\",\"empty\"]]");
	e = get_ref(x, "Odd", "slash");
	ITEST_CHECK(e == NULL, "a poisoned run left a ref");
	e = get_ref(x, "Odd", "nameless");
	ITEST_CHECK(e == NULL, "a poisoned run left a ref");
	proc_assert_logs_clean();
}

/* A missing source table is a deployment problem, not a deleted source:
 * the run fails (transient, retried) naming it, and touches no list. */
static void test_job_index_list__missing_table_is_an_error(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	char missing[64];
	struct proc p;
	struct proc_log log;

	seed_five(x, "il-missing-1");
	itest_unique_name(missing, sizeof(missing), 't', "nosuch");
	o.source = missing;
	o.no_create = true;
	msg_put(x, NULL, "Sales", "o'brien 001");
	start_worker(&p, x, "il-missing-2", &o, NULL);
	ITEST_CHECK(proc_wait_count(&p, 1, 20000, "message", NULL), "no outcome:\n%s",
	            proc_tail(p.log_path, 20));
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", NULL);
	assert_string_equal(proc_field(line, "outcome"), "retried");
	ITEST_CHECK(strstr(proc_field(line, "error"), "TableNotFound") &&
	                strstr(proc_field(line, "error"), missing),
	            "error: %s", proc_field(line, "error"));
	proc_log_dispose(&log);
	proc_stop(&p, 10000);
	expect_list(x, "Jones", JONES3);
	assert_int_equal(check_index(x), 2);
	proc_assert_logs_clean();
}

/* ---- 12. configuration errors ------------------------------------------------------------------ */

static void test_job_index_list__config_errors(void **state)
{
	(void)state;
	char path[640];
	char *out = NULL, *err = NULL;

	proc_write_file(path, sizeof(path), "il-badconfig.yaml",
	                "storage: {connection_string: UseDevelopmentStorage=true}\n"
	                "jobs:\n"
	                "  same-table:\n"
	                "    type: index-list\n"
	                "    source: Employees\n"
	                "    table: employees\n"
	                "    partition_key: lastname\n"
	                "    row_key: \"{LastName}\"\n"
	                "  missing:\n"
	                "    type: index-list\n"
	                "    source: Employees\n"
	                "    table: EmployeeIndex\n"
	                "    row_key: \"{LastName\"\n"
	                "    colour: blue\n"
	                "  reserved:\n"
	                "    type: index-list\n"
	                "    source: Employees\n"
	                "    table: EmployeeIndex\n"
	                "    partition_key: \"~ref~{Dept}\"\n"
	                "    row_key: \"{LastName}\"\n");
	const char *args[] = {"check-config", "-c", path, NULL};
	int rc = proc_run(&out, &err, "il-badconfig", args, NULL, 10000);
	assert_int_equal(rc, 2);
	ITEST_CHECK(strstr(err, "table: the lists need a table of their own") &&
	                strstr(err, "partition_key") && strstr(err, "row_key") && strstr(err, "colour") &&
	                strstr(err, "starts the partitions of the index's references"),
	            "check-config said:\n%s%s", out, err);
	free(out);
	free(err);
	proc_assert_logs_clean();
}

/* ---- 13. poisoned messages hand their intents over ----------------------------------------------- */

/* One poisoning case: a move From -> To whose first delivery dies after a
 * step (an intent in the ref), the message poisoned, replayed with the
 * operator's command under a new message id, and run by a fresh worker. */
struct poison_case {
	const char *name; /* max-dequeue | deleted | permanent | crash-in-abandon */
	const char *crash;
	char queue[64], poison[64];
	char rk[32], from[32], to[32];
	char poisoned_id[128]; /* the message id the poisoning worker logged */
	char *pending;         /* the ref's Pending once poisoned */
	struct proc crashed, poisoner, poisoner2, fresh;
};

/* `poison replay` over the case's queues: puts the original text back. */
static void replay_case(struct wfx *x, struct poison_case *c, const struct wopts *o)
{
	char path[640], name[96], *out = NULL, *err = NULL;
	const char *args[] = {"poison", "replay", "-c", path, NULL};

	snprintf(name, sizeof(name), "il-replay-%s", c->name);
	write_config(path, sizeof(path), x, name, o);
	int rc = proc_run(&out, &err, name, args, NULL, 30000);
	ITEST_CHECK(rc == 0 && strstr(out, "1 selected, 1 replayed"), "%s: poison replay exited %d:\n%s%s",
	            c->name, rc, out, err);
	free(out);
	free(err);
}

/* One worker on the case's queues; a message it dies holding is back in 1 s. */
static struct wopts case_opts(const struct poison_case *c, int max_dequeue)
{
	struct wopts o = {.queue = c->queue,
	                  .poison = c->poison,
	                  .concurrency = 1,
	                  .visibility_s = 1,
	                  .max_dequeue = max_dequeue};
	return o;
}

static void test_job_index_list__poisoned_intents_handed_over(void **state)
{
	struct wfx *x = *state;
	struct poison_case cs[] = {{.name = "max-dequeue", .crash = "index_list.added"},
	                           {.name = "deleted", .crash = "index_list.added"},
	                           {.name = "permanent", .crash = "index_list.intent"},
	                           {.name = "crash-in-abandon", .crash = "index_list.added"}};
	const size_t n = sizeof(cs) / sizeof(cs[0]);
	char *etag_abandoned = NULL;

	/* Each employee in its From list with a companion (so the list stays). */
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		char buddy[40];
		snprintf(c->rk, sizeof(c->rk), "p%zu", i);
		snprintf(c->from, sizeof(c->from), "From%zu", i);
		snprintf(c->to, sizeof(c->to), "To%zu", i);
		snprintf(buddy, sizeof(buddy), "%s-buddy", c->rk);
		change(x, "Poison", c->rk, c->from);
		change(x, "Poison", buddy, c->from);
		itest_unique_name(c->queue, sizeof(c->queue), 'q', "pcase");
		itest_unique_name(c->poison, sizeof(c->poison), 'q', "ppoison");
		itest_keep_queue(x->t, c->queue);
		itest_keep_queue(x->t, c->poison);
		ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, c->queue));
		ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, c->poison));
	}
	run_worker(x, "il-poison-seed", 2 * n, 4);

	/* The move, and a first delivery that dies after writing its intent
	 * (and, at .added, adding the employee to To). */
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		struct wopts o = case_opts(c, 20);
		char name[96];
		emp_set(x, "Poison", c->rk, c->to);
		msg_put(x, c->queue, "Poison", c->rk);
		snprintf(name, sizeof(name), "il-poison-crash-%s", c->name);
		start_worker(&c->crashed, x, name, &o, c->crash);
	}
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		ITEST_CHECK(proc_wait(&c->crashed, 20000) && proc_exit_code(&c->crashed) == 86,
		            "%s: the first delivery did not die at %s; log:\n%s", c->name, c->crash,
		            proc_tail(c->crashed.log_path, 20));
		struct ecw_entity *ref = get_ref(x, "Poison", c->rk);
		ITEST_CHECK(ref && str_prop(ref, "Pending") && strstr(str_prop(ref, "Pending"), c->to),
		            "%s: no intent for %s after the crash: %s", c->name, c->to,
		            ref ? str_prop(ref, "Pending") : "(no ref)");
		ecw_entity_free(ref);
	}

	/* Poisoned: over max_dequeue_count on receipt, without running; or, for
	 * "permanent", run at its second delivery with a value that makes no key.
	 * In "crash-in-abandon" the poisoning worker dies right after handing
	 * the intents over, and another poisons the message again. */
	emp_set(x, "Poison", cs[2].rk, "AC/DC");
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		struct wopts o = case_opts(c, strcmp(c->name, "permanent") == 0 ? 5 : 1);
		char name[96];
		snprintf(name, sizeof(name), "il-poison-%s", c->name);
		start_worker(&c->poisoner, x, name, &o,
		             strcmp(c->name, "crash-in-abandon") == 0 ? "index_list.abandoned" : NULL);
	}
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		struct proc *p = &c->poisoner;
		if (strcmp(c->name, "crash-in-abandon") == 0) {
			struct wopts o = case_opts(c, 1);
			ITEST_CHECK(proc_wait(p, 20000) && proc_exit_code(p) == 86,
			            "%s: the poisoning worker did not die in abandon; log:\n%s", c->name,
			            proc_tail(p->log_path, 20));
			ITEST_CHECK(queue_count(x, c->poison) == 0, "%s: an envelope before the crash",
			            c->name);
			struct ecw_entity *ref = get_ref(x, "Poison", c->rk);
			assert_non_null(ref);
			etag_abandoned = strdup(ecw_entity_etag(ref));
			ecw_entity_free(ref);
			p = &c->poisoner2;
			start_worker(p, x, "il-poison-crash-in-abandon-2", &o, NULL);
		}
		ITEST_CHECK(proc_wait_count(p, 1, 20000, "message", "outcome", "poisoned", NULL),
		            "%s: not poisoned; log:\n%s", c->name, proc_tail(p->log_path, 20));
		struct proc_log log;
		proc_log_read(&log, p->log_path);
		struct json_object *line = proc_log_find(&log, 0, "message", NULL);
		assert_string_equal(proc_field(line, "reason"),
		                    strcmp(c->name, "permanent") == 0 ? "permanent" : "max-dequeue");
		snprintf(c->poisoned_id, sizeof(c->poisoned_id), "%s", proc_field(line, "message_id"));
		proc_log_dispose(&log);
		wait_drained(x, c->queue, p, 1, 10000);
		assert_int_equal(queue_count(x, c->poison), 1);
		ITEST_CHECK(proc_count(p, "abandon_failed", NULL) == 0, "%s: abandon failed:\n%s", c->name,
		            proc_tail(p->log_path, 20));
		proc_stop(p, 10000);
		struct ecw_entity *ref = get_ref(x, "Poison", c->rk);
		assert_non_null(ref);
		c->pending = strdup(str_prop(ref, "Pending") ? str_prop(ref, "Pending") : "(none)");
		if (p == &c->poisoner2) /* nothing of the id was left to hand over */
			ITEST_CHECK(strcmp(ecw_entity_etag(ref), etag_abandoned) == 0,
			            "%s: the second poisoning wrote the ref again", c->name);
		ecw_entity_free(ref);
	}

	/* The operator fixes what made it fail, and replays: a new message id. */
	emp_set(x, "Poison", cs[1].rk, NULL);
	emp_set(x, "Poison", cs[2].rk, "Fixed2");
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		struct wopts o = WOPTS_DEFAULT;
		char name[96];
		o.queue = c->queue;
		o.poison = c->poison;
		o.concurrency = 1;
		replay_case(x, c, &o);
		snprintf(name, sizeof(name), "il-poison-replayed-%s", c->name);
		start_worker(&c->fresh, x, name, &o, NULL);
	}
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		ITEST_CHECK(proc_wait_count(&c->fresh, 1, 20000, "message", "outcome", "succeeded", NULL),
		            "%s: the replayed message did not succeed; log:\n%s", c->name,
		            proc_tail(c->fresh.log_path, 20));
		ITEST_CHECK(proc_count(&c->fresh, "message", "message_id", c->poisoned_id, NULL) == 0,
		            "%s: the replay ran under the poisoned message's id", c->name);
		wait_drained(x, c->queue, &c->fresh, 1, 10000);
		proc_stop(&c->fresh, 10000);
		assert_int_equal(queue_count(x, c->poison), 0);
	}

	/* The end state is the no-poison state: every list exact, no intents
	 * left in any ref, no ref for the deleted employee. */
	check_index(x);
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		char buddy[64], alone[64];
		snprintf(buddy, sizeof(buddy), "[[\"Poison\",\"%s-buddy\"]]", c->rk);
		snprintf(alone, sizeof(alone), "[[\"Poison\",\"%s\"]]", c->rk);
		expect_list(x, c->from, buddy);
		expect_list(x, c->to,
		            strcmp(c->name, "deleted") == 0 || strcmp(c->name, "permanent") == 0 ? NULL
		                                                                                 : alone);
		struct ecw_entity *ref = get_ref(x, "Poison", c->rk);
		if (strcmp(c->name, "deleted") == 0)
			ITEST_CHECK(ref == NULL, "deleted: the ref is still there: %s",
			            str_prop(ref, "Pending"));
		ecw_entity_free(ref);
		/* How: the poisoning handed the dead id's intents over. */
		ITEST_CHECK(strstr(c->pending, "\"~poisoned~\"") && !strstr(c->pending, c->poisoned_id),
		            "%s: once poisoned, the ref's intents should be \"~poisoned~\"'s, not %s's: %s",
		            c->name, c->poisoned_id, c->pending);
		free(c->pending);
	}
	expect_list(x, "Fixed2", "[[\"Poison\",\"p2\"]]");
	free(etag_abandoned);
	proc_assert_logs_clean();
}

/* Writes the ref of (pk, rk) by hand: committed to lastname/list, pending
 * (NULL: none), naming source keys spk/srk (a ref of someone else when they
 * differ). */
static void ref_put(struct wfx *x, const char *pk, const char *rk, const char *spk, const char *srk,
                    const char *list, const char *pending)
{
	char *h = ref_rk(pk, rk), rpk[64];
	struct ecw_entity *e = NULL;

	snprintf(rpk, sizeof(rpk), "%s%.2s", REF_PREFIX, h);
	ECW_ASSERT_OK(ecw_entity_new(&e, rpk, h));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "SourcePartitionKey", spk, strlen(spk)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "SourceRowKey", srk, strlen(srk)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "ListPartitionKey", LIST_PK, strlen(LIST_PK)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "ListRowKey", list, strlen(list)));
	if (pending)
		ECW_ASSERT_OK(ecw_entity_set_string(e, "Pending", pending, strlen(pending)));
	ECW_ASSERT_OK(
	    ecw_table_write(NULL, x->t->client, x->t->table2, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
	free(h);
}

static char *ref_etag(struct wfx *x, const char *pk, const char *rk)
{
	struct ecw_entity *e = get_ref(x, pk, rk);
	char *etag = e ? strdup(ecw_entity_etag(e)) : NULL;
	ecw_entity_free(e);
	return etag;
}

/* Calls the job's abandon for ctx: it must return want and leave the ref as
 * it was (the same ETag, or still absent). */
static void abandon_writes_nothing(struct wfx *x, const struct ecw_job_def *def, struct ecw_job_ctx *ctx,
                                   int want)
{
	char *before = ref_etag(x, ctx->pk, ctx->rk), *after;

	assert_int_equal(def->type->abandon(def->settings, ctx), want);
	after = ref_etag(x, ctx->pk, ctx->rk);
	ITEST_CHECK(before ? after && strcmp(before, after) == 0 : after == NULL,
	            "abandon for (%s, %s) wrote the ref: ETag %s, now %s", ctx->pk, ctx->rk,
	            before ? before : "(none)", after ? after : "(none)");
	free(before);
	free(after);
}

/* The job's abandon and run called in-process, on refs written by hand:
 * abandon rewrites exactly the id's own intents and writes nothing when there
 * are none (or no ref); a run then drops the "~poisoned~" intents and keeps
 * another live owner's. */
static void test_job_index_list__abandon_in_process(void **state)
{
	struct wfx *x = *state;
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;
	struct wopts o = WOPTS_DEFAULT;
	char path[640];

	/* The worker's configuration, loaded here: the job as it would run. */
	write_config(path, sizeof(path), x, "il-abandon", &o);
	ecw_node_errors_init(&errs);
	ECW_ASSERT_OK(ecw_config_load(&cfg, path, &errs));
	ecw_node_errors_dispose(&errs);
	const struct ecw_job_def *def = ecw_config_job(cfg, JOB);
	assert_non_null(def);
	assert_non_null(def->type->abandon);
	struct ecw_job_ctx ctx = {.client = x->t->client,
	                          .job = JOB,
	                          .pk = "Unit",
	                          .rk = "u1",
	                          .trace_id = "msg-1",
	                          .message_id = "msg-1",
	                          .dequeue_count = 6};

	/* No ref: nothing to hand over, and no ref made. */
	abandon_writes_nothing(x, def, &ctx, 0);

	/* Intents of others only (and none at all): no write. */
	ref_put(x, "Unit", "u1", "Unit", "u1", "Jones", "[[\"lastname\",\"Smith\",\"msg-2\"]]");
	ref_put(x, "Unit", "u2", "Unit", "u2", "Jones", NULL);
	abandon_writes_nothing(x, def, &ctx, 0);
	ctx.rk = "u2";
	abandon_writes_nothing(x, def, &ctx, 0);

	/* Its own: rewritten, merged with a "~poisoned~" one already there;
	 * another owner's and the committed list stay. */
	ctx.rk = "u1";
	ref_put(x, "Unit", "u1", "Unit", "u1", "Jones",
	        "[[\"lastname\",\"Brown\",\"msg-1\"],[\"lastname\",\"Smith\",\"msg-2\"],"
	        "[\"lastname\",\"Smith\",\"msg-1\"],[\"lastname\",\"Brown\",\"~poisoned~\"]]");
	ECW_ASSERT_OK(def->type->abandon(def->settings, &ctx));
	struct ecw_entity *ref = get_ref(x, "Unit", "u1");
	assert_non_null(ref);
	assert_string_equal(str_prop(ref, "Pending"), "[[\"lastname\",\"Brown\",\"~poisoned~\"],"
	                                              "[\"lastname\",\"Smith\",\"msg-2\"],"
	                                              "[\"lastname\",\"Smith\",\"~poisoned~\"]]");
	assert_string_equal(str_prop(ref, "ListRowKey"), "Jones");
	assert_string_equal(str_prop(ref, "SourceRowKey"), "u1");
	ecw_entity_free(ref);
	/* Once more (a crash before the envelope, poisoned again): no write. */
	abandon_writes_nothing(x, def, &ctx, 0);

	/* A ref that is not this source's: an error, nothing written. */
	ref_put(x, "Unit", "u3", "Unit", "someone else", "Jones", "[[\"lastname\",\"Smith\",\"msg-1\"]]");
	ctx.rk = "u3";
	abandon_writes_nothing(x, def, &ctx, ECW_EINVALID);

	/* A later run (another id) drops the "~poisoned~" intents after
	 * removing u1 from their lists; msg-2's, of a run that may be live,
	 * stays. */
	emp_set(x, "Unit", "u1", "Jones");
	ctx.rk = "u1";
	ctx.trace_id = ctx.message_id = "msg-3";
	ctx.dequeue_count = 1;
	ECW_ASSERT_OK(def->type->run(def->settings, &ctx));
	ref = get_ref(x, "Unit", "u1");
	assert_non_null(ref);
	assert_string_equal(str_prop(ref, "Pending"), "[[\"lastname\",\"Smith\",\"msg-2\"]]");
	assert_string_equal(str_prop(ref, "ListRowKey"), "Jones");
	ecw_entity_free(ref);
	expect_list(x, "Jones", "[[\"Unit\",\"u1\"]]");
	ecw_config_free(cfg);
	proc_assert_logs_clean();
}

/* An abandon that fails is logged, and the message is poisoned all the same
 * (its intents, if any, stay with the dead id: the documented leftover). */
static void test_job_index_list__abandon_failure_still_poisons(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	struct proc_log log;

	/* The ref at the employee's hashed key names someone else: the run and
	 * the abandon both refuse it. */
	ref_put(x, "Odd", "r1", "Odd", "someone else", "Jones", "[[\"lastname\",\"Smith\",\"msg-1\"]]");
	char *before = ref_etag(x, "Odd", "r1");
	change(x, "Odd", "r1", "Jones");
	start_worker(&p, x, "il-abandon-fails", &o, NULL);
	ITEST_CHECK(proc_wait_count(&p, 1, 20000, "message", NULL), "no outcome:\n%s",
	            proc_tail(p.log_path, 20));
	wait_drained(x, x->t->queue, &p, 1, 10000);
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", NULL);
	struct json_object *failed = proc_log_find(&log, 0, "abandon_failed", NULL);
	assert_string_equal(proc_field(line, "outcome"), "poisoned");
	assert_string_equal(proc_field(line, "reason"), "permanent");
	ITEST_CHECK(failed, "no abandon_failed line:\n%s", proc_tail(p.log_path, 20));
	assert_string_equal(proc_field(failed, "level"), "warn");
	assert_string_equal(proc_field(failed, "job"), JOB);
	assert_string_equal(proc_field(failed, "rk"), "r1");
	assert_string_equal(proc_field(failed, "message_id"), proc_field(line, "message_id"));
	ITEST_CHECK(strstr(proc_field(failed, "error"), "is not for (Odd, r1)"), "error: %s",
	            proc_field(failed, "error"));
	proc_log_dispose(&log);
	assert_int_equal(queue_count(x, x->poison), 1);
	proc_stop(&p, 10000);
	char *after = ref_etag(x, "Odd", "r1");
	assert_string_equal(before, after);
	free(before);
	free(after);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_index_list__happy_path, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__run_twice, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__value_changed, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__stale_message_after_newer_change, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__source_deleted, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__reordered, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__crash_after_every_step, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__staged_races, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__competing_workers, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__list_too_large, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__bad_values_poisoned, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__missing_table_is_an_error, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__config_errors, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__poisoned_intents_handed_over, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__abandon_in_process, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list__abandon_failure_still_poisons, ix_setup,
	                                    ix_teardown),
	};
	/* ECW_TEST_FILTER=test_job_index_list__crash* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
