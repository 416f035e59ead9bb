/* SPDX-License-Identifier: MIT */
/* index_list_store.c - how an index list is stored: reading a whole list
 * (its keys, sorted, and what a conditional write of it needs) and writing
 * a changed list back atomically, conditional on what was read. The job
 * (index_list.c), its audit (index_list_audit.c) and `ecworker index get`
 * read and write lists only through here; the format is described at the
 * top of index_list.c.
 *
 * A list is its sorted keys cut into chunks, each chunk one String property
 * holding a JSON array of pairs of at most KEYS_MAX_UTF16 code units:
 *   - one chunk: the head entity (lpk, lrk) with Keys and Count, today's
 *     format exactly;
 *   - more: the head holds Keys, Keys2, ... KeysN (at most ENTITY_MAX_CHUNKS,
 *     and within ENTITY_BUDGET as the service counts an entity's size);
 *   - more than one entity holds: pages, RowKey lrk + "~~" + n, holding
 *     ListRowKey (= lrk) and their own Keys, Keys2, ...; the head lists them
 *     in key order in Pages ("[1,3,2]") and keeps LastPage (Int32, the
 *     highest page number the list ever used: numbers are never reused
 *     while the head lives, so a reader that read an old Pages finds a page
 *     gone, never another list's keys under an old number).
 * Count on the head is always the number of keys of the whole list.
 *
 * A change is planned locally (plan_*): the chunks of the list as read keep
 * their lower bounds, the new keys fall into them, and only the chunks whose
 * keys differ are rewritten; one that grows past KEYS_MAX_UTF16 is split in
 * two, one that empties goes, one that fits in half a chunk with a
 * neighbour joins it. Then the entities: one over its budget gives its last
 * chunks to a new page right after it; a dirty page that fits in half an
 * entity with the one before joins it; an emptied page goes, an emptied
 * head takes the next page's chunks. So a change of one key writes the head
 * (Count; a MERGE of Count and Pages alone when its chunks did not change),
 * the entity the key lands in, and at most one page more (a split or a
 * join): 2 to 4 operations, whatever the list's size.
 *
 * Atomic by construction: a change is one request, one entity written with
 * If-Match (insert when absent, delete when emptied), or one entity group
 * transaction over every entity it changes, the head always in it, If-Match
 * on each entity that exists, insert for new pages, delete If-Match for
 * emptied ones. There is no moment between the entities of a change at
 * which a crash could stop it. A reader that reads the head, then its pages,
 * sees one version when the head's ETag is the same after the pages were
 * read (every change writes the head): load checks it (one small query),
 * and reads again when it moved.
 *
 * Limits: at most MAX_PAGES pages, and at most LIST_MAX_UTF16 code units of
 * JSON across all chunks (15,360,000: about 560,000 keys like ["Dept 7",
 * "jones 000123"]); past it ECW_ETOOLARGE naming the list, before anything
 * is written. A change too big for one transaction (only a change of many
 * keys at once can be) is ECW_IL_TOO_MANY_CHANGES. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_codec.h"
#include "ecw_job.h"
#include "ecw_storage.h"
#include "index_list_private.h"
#include "jobs_private.h"

/* The service allows 64 KiB of UTF-16 in one String property (32,768 code
 * units; Azurite refuses more than 32 * 1024). A margin below it. */
#define STRING_MAX_UTF16 32768
/* An entity: 1 MiB as the service counts it, less a margin for what it
 * adds (Timestamp); chunks per entity well under the 252 properties. */
#define ENTITY_BUDGET (1024 * 1024 - 16 * 1024)
#ifdef ECW_TESTING
/* Test builds may make chunks and entities smaller (never larger), so that a
 * list of a few hundred short keys spans properties and pages and the tests
 * of large lists move kilobytes, not megabytes: ECW_TEST_IL_CHUNK_UNITS,
 * ECW_TEST_IL_ENTITY_CHUNKS. */
static size_t test_limit(const char *name, size_t limit)
{
	const char *v = getenv(name);
	char *end = NULL;
	long n = v ? strtol(v, &end, 10) : 0;

	/* Only a whole positive number below the limit counts. */
	if (!v || end == v || *end != '\0' || n <= 0 || (size_t)n >= limit)
		return limit;
	return (size_t)n;
}
#define KEYS_MAX_UTF16 test_limit("ECW_TEST_IL_CHUNK_UNITS", 32000)
#define ENTITY_MAX_CHUNKS test_limit("ECW_TEST_IL_ENTITY_CHUNKS", 15)
#else
#define KEYS_MAX_UTF16 ((size_t)32000)
#define ENTITY_MAX_CHUNKS ((size_t)15)
#endif
/* What one entity may take of a transaction's body (JSON, as sent): three
 * such entities (the head, and a page split in two) fit in 4 MiB. */
