/* SPDX-License-Identifier: MIT */
/* blob_ref_audit.c - the blob-ref job type (its ops table, on top of
 * blob_ref.c) and its audit (ecw_audit.h), in two passes:
 *
 *   1. the table: every entity of `source` (its keys and `properties`
 *      only), and for each blob it names in the container a Get Blob
 *      Properties (one request per reference). A blob that does not exist
 *      is a dangling reference, reported as "missing" and never repaired:
 *      only the application knows what the entity should name.
 *   2. the container: every blob under the literal text before the prefix's
 *      first placeholder (and, with --partition, whose first placeholder is
 *      {PartitionKey}, under that partition's part), in name order. Each
 *      name is inverted to the keys whose prefix it lies under
 *      (ecw_blob_ref_prefix_invert: the prefix rule makes that unique);
 *      a name no keys give is not this job's and is passed over. The blobs
 *      of one entity are listed one after the other (their names share its
 *      prefix), so the entity is read once for them (one GET per entity
 *      with blobs). A blob the entity does not name (or whose entity is
 *      gone) and that is older than grace by the listing page's Date is an
 *      orphan. --repair deletes it If-Match the ETag listed, as a run's
 *      step 3 would (a blob re-uploaded since fails it: reported, kept);
 *      with --via-queue, the entity's message is put instead, once per
 *      entity, and the job's run deletes them.
 *
 * An orphan is reported with the container as its table and the blob's
 * name split at its last '/' as its pk and rk (the report prints them
 * joined by '/': the name itself); its source is the entity's keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob_ref_private.h"
#include "ecw_audit.h"
#include "jobs_private.h"

/* ---- pass 1: dangling references ----------------------------------------------------------- */

static int dangling(const struct blob_ref *b, struct ecw_audit_ctx *ctx, const struct ecw_entity *e,
		    const char *endpoint, struct ecw_buf *names)
{
	size_t n = 0;
	int err;

	if ((err = ecw_blob_ref_names(names, &n, b, e, endpoint)) < 0)
		return err;
	for (size_t i = 0; i < n; i++) {
		struct ecw_blob_info *info = NULL;
		if (ecw_audit_pace(ctx))
			return 0;
		err = ecw_blob_props(&info, ctx->client, b->container, ecw_buf_cstr(&names[i]));
		ecw_blob_info_free(info);
		if (err == ECW_EBLOBNOTFOUND || err == ECW_EINVALID) {
			struct ecw_audit_finding f = {
				.kind = ECW_AUDIT_MISSING,
				.table = b->source,
				.pk = ecw_entity_pk(e),
				.rk = ecw_entity_rk(e),
				.source_pk = ecw_entity_pk(e),
				.source_rk = ecw_entity_rk(e),
				.detail =
					"dangling reference: names a blob that does not exist (never repaired)"};
			ecw_error_clear();
			ecw_audit_note(ctx, &f);
		} else if (err < 0) {
			return err; /* a missing container too: nothing more can be judged */
		}
	}
	return 0;
}

static int pass_table(const struct blob_ref *b, struct ecw_audit_ctx *ctx, const char *endpoint,
		      struct ecw_buf *names)
{
	struct ecw_table_query *q = NULL;
	struct ecw_buf select;
	int err;

	ecw_buf_init(&select, 16384);
	err = ecw_buf_adds(&select, "PartitionKey,RowKey");
	for (size_t i = 0; err == 0 && b->props[i]; i++)
		err = ecw_template_select_add(&select, b->props[i]);
	if (err < 0 || (err = ecw_audit_query(&q, ctx, b->source, "PartitionKey", ecw_buf_cstr(&select))) < 0)
		goto done;
	for (;;) {
		struct ecw_entity *e = NULL;
		if ((err = ecw_audit_next(&e, q, ctx)) < 0 || !e)
			break;
		err = dangling(b, ctx, e, endpoint, names);
		ecw_entity_free(e);
		if (err < 0)
			break;
		ecw_audit_checked(ctx);
	}
done:
	ecw_table_query_free(q);
	ecw_buf_dispose(&select);
	return err;
}

/* ---- pass 2: orphans ------------------------------------------------------------------------- */

