/* SPDX-License-Identifier: MIT */
/* test_schedule.c - `schedules:`: the period math (the hour, UTC midnight and
 * Monday 00:00 UTC, across a year boundary and before the epoch), `at`, the
 * window_start of previous and current windows, the marker keys, the catch-up
 * list, and the section's checks through the real configuration parser and
 * the test-only job types (test-record is keyless and declares its fields and
 * window; test-noop is keyed); and audit schedules (audit: JOB, over a move
 * job, which can be audited): their keys, defaults and refusals. */
#include "support.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ecw_config.h"
#include "schedule.h"

#define FILE_NAME "s.yaml"
#define H ECW_SCHEDULE_HOUR_MS
#define D ECW_SCHEDULE_DAY_MS
#define W ECW_SCHEDULE_WEEK_MS

/* Unix ms of a UTC date and time. */
static int64_t utc(int y, int mo, int d, int h, int mi)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d, tm.tm_hour = h, tm.tm_min = mi;
	return (int64_t)timegm(&tm) * 1000;
}

#define PREFIX                                                                                               \
	"jobs:\n"                                                                                            \
	"  tank-daily: {type: test-record, table: Rollups, fields: [device], window: 1d}\n"                  \
	"  tank-weekly: {type: test-record, table: Rollups, fields: [device], window: 1w}\n"                 \
	"  purge-logins: {type: test-record, table: Purged}\n"                                               \
	"  two-fields: {type: test-record, table: Two, fields: [device, region]}\n"                          \
	"  keyed: {type: test-noop}\n"

static struct ecw_config *parse_ok(const char *text)
{
	return config_parse_ok(text, FILE_NAME);
}

/* text (after PREFIX) has exactly one error, at LINE:COL, containing needle. */
static void one_error(const char *body, const char *pos, const char *needle)
{
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;
	char text[4096], prefix[64];
	int err;

	snprintf(text, sizeof(text), "%s%s", PREFIX, body);
	snprintf(prefix, sizeof(prefix), FILE_NAME ":%s: ", pos);
	ecw_node_errors_init(&errs);
	err = ecw_config_parse(&cfg, text, strlen(text), FILE_NAME, &errs);
	assert_null(cfg);
	if (err != ECW_EINVALID || errs.n != 1 || !str_starts(errs.lines[0], prefix) ||
	    !str_contains(errs.lines[0], needle)) {
		config_dump(&errs);
		fail_msg("parse of\n%s\n= %s with %zu errors, want one at %s containing \"%s\"", body,
		         ecw_error_name(err), errs.n, pos, needle);
	}
	ecw_node_errors_dispose(&errs);
}

static void key_is(int64_t period, const char *want)
{
	char got[32];

	assert_int_equal(ecw_schedule_marker_key(got, sizeof(got), period), 0);
	assert_str(got, want);
}

/* ---- period math ----------------------------------------------------------------- */

static void test_schedule__alignment(void **state)
{
	(void)state;
	int64_t t = utc(2020, 10, 11, 10, 37) + 12345; /* a Sunday */

	assert_int_equal(ecw_schedule_period_start(t, H), utc(2020, 10, 11, 10, 0));
	assert_int_equal(ecw_schedule_period_start(t, D), utc(2020, 10, 11, 0, 0));
	assert_int_equal(ecw_schedule_period_start(t, W), utc(2020, 10, 5, 0, 0));
	/* A start is its own period's start. */
	assert_int_equal(ecw_schedule_period_start(utc(2020, 10, 5, 0, 0), W), utc(2020, 10, 5, 0, 0));
	assert_int_equal(ecw_schedule_period_start(utc(2020, 10, 5, 0, 0) - 1, W), utc(2020, 9, 28, 0, 0));
	/* Weeks across a year boundary: 2021-01-01 is a Friday of the week of
	 * Monday 2020-12-28, and 2021-01-04 is the next Monday. */
	assert_int_equal(ecw_schedule_period_start(utc(2021, 1, 1, 12, 0), W), utc(2020, 12, 28, 0, 0));
	assert_int_equal(ecw_schedule_period_start(utc(2021, 1, 3, 23, 59) + 59999, W),
	                 utc(2020, 12, 28, 0, 0));
	assert_int_equal(ecw_schedule_period_start(utc(2021, 1, 4, 0, 0), W), utc(2021, 1, 4, 0, 0));
	assert_int_equal(ecw_schedule_period_start(utc(2020, 12, 31, 23, 59), D), utc(2020, 12, 31, 0, 0));
	assert_int_equal(ecw_schedule_period_start(utc(2021, 1, 1, 0, 0) - 1, H), utc(2020, 12, 31, 23, 0));
	/* Before the epoch (the division rounds down, not toward zero):
	 * 1969-12-31 is a Wednesday. */
	assert_int_equal(ecw_schedule_period_start(utc(1969, 12, 31, 5, 0), W), utc(1969, 12, 29, 0, 0));
	assert_int_equal(ecw_schedule_period_start(utc(1969, 12, 31, 5, 30), H), utc(1969, 12, 31, 5, 0));
	assert_int_equal(ecw_schedule_period_start(utc(1970, 1, 1, 0, 0), W), utc(1969, 12, 29, 0, 0));
}

