/* SPDX-License-Identifier: MIT */
/* test_status.c - `ecworker status` against a real Azurite (build/ecworker-test
 * as a process): the approximate depth of the job and poison queues, the age
 * of their oldest visible message, the poison messages counted by job and
 * reason (more than one peek shows, so the count receives and releases), and
 * which of the tables the jobs name exist. Status only reads: afterwards every
 * message is visible again with its text unchanged, and a missing table or
 * queue is still missing. */
#include "itest.h"
#include "proc.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "poison.h"

static int st_setup(void **state)
{
	return itest_setup(state);
}

static int st_teardown(void **state)
{
	struct itest *t = *state;
	char poison[80];

	proc_cleanup();
	if (t && t->queue_used) {
		snprintf(poison, sizeof(poison), "%s-poison", t->queue);
		(void)!ecw_queue_delete_queue(t->client, poison);
	}
	return itest_teardown(state);
}

/* archive moves the fixture's table into table2 (not created); count writes
 * the fixture's table too. */
static void config(char *path, size_t cap, const struct itest *t, const char *queue)
{
	char text[2048];
	int k = snprintf(text, sizeof(text),
	                 "storage:\n"
	                 "  connection_string: ${ECW_TEST_CONNECTION_STRING}\n"
	                 "worker:\n"
	                 "  queue: %s\n"
	                 "log: {level: info, format: json}\n"
	                 "metrics: {listen: \"\"}\n"
	                 "jobs:\n"
	                 "  archive: {type: move, from: %s, to: %s}\n"
	                 "  count: {type: test-count, table: %s}\n",
	                 queue, t->table, t->table2, t->table);
	assert_true(k > 0 && (size_t)k < sizeof(text));
	proc_write_file(path, cap, "status.yaml", text);
}

/* `status -c path [a1 [a2 [a3]]]` (NULL ends them) must exit want; returns
 * stdout (free it). */
static char *status_run(const char *path, const char *a1, const char *a2, const char *a3, int want)
{
	char *out = NULL, *err = NULL;
	const char *args[] = {"status", "-c", path, a1, a1 ? a2 : NULL, a1 && a2 ? a3 : NULL, NULL};
	int code = proc_run(&out, &err, "status", args, NULL, 30000);

	if (code != want)
		fail_msg("status exited %d, expected %d\n-- stdout:\n%s\n-- stderr:\n%s", code, want, out,
		         err);
	free(err);
	return out;
}

static struct json_object *get(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;
	ITEST_CHECK(json_object_object_get_ex(o, key, &v), "no \"%s\" in %s", key,
	            json_object_to_json_string(o));
	return v;
}

/* The count in by_job_and_reason for job/reason, 0 when absent. */
static long long tally(struct json_object *pq, const char *job, const char *reason)
{
	struct json_object *rows = get(pq, "by_job_and_reason");
	for (size_t i = 0; i < json_object_array_length(rows); i++) {
		struct json_object *r = json_object_array_get_idx(rows, i);
		if (strcmp(json_object_get_string(get(r, "job")), job) == 0 &&
		    strcmp(json_object_get_string(get(r, "reason")), reason) == 0)
			return json_object_get_int64(get(r, "count"));
	}
	return 0;
}

/* What the poison queue should hold: 20 archive/permanent, 7
 * archive/max-dequeue, 6 count/permanent, 4 foreign. */
#define N_POISON 37

static void fill_poison(char texts[N_POISON][512], struct itest *t, const char *poison)
{
	for (int i = 0; i < N_POISON; i++) {
		char rk[16];
		snprintf(rk, sizeof(rk), "r%02d", i);
		if (i >= 33) {
			snprintf(texts[i], 512, "a foreign poison message %d: \"Zo\xc3\xab\" \\", i);
		} else {
			const char *job = i < 27 ? "archive" : "count";
			const char *reason = i >= 20 && i < 27 ? "max-dequeue" : "permanent";
			struct ecw_buf b;
			struct ecw_poison_info info = {.original = "{\"job\":\"x\"}",
			                               .original_len = 11,
			                               .queue = t->queue,
			                               .message_id = "m",
			                               .inserted_at = time(NULL) - 100,
			                               .dequeue_count = 1,
			                               .failed_at = time(NULL) - 50,
			                               .reason = reason,
			                               .error = "e",
			                               .job = job,
			                               .pk = "p",
			                               .rk = rk,
			                               .worker = "w"};
			ecw_buf_init(&b, 512);
			ECW_ASSERT_OK(ecw_poison_envelope(&b, &info));
			snprintf(texts[i], 512, "%s", ecw_buf_cstr(&b));
			ecw_buf_dispose(&b);
		}
		ECW_ASSERT_OK(ecw_queue_put(NULL, t->client, poison, texts[i], strlen(texts[i]), NULL));
	}
}

