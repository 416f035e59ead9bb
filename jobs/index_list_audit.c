/* SPDX-License-Identifier: MIT */
/* index_list_audit.c - the audit of index-list jobs (ecw_audit.h; the job is
 * jobs/index_list.c, whose header describes the lists, the references and
 * their intents). What a job must compute exactly as run does comes from
 * index_list_private.h; the rules that judge are in jobs/audit.c.
 *
 * Two streamed passes, bounded memory (a page of 100 entities, and the keys
 * of one list, read whole through the store: at most what
 * index_list_store.c lets a list hold), then repairs made through the job's
 * own steps:
 *   1. from the sources (their partition with --partition; only the
 *      properties the templates read): each source computes its list L as
 *      run does (ecw_index_list_target; a source that makes
 *      no list key, which run fails for good, is counted, not judged). L is
 *      read (one GET) and judged by ecw_audit_index_list_member: MISSING
 *      when L is absent or does not hold the source's key. When it does, the
 *      source's reference is read (one more GET) and judged by
 *      ecw_audit_index_list_ref: STALE unless it names L as committed with
 *      no intents, since the run after the next change of the value finds
 *      the key in L only through it. An entity at L that is no list is
 *      judged once, in pass 2.
 *   2. from the lists (the list table, "~ref~" partitions skipped: every
 *      job's references; a list's pages, which hold ListRowKey, are read
 *      with their head, never judged alone): an entity that is no list (no Keys string, or not
 *      an array of pairs) is a CONFLICT; a list is judged as a whole by
 *      ecw_audit_index_list_shape (ORPHAN "empty list" when it holds no key,
 *      STALE when Count differs); these name no source, so they are made
 *      only without --partition. Then each key (with --partition, only keys
 *      whose source PartitionKey is it) reads its source (one GET) and is
 *      judged by ecw_audit_index_list_key: ORPHAN when the source is gone,
 *      STALE when it computes to another list.
 *   So an audit costs about three GETs per source (its list, its reference,
 *   and its key's source from the list's side), plus query pages.
 * In a table shared with other jobs (an index's entries beside the lists,
 * as jobs/README.md's layout has them) pass 2 judges only the entities whose
 * PartitionKey the job's partition_key could have rendered (its literal
 * text before and after the placeholders, ecw_template_may_render): another
 * job's entities are neither conflicts nor orphans. Lists carry no job's
 * name, so two index-list jobs whose partition keys could render the same
 * text (two templates of bare placeholders) still cannot be told apart in
 * one table: give each such job a table, or a literal prefix.
 * Repairs (--repair):
 *   MISSING, a STALE reference: the job's run for the source
 *     (ecw_audit_converge), as a message for it would.
 *   a key in the wrong list, an ORPHAN key: the stray list is first
 *     registered in the source's reference as an intent of the "~poisoned~"
 *     owner (ecw_index_list_register_stray, step 3a of a run, If-Match), which every
 *     later run cleans and drops; then the run. Without it a key written
 *     behind the job's back is in no list the reference names, and run
 *     would not see it. Registering is always safe: an intent of that owner
 *     only makes runs remove the source from a list it does not belong in,
 *     and a run never removes a key from the list it computes. With
 *     --via-queue the registration is made here and the queued message's
 *     run cleans the list; in process, the list is read again afterwards
 *     (stray_gone), so that "repaired" means the key is out of it.
 *   a wrong Count, an empty list: the list is read again and, still wrong,
 *     rewritten with the Count of its keys or, still empty, deleted with all
 *     its entities, through the store's one atomic conditional write
 *     (ecw_index_list_store_save), again on a lost race (repair_list). Made here, --via-queue
 *     or not: no message names a list.
 *   CONFLICT: never (the operator decides what that entity is). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_audit.h"
#include "ecw_buf.h"
#include "ecw_job.h"
#include "ecw_storage.h"
#include "index_list_private.h"

#define REPAIR_TRIES 10 /* rewrites of one list lost to live runs before giving up */

typedef char why_buf[sizeof(((struct ecw_error *)0)->message)];

