/* SPDX-License-Identifier: MIT */
/* fanout_audit.c - `ecworker audit` for fanout jobs (ecw_audit.h; the job is
 * jobs/fanout.c, what the two share is jobs/fanout_private.h).
 *
 * Two streamed passes, memory bounded by a page of each open query:
 *   1. from the sources (every property; --partition: the source's
 *      PartitionKey): each source renders the filter as run does and wants
 *      the copies run would write (ecw_fanout_want); its targets are
 *      streamed ($select of the copied fields, as run's query) and each is
 *      judged by ecw_audit_fanout_copies, the rule run's step 3 writes by:
 *      STALE when its copies differ (EDM type and value; a field the source
 *      lacks must be absent). One run fixes every target of a source, so
 *      the repair is one run per source, after its targets were scanned, and
 *      its stale targets are noted together (ecw_audit_note_many: all
 *      counted, repaired or not as that run went, the first as the example):
 *      only the first's keys are kept, never a list. A source whose filter
 *      cannot render (a property it lacks: run poisons its message) is
 *      counted, not judged. In the source's own table the source is not its
 *      own target (as in run).
 *   2. on_delete: clear only, from the targets: copies left on the targets
 *      of a deleted source (ORPHAN). With clear the filter renders from the
 *      keys alone, and ecw_template_filter_keys finds the properties its
 *      top-level `Prop eq {PartitionKey}` / `Prop eq '{RowKey}'` terms bind:
 *      through them a target names the source whose filter could select it.
 *      The targets are streamed ($select of those properties and the copied
 *      fields; --partition: the property bound to PartitionKey equals it);
 *      one that carries any copy is checked: its source is read (both keys
 *      bound: a GET; one: a query of the source table for that key, $top 1,
 *      since the other key does not change the filter; once for a run of
 *      consecutive targets naming the same source), and when none is
 *      there, the filter rendered from those keys is asked whether it still
 *      selects this target with copies on it (a query by the target's keys,
 *      built with the escaping helpers: ecw_fanout_select_target) before it
 *      is an orphan. A bound property that is absent, no String or no key
 *      the service accepts names no source: no filter selects the target,
 *      and no run could clear it, so it is not judged. A filter the keys do
 *      not invert (an `or` at the top, a key compared by ne, a key inside a
 *      longer string), or --partition with PartitionKey unbound, leaves pass
 *      2 undone, and says so (ecw_audit_limit): orphans are then not
 *      checked, rather than reported as none.
 *      Repair: a run for the gone source's keys (the key the filter does not
 *      use is ""), which clears the copies of all its targets: first its
 *      targets with copies are counted (one more streamed query) and noted
 *      together, so that the counts do not depend on --repair; the later
 *      targets of that source, read before the repair, are found clean and
 *      pass. A repair that fails notes this target alone (the others come
 *      up on their own).
 * With on_delete: keep a deleted source's copies stay by design: not drift.
 * Cost: pass 1, one query per source (its targets' pages); pass 2, per target
 * with copies, one GET or query of the source, plus one query when it is
 * gone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_audit.h"
#include "fanout_private.h"

/* The keys of an entity a scan met, kept past its freeing. */
struct kept_keys {
	char pk[ECW_KEY_MAX + 1], rk[ECW_KEY_MAX + 1];
};

static void keep_keys(struct kept_keys *k, const struct ecw_entity *e)
{
	snprintf(k->pk, sizeof(k->pk), "%s", ecw_entity_pk(e));
	snprintf(k->rk, sizeof(k->rk), "%s", ecw_entity_rk(e));
}

static bool has_keys(const struct ecw_entity *e, const char *pk, const char *rk)
{
	return strcmp(ecw_entity_pk(e), pk) == 0 && strcmp(ecw_entity_rk(e), rk) == 0;
}

static bool stopped(const struct ecw_audit_ctx *ctx)
{
	return ctx->stop && *ctx->stop;
}

/* Streams the targets filter selects ($select of the copied fields) and
 * counts those whose copies are not what want says; the first one's keys in
 * *first. skip_pk/skip_rk: an entity that is no target (the source in its
 * own table), or NULL. check: ecw_audit_checked for each target judged. */
