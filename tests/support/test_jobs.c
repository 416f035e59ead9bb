/* SPDX-License-Identifier: MIT */
/* test_jobs.c - job types for testing the runtime, compiled only into test
 * builds (-DECW_TESTING) and so never present in the shipped binary:
 *   test-noop   succeeds
 *   test-fail   fails permanently (poison at once)
 *   test-flaky  fails transiently while dequeue_count <= fail_times, then
 *               succeeds; with `table` it records each attempt's time there
 *   test-sleep  sleeps `duration` (or the message's "sleep_ms"), then, with
 *               `table`, checks the lease and writes a marker entity
 *   test-count  inserts one entity per run into `table`, keyed by the
 *               message's rk, id and dequeue count, so tests can count runs;
 *               the message's "sleep_ms" holds the run first (tests stage
 *               overlapping runs with it)
 *   test-record keyless: inserts one entity per message into `table`,
 *               PartitionKey the message's window_start ("none" without),
 *               RowKey the values of its `fields` joined by ',' then '~' and
 *               the message id (a redelivery finds it there: success), so
 *               tests count the messages a schedule enqueued per window;
 *               `window` (1h, 1d or 1w) is what it tells a schedule it
 *               works on */
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

static int settings_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs,
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

static int parse_none(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type", "then", NULL};
	return settings_parse(out, job, errs, allowed, false);
}

static int parse_flaky(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type", "then", "fail_times", "table", NULL};
	return settings_parse(out, job, errs, allowed, false);
}

static int parse_sleep(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type", "then", "duration", "table", NULL};
	return settings_parse(out, job, errs, allowed, false);
}

static int parse_count(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
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
	    (err = ecw_entity_set_int64(e, "MonoMs", ecw_clock_now_ms())) < 0 ||
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
	for (end = ecw_clock_now_ms() + ms; ecw_clock_now_ms() < end;)
		ecw_clock_sleep_ms(end - ecw_clock_now_ms() > 50 ? 50 : end - ecw_clock_now_ms());
	return s->table ? record(s, ctx, "done") : 0;
}

static int run_count(const void *settings, struct ecw_job_ctx *ctx)
{
	struct json_object *v;
	char rk[256];

	if (json_object_object_get_ex(ctx->message, "sleep_ms", &v))
		ecw_clock_sleep_ms(json_object_get_int64(v));

	snprintf(rk, sizeof(rk), "%s~%ld", ctx->message_id, ctx->dequeue_count);
	return record(settings, ctx, rk);
}

const struct ecw_job_type ecw_job_test_noop = {
    .name = "test-noop", .parse = parse_none, .run = run_noop, .free = settings_free};
const struct ecw_job_type ecw_job_test_fail = {
    .name = "test-fail", .parse = parse_none, .run = run_fail, .free = settings_free};
const struct ecw_job_type ecw_job_test_flaky = {.name = "test-flaky",
                                                .parse = parse_flaky,
                                                .prepare = prepare_table,
                                                .run = run_flaky,
                                                .free = settings_free};
const struct ecw_job_type ecw_job_test_sleep = {.name = "test-sleep",
                                                .parse = parse_sleep,
                                                .prepare = prepare_table,
                                                .run = run_sleep,
                                                .free = settings_free};
static const char *count_source(const void *settings)
{
	return ((const struct test_settings *)settings)->table;
}

const struct ecw_job_type ecw_job_test_count = {.name = "test-count",
                                                .parse = parse_count,
                                                .prepare = prepare_table,
                                                .run = run_count,
                                                .free = settings_free,
                                                .source_table = count_source};

struct record_settings {
	char *table;
	char **fields;     /* NULL-terminated, or NULL */
	int64_t window_ms; /* 0: none */
};

static void record_free(void *p)
{
	struct record_settings *s = p;

	if (s) {
		free(s->table);
		ecw_strv_free(s->fields);
	}
	free(s);
}

static int record_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type", "then", "table", "fields", "window", NULL};
	struct record_settings *s = calloc(1, sizeof(*s));
	char *window = NULL;
	bool present;
	int bad = 0;

	*out = NULL;
	if (!s)
		return -1;
	bad |= ecw_node_check_keys(job, allowed, "test job", errs) > 0;
	bad |= ecw_node_string(&s->table, job, "table", true, errs) < 0;
	bad |= ecw_node_string_list(&s->fields, &present, job, "fields", errs) < 0;
	if (ecw_node_string(&window, job, "window", false, errs) < 0) {
		bad = 1;
	} else if (window && ecw_duration_parse(&s->window_ms, window, true) < 0) {
		ecw_node_error(errs, ecw_node_get(job, "window"), "window must be 1h, 1d or 1w");
		bad = 1;
	}
	free(window);
	if (bad) {
		record_free(s);
		return -1;
	}
	*out = s;
	return 0;
}

static int record_prepare(const void *settings, struct ecw_client *c)
{
	return ecw_table_create(NULL, c, ((const struct record_settings *)settings)->table);
}

static const char *message_string(const struct ecw_job_ctx *ctx, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(ctx->message, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static int record_run(const void *settings, struct ecw_job_ctx *ctx)
{
	const struct record_settings *s = settings;
	const char *ws = message_string(ctx, "window_start");
	struct ecw_entity *e = NULL;
	struct ecw_buf rk;
	int err;

	ecw_buf_init(&rk, 1024);
	for (size_t i = 0; s->fields && s->fields[i]; i++) {
		const char *v = message_string(ctx, s->fields[i]);
		if (!v) {
			err = ecw_error_set(ECW_EINVALID, "test-record: the message has no field %s",
			                    s->fields[i]);
			goto done;
		}
		if ((err = ecw_buf_printf(&rk, "%s%s", i ? "," : "", v)) < 0)
			goto done;
	}
	if ((err = ecw_buf_printf(&rk, "~%s", ctx->message_id)) < 0 ||
	    (err = ecw_entity_new(&e, ws ? ws : "none", ecw_buf_cstr(&rk))) < 0 ||
	    (err = ecw_entity_set_string(e, "Job", ctx->job, strlen(ctx->job))) < 0 ||
	    (err = ecw_job_check_lease(ctx)) < 0)
		goto done;
	err = ecw_table_write(NULL, ctx->client, s->table, e, ECW_WRITE_INSERT, NULL);
	if (err == ECW_ECONFLICT)
		err = 0;
done:
	ecw_entity_free(e);
	ecw_buf_dispose(&rk);
	return err;
}

static const char *const *record_fields(const void *settings)
{
	return (const char *const *)((const struct record_settings *)settings)->fields;
}

static int64_t record_window(const void *settings)
{
	return ((const struct record_settings *)settings)->window_ms;
}

const struct ecw_job_type ecw_job_test_record = {.name = "test-record",
                                                 .keyless = true,
                                                 .parse = record_parse,
                                                 .prepare = record_prepare,
                                                 .run = record_run,
                                                 .free = record_free,
                                                 .message_fields = record_fields,
                                                 .window_ms = record_window};

#else
/* ISO C forbids an empty translation unit. */
typedef int ecw_test_jobs_not_built;
#endif
