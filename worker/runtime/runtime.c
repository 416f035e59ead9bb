/* SPDX-License-Identifier: MIT */
/* runtime.c - the worker: one receive loop (this thread), a pool of job
 * threads each with its own storage connection, a lease renewer, a
 * scheduler and a signal thread. Data flows one way: receive -> slot -> job
 * thread -> decode -> job -> outcome.
 *
 * This file holds the threads, the receive loop, dispatch, start and stop;
 * how a job thread takes work off the waiting list is runtime_take.c's, the
 * stack of idle job threads runtime_idle.c's, the lease renewer
 * runtime_renew.c's, carrying out one delivery is deliver.c's, shutdown's
 * clock, the signal thread and the stall watch are shutdown.c's, and the
 * count of a thread's storage requests and their error line are
 * runtime_storage.c's, below all of them (runtime_private.h).
 *
 * Every final call on a message (delete, hide, release) happens under the
 * message's slot lock with the pop receipt the renewer last obtained, so a
 * renewal can never invalidate the receipt a delete is about to use. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "runtime_private.h"
#include "connect.h"
#include "ecw_cancel.h"
#include "ecw_codec.h"
#include "ecw_clock.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "ecw_version.h"
#include "message.h"
#include "telemetry.h"
#include "poison.h"
#include "runtime.h"
#include "schedule.h"

/* The most messages one dispatch hands over (receive_deeper). */
#define DISPATCH_MAX 256
/* At shutdown the spans still queued have this long to reach the collector. */
#define OTLP_FLUSH_MS 2000

static struct runtime *the_runtime; /* kept for the detached signal thread */

/* ---- small helpers ------------------------------------------------------------ */

/* A change of the adaptive limit, for the threads (under rt->mu), the
 * gauge and, when cut (a line each 5 s at most: throttling can cut it many
 * times a second) or back at its top, the log. */
static void limit_changed(struct runtime *rt, int change, int status)
{
	static _Atomic int64_t logged_cut_ms = INT64_MIN / 2;
	int limit = ecw_limiter_limit(&rt->limiter);
	int64_t now = ecw_clock_now_ms(), last = atomic_load(&logged_cut_ms);

	pthread_mutex_lock(&rt->mu);
	rt->limit_now = limit;
	if (change > 0)
		ecw_runtime_wake_idle(rt); /* waiting work may start */
	pthread_mutex_unlock(&rt->mu);
	ecw_metrics_set_concurrency_limit(limit, change < 0);
	if (change > 0)
		pthread_cond_signal(&rt->main_cv); /* and more be received */
	if (change < 0 && (now - last < 5000 || !atomic_compare_exchange_strong(&logged_cut_ms, &last, now)))
		return;
	if (change < 0 || limit == rt->limiter.max) {
		struct ecw_log_line *l =
			ecw_log_begin(change < 0 ? ECW_LOG_WARN : ECW_LOG_INFO, "concurrency_limit");
		ecw_log_int(l, "limit", limit);
		ecw_log_int(l, "max", rt->limiter.max);
		if (change < 0) {
			ecw_log_int(l, "status", status);
			ecw_log_int(l, "cuts", (int64_t)rt->limiter.cuts); /* since the start */
		}
		ecw_log_str(l, "msg",
			    change < 0 ? "storage is throttling: fewer jobs run at once"
				       : "back to the configured concurrency");
		ecw_log_end(l);
	}
}

/* payload: the job thread's last_storage_ms (the stall watch's), or NULL.
 * Every attempt's answer also tells the adaptive limit (limiter.c). */
static void on_attempt(void *payload, const char *op, int status, int attempt)
{
	struct runtime *rt = the_runtime;
	int change;

	ecw_runtime_count_attempt();
	if (payload)
		atomic_store((_Atomic int64_t *)payload, ecw_clock_now_ms());
	ecw_metrics_storage(op, status);
	if (attempt > 1)
		ecw_metrics_retry();
	if (rt && (change = ecw_limiter_note(&rt->limiter, status)) != 0)
		limit_changed(rt, change, status);
}

/* ---- threads -------------------------------------------------------------------------- */

/* Signals what ecw_runtime_idle_pop took, after the caller unlocked rt->mu
 * (see receiver_should_wake). */
static void wake(pthread_cond_t *cv)
{
	if (cv)
		pthread_cond_signal(cv);
}

/* Frees what the slot's last message held; on the receive loop's thread
 * (place, drain) or after every thread is joined. The memory was allocated
 * on that thread, so freeing it there keeps 64 job threads from taking the
 * lock of its malloc arena (strace: ~0.4 futex calls a message at c64). */
static void dispose_slot(struct slot *s)
{
	ecw_message_dispose(&s->m);
	memset(&s->m, 0, sizeof(s->m));
	s->decoded = false;
	s->def = NULL;
	s->groupable = s->keyed = false;
	s->trace_hex[0] = s->span_hex[0] = '\0';
	free(s->msg.text);
	memset(&s->msg, 0, sizeof(s->msg));
	s->stale = false;
}

/* Gives a settled (or released) message's slot back; its memory is freed
 * when the receive loop fills the slot again (dispose_slot). */
static void return_slot(struct slot *s)
{
	pthread_mutex_lock(&s->mu);
	s->busy = false;
	s->stale = true;
	pthread_mutex_unlock(&s->mu);
}

/* How many messages may be held now (under rt->mu): a job for each thread
 * the limit lets run, and the prefetch. */
static int holding_cap(const struct runtime *rt)
{
	int cap = rt->limit_now + rt->prefetch;

	return cap < rt->nslots ? cap : rt->nslots;
}

/* The receive loop's condition (under rt->mu): see receive_loop. */
static bool may_receive(const struct runtime *rt)
{
	int cap = holding_cap(rt), need = rt->deep ? rt->deep_want : rt->want;

	return cap - rt->inflight >= (need < cap ? need : cap) && rt->ready_n <= rt->prefetch / 2;
}

/* Whether the receive loop should be woken (under rt->mu): only when it can
 * act on it, because it may receive or nothing is in flight (a stop waits
 * for that). A wake for every message it could not act on cost a futex call
 * and a thread switch each, often to the other core. Its waits also time
 * out each second.
 * The callers signal after unlocking rt->mu: a thread woken while the
 * signaller still holds the mutex at once blocks on it again, which cost a
 * futex wait, a futex wake and a thread switch more per wake-up. The state
 * changed under the mutex, so a waiter either sees it or gets the signal. */