static void test_schedule__window_start_and_marker_key(void **state)
{
	char ws[32];
	(void)state;

	assert_int_equal(
	    ecw_schedule_window_start(ws, sizeof(ws), utc(2021, 1, 1, 0, 0), D, ECW_WINDOW_PREVIOUS), 0);
	assert_str(ws, "2020-12-31");
	assert_int_equal(
	    ecw_schedule_window_start(ws, sizeof(ws), utc(2021, 1, 1, 0, 0), D, ECW_WINDOW_CURRENT), 0);
	assert_str(ws, "2021-01-01");
	assert_int_equal(
	    ecw_schedule_window_start(ws, sizeof(ws), utc(2021, 1, 1, 0, 0), H, ECW_WINDOW_PREVIOUS), 0);
	assert_str(ws, "2020-12-31T23:00:00Z");
	assert_int_equal(
	    ecw_schedule_window_start(ws, sizeof(ws), utc(2021, 1, 1, 7, 0), H, ECW_WINDOW_CURRENT), 0);
	assert_str(ws, "2021-01-01T07:00:00Z");
	assert_int_equal(
	    ecw_schedule_window_start(ws, sizeof(ws), utc(2021, 1, 4, 0, 0), W, ECW_WINDOW_PREVIOUS), 0);
	assert_str(ws, "2020-12-28");
	assert_int_equal(
	    ecw_schedule_window_start(ws, sizeof(ws), utc(2021, 1, 4, 0, 0), W, ECW_WINDOW_CURRENT), 0);
	assert_str(ws, "2021-01-04");
	/* Too small a buffer is an error, not a cut value. */
	assert_int_equal(ecw_schedule_window_start(ws, 8, utc(2021, 1, 4, 0, 0), W, ECW_WINDOW_CURRENT),
	                 ECW_EINVALID);

	key_is(utc(2020, 10, 11, 0, 0), "2020-10-11T00:00Z");
	key_is(utc(2020, 10, 11, 13, 0), "2020-10-11T13:00Z");
	/* Keys sort as time does. */
	char a[32], b[32];
	assert_int_equal(ecw_schedule_marker_key(a, sizeof(a), utc(2020, 12, 31, 23, 0)), 0);
	assert_int_equal(ecw_schedule_marker_key(b, sizeof(b), utc(2021, 1, 1, 0, 0)), 0);
	assert_true(strcmp(a, b) < 0);
}

/* The latest catch_up due periods, oldest first: a period is due once its
 * start + at has come. */
static void test_schedule__due_and_catch_up(void **state)
{
	int64_t due[7];
	(void)state;

	/* Daily at 00:10: at 00:05 today's firing has not come yet. */
	assert_int_equal(ecw_schedule_due(due, 3, utc(2020, 10, 11, 0, 5), D, 10 * 60000), 3);
	assert_int_equal(due[0], utc(2020, 10, 8, 0, 0));
	assert_int_equal(due[1], utc(2020, 10, 9, 0, 0));
	assert_int_equal(due[2], utc(2020, 10, 10, 0, 0));
	/* At 00:10 exactly it has. */
	assert_int_equal(ecw_schedule_due(due, 3, utc(2020, 10, 11, 0, 10), D, 10 * 60000), 3);
	assert_int_equal(due[2], utc(2020, 10, 11, 0, 0));
	assert_int_equal(due[0], utc(2020, 10, 9, 0, 0));
	/* Hourly at 00:30, catch_up 1: only the latest. */
	assert_int_equal(ecw_schedule_due(due, 1, utc(2020, 10, 11, 13, 29), H, 30 * 60000), 1);
	assert_int_equal(due[0], utc(2020, 10, 11, 12, 0));
	/* Weekly, Tuesday 03:00 (27:00 from Monday), across the year boundary:
	 * on Monday 2021-01-04 the week of 2020-12-28 is the latest due. */
	assert_int_equal(ecw_schedule_due(due, 2, utc(2021, 1, 4, 12, 0), W, 27 * H), 2);
	assert_int_equal(due[0], utc(2020, 12, 21, 0, 0));
	assert_int_equal(due[1], utc(2020, 12, 28, 0, 0));
	assert_int_equal(ecw_schedule_due(due, 2, utc(2021, 1, 5, 3, 0), W, 27 * H), 2);
	assert_int_equal(due[1], utc(2021, 1, 4, 0, 0));
	/* Seven in a row, one period apart. */
	assert_int_equal(ecw_schedule_due(due, 7, utc(2020, 10, 11, 5, 0), D, 0), 7);
	for (int i = 0; i < 7; i++)
		assert_int_equal(due[i], utc(2020, 10, 5 + i, 0, 0));
}

