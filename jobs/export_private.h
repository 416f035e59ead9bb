/* SPDX-License-Identifier: MIT */
/* export_private.h - what the export job's parts share, and no one else
 * (with its unit tests): the settings (jobs/export.c), a run
 * (jobs/export_run.c), a blob read line by line in ranges and a blob
 * written line by line in blocks (jobs/export_io.c), and the order of
 * keys. Both streams are heap objects the caller frees
 * (ecw_export_reader_free, ecw_export_writer_free); each holds at most one
 * chunk or block (ECW_EXPORT_CHUNK, ECW_BLOB_BLOCK_MAX) and one line, so a
 * window of any size takes bounded memory. */
#ifndef ECW_EXPORT_PRIVATE_H
#define ECW_EXPORT_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>

#include "ecw_buf.h"
#include "ecw_err.h"
#include "ecw_job.h"
#include "ecw_storage.h"

/* How much of a blob one ranged read takes. */
#define ECW_EXPORT_CHUNK ((size_t)4 * 1024 * 1024)
/* The longest line: one entity's JSON (an entity is at most 1 MiB in the
 * service, counted in UTF-16; its JSON stays under 4 MiB even when every
 * character is written \u00XX). */
#define ECW_EXPORT_LINE_MAX ((size_t)4 * 1024 * 1024)

/* ---- the settings (jobs/export.c), read-only once parsed ---- */

struct ecw_template;
struct json_object;

enum ecw_export_rows {
	ECW_EXPORT_ROWS_ANY,            /* the partition is the window: every row */
	ECW_EXPORT_ROWS_UNIX,           /* RowKey: 10 digits of Unix seconds */
	ECW_EXPORT_ROWS_INVERTED_TICKS, /* RowKey: 19 digits of inverted .NET ticks */
};

struct ecw_export {
	char *source, *container;
	struct ecw_template *from_pk, *name; /* over the message's fields and {window} */
	enum ecw_export_rows rows;
	int64_t window_ms;
	bool delete_after;
	bool gzip; /* compress: gzip (the name ends in .gz) */
	/* The templates' message fields, NULL-terminated (not window, which
	 * the window_start gives, nor window_start itself). */
	char **fields;
	/* Why the audit cannot read a row's window back from its keys (a
	 * sentence naming the placeholder; its limit), "" when it can. */
	char audit_limit[256];
};

/* The settings' reader and the rest of the ops table (jobs/export.c; the
 * table itself is jobs/export_audit.c's, on top). */
int ecw_export_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs);
int ecw_export_prepare(const void *settings, struct ecw_client *c);
void ecw_export_free(void *settings);
const char *ecw_export_source(const void *settings);
const char *const *ecw_export_message_fields(const void *settings);
int64_t ecw_export_window_ms(const void *settings);

/* The blob's ecw_format metadata: "jsonl", or "jsonl+gzip" (jobs/export_run.c). */
const char *ecw_export_format(const struct ecw_export *x);

/* One message (jobs/export_run.c; settings: a struct ecw_export). */
int ecw_export_run(const void *settings, struct ecw_job_ctx *ctx) ECW_MUST_USE;

/* One window as a run names it from its message (jobs/export_run.c): the
 * start, the partition, the blob's name and the $filter of its rows. The
 * struct is the caller's (_init, _dispose). */
struct ecw_export_window {
	int64_t start_s;
	char iso[32]; /* the start, YYYY-MM-DDTHH:MM:SSZ */
	char pk[ECW_KEY_MAX + 1];
	struct ecw_buf name, filter;
};
void ecw_export_window_init(struct ecw_export_window *w);
void ecw_export_window_dispose(struct ecw_export_window *w);
/* w from message's window_start and fields, as a run of job renders them:
 * ECW_EINVALID (a permanent error) when the message lacks one, or names a
 * partition or blob the service would refuse. */
int ecw_export_window_names(struct ecw_export_window *w, const struct ecw_export *x,
			    const struct json_object *message, const char *job) ECW_MUST_USE;
/* 0 when the blob of info (at name) is an export of x's format, which a run
 * merges with; ECW_EINVALID naming it otherwise (no ecw_format metadata: no
 * export; another format). */
int ecw_export_blob_check(const struct ecw_export *x, const struct ecw_blob_info *info,
			  const char *name) ECW_MUST_USE;

/* ---- reading (jobs/export_io.c) ---- */

