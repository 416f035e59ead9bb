/* SPDX-License-Identifier: MIT */
/* deliver.c - carrying out one delivery: the facts of a message gathered,
 * the outcome rules (a pure function, in outcome.c) asked, and their answer
 * carried out; or a group of messages run together, each then concluded as
 * if it had run alone. Poisoning lets the job hand over what the message's
 * id holds (its abandon: that id never runs again), puts the envelope on
 * the poison queue, THEN deletes the original: a crash in between leaves a
 * duplicate envelope, never a lost message.
 *
 * Every final call on a message (delete, hide) happens under the message's
 * slot lock with the pop receipt the renewer last obtained, so a renewal can
 * never invalidate the receipt a delete is about to use. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime_private.h"
#include "ecw_buf.h"
#include "ecw_clock.h"
#include "ecw_crash.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "ecw_version.h"
#include "message.h"
#include "telemetry.h"
#include "poison.h"

/* One message on its way through a job thread: what the steps after the job
 * need, gathered once (its job was resolved on receipt, in slot->def). */
struct delivery {
	struct slot *s;
	struct ecw_job_ctx ctx;        /* what the job ran with; .outcome_detail for the log */
	struct ecw_outcome o;          /* the rules' answer, then what settling made of it */
	enum ecw_poison_reason reason; /* why it is poisoned, kept when the envelope fails */
	char error[512];               /* the failure's text, for the log and the envelope */
	int http_status;               /* the storage answer behind it, for the envelope: 0 if none */
	char error_code[64];           /* its x-ms-error-code, "" if none */
	char error_table[64];          /* the missing table of an ECW_ENOTABLE, "" if none */
	int64_t t0;
	size_t group; /* members run together with it (1: alone) */
	/* Duplicates riding with its run (its slot's riders); for a rider,
	 * the message id whose run it rode with. */
	size_t duplicates;
	const char *ran_with;
	/* This run's span (trace.c): every log line about the message
	 * carries its ids, its follow-ups and envelope its context, and the
	 * exporter gets it when it ends (close_span). */
	struct ecw_span_ids span;
	int64_t start_ns;  /* Unix time, for the export */
	int64_t attempts0; /* the thread's storage attempts when it began */
	/* After its run: the run's result and whether the circuit called it an
	 * outage (for its riders), and whether its final call is made. */
	int run_err;
	bool outage;
	bool settled;
};

/* The failure err in d->error (the last error's text, else err's name) and
 * the storage answer behind it, which the envelope records apart so
 * `poison list --group-by status` need not read the text. */
static void note_failure(struct delivery *d, int err)
{
	const struct ecw_error *e = ecw_error_last();

	snprintf(d->error, sizeof(d->error), "%s", e->message[0] ? e->message : ecw_error_name(err));
	d->http_status = e->http_status;
	snprintf(d->error_code, sizeof(d->error_code), "%s", e->service_code);
	snprintf(d->error_table, sizeof(d->error_table), "%s", e->table);
}

static int64_t unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Opens d's span in the trace its message carries, or in a new one
 * (trace.c), and makes its ids the thread's log fields. An invalid
 * traceparent is ignored with one warning: it never changes the outcome. */
static void open_span(struct delivery *d, int64_t start_ns)
{
	const struct slot *s = d->s;
	const struct ecw_message *m = &s->m;
	struct ecw_trace_ctx parent;
	bool valid = false;
	char why[160] = "";

	if (m->traceparent && ecw_trace_parent_parse(&parent, m->traceparent, m->traceparent_len) == 0)
		valid = true;
	else if (m->traceparent)
		snprintf(why, sizeof(why), "%.159s", ecw_error_last()->message);
	else if (m->traceparent_present)
		snprintf(why, sizeof(why), "traceparent: not a string");
	ecw_trace_span_start(&d->span, valid ? &parent : NULL, s->msg.id[0] ? s->msg.id : NULL);
	d->start_ns = start_ns;
	d->attempts0 = ecw_runtime_thread_attempts();
	pthread_mutex_lock(&d->s->mu);
	memcpy(d->s->trace_hex, d->span.trace_hex, sizeof(d->s->trace_hex));
	memcpy(d->s->span_hex, d->span.span_hex, sizeof(d->s->span_hex));
	pthread_mutex_unlock(&d->s->mu);
	ecw_log_set_trace(d->span.trace_hex, d->span.span_hex);
	if (why[0]) {
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "traceparent_invalid");
		ecw_log_str(l, "job", m->job);
		ecw_log_str(l, "message_id", s->msg.id);
		ecw_log_str(l, "error", why);
		ecw_log_end(l);
	}
}

