/* SPDX-License-Identifier: MIT */
/* blob_ref.c - the large-entities pattern: an entity of `source` names its
 * blobs (photos, documents) in `properties`, each blob lives in `container`
 * under the entity's `prefix`, and a message for the entity deletes the
 * blobs it no longer names once they are older than `grace`.
 *
 *   1. GET the entity.                      absent: it names nothing; a
 *                                           missing TABLE is ECW_ENOTABLE
 *                                           (blocked), never "absent"
 *   2. list its prefix, every page          a missing container is
 *      (name, ETag, Last-Modified, and      ECW_ENOCONTAINER (blocked): the
 *      the page's Date)                     container is the application's,
 *                                           never created here
 *   3. DELETE, If-Match the listed ETag,    412: re-uploaded since the listing
 *      each listed blob the entity does     (a new blob, young again): list
 *      not name and that is older than      again (from step 1); 404: gone
 *      grace (Last-Modified against the     already
 *      page's Date: the service's clock)
 *   4. blobs still in their grace: the      ECW_ELATER, ctx->later_s the
 *      message comes back when the          youngest's remaining grace: the
 *      youngest is past it                  runtime hides it that long and
 *                                           never poisons it for it
 *
 * Why the grace: an application uploads the new blob BEFORE it writes the
 * entity that names it; between the two, the blob is named by nothing. The
 * grace is the contract: an entity must name a blob within `grace` of its
 * upload, or the blob may be deleted.
 *
 * Nothing outside the prefix is ever deleted: only what the listing of the
 * prefix returns is, and the prefix rule (ecw_blob_ref_prefix_check) makes
 * one entity's prefix never a prefix of another's.
 *
 * Crash safety, step by step (a crash = the process dies right after it):
 *   after 1, 2: nothing was deleted; the redelivered message runs it all
 *            again.
 *   after a delete of step 3: that blob was unnamed and older than grace
 *            when listed, and its ETag unchanged at the delete: deleting it
 *            was what the run was for. The rerun reads the entity and lists
 *            again, finds the blobs left, and deletes those that are still
 *            unnamed and old: converges to the same prefix a run without a
 *            crash leaves. A delete is never repeated on a newer blob: a
 *            re-upload changes the ETag (412).
 *   after 4: nothing more was done; the message comes back and runs again.
 * Duplicates and two workers: each deletes only under If-Match the ETag it
 * listed; the second delete of one blob gets 404 (gone: fine), and a blob
 * re-uploaded between one worker's listing and its delete fails it (412).
 * Racing the application: a blob uploaded after step 1 is younger than grace
 * when listed, so it is never deleted by this run, named or not; a blob the
 * entity names at step 1 is never deleted. What the run cannot see is an
 * entity that comes to name an OLD unnamed blob after step 1: the grace
 * contract above excludes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "blob_ref_private.h"
#include "jobs_private.h"

#define MAX_ROUNDS 5

void ecw_blob_ref_free(void *p)
{
	struct blob_ref *b = p;

	if (!b)
		return;
	free(b->source);
	free(b->container);
	ecw_template_free(b->prefix);
	ecw_strv_free(b->props);
	free(b);
}

/* ---- the prefix rule ------------------------------------------------------------------ */

static bool is_key(const char *name)
{
	return strcmp(name, "PartitionKey") == 0 || strcmp(name, "RowKey") == 0;
}

