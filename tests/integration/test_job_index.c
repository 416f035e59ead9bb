/* test_job_index.c - the `index` job type as a process: build/ecworker-test
 * runs against Azurite with an index job over a source table, and the tests
 * judge it by what it leaves in storage, compared with a full recomputation
 * from the source (every expected index entry and back-reference, exact
 * properties and EDM types, nothing else): the happy path, every message run
 * twice, a changed indexed value, a stale message after a newer change, a
 * deleted source, reordered messages, two workers racing on quick changes,
 * two sources swapping values and a duplicate key, three staged races
 * (ECW_TEST_PAUSE_AT) in which a round that read an older source finishes
 * last, a crash right after every step (ECW_CRASH_AT) followed by a fresh
 * worker, permanent errors for a missing template property and an invalid or
 * reserved key, the `properties:` variants, every EDM type, an index in its
 * source's own table (and never writing over other data there), and the
 * configuration errors. Each case has its own queues and tables. */
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <json-c/json.h>
#include <math.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOB "by-email"

/* ---- fixture ------------------------------------------------------------------------------------ */

/* t->queue is the job queue, t->table the source, t->table2 the index: the
 * workers create them. */
static int ix_setup(void **state)
{
	*state = wfx_new(sizeof(struct wfx), 0);
	return 0;
}

static int ix_teardown(void **state)
{
	return wfx_teardown(state);
}

static const char *extra_queue(struct wfx *x)
{
	return itest_extra_queue(x->t, "ixq");
}

static const char *extra_table(struct wfx *x)
{
	return itest_extra_table(x->t, "ixt");
}

/* ---- the worker --------------------------------------------------------------------------------- */

struct wopts {
	const char *queue;      /* NULL: the fixture's */
	const char *jobs;       /* lines under jobs:, indented two spaces; NULL: the default job */
	const char *properties; /* the default job's `properties:` value; NULL: omitted */
	int visibility_s, concurrency, max_dequeue;
};

#define WOPTS_DEFAULT                                                                                        \
	{                                                                                                    \
		NULL, NULL, "[FirstName, LastName]", 10, 4, 20                                               \
	}

/* The default job: employees by e-mail, from t->table into t->table2. */
static void default_job(char *out, size_t cap, struct wfx *x, const char *name, const char *source,
                        const char *index, const char *properties)
{
	int k = snprintf(out, cap,
	                 "  %s:\n"
	                 "    type: index\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    partition_key: \"email_{PartitionKey}\"\n"
	                 "    row_key: \"{Email}\"\n"
	                 "%s%s%s",
	                 name, source ? source : x->t->table, index ? index : x->t->table2,
	                 properties ? "    properties: " : "", properties ? properties : "",
	                 properties ? "\n" : "");
	assert_true(k > 0 && (size_t)k < cap);
}

static void write_config(char *path, size_t cap, struct wfx *x, const char *name, const struct wopts *o)
{
	struct wfx_worker w = WFX_WORKER(o->queue ? o->queue : x->t->queue, x->poison);
	char job[1024];

	if (!o->jobs)
		default_job(job, sizeof(job), x, JOB, NULL, NULL, o->properties);
	w.concurrency = o->concurrency;
	w.visibility_s = o->visibility_s;
	w.max_dequeue = o->max_dequeue;
	w.poll_min = "20ms";
	w.poll_max = "100ms";
	w.log_level = "info";
	w.jobs = o->jobs ? o->jobs : job;
	wfx_write_config(path, cap, name, &w);
}

/* env: NULL, or one "K=V" for the worker's environment (ECW_CRASH_AT=...,
 * ECW_TEST_PAUSE_AT=..., ECW_TEST_STEP_JITTER_MS=...). */
static void start_worker(struct proc *p, struct wfx *x, const char *name, const struct wopts *o,
                         const char *env)
{
	char path[640];
	const char *args[] = {"run", "-c", path, NULL};
	const char *envv[] = {env, NULL};

	write_config(path, sizeof(path), x, name, o);
	proc_start(p, name, args, env ? envv : NULL);
}

/* Lines "message" with this outcome (NULL: any) summed over n workers. */
static size_t outcomes(struct proc *p, int n, const char *outcome)
{
	size_t sum = 0;

	for (int i = 0; i < n; i++)
		sum += outcome ? proc_count(&p[i], "message", "outcome", outcome, NULL)
		               : proc_count(&p[i], "message", NULL);
	return sum;
}

/* Waits until n workers logged want outcomes (NULL: any) between them. */
static void wait_outcomes(struct proc *p, int n, size_t want, const char *outcome, int timeout_ms)
{
	int64_t end = itest_now_ms() + timeout_ms;
	size_t got;

	while ((got = outcomes(p, n, outcome)) < want) {
		if (itest_now_ms() > end)
			fail_msg(
			    "%zu message line(s) with outcome %s within %d ms, expected %zu; log %s:\n%s",
			    got, outcome ? outcome : "(any)", timeout_ms, want, p[0].log_path,
			    proc_tail(p[0].log_path, 30));
		for (int i = 0; i < n; i++)
			ITEST_CHECK(proc_alive(&p[i]), "worker %s exited; log:\n%s", p[i].name,
			            proc_tail(p[i].log_path, 30));
		itest_sleep_ms(30);
	}
}

/* Stops the workers and checks their logs for secrets. */
static void finish(struct proc *p, int n)
{
	for (int i = 0; i < n; i++)
		proc_stop(&p[i], 10000);
	proc_assert_logs_clean();
}

/* ---- storage helpers ---------------------------------------------------------------------------- */

static void enqueue_on(struct wfx *x, const char *queue, const char *job, const char *pk, const char *rk,
                       int delay_s)
{
	struct json_object *o = json_object_new_object();
	struct ecw_queue_put_options po = {delay_s, 0};
	const char *text;

	json_object_object_add(o, "job", json_object_new_string(job));
	json_object_object_add(o, "pk", json_object_new_string(pk));
	json_object_object_add(o, "rk", json_object_new_string(rk));
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	ECW_ASSERT_OK(
	    ecw_queue_put(NULL, x->t->client, queue ? queue : x->t->queue, text, strlen(text), &po));
	json_object_put(o);
}

static void enqueue(struct wfx *x, const char *pk, const char *rk)
{
	enqueue_on(x, NULL, JOB, pk, rk, 0);
}

static void set_str(struct ecw_entity *e, const char *name, const char *v)
{
	ECW_ASSERT_OK(ecw_entity_set_string(e, name, v, strlen(v)));
}

/* An employee; first/last/email NULL: absent. */
static struct ecw_entity *employee(const char *pk, const char *rk, const char *email, const char *first,
                                   const char *last)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	if (email)
		set_str(e, "Email", email);
	if (first)
		set_str(e, "FirstName", first);
	if (last)
		set_str(e, "LastName", last);
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Salary", 50000.0));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Grade", 7));
	return e;
}