/* ---- the section ----------------------------------------------------------------- */

static void test_schedule__parse(void **state)
{
	struct ecw_config *cfg;
	const struct ecw_schedule *s;
	(void)state;

	cfg = parse_ok(
	    PREFIX
	    "schedules:\n"
	    "  - job: tank-daily\n"
	    "    every: 1d\n"
	    "    at: \"00:10\"\n"
	    "    for_each: {table: Devices, field: RowKey}\n"
	    "    window: previous\n"
	    "  - {job: tank-weekly, every: 1w, at: \"27:30\", window: current, name: weekly,\n"
	    "     catch_up: 2, for_each: {table: Devices, field: Owner, as: device, filter: \"Active eq true\"}}\n"
	    "  - {job: purge-logins, every: 1d, at: \"03:00\"}\n"
	    "  - {job: purge-logins, every: 1h, name: purge-hourly}\n");
	assert_int_equal(ecw_schedules_count(cfg->schedules), 4);
	s = ecw_schedules_get(cfg->schedules, 0);
	assert_str(s->name, "tank-daily");
	assert_str(s->job, "tank-daily");
	assert_int_equal(s->every_ms, D);
	assert_int_equal(s->at_ms, 10 * 60000);
	assert_int_equal(s->catch_up, 7);
	assert_int_equal(s->window, ECW_WINDOW_PREVIOUS);
	assert_str(s->table, "Devices");
	assert_str(s->field, "RowKey");
	assert_str(s->as, "device"); /* the job's one message field */
	assert_null(s->filter);
	s = ecw_schedules_get(cfg->schedules, 1);
	assert_str(s->name, "weekly");
	assert_int_equal(s->every_ms, W);
	assert_int_equal(s->at_ms, 27 * H + 30 * 60000);
	assert_int_equal(s->catch_up, 2);
	assert_int_equal(s->window, ECW_WINDOW_CURRENT);
	assert_str(s->field, "Owner");
	assert_str(s->filter, "Active eq true");
	s = ecw_schedules_get(cfg->schedules, 2);
	assert_str(s->name, "purge-logins");
	assert_int_equal(s->at_ms, 3 * H);
	assert_null(s->table);
	assert_int_equal(s->window, ECW_WINDOW_NONE);
	s = ecw_schedules_get(cfg->schedules, 3);
	assert_int_equal(s->every_ms, H);
	assert_int_equal(s->at_ms, 0);
	assert_null(ecw_schedules_get(cfg->schedules, 4));
	/* The marker table and lease: defaults. */
	assert_str(cfg->worker.schedule_table, "EcwSchedules");
	assert_int_equal(cfg->worker.schedule_lease_ms, 120000);
	ecw_config_free(cfg);

	cfg = parse_ok(PREFIX "worker: {schedule_table: Timetable, schedule_lease: 30s}\nschedules:\n");
	assert_int_equal(ecw_schedules_count(cfg->schedules), 0);
	assert_null(cfg->schedules);
	assert_str(cfg->worker.schedule_table, "Timetable");
	assert_int_equal(cfg->worker.schedule_lease_ms, 30000);
	ecw_config_free(cfg);
}

