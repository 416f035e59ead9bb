/* SPDX-License-Identifier: MIT */
/* move_private.h - what the move job (jobs/move.c, which holds the type's
 * ops table) shares with its blob form (jobs/move_blob.c, below it) and no
 * one else: a move with `from_blob` or `to_blob` is parsed, prepared, run
 * and audited there (its groups in jobs/move_blob_group.c). Only those
 * files include it (tests/check-deps.sh). */
#ifndef ECW_MOVE_PRIVATE_H
#define ECW_MOVE_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>

#include "ecw_audit.h"
#include "ecw_err.h"
#include "ecw_job.h"

/* The settings of a move with one side in blobs: read-only once parsed. */
struct ecw_move_blob;

/* True when the job's map names a blob side (from_blob or to_blob). */
bool ecw_move_blob_wanted(const struct ecw_node *job);
/* Reads the whole job (type, then, from / from_blob, to / to_blob) into
 * *out; -1 with the problems in errs. */
int ecw_move_blob_parse(struct ecw_move_blob **out, const struct ecw_node *job, struct ecw_node_errors *errs);
void ecw_move_blob_free(struct ecw_move_blob *b);
/* Creates what the move writes: to_blob's container, or `to`'s table. */
int ecw_move_blob_prepare(const struct ecw_move_blob *b, struct ecw_client *c) ECW_MUST_USE;
/* One message (settings: a struct ecw_move_blob). */
int ecw_move_blob_run(const void *settings, struct ecw_job_ctx *ctx) ECW_MUST_USE;
/* A group of n messages on one partition (ecw_job.h run_group; settings: a
 * struct ecw_move_blob): jobs/move_blob_group.c. */
void ecw_move_blob_run_group(const void *settings, struct ecw_job_ctx *ctxs, size_t n, int *errs);
/* The audit (ecw_audit.h): entities in both places. */
int ecw_move_blob_audit(const struct ecw_move_blob *b, struct ecw_audit_ctx *ctx) ECW_MUST_USE;
/* The table side: the source of an archive (`from`), the target of a
 * restore (`to`); NULL for the other. */
const char *ecw_move_blob_source_table(const struct ecw_move_blob *b);
/* For backfill: the keys of every blob of a restore's container that its
 * name template can have made (ecw_job.h, source_keys). */
int ecw_move_blob_source_keys(const struct ecw_move_blob *b, struct ecw_client *c,
			      int (*each)(void *arg, const char *pk, const char *rk), void *arg) ECW_MUST_USE;
const char *ecw_move_blob_target_table(const struct ecw_move_blob *b);
/* A restore's container (from_blob), which the worker never creates, for
 * the preflight (ecw_job.h, container); NULL for an archive, whose
 * container is created at prepare. */
const char *ecw_move_blob_source_container(const struct ecw_move_blob *b);

#endif
