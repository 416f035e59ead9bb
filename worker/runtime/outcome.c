/* SPDX-License-Identifier: MIT */
/* outcome.c - the outcome rules (runtime_private.h), as worker/README.md's table states
 * them:
 *   success            delete the message, only after the job returned 0;
 *   transient failure  keep it, hidden for a random whole number of seconds
 *                      from 1 to base * 2^(dequeue_count-1) capped at max
 *                      ("full jitter");
 *   permanent failure  poison at once (undecodable text, unknown job, missing
 *                      keys, ECW_EINVALID or ECW_ETOOLARGE from the job);
 *   dequeue_count > max_dequeue_count on receipt: poison before running
 *                      (the worker died holding it every time); a transient
 *                      failure on delivery max_dequeue_count: poison;
 *   poisoning failed   (the envelope could not be put) keep it, hidden as a
 *                      transient failure would be: the original must stay
 *                      until an envelope holds it;
 *   lease lost         leave it alone: another worker may hold it now;
 *   interrupted        (the job's waits were cut short by shutdown,
 *                      ECW_ECANCELED) leave it alone: it comes back when its
 *                      lease runs out, and runs again;
 *   storage outage     (the circuit is open, circuit.c) a held message is not
 *                      run, and a transient failure is the service's: either
 *                      way it is hidden as a retry, never poisoned for it; at
 *                      its last allowed delivery it is requeued instead (a
 *                      fresh copy, so its next delivery is not over the
 *                      limit). Undecodable text and permanent failures are
 *                      poisoned as ever: an outage does not change them;
 *   blocked            (a table the job reads or writes does not exist,
 *                      ECW_ENOTABLE: a configuration problem, never the
 *                      message's) held as during an outage: hidden for the
 *                      backoff, requeued at its last allowed delivery, never
 *                      poisoned for it (job_block.c says who is told); a
 *                      missing blob container (ECW_ENOCONTAINER) alike;
 *   waiting            (the job is not done yet and asked to run again in
 *                      later_s seconds, ECW_ELATER: blob-ref's blobs in their
 *                      grace) hidden exactly that long, requeued at its last
 *                      allowed delivery, never poisoned for it: the wait is
 *                      the job's design, not a failure.
 * Undecodable text is refused before the dequeue count is looked at, so its
 * envelope says "permanent" whatever the count. */
#include <stddef.h>

#include "ecw_clock.h"
#include "ecw_job.h"
#include "runtime_private.h"

/* Full jitter (as AWS's "Exponential Backoff And Jitter" names it): a burst
 * of messages that failed together spreads over the whole window rather
 * than coming back together a fifth apart. The window is whole seconds (a
 * queue's visibility timeout is), from 1 to the backoff rounded up, within
 * the service's 7 days; random 0 draws the longest. */
int ecw_outcome_retry_hide_s(const struct ecw_outcome_limits *limits, long dequeue_count, uint32_t random)
{
	int64_t ms = ecw_clock_backoff_ms(limits->retry_backoff_base_ms, limits->retry_backoff_max_ms,
					  dequeue_count);
	int64_t ceiling = (ms + 999) / 1000;

	ceiling = ceiling < 1 ? 1 : ceiling > 604800 ? 604800 : ceiling;
	return (int)(ceiling - (int64_t)(random % (uint32_t)ceiling));
}

const char *ecw_outcome_reason_name(enum ecw_poison_reason reason)
{
	switch (reason) {
	case ECW_REASON_PERMANENT: return "permanent";
	case ECW_REASON_MAX_DEQUEUE: return "max-dequeue";
	default: return NULL;
	}
}

static void set(struct ecw_outcome *o, enum ecw_outcome_action action, enum ecw_poison_reason reason,
		const char *word)
{
	o->action = action;
	o->reason = reason;
	o->word = word;
}

/* A delivery an outage spoiled: hidden for the backoff, or requeued when
 * its next delivery would be over max_dequeue_count (poisoned on receipt). */