/* Writes e (insert-or-replace) into table and frees it. */
static void upsert(struct wfx *x, const char *table, struct ecw_entity *e)
{
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

static void put_employee(struct wfx *x, const char *pk, const char *rk, const char *email)
{
	upsert(x, x->t->table, employee(pk, rk, email, "Ann", "Lee"));
}

static void ensure_table(struct wfx *x, const char *table)
{
	ECW_ASSERT_OK(ecw_table_create(NULL, x->t->client, table));
}

/* Every entity of table (caller frees each and the array). */
static struct ecw_entity **all_entities(size_t *n, struct wfx *x, const char *table)
{
	return itest_query_all(n, x->t->client, table, NULL);
}

static size_t count_entities(struct wfx *x, const char *table)
{
	size_t n = 0;
	struct ecw_entity **v = all_entities(&n, x, table);

	itest_entities_free(v, n);
	return n;
}

/* NULL when absent. */
static struct ecw_entity *get(struct wfx *x, const char *table, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	int err = ecw_table_get(&e, x->t->client, table, pk, rk);

	if (err == ECW_ENOTFOUND)
		return NULL;
	ECW_ASSERT_OK(err);
	return e;
}

/* ---- the recomputation -------------------------------------------------------------------------- */

struct spec {
	const char *job;            /* NULL: JOB */
	const char *source, *index; /* NULL: t->table, t->table2 */
	const char *const *props;   /* copied properties, NULL-terminated; NULL: all */
};

static const char *const FIRST_LAST[] = {"FirstName", "LastName", NULL};

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static const char *strp(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);
	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

/* What the index table holds that is not source data: references and
 * entries (only differs from "everything" when source == index). */
static bool is_derived(const struct ecw_entity *e)
{
	return starts_with(ecw_entity_pk(e), "~ref~") ||
	       (strp(e, "SourcePartitionKey") && strp(e, "SourceRowKey"));
}

/* The back-reference's keys, computed here from the documented rule:
 * ("~ref~" + job + "~" + h[0..1], h), h = hex SHA-256 of pk NUL rk. */
static void ref_keys(char *pk, size_t pkcap, char *rk, size_t rkcap, const char *job, const char *spk,
                     const char *srk)
{
	size_t np = strlen(spk), nr = strlen(srk);
	unsigned char *in = malloc(np + nr + 1), md[SHA256_DIGEST_LENGTH];

	assert_non_null(in);
	memcpy(in, spk, np + 1);
	memcpy(in + np + 1, srk, nr);
	SHA256(in, np + nr + 1, md);
	free(in);
	assert_true(rkcap > 64);
	for (int i = 0; i < 32; i++)
		snprintf(rk + 2 * i, 3, "%02x", md[i]);
	int k = snprintf(pk, pkcap, "~ref~%s~%.2s", job, rk);
	assert_true(k > 0 && (size_t)k < pkcap);
}

/* Appends the expected entry and reference of source s to exp. */
static void expect_for(struct ecw_entity **exp, size_t *n, const struct spec *sp, const struct ecw_entity *s)
{
	const char *email = strp(s, "Email");
	struct ecw_entity *e = NULL, *r = NULL;
	char ipk[2048], rpk[96], rrk[80];

	ITEST_CHECK(email != NULL, "source %s/%s has no Email: the recomputation expects one",
	            ecw_entity_pk(s), ecw_entity_rk(s));
	snprintf(ipk, sizeof(ipk), "email_%s", ecw_entity_pk(s));
	ECW_ASSERT_OK(ecw_entity_new(&e, ipk, email));
	if (sp->props) {
		for (size_t i = 0; sp->props[i]; i++)
			if (ecw_entity_get(s, sp->props[i]))
				ECW_ASSERT_OK(ecw_entity_set_prop(e, ecw_entity_get(s, sp->props[i])));
	} else {
		for (size_t i = 0; i < ecw_entity_count(s); i++)
			ECW_ASSERT_OK(ecw_entity_set_prop(e, ecw_entity_at(s, i)));
	}
	set_str(e, "SourcePartitionKey", ecw_entity_pk(s));
	set_str(e, "SourceRowKey", ecw_entity_rk(s));
	exp[(*n)++] = e;

	ref_keys(rpk, sizeof(rpk), rrk, sizeof(rrk), sp->job ? sp->job : JOB, ecw_entity_pk(s),
	         ecw_entity_rk(s));
	ECW_ASSERT_OK(ecw_entity_new(&r, rpk, rrk));
	set_str(r, "Job", sp->job ? sp->job : JOB);
	set_str(r, "SourcePartitionKey", ecw_entity_pk(s));
	set_str(r, "SourceRowKey", ecw_entity_rk(s));
	set_str(r, "IndexPartitionKey", ipk);
	set_str(r, "IndexRowKey", email);
	exp[(*n)++] = r;
}

/* The index table (minus source data when it is the source's table) must
 * hold exactly the entries and references a recomputation from the source
 * gives: same keys, same properties, same EDM types, nothing more. Returns
 * how many sources there were. */
static size_t check_recompute(struct wfx *x, const struct spec *sp)
{
	const char *source = sp->source ? sp->source : x->t->table;
	const char *index = sp->index ? sp->index : x->t->table2;
	size_t ns = 0, na = 0, ne = 0, sources = 0;
	struct ecw_entity **src = all_entities(&ns, x, source);
	struct ecw_entity **act = all_entities(&na, x, index);
	struct ecw_entity **exp = calloc(2 * ns + 1, sizeof(*exp));
	bool same = strcmp(source, index) == 0;
	char *found;

	assert_non_null(exp);
	for (size_t i = 0; i < ns; i++) {
		if (same && is_derived(src[i]))
			continue;
		expect_for(exp, &ne, sp, src[i]);
		sources++;
	}
	found = calloc(ne + 1, 1);
	assert_non_null(found);
	for (size_t i = 0; i < na; i++) {
		const struct ecw_entity *a = act[i];
		size_t j;
		if (same && !is_derived(a))
			continue;
		for (j = 0; j < ne; j++)
			if (strcmp(ecw_entity_pk(exp[j]), ecw_entity_pk(a)) == 0 &&
			    strcmp(ecw_entity_rk(exp[j]), ecw_entity_rk(a)) == 0)
				break;
		ITEST_CHECK(j < ne, "stale or unexpected entity in the index table %s: %s", index,
		            itest_entity_json(a));
		ITEST_CHECK(ecw_entity_equal(a, exp[j]), "index table %s:\n  has      %s\n  expected %s",
		            index, itest_entity_json(a), itest_entity_json(exp[j]));
		found[j] = 1;
	}
	for (size_t j = 0; j < ne; j++)
		ITEST_CHECK(found[j], "index table %s lacks %s", index, itest_entity_json(exp[j]));
	free(found);
	itest_entities_free(exp, ne);
	itest_entities_free(src, ns);
	itest_entities_free(act, na);
	return sources;
}

static const struct spec DEFAULT_SPEC = {NULL, NULL, NULL, FIRST_LAST};

/* ---- 1. the happy path -------------------------------------------------------------------------- */

/* Hostile keys (quotes, URL and OData specials, non-ASCII, 400-character
 * keys whose reference must be hashed), a source without LastName. */
static char long_pk[401], long_rk[401];

static void put_staff(struct wfx *x)
{
	memset(long_pk, 'P', 400);
	memset(long_rk, 'r', 400);
	long_pk[400] = long_rk[400] = '\0';
	ensure_table(x, x->t->table);
	upsert(x, x->t->table, employee("Sales", "001", "ann@example.com", "Ann", "Lee"));
	upsert(x, x->t->table, employee("Sales", "o'brien 002", "bob+o'brien@example.com", "Bob", "O'Brien"));
	upsert(x, x->t->table,
	       employee("Ops & Co", "Zo\xc3\xab 003", "zoe%20@example.com", "Zo\xc3\xab", NULL));
	upsert(x, x->t->table, employee("a+b&c=d%", "(x)'y'", "odd'@example.com", "Odd", "Keys"));
	upsert(x, x->t->table, employee(long_pk, long_rk, "long@example.com", "Long", "Keys"));
}

static void enqueue_staff(struct wfx *x)
{
	enqueue(x, "Sales", "001");
	enqueue(x, "Sales", "o'brien 002");
	enqueue(x, "Ops & Co", "Zo\xc3\xab 003");
	enqueue(x, "a+b&c=d%", "(x)'y'");
	enqueue(x, long_pk, long_rk);
}

static void test_job_index__happy_path(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;

	put_staff(x);
	itest_queue(x->t);
	enqueue_staff(x);
	start_worker(&p, x, "index-happy", &o, NULL);
	wait_outcomes(&p, 1, 5, "succeeded", 20000);
	assert_int_equal(outcomes(&p, 1, NULL), 5);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 5);

	/* One entry looked at directly: the copies and the source's keys. */
	struct ecw_entity *e = get(x, x->t->table2, "email_Sales", "ann@example.com");
	ITEST_CHECK(e != NULL, "no index entry email_Sales/ann@example.com");
	assert_string_equal(strp(e, "FirstName"), "Ann");
	assert_string_equal(strp(e, "LastName"), "Lee");
	assert_string_equal(strp(e, "SourcePartitionKey"), "Sales");
	assert_string_equal(strp(e, "SourceRowKey"), "001");
	assert_null(ecw_entity_get(e, "Salary"));
	assert_null(ecw_entity_get(e, "Email"));
	assert_int_equal(ecw_entity_count(e), 4);
	ecw_entity_free(e);
	finish(&p, 1);
}