int ecw_blob_ref_prefix_check(const struct ecw_template *t)
{
	size_t n = ecw_template_nparts(t);
	bool seen_pk = false, seen_rk = false, slash = true, after_field = false, field, plain;
	const char *last = "";
	struct ecw_buf sample;
	int err;

	for (size_t i = 0; i < n; i++) {
		const char *text = ecw_template_part(t, i, &field, &plain);
		if (!field) {
			if (after_field && strchr(text, '/'))
				slash = true;
			last = text;
			continue;
		}
		if (!is_key(text) || !plain)
			return ecw_error_set(
				ECW_EINVALID,
				"prefix: only {PartitionKey} and {RowKey} may be used, without a "
				"format: the prefix is rendered from a message's keys, also once the "
				"entity is gone, and must be the keys' alone");
		if ((strcmp(text, "PartitionKey") == 0 ? seen_pk : seen_rk))
			return ecw_error_set(ECW_EINVALID, "prefix: {%s} is used twice", text);
		if (!slash)
			return ecw_error_set(
				ECW_EINVALID,
				"prefix: {PartitionKey} and {RowKey} must be separated by a literal "
				"'/' (keys hold no '/', so it ends the first: two entities never "
				"share a prefix)");
		*(strcmp(text, "PartitionKey") == 0 ? &seen_pk : &seen_rk) = true;
		slash = false;
		after_field = true;
		last = "";
	}
	if (!seen_pk || !seen_rk)
		return ecw_error_set(ECW_EINVALID,
				     "prefix: must hold both {PartitionKey} and {RowKey}: entities that "
				     "differ in the other key would share a prefix");
	if (!*last || last[strlen(last) - 1] != '/')
		return ecw_error_set(ECW_EINVALID,
				     "prefix: must end in a literal '/' (else one entity's prefix starts "
				     "another's, and a deletion could reach its blobs)");
	ecw_buf_init(&sample, 0);
	err = ecw_blob_ref_prefix_render(&sample, t, "k", "k");
	ecw_buf_dispose(&sample);
	if (err < 0)
		return ecw_error_set(ECW_EINVALID,
				     "prefix: its literal text makes no valid blob name (no '\\', control "
				     "character, empty segment or segment ending in '.')");
	return 0;
}

int ecw_blob_ref_prefix_render(struct ecw_buf *out, const struct ecw_template *t, const char *pk,
			       const char *rk)
{
	size_t n = ecw_template_nparts(t);
	bool field, plain;
	int err = 0;

	ecw_buf_reset(out);
	for (size_t i = 0; i < n && err == 0; i++) {
		const char *text = ecw_template_part(t, i, &field, &plain);
		err = ecw_buf_adds(out, !field ? text : strcmp(text, "PartitionKey") == 0 ? pk : rk);
	}
	if (err < 0)
		return err;
	/* The prefix without its last '/' must be a blob name: no empty
	 * segment (an empty key), none ending in '.', no '\\' or control
	 * character, at most 1,024 characters. */
	out->ptr[out->len - 1] = '\0';
	err = ecw_blob_name_check(out->ptr);
	out->ptr[out->len - 1] = '/';
	if (err < 0)
		return ecw_error_set(ECW_EINVALID,
				     "the blob prefix of keys ('%.60s', '%.60s') is refused: %s", pk, rk,
				     ecw_error_last()->message);
	return 0;
}

/* Walks the parts along name: literal text must match as it is; a key
 * runs to the '/' that the rule puts after it (less the literal text before
 * that '/'), and holds none itself. */
bool ecw_blob_ref_prefix_invert(char *pk, char *rk, size_t cap, const struct ecw_template *t,
				const char *name)
{
	size_t n = ecw_template_nparts(t);
	const char *s = name;
	bool field, plain;

	for (size_t i = 0; i < n; i++) {
		const char *text = ecw_template_part(t, i, &field, &plain);
		if (!field) {
			size_t len = strlen(text);
			if (strncmp(s, text, len) != 0)
				return false;
			s += len;
			continue;
		}
		/* The key runs to the next '/' of the name, less the literal
		 * text before the first '/' of what follows it (the rule
		 * puts a '/' there). */
		struct ecw_buf head;
		ecw_buf_init(&head, 0);
		for (size_t j = i + 1; j < n; j++) {
			bool f, p;
			const char *lit = ecw_template_part(t, j, &f, &p);
			size_t k = strcspn(lit, "/");
			if (ecw_buf_add(&head, lit, k) < 0) {
				ecw_buf_dispose(&head);
				return false;
			}
			if (lit[k] == '/')
				break;
		}
		const char *slash = strchr(s, '/');
		size_t hl = head.len, kl;
		bool ok = slash && (size_t)(slash - s) >= hl &&
			  memcmp(slash - hl, head.len ? head.ptr : "", hl) == 0;
		ecw_buf_dispose(&head);
		if (!ok || (kl = (size_t)(slash - s) - hl) >= cap)
			return false;
		char *dst = strcmp(text, "PartitionKey") == 0 ? pk : rk;
		memcpy(dst, s, kl);
		dst[kl] = '\0';
		s += kl;
	}
	return true;
}

