/* SPDX-License-Identifier: MIT */
/* test_poison_group.c - `ecworker poison list --group-by` and `--group KEY` against a real Azurite, run as
 * an operator runs them (build/ecworker-test as a process; the fixture is poisonfx.h). The test puts 18
 * envelopes whose job, reason, error (four kinds, three of them with keys, numbers and request ids that
 * differ in every envelope) and storage answer it chooses, and two messages that are not envelopes; then
 * `list --group-by` for each dimension must print exactly the expected table (count, oldest, newest, key,
 * sorted by count then key) and the same groups in --json, also with other filters; `list --group KEY`
 * lists exactly that group's ids; `replay --group KEY` puts exactly that group's originals back on the
 * job queue and leaves every other message in place; `purge --group KEY --yes` deletes exactly that
 * group; bad values are usage errors (exit 2) that change nothing. Hostile keys are in
 * test_terminal_escapes.c, the key rules themselves in tests/unit/test_poison_group.c. */
#include "itest.h"
#include "poisonfx.h"
#include "proc.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_ENV 18
#define N_FOREIGN 2
#define N_ALL (N_ENV + N_FOREIGN)

static const char *const JOBS[2] = {"index", "archive"};
static const char *const REASONS[2] = {"permanent", "max-dequeue"};
/* The four kinds of error, normalised; the last is an envelope without one. */
static const char *const ERROR_KEYS[4] = {
    "error:GET /#/src(PartitionKey='*',RowKey='*'): # ResourceNotFound (request id #)",
    "error:delivered # times (max_dequeue_count #): the worker holding it stopped each time",
    "error:test-fail: Sales/# can never succeed",
    "error:-",
};
static const struct px_answer ANSWERS[3] = {
    {404, "ResourceNotFound"}, {409, "EntityAlreadyExists"}, {503, NULL}};
static const char *const STATUS_KEYS[5] = {"status:404 ResourceNotFound", "status:409 EntityAlreadyExists",
                                           "status:503", "status:-", "status:-"};
static const char *const FOREIGN[N_FOREIGN] = {"not json at all",
                                               "{\"job\":\"index\",\"pk\":\"p\",\"rk\":\"r\"}"};

enum dim { D_REASON, D_JOB, D_ERROR, D_STATUS };
static const char *const DIMS[4] = {"reason", "job", "error", "status"};

/* What was put: the envelopes' choices, and every message's failure time. */
struct gset {
	struct px_put p[N_ALL];
	int job[N_ENV], reason[N_ENV], error[N_ENV], status[N_ENV];
	time_t when[N_ALL]; /* envelopes: failed_at; foreign: put on the poison queue */
};

static void error_text(char *out, size_t cap, int kind, int i)
{
	if (kind == 0)
		snprintf(out, cap,
		         "GET /devstoreaccount1/src(PartitionKey='p%d',RowKey='r%d'): 404 ResourceNotFound "
		         "(request id %08x-%04x-4e8f-9a0b-%012d)",
		         i, i * 7, 0xabc0 + i * 977, i * 13, i);
	else if (kind == 1)
		snprintf(out, cap,
		         "delivered %d times (max_dequeue_count 5): the worker holding it stopped each time",
		         6 + i);
	else
		snprintf(out, cap, "test-fail: Sales/emp-%04d can never succeed", i);
}

