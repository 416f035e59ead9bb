/* SPDX-License-Identifier: MIT */
/* mixed.c - the mixed-workload scenario runner (see mixed.h): the fixture, the worker processes and the
 * run; the application, the judge and the chaos are in mixed_app.c, mixed_judge.c and mixed_chaos.c
 * (mixed_private.h is what they share).
 *
 * Several worker processes (build/ecworker-test) compete on one queue that
 * carries a mix of all the jobs of config/demo.yaml (archive-employee and
 * restore-employee with then: [employee-by-email, employees-by-lastname], the
 * email index, the LastName lists in the same index table, and customers
 * fanned out to their orders with on_delete: clear) over overlapping keys,
 * while producer threads act like an application (mixed_app.c). The workers
 * start once a quarter of the messages wait (a backlog, as after a deploy),
 * and half of them pause randomly after every step of the index jobs
 * (ECW_TEST_STEP_JITTER_MS), which widens the race windows.
 *
 * Nothing of what the producers did is remembered: once the queue has been
 * empty (no message visible, hidden or in flight) and no worker has had a job
 * in flight for a few seconds, the workers are stopped (SIGTERM, exit 0) and
 * the end state is judged by a full recomputation from the SOURCE tables
 * alone (mixed_judge.c).
 *
 * A calm run also requires that nothing was poisoned. A chaos run (struct
 * mixed_chaos, mixed_chaos.c) SIGKILLs and restarts random workers, sends the
 * workers' traffic through tests/tools/faultproxy, or stops and restarts an
 * on-disk Azurite mid-run; then it stops the kills, turns the faults off, lets
 * the queue drain, lists and replays the poison queue with the operator's
 * commands, drains again, adds a per-message account, and ends as production
 * does: `ecworker audit` of every job may find only the index window that
 * jobs/index.c documents (orphan email entries), `audit --repair` removes
 * those, a second audit must find nothing; only then it judges.
 * Summary lines report messages, outcomes per job, retries, 412/409/404
 * answers, lease losses, kills, injected faults, poison and the times. Each
 * run has an Azurite of its own (proc_azurite_start): Azurite's queue GC
 * stalls the whole service for a long time after thousands of deletes, which
 * would hurt whatever test comes next on the shared one. */
#include "mixed.h"
#include "itest.h"
#include "mixed_private.h"
#include "proc.h"
#include "workerfx.h"

#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const MX_JOBS[NJOBS] = {J_ARCHIVE, J_RESTORE, J_EMAIL, J_LAST, J_ORDERS};

/* Hostile keys and values: quotes, '&', '%', '+', spaces, non-ASCII. */
static const char *const EMP_PK[2] = {"Sales & Marketing", "R&D 'Zo\xc3\xab'"};
static const char *const RK_STYLE[5] = {"o'brien", "Zo\xc3\xab", "say \"hi\"", "a+b&c=d%",
                                        "plain two  spaces"};

/* ---- fixture ------------------------------------------------------------------------ */

static const struct ecw_client_options APP_OPTIONS = {8,    50,   1000, 30000, 5000, false,
                                                      NULL, NULL, NULL, NULL,  false};

void mx_idset_add(struct idset *s, const char *id)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		assert_non_null(s->v);
	}
	snprintf(s->v[s->n++], sizeof(s->v[0]), "%s", id);
	s->sorted = false;
}

static int id_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

bool mx_idset_has(struct idset *s, const char *id)
{
	if (!s->sorted && s->n)
		qsort(s->v, s->n, sizeof(s->v[0]), id_cmp);
	s->sorted = true;
	return s->n && bsearch(id, s->v, s->n, sizeof(s->v[0]), id_cmp) != NULL;
}

