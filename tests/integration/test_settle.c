/* SPDX-License-Identifier: MIT */
/* test_settle.c - the outcome rules carried out on a real queue: build/ecworker-test (the worker with
 * the test-only job types) runs against the real Azurite with a config written per test (its own queue,
 * poison queue and tables; runtimefx.h), and the tests judge it by what it leaves in the queue, the poison
 * queue and the tables, and by its JSON log lines: transient failures back off, then succeed; a permanent
 * failure is poisoned at once, with an exact envelope; an over-delivered message is poisoned before it
 * runs; plain and base64 messages both run; garbage is poisoned and never stops the worker; a transient
 * failure on the last allowed delivery is poisoned; an envelope that cannot be put keeps the original;
 * one over the 64 KiB limit falls back to the original. The rules themselves, row by row and at each
 * boundary, are a pure function tested without processes or Azurite in tests/unit/test_outcome.c; this
 * file keeps what needs a running worker: that each answer is carried out on a real queue. */
#include "itest.h"
#include "proc.h"
#include "runtimefx.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_codec.h"

/* ---- poison envelopes and rows ------------------------------------------------------- */

/* The poison envelopes: receives until want arrived, parses each. */
static struct json_object **poison_envelopes(struct rtfx *r, size_t want, int timeout_ms)
{
	size_t got = 0;
	struct ecw_queue_msg *m = rtfx_receive_n(&got, r, r->fx.poison, want, 60, timeout_ms);
	struct json_object **env = calloc(want + 1, sizeof(*env));

	assert_non_null(env);
	ITEST_CHECK(got == want, "%zu poison envelope(s) on %s, expected %zu", got, r->fx.poison, want);
	for (size_t i = 0; i < got; i++) {
		env[i] = json_tokener_parse(m[i].text);
		ITEST_CHECK(env[i] && json_object_is_type(env[i], json_type_object),
		            "poison message %zu is not a JSON object: %.300s", i, m[i].text);
	}
	ecw_queue_msgs_free(m, got);
	return env;
}

static void envelopes_free(struct json_object **env)
{
	for (size_t i = 0; env && env[i]; i++)
		json_object_put(env[i]);
	free(env);
}

/* The envelope whose original is text (exactly), or NULL. */
static struct json_object *envelope_for(struct json_object **env, const char *text, size_t len)
{
	for (size_t i = 0; env[i]; i++) {
		struct json_object *o;
		if (json_object_object_get_ex(env[i], "original", &o) &&
		    json_object_is_type(o, json_type_string) &&
		    (size_t)json_object_get_string_len(o) == len &&
		    memcmp(json_object_get_string(o), text, len) == 0)
			return env[i];
	}
	return NULL;
}

static const char *env_str(struct json_object *e, const char *key)
{
	struct json_object *o;
	if (!json_object_object_get_ex(e, key, &o) || !json_object_is_type(o, json_type_string))
		return NULL;
	return json_object_get_string(o);
}

static long long env_int(struct json_object *e, const char *key)
{
	struct json_object *o;
	if (!json_object_object_get_ex(e, key, &o) || !json_object_is_type(o, json_type_int))
		return -999;
	return (long long)json_object_get_int64(o);
}

static int64_t prop_i64(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);
	ITEST_CHECK(p != NULL, "entity %s/%s has no %s", ecw_entity_pk(e), ecw_entity_rk(e), name);
	return p->type == ECW_EDM_INT32 ? p->v.i32 : p->v.i64;
}

static char *b64(const void *p, size_t n)
{
	struct ecw_buf b;

	ecw_buf_init(&b, 0);
	ECW_ASSERT_OK(ecw_base64_encode(&b, p, n));
	return ecw_buf_take(&b);
}

/* "YYYY-MM-DDThh:mm:ssZ" as Unix time; -1 when it is not that. */
static time_t iso_time(const char *s)
{
	struct tm tm;
	int n = 0;

	memset(&tm, 0, sizeof(tm));
	if (!s ||
	    sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
	           &tm.tm_min, &tm.tm_sec, &n) != 6 ||
	    n != 20)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return timegm(&tm);
}

