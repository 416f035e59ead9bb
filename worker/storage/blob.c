/* SPDX-License-Identifier: MIT */
/* blob.c - the Blob service operations: block blobs put whole or block by
 * block and read whole or by ranges, their properties, deletes, listings,
 * and containers. Requests go through the client like the queue's
 * (ecw_client_send: Shared Key with the full layout, a SAS, or a bearer
 * token; retries; errors classified once in status.c), so the retry rules
 * and the worker's circuit apply to them too.
 *
 * A blob's name goes into the URL one path segment at a time,
 * percent-encoded as encodeURIComponent does, the '/' between segments
 * kept; the signature covers the path as sent. Names the service or a URL on
 * the way would rewrite (a backslash, "." and ".." segments, empty ones) are
 * refused before any request.
 *
 * A retried put (or block list) whose first answer was lost meets its own
 * write: with If-None-Match "*" that is ECW_ECONFLICT, with an If-Match on
 * the old ETag ECW_EPRECONDITION; a caller that conditions its writes reads
 * the blob's ETag to tell its own write from another's. A retried Put Block
 * only puts the same bytes under the same id again. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "account.h"
#include "blob_info.h"
#include "client.h"
#include "date.h"
#include "ecw_codec.h"
#include "escape.h"
#include "names.h"
#include "xml.h"

#define META_PREFIX "x-ms-meta-"
/* The least an answer to a get may hold whatever the caller's cap: room for
 * an error's XML, so a small cap never turns a 404 into ECW_ETOOLARGE. */
#define ANSWER_MIN ((size_t)64 * 1024)
#define LIST_DEFAULT 1000
#define LIST_MAX 5000
#define PREFIX_MAX (4 * ECW_BLOB_NAME_MAX) /* bytes: 1,024 characters of UTF-8 */
#define ETAG_MAX 127
#define CONTENT_TYPE_MAX 255

/* ---- names ------------------------------------------------------------------------------------ */

int ecw_blob_container_check(const char *container)
{
	if (ecw_names_dns_valid(container))
		return 0;
	return ecw_error_set(
		ECW_EINVALID,
		"invalid container name '%.70s': 3-63 lowercase letters, digits and single dashes",
		container ? container : "");
}

/* Why name is refused, or NULL. */
static const char *name_fault(const char *name, size_t n)
{
	size_t chars = 0, k;
	uint32_t cp;

	if (n == 0)
		return "it is empty";
	for (size_t i = 0; i < n; i += k, chars++) {
		if (!(k = ecw_utf8_decode(name + i, n - i, &cp)))
			return "it is not valid UTF-8";
		if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
			return "it holds a control character";
		if (cp == '\\')
			return "it holds a backslash, which the service reads as '/'";
		if (cp == '/' && (i == 0 || name[i - 1] == '/'))
			return "it has an empty path segment";
		if (cp == '/' && name[i - 1] == '.')
			return "a path segment ends in '.'";
	}
	if (chars > ECW_BLOB_NAME_MAX)
		return "it is over 1,024 characters";
	if (name[n - 1] == '/' || name[n - 1] == '.')
		return "it ends in '/' or '.'";
	return NULL;
}

int ecw_blob_name_check(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	const char *why = name_fault(name, n);

	if (!why)
		return 0;
	/* Only a name of printable text is quoted: a refused one may hold
	 * anything. */
	if (n && ecw_utf8_valid(name, n) &&
	    !strpbrk(name, "\x01\x02\x03\x04\x05\x06\x07\x08\t\n\v\f\r\x1b\x7f"))
		return ecw_error_set(ECW_EINVALID, "invalid blob name '%.70s': %s", name, why);
	return ecw_error_set(ECW_EINVALID, "invalid blob name (%zu bytes): %s", n, why);
}

/* ---- requests --------------------------------------------------------------------------------- */

/* A request to the container (name NULL: with restype=container) or to a
 * blob in it, the names checked and the blob's encoded segment by segment. */
