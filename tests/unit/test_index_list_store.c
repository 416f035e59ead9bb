/* SPDX-License-Identifier: MIT */
/* test_index_list_store.c - how an index list is stored (jobs/index_list_store.c),
 * against the in-memory Table service (table_server.h): today's one-property
 * lists read and grown as they are, the chunks cut at exactly 32,000 UTF-16
 * units, a list grown past one entity into pages and shrunk back to
 * nothing (each change a handful of entities within one transaction, each
 * entity within 1 MiB as the service counts it, its contents equal to what
 * was saved), the collisions with other lists, the largest list and the
 * change too big for one transaction. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_storage.h"
#include "index_list_private.h"
#include "table_server.h"

#define T "lists"
#define LPK "Dept"

struct fx {
	struct ecw_account *acct;
	struct ecw_client *c;
	struct table_server *s;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	table_server_connect(&f->acct, &f->c, &f->s, false);
	table_server_create_table(f->s, T);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	table_server_disconnect(f->acct, f->c, f->s);
	free(f);
	return 0;
}

static void ok(int err, const char *what)
{
	if (err != 0)
		fail_msg("%s: %s: %s", what, ecw_error_name(err), ecw_error_last()->message);
}

/* Key i: ("p<i/1000>", "jones <i, 6 digits>" padded with pad x's). */
static void add_key(struct tuples *t, size_t i, size_t pad)
{
	char pk[32], rk[2048];
	const char *key[2] = {pk, rk};
	int n;

	snprintf(pk, sizeof(pk), "p%03zu", i / 1000);
	n = snprintf(rk, sizeof(rk), "jones %06zu", i);
	memset(rk + n, 'x', pad);
	rk[n + pad] = '\0';
	ok(ecw_index_list_tuples_add(t, key), "add");
}

static void keys_range(struct tuples *t, size_t from, size_t to, size_t pad)
{
	ecw_index_list_tuples_init(t, 2);
	for (size_t i = from; i < to; i++)
		add_key(t, i, pad);
}

static size_t json_units(const struct tuples *t)
{
	struct ecw_buf b;
	size_t n;

	ecw_buf_init(&b, 0);
	ok(ecw_index_list_tuples_write(&b, t), "write");
	n = ecw_index_list_tuples_utf16_units(b.ptr, b.len);
	ecw_buf_dispose(&b);
	return n;
}

static void assert_same(const struct tuples *a, const struct tuples *b)
{
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		assert_string_equal(a->v[i].s[0], b->v[i].s[0]);
		assert_string_equal(a->v[i].s[1], b->v[i].s[1]);
	}
}

/* Loads the list and checks it holds want, Count included. */
static void holds(struct fx *f, const char *lrk, const struct tuples *want)
{
	struct il_list l;

	ok(ecw_index_list_store_load(&l, f->c, T, LPK, lrk), "load");
	assert_int_equal(l.exists, want->n > 0);
	assert_same(&l.keys, want);
	if (want->n) {
		assert_true(l.has_count);
		assert_int_equal(l.count, (int32_t)want->n);
	}
	ecw_index_list_store_dispose(&l);
}

static void save(struct fx *f, const char *lrk, const struct tuples *keys)
{
	struct il_list l;

	ok(ecw_index_list_store_load(&l, f->c, T, LPK, lrk), "load");
	ok(ecw_index_list_store_check(&l, keys), "check");
	ok(ecw_index_list_store_save(f->c, T, &l, keys), "save");
	ecw_index_list_store_dispose(&l);
}

/* The entities of the partition: their RowKeys and ETags ("rk\tetag\n"),
 * and each one's size as the service counts it under 1 MiB. */
