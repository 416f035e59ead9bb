/* SPDX-License-Identifier: MIT */
/* test_blob.c - the Blob client through the fake transport on
 * "UseDevelopmentStorage=true": the exact Shared Key string-to-sign of a Put
 * Blob with metadata and If-Match, of a List Blobs with prefix, marker and
 * include, and of a Delete Blob, each written out here from the documented
 * layout (Authorize with Shared Key: VERB, Content-Encoding,
 * Content-Language, Content-Length (empty when 0), Content-MD5,
 * Content-Type, Date, If-Modified-Since, If-Match, If-None-Match,
 * If-Unmodified-Since, Range, then the x-ms- headers lowercased and sorted,
 * then /account + the path as sent + each query parameter, decoded, sorted)
 * and checked against the Authorization the request carried; what a get's
 * headers and a listing's XML become; the answers' error classes; the
 * blob endpoints of connection strings. */
#include "support.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_codec.h"

#define RES "/devstoreaccount1/devstoreaccount1"
#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

static int fx_setup(void **state)
{
	struct client_fixture *fx;
	client_fixture_setup(&fx, "UseDevelopmentStorage=true", NULL);
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	client_fixture_teardown(*state);
	return 0;
}

/* The request's Authorization is the dev key's signature of want, in which
 * each "{date}" stands for the request's x-ms-date. */
static void assert_signed(const struct fake_request *q, const char *want)
{
	const char *date = fake_header(q, "x-ms-date"), *auth = fake_header(q, "Authorization");
	struct ecw_buf sts, key, expect;

	assert_non_null(date);
	assert_non_null(auth);
	ecw_buf_init(&sts, ECW_BUF_DEFAULT_MAX);
	ecw_buf_init(&key, ECW_BUF_DEFAULT_MAX);
	ecw_buf_init(&expect, ECW_BUF_DEFAULT_MAX);
	for (const char *p = want; *p;) {
		const char *at = strstr(p, "{date}");
		size_t n = at ? (size_t)(at - p) : strlen(p);
		assert_int_equal(ecw_buf_add(&sts, p, n), 0);
		p += n;
		if (at) {
			assert_int_equal(ecw_buf_adds(&sts, date), 0);
			p += strlen("{date}");
		}
	}
	assert_int_equal(ecw_base64_decode(&key, DEV_KEY, strlen(DEV_KEY)), 0);
	assert_int_equal(ecw_buf_adds(&expect, "SharedKey devstoreaccount1:"), 0);
	assert_int_equal(
	    ecw_auth_hmac_sha256_base64(&expect, (unsigned char *)key.ptr, key.len, sts.ptr, sts.len), 0);
	if (strcmp(auth, ecw_buf_cstr(&expect)) != 0)
		fail_msg("the request was not signed over\n%s\n(it carried %s)", ecw_buf_cstr(&sts), auth);
	ecw_buf_dispose(&sts);
	ecw_buf_dispose(&key);
	ecw_buf_dispose(&expect);
}

static void test_blob__put_string_to_sign(void **state)
{
	struct client_fixture *fx = *state;
	const struct ecw_blob_meta meta[] = {{"Owner", "ecw"}, {"run_id", "42"}};
	struct ecw_blob_put_options o = {
	    .content_type = "application/json", .if_match = "\"0x8D1\"", .meta = meta, .n_meta = 2};
	char *etag = NULL;

	fake_respond(&fx->fake, 201, "ETag: \"0x8D2\"\n", NULL);
	assert_int_equal(ecw_blob_put(&etag, fx->c, "reports", "2026/08/day 1.json", "{\"a\":1}", 7, &o), 0);
	assert_str(etag, "\"0x8D2\"");
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_str(q->method, "PUT");
	assert_str(q->url, "http://127.0.0.1:10000/devstoreaccount1/reports/2026/08/day%201.json");
	assert_str(fake_header(q, "x-ms-blob-type"), "BlockBlob");
	assert_str(fake_header(q, "x-ms-meta-Owner"), "ecw");
	assert_str(q->content_type, "application/json");
	assert_signed(q, "PUT\n"
	                 "\n"                 /* Content-Encoding */
	                 "\n"                 /* Content-Language */
	                 "7\n"                /* Content-Length */
	                 "\n"                 /* Content-MD5 */
	                 "application/json\n" /* Content-Type */
	                 "\n"                 /* Date */
	                 "\n"                 /* If-Modified-Since */
	                 "\"0x8D1\"\n"        /* If-Match */
	                 "\n"                 /* If-None-Match */
	                 "\n"                 /* If-Unmodified-Since */
	                 "\n"                 /* Range */
	                 "x-ms-blob-type:BlockBlob\n"
	                 "x-ms-date:{date}\n"
	                 "x-ms-meta-owner:ecw\n"
	                 "x-ms-meta-run_id:42\n"
	                 "x-ms-version:2021-12-02\n" RES "/reports/2026/08/day%201.json");
	free(etag);
}

