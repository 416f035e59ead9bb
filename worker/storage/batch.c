/* SPDX-License-Identifier: MIT */
/* batch.c - entity group transactions ($batch): up to 100 operations on one
 * partition of one table, applied all or none. The request is a multipart/mixed
 * body holding one changeset; the answer is multipart too, with boundaries the
 * service chooses (read from the Content-Type headers, never assumed). On
 * failure the service answers with one sub-response whose message starts with
 * the failing operation's 0-based index and a colon. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "batch.h"
#include "ecw_codec.h"
#include "client.h"
#include "ecw_clock.h"
#include "escape.h"
#include "jsonparse.h"
#include "status.h"

struct batch_op {
	enum ecw_batch_op op;
	const struct ecw_entity *e; /* own, or the caller's (ecw_batch_add_borrowed) */
	struct ecw_entity *own;     /* what the batch frees: NULL when borrowed */
	char *if_match;
	int status;
	char *etag;
	uint64_t rk_hash; /* FNV-1a of the RowKey: the twice-check compares it first */
};

struct ecw_batch {
	char *table;
	struct batch_op ops[ECW_BATCH_MAX_OPS];
	size_t n;
	int failed_index;
};

static const char *const op_names[] = {"insert", "insert-or-replace", "insert-or-merge", "update", "merge",
				       "delete"};

int ecw_batch_new(struct ecw_batch **out, const char *table)
{
	struct ecw_batch *b;
	int err;

	*out = NULL;
	if ((err = ecw_table_name_check(table)) < 0)
		return err;
	/* Not calloc: an operation is set whole when it is added (ecw_batch_add),
	 * and zeroing room for 100 cost more than building a group's batch. */
	if (!(b = malloc(sizeof(*b))) || !(b->table = strdup(table))) {
		free(b);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	b->n = 0;
	b->failed_index = -1;
	*out = b;
	return 0;
}

static void clear_results(struct ecw_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->ops[i].etag);
		b->ops[i].etag = NULL;
		b->ops[i].status = 0;
	}
	b->failed_index = -1;
}

void ecw_batch_free(struct ecw_batch *b)
{
	if (!b)
		return;
	clear_results(b);
	for (size_t i = 0; i < b->n; i++) {
		ecw_entity_free(b->ops[i].own);
		free(b->ops[i].if_match);
	}
	free(b->table);
	free(b);
}

size_t ecw_batch_count(const struct ecw_batch *b)
{
	return b->n;
}

