/* SPDX-License-Identifier: MIT */
/* ecw_cancel.h - a cancellation that every wait can watch: the storage
 * client's socket waits and retry sleeps, the worker's naps. Fired once (by
 * the signal thread, at the end of the shutdown grace, ...) or cut off by a
 * deadline, it ends those waits at once, so a worker whose storage hangs
 * still stops on time. A NULL cancellation is never set, so code that has
 * none passes NULL. Thread-safe; the owner frees it after every watcher is
 * gone. */
#ifndef ECW_CANCEL_H
#define ECW_CANCEL_H

#include <stdbool.h>
#include <stdint.h>
#include "ecw_err.h"

struct ecw_cancel;

int ecw_cancel_new(struct ecw_cancel **out) ECW_MUST_USE;
void ecw_cancel_free(struct ecw_cancel *c);

/* Sets it, for good; later calls do nothing. */
void ecw_cancel_fire(struct ecw_cancel *c);
/* From the monotonic time at_ms (ecw_clock_now_ms) on it counts as set; a later
 * call moves the deadline, 0 removes it. */
void ecw_cancel_set_deadline(struct ecw_cancel *c, int64_t at_ms);
bool ecw_cancel_is_set(const struct ecw_cancel *c);

/* A file descriptor that polls readable once it is fired (not when only its
 * deadline passed: clamp the poll's timeout with ecw_cancel_clamp_ms); -1
 * for NULL. */
int ecw_cancel_fd(const struct ecw_cancel *c);
/* ms (a wait's timeout, >= 0) cut to what is left before the deadline: 0
 * when it is set. */
int64_t ecw_cancel_clamp_ms(const struct ecw_cancel *c, int64_t ms);

/* Sleeps up to ms; returns true, early, when it is (or becomes) set. */
bool ecw_cancel_sleep_ms(const struct ecw_cancel *c, int64_t ms);

#endif
