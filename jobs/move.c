/* SPDX-License-Identifier: MIT */
/* move.c - archive and restore: the eventually consistent transactions
 * pattern. `from` holds the entity, `to` should hold it instead.
 *
 *   1. GET the source (its ETag E).          absent: done (detail "already-moved"
 *                                            or "missing"; a missing TABLE is
 *                                            an error, not "moved")
 *   2. write an identical copy into `to`     (every property, exact EDM types,
 *      (re-keyed by templates), but only     keys from to_partition_key/row_key):
 *      into an empty place, or over the      insert it; when that is refused
 *      target as read while the source       (409: the target exists), read the
 *      was still that version                target, read the source again (same
 *                                            ETag, else start over) and update
 *                                            If-Match the target's ETag; 404,
 *                                            409 or 412 mean another run or the
 *                                            application wrote: start over
 *   3. DELETE the source with If-Match: E    412: it changed after step 1, so
 *                                            start over with the newer version;
 *                                            404: someone finished the move
 *
 * Crash safety, step by step (a crash = the process dies right after it):
 *   after 1: nothing was written; the redelivered message runs it all again.
 *   after 2: the entity is in both tables (the copy equals the source as read).
 *            A rerun reads the source again and replaces the copy with what it
 *            reads (the same, or newer), then deletes: converges. It is never
 *            in neither table: the source is only deleted after the copy is
 *            written, and only in the version that was copied (If-Match).
 *   after 3: the entity is only in `to`; the message was not deleted, so it
 *            comes back; step 1 finds no source: success. Converged.
 * Duplicates and competing workers: a run that read an older version can
 * never put it over a newer copy (or, restoring, over what the application
 * wrote to the live table since): its conditional copy fails and it starts
 * over, finding the source gone or newer. Deletes race under If-Match: at
 * most one succeeds, the other sees 404 and is done. (Found by the
 * four-worker test's author: an unconditional copy lost updates.)
 * Limit: with a re-keying template over a property that changes between two
 * overlapping runs, the older run's copy can land at the OLD target key; the
 * source's delete then succeeds for the newer run only, and the older copy
 * stays under its old key. A source changed between a
 * run's read and its delete is never lost: the delete fails with 412 and the
 * run starts over with the new version, replacing the older copy.
 *
 * A move with one side in blobs (from_blob or to_blob) is parsed, run and
 * audited by jobs/move_blob.c, with its own steps and argument there; this
 * file's ops table hands it over. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_audit.h"
#include "ecw_job.h"
#include "jobs_private.h"
#include "move_private.h"

#define MAX_ROUNDS 5

struct move {
	char *from, *to;
	struct ecw_template *to_pk, *to_rk; /* NULL: keep the key */
	struct ecw_move_blob *blob;         /* a side in blobs: move_blob.c runs it */
};

static void move_free(void *p)
{
	struct move *m = p;

	if (!m)
		return;
	free(m->from);
	free(m->to);
	ecw_move_blob_free(m->blob);
	ecw_template_free(m->to_pk);
	ecw_template_free(m->to_rk);
	free(m);
}

static int move_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type",       "then", "from", "to", "to_partition_key",
					      "to_row_key", NULL};
	struct move *m = calloc(1, sizeof(*m));
	int bad = 0;

	*out = NULL;
	if (!m)
		return -1;
	if (ecw_move_blob_wanted(job)) {
		if (ecw_move_blob_parse(&m->blob, job, errs) < 0) {
			move_free(m);
			return -1;
		}
		*out = m;
		return 0;
	}
	bad |= ecw_node_check_keys(job, allowed, "move job", errs) > 0;
	bad |= ecw_job_setting_table(&m->from, job, "from", true, errs) < 0;
	bad |= ecw_job_setting_table(&m->to, job, "to", true, errs) < 0;
	bad |= ecw_job_setting_template(&m->to_pk, job, "to_partition_key", false, errs) < 0;
	bad |= ecw_job_setting_template(&m->to_rk, job, "to_row_key", false, errs) < 0;
	if (!bad && m->from && m->to && strcmp(m->from, m->to) == 0 && !m->to_pk && !m->to_rk) {
		ecw_node_error(errs, ecw_node_get(job, "to"), "to: a move needs another table or new keys");
		bad = 1;
	}
	if (bad) {
		move_free(m);
		return -1;
	}
	*out = m;
	return 0;
}

