/* SPDX-License-Identifier: MIT */
/* poison_group.h - poison messages in groups, for `poison list --group-by DIM`
 * (a count per group with its oldest and newest failure) and `--group KEY`
 * (the messages of one group, on list, replay and purge). Pure: no storage,
 * no output.
 *
 * A group key is "DIM:VALUE", the same text list prints and --group takes:
 *   reason:VALUE  the envelope's reason (permanent | max-dequeue)
 *   job:VALUE     the envelope's job name
 *   error:VALUE   the envelope's error, normalised (ecw_poison_group_normalise_error)
 *   status:VALUE  the storage answer the envelope records: "409 EntityAlreadyExists",
 *                 "503" (no error code), or the code alone
 * VALUE is "-" when the envelope lacks the field and "(not an envelope)" for
 * a message that is not an ecworker envelope. VALUE is escaped for the
 * terminal (ecw_term_escape: no control character, only valid UTF-8) and cut
 * to ECW_GROUP_VALUE_MAX bytes ending in "...", so a key can be printed as it
 * is and is as long as ECW_GROUP_KEY_MAX at most. */
#ifndef ECW_POISON_GROUP_H
#define ECW_POISON_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "ecw_buf.h"
#include "ecw_err.h"
#include "poison.h"

enum ecw_group_dim {
	ECW_GROUP_NONE,
	ECW_GROUP_REASON,
	ECW_GROUP_JOB,
	ECW_GROUP_ERROR,
	ECW_GROUP_STATUS,
};

#define ECW_GROUP_VALUE_MAX 200
#define ECW_GROUP_KEY_MAX (ECW_GROUP_VALUE_MAX + sizeof("status:") - 1)
#define ECW_GROUP_NOT_ENVELOPE "(not an envelope)"
#define ECW_GROUP_ABSENT "-"

/* "reason", "job", "error" or "status": ECW_EINVALID (last error set) for
 * anything else. */
int ecw_poison_group_dim_parse(enum ecw_group_dim *out, const char *name) ECW_MUST_USE;

/* The dimension a key names by its prefix ("error:..."): ECW_EINVALID (last
 * error set) when it names none. */
int ecw_poison_group_key_dim(enum ecw_group_dim *out, const char *key) ECW_MUST_USE;

/* The error text with its variable parts replaced, into out (appended, not
 * escaped): text in double quotes, or in single quotes that open after
 * anything but a letter or digit (so "worker's" is no quote), becomes "*"
 * inside its quotes; a word (ASCII letters, digits, '_' and '-') holding a
 * digit becomes #. So keys, numbers, ETags, request ids and times vanish:
 *   GET /devstoreaccount1/Tables('t1'): 404 TableNotFound (request id 5f0c-9e1a)
 *   GET /#/Tables('*'): # TableNotFound (request id #) */
int ecw_poison_group_normalise_error(struct ecw_buf *out, const char *error, size_t len) ECW_MUST_USE;

/* The key of v in dimension dim (not ECW_GROUP_NONE) into out, emptied
 * first. 0 or ECW_ENOMEM. */
int ecw_poison_group_key(struct ecw_buf *out, enum ecw_group_dim dim,
			 const struct ecw_poison_view *v) ECW_MUST_USE;

/* --group KEY: whether v is in the group key (of dimension dim, from
 * ecw_poison_group_key_dim). Out of memory: false, so nothing is acted on. */
bool ecw_poison_group_match(enum ecw_group_dim dim, const char *key, const struct ecw_poison_view *v);

/* ---- counting ------------------------------------------------------------------ */

struct ecw_group {
	char *key;
	uint64_t count;
	time_t oldest, newest; /* of the failure times counted; 0 when none was known */
};

/* At most max_groups distinct keys (room for them all is taken at once);
 * the messages of any further key are counted in one "other" group (key
 * NULL). The table owns the keys. */
struct ecw_group_table;

struct ecw_group_table *ecw_poison_group_table_new(size_t max_groups); /* NULL: out of memory */
void ecw_poison_group_table_free(struct ecw_group_table *t);           /* NULL is fine */

/* Counts one message of group key that failed at when (0: unknown). 0 or
 * ECW_ENOMEM; ECW_EINVALID after ecw_poison_group_table_sorted. */
int ecw_poison_group_table_add(struct ecw_group_table *t, const char *key, time_t when) ECW_MUST_USE;

/* The groups by count, most first, ties by key (strcmp); *n of them. After
 * this the table takes no more adds. Valid until the table is freed. */
const struct ecw_group *ecw_poison_group_table_sorted(size_t *n, struct ecw_group_table *t);

/* The messages beyond max_groups (count 0 when none); its key is NULL. */
const struct ecw_group *ecw_poison_group_table_other(const struct ecw_group_table *t);

#endif
