/* SPDX-License-Identifier: MIT */
/* test_job_block.c - jobs blocked by a missing table (worker/runtime/job_block.c):
 * the gauge ecw_job_blocked{job,table} while blocked, the job_blocked line
 * at most once a minute per pair, and one success of the job clearing
 * every pair of its own, and only those. */
#include "support.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ecw_log.h"
#include "runtime_private.h"
#include "telemetry.h"

static int log_pipe[2];

static int setup(void **state)
{
	(void)state;
	ecw_metrics_reset();
	ecw_job_block_reset();
	ecw_log_setup(ECW_LOG_INFO, ECW_LOG_JSON);
	if (pipe(log_pipe) < 0 || fcntl(log_pipe[0], F_SETFL, O_NONBLOCK) < 0)
		return -1;
	ecw_log_set_fd(log_pipe[1]);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ecw_log_set_fd(2);
	close(log_pipe[0]);
	close(log_pipe[1]);
	ecw_job_block_reset();
	ecw_metrics_reset();
	return 0;
}

/* What the log got since the last call. */
static const char *logged(void)
{
	static char got[65536];
	size_t have = 0;
	ssize_t n;

	while (have < sizeof(got) - 1 && (n = read(log_pipe[0], got + have, sizeof(got) - 1 - have)) > 0)
		have += (size_t)n;
	got[have] = '\0';
	return got;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static bool gauge_is(const char *job, const char *table, int value)
{
	char want[256];
	char *page = ecw_metrics_render();
	bool found;

	snprintf(want, sizeof(want), "ecw_job_blocked{job=\"%s\",table=\"%s\"} %d\n", job, table, value);
	found = page && strstr(page, want);
	free(page);
	return found;
}

static void test_job_block__gauge_and_line_once_a_minute(void **state)
{
	const char *got;

	(void)state;
	ecw_job_block_note("by-email", "Employes", NULL, 1000);
	got = logged();
	assert_int_equal(count(got, "\"event\":\"job_blocked\""), 1);
	assert_non_null(strstr(got, "\"job\":\"by-email\""));
	assert_non_null(strstr(got, "\"table\":\"Employes\""));
	assert_true(gauge_is("by-email", "Employes", 1));
	assert_true(ecw_job_block_is_blocked("by-email", "Employes"));

	/* Within the minute: held again, not said again. */
	ecw_job_block_note("by-email", "Employes", NULL, 30000);
	ecw_job_block_note("by-email", "Employes", NULL, 60999);
	assert_int_equal(count(logged(), "job_blocked"), 0);
	/* A minute after the line: said again. */
	ecw_job_block_note("by-email", "Employes", NULL, 61000);
	assert_int_equal(count(logged(), "\"event\":\"job_blocked\""), 1);
	/* Another table of the same job is its own pair. */
	ecw_job_block_note("by-email", "EmailIndex", NULL, 61001);
	assert_int_equal(count(logged(), "\"table\":\"EmailIndex\""), 1);
	assert_true(gauge_is("by-email", "EmailIndex", 1));
}

static void test_job_block__success_clears_the_job_only(void **state)
{
	const char *got;

	(void)state;
	ecw_job_block_note("by-email", "Employes", NULL, 1000);
	ecw_job_block_note("by-email", "EmailIndex", NULL, 1000);
	ecw_job_block_note("fanout-names", "Customer", NULL, 1000);
	(void)logged();
	ecw_job_block_clear("by-email");
	got = logged();
	assert_int_equal(count(got, "\"event\":\"job_unblocked\""), 2);
	assert_true(gauge_is("by-email", "Employes", 0));
	assert_true(gauge_is("by-email", "EmailIndex", 0));
	assert_true(gauge_is("fanout-names", "Customer", 1));
	assert_false(ecw_job_block_is_blocked("by-email", "Employes"));
	assert_true(ecw_job_block_is_blocked("fanout-names", "Customer"));
	/* Cleared again: nothing to say. */
	ecw_job_block_clear("by-email");
	assert_int_equal(count(logged(), "job_unblocked"), 0);
	/* Blocked again after the clear: said at once, whatever the minute. */
	ecw_job_block_note("by-email", "Employes", NULL, 2000);
	assert_int_equal(count(logged(), "\"event\":\"job_blocked\""), 1);
	assert_true(gauge_is("by-email", "Employes", 1));
}

/* Past the cap a pair is still said, not tracked (names come from the
 * configuration, so the cap is far above any real count). */
static void test_job_block__cap(void **state)
{
	char table[32];

	(void)state;
	for (int i = 0; i < ECW_JOB_BLOCK_MAX + 3; i++) {
		snprintf(table, sizeof(table), "Table%d", i);
		ecw_job_block_note("j", table, NULL, 1000);
	}
	assert_int_equal(count(logged(), "\"event\":\"job_blocked\""), ECW_JOB_BLOCK_MAX + 3);
	assert_true(ecw_job_block_is_blocked("j", "Table0"));
	snprintf(table, sizeof(table), "Table%d", ECW_JOB_BLOCK_MAX);
	assert_false(ecw_job_block_is_blocked("j", table));
	ecw_job_block_clear("j");
	assert_false(ecw_job_block_is_blocked("j", "Table0"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_block__gauge_and_line_once_a_minute, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_block__success_clears_the_job_only, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_block__cap, setup, teardown),
	};
	return cmocka_run_group_tests_name("job_block", tests, NULL, NULL);
}