static bool receiver_should_wake(const struct runtime *rt)
{
	return may_receive(rt) || rt->inflight == 0;
}

/* Runs what ecw_runtime_take_work took: members and riders alike are concluded on
 * return. */
static void deliver_work(struct runtime *rt, struct ecw_client *c, struct slot **group, size_t n)
{
	if (n == 1) {
		ecw_deliver_one(rt, c, group[0]);
	} else if (ecw_circuit_is_open(rt->circuit)) {
		/* None runs while storage does not answer: each waits alone. */
		for (size_t i = 0; i < n; i++)
			ecw_deliver_one(rt, c, group[i]);
	} else {
		ecw_deliver_group(rt, c, group, n);
	}
}

/* Gives back the slots of what ecw_runtime_take_work took, riders included, once all
 * are settled; returns how many. Their keys may run again from here. */
static int give_back_work(struct runtime *rt, struct slot **group, size_t n)
{
	int count = 0;

	pthread_mutex_lock(&rt->mu);
	for (size_t i = 0; i < n; i++)
		for (struct slot *s = group[i]; s; s = s == group[i] ? s->riders : s->next_rider)
			s->running = false;
	pthread_mutex_unlock(&rt->mu);
	for (size_t i = 0; i < n; i++) {
		struct slot *rider = group[i]->riders;
		return_slot(group[i]);
		count++;
		while (rider) {
			struct slot *next = rider->next_rider; /* read before the slot is free */
			return_slot(rider);
			count++;
			rider = next;
		}
	}
	return count;
}

static void *job_thread(void *p)
{
	struct thread_arg *self = p;
	struct runtime *rt = self->rt;
	struct ecw_client *c = self->client;

	for (;;) {
		struct slot *group[GROUP_CAP];
		size_t n;

		pthread_mutex_lock(&rt->mu);
		/* Work is taken only while fewer than the limit run. */
		for (n = 0; !rt->workers_exit; ecw_runtime_idle_wait(rt, self))
			if (rt->running < rt->limit_now && (n = ecw_runtime_take_work(rt, group)) > 0)
				break;
		if (n == 0) {
			pthread_mutex_unlock(&rt->mu);
			break;
		}
		rt->running++;
		if (n == 1) {
			ecw_runtime_take_peers(rt, group[0], &self->peers);
			group[0]->peers = &self->peers;
		}
		/* The next thread takes the next group. */
		pthread_cond_t *next = rt->ready_n > 0 ? ecw_runtime_idle_pop(rt) : NULL;
		bool wake_receiver = receiver_should_wake(rt);
		pthread_mutex_unlock(&rt->mu);
		wake(next);
		if (wake_receiver)
			pthread_cond_signal(&rt->main_cv); /* it may fetch more */

		atomic_store(&self->running, group[0]);
		atomic_store(&self->busy_since_ms, ecw_clock_now_ms());
		deliver_work(rt, c, group, n);
		atomic_store(&self->busy_since_ms, 0);
		atomic_store(&self->running, NULL);
		group[0]->peers = NULL;

		int held = give_back_work(rt, group, n);
		pthread_mutex_lock(&rt->mu);
		rt->inflight -= held;
		rt->running--; /* this thread looks for work again at once */
		wake_receiver = receiver_should_wake(rt);
		pthread_mutex_unlock(&rt->mu);
		ecw_metrics_inflight_add(-held);
		if (wake_receiver)
			pthread_cond_signal(&rt->main_cv);
	}
	return NULL;
}

/* Ticks the schedules (worker/schedule/schedule.c) on its own connection, at least
 * once a second, until the first signal; a window it is enqueueing when the
 * signal comes is given back (its marker deleted) so another replica redoes
 * it. It never holds rt->mu while it talks to storage, so job threads and
 * the receive loop never wait for it. */
static void *sched_thread(void *p)
{
	struct thread_arg *a = p;
	struct runtime *rt = a->rt;
	struct ecw_scheduler *sched = NULL;

	if (ecw_schedule_runner_new(&sched, rt->cfg, rt->auditor) < 0)
		ecw_log_msg(ECW_LOG_ERROR, "schedule_error", "%s: schedules will not run",
			    ecw_error_last()->message);
	while (sched && !atomic_load(&rt->stopping)) {
		int64_t wait = ecw_schedule_runner_tick(sched, a->client, &rt->stopping);
		pthread_mutex_lock(&rt->mu);
		if (!atomic_load(&rt->stopping))
			ecw_clock_cond_wait_ms(&rt->sched_cv, &rt->mu, wait);
		pthread_mutex_unlock(&rt->mu);
	}
	ecw_schedule_runner_free(sched);
	pthread_mutex_lock(&rt->mu);
	rt->sched_exited = true;
	pthread_cond_broadcast(&rt->main_cv);
	pthread_mutex_unlock(&rt->mu);
	return NULL;
}

/* ---- start, loop, stop ------------------------------------------------------------------- */

/* The circuit's probe (circuit.c): one cheap request to each service on a
 * connection of its own, one attempt each with short timeouts: the list of
 * tables named with a prefix none has (an empty page), then the work
 * queue's metadata. */
static int probe_storage(void *payload)
{
	struct runtime *rt = payload;
	char **names = NULL;
	long long count;
	int err;

	err = ecw_table_list(&names, rt->probe_client, "EcwCircuitProbe", 1);
	ecw_table_names_free(names);
	if (err < 0 && ecw_circuit_err_is_outage(err))
		return err;
	return ecw_queue_count(&count, rt->probe_client, rt->cfg->worker.queue);
}

/* The client options of one thread: its cancellation and, for a job
 * thread, where its storage calls are stamped (the stall watch's). */
static struct ecw_client_options thread_options(const struct runtime *rt, const struct ecw_cancel *cancel,
						_Atomic int64_t *stamp)
{
	struct ecw_client_options o = rt->copts;

	o.cancel = cancel;
	o.on_attempt_payload = stamp;
	return o;
}

