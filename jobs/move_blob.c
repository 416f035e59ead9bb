/* SPDX-License-Identifier: MIT */
/* move_blob.c - the move between a table and blobs (issue 36, item 2): the
 * eventually consistent transactions pattern with an archive in Blob
 * storage, as jobs/move.c does it between two tables.
 *
 *   archive-to-blob:   {type: move, from: Employees,
 *                       to_blob: {container: employee-archive, name: "{PartitionKey}/{RowKey}.json"}}
 *   restore-from-blob: {type: move, from_blob: {container: employee-archive,
 *                       name: "{PartitionKey}/{RowKey}.json"}, to: Employees}
 *
 * The blob holds ecw_entity_to_json of the entity: the Table service's own
 * JSON, keys included, "@odata.type" wherever JSON alone would lose the type
 * (Int64, Double, DateTime, Guid, Binary); no ETag and no Timestamp, so one
 * version of an entity always makes the same bytes. Content type
 * application/json; metadata ecw_source_table, ecw_source_etag,
 * ecw_partition_key and ecw_row_key, the keys as encodeURIComponent writes
 * them (metadata values are printable ASCII).
 *
 * The name. The template uses {PartitionKey} and {RowKey}, each once,
 * unformatted, and nothing else: a restore renders it from the message's
 * keys before anything is read, and a name that leaves a key out (or reads
 * another property) could give two entities one blob, where an archive's
 * If-Match overwrite would lose one. The literal text between the two keys
 * holds a '/', which no key holds: so the name tells where the first key
 * ends, and two different pairs of keys never share a blob
 * ("{PartitionKey}{RowKey}" would give a/bc and ab/c one name). Each key
 * goes in with '%' as %25, a last '.' as %2E, and the empty key as %00 (see
 * name_key): whatever a key holds, its part never ends in '.' and is never
 * empty, so a name is valid for every key as soon as its literal text is
 * (check-config renders it with a plain key and checks it with
 * ecw_blob_name_check). The one thing no template can rule out is length:
 * a name over 1,024 characters (long keys) is a permanent error naming the
 * blob, nothing written. The escape is undone exactly (name_keys), which is
 * how an audit lists a container back into keys.
 *
 * archive (to_blob):
 *   1. GET the source (its ETag E).        absent: done ("already-moved" when
 *                                          the blob is there, else "missing");
 *                                          a missing TABLE is blocked, never
 *                                          "moved"
 *   2. Put the blob If-None-Match "*"      409 (a blob is there): read its
 *                                          properties (ETag B), GET the source
 *                                          again (another ETag, or gone: start
 *                                          over) and put If-Match B (412 or
 *                                          404: start over)
 *   3. DELETE the source If-Match E        412: start over; 404: done
 * restore (from_blob):
 *   1. GET the blob (its ETag B).          absent: done (detail as above)
 *   2. insert its entity into `to`         409: read the target (ETag T), read
 *                                          the blob's properties again (not B,
 *                                          or gone: start over), update
 *                                          If-Match T (404, 409, 412: start
 *                                          over)
 *   3. DELETE the blob If-Match B          412: start over; 404: done
 *
 * Crash safety, step by step (a crash = the process dies right after it):
 *   after 1: nothing was written; the redelivered message runs it all again.
 *   after 2: the entity is in both places, the copy equal to the source as
 *            read. The rerun reads the source again and, finding the copy
 *            there, replaces it only through the careful path (same source
 *            ETag, If-Match the copy's), then deletes: converges. It is
 *            never in neither place: the source is deleted only after the
 *            copy is written, and only in the version copied (If-Match).
 *   after 3: the entity is only in the target; the message comes back and
 *            step 1 finds no source: done ("already-moved").
 * Duplicates and stale runs: a blind put would lose data (run A reads v1,
 * run B archives v2 and deletes the source, A overwrites the blob with v1
 * and v2 is gone). Here A's put If-None-Match fails, A finds the source gone
 * (or newer) on its second read and starts over; an If-Match put fails when
 * the blob changed after its properties were read. A restore likewise never
 * puts a stale blob over what the application wrote since: its update is
 * If-Match the target it read while the blob was still that version.
 * Deletes race under If-Match: at most one succeeds.
 *
 * A missing container is a configuration problem, as a missing table is:
 * the run fails with ECW_ENOTABLE naming the container (the `blocked`
 * outcome: messages held, never poisoned, nothing deleted). The worker
 * creates what a move writes (to_blob's container, `to`'s table, with
 * create_missing), never what it reads.
 *
 * Groups (messages of one partition run together: the sources read by one
 * query and deleted by one transaction, or the restored entities inserted by
 * one) are in jobs/move_blob_group.c, with their crash-safety argument; it
 * takes the steps below from here (move_blob_private.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_audit.h"
#include "ecw_job.h"
#include "jobs_private.h"
#include "move_blob_private.h"
#include "move_private.h"

#define MAX_ROUNDS 5
#define RESTART 1

/* ---- the name ---------------------------------------------------------------------------------- */

