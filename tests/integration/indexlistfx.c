/* SPDX-License-Identifier: MIT */
/* indexlistfx.c - see indexlistfx.h. */
#include "indexlistfx.h"

#include <json-c/json.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fixture ---------------------------------------------------------------------- */

int il_setup(void **state)
{
	*state = wfx_new(sizeof(struct wfx), WFX_QUEUE | WFX_TABLE | WFX_TABLE2);
	return 0;
}

int il_teardown(void **state)
{
	return wfx_teardown(state);
}

/* ---- workers ------------------------------------------------------------------------ */

int il_write_config(char *path, size_t cap, struct wfx *x, const char *name, const struct il_wopts *o)
{
	struct wfx_worker w =
	    WFX_WORKER(o->queue ? o->queue : x->t->queue, o->poison ? o->poison : x->poison);
	char jobs[1024];
	int k = snprintf(jobs, sizeof(jobs),
	                 "  " IL_JOB ":\n"
	                 "    type: index-list\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    partition_key: \"" IL_LIST_PK "\"\n"
	                 "    row_key: \"{LastName}\"\n",
	                 o->source ? o->source : x->t->table, x->t->table2);

	assert_true(k > 0 && (size_t)k < sizeof(jobs));
	w.batch_size = o->batch_size ? o->batch_size : o->concurrency;
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

int il_start_worker(struct proc *p, struct wfx *x, const char *name, const struct il_wopts *o,
                    const char *crash_at)
{
	char path[640], env0[128], env1[64], env2[128];
	int port = il_write_config(path, sizeof(path), x, name, o);
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {env0, env1, env2, NULL};

	snprintf(env0, sizeof(env0), "ECW_CRASH_AT=%s", crash_at ? crash_at : "");
	snprintf(env1, sizeof(env1), "ECW_TEST_STEP_JITTER_MS=%d", o->jitter_ms);
	snprintf(env2, sizeof(env2), "ECW_TEST_PAUSE_AT=%s", o->pause_at ? o->pause_at : "");
	proc_start(p, name, args, env);
	return port;
}

long long il_queue_count(struct wfx *x, const char *q)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, x->t->client, q));
	return n;
}

