/* audit.c - what the job types' audits share (ecw_audit.h): counting and
 * handing on findings, pacing, and the pure rules that judge one pair of
 * entities. The scans themselves live with each job (move.c, index.c),
 * because they compute what the job computes; the command that runs them is
 * worker/cmd/audit.c. Nothing here allocates. */
#include <string.h>

#include "ecw_audit.h"

const char *ecw_audit_kind_name(enum ecw_audit_kind k)
{
	static const char *const names[ECW_AUDIT_KINDS] = {"missing", "stale", "orphan", "conflict"};

	return k >= 0 && k < ECW_AUDIT_KINDS ? names[k] : "ok";
}

void ecw_audit_note(struct ecw_audit_ctx *ctx, const struct ecw_audit_finding *f)
{
	if (f->kind < 0 || f->kind >= ECW_AUDIT_KINDS)
		return;
	ctx->counts.found[f->kind]++;
	if (f->repaired)
		ctx->counts.repaired++;
	if (ctx->on_finding)
		ctx->on_finding(f, ctx->payload);
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