/* ---- what a property names ------------------------------------------------------------- */

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

int ecw_blob_ref_name_of(struct ecw_buf *out, const char *value, size_t len, const char *endpoint,
			 const char *container)
{
	size_t el = endpoint ? strlen(endpoint) : 0, cl = strlen(container), i;
	int err;

	ecw_buf_reset(out);
	if (len == 0 || memchr(value, '\0', len) || len > ECW_BLOB_REF_VALUE_MAX)
		return 0; /* empty, or no blob's name nor URL */
	if (!((len >= 7 && strncasecmp(value, "http://", 7) == 0) ||
	      (len >= 8 && strncasecmp(value, "https://", 8) == 0))) {
		if ((err = ecw_buf_add(out, value, len)) < 0)
			return err;
		return 1;
	}
	/* A URL: this account's blob endpoint, then /container/, exactly. */
	if (!el || len <= el + cl + 2 || strncasecmp(value, endpoint, el) != 0 || value[el] != '/' ||
	    memcmp(value + el + 1, container, cl) != 0 || value[el + 1 + cl] != '/')
		return 0;
	for (i = el + cl + 2; i < len && value[i] != '?' && value[i] != '#'; i++) {
		char c = value[i];
		if (c == '%') {
			int hi = i + 2 < len ? hexval(value[i + 1]) : -1,
			    lo = hi >= 0 ? hexval(value[i + 2]) : -1;
			if (lo < 0 || (hi == 0 && lo == 0)) {
				ecw_buf_reset(out);
				return 0;
			}
			c = (char)(hi * 16 + lo);
			i += 2;
		}
		if ((err = ecw_buf_addc(out, c)) < 0)
			return err;
	}
	if (out->len == 0)
		return 0;
	return 1;
}

int ecw_blob_ref_names(struct ecw_buf *names, size_t *n, const struct blob_ref *b, const struct ecw_entity *e,
		       const char *endpoint)
{
	*n = 0;
	for (size_t i = 0; e && b->props[i] && *n < ECW_BLOB_REF_PROPS_MAX; i++) {
		const struct ecw_prop *p = ecw_entity_get(e, b->props[i]);
		int rc;
		if (!p || p->type != ECW_EDM_STRING)
			continue; /* absent, or not a string: names nothing */
		if ((rc = ecw_blob_ref_name_of(&names[*n], p->v.s, p->len, endpoint, b->container)) < 0)
			return rc;
		if (rc == 1)
			(*n)++;
	}
	return 0;
}

int64_t ecw_blob_ref_wait_s(time_t date, time_t lm, int64_t grace_s)
{
	int64_t age;

	if (date == 0)
		return grace_s + 1;
	age = (int64_t)date - (int64_t)lm;
	if (age >= grace_s + 1)
		return 0;
	return age < 0 ? grace_s + 1 : grace_s + 1 - age;
}

/* ---- settings ------------------------------------------------------------------------------- */