/* ---- 1. transient failures back off, then succeed ------------------------------------- */

static void test_settle__transient_twice_then_success(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char jobs[256], id[64];
	struct proc p;
	struct proc_log log;
	struct ecw_entity *rows[8] = {0};
	const char *text = "{\"job\":\"flaky\",\"pk\":\"Sales\",\"rk\":\"flaky-001\"}";

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  flaky: {type: test-flaky, fail_times: 2, table: %s}\n", t->table);
	o.jobs = jobs;
	rtfx_put(r, text, id);
	rtfx_start_worker(&p, r, "runtime-flaky", &o);

	PROC_EXPECT_LOG(&p, 1, 20000, "message", "message_id", id, "outcome", "succeeded");

	proc_log_read(&log, p.log_path);
	assert_int_equal(proc_log_count(&log, "message", "message_id", id, NULL), 3);
	assert_int_equal(proc_log_count(&log, "message", "message_id", id, "outcome", "retried", NULL), 2);
	struct json_object *r1 =
	    proc_log_find(&log, 0, "message", "message_id", id, "outcome", "retried", NULL);
	struct json_object *r2 =
	    proc_log_find(&log, 1, "message", "message_id", id, "outcome", "retried", NULL);
	struct json_object *ok =
	    proc_log_find(&log, 0, "message", "message_id", id, "outcome", "succeeded", NULL);
	assert_int_equal(proc_field_int(r1, "dequeue_count", -1), 1);
	assert_int_equal(proc_field_int(r2, "dequeue_count", -1), 2);
	assert_int_equal(proc_field_int(ok, "dequeue_count", -1), 3);
	/* base 1s: hidden a whole number of seconds from 1 to base * 2^(n-1):
	 * 1 s, then 1 or 2 s (full jitter). */
	ITEST_CHECK(proc_field_int(r1, "hidden_s", -1) == 1, "first retry hidden_s %lld, expected 1",
	            proc_field_int(r1, "hidden_s", -1));
	long long h2 = proc_field_int(r2, "hidden_s", -1);
	ITEST_CHECK(h2 == 1 || h2 == 2, "second retry hidden_s %lld, expected 1 or 2", h2);
	assert_string_equal(proc_field(r1, "job"), "flaky");
	assert_string_equal(proc_field(r1, "pk"), "Sales");
	assert_string_equal(proc_field(r1, "rk"), "flaky-001");
	ITEST_CHECK(proc_field(r1, "error")[0] != '\0', "a retried line names the error");
	ITEST_CHECK(proc_field(ok, "reason")[0] == '\0', "a success has no reason: %s",
	            proc_field(ok, "reason"));
	assert_int_equal(proc_log_count(&log, "message", "outcome", "poisoned", NULL), 0);
	proc_log_dispose(&log);

	/* Deleted, not poisoned. */
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	assert_int_equal(rtfx_queue_count(r, r->fx.poison), 0);

	/* The attempts, as the job recorded them: each gap is the hidden time
	 * the retried line gave (less the service's rounding), plus the poll. */
	assert_int_equal(rtfx_rows_with_pk(r, t->table, "flaky-001", rows, 8), 3);
	int64_t mono[3];
	for (int i = 0; i < 3; i++) {
		char want[32];
		snprintf(want, sizeof(want), "attempt-%03d", i + 1);
		assert_string_equal(ecw_entity_rk(rows[i]), want);
		assert_int_equal(prop_i64(rows[i], "Dequeue"), i + 1);
		mono[i] = prop_i64(rows[i], "MonoMs");
		(void)prop_i64(rows[i], "AtMs");
	}
	ITEST_CHECK(mono[1] - mono[0] >= 800 && mono[1] - mono[0] <= 5000,
	            "attempt 2 came %lld ms after attempt 1; expected 0.8 s .. 5 s",
	            (long long)(mono[1] - mono[0]));
	ITEST_CHECK(mono[2] - mono[1] >= h2 * 1000 - 200 && mono[2] - mono[1] <= h2 * 1000 + 5000,
	            "attempt 3 came %lld ms after attempt 2; hidden %lld s, so expected that to 5 s more",
	            (long long)(mono[2] - mono[1]), h2);
	for (int i = 0; i < 3; i++)
		ecw_entity_free(rows[i]);
	rtfx_finish(&p);
}