static int add(struct ecw_batch *b, enum ecw_batch_op op, const struct ecw_entity *e, const char *if_match,
	       bool borrowed)
{
	bool conditional = op == ECW_BATCH_UPDATE || op == ECW_BATCH_MERGE || op == ECW_BATCH_DELETE;
	struct batch_op *slot;
	int err;

	if ((unsigned)op > ECW_BATCH_DELETE)
		return ecw_error_set(ECW_EINVALID, "batch: unknown operation %d", (int)op);
	if (b->n == ECW_BATCH_MAX_OPS)
		return ecw_error_set(ECW_EINVALID, "batch: at most %d operations", ECW_BATCH_MAX_OPS);
	if (conditional != (if_match != NULL) || (if_match && !*if_match))
		return ecw_error_set(ECW_EINVALID, "batch: %s %s If-Match (an ETag or *)", op_names[op],
				     conditional ? "needs" : "takes no");
	if (b->n && strcmp(ecw_entity_pk(b->ops[0].e), ecw_entity_pk(e)) != 0)
		return ecw_error_set(ECW_EINVALID, "batch: every operation must be in partition '%.100s'",
				     ecw_entity_pk(b->ops[0].e));
	/* RowKeys often share a long prefix (19 digits of ticks): comparing
	 * each pair was 4% of an export's CPU, the hash first makes it
	 * nothing. */
	uint64_t h = ecw_hash_str(ECW_HASH_START, ecw_entity_rk(e));
	for (size_t i = 0; i < b->n; i++)
		if (b->ops[i].rk_hash == h && strcmp(ecw_entity_rk(b->ops[i].e), ecw_entity_rk(e)) == 0)
			return ecw_error_set(ECW_EINVALID,
					     "batch: RowKey '%.100s' appears twice (operations %zu and %zu)",
					     ecw_entity_rk(e), i, b->n);
	slot = &b->ops[b->n];
	memset(slot, 0, sizeof(*slot));
	slot->op = op;
	slot->rk_hash = h;
	/* A delete is its keys: the rest of the entity would be copied for
	 * nothing. */
	if (!borrowed) {
		if ((err = op == ECW_BATCH_DELETE
				   ? ecw_entity_new(&slot->own, ecw_entity_pk(e), ecw_entity_rk(e))
				   : ecw_entity_clone(&slot->own, e)) < 0)
			return err;
		e = slot->own;
	}
	slot->e = e;
	if (if_match && !(slot->if_match = strdup(if_match))) {
		ecw_entity_free(slot->own);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	b->n++;
	return 0;
}

int ecw_batch_add(struct ecw_batch *b, enum ecw_batch_op op, const struct ecw_entity *e, const char *if_match)
{
	return add(b, op, e, if_match, false);
}

int ecw_batch_add_borrowed(struct ecw_batch *b, enum ecw_batch_op op, const struct ecw_entity *e,
			   const char *if_match)
{
	return add(b, op, e, if_match, true);
}

int ecw_batch_failed_index(const struct ecw_batch *b)
{
	return b->failed_index;
}

int ecw_batch_status(const struct ecw_batch *b, size_t i)
{
	return i < b->n ? b->ops[i].status : 0;
}

const char *ecw_batch_etag(const struct ecw_batch *b, size_t i)
{
	return i < b->n ? b->ops[i].etag : NULL;
}

/* ---- the request body ------------------------------------------------------- */

static int add_operation(struct ecw_buf *out, const struct batch_op *o, const char *table_url,
			 const char *table, const char *changeset)
{
	static const char *const verbs[] = {"POST", "PUT", "MERGE", "PUT", "MERGE", "DELETE"};
	struct ecw_buf path;
	int err;

	ecw_buf_init(&path, 0);
	/* Put together with ecw_buf_cat, not printf: once per operation. */
	if ((err = ecw_buf_cat(out, "--changeset_", changeset,
			       "\r\nContent-Type: application/http\r\n"
			       "Content-Transfer-Encoding: binary\r\n\r\n",
			       NULL)) < 0)
		goto done;
	if (o->op == ECW_BATCH_INSERT) {
		err = ecw_buf_cat(out, "POST ", table_url, " HTTP/1.1\r\n", NULL);
	} else {
		/* table_url ends in "/table"; the entity path repeats the table. */
		size_t base = strlen(table_url) - strlen(table) - 1;
		if ((err = ecw_escape_entity_path(&path, table, ecw_entity_pk(o->e), ecw_entity_rk(o->e))) ==
			    0 &&
		    (err = ecw_buf_cat(out, verbs[o->op], " ", NULL)) == 0 &&
		    (err = ecw_buf_add(out, table_url, base)) == 0)
			err = ecw_buf_cat(out, path.ptr, " HTTP/1.1\r\n", NULL);
	}
	if (err < 0)
		goto done;
	if (o->op != ECW_BATCH_DELETE && (err = ecw_buf_adds(out, "Content-Type: application/json\r\n")) < 0)
		goto done;
	if ((err = ecw_buf_adds(out, "Accept: application/json;odata=minimalmetadata\r\n"
				     "DataServiceVersion: 3.0;\r\n")) < 0)
		goto done;
	if (o->op == ECW_BATCH_INSERT && (err = ecw_buf_adds(out, "Prefer: return-no-content\r\n")) < 0)
		goto done;
	if (o->if_match && (err = ecw_buf_cat(out, "If-Match: ", o->if_match, "\r\n", NULL)) < 0)
		goto done;
	if ((err = ecw_buf_adds(out, "\r\n")) < 0)
		goto done;
	/* Bodies stay on one line: Azurite's parser requires it. */
	if (o->op != ECW_BATCH_DELETE && (err = ecw_entity_to_json(out, o->e)) < 0)
		goto done;
	err = ecw_buf_adds(out, "\r\n");
done:
	ecw_buf_dispose(&path);
	return err;
}

int ecw_batch_build_body(struct ecw_buf *out, const struct ecw_batch *b, const char *table_url,
			 const char *batch_id, const char *changeset_id)
{
	int err;

	if ((err = ecw_buf_cat(out, "--batch_", batch_id,
			       "\r\nContent-Type: multipart/mixed; boundary=changeset_", changeset_id,
			       "\r\n\r\n", NULL)) < 0)
		return err;
	for (size_t i = 0; i < b->n; i++)
		if ((err = add_operation(out, &b->ops[i], table_url, b->table, changeset_id)) < 0)
			return err;
	return ecw_buf_cat(out, "--changeset_", changeset_id, "--\r\n--batch_", batch_id, "--\r\n", NULL);
}

/* ---- the response ---------------------------------------------------------------- */

/* The boundary parameter of a multipart Content-Type, quotes removed. */
static int boundary_of(char *out, size_t cap, const char *ct, size_t ct_len)
{
	const char *p = NULL, *end = ct + ct_len;
	size_t n;

	for (const char *s = ct; s + 9 <= end; s++)
		if (strncasecmp(s, "boundary=", 9) == 0) {
			p = s + 9;
			break;
		}
	if (!p)
		return -1;
	if (*p == '"') {
		const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
		if (!q)
			return -1;
		p++;
		n = (size_t)(q - p);
	} else {
		/* ct may be a header inside the body: no NUL after it. */
		for (n = 0; p + n < end && !memchr("; \t\r\n", p[n], 5); n++)
			;
	}
	if (n == 0 || n >= cap)
		return -1;
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

struct part {
	const char *head, *body; /* headers, then content */
	size_t head_len, body_len;
};

static const char *next_line(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	return nl ? nl + 1 : end;
}

/* Splits body on "--boundary" lines; returns the number of parts (up to max). */
static int split_parts(struct part *parts, int max, const char *body, size_t len, const char *boundary)
{
	const char *end = body + len, *p = body, *start = NULL;
	size_t blen = strlen(boundary);
	int n = 0;

	while (p < end) {
		const char *line = p;
		p = next_line(p, end);
		if ((size_t)(p - line) < blen + 2 || line[0] != '-' || line[1] != '-' ||
		    memcmp(line + 2, boundary, blen) != 0)
			continue;
		if (start && n < max) {
			/* The CRLF before a delimiter belongs to the delimiter. */
			const char *stop = line;
			if (stop > start && stop[-1] == '\n')
				stop--;
			if (stop > start && stop[-1] == '\r')
				stop--;
			const char *h = start, *b = start;
			/* Headers end at the first empty line. */
			while (b < stop) {
				const char *l = b;
				b = next_line(b, stop);
				if ((b - l == 1 && l[0] == '\n') || (b - l == 2 && l[0] == '\r'))
					break;
			}
			parts[n].head = h;
			parts[n].head_len = (size_t)(b - h);
			parts[n].body = b;
			parts[n].body_len = (size_t)(stop - b);
			n++;
		}
		if ((size_t)(p - line) >= blen + 4 && line[2 + blen] == '-' && line[3 + blen] == '-')
			break; /* closing delimiter */
		start = p;
	}
	return n;
}

/* Finds "Name:" at a line start in a header block; returns the value's span. */
static const char *find_header(size_t *vlen, const char *head, size_t len, const char *name)
{
	const char *end = head + len, *p = head;
	size_t n = strlen(name);

	while (p < end) {
		const char *line = p, *v;
		p = next_line(p, end);
		if ((size_t)(p - line) > n && strncasecmp(line, name, n) == 0 && line[n] == ':') {
			for (v = line + n + 1; v < p && (*v == ' ' || *v == '\t'); v++)
				;
			*vlen = (size_t)(p - v);
			while (*vlen && (v[*vlen - 1] == '\r' || v[*vlen - 1] == '\n' || v[*vlen - 1] == ' '))
				(*vlen)--;
			return v;
		}
	}
	return NULL;
}

struct sub_response {
	int status;
	const char *etag;
	size_t etag_len;
	const char *body;
	size_t body_len;
};

/* An application/http part: "HTTP/1.1 204 No Content", headers, blank, body. */
static int parse_sub_response(struct sub_response *s, const struct part *pt)
{
	const char *p = pt->body, *end = pt->body + pt->body_len, *hdr_start, *hdr_end;

	/* Three digits, read in place: the part is a span of the body, with no
	 * NUL after it for sscanf. */
	if (pt->body_len < 12 || memcmp(p, "HTTP/1.1 ", 9) != 0 || p[9] < '0' || p[9] > '9' || p[10] < '0' ||
	    p[10] > '9' || p[11] < '0' || p[11] > '9')
		return ecw_error_set(ECW_ERROR, "batch: malformed sub-response");
	s->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	hdr_start = p = next_line(p, end);
	while (p < end) {
		const char *l = p;
		p = next_line(p, end);
		if ((p - l == 1 && l[0] == '\n') || (p - l == 2 && l[0] == '\r'))
			break;
	}
	hdr_end = p;
	s->etag = find_header(&s->etag_len, hdr_start, (size_t)(hdr_end - hdr_start), "ETag");
	s->body = p;
	s->body_len = (size_t)(end - p);
	return 0;
}

int ecw_batch_parse_response(struct ecw_batch *b, const char *content_type, const char *body, size_t len)
{
	struct part outer[4], inner[ECW_BATCH_MAX_OPS + 1];
	struct sub_response subs[ECW_BATCH_MAX_OPS + 1];
	char boundary[128];
	const char *ct;
	size_t ct_len;
	int nouter, nsub = 0;

	clear_results(b);
	if (!content_type || boundary_of(boundary, sizeof(boundary), content_type, strlen(content_type)) < 0)
		return ecw_error_set(ECW_ERROR, "batch: response is not multipart");
	nouter = split_parts(outer, 4, body, len, boundary);
	for (int i = 0; i < nouter; i++) {
		ct = find_header(&ct_len, outer[i].head, outer[i].head_len, "Content-Type");
		if (ct && ct_len >= 15 && strncasecmp(ct, "multipart/mixed", 15) == 0) {
			char cs[128];
			int n;
			if (boundary_of(cs, sizeof(cs), ct, ct_len) < 0)
				return ecw_error_set(ECW_ERROR,
						     "batch: changeset response without a boundary");
			n = split_parts(inner, ECW_BATCH_MAX_OPS + 1, outer[i].body, outer[i].body_len, cs);
			for (int j = 0; j < n && nsub <= ECW_BATCH_MAX_OPS; j++)
				if (parse_sub_response(&subs[nsub++], &inner[j]) < 0)
					return ECW_ERROR;
		} else if (nsub <= ECW_BATCH_MAX_OPS) {
			/* A failure can come back outside a changeset. */
			if (parse_sub_response(&subs[nsub++], &outer[i]) < 0)
				return ECW_ERROR;
		}
	}
	for (int i = 0; i < nsub; i++) {
		if (subs[i].status >= 200 && subs[i].status < 300)
			continue;
		/* The failing operation: its message starts with "index:". */
		char code[64], msg[300];
		const char *text = msg;
		long idx = -1;
		int err;

		ecw_jsonparse_error(code, sizeof(code), msg, sizeof(msg), subs[i].body, subs[i].body_len);
		if (msg[0] >= '0' && msg[0] <= '9') {
			char *colon;
			idx = strtol(msg, &colon, 10);
			if (*colon == ':' && idx >= 0 && (size_t)idx < b->n)
				text = colon + 1;
			else
				idx = -1;
		}
		if (idx < 0 && b->n == 1)
			idx = 0;
		b->failed_index = (int)idx;
		msg[strcspn(msg, "\r\n")] = '\0';
		err = ecw_status_to_err(subs[i].status, code);
		if (idx >= 0)
			return ecw_error_set_http(
				err, subs[i].status, code, NULL,
				"batch on %s: operation %ld (%s of RowKey '%.80s') failed: %d %s: %s; nothing was applied",
				b->table, idx, op_names[b->ops[idx].op], ecw_entity_rk(b->ops[idx].e),
				subs[i].status, code, text);
		return ecw_error_set_http(err, subs[i].status, code, NULL,
					  "batch on %s failed: %d %s: %s; nothing was applied", b->table,
					  subs[i].status, code, text);
	}
	if ((size_t)nsub != b->n)
		return ecw_error_set(ECW_ERROR, "batch: %zu operations sent, %d results received", b->n,
				     nsub);
	for (size_t i = 0; i < b->n; i++) {
		b->ops[i].status = subs[i].status;
		if (subs[i].etag && b->ops[i].op != ECW_BATCH_DELETE &&
		    !(b->ops[i].etag = strndup(subs[i].etag, subs[i].etag_len)))
			return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	return 0;
}

/* ---- submit ------------------------------------------------------------------------ */

static void new_id(char out[37])
{
	static const char hex[] = "0123456789abcdef";
	uint32_t r[4] = {ecw_clock_random_u32(), ecw_clock_random_u32(), ecw_clock_random_u32(),
			 ecw_clock_random_u32()};
	char *p = out;

	/* 8-4-4-4-12 hex digits of the 128 random bits. */
	for (int i = 0; i < 32; i++) {
		if (i == 8 || i == 12 || i == 16 || i == 20)
			*p++ = '-';
		*p++ = hex[(r[i / 8] >> (28 - 4 * (i % 8))) & 15];
	}
	*p = '\0';
}

int ecw_batch_submit(struct ecw_client *c, struct ecw_batch *b)
{
	const struct ecw_account *a = ecw_client_account(c);
	struct ecw_request r;
	struct ecw_response resp;
	struct ecw_buf body, url, ct;
	char batch_id[37], cs_id[37];
	int err;

	ecw_response_init(&resp);
	ecw_buf_init(&body, 0);
	ecw_buf_init(&url, 0);
	ecw_buf_init(&ct, 0);
	ecw_request_init(&r, ECW_SVC_TABLE, "POST");
	r.op = "table.batch";
	clear_results(b);
	if (b->n == 0) {
		err = ecw_error_set(ECW_EINVALID, "batch: no operations");
		goto done;
	}
	new_id(batch_id);
	new_id(cs_id);
	if ((err = ecw_buf_printf(&url, "%s/%s", ecw_account_endpoint(a, ECW_SVC_TABLE), b->table)) < 0)
		goto done;
	/* The body is built under the buffer's default cap and measured after:
	 * a cap of 4 MiB would fail an append without saying that it was the
	 * limit and not the memory. */
	err = ecw_batch_build_body(&body, b, url.ptr, batch_id, cs_id);
	if ((err == 0 || err == ECW_ENOMEM) && body.len > ECW_BATCH_MAX_BYTES)
		err = ecw_error_set(ECW_ETOOLARGE, "batch: body over the 4 MiB limit");
	if (err < 0)
		goto done;
	if ((err = ecw_buf_printf(&ct, "multipart/mixed; boundary=batch_%s", batch_id)) < 0 ||
	    (err = ecw_buf_adds(&r.path, "/$batch")) < 0 ||
	    (err = ecw_request_set_header(&r, "Accept", "application/json;odata=minimalmetadata")) < 0 ||
	    (err = ecw_request_set_header(&r, "DataServiceVersion", "3.0;")) < 0 ||
	    (err = ecw_request_set_header(&r, "MaxDataServiceVersion", "3.0;NetFx")) < 0)
		goto done;
	r.content_type = ct.ptr;
	r.body = body.ptr;
	r.body_len = body.len;
	if ((err = ecw_client_send(&resp, c, &r)) < 0)
		goto done;
	err = ecw_batch_parse_response(b, ecw_response_header(&resp, "Content-Type"), resp.body.ptr,
				       resp.body.len);
	if (err < 0 && ecw_response_header(&resp, "x-ms-request-id")) {
		/* The sub-response has no request id; the batch request has one. */
		struct ecw_error e = *ecw_error_last();
		const char *id = ecw_response_header(&resp, "x-ms-request-id");
		ecw_error_set_http(e.code, e.http_status, e.service_code, id, "%s (request id %s)", e.message,
				   id);
	}
done:
	if (err == ECW_ENOTABLE) /* the path was /$batch: the table is ours to name */
		ecw_error_set_table(b->table, strlen(b->table));
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	ecw_buf_dispose(&body);
	ecw_buf_dispose(&url);
	ecw_buf_dispose(&ct);
	return err;
}
