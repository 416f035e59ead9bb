/* SPDX-License-Identifier: MIT */
/* index_list_combine.c - coalesced writes of a hot index list: within one
 * worker, the changes runs make to the same list while a write of it is in
 * flight go to storage together, in one read-modify-write, instead of each
 * run reading and writing the list and losing races (412) to the others.
 *
 * How: a combiner per list (table, lpk, lrk), in a bounded map the job's
 * settings own, entries removed when idle. A run hands its change in and
 * waits. The first to arrive leads: it takes what is queued (at most
 * BATCH_MAX changes), loads the list once, applies every change in queue
 * order, saves once, conditionally (ecw_index_list_store_save); after a lost race
 * (412/409/404) it backs off with jitter, reloads and reapplies, up to
 * MAX_CAS times. Then it answers each run and hands the lead to the first
 * run queued meanwhile, which takes the next batch. Each run's answer is its
 * own: a run whose lease is lost is dropped before the save; an add that
 * would make the list too large (ecw_index_list_store_check) fails that run only; an
 * add whose run has not written its intent yet is not applied (the answer
 * says so, unless the key is there already: the run writes its intent and
 * comes back); when the store says the change set is too big for one
 * transaction (save returns 1), fewer changes go at once. Answers are final
 * only once the save they were decided against succeeded: after a lost race
 * every decision is made again on the new version.
 *
 * Why every guarantee index_list.c states still holds: a combined write is
 * the writes of its members done one after another on the same version, in
 * queue order, with no one else's write in between (the save is conditional
 * on the version loaded). Each member's change is exactly the change its own
 * read-modify-write would have made to the version the one before it left,
 * and each member is told of its change only after the one atomic request
 * holding it succeeded, so:
 *   - crash safety: each add's run wrote its intent before handing its key
 *     in (the leader applies no add without it), and each run passes its
 *     crash point (index_list.added / .removed) only after the save holding
 *     its change succeeded, and returns (so its message can be deleted) only
 *     then. A crash right after a combined save leaves what a crash after
 *     each member's own save would: the keys written, their intents in the
 *     refs, every message back; each rerun finds its key in place.
 *   - stale runs: a run's change is the same add or remove of its key it
 *     would make alone; its round still ends with its own check of the
 *     source (step 6), and its lists are still named by its ref.
 *   - competing workers: the save is conditional on the version loaded, so a
 *     write of another worker in between is a lost race, and every member's
 *     change is reapplied to the new version: no edit is lost.
 *   - abandon: it acts on refs only; combining changes only how list writes
 *     are grouped. A run whose lease is lost is dropped from the batch before
 *     the save (checked per member), as it would have stopped before its own.
 *
 * A test build may die at crash point index_list.combined, right after a
 * save holding the changes of several runs, before any of them is told.
 *
 * Bounds: at most COMBINERS_MAX lists with changes in flight per job (past
 * that, a run writes alone, as before), BATCH_MAX changes per save, MAX_CAS
 * attempts per batch; a waiting run whose change is not taken yet leaves when
 * its worker is stopping or its lease is lost; one whose change is taken
 * waits for the leader, whose storage calls the client's timeouts bound. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_clock.h"
#include "ecw_job.h"
#include "index_list_combine_private.h"
#include "jobs_private.h"

#define BATCH_MAX 64
#define COMBINERS_MAX 1024
#define BUCKETS 256
#define MAX_CAS 10
#define WAIT_SLICE_MS 50

const struct il_store ecw_index_list_combine_store = {
	.load = ecw_index_list_store_load,
	.save = ecw_index_list_store_save,
	.check = ecw_index_list_store_check,
};

/* ---- one run in a combiner ------------------------------------------------------------ */

enum member_state { QUEUED, TAKEN, LEAD, DONE };

/* What the leader decided for a member against the version it loaded. */
enum decision { OPEN, APPLIED, KEEP, NEEDS_INTENT, FAILED };