static bool prop_name_valid(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9') || strlen(s) > 255)
		return false;
	for (; *s; s++)
		if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

static int parse_props(struct blob_ref *b, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	const struct ecw_node *at = ecw_node_get(job, "properties");
	bool present = false;
	size_t n = 0;

	if (ecw_node_string_list(&b->props, &present, job, "properties", errs) < 0)
		return -1;
	if (!present || !b->props || !b->props[0]) {
		ecw_node_error(errs, present ? at : job,
			       "properties: a list of 1 to %d property names is required",
			       ECW_BLOB_REF_PROPS_MAX);
		return -1;
	}
	for (; b->props[n]; n++) {
		const char *p = b->props[n];
		if (!prop_name_valid(p) || is_key(p) || strcmp(p, "Timestamp") == 0) {
			ecw_node_error(
				errs, at,
				"properties: item %zu is not a property that can name a blob (letters, "
				"digits and '_', not a key or Timestamp)",
				n + 1);
			return -1;
		}
		for (size_t j = 0; j < n; j++)
			if (strcmp(b->props[j], p) == 0) {
				ecw_node_error(errs, at, "properties: %s is listed twice", p);
				return -1;
			}
	}
	if (n > ECW_BLOB_REF_PROPS_MAX) {
		ecw_node_error(errs, at, "properties: at most %d", ECW_BLOB_REF_PROPS_MAX);
		return -1;
	}
	return 0;
}

int ecw_blob_ref_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type",   "then",       "source", "container",
					      "prefix", "properties", "grace",  NULL};
	struct blob_ref *b = calloc(1, sizeof(*b));
	int64_t grace_ms = 0;
	int bad = 0;

	*out = NULL;
	if (!b)
		return -1;
	bad |= ecw_node_check_keys(job, allowed, "blob-ref job", errs) > 0;
	bad |= ecw_job_setting_table(&b->source, job, "source", true, errs) < 0;
	if (ecw_node_string(&b->container, job, "container", true, errs) < 0) {
		bad = 1;
	} else if (b->container && ecw_blob_container_check(b->container) < 0) {
		/* Not quoted: it may hold an expanded ${VAR}. */
		ecw_node_error(errs, ecw_node_get(job, "container"),
			       "container: invalid container name: 3-63 lowercase letters, digits and single "
			       "dashes, starting and ending with a letter or digit");
		bad = 1;
	}
	if (ecw_job_setting_template(&b->prefix, job, "prefix", true, errs) < 0) {
		bad = 1;
	} else if (b->prefix && ecw_blob_ref_prefix_check(b->prefix) < 0) {
		ecw_node_error(errs, ecw_node_get(job, "prefix"), "%s", ecw_error_last()->message);
		bad = 1;
	}
	bad |= parse_props(b, job, errs) < 0;
	if (ecw_node_duration(&grace_ms, job, "grace", 1000, (int64_t)ECW_BLOB_REF_GRACE_MAX_S * 1000, true,
			      errs) < 0) {
		bad = 1;
	} else if (grace_ms % 1000 != 0) {
		ecw_node_error(errs, ecw_node_get(job, "grace"),
			       "grace: a whole number of seconds (the service's times have seconds)");
		bad = 1;
	}
	b->grace_s = grace_ms / 1000;
	ecw_error_clear();
	if (bad) {
		ecw_blob_ref_free(b);
		return -1;
	}
	*out = b;
	return 0;
}

/* ---- the run -------------------------------------------------------------------------------- */

struct sweep {
	size_t deleted, young, changed;
	int64_t wait_s; /* the longest a young blob must still wait */
};

bool ecw_blob_ref_named(const struct ecw_buf *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ecw_buf_cstr(&names[i]), name) == 0)
			return true;
	return false;
}