/* One key as it goes into a name: '%' as %25, a last '.' as %2E, the empty
 * key as %00 (keys never hold NUL). Never empty, never ending in '.', never
 * holding '/' (keys do not): a name's segment that ends in a key is valid. */
static int name_key(struct ecw_buf *out, const char *key)
{
	size_t n = strlen(key);
	int err = 0;

	if (n == 0)
		return ecw_buf_adds(out, "%00");
	for (size_t i = 0; i < n && err == 0; i++) {
		if (key[i] == '%')
			err = ecw_buf_adds(out, "%25");
		else if (key[i] == '.' && i == n - 1)
			err = ecw_buf_adds(out, "%2E");
		else
			err = ecw_buf_addc(out, key[i]);
	}
	return err;
}

/* name_key undone: false when s is no key's form (so no name of this job). */
static bool name_unkey(struct ecw_buf *out, const char *s, size_t n)
{
	if (n == 3 && memcmp(s, "%00", 3) == 0)
		return true;
	if (n == 0 || s[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '%' && i + 3 <= n && memcmp(s + i, "%25", 3) == 0)
			i += 2;
		else if (c == '%' && i + 3 == n && memcmp(s + i, "%2E", 3) == 0)
			c = '.', i += 2;
		else if (c == '%')
			return false;
		if (ecw_buf_addc(out, c) < 0)
			return false;
	}
	return true;
}

static int name_render(struct ecw_buf *out, const struct ecw_move_blob_name *t, const char *pk,
		       const char *rk)
{
	int err;

	ecw_buf_reset(out);
	if ((err = ecw_buf_adds(out, t->lit[0])) < 0 || (err = name_key(out, t->pk_first ? pk : rk)) < 0 ||
	    (err = ecw_buf_adds(out, t->lit[1])) < 0 || (err = name_key(out, t->pk_first ? rk : pk)) < 0)
		return err;
	return ecw_buf_adds(out, t->lit[2]);
}

/* The keys a name was rendered from, when it is one of t's: false for a
 * name t cannot have rendered (another job's blob, or none of ours). */
static bool name_keys(struct ecw_buf *pk, struct ecw_buf *rk, const struct ecw_move_blob_name *t,
		      const char *name)
{
	size_t len = strlen(name), l0 = strlen(t->lit[0]), l1 = strlen(t->lit[1]), l2 = strlen(t->lit[2]);
	size_t before = (size_t)(strchr(t->lit[1], '/') - t->lit[1]); /* lit[1]'s text before its '/' */
	struct ecw_buf *first = t->pk_first ? pk : rk, *second = t->pk_first ? rk : pk;
	const char *m, *slash;
	size_t mlen, e1;

	ecw_buf_reset(pk);
	ecw_buf_reset(rk);
	if (len < l0 + l1 + l2 || memcmp(name, t->lit[0], l0) != 0 ||
	    memcmp(name + len - l2, t->lit[2], l2) != 0)
		return false;
	m = name + l0;
	mlen = len - l0 - l2;
	/* The first key holds no '/': the first one is lit[1]'s. */
	if (!(slash = memchr(m, '/', mlen)) || (size_t)(slash - m) < before)
		return false;
	e1 = (size_t)(slash - m) - before;
	if (e1 + l1 > mlen || memcmp(m + e1, t->lit[1], l1) != 0 || memchr(m + e1 + l1, '/', mlen - e1 - l1))
		return false;
	if (!name_unkey(first, m, e1) || !name_unkey(second, m + e1 + l1, mlen - e1 - l1))
		return false;
	/* Keys the service would refuse are no keys of ours. */
	if (ecw_entity_key_check(ecw_buf_cstr(pk), "PartitionKey") < 0 ||
	    ecw_entity_key_check(ecw_buf_cstr(rk), "RowKey") < 0) {
		ecw_error_clear();
		return false;
	}
	return true;
}

static void name_dispose(struct ecw_move_blob_name *t)
{
	for (int i = 0; i < 3; i++)
		free(t->lit[i]);
}

/* Splits text into its literals around {PartitionKey} and {RowKey} ({{ and
 * }} as braces), and checks the rule above. Reports at node `at`. */