static size_t snapshot(struct fx *f, char *out, size_t cap)
{
	struct ecw_query_options o = {.filter = "PartitionKey eq 'Dept'"};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	size_t n = 0, len = 0;

	ok(ecw_table_query_new(&q, f->c, T, &o), "query");
	for (;;) {
		size_t size;

		ok(ecw_table_query_next(&e, q), "next");
		if (!e)
			break;
		size = 4 + 2 * (strlen(ecw_entity_pk(e)) + strlen(ecw_entity_rk(e)));
		for (size_t i = 0; i < ecw_entity_count(e); i++) {
			const struct ecw_prop *p = ecw_entity_at(e, i);
			size += 8 + 2 * strlen(p->name) +
			        (p->type == ECW_EDM_STRING
			             ? 4 + 2 * ecw_index_list_tuples_utf16_units(p->v.s, strlen(p->v.s))
			             : 8);
			if (p->type == ECW_EDM_STRING && strncmp(p->name, "Keys", 4) == 0)
				assert_true(ecw_index_list_tuples_utf16_units(p->v.s, strlen(p->v.s)) <=
				            32000);
		}
		assert_true(size <= 1024 * 1024);
		assert_true(ecw_entity_count(e) <= 252);
		len +=
		    (size_t)snprintf(out + len, cap - len, "%s\t%s\n", ecw_entity_rk(e), ecw_entity_etag(e));
		assert_true(len < cap);
		n++;
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);
	return n;
}

/* True when snapshot snap has a row for RowKey rk (len bytes). */
static bool has_rk(const char *snap, const char *rk, size_t len)
{
	for (const char *p = snap; *p; p = strchr(p, '\n') + 1)
		if (strncmp(p, rk, len) == 0 && p[len] == '\t')
			return true;
	return false;
}

/* Entities whose ETag differs between two snapshots, or that came or went. */
static size_t changed(const char *before, const char *after)
{
	size_t n = 0;

	for (const char *p = after; *p; p = strchr(p, '\n') + 1) {
		size_t len = (size_t)(strchr(p, '\n') - p + 1);
		bool same = false;
		for (const char *q = before; *q && !same; q = strchr(q, '\n') + 1)
			same = strncmp(p, q, len) == 0;
		n += !same;
	}
	for (const char *p = before; *p; p = strchr(p, '\n') + 1)
		n += !has_rk(after, p, (size_t)(strchr(p, '\t') - p));
	return n;
}

/* Puts entity (LPK, rk) with Keys = json, and Count (count >= 0) or
 * ListRowKey (of, when not NULL), behind the store's back. */
static void put_raw(struct fx *f, const char *rk, const char *json, int count, const char *of)
{
	struct ecw_entity *e = NULL;

	ok(ecw_entity_new(&e, LPK, rk), "new");
	ok(ecw_entity_set_string(e, "Keys", json, strlen(json)), "Keys");
	if (count >= 0)
		ok(ecw_entity_set_int32(e, "Count", count), "Count");
	if (of)
		ok(ecw_entity_set_string(e, "ListRowKey", of, strlen(of)), "ListRowKey");
	table_server_put(f->s, T, e);
	ecw_entity_free(e);
}

static void test_index_list_store__one_property_list_read_and_grown_as_today(void **state)
{
	struct fx *f = *state;
	const struct ecw_entity *got;
	struct tuples keys;
	const char *json = "[[\"p000\",\"jones 000001\"],[\"p000\",\"jones 000002\"]]";

	/* written as today's code wrote it */
	put_raw(f, "Jones", json, 2, NULL);
	keys_range(&keys, 1, 3, 0);
	holds(f, "Jones", &keys);
	add_key(&keys, 3, 0);
	save(f, "Jones", &keys);
	holds(f, "Jones", &keys);
	got = table_server_find(f->s, T, LPK, "Jones");
	assert_non_null(got);
	assert_int_equal(ecw_entity_count(got), 2); /* Keys and Count: nothing else */
	assert_int_equal(ecw_entity_get(got, "Count")->v.i32, 3);
	assert_non_null(strstr(ecw_entity_get(got, "Keys")->v.s, "jones 000003"));
	ecw_index_list_tuples_dispose(&keys);
}

