/* SPDX-License-Identifier: MIT */
/* export_io.c - the export job's blob streams (export_private.h): a blob
 * read line by line through ranged reads, and a blob written line by line
 * through blocks committed at the end, either of them through zlib's gzip
 * stream when the job compresses. Each holds one range, one block (and
 * zlib's buffers) and the line being cut, so memory stays flat whatever the
 * window's size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ecw_crash.h"
#include "ecw_entity.h"
#include "export_private.h"

/* ---- reading ------------------------------------------------------------------------------------ */

/* What inflate writes at a time: the lines are cut from it. */
#define INFLATED_MAX ((size_t)1024 * 1024)

struct ecw_export_reader {
	struct ecw_client *c;
	char *container, *name, *etag;
	long long offset;   /* the next range's start */
	bool ranges_done;   /* the last range is in */
	struct ecw_buf raw; /* a range as read */
	/* gzip: the stream inflated across ranges into out */
	bool gzip, z_ready, z_done;
	z_stream z;
	char *out;
	size_t raw_pos;
	/* The bytes lines are cut from: raw (plain) or out (gzip). */
	const char *data;
	size_t len, pos;
	bool at_end;          /* no byte after data */
	struct ecw_buf carry; /* a line cut by the data's end */
};

int ecw_export_reader_new(struct ecw_export_reader **out, struct ecw_client *c, const char *container,
			  const char *name, const char *etag, bool gzip)
{
	struct ecw_export_reader *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r || !(r->container = strdup(container)) || !(r->name = strdup(name)) ||
	    !(r->etag = strdup(etag)) || (gzip && !(r->out = malloc(INFLATED_MAX)))) {
		ecw_export_reader_free(r);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	r->c = c;
	r->gzip = gzip;
	ecw_buf_init(&r->raw, ECW_EXPORT_CHUNK);
	ecw_buf_init(&r->carry, ECW_EXPORT_LINE_MAX + 1);
	if (gzip) {
		if (inflateInit2(&r->z, 15 + 16) != Z_OK) {
			ecw_export_reader_free(r);
			return ecw_error_set(ECW_ENOMEM, "zlib: no memory for inflate");
		}
		r->z_ready = true;
	}
	*out = r;
	return 0;
}

void ecw_export_reader_free(struct ecw_export_reader *r)
{
	if (!r)
		return;
	if (r->z_ready)
		inflateEnd(&r->z);
	ecw_buf_dispose(&r->raw);
	ecw_buf_dispose(&r->carry);
	free(r->out);
	free(r->container);
	free(r->name);
	free(r->etag);
	free(r);
}

/* The next range into raw; ranges_done once the blob has no more. */
static int read_range(struct ecw_export_reader *r)
{
	struct ecw_blob_info *info = NULL;
	int err;

	r->raw_pos = 0;
	err = ecw_blob_get_range(&r->raw, &info, r->c, r->container, r->name, r->offset, ECW_EXPORT_CHUNK,
				 r->etag);
	if (err == 0) {
		r->offset += (long long)r->raw.len;
		r->ranges_done = r->raw.len == 0 || r->offset >= info->total_length;
	}
	ecw_blob_info_free(info);
	return err;
}

static int not_gzip(const struct ecw_export_reader *r)
{
	return ecw_error_set(ECW_EINVALID, "blob '%.200s' in container %s is no whole gzip stream (%s)",
			     r->name, r->container, r->z.msg ? r->z.msg : "cut short");
}

/* gzip: inflates up to INFLATED_MAX bytes into out. */
static int inflate_some(struct ecw_export_reader *r)
{
	int err;

	r->z.next_out = (Bytef *)r->out;
	r->z.avail_out = (uInt)INFLATED_MAX;
	while (r->z.avail_out > 0 && !r->z_done) {
		if (r->raw_pos >= r->raw.len) {
			if (r->ranges_done)
				return not_gzip(r); /* the stream has no end */
			if ((err = read_range(r)) < 0)
				return err;
			continue;
		}
		r->z.next_in = (Bytef *)r->raw.ptr + r->raw_pos;
		r->z.avail_in = (uInt)(r->raw.len - r->raw_pos);
		int rc = inflate(&r->z, Z_NO_FLUSH);
		r->raw_pos = r->raw.len - r->z.avail_in;
		if (rc == Z_STREAM_END)
			r->z_done = true;
		else if (rc != Z_OK && rc != Z_BUF_ERROR)
			return not_gzip(r);
	}
	r->data = r->out;
	r->len = INFLATED_MAX - r->z.avail_out;
	r->at_end = r->len == 0;
	return 0;
}