#define ENTITY_BODY_BUDGET (1200 * 1024)
#define HEAD_RESERVE 4096 /* Count, Pages, LastPage */
#define MAX_PAGES 255
#define LIST_MAX_UTF16 ((long long)(64 * ENTITY_MAX_CHUNKS * KEYS_MAX_UTF16 / 2))
#define PAGE_SEP "~~"
#define LOAD_TRIES 8 /* reads of a list that kept changing as it was read */
#define RETRY 2      /* a read saw two versions: read again */

struct il_chunk {
	size_t start, end;   /* keys [start, end) of the list */
	size_t units, bytes; /* its JSON: UTF-16 units, bytes in a request body */
	bool dirty;          /* to be written */
};

struct il_ent {
	unsigned page; /* 0: the head */
	char *etag;    /* as read; NULL: a new page */
	struct il_chunk *c;
	size_t n, cap;
	bool dirty, gone;
};

struct il_layout {
	struct il_ent *e;
	size_t n, cap;
	unsigned last_page;
};

static const char *prop_string(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);
	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

static int oom(void)
{
	return ecw_error_set(ECW_ENOMEM, "out of memory");
}

/* "Keys", "Keys2", ... for chunk i of an entity (room for any size_t). */
#define CHUNK_NAME_CAP 32

static void chunk_name(char name[CHUNK_NAME_CAP], size_t i)
{
	if (i == 0)
		snprintf(name, CHUNK_NAME_CAP, "Keys");
	else
		snprintf(name, CHUNK_NAME_CAP, "Keys%zu", i + 1);
}

static void page_rk(char *out, size_t cap, const char *lrk, unsigned page)
{
	snprintf(out, cap, "%s" PAGE_SEP "%u", lrk, page);
}

/* A view of keys [start, end) as tuples (borrowed strings: never disposed). */
static struct tuples view(const struct tuples *keys, size_t start, size_t end)
{
	struct tuples t = {.v = keys->v + start, .n = end - start, .cap = end - start, .width = 2};
	return t;
}

/* ---- the layout ---- */

static void layout_free(struct il_layout *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->e[i].etag);
		free(l->e[i].c);
	}
	free(l->e);
	free(l);
}

/* A new entity at position at (its chunks none yet). */
static int layout_insert(struct il_ent **out, struct il_layout *l, size_t at, unsigned page, const char *etag)
{
	struct il_ent e = {.page = page};

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 4;
		struct il_ent *v = realloc(l->e, cap * sizeof(*v));
		if (!v)
			return oom();
		l->e = v;
		l->cap = cap;
	}
	if (etag && !(e.etag = strdup(etag)))
		return oom();
	memmove(l->e + at + 1, l->e + at, (l->n - at) * sizeof(*l->e));
	l->e[at] = e;
	l->n++;
	*out = &l->e[at];
	return 0;
}

static int chunk_insert(struct il_ent *e, size_t at, struct il_chunk c)
{
	if (e->n == e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 4;
		struct il_chunk *v = realloc(e->c, cap * sizeof(*v));
		if (!v)
			return oom();
		e->c = v;
		e->cap = cap;
	}
	memmove(e->c + at + 1, e->c + at, (e->n - at) * sizeof(*e->c));
	e->c[at] = c;
	e->n++;
	return 0;
}

static void chunk_remove(struct il_ent *e, size_t at)
{
	memmove(e->c + at, e->c + at + 1, (e->n - at - 1) * sizeof(*e->c));
	e->n--;
}

/* The JSON of a chunk measured: units as the service counts them, bytes as
 * the entity's JSON carries it. */
static void measure(struct il_chunk *c, const char *json, size_t len)
{
	c->units = ecw_index_list_tuples_utf16_units(json, len);
	c->bytes = ecw_json_quote_len(json, len);
}

static int chunk_measure(struct il_chunk *c, const struct tuples *keys)
{
	struct tuples v = view(keys, c->start, c->end);
	struct ecw_buf json;
	int err;

	ecw_buf_init(&json, 0);
	if ((err = ecw_index_list_tuples_write(&json, &v)) == 0)
		measure(c, json.ptr, json.len);
	ecw_buf_dispose(&json);
	return err;
}

/* The entity's size as the service counts it, and its body bytes. */
static size_t ent_size(const struct il_ent *e, const char *lpk, const char *lrk, size_t *bytes)
{
	size_t size = 4 + 2 * (ecw_index_list_tuples_utf16_units(lpk, strlen(lpk)) +
			       ecw_index_list_tuples_utf16_units(lrk, strlen(lrk)) + 8);

	*bytes = 512 + 2 * (strlen(lpk) + strlen(lrk) + 8);
	size += e->page ? 8 + 2 * 10 + 4 + 2 * ecw_index_list_tuples_utf16_units(lrk, strlen(lrk))
			: HEAD_RESERVE;
	*bytes += e->page ? 16 + strlen(lrk) : HEAD_RESERVE / 4;
	for (size_t i = 0; i < e->n; i++) {
		size += 8 + 2 * 6 + 4 + 2 * e->c[i].units;
		*bytes += 16 + e->c[i].bytes;
	}
	return size;
}