static void test_index_list_store__chunk_cut_at_exactly_32000_units(void **state)
{
	struct fx *f = *state;
	const struct ecw_entity *got;
	struct tuples keys;
	size_t n = 0, units, pad;

	/* keys until just under 32,000 units, then the last one padded to it */
	ecw_index_list_tuples_init(&keys, 2);
	while (json_units(&keys) < 32000 - 200)
		add_key(&keys, n++, 20);
	units = json_units(&keys);
	ecw_index_list_tuples_dispose(&keys);
	keys_range(&keys, 0, n - 1, 20);
	pad = 20 + (32000 - units);
	add_key(&keys, n - 1, pad);
	assert_int_equal(json_units(&keys), 32000);
	save(f, "Jones", &keys);
	got = table_server_find(f->s, T, LPK, "Jones");
	assert_int_equal(ecw_entity_count(got), 2); /* 32,000 units: still one Keys */
	holds(f, "Jones", &keys);

	add_key(&keys, n, 0); /* one more: two chunks in the head */
	save(f, "Jones", &keys);
	got = table_server_find(f->s, T, LPK, "Jones");
	assert_non_null(ecw_entity_get(got, "Keys2"));
	assert_null(ecw_entity_get(got, "Keys3"));
	assert_null(ecw_entity_get(got, "Pages"));
	holds(f, "Jones", &keys);

	/* and back: the two chunks join again once they fit in half a chunk */
	ecw_index_list_tuples_dispose(&keys);
	keys_range(&keys, 0, 100, 0);
	save(f, "Jones", &keys);
	got = table_server_find(f->s, T, LPK, "Jones");
	assert_null(ecw_entity_get(got, "Keys2"));
	holds(f, "Jones", &keys);
	ecw_index_list_tuples_dispose(&keys);
}

/* 200-unit keys: about 2,400 fill an entity. */
#define PAD 180

static void test_index_list_store__grows_to_pages_and_back_one_transaction_each(void **state)
{
	struct fx *f = *state;
	static char before[1 << 16], after[1 << 16];
	const struct ecw_entity *head;
	struct tuples keys;
	size_t ents;

	/* 8,000 keys at once: a head and pages */
	keys_range(&keys, 0, 16000, PAD);
	for (size_t i = 8000; i > 0; i--)
		ecw_index_list_tuples_remove_at(&keys, 2 * i - 1); /* every other key: room to add */
	save(f, "Jones", &keys);
	holds(f, "Jones", &keys);
	ents = snapshot(f, before, sizeof(before));
	assert_true(ents >= 4);
	head = table_server_find(f->s, T, LPK, "Jones");
	assert_non_null(ecw_entity_get(head, "Pages"));
	assert_non_null(ecw_entity_get(head, "LastPage"));
	assert_int_equal(ecw_entity_get(head, "Count")->v.i32, 8000);

	/* one key at a time, spread over the list: the head and at most 3 more */
	for (size_t i = 1; i < 16000; i += 2 * 97) {
		add_key(&keys, i, PAD);
		save(f, "Jones", &keys);
		snapshot(f, after, sizeof(after));
		assert_true(changed(before, after) <= 4);
		memcpy(before, after, sizeof(before));
	}
	holds(f, "Jones", &keys);

	/* down by many keys at once: pages join and go, then the list */
	while (keys.n) {
		size_t n0 = keys.n;
		for (size_t i = keys.n; i-- > 0;)
			if (i % 3 == 0 || n0 < 400)
				ecw_index_list_tuples_remove_at(&keys, i);
		save(f, "Jones", &keys);
		holds(f, "Jones", &keys);
		snapshot(f, after, sizeof(after));
	}
	assert_int_equal(snapshot(f, after, sizeof(after)), 0);
	ecw_index_list_tuples_dispose(&keys);
}

static void test_index_list_store__pages_join_when_half_empty(void **state)
{
	struct fx *f = *state;
	static char snap[1 << 16];
	struct tuples keys;
	size_t full, ents;

	keys_range(&keys, 0, 6000, PAD);
	save(f, "Jones", &keys);
	full = snapshot(f, snap, sizeof(snap));
	assert_true(full >= 3);
	/* remove keys from the end, 40 at a time: the last page empties and
	 * goes, the one before it joins when small */
	while (keys.n > 500) {
		for (int i = 0; i < 40; i++)
			ecw_index_list_tuples_remove_at(&keys, keys.n - 1);
		save(f, "Jones", &keys);
	}
	holds(f, "Jones", &keys);
	ents = snapshot(f, snap, sizeof(snap));
	assert_int_equal(ents, 1);
	assert_null(ecw_entity_get(table_server_find(f->s, T, LPK, "Jones"), "Pages"));
	ecw_index_list_tuples_dispose(&keys);
}