/* The next bytes to cut lines from into data/len; at_end when none. */
static int fill(struct ecw_export_reader *r)
{
	int err;

	r->pos = r->len = 0;
	if (r->gzip)
		return inflate_some(r);
	if (r->ranges_done) {
		r->at_end = true;
		return 0;
	}
	if ((err = read_range(r)) < 0)
		return err;
	r->data = r->raw.ptr;
	r->len = r->raw.len;
	return 0;
}

static int line_too_long(const struct ecw_export_reader *r)
{
	return ecw_error_set(ECW_ETOOLARGE,
			     "blob '%.200s' in container %s holds a line over %zu MiB: no entity's", r->name,
			     r->container, ECW_EXPORT_LINE_MAX >> 20);
}

int ecw_export_reader_next(struct ecw_export_reader *r, const char **line, size_t *len)
{
	int err;

	*line = NULL;
	*len = 0;
	ecw_buf_reset(&r->carry);
	for (;;) {
		if (r->pos >= r->len) {
			if ((err = fill(r)) < 0)
				return err;
			if (!r->at_end)
				continue;
			if (r->carry.len == 0)
				return 0;
			return ecw_error_set(ECW_EINVALID,
					     "blob '%.200s' in container %s ends inside a line (cut short?)",
					     r->name, r->container);
		}
		const char *start = r->data + r->pos;
		const char *nl = memchr(start, '\n', r->len - r->pos);
		size_t n = nl ? (size_t)(nl - start) : r->len - r->pos;
		if (!nl || r->carry.len) {
			/* A line across ranges: gathered in carry. */
			if (r->carry.len + n > ECW_EXPORT_LINE_MAX)
				return line_too_long(r);
			if ((err = ecw_buf_add(&r->carry, start, n)) < 0)
				return err;
			r->pos += n + (nl != NULL);
			if (!nl)
				continue;
			*line = ecw_buf_cstr(&r->carry);
			*len = r->carry.len;
			return 0;
		}
		if (n > ECW_EXPORT_LINE_MAX)
			return line_too_long(r);
		r->pos += n + 1;
		*line = start;
		*len = n;
		return 0;
	}
}

/* ---- writing ------------------------------------------------------------------------------------ */

/* An id: the run's 8 hex digits and the block's number, 15 characters. */
#define BLOCK_ID_SIZE 16
/* What deflate writes at a time, before it goes into the block. */
#define DEFLATED_MAX ((size_t)64 * 1024)

struct ecw_export_writer {
	struct ecw_client *c;
	char *container, *name;
	char run_id[9];
	struct ecw_buf block;
	char (*ids)[BLOCK_ID_SIZE];
	size_t nids, cap;
	bool gzip, z_ready;
	z_stream z;
	char *zout; /* DEFLATED_MAX */
};