/* An empty body is Content-Length "" in the string, and If-None-Match has
 * its own line. */
static void test_blob__put_empty_if_none_match_string_to_sign(void **state)
{
	struct client_fixture *fx = *state;

	fake_respond(&fx->fake, 201, "ETag: \"0x8D3\"\n", NULL);
	assert_int_equal(ecw_blob_put(NULL, fx->c, "reports", "empty", NULL, 0,
	                              &(struct ecw_blob_put_options){.if_none_match = "*"}),
	                 0);
	assert_signed(&fx->fake.reqs[0],
	              "PUT\n\n\n\n\napplication/octet-stream\n\n\n\n*\n\n\n"
	              "x-ms-blob-type:BlockBlob\nx-ms-date:{date}\nx-ms-version:2021-12-02\n" RES
	              "/reports/empty");
}

struct put_told {
	size_t order[4], n;
};

static void put_told(void *payload, size_t i)
{
	struct put_told *t = payload;

	t->order[t->n++] = i;
}

/* ecw_blob_put_many through the fake (which takes each alone): a put that
 * cannot be made is told first and never sent; the others go in their
 * order, each the request ecw_blob_put makes, signed alike, and a 409 among
 * them is its own item's conflict. */
static void test_blob__put_many_each_as_put(void **state)
{
	struct client_fixture *fx = *state;
	const struct ecw_blob_meta meta[] = {{"ecw_row_key", "r%201"}};
	const struct ecw_blob_put_options o = {
	    .content_type = "application/json", .if_none_match = "*", .meta = meta, .n_meta = 1};
	struct ecw_blob_put_item items[3] = {
	    {"p/1.json", "{\"a\":1}", 7, &o, 1},
	    {"p/../x", "{}", 2, &o, 1},
	    {"p/2.json", "{\"a\":22}", 8, &o, 1},
	};
	struct put_told t = {{0}, 0};

	fake_respond(&fx->fake, 201, "ETag: \"0x1\"\n", NULL);
	fake_respond(&fx->fake, 409, "x-ms-error-code: BlobAlreadyExists\n", NULL);
	ecw_blob_put_many(fx->c, "archive", items, 3, put_told, &t);
	assert_int_equal(t.n, 3);
	assert_int_equal(t.order[0], 1);
	assert_int_equal(items[1].err, ECW_EINVALID);
	assert_int_equal(t.order[1], 0);
	assert_int_equal(items[0].err, 0);
	assert_int_equal(t.order[2], 2);
	assert_int_equal(items[2].err, ECW_ECONFLICT);
	assert_int_equal(fx->fake.nreqs, 2);
	const struct fake_request *q = &fx->fake.reqs[1];
	assert_str(q->url, "http://127.0.0.1:10000/devstoreaccount1/archive/p/2.json");
	assert_str(q->body, "{\"a\":22}");
	assert_signed(q, "PUT\n\n\n8\n\napplication/json\n\n\n\n*\n\n\n"
	                 "x-ms-blob-type:BlockBlob\nx-ms-date:{date}\nx-ms-meta-ecw_row_key:r%201\n"
	                 "x-ms-version:2021-12-02\n" RES "/archive/p/2.json");
}

#define EMPTY_LIST                                                                                           \
	"<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults><Blobs/><NextMarker/></EnumerationResults>"

static void test_blob__list_string_to_sign(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_blob_list *l = NULL;
	struct ecw_blob_info *it = NULL;

	fake_respond(&fx->fake, 200, "Date: Wed, 19 Aug 2026 10:00:00 GMT\n", EMPTY_LIST);
	assert_int_equal(
	    ecw_blob_list_new(
	        &l, fx->c, "reports",
	        &(struct ecw_blob_list_options){
	            .prefix = "2026/08/", .marker = "2!96!MDAw+/=", .max_results = 2, .metadata = true}),
	    0);
	assert_int_equal(fx->fake.nreqs, 0); /* nothing until the first next */
	assert_int_equal(ecw_blob_list_next(&it, l), 0);
	assert_null(it);
	assert_int_equal(ecw_blob_list_date(l), 1787133600);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_str(q->method, "GET");
	assert_str(q->path, "/devstoreaccount1/reports");
	assert_true(url_has_param(q->url, "restype=container"));
	assert_true(url_has_param(q->url, "comp=list"));
	assert_true(url_has_param(q->url, "prefix=2026%2F08%2F"));
	assert_true(url_has_param(q->url, "marker=2!96!MDAw%2B%2F%3D"));
	assert_true(url_has_param(q->url, "maxresults=2"));
	assert_true(url_has_param(q->url, "include=metadata"));
	assert_int_equal(url_nparams(q->url), 6);
	assert_signed(q, "GET\n\n\n\n\n\n\n\n\n\n\n\n"
	                 "x-ms-date:{date}\nx-ms-version:2021-12-02\n" RES "/reports\n"
	                 "comp:list\ninclude:metadata\nmarker:2!96!MDAw+/=\nmaxresults:2\nprefix:2026/08/\n"
	                 "restype:container");
	ecw_blob_list_free(l);
}