static int move_prepare(const void *settings, struct ecw_client *c)
{
	const struct move *m = settings;

	if (m->blob)
		return ecw_move_blob_prepare(m->blob, c);
	if (strcmp(m->to, m->from) == 0)
		return 0; /* re-keyed in place: the table is the source, never made */
	return ecw_table_create(NULL, c, m->to);
}

/* The copy: every property of src, under the target keys. */
static int make_copy(struct ecw_entity **out, const struct move *m, const struct ecw_entity *src)
{
	struct ecw_buf pk, rk;
	int err;

	ecw_buf_init(&pk, 0);
	ecw_buf_init(&rk, 0);
	if ((err = m->to_pk ? ecw_template_render(&pk, m->to_pk, src, ECW_TEMPLATE_PLAIN)
			    : ecw_buf_adds(&pk, ecw_entity_pk(src))) < 0 ||
	    (err = m->to_rk ? ecw_template_render(&rk, m->to_rk, src, ECW_TEMPLATE_PLAIN)
			    : ecw_buf_adds(&rk, ecw_entity_rk(src))) < 0 ||
	    (err = ecw_entity_key_check(ecw_buf_cstr(&pk), "to_partition_key result")) < 0 ||
	    (err = ecw_entity_key_check(ecw_buf_cstr(&rk), "to_row_key result")) < 0 ||
	    (err = ecw_entity_clone(out, src)) < 0)
		goto done;
	if ((err = ecw_entity_set_keys(*out, ecw_buf_cstr(&pk), ecw_buf_cstr(&rk))) < 0) {
		ecw_entity_free(*out);
		*out = NULL;
	}
done:
	ecw_buf_dispose(&pk);
	ecw_buf_dispose(&rk);
	return err;
}

/* The source is gone: the move is done, or there was never anything to move.
 * When the target's keys do not depend on the (deleted) source's properties,
 * one read tells which, for the log. */
static int source_missing(const struct move *m, struct ecw_job_ctx *ctx)
{
	const char *detail = "missing";

	if (!m->to_pk && !m->to_rk) {
		struct ecw_entity *t = NULL;
		int err = ecw_table_get(&t, ctx->client, m->to, ctx->pk, ctx->rk);
		if (err == 0)
			detail = "already-moved";
		else if (err != ECW_ENOTFOUND) /* a missing target table too */
			return err;
		ecw_entity_free(t);
	}
	snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "%s", detail);
	ecw_error_clear();
	return 0;
}

#define RESTART 1

/* Writes the copy only where it cannot hide a newer state. First an insert,
 * which the service refuses (409) when the target exists: it can only fill an
 * empty place, so it needs no read (the usual case costs one request, not
 * four). A stale copy inserted so is replaced, never kept: the source's
 * delete is If-Match the version copied, so a source changed meanwhile
 * fails it (412) and the next round updates the copy. (A source that the
 * application deletes between the read and the insert leaves that copy
 * behind, as one deleted between the second read and the write below does.)
 * When the target exists, the copy goes only over the target as it was when
 * the source was known current: the target is read, the source read again
 * (same ETag), and the copy written If-Match the target's ETag (or inserted,
 * should the target be gone by then). A run that overlaps another (duplicate
 * messages) therefore never puts an older copy over a newer one, nor over
 * what the application wrote since: it gets 404, 409 or 412 and starts over
 * (RESTART). */
static int write_copy(const struct move *m, struct ecw_job_ctx *ctx, const struct ecw_entity *src,
		      const struct ecw_entity *copy)
{
	struct ecw_entity *target = NULL, *again = NULL;
	int err;

	if ((err = ecw_job_check_lease(ctx)) < 0)
		return err;
	err = ecw_table_write(NULL, ctx->client, m->to, copy, ECW_WRITE_INSERT, NULL);
	if (err != ECW_ECONFLICT)
		return err;
	ecw_error_clear();
	err = ecw_table_get(&target, ctx->client, m->to, ecw_entity_pk(copy), ecw_entity_rk(copy));
	if (err < 0 && err != ECW_ENOTFOUND)
		return err;
	err = ecw_table_get(&again, ctx->client, m->from, ctx->pk, ctx->rk);
	if (err == 0 && strcmp(ecw_entity_etag(again), ecw_entity_etag(src)) != 0)
		err = RESTART; /* changed since the first read */
	else if (err == ECW_ENOTFOUND)
		err = RESTART; /* someone moved it meanwhile */
	if (err == 0 && (err = ecw_job_check_lease(ctx)) == 0)
		err = target ? ecw_table_write(NULL, ctx->client, m->to, copy, ECW_WRITE_UPDATE,
					       ecw_entity_etag(target))
			     : ecw_table_write(NULL, ctx->client, m->to, copy, ECW_WRITE_INSERT, NULL);
	if (err == ECW_ECONFLICT || err == ECW_EPRECONDITION || (target && (err == ECW_ENOTFOUND)))
		err = RESTART; /* the target changed under us */
	ecw_entity_free(target);
	ecw_entity_free(again);
	return err;
}

