/* SPDX-License-Identifier: MIT */
/* runtime_private.h - what the rooms of `ecworker run` share, and no other
 * file: worker/runtime/runtime.c (the threads, the receive loop, dispatch, start
 * and stop), worker/runtime/runtime_take.c (taking work off the waiting list),
 * worker/runtime/runtime_idle.c (the stack of idle job threads),
 * worker/runtime/runtime_renew.c (the lease renewer), worker/runtime/deliver.c (carrying
 * out one delivery, or a group) and worker/runtime/shutdown.c (shutdown's clock,
 * the signal thread, the stall watch).
 * The runtime and its slots are runtime.c's: it creates and frees them;
 * the others borrow them. */
#ifndef ECW_RUNTIME_PRIVATE_H
#define ECW_RUNTIME_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ecw_cancel.h"
#include "ecw_config.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "limiter.h"
#include "message.h"
#include "otlp.h"
#include "outcome.h"
#include "schedule.h"

/* The peers of a run (ecw_job_ctx): copied under rt->mu when the run is
 * taken, into the job thread's own memory. */
struct peers {
	const char *rk[ECW_JOB_PEERS_MAX];
	size_t n;
	char buf[ECW_JOB_PEERS_BYTES];
};

struct slot {
	pthread_mutex_t mu;
	bool busy;      /* holds a received message */
	bool done;      /* its job thread settled it: renewer keeps off */
	bool abandoned; /* shutdown released it: nobody may settle it */
	bool stale;     /* not busy, but still holds its last message's memory */
	atomic_bool lease_lost;
	const struct ecw_queue_def *queue; /* the queue it came from (worker.queues) */
	struct ecw_queue_msg msg;          /* owns msg.text; pop_receipt updated by renewals */
	struct ecw_message m;              /* decoded on receipt (m.job, m.pk, m.rk point into it,
				     * also after a failed decode: for the log) */
	bool decoded;
	char decode_error[512];
	/* The job the message names, resolved once on receipt; NULL when it
	 * did not decode or names no configured job. */
	const struct ecw_job_def *def;
	/* Set on receipt when the message may run in a group: a decoded,
	 * keyed message of a job whose type has run_group, not yet over
	 * max_dequeue_count. Read by job threads under rt->mu. */
	bool groupable;
	/* Set on receipt when the message names one entity of a configured
	 * job and may run (decoded, keyed, not over max_dequeue_count): then
	 * its duplicates in flight with it ride with its run, and no two
	 * runs of its job and keys overlap in this worker (job_thread). */
	bool keyed;
	/* Set on receipt with keyed: hashes of pk, and of pk and rk, which the
	 * job threads compare before the strings (ecw_runtime_take_work looks at every
	 * waiting message against every running one, under rt->mu). */
	uint64_t pk_hash, keys_hash;
	/* Under rt->mu: a job thread holds it, running or riding. */
	bool running;
	/* The duplicates riding with this message's run, a list through
	 * next_rider (job_thread links them under rt->mu; from then on only
	 * the thread that runs this message reads them). */
	struct slot *riders;
	struct slot *next_rider;
	int64_t received_ms;
	int64_t renew_at_ms;
	/* While its job thread runs it alone: its peers, or NULL. */
	const struct peers *peers;
	/* Its run's span ids once a job thread opened them (deliver.c), for
	 * the lines other threads write about it (released, stalled); "" until
	 * then. Under mu. */
	char trace_hex[33];
	char span_hex[17];
};

/* The most messages one job thread runs as a group. */
#define GROUP_CAP 32

struct runtime {
	const struct ecw_config *cfg;
	struct ecw_account *acct;
	struct ecw_client_options copts;
	struct ecw_outcome_limits limits;
	int vis_s;