static void test_schedule__config_errors(void **state)
{
	(void)state;
	/* PREFIX is 6 lines: the schedules start on line 7. */
	one_error("schedules:\n  - {job: nope, every: 1d}\n", "8:11",
	          "schedules[0].job names 'nope', which is not a configured job");
	one_error(
	    "schedules:\n  - {job: keyed, every: 1d}\n", "8:11",
	    "'keyed' is a test-noop job, which takes an entity's keys (a schedule can only enqueue a keyless job)");
	one_error(
	    "schedules:\n  - {job: tank-daily, every: 1h, window: previous, for_each: {table: Devices, field: RowKey}}\n",
	    "8:42", "schedules[0].window: previous needs every: 1d to match the job's window 1d");
	one_error("schedules:\n  - {job: purge-logins, every: 1d, window: current}\n", "8:44",
	          "job 'purge-logins' (test-record) does not work on a window");
	one_error(
	    "schedules:\n  - {job: tank-daily, every: 1d}\n", "8:5",
	    "job 'tank-daily' reads the message field(s) device, and a schedule provides one, from for_each");
	one_error(
	    "schedules:\n  - {job: two-fields, every: 1d, for_each: {table: Devices, field: RowKey}}\n",
	    "8:44",
	    "give `as`, the message field that receives the value (job 'two-fields' reads device, region)");
	one_error(
	    "schedules:\n  - {job: two-fields, every: 1d, for_each: {table: Devices, field: RowKey, as: region}}\n",
	    "8:5", "job 'two-fields' reads the message field(s) device, region");
	one_error(
	    "schedules:\n  - {job: tank-daily, every: 1d, for_each: {table: Devices, field: RowKey, as: dev}}\n",
	    "8:80", "for_each.as: job 'tank-daily' reads no field 'dev' (it reads device)");
	one_error(
	    "schedules:\n  - {job: purge-logins, every: 1d, for_each: {table: Devices, field: RowKey}}\n",
	    "8:46", "job 'purge-logins' reads no message field: drop for_each");
	one_error("schedules:\n  - {job: purge-logins, every: 2h}\n", "8:32",
	          "schedules[0].every must be 1h, 1d or 1w");
	one_error("schedules:\n  - {job: purge-logins}\n", "8:5", "missing required key 'every'");
	one_error("schedules:\n  - {job: purge-logins, every: 1h, at: \"01:00\"}\n", "8:40",
	          "must be \"00:MM\" with every: 1h");
	one_error("schedules:\n  - {job: purge-logins, every: 1d, at: \"24:00\"}\n", "8:40",
	          "00:00..23:59 UTC");
	one_error("schedules:\n  - {job: purge-logins, every: 1d, at: \"3:00\"}\n", "8:40",
	          "must be \"HH:MM\"");
	one_error("schedules:\n  - {job: purge-logins, every: 1w, at: \"168:00\"}\n", "8:40",
	          "(00:00..167:59)");
	one_error("schedules:\n  - {job: purge-logins, every: 1d, window: last}\n", "8:44",
	          "window must be previous or current");
	one_error("schedules:\n  - {job: purge-logins, every: 1d, catch_up: 0}\n", "8:46",
	          "out of range (1..1000)");
	one_error("schedules:\n  - {job: purge-logins, every: 1d, cron: x}\n", "8:36", "unknown key 'cron'");
	one_error("schedules:\n  - {job: purge-logins, every: 1d}\n  - {job: purge-logins, every: 1h}\n",
	          "9:5", "the name 'purge-logins' is taken by schedules[0]");
	one_error("schedules:\n  - {job: purge-logins, every: 1d, name: \"a/b\"}\n", "8:42",
	          "name must be 1-63 letters");
	one_error(
	    "schedules:\n  - {job: tank-daily, every: 1d, for_each: {table: \"De-vices\", field: RowKey}}\n",
	    "8:52", "for_each.table: invalid table name: a table name is a letter");
	one_error("schedules: {job: purge-logins}\n", "7:12", "schedules must be a list");
	one_error("worker: {schedule_table: \"x\"}\n", "7:26",
	          "worker.schedule_table: invalid table name: a table name is a letter");
	/* The reserved name: the same rule as the client's (ECW_TABLE_NAME_RULE). */
	one_error("worker: {schedule_table: Tables}\n", "7:26",
	          "worker.schedule_table: invalid table name: a table name is " ECW_TABLE_NAME_RULE);
	one_error("schedules:\n  - {job: tank-daily, every: 1d, for_each: {table: tables, field: RowKey}}\n",
	          "8:52", "not the reserved name 'tables'");
	one_error("worker: {schedule_lease: 0s}\n", "7:26", "worker.schedule_lease is out of range (1s..1h)");
}

/* ---- audit schedules ------------------------------------------------------------- */

/* PREFIX and a job that can be audited: the schedules start on line 8. */
#define AUDIT_PREFIX PREFIX "  archive: {type: move, from: Src, to: Dst}\n"