static void idset_dispose(struct idset *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

int mixed_setup(void **state)
{
	struct mx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	pthread_mutex_init(&x->mu, NULL);
	*state = x;
	return 0;
}

int mixed_teardown(void **state)
{
	struct mx *x = *state;

	if (!x)
		return 0;
	proc_cleanup(); /* workers a failed assertion left running (and our Azurite, and the proxy) */
	if (x->private_az) {
		proc_azurite_stop(&x->az);
	} else if (x->c) {
		(void)!ecw_queue_delete_queue(x->c, x->queue);
		(void)!ecw_queue_delete_queue(x->c, x->poison);
		const char *tables[] = {x->emp, x->arch, x->idx, x->cust, x->orders};
		for (int i = 0; i < 5; i++)
			(void)!ecw_table_delete_table(x->c, tables[i]);
	}
	if (x->az_dir[0])
		proc_dir_remove(x->az_dir);
	if (x->proxy_stats[0])
		unlink(x->proxy_stats);
	if (x->proxy_ready[0])
		unlink(x->proxy_ready);
	ecw_client_free(x->c);
	ecw_account_free(x->acct);
	for (size_t i = 0; i < x->nhist; i++)
		free(x->hist[i]);
	free(x->hist);
	idset_dispose(&x->put_ids);
	pthread_mutex_destroy(&x->mu);
	free(x);
	*state = NULL;
	return 0;
}

/* Storage of the test's own (or, without an azurite script, the shared one),
 * names, queues and tables. */
static void mx_open(struct mx *x, const struct mixed_scenario *sc)
{
	bool own;

	x->sc = sc;
	assert_true(sc->employees <= MAX_EMP && sc->customers <= MAX_CUST && sc->workers <= MAX_WORKERS &&
	            sc->producers <= MAX_PRODUCERS);
	if (sc->chaos.azurite_restart) {
		char file[96];
		snprintf(file, sizeof(file), "%s.azurite-data", sc->name);
		proc_make_dir(x->az_dir, sizeof(x->az_dir), file);
		struct proc_azurite_disk d = {x->az_dir, 0, 0};
		own = proc_azurite_start_on_disk(&x->az, sc->name, &d);
	} else {
		own = proc_azurite_start(&x->az, sc->name);
	}
	if (own) {
		x->private_az = true;
		x->connstr = x->az.connstr;
	} else {
		ITEST_CHECK(!sc->chaos.on,
		            "%s needs an Azurite of its own (tests/node_modules/.bin/azurite or "
		            "ECW_TEST_AZURITE_BIN): chaos on the shared one would hurt every other test",
		            sc->name);
		x->connstr = itest_connstr();
	}
	snprintf(x->env_conn, sizeof(x->env_conn), "ECW_TEST_CONNECTION_STRING=%s", x->connstr);
	snprintf(x->env_direct, sizeof(x->env_direct), "ECW_TEST_CONNECTION_STRING=%s", x->connstr);
	itest_client_for(&x->acct, &x->c, x->connstr, &APP_OPTIONS);
	itest_unique_name(x->queue, sizeof(x->queue), 'q', "mixed");
	itest_unique_name(x->poison, sizeof(x->poison), 'q', "mixedpoison");
	itest_unique_name(x->emp, sizeof(x->emp), 't', "Employees");
	itest_unique_name(x->arch, sizeof(x->arch), 't', "EmpArchive");
	itest_unique_name(x->idx, sizeof(x->idx), 't', "EmpIndex");
	itest_unique_name(x->cust, sizeof(x->cust), 't', "Customers");
	itest_unique_name(x->orders, sizeof(x->orders), 't', "Orders");
	ECW_ASSERT_OK(ecw_queue_create(NULL, x->c, x->queue));
	ECW_ASSERT_OK(ecw_queue_create(NULL, x->c, x->poison));
	const char *tables[] = {x->emp, x->arch, x->idx, x->cust, x->orders};
	for (int i = 0; i < 5; i++)
		ECW_ASSERT_OK(ecw_table_create(NULL, x->c, tables[i]));
	for (int i = 0; i < sc->employees; i++) {
		snprintf(x->epk[i], sizeof(x->epk[i]), "%s", EMP_PK[i % 2]);
		snprintf(x->erk[i], sizeof(x->erk[i]), "%s %03d", RK_STYLE[i % 5], i);
	}
}

/* ---- the workers ------------------------------------------------------------------------ */

/* Worker n (from 1); the upper half gets ECW_TEST_STEP_JITTER_MS: a random
 * pause of up to JITTER_MS after every step of the index and index-list jobs,
 * as a slower network would, which widens every race window. */
#define JITTER_MS 10

static void spawn_worker(struct mx *x, struct worker *w, bool restart)
{
	const char *args[] = {"run", "-c", w->cfg, NULL};
	const char *env[] = {x->env_conn, w->env_jitter, w->env_port, NULL};

	/* A fresh port each time: the last run's may linger in TIME_WAIT. */
	w->port = proc_free_port();
	snprintf(w->env_port, sizeof(w->env_port), "ECW_TEST_METRICS_PORT=%d", w->port);
	if (restart)
		proc_restart(&w->p, args, env);
	else {
		char name[64];
		snprintf(name, sizeof(name), "%s-w%d", x->sc->name, w->n);
		proc_start(&w->p, name, args, env);
	}
}

/* config/demo.yaml's jobs on this test's queue and tables. */
static void start_worker(struct mx *x, struct worker *w, int n)
{
	char jobs[8192], name[96], timeout[64] = "";
	const struct mixed_scenario *sc = x->sc;
	const struct mixed_chaos *ch = &sc->chaos;
	struct wfx_worker wc = WFX_WORKER(x->queue, x->poison);
	int k;

	w->n = n;
	if (ch->request_timeout_ms)
		snprintf(timeout, sizeof(timeout), "  request_timeout: %dms\n", ch->request_timeout_ms);
	k = snprintf(jobs, sizeof(jobs),
	             "  " J_ARCHIVE ":\n"
	             "    type: move\n"
	             "    from: %s\n"
	             "    to: %s\n"
	             "    then: [" J_EMAIL ", " J_LAST "]\n"
	             "  " J_RESTORE ":\n"
	             "    type: move\n"
	             "    from: %s\n"
	             "    to: %s\n"
	             "    then: [" J_EMAIL ", " J_LAST "]\n"
	             "  " J_EMAIL ":\n"
	             "    type: index\n"
	             "    source: %s\n"
	             "    table: %s\n"
	             "    partition_key: \"" EMAIL_PK "\"\n"
	             "    row_key: \"{Email}\"\n"
	             "    properties: [FirstName, LastName]\n"
	             "  " J_LAST ":\n"
	             "    type: index-list\n"
	             "    source: %s\n"
	             "    table: %s\n"
	             "    partition_key: \"" LIST_PK "\"\n"
	             "    row_key: \"{LastName}\"\n"
	             "  " J_ORDERS ":\n"
	             "    type: fanout\n"
	             "    source: %s\n"
	             "    table: %s\n"
	             "    filter: \"PartitionKey eq '{RowKey}'\"\n"
	             "    fields: {CustomerName: Name, CustomerEmail: Email}\n"
	             "    on_delete: clear\n",
	             x->emp, x->arch, x->arch, x->emp, x->emp, x->idx, x->emp, x->idx, x->cust, x->orders);
	assert_true(k > 0 && (size_t)k < sizeof(jobs));
	wc.storage_extra = timeout;
	wc.batch_size = ch->batch_size ? ch->batch_size : 16;
	wc.concurrency = sc->concurrency;
	wc.visibility_s = ch->visibility_timeout_s ? ch->visibility_timeout_s : 10;
	wc.max_dequeue = ch->max_dequeue_count ? ch->max_dequeue_count : 10;
	wc.retry_max = "4s";
	wc.poll_min = "20ms";
	wc.log_level = "info";
	/* The port comes from the environment: a restarted worker gets a fresh one. */
	wc.metrics_listen = "127.0.0.1:${ECW_TEST_METRICS_PORT}";
	wc.jobs = jobs;
	k = snprintf(name, sizeof(name), "%s-w%d", sc->name, n);
	assert_true(k > 0 && (size_t)k < sizeof(name));
	wfx_write_config(w->cfg, sizeof(w->cfg), name, &wc);
	snprintf(w->env_jitter, sizeof(w->env_jitter), "ECW_TEST_STEP_JITTER_MS=%d",
	         n > sc->workers / 2 ? JITTER_MS : 0);
	spawn_worker(x, w, false);
}

/* ---- helpers of the other files ------------------------------------------------------- */

long long mx_queue_count(struct mx *x, const char *q)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, x->c, q));
	return n;
}