void ecw_deliver_log_trace(struct ecw_log_line *l, const struct slot *s)
{
	struct ecw_trace_ctx c;
	char hex[33];

	if (s->trace_hex[0]) {
		ecw_log_str(l, "trace_id", s->trace_hex);
		ecw_log_str(l, "span_id", s->span_hex);
	} else if (s->m.traceparent &&
		   ecw_trace_parent_parse(&c, s->m.traceparent, s->m.traceparent_len) == 0) {
		ecw_trace_hex(hex, c.trace_id, sizeof(c.trace_id));
		ecw_log_str(l, "trace_id", hex);
	}
}

/* Ends d's span: hands it to the exporter (when one is configured and the
 * trace is sampled) and clears the thread's log fields. */
static void close_span(struct runtime *rt, const struct delivery *d)
{
	const struct slot *s = d->s;
	struct ecw_otlp_span sp = {
		.ids = d->span,
		.dequeue_count = s->msg.dequeue_count,
		.storage_requests = ecw_runtime_thread_attempts() - d->attempts0,
		.group = (int64_t)d->group,
		.start_unix_ns = d->start_ns,
		.end_unix_ns = unix_ns(),
		.error = d->error[0] != '\0',
	};
	const char *job = s->def ? s->def->name : s->m.job;

	ecw_log_set_trace(NULL, NULL);
	if (!rt->otlp || !(d->span.flags & ECW_TRACE_FLAG_SAMPLED))
		return;
	snprintf(sp.name, sizeof(sp.name), "%s", job ? job : "message");
	snprintf(sp.job, sizeof(sp.job), "%s", job ? job : "");
	snprintf(sp.outcome, sizeof(sp.outcome), "%s", d->o.word ? d->o.word : "");
	snprintf(sp.message_id, sizeof(sp.message_id), "%.95s", s->msg.id);
	snprintf(sp.queue, sizeof(sp.queue), "%s", s->queue->name);
	/* Redacted before it is cut: a secret cut in half would not be
	 * recognised when the batch is redacted again. */
	if (d->error[0]) {
		struct ecw_buf red;
		ecw_buf_init(&red, 0);
		snprintf(sp.status_message, sizeof(sp.status_message), "%.255s",
			 ecw_log_redact(&red, d->error, strlen(d->error)) == 0
				 ? ecw_buf_cstr(&red)
				 : "(the error could not be redacted)");
		ecw_buf_dispose(&red);
	}
	ecw_otlp_submit(rt->otlp, &sp);
}

/* outage: the storage circuit is open (circuit.c), for this delivery. */
static void decide(struct runtime *rt, struct delivery *d, enum ecw_outcome_stage stage, bool runnable,
		   int err, bool outage)
{
	struct slot *s = d->s;
	struct ecw_outcome_facts facts = {
		.stage = stage,
		.decoded = s->decoded,
		.runnable = runnable,
		.err = err,
		.later_s = d->ctx.later_s,
		.dequeue_count = s->msg.dequeue_count,
		.lease_lost = atomic_load(&s->lease_lost),
		.outage = outage,
	};

	ecw_outcome_decide(&d->o, &facts, &rt->limits, ecw_clock_random_u32);
	if (d->o.reason != ECW_REASON_NONE)
		d->reason = d->o.reason;
}

/* The one final storage call on a message, under its slot lock, with the
 * newest pop receipt: delete (succeeded, or poisoned once the envelope is
 * put) or hide (retried). The lease and a shutdown's release are looked at
 * again here, at the moment of the call (ecw_outcome_guard).
 *
 * settle_due takes the lock and says whether a call is due; if not, it has
 * let the lock go. settle_done takes the call's result and lets it go. */
static bool settle_due(struct delivery *d)
{
	struct slot *s = d->s;
	enum ecw_outcome_action action;

	pthread_mutex_lock(&s->mu);
	s->done = true;
	ecw_outcome_guard(&d->o, atomic_load(&s->lease_lost), s->abandoned);
	action = d->o.action;
	if (action == ECW_ACTION_DELETE || action == ECW_ACTION_POISON || action == ECW_ACTION_REQUEUE ||
	    action == ECW_ACTION_RETRY)
		return true;
	pthread_mutex_unlock(&s->mu);
	return false;
}