/* ---- 2. every message twice --------------------------------------------------------------------- */

static void test_job_index__run_twice(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;

	put_staff(x);
	itest_queue(x->t);
	enqueue_staff(x);
	enqueue_staff(x);
	start_worker(&p, x, "index-twice", &o, NULL);
	wait_outcomes(&p, 1, 10, "succeeded", 20000);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 5);

	/* A third time, after everything settled: the entries are not even
	 * rewritten (same ETag), the result is the same. */
	struct ecw_entity *before = get(x, x->t->table2, "email_Sales", "ann@example.com");
	assert_non_null(before);
	enqueue_staff(x);
	wait_outcomes(&p, 1, 15, "succeeded", 20000);
	assert_int_equal(outcomes(&p, 1, NULL), 15);
	struct ecw_entity *after = get(x, x->t->table2, "email_Sales", "ann@example.com");
	assert_non_null(after);
	assert_string_equal(ecw_entity_etag(before), ecw_entity_etag(after));
	ecw_entity_free(before);
	ecw_entity_free(after);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 5);
	finish(&p, 1);
}

/* ---- 3. the indexed value changes --------------------------------------------------------------- */

static void test_job_index__indexed_value_changed(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	struct ecw_entity *e;

	ensure_table(x, x->t->table);
	put_employee(x, "Sales", "001", "old@example.com");
	put_employee(x, "Sales", "002", "other@example.com");
	itest_queue(x->t);
	enqueue(x, "Sales", "001");
	enqueue(x, "Sales", "002");
	start_worker(&p, x, "index-changed", &o, NULL);
	wait_outcomes(&p, 1, 2, "succeeded", 20000);
	assert_non_null(e = get(x, x->t->table2, "email_Sales", "old@example.com"));
	ecw_entity_free(e);

	put_employee(x, "Sales", "001", "new@example.com");
	enqueue(x, "Sales", "001");
	wait_outcomes(&p, 1, 3, "succeeded", 20000);
	assert_null(get(x, x->t->table2, "email_Sales", "old@example.com"));
	assert_non_null(e = get(x, x->t->table2, "email_Sales", "new@example.com"));
	assert_string_equal(strp(e, "SourceRowKey"), "001");
	ecw_entity_free(e);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 2);

	/* A copied property changes, the key does not: replaced in place. */
	upsert(x, x->t->table, employee("Sales", "001", "new@example.com", "Annie", "Lee"));
	enqueue(x, "Sales", "001");
	wait_outcomes(&p, 1, 4, "succeeded", 20000);
	assert_non_null(e = get(x, x->t->table2, "email_Sales", "new@example.com"));
	assert_string_equal(strp(e, "FirstName"), "Annie");
	ecw_entity_free(e);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 2);
	finish(&p, 1);
}

/* ---- 4. a stale message after a newer change ---------------------------------------------------- */

static void test_job_index__stale_message_after_newer_change(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;

	ensure_table(x, x->t->table);
	itest_queue(x->t);
	start_worker(&p, x, "index-stale", &o, NULL);
	/* v1, its message held back (the "stale" one, delivered last). */
	put_employee(x, "Sales", "001", "v1@example.com");
	enqueue_on(x, NULL, JOB, "Sales", "001", 3);
	/* v2 and v3, each with its message, processed first. */
	put_employee(x, "Sales", "001", "v2@example.com");
	enqueue(x, "Sales", "001");
	wait_outcomes(&p, 1, 1, "succeeded", 20000);
	put_employee(x, "Sales", "001", "v3@example.com");
	enqueue(x, "Sales", "001");
	wait_outcomes(&p, 1, 2, "succeeded", 20000);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 1);
	/* The held-back v1 message arrives after v3 was indexed. */
	wait_outcomes(&p, 1, 3, "succeeded", 20000);
	assert_int_equal(outcomes(&p, 1, NULL), 3);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 1);
	assert_null(get(x, x->t->table2, "email_Sales", "v1@example.com"));
	assert_null(get(x, x->t->table2, "email_Sales", "v2@example.com"));
	finish(&p, 1);
}

/* ---- 5. the source is deleted ------------------------------------------------------------------- */

static void test_job_index__source_deleted(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;

	put_staff(x);
	itest_queue(x->t);
	enqueue_staff(x);
	start_worker(&p, x, "index-deleted", &o, NULL);
	wait_outcomes(&p, 1, 5, "succeeded", 20000);
	assert_int_equal(count_entities(x, x->t->table2), 10);

	ECW_ASSERT_OK(ecw_table_delete(x->t->client, x->t->table, "Sales", "001", "*"));
	ECW_ASSERT_OK(ecw_table_delete(x->t->client, x->t->table, long_pk, long_rk, "*"));
	enqueue(x, "Sales", "001");
	enqueue(x, long_pk, long_rk);
	wait_outcomes(&p, 1, 7, "succeeded", 20000);
	assert_int_equal(proc_count(&p, "message", "outcome", "succeeded", "detail", "removed", NULL), 2);
	assert_null(get(x, x->t->table2, "email_Sales", "ann@example.com"));
	assert_int_equal(count_entities(x, x->t->table2), 6);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 3);

	/* Again: nothing left to remove; and a source that never existed. */
	enqueue(x, "Sales", "001");
	enqueue(x, "Nobody", "000");
	wait_outcomes(&p, 1, 9, "succeeded", 20000);
	assert_int_equal(proc_count(&p, "message", "outcome", "succeeded", "detail", "missing", NULL), 2);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 3);
	finish(&p, 1);
}

