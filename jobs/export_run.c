/* SPDX-License-Identifier: MIT */
/* export_run.c - one message of the export job (settings: jobs/export.c):
 * {"job":"applogs-hourly","app":"web","window_start":"2026-11-29T21:00Z"}.
 *
 *   1. the blob's properties (its ETag B,     a blob that is no export (no
 *      or absent)                             ecw_format metadata) is a
 *                                             permanent error: never merged
 *                                             over
 *   2. merge, streaming: the window's rows    both sides sorted by keys; on
 *      (a query, page by page) and the        equal keys the row wins; lines
 *      blob's lines (ranged reads If-Match    out of order are an error, as
 *      B), written as blocks of 4 MiB         is a blob changed meanwhile
 *                                             (412: start over)
 *   3. commit the blocks: Put Block List      412 / 409 (another run
 *      If-Match B (If-None-Match "*" when     committed): start over; no row
 *      there was none), with the count and    in the table: nothing to
 *      the first and last times in the        commit; nothing new or
 *      metadata                               changed: no commit either
 *   4. delete_after: read the committed       a batch refused (a row changed
 *      blob again and delete the rows whose   or gone since step 2 read it):
 *      lines step 2 wrote from rows, in       each of its rows alone,
 *      transactions of up to 100, each        If-Match; those refused stay
 *      If-Match the ETag its line carries     for the next export
 *      ("odata.etag", after the keys: the
 *      version step 2 read). Step 2 keeps
 *      which lines those are as spans of
 *      line numbers; past ROW_SPANS_MAX
 *      spans (late rows between many old
 *      lines) the pass queries the window's
 *      keys and ETags instead, and deletes
 *      each row whose ETag is its line's
 *
 * Crash safety (a crash = the process dies right after the step; the
 * message comes back and the job runs again):
 *   after a block (export.block): nothing is committed; the blob is as it
 *       was and every row still in the table. The rerun writes blocks under
 *       its own run id, so a dead run's blocks are never committed.
 *   after the commit (export.committed): every row is in the table and in
 *       the blob, once (the merge keeps one line per key). The rerun merges
 *       again: the rows equal their lines, so it commits nothing and goes on
 *       to step 4.
 *   after a delete batch (export.deleted): the deleted rows are in the blob
 *       only, the rest in both. The rerun keeps the blob's lines of the
 *       deleted rows (a line no row replaces stays), and deletes the rest.
 * So every row is in the table or the blob whenever the process dies, and
 * once in the blob. Late rows: a row written after its window was exported
 * is merged into the blob by the window's next export (a schedule's next
 * pass, or a message sent again); nothing in the blob is overwritten away.
 * Competing runs of one window: each commits only If-Match the blob it
 * merged with, so the loser starts over from the winner's blob; a delete
 * happens only for a row whose current version (its ETag, and the delete
 * If-Match it) is the one a line of the committed blob holds, so no run can
 * delete what the blob lacks.
 *
 * Memory: a page of rows, one chunk of the blob, one block and one line
 * (jobs/export_io.c), whatever the window's size, and at most ROW_SPANS_MAX
 * spans (64 KiB); the delete pass holds at most one transaction's keys. */
#include <inttypes.h>
#include <json-c/json.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_codec.h"
#include "ecw_job.h"
#include "export_private.h"
#include "jobs_private.h"
#include "rollup_private.h"

#define MAX_ROUNDS 5
#define RESTART 1
/* The most spans of row lines a merge keeps for the delete pass (16 bytes
 * each); one span when the blob was new or every late row came at its end. */
#define ROW_SPANS_MAX 4096

/* ---- the order of keys -------------------------------------------------------------------------- */

/* The code point at s (valid UTF-8), ranked in UTF-16 code unit order: a
 * character beyond U+FFFF (a surrogate pair, D800..DFFF first) sorts after
 * U+D7FF and before U+E000..U+FFFF. */
static uint32_t utf16_rank(const unsigned char *s)
{
	uint32_t c = s[0];
	int more = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;

	if (more)
		c &= 0x3Fu >> more;
	for (int i = 1; i <= more && s[i]; i++)
		c = c << 6 | (s[i] & 0x3Fu);
	return c >= 0xE000 && c <= 0xFFFF ? c + 0x200000 : c;
}