static int move_run(const void *settings, struct ecw_job_ctx *ctx)
{
	const struct move *m = settings;
	int err = 0;

	if (m->blob)
		return ecw_move_blob_run(m->blob, ctx);
	for (int round = 0; round < MAX_ROUNDS; round++) {
		struct ecw_entity *src = NULL, *copy = NULL;

		err = ecw_table_get(&src, ctx->client, m->from, ctx->pk, ctx->rk);
		ecw_crash_point("move.read");
		if (err == ECW_ENOTFOUND)
			return source_missing(m, ctx);
		if (err < 0)
			return err; /* a missing table too: a misconfiguration, not "moved" */
		if ((err = make_copy(&copy, m, src)) == 0 && strcmp(m->from, m->to) == 0 &&
		    strcmp(ecw_entity_pk(copy), ctx->pk) == 0 && strcmp(ecw_entity_rk(copy), ctx->rk) == 0) {
			/* Re-keyed in place to the keys it already has: nothing to move. */
			snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "in-place");
			ecw_entity_free(copy);
			ecw_entity_free(src);
			return 0;
		}
		if (err == 0)
			err = write_copy(m, ctx, src, copy);
		ecw_entity_free(copy);
		if (err == RESTART) {
			ecw_entity_free(src);
			ecw_error_clear();
			continue;
		}
		if (err < 0) {
			ecw_entity_free(src);
			return err;
		}
		ecw_crash_point("move.copied");
		if ((err = ecw_job_check_lease(ctx)) == 0)
			err = ecw_table_delete(ctx->client, m->from, ctx->pk, ctx->rk, ecw_entity_etag(src));
		ecw_entity_free(src);
		if (err == 0)
			ecw_crash_point("move.deleted");
		if (err == ECW_ENOTFOUND) {
			/* Another run finished the move after our read. */
			ecw_error_clear();
			return 0;
		}
		if (err != ECW_EPRECONDITION)
			return err;
		/* Changed since we read it: copy the newer version. */
	}
	return ecw_error_set(ECW_ETRANSIENT, "move %s -> %s: the source kept changing (%d rounds)", m->from,
			     m->to, MAX_ROUNDS);
}

/* ---- groups (ecw_job.h run_group) ---------------------------------------------------
 *
 * Messages on entities of one partition, run together so that the writes
 * cost a request per group instead of one per entity:
 *
 *   1. read the sources, as run's step 1,    absent: done, as run (source_missing);
 *      with one query per 14 members         anything else unusual (the query
 *      (ecw_table_get_many: the group        failed, a key twice in the group,
 *      shares the PartitionKey)              an in-place re-key): that member
 *                                            runs alone
 *   2. INSERT the copies: one entity group   refused (a copy exists: 409), or any
 *      transaction per target partition.     error: that transaction's members
 *                                            run alone, from their step 1
 *   3. DELETE the sources If-Match the       refused (one changed: 412, one gone:
 *      versions read: one transaction.       404), or any error: every member
 *                                            left runs alone, from its step 1
 *
 * Crash safety: the query of step 1 writes nothing and gives each member
 * the version (ETag) a GET would have given it at that moment, so from there
 * on a member is where run is after its own step 1. A transaction applies
 * all or nothing, so whenever the
 * process dies each member's entity is in a state that run leaves behind at
 * one of its own steps: after 1 nothing was written; after 2 the entity is
 * in both tables and the copy equals the source as read (run's "after 2");
 * after 3 it is only in `to` (run's "after 3"). The redelivered messages
 * converge from there as run's do. A member that runs alone after a refused
 * or failed transaction (a timeout may hide one that applied) starts from
 * its own step 1 and so meets exactly what a rerun meets: a copy it may not
 * simply overwrite is taken care of by write_copy's careful path. The
 * inserts only fill empty places and the deletes are If-Match the version
 * copied, as in run, so the argument about stale and competing runs above
 * holds member by member. Before each write every member's lease is checked;
 * one that lost it leaves the group with run's lease error. */

