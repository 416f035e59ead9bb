/* SPDX-License-Identifier: MIT */
/* index_list.c - index lists: for every value, one entity listing the keys of
 * every source entity with that value (every employee whose LastName is
 * "Jones"), kept by optimistic concurrency so that many workers can edit one
 * list at once without losing an entry. Its audit (`ecworker audit`) is in
 * index_list_audit.c, the file on top, which also holds the job's type
 * descriptor; below this file are index_list_combine.c (one list's
 * combined edit), index_list_store.c (a list's entities) and
 * index_list_tuples.c (sorted sets of keys); index_list_private.h is what
 * they share.
 *
 * The list table holds two kinds of entity:
 *   a list   PartitionKey/RowKey rendered from partition_key/row_key against
 *            the source entity (the head). Keys (String): a JSON array of
 *            [PartitionKey, RowKey] pairs, sorted by PartitionKey then RowKey
 *            bytewise (= code point order), no duplicates; Count (Int32): the
 *            number of keys of the whole list. Past one property (32,000
 *            UTF-16 units) the head holds Keys, Keys2, ... KeysN, the
 *            concatenation in order being the sorted list; past one entity
 *            (1 MiB), pages follow in the same partition: RowKey lrk + "~~" +
 *            n, ListRowKey (String) = lrk, their own Keys, Keys2, ...; the
 *            head's Pages (String, "[1,3,2]") lists them in key order and
 *            LastPage (Int32) is the highest number used (never reused while
 *            the head lives). The whole list = the head's chunks, then each
 *            page's in Pages order. A small list is exactly the one-entity
 *            Keys + Count format. index_list_store.c reads and writes them,
 *            and says the limits (at most 15,360,000 units of JSON in 255
 *            pages; past it a permanent error naming the list).
 *            An emptied list is deleted, so every list has at least one key.
 *            Pairs rather than one encoded string per key: readers parse
 *            plain JSON, and any character a key may hold survives it.
 *   a ref    one per source entity. RowKey h = the SHA-256 (hex) of
 *            "pk NUL rk": fixed length and key-safe whatever characters the
 *            source keys hold (NUL is not allowed in keys, so the input is
 *            unambiguous); PartitionKey "~ref~<job>~" + h[0..1]: the job's own
 *            (two jobs may share a list table), spread over 256 partitions so
 *            the refs never make a hot partition of their own (the service
 *            serves about 2,000 entities/s per partition; the lists' partition
 *            is the configuration's choice). SourcePartitionKey/SourceRowKey
 *            repeat the keys and are checked on every read. ListPartitionKey/
 *            ListRowKey name the list the source was last committed to;
 *            Pending (JSON [[lpk, lrk, owner], ...]) holds intents: lists a
 *            run (owner = its message id, the same on every redelivery) is
 *            about to add the key to; owner "~poisoned~" for those of a
 *            message that was poisoned (see below). The ref names every list
 *            that may hold the key: a later run can clean up only lists it
 *            knows about.
 * A list's PartitionKey may not start with "~ref~": a partition_key that does
 * is a configuration error, a rendered one a permanent error.
 *
 * A list changes by read (ETag), change, write with If-Match (or insert when
 * absent, delete when emptied): one request whatever the list's size, a
 * plain write for a one-entity list, else one entity group transaction over
 * the head and the entities the change touches, If-Match on each, so a crash
 * can never leave a list half written (steps 3b and 4 below are each one
 * atomic write); 412, 409 or 404 means someone else got there
 * first: read again and retry, up to MAX_CAS times with short jittered sleeps,
 * then a transient failure (the message is retried later). How a list is
 * stored, read and written is index_list_store.c's: a list that would grow
 * past what it can hold is a permanent error naming the list, raised before
 * the list is written (the run's intent for it is dropped again). Within one
 * worker, the changes runs make to one list at the same time are written
 * together, in one read-modify-write (index_list_combine.c, which argues why
 * that keeps everything below true).
 *
 * A run for source S (keys pk, rk), owner m = the message id; a round:
 *   1. GET S: its ETag v and target list T (none when S is gone).
 *   2. GET the ref: committed list C, intents P, ETag r.
 *   3. When T holds S already: nothing to add. Otherwise
 *      3a. intent: unless P has (T, m), write the ref with P + (T, m)
 *          (If-Match r, or insert).                       crash point .intent
 *      3b. add S to T (If-Match on the list).             crash point .added
 *   4. remove S from every list in C, P and the lists this run added S to in
 *      earlier rounds, except T (If-Match; delete the list when it empties).
 *                                                         crash point .removed
 *   5. commit: write the ref with C = T and P minus m's own intents and the
 *      "~poisoned~" ones (delete the ref when T is none and nothing is left;
 *      skip when unchanged).
 *                                                         crash point .ref
 *   6. GET S again: unchanged ETag (or still gone) = done; otherwise the
 *      round worked from a stale value: start a new round.
 * The GETs of S in steps 1 and 6 go through shared_reads.c: the runs of one
 * worker reading sources of one partition at the same time share one query
 * (a read is served by a request sent after it was asked for, so step 6
 * still sees everything written before it); and a first round's step 1
 * reads, in the same query, the sources of the messages of the same job and
 * partition waiting behind it in the worker (ecw_job_ctx peers), whose own
 * step 1 then takes that answer: read after their messages were received,
 * so it holds their changes, and step 6 checks it like any step 1.
 * A 412/409/404 on the ref (3a, 5) also starts a new round. Rounds are
 * bounded (MAX_ROUNDS), then a transient failure. The log line's detail says
 * what the run did ("moved rounds=2 conflicts=3": added, moved, removed or
 * unchanged; conflicts = the lost races, which the metrics also count as
 * ecw_storage_requests_total{status="412"} and "409").
 *
 * Crash safety, step by step (a crash = the process dies right after it; the
 * message was not deleted, so it comes back with the same id):
 *   after 1 (.read): nothing was written; the rerun does it all.
 *   after 3a (.intent): the ref names T among the intents; S is not in T yet.
 *            The rerun reads S again: same T, it adds S (its own intent is
 *            there already) and commits, dropping the intent; a new T: the
 *            intent makes it remove S from the old T (harmless when absent).
 *   after 3b (.added): S is in T and still in C, if any (two lists for a
 *            moment); the ref names both (C, and T as an intent). The rerun
 *            finds S in T, removes it from C, commits T. Had S changed
 *            meanwhile, the rerun's target differs and it removes S from both
 *            C and T: the intent written before the add is what lets it find
 *            T (the test crash_after_every_step/move-then-change shows it).
 *   after 4 (.removed): S is only in T; the ref still names C (absent S is a
 *            no-op to remove). The rerun commits.
 *   after 5 (.ref): everything is done but the check; the rerun reads, finds
 *            nothing to do, and succeeds without a write.
 * Every add is preceded by an intent naming its list, and an intent is dropped
 * only by its owner (or, once its message is poisoned, by any run) after
 * removing S from that list (or committing it), and C changes only after S
 * was removed from the old C: so at every moment each list holding S is named
 * by the ref, or is being cleaned by a live run.
 *
 * Why only the owner may drop an intent: a live run of another owner may have
 * written its intent and be about to add S to that list; were it dropped after
 * this run cleaned the list, and that run died after its add, S would stay in
 * a list nothing names. A poisoned message never runs again, though (the
 * replay puts its text back under a new message id, a new owner), so its
 * intents would stay in the ref for good; for a deleted source, a ref that
 * should not exist. Hence abandon (ecw_job.h), which the runtime calls before
 * it poisons message m: one conditional write of the ref (If-Match, retried
 * on 412 like the other writes; nothing when the ref is absent or holds no
 * intent of m) rewriting m's intents to owner "~poisoned~". Every later run
 * treats those like its own: step 4 removes S from their lists, step 5 drops
 * them with If-Match on the ref it read in step 2, so it drops only intents
 * whose lists it cleaned. That is safe because no run of m is in flight when
 * the intents are handed over: the runtime calls abandon on the worker that
 * holds m's lease, after its own run of m returned or without running m; the
 * workers of earlier deliveries died or lost the lease, and a run that lost
 * its lease is the one window listed below. Should m run again after all (a
 * crash before the message is deleted, below, or a failed put of the
 * envelope), it writes a fresh intent before any add, as every run does. Several poisoned owners of one list
 * merge into one "~poisoned~" intent: they all stand for writes no one will
 * make.
 *   crash in abandon, after the rewrite (.abandoned) and before the envelope
 *            is put: the message stays on the queue and comes back as m. Over
 *            max_dequeue_count it is poisoned again, and abandon finds no
 *            intent of m: no write. If it runs (a permanent failure poisoned
 *            it at its first delivery), it is a run like any other: it drops
 *            its own intents and the "~poisoned~" ones at its commit, or, if
 *            it fails again, hands its new intents over too. A crash between
 *            the envelope and the delete is the runtime's (a duplicate
 *            envelope; replaying both converges).
 *
 * Concurrency (several workers, duplicates, stale and reordered messages): a
 * message carries only keys, so a "stale" message runs with the current
 * value. What can go stale is a run that read S before S changed. Such a round
 * may add S to the old value's list, or remove S from the new one, but it
 * cannot finish: step 6 sees a new ETag, and the next round works from the
 * current value, adds S to the current T, and removes S from every list it
 * added to (remembered in memory, and in the ref as intents in case it dies).
 * A round that finishes read S before every write and saw the same ETag after
 * the last one, so all its writes were right for the current value. Adds go
 * only to the T a round computed and removals never touch it; conditional
 * writes make the last write to each list a read-modify-write of its latest
 * version, so no concurrent edit of a list is lost. Runs for different keys
 * meet only on list entities and never lose each other's entries.
 *
 * What holds, honestly: once S stops changing and every message for it has
 * run to success (crashed runs redelivered and run again), S is in exactly
 * the list its value computes to (none when S is gone), and its ref names that
 * list with no intents (no ref when S is gone). Each list is then exactly the
 * sorted keys of the sources with its value. A poisoned message counts as run
 * once its replay (or any later message for S) has run: abandon handed its
 * intents over. Not covered:
 *   - an abandon that fails (storage out of reach as the message is poisoned;
 *     the runtime logs abandon_failed and poisons it all the same) leaves the
 *     intents owned by the dead id. That is safe, not tidy: later runs keep
 *     removing S from that list; the ref of a deleted source then stays with
 *     only that intent.
 *   - a run that lost its lease (its message went to another worker, which
 *     runs as the same owner, or poisons it and hands its intents over to
 *     every later run) stops before its next write, but a write it already
 *     sent can land after the other worker (or a later run) cleaned up and
 *     dropped the owner's intents. If that write added S to a list S had just
 *     left (S changed during the run too), nothing will find that entry. It
 *     takes a lost lease, a change of S and that timing together; the runtime
 *     renews leases while a job runs.
 *   - editing or deleting ref entities by hand, or two jobs writing lists to
 *     the same table and partition. Renaming the job orphans its refs: rebuild
 *     the index (delete the list table and enqueue every source) instead.
 *   - a source without the row_key/partition_key property, or with a value
 *     the service refuses in a key (/ \ # ? or control characters), is a
 *     permanent error: S keeps its old list until a later change. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ecw_clock.h"
#include "ecw_codec.h"
#include "ecw_job.h"
#include "index_list_combine_private.h"
#include "index_list_private.h"
#include "jobs_private.h"
#include "shared_reads_private.h"

#define MAX_ROUNDS 8
#define MAX_CAS 10
/* A reference's Pending must fit one String property (the service allows
 * 32,768 UTF-16 code units; a margin below it). */
