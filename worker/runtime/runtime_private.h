/* SPDX-License-Identifier: MIT */
/* runtime_private.h - what the files of the runtime room (worker/runtime/,
 * `ecworker run`) share, and no other file; worker/runtime/runtime.h is the
 * room's public face. In order below:
 *   - circuit.c, the storage circuit breaker;
 *   - job_block.c, jobs blocked by a missing table;
 *   - limiter.c, how many jobs may run at once;
 *   - outcome.c, the outcome rules;
 *   - queue_pick.c, which queue the next receive is from;
 *   - queue_watch.c, the receive loop's look at its queues;
 *   - the runtime and its slots: worker/runtime/runtime.c (the threads, the
 *     receive loop, dispatch, start and stop), runtime_take.c (taking work
 *     off the waiting list), runtime_idle.c (the stack of idle job threads),
 *     runtime_renew.c (the lease renewer), deliver.c (carrying out one
 *     delivery, or a group), shutdown.c (shutdown's clock, the signal
 *     thread, the stall watch), runtime_preflight.c and runtime_storage.c.
 *     The runtime and its slots are runtime.c's: it creates and frees them;
 *     the others borrow them.
 * Each section says what it owns and who frees what. */
#ifndef ECW_RUNTIME_PRIVATE_H
#define ECW_RUNTIME_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ecw_cancel.h"
#include "ecw_config.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "message.h"
#include "telemetry.h"
#include "schedule.h"
#include "ecw_err.h"
#include "pause.h"

/* circuit.c - the storage circuit breaker: tells a whole-service outage
 * (storage down, unreachable, timing out, or busy for everyone) from a
 * message's own failures, so that an outage does not poison the backlog.
 *
 * The runtime notes the result of every job and every failed receive. Failures of
 * the kinds an outage gives (ecw_circuit_err_is_outage) that follow each
 * other with no success between are counted; at `failures` of them the
 * probe is asked (a cheap request to each service): when storage does not
 * answer it either, the circuit opens. While it is open the runtime
 * receives nothing, runs nothing it holds (each held message is hidden for
 * a backoff, its failure not held against it: outcome.c), and probes at
 * growing intervals (probe_min_ms doubling to probe_max_ms); the first
 * probe that is answered, or any success, closes it. A message whose own
 * request fails with a 500 does not open it: the probe is answered.
 *
 * Opening and closing each log one line and set the gauge
 * ecworker_storage_circuit_open, which /readyz also reads. Thread-safe: one
 * heap object per runtime, freed with ecw_circuit_free after every thread
 * that notes is gone. */

struct ecw_circuit_limits {
	int failures;         /* outage-class failures in a row that make it probe; 0: never opens */
	int64_t probe_min_ms; /* first wait between probes while open */
	int64_t probe_max_ms; /* the doubling wait's cap */
};

/* 0 when storage answers (any answer that is not an outage's), else the
 * error. Called by one thread at a time. */
typedef int (*ecw_circuit_probe_fn)(void *payload);

struct ecw_circuit;

int ecw_circuit_new(struct ecw_circuit **out, const struct ecw_circuit_limits *limits,
		    ecw_circuit_probe_fn probe, void *payload) ECW_MUST_USE;
void ecw_circuit_free(struct ecw_circuit *c);

/* The failures an outage gives (after the client's own retries): refused
 * or reset connections, DNS failures, 5xx (ECW_ETRANSIENT), timeouts
 * (ECW_ETIMEOUT), throttling and ServerBusy (ECW_EBUSY). */
bool ecw_circuit_err_is_outage(int err);

/* The result of one job or one receive: 0 (storage answered) or its error.
 * A success closes the circuit; an outage-class failure counts towards
 * `failures` (and probes when it gets there, or waits for a probe another
 * thread is making); any other failure is the message's and changes
 * nothing. Returns true when the circuit is open after this: the failure
 * is the service's. */
bool ecw_circuit_note(struct ecw_circuit *c, int err);

bool ecw_circuit_is_open(struct ecw_circuit *c);

/* While open: milliseconds until the next probe is due (0: now); -1 when
 * it is closed. */
int64_t ecw_circuit_probe_due_in_ms(struct ecw_circuit *c);

