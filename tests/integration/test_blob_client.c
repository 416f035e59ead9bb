/* SPDX-License-Identifier: MIT */
/* test_blob_client.c - the Blob client against Azurite's blob service
 * (BlobEndpoint of ECW_TEST_CONNECTION_STRING): containers created
 * idempotently; put, get, properties and delete with If-Match and
 * If-None-Match and what each outcome maps to; metadata and content type
 * round trips; listings by prefix over pages forced small, resumed from a
 * marker; a get over the reader's cap; a missing container and a missing
 * blob told apart; names with spaces, unicode, % + # ? and the marks
 * encodeURIComponent keeps, through put, list, get and properties; bad names
 * refused before any request; blocks put and committed, and ranged reads.
 * Each test has a container of its own. */
#include "itest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bt {
	struct itest *t;
	char container[64];
	bool created;
};

static int bt_setup(void **state)
{
	struct bt *b = calloc(1, sizeof(*b));
	void *inner = NULL;

	assert_non_null(b);
	itest_setup(&inner);
	b->t = inner;
	itest_unique_name(b->container, sizeof(b->container), 'q', "blob");
	*state = b;
	return 0;
}

static int bt_teardown(void **state)
{
	struct bt *b = *state;
	void *inner = b->t;

	if (b->created) {
		int err = ecw_blob_container_delete(b->t->client, b->container);
		if (err != 0 && err != ECW_ENOCONTAINER)
			fail_msg("deleting container %s: %s", b->container, itest_last_error());
	}
	itest_teardown(&inner);
	free(b);
	return 0;
}

static const char *container(struct bt *b)
{
	if (!b->created) {
		ECW_ASSERT_OK(ecw_blob_container_create(NULL, b->t->client, b->container));
		b->created = true;
	}
	return b->container;
}

static char *put(struct bt *b, const char *name, const char *text, const struct ecw_blob_put_options *o)
{
	char *etag = NULL;

	ECW_ASSERT_OK(ecw_blob_put(&etag, b->t->client, container(b), name, text, strlen(text), o));
	assert_non_null(etag);
	return etag;
}

/* The blob's whole content, which must fit max; info_out may be NULL. */
static void get_text(struct bt *b, const char *name, const char *want, struct ecw_blob_info **info_out)
{
	struct ecw_buf out;

	ecw_buf_init(&out, 0);
	ECW_ASSERT_OK(ecw_blob_get(&out, info_out, b->t->client, container(b), name, 1 << 20));
	assert_int_equal(out.len, strlen(want));
	assert_memory_equal(ecw_buf_cstr(&out), want, out.len);
	ecw_buf_dispose(&out);
}

static void test_blob_client__container_create_idempotent(void **state)
{
	struct bt *b = *state;
	bool created = false;

	ECW_ASSERT_OK(ecw_blob_container_create(&created, b->t->client, b->container));
	b->created = true;
	assert_true(created);
	ECW_ASSERT_OK(ecw_blob_container_create(&created, b->t->client, b->container));
	assert_false(created);
	ECW_ASSERT_OK(ecw_blob_container_create(NULL, b->t->client, b->container));
	ECW_ASSERT_OK(ecw_blob_container_delete(b->t->client, b->container));
	ECW_ASSERT_ERR(ecw_blob_container_delete(b->t->client, b->container), ECW_ENOCONTAINER);
	itest_assert_service_error(404, "ContainerNotFound");
	b->created = false;
}