static int blob_request(struct ecw_request *r, struct ecw_client *c, const char *op, const char *method,
			const char *container, const char *name)
{
	const struct ecw_account *a = ecw_client_account(c);
	int err;

	ecw_request_init(r, ECW_SVC_BLOB, method);
	r->op = op;
	if (!a->endpoint[ECW_SVC_BLOB])
		return ecw_error_set(ECW_EINVALID, "blob: the account has no blob endpoint: %s",
				     a->blob_none);
	if ((err = ecw_blob_container_check(container)) < 0 ||
	    (name && (err = ecw_blob_name_check(name)) < 0) ||
	    (err = ecw_buf_cat(&r->path, "/", container, NULL)) < 0)
		return err;
	if (!name)
		return ecw_request_add_query(r, "restype", "container");
	for (const char *seg = name;; seg++) {
		size_t n = strcspn(seg, "/");
		if ((err = ecw_buf_addc(&r->path, '/')) < 0 || (err = ecw_escape_pct(&r->path, seg, n)) < 0)
			return err;
		seg += n;
		if (!*seg)
			return 0;
	}
}

/* A header value the client may send: printable ASCII, 1..max bytes. */
static bool header_value_ok(const char *v, size_t max)
{
	size_t n = strlen(v);

	if (n == 0 || n > max)
		return false;
	for (; *v; v++)
		if ((unsigned char)*v < 0x20 || (unsigned char)*v > 0x7e)
			return false;
	return true;
}

/* Printable ASCII without a leading, trailing or doubled space: the
 * service folds runs of whitespace in the headers it signs, Azurite does
 * not, so such a value could sign differently on the two. */
static bool meta_value_ok(const char *v)
{
	size_t n = strlen(v);

	if (n && (v[0] == ' ' || v[n - 1] == ' ' || strstr(v, "  ")))
		return false;
	return n == 0 || header_value_ok(v, ECW_BLOB_META_BYTES);
}

static int check_meta(const struct ecw_blob_meta *meta, size_t n)
{
	size_t bytes = 0;

	if (n > ECW_BLOB_META_MAX)
		return ecw_error_set(ECW_EINVALID, "blob metadata: %zu pairs, at most %d", n,
				     ECW_BLOB_META_MAX);
	for (size_t i = 0; i < n; i++) {
		if (!meta[i].name || !meta[i].value ||
		    !ecw_names_meta_valid(meta[i].name, ECW_BLOB_META_BYTES))
			return ecw_error_set(
				ECW_EINVALID,
				"blob metadata: pair %zu's name is not an identifier (a letter or "
				"'_', then letters, digits and '_')",
				i + 1);
		if (!meta_value_ok(meta[i].value))
			return ecw_error_set(
				ECW_EINVALID,
				"blob metadata %s: a value must be printable ASCII without leading, "
				"trailing or doubled spaces",
				meta[i].name);
		for (size_t j = 0; j < i; j++)
			if (strcasecmp(meta[i].name, meta[j].name) == 0)
				return ecw_error_set(ECW_EINVALID, "blob metadata: %s twice", meta[i].name);
		bytes += strlen(meta[i].name) + strlen(meta[i].value);
	}
	if (bytes > ECW_BLOB_META_BYTES)
		return ecw_error_set(ECW_EINVALID, "blob metadata: %zu bytes of names and values, at most %d",
				     bytes, ECW_BLOB_META_BYTES);
	return 0;
}

static int check_condition(const char *what, const char *v)
{
	if (!v || header_value_ok(v, ETAG_MAX))
		return 0;
	return ecw_error_set(ECW_EINVALID, "blob: %s must be \"*\" or an ETag", what);
}

/* ---- what an answer's headers tell ------------------------------------------------------------ */

static int header_time(time_t *out, const struct ecw_response *resp, const char *name)
{
	const char *v = ecw_response_header(resp, name);

	*out = 0;
	if (v && ecw_date_parse(out, v) < 0)
		return ecw_error_set(ECW_ERROR, "blob: the answer's %s is not a date", name);
	return 0;
}