static void wait_out_outage(struct ecw_outcome *o, const struct ecw_outcome_facts *f,
			    const struct ecw_outcome_limits *l, const char *word, uint32_t (*random)(void))
{
	if (f->dequeue_count >= l->max_dequeue_count)
		set(o, ECW_ACTION_REQUEUE, ECW_REASON_NONE, "requeued");
	else
		set(o, ECW_ACTION_RETRY, ECW_REASON_NONE, word);
	o->hide_s = ecw_outcome_retry_hide_s(l, f->dequeue_count, random());
}

static void on_receipt(struct ecw_outcome *o, const struct ecw_outcome_facts *f,
		       const struct ecw_outcome_limits *l, uint32_t (*random)(void))
{
	if (!f->decoded)
		set(o, ECW_ACTION_POISON, ECW_REASON_PERMANENT, "poisoned");
	else if (f->dequeue_count > l->max_dequeue_count)
		set(o, ECW_ACTION_POISON, ECW_REASON_MAX_DEQUEUE, "poisoned");
	else if (!f->runnable)
		set(o, ECW_ACTION_POISON, ECW_REASON_PERMANENT, "poisoned");
	else if (f->outage)
		wait_out_outage(o, f, l, "deferred", random);
	else
		set(o, ECW_ACTION_RUN, ECW_REASON_NONE, "run");
}

static void after_run(struct ecw_outcome *o, const struct ecw_outcome_facts *f,
		      const struct ecw_outcome_limits *l, uint32_t (*random)(void))
{
	if (f->err == 0) {
		set(o, ECW_ACTION_DELETE, ECW_REASON_NONE, "succeeded");
	} else if (f->err == ECW_ECANCELED) {
		/* Shutdown cut its storage calls short: no call on it either,
		 * the lease brings it back. */
		set(o, ECW_ACTION_LEAVE, ECW_REASON_NONE, "interrupted");
	} else if (ecw_job_err_is_permanent(f->err)) {
		set(o, ECW_ACTION_POISON, ECW_REASON_PERMANENT, "poisoned");
	} else if (f->err == ECW_ELATER) {
		wait_out_outage(o, f, l, "waiting", random);
		o->hide_s = f->later_s < 1 ? 1 : f->later_s > 604800 ? 604800 : f->later_s;
	} else if (f->err == ECW_ENOTABLE || f->err == ECW_ENOCONTAINER) {
		wait_out_outage(o, f, l, "blocked", random);
	} else if (f->outage) {
		wait_out_outage(o, f, l, "retried", random);
	} else if (f->dequeue_count >= l->max_dequeue_count) {
		set(o, ECW_ACTION_POISON, ECW_REASON_MAX_DEQUEUE, "poisoned");
	} else {
		set(o, ECW_ACTION_RETRY, ECW_REASON_NONE, "retried");
		o->hide_s = ecw_outcome_retry_hide_s(l, f->dequeue_count, random());
	}
}

void ecw_outcome_guard(struct ecw_outcome *o, bool lease_lost, bool released)
{
	if (o->action == ECW_ACTION_RUN)
		return; /* running checks the lease before every write itself */
	if (released) {
		o->action = ECW_ACTION_LEAVE;
		o->word = "released";
	} else if (lease_lost) {
		o->action = ECW_ACTION_LEAVE;
		o->word = "lease-lost";
	}
}

void ecw_outcome_decide(struct ecw_outcome *out, const struct ecw_outcome_facts *f,
			const struct ecw_outcome_limits *l, uint32_t (*random)(void))
{
	*out = (struct ecw_outcome){.action = ECW_ACTION_LEAVE, .word = "lease-lost"};
	switch (f->stage) {
	case ECW_STAGE_RECEIVED: on_receipt(out, f, l, random); break;
	case ECW_STAGE_RAN: after_run(out, f, l, random); break;
	case ECW_STAGE_POISON_FAILED:
		/* The reason stays for the log; the message waits as a retry would. */
		out->action = ECW_ACTION_RETRY;
		out->word = "poison-failed";
		out->hide_s = ecw_outcome_retry_hide_s(l, f->dequeue_count, random());
		break;
	}
	ecw_outcome_guard(out, f->lease_lost, f->released);
}