/* The entity whose blobs are being listed. */
struct group {
	char pk[ECW_KEY_MAX + 1], rk[ECW_KEY_MAX + 1];
	bool open, gone;
	struct ecw_buf *names;
	size_t nnames;
	/* --via-queue: the entity's message, put once for all its orphans */
	bool requeued;
	int requeue_err;
	char why[sizeof(((struct ecw_error *)0)->message)];
};

/* Where the listing starts: the literal text before the first placeholder,
 * and with ctx->partition under a first {PartitionKey}, that partition and
 * the literal text after it up to its '/'. */
static int list_prefix(struct ecw_buf *out, const struct blob_ref *b, const struct ecw_audit_ctx *ctx)
{
	size_t n = ecw_template_nparts(b->prefix), i = 0;
	bool field, plain;
	int err = 0;

	for (; i < n && err == 0; i++) {
		const char *text = ecw_template_part(b->prefix, i, &field, &plain);
		if (field)
			break;
		err = ecw_buf_adds(out, text);
	}
	if (err < 0 || i == n || !ctx->partition ||
	    strcmp(ecw_template_part(b->prefix, i, &field, &plain), "PartitionKey") != 0)
		return err;
	if ((err = ecw_buf_adds(out, ctx->partition)) < 0)
		return err;
	for (i++; i < n; i++) {
		const char *text = ecw_template_part(b->prefix, i, &field, &plain);
		size_t k = strcspn(text, "/");
		if ((err = ecw_buf_add(out, text, k + (text[k] == '/'))) < 0 || text[k] == '/')
			break;
	}
	return err;
}

static int open_group(struct group *g, const struct blob_ref *b, struct ecw_audit_ctx *ctx, const char *pk,
		      const char *rk, const char *endpoint)
{
	struct ecw_entity *e = NULL;
	int err;

	snprintf(g->pk, sizeof(g->pk), "%s", pk);
	snprintf(g->rk, sizeof(g->rk), "%s", rk);
	g->open = true;
	g->requeued = false;
	g->nnames = 0;
	if ((err = ecw_audit_get(&e, ctx, b->source, pk, rk)) < 0)
		return err; /* a missing table: never read as every entity gone */
	g->gone = !e;
	err = ecw_blob_ref_names(g->names, &g->nnames, b, e, endpoint);
	ecw_entity_free(e);
	return err;
}

/* --repair of one orphan: deleted If-Match the ETag listed (gone already
 * counts), or with --via-queue the entity's message put (once). */
static void repair(const struct blob_ref *b, struct ecw_audit_ctx *ctx, struct group *g,
		   const struct ecw_blob_info *it, struct ecw_audit_finding *f, char *why, size_t cap)
{
	int err;

	if (ctx->requeue) {
		if (!g->requeued) {
			struct ecw_audit_finding once = *f;
			ecw_audit_converge(ctx, ecw_blob_ref_run, b, g->pk, g->rk, &once, g->why,
					   sizeof(g->why));
			g->requeued = true;
			g->requeue_err = once.repaired ? 0 : -1;
		}
		f->repaired = g->requeue_err == 0;
		if (!f->repaired) {
			snprintf(why, cap, "%s", g->why);
			f->error = why;
		}
		return;
	}
	ecw_audit_pace(ctx);
	err = ecw_blob_delete(ctx->client, b->container, it->name, it->etag);
	if (err == 0 || err == ECW_EBLOBNOTFOUND) {
		f->repaired = true;
	} else {
		snprintf(why, cap, "%s",
			 err == ECW_EPRECONDITION ? "re-uploaded since the listing: a new blob, left as it is"
						  : ecw_error_last()->message);
		f->error = why;
	}
	ecw_error_clear();
}

