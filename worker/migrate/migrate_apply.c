/* SPDX-License-Identifier: MIT */
/* migrate_apply.c - applying the migrations (see migrate.h; parsed by
 * worker/migrate/migrate.c), and reading what the version table says of them.
 *
 * The version table holds one entity per migration (PartitionKey
 * "migration", RowKey the version zero-padded to 10 digits). A process claims
 * a migration by inserting that entity with State "running", its owner and a
 * lease (LeaseUntil, wall-clock ms); the insert is conditional, so of two
 * processes one gets 409 and waits. Every later write of the owner is an
 * update with If-Match on the entity's ETag: progress (Step, StepTries, the
 * Cursor of the long steps), heartbeats that extend the lease, and the final
 * State "applied" or "failed". A process that finds the lease expired (the
 * owner was killed) takes the claim over the same way, If-Match, and resumes
 * from the recorded progress; the old owner, should it wake up, gets 412 on
 * its next write and stops.
 *
 * Crash safety, step by step (the process dies right after a write):
 * - Before running step i the owner records Step=i and StepTries+1. A crash
 *   anywhere in step i leaves Step=i, so the next owner runs step i again,
 *   and knows it is a retry (StepTries > 0). Steps before i are never rerun.
 * - create_table: "already exists" is success. delete_table: "not found" is
 *   success. (Azure refuses to create a table for ~40 s after deleting it:
 *   409 TableBeingDeleted, reported as the step's error; rerun later.)
 * - upsert_entity: insert-or-replace, the same result however often it runs.
 * - insert_entity: an insert. On a retry (StepTries > 0) 409 is accepted when
 *   the stored entity equals the one configured (our own write from before
 *   the crash); otherwise 409 fails the step: someone else wrote it.
 * - delete_entity: delete-if-exists.
 * - copy_table: pages of the source in key order, written in entity group
 *   transactions of insert-or-replace (one partition, <= 100 each); after a
 *   batch commits, the Cursor (its last PartitionKey, RowKey) is recorded
 *   (at most once a second, and with each heartbeat). A crash after a batch
 *   but before the cursor write makes the next owner copy those entities
 *   again: insert-or-replace of the same values, harmless. Entities the
 *   source gains after the copy passed them are not copied (as with any
 *   online copy: stop writers first).
 * - set_property: the same walk over the entities matching the filter, each
 *   batch a MERGE (If-Match *, so a deleted entity is not brought back) of the
 *   configured values. Merging the same values twice is harmless; values are
 *   rendered from the entity as stored, and a template may not read a
 *   property the same step sets (checked at parse time), so a repeated batch
 *   writes what the first did.
 * - clear_table, delete_partition: delete every entity (matching), in
 *   batches of If-Match * deletes; a batch that meets an entity already gone
 *   falls back to delete-if-exists one by one. The table is its own progress:
 *   a rerun finds only what is left, so no cursor is needed.
 * - rename_table is copy_table then delete_table, two steps.
 * A failed step records State "failed" and the error; the run stops there and
 * a later run (the configuration fixed or not) resumes at that step. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ecw_clock.h"
#include "ecw_crash.h"
#include "ecw_progress.h"
#include "ecw_entity.h"
#include "ecw_storage.h"
#include "ecw_template.h"
#include "migrate_private.h"

#define REC_PK "migration"

/* ---- the version table ------------------------------------------------------ */

static const char *rec_str(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = e ? ecw_entity_get(e, name) : NULL;

	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

static long long rec_int(const struct ecw_entity *e, const char *name, long long dflt)
{
	const struct ecw_prop *p = e ? ecw_entity_get(e, name) : NULL;

	if (p && p->type == ECW_EDM_INT32)
		return p->v.i32;
	if (p && p->type == ECW_EDM_INT64)
		return p->v.i64;
	return dflt;
}

static bool rec_is(const struct ecw_entity *e, const char *state)
{
	const char *s = rec_str(e, "State");

	return s && strcmp(s, state) == 0;
}

static void rowkey(char out[16], long long version)
{
	snprintf(out, 16, "%010lld", version);
}

/* "2026-08-19T10:00:00.123Z" */
static void iso_now(char out[40])
{
	int64_t ms = ecw_clock_wall_ms();
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	size_t n;

	gmtime_r(&t, &tm);
	n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 40 - n, ".%03dZ", (int)(ms % 1000));
}

/* Every record, or none when the table does not exist yet. */
static int read_records(struct ecw_entity ***out, size_t *n, struct ecw_client *c, const char *table)
{
	struct ecw_query_options qo = {.filter = "PartitionKey eq '" REC_PK "'", .top = 1000};
	struct ecw_table_query *q = NULL;
	struct ecw_entity **v = NULL, *e = NULL;
	size_t cap = 0;
	int err;

	*out = NULL;
	*n = 0;
	if ((err = ecw_table_query_new(&q, c, table, &qo)) < 0)
		return err;
	for (;;) {
		if ((err = ecw_table_query_next(&e, q)) < 0 || !e)
			break;
		if (*n == cap) {
			struct ecw_entity **nv = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof(*v));
			if (!nv) {
				ecw_entity_free(e);
				err = ecw_error_set(ECW_ENOMEM, "out of memory");
				break;
			}
			v = nv;
		}
		v[(*n)++] = e;
	}
	ecw_table_query_free(q);
	if (ecw_error_is_absent(err)) /* no version table: nothing applied yet */
		err = 0;
	if (err < 0) {
		for (size_t i = 0; i < *n; i++)
			ecw_entity_free(v[i]);
		free(v);
		*n = 0;
		return err;
	}
	*out = v;
	return 0;
}

