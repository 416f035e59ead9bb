/* SPDX-License-Identifier: MIT */
/* index_audit.c - `ecworker audit` for index jobs (ecw_audit.h; the job is
 * jobs/index.c, whose header describes the entries and the
 * back-references; what the two share is jobs/index_private.h).
 *
 * Two streamed passes, bounded memory (a page at a time), then repairs made
 * by run itself:
 *   1. from the sources: each source (its partition with --partition; an
 *      entry or reference in a shared table skipped) computes its entry E as
 *      run does (ecw_index_compute_entry); the entity at E's keys is read (one GET) and
 *      judged by ecw_audit_index_entry: MISSING, STALE, or CONFLICT when
 *      another source that still computes to the key holds it (one more GET,
 *      of that source; ecw_index_other_holds, as run's step 3 asks) or when what is
 *      there is no entry. When the entry is right, the source's
 *      back-reference is read too (one more GET) and judged by
 *      ecw_audit_index_ref: STALE unless it names that entry alone, since a
 *      run after the next change of the value finds the old entry only
 *      through it. A source that computes to no entry (a missing template
 *      property: run poisons it) is counted, not judged.
 *   2. from the index: each entry (PartitionKey, RowKey, SourcePartitionKey,
 *      SourceRowKey only; "~ref~" partitions and non-entries skipped; with
 *      --partition, SourcePartitionKey eq it) reads its source (one GET) and
 *      is judged by ecw_audit_index_orphan: ORPHAN when the source is gone or
 *      computes elsewhere. An entry at the right keys with other copies is
 *      STALE and was counted in pass 1.
 *   So an audit costs about three GETs per indexed source, plus query pages.
 * Repairs (--repair), for the SOURCE's keys:
 *   MISSING, STALE: ecw_index_run, as a message for the source would.
 *   ORPHAN: the entry is registered first as a pending location of its
 *     source's back-reference (ecw_index_register_location: a step 2 of a run, If-Match
 *     the reference), then ecw_index_run. A run cleans every location its
 *     reference lists that holds this source's entry, except the one it
 *     computes; without the registration an entry written behind the job's
 *     back is in no list, and a run would not see it (the reason for this
 *     step). Registering a location is always safe: it is what a crash after
 *     step 2 leaves, and a run's clean deletes only this source's entries,
 *     If-Match, under the reference's serialisation, so a repair racing a
 *     worker is one more duplicate message.
 *   CONFLICT: never repaired (two sources claim one key, or something that
 *     is no entry is where an entry belongs: the operator decides). */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ecw_audit.h"
#include "ecw_buf.h"
#include "ecw_entity.h"
#include "ecw_err.h"
#include "ecw_job.h"
#include "ecw_storage.h"
#include "ecw_template.h"
#include "index_private.h"

/* After a run that should have cleaned it: the orphan's location no longer
 * holds this source's entry (absent, or another source's now). A run's
 * success proves it for the locations its reference listed; this read is
 * what keeps "repaired" true should the entry have escaped the list. */
static int orphan_gone(struct run *r, const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	int err = ecw_table_get(&e, r->ctx->client, r->ix->table, pk, rk);

	if (err == ECW_ENOTFOUND) {
		ecw_error_clear();
		return 0;
	}
	if (err == 0 && ecw_index_owned_by(e, r->ctx->pk, r->ctx->rk))
		err = ecw_error_set(ECW_ETRANSIENT, "the orphan entry is still there after the run");
	ecw_entity_free(e);
	return err;
}

/* Repairs a finding about source (spk, srk); orphan_pk/rk: the orphan entry
 * to register first, or NULL. Sets f->repaired, or f->error (copied into
 * why, cap bytes). With --via-queue the registration is made here and the
 * run is the queued message's. */
static void audit_repair(const struct index *ix, struct ecw_audit_ctx *actx, struct ecw_audit_finding *f,
			 const char *spk, const char *srk, const char *orphan_pk, const char *orphan_rk,
			 char *why, size_t cap)
{
	struct ecw_job_ctx jc = {.client = actx->client, .job = actx->job, .pk = spk, .rk = srk};
	struct run r = {.ix = ix, .ctx = &jc};
	int err;

	if (orphan_pk) {
		ecw_audit_pace(actx);
		if ((err = ecw_index_ref_keys(&r.ref, jc.job, spk, srk)) == 0)
			err = ecw_index_register_location(&r, orphan_pk, orphan_rk);
		if (err < 0) {
			snprintf(why, cap, "%s", ecw_error_last()->message);
			f->error = why;
			ecw_error_clear();
			return;
		}
	}
	ecw_audit_converge(actx, ecw_index_run, ix, spk, srk, f, why, cap);
	if (f->repaired && orphan_pk && !actx->requeue && (err = orphan_gone(&r, orphan_pk, orphan_rk)) < 0) {
		f->repaired = false;
		snprintf(why, cap, "%s", ecw_error_last()->message);
		f->error = why;
		ecw_error_clear();
	}
}