static bool ent_over(const struct il_ent *e, const char *lpk, const char *lrk)
{
	size_t bytes, size = ent_size(e, lpk, lrk, &bytes);

	return size > ENTITY_BUDGET || bytes > ENTITY_BODY_BUDGET || e->n > ENTITY_MAX_CHUNKS;
}

static bool ents_fit_half(const struct il_ent *a, const struct il_ent *b, const char *lpk, const char *lrk)
{
	size_t ab, bb, as = ent_size(a, lpk, lrk, &ab), bs = ent_size(b, lpk, lrk, &bb);

	return as + bs <= ENTITY_BUDGET / 2 && ab + bb <= ENTITY_BODY_BUDGET / 2 &&
	       a->n + b->n <= ENTITY_MAX_CHUNKS / 2;
}

/* ---- reading ---- */

/* Appends the keys of json (one chunk) to out->keys, which they must follow
 * in order. */
static int load_chunk(struct il_list *out, struct il_ent *e, const char *json, const char *what)
{
	struct il_chunk c = {.start = out->keys.n};
	struct tuples t;
	size_t len = strlen(json);
	int err;

	if (ecw_index_list_tuples_utf16_units(json, len) > STRING_MAX_UTF16)
		return ecw_error_set(ECW_EINVALID, "%s is longer than one String property may be", what);
	if ((err = ecw_index_list_tuples_parse(&t, json, len, 2, what)) < 0)
		return err;
	if (t.n && out->keys.n) {
		const struct tup *last = &out->keys.v[out->keys.n - 1];
		int cmp = strcmp(last->s[0], t.v[0].s[0]);

		if (cmp > 0 || (cmp == 0 && strcmp(last->s[1], t.v[0].s[1]) >= 0)) {
			ecw_index_list_tuples_dispose(&t);
			return ecw_error_set(ECW_EINVALID, "%s does not follow the keys before it in order",
					     what);
		}
	}
	if (out->keys.cap < out->keys.n + t.n) {
		struct tup *v = realloc(out->keys.v, (out->keys.n + t.n) * sizeof(*v));
		if (!v) {
			ecw_index_list_tuples_dispose(&t);
			return oom();
		}
		out->keys.v = v;
		out->keys.cap = out->keys.n + t.n;
	}
	if (t.n) /* an empty chunk ("[]") has no array to copy from, nor may have one to copy to */
		memcpy(out->keys.v + out->keys.n, t.v, t.n * sizeof(*t.v)); /* the strings move */
	out->keys.n += t.n;
	free(t.v);
	c.end = out->keys.n;
	measure(&c, json, len);
	return chunk_insert(e, e->n, c);
}

/* The chunks of entity en (Keys, Keys2, ... in order) into out. */
static int load_entity(struct il_list *out, const struct ecw_entity *en, unsigned page)
{
	struct il_layout *l = out->layout;
	struct il_ent *e;
	const char *json;
	char name[CHUNK_NAME_CAP];
	int err;

	if ((err = layout_insert(&e, l, l->n, page, ecw_entity_etag(en) ? ecw_entity_etag(en) : "")) < 0)
		return err;
	if (!prop_string(en, "Keys"))
		return ecw_error_set(ECW_EINVALID, "no Keys string: is another job or program writing that "
						   "partition?");
	for (size_t i = 0; i < ENTITY_MAX_CHUNKS * 2; i++) {
		chunk_name(name, i);
		if (!(json = prop_string(en, name)))
			break;
		if ((err = load_chunk(out, e, json, name)) < 0)
			return err;
	}
	return 0;
}

/* Pages ("[1,3,2]") into pages; at most MAX_PAGES, each once. */
static int parse_pages(unsigned *pages, size_t *n, const char *s)
{
	const char *p = s;

	*n = 0;
	if (*p++ != '[')
		goto bad;
	while (*p && *p != ']') {
		unsigned long v = 0;
		size_t digits = 0;

		if (*n && *p++ != ',')
			goto bad;
		for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++)
			v = v * 10 + (unsigned long)(*p - '0');
		if (!digits || v == 0 || v > 0x7fffffffUL || *n == MAX_PAGES)
			goto bad;
		for (size_t i = 0; i < *n; i++)
			if (pages[i] == v)
				goto bad;
		pages[(*n)++] = (unsigned)v;
	}
	if (*p == ']' && p[1] == '\0')
		return 0;
bad:
	return ecw_error_set(ECW_EINVALID, "Pages is not a JSON array of distinct page numbers");
}

/* The head's ETag now: one query that returns nothing but it. */
static int head_etag_now(char **out, struct ecw_client *c, const char *table, const char *lpk,
			 const char *lrk)
{
	struct ecw_query_options o = {.select = "Count", .top = 1};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	struct ecw_buf f;
	int err;

	*out = NULL;
	ecw_buf_init(&f, 8 * 1024);
	if ((err = ecw_buf_adds(&f, "PartitionKey eq ")) < 0 ||
	    (err = ecw_escape_filter_string(&f, lpk)) < 0 ||
	    (err = ecw_buf_adds(&f, " and RowKey eq ")) < 0 || (err = ecw_escape_filter_string(&f, lrk)) < 0)
		goto done;
	o.filter = ecw_buf_cstr(&f);
	if ((err = ecw_table_query_new(&q, c, table, &o)) < 0 || (err = ecw_table_query_next(&e, q)) < 0)
		goto done;
	if (e && ecw_entity_etag(e) && !(*out = strdup(ecw_entity_etag(e))))
		err = oom();
done:
	ecw_entity_free(e);
	ecw_table_query_free(q);
	ecw_buf_dispose(&f);
	return err;
}