static int name_parse(struct ecw_move_blob_name *t, const char *text, const char *key,
		      const struct ecw_node *at, struct ecw_node_errors *errs)
{
	struct ecw_template *compiled = NULL;
	struct ecw_buf lit, probe;
	bool seen_pk = false, seen_rk = false;
	int n = 0, rc = -1;

	ecw_buf_init(&lit, 0);
	ecw_buf_init(&probe, ECW_MOVE_BLOB_NAME_MAX);
	char what[32];

	/* The template's own syntax first, with its own messages. */
	snprintf(what, sizeof(what), "%s.name", key);
	if (ecw_template_compile(&compiled, text, what) < 0) {
		ecw_node_error(errs, at, "%s", ecw_error_last()->message);
		goto done;
	}
	for (const char *p = text; *p; p++) {
		if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
			if (ecw_buf_addc(&lit, *p++) < 0)
				goto nomem;
			continue;
		}
		if (*p != '{') {
			if (ecw_buf_addc(&lit, *p) < 0)
				goto nomem;
			continue;
		}
		const char *end = strchr(p, '}'); /* there: the template compiled */
		if (!end) {
			ecw_node_error(errs, at, "%s.name: a '{' without its '}'", key);
			goto done;
		}
		size_t len = (size_t)(end - p - 1);
		bool is_pk = len == 12 && memcmp(p + 1, "PartitionKey", 12) == 0;
		bool is_rk = len == 6 && memcmp(p + 1, "RowKey", 6) == 0;
		if (!is_pk && !is_rk) {
			/* Named by its column: the text may come from a ${VAR}. */
			ecw_node_error(
				errs, at,
				"%s.name: the placeholder at column %zu is not {PartitionKey} or {RowKey}: "
				"a blob name may use only those two, unformatted (the blob is found from "
				"a message's keys, before anything is read, and holds one entity)",
				key, (size_t)(p - text) + 1);
			goto done;
		}
		if ((is_pk && seen_pk) || (is_rk && seen_rk)) {
			ecw_node_error(errs, at, "%s.name: {%s} twice: each key goes into the name once", key,
				       is_pk ? "PartitionKey" : "RowKey");
			goto done;
		}
		if (n == 0)
			t->pk_first = is_pk;
		seen_pk |= is_pk;
		seen_rk |= is_rk;
		if (!(t->lit[n++] = ecw_buf_take(&lit)) && !(t->lit[n - 1] = strdup("")))
			goto nomem;
		p = end;
	}
	if (!seen_pk || !seen_rk) {
		ecw_node_error(errs, at,
			       "%s.name: must use {PartitionKey} and {RowKey}, each once: without {%s} two "
			       "entities would share one blob",
			       key, seen_pk ? "RowKey" : "PartitionKey");
		goto done;
	}
	if (!(t->lit[2] = ecw_buf_take(&lit)) && !(t->lit[2] = strdup("")))
		goto nomem;
	if (!strchr(t->lit[1], '/')) {
		ecw_node_error(
			errs, at,
			"%s.name: the text between {PartitionKey} and {RowKey} must hold a '/' (no key "
			"holds one), else two pairs of keys can make one name: a/bc and ab/c both "
			"give abc",
			key);
		goto done;
	}
	/* Each key renders non-empty, never ending in '.' and without '/', so
	 * a plain key shows whether the literal text makes valid names. */
	if (name_render(&probe, t, "k", "k") < 0 || ecw_blob_name_check(ecw_buf_cstr(&probe)) < 0) {
		ecw_error_clear();
		ecw_node_error(
			errs, at,
			"%s.name: its text makes invalid blob names: no backslash or control "
			"character, no empty segment (a leading '/' or '//'), no segment ending in '.' "
			"(so no '/' or '.' at the end), at most 1,024 characters",
			key);
		goto done;
	}
	rc = 0;
	goto done;
nomem:
	ecw_node_error(errs, at, "%s.name: out of memory", key);
done:
	ecw_template_free(compiled);
	ecw_buf_dispose(&lit);
	ecw_buf_dispose(&probe);
	return rc;
}

/* ---- settings ---------------------------------------------------------------------------------- */

bool ecw_move_blob_wanted(const struct ecw_node *job)
{
	return ecw_node_get(job, "from_blob") || ecw_node_get(job, "to_blob");
}

void ecw_move_blob_free(struct ecw_move_blob *b)
{
	if (!b)
		return;
	free(b->table);
	free(b->container);
	name_dispose(&b->name);
	free(b);
}

static int parse_side(struct ecw_move_blob *b, const struct ecw_node *job, const char *key,
		      struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"container", "name", NULL};
	const struct ecw_node *side = ecw_node_get(job, key);
	char *text = NULL;
	int bad = 0;

	if (side->kind != ECW_NODE_MAP) {
		ecw_node_error(errs, side, "%s: a map with container and name", key);
		return -1;
	}
	bad |= ecw_node_check_keys(side, allowed, key, errs) > 0;
	if (ecw_node_string(&b->container, side, "container", true, errs) < 0)
		bad = 1;
	else if (ecw_blob_container_check(b->container) < 0) {
		ecw_error_clear();
		ecw_node_error(errs, ecw_node_get(side, "container"),
			       "%s.container: invalid container name: 3-63 lowercase letters, digits and "
			       "single dashes, starting and ending with a letter or digit",
			       key);
		bad = 1;
	}
	if (ecw_node_string(&text, side, "name", true, errs) < 0)
		bad = 1;
	else if (name_parse(&b->name, text, key, ecw_node_get(side, "name"), errs) < 0)
		bad = 1;
	free(text);
	return bad ? -1 : 0;
}

