/* mixed.c - the mixed-workload scenario runner (see mixed.h).
 *
 * Several worker processes (build/ecworker-test) compete on one queue that
 * carries a mix of all the jobs of config/demo.yaml (archive-employee and
 * restore-employee with then: [employee-by-email, employees-by-lastname], the
 * email index, the LastName lists in the same index table, and customers
 * fanned out to their orders with on_delete: clear) over overlapping keys,
 * while producer threads act like an application: they change employees
 * (LastName moves between the same four lists, e-mail changes, both, and
 * e-mail handovers where B takes the address A just gave up) and customers
 * (renames, a dropped Email, deletions, re-creations) with ordinary
 * conditional writes and enqueue the matching messages, sometimes in the
 * wrong order, duplicated, delayed, base64-encoded, or re-sent long after
 * (stale); they also archive and restore employees by enqueueing the move
 * jobs, whose chained follow-ups fix the indexes. The workers start once a
 * quarter of the messages wait (a backlog, as after a deploy), and half of
 * them pause randomly after every step of the index jobs
 * (ECW_TEST_STEP_JITTER_MS), which widens the race windows.
 *
 * Nothing of what the producers did is remembered: once the queue has been
 * empty (no message visible, hidden or in flight) and no worker has had a job
 * in flight for a few seconds, the workers are stopped (SIGTERM, exit 0) and
 * the end state is judged by a full recomputation from the SOURCE tables
 * alone (Employees, EmployeesArchive, Customers): the whole index table
 * (email entries with their copied properties, the lists' sorted Keys and
 * Count, both jobs' back-references; nothing missing, nothing extra, nothing
 * of an archived employee), every employee in exactly one of the two tables
 * with every property and EDM type intact, every order's copies equal to its
 * customer's current values (cleared for deleted customers), the orders' own
 * properties untouched. (By design this cannot see an application change
 * that a move lost: the source tables are the judge.)
 *
 * A calm run also requires that nothing was poisoned. A chaos run (struct
 * mixed_chaos) SIGKILLs and restarts random workers, sends the workers'
 * traffic through tests/tools/faultproxy (503s, connection resets before and
 * after the service did the work, stalls past storage.request_timeout), or
 * stops and restarts an on-disk Azurite mid-run. Then it stops the kills,
 * turns the faults off, lets the queue drain, lists the poison queue with the
 * operator's command (every envelope must carry a reason), replays it with
 * `poison replay`, drains again, and only then judges, adding a per-message
 * account (see account_messages). Summary lines report messages, outcomes per
 * job, retries, 412/409/404 answers, lease losses, kills, injected faults,
 * poison and the times. Each run has an Azurite of its own
 * (proc_azurite_start): Azurite's queue GC stalls the whole service for a
 * long time after thousands of deletes, which would hurt whatever test comes
 * next on the shared one. */
#include "mixed.h"
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <errno.h>
#include <json-c/json.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "message.h"

#define J_ARCHIVE "archive-employee"
#define J_RESTORE "restore-employee"
#define J_EMAIL "employee-by-email"
#define J_LAST "employees-by-lastname"
#define J_ORDERS "customer-to-orders"
#define NJOBS 5
static const char *const JOBS[NJOBS] = {J_ARCHIVE, J_RESTORE, J_EMAIL, J_LAST, J_ORDERS};

#define EMAIL_PK "email"
#define LIST_PK "lastname"
#define EMAIL_REF "~ref~" J_EMAIL "~"
#define LIST_REF "~ref~" J_LAST "~"
#define CUST_PK "Customers"

#define MAX_EMP 64
#define MAX_CUST 16
#define MAX_WORKERS 4
#define MAX_PRODUCERS 4

/* Hostile keys and values: quotes, '&', '%', '+', spaces, non-ASCII. */
static const char *const EMP_PK[2] = {"Sales & Marketing", "R&D 'Zo\xc3\xab'"};
static const char *const RK_STYLE[5] = {"o'brien", "Zo\xc3\xab", "say \"hi\"", "a+b&c=d%",
                                        "plain two  spaces"};
static const char *const LAST_NAMES[4] = {"Jones", "O'Neil", "Zo\xc3\xab-Smith", "van der Berg"};
static const char *const FIRST_NAMES[4] = {"Ann", "Bj\xc3\xb6rn", "Chlo\xc3\xab", "D'Arcy"};
static const char *const CUST_RK[MAX_CUST] = {"O'Hara & Sons",
                                              "Zo\xc3\xab's Caf\xc3\xa9",
                                              "Smith \"Bros\"",
                                              "a+b&c=d% Ltd",
                                              "cust 05",
                                              "it's 'quoted'",
                                              "cust 07",
                                              "cust 08",
                                              "Caf\xc3\xa9 M\xc3\xbcller",
                                              "cust 10",
                                              "cust 11",
                                              "cust 12",
                                              "cust 13",
                                              "cust 14",
                                              "cust 15",
                                              "cust 16"};

/* ---- fixture ------------------------------------------------------------------------ */

/* ---- fixture ------------------------------------------------------------------------ */

/* Message ids, for the per-message account of a chaos run. */
struct idset {
	char (*v)[64];
	size_t n, cap;
	bool sorted;
};

struct mx {
	const struct mixed_scenario *sc;
	unsigned seed; /* the plan's (ECW_TEST_SEED replays it) */
	struct proc_azurite az;
	bool private_az;
	char az_dir[640]; /* an on-disk Azurite's location; "" in memory */
	const char *connstr;
	char env_conn[700];   /* ECW_TEST_CONNECTION_STRING=... for the workers (the proxy's ports in chaos) */
	char env_direct[700]; /* ... straight to Azurite, for the poison commands */
	struct proc proxy;    /* faultproxy, when the chaos has fault rates */
	bool proxy_on;
	char proxy_stats[640], proxy_ready[640];
	struct ecw_account *acct;
	struct ecw_client *c; /* the test thread's */
	char queue[64], poison[64];
	char emp[64], arch[64], idx[64], cust[64], orders[64];
	char epk[MAX_EMP][64], erk[MAX_EMP][64];

	/* shared with the producer threads */
	pthread_mutex_t mu;
	char **hist; /* every message text put, for stale re-sends */
	size_t nhist, caphist;
	struct idset put_ids; /* the service's id of every message put */
	atomic_bool pause;    /* the producers wait between operations while set */
	atomic_int seq;       /* fresh e-mails and names */
	atomic_int puts, moves, email_changes, cust_changes, cust_drops, cust_deletes, cust_recreates;
	atomic_int archives, restores, stale, dups, delayed, b64, app_412, app_404, app_skipped, handovers;
};

static const struct ecw_client_options APP_OPTIONS = {8, 50, 1000, 30000, 5000, false, NULL, NULL, NULL};

static void idset_add(struct idset *s, const char *id)
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

static bool idset_has(struct idset *s, const char *id)
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
		ITEST_CHECK(!sc->chaos.on, "%s needs an Azurite of its own (tests/node_modules/.bin/azurite or "
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

struct worker {
	struct proc p;
	int n;                         /* from 1 */
	int port;                      /* its metrics port (a new one at each restart) */
	char cfg[640];                 /* its configuration file */
	char env_port[48], env_jitter[64];
};

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

static long long queue_count(struct mx *x, const char *q)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, x->c, q));
	return n;
}


enum op_kind {
	OP_BACKFILL_EMP, /* both index messages for an employee (the index starts empty) */
	OP_BACKFILL_CUST,
	OP_LASTNAME,
	OP_EMAIL,
	OP_BOTH,
	OP_HANDOVER, /* A gets a new e-mail, then B takes A's old one */
	OP_CUST_CHANGE,
	OP_CUST_DELETE,
	OP_CUST_RECREATE,
	OP_ARCHIVE,
	OP_RESTORE,
	OP_STALE, /* an earlier message again, from any thread */
	OP_DUP,   /* this thread's last message again */
};

struct op {
	enum op_kind kind;
	int target;  /* employee or customer */
	int variant; /* message pattern, fixed by the plan so the count is exact */
};

/* Messages an operation puts. */
static int op_msgs(const struct op *o)
{
	switch (o->kind) {
	case OP_BACKFILL_EMP:
		return 2;
	case OP_LASTNAME:
	case OP_BOTH:
		return o->variant == 5 || o->variant == 6 ? 3 : 2;
	case OP_EMAIL:
		return o->variant < 4 ? 1 : 2;
	case OP_HANDOVER:
		return 2;
	case OP_CUST_CHANGE:
		return o->variant == 7 ? 2 : 1;
	default:
		return 1;
	}
}

struct producer {
	struct mx *x;
	int id;
	pthread_t tid;
	struct ecw_client *c;
	struct op *ops;
	size_t nops, capops;
	unsigned seed;
	char *last; /* the last text this thread put */
	int failed;
	char error[768];
	atomic_bool done;
	atomic_bool paused; /* waiting at mx.pause */
};

static int prand(struct producer *p, int n)
{
	return (int)(rand_r(&p->seed) % (unsigned)n);
}

/* Records the first failure of a thread (cmocka may not fail off the test's thread). */
static int pfail(struct producer *p, const char *what, int err)
{
	if (!p->failed++)
		snprintf(p->error, sizeof(p->error), "producer %d: %s: %s (%d): %s", p->id, what,
		         ecw_err_name(err), err, itest_last_error());
	return -1;
}

