/* SPDX-License-Identifier: MIT */
/* test_batch.c - entity group transactions: the service rules checked before
 * any request, the multipart body (framing checked line by line, CRLF only),
 * the multipart response with boundaries taken from its Content-Type headers,
 * and a whole submit through the fake transport. */
#include "support.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TABLE_URL "http://127.0.0.1:10002/devstoreaccount1/jobs"
#define ETAG "W/\"datetime'2026-08-19T10%3A00%3A00.1234567Z'\""

static struct ecw_entity *entity(const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	assert_int_equal(ecw_entity_new(&e, pk, rk), 0);
	return e;
}

static struct ecw_batch *new_batch(void)
{
	struct ecw_batch *b = NULL;
	assert_int_equal(ecw_batch_new(&b, "jobs"), 0);
	assert_non_null(b);
	assert_int_equal(ecw_batch_count(b), 0);
	return b;
}

static void add(struct ecw_batch *b, enum ecw_batch_op op, const char *pk, const char *rk,
                const char *if_match)
{
	struct ecw_entity *e = entity(pk, rk);
	assert_int_equal(ecw_entity_set_int32(e, "n", 1), 0);
	int err = ecw_batch_add(b, op, e, if_match);
	if (err != 0)
		fail_msg("ecw_batch_add(%s) = %s: %s", rk, ecw_error_name(err), ecw_error_last()->message);
	ecw_entity_free(e);
}

/* ---- ecw_batch_add ----------------------------------------------------------- */

static void test_batch__new_checks_table_name(void **state)
{
	(void)state;
	struct ecw_batch *b = NULL;
	assert_int_equal(ecw_batch_new(&b, "bad-name"), ECW_EINVALID);
	assert_null(b);
	ecw_batch_free(NULL);
}

static void test_batch__refuses_101st_operation(void **state)
{
	(void)state;
	struct ecw_batch *b = new_batch();
	char rk[16];
	for (int i = 0; i < ECW_BATCH_MAX_OPS; i++) {
		snprintf(rk, sizeof(rk), "r%03d", i);
		add(b, ECW_BATCH_INSERT, "p", rk, NULL);
	}
	assert_int_equal(ecw_batch_count(b), 100);
	struct ecw_entity *e = entity("p", "r100");
	int err = ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL);
	if (err != ECW_EINVALID && err != ECW_ETOOLARGE)
		fail_msg("101st operation: got %d, want ECW_EINVALID or ECW_ETOOLARGE", err);
	assert_int_equal(ecw_batch_count(b), 100);
	ecw_entity_free(e);
	ecw_batch_free(b);
}

static void test_batch__refuses_second_partition(void **state)
{
	(void)state;
	struct ecw_batch *b = new_batch();
	add(b, ECW_BATCH_INSERT, "p", "r1", NULL);
	struct ecw_entity *e = entity("q", "r2");
	assert_int_equal(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL), ECW_EINVALID);
	assert_int_equal(ecw_batch_count(b), 1);
	/* Keys compare exactly: "P" is another partition. */
	assert_int_equal(ecw_entity_set_keys(e, "P", "r2"), 0);
	assert_int_equal(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL), ECW_EINVALID);
	assert_int_equal(ecw_batch_count(b), 1);
	ecw_entity_free(e);
	ecw_batch_free(b);
}

static void test_batch__refuses_duplicate_row(void **state)
{
	(void)state;
	struct ecw_batch *b = new_batch();
	add(b, ECW_BATCH_INSERT, "p", "r1", NULL);
	add(b, ECW_BATCH_INSERT, "p", "R1", NULL);
	struct ecw_entity *e = entity("p", "r1");
	assert_int_equal(ecw_batch_add(b, ECW_BATCH_DELETE, e, "*"), ECW_EINVALID);
	assert_int_equal(ecw_batch_add(b, ECW_BATCH_INSERT_OR_MERGE, e, NULL), ECW_EINVALID);
	assert_int_equal(ecw_batch_count(b), 2);
	ecw_entity_free(e);
	ecw_batch_free(b);
}