static void test_blob_client__put_get_props_delete(void **state)
{
	struct bt *b = *state;
	const struct ecw_blob_meta meta[] = {{"Owner", "ecworker tests"}, {"run_id", "42"}, {"Empty", ""}};
	struct ecw_blob_put_options o = {.content_type = "application/json", .meta = meta, .n_meta = 3};
	struct ecw_blob_info *got = NULL, *props = NULL;
	time_t now = time(NULL);
	char *etag = put(b, "dir/one.json", "{\"a\":1}", &o);

	get_text(b, "dir/one.json", "{\"a\":1}", &got);
	assert_string_equal(got->name, "dir/one.json");
	assert_string_equal(got->etag, etag);
	assert_string_equal(got->content_type, "application/json");
	assert_int_equal(got->content_length, 7);
	/* Azurite runs on this machine: its clock is ours, give or take. */
	assert_true(got->last_modified >= now - 5 && got->last_modified <= now + 5);
	assert_true(got->service_date >= got->last_modified && got->service_date <= now + 5);
	assert_int_equal(got->n_meta, 3);
	assert_false(got->meta_partial);
	assert_string_equal(ecw_blob_info_meta(got, "owner"), "ecworker tests");
	assert_string_equal(ecw_blob_info_meta(got, "RUN_ID"), "42");
	assert_string_equal(ecw_blob_info_meta(got, "Empty"), "");
	assert_null(ecw_blob_info_meta(got, "missing"));

	ECW_ASSERT_OK(ecw_blob_props(&props, b->t->client, container(b), "dir/one.json"));
	assert_string_equal(props->etag, etag);
	assert_int_equal(props->content_length, 7);
	assert_int_equal(props->last_modified, got->last_modified);
	assert_true(props->service_date > 0);
	assert_int_equal(props->n_meta, 3);
	assert_string_equal(ecw_blob_info_meta(props, "Owner"), "ecworker tests");

	/* An empty blob, and the default content type. */
	free(put(b, "empty", "", NULL));
	get_text(b, "empty", "", NULL);

	ECW_ASSERT_OK(ecw_blob_delete(b->t->client, container(b), "dir/one.json", NULL));
	struct ecw_buf out;
	ecw_buf_init(&out, 0);
	ECW_ASSERT_ERR(ecw_blob_get(&out, NULL, b->t->client, container(b), "dir/one.json", 100),
	               ECW_EBLOBNOTFOUND);
	itest_assert_service_error(404, "BlobNotFound");
	assert_true(ecw_error_is_absent(ECW_EBLOBNOTFOUND));
	/* HEAD: no body, the code only in x-ms-error-code. */
	ecw_blob_info_free(props);
	props = NULL;
	ECW_ASSERT_ERR(ecw_blob_props(&props, b->t->client, container(b), "dir/one.json"), ECW_EBLOBNOTFOUND);
	assert_null(props);
	itest_assert_service_error(404, "BlobNotFound");
	ECW_ASSERT_ERR(ecw_blob_delete(b->t->client, container(b), "dir/one.json", NULL), ECW_EBLOBNOTFOUND);
	ecw_buf_dispose(&out);
	ecw_blob_info_free(got);
	free(etag);
}

static void test_blob_client__conditions(void **state)
{
	struct bt *b = *state;
	struct ecw_blob_put_options create_only = {.if_none_match = "*"};
	char *v1 = put(b, "cond", "one", &create_only), *v2, *v3;

	/* Create-only on a blob that exists: 409 BlobAlreadyExists. */
	ECW_ASSERT_ERR(ecw_blob_put(NULL, b->t->client, container(b), "cond", "x", 1, &create_only),
	               ECW_ECONFLICT);
	itest_assert_service_error(409, "BlobAlreadyExists");
	/* If-Match on the current ETag replaces it; on a stale one it is 412. */
	v2 = put(b, "cond", "two", &(struct ecw_blob_put_options){.if_match = v1});
	assert_string_not_equal(v1, v2);
	ECW_ASSERT_ERR(ecw_blob_put(NULL, b->t->client, container(b), "cond", "x", 1,
	                            &(struct ecw_blob_put_options){.if_match = v1}),
	               ECW_EPRECONDITION);
	itest_assert_service_error(412, "ConditionNotMet");
	/* If-None-Match on the current ETag: 412 too. */
	ECW_ASSERT_ERR(ecw_blob_put(NULL, b->t->client, container(b), "cond", "x", 1,
	                            &(struct ecw_blob_put_options){.if_none_match = v2}),
	               ECW_EPRECONDITION);
	itest_assert_service_error(412, "ConditionNotMet");
	v3 = put(b, "cond", "three", &(struct ecw_blob_put_options){.if_none_match = v1});
	get_text(b, "cond", "three", NULL);
	/* If-Match "*" on a blob that is not there. */
	ECW_ASSERT_ERR(ecw_blob_put(NULL, b->t->client, container(b), "nothing", "x", 1,
	                            &(struct ecw_blob_put_options){.if_match = "*"}),
	               ECW_EPRECONDITION);

	/* Deletes: a stale ETag is 412 and leaves it, the current one deletes. */
	ECW_ASSERT_ERR(ecw_blob_delete(b->t->client, container(b), "cond", v2), ECW_EPRECONDITION);
	itest_assert_service_error(412, "ConditionNotMet");
	get_text(b, "cond", "three", NULL);
	ECW_ASSERT_OK(ecw_blob_delete(b->t->client, container(b), "cond", v3));
	/* If-Match "*" on a blob that is gone: Azurite answers 412 (as for the
	 * put above), not 404; without a condition it is 404 BlobNotFound. */
	ECW_ASSERT_ERR(ecw_blob_delete(b->t->client, container(b), "cond", "*"), ECW_EPRECONDITION);
	ECW_ASSERT_ERR(ecw_blob_delete(b->t->client, container(b), "cond", NULL), ECW_EBLOBNOTFOUND);
	free(v1);
	free(v2);
	free(v3);
}