/* While open: probes now; an answer closes the circuit, no answer doubles
 * the wait for the next probe. Returns true when it is closed after this. */
bool ecw_circuit_probe(struct ecw_circuit *c);

/* job_block.c - jobs blocked by a missing table. A table a job reads or
 * writes that does not exist is a configuration problem (a typo'd name, a
 * table not created yet, one deleted under the worker), never an absent
 * entity: the job's runs fail with ECW_ENOTABLE, its messages are held
 * (outcome "blocked": hidden as during an outage, requeued before their last
 * allowed delivery, never poisoned, nothing written), and the other jobs
 * keep running.
 *
 * While a (job, table) pair is blocked the gauge ecw_job_blocked{job,table}
 * is 1, and an error line `job_blocked` names both, at most once a minute
 * per pair. A run of the job that succeeds clears every pair of that job
 * (gauge 0, one `job_unblocked` line): its tables are there again.
 *
 * Process-wide and thread-safe; at most JOB_BLOCK_MAX pairs are tracked
 * (table names come from the configuration, so a handful at most: past the
 * cap a pair is still held and logged, not tracked). */

#define ECW_JOB_BLOCK_MAX 64

/* A run of job found table missing (table "" when the answer did not say
 * which). why: what the line says after the names (NULL: the default
 * advice). now_ms: the clock (ecw_clock_now_ms), so tests can step it. */
void ecw_job_block_note(const char *job, const char *table, const char *why, int64_t now_ms);

/* A run of job succeeded: every pair of the job is cleared. Cheap when
 * nothing is blocked (one atomic load), as it is called for every success. */
void ecw_job_block_clear(const char *job);

/* Whether (job, table) is blocked now (tests, status). */
bool ecw_job_block_is_blocked(const char *job, const char *table);

/* Forgets every pair (tests). */
void ecw_job_block_reset(void);

/* limiter.c - how many jobs may run at once, adapting to the service
 * (AIMD, as TCP's congestion window): every storage attempt's answer is
 * noted; throttling (503 ServerBusy, 500 such as OperationTimedOut, no
 * answer in time: status 0) halves the limit, never below min, at most once
 * a window: after a cut, the answers of the requests that were in flight
 * then (as many as the limit was) say nothing new, so the next cut waits for
 * that many answers. Each `limit` answers that are not throttling raise it
 * by one (about one a round trip of the whole window), never above max.
 * min == max: a fixed limit. The runtime's job threads take work only while
 * fewer than the limit run (runtime.c). Thread-safe; the struct is the
 * caller's (init/dispose), no memory. */

struct ecw_limiter {
	pthread_mutex_t mu;
	int min, max;
	double limit;
	uint64_t wait_answers; /* answers to see before the next cut may be */
	uint64_t cuts;         /* times the limit went down */
};

void ecw_limiter_init(struct ecw_limiter *l, int min, int max);
void ecw_limiter_dispose(struct ecw_limiter *l);
/* Whether an answer's status says the service is throttling. */
bool ecw_limiter_is_throttling(int status);
/* Notes one attempt's answer. Returns +1 when the whole-number limit rose,
 * -1 when it was cut, 0 otherwise. */
int ecw_limiter_note(struct ecw_limiter *l, int status);
/* The limit now, a whole number in [min, max]. */
int ecw_limiter_limit(struct ecw_limiter *l);

/* outcome.c - the outcome rules (worker/README.md, "Outcome rules") as one pure
 * function: given what happened to one delivery of a message, what the
 * worker does with it. No storage, no clock, no locks: the runtime
 * (worker/runtime/runtime.c) gathers the facts, asks, and carries the answer out,
 * so every row of the table is tested without a process or a service
 * (tests/unit/test_outcome.c). */

/* Where the delivery is when the rules are asked. */
enum ecw_outcome_stage {
	ECW_STAGE_RECEIVED,      /* received, job not run yet: may it run? */
	ECW_STAGE_RAN,           /* the job (and its `then:` follow-ups) returned err */
	ECW_STAGE_POISON_FAILED, /* poisoning was decided, the envelope could not be put */
};

