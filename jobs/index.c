/* SPDX-License-Identifier: MIT */
/* index.c - a secondary index: one index entry per source entity, in another
 * table (or another partition of the source's own table), at keys rendered
 * from the source by templates, holding the source's keys and copies of the
 * chosen properties (exact EDM types). Readers look a value up in the index
 * and follow SourcePartitionKey/SourceRowKey to the source.
 *
 * What the job keeps in `table`:
 *   entry   at (partition_key(S), row_key(S)): SourcePartitionKey and
 *           SourceRowKey (String), then the copied properties (`properties:`
 *           listed ones the source has; [] none; omitted all, where a source
 *           property named SourcePartitionKey/SourceRowKey is a permanent
 *           error). An entry is valid only if its source exists and computes
 *           to exactly it.
 *   ref     the back-reference, one per indexed source, at
 *           ("~ref~" + job + "~" + h[0..1], h) with h the hex SHA-256 of
 *           "source-pk NUL source-rk": fixed length and key-safe whatever the
 *           source keys hold (up to 1 KiB each), unambiguous (keys cannot hold
 *           NUL), per job (two jobs may share an index table), spread over
 *           256 partitions (no hot partition of refs). The same layout as
 *           index_list.c's refs. It holds Job, SourcePartitionKey and
 *           SourceRowKey, checked on every read (a collision or a foreign
 *           entity there is a permanent error, never silently shared);
 *           IndexPartitionKey/IndexRowKey, the entry the last finished round
 *           left (its current location); and Pending<i>PartitionKey/RowKey,
 *           locations a round registered before writing there.
 *   The set L of a ref (current + pending) names every place an entry of its
 *   source may be: a round writes an entry only at a location it registered
 *   first, and a location leaves L only in a commit, after the round that
 *   commits deleted that entry. That is how the old entry is found without
 *   the message saying where it is.
 * Partitions starting with "~ref~" are reserved: templates can produce any
 * key character, so no character alone could keep refs apart; a
 * partition_key that starts with it is a configuration error, a rendered one
 * a permanent error. Renaming a job orphans its refs: rebuild the index.
 *
 * A run repeats rounds (at most MAX_ROUNDS, then a transient error) while a
 * round says "start over"; `step` names in quotes are the crash points.
 *   1. "index.read"        GET the source (ETag s) and compute the entry E
 *                          and its location T, or none when the source is
 *                          gone. A missing template property (or a Binary
 *                          one), a result the service refuses as a key, a
 *                          reserved one, or (same table) the source's own
 *                          keys: permanent error, nothing written.
 *   2. "index.registered"  GET the ref (ETag r). When L lacks T, or a
 *                          location this run wrote in an earlier round, add
 *                          them as pending (insert; or replace If-Match r).
 *   3. "index.written"     make the entity at T equal E: insert when absent,
 *                          replace (If-Match) when it is this source's entry
 *                          and differs, take it over (If-Match) when it is
 *                          another source's that no longer computes to T.
 *                          When that source still does, the key is taken:
 *                          ECW_ECONFLICT, transient (two sources swapping
 *                          values pass through this; a lasting duplicate is
 *                          retried until max_dequeue_count, then poisoned).
 *                          Never overwrites an entity that is no entry:
 *                          a permanent error (the registration stays; it
 *                          is bookkeeping, and cleaning skips other data).
 *   4. "index.verified"    GET the source again: another ETag (or existence)
 *                          than in step 1 means E may be stale: start over.
 *   5. "index.cleaned"     for every location of L but T: delete the entry
 *                          there if it is this source's (If-Match the ETag
 *                          just read; 412 reads again; never another's).
 *   6. "index.committed"   If-Match r: replace the ref by {current T, nothing
 *                          pending}, or delete it when there is no T. Written
 *                          even when unchanged (see concurrency). A 412, 409
 *                          or 404 on the ref in step 2 or 6: start over.
 * No source and no ref: nothing to do ("missing"). The log's detail says
 * "indexed", "removed", "missing" or "not-a-source", plus " rounds=N" when a
 * run had to start over.
 *
 * Crash safety (the process dies right after the step; the message was not
 * deleted, so it comes back and a fresh run starts at step 1):
 *   after 1: nothing was written.
 *   after 2: L lists T, maybe with no entry there yet; the old entry is in
 *            place and listed. The rerun finds T in L and goes on; if the
 *            source changed meanwhile, T is one more location to clean
 *            (deleting an absent entry is a no-op).
 *   after 3: the new entry and the old one both exist, both in L (a reader
 *            may see both for a moment: readers of an eventually consistent
 *            index check the source). The rerun finds E in place (no write),
 *            deletes the old one, commits. Changed meanwhile: both are in L.
 *   after 4: as after 3 (a read changes nothing).
 *   after 5: only E exists; L still names the old locations. The rerun finds
 *            nothing of this source there and commits.
 *   after 6: done; the rerun changes nothing but the ref's ETag.
 *   Source gone: step 3 is skipped, step 5 deletes what L names, step 6
 *   deletes the ref; after any step the ref still names what is left.
 *
 * Concurrency (several workers, duplicates, stale and reordered messages; a
 * message carries only keys, so a stale message is just a rerun on the
 * current source, and what can be stale is a round that read the source
 * before it changed):
 *   - A successful round's window, from its GET of the ref to its commit,
 *     holds no other ref write (its If-Match would fail), and every
 *     successful round writes the ref at least once (the commit). So two
 *     successful windows never overlap: successful rounds run one after
 *     another, each seeing the L the previous one committed.
 *   - A round that fails (start over, or a transient error retried later)
 *     is followed by another round of its message that has to commit for
 *     the message to be deleted. So every write of every round precedes the
 *     window of the last successful round C (or lies in C itself).
 *   - C's verify is inside its window, after every earlier commit, including
 *     the one for the last change's message; C passed it, so C computed T
 *     from the final source. Every entry written earlier was registered in L
 *     before being written and is still there unless a commit removed it
 *     after deleting it. So C deletes every stale entry of its source and
 *     leaves exactly E at T, its ref naming T: what a full recomputation from
 *     the source gives.
 *   - Step 4 is what stops a stale round from finishing after a newer one
 *     (it would delete the new entry and commit the old); the commit written
 *     even when unchanged is what makes a delete-round that lost the race to
 *     a re-created source fail its If-Match; remembering this run's writes
 *     is what cleans a stale entry written after a newer round cleaned that
 *     location. test_job_index_races__stale_round_finishes_last stages each of
 *     these (ECW_TEST_PAUSE_AT), and fails without the corresponding rule.
 *   - Deletes touch only this source's entries, with If-Match: two sources
 *     that swap values never delete each other's entry.
 *   A run that ends in an error after writing (a later round's permanent
 *   error, or MAX_ROUNDS lost races) registers the places it wrote in its
 *   reference again before it returns (hand_over_written), so the next run
 *   of its message finds them.
 *   What is not covered, honestly: a round that writes an entry inside
 *   another round's window after that round cleaned the location, and whose
 *   run then ends with neither a commit nor a hand-over (the process killed
 *   right after that write, after a pause as long as another worker's whole
 *   round; or its lease lost with the write in flight), leaves an entry no
 *   ref names: the next run of its message does not know that place, and no
 *   other run looks there. Closing it would need the entry's write to be
 *   conditional on the ref, and the two are in different partitions (no
 *   entity group transaction holds both); a mark left at every cleaned place
 *   that a late write cannot pass would need cleaning up in turn, which
 *   opens the same window again. The lease check and renewal make it need
 *   several unlikely events at once, yet a worker SIGKILLed every 300 ms
 *   meets it now and then (test_chaos__small: once in 29 runs). Such an
 *   entry stays until an audit repairs it: index_audit.c finds it as an
 *   orphan, and --repair registers it in its source's ref, then runs the
 *   job, which deletes it; a scheduled audit with `repair: true` does that
 *   unattended, and test_chaos ends with it, as production does.
 *
 * In the source's own table (`table` = `source`), a message naming an entry
 * or a ref (`ecworker backfill` enqueues those too) is skipped ("not-a-source"),
 * and an entry that would replace its own source is a permanent error.
 *
 * Its audit (`ecworker audit`) is in index_audit.c, the file on top, which
 * also holds the type descriptor (ecw_job_index); index_private.h is what
 * the two files share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_clock.h"
#include "ecw_job.h"
#include "index_private.h"
#include "jobs_private.h"

#define MAX_ROUNDS 8
#define MAX_TRIES 6    /* conditional writes of one entry before giving up */
#define MAX_PENDING 64 /* pending locations a reference may list (2 properties each) */
#define RESTART 1      /* internal: start a new round */
void ecw_index_free(void *p)
{
	struct index *ix = p;

	if (!ix)
		return;
	free(ix->source);
	free(ix->table);
	ecw_template_free(ix->pk);
	ecw_template_free(ix->rk);
	ecw_strv_free(ix->props);
	free(ix);
}