/* ---- 6. messages out of order ------------------------------------------------------------------- */

/* Five employees go through four versions each (new e-mail, new name, gone,
 * back); the message of each change is put with a visibility delay that
 * makes the earliest change's message arrive last. */
static void test_job_index__reordered_messages(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	enum { NE = 5, NV = 4 };
	size_t total = 0;

	ensure_table(x, x->t->table);
	itest_queue(x->t);
	start_worker(&p, x, "index-reorder", &o, NULL);
	for (int v = 0; v < NV; v++) {
		for (int i = 0; i < NE; i++) {
			char rk[16], email[64], first[16];
			snprintf(rk, sizeof(rk), "e%02d", i);
			snprintf(email, sizeof(email), "e%02d-v%d@example.com", i, v == 3 ? 1 : v);
			snprintf(first, sizeof(first), "F%d", v);
			if (v == 2 && i % 2 == 0)
				ECW_ASSERT_OK(
				    ecw_table_delete_if_exists(NULL, x->t->client, x->t->table, "R", rk));
			else
				upsert(x, x->t->table, employee("R", rk, email, first, "L"));
			enqueue_on(x, NULL, JOB, "R", rk, NV - 1 - v);
			total++;
		}
		itest_sleep_ms(150);
	}
	wait_outcomes(&p, 1, total, "succeeded", 30000);
	assert_int_equal(outcomes(&p, 1, NULL), total);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), NE);
	finish(&p, 1);
}

/* ---- 7. two workers, quick changes -------------------------------------------------------------- */

/* Two workers with eight job threads each, and a stream of changes to the
 * same few employees (new values, deletions, re-creations), each followed
 * by its message at once: many runs of one source overlap, on different
 * versions. When all messages are done the index equals the recomputation. */
static void test_job_index__concurrent_workers(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p[2];
	enum { NE = 3, NCHANGES = 90 };
	unsigned seed = 12345;

	o.concurrency = 8;
	ensure_table(x, x->t->table);
	itest_queue(x->t);
	/* Random pauses between steps make rounds of one source overlap more. */
	start_worker(&p[0], x, "index-conc-w1", &o, "ECW_TEST_STEP_JITTER_MS=15");
	start_worker(&p[1], x, "index-conc-w2", &o, "ECW_TEST_STEP_JITTER_MS=15");
	for (int c = 0; c < NCHANGES; c++) {
		char rk[16], email[64];
		int i = c % NE;
		seed = seed * 1103515245u + 12345u;
		unsigned r = (seed >> 16) % 10;
		snprintf(rk, sizeof(rk), "c%d", i);
		snprintf(email, sizeof(email), "c%d-%u@example.com", i, r % 5);
		if (r == 9 && c < NCHANGES - NE)
			ECW_ASSERT_OK(ecw_table_delete_if_exists(NULL, x->t->client, x->t->table, "C", rk));
		else
			upsert(x, x->t->table, employee("C", rk, email, r % 2 ? "Odd" : "Even", "L"));
		enqueue(x, "C", rk);
		if (c % 10 == 9)
			itest_sleep_ms(20);
	}
	wait_outcomes(p, 2, NCHANGES, "succeeded", 45000);
	assert_int_equal(outcomes(p, 2, "poisoned"), 0);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), NE);
	finish(p, 2);
}

/* ---- 8. two sources swap values; a duplicate key ------------------------------------------------ */

static void test_job_index__swap_and_duplicate_key(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	struct ecw_entity *e;

	ensure_table(x, x->t->table);
	itest_queue(x->t);
	put_employee(x, "S", "a", "x@example.com");
	put_employee(x, "S", "b", "y@example.com");
	enqueue(x, "S", "a");
	enqueue(x, "S", "b");
	start_worker(&p, x, "index-swap", &o, NULL);
	wait_outcomes(&p, 1, 2, "succeeded", 20000);

	/* Swap, the messages in the order that finds the key still taken. */
	put_employee(x, "S", "a", "y@example.com");
	put_employee(x, "S", "b", "x@example.com");
	enqueue(x, "S", "a");
	enqueue(x, "S", "b");
	wait_outcomes(&p, 1, 4, "succeeded", 20000);
	assert_non_null(e = get(x, x->t->table2, "email_S", "y@example.com"));
	assert_string_equal(strp(e, "SourceRowKey"), "a");
	ecw_entity_free(e);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 2);

	/* A true duplicate: c takes a's e-mail. Its message is retried, the
	 * error naming the holder, until c changes. */
	put_employee(x, "S", "c", "y@example.com");
	enqueue(x, "S", "c");
	wait_outcomes(&p, 1, 1, "retried", 20000);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", "outcome", "retried", "rk", "c", NULL);
	ITEST_CHECK(line && strstr(proc_field(line, "error"), "taken by source S/a"),
	            "the retried line should name the holder: %s",
	            line ? proc_field(line, "error") : "(none)");
	proc_log_dispose(&log);
	assert_non_null(e = get(x, x->t->table2, "email_S", "y@example.com"));
	assert_string_equal(strp(e, "SourceRowKey"), "a");
	ecw_entity_free(e);
	put_employee(x, "S", "c", "z@example.com");
	enqueue(x, "S", "c");
	wait_outcomes(&p, 1, 6, "succeeded", 20000);
	assert_int_equal(outcomes(&p, 1, "poisoned"), 0);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 3);
	finish(&p, 1);
}

/* ---- 8b. staged races: a round that read an older source finishes last -------------------------- */

static size_t visible(struct wfx *x, const char *queue)
{
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;

	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, x->t->client, queue, 32));
	ecw_queue_msgs_free(m, n);
	return n;
}

/* Waits until worker p has taken every message of queue (then it is at
 * its pause), and a little more. */
static void wait_taken(struct wfx *x, struct proc *p, const char *queue)
{
	int64_t end = itest_now_ms() + 10000;

	while (visible(x, queue) > 0) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(p),
		            "worker %s did not take its message; log:\n%s", p->name,
		            proc_tail(p->log_path, 20));
		itest_sleep_ms(20);
	}
	itest_sleep_ms(500);
}

/* The run's log line says it went round again ("... rounds=N"). */
static void expect_rounds(struct proc *a)
{
	struct proc_log log;

	proc_log_read(&log, a->log_path);
	const char *detail = proc_field(proc_log_find(&log, 0, "message", NULL), "detail");
	ITEST_CHECK(strstr(detail, "rounds=") != NULL, "%s should have gone round again: detail '%s'",
	            a->name, detail);
	proc_log_dispose(&log);
}