int ecw_export_key_cmp(const char *a, const char *b)
{
	size_t i = 0;

	while (a[i] && a[i] == b[i])
		i++;
	if (a[i] == b[i])
		return 0;
	if (!a[i] || !b[i])
		return a[i] ? 1 : -1;
	while (i > 0 && ((unsigned char)a[i] & 0xC0) == 0x80)
		i--; /* to the start of the character where they differ */
	uint32_t ra = utf16_rank((const unsigned char *)a + i), rb = utf16_rank((const unsigned char *)b + i);
	return ra < rb ? -1 : ra > rb ? 1 : 0;
}

static int keys_cmp(const char *pk_a, const char *rk_a, const char *pk_b, const char *rk_b)
{
	int c = ecw_export_key_cmp(pk_a, pk_b);
	return c ? c : ecw_export_key_cmp(rk_a, rk_b);
}

static int rows_cmp(const struct ecw_entity *a, const struct ecw_entity *b)
{
	return keys_cmp(ecw_entity_pk(a), ecw_entity_rk(a), ecw_entity_pk(b), ecw_entity_rk(b));
}

const char *ecw_export_format(const struct ecw_export *x)
{
	return x->gzip ? "jsonl+gzip" : "jsonl";
}

/* ---- one run ------------------------------------------------------------------------------------ */

struct run {
	const struct ecw_export *x;
	struct ecw_job_ctx *ctx;
	struct ecw_export_window w; /* the partition, the blob's name, the filter */
	char run_id[9];
	/* The round's counts */
	long long rows, lines, deleted, kept;
	bool changed; /* a row the blob lacked, or held otherwise */
	/* The first and last row times seen (inverted_ticks: .NET ticks; unix:
	 * seconds), made ISO at the commit (first, last: "" when not
	 * time-keyed). */
	bool timed;
	int64_t first_t, last_t;
	char first[32], last[32];
	/* The lines the merge wrote from rows, as spans [from, to) of line
	 * numbers (0 the first); over: more than spans_max, and the delete pass
	 * queries the table instead. */
	long long (*spans)[2];
	size_t nspans, spans_max;
	bool spans_over;
};

static int blocked(const struct run *u, int err)
{
	if (err != ECW_ENOCONTAINER)
		return err;
	err = ecw_error_set(
		ECW_ENOTABLE,
		"container '%s' does not exist: correct the name, or create it (the worker creates "
		"it with create_missing)",
		u->x->container);
	ecw_error_set_table(u->x->container, strlen(u->x->container));
	return err;
}

/* A row's time from its RowKey, into first_t/last_t (time-keyed rows
 * only; a RowKey of another form is left out of them). Digits only here:
 * made ISO once, at the commit (time_iso). */
static void note_time(struct run *u, const char *rk)
{
	int digits = u->x->rows == ECW_EXPORT_ROWS_INVERTED_TICKS ? 19 : 10;
	uint64_t v = 0;
	int64_t t;

	if (u->x->rows == ECW_EXPORT_ROWS_ANY)
		return;
	for (int i = 0; i < digits; i++) {
		if (rk[i] < '0' || rk[i] > '9')
			return;
		v = v * 10 + (uint64_t)(rk[i] - '0');
	}
	if (u->x->rows == ECW_EXPORT_ROWS_INVERTED_TICKS) {
		if (v > (uint64_t)ECW_TICKS_MAX)
			return;
		t = ECW_TICKS_MAX - (int64_t)v;
	} else {
		t = (int64_t)v;
	}
	if (!u->timed || t < u->first_t)
		u->first_t = t;
	if (!u->timed || t > u->last_t)
		u->last_t = t;
	u->timed = true;
}

/* first and last as ISO 8601, from first_t and last_t. */
static int time_iso(struct run *u)
{
	int err = 0;

	u->first[0] = u->last[0] = '\0';
	if (!u->timed)
		return 0;
	if (u->x->rows == ECW_EXPORT_ROWS_INVERTED_TICKS) {
		if ((err = ecw_template_ticks_to_iso(u->first, u->first_t)) == 0)
			err = ecw_template_ticks_to_iso(u->last, u->last_t);
	} else {
		ecw_rollup_iso(u->first, u->first_t);
		ecw_rollup_iso(u->last, u->last_t);
	}
	return err;
}

