/* SPDX-License-Identifier: MIT */
/* test_move_blob.c - check-config of a move between a table and blobs
 * (jobs/move_blob.c): the two jobs and other good names parse; a
 * name template that could make an invalid blob name for some key, or give
 * two pairs of keys one blob, or read anything but the two keys, is refused
 * at its line and column with a message saying why; so are a bad container
 * name and a move with two blob sides, two sources or two targets. What the
 * names are at run time is test_job_move_blob.c's. */
#include "config_text.h"

static const char *job_text(char *buf, size_t cap, const char *container, const char *name)
{
	int k = snprintf(buf, cap,
	                 "jobs:\n"
	                 "  a:\n"
	                 "    type: move\n"
	                 "    from: Employees\n"
	                 "    to_blob:\n"
	                 "      container: %s\n"
	                 "      name: \"%s\"\n",
	                 container, name);
	assert_true(k > 0 && (size_t)k < cap);
	return buf;
}

static void test_move_blob__good_jobs_parse(void **state)
{
	static const char *const names[] = {
	    "{PartitionKey}/{RowKey}.json",
	    "{RowKey}/{PartitionKey}",
	    "archive/{PartitionKey}/v1-{RowKey}.json",
	    "{PartitionKey}-x/y{RowKey}",
	    "{{literal}}/{PartitionKey}/{RowKey}",
	};
	char text[512];

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ecw_config_free(parse_ok(job_text(text, sizeof(text), "employee-archive", names[i])));
	ecw_config_free(parse_ok("jobs:\n"
	                         "  archive-to-blob:   {type: move, from: Employees, to_blob: {container: "
	                         "employee-archive, name: \"{PartitionKey}/{RowKey}.json\"}}\n"
	                         "  restore-from-blob: {type: move, from_blob: {container: employee-archive, "
	                         "name: \"{PartitionKey}/{RowKey}.json\"}, to: Employees}\n"));
}

static void test_move_blob__bad_names_refused_with_the_reason(void **state)
{
	static const char *const bad[][2] = {
	    {"{PartitionKey}{RowKey}.json", "must hold a '/'"},
	    {"{PartitionKey}-{RowKey}.json", "a/bc and ab/c"},
	    {"{Department}/{RowKey}.json", "the placeholder at column 1 is not {PartitionKey} or {RowKey}"},
	    {"{PartitionKey:0>4}/{RowKey}.json", "the placeholder at column 1 is not"},
	    {"x/{PartitionKey}/{RowKey}/{Name}", "the placeholder at column 27 is not"},
	    {"{PartitionKey}/x.json", "without {RowKey} two entities would share one blob"},
	    {"{RowKey}/{RowKey}.json", "{RowKey} twice"},
	    {"/{PartitionKey}/{RowKey}.json", "its text makes invalid blob names"},
	    {"{PartitionKey}//{RowKey}.json", "its text makes invalid blob names"},
	    {"{PartitionKey}/{RowKey}/", "its text makes invalid blob names"},
	    {"{PartitionKey}./{RowKey}.json", "its text makes invalid blob names"},
	    {"{PartitionKey}/{RowKey}.", "its text makes invalid blob names"},
	    {"{PartitionKey}/{RowKey}\\\\x", "its text makes invalid blob names"},
	    {"{now:unix}/{PartitionKey}/{RowKey}", "is not allowed in to_blob.name"},
	};
	char text[512];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		one_error(job_text(text, sizeof(text), "employee-archive", bad[i][0]), "7:13", bad[i][1]);
}

static void test_move_blob__bad_container_refused(void **state)
{
	char text[512];

	(void)state;
	one_error(job_text(text, sizeof(text), "Employee_Archive", "{PartitionKey}/{RowKey}.json"), "6:18",
	          "to_blob.container: invalid container name");
}

static void test_move_blob__one_blob_side_one_source_one_target(void **state)
{
	(void)state;
	one_error("jobs:\n"
	          "  a:\n"
	          "    type: move\n"
	          "    from_blob: {container: one, name: \"{PartitionKey}/{RowKey}\"}\n"
	          "    to_blob: {container: two, name: \"{PartitionKey}/{RowKey}\"}\n",
	          "5:14", "from_blob or to_blob, not both");
	one_error("jobs:\n"
	          "  a:\n"
	          "    type: move\n"
	          "    from: Employees\n"
	          "    from_blob: {container: one, name: \"{PartitionKey}/{RowKey}\"}\n"
	          "    to: Archive\n",
	          "5:16", "from or from_blob, not both");
	one_error("jobs:\n"
	          "  a:\n"
	          "    type: move\n"
	          "    from: Employees\n"
	          "    to: Archive\n"
	          "    to_blob: {container: one, name: \"{PartitionKey}/{RowKey}\"}\n",
	          "6:14", "to or to_blob, not both");
	one_error("jobs:\n"
	          "  a:\n"
	          "    type: move\n"
	          "    from_blob: {container: one, name: \"{PartitionKey}/{RowKey}\"}\n",
	          "3:5", "missing required key 'to'");
	one_error("jobs:\n"
	          "  a:\n"
	          "    type: move\n"
	          "    from: Employees\n"
	          "    to_blob: {container: one, name: \"{PartitionKey}/{RowKey}\"}\n"
	          "    to_row_key: \"x{RowKey}\"\n",
	          "6:5", "to_row_key");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_move_blob__good_jobs_parse, setup),
	    cmocka_unit_test_setup(test_move_blob__bad_names_refused_with_the_reason, setup),
	    cmocka_unit_test_setup(test_move_blob__bad_container_refused, setup),
	    cmocka_unit_test_setup(test_move_blob__one_blob_side_one_source_one_target, setup),
	};
	return cmocka_run_group_tests_name("move_blob", tests, NULL, NULL);
}