static void test_blob__delete_string_to_sign(void **state)
{
	struct client_fixture *fx = *state;

	fake_respond(&fx->fake, 202, NULL, NULL);
	assert_int_equal(ecw_blob_delete(fx->c, "reports", "2026/08/day 1.json", "\"0x8D2\""), 0);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_str(q->method, "DELETE");
	assert_str(fake_header(q, "x-ms-delete-snapshots"), "include");
	assert_signed(q, "DELETE\n\n\n\n\n\n\n\n\"0x8D2\"\n\n\n\n"
	                 "x-ms-date:{date}\nx-ms-delete-snapshots:include\nx-ms-version:2021-12-02\n" RES
	                 "/reports/2026/08/day%201.json");
}

/* A get's headers become its info; the body is the caller's, whole or not
 * at all. */
static void test_blob__get_headers_and_cap(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_blob_info *info = NULL;
	struct ecw_buf out;
	static const char headers[] = "ETag: \"0x8DB\"\n"
	                              "Last-Modified: Wed, 19 Aug 2026 09:59:00 GMT\n"
	                              "Date: Wed, 19 Aug 2026 10:00:00 GMT\n"
	                              "Content-Length: 10\n"
	                              "Content-Type: text/plain\n"
	                              "x-ms-meta-Kind: report\n"
	                              "x-ms-meta-bad: caf\xc3\xa9\n"
	                              "x-ms-request-id: r1\n";

	ecw_buf_init(&out, 0);
	fake_respond(&fx->fake, 200, headers, "0123456789");
	assert_int_equal(ecw_blob_get(&out, &info, fx->c, "c-1", "a/b", 10), 0);
	assert_int_equal(out.len, 10);
	assert_str(info->name, "a/b");
	assert_str(info->etag, "\"0x8DB\"");
	assert_int_equal(info->last_modified, 1787133540);
	assert_int_equal(info->service_date, 1787133600);
	assert_int_equal(info->content_length, 10);
	assert_str(info->content_type, "text/plain");
	assert_int_equal(info->n_meta, 1);
	assert_str(ecw_blob_info_meta(info, "kind"), "report");
	assert_true(info->meta_partial); /* the value that is not ASCII */
	ecw_blob_info_free(info);

	fake_respond(&fx->fake, 200, headers, "0123456789");
	assert_int_equal(ecw_blob_get(&out, &info, fx->c, "c-1", "a/b", 9), ECW_ETOOLARGE);
	assert_int_equal(out.len, 0);
	assert_null(info);
	ecw_buf_dispose(&out);
}

/* A block id is base64'd, then percent-encoded in the URL ('+', '/' and
 * '='), and signed decoded. */
static void test_blob__put_block_url(void **state)
{
	struct client_fixture *fx = *state;

	fake_respond(&fx->fake, 201, NULL, NULL);
	assert_int_equal(ecw_blob_put_block(fx->c, "reports", "log/part 1", "?????~~", "12345", 5), 0);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_str(q->method, "PUT");
	assert_str(q->url, "http://127.0.0.1:10000/devstoreaccount1/reports/log/part%201"
	                   "?comp=block&blockid=Pz8%2FPz9%2Bfg%3D%3D");
	assert_str(q->content_type, "application/octet-stream");
	assert_int_equal(q->body_len, 5);
	assert_str(q->body, "12345");
	assert_null(fake_header(q, "x-ms-blob-type"));
	assert_signed(q, "PUT\n\n\n5\n\napplication/octet-stream\n\n\n\n\n\n\n"
	                 "x-ms-date:{date}\nx-ms-version:2021-12-02\n" RES "/reports/log/part%201\n"
	                 "blockid:Pz8/Pz9+fg==\ncomp:block");
}

/* The list is the ids in order, each base64'd (so "<a&b/>1" is no markup);
 * the blob's type, metadata and conditions ride on the commit. */