/* The circuit and its probe's connection. */
static int start_circuit(struct runtime *rt)
{
	const struct ecw_config *cfg = rt->cfg;
	struct ecw_client_options o = thread_options(rt, rt->jobs_cancel, NULL);
	struct ecw_circuit_limits limits = {
		.failures = cfg->worker.circuit_failures,
		.probe_min_ms = cfg->worker.circuit_probe_min_ms,
		.probe_max_ms = cfg->worker.circuit_probe_max_ms,
	};

	o.max_tries = 1;
	o.timeout_ms = o.timeout_ms < 5000 ? o.timeout_ms : 5000;
	o.connect_timeout_ms = o.connect_timeout_ms < 3000 ? o.connect_timeout_ms : 3000;
	if (ecw_client_new(&rt->probe_client, rt->acct, &o) < 0)
		return -1;
	return ecw_circuit_new(&rt->circuit, &limits, probe_storage, rt);
}

/* Creates the queues and the jobs' tables (create_missing). Returns 0 or the
 * error code of the first step that failed, which it has logged. */
static int prepare(struct runtime *rt, struct ecw_client *c)
{
	const struct ecw_config *cfg = rt->cfg;
	int err;

	if (!cfg->worker.create_missing)
		return 0;
	for (size_t i = 0; i < cfg->worker.nqueues; i++)
		if ((err = ecw_queue_create(NULL, c, cfg->worker.queues[i].name)) < 0 ||
		    (err = ecw_queue_create(NULL, c, cfg->worker.queues[i].poison)) < 0) {
			ecw_runtime_log_storage_error("queue.create");
			return err;
		}
	for (size_t i = 0; i < cfg->njobs; i++) {
		const struct ecw_job_def *d = &cfg->jobs[i];
		if (d->type->prepare && (err = d->type->prepare(d->settings, c)) < 0) {
			ecw_runtime_log_storage_error("job.prepare");
			return err;
		}
	}
	if (ecw_schedules_count(cfg->schedules) > 0 &&
	    (err = ecw_table_create(NULL, c, cfg->worker.schedule_table)) < 0) {
		ecw_runtime_log_storage_error("schedule.prepare");
		return err;
	}
	return 0;
}

static void log_start(const struct runtime *rt, const struct ecw_metrics_server *metrics)
{
	const struct ecw_config *cfg = rt->cfg;
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "start");

	ecw_log_str(l, "worker", ecw_version_worker_id());
	ecw_log_str(l, "config", cfg->file);
	ecw_log_str(l, "account", ecw_account_name(rt->acct));
	ecw_log_str(l, "queue_endpoint", ecw_account_endpoint(rt->acct, ECW_SVC_QUEUE));
	ecw_log_str(l, "table_endpoint", ecw_account_endpoint(rt->acct, ECW_SVC_TABLE));
	ecw_log_str(l, "auth", ecw_account_auth_name(rt->acct));
	ecw_log_str(l, "queue", cfg->worker.queue);
	ecw_log_str(l, "poison_queue", cfg->worker.poison_queue);
	ecw_log_int(l, "queues", (int64_t)cfg->worker.nqueues);
	ecw_log_int(l, "concurrency", cfg->worker.concurrency);
	ecw_log_int(l, "batch_size", cfg->worker.batch_size);
	ecw_log_int(l, "prefetch", cfg->worker.prefetch);
	ecw_log_int(l, "visibility_timeout_s", rt->vis_s);
	ecw_log_int(l, "max_dequeue_count", cfg->worker.max_dequeue_count);
	ecw_log_int(l, "jobs", (int64_t)cfg->njobs);
	ecw_log_int(l, "schedules", (int64_t)ecw_schedules_count(cfg->schedules));
	ecw_log_str(l, "metrics", cfg->metrics.listen[0] ? cfg->metrics.listen : "off");
	if (metrics)
		ecw_log_int(l, "metrics_port",
			    ecw_metrics_port(metrics)); /* the bound one, when listen says :0 */
	ecw_log_end(l);
	if (cfg->njobs == 0)
		ecw_log_msg(ECW_LOG_WARN, "config", "no jobs configured: every message will be poisoned");
}

static const char *env_lookup(const char *name)
{
	return getenv(name);
}

/* The OTLP exporter, when the OTEL_* variables name a collector; an invalid
 * variable stops the start (its message names it, never a header's value). */
static int start_otlp(struct runtime *rt)
{
	struct ecw_otlp_config *oc = calloc(1, sizeof(*oc)); /* ~70 KiB: not on the stack */
	int err;

	if (!oc)
		return ECW_ENOMEM;
	if ((err = ecw_otlp_config_read(oc, env_lookup)) < 0 ||
	    (oc->enabled && (err = ecw_otlp_exporter_new(&rt->otlp, oc)) < 0))
		ecw_log_msg(ECW_LOG_ERROR, "start_failed", "%s", ecw_error_last()->message);
	else if (oc->enabled)
		ecw_log_msg(ECW_LOG_INFO, "otlp_export", "exporting a span per message run (OTLP/HTTP JSON)");
	memset(oc, 0, sizeof(*oc)); /* the header values */
	free(oc);
	return err;
}

/* Puts a received message in a free slot, decoded (here, so that job threads
 * can see which waiting messages may run as a group), and returns the slot's
 * index; the caller made sure one is free, and hands the slot to the job
 * threads (dispatch). */
