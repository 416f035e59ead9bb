/* SPDX-License-Identifier: MIT */
/* ecw_audit.h - the seam between `ecworker audit` (worker/cmd/audit.c) and
 * the job types that can be audited (the optional `audit` member of struct
 * ecw_job_type): what a finding is, how a job reports one, and the pure
 * comparison rules (jobs/audit.c) that decide each kind, so that they are
 * unit-tested apart from any storage.
 *
 * The design (issue 21), in one place:
 *   - Each job type's audit lives next to the job (jobs/<type>.c), because it
 *     needs what the job computes (the index entry a source gives, the
 *     move's target keys) and must compute it exactly as run does. The rules
 *     that judge one pair of entities are pure functions here. The command
 *     owns the options, the pacing, the counts, the report and the exit
 *     status; a job's audit owns the scan and the repair.
 *   - Both sides are read by streaming paged queries (ecw_table_query_*),
 *     one entity at a time: memory stays bounded by a page, whatever the
 *     table's size. The other side of a pair is read with one GET per
 *     entity: an index is ordered by value and its source by key, so a merge
 *     of two sorted streams would need an external sort; a GET per entity is
 *     the price (worker/README.md, "Auditing", gives the cost per entity), and --rate
 *     caps it.
 *   - A repair goes through the job's own convergent step: the job's run
 *     with a context naming the SOURCE's keys, exactly as a message would,
 *     with its ETag rules, so a repair racing live workers is just one more
 *     duplicate message, which the jobs are built to tolerate. Where run
 *     alone would not reach a finding (an index entry no back-reference
 *     names), the job first registers it where run looks (index: as a
 *     pending location of its source's back-reference, which is what step 2
 *     of a run does), then runs. A conflict is never repaired. A repair never
 *     deletes the only copy of an entity, and touches a source table only to
 *     complete a move whose two copies are identical.
 *   - What a job's audit cannot check (a fanout's orphans, when its filter
 *     does not name the source) it reports as a limit (ecw_audit_limit),
 *     never as a clean result.
 *
 * Ownership: the command owns struct ecw_audit_ctx and everything it points
 * to; the job's audit reads the settings and calls the callbacks; a finding
 * passed to on_finding lives only for that call. */
#ifndef ECW_AUDIT_H
#define ECW_AUDIT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ecw_entity.h"
#include "ecw_err.h"

struct ecw_client;
struct ecw_entity;
struct json_object;
struct ecw_job_ctx;
struct ecw_table_query;

enum ecw_audit_kind {
	ECW_AUDIT_OK = -1, /* consistent: not a finding */
	/* Derived data a source should have and has not (an index entry). */
	ECW_AUDIT_MISSING = 0,
	/* Derived data that is there but differs from its recomputation (an
	 * index entry's copies or back-reference; a move: an entity in both
	 * tables, identical, so the move is unfinished). */
	ECW_AUDIT_STALE,
	/* Derived data whose source is gone or no longer gives it. */
	ECW_AUDIT_ORPHAN,
	/* Two claims that the audit will not choose between: two sources
	 * computing one index key, an entity there that is no entry, a move's
	 * two copies that differ. Reported, never repaired. */
	ECW_AUDIT_CONFLICT,
	ECW_AUDIT_KINDS
};

/* "missing", "stale", "orphan", "conflict" ("ok" for ECW_AUDIT_OK). */
const char *ecw_audit_kind_name(enum ecw_audit_kind k);

struct ecw_audit_finding {
	enum ecw_audit_kind kind;
	const char *table, *pk, *rk;       /* the entity the finding is about */
	const char *source_pk, *source_rk; /* the source it concerns (NULL: none known) */
	const char *detail;                /* a short phrase ("copies differ"), never a value */
	bool repaired;                     /* --repair fixed it */
	const char *error;                 /* why a repair failed (NULL: none tried, or it
					       * worked); may hold keys: print it escaped */
};

#define ECW_AUDIT_LIMITS 4 /* limits kept per job (more are dropped) */

