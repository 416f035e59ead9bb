/* SPDX-License-Identifier: MIT */
/* job_block.c - jobs blocked by a missing table (runtime_private.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ecw_log.h"
#include "runtime_private.h"
#include "telemetry.h"

#define NAME_MAX_BYTES 64 /* job and table names are shorter: ecw_config checks both */
#define LOG_EVERY_MS 60000

struct pair {
	char job[NAME_MAX_BYTES], table[NAME_MAX_BYTES];
	int64_t logged_ms; /* when job_blocked was last logged for it */
	bool blocked;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pair g_pairs[ECW_JOB_BLOCK_MAX]; /* under g_mu */
static size_t g_n;                             /* under g_mu */
static atomic_int g_blocked;                   /* pairs blocked now: the clear's fast path */

static struct pair *find(const char *job, const char *table)
{
	for (size_t i = 0; i < g_n; i++)
		if (strcmp(g_pairs[i].job, job) == 0 && strcmp(g_pairs[i].table, table) == 0)
			return &g_pairs[i];
	return NULL;
}

static struct pair *add(const char *job, const char *table)
{
	struct pair *p;

	if (g_n == ECW_JOB_BLOCK_MAX)
		return NULL;
	p = &g_pairs[g_n++];
	memset(p, 0, sizeof(*p));
	snprintf(p->job, sizeof(p->job), "%s", job);
	snprintf(p->table, sizeof(p->table), "%s", table);
	p->logged_ms = INT64_MIN;
	return p;
}

static void log_blocked(const char *job, const char *table, const char *why)
{
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_ERROR, "job_blocked");

	ecw_log_str(l, "job", job);
	ecw_log_str(l, "table", table);
	ecw_log_str(l, "detail",
		    why ? why
			: "the table does not exist: create it, or correct the job's table name; the job's "
			  "messages are held (retried, never poisoned) and complete once it exists");
	ecw_log_end(l);
}

void ecw_job_block_note(const char *job, const char *table, const char *why, int64_t now_ms)
{
	struct pair *p;
	bool log = true;

	table = table ? table : "";
	pthread_mutex_lock(&g_mu);
	if ((p = find(job, table)) || (p = add(job, table))) {
		if (!p->blocked) {
			p->blocked = true;
			atomic_fetch_add(&g_blocked, 1);
			ecw_metrics_job_blocked(job, table, true);
		}
		log = p->logged_ms == INT64_MIN || now_ms - p->logged_ms >= LOG_EVERY_MS;
		if (log)
			p->logged_ms = now_ms;
	}
	pthread_mutex_unlock(&g_mu);
	if (log)
		log_blocked(job, table, why);
}

void ecw_job_block_clear(const char *job)
{
	if (atomic_load(&g_blocked) == 0)
		return;
	pthread_mutex_lock(&g_mu);
	for (size_t i = 0; i < g_n; i++) {
		struct pair *p = &g_pairs[i];
		if (!p->blocked || strcmp(p->job, job) != 0)
			continue;
		p->blocked = false;
		p->logged_ms = INT64_MIN;
		atomic_fetch_sub(&g_blocked, 1);
		ecw_metrics_job_blocked(p->job, p->table, false);
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "job_unblocked");
		ecw_log_str(l, "job", p->job);
		ecw_log_str(l, "table", p->table);
		ecw_log_end(l);
	}
	pthread_mutex_unlock(&g_mu);
}

bool ecw_job_block_is_blocked(const char *job, const char *table)
{
	const struct pair *p;
	bool blocked;

	pthread_mutex_lock(&g_mu);
	blocked = (p = find(job, table ? table : "")) && p->blocked;
	pthread_mutex_unlock(&g_mu);
	return blocked;
}

void ecw_job_block_reset(void)
{
	pthread_mutex_lock(&g_mu);
	g_n = 0;
	atomic_store(&g_blocked, 0);
	pthread_mutex_unlock(&g_mu);
}