/* Worker A (its own queue, one job thread) is paused inside a run while
 * worker B runs a newer message for the same source from start to end;
 * then A carries on. Two interleavings the header argues about:
 *   1. A read v1 and pauses; the source becomes v2 and B indexes it
 *      (cleaning v1's entry). A then writes v1's entry again: only its
 *      verify step (the source changed) sends it round again, to clean it.
 *   2. The same, A paused after its registration (nothing to register:
 *      v1's entry is the current one), so B cleans v1's entry before A
 *      writes it again: A's next round must remember that write to clean it.
 *   3. A runs for a deleted source and pauses after verifying it is gone;
 *      the source comes back with the same value and B finds its entry in
 *      place (nothing to write). A then deletes that entry: only the commit
 *      B made anyway (it changes the reference's ETag) makes A's delete of
 *      the reference fail, so A goes round again and restores the entry. */
static void test_job_index__stale_round_finishes_last(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT, oa = WOPTS_DEFAULT;
	struct proc b, a;
	const char *qa = extra_queue(x);

	ensure_table(x, x->t->table);
	itest_queue(x->t);
	ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, qa));
	put_employee(x, "Sales", "001", "v1@example.com");
	enqueue(x, "Sales", "001");
	start_worker(&b, x, "index-race-b", &o, NULL);
	wait_outcomes(&b, 1, 1, "succeeded", 20000);
	oa.queue = qa;
	oa.concurrency = 1;

	/* 1. */
	start_worker(&a, x, "index-race-a1", &oa, "ECW_TEST_PAUSE_AT=index.read:2500");
	enqueue_on(x, qa, JOB, "Sales", "001", 0);
	wait_taken(x, &a, qa);
	put_employee(x, "Sales", "001", "v2@example.com");
	enqueue(x, "Sales", "001");
	wait_outcomes(&b, 1, 2, "succeeded", 20000);
	ITEST_CHECK(outcomes(&a, 1, NULL) == 0, "A finished before B: the race was not staged; log:\n%s",
	            proc_tail(a.log_path, 10));
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 1);
	wait_outcomes(&a, 1, 1, "succeeded", 20000);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 1);
	expect_rounds(&a);
	assert_null(get(x, x->t->table2, "email_Sales", "v1@example.com"));
	proc_stop(&a, 10000);

	/* 2. */
	put_employee(x, "Sales", "001", "v3@example.com");
	enqueue(x, "Sales", "001");
	wait_outcomes(&b, 1, 3, "succeeded", 20000);
	start_worker(&a, x, "index-race-a2", &oa, "ECW_TEST_PAUSE_AT=index.registered:2500");
	enqueue_on(x, qa, JOB, "Sales", "001", 0);
	wait_taken(x, &a, qa);
	put_employee(x, "Sales", "001", "v4@example.com");
	enqueue(x, "Sales", "001");
	wait_outcomes(&b, 1, 4, "succeeded", 20000);
	ITEST_CHECK(outcomes(&a, 1, NULL) == 0, "A finished before B: the race was not staged; log:\n%s",
	            proc_tail(a.log_path, 10));
	wait_outcomes(&a, 1, 1, "succeeded", 20000);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 1);
	assert_null(get(x, x->t->table2, "email_Sales", "v3@example.com"));
	expect_rounds(&a);
	proc_stop(&a, 10000);

	/* 3. */
	ECW_ASSERT_OK(ecw_table_delete(x->t->client, x->t->table, "Sales", "001", "*"));
	start_worker(&a, x, "index-race-a3", &oa, "ECW_TEST_PAUSE_AT=index.verified:2500");
	enqueue_on(x, qa, JOB, "Sales", "001", 0);
	wait_taken(x, &a, qa);
	put_employee(x, "Sales", "001", "v4@example.com");
	enqueue(x, "Sales", "001");
	wait_outcomes(&b, 1, 5, "succeeded", 20000);
	ITEST_CHECK(outcomes(&a, 1, NULL) == 0, "A finished before B: the race was not staged; log:\n%s",
	            proc_tail(a.log_path, 10));
	wait_outcomes(&a, 1, 1, "succeeded", 20000);
	assert_int_equal(check_recompute(x, &DEFAULT_SPEC), 1);
	expect_rounds(&a);
	proc_stop(&a, 10000);
	finish(&b, 1);
}

/* ---- 9. a crash right after every step ---------------------------------------------------------- */

/* Each scenario starts from a built index (CREATE: from none), changes the
 * source (DELETE: deletes it), and runs the message on a worker that dies
 * (ECW_CRASH_AT, exit 86) right after one step; a fresh worker then gets the
 * redelivered message, and the end state must equal the recomputation.
 * CHANGE_AGAIN changes the source once more (with its message) while the
 * crashed message waits: what the dead run left must still be found. All
 * run side by side, each with its own queue and tables. */
struct crash_case {
	const char *point;
	enum { CHANGE, DELETE, CREATE, CHANGE_AGAIN } what;
	char queue[64], source[64], index[64], job[16];
	struct proc crash, fresh;
};

static const char *const CHANGE_POINTS[] = {
    "index.read", "index.registered", "index.written", "index.verified", "index.cleaned", "index.committed",
    NULL};
static const char *const DELETE_POINTS[] = {"index.read",    "index.registered", "index.verified",
                                            "index.cleaned", "index.committed",  NULL};