static int place(struct runtime *rt, const struct ecw_queue_def *queue, struct ecw_queue_msg *msg)
{
	const struct ecw_config *cfg = rt->cfg;
	struct ecw_message m;
	const struct ecw_job_def *def;
	int64_t now = ecw_clock_now_ms();
	bool decoded, groupable, keyed;
	char decode_error[512] = "";

	decoded = ecw_message_decode(&m, msg->text, msg->text_len) == 0;
	if (!decoded)
		snprintf(decode_error, sizeof(decode_error), "%s", ecw_error_last()->message);
	def = decoded ? ecw_config_job(cfg, m.job) : NULL;
	keyed = def && !def->type->keyless && m.pk && m.rk &&
		msg->dequeue_count <= cfg->worker.max_dequeue_count;
	groupable = keyed && def->type->run_group;

	for (int i = 0; i < rt->nslots; i++) {
		struct slot *s = &rt->slots[i];
		pthread_mutex_lock(&s->mu);
		if (s->busy) {
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		if (s->stale)
			dispose_slot(s);
		s->busy = true;
		s->done = s->abandoned = false;
		atomic_store(&s->lease_lost, false);
		s->queue = queue;
		s->msg = *msg;
		msg->text = NULL; /* the slot owns it now */
		s->m = m;
		s->decoded = decoded;
		memcpy(s->decode_error, decode_error, sizeof(decode_error));
		s->def = def;
		s->groupable = groupable;
		s->keyed = keyed;
		s->pk_hash = keyed ? ecw_hash_str(ECW_HASH_START, m.pk) : 0;
		s->keys_hash = keyed ? ecw_hash_str(s->pk_hash, m.rk) : 0;
		s->riders = s->next_rider = NULL;
		s->received_ms = now;
		s->renew_at_ms = now + (int64_t)rt->vis_s * 500;
		pthread_mutex_unlock(&s->mu);
		return i;
	}
	ecw_message_dispose(&m); /* unreachable: the caller checked for room */
	return -1;
}

/* Hands a whole receive to the job threads at once, so that none starts on
 * part of it before the rest is there to join its group, and wakes one
 * thread: it takes its group and wakes the next (job_thread). */
static void dispatch(struct runtime *rt, const struct ecw_queue_def *queue, struct ecw_queue_msg *msgs,
		     size_t count)
{
	int idx[DISPATCH_MAX];
	int n = 0;

	for (size_t i = 0; i < count && n < (int)(sizeof(idx) / sizeof(idx[0])); i++) {
		int k = place(rt, queue, &msgs[i]);
		if (k >= 0)
			idx[n++] = k;
	}
	pthread_mutex_lock(&rt->mu);
	for (int i = 0; i < n; i++)
		rt->ready[rt->ready_n++] = idx[i];
	rt->inflight += n;
	pthread_cond_t *first = n > 0 ? ecw_runtime_idle_pop(rt) : NULL;
	pthread_mutex_unlock(&rt->mu);
	ecw_metrics_inflight_add(n);
	wake(first); /* after the unlock: see receiver_should_wake */
}

/* Sleeps up to ms, waking early on a signal. */
static void nap(struct runtime *rt, int64_t ms)
{
	int64_t end = ecw_clock_now_ms() + ms;

	pthread_mutex_lock(&rt->mu);
	while (!atomic_load(&rt->stopping) && ecw_clock_now_ms() < end) {
		int64_t left = end - ecw_clock_now_ms();
		ecw_clock_cond_wait_ms(&rt->main_cv, &rt->mu, left > 1000 ? 1000 : left);
		ecw_metrics_heartbeat();
	}
	pthread_mutex_unlock(&rt->mu);
}

/* Start-up meets storage that is briefly away as often as a running worker
 * does (the service or the emulator restarting, a network blip, throttling, a
 * table still being deleted): prepare() is tried again after 1 s, doubling up
 * to 30 s, for as long as that lasts, with /readyz saying not ready and a
 * warning per attempt; a signal ends the wait. What waiting cannot mend (a
 * wrong key, missing rights, a name the service refuses) ends the start at
 * once. Returns 0 when prepared, 1 when a signal came first, -1 on failure. */
static int prepare_patiently(struct runtime *rt, struct ecw_client *c)
{
	int64_t wait_ms = 1000;
	int attempt = 1;

	for (;;) {
		int err = prepare(rt, c);
		if (err >= 0)
			return 0;
		/* 409 too: a table deleted a moment ago is "being deleted" for a while. */
		if (!ecw_error_is_transient(err) && err != ECW_ECONFLICT)
			return -1;
		if (atomic_load(&rt->stopping))
			return 1;
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "start_retry");
		ecw_log_int(l, "attempt", attempt++);
		ecw_log_int(l, "retry_in_ms", wait_ms);
		ecw_log_str(l, "error",
			    "could not create the queues and tables it needs; storage may be away");
		ecw_log_end(l);
		nap(rt, wait_ms);
		if (atomic_load(&rt->stopping))
			return 1;
		wait_ms = wait_ms * 2 > 30000 ? 30000 : wait_ms * 2;
	}
}

/* While the circuit is open nothing is received (a receive would raise the
 * dequeue counts of messages that cannot run): the loop probes storage
 * when the circuit says, until it closes. */
static void wait_out_outage(struct runtime *rt)
{
	int64_t due = ecw_circuit_probe_due_in_ms(rt->circuit);

	if (due > 0)
		nap(rt, due > 1000 ? 1000 : due);
	else if (due == 0)
		(void)ecw_circuit_probe(rt->circuit);
	ecw_metrics_heartbeat();
}

/* One receive of up to max messages, with what it tells: a failure counts
 * towards an outage (a good one says nothing of the table service, so only
 * the jobs' results end a streak) and /readyz follows it. */
static int receive_once(struct runtime *rt, struct ecw_client *c, const char *queue,
			struct ecw_queue_msg **msgs, size_t *count, int max)
{
	int err = ecw_queue_receive(msgs, count, c, queue, max, rt->vis_s);

	if (err < 0) {
		(void)ecw_circuit_note(rt->circuit, err);
		ecw_runtime_log_storage_error("queue.receive");
		ecw_metrics_set_ready(false);
	} else {
		ecw_metrics_set_ready(true);
		ecw_metrics_received((int64_t)time(NULL), (int)*count);
	}
	return err;
}

/* A receive that came back with a whole batch says the queue is deep: more
 * whole batches are received at once, while they fit in the free slots (up
 * to DISPATCH_MAX), and all are dispatched together, so that the job
 * threads see them all and form groups over several receives (a receive of
 * 32 over 10 partitions gave groups of about 3; with deep_want's room for
 * two batches, about 7 on the archive bench at concurrency 64). Only a full
 * batch leads to another receive: a lone message is dispatched at once, and
 * an idle worker still makes one receive per poll. A failed or short
 * receive ends it. */
static void receive_deeper(struct runtime *rt, struct ecw_client *c, const char *queue,
			   struct ecw_queue_msg **msgs, size_t *count)
{
	const int batch = rt->cfg->worker.batch_size;
	size_t got = *count;

	while (got == (size_t)batch && *count + (size_t)batch <= DISPATCH_MAX &&
	       !atomic_load(&rt->stopping)) {
		struct ecw_queue_msg *more = NULL, *all;
		int free_slots;

		pthread_mutex_lock(&rt->mu);
		free_slots = holding_cap(rt) - rt->inflight - (int)*count;
		pthread_mutex_unlock(&rt->mu);
		got = 0;
		if (free_slots < batch || receive_once(rt, c, queue, &more, &got, batch) < 0 || got == 0) {
			ecw_queue_msgs_free(more, got);
			return;
		}
		if (!(all = realloc(*msgs, (*count + got) * sizeof(**msgs)))) {
			/* They come back when their visibility timeout ends. */
			ecw_queue_msgs_free(more, got);
			return;
		}
		memcpy(&all[*count], more, got * sizeof(*more));
		free(more); /* the texts moved to all */
		*msgs = all;
		*count += got;
	}
}

