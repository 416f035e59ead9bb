/* SPDX-License-Identifier: MIT */
/* pause.h - a queue paused for the whole fleet (`ecworker pause`), kept in
 * the queue's own metadata so that the one Get Queue Metadata a worker makes
 * for its backlog gauges also tells it whether to receive (queue_watch.c):
 * a control entity in a table would cost every worker a request of its own
 * every control_poll, the whole idle budget. Names (metadata names are
 * identifiers; values printable ASCII):
 *   ecworkerpausedat      when, "2026-11-28T13:40:00Z"; its presence is the pause
 *   ecworkerpausedby      who, "user@host" in [A-Za-z0-9._@-], at most 128
 *   ecworkerpausereason   why, UTF-8 percent-encoded, at most 256 bytes decoded
 * Resuming removes the three; other metadata on the queue is kept. An
 * ecw_pause is a plain value, no pointers. */
#ifndef ECW_PAUSE_H
#define ECW_PAUSE_H

#include <stdbool.h>

#include "ecw_err.h"
#include "ecw_storage.h"

#define ECW_PAUSE_BY_MAX 128
#define ECW_PAUSE_REASON_MAX 256

struct ecw_pause {
	bool paused;
	char at[32];                           /* ISO 8601 UTC; "" when not paused */
	char by[ECW_PAUSE_BY_MAX + 1];         /* "" unknown */
	char reason[ECW_PAUSE_REASON_MAX + 1]; /* UTF-8, "" none */
};

/* Reads the pause from a queue's metadata. Values that are not what pause
 * writes (a hostile or foreign writer) are dropped or cut, never trusted as
 * structure: a bad reason reads as "", a bad `by` as "". */
void ecw_pause_from_meta(struct ecw_pause *out, const struct ecw_queue_meta *m);
/* Writes p into m (paused: the three names; not paused: removes them).
 * ECW_EINVALID when the reason is not UTF-8 or too long; ECW_ETOOLARGE when
 * m has no room. */
int ecw_pause_to_meta(struct ecw_queue_meta *m, const struct ecw_pause *p) ECW_MUST_USE;
/* "user@host" of whoever runs this process, as pause keeps it. */
void ecw_pause_whoami(char *out, size_t n);

#endif