/* Every item of a listing (prefix, pages of max): names in order into
 * names (each strdup'd), the infos freed; returns how many. */
static size_t list_all(struct bt *b, const struct ecw_blob_list_options *o, char **names, size_t cap,
                       int *pages)
{
	struct ecw_blob_list *l = NULL;
	struct ecw_blob_info *it = NULL;
	size_t n = 0;

	ECW_ASSERT_OK(ecw_blob_list_new(&l, b->t->client, container(b), o));
	for (;;) {
		ECW_ASSERT_OK(ecw_blob_list_next(&it, l));
		if (!it)
			break;
		assert_true(n < cap);
		names[n++] = strdup(it->name);
		assert_true(it->etag[0] == '"');
		assert_true(it->last_modified > 0);
		assert_true(it->service_date >= it->last_modified);
		ecw_blob_info_free(it);
	}
	assert_string_equal(ecw_blob_list_marker(l), "");
	if (pages)
		*pages = ecw_blob_list_pages(l);
	ecw_blob_list_free(l);
	return n;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
}

static void test_blob_client__list_prefix_pages_and_marker(void **state)
{
	struct bt *b = *state;
	static const char *const inside[] = {"p/a", "p/b", "p/c/d", "p/e", "p/f", "p/g", "p/h"};
	char *names[16], text[16];
	int pages = 0;
	size_t n;

	for (size_t i = 0; i < sizeof(inside) / sizeof(inside[0]); i++) {
		snprintf(text, sizeof(text), "blob %zu", i);
		free(put(b, inside[i], text, NULL));
	}
	free(put(b, "o", "outside", NULL));
	free(put(b, "q/a", "outside", NULL));

	n = list_all(b, &(struct ecw_blob_list_options){.prefix = "p/", .max_results = 2}, names, 16, &pages);
	assert_int_equal(n, 7);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(names[i], inside[i]);
	assert_int_equal(pages, 4);
	free_names(names, n);
	/* Everything, one page. */
	n = list_all(b, NULL, names, 16, &pages);
	assert_int_equal(n, 9);
	assert_int_equal(pages, 1);
	free_names(names, n);

	/* One page of 3, then resumed from its marker in a new listing. */
	struct ecw_blob_list *l = NULL;
	struct ecw_blob_info *it = NULL, *props = NULL;
	ECW_ASSERT_OK(ecw_blob_list_new(&l, b->t->client, container(b),
	                                &(struct ecw_blob_list_options){.prefix = "p/", .max_results = 3}));
	for (int i = 0; i < 3; i++) {
		ECW_ASSERT_OK(ecw_blob_list_next(&it, l));
		assert_non_null(it);
		assert_string_equal(it->name, inside[i]);
		/* The listing's ETag (bare in the XML) reads as the headers' does. */
		ECW_ASSERT_OK(ecw_blob_props(&props, b->t->client, container(b), it->name));
		assert_string_equal(it->etag, props->etag);
		assert_int_equal(it->last_modified, props->last_modified);
		assert_int_equal(it->content_length, strlen("blob 0"));
		ecw_blob_info_free(props);
		ecw_blob_info_free(it);
	}
	assert_int_equal(ecw_blob_list_pages(l), 1);
	assert_true(ecw_blob_list_date(l) > 0);
	char *marker = strdup(ecw_blob_list_marker(l));
	assert_true(*marker);
	ecw_blob_list_free(l);
	n = list_all(b, &(struct ecw_blob_list_options){.prefix = "p/", .marker = marker}, names, 16, NULL);
	assert_int_equal(n, 4);
	assert_string_equal(names[0], "p/e");
	free_names(names, n);
	free(marker);

	/* A prefix nothing has: no items, one page. */
	n = list_all(b, &(struct ecw_blob_list_options){.prefix = "zzz"}, names, 16, &pages);
	assert_int_equal(n, 0);
	assert_int_equal(pages, 1);
}