static void test_batch__conditional_ops_need_if_match(void **state)
{
	(void)state;
	struct ecw_batch *b = new_batch();
	struct ecw_entity *e = entity("p", "r1");
	assert_int_equal(ecw_batch_add(b, ECW_BATCH_UPDATE, e, NULL), ECW_EINVALID);
	assert_int_equal(ecw_batch_add(b, ECW_BATCH_MERGE, e, NULL), ECW_EINVALID);
	assert_int_equal(ecw_batch_add(b, ECW_BATCH_DELETE, e, NULL), ECW_EINVALID);
	assert_int_equal(ecw_batch_count(b), 0);
	assert_int_equal(ecw_batch_add(b, ECW_BATCH_DELETE, e, "*"), 0);
	assert_int_equal(ecw_batch_count(b), 1);
	ecw_entity_free(e);
	ecw_batch_free(b);
}

static void test_batch__add_copies_entity(void **state)
{
	(void)state;
	struct ecw_batch *b = new_batch();
	struct ecw_entity *e = entity("p", "r1");
	assert_int_equal(ecw_entity_set_string(e, "s", "before", 6), 0);
	assert_int_equal(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL), 0);
	/* Changing or freeing the caller's entity does not change the batch. */
	assert_int_equal(ecw_entity_set_string(e, "s", "after", 5), 0);
	ecw_entity_free(e);
	struct ecw_buf body;
	ecw_buf_init(&body, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_batch_build_body(&body, b, TABLE_URL, "b1", "c1"), 0);
	assert_true(str_contains(ecw_buf_cstr(&body), "before"));
	assert_false(str_contains(ecw_buf_cstr(&body), "after"));
	ecw_buf_dispose(&body);
	ecw_batch_free(b);
}

/* A borrowed entity is the batch's operation as it stands when the body is
 * built, and stays the caller's to free (ASan would see a double free). The
 * same checks as for a copy apply to it. */
static void test_batch__add_borrowed_keeps_entity(void **state)
{
	(void)state;
	struct ecw_batch *b = new_batch();
	struct ecw_entity *e = entity("p", "r1"), *d = entity("p", "r2"), *other = entity("q", "r3");
	struct ecw_buf body;

	assert_int_equal(ecw_entity_set_string(e, "s", "before", 6), 0);
	assert_int_equal(ecw_batch_add_borrowed(b, ECW_BATCH_INSERT, e, NULL), 0);
	assert_int_equal(ecw_batch_add_borrowed(b, ECW_BATCH_DELETE, d, "W/\"x\""), 0);
	assert_int_equal(ecw_batch_add_borrowed(b, ECW_BATCH_INSERT, other, NULL), ECW_EINVALID);
	assert_int_equal(ecw_batch_add_borrowed(b, ECW_BATCH_DELETE, e, NULL), ECW_EINVALID);
	assert_int_equal(ecw_batch_count(b), 2);
	assert_int_equal(ecw_entity_set_string(e, "s", "after", 5), 0);
	ecw_buf_init(&body, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_batch_build_body(&body, b, TABLE_URL, "b1", "c1"), 0);
	assert_true(str_contains(ecw_buf_cstr(&body), "after"));
	assert_true(str_contains(ecw_buf_cstr(&body), "DELETE " TABLE_URL "(PartitionKey='p',RowKey='r2')"));
	ecw_buf_dispose(&body);
	ecw_batch_free(b);
	ecw_entity_free(e);
	ecw_entity_free(d);
	ecw_entity_free(other);
}

/* ---- ecw_batch_build_body -------------------------------------------------- */

/* Reads one CRLF-terminated line at *p into a fresh string; fails on a bare
 * CR or LF inside it or when no CRLF follows. */
static char *line(const char **p)
{
	const char *s = *p;
	const char *end = strstr(s, "\r\n");
	if (!end)
		fail_msg("no CRLF after \"%.60s\"", s);
	for (const char *q = s; q < end; q++)
		if (*q == '\n' || *q == '\r')
			fail_msg("bare CR or LF in \"%.*s\"", (int)(end - s), s);
	char *out = strndup(s, (size_t)(end - s));
	assert_non_null(out);
	*p = end + 2;
	return out;
}

static void expect_line(const char **p, const char *want)
{
	char *got = line(p);
	if (strcmp(got, want) != 0)
		fail_msg("line \"%s\", want \"%s\"", got, want);
	free(got);
}

struct part {
	char *request_line;
	char *headers[16];
	size_t nheaders;
	char *body; /* NULL when the sub-request has none */
};