/* An application write to an employee that failed: a 412 or 404 is a race
 * lost to a worker or another producer (counted; the caller tries again),
 * anything else fails the producer (-1). */
static int lost_race(struct producer *p, struct mx *x, int err)
{
	ecw_error_clear();
	if (err == ECW_EPRECONDITION)
		atomic_fetch_add(&x->app_412, 1);
	else if (err == ECW_ENOTFOUND)
		atomic_fetch_add(&x->app_404, 1);
	else
		return pfail(p, "write employee", err);
	return 0;
}

#define PTRY(expr)                                                                                           \
	do {                                                                                                 \
		int ptry_rc_ = (expr);                                                                       \
		if (ptry_rc_ < 0)                                                                            \
			return pfail(p, #expr, ptry_rc_);                                                    \
	} while (0)

/* Puts a message text as is: sometimes hidden for a few seconds first, so it
 * arrives after newer ones. */
static int put_text(struct producer *p, const char *text)
{
	struct mx *x = p->x;
	struct ecw_queue_put_options po = {0, 0};
	struct ecw_queue_msg put;

	if (prand(p, 25) == 0) {
		po.visibility_delay_s = 1 + prand(p, 4);
		atomic_fetch_add(&x->delayed, 1);
	}
	memset(&put, 0, sizeof(put));
	PTRY(ecw_queue_put(&put, p->c, x->queue, text, strlen(text), &po));
	atomic_fetch_add(&x->puts, 1);
	pthread_mutex_lock(&x->mu);
	idset_add(&x->put_ids, put.id);
	if (x->nhist == x->caphist) {
		x->caphist = x->caphist ? x->caphist * 2 : 1024;
		x->hist = realloc(x->hist, x->caphist * sizeof(*x->hist));
	}
	char *copy = strdup(text);
	if (x->hist && copy)
		x->hist[x->nhist++] = copy;
	pthread_mutex_unlock(&x->mu);
	free(p->last);
	p->last = strdup(text);
	return 0;
}

/* A job message for (pk, rk): JSON, or (one in ten) base64 of it. */
static int put_msg(struct producer *p, const char *job, const char *pk, const char *rk)
{
	struct ecw_buf b;
	bool b64 = prand(p, 10) == 0;
	int rc;

	ecw_buf_init(&b, 0);
	if ((rc = ecw_message_encode(&b, job, pk, rk, NULL, NULL, b64)) < 0) {
		ecw_buf_dispose(&b);
		return pfail(p, "ecw_message_encode", rc);
	}
	if (b64)
		atomic_fetch_add(&p->x->b64, 1);
	rc = put_text(p, ecw_buf_cstr(&b));
	ecw_buf_dispose(&b);
	return rc;
}

static int put_emp_msg(struct producer *p, const char *job, int i)
{
	return put_msg(p, job, p->x->epk[i], p->x->erk[i]);
}

static const char *strp(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *pr = e ? ecw_entity_get(e, name) : NULL;
	return pr && pr->type == ECW_EDM_STRING ? pr->v.s : NULL;
}

/* The entity or NULL (absent); < 0 on a storage error. */
static int get_opt(struct ecw_entity **out, struct ecw_client *c, const char *table, const char *pk,
                   const char *rk)
{
	int err = ecw_table_get(out, c, table, pk, rk);

	if (err == ECW_ENOTFOUND) {
		*out = NULL;
		ecw_error_clear();
		return 0;
	}
	return err;
}

/* Changes employee `want` (or, when it is archived, another one) the way an
 * application does: read, then write with If-Match (the ETag read, or "*"),
 * as a MERGE of the changed fields or a full replace; 412 (changed meanwhile)
 * and 404 (archived meanwhile) start over. what: 1 LastName, 2 Email, 3 both.
 * Returns the employee changed, or -1 when none could be (all archived).
 * old_email (may be NULL): always writes with the ETag read, and receives the
 * e-mail the change replaced (so it is free now). */
static int change_employee(struct producer *p, int want, int what, char *old_email, size_t cap)
{
	struct mx *x = p->x;

	for (int tries = 0; tries < 12; tries++) {
		int i = tries < 2 ? want : prand(p, x->sc->employees);
		struct ecw_entity *e = NULL, *w = NULL;
		char email[128];
		const char *last = NULL;
		int mode = prand(p, old_email ? 2 : 3), err;

		if (get_opt(&e, p->c, x->emp, x->epk[i], x->erk[i]) < 0)
			return pfail(p, "get employee", ecw_error_last()->code);
		if (!e)
			continue; /* archived (or being moved): try another */
		if (old_email)
			snprintf(old_email, cap, "%s", strp(e, "Email") ? strp(e, "Email") : "");
		if (what & 1) {
			const char *cur = strp(e, "LastName");
			do
				last = LAST_NAMES[prand(p, 4)];
			while (cur && strcmp(cur, last) == 0);
		}
		if (what & 2)
			snprintf(email, sizeof(email), "%s.%d.%d@example.com",
			         i % 5 == 0   ? "o'brien"
			         : i % 5 == 1 ? "zo\xc3\xab"
			                      : "staff",
			         i, atomic_fetch_add(&x->seq, 1));
		if (mode == 1) { /* replace the whole entity as read */
			if ((err = ecw_entity_clone(&w, e)) < 0)
				return pfail(p, "clone", err);
		} else if ((err = ecw_entity_new(&w, x->epk[i], x->erk[i])) < 0) {
			return pfail(p, "entity", err);
		}
		if ((what & 1) && (err = ecw_entity_set_string(w, "LastName", last, strlen(last))) < 0)
			return pfail(p, "set", err);
		if ((what & 2) && (err = ecw_entity_set_string(w, "Email", email, strlen(email))) < 0)
			return pfail(p, "set", err);
		err = ecw_table_write(NULL, p->c, x->emp, w, mode == 1 ? ECW_WRITE_UPDATE : ECW_WRITE_MERGE,
		                      mode == 2 ? "*" : ecw_entity_etag(e));
		ecw_entity_free(w);
		ecw_entity_free(e);
		if (err == 0) {
			if (what & 1)
				atomic_fetch_add(&x->moves, 1);
			if (what & 2)
				atomic_fetch_add(&x->email_changes, 1);
			return i;
		}
		if (lost_race(p, x, err) < 0)
			return -1;
	}
	atomic_fetch_add(&x->app_skipped, 1);
	return -1;
}

/* Renames a customer (and mostly gives it a new Email; one in ten loses its
 * Email, a full replace); a deleted customer is left alone. */
static int change_customer(struct producer *p, int i, int variant)
{
	struct mx *x = p->x;

	for (int tries = 0; tries < 8; tries++) {
		struct ecw_entity *e = NULL, *w = NULL;
		char name[128], email[128];
		int err, how = prand(p, 10);
		int n = atomic_fetch_add(&x->seq, 1);

		if (get_opt(&e, p->c, x->cust, CUST_PK, CUST_RK[i]) < 0)
			return pfail(p, "get customer", ecw_error_last()->code);
		if (!e)
			return 0;
		snprintf(name, sizeof(name), "%s v%d%s", CUST_RK[i], n, variant % 2 ? " & co" : "");
		snprintf(email, sizeof(email), "billing+%d@cust-%d.example", n, i);
		if (how == 0) { /* drop Email: replace the entity as read, without it */
			if ((err = ecw_entity_clone(&w, e)) < 0)
				return pfail(p, "clone", err);
			ecw_entity_remove(w, "Email");
			atomic_fetch_add(&x->cust_drops, 1);
		} else if ((err = ecw_entity_new(&w, CUST_PK, CUST_RK[i])) < 0) {
			return pfail(p, "entity", err);
		}
		if ((err = ecw_entity_set_string(w, "Name", name, strlen(name))) < 0 ||
		    (how > 1 && (err = ecw_entity_set_string(w, "Email", email, strlen(email))) < 0))
			return pfail(p, "set", err);
		err = ecw_table_write(NULL, p->c, x->cust, w, how == 0 ? ECW_WRITE_UPDATE : ECW_WRITE_MERGE,
		                      ecw_entity_etag(e));
		ecw_entity_free(w);
		ecw_entity_free(e);
		if (err == 0) {
			atomic_fetch_add(&x->cust_changes, 1);
			return 0;
		}
		ecw_error_clear();
		if (err == ECW_EPRECONDITION)
			atomic_fetch_add(&x->app_412, 1);
		else if (err == ECW_ENOTFOUND)
			return 0; /* deleted meanwhile */
		else
			return pfail(p, "write customer", err);
	}
	atomic_fetch_add(&x->app_skipped, 1);
	return 0;
}

/* Re-creates a deleted customer (the first absent one from i on). */
static int recreate_customer(struct producer *p, int *i)
{
	struct mx *x = p->x;

	for (int k = 0; k < x->sc->customers; k++) {
		int c = (*i + k) % x->sc->customers;
		struct ecw_entity *e = NULL;
		char name[128], email[128];
		int n = atomic_fetch_add(&x->seq, 1), err;

		if (get_opt(&e, p->c, x->cust, CUST_PK, CUST_RK[c]) < 0)
			return pfail(p, "get customer", ecw_error_last()->code);
		if (e) {
			ecw_entity_free(e);
			continue;
		}
		snprintf(name, sizeof(name), "%s reborn %d", CUST_RK[c], n);
		snprintf(email, sizeof(email), "again+%d@cust-%d.example", n, c);
		PTRY(ecw_entity_new(&e, CUST_PK, CUST_RK[c]));
		if ((err = ecw_entity_set_string(e, "Name", name, strlen(name))) < 0 ||
		    (err = ecw_entity_set_string(e, "Email", email, strlen(email))) < 0 ||
		    (err = ecw_entity_set_int32(e, "Visits", n)) < 0) {
			ecw_entity_free(e);
			return pfail(p, "set", err);
		}
		err = ecw_table_write(NULL, p->c, x->cust, e, ECW_WRITE_INSERT, NULL);
		ecw_entity_free(e);
		if (err == ECW_ECONFLICT) {
			ecw_error_clear();
			continue;
		}
		PTRY(err);
		atomic_fetch_add(&x->cust_recreates, 1);
		*i = c;
		return 0;
	}
	return 0;
}

/* An employee in `table` (want first, then random ones), or want. */
static int pick_in(struct producer *p, const char *table, int want)
{
	struct mx *x = p->x;

	for (int tries = 0; tries < 8; tries++) {
		int i = tries == 0 ? want : prand(p, x->sc->employees);
		struct ecw_entity *e = NULL;
		if (get_opt(&e, p->c, table, x->epk[i], x->erk[i]) < 0)
			return pfail(p, "get employee", ecw_error_last()->code);
		ecw_entity_free(e);
		if (e)
			return i;
	}
	return want;
}

/* Gives employee a's freed e-mail to another employee b (read, MERGE with
 * If-Match); returns b, or -1 when nobody could take it. */
static int take_email(struct producer *p, int a, const char *email)
{
	struct mx *x = p->x;

	for (int tries = 0; tries < 12; tries++) {
		int b = prand(p, x->sc->employees);
		struct ecw_entity *e = NULL, *w = NULL;
		int err;

		if (b == a)
			continue;
		if (get_opt(&e, p->c, x->emp, x->epk[b], x->erk[b]) < 0)
			return pfail(p, "get employee", ecw_error_last()->code);
		if (!e)
			continue;
		if ((err = ecw_entity_new(&w, x->epk[b], x->erk[b])) < 0 ||
		    (err = ecw_entity_set_string(w, "Email", email, strlen(email))) < 0)
			return pfail(p, "entity", err);
		err = ecw_table_write(NULL, p->c, x->emp, w, ECW_WRITE_MERGE, ecw_entity_etag(e));
		ecw_entity_free(w);
		ecw_entity_free(e);
		if (err == 0)
			return b;
		if (lost_race(p, x, err) < 0)
			return -1;
	}
	return -1;
}

/* The messages after an employee change, in the variant's order:
 * 0-2 email, lastname; 3-4 lastname, email; 5 lastname, email, lastname;
 * 6 email, lastname, email; 7 lastname, email (one of them delayed by put_text
 * at random like any message). */
static int employee_msgs(struct producer *p, int i, int variant, bool email_only)
{
	if (email_only) {
		/* 0-3 email; 4-5 email, lastname; 6 email twice; 7 lastname, email */
		if (variant == 7 && put_emp_msg(p, J_LAST, i) < 0)
			return -1;
		if (put_emp_msg(p, J_EMAIL, i) < 0)
			return -1;
		if (variant == 4 || variant == 5)
			return put_emp_msg(p, J_LAST, i);
		if (variant == 6)
			return put_emp_msg(p, J_EMAIL, i);
		return 0;
	}
	static const char *const seqs[8][3] = {{J_EMAIL, J_LAST, NULL},    {J_EMAIL, J_LAST, NULL},
	                                       {J_EMAIL, J_LAST, NULL},    {J_LAST, J_EMAIL, NULL},
	                                       {J_LAST, J_EMAIL, NULL},    {J_LAST, J_EMAIL, J_LAST},
	                                       {J_EMAIL, J_LAST, J_EMAIL}, {J_LAST, J_EMAIL, NULL}};
	for (int k = 0; k < 3 && seqs[variant][k]; k++)
		if (put_emp_msg(p, seqs[variant][k], i) < 0)
			return -1;
	return 0;
}

static int run_op(struct producer *p, const struct op *o)
{
	struct mx *x = p->x;
	int i = o->target;

	switch (o->kind) {
	case OP_BACKFILL_EMP:
		if (put_emp_msg(p, J_EMAIL, i) < 0)
			return -1;
		return put_emp_msg(p, J_LAST, i);
	case OP_BACKFILL_CUST:
		return put_msg(p, J_ORDERS, CUST_PK, CUST_RK[i]);
	case OP_LASTNAME:
	case OP_EMAIL:
	case OP_BOTH: {
		int what = o->kind == OP_LASTNAME ? 1 : o->kind == OP_EMAIL ? 2 : 3;
		int got = change_employee(p, i, what, NULL, 0);
		if (p->failed)
			return -1;
		/* Nothing could be changed (all archived): the messages go out
		 * anyway, as an application would send them. */
		return employee_msgs(p, got >= 0 ? got : i, o->variant, o->kind == OP_EMAIL);
	}
	case OP_HANDOVER: {
		char old[160] = "";
		int a = change_employee(p, i, 2, old, sizeof(old)), b = -1;
		if (p->failed)
			return -1;
		if (a >= 0 && old[0]) {
			b = take_email(p, a, old);
			if (p->failed)
				return -1;
			if (b >= 0)
				atomic_fetch_add(&x->handovers, 1);
		}
		if (a < 0)
			a = i;
		if (b < 0)
			b = a;
		/* Mostly the taker's message first: its entry's place still
		 * holds a's entry, which no longer computes to it. */
		if (put_emp_msg(p, J_EMAIL, o->variant < 6 ? b : a) < 0)
			return -1;
		return put_emp_msg(p, J_EMAIL, o->variant < 6 ? a : b);
	}
	case OP_CUST_CHANGE:
		if (change_customer(p, i, o->variant) < 0)
			return -1;
		if (put_msg(p, J_ORDERS, CUST_PK, CUST_RK[i]) < 0)
			return -1;
		return o->variant == 7 ? put_msg(p, J_ORDERS, CUST_PK, CUST_RK[i]) : 0;
	case OP_CUST_DELETE: {
		bool deleted = false;
		PTRY(ecw_table_delete_if_exists(&deleted, p->c, x->cust, CUST_PK, CUST_RK[i]));
		if (deleted)
			atomic_fetch_add(&x->cust_deletes, 1);
		return put_msg(p, J_ORDERS, CUST_PK, CUST_RK[i]);
	}
	case OP_CUST_RECREATE:
		if (recreate_customer(p, &i) < 0)
			return -1;
		return put_msg(p, J_ORDERS, CUST_PK, CUST_RK[i]);
	case OP_ARCHIVE:
		i = pick_in(p, x->emp, i);
		atomic_fetch_add(&x->archives, 1);
		return p->failed ? -1 : put_emp_msg(p, J_ARCHIVE, i);
	case OP_RESTORE:
		i = pick_in(p, x->arch, i);
		atomic_fetch_add(&x->restores, 1);
		return p->failed ? -1 : put_emp_msg(p, J_RESTORE, i);
	case OP_STALE:
	case OP_DUP: {
		char *text = NULL;
		if (o->kind == OP_DUP && p->last) {
			text = strdup(p->last);
			atomic_fetch_add(&x->dups, 1);
		} else {
			pthread_mutex_lock(&x->mu);
			if (x->nhist)
				text = strdup(x->hist[prand(p, (int)x->nhist)]);
			pthread_mutex_unlock(&x->mu);
			atomic_fetch_add(&x->stale, 1);
		}
		if (!text) /* nothing sent yet: an index message for someone */
			return put_emp_msg(p, J_LAST, i % x->sc->employees);
		int rc = put_text(p, text);
		free(text);
		return rc;
	}
	}
	return 0;
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;

	for (size_t k = 0; k < p->nops && !p->failed; k++) {
		/* Held between operations while Azurite restarts. */
		while (atomic_load(&p->x->pause)) {
			atomic_store(&p->paused, true);
			itest_sleep_ms(10);
		}
		atomic_store(&p->paused, false);
		if (run_op(p, &p->ops[k]) < 0)
			break;
		/* An application's pace varies: now and then a short pause. */
		if (prand(p, 40) == 0)
			itest_sleep_ms(20 + prand(p, 80));
	}
	atomic_store(&p->done, true);
	return NULL;
}

static void plan_add(struct producer *p, enum op_kind kind, int target, int variant)
{
	if (p->nops == p->capops) {
		p->capops = p->capops ? p->capops * 2 : 256;
		p->ops = realloc(p->ops, p->capops * sizeof(*p->ops));
		assert_non_null(p->ops);
	}
	p->ops[p->nops++] = (struct op){kind, target, variant};
}

/* The plan: backfill first (the index starts empty, the orders carry no
 * copies yet), then every application operation and the stale re-sends and
 * duplicates that fill the total, shuffled, dealt round-robin. */
static void make_plan(struct mx *x, struct producer *prods, unsigned seed)
{
	const struct mixed_scenario *sc = x->sc;
	struct op *all = NULL;
	size_t n = 0, cap = (size_t)sc->total + 16;
	int msgs = 0;

	all = calloc(cap, sizeof(*all));
	assert_non_null(all);
	srand(seed);
#define ADD(k, t, v)                                                                                         \
	do {                                                                                                 \
		assert_true(n < cap);                                                                        \
		all[n] = (struct op){(k), (t), (v)};                                                         \
		msgs += op_msgs(&all[n]);                                                                    \
		n++;                                                                                         \
	} while (0)
	for (int i = sc->archived0; i < sc->employees; i++)
		ADD(OP_BACKFILL_EMP, i, 0);
	for (int i = 0; i < sc->customers; i++)
		ADD(OP_BACKFILL_CUST, i, 0);
	size_t backfill = n;
	for (int k = 0; k < sc->lastname; k++)
		ADD(OP_LASTNAME, rand() % sc->employees, rand() % 8);
	for (int k = 0; k < sc->email; k++)
		ADD(OP_EMAIL, rand() % sc->employees, rand() % 8);
	for (int k = 0; k < sc->both; k++)
		ADD(OP_BOTH, rand() % sc->employees, rand() % 8);
	for (int k = 0; k < sc->handover; k++)
		ADD(OP_HANDOVER, rand() % sc->employees, rand() % 8);
	for (int k = 0; k < sc->cust_change; k++)
		ADD(OP_CUST_CHANGE, rand() % sc->customers, rand() % 8);
	for (int k = 0; k < sc->cust_delete; k++)
		ADD(OP_CUST_DELETE, rand() % sc->customers, 0);
	for (int k = 0; k < sc->cust_recreate; k++)
		ADD(OP_CUST_RECREATE, rand() % sc->customers, 0);
	for (int k = 0; k < sc->archive; k++)
		ADD(OP_ARCHIVE, rand() % sc->employees, 0);
	for (int k = 0; k < sc->restore; k++)
		ADD(OP_RESTORE, rand() % sc->employees, 0);
	ITEST_CHECK(msgs <= sc->total, "the plan's operations put %d messages, more than the total %d", msgs,
	            sc->total);
	while (msgs < sc->total)
		ADD(rand() % 3 ? OP_STALE : OP_DUP, rand() % sc->employees, 0);
#undef ADD
	/* Shuffle what follows the backfill. Deletions and re-creations of
	 * customers stay out of the first fifth, so customers live a while. */
	for (size_t k = n - 1; k > backfill; k--) {
		size_t j = backfill + (size_t)rand() % (k - backfill + 1);
		struct op t = all[k];
		all[k] = all[j];
		all[j] = t;
	}
	for (size_t k = 0; k < n; k++)
		plan_add(&prods[k % (size_t)sc->producers], all[k].kind, all[k].target, all[k].variant);
	free(all);
}

/* ---- seeding ------------------------------------------------------------------------------ */

static void seed_data(struct mx *x)
{
	const struct mixed_scenario *sc = x->sc;

	for (int i = 0; i < sc->employees; i++) {
		struct ecw_entity *e = NULL;
		char email[128];
		const char *first = FIRST_NAMES[i % 4], *last = LAST_NAMES[(i / 2) % 4];
		snprintf(email, sizeof(email), "%s.%d.first@example.com", i % 5 == 0 ? "o'brien" : "staff",
		         i);
		ECW_ASSERT_OK(ecw_entity_new(&e, x->epk[i], x->erk[i]));
		ECW_ASSERT_OK(ecw_entity_set_string(e, "FirstName", first, strlen(first)));
		ECW_ASSERT_OK(ecw_entity_set_string(e, "LastName", last, strlen(last)));
		ECW_ASSERT_OK(ecw_entity_set_string(e, "Email", email, strlen(email)));
		ECW_ASSERT_OK(ecw_entity_set_double(e, "Salary", 50000.0 + i));
		ECW_ASSERT_OK(ecw_entity_set_int32(e, "Grade", i % 9));
		ECW_ASSERT_OK(ecw_entity_set_int64(e, "BadgeId", 9007199254740993LL + i));
		ECW_ASSERT_OK(ecw_table_write(NULL, x->c, i < sc->archived0 ? x->arch : x->emp, e,
		                              ECW_WRITE_INSERT, NULL));
		ecw_entity_free(e);
	}
	for (int i = 0; i < sc->customers; i++) {
		struct ecw_entity *e = NULL;
		char name[128], email[128];
		snprintf(name, sizeof(name), "%s", CUST_RK[i]);
		snprintf(email, sizeof(email), "first@cust-%d.example", i);
		ECW_ASSERT_OK(ecw_entity_new(&e, CUST_PK, CUST_RK[i]));
		ECW_ASSERT_OK(ecw_entity_set_string(e, "Name", name, strlen(name)));
		ECW_ASSERT_OK(ecw_entity_set_string(e, "Email", email, strlen(email)));
		ECW_ASSERT_OK(ecw_entity_set_int32(e, "Visits", i));
		ECW_ASSERT_OK(ecw_table_write(NULL, x->c, x->cust, e, ECW_WRITE_INSERT, NULL));
		ecw_entity_free(e);

		struct ecw_batch *b = NULL;
		ECW_ASSERT_OK(ecw_batch_new(&b, x->orders));
		for (int k = 0; k < sc->orders_per; k++) {
			char rk[16], note[48];
			snprintf(rk, sizeof(rk), "o%03d", k);
			snprintf(note, sizeof(note), "note %d/%d", i, k);
			ECW_ASSERT_OK(ecw_entity_new(&e, CUST_RK[i], rk));
			ECW_ASSERT_OK(ecw_entity_set_int32(e, "Amount", 100 * i + k));
			ECW_ASSERT_OK(ecw_entity_set_string(e, "Note", note, strlen(note)));
			ECW_ASSERT_OK(ecw_entity_set_string(e, "Status", "new", 3));
			ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT, e, NULL));
			ecw_entity_free(e);
		}
		ECW_ASSERT_OK(ecw_batch_submit(x->c, b));
		ecw_batch_free(b);
	}
}