/* What one job's audit found (kept by ecw_audit_note, _checked, _limit). */
struct ecw_audit_counts {
	uint64_t checked; /* entities compared, both directions */
	uint64_t found[ECW_AUDIT_KINDS];
	uint64_t repaired;
	uint64_t repaired_kind[ECW_AUDIT_KINDS]; /* repaired, by kind (they sum to repaired) */
	/* What the scan could not check, in ecw_audit_limit's words (static
	 * text); reports print them with the counts. */
	const char *limits[ECW_AUDIT_LIMITS];
	size_t nlimits;
};

struct ecw_audit_ctx {
	struct ecw_client *client;
	const char *job;       /* the configured job name (its run's ctx->job) */
	const char *partition; /* only this source partition; NULL: all */
	bool repair;
	volatile sig_atomic_t *stop; /* set by a signal: stop soon (may be NULL) */
	/* Called before each storage request the audit makes (or before each
	 * repair): the command's pacing (--rate). May be NULL. */
	void (*pace)(void *payload);
	/* Called for every finding (examples, progress). May be NULL. */
	void (*on_finding)(const struct ecw_audit_finding *f, void *payload);
	/* Called after each entity compared (progress). May be NULL. */
	void (*on_checked)(const struct ecw_audit_counts *c, void *payload);
	/* --via-queue: a repair enqueues the job's message for the source's
	 * keys (pk, rk) instead of running the job in this process; 0 when the
	 * message is on the queue. NULL: repairs run here. */
	int (*requeue)(const char *pk, const char *rk, void *payload);
	/* The same for a keyless job (a window): its message with these
	 * fields ("name=value", NULL-terminated) put; 0 when it is on the
	 * queue. Set with requeue. */
	int (*requeue_fields)(char *const *fields, void *payload);
	/* After a repair ran the job here for the source's keys (pk, rk): what
	 * the job's message would have chained (`then:`), run the same way, so
	 * that a repaired move also leaves no index entry behind; 0, or the
	 * first error. NULL: nothing chained (a queued repair chains itself). */
	int (*chain)(const char *pk, const char *rk, void *payload);
	void *payload;
	struct ecw_audit_counts counts; /* kept by ecw_audit_note / _checked */
};

/* For the job's audit: counts f (kind and repaired) and hands it on. */
void ecw_audit_note(struct ecw_audit_ctx *ctx, const struct ecw_audit_finding *f);
/* The same for n findings alike (n entities of one kind, one source, one
 * repair): all counted, f handed on once as their example, so that a scan
 * need not keep each entity's keys. n = 0 notes nothing. */
void ecw_audit_note_many(struct ecw_audit_ctx *ctx, const struct ecw_audit_finding *f, uint64_t n);
/* For the job's audit: a part of the comparison it could not make (text: a
 * static phrase, "orphans not checked: ..."), reported rather than passed
 * over in silence. A limit is no finding: the exit status is the counts'. */
void ecw_audit_limit(struct ecw_audit_ctx *ctx, const char *text);
/* For the job's audit: one more entity compared. */
void ecw_audit_checked(struct ecw_audit_ctx *ctx);
/* For the job's audit: before a storage request; true when it should stop. */
bool ecw_audit_pace(struct ecw_audit_ctx *ctx);

/* ---- what the jobs' audits share ---- */

/* A streamed query for an audit pass over table, a page (1,000) at a time:
 * with ctx->partition, only the entities whose partition_prop
 * (PartitionKey, or a property naming the source's) equals it; select: the
 * $select list, NULL for every property. */
int ecw_audit_query(struct ecw_table_query **out, struct ecw_audit_ctx *ctx, const char *table,
		    const char *partition_prop, const char *select) ECW_MUST_USE;
/* The next entity of q (caller frees); *out NULL at the end or once the
 * audit is stopped. A table that does not exist is ECW_ENOTABLE, never an
 * empty table (ecw_audit_table_missing). Paced. */
int ecw_audit_next(struct ecw_entity **out, struct ecw_table_query *q,
		   struct ecw_audit_ctx *ctx) ECW_MUST_USE;