static void test_blob_client__list_metadata(void **state)
{
	struct bt *b = *state;
	const struct ecw_blob_meta meta[] = {{"Kind", "report"}, {"Week", "2026-W33"}};
	struct ecw_blob_list *l = NULL;
	struct ecw_blob_info *it = NULL;

	free(put(b, "m", "with metadata", &(struct ecw_blob_put_options){.meta = meta, .n_meta = 2}));
	ECW_ASSERT_OK(ecw_blob_list_new(&l, b->t->client, container(b),
	                                &(struct ecw_blob_list_options){.metadata = true}));
	ECW_ASSERT_OK(ecw_blob_list_next(&it, l));
	assert_non_null(it);
	assert_int_equal(it->n_meta, 2);
	assert_string_equal(ecw_blob_info_meta(it, "kind"), "report");
	assert_string_equal(ecw_blob_info_meta(it, "week"), "2026-W33");
	assert_int_equal(it->content_length, 13);
	ecw_blob_info_free(it);
	ECW_ASSERT_OK(ecw_blob_list_next(&it, l));
	assert_null(it);
	ecw_blob_list_free(l);

	/* Without include=metadata, none. */
	ECW_ASSERT_OK(ecw_blob_list_new(&l, b->t->client, container(b), NULL));
	ECW_ASSERT_OK(ecw_blob_list_next(&it, l));
	assert_non_null(it);
	assert_int_equal(it->n_meta, 0);
	ecw_blob_info_free(it);
	ecw_blob_list_free(l);
}

/* n bytes of a pattern that does not repeat within a block, from pos of
 * the whole: a byte out of place shows. */
static char *pattern(size_t pos, size_t n)
{
	char *p = malloc(n ? n : 1);

	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (char)((pos + i) * 31 + (pos + i) / 251);
	return p;
}

/* The range [offset, offset + len) as ecw_blob_get_range reads it: want
 * (got bytes; NULL: none) and the blob's size total. */
static void assert_range(struct bt *b, const char *name, long long offset, size_t len, const char *if_match,
                         const char *want, size_t got, long long total)
{
	struct ecw_blob_info *info = NULL;
	struct ecw_buf out;

	ecw_buf_init(&out, 0);
	ECW_ASSERT_OK(
	    ecw_blob_get_range(&out, &info, b->t->client, container(b), name, offset, len, if_match));
	assert_int_equal(out.len, got);
	if (got)
		assert_memory_equal(out.ptr, want, got);
	assert_int_equal(info->content_length, (long long)got);
	assert_int_equal(info->total_length, total);
	assert_true(info->etag[0] == '"');
	ecw_blob_info_free(info);
	ecw_buf_dispose(&out);
}

/* Blocks put, then committed by a list into one blob that reads back byte
 * for byte; a block never listed is nowhere; a commit carries the content
 * type, the metadata and the conditions as a put does. */