/* One look at a queue (queue_watch.c), with what it tells, as a receive's:
 * a good look is a good sight of the queue for /readyz and the
 * not-receiving alert; a failure counts towards an outage. */
static int look(struct runtime *rt, struct ecw_queue_watch *w, struct ecw_queue_seen *q, struct ecw_client *c)
{
	int err = ecw_queue_watch_look(w, q, c);

	if (err < 0) {
		(void)ecw_circuit_note(rt->circuit, err);
		ecw_runtime_log_storage_error("queue.metadata");
		ecw_metrics_set_ready(false);
	} else if (q == &w->jobs) {
		ecw_metrics_set_ready(true);
		ecw_metrics_received((int64_t)time(NULL), 0);
	}
	return err;
}

enum before_receive { RECEIVE, PAUSED, NOTHING_THERE };

/* What the loop does before a receive; queue_watch.c says when it looks and
 * why. resting: the last receive or look found nothing. A look that fails
 * leaves what was known: a paused queue stays paused, anything else is
 * received from as if there were no watch. */
static enum before_receive look_first(struct runtime *rt, struct ecw_client *c, struct ecw_queue_watch *w,
				      bool resting)
{
	int64_t now = ecw_clock_now_ms();

	resting = resting || w->pause.paused;
	/* At rest the poison queue is looked at every 40 refreshes, beside the
	 * job queue's look, not in its place: a poll that skipped the job queue
	 * let a message wait two poll_interval.max (18.9 s at 10 s in the bench,
	 * 10 minutes into an idle worker). One request more every 10 minutes. */
	if (resting && ecw_queue_watch_poison_due_at_rest(w, now))
		(void)look(rt, w, &w->poison, c);
	if (!resting && ecw_queue_watch_due(&w->poison, now))
		(void)look(rt, w, &w->poison, c);
	if (resting || ecw_queue_watch_due(&w->jobs, now)) {
		if (look(rt, w, &w->jobs, c) < 0)
			return w->pause.paused ? PAUSED : RECEIVE;
		if (w->pause.paused)
			return PAUSED;
		if (resting && w->jobs.approximate == 0)
			return NOTHING_THERE;
	}
	return RECEIVE;
}

/* The pause after a poll of a queue that found nothing: it grows
 * exponentially, and while it grows it is jittered (half to all of it), so
 * replicas started together drift apart; at the cap it is
 * poll_interval.max exactly, so an idle queue costs at most one request per
 * max (6 a minute at 10 s: jitter below the cap would add a third). Returns
 * it and grows *poll_ms. */
static int64_t rest_ms(const struct runtime *rt, int64_t *poll_ms)
{
	int64_t max = rt->cfg->worker.poll_max_ms, ms = *poll_ms;

	*poll_ms = ms * 2 > max ? max : ms * 2;
	return ms >= max ? ms : ms / 2 + (int64_t)(ecw_clock_random_u32() % (uint32_t)(ms / 2 + 1));
}

/* One job queue (worker.queues) as the receive loop keeps it. */
struct qloop {
	const struct ecw_queue_def *def;
	struct ecw_queue_watch watch;
	int64_t poll_ms; /* its next pause after a poll that found nothing */
	int64_t due_ms; /* resting, paused or between warm polls: when it is looked at or received from next */
	bool resting;   /* its last receive or look found nothing, or it is paused */
	bool between;   /* warm, and drained for now: received from again at due_ms, with no look */
	int64_t work_ms; /* when a receive last brought messages; 0: never */
	int64_t gap_ms;  /* the messages' arrival gap as seen, smoothed; 0: not known yet */
};

/* While messages arrive, the wait for the next one follows their pace, not
 * the backoff. A queue is warm while a receive brought messages within the
 * last WARM_GAPS arrival gaps (WARM_MIN_MS at least): a receive that finds
 * it drained, or empty, is followed by another receive after a short wait
 * (between_ms), with no look first, and the backoff does not grow. Only a
 * queue that stayed empty that long rests, looked at with the growing pause
 * above, so the idle budget is the backoff's alone. Before this, each empty
 * receive between two arrivals started the backoff: at 20 messages a second
 * the waits grew to 200 and 400 ms (issue 35 measured a p99 of 304 ms), and
 * each rest ended with a look, then a receive: two round trips. */
#define WARM_MIN_MS 2000
#define WARM_GAPS 20

static bool warm(const struct qloop *q, int64_t now)
{
	int64_t span = q->gap_ms * WARM_GAPS;

	return q->work_ms > 0 && now - q->work_ms < (span > WARM_MIN_MS ? span : WARM_MIN_MS);
}

/* A warm queue's wait before its next receive: half the arrival gap (about
 * two receives a message, and a message waits a quarter of a gap on
 * average), or a quarter of the time since messages last came, whichever
 * is longer, so that the waits grow once they stop coming (and while the gap
 * is not known yet, after a first message); never below a twentieth of
 * poll_interval.min (5 ms at 100 ms: what one receive of a busy queue may
 * cost), never above poll_interval.max. */
static int64_t between_ms(const struct runtime *rt, const struct qloop *q, int64_t now)
{
	int64_t lo = rt->cfg->worker.poll_min_ms / 20, hi = rt->cfg->worker.poll_max_ms;
	int64_t ms = q->gap_ms / 2, quiet = (now - q->work_ms) / 4;

	if (lo < 1)
		lo = 1;
	if (quiet > ms)
		ms = quiet;
	return ms < lo ? lo : ms > hi ? hi : ms;
}

/* A receive brought n messages at now: the gap between arrivals, smoothed
 * over about eight receives. A queue that was not warm starts afresh: the
 * time it stood empty says nothing of how fast messages come now. */
static void saw_work(struct qloop *q, size_t n, int64_t now, bool was_warm)
{
	if (!was_warm) {
		q->gap_ms = 0;
	} else {
		int64_t gap = (now - q->work_ms) / (int64_t)n;
		q->gap_ms = q->gap_ms > 0 ? (q->gap_ms * 7 + gap) / 8 : gap;
	}
	q->work_ms = now;
}

/* Looks at each queue that is due for it (queue_watch.c) and tells the
 * picker which have work: a resting or paused queue when its poll comes,
 * a working one every refresh. */