/* Whether the head's ETag is no longer the one read (or the head is gone),
 * so that pages read since may belong to a newer version of the list: 1 or
 * 0, or the query's error when it cannot tell. */
static int head_moved_on(struct ecw_client *c, const char *table, const struct il_list *out)
{
	char *now = NULL;
	int err = head_etag_now(&now, c, table, out->lpk, out->lrk);

	if (err == 0)
		err = !now || strcmp(now, out->etag) != 0;
	free(now);
	return err;
}

/* One read of the list from its head: RETRY when a page is gone or the
 * head changed while the pages were read. The head and its pages are read
 * one after the other, while another worker may write them all in one
 * transaction: a page that does not fit the head read before it (its keys
 * out of order with the head's, its ListRowKey another list's) is a torn
 * read, not a broken list, when the head has changed meanwhile. Only a
 * misfit under an unchanged head is the list's own error (a permanent one:
 * before this check, a race at 20,000 keys of one value poisoned 16,000
 * messages in one bench run). */
static int load_from_head(struct il_list *out, struct ecw_client *c, const char *table,
			  const struct ecw_entity *head)
{
	const struct ecw_prop *count = ecw_entity_get(head, "Count"),
			      *last = ecw_entity_get(head, "LastPage");
	const char *owner = prop_string(head, "ListRowKey"), *pages_s = prop_string(head, "Pages");
	unsigned pages[MAX_PAGES];
	size_t npages = 0;
	char rk[ECW_KEY_MAX + 32], *now = NULL;
	int err;

	if (owner)
		return ecw_error_set(ECW_EINVALID, "that entity is a page of list %.100s/%.100s", out->lpk,
				     owner);
	if (!(out->layout = calloc(1, sizeof(*out->layout))))
		return oom();
	out->has_count = count && count->type == ECW_EDM_INT32;
	out->count = out->has_count ? count->v.i32 : 0;
	out->layout->last_page =
		last && last->type == ECW_EDM_INT32 && last->v.i32 > 0 ? (unsigned)last->v.i32 : 0;
	if ((err = load_entity(out, head, 0)) < 0 ||
	    (pages_s && (err = parse_pages(pages, &npages, pages_s)) < 0))
		return err;
	for (size_t i = 0; i < npages; i++) {
		struct ecw_entity *page = NULL;
		const char *of;

		if (pages[i] > out->layout->last_page)
			out->layout->last_page = pages[i];
		page_rk(rk, sizeof(rk), out->lrk, pages[i]);
		if ((err = ecw_table_get(&page, c, table, out->lpk, rk)) == ECW_ENOTFOUND) {
			ecw_error_clear();
			return RETRY;
		}
		if (err < 0)
			return err;
		if (!(of = prop_string(page, "ListRowKey")) || strcmp(of, out->lrk) != 0)
			err = ecw_error_set(ECW_EINVALID, "its page %.100s is %s%.100s", rk,
					    of ? "a page of list " : "a list of its own, ", of ? of : rk);
		else
			err = load_entity(out, page, pages[i]);
		ecw_entity_free(page);
		if (err == ECW_EINVALID) {
			char why[sizeof(ecw_error_last()->message)];
			int moved;

			snprintf(why, sizeof(why), "%s", ecw_error_last()->message);
			if ((moved = head_moved_on(c, table, out)) != 0) {
				if (moved < 0)
					return moved; /* cannot tell: not a permanent error */
				ecw_error_clear();
				return RETRY;
			}
			return ecw_error_set(ECW_EINVALID, "%s", why);
		}
		if (err < 0)
			return err;
	}
	if (npages == 0)
		return 0;
	if ((err = head_etag_now(&now, c, table, out->lpk, out->lrk)) == 0 &&
	    (!now || strcmp(now, out->etag) != 0))
		err = RETRY;
	free(now);
	return err;
}

static int load_init(struct il_list *out, const char *lpk, const char *lrk)
{
	memset(out, 0, sizeof(*out));
	ecw_index_list_tuples_init(&out->keys, 2);
	if (!(out->lpk = strdup(lpk)) || !(out->lrk = strdup(lrk)))
		return oom();
	return 0;
}

/* One attempt from head (NULL: absent): 0, RETRY, or an error. */
static int load_attempt(struct il_list *out, struct ecw_client *c, const char *table,
			const struct ecw_entity *head)
{
	int err;

	if (!head)
		return 0;
	out->exists = true;
	if (!(out->etag = strdup(ecw_entity_etag(head) ? ecw_entity_etag(head) : "")))
		return oom();
	if ((err = load_from_head(out, c, table, head)) == ECW_EINVALID)
		err = ecw_error_set(ECW_EINVALID, "list %s/%.100s/%.100s: %s", table, out->lpk, out->lrk,
				    ecw_error_last()->message);
	return err;
}