static void settle_done(struct delivery *d, int err)
{
	struct slot *s = d->s;

	if (err == ECW_ENOTFOUND) {
		atomic_store(&s->lease_lost, true);
		d->o.action = ECW_ACTION_LEAVE;
		d->o.word = "lease-lost";
	} else if (err < 0) {
		/* The message stays as it is: it reappears when its lease runs
		 * out and is tried again. */
		ecw_runtime_log_storage_error(d->o.action == ECW_ACTION_RETRY ? "queue.update"
									      : "queue.delete");
		d->o.word = "settle-failed";
	}
	d->settled = true;
	pthread_mutex_unlock(&s->mu);
}

static void settle(struct ecw_client *c, struct delivery *d)
{
	struct slot *s = d->s;

	if (!settle_due(d)) {
		d->settled = true;
		return;
	}
	settle_done(d, d->o.action == ECW_ACTION_RETRY
			       ? ecw_queue_update(&s->msg, c, s->queue->name, d->o.hide_s, NULL, 0)
			       : ecw_queue_delete(c, s->queue->name, s->msg.id, s->msg.pop_receipt));
}

/* After a job with `then:` succeeded: one message per follow-up job for the
 * same keys, put BEFORE the original is deleted. A crash in between puts them
 * again on the next delivery; the jobs converge, so duplicates are harmless.
 * Each carries the run's trace context: same trace, this run's span as the
 * parent. */
static int enqueue_then(struct runtime *rt, struct ecw_client *c, const struct delivery *d)
{
	const struct slot *s = d->s;
	struct ecw_queue_put_options po = {0, rt->cfg->worker.message_ttl_s};
	const struct ecw_message *m = &s->m;
	char **then = s->def->then;
	struct ecw_trace_ctx child;
	char field[sizeof("traceparent=") + ECW_TRACEPARENT_LEN];
	char *fields[] = {field, NULL};
	struct ecw_buf text;
	int err = 0;

	ecw_trace_child_context(&child, &d->span);
	memcpy(field, "traceparent=", sizeof("traceparent=") - 1);
	ecw_trace_parent_format(field + sizeof("traceparent=") - 1, &child);
	ecw_buf_init(&text, 0);
	for (size_t i = 0; then[i] && err == 0; i++) {
		ecw_buf_reset(&text);
		if (atomic_load(&s->lease_lost)) {
			err = ecw_error_set(ECW_ETRANSIENT, "lease lost before enqueueing '%s'", then[i]);
			break;
		}
		if ((err = ecw_message_encode(&text, then[i], m->pk, m->rk, m->id ? m->id : s->msg.id, fields,
					      false)) == 0)
			err = ecw_queue_put(NULL, c, s->queue->name, text.ptr, text.len,
					    &po); /* its own queue */
	}
	ecw_buf_dispose(&text);
	if (err < 0 && ecw_job_err_is_permanent(err))
		err = ECW_ETRANSIENT; /* the job's work is done: never poison it for the follow-up */
	return err;
}

static struct ecw_job_ctx job_ctx(struct runtime *rt, struct ecw_client *c, struct slot *s)
{
	const struct ecw_message *m = &s->m;

	return (struct ecw_job_ctx){
		.client = c,
		.job = s->def->name,
		.pk = m->pk,
		.rk = m->rk,
		.trace_id = m->id ? m->id : s->msg.id,
		.message_id = s->msg.id,
		.dequeue_count = s->msg.dequeue_count,
		.message = m->obj,
		.lease_lost = &s->lease_lost,
		.stopping = &rt->stopping,
		.peers = s->peers && s->peers->n ? s->peers->rk : NULL,
		.npeers = s->peers ? s->peers->n : 0,
	};
}

/* Before a decoded message of a configured job is poisoned: its id will never
 * run again (a replay runs under a new id), so the job hands over what the id
 * holds (ecw_job.h). Not when the lease is gone: then another worker holds the
 * message and this one neither poisons it nor may write. A failure leaves what
 * the id holds with it (each job's header says what that costs); the envelope
 * matters more, so the poisoning goes on. */