/* ---- the recomputation ----------------------------------------------------------------------- */

static struct ecw_entity **all_entities(size_t *n, struct mx *x, const char *table)
{
	return itest_query_all(n, x->c, table, NULL);
}


static const struct ecw_entity *find_entity(struct ecw_entity **v, size_t n, const char *pk, const char *rk)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ecw_entity_pk(v[i]), pk) == 0 && strcmp(ecw_entity_rk(v[i]), rk) == 0)
			return v[i];
	return NULL;
}

/* The hex SHA-256 of "pk NUL rk": the RowKey of both jobs' refs. */
static void ref_hash(char out[65], const char *pk, const char *rk)
{
	size_t a = strlen(pk), b = strlen(rk);
	unsigned char *in = malloc(a + b + 1), md[SHA256_DIGEST_LENGTH];

	assert_non_null(in);
	memcpy(in, pk, a + 1);
	memcpy(in + a + 1, rk, b);
	SHA256(in, a + b + 1, md);
	free(in);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* Differences, collected so that one failure shows them all. */
struct report {
	char text[12000];
	size_t len;
	int n;
};

static void ECW_PRINTF(2, 3) diff(struct report *r, const char *fmt, ...)
{
	va_list ap;

	if (r->n++ >= 40 || r->len >= sizeof(r->text) - 2)
		return;
	r->text[r->len++] = '\n';
	r->text[r->len] = '\0';
	va_start(ap, fmt);
	int k = vsnprintf(r->text + r->len, sizeof(r->text) - r->len, fmt, ap);
	va_end(ap);
	if (k > 0)
		r->len += (size_t)k < sizeof(r->text) - r->len ? (size_t)k : sizeof(r->text) - r->len - 1;
}

struct state {
	struct ecw_entity **emp, **arch, **idx, **cust, **orders;
	size_t nemp, narch, nidx, ncust, norders;
};

/* Where a source is now, for the messages. */
static const char *whereabouts(const struct state *s, const char *pk, const char *rk)
{
	if (find_entity(s->emp, s->nemp, pk, rk))
		return "in Employees";
	if (find_entity(s->arch, s->narch, pk, rk))
		return "ARCHIVED";
	return "in neither table";
}

/* A list's Keys: JSON pairs, strictly sorted, Count equal to their number,
 * never empty. Returns the pairs (caller puts) or NULL after a diff. */
static struct json_object *parse_keys(struct report *r, const struct ecw_entity *list)
{
	const char *keys = strp(list, "Keys");
	const struct ecw_prop *count = ecw_entity_get(list, "Count");
	const char *lrk = ecw_entity_rk(list);
	struct json_object *arr;

	if (!keys || !count || count->type != ECW_EDM_INT32 || ecw_entity_count(list) != 2) {
		diff(r, "list %s: not {Keys: String, Count: Int32}: %s", lrk, itest_entity_json(list));
		return NULL;
	}
	arr = json_tokener_parse(keys);
	if (!arr || !json_object_is_type(arr, json_type_array)) {
		diff(r, "list %s: Keys is not a JSON array: %.300s", lrk, keys);
		json_object_put(arr);
		return NULL;
	}
	size_t n = json_object_array_length(arr);
	if (n == 0)
		diff(r, "list %s is empty: an emptied list must be deleted", lrk);
	if ((size_t)count->v.i32 != n)
		diff(r, "list %s: Count %d, Keys holds %zu", lrk, count->v.i32, n);
	for (size_t i = 0; i < n; i++) {
		struct json_object *pr = json_object_array_get_idx(arr, i);
		if (!json_object_is_type(pr, json_type_array) || json_object_array_length(pr) != 2 ||
		    !json_object_is_type(json_object_array_get_idx(pr, 0), json_type_string) ||
		    !json_object_is_type(json_object_array_get_idx(pr, 1), json_type_string)) {
			diff(r, "list %s: item %zu is not a [pk, rk] pair: %.300s", lrk, i, keys);
			json_object_put(arr);
			return NULL;
		}
		if (i) {
			struct json_object *q = json_object_array_get_idx(arr, i - 1);
			int c = strcmp(json_object_get_string(json_object_array_get_idx(q, 0)),
			               json_object_get_string(json_object_array_get_idx(pr, 0)));
			if (c == 0)
				c = strcmp(json_object_get_string(json_object_array_get_idx(q, 1)),
				           json_object_get_string(json_object_array_get_idx(pr, 1)));
			if (c >= 0)
				diff(r, "list %s: not strictly sorted at item %zu: %.300s", lrk, i, keys);
		}
	}
	return arr;
}

/* True when the list's pairs hold (pk, rk). */
static bool pairs_have(struct json_object *arr, const char *pk, const char *rk)
{
	for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
		struct json_object *pr = json_object_array_get_idx(arr, i);
		if (strcmp(json_object_get_string(json_object_array_get_idx(pr, 0)), pk) == 0 &&
		    strcmp(json_object_get_string(json_object_array_get_idx(pr, 1)), rk) == 0)
			return true;
	}
	return false;
}

