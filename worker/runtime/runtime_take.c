/* SPDX-License-Identifier: MIT */
/* runtime_take.c - how a job thread takes work off the waiting list
 * (rt->ready), under rt->mu: the oldest message whose job and keys no job
 * thread holds, the group it runs with, the duplicates that ride with it,
 * and the peers a message that runs alone may read ahead for. The slots and
 * the list are runtime.c's; what runs the work is deliver.c's
 * (runtime_private.h). */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "ecw_job.h"
#include "runtime_private.h"

/* Takes the waiting message at index i off the list; under rt->mu. */
struct slot *ecw_runtime_take_ready(struct runtime *rt, int i)
{
	struct slot *s = &rt->slots[rt->ready[i]];

	memmove(&rt->ready[i], &rt->ready[i + 1], (size_t)(rt->ready_n - i - 1) * sizeof(rt->ready[0]));
	rt->ready_n--;
	return s;
}

/* Whether a and b are messages of one job on one entity, both keyed. */
static bool same_keys(const struct slot *a, const struct slot *b)
{
	return a->keyed && b->keyed && a->keys_hash == b->keys_hash && a->def == b->def &&
	       strcmp(a->m.pk, b->m.pk) == 0 && strcmp(a->m.rk, b->m.rk) == 0;
}

/* Whether keyed a and b name one partition. */
static bool same_partition(const struct slot *a, const struct slot *b)
{
	return a->pk_hash == b->pk_hash && strcmp(a->m.pk, b->m.pk) == 0;
}

/* Whether a job thread holds a message of s's job and keys (under rt->mu). */
static bool keys_running(const struct runtime *rt, const struct slot *s)
{
	if (!s->keyed)
		return false;
	for (int i = 0; i < rt->nslots; i++)
		if (rt->slots[i].running && same_keys(&rt->slots[i], s))
			return true;
	return false;
}

/* The member of group[0..n) whose job and keys t has, or NULL. */
static struct slot *twin_in(struct slot **group, size_t n, const struct slot *t)
{
	for (size_t i = 0; i < n; i++)
		if (same_keys(group[i], t))
			return group[i];
	return NULL;
}

/* Takes the next work off the waiting list, under rt->mu: the oldest
 * waiting message whose job and keys no job thread holds, with every other
 * waiting one of the same job on the same partition that its type can take
 * in one group (what receives bring together runs together), and, riding
 * with each member, its waiting duplicates (same job, pk and rk). Returns
 * the members (0: nothing can be taken now).
 *
 * Why a duplicate may ride, concluded with its twin's result instead of
 * running: each rider was received before the run starts, so whatever
 * change it announces was made before the run's first read, and the run
 * computes from a state that includes it: running it again would compute
 * the same. A message that arrives while its twin already runs may not
 * ride (the run may have read before its change): it waits, and no other
 * thread takes it until that run is settled (keys_running), so one
 * worker never runs one entity twice at once (no 412 against itself). It
 * cannot starve: the thread that settles the run looks at the waiting list
 * again at once, and shutdown's drain gives waiting messages back as ever. */
size_t ecw_runtime_take_work(struct runtime *rt, struct slot **group)
{
	size_t n = 0, max = 1;
	int i = 0;

	while (i < rt->ready_n && keys_running(rt, &rt->slots[rt->ready[i]]))
		i++;
	if (i == rt->ready_n)
		return 0;
	group[n++] = ecw_runtime_take_ready(rt, i);
	const struct ecw_job_def *def = group[0]->def;
	if (group[0]->groupable)
		max = def->type->group_max < GROUP_CAP ? def->type->group_max : GROUP_CAP;
	for (i = 0; i < rt->ready_n;) {
		struct slot *t = &rt->slots[rt->ready[i]], *twin = twin_in(group, n, t);
		/* Only a first delivery rides: an earlier delivery of t may have
		 * left state that only t's own run cleans (an index-list
		 * reference's intent, named by t's message id), and a ride would
		 * delete t without it. A redelivered duplicate waits and runs
		 * after the twin (keys_running). */
		if (twin && t->msg.dequeue_count > 1) {
			i++;
			continue;
		}
		if (twin) {
			ecw_runtime_take_ready(rt, i);
			t->next_rider = twin->riders;
			twin->riders = t;
			t->running = true;
		} else if (n < max && t->groupable && t->def == def && same_partition(t, group[0]) &&
			   !keys_running(rt, t)) {
			group[n++] = ecw_runtime_take_ready(rt, i);
		} else {
			i++;
		}
	}
	for (size_t k = 0; k < n; k++)
		group[k]->running = true;
	return n;
}

/* Under rt->mu, for a message s taken to run alone: the RowKeys of the
 * other messages of its job and partition that wait (received, not
 * running), into out, when its type reads ahead (ecw_job.h). Copied: the
 * waiting slots may be taken and refilled while s runs. */
void ecw_runtime_take_peers(const struct runtime *rt, const struct slot *s, struct peers *out)
{
	size_t used = 0;

	out->n = 0;
	if (!s->keyed || !s->def->type->reads_ahead)
		return;
	for (int i = 0; i < rt->ready_n && out->n < ECW_JOB_PEERS_MAX; i++) {
		const struct slot *t = &rt->slots[rt->ready[i]];
		size_t len = t->keyed ? strlen(t->m.rk) + 1 : 0;
		bool twice = false;
		if (!t->keyed || t->running || t->def != s->def || !same_partition(t, s) ||
		    strcmp(t->m.rk, s->m.rk) == 0 || used + len > sizeof(out->buf))
			continue;
		for (size_t k = 0; k < out->n && !twice; k++)
			twice = strcmp(out->rk[k], t->m.rk) == 0;
		if (twice)
			continue;
		memcpy(out->buf + used, t->m.rk, len);
		out->rk[out->n++] = out->buf + used;
		used += len;
	}
}
