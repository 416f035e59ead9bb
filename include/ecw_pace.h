/* SPDX-License-Identifier: MIT */
/* ecw_pace.h - a token bucket for commands that write at an operator's chosen
 * rate (backfill, poison replay): one token per message, refilled at `rate`
 * per second, at most one second's worth banked, starting with one token. */
#ifndef ECW_PACE_H
#define ECW_PACE_H

#include <signal.h>

struct ecw_pace {
	double rate; /* per second; 0 = no pacing */
	double tokens;
	double last_ms;
};

void ecw_pace_init(struct ecw_pace *p, double rate);
/* Waits for a token and takes it; returns early (without one) when *stop is
 * set. stop may be NULL. */
void ecw_pace_take(struct ecw_pace *p, volatile sig_atomic_t *stop);

#endif
