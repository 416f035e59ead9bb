/* SPDX-License-Identifier: MIT */
/* move_blob_group.c - a blob move's groups (ecw_job.h run_group): messages
 * on entities of one partition run together, so that the table's side costs
 * a request per group instead of one per entity, as jobs/move.c's groups do.
 * Blob storage has no transactions: each blob is still put, read or deleted
 * by a request of its own.
 *
 * archive (to_blob):
 *   1. read the sources: one query per 14    absent: done, as run (detail
 *      members (ecw_table_get_many: the      "already-moved" or "missing"); a
 *      group shares the PartitionKey)        key twice in the group, a name the
 *                                            service would refuse, the query
 *                                            failed: that member runs alone
 *   2. put each blob If-None-Match "*",      refused (409: a blob is there) or
 *      the puts pipelined (one write for     any error: that member runs alone,
 *      up to 192 KiB of JSON, the answers    from its step 1 (one the connection
 *      read in order)                        left unanswered is sent again
 *                                            first, and may meet its own blob)
 *   3. DELETE the sources If-Match the       refused (one changed: 412, one
 *      versions read: one transaction        gone: 404) or any error: every
 *                                            member left runs alone
 * restore (from_blob):
 *   1. GET each blob (its ETag B)            absent: done, as run; a key twice,
 *                                            any error (too large, no entity):
 *                                            that member runs alone
 *   2. INSERT the entities into `to`: one    refused (409: one is there) or any
 *      transaction (a restore keeps the      error: every member runs alone,
 *      keys: one partition)                  from its step 1
 *   3. DELETE each blob If-Match B           any error (412: changed, 404:
 *                                            gone): that member runs alone
 *
 * Crash safety: the query of step 1 writes nothing and gives each member
 * the version (ETag) its own GET would have given it then, so from there on
 * a member is where run is after its own step 1 (move_blob.c). Each blob put
 * or delete is one member's step, and a transaction applies all or nothing,
 * so whenever the process dies each member's entity is in a state run
 * leaves at one of its steps: after 1 nothing was written; after 2 the
 * entity is in both places, the copy equal to the source as read (a member
 * whose put applied and the others' not yet: each is at its own step); after
 * 3 it is only in the target. The puts of step 2 go out together, so a
 * crash after the first answer may find the later members' blobs written
 * or not, each at its own step 2 or before it. The redelivered messages
 * converge from there as run's do. A member that runs alone after a refused or failed request
 * (a timeout may hide one that applied) starts from its own step 1 and
 * meets exactly what a rerun meets: a copy it may not simply overwrite is
 * left to run's careful path. The writes only fill empty places and the
 * deletes are If-Match the version copied, as in run, so the argument about
 * stale and competing runs there holds member by member. Before each write
 * a member's lease is checked; one that lost it leaves the group with run's
 * lease error. Proven by test_job_move_blob_crash.c (a crash after each
 * point below) and test_job_move_blob_groups.c. */
#include <stdlib.h>
#include <string.h>

#include "ecw_job.h"
#include "jobs_private.h"
#include "move_blob_private.h"
#include "move_private.h"

struct member {
	struct ecw_buf name;        /* the blob's */
	struct ecw_entity *entity;  /* archive: the source as read; restore: the blob's entity */
	struct ecw_blob_info *blob; /* restore: the blob as read (its ETag) */
	bool alone;                 /* runs by itself after the group's steps */
	bool written;               /* its step 2 applied */
	bool in_tx;                 /* held by the group's transaction */
	bool settled;               /* errs[] holds its result */
};

/* Every member's name; a key twice in the group (after the first, it finds
 * the move done) or a name that cannot be made (run says why) runs alone. */
static void name_members(const struct ecw_move_blob *b, const struct ecw_job_ctx *ctxs, struct member *mem,
			 size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ecw_buf_init(&mem[i].name, ECW_MOVE_BLOB_NAME_MAX);
		for (size_t j = 0; j < i; j++)
			if (strcmp(ctxs[j].rk, ctxs[i].rk) == 0)
				mem[i].alone = true;
		if (!mem[i].alone && ecw_move_blob_name_of(&mem[i].name, b, ctxs[i].pk, ctxs[i].rk) < 0)
			mem[i].alone = true;
	}
	ecw_error_clear();
}