static const char *part_header(const struct part *pt, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < pt->nheaders; i++)
		if (strncasecmp(pt->headers[i], name, n) == 0 && pt->headers[i][n] == ':') {
			const char *v = pt->headers[i] + n + 1;
			while (*v == ' ')
				v++;
			return v;
		}
	return NULL;
}

static void part_free(struct part *pt)
{
	free(pt->request_line);
	for (size_t i = 0; i < pt->nheaders; i++)
		free(pt->headers[i]);
	free(pt->body);
}

/* Reads one changeset part: its MIME headers, the sub-request line, headers and body. */
static void read_part(const char **p, const char *cs_boundary, struct part *pt)
{
	memset(pt, 0, sizeof(*pt));
	expect_line(p, cs_boundary);
	bool saw_type = false, saw_cte = false;
	for (;;) {
		char *h = line(p);
		if (!*h) {
			free(h);
			break;
		}
		if (strcmp(h, "Content-Type: application/http") == 0)
			saw_type = true;
		else if (strcmp(h, "Content-Transfer-Encoding: binary") == 0)
			saw_cte = true;
		else if (strncasecmp(h, "Content-ID:", 11) != 0)
			fail_msg("unexpected MIME header \"%s\"", h);
		free(h);
	}
	assert_true(saw_type);
	assert_true(saw_cte);
	pt->request_line = line(p);
	for (;;) {
		char *h = line(p);
		if (!*h) {
			free(h);
			break;
		}
		assert_true(pt->nheaders < 16);
		pt->headers[pt->nheaders++] = h;
	}
	/* Body: one line, unless the next thing is the next boundary (bodyless). */
	if (strncmp(*p, "--", 2) != 0 && strncmp(*p, "\r\n", 2) != 0)
		pt->body = line(p);
	/* Tolerate blank lines before the next boundary. */
	while (strncmp(*p, "\r\n", 2) == 0)
		*p += 2;
}

static void check_body_entity(const struct part *pt, const char *rk, const struct ecw_entity *want)
{
	assert_non_null(pt->body);
	assert_true(strlen(pt->body) > 2);
	struct ecw_entity *got = NULL;
	if (ecw_entity_from_json(&got, pt->body, strlen(pt->body)) != 0)
		fail_msg("sub-request body is not an entity: %s", pt->body);
	assert_str(ecw_entity_rk(got), rk);
	if (want)
		assert_true(ecw_entity_equal(got, want));
	ecw_entity_free(got);
	const char *ct = part_header(pt, "Content-Type");
	assert_non_null(ct);
	assert_true(str_starts(ct, "application/json"));
}

static void check_common_headers(const struct part *pt)
{
	const char *accept = part_header(pt, "Accept");
	assert_non_null(accept);
	assert_true(str_starts(accept, "application/json"));
	assert_str(part_header(pt, "DataServiceVersion"), "3.0;");
	assert_null(part_header(pt, "x-ms-version"));
	assert_null(part_header(pt, "x-ms-date"));
	assert_null(part_header(pt, "Authorization"));
}

