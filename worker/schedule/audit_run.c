/* SPDX-License-Identifier: MIT */
/* audit_run.c - one job's audit run to its end (see schedule.h).
 *
 * Pacing counts the client's own requests (retries and the requests of
 * repairs included) and takes a token of ecw_pace for each, before the next
 * one goes: the job's audit calls back before every request it makes
 * (ecw_audit_pace), so the rate holds whatever the job does between.
 *
 * The stop: struct ecw_audit_ctx watches a volatile sig_atomic_t, which only
 * this thread writes and reads (stop_seen). The caller's flag is an
 * atomic_bool, which a signal handler (lock-free, see the assertion below)
 * and another thread alike may set; it is copied into stop_seen before each
 * request and each entity. A pacing wait is at most 1/rate seconds, so the
 * audit stops within that much after the flag is set, plus a request in
 * flight. */
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "ecw_job.h"
#include "ecw_pace.h"
#include "ecw_storage.h"

_Static_assert(ATOMIC_BOOL_LOCK_FREE == 2,
	       "a signal handler sets the audit's stop flag: it must be lock-free");

struct run {
	const struct ecw_audit_run_opts *o;
	const struct ecw_job_def *job;
	struct ecw_client *client;
	struct ecw_pace pace;
	uint64_t paced; /* requests a token was taken for */
	volatile sig_atomic_t stop_seen;
};

static bool stop_now(struct run *r)
{
	if (!r->stop_seen && r->o->stop && atomic_load(r->o->stop))
		r->stop_seen = 1;
	return r->stop_seen != 0;
}

/* A token for every storage request made since the last call, then the
 * caller's word on the next one. */
static void on_pace(void *payload)
{
	struct run *r = payload;
	struct ecw_client_stats st;

	ecw_client_stats(&st, r->client);
	while (r->paced < st.requests && !stop_now(r)) {
		ecw_pace_take(&r->pace, &r->stop_seen);
		r->paced++;
	}
	/* What on_request sends itself (a claim renewed) is counted by the
	 * client, and paced before the next request. */
	if (!stop_now(r) && r->o->on_request && !r->o->on_request(r->o->payload))
		r->stop_seen = 1;
}

static void on_finding(const struct ecw_audit_finding *f, void *payload)
{
	struct run *r = payload;

	if (r->o->on_finding)
		r->o->on_finding(f, r->o->payload);
}

static int on_requeue(const char *pk, const char *rk, void *payload)
{
	struct run *r = payload;

	return r->o->requeue(pk, rk, r->o->payload);
}

static int on_requeue_fields(char *const *fields, void *payload)
{
	struct run *r = payload;

	return r->o->requeue_fields(fields, r->o->payload);
}

/* The jobs def's `then:` names, for (pk, rk), each followed by its own, as
 * the worker runs a message's follow-ups (the configuration has no cycles). */
static int run_chain(struct run *r, const struct ecw_job_def *def, const char *pk, const char *rk)
{
	int err = 0;

	for (char **t = def->then; t && *t && err == 0; t++) {
		const struct ecw_job_def *next = ecw_config_job(r->o->cfg, *t);
		struct ecw_job_ctx jc = {.client = r->client,
					 .job = next ? next->name : *t,
					 .pk = pk,
					 .rk = rk,
					 .trace_id = "audit",
					 .message_id = "audit"};
		if (!next)
			return ecw_error_set(ECW_EINVALID, "then: no job '%s'", *t);
		on_pace(r);
		if ((err = next->type->run(next->settings, &jc)) < 0)
			ecw_error_set(err, "then: job '%s': %s", next->name, ecw_error_last()->message);
		else
			err = run_chain(r, next, pk, rk);
	}
	return err;
}

static int on_chain(const char *pk, const char *rk, void *payload)
{
	struct run *r = payload;

	return run_chain(r, r->job, pk, rk);
}

static void on_checked(const struct ecw_audit_counts *c, void *payload)
{
	struct run *r = payload;

	(void)stop_now(r);
	if (r->o->on_checked)
		r->o->on_checked(c, r->o->payload);
}

int ecw_audit_run(struct ecw_audit_counts *out, bool *stopped, struct ecw_client *c,
		  const struct ecw_job_def *job, const struct ecw_audit_run_opts *o)
{
	struct run r = {.o = o, .job = job, .client = c};
	struct ecw_audit_ctx ctx = {.client = c,
				    .job = job->name,
				    .partition = o->partition,
				    .repair = o->repair,
				    .stop = &r.stop_seen,
				    .pace = on_pace,
				    .on_finding = on_finding,
				    .on_checked = on_checked,
				    .requeue = o->requeue ? on_requeue : NULL,
				    .requeue_fields = o->requeue_fields ? on_requeue_fields : NULL,
				    .chain = o->cfg && job->then ? on_chain : NULL,
				    .payload = &r};
	struct ecw_client_stats st;
	int err;

	ecw_pace_init(&r.pace, o->rate);
	ecw_client_stats(&st, c);
	r.paced = st.requests; /* what the client did before was paced already */
	(void)stop_now(&r);
	err = job->type->audit(job->settings, &ctx);
	*out = ctx.counts;
	if (stopped)
		*stopped = stop_now(&r);
	return err;
}