static void look_at_queues(struct runtime *rt, struct ecw_client *c, struct qloop *qs, size_t n,
			   struct ecw_queue_pick *pick)
{
	for (size_t i = 0; i < n; i++) {
		struct qloop *q = &qs[i];
		int64_t now = ecw_clock_now_ms();

		if ((q->resting || q->between) && now < q->due_ms)
			continue;
		q->between = false;
		switch (look_first(rt, c, &q->watch, q->resting)) {
		case PAUSED:
			q->resting = true;
			q->due_ms = now + rt->cfg->worker.control_poll_ms;
			break;
		case NOTHING_THERE:
			q->resting = true;
			q->due_ms = now + rest_ms(rt, &q->poll_ms);
			break;
		case RECEIVE: q->resting = false; break;
		}
		ecw_queue_pick_set_ready(pick, i, !q->resting);
	}
}

/* Naps until the first resting queue's poll is due (a second at most: the
 * loop looks at its heartbeat and signals in between). */
static void nap_until_due(struct runtime *rt, const struct qloop *qs, size_t n)
{
	int64_t first = INT64_MAX, now = ecw_clock_now_ms();

	for (size_t i = 0; i < n; i++)
		if (qs[i].due_ms < first)
			first = qs[i].due_ms;
	nap(rt, first <= now ? 1 : first - now > 1000 ? 1000 : first - now);
}

/* Receives from the queues in turn, each while it has work, shared by
 * weight among those that have (queue_pick.c); a queue that has none costs
 * only its polls. */
static void receive_loop(struct runtime *rt, struct ecw_client *c)
{
	const struct ecw_config *cfg = rt->cfg;
	size_t nq = cfg->worker.nqueues;
	struct qloop qs[ECW_CONFIG_QUEUES_MAX];
	struct ecw_queue_pick pick;
	int weights[ECW_CONFIG_QUEUES_MAX];

	for (size_t i = 0; i < nq; i++) {
		const struct ecw_queue_def *d = &cfg->worker.queues[i];
		qs[i] = (struct qloop){.def = d, .poll_ms = cfg->worker.poll_min_ms};
		ecw_queue_watch_init(&qs[i].watch, d->name, d->poison, cfg->worker.control_poll_ms,
				     cfg->metrics.queue_refresh_ms);
		weights[i] = d->weight;
	}
	ecw_queue_pick_init(&pick, weights, nq);
	for (size_t i = 0; i < nq; i++)
		ecw_queue_pick_set_ready(&pick, i, true);
	while (!atomic_load(&rt->stopping)) {
		struct ecw_queue_msg *msgs = NULL;
		size_t count = 0;
		int room, i;

		if (ecw_circuit_is_open(rt->circuit)) {
			wait_out_outage(rt);
			continue;
		}
		look_at_queues(rt, c, qs, nq, &pick);
		if ((i = ecw_queue_pick_next(&pick)) < 0) {
			nap_until_due(rt, qs, nq);
			continue;
		}

		/* With a prefetch, receive when at most half of it still waits
		 * for a job thread and a whole batch fits: receives then come
		 * full rather than a few messages at a time, and the messages of
		 * one receive can run in groups (half batches of an interleaved
		 * workload made groups half as big). Without one, receive
		 * whenever a slot is free and nothing waits. While the queue is
		 * deep, wait for room for several batches (deep_want). */
		pthread_mutex_lock(&rt->mu);
		while (!may_receive(rt) && !atomic_load(&rt->stopping)) {
			ecw_clock_cond_wait_ms(&rt->main_cv, &rt->mu, 1000);
			ecw_metrics_heartbeat();
		}
		room = holding_cap(rt) - rt->inflight;
		pthread_mutex_unlock(&rt->mu);
		if (atomic_load(&rt->stopping))
			break;
		ecw_metrics_heartbeat();
		if (room > cfg->worker.batch_size)
			room = cfg->worker.batch_size;

		struct qloop *q = &qs[i];
		(void)receive_once(rt, c, q->def->name, &msgs, &count, room);
		pthread_mutex_lock(&rt->mu);
		rt->deep = count == (size_t)cfg->worker.batch_size;
		pthread_mutex_unlock(&rt->mu);
		int64_t now = ecw_clock_now_ms();
		if (count > 0)
			saw_work(q, count, now, warm(q, now));
		if (count < (size_t)room && warm(q, now)) {
			/* Drained for now (or empty, or failing) while messages
			 * arrive: the next receive after a short wait. */
			q->between = true;
			q->due_ms = now + between_ms(rt, q, now);
			ecw_queue_pick_set_ready(&pick, (size_t)i, false);
		} else if (count == 0) {
			/* Empty (or failing) and cold: it rests; its next poll is
			 * a look. */
			q->resting = true;
			q->due_ms = now + rest_ms(rt, &q->poll_ms);
			ecw_queue_pick_set_ready(&pick, (size_t)i, false);
		}
		if (count == 0) {
			ecw_queue_msgs_free(msgs, count);
			continue;
		}
		q->poll_ms = cfg->worker.poll_min_ms;
		/* More batches at once only while no other queue waits for its
		 * share: they would be more than this queue's turn. */
		size_t others = 0;
		for (size_t k = 0; k < nq; k++)
			others += k != (size_t)i && !qs[k].resting && !qs[k].between;
		if (others == 0)
			receive_deeper(rt, c, q->def->name, &msgs, &count);
		dispatch(rt, q->def, msgs, count);
		ecw_queue_msgs_free(msgs, count);
	}
}

/* Gives a held message back at once (visible again) so that another replica
 * can take it, with its log line. Under the slot's lock. */
static void release(struct ecw_client *c, struct slot *s)
{
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "message");

	ecw_deliver_log_trace(l, s);
	ecw_log_str(l, "outcome", "released");
	ecw_log_str(l, "job", s->m.job);
	ecw_log_str(l, "pk", s->m.pk);
	ecw_log_str(l, "rk", s->m.rk);
	ecw_deliver_log_keyless_fields(l, s);
	ecw_log_str(l, "message_id", s->msg.id);
	ecw_log_int(l, "dequeue_count", s->msg.dequeue_count);
	ecw_log_int(l, "duration_ms", ecw_clock_now_ms() - s->received_ms);
	if (ecw_queue_update(&s->msg, c, s->queue->name, 0, NULL, 0) < 0)
		ecw_log_str(l, "error", ecw_error_last()->message);
	ecw_log_end(l);
	ecw_metrics_message(s->def ? s->def->name : "", "released",
			    (double)(ecw_clock_now_ms() - s->received_ms) / 1000.0);
}