static void test_blob_client__blocks_commit(void **state)
{
	struct bt *b = *state;
	struct ecw_client *c = b->t->client;
	static const size_t sizes[] = {1000, 70000, 3, 5000};
	const char *const ids[] = {"blk-0000", "blk-0001", "blk-0002", "blk-0003"};
	const struct ecw_blob_meta meta[] = {{"rows", "4"}, {"Window", "2026-08-19"}};
	char *whole = pattern(0, 76003), *stray = pattern(9, 100), *v1 = NULL, *v2 = NULL, *names[4];
	struct ecw_blob_info *info = NULL;
	struct ecw_buf out;
	size_t at = 0;

	ecw_buf_init(&out, 0);
	for (size_t i = 0; i < 4; i++) {
		ECW_ASSERT_OK(
		    ecw_blob_put_block(c, container(b), "log/day.jsonl", ids[i], whole + at, sizes[i]));
		at += sizes[i];
	}
	/* Put again under its id: the same block, a retry's harmless repeat. */
	ECW_ASSERT_OK(ecw_blob_put_block(c, container(b), "log/day.jsonl", ids[2], whole + 71000, 3));
	ECW_ASSERT_OK(ecw_blob_put_block(c, container(b), "log/day.jsonl", "blk-0009", stray, 100));
	/* An id of another length than the blob's uncommitted blocks': 400
	 * (Azurite compares it with one of them, the service with all). */
	ECW_ASSERT_ERR(ecw_blob_put_block(c, container(b), "log/day.jsonl", "blk-9", stray, 100),
	               ECW_EINVALID);
	itest_assert_service_error(400, "InvalidBlobOrBlock");
	/* Nothing committed: no blob to read, list or condition on (Azurite
	 * keeps an uncommitted placeholder, which none of them shows). */
	ECW_ASSERT_ERR(ecw_blob_get(&out, NULL, c, container(b), "log/day.jsonl", 1 << 20),
	               ECW_EBLOBNOTFOUND);
	ECW_ASSERT_ERR(ecw_blob_props(&info, c, container(b), "log/day.jsonl"), ECW_EBLOBNOTFOUND);
	assert_int_equal(list_all(b, NULL, names, 4, NULL), 0);

	struct ecw_blob_put_options o = {
	    .content_type = "application/x-ndjson", .meta = meta, .n_meta = 2, .if_none_match = "*"};
	ECW_ASSERT_OK(ecw_blob_put_block_list(&v1, c, container(b), "log/day.jsonl", ids, 4, &o));
	assert_non_null(v1);
	ECW_ASSERT_OK(ecw_blob_get(&out, &info, c, container(b), "log/day.jsonl", 1 << 20));
	assert_int_equal(out.len, 76003); /* the stray block is not in it */
	assert_memory_equal(out.ptr, whole, out.len);
	assert_string_equal(info->etag, v1);
	ecw_blob_info_free(info);
	ECW_ASSERT_OK(ecw_blob_props(&info, c, container(b), "log/day.jsonl"));
	assert_string_equal(info->content_type, "application/x-ndjson");
	assert_int_equal(info->content_length, 76003);
	assert_int_equal(info->total_length, 76003);
	assert_int_equal(info->n_meta, 2);
	assert_string_equal(ecw_blob_info_meta(info, "rows"), "4");
	assert_string_equal(ecw_blob_info_meta(info, "window"), "2026-08-19");
	ecw_blob_info_free(info);
	assert_int_equal(list_all(b, NULL, names, 4, NULL), 1);
	assert_string_equal(names[0], "log/day.jsonl");
	free_names(names, 1);

	/* Create-only on the blob that now exists: 409 BlobAlreadyExists. */
	ECW_ASSERT_ERR(ecw_blob_put_block_list(NULL, c, container(b), "log/day.jsonl", ids, 4, &o),
	               ECW_ECONFLICT);
	itest_assert_service_error(409, "BlobAlreadyExists");
	/* A commit drops the blocks it did not list: the stray one is gone. */
	ECW_ASSERT_ERR(ecw_blob_put_block_list(NULL, c, container(b), "log/day.jsonl",
	                                       (const char *const[]){"blk-0009"}, 1, NULL),
	               ECW_EINVALID);
	itest_assert_service_error(400, "InvalidBlockList");
	/* On the current ETag, a new list of the committed blocks (the last,
	 * then the first), with no metadata: the blob's whole metadata goes. */
	ECW_ASSERT_OK(ecw_blob_put_block_list(&v2, c, container(b), "log/day.jsonl",
	                                      (const char *const[]){ids[3], ids[0]}, 2,
	                                      &(struct ecw_blob_put_options){.if_match = v1}));
	assert_string_not_equal(v1, v2);
	ECW_ASSERT_OK(ecw_blob_get(&out, &info, c, container(b), "log/day.jsonl", 1 << 20));
	assert_int_equal(out.len, 6000);
	assert_memory_equal(out.ptr, whole + 71003, 5000);
	assert_memory_equal(out.ptr + 5000, whole, 1000);
	assert_string_equal(info->content_type, "application/octet-stream");
	assert_int_equal(info->n_meta, 0);
	ecw_blob_info_free(info);
	/* On a stale one: 412, the blob unchanged. */
	ECW_ASSERT_ERR(ecw_blob_put_block_list(NULL, c, container(b), "log/day.jsonl", ids, 1,
	                                       &(struct ecw_blob_put_options){.if_match = v1}),
	               ECW_EPRECONDITION);
	itest_assert_service_error(412, "ConditionNotMet");
	assert_range(b, "log/day.jsonl", 0, 10, v2, whole + 71003, 10, 6000);
	ecw_buf_dispose(&out);
	free(whole);
	free(stray);
	free(v1);
	free(v2);
}

/* A blob of a 4 MiB block and a small one, read by ranges: one of 4 MiB
 * (over the 1 MiB an answer may otherwise hold), across the blocks'
 * boundary, at the end, from the end and past it, and streamed in chunks
 * on its ETag. A range from the end is Azurite's 206 of no bytes
 * ("bytes N-(N-1)/N"), the service's 416; one past it is 416 on both
 * (Azurite's with a Content-Range "bytes * /N" this client does not need). */