static void test_batch__body_layout(void **state)
{
	(void)state;
	struct ecw_batch *b = new_batch();
	struct ecw_entity *e0 = entity("p", "r0");
	assert_int_equal(ecw_entity_set_int32(e0, "n", 1), 0);
	assert_int_equal(ecw_entity_set_string(e0, "s", "two words\nand a line", 20), 0);
	assert_int_equal(ecw_entity_set_double(e0, "d", 50000.0), 0);
	assert_int_equal(ecw_batch_add(b, ECW_BATCH_INSERT, e0, NULL), 0);
	add(b, ECW_BATCH_INSERT_OR_REPLACE, "p", "o'brien 001", NULL);
	add(b, ECW_BATCH_INSERT_OR_MERGE, "p", "r2", NULL);
	add(b, ECW_BATCH_UPDATE, "p", "r3", ETAG);
	add(b, ECW_BATCH_MERGE, "p", "r4", "*");
	add(b, ECW_BATCH_DELETE, "p", "r5", ETAG);
	assert_int_equal(ecw_batch_count(b), 6);

	struct ecw_buf body;
	ecw_buf_init(&body, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_batch_build_body(&body, b, TABLE_URL, "b-1f2e", "c-3d4c"), 0);
	assert_int_equal(strlen(ecw_buf_cstr(&body)), body.len);
	const char *p = ecw_buf_cstr(&body);

	expect_line(&p, "--batch_b-1f2e");
	expect_line(&p, "Content-Type: multipart/mixed; boundary=changeset_c-3d4c");
	expect_line(&p, "");

	struct part pt[6];
	for (int i = 0; i < 6; i++)
		read_part(&p, "--changeset_c-3d4c", &pt[i]);

	assert_string_equal(pt[0].request_line, "POST " TABLE_URL " HTTP/1.1");
	assert_null(part_header(&pt[0], "If-Match"));
	check_body_entity(&pt[0], "r0", e0);

	assert_string_equal(pt[1].request_line,
	                    "PUT " TABLE_URL "(PartitionKey='p',RowKey='o''brien%20001') HTTP/1.1");
	assert_null(part_header(&pt[1], "If-Match"));
	check_body_entity(&pt[1], "o'brien 001", NULL);

	assert_string_equal(pt[2].request_line, "MERGE " TABLE_URL "(PartitionKey='p',RowKey='r2') HTTP/1.1");
	assert_null(part_header(&pt[2], "If-Match"));
	check_body_entity(&pt[2], "r2", NULL);

	assert_string_equal(pt[3].request_line, "PUT " TABLE_URL "(PartitionKey='p',RowKey='r3') HTTP/1.1");
	assert_str(part_header(&pt[3], "If-Match"), ETAG);
	check_body_entity(&pt[3], "r3", NULL);

	assert_string_equal(pt[4].request_line, "MERGE " TABLE_URL "(PartitionKey='p',RowKey='r4') HTTP/1.1");
	assert_str(part_header(&pt[4], "If-Match"), "*");
	check_body_entity(&pt[4], "r4", NULL);

	assert_string_equal(pt[5].request_line,
	                    "DELETE " TABLE_URL "(PartitionKey='p',RowKey='r5') HTTP/1.1");
	assert_str(part_header(&pt[5], "If-Match"), ETAG);
	assert_null(pt[5].body);

	for (int i = 0; i < 6; i++) {
		check_common_headers(&pt[i]);
		part_free(&pt[i]);
	}
	expect_line(&p, "--changeset_c-3d4c--");
	if (strcmp(p, "--batch_b-1f2e--") != 0 && strcmp(p, "--batch_b-1f2e--\r\n") != 0)
		fail_msg("batch does not end with its closing boundary: \"%s\"", p);

	ecw_buf_dispose(&body);
	ecw_entity_free(e0);
	ecw_batch_free(b);
}

/* ---- ecw_batch_parse_response ---------------------------------------------- */

#define RESP_CT "multipart/mixed; boundary=batchresponse_4c637ba4-b2e8-40f9-936c-27c3f5f5b6b1"
#define RESP_B "--batchresponse_4c637ba4-b2e8-40f9-936c-27c3f5f5b6b1"
#define RESP_CS_NAME "changesetresponse_5ed2e6d2-1fb3-4ea7-9a2c-c1f5b1e9c8a4"
#define RESP_CS "--" RESP_CS_NAME
#define RESP_CS_TYPE "Content-Type: multipart/mixed; boundary=" RESP_CS_NAME "\r\n"
#define PART_HEAD RESP_CS "\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"

/* clang-format off */
static const char success_body[] =
	RESP_B "\r\n"
	RESP_CS_TYPE
	"\r\n"
	PART_HEAD
	"HTTP/1.1 201 Created\r\n"
	"Content-ID: 1\r\n"
	"Content-Type: application/json;odata=minimalmetadata;streaming=true;charset=utf-8\r\n"
	"Cache-Control: no-cache\r\n"
	"ETag: W/\"datetime'2026-08-19T10%3A00%3A00.0000001Z'\"\r\n"
	"Location: http://127.0.0.1:10002/devstoreaccount1/jobs(PartitionKey='p',RowKey='r0')\r\n"
	"DataServiceVersion: 3.0;\r\n"
	"\r\n"
	"{\"odata.metadata\":\"x\",\"PartitionKey\":\"p\",\"RowKey\":\"r0\",\"n\":1}\r\n"
	PART_HEAD
	"HTTP/1.1 204 No Content\r\n"
	"Content-ID: 2\r\n"
	"X-Content-Type-Options: nosniff\r\n"
	"Cache-Control: no-cache\r\n"
	"Preference-Applied: return-no-content\r\n"
	"DataServiceVersion: 3.0;\r\n"
	"ETag: W/\"datetime'2026-08-19T10%3A00%3A00.0000002Z'\"\r\n"
	"\r\n"
	"\r\n"
	PART_HEAD
	"HTTP/1.1 204 No Content\r\n"
	"X-Content-Type-Options: nosniff\r\n"
	"Cache-Control: no-cache\r\n"
	"DataServiceVersion: 1.0;\r\n"
	"\r\n"
	"\r\n"
	RESP_CS "--\r\n"
	RESP_B "--\r\n";
