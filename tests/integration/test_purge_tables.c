/* SPDX-License-Identifier: MIT */
/* test_purge_tables.c - the purge-tables job and the table listing it stands
 * on, against the real Azurite. ecw_table_list: a prefix range over several
 * pages ($top forces them), nothing outside the prefix. The job, as a process
 * (build/ecworker-test with ECW_TEST_CLOCK, so "now" is 2020-10-11T12:00Z):
 * daily tables <P>20200801..<P>20201010 plus decoys that resemble them; with
 * keep: 60d exactly the days up to 2020-08-11 go, every kept table and every
 * decoy stays, and a rerun deletes nothing more. Each test's tables carry a
 * prefix of their own (Azurite, like Azure, compares names case-insensitively,
 * and tests run in parallel). */
#include "itest.h"
#include "proc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_TABLES 128

static int64_t real_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct pt {
	struct itest *t;
	char prefix[64];
	char *made[MAX_TABLES]; /* every table this test created: teardown deletes them */
	int nmade;
};

static int pt_setup(void **state)
{
	struct pt *x = calloc(1, sizeof(*x));
	void *t = NULL;

	assert_non_null(x);
	itest_setup(&t);
	x->t = t;
	itest_unique_name(x->prefix, sizeof(x->prefix), 't', "pg");
	/* A letter last, so "its last character + 1" (the listing test's name
	 * just past the range) is still a letter: the unique name ends in a hex
	 * digit, and '9' + 1 is ':', which no table name may hold. */
	size_t n = strlen(x->prefix);
	assert_true(n + 1 < sizeof(x->prefix));
	x->prefix[n] = 'p';
	x->prefix[n + 1] = '\0';
	*state = x;
	return 0;
}

static int pt_teardown(void **state)
{
	struct pt *x = *state;
	void *t;

	if (!x)
		return 0;
	proc_cleanup();
	for (int i = 0; i < x->nmade; i++) {
		(void)!ecw_table_delete_table(x->t->client, x->made[i]);
		free(x->made[i]);
	}
	t = x->t;
	itest_teardown(&t);
	free(x);
	*state = NULL;
	return 0;
}