static void test_job_index__crash_after_every_step(void **state)
{
	struct wfx *x = *state;
	struct crash_case cc[28];
	int n = 0;
	char jobs[16384], one[1024];
	size_t used = 0;
	struct wopts o = WOPTS_DEFAULT;
	struct proc builder;

	for (int what = CHANGE; what <= CHANGE_AGAIN; what++) {
		const char *const *pts = what == DELETE ? DELETE_POINTS : CHANGE_POINTS;
		for (int i = 0; pts[i]; i++) {
			struct crash_case *c = &cc[n];
			memset(c, 0, sizeof(*c));
			c->point = pts[i];
			c->what = what;
			snprintf(c->queue, sizeof(c->queue), "%s", extra_queue(x));
			snprintf(c->source, sizeof(c->source), "%s", extra_table(x));
			snprintf(c->index, sizeof(c->index), "%s", extra_table(x));
			snprintf(c->job, sizeof(c->job), "crash%d", n);
			default_job(one, sizeof(one), x, c->job, c->source, c->index,
			            "[FirstName, LastName]");
			assert_true(used + strlen(one) < sizeof(jobs));
			memcpy(jobs + used, one, strlen(one) + 1);
			used += strlen(one);
			n++;
		}
	}

	/* The starting state, built by a worker that does not crash: an
	 * indexed employee (CHANGE, DELETE) or nothing at all (CREATE). */
	itest_queue(x->t);
	size_t built = 0;
	for (int i = 0; i < n; i++) {
		ensure_table(x, cc[i].source);
		if (cc[i].what != CREATE) {
			upsert(x, cc[i].source, employee("D", "k'1", "before@example.com", "Ann", "Lee"));
			enqueue_on(x, NULL, cc[i].job, "D", "k'1", 0);
			built++;
		}
	}
	o.jobs = jobs;
	start_worker(&builder, x, "index-crash-builder", &o, NULL);
	wait_outcomes(&builder, 1, built, "succeeded", 30000);
	proc_stop(&builder, 10000);
	for (int i = 0; i < n; i++) {
		struct spec sp = {cc[i].job, cc[i].source, cc[i].index, FIRST_LAST};
		if (cc[i].what != CREATE)
			assert_int_equal(check_recompute(x, &sp), 1);
	}

	/* The change, and its message on the case's own queue. */
	for (int i = 0; i < n; i++) {
		struct crash_case *c = &cc[i];
		ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, c->queue));
		if (c->what == DELETE)
			ECW_ASSERT_OK(ecw_table_delete(x->t->client, c->source, "D", "k'1", "*"));
		else
			upsert(x, c->source, employee("D", "k'1", "after@example.com", "Ann", "Leigh"));
		enqueue_on(x, c->queue, c->job, "D", "k'1", 0);
	}
	/* Crash. */
	o.visibility_s = 2;
	o.concurrency = 1;
	for (int i = 0; i < n; i++) {
		char name[64];
		o.queue = cc[i].queue;
		snprintf(name, sizeof(name), "index-crash-%d", i);
		char env[96];
		snprintf(env, sizeof(env), "ECW_CRASH_AT=%s", cc[i].point);
		start_worker(&cc[i].crash, x, name, &o, env);
	}
	for (int i = 0; i < n; i++) {
		struct crash_case *c = &cc[i];
		ITEST_CHECK(proc_wait(&c->crash, 20000), "case %d (%s): the worker did not crash; log:\n%s",
		            i, c->point, proc_tail(c->crash.log_path, 20));
		ITEST_CHECK(proc_exit_code(&c->crash) == 86,
		            "case %d (%s): exit status %d, expected 86; log:\n%s", i, c->point,
		            proc_exit_code(&c->crash), proc_tail(c->crash.log_path, 20));
		assert_int_equal(proc_count(&c->crash, "message", NULL), 0);
	}
	for (int i = 0; i < n; i++) {
		if (cc[i].what == CHANGE_AGAIN) {
			upsert(x, cc[i].source, employee("D", "k'1", "again@example.com", "Ann", "Lee"));
			enqueue_on(x, cc[i].queue, cc[i].job, "D", "k'1", 0);
		}
	}
	/* A fresh worker gets the redelivered message. */
	for (int i = 0; i < n; i++) {
		char name[64];
		o.queue = cc[i].queue;
		snprintf(name, sizeof(name), "index-fresh-%d", i);
		start_worker(&cc[i].fresh, x, name, &o, NULL);
	}
	for (int i = 0; i < n; i++) {
		struct crash_case *c = &cc[i];
		struct spec sp = {c->job, c->source, c->index, FIRST_LAST};
		wait_outcomes(&c->fresh, 1, c->what == CHANGE_AGAIN ? 2 : 1, "succeeded", 20000);
		assert_int_equal(proc_count(&c->fresh, "message", "dequeue_count", "2", NULL), 1);
		assert_int_equal(check_recompute(x, &sp), c->what == DELETE ? 0 : 1);
		if (c->what == DELETE)
			ITEST_CHECK(count_entities(x, c->index) == 0,
			            "case %d (%s): the index table is not empty", i, c->point);
		proc_stop(&c->fresh, 10000);
	}
	proc_assert_logs_clean();
}

/* ---- 10. permanent errors ----------------------------------------------------------------------- */

static struct json_object *message_line(struct proc_log *log, const char *rk)
{
	struct json_object *l = proc_log_find(log, 0, "message", "rk", rk, NULL);
	ITEST_CHECK(l != NULL, "no message line for rk %s", rk);
	return l;
}

static void test_job_index__missing_template_property(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	struct proc_log log;

	ensure_table(x, x->t->table);
	itest_queue(x->t);
	upsert(x, x->t->table, employee("Sales", "no-email", NULL, "Ann", "Lee"));
	enqueue(x, "Sales", "no-email");
	start_worker(&p, x, "index-missing-prop", &o, NULL);
	wait_outcomes(&p, 1, 1, "poisoned", 20000);
	proc_log_read(&log, p.log_path);
	struct json_object *l = message_line(&log, "no-email");
	assert_string_equal(proc_field(l, "reason"), "permanent");
	assert_int_equal(proc_field_int(l, "dequeue_count", -1), 1);
	ITEST_CHECK(strstr(proc_field(l, "error"), "'Email'") != NULL, "the error should name Email: %s",
	            proc_field(l, "error"));
	proc_log_dispose(&log);
	assert_int_equal(count_entities(x, x->t->table2), 0);

	/* The envelope on the poison queue says the same. */
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, x->t->client, x->poison, 1, 30));
	assert_int_equal(n, 1);
	struct json_object *env = json_tokener_parse(m[0].text), *v;
	ITEST_CHECK(env != NULL, "the poison message is not JSON: %s", m[0].text);
	assert_true(json_object_object_get_ex(env, "reason", &v));
	assert_string_equal(json_object_get_string(v), "permanent");
	assert_true(json_object_object_get_ex(env, "error", &v));
	ITEST_CHECK(strstr(json_object_get_string(v), "'Email'") != NULL, "envelope error: %s",
	            json_object_get_string(v));
	json_object_put(env);
	ecw_queue_msgs_free(m, n);
	finish(&p, 1);
}

/* A '/' and a control character in the value, a key over 1 KiB, and a
 * result in the reserved back-reference partitions. */
static void test_job_index__invalid_key_result(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	struct proc_log log;
	char jobs[2048], big[1100];
	struct ecw_entity *e;
	struct {
		const char *rk, *needle;
	} want[] = {
	    {"slash", "'/'"}, {"ctrl", "control character"}, {"long", "limit is 1024"}, {"dept", "reserved"}};

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ensure_table(x, x->t->table);
	itest_queue(x->t);
	upsert(x, x->t->table, employee("Sales", "slash", "a/b@example.com", "Ann", "Lee"));
	upsert(x, x->t->table, employee("Sales", "ctrl", "a\tb@example.com", "Ann", "Lee"));
	upsert(x, x->t->table, employee("Sales", "long", big, "Ann", "Lee"));
	e = employee("Sales", "dept", "ok@example.com", "Ann", "Lee");
	set_str(e, "Dept", "~ref~00");
	upsert(x, x->t->table, e);
	default_job(jobs, sizeof(jobs), x, JOB, NULL, NULL, "[]");
	snprintf(jobs + strlen(jobs), sizeof(jobs) - strlen(jobs),
	         "  by-dept: {type: index, source: %s, table: %s, partition_key: \"{Dept}\", row_key: "
	         "\"{RowKey}\"}\n",
	         x->t->table, x->t->table2);
	o.jobs = jobs;
	enqueue(x, "Sales", "slash");
	enqueue(x, "Sales", "ctrl");
	enqueue(x, "Sales", "long");
	enqueue_on(x, NULL, "by-dept", "Sales", "dept", 0);
	start_worker(&p, x, "index-invalid-key", &o, NULL);
	wait_outcomes(&p, 1, 4, "poisoned", 20000);
	proc_log_read(&log, p.log_path);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct json_object *l = message_line(&log, want[i].rk);
		assert_string_equal(proc_field(l, "reason"), "permanent");
		ITEST_CHECK(strstr(proc_field(l, "error"), want[i].needle) != NULL,
		            "%s: the error should say %s: %s", want[i].rk, want[i].needle,
		            proc_field(l, "error"));
	}
	proc_log_dispose(&log);
	assert_int_equal(count_entities(x, x->t->table2), 0);
	finish(&p, 1);
}

