/* SPDX-License-Identifier: MIT */
/* limiter.h - how many jobs may run at once, adapting to the service
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
#ifndef ECW_LIMITER_H
#define ECW_LIMITER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

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

#endif
