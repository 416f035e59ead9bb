/* SPDX-License-Identifier: MIT */
/* shutdown.c - shutdown's clock, the signal thread that starts it, and the
 * stall watch. The first signal starts shutdown_grace: the job threads, the
 * renewer and the scheduler have until its end (their storage waits end
 * then: jobs_cancel), the receive loop RELEASE_GRACE_MS more to give back
 * what is still held (final_cancel); the second signal ends every wait at
 * once. What happens to the held messages is runtime.c's (drain). */
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "ecw_cancel.h"
#include "ecw_clock.h"
#include "ecw_log.h"
#include "telemetry.h"
#include "runtime_private.h"

static void wake_all(struct runtime *rt)
{
	pthread_mutex_lock(&rt->mu);
	pthread_cond_broadcast(&rt->main_cv);
	ecw_runtime_wake_idle(rt);
	pthread_cond_broadcast(&rt->renew_cv);
	pthread_cond_broadcast(&rt->sched_cv);
	pthread_mutex_unlock(&rt->mu);
}

/* A job thread is stalled when no storage call of its job completed for
 * stall_timeout (counted from when it took the message). Logs each stall
 * once, with the job and the message, and publishes how many there are:
 * /healthz fails while any is, so the orchestrator restarts the process and
 * the message comes back through its lease. The renewer calls it. */
void ecw_shutdown_watch_stalls(struct runtime *rt)
{
	int64_t now = ecw_clock_now_ms();
	int stalled = 0;

	for (int i = 0; i < rt->nthreads; i++) {
		struct thread_arg *t = &rt->threads[i];
		int64_t since = atomic_load(&t->busy_since_ms), last = atomic_load(&t->last_storage_ms);
		if (since == 0 || now - (last > since ? last : since) < rt->stall_timeout_ms)
			continue;
		stalled++;
		if (t->stall_logged_for == since)
			continue;
		t->stall_logged_for = since;
		struct slot *s = atomic_load(&t->running);
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_ERROR, "job_stalled");
		if (s) {
			pthread_mutex_lock(&s->mu);
			ecw_deliver_log_trace(l, s);
			ecw_log_str(l, "job", s->def ? s->def->name : s->m.job);
			ecw_log_str(l, "message_id", s->msg.id);
			pthread_mutex_unlock(&s->mu);
		}
		ecw_log_int(l, "running_ms", now - since);
		ecw_log_int(l, "stall_timeout_ms", rt->stall_timeout_ms);
		ecw_log_str(l, "error",
			    "no storage call completed within worker.stall_timeout: /healthz fails");
		ecw_log_end(l);
	}
	ecw_metrics_set_stalled(stalled);
}

/* The first signal (or a failed start of a thread) starts shutdown_grace:
 * its end is when every storage wait of the jobs ends (once). */
int64_t ecw_shutdown_start_clock(struct runtime *rt)
{
	int64_t deadline = ecw_clock_now_ms() + rt->cfg->worker.shutdown_grace_ms, unset = 0;

	if (!atomic_compare_exchange_strong(&rt->stop_deadline_ms, &unset, deadline))
		return unset; /* started already: its deadline */
	ecw_cancel_set_deadline(rt->jobs_cancel, deadline);
	ecw_cancel_set_deadline(rt->final_cancel, deadline + RELEASE_GRACE_MS);
	return deadline;
}

/* Waits for SIGTERM or SIGINT up to ms (-1: for ever); the signal, or 0
 * when the time ran out. */
static int wait_signal(const sigset_t *set, int64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	int sig;

	if (ms < 0)
		return sigwait(set, &sig) == 0 ? sig : 0;
	sig = sigtimedwait(set, NULL, &ts);
	return sig > 0 ? sig : 0;
}

/* The signals, and shutdown's clock: the first signal starts
 * shutdown_grace, at whose end the jobs' storage waits are cut
 * (jobs_cancel), and RELEASE_GRACE_MS later the receive loop's
 * (final_cancel). A deadline only bounds the waits that start after it;
 * firing the cancellation wakes those already waiting. The second signal
 * cuts every wait at once. */
void *ecw_shutdown_signal_thread(void *p)
{
	struct runtime *rt = p;
	sigset_t set;
	bool all_fired = false;
	int n = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	while (n < 2) {
		int64_t deadline = atomic_load(&rt->stop_deadline_ms), now = ecw_clock_now_ms(), wait = -1;
		if (deadline != 0 && !all_fired) {
			if (now >= deadline)
				ecw_cancel_fire(rt->jobs_cancel);
			if (now >= deadline + RELEASE_GRACE_MS) {
				ecw_cancel_fire(rt->final_cancel);
				all_fired = true;
			} else {
				wait = (now < deadline ? deadline : deadline + RELEASE_GRACE_MS) - now;
			}
		}
		int sig = wait_signal(&set, wait);
		if (sig == 0)
			continue;
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, n == 0 ? "stopping" : "stopping_now");
		ecw_log_str(l, "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
		ecw_log_end(l);
		if (n == 0) {
			ecw_shutdown_start_clock(rt);
		} else {
			ecw_cancel_fire(rt->jobs_cancel);
			ecw_cancel_fire(rt->final_cancel);
		}
		atomic_store(n == 0 ? &rt->stopping : &rt->force, true);
		wake_all(rt);
		n++;
	}
	return NULL;
}
