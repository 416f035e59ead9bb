/* SPDX-License-Identifier: MIT */
/* mixed_private.h - what the files of the mixed-workload scenario runner share (mixed.h is its interface
 * to the tests; this header is for these files only): the scenario's job names and keys, the fixture
 * (struct mx), the worker processes, the producer threads, the tally of the workers' logs and metrics,
 * what a chaos run records, and the functions each file offers the others:
 *   mixed.c        the fixture, the workers, the run (drive, drain, tally, the calm verdict) and the
 *                  small helpers the others use (message id sets, queue counts, string properties);
 *   mixed_app.c    the application: the seed data, the plan and the producer threads carrying it out;
 *   mixed_judge.c  the judge: the end state against a recomputation from the source tables;
 *   mixed_chaos.c  what a chaos run adds: faultproxy, an Azurite restart, the poison queue listed and
 *                  replayed, every message put accounted for, the chaos verdict, and the end as
 *                  production ends it (`ecworker audit`, repairing only the index's known window). */
#ifndef ECW_MIXED_PRIVATE_H
#define ECW_MIXED_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "itest.h"
#include "mixed.h"
#include "proc.h"

#define J_ARCHIVE "archive-employee"
#define J_RESTORE "restore-employee"
#define J_EMAIL "employee-by-email"
#define J_LAST "employees-by-lastname"
#define J_ORDERS "customer-to-orders"
#define NJOBS 5

#define EMAIL_PK "email"
#define LIST_PK "lastname"
#define EMAIL_REF "~ref~" J_EMAIL "~"
#define LIST_REF "~ref~" J_LAST "~"
#define CUST_PK "Customers"

#define MAX_EMP 64
#define MAX_CUST 16
#define MAX_WORKERS 4
#define MAX_PRODUCERS 4

/* The jobs, in the configuration's order (mixed.c). */
extern const char *const MX_JOBS[NJOBS];

/* The four LastNames the employees move between (mixed_app.c). */
extern const char *const MX_LAST_NAMES[4];

/* ---- the fixture -------------------------------------------------------------------- */

/* Message ids, for the per-message account of a chaos run. */
struct idset {
	char (*v)[64];
	size_t n, cap;
	bool sorted;
};

struct mx {
	const struct mixed_scenario *sc;
	unsigned seed; /* the plan's (ECW_TEST_SEED replays it) */
	struct proc_azurite az;
	bool private_az;
	char az_dir[640]; /* an on-disk Azurite's location; "" in memory */
	const char *connstr;
	char env_conn[700]; /* ECW_TEST_CONNECTION_STRING=... for the workers (the proxy's ports in chaos) */
	char env_direct[700]; /* ... straight to Azurite, for the poison commands */
	struct proc proxy;    /* faultproxy, when the chaos has fault rates */
	bool proxy_on;
	char proxy_stats[640], proxy_ready[640];
	struct ecw_account *acct;
	struct ecw_client *c; /* the test thread's */
	char queue[64], poison[64];
	char emp[64], arch[64], idx[64], cust[64], orders[64];
	char epk[MAX_EMP][64], erk[MAX_EMP][64];

	/* shared with the producer threads */
	pthread_mutex_t mu;
	char **hist; /* every message text put, for stale re-sends */
	size_t nhist, caphist;
	struct idset put_ids; /* the service's id of every message put */
	atomic_bool pause;    /* the producers wait between operations while set */
	atomic_int seq;       /* fresh e-mails and names */
	atomic_int puts, moves, email_changes, cust_changes, cust_drops, cust_deletes, cust_recreates;
	atomic_int archives, restores, stale, dups, delayed, b64, app_412, app_404, app_skipped, handovers;
};

/* Message ids (mixed.c): added, looked up (sorting the set first). */
void mx_idset_add(struct idset *s, const char *id);
bool mx_idset_has(struct idset *s, const char *id);

/* The approximate message count of queue q. */
long long mx_queue_count(struct mx *x, const char *q);

/* Prints what the poison queue holds (for a failure message). */
void mx_show_poison(struct mx *x);

/* A string property's value, or NULL (no entity, no such property, another type). */
const char *mx_strp(const struct ecw_entity *e, const char *name);

/* ---- the workers ------------------------------------------------------------------------ */

struct worker {
	struct proc p;
	int n;         /* from 1 */
	int port;      /* its metrics port (a new one at each restart) */
	char cfg[640]; /* its configuration file */
	char env_port[48], env_jitter[64];
};

/* ---- the application (mixed_app.c) ------------------------------------------------------- */

struct op;

