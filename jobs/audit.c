/* SPDX-License-Identifier: MIT */
/* audit.c - what the job types' audits share (ecw_audit.h): counting and
 * handing on findings, pacing, the paced reads of a pass, the repair
 * through a job's run (or its message), and the pure rules that judge one
 * pair of entities. The scans themselves live with each job (move.c,
 * index.c, ...), because they compute what the job computes; the command
 * that runs them is worker/cmd/audit.c. */
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "ecw_audit.h"
#include "ecw_job.h"
#include "ecw_storage.h"

const char *ecw_audit_kind_name(enum ecw_audit_kind k)
{
	static const char *const names[ECW_AUDIT_KINDS] = {"missing", "stale", "orphan", "conflict"};

	return k >= 0 && k < ECW_AUDIT_KINDS ? names[k] : "ok";
}

void ecw_audit_note(struct ecw_audit_ctx *ctx, const struct ecw_audit_finding *f)
{
	ecw_audit_note_many(ctx, f, 1);
}

void ecw_audit_note_many(struct ecw_audit_ctx *ctx, const struct ecw_audit_finding *f, uint64_t n)
{
	if (n == 0 || f->kind < 0 || f->kind >= ECW_AUDIT_KINDS)
		return;
	ctx->counts.found[f->kind] += n;
	if (f->repaired) {
		ctx->counts.repaired += n;
		ctx->counts.repaired_kind[f->kind] += n;
	}
	if (ctx->on_finding)
		ctx->on_finding(f, ctx->payload);
}

void ecw_audit_limit(struct ecw_audit_ctx *ctx, const char *text)
{
	if (ctx->counts.nlimits < ECW_AUDIT_LIMITS)
		ctx->counts.limits[ctx->counts.nlimits++] = text;
}

void ecw_audit_checked(struct ecw_audit_ctx *ctx)
{
	ctx->counts.checked++;
	if (ctx->on_checked)
		ctx->on_checked(&ctx->counts, ctx->payload);
}

bool ecw_audit_pace(struct ecw_audit_ctx *ctx)
{
	if (ctx->stop && *ctx->stop)
		return true;
	if (ctx->pace)
		ctx->pace(ctx->payload);
	return ctx->stop && *ctx->stop;
}

/* ---- reads and repairs ---- */

int ecw_audit_query(struct ecw_table_query **out, struct ecw_audit_ctx *ctx, const char *table,
		    const char *partition_prop, const char *select)
{
	struct ecw_query_options qo = {.select = select, .top = 1000};
	struct ecw_buf filter;
	int err = 0;

	*out = NULL;
	ecw_buf_init(&filter, 4096);
	if (ctx->partition &&
	    ((err = ecw_buf_adds(&filter, partition_prop)) < 0 || (err = ecw_buf_adds(&filter, " eq ")) < 0 ||
	     (err = ecw_escape_filter_string(&filter, ctx->partition)) < 0))
		goto done;
	qo.filter = ctx->partition ? ecw_buf_cstr(&filter) : NULL;
	err = ecw_table_query_new(out, ctx->client, table, &qo);
done:
	ecw_buf_dispose(&filter);
	return err;
}

int ecw_audit_next(struct ecw_entity **out, struct ecw_table_query *q, struct ecw_audit_ctx *ctx)
{
	int err;

	*out = NULL;
	if (ecw_audit_pace(ctx))
		return 0;
	if ((err = ecw_table_query_next(out, q)) == ECW_ENOTABLE)
		return ecw_audit_table_missing();
	return err;
}

/* A missing table is never an empty one: read as empty, a typo'd source
 * would make every derived entity an orphan, and a repair would delete
 * them. The audit stops, naming it; nothing is repaired after. */
int ecw_audit_table_missing(void)
{
	char table[sizeof(ecw_error_last()->table)];

	snprintf(table, sizeof(table), "%s", ecw_error_last()->table);
	ecw_error_set(ECW_ENOTABLE,
		      "table '%s' does not exist: nothing was audited or repaired from it (create it, or "
		      "correct the job's table name)",
		      table);
	ecw_error_set_table(table, strlen(table));
	return ECW_ENOTABLE;
}

int ecw_audit_each(struct ecw_table_query *q, struct ecw_audit_ctx *ctx,
		   int (*each)(const struct ecw_entity *e, void *payload), void *payload)
{
	struct ecw_entity *e = NULL;
	int err;

	while ((err = ecw_audit_next(&e, q, ctx)) == 0 && e) {
		err = each(e, payload);
		ecw_entity_free(e);
		e = NULL;
		if (err < 0)
			break;
	}
	return err;
}

