/* SPDX-License-Identifier: MIT */
/* index_list_combine_private.h - the combiner of the index-list job
 * (jobs/index_list_combine.c): changes to one list that runs of one worker
 * make at the same time go to storage together, in one read-modify-write.
 * Only index_list.c (and the unit test) include it; why combining keeps the
 * job's guarantees is argued at the top of index_list_combine.c. */
#ifndef ECW_INDEX_LIST_COMBINE_PRIVATE_H
#define ECW_INDEX_LIST_COMBINE_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>

#include "index_list_private.h"

struct ecw_client;
struct ecw_job_ctx;

/* How the combiner reads, writes and measures a list: ecw_index_list_store_load,
 * _save and _check (ecw_index_list_combine_store); a unit test passes fakes. save may
 * return 1: the change set is too big for one transaction, write fewer
 * changes at once. */
struct il_store {
	int (*load)(struct il_list *out, struct ecw_client *c, const char *table, const char *lpk,
		    const char *lrk);
	int (*save)(struct ecw_client *c, const char *table, const struct il_list *read,
		    const struct tuples *keys);
	int (*check)(const struct il_list *read, const struct tuples *keys);
};

extern const struct il_store ecw_index_list_combine_store;

/* The combiners of one job's lists: a bounded map keyed by (table, lpk,
 * lrk), an entry per list with changes in flight (removed when idle). The
 * job's settings own it (_new in parse, _free in free); thread-safe. */
struct il_combiners;

int ecw_index_list_combiners_new(struct il_combiners **out, const struct il_store *store) ECW_MUST_USE;
void ecw_index_list_combiners_free(struct il_combiners *cs);
/* How many lists have changes in flight now. */
size_t ecw_index_list_combiners_size(struct il_combiners *cs);

enum il_change_result {
	IL_CHANGED,     /* written: the save holding the change succeeded */
	IL_UNCHANGED,   /* the list was as asked already: nothing written for it */
	IL_NEED_INTENT, /* an add without its intent, and the key is absent */
};

/* One run's change: key into (add) or out of list (table, lpk, lrk). */
struct il_change {
	struct ecw_job_ctx *ctx; /* the run's: its lease, stopping; its client when it leads */
	const char *table, *lpk, *lrk;
	const char *key[2]; /* the source's [pk, rk] */
	bool add;
	bool intent; /* add: the run's intent for the list is in its ref (step 3a) */
	/* out */
	enum il_change_result result;
	int conflicts; /* races lost by saves this run led */
};

/* Applies ch together with the changes other runs make to the same list at
 * the same time: one load, every change, one conditional save (again after
 * a lost race, with a jittered backoff); returns once the write holding ch
 * succeeded (ch->result). Errors are ch's own: ECW_ETOOLARGE (the add would
 * not fit; message from the store), ECW_ETRANSIENT (lease lost, or the list
 * kept changing), ECW_ECANCELED (the run is stopping and its change was not
 * taken yet), or the load's or save's error. cs NULL: alone, unshared. */
int ecw_index_list_combine(struct il_combiners *cs, struct il_change *ch) ECW_MUST_USE;

/* A short random sleep after a lost race, growing with the attempt. */
void ecw_index_list_backoff(int attempt);

#endif