static void put_set(struct gset *g, struct px *x)
{
	time_t t0 = time(NULL) - 10 * 86400;
	char error[256], rk[16];
	struct ecw_queue_msg *msgs = NULL;
	size_t n = 0;

	memset(g, 0, sizeof(*g));
	px_write_config(x, "  index: {type: test-noop}\n  archive: {type: test-noop}\n");
	for (int i = 0; i < N_ENV; i++) {
		g->job[i] = i % 3 == 0 ? 0 : 1;
		g->reason[i] = i % 2;
		g->error[i] = i % 4;
		g->status[i] = i % 5;
		g->when[i] = t0 + i * 3600 + i % 7;
		error_text(error, sizeof(error), g->error[i], i);
		snprintf(rk, sizeof(rk), "r%03d", i);
		px_put_job_answer(&g->p[i], x, JOBS[g->job[i]], REASONS[g->reason[i]], g->when[i],
		                  g->error[i] < 3 ? error : NULL,
		                  g->status[i] < 3 ? &ANSWERS[g->status[i]] : NULL, "p", rk);
	}
	for (int k = 0; k < N_FOREIGN; k++) {
		struct px_put *p = &g->p[N_ENV + k];
		p->text = strdup(FOREIGN[k]);
		p->len = strlen(FOREIGN[k]);
		px_put_text(p->id, x, x->poison, p->text, p->len);
	}
	/* The foreign messages' time is the service's insertion time. */
	ECW_ASSERT_OK(ecw_queue_peek(&msgs, &n, x->c, x->poison, 32));
	assert_int_equal(n, N_ALL);
	for (size_t m = 0; m < n; m++)
		for (int k = N_ENV; k < N_ALL; k++)
			if (strcmp(msgs[m].id, g->p[k].id) == 0)
				g->when[k] = msgs[m].insertion_time;
	ecw_queue_msgs_free(msgs, n);
	for (int k = N_ENV; k < N_ALL; k++)
		assert_true(g->when[k] > 0);
}

/* Message i's key in dim, written here from what was put, not by the code under test. */
static void key_of(char *out, size_t cap, const struct gset *g, enum dim d, int i)
{
	if (i >= N_ENV)
		snprintf(out, cap, "%s:(not an envelope)", DIMS[d]);
	else if (d == D_REASON)
		snprintf(out, cap, "reason:%s", REASONS[g->reason[i]]);
	else if (d == D_JOB)
		snprintf(out, cap, "job:%s", JOBS[g->job[i]]);
	else if (d == D_ERROR)
		snprintf(out, cap, "%s", ERROR_KEYS[g->error[i]]);
	else
		snprintf(out, cap, "%s", STATUS_KEYS[g->status[i]]);
}

struct xgroup {
	char key[256];
	unsigned long long count;
	time_t oldest, newest;
};

static int by_count_then_key(const void *a, const void *b)
{
	const struct xgroup *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* The expected groups of the messages for which sel[i] (NULL: all), sorted. */
static size_t expected_groups(struct xgroup *out, const struct gset *g, enum dim d, const bool *sel)
{
	size_t n = 0;

	for (int i = 0; i < N_ALL; i++) {
		char key[256];
		size_t k;

		if (sel && !sel[i])
			continue;
		key_of(key, sizeof(key), g, d, i);
		for (k = 0; k < n && strcmp(out[k].key, key) != 0; k++)
			;
		if (k == n) {
			memset(&out[n], 0, sizeof(out[n]));
			snprintf(out[n].key, sizeof(out[n].key), "%s", key);
			out[n].oldest = out[n].newest = g->when[i];
			n++;
		}
		out[k].count++;
		if (g->when[i] < out[k].oldest)
			out[k].oldest = g->when[i];
		if (g->when[i] > out[k].newest)
			out[k].newest = g->when[i];
	}
	qsort(out, n, sizeof(*out), by_count_then_key);
	return n;
}

static const char *utc(char out[32], time_t t)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return out;
}

/* The table list --group-by prints for these groups. */
static char *expected_table(const struct xgroup *v, size_t n)
{
	size_t cap = 256 + n * 512, len = 0;
	char *t = malloc(cap), a[32], b[32];

	assert_non_null(t);
	len += (size_t)snprintf(t, cap, "%7s  %-20s  %-20s  %s\n", "COUNT", "OLDEST", "NEWEST", "KEY");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(t + len, cap - len, "%7llu  %-20s  %-20s  %s\n", v[i].count,
		                        utc(a, v[i].oldest), utc(b, v[i].newest), v[i].key);
	return t;
}