/* Steps 2 and 3 for one round: lists the prefix and deletes what may go. */
static int sweep(struct sweep *sw, const struct blob_ref *b, struct ecw_job_ctx *ctx, const char *prefix,
		 const struct ecw_buf *names, size_t nnames)
{
	struct ecw_blob_list_options lo = {.prefix = prefix};
	struct ecw_blob_list *l = NULL;
	int err, pages = 0;

	if ((err = ecw_blob_list_new(&l, ctx->client, b->container, &lo)) < 0)
		return err;
	for (;;) {
		struct ecw_blob_info *it = NULL;
		if ((err = ecw_blob_list_next(&it, l)) < 0 || !it)
			break;
		if (ecw_blob_list_pages(l) != pages) {
			pages = ecw_blob_list_pages(l);
			ecw_crash_point("blob-ref.listed");
		}
		int64_t wait =
			ecw_blob_ref_wait_s(it->service_date ? it->service_date : ecw_blob_list_date(l),
					    it->last_modified, b->grace_s);
		if (strncmp(it->name, prefix, strlen(prefix)) != 0 ||
		    ecw_blob_ref_named(names, nnames, it->name)) {
			; /* named (or, were the service to list more, not ours): kept */
		} else if (wait > 0) {
			sw->young++;
			if (wait > sw->wait_s)
				sw->wait_s = wait;
		} else if ((err = ecw_job_check_lease(ctx)) == 0) {
			err = ecw_blob_delete(ctx->client, b->container, it->name, it->etag);
			if (err == 0) {
				sw->deleted++;
				ecw_crash_point("blob-ref.deleted");
			} else if (err == ECW_EPRECONDITION) {
				sw->changed++; /* re-uploaded since the listing: list again */
				err = 0;
				ecw_error_clear();
			} else if (err == ECW_EBLOBNOTFOUND) {
				err = 0; /* another run deleted it */
				ecw_error_clear();
			}
		}
		ecw_blob_info_free(it);
		if (err < 0)
			break;
	}
	ecw_blob_list_free(l);
	return err;
}

int ecw_blob_ref_run(const void *settings, struct ecw_job_ctx *ctx)
{
	const struct blob_ref *b = settings;
	const char *endpoint = ecw_client_endpoint(ctx->client, ECW_SVC_BLOB);
	struct ecw_buf prefix, names[ECW_BLOB_REF_PROPS_MAX];
	struct sweep sw = {0};
	size_t deleted = 0;
	bool gone = false;
	int err;

	ecw_buf_init(&prefix, 0);
	for (size_t i = 0; i < ECW_BLOB_REF_PROPS_MAX; i++)
		ecw_buf_init(&names[i], ECW_BLOB_REF_VALUE_MAX);
	if ((err = ecw_blob_ref_prefix_render(&prefix, b->prefix, ctx->pk, ctx->rk)) < 0)
		goto done; /* permanent: no run can make these keys' prefix */
	for (int round = 0; round < MAX_ROUNDS; round++) {
		struct ecw_entity *e = NULL;
		size_t nnames = 0;

		err = ecw_table_get(&e, ctx->client, b->source, ctx->pk, ctx->rk);
		ecw_crash_point("blob-ref.read");
		if (err < 0 && err != ECW_ENOTFOUND)
			goto done; /* a missing table too: blocked, never "gone" */
		gone = err == ECW_ENOTFOUND;
		ecw_error_clear();
		err = ecw_blob_ref_names(names, &nnames, b, e, endpoint);
		ecw_entity_free(e);
		sw = (struct sweep){0};
		if (err == 0)
			err = sweep(&sw, b, ctx, ecw_buf_cstr(&prefix), names, nnames);
		deleted += sw.deleted;
		if (err < 0)
			goto done;
		if (sw.changed == 0)
			break;
	}
	if (sw.changed) {
		err = ecw_error_set(ECW_ETRANSIENT, "blob-ref %s: blobs kept being re-uploaded (%d rounds)",
				    ctx->job, MAX_ROUNDS);
	} else if (sw.young) {
		ctx->later_s =
			(int)(sw.wait_s > ECW_BLOB_REF_GRACE_MAX_S ? ECW_BLOB_REF_GRACE_MAX_S : sw.wait_s);
		snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "%zu deleted, %zu in grace",
			 deleted, sw.young);
		err = ecw_error_set(
			ECW_ELATER,
			"blob-ref %s: %zu unnamed blob(s) under the prefix are younger than grace: "
			"back in %d s",
			ctx->job, sw.young, ctx->later_s);
	} else {
		snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "%s%zu deleted",
			 gone ? "gone, " : "", deleted);
	}
done:
	ecw_buf_dispose(&prefix);
	for (size_t i = 0; i < ECW_BLOB_REF_PROPS_MAX; i++)
		ecw_buf_dispose(&names[i]);
	return err;
}
