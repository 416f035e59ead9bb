/* SPDX-License-Identifier: MIT */
/* runtime_renew.c - the lease renewer: one thread with its own storage
 * connection that extends the lease of every message held longer than half
 * the visibility timeout, and looks for stalled job threads on the way
 * (shutdown.c). It renews under the message's slot lock, as every final
 * call on a message is made (runtime.c), so a renewal never invalidates the
 * pop receipt a delete is about to use; and it never waits for that lock
 * (renew_all says why). */
#include <pthread.h>
#include <stdatomic.h>

#include "ecw_clock.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "runtime_private.h"

/* Under s->mu: renews s's lease when its message is held and due. A 404 or
 * receipt mismatch means the lease is gone: the job is told through its
 * flag and must stop writing. */
static void renew_slot(struct runtime *rt, struct ecw_client *c, struct slot *s)
{
	int64_t now = ecw_clock_now_ms();
	int err;

	if (!s->busy || s->done || s->abandoned || atomic_load(&s->lease_lost) || now < s->renew_at_ms)
		return;
	err = ecw_queue_update(&s->msg, c, s->queue->name, rt->vis_s, NULL, 0);
	if (err == 0) {
		s->renew_at_ms = now + (int64_t)rt->vis_s * 500;
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_DEBUG, "lease_renewed");
		ecw_log_str(l, "message_id", s->msg.id);
		ecw_log_int(l, "visibility_s", rt->vis_s);
		ecw_log_end(l);
	} else if (err == ECW_ENOTFOUND) {
		atomic_store(&s->lease_lost, true);
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "lease_lost");
		ecw_log_str(l, "message_id", s->msg.id);
		ecw_log_str(l, "error", ecw_error_last()->message);
		ecw_log_end(l);
	} else {
		ecw_runtime_log_storage_error("lease.renew");
		s->renew_at_ms = now + 1000;
	}
}

/* One pass over the slots. A slot whose lock is held (EBUSY) is passed by
 * and looked at again on the next pass, 250 ms later: waiting for it could
 * hold up every other message's renewal for as long as the holder keeps it,
 * and a group keeps all its members' locks while its pipelined deletes are
 * out (deliver.c, settle_group): up to storage.request_timeout when their
 * answers go missing, then each delete alone with its retries, longer than
 * the leases of the messages still running. Passing it by is safe: a lock
 * is held long only for a message's final call (a delete, a hide,
 * shutdown's release), and the message is marked done first: nothing to
 * renew; otherwise only for a moment (a slot filled or given back, a run's
 * span noted). renew_at_ms is untouched, so a renewal due now is still due
 * on the next pass, and it fell due with half the visibility timeout to
 * spare. */
static void renew_all(struct runtime *rt, struct ecw_client *c)
{
	for (int i = 0; i < rt->nslots; i++) {
		struct slot *s = &rt->slots[i];

		if (pthread_mutex_trylock(&s->mu) != 0)
			continue;
		renew_slot(rt, c, s);
		pthread_mutex_unlock(&s->mu);
	}
}

/* Every 250 ms (or at a signal): extends the lease of every message whose
 * job has run past half the visibility timeout. */
void *ecw_runtime_renew_thread(void *p)
{
	struct runtime *rt = ((struct thread_arg *)p)->rt;
	struct ecw_client *c = ((struct thread_arg *)p)->client;

	for (;;) {
		pthread_mutex_lock(&rt->mu);
		if (rt->workers_exit) {
			pthread_mutex_unlock(&rt->mu);
			break;
		}
		ecw_clock_cond_wait_ms(&rt->renew_cv, &rt->mu, 250);
		pthread_mutex_unlock(&rt->mu);
		ecw_shutdown_watch_stalls(rt);
		renew_all(rt, c);
	}
	return NULL;
}