static void records_free(struct ecw_entity **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ecw_entity_free(v[i]);
	free(v);
}

static const struct ecw_entity *find_record(struct ecw_entity **v, size_t n, long long version)
{
	char rk[16];

	rowkey(rk, version);
	for (size_t i = 0; i < n; i++)
		if (strcmp(ecw_entity_rk(v[i]), rk) == 0)
			return v[i];
	return NULL;
}

/* ---- applying ------------------------------------------------------------------- */

struct run {
	const struct ecw_migration_set *m;
	const struct ecw_migration *g;
	struct ecw_client *c;
	struct ecw_entity *rec; /* the record as we last wrote it */
	char *etag;             /* its ETag: every write is If-Match on it */
	char owner[300];
	int64_t saved_ms; /* monotonic time of the last write */
	uint64_t done;    /* entities handled in this step, resumes included */
	struct ecw_progress prog;
	bool progress;
	ecw_migrate_say_fn *say; /* every line the operator reads */
	void *payload;
};

/* Formats one line (no newline) and hands it to say; problem: a line for
 * stderr. */
static void tell(ecw_migrate_say_fn *say, void *payload, bool problem, const char *fmt, ...) ECW_PRINTF(4, 5);

static void tell(ecw_migrate_say_fn *say, void *payload, bool problem, const char *fmt, ...)
{
	char small[1024], *line = small;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	/* A long step description (set_property's templates) is told whole. */
	if (n >= (int)sizeof(small) && (line = malloc((size_t)n + 1))) {
		va_start(ap, fmt);
		vsnprintf(line, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	say(problem, line ? line : small, payload);
	if (line != small)
		free(line);
}

static int set_str(struct ecw_entity *e, const char *name, const char *v)
{
	return ecw_entity_set_string(e, name, v, strlen(v));
}

/* Writes the record with If-Match, extending the lease. 412 means another
 * process took the claim over: this one must stop writing. */
static int save(struct run *r)
{
	char *etag = NULL;
	int err;

	if ((err = ecw_entity_set_int64(r->rec, "LeaseUntil", ecw_clock_wall_ms() + r->m->lease_ms)) < 0)
		return err;
	err = ecw_table_write(&etag, r->c, r->m->table, r->rec, ECW_WRITE_UPDATE, r->etag);
	if (err == ECW_EPRECONDITION)
		return ecw_error_set(
			ECW_EPRECONDITION,
			"lost the claim on migration %s: its lease ran out and another process took "
			"it over; stopping",
			r->g->id);
	if (err < 0)
		return err;
	free(r->etag);
	r->etag = etag;
	r->saved_ms = ecw_clock_now_ms();
	return 0;
}

/* After a batch: records how far the step got, at most every so often (and
 * so extends the lease well before it runs out). */
static int checkpoint(struct run *r, const char *pk, const char *rk)
{
	int64_t every = r->m->lease_ms / 3 < 1000 ? r->m->lease_ms / 3 : 1000;
	int err;

	if (ecw_clock_now_ms() - r->saved_ms < every)
		return 0;
	if (pk &&
	    ((err = set_str(r->rec, "CursorPK", pk)) < 0 || (err = set_str(r->rec, "CursorRK", rk)) < 0))
		return err;
	if ((err = ecw_entity_set_int64(r->rec, "Done", (int64_t)r->done)) < 0)
		return err;
	return save(r);
}

static void show(struct run *r, bool final)
{
	ecw_progress_show(&r->prog, r->done, "", final);
}

/* (PartitionKey, RowKey) > cursor, and the step's own filter. */
static int cursor_filter(struct ecw_buf *f, const char *user, const char *pk, const char *rk)
{
	int err = 0;

	if (user && (err = ecw_buf_printf(f, "(%s)%s", user, pk ? " and " : "")) < 0)
		return err;
	if (!pk)
		return 0;
	if ((err = ecw_buf_adds(f, "(PartitionKey gt ")) < 0 || (err = ecw_escape_filter_string(f, pk)) < 0 ||
	    (err = ecw_buf_adds(f, " or (PartitionKey eq ")) < 0 ||
	    (err = ecw_escape_filter_string(f, pk)) < 0 || (err = ecw_buf_adds(f, " and RowKey gt ")) < 0 ||
	    (err = ecw_escape_filter_string(f, rk)) < 0)
		return err;
	return ecw_buf_adds(f, "))");
}

enum walk_kind { WALK_COPY, WALK_SET, WALK_DELETE };

/* The entity set_property merges into e: its keys and the configured values. */
static int merge_entity(struct ecw_entity **out, const struct ecw_migration_step *s,
			const struct ecw_entity *e)
{
	struct ecw_buf b;
	int err;

	ecw_buf_init(&b, 64 * 1024);
	if ((err = ecw_entity_new(out, ecw_entity_pk(e), ecw_entity_rk(e))) < 0)
		goto done;
	for (size_t i = 0; i < ecw_entity_count(s->entity); i++)
		if ((err = ecw_entity_set_prop(*out, ecw_entity_at(s->entity, i))) < 0)
			goto done;
	for (size_t i = 0; i < s->ntmpls; i++) {
		ecw_buf_reset(&b);
		if ((err = ecw_template_render(&b, s->tmpls[i].t, e, ECW_TEMPLATE_PLAIN)) < 0 ||
		    (err = ecw_entity_set_string(*out, s->tmpls[i].name, ecw_buf_cstr(&b), b.len)) < 0) {
			err = ecw_error_set(err, "entity (%s, %s): %s", ecw_entity_pk(e), ecw_entity_rk(e),
					    ecw_error_last()->message);
			goto done;
		}
	}
done:
	if (err < 0) {
		ecw_entity_free(*out);
		*out = NULL;
	}
	ecw_buf_dispose(&b);
	return err;
}

/* Writes pending[0..n) (one partition) as one entity group transaction. */
static int flush(struct run *r, const char *table, enum walk_kind kind, struct ecw_entity **pending,
		 size_t *n, bool use_cursor)
{
	static const enum ecw_batch_op ops[] = {ECW_BATCH_INSERT_OR_REPLACE, ECW_BATCH_MERGE,
						ECW_BATCH_DELETE};
	const char *if_match = kind == WALK_COPY ? NULL : "*";
	struct ecw_batch *b = NULL;
	int err;

	if (*n == 0)
		return 0;
	if ((err = ecw_batch_new(&b, table)) < 0)
		goto done;
	for (size_t i = 0; i < *n; i++)
		if ((err = ecw_batch_add(b, ops[kind], pending[i], if_match)) < 0)
			goto done;
	err = ecw_batch_submit(r->c, b);
	if (err == ECW_ENOTFOUND && kind != WALK_COPY) {
		/* An entity went away since the query read it: one by one,
		 * and what is gone stays gone. */
		err = 0;
		for (size_t i = 0; i < *n && err == 0; i++) {
			if (kind == WALK_DELETE)
				err = ecw_table_delete_if_exists(NULL, r->c, table, ecw_entity_pk(pending[i]),
								 ecw_entity_rk(pending[i]));
			else if (ecw_error_is_absent(err = ecw_table_write(NULL, r->c, table, pending[i],
									   ECW_WRITE_MERGE, "*")))
				err = 0;
		}
	}
	if (err < 0)
		goto done;
	r->done += *n;
	ecw_crash_point("migrate.batch");
	err = checkpoint(r, use_cursor ? ecw_entity_pk(pending[*n - 1]) : NULL,
			 use_cursor ? ecw_entity_rk(pending[*n - 1]) : NULL);
	show(r, false);
done:
	for (size_t i = 0; i < *n; i++)
		ecw_entity_free(pending[i]);
	*n = 0;
	ecw_batch_free(b);
	return err;
}

/* Streams src (pages of up to 1000, key order) and writes to dst in batches
 * of one partition and at most 100 operations. */
static int walk(struct run *r, const struct ecw_migration_step *s, enum walk_kind kind, const char *src,
		const char *dst, const char *pk_filter)
{
	struct ecw_entity *pending[ECW_BATCH_MAX_OPS];
	struct ecw_query_options qo = {.top = 1000};
	struct ecw_table_query *q = NULL;
	bool use_cursor = kind != WALK_DELETE;
	const char *cpk = use_cursor ? rec_str(r->rec, "CursorPK") : NULL;
	const char *crk = use_cursor ? rec_str(r->rec, "CursorRK") : NULL;
	struct ecw_buf f;
	size_t n = 0;
	int err;

	ecw_buf_init(&f, 0);
	if (!crk)
		cpk = NULL;
	if ((err = cursor_filter(&f, pk_filter ? pk_filter : s->filter, cpk, crk)) < 0)
		goto done;
	qo.filter = f.len ? f.ptr : NULL;
	qo.select = kind == WALK_DELETE ? "PartitionKey,RowKey" : NULL;
	if ((err = ecw_table_query_new(&q, r->c, src, &qo)) < 0)
		goto done;
	for (;;) {
		struct ecw_entity *e = NULL, *w = NULL;
		if ((err = ecw_table_query_next(&e, q)) < 0)
			goto done;
		if (!e)
			break;
		if (n &&
		    (n == ECW_BATCH_MAX_OPS || strcmp(ecw_entity_pk(pending[0]), ecw_entity_pk(e)) != 0) &&
		    (err = flush(r, dst, kind, pending, &n, use_cursor)) < 0) {
			ecw_entity_free(e);
			goto done;
		}
		if (kind == WALK_SET) {
			err = merge_entity(&w, s, e);
			ecw_entity_free(e);
			if (err < 0)
				goto done;
			e = w;
		}
		pending[n++] = e;
	}
	err = flush(r, dst, kind, pending, &n, use_cursor);
done:
	for (size_t i = 0; i < n; i++)
		ecw_entity_free(pending[i]);
	ecw_table_query_free(q);
	ecw_buf_dispose(&f);
	return err;
}

/* insert_entity on a retry: our own earlier write is success. */
static int insert_entity(struct run *r, const struct ecw_migration_step *s, bool retry)
{
	struct ecw_entity *cur = NULL;
	int err = ecw_table_write(NULL, r->c, s->table, s->entity, ECW_WRITE_INSERT, NULL);

	if (err != ECW_ECONFLICT)
		return err;
	if (!retry)
		return ecw_error_set(ECW_ECONFLICT, "insert_entity: (%s, %s) already exists in %s",
				     ecw_entity_pk(s->entity), ecw_entity_rk(s->entity), s->table);
	if ((err = ecw_table_get(&cur, r->c, s->table, ecw_entity_pk(s->entity), ecw_entity_rk(s->entity))) <
	    0)
		return err;
	err = ecw_entity_equal(cur, s->entity)
		      ? 0
		      : ecw_error_set(ECW_ECONFLICT,
				      "insert_entity: (%s, %s) already exists in %s with other values",
				      ecw_entity_pk(s->entity), ecw_entity_rk(s->entity), s->table);
	ecw_entity_free(cur);
	return err;
}

static int run_step(struct run *r, const struct ecw_migration_step *s, bool retry)
{
	struct ecw_buf f;
	int err;

	switch (s->kind) {
	case ECW_MIGRATION_CREATE_TABLE: return ecw_table_create(NULL, r->c, s->table);
	case ECW_MIGRATION_DELETE_TABLE:
		err = ecw_table_delete_table(r->c, s->table);
		return ecw_error_is_absent(err) ? 0 : err;
	case ECW_MIGRATION_CLEAR_TABLE: return walk(r, s, WALK_DELETE, s->table, s->table, NULL);
	case ECW_MIGRATION_COPY_TABLE:
		if ((err = ecw_table_create(NULL, r->c, s->to)) < 0)
			return err;
		return walk(r, s, WALK_COPY, s->table, s->to, NULL);
	case ECW_MIGRATION_UPSERT_ENTITY:
		return ecw_table_write(NULL, r->c, s->table, s->entity, ECW_WRITE_INSERT_OR_REPLACE, NULL);
	case ECW_MIGRATION_INSERT_ENTITY: return insert_entity(r, s, retry);
	case ECW_MIGRATION_DELETE_ENTITY:
		return ecw_table_delete_if_exists(NULL, r->c, s->table, s->pk, s->rk);
	case ECW_MIGRATION_DELETE_PARTITION:
		ecw_buf_init(&f, 0);
		if ((err = ecw_buf_adds(&f, "PartitionKey eq ")) >= 0 &&
		    (err = ecw_escape_filter_string(&f, s->pk)) >= 0)
			err = walk(r, s, WALK_DELETE, s->table, s->table, f.ptr);
		ecw_buf_dispose(&f);
		return err;
	case ECW_MIGRATION_SET_PROPERTY: return walk(r, s, WALK_SET, s->table, s->table, NULL);
	case ECW_MIGRATION_RENAME_TABLE: break;
	}
	return ecw_error_set(ECW_ERROR, "unexpected step kind %d", (int)s->kind);
}

/* A fresh "running" record for g, owned by r->owner. */
static int new_record(struct ecw_entity **out, const struct run *r)
{
	char rk[16], now[40];
	int err;

	rowkey(rk, r->g->version);
	iso_now(now);
	if ((err = ecw_entity_new(out, REC_PK, rk)) < 0)
		return err;
	if ((err = set_str(*out, "Id", r->g->id)) < 0 ||
	    (err = ecw_entity_set_int64(*out, "Version", r->g->version)) < 0 ||
	    (err = set_str(*out, "Description", r->g->description ? r->g->description : "")) < 0 ||
	    (err = set_str(*out, "Checksum", r->g->sum)) < 0 ||
	    (err = set_str(*out, "State", "running")) < 0 || (err = set_str(*out, "Owner", r->owner)) < 0 ||
	    (err = ecw_entity_set_int64(*out, "LeaseUntil", ecw_clock_wall_ms() + r->m->lease_ms)) < 0 ||
	    (err = ecw_entity_set_int32(*out, "Step", 0)) < 0 ||
	    (err = ecw_entity_set_int32(*out, "StepTries", 0)) < 0 ||
	    (err = ecw_entity_set_datetime(*out, "StartedAt", now)) < 0) {
		ecw_entity_free(*out);
		*out = NULL;
	}
	return err;
}

enum claim { CLAIMED, ALREADY_APPLIED };

/* Claims r->g: inserts its record, or takes over a failed one or one whose
 * lease ran out; waits (up to migrations.wait) while another process holds a
 * live claim. On return with CLAIMED, r->rec and r->etag are ours. */
static int claim(enum claim *out, struct run *r)
{
	const struct ecw_migration *g = r->g;
	int64_t deadline = ecw_clock_now_ms() + r->m->wait_ms;
	bool told = false;
	char rk[16];
	int err;

	rowkey(rk, g->version);
	for (;;) {
		struct ecw_entity *e = NULL;
		char *etag = NULL;

		if ((err = ecw_table_get(&e, r->c, r->m->table, REC_PK, rk)) == ECW_ENOTABLE) {
			if ((err = ecw_table_create(NULL, r->c, r->m->table)) < 0)
				return err;
			continue;
		}
		if (err == ECW_ENOTFOUND) {
			if ((err = new_record(&e, r)) < 0)
				return err;
			err = ecw_table_write(&etag, r->c, r->m->table, e, ECW_WRITE_INSERT, NULL);
			if (err == ECW_ECONFLICT) { /* another process claimed it first */
				ecw_entity_free(e);
				continue;
			}
			if (err < 0) {
				ecw_entity_free(e);
				return err;
			}
			r->rec = e;
			r->etag = etag;
			r->saved_ms = ecw_clock_now_ms();
			*out = CLAIMED;
			return 0;
		}
		if (err < 0)
			return err;
		if (rec_is(e, "applied")) {
			const char *sum = rec_str(e, "Checksum");
			err = sum && strcmp(sum, g->sum) != 0
				      ? ecw_error_set(ECW_EINVALID,
						      "migration %s was applied with another definition",
						      g->id)
				      : 0;
			ecw_entity_free(e);
			*out = ALREADY_APPLIED;
			return err;
		}
		if (rec_is(e, "running") && rec_int(e, "LeaseUntil", 0) > ecw_clock_wall_ms()) {
			const char *owner = rec_str(e, "Owner");
			if (ecw_clock_now_ms() >= deadline) {
				err = ecw_error_set(
					ECW_EBUSY,
					"migration %s is being applied by %s; gave up after waiting %lld s "
					"(migrations.wait)",
					g->id, owner ? owner : "another process",
					(long long)(r->m->wait_ms / 1000));
				ecw_entity_free(e);
				return err;
			}
			if (!told) {
				tell(r->say, r->payload, false,
				     "%s: being applied by %s; waiting for it (up to %lld s)", g->id,
				     owner ? owner : "another process", (long long)(r->m->wait_ms / 1000));
				told = true;
			}
			ecw_entity_free(e);
			ecw_clock_sleep_ms(r->m->lease_ms / 4 < 1000 ? r->m->lease_ms / 4 : 1000);
			continue;
		}
		/* Failed, or running with its lease run out (the owner died):
		 * take it over, keeping its progress. */
		const char *prev = rec_str(e, "Owner");
		bool was_running = rec_is(e, "running");
		char prev_owner[300];
		snprintf(prev_owner, sizeof(prev_owner), "%s", prev ? prev : "?");
		if ((err = set_str(e, "State", "running")) < 0 || (err = set_str(e, "Owner", r->owner)) < 0 ||
		    (err = ecw_entity_set_int64(e, "LeaseUntil", ecw_clock_wall_ms() + r->m->lease_ms)) < 0) {
			ecw_entity_free(e);
			return err;
		}
		ecw_entity_remove(e, "Error");
		ecw_entity_remove(e, "FailedStep");
		err = ecw_table_write(&etag, r->c, r->m->table, e, ECW_WRITE_UPDATE, ecw_entity_etag(e));
		if (err == ECW_EPRECONDITION) { /* someone else took it: look again */
			ecw_entity_free(e);
			continue;
		}
		if (err < 0) {
			ecw_entity_free(e);
			return err;
		}
		tell(r->say, r->payload, false, "%s: %s (step %lld was in progress)", g->id,
		     was_running ? "taking over from a claim whose lease expired"
				 : "resuming after a failed attempt",
		     rec_int(e, "Step", 0) + 1);
		if (was_running)
			tell(r->say, r->payload, false, "%s: the previous owner was %s", g->id, prev_owner);
		r->rec = e;
		r->etag = etag;
		r->saved_ms = ecw_clock_now_ms();
		*out = CLAIMED;
		return 0;
	}
}

/* Records the failure of step k (best effort: the error reported is the
 * step's either way). */
static void record_failure(struct run *r, const struct ecw_migration_step *s, const char *msg)
{
	struct ecw_error step_err = *ecw_error_last();

	if (set_str(r->rec, "State", "failed") < 0 || set_str(r->rec, "Error", msg) < 0 ||
	    ecw_entity_set_int32(r->rec, "FailedStep", s->pos) < 0 || save(r) < 0)
		tell(r->say, r->payload, true, "%s: could not record the failure: %s", r->g->id,
		     ecw_error_last()->message);
	/* Keep the step's error as the last one. */
	ecw_error_set_http(step_err.code, step_err.http_status, step_err.service_code, step_err.request_id,
			   "%s", step_err.message);
}

/* Applies r->g from the recorded step on. */
static int apply_steps(struct run *r)
{
	const struct ecw_migration *g = r->g;
	size_t from = (size_t)rec_int(r->rec, "Step", 0);
	struct ecw_buf what;
	int err = 0;

	ecw_buf_init(&what, 0);
	if (from > g->nsteps)
		from = 0;
	if (rec_str(r->rec, "Checksum") && strcmp(rec_str(r->rec, "Checksum"), g->sum) != 0) {
		tell(r->say, r->payload, false,
		     "%s: the definition changed since the last attempt; steps before step %d stay as they are",
		     g->id, from < g->nsteps ? g->steps[from].pos : g->steps[g->nsteps - 1].pos);
		if ((err = set_str(r->rec, "Checksum", g->sum)) < 0)
			goto done;
	}
	for (size_t k = from; k < g->nsteps; k++) {
		const struct ecw_migration_step *s = &g->steps[k];
		const char *ssum = rec_str(r->rec, "StepSum");
		long long tries;
		bool same = (size_t)rec_int(r->rec, "Step", 0) == k && ssum && strcmp(ssum, s->sum) == 0;

		ecw_buf_reset(&what);
		if ((err = ecw_migrate_describe_step(&what, s)) < 0)
			goto done;
		if (!same) {
			ecw_entity_remove(r->rec, "CursorPK");
			ecw_entity_remove(r->rec, "CursorRK");
			if ((err = ecw_entity_set_int32(r->rec, "Step", (int32_t)k)) < 0 ||
			    (err = ecw_entity_set_int32(r->rec, "StepTries", 0)) < 0 ||
			    (err = ecw_entity_set_int64(r->rec, "Done", 0)) < 0 ||
			    (err = set_str(r->rec, "StepSum", s->sum)) < 0)
				goto done;
		}
		tries = rec_int(r->rec, "StepTries", 0);
		r->done = (uint64_t)rec_int(r->rec, "Done", 0);
		if ((err = ecw_entity_set_int32(r->rec, "StepTries", (int32_t)(tries + 1))) < 0 ||
		    (err = save(r)) < 0)
			goto done;
		if (rec_str(r->rec, "CursorRK"))
			tell(r->say, r->payload, false,
			     "%s: step %d/%zu %s: resuming after (%s, %s), %llu entities done before", g->id,
			     s->pos, g->nlisted, ecw_buf_cstr(&what), rec_str(r->rec, "CursorPK"),
			     rec_str(r->rec, "CursorRK"), (unsigned long long)r->done);
		ecw_crash_point("migrate.step");
		ecw_progress_init(&r->prog, ecw_buf_cstr(&what), r->progress, 0);
		err = run_step(r, s, tries > 0);
		if (s->kind == ECW_MIGRATION_COPY_TABLE || s->kind == ECW_MIGRATION_SET_PROPERTY ||
		    s->kind == ECW_MIGRATION_CLEAR_TABLE || s->kind == ECW_MIGRATION_DELETE_PARTITION)
			show(r, true);
		if (err < 0) {
			char msg[700];
			if (err == ECW_EPRECONDITION && strstr(ecw_error_last()->message, "lost the claim"))
				goto done; /* not ours to record any more */
			snprintf(msg, sizeof(msg), "step %d/%zu (%s): %s", s->pos, g->nlisted,
				 ecw_buf_cstr(&what), ecw_error_last()->message);
			record_failure(r, s, msg);
			ecw_error_set_http(err, ecw_error_last()->http_status, ecw_error_last()->service_code,
					   ecw_error_last()->request_id, "%s", msg);
			goto done;
		}
		if (s->kind == ECW_MIGRATION_COPY_TABLE || s->kind == ECW_MIGRATION_SET_PROPERTY ||
		    s->kind == ECW_MIGRATION_CLEAR_TABLE || s->kind == ECW_MIGRATION_DELETE_PARTITION)
			tell(r->say, r->payload, false, "%s: step %d/%zu %s: done (%llu entities)", g->id,
			     s->pos, g->nlisted, ecw_buf_cstr(&what), (unsigned long long)r->done);
		else
			tell(r->say, r->payload, false, "%s: step %d/%zu %s: done", g->id, s->pos, g->nlisted,
			     ecw_buf_cstr(&what));
	}
	/* Applied: the record says so, with when and by whom. */
	char now[40];
	iso_now(now);
	ecw_entity_remove(r->rec, "CursorPK");
	ecw_entity_remove(r->rec, "CursorRK");
	if ((err = set_str(r->rec, "State", "applied")) < 0 ||
	    (err = ecw_entity_set_datetime(r->rec, "AppliedAt", now)) < 0 ||
	    (err = set_str(r->rec, "AppliedBy", r->owner)) < 0 ||
	    (err = ecw_entity_set_int32(r->rec, "Step", (int32_t)g->nsteps)) < 0 || (err = save(r)) < 0)
		goto done;
	ecw_crash_point("migrate.applied");
done:
	ecw_buf_dispose(&what);
	return err;
}

/* ---- the runs ---------------------------------------------------------------------- */

static void owner_name(char *out, size_t cap)
{
	char host[256] = "";

	if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
		snprintf(host, sizeof(host), "unknown-host");
	snprintf(out, cap, "%s pid %ld", host, (long)getpid());
}

/* Whether m lists the migration of this version. */
static bool lists(const struct ecw_migration_set *m, long long version)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->list[i].version == version)
			return true;
	return false;
}