static int load_reset(struct il_list *out)
{
	char *lpk = out->lpk, *lrk = out->lrk;
	int err;

	out->lpk = out->lrk = NULL;
	ecw_index_list_store_dispose(out);
	err = load_init(out, lpk, lrk);
	free(lpk);
	free(lrk);
	return err;
}

int ecw_index_list_store_load(struct il_list *out, struct ecw_client *c, const char *table, const char *lpk,
			      const char *lrk)
{
	int err = load_init(out, lpk, lrk);

	for (int tries = 0; err == 0 && tries < LOAD_TRIES; tries++) {
		struct ecw_entity *head = NULL;

		if (tries && (err = load_reset(out)) < 0)
			break;
		if ((err = ecw_table_get(&head, c, table, lpk, lrk)) == ECW_ENOTFOUND) {
			ecw_error_clear();
			err = 0;
		}
		if (err == 0)
			err = load_attempt(out, c, table, head);
		ecw_entity_free(head);
		if (err != RETRY)
			break;
		err = 0;
		if (tries == LOAD_TRIES - 1)
			err = ecw_error_set(ECW_ETRANSIENT,
					    "list %s/%.100s/%.100s changed %d times as it was read", table,
					    lpk, lrk, LOAD_TRIES);
	}
	if (err < 0)
		ecw_index_list_store_dispose(out);
	return err;
}

int ecw_index_list_store_load_head(struct il_list *out, struct ecw_client *c, const char *table,
				   const struct ecw_entity *head)
{
	int err = load_init(out, ecw_entity_pk(head), ecw_entity_rk(head));

	if (err == 0 && (err = load_attempt(out, c, table, head)) == RETRY) {
		ecw_index_list_store_dispose(out);
		return ecw_index_list_store_load(out, c, table, ecw_entity_pk(head), ecw_entity_rk(head));
	}
	if (err < 0)
		ecw_index_list_store_dispose(out);
	return err;
}

void ecw_index_list_store_dispose(struct il_list *l)
{
	free(l->lpk);
	free(l->lrk);
	free(l->etag);
	layout_free(l->layout);
	ecw_index_list_tuples_dispose(&l->keys);
	memset(l, 0, sizeof(*l));
	ecw_index_list_tuples_init(&l->keys, 2);
}

/* ---- planning a change ---- */

static int cmp_key(const struct tup *a, const struct tup *b)
{
	int c = strcmp(a->s[0], b->s[0]);
	return c ? c : strcmp(a->s[1], b->s[1]);
}

static bool same_keys(const struct tuples *a, size_t as, const struct tuples *b, size_t bs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (cmp_key(&a->v[as + i], &b->v[bs + i]) != 0)
			return false;
	return true;
}

/* The layout read, with keys in it: each chunk keeps its lower bound (its
 * first key as read; the first chunk none), dirty where its keys differ. */
static int plan_assign(struct il_layout **out, const struct il_list *read, const struct tuples *keys)
{
	const struct il_layout *old = read->layout;
	struct il_layout *l;
	struct il_ent *e;
	size_t next, pos;
	int err;

	if (!(*out = l = calloc(1, sizeof(*l))))
		return oom();
	if (!old || !read->exists || old->n == 0) {
		struct il_chunk c = {.start = 0, .end = keys->n, .dirty = true};
		if ((err = layout_insert(&e, l, 0, 0, NULL)) < 0)
			return err;
		e->dirty = true;
		return chunk_insert(e, 0, c);
	}
	l->last_page = old->last_page;
	for (size_t i = 0; i < old->n; i++) {
		if ((err = layout_insert(&e, l, i, old->e[i].page, old->e[i].etag)) < 0)
			return err;
		for (size_t j = 0; j < old->e[i].n; j++)
			if ((err = chunk_insert(e, j, old->e[i].c[j])) < 0)
				return err;
	}
	/* Each chunk ends where the next one starts; one starts where its first
	 * key as read would go in keys (the first chunk at 0, an empty one where
	 * the next starts). */
	next = keys->n;
	for (size_t i = l->n; i-- > 0;)
		for (size_t j = l->e[i].n; j-- > 0;) {
			struct il_chunk *c = &l->e[i].c[j];
			size_t ostart = c->start, olen = c->end - c->start, start = next;

			if (i == 0 && j == 0)
				start = 0;
			else if (olen) {
				const char *k[2] = {read->keys.v[ostart].s[0], read->keys.v[ostart].s[1]};
				(void)ecw_index_list_tuples_find(keys, k, &pos);
				start = pos;
			}
			c->dirty = next - start != olen || !same_keys(keys, start, &read->keys, ostart, olen);
			c->start = start;
			c->end = next;
			next = start;
			if (c->dirty)
				l->e[i].dirty = true;
		}
	return 0;
}

