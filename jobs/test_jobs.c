/* test_jobs.c - job types for testing the runtime, compiled only into test
 * builds (-DECW_TESTING) and so never present in the shipped binary:
 *   test-noop   succeeds
 *   test-fail   fails permanently (poison at once)
 *   test-flaky  fails transiently while dequeue_count <= fail_times, then
 *               succeeds; with `table` it records each attempt's time there
 *   test-sleep  sleeps `duration` (or the message's "sleep_ms"), then, with
 *               `table`, checks the lease and writes a marker entity
 *   test-count  inserts one entity per run into `table`, keyed by the
 *               message's rk, id and dequeue count, so tests can count runs */
#ifdef ECW_TESTING

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_clock.h"
#include "ecw_job.h"

struct test_settings {
	char *table;
	long long fail_times;
	int64_t duration_ms;
};

static void settings_free(void *p)
{
	struct test_settings *s = p;

	if (s)
		free(s->table);
	free(s);
}

static int settings_parse(void **out, const struct ecw_node *job, struct ecw_config_errors *errs,
			  const char *const *allowed, bool table_required)
{
	struct test_settings *s = calloc(1, sizeof(*s));
	int bad = 0;

	*out = NULL;
	if (!s)
		return -1;
	s->fail_times = 2;
	s->duration_ms = 1000;
	bad |= ecw_node_check_keys(job, allowed, "test job", errs) > 0;
	bad |= ecw_node_string(&s->table, job, "table", table_required, errs) < 0;
	bad |= ecw_node_int(&s->fail_times, job, "fail_times", 0, 100, false, errs) < 0;
	bad |= ecw_node_duration(&s->duration_ms, job, "duration", 0, 3600000, false, errs) < 0;
	if (bad) {
		settings_free(s);
		return -1;
	}
	*out = s;
	return 0;
}

static int parse_none(void **out, const struct ecw_node *job, struct ecw_config_errors *errs)
{
	static const char *const allowed[] = {"type", "then", NULL};
	return settings_parse(out, job, errs, allowed, false);
}

static int parse_flaky(void **out, const struct ecw_node *job, struct ecw_config_errors *errs)
{
	static const char *const allowed[] = {"type", "then", "fail_times", "table", NULL};
	return settings_parse(out, job, errs, allowed, false);
}

static int parse_sleep(void **out, const struct ecw_node *job, struct ecw_config_errors *errs)
{
	static const char *const allowed[] = {"type", "then", "duration", "table", NULL};
	return settings_parse(out, job, errs, allowed, false);
}

static int parse_count(void **out, const struct ecw_node *job, struct ecw_config_errors *errs)
{
	static const char *const allowed[] = {"type", "then", "table", NULL};
	return settings_parse(out, job, errs, allowed, true);
}

static int prepare_table(const void *settings, struct ecw_client *c)
{
	const struct test_settings *s = settings;
	return s->table ? ecw_table_create(NULL, c, s->table) : 0;
}

/* Writes pk=ctx->rk, rk=suffix with the time of the run, after the lease check. */
static int record(const struct test_settings *s, struct ecw_job_ctx *ctx, const char *suffix)
{
	struct ecw_entity *e = NULL;
	char rk[256];
	int err;

	snprintf(rk, sizeof(rk), "%s", suffix);
	if ((err = ecw_job_check_lease(ctx)) < 0 || (err = ecw_entity_new(&e, ctx->rk, rk)) < 0 ||
	    (err = ecw_entity_set_int64(e, "AtMs", (int64_t)time(NULL) * 1000)) < 0 ||
	    (err = ecw_entity_set_int64(e, "MonoMs", ecw_now_ms())) < 0 ||
	    (err = ecw_entity_set_int64(e, "Dequeue", ctx->dequeue_count)) < 0 ||
	    (err = ecw_entity_set_string(e, "MessageId", ctx->message_id, strlen(ctx->message_id))) < 0 ||
	    (err = ecw_table_write(NULL, ctx->client, s->table, e, ECW_WRITE_INSERT, NULL)) < 0)
		goto done;
done:
	ecw_entity_free(e);
	return err;
}

static int run_noop(const void *settings, struct ecw_job_ctx *ctx)
{
	(void)settings;
	(void)ctx;
	return 0;
}

static int run_fail(const void *settings, struct ecw_job_ctx *ctx)
{
	(void)settings;
	return ecw_error_set(ECW_EINVALID, "test-fail: %s/%s can never succeed", ctx->pk, ctx->rk);
}

static int run_flaky(const void *settings, struct ecw_job_ctx *ctx)
{
	const struct test_settings *s = settings;
	char rk[64];
	int err;

	if (s->table) {
		snprintf(rk, sizeof(rk), "attempt-%03ld", ctx->dequeue_count);
		if ((err = record(s, ctx, rk)) < 0 && err != ECW_ECONFLICT)
			return err;
	}
	if (ctx->dequeue_count <= s->fail_times)
		return ecw_error_set(ECW_ETRANSIENT, "test-flaky: attempt %ld of %lld planned failures",
				     ctx->dequeue_count, s->fail_times);
	return 0;
}

static int run_sleep(const void *settings, struct ecw_job_ctx *ctx)
{
	const struct test_settings *s = settings;
	struct json_object *v;
	int64_t ms = s->duration_ms, end;

	if (json_object_object_get_ex(ctx->message, "sleep_ms", &v))
		ms = json_object_get_int64(v);
	for (end = ecw_now_ms() + ms; ecw_now_ms() < end;)
		ecw_sleep_ms(end - ecw_now_ms() > 50 ? 50 : end - ecw_now_ms());
	return s->table ? record(s, ctx, "done") : 0;
}

static int run_count(const void *settings, struct ecw_job_ctx *ctx)
{
	char rk[256];

	snprintf(rk, sizeof(rk), "%s~%ld", ctx->message_id, ctx->dequeue_count);
	return record(settings, ctx, rk);
}

const struct ecw_job_type ecw_job_test_noop = {
	.name = "test-noop", .parse = parse_none, .run = run_noop, .free = settings_free};
const struct ecw_job_type ecw_job_test_fail = {
	.name = "test-fail", .parse = parse_none, .run = run_fail, .free = settings_free};
const struct ecw_job_type ecw_job_test_flaky = {
	.name = "test-flaky", .parse = parse_flaky, .prepare = prepare_table, .run = run_flaky, .free = settings_free};
const struct ecw_job_type ecw_job_test_sleep = {
	.name = "test-sleep", .parse = parse_sleep, .prepare = prepare_table, .run = run_sleep, .free = settings_free};
static const char *count_source(const void *settings)
{
	return ((const struct test_settings *)settings)->table;
}

const struct ecw_job_type ecw_job_test_count = {
	.name = "test-count", .parse = parse_count, .prepare = prepare_table, .run = run_count, .free = settings_free,
	.source_table = count_source};

#else
/* ISO C forbids an empty translation unit. */
typedef int ecw_test_jobs_not_built;
#endif