/* Gives back at once what waits for a job thread (the prefetch: no job of
 * it started), then waits for the running jobs up to shutdown_grace, then
 * releases what is still held. Returns true when every job finished (the
 * threads can be joined). */
static bool drain(struct runtime *rt, struct ecw_client *c)
{
	int64_t deadline = ecw_shutdown_start_clock(rt);
	int left;

	for (;;) {
		pthread_mutex_lock(&rt->mu);
		struct slot *s = rt->ready_n > 0 ? ecw_runtime_take_ready(rt, rt->ready_n - 1) : NULL;
		pthread_mutex_unlock(&rt->mu);
		if (!s)
			break;
		pthread_mutex_lock(&s->mu);
		s->done = true;
		release(c, s);
		pthread_mutex_unlock(&s->mu);
		return_slot(s);
		pthread_mutex_lock(&rt->mu);
		rt->inflight--;
		ecw_metrics_inflight_add(-1);
		pthread_mutex_unlock(&rt->mu);
	}

	pthread_mutex_lock(&rt->mu);
	while (rt->inflight > 0 && ecw_clock_now_ms() < deadline && !atomic_load(&rt->force)) {
		int64_t ms = deadline - ecw_clock_now_ms();
		ecw_clock_cond_wait_ms(&rt->main_cv, &rt->mu, ms > 1000 ? 1000 : ms);
		ecw_metrics_heartbeat();
	}
	left = rt->inflight;
	pthread_mutex_unlock(&rt->mu);
	if (left == 0)
		return true;
	if (atomic_load(&rt->force))
		return false;
	for (int i = 0; i < rt->nslots; i++) {
		struct slot *s = &rt->slots[i];
		pthread_mutex_lock(&s->mu);
		if (s->busy && !s->done) {
			/* From here the job may not write, and nobody settles it. */
			s->abandoned = true;
			atomic_store(&s->lease_lost, true);
			release(c, s);
		}
		pthread_mutex_unlock(&s->mu);
	}
	return false;
}