static void test_blob__put_block_list_body(void **state)
{
	struct client_fixture *fx = *state;
	const char *const ids[] = {"?????~~", "0000001", "<a&b/>1"};
	const struct ecw_blob_meta meta[] = {{"rows", "3"}};
	char *etag = NULL;

	fake_respond(&fx->fake, 201, "ETag: \"0x8E1\"\n", NULL);
	assert_int_equal(
	    ecw_blob_put_block_list(&etag, fx->c, "reports", "log/a.jsonl", ids, 3,
	                            &(struct ecw_blob_put_options){.content_type = "application/x-ndjson",
	                                                           .if_match = "\"0x8E0\"",
	                                                           .meta = meta,
	                                                           .n_meta = 1}),
	    0);
	assert_str(etag, "\"0x8E1\"");
	free(etag);
	const struct fake_request *q = &fx->fake.reqs[0];
	static const char body[] = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>"
	                           "<Latest>Pz8/Pz9+fg==</Latest><Latest>MDAwMDAwMQ==</Latest>"
	                           "<Latest>PGEmYi8+MQ==</Latest></BlockList>";
	assert_str(q->url, "http://127.0.0.1:10000/devstoreaccount1/reports/log/a.jsonl?comp=blocklist");
	assert_str(q->body, body);
	assert_int_equal(q->body_len, strlen(body));
	assert_str(q->content_type, "application/xml");
	assert_null(fake_header(q, "x-ms-blob-type"));
	assert_signed(q, "PUT\n\n\n148\n\napplication/xml\n\n\n\"0x8E0\"\n\n\n\n"
	                 "x-ms-blob-content-type:application/x-ndjson\nx-ms-date:{date}\nx-ms-meta-rows:3\n"
	                 "x-ms-version:2021-12-02\n" RES "/reports/log/a.jsonl\ncomp:blocklist");

	/* No ids: an empty blob, of the default type; If-None-Match too. */
	fake_respond(&fx->fake, 201, "ETag: \"0x8E2\"\n", NULL);
	assert_int_equal(ecw_blob_put_block_list(NULL, fx->c, "reports", "empty", NULL, 0,
	                                         &(struct ecw_blob_put_options){.if_none_match = "*"}),
	                 0);
	q = &fx->fake.reqs[1];
	assert_str(q->body, "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList></BlockList>");
	assert_str(fake_header(q, "x-ms-blob-content-type"), "application/octet-stream");
	assert_str(fake_header(q, "If-None-Match"), "*");
	assert_null(fake_header(q, "If-Match"));
}

/* The range goes as x-ms-range (a canonicalized header, the Range line
 * left empty); the answer's cap follows the range, not the blob; the
 * Content-Range gives the blob's size. */
static void test_blob__get_range_header(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_blob_info *info = NULL;
	struct ecw_buf out;

	ecw_buf_init(&out, 0);
	fake_respond(&fx->fake, 206,
	             "ETag: \"0x8DB\"\nContent-Length: 4\nContent-Range: bytes 4-7/10\n"
	             "Content-Type: text/plain\nx-ms-meta-Kind: log\n",
	             "4567");
	assert_int_equal(ecw_blob_get_range(&out, &info, fx->c, "c-1", "a/b", 4, 4, "\"0x8DB\""), 0);
	assert_int_equal(out.len, 4);
	assert_memory_equal(out.ptr, "4567", 4);
	assert_int_equal(info->content_length, 4);
	assert_int_equal(info->total_length, 10);
	assert_str(info->etag, "\"0x8DB\"");
	assert_str(ecw_blob_info_meta(info, "kind"), "log");
	ecw_blob_info_free(info);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_str(q->method, "GET");
	assert_str(q->url, "http://127.0.0.1:10000/devstoreaccount1/c-1/a/b");
	assert_str(fake_header(q, "x-ms-range"), "bytes=4-7");
	assert_null(fake_header(q, "Range"));
	assert_int_equal(q->answer_max, 64 * 1024); /* room for an error's answer */
	assert_signed(q, "GET\n\n\n\n\n\n\n\n\"0x8DB\"\n\n\n\n"
	                 "x-ms-date:{date}\nx-ms-range:bytes=4-7\nx-ms-version:2021-12-02\n" RES "/c-1/a/b");

	/* A 4 MiB chunk of a far larger blob: the cap is the chunk's. */
	fake_respond(&fx->fake, 206, "ETag: \"0x8DB\"\nContent-Range: bytes 8388608-8388609/9000000\n", "ab");
	assert_int_equal(
	    ecw_blob_get_range(&out, &info, fx->c, "c-1", "a/b", 8388608, ECW_BLOB_BLOCK_MAX, NULL), 0);
	q = &fx->fake.reqs[1];
	assert_str(fake_header(q, "x-ms-range"), "bytes=8388608-12582911");
	assert_int_equal(q->answer_max, ECW_BLOB_BLOCK_MAX);
	assert_null(fake_header(q, "If-Match"));
	assert_int_equal(info->content_length, 2);
	assert_int_equal(info->total_length, 9000000);
	ecw_blob_info_free(info);

	/* An answer that is not the range asked for is no chunk of the blob. */
	fake_respond(&fx->fake, 206, "ETag: \"0x8DB\"\nContent-Range: bytes 0-3/10\n", "0123");
	assert_int_equal(ecw_blob_get_range(&out, &info, fx->c, "c-1", "a/b", 4, 4, NULL), ECW_ERROR);
	assert_int_equal(out.len, 0);
	assert_null(info);
	fake_respond(&fx->fake, 206, "ETag: \"0x8DB\"\nContent-Range: bytes 3-7/10\n", "4567");
	assert_int_equal(ecw_blob_get_range(&out, &info, fx->c, "c-1", "a/b", 4, 4, NULL), ECW_ERROR);
	fake_respond(&fx->fake, 200, "ETag: \"0x8DB\"\n", "0123");
	assert_int_equal(ecw_blob_get_range(&out, &info, fx->c, "c-1", "a/b", 0, 4, NULL), ECW_ERROR);
	assert_true(str_contains(ecw_error_last()->message, "no Content-Range"));
	ecw_buf_dispose(&out);
}

