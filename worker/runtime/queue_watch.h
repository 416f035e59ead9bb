/* SPDX-License-Identifier: MIT */
/* queue_watch.h - the receive loop's look at its queues between receives:
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
#ifndef ECW_QUEUE_WATCH_H
#define ECW_QUEUE_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "ecw_err.h"
#include "ecw_storage.h"
#include "pause.h"

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

#endif