int ecw_audit_get(struct ecw_entity **out, struct ecw_audit_ctx *ctx, const char *table, const char *pk,
		  const char *rk)
{
	int err;

	*out = NULL;
	ecw_audit_pace(ctx);
	if ((err = ecw_table_get(out, ctx->client, table, pk, rk)) == ECW_ENOTFOUND) {
		ecw_error_clear();
		*out = NULL;
		return 0;
	}
	return err == ECW_ENOTABLE ? ecw_audit_table_missing() : err;
}

/* Why a repair failed, into f->error (copied into why). */
static void converge_failed(struct ecw_audit_finding *f, int err, char *why, size_t cap)
{
	snprintf(why, cap, "%s",
		 ecw_error_last()->message[0] ? ecw_error_last()->message : ecw_error_name(err));
	f->error = why;
	ecw_error_clear();
}

void ecw_audit_converge(struct ecw_audit_ctx *ctx, int (*run)(const void *, struct ecw_job_ctx *),
			const void *settings, const char *pk, const char *rk, struct ecw_audit_finding *f,
			char *why, size_t cap)
{
	struct ecw_job_ctx jc = {.client = ctx->client,
				 .job = ctx->job,
				 .pk = pk,
				 .rk = rk,
				 .trace_id = "audit",
				 .message_id = "audit"};
	int err;

	ecw_audit_pace(ctx);
	err = ctx->requeue ? ctx->requeue(pk, rk, ctx->payload) : run(settings, &jc);
	if (err == 0) {
		f->repaired = true;
		if (!ctx->requeue)
			ecw_audit_chain(ctx, pk, rk, f, why, cap);
		return;
	}
	converge_failed(f, err, why, cap);
}

