/* SPDX-License-Identifier: MIT */
/* shared_reads.c - single-entity reads of one worker's runs, served together
 * when they meet: while a read of a partition is in flight, the reads of that
 * table and partition that other runs ask for wait, and the first of them to
 * find the partition free again takes them all (up to
 * ECW_TABLE_GET_MANY_KEYS, and KEY_BYTES_MAX of RowKeys, so that a query's
 * address stays short) and sends one query for them (ecw_table_get_many):
 * one request instead of one each. A read that meets no other goes alone, as
 * a plain GET, at once: sharing never delays a read behind a timer, only
 * behind a request already in flight, which it would have shared the
 * connection pool with anyway.
 *
 * Why a shared read is as good as the caller's own GET: a read is taken into
 * a query only after it was queued, and the query is sent after it was
 * taken, so the state it returns is one that existed between the caller's
 * call and its return, with each entity's ETag as a GET gives it (a query
 * returns the same ETag: AZURE-NOTES.md). A caller that needs to see its own
 * earlier write (index-list's check of its source after its commit) sees it.
 * An answer is handed on only when it is an entity or a sure absence (the
 * query succeeded and did not hold the key); when the query fails, or a
 * single GET made for another thread fails, each of its readers sends its
 * own GET, so every error is the caller's own, with its own message (errors
 * are per thread: ecw_error_last).
 *
 * Reads ahead: a run that knows the messages waiting behind it for the
 * same partition (ecw_job_ctx peers) reads their entities with its own, in
 * one query, and the answers are kept (KEPT_MAX, KEPT_TTL_MS) for the first
 * read of each (ecw_shared_reads_kept), which then costs no request. A kept
 * answer is older than its reader's call: it is only for a read whose
 * result a later read of the same entity confirms (see the header).
 *
 * Bounds: at most PARTS_MAX partitions shared at a time per set (past that
 * a read goes alone); a query holds at most ECW_TABLE_GET_MANY_KEYS keys; a
 * waiting reader waits only for a request in flight (the client's timeouts
 * bound it) and then either has its answer or sends the next query itself. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_clock.h"
#include "ecw_storage.h"
#include "shared_reads_private.h"

#define PARTS_MAX 256
#define KEPT_MAX 256       /* answers read ahead, kept per set */
#define KEPT_TTL_MS 3000   /* a kept answer older than this is not handed over */
#define KEY_BYTES_MAX 4096 /* RowKey bytes one query names (one key may pass it alone) */

enum read_state {
	READ_WAITING, /* queued */
	READ_TAKEN,   /* in a query in flight */
	READ_GOT,     /* answered: got, or absent when got is NULL */
	READ_ALONE,   /* the shared read failed: the reader sends its own GET */
};

struct read {
	const char *rk;
	enum read_state state;
	struct ecw_entity *got;
	struct read *next;
};

/* The reads of one (table, pk): waiting in FIFO order; busy while a query
 * or GET for it is in flight; freed when its last reader leaves. */
struct part {
	char *table, *pk;
	struct read *head, *tail;
	bool busy;
	size_t readers;
	struct part *next;
};

/* An answer read ahead, newest first in the set's list. */
struct kept {
	char *table, *pk, *rk;
	struct ecw_entity *e; /* NULL: did not exist */
	int64_t at_ms;
	struct kept *next;
};

struct ecw_shared_reads {
	pthread_mutex_t mu;
	pthread_cond_t changed; /* a query ended: answers, or a free partition */
	const struct shared_reads_store *store;
	struct part *parts;
	size_t nparts;
	struct kept *kept;
	size_t nkept;
};

const struct shared_reads_store ecw_shared_reads_storage = {ecw_table_get, ecw_table_get_many};

int ecw_shared_reads_new(struct ecw_shared_reads **out, const struct shared_reads_store *store)
{
	struct ecw_shared_reads *sr = calloc(1, sizeof(*sr));

	*out = NULL;
	if (!sr)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	pthread_mutex_init(&sr->mu, NULL);
	pthread_cond_init(&sr->changed, NULL);
	sr->store = store;
	*out = sr;
	return 0;
}

static void part_free(struct part *p)
{
	free(p->table);
	free(p->pk);
	free(p);
}

static void kept_free(struct kept *k)
{
	free(k->table);
	free(k->pk);
	free(k->rk);
	ecw_entity_free(k->e);
	free(k);
}

void ecw_shared_reads_free(struct ecw_shared_reads *sr)
{
	if (!sr)
		return;
	for (struct kept *k = sr->kept, *next; k; k = next) {
		next = k->next;
		kept_free(k);
	}
	for (struct part *p = sr->parts, *next; p; p = next) {
		next = p->next;
		part_free(p);
	}
	pthread_cond_destroy(&sr->changed);
	pthread_mutex_destroy(&sr->mu);
	free(sr);
}

