/* SPDX-License-Identifier: MIT */
/* indexfx.c - see indexfx.h. */
#include "indexfx.h"

#include <json-c/json.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fixture ------------------------------------------------------------------------------------ */

int ix_setup(void **state)
{
	*state = wfx_new(sizeof(struct wfx), 0);
	return 0;
}

int ix_teardown(void **state)
{
	return wfx_teardown(state);
}

const char *ix_extra_table(struct wfx *x)
{
	return itest_extra_table(x->t, "ixt");
}

/* ---- the worker --------------------------------------------------------------------------------- */

void ix_default_job(char *out, size_t cap, struct wfx *x, const char *name, const char *source,
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

static void write_config(char *path, size_t cap, struct wfx *x, const char *name, const struct ix_wopts *o)
{
	struct wfx_worker w = WFX_WORKER(o->queue ? o->queue : x->t->queue, x->poison);
	char job[1024];

	if (!o->jobs)
		ix_default_job(job, sizeof(job), x, IX_JOB, NULL, NULL, o->properties);
	w.concurrency = o->concurrency;
	w.visibility_s = o->visibility_s;
	w.max_dequeue = o->max_dequeue;
	w.poll_min = "20ms";
	w.poll_max = "100ms";
	w.log_level = "info";
	w.jobs = o->jobs ? o->jobs : job;
	wfx_write_config(path, cap, name, &w);
}

void ix_start_worker(struct proc *p, struct wfx *x, const char *name, const struct ix_wopts *o,
                     const char *env)
{
	char path[640];
	const char *args[] = {"run", "-c", path, NULL};
	const char *envv[] = {env, NULL};

	write_config(path, sizeof(path), x, name, o);
	proc_start(p, name, args, env ? envv : NULL);
}

size_t ix_outcomes(struct proc *p, int n, const char *outcome)
{
	size_t sum = 0;

	for (int i = 0; i < n; i++)
		sum += outcome ? proc_count(&p[i], "message", "outcome", outcome, NULL)
		               : proc_count(&p[i], "message", NULL);
	return sum;
}

void ix_wait_outcomes(struct proc *p, int n, size_t want, const char *outcome, int timeout_ms)
{
	int64_t end = itest_now_ms() + timeout_ms;
	size_t got;

	while ((got = ix_outcomes(p, n, outcome)) < want) {
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

void ix_finish(struct proc *p, int n)
{
	for (int i = 0; i < n; i++)
		proc_stop(&p[i], 10000);
	proc_assert_logs_clean();
}

/* ---- storage helpers ---------------------------------------------------------------------------- */

void ix_enqueue_on(struct wfx *x, const char *queue, const char *job, const char *pk, const char *rk,
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

void ix_enqueue(struct wfx *x, const char *pk, const char *rk)
{
	ix_enqueue_on(x, NULL, IX_JOB, pk, rk, 0);
}

void ix_set_str(struct ecw_entity *e, const char *name, const char *v)
{
	ECW_ASSERT_OK(ecw_entity_set_string(e, name, v, strlen(v)));
}

struct ecw_entity *ix_employee(const char *pk, const char *rk, const char *email, const char *first,
                               const char *last)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	if (email)
		ix_set_str(e, "Email", email);
	if (first)
		ix_set_str(e, "FirstName", first);
	if (last)
		ix_set_str(e, "LastName", last);
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Salary", 50000.0));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Grade", 7));
	return e;
}

void ix_upsert(struct wfx *x, const char *table, struct ecw_entity *e)
{
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

void ix_put_employee(struct wfx *x, const char *pk, const char *rk, const char *email)
{
	ix_upsert(x, x->t->table, ix_employee(pk, rk, email, "Ann", "Lee"));
}

void ix_ensure_table(struct wfx *x, const char *table)
{
	ECW_ASSERT_OK(ecw_table_create(NULL, x->t->client, table));
}

/* Every entity of table (caller frees each and the array). */
static struct ecw_entity **all_entities(size_t *n, struct wfx *x, const char *table)
{
	return itest_query_all(n, x->t->client, table, NULL);
}

size_t ix_count_entities(struct wfx *x, const char *table)
{
	size_t n = 0;
	struct ecw_entity **v = all_entities(&n, x, table);

	itest_entities_free(v, n);
	return n;
}

struct ecw_entity *ix_get(struct wfx *x, const char *table, const char *pk, const char *rk)
{
	return itest_get_or_null(x->t->client, table, pk, rk);
}

/* ---- the recomputation -------------------------------------------------------------------------- */

const char *const IX_FIRST_LAST[] = {"FirstName", "LastName", NULL};

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

const char *ix_strp(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);
	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

/* What the index table holds that is not source data: references and
 * entries (only differs from "everything" when source == index). */
static bool is_derived(const struct ecw_entity *e)
{
	return starts_with(ecw_entity_pk(e), "~ref~") ||
	       (ix_strp(e, "SourcePartitionKey") && ix_strp(e, "SourceRowKey"));
}

void ix_ref_keys(char *pk, size_t pkcap, char *rk, size_t rkcap, const char *job, const char *spk,
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
static void expect_for(struct ecw_entity **exp, size_t *n, const struct ix_spec *sp,
                       const struct ecw_entity *s)
{
	const char *email = ix_strp(s, "Email");
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
	ix_set_str(e, "SourcePartitionKey", ecw_entity_pk(s));
	ix_set_str(e, "SourceRowKey", ecw_entity_rk(s));
	exp[(*n)++] = e;

	ix_ref_keys(rpk, sizeof(rpk), rrk, sizeof(rrk), sp->job ? sp->job : IX_JOB, ecw_entity_pk(s),
	            ecw_entity_rk(s));
	ECW_ASSERT_OK(ecw_entity_new(&r, rpk, rrk));
	ix_set_str(r, "Job", sp->job ? sp->job : IX_JOB);
	ix_set_str(r, "SourcePartitionKey", ecw_entity_pk(s));
	ix_set_str(r, "SourceRowKey", ecw_entity_rk(s));
	ix_set_str(r, "IndexPartitionKey", ipk);
	ix_set_str(r, "IndexRowKey", email);
	exp[(*n)++] = r;
}

size_t ix_check_recompute(struct wfx *x, const struct ix_spec *sp)
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

const struct ix_spec IX_DEFAULT_SPEC = {NULL, NULL, NULL, IX_FIRST_LAST};