/* Chunks: split the too long, drop the empty, join the small. */
static int plan_chunks(struct il_layout *l, const struct tuples *keys)
{
	int err;

	for (size_t i = 0; i < l->n; i++) {
		struct il_ent *e = &l->e[i];

		for (size_t j = 0; j < e->n;) {
			struct il_chunk *c = &e->c[j];

			if (!c->dirty) {
				j++;
				continue;
			}
			if (c->end == c->start) {
				chunk_remove(e, j);
				continue;
			}
			if ((err = chunk_measure(c, keys)) < 0)
				return err;
			if (c->units > KEYS_MAX_UTF16) {
				struct il_chunk tail = *c;
				tail.start = c->end = c->start + (c->end - c->start) / 2;
				if ((err = chunk_insert(e, j + 1, tail)) < 0)
					return err;
				continue; /* both halves measured again */
			}
			if (j + 1 < e->n && c->units + e->c[j + 1].units <= KEYS_MAX_UTF16 / 2) {
				c->end = e->c[j + 1].end;
				chunk_remove(e, j + 1);
				continue;
			}
			if (j > 0 && c->units + e->c[j - 1].units <= KEYS_MAX_UTF16 / 2) {
				e->c[j - 1].end = c->end;
				e->c[j - 1].dirty = true;
				chunk_remove(e, j);
				j--;
				continue;
			}
			j++;
		}
	}
	return 0;
}

static int move_chunks(struct il_ent *to, struct il_ent *from, size_t first)
{
	int err;

	for (size_t j = first; j < from->n; j++)
		if ((err = chunk_insert(to, to->n, from->c[j])) < 0)
			return err;
	from->n = first;
	to->dirty = from->dirty = true;
	return 0;
}

/* Entities: an emptied head takes the next entity's chunks, emptied pages
 * go, a small dirty page joins the one before, one over budget splits. */
static int plan_entities(struct il_layout *l, const char *lpk, const char *lrk)
{
	int err;

	for (size_t i = 1; l->e[0].n == 0 && i < l->n; i++) {
		if (l->e[i].gone || l->e[i].n == 0)
			continue;
		if ((err = move_chunks(&l->e[0], &l->e[i], 0)) < 0)
			return err;
		l->e[i].gone = true;
	}
	for (size_t i = 1; i < l->n; i++) {
		struct il_ent *e = &l->e[i], *prev = NULL;

		if (e->gone || !e->dirty)
			continue;
		for (size_t k = i; k-- > 0 && !prev;)
			if (!l->e[k].gone)
				prev = &l->e[k];
		if (e->n == 0 || ents_fit_half(prev, e, lpk, lrk)) {
			if ((err = move_chunks(prev, e, 0)) < 0)
				return err;
			e->gone = true;
		}
	}
	for (size_t i = 0; i < l->n; i++) {
		struct il_ent *e;

		if (l->e[i].gone || l->e[i].n < 2 || !ent_over(&l->e[i], lpk, lrk))
			continue;
		if (l->last_page >= 0x7fffffffU)
			return ecw_error_set(ECW_ETOOLARGE, "no page number is left");
		if ((err = layout_insert(&e, l, i + 1, ++l->last_page, NULL)) < 0 ||
		    (err = move_chunks(e, &l->e[i], l->e[i].n / 2)) < 0)
			return err;
		i--; /* measured again */
	}
	return 0;
}

/* The checks and the counts of a plan: 0, ECW_ETOOLARGE or
 * ECW_IL_TOO_MANY_CHANGES. */
static int plan_limits(const struct il_layout *l, const struct il_list *read, const struct tuples *keys)
{
	size_t pages = 0, ops = 0, body = 0, bytes;
	long long units = 0;
	char rk[ECW_KEY_MAX + 32];

	for (size_t i = 0; i < l->n; i++) {
		const struct il_ent *e = &l->e[i];

		for (size_t j = 0; j < e->n; j++)
			units += (long long)e->c[j].units;
		if (e->gone) {
			ops += e->etag != NULL;
			continue;
		}
		pages += e->page != 0;
		if (e->page && !e->etag) {
			page_rk(rk, sizeof(rk), read->lrk, e->page);
			if (strlen(rk) > ECW_KEY_MAX)
				return ecw_error_set(ECW_ETOOLARGE,
						     "%.80s/%.80s is too large: its page's RowKey %.80s... "
						     "would be over the %d bytes a key may have",
						     read->lpk, read->lrk, rk, ECW_KEY_MAX);
		}
		if (e->dirty || e->page == 0) {
			ops++;
			(void)ent_size(e, read->lpk, read->lrk, &bytes);
			body += bytes + 1024;
		}
	}
	if (units > LIST_MAX_UTF16 || pages > MAX_PAGES)
		return ecw_error_set(
			ECW_ETOOLARGE,
			"%.80s/%.80s is too large: it would hold %zu keys, %lld UTF-16 "
			"characters of JSON in %zu pages, over the %lld characters and %d pages a "
			"list may have",
			read->lpk, read->lrk, keys->n, units, pages, (long long)LIST_MAX_UTF16, MAX_PAGES);
	if (ops > ECW_BATCH_MAX_OPS || body > ECW_BATCH_MAX_BYTES - 64 * 1024)
		return ECW_IL_TOO_MANY_CHANGES;
	return 0;
}