static int judge_blob(const struct blob_ref *b, struct ecw_audit_ctx *ctx, struct group *g,
		      const struct ecw_blob_info *it, time_t date)
{
	struct ecw_audit_finding f = {.kind = ECW_AUDIT_ORPHAN, .table = b->container};
	char why[sizeof(((struct ecw_error *)0)->message)];
	char *cut = strrchr(it->name, '/'), *dir;

	if (ecw_blob_ref_named(g->names, g->nnames, it->name) ||
	    ecw_blob_ref_wait_s(date, it->last_modified, b->grace_s) > 0)
		return 0; /* named, or young: the job keeps it too */
	if (!cut || !(dir = strndup(it->name, (size_t)(cut - it->name))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	f.pk = dir;
	f.rk = cut + 1;
	f.source_pk = g->pk;
	f.source_rk = g->rk;
	f.detail = g->gone ? "under the prefix of a missing entity, older than grace"
			   : "named by no property of its entity, older than grace";
	if (ctx->repair)
		repair(b, ctx, g, it, &f, why, sizeof(why));
	ecw_audit_note(ctx, &f);
	free(dir);
	return 0;
}

static int pass_container(const struct blob_ref *b, struct ecw_audit_ctx *ctx, const char *endpoint,
			  struct ecw_buf *names)
{
	struct ecw_buf prefix;
	struct ecw_blob_list_options lo = {0};
	struct ecw_blob_list *l = NULL;
	struct group *g = calloc(1, sizeof(*g));
	char *pk = malloc(ECW_KEY_MAX + 1), *rk = malloc(ECW_KEY_MAX + 1);
	int err, pages = 0;

	ecw_buf_init(&prefix, 4 * ECW_BLOB_NAME_MAX);
	if (!g || !pk || !rk) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	g->names = names;
	if ((err = list_prefix(&prefix, b, ctx)) < 0)
		goto done;
	lo.prefix = ecw_buf_cstr(&prefix);
	if (ecw_audit_pace(ctx) || (err = ecw_blob_list_new(&l, ctx->client, b->container, &lo)) < 0)
		goto done;
	for (;;) {
		struct ecw_blob_info *it = NULL;
		if ((err = ecw_blob_list_next(&it, l)) < 0 || !it)
			break;
		if (ecw_blob_list_pages(l) != pages) {
			pages = ecw_blob_list_pages(l);
			if (ecw_audit_pace(ctx)) { /* before the request for the next page */
				ecw_blob_info_free(it);
				break;
			}
		}
		if (ecw_blob_ref_prefix_invert(pk, rk, ECW_KEY_MAX + 1, b->prefix, it->name) &&
		    ecw_entity_key_check(pk, "PartitionKey") == 0 &&
		    ecw_entity_key_check(rk, "RowKey") == 0 &&
		    (!ctx->partition || strcmp(pk, ctx->partition) == 0)) {
			if (!g->open || strcmp(g->pk, pk) != 0 || strcmp(g->rk, rk) != 0)
				err = open_group(g, b, ctx, pk, rk, endpoint);
			if (err == 0)
				err = judge_blob(b, ctx, g, it,
						 it->service_date ? it->service_date : ecw_blob_list_date(l));
			if (err == 0)
				ecw_audit_checked(ctx);
		}
		if (err == 0)
			ecw_error_clear();
		ecw_blob_info_free(it);
		if (err < 0)
			break;
	}
done:
	ecw_blob_list_free(l);
	ecw_buf_dispose(&prefix);
	free(g);
	free(pk);
	free(rk);
	return err;
}

static int blob_ref_audit(const void *settings, struct ecw_audit_ctx *ctx)
{
	const struct blob_ref *b = settings;
	const char *endpoint = ecw_client_endpoint(ctx->client, ECW_SVC_BLOB);
	struct ecw_buf names[ECW_BLOB_REF_PROPS_MAX];
	int err;

	for (size_t i = 0; i < ECW_BLOB_REF_PROPS_MAX; i++)
		ecw_buf_init(&names[i], ECW_BLOB_REF_VALUE_MAX);
	if ((err = pass_table(b, ctx, endpoint, names)) == 0)
		err = pass_container(b, ctx, endpoint, names);
	for (size_t i = 0; i < ECW_BLOB_REF_PROPS_MAX; i++)
		ecw_buf_dispose(&names[i]);
	return err;
}

static const char *blob_ref_source(const void *settings)
{
	return ((const struct blob_ref *)settings)->source;
}

static const char *blob_ref_container(const void *settings)
{
	return ((const struct blob_ref *)settings)->container;
}

const struct ecw_job_type ecw_job_blob_ref = {
	.name = "blob-ref",
	.parse = ecw_blob_ref_parse,
	/* No prepare: the container is the application's (a typo'd name made
	 * empty would look like every blob was orphaned), and the job writes
	 * no table. */
	.run = ecw_blob_ref_run,
	.free = ecw_blob_ref_free,
	.source_table = blob_ref_source,
	.container = blob_ref_container,
	.audit = blob_ref_audit,
};