/* An info for the blob name from a Get Blob or Get Blob Properties answer. */
static int info_from_headers(struct ecw_blob_info **out, const struct ecw_response *resp, const char *name)
{
	struct ecw_blob_info *info = ecw_blob_info_new(name, strlen(name));
	const char *etag = ecw_response_header(resp, "ETag"),
		   *len = ecw_response_header(resp, "Content-Length"),
		   *type = ecw_response_header(resp, "Content-Type");
	char *end;
	int err;

	*out = NULL;
	if (!info)
		return ECW_ENOMEM;
	if (!etag) {
		err = ecw_error_set(ECW_ERROR, "blob: the answer has no ETag");
		goto done;
	}
	if ((err = ecw_blob_info_set_etag(info, etag, strlen(etag))) < 0 ||
	    (err = header_time(&info->last_modified, resp, "Last-Modified")) < 0 ||
	    (err = header_time(&info->service_date, resp, "Date")) < 0)
		goto done;
	if (len &&
	    (info->content_length = strtoll(len, &end, 10), end == len || *end || info->content_length < 0)) {
		err = ecw_error_set(ECW_ERROR, "blob: the answer's Content-Length is not a number");
		goto done;
	}
	info->total_length = info->content_length;
	snprintf(info->content_type, sizeof(info->content_type), "%s", type ? type : "");
	for (size_t i = 0; i < resp->nheaders; i++) {
		const char *n, *v;

		ecw_response_header_at(resp, i, &n, &v);
		if (strncasecmp(n, META_PREFIX, strlen(META_PREFIX)) == 0 &&
		    (err = ecw_blob_info_add_meta(info, n + strlen(META_PREFIX),
						  strlen(n) - strlen(META_PREFIX), v, strlen(v))) < 0)
			goto done;
	}
	/* The transport keeps so many headers: at the limit, some may be gone. */
	if (resp->nheaders == ECW_RESP_MAX_HEADERS)
		info->meta_partial = true;
	*out = info;
	info = NULL;
done:
	ecw_blob_info_free(info);
	return err;
}

/* ---- containers ------------------------------------------------------------------------------- */

/* A request without a body whose answer matters only by its status: to the
 * container (name NULL) or to a blob, with If-Match when given. A blob's
 * delete takes its snapshots with it (without, one that has any is 409
 * SnapshotsPresent). */