/* ---- settings ---------------------------------------------------------------------- */

static bool reserved_prop(const char *name)
{
	static const char *const names[] = {"PartitionKey", "RowKey", "Timestamp", P_SRC_PK, P_SRC_RK, NULL};

	for (size_t i = 0; names[i]; i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

int ecw_index_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type",          "then",    "source",     "table",
					      "partition_key", "row_key", "properties", NULL};
	struct index *ix = calloc(1, sizeof(*ix));
	bool present = false;
	int bad = 0;

	*out = NULL;
	if (!ix)
		return -1;
	bad |= ecw_node_check_keys(job, allowed, "index job", errs) > 0;
	bad |= ecw_job_setting_table(&ix->source, job, "source", true, errs) < 0;
	bad |= ecw_job_setting_table(&ix->table, job, "table", true, errs) < 0;
	bad |= ecw_job_setting_template(&ix->pk, job, "partition_key", true, errs) < 0;
	bad |= ecw_job_setting_template(&ix->rk, job, "row_key", true, errs) < 0;
	if (ecw_node_string_list(&ix->props, &present, job, "properties", errs) < 0) {
		bad = 1;
	} else if (present) {
		const struct ecw_node *list = ecw_node_get(job, "properties");
		for (size_t i = 0; ix->props[i]; i++) {
			if (ix->props[i][0] == '\0' || reserved_prop(ix->props[i])) {
				ecw_node_error(
					errs, list->kind == ECW_NODE_SEQ ? list->items[i] : list,
					"properties: item %zu cannot be copied (empty, or the entry's own "
					"keys, SourcePartitionKey or SourceRowKey)",
					i + 1);
				bad = 1;
			}
		}
	} else {
		ecw_strv_free(ix->props);
		ix->props = NULL;
	}
	if (ix->pk && strncmp(ecw_template_text(ix->pk), REF_PREFIX, REF_PREFIX_LEN) == 0) {
		ecw_node_error(errs, ecw_node_get(job, "partition_key"),
			       "partition_key: partitions starting with '" REF_PREFIX
			       "' are reserved for the index's back-references");
		bad = 1;
	}
	if (bad) {
		ecw_index_free(ix);
		return -1;
	}
	ix->same_table = strcmp(ix->source, ix->table) == 0;
	*out = ix;
	return 0;
}

int ecw_index_prepare(const void *settings, struct ecw_client *c)
{
	const struct index *ix = settings;

	if (ix->same_table)
		return 0; /* the entries live in the source table: only read, never made */
	return ecw_table_create(NULL, c, ix->table);
}

const char *ecw_index_source_table(const void *settings)
{
	return ((const struct index *)settings)->source;
}

const char *ecw_index_target_table(const void *settings)
{
	return ((const struct index *)settings)->table;
}

/* ---- locations ----------------------------------------------------------------------- */

void ecw_index_locs_dispose(struct locs *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].pk);
		free(s->v[i].rk);
	}
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static bool locs_has(const struct locs *s, const char *pk, const char *rk)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].pk, pk) == 0 && strcmp(s->v[i].rk, rk) == 0)
			return true;
	return false;
}