int ecw_audit_message(struct json_object **out, const char *job, char *const *fields)
{
	struct json_object *m = json_object_new_object();
	int err = 0;

	*out = NULL;
	if (!m || json_object_object_add(m, "job", json_object_new_string(job)) < 0)
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
	for (size_t i = 0; err == 0 && fields[i]; i++) {
		const char *eq = strchr(fields[i], '=');
		char name[64];
		if (!eq || (size_t)(eq - fields[i]) >= sizeof(name))
			err = ecw_error_set(ECW_EINVALID, "a message field is no name=value");
		else if (snprintf(name, sizeof(name), "%.*s", (int)(eq - fields[i]), fields[i]) < 0 ||
			 json_object_object_add(m, name, json_object_new_string(eq + 1)) < 0)
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	if (err < 0)
		json_object_put(m);
	else
		*out = m;
	return err;
}

void ecw_audit_converge_fields(struct ecw_audit_ctx *ctx, int (*run)(const void *, struct ecw_job_ctx *),
			       const void *settings, char *const *fields, struct ecw_audit_finding *f,
			       char *why, size_t cap)
{
	struct ecw_job_ctx jc = {
		.client = ctx->client, .job = ctx->job, .trace_id = "audit", .message_id = "audit"};
	struct json_object *m = NULL;
	int err;

	ecw_audit_pace(ctx);
	if (ctx->requeue_fields)
		err = ctx->requeue_fields(fields, ctx->payload);
	else if ((err = ecw_audit_message(&m, ctx->job, fields)) == 0) {
		jc.message = m;
		err = run(settings, &jc);
	}
	json_object_put(m);
	if (err == 0)
		f->repaired = true;
	else
		converge_failed(f, err, why, cap);
}

void ecw_audit_chain(struct ecw_audit_ctx *ctx, const char *pk, const char *rk, struct ecw_audit_finding *f,
		     char *why, size_t cap)
{
	int err;

	if (!f->repaired || !ctx->chain || (err = ctx->chain(pk, rk, ctx->payload)) == 0)
		return;
	f->repaired = false;
	converge_failed(f, err, why, cap);
}

/* ---- the rules ---- */

enum ecw_audit_kind ecw_audit_move_pair(const struct ecw_entity *copy, const struct ecw_entity *target)
{
	if (!target)
		return ECW_AUDIT_OK;
	return ecw_entity_equal(copy, target) ? ECW_AUDIT_STALE : ECW_AUDIT_CONFLICT;
}

static const char *str_prop(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);

	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

static bool same_keys(const struct ecw_entity *a, const struct ecw_entity *b)
{
	return strcmp(ecw_entity_pk(a), ecw_entity_pk(b)) == 0 &&
	       strcmp(ecw_entity_rk(a), ecw_entity_rk(b)) == 0;
}

enum ecw_audit_kind ecw_audit_index_entry(const struct ecw_entity *want, const struct ecw_entity *at,
					  bool other_holds)
{
	const char *wpk = str_prop(want, ECW_AUDIT_INDEX_SRC_PK),
		   *wrk = str_prop(want, ECW_AUDIT_INDEX_SRC_RK);
	const char *apk, *ark;

	if (!at)
		return ECW_AUDIT_MISSING;
	apk = str_prop(at, ECW_AUDIT_INDEX_SRC_PK);
	ark = str_prop(at, ECW_AUDIT_INDEX_SRC_RK);
	if (!apk || !ark)
		return ECW_AUDIT_CONFLICT; /* not an entry: the job refuses to overwrite it too */
	if (wpk && wrk && strcmp(apk, wpk) == 0 && strcmp(ark, wrk) == 0)
		return ecw_entity_equal(want, at) ? ECW_AUDIT_OK : ECW_AUDIT_STALE;
	return other_holds ? ECW_AUDIT_CONFLICT : ECW_AUDIT_MISSING;
}

enum ecw_audit_kind ecw_audit_index_orphan(const struct ecw_entity *entry, const struct ecw_entity *want)
{
	if (!want || !same_keys(entry, want))
		return ECW_AUDIT_ORPHAN;
	return ECW_AUDIT_OK;
}

enum ecw_audit_kind ecw_audit_index_ref(bool found, const char *cur_pk, const char *cur_rk, size_t pending,
					const struct ecw_entity *want)
{
	if (!found || !cur_pk || !cur_rk || pending > 0)
		return ECW_AUDIT_STALE;
	return strcmp(cur_pk, ecw_entity_pk(want)) == 0 && strcmp(cur_rk, ecw_entity_rk(want)) == 0
		       ? ECW_AUDIT_OK
		       : ECW_AUDIT_STALE;
}

/* ---- scheduled audits (issue 21, item 5) ---- */

uint64_t ecw_audit_drift(const struct ecw_audit_counts *c, enum ecw_audit_kind k)
{
	if (k < 0 || k >= ECW_AUDIT_KINDS || c->repaired_kind[k] > c->found[k])
		return 0;
	return c->found[k] - c->repaired_kind[k];
}

/* ---- end of scheduled audits ---- */

/* ---- fanout ---- */

enum ecw_audit_kind ecw_audit_fanout_copies(const struct ecw_entity *set, const char *const *removed,
					    size_t nremoved, const struct ecw_entity *target)
{
	for (size_t i = 0; i < ecw_entity_count(set); i++) {
		const struct ecw_prop *want = ecw_entity_at(set, i),
				      *have = ecw_entity_get(target, want->name);
		if (!have || !ecw_entity_prop_equal(want, have))
			return ECW_AUDIT_STALE;
	}
	for (size_t i = 0; i < nremoved; i++)
		if (ecw_entity_get(target, removed[i]))
			return ECW_AUDIT_STALE;
	return ECW_AUDIT_OK;
}
/* ---- index-list ---- */

enum ecw_audit_kind ecw_audit_index_list_member(bool list_found, bool holds)
{
	return list_found && holds ? ECW_AUDIT_OK : ECW_AUDIT_MISSING;
}

static bool same_str(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

enum ecw_audit_kind ecw_audit_index_list_ref(bool found, const char *cur_pk, const char *cur_rk,
					     size_t pending, const char *lpk, const char *lrk)
{
	return found && pending == 0 && same_str(cur_pk, lpk) && same_str(cur_rk, lrk) ? ECW_AUDIT_OK
										       : ECW_AUDIT_STALE;
}

enum ecw_audit_kind ecw_audit_index_list_shape(size_t nkeys, bool has_count, int64_t count)
{
	if (nkeys == 0)
		return ECW_AUDIT_ORPHAN;
	return has_count && count >= 0 && (uint64_t)count == nkeys ? ECW_AUDIT_OK : ECW_AUDIT_STALE;
}

enum ecw_audit_kind ecw_audit_index_list_key(bool source_found, const char *tpk, const char *trk,
					     const char *lpk, const char *lrk)
{
	if (!source_found)
		return ECW_AUDIT_ORPHAN;
	return same_str(tpk, lpk) && same_str(trk, lrk) ? ECW_AUDIT_OK : ECW_AUDIT_STALE;
}

/* ---- end of index-list ---- */