static bool holds_key(const struct tuples *keys, const char *spk, const char *srk)
{
	const char *key[2] = {spk, srk};
	size_t pos;

	return ecw_index_list_tuples_find(keys, key, &pos);
}

/* A repair that failed: f->error says why (the last error, copied into why). */
static void repair_failed(struct ecw_audit_finding *f, char *why, size_t cap)
{
	snprintf(why, cap, "%s", ecw_error_last()->message);
	f->repaired = false;
	f->error = why;
	ecw_error_clear();
}

/* List (lpk, lrk) read whole through the store (absent: no keys), paced. */
static int load_list(struct il_list *out, struct ecw_audit_ctx *actx, const char *table, const char *lpk,
		     const char *lrk)
{
	ecw_audit_pace(actx);
	return ecw_index_list_store_load(out, actx->client, table, lpk, lrk);
}

/* ---- repairs ---- */

/* After the run that should have cleaned it: the key (spk, srk) is out of
 * list (lpk, lrk), or its source computes to that list now (it changed
 * meanwhile: the key belongs there). */
static int stray_gone(const struct index_list *il, struct ecw_audit_ctx *actx, const char *lpk,
		      const char *lrk, const char *spk, const char *srk)
{
	struct ecw_entity *src = NULL;
	struct il_list list;
	char *tpk = NULL, *trk = NULL;
	int err;

	if ((err = load_list(&list, actx, il->table, lpk, lrk)) < 0 || !holds_key(&list.keys, spk, srk))
		goto done;
	if ((err = ecw_audit_get(&src, actx, il->source, spk, srk)) < 0)
		goto done;
	if (!src || ecw_index_list_target(&tpk, &trk, il, src) < 0 || strcmp(tpk, lpk) != 0 ||
	    strcmp(trk, lrk) != 0)
		err = ecw_error_set(ECW_ETRANSIENT, "the key is still in the list after the run");
done:
	ecw_index_list_store_dispose(&list);
	ecw_entity_free(src);
	free(tpk);
	free(trk);
	return err;
}

/* A key in a list its source (spk, srk) does not compute to: registered in
 * the source's reference, then the run. */
static void repair_stray(const struct index_list *il, struct ecw_audit_ctx *actx, struct ecw_audit_finding *f,
			 char *why, size_t cap)
{
	struct ecw_job_ctx jc = {.client = actx->client,
				 .job = actx->job,
				 .pk = f->source_pk,
				 .rk = f->source_rk,
				 .trace_id = "audit",
				 .message_id = "audit"};

	ecw_audit_pace(actx);
	if (ecw_index_list_register_stray(il, &jc, f->pk, f->rk) < 0) {
		repair_failed(f, why, cap);
		return;
	}
	ecw_audit_converge(actx, ecw_index_list_run, il, f->source_pk, f->source_rk, f, why, cap);
	if (f->repaired && !actx->requeue &&
	    stray_gone(il, actx, f->pk, f->rk, f->source_pk, f->source_rk) < 0)
		repair_failed(f, why, cap);
}

/* A list whose Count is wrong, or that is empty: read again, and while
 * still so, rewritten with its keys' Count or deleted, If-Match. A list
 * gone or right meanwhile (a run rewrote it) is repaired too. */
static int repair_list(const struct index_list *il, struct ecw_audit_ctx *actx, const char *lpk,
		       const char *lrk)
{
	int err = 0;

	for (int tries = 0; tries < REPAIR_TRIES; tries++) {
		struct il_list list;
		struct tuples none;
		enum ecw_audit_kind kind = ECW_AUDIT_OK;

		ecw_index_list_tuples_init(&none, 2);
		if ((err = load_list(&list, actx, il->table, lpk, lrk)) == 0 && list.exists)
			kind = ecw_audit_index_list_shape(list.keys.n, list.has_count, list.count);
		if (kind != ECW_AUDIT_OK)
			ecw_audit_pace(actx);
		/* the store's one atomic write: every entity of an empty list goes;
		 * the same keys rewrite Count (the head alone) */
		if (kind == ECW_AUDIT_ORPHAN)
			err = ecw_index_list_store_save(actx->client, il->table, &list, &none);
		else if (kind == ECW_AUDIT_STALE)
			err = ecw_index_list_store_save(actx->client, il->table, &list, &list.keys);
		ecw_index_list_store_dispose(&list);
		if (err != ECW_EPRECONDITION && err != ECW_ECONFLICT && err != ECW_ENOTFOUND)
			return err;
		ecw_error_clear(); /* a run wrote the list meanwhile: read it again */
	}
	return ecw_error_set(ECW_ETRANSIENT, "the list kept changing (%d tries)", REPAIR_TRIES);
}