static void make_table(struct pt *x, const char *name)
{
	bool created = false;

	assert_true(x->nmade < MAX_TABLES);
	ECW_ASSERT_OK(ecw_table_create(&created, x->t->client, name));
	ITEST_CHECK(created, "table %s existed already", name);
	x->made[x->nmade] = strdup(name);
	assert_non_null(x->made[x->nmade]);
	x->nmade++;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static size_t count(char **v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

/* true when name is one of the account's tables (any case). */
static bool exists(char **listed, const char *name)
{
	for (size_t i = 0; listed[i]; i++)
		if (strcasecmp(listed[i], name) == 0)
			return true;
	return false;
}

/* ---- listing ---------------------------------------------------------------- */

static void test_purge_tables__list_by_prefix_over_pages(void **state)
{
	struct pt *x = *state;
	char name[96], other[96], *want[8];
	char **got = NULL;
	struct ecw_client_stats before, after;

	for (int i = 0; i < 7; i++) {
		snprintf(name, sizeof(name), "%s%d", x->prefix, i);
		make_table(x, name);
		want[i] = x->made[x->nmade - 1];
	}
	/* Just outside the range on both sides: the prefix without its last
	 * character, and with its last character + 1. */
	snprintf(other, sizeof(other), "%.*s", (int)strlen(x->prefix) - 1, x->prefix);
	make_table(x, other);
	snprintf(other, sizeof(other), "%.*s%c0", (int)strlen(x->prefix) - 1, x->prefix,
	         x->prefix[strlen(x->prefix) - 1] + 1);
	make_table(x, other);

	before = itest_stats(x->t->client);
	ECW_ASSERT_OK(ecw_table_list(&got, x->t->client, x->prefix, 3));
	after = itest_stats(x->t->client);
	assert_int_equal(count(got), 7);
	qsort(got, 7, sizeof(*got), cmp_str);
	qsort(want, 7, sizeof(*want), cmp_str);
	for (int i = 0; i < 7; i++)
		assert_string_equal(got[i], want[i]);
	/* 3 + 3 + 1: the continuation was followed twice. */
	ITEST_CHECK(after.requests - before.requests == 3, "%" PRIu64 " requests, expected 3 pages",
	            after.requests - before.requests);
	ecw_table_names_free(got);

	/* The service's default page size gives the same answer. */
	ECW_ASSERT_OK(ecw_table_list(&got, x->t->client, x->prefix, 0));
	assert_int_equal(count(got), 7);
	ecw_table_names_free(got);
	ECW_ASSERT_ERR(ecw_table_list(&got, x->t->client, "bad'prefix", 0), ECW_EINVALID);
	assert_null(got);
}

/* ---- the job, run by the worker ---------------------------------------------------- */

static void start_worker(struct proc *p, struct pt *x, const char *name)
{
	char path[640], text[2048], clock[96];
	int k = snprintf(text, sizeof(text),
	                 "# written by test_purge_tables.c\n"
	                 "storage:\n"
	                 "  connection_string: ${ECW_TEST_CONNECTION_STRING}\n"
	                 "worker:\n"
	                 "  queue: %s\n"
	                 "  poison_queue: %s\n"
	                 "  visibility_timeout: 30s\n"
	                 "  poll_interval: {min: 50ms, max: 200ms}\n"
	                 "  shutdown_grace: 5s\n"
	                 "log: {level: debug, format: json}\n"
	                 "metrics: {listen: \"\"}\n"
	                 "jobs:\n"
	                 "  purge-logins:\n"
	                 "    type: purge-tables\n"
	                 "    prefix: %s\n"
	                 "    name_date: \"%s{yyyyMMdd}\"\n"
	                 "    keep: 60d\n",
	                 x->t->queue, itest_poison(x->t), x->prefix, x->prefix);
	char file[128];

	assert_true(k > 0 && (size_t)k < sizeof(text));
	snprintf(file, sizeof(file), "%s.yaml", name);
	proc_write_file(path, sizeof(path), file, text);
	/* The simulated clock reads 2020-10-11T12:00:00Z now and runs at the
	 * real pace. */
	snprintf(clock, sizeof(clock), "ECW_TEST_CLOCK=%" PRId64 ":%" PRId64 ":1", real_wall_ms(),
	         INT64_C(1602417600000));
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {clock, NULL};
	proc_start(p, name, args, env);
}

static void put_purge(struct pt *x, char id[64])
{
	static const char text[] = "{\"job\":\"purge-logins\"}";
	struct ecw_queue_msg qm;

	memset(&qm, 0, sizeof(qm));
	ECW_ASSERT_OK(ecw_queue_put(&qm, x->t->client, x->t->queue, text, strlen(text), NULL));
	memcpy(id, qm.id, 64);
}

static void expect_detail(struct proc *p, const char *id, const char *detail)
{
	struct proc_log log;
	struct json_object *l;

	if (!proc_wait_count(p, 1, 20000, "message", "message_id", id, "outcome", "succeeded", NULL))
		fail_msg("message %s did not succeed; log %s:\n%s", id, p->log_path,
		         proc_tail(p->log_path, 30));
	proc_log_read(&log, p->log_path);
	l = proc_log_find(&log, 0, "message", "message_id", id, "outcome", "succeeded", NULL);
	assert_non_null(l);
	ITEST_CHECK(strcmp(proc_field(l, "detail"), detail) == 0, "detail '%s', expected '%s'",
	            proc_field(l, "detail"), detail);
	proc_log_dispose(&log);
}

/* Every daily table older than keep goes; nothing else does. */
static void assert_tables(struct pt *x, int ndaily, const char *const *decoys)
{
	char **listed = NULL;

	ECW_ASSERT_OK(ecw_table_list(&listed, x->t->client, NULL, 0));
	for (int i = 0; i < ndaily; i++) {
		const char *name = x->made[i];
		/* made[0..10] are 2020-08-01..11: their days ended by 08-12T00:00,
		 * before now - 60d = 08-12T12:00. */
		bool gone = i < 11;
		ITEST_CHECK(exists(listed, name) == !gone, "%s is %s", name, gone ? "still there" : "GONE");
	}
	for (int i = 0; decoys[i]; i++) {
		ITEST_CHECK(exists(listed, decoys[i]), "decoy %s was deleted", decoys[i]);
	}
	ecw_table_names_free(listed);
}

static void test_purge_tables__worker_deletes_exactly_the_expired(void **state)
{
	struct pt *x = *state;
	char name[96], id[2][64];
	char d[8][96];
	const char *decoys[9];
	struct proc p;
	int ndaily = 0;

	/* 2020-08-01 .. 2020-10-10: 31 + 30 + 10 daily tables. */
	for (int m = 8; m <= 10; m++)
		for (int day = 1; day <= (m == 8 ? 31 : m == 9 ? 30 : 10); day++, ndaily++) {
			snprintf(name, sizeof(name), "%s2020%02d%02d", x->prefix, m, day);
			make_table(x, name);
		}
	assert_int_equal(ndaily, 71);
	/* Decoys, all old enough to go if they matched. */
	snprintf(d[0], sizeof(d[0]), "%sArchive", x->prefix);
	snprintf(d[1], sizeof(d[1]), "%s2020", x->prefix);
	snprintf(d[2], sizeof(d[2]), "%s20201301", x->prefix);
	snprintf(d[3], sizeof(d[3]), "%s20200230", x->prefix);
	snprintf(d[4], sizeof(d[4]), "%s20200801x", x->prefix);
	snprintf(d[5], sizeof(d[5]), "%s202007011", x->prefix);
	snprintf(d[6], sizeof(d[6]), "%s20200701", x->prefix);
	for (char *c = d[6]; *c; c++) /* the prefix in other case: another name */
		if (*c >= 'a' && *c <= 'z')
			*c = (char)(*c - 'a' + 'A');
	snprintf(d[7], sizeof(d[7]), "%.*s20200701", (int)strlen(x->prefix) - 1, x->prefix);
	for (int i = 0; i < 8; i++) {
		make_table(x, d[i]);
		decoys[i] = d[i];
	}
	decoys[8] = NULL;
	(void)itest_queue(x->t);

	put_purge(x, id[0]);
	start_worker(&p, x, "purge");
	expect_detail(&p, id[0], "deleted 11, kept 60");
	assert_tables(x, ndaily, decoys);

	/* A rerun (a redelivery, or tomorrow's schedule at the same clock)
	 * finds nothing more to delete. */
	put_purge(x, id[1]);
	expect_detail(&p, id[1], "deleted 0, kept 60");
	assert_tables(x, ndaily, decoys);
	proc_stop(&p, 10000);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_purge_tables__list_by_prefix_over_pages, pt_setup,
	                                    pt_teardown),
	    cmocka_unit_test_setup_teardown(test_purge_tables__worker_deletes_exactly_the_expired, pt_setup,
	                                    pt_teardown),
	};
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("purge_tables", tests, NULL, NULL);
}