	struct slot *slots;
	int nslots;   /* concurrency + prefetch: messages held at most */
	int nthreads; /* concurrency: job threads */
	int prefetch;
	int want; /* messages a receive asks for */
	/* The free slots the receive loop waits for while the queue is deep
	 * (its last receive came back full: deep, under mu), so that it
	 * receives several batches at once (receive_deeper) and groups form
	 * over them: about two thirds of the slots, whole batches, at least
	 * want. */
	int deep_want;
	bool deep;

	pthread_mutex_t mu; /* guards everything below */
	/* The idle job threads, the one that went idle last on top: work
	 * wakes that one (ecw_runtime_idle_pop), so the threads that run are
	 * few and warm (their connections open, their memory in cache) instead
	 * of every thread in turn. glibc's condition variable wakes the oldest
	 * waiter: at concurrency 64 each of the 64 threads took a turn. */
	struct thread_arg **idle;
	int idle_n;
	pthread_cond_t main_cv;  /* receive loop: a slot freed, or a signal */
	pthread_cond_t renew_cv; /* renewer: a signal */
	pthread_cond_t sched_cv; /* scheduler: a signal */
	bool sched_exited;       /* the scheduler thread left its loop */
	int *ready;              /* slot indexes waiting for a job thread, oldest first */
	int ready_n;
	int inflight; /* slots held: waiting or running */
	int running;  /* job threads running work */
	/* The adaptive concurrency limit (limiter.h) as the threads obey it:
	 * copied from the limiter under mu when it changes. Job threads take
	 * work while running < limit_now; the receive loop holds at most
	 * limit_now + prefetch messages. */
	int limit_now;
	bool workers_exit;
	atomic_bool stopping; /* first signal */
	atomic_bool force;    /* second signal */

	/* Shutdown's clock. From the first signal the job threads, the
	 * renewer and the scheduler have shutdown_grace (their storage waits
	 * end then: jobs_cancel), and the receive loop a little more to give
	 * back what is still held (final_cancel); the second signal ends
	 * every wait at once. */
	_Atomic int64_t stop_deadline_ms;
	struct ecw_cancel *jobs_cancel;
	struct ecw_cancel *final_cancel;

	struct ecw_limiter limiter;
	struct ecw_circuit *circuit;
	struct ecw_client *probe_client; /* the circuit's probe's: one prober at a time */
	struct thread_arg *threads;      /* the job threads, for the stall watch */
	int64_t stall_timeout_ms;
	/* Runs the audit windows the scheduler claims (schedule.h); NULL when
	 * no schedule is an audit. Set before the scheduler thread starts. */
	struct ecw_schedule_audit *auditor;
	/* Exports one span per run (otlp.h); NULL when no collector is
	 * configured. Set before the job threads start. */
	struct ecw_otlp_exporter *otlp;
};

/* How long the receive loop may still spend giving held messages back after
 * shutdown_grace ran out; the worker exits within grace + this + a moment. */
#define RELEASE_GRACE_MS 1500

/* A job or renewer thread: its own storage connection, made before it starts
 * (so a failure stops start-up instead of silently shrinking the pool) and
 * freed after it is joined. */
struct thread_arg {
	struct runtime *rt;
	struct ecw_client *client;
	pthread_t tid;
	bool started;
	/* A job thread's, for the stall watch (watch_stalls): when it took
	 * its message (0: idle), the message, and when its last storage call
	 * completed (on_attempt). */
	_Atomic int64_t busy_since_ms;
	struct slot *_Atomic running;
	_Atomic int64_t last_storage_ms;
	int64_t stall_logged_for; /* the busy_since_ms whose stall was logged; the watcher's */
	struct peers peers;       /* a job thread's: those of the message it runs alone */
	pthread_cond_t idle_cv;   /* a job thread's: it waits here when idle (under rt->mu) */
	bool idle;                /* on rt->idle; under rt->mu */
};

/* ---- runtime_storage.c (below every other file here) ---- */

/* Counts one storage HTTP attempt of the calling thread (runtime.c's
 * on_attempt, the clients' hook). */
