/* SPDX-License-Identifier: MIT */
/* export_audit.c - the export job type (its ops table, on top of export.c
 * and export_run.c) and its audit (ecw_audit.h): the rows still in the
 * table, window by window, against the window's blob.
 *
 * One pass over the source table (keys and ETags only, page by page; with
 * --partition, that partition). A row is the job's when its PartitionKey
 * splits into from_partition's parts in exactly one way
 * (ecw_template_split) and the window's run, named from what the split
 * gives, reads that very partition (ecw_export_window_names renders it
 * again): the message fields come from the PartitionKey, the window from
 * the RowKey's digits (row_keys unix or inverted_ticks) or, with
 * row_keys: any, from the PartitionKey's {window:...}. Any other row is not
 * the job's and is passed over; what the plan cannot read back at all (a
 * padded message field, a name that uses a field the partition does not)
 * is the job's limit, never a clean result (export.c's audit_plan).
 *
 * A window's rows come one after the other in the table's order, and its
 * blob's lines in the same order: each window is judged by one merge of
 * the two, streaming (a page of rows, a 4 MiB range of the blob, one
 * line), once it is due, that is once the window after it has ended too
 * (a `window: previous` schedule sends a window's message within the
 * period after it). A window not yet due is not judged.
 *
 *   stale (rows)     delete_after, and rows of a due window are still in
 *                    the table: an export that did not run, or did not
 *                    finish (one finding per row, the first as example)
 *   missing (window) the window's blob does not exist
 *   stale (window)   the blob lacks rows of the table, or holds an older
 *                    version of one (its line's ETag is not the row's)
 *   orphan (window)  delete_after false: the blob holds lines of rows the
 *                    table no longer has (the count differs); never
 *                    repaired, an export keeps every line
 *   conflict         a blob at the window's name that is no export of this
 *                    job, one that is no readable export, or one whose
 *                    ecw_count is not its lines: never repaired
 *
 * A window finding names the container as its table and the blob's name
 * (split at its last '/'); its source is the window: the PartitionKey and
 * the window's start. --repair runs the export of the window (the message
 * a schedule would send, ecw_audit_converge_fields; --via-queue puts it)
 * once for all its findings, and then judges the window again through the
 * run's own query: a finding counts as repaired only when it is gone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ecw_audit.h"
#include "ecw_clock.h"
#include "export_private.h"
#include "jobs_private.h"
#include "rollup_private.h"

/* 1970-01-05T00:00:00Z, the first Monday: weeks are counted from it. */
#define FIRST_MONDAY_S INT64_C(345600)

/* The window being judged, and what its merge found. */
struct judged {
	struct ecw_export_lines b;
	struct ecw_blob_info *info; /* NULL: no blob */
	bool foreign;               /* a blob that is no export of this job */
	bool unreadable;            /* a line that is no entity, out of order, or cut short */
	bool changed;               /* the blob changed while it was read: not judged */
	uint64_t rows, absent, old, lines, orphan_lines;
	char first_rk[ECW_KEY_MAX + 1]; /* the first row's, the example */
};

struct group {
	bool open, ours, due;
	char pk[ECW_KEY_MAX + 1];
	int64_t start_s;
	char **fields; /* its message: "name=value", window_start last */
	struct ecw_export_window w;
	char *name;             /* the blob's name, cut at its last '/' ... */
	const char *dir, *base; /* ... into these (dir "" without one) */
	struct judged j;
};

struct audit {
	const struct ecw_export *x;
	struct ecw_audit_ctx *ctx;
	int64_t now_s;
	size_t *spans;
	/* The partition in hand and what its split gave. */
	char pk[ECW_KEY_MAX + 1];
	bool pk_known;
	int split; /* 1 the job's, 0 not, 2 more than one reading */
	int64_t pk_start_s;
	char **values; /* "name=value" for each of x->fields */
	bool ambiguous, odd_row_keys;
	struct group g;
};

static bool stopped(const struct ecw_audit_ctx *ctx)
{
	return ctx->stop && *ctx->stop;
}