#define PENDING_MAX_UTF16 32000
#define REF_PREFIX ECW_IL_REF_PREFIX
/* The owner of the intents of a poisoned message (il_abandon). Queue message
 * ids are GUIDs: none can be this. */
#define ABANDONED "~poisoned~"
#define RESTART 1 /* internal: start a new round */

void ecw_index_list_free(void *p)
{
	struct index_list *il = p;

	if (!il)
		return;
	free(il->source);
	free(il->table);
	ecw_template_free(il->pk);
	ecw_template_free(il->rk);
	ecw_index_list_combiners_free(il->combiners);
	ecw_shared_reads_free(il->reads);
	free(il);
}

int ecw_index_list_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type",          "then",    "source", "table",
					      "partition_key", "row_key", NULL};
	struct index_list *il = calloc(1, sizeof(*il));
	int bad = 0;

	*out = NULL;
	if (!il)
		return -1;
	bad |= ecw_node_check_keys(job, allowed, "index-list job", errs) > 0;
	bad |= ecw_job_setting_table(&il->source, job, "source", true, errs) < 0;
	bad |= ecw_job_setting_table(&il->table, job, "table", true, errs) < 0;
	bad |= ecw_job_setting_template(&il->pk, job, "partition_key", true, errs) < 0;
	bad |= ecw_job_setting_template(&il->rk, job, "row_key", true, errs) < 0;
	if (!bad && strncmp(ecw_template_text(il->pk), REF_PREFIX, strlen(REF_PREFIX)) == 0) {
		ecw_node_error(errs, ecw_node_get(job, "partition_key"),
			       "partition_key: \"" REF_PREFIX
			       "\" starts the partitions of the index's references");
		bad = 1;
	}
	/* Table names are case-insensitive in the service. */
	if (!bad && il->source && il->table && strcasecmp(il->source, il->table) == 0) {
		ecw_node_error(errs, ecw_node_get(job, "table"),
			       "table: the lists need a table of their own, not the source table");
		bad = 1;
	}
	if (!bad && (ecw_index_list_combiners_new(&il->combiners, &ecw_index_list_combine_store) < 0 ||
		     ecw_shared_reads_new(&il->reads, &ecw_shared_reads_storage) < 0))
		bad = 1;
	if (bad) {
		ecw_index_list_free(il);
		return -1;
	}
	*out = il;
	return 0;
}

