/* SPDX-License-Identifier: MIT */
/* job_type.c - every job type ecworker knows, by the name used as `type:` in
 * the configuration. Adding a job type is one new file and one line here
 * (the helpers the types call are in job.c, so no type calls back into
 * the registry that lists it). */
#include <stddef.h>
#include <string.h>

#include "ecw_job.h"

extern const struct ecw_job_type ecw_job_move;
extern const struct ecw_job_type ecw_job_index;
extern const struct ecw_job_type ecw_job_index_list;
extern const struct ecw_job_type ecw_job_fanout;
extern const struct ecw_job_type ecw_job_rollup;
extern const struct ecw_job_type ecw_job_purge_tables;
extern const struct ecw_job_type ecw_job_blob_ref;
extern const struct ecw_job_type ecw_job_export;

#ifdef ECW_TESTING
/* Test-only types (tests/support/test_jobs.c), compiled only into test builds. */
extern const struct ecw_job_type ecw_job_test_noop, ecw_job_test_fail, ecw_job_test_flaky, ecw_job_test_sleep,
	ecw_job_test_count, ecw_job_test_record;
#endif

static const struct ecw_job_type *const types[] = {
	&ecw_job_move,
	&ecw_job_index,
	&ecw_job_index_list,
	&ecw_job_fanout,
	&ecw_job_rollup,
	&ecw_job_purge_tables,
	&ecw_job_blob_ref,
	&ecw_job_export,
#ifdef ECW_TESTING
	&ecw_job_test_noop,
	&ecw_job_test_fail,
	&ecw_job_test_flaky,
	&ecw_job_test_sleep,
	&ecw_job_test_count,
	&ecw_job_test_record,
#endif
	NULL,
};

const struct ecw_job_type *ecw_job_type_find(const char *name)
{
	for (size_t i = 0; types[i]; i++)
		if (strcmp(types[i]->name, name) == 0)
			return types[i];
	return NULL;
}

const char *const *ecw_job_type_names(void)
{
	static const char *names[sizeof(types) / sizeof(types[0])];

	if (!names[0])
		for (size_t i = 0; types[i]; i++)
			names[i] = types[i]->name;
	return names;
}