static void test_index_list_store__collisions_name_both_lists(void **state)
{
	struct fx *f = *state;
	struct ecw_entity *e = NULL;
	struct il_list l;
	struct tuples keys;
	const char *json = "[[\"a\",\"b\"]]";

	/* a head that is another list's page */
	put_raw(f, "Smith", json, -1, "Smi");
	assert_int_equal(ecw_index_list_store_load(&l, f->c, T, LPK, "Smith"), ECW_EINVALID);
	assert_non_null(strstr(ecw_error_last()->message, "Smith"));
	assert_non_null(strstr(ecw_error_last()->message, "page of list Dept/Smi"));

	/* a new page whose RowKey another list holds: refused, nothing written */
	put_raw(f, "Jones~~1", json, 1, NULL);
	keys_range(&keys, 0, 100, 0);
	save(f, "Jones", &keys);
	ecw_index_list_tuples_dispose(&keys);
	keys_range(&keys, 0, 6000, PAD);
	ok(ecw_index_list_store_load(&l, f->c, T, LPK, "Jones"), "load");
	assert_int_equal(ecw_index_list_store_save(f->c, T, &l, &keys), ECW_EINVALID);
	assert_non_null(strstr(ecw_error_last()->message, "Dept/Jones~~1"));
	assert_non_null(strstr(ecw_error_last()->message, "lists/Dept/Jones:"));
	ecw_index_list_store_dispose(&l);
	ecw_index_list_tuples_dispose(&keys);
	keys_range(&keys, 0, 100, 0);
	holds(f, "Jones", &keys);

	/* a page (named in Pages) that is some other list's */
	ok(ecw_entity_new(&e, LPK, "Brown"), "new");
	ok(ecw_entity_set_string(e, "Keys", json, strlen(json)), "Keys");
	ok(ecw_entity_set_string(e, "Pages", "[1]", 3), "Pages");
	ok(ecw_entity_set_int32(e, "Count", 2), "Count");
	table_server_put(f->s, T, e);
	ecw_entity_free(e);
	put_raw(f, "Brown~~1", "[[\"c\",\"d\"]]", -1, "Green");
	assert_int_equal(ecw_index_list_store_load(&l, f->c, T, LPK, "Brown"), ECW_EINVALID);
	assert_non_null(strstr(ecw_error_last()->message, "Brown~~1 is a page of list Green"));
	ecw_index_list_tuples_dispose(&keys);
}

static void test_index_list_store__too_large_and_too_many_at_once(void **state)
{
	struct fx *f = *state;
	struct il_list l;
	struct tuples keys;
	char lrk[1100];

	/* past the largest list: 15,360,000 units of JSON (1,000-byte RowKeys) */
	keys_range(&keys, 0, 15400, 1000 - 12);
	ok(ecw_index_list_store_load(&l, f->c, T, LPK, "Jones"), "load");
	assert_int_equal(ecw_index_list_store_check(&l, &keys), ECW_ETOOLARGE);
	assert_non_null(strstr(ecw_error_last()->message, "Dept/Jones is too large"));
	assert_int_equal(ecw_index_list_store_save(f->c, T, &l, &keys), ECW_ETOOLARGE);
	ecw_index_list_store_dispose(&l);
	ecw_index_list_tuples_dispose(&keys);

	/* 5 MB of new keys at once: more than one transaction carries */
	keys_range(&keys, 0, 5000, 1000 - 12);
	ok(ecw_index_list_store_load(&l, f->c, T, LPK, "Jones"), "load");
	assert_int_equal(ecw_index_list_store_check(&l, &keys), ECW_IL_TOO_MANY_CHANGES);
	assert_int_equal(ecw_index_list_store_save(f->c, T, &l, &keys), ECW_IL_TOO_MANY_CHANGES);
	ecw_index_list_store_dispose(&l);
	assert_int_equal(table_server_count(f->s, T), 0);
	ecw_index_list_tuples_dispose(&keys);

	/* a list whose page RowKey would pass the key limit */
	memset(lrk, 'r', 1022);
	lrk[1022] = '\0';
	keys_range(&keys, 0, 6000, PAD);
	ok(ecw_index_list_store_load(&l, f->c, T, LPK, lrk), "load");
	assert_int_equal(ecw_index_list_store_check(&l, &keys), ECW_ETOOLARGE);
	assert_non_null(strstr(ecw_error_last()->message, "RowKey"));
	ecw_index_list_store_dispose(&l);
	ecw_index_list_tuples_dispose(&keys);
}