/* `list --group-by DIM ARGS` prints exactly the expected table, and with --json the same groups. */
static void expect_grouped(struct px *x, const struct gset *g, enum dim d, const bool *sel,
                           const char *const *args)
{
	struct xgroup want[N_ALL];
	size_t n = expected_groups(want, g, d, sel);
	const char *argv[24];
	size_t a = 0;
	char *out = NULL, *table, t1[32], t2[32];

	argv[a++] = "--group-by";
	argv[a++] = DIMS[d];
	for (size_t i = 0; args && args[i]; i++)
		argv[a++] = args[i];
	argv[a] = NULL;
	px_cmd_expect(&out, NULL, x, 0, "list", argv);
	table = expected_table(want, n);
	ITEST_CHECK(strcmp(out, table) == 0, "list --group-by %s %s:\n-- printed:\n%s-- expected:\n%s",
	            DIMS[d], args && args[0] ? args[0] : "", out, table);
	free(table);
	free(out);

	argv[a++] = "--json";
	argv[a] = NULL;
	px_cmd_expect(&out, NULL, x, 0, "list", argv);
	size_t k = 0;
	for (char *line = out, *nl; *line; line = nl + 1, k++) {
		struct json_object *j, *v;
		nl = strchr(line, '\n');
		assert_non_null(nl);
		*nl = '\0';
		ITEST_CHECK(k < n, "list --group-by %s --json: more than %zu groups: %s", DIMS[d], n, line);
		ITEST_CHECK((j = json_tokener_parse(line)) != NULL, "not JSON: %s", line);
		ITEST_CHECK(json_object_object_get_ex(j, "key", &v) &&
		                strcmp(json_object_get_string(v), want[k].key) == 0,
		            "--json group %zu: %s, expected key %s", k, line, want[k].key);
		assert_int_equal(json_object_get_int64(json_object_object_get(j, "count")), want[k].count);
		assert_string_equal(json_object_get_string(json_object_object_get(j, "oldest")),
		                    utc(t1, want[k].oldest));
		assert_string_equal(json_object_get_string(json_object_object_get(j, "newest")),
		                    utc(t2, want[k].newest));
		json_object_put(j);
	}
	assert_int_equal(k, n);
	free(out);
}

static void test_poison_group__list_counts_each_dimension(void **state)
{
	struct px *x = *state;
	struct gset g;
	bool sel[N_ALL];

	put_set(&g, x);
	for (enum dim d = D_REASON; d <= D_STATUS; d++)
		expect_grouped(x, &g, d, NULL, NULL);

	/* with the other filters: --job (never a foreign message), --grep,
	 * --since, and a --group of another dimension */
	for (int i = 0; i < N_ALL; i++)
		sel[i] = i < N_ENV && g.job[i] == 1;
	expect_grouped(x, &g, D_REASON, sel, (const char *const[]){"--job", "archive", NULL});
	for (int i = 0; i < N_ALL; i++)
		sel[i] = i < N_ENV && g.error[i] == 0;
	expect_grouped(x, &g, D_STATUS, sel, (const char *const[]){"--grep", "ResourceNotFound", NULL});
	for (int i = 0; i < N_ALL; i++)
		sel[i] = i < N_ENV && g.error[i] == 2;
	expect_grouped(x, &g, D_STATUS, sel, (const char *const[]){"--group", ERROR_KEYS[2], NULL});
	char since[32];
	for (int i = 0; i < N_ALL; i++)
		sel[i] = g.when[i] >= g.when[9];
	expect_grouped(x, &g, D_JOB, sel, (const char *const[]){"--since", utc(since, g.when[9]), NULL});

	/* --limit: the first N selected are counted */
	char *out = NULL;
	px_cmd_expect(&out, NULL, x, 0, "list",
	              (const char *const[]){"--group-by", "error", "--limit", "5", "--json", NULL});
	long long total = 0;
	for (char *line = out, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		struct json_object *j = json_tokener_parse(line);
		assert_non_null(j);
		total += json_object_get_int64(json_object_object_get(j, "count"));
		json_object_put(j);
	}
	assert_int_equal(total, 5);
	free(out);

	/* --group alone lists that group's messages */
	struct px_idset ids;
	px_list_ids(&ids, x, (const char *const[]){"--group", ERROR_KEYS[0], NULL}, NULL);
	size_t want = 0;
	for (int i = 0; i < N_ENV; i++) {
		bool listed =
		    bsearch(&(const char *){g.p[i].id}, ids.v, ids.n, sizeof(char *), px_cmp_str) != NULL;
		ITEST_CHECK(listed == (g.error[i] == 0), "--group %s: envelope %d %s", ERROR_KEYS[0], i,
		            listed ? "listed but not in the group" : "in the group but not listed");
		want += g.error[i] == 0;
	}
	assert_int_equal(ids.n, want);
	px_idset_free(&ids);

	/* nothing was touched */
	px_expect_poison_exactly(x, g.p, N_ALL, NULL, false);
	px_puts_clear(g.p, N_ALL);
	proc_assert_logs_clean();
}