/* Every message of queue is visible, and the texts are exactly want's (in
 * any order). Leaves them hidden. */
static void expect_texts(struct itest *t, const char *queue, char want[][512], size_t n)
{
	bool *seen = calloc(n + 1, sizeof(bool));
	size_t got = 0;

	assert_non_null(seen);
	for (;;) {
		struct ecw_queue_msg *m = NULL;
		size_t k = 0;
		ECW_ASSERT_OK(ecw_queue_receive(&m, &k, t->client, queue, 32, 120));
		if (k == 0)
			break;
		for (size_t i = 0; i < k; i++, got++) {
			size_t j;
			for (j = 0; j < n && (seen[j] || strcmp(want[j], m[i].text) != 0); j++)
				;
			ITEST_CHECK(j < n, "%s holds an unexpected or changed message: %s", queue, m[i].text);
			seen[j] = true;
		}
		ecw_queue_msgs_free(m, k);
	}
	ITEST_CHECK(got == n, "%zu visible messages on %s, expected %zu", got, queue, n);
	free(seen);
}

static void test_status__json_reports_queues_poison_and_tables(void **state)
{
	struct itest *t = *state;
	char path[640], poison[80];
	char jobs[5][512], texts[N_POISON][512];
	struct ecw_entity *e = NULL;

	itest_queue(t);
	itest_table(t); /* the move's source; table2, its target, stays missing */
	snprintf(poison, sizeof(poison), "%s-poison", t->queue);
	ECW_ASSERT_OK(ecw_queue_create(NULL, t->client, poison));
	for (int i = 0; i < 5; i++) {
		snprintf(jobs[i], sizeof(jobs[i]), "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"r%d\"}", i);
		ECW_ASSERT_OK(ecw_queue_put(NULL, t->client, t->queue, jobs[i], strlen(jobs[i]), NULL));
	}
	/* The job queue's oldest message is then at least 2 s old. */
	itest_sleep_ms(3000);
	fill_poison(texts, t, poison);
	config(path, sizeof(path), t, t->queue);

	char *out = status_run(path, "--json", NULL, NULL, 0);
	struct json_object *o = json_tokener_parse(out);
	ITEST_CHECK(o && json_object_is_type(o, json_type_object), "not one JSON object: %s", out);

	struct json_object *q = get(o, "queue"), *pq = get(o, "poison_queue");
	assert_string_equal(json_object_get_string(get(q, "name")), t->queue);
	assert_int_equal(json_object_get_int64(get(q, "approximate_messages")), 5);
	long long age = json_object_get_int64(get(q, "oldest_visible_age_s"));
	ITEST_CHECK(age >= 2 && age < 600, "job queue oldest_visible_age_s %lld, expected >= 2", age);
	assert_string_equal(json_object_get_string(get(pq, "name")), poison);
	assert_int_equal(json_object_get_int64(get(pq, "approximate_messages")), N_POISON);
	ITEST_CHECK(json_object_get_type(get(pq, "oldest_visible_age_s")) == json_type_int,
	            "no oldest_visible_age_s for the poison queue: %s", out);
	assert_int_equal(json_object_get_int64(get(pq, "scanned")), N_POISON);
	assert_true(json_object_get_boolean(get(pq, "scan_complete")));
	assert_int_equal(tally(pq, "archive", "permanent"), 20);
	assert_int_equal(tally(pq, "archive", "max-dequeue"), 7);
	assert_int_equal(tally(pq, "count", "permanent"), 6);
	assert_int_equal(tally(pq, "(foreign)", "-"), 4);
	assert_int_equal(json_object_array_length(get(pq, "by_job_and_reason")), 4);

	struct json_object *tables = get(o, "tables");
	assert_int_equal(json_object_array_length(tables), 2);
	for (size_t i = 0; i < 2; i++) {
		struct json_object *row = json_object_array_get_idx(tables, i);
		const char *name = json_object_get_string(get(row, "name"));
		bool want = strcmp(name, t->table) == 0;
		ITEST_CHECK(want || strcmp(name, t->table2) == 0, "an unexpected table %s", name);
		ITEST_CHECK(json_object_get_boolean(get(row, "exists")) == want, "table %s: exists is %s",
		            name, want ? "false" : "true");
	}
	json_object_put(o);
	free(out);

	/* The plain form says the same in words. */
	out = status_run(path, NULL, NULL, NULL, 0);
	ITEST_CHECK(strstr(out, t->queue) && strstr(out, poison) && strstr(out, "missing") &&
	                strstr(out, "exists"),
	            "status output:\n%s", out);
	free(out);

	/* Status changed nothing: the missing table is still missing, every
	 * message is visible with its text. */
	ECW_ASSERT_ERR(ecw_table_get(&e, t->client, t->table2, "p", "r"), ECW_ENOTABLE);
	assert_string_equal(ecw_error_last()->service_code, "TableNotFound");
	expect_texts(t, poison, texts, N_POISON);
	expect_texts(t, t->queue, jobs, 5);
	proc_assert_logs_clean();
}

