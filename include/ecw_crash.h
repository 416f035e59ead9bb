/* SPDX-License-Identifier: MIT */
/* ecw_crash.h - named crash points (worker/base/crash.c), passed after each
 * step of a job, a migration or a schedule, so that tests can stop the work
 * dead after any step and check that a fresh worker converges. */
#ifndef ECW_CRASH_H
#define ECW_CRASH_H

/* Named crash points, after each step of a job. In test builds, a process
 * started with ECW_CRASH_AT=<name> dies (_exit(86)) the moment a job passes
 * that point, so tests can stop a job dead after any step and check that a
 * fresh worker converges; ECW_TEST_PAUSE_AT=<name>:<ms> pauses there and
 * ECW_TEST_STEP_JITTER_MS=<ms> pauses randomly at every point, to stage
 * races. In the shipped binary they compile to nothing. */
#ifdef ECW_TESTING
void ecw_crash_point(const char *name);
/* For tests that run a job in their own process, where dying or sleeping at
 * a point would not help: hook(name, payload) is called at every point
 * first (NULL: no hook), e.g. to change the data between a run's read and
 * its write. Set it only while no job runs. */
void ecw_crash_point_hook(void (*hook)(const char *name, void *payload), void *payload);
#else
#define ecw_crash_point(name) ((void)0)
#endif

#endif