/* Pass 1, for a source whose entry is right: judges its back-reference
 * (ecw_audit_index_ref). One GET. */
static int audit_ref(enum ecw_audit_kind *kind, struct run *r, struct ecw_audit_ctx *actx, const char *spk,
		     const char *srk, const struct ecw_entity *want)
{
	struct ecw_entity *ref = NULL;
	struct locs L = {0};
	bool has_current = false, found = false;
	int err;

	if ((err = ecw_index_ref_keys(&r->ref, actx->job, spk, srk)) < 0)
		return err;
	ecw_audit_pace(actx);
	err = ecw_table_get(&ref, actx->client, r->ix->table, r->ref.pk, r->ref.rk);
	if (err == ECW_ENOTFOUND) {
		ecw_error_clear();
		err = 0;
	} else if (err == 0) {
		/* Another job's or source's entity there: run refuses it too. */
		found = ecw_index_ref_locations(&L, &has_current, ref, actx->job, spk, srk) == 0;
		ecw_error_clear();
	}
	if (err == 0)
		*kind = ecw_audit_index_ref(found, has_current ? L.v[0].pk : NULL,
					    has_current ? L.v[0].rk : NULL, has_current ? L.n - 1 : L.n,
					    want);
	ecw_index_locs_dispose(&L);
	ecw_entity_free(ref);
	return err;
}

/* Pass 1 for one source. */
static int audit_source(const struct index *ix, struct ecw_audit_ctx *actx, const struct ecw_entity *src)
{
	struct ecw_job_ctx jc = {.client = actx->client, .job = actx->job};
	struct run r = {.ix = ix, .ctx = &jc};
	struct ecw_entity *want = NULL, *at = NULL;
	struct ecw_audit_finding f = {.table = ix->table};
	bool holds = false;
	char why[sizeof(((struct ecw_error *)0)->message)];
	int err;

	if (ecw_index_compute_entry(&want, ix, src) < 0) {
		ecw_error_clear(); /* run poisons such a source: nothing derived to compare */
		return 0;
	}
	ecw_audit_pace(actx);
	err = ecw_table_get(&at, actx->client, ix->table, ecw_entity_pk(want), ecw_entity_rk(want));
	if (err == ECW_ENOTFOUND) {
		ecw_error_clear();
		at = NULL;
		err = 0;
	}
	if (err == 0 && at && ecw_index_is_entry(at) &&
	    !ecw_index_owned_by(at, ecw_entity_pk(src), ecw_entity_rk(src))) {
		ecw_audit_pace(actx);
		err = ecw_index_other_holds(&holds, &r, ecw_index_str_prop(at, P_SRC_PK),
					    ecw_index_str_prop(at, P_SRC_RK), ecw_entity_pk(want),
					    ecw_entity_rk(want));
	}
	if (err == 0 && (f.kind = ecw_audit_index_entry(want, at, holds)) == ECW_AUDIT_OK)
		err = audit_ref(&f.kind, &r, actx, ecw_entity_pk(src), ecw_entity_rk(src), want);
	if (err == 0 && f.kind != ECW_AUDIT_OK) {
		f.pk = ecw_entity_pk(want);
		f.rk = ecw_entity_rk(want);
		f.source_pk = ecw_entity_pk(src);
		f.source_rk = ecw_entity_rk(src);
		f.detail = f.kind == ECW_AUDIT_MISSING ? "the source's entry is not there"
			   : f.kind == ECW_AUDIT_STALE && at && ecw_entity_equal(want, at)
				   ? "its back-reference does not name the entry alone"
			   : f.kind == ECW_AUDIT_STALE ? "the entry differs from its recomputation"
			   : !ecw_index_is_entry(at)   ? "an entity that is no index entry holds the key"
						       : "another source computes to the same key";
		if (actx->repair && f.kind != ECW_AUDIT_CONFLICT)
			audit_repair(ix, actx, &f, f.source_pk, f.source_rk, NULL, NULL, why, sizeof(why));
		ecw_audit_note(actx, &f);
	}
	ecw_entity_free(want);
	ecw_entity_free(at);
	return err;
}

