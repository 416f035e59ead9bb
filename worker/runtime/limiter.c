/* SPDX-License-Identifier: MIT */
/* limiter.c - the adaptive concurrency limit (runtime_private.h). */
#include "runtime_private.h"

void ecw_limiter_init(struct ecw_limiter *l, int min, int max)
{
	pthread_mutex_init(&l->mu, NULL);
	l->min = min < 1 ? 1 : min;
	l->max = max < l->min ? l->min : max;
	l->limit = l->max;
	l->wait_answers = 0;
	l->cuts = 0;
}

void ecw_limiter_dispose(struct ecw_limiter *l)
{
	pthread_mutex_destroy(&l->mu);
}

bool ecw_limiter_is_throttling(int status)
{
	return status == 503 || status == 500 || status == 0;
}

int ecw_limiter_note(struct ecw_limiter *l, int status)
{
	int before, after;

	if (l->min == l->max)
		return 0;
	pthread_mutex_lock(&l->mu);
	before = (int)l->limit;
	if (ecw_limiter_is_throttling(status) && l->wait_answers == 0) {
		double half = l->limit / 2 < l->min ? l->min : l->limit / 2;
		l->cuts += half < l->limit;
		l->wait_answers = (uint64_t)before; /* the window in flight at the cut */
		l->limit = half;
	} else {
		if (l->wait_answers > 0)
			l->wait_answers--;
		if (!ecw_limiter_is_throttling(status) && l->limit < l->max) {
			l->limit += 1.0 / l->limit;
			if (l->limit > l->max)
				l->limit = l->max;
		}
	}
	after = (int)l->limit;
	pthread_mutex_unlock(&l->mu);
	return after > before ? 1 : after < before ? -1 : 0;
}

int ecw_limiter_limit(struct ecw_limiter *l)
{
	int n;

	pthread_mutex_lock(&l->mu);
	n = (int)l->limit;
	pthread_mutex_unlock(&l->mu);
	return n;
}