/* The job queue holds exactly the originals of the messages for which moved[i]. */
static void expect_job_queue(struct px *x, const struct gset *g, const bool *moved)
{
	struct px_qset q;
	size_t want = 0;

	px_read_queue(&q, x, x->queue, true);
	for (int i = 0; i < N_ALL; i++) {
		const char *text = i < N_ENV ? g->p[i].original : g->p[i].text;
		size_t len = i < N_ENV ? g->p[i].original_len : g->p[i].len;
		if (!moved[i])
			continue;
		want++;
		ITEST_CHECK(px_qset_count_text(&q, text, len) == 1,
		            "message %d (%.100s) is not on the job queue once", i, text);
	}
	ITEST_CHECK(q.n == want, "%zu messages on the job queue, expected %zu", q.n, want);
	px_qset_free(&q);
}

static void test_poison_group__replay_and_purge_one_group(void **state)
{
	struct px *x = *state;
	struct gset g;
	bool keep[N_ALL], moved[N_ALL];
	char *out = NULL;

	put_set(&g, x);
	/* one error group, whose envelopes differ in keys and numbers */
	px_cmd_expect(&out, NULL, x, 0, "replay", (const char *const[]){"--group", ERROR_KEYS[2], NULL});
	free(out);
	for (int i = 0; i < N_ALL; i++) {
		moved[i] = i < N_ENV && g.error[i] == 2;
		keep[i] = !moved[i];
	}
	expect_job_queue(x, &g, moved);
	px_expect_poison_exactly(x, g.p, N_ALL, keep, true);

	/* the messages that are not envelopes, back unchanged */
	px_cmd_expect(&out, NULL, x, 0, "replay",
	              (const char *const[]){"--group", "job:(not an envelope)", NULL});
	free(out);
	for (int i = N_ENV; i < N_ALL; i++) {
		moved[i] = true;
		keep[i] = false;
	}
	expect_job_queue(x, &g, moved);
	px_expect_poison_exactly(x, g.p, N_ALL, keep, true);

	/* purge: without --yes nothing, with it exactly the group */
	px_cmd_expect(&out, NULL, x, 2, "purge", (const char *const[]){"--group", "status:503", NULL});
	free(out);
	px_expect_poison_exactly(x, g.p, N_ALL, keep, true);
	px_cmd_expect(&out, NULL, x, 0, "purge",
	              (const char *const[]){"--group", "status:503", "--yes", NULL});
	free(out);
	size_t purged = 0;
	for (int i = 0; i < N_ENV; i++)
		if (keep[i] && g.status[i] == 2) {
			keep[i] = false;
			purged++;
		}
	assert_true(purged > 0);
	px_expect_poison_exactly(x, g.p, N_ALL, keep, true);
	expect_job_queue(x, &g, moved);

	/* a key no message has: nothing */
	px_cmd_expect(&out, NULL, x, 0, "replay", (const char *const[]){"--group", "job:nobody", NULL});
	ITEST_CHECK(strstr(out, "0 selected, 0 replayed"), "replay of an empty group: %s", out);
	free(out);
	px_expect_poison_exactly(x, g.p, N_ALL, keep, true);
	px_puts_clear(g.p, N_ALL);
	proc_assert_logs_clean();
}

/* Beyond the cap on groups (lowered to 2 by the test build's
 * ECW_TEST_POISON_GROUPS_MAX), the messages of every further group are
 * counted in one last row, and stderr says so. Which two groups are kept
 * depends on the order the queue shows the messages in; their counts do not. */