int ecw_index_list_prepare(const void *settings, struct ecw_client *c)
{
	const struct index_list *il = settings;

	if (strcmp(il->table, il->source) == 0)
		return 0; /* the lists live in the source table: only read, never made */
	return ecw_table_create(NULL, c, il->table);
}

/* ---- one run ------------------------------------------------------------------------------ */

struct ref {
	bool exists;
	char *etag;
	char *cpk, *crk;       /* the committed list; NULL when none */
	struct tuples pending; /* width 3: [lpk, lrk, owner] */
};

struct run {
	const struct index_list *il;
	struct ecw_job_ctx *ctx;
	const char *owner; /* this message's id: the owner of its intents */
	char ref_pk[ECW_IL_REF_PK_SIZE];
	char ref_rk[65];
	struct tuples touched; /* width 2: lists this run added the key to */
	/* this round */
	bool src_exists;
	char *src_etag;
	char *tpk, *trk; /* the target list; NULL when none */
	struct ref ref;
	/* for the log's detail */
	int conflicts, rounds;
	bool added, removed;
};

static void ref_dispose(struct ref *f)
{
	free(f->etag);
	free(f->cpk);
	free(f->crk);
	ecw_index_list_tuples_dispose(&f->pending);
	memset(f, 0, sizeof(*f));
	ecw_index_list_tuples_init(&f->pending, 3);
}

static void round_dispose(struct run *r)
{
	free(r->src_etag);
	free(r->tpk);
	free(r->trk);
	r->src_etag = r->tpk = r->trk = NULL;
	r->src_exists = false;
	ref_dispose(&r->ref);
}