/* Refuses what must not be applied: an applied migration whose definition
 * changed, or a pending one older than an applied one. Tells why. */
static int check_history(const struct ecw_migration_set *m, struct ecw_entity **recs, size_t n,
			 ecw_migrate_say_fn *say, void *payload)
{
	long long newest_applied = 0;
	const char *newest_id = NULL;
	int bad = 0;

	for (size_t i = 0; i < m->n; i++) {
		const struct ecw_entity *e = find_record(recs, n, m->list[i].version);
		const char *sum = rec_str(e, "Checksum");
		if (e && rec_is(e, "applied")) {
			if (sum && strcmp(sum, m->list[i].sum) != 0) {
				tell(say, payload, true,
				     "%s (version %lld) was applied with another definition (checksum %.12s, "
				     "now %.12s): restore it as it was and put the change in a new migration",
				     m->list[i].id, m->list[i].version, sum, m->list[i].sum);
				bad = 1;
			}
			newest_applied = m->list[i].version;
			newest_id = m->list[i].id;
		}
	}
	for (size_t i = 0; i < m->n; i++) {
		const struct ecw_entity *e = find_record(recs, n, m->list[i].version);
		if ((!e || !rec_is(e, "applied")) && m->list[i].version < newest_applied) {
			tell(say, payload, true,
			     "%s (version %lld) is not applied but %s (version %lld) is: a migration must "
			     "come after every applied one (give it a higher version)",
			     m->list[i].id, m->list[i].version, newest_id, newest_applied);
			bad = 1;
		}
	}
	for (size_t k = 0; k < n; k++) {
		long long v = rec_int(recs[k], "Version", -1);
		if (!lists(m, v))
			tell(say, payload, true,
			     "warning: the version table records %s (version %lld), which the configuration "
			     "no longer lists",
			     rec_str(recs[k], "Id") ? rec_str(recs[k], "Id") : "?", v);
	}
	return bad ? ecw_error_set(ECW_EINVALID, "refusing to migrate (see above)") : 0;
}