/* ---- which window a row is in ------------------------------------------------------------------ */

static int64_t window_floor(int64_t t, int64_t window_s)
{
	int64_t base = window_s == ECW_ROLLUP_WEEK_MS / 1000 ? FIRST_MONDAY_S : 0, r = (t - base) % window_s;

	return t - (r < 0 ? r + window_s : r);
}

/* The time a time-keyed RowKey starts with (the digits row_keys names);
 * false when it does not (such rows are passed over: the limit says so). */
static bool row_key_time(int64_t *t, const struct ecw_export *x, const char *rk)
{
	size_t digits = x->rows == ECW_EXPORT_ROWS_UNIX ? 10 : 19;
	int64_t v = 0;

	for (size_t i = 0; i < digits; i++) {
		if (rk[i] < '0' || rk[i] > '9' || v > (ECW_TICKS_MAX - (rk[i] - '0')) / 10)
			return false; /* past DateTime.MaxValue: no time */
		v = v * 10 + (rk[i] - '0');
	}
	if (x->rows == ECW_EXPORT_ROWS_UNIX) {
		*t = v;
		return true;
	}
	if (ECW_TICKS_MAX - v < ECW_TICKS_UNIX_EPOCH)
		return false; /* past DateTime.MaxValue, or before 1970: no window */
	*t = (ECW_TICKS_MAX - v - ECW_TICKS_UNIX_EPOCH) / ECW_TICKS_PER_SECOND;
	return true;
}

static void strv_clear(char ***v)
{
	ecw_strv_free(*v);
	*v = NULL;
}

/* pk split into from_partition's parts: a->split, and with it the message
 * fields' values and (row_keys: any) the window's start. */
static int read_partition(struct audit *a, const char *pk)
{
	const struct ecw_template *t = a->x->from_pk;
	const unsigned need = a->x->window_ms == ECW_ROLLUP_HOUR_MS ? 0xf : 0x7;
	struct ecw_buf v;
	bool timed = false;
	int err = 0;

	snprintf(a->pk, sizeof(a->pk), "%s", pk);
	a->pk_known = true;
	strv_clear(&a->values);
	if ((a->split = ecw_template_split(a->spans, t, pk)) < 0)
		return a->split;
	a->ambiguous |= a->split == 2;
	if (a->split != 1)
		return 0;
	ecw_buf_init(&v, ECW_KEY_MAX + 64);
	for (size_t k = 0; err == 0 && a->x->fields && a->x->fields[k]; k++)
		for (size_t i = 0; i < ecw_template_nparts(t); i++) {
			bool field, plain;
			const char *name = ecw_template_part(t, i, &field, &plain);
			if (!field || strcmp(name, a->x->fields[k]) != 0)
				continue;
			ecw_buf_reset(&v);
			if ((err = ecw_buf_printf(&v, "%s=%.*s", name, (int)a->spans[2 * i + 1],
						  pk + a->spans[2 * i])) == 0 &&
			    ecw_strv_add(&a->values, ecw_buf_cstr(&v)) < 0)
				err = ecw_error_set(ECW_ENOMEM, "out of memory");
			break;
		}
	for (size_t i = 0;
	     err == 0 && a->x->rows == ECW_EXPORT_ROWS_ANY && !timed && i < ecw_template_nparts(t); i++) {
		bool field, plain;
		const char *name = ecw_template_part(t, i, &field, &plain);
		const char *text = pk + a->spans[2 * i];
		size_t len = a->spans[2 * i + 1];
		if (field && strcmp(name, "window") == 0 &&
		    (ecw_template_part_date_fields(t, i) & need) == need) {
			timed = ecw_template_part_time(&a->pk_start_s, t, i, text, len) == 0;
		} else if (field && plain && strcmp(name, "window_start") == 0) {
			ecw_buf_reset(&v);
			timed = ecw_buf_add(&v, text, len) == 0 &&
				ecw_rollup_window_parse(&a->pk_start_s, ecw_buf_cstr(&v), a->x->window_ms) ==
					0;
		}
		ecw_error_clear();
	}
	if (err == 0 && a->x->rows == ECW_EXPORT_ROWS_ANY && !timed)
		a->split = 0; /* no window in it: no export reads this partition */
	ecw_buf_dispose(&v);
	return err;
}

