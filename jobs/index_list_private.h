/* SPDX-License-Identifier: MIT */
/* index_list_private.h - what the index-list job (jobs/index_list.c) shares
 * with its audit (jobs/index_list_audit.c), and with no one else: the
 * settings, the target list a source computes to, a list's keys, the sorted
 * set of string tuples those keys are held in, the keys of a source's
 * reference, what a reference says, and the job's own steps the audit's
 * repairs go through (run, registering a stray list, building a list). The
 * formats (a list's Keys and Count, a reference's properties and intents)
 * are described at the top of index_list.c. Only index_list.c,
 * index_list_audit.c, index_list_store.c (which stores the lists) and
 * index_list_combine.c (which groups a worker's writes of one list) include
 * this header. */
#ifndef ECW_INDEX_LIST_PRIVATE_H
#define ECW_INDEX_LIST_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ecw_buf.h"
#include "ecw_entity.h"
#include "ecw_err.h"
#include "ecw_job.h"
#include "ecw_template.h"

struct ecw_audit_ctx;
struct ecw_client;
struct il_combiners;
struct ecw_shared_reads;
struct ecw_job_ctx;

/* The partitions of the references start with it (then "<job>~xx"). */
#define ECW_IL_REF_PREFIX "~ref~"
/* A reference's PartitionKey: "~ref~" + the job's name + "~" + 2 hex digits. */
#define ECW_IL_REF_PK_SIZE 80

/* The settings of one index-list job (the job's parse makes them; the
 * configuration owns them). */
struct index_list {
	char *source, *table;
	struct ecw_template *pk, *rk;
	/* The job's list writers within this worker (index_list_combine.c):
	 * mutable behind the const settings, thread-safe. NULL: each run writes
	 * alone. */
	struct il_combiners *combiners;
	/* Reads of sources that runs ask for together, as one query
	 * (shared_reads.c); like combiners. NULL: each run reads alone. */
	struct ecw_shared_reads *reads;
};

/* ---- sorted sets of string tuples ---- */

/* [pk, rk] pairs (a list's keys, width 2) or [lpk, lrk, owner] triples (a
 * reference's intents, width 3), sorted bytewise and unique. A struct the
 * caller owns (_init / _dispose); it owns its strings. */
struct tup {
	char *s[3];
};

struct tuples {
	struct tup *v;
	size_t n, cap;
	int width;
};

void ecw_index_list_tuples_init(struct tuples *t, int width);
void ecw_index_list_tuples_dispose(struct tuples *t);
/* True when key (width strings) is in t; *pos is its index or where it would go. */
bool ecw_index_list_tuples_find(const struct tuples *t, const char *const *key, size_t *pos);
/* Parses a JSON array of width-string arrays (any order, duplicates merged)
 * into out (initialised here, empty on failure); what names the property in
 * the ECW_EINVALID message. */
int ecw_index_list_tuples_parse(struct tuples *out, const char *json, size_t len, int width,
				const char *what) ECW_MUST_USE;

/* Adds a copy of key unless present. */
int ecw_index_list_tuples_add(struct tuples *t, const char *const *key) ECW_MUST_USE;
void ecw_index_list_tuples_remove_at(struct tuples *t, size_t pos);
/* out (uninitialised) becomes a deep copy of t. */
int ecw_index_list_tuples_copy(struct tuples *out, const struct tuples *t) ECW_MUST_USE;
/* Appends the compact JSON form of t to out: [["a","b"],["c","d"]]. */
int ecw_index_list_tuples_write(struct ecw_buf *out, const struct tuples *t) ECW_MUST_USE;
/* How the service measures a String: UTF-16 code units. */
size_t ecw_index_list_tuples_utf16_units(const char *s, size_t n);

/* ---- what the job computes and reads ---- */

/* The list source src computes to, as run computes it (templates rendered,
 * keys checked, no "~ref~" partition): *lpk, *lrk are the caller's to free.
 * ECW_EINVALID (with a message) when the source makes no list key: run
 * fails such a source for good. */
int ecw_index_list_target(char **lpk, char **lrk, const struct index_list *il,
			  const struct ecw_entity *src) ECW_MUST_USE;

/* ---- a list as stored (jobs/index_list_store.c) ---- */

/* One list, read whole by ecw_index_list_store_load: its keys and what a conditional
 * write of it needs. The caller owns it (ecw_index_list_store_dispose frees what it
 * holds). */
struct il_layout;