/* ---- 2. a permanent failure is poisoned on its first delivery ---------------------------- */

static void test_settle__permanent_failure_poisoned_at_once(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char id[64];
	struct proc p;
	/* XML-special characters, a carriage return, multi-byte UTF-8 and
	 * extra fields: the envelope must keep all of it byte for byte. */
	const char *text = "{\"job\":\"broken\",\r\n \"pk\":\"Sales\",\"rk\":\"o'brien <001> & Zo\xc3\xab "
	                   "\xf0\x9f\x98\x80\","
	                   "\"extra\":[1,2,{\"a\":null}],\"note\":\"tab\\there\"}\r\n";

	itest_queue(t);
	o.jobs = "  broken: {type: test-fail}\n";
	time_t put_at = time(NULL);
	rtfx_put(r, text, id);
	itest_sleep_ms(1500); /* so failed_at and inserted_at differ */
	rtfx_start_worker(&p, r, "runtime-permanent", &o);

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", "message_id", id, NULL);
	assert_string_equal(proc_field(line, "outcome"), "poisoned");
	assert_string_equal(proc_field(line, "reason"), "permanent");
	assert_int_equal(proc_field_int(line, "dequeue_count", -1), 1);
	assert_string_equal(proc_field(line, "job"), "broken");
	ITEST_CHECK(strstr(proc_field(line, "error"), "can never succeed") != NULL, "error: %s",
	            proc_field(line, "error"));
	proc_log_dispose(&log);

	/* message_ttl defaults to -1: the envelope never expires. */
	struct ecw_queue_msg *pk = NULL;
	size_t npk = 0;
	int64_t pend = itest_now_ms() + 5000;
	while (npk == 0 && itest_now_ms() < pend) {
		ECW_ASSERT_OK(ecw_queue_peek(&pk, &npk, t->client, r->fx.poison, 1));
		if (npk == 0) {
			ecw_queue_msgs_free(pk, npk);
			itest_sleep_ms(50);
		}
	}
	assert_int_equal(npk, 1);
	ITEST_CHECK(pk[0].expiration_time == 0,
	            "the envelope expires at %lld (inserted %lld): message_ttl -1 means never",
	            (long long)pk[0].expiration_time, (long long)pk[0].insertion_time);
	ecw_queue_msgs_free(pk, npk);

	struct json_object **env = poison_envelopes(r, 1, 5000);
	struct json_object *e = env[0];
	const char *s;
	assert_int_equal(env_int(e, "ecw_poison"), 1);
	ITEST_CHECK(envelope_for(env, text, strlen(text)) == e, "original differs from what was sent: %s",
	            env_str(e, "original") ? env_str(e, "original") : "(none)");
	assert_string_equal(env_str(e, "reason"), "permanent");
	assert_int_equal(env_int(e, "dequeue_count"), 1);
	assert_string_equal(env_str(e, "job"), "broken");
	assert_string_equal(env_str(e, "pk"), "Sales");
	assert_string_equal(env_str(e, "rk"), "o'brien <001> & Zo\xc3\xab \xf0\x9f\x98\x80");
	assert_string_equal(env_str(e, "queue"), t->queue);
	assert_string_equal(env_str(e, "message_id"), id);
	ITEST_CHECK((s = env_str(e, "error")) && strstr(s, "can never succeed"), "error: %s",
	            s ? s : "(none)");
	ITEST_CHECK((s = env_str(e, "worker")) && *s, "worker: %s", s ? s : "(none)");
	/* the job's own error, no storage answer: neither field */
	assert_int_equal(env_int(e, "http_status"), -999);
	ITEST_CHECK(env_str(e, "error_code") == NULL, "error_code: %s", env_str(e, "error_code"));
	ITEST_CHECK((s = env_str(e, "inserted_at")) && strlen(s) == 20 && s[19] == 'Z', "inserted_at: %s",
	            s ? s : "(none)");
	ITEST_CHECK((s = env_str(e, "failed_at")) && strlen(s) == 20 && s[19] == 'Z', "failed_at: %s",
	            s ? s : "(none)");
	/* Both are UTC and close to now; inserted_at is when the message was
	 * put, before the worker started. */
	time_t ins = iso_time(env_str(e, "inserted_at")), fail = iso_time(env_str(e, "failed_at"));
	time_t now = time(NULL);
	ITEST_CHECK(ins >= put_at - 5 && ins <= put_at + 5,
	            "inserted_at %s is not the time of the put (%lld)", env_str(e, "inserted_at"),
	            (long long)put_at);
	ITEST_CHECK(fail >= ins && fail <= now + 5, "failed_at %s is not between inserted_at and now",
	            env_str(e, "failed_at"));
	envelopes_free(env);

	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	assert_int_equal(rtfx_queue_count(r, r->fx.poison), 1);
	rtfx_finish(&p);
}