/* Pass 2 for one index entity (keys and source keys only). */
static int audit_entry(const struct index *ix, struct ecw_audit_ctx *actx, const struct ecw_entity *e)
{
	struct ecw_job_ctx jc = {.client = actx->client, .job = actx->job};
	struct run r = {.ix = ix, .ctx = &jc};
	struct ecw_entity *src = NULL, *want = NULL;
	struct ecw_audit_finding f = {.table = ix->table};
	const char *spk = ecw_index_str_prop(e, P_SRC_PK), *srk = ecw_index_str_prop(e, P_SRC_RK);
	char why[sizeof(((struct ecw_error *)0)->message)];
	int err;

	ecw_audit_pace(actx);
	if ((err = ecw_index_read_source(&src, &r, spk, srk)) == ECW_EINVALID) {
		ecw_error_clear(); /* keys no source can have: the entry names nothing */
		err = 0;
	}
	if (err < 0)
		return err;
	if (src && ecw_index_compute_entry(&want, ix, src) < 0)
		ecw_error_clear();
	if ((f.kind = ecw_audit_index_orphan(e, want)) != ECW_AUDIT_OK) {
		f.pk = ecw_entity_pk(e);
		f.rk = ecw_entity_rk(e);
		f.source_pk = spk;
		f.source_rk = srk;
		f.detail = src ? "its source computes to another entry" : "its source is gone";
		if (actx->repair)
			audit_repair(ix, actx, &f, spk, srk, f.pk, f.rk, why, sizeof(why));
		ecw_audit_note(actx, &f);
	}
	ecw_entity_free(src);
	ecw_entity_free(want);
	return 0;
}

/* The $select of pass 1: what ecw_index_compute_entry reads (and, in a shared table,
 * what tells an entry apart); empty when the index copies every property. */
static int source_select(struct ecw_buf *out, const struct index *ix)
{
	int err = 0;

	if (!ix->props)
		return 0;
	if ((err = ecw_template_select_add(out, "PartitionKey")) < 0 ||
	    (err = ecw_template_select_add(out, "RowKey")) < 0 ||
	    (err = ecw_template_select(out, ix->pk)) < 0 || (err = ecw_template_select(out, ix->rk)) < 0)
		return err;
	for (size_t i = 0; ix->props[i] && err == 0; i++)
		err = ecw_template_select_add(out, ix->props[i]);
	if (err == 0 && ix->same_table && (err = ecw_template_select_add(out, P_SRC_PK)) == 0)
		err = ecw_template_select_add(out, P_SRC_RK);
	return err;
}

struct pass {
	const struct index *ix;
	struct ecw_audit_ctx *actx;
};

/* Pass 1 for each entity of the source table (in a shared table, its
 * entries and references are not sources). */
static int each_source(const struct ecw_entity *e, void *payload)
{
	struct pass *p = payload;
	int err;

	if (p->ix->same_table && (ecw_index_is_ref_pk(ecw_entity_pk(e)) || ecw_index_is_entry(e)))
		return 0;
	if ((err = audit_source(p->ix, p->actx, e)) == 0)
		ecw_audit_checked(p->actx);
	return err;
}

/* Pass 2 for each entity of the index table (references skipped). */
static int each_entry(const struct ecw_entity *e, void *payload)
{
	struct pass *p = payload;
	int err;

	if (ecw_index_is_ref_pk(ecw_entity_pk(e)) || !ecw_index_is_entry(e))
		return 0;
	if ((err = audit_entry(p->ix, p->actx, e)) == 0)
		ecw_audit_checked(p->actx);
	return err;
}

int ecw_index_audit(const void *settings, struct ecw_audit_ctx *actx)
{
	struct pass p = {.ix = settings, .actx = actx};
	struct ecw_table_query *q = NULL;
	struct ecw_buf select;
	int err;

	ecw_buf_init(&select, 64 * 1024);
	/* 1. from the sources: only the properties an entry is computed from
	 * (every property when the index copies them all) */
	if ((err = source_select(&select, p.ix)) < 0 ||
	    (err = ecw_audit_query(&q, actx, p.ix->source, "PartitionKey",
				   select.len ? ecw_buf_cstr(&select) : NULL)) < 0 ||
	    (err = ecw_audit_each(q, actx, each_source, &p)) < 0)
		goto done;
	ecw_table_query_free(q);
	q = NULL;
	/* 2. from the index */
	if ((err = ecw_audit_query(&q, actx, p.ix->table, P_SRC_PK,
				   "PartitionKey,RowKey," P_SRC_PK "," P_SRC_RK)) == 0)
		err = ecw_audit_each(q, actx, each_entry, &p);
done:
	ecw_table_query_free(q);
	ecw_buf_dispose(&select);
	return err;
}

/* ---- the job type ---------------------------------------------------------- */

/* Here, on top of index.c, rather than in it: the audit is this file's, and
 * index.c calls nothing of this file. */
const struct ecw_job_type ecw_job_index = {
	.name = "index",
	.parse = ecw_index_parse,
	.prepare = ecw_index_prepare,
	.run = ecw_index_run,
	/* 14: one query reads a whole group's sources (ecw_table_get_many). */
	.run_group = ecw_index_run_group,
	.group_max = ECW_TABLE_GET_MANY_KEYS,
	.free = ecw_index_free,
	.source_table = ecw_index_source_table,
	.target_table = ecw_index_target_table,
	.audit = ecw_index_audit,
};
