/* SPDX-License-Identifier: MIT */
/* batch.h - the pure parts of entity group transactions (batch.c), for the
 * unit tests and the fuzz target: the body written and the answer read. The
 * body goes into the caller's buffer; the results read (statuses, ETags)
 * are kept in the batch and freed with it. */
#ifndef ECW_STORAGE_BATCH_H
#define ECW_STORAGE_BATCH_H

#include <stddef.h>

#include "ecw_storage.h"

/* Appends the multipart body for b to out; table_url is endpoint + "/" + table. */
int ecw_batch_build_body(struct ecw_buf *out, const struct ecw_batch *b, const char *table_url,
			 const char *batch_id, const char *changeset_id) ECW_MUST_USE;
/* Reads a $batch response into b's per-operation results. Returns 0 when every
 * operation succeeded, else the failing operation's ecw_err (with the last
 * error set and the failed index recorded in b). */
int ecw_batch_parse_response(struct ecw_batch *b, const char *content_type, const char *body,
			     size_t len) ECW_MUST_USE;

#endif
