/* SPDX-License-Identifier: MIT */
/* fanout.c - denormalization: copies of some of a source entity's
 * properties kept in every target entity that `filter` selects, e.g. a
 * customer's Name in each of its orders as CustomerName.
 *
 *   1. GET the source S (ETag E).        absent and on_delete keep: done
 *                                        ("missing"); absent and on_delete
 *                                        clear: every copied field must go
 *   2. query the targets: `filter`       page by page (continuation tokens),
 *      rendered from S (or, once S is    $select of the copied fields unless
 *      gone, from the message's keys)    a field must be removed (replace
 *      each value one OData literal      needs the whole entity)
 *   3. per target: skip it when its      MERGE of just the copied fields, or,
 *      copies already equal S's values   when a field must go (source lacks
 *      (same EDM type and value, and     it, or was deleted with clear), an
 *      removed fields absent); else      UPDATE of the target as read minus
 *      queue a write with If-Match =     those fields; both never create
 *      the target's ETag as read
 *   4. write the queue of one partition  lone targets as single requests; a
 *      in entity group transactions of   batch failing with 404 (a target
 *      up to 100 (and under 4 MiB)       vanished) or 412 (one changed) is
 *                                        redone as single writes: 404 skips,
 *                                        412 reads that target again through
 *                                        the filter and plans it afresh
 *   5. GET the source again: same ETag   (or still absent): done. Otherwise
 *                                        it changed while we wrote: start
 *                                        over at 1 (at most 5 rounds, then a
 *                                        transient error: retried later)
 *
 * Why If-Match = the target's ETag, not "*": MERGE only sends the copied
 * fields, so a concurrent application write to other properties survives
 * either way, and MERGE with If-Match never creates a vanished target
 * (insert-or-merge would resurrect it). But "*" would write into whatever
 * entity holds those keys by then, and a target whose filter property
 * changed meanwhile (an order moved to another customer) would get this
 * source's values. With the ETag the write applies only to the version that
 * matched the filter; on 412 we ask the service again, through the filter,
 * whether it is still a target. An UPDATE (replace) needs the ETag anyway:
 * with "*" it would drop whatever another writer added since our read.
 *
 * A source property that is absent (or null) is absent in the copies: the
 * derived data mirrors the source, and a missing optional field (no Email
 * yet) is ordinary data, not a reason to poison the message. The filter,
 * though, must render: a source without a property the filter names cannot
 * say which entities are its targets (ECW_EINVALID, permanent).
 *
 * Crash safety, step by step (a crash = the process dies right after it;
 * the message is then redelivered and the job runs again from step 1):
 *   after 1 (fanout.read), after a page of 2 (fanout.page): nothing written.
 *   after a write of 4 (fanout.batch, fanout.single): some targets carry the
 *       values of S and the rest their old ones. Each write is all-or-nothing
 *       (a batch is one transaction) and sets the copies to exactly what S
 *       held; the rerun reads the current source and skips the targets that
 *       already match it, so it finishes the rest (or, if S changed, redoes
 *       all of them with the new values). Nothing else of a target is
 *       touched: MERGE sends only the copied fields, UPDATE is conditional
 *       on the version read.
 *   after 3-4 for all targets (fanout.targets) and after 5 (fanout.checked):
 *       every target matches S as read; the rerun finds nothing to write
 *       (or, if S changed since, writes just that change).
 * Stale, duplicated and reordered messages carry only keys: every run reads
 * the current source, so an old message brings the targets to the current
 * state, like a new one. Several workers: two runs with the same source
 * version write the same values (a 412 from the other's write leads to a
 * re-read that finds the target matching). A run that read an older version
 * can still write it after a newer run finished (it read S before the
 * change, its targets after the newer run's writes); step 5 catches exactly
 * that: its final read sees the new ETag and it starts over with the new
 * values, or it dies first and its message, not deleted, comes back. So
 * after the last change of S, whichever run finishes last has written S's
 * final values since, and none can finish having written older ones.
 *
 * Cost: one write request per 100 changed targets of a partition (a lone
 * one alone), none when every copy already matches; reads: the query's
 * pages and two GETs of the source per round.
 * Leases: a fan-out of 100,000 targets is 1,000 transactions or more; the
 * runtime renews the message's lease meanwhile, and the lease is checked
 * before every write, so a run whose lease is lost stops before its next
 * write (a transient error: the message's new holder runs it again). Memory
 * stays bounded: the query iterator holds one page, and at most one batch
 * of writes is pending.
 * Its audit (`ecworker audit`) is jobs/fanout_audit.c, the file on top,
 * which also holds the type descriptor (ecw_job_fanout); what the two share
 * (the settings, the wanted copies, the filter's rendering, run) is
 * fanout_private.h, and the rule that judges a target's copies, used by
 * plan() below as well, is ecw_audit_fanout_copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_audit.h"
#include "ecw_job.h"
#include "fanout_private.h"
#include "jobs_private.h"

#define MAX_ROUNDS 5
/* Stay well below the 4 MiB transaction limit: the estimate below counts
 * bodies exactly but sub-request headers only roughly. */