/* A range at or past the end: the service's 416 is 0 with out empty, and
 * the properties read apart (with the If-Match) when they are asked for;
 * Azurite's 206 of no bytes for a range starting at the end is the same. */
static void test_blob__get_range_past_end(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_blob_info *info = NULL;
	struct ecw_buf out;
	static const char invalid_range[] = "Content-Type: application/xml\nx-ms-error-code: InvalidRange\n";

	ecw_buf_init(&out, 0);
	assert_int_equal(ecw_buf_adds(&out, "old"), 0);
	fake_respond(&fx->fake, 416, invalid_range,
	             "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>InvalidRange</Code>"
	             "<Message>The range specified is invalid for the current size of the "
	             "resource.</Message></Error>");
	fake_respond(&fx->fake, 200, "ETag: \"0x8DB\"\nContent-Length: 10\nx-ms-meta-Kind: log\n", NULL);
	assert_int_equal(ecw_blob_get_range(&out, &info, fx->c, "c-1", "a/b", 10, 4, "\"0x8DB\""), 0);
	assert_int_equal(out.len, 0);
	assert_int_equal(info->content_length, 0);
	assert_int_equal(info->total_length, 10);
	assert_str(ecw_blob_info_meta(info, "kind"), "log");
	assert_int_equal(ecw_error_last()->code, ECW_OK);
	ecw_blob_info_free(info);
	assert_int_equal(fx->fake.nreqs, 2);
	assert_str(fx->fake.reqs[1].method, "HEAD");
	assert_str(fake_header(&fx->fake.reqs[1], "If-Match"), "\"0x8DB\"");
	assert_null(fake_header(&fx->fake.reqs[1], "x-ms-range"));

	/* Without info_out, one request. */
	fake_respond(&fx->fake, 416, invalid_range, NULL);
	assert_int_equal(ecw_blob_get_range(&out, NULL, fx->c, "c-1", "a/b", 10, 4, NULL), 0);
	assert_int_equal(out.len, 0);
	assert_int_equal(fx->fake.nreqs, 3);

	/* Azurite: a range from the end is a 206 of "bytes 10-9/10". */
	fake_respond(&fx->fake, 206, "ETag: \"0x8DB\"\nContent-Length: 0\nContent-Range: bytes 10-9/10\n",
	             NULL);
	assert_int_equal(ecw_blob_get_range(&out, &info, fx->c, "c-1", "a/b", 10, 4, NULL), 0);
	assert_int_equal(out.len, 0);
	assert_int_equal(info->total_length, 10);
	ecw_blob_info_free(info);
	/* ... but no bytes for a range inside the blob are an error. */
	fake_respond(&fx->fake, 206, "ETag: \"0x8DB\"\nContent-Range: bytes 10-9/12\n", NULL);
	assert_int_equal(ecw_blob_get_range(&out, &info, fx->c, "c-1", "a/b", 10, 4, NULL), ECW_ERROR);

	/* If-Match that fails, and any other error, stays one. */
	fake_respond(&fx->fake, 412, "x-ms-error-code: ConditionNotMet\n", NULL);
	assert_int_equal(ecw_blob_get_range(&out, &info, fx->c, "c-1", "a/b", 0, 4, "\"0x8DA\""),
	                 ECW_EPRECONDITION);
	assert_null(info);
	fake_respond(&fx->fake, 404, "x-ms-error-code: BlobNotFound\n", NULL);
	assert_int_equal(ecw_blob_get_range(&out, &info, fx->c, "c-1", "a/b", 0, 4, NULL), ECW_EBLOBNOTFOUND);
	ecw_buf_dispose(&out);
}