/* The source is gone: the member is done, as run is. */
static void settle_missing(const struct ecw_move_blob *b, struct ecw_job_ctx *ctx, struct member *mem,
			   int *err_out)
{
	int err = ecw_move_blob_source_missing(b, ctx, ecw_buf_cstr(&mem->name));

	if (err < 0)
		ecw_job_member_fail(ctx, err_out, err);
	mem->settled = true;
}

/* The member's lease, before one of its writes: false (and the member
 * settled with run's lease error) when it is lost. */
static bool lease_held(struct ecw_job_ctx *ctx, struct member *mem, int *err_out)
{
	int err = ecw_job_check_lease(ctx);

	if (err == 0)
		return true;
	ecw_job_member_fail(ctx, err_out, err);
	mem->settled = true;
	return false;
}

static bool in_group(const struct member *mem)
{
	return !mem->alone && !mem->settled;
}

/* One transaction on table: op for each member in the group whose step 2
 * is written (a delete If-Match the version read), each member's lease
 * checked first (one that lost it is settled with run's error). in_tx marks
 * the members it held; true when it applied. */
static bool transaction(const char *table, enum ecw_batch_op op, struct ecw_job_ctx *ctxs, struct member *mem,
			size_t n, int *errs)
{
	struct ecw_batch *tx = NULL;
	bool applied = false;
	size_t added = 0;

	if (ecw_batch_new(&tx, table) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (!in_group(&mem[i]) || !mem[i].written || !lease_held(&ctxs[i], &mem[i], &errs[i]))
				continue;
			const char *etag = op == ECW_BATCH_DELETE ? ecw_entity_etag(mem[i].entity) : NULL;
			mem[i].in_tx = ecw_batch_add_borrowed(tx, op, mem[i].entity, etag) == 0;
			added += mem[i].in_tx;
		}
		ecw_error_clear();
		applied = added > 0 && ecw_batch_submit(ctxs[0].client, tx) == 0;
		ecw_batch_free(tx);
	}
	ecw_error_clear();
	return applied;
}

/* ---- archive ------------------------------------------------------------------------------------ */

/* Step 1: the sources, with one query per 14 members. When the query fails,
 * every member runs alone, and run says what went wrong. */
static void archive_read(const struct ecw_move_blob *b, struct ecw_job_ctx *ctxs, struct member *mem,
			 size_t n, int *errs)
{
	const char **rks = calloc(n, sizeof(*rks));
	struct ecw_entity **got = calloc(n, sizeof(*got));
	size_t k = 0;

	for (size_t i = 0; i < n && rks; i++)
		if (!mem[i].alone)
			rks[k++] = ctxs[i].rk;
	if (!rks || !got || ecw_table_get_many(got, ctxs[0].client, b->table, ctxs[0].pk, rks, k) < 0) {
		for (size_t i = 0; i < n; i++)
			mem[i].alone = true;
		k = 0;
	}
	for (size_t i = 0, g = 0; g < k && i < n; i++) {
		if (mem[i].alone)
			continue;
		mem[i].entity = got[g++];
		if (!mem[i].entity)
			settle_missing(b, &ctxs[i], &mem[i], &errs[i]);
	}
	ecw_error_clear();
	free(rks);
	free(got);
}

/* Step 2's puts of one write: the members' blobs as the storage client
 * takes them, their JSON and escaped keys in two buffers of the chunk. */
struct put_chunk {
	const struct ecw_move_blob *b;
	struct member *mem;
	struct ecw_buf json, keys;
	struct ecw_blob_put_item *items;
	struct ecw_blob_meta (*meta)[4];
	struct ecw_blob_put_options *opts;
	size_t *who, *json_at, *keys_at; /* each item's member and where its bytes start */
	size_t k;
};

/* Appends member i's blob to the chunk: false (the chunk as it was) when it
 * does not fit, or cannot be made. */