/* A run waiting in (or leading) a combiner; it lives on the run's stack. */
struct member {
	struct il_change *ch;
	struct member *next;
	enum member_state state; /* under the map's mutex */
	pthread_cond_t wake;
	/* the leader's, until state is DONE */
	enum decision dec;
	bool answered;
	int err;
	struct ecw_error error; /* FAILED: the leader's last error, storage answer included */
};

static void member_fail(struct member *m, int err)
{
	m->dec = FAILED;
	m->err = err;
	m->error = *ecw_error_last();
}

/* ---- the leader's work ---------------------------------------------------------------- */

struct batch {
	const struct il_store *store;
	struct ecw_client *client; /* the leader's */
	const char *table, *lpk, *lrk;
	struct member **m;
	size_t n;
	int conflicts;
};

/* Decides member m against keys (the version loaded plus the changes of the
 * members before it), applying its change when it may; checked says whether
 * an add is checked to fit on its own. */
static int decide(struct tuples *keys, size_t *changes, const struct batch *b, const struct il_list *list,
		  struct member *m, size_t limit, bool checked)
{
	struct il_change *ch = m->ch;
	size_t pos;
	bool found;
	int err;

	if ((err = ecw_job_check_lease(ch->ctx)) < 0) {
		member_fail(m, err);
		return 0;
	}
	found = ecw_index_list_tuples_find(keys, ch->key, &pos);
	if (found == ch->add) {
		m->dec = KEEP;
		return 0;
	}
	if (ch->add && !ch->intent) {
		m->dec = NEEDS_INTENT;
		return 0;
	}
	if (*changes >= limit)
		return 0; /* the next save's */
	if (!ch->add) {
		ecw_index_list_tuples_remove_at(keys, pos);
	} else {
		if ((err = ecw_index_list_tuples_add(keys, ch->key)) < 0)
			return err;
		if (checked && (err = b->store->check(list, keys)) == ECW_ETOOLARGE) {
			ecw_index_list_tuples_remove_at(keys, pos);
			member_fail(m, err);
			return 0;
		}
		if (err < 0)
			return err;
	}
	m->dec = APPLIED;
	(*changes)++;
	return 0;
}

/* The members' changes on the version loaded, in queue order, at most limit
 * of them: keys (initialised here) is the list to save. Adds are checked to
 * fit together first, one by one only when together they do not. */
static int apply(struct tuples *keys, size_t *changes, const struct batch *b, const struct il_list *list,
		 size_t limit)
{
	int err = 0;

	for (int pass = 0; pass < 2; pass++) {
		ecw_index_list_tuples_init(keys, 2);
		*changes = 0;
		for (size_t i = 0; err == 0 && i < list->keys.n; i++)
			err = ecw_index_list_tuples_add(keys, (const char *const *)list->keys.v[i].s);
		for (size_t i = 0; i < b->n; i++)
			if (!b->m[i]->answered)
				b->m[i]->dec = OPEN;
		for (size_t i = 0; err == 0 && i < b->n; i++)
			if (!b->m[i]->answered)
				err = decide(keys, changes, b, list, b->m[i], limit, pass == 1);
		if (err == 0 && pass == 0 && (err = b->store->check(list, keys)) == ECW_ETOOLARGE) {
			ecw_error_clear();
			err = 0;
			ecw_index_list_tuples_dispose(keys);
			continue;
		}
		if (err == ECW_IL_TOO_MANY_CHANGES)
			err = 0; /* they fit the list, not one transaction: save says so, and fewer go */
		break;
	}
	if (err < 0)
		ecw_index_list_tuples_dispose(keys);
	return err;
}