/* clang-format on */

static struct ecw_batch *three_op_batch(void)
{
	struct ecw_batch *b = new_batch();
	add(b, ECW_BATCH_INSERT, "p", "r0", NULL);
	add(b, ECW_BATCH_UPDATE, "p", "r1", ETAG);
	add(b, ECW_BATCH_DELETE, "p", "r2", "*");
	return b;
}

static void test_batch__parse_success(void **state)
{
	(void)state;
	struct ecw_batch *b = three_op_batch();
	assert_int_equal(ecw_batch_parse_response(b, RESP_CT, success_body, strlen(success_body)), 0);
	assert_int_equal(ecw_batch_failed_index(b), -1);
	assert_int_equal(ecw_batch_status(b, 0), 201);
	assert_int_equal(ecw_batch_status(b, 1), 204);
	assert_int_equal(ecw_batch_status(b, 2), 204);
	assert_str(ecw_batch_etag(b, 0), "W/\"datetime'2026-08-19T10%3A00%3A00.0000001Z'\"");
	assert_str(ecw_batch_etag(b, 1), "W/\"datetime'2026-08-19T10%3A00%3A00.0000002Z'\"");
	assert_null(ecw_batch_etag(b, 2));
	ecw_batch_free(b);
}

static void test_batch__parse_boundaries_from_headers(void **state)
{
	(void)state;
	/* Boundaries unlike the request's, as Azure picks new GUIDs; the shape
	 * Azurite answers with (no Content-ID). */
	/* clang-format off */
	static const char body[] =
		"--batchresponse_0b5d2a8f-aaaa-4bbb-8ccc-123456789abc\r\n"
		"Content-Type: multipart/mixed; "
		"boundary=changesetresponse_9e9e9e9e-dddd-4eee-8fff-abcdefabcdef\r\n"
		"\r\n"
		"--changesetresponse_9e9e9e9e-dddd-4eee-8fff-abcdefabcdef\r\n"
		"Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
		"HTTP/1.1 204 No Content\r\nETag: W/\"a\"\r\n\r\n\r\n"
		"--changesetresponse_9e9e9e9e-dddd-4eee-8fff-abcdefabcdef\r\n"
		"Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
		"HTTP/1.1 204 No Content\r\nETag: W/\"b\"\r\n\r\n\r\n"
		"--changesetresponse_9e9e9e9e-dddd-4eee-8fff-abcdefabcdef\r\n"
		"Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
		"HTTP/1.1 204 No Content\r\n\r\n\r\n"
		"--changesetresponse_9e9e9e9e-dddd-4eee-8fff-abcdefabcdef--\r\n"
		"--batchresponse_0b5d2a8f-aaaa-4bbb-8ccc-123456789abc--\r\n";
	/* clang-format on */
	struct ecw_batch *b = three_op_batch();
	assert_int_equal(ecw_batch_parse_response(
	                     b,
	                     "multipart/mixed; boundary=batchresponse_0b5d2a8f-aaaa-4bbb-8ccc-123456789abc",
	                     body, strlen(body)),
	                 0);
	assert_int_equal(ecw_batch_status(b, 0), 204);
	assert_int_equal(ecw_batch_status(b, 2), 204);
	assert_str(ecw_batch_etag(b, 0), "W/\"a\"");
	assert_str(ecw_batch_etag(b, 1), "W/\"b\"");
	ecw_batch_free(b);

	/* The Content-Type names a boundary the body does not use: an error, not success. */
	b = three_op_batch();
	int err =
	    ecw_batch_parse_response(b, "multipart/mixed; boundary=batchresponse_nope", body, strlen(body));
	assert_true(err < 0);
	ecw_batch_free(b);
}