int ecw_move_blob_parse(struct ecw_move_blob **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type", "then", "from", "to", "from_blob", "to_blob", NULL};
	const struct ecw_node *from_blob = ecw_node_get(job, "from_blob"),
			      *to_blob = ecw_node_get(job, "to_blob");
	struct ecw_move_blob *b = calloc(1, sizeof(*b));
	int bad = 0;

	*out = NULL;
	if (!b)
		return -1;
	bad |= ecw_node_check_keys(job, allowed, "move job", errs) > 0;
	if (from_blob && to_blob) {
		ecw_node_error(errs, to_blob,
			       "to_blob: a move has one side in a table: from_blob or to_blob, "
			       "not both");
		bad = 1;
	} else if (from_blob && ecw_node_get(job, "from")) {
		ecw_node_error(errs, from_blob,
			       "from_blob: a move has one source: from or from_blob, not both");
		bad = 1;
	} else if (to_blob && ecw_node_get(job, "to")) {
		ecw_node_error(errs, to_blob, "to_blob: a move has one target: to or to_blob, not both");
		bad = 1;
	} else {
		b->archive = to_blob != NULL;
		bad |= ecw_job_setting_table(&b->table, job, b->archive ? "from" : "to", true, errs) < 0;
		bad |= parse_side(b, job, b->archive ? "to_blob" : "from_blob", errs) < 0;
	}
	if (bad) {
		ecw_move_blob_free(b);
		return -1;
	}
	*out = b;
	return 0;
}

int ecw_move_blob_prepare(const struct ecw_move_blob *b, struct ecw_client *c)
{
	return b->archive ? ecw_blob_container_create(NULL, c, b->container)
			  : ecw_table_create(NULL, c, b->table);
}

const char *ecw_move_blob_source_table(const struct ecw_move_blob *b)
{
	return b->archive ? b->table : NULL;
}

const char *ecw_move_blob_source_container(const struct ecw_move_blob *b)
{
	return b->archive ? NULL : b->container;
}

const char *ecw_move_blob_target_table(const struct ecw_move_blob *b)
{
	return b->archive ? NULL : b->table;
}

/* ---- shared steps ------------------------------------------------------------------------------ */

int ecw_move_blob_no_container(const struct ecw_move_blob *b, int err)
{
	if (err != ECW_ENOCONTAINER)
		return err;
	err = ecw_error_set(ECW_ENOTABLE,
			    "container '%s' does not exist: correct the name, or create it (the worker "
			    "creates only a container a move writes, with create_missing)",
			    b->container);
	ecw_error_set_table(b->container, strlen(b->container));
	return err;
}

int ecw_move_blob_name_of(struct ecw_buf *out, const struct ecw_move_blob *b, const char *pk, const char *rk)
{
	int err;

	if ((err = name_render(out, &b->name, pk, rk)) < 0)
		return err;
	if (ecw_blob_name_check(ecw_buf_cstr(out)) < 0) {
		char why[sizeof(ecw_error_last()->message)];
		snprintf(why, sizeof(why), "%s", ecw_error_last()->message);
		return ecw_error_set(ECW_EINVALID,
				     "move: this message's keys make no valid blob name in %s: %s",
				     b->container, why);
	}
	return 0;
}

int ecw_move_blob_source_missing(const struct ecw_move_blob *b, struct ecw_job_ctx *ctx, const char *name)
{
	const char *detail = "missing";
	int err;

	if (b->archive) {
		struct ecw_blob_info *info = NULL;
		err = ecw_blob_props(&info, ctx->client, b->container, name);
		ecw_blob_info_free(info);
		if (err == 0)
			detail = "already-moved";
		else if (err != ECW_EBLOBNOTFOUND)
			return ecw_move_blob_no_container(b, err);
	} else {
		struct ecw_entity *t = NULL;
		err = ecw_table_get(&t, ctx->client, b->table, ctx->pk, ctx->rk);
		ecw_entity_free(t);
		if (err == 0)
			detail = "already-moved";
		else if (err != ECW_ENOTFOUND)
			return err; /* a missing table: blocked */
	}
	snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "%s", detail);
	ecw_error_clear();
	return 0;
}

/* ---- archive: the table to a blob -------------------------------------------------------------- */

int ecw_move_blob_archive_keys(struct ecw_buf *keys, const struct ecw_entity *src)
{
	int err;

	if ((err = ecw_escape_pct(keys, ecw_entity_pk(src), strlen(ecw_entity_pk(src)))) < 0 ||
	    (err = ecw_buf_addc(keys, '\0')) < 0 ||
	    (err = ecw_escape_pct(keys, ecw_entity_rk(src), strlen(ecw_entity_rk(src)))) < 0)
		return err;
	return ecw_buf_addc(keys, '\0');
}

void ecw_move_blob_archive_options(struct ecw_blob_put_options *o, struct ecw_blob_meta meta[4],
				   const struct ecw_move_blob *b, const struct ecw_entity *src,
				   const char *keys, const char *if_match)
{
	meta[0] = (struct ecw_blob_meta){"ecw_source_table", b->table};
	meta[1] = (struct ecw_blob_meta){"ecw_source_etag", ecw_entity_etag(src)};
	meta[2] = (struct ecw_blob_meta){"ecw_partition_key", keys};
	meta[3] = (struct ecw_blob_meta){"ecw_row_key", keys + strlen(keys) + 1};
	*o = (struct ecw_blob_put_options){.content_type = "application/json",
					   .if_none_match = if_match ? NULL : "*",
					   .if_match = if_match,
					   .meta = meta,
					   .n_meta = 4};
}