struct ecw_outcome_facts {
	enum ecw_outcome_stage stage;
	/* RECEIVED: the text is a job message (message.h). */
	bool decoded;
	/* RECEIVED: its job is configured, and it names an entity when the
	 * job's type needs one. */
	bool runnable;
	/* RAN: 0, or the ecw_err the job (or a follow-up's put) returned. */
	int err;
	int later_s;        /* RAN with ECW_ELATER: the seconds the job asked to wait */
	long dequeue_count; /* this delivery's, from the queue */
	bool lease_lost;    /* the queue no longer lets this worker settle it */
	bool released;      /* shutdown gave it back: nobody settles it */
	/* The storage circuit is open (circuit.c): storage does not answer.
	 * RECEIVED: the job is not run. RAN: a failure of an outage's kind is
	 * the service's, not the message's. */
	bool outage;
};

struct ecw_outcome_limits {
	int max_dequeue_count;
	int64_t retry_backoff_base_ms;
	int64_t retry_backoff_max_ms;
};

enum ecw_outcome_action {
	ECW_ACTION_RUN,    /* RECEIVED only: run the job */
	ECW_ACTION_DELETE, /* it succeeded: delete it with the newest pop receipt */
	ECW_ACTION_RETRY,  /* hide it for hide_s; it comes back and runs again */
	ECW_ACTION_POISON, /* envelope on the poison queue, then delete it */
	/* An outage held it at its last allowed delivery: a fresh copy of its
	 * text on the work queue, hidden for hide_s, then delete it, so that
	 * its dequeue count starts again (the queue cannot lower one). */
	ECW_ACTION_REQUEUE,
	ECW_ACTION_LEAVE, /* no call on it: the lease is gone, or it was released */
};

enum ecw_poison_reason {
	ECW_REASON_NONE,
	ECW_REASON_PERMANENT,   /* no delivery can fix it */
	ECW_REASON_MAX_DEQUEUE, /* delivered max_dequeue_count times without success */
};

struct ecw_outcome {
	enum ecw_outcome_action action;
	/* Why it is (or, when the lease went first, would have been)
	 * poisoned; NONE otherwise. */
	enum ecw_poison_reason reason;
	int hide_s;       /* RETRY, REQUEUE: seconds, 1..604800 */
	const char *word; /* the log's and the metrics' outcome: "run",
				    * "succeeded", "retried", "deferred" (not run:
				    * the circuit is open), "requeued", "poisoned",
				    * "poison-failed", "lease-lost", "released",
				    * "interrupted" (shutdown cut the job short),
				    * "blocked" (a table or container of the job's is
				    * missing), "waiting" (the job asked to run again
				    * later: ECW_ELATER) */
};

/* The rules. random is called once for a hidden time's jitter (retried,
 * deferred, requeued) and not otherwise (the runtime passes ecw_clock_random_u32,
 * whose shared state every job thread would otherwise touch for every
 * message; tests pass a fixed value's), so equal facts and equal draws give
 * equal answers. */
void ecw_outcome_decide(struct ecw_outcome *out, const struct ecw_outcome_facts *facts,
			const struct ecw_outcome_limits *limits, uint32_t (*random)(void));

/* The last row, on its own: an answer that would call the queue becomes
 * LEAVE when the lease is gone or the message was released. The runtime
 * applies it again under the message's lock at the moment of the call,
 * since a renewal or a shutdown may have changed either since the answer. */
void ecw_outcome_guard(struct ecw_outcome *o, bool lease_lost, bool released);

/* How long a message that failed transiently on delivery dequeue_count stays
 * hidden: a whole number of seconds drawn uniformly by random from 1 to
 * base * 2^(dequeue_count-1) capped at max (rounded up, at most 7 days);
 * random 0 gives the ceiling itself. */
int ecw_outcome_retry_hide_s(const struct ecw_outcome_limits *limits, long dequeue_count, uint32_t random);

/* "permanent", "max-dequeue" (the envelope's and the metric's words); NULL for NONE. */
const char *ecw_outcome_reason_name(enum ecw_poison_reason reason);

/* queue_pick.c - which of the worker's queues the next receive is from
 * (worker.queues with weights): smooth weighted round robin, as nginx
 * shares requests among weighted upstreams. Among the queues that are
 * ready (they had work at the last look), each pick adds every ready
 * queue's weight to its running credit, takes the one with the most credit
 * (the first on a tie) and takes the ready weights' sum off it: over any run
 * of picks each ready queue is chosen in proportion to its weight, spread out
 * rather than in bursts (weights 4 and 1: A A B A A, A A A B A, ...). A
 * queue that is not ready (idle, paused) takes no part and keeps no credit,
 * so it does not come back with a burst. A plain value, no memory; one
 * thread's (the receive loop's). */