struct member {
	struct ecw_entity *src, *copy;
	bool alone;   /* runs by itself after the group's transactions */
	bool copied;  /* in a transaction of step 2 that applied */
	bool settled; /* errs[] holds its result */
};

/* Step 2 for the members whose copies go to target partition pk: false when
 * the transaction did not apply (its members then run alone). */
static bool insert_copies(const struct move *m, struct ecw_job_ctx *ctxs, struct member *mem, size_t n,
			  const char *pk, int *errs)
{
	struct ecw_batch *b = NULL;
	bool applied = false;
	size_t added = 0;

	if (ecw_batch_new(&b, m->to) < 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (mem[i].settled || mem[i].alone || mem[i].copied || !mem[i].copy ||
		    strcmp(ecw_entity_pk(mem[i].copy), pk) != 0)
			continue;
		int err = ecw_job_check_lease(&ctxs[i]);
		if (err < 0) {
			ecw_job_member_fail(&ctxs[i], &errs[i], err);
			mem[i].settled = true;
		} else if (ecw_batch_add_borrowed(b, ECW_BATCH_INSERT, mem[i].copy, NULL) < 0) {
			mem[i].alone = true; /* two sources re-keyed to one target: run's way */
		} else {
			mem[i].copied = true; /* provisionally: undone below if it fails */
			added++;
		}
	}
	ecw_error_clear();
	applied = added > 0 && ecw_batch_submit(ctxs[0].client, b) == 0;
	for (size_t i = 0; i < n; i++)
		if (mem[i].copied && !applied && strcmp(ecw_entity_pk(mem[i].copy), pk) == 0) {
			mem[i].copied = false;
			mem[i].alone = true;
		}
	ecw_batch_free(b);
	ecw_error_clear();
	return applied;
}

/* Step 1: every member's source, read with one query per 14 members (the
 * group shares the PartitionKey). A key twice in the group runs alone: after
 * the first, it finds the move done. When the query fails, every member runs
 * alone, and run says what went wrong. */
static void read_sources(const struct move *m, struct ecw_job_ctx *ctxs, struct member *mem, size_t n,
			 int *errs)
{
	const char **rks = calloc(n, sizeof(*rks));
	struct ecw_entity **got = calloc(n, sizeof(*got));
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < i; j++)
			if (strcmp(ctxs[j].rk, ctxs[i].rk) == 0)
				mem[i].alone = true;
		if (!mem[i].alone && rks)
			rks[k++] = ctxs[i].rk;
	}
	if (!rks || !got || ecw_table_get_many(got, ctxs[0].client, m->from, ctxs[0].pk, rks, k) < 0) {
		for (size_t i = 0; i < n; i++)
			mem[i].alone = true;
		k = 0;
	}
	for (size_t i = 0, g = 0; g < k && i < n; i++) {
		struct ecw_job_ctx *x = &ctxs[i];
		int err;
		if (mem[i].alone)
			continue;
		mem[i].src = got[g++];
		if (!mem[i].src) {
			if ((err = source_missing(m, x)) < 0)
				ecw_job_member_fail(x, &errs[i], err);
			mem[i].settled = true;
		} else if (make_copy(&mem[i].copy, m, mem[i].src) < 0 ||
			   (strcmp(m->from, m->to) == 0 && strcmp(ecw_entity_pk(mem[i].copy), x->pk) == 0 &&
			    strcmp(ecw_entity_rk(mem[i].copy), x->rk) == 0)) {
			mem[i].alone = true; /* run says what went wrong, or that it is in place */
		}
	}
	ecw_error_clear();
	free(rks);
	free(got);
}