static void test_batch__parse_wrong_count(void **state)
{
	(void)state;
	/* Three operations sent, two answers received: not a success. */
	/* clang-format off */
	static const char body[] =
		RESP_B "\r\n"
		RESP_CS_TYPE "\r\n"
		PART_HEAD "HTTP/1.1 204 No Content\r\nETag: W/\"a\"\r\n\r\n\r\n"
		PART_HEAD "HTTP/1.1 204 No Content\r\nETag: W/\"b\"\r\n\r\n\r\n"
		RESP_CS "--\r\n" RESP_B "--\r\n";
	/* clang-format on */
	struct ecw_batch *b = three_op_batch();
	assert_true(ecw_batch_parse_response(b, RESP_CT, body, strlen(body)) < 0);
	ecw_batch_free(b);
}

static char *failure_body(const char *status_line, const char *code, const char *message)
{
	struct ecw_buf b;
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	/* clang-format off */
	assert_int_equal(ecw_buf_printf(&b,
		RESP_B "\r\n"
		RESP_CS_TYPE
		"\r\n"
		PART_HEAD
		"%s\r\n"
		"X-Content-Type-Options: nosniff\r\n"
		"DataServiceVersion: 3.0;\r\n"
		"Content-Type: application/json;odata=minimalmetadata;streaming=true;charset=utf-8\r\n"
		"\r\n"
		"{\"odata.error\":{\"code\":\"%s\",\"message\":{\"lang\":\"en-US\",\"value\":\"%s\"}}}\r\n"
		RESP_CS "--\r\n"
		RESP_B "--\r\n", status_line, code, message), 0);
	/* clang-format on */
	return ecw_buf_take(&b);
}

static struct ecw_batch *big_batch(int n)
{
	struct ecw_batch *b = new_batch();
	char rk[16];
	for (int i = 0; i < n; i++) {
		snprintf(rk, sizeof(rk), "r%03d", i);
		add(b, ECW_BATCH_INSERT_OR_REPLACE, "p", rk, NULL);
	}
	return b;
}

static void parse_failure(int nops, const char *status_line, const char *code, const char *message,
                          int want_err, int want_status, int want_index)
{
	char *body = failure_body(status_line, code, message);
	struct ecw_batch *b = big_batch(nops);
	ecw_error_clear();
	int err = ecw_batch_parse_response(b, RESP_CT, body, strlen(body));
	if (err != want_err)
		fail_msg("%s: got %s, want %s", status_line, ecw_error_name(err), ecw_error_name(want_err));
	assert_int_equal(ecw_batch_failed_index(b), want_index);
	const struct ecw_error *e = ecw_error_last();
	assert_int_equal(e->code, want_err);
	assert_int_equal(e->http_status, want_status);
	assert_string_equal(e->service_code, code);
	ecw_batch_free(b);
	free(body);
}

static void test_batch__parse_failure_index(void **state)
{
	(void)state;
	parse_failure(
	    40, "HTTP/1.1 404 Not Found", "ResourceNotFound",
	    "37:The specified resource does not exist.\\nRequestId:abc\\nTime:2026-08-19T10:00:00.0000000Z",
	    ECW_ENOTFOUND, 404, 37);
	parse_failure(3, "HTTP/1.1 409 Conflict", "EntityAlreadyExists",
	              "0:The specified entity already exists.", ECW_ECONFLICT, 409, 0);
	parse_failure(3, "HTTP/1.1 412 Precondition Failed", "UpdateConditionNotSatisfied",
	              "2:The update condition specified in the request was not satisfied.", ECW_EPRECONDITION,
	              412, 2);
	parse_failure(100, "HTTP/1.1 400 Bad Request", "InvalidInput",
	              "99:Bad Request - Error in query syntax.", ECW_EINVALID, 400, 99);
}

/* A batch on a missing table fails as one on a missing entity does, but with
 * the class of a missing table. */
static void test_batch__parse_failure_table_not_found(void **state)
{
	(void)state;
	parse_failure(3, "HTTP/1.1 404 Not Found", "TableNotFound", "0:The table specified does not exist.",
	              ECW_ENOTABLE, 404, 0);
	parse_failure(1, "HTTP/1.1 404 Not Found", "TableNotFound", "The table specified does not exist.",
	              ECW_ENOTABLE, 404, 0);
}

