/* SPDX-License-Identifier: MIT */
/* ecw_progress.h - the one-line progress report long commands (backfill, poison
 * replay and purge, scans) redraw on stderr at most once a second when it is
 * a terminal: what was done, the rate and, when the total is known, the ETA;
 * and the short durations the operator commands print in tables. */
#ifndef ECW_PROGRESS_H
#define ECW_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ecw_progress {
	bool on;          /* false: every call does nothing */
	const char *what; /* "replay", ... */
	int64_t t0_ms, last_ms;
	uint64_t total; /* 0 when unknown (no ETA) */
};

/* on: usually isatty(2) and not a machine-readable mode. */
void ecw_progress_init(struct ecw_progress *p, const char *what, bool on, uint64_t total);
/* done counts toward total; detail is the rest of the line ("3 failed").
 * final ends the line and always draws. */
void ecw_progress_show(struct ecw_progress *p, uint64_t done, const char *detail, bool final);

/* A short human duration for tables: "45s", "12m", "3h", "2d". */
void ecw_progress_human_age(char *out, size_t cap, long long seconds);

#endif