struct producer {
	struct mx *x;
	int id;
	pthread_t tid;
	struct ecw_client *c;
	struct op *ops;
	size_t nops, capops;
	unsigned seed;
	char *last; /* the last text this thread put */
	int failed;
	char error[768];
	atomic_bool done;
	atomic_bool paused; /* waiting at mx.pause */
};

/* Seeds the source tables: the employees (the first archived0 in the archive),
 * the customers and their orders. */
void mx_seed_data(struct mx *x);

/* Deals the plan of sc->total messages out to the producers (seed fixes it). */
void mx_make_plan(struct mx *x, struct producer *prods, unsigned seed);

/* A producer thread: carries out its part of the plan (pthread_create's start). */
void *mx_producer_main(void *arg);

/* ---- the judge (mixed_judge.c) ----------------------------------------------------------- */

/* The tables read at the end. */
struct state {
	struct ecw_entity **emp, **arch, **idx, **cust, **orders;
	size_t nemp, narch, nidx, ncust, norders;
};

/* Reads the tables into s and fails the test, listing every difference (the
 * first 40), unless they equal a recomputation from the source tables. */
void mx_check_end_state(struct mx *x, struct state *s);
void mx_state_free(struct state *s);

/* ---- the run: tallies (mixed.c) ---------------------------------------------------------- */

enum { OC_SUCCEEDED, OC_RETRIED, OC_POISONED, OC_LEASE_LOST, OC_OTHER, NOC };

struct tally {
	long long by[NJOBS + 1][NOC]; /* the last row: unknown job */
	long long rounds, conflicts, warn_lines, storage_errors;
	long long m412, m409, m404, retries, requests;
	char first_poison[1024];
	char first_other[1024];
	struct idset ok_ids, lost_ids; /* message ids with a succeeded / lease-lost outcome */
};

/* ---- chaos (mixed_chaos.c) --------------------------------------------------------------- */

struct proxy_stats {
	long long connections, requests, f503, reset_before, reset_after, stall;
	double cpu_s; /* the proxy's user + system time */
};

struct chaos_state {
	int kills;
	int64_t t_produced;       /* when the last producer finished */
	bool restarted;           /* Azurite was stopped and started again */
	long long count_at_stop;  /* messages on the queue when it stopped */
	long stop_ms, outage_ms;  /* SIGTERM to exit; SIGTERM to listening again */
	long long retries_before; /* the workers' client retries just before it stopped */
	struct proxy_stats ps;
};

/* The poison queue as the operator's `poison list --json` shows it. */
struct poison_seen {
	struct idset ids; /* the job-queue message id of each envelope */
	long long n, max_dequeue, permanent;
};

/* Every message put, accounted for (see mx_account_messages). */
struct account {
	long long succeeded, poisoned, lease_lost, unlogged;
	char first_unlogged[64];
};

/* The chaos has fault rates: the workers talk to Azurite through faultproxy. */
bool mx_has_faults(const struct mixed_chaos *ch);

/* Starts faultproxy in front of the private Azurite's queue and table ports
 * and points the workers' connection string at it. */
void mx_start_proxy(struct mx *x, unsigned seed);

/* Stops the proxy (SIGTERM: it writes its stats and exits 0) and reads them. */
void mx_stop_proxy(struct mx *x, struct proxy_stats *ps);

/* Stops Azurite (SIGTERM) with the producers held between two operations, keeps
 * it down, and starts it again on the same ports and location. */
void mx_restart_azurite(struct mx *x, struct worker *w, struct producer *prods, struct chaos_state *cs);

/* The poison queue as the operator's `poison list --json` shows it (every
 * envelope must carry a reason and an error). */
void mx_list_poison(struct mx *x, const struct worker *w, struct poison_seen *ps);

/* `poison replay`: the operator's way back. Returns how many it replayed. */
long long mx_replay_poison(struct mx *x, const struct worker *w);

void mx_account_messages(struct mx *x, struct tally *t, struct poison_seen *ps, struct account *a);

/* The chaos run's verdict on the chaos, the queues and the account. */
void mx_judge_chaos(struct mx *x, struct tally *t, const struct chaos_state *cs, struct poison_seen *ps,
                    const struct account *a, long long replayed);

/* Ends a chaos run as production ends it, once the queue has drained and
 * before the judge: `ecworker audit` of every job, which may find only
 * what jobs/index.c documents as not covered (orphan email entries, no
 * reference names them; anything else fails the test, the finding
 * printed), then `audit --repair` of the email index, then an audit of
 * every job that must find nothing. Returns how many orphans the first
 * audit found (the times the index's window was hit). */
long long mx_audit_end(struct mx *x, const struct worker *w);

#endif