static void test_batch__parse_failure_without_index(void **state)
{
	(void)state;
	parse_failure(3, "HTTP/1.1 400 Bad Request", "InvalidInput", "Bad Request - Error in query syntax.",
	              ECW_EINVALID, 400, -1);
	/* An index that names no operation of this batch is not believed. */
	parse_failure(3, "HTTP/1.1 404 Not Found", "ResourceNotFound",
	              "7:The specified resource does not exist.", ECW_ENOTFOUND, 404, -1);
}

/* Parses body from a heap block of exactly its length (no NUL after it), so
 * that under make asan a read past the end is a report. */
static int parse_exact(struct ecw_batch *b, const char *ct, const char *body)
{
	size_t n = strlen(body);
	char *copy = malloc(n);
	assert_non_null(copy);
	memcpy(copy, body, n);
	int err = ecw_batch_parse_response(b, ct, copy, n);
	free(copy);
	return err;
}

/* Found by fuzz_batch_response: the parser read past the body's end where
 * it ends in a changeset's Content-Type header (the boundary was measured
 * with strcspn), in a delimiter line without a newline (the "--" check), or
 * in a status line (sscanf). The body is a span, not a C string. */
static void test_batch__parse_reads_only_the_body(void **state)
{
	(void)state;
	struct ecw_batch *b = new_batch();
	add(b, ECW_BATCH_INSERT, "p", "r0", NULL);
	assert_int_equal(parse_exact(b, "multipart/mixed; boundary=b1",
	                             "--b1\r\nContent-Type: multipart/mixed; boundary=cs1"),
	                 ECW_ERROR);
	/* A delimiter at the very end, then a status line at the very end. */
	assert_int_equal(parse_exact(b, "multipart/mixed; boundary=b1", "--b1\r\n\r\nHTTP/1.1 204\r\n--b1"),
	                 0);
	assert_int_equal(ecw_batch_status(b, 0), 204);
	assert_int_equal(parse_exact(b, "multipart/mixed; boundary=b1", "--b1\r\n\r\nHTTP/1.1 204\n--b1\n"),
	                 0);
	assert_int_equal(parse_exact(b, "multipart/mixed; boundary=b1", "--b1\r\n\r\nHTTP/1.1 204"),
	                 ECW_ERROR);
	/* The status is three digits, nothing else. */
	assert_int_equal(parse_exact(b, "multipart/mixed; boundary=b1", "--b1\r\n\r\nHTTP/1.1  20\r\n--b1--"),
	                 ECW_ERROR);
	assert_int_equal(parse_exact(b, "multipart/mixed; boundary=b1", "--b1\r\n\r\nHTTP/1.1 -20\r\n--b1--"),
	                 ECW_ERROR);
	ecw_batch_free(b);
}

/* ---- submit through the fake transport ----------------------------------- */

static void test_batch__submit(void **state)
{
	(void)state;
	struct client_fixture *fx;
	client_fixture_setup(&fx, "UseDevelopmentStorage=true", NULL);
	fake_respond(&fx->fake, 202, "Content-Type: " RESP_CT "\nx-ms-request-id: batch-req-1\n",
	             success_body);
	struct ecw_batch *b = three_op_batch();
	int err = ecw_batch_submit(fx->c, b);
	if (err != 0)
		fail_msg("submit: %s: %s", ecw_error_name(err), ecw_error_last()->message);
	assert_int_equal(ecw_batch_status(b, 0), 201);
	assert_str(ecw_batch_etag(b, 1), "W/\"datetime'2026-08-19T10%3A00%3A00.0000002Z'\"");
	assert_int_equal(ecw_batch_failed_index(b), -1);

	assert_int_equal(fx->fake.nreqs, 1);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_string_equal(q->method, "POST");
	assert_string_equal(q->path, "/devstoreaccount1/$batch");
	assert_non_null(q->content_type);
	assert_true(str_starts(q->content_type, "multipart/mixed; boundary=batch_"));
	assert_true(q->auth_ok);
	/* The body opens with the boundary the Content-Type announces. */
	const char *boundary = q->content_type + strlen("multipart/mixed; boundary=");
	/* batch_ and a random UUID's 8-4-4-4-12 lowercase hex digits. */
	const char *id = boundary + strlen("batch_");
	assert_int_equal(strlen(id), 36);
	for (int i = 0; i < 36; i++)
		if (i == 8 || i == 13 || i == 18 || i == 23 ? id[i] != '-'
		                                            : !id[i] || !strchr("0123456789abcdef", id[i]))
			fail_msg("boundary %s is not batch_ and a UUID", boundary);
	assert_non_null(q->body);
	assert_true(q->body_len > 2 && q->body[0] == '-' && q->body[1] == '-');
	assert_true(str_starts(q->body + 2, boundary));
	assert_true(str_contains(q->body, "\r\nPOST " TABLE_URL " HTTP/1.1\r\n"));
	assert_true(
	    str_contains(q->body, "\r\nDELETE " TABLE_URL "(PartitionKey='p',RowKey='r2') HTTP/1.1\r\n"));
	ecw_batch_free(b);
	client_fixture_teardown(fx);
}