static void abandon(struct runtime *rt, struct ecw_client *c, struct slot *s)
{
	const struct ecw_job_def *def = s->def;
	int err;

	if (!def || !def->type->abandon || atomic_load(&s->lease_lost))
		return;
	struct ecw_job_ctx ctx = job_ctx(rt, c, s);
	ecw_error_clear();
	if ((err = def->type->abandon(def->settings, &ctx)) < 0) {
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "abandon_failed");
		ecw_log_str(l, "job", s->m.job);
		ecw_log_str(l, "pk", s->m.pk);
		ecw_log_str(l, "rk", s->m.rk);
		ecw_log_str(l, "message_id", s->msg.id);
		ecw_log_str(l, "error",
			    ecw_error_last()->message[0] ? ecw_error_last()->message : ecw_error_name(err));
		ecw_log_end(l);
	}
}

/* Puts the envelope (or, when it would not fit in a message, the original
 * text unchanged, which replay also accepts), then deletes the original. */
static void poison(struct runtime *rt, struct ecw_client *c, struct delivery *d)
{
	struct slot *s = d->s;
	const struct ecw_message *m = &s->m;
	const char *reason = ecw_outcome_reason_name(d->reason);
	struct ecw_queue_put_options po = {0, rt->cfg->worker.message_ttl_s};
	struct ecw_poison_info info = {
		.original = s->msg.text,
		.original_len = s->msg.text_len,
		.queue = s->queue->name,
		.message_id = s->msg.id,
		.inserted_at = s->msg.insertion_time,
		.dequeue_count = s->msg.dequeue_count,
		.failed_at = time(NULL),
		.reason = reason,
		.error = d->error,
		.http_status = d->http_status,
		.error_code = d->error_code,
		.job = m->job,
		.pk = m->pk,
		.rk = m->rk,
		.worker = ecw_version_worker_id(),
	};
	struct ecw_trace_ctx ctx;
	char traceparent[ECW_TRACEPARENT_LEN + 1];
	struct ecw_buf env;
	int err;

	ecw_trace_child_context(&ctx, &d->span);
	ecw_trace_parent_format(traceparent, &ctx);
	info.traceparent = traceparent;
	if (s->decoded)
		abandon(rt, c, s);
	if (atomic_load(&s->lease_lost)) {
		settle(c, d); /* guarded: leaves it */
		return;
	}
	ecw_buf_init(&env, 0);
	if ((err = ecw_poison_envelope(&env, &info)) == 0) {
		if (env.len <= ECW_QUEUE_MAX_TEXT)
			err = ecw_queue_put(NULL, c, s->queue->poison, env.ptr, env.len, &po);
		else
			err = ecw_queue_put(NULL, c, s->queue->poison, s->msg.text, s->msg.text_len, &po);
	}
	ecw_buf_dispose(&env);
	if (err < 0) {
		/* Without an envelope the original must stay: back off and try again. */
		ecw_runtime_log_storage_error("poison.put");
		decide(rt, d, ECW_STAGE_POISON_FAILED, false, err, false);
	} else {
		ecw_metrics_poisoned(reason);
	}
	settle(c, d);
}

/* An outage held the message at its last allowed delivery (outcome.c,
 * ECW_ACTION_REQUEUE): its text goes back on the work queue as a new
 * message, hidden for hide_s, THEN the original is deleted, so its next
 * delivery counts from 1. A crash in between leaves both: the copy runs as
 * a duplicate would, and the original, over its limit on its next receipt,
 * is poisoned with an envelope (replaying that converges too). The id never
 * runs again, so the job first hands over what it holds, as for poisoning.
 * A failed put leaves the original hidden as a retry would. */
static void requeue(struct runtime *rt, struct ecw_client *c, struct delivery *d)
{
	struct slot *s = d->s;
	struct ecw_queue_put_options po = {d->o.hide_s, rt->cfg->worker.message_ttl_s};

	if (s->decoded)
		abandon(rt, c, s);
	if (!atomic_load(&s->lease_lost) &&
	    ecw_queue_put(NULL, c, s->queue->name, s->msg.text, s->msg.text_len, &po) < 0) {
		ecw_runtime_log_storage_error("requeue.put");
		d->o.action = ECW_ACTION_RETRY;
		d->o.word = "retried";
	}
	settle(c, d); /* guarded: leaves it when the lease is gone */
}

/* A keyless message names no entity: its line names what it ran on with the
 * fields its job reads (ecw_message_log_fields). A keyed message (every one a
 * move or an index sends) has its keys logged instead. */
