/* SPDX-License-Identifier: MIT */
/* index_private.h - what the index job (jobs/index.c) shares with its audit
 * (jobs/index_audit.c), and with no one else: the settings, the properties
 * of an entry and of a back-reference, a set of locations, a run, and the
 * job's own steps the audit judges and repairs with (computing an entry,
 * reading a source and a reference, registering a location, the run
 * itself). The formats are described at the top of index.c. Only those two
 * files include this header (tests/check-deps.sh). */
#ifndef ECW_INDEX_PRIVATE_H
#define ECW_INDEX_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>

#include "ecw_entity.h"
#include "ecw_err.h"
#include "ecw_job.h"

struct ecw_audit_ctx;
struct ecw_job_ctx;
struct ecw_template;

/* The partitions of the back-references start with it (then "<job>~xx"). */
#define REF_PREFIX "~ref~"
#define REF_PREFIX_LEN 5

/* What an entry holds besides the copies, and what a back-reference holds. */
#define P_SRC_PK "SourcePartitionKey"
#define P_SRC_RK "SourceRowKey"
#define P_JOB "Job"
#define P_CUR_PK "IndexPartitionKey"
#define P_CUR_RK "IndexRowKey"

/* The settings of one index job (the job's parse makes them; the
 * configuration owns them). */
struct index {
	char *source, *table;
	struct ecw_template *pk, *rk;
	char **props; /* NULL: copy all; empty: none */
	bool same_table;
};

/* ---- locations ---- */

struct loc {
	char *pk, *rk;
};

/* A set of locations the caller owns (zeroed to start; it owns its strings). */
struct locs {
	struct loc *v;
	size_t n;
};

void ecw_index_locs_dispose(struct locs *s);

/* ---- entities ---- */

/* The value of e's property name when it is a String, else NULL. */
const char *ecw_index_str_prop(const struct ecw_entity *e, const char *name);
/* An entry this job type wrote (for some source). */
bool ecw_index_is_entry(const struct ecw_entity *e);
/* An entry of source (spk, srk). */
bool ecw_index_owned_by(const struct ecw_entity *e, const char *spk, const char *srk);
/* The entry src should have: its keys, the source's keys, the copies
 * (*out the caller's). ECW_EINVALID when src computes to no entry. */
int ecw_index_compute_entry(struct ecw_entity **out, const struct index *ix,
			    const struct ecw_entity *src) ECW_MUST_USE;

/* ---- the back-reference ---- */

struct ref_keys {
	char pk[REF_PREFIX_LEN + 64 + 4]; /* job names are at most 63 characters */
	char rk[65];
};

/* The keys of the back-reference of source (spk, srk) for job. */
int ecw_index_ref_keys(struct ref_keys *out, const char *job, const char *spk, const char *srk) ECW_MUST_USE;
/* Whether pk is a back-reference's partition. */
bool ecw_index_is_ref_pk(const char *pk);
/* Reads the locations of a reference into out: current first
 * (*has_current), then pending. Refuses a reference that is not this
 * source's. */
int ecw_index_ref_locations(struct locs *out, bool *has_current, const struct ecw_entity *ref,
			    const char *job, const char *spk, const char *srk) ECW_MUST_USE;

/* ---- a run ---- */

/* One run of a message for source (ctx->pk, ctx->rk); the caller's struct
 * (written: ecw_index_locs_dispose). */
struct run {
	const struct index *ix;
	struct ecw_job_ctx *ctx;
	struct ref_keys ref;
	struct locs written; /* entries this run wrote, in any round */
};

/* GET source (pk, rk): *out NULL when absent. */
int ecw_index_read_source(struct ecw_entity **out, struct run *r, const char *pk,
			  const char *rk) ECW_MUST_USE;
/* Whether source (opk, ork) exists and still computes to (pk, rk). */
int ecw_index_other_holds(bool *holds, struct run *r, const char *opk, const char *ork, const char *pk,
			  const char *rk) ECW_MUST_USE;
/* Step 2 of a run, alone: (lpk, lrk) joins the locations r's reference
 * lists (inserting the reference when there is none). */
int ecw_index_register_location(struct run *r, const char *lpk, const char *lrk) ECW_MUST_USE;

/* The job's run (ecw_job_type.run) and audit (ecw_job_type.audit;
 * jobs/index_audit.c). */
int ecw_index_run(const void *settings, struct ecw_job_ctx *ctx) ECW_MUST_USE;
int ecw_index_audit(const void *settings, struct ecw_audit_ctx *actx) ECW_MUST_USE;

/* The rest of the type descriptor (ecw_job_index), which sits in the file
 * on top (index_audit.c) so that no file calls back into it. */
void ecw_index_free(void *p);
int ecw_index_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs);
int ecw_index_prepare(const void *settings, struct ecw_client *c);
const char *ecw_index_source_table(const void *settings);
const char *ecw_index_target_table(const void *settings);
void ecw_index_run_group(const void *settings, struct ecw_job_ctx *ctxs, size_t n, int *errs);

#endif
