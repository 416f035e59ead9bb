/* SPDX-License-Identifier: MIT */
/* export_io.c - the export job's blob streams (export_private.h): a blob
 * read line by line through ranged reads, and a blob written line by line
 * through blocks committed at the end. Each holds one chunk or block and the
 * line being cut, so memory stays flat whatever the window's size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_crash.h"
#include "export_private.h"

/* ---- reading ------------------------------------------------------------------------------------ */

struct ecw_export_reader {
	struct ecw_client *c;
	char *container, *name, *etag;
	long long offset; /* the next range's start */
	bool at_end;      /* the last range is in */
	struct ecw_buf chunk;
	size_t pos;           /* where the next line starts in chunk */
	struct ecw_buf carry; /* a line cut by the chunk's end */
};

int ecw_export_reader_new(struct ecw_export_reader **out, struct ecw_client *c, const char *container,
			  const char *name, const char *etag)
{
	struct ecw_export_reader *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r || !(r->container = strdup(container)) || !(r->name = strdup(name)) ||
	    !(r->etag = strdup(etag))) {
		ecw_export_reader_free(r);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	r->c = c;
	ecw_buf_init(&r->chunk, ECW_EXPORT_CHUNK);
	ecw_buf_init(&r->carry, ECW_EXPORT_LINE_MAX + 1);
	*out = r;
	return 0;
}

void ecw_export_reader_free(struct ecw_export_reader *r)
{
	if (!r)
		return;
	ecw_buf_dispose(&r->chunk);
	ecw_buf_dispose(&r->carry);
	free(r->container);
	free(r->name);
	free(r->etag);
	free(r);
}

/* The next range into chunk; at_end once the blob has no more. */
static int read_range(struct ecw_export_reader *r)
{
	struct ecw_blob_info *info = NULL;
	int err;

	r->pos = 0;
	err = ecw_blob_get_range(&r->chunk, &info, r->c, r->container, r->name, r->offset, ECW_EXPORT_CHUNK,
				 r->etag);
	if (err == 0) {
		r->offset += (long long)r->chunk.len;
		r->at_end = r->chunk.len == 0 || r->offset >= info->total_length;
	}
	ecw_blob_info_free(info);
	return err;
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
		if (r->pos >= r->chunk.len) {
			if (r->at_end) {
				if (r->carry.len == 0)
					return 0;
				return ecw_error_set(
					ECW_EINVALID,
					"blob '%.200s' in container %s ends inside a line (cut short?)",
					r->name, r->container);
			}
			if ((err = read_range(r)) < 0)
				return err;
			continue;
		}
		const char *start = r->chunk.ptr + r->pos;
		const char *nl = memchr(start, '\n', r->chunk.len - r->pos);
		size_t n = nl ? (size_t)(nl - start) : r->chunk.len - r->pos;
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

struct ecw_export_writer {
	struct ecw_client *c;
	char *container, *name;
	char run_id[9];
	struct ecw_buf block;
	char (*ids)[BLOCK_ID_SIZE];
	size_t nids, cap;
};

int ecw_export_writer_new(struct ecw_export_writer **out, struct ecw_client *c, const char *container,
			  const char *name, const char run_id[9])
{
	struct ecw_export_writer *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w || !(w->container = strdup(container)) || !(w->name = strdup(name))) {
		ecw_export_writer_free(w);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	w->c = c;
	memcpy(w->run_id, run_id, 9);
	ecw_buf_init(&w->block, ECW_BLOB_BLOCK_MAX);
	*out = w;
	return 0;
}

void ecw_export_writer_free(struct ecw_export_writer *w)
{
	if (!w)
		return;
	ecw_buf_dispose(&w->block);
	free(w->ids);
	free(w->container);
	free(w->name);
	free(w);
}

size_t ecw_export_writer_blocks(const struct ecw_export_writer *w)
{
	return w->nids;
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

int ecw_export_writer_add(struct ecw_export_writer *w, const char *line, size_t len)
{
	int err;

	if (w->block.len + len + 1 > ECW_BLOB_BLOCK_MAX && (err = put_block(w)) < 0)
		return err;
	/* A line longer than a block spans blocks: the blob is their
	 * concatenation. */
	while (len + 1 > ECW_BLOB_BLOCK_MAX) {
		size_t n = ECW_BLOB_BLOCK_MAX - w->block.len;
		if ((err = ecw_buf_add(&w->block, line, n)) < 0 || (err = put_block(w)) < 0)
			return err;
		line += n;
		len -= n;
	}
	if ((err = ecw_buf_add(&w->block, line, len)) < 0 || (err = ecw_buf_addc(&w->block, '\n')) < 0)
		return err;
	return 0;
}

int ecw_export_writer_commit(char **etag_out, struct ecw_export_writer *w,
			     const struct ecw_blob_put_options *o)
{
	const char **ids;
	int err;

	if ((err = put_block(w)) < 0)
		return err;
	if (!(ids = calloc(w->nids ? w->nids : 1, sizeof(*ids))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	for (size_t i = 0; i < w->nids; i++)
		ids[i] = w->ids[i];
	err = ecw_blob_put_block_list(etag_out, w->c, w->container, w->name, ids, w->nids, o);
	free(ids);
	return err;
}