/* ---- 11. properties: [] and omitted (= all) ----------------------------------------------------- */

static void test_job_index__properties_none_and_all(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	const char *all = extra_table(x);
	char jobs[2048];
	static const char *const none[] = {NULL};
	struct spec sp_none = {"idx-none", NULL, NULL, none}, sp_all = {"idx-all", NULL, all, NULL};

	put_staff(x);
	itest_queue(x->t);
	default_job(jobs, sizeof(jobs), x, "idx-none", NULL, NULL, "[]");
	default_job(jobs + strlen(jobs), sizeof(jobs) - strlen(jobs), x, "idx-all", NULL, all, NULL);
	o.jobs = jobs;
	const char *keys[][2] = {{"Sales", "001"}, {"Sales", "o'brien 002"}, {"Ops & Co", "Zo\xc3\xab 003"}};
	for (int i = 0; i < 3; i++) {
		enqueue_on(x, NULL, "idx-none", keys[i][0], keys[i][1], 0);
		enqueue_on(x, NULL, "idx-all", keys[i][0], keys[i][1], 0);
	}
	/* The other two staff are not indexed: remove them from the source so
	 * the recomputation is over what was sent. */
	ECW_ASSERT_OK(ecw_table_delete(x->t->client, x->t->table, "a+b&c=d%", "(x)'y'", "*"));
	ECW_ASSERT_OK(ecw_table_delete(x->t->client, x->t->table, long_pk, long_rk, "*"));
	start_worker(&p, x, "index-props", &o, NULL);
	wait_outcomes(&p, 1, 6, "succeeded", 20000);
	assert_int_equal(check_recompute(x, &sp_none), 3);
	assert_int_equal(check_recompute(x, &sp_all), 3);
	struct ecw_entity *e = get(x, x->t->table2, "email_Sales", "ann@example.com");
	assert_non_null(e);
	assert_int_equal(ecw_entity_count(e), 2); /* the source's keys only */
	ecw_entity_free(e);
	e = get(x, all, "email_Sales", "ann@example.com");
	assert_non_null(e);
	assert_int_equal(ecw_entity_count(e), 7); /* Email, FirstName, LastName, Salary, Grade + keys */
	assert_int_equal(ecw_entity_get(e, "Salary")->type, ECW_EDM_DOUBLE);
	ecw_entity_free(e);
	finish(&p, 1);
}

/* ---- 12. every EDM type copied exactly ---------------------------------------------------------- */

static void test_job_index__every_edm_type_copied_exactly(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	struct ecw_entity *e = NULL;
	static const unsigned char bin[] = {0, 1, 2, 0xff, 0xfe, '\'', '"', 0};
	static const char *const listed[] = {"Big", "Ratio", "When", "Id", "Blob", "Nope", NULL};
	struct spec sp_all = {NULL, NULL, NULL, NULL}, sp_listed = {"edm-listed", NULL, NULL, listed};
	const char *second = extra_table(x);
	char jobs[2048];

	ensure_table(x, x->t->table);
	itest_queue(x->t);
	ECW_ASSERT_OK(ecw_entity_new(&e, "Types", "all"));
	set_str(e, "Email", "types@example.com");
	set_str(e, "Text", "Zo\xc3\xab \xf0\x9f\x98\x80 'quoted' \"double\"");
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Small", -2147483647 - 1));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "Big", (int64_t)9007199254740993LL));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Round", 50000.0));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Ratio", 0.1));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "NotANumber", NAN));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Low", -INFINITY));
	ECW_ASSERT_OK(ecw_entity_set_bool(e, "Flag", false));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "When", "2026-08-19T10:00:00.1234567Z"));
	ECW_ASSERT_OK(ecw_entity_set_guid(e, "Id", "c9da6455-213d-42c9-9a79-3e9149a57833"));
	ECW_ASSERT_OK(ecw_entity_set_binary(e, "Blob", bin, sizeof(bin)));
	upsert(x, x->t->table, e);
	default_job(jobs, sizeof(jobs), x, JOB, NULL, NULL, NULL);
	default_job(jobs + strlen(jobs), sizeof(jobs) - strlen(jobs), x, "edm-listed", NULL, second,
	            "[Big, Ratio, When, Id, Blob, Nope]");
	o.jobs = jobs;
	enqueue(x, "Types", "all");
	enqueue_on(x, NULL, "edm-listed", "Types", "all", 0);
	start_worker(&p, x, "index-edm", &o, NULL);
	wait_outcomes(&p, 1, 2, "succeeded", 20000);
	sp_listed.index = second;
	assert_int_equal(check_recompute(x, &sp_all), 1);
	assert_int_equal(check_recompute(x, &sp_listed), 1);

	e = get(x, x->t->table2, "email_Types", "types@example.com");
	assert_non_null(e);
	assert_int_equal(ecw_entity_get(e, "Big")->type, ECW_EDM_INT64);
	assert_true(ecw_entity_get(e, "Big")->v.i64 == (int64_t)9007199254740993LL);
	assert_int_equal(ecw_entity_get(e, "Round")->type, ECW_EDM_DOUBLE);
	assert_true(isnan(ecw_entity_get(e, "NotANumber")->v.d));
	assert_int_equal(ecw_entity_get(e, "When")->type, ECW_EDM_DATETIME);
	assert_string_equal(ecw_entity_get(e, "When")->v.s, "2026-08-19T10:00:00.1234567Z");
	assert_int_equal(ecw_entity_get(e, "Blob")->len, sizeof(bin));
	ecw_entity_free(e);
	finish(&p, 1);
}

/* ---- 13. an index in its source's own table ----------------------------------------------------- */

/* The inter-partition pattern: entries under "email_<dept>" next to the
 * employees. Messages naming an entry or a reference (as a backfill over
 * the table sends) are skipped, and change nothing. */