/* A failure that was a storage answer: the envelope records its status and
 * error code apart from the text (what `poison list --group-by status`
 * groups by). The entity the run inserts is there already, so its insert
 * gets 409 EntityAlreadyExists (transient); max_dequeue_count 1 poisons it
 * on that first delivery. (A missing table, which this test once used, now
 * holds the message instead: test_missing_table.) */
static void test_settle__storage_answer_recorded_in_envelope(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char jobs[256], id[64], rk[128];
	struct ecw_entity *e = NULL;
	struct proc p;
	const char *text = "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"taken\"}";
	const char *s;

	itest_queue(t);
	itest_table(t);
	snprintf(jobs, sizeof(jobs), "  count: {type: test-count, table: %s}\n", t->table);
	o.jobs = jobs;
	o.max_dequeue = 1;
	rtfx_put(r, text, id);
	/* test-count's entity for this delivery: (rk, "<message id>~1"). */
	snprintf(rk, sizeof(rk), "%s~1", id);
	ECW_ASSERT_OK(ecw_table_create(NULL, t->client, t->table));
	ECW_ASSERT_OK(ecw_entity_new(&e, "taken", rk));
	ECW_ASSERT_OK(ecw_table_write(NULL, t->client, t->table, e, ECW_WRITE_INSERT, NULL));
	ecw_entity_free(e);
	rtfx_start_worker(&p, r, "runtime-answer", &o);

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "poisoned");
	struct json_object **env = poison_envelopes(r, 1, 5000);
	ITEST_CHECK(envelope_for(env, text, strlen(text)) == env[0], "original differs");
	ITEST_CHECK((s = env_str(env[0], "error")) && strstr(s, "EntityAlreadyExists"), "error: %s",
	            s ? s : "(none)");
	assert_int_equal(env_int(env[0], "http_status"), 409);
	ITEST_CHECK((s = env_str(env[0], "error_code")) && strcmp(s, "EntityAlreadyExists") == 0,
	            "error_code: %s", s ? s : "(none)");
	envelopes_free(env);
	rtfx_finish(&p);
}

/* ---- 3. over-delivered messages are poisoned before running -------------------------------- */

/* Receives the message with id until it has been delivered `times` times,
 * making it visible again at once after each delivery but the last, after
 * which it stays hidden for last_hide_s. It must be the only visible message. */