static void move_run_group(const void *settings, struct ecw_job_ctx *ctxs, size_t n, int *errs)
{
	const struct move *m = settings;
	struct member *mem = calloc(n, sizeof(*mem));
	struct ecw_batch *del = NULL;
	size_t ndel = 0;

	if (!mem) {
		for (size_t i = 0; i < n; i++)
			ecw_job_member_fail(&ctxs[i], &errs[i], ecw_error_set(ECW_ENOMEM, "out of memory"));
		return;
	}
	if (m->blob) {
		free(mem);
		ecw_move_blob_run_group(m->blob, ctxs, n, errs);
		return;
	}
	/* 1. Read every source: one query per 14 members. */
	read_sources(m, ctxs, mem, n, errs);
	ecw_crash_point("move.group.read");

	/* 2. The copies, one transaction per target partition. */
	for (size_t i = 0; i < n; i++)
		if (!mem[i].settled && !mem[i].alone && !mem[i].copied && mem[i].copy)
			insert_copies(m, ctxs, mem, n, ecw_entity_pk(mem[i].copy), errs);
	ecw_crash_point("move.group.copied");

	/* 3. The sources, If-Match the versions copied, in one transaction. */
	if (ecw_batch_new(&del, m->from) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (!mem[i].copied || mem[i].settled)
				continue;
			int err = ecw_job_check_lease(&ctxs[i]);
			if (err < 0) {
				ecw_job_member_fail(&ctxs[i], &errs[i], err);
				mem[i].settled = true;
			} else if (ecw_batch_add_borrowed(del, ECW_BATCH_DELETE, mem[i].src,
							  ecw_entity_etag(mem[i].src)) < 0) {
				mem[i].alone = true;
			} else {
				ndel++;
			}
		}
		ecw_error_clear();
		bool applied = ndel > 0 && ecw_batch_submit(ctxs[0].client, del) == 0;
		for (size_t i = 0; i < n; i++)
			if (mem[i].copied && !mem[i].settled && !mem[i].alone) {
				if (applied)
					mem[i].settled = true; /* errs[i] stays 0: moved */
				else
					mem[i].alone = true;
			}
		ecw_batch_free(del);
		ecw_error_clear();
	} else {
		for (size_t i = 0; i < n; i++)
			if (mem[i].copied && !mem[i].settled)
				mem[i].alone = true;
	}
	ecw_crash_point("move.group.deleted");

	/* What the group could not do, each by itself. */
	for (size_t i = 0; i < n; i++) {
		if (!mem[i].settled) {
			ecw_error_clear();
			int err = move_run(settings, &ctxs[i]);
			if (err < 0)
				ecw_job_member_fail(&ctxs[i], &errs[i], err);
		}
		ecw_entity_free(mem[i].src);
		ecw_entity_free(mem[i].copy);
	}
	free(mem);
}

/* ---- audit (ecw_audit.h) -----------------------------------------------------------
 *
 * An entity is drift for a move only when it is in both tables: in `from`
 * alone it waits for its message, in `to` alone it was moved. The scan
 * streams `from` (every property: the comparison is exact) and, for each
 * entity, GETs `to` at the keys the move would write (one request per
 * entity; the other direction cannot be scanned, since re-keying templates
 * do not run backwards). ecw_audit_move_pair judges the pair: identical is
 * an unfinished move (STALE), different a CONFLICT.
 *
 * Repair of an identical pair completes the move in this job's direction:
 * the source and the target are read again, still identical, and the
 * source is deleted If-Match the version just read, which is run's step 3
 * on a copy run's step 2 would have left. A source changed since fails the
 * If-Match (412: not repaired, reported); the target is read right before,
 * so the delete never takes the only copy unless the target is deleted in
 * the same instant, which is the window run's own step 3 has. A differing
 * pair is never repaired: which copy is right is the operator's call. */

static int audit_complete(const struct move *m, struct ecw_audit_ctx *ctx, const char *pk, const char *rk,
			  bool *done)
{
	struct ecw_entity *src = NULL, *copy = NULL, *target = NULL;
	int err;

	*done = false;
	ecw_audit_pace(ctx);
	if ((err = ecw_table_get(&src, ctx->client, m->from, pk, rk)) < 0)
		goto done;
	if ((err = make_copy(&copy, m, src)) < 0)
		goto done;
	ecw_audit_pace(ctx);
	if ((err = ecw_table_get(&target, ctx->client, m->to, ecw_entity_pk(copy), ecw_entity_rk(copy))) < 0)
		goto done;
	if (ecw_audit_move_pair(copy, target) != ECW_AUDIT_STALE || !ecw_entity_etag(src))
		goto done; /* no longer identical: left as it is */
	ecw_audit_pace(ctx);
	if ((err = ecw_table_delete(ctx->client, m->from, pk, rk, ecw_entity_etag(src))) == 0)
		*done = true;
done:
	if (err == ECW_EPRECONDITION || err == ECW_ENOTFOUND) {
		ecw_error_clear(); /* changed or moved meanwhile: not ours to force */
		err = 0;
	}
	ecw_entity_free(src);
	ecw_entity_free(copy);
	ecw_entity_free(target);
	return err;
}