static void test_job_index__same_table(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	char jobs[1024], rpk[96], rrk[80];
	struct spec sp = {NULL, NULL, NULL, FIRST_LAST};

	put_staff(x);
	itest_queue(x->t);
	sp.index = x->t->table;
	default_job(jobs, sizeof(jobs), x, JOB, NULL, x->t->table, "[FirstName, LastName]");
	o.jobs = jobs;
	enqueue_staff(x);
	start_worker(&p, x, "index-same", &o, NULL);
	wait_outcomes(&p, 1, 5, "succeeded", 20000);
	assert_int_equal(check_recompute(x, &sp), 5);
	assert_int_equal(count_entities(x, x->t->table), 15);

	ref_keys(rpk, sizeof(rpk), rrk, sizeof(rrk), JOB, "Sales", "001");
	enqueue(x, "email_Sales", "ann@example.com");
	enqueue(x, rpk, rrk);
	wait_outcomes(&p, 1, 7, "succeeded", 20000);
	assert_int_equal(proc_count(&p, "message", "outcome", "succeeded", "detail", "not-a-source", NULL),
	                 2);
	assert_int_equal(check_recompute(x, &sp), 5);
	assert_int_equal(count_entities(x, x->t->table), 15);

	/* A source change moves its entry within the shared table. */
	upsert(x, x->t->table, employee("Sales", "001", "ann2@example.com", "Ann", "Lee"));
	enqueue(x, "Sales", "001");
	wait_outcomes(&p, 1, 8, "succeeded", 20000);
	assert_int_equal(check_recompute(x, &sp), 5);
	assert_int_equal(count_entities(x, x->t->table), 15);
	finish(&p, 1);
}

/* In a shared table the index never writes over data that is not its own
 * entry: an entity already at the entry's keys, or the source itself. */
static void test_job_index__never_overwrites_other_data(void **state)
{
	struct wfx *x = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	struct proc_log log;
	char jobs[1024];
	struct ecw_entity *e = NULL;

	ensure_table(x, x->t->table);
	itest_queue(x->t);
	ECW_ASSERT_OK(ecw_entity_new(&e, "email_Sales", "clash@example.com"));
	set_str(e, "Note", "someone else's data");
	upsert(x, x->t->table, e);
	put_employee(x, "Sales", "001", "clash@example.com");
	put_employee(x, "Sales", "me@example.com", "me@example.com");
	default_job(jobs, sizeof(jobs), x, JOB, NULL, x->t->table, "[]");
	snprintf(jobs + strlen(jobs), sizeof(jobs) - strlen(jobs),
	         "  self: {type: index, source: %s, table: %s, partition_key: \"{PartitionKey}\", row_key: "
	         "\"{Email}\"}\n",
	         x->t->table, x->t->table);
	o.jobs = jobs;
	enqueue(x, "Sales", "001");
	enqueue_on(x, NULL, "self", "Sales", "me@example.com", 0);
	start_worker(&p, x, "index-no-overwrite", &o, NULL);
	wait_outcomes(&p, 1, 2, "poisoned", 20000);
	proc_log_read(&log, p.log_path);
	struct json_object *l = message_line(&log, "001");
	assert_string_equal(proc_field(l, "reason"), "permanent");
	ITEST_CHECK(strstr(proc_field(l, "error"), "no index entry") != NULL, "error: %s",
	            proc_field(l, "error"));
	l = message_line(&log, "me@example.com");
	assert_string_equal(proc_field(l, "reason"), "permanent");
	ITEST_CHECK(strstr(proc_field(l, "error"), "its own source") != NULL, "error: %s",
	            proc_field(l, "error"));
	proc_log_dispose(&log);
	assert_non_null(e = get(x, x->t->table, "email_Sales", "clash@example.com"));
	assert_string_equal(strp(e, "Note"), "someone else's data");
	assert_int_equal(ecw_entity_count(e), 1);
	ecw_entity_free(e);
	assert_non_null(e = get(x, x->t->table, "Sales", "me@example.com"));
	assert_string_equal(strp(e, "FirstName"), "Ann");
	ecw_entity_free(e);
	/* Besides the three entities, only Sales/001's back-reference: it had
	 * registered the location before finding it taken by other data (the
	 * registration is bookkeeping; a later run cleans it up). */
	char rpk[96], rrk[80];
	ref_keys(rpk, sizeof(rpk), rrk, sizeof(rrk), JOB, "Sales", "001");
	assert_non_null(e = get(x, x->t->table, rpk, rrk));
	assert_null(ecw_entity_get(e, "IndexPartitionKey"));
	assert_string_equal(strp(e, "Pending1RowKey"), "clash@example.com");
	ecw_entity_free(e);
	assert_int_equal(count_entities(x, x->t->table), 4);
	finish(&p, 1);
}

/* ---- 14. configuration errors ------------------------------------------------------------------- */

static void test_job_index__config_errors(void **state)
{
	struct wfx *x = *state;
	char path[640], text[2048];
	char *out = NULL, *err = NULL;
	const char *args[] = {"check-config", "-c", path, NULL};
	struct {
		const char *job, *needle;
	} bad[] = {
	    {"{type: index, source: Emp, table: Idx, partition_key: \"~ref~{Dept}\", row_key: \"{Email}\"}",
	     "reserved"},
	    {"{type: index, source: Emp, table: Idx, partition_key: \"p\", row_key: \"{Email}\", properties: "
	     "[FirstName, SourceRowKey]}",
	     "SourceRowKey"},
	    {"{type: index, source: Emp, table: Idx, partition_key: \"p\"}", "row_key"},
	    {"{type: index, source: Emp, table: Idx, partition_key: \"p\", row_key: \"{Email\"}",
	     "never closed"},
	    {"{type: index, source: Emp, table: Idx, partition_key: \"p\", row_key: \"r\", colour: red}",
	     "colour"},
	    {"{type: index, source: E, table: Idx, partition_key: \"p\", row_key: \"r\"}", "source"},
	};

	(void)x;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(
		    text, sizeof(text),
		    "storage: {connection_string: \"UseDevelopmentStorage=true\"}\njobs:\n  by-email: %s\n",
		    bad[i].job);
		proc_write_file(path, sizeof(path), "index-badcfg.yaml", text);
		int code = proc_run(&out, &err, "index-badcfg", args, NULL, 10000);
		ITEST_CHECK(code == 2, "config %zu: exit %d, expected 2; stderr: %s", i, code, err);
		ITEST_CHECK(strstr(err, bad[i].needle) != NULL, "config %zu: stderr lacks '%s': %s", i,
		            bad[i].needle, err);
		free(out);
		free(err);
	}
	snprintf(
	    text, sizeof(text),
	    "storage: {connection_string: \"UseDevelopmentStorage=true\"}\njobs:\n"
	    "  by-email: {type: index, source: Emp, table: Idx, partition_key: \"email_{PartitionKey}\", "
	    "row_key: \"{Email:0>6}\", properties: []}\n");
	proc_write_file(path, sizeof(path), "index-goodcfg.yaml", text);
	int code = proc_run(&out, &err, "index-goodcfg", args, NULL, 10000);
	ITEST_CHECK(code == 0, "a good config: exit %d; stderr: %s", code, err);
	free(out);
	free(err);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_index__happy_path, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__run_twice, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__indexed_value_changed, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__stale_message_after_newer_change, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__source_deleted, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__reordered_messages, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__concurrent_workers, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__swap_and_duplicate_key, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__stale_round_finishes_last, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__crash_after_every_step, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__missing_template_property, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__invalid_key_result, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__properties_none_and_all, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__every_edm_type_copied_exactly, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__same_table, ix_setup, ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__never_overwrites_other_data, ix_setup,
	                                    ix_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index__config_errors, ix_setup, ix_teardown),
	};
	/* ECW_TEST_FILTER=test_job_index__crash* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("job_index", tests, NULL, NULL);
}