/* The version table's records for m (none when it does not exist yet), and
 * the history they tell checked against m; every problem is told. The
 * records are the caller's (records_free) whatever the result. */
static int read_history(struct ecw_entity ***recs, size_t *n, struct ecw_client *c,
			const struct ecw_migration_set *m, ecw_migrate_say_fn *say, void *payload)
{
	int err;

	if ((err = read_records(recs, n, c, m->table)) < 0) {
		tell(say, payload, true, "%s", ecw_error_last()->message);
		return err;
	}
	return check_history(m, *recs, *n, say, payload);
}

int ecw_migrate_dry_run(struct ecw_buf *plan, size_t *pending, struct ecw_client *c,
			const struct ecw_migration_set *m, ecw_migrate_say_fn *say, void *payload)
{
	struct ecw_entity **recs = NULL;
	size_t nrecs = 0;
	int err;

	*pending = 0;
	if ((err = read_history(&recs, &nrecs, c, m, say, payload)) < 0)
		goto done;
	for (size_t i = 0; i < m->n; i++) {
		const struct ecw_entity *e = find_record(recs, nrecs, m->list[i].version);
		size_t from = e ? (size_t)rec_int(e, "Step", 0) : 0;
		if (e && rec_is(e, "applied"))
			continue;
		if (from >= m->list[i].nsteps)
			from = 0;
		(*pending)++;
		if (e && ecw_buf_printf(plan, "(%s, resumes at step %d)\n",
					rec_str(e, "State") ? rec_str(e, "State") : "?",
					m->list[i].steps[from].pos) < 0)
			break;
		if (ecw_migrate_plan(plan, m, i, from) < 0)
			break;
	}
done:
	records_free(recs, nrecs);
	return err;
}

