/* SPDX-License-Identifier: MIT */
/* clock.c - monotonic and wall time, sleep and a thread-safe PRNG (see
 * ecw_clock.h). */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ecw_clock.h"

static int64_t real_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#ifdef ECW_TESTING
static pthread_once_t test_clock_once = PTHREAD_ONCE_INIT;
static int64_t test_anchor, test_base, test_scale = 1;
static int test_clock_on;

static void test_clock_init(void)
{
	const char *v = getenv("ECW_TEST_CLOCK");
	int64_t a, b, k;
	int used = 0;

	if (!v || !*v)
		return;
	if (sscanf(v, "%" SCNd64 ":%" SCNd64 ":%" SCNd64 "%n", &a, &b, &k, &used) != 3 || v[used] || k < 1) {
		fprintf(stderr, "ECW_TEST_CLOCK must be ANCHOR_MS:BASE_MS:SCALE, not '%s'\n", v);
		abort();
	}
	test_anchor = a, test_base = b, test_scale = k, test_clock_on = 1;
}
#endif

int64_t ecw_clock_wall_ms(void)
{
#ifdef ECW_TESTING
	pthread_once(&test_clock_once, test_clock_init);
	if (test_clock_on)
		return test_base + (real_wall_ms() - test_anchor) * test_scale;
#endif
	return real_wall_ms();
}

int64_t ecw_clock_wall_scale(void)
{
#ifdef ECW_TESTING
	pthread_once(&test_clock_once, test_clock_init);
	return test_scale;
#else
	return 1;
#endif
}

int64_t ecw_clock_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ecw_clock_sleep_ms(int64_t ms)
{
	struct timespec ts;

	if (ms <= 0)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

/* splitmix64 over an atomic counter: good enough for jitter, lock-free. */
uint32_t ecw_clock_random_u32(void)
{
	static _Atomic uint64_t state;
	uint64_t z;

	if (atomic_load(&state) == 0) {
		struct timespec ts;
		uint64_t expected = 0;

		clock_gettime(CLOCK_REALTIME, &ts);
		atomic_compare_exchange_strong(&state, &expected,
					       ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ 1);
	}
	z = atomic_fetch_add(&state, 0x9e3779b97f4a7c15ULL) + 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (uint32_t)((z ^ (z >> 31)) >> 32);
}

int ecw_clock_digits(const char *s, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

char *ecw_clock_put_digits(char *p, int v, int width)
{
	for (int i = width - 1; i >= 0; i--, v /= 10)
		p[i] = (char)('0' + v % 10);
	return p + width;
}

int64_t ecw_clock_days_from_civil(int64_t y, int64_t m, int64_t d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

void ecw_clock_civil_from_days(int64_t z, int *y, int *m, int *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = (int)(yoe + era * 400 + (*m <= 2));
}

int64_t ecw_clock_backoff_ms(int64_t base_ms, int64_t max_ms, long attempt)
{
	int64_t ms = base_ms;

	for (long i = 1; i < attempt && ms < max_ms; i++)
		ms *= 2;
	return ms > max_ms ? max_ms : ms;
}

void ecw_clock_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

void ecw_clock_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(cv, mu, &ts);
}