/* ---- pass 1: from the sources ---- */

/* The reference of a source whose key is in list (lpk, lrk), judged by
 * ecw_audit_index_list_ref. One GET. */
static int audit_ref(enum ecw_audit_kind *kind, struct ecw_audit_ctx *actx, const struct index_list *il,
		     const char *spk, const char *srk, const char *lpk, const char *lrk)
{
	struct ecw_entity *ref = NULL;
	struct tuples intents;
	const char *cpk = NULL, *crk = NULL, *pending = NULL;
	char rpk[ECW_IL_REF_PK_SIZE], rrk[65];
	bool found = false;
	size_t npending = 0;
	int err;

	ecw_index_list_tuples_init(&intents, 3);
	if ((err = ecw_index_list_ref_keys(rpk, rrk, actx->job, spk, srk)) < 0 ||
	    (err = ecw_audit_get(&ref, actx, il->table, rpk, rrk)) < 0)
		goto done;
	if (ref && ecw_index_list_ref_view(&cpk, &crk, &pending, ref, spk, srk) == 0)
		found = true;
	ecw_error_clear(); /* another source's entity there: run refuses it too */
	if (pending && ecw_index_list_tuples_parse(&intents, pending, strlen(pending), 3, "Pending") < 0) {
		ecw_error_clear();
		npending = SIZE_MAX;
	} else {
		npending = intents.n;
	}
	*kind = ecw_audit_index_list_ref(found, cpk, crk, npending, lpk, lrk);
done:
	ecw_index_list_tuples_dispose(&intents);
	ecw_entity_free(ref);
	return err;
}

/* After the run that repaired a STALE reference: the reference names the
 * list alone now. What a run cannot do: drop an intent of another message
 * (only its owner's runs may, or any run once abandon handed it over as
 * "~poisoned~": index_list.c says why); such an intent is a message still
 * running, or one poisoned whose abandon failed, and the finding stays. */
static void ref_settled(struct ecw_audit_finding *f, struct ecw_audit_ctx *actx, const struct index_list *il,
			char *why, size_t cap)
{
	enum ecw_audit_kind kind = ECW_AUDIT_OK;

	if (audit_ref(&kind, actx, il, f->source_pk, f->source_rk, f->pk, f->rk) < 0)
		repair_failed(f, why, cap);
	else if (kind != ECW_AUDIT_OK) {
		snprintf(why, cap,
			 "the reference still holds an intent of another message after the run: "
			 "only that message's runs may drop it");
		f->repaired = false;
		f->error = why;
	}
}