static void deliver(struct rtfx *r, const char *id, long times, int last_hide_s)
{
	int64_t end = itest_now_ms() + 10000;
	long dq = 0;

	while (dq < times) {
		struct ecw_queue_msg *m = NULL;
		size_t n = 0;
		ITEST_CHECK(itest_now_ms() < end, "message %s delivered %ld times in 10 s, wanted %ld", id,
		            dq, times);
		ECW_ASSERT_OK(ecw_queue_receive(&m, &n, r->fx.t->client, r->fx.t->queue, 32, 30));
		ITEST_CHECK(n <= 1, "received %zu messages; only %s should be visible", n, id);
		if (n == 1) {
			assert_string_equal(m[0].id, id);
			dq = m[0].dequeue_count;
			ECW_ASSERT_OK(ecw_queue_update(&m[0], r->fx.t->client, r->fx.t->queue,
			                               dq < times ? 0 : last_hide_s, NULL, 0));
		} else {
			itest_sleep_ms(50);
		}
		ecw_queue_msgs_free(m, n);
	}
	assert_int_equal(dq, times);
}

static void test_settle__max_dequeue_poisoned_without_running(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char jobs[256], ida[64], idb[64];
	struct proc p;
	const char *texta = "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"over-delivered\"}";
	const char *textb = "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"at-the-limit\"}";

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  count: {type: test-count, table: %s}\n", t->table);
	o.jobs = jobs;
	o.max_dequeue = 2;
	/* A: delivered twice already, so the worker's delivery is the third:
	 * one more than max_dequeue_count. B: once, so the worker's is the
	 * second, at the limit, which still runs. */
	rtfx_put(r, texta, ida);
	deliver(r, ida, 2, 2);
	rtfx_put(r, textb, idb);
	deliver(r, idb, 1, 0);
	int64_t end = itest_now_ms() + 5000;
	while (rtfx_peek_count(r, t->queue) < 2) {
		ITEST_CHECK(itest_now_ms() < end, "the two messages did not become visible again");
		itest_sleep_ms(100);
	}
	rtfx_start_worker(&p, r, "runtime-maxdq", &o);

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", ida);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", idb);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *la = proc_log_find(&log, 0, "message", "message_id", ida, NULL);
	struct json_object *lb = proc_log_find(&log, 0, "message", "message_id", idb, NULL);
	assert_string_equal(proc_field(la, "outcome"), "poisoned");
	assert_string_equal(proc_field(la, "reason"), "max-dequeue");
	assert_int_equal(proc_field_int(la, "dequeue_count", -1), 3);
	assert_string_equal(proc_field(lb, "outcome"), "succeeded");
	assert_int_equal(proc_field_int(lb, "dequeue_count", -1), 2);
	proc_log_dispose(&log);

	/* A never ran; B ran once, on its second delivery. */
	assert_int_equal(rtfx_rows_with_pk(r, t->table, "over-delivered", NULL, 0), 0);
	struct ecw_entity *row = NULL;
	assert_int_equal(rtfx_rows_with_pk(r, t->table, "at-the-limit", &row, 1), 1);
	assert_int_equal(prop_i64(row, "Dequeue"), 2);
	ecw_entity_free(row);

	struct json_object **env = poison_envelopes(r, 1, 5000);
	ITEST_CHECK(envelope_for(env, texta, strlen(texta)) == env[0], "original: %s",
	            env_str(env[0], "original") ? env_str(env[0], "original") : "(none)");
	assert_string_equal(env_str(env[0], "reason"), "max-dequeue");
	assert_int_equal(env_int(env[0], "dequeue_count"), 3);
	assert_string_equal(env_str(env[0], "message_id"), ida);
	assert_string_equal(env_str(env[0], "job"), "count");
	assert_string_equal(env_str(env[0], "rk"), "over-delivered");
	envelopes_free(env);
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	rtfx_finish(&p);
}

/* ---- 4. plain and base64 messages both run ------------------------------------------------- */