/* Bad input is ECW_EINVALID before any request. */
static void test_blob__block_input_refused(void **state)
{
	struct client_fixture *fx = *state;
	const char *const mixed[] = {"000001", "000002", "00003"}, *const with_null[] = {"000001", NULL};
	char id49[ECW_BLOB_BLOCK_ID_MAX + 2];
	struct ecw_buf out;
	const struct {
		const char *id;
		size_t len;
	} blocks[] = {{"", 1},          {id49, 1},
	              {"tab\there", 1}, {"caf\xc3\xa9", 1},
	              {"ok", 0},        {"ok", ECW_BLOB_BLOCK_MAX + 1}};

	memset(id49, 'x', sizeof(id49) - 1);
	id49[sizeof(id49) - 1] = '\0';
	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++)
		assert_int_equal(ecw_blob_put_block(fx->c, "c-1", "b", blocks[i].id, "x", blocks[i].len),
		                 ECW_EINVALID);
	id49[ECW_BLOB_BLOCK_ID_MAX] = '\0'; /* 48 bytes: the most */
	fake_respond(&fx->fake, 201, NULL, NULL);
	assert_int_equal(ecw_blob_put_block(fx->c, "c-1", "b", id49, "x", 1), 0);
	assert_int_equal(fx->fake.nreqs, 1);
	assert_int_equal(ecw_blob_put_block(fx->c, "c-1", "b", NULL, "x", 1), ECW_EINVALID);
	assert_int_equal(ecw_blob_put_block(fx->c, "c-1", "b", "ok", NULL, 1), ECW_EINVALID);
	assert_int_equal(ecw_blob_put_block(fx->c, "c-1", "b/../c", "ok", "x", 1), ECW_EINVALID);

	assert_int_equal(ecw_blob_put_block_list(NULL, fx->c, "c-1", "b", mixed, 3, NULL), ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "block id 3 is 5 bytes, the first 6"));
	assert_int_equal(ecw_blob_put_block_list(NULL, fx->c, "c-1", "b", with_null, 2, NULL), ECW_EINVALID);
	assert_int_equal(
	    ecw_blob_put_block_list(NULL, fx->c, "c-1", "b", mixed, ECW_BLOB_BLOCKS_MAX + 1, NULL),
	    ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "at most 50000"));
	assert_int_equal(ecw_blob_put_block_list(NULL, fx->c, "c-1", "b", NULL, 1, NULL), ECW_EINVALID);
	assert_int_equal(ecw_blob_put_block_list(NULL, fx->c, "c-1", "b", mixed, 2,
	                                         &(struct ecw_blob_put_options){.if_match = "a\nb"}),
	                 ECW_EINVALID);

	ecw_buf_init(&out, 0);
	assert_int_equal(ecw_blob_get_range(&out, NULL, fx->c, "c-1", "b", 0, 0, NULL), ECW_EINVALID);
	assert_int_equal(ecw_blob_get_range(&out, NULL, fx->c, "c-1", "b", -1, 4, NULL), ECW_EINVALID);
	assert_int_equal(ecw_blob_get_range(&out, NULL, fx->c, "c-1", "b", LLONG_MAX, 2, NULL), ECW_EINVALID);
	assert_int_equal(ecw_blob_get_range(&out, NULL, fx->c, "c-1", "b", 0, 4, "x\r\ny"), ECW_EINVALID);
	ecw_buf_dispose(&out);
	assert_int_equal(fx->fake.nreqs, 1);
}