static void test_blob_client__ranges(void **state)
{
	struct bt *b = *state;
	struct ecw_client *c = b->t->client;
	const size_t total = ECW_BLOB_BLOCK_MAX + 1000;
	char *whole = pattern(0, total), *etag = NULL;
	struct ecw_blob_info *info = NULL;
	struct ecw_buf out;
	long long at;

	ecw_buf_init(&out, 0);
	ECW_ASSERT_OK(ecw_blob_put_block(c, container(b), "big", "b0", whole, ECW_BLOB_BLOCK_MAX));
	ECW_ASSERT_OK(ecw_blob_put_block(c, container(b), "big", "b1", whole + ECW_BLOB_BLOCK_MAX, 1000));
	ECW_ASSERT_OK(ecw_blob_put_block_list(&etag, c, container(b), "big",
	                                      (const char *const[]){"b0", "b1"}, 2, NULL));
	assert_range(b, "big", 0, ECW_BLOB_BLOCK_MAX, NULL, whole, ECW_BLOB_BLOCK_MAX, (long long)total);
	assert_range(b, "big", ECW_BLOB_BLOCK_MAX - 10, 20, etag, whole + ECW_BLOB_BLOCK_MAX - 10, 20,
	             (long long)total);
	assert_range(b, "big", (long long)total - 5, 100, NULL, whole + total - 5, 5, (long long)total);
	assert_range(b, "big", (long long)total, 10, etag, NULL, 0, (long long)total);
	assert_range(b, "big", (long long)total + 10, 10, etag, NULL, 0, (long long)total);
	assert_range(b, "big", 1LL << 40, ECW_BLOB_BLOCK_MAX, NULL, NULL, 0, (long long)total);
	ECW_ASSERT_OK(ecw_blob_get_range(&out, NULL, c, container(b), "big", (long long)total + 1, 1, NULL));
	assert_int_equal(out.len, 0);

	/* Streamed in 1 MiB chunks on the first chunk's ETag. */
	for (at = 0;;) {
		ECW_ASSERT_OK(ecw_blob_get_range(&out, &info, c, container(b), "big", at, 1 << 20, etag));
		assert_true(out.len > 0);
		assert_memory_equal(out.ptr, whole + at, out.len);
		at += (long long)out.len;
		if (at >= info->total_length) {
			ecw_blob_info_free(info);
			break;
		}
		ecw_blob_info_free(info);
	}
	assert_int_equal(at, (long long)total);

	/* An If-Match that fails is 412, before the range is judged. */
	ECW_ASSERT_ERR(ecw_blob_get_range(&out, &info, c, container(b), "big", 0, 10, "\"0x8D000000000000\""),
	               ECW_EPRECONDITION);
	itest_assert_service_error(412, "ConditionNotMet");
	assert_null(info);
	assert_int_equal(out.len, 0);
	ECW_ASSERT_ERR(ecw_blob_get_range(&out, &info, c, container(b), "big", (long long)total + 10, 10,
	                                  "\"0x8D0000\""),
	               ECW_EPRECONDITION);
	ECW_ASSERT_ERR(ecw_blob_get_range(&out, &info, c, container(b), "absent", 0, 10, NULL),
	               ECW_EBLOBNOTFOUND);

	/* An empty blob (a list of no ids): every range is past its end.
	 * Azurite answers "bytes=0-0" with a 206 of "bytes 0--1/0", any other
	 * with 416; the service answers 416. */
	ECW_ASSERT_OK(ecw_blob_put_block_list(NULL, c, container(b), "empty", NULL, 0, NULL));
	get_text(b, "empty", "", NULL);
	assert_range(b, "empty", 0, 1, NULL, NULL, 0, 0);
	assert_range(b, "empty", 0, ECW_BLOB_BLOCK_MAX, NULL, NULL, 0, 0);
	assert_range(b, "empty", 7, 1, NULL, NULL, 0, 0);
	ecw_buf_dispose(&out);
	free(whole);
	free(etag);
}

