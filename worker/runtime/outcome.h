/* SPDX-License-Identifier: MIT */
/* outcome.h - the outcome rules (worker/README.md, "Outcome rules") as one pure
 * function: given what happened to one delivery of a message, what the
 * worker does with it. No storage, no clock, no locks: the runtime
 * (worker/runtime/runtime.c) gathers the facts, asks, and carries the answer out,
 * so every row of the table is tested without a process or a service
 * (tests/unit/test_outcome.c). */
#ifndef ECW_OUTCOME_H
#define ECW_OUTCOME_H

#include <stdbool.h>
#include <stdint.h>

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
	long dequeue_count; /* this delivery's, from the queue */
	bool lease_lost;    /* the queue no longer lets this worker settle it */
	bool released;      /* shutdown gave it back: nobody settles it */
	/* The storage circuit is open (circuit.h): storage does not answer.
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
				    * "blocked" (a table of the job's is missing) */
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

#endif