/* The whole end state against a recomputation from the source tables. A
 * chaos run is judged as strictly as a calm one: a poisoned message hands its
 * intents over (index_list.c: abandon) and its replay drops them. */
static void check_end_state(struct mx *x, struct state *s)
{
	const struct mixed_scenario *sc = x->sc;
	struct report *r = calloc(1, sizeof(*r));
	char h[65], rpk[128];

	assert_non_null(r);
	s->emp = all_entities(&s->nemp, x, x->emp);
	s->arch = all_entities(&s->narch, x, x->arch);
	s->idx = all_entities(&s->nidx, x, x->idx);
	s->cust = all_entities(&s->ncust, x, x->cust);
	s->orders = all_entities(&s->norders, x, x->orders);

	/* 1. Every employee in exactly one of the two tables, all fields there. */
	for (int i = 0; i < sc->employees; i++) {
		const struct ecw_entity *a = find_entity(s->emp, s->nemp, x->epk[i], x->erk[i]);
		const struct ecw_entity *b = find_entity(s->arch, s->narch, x->epk[i], x->erk[i]);
		if (a && b)
			diff(r, "employee (%s, %s) is in Employees AND in the archive:\n    %s\n    %s",
			     x->epk[i], x->erk[i], itest_entity_json(a), itest_entity_json(b));
		if (!a && !b)
			diff(r, "employee (%s, %s) is in neither Employees nor the archive: lost", x->epk[i],
			     x->erk[i]);
		const struct ecw_entity *e = a ? a : b;
		const struct ecw_prop *salary = e ? ecw_entity_get(e, "Salary") : NULL;
		const struct ecw_prop *grade = e ? ecw_entity_get(e, "Grade") : NULL;
		const struct ecw_prop *badge = e ? ecw_entity_get(e, "BadgeId") : NULL;
		if (e && (ecw_entity_count(e) != 6 || !strp(e, "LastName") || !strp(e, "Email") ||
		          !strp(e, "FirstName") || !salary || salary->type != ECW_EDM_DOUBLE ||
		          salary->v.d != 50000.0 + i || !grade || grade->type != ECW_EDM_INT32 ||
		          grade->v.i32 != i % 9 || !badge || badge->type != ECW_EDM_INT64 ||
		          badge->v.i64 != 9007199254740993LL + i))
			diff(r, "employee (%s, %s) lost or changed properties (types) on its way: %s",
			     x->epk[i], x->erk[i], itest_entity_json(e));
	}
	/* The checks below need these on every employee. */
	if (r->n) {
		char copy[sizeof(r->text)];
		snprintf(copy, sizeof(copy), "%s", r->text);
		free(r);
		fail_msg("%s (seed %u): the source tables are inconsistent:%s", sc->name, x->seed, copy);
	}
	if (s->nemp + s->narch != (size_t)sc->employees)
		diff(r, "%zu employees + %zu archived, expected %d in all", s->nemp, s->narch, sc->employees);

	/* 2. The index table: every entity must be expected, exactly. */
	bool *seen_entry = calloc(s->nemp + 1, sizeof(bool)), *seen_eref = calloc(s->nemp + 1, sizeof(bool));
	bool *seen_listed = calloc(s->nemp + 1, sizeof(bool)), *seen_lref = calloc(s->nemp + 1, sizeof(bool));
	size_t nentries = 0, nlists = 0, nerefs = 0, nlrefs = 0;
	assert_true(seen_entry && seen_eref && seen_listed && seen_lref);
	for (size_t k = 0; k < s->nidx; k++) {
		const struct ecw_entity *a = s->idx[k];
		const char *pk = ecw_entity_pk(a), *rk = ecw_entity_rk(a);
		const char *spk = strp(a, "SourcePartitionKey"), *srk = strp(a, "SourceRowKey");

		if (strcmp(pk, EMAIL_PK) == 0) {
			nentries++;
			size_t j = 0;
			for (; j < s->nemp; j++)
				if (strcmp(strp(s->emp[j], "Email"), rk) == 0)
					break;
			if (j == s->nemp) {
				diff(r, "stale email entry %s (its source (%s, %s) is %s): %s", rk,
				     spk ? spk : "?", srk ? srk : "?",
				     spk && srk ? whereabouts(s, spk, srk) : "-", itest_entity_json(a));
				continue;
			}
			const struct ecw_entity *src = s->emp[j];
			struct ecw_entity *want = NULL;
			ECW_ASSERT_OK(ecw_entity_new(&want, EMAIL_PK, rk));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourcePartitionKey", ecw_entity_pk(src),
			                                    strlen(ecw_entity_pk(src))));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourceRowKey", ecw_entity_rk(src),
			                                    strlen(ecw_entity_rk(src))));
			ECW_ASSERT_OK(ecw_entity_set_prop(want, ecw_entity_get(src, "FirstName")));
			ECW_ASSERT_OK(ecw_entity_set_prop(want, ecw_entity_get(src, "LastName")));
			if (!ecw_entity_equal(a, want))
				diff(r, "email entry %s:\n    has      %s\n    expected %s", rk, itest_entity_json(a),
				     itest_entity_json(want));
			ecw_entity_free(want);
			seen_entry[j] = true;
		} else if (strncmp(pk, EMAIL_REF, strlen(EMAIL_REF)) == 0) {
			nerefs++;
			const struct ecw_entity *src =
			    spk && srk ? find_entity(s->emp, s->nemp, spk, srk) : NULL;
			if (!src) {
				diff(r, "stale email ref of (%s, %s), which is %s: %s", spk ? spk : "?",
				     srk ? srk : "?", spk && srk ? whereabouts(s, spk, srk) : "-",
				     itest_entity_json(a));
				continue;
			}
			struct ecw_entity *want = NULL;
			ref_hash(h, spk, srk);
			snprintf(rpk, sizeof(rpk), "%s%.2s", EMAIL_REF, h);
			ECW_ASSERT_OK(ecw_entity_new(&want, rpk, h));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "Job", J_EMAIL, strlen(J_EMAIL)));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourcePartitionKey", spk, strlen(spk)));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourceRowKey", srk, strlen(srk)));
			ECW_ASSERT_OK(
			    ecw_entity_set_string(want, "IndexPartitionKey", EMAIL_PK, strlen(EMAIL_PK)));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "IndexRowKey", strp(src, "Email"),
			                                    strlen(strp(src, "Email"))));
			if (!ecw_entity_equal(a, want))
				diff(r, "email ref of (%s, %s):\n    has      %s\n    expected %s", spk, srk,
				     itest_entity_json(a), itest_entity_json(want));
			ecw_entity_free(want);
			for (size_t j = 0; j < s->nemp; j++)
				if (s->emp[j] == src)
					seen_eref[j] = true;
		} else if (strcmp(pk, LIST_PK) == 0) {
			nlists++;
			struct json_object *arr = parse_keys(r, a);
			for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
				struct json_object *pr = json_object_array_get_idx(arr, i);
				const char *lpk = json_object_get_string(json_object_array_get_idx(pr, 0));
				const char *lrk = json_object_get_string(json_object_array_get_idx(pr, 1));
				const struct ecw_entity *src = find_entity(s->emp, s->nemp, lpk, lrk);
				if (!src) {
					diff(r, "list %s holds (%s, %s), which is %s", rk, lpk, lrk,
					     whereabouts(s, lpk, lrk));
					continue;
				}
				if (strcmp(strp(src, "LastName"), rk) != 0)
					diff(r, "list %s holds (%s, %s), whose LastName is %s", rk, lpk, lrk,
					     strp(src, "LastName"));
				for (size_t j = 0; j < s->nemp; j++)
					if (s->emp[j] == src && strcmp(strp(src, "LastName"), rk) == 0)
						seen_listed[j] = true;
			}
			/* Everyone with this LastName is in it. */
			for (size_t j = 0; arr && j < s->nemp; j++)
				if (strcmp(strp(s->emp[j], "LastName"), rk) == 0 &&
				    !pairs_have(arr, ecw_entity_pk(s->emp[j]), ecw_entity_rk(s->emp[j])))
					diff(r, "list %s lacks (%s, %s)", rk, ecw_entity_pk(s->emp[j]),
					     ecw_entity_rk(s->emp[j]));
			json_object_put(arr);
		} else if (strncmp(pk, LIST_REF, strlen(LIST_REF)) == 0) {
			const struct ecw_entity *src =
			    spk && srk ? find_entity(s->emp, s->nemp, spk, srk) : NULL;
			nlrefs++;
			if (!src) {
				diff(r, "stale list ref of (%s, %s), which is %s: %s", spk ? spk : "?",
				     srk ? srk : "?", spk && srk ? whereabouts(s, spk, srk) : "-",
				     itest_entity_json(a));
				continue;
			}
			struct ecw_entity *want = NULL;
			const char *last = strp(src, "LastName");
			ref_hash(h, spk, srk);
			snprintf(rpk, sizeof(rpk), "%s%.2s", LIST_REF, h);
			ECW_ASSERT_OK(ecw_entity_new(&want, rpk, h));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourcePartitionKey", spk, strlen(spk)));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "SourceRowKey", srk, strlen(srk)));
			ECW_ASSERT_OK(
			    ecw_entity_set_string(want, "ListPartitionKey", LIST_PK, strlen(LIST_PK)));
			ECW_ASSERT_OK(ecw_entity_set_string(want, "ListRowKey", last, strlen(last)));
			if (!ecw_entity_equal(a, want))
				diff(r, "list ref of (%s, %s):\n    has      %s\n    expected %s", spk, srk,
				     itest_entity_json(a), itest_entity_json(want));
			ecw_entity_free(want);
			for (size_t j = 0; j < s->nemp; j++)
				if (s->emp[j] == src)
					seen_lref[j] = true;
		} else {
			diff(r, "unexpected entity in the index table: %s", itest_entity_json(a));
		}
	}
	for (size_t j = 0; j < s->nemp; j++) {
		const struct ecw_entity *e = s->emp[j];
		if (!seen_entry[j])
			diff(r, "no email entry for (%s, %s) at %s", ecw_entity_pk(e), ecw_entity_rk(e),
			     strp(e, "Email"));
		if (!seen_eref[j])
			diff(r, "no email ref for (%s, %s)", ecw_entity_pk(e), ecw_entity_rk(e));
		if (!seen_listed[j])
			diff(r, "(%s, %s) is in no list (LastName %s)", ecw_entity_pk(e), ecw_entity_rk(e),
			     strp(e, "LastName"));
		if (!seen_lref[j])
			diff(r, "no list ref for (%s, %s)", ecw_entity_pk(e), ecw_entity_rk(e));
	}
	/* One list per LastName in use, nothing more (the loop above found
	 * stale members; an extra list would hold only stale ones). */
	size_t want_lists = 0;
	for (int n = 0; n < 4; n++)
		for (size_t j = 0; j < s->nemp; j++)
			if (strcmp(strp(s->emp[j], "LastName"), LAST_NAMES[n]) == 0) {
				want_lists++;
				break;
			}
	if (nlists != want_lists)
		diff(r, "%zu lists, expected %zu", nlists, want_lists);
	if (nentries != s->nemp || nerefs != s->nemp || nlrefs != s->nemp)
		diff(r, "%zu email entries, %zu email refs, %zu list refs; expected %zu of each", nentries,
		     nerefs, nlrefs, s->nemp);
	free(seen_entry);
	free(seen_eref);
	free(seen_listed);
	free(seen_lref);

	/* 3. Orders: copies = the customer's current values, none when it is
	 * gone; the rest as seeded. */
	if (s->norders != (size_t)(sc->customers * sc->orders_per))
		diff(r, "%zu orders, expected %d", s->norders, sc->customers * sc->orders_per);
	for (size_t k = 0; k < s->norders; k++) {
		const struct ecw_entity *o = s->orders[k];
		const struct ecw_entity *c = find_entity(s->cust, s->ncust, CUST_PK, ecw_entity_pk(o));
		const char *want_name = c ? strp(c, "Name") : NULL, *want_email = c ? strp(c, "Email") : NULL;
		const struct ecw_prop *name = ecw_entity_get(o, "CustomerName"),
		                      *email = ecw_entity_get(o, "CustomerEmail");
		bool ok =
		    (want_name ? name && name->type == ECW_EDM_STRING && strcmp(name->v.s, want_name) == 0
		               : !name) &&
		    (want_email
		         ? email && email->type == ECW_EDM_STRING && strcmp(email->v.s, want_email) == 0
		         : !email);
		if (!ok)
			diff(r,
			     "order (%s, %s) of a customer %s: copies Name=%s Email=%s, expected Name=%s "
			     "Email=%s",
			     ecw_entity_pk(o), ecw_entity_rk(o), c ? "that exists" : "DELETED",
			     name ? name->v.s : "(none)", email ? email->v.s : "(none)",
			     want_name ? want_name : "(none)", want_email ? want_email : "(none)");
		const struct ecw_prop *st = ecw_entity_get(o, "Status"), *amt = ecw_entity_get(o, "Amount"),
		                      *note = ecw_entity_get(o, "Note");
		size_t extra = (name ? 1 : 0) + (email ? 1 : 0);
		if (!st || strcmp(st->v.s, "new") != 0 || !amt || amt->type != ECW_EDM_INT32 || !note ||
		    ecw_entity_count(o) != 3 + extra)
			diff(r, "order (%s, %s): other properties changed: %s", ecw_entity_pk(o),
			     ecw_entity_rk(o), itest_entity_json(o));
	}

	if (r->n) {
		char copy[sizeof(r->text)];
		int n = r->n;
		snprintf(copy, sizeof(copy), "%s", r->text);
		free(r);
		fail_msg("%s (seed %u): the end state differs from the recomputation from the source tables "
		         "in %d place(s) (first 40):%s",
		         sc->name, x->seed, n, copy);
	}
	free(r);
}