size_t ecw_shared_reads_waiting(struct ecw_shared_reads *sr, size_t *parts)
{
	size_t n = 0;

	pthread_mutex_lock(&sr->mu);
	for (const struct part *p = sr->parts; p; p = p->next)
		for (const struct read *r = p->head; r; r = r->next)
			n++;
	if (parts)
		*parts = sr->nparts;
	pthread_mutex_unlock(&sr->mu);
	return n;
}

/* The entry of (table, pk), made if need be, with one more reader; NULL
 * when the map is full or memory is short (the read goes alone). Under mu. */
static struct part *part_join(struct ecw_shared_reads *sr, const char *table, const char *pk)
{
	struct part *p;

	for (p = sr->parts; p; p = p->next)
		if (strcmp(p->pk, pk) == 0 && strcmp(p->table, table) == 0)
			break;
	if (!p && sr->nparts < PARTS_MAX && (p = calloc(1, sizeof(*p)))) {
		if (!(p->table = strdup(table)) || !(p->pk = strdup(pk))) {
			part_free(p);
			return NULL;
		}
		p->next = sr->parts;
		sr->parts = p;
		sr->nparts++;
	}
	if (p)
		p->readers++;
	return p;
}

/* One reader fewer; the entry goes with its last. Under mu. */
static void part_leave(struct ecw_shared_reads *sr, struct part *p)
{
	if (--p->readers > 0)
		return;
	for (struct part **pp = &sr->parts; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	sr->nparts--;
	part_free(p);
}

/* Takes the next query's reads off p's queue into batch: at least one, at
 * most ECW_TABLE_GET_MANY_KEYS and KEY_BYTES_MAX of keys. Under mu. */
static size_t take(struct read **batch, struct part *p)
{
	size_t n = 0, bytes = 0;

	while (p->head && n < ECW_TABLE_GET_MANY_KEYS) {
		size_t len = strlen(p->head->rk);
		if (n > 0 && bytes + len > KEY_BYTES_MAX)
			break;
		bytes += len;
		batch[n] = p->head;
		batch[n++]->state = READ_TAKEN;
		p->head = p->head->next;
	}
	if (!p->head)
		p->tail = NULL;
	return n;
}

/* Sends the query for batch (n >= 2, or one read of another thread) and
 * files the answers. Called with mu released; the reads are this thread's
 * until their state leaves READ_TAKEN, which the caller sets under mu. */
static void serve(struct ecw_shared_reads *sr, struct ecw_client *c, const struct part *p,
		  struct read **batch, size_t n, enum read_state *state)
{
	struct ecw_entity *got[ECW_TABLE_GET_MANY_KEYS] = {NULL};
	const char *rks[ECW_TABLE_GET_MANY_KEYS];
	int err;

	for (size_t i = 0; i < n; i++)
		rks[i] = batch[i]->rk;
	if (n == 1) {
		err = sr->store->get(&got[0], c, p->table, p->pk, rks[0]);
		if (err == ECW_ENOTFOUND)
			err = 0;
	} else {
		err = sr->store->get_many(got, c, p->table, p->pk, rks, n);
	}
	ecw_error_clear();
	*state = err < 0 ? READ_ALONE : READ_GOT;
	for (size_t i = 0; i < n; i++)
		batch[i]->got = err < 0 ? NULL : got[i];
}

/* Leads one query for p: takes its next reads, sends, answers. Called and
 * returns with mu held; p is busy meanwhile. When the batch is only mine,
 * it is my own GET, with its own error (*own_err, *own_done). */
static void lead(struct ecw_shared_reads *sr, struct ecw_client *c, struct part *p, struct read *mine,
		 struct ecw_entity **out, int *own_err, bool *own_done)
{
	struct read *batch[ECW_TABLE_GET_MANY_KEYS];
	enum read_state state;
	size_t n;

	p->busy = true;
	n = take(batch, p);
	pthread_mutex_unlock(&sr->mu);
	if (n == 1 && batch[0] == mine) {
		*own_err = sr->store->get(out, c, p->table, p->pk, mine->rk);
		*own_done = true;
		state = READ_GOT;
	} else {
		serve(sr, c, p, batch, n, &state);
	}
	pthread_mutex_lock(&sr->mu);
	for (size_t i = 0; i < n; i++)
		batch[i]->state = state;
	p->busy = false;
	pthread_cond_broadcast(&sr->changed);
}

/* An absence learnt from a query, as ecw_table_get reports one. */
static int absent(const char *table, const char *pk, const char *rk)
{
	return ecw_error_set(ECW_ENOTFOUND, "no entity (PartitionKey='%.80s',RowKey='%.80s') in %s", pk, rk,
			     table);
}

/* What a read answered for another thread is, to its caller. */
static int answer(struct ecw_entity **out, const struct read *r, const char *table, const char *pk)
{
	if ((*out = r->got))
		return 0;
	return absent(table, pk, r->rk);
}

int ecw_shared_reads_get(struct ecw_shared_reads *sr, struct ecw_entity **out, struct ecw_client *c,
			 const char *table, const char *pk, const char *rk)
{
	struct read mine = {.rk = rk, .state = READ_WAITING};
	struct part *p;
	bool own_done = false;
	int err = 0;

	*out = NULL;
	if (!sr)
		return ecw_table_get(out, c, table, pk, rk);
	pthread_mutex_lock(&sr->mu);
	if (!(p = part_join(sr, table, pk))) {
		pthread_mutex_unlock(&sr->mu);
		return sr->store->get(out, c, table, pk, rk);
	}
	if (p->tail)
		p->tail->next = &mine;
	else
		p->head = &mine;
	p->tail = &mine;
	while (mine.state == READ_WAITING || mine.state == READ_TAKEN) {
		if (mine.state == READ_WAITING && !p->busy)
			lead(sr, c, p, &mine, out, &err, &own_done);
		else
			pthread_cond_wait(&sr->changed, &sr->mu);
	}
	part_leave(sr, p);
	pthread_mutex_unlock(&sr->mu);
	if (own_done)
		return err;
	if (mine.state == READ_ALONE)
		return sr->store->get(out, c, table, pk, rk);
	return answer(out, &mine, table, pk);
}

/* ---- reads ahead ---------------------------------------------------------------------- */

/* Takes the kept answer of (table, pk, rk) out of the list, or NULL. Under mu. */
static struct kept *kept_take(struct ecw_shared_reads *sr, const char *table, const char *pk, const char *rk)
{
	for (struct kept **kp = &sr->kept; *kp; kp = &(*kp)->next) {
		struct kept *k = *kp;
		if (strcmp(k->rk, rk) == 0 && strcmp(k->pk, pk) == 0 && strcmp(k->table, table) == 0) {
			*kp = k->next;
			sr->nkept--;
			return k;
		}
	}
	return NULL;
}

/* Keeps e (owned; NULL: absent) as the answer of (table, pk, rk), in place
 * of any older one; past KEPT_MAX the oldest goes. */
static void keep(struct ecw_shared_reads *sr, const char *table, const char *pk, const char *rk,
		 struct ecw_entity *e, int64_t now)
{
	struct kept *k = calloc(1, sizeof(*k)), *old = NULL, *drop = NULL;

	if (!k) {
		ecw_entity_free(e);
		return;
	}
	k->e = e;
	if (!(k->table = strdup(table)) || !(k->pk = strdup(pk)) || !(k->rk = strdup(rk))) {
		kept_free(k); /* short of memory: that run reads for itself */
		return;
	}
	k->at_ms = now;
	pthread_mutex_lock(&sr->mu);
	old = kept_take(sr, table, pk, rk);
	k->next = sr->kept;
	sr->kept = k;
	if (++sr->nkept > KEPT_MAX) {
		struct kept **kp = &sr->kept;
		while ((*kp)->next)
			kp = &(*kp)->next;
		drop = *kp;
		*kp = NULL;
		sr->nkept--;
	}
	pthread_mutex_unlock(&sr->mu);
	if (old)
		kept_free(old);
	if (drop)
		kept_free(drop);
}

int ecw_shared_reads_ahead(struct ecw_shared_reads *sr, struct ecw_entity **out, struct ecw_client *c,
			   const char *table, const char *pk, const char *rk, const char *const *ahead,
			   size_t nahead)
{
	struct ecw_entity *got[ECW_TABLE_GET_MANY_KEYS] = {NULL};
	const char *rks[ECW_TABLE_GET_MANY_KEYS] = {rk};
	size_t n = 1;

	*out = NULL;
	if (!sr || nahead == 0)
		return ecw_shared_reads_get(sr, out, c, table, pk, rk);
	for (size_t i = 0; i < nahead && n < ECW_TABLE_GET_MANY_KEYS; i++)
		rks[n++] = ahead[i];
	if (sr->store->get_many(got, c, table, pk, rks, n) < 0) {
		ecw_error_clear(); /* the run's own read says what is wrong */
		return ecw_shared_reads_get(sr, out, c, table, pk, rk);
	}
	int64_t now = ecw_clock_now_ms();
	for (size_t i = 1; i < n; i++)
		keep(sr, table, pk, rks[i], got[i], now);
	if ((*out = got[0]))
		return 0;
	return absent(table, pk, rk);
}

int ecw_shared_reads_kept(struct ecw_shared_reads *sr, struct ecw_entity **out, const char *table,
			  const char *pk, const char *rk)
{
	struct kept *k;
	int found = 0;

	*out = NULL;
	if (!sr)
		return 0;
	pthread_mutex_lock(&sr->mu);
	k = kept_take(sr, table, pk, rk);
	pthread_mutex_unlock(&sr->mu);
	if (k && ecw_clock_now_ms() - k->at_ms <= KEPT_TTL_MS) {
		*out = k->e;
		k->e = NULL;
		found = 1;
	}
	if (k)
		kept_free(k);
	return found;
}