#define BATCH_BYTE_BUDGET (ECW_BATCH_MAX_BYTES - 512 * 1024)

void ecw_fanout_free(void *p)
{
	struct fanout *f = p;

	if (!f)
		return;
	for (size_t i = 0; i < f->nfields; i++) {
		free(f->fields[i].target);
		free(f->fields[i].source);
	}
	free(f->fields);
	free(f->source);
	free(f->table);
	free(f->select);
	ecw_template_free(f->filter);
	free(f);
}

/* A name the entity setters accept (checked by setting it on a scratch
 * entity, so the rules live in one place). */
static bool valid_property_name(struct ecw_entity *scratch, const char *name)
{
	return ecw_entity_set_bool(scratch, name, true) == 0;
}

static int parse_fields(struct fanout *f, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	const struct ecw_node *map = ecw_node_get(job, "fields");
	struct ecw_entity *scratch = NULL;
	struct ecw_buf select;
	int bad = 0;

	if (!map) {
		ecw_node_error(
			errs, job,
			"fanout job: missing required key 'fields' (target property: source property)");
		return -1;
	}
	if (map->kind != ECW_NODE_MAP || map->n == 0) {
		ecw_node_error(errs, map, "fields: a map of target property: source property, at least one");
		return -1;
	}
	if (!(f->fields = calloc(map->n, sizeof(*f->fields))) || ecw_entity_new(&scratch, "p", "r") < 0) {
		ecw_node_error(errs, map, "fields: out of memory");
		return -1;
	}
	ecw_buf_init(&select, 0);
	for (size_t i = 0; i < map->n; i++) {
		const struct ecw_node *k = map->keys[i], *v = map->items[i];
		if (v->kind != ECW_NODE_SCALAR || !v->value[0]) {
			ecw_node_error(errs, v, "fields.%s: a source property name", k->value);
			bad = 1;
			continue;
		}
		if (!valid_property_name(scratch, k->value)) {
			ecw_node_error(errs, k, "fields: '%s' cannot be a target property: %s", k->value,
				       ecw_error_last()->message);
			bad = 1;
		}
		/* The keys can be copied (a customer's RowKey as CustomerId);
		 * Timestamp is the service's own and changes on every write. */
		if (strcmp(v->value, "PartitionKey") != 0 && strcmp(v->value, "RowKey") != 0 &&
		    !valid_property_name(scratch, v->value)) {
			/* The key is the file's own text; the value may come from
			 * the environment, so it is not quoted. */
			ecw_node_error(errs, v,
				       "fields.%s: the value cannot be a source property (letters, digits "
				       "and '_', not starting with a digit; not Timestamp)",
				       k->value);
			bad = 1;
		}
		/* Filled in order (a field skipped above leaves no gap), so
		 * free() reaches every copy. */
		if (!(f->fields[f->nfields].target = strdup(k->value)) ||
		    !(f->fields[f->nfields].source = strdup(v->value)) ||
		    (select.len && ecw_buf_addc(&select, ',') < 0) || ecw_buf_adds(&select, k->value) < 0) {
			ecw_node_error(errs, map, "fields: out of memory");
			bad = 1;
		}
		f->nfields++;
	}
	f->select = ecw_buf_take(&select);
	ecw_entity_free(scratch);
	return bad ? -1 : 0;
}