static void test_blob__errors_classified(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_blob_info *info = NULL;

	assert_int_equal(ecw_status_to_err(404, "BlobNotFound"), ECW_EBLOBNOTFOUND);
	assert_int_equal(ecw_status_to_err(404, "ContainerNotFound"), ECW_ENOCONTAINER);
	assert_int_equal(ecw_status_to_err(404, "ResourceNotFound"), ECW_ENOTFOUND);
	assert_int_equal(ecw_status_to_err(412, "ConditionNotMet"), ECW_EPRECONDITION);
	assert_int_equal(ecw_status_to_err(409, "BlobAlreadyExists"), ECW_ECONFLICT);
	assert_str(ecw_error_name(ECW_EBLOBNOTFOUND), "ECW_EBLOBNOTFOUND");
	assert_str(ecw_error_name(ECW_ENOCONTAINER), "ECW_ENOCONTAINER");
	assert_true(ecw_error_is_absent(ECW_EBLOBNOTFOUND) && ecw_error_is_absent(ECW_ENOCONTAINER));
	/* A HEAD's error has only the header. */
	fake_respond(&fx->fake, 404, "x-ms-error-code: ContainerNotFound\nx-ms-request-id: r2\n", NULL);
	assert_int_equal(ecw_blob_props(&info, fx->c, "c-1", "x"), ECW_ENOCONTAINER);
	assert_str(ecw_error_last()->service_code, "ContainerNotFound");
	assert_true(str_contains(ecw_error_last()->message, "HEAD /devstoreaccount1/c-1/x: 404"));
	/* 409 ContainerAlreadyExists is a create's success; being deleted is not. */
	fake_respond(&fx->fake, 409, "x-ms-error-code: ContainerAlreadyExists\n", NULL);
	bool created = true;
	assert_int_equal(ecw_blob_container_create(&created, fx->c, "c-1"), 0);
	assert_false(created);
	fake_respond(&fx->fake, 409, "x-ms-error-code: ContainerBeingDeleted\n", NULL);
	assert_int_equal(ecw_blob_container_create(&created, fx->c, "c-1"), ECW_ECONFLICT);
	/* A 503 is retried as for any request. */
	fake_respond(&fx->fake, 503, "x-ms-error-code: ServerBusy\n", NULL);
	fake_respond(&fx->fake, 202, NULL, NULL);
	assert_int_equal(ecw_blob_delete(fx->c, "c-1", "x", NULL), 0);
	assert_int_equal(fx->fake.nreqs, 5);
}

static void test_blob__list_xml(void **state)
{
	(void)state;
	static const char xml[] =
	    "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"utf-8\"?>"
	    "<EnumerationResults ServiceEndpoint=\"https://a.blob.core.windows.net/\" ContainerName=\"c\">"
	    "<Prefix>p/</Prefix><MaxResults>3</MaxResults><Blobs>"
	    "<Blob><Name>p/a &amp; b</Name><Properties><Creation-Time>Wed, 19 Aug 2026 09:00:00 GMT</Creation-Time>"
	    "<Last-Modified>Wed, 19 Aug 2026 09:59:00 GMT</Last-Modified><Etag>0x8DB</Etag>"
	    "<Content-Length>12</Content-Length><Content-Type>text/plain</Content-Type>"
	    "<BlobType>BlockBlob</BlobType></Properties>"
	    "<Metadata><Kind>report</Kind><Week>2026-W33</Week></Metadata></Blob>"
	    "<BlobPrefix><Name>p/dir/</Name></BlobPrefix>"
	    "<Blob><Name Encoded=\"true\">p/%EF%BF%BFx</Name><Properties><Etag>\"0x8DC\"</Etag>"
	    "<Content-Length>0</Content-Length></Properties></Blob>"
	    "</Blobs><NextMarker>2!80!bWFya2Vy</NextMarker></EnumerationResults>";
	struct ecw_xml_blob_page page;

	assert_int_equal(ecw_xml_parse_blob_list(&page, xml, strlen(xml)), 0);
	assert_int_equal(page.n, 2);
	assert_str(page.items[0]->name, "p/a & b");
	assert_str(page.items[0]->etag, "\"0x8DB\"");
	assert_int_equal(page.items[0]->last_modified, 1787133540);
	assert_int_equal(page.items[0]->content_length, 12);
	assert_str(page.items[0]->content_type, "text/plain");
	assert_int_equal(page.items[0]->n_meta, 2);
	assert_str(ecw_blob_info_meta(page.items[0], "week"), "2026-W33");
	assert_str(page.items[1]->name, "p/\xEF\xBF\xBFx");
	assert_str(page.items[1]->etag, "\"0x8DC\"");
	assert_str(page.next_marker, "2!80!bWFya2Vy");
	ecw_xml_blob_page_dispose(&page);

	/* The last page: no marker. */
	assert_int_equal(ecw_xml_parse_blob_list(&page, EMPTY_LIST, strlen(EMPTY_LIST)), 0);
	assert_int_equal(page.n, 0);
	assert_str(page.next_marker, "");
	ecw_xml_blob_page_dispose(&page);

	static const char *const bad[] = {
	    "<EnumerationResults><Blobs><Blob><Properties/></Blob></Blobs></EnumerationResults>",
	    "<EnumerationResults><Blobs><Blob><Name>a</Name><Properties><Content-Length>x</Content-Length>"
	    "</Properties></Blob></Blobs></EnumerationResults>",
	    "<EnumerationResults><Blobs><Blob><Name Encoded=\"true\">a%4</Name></Blob></Blobs></EnumerationResults>",
	    "<!DOCTYPE x [<!ENTITY e \"e\">]><EnumerationResults/>",
	    "<QueueMessagesList/>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(ecw_xml_parse_blob_list(&page, bad[i], strlen(bad[i])), ECW_ERROR);
		assert_int_equal(page.n, 0);
		assert_null(page.items);
	}
}

