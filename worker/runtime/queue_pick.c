/* SPDX-License-Identifier: MIT */
/* queue_pick.c - weighted shares of the receives (runtime_private.h). */
#include <string.h>

#include "runtime_private.h"

void ecw_queue_pick_init(struct ecw_queue_pick *p, const int *weights, size_t n)
{
	memset(p, 0, sizeof(*p));
	p->n = n > ECW_QUEUES_MAX ? ECW_QUEUES_MAX : n;
	for (size_t i = 0; i < p->n; i++)
		p->q[i].weight = weights[i] < 1 ? 1 : weights[i];
}

void ecw_queue_pick_set_ready(struct ecw_queue_pick *p, size_t i, bool ready)
{
	if (i >= p->n)
		return;
	p->q[i].ready = ready;
	if (!ready)
		p->q[i].credit = 0;
}

int ecw_queue_pick_next(struct ecw_queue_pick *p)
{
	long total = 0;
	int best = -1;

	for (size_t i = 0; i < p->n; i++) {
		if (!p->q[i].ready)
			continue;
		p->q[i].credit += p->q[i].weight;
		total += p->q[i].weight;
		if (best < 0 || p->q[i].credit > p->q[best].credit)
			best = (int)i;
	}
	if (best >= 0)
		p->q[best].credit -= total;
	return best;
}