static void test_settle__base64_and_plain(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char jobs[256], id1[64], id2[64];
	struct proc p;
	/* JSON may follow whitespace; "id" is a trace id the log carries. */
	const char *plain = " \r\n\t{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"plain-1\",\"id\":\"trace-42\"}";
	const char *json2 = "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"b64-1\",\"extra\":\"Zo\xc3\xab\"}";
	char *encoded = b64(json2, strlen(json2));

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  count: {type: test-count, table: %s}\n", t->table);
	o.jobs = jobs;
	rtfx_put(r, plain, id1);
	rtfx_put(r, encoded, id2);
	free(encoded);
	rtfx_start_worker(&p, r, "runtime-base64", &o);

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	assert_int_equal(rtfx_rows_with_pk(r, t->table, "plain-1", NULL, 0), 1);
	assert_int_equal(rtfx_rows_with_pk(r, t->table, "b64-1", NULL, 0), 1);
	assert_int_equal(proc_count(&p, "message", "rk", "b64-1", "job", "count", NULL), 1);
	assert_int_equal(
	    proc_count(&p, "message", "message_id", id1, "id", "trace-42", "rk", "plain-1", NULL), 1);
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	assert_int_equal(rtfx_queue_count(r, r->fx.poison), 0);
	rtfx_finish(&p);
}

/* ---- 5. garbage is poisoned and never stops the worker --------------------------------------- */

static void test_settle__garbage_poisoned_worker_keeps_running(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char jobs[256], id[64];
	struct proc p;
	unsigned char rnd[200];
	const char *bad_utf8 = "{\"job\":\"\xff\xfe\"}";
	char *braces = malloc(60 * 1024 + 1);
	enum { NG = 9 };
	char *texts[NG];

	assert_non_null(braces);
	for (size_t i = 0; i < sizeof(rnd); i++)
		rnd[i] = (unsigned char)(i * 37 + 11 + (i * i) % 251);
	rnd[0] = 0x80; /* never '{' or whitespace */
	memset(braces, '{', 60 * 1024);
	braces[60 * 1024] = '\0';
	texts[0] = b64(rnd, sizeof(rnd));
	texts[1] = b64(bad_utf8, strlen(bad_utf8));
	texts[2] = braces;
	texts[3] = strdup("hello");
	texts[4] = strdup("[1,2]");
	texts[5] = strdup("{\"job\":\"count\",\"rk\":\"no-pk\"}");
	texts[6] = strdup("{\"job\":\"no-such-job\",\"pk\":\"p\",\"rk\":\"unknown-job\"}");
	texts[7] = strdup("{\"job\":\"count\",\"pk\":\"a/b\",\"rk\":\"slash\"}");
	texts[8] = strdup("{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"trailing\"} junk");

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  count: {type: test-count, table: %s}\n", t->table);
	o.jobs = jobs;
	rtfx_start_worker(&p, r, "runtime-garbage", &o);
	for (int i = 0; i < NG; i++)
		rtfx_put(r, texts[i], NULL);

	PROC_EXPECT_LOG(&p, NG, 20000, "message", "outcome", "poisoned");
	ITEST_CHECK(proc_alive(&p), "the worker exited after garbage; log:\n%s", proc_tail(p.log_path, 30));
	assert_int_equal(proc_count(&p, "message", "outcome", "poisoned", "reason", "permanent", NULL), NG);

	struct json_object **env = poison_envelopes(r, NG, 10000);
	for (int i = 0; i < NG; i++) {
		struct json_object *e = envelope_for(env, texts[i], strlen(texts[i]));
		const char *err;
		ITEST_CHECK(e != NULL, "no envelope with the original of garbage #%d (%.60s...)", i,
		            texts[i]);
		assert_int_equal(env_int(e, "ecw_poison"), 1);
		assert_string_equal(env_str(e, "reason"), "permanent");
		assert_int_equal(env_int(e, "dequeue_count"), 1);
		ITEST_CHECK((err = env_str(e, "error")) && *err, "garbage #%d: envelope without an error", i);
	}
	/* What decoded is kept for people to read. */
	struct json_object *e6 = envelope_for(env, texts[6], strlen(texts[6]));
	assert_string_equal(env_str(e6, "job"), "no-such-job");
	assert_string_equal(env_str(e6, "pk"), "p");
	assert_string_equal(env_str(e6, "rk"), "unknown-job");
	ITEST_CHECK(strstr(env_str(e6, "error"), "no-such-job") != NULL, "error: %s", env_str(e6, "error"));
	envelopes_free(env);

	/* Still working. */
	rtfx_put(r, "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"good-after-garbage\"}", id);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
	assert_int_equal(rtfx_rows_with_pk(r, t->table, "good-after-garbage", NULL, 0), 1);
	assert_int_equal(rtfx_rows_with_pk(r, t->table, "slash", NULL, 0), 0);
	assert_int_equal(rtfx_rows_with_pk(r, t->table, "trailing", NULL, 0), 0);
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	for (int i = 0; i < NG; i++)
		free(texts[i]);
	rtfx_finish(&p);
}