/* --scan N counts at most N poison messages and still releases them all. */
static void test_status__scan_limit_counts_part(void **state)
{
	struct itest *t = *state;
	char path[640], poison[80], texts[N_POISON][512];

	itest_queue(t);
	snprintf(poison, sizeof(poison), "%s-poison", t->queue);
	ECW_ASSERT_OK(ecw_queue_create(NULL, t->client, poison));
	fill_poison(texts, t, poison);
	config(path, sizeof(path), t, t->queue);

	char *sout = status_run(path, "--json", "--scan", "10", 0);
	struct json_object *o = json_tokener_parse(sout);
	ITEST_CHECK(o != NULL, "not JSON: %s", sout);
	struct json_object *pq = get(o, "poison_queue");
	assert_int_equal(json_object_get_int64(get(pq, "scanned")), 10);
	assert_false(json_object_get_boolean(get(pq, "scan_complete")));
	long long sum = 0;
	struct json_object *rows = get(pq, "by_job_and_reason");
	for (size_t i = 0; i < json_object_array_length(rows); i++)
		sum += json_object_get_int64(get(json_object_array_get_idx(rows, i), "count"));
	assert_int_equal(sum, 10);
	json_object_put(o);
	free(sout);
	expect_texts(t, poison, texts, N_POISON);
	proc_assert_logs_clean();
}

/* Status on queues and tables that do not exist says so and creates none
 * of them. */
static void test_status__creates_nothing(void **state)
{
	struct itest *t = *state;
	char path[640], poison[80];
	char *out = NULL, *err = NULL;
	bool created = false;

	config(path, sizeof(path), t, t->queue);
	const char *args[] = {"status", "-c", path, "--json", NULL};
	int code = proc_run(&out, &err, "status-missing", args, NULL, 30000);
	/* Queues not created yet are reported as missing, not as a failure. */
	ITEST_CHECK(code == 0, "status exited %d:\n%s\n%s", code, out, err);
	struct json_object *o = json_tokener_parse(out);
	ITEST_CHECK(o != NULL, "status --json printed: %s", out);
	struct json_object *q = json_object_object_get(o, "queue"),
	                   *p = json_object_object_get(o, "poison_queue");
	ITEST_CHECK(q && !json_object_get_boolean(json_object_object_get(q, "exists")), "queue: %s", out);
	ITEST_CHECK(p && !json_object_get_boolean(json_object_object_get(p, "exists")), "poison queue: %s",
	            out);
	json_object_put(o);
	free(out);
	free(err);
	t->queue_used = true;
	t->table_used = true;
	t->table2_used = true;
	snprintf(poison, sizeof(poison), "%s-poison", t->queue);
	ECW_ASSERT_OK(ecw_queue_create(&created, t->client, t->queue));
	ITEST_CHECK(created, "status created the job queue %s", t->queue);
	ECW_ASSERT_OK(ecw_queue_create(&created, t->client, poison));
	ITEST_CHECK(created, "status created the poison queue %s", poison);
	ECW_ASSERT_OK(ecw_table_create(&created, t->client, t->table));
	ITEST_CHECK(created, "status created the table %s", t->table);
	ECW_ASSERT_OK(ecw_table_create(&created, t->client, t->table2));
	ITEST_CHECK(created, "status created the table %s", t->table2);
	proc_assert_logs_clean();
}

static void test_status__help_names_every_option(void **state)
{
	(void)state;
	static const char *const opts[] = {"--config", "--json", "--scan", "--help", NULL};
	char *out = NULL;

	assert_int_equal(
	    proc_run(&out, NULL, "status-help", (const char *const[]){"status", "--help", NULL}, NULL, 10000),
	    0);
	for (size_t i = 0; opts[i]; i++)
		ITEST_CHECK(strstr(out, opts[i]) != NULL, "status --help does not mention %s:\n%s", opts[i],
		            out);
	free(out);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_status__json_reports_queues_poison_and_tables, st_setup,
	                                    st_teardown),
	    cmocka_unit_test_setup_teardown(test_status__scan_limit_counts_part, st_setup, st_teardown),
	    cmocka_unit_test_setup_teardown(test_status__creates_nothing, st_setup, st_teardown),
	    cmocka_unit_test_setup_teardown(test_status__help_names_every_option, st_setup, st_teardown),
	};
	return cmocka_run_group_tests_name("status", tests, NULL, NULL);
}