static int move_audit(const void *settings, struct ecw_audit_ctx *ctx)
{
	const struct move *m = settings;
	struct ecw_table_query *q = NULL;
	int err;

	if (m->blob)
		return ecw_move_blob_audit(m->blob, ctx);
	if ((err = ecw_audit_query(&q, ctx, m->from, "PartitionKey", NULL)) < 0)
		return err;
	for (;;) {
		struct ecw_entity *src = NULL, *copy = NULL, *target = NULL;
		struct ecw_audit_finding f = {.table = m->from};
		char why[sizeof(((struct ecw_error *)0)->message)];

		if ((err = ecw_audit_next(&src, q, ctx)) < 0 || !src)
			break; /* the end, or an error (a missing table is ECW_ENOTABLE) */
		if (make_copy(&copy, m, src) < 0) {
			/* The move would poison its message: nothing derived to compare. */
			ecw_error_clear();
		} else if (!(strcmp(m->from, m->to) == 0 &&
			     strcmp(ecw_entity_pk(copy), ecw_entity_pk(src)) == 0 &&
			     strcmp(ecw_entity_rk(copy), ecw_entity_rk(src)) == 0)) {
			err = ecw_audit_get(&target, ctx, m->to, ecw_entity_pk(copy), ecw_entity_rk(copy));
			if (err == 0 && (f.kind = ecw_audit_move_pair(copy, target)) != ECW_AUDIT_OK) {
				f.pk = ecw_entity_pk(src);
				f.rk = ecw_entity_rk(src);
				f.source_pk = f.pk;
				f.source_rk = f.rk;
				f.detail = f.kind == ECW_AUDIT_STALE
						   ? "in both tables, identical: unfinished move"
						   : "in both tables, different";
				/* --via-queue: the message's run does what
				 * audit_complete does (its copy is there and
				 * equal: it deletes the source If-Match). */
				if (f.kind == ECW_AUDIT_STALE && ctx->repair && ctx->requeue)
					ecw_audit_converge(ctx, move_run, m, f.pk, f.rk, &f, why,
							   sizeof(why));
				else if (f.kind == ECW_AUDIT_STALE && ctx->repair &&
					 (err = audit_complete(m, ctx, f.pk, f.rk, &f.repaired)) == 0)
					ecw_audit_chain(ctx, f.pk, f.rk, &f, why, sizeof(why));
				ecw_audit_note(ctx, &f);
			}
		}
		if (err == 0)
			ecw_audit_checked(ctx);
		ecw_entity_free(src);
		ecw_entity_free(copy);
		ecw_entity_free(target);
		if (err < 0)
			break;
	}
	ecw_table_query_free(q);
	return err;
}

static const char *move_source(const void *settings)
{
	const struct move *m = settings;

	return m->blob ? ecw_move_blob_source_table(m->blob) : m->from;
}

static int move_source_keys(const void *settings, struct ecw_client *c,
			    int (*each)(void *arg, const char *pk, const char *rk), void *arg)
{
	const struct move *m = settings;

	if (!m->blob)
		return ecw_error_set(ECW_EINVALID, "move %s -> %s: its source is a table", m->from, m->to);
	return ecw_move_blob_source_keys(m->blob, c, each, arg);
}

static const char *move_target(const void *settings)
{
	const struct move *m = settings;

	return m->blob ? ecw_move_blob_target_table(m->blob) : m->to;
}

static const char *move_container(const void *settings)
{
	const struct move *m = settings;

	return m->blob ? ecw_move_blob_source_container(m->blob) : NULL;
}

const struct ecw_job_type ecw_job_move = {
	.name = "move",
	.parse = move_parse,
	.prepare = move_prepare,
	.run = move_run,
	/* A group reads its sources with one query per 14 members
	 * (ecw_table_get_many) and writes with a transaction per partition.
	 * The service serves a query OR-ing RowKeys as a scan of the
	 * partition: fewer requests, each costlier in a large partition. The
	 * messages' deletes are made one after the other by one thread, so 16
	 * keeps a group's time short; 14 members are one query. */
	.run_group = move_run_group,
	.group_max = ECW_TABLE_GET_MANY_KEYS,
	.free = move_free,
	.source_table = move_source,
	.source_keys = move_source_keys,
	.target_table = move_target,
	.container = move_container,
	.audit = move_audit,
};