int ecw_fanout_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type",   "then",   "source",    "table",
					      "filter", "fields", "on_delete", NULL};
	struct fanout *f = calloc(1, sizeof(*f));
	char *on_delete = NULL;
	int bad = 0;

	*out = NULL;
	if (!f)
		return -1;
	bad |= ecw_node_check_keys(job, allowed, "fanout job", errs) > 0;
	bad |= ecw_job_setting_table(&f->source, job, "source", true, errs) < 0;
	bad |= ecw_job_setting_table(&f->table, job, "table", true, errs) < 0;
	bad |= ecw_job_setting_filter(&f->filter, job, "filter", true, errs) < 0;
	bad |= parse_fields(f, job, errs) < 0;
	if (ecw_node_string(&on_delete, job, "on_delete", false, errs) < 0) {
		bad = 1;
	} else if (on_delete && strcmp(on_delete, "clear") == 0) {
		f->clear_on_delete = true;
	} else if (on_delete && strcmp(on_delete, "keep") != 0) {
		/* Never the value: it may come from the environment. */
		ecw_node_error(errs, ecw_node_get(job, "on_delete"), "on_delete: keep or clear");
		bad = 1;
	}
	free(on_delete);
	if (!bad && f->clear_on_delete) {
		/* Once the source is gone only the message's keys are left to
		 * render the filter with: it may use nothing else. */
		struct ecw_entity *keys = NULL;
		struct ecw_buf probe;
		ecw_buf_init(&probe, 0);
		if (ecw_entity_new(&keys, "p", "r") < 0 ||
		    ecw_template_render(&probe, f->filter, keys, ECW_TEMPLATE_ODATA) < 0) {
			ecw_node_error(
				errs, ecw_node_get(job, "filter"),
				"filter: with on_delete: clear it may use only {PartitionKey} and {RowKey}, "
				"all a deleted source leaves");
			bad = 1;
		}
		ecw_buf_dispose(&probe);
		ecw_entity_free(keys);
	}
	if (bad) {
		ecw_fanout_free(f);
		return -1;
	}
	*out = f;
	return 0;
}

int ecw_fanout_prepare(const void *settings, struct ecw_client *c)
{
	const struct fanout *f = settings;

	if (strcmp(f->table, f->source) == 0)
		return 0; /* the copies live in the source table: only read, never made */
	return ecw_table_create(NULL, c, f->table);
}

const char *ecw_fanout_source_table(const void *settings)
{
	return ((const struct fanout *)settings)->source;
}

const char *ecw_fanout_target_table(const void *settings)
{
	return ((const struct fanout *)settings)->table;
}

/* ---- one run --------------------------------------------------------------------- */

/* A pending write: the entity to send and the target's ETag as read. */
struct op {
	struct ecw_entity *e;
	bool replace; /* UPDATE (a field must go) rather than MERGE */
	char *etag;
	size_t bytes; /* estimated share of a batch body */
};

struct run {
	const struct fanout *f;
	struct ecw_job_ctx *ctx;
	const char *filter; /* rendered */
	/* The desired copies (the set's keys are set per target). */
	struct fanout_want want;
	struct ecw_buf scratch;
	/* Writes pending for one partition. */
	struct op ops[ECW_BATCH_MAX_OPS];
	size_t nops, bytes;
	long long targets, written, gone;
};

static void op_dispose(struct op *op)
{
	ecw_entity_free(op->e);
	free(op->etag);
	memset(op, 0, sizeof(*op));
}

static void run_dispose(struct run *r)
{
	for (size_t i = 0; i < r->nops; i++)
		op_dispose(&r->ops[i]);
	ecw_fanout_want_dispose(&r->want);
	ecw_buf_dispose(&r->scratch);
}

void ecw_fanout_want_dispose(struct fanout_want *w)
{
	ecw_entity_free(w->set);
	free(w->removed);
	memset(w, 0, sizeof(*w));
}