static int plan(struct il_layout **out, const struct il_list *read, const struct tuples *keys)
{
	int err;

	*out = NULL;
	if ((err = plan_assign(out, read, keys)) < 0 || (err = plan_chunks(*out, keys)) < 0 ||
	    (err = plan_entities(*out, read->lpk, read->lrk)) < 0 ||
	    (err = plan_limits(*out, read, keys)) != 0) {
		layout_free(*out);
		*out = NULL;
	}
	return err;
}

int ecw_index_list_store_check(const struct il_list *read, const struct tuples *keys)
{
	struct il_layout *l = NULL;
	int err = keys->n ? plan(&l, read, keys) : 0;

	layout_free(l);
	return err;
}

/* ---- writing ---- */

static int head_props(struct ecw_entity *e, const struct il_layout *l, size_t nkeys)
{
	struct ecw_buf pages;
	int err;

	ecw_buf_init(&pages, 16 * 1024);
	if ((err = ecw_entity_set_int32(e, "Count", (int32_t)nkeys)) < 0)
		goto done;
	for (size_t i = 1; i < l->n; i++)
		if (!l->e[i].gone &&
		    (err = ecw_buf_printf(&pages, "%s%u", pages.len ? "," : "[", l->e[i].page)) < 0)
			goto done;
	if (pages.len && ((err = ecw_buf_addc(&pages, ']')) < 0 ||
			  (err = ecw_entity_set_string(e, "Pages", pages.ptr, pages.len)) < 0))
		goto done;
	if (l->last_page)
		err = ecw_entity_set_int32(e, "LastPage", (int32_t)l->last_page);
done:
	ecw_buf_dispose(&pages);
	return err;
}

/* The entity for e as planned; chunks false: the head's Count, Pages and
 * LastPage alone (a MERGE). */
static int build(struct ecw_entity **out, const struct il_list *read, const struct il_layout *l,
		 const struct il_ent *e, const struct tuples *keys, bool chunks)
{
	char rk[ECW_KEY_MAX + 32], name[CHUNK_NAME_CAP];
	struct ecw_buf json;
	int err;

	ecw_buf_init(&json, 0);
	if (e->page)
		page_rk(rk, sizeof(rk), read->lrk, e->page);
	if ((err = ecw_entity_new(out, read->lpk, e->page ? rk : read->lrk)) < 0)
		goto done;
	if (e->page ? (err = ecw_entity_set_string(*out, "ListRowKey", read->lrk, strlen(read->lrk))) < 0
		    : (err = head_props(*out, l, keys->n)) < 0)
		goto done;
	for (size_t j = 0; chunks && j < e->n; j++) {
		struct tuples v = view(keys, e->c[j].start, e->c[j].end);

		ecw_buf_reset(&json);
		chunk_name(name, j);
		if ((err = ecw_index_list_tuples_write(&json, &v)) < 0 ||
		    (err = ecw_entity_set_string(*out, name, json.ptr, json.len)) < 0)
			goto done;
	}
done:
	ecw_buf_dispose(&json);
	if (err < 0) {
		ecw_entity_free(*out);
		*out = NULL;
	}
	return err;
}

static size_t pages_of(const struct il_layout *l)
{
	size_t n = 0;

	for (size_t i = 1; l && i < l->n; i++)
		n += !l->e[i].gone;
	return n;
}

/* The operation on l's entity i, and its entity (NULL: none). */
static int op_for(enum ecw_batch_op *op, struct ecw_entity **out, const struct il_list *read,
		  const struct il_layout *l, size_t i, const struct tuples *keys)
{
	const struct il_ent *e = &l->e[i];
	bool merge;

	*out = NULL;
	if (e->gone) {
		*op = ECW_BATCH_DELETE;
		return e->etag ? build(out, read, l, e, keys, false) : 0;
	}
	if (!e->dirty && e->page)
		return 0;
	/* A head whose chunks stay, and that loses no Pages: MERGE Count and Pages. */
	merge = e->page == 0 && e->etag && !e->dirty && (pages_of(l) > 0 || pages_of(read->layout) == 0);
	*op = !e->etag ? ECW_BATCH_INSERT : merge ? ECW_BATCH_MERGE : ECW_BATCH_UPDATE;
	return build(out, read, l, e, keys, !merge);
}

/* A page insert refused: another entity holds its RowKey (when the head
 * has not changed since it was read), or a lost race. */