static int bodyless_call(struct ecw_client *c, const char *op, const char *method, const char *container,
			 const char *name, const char *if_match)
{
	struct ecw_request r;
	struct ecw_response resp;
	int err;

	ecw_response_init(&resp);
	if ((err = blob_request(&r, c, op, method, container, name)) == 0 &&
	    (err = check_condition("If-Match", if_match)) == 0 &&
	    (!if_match || (err = ecw_request_set_header(&r, "If-Match", if_match)) == 0) &&
	    (!name || strcmp(method, "DELETE") != 0 ||
	     (err = ecw_request_set_header(&r, "x-ms-delete-snapshots", "include")) == 0))
		err = ecw_client_send(&resp, c, &r);
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

int ecw_blob_container_create(bool *created_out, struct ecw_client *c, const char *container)
{
	int err = bodyless_call(c, "blob.container_create", "PUT", container, NULL, NULL);

	if (created_out)
		*created_out = err == 0;
	/* It exists: success, as for queues and tables (ContainerBeingDeleted
	 * stays an error). */
	if (err == ECW_ECONFLICT && strcmp(ecw_error_last()->service_code, "ContainerAlreadyExists") == 0) {
		ecw_error_clear();
		err = 0;
	}
	return err;
}

int ecw_blob_container_delete(struct ecw_client *c, const char *container)
{
	return bodyless_call(c, "blob.container_delete", "DELETE", container, NULL, NULL);
}

/* ---- blobs ------------------------------------------------------------------------------------ */

/* What a Put Blob and a Put Block List share: opts checked, then its
 * conditions and metadata set on r; the content type is the caller's to
 * send (a put's body type, a commit's x-ms-blob-content-type). */
static int put_options(struct ecw_request *r, const struct ecw_blob_put_options *opts)
{
	char header[sizeof(META_PREFIX) + ECW_BLOB_META_BYTES];
	int err;

	if ((err = check_condition("If-Match", opts->if_match)) < 0 ||
	    (err = check_condition("If-None-Match", opts->if_none_match)) < 0 ||
	    (err = check_meta(opts->meta, opts->n_meta)) < 0)
		return err;
	if (opts->content_type && !header_value_ok(opts->content_type, CONTENT_TYPE_MAX))
		return ecw_error_set(ECW_EINVALID, "blob: a content type is 1-%d bytes of printable ASCII",
				     CONTENT_TYPE_MAX);
	if ((opts->if_match && (err = ecw_request_set_header(r, "If-Match", opts->if_match)) < 0) ||
	    (opts->if_none_match &&
	     (err = ecw_request_set_header(r, "If-None-Match", opts->if_none_match)) < 0))
		return err;
	for (size_t i = 0; i < opts->n_meta; i++) {
		snprintf(header, sizeof(header), META_PREFIX "%s", opts->meta[i].name);
		if ((err = ecw_request_set_header(r, header, opts->meta[i].value)) < 0)
			return err;
	}
	return 0;
}

/* Sends a put (r, its options set) and hands its new ETag to etag_out. */
static int put_send(char **etag_out, struct ecw_client *c, struct ecw_request *r)
{
	struct ecw_response resp;
	const char *etag;
	int err;

	ecw_response_init(&resp);
	if ((err = ecw_client_send(&resp, c, r)) == 0) {
		etag = ecw_response_header(&resp, "ETag");
		if (etag_out && (!etag || !(*etag_out = strdup(etag))))
			err = etag ? ecw_error_set(ECW_ENOMEM, "out of memory")
				   : ecw_error_set(ECW_ERROR, "blob: %s answered without an ETag", r->op);
	}
	ecw_response_dispose(&resp);
	return err;
}

/* A Put Blob request for name (opts NULL: none), its body data (borrowed:
 * it must outlive r). */
static int put_request(struct ecw_request *r, struct ecw_client *c, const char *container, const char *name,
		       const void *data, size_t len, const struct ecw_blob_put_options *opts)
{
	static const struct ecw_blob_put_options none = {0};
	int err;

	if (!opts)
		opts = &none;
	if ((err = blob_request(r, c, "blob.put", "PUT", container, name)) < 0)
		return err;
	if (len > ECW_BLOB_PUT_MAX)
		return ecw_error_set(ECW_ETOOLARGE, "blob: %zu bytes to put, at most %zu in one request", len,
				     ECW_BLOB_PUT_MAX);
	if ((err = put_options(r, opts)) < 0 ||
	    (err = ecw_request_set_header(r, "x-ms-blob-type", "BlockBlob")) < 0)
		return err;
	r->content_type = opts->content_type ? opts->content_type : "application/octet-stream";
	r->body = data ? data : "";
	r->body_len = len;
	return 0;
}

int ecw_blob_put(char **etag_out, struct ecw_client *c, const char *container, const char *name,
		 const void *data, size_t len, const struct ecw_blob_put_options *opts)
{
	struct ecw_request r;
	int err;

	if (etag_out)
		*etag_out = NULL;
	if ((err = put_request(&r, c, container, name, data, len, opts)) == 0)
		err = put_send(etag_out, c, &r);
	ecw_request_dispose(&r);
	return err;
}

struct put_many {
	struct ecw_blob_put_item *items;
	const size_t *item_of; /* the item of each request sent */
	ecw_blob_put_fn done;
	void *payload;
};

static void put_one_done(void *payload, size_t j, int err)
{
	struct put_many *pm = payload;
	size_t i = pm->item_of[j];

	pm->items[i].err = err;
	pm->done(pm->payload, i);
}

void ecw_blob_put_many(struct ecw_client *c, const char *container, struct ecw_blob_put_item *items, size_t n,
		       ecw_blob_put_fn done, void *payload)
{
	size_t cap = n ? n : 1, k = 0;
	struct ecw_request *rs = calloc(cap, sizeof(*rs)), **rp = calloc(cap, sizeof(*rp));
	struct ecw_response *resps = calloc(cap, sizeof(*resps));
	size_t *item_of = calloc(cap, sizeof(*item_of));
	struct put_many pm = {items, item_of, done, payload};

	if (!rs || !rp || !resps || !item_of) {
		/* No room to pipeline: one at a time. */
		for (size_t i = 0; i < n; i++) {
			items[i].err = ecw_blob_put(NULL, c, container, items[i].name, items[i].data,
						    items[i].len, items[i].opts);
			done(payload, i);
		}
		goto done;
	}
	/* A put that cannot be made (a bad name, condition or metadata) is
	 * told at once; the rest go together, in their order. */
	for (size_t i = 0; i < n; i++) {
		int err = put_request(&rs[k], c, container, items[i].name, items[i].data, items[i].len,
				      items[i].opts);
		if (err < 0) {
			ecw_request_dispose(&rs[k]);
			items[i].err = err;
			done(payload, i);
			continue;
		}
		ecw_response_init(&resps[k]);
		item_of[k] = i;
		rp[k] = &rs[k];
		k++;
	}
	ecw_client_send_pipelined(c, rp, resps, k, put_one_done, &pm);
	for (size_t j = 0; j < k; j++) {
		ecw_request_dispose(&rs[j]);
		ecw_response_dispose(&resps[j]);
	}
done:
	free(rs);
	free(rp);
	free(resps);
	free(item_of);
}

/* Ends a get: on success (err 0) the answer's body becomes out's (a blob is
 * not copied) and info info_out's (may be NULL); else both are freed.
 * Returns err. */
static int answer_take(struct ecw_buf *out, struct ecw_blob_info **info_out, struct ecw_response *resp,
		       struct ecw_blob_info *info, int err)
{
	if (err == 0) {
		ecw_buf_dispose(out);
		*out = resp->body;
		ecw_buf_init(&resp->body, 0);
		if (info_out) {
			*info_out = info;
			info = NULL;
		}
	}
	ecw_blob_info_free(info);
	ecw_response_dispose(resp);
	return err;
}

int ecw_blob_get(struct ecw_buf *out, struct ecw_blob_info **info_out, struct ecw_client *c,
		 const char *container, const char *name, size_t max_bytes)
{
	struct ecw_request r;
	struct ecw_response resp;
	struct ecw_blob_info *info = NULL;
	int err;

	ecw_buf_reset(out);
	if (info_out)
		*info_out = NULL;
	ecw_response_init(&resp);
	if ((err = blob_request(&r, c, "blob.get", "GET", container, name)) < 0)
		goto done;
	r.answer_max = max_bytes > ANSWER_MIN ? max_bytes : ANSWER_MIN;
	if ((err = ecw_client_send(&resp, c, &r)) < 0)
		goto done;
	if (resp.body.len > max_bytes) {
		err = ecw_error_set(ECW_ETOOLARGE,
				    "blob %s/%.70s is %zu bytes, over the %zu the reader takes", container,
				    name, resp.body.len, max_bytes);
		goto done;
	}
	/* chunked: no Content-Length */
	if ((err = info_from_headers(&info, &resp, name)) == 0)
		info->content_length = info->total_length = (long long)resp.body.len;
done:
	ecw_request_dispose(&r);
	return answer_take(out, info_out, &resp, info, err);
}

/* Get Blob Properties, with If-Match when given. */
static int props_call(struct ecw_blob_info **out, struct ecw_client *c, const char *container,
		      const char *name, const char *if_match)
{
	struct ecw_request r;
	struct ecw_response resp;
	int err;

	*out = NULL;
	ecw_response_init(&resp);
	if ((err = blob_request(&r, c, "blob.props", "HEAD", container, name)) == 0 &&
	    (!if_match || (err = ecw_request_set_header(&r, "If-Match", if_match)) == 0) &&
	    (err = ecw_client_send(&resp, c, &r)) == 0)
		err = info_from_headers(out, &resp, name);
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

int ecw_blob_props(struct ecw_blob_info **out, struct ecw_client *c, const char *container, const char *name)
{
	return props_call(out, c, container, name, NULL);
}

/* A decimal number of digits only, from s to end. */
static bool number_in(long long *out, const char *s, const char *end)
{
	char *stop;

	if (s == end || *s < '0' || *s > '9')
		return false;
	errno = 0;
	*out = strtoll(s, &stop, 10);
	return stop == end && errno == 0;
}

/* The blob's size from a ranged answer's Content-Range, "bytes
 * FIRST-LAST/TOTAL", checked against the got bytes asked for at offset. An
 * empty answer is a range past the end, whose FIRST-LAST only Azurite
 * sends (as "N-(N-1)", for a range starting at the end; the service
 * answers 416): only its TOTAL is read. */
static int range_total(long long *total, const struct ecw_response *resp, long long offset, size_t got)
{
	const char *v = ecw_response_header(resp, "Content-Range"), *dash, *slash;
	long long first, last;

	if (!v || strncmp(v, "bytes ", 6) != 0 || !(slash = strrchr(v, '/')) ||
	    !number_in(total, slash + 1, slash + strlen(slash)))
		return ecw_error_set(ECW_ERROR, "blob: the answer to a ranged read has %s Content-Range",
				     v ? "a bad" : "no");
	if (got == 0 && *total <= offset)
		return 0;
	dash = memchr(v + 6, '-', (size_t)(slash - v - 6));
	if (got == 0 || !dash || !number_in(&first, v + 6, dash) || !number_in(&last, dash + 1, slash) ||
	    first != offset || last != offset + (long long)got - 1 || last >= *total)
		return ecw_error_set(ECW_ERROR,
				     "blob: the answer's Content-Range (%.60s) is not the %zu bytes it "
				     "carried from %lld",
				     v, got, offset);
	return 0;
}

/* The info of a ranged answer of got bytes: its headers', with the range's
 * length and the blob's. */
static int range_info(struct ecw_blob_info **out, const struct ecw_response *resp, const char *name,
		      long long offset, size_t len)
{
	long long total;
	int err;

	*out = NULL;
	if (resp->body.len > len)
		return ecw_error_set(ECW_ERROR, "blob %.70s: %zu bytes for a range of %zu", name,
				     resp->body.len, len);
	if ((err = range_total(&total, resp, offset, resp->body.len)) < 0 ||
	    (err = info_from_headers(out, resp, name)) < 0)
		return err;
	(*out)->content_length = (long long)resp->body.len;
	(*out)->total_length = total;
	return 0;
}

int ecw_blob_get_range(struct ecw_buf *out, struct ecw_blob_info **info_out, struct ecw_client *c,
		       const char *container, const char *name, long long offset, size_t len,
		       const char *if_match)
{
	struct ecw_request r;
	struct ecw_response resp;
	struct ecw_blob_info *info = NULL;
	char range[64];
	int err;

	ecw_buf_reset(out);
	if (info_out)
		*info_out = NULL;
	ecw_response_init(&resp);
	/* The range is read into out's memory: a reader that reads range
	 * after range into one buffer allocates it once, not a growing one
	 * per range (its reallocs and fresh pages were a tenth of an export's
	 * delete pass). */
	resp.body.ptr = out->ptr;
	resp.body.cap = out->cap;
	out->ptr = NULL;
	out->cap = 0;
	if ((err = blob_request(&r, c, "blob.get_range", "GET", container, name)) < 0 ||
	    (err = check_condition("If-Match", if_match)) < 0)
		goto done;
	if (offset < 0 || len == 0 || len > (unsigned long long)(LLONG_MAX - offset)) {
		err = ecw_error_set(ECW_EINVALID, "blob: a range of %zu bytes from %lld (at least 1, from 0)",
				    len, offset);
		goto done;
	}
	snprintf(range, sizeof(range), "bytes=%lld-%lld", offset, offset + (long long)(len - 1));
	if ((err = ecw_request_set_header(&r, "x-ms-range", range)) < 0 ||
	    (if_match && (err = ecw_request_set_header(&r, "If-Match", if_match)) < 0))
		goto done;
	/* The range's bytes, not the blob's: what bounds a streaming reader. */
	r.answer_max = len > ANSWER_MIN ? len : ANSWER_MIN;
	err = ecw_client_send(&resp, c, &r);
	/* 416 InvalidRange: the blob ends at or before offset, no error to
	 * a reader. Its properties are asked apart: a 416 carries neither
	 * ETag nor metadata. */
	if (err == ECW_ERROR && ecw_error_last()->http_status == 416) {
		ecw_error_clear();
		ecw_buf_reset(&resp.body);
		err = 0;
		if (info_out && (err = props_call(&info, c, container, name, if_match)) == 0) {
			info->total_length = info->content_length;
			info->content_length = 0;
		}
	} else if (err == 0) {
		err = range_info(&info, &resp, name, offset, len);
	}
done:
	ecw_request_dispose(&r);
	return answer_take(out, info_out, &resp, info, err);
}

int ecw_blob_delete(struct ecw_client *c, const char *container, const char *name, const char *if_match)
{
	return bodyless_call(c, "blob.delete", "DELETE", container, name, if_match);
}

/* ---- blocks ----------------------------------------------------------------------------------- */

/* Appends the block id i (0-based) of a blob as the service takes it,
 * base64, after checking it: printable ASCII, 1..ECW_BLOB_BLOCK_ID_MAX bytes,
 * and as long as want_len (0: any). */
static int block_id_b64(struct ecw_buf *out, const char *id, size_t i, size_t want_len)
{
	if (!id || !header_value_ok(id, ECW_BLOB_BLOCK_ID_MAX))
		return ecw_error_set(ECW_EINVALID, "blob: block id %zu is not 1-%d bytes of printable ASCII",
				     i + 1, ECW_BLOB_BLOCK_ID_MAX);
	if (want_len && strlen(id) != want_len)
		return ecw_error_set(ECW_EINVALID,
				     "blob: block id %zu is %zu bytes, the first %zu: the ids of a blob all "
				     "have one length",
				     i + 1, strlen(id), want_len);
	return ecw_base64_encode(out, id, strlen(id));
}

int ecw_blob_put_block(struct ecw_client *c, const char *container, const char *name, const char *block_id,
		       const void *data, size_t len)
{
	struct ecw_request r;
	struct ecw_response resp;
	struct ecw_buf id;
	int err;

	ecw_buf_init(&id, 0);
	ecw_response_init(&resp);
	if ((err = blob_request(&r, c, "blob.put_block", "PUT", container, name)) < 0 ||
	    (err = block_id_b64(&id, block_id, 0, 0)) < 0)
		goto done;
	if (!data || len == 0 || len > ECW_BLOB_BLOCK_MAX) {
		err = ecw_error_set(ECW_EINVALID, "blob: a block is 1-%zu bytes of data, not %zu",
				    ECW_BLOB_BLOCK_MAX, data ? len : 0);
		goto done;
	}
	/* The query keeps the base64 as it is; the URL percent-encodes its
	 * '+', '/' and '='. */
	if ((err = ecw_request_add_query(&r, "comp", "block")) < 0 ||
	    (err = ecw_request_add_query(&r, "blockid", ecw_buf_cstr(&id))) < 0)
		goto done;
	r.content_type = "application/octet-stream";
	r.body = data;
	r.body_len = len;
	err = ecw_client_send(&resp, c, &r);
done:
	ecw_buf_dispose(&id);
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

#define BLOCK_LIST_HEAD "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>"
#define BLOCK_LIST_TAIL "</BlockList>"
/* An id's entry: <Latest>, base64 of at most 48 bytes, </Latest>. */
#define BLOCK_ENTRY_MAX (sizeof("<Latest></Latest>") - 1 + (ECW_BLOB_BLOCK_ID_MAX + 2) / 3 * 4)

int ecw_blob_put_block_list(char **etag_out, struct ecw_client *c, const char *container, const char *name,
			    const char *const *block_ids, size_t n, const struct ecw_blob_put_options *opts)
{
	static const struct ecw_blob_put_options none = {0};
	struct ecw_request r;
	struct ecw_buf body;
	int err;

	if (etag_out)
		*etag_out = NULL;
	if (!opts)
		opts = &none;
	ecw_buf_init(&body, sizeof(BLOCK_LIST_HEAD BLOCK_LIST_TAIL) + ECW_BLOB_BLOCKS_MAX * BLOCK_ENTRY_MAX);
	if ((err = blob_request(&r, c, "blob.put_block_list", "PUT", container, name)) < 0)
		goto done;
	if (n > ECW_BLOB_BLOCKS_MAX || (n && !block_ids)) {
		err = ecw_error_set(ECW_EINVALID, "blob: a block list of %zu ids, at most %d", n,
				    ECW_BLOB_BLOCKS_MAX);
		goto done;
	}
	/* Base64 is letters, digits, '+', '/' and '=': nothing to escape. */
	if ((err = ecw_buf_adds(&body, BLOCK_LIST_HEAD)) < 0)
		goto done;
	for (size_t i = 0; i < n; i++)
		if ((err = ecw_buf_adds(&body, "<Latest>")) < 0 ||
		    (err = block_id_b64(&body, block_ids[i], i, i ? strlen(block_ids[0]) : 0)) < 0 ||
		    (err = ecw_buf_adds(&body, "</Latest>")) < 0)
			goto done;
	if ((err = ecw_buf_adds(&body, BLOCK_LIST_TAIL)) < 0 || (err = put_options(&r, opts)) < 0 ||
	    (err = ecw_request_add_query(&r, "comp", "blocklist")) < 0 ||
	    (err = ecw_request_set_header(&r, "x-ms-blob-content-type",
					  opts->content_type ? opts->content_type
							     : "application/octet-stream")) < 0)
		goto done;
	r.content_type = "application/xml";
	r.body = body.ptr;
	r.body_len = body.len;
	err = put_send(etag_out, c, &r);
done:
	ecw_buf_dispose(&body);
	ecw_request_dispose(&r);
	return err;
}

/* ---- listings --------------------------------------------------------------------------------- */

struct ecw_blob_list {
	struct ecw_client *c;
	char container[64];
	char *prefix; /* NULL: none */
	char *marker; /* where the next page starts: "" for the first or none left */
	int max_results;
	bool metadata;
	struct ecw_xml_blob_page page;
	size_t at; /* the page's next item */
	int pages;
	bool done;   /* the last page is in */
	time_t date; /* the last page's Date */
};

int ecw_blob_list_new(struct ecw_blob_list **out, struct ecw_client *c, const char *container,
		      const struct ecw_blob_list_options *opts)
{
	static const struct ecw_blob_list_options none = {0};
	struct ecw_request r;
	struct ecw_blob_list *l;
	int err;

	*out = NULL;
	if (!opts)
		opts = &none;
	/* The names and the endpoint now, so a bad listing fails before any
	 * request. */
	err = blob_request(&r, c, "blob.list", "GET", container, NULL);
	ecw_request_dispose(&r);
	if (err < 0)
		return err;
	if (opts->max_results < 0 || opts->max_results > LIST_MAX)
		return ecw_error_set(ECW_EINVALID, "blob list: 1..%d blobs a page, not %d", LIST_MAX,
				     opts->max_results);
	if (opts->prefix && strlen(opts->prefix) > PREFIX_MAX)
		return ecw_error_set(ECW_EINVALID, "blob list: a prefix over %d bytes", PREFIX_MAX);
	if (opts->marker && !header_value_ok(opts->marker, PREFIX_MAX) && *opts->marker)
		return ecw_error_set(ECW_EINVALID, "blob list: a marker the service cannot have given");
	if (!(l = calloc(1, sizeof(*l))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	l->c = c;
	snprintf(l->container, sizeof(l->container), "%s", container);
	l->max_results = opts->max_results ? opts->max_results : LIST_DEFAULT;
	l->metadata = opts->metadata;
	if ((opts->prefix && *opts->prefix && !(l->prefix = strdup(opts->prefix))) ||
	    !(l->marker = strdup(opts->marker ? opts->marker : ""))) {
		ecw_blob_list_free(l);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	*out = l;
	return 0;
}

static int fetch_page(struct ecw_blob_list *l)
{
	struct ecw_request r;
	struct ecw_response resp;
	char num[16];
	int err;

	ecw_xml_blob_page_dispose(&l->page);
	l->at = 0;
	snprintf(num, sizeof(num), "%d", l->max_results);
	ecw_response_init(&resp);
	if ((err = blob_request(&r, l->c, "blob.list", "GET", l->container, NULL)) < 0 ||
	    (err = ecw_request_add_query(&r, "comp", "list")) < 0 ||
	    (l->prefix && (err = ecw_request_add_query(&r, "prefix", l->prefix)) < 0) ||
	    (*l->marker && (err = ecw_request_add_query(&r, "marker", l->marker)) < 0) ||
	    (err = ecw_request_add_query(&r, "maxresults", num)) < 0 ||
	    (l->metadata && (err = ecw_request_add_query(&r, "include", "metadata")) < 0) ||
	    (err = ecw_client_send(&resp, l->c, &r)) < 0 ||
	    (err = header_time(&l->date, &resp, "Date")) < 0 ||
	    (err = ecw_xml_parse_blob_list(&l->page, resp.body.ptr, resp.body.len)) < 0)
		goto done;
	l->pages++;
	free(l->marker);
	l->marker = l->page.next_marker;
	l->page.next_marker = NULL;
	l->done = !*l->marker;
done:
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

int ecw_blob_list_next(struct ecw_blob_info **out, struct ecw_blob_list *l)
{
	int err;

	*out = NULL;
	/* A page may come empty with a marker: on to the next. */
	while (l->at == l->page.n) {
		if (l->done)
			return 0;
		if ((err = fetch_page(l)) < 0)
			return err;
	}
	*out = l->page.items[l->at];
	l->page.items[l->at++] = NULL;
	(*out)->service_date = l->date;
	return 0;
}

int ecw_blob_list_pages(const struct ecw_blob_list *l)
{
	return l->pages;
}

const char *ecw_blob_list_marker(const struct ecw_blob_list *l)
{
	return l->marker;
}

time_t ecw_blob_list_date(const struct ecw_blob_list *l)
{
	return l->date;
}

void ecw_blob_list_free(struct ecw_blob_list *l)
{
	if (!l)
		return;
	ecw_xml_blob_page_dispose(&l->page);
	free(l->prefix);
	free(l->marker);
	free(l);
}