struct il_list {
	char *lpk, *lrk;
	struct tuples keys; /* width 2, sorted; empty when the list is absent */
	bool exists;
	char *etag;               /* the head entity's, when it exists */
	bool has_count;           /* the head holds an Int32 Count ... */
	int32_t count;            /* ... this one, as read (the audit judges it) */
	struct il_layout *layout; /* how the keys are stored: index_list_store.c's */
};

/* Reads list (lpk, lrk) of table into out (initialised here; absent is not
 * an error: out->exists false). ECW_EINVALID, naming the list, when what is
 * there is no list. */
int ecw_index_list_store_load(struct il_list *out, struct ecw_client *c, const char *table, const char *lpk,
			      const char *lrk) ECW_MUST_USE;
/* As ecw_index_list_store_load, for the list whose head entity was read already (a
 * query's row): reads only its pages (none for a one-entity list). */
int ecw_index_list_store_load_head(struct il_list *out, struct ecw_client *c, const char *table,
				   const struct ecw_entity *head) ECW_MUST_USE;
/* Writes the list read (as loaded) with keys instead, in one atomic request
 * conditional on what was read: inserted when it was absent, deleted when
 * keys is empty. A lost race (someone changed the list since it was read)
 * is ECW_EPRECONDITION, ECW_ECONFLICT or ECW_ENOTFOUND: load and try again.
 * ECW_ETOOLARGE, with a message naming the list, when keys would not fit.
 * ECW_IL_TOO_MANY_CHANGES (positive, nothing written) when the changes from
 * read to keys touch more of the list than one transaction may carry: apply
 * fewer keys at once (a change of one key always fits). */
int ecw_index_list_store_save(struct ecw_client *c, const char *table, const struct il_list *read,
			      const struct tuples *keys) ECW_MUST_USE;
#define ECW_IL_TOO_MANY_CHANGES 1
/* What ecw_index_list_store_save would answer without writing anything: 0 when keys
 * fit, ECW_ETOOLARGE (with a message naming the list) when they never will,
 * ECW_IL_TOO_MANY_CHANGES when they must be applied fewer at a time. */
int ecw_index_list_store_check(const struct il_list *read, const struct tuples *keys) ECW_MUST_USE;
void ecw_index_list_store_dispose(struct il_list *l);

/* The keys of the reference of source (spk, srk) for job. */
int ecw_index_list_ref_keys(char pk[ECW_IL_REF_PK_SIZE], char rk[65], const char *job, const char *spk,
			    const char *srk) ECW_MUST_USE;

/* What reference entity ref says (its strings borrowed from it): *cpk and
 * *crk the list it names as committed (NULL: none); *pending its intents as
 * JSON (NULL: none). ECW_EINVALID when it is not the reference of (spk, srk)
 * (edited by hand, or a SHA-256 collision). */
int ecw_index_list_ref_view(const char **cpk, const char **crk, const char **pending,
			    const struct ecw_entity *ref, const char *spk, const char *srk) ECW_MUST_USE;

/* ---- the job's steps, for the audit's repairs ---- */

/* The job's run (ecw_job_type.run) for ctx->pk, ctx->rk. */
int ecw_index_list_run(const void *settings, struct ecw_job_ctx *ctx) ECW_MUST_USE;

/* Registers list (lpk, lrk) in the reference of source (ctx->pk, ctx->rk)
 * as an intent of the "~poisoned~" owner: step 3a of a run with that owner
 * (If-Match the reference, or insert it; retried on a lost race), so that
 * every later run removes the source from that list and drops the intent. */
int ecw_index_list_register_stray(const void *settings, struct ecw_job_ctx *ctx, const char *lpk,
				  const char *lrk) ECW_MUST_USE;

/* The job's audit (ecw_job_type.audit; jobs/index_list_audit.c). */
int ecw_index_list_audit(const void *settings, struct ecw_audit_ctx *ctx) ECW_MUST_USE;

/* The rest of the type descriptor (ecw_job_index_list), which sits in the file
 * on top (index_list_audit.c) so that no file calls back into it. */
void ecw_index_list_free(void *p);
int ecw_index_list_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs);
int ecw_index_list_prepare(const void *settings, struct ecw_client *c);
int ecw_index_list_abandon(const void *settings, struct ecw_job_ctx *ctx);
const char *ecw_index_list_source_table(const void *settings);
const char *ecw_index_list_target_table(const void *settings);
int ecw_index_list_get(const void *settings, struct ecw_client *c, const char *lpk, const char *lrk,
		       int (*each)(void *arg, const char *pk, const char *rk), void *arg, bool *exists);

#endif