/* Adds (pk, rk) unless present. */
static int locs_add(struct locs *s, const char *pk, const char *rk)
{
	struct loc *v;

	if (locs_has(s, pk, rk))
		return 0;
	if (!(v = realloc(s->v, (s->n + 1) * sizeof(*v))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	s->v = v;
	v[s->n].pk = strdup(pk);
	v[s->n].rk = strdup(rk);
	if (!v[s->n].pk || !v[s->n].rk) {
		free(v[s->n].pk);
		free(v[s->n].rk);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	s->n++;
	return 0;
}

/* ---- entities ------------------------------------------------------------------------- */

const char *ecw_index_str_prop(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);

	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

/* An entry this job type wrote (for some source). */
bool ecw_index_is_entry(const struct ecw_entity *e)
{
	return ecw_index_str_prop(e, P_SRC_PK) && ecw_index_str_prop(e, P_SRC_RK);
}

bool ecw_index_owned_by(const struct ecw_entity *e, const char *spk, const char *srk)
{
	const char *pk = ecw_index_str_prop(e, P_SRC_PK), *rk = ecw_index_str_prop(e, P_SRC_RK);

	return pk && rk && strcmp(pk, spk) == 0 && strcmp(rk, srk) == 0;
}

/* The index keys src computes to, checked against the key rules. */
static int compute_keys(struct ecw_buf *pk, struct ecw_buf *rk, const struct index *ix,
			const struct ecw_entity *src)
{
	int err;

	if ((err = ecw_template_render(pk, ix->pk, src, ECW_TEMPLATE_PLAIN)) < 0 ||
	    (err = ecw_template_render(rk, ix->rk, src, ECW_TEMPLATE_PLAIN)) < 0)
		return err;
	if (ecw_entity_key_check(ecw_buf_cstr(pk), "partition_key result") < 0 ||
	    ecw_entity_key_check(ecw_buf_cstr(rk), "row_key result") < 0) {
		char why[256];
		snprintf(why, sizeof(why), "%.250s", ecw_error_last()->message);
		/* The log line has the source's keys: the reason comes first. */
		return ecw_error_set(ECW_EINVALID, "%s (partition_key '%s', row_key '%s')", why,
				     ecw_template_text(ix->pk), ecw_template_text(ix->rk));
	}
	if (strncmp(ecw_buf_cstr(pk), REF_PREFIX, REF_PREFIX_LEN) == 0)
		return ecw_error_set(ECW_EINVALID,
				     "partition_key result starts with '" REF_PREFIX
				     "', which is reserved for back-references: '%s'",
				     ecw_buf_cstr(pk));
	if (ix->same_table && strcmp(ecw_buf_cstr(pk), ecw_entity_pk(src)) == 0 &&
	    strcmp(ecw_buf_cstr(rk), ecw_entity_rk(src)) == 0)
		return ecw_error_set(ECW_EINVALID,
				     "the index entry would replace its own source (partition_key "
				     "'%s', row_key '%s' in the source's table)",
				     ecw_template_text(ix->pk), ecw_template_text(ix->rk));
	return 0;
}

/* The entry src should have: its keys, the source's keys, the copies. */
int ecw_index_compute_entry(struct ecw_entity **out, const struct index *ix, const struct ecw_entity *src)
{
	struct ecw_entity *e = NULL;
	struct ecw_buf pk, rk;
	int err;

	*out = NULL;
	ecw_buf_init(&pk, 0);
	ecw_buf_init(&rk, 0);
	if ((err = compute_keys(&pk, &rk, ix, src)) < 0 ||
	    (err = ecw_entity_new(&e, ecw_buf_cstr(&pk), ecw_buf_cstr(&rk))) < 0)
		goto done;
	if (ix->props) {
		for (size_t i = 0; ix->props[i] && err == 0; i++) {
			const struct ecw_prop *p = ecw_entity_get(src, ix->props[i]);
			if (p) /* copied when the source has it */
				err = ecw_entity_set_prop(e, p);
		}
	} else {
		for (size_t i = 0; i < ecw_entity_count(src) && err == 0; i++) {
			const struct ecw_prop *p = ecw_entity_at(src, i);
			if (reserved_prop(p->name))
				err = ecw_error_set(
					ECW_EINVALID,
					"the source has a property '%s', which the index entry uses "
					"itself: list `properties:` to leave it out",
					p->name);
			else
				err = ecw_entity_set_prop(e, p);
		}
	}
	if (err == 0 &&
	    (err = ecw_entity_set_string(e, P_SRC_PK, ecw_entity_pk(src), strlen(ecw_entity_pk(src)))) == 0)
		err = ecw_entity_set_string(e, P_SRC_RK, ecw_entity_rk(src), strlen(ecw_entity_rk(src)));
done:
	ecw_buf_dispose(&pk);
	ecw_buf_dispose(&rk);
	if (err < 0) {
		ecw_entity_free(e);
		return err;
	}
	*out = e;
	return 0;
}

/* ---- the back-reference ---------------------------------------------------------------- */

int ecw_index_ref_keys(struct ref_keys *out, const char *job, const char *spk, const char *srk)
{
	int err;

	if ((err = ecw_job_source_key_hash(out->rk, spk, srk)) < 0)
		return err;
	if ((size_t)snprintf(out->pk, sizeof(out->pk), REF_PREFIX "%s~%.2s", job, out->rk) >= sizeof(out->pk))
		return ecw_error_set(ECW_EINVALID, "job name '%s' is too long for a back-reference key", job);
	return 0;
}

bool ecw_index_is_ref_pk(const char *pk)
{
	return strncmp(pk, REF_PREFIX, REF_PREFIX_LEN) == 0;
}

/* Reads the locations of a reference: current first (*has_current), then
 * pending. Refuses a reference that is not this source's. */
int ecw_index_ref_locations(struct locs *out, bool *has_current, const struct ecw_entity *ref,
			    const char *job, const char *spk, const char *srk)
{
	const char *j = ecw_index_str_prop(ref, P_JOB), *cpk = ecw_index_str_prop(ref, P_CUR_PK),
		   *crk = ecw_index_str_prop(ref, P_CUR_RK);
	int err = 0;

	*has_current = false;
	if (!j || strcmp(j, job) != 0 || !ecw_index_owned_by(ref, spk, srk))
		return ecw_error_set(
			ECW_EINVALID,
			"the back-reference at %s/%s belongs to another job or source (job '%s', "
			"source %s/%s): refusing to use it",
			ecw_entity_pk(ref), ecw_entity_rk(ref), j ? j : "?",
			ecw_index_str_prop(ref, P_SRC_PK) ? ecw_index_str_prop(ref, P_SRC_PK) : "?",
			ecw_index_str_prop(ref, P_SRC_RK) ? ecw_index_str_prop(ref, P_SRC_RK) : "?");
	if (cpk && crk) {
		*has_current = true;
		err = locs_add(out, cpk, crk);
	}
	for (int i = 1; i <= MAX_PENDING && err == 0; i++) {
		char npk[40], nrk[40];
		const char *ppk, *prk;
		snprintf(npk, sizeof(npk), "Pending%dPartitionKey", i);
		snprintf(nrk, sizeof(nrk), "Pending%dRowKey", i);
		if ((ppk = ecw_index_str_prop(ref, npk)) && (prk = ecw_index_str_prop(ref, nrk)))
			err = locs_add(out, ppk, prk);
	}
	return err;
}

/* A reference: identity, current location (NULL for none), and the
 * pending ones (all of locs but the current). */
static int ref_build(struct ecw_entity **out, const struct ref_keys *rkeys, const char *job, const char *spk,
		     const char *srk, const char *cur_pk, const char *cur_rk, const struct locs *locs)
{
	struct ecw_entity *e = NULL;
	int err, k = 0;

	*out = NULL;
	if ((err = ecw_entity_new(&e, rkeys->pk, rkeys->rk)) < 0)
		return err;
	if ((err = ecw_entity_set_string(e, P_JOB, job, strlen(job))) == 0 &&
	    (err = ecw_entity_set_string(e, P_SRC_PK, spk, strlen(spk))) == 0 &&
	    (err = ecw_entity_set_string(e, P_SRC_RK, srk, strlen(srk))) == 0 && cur_pk &&
	    (err = ecw_entity_set_string(e, P_CUR_PK, cur_pk, strlen(cur_pk))) == 0)
		err = ecw_entity_set_string(e, P_CUR_RK, cur_rk, strlen(cur_rk));
	for (size_t i = 0; locs && i < locs->n && err == 0; i++) {
		char npk[40], nrk[40];
		if (cur_pk && strcmp(locs->v[i].pk, cur_pk) == 0 && strcmp(locs->v[i].rk, cur_rk) == 0)
			continue;
		if (++k > MAX_PENDING) {
			err = ecw_error_set(ECW_ETRANSIENT,
					    "back-reference %s/%s: more than %d pending index locations; "
					    "retrying once other runs settle",
					    rkeys->pk, rkeys->rk, MAX_PENDING);
			break;
		}
		snprintf(npk, sizeof(npk), "Pending%dPartitionKey", k);
		snprintf(nrk, sizeof(nrk), "Pending%dRowKey", k);
		if ((err = ecw_entity_set_string(e, npk, locs->v[i].pk, strlen(locs->v[i].pk))) == 0)
			err = ecw_entity_set_string(e, nrk, locs->v[i].rk, strlen(locs->v[i].rk));
	}
	if (err < 0) {
		ecw_entity_free(e);
		return err;
	}
	*out = e;
	return 0;
}

/* A lost race on the reference means: start over. */
static int ref_race(int err)
{
	if (err == ECW_EPRECONDITION || err == ECW_ENOTFOUND || err == ECW_ECONFLICT) {
		ecw_error_clear();
		return RESTART;
	}
	return err;
}

/* ---- one round ------------------------------------------------------------------------- */

/* GET the source: *out NULL when absent. */
int ecw_index_read_source(struct ecw_entity **out, struct run *r, const char *pk, const char *rk)
{
	int err = ecw_table_get(out, r->ctx->client, r->ix->source, pk, rk);

	if (err == ECW_ENOTFOUND) { /* a missing table is ECW_ENOTABLE: an error */
		*out = NULL;
		ecw_error_clear();
		return 0;
	}
	return err;
}

/* Whether now (NULL: absent) is the version etag names (NULL: absent). */
static bool same_version(const struct ecw_entity *now, const char *etag)
{
	return now ? etag && ecw_entity_etag(now) && strcmp(ecw_entity_etag(now), etag) == 0 : !etag;
}

/* Whether the source is still the version read in step 1 (etag NULL:
 * absent). */
static int source_unchanged(bool *same, struct run *r, const char *etag)
{
	struct ecw_entity *now = NULL;
	int err = ecw_index_read_source(&now, r, r->ctx->pk, r->ctx->rk);

	if (err < 0)
		return err;
	*same = same_version(now, etag);
	ecw_entity_free(now);
	return 0;
}

/* Whether source (opk, ork) exists and still computes to (pk, rk). */
int ecw_index_other_holds(bool *holds, struct run *r, const char *opk, const char *ork, const char *pk,
			  const char *rk)
{
	struct ecw_entity *other = NULL;
	struct ecw_buf kp, kr;
	int err;

	*holds = false;
	if ((err = ecw_index_read_source(&other, r, opk, ork)) == ECW_EINVALID) {
		ecw_error_clear(); /* keys no source can have: no holder */
		return 0;
	}
	if (err < 0 || !other)
		return err;
	ecw_buf_init(&kp, 0);
	ecw_buf_init(&kr, 0);
	if (compute_keys(&kp, &kr, r->ix, other) == 0)
		*holds = strcmp(ecw_buf_cstr(&kp), pk) == 0 && strcmp(ecw_buf_cstr(&kr), rk) == 0;
	else
		ecw_error_clear(); /* it computes to nothing: not a holder */
	ecw_buf_dispose(&kp);
	ecw_buf_dispose(&kr);
	ecw_entity_free(other);
	return 0;
}

/* The entry at want's keys belongs to another source that still computes
 * to them: a conflict, unless our own source changed (then recompute). */
static int taken(struct run *r, const struct ecw_entity *cur, const char *src_etag)
{
	bool same = false;
	int err;

	if ((err = source_unchanged(&same, r, src_etag)) < 0)
		return err;
	if (!same)
		return RESTART;
	return ecw_error_set(ECW_ECONFLICT,
			     "index key taken by source %s/%s, which computes to it too (the index needs "
			     "unique keys): %s/%s",
			     ecw_index_str_prop(cur, P_SRC_PK), ecw_index_str_prop(cur, P_SRC_RK),
			     ecw_entity_pk(cur), ecw_entity_rk(cur));
}

/* Step 3: makes the entity at want's keys equal want (see the header). */
static int write_entry(struct run *r, const struct ecw_entity *want, const char *src_etag)
{
	const char *pk = ecw_entity_pk(want), *rk = ecw_entity_rk(want), *t = r->ix->table;
	struct ecw_client *c = r->ctx->client;
	int err = 0;

	for (int tries = 0; tries < MAX_TRIES; tries++) {
		struct ecw_entity *cur = NULL;
		bool holds = false;

		err = ecw_table_get(&cur, c, t, pk, rk);
		if (err == ECW_ENOTFOUND) {
			if ((err = ecw_job_check_lease(r->ctx)) == 0)
				err = ecw_table_write(NULL, c, t, want, ECW_WRITE_INSERT, NULL);
		} else if (err < 0) {
			return err;
		} else if (!ecw_index_is_entry(cur)) {
			err = ecw_error_set(
				ECW_EINVALID,
				"an entity that is no index entry (it lacks SourcePartitionKey and "
				"SourceRowKey) is where the entry belongs: refusing to overwrite %s/%s "
				"in table %s",
				pk, rk, t);
		} else if (ecw_index_owned_by(cur, r->ctx->pk, r->ctx->rk)) {
			if (!ecw_entity_equal(cur, want) && (err = ecw_job_check_lease(r->ctx)) == 0)
				err = ecw_table_write(NULL, c, t, want, ECW_WRITE_UPDATE,
						      ecw_entity_etag(cur));
		} else if ((err = ecw_index_other_holds(&holds, r, ecw_index_str_prop(cur, P_SRC_PK),
							ecw_index_str_prop(cur, P_SRC_RK), pk, rk)) == 0) {
			/* Another source's entry: taken over only once that
			 * source no longer computes to these keys. */
			if (holds)
				err = taken(r, cur, src_etag);
			else if ((err = ecw_job_check_lease(r->ctx)) == 0)
				err = ecw_table_write(NULL, c, t, want, ECW_WRITE_UPDATE,
						      ecw_entity_etag(cur));
		}
		ecw_entity_free(cur);
		if (err != ECW_ECONFLICT && err != ECW_EPRECONDITION && err != ECW_ENOTFOUND)
			return err;
		if (holds)
			return err; /* the key is taken: retried later, by the runtime */
		/* Someone wrote or deleted it between our read and our write. */
		ecw_error_clear();
	}
	return ecw_error_set(ECW_ETRANSIENT, "index entry %s/%s kept changing (%d tries)", pk, rk, MAX_TRIES);
}

/* Step 5 for one location: deletes this source's entry there, if any. */
static int clean_location(struct run *r, const struct loc *l)
{
	struct ecw_client *c = r->ctx->client;
	int err = 0;

	for (int tries = 0; tries < MAX_TRIES; tries++) {
		struct ecw_entity *cur = NULL;
		err = ecw_table_get(&cur, c, r->ix->table, l->pk, l->rk);
		if (err == ECW_ENOTFOUND) {
			ecw_error_clear();
			return 0;
		}
		if (err < 0)
			return err;
		if (!ecw_index_owned_by(cur, r->ctx->pk, r->ctx->rk)) {
			/* Another source's entry (or not an entry): never ours to delete. */
			ecw_entity_free(cur);
			return 0;
		}
		if ((err = ecw_job_check_lease(r->ctx)) == 0)
			err = ecw_table_delete(c, r->ix->table, l->pk, l->rk, ecw_entity_etag(cur));
		ecw_entity_free(cur);
		if (err == ECW_ENOTFOUND) {
			ecw_error_clear();
			return 0;
		}
		if (err != ECW_EPRECONDITION)
			return err;
	}
	return ecw_error_set(ECW_ETRANSIENT, "index entry %s/%s kept changing (%d tries)", l->pk, l->rk,
			     MAX_TRIES);
}

/* ---- one round, step by step (run's, and a group's) ---------------------------------- */

#define DONE 2 /* internal: the round ended early with nothing to do (success) */

/* What a round holds from one step to the next. */
struct round {
	struct ecw_entity *src, *want, *ref;
	struct locs L, need;
	char *ref_etag, *src_etag;
	const char *cur_pk, *cur_rk; /* L's current location (in L), or NULL */
};

static void round_dispose(struct round *w)
{
	ecw_entity_free(w->src);
	ecw_entity_free(w->want);
	ecw_entity_free(w->ref);
	ecw_index_locs_dispose(&w->L);
	ecw_index_locs_dispose(&w->need);
	free(w->ref_etag);
	free(w->src_etag);
	memset(w, 0, sizeof(*w));
}

/* Step 1 on the source as read (w->src; NULL: absent): computes E. DONE for
 * an entry or a reference of an index in its source's own table. */
static int step_source(struct run *r, struct round *w)
{
	struct ecw_job_ctx *ctx = r->ctx;
	int err;

	if (!w->src)
		return 0;
	if (r->ix->same_table && (ecw_index_is_ref_pk(ctx->pk) || ecw_index_is_entry(w->src))) {
		snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "not-a-source");
		return DONE;
	}
	if ((err = ecw_index_compute_entry(&w->want, r->ix, w->src)) < 0)
		return err;
	if (!ecw_entity_etag(w->src))
		return ecw_error_set(ECW_ERROR, "source %s/%s came without an ETag", ctx->pk, ctx->rk);
	if (!(w->src_etag = strdup(ecw_entity_etag(w->src))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	return 0;
}

/* Step 2: reads the reference and registers T and this run's earlier writes
 * in it. DONE when there is nothing to do: no source, no reference. */
static int step_register(struct run *r, struct round *w)
{
	struct ecw_job_ctx *ctx = r->ctx;
	struct ecw_entity *nref = NULL;
	bool has_current = false;
	char *etag = NULL;
	int err = ecw_table_get(&w->ref, ctx->client, r->ix->table, r->ref.pk, r->ref.rk);

	if (err == ECW_ENOTFOUND) {
		ecw_error_clear();
		w->ref = NULL;
		err = 0;
	} else if (err < 0) {
		return err;
	} else {
		if ((err = ecw_index_ref_locations(&w->L, &has_current, w->ref, ctx->job, ctx->pk, ctx->rk)) <
		    0)
			return err;
		if (has_current) {
			w->cur_pk = w->L.v[0].pk;
			w->cur_rk = w->L.v[0].rk;
		}
		if (!ecw_entity_etag(w->ref))
			return ecw_error_set(ECW_ERROR, "back-reference %s/%s came without an ETag",
					     r->ref.pk, r->ref.rk);
		if (!(w->ref_etag = strdup(ecw_entity_etag(w->ref))))
			return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < w->L.n && err == 0; i++)
		err = locs_add(&w->need, w->L.v[i].pk, w->L.v[i].rk);
	if (err == 0 && w->want)
		err = locs_add(&w->need, ecw_entity_pk(w->want), ecw_entity_rk(w->want));
	for (size_t i = 0; i < r->written.n && err == 0; i++)
		err = locs_add(&w->need, r->written.v[i].pk, r->written.v[i].rk);
	if (err < 0)
		return err;
	if (w->need.n == w->L.n) {
		if (w->ref)
			return 0;
		snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "missing");
		return DONE;
	}
	if ((err = ref_build(&nref, &r->ref, ctx->job, ctx->pk, ctx->rk, w->cur_pk, w->cur_rk, &w->need)) ==
		    0 &&
	    (err = ecw_job_check_lease(ctx)) == 0)
		err = ref_race(ecw_table_write(&etag, ctx->client, r->ix->table, nref,
					       w->ref ? ECW_WRITE_UPDATE : ECW_WRITE_INSERT,
					       w->ref ? w->ref_etag : NULL));
	ecw_entity_free(nref);
	if (err != 0) {
		free(etag);
		return err;
	}
	free(w->ref_etag);
	if (!(w->ref_etag = etag))
		return ecw_error_set(ECW_ERROR, "writing back-reference %s/%s returned no ETag", r->ref.pk,
				     r->ref.rk);
	return 0;
}

/* Step 4 on the source as read again (now; NULL: absent): RESTART unless it
 * is still the version of step 1. */
static int step_verify(const struct round *w, const struct ecw_entity *now)
{
	return same_version(now, w->src_etag) ? 0 : RESTART;
}

/* Steps 5 and 6: cleans every other location, then commits the reference. */
static int step_finish(struct run *r, struct round *w)
{
	struct ecw_job_ctx *ctx = r->ctx;
	struct ecw_entity *nref = NULL;
	int err;

	for (size_t i = 0; i < w->need.n; i++) {
		if (w->want && strcmp(w->need.v[i].pk, ecw_entity_pk(w->want)) == 0 &&
		    strcmp(w->need.v[i].rk, ecw_entity_rk(w->want)) == 0)
			continue;
		if ((err = clean_location(r, &w->need.v[i])) < 0)
			return err;
	}
	ecw_crash_point("index.cleaned");

	if ((err = ecw_job_check_lease(ctx)) < 0)
		return err;
	if (w->want) {
		if ((err = ref_build(&nref, &r->ref, ctx->job, ctx->pk, ctx->rk, ecw_entity_pk(w->want),
				     ecw_entity_rk(w->want), NULL)) < 0)
			return err;
		err = ref_race(ecw_table_write(NULL, ctx->client, r->ix->table, nref, ECW_WRITE_UPDATE,
					       w->ref_etag));
		ecw_entity_free(nref);
	} else {
		err = ref_race(
			ecw_table_delete(ctx->client, r->ix->table, r->ref.pk, r->ref.rk, w->ref_etag));
	}
	if (err == 0) {
		snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), w->want ? "indexed" : "removed");
		ecw_crash_point("index.committed");
	}
	return err;
}

/* One round of steps 1-6; 0, RESTART or an error. */
static int round_run(struct run *r)
{
	struct round w = {0};
	struct ecw_entity *now = NULL;
	int err;

	/* 1. read */
	if ((err = ecw_index_read_source(&w.src, r, r->ctx->pk, r->ctx->rk)) < 0 ||
	    (err = step_source(r, &w)) != 0)
		goto done;
	ecw_crash_point("index.read");
	/* 2. register */
	if ((err = step_register(r, &w)) != 0)
		goto done;
	ecw_crash_point("index.registered");
	/* 3. write (remembered first: a write that timed out may still land) */
	if (w.want) {
		if ((err = locs_add(&r->written, ecw_entity_pk(w.want), ecw_entity_rk(w.want))) < 0 ||
		    (err = write_entry(r, w.want, w.src_etag)) != 0)
			goto done;
		ecw_crash_point("index.written");
	}
	/* 4. verify */
	if ((err = ecw_index_read_source(&now, r, r->ctx->pk, r->ctx->rk)) < 0 ||
	    (err = step_verify(&w, now)) != 0)
		goto done;
	ecw_crash_point("index.verified");
	/* 5. clean, 6. commit */
	err = step_finish(r, &w);
done:
	ecw_entity_free(now);
	round_dispose(&w);
	return err == DONE ? 0 : err;
}

/* Step 2 of a run, alone: (lpk, lrk) joins the locations r's reference
 * lists (inserting the reference when there is none). */
int ecw_index_register_location(struct run *r, const char *lpk, const char *lrk)
{
	struct ecw_job_ctx *ctx = r->ctx;
	int err = 0;

	for (int tries = 0; tries < MAX_TRIES; tries++) {
		struct ecw_entity *ref = NULL, *nref = NULL;
		struct locs L = {0};
		bool has_current = false;

		err = ecw_table_get(&ref, ctx->client, r->ix->table, r->ref.pk, r->ref.rk);
		if (err == ECW_ENOTFOUND) {
			ecw_error_clear();
			ref = NULL;
			err = 0;
		}
		if (err == 0 && ref)
			err = ecw_index_ref_locations(&L, &has_current, ref, ctx->job, ctx->pk, ctx->rk);
		if (err == 0 && !locs_has(&L, lpk, lrk)) {
			const char *cur_pk = has_current ? L.v[0].pk : NULL,
				   *cur_rk = has_current ? L.v[0].rk : NULL;
			if ((err = locs_add(&L, lpk, lrk)) == 0 &&
			    (err = ref_build(&nref, &r->ref, ctx->job, ctx->pk, ctx->rk, cur_pk, cur_rk,
					     &L)) == 0)
				err = ecw_table_write(NULL, ctx->client, r->ix->table, nref,
						      ref ? ECW_WRITE_UPDATE : ECW_WRITE_INSERT,
						      ref ? ecw_entity_etag(ref) : NULL);
		}
		ecw_entity_free(ref);
		ecw_entity_free(nref);
		ecw_index_locs_dispose(&L);
		if (err != ECW_EPRECONDITION && err != ECW_ECONFLICT && err != ECW_ENOTFOUND)
			return err;
		ecw_error_clear(); /* a run wrote the reference meanwhile: read it again */
	}
	return ecw_error_set(ECW_ETRANSIENT, "back-reference %s/%s kept changing (%d tries)", r->ref.pk,
			     r->ref.rk, MAX_TRIES);
}

/* A run that ends in an error after writing entries hands the places it
 * wrote to its reference (a step 2 for each, best effort, the error kept):
 * its next run, in any process, does not know r->written, and a place that
 * another round cleaned and committed away before this run wrote there
 * would otherwise be named by no reference. Registering is always safe (see
 * the audit's repairs). Not when the lease is lost: another worker holds
 * the message and this one does not write. */
static void hand_over_written(struct run *r)
{
	struct ecw_error saved = *ecw_error_last();

	for (size_t i = 0; i < r->written.n && ecw_job_check_lease(r->ctx) == 0; i++)
		(void)!ecw_index_register_location(r, r->written.v[i].pk, r->written.v[i].rk);
	ecw_error_set(saved.code, "%s", saved.message);
}

/* Rounds of r's message from step 1 until one ends, keeping what earlier
 * rounds (or the group it left) wrote in r->written. */
static int run_rounds(struct run *r)
{
	struct ecw_job_ctx *ctx = r->ctx;
	int err = 0, round;

	for (round = 1; round <= MAX_ROUNDS; round++) {
		ctx->outcome_detail[0] = '\0';
		if ((err = round_run(r)) != RESTART)
			break;
	}
	if (err == 0 && round > 1) {
		/* The log says when a run had to start over (a race it lost). */
		size_t n = strlen(ctx->outcome_detail);
		snprintf(ctx->outcome_detail + n, sizeof(ctx->outcome_detail) - n, " rounds=%d", round);
	}
	if (err == RESTART)
		err = ecw_error_set(
			ECW_ETRANSIENT,
			"index of %s/%s: the source or its back-reference kept changing (%d rounds)", ctx->pk,
			ctx->rk, MAX_ROUNDS);
	if (err < 0 && r->written.n > 0)
		hand_over_written(r);
	return err;
}

int ecw_index_run(const void *settings, struct ecw_job_ctx *ctx)
{
	struct run r = {.ix = settings, .ctx = ctx};
	int err;

	if ((err = ecw_index_ref_keys(&r.ref, ctx->job, ctx->pk, ctx->rk)) == 0)
		err = run_rounds(&r);
	ecw_index_locs_dispose(&r.written);
	return err;
}

/* ---- groups (ecw_job.h run_group) ---------------------------------------------------
 *
 * Messages on sources of one partition, run together: the reads of the
 * sources and of the entries' places become one query per 14 members, and
 * the entries of one index partition are written in one entity group
 * transaction. The references live in 256 partitions (see above), so each
 * member still reads, registers and commits its own.
 *
 *   1. "index.group.read"        the sources, one query (ecw_table_get_many);
 *                                each member's step 1 on its own. A key
 *                                twice, an absent source (a removal), or a
 *                                failed query: the member runs alone. A
 *                                permanent error (step 1's): that member
 *                                fails, alone.
 *   2. "index.group.registered"  run's step 2, member by member.
 *   3. "index.group.written"     per index partition, one query reads what
 *                                is at the members' keys T, and one
 *                                transaction writes what run's step 3 writes
 *                                without a second read: an insert where
 *                                nothing is, a replace If-Match of this
 *                                source's own entry as read; nothing where
 *                                that entry is already E. Another source's
 *                                entry, something that is no entry, a T
 *                                two members compute, or a transaction that
 *                                did not apply: that member runs alone.
 *   4. "index.group.verified"    the sources again, one query: a member
 *                                whose source is not the version of step 1
 *                                runs alone (run's "start over").
 *   5-6.                         run's steps 5 and 6, member by member.
 * Running alone means run's rounds from step 1, keeping what the member
 * wrote in the group (its `written`), exactly as run's next round would.
 *
 * Crash safety: every member's writes in a group are those of one round of
 * run, in run's order (reference registered, entry, cleaning, commit) and
 * under run's conditions; only their instants, and whose writes come
 * between them, differ, as they would between messages run by several
 * threads. A query returns, for each key, what a GET would at that moment,
 * with the same ETag, so steps 1, 3 and 4 read what run's reads could. The
 * transaction of step 3 holds, per member, the write run's step 3 makes,
 * each at a T already registered in that member's reference (step 2 ends
 * for every member before step 3 starts) and added to its `written` before
 * the transaction is sent (a timed-out transaction may have applied), and
 * it applies all or nothing. So whenever the process dies, each member is
 * where a run that died right after one of its own steps leaves it (after
 * 1: nothing written; after 2: registered; after 3: E written, registered;
 * after 5 or 6: cleaned, committed), and the redelivered messages converge
 * from there as run's argument above says; the concurrency argument holds
 * member by member, since each member's reference window is run's. */

struct gmember {
	struct run r;
	struct round w;
	bool alone;   /* leaves the group: run's rounds from step 1 */
	bool settled; /* errs[] holds its result */
	bool placed;  /* step 3 took care of its entry */
};

static bool in_group(const struct gmember *m)
{
	return !m->alone && !m->settled;
}

/* The sources of the members still in the group, one query per 14:
 * got[i] for member i (NULL: absent, or not asked). false when the query
 * failed: the caller sends them alone. */
static bool read_group_sources(struct ecw_entity **got, const struct index *ix, struct ecw_job_ctx *ctxs,
			       const struct gmember *g, size_t n)
{
	const char **rks = calloc(n, sizeof(*rks));
	struct ecw_entity **tmp = calloc(n, sizeof(*tmp));
	size_t k = 0;
	bool ok = false;

	if (rks && tmp) {
		for (size_t i = 0; i < n; i++)
			if (in_group(&g[i]))
				rks[k++] = ctxs[i].rk;
		ok = ecw_table_get_many(tmp, ctxs[0].client, ix->source, ctxs[0].pk, rks, k) == 0;
	}
	for (size_t i = 0, j = 0; i < n; i++)
		got[i] = ok && in_group(&g[i]) ? tmp[j++] : NULL;
	ecw_error_clear();
	free(rks);
	free(tmp);
	return ok;
}

/* Step 3 for the members whose entries go to index partition pk. */
static void write_group_entries(const struct index *ix, struct ecw_job_ctx *ctxs, struct gmember *g, size_t n,
				const char *pk, int *errs)
{
	size_t *in = calloc(n, sizeof(*in)), k = 0, added = 0;
	const char **rks = calloc(n, sizeof(*rks));
	struct ecw_entity **cur = calloc(n, sizeof(*cur));
	struct ecw_batch *b = NULL;
	bool read = false, applied = false;
	int err;

	for (size_t i = 0; i < n; i++) {
		struct gmember *m = &g[i];
		if (!in_group(m) || m->placed || strcmp(ecw_entity_pk(m->w.want), pk) != 0)
			continue;
		m->placed = true;
		for (size_t j = 0; j < k; j++)
			if (strcmp(rks[j], ecw_entity_rk(m->w.want)) == 0)
				m->alone = true; /* two sources, one key: run's careful path */
		if (!in || !rks || !cur)
			m->alone = true; /* out of memory: each by itself */
		if (!m->alone) {
			in[k] = i;
			rks[k++] = ecw_entity_rk(m->w.want);
		}
	}
	read = k > 0 && ecw_table_get_many(cur, ctxs[0].client, ix->table, pk, rks, k) == 0 &&
	       ecw_batch_new(&b, ix->table) == 0;
	for (size_t j = 0; j < k; j++) {
		struct gmember *m = &g[in[j]];
		struct ecw_job_ctx *x = &ctxs[in[j]];
		const struct ecw_entity *at = cur[j];
		if (!read || (at && !ecw_index_owned_by(at, x->pk, x->rk))) {
			m->alone = true; /* another source's entry, or no entry: write_entry decides */
		} else if (locs_add(&m->r.written, pk, rks[j]) < 0) {
			m->alone = true;
		} else if (at && ecw_entity_equal(at, m->w.want)) {
			continue; /* in place already */
		} else if ((err = ecw_job_check_lease(x)) < 0) {
			ecw_job_member_fail(x, &errs[in[j]], err);
			m->settled = true;
		} else if (ecw_batch_add_borrowed(b, at ? ECW_BATCH_UPDATE : ECW_BATCH_INSERT, m->w.want,
						  at ? ecw_entity_etag(at) : NULL) < 0) {
			m->alone = true;
		} else {
			added++;
		}
	}
	ecw_error_clear();
	applied = added == 0 || ecw_batch_submit(ctxs[0].client, b) == 0;
	for (size_t j = 0; j < k && !applied; j++)
		if (in_group(&g[in[j]]))
			g[in[j]].alone = true; /* its write may have landed: it is in `written` */
	ecw_error_clear();
	ecw_batch_free(b);
	for (size_t j = 0; cur && j < k; j++)
		ecw_entity_free(cur[j]);
	free(in);
	free(rks);
	free(cur);
}

void ecw_index_run_group(const void *settings, struct ecw_job_ctx *ctxs, size_t n, int *errs)
{
	const struct index *ix = settings;
	struct gmember *g = calloc(n, sizeof(*g));
	struct ecw_entity **got = calloc(n, sizeof(*got));
	int err;

	if (!g || !got) {
		for (size_t i = 0; i < n; i++)
			ecw_job_member_fail(&ctxs[i], &errs[i], ecw_error_set(ECW_ENOMEM, "out of memory"));
		free(g);
		free(got);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		g[i].r = (struct run){.ix = ix, .ctx = &ctxs[i]};
		ctxs[i].outcome_detail[0] = '\0';
		errs[i] = 0;
		if ((err = ecw_index_ref_keys(&g[i].r.ref, ctxs[i].job, ctxs[i].pk, ctxs[i].rk)) < 0) {
			ecw_job_member_fail(&ctxs[i], &errs[i], err);
			g[i].settled = true;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(ctxs[j].rk, ctxs[i].rk) == 0)
				g[i].alone = true; /* a duplicate: after the first, it finds the work done */
	}

	/* 1. read */
	if (!read_group_sources(got, ix, ctxs, g, n))
		for (size_t i = 0; i < n; i++)
			g[i].alone = true;
	for (size_t i = 0; i < n; i++) {
		if (!in_group(&g[i]))
			continue;
		if (!(g[i].w.src = got[i])) {
			g[i].alone = true; /* a removal: nothing to share */
		} else if ((err = step_source(&g[i].r, &g[i].w)) != 0) {
			if (err < 0)
				ecw_job_member_fail(&ctxs[i], &errs[i], err);
			g[i].settled = true; /* a permanent error, or not a source */
		}
	}
	ecw_error_clear();
	ecw_crash_point("index.group.read");

	/* 2. register */
	for (size_t i = 0; i < n; i++) {
		if (!in_group(&g[i]))
			continue;
		if ((err = step_register(&g[i].r, &g[i].w)) == RESTART) {
			g[i].alone = true;
		} else if (err < 0) {
			ecw_job_member_fail(&ctxs[i], &errs[i], err);
			g[i].settled = true;
		}
		ecw_error_clear();
	}
	ecw_crash_point("index.group.registered");

	/* 3. write, a transaction per index partition */
	for (size_t i = 0; i < n; i++)
		if (in_group(&g[i]) && !g[i].placed)
			write_group_entries(ix, ctxs, g, n, ecw_entity_pk(g[i].w.want), errs);
	ecw_crash_point("index.group.written");

	/* 4. verify */
	if (!read_group_sources(got, ix, ctxs, g, n))
		for (size_t i = 0; i < n; i++)
			g[i].alone = g[i].alone || !g[i].settled;
	for (size_t i = 0; i < n; i++) {
		if (in_group(&g[i]) && step_verify(&g[i].w, got[i]) == RESTART)
			g[i].alone = true;
		ecw_entity_free(got[i]);
	}
	ecw_crash_point("index.group.verified");

	/* 5. clean, 6. commit; then what the group could not do, alone */
	for (size_t i = 0; i < n; i++) {
		if (in_group(&g[i])) {
			if ((err = step_finish(&g[i].r, &g[i].w)) == RESTART)
				g[i].alone = true;
			else if (err < 0)
				ecw_job_member_fail(&ctxs[i], &errs[i], err);
			g[i].settled = !g[i].alone;
			ecw_error_clear();
		}
		round_dispose(&g[i].w);
		if (!g[i].settled) {
			ecw_error_clear();
			if ((err = run_rounds(&g[i].r)) < 0)
				ecw_job_member_fail(&ctxs[i], &errs[i], err);
		}
		ecw_index_locs_dispose(&g[i].r.written);
	}
	free(g);
	free(got);
}