int ecw_move_blob_put(const struct ecw_move_blob *b, struct ecw_client *c, const char *name,
		      const struct ecw_entity *src, const char *if_match, struct ecw_buf *json)
{
	struct ecw_blob_meta meta[4];
	struct ecw_blob_put_options o;
	struct ecw_buf keys;
	int err;

	ecw_buf_init(&keys, 0);
	ecw_buf_reset(json);
	if ((err = ecw_entity_to_json(json, src)) == 0 &&
	    (err = ecw_move_blob_archive_keys(&keys, src)) == 0) {
		ecw_move_blob_archive_options(&o, meta, b, src, keys.ptr, if_match);
		err = ecw_blob_put(NULL, c, b->container, name, json->ptr, json->len, &o);
	}
	ecw_buf_dispose(&keys);
	return err;
}

/* Step 2: the blob written only into an empty place, or over the blob as
 * it was while the source was still the version read (the careful path). */
static int write_archive(const struct ecw_move_blob *b, struct ecw_job_ctx *ctx, const char *name,
			 const struct ecw_entity *src, struct ecw_buf *json)
{
	struct ecw_blob_info *info = NULL;
	struct ecw_entity *again = NULL;
	int err;

	if ((err = ecw_job_check_lease(ctx)) < 0)
		goto done;
	err = ecw_move_blob_put(b, ctx->client, name, src, NULL, json);
	if (err != ECW_ECONFLICT)
		goto done;
	ecw_error_clear();
	if ((err = ecw_blob_props(&info, ctx->client, b->container, name)) == ECW_EBLOBNOTFOUND) {
		err = RESTART; /* deleted meanwhile (a restore): the insert again */
		goto done;
	}
	if (err < 0)
		goto done;
	err = ecw_table_get(&again, ctx->client, b->table, ctx->pk, ctx->rk);
	if (err == 0 && strcmp(ecw_entity_etag(again), ecw_entity_etag(src)) != 0)
		err = RESTART; /* changed since the first read */
	else if (err == ECW_ENOTFOUND)
		err = RESTART; /* someone moved it meanwhile */
	if (err == 0 && (err = ecw_job_check_lease(ctx)) == 0)
		err = ecw_move_blob_put(b, ctx->client, name, src, info->etag, json);
	if (err == ECW_EPRECONDITION || err == ECW_EBLOBNOTFOUND || err == ECW_ECONFLICT)
		err = RESTART; /* the blob changed under us (Azurite: 412 on a blob gone) */
done:
	ecw_blob_info_free(info);
	ecw_entity_free(again);
	return ecw_move_blob_no_container(b, err);
}

static int archive(const struct ecw_move_blob *b, struct ecw_job_ctx *ctx, const char *name)
{
	struct ecw_buf json;
	int err = 0;

	ecw_buf_init(&json, ECW_MOVE_BLOB_MAX);
	for (int round = 0; round < MAX_ROUNDS; round++) {
		struct ecw_entity *src = NULL;

		err = ecw_table_get(&src, ctx->client, b->table, ctx->pk, ctx->rk);
		ecw_crash_point("move.to_blob.read");
		if (err == ECW_ENOTFOUND) {
			err = ecw_move_blob_source_missing(b, ctx, name);
			goto done;
		}
		if (err < 0)
			goto done; /* a missing table too: blocked, not "moved" */
		if ((err = write_archive(b, ctx, name, src, &json)) == RESTART) {
			ecw_entity_free(src);
			ecw_error_clear();
			continue;
		}
		if (err < 0) {
			ecw_entity_free(src);
			goto done;
		}
		ecw_crash_point("move.to_blob.written");
		if ((err = ecw_job_check_lease(ctx)) == 0)
			err = ecw_table_delete(ctx->client, b->table, ctx->pk, ctx->rk, ecw_entity_etag(src));
		ecw_entity_free(src);
		if (err == 0)
			ecw_crash_point("move.to_blob.deleted");
		if (err == ECW_ENOTFOUND) {
			ecw_error_clear(); /* another run finished the move after our read */
			err = 0;
		}
		if (err != ECW_EPRECONDITION)
			goto done;
		ecw_error_clear(); /* changed since we read it: archive the newer version */
	}
	err = ecw_error_set(ECW_ETRANSIENT, "move %s -> container %s: the source kept changing (%d rounds)",
			    b->table, b->container, MAX_ROUNDS);
done:
	ecw_buf_dispose(&json);
	return err;
}

/* ---- restore: a blob to the table -------------------------------------------------------------- */

/* The entity a blob holds: the Table JSON, with the message's keys. */
static int parse_archive(struct ecw_entity **out, const struct ecw_move_blob *b,
			 const struct ecw_job_ctx *ctx, const char *name, const struct ecw_buf *body)
{
	char why[sizeof(ecw_error_last()->message)];

	*out = NULL;
	if (ecw_entity_from_json(out, body->ptr ? body->ptr : "", body->len) < 0) {
		snprintf(why, sizeof(why), "%s", ecw_error_last()->message);
		return ecw_error_set(
			ECW_EINVALID,
			"blob '%.200s' in container %s is no table entity in JSON (%s): not restored", name,
			b->container, why);
	}
	if (strcmp(ecw_entity_pk(*out), ctx->pk) != 0 || strcmp(ecw_entity_rk(*out), ctx->rk) != 0) {
		ecw_entity_free(*out);
		*out = NULL;
		return ecw_error_set(ECW_EINVALID,
				     "blob '%.200s' in container %s holds an entity of other keys than the "
				     "message's: not restored",
				     name, b->container);
	}
	return 0;
}

