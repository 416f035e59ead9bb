/* SPDX-License-Identifier: MIT */
/* test_poison_list.c - `ecworker poison list` and `purge` against a real Azurite, run as an operator runs
 * them (build/ecworker-test as a process; the fixture is poisonfx.h): the test builds poison envelopes
 * itself (ecw_poison_envelope, with chosen job, reason, failed_at and error), puts them on the poison
 * queue, runs the command, and then reads the queues back in full with the client: every filter (--job,
 * --reason, --since, --grep, --id, --limit, combined) selects exactly the expected set of ids out of 300;
 * `list --json` prints an envelope's fields and a foreign message's text; list, replay --dry-run and
 * purge without --yes change nothing (same ids, same texts, byte for byte); purge --yes deletes exactly
 * what it selected; and --help names every option. What replay moves is in test_poison_replay.c. */
#include "itest.h"
#include "poisonfx.h"
#include "proc.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the 300 envelopes ----------------------------------------------------------------- */

#define N_FILTER 300
static const char *const F_JOBS[3] = {"archive-employee", "employee-by-email", "customer-to-orders"};
static const char *const F_REASONS[2] = {"permanent", "max-dequeue"};
/* How long ago each failed: 10 minutes, 3 hours, 30 hours, 4 days, 10 days. */
static const long F_AGES[5] = {600, 3 * 3600, 30 * 3600, 4 * 86400, 10 * 86400};
static const char *const F_ERRORS[7] = {
    "TableNotFound: table Employees does not exist",    "412 ConditionNotMet on Orders after 5 rounds",
    "timeout talking to storage (operation timed out)", "key rk contains a forbidden character",
    "AuthorizationFailure: signature mismatch",         "unknown job type in message",
    "entity too large: 1.2 MB exceeds limit",
};

struct fspec {
	int job, reason, age, error;
	char pk[32], rk[32];
	time_t failed_at;
};

static void filter_spec(struct fspec *s, int i, time_t now)
{
	s->job = i % 3;
	s->reason = i % 2;
	s->age = i % 5;
	s->error = i % 7;
	snprintf(s->pk, sizeof(s->pk), "dept-%d", i % 4);
	snprintf(s->rk, sizeof(s->rk), "emp-%04d", i);
	s->failed_at = now - F_AGES[s->age];
}

/* Fills the poison queue with the 300; p receives what was put. */
static struct px_put *put_filter_set(struct px *x, struct fspec *spec, time_t now)
{
	struct px_put *p = calloc(N_FILTER, sizeof(*p));

	assert_non_null(p);
	for (int i = 0; i < N_FILTER; i++) {
		filter_spec(&spec[i], i, now);
		px_put_job(&p[i], x, F_JOBS[spec[i].job], F_REASONS[spec[i].reason], spec[i].failed_at,
		           F_ERRORS[spec[i].error], spec[i].pk, spec[i].rk, "");
	}
	return p;
}

/* One filter case: args for the command, and the predicate. */
struct fcase {
	const char *what;
	const char *args[12];
	int job, reason;  /* -1: any */
	time_t since;     /* 0: any */
	const char *grep; /* in error, original, job, pk or rk */
	const char *const *ids;
	size_t nids;
};

static bool fcase_match(const struct fcase *c, const struct fspec *s, const struct px_put *p)
{
	if (c->job >= 0 && c->job != s->job)
		return false;
	if (c->reason >= 0 && c->reason != s->reason)
		return false;
	if (c->since && s->failed_at < c->since)
		return false;
	if (c->grep && !strstr(F_ERRORS[s->error], c->grep) && !strstr(p->original, c->grep) &&
	    !strstr(F_JOBS[s->job], c->grep) && !strstr(s->pk, c->grep) && !strstr(s->rk, c->grep))
		return false;
	if (c->nids) {
		size_t k;
		for (k = 0; k < c->nids && strcmp(c->ids[k], p->id) != 0; k++)
			;
		if (k == c->nids)
			return false;
	}
	return true;
}

/* Compares the listed set with the expected one, naming the first difference. */
static void expect_ids(const struct px_idset *got, const struct fcase *c, const struct fspec *spec,
                       const struct px_put *p, size_t *nexpected)
{
	size_t want = 0;

	for (int i = 0; i < N_FILTER; i++) {
		bool m = fcase_match(c, &spec[i], &p[i]);
		bool listed =
		    bsearch(&(const char *){p[i].id}, got->v, got->n, sizeof(char *), px_cmp_str) != NULL;
		want += m;
		ITEST_CHECK(m == listed, "%s: envelope %d (%s %s %s age %lds error '%s') %s", c->what, i,
		            F_JOBS[spec[i].job], F_REASONS[spec[i].reason], spec[i].rk, F_AGES[spec[i].age],
		            F_ERRORS[spec[i].error],
		            m ? "should be listed but is not" : "is listed but should not be");
	}
	ITEST_CHECK(got->n == want, "%s: %zu listed, expected %zu", c->what, got->n, want);
	*nexpected = want;
}