/* Line number line was written from a row: into the spans. */
static void note_row_line(struct run *u, long long line)
{
	if (u->spans_over)
		return;
	if (u->nspans > 0 && u->spans[u->nspans - 1][1] == line) {
		u->spans[u->nspans - 1][1]++;
		return;
	}
	if (!u->spans && !(u->spans = malloc(u->spans_max * sizeof(*u->spans)))) {
		u->spans_over = true; /* the delete pass queries instead */
		return;
	}
	if (u->nspans == u->spans_max) {
		u->spans_over = true;
		return;
	}
	u->spans[u->nspans][0] = line;
	u->spans[u->nspans][1] = line + 1;
	u->nspans++;
}

/* The window's rows, in the table's order of keys (select: NULL for
 * whole rows; the keys and ETag come with any). */
static int query_window(struct ecw_table_query **q, const struct run *u, const char *select)
{
	struct ecw_query_options qo = {.filter = ecw_buf_cstr(&u->w.filter), .select = select, .top = 1000};

	return ecw_table_query_new(q, u->ctx->client, u->x->source, &qo);
}

void ecw_export_lines_init(struct ecw_export_lines *b, const char *container, const char *name)
{
	memset(b, 0, sizeof(*b));
	b->container = container;
	b->name = name;
	ecw_buf_init(&b->pk, ECW_KEY_MAX + 1);
	ecw_buf_init(&b->rk, ECW_KEY_MAX + 1);
	ecw_buf_init(&b->etag, 256);
	ecw_buf_init(&b->prev_pk, ECW_KEY_MAX + 1);
	ecw_buf_init(&b->prev_rk, ECW_KEY_MAX + 1);
}

void ecw_export_lines_dispose(struct ecw_export_lines *b)
{
	ecw_export_reader_free(b->rd);
	b->rd = NULL;
	ecw_buf_dispose(&b->pk);
	ecw_buf_dispose(&b->rk);
	ecw_buf_dispose(&b->etag);
	ecw_buf_dispose(&b->prev_pk);
	ecw_buf_dispose(&b->prev_rk);
}

int ecw_export_lines_next(struct ecw_export_lines *b)
{
	struct ecw_buf t;
	bool had = b->line != NULL;
	int err;

	if (!b->rd)
		return 0;
	t = b->prev_pk, b->prev_pk = b->pk, b->pk = t;
	t = b->prev_rk, b->prev_rk = b->rk, b->rk = t;
	if ((err = ecw_export_reader_next(b->rd, &b->line, &b->len)) < 0 || !b->line)
		return err;
	if (ecw_export_line_head(&b->pk, &b->rk, &b->etag, b->line, b->len) < 0)
		return ecw_error_set(ECW_EINVALID,
				     "blob '%.200s' in container %s holds a line that is no entity: %s",
				     b->name, b->container, ecw_error_last()->message);
	if (had && keys_cmp(ecw_buf_cstr(&b->prev_pk), ecw_buf_cstr(&b->prev_rk), ecw_buf_cstr(&b->pk),
			    ecw_buf_cstr(&b->rk)) >= 0)
		return ecw_error_set(
			ECW_EINVALID,
			"blob '%.200s' in container %s is not sorted by keys (at %.100s/%.100s): not "
			"merged",
			b->name, b->container, ecw_buf_cstr(&b->pk), ecw_buf_cstr(&b->rk));
	return 0;
}

int ecw_export_lines_cmp(const struct ecw_export_lines *b, const char *pk, const char *rk)
{
	if (!b->line)
		return 1;
	return keys_cmp(ecw_buf_cstr(&b->pk), ecw_buf_cstr(&b->rk), pk, rk);
}

/* The current line's place against row's keys (the end comes last). */
static int line_vs_row(const struct ecw_export_lines *b, const struct ecw_entity *row)
{
	return ecw_export_lines_cmp(b, ecw_entity_pk(row), ecw_entity_rk(row));
}

/* A row's line: its JSON (ecw_entity_to_json) with its ETag after the keys,
 * as the service's own JSON for an entity carries it:
 * {"PartitionKey":..,"RowKey":..,"odata.etag":"W/\"..\"",...}. The ETag
 * tells the delete pass which version the blob holds. */