void il_wait_drained(struct wfx *x, const char *q, struct proc *ps, size_t np, int timeout_ms)
{
	int64_t end = itest_now_ms() + timeout_ms;
	int zeros = 0;

	while (zeros < 2) {
		long long n = il_queue_count(x, q);
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

void il_run_worker(struct wfx *x, const char *name, size_t succeeded, int concurrency)
{
	struct il_wopts o = IL_WOPTS_DEFAULT;
	struct proc p;

	o.concurrency = concurrency;
	il_start_worker(&p, x, name, &o, NULL);
	if (!proc_wait_count(&p, succeeded, 20000, "message", "outcome", "succeeded", NULL))
		fail_msg("%s: %zu message(s) did not succeed in 20 s; log %s:\n%s", name, succeeded,
		         p.log_path, proc_tail(p.log_path, 30));
	il_wait_drained(x, x->t->queue, &p, 1, 10000);
	ITEST_CHECK(proc_count(&p, "message", NULL) == succeeded, "%s: %zu message lines, expected %zu:\n%s",
	            name, proc_count(&p, "message", NULL), succeeded, proc_tail(p.log_path, 30));
	proc_stop(&p, 10000);
}

/* ---- the application's side ------------------------------------------------------------ */

void il_emp_set(struct wfx *x, const char *pk, const char *rk, const char *last)
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

void il_msg_put(struct wfx *x, const char *q, const char *pk, const char *rk)
{
	struct json_object *o = json_object_new_object();
	const char *text;

	json_object_object_add(o, "job", json_object_new_string(IL_JOB));
	json_object_object_add(o, "pk", json_object_new_string(pk));
	json_object_object_add(o, "rk", json_object_new_string(rk));
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	ECW_ASSERT_OK(ecw_queue_put(NULL, x->t->client, q ? q : x->t->queue, text, strlen(text), NULL));
	json_object_put(o);
}

void il_change(struct wfx *x, const char *pk, const char *rk, const char *last)
{
	il_emp_set(x, pk, rk, last);
	il_msg_put(x, NULL, pk, rk);
}

/* ---- reading the index ------------------------------------------------------------------- */

char *il_ref_rk(const char *pk, const char *rk)
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

struct ecw_entity *il_get_or_null(struct wfx *x, const char *table, const char *pk, const char *rk)
{
	return itest_get_or_null(x->t->client, table, pk, rk);
}

const char *il_str_prop(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = e ? ecw_entity_get(e, name) : NULL;
	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

char *il_list_keys(struct wfx *x, const char *last, char **etag)
{
	struct ecw_entity *e = il_get_or_null(x, x->t->table2, IL_LIST_PK, last);
	char *keys = NULL;

	if (etag)
		*etag = NULL;
	if (!e)
		return NULL;
	ITEST_CHECK(il_str_prop(e, "Keys") != NULL, "list %s has no Keys string", last);
	keys = strdup(il_str_prop(e, "Keys"));
	if (etag)
		*etag = strdup(ecw_entity_etag(e));
	ecw_entity_free(e);
	return keys;
}

struct ecw_entity *il_get_ref(struct wfx *x, const char *pk, const char *rk)
{
	char *h = il_ref_rk(pk, rk), rpk[64];
	snprintf(rpk, sizeof(rpk), "%s%.2s", IL_REF_PREFIX, h);
	struct ecw_entity *e = il_get_or_null(x, x->t->table2, rpk, h);
	free(h);
	return e;
}

void il_expect_list(struct wfx *x, const char *last, const char *want_keys)
{
	char *keys = il_list_keys(x, last, NULL);

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

/* The Keys of a list as jobs/README.md's reader reads it: the head ents[head]'s
 * Keys, Keys2, ..., then each page of its Pages in order (RowKey head~~n,
 * ListRowKey = head's RowKey), the chunks' arrays joined into one (heap
 * copy); the pages found are marked in used. */
static void add_chunks(struct ecw_buf *b, const struct ecw_entity *e, const char *lpk, const char *lrk)
{
	for (int i = 1; i <= 64; i++) {
		char name[16];
		snprintf(name, sizeof(name), i == 1 ? "Keys" : "Keys%d", i);
		const char *k = il_str_prop(e, name);
		if (!k)
			break;
		size_t n = strlen(k);
		ITEST_CHECK(n >= 2 && k[0] == '[' && k[n - 1] == ']', "list %s/%s: %s is no array", lpk, lrk,
		            name);
		if (n > 2)
			ECW_ASSERT_OK(
			    ecw_buf_printf(b, "%s%.*s", b->len > 1 ? "," : "", (int)(n - 2), k + 1));
	}
}

static char *il_whole_list(struct ecw_entity **ents, size_t n, bool *used, size_t head)
{
	const char *lpk = ecw_entity_pk(ents[head]), *lrk = ecw_entity_rk(ents[head]);
	const char *pages = il_str_prop(ents[head], "Pages");
	struct ecw_buf b;

	ecw_buf_init(&b, 0);
	ECW_ASSERT_OK(ecw_buf_adds(&b, "["));
	ITEST_CHECK(il_str_prop(ents[head], "Keys"), "list %s/%s has no Keys", lpk, lrk);
	add_chunks(&b, ents[head], lpk, lrk);
	struct json_object *arr = pages ? json_tokener_parse(pages) : NULL;
	ITEST_CHECK(!pages || (arr && json_object_is_type(arr, json_type_array)), "list %s/%s: Pages %s", lpk,
	            lrk, pages);
	for (size_t p = 0; arr && p < json_object_array_length(arr); p++) {
		char rk[2048];
		size_t i;
		snprintf(rk, sizeof(rk), "%s~~%d", lrk,
		         json_object_get_int(json_object_array_get_idx(arr, p)));
		for (i = 0; i < n; i++)
			if (strcmp(ecw_entity_pk(ents[i]), lpk) == 0 &&
			    strcmp(ecw_entity_rk(ents[i]), rk) == 0)
				break;
		ITEST_CHECK(i < n && il_str_prop(ents[i], "ListRowKey") &&
		                strcmp(il_str_prop(ents[i], "ListRowKey"), lrk) == 0,
		            "list %s/%s: its page %s is missing or another list's", lpk, lrk, rk);
		used[i] = true;
		add_chunks(&b, ents[i], lpk, lrk);
	}
	json_object_put(arr);
	ECW_ASSERT_OK(ecw_buf_adds(&b, "]"));
	return ecw_buf_take(&b);
}

size_t il_check_index(struct wfx *x)
{
	struct rows want_lists = {0}, got_lists = {0}, want_refs = {0}, got_refs = {0};
	struct ecw_table_query *q = NULL;
	static struct ecw_entity *ents[4096];
	static bool used[4096];
	size_t nlists = 0, nents = 0;

	memset(used, 0, sizeof(used));

	ECW_ASSERT_OK(ecw_table_query_new(&q, x->t->client, x->t->table, NULL));
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		const char *last = il_str_prop(e, "LastName");
		ITEST_CHECK(last != NULL, "employee %s/%s has no LastName", ecw_entity_pk(e),
		            ecw_entity_rk(e));
		rows_add(&want_lists, IL_LIST_PK, last, ecw_entity_pk(e), ecw_entity_rk(e));
		rows_add(&want_refs, IL_LIST_PK, last, ecw_entity_pk(e), ecw_entity_rk(e));
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
		if (strncmp(pk, IL_REF_PREFIX, strlen(IL_REF_PREFIX)) == 0) {
			const char *spk = il_str_prop(e, "SourcePartitionKey"),
			           *srk = il_str_prop(e, "SourceRowKey");
			const char *lpk = il_str_prop(e, "ListPartitionKey"),
			           *lrk = il_str_prop(e, "ListRowKey");
			const char *pending = il_str_prop(e, "Pending");
			ITEST_CHECK(spk && srk, "ref %s lacks its source keys", rk);
			char *h = il_ref_rk(spk, srk);
			ITEST_CHECK(strcmp(h, rk) == 0 && strncmp(pk + strlen(IL_REF_PREFIX), h, 2) == 0 &&
			                strlen(pk) == strlen(IL_REF_PREFIX) + 2,
			            "ref of (%s, %s) has keys (%s, %s), expected the hash %s", spk, srk, pk,
			            rk, h);
			free(h);
			ITEST_CHECK(!pending || strcmp(pending, "[]") == 0,
			            "ref of (%s, %s) still holds intents: %s", spk, srk, pending);
			rows_add(&got_refs, lpk ? lpk : "(none)", lrk ? lrk : "(none)", spk, srk);
		} else {
			ITEST_CHECK(strncmp(pk, "~ref~", 5) != 0, "a ref partition %s of another job", pk);
			ITEST_CHECK(nents < sizeof(ents) / sizeof(*ents), "too many list entities");
			ents[nents++] = e; /* read as a whole list below */
			continue;
		}
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);
	for (size_t i = 0; i < nents; i++) {
		if (il_str_prop(ents[i], "ListRowKey"))
			continue; /* a page: read with its head */
		const char *pk = ecw_entity_pk(ents[i]), *rk = ecw_entity_rk(ents[i]);
		const struct ecw_prop *count = ecw_entity_get(ents[i], "Count");
		ITEST_CHECK(count && count->type == ECW_EDM_INT32, "list %s/%s has no Int32 Count", pk, rk);
		char *keys = il_whole_list(ents, nents, used, i);
		keys_to_rows(&got_lists, pk, rk, keys, count->v.i32);
		free(keys);
		nlists++;
	}
	for (size_t i = 0; i < nents; i++) {
		ITEST_CHECK(!il_str_prop(ents[i], "ListRowKey") || used[i],
		            "page %s/%s is in no list's Pages", ecw_entity_pk(ents[i]),
		            ecw_entity_rk(ents[i]));
		ecw_entity_free(ents[i]);
	}
	rows_compare(&want_lists, &got_lists, "the lists");
	rows_compare(&want_refs, &got_refs, "the references");
	rows_free(&want_lists);
	rows_free(&got_lists);
	rows_free(&want_refs);
	rows_free(&got_refs);
	return nlists;
}
