/* runtime_renew.c - the lease renewer: one thread with its own storage
 * connection that extends the lease of every message held longer than half
 * the visibility timeout, and looks for stalled job threads on the way
 * (shutdown.c). It renews under the message's slot lock, as every final
 * call on a message is made (runtime.c), so a renewal never invalidates the
 * pop receipt a delete is about to use. */
#include <pthread.h>
#include <stdatomic.h>

#include "ecw_clock.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "runtime_private.h"

/* Extends the lease of every message whose job has run past half the
 * visibility timeout. A 404 or receipt mismatch means the lease is gone:
 * the job is told through its flag and must stop writing. */
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
		ecw_cond_wait_ms(&rt->renew_cv, &rt->mu, 250);
		pthread_mutex_unlock(&rt->mu);
		ecw_shutdown_watch_stalls(rt);
		for (int i = 0; i < rt->nslots; i++) {
			struct slot *s = &rt->slots[i];
			int64_t now = ecw_now_ms();
			int err;

			pthread_mutex_lock(&s->mu);
			if (s->busy && !s->done && !s->abandoned && !atomic_load(&s->lease_lost) &&
			    now >= s->renew_at_ms) {
				err = ecw_queue_update(&s->msg, c, s->queue->name, rt->vis_s, NULL, 0);
				if (err == 0) {
					s->renew_at_ms = now + (int64_t)rt->vis_s * 500;
					struct ecw_log_line *l =
						ecw_log_begin(ECW_LOG_DEBUG, "lease_renewed");
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
			pthread_mutex_unlock(&s->mu);
		}
	}
	return NULL;
}