static bool chunk_add(struct put_chunk *pc, size_t i)
{
	pc->json_at[pc->k] = pc->json.len;
	pc->keys_at[pc->k] = pc->keys.len;
	if (ecw_entity_to_json(&pc->json, pc->mem[i].entity) < 0 ||
	    ecw_move_blob_archive_keys(&pc->keys, pc->mem[i].entity) < 0) {
		pc->json.len = pc->json_at[pc->k];
		pc->keys.len = pc->keys_at[pc->k];
		ecw_error_clear();
		return false;
	}
	pc->who[pc->k++] = i;
	return true;
}

/* The chunk's items, once its buffers are done growing. */
static void chunk_items(struct put_chunk *pc)
{
	for (size_t j = 0; j < pc->k; j++) {
		size_t i = pc->who[j], end = j + 1 < pc->k ? pc->json_at[j + 1] : pc->json.len;

		ecw_move_blob_archive_options(&pc->opts[j], pc->meta[j], pc->b, pc->mem[i].entity,
					      pc->keys.ptr + pc->keys_at[j], NULL);
		pc->items[j] = (struct ecw_blob_put_item){ecw_buf_cstr(&pc->mem[i].name),
							  pc->json.ptr + pc->json_at[j], end - pc->json_at[j],
							  &pc->opts[j], 0};
	}
}

static void put_done(void *payload, size_t j)
{
	struct put_chunk *pc = payload;
	struct member *mem = &pc->mem[pc->who[j]];

	if (pc->items[j].err == 0) {
		mem->written = true;
		ecw_crash_point("move.to_blob.group.put");
	} else {
		mem->alone = true; /* a blob is there, or the put failed: run's way */
	}
	ecw_error_clear();
}

/* Step 2: each blob into an empty place, the puts pipelined a chunk of
 * MOVE_BLOB_PUT_CHUNK bytes of JSON at a time (one write, the answers read
 * in order). A member whose JSON cannot be made runs alone (run says why). */
#define MOVE_BLOB_PUT_CHUNK ((size_t)192 * 1024)
static void archive_put(const struct ecw_move_blob *b, struct ecw_job_ctx *ctxs, struct member *mem, size_t n,
			int *errs)
{
	struct put_chunk pc = {.b = b, .mem = mem};

	ecw_buf_init(&pc.json, ECW_MOVE_BLOB_MAX);
	ecw_buf_init(&pc.keys, 0);
	pc.items = calloc(n, sizeof(*pc.items));
	pc.meta = calloc(n, sizeof(*pc.meta));
	pc.opts = calloc(n, sizeof(*pc.opts));
	pc.who = calloc(n * 3, sizeof(*pc.who));
	pc.json_at = pc.who ? pc.who + n : NULL;
	pc.keys_at = pc.who ? pc.who + 2 * n : NULL;
	for (size_t i = 0; i < n;) {
		ecw_buf_reset(&pc.json);
		ecw_buf_reset(&pc.keys);
		pc.k = 0;
		for (; i < n && pc.json.len < MOVE_BLOB_PUT_CHUNK; i++) {
			if (!in_group(&mem[i]) || !lease_held(&ctxs[i], &mem[i], &errs[i]))
				continue;
			if (!pc.items || !pc.meta || !pc.opts || !pc.who) {
				mem[i].alone = true; /* no memory for the group's way */
			} else if (!chunk_add(&pc, i)) {
				if (pc.k > 0)
					break; /* the next chunk begins with it */
				mem[i].alone = true;
			}
		}
		chunk_items(&pc);
		if (pc.k > 0)
			ecw_blob_put_many(ctxs[0].client, b->container, pc.items, pc.k, put_done, &pc);
	}
	ecw_buf_dispose(&pc.json);
	ecw_buf_dispose(&pc.keys);
	free(pc.items);
	free(pc.meta);
	free(pc.opts);
	free(pc.who);
}

/* Step 3: the sources, If-Match the versions copied, in one transaction. */
static void archive_delete(const struct ecw_move_blob *b, struct ecw_job_ctx *ctxs, struct member *mem,
			   size_t n, int *errs)
{
	bool applied = transaction(b->table, ECW_BATCH_DELETE, ctxs, mem, n, errs);

	for (size_t i = 0; i < n; i++)
		if (in_group(&mem[i]) && mem[i].written) {
			mem[i].settled = applied && mem[i].in_tx; /* errs[i] stays 0: moved */
			mem[i].alone = !mem[i].settled;
		}
}

