/* SPDX-License-Identifier: MIT */
/* poison_scan.h - walking a poison queue without losing anything, for the
 * operator commands (poison list/replay/purge, status).
 *
 * Peek shows only the first 32 visible messages. To see more, the scan
 * receives them (hidden for `hold_s`, renewed while the scan runs, so it
 * never meets a message twice), shows each matching one to a visitor, and
 * at the end releases every message the visitor did not take (visible again
 * at once, text unchanged; the service counts the receive in its dequeue
 * count, which nothing reads on a poison queue). A scan that dies without
 * releasing (SIGKILL) loses nothing: its messages reappear after at most
 * hold_s. When the visible messages fit in one peek and the visitor only
 * reads (peek_ok), the scan peeks and hides nothing. */
#ifndef ECW_POISON_SCAN_H
#define ECW_POISON_SCAN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include "ecw_storage.h"
#include "poison.h"
#include "poison_group.h"
#include "ecw_progress.h"

struct ecw_scan_item {
	const struct ecw_queue_msg *msg; /* pop_receipt "" when peeked */
	const struct ecw_poison_view *view;
	bool peeked; /* the visitor may not delete it */
};

enum ecw_scan_verdict {
	ECW_SCAN_KEEP,  /* leave it: released when the scan ends */
	ECW_SCAN_TAKEN, /* the visitor deleted it (with msg->pop_receipt) */
	ECW_SCAN_STOP,  /* keep it, and end the scan now */
};

typedef enum ecw_scan_verdict (*ecw_scan_visit)(void *payload, struct ecw_client *c,
						const struct ecw_scan_item *it);

struct ecw_scan_options {
	const char *queue;
	const struct ecw_poison_filter *filter; /* NULL: every message */
	const char *group;             /* --group KEY (poison_group.h): only its messages; NULL: any */
	enum ecw_group_dim group_dim;  /* the dimension group names */
	uint64_t limit;                /* visit at most this many; 0 = no limit */
	uint64_t max_seen;             /* look at most at this many (a bounded scan); 0 = all */
	bool peek_ok;                  /* the visitor only reads: peek when it sees everything */
	int hold_s;                    /* hide received messages this long between renewals (default 60) */
	volatile sig_atomic_t *stop;   /* set by a signal: end after the message in hand */
	struct ecw_progress *progress; /* may be NULL */
	const char *(*progress_detail)(void *payload); /* may be NULL */
};

struct ecw_scan_result {
	uint64_t seen;           /* distinct messages looked at */
	uint64_t matched;        /* passed the filter and were visited */
	uint64_t release_failed; /* not released: visible again after hold_s */
	bool complete;           /* saw every message visible to it */
	bool stopped;            /* *stop was set */
	bool peeked;             /* done with one peek */
};

/* Returns 0, or an ecw_err when receiving failed (held messages are still
 * released; what the visitor did stands). */
int ecw_poison_scan(struct ecw_scan_result *r, struct ecw_client *c, const struct ecw_scan_options *o,
		    ecw_scan_visit visit, void *payload) ECW_MUST_USE;

#endif
