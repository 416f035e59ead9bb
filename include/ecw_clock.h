/* SPDX-License-Identifier: MIT */
/* ecw_clock.h - time, sleep and randomness behind one seam, so backoff and
 * lease logic can be tested without waiting: unit tests link with
 * -Wl,--wrap=ecw_clock_sleep_ms and record the sleeps instead. */
#ifndef ECW_CLOCK_H
#define ECW_CLOCK_H

#include <pthread.h>
#include <stdint.h>

int64_t ecw_clock_now_ms(void); /* monotonic milliseconds */
/* The wall clock: Unix time in milliseconds, UTC. What schedules, rollup
 * windows, purge ages and {now:...} keys read. Test builds take
 * ECW_TEST_CLOCK="ANCHOR_MS:BASE_MS:SCALE": at the real Unix time ANCHOR_MS
 * the clock read BASE_MS and it runs SCALE times as fast, so several
 * processes given the same value agree on a simulated date. */
int64_t ecw_clock_wall_ms(void);
/* How many wall-clock milliseconds pass per real one: 1, except under
 * ECW_TEST_CLOCK. Divide a wall-clock wait by it to sleep. */
int64_t ecw_clock_wall_scale(void);

/* The proleptic Gregorian calendar (H. Hinnant's algorithms): days since
 * 1970-01-01 of a date, and back. Any year the int types hold. */
int64_t ecw_clock_days_from_civil(int64_t y, int64_t m, int64_t d);
void ecw_clock_civil_from_days(int64_t days, int *y, int *m, int *d);
/* The value of the n decimal digits at s, for reading dates by position;
 * -1 when one of them is not a digit. */
int ecw_clock_digits(const char *s, int n);
/* v as exactly width digits at p (the low ones; v >= 0); returns p + width. */
char *ecw_clock_put_digits(char *p, int v, int width);
void ecw_clock_sleep_ms(int64_t ms); /* returns early only on a signal */
/* Exponential backoff before jitter: base * 2^(attempt-1), capped at max
 * (an attempt below 1 counts as 1). The storage client's retries and the
 * worker's retried messages both wait this long, less their own jitter. */
int64_t ecw_clock_backoff_ms(int64_t base_ms, int64_t max_ms, long attempt);
uint32_t ecw_clock_random_u32(void); /* uniform, thread-safe; not for secrets */

/* A condition variable whose timed waits run on the monotonic clock (a
 * wall-clock step neither shortens nor stretches them), and such a wait of
 * at most ms milliseconds on it (mu held). */
void ecw_clock_cond_init(pthread_cond_t *cv);
void ecw_clock_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms);

#endif