/* body (after AUDIT_PREFIX) has exactly one error, at LINE:COL, containing needle. */
static void one_audit_error(const char *body, const char *pos, const char *needle)
{
	char text[4096];

	snprintf(text, sizeof(text), "  archive: {type: move, from: Src, to: Dst}\n%s", body);
	one_error(text, pos, needle);
}

static void test_schedule__parse_audit(void **state)
{
	struct ecw_config *cfg;
	const struct ecw_schedule *s;
	(void)state;

	cfg = parse_ok(AUDIT_PREFIX "schedules:\n"
	                            "  - {audit: archive, every: 1d, at: \"02:30\", repair: true, rate: 20}\n"
	                            "  - {audit: archive, every: 1w, name: archive-weekly, catch_up: 2}\n"
	                            "  - {job: purge-logins, every: 1d}\n");
	assert_int_equal(ecw_schedules_count(cfg->schedules), 3);
	s = ecw_schedules_get(cfg->schedules, 0);
	assert_true(s->audit);
	assert_str(s->job, "archive");
	assert_str(s->name, "archive"); /* the job's name, as for job: */
	assert_int_equal(s->every_ms, D);
	assert_int_equal(s->at_ms, 2 * H + 30 * 60000);
	assert_true(s->repair);
	assert_int_equal(s->rate, 20);
	assert_null(s->table);
	assert_int_equal(s->window, ECW_WINDOW_NONE);
	s = ecw_schedules_get(cfg->schedules, 1);
	assert_true(s->audit);
	assert_str(s->name, "archive-weekly");
	assert_false(s->repair); /* read-only unless repair: true */
	assert_int_equal(s->rate, 100);
	assert_int_equal(s->catch_up, 2);
	s = ecw_schedules_get(cfg->schedules, 2);
	assert_false(s->audit);
	assert_str(s->job, "purge-logins");
	ecw_config_free(cfg);
}

static void test_schedule__audit_config_errors(void **state)
{
	(void)state;
	/* AUDIT_PREFIX is 7 lines: the schedules start on line 8. */
	one_audit_error("schedules:\n  - {audit: nope, every: 1d}\n", "9:13",
	                "schedules[0].audit names 'nope', which is not a configured job");
	one_audit_error(
	    "schedules:\n  - {audit: purge-logins, every: 1d}\n", "9:13",
	    "schedules[0].audit: job 'purge-logins' is of type test-record, which cannot be audited");
	one_audit_error("schedules:\n  - {audit: archive, job: archive, every: 1d}\n", "9:27",
	                "schedules[0]: give job or audit, not both");
	one_audit_error(
	    "schedules:\n  - {audit: archive, every: 1d, for_each: {table: Devices, field: RowKey}}\n",
	    "9:43", "schedules[0].for_each is not for an audit schedule");
	one_audit_error("schedules:\n  - {audit: archive, every: 1d, window: previous}\n", "9:41",
	                "schedules[0].window is not for an audit schedule");
	one_audit_error("schedules:\n  - {audit: archive, every: 1d, rate: 0}\n", "9:39", "out of range");
	one_audit_error("schedules:\n  - {audit: archive, every: 1d, rate: fast}\n", "9:39", "rate");
	one_audit_error("schedules:\n  - {audit: archive, every: 1d, repair: maybe}\n", "9:41", "repair");
	one_audit_error("schedules:\n  - {audit: archive}\n", "9:5", "missing required key 'every'");
	one_audit_error("schedules:\n  - {job: purge-logins, every: 1d, repair: true}\n", "9:44",
	                "schedules[0].repair is for an audit schedule (audit: JOB)");
	one_audit_error("schedules:\n  - {job: purge-logins, every: 1d, rate: 5}\n", "9:42",
	                "schedules[0].rate is for an audit schedule");
	one_audit_error("schedules:\n  - {every: 1d}\n", "9:5", "missing required key 'job' (or 'audit')");
	one_audit_error("schedules:\n  - {audit: archive, every: 1d}\n  - {audit: archive, every: 1h}\n",
	                "10:5", "the name 'archive' is taken by schedules[0]");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_schedule__alignment),
	    cmocka_unit_test(test_schedule__window_start_and_marker_key),
	    cmocka_unit_test(test_schedule__due_and_catch_up),
	    cmocka_unit_test(test_schedule__parse),
	    cmocka_unit_test(test_schedule__config_errors),
	    cmocka_unit_test(test_schedule__parse_audit),
	    cmocka_unit_test(test_schedule__audit_config_errors),
	};
	return cmocka_run_group_tests_name("schedule", tests, NULL, NULL);
}
