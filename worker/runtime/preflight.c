/* SPDX-License-Identifier: MIT */
/* preflight.c - a configuration checked against storage (runtime.h). One
 * cheap request a queue and a table: a queue's metadata, and a GET of a key
 * no application writes, which tells a missing table (404 TableNotFound)
 * from a present one (404 ResourceNotFound) without reading anything. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ecw_job.h"
#include "runtime.h"

#define PROBE_KEY "ecworker-preflight"

struct check {
	const struct ecw_config *cfg;
	struct ecw_client *c;
	const struct ecw_account *acct;
	void (*report)(const struct ecw_preflight_problem *p, void *payload);
	void *payload;
	int problems;
	bool refused; /* the credentials were refused: nothing more to tell */
};

static void say(struct check *k, enum ecw_preflight_kind kind, const char *job, const char *name,
		const char *fmt, ...) ECW_PRINTF(5, 6);

static void say(struct check *k, enum ecw_preflight_kind kind, const char *job, const char *name,
		const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	k->problems++;
	k->report(&(struct ecw_preflight_problem){kind, job, name, text}, k->payload);
}

/* An answer that is no fact about the name: refused credentials become the
 * one problem there is; anything else (no answer) is returned. */
static int not_a_fact(struct check *k, int err, const char *what)
{
	if (err != ECW_EAUTH)
		return err;
	if (!k->refused)
		say(k, ECW_PREFLIGHT_CREDENTIALS, NULL, NULL,
		    "credentials: the service refused them for %s: %s", what, ecw_error_last()->message);
	k->refused = true;
	return 0;
}

/* A container: one listing page of at most one blob. */
static int container_exists(struct check *k, const char *container)
{
	struct ecw_blob_list_options lo = {.max_results = 1};
	struct ecw_blob_list *l = NULL;
	struct ecw_blob_info *it = NULL;
	int err = ecw_blob_list_new(&l, k->c, container, &lo);

	if (err == 0)
		err = ecw_blob_list_next(&it, l);
	ecw_blob_info_free(it);
	ecw_blob_list_free(l);
	if (err == 0)
		return 1;
	if (err == ECW_ENOCONTAINER)
		return 0;
	return not_a_fact(k, err, container) < 0 ? err : -1;
}

/* 1: it exists, 0: it does not, < 0: no answer (or refused: k->refused). */
static int queue_exists(struct check *k, const char *queue)
{
	long long n = 0;
	int err = ecw_queue_count(&n, k->c, queue);

	if (err == 0)
		return 1;
	if (err == ECW_ENOTFOUND)
		return 0;
	return not_a_fact(k, err, queue) < 0 ? err : -1;
}

static int table_exists(struct check *k, const char *table)
{
	struct ecw_entity *e = NULL;
	int err = ecw_table_get(&e, k->c, table, PROBE_KEY, PROBE_KEY);

	ecw_entity_free(e);
	if (err == 0 || err == ECW_ENOTFOUND)
		return 1;
	if (err == ECW_ENOTABLE)
		return 0;
	return not_a_fact(k, err, table) < 0 ? err : -1;
}

/* A queue or table the worker would create: missing is a problem when it
 * may not (create_missing off) or cannot (the SAS). */
static void would_create(struct check *k, enum ecw_preflight_kind kind, const char *job, const char *what,
			 const char *name, enum ecw_service svc)
{
	if (!k->cfg->worker.create_missing)
		say(k, kind, job, name,
		    "%s '%s' does not exist, and worker.create_missing is false: create it before the "
		    "worker starts",
		    what, name);
	else if (!ecw_account_may_create(k->acct, svc))
		say(k, kind, job, name,
		    "%s '%s' does not exist, and the SAS cannot create it (it needs ss with %s, srt with "
		    "c and sp with w or c): create it, or use a SAS that may",
		    what, name, svc == ECW_SVC_TABLE ? "t" : "q");
}

static int check_queue(struct check *k, enum ecw_preflight_kind kind, const char *queue)
{
	int r = queue_exists(k, queue);

	if (r == 0)
		would_create(k, kind, NULL, kind == ECW_PREFLIGHT_POISON_QUEUE ? "poison queue" : "queue",
			     queue, ECW_SVC_QUEUE);
	return r < 0 && !k->refused ? r : 0;
}

static int check_job(struct check *k, const struct ecw_job_def *d)
{
	const char *source = d->type->source_table ? d->type->source_table(d->settings) : NULL;
	const char *target = d->type->target_table ? d->type->target_table(d->settings) : NULL;
	int r;

	if (source && (r = table_exists(k, source)) == 0)
		say(k, ECW_PREFLIGHT_SOURCE, d->name, source,
		    "job '%s' reads table '%s', which does not exist: correct the name, or create the "
		    "table (the worker never creates a table a job only reads); its messages are held "
		    "until it exists",
		    d->name, source);
	else if (source && r < 0 && !k->refused)
		return r;
	const char *container = d->type->container ? d->type->container(d->settings) : NULL;
	if (container && !k->refused) {
		if ((r = container_exists(k, container)) == 0)
			say(k, ECW_PREFLIGHT_SOURCE, d->name, container,
			    "job '%s' works in blob container '%s', which does not exist: correct the name, or "
			    "create it (the worker never creates an application's container); its messages are "
			    "held until it exists",
			    d->name, container);
		else if (r < 0 && !k->refused)
			return r;
	}
	if (!target || (source && strcmp(source, target) == 0) || k->refused)
		return 0;
	if ((r = table_exists(k, target)) == 0) {
		char what[160];
		snprintf(what, sizeof(what), "job '%s' writes table", d->name);
		would_create(k, ECW_PREFLIGHT_TARGET, d->name, what, target, ECW_SVC_TABLE);
	}
	return r < 0 && !k->refused ? r : 0;
}

int ecw_preflight(const struct ecw_config *cfg, struct ecw_client *c, const struct ecw_account *acct,
		  void (*report)(const struct ecw_preflight_problem *p, void *payload), void *payload)
{
	struct check k = {.cfg = cfg, .c = c, .acct = acct, .report = report, .payload = payload};
	int err = 0;

	for (size_t i = 0; i < cfg->worker.nqueues && !k.refused && err == 0; i++) {
		if ((err = check_queue(&k, ECW_PREFLIGHT_QUEUE, cfg->worker.queues[i].name)) == 0)
			err = check_queue(&k, ECW_PREFLIGHT_POISON_QUEUE, cfg->worker.queues[i].poison);
	}
	for (size_t i = 0; i < cfg->njobs && !k.refused && err == 0; i++)
		err = check_job(&k, &cfg->jobs[i]);
	if (err == 0 && !k.refused && ecw_schedules_count(cfg->schedules) > 0 &&
	    (err = table_exists(&k, cfg->worker.schedule_table)) == 0)
		would_create(&k, ECW_PREFLIGHT_TARGET, NULL, "the schedules' table",
			     cfg->worker.schedule_table, ECW_SVC_TABLE);
	if (err < 0 && !k.refused)
		return err;
	return k.problems;
}
