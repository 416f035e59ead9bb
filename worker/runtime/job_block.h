/* SPDX-License-Identifier: MIT */
/* job_block.h - jobs blocked by a missing table. A table a job reads or
 * writes that does not exist is a configuration problem (a typo'd name, a
 * table not created yet, one deleted under the worker), never an absent
 * entity: the job's runs fail with ECW_ENOTABLE, its messages are held
 * (outcome "blocked": hidden as during an outage, requeued before their last
 * allowed delivery, never poisoned, nothing written), and the other jobs
 * keep running.
 *
 * While a (job, table) pair is blocked the gauge ecw_job_blocked{job,table}
 * is 1, and an error line `job_blocked` names both, at most once a minute
 * per pair. A run of the job that succeeds clears every pair of that job
 * (gauge 0, one `job_unblocked` line): its tables are there again.
 *
 * Process-wide and thread-safe; at most JOB_BLOCK_MAX pairs are tracked
 * (table names come from the configuration, so a handful at most: past the
 * cap a pair is still held and logged, not tracked). */
#ifndef ECW_JOB_BLOCK_H
#define ECW_JOB_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

#define ECW_JOB_BLOCK_MAX 64

/* A run of job found table missing (table "" when the answer did not say
 * which). why: what the line says after the names (NULL: the default
 * advice). now_ms: the clock (ecw_clock_now_ms), so tests can step it. */
void ecw_job_block_note(const char *job, const char *table, const char *why, int64_t now_ms);

/* A run of job succeeded: every pair of the job is cleared. Cheap when
 * nothing is blocked (one atomic load), as it is called for every success. */
void ecw_job_block_clear(const char *job);

/* Whether (job, table) is blocked now (tests, status). */
bool ecw_job_block_is_blocked(const char *job, const char *table);

/* Forgets every pair (tests). */
void ecw_job_block_reset(void);

#endif