int ecw_move_blob_read(struct ecw_entity **out, struct ecw_blob_info **info, struct ecw_buf *body,
		       const struct ecw_move_blob *b, const struct ecw_job_ctx *ctx, const char *name)
{
	int err;

	*out = NULL;
	*info = NULL;
	err = ecw_blob_get(body, info, ctx->client, b->container, name, ECW_MOVE_BLOB_MAX);
	if (err == ECW_ETOOLARGE)
		err = ecw_error_set(ECW_ETOOLARGE,
				    "blob '%.200s' in container %s is over %zu MiB, more than any entity's "
				    "JSON: not restored",
				    name, b->container, ECW_MOVE_BLOB_MAX >> 20);
	if (err == 0)
		err = parse_archive(out, b, ctx, name, body);
	if (err < 0) {
		ecw_blob_info_free(*info);
		*info = NULL;
	}
	return err;
}

/* Step 2: the entity inserted, or written over the target as it was while
 * the blob was still the version read. */
static int write_restored(const struct ecw_move_blob *b, struct ecw_job_ctx *ctx, const char *name,
			  const struct ecw_entity *e, const char *blob_etag)
{
	struct ecw_entity *target = NULL;
	struct ecw_blob_info *info = NULL;
	int err;

	if ((err = ecw_job_check_lease(ctx)) < 0)
		return err;
	err = ecw_table_write(NULL, ctx->client, b->table, e, ECW_WRITE_INSERT, NULL);
	if (err != ECW_ECONFLICT)
		return err;
	ecw_error_clear();
	err = ecw_table_get(&target, ctx->client, b->table, ctx->pk, ctx->rk);
	if (err < 0 && err != ECW_ENOTFOUND)
		return err;
	err = ecw_blob_props(&info, ctx->client, b->container, name);
	if (err == 0 && strcmp(info->etag, blob_etag) != 0)
		err = RESTART; /* the blob changed since the first read */
	else if (err == ECW_EBLOBNOTFOUND)
		err = RESTART; /* someone restored it meanwhile */
	if (err == 0 && (err = ecw_job_check_lease(ctx)) == 0)
		err = target ? ecw_table_write(NULL, ctx->client, b->table, e, ECW_WRITE_UPDATE,
					       ecw_entity_etag(target))
			     : ecw_table_write(NULL, ctx->client, b->table, e, ECW_WRITE_INSERT, NULL);
	if (err == ECW_ECONFLICT || err == ECW_EPRECONDITION || (target && err == ECW_ENOTFOUND))
		err = RESTART; /* the target changed under us */
	ecw_entity_free(target);
	ecw_blob_info_free(info);
	return ecw_move_blob_no_container(b, err);
}

static int restore(const struct ecw_move_blob *b, struct ecw_job_ctx *ctx, const char *name)
{
	struct ecw_buf body;
	int err = 0;

	ecw_buf_init(&body, ECW_MOVE_BLOB_MAX);
	for (int round = 0; round < MAX_ROUNDS; round++) {
		struct ecw_blob_info *info = NULL;
		struct ecw_entity *e = NULL;

		err = ecw_move_blob_read(&e, &info, &body, b, ctx, name);
		ecw_crash_point("move.from_blob.read");
		if (err == ECW_EBLOBNOTFOUND) {
			err = ecw_move_blob_source_missing(b, ctx, name);
			goto done;
		}
		if (err == 0)
			err = write_restored(b, ctx, name, e, info->etag);
		ecw_entity_free(e);
		if (err == RESTART) {
			ecw_blob_info_free(info);
			ecw_error_clear();
			continue;
		}
		if (err < 0) {
			ecw_blob_info_free(info);
			err = ecw_move_blob_no_container(b, err);
			goto done;
		}
		ecw_crash_point("move.from_blob.written");
		if ((err = ecw_job_check_lease(ctx)) == 0)
			err = ecw_blob_delete(ctx->client, b->container, name, info->etag);
		ecw_blob_info_free(info);
		if (err == 0)
			ecw_crash_point("move.from_blob.deleted");
		if (err == ECW_EBLOBNOTFOUND) {
			ecw_error_clear(); /* another run finished the restore after our read */
			err = 0;
		}
		if (err != ECW_EPRECONDITION) {
			err = ecw_move_blob_no_container(b, err);
			goto done;
		}
		ecw_error_clear(); /* the blob changed since we read it: restore the newer one */
	}
	err = ecw_error_set(ECW_ETRANSIENT, "move container %s -> %s: the blob kept changing (%d rounds)",
			    b->container, b->table, MAX_ROUNDS);
done:
	ecw_buf_dispose(&body);
	return err;
}