/* Prints what the poison queue holds (for a failure message). */
void mx_show_poison(struct mx *x)
{
	struct ecw_queue_msg *msgs = NULL;
	size_t n = 0;

	if (ecw_queue_peek(&msgs, &n, x->c, x->poison, 32) == 0) {
		for (size_t i = 0; i < n; i++)
			print_error("poison: %.600s\n", msgs[i].text);
		ecw_queue_msgs_free(msgs, n);
	}
}

const char *mx_strp(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *pr = e ? ecw_entity_get(e, name) : NULL;
	return pr && pr->type == ECW_EDM_STRING ? pr->v.s : NULL;
}

/* ---- the run ---------------------------------------------------------------------------------- */

/* Every worker must run: one that ended by itself (not killed by the chaos)
 * fails the test. Storage out of reach at start-up is waited out by the
 * worker itself (start_retry), so that is no excuse either. */
static void check_workers(struct mx *x, struct worker *w)
{
	for (int k = 0; k < x->sc->workers; k++) {
		if (proc_alive(&w[k].p))
			continue;
		fail_msg("worker %s exited by itself (%d); log %s:\n%s", w[k].p.name, proc_exit_code(&w[k].p),
		         w[k].p.log_path, proc_tail(w[k].p.log_path, 30));
	}
}

