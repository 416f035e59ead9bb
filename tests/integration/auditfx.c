/* SPDX-License-Identifier: MIT */
/* auditfx.c - `ecworker audit` as a process (auditfx.h). */
#include "auditfx.h"
#include "itest.h"
#include "proc.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int auditfx_run(char **out, const char *config, const char *name, const char *const *args)
{
	return auditfx_run_env(out, config, name, args, NULL);
}

int auditfx_run_env(char **out, const char *config, const char *name, const char *const *args,
                    const char *const *env)
{
	const char *argv[12] = {"audit", "-c", config};
	char *err = NULL;
	size_t n = 3;
	int code;

	for (; args && *args && n < 11; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	code = proc_run(out, &err, name, argv, env, 60000);
	if (code != 0 && code != 3)
		print_error("audit %s exited %d; stderr:\n%s\nstdout:\n%s\n", name, code, err ? err : "",
		            out && *out ? *out : "");
	free(err);
	return code;
}

struct json_object *auditfx_job_line(const char *out, const char *job)
{
	char needle[96];
	const char *at, *end;
	struct json_object *o;
	char *line;

	snprintf(needle, sizeof(needle), "{\"job\":\"%s\"", job);
	at = strstr(out, needle);
	ITEST_CHECK(at != NULL, "no --json line for %s in:\n%s", job, out);
	end = strchr(at, '\n');
	line = strndup(at, end ? (size_t)(end - at) : strlen(at));
	o = json_tokener_parse(line);
	ITEST_CHECK(o != NULL, "not JSON: %s", line);
	free(line);
	return o;
}

long long auditfx_field(struct json_object *o, const char *key)
{
	struct json_object *v;

	ITEST_CHECK(json_object_object_get_ex(o, key, &v), "no %s in %s", key, json_object_to_json_string(o));
	return json_object_get_int64(v);
}

void auditfx_counts_are(const char *out, const char *job, long long missing, long long stale,
                        long long orphan, long long conflict, long long repaired)
{
	struct json_object *o = auditfx_job_line(out, job);

	if (auditfx_field(o, "missing") != missing || auditfx_field(o, "stale") != stale ||
	    auditfx_field(o, "orphan") != orphan || auditfx_field(o, "conflict") != conflict ||
	    auditfx_field(o, "repaired") != repaired)
		fail_msg("%s: got %s; want missing %lld stale %lld orphan %lld conflict %lld repaired %lld",
		         job, json_object_to_json_string(o), missing, stale, orphan, conflict, repaired);
	json_object_put(o);
}
