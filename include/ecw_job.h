/* SPDX-License-Identifier: MIT */
/* ecw_job.h - the seam between the runtime and the job types. A job type is a
 * const ops table (jobs/<type>.c, or jobs/<type>_audit.c on top of it)
 * listed in the registry (jobs/job_type.c).
 * The runtime decodes a message, finds the configured job, and calls run with
 * a context it owns: the thread's storage client, the message's keys and
 * fields, and the lease flag. A job sees only this header, ecw_node.h (for
 * its settings) and the storage API. */
#ifndef ECW_JOB_H
#define ECW_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "ecw_node.h"
#include "ecw_err.h"
#include "ecw_storage.h"

struct json_object;
struct ecw_audit_ctx;

/* The most peers (ecw_job_ctx) a run is told of, and the bytes of their
 * RowKeys together: one query names them with the run's own key. */
#define ECW_JOB_PEERS_MAX (ECW_TABLE_GET_MANY_KEYS - 1)
#define ECW_JOB_PEERS_BYTES 4096

struct ecw_job_ctx {
	struct ecw_client *client; /* this thread's connection */
	const char *job;           /* the configured job name */
	const char *pk, *rk;       /* the changed entity's keys (checked);
					   * NULL for a keyless type */
	const char *trace_id;      /* "id" from the message, or the message id (a
				    * correlation id, not the W3C trace context's
				    * trace id, which the runtime keeps to itself) */
	const char *message_id;
	long dequeue_count;
	const struct json_object *message; /* the whole decoded message, for extra fields */
	const atomic_bool *lease_lost;     /* set by the runtime when the lease is gone */
	const atomic_bool *stopping;       /* set at shutdown: finish soon if you can */
	/* For a type with reads_ahead: the RowKeys of other messages of this
	 * job on the same pk that wait in this worker, received and not yet
	 * running, when this run was taken (at most ECW_JOB_PEERS_MAX): runs
	 * about to start, whose entities the job may read with its own. Valid
	 * during run; NULL and 0 when none. */
	const char *const *peers;
	size_t npeers;
	char outcome_detail[64]; /* optional word for the log ("missing", ...) */
	int later_s;             /* with ECW_ELATER: run me again in this many seconds (1..604800) */
	char error[512];         /* run_group: why this member failed */
	int error_status;        /* run_group: the storage answer's HTTP status behind error, 0 if none */
	char error_code[64];     /* run_group: its x-ms-error-code, "" if none */
	char error_table[64];    /* run_group: the missing table of an ECW_ENOTABLE, "" if none */
};

/* Jobs call this before each write: once the lease is lost another worker may
 * hold the message, and this one must not race it. Returns 0, or
 * ECW_ETRANSIENT with the last error set ("lease lost"). */
int ecw_job_check_lease(const struct ecw_job_ctx *ctx) ECW_MUST_USE;

/* How the runtime reads run's result: 0 is success; ECW_EINVALID and
 * ECW_ETOOLARGE are permanent (poison at once: no retry can fix them);
 * ECW_ENOTABLE (a table the job reads or writes does not exist) holds the
 * message, never poisoned for it, until the table exists: a job never reads
 * a missing table as an absent entity, and writes nothing once it meets
 * one; ECW_ENOCONTAINER (a blob container the job needs does not exist) is
 * held the same way; ECW_ELATER is no failure: the job is not done yet and
 * asks to run again in ctx->later_s seconds (blob-ref: a blob still in its
 * grace), so the message is hidden that long, requeued rather than
 * poisoned at its last allowed delivery, and chains nothing; every other
 * error is transient (retried with backoff until max_dequeue_count). */
bool ecw_job_err_is_permanent(int err);