/* ---- restore ------------------------------------------------------------------------------------ */

/* Step 1: each blob, read and parsed. */
static void restore_read(const struct ecw_move_blob *b, struct ecw_job_ctx *ctxs, struct member *mem,
			 size_t n, int *errs)
{
	struct ecw_buf body;

	ecw_buf_init(&body, ECW_MOVE_BLOB_MAX);
	for (size_t i = 0; i < n; i++) {
		if (mem[i].alone)
			continue;
		int err = ecw_move_blob_read(&mem[i].entity, &mem[i].blob, &body, b, &ctxs[i],
					     ecw_buf_cstr(&mem[i].name));
		if (err == ECW_EBLOBNOTFOUND)
			settle_missing(b, &ctxs[i], &mem[i], &errs[i]);
		else if (err < 0)
			mem[i].alone = true; /* run says what went wrong */
		ecw_error_clear();
	}
	ecw_buf_dispose(&body);
}

/* Step 2: the entities into empty places, in one transaction. */
static void restore_insert(const struct ecw_move_blob *b, struct ecw_job_ctx *ctxs, struct member *mem,
			   size_t n, int *errs)
{
	for (size_t i = 0; i < n; i++)
		mem[i].written = in_group(&mem[i]); /* what the transaction takes */
	bool applied = transaction(b->table, ECW_BATCH_INSERT, ctxs, mem, n, errs);

	for (size_t i = 0; i < n; i++)
		if (in_group(&mem[i])) {
			mem[i].written = applied && mem[i].in_tx;
			mem[i].alone = !mem[i].written;
		}
}

/* Step 3: each blob, If-Match the version restored. */
static void restore_delete(const struct ecw_move_blob *b, struct ecw_job_ctx *ctxs, struct member *mem,
			   size_t n, int *errs)
{
	for (size_t i = 0; i < n; i++) {
		if (!in_group(&mem[i]) || !mem[i].written || !lease_held(&ctxs[i], &mem[i], &errs[i]))
			continue;
		if (ecw_blob_delete(ctxs[i].client, b->container, ecw_buf_cstr(&mem[i].name),
				    mem[i].blob->etag) == 0) {
			mem[i].settled = true; /* errs[i] stays 0: moved */
			ecw_crash_point("move.from_blob.group.blob_deleted");
		} else {
			mem[i].alone = true; /* changed or gone: run's way */
		}
		ecw_error_clear();
	}
}

/* ---- the group ---------------------------------------------------------------------------------- */

void ecw_move_blob_run_group(const void *settings, struct ecw_job_ctx *ctxs, size_t n, int *errs)
{
	const struct ecw_move_blob *b = settings;
	struct member *mem = calloc(n, sizeof(*mem));

	if (!mem) {
		for (size_t i = 0; i < n; i++)
			ecw_job_member_fail(&ctxs[i], &errs[i], ecw_error_set(ECW_ENOMEM, "out of memory"));
		return;
	}
	name_members(b, ctxs, mem, n);
	if (b->archive) {
		archive_read(b, ctxs, mem, n, errs);
		ecw_crash_point("move.to_blob.group.read");
		archive_put(b, ctxs, mem, n, errs);
		ecw_crash_point("move.to_blob.group.written");
		archive_delete(b, ctxs, mem, n, errs);
		ecw_crash_point("move.to_blob.group.deleted");
	} else {
		restore_read(b, ctxs, mem, n, errs);
		ecw_crash_point("move.from_blob.group.read");
		restore_insert(b, ctxs, mem, n, errs);
		ecw_crash_point("move.from_blob.group.written");
		restore_delete(b, ctxs, mem, n, errs);
		ecw_crash_point("move.from_blob.group.deleted");
	}
	/* What the group could not do, each by itself. */
	for (size_t i = 0; i < n; i++) {
		if (!mem[i].settled) {
			ecw_error_clear();
			int err = ecw_move_blob_run(b, &ctxs[i]);
			if (err < 0)
				ecw_job_member_fail(&ctxs[i], &errs[i], err);
		}
		ecw_buf_dispose(&mem[i].name);
		ecw_entity_free(mem[i].entity);
		ecw_blob_info_free(mem[i].blob);
	}
	free(mem);
}