int ecw_runtime_run(const struct ecw_config *cfg, bool *threads_done)
{
	struct runtime *rt = calloc(1, sizeof(*rt));
	struct thread_arg *args = NULL, renew_arg = {0}, sched_arg = {0};
	pthread_t sig_tid;
	struct ecw_metrics_server *metrics = NULL;
	struct ecw_client *c = NULL;
	sigset_t set;
	bool joinable = true;
	int rc = 1;

	if (!rt)
		return 1;
	rt->cfg = cfg;
	rt->nthreads = cfg->worker.concurrency;
	rt->prefetch = cfg->worker.prefetch;
	rt->nslots = rt->nthreads + rt->prefetch;
	rt->want = rt->prefetch == 0                     ? 1
		   : cfg->worker.batch_size < rt->nslots ? cfg->worker.batch_size
							 : rt->nslots;
	if (rt->want < 1)
		rt->want = 1;
	rt->deep_want = rt->prefetch > 0 ? rt->nslots * 2 / 3 / rt->want * rt->want : rt->want;
	if (rt->deep_want < rt->want)
		rt->deep_want = rt->want;
	rt->vis_s = (int)(cfg->worker.visibility_timeout_ms / 1000);
	ecw_limiter_init(&rt->limiter, cfg->worker.concurrency_min, cfg->worker.concurrency);
	rt->limit_now = cfg->worker.concurrency;
	ecw_metrics_set_concurrency_limit(rt->limit_now, false);
	rt->limits = (struct ecw_outcome_limits){
		.max_dequeue_count = cfg->worker.max_dequeue_count,
		.retry_backoff_base_ms = cfg->worker.retry_backoff_base_ms,
		.retry_backoff_max_ms = cfg->worker.retry_backoff_max_ms,
	};
	ecw_connect_client_options(&rt->copts, cfg);
	rt->copts.on_attempt = on_attempt;
	rt->stall_timeout_ms = cfg->worker.stall_timeout_ms;
#ifdef ECW_TESTING
	/* Tests cannot wait the minute the configuration allows at least. */
	const char *stall = getenv("ECW_TEST_STALL_TIMEOUT_MS");
	if (stall && atoll(stall) > 0)
		rt->stall_timeout_ms = atoll(stall);
#endif
	if (ecw_cancel_new(&rt->jobs_cancel) < 0 || ecw_cancel_new(&rt->final_cancel) < 0)
		return 1;
	pthread_mutex_init(&rt->mu, NULL);
	ecw_clock_cond_init(&rt->main_cv);
	ecw_clock_cond_init(&rt->renew_cv);
	ecw_clock_cond_init(&rt->sched_cv);
	ecw_connect_register_secrets(cfg);

	/* Signals go to the signal thread only: block them before any thread
	 * (libmicrohttpd's included) exists, so all inherit the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	/* The signal thread outlives this function (it is detached and may
	 * still hold rt when the process exits): it gets rt itself, which stays
	 * allocated and reachable from here. */
	the_runtime = rt;
	if (pthread_create(&sig_tid, NULL, ecw_shutdown_signal_thread, rt) == 0)
		pthread_detach(sig_tid);

	/* After the mask, which its thread inherits: a SIGTERM is the signal
	 * thread's. */
	if (start_otlp(rt) < 0)
		goto done;
	if (ecw_connect_account(&rt->acct, cfg) < 0) {
		ecw_log_msg(ECW_LOG_ERROR, "start_failed", "%s", ecw_error_last()->message);
		goto done;
	}
	struct ecw_client_options main_opts = thread_options(rt, rt->final_cancel, NULL);
	if (ecw_client_new(&c, rt->acct, &main_opts) < 0 || start_circuit(rt) < 0) {
		ecw_runtime_log_storage_error("client.new");
		goto done;
	}
	ecw_metrics_set_liveness_window(cfg->worker.poll_max_ms + 30000);
	ecw_metrics_heartbeat();
	ecw_metrics_declare(NULL); /* the poison reasons, even with no job */
	for (size_t i = 0; i < cfg->njobs; i++)
		ecw_metrics_declare(cfg->jobs[i].name);
	if (cfg->metrics.listen[0] && ecw_metrics_start(&metrics, cfg->metrics.listen) < 0) {
		ecw_log_msg(ECW_LOG_ERROR, "start_failed", "%s", ecw_error_last()->message);
		goto done;
	}
	log_start(rt, metrics);
	switch (prepare_patiently(rt, c)) {
	case 0: break;
	case 1:
		rc = 0;
		ecw_log_msg(ECW_LOG_INFO, "stop", "stopped before start-up completed");
		goto done;
	default:
		ecw_log_msg(ECW_LOG_ERROR, "start_failed", "could not create the queues and tables it needs");
		goto done;
	}
	if (ecw_runtime_preflight(cfg, c, rt->acct) < 0)
		goto done;
	ecw_metrics_set_ready(true);

	rt->slots = calloc((size_t)rt->nslots, sizeof(*rt->slots));
	rt->ready = calloc((size_t)rt->nslots, sizeof(*rt->ready));
	args = calloc((size_t)rt->nthreads, sizeof(*args));
	rt->idle = calloc((size_t)rt->nthreads, sizeof(*rt->idle));
	if (!rt->slots || !rt->ready || !args || !rt->idle)
		goto done;
	for (int i = 0; i < rt->nthreads; i++)
		pthread_cond_init(&args[i].idle_cv, NULL);
	for (int i = 0; i < rt->nslots; i++)
		pthread_mutex_init(&rt->slots[i].mu, NULL);
	rt->threads = args;
	for (int i = 0; i < rt->nthreads; i++) {
		struct ecw_client_options o = thread_options(rt, rt->jobs_cancel, &args[i].last_storage_ms);
		if (ecw_client_new(&args[i].client, rt->acct, &o) < 0) {
			ecw_runtime_log_storage_error("client.new");
			goto done;
		}
	}
	struct ecw_client_options renew_opts = thread_options(rt, rt->jobs_cancel, NULL);
	if (ecw_client_new(&renew_arg.client, rt->acct, &renew_opts) < 0) {
		ecw_runtime_log_storage_error("client.new");
		goto done;
	}
	for (int i = 0; i < rt->nthreads; i++) {
		args[i].rt = rt;
		args[i].started = pthread_create(&args[i].tid, NULL, job_thread, &args[i]) == 0;
	}
	renew_arg.rt = rt;
	renew_arg.started = pthread_create(&renew_arg.tid, NULL, ecw_runtime_renew_thread, &renew_arg) == 0;
	if (ecw_schedules_count(cfg->schedules) > 0) {
		struct ecw_client_options sched_opts = thread_options(rt, rt->jobs_cancel, NULL);
		if (ecw_client_new(&sched_arg.client, rt->acct, &sched_opts) < 0 ||
		    ecw_schedule_audit_new(&rt->auditor, cfg, rt->acct, &sched_opts, &rt->stopping) < 0) {
			ecw_runtime_log_storage_error("client.new");
			atomic_store(&rt->stopping, true); /* the threads above end with the loop */
		} else {
			sched_arg.rt = rt;
			sched_arg.started =
				pthread_create(&sched_arg.tid, NULL, sched_thread, &sched_arg) == 0;
		}
	}

	receive_loop(rt, c);

	int64_t stop_deadline = ecw_shutdown_start_clock(rt);
	joinable = drain(rt, c);
	/* The scheduler gets the same grace as the jobs: it stops between two
	 * requests, so only a storage call stuck past the grace keeps it. */
	if (joinable && sched_arg.started) {
		pthread_mutex_lock(&rt->mu);
		while (!rt->sched_exited && ecw_clock_now_ms() < stop_deadline && !atomic_load(&rt->force)) {
			int64_t ms = stop_deadline - ecw_clock_now_ms();
			ecw_clock_cond_wait_ms(&rt->main_cv, &rt->mu, ms > 1000 ? 1000 : ms);
		}
		joinable = rt->sched_exited;
		pthread_mutex_unlock(&rt->mu);
		if (!joinable)
			ecw_log_msg(ECW_LOG_WARN, "schedule_error",
				    "the scheduler was still busy when shutdown_grace ran out");
	}
	/* The audit in hand stops before its next request and gives its window
	 * back: the same grace. */
	if (joinable && !ecw_schedule_audit_wait(rt->auditor, atomic_load(&rt->force) ? 0 : stop_deadline)) {
		joinable = false;
		ecw_log_msg(ECW_LOG_WARN, "schedule_error",
			    "the audit was still busy when shutdown_grace ran out");
	}
	if (joinable) {
		pthread_mutex_lock(&rt->mu);
		rt->workers_exit = true;
		ecw_runtime_wake_idle(rt);
		pthread_cond_broadcast(&rt->renew_cv);
		pthread_mutex_unlock(&rt->mu);
		for (int i = 0; i < rt->nthreads; i++)
			if (args[i].started)
				pthread_join(args[i].tid, NULL);
		if (renew_arg.started)
			pthread_join(renew_arg.tid, NULL);
		if (sched_arg.started)
			pthread_join(sched_arg.tid, NULL);
		/* Every span is in: what is queued goes out, briefly. */
		ecw_otlp_exporter_free(rt->otlp, OTLP_FLUSH_MS);
		rt->otlp = NULL;
	}
	rc = atomic_load(&rt->force) ? 130 : 0;
	ecw_log_msg(ECW_LOG_INFO, "stop", "%s", rc == 0 ? "stopped cleanly" : "stopped by a second signal");
done:
	ecw_metrics_stop(metrics);
	ecw_client_free(c); /* the receive loop's own: no job thread uses it */
	*threads_done = joinable;
	if (joinable)
		ecw_otlp_exporter_free(rt->otlp, OTLP_FLUSH_MS); /* a start that failed after it began */
	if (!joinable)
		return rc; /* job threads still run: the process ends now, freeing nothing they use */
	if (args)
		for (int i = 0; i < rt->nthreads; i++) {
			ecw_client_free(args[i].client);
			pthread_cond_destroy(&args[i].idle_cv);
		}
	ecw_client_free(renew_arg.client);
	ecw_client_free(sched_arg.client);
	ecw_schedule_audit_free(rt->auditor);
	ecw_client_free(rt->probe_client);
	ecw_circuit_free(rt->circuit);
	ecw_account_free(rt->acct);
	if (rt->slots)
		for (int i = 0; i < rt->nslots; i++) {
			dispose_slot(&rt->slots[i]);
			pthread_mutex_destroy(&rt->slots[i].mu);
		}
	free(rt->slots);
	free(rt->ready);
	free(rt->idle);
	free(args);
	/* rt itself stays: the detached signal thread may still read it. */
	return rc;
}