static int audit_source(const struct index_list *il, struct ecw_audit_ctx *actx, const struct ecw_entity *src)
{
	const char *spk = ecw_entity_pk(src), *srk = ecw_entity_rk(src);
	struct ecw_audit_finding f = {.table = il->table, .source_pk = spk, .source_rk = srk};
	struct il_list list;
	char *lpk = NULL, *lrk = NULL;
	why_buf why;
	int err = 0;

	memset(&list, 0, sizeof(list));
	ecw_index_list_tuples_init(&list.keys, 2);
	if (ecw_index_list_target(&lpk, &lrk, il, src) < 0) {
		ecw_error_clear(); /* run fails such a source for good: nothing derived to compare */
		return 0;
	}
	if ((err = load_list(&list, actx, il->table, lpk, lrk)) == ECW_EINVALID) {
		ecw_error_clear(); /* no list: a conflict, judged once, in pass 2 */
		err = 0;
		goto done;
	}
	if (err < 0)
		goto done;
	f.kind = ecw_audit_index_list_member(list.exists, holds_key(&list.keys, spk, srk));
	f.detail = list.exists ? "the source's key is not in its list" : "the source's list is not there";
	if (f.kind == ECW_AUDIT_OK) {
		err = audit_ref(&f.kind, actx, il, spk, srk, lpk, lrk);
		f.detail = "its reference does not name its list alone";
	}
	if (err == 0 && f.kind != ECW_AUDIT_OK) {
		f.pk = lpk;
		f.rk = lrk;
		if (actx->repair)
			ecw_audit_converge(actx, ecw_index_list_run, il, spk, srk, &f, why, sizeof(why));
		if (f.repaired && f.kind == ECW_AUDIT_STALE && !actx->requeue)
			ref_settled(&f, actx, il, why, sizeof(why));
		ecw_audit_note(actx, &f);
	}
done:
	ecw_index_list_store_dispose(&list);
	free(lpk);
	free(lrk);
	return err;
}

/* ---- pass 2: from the lists ---- */

/* One key (spk, srk) of list (lpk, lrk). One GET. */
static int audit_key(const struct index_list *il, struct ecw_audit_ctx *actx, const char *lpk,
		     const char *lrk, const char *spk, const char *srk)
{
	struct ecw_audit_finding f = {
		.table = il->table, .pk = lpk, .rk = lrk, .source_pk = spk, .source_rk = srk};
	struct ecw_entity *src = NULL;
	char *tpk = NULL, *trk = NULL;
	why_buf why;
	int err;

	if ((err = ecw_audit_get(&src, actx, il->source, spk, srk)) == ECW_EINVALID) {
		ecw_error_clear(); /* keys no source can have: the key names nothing */
		err = 0;
	}
	if (err < 0)
		return err;
	if (src && ecw_index_list_target(&tpk, &trk, il, src) < 0) {
		ecw_error_clear(); /* run fails the source for good: it keeps its old list */
		goto done;
	}
	if ((f.kind = ecw_audit_index_list_key(src != NULL, tpk, trk, lpk, lrk)) != ECW_AUDIT_OK) {
		f.detail = src ? "its source computes to another list" : "its source is gone";
		if (actx->repair)
			repair_stray(il, actx, &f, why, sizeof(why));
		ecw_audit_note(actx, &f);
	}
done:
	ecw_entity_free(src);
	free(tpk);
	free(trk);
	return 0;
}

/* A list (or an entity where lists are) as a whole: not under --partition. */
static void audit_shape(const struct index_list *il, struct ecw_audit_ctx *actx, const struct ecw_entity *e,
			const struct il_list *list, bool is_list)
{
	struct ecw_audit_finding f = {.table = il->table, .pk = ecw_entity_pk(e), .rk = ecw_entity_rk(e)};
	why_buf why;

	if (!is_list) {
		f.kind = ECW_AUDIT_CONFLICT;
		f.detail = "an entity that is no list is where lists are";
	} else if ((f.kind = ecw_audit_index_list_shape(list->keys.n, list->has_count, list->count)) ==
		   ECW_AUDIT_OK) {
		ecw_audit_checked(actx);
		return;
	} else {
		f.detail = f.kind == ECW_AUDIT_ORPHAN ? "empty list" : "its Count differs from its keys";
		if (actx->repair && repair_list(il, actx, f.pk, f.rk) == 0)
			f.repaired = true;
		else if (actx->repair)
			repair_failed(&f, why, sizeof(why));
	}
	ecw_audit_note(actx, &f);
	ecw_audit_checked(actx);
}