int ecw_fanout_want(struct fanout_want *out, const struct fanout *f, const struct ecw_entity *src,
		    const char *pk, const char *rk)
{
	int err;

	memset(out, 0, sizeof(*out));
	if ((err = ecw_entity_new(&out->set, pk, rk)) < 0)
		goto done;
	if (!(out->removed = calloc(f->nfields, sizeof(*out->removed)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < f->nfields; i++) {
		const char *name = f->fields[i].source;
		struct ecw_prop p;
		if (!src) {
			out->removed[out->nremoved++] = f->fields[i].target;
			continue;
		}
		if (strcmp(name, "PartitionKey") == 0 || strcmp(name, "RowKey") == 0) {
			memset(&p, 0, sizeof(p));
			p.type = ECW_EDM_STRING;
			p.v.s = name[0] == 'P' ? ecw_entity_pk(src) : ecw_entity_rk(src);
			p.len = strlen(p.v.s);
		} else if (ecw_entity_get(src, name)) {
			p = *ecw_entity_get(src, name); /* type and value exactly */
		} else {
			out->removed[out->nremoved++] = f->fields[i].target;
			continue;
		}
		p.name = f->fields[i].target;
		if ((err = ecw_entity_set_prop(out->set, &p)) < 0)
			goto done;
	}
done:
	if (err < 0)
		ecw_fanout_want_dispose(out);
	return err;
}

/* What target t needs: *op->e stays NULL when its copies already match. */
static int plan(struct op *op, struct run *r, const struct ecw_entity *t)
{
	const struct fanout_want *w = &r->want;
	bool replace = false;
	int err;

	memset(op, 0, sizeof(*op));
	/* Exact EDM types and values: an Int32 5 never passes for an Int64 5
	 * (the audit judges a target by the same rule). */
	if (ecw_audit_fanout_copies(w->set, w->removed, w->nremoved, t) == ECW_AUDIT_OK)
		return 0;
	if ((err = ecw_entity_set_keys(w->set, ecw_entity_pk(t), ecw_entity_rk(t))) < 0)
		goto done;
	if (!ecw_entity_etag(t)) {
		err = ecw_error_set(ECW_ERROR, "fanout: target %s/%s came without an ETag", ecw_entity_pk(t),
				    ecw_entity_rk(t));
		goto done;
	}
	for (size_t i = 0; i < w->nremoved && !replace; i++)
		replace = ecw_entity_get(t, w->removed[i]) != NULL;
	if (!replace) {
		err = ecw_entity_clone(&op->e, w->set);
	} else {
		/* MERGE cannot remove a property: replace the entity as read,
		 * minus the removed fields, plus the set ones. */
		if ((err = ecw_entity_clone(&op->e, t)) < 0)
			goto done;
		for (size_t i = 0; i < w->nremoved; i++)
			ecw_entity_remove(op->e, w->removed[i]);
		for (size_t i = 0; i < ecw_entity_count(w->set) && err == 0; i++)
			err = ecw_entity_set_prop(op->e, ecw_entity_at(w->set, i));
	}
	if (err < 0)
		goto done;
	op->replace = replace;
	if (!(op->etag = strdup(ecw_entity_etag(t)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	ecw_buf_reset(&r->scratch);
	if ((err = ecw_entity_to_json(&r->scratch, op->e)) < 0)
		goto done;
	/* Body, plus the sub-request's lines: the URL carries the keys
	 * percent-encoded (up to three bytes each), then the headers. */
	op->bytes = r->scratch.len + 3 * (strlen(ecw_entity_pk(t)) + strlen(ecw_entity_rk(t))) +
		    strlen(op->etag) + 1024;
done:
	if (err < 0)
		op_dispose(op);
	return err;
}

int ecw_fanout_select_target(struct ecw_entity **out, struct ecw_client *c, const struct fanout *f,
			     const char *filter, const char *select, const char *pk, const char *rk)
{
	struct ecw_table_query *q = NULL;
	struct ecw_buf text;
	int err;

	*out = NULL;
	ecw_buf_init(&text, 0);
	if ((err = ecw_buf_printf(&text, "(%s) and PartitionKey eq ", filter)) < 0 ||
	    (err = ecw_escape_filter_string(&text, pk)) < 0 ||
	    (err = ecw_buf_adds(&text, " and RowKey eq ")) < 0 ||
	    (err = ecw_escape_filter_string(&text, rk)) < 0)
		goto done;
	struct ecw_query_options qo = {.filter = ecw_buf_cstr(&text), .select = select, .limit = 1};
	if ((err = ecw_table_query_new(&q, c, f->table, &qo)) == 0)
		err = ecw_table_query_next(out, q);
done:
	ecw_table_query_free(q);
	ecw_buf_dispose(&text);
	return err;
}

/* The target pk/rk read afresh through the filter; *out NULL when it is gone
 * or no longer a target. */
static int reread(struct ecw_entity **out, struct run *r, const char *pk, const char *rk)
{
	return ecw_fanout_select_target(out, r->ctx->client, r->f, r->filter,
					r->want.nremoved ? NULL : r->f->select, pk, rk);
}

/* One write on its own. A vanished target is skipped; one that changed
 * since it was read is read again and planned afresh. */
static int write_single(struct run *r, struct op *op)
{
	int err = 0;

	for (int round = 0; round < MAX_ROUNDS; round++) {
		struct ecw_entity *fresh = NULL;
		if ((err = ecw_job_check_lease(r->ctx)) < 0)
			return err;
		err = ecw_table_write(NULL, r->ctx->client, r->f->table, op->e,
				      op->replace ? ECW_WRITE_UPDATE : ECW_WRITE_MERGE, op->etag);
		if (err == 0) {
			r->written++;
			ecw_crash_point("fanout.single");
			return 0;
		}
		if (err == ECW_ENOTFOUND) {
			/* Deleted since the query (or its table): nothing to keep a copy in. */
			ecw_error_clear();
			r->gone++;
			return 0;
		}
		if (err != ECW_EPRECONDITION)
			return err;
		if ((err = reread(&fresh, r, ecw_entity_pk(op->e), ecw_entity_rk(op->e))) < 0)
			return err;
		op_dispose(op);
		if (!fresh) {
			r->gone++;
			return 0;
		}
		err = plan(op, r, fresh);
		ecw_entity_free(fresh);
		if (err < 0 || !op->e)
			return err;
	}
	return ecw_error_set(ECW_ETRANSIENT, "fanout %s: target %s/%s kept changing (%d rounds)", r->f->table,
			     ecw_entity_pk(op->e), ecw_entity_rk(op->e), MAX_ROUNDS);
}

/* Writes the pending operations (all in one partition). */
static int flush(struct run *r)
{
	struct ecw_batch *b = NULL;
	int err = 0;

	if (r->nops == 0)
		return 0;
	if (r->nops == 1) {
		err = write_single(r, &r->ops[0]);
		goto done;
	}
	if ((err = ecw_job_check_lease(r->ctx)) < 0 || (err = ecw_batch_new(&b, r->f->table)) < 0)
		goto done;
	for (size_t i = 0; i < r->nops && err == 0; i++)
		err = ecw_batch_add(b, r->ops[i].replace ? ECW_BATCH_UPDATE : ECW_BATCH_MERGE, r->ops[i].e,
				    r->ops[i].etag);
	if (err < 0)
		goto done;
	if ((err = ecw_batch_submit(r->ctx->client, b)) == 0) {
		r->written += (long long)r->nops;
		ecw_crash_point("fanout.batch");
		goto done;
	}
	if (err != ECW_ENOTFOUND && err != ECW_EPRECONDITION)
		goto done;
	/* A target vanished or changed since the query, and the transaction
	 * applied nothing: one by one, skipping the gone and re-reading the
	 * changed. */
	ecw_error_clear();
	err = 0;
	for (size_t i = 0; i < r->nops && err == 0; i++)
		err = write_single(r, &r->ops[i]);
done:
	ecw_batch_free(b);
	for (size_t i = 0; i < r->nops; i++)
		op_dispose(&r->ops[i]);
	r->nops = r->bytes = 0;
	return err;
}

/* Steps 2-4: every target brought to match the source as read. */
static int fan_out(struct run *r)
{
	const struct fanout *f = r->f;
	struct ecw_table_query *q = NULL;
	struct ecw_entity *t = NULL;
	int pages = 0, err;
	bool same_table = strcmp(f->source, f->table) == 0;

	struct ecw_query_options qo = {
		.filter = r->filter, .select = r->want.nremoved ? NULL : f->select, .top = 1000};
	if ((err = ecw_table_query_new(&q, r->ctx->client, f->table, &qo)) < 0)
		return err;
	for (;;) {
		struct op op;
		if ((err = ecw_table_query_next(&t, q)) < 0)
			break;
		if (ecw_table_query_pages(q) != pages) {
			pages = ecw_table_query_pages(q);
			ecw_crash_point("fanout.page");
		}
		if (!t)
			break;
		r->targets++;
		/* In a table of its own kind the source may match its own filter:
		 * it is not its own copy. */
		if (same_table && strcmp(ecw_entity_pk(t), r->ctx->pk) == 0 &&
		    strcmp(ecw_entity_rk(t), r->ctx->rk) == 0) {
			ecw_entity_free(t);
			continue;
		}
		err = plan(&op, r, t);
		if (err == 0 && op.e && r->nops &&
		    (strcmp(ecw_entity_pk(r->ops[0].e), ecw_entity_pk(op.e)) != 0 ||
		     r->nops == ECW_BATCH_MAX_OPS || r->bytes + op.bytes > BATCH_BYTE_BUDGET))
			err = flush(r);
		ecw_entity_free(t);
		t = NULL;
		if (err < 0) {
			op_dispose(&op);
			break;
		}
		if (op.e) {
			r->bytes += op.bytes;
			r->ops[r->nops++] = op;
		}
	}
	if (err == 0)
		err = flush(r);
	ecw_table_query_free(q);
	return err;
}

static bool same_version(const struct ecw_entity *a, const struct ecw_entity *b)
{
	if (!a || !b)
		return !a && !b;
	if (ecw_entity_etag(a) && ecw_entity_etag(b))
		return strcmp(ecw_entity_etag(a), ecw_entity_etag(b)) == 0;
	return ecw_entity_equal(a, b);
}

static int read_source(struct ecw_entity **out, const struct fanout *f, struct ecw_job_ctx *ctx)
{
	int err = ecw_table_get(out, ctx->client, f->source, ctx->pk, ctx->rk);

	if (err == ECW_ENOTFOUND) { /* a missing table is ECW_ENOTABLE: an error */
		ecw_error_clear();
		*out = NULL;
		return 0;
	}
	return err;
}

int ecw_fanout_render_filter(struct ecw_buf *out, const struct fanout *f, const struct ecw_entity *src,
			     const char *pk, const char *rk)
{
	struct ecw_entity *keys = NULL;
	int err;

	if (src)
		return ecw_template_render(out, f->filter, src, ECW_TEMPLATE_ODATA);
	if ((err = ecw_entity_new(&keys, pk, rk)) == 0)
		err = ecw_template_render(out, f->filter, keys, ECW_TEMPLATE_ODATA);
	ecw_entity_free(keys);
	return err;
}

int ecw_fanout_run(const void *settings, struct ecw_job_ctx *ctx)
{
	const struct fanout *f = settings;
	struct ecw_entity *src = NULL, *again = NULL;
	struct ecw_buf filter;
	int err = 0;

	ecw_buf_init(&filter, 0);
	if ((err = read_source(&src, f, ctx)) < 0)
		goto done;
	for (int round = 1;; round++) {
		struct run r;

		ecw_crash_point("fanout.read");
		if (!src && !f->clear_on_delete) {
			/* Deleted (or never there) and the copies stay as they are. */
			snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "missing");
			goto done;
		}
		memset(&r, 0, sizeof(r));
		r.f = f;
		r.ctx = ctx;
		ecw_buf_init(&r.scratch, 0);
		ecw_buf_reset(&filter);
		if ((err = ecw_fanout_render_filter(&filter, f, src, ctx->pk, ctx->rk)) == 0 &&
		    (err = ecw_fanout_want(&r.want, f, src, ctx->pk, ctx->rk)) == 0) {
			r.filter = ecw_buf_cstr(&filter);
			err = fan_out(&r);
		}
		run_dispose(&r);
		if (err < 0)
			goto done;
		ecw_crash_point("fanout.targets");
		/* Step 5: if the source changed while we wrote, what we wrote may
		 * be older than what a newer run wrote before us. */
		if ((err = read_source(&again, f, ctx)) < 0)
			goto done;
		ecw_crash_point("fanout.checked");
		if (same_version(src, again)) {
			snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail),
				 "%s%lld targets, %lld written, %lld gone", src ? "" : "cleared: ", r.targets,
				 r.written, r.gone);
			goto done;
		}
		if (round == MAX_ROUNDS) {
			err = ecw_error_set(ECW_ETRANSIENT,
					    "fanout %s -> %s: the source kept changing (%d rounds)",
					    f->source, f->table, MAX_ROUNDS);
			goto done;
		}
		ecw_entity_free(src);
		src = again;
		again = NULL;
	}
done:
	ecw_entity_free(src);
	ecw_entity_free(again);
	ecw_buf_dispose(&filter);
	return err;
}