/* Waits until the queue has been empty (approximate count 0: nothing
 * visible, hidden or in flight) and no worker has a job in flight for
 * settle_ms in a row. Returns the ms waited. */
static int64_t wait_quiet(struct mx *x, struct worker *w, int n, int timeout_s)
{
	int64_t t0 = itest_now_ms(), end = t0 + (int64_t)timeout_s * 1000, quiet_since = -1;
	long long last_count = -1;

	for (;;) {
		long long count = mx_queue_count(x, x->queue);
		long long inflight = 0;
		bool answered = true;
		check_workers(x, w);
		for (int k = 0; k < n; k++) {
			char *page = NULL;
			if (proc_http_get(&page, w[k].port, "/metrics") == 200)
				inflight += (long long)proc_metric(page, "ecw_jobs_in_flight", NULL, NULL);
			else
				answered = false;
			free(page);
		}
		int64_t now = itest_now_ms();
		if (count == 0 && inflight == 0 && answered) {
			if (quiet_since < 0)
				quiet_since = now;
			if (now - quiet_since >= x->sc->settle_ms)
				return now - t0;
		} else {
			quiet_since = -1;
		}
		last_count = count;
		if (now > end)
			fail_msg(
			    "%s: the queue still holds %lld message(s) (%lld in flight) %d s after the "
			    "producers (and the chaos) finished (poison queue: %lld); worker 1's log %s:\n%s",
			    x->sc->name, last_count, inflight, timeout_s, mx_queue_count(x, x->poison),
			    w[0].p.log_path, proc_tail(w[0].p.log_path, 30));
		itest_sleep_ms(250);
	}
}

static const char *const OC_NAMES[NOC] = {"succeeded", "retried", "poisoned", "lease-lost", "other"};