static int audit_list(const struct index_list *il, struct ecw_audit_ctx *actx, const struct ecw_entity *e)
{
	struct il_list list;
	const struct tuples *keys = &list.keys;
	bool is_list;
	int err = 0;

	/* a page is read with its head, never judged alone */
	if (ecw_entity_get(e, "ListRowKey") && ecw_entity_get(e, "ListRowKey")->type == ECW_EDM_STRING)
		return 0;
	ecw_audit_pace(actx);
	if ((err = ecw_index_list_store_load_head(&list, actx->client, il->table, e)) < 0 &&
	    err != ECW_EINVALID)
		return err;
	is_list = err == 0;
	err = 0;
	ecw_error_clear();
	if (!actx->partition)
		audit_shape(il, actx, e, &list, is_list);
	for (size_t i = 0; is_list && err == 0 && i < keys->n; i++) {
		if (actx->stop && *actx->stop)
			break;
		if (actx->partition && strcmp(keys->v[i].s[0], actx->partition) != 0)
			continue;
		if ((err = audit_key(il, actx, ecw_entity_pk(e), ecw_entity_rk(e), keys->v[i].s[0],
				     keys->v[i].s[1])) == 0)
			ecw_audit_checked(actx);
	}
	ecw_index_list_store_dispose(&list);
	return err;
}

struct pass {
	const struct index_list *il;
	struct ecw_audit_ctx *actx;
};

static int each_source(const struct ecw_entity *src, void *payload)
{
	struct pass *p = payload;
	int err = audit_source(p->il, p->actx, src);

	if (err == 0)
		ecw_audit_checked(p->actx);
	return err;
}

static int each_list(const struct ecw_entity *e, void *payload)
{
	struct pass *p = payload;

	if (strncmp(ecw_entity_pk(e), ECW_IL_REF_PREFIX, strlen(ECW_IL_REF_PREFIX)) == 0)
		return 0; /* a reference (this job's or another's) */
	if (!ecw_template_may_render(p->il->pk, ecw_entity_pk(e)))
		return 0; /* another job's, in a table they share: neither conflict nor orphan */
	return audit_list(p->il, p->actx, e);
}

int ecw_index_list_audit(const void *settings, struct ecw_audit_ctx *actx)
{
	struct pass p = {.il = settings, .actx = actx};
	/* every property: a list's chunks are Keys, Keys2, ... and a page says
	 * whose it is (ListRowKey) */
	struct ecw_query_options lists = {.top = 100};
	struct ecw_table_query *q = NULL;
	struct ecw_buf select;
	int err;

	ecw_buf_init(&select, 64 * 1024);

	/* 1. from the sources: only what a list's keys are rendered from */
	if ((err = ecw_template_select_add(&select, "PartitionKey")) < 0 ||
	    (err = ecw_template_select_add(&select, "RowKey")) < 0 ||
	    (err = ecw_template_select(&select, p.il->pk)) < 0 ||
	    (err = ecw_template_select(&select, p.il->rk)) < 0 ||
	    (err = ecw_audit_query(&q, actx, p.il->source, "PartitionKey", ecw_buf_cstr(&select))) < 0 ||
	    (err = ecw_audit_each(q, actx, each_source, &p)) < 0)
		goto done;
	ecw_table_query_free(q);
	q = NULL;

	/* 2. from the lists: every partition (a list's keys name the sources;
	 * --partition is applied to them, key by key) */
	if ((err = ecw_table_query_new(&q, actx->client, p.il->table, &lists)) == 0)
		err = ecw_audit_each(q, actx, each_list, &p);
done:
	ecw_table_query_free(q);
	ecw_buf_dispose(&select);
	return err;
}

/* ---- the job type ---------------------------------------------------------- */

/* Here, on top of index_list.c, rather than in it: the audit is this file's,
 * and index_list.c calls nothing of this file. */
const struct ecw_job_type ecw_job_index_list = {
	.name = "index-list",
	.parse = ecw_index_list_parse,
	.prepare = ecw_index_list_prepare,
	.run = ecw_index_list_run,
	.reads_ahead = true,
	.abandon = ecw_index_list_abandon,
	.free = ecw_index_list_free,
	.source_table = ecw_index_list_source_table,
	.target_table = ecw_index_list_target_table,
	.audit = ecw_index_list_audit,
	.list_get = ecw_index_list_get,
};