int ecw_migrate_apply(struct ecw_migrate_counts *out, struct ecw_client *c, const struct ecw_migration_set *m,
		      bool progress, ecw_migrate_say_fn *say, void *payload)
{
	struct ecw_entity **recs = NULL;
	size_t nrecs = 0;
	struct run r;
	int err;

	out->applied = out->already = 0;
	if ((err = read_history(&recs, &nrecs, c, m, say, payload)) < 0)
		goto done;
	memset(&r, 0, sizeof(r));
	r.m = m;
	r.c = c;
	r.progress = progress;
	r.say = say;
	r.payload = payload;
	owner_name(r.owner, sizeof(r.owner));
	for (size_t i = 0; i < m->n; i++) {
		const struct ecw_entity *e = find_record(recs, nrecs, m->list[i].version);
		enum claim how;

		if (e && rec_is(e, "applied")) {
			out->already++;
			continue;
		}
		r.g = &m->list[i];
		if ((err = claim(&how, &r)) < 0) {
			tell(say, payload, true, "%s (version %lld): %s", r.g->id, r.g->version,
			     ecw_error_last()->message);
			goto done;
		}
		if (how == ALREADY_APPLIED) {
			tell(say, payload, false, "%s: applied by another process", r.g->id);
			out->already++;
			continue;
		}
		tell(say, payload, false, "%s: applying (version %lld, %zu step%s)", r.g->id, r.g->version,
		     r.g->nlisted, r.g->nlisted == 1 ? "" : "s");
		err = apply_steps(&r);
		ecw_entity_free(r.rec);
		free(r.etag);
		r.rec = NULL;
		r.etag = NULL;
		if (err < 0) {
			tell(say, payload, true, "%s (version %lld) failed: %s", r.g->id, r.g->version,
			     ecw_error_last()->message);
			if (i + 1 < m->n)
				tell(say, payload, true,
				     "%zu later migration%s not attempted; fix the cause and run migrate again: "
				     "it resumes at that step",
				     m->n - i - 1, m->n - i - 1 == 1 ? "" : "s");
			goto done;
		}
		tell(say, payload, false, "%s: applied", r.g->id);
		out->applied++;
	}
done:
	records_free(recs, nrecs);
	return err;
}