static void state_free(struct state *s)
{
	itest_entities_free(s->emp, s->nemp);
	itest_entities_free(s->arch, s->narch);
	itest_entities_free(s->idx, s->nidx);
	itest_entities_free(s->cust, s->ncust);
	itest_entities_free(s->orders, s->norders);
	memset(s, 0, sizeof(*s));
}

/* ---- the run ---------------------------------------------------------------------------------- */

struct proxy_stats {
	long long connections, requests, f503, reset_before, reset_after, stall;
	double cpu_s; /* the proxy's user + system time */
};

struct chaos_state {
	int kills;
	int64_t t_produced;           /* when the last producer finished */
	bool restarted;               /* Azurite was stopped and started again */
	long long count_at_stop;      /* messages on the queue when it stopped */
	long stop_ms, outage_ms;      /* SIGTERM to exit; SIGTERM to listening again */
	long long retries_before;     /* the workers' client retries just before it stopped */
	struct proxy_stats ps;
};

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
		long long count = queue_count(x, x->queue);
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
			fail_msg("%s: the queue still holds %lld message(s) (%lld in flight) %d s after the "
			         "producers (and the chaos) finished (poison queue: %lld); worker 1's log %s:\n%s",
			         x->sc->name, last_count, inflight, timeout_s, queue_count(x, x->poison),
			         w[0].p.log_path, proc_tail(w[0].p.log_path, 30));
		itest_sleep_ms(250);
	}
}