/* ---- one window: the merge of its rows and its blob's lines ------------------------------------ */

static void judged_init(struct judged *j, const struct group *g, const struct ecw_export *x)
{
	memset(j, 0, sizeof(*j));
	ecw_export_lines_init(&j->b, x->container, ecw_buf_cstr(&g->w.name));
}

static void judged_dispose(struct judged *j)
{
	ecw_export_lines_dispose(&j->b);
	ecw_blob_info_free(j->info);
	j->info = NULL;
}

/* A line of no row (with time-keyed rows, only lines of the job's RowKeys). */
static void lone_line(struct judged *j, const struct ecw_export *x)
{
	int64_t t;

	if (x->rows == ECW_EXPORT_ROWS_ANY || row_key_time(&t, x, ecw_buf_cstr(&j->b.rk)))
		j->orphan_lines++;
}

/* What reading a line may end in: the blob is no readable export (judged
 * as such), or changed meanwhile (not judged); other errors stop the
 * audit. */
static int next_line(struct judged *j)
{
	int err = ecw_export_lines_next(&j->b);

	if (err == ECW_EINVALID || err == ECW_ETOOLARGE)
		j->unreadable = true;
	else if (err == ECW_EPRECONDITION || err == ECW_EBLOBNOTFOUND)
		j->changed = true;
	else if (err < 0)
		return err;
	else if (j->b.line)
		j->lines++;
	if (err < 0) {
		ecw_error_clear();
		j->b.line = NULL;
		ecw_export_reader_free(j->b.rd);
		j->b.rd = NULL;
	}
	return 0;
}

static int judge_begin(struct audit *a, struct group *g, struct judged *j)
{
	int err;

	judged_init(j, g, a->x);
	ecw_audit_pace(a->ctx);
	err = ecw_blob_props(&j->info, a->ctx->client, a->x->container, ecw_buf_cstr(&g->w.name));
	if (err == ECW_EBLOBNOTFOUND) {
		ecw_error_clear();
		return 0;
	}
	if (err == ECW_ENOCONTAINER) {
		ecw_error_set(ECW_ENOTABLE,
			      "container '%s' does not exist: nothing was audited or repaired (create it, or "
			      "correct to_blob.container)",
			      a->x->container);
		ecw_error_set_table(a->x->container, strlen(a->x->container));
		return ECW_ENOTABLE;
	}
	if (err < 0)
		return err;
	if (ecw_export_blob_check(a->x, j->info, ecw_buf_cstr(&g->w.name)) < 0) {
		ecw_error_clear();
		j->foreign = true;
		return 0;
	}
	if ((err = ecw_export_reader_new(&j->b.rd, a->ctx->client, a->x->container, ecw_buf_cstr(&g->w.name),
					 j->info->etag, a->x->gzip)) < 0)
		return err;
	return next_line(j);
}

static int judge_row(struct audit *a, struct judged *j, const struct ecw_entity *row)
{
	const char *pk = ecw_entity_pk(row), *rk = ecw_entity_rk(row), *etag = ecw_entity_etag(row);
	int c = 1, err;

	if (j->rows++ == 0)
		snprintf(j->first_rk, sizeof(j->first_rk), "%s", rk);
	if (!j->info || j->foreign) {
		j->absent++;
		return 0;
	}
	while (j->b.line && (c = ecw_export_lines_cmp(&j->b, pk, rk)) < 0) {
		lone_line(j, a->x);
		if ((err = next_line(j)) < 0)
			return err;
	}
	if (!j->b.line)
		c = 1;
	if (c != 0)
		j->absent++;
	else if (!etag || strcmp(etag, ecw_buf_cstr(&j->b.etag)) != 0)
		j->old++;
	if (c == 0)
		return next_line(j);
	return 0;
}