/* ---- status ------------------------------------------------------------------------- */

/* One line of status for migration g (or, g NULL, a record the
 * configuration no longer lists). */
static int state_line(struct ecw_buf *out, const struct ecw_migration *g, const struct ecw_entity *e)
{
	const char *st = rec_str(e, "State");
	char left[32];

	if (!e)
		return ecw_buf_adds(out, "pending");
	if (!st)
		return ecw_buf_adds(out, "unknown (the record has no State)");
	if (strcmp(st, "applied") == 0) {
		const struct ecw_prop *at = ecw_entity_get(e, "AppliedAt");
		if (ecw_buf_printf(out, "applied %s by %s",
				   at && at->type == ECW_EDM_DATETIME ? at->v.s : "?",
				   rec_str(e, "AppliedBy") ? rec_str(e, "AppliedBy") : "?") < 0)
			return ecw_error_set(ECW_ENOMEM, "out of memory");
	} else if (strcmp(st, "failed") == 0) {
		if (ecw_buf_printf(out, "failed at step %lld: %s", rec_int(e, "FailedStep", 0),
				   rec_str(e, "Error") ? rec_str(e, "Error") : "?") < 0)
			return ecw_error_set(ECW_ENOMEM, "out of memory");
	} else {
		long long step = rec_int(e, "Step", 0);
		int64_t lease = rec_int(e, "LeaseUntil", 0) - ecw_clock_wall_ms();
		ecw_progress_human_age(left, sizeof(left), (lease < 0 ? -lease : lease) / 1000);
		if (ecw_buf_printf(out, "running by %s, at step %lld, %lld entities done in it (%s %s%s)",
				   rec_str(e, "Owner") ? rec_str(e, "Owner") : "?",
				   g && step >= 0 && (size_t)step < g->nsteps ? (long long)g->steps[step].pos
									      : step + 1,
				   rec_int(e, "Done", 0), lease > 0 ? "lease ends in" : "lease expired", left,
				   lease > 0 ? "" : " ago: the next migrate takes over") < 0)
			return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	if (g && rec_str(e, "Checksum") && strcmp(rec_str(e, "Checksum"), g->sum) != 0 &&
	    ecw_buf_adds(out, " [definition changed since]") < 0)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	return 0;
}

/* Appends a row of version and id (copied) saying state; rows has room. */
static int add_row(struct ecw_migrate_row *rows, size_t *n, long long version, const char *id,
		   const struct ecw_buf *state, bool listed)
{
	struct ecw_migrate_row *row = &rows[*n];

	row->version = version;
	row->listed = listed;
	if (!(row->id = strdup(id)) || !(row->state = strdup(ecw_buf_cstr(state)))) {
		free(row->id);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	(*n)++;
	return 0;
}

int ecw_migrate_status(struct ecw_migrate_row **out, size_t *n, struct ecw_client *c,
		       const struct ecw_migration_set *m)
{
	struct ecw_entity **recs = NULL;
	struct ecw_migrate_row *rows = NULL;
	size_t nrecs = 0, k = 0;
	struct ecw_buf line;
	int err;

	*out = NULL;
	*n = 0;
	ecw_buf_init(&line, 0);
	if ((err = read_records(&recs, &nrecs, c, m->table)) < 0)
		goto done;
	if (!(rows = calloc(m->n + nrecs + 1, sizeof(*rows)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < m->n; i++) {
		const struct ecw_entity *e = find_record(recs, nrecs, m->list[i].version);
		ecw_buf_reset(&line);
		if ((err = state_line(&line, &m->list[i], e)) < 0 ||
		    (err = add_row(rows, &k, m->list[i].version, m->list[i].id, &line, true)) < 0)
			goto done;
	}
	for (size_t j = 0; j < nrecs; j++) {
		long long v = rec_int(recs[j], "Version", -1);
		const char *id = rec_str(recs[j], "Id");
		if (lists(m, v))
			continue;
		ecw_buf_reset(&line);
		if ((err = state_line(&line, NULL, recs[j])) < 0 ||
		    (err = add_row(rows, &k, v, id ? id : "?", &line, false)) < 0)
			goto done;
	}
done:
	if (err < 0) {
		ecw_migrate_rows_free(rows, k);
	} else {
		*out = rows;
		*n = k;
	}
	ecw_buf_dispose(&line);
	records_free(recs, nrecs);
	return err;
}

void ecw_migrate_rows_free(struct ecw_migrate_row *rows, size_t n)
{
	if (!rows)
		return;
	for (size_t i = 0; i < n; i++) {
		free(rows[i].id);
		free(rows[i].state);
	}
	free(rows);
}