void ecw_deliver_log_keyless_fields(struct ecw_log_line *l, const struct slot *s)
{
	const struct ecw_job_def *def = s->def;

	if (!l || !def || !def->type->keyless || s->m.pk)
		return;
	ecw_message_log_fields(l, &s->m,
			       def->type->message_fields ? def->type->message_fields(def->settings) : NULL);
}

static void log_message(const struct delivery *d)
{
	const struct slot *s = d->s;
	const struct ecw_message *m = &s->m;
	const char *outcome = d->o.word;
	/* Waiting is the job's design (ECW_ELATER), no failure. */
	bool fine = strcmp(outcome, "succeeded") == 0 || strcmp(outcome, "waiting") == 0;
	struct ecw_log_line *l = ecw_log_begin(fine ? ECW_LOG_INFO : ECW_LOG_WARN, "message");

	ecw_log_str(l, "outcome", outcome);
	ecw_log_str(l, "job", m->job);
	ecw_log_str(l, "pk", m->pk);
	ecw_log_str(l, "rk", m->rk);
	ecw_deliver_log_keyless_fields(l, s);
	ecw_log_str(l, "id", m->id);
	ecw_log_str(l, "message_id", s->msg.id);
	if (d->span.has_parent) {
		char parent[17];
		ecw_trace_hex(parent, d->span.parent_id, sizeof(d->span.parent_id));
		ecw_log_str(l, "parent_span_id", parent);
	}
	ecw_log_int(l, "dequeue_count", s->msg.dequeue_count);
	ecw_log_int(l, "duration_ms", ecw_clock_now_ms() - d->t0);
	/* How long it was held before its run began (received, waiting for a
	 * job thread or for a run of its keys to end). */
	ecw_log_int(l, "waited_ms", d->t0 - s->received_ms);
	if (d->group > 1)
		ecw_log_int(l, "group", (int64_t)d->group);
	if (d->duplicates > 0)
		ecw_log_int(l, "duplicates", (int64_t)d->duplicates);
	ecw_log_str(l, "ran_with", d->ran_with);
	ecw_log_str(l, "reason", ecw_outcome_reason_name(d->reason));
	if (d->ctx.outcome_detail[0])
		ecw_log_str(l, "detail", d->ctx.outcome_detail);
	if (d->o.action == ECW_ACTION_RETRY || d->o.action == ECW_ACTION_REQUEUE)
		ecw_log_int(l, "hidden_s", d->o.hide_s);
	if (d->error[0])
		ecw_log_str(l, "error", d->error);
	ecw_log_end(l);
}

/* Carries the rules' answer out (the final call on the message, the
 * poisoning), then counts and logs it. */
static void conclude(struct runtime *rt, struct ecw_client *c, struct delivery *d)
{
	if (d->settled)
		; /* settled with its group's (settle_group) */
	else if (d->o.action == ECW_ACTION_POISON)
		poison(rt, c, d);
	else if (d->o.action == ECW_ACTION_REQUEUE)
		requeue(rt, c, d);
	else
		settle(c, d);
	if (strcmp(d->o.word, "released") == 0) {
		ecw_log_set_trace(NULL, NULL);
		return; /* shutdown released it and logged it already */
	}
	ecw_metrics_message(d->s->def ? d->s->def->name : "", d->o.word,
			    (double)(ecw_clock_now_ms() - d->t0) / 1000.0);
	log_message(d);
	close_span(rt, d);
}

/* The duplicates that rode with run's message (job_thread says why that is
 * safe), concluded after it with its result err: deleted only when it
 * succeeded (and after its follow-ups are put), else each by the rules with
 * its own facts (its dequeue count, its lease) and the run's error. */
static void conclude_riders(struct runtime *rt, struct ecw_client *c, const struct delivery *run, int err,
			    bool outage)
{
	for (struct slot *r = run->s->riders; r; r = r->next_rider) {
		struct delivery d = {.s = r, .ctx = run->ctx, .t0 = run->t0, .group = run->group};
		d.ran_with = run->s->msg.id;
		open_span(&d, run->start_ns);
		memcpy(d.error, run->error, sizeof(d.error));
		d.http_status = run->http_status;
		memcpy(d.error_code, run->error_code, sizeof(d.error_code));
		decide(rt, &d, ECW_STAGE_RAN, true, err, outage);
		conclude(rt, c, &d);
	}
	ecw_metrics_deduplicated(run->s->def->name, (int64_t)run->duplicates);
}

/* After the job returned err: its follow-ups when it succeeded (once for the
 * run, its riders' too), then the circuit hears of it (an outage's failure
 * is then the service's), then the rules. */