static bool same(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static bool is_target(const struct run *r, const char *lpk, const char *lrk)
{
	return r->tpk && same(r->tpk, lpk) && same(r->trk, lrk);
}

/* An entity that is not there, as opposed to a missing table (ECW_ENOTABLE:
 * a deployment problem, left as the error it is: transient, retried, and in
 * the log with the service's error code). */
static bool entity_absent(int err)
{
	return err == ECW_ENOTFOUND;
}

/* A lost race on a conditional write: counted, not an error. */
static bool lost_race(struct run *r, int err)
{
	if (err != ECW_EPRECONDITION && err != ECW_ECONFLICT && !entity_absent(err))
		return false;
	r->conflicts++;
	ecw_error_clear();
	return true;
}

int ecw_index_list_ref_keys(char pk[ECW_IL_REF_PK_SIZE], char rk[65], const char *job, const char *spk,
			    const char *srk)
{
	int err;

	if ((err = ecw_job_source_key_hash(rk, spk, srk)) < 0)
		return err;
	if (snprintf(pk, ECW_IL_REF_PK_SIZE, REF_PREFIX "%s~%.2s", job, rk) >= ECW_IL_REF_PK_SIZE)
		return ecw_error_set(ECW_EINVALID, "index-list: job name too long");
	return 0;
}

static const char *prop_string(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);
	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

int ecw_index_list_target(char **lpk, char **lrk, const struct index_list *il, const struct ecw_entity *src)
{
	struct ecw_buf pk, rk;
	int err;

	*lpk = *lrk = NULL;
	ecw_buf_init(&pk, 0);
	ecw_buf_init(&rk, 0);
	if ((err = ecw_template_render(&pk, il->pk, src, ECW_TEMPLATE_PLAIN)) < 0 ||
	    (err = ecw_template_render(&rk, il->rk, src, ECW_TEMPLATE_PLAIN)) < 0 ||
	    (err = ecw_entity_key_check(ecw_buf_cstr(&pk), "partition_key result")) < 0 ||
	    (err = ecw_entity_key_check(ecw_buf_cstr(&rk), "row_key result")) < 0)
		goto done;
	if (strncmp(ecw_buf_cstr(&pk), REF_PREFIX, strlen(REF_PREFIX)) == 0) {
		err = ecw_error_set(ECW_EINVALID,
				    "partition_key result '%.100s' starts with \"" REF_PREFIX
				    "\", reserved for the index's own references",
				    ecw_buf_cstr(&pk));
		goto done;
	}
	*lpk = ecw_buf_take(&pk);
	*lrk = ecw_buf_take(&rk);
	if (!*lpk || !*lrk) {
		free(*lpk);
		free(*lrk);
		*lpk = *lrk = NULL;
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
	}
done:
	ecw_buf_dispose(&pk);
	ecw_buf_dispose(&rk);
	return err;
}

/* Step 1's read of the source: in the first round, the answer a run before
 * read ahead for it, or its own with those of the messages waiting behind
 * it (shared_reads.c); a kept answer is older than the round, which step 6
 * checks as it checks any step 1. */
static int read_source_first(struct ecw_entity **src, struct run *r)
{
	const struct index_list *il = r->il;
	const struct ecw_job_ctx *x = r->ctx;

	if (r->rounds > 1)
		return ecw_shared_reads_get(il->reads, src, x->client, il->source, x->pk, x->rk);
	if (ecw_shared_reads_kept(il->reads, src, il->source, x->pk, x->rk))
		return *src ? 0 : ECW_ENOTFOUND;
	return ecw_shared_reads_ahead(il->reads, src, x->client, il->source, x->pk, x->rk, x->peers,
				      x->npeers);
}

/* Reads the source: existence and ETag; with want_target (step 1) also the
 * target. Step 6's read is always made now. */
static int read_source(bool *exists, char **etag, struct run *r, bool want_target)
{
	struct ecw_entity *src = NULL;
	int err = want_target ? read_source_first(&src, r)
			      : ecw_shared_reads_get(r->il->reads, &src, r->ctx->client, r->il->source,
						     r->ctx->pk, r->ctx->rk);

	*exists = false;
	*etag = NULL;
	if (entity_absent(err)) {
		ecw_error_clear();
		return 0;
	}
	if (err < 0)
		return err;
	*exists = true;
	if (!(*etag = strdup(ecw_entity_etag(src) ? ecw_entity_etag(src) : "")))
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
	if (err == 0 && want_target && (err = ecw_index_list_target(&r->tpk, &r->trk, r->il, src)) < 0 &&
	    err == ECW_EINVALID) {
		char msg[400];
		snprintf(msg, sizeof(msg), "%.*s", (int)sizeof(msg) - 1, ecw_error_last()->message);
		err = ecw_error_set(ECW_EINVALID, "index-list %s: source %s (%.100s, %.100s): %s",
				    r->ctx->job, r->il->source, r->ctx->pk, r->ctx->rk, msg);
	}
	ecw_entity_free(src);
	return err;
}

int ecw_index_list_ref_view(const char **cpk, const char **crk, const char **pending,
			    const struct ecw_entity *ref, const char *spk, const char *srk)
{
	*cpk = *crk = *pending = NULL;
	if (!same(prop_string(ref, "SourcePartitionKey"), spk) ||
	    !same(prop_string(ref, "SourceRowKey"), srk))
		return ecw_error_set(ECW_EINVALID,
				     "not for (%.100s, %.100s): edited by hand, or a "
				     "SHA-256 collision",
				     spk, srk);
	*cpk = prop_string(ref, "ListPartitionKey");
	*crk = prop_string(ref, "ListRowKey");
	if (!*cpk || !*crk)
		*cpk = *crk = NULL;
	*pending = prop_string(ref, "Pending");
	return 0;
}

static int ref_read(struct run *r)
{
	struct ecw_entity *e = NULL;
	struct ref *f = &r->ref;
	const char *cpk, *crk, *pending;
	int err = ecw_table_get(&e, r->ctx->client, r->il->table, r->ref_pk, r->ref_rk);

	ref_dispose(f);
	if (entity_absent(err)) {
		ecw_error_clear();
		return 0;
	}
	if (err < 0)
		return err;
	if ((err = ecw_index_list_ref_view(&cpk, &crk, &pending, e, r->ctx->pk, r->ctx->rk)) < 0) {
		err = ecw_error_set(ECW_EINVALID, "index-list %s: the reference %s/%s in %s is %s",
				    r->ctx->job, r->ref_pk, r->ref_rk, r->il->table,
				    ecw_error_last()->message);
		goto done;
	}
	f->exists = true;
	if (!(f->etag = strdup(ecw_entity_etag(e) ? ecw_entity_etag(e) : "")) ||
	    (cpk && (!(f->cpk = strdup(cpk)) || !(f->crk = strdup(crk))))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	if (pending &&
	    (err = ecw_index_list_tuples_parse(&f->pending, pending, strlen(pending), 3, "Pending")) < 0) {
		char msg[300];
		snprintf(msg, sizeof(msg), "%.*s", (int)sizeof(msg) - 1, ecw_error_last()->message);
		err = ecw_error_set(ECW_EINVALID, "index-list %s: the reference %s/%s in %s: %s", r->ctx->job,
				    r->ref_pk, r->ref_rk, r->il->table, msg);
	}
done:
	ecw_entity_free(e);
	return err;
}

/* Writes the ref as committed to (cpk, crk) (NULL: none) with pending, which
 * moves into r->ref on success. RESTART when the ref changed since read. */
static int ref_write(struct run *r, const char *cpk, const char *crk, struct tuples *pending)
{
	struct ecw_entity *e = NULL;
	struct ecw_buf json;
	char *etag = NULL, *ncpk = NULL, *ncrk = NULL;
	int err;

	ecw_buf_init(&json, 0);
	if ((err = ecw_entity_new(&e, r->ref_pk, r->ref_rk)) < 0 ||
	    (err = ecw_entity_set_string(e, "SourcePartitionKey", r->ctx->pk, strlen(r->ctx->pk))) < 0 ||
	    (err = ecw_entity_set_string(e, "SourceRowKey", r->ctx->rk, strlen(r->ctx->rk))) < 0)
		goto done;
	if (cpk && ((err = ecw_entity_set_string(e, "ListPartitionKey", cpk, strlen(cpk))) < 0 ||
		    (err = ecw_entity_set_string(e, "ListRowKey", crk, strlen(crk))) < 0))
		goto done;
	if (pending->n) {
		if ((err = ecw_index_list_tuples_write(&json, pending)) < 0)
			goto done;
		if (ecw_index_list_tuples_utf16_units(json.ptr, json.len) > PENDING_MAX_UTF16) {
			err = ecw_error_set(
				ECW_ETOOLARGE,
				"index-list %s: the reference of (%.100s, %.100s) would hold %zu pending "
				"intents, over one String property's limit",
				r->ctx->job, r->ctx->pk, r->ctx->rk, pending->n);
			goto done;
		}
		if ((err = ecw_entity_set_string(e, "Pending", json.ptr, json.len)) < 0)
			goto done;
	}
	if ((cpk && (!(ncpk = strdup(cpk)) || !(ncrk = strdup(crk))))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	if ((err = ecw_job_check_lease(r->ctx)) < 0)
		goto done;
	err = ecw_table_write(&etag, r->ctx->client, r->il->table, e,
			      r->ref.exists ? ECW_WRITE_UPDATE : ECW_WRITE_INSERT,
			      r->ref.exists ? r->ref.etag : NULL);
	if (lost_race(r, err)) {
		err = RESTART;
		goto done;
	}
	if (err < 0)
		goto done;
	free(r->ref.etag);
	free(r->ref.cpk);
	free(r->ref.crk);
	ecw_index_list_tuples_dispose(&r->ref.pending);
	r->ref.exists = true;
	r->ref.etag = etag;
	r->ref.cpk = ncpk;
	r->ref.crk = ncrk;
	r->ref.pending = *pending;
	ecw_index_list_tuples_init(pending, 3);
	etag = ncpk = ncrk = NULL;
done:
	free(etag);
	free(ncpk);
	free(ncrk);
	ecw_entity_free(e);
	ecw_buf_dispose(&json);
	return err;
}

/* Deletes the ref read (If-Match): it names no list any more. RESTART when
 * it changed since read. */
static int ref_delete(struct run *r)
{
	int err;

	if ((err = ecw_job_check_lease(r->ctx)) == 0)
		err = ecw_table_delete(r->ctx->client, r->il->table, r->ref_pk, r->ref_rk, r->ref.etag);
	if (lost_race(r, err))
		err = RESTART;
	if (err == 0)
		ref_dispose(&r->ref);
	return err;
}

/* Step 3a: records (lpk, lrk, owner) among the ref's intents. */
static int ensure_intent(struct run *r, const char *lpk, const char *lrk)
{
	const char *key[3] = {lpk, lrk, r->owner};
	struct tuples p;
	size_t pos;
	int err;

	if (ecw_index_list_tuples_find(&r->ref.pending, key, &pos))
		return 0;
	if ((err = ecw_index_list_tuples_copy(&p, &r->ref.pending)) < 0)
		return err;
	if ((err = ecw_index_list_tuples_add(&p, key)) == 0 &&
	    (err = ref_write(r, r->ref.cpk, r->ref.crk, &p)) == 0)
		ecw_crash_point("index_list.intent");
	ecw_index_list_tuples_dispose(&p);
	return err;
}

/* The intents of others: those this run may drop removed, its own and the
 * abandoned ones (*own counts them). */
static int others_intents(struct tuples *out, size_t *own, const struct run *r)
{
	int err;

	*own = 0;
	if ((err = ecw_index_list_tuples_copy(out, &r->ref.pending)) < 0)
		return err;
	for (size_t i = out->n; i-- > 0;)
		if (strcmp(out->v[i].s[2], r->owner) == 0 || strcmp(out->v[i].s[2], ABANDONED) == 0) {
			ecw_index_list_tuples_remove_at(out, i);
			(*own)++;
		}
	return 0;
}

/* ---- lists ------------------------------------------------------------------------------ */

/* Best effort, when giving up on adding to (lpk, lrk) for good: our intent
 * for it guards nothing any more (a ref left naming nothing goes, as if the
 * intent had never been written). Keeps the error being reported. */
static void drop_intent(struct run *r, const char *lpk, const char *lrk)
{
	const char *key[3] = {lpk, lrk, r->owner};
	struct ecw_error saved = *ecw_error_last();
	struct tuples p;
	size_t pos;

	if (!ecw_index_list_tuples_find(&r->ref.pending, key, &pos) ||
	    ecw_index_list_tuples_copy(&p, &r->ref.pending) < 0)
		return;
	ecw_index_list_tuples_remove_at(&p, pos);
	if (p.n == 0 && !r->ref.cpk)
		(void)!ref_delete(r);
	else
		(void)!ref_write(r, r->ref.cpk, r->ref.crk, &p);
	ecw_index_list_tuples_dispose(&p);
	ecw_error_set(saved.code, "%s", saved.message);
}

/* A list too large for the design (ecw_index_list_store_save's ECW_ETOOLARGE), in
 * the words of this run's source. */
static int too_large(struct run *r)
{
	char msg[400];

	snprintf(msg, sizeof(msg), "%.*s", (int)sizeof(msg) - 1, ecw_error_last()->message);
	return ecw_error_set(ECW_ETOOLARGE,
			     "index-list %s: list %s/%s with (%.80s, %.80s); make the lists finer "
			     "(partition_key, row_key)",
			     r->ctx->job, r->il->table, msg, r->ctx->pk, r->ctx->rk);
}

/* Step 3a: the intent for ch's list (this run will add S to it). */
static int intent_write(struct run *r, struct il_change *ch)
{
	const char *list_key[2] = {ch->lpk, ch->lrk};
	int err;

	if ((err = ensure_intent(r, ch->lpk, ch->lrk)) != 0 ||
	    (err = ecw_index_list_tuples_add(&r->touched, list_key)) < 0)
		return err;
	ch->intent = true;
	return 0;
}

/* Step 3a for an add to (lpk, lrk), before the key is handed in: the
 * intent, unless the ref has it already, or names the list as committed (S
 * is then most likely in it, and the combiner says whether an intent is
 * needed after all: a rerun finds S in place without a write). */
static int intent_first(struct run *r, struct il_change *ch)
{
	const char *key[3] = {ch->lpk, ch->lrk, r->owner};
	size_t pos;

	if (!ecw_index_list_tuples_find(&r->ref.pending, key, &pos) && same(r->ref.cpk, ch->lpk) &&
	    same(r->ref.crk, ch->lrk))
		return 0;
	return intent_write(r, ch);
}

/* Steps 3 and 4 for one list: S into (add) or out of (lpk, lrk), by read,
 * change, conditional write (ecw_index_list_store_save: the list goes when it
 * empties), again after a lost race; within a worker, together with the
 * changes other runs make to the same list at the same time
 * (index_list_combine.c). An add records its intent first (step 3a); one
 * that would grow the list past what the store can hold is a permanent
 * error of this run only, its intent dropped again. */
static int list_change(struct run *r, const char *lpk, const char *lrk, bool add)
{
	struct il_change ch = {.ctx = r->ctx,
			       .table = r->il->table,
			       .lpk = lpk,
			       .lrk = lrk,
			       .key = {r->ctx->pk, r->ctx->rk},
			       .add = add};
	int err;

	if (add && (err = intent_first(r, &ch)) != 0)
		return err;
	for (;;) {
		err = ecw_index_list_combine(r->il->combiners, &ch);
		r->conflicts += ch.conflicts;
		if (err == ECW_EINVALID)
			return ecw_error_set(ECW_EINVALID, "index-list %s: %s", r->ctx->job,
					     ecw_error_last()->message);
		if (err == ECW_ETOOLARGE) {
			err = too_large(r);
			drop_intent(r, lpk, lrk);
		}
		if (err < 0 || ch.result != IL_NEED_INTENT)
			break;
		if ((err = intent_write(r, &ch)) != 0)
			return err;
	}
	if (err < 0 || ch.result != IL_CHANGED)
		return err;
	if (add) {
		r->added = true;
		ecw_crash_point("index_list.added");
	} else {
		r->removed = true;
		ecw_crash_point("index_list.removed");
	}
	return 0;
}

/* Step 4: every list the ref or this run knows, but the target. */
static int remove_elsewhere(struct run *r)
{
	struct tuples lists;
	int err = 0;

	ecw_index_list_tuples_init(&lists, 2);
	if (r->ref.cpk) {
		const char *k[2] = {r->ref.cpk, r->ref.crk};
		err = ecw_index_list_tuples_add(&lists, k);
	}
	for (size_t i = 0; err == 0 && i < r->ref.pending.n; i++)
		err = ecw_index_list_tuples_add(&lists, (const char *const *)r->ref.pending.v[i].s);
	for (size_t i = 0; err == 0 && i < r->touched.n; i++)
		err = ecw_index_list_tuples_add(&lists, (const char *const *)r->touched.v[i].s);
	for (size_t i = 0; err == 0 && i < lists.n; i++)
		if (!is_target(r, lists.v[i].s[0], lists.v[i].s[1]))
			err = list_change(r, lists.v[i].s[0], lists.v[i].s[1], false);
	ecw_index_list_tuples_dispose(&lists);
	return err;
}

/* Step 5: the ref names the target, without this run's intents. */
static int commit(struct run *r)
{
	struct tuples others;
	size_t own;
	int err;

	if ((err = others_intents(&others, &own, r)) < 0)
		return err;
	if (r->tpk) {
		if (r->ref.exists && is_target(r, r->ref.cpk, r->ref.crk) && own == 0)
			goto done;
		err = ref_write(r, r->tpk, r->trk, &others);
	} else {
		if (!r->ref.exists || (others.n > 0 && !r->ref.cpk && own == 0))
			goto done;
		if (others.n == 0) {
			err = ref_delete(r);
		} else {
			err = ref_write(r, NULL, NULL, &others);
		}
	}
	if (err == 0)
		ecw_crash_point("index_list.ref");
done:
	ecw_index_list_tuples_dispose(&others);
	return err;
}

/* One round: 0 done, RESTART, or an error. */
static int round_once(struct run *r)
{
	bool exists;
	char *etag = NULL;
	int err;

	if ((err = read_source(&r->src_exists, &r->src_etag, r, true)) < 0)
		return err;
	ecw_crash_point("index_list.read");
	if ((err = ref_read(r)) < 0)
		return err;
	if (r->tpk && (err = list_change(r, r->tpk, r->trk, true)) != 0)
		return err;
	if ((err = remove_elsewhere(r)) < 0 || (err = commit(r)) != 0)
		return err;
	/* Step 6: was this round's value still the current one? */
	if ((err = read_source(&exists, &etag, r, false)) < 0)
		return err;
	if (exists != r->src_exists || (exists && strcmp(etag, r->src_etag) != 0))
		err = RESTART;
	free(etag);
	return err;
}

/* A run (or an abandon) of the message in ctx: the owner, the ref's keys. */
static int run_init(struct run *r, const void *settings, struct ecw_job_ctx *ctx)
{
	memset(r, 0, sizeof(*r));
	r->il = settings;
	r->ctx = ctx;
	r->owner = ctx->message_id ? ctx->message_id : ctx->trace_id ? ctx->trace_id : "";
	ecw_index_list_tuples_init(&r->touched, 2);
	ecw_index_list_tuples_init(&r->ref.pending, 3);
	return ecw_index_list_ref_keys(r->ref_pk, r->ref_rk, ctx->job, ctx->pk, ctx->rk);
}

int ecw_index_list_run(const void *settings, struct ecw_job_ctx *ctx)
{
	struct run r;
	int err = 0;

	if ((err = run_init(&r, settings, ctx)) < 0)
		return err;
	for (r.rounds = 1; r.rounds <= MAX_ROUNDS; r.rounds++) {
		if (r.rounds > 1)
			ecw_index_list_backoff(r.rounds);
		err = round_once(&r);
		round_dispose(&r);
		if (err != RESTART)
			break;
	}
	if (err == RESTART) {
		r.rounds = MAX_ROUNDS;
		err = ecw_error_set(
			ECW_ETRANSIENT,
			"index-list %s: (%.100s, %.100s) or its reference kept changing (%d rounds, "
			"%d lost races)",
			ctx->job, ctx->pk, ctx->rk, MAX_ROUNDS, r.conflicts);
	}
	if (err == 0)
		snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "%s rounds=%d conflicts=%d",
			 r.added && r.removed ? "moved"
			 : r.added            ? "added"
			 : r.removed          ? "removed"
					      : "unchanged",
			 r.rounds, r.conflicts);
	ecw_index_list_tuples_dispose(&r.touched);
	return err;
}

/* The end of abandon and register_stray: their ref write retried MAX_CAS
 * times; r disposed. */
static int ref_writes_done(struct run *r, int err)
{
	if (err == RESTART)
		err = ecw_error_set(ECW_ETRANSIENT,
				    "index-list %s: the reference of (%.100s, %.100s) changed under us %d "
				    "times in a row",
				    r->ctx->job, r->ctx->pk, r->ctx->rk, MAX_CAS);
	ref_dispose(&r->ref);
	ecw_index_list_tuples_dispose(&r->touched);
	return err;
}

/* The message is being poisoned (ecw_job_type.abandon): its intents in the
 * ref become ABANDONED's, which every later run cleans and drops (steps 4 and
 * 5) as it does its own. One conditional write; none when the ref is absent
 * or holds no intent of this owner (the header argues why this is safe). */
int ecw_index_list_abandon(const void *settings, struct ecw_job_ctx *ctx)
{
	struct run r;
	int err;

	if ((err = run_init(&r, settings, ctx)) < 0)
		return err;
	for (int attempt = 0; attempt < MAX_CAS; attempt++) {
		struct tuples p;
		size_t moved = 0;

		if (attempt)
			ecw_index_list_backoff(attempt);
		if ((err = ref_read(&r)) < 0 || !r.ref.exists)
			break;
		ecw_index_list_tuples_init(&p, 3);
		for (size_t i = 0; err == 0 && i < r.ref.pending.n; i++) {
			const char *key[3] = {r.ref.pending.v[i].s[0], r.ref.pending.v[i].s[1],
					      r.ref.pending.v[i].s[2]};
			if (strcmp(key[2], r.owner) == 0 && strcmp(key[2], ABANDONED) != 0) {
				key[2] = ABANDONED;
				moved++;
			}
			err = ecw_index_list_tuples_add(&p, key);
		}
		if (err == 0 && moved && (err = ref_write(&r, r.ref.cpk, r.ref.crk, &p)) == 0)
			ecw_crash_point("index_list.abandoned");
		ecw_index_list_tuples_dispose(&p);
		if (err != RESTART)
			break;
	}
	return ref_writes_done(&r, err);
}

/* For the audit's repair of a key found in a list its source does not
 * compute to (index_list_audit.c): that list becomes an intent of ABANDONED
 * in the source's ref, which the next run cleans and drops (steps 4 and 5).
 * ensure_intent with that owner: one conditional write, none when the ref
 * names it already. Safe for the same reason as abandon: an ABANDONED intent
 * only makes runs remove S from a list S does not belong in. */
int ecw_index_list_register_stray(const void *settings, struct ecw_job_ctx *ctx, const char *lpk,
				  const char *lrk)
{
	struct run r;
	int err;

	if ((err = run_init(&r, settings, ctx)) < 0)
		return err;
	r.owner = ABANDONED;
	for (int attempt = 0; attempt < MAX_CAS; attempt++) {
		if (attempt)
			ecw_index_list_backoff(attempt);
		if ((err = ref_read(&r)) < 0 || (err = ensure_intent(&r, lpk, lrk)) != RESTART)
			break;
	}
	return ref_writes_done(&r, err);
}

const char *ecw_index_list_source_table(const void *settings)
{
	return ((const struct index_list *)settings)->source;
}

const char *ecw_index_list_target_table(const void *settings)
{
	return ((const struct index_list *)settings)->table;
}

/* ecw_job_type.list_get: the list at (lpk, lrk), read through the store. */
int ecw_index_list_get(const void *settings, struct ecw_client *c, const char *lpk, const char *lrk,
		       int (*each)(void *arg, const char *pk, const char *rk), void *arg, bool *exists)
{
	const struct index_list *il = settings;
	struct ecw_entity *none = NULL;
	struct ecw_buf pk, reads;
	struct il_list list;
	int err = 0;

	*exists = false;
	ecw_buf_init(&pk, 0);
	ecw_buf_init(&reads, 0);
	if (!lpk) {
		if ((err = ecw_entity_new(&none, "", "")) < 0 ||
		    (err = ecw_template_select(&reads, il->pk)) < 0)
			goto done;
		if (reads.len > 0 || ecw_template_render(&pk, il->pk, none, ECW_TEMPLATE_PLAIN) < 0) {
			err = ecw_error_set(
				ECW_EINVALID,
				"the lists' partition_key \"%.200s\" depends on the source: name the "
				"partition",
				ecw_template_text(il->pk));
			goto done;
		}
		lpk = ecw_buf_cstr(&pk);
	}
	if ((err = ecw_index_list_store_load(&list, c, il->table, lpk, lrk)) < 0)
		goto done;
	*exists = list.exists;
	for (size_t i = 0; err == 0 && i < list.keys.n; i++)
		err = each(arg, list.keys.v[i].s[0], list.keys.v[i].s[1]);
	ecw_index_list_store_dispose(&list);
done:
	ecw_entity_free(none);
	ecw_buf_dispose(&pk);
	ecw_buf_dispose(&reads);
	return err;
}