static int judge_end(struct audit *a, struct judged *j)
{
	int err;

	while (j->b.line) {
		lone_line(j, a->x);
		if ((err = next_line(j)) < 0)
			return err;
	}
	return 0;
}

/* The window's rows read again through the run's own query (after a
 * repair), into j. */
static int judge_again(struct audit *a, struct group *g, struct judged *j)
{
	struct ecw_query_options qo = {.filter = ecw_buf_cstr(&g->w.filter), .select = "RowKey", .top = 1000};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	int64_t t;
	int err;

	if ((err = judge_begin(a, g, j)) < 0 ||
	    (err = ecw_table_query_new(&q, a->ctx->client, a->x->source, &qo)) < 0)
		goto done;
	while ((err = ecw_audit_next(&e, q, a->ctx)) == 0 && e) {
		if (a->x->rows == ECW_EXPORT_ROWS_ANY || row_key_time(&t, a->x, ecw_entity_rk(e)))
			err = judge_row(a, j, e);
		ecw_entity_free(e);
		e = NULL;
		if (err < 0)
			goto done;
	}
	if (err == 0)
		err = judge_end(a, j);
done:
	ecw_table_query_free(q);
	return err;
}

/* ---- findings ---------------------------------------------------------------------------------- */

enum { FIX_ROWS = 1, FIX_BLOB = 2 };

/* What a judged window needs an export for (FIX_*). */
static unsigned to_fix(const struct audit *a, const struct judged *j)
{
	unsigned fix = 0;

	if (j->changed || j->foreign || j->unreadable || j->rows == 0)
		return 0;
	if (a->x->delete_after)
		fix |= FIX_ROWS;
	if (!j->info || j->absent + j->old > 0)
		fix |= FIX_BLOB;
	return fix;
}

static void note(struct audit *a, const struct group *g, enum ecw_audit_kind kind, bool rows, uint64_t n,
		 const char *detail, bool repaired, const char *error)
{
	struct ecw_audit_finding f = {.kind = kind,
				      .table = rows ? a->x->source : a->x->container,
				      .pk = rows ? g->pk : g->dir,
				      .rk = rows ? g->j.first_rk : g->base,
				      .source_pk = g->pk,
				      .source_rk = g->w.iso,
				      .detail = detail,
				      .repaired = repaired,
				      .error = error};

	ecw_audit_note_many(a->ctx, &f, n);
}

/* The findings of a judged window, after its repair (fix: what was to be
 * repaired; left: what the window judged again still needs; error: why
 * the repair failed, NULL when none was tried or it ran). */
static void report(struct audit *a, const struct group *g, unsigned fix, unsigned left, const char *error)
{
	const struct judged *j = &g->j;
	const char *still = "still there after the export ran (changed meanwhile?)";
	bool ran = a->ctx->repair && !error;
	bool rows_ok = ran && fix & FIX_ROWS && !(left & FIX_ROWS),
	     blob_ok = ran && fix & FIX_BLOB && !(left & FIX_BLOB);
	const char *rows_err = fix & FIX_ROWS && a->ctx->repair && !rows_ok ? (error ? error : still) : NULL,
		   *blob_err = fix & FIX_BLOB && a->ctx->repair && !blob_ok ? (error ? error : still) : NULL;

	if (j->changed)
		return;
	if (fix & FIX_ROWS)
		note(a, g, ECW_AUDIT_STALE, true, j->rows,
		     "past its window and still in the table (delete_after: its export did not run or "
		     "did not finish)",
		     rows_ok, rows_err);
	if (fix & FIX_BLOB && !j->info)
		note(a, g, ECW_AUDIT_MISSING, false, 1,
		     "the window's blob does not exist, and its rows are in the table", blob_ok, blob_err);
	else if (fix & FIX_BLOB)
		note(a, g, ECW_AUDIT_STALE, false, 1,
		     "the window's blob lacks rows of the table, or holds an older version of them", blob_ok,
		     blob_err);
	if (j->foreign)
		note(a, g, ECW_AUDIT_CONFLICT, false, 1,
		     "a blob at the window's name that is no export of this job (never repaired)", false,
		     NULL);
	else if (j->unreadable)
		note(a, g, ECW_AUDIT_CONFLICT, false, 1,
		     "the window's blob is no readable export: a line that is no entity, out of order or cut "
		     "short (never repaired)",
		     false, NULL);
	if (!j->foreign && !j->unreadable && !a->x->delete_after && j->orphan_lines > 0)
		note(a, g, ECW_AUDIT_ORPHAN, false, 1,
		     "the window's blob holds rows the table no longer has (delete_after: false; never "
		     "repaired, an export keeps every line)",
		     false, NULL);
	if (j->info && !j->foreign && !j->unreadable) {
		const char *count = ecw_blob_info_meta(j->info, "ecw_count");
		char want[24];
		snprintf(want, sizeof(want), "%llu", (unsigned long long)j->lines);
		if (!count || strcmp(count, want) != 0)
			note(a, g, ECW_AUDIT_CONFLICT, false, 1,
			     "the window's blob's ecw_count is not its number of lines (never repaired)",
			     false, NULL);
	}
}