/* ---- 6. more outcome rules ------------------------------------------------------------------------- */

/* A transient failure on delivery max_dequeue_count is poisoned, not hidden
 * again. */
static void test_settle__transient_until_max_dequeue_poisoned(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char id[64];
	struct proc p;
	const char *text = "{\"job\":\"flaky\",\"pk\":\"p\",\"rk\":\"never-ok\"}";

	itest_queue(t);
	o.jobs = "  flaky: {type: test-flaky, fail_times: 10}\n";
	o.max_dequeue = 2;
	o.worker_extra = "  message_ttl: 1h\n";
	rtfx_put(r, text, id);
	rtfx_start_worker(&p, r, "runtime-flakymax", &o);

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "poisoned");
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	assert_int_equal(proc_log_count(&log, "message", "message_id", id, NULL), 2);
	struct json_object *first = proc_log_find(&log, 0, "message", "message_id", id, NULL);
	struct json_object *last = proc_log_find(&log, 1, "message", "message_id", id, NULL);
	assert_string_equal(proc_field(first, "outcome"), "retried");
	assert_string_equal(proc_field(last, "reason"), "max-dequeue");
	assert_int_equal(proc_field_int(last, "dequeue_count", -1), 2);
	proc_log_dispose(&log);

	/* message_ttl 1h: the envelope expires an hour after it was written. */
	struct ecw_queue_msg *pk = NULL;
	size_t npk = 0;
	int64_t pend = itest_now_ms() + 5000;
	while (npk == 0 && itest_now_ms() < pend) {
		ECW_ASSERT_OK(ecw_queue_peek(&pk, &npk, t->client, r->fx.poison, 1));
		if (npk == 0) {
			ecw_queue_msgs_free(pk, npk);
			itest_sleep_ms(50);
		}
	}
	assert_int_equal(npk, 1);
	long long ttl = (long long)(pk[0].expiration_time - pk[0].insertion_time);
	ITEST_CHECK(ttl >= 3595 && ttl <= 3605, "the envelope lives %lld s, expected 3600 (message_ttl: 1h)",
	            ttl);
	ecw_queue_msgs_free(pk, npk);

	struct json_object **env = poison_envelopes(r, 1, 5000);
	ITEST_CHECK(envelope_for(env, text, strlen(text)) == env[0], "original differs");
	assert_string_equal(env_str(env[0], "reason"), "max-dequeue");
	assert_int_equal(env_int(env[0], "dequeue_count"), 2);
	ITEST_CHECK(strstr(env_str(env[0], "error"), "test-flaky") != NULL, "error: %s",
	            env_str(env[0], "error"));
	envelopes_free(env);
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	rtfx_finish(&p);
}

/* The envelope goes first, then the original is deleted: when the envelope
 * cannot be written, the original must stay. */