/* After a save that succeeded (or nothing to save): the decisions stand. */
static size_t answer_decided(struct batch *b)
{
	size_t answered = 0;

	for (size_t i = 0; i < b->n; i++) {
		struct member *m = b->m[i];
		if (m->answered || m->dec == OPEN)
			continue;
		m->ch->result = m->dec == APPLIED        ? IL_CHANGED
				: m->dec == NEEDS_INTENT ? IL_NEED_INTENT
							 : IL_UNCHANGED;
		m->answered = true;
		answered++;
	}
	return answered;
}

/* Fails the members without an answer (only those whose change was applied)
 * with err, the error of this thread. */
static size_t answer_failed(struct batch *b, int err, bool only_applied)
{
	size_t answered = 0;

	for (size_t i = 0; i < b->n; i++)
		if (!b->m[i]->answered && (!only_applied || b->m[i]->dec == APPLIED)) {
			member_fail(b->m[i], err);
			b->m[i]->answered = true;
			answered++;
		}
	return answered;
}

static bool lost_race(int err)
{
	return err == ECW_EPRECONDITION || err == ECW_ECONFLICT || err == ECW_ENOTFOUND;
}

/* One save of what apply made: 0 done, 1 too many changes at once, a lost
 * race, or an error. */
static int save(struct batch *b, const struct il_list *list, const struct tuples *keys, size_t changes)
{
	int err = b->store->save(b->client, b->table, list, keys);

	if (err == ECW_ETOOLARGE && changes > 1)
		err = 1; /* the check let them in: the transaction is what is too big */
	if (err == 1 && changes == 1)
		err = ecw_error_set(ECW_ETOOLARGE, "%.100s/%.100s: one change is too big for one transaction",
				    b->lpk, b->lrk);
	if (err == 1)
		ecw_error_clear();
	return err;
}

/* The leader's loop: load, apply, save until every member has its answer. */
static void lead(struct batch *b)
{
	size_t limit = b->n, open = b->n;
	int attempt = 0, err = 0;

	while (open > 0 && err == 0) {
		struct il_list list;
		struct tuples keys;
		size_t changes;

		if (attempt == MAX_CAS) {
			err = ecw_error_set(ECW_ETRANSIENT,
					    "list %s/%.100s/%.100s changed under us %d times in a row",
					    b->table, b->lpk, b->lrk, MAX_CAS);
			break;
		}
		if (attempt)
			ecw_index_list_backoff(attempt);
		if ((err = b->store->load(&list, b->client, b->table, b->lpk, b->lrk)) < 0)
			break;
		if ((err = apply(&keys, &changes, b, &list, limit)) == 0) {
			err = changes ? save(b, &list, &keys, changes) : 0;
			ecw_index_list_tuples_dispose(&keys);
		}
		ecw_index_list_store_dispose(&list);
		if (err == 0) {
			if (changes > 1)
				ecw_crash_point("index_list.combined"); /* before any member is told */
			open -= answer_decided(b);
			attempt = 0;
		} else if (err == 1) {
			limit = changes / 2;
			err = 0;
		} else if (lost_race(err)) {
			ecw_error_clear();
			b->conflicts++;
			attempt++;
			err = 0;
		} else if (err == ECW_ETOOLARGE) { /* one change, too big on its own: its failure */
			open -= answer_failed(b, err, true);
			err = 0;
		}
	}
	if (err < 0)
		answer_failed(b, err, false);
	ecw_error_clear(); /* each member's error is in its answer */
}

/* ---- the map of combiners ------------------------------------------------------------- */

/* The changes in flight to one list. */
struct combiner {
	char *table, *lpk, *lrk;
	struct member *head, *tail; /* queued, in arrival order */
	bool busy;                  /* a leader is at work */
	struct combiner *next;      /* in its bucket */
};

struct il_combiners {
	pthread_mutex_t mu;
	const struct il_store *store;
	struct combiner *bucket[BUCKETS];
	size_t n;
};