#define ECW_QUEUES_MAX 8

struct ecw_queue_pick {
	size_t n;
	struct {
		int weight; /* >= 1 */
		long credit;
		bool ready;
	} q[ECW_QUEUES_MAX];
};

/* n (1..ECW_QUEUES_MAX) queues with these weights, none ready. */
void ecw_queue_pick_init(struct ecw_queue_pick *p, const int *weights, size_t n);
/* Queue i has work (ready) or not; losing it drops its credit. */
void ecw_queue_pick_set_ready(struct ecw_queue_pick *p, size_t i, bool ready);
/* The next queue to receive from, or -1 when none is ready. */
int ecw_queue_pick_next(struct ecw_queue_pick *p);

/* queue_watch.c - the receive loop's look at its queues between receives:
 * one Get Queue Metadata of the job queue says whether an operator paused it
 * for the fleet (pause.h) and how many messages it has; a peek, made only
 * when it has some, gives the oldest one's age. The same for the poison
 * queue, whose pause means nothing. The results go to /metrics
 * (ecw_queue_approximate_messages, ecw_queue_oldest_message_age_seconds,
 * ecw_paused) and pauses and resumes to the log.
 *
 * When the loop looks (runtime.c keeps to it; the idle budget is 6 requests
 * a minute at poll_interval.max 10s, what an idle worker's receives cost
 * before):
 *   working   the job queue every min(control_poll, queue_refresh); the
 *             poison queue every queue_refresh;
 *   idle      (the last receive or look found nothing) the look stands in
 *             for the receive: one look per poll, and a receive only when
 *             the count is not 0; so pause, gauges and the wait for work
 *             cost one request. The poison queue's turn comes every 40
 *             refreshes (10 minutes at the default) and takes that poll's
 *             place: its gauges are then at most that old, which is fine
 *             while nothing works (only operators change it then);
 *   paused    the job queue every control_poll, nothing received.
 * A struct ecw_queue_watch is the loop's own (one thread); it holds no
 * memory. */

/* One queue as last looked at. */
struct ecw_queue_seen {
	const char *name;      /* the configuration's */
	bool looked;           /* a look succeeded at least once */
	long long approximate; /* messages, visible or not */
	int64_t oldest_age_s;  /* of the oldest visible one; 0 none */
	int64_t next_ms;       /* when it is looked at next */
	int64_t next_age_ms;   /* when its age is read next (a peek) */
};

struct ecw_queue_watch {
	struct ecw_queue_seen jobs, poison;
	struct ecw_pause pause; /* the job queue's */
	int64_t control_poll_ms, refresh_ms;
};

void ecw_queue_watch_init(struct ecw_queue_watch *w, const char *queue, const char *poison_queue,
			  int64_t control_poll_ms, int64_t refresh_ms);
/* Looks at q (w->jobs or w->poison) now: its metadata, and a peek when it
 * has messages and its age is due; updates the gauges, and for the job
 * queue the pause (logging a change). 0, or the storage error with the last
 * error set (what was known is kept). */
int ecw_queue_watch_look(struct ecw_queue_watch *w, struct ecw_queue_seen *q,
			 struct ecw_client *c) ECW_MUST_USE;
/* Whether a working loop should look at q now. */
bool ecw_queue_watch_due(const struct ecw_queue_seen *q, int64_t now_ms);
/* Whether an idle loop's poll should be the poison queue's look (see the
 * top): its rest cadence, 40 refreshes, has passed. */
bool ecw_queue_watch_poison_due_at_rest(const struct ecw_queue_watch *w, int64_t now_ms);

/* ---- the runtime and its slots ---- */

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
	/* The adaptive concurrency limit (limiter.c) as the threads obey it:
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
	/* Exports one span per run (otlp.c); NULL when no collector is
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
 * (preflight.c). -1 when the worker must not start (refused credentials, a
 * missing poison queue: logged as start_failed); 0 otherwise, with each
 * missing table's job blocked (job_block.c) and a missing work queue
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