int ecw_export_writer_new(struct ecw_export_writer **out, struct ecw_client *c, const char *container,
			  const char *name, const char run_id[9], bool gzip)
{
	struct ecw_export_writer *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w || !(w->container = strdup(container)) || !(w->name = strdup(name)) ||
	    (gzip && !(w->zout = malloc(DEFLATED_MAX)))) {
		ecw_export_writer_free(w);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	w->c = c;
	w->gzip = gzip;
	memcpy(w->run_id, run_id, 9);
	ecw_buf_init(&w->block, ECW_BLOB_BLOCK_MAX);
	/* zlib's gzip header holds no time and no name: one input, one blob. */
	if (gzip) {
		if (deflateInit2(&w->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
		    Z_OK) {
			ecw_export_writer_free(w);
			return ecw_error_set(ECW_ENOMEM, "zlib: no memory for deflate");
		}
		w->z_ready = true;
	}
	*out = w;
	return 0;
}

void ecw_export_writer_free(struct ecw_export_writer *w)
{
	if (!w)
		return;
	if (w->z_ready)
		deflateEnd(&w->z);
	free(w->zout);
	ecw_buf_dispose(&w->block);
	free(w->ids);
	free(w->container);
	free(w->name);
	free(w);
}

/* What is buffered, as the next block. */
static int put_block(struct ecw_export_writer *w)
{
	int err;

	if (w->block.len == 0)
		return 0;
	if (w->nids == ECW_BLOB_BLOCKS_MAX)
		return ecw_error_set(ECW_ETOOLARGE,
				     "blob '%.200s' in container %s: over %d blocks of %zu MiB", w->name,
				     w->container, ECW_BLOB_BLOCKS_MAX, ECW_BLOB_BLOCK_MAX >> 20);
	if (w->nids == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		void *ids = realloc(w->ids, cap * sizeof(*w->ids));
		if (!ids)
			return ecw_error_set(ECW_ENOMEM, "out of memory");
		w->ids = ids;
		w->cap = cap;
	}
	snprintf(w->ids[w->nids], BLOCK_ID_SIZE, "%s-%06zu", w->run_id, w->nids);
	if ((err = ecw_blob_put_block(w->c, w->container, w->name, w->ids[w->nids], w->block.ptr,
				      w->block.len)) < 0)
		return err;
	w->nids++;
	ecw_buf_reset(&w->block);
	ecw_crash_point("export.block");
	return 0;
}

/* Bytes into the blocks, a block put whenever one is full (a line may
 * span two: the blob is their concatenation). */
static int block_add(struct ecw_export_writer *w, const char *p, size_t n)
{
	int err;

	while (n > 0) {
		size_t take = ECW_BLOB_BLOCK_MAX - w->block.len;
		take = take < n ? take : n;
		if ((err = ecw_buf_add(&w->block, p, take)) < 0)
			return err;
		p += take;
		n -= take;
		if (w->block.len == ECW_BLOB_BLOCK_MAX && (err = put_block(w)) < 0)
			return err;
	}
	return 0;
}

/* n bytes through deflate into the blocks; flush Z_FINISH ends the stream. */
static int deflate_add(struct ecw_export_writer *w, const char *p, size_t n, int flush)
{
	int rc, err;

	w->z.next_in = (Bytef *)p;
	w->z.avail_in = (uInt)n;
	do {
		w->z.next_out = (Bytef *)w->zout;
		w->z.avail_out = (uInt)DEFLATED_MAX;
		rc = deflate(&w->z, flush);
		if (rc == Z_STREAM_ERROR)
			return ecw_error_set(ECW_ERROR, "zlib: deflate failed");
		if ((err = block_add(w, w->zout, DEFLATED_MAX - w->z.avail_out)) < 0)
			return err;
	} while (w->z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
	return 0;
}

int ecw_export_writer_add(struct ecw_export_writer *w, const char *line, size_t len)
{
	int err;

	if (!w->gzip)
		return (err = block_add(w, line, len)) < 0 ? err : block_add(w, "\n", 1);
	return (err = deflate_add(w, line, len, Z_NO_FLUSH)) < 0 ? err : deflate_add(w, "\n", 1, Z_NO_FLUSH);
}

int ecw_export_writer_commit(char **etag_out, struct ecw_export_writer *w,
			     const struct ecw_blob_put_options *o)
{
	const char **ids;
	int err;

	if ((w->gzip && (err = deflate_add(w, NULL, 0, Z_FINISH)) < 0) || (err = put_block(w)) < 0)
		return err;
	if (!(ids = calloc(w->nids ? w->nids : 1, sizeof(*ids))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	for (size_t i = 0; i < w->nids; i++)
		ids[i] = w->ids[i];
	err = ecw_blob_put_block_list(etag_out, w->c, w->container, w->name, ids, w->nids, o);
	free(ids);
	return err;
}

/* ---- a line's head --------------------------------------------------------------------------- */

/* The JSON string at *p (its opening quote) decoded into out; *p moved past
 * its closing quote. false when it is no JSON string. */
static bool json_string(struct ecw_buf *out, const char **p, const char *end)
{
	const char *s = *p;

	if (s >= end || *s++ != '"')
		return false;
	while (s < end && *s != '"') {
		unsigned long c;
		if (*s != '\\') {
			const char *run = s;
			while (s < end && *s != '"' && *s != '\\')
				s++;
			if (ecw_buf_add(out, run, (size_t)(s - run)) < 0)
				return false;
			continue;
		}
		if (++s >= end)
			return false;
		switch (*s++) {
		case '"': c = '"'; break;
		case '\\': c = '\\'; break;
		case '/': c = '/'; break;
		case 'b': c = '\b'; break;
		case 'f': c = '\f'; break;
		case 'n': c = '\n'; break;
		case 'r': c = '\r'; break;
		case 't': c = '\t'; break;
		case 'u': {
			char hex[5] = {0};
			if (end - s < 4)
				return false;
			memcpy(hex, s, 4);
			s += 4;
			c = strtoul(hex, NULL, 16);
			if (c >= 0xD800 && c <= 0xDBFF && end - s >= 6 && s[0] == '\\' && s[1] == 'u') {
				memcpy(hex, s + 2, 4);
				unsigned long lo = strtoul(hex, NULL, 16);
				if (lo < 0xDC00 || lo > 0xDFFF)
					return false;
				c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
				s += 6;
			} else if (c >= 0xD800 && c <= 0xDFFF) {
				return false; /* a lone surrogate: no key holds one */
			}
			break;
		}
		default: return false;
		}
		char utf8[4];
		size_t n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
		if (n == 1)
			utf8[0] = (char)c;
		else {
			for (size_t i = n - 1; i > 0; i--, c >>= 6)
				utf8[i] = (char)(0x80 | (c & 0x3F));
			utf8[0] = (char)((n == 2 ? 0xC0 : n == 3 ? 0xE0 : 0xF0) | c);
		}
		if (ecw_buf_add(out, utf8, n) < 0)
			return false;
	}
	if (s >= end)
		return false;
	*p = s + 1;
	return true;
}

/* `"name":` at *p, moved past it. */
static bool member(const char **p, const char *end, const char *name)
{
	size_t n = strlen(name);

	if ((size_t)(end - *p) < n || memcmp(*p, name, n) != 0)
		return false;
	*p += n;
	return true;
}

int ecw_export_line_head(struct ecw_buf *pk, struct ecw_buf *rk, struct ecw_buf *etag, const char *line,
			 size_t len)
{
	const char *p = line, *end = line + len;
	struct ecw_entity *e = NULL;
	int err;

	ecw_buf_reset(pk);
	ecw_buf_reset(rk);
	ecw_buf_reset(etag);
	if (member(&p, end, "{\"PartitionKey\":") && json_string(pk, &p, end) &&
	    member(&p, end, ",\"RowKey\":") && json_string(rk, &p, end) &&
	    member(&p, end, ",\"odata.etag\":") && json_string(etag, &p, end) &&
	    !memchr(pk->ptr ? pk->ptr : "", '\0', pk->len) && !memchr(rk->ptr ? rk->ptr : "", '\0', rk->len))
		return 0;
	/* Another layout (or no ETag): the whole line, parsed. */
	ecw_buf_reset(pk);
	ecw_buf_reset(rk);
	ecw_buf_reset(etag);
	if ((err = ecw_entity_from_json(&e, line, len)) < 0)
		return err;
	if ((err = ecw_buf_adds(pk, ecw_entity_pk(e))) == 0 &&
	    (err = ecw_buf_adds(rk, ecw_entity_rk(e))) == 0 && ecw_entity_etag(e))
		err = ecw_buf_adds(etag, ecw_entity_etag(e));
	ecw_entity_free(e);
	return err;
}