/* Streams q to its end (or until the audit is stopped), lending each entity
 * to each(e, payload); stops at the first error each returns. The caller
 * keeps q. */
int ecw_audit_each(struct ecw_table_query *q, struct ecw_audit_ctx *ctx,
		   int (*each)(const struct ecw_entity *e, void *payload), void *payload) ECW_MUST_USE;
/* A paced GET; *out NULL when the entity is absent. A missing table is
 * ECW_ENOTABLE (ecw_audit_table_missing). */
int ecw_audit_get(struct ecw_entity **out, struct ecw_audit_ctx *ctx, const char *table, const char *pk,
		  const char *rk) ECW_MUST_USE;
/* Rewrites the last error, an ECW_ENOTABLE, to say the audit stopped at
 * that table and repaired nothing from it; returns ECW_ENOTABLE. */
int ecw_audit_table_missing(void);
/* A repair through the job: source (pk, rk) converges as a message for it
 * would make it, by ctx->requeue when set, else by run(settings, ...) here
 * with a context of its own (message id "audit"). Sets f->repaired, or
 * f->error to why it failed (copied into why, cap bytes). Paced. */
void ecw_audit_converge(struct ecw_audit_ctx *ctx, int (*run)(const void *, struct ecw_job_ctx *),
			const void *settings, const char *pk, const char *rk, struct ecw_audit_finding *f,
			char *why, size_t cap);
/* A keyless job's message as JSON, {"job": job, name: value, ...}, from
 * fields ("name=value", NULL-terminated; names under 64 bytes): what
 * ecw_audit_converge_fields runs. ECW_EINVALID, ECW_ENOMEM. */
int ecw_audit_message(struct json_object **out, const char *job, char *const *fields) ECW_MUST_USE;
/* A repair through a keyless job (an export's window): the message made
 * of fields ("name=value", NULL-terminated: the window_start and the
 * job's message fields) converges as it would make it, by
 * ctx->requeue_fields when set, else by run(settings, ...) here with a
 * context of its own whose message holds them (message id "audit"). Sets
 * f->repaired, or f->error to why it failed (copied into why, cap bytes).
 * Paced. */
void ecw_audit_converge_fields(struct ecw_audit_ctx *ctx, int (*run)(const void *, struct ecw_job_ctx *),
			       const void *settings, char *const *fields, struct ecw_audit_finding *f,
			       char *why, size_t cap);
/* After a repair made here that left f->repaired: the job's chain
 * (ctx->chain) for the source's keys, as its message would have run it. A
 * failure takes the repair back (f->repaired false) and says why in f->error
 * (copied into why, cap bytes). Nothing without ctx->chain. */
void ecw_audit_chain(struct ecw_audit_ctx *ctx, const char *pk, const char *rk, struct ecw_audit_finding *f,
		     char *why, size_t cap);

/* ---- the comparison rules (pure) ---- */

/* move: copy is the source entity re-keyed as the move would write it,
 * target what the target table holds at copy's keys (NULL: nothing).
 * OK when there is no target (the move has not run: not drift), STALE when
 * the two are identical (keys, properties, EDM types: an unfinished move),
 * CONFLICT when they differ. */
enum ecw_audit_kind ecw_audit_move_pair(const struct ecw_entity *copy, const struct ecw_entity *target);

/* index, from the source: want is the entry a source computes to, at what
 * the index holds at want's keys (NULL: nothing). other_holds: at belongs to
 * another source, which still computes to these keys (the caller reads it
 * only in that case). MISSING when nothing is there, or another source's
 * entry that it no longer claims (an orphan of that source, taken over by a
 * repair); STALE when this source's entry differs; CONFLICT when another
 * source claims the key too (a unique index), or what is there is no index
 * entry at all; OK otherwise. */
enum ecw_audit_kind ecw_audit_index_entry(const struct ecw_entity *want, const struct ecw_entity *at,
					  bool other_holds);