/* A judged window reported, repaired first with --repair. */
static int group_end(struct audit *a)
{
	struct group *g = &a->g;
	char why[sizeof(((struct ecw_error *)0)->message)];
	unsigned fix, left = 0;
	const char *error = NULL;
	int err = 0;

	if (!g->open)
		return 0;
	g->open = false;
	if (!g->ours || !g->due || stopped(a->ctx))
		goto done;
	if ((err = judge_end(a, &g->j)) < 0)
		goto done;
	fix = to_fix(a, &g->j);
	if (fix && a->ctx->repair) {
		struct ecw_audit_finding f = {0};
		ecw_audit_converge_fields(a->ctx, ecw_export_run, a->x, g->fields, &f, why, sizeof(why));
		error = f.error;
		if (f.repaired && !a->ctx->requeue_fields) {
			struct judged again;
			err = judge_again(a, g, &again);
			left = err == 0 ? to_fix(a, &again) : 0;
			judged_dispose(&again);
			if (err < 0)
				goto done;
		}
	}
	report(a, g, fix, left, error);
done:
	judged_dispose(&g->j);
	return err;
}

/* The window starting at start_s of partition pk: named as its run names
 * it, and judged when the run reads this partition and the window is due. */
static int group_begin(struct audit *a, const char *pk, int64_t start_s)
{
	struct group *g = &a->g;
	struct json_object *m = NULL;
	char iso[32], *cut;
	struct ecw_buf ws;
	int err = 0;

	g->open = true;
	g->ours = g->due = false;
	snprintf(g->pk, sizeof(g->pk), "%s", pk);
	g->start_s = start_s;
	strv_clear(&g->fields);
	free(g->name);
	g->name = NULL;
	judged_init(&g->j, g, a->x);
	if (start_s < 0)
		return 0;
	ecw_rollup_iso(iso, start_s);
	ecw_buf_init(&ws, 64);
	for (size_t i = 0; err == 0 && a->values && a->values[i]; i++)
		if (ecw_strv_add(&g->fields, a->values[i]) < 0)
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
	if (err == 0 && ((err = ecw_buf_printf(&ws, "window_start=%s", iso)) < 0 ||
			 ecw_strv_add(&g->fields, ecw_buf_cstr(&ws)) < 0))
		err = err < 0 ? err : ecw_error_set(ECW_ENOMEM, "out of memory");
	ecw_buf_dispose(&ws);
	if (err < 0 || (err = ecw_audit_message(&m, a->ctx->job, g->fields)) < 0)
		return err;
	/* A window no run could name (out of range, a key the service
	 * refuses), or whose run reads another partition: not the job's. */
	if (ecw_export_window_names(&g->w, a->x, m, a->ctx->job) < 0 || strcmp(g->w.pk, pk) != 0) {
		json_object_put(m);
		ecw_error_clear();
		return 0;
	}
	json_object_put(m);
	if (!(g->name = strdup(ecw_buf_cstr(&g->w.name))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	cut = strrchr(g->name, '/');
	g->dir = cut ? g->name : "";
	g->base = cut ? cut + 1 : g->name;
	if (cut)
		*cut = '\0';
	g->ours = true;
	g->due = a->now_s >= start_s + 2 * (a->x->window_ms / 1000);
	judged_dispose(&g->j);
	return g->due ? judge_begin(a, g, &g->j) : 0;
}

static int row_in(const struct ecw_entity *e, void *payload)
{
	struct audit *a = payload;
	const char *pk = ecw_entity_pk(e), *rk = ecw_entity_rk(e);
	int64_t start_s, t;
	int err;

	if (strlen(pk) > ECW_KEY_MAX || strlen(rk) > ECW_KEY_MAX)
		return 0; /* no key the service keeps */
	if ((!a->pk_known || strcmp(pk, a->pk) != 0) && (err = read_partition(a, pk)) < 0)
		return err;
	if (a->split != 1)
		return 0;
	start_s = a->pk_start_s;
	if (a->x->rows != ECW_EXPORT_ROWS_ANY) {
		if (!row_key_time(&t, a->x, rk)) {
			a->odd_row_keys = true;
			return 0;
		}
		start_s = window_floor(t, a->x->window_ms / 1000);
	}
	if (!a->g.open || a->g.start_s != start_s || strcmp(a->g.pk, pk) != 0) {
		if ((err = group_end(a)) < 0 || (err = group_begin(a, pk, start_s)) < 0)
			return err;
	}
	if (!a->g.ours || !a->g.due)
		return 0;
	if ((err = judge_row(a, &a->g.j, e)) < 0)
		return err;
	ecw_audit_checked(a->ctx);
	return 0;
}

static int export_audit(const void *settings, struct ecw_audit_ctx *ctx)
{
	const struct ecw_export *x = settings;
	struct audit *a = calloc(1, sizeof(*a));
	struct ecw_table_query *q = NULL;
	int err;

	if (!a)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	a->x = x;
	a->ctx = ctx;
	a->now_s = ecw_clock_wall_ms() / 1000;
	ecw_export_window_init(&a->g.w);
	judged_init(&a->g.j, &a->g, x); /* nothing held: group_begin starts it again */
	if (x->audit_limit[0]) {
		ecw_audit_limit(ctx, x->audit_limit);
		err = 0;
		goto done;
	}
	if (!(a->spans = calloc(2 * ecw_template_nparts(x->from_pk) + 1, sizeof(*a->spans)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = ecw_audit_query(&q, ctx, x->source, "PartitionKey", "RowKey")) < 0 ||
	    (err = ecw_audit_each(q, ctx, row_in, a)) < 0 || (err = group_end(a)) < 0)
		goto done;
	if (a->ambiguous)
		ecw_audit_limit(ctx,
				"rows whose PartitionKey splits into from_partition's parts in more than "
				"one way were passed over (which message fields they belong to is unknown)");
	if (a->odd_row_keys)
		ecw_audit_limit(ctx, "rows whose RowKey does not start with the digits row_keys names were "
				     "passed over");
done:
	judged_dispose(&a->g.j);
	ecw_export_window_dispose(&a->g.w);
	ecw_table_query_free(q);
	strv_clear(&a->g.fields);
	strv_clear(&a->values);
	free(a->g.name);
	free(a->spans);
	free(a);
	return err;
}

const struct ecw_job_type ecw_job_export = {
	.name = "export",
	.keyless = true,
	.parse = ecw_export_parse,
	.prepare = ecw_export_prepare,
	.run = ecw_export_run,
	.free = ecw_export_free,
	.source_table = ecw_export_source,
	.message_fields = ecw_export_message_fields,
	.window_ms = ecw_export_window_ms,
	.audit = export_audit,
};
