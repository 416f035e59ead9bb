/* SPDX-License-Identifier: MIT */
/* move_blob_private.h - what the blob move's single runs (jobs/move_blob.c)
 * share with its groups (jobs/move_blob_group.c, above it) and no one else:
 * the settings' layout and the steps a group takes member by member. Only
 * those two files include it (tests/check-deps.sh). Nothing here owns
 * memory beyond what each function says. */
#ifndef ECW_MOVE_BLOB_PRIVATE_H
#define ECW_MOVE_BLOB_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>

#include "ecw_buf.h"
#include "ecw_entity.h"
#include "ecw_err.h"
#include "ecw_job.h"
#include "ecw_storage.h"

/* The largest blob a restore reads: an entity is at most 1 MiB in the
 * service (strings counted as UTF-16), whose JSON stays under 4 MiB even
 * when every character is a control character written \u00XX. */
#define ECW_MOVE_BLOB_MAX ((size_t)4 * 1024 * 1024)

/* A rendered name: keys of 1 KiB, each byte escaped at most to 3, and the
 * literal text; ecw_blob_name_check refuses what is over 1,024 characters. */
#define ECW_MOVE_BLOB_NAME_MAX ((size_t)16 * 1024)

/* A name template: lit[0] KEY lit[1] KEY lit[2]. */
struct ecw_move_blob_name {
	char *lit[3];
	bool pk_first; /* {PartitionKey} before {RowKey} */
};

/* Read-only once parsed (ecw_move_blob_parse, move_private.h). */
struct ecw_move_blob {
	char *table; /* `from` (archive) or `to` (restore) */
	char *container;
	struct ecw_move_blob_name name;
	bool archive; /* to_blob: the table to blobs; else from_blob: blobs to the table */
};

/* The blob's name for these keys into out (reset first); a name the service
 * would refuse (over 1,024 characters) is ECW_EINVALID naming the container,
 * nothing written. */
int ecw_move_blob_name_of(struct ecw_buf *out, const struct ecw_move_blob *b, const char *pk,
			  const char *rk) ECW_MUST_USE;

/* A missing container (ECW_ENOCONTAINER) as ECW_ENOTABLE naming it, so the
 * runtime holds the message (`blocked`); other errors pass unchanged. */
int ecw_move_blob_no_container(const struct ecw_move_blob *b, int err) ECW_MUST_USE;

/* Step 1 found no source: the move is done. Sets ctx->outcome_detail to
 * "already-moved" when the target holds the entity, else "missing"; 0, or
 * the error of that look (a missing container or table: blocked). */
int ecw_move_blob_source_missing(const struct ecw_move_blob *b, struct ecw_job_ctx *ctx,
				 const char *name) ECW_MUST_USE;

/* What an archive's blob carries beside its JSON (ecw_entity_to_json): the
 * metadata naming its source. ecw_move_blob_archive_keys appends src's
 * keys, percent-encoded, each ending in a NUL, to keys;
 * ecw_move_blob_archive_options fills o and meta for the put, keys pointing
 * at what the first appended (their values borrow it, b and src), with the
 * condition ecw_move_blob_put takes. */
int ecw_move_blob_archive_keys(struct ecw_buf *keys, const struct ecw_entity *src) ECW_MUST_USE;
void ecw_move_blob_archive_options(struct ecw_blob_put_options *o, struct ecw_blob_meta meta[4],
				   const struct ecw_move_blob *b, const struct ecw_entity *src,
				   const char *keys, const char *if_match);

/* An archive's step 2 without its careful path: the blob of src (its JSON
 * in json, the caller's scratch buffer, capped by its owner) put with its
 * content type and metadata, If-None-Match "*" when if_match is NULL (only
 * into an empty place: ECW_ECONFLICT when a blob is there), else If-Match
 * if_match. The blob client's error as it comes. */
int ecw_move_blob_put(const struct ecw_move_blob *b, struct ecw_client *c, const char *name,
		      const struct ecw_entity *src, const char *if_match, struct ecw_buf *json) ECW_MUST_USE;

/* A restore's step 1: the blob read into body (capped at ECW_MOVE_BLOB_MAX
 * by its owner) and parsed into *out (the caller frees it), its properties
 * (ETag) in *info (the caller frees them). ECW_EBLOBNOTFOUND when there is
 * no blob; ECW_ETOOLARGE and ECW_EINVALID (no entity, or another entity's
 * keys) are permanent and name the blob; *out and *info are NULL on any
 * error. */
int ecw_move_blob_read(struct ecw_entity **out, struct ecw_blob_info **info, struct ecw_buf *body,
		       const struct ecw_move_blob *b, const struct ecw_job_ctx *ctx,
		       const char *name) ECW_MUST_USE;

#endif