static void test_poison_list__list_filters_select_exactly(void **state)
{
	struct px *x = *state;
	struct fspec spec[N_FILTER];
	time_t now = time(NULL);
	char since_time[32], since_date[32];
	struct tm tm;
	struct px_idset got;

	px_write_config(x, "  archive-employee: {type: test-noop}\n");
	struct px_put *p = put_filter_set(x, spec, now);
	assert_int_equal(px_queue_count(x, x->poison), N_FILTER);

	/* A UTC time 5 days back (selects ages up to 4 d), and a date 7 days
	 * back (its midnight is 7..8 days back: still up to 4 d). */
	time_t t5 = now - 5 * 86400, t7 = now - 7 * 86400;
	gmtime_r(&t5, &tm);
	strftime(since_time, sizeof(since_time), "%Y-%m-%dT%H:%M:%SZ", &tm);
	gmtime_r(&t7, &tm);
	strftime(since_date, sizeof(since_date), "%Y-%m-%d", &tm);
	struct tm mid = tm;
	mid.tm_hour = mid.tm_min = mid.tm_sec = 0;
	time_t t7_midnight = timegm(&mid);

	const char *three[3] = {p[5].id, p[77].id, p[201].id};
	const struct fcase cases[] = {
	    {"no filter", {NULL}, -1, -1, 0, NULL, NULL, 0},
	    {"--job", {"--job", F_JOBS[1], NULL}, 1, -1, 0, NULL, NULL, 0},
	    {"--reason permanent", {"--reason", "permanent", NULL}, -1, 0, 0, NULL, NULL, 0},
	    {"--reason max-dequeue", {"--reason", "max-dequeue", NULL}, -1, 1, 0, NULL, NULL, 0},
	    {"--since 2h", {"--since", "2h", NULL}, -1, -1, now - 2 * 3600, NULL, NULL, 0},
	    {"--since 2d", {"--since", "2d", NULL}, -1, -1, now - 2 * 86400, NULL, NULL, 0},
	    {"--since 1w", {"--since", "1w", NULL}, -1, -1, now - 7 * 86400, NULL, NULL, 0},
	    {"--since TIME", {"--since", since_time, NULL}, -1, -1, t5, NULL, NULL, 0},
	    {"--since DATE", {"--since", since_date, NULL}, -1, -1, t7_midnight, NULL, NULL, 0},
	    {"--grep error word", {"--grep", "ConditionNotMet", NULL}, -1, -1, 0, "ConditionNotMet", NULL, 0},
	    {"--grep key", {"--grep", "emp-0123", NULL}, -1, -1, 0, "emp-0123", NULL, 0},
	    {"--grep case-sensitive",
	     {"--grep", "conditionnotmet", NULL},
	     -1,
	     -1,
	     0,
	     "conditionnotmet",
	     NULL,
	     0},
	    {"--id repeated",
	     {"--id", three[0], "--id", three[1], "--id", three[2], NULL},
	     -1,
	     -1,
	     0,
	     NULL,
	     three,
	     3},
	    {"--job --reason --since --grep",
	     {"--job", F_JOBS[0], "--reason", "max-dequeue", "--since", "2d", "--grep", "storage", NULL},
	     0,
	     1,
	     now - 2 * 86400,
	     "storage",
	     NULL,
	     0},
	    {"--id with --job",
	     {"--job", F_JOBS[2], "--id", three[0], "--id", three[1], "--id", three[2], NULL},
	     2,
	     -1,
	     0,
	     NULL,
	     three,
	     3},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t want;
		px_list_ids(&got, x, cases[i].args, NULL);
		expect_ids(&got, &cases[i], spec, p, &want);
		/* Each case must select something and not everything, except the
		 * first (all) and the case-sensitivity one (nothing). */
		if (i == 0)
			assert_int_equal(want, N_FILTER);
		else if (strcmp(cases[i].what, "--grep case-sensitive") == 0)
			assert_int_equal(want, 0);
		else
			ITEST_CHECK(want > 0 && want < N_FILTER, "%s: a degenerate case (%zu of %d)",
			            cases[i].what, want, N_FILTER);
		px_idset_free(&got);
		assert_int_equal(px_queue_count(x, x->poison), N_FILTER);
	}

	/* --limit: exactly N, all of them matching the rest of the filter. */
	const struct fcase lim = {"--limit 7 --job", {NULL}, 1, -1, 0, NULL, NULL, 0};
	px_list_ids(&got, x, (const char *const[]){"--limit", "7", "--job", F_JOBS[1], NULL}, NULL);
	assert_int_equal(got.n, 7);
	for (size_t k = 0; k < got.n; k++) {
		size_t i;
		for (i = 0; i < N_FILTER && strcmp(p[i].id, got.v[k]) != 0; i++)
			;
		ITEST_CHECK(i < N_FILTER && fcase_match(&lim, &spec[i], &p[i]),
		            "--limit listed %s, not a %s envelope", got.v[k], F_JOBS[1]);
	}
	px_idset_free(&got);
	px_list_ids(&got, x, (const char *const[]){"--limit", "40", NULL}, NULL);
	assert_int_equal(got.n, 40);
	px_idset_free(&got);

	/* Listing left every message in place, unchanged. */
	px_expect_poison_exactly(x, p, N_FILTER, NULL, false);
	px_puts_free(p, N_FILTER);
	proc_assert_logs_clean();
}