enum { OC_SUCCEEDED, OC_RETRIED, OC_POISONED, OC_LEASE_LOST, OC_OTHER, NOC };
static const char *const OC_NAMES[NOC] = {"succeeded", "retried", "poisoned", "lease-lost", "other"};

struct tally {
	long long by[NJOBS + 1][NOC]; /* the last row: unknown job */
	long long rounds, conflicts, warn_lines, storage_errors;
	long long m412, m409, m404, retries, requests;
	char first_poison[1024];
	char first_other[1024];
	struct idset ok_ids, lost_ids; /* message ids with a succeeded / lease-lost outcome */
};

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
		while (j < NJOBS && strcmp(JOBS[j], job) != 0)
			j++;
		while (o < OC_OTHER && strcmp(OC_NAMES[o], oc) != 0)
			o++;
		t->by[j][o]++;
		if (o == OC_SUCCEEDED)
			idset_add(&t->ok_ids, proc_field(l, "message_id"));
		else if (o == OC_LEASE_LOST)
			idset_add(&t->lost_ids, proc_field(l, "message_id"));
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

/* Prints what the poison queue holds (for a failure message). */
static void show_poison(struct mx *x)
{
	struct ecw_queue_msg *msgs = NULL;
	size_t n = 0;

	if (ecw_queue_peek(&msgs, &n, x->c, x->poison, 32) == 0) {
		for (size_t i = 0; i < n; i++)
			print_error("poison: %.600s\n", msgs[i].text);
		ecw_queue_msgs_free(msgs, n);
	}
}
/* ---- chaos ------------------------------------------------------------------------------------ */

static bool has_faults(const struct mixed_chaos *ch)
{
	return ch->p503 > 0 || ch->preset > 0 || ch->pstall > 0;
}

/* A port from text that must hold one (the proxy's ready file). */
static int port_at(const char *s, char **end)
{
	long v;

	errno = 0;
	v = strtol(s, end, 10);
	return errno == 0 && *end != s && v > 0 && v <= 65535 ? (int)v : -1;
}