void ecw_runtime_count_attempt(void);
/* Storage HTTP attempts the calling thread has made so far: a run's
 * requests are the difference. */
int64_t ecw_runtime_thread_attempts(void);
/* A storage_error line with the last error; what names the step. */
void ecw_runtime_log_storage_error(const char *what);

/* ---- runtime_preflight.c ---- */

/* At start, after prepare: the configuration checked against storage
 * (preflight.h). -1 when the worker must not start (refused credentials, a
 * missing poison queue: logged as start_failed); 0 otherwise, with each
 * missing table's job blocked (job_block.h) and a missing work queue
 * logged. */
int ecw_runtime_preflight(const struct ecw_config *cfg, struct ecw_client *c, const struct ecw_account *acct);

/* ---- runtime_idle.c ---- */

/* Under rt->mu: takes the job thread that went idle last off the idle
 * stack and returns its condition, for the caller to signal after it
 * unlocks; NULL when no thread is idle. */
pthread_cond_t *ecw_runtime_idle_pop(struct runtime *rt);
/* Under rt->mu: wakes every idle job thread (a stop, a higher limit). */
void ecw_runtime_wake_idle(struct runtime *rt);
/* Under rt->mu: job thread self waits idle, on top of the idle stack, until
 * work pops it or another wake-up comes; it then looks for work again. */
void ecw_runtime_idle_wait(struct runtime *rt, struct thread_arg *self);

/* ---- runtime_take.c ---- */

/* Under rt->mu: takes the waiting message at index i of rt->ready off the
 * list and returns its slot. */
struct slot *ecw_runtime_take_ready(struct runtime *rt, int i);
/* Under rt->mu: takes the next work off the waiting list into group (room
 * for GROUP_CAP): the oldest waiting message whose job and keys no job
 * thread holds, the others of its job and partition its type can run with
 * it, and their duplicates as riders; marks them running. Returns how many
 * members (0: nothing can be taken now). */
size_t ecw_runtime_take_work(struct runtime *rt, struct slot **group);
/* Under rt->mu, for s taken to run alone: the RowKeys of the other waiting
 * messages of its job and partition, copied into out, when its type reads
 * ahead (ecw_job.h). */
void ecw_runtime_take_peers(const struct runtime *rt, const struct slot *s, struct peers *out);

/* ---- runtime_renew.c ---- */

/* The lease renewer's thread (p: its struct thread_arg); it returns once
 * rt->workers_exit is set. */
void *ecw_runtime_renew_thread(void *p);

/* ---- deliver.c ---- */

/* Runs one message taken by a job thread and carries out the outcome rules'
 * answer (delete, retry, poison, requeue), with its log line. */
void ecw_deliver_one(struct runtime *rt, struct ecw_client *c, struct slot *s);
/* Runs n messages of one job on one partition as a group (their type's
 * run_group); each is then concluded as if it had run alone. */
void ecw_deliver_group(struct runtime *rt, struct ecw_client *c, struct slot **group, size_t n);
/* The trace fields of a line about s that another thread writes (s->mu
 * held): its run's trace_id and span_id, or before any run the trace_id of
 * a valid traceparent it carries (l NULL: nothing). */
void ecw_deliver_log_trace(struct ecw_log_line *l, const struct slot *s);
/* A keyless message's fields its job reads, on its log line l (NULL: none). */
void ecw_deliver_log_keyless_fields(struct ecw_log_line *l, const struct slot *s);

/* ---- shutdown.c ---- */

/* Starts shutdown_grace once (the first signal, or a failed start of a
 * thread) and returns its deadline (the first call's, on later calls). */
int64_t ecw_shutdown_start_clock(struct runtime *rt);
/* The detached thread that waits for SIGTERM and SIGINT (p: the runtime). */
void *ecw_shutdown_signal_thread(void *p);
/* Logs and publishes the stalled job threads; the renewer calls it. */
void ecw_shutdown_watch_stalls(struct runtime *rt);

#endif