static void test_blob__endpoints(void **state)
{
	(void)state;
	struct ecw_account *a = NULL;

	assert_int_equal(ecw_account_parse(&a, "UseDevelopmentStorage=true"), 0);
	assert_str(ecw_account_endpoint(a, ECW_SVC_BLOB), "http://127.0.0.1:10000/devstoreaccount1");
	assert_str(a->endpoint_path[ECW_SVC_BLOB], "/devstoreaccount1");
	ecw_account_free(a);
	assert_int_equal(ecw_account_parse(&a, "AccountName=acct;AccountKey=" DEV_KEY
	                                       ";EndpointSuffix=core.chinacloudapi.cn"),
	                 0);
	assert_str(ecw_account_endpoint(a, ECW_SVC_BLOB), "https://acct.blob.core.chinacloudapi.cn");
	ecw_account_free(a);
	assert_int_equal(ecw_account_parse(&a, "AccountName=acct;AccountKey=" DEV_KEY
	                                       ";BlobEndpoint=https://10.0.0.5:10000/acct/"),
	                 0);
	assert_str(ecw_account_endpoint(a, ECW_SVC_BLOB), "https://10.0.0.5:10000/acct");
	assert_str(a->endpoint_path[ECW_SVC_BLOB], "/acct");
	ecw_account_free(a);
	/* Endpoints and a SAS without AccountName: no blob endpoint, and a
	 * blob call says so before any request. */
	assert_int_equal(
	    ecw_account_parse(&a, "QueueEndpoint=https://q.example.com;TableEndpoint=https://t.example.com;"
	                          "SharedAccessSignature=sv=1&sig=x"),
	    0);
	assert_null(ecw_account_endpoint(a, ECW_SVC_BLOB));
	struct ecw_client *c = NULL;
	assert_int_equal(ecw_client_new(&c, a, NULL), 0);
	assert_int_equal(ecw_blob_container_create(NULL, c, "c-1"), ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "neither BlobEndpoint nor AccountName"));
	ecw_client_free(c);
	ecw_account_free(a);
	/* A derived blob endpoint over http off loopback is left out (the
	 * loopback queue and table endpoints still work); an explicit one is
	 * refused, as the others are. */
	assert_int_equal(
	    ecw_account_parse(&a, "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=" DEV_KEY
	                          ";QueueEndpoint=http://127.0.0.1:1/a;TableEndpoint=http://127.0.0.1:2/a"),
	    0);
	assert_null(ecw_account_endpoint(a, ECW_SVC_BLOB));
	assert_str(a->blob_none, "the blob endpoint derived from AccountName is http:// (give BlobEndpoint)");
	ecw_account_free(a);
	a = NULL;
	assert_int_equal(
	    ecw_account_parse(&a, "AccountName=acct;AccountKey=" DEV_KEY ";BlobEndpoint=http://10.0.0.5/a"),
	    ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "BlobEndpoint http://10.0.0.5/a is http://"));
	assert_null(a);
	/* UseDevelopmentStorage takes no endpoint of its own. */
	assert_int_equal(
	    ecw_account_parse(&a, "UseDevelopmentStorage=true;BlobEndpoint=http://127.0.0.1:1/a"),
	    ECW_EINVALID);
	/* A SAS names the blob service with ss=b. */
	assert_int_equal(
	    ecw_account_parse(&a, "AccountName=acct;SharedAccessSignature=ss=bq&srt=sco&sp=rwc&sig=x"), 0);
	assert_true(ecw_account_may_create(a, ECW_SVC_BLOB));
	assert_false(ecw_account_may_create(a, ECW_SVC_TABLE));
	ecw_account_free(a);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_blob__put_string_to_sign),      T(test_blob__put_empty_if_none_match_string_to_sign),
	    T(test_blob__put_many_each_as_put),    T(test_blob__list_string_to_sign),
	    T(test_blob__delete_string_to_sign),   T(test_blob__get_headers_and_cap),
	    T(test_blob__errors_classified),       T(test_blob__put_block_url),
	    T(test_blob__put_block_list_body),     T(test_blob__get_range_header),
	    T(test_blob__get_range_past_end),      T(test_blob__block_input_refused),
	    cmocka_unit_test(test_blob__list_xml), cmocka_unit_test(test_blob__endpoints),
	};
	return cmocka_run_group_tests_name("blob", tests, NULL, NULL);
}