static void judge(struct runtime *rt, struct ecw_client *c, struct delivery *d, int err)
{
	if (err == 0 && d->s->def->then && (err = enqueue_then(rt, c, d)) < 0)
		note_failure(d, err);
	d->run_err = err;
	if (err == 0 || err == ECW_ELATER)
		ecw_job_block_clear(d->s->def->name);
	else if (err == ECW_ENOTABLE)
		ecw_job_block_note(d->s->def->name, d->error_table, NULL, ecw_clock_now_ms());
	else if (err == ECW_ENOCONTAINER)
		ecw_job_block_note(d->s->def->name, d->error_table,
				   "the blob container does not exist: create it (ecworker never does: it is "
				   "the application's), or correct the job's container name; the job's "
				   "messages are held (retried, never poisoned) and complete once it exists",
				   ecw_clock_now_ms());
	d->outage = ecw_circuit_note(rt->circuit, err);
	decide(rt, d, ECW_STAGE_RAN, true, err, d->outage);
	for (const struct slot *r = d->s->riders; r; r = r->next_rider)
		d->duplicates++;
}

/* After judge: the rest, then its riders. */
static void conclude_run(struct runtime *rt, struct ecw_client *c, struct delivery *d)
{
	conclude(rt, c, d);
	if (d->duplicates > 0)
		conclude_riders(rt, c, d, d->run_err, d->outage);
}

static void finish(struct runtime *rt, struct ecw_client *c, struct delivery *d, int err)
{
	judge(rt, c, d, err);
	conclude_run(rt, c, d);
}

/* Whether the message can run at all, with the reason in d->error when it
 * cannot: it decoded, names a configured job, and names an entity when the
 * job's type needs one. */
static bool runnable(struct delivery *d)
{
	const struct slot *s = d->s;

	if (!s->decoded) {
		snprintf(d->error, sizeof(d->error), "%s", s->decode_error);
		return false;
	}
	if (!s->def) {
		snprintf(d->error, sizeof(d->error), "unknown job '%.100s'", s->m.job);
		return false;
	}
	if (!s->def->type->keyless && ecw_message_require_keys(&s->m) < 0) {
		note_failure(d, ECW_EINVALID);
		return false;
	}
	return true;
}

void ecw_deliver_one(struct runtime *rt, struct ecw_client *c, struct slot *s)
{
	struct delivery d = {.s = s, .ctx = {.client = c}, .t0 = ecw_clock_now_ms(), .group = 1};
	int err;

	open_span(&d, unix_ns());
	decide(rt, &d, ECW_STAGE_RECEIVED, runnable(&d), 0, ecw_circuit_is_open(rt->circuit));
	if (d.o.action != ECW_ACTION_RUN) {
		if (d.reason == ECW_REASON_MAX_DEQUEUE)
			snprintf(
				d.error, sizeof(d.error),
				"delivered %ld times (max_dequeue_count %d): the worker holding it stopped each time",
				s->msg.dequeue_count, rt->cfg->worker.max_dequeue_count);
		conclude(rt, c, &d);
		/* Nothing ran for its duplicates to ride with: each goes alone. */
		for (struct slot *r = s->riders; r; r = r->next_rider)
			ecw_deliver_one(rt, c, r);
		return;
	}
	d.ctx = job_ctx(rt, c, s);
	ecw_error_clear();
	if ((err = s->def->type->run(s->def->settings, &d.ctx)) < 0)
		note_failure(&d, err);
	finish(rt, c, &d, err);
}

/* The members of a group whose final call is a delete, made together:
 * ecw_queue_delete_many pipelines them on one connection, a round trip for
 * the group instead of one a member. Each is due under its slot lock, as
 * settle's one is (settle_due); the locks are taken in the group's order
 * and each let go as its answer is in (settle_done). No other code holds
 * two slot locks, so holding several cannot deadlock; the renewer never
 * waits on them (it passes a busy slot by until its next pass,
 * runtime_renew.c), so answers that go missing, the exchange's
 * request_timeout and then each delete alone, hold up no other message's
 * renewal. The other members (poisoned, retried, requeued) settle alone in
 * conclude.
 *
 * Crash safety: each delete comes after its member's run succeeded, as a
 * lone one does, and a delete is the message's last step. A crash among
 * them (deliver.group.delete_answered, after each answer) leaves some
 * messages deleted and the rest to come back when their leases run out;
 * those run again and find their work done, as after a crash before a lone
 * delete. Nothing a job wrote depends on which deletes went through. */