static void test_blob_client__get_over_cap_is_too_large(void **state)
{
	struct bt *b = *state;
	size_t big_len = 200 * 1024;
	char *big = malloc(big_len);
	struct ecw_buf out;
	struct ecw_blob_info *info = NULL;

	assert_non_null(big);
	memset(big, 'b', big_len);
	ecw_buf_init(&out, 0);
	free(put(b, "ten", "0123456789", NULL));
	ECW_ASSERT_OK(ecw_blob_get(&out, NULL, b->t->client, container(b), "ten", 10));
	assert_int_equal(out.len, 10);
	ECW_ASSERT_ERR(ecw_blob_get(&out, &info, b->t->client, container(b), "ten", 9), ECW_ETOOLARGE);
	assert_int_equal(out.len, 0);
	assert_null(info);
	/* A small cap still tells a missing blob. */
	ECW_ASSERT_ERR(ecw_blob_get(&out, NULL, b->t->client, container(b), "absent", 1), ECW_EBLOBNOTFOUND);
	/* Past the least the answer may hold: refused by its Content-Length. */
	ECW_ASSERT_OK(ecw_blob_put(NULL, b->t->client, container(b), "big", big, big_len, NULL));
	ECW_ASSERT_ERR(ecw_blob_get(&out, NULL, b->t->client, container(b), "big", 100 * 1024),
	               ECW_ETOOLARGE);
	assert_int_equal(out.len, 0);
	ECW_ASSERT_OK(ecw_blob_get(&out, NULL, b->t->client, container(b), "big", big_len));
	assert_int_equal(out.len, big_len);
	assert_memory_equal(out.ptr, big, big_len);
	ecw_buf_dispose(&out);
	free(big);
}

static void test_blob_client__missing_container(void **state)
{
	struct bt *b = *state;
	struct ecw_client *c = b->t->client;
	struct ecw_blob_info *info = NULL;
	struct ecw_blob_list *l = NULL;
	struct ecw_buf out;

	ecw_buf_init(&out, 0);
	ECW_ASSERT_ERR(ecw_blob_put(NULL, c, b->container, "x", "x", 1, NULL), ECW_ENOCONTAINER);
	itest_assert_service_error(404, "ContainerNotFound");
	assert_true(ecw_error_is_absent(ECW_ENOCONTAINER));
	ECW_ASSERT_ERR(ecw_blob_get(&out, NULL, c, b->container, "x", 10), ECW_ENOCONTAINER);
	ECW_ASSERT_ERR(ecw_blob_props(&info, c, b->container, "x"), ECW_ENOCONTAINER);
	itest_assert_service_error(404, "ContainerNotFound");
	ECW_ASSERT_ERR(ecw_blob_delete(c, b->container, "x", NULL), ECW_ENOCONTAINER);
	ECW_ASSERT_ERR(ecw_blob_put_block(c, b->container, "x", "b0", "x", 1), ECW_ENOCONTAINER);
	ECW_ASSERT_ERR(ecw_blob_put_block_list(NULL, c, b->container, "x", NULL, 0, NULL), ECW_ENOCONTAINER);
	ECW_ASSERT_ERR(ecw_blob_get_range(&out, &info, c, b->container, "x", 0, 1, NULL), ECW_ENOCONTAINER);
	ECW_ASSERT_OK(ecw_blob_list_new(&l, c, b->container, NULL));
	ECW_ASSERT_ERR(ecw_blob_list_next(&info, l), ECW_ENOCONTAINER);
	itest_assert_service_error(404, "ContainerNotFound");
	assert_null(info);
	ecw_blob_list_free(l);
	ecw_buf_dispose(&out);
}

/* Names a URL must carry escaped, and the marks encodeURIComponent leaves
 * as they are: each through put, list, get and properties. */
static void test_blob_client__names_survive(void **state)
{
	struct bt *b = *state;
	static const char *const names[] = {"n/with space",
	                                    "n/ünïcødé/日本語/😀",
	                                    "n/100%",
	                                    "n/100%25",
	                                    "n/a+b",
	                                    "n/hash#tag",
	                                    "n/what?x=1&y=2",
	                                    "n/semi;colon=eq",
	                                    "n/quote'(paren)*!~",
	                                    "n/tab-less~tilde",
	                                    "n/dots.in.name",
	                                    "n/..x/y",
	                                    "n/comma,at@dollar$"};
	size_t count = sizeof(names) / sizeof(names[0]);
	char *listed[32];
	struct ecw_blob_info *info = NULL;
	size_t n;

	for (size_t i = 0; i < count; i++)
		free(put(b, names[i], names[i], NULL));
	n = list_all(b, &(struct ecw_blob_list_options){.prefix = "n/", .max_results = 4}, listed, 32, NULL);
	assert_int_equal(n, count);
	for (size_t i = 0; i < count; i++) {
		bool found = false;
		for (size_t j = 0; j < n; j++)
			found = found || strcmp(listed[j], names[i]) == 0;
		if (!found)
			fail_msg("'%s' was put but not listed", names[i]);
		get_text(b, names[i], names[i], NULL);
		ECW_ASSERT_OK(ecw_blob_props(&info, b->t->client, container(b), names[i]));
		assert_string_equal(info->name, names[i]);
		assert_int_equal(info->content_length, strlen(names[i]));
		ecw_blob_info_free(info);
	}
	/* A prefix with the same characters finds its blob. */
	n = list_all(b, &(struct ecw_blob_list_options){.prefix = "n/what?x=1&"}, listed + 16, 16, NULL);
	assert_int_equal(n, 1);
	free_names(listed + 16, n);
	free_names(listed, count);
}