static void test_poison_group__groups_beyond_the_cap_are_counted_together(void **state)
{
	struct px *x = *state;
	struct gset g;
	struct xgroup want[N_ALL];
	const char *env[] = {x->env[0], "ECW_TEST_POISON_GROUPS_MAX=2", NULL};
	const char *argv[] = {"poison", "list", "-c", x->cfg, "--group-by", "error", NULL, NULL};
	char *out = NULL, *err = NULL;

	put_set(&g, x);
	size_t n = expected_groups(want, &g, D_ERROR, NULL);
	assert_true(n > 2);
	int code = proc_run(&out, &err, "poison-list-cap", argv, env, 60000);
	ITEST_CHECK(code == 0, "list exited %d:\n%s\n%s", code, out, err);
	ITEST_CHECK(strstr(err, "more than 2 groups: the ") &&
	                strstr(err, "counted together as (other groups)"),
	            "stderr does not say the cap was met:\n%s", err);
	unsigned long long kept = 0, other = 0;
	size_t rows = 0;
	char *line = strchr(out, '\n'); /* after the header */
	for (char *nl; line && (nl = strchr(line + 1, '\n')); line = nl, rows++) {
		unsigned long long count;
		char key[256];
		*nl = '\0';
		ITEST_CHECK(sscanf(line + 1, "%llu %*s %*s %255[^\n]", &count, key) == 2, "row: %s",
		            line + 1);
		if (strcmp(key, "(other groups)") == 0) {
			ITEST_CHECK(rows == 2, "(other groups) is row %zu, not the last of 3", rows);
			other = count;
			continue;
		}
		size_t k;
		for (k = 0; k < n && strcmp(want[k].key, key) != 0; k++)
			;
		ITEST_CHECK(k < n && want[k].count == count, "row %s: %llu, not a group or not its count",
		            key, count);
		kept += count;
	}
	assert_int_equal(rows, 3);
	assert_int_equal(kept + other, N_ALL);
	assert_true(other > 0);
	free(out);
	free(err);

	/* --json: the same, the last object {"other_groups":true} */
	argv[6] = "--json";
	code = proc_run(&out, &err, "poison-list-cap-json", argv, env, 60000);
	ITEST_CHECK(code == 0, "list --json exited %d:\n%s\n%s", code, out, err);
	char *last = strrchr(out, '{');
	ITEST_CHECK(last && strstr(last, "\"other_groups\":true") && !strstr(last, "\"key\""), "--json: %s",
	            out);
	free(out);
	free(err);
	px_puts_clear(g.p, N_ALL);
	proc_assert_logs_clean();
}

static void test_poison_group__usage_errors(void **state)
{
	struct px *x = *state;
	struct gset g;
	static const struct {
		const char *sub;
		const char *args[6];
		const char *says;
	} cases[] = {
	    {"list",
	     {"--group-by", "bogus", NULL},
	     "--group-by must be reason, job, error or status, not 'bogus'"},
	    {"list", {"--group-by", "Job", NULL}, "--group-by must be"},
	    {"list", {"--group-by", NULL}, "--group-by"},
	    {"replay", {"--group-by", "job", NULL}, "--group-by is for `poison list`"},
	    {"purge", {"--group-by", "error", "--yes", NULL}, "--group-by is for `poison list`"},
	    {"list",
	     {"--group", "archive", NULL},
	     "a group key starts with reason:, job:, error: or status:"},
	    {"replay", {"--group", "jobs:archive", NULL}, "a group key starts with"},
	    {"purge", {"--group", "job:index", "--group", "job:archive", "--yes", NULL}, "give it once"},
	};
	char *out = NULL, *err = NULL;

	put_set(&g, x);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		px_cmd_expect(&out, &err, x, 2, cases[i].sub, cases[i].args);
		ITEST_CHECK(strstr(err, cases[i].says) != NULL,
		            "poison %s %s %s: stderr does not say [%s]:\n%s", cases[i].sub, cases[i].args[0],
		            cases[i].args[1] ? cases[i].args[1] : "", cases[i].says, err);
		free(out);
		free(err);
	}
	assert_int_equal(px_queue_count(x, x->queue), 0);
	px_expect_poison_exactly(x, g.p, N_ALL, NULL, true);
	px_puts_clear(g.p, N_ALL);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_poison_group__list_counts_each_dimension, px_setup,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_group__replay_and_purge_one_group, px_setup,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_group__groups_beyond_the_cap_are_counted_together,
	                                    px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_group__usage_errors, px_setup, px_teardown),
	};
	return cmocka_run_group_tests_name("poison_group", tests, NULL, NULL);
}