static int insert_refused(struct ecw_client *c, const char *table, const struct il_list *read, const char *rk)
{
	char *now = NULL;
	int err = head_etag_now(&now, c, table, read->lpk, read->lrk);

	if (err == 0 && now && strcmp(now, read->etag) == 0)
		err = ecw_error_set(
			ECW_EINVALID,
			"list %s/%.100s/%.100s: its new page's RowKey is taken by another entity, "
			"the list %.100s/%.100s",
			table, read->lpk, read->lrk, read->lpk, rk);
	else if (err == 0)
		err = ecw_error_set(ECW_EPRECONDITION, "list %s/%.100s/%.100s changed meanwhile", table,
				    read->lpk, read->lrk);
	free(now);
	return err;
}

static enum ecw_write_mode write_mode(enum ecw_batch_op op)
{
	return op == ECW_BATCH_INSERT  ? ECW_WRITE_INSERT
	       : op == ECW_BATCH_MERGE ? ECW_WRITE_MERGE
				       : ECW_WRITE_UPDATE;
}

/* The planned operations, the head's first: the entity of each (the
 * caller frees them) and the ETag it is conditional on. */
struct ops {
	struct ecw_entity *e[ECW_BATCH_MAX_OPS];
	enum ecw_batch_op op[ECW_BATCH_MAX_OPS];
	const char *etag[ECW_BATCH_MAX_OPS];
	size_t ent[ECW_BATCH_MAX_OPS]; /* which entity of the layout */
	size_t n;
};

static int ops_make(struct ops *o, const struct il_list *read, const struct il_layout *l,
		    const struct tuples *keys)
{
	int err;

	o->n = 0;
	for (size_t i = 0; i < l->n; i++) {
		struct ecw_entity *e = NULL;
		enum ecw_batch_op op = ECW_BATCH_UPDATE;

		if ((err = op_for(&op, &e, read, l, i, keys)) < 0)
			return err;
		if (!e)
			continue;
		if (o->n == ECW_BATCH_MAX_OPS) {
			ecw_entity_free(e);
			return ECW_IL_TOO_MANY_CHANGES;
		}
		o->e[o->n] = e;
		o->op[o->n] = op;
		o->etag[o->n] = op == ECW_BATCH_INSERT ? NULL : l->e[i].etag;
		o->ent[o->n++] = i;
	}
	return 0;
}

static void ops_dispose(struct ops *o)
{
	for (size_t i = 0; i < o->n; i++)
		ecw_entity_free(o->e[i]);
	o->n = 0;
}

static int submit_batch(struct ecw_client *c, const char *table, const struct il_list *read,
			const struct il_layout *l, const struct ops *o)
{
	struct ecw_batch *b = NULL;
	int err, failed;

	if ((err = ecw_batch_new(&b, table)) < 0)
		return err;
	for (size_t i = 0; i < o->n; i++)
		if ((err = ecw_batch_add_borrowed(b, o->op[i], o->e[i], o->etag[i])) < 0)
			goto done;
	err = ecw_batch_submit(c, b);
	failed = ecw_batch_failed_index(b);
	if (err == ECW_ECONFLICT && failed > 0 && (size_t)failed < o->n &&
	    o->op[failed] == ECW_BATCH_INSERT && l->e[o->ent[failed]].page)
		err = insert_refused(c, table, read, ecw_entity_rk(o->e[failed]));
done:
	ecw_batch_free(b);
	return err;
}

/* One request: a plain one for one entity (as a one-entity list always
 * had), an entity group transaction for more. */
static int submit(struct ecw_client *c, const char *table, const struct il_list *read,
		  const struct il_layout *l, const struct tuples *keys)
{
	struct ops *o = calloc(1, sizeof(*o));
	int err;

	if (!o)
		return oom();
	if ((err = ops_make(o, read, l, keys)) != 0 || o->n == 0)
		goto done;
	if (o->n > 1)
		err = submit_batch(c, table, read, l, o);
	else if (o->op[0] == ECW_BATCH_DELETE)
		err = ecw_table_delete(c, table, ecw_entity_pk(o->e[0]), ecw_entity_rk(o->e[0]), o->etag[0]);
	else
		err = ecw_table_write(NULL, c, table, o->e[0], write_mode(o->op[0]), o->etag[0]);
done:
	ops_dispose(o);
	free(o);
	return err;
}

int ecw_index_list_store_save(struct ecw_client *c, const char *table, const struct il_list *read,
			      const struct tuples *keys)
{
	struct il_layout *l = NULL;
	int err;

	if (keys->n == 0) {
		if (!read->exists)
			return 0;
		if (!(l = calloc(1, sizeof(*l))))
			return oom();
		/* every entity read goes, If-Match */
		for (size_t i = 0; read->layout && i < read->layout->n; i++) {
			struct il_ent *e;
			if ((err = layout_insert(&e, l, i, read->layout->e[i].page,
						 read->layout->e[i].etag)) < 0)
				goto done;
			e->gone = true;
		}
		if (l->n <= 1)
			err = ecw_table_delete(c, table, read->lpk, read->lrk, read->etag);
		else
			err = submit(c, table, read, l, keys);
		goto done;
	}
	if ((err = plan(&l, read, keys)) == 0)
		err = submit(c, table, read, l, keys);
done:
	layout_free(l);
	return err;
}