/* The JSON fields of a listed envelope are the envelope's. */
static void test_poison_list__list_json_fields(void **state)
{
	struct px *x = *state;
	struct px_put p[2];
	struct px_idset got;
	struct json_object *lines, *v;
	time_t failed = time(NULL) - 3 * 3600;
	const char *orig = "{\"job\":\"index\",\"pk\":\"Zo\xc3\xab \\\"q\\\"\",\"rk\":\"r1\"}";
	const char *foreign = "plain \"text\" \\ Zo\xc3\xab";

	memset(p, 0, sizeof(p));
	px_write_config(x, "  index: {type: test-noop}\n");
	px_put_envelope(&p[0], x, "index", "max-dequeue", failed, "boom: the error", orig, strlen(orig),
	                "Zo\xc3\xab \"q\"", "r1");
	px_put_text(p[1].id, x, x->poison, foreign, strlen(foreign));
	px_list_ids(&got, x, NULL, &lines);
	assert_int_equal(got.n, 2);
	for (size_t i = 0; i < 2; i++) {
		struct json_object *j = json_object_array_get_idx(lines, i);
		const char *id = json_object_get_string(json_object_object_get(j, "id"));
		bool env = json_object_get_boolean(json_object_object_get(j, "envelope"));
		if (strcmp(id, p[0].id) == 0) {
			ITEST_CHECK(env, "the envelope is listed with envelope:false");
			assert_string_equal(json_object_get_string(json_object_object_get(j, "job")),
			                    "index");
			assert_string_equal(json_object_get_string(json_object_object_get(j, "reason")),
			                    "max-dequeue");
			assert_string_equal(json_object_get_string(json_object_object_get(j, "error")),
			                    "boom: the error");
			assert_string_equal(json_object_get_string(json_object_object_get(j, "pk")),
			                    "Zo\xc3\xab \"q\"");
			assert_string_equal(json_object_get_string(json_object_object_get(j, "rk")), "r1");
			assert_true(json_object_object_get_ex(j, "original", &v));
			assert_string_equal(json_object_get_string(v), orig);
			char iso[32];
			struct tm tm;
			gmtime_r(&failed, &tm);
			strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm);
			assert_string_equal(json_object_get_string(json_object_object_get(j, "failed_at")),
			                    iso);
			assert_int_equal(json_object_get_int64(json_object_object_get(j, "dequeue_count")),
			                 6);
		} else {
			assert_string_equal(id, p[1].id);
			ITEST_CHECK(!env, "the foreign message is listed with envelope:true");
			assert_true(json_object_object_get_ex(j, "text", &v));
			assert_string_equal(json_object_get_string(v), foreign);
			ITEST_CHECK(!json_object_object_get_ex(j, "job", &v),
			            "a foreign message listed with a job");
		}
	}
	json_object_put(lines);
	px_idset_free(&got);
	free(p[0].text);
	free(p[0].original);
	proc_assert_logs_clean();
}

/* ---- --dry-run and purge ------------------------------------------------------------- */

/* --dry-run and purge without --yes change nothing; purge --yes deletes
 * exactly the selected. */