static void test_batch__submit_failure(void **state)
{
	(void)state;
	struct client_fixture *fx;
	client_fixture_setup(&fx, "UseDevelopmentStorage=true", NULL);
	char *body = failure_body("HTTP/1.1 404 Not Found", "ResourceNotFound",
	                          "1:The specified resource does not exist.");
	fake_respond(&fx->fake, 202, "Content-Type: " RESP_CT "\nx-ms-request-id: batch-req-2\n", body);
	struct ecw_batch *b = three_op_batch();
	assert_int_equal(ecw_batch_submit(fx->c, b), ECW_ENOTFOUND);
	assert_int_equal(ecw_batch_failed_index(b), 1);
	assert_string_equal(ecw_error_last()->service_code, "ResourceNotFound");
	assert_int_equal(ecw_error_last()->http_status, 404);
	/* The request id is the batch request's: the one the service can trace. */
	assert_string_equal(ecw_error_last()->request_id, "batch-req-2");
	/* A failed operation is not retried: the batch was answered. */
	assert_int_equal(fx->fake.nreqs, 1);
	ecw_batch_free(b);
	free(body);
	client_fixture_teardown(fx);
}

static void test_batch__submit_too_large(void **state)
{
	(void)state;
	struct client_fixture *fx;
	client_fixture_setup(&fx, "UseDevelopmentStorage=true", NULL);
	/* 100 entities of 60,000 bytes: over the 4 MiB body limit. */
	char *big = malloc(60000);
	assert_non_null(big);
	memset(big, 'x', 60000);
	struct ecw_batch *b = new_batch();
	int err = 0;
	char rk[16];
	for (int i = 0; i < 100 && err == 0; i++) {
		snprintf(rk, sizeof(rk), "r%03d", i);
		struct ecw_entity *e = entity("p", rk);
		assert_int_equal(ecw_entity_set_string(e, "s", big, 60000), 0);
		err = ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL);
		ecw_entity_free(e);
	}
	if (err == 0)
		err = ecw_batch_submit(fx->c, b);
	assert_int_equal(err, ECW_ETOOLARGE);
	assert_int_equal(fx->fake.nreqs, 0);
	ecw_batch_free(b);
	free(big);
	client_fixture_teardown(fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_batch__new_checks_table_name),
	    cmocka_unit_test(test_batch__refuses_101st_operation),
	    cmocka_unit_test(test_batch__refuses_second_partition),
	    cmocka_unit_test(test_batch__refuses_duplicate_row),
	    cmocka_unit_test(test_batch__conditional_ops_need_if_match),
	    cmocka_unit_test(test_batch__add_copies_entity),
	    cmocka_unit_test(test_batch__add_borrowed_keeps_entity),
	    cmocka_unit_test(test_batch__body_layout),
	    cmocka_unit_test(test_batch__parse_success),
	    cmocka_unit_test(test_batch__parse_boundaries_from_headers),
	    cmocka_unit_test(test_batch__parse_wrong_count),
	    cmocka_unit_test(test_batch__parse_failure_index),
	    cmocka_unit_test(test_batch__parse_failure_without_index),
	    cmocka_unit_test(test_batch__parse_failure_table_not_found),
	    cmocka_unit_test(test_batch__parse_reads_only_the_body),
	    cmocka_unit_test(test_batch__submit),
	    cmocka_unit_test(test_batch__submit_failure),
	    cmocka_unit_test(test_batch__submit_too_large),
	};
	return cmocka_run_group_tests_name("batch", tests, NULL, NULL);
}