static void tally_log(struct tally *t, const char *path)
{
	struct proc_log log;

	proc_log_read(&log, path);
	for (size_t i = 0; i < log.n; i++) {
		struct json_object *l = log.lines[i];
		const char *ev = proc_field(l, "event");
		const char *level = proc_field(l, "level");
		if (strcmp(level, "warn") == 0 || strcmp(level, "error") == 0)
			t->warn_lines++;
		if (strcmp(ev, "message") != 0) {
			if (strstr(ev, "storage"))
				t->storage_errors++;
			continue;
		}
		const char *job = proc_field(l, "job"), *oc = proc_field(l, "outcome");
		int j = 0, o = 0;
		while (j < NJOBS && strcmp(MX_JOBS[j], job) != 0)
			j++;
		while (o < OC_OTHER && strcmp(OC_NAMES[o], oc) != 0)
			o++;
		t->by[j][o]++;
		if (o == OC_SUCCEEDED)
			mx_idset_add(&t->ok_ids, proc_field(l, "message_id"));
		else if (o == OC_LEASE_LOST)
			mx_idset_add(&t->lost_ids, proc_field(l, "message_id"));
		const char *d = proc_field(l, "detail"), *q;
		if ((q = strstr(d, "rounds=")) != NULL)
			t->rounds += strtoll(q + 7, NULL, 10) - 1;
		if ((q = strstr(d, "conflicts=")) != NULL)
			t->conflicts += strtoll(q + 10, NULL, 10);
		if (o == OC_POISONED && !t->first_poison[0])
			snprintf(t->first_poison, sizeof(t->first_poison), "%s",
			         json_object_to_json_string_ext(l, JSON_C_TO_STRING_PLAIN));
		if (o == OC_OTHER && !t->first_other[0])
			snprintf(t->first_other, sizeof(t->first_other), "%s",
			         json_object_to_json_string_ext(l, JSON_C_TO_STRING_PLAIN));
	}
	proc_log_dispose(&log);
}

static void tally_metrics(struct tally *t, int port)
{
	char *page = NULL;

	if (proc_http_get(&page, port, "/metrics") == 200) {
		t->m412 +=
		    (long long)proc_metric(page, "ecw_storage_requests_total", NULL, "status=\"412\"", NULL);
		t->m409 +=
		    (long long)proc_metric(page, "ecw_storage_requests_total", NULL, "status=\"409\"", NULL);
		t->m404 +=
		    (long long)proc_metric(page, "ecw_storage_requests_total", NULL, "status=\"404\"", NULL);
		t->requests += (long long)proc_metric(page, "ecw_storage_requests_total", NULL, NULL);
		t->retries += (long long)proc_metric(page, "ecw_storage_retries_total", NULL, NULL);
	}
	free(page);
}

/* Runs until the producers are done and the chaos is over: every
 * kill_every_ms a random worker is SIGKILLed (its metrics read first: its
 * counters die with it) and started again; Azurite restarts once, at
 * restart_at_ms. A calm run only waits for the producers. check_workers
 * fails the test when a worker ended by itself. */
static void drive(struct mx *x, struct worker *w, struct producer *prods, struct tally *t,
                  struct chaos_state *cs, int64_t t_workers, unsigned seed)
{
	const struct mixed_scenario *sc = x->sc;
	const struct mixed_chaos *ch = &sc->chaos;
	unsigned r = seed ^ 0x9e3779b9u;
	int64_t next_kill = t_workers + ch->kill_every_ms;

	for (;;) {
		bool done = true;
		for (int k = 0; k < sc->producers; k++)
			done &= atomic_load(&prods[k].done);
		int64_t now = itest_now_ms();
		if (done && !cs->t_produced)
			cs->t_produced = now;
		bool killing =
		    ch->kill_every_ms > 0 && (!done || now - t_workers < (int64_t)ch->kill_for_s * 1000);
		if (done && !killing && (!ch->azurite_restart || cs->restarted))
			return;
		check_workers(x, w);
		if (ch->azurite_restart && !cs->restarted && now - t_workers >= ch->restart_at_ms)
			mx_restart_azurite(x, w, prods, cs);
		if (killing && now >= next_kill) {
			struct worker *v = &w[rand_r(&r) % (unsigned)sc->workers];
			tally_metrics(t, v->port);
			proc_signal(&v->p, SIGKILL);
			ITEST_CHECK(proc_wait(&v->p, 10000), "worker %s survived SIGKILL for 10 s",
			            v->p.name);
			spawn_worker(x, v, true);
			cs->kills++;
			next_kill = now + ch->kill_every_ms;
		}
		itest_sleep_ms(10);
	}
}

/* The calm run's verdict on the outcomes: nothing poisoned, nothing left,
 * every message put (and every follow-up) ended in a success. */