struct group_settling {
	struct delivery *ds;
	struct ecw_queue_delete_item items[GROUP_CAP];
	size_t member[GROUP_CAP];
};

static void member_deleted(void *payload, size_t i)
{
	struct group_settling *g = payload;
	struct delivery *d = &g->ds[g->member[i]];

	ecw_log_set_trace(d->span.trace_hex, d->span.span_hex);
	settle_done(d, g->items[i].err);
	ecw_crash_point("deliver.group.delete_answered");
}

static atomic_bool pipelining_stop_told; /* the warning is logged once */

static void settle_group(struct ecw_client *c, struct delivery *ds, size_t n)
{
	struct group_settling g = {.ds = ds};
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		struct slot *s = ds[i].s;

		if (ds[i].o.action != ECW_ACTION_DELETE)
			continue;
		if (!settle_due(&ds[i])) {
			ds[i].settled = true; /* released, or its lease is gone */
			continue;
		}
		g.items[k] = (struct ecw_queue_delete_item){s->queue->name, s->msg.id, s->msg.pop_receipt, 0};
		g.member[k++] = i;
	}
	ecw_queue_delete_many(c, g.items, k, member_deleted, &g);
	if (k > 1 && ecw_client_pipelining_stopped() && !atomic_exchange(&pipelining_stop_told, true)) {
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "pipelining_stopped");
		ecw_log_str(
			l, "detail",
			"a pipelined answer from the queue service did not come in time: from now on "
			"every message delete goes alone (storage.pipelining: false makes that the rule)");
		ecw_log_end(l);
	}
}

/* Messages of one job on entities of one partition, taken together from the
 * waiting ones (job_thread): the job type runs them at once and each is then
 * concluded as if it had run alone, except that their deletes go together
 * (settle_group). Every member passed ecw_deliver_one()'s checks on receipt
 * (place sets groupable only then). */
void ecw_deliver_group(struct runtime *rt, struct ecw_client *c, struct slot **group, size_t n)
{
	const struct ecw_job_def *def = group[0]->def;
	struct ecw_job_ctx ctxs[GROUP_CAP];
	int errs[GROUP_CAP];
	struct delivery ds[GROUP_CAP];
	int64_t t0 = ecw_clock_now_ms(), start_ns = unix_ns(), attempts0 = ecw_runtime_thread_attempts(), ran;

	/* Each member has its own span; the lines of the group's run are
	 * about all of them, so they carry none. */
	for (size_t i = 0; i < n; i++) {
		ds[i] = (struct delivery){.s = group[i]};
		open_span(&ds[i], start_ns);
		ctxs[i] = job_ctx(rt, c, group[i]);
		errs[i] = 0;
	}
	ecw_log_set_trace(NULL, NULL);
	ecw_error_clear();
	def->type->run_group(def->settings, ctxs, n, errs);
	ran = ecw_runtime_thread_attempts() - attempts0;
	/* The members' lines go out together (ecw_log_hold): one write for
	 * the group instead of one per member. */
	ecw_log_hold();
	for (size_t i = 0; i < n; i++) {
		struct delivery *d = &ds[i];
		struct ecw_span_ids span = d->span;

		*d = (struct delivery){.s = group[i], .ctx = ctxs[i], .t0 = t0, .group = n};
		/* The group's requests are each member's, with its own settling. */
		d->span = span;
		d->start_ns = start_ns;
		d->attempts0 = ecw_runtime_thread_attempts() - ran;
		ecw_log_set_trace(d->span.trace_hex, d->span.span_hex);
		if (errs[i] < 0) {
			snprintf(d->error, sizeof(d->error), "%s",
				 ctxs[i].error[0] ? ctxs[i].error : ecw_error_name(errs[i]));
			d->http_status = ctxs[i].error_status;
			memcpy(d->error_code, ctxs[i].error_code, sizeof(d->error_code));
			memcpy(d->error_table, ctxs[i].error_table, sizeof(d->error_table));
		}
		judge(rt, c, d, errs[i]);
	}
	settle_group(c, ds, n);
	for (size_t i = 0; i < n; i++) {
		ecw_log_set_trace(ds[i].span.trace_hex, ds[i].span.span_hex);
		conclude_run(rt, c, &ds[i]);
	}
	ecw_log_release();
}