struct ecw_job_type {
	const char *name; /* the `type:` in the config */
	/* Messages of this type name no entity: no pk/rk (ctx->pk and ctx->rk
	 * are NULL); the job reads its own fields from ctx->message. Such a
	 * job has no `then`, and no `then` names it. Otherwise a message
	 * without keys is a permanent failure. */
	bool keyless;
	/* Reads the job's settings (the map under jobs.NAME) into *out; reports
	 * problems in errs and returns -1. The keys `type` and `then` are read
	 * by the configuration itself: every type's list of allowed keys must
	 * include both. */
	int (*parse)(void **out, const struct ecw_node *job, struct ecw_node_errors *errs);
	/* Creates the tables the job writes, at start when create_missing is
	 * set; may be NULL. Never a table the job only reads (its source): a
	 * typo'd source made empty would look like every entity was deleted. */
	int (*prepare)(const void *settings, struct ecw_client *c);
	int (*run)(const void *settings, struct ecw_job_ctx *ctx);
	/* Optional: runs n (2..group_max) messages of this job at once, to
	 * spend fewer requests (entity group transactions instead of a write
	 * per entity). The runtime groups only messages whose keys share a
	 * PartitionKey (their RowKeys may repeat: duplicates). Each member's
	 * outcome must be what run would give it, and storage must end, after
	 * a crash or failure at any point, as running them one by one could
	 * leave it: a group is an optimisation, never another semantics. Sets
	 * errs[i] for ctxs[i] (0, or an error as run returns it, with its text
	 * in ctxs[i].error) and each member's outcome_detail. May be NULL. */
	void (*run_group)(const void *settings, struct ecw_job_ctx *ctxs, size_t n, int *errs);
	size_t group_max; /* most members run_group takes, >= 2 */
	/* run reads its source ahead for the messages waiting behind it
	 * (ctx->peers): the runtime fills peers only for such a type. */
	bool reads_ahead;
	/* The message ctx->message_id will never run again: it is being
	 * poisoned (a permanent failure, or more deliveries than
	 * max_dequeue_count), and a replay puts its text back under a new id.
	 * Hands over whatever the job keeps under that id, so that later runs
	 * of any id can finish it. Called before the envelope is put, whether
	 * or not run was called for this delivery, with the context run gets;
	 * no run of this id is in flight on this worker. An error is logged
	 * and the message is poisoned all the same. May be NULL. */
	int (*abandon)(const void *settings, struct ecw_job_ctx *ctx);
	void (*free)(void *settings);
	/* The table whose entities the job derives from, for `ecworker
	 * backfill`; may be NULL when the job has none. */
	const char *(*source_table)(const void *settings);
	/* For `ecworker backfill` of a job whose source is no table
	 * (source_table NULL: a move from blobs): calls each(arg, pk, rk) for
	 * every source it finds, in its order, until each returns non-zero
	 * (returned) or an error; 0 at the end. May be NULL. */
	int (*source_keys)(const void *settings, struct ecw_client *c,
			   int (*each)(void *arg, const char *pk, const char *rk), void *arg);
	/* The table the job writes (archive, index, targets), for `ecworker
	 * status`; may be NULL. */
	const char *(*target_table)(const void *settings);
	/* The application's blob container the job works in (blob-ref) or
	 * reads (a move from_blob), for the preflight (check-config --online,
	 * and the start: a missing one blocks the job, as a missing source
	 * table does); never created by the worker. The member may be NULL,
	 * and so may what it returns (none for these settings). */
	const char *(*container)(const void *settings);
	/* Keyless types: the message fields run reads besides "job" and
	 * "window_start" (NULL-terminated, e.g. {"device", NULL}), so that a
	 * schedule can check it provides them; may be NULL (none). */
	const char *const *(*message_fields)(const void *settings);
	/* Types that work on a time window named by the message's
	 * "window_start": the window's length in ms (3600000, 86400000 or
	 * 604800000; weeks start Monday 00:00 UTC), so that a schedule's
	 * `window:` can be checked against it; NULL for other types. */
	int64_t (*window_ms)(const void *settings);
	/* `ecworker audit` (ecw_audit.h): compares the derived data with a
	 * recomputation from the source, both directions, reports each finding
	 * with ecw_audit_note, and with ctx->repair fixes what it may through
	 * run. Returns 0 when the scan finished (findings are not errors), or
	 * an error when it could not. NULL: the type cannot be audited (yet). */
	int (*audit)(const void *settings, struct ecw_audit_ctx *ctx);
	/* `ecworker index get`: reads the list the job keeps at (lpk, lrk) of
	 * its table, whole, and calls each(arg, pk, rk) for every key in order
	 * (a non-zero return stops the walk and is returned). lpk NULL: the
	 * job's partition_key, when it has no placeholder (ECW_EINVALID, saying
	 * so, when it has). *exists is false when there is no such list (no
	 * source has that value): not an error. NULL: the type keeps no lists. */
	int (*list_get)(const void *settings, struct ecw_client *c, const char *lpk, const char *lrk,
			int (*each)(void *arg, const char *pk, const char *rk), void *arg, bool *exists);
};

/* The registry: NULL when no type has that name. */
const struct ecw_job_type *ecw_job_type_find(const char *name);
/* Names of all types, NULL-terminated, for error messages. */
const char *const *ecw_job_type_names(void);

/* ---- reading job settings (jobs/job.c), for the job types and the
 * migrations alike ---- */

struct ecw_template;

/* job[key] as a table name, checked by ecw_table_name_check (its message, at
 * the value's FILE:LINE:COL). */
int ecw_job_setting_table(char **out, const struct ecw_node *job, const char *key, bool required,
			  struct ecw_node_errors *errs);
/* job[key] compiled as a template; *out stays NULL when absent and optional. */
int ecw_job_setting_template(struct ecw_template **out, const struct ecw_node *job, const char *key,
			     bool required, struct ecw_node_errors *errs);
/* The same for an OData $filter (ECW_TEMPLATE_FILTER): a placeholder that
 * could change the filter's structure is refused at its FILE:LINE:COL. */
int ecw_job_setting_filter(struct ecw_template **out, const struct ecw_node *job, const char *key,
			   bool required, struct ecw_node_errors *errs);

#endif