static int count_stale(uint64_t *out, struct kept_keys *first, struct ecw_audit_ctx *ctx,
		       const struct fanout *f, const char *filter, const struct fanout_want *want,
		       const char *skip_pk, const char *skip_rk, bool check)
{
	struct ecw_query_options qo = {.filter = filter, .select = f->select, .top = 1000};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *t = NULL;
	int err;

	*out = 0;
	if ((err = ecw_table_query_new(&q, ctx->client, f->table, &qo)) < 0)
		return err;
	while ((err = ecw_audit_next(&t, q, ctx)) == 0 && t) {
		if (!(skip_pk && has_keys(t, skip_pk, skip_rk))) {
			if (ecw_audit_fanout_copies(want->set, want->removed, want->nremoved, t) !=
				    ECW_AUDIT_OK &&
			    (*out)++ == 0 && first)
				keep_keys(first, t);
			if (check)
				ecw_audit_checked(ctx);
		}
		ecw_entity_free(t);
		t = NULL;
	}
	ecw_table_query_free(q);
	return err;
}

/* ---- pass 1: from the sources ---- */

static int audit_source(const struct fanout *f, struct ecw_audit_ctx *ctx, const struct ecw_entity *src)
{
	const char *spk = ecw_entity_pk(src), *srk = ecw_entity_rk(src);
	bool same_table = strcmp(f->source, f->table) == 0;
	struct ecw_audit_finding fd = {.kind = ECW_AUDIT_STALE, .table = f->table};
	struct fanout_want want = {0};
	struct kept_keys *first = NULL;
	struct ecw_buf filter;
	char why[sizeof(((struct ecw_error *)0)->message)];
	uint64_t stale = 0;
	int err = 0;

	ecw_buf_init(&filter, 0);
	if (ecw_fanout_render_filter(&filter, f, src, spk, srk) < 0) {
		ecw_error_clear(); /* run poisons such a source: nothing derived to compare */
		goto done;
	}
	if (!(first = malloc(sizeof(*first)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = ecw_fanout_want(&want, f, src, spk, srk)) < 0 ||
	    (err = count_stale(&stale, first, ctx, f, ecw_buf_cstr(&filter), &want, same_table ? spk : NULL,
			       srk, true)) < 0 ||
	    stale == 0)
		goto done;
	fd.pk = first->pk;
	fd.rk = first->rk;
	fd.source_pk = spk;
	fd.source_rk = srk;
	fd.detail = "its copies differ from the source's values";
	if (ctx->repair && !stopped(ctx))
		ecw_audit_converge(ctx, ecw_fanout_run, f, spk, srk, &fd, why, sizeof(why));
	ecw_audit_note_many(ctx, &fd, stale);
done:
	ecw_fanout_want_dispose(&want);
	ecw_buf_dispose(&filter);
	free(first);
	return err;
}

/* ---- pass 2: from the targets (on_delete: clear) ---- */

static bool carries_copy(const struct fanout *f, const struct ecw_entity *t)
{
	for (size_t i = 0; i < f->nfields; i++)
		if (ecw_entity_get(t, f->fields[i].target))
			return true;
	return false;
}

/* The value of t's property name (the keys included) when it is a String
 * the service accepts as a key; NULL otherwise. */
static const char *bound_value(const struct ecw_entity *t, const char *name)
{
	const struct ecw_prop *p;
	const char *v;

	if (strcmp(name, "PartitionKey") == 0)
		return ecw_entity_pk(t);
	if (strcmp(name, "RowKey") == 0)
		return ecw_entity_rk(t);
	if (!(p = ecw_entity_get(t, name)) || p->type != ECW_EDM_STRING)
		return NULL;
	v = p->v.s;
	if (strlen(v) != p->len || ecw_entity_key_check(v, "key") < 0) {
		ecw_error_clear();
		return NULL;
	}
	return v;
}

/* Whether a source with these keys exists: a GET with both, else a query of
 * the source table for the one bound ($top 1). */
static int source_exists(bool *out, struct ecw_audit_ctx *ctx, const struct fanout *f, const char *spk,
			 const char *srk)
{
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	struct ecw_buf filter;
	int err;

	*out = false;
	if (spk && srk) {
		err = ecw_audit_get(&e, ctx, f->source, spk, srk);
		*out = e != NULL;
		ecw_entity_free(e);
		return err;
	}
	ecw_buf_init(&filter, 0);
	if ((err = ecw_buf_adds(&filter, spk ? "PartitionKey eq " : "RowKey eq ")) < 0 ||
	    (err = ecw_escape_filter_string(&filter, spk ? spk : srk)) < 0)
		goto done;
	struct ecw_query_options qo = {
		.filter = ecw_buf_cstr(&filter), .select = "PartitionKey,RowKey", .limit = 1};
	if ((err = ecw_table_query_new(&q, ctx->client, f->source, &qo)) < 0 ||
	    (err = ecw_audit_next(&e, q, ctx)) < 0)
		goto done;
	*out = e != NULL;
done:
	ecw_entity_free(e);
	ecw_table_query_free(q);
	ecw_buf_dispose(&filter);
	return err;
}

/* One target that carries copies, its candidate source (spk, srk) ("" for a
 * key the filter does not use) known to be gone: an orphan when the filter
 * rendered from those keys still selects it with copies on it. */
static int audit_orphan(const struct fanout *f, struct ecw_audit_ctx *ctx, const struct ecw_entity *t,
			const char *spk, const char *srk)
{
	struct ecw_audit_finding fd = {.kind = ECW_AUDIT_ORPHAN, .table = f->table};
	struct fanout_want gone = {0};
	struct ecw_entity *fresh = NULL;
	struct ecw_buf filter;
	char why[sizeof(((struct ecw_error *)0)->message)];
	uint64_t n = 1;
	int err;

	ecw_buf_init(&filter, 0);
	if ((err = ecw_fanout_render_filter(&filter, f, NULL, spk, srk)) < 0 ||
	    (err = ecw_fanout_want(&gone, f, NULL, spk, srk)) < 0)
		goto done;
	ecw_audit_pace(ctx);
	if ((err = ecw_fanout_select_target(&fresh, ctx->client, f, ecw_buf_cstr(&filter), f->select,
					    ecw_entity_pk(t), ecw_entity_rk(t))) < 0)
		goto done;
	if (!fresh || ecw_audit_fanout_copies(gone.set, gone.removed, gone.nremoved, fresh) == ECW_AUDIT_OK)
		goto done; /* no longer selected, or cleared since the page was read */
	fd.pk = ecw_entity_pk(t);
	fd.rk = ecw_entity_rk(t);
	fd.source_pk = spk;
	fd.source_rk = srk;
	fd.detail = "its source is gone and its copies are still there";
	if (ctx->repair && !stopped(ctx)) {
		/* Counted before the run clears them all (this one among them). */
		if ((err = count_stale(&n, NULL, ctx, f, ecw_buf_cstr(&filter), &gone, NULL, NULL, false)) <
		    0)
			goto done;
		ecw_audit_converge(ctx, ecw_fanout_run, f, spk, srk, &fd, why, sizeof(why));
		if (!fd.repaired || n == 0)
			n = 1;
	}
	ecw_audit_note_many(ctx, &fd, n);
done:
	ecw_entity_free(fresh);
	ecw_fanout_want_dispose(&gone);
	ecw_buf_dispose(&filter);
	return err;
}

static int audit_targets(const struct fanout *f, struct ecw_audit_ctx *ctx)
{
	struct ecw_template_keys keys;
	struct ecw_table_query *q = NULL;
	struct ecw_entity *t = NULL;
	struct ecw_buf select;
	/* The last source looked up and whether it was there: the targets of
	 * one source, when they come one after the other (a partition of
	 * targets per source), cost one lookup. */
	struct kept_keys *last = NULL;
	bool last_valid = false, exists = false;
	int err;

	if (ecw_template_filter_keys(&keys, f->filter) < 0) {
		ecw_error_clear();
		ecw_audit_limit(ctx, "orphans not checked: the filter names its source by no top-level `and` "
				     "terms `Prop eq {PartitionKey}` / `Prop eq '{RowKey}'`");
		return 0;
	}
	if (ctx->partition && !keys.pk[0]) {
		ecw_audit_limit(ctx, "orphans not checked with --partition: the filter does not bind "
				     "{PartitionKey} to a property of the targets");
		return 0;
	}
	ecw_buf_init(&select, 0);
	if (!(last = malloc(sizeof(*last)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	if ((keys.pk[0] && (err = ecw_buf_printf(&select, "%s,", keys.pk)) < 0) ||
	    (keys.rk[0] && (err = ecw_buf_printf(&select, "%s,", keys.rk)) < 0) ||
	    (err = ecw_buf_adds(&select, f->select)) < 0 ||
	    (err = ecw_audit_query(&q, ctx, f->table, keys.pk[0] ? keys.pk : "PartitionKey",
				   ecw_buf_cstr(&select))) < 0)
		goto done;
	while ((err = ecw_audit_next(&t, q, ctx)) == 0 && t) {
		const char *spk = keys.pk[0] ? bound_value(t, keys.pk) : NULL,
			   *srk = keys.rk[0] ? bound_value(t, keys.rk) : NULL;
		if (carries_copy(f, t) && (spk || !keys.pk[0]) && (srk || !keys.rk[0])) {
			if (!last_valid || strcmp(last->pk, spk ? spk : "") != 0 ||
			    strcmp(last->rk, srk ? srk : "") != 0) {
				last_valid = (err = source_exists(&exists, ctx, f, spk, srk)) == 0;
				snprintf(last->pk, sizeof(last->pk), "%s", spk ? spk : "");
				snprintf(last->rk, sizeof(last->rk), "%s", srk ? srk : "");
			}
			if (err == 0 && !exists)
				err = audit_orphan(f, ctx, t, last->pk, last->rk);
			if (err < 0)
				break;
			ecw_audit_checked(ctx);
		}
		ecw_entity_free(t);
		t = NULL;
	}
done:
	ecw_entity_free(t);
	ecw_table_query_free(q);
	ecw_buf_dispose(&select);
	free(last);
	return err;
}

/* The $select of the sources: what the filter and the copies read. */
static int source_select(struct ecw_buf *out, const struct fanout *f)
{
	int err;

	if ((err = ecw_template_select_add(out, "PartitionKey")) < 0 ||
	    (err = ecw_template_select_add(out, "RowKey")) < 0 ||
	    (err = ecw_template_select(out, f->filter)) < 0)
		return err;
	for (size_t i = 0; i < f->nfields && err == 0; i++)
		err = ecw_template_select_add(out, f->fields[i].source);
	return err;
}

struct source_pass {
	const struct fanout *f;
	struct ecw_audit_ctx *ctx;
};

/* Pass 1 for each source. */
static int each_source(const struct ecw_entity *src, void *payload)
{
	struct source_pass *p = payload;
	int err;

	if ((err = audit_source(p->f, p->ctx, src)) == 0)
		ecw_audit_checked(p->ctx);
	return err;
}

int ecw_fanout_audit(const void *settings, struct ecw_audit_ctx *ctx)
{
	const struct fanout *f = settings;
	struct ecw_table_query *q = NULL;
	struct ecw_buf select;
	int err;

	ecw_buf_init(&select, 64 * 1024);
	err = source_select(&select, f);
	if (err == 0)
		err = ecw_audit_query(&q, ctx, f->source, "PartitionKey", ecw_buf_cstr(&select));
	ecw_buf_dispose(&select);
	if (err < 0)
		return err;
	err = ecw_audit_each(q, ctx, each_source, &(struct source_pass){f, ctx});
	ecw_table_query_free(q);
	if (err == 0 && f->clear_on_delete && !stopped(ctx))
		err = audit_targets(f, ctx);
	return err;
}

/* ---- the job type ---------------------------------------------------------- */

/* Here, on top of fanout.c, rather than in it: the audit is this file's, and
 * fanout.c calls nothing of this file. */
const struct ecw_job_type ecw_job_fanout = {
	.name = "fanout",
	.parse = ecw_fanout_parse,
	.prepare = ecw_fanout_prepare,
	.run = ecw_fanout_run,
	.free = ecw_fanout_free,
	.source_table = ecw_fanout_source_table,
	.target_table = ecw_fanout_target_table,
	.audit = ecw_fanout_audit,
};