static void test_poison_list__dry_run_and_purge(void **state)
{
	struct px *x = *state;
	struct px_put p[45];
	bool keep[45];
	time_t now = time(NULL);
	char rk[32], *out = NULL, *err = NULL;
	size_t nsel = 0;

	memset(p, 0, sizeof(p));
	px_write_config(x, "  alpha: {type: test-noop}\n  beta: {type: test-noop}\n");
	for (int i = 0; i < 45; i++) {
		const char *job = i % 3 == 0 ? "beta" : "alpha";
		snprintf(rk, sizeof(rk), "r%03d", i);
		px_put_job(&p[i], x, job, i % 2 ? "permanent" : "max-dequeue", now - (i % 4) * 86400, "e",
		           "p", rk, "");
		/* purge selects beta's that failed within the last 36 hours */
		keep[i] = !(i % 3 == 0 && i % 4 <= 1);
		nsel += !keep[i];
	}

	/* dry run: says what it would do, does nothing */
	px_cmd_expect(&out, NULL, x, 0, "replay", (const char *const[]){"--dry-run", NULL});
	size_t would = 0;
	for (const char *s = out; (s = strstr(s, "would replay")) != NULL; s++)
		would++;
	ITEST_CHECK(would == 45, "--dry-run printed %zu 'would replay' lines, expected 45:\n%.2000s", would,
	            out);
	free(out);
	assert_int_equal(px_queue_count(x, x->queue), 0);
	px_expect_poison_exactly(x, p, 45, NULL, true);

	/* purge without --yes: exit 2, nothing deleted */
	px_cmd_expect(&out, &err, x, 2, "purge",
	              (const char *const[]){"--job", "beta", "--since", "36h", NULL});
	would = 0;
	for (const char *s = out; (s = strstr(s, "would delete")) != NULL; s++)
		would++;
	ITEST_CHECK(would == nsel, "purge without --yes listed %zu, expected %zu:\n%s", would, nsel, out);
	free(out);
	free(err);
	px_expect_poison_exactly(x, p, 45, NULL, true);

	/* purge --yes: exactly the selected are gone, the rest untouched */
	px_cmd_expect(&out, NULL, x, 0, "purge",
	              (const char *const[]){"--job", "beta", "--since", "36h", "--yes", NULL});
	free(out);
	px_expect_poison_exactly(x, p, 45, keep, false);
	assert_int_equal(px_queue_count(x, x->queue), 0);
	px_puts_clear(p, 45);
	proc_assert_logs_clean();
}

/* ---- help ------------------------------------------------------------------------------ */

static void test_poison_list__help_names_every_option(void **state)
{
	(void)state;
	static const char *const filters[] = {"--job",   "--reason", "--since",  "--grep", "--id", "--group",
	                                      "--limit", "--hold",   "--config", "--help", NULL};
	static const struct {
		const char *sub;
		const char *opts[8];
	} subs[] = {
	    {"list", {"--json", "--group-by", NULL}},
	    {"replay", {"--to", "--rate", "--dry-run", "--canary", "--canary-wait", NULL}},
	    {"purge", {"--yes", NULL}},
	};
	char *out = NULL;

	int code =
	    proc_run(&out, NULL, "poison-help", (const char *const[]){"poison", "--help", NULL}, NULL, 10000);
	assert_int_equal(code, 0);
	for (size_t i = 0; i < 3; i++)
		ITEST_CHECK(strstr(out, subs[i].sub) != NULL, "poison --help does not name %s:\n%s",
		            subs[i].sub, out);
	free(out);
	for (size_t i = 0; i < 3; i++) {
		code = proc_run(&out, NULL, "poison-sub-help",
		                (const char *const[]){"poison", subs[i].sub, "--help", NULL}, NULL, 10000);
		ITEST_CHECK(code == 0, "poison %s --help exited %d", subs[i].sub, code);
		for (size_t k = 0; filters[k]; k++)
			ITEST_CHECK(strstr(out, filters[k]) != NULL,
			            "poison %s --help does not mention %s:\n%s", subs[i].sub, filters[k],
			            out);
		for (size_t k = 0; subs[i].opts[k]; k++)
			ITEST_CHECK(strstr(out, subs[i].opts[k]) != NULL,
			            "poison %s --help does not mention %s:\n%s", subs[i].sub, subs[i].opts[k],
			            out);
		free(out);
	}
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_poison_list__help_names_every_option, px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_list__list_json_fields, px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_list__list_filters_select_exactly, px_setup,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_list__dry_run_and_purge, px_setup, px_teardown),
	};
	return cmocka_run_group_tests_name("poison_list", tests, NULL, NULL);
}