/* The lines of blob name in container, read in ranges of ECW_EXPORT_CHUNK,
 * each If-Match etag (the version the export merges with: a blob changed
 * since is ECW_EPRECONDITION, and the export starts over); gzip: a gzip
 * stream, inflated across ranges (a blob that is not a whole one is
 * ECW_EINVALID naming it). */
struct ecw_export_reader;
int ecw_export_reader_new(struct ecw_export_reader **out, struct ecw_client *c, const char *container,
			  const char *name, const char *etag, bool gzip) ECW_MUST_USE;
/* The next line without its '\n' (*line valid until the next call), or
 * *line NULL at the end. A line over ECW_EXPORT_LINE_MAX is ECW_ETOOLARGE; a
 * last line without '\n' is ECW_EINVALID (a blob cut short): both name the
 * blob. */
int ecw_export_reader_next(struct ecw_export_reader *r, const char **line, size_t *len) ECW_MUST_USE;
void ecw_export_reader_free(struct ecw_export_reader *r);

/* A blob's lines with their heads, in the order of keys (jobs/export_run.c):
 * the current line (NULL at the end) and its keys and version, checked
 * against the line before. The struct is the caller's (_init, _dispose;
 * container and name are borrowed, for messages); rd, set by the caller
 * (ecw_export_reader_new), is freed by _dispose. */
struct ecw_export_lines {
	const char *container, *name;
	struct ecw_export_reader *rd;
	const char *line;
	size_t len;
	struct ecw_buf pk, rk, etag;     /* the line's keys and version */
	struct ecw_buf prev_pk, prev_rk; /* the line before, for the order */
};
void ecw_export_lines_init(struct ecw_export_lines *b, const char *container, const char *name);
void ecw_export_lines_dispose(struct ecw_export_lines *b);
/* The next line (none without rd). ECW_EINVALID naming the blob for a line
 * that is no entity, or not after the line before; the reader's errors. */
int ecw_export_lines_next(struct ecw_export_lines *b) ECW_MUST_USE;
/* The current line's place against keys (pk, rk): <0, 0, >0; the end
 * comes after every key. */
int ecw_export_lines_cmp(const struct ecw_export_lines *b, const char *pk, const char *rk);

/* ---- writing (jobs/export_io.c) ---- */

/* Lines written into blob name in container as blocks of at most
 * ECW_BLOB_BLOCK_MAX, under ids that start with run_id (this run's own, so
 * that two runs of one window never replace each other's blocks), and
 * committed at the end; nothing is visible before the commit. gzip: one
 * gzip stream across the blocks (zlib's default level; the same lines give
 * the same bytes). */
struct ecw_export_writer;
int ecw_export_writer_new(struct ecw_export_writer **out, struct ecw_client *c, const char *container,
			  const char *name, const char run_id[9], bool gzip) ECW_MUST_USE;
/* Appends line and a '\n'; puts a block when the buffer is full (crash
 * point export.block after each). */
int ecw_export_writer_add(struct ecw_export_writer *w, const char *line, size_t len) ECW_MUST_USE;
/* Puts what is buffered and commits the blocks in order, with o's content
 * type, metadata and conditions (ecw_blob_put_block_list's errors). */
int ecw_export_writer_commit(char **etag_out, struct ecw_export_writer *w,
			     const struct ecw_blob_put_options *o) ECW_MUST_USE;
void ecw_export_writer_free(struct ecw_export_writer *w);

/* A line's keys and version: the head the export writes,
 * {"PartitionKey":"..","RowKey":"..","odata.etag":"..",... read without
 * parsing the rest; any other layout by parsing the whole line (its etag
 * then "" when it has none). ECW_EINVALID when the line is no entity. The
 * buffers are the caller's (reset first). */
int ecw_export_line_head(struct ecw_buf *pk, struct ecw_buf *rk, struct ecw_buf *etag, const char *line,
			 size_t len) ECW_MUST_USE;

/* ---- the order of keys (jobs/export_run.c) ---- */

/* The table's order of two keys (valid UTF-8): ordinal over UTF-16 code
 * units, as the service sorts PartitionKey and RowKey, so a character
 * beyond U+FFFF (a surrogate pair) sorts before U+E000..U+FFFF, unlike
 * strcmp's byte order. <0, 0 or >0. */
int ecw_export_key_cmp(const char *a, const char *b);

#endif