static int make_line(struct ecw_buf *line, const struct ecw_entity *row)
{
	const char *pk = ecw_entity_pk(row), *rk = ecw_entity_rk(row), *etag = ecw_entity_etag(row);
	int err;

	ecw_buf_reset(line);
	if ((err = ecw_buf_adds(line, "{\"PartitionKey\":")) < 0 ||
	    (err = ecw_json_quote(line, pk, strlen(pk))) < 0 ||
	    (err = ecw_buf_adds(line, ",\"RowKey\":")) < 0 ||
	    (err = ecw_json_quote(line, rk, strlen(rk))) < 0 ||
	    (err = ecw_buf_adds(line, ",\"odata.etag\":")) < 0 ||
	    (err = ecw_json_quote(line, etag ? etag : "", etag ? strlen(etag) : 0)) < 0)
		return err;
	return ecw_entity_props_to_json(line, row);
}

/* The next row of the query, which must come after prev (the table's order). */
static int row_next(struct ecw_entity **row, struct ecw_table_query *q, const struct run *u)
{
	struct ecw_entity *prev = *row;
	int err = ecw_table_query_next(row, q);

	if (err == 0 && prev && *row && rows_cmp(prev, *row) >= 0)
		err = ecw_error_set(
			ECW_ERROR,
			"export %s: the table's rows came out of key order at %.100s/%.100s (this "
			"worker's order of keys differs from the service's): nothing written",
			u->x->source, ecw_entity_pk(*row), ecw_entity_rk(*row));
	ecw_entity_free(prev);
	return err;
}

/* The metadata of the blob to commit (values in bufs the caller disposes). */
static int commit_meta(struct ecw_blob_meta meta[8], size_t *n, struct ecw_buf *pk, struct ecw_buf *count,
		       const struct run *u)
{
	int err;

	if ((err = ecw_escape_pct(pk, u->w.pk, strlen(u->w.pk))) < 0 ||
	    (err = ecw_buf_addi(count, u->lines)) < 0)
		return err;
	*n = 0;
	meta[(*n)++] = (struct ecw_blob_meta){"ecw_format", ecw_export_format(u->x)};
	meta[(*n)++] = (struct ecw_blob_meta){"ecw_source_table", u->x->source};
	meta[(*n)++] = (struct ecw_blob_meta){"ecw_partition_key", ecw_buf_cstr(pk)};
	meta[(*n)++] = (struct ecw_blob_meta){"ecw_window_start", u->w.iso};
	meta[(*n)++] = (struct ecw_blob_meta){"ecw_count", ecw_buf_cstr(count)};
	if (u->timed) {
		meta[(*n)++] = (struct ecw_blob_meta){"ecw_first_time", u->first};
		meta[(*n)++] = (struct ecw_blob_meta){"ecw_last_time", u->last};
	}
	return 0;
}

static int commit(char **etag_out, struct ecw_export_writer *w, struct run *u, const char *etag)
{
	struct ecw_blob_meta meta[8];
	struct ecw_blob_put_options o = {.content_type =
						 u->x->gzip ? "application/gzip" : "application/x-ndjson",
					 .if_match = etag,
					 .if_none_match = etag ? NULL : "*",
					 .meta = meta};
	struct ecw_buf pk, count;
	int err;

	ecw_buf_init(&pk, 0);
	ecw_buf_init(&count, 0);
	if ((err = time_iso(u)) == 0 && (err = commit_meta(meta, &o.n_meta, &pk, &count, u)) == 0 &&
	    (err = ecw_job_check_lease(u->ctx)) == 0)
		err = ecw_export_writer_commit(etag_out, w, &o);
	ecw_buf_dispose(&pk);
	ecw_buf_dispose(&count);
	return err;
}

/* Steps 2 and 3: *etag_out the ETag of the blob that holds the window's
 * rows (the new one, or etag when nothing changed), NULL when the table had
 * none. */
