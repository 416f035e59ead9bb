/* SPDX-License-Identifier: MIT */
/* ecw_duration.h - durations as the configuration and the command line write
 * them: an integer and a unit, "250ms", "2s", "5m", "1h" (or "0" alone). */
#ifndef ECW_DURATION_H
#define ECW_DURATION_H

#include <stdbool.h>
#include <stdint.h>
#include "ecw_err.h"

/* s as milliseconds; with days also "7d" and "1w" (command-line options and
 * job settings; the worker's own keys keep to hours). Returns 0, -1 (not a
 * duration) or -2 (too large). */
int ecw_duration_parse(int64_t *out_ms, const char *s, bool days) ECW_MUST_USE;

#endif