int ecw_index_list_combiners_new(struct il_combiners **out, const struct il_store *store)
{
	struct il_combiners *cs = calloc(1, sizeof(*cs));

	*out = NULL;
	if (!cs)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	if (pthread_mutex_init(&cs->mu, NULL) != 0) {
		free(cs);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	cs->store = store;
	*out = cs;
	return 0;
}

static void combiner_free(struct combiner *c)
{
	free(c->table);
	free(c->lpk);
	free(c->lrk);
	free(c);
}

void ecw_index_list_combiners_free(struct il_combiners *cs)
{
	if (!cs)
		return;
	for (size_t i = 0; i < BUCKETS; i++)
		while (cs->bucket[i]) {
			struct combiner *c = cs->bucket[i];
			cs->bucket[i] = c->next;
			combiner_free(c);
		}
	pthread_mutex_destroy(&cs->mu);
	free(cs);
}

size_t ecw_index_list_combiners_size(struct il_combiners *cs)
{
	size_t n;

	pthread_mutex_lock(&cs->mu);
	n = cs->n;
	pthread_mutex_unlock(&cs->mu);
	return n;
}

static size_t bucket_of(const char *table, const char *lpk, const char *lrk)
{
	const char *parts[3] = {table, lpk, lrk};
	uint32_t h = 2166136261u; /* FNV-1a over the three keys and their NULs */

	for (int k = 0; k < 3; k++)
		for (const char *p = parts[k];; p++) {
			h = (h ^ (unsigned char)*p) * 16777619u;
			if (!*p)
				break;
		}
	return h % BUCKETS;
}

/* The combiner of ch's list, made when absent; *out NULL when the map is
 * full. Under cs->mu. */
static int combiner_get(struct combiner **out, struct il_combiners *cs, const struct il_change *ch)
{
	size_t b = bucket_of(ch->table, ch->lpk, ch->lrk);
	struct combiner *c;

	for (c = cs->bucket[b]; c; c = c->next)
		if (strcmp(c->table, ch->table) == 0 && strcmp(c->lpk, ch->lpk) == 0 &&
		    strcmp(c->lrk, ch->lrk) == 0)
			break;
	*out = c;
	if (c || cs->n >= COMBINERS_MAX)
		return 0;
	if (!(c = calloc(1, sizeof(*c))) || !(c->table = strdup(ch->table)) || !(c->lpk = strdup(ch->lpk)) ||
	    !(c->lrk = strdup(ch->lrk))) {
		if (c)
			combiner_free(c);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	c->next = cs->bucket[b];
	cs->bucket[b] = c;
	cs->n++;
	*out = c;
	return 0;
}

/* Removes c, idle, from the map. Under cs->mu. */
static void combiner_remove(struct il_combiners *cs, struct combiner *c)
{
	struct combiner **pp = &cs->bucket[bucket_of(c->table, c->lpk, c->lrk)];

	while (*pp != c)
		pp = &(*pp)->next;
	*pp = c->next;
	cs->n--;
	combiner_free(c);
}

static void enqueue(struct combiner *c, struct member *m)
{
	m->state = QUEUED;
	if (c->tail)
		c->tail->next = m;
	else
		c->head = m;
	c->tail = m;
}

static void unlink_member(struct combiner *c, struct member *m)
{
	struct member **pp = &c->head, *prev = NULL;

	while (*pp != m) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	*pp = m->next;
	if (c->tail == m)
		c->tail = prev;
	m->next = NULL;
}

/* Takes up to BATCH_MAX queued members, from the head, into b. */
static void take(struct batch *b, struct combiner *c)
{
	while (c->head && b->n < BATCH_MAX) {
		struct member *m = c->head;
		c->head = m->next;
		m->next = NULL;
		m->state = TAKEN;
		b->m[b->n++] = m;
	}
	if (!c->head)
		c->tail = NULL;
}

/* Whether a run whose change is queued may keep waiting. */
static int may_wait(const struct il_change *ch)
{
	if (ch->ctx->stopping && atomic_load(ch->ctx->stopping))
		return ecw_error_set(ECW_ECANCELED, "stopping: list %s/%.100s/%.100s not changed", ch->table,
				     ch->lpk, ch->lrk);
	return ecw_job_check_lease(ch->ctx);
}

static void wait_slice(struct member *m, pthread_mutex_t *mu)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += WAIT_SLICE_MS * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	(void)pthread_cond_timedwait(&m->wake, mu, &until);
}

/* Leads the batch of m's combiner c (m at its head): takes it, works
 * unlocked, answers, hands the lead on or retires c. Under cs->mu. */
static void lead_combiner(struct il_combiners *cs, struct combiner *c, struct member *m)
{
	struct member *taken[BATCH_MAX];
	struct batch b = {cs->store, m->ch->ctx->client, c->table, c->lpk, c->lrk, taken, 0, 0};

	take(&b, c);
	pthread_mutex_unlock(&cs->mu);
	lead(&b);
	pthread_mutex_lock(&cs->mu);
	m->ch->conflicts = b.conflicts;
	for (size_t i = 0; i < b.n; i++) {
		taken[i]->state = DONE;
		if (taken[i] != m)
			pthread_cond_signal(&taken[i]->wake);
	}
	if (c->head) {
		c->head->state = LEAD;
		pthread_cond_signal(&c->head->wake);
	} else {
		c->busy = false;
		combiner_remove(cs, c);
	}
}

/* Waits in c until m's answer is in (or m leads, or leaves). Under cs->mu. */
static void wait_turn(struct il_combiners *cs, struct combiner *c, struct member *m)
{
	int err;

	while (m->state == QUEUED || m->state == TAKEN) {
		wait_slice(m, &cs->mu);
		if (m->state == QUEUED && (err = may_wait(m->ch)) < 0) {
			unlink_member(c, m);
			member_fail(m, err);
			m->state = DONE;
		}
	}
	if (m->state == LEAD)
		lead_combiner(cs, c, m);
}

/* Alone: no combiner (none given, or the map is full). */
static void lead_alone(const struct il_store *store, struct member *m)
{
	struct member *one[1] = {m};
	struct batch b = {store, m->ch->ctx->client, m->ch->table, m->ch->lpk, m->ch->lrk, one, 1, 0};

	lead(&b);
	m->ch->conflicts = b.conflicts;
}

int ecw_index_list_combine(struct il_combiners *cs, struct il_change *ch)
{
	struct member m;
	pthread_condattr_t attr;
	struct combiner *c = NULL;
	int err = 0;

	memset(&m, 0, sizeof(m));
	m.ch = ch;
	ch->conflicts = 0;
	ch->result = IL_UNCHANGED;
	if (!cs) {
		lead_alone(&ecw_index_list_combine_store, &m);
		goto answer;
	}
	if (pthread_condattr_init(&attr) != 0)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) || pthread_cond_init(&m.wake, &attr);
	pthread_condattr_destroy(&attr);
	if (err)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	pthread_mutex_lock(&cs->mu);
	if ((err = combiner_get(&c, cs, ch)) == 0 && c) {
		enqueue(c, &m);
		if (!c->busy) {
			c->busy = true;
			m.state = LEAD;
		}
		wait_turn(cs, c, &m);
	}
	pthread_mutex_unlock(&cs->mu);
	pthread_cond_destroy(&m.wake);
	if (err < 0)
		return err;
	if (!c)
		lead_alone(cs->store, &m);
answer:
	if (m.dec == FAILED)
		return ecw_error_set_http(m.err, m.error.http_status, m.error.service_code,
					  m.error.request_id, "%s", m.error.message);
	return 0;
}

void ecw_index_list_backoff(int attempt)
{
	uint32_t span = 10u << (attempt < 5 ? attempt : 5);
	ecw_clock_sleep_ms(1 + (int64_t)(ecw_clock_random_u32() % span));
}