static int merge_and_commit(char **etag_out, struct run *u, const char *etag)
{
	struct ecw_table_query *q = NULL;
	struct ecw_export_writer *w = NULL;
	struct ecw_entity *row = NULL;
	struct ecw_buf line;
	struct ecw_export_lines b;
	int err;

	*etag_out = NULL;
	ecw_export_lines_init(&b, u->x->container, ecw_buf_cstr(&u->w.name));
	ecw_buf_init(&line, ECW_EXPORT_LINE_MAX + 256);
	if ((err = query_window(&q, u, NULL)) < 0 ||
	    (err = ecw_export_writer_new(&w, u->ctx->client, u->x->container, ecw_buf_cstr(&u->w.name),
					 u->run_id, u->x->gzip)) < 0)
		goto done;
	if (etag && (err = ecw_export_reader_new(&b.rd, u->ctx->client, u->x->container,
						 ecw_buf_cstr(&u->w.name), etag, u->x->gzip)) < 0)
		goto done;
	/* No row in the window: nothing to export, the blob is left unread. */
	if ((err = row_next(&row, q, u)) < 0 || !row || (err = ecw_export_lines_next(&b)) < 0)
		goto done;
	while (row || b.line) {
		int c = !row ? 1 : -line_vs_row(&b, row);
		if (c <= 0) {
			if ((err = make_line(&line, row)) < 0 ||
			    (err = ecw_export_writer_add(w, line.ptr, line.len)) < 0)
				goto done;
			u->changed |= c < 0 || line.len != b.len || memcmp(line.ptr, b.line, line.len) != 0;
			note_time(u, ecw_entity_rk(row));
			note_row_line(u, u->lines);
			u->rows++;
			if ((err = row_next(&row, q, u)) < 0 ||
			    (c == 0 && (err = ecw_export_lines_next(&b)) < 0))
				goto done;
		} else {
			if ((err = ecw_export_writer_add(w, b.line, b.len)) < 0)
				goto done;
			note_time(u, ecw_buf_cstr(&b.rk));
			if ((err = ecw_export_lines_next(&b)) < 0)
				goto done;
		}
		u->lines++;
	}
	if (u->rows == 0 || !u->changed) {
		/* Nothing to commit (blocks put are dropped by the service). */
		if (u->rows && !(*etag_out = strdup(etag)))
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = commit(etag_out, w, u, etag)) == 0)
		ecw_crash_point("export.committed");
done:
	ecw_entity_free(row);
	ecw_export_lines_dispose(&b);
	ecw_export_writer_free(w);
	ecw_table_query_free(q);
	ecw_buf_dispose(&line);
	return err;
}

/* A row to delete: an entity of its keys (or the row as queried) and the
 * ETag to delete it If-Match (NULL: the entity's own). */
struct doomed {
	struct ecw_entity *e;
	char *etag;
};

static const char *doomed_etag(const struct doomed *d)
{
	return d->etag ? d->etag : ecw_entity_etag(d->e);
}

static void doomed_free(struct doomed *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ecw_entity_free(rows[i].e);
		free(rows[i].etag);
	}
}

/* A transaction of deletes: n rows of one partition, If-Match their ETags.
 * Refused as a whole (a row changed or gone since it was read), each goes
 * alone; those refused again stay for the next export. Frees the rows. */
static int delete_rows(struct run *u, struct doomed *rows, size_t n)
{
	struct ecw_batch *tx = NULL;
	int err;

	if (n == 0)
		return 0;
	if ((err = ecw_job_check_lease(u->ctx)) < 0 || (err = ecw_batch_new(&tx, u->x->source)) < 0)
		goto done;
	for (size_t i = 0; i < n && err == 0; i++)
		err = ecw_batch_add_borrowed(tx, ECW_BATCH_DELETE, rows[i].e, doomed_etag(&rows[i]));
	if (err == 0 && (err = ecw_batch_submit(u->ctx->client, tx)) == 0) {
		u->deleted += (long long)n;
		ecw_crash_point("export.deleted");
		goto done;
	}
	if (err != ECW_EPRECONDITION && err != ECW_ENOTFOUND)
		goto done;
	ecw_error_clear();
	err = 0;
	for (size_t i = 0; i < n && err == 0; i++) {
		err = ecw_table_delete(u->ctx->client, u->x->source, ecw_entity_pk(rows[i].e),
				       ecw_entity_rk(rows[i].e), doomed_etag(&rows[i]));
		if (err == 0) {
			u->deleted++;
		} else if (err == ECW_EPRECONDITION || err == ECW_ENOTFOUND) {
			u->kept++; /* changed since: the next export takes it */
			ecw_error_clear();
			err = 0;
		}
	}
done:
	ecw_batch_free(tx);
	doomed_free(rows, n);
	return err;
}

/* The current line's row into held[*n] (its keys and the ETag it carries),
 * and held's transaction submitted when full. A line without an ETag is
 * never deleted blind. */