int ecw_move_blob_run(const void *settings, struct ecw_job_ctx *ctx)
{
	const struct ecw_move_blob *b = settings;
	struct ecw_buf name;
	int err;

	ecw_buf_init(&name, ECW_MOVE_BLOB_NAME_MAX);
	if ((err = ecw_move_blob_name_of(&name, b, ctx->pk, ctx->rk)) == 0)
		err = b->archive ? archive(b, ctx, ecw_buf_cstr(&name))
				 : restore(b, ctx, ecw_buf_cstr(&name));
	ecw_buf_dispose(&name);
	return err;
}

/* ---- audit (ecw_audit.h) -----------------------------------------------------------------------
 *
 * An entity is drift for a blob move only when it is in both places: in the
 * source alone it waits for its message, in the target alone it was moved.
 * An archive streams its table and reads the blob each entity's keys name
 * (one request per entity); a restore lists its container, takes each name
 * back to its keys (name_keys: another job's blob, or any name the template
 * cannot have made, is not this job's and is passed over), and reads the
 * entity (one request per blob, and one more for the blob's content when
 * the entity is there). ecw_audit_move_pair judges the pair: identical is a
 * move stopped half way (STALE), different a CONFLICT (a blob that holds no
 * entity too). Repair runs the job for the keys (ecw_audit_converge), as a
 * redelivered message would: its step 2 finds the copy in place and equal,
 * writes it over itself under its conditions, and step 3 deletes the source
 * If-Match the version read. A conflict is never repaired. */

#define AUDIT_STALE_DETAIL "in the table and a blob, identical: unfinished move"
#define AUDIT_CONFLICT_DETAIL "in the table and a blob, different"

/* The entity the blob at name holds, NULL when there is none. A blob that
 * holds no entity, or one of other keys, is *foreign. */
static int audit_blob_entity(struct ecw_entity **out, bool *foreign, const struct ecw_move_blob *b,
			     struct ecw_audit_ctx *ctx, const char *name, const char *pk, const char *rk)
{
	struct ecw_buf body;
	int err;

	*out = NULL;
	*foreign = false;
	ecw_buf_init(&body, ECW_MOVE_BLOB_MAX);
	ecw_audit_pace(ctx);
	err = ecw_blob_get(&body, NULL, ctx->client, b->container, name, ECW_MOVE_BLOB_MAX);
	if (err == ECW_EBLOBNOTFOUND) {
		err = 0;
	} else if (err == ECW_ETOOLARGE ||
		   (err == 0 && ecw_entity_from_json(out, body.ptr ? body.ptr : "", body.len) < 0)) {
		*foreign = true;
		err = 0;
	} else if (err == 0 &&
		   (strcmp(ecw_entity_pk(*out), pk) != 0 || strcmp(ecw_entity_rk(*out), rk) != 0)) {
		*foreign = true;
	}
	if (err == 0)
		ecw_error_clear();
	ecw_buf_dispose(&body);
	return ecw_move_blob_no_container(b, err);
}

/* One pair found: the entity in the move's source and in its target (the
 * blob's side NULL and foreign: a blob there that is no copy). */
static void audit_pair(const struct ecw_move_blob *b, struct ecw_audit_ctx *ctx, const char *pk,
		       const char *rk, const struct ecw_entity *source, const struct ecw_entity *target,
		       bool foreign)
{
	struct ecw_audit_finding f = {
		.table = b->table, .pk = pk, .rk = rk, .source_pk = pk, .source_rk = rk};
	char why[sizeof(ecw_error_last()->message)];

	f.kind = foreign ? ECW_AUDIT_CONFLICT : ecw_audit_move_pair(source, target);
	if (f.kind == ECW_AUDIT_OK)
		return;
	f.detail = f.kind == ECW_AUDIT_STALE ? AUDIT_STALE_DETAIL : AUDIT_CONFLICT_DETAIL;
	if (f.kind == ECW_AUDIT_STALE && ctx->repair)
		ecw_audit_converge(ctx, ecw_move_blob_run, b, pk, rk, &f, why, sizeof(why));
	ecw_audit_note(ctx, &f);
}

static int audit_archive(const struct ecw_move_blob *b, struct ecw_audit_ctx *ctx)
{
	struct ecw_table_query *q = NULL;
	struct ecw_buf name;
	int err;

	ecw_buf_init(&name, ECW_MOVE_BLOB_NAME_MAX);
	if ((err = ecw_audit_query(&q, ctx, b->table, "PartitionKey", NULL)) < 0)
		goto done;
	for (;;) {
		struct ecw_entity *src = NULL, *copy = NULL;
		bool foreign = false;

		if ((err = ecw_audit_next(&src, q, ctx)) < 0 || !src)
			break;
		if (ecw_move_blob_name_of(&name, b, ecw_entity_pk(src), ecw_entity_rk(src)) < 0)
			ecw_error_clear(); /* the move would poison its message: nothing to compare */
		else if ((err = audit_blob_entity(&copy, &foreign, b, ctx, ecw_buf_cstr(&name),
						  ecw_entity_pk(src), ecw_entity_rk(src))) == 0 &&
			 (copy || foreign))
			audit_pair(b, ctx, ecw_entity_pk(src), ecw_entity_rk(src), src, copy, foreign);
		if (err == 0)
			ecw_audit_checked(ctx);
		ecw_entity_free(src);
		ecw_entity_free(copy);
		if (err < 0)
			break;
	}
done:
	ecw_table_query_free(q);
	ecw_buf_dispose(&name);
	return err;
}