static void test_index_list_store__lost_race_is_a_precondition(void **state)
{
	struct fx *f = *state;
	struct il_list a, b;
	struct tuples keys;

	keys_range(&keys, 0, 6000, PAD);
	save(f, "Jones", &keys);
	ok(ecw_index_list_store_load(&a, f->c, T, LPK, "Jones"), "load a");
	ok(ecw_index_list_store_load(&b, f->c, T, LPK, "Jones"), "load b");
	add_key(&keys, 7000, 0);
	ok(ecw_index_list_store_save(f->c, T, &a, &keys), "save a");
	ecw_index_list_tuples_remove_at(&keys, keys.n - 1);
	add_key(&keys, 7001, 0);
	assert_int_equal(ecw_index_list_store_save(f->c, T, &b, &keys), ECW_EPRECONDITION);
	ecw_index_list_store_dispose(&a);
	ecw_index_list_store_dispose(&b);
	ecw_index_list_tuples_dispose(&keys);
}

/* Reads served by one server until the reader's second point GET (its
 * first page), then by another that holds the list's next version: as if
 * another worker's transaction had rewritten the list between the reader's
 * GET of the head and those of its pages. pages_only: only the pages come
 * from the other (the head, and the query that looks at it again, stay
 * with the first): a list broken for good rather than a race. */
struct torn {
	struct table_server *first, *then;
	int point_gets;
	bool pages_only;
};

static int torn_send(void *ctx, struct ecw_response *resp, const char *url, const struct ecw_request *r)
{
	struct torn *t = ctx;
	bool point = strcmp(r->method, "GET") == 0 && strstr(url, "RowKey=");

	t->point_gets += point;
	return table_server_send(t->point_gets >= 2 && (point || !t->pages_only) ? t->then : t->first, resp,
	                         url, r);
}

/* A torn read: the head of one version, then a page of the next, whose keys
 * do not follow the head's. That is a race, not a broken list: the head has
 * changed since, so the list is read again (and found whole), never
 * reported as a permanent error (which poisons the message). The same
 * misfit under a head that has not changed is the list's own error. */
static void test_index_list_store__torn_read_is_read_again(void **state)
{
	struct fx *f = *state, g;
	struct table_server *next;
	struct tuples before, after;
	struct torn t = {0};
	struct il_list l;

	/* Before: every other key of 12,000, a head and pages. After: all of
	 * them, written afresh, so that its page 1 begins before the old
	 * head's keys end. Another list is written first, so that no ETag of
	 * the two servers is alike. */
	keys_range(&after, 0, 12000, PAD);
	keys_range(&before, 0, 12000, PAD);
	for (size_t i = 6000; i > 0; i--)
		ecw_index_list_tuples_remove_at(&before, 2 * i - 1);
	save(f, "Jones", &before);
	table_server_connect(&g.acct, &g.c, &next, false);
	table_server_create_table(next, T);
	g.s = next;
	save(&g, "Smith", &before);
	save(&g, "Jones", &after);

	t = (struct torn){f->s, next, 0, false};
	ecw_client_set_transport(f->c, torn_send, &t);
	ok(ecw_index_list_store_load(&l, f->c, T, LPK, "Jones"), "load across the rewrite");
	assert_true(t.point_gets > 3); /* head, page, then the new head and its pages */
	assert_same(&l.keys, &after);
	ecw_index_list_store_dispose(&l);

	t = (struct torn){f->s, next, 0, true};
	assert_int_equal(ecw_index_list_store_load(&l, f->c, T, LPK, "Jones"), ECW_EINVALID);
	assert_non_null(strstr(ecw_error_last()->message, "does not follow the keys before it"));

	ecw_client_set_transport(f->c, table_server_send, f->s);
	ecw_index_list_tuples_dispose(&before);
	ecw_index_list_tuples_dispose(&after);
	table_server_disconnect(g.acct, g.c, next);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_index_list_store__one_property_list_read_and_grown_as_today,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_index_list_store__chunk_cut_at_exactly_32000_units, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(
	        test_index_list_store__grows_to_pages_and_back_one_transaction_each, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_index_list_store__pages_join_when_half_empty, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_index_list_store__collisions_name_both_lists, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_index_list_store__too_large_and_too_many_at_once, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_index_list_store__torn_read_is_read_again, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_index_list_store__lost_race_is_a_precondition, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