static void judge_calm(struct mx *x, struct tally *t, long long succeeded, long long poisoned,
                       long long other, int puts)
{
	const struct mixed_scenario *sc = x->sc;
	long long left = mx_queue_count(x, x->queue), in_poison = mx_queue_count(x, x->poison);

	if (in_poison)
		mx_show_poison(x);
	ITEST_CHECK(in_poison == 0 && poisoned == 0,
	            "%lld message(s) on the poison queue, %lld poisoned outcome(s); first: %s", in_poison,
	            poisoned, t->first_poison);
	ITEST_CHECK(left == 0, "%lld message(s) left on the queue after the workers stopped", left);
	ITEST_CHECK(other == 0, "%lld outcome(s) other than succeeded/retried/lease-lost, first: %s", other,
	            t->first_other);
	ITEST_CHECK(succeeded >= puts, "%lld successes for %d messages put", succeeded, puts);
	ITEST_CHECK(atomic_load(&x->moves) >= sc->min_moves, "only %d LastName moves, the scenario needs %d",
	            atomic_load(&x->moves), sc->min_moves);
}

void mixed_run(void **state, const struct mixed_scenario *sc)
{
	struct mx *x = *state;
	struct worker w[MAX_WORKERS];
	struct producer prods[MAX_PRODUCERS];
	struct tally t;
	struct state s;
	struct chaos_state cs;
	struct poison_seen ps;
	struct account acc;
	const struct mixed_chaos *ch = &sc->chaos;
	long long replayed = 0;
	unsigned seed = getenv("ECW_TEST_SEED") ? (unsigned)strtoul(getenv("ECW_TEST_SEED"), NULL, 10)
	                                        : (unsigned)(getpid() ^ (unsigned)itest_now_ms());

	memset(&t, 0, sizeof(t));
	memset(&s, 0, sizeof(s));
	memset(&cs, 0, sizeof(cs));
	memset(&ps, 0, sizeof(ps));
	memset(&acc, 0, sizeof(acc));
	memset(prods, 0, sizeof(prods));
	memset(w, 0, sizeof(w));
	mx_open(x, sc);
	x->seed = seed;
	print_message("%s: seed %u (ECW_TEST_SEED replays the plan), %s Azurite\n", sc->name, seed,
	              x->private_az ? (x->az_dir[0] ? "a private on-disk" : "a private") : "the shared");
	mx_seed_data(x);
	mx_make_plan(x, prods, seed);
	if (mx_has_faults(ch))
		mx_start_proxy(x, seed);

	int64_t t0 = itest_now_ms();
	for (int k = 0; k < sc->producers; k++) {
		struct producer *p = &prods[k];
		p->x = x;
		p->id = k + 1;
		p->seed = seed * 7919u + (unsigned)k;
		ECW_ASSERT_OK(ecw_client_new(&p->c, x->acct, &APP_OPTIONS)); /* one per thread */
	}
	for (int k = 0; k < sc->producers; k++)
		assert_int_equal(pthread_create(&prods[k].tid, NULL, mx_producer_main, &prods[k]), 0);
	/* The workers come up once a quarter of the messages wait (as after a
	 * deploy): a backlog in which many messages for the same keys are
	 * received together by different workers. */
	for (bool all_done = false; atomic_load(&x->puts) < sc->total / 4 && !all_done;) {
		all_done = true;
		for (int k = 0; k < sc->producers; k++)
			all_done &= atomic_load(&prods[k].done);
		itest_sleep_ms(20);
	}
	int64_t t_workers = itest_now_ms();
	for (int k = 0; k < sc->workers; k++)
		start_worker(x, &w[k], k + 1);
	drive(x, w, prods, &t, &cs, t_workers, seed);
	for (int k = 0; k < sc->producers; k++)
		pthread_join(prods[k].tid, NULL);
	int64_t t_produced = cs.t_produced ? cs.t_produced : itest_now_ms();
	for (int k = 0; k < sc->producers; k++)
		ITEST_CHECK(!prods[k].failed, "%s", prods[k].error);
	int puts = atomic_load(&x->puts);
	ITEST_CHECK(puts == sc->total, "the producers put %d messages, planned %d", puts, sc->total);

	/* The chaos is over: no more kills; the proxy stops injecting faults. */
	int64_t t_calm = itest_now_ms();
	if (x->proxy_on)
		proc_signal(&x->proxy, SIGUSR2);
	(void)wait_quiet(x, w, sc->workers, sc->drain_s);
	int64_t t_drained = itest_now_ms() - sc->settle_ms;
	int64_t t_replay = 0, t_replay_drained = 0;
	if (ch->on) {
		/* What the chaos poisoned (kills raise dequeue counts): listed and
		 * replayed with the operator's commands, then drained again. */
		mx_list_poison(x, &w[0], &ps);
		t_replay = itest_now_ms();
		if (ps.n) {
			replayed = mx_replay_poison(x, &w[0]);
			(void)wait_quiet(x, w, sc->workers, sc->drain_s);
		}
		t_replay_drained = itest_now_ms() - (ps.n ? sc->settle_ms : 0);
	}

	/* Counters before the workers go (the metrics go with them). */
	for (int k = 0; k < sc->workers; k++)
		tally_metrics(&t, w[k].port);
	for (int k = 0; k < sc->workers; k++)
		proc_stop(&w[k].p, 20000);
	for (int k = 0; k < sc->workers; k++)
		tally_log(&t, w[k].p.log_path);
	if (x->proxy_on)
		mx_stop_proxy(x, &cs.ps);

	long long total = 0, succeeded = 0, poisoned = 0, lease_lost = 0, retried = 0, other = 0;
	char per_job[1024] = "";
	size_t pl = 0;
	for (int j = 0; j <= NJOBS; j++) {
		long long row = 0;
		for (int o = 0; o < NOC; o++)
			row += t.by[j][o];
		total += row;
		succeeded += t.by[j][OC_SUCCEEDED];
		retried += t.by[j][OC_RETRIED];
		poisoned += t.by[j][OC_POISONED];
		lease_lost += t.by[j][OC_LEASE_LOST];
		other += t.by[j][OC_OTHER];
		if (row && pl < sizeof(per_job))
			pl += (size_t)snprintf(
			    per_job + pl, sizeof(per_job) - pl,
			    "\n    %-22s %5lld ok %4lld retried %3lld lease-lost %3lld poisoned %3lld other",
			    j < NJOBS ? MX_JOBS[j] : "(undecodable/unknown)", t.by[j][OC_SUCCEEDED],
			    t.by[j][OC_RETRIED], t.by[j][OC_LEASE_LOST], t.by[j][OC_POISONED],
			    t.by[j][OC_OTHER]);
	}
	double secs = (double)(t_drained - t_workers) / 1000.0;
	print_message("%s: %d messages put by %d producers in %.1f s; %d workers x %d (started after %d "
	              "puts) drained the queue %.1f s after their start (%.1f s after the last put): %lld "
	              "outcomes logged (%+lld: follow-ups, retries, re-runs), %.0f outcomes/s, %lld storage "
	              "requests (%.0f/s)\n",
	              sc->name, puts, sc->producers, (double)(t_produced - t0) / 1000.0, sc->workers,
	              sc->concurrency, sc->total / 4, secs, (double)(t_drained - t_produced) / 1000.0, total,
	              total - puts, secs > 0 ? (double)total / secs : 0.0, t.requests,
	              secs > 0 ? (double)t.requests / secs : 0.0);
	print_message("  per job:%s\n", per_job);
	print_message(
	    "  outcomes: %lld succeeded, %lld retried, %lld lease-lost, %lld poisoned, %lld other\n",
	    succeeded, retried, lease_lost, poisoned, other);
	print_message("  storage: %lld retries in the client, %lld x 412, %lld x 409, %lld x 404; lost races "
	              "in job details: %lld, extra rounds: %lld; %lld warn/error log lines\n",
	              t.retries, t.m412, t.m409, t.m404, t.conflicts, t.rounds, t.warn_lines);
	print_message("  application: %d e-mail handovers, %d LastName moves, %d e-mail changes, %d customer "
	              "changes (%d dropped "
	              "Email), %d deleted, %d re-created, %d archives, %d restores, %d stale re-sends, %d "
	              "duplicates, %d delayed, %d base64; %d x 412 and %d x 404 on its own writes, %d "
	              "changes skipped\n",
	              atomic_load(&x->handovers), atomic_load(&x->moves), atomic_load(&x->email_changes),
	              atomic_load(&x->cust_changes), atomic_load(&x->cust_drops),
	              atomic_load(&x->cust_deletes), atomic_load(&x->cust_recreates),
	              atomic_load(&x->archives), atomic_load(&x->restores), atomic_load(&x->stale),
	              atomic_load(&x->dups), atomic_load(&x->delayed), atomic_load(&x->b64),
	              atomic_load(&x->app_412), atomic_load(&x->app_404), atomic_load(&x->app_skipped));

	if (ch->on) {
		mx_account_messages(x, &t, &ps, &acc);
		if (ch->kill_every_ms)
			print_message(
			    "  chaos: %d kills (every %d ms for %.1f s, each worker restarted at once)\n",
			    cs.kills, ch->kill_every_ms, (double)(t_calm - t_workers) / 1000.0);
		if (x->proxy_on)
			print_message(
			    "  faults injected by the proxy: %lld x 503, %lld resets before and %lld after "
			    "forwarding, %lld stalls (request timeout %d ms), in %lld requests on %lld "
			    "connections; the proxy used %.2f s of CPU\n",
			    cs.ps.f503, cs.ps.reset_before, cs.ps.reset_after, cs.ps.stall,
			    ch->request_timeout_ms, cs.ps.requests, cs.ps.connections, cs.ps.cpu_s);
		if (ch->azurite_restart)
			print_message(
			    "  Azurite restart: stopped (SIGTERM, %ld ms to exit) with %lld message(s) "
			    "queued, listening again %.1f s later on the same ports; meanwhile the "
			    "workers retried %lld request(s) in the client and logged %lld storage "
			    "error(s)\n",
			    cs.stop_ms, cs.count_at_stop, (double)cs.outage_ms / 1000.0,
			    t.retries - cs.retries_before, t.storage_errors);
		print_message("  client retries: %lld%s; storage errors logged: %lld\n", t.retries,
		              ch->kill_every_ms ? " (metrics read before each kill and at the end)" : "",
		              t.storage_errors);
		print_message("  poison: %lld envelope(s) (%lld max-dequeue, %lld permanent), %lld replayed; "
		              "drained %.1f s after the chaos stopped, %.1f s more after the replay\n",
		              ps.n, ps.max_dequeue, ps.permanent, replayed,
		              (double)(t_drained - t_calm) / 1000.0,
		              (double)(t_replay_drained - t_replay) / 1000.0);
		print_message(
		    "  every message put: %lld succeeded, %lld poisoned (replayed), %lld lease-lost "
		    "(answer lost), %lld unlogged (deleted as their worker was killed)%s%s\n",
		    acc.succeeded, acc.poisoned, acc.lease_lost, acc.unlogged, acc.unlogged ? ", e.g. " : "",
		    acc.first_unlogged);
		mx_judge_chaos(x, &t, &cs, &ps, &acc, replayed);
		/* As production ends it: an audit, whose only allowed findings
		 * (the index's known window) are repaired before the judge. */
		(void)mx_audit_end(x, &w[0]);
	} else {
		judge_calm(x, &t, succeeded, poisoned, other, puts);
	}

	/* The end state is the recomputation from the sources. */
	mx_check_end_state(x, &s);
	print_message("%s: end state = recomputation: %zu employees, %zu archived, %zu index entities, %zu "
	              "customers (%d deleted), %zu orders\n",
	              sc->name, s.nemp, s.narch, s.nidx, s.ncust, sc->customers - (int)s.ncust, s.norders);
	mx_state_free(&s);

	for (int k = 0; k < sc->producers; k++) {
		ecw_client_free(prods[k].c);
		free(prods[k].ops);
		free(prods[k].last);
	}
	idset_dispose(&t.ok_ids);
	idset_dispose(&t.lost_ids);
	idset_dispose(&ps.ids);
	print_message("%s: %.1f s in all\n", sc->name, (double)(itest_now_ms() - t0) / 1000.0);
	proc_assert_logs_clean();
}
