/* SPDX-License-Identifier: MIT */
/* runtime_idle.c - the idle job threads, a stack (runtime_private.h): the
 * thread that went idle last is on top, and work wakes that one
 * (ecw_runtime_idle_pop), so the threads that run are few and warm (their
 * connections open, their memory in cache) instead of every thread in turn;
 * glibc's condition variable would wake the oldest waiter. Everything here
 * runs under rt->mu; the stack's memory (rt->idle) is runtime.c's. */
#include <pthread.h>
#include <string.h>

#include "runtime_private.h"

pthread_cond_t *ecw_runtime_idle_pop(struct runtime *rt)
{
	struct thread_arg *t;

	if (rt->idle_n == 0)
		return NULL;
	t = rt->idle[--rt->idle_n];
	t->idle = false;
	return &t->idle_cv;
}

void ecw_runtime_wake_idle(struct runtime *rt)
{
	while (rt->idle_n > 0)
		pthread_cond_signal(ecw_runtime_idle_pop(rt));
}

/* A job thread waits idle, under rt->mu, on top of the idle stack until
 * work pops it (or a wake-up that was not for it: it then leaves the
 * stack, and its loop looks for work and comes back). */
void ecw_runtime_idle_wait(struct runtime *rt, struct thread_arg *self)
{
	self->idle = true;
	rt->idle[rt->idle_n++] = self;
	pthread_cond_wait(&self->idle_cv, &rt->mu);
	if (!self->idle)
		return;
	for (int i = 0; i < rt->idle_n; i++)
		if (rt->idle[i] == self) {
			memmove(&rt->idle[i], &rt->idle[i + 1],
				(size_t)(rt->idle_n - i - 1) * sizeof(rt->idle[0]));
			rt->idle_n--;
			break;
		}
	self->idle = false;
}
