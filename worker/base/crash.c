/* SPDX-License-Identifier: MIT */
/* crash.c - the named crash points of test builds (include/ecw_crash.h): a
 * job, a migration or the scheduler passes one after each step, and a test
 * may stop the process dead there, pause there, or run a hook. */
#ifdef ECW_TESTING
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ecw_clock.h"
#include "ecw_crash.h"
#include "ecw_log.h"

static void (*point_hook)(const char *name, void *payload);
static void *point_payload;

void ecw_crash_point_hook(void (*hook)(const char *name, void *payload), void *payload)
{
	point_hook = hook;
	point_payload = payload;
}

void ecw_crash_point(const char *name)
{
	const char *at = getenv("ECW_CRASH_AT");
	const char *pause = getenv("ECW_TEST_PAUSE_AT");
	const char *jitter = getenv("ECW_TEST_STEP_JITTER_MS");
	size_t n = strlen(name);
	long ms;

	if (point_hook)
		point_hook(name, point_payload);
	/* Dies as a crash would: no cleanup, no flush, no settling. */
	if (at && strcmp(at, name) == 0)
		_exit(86);
	/* Staging races: pause after one step, or a random pause after each.
	 * The pause is logged as it begins: a test waits for that line, not
	 * for a guessed time, before it stages its race. */
	if (pause && strncmp(pause, name, n) == 0 && pause[n] == ':' &&
	    (ms = strtol(pause + n + 1, NULL, 10)) > 0) {
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "test_paused");
		ecw_log_str(l, "at", name);
		ecw_log_int(l, "ms", ms);
		ecw_log_end(l);
		ecw_clock_sleep_ms(ms);
	}
	if (jitter && (ms = strtol(jitter, NULL, 10)) > 0)
		ecw_clock_sleep_ms((int64_t)(ecw_clock_random_u32() % (uint32_t)(ms + 1)));
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int ecw_crash_points_are_test_only;
#endif