static int hold_line(struct run *u, struct doomed *held, size_t *n, const struct ecw_export_lines *b)
{
	struct doomed *d = &held[*n];
	int err;

	if (b->etag.len == 0) {
		u->kept++;
		return 0;
	}
	*d = (struct doomed){0};
	(*n)++; /* freed with the others, whatever happens next */
	if ((err = ecw_entity_new(&d->e, ecw_buf_cstr(&b->pk), ecw_buf_cstr(&b->rk))) < 0)
		return err;
	if (!(d->etag = strdup(ecw_buf_cstr(&b->etag))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	if (*n < ECW_BATCH_MAX_OPS)
		return 0;
	err = delete_rows(u, held, *n);
	*n = 0;
	return err;
}

/* Step 4, as the merge's spans say: the committed blob (etag) read again,
 * and each line the merge wrote from a row deleted, If-Match the ETag the
 * line carries, which is the version the merge read. Lines kept from the
 * blob are never deleted: their rows are gone, or changed since (a row
 * still in the table replaced its line). The blob is read If-Match, so its
 * line numbers are the merge's. */
static int delete_spans(struct run *u, const char *etag)
{
	struct doomed held[ECW_BATCH_MAX_OPS];
	struct ecw_export_lines b;
	size_t n = 0, k = 0;
	int err;

	ecw_export_lines_init(&b, u->x->container, ecw_buf_cstr(&u->w.name));
	if ((err = ecw_export_reader_new(&b.rd, u->ctx->client, u->x->container, ecw_buf_cstr(&u->w.name),
					 etag, u->x->gzip)) < 0 ||
	    (err = ecw_export_lines_next(&b)) < 0)
		goto done;
	for (long long line = 0; b.line && k < u->nspans; line++) {
		if (line >= u->spans[k][0]) {
			if ((err = hold_line(u, held, &n, &b)) < 0)
				goto done;
			if (line + 1 == u->spans[k][1])
				k++;
		}
		if ((err = ecw_export_lines_next(&b)) < 0)
			goto done;
	}
	if (k < u->nspans) {
		err = ecw_error_set(ECW_ERROR,
				    "blob '%.200s' in container %s holds fewer lines than were committed: "
				    "nothing more deleted",
				    ecw_buf_cstr(&u->w.name), u->x->container);
		goto done;
	}
	err = delete_rows(u, held, n);
	n = 0;
done:
	doomed_free(held, n);
	ecw_export_lines_dispose(&b);
	return err;
}

/* Step 4 when the merge had too many spans to keep: the window's rows whose
 * version (ETag) the blob of etag holds, deleted. Only keys and ETags are
 * read: a row's ETag changes with every write, so an equal one is the row
 * exactly as the line holds it. A row is deleted only on an exact key and
 * ETag match, so rows out of order (the check row_next makes is skipped
 * after a row joins a transaction) can only be kept, never deleted
 * wrongly. */
static int delete_queried(struct run *u, const char *etag)
{
	struct doomed held[ECW_BATCH_MAX_OPS];
	struct ecw_entity *row = NULL;
	struct ecw_table_query *q = NULL;
	struct ecw_export_lines b;
	size_t n = 0;
	int err;

	ecw_export_lines_init(&b, u->x->container, ecw_buf_cstr(&u->w.name));
	if ((err = query_window(&q, u, "RowKey")) < 0 ||
	    (err = ecw_export_reader_new(&b.rd, u->ctx->client, u->x->container, ecw_buf_cstr(&u->w.name),
					 etag, u->x->gzip)) < 0 ||
	    (err = ecw_export_lines_next(&b)) < 0)
		goto done;
	while ((err = row_next(&row, q, u)) == 0 && row) {
		int c;
		while ((c = line_vs_row(&b, row)) < 0)
			if ((err = ecw_export_lines_next(&b)) < 0)
				goto done;
		if (c != 0 || !ecw_entity_etag(row) ||
		    strcmp(ecw_buf_cstr(&b.etag), ecw_entity_etag(row)) != 0) {
			u->kept++; /* not in the blob in this version: the next export takes it */
			continue;
		}
		held[n++] = (struct doomed){.e = row}; /* the transaction's now */
		row = NULL;
		if (n == ECW_BATCH_MAX_OPS) {
			err = delete_rows(u, held, n);
			n = 0;
			if (err < 0)
				goto done;
		}
	}
	if (err == 0) {
		err = delete_rows(u, held, n);
		n = 0;
	}
done:
	doomed_free(held, n);
	ecw_entity_free(row);
	ecw_export_lines_dispose(&b);
	ecw_table_query_free(q);
	return err;
}

int ecw_export_blob_check(const struct ecw_export *x, const struct ecw_blob_info *info, const char *name)
{
	const char *format = ecw_blob_info_meta(info, "ecw_format");

	if (!format)
		return ecw_error_set(ECW_EINVALID,
				     "blob '%.200s' in container %s exists and is no export (no ecw_format "
				     "metadata): it is neither merged nor overwritten",
				     name, x->container);
	if (strcmp(format, ecw_export_format(x)) != 0)
		return ecw_error_set(
			ECW_EINVALID,
			"blob '%.200s' in container %s is an export of format %.40s, and this job "
			"writes %s (compress changed?): it is neither merged nor overwritten",
			name, x->container, format, ecw_export_format(x));
	return 0;
}

static bool restart_err(int err)
{
	return err == ECW_EPRECONDITION || err == ECW_ECONFLICT || err == ECW_EBLOBNOTFOUND;
}

static int round_once(struct run *u)
{
	struct ecw_blob_info *info = NULL;
	char *etag = NULL;
	int err;

	u->rows = u->lines = u->deleted = u->kept = 0;
	u->changed = u->timed = u->spans_over = false;
	u->nspans = 0;
	err = ecw_blob_props(&info, u->ctx->client, u->x->container, ecw_buf_cstr(&u->w.name));
	if (err == ECW_EBLOBNOTFOUND) {
		ecw_error_clear();
		err = 0;
	}
	if (err == 0 && info)
		err = ecw_export_blob_check(u->x, info, ecw_buf_cstr(&u->w.name));
	if (err == 0)
		err = merge_and_commit(&etag, u, info ? info->etag : NULL);
	if (err == 0 && etag && u->x->delete_after)
		err = u->spans_over ? delete_queried(u, etag) : delete_spans(u, etag);
	ecw_blob_info_free(info);
	free(etag);
	if (restart_err(err)) {
		ecw_error_clear(); /* the blob changed under us: another run committed */
		return RESTART;
	}
	return blocked(u, err);
}

/* The message's fields as String properties, and the window as the
 * DateTime `window`, for the templates. */
static int message_entity(struct ecw_entity **out, const struct ecw_export_window *w,
			  const struct ecw_export *x, const struct json_object *message, const char *job)
{
	int err = ecw_entity_new(out, "p", "r");

	if (err == 0)
		err = ecw_entity_set_datetime(*out, "window", w->iso);
	if (err == 0)
		err = ecw_entity_set_string(*out, "window_start", w->iso, strlen(w->iso));
	for (size_t i = 0; err == 0 && x->fields && x->fields[i]; i++) {
		struct json_object *v = NULL;
		if (!json_object_object_get_ex(message, x->fields[i], &v) ||
		    !json_object_is_type(v, json_type_string) ||
		    strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
			err = ecw_error_set(
				ECW_EINVALID,
				"export job '%s': the message needs \"%s\" as a string (a template uses it)",
				job, x->fields[i]);
		else
			err = ecw_entity_set_string(*out, x->fields[i], json_object_get_string(v),
						    (size_t)json_object_get_string_len(v));
	}
	return err;
}

/* The window's rows: the partition, and with time-keyed rows the RowKey
 * range of the window (inverted ticks count down: the newest row's key is
 * the smallest). */
static int window_filter(struct ecw_export_window *w, const struct ecw_export *x)
{
	const int64_t per_s = ECW_TICKS_PER_SECOND, epoch = ECW_TICKS_UNIX_EPOCH, max = ECW_TICKS_MAX;
	int64_t end_s = w->start_s + x->window_ms / 1000;
	char lo[24], hi[24];
	int err;

	if ((err = ecw_buf_adds(&w->filter, "PartitionKey eq ")) < 0 ||
	    (err = ecw_escape_filter_string(&w->filter, w->pk)) < 0 || x->rows == ECW_EXPORT_ROWS_ANY)
		return err;
	if (x->rows == ECW_EXPORT_ROWS_UNIX) {
		snprintf(lo, sizeof(lo), "%010" PRId64, w->start_s);
		snprintf(hi, sizeof(hi), "%010" PRId64, end_s);
	} else {
		snprintf(lo, sizeof(lo), "%019" PRId64, max - (end_s * per_s + epoch) + 1);
		snprintf(hi, sizeof(hi), "%019" PRId64, max - (w->start_s * per_s + epoch) + 1);
	}
	if ((err = ecw_buf_adds(&w->filter, " and RowKey ge ")) < 0 ||
	    (err = ecw_escape_filter_string(&w->filter, lo)) < 0 ||
	    (err = ecw_buf_adds(&w->filter, " and RowKey lt ")) < 0)
		return err;
	return ecw_escape_filter_string(&w->filter, hi);
}

void ecw_export_window_init(struct ecw_export_window *w)
{
	memset(w, 0, sizeof(*w));
	ecw_buf_init(&w->name, 0);
	ecw_buf_init(&w->filter, 0);
}

void ecw_export_window_dispose(struct ecw_export_window *w)
{
	ecw_buf_dispose(&w->name);
	ecw_buf_dispose(&w->filter);
}

int ecw_export_window_names(struct ecw_export_window *w, const struct ecw_export *x,
			    const struct json_object *message, const char *job)
{
	struct ecw_entity *fields = NULL;
	struct json_object *ws = NULL;
	struct ecw_buf pk;
	int err;

	ecw_buf_reset(&w->name);
	ecw_buf_reset(&w->filter);
	w->pk[0] = '\0';
	if (!message || !json_object_object_get_ex(message, "window_start", &ws) ||
	    !json_object_is_type(ws, json_type_string))
		return ecw_error_set(ECW_EINVALID,
				     "export job '%s': the message needs \"window_start\" as a string", job);
	if ((err = ecw_rollup_window_parse(&w->start_s, json_object_get_string(ws), x->window_ms)) < 0)
		return err;
	ecw_rollup_iso(w->iso, w->start_s);
	ecw_buf_init(&pk, 0);
	if ((err = message_entity(&fields, w, x, message, job)) == 0 &&
	    (err = ecw_template_render(&pk, x->from_pk, fields, ECW_TEMPLATE_PLAIN)) == 0 &&
	    (err = ecw_entity_key_check(ecw_buf_cstr(&pk), "from_partition result")) == 0 &&
	    (err = ecw_template_render(&w->name, x->name, fields, ECW_TEMPLATE_PLAIN)) == 0 &&
	    (err = ecw_blob_name_check(ecw_buf_cstr(&w->name))) == 0) {
		memcpy(w->pk, ecw_buf_cstr(&pk), pk.len + 1);
		err = window_filter(w, x);
	}
	ecw_entity_free(fields);
	ecw_buf_dispose(&pk);
	return err;
}

/* ROW_SPANS_MAX; test builds may lower it (ECW_TEST_EXPORT_SPANS_MAX, a
 * whole number from 1), so that a test reaches the queried delete pass with
 * a few late rows. */
static size_t spans_max(void)
{
#ifdef ECW_TESTING
	const char *v = getenv("ECW_TEST_EXPORT_SPANS_MAX");
	char *end = NULL;
	long n = v ? strtol(v, &end, 10) : 0;

	if (v && end != v && *end == '\0' && n >= 1 && n < ROW_SPANS_MAX)
		return (size_t)n;
#endif
	return ROW_SPANS_MAX;
}

int ecw_export_run(const void *settings, struct ecw_job_ctx *ctx)
{
	struct run u = {.x = settings, .ctx = ctx, .spans_max = spans_max()};
	unsigned char rnd[4];
	int err;

	ecw_export_window_init(&u.w);
	if ((err = ecw_export_window_names(&u.w, u.x, ctx->message, ctx->job)) < 0)
		goto done;
	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		err = ecw_error_set(ECW_ERROR, "no random bytes for the blocks' ids");
		goto done;
	}
	snprintf(u.run_id, sizeof(u.run_id), "%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
	for (int round = 0; round < MAX_ROUNDS; round++) {
		if ((err = round_once(&u)) == RESTART)
			continue;
		if (err == 0)
			snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail),
				 "%lld rows, %lld lines, %lld deleted", u.rows, u.lines, u.deleted);
		goto done;
	}
	err = ecw_error_set(ECW_ETRANSIENT, "export %s: blob '%.200s' kept changing under us (%d rounds)",
			    u.x->source, ecw_buf_cstr(&u.w.name), MAX_ROUNDS);
done:
	ecw_export_window_dispose(&u.w);
	free(u.spans);
	return err;
}
