/* SPDX-License-Identifier: MIT */
/* shared_reads_private.h - reads of single entities that runs of one worker
 * ask for at the same time, served together (jobs/shared_reads.c): the
 * reads of one table and partition that wait while a read of that partition
 * is in flight go out next as one query (ecw_table_get_many) instead of a
 * GET each. A job's settings own one set (_new in parse, _free in free);
 * only job types include this header. */
#ifndef ECW_SHARED_READS_PRIVATE_H
#define ECW_SHARED_READS_PRIVATE_H

#include <stddef.h>

#include "ecw_err.h"

struct ecw_client;
struct ecw_entity;

/* How the reads reach storage: ecw_table_get and ecw_table_get_many
 * (ecw_shared_reads_storage); a unit test passes fakes. */
struct shared_reads_store {
	int (*get)(struct ecw_entity **out, struct ecw_client *c, const char *table, const char *pk,
		   const char *rk);
	int (*get_many)(struct ecw_entity **out, struct ecw_client *c, const char *table, const char *pk,
			const char *const *rks, size_t n);
};

extern const struct shared_reads_store ecw_shared_reads_storage;

/* The partitions with reads waiting or in flight: a bounded map, an entry
 * per (table, pk) while it is in use. Thread-safe; the owner frees it once
 * no read is in flight. */
struct ecw_shared_reads;

int ecw_shared_reads_new(struct ecw_shared_reads **out, const struct shared_reads_store *store) ECW_MUST_USE;
void ecw_shared_reads_free(struct ecw_shared_reads *sr);
/* How many reads wait now for a query to take them, and how many
 * partitions are in use (what tests and bounds look at). */
size_t ecw_shared_reads_waiting(struct ecw_shared_reads *sr, size_t *parts);

/* Reads entity (pk, rk) of table as ecw_table_get does: *out the entity
 * with its ETag (the caller frees it), ECW_ENOTFOUND when it does not exist,
 * or the read's error. When other threads read the same table and partition
 * at the same time, one query may serve several of them; whatever serves
 * this read is sent after it was asked for, so it sees every write that
 * ended before the call. c is the caller's client (used when this thread
 * sends the query). sr NULL: a GET of its own. */
int ecw_shared_reads_get(struct ecw_shared_reads *sr, struct ecw_entity **out, struct ecw_client *c,
			 const char *table, const char *pk, const char *rk) ECW_MUST_USE;

/* Reads (pk, rk) as ecw_shared_reads_get does, with the entities (pk, ahead[i]),
 * i < nahead, in the same query: runs about to start will read them
 * (ecw_job_ctx peers). Their answers are kept (at most a few hundred, for
 * a few seconds) for ecw_shared_reads_kept. */
int ecw_shared_reads_ahead(struct ecw_shared_reads *sr, struct ecw_entity **out, struct ecw_client *c,
			   const char *table, const char *pk, const char *rk, const char *const *ahead,
			   size_t nahead) ECW_MUST_USE;

/* The answer kept for (table, pk, rk) by a read ahead, handed over once:
 * 1 and *out the entity (NULL: it did not exist), or 0 when none is kept
 * (or it is older than a few seconds). The state it gives is one that
 * existed after the read ahead's caller took the message waiting for it:
 * good for a first read that a later check of the same entity confirms
 * (index-list's step 1, checked by step 6), never for that check. */
int ecw_shared_reads_kept(struct ecw_shared_reads *sr, struct ecw_entity **out, const char *table,
			  const char *pk, const char *rk);

#endif
