/* clock.c - monotonic time, sleep and a thread-safe PRNG (see ecw_clock.h). */
#include <stdatomic.h>
#include <time.h>

#include "ecw_clock.h"

int64_t ecw_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ecw_sleep_ms(int64_t ms)
{
	struct timespec ts;

	if (ms <= 0)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

/* splitmix64 over an atomic counter: good enough for jitter, lock-free. */
uint32_t ecw_random_u32(void)
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
