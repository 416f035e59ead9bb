/* SPDX-License-Identifier: MIT */
/* auditfx.h - `ecworker audit` as a process, for the integration tests of the
 * audit (test_audit.c, test_audit_fanout.c, test_audit_index_list.c) and the
 * end of a chaos run (mixed_chaos.c): one run with its exit code and stdout,
 * and the --json line of one job with its counts. */
#ifndef ECW_AUDITFX_H
#define ECW_AUDITFX_H

struct json_object;

/* Runs `ecworker audit -c config args...` (args NULL-terminated, at most 8)
 * as the process name; returns its exit code (stderr and stdout printed when
 * it is neither 0 nor 3), stdout in *out (the caller frees it). */
int auditfx_run(char **out, const char *config, const char *name, const char *const *args);
/* The same with more environment for it (NULL-terminated "K=V", as
 * proc_run takes it; NULL: none). */
int auditfx_run_env(char **out, const char *config, const char *name, const char *const *args,
                    const char *const *env);

/* The --json line of job in out, parsed (json_object_put it); fails the test
 * when there is none. */
struct json_object *auditfx_job_line(const char *out, const char *job);

/* The integer o[key]; fails the test when it is absent. */
long long auditfx_field(struct json_object *o, const char *key);

/* Fails the test unless job's --json line in out has these counts. */
void auditfx_counts_are(const char *out, const char *job, long long missing, long long stale,
                        long long orphan, long long conflict, long long repaired);

#endif