/* Starts faultproxy in front of the private Azurite's queue and table ports
 * and points the workers' connection string at it. */
static void start_proxy(struct mx *x, unsigned seed)
{
	const struct mixed_chaos *ch = &x->sc->chaos;
	char name[96], file[128], map_q[48], map_t[48], p503[32], preset[32], pstall[32], stall[32], sd[32];
	char key[128] = "";
	int qport = -1, tport = -1;

	snprintf(name, sizeof(name), "%s-proxy", x->sc->name);
	snprintf(file, sizeof(file), "%s.json", name);
	proc_path(x->proxy_stats, sizeof(x->proxy_stats), file);
	snprintf(file, sizeof(file), "%s.ready", name);
	proc_path(x->proxy_ready, sizeof(x->proxy_ready), file);
	unlink(x->proxy_ready);
	snprintf(map_q, sizeof(map_q), "0:127.0.0.1:%d", x->az.queue_port);
	snprintf(map_t, sizeof(map_t), "0:127.0.0.1:%d", x->az.table_port);
	snprintf(p503, sizeof(p503), "%.4f", ch->p503);
	snprintf(preset, sizeof(preset), "%.4f", ch->preset);
	snprintf(pstall, sizeof(pstall), "%.4f", ch->pstall);
	snprintf(stall, sizeof(stall), "%d", ch->stall_ms ? ch->stall_ms : 60000);
	snprintf(sd, sizeof(sd), "%u", seed % 2147483647u);
	const char *args[] = {"--map",    map_q,  "--map",    map_t,  "--p503",       p503,
	                      "--preset", preset, "--pstall", pstall, "--stall-ms",   stall,
	                      "--seed",   sd,     "--stats",  x->proxy_stats, "--ready-file", x->proxy_ready,
	                      NULL};
	proc_start_program(&x->proxy, name, proc_tool_bin("faultproxy"), args, NULL);
	x->proxy_on = true;

	/* The ready file: one line per --map, "LISTEN_PORT TARGET", in order. */
	for (int64_t end = itest_now_ms() + 10000; qport < 0 || tport < 0;) {
		FILE *f = fopen(x->proxy_ready, "r");
		char a[128], b[128], *e;
		if (f) {
			if (fgets(a, sizeof(a), f) && fgets(b, sizeof(b), f)) {
				qport = port_at(a, &e);
				tport = port_at(b, &e);
			}
			fclose(f);
		}
		ITEST_CHECK(proc_alive(&x->proxy), "faultproxy exited (%d):\n%s", proc_exit_code(&x->proxy),
		            proc_tail(x->proxy.log_path, 20));
		ITEST_CHECK(itest_now_ms() < end, "faultproxy wrote no ready file %s in 10 s", x->proxy_ready);
		if (qport < 0 || tport < 0)
			itest_sleep_ms(20);
	}
	const char *k = strstr(x->connstr, "AccountKey=");
	ITEST_CHECK(k, "the private Azurite's connection string has no AccountKey");
	k += strlen("AccountKey=");
	snprintf(key, sizeof(key), "%.*s", (int)strcspn(k, ";"), k);
	snprintf(x->env_conn, sizeof(x->env_conn),
	         "ECW_TEST_CONNECTION_STRING=DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
	         "AccountKey=%s;QueueEndpoint=http://127.0.0.1:%d/devstoreaccount1;"
	         "TableEndpoint=http://127.0.0.1:%d/devstoreaccount1;",
	         key, qport, tport);
}

static long long stat_int(struct json_object *o, const char *key)
{
	struct json_object *v;
	return json_object_object_get_ex(o, key, &v) ? (long long)json_object_get_int64(v) : -1;
}

/* A running process's user + system CPU seconds (/proc/PID/stat), or -1. */
static double cpu_seconds(pid_t pid)
{
	char path[64], text[1024], *end;
	unsigned long long ticks = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	/* After "(comm)": state is field 3, utime and stime fields 14 and 15. */
	const char *p = strrchr(text, ')');
	for (int field = 2; p && field < 14; field++)
		p = strchr(p + 1, ' ');
	for (int k = 0; p && k < 2; k++) {
		errno = 0;
		unsigned long long v = strtoull(p + 1, &end, 10);
		if (errno || end == p + 1)
			return -1;
		ticks += v;
		p = end;
	}
	return p ? (double)ticks / (double)sysconf(_SC_CLK_TCK) : -1;
}

/* Stops the proxy (SIGTERM: it writes its stats and exits 0) and reads them. */
static void stop_proxy(struct mx *x, struct proxy_stats *ps)
{
	struct json_object *o, *f = NULL;

	ps->cpu_s = cpu_seconds(x->proxy.pid);
	proc_stop(&x->proxy, 10000);
	o = json_object_from_file(x->proxy_stats);
	ITEST_CHECK(o && json_object_object_get_ex(o, "faults", &f), "faultproxy left no stats in %s: %s",
	            x->proxy_stats, proc_tail(x->proxy.log_path, 10));
	ps->connections = stat_int(o, "connections");
	ps->requests = stat_int(o, "requests");
	ps->f503 = stat_int(f, "503");
	ps->reset_before = stat_int(f, "reset_before");
	ps->reset_after = stat_int(f, "reset_after");
	ps->stall = stat_int(f, "stall");
	json_object_put(o);
}

static long long scrape_retries(int port)
{
	char *page = NULL;
	long long n = 0;

	if (proc_http_get(&page, port, "/metrics") == 200)
		n = (long long)proc_metric(page, "ecw_storage_retries_total", NULL, NULL);
	free(page);
	return n;
}

/* Stops Azurite (SIGTERM, as a service manager does) with the producers held
 * between two operations, keeps it down, and starts it again on the same
 * ports and location. The workers are left alone: they must ride through. */
static void restart_azurite(struct mx *x, struct worker *w, struct producer *prods, struct chaos_state *cs)
{
	const struct mixed_scenario *sc = x->sc;
	int qp = x->az.queue_port, tp = x->az.table_port;
	char name[96];

	atomic_store(&x->pause, true);
	for (int64_t end = itest_now_ms() + 30000;;) {
		bool held = true;
		for (int k = 0; k < sc->producers; k++)
			held &= atomic_load(&prods[k].paused) || atomic_load(&prods[k].done);
		if (held)
			break;
		ITEST_CHECK(itest_now_ms() < end, "the producers did not pause within 30 s");
		itest_sleep_ms(10);
	}
	cs->count_at_stop = queue_count(x, x->queue);
	for (int k = 0; k < sc->workers; k++)
		cs->retries_before += scrape_retries(w[k].port);
	int64_t t_stop = itest_now_ms();
	cs->stop_ms = proc_azurite_terminate(&x->az, 60000);
	itest_sleep_ms(sc->chaos.down_ms);
	snprintf(name, sizeof(name), "%s-restarted", sc->name);
	struct proc_azurite_disk d = {x->az_dir, qp, tp};
	ITEST_CHECK(proc_azurite_start_on_disk(&x->az, name, &d), "no azurite script to restart");
	ITEST_CHECK(x->az.queue_port == qp && x->az.table_port == tp,
	            "Azurite came back on ports %d/%d, not %d/%d", x->az.queue_port, x->az.table_port, qp, tp);
	cs->outage_ms = (long)(itest_now_ms() - t_stop);
	cs->restarted = true;
	atomic_store(&x->pause, false);
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
		bool killing = ch->kill_every_ms > 0 && (!done || now - t_workers < (int64_t)ch->kill_for_s * 1000);
		if (done && !killing && (!ch->azurite_restart || cs->restarted))
			return;
		check_workers(x, w);
		if (ch->azurite_restart && !cs->restarted && now - t_workers >= ch->restart_at_ms)
			restart_azurite(x, w, prods, cs);
		if (killing && now >= next_kill) {
			struct worker *v = &w[rand_r(&r) % (unsigned)sc->workers];
			tally_metrics(t, v->port);
			proc_signal(&v->p, SIGKILL);
			ITEST_CHECK(proc_wait(&v->p, 10000), "worker %s survived SIGKILL for 10 s", v->p.name);
			spawn_worker(x, v, true);
			cs->kills++;
			next_kill = now + ch->kill_every_ms;
		}
		itest_sleep_ms(10);
	}
}

/* The poison queue as the operator's `poison list --json` shows it. */
struct poison_seen {
	struct idset ids; /* the job-queue message id of each envelope */
	long long n, max_dequeue, permanent;
};

static void list_poison(struct mx *x, const struct worker *w, struct poison_seen *ps)
{
	char name[96], *out = NULL, *err = NULL;
	const char *args[] = {"poison", "list", "-c", w->cfg, "--json", NULL};
	const char *env[] = {x->env_direct, "ECW_TEST_METRICS_PORT=0", NULL};

	snprintf(name, sizeof(name), "%s-poison-list", x->sc->name);
	int rc = proc_run(&out, &err, name, args, env, 120000);
	ITEST_CHECK(rc == 0, "poison list exited with %d:\n%s", rc, err);
	for (char *line = out, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (!*line)
			continue;
		struct json_object *o = json_tokener_parse(line), *env_flag = NULL;
		ITEST_CHECK(o, "poison list printed a line that is not JSON: %.300s", line);
		ITEST_CHECK(!json_object_object_get_ex(o, "envelope", &env_flag) || json_object_get_boolean(env_flag),
		            "a poison message that is not a worker's envelope: %.600s", line);
		const char *reason = proc_field(o, "reason"), *error = proc_field(o, "error");
		bool md = strcmp(reason, "max-dequeue") == 0, perm = strcmp(reason, "permanent") == 0;
		ITEST_CHECK((md || perm) && *error, "a poison envelope without a reason and an error: %.600s",
		            line);
		ps->n++;
		ps->max_dequeue += md;
		ps->permanent += perm;
		idset_add(&ps->ids, proc_field(o, "message_id"));
		json_object_put(o);
	}
	free(out);
	free(err);
}