/* index, the back-reference of a source whose entry is right (found: the
 * reference exists and is this job's and this source's; cur_pk/cur_rk: the
 * current location it names, NULL for none; pending: how many locations it
 * lists besides). OK only when it names want's keys and nothing pending:
 * what a finished run leaves. Otherwise STALE: the next run after a change
 * of the indexed value would not find this entry to remove it. */
enum ecw_audit_kind ecw_audit_index_ref(bool found, const char *cur_pk, const char *cur_rk, size_t pending,
					const struct ecw_entity *want);

/* index, from the index: entry is an index entry, want the entry its source
 * computes to now (NULL: the source is gone or computes to nothing). ORPHAN
 * when want is NULL or at other keys; OK otherwise (an entry at the right
 * keys with other copies is STALE, judged once, from the source). */
enum ecw_audit_kind ecw_audit_index_orphan(const struct ecw_entity *entry, const struct ecw_entity *want);

/* ---- scheduled audits: what a result shows (issue 21, item 5) ---- */

/* The drift of kind k that c leaves behind: found and not repaired, so a
 * repairing audit that fixed everything shows 0 and a read-only one shows
 * what it found (ecw_audit_drift{job,kind} on /metrics). 0 for a kind out of
 * range, or for counts whose repaired exceed found (never made here). */
uint64_t ecw_audit_drift(const struct ecw_audit_counts *c, enum ecw_audit_kind k);

/* ---- end of scheduled audits ---- */

/* The properties an index entry names its source by. */
#define ECW_AUDIT_INDEX_SRC_PK "SourcePartitionKey"
#define ECW_AUDIT_INDEX_SRC_RK "SourceRowKey"

/* ---- fanout (jobs/fanout.c, jobs/fanout_audit.c) ---- */

/* fanout: target's copies against what its source gives: set holds the
 * target properties the source sets (its keys are not compared), removed
 * the target properties that must be absent (the source lacks them, or is
 * gone with on_delete: clear). OK when each of set's properties is in target
 * with the same EDM type and value (an Int32 5 is no Int64 5) and none of
 * removed is there; STALE otherwise. The rule run's step 3 writes by. */
enum ecw_audit_kind ecw_audit_fanout_copies(const struct ecw_entity *set, const char *const *removed,
					    size_t nremoved, const struct ecw_entity *target);
/* ---- index-list (jobs/index_list_audit.c) ---- */

/* index-list, from a source that computes to a list: list_found, the list
 * is there (and is a list); holds, it holds the source's key. MISSING
 * unless both; OK otherwise. */
enum ecw_audit_kind ecw_audit_index_list_member(bool list_found, bool holds);

/* index-list, the reference of a source whose key is in its list (found:
 * it exists and is this source's; cur_pk/cur_rk: the list it names as
 * committed, NULL for none; pending: its intents, SIZE_MAX when
 * unreadable). OK only when it names (lpk, lrk) with no intents: what a
 * finished run leaves. Otherwise STALE: the run after the next change of
 * the value would not find the key to take it out of this list. */
enum ecw_audit_kind ecw_audit_index_list_ref(bool found, const char *cur_pk, const char *cur_rk,
					     size_t pending, const char *lpk, const char *lrk);

/* index-list, a list as a whole: nkeys the keys its Keys holds, has_count
 * and count its Count (an Int32). ORPHAN when it holds no key (an empty
 * list is deleted by the job, whatever its Count says); STALE when Count is
 * absent or differs from nkeys (a Count of 0 beside keys is a wrong Count:
 * deleting that list would lose its keys); OK otherwise. */
enum ecw_audit_kind ecw_audit_index_list_shape(size_t nkeys, bool has_count, int64_t count);

/* index-list, a key in list (lpk, lrk): source_found, its source exists;
 * tpk/trk, the list the source computes to. ORPHAN when the source is gone;
 * STALE when it computes to another list (the key is in the wrong list);
 * OK otherwise. */
enum ecw_audit_kind ecw_audit_index_list_key(bool source_found, const char *tpk, const char *trk,
					     const char *lpk, const char *lrk);

/* ---- end of index-list ---- */

#endif
