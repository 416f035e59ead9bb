/* SPDX-License-Identifier: MIT */
/* queue_pick.h - which of the worker's queues the next receive is from
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
#ifndef ECW_QUEUE_PICK_H
#define ECW_QUEUE_PICK_H

#include <stdbool.h>
#include <stddef.h>

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

#endif