/* `poison replay`: the operator's way back. Returns how many it replayed. */
static long long replay_poison(struct mx *x, const struct worker *w)
{
	char name[96], *out = NULL, *err = NULL, *end;
	const char *args[] = {"poison", "replay", "-c", w->cfg, NULL};
	const char *env[] = {x->env_direct, "ECW_TEST_METRICS_PORT=0", NULL};
	long long n = -1;

	snprintf(name, sizeof(name), "%s-poison-replay", x->sc->name);
	int rc = proc_run(&out, &err, name, args, env, 300000);
	ITEST_CHECK(rc == 0, "poison replay exited with %d:\n%s\n%s", rc, out, err);
	const char *p = strstr(out, "selected, ");
	if (p) {
		errno = 0;
		n = strtoll(p + strlen("selected, "), &end, 10);
		if (errno || end == p + strlen("selected, ") || strncmp(end, " replayed", 9) != 0)
			n = -1;
	}
	ITEST_CHECK(n >= 0, "poison replay printed no summary: %s", out);
	free(out);
	free(err);
	return n;
}

/* Every message the producers put, accounted for. What can honestly be
 * asserted: the job queue is empty at the end and the poison queue was
 * snapshotted before the replay, and a message leaves the job queue only by
 * a worker's delete, after its job succeeded or after its envelope is on the
 * poison queue (README: outcome rules). So each message is
 * - succeeded: a worker logged "succeeded" for its id;
 * - poisoned: an envelope for its id was on the poison queue, with a reason;
 * - lease-lost: a worker ran it and logged "lease-lost" for its id, but no
 *   one logged its success: the delete reached the service and its answer
 *   was lost (a reset after the service did the work), the retried delete
 *   found it gone (404);
 * - unlogged: no worker logged a success or a lost lease. A SIGKILL can fall
 *   between the service's delete and the worker's log line; the message
 *   is gone from the queue, so (by the rule above) its job succeeded. Only a
 *   killed worker can do this, holding at most `concurrency` jobs, so there
 *   are at most kills x concurrency of them, and none without kills.
 * The recomputation of the derived tables then judges what the jobs did. */
struct account {
	long long succeeded, poisoned, lease_lost, unlogged;
	char first_unlogged[64];
};

static void account_messages(struct mx *x, struct tally *t, struct poison_seen *ps, struct account *a)
{
	memset(a, 0, sizeof(*a));
	for (size_t i = 0; i < x->put_ids.n; i++) {
		const char *id = x->put_ids.v[i];
		if (idset_has(&t->ok_ids, id))
			a->succeeded++;
		else if (idset_has(&ps->ids, id))
			a->poisoned++;
		else if (idset_has(&t->lost_ids, id))
			a->lease_lost++;
		else if (!a->unlogged++)
			snprintf(a->first_unlogged, sizeof(a->first_unlogged), "%s", id);

	}
}

/* ---- the run ------------------------------------------------------------------------------------ */

/* The calm run's verdict on the outcomes: nothing poisoned, nothing left,
 * every message put (and every follow-up) ended in a success. */
static void judge_calm(struct mx *x, struct tally *t, long long succeeded, long long poisoned, long long other,
                       int puts)
{
	const struct mixed_scenario *sc = x->sc;
	long long left = queue_count(x, x->queue), in_poison = queue_count(x, x->poison);

	if (in_poison)
		show_poison(x);
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

/* The chaos run's verdict: the chaos happened (each kind of fault asked for
 * was injected at least once, so the run cannot pass vacuously), both queues
 * are empty after the replay, and every message put is accounted for. */
static void judge_chaos(struct mx *x, struct tally *t, const struct chaos_state *cs, struct poison_seen *ps,
                        const struct account *a, long long replayed)
{
	const struct mixed_scenario *sc = x->sc;
	const struct mixed_chaos *ch = &sc->chaos;
	long long left = queue_count(x, x->queue), in_poison = queue_count(x, x->poison);

	if (ch->kill_every_ms)
		ITEST_CHECK(cs->kills > 0, "no worker was killed");
	if (ch->p503 > 0)
		ITEST_CHECK(cs->ps.f503 > 0, "the proxy answered no request with 503");
	if (ch->preset > 0)
		ITEST_CHECK(cs->ps.reset_before > 0 && cs->ps.reset_after > 0,
		            "the proxy reset %lld connection(s) before and %lld after forwarding: both must happen",
		            cs->ps.reset_before, cs->ps.reset_after);
	if (ch->pstall > 0)
		ITEST_CHECK(cs->ps.stall > 0, "the proxy stalled no request");
	if (ch->azurite_restart) {
		ITEST_CHECK(cs->restarted, "Azurite was never restarted");
		ITEST_CHECK(cs->count_at_stop > 0, "the queue was empty when Azurite stopped: nothing rode through");
		ITEST_CHECK(t->retries - cs->retries_before + t->storage_errors > 0,
		            "the workers saw neither a retry nor a storage error while Azurite was down");
	}
	if (in_poison)
		show_poison(x);
	ITEST_CHECK(in_poison == 0, "%lld message(s) on the poison queue after the replay and the drain", in_poison);
	ITEST_CHECK(left == 0, "%lld message(s) left on the queue after the workers stopped", left);
	ITEST_CHECK(replayed == ps->n, "poison list showed %lld envelope(s), replay replayed %lld", ps->n,
	            replayed);
	ITEST_CHECK(a->unlogged <= (long long)cs->kills * sc->concurrency,
	            "%lld message(s) put (first %s) left the queue without a success, a lost lease or an envelope "
	            "in any log, more than %d kills x %d jobs could hide",
	            a->unlogged, a->first_unlogged, cs->kills, sc->concurrency);
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
	seed_data(x);
	make_plan(x, prods, seed);
	if (has_faults(ch))
		start_proxy(x, seed);

	int64_t t0 = itest_now_ms();
	for (int k = 0; k < sc->producers; k++) {
		struct producer *p = &prods[k];
		p->x = x;
		p->id = k + 1;
		p->seed = seed * 7919u + (unsigned)k;
		ECW_ASSERT_OK(ecw_client_new(&p->c, x->acct, &APP_OPTIONS)); /* one per thread */
	}
	for (int k = 0; k < sc->producers; k++)
		assert_int_equal(pthread_create(&prods[k].tid, NULL, producer_main, &prods[k]), 0);
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
		list_poison(x, &w[0], &ps);
		t_replay = itest_now_ms();
		if (ps.n) {
			replayed = replay_poison(x, &w[0]);
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
		stop_proxy(x, &cs.ps);

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
			    j < NJOBS ? JOBS[j] : "(undecodable/unknown)", t.by[j][OC_SUCCEEDED],
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
		account_messages(x, &t, &ps, &acc);
		if (ch->kill_every_ms)
			print_message("  chaos: %d kills (every %d ms for %.1f s, each worker restarted at once)\n",
			              cs.kills, ch->kill_every_ms, (double)(t_calm - t_workers) / 1000.0);
		if (x->proxy_on)
			print_message("  faults injected by the proxy: %lld x 503, %lld resets before and %lld after "
			              "forwarding, %lld stalls (request timeout %d ms), in %lld requests on %lld "
			              "connections; the proxy used %.2f s of CPU\n",
			              cs.ps.f503, cs.ps.reset_before, cs.ps.reset_after, cs.ps.stall,
			              ch->request_timeout_ms, cs.ps.requests, cs.ps.connections, cs.ps.cpu_s);
		if (ch->azurite_restart)
			print_message("  Azurite restart: stopped (SIGTERM, %ld ms to exit) with %lld message(s) "
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
		              ps.n, ps.max_dequeue, ps.permanent, replayed, (double)(t_drained - t_calm) / 1000.0,
		              (double)(t_replay_drained - t_replay) / 1000.0);
		print_message("  every message put: %lld succeeded, %lld poisoned (replayed), %lld lease-lost "
		              "(answer lost), %lld unlogged (deleted as their worker was killed)%s%s\n",
		              acc.succeeded, acc.poisoned, acc.lease_lost, acc.unlogged,
		              acc.unlogged ? ", e.g. " : "", acc.first_unlogged);
		judge_chaos(x, &t, &cs, &ps, &acc, replayed);
	} else {
		judge_calm(x, &t, succeeded, poisoned, other, puts);
	}

	/* The end state is the recomputation from the sources. */
	check_end_state(x, &s);
	print_message("%s: end state = recomputation: %zu employees, %zu archived, %zu index entities, %zu "
	              "customers (%d deleted), %zu orders\n",
	              sc->name, s.nemp, s.narch, s.nidx, s.ncust, sc->customers - (int)s.ncust, s.norders);
	state_free(&s);

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
