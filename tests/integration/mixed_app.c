/* SPDX-License-Identifier: MIT */
/* mixed_app.c - the application of the mixed-workload scenario (mixed.c runs it; mixed_private.h): the
 * seed data, the plan, and the producer threads that carry it out. They change employees (LastName moves
 * between the same four lists, e-mail changes, both, and e-mail handovers where B takes the address A just
 * gave up) and customers (renames, a dropped Email, deletions, re-creations) with ordinary conditional
 * writes and enqueue the matching messages, sometimes in the wrong order, duplicated, delayed,
 * base64-encoded, or re-sent long after (stale); they also archive and restore employees by enqueueing
 * the move jobs, whose chained follow-ups fix the indexes. Every message put is recorded (its id, for a
 * chaos run's account; its text, for stale re-sends); what the producers changed is not: the judge reads
 * the source tables. */
#include "itest.h"
#include "mixed_private.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message.h"

/* Hostile keys and values: quotes, '&', '%', '+', spaces, non-ASCII. */
const char *const MX_LAST_NAMES[4] = {"Jones", "O'Neil", "Zo\xc3\xab-Smith", "van der Berg"};
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

/* ---- the producers ---------------------------------------------------------------------- */

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
	case OP_BACKFILL_EMP: return 2;
	case OP_LASTNAME:
	case OP_BOTH: return o->variant == 5 || o->variant == 6 ? 3 : 2;
	case OP_EMAIL: return o->variant < 4 ? 1 : 2;
	case OP_HANDOVER: return 2;
	case OP_CUST_CHANGE: return o->variant == 7 ? 2 : 1;
	default: return 1;
	}
}

static int prand(struct producer *p, int n)
{
	return (int)(rand_r(&p->seed) % (unsigned)n);
}

/* Records the first failure of a thread (cmocka may not fail off the test's thread). */
static int pfail(struct producer *p, const char *what, int err)
{
	if (!p->failed++)
		snprintf(p->error, sizeof(p->error), "producer %d: %s: %s (%d): %s", p->id, what,
		         ecw_error_name(err), err, itest_last_error());
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
	mx_idset_add(&x->put_ids, put.id);
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
			snprintf(old_email, cap, "%s", mx_strp(e, "Email") ? mx_strp(e, "Email") : "");
		if (what & 1) {
			const char *cur = mx_strp(e, "LastName");
			do
				last = MX_LAST_NAMES[prand(p, 4)];
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
	case OP_BACKFILL_CUST: return put_msg(p, J_ORDERS, CUST_PK, CUST_RK[i]);
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

void *mx_producer_main(void *arg)
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
void mx_make_plan(struct mx *x, struct producer *prods, unsigned seed)
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

void mx_seed_data(struct mx *x)
{
	const struct mixed_scenario *sc = x->sc;

	for (int i = 0; i < sc->employees; i++) {
		struct ecw_entity *e = NULL;
		char email[128];
		const char *first = FIRST_NAMES[i % 4], *last = MX_LAST_NAMES[(i / 2) % 4];
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