static void test_blob_client__bad_names_refused_before_request(void **state)
{
	struct bt *b = *state;
	struct ecw_client_stats before = itest_stats(b->t->client);
	static const char *const bad[] = {"",         "/lead",       "a//b", "trail/",      "dot.",
	                                  "a/./b",    "a/../b",      "a./b", "back\\slash", "ctl\x01x",
	                                  "del\x7fx", "bad\xc3(utf8"};
	static const char *const bad_containers[] = {"ab", "Upper", "under_score", "-lead", "dou--ble", ""};
	char *long_name = malloc(ECW_BLOB_NAME_MAX + 2);
	struct ecw_buf out;

	ecw_buf_init(&out, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ECW_ASSERT_ERR(ecw_blob_put(NULL, b->t->client, b->container, bad[i], "x", 1, NULL),
		               ECW_EINVALID);
		ECW_ASSERT_ERR(ecw_blob_get(&out, NULL, b->t->client, b->container, bad[i], 10),
		               ECW_EINVALID);
		ECW_ASSERT_ERR(ecw_blob_delete(b->t->client, b->container, bad[i], NULL), ECW_EINVALID);
	}
	for (size_t i = 0; i < sizeof(bad_containers) / sizeof(bad_containers[0]); i++)
		ECW_ASSERT_ERR(ecw_blob_container_create(NULL, b->t->client, bad_containers[i]),
		               ECW_EINVALID);
	/* 1,024 characters are a name; 1,025 are not. */
	assert_non_null(long_name);
	memset(long_name, 'x', ECW_BLOB_NAME_MAX + 1);
	long_name[ECW_BLOB_NAME_MAX + 1] = '\0';
	ECW_ASSERT_ERR(ecw_blob_name_check(long_name), ECW_EINVALID);
	long_name[ECW_BLOB_NAME_MAX] = '\0';
	ECW_ASSERT_OK(ecw_blob_name_check(long_name));
	ECW_ASSERT_OK(ecw_blob_name_check("\xc3\xa9"));
	/* Metadata and conditions the client cannot send. */
	const struct ecw_blob_meta bad_meta[][1] = {{{"1st", "v"}},
	                                            {{"has-dash", "v"}},
	                                            {{"ok", " lead"}},
	                                            {{"ok", "two  spaces"}},
	                                            {{"ok", "caf\xc3\xa9"}}};
	for (size_t i = 0; i < sizeof(bad_meta) / sizeof(bad_meta[0]); i++)
		ECW_ASSERT_ERR(ecw_blob_put(NULL, b->t->client, b->container, "x", "x", 1,
		                            &(struct ecw_blob_put_options){.meta = bad_meta[i], .n_meta = 1}),
		               ECW_EINVALID);
	ECW_ASSERT_ERR(ecw_blob_put(NULL, b->t->client, b->container, "x", "x", 1,
	                            &(struct ecw_blob_put_options){.if_match = "a\r\nb"}),
	               ECW_EINVALID);
	assert_int_equal(itest_stats(b->t->client).requests, before.requests);
	ecw_buf_dispose(&out);
	free(long_name);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, bt_setup, bt_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_blob_client__container_create_idempotent),
	    T(test_blob_client__put_get_props_delete),
	    T(test_blob_client__conditions),
	    T(test_blob_client__list_prefix_pages_and_marker),
	    T(test_blob_client__list_metadata),
	    T(test_blob_client__blocks_commit),
	    T(test_blob_client__ranges),
	    T(test_blob_client__get_over_cap_is_too_large),
	    T(test_blob_client__missing_container),
	    T(test_blob_client__names_survive),
	    T(test_blob_client__bad_names_refused_before_request),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