/* Every blob of the container whose name starts with prefix and that the
 * template can have made, in name order, with its keys: each(arg, name, pk,
 * rk) until it returns non-zero (returned) or an error. A missing container
 * is ECW_ENOTABLE naming it. */
static int walk_names(const struct ecw_move_blob *b, struct ecw_client *c, const char *prefix,
		      int (*each)(void *arg, const char *name, const char *pk, const char *rk), void *arg)
{
	struct ecw_blob_list_options lo = {.prefix = prefix};
	struct ecw_blob_list *l = NULL;
	struct ecw_buf pk, rk;
	int err;

	ecw_buf_init(&pk, ECW_KEY_MAX * 2);
	ecw_buf_init(&rk, ECW_KEY_MAX * 2);
	if ((err = ecw_blob_list_new(&l, c, b->container, &lo)) < 0)
		goto done;
	for (;;) {
		struct ecw_blob_info *info = NULL;

		if ((err = ecw_blob_list_next(&info, l)) < 0 || !info)
			break;
		if (name_keys(&pk, &rk, &b->name, info->name))
			err = each(arg, info->name, ecw_buf_cstr(&pk), ecw_buf_cstr(&rk));
		ecw_blob_info_free(info);
		if (err != 0)
			break;
	}
	if (err == ECW_ENOCONTAINER)
		err = ecw_move_blob_no_container(b, err);
done:
	ecw_blob_list_free(l);
	ecw_buf_dispose(&pk);
	ecw_buf_dispose(&rk);
	return err;
}

struct keys_walk {
	int (*each)(void *arg, const char *pk, const char *rk);
	void *arg;
};

static int keys_each(void *arg, const char *name, const char *pk, const char *rk)
{
	const struct keys_walk *w = arg;

	(void)name;
	return w->each(w->arg, pk, rk);
}

int ecw_move_blob_source_keys(const struct ecw_move_blob *b, struct ecw_client *c,
			      int (*each)(void *arg, const char *pk, const char *rk), void *arg)
{
	struct keys_walk w = {each, arg};

	if (b->archive)
		return ecw_error_set(ECW_EINVALID, "move %s -> container %s: its source is a table", b->table,
				     b->container);
	return walk_names(b, c, b->name.lit[0], keys_each, &w);
}

struct audit_walk {
	struct ecw_audit_ctx *ctx;
	const struct ecw_move_blob *b;
};

/* A restore's audit, for one blob of keys (pk, rk). */
static int audit_restore_one(void *arg, const char *name, const char *pk, const char *rk)
{
	struct ecw_audit_ctx *ctx = ((struct audit_walk *)arg)->ctx;
	const struct ecw_move_blob *b = ((struct audit_walk *)arg)->b;
	struct ecw_entity *target = NULL, *copy = NULL;
	bool foreign = false;
	int err;

	if (ecw_audit_pace(ctx))
		return 1; /* stopped */
	if (ctx->partition && strcmp(pk, ctx->partition) != 0)
		return 0;
	if ((err = ecw_audit_get(&target, ctx, b->table, pk, rk)) == 0 && target &&
	    (err = audit_blob_entity(&copy, &foreign, b, ctx, name, pk, rk)) == 0 && (copy || foreign))
		audit_pair(b, ctx, pk, rk, copy, target, foreign);
	if (err == 0)
		ecw_audit_checked(ctx);
	ecw_entity_free(target);
	ecw_entity_free(copy);
	return err;
}

static int audit_restore(const struct ecw_move_blob *b, struct ecw_audit_ctx *ctx)
{
	struct audit_walk arg = {ctx, b};
	struct ecw_buf prefix;
	int err;

	ecw_buf_init(&prefix, ECW_MOVE_BLOB_NAME_MAX);
	/* One partition: its names start with lit[0], the key and lit[1] when
	 * the PartitionKey comes first; else every name is read. */
	if ((err = ecw_buf_adds(&prefix, b->name.lit[0])) == 0 && ctx->partition && b->name.pk_first &&
	    (err = name_key(&prefix, ctx->partition)) == 0)
		err = ecw_buf_adds(&prefix, b->name.lit[1]);
	if (err == 0 &&
	    (err = walk_names(b, ctx->client, ecw_buf_cstr(&prefix), audit_restore_one, &arg)) > 0)
		err = 0; /* stopped */
	ecw_buf_dispose(&prefix);
	return err;
}

int ecw_move_blob_audit(const struct ecw_move_blob *b, struct ecw_audit_ctx *ctx)
{
	return b->archive ? audit_archive(b, ctx) : audit_restore(b, ctx);
}