static void test_settle__poison_put_failure_keeps_original(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char id[64];
	struct proc p;
	int status;
	const char *text = "{\"job\":\"broken\",\"pk\":\"p\",\"rk\":\"keep-me\"}";

	itest_queue(t);
	o.jobs = "  broken: {type: test-fail}\n";
	int port = rtfx_start_worker(&p, r, "runtime-poisonfail", &o);
	int64_t end = itest_now_ms() + 10000;
	while ((status = proc_http_get(NULL, port, "/readyz")) != 200) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p), "/readyz answers %d; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(50);
	}
	/* The worker created its poison queue at start; take it away. */
	ECW_ASSERT_OK(ecw_queue_delete_queue(t->client, r->fx.poison));
	rtfx_put(r, text, id);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", "message_id", id, NULL);
	ITEST_CHECK(strcmp(proc_field(line, "outcome"), "poisoned") != 0,
	            "outcome \"poisoned\" although the poison queue does not exist");
	proc_log_dispose(&log);
	assert_int_equal(rtfx_queue_count(r, t->queue), 1);

	/* Once the poison queue is back, the next delivery poisons it. */
	ECW_ASSERT_OK(ecw_queue_create(NULL, t->client, r->fx.poison));
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "poisoned");
	struct json_object **env = poison_envelopes(r, 1, 5000);
	ITEST_CHECK(envelope_for(env, text, strlen(text)) == env[0], "original differs");
	assert_int_equal(env_int(env[0], "dequeue_count"), 2);
	envelopes_free(env);
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	rtfx_finish(&p);
}

/* An envelope that would pass the 64 KiB limit: the original goes to the
 * poison queue unchanged (replay accepts both). */
static void test_settle__oversized_envelope_falls_back_to_original(void **state)
{
	struct rtfx *r = *state;
	struct itest *t = r->fx.t;
	struct rtfx_wopts o = RTFX_WOPTS_DEFAULT;
	char id[64];
	struct proc p;
	size_t len = 65300;
	char *text = malloc(len + 1);
	const char *head = "{\"job\":\"broken\",\"pk\":\"p\",\"rk\":\"big\",\"pad\":\"";

	assert_non_null(text);
	memset(text, 'x', len);
	memcpy(text, head, strlen(head));
	memcpy(text + len - 2, "\"}", 2);
	text[len] = '\0';
	itest_queue(t);
	o.jobs = "  broken: {type: test-fail}\n";
	rtfx_put_len(r, text, len, id);
	rtfx_start_worker(&p, r, "runtime-bigpoison", &o);

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id);
	assert_int_equal(proc_count(&p, "message", "message_id", id, "outcome", "poisoned", NULL), 1);
	size_t got = 0;
	struct ecw_queue_msg *m = rtfx_receive_n(&got, r, r->fx.poison, 1, 30, 5000);
	assert_int_equal(got, 1);
	ITEST_CHECK(m[0].text_len == len && memcmp(m[0].text, text, len) == 0,
	            "the poison queue holds %zu bytes, not the %zu-byte original", m[0].text_len, len);
	ecw_queue_msgs_free(m, got);
	assert_int_equal(rtfx_queue_count(r, t->queue), 0);
	free(text);
	rtfx_finish(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_settle__transient_twice_then_success, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_settle__permanent_failure_poisoned_at_once, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_settle__storage_answer_recorded_in_envelope, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_settle__max_dequeue_poisoned_without_running, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_settle__base64_and_plain, rtfx_setup, rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_settle__garbage_poisoned_worker_keeps_running, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_settle__transient_until_max_dequeue_poisoned, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_settle__poison_put_failure_keeps_original, rtfx_setup,
	                                    rtfx_teardown),
	    cmocka_unit_test_setup_teardown(test_settle__oversized_envelope_falls_back_to_original,
	                                    rtfx_setup, rtfx_teardown),
	};
	/* ECW_TEST_FILTER=test_settle__transient* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("settle", tests, NULL, NULL);
}
