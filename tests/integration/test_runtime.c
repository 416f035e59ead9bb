/* test_runtime.c - the worker runtime as a process: build/ecworker-test (the
 * worker with the test-only job types) runs against the real Azurite with a
 * config written per test (its own queue, poison queue and tables), and the
 * tests judge it by what it leaves in storage, by its JSON log lines and by
 * its metrics endpoint: the outcome rules (success deletes, transient failures
 * back off, permanent ones and over-delivered ones are poisoned with an exact
 * envelope), garbage that must never stop it, leases renewed for long jobs and
 * lost ones that stop a job's writes, a clean SIGTERM that hands every held
 * message back at once, exactly-once processing under load with one and with
 * three workers, and no secret in any log line. */
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <arpa/inet.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ecw_codec.h"

/* ---- fixture ---------------------------------------------------------------------- */

struct rt {
	struct wfx fx;             /* first, for wfx_teardown: client, queue name (the job queue), tables */
	struct ecw_client *client; /* what the helpers use: fx.t->client, or one
	                            * for a test's private Azurite */
	const char *connstr;       /* NULL: ECW_TEST_CONNECTION_STRING */
	char worker_env[640];      /* "" or ECW_TEST_CONNECTION_STRING=... for workers */
};

/* The worker creates the tables and queues it needs. */
static int rt_setup(void **state)
{
	struct rt *r = wfx_new(sizeof(*r), 0);

	r->client = r->fx.t->client;
	*state = r;
	return 0;
}

static int rt_teardown(void **state)
{
	return wfx_teardown(state);
}

/* ---- the worker's configuration --------------------------------------------------- */

struct wopts {
	int concurrency, batch_size, visibility_s, max_dequeue;
	const char *shutdown_grace;
	const char *jobs;         /* lines under jobs:, indented two spaces */
	const char *worker_extra; /* more lines under worker:, indented two spaces */
};

#define WOPTS_DEFAULT                                                                                        \
	{                                                                                                    \
		4, 16, 30, 5, "5s", NULL, NULL                                                               \
	}

/* Writes NAME.yaml for this test and returns the metrics port it listens on. */
static int write_config(char *path, size_t cap, struct rt *r, const char *name, const struct wopts *o)
{
	struct wfx_worker w = WFX_WORKER(r->fx.t->queue, r->fx.poison);

	w.batch_size = o->batch_size;
	w.concurrency = o->concurrency;
	w.visibility_s = o->visibility_s;
	w.max_dequeue = o->max_dequeue;
	w.retry_max = "4s";
	w.shutdown_grace = o->shutdown_grace;
	w.worker_extra = o->worker_extra;
	w.metrics_port = proc_free_port();
	w.jobs = o->jobs ? o->jobs : "  noop: {type: test-noop}\n";
	wfx_write_config(path, cap, name, &w);
	return w.metrics_port;
}

/* Writes the config and starts the worker; returns its metrics port. */
static int start_worker(struct proc *p, struct rt *r, const char *name, const struct wopts *o)
{
	char path[640];
	int port = write_config(path, sizeof(path), r, name, o);
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {r->worker_env, NULL};

	proc_start(p, name, args, r->worker_env[0] ? env : NULL);
	return port;
}

/* Stops the worker cleanly (status 0) and checks every log for secrets. */
static void finish(struct proc *p)
{
	proc_stop(p, 10000);
	proc_assert_logs_clean();
}

/* ---- storage helpers --------------------------------------------------------------- */

static void put_len(struct rt *r, const char *text, size_t len, char *id_out)
{
	struct ecw_queue_msg m;

	memset(&m, 0, sizeof(m));
	ECW_ASSERT_OK(ecw_queue_put(&m, r->client, r->fx.t->queue, text, len, NULL));
	if (id_out)
		memcpy(id_out, m.id, sizeof(m.id));
}

static void put(struct rt *r, const char *text, char *id_out)
{
	put_len(r, text, strlen(text), id_out);
}

static long long queue_count(struct rt *r, const char *q)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, r->client, q));
	return n;
}

static size_t peek_count(struct rt *r, const char *q)
{
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;

	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, r->client, q, 32));
	ecw_queue_msgs_free(m, n);
	return n;
}

/* Receives until want messages arrived (or timeout_ms passed); each is held
 * for visibility_s. The caller frees them. */
static struct ecw_queue_msg *receive_n(size_t *got, struct rt *r, const char *q, size_t want,
                                       int visibility_s, int timeout_ms)
{
	struct ecw_queue_msg *all = calloc(want ? want : 1, sizeof(*all));
	int64_t end = itest_now_ms() + timeout_ms;

	assert_non_null(all);
	*got = 0;
	while (*got < want) {
		struct ecw_queue_msg *m = NULL;
		size_t n = 0;
		int max = (int)(want - *got > 32 ? 32 : want - *got);

		ECW_ASSERT_OK(ecw_queue_receive(&m, &n, r->client, q, max, visibility_s));
		for (size_t i = 0; i < n; i++) {
			all[(*got)++] = m[i];
			m[i].text = NULL;
		}
		ecw_queue_msgs_free(m, n);
		if (*got >= want || itest_now_ms() > end)
			break;
		if (n == 0)
			itest_sleep_ms(100);
	}
	return all;
}

/* The poison envelopes: receives until want arrived, parses each. */
static struct json_object **poison_envelopes(struct rt *r, size_t want, int timeout_ms)
{
	size_t got = 0;
	struct ecw_queue_msg *m = receive_n(&got, r, r->fx.poison, want, 60, timeout_ms);
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

/* The entities of table whose PartitionKey is pk (up to max; returns how
 * many there are). */
static size_t rows_with_pk(struct rt *r, const char *table, const char *pk, struct ecw_entity **out,
                           size_t max)
{
	struct ecw_buf f;
	struct ecw_table_query *q = NULL;
	size_t n = 0;

	ecw_buf_init(&f, 0);
	ECW_ASSERT_OK(ecw_buf_adds(&f, "PartitionKey eq "));
	ECW_ASSERT_OK(ecw_escape_filter_string(&f, pk));
	struct ecw_query_options qo = {.filter = ecw_buf_cstr(&f)};
	ECW_ASSERT_OK(ecw_table_query_new(&q, r->client, table, &qo));
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		if (out && n < max)
			out[n] = e;
		else
			ecw_entity_free(e);
		n++;
	}
	ecw_table_query_free(q);
	ecw_buf_dispose(&f);
	return n;
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

static void test_runtime__transient_twice_then_success(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	char jobs[256], id[64];
	struct proc p;
	struct proc_log log;
	struct ecw_entity *rows[8] = {0};
	const char *text = "{\"job\":\"flaky\",\"pk\":\"Sales\",\"rk\":\"flaky-001\"}";

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  flaky: {type: test-flaky, fail_times: 2, table: %s}\n", t->table);
	o.jobs = jobs;
	put(r, text, id);
	start_worker(&p, r, "runtime-flaky", &o);

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
	/* base 1s: hidden base * 2^(n-1), jittered down by at most 20%, in
	 * whole seconds: 1 s, then 2 s. */
	ITEST_CHECK(proc_field_int(r1, "hidden_s", -1) == 1, "first retry hidden_s %lld, expected 1",
	            proc_field_int(r1, "hidden_s", -1));
	ITEST_CHECK(proc_field_int(r2, "hidden_s", -1) == 2, "second retry hidden_s %lld, expected 2",
	            proc_field_int(r2, "hidden_s", -1));
	assert_string_equal(proc_field(r1, "job"), "flaky");
	assert_string_equal(proc_field(r1, "pk"), "Sales");
	assert_string_equal(proc_field(r1, "rk"), "flaky-001");
	ITEST_CHECK(proc_field(r1, "error")[0] != '\0', "a retried line names the error");
	ITEST_CHECK(proc_field(ok, "reason")[0] == '\0', "a success has no reason: %s",
	            proc_field(ok, "reason"));
	assert_int_equal(proc_log_count(&log, "message", "outcome", "poisoned", NULL), 0);
	proc_log_dispose(&log);

	/* Deleted, not poisoned. */
	assert_int_equal(queue_count(r, t->queue), 0);
	assert_int_equal(queue_count(r, r->fx.poison), 0);

	/* The attempts, as the job recorded them: the gaps grow with the backoff. */
	assert_int_equal(rows_with_pk(r, t->table, "flaky-001", rows, 8), 3);
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
	ITEST_CHECK(mono[2] - mono[1] >= 1600 && mono[2] - mono[1] <= 7000,
	            "attempt 3 came %lld ms after attempt 2; expected 1.6 s .. 7 s",
	            (long long)(mono[2] - mono[1]));
	for (int i = 0; i < 3; i++)
		ecw_entity_free(rows[i]);
	finish(&p);
}

/* ---- 2. a permanent failure is poisoned on its first delivery ---------------------------- */

static void test_runtime__permanent_failure_poisoned_at_once(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
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
	put(r, text, id);
	itest_sleep_ms(1500); /* so failed_at and inserted_at differ */
	start_worker(&p, r, "runtime-permanent", &o);

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

	assert_int_equal(queue_count(r, t->queue), 0);
	assert_int_equal(queue_count(r, r->fx.poison), 1);
	finish(&p);
}

/* ---- 3. over-delivered messages are poisoned before running -------------------------------- */

/* Receives the message with id until it has been delivered `times` times,
 * making it visible again at once after each delivery but the last, after
 * which it stays hidden for last_hide_s. It must be the only visible message. */
static void deliver(struct rt *r, const char *id, long times, int last_hide_s)
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

static void test_runtime__max_dequeue_poisoned_without_running(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
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
	put(r, texta, ida);
	deliver(r, ida, 2, 2);
	put(r, textb, idb);
	deliver(r, idb, 1, 0);
	int64_t end = itest_now_ms() + 5000;
	while (peek_count(r, t->queue) < 2) {
		ITEST_CHECK(itest_now_ms() < end, "the two messages did not become visible again");
		itest_sleep_ms(100);
	}
	start_worker(&p, r, "runtime-maxdq", &o);

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
	assert_int_equal(rows_with_pk(r, t->table, "over-delivered", NULL, 0), 0);
	struct ecw_entity *row = NULL;
	assert_int_equal(rows_with_pk(r, t->table, "at-the-limit", &row, 1), 1);
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
	assert_int_equal(queue_count(r, t->queue), 0);
	finish(&p);
}

/* ---- 4. plain and base64 messages both run ------------------------------------------------- */

static void test_runtime__base64_and_plain(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	char jobs[256], id1[64], id2[64];
	struct proc p;
	/* JSON may follow whitespace; "id" is a trace id the log carries. */
	const char *plain = " \r\n\t{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"plain-1\",\"id\":\"trace-42\"}";
	const char *json2 = "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"b64-1\",\"extra\":\"Zo\xc3\xab\"}";
	char *encoded = b64(json2, strlen(json2));

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  count: {type: test-count, table: %s}\n", t->table);
	o.jobs = jobs;
	put(r, plain, id1);
	put(r, encoded, id2);
	free(encoded);
	start_worker(&p, r, "runtime-base64", &o);

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id1, "outcome", "succeeded");
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id2, "outcome", "succeeded");
	assert_int_equal(rows_with_pk(r, t->table, "plain-1", NULL, 0), 1);
	assert_int_equal(rows_with_pk(r, t->table, "b64-1", NULL, 0), 1);
	assert_int_equal(proc_count(&p, "message", "rk", "b64-1", "job", "count", NULL), 1);
	assert_int_equal(
	    proc_count(&p, "message", "message_id", id1, "id", "trace-42", "rk", "plain-1", NULL), 1);
	assert_int_equal(queue_count(r, t->queue), 0);
	assert_int_equal(queue_count(r, r->fx.poison), 0);
	finish(&p);
}

/* ---- 5. garbage is poisoned and never stops the worker --------------------------------------- */

static void test_runtime__garbage_poisoned_worker_keeps_running(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
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
	start_worker(&p, r, "runtime-garbage", &o);
	for (int i = 0; i < NG; i++)
		put(r, texts[i], NULL);

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
	put(r, "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"good-after-garbage\"}", id);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
	assert_int_equal(rows_with_pk(r, t->table, "good-after-garbage", NULL, 0), 1);
	assert_int_equal(rows_with_pk(r, t->table, "slash", NULL, 0), 0);
	assert_int_equal(rows_with_pk(r, t->table, "trailing", NULL, 0), 0);
	assert_int_equal(queue_count(r, t->queue), 0);
	for (int i = 0; i < NG; i++)
		free(texts[i]);
	finish(&p);
}

/* ---- 6. a job longer than the visibility timeout keeps its lease ------------------------------- */

static void test_runtime__long_job_keeps_lease(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	char jobs[256], id[64];
	struct proc p;
	struct ecw_entity *done = NULL;

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  slow: {type: test-sleep, duration: 6s, table: %s}\n", t->table);
	o.jobs = jobs;
	o.visibility_s = 2;
	o.concurrency = 2; /* a free slot would pick the message up again if it reappeared */
	put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"long-1\"}", id);
	start_worker(&p, r, "runtime-longjob", &o);

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id);
	/* Longer than a visibility timeout more: a redelivery would show. */
	itest_sleep_ms(2500);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	ITEST_CHECK(proc_log_count(&log, "message", "message_id", id, NULL) == 1,
	            "%zu message lines for %s, expected exactly 1; log:\n%s",
	            proc_log_count(&log, "message", "message_id", id, NULL), id, proc_tail(p.log_path, 30));
	struct json_object *line = proc_log_find(&log, 0, "message", "message_id", id, NULL);
	assert_string_equal(proc_field(line, "outcome"), "succeeded");
	assert_int_equal(proc_field_int(line, "dequeue_count", -1), 1);
	ITEST_CHECK(proc_field_int(line, "duration_ms", -1) >= 6000, "duration_ms %lld",
	            proc_field_int(line, "duration_ms", -1));
	ITEST_CHECK(proc_log_count(&log, "lease_renewed", "message_id", id, NULL) >= 3,
	            "%zu lease renewals over a 6 s job with a 2 s visibility timeout",
	            proc_log_count(&log, "lease_renewed", "message_id", id, NULL));
	proc_log_dispose(&log);
	ECW_ASSERT_OK(ecw_table_get(&done, t->client, t->table, "long-1", "done"));
	ecw_entity_free(done);
	assert_int_equal(queue_count(r, t->queue), 0);
	assert_int_equal(queue_count(r, r->fx.poison), 0);
	finish(&p);
}

/* ---- 7. a lost lease stops the job's writes --------------------------------------------------- */

static void test_runtime__lost_lease_stops_writes(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	char jobs[256], id[64];
	struct proc p;
	struct ecw_entity *done = NULL;

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  slow: {type: test-sleep, duration: 4s, table: %s}\n", t->table);
	o.jobs = jobs;
	o.visibility_s = 2;
	put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"lost-1\"}", id);
	start_worker(&p, r, "runtime-leaselost", &o);

	/* Received: hidden, still counted. Then take it away: the renewal at
	 * about 1 s finds no message. */
	int64_t end = itest_now_ms() + 10000;
	while (peek_count(r, t->queue) != 0) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p),
		            "the worker did not receive the message; log:\n%s", proc_tail(p.log_path, 20));
		itest_sleep_ms(20);
	}
	ECW_ASSERT_OK(ecw_queue_clear(t->client, t->queue));

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", "message_id", id, NULL);
	assert_string_equal(proc_field(line, "outcome"), "lease-lost");
	ITEST_CHECK(proc_log_count(&log, "lease_lost", "message_id", id, NULL) >= 1,
	            "no lease_lost event; log:\n%s", proc_tail(p.log_path, 20));
	proc_log_dispose(&log);
	ECW_ASSERT_ERR(ecw_table_get(&done, t->client, t->table, "lost-1", "done"), ECW_ENOTFOUND);
	assert_int_equal(queue_count(r, r->fx.poison), 0);
	finish(&p);
}

/* Every metric that deploy/prometheus/ecworker-alerts.yaml uses is on a real
 * worker's page (a renamed metric would silence its alert): the rules' own
 * behaviour is checked by promtool (make rules-test). */
static void check_alert_metrics(const char *page)
{
	const char *path = "deploy/prometheus/ecworker-alerts.yaml";
	FILE *f = fopen(path, "r");
	char rules[16384];
	size_t n, names = 0;

	ITEST_CHECK(f != NULL, "cannot open %s (the tests run from the source tree's top)", path);
	n = fread(rules, 1, sizeof(rules) - 1, f);
	fclose(f);
	rules[n] = '\0';
	for (const char *p = rules; (p = strstr(p, "ecw_"));) {
		char name[128], want[132];
		size_t k = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
		snprintf(name, sizeof(name), "%.*s", (int)(k < sizeof(name) ? k : sizeof(name) - 1), p);
		p += k;
		if (strcmp(name, "ecw_metrics_declare") == 0) /* named in a comment */
			continue;
		snprintf(want, sizeof(want), "\n%s{", name);
		if (!strstr(page, want))
			snprintf(want, sizeof(want), "\n%s ", name);
		ITEST_CHECK(strstr(page, want) != NULL, "%s uses %s, which the worker's /metrics lacks", path, name);
		names++;
	}
	ITEST_CHECK(names >= 5, "only %zu metric names found in %s", names, path);
}

/* ---- 8. SIGTERM hands every held message back at once --------------------------------------- */

static void test_runtime__sigterm_releases_inflight(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	char *page = NULL;
	int found;

	itest_queue(t);
	o.jobs = "  slow: {type: test-sleep, duration: 60s}\n";
	o.concurrency = 16;
	o.batch_size = 16;
	o.shutdown_grace = "2s";
	for (int i = 0; i < 16; i++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"held-%02d\"}", i);
		put(r, text, NULL);
	}
	int port = start_worker(&p, r, "runtime-sigterm", &o);

	int64_t end = itest_now_ms() + 10000;
	while (peek_count(r, t->queue) != 0) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p),
		            "the worker did not take all 16; log:\n%s", proc_tail(p.log_path, 20));
		itest_sleep_ms(50);
	}
	itest_sleep_ms(1000);
	assert_int_equal(queue_count(r, t->queue), 16);
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	double inflight = proc_metric(page, "ecw_jobs_in_flight", &found, NULL);
	ITEST_CHECK(found == 1 && inflight == 16, "ecw_jobs_in_flight %g (%d samples), expected 16", inflight,
	            found);
	/* Before any message finished, what alerts count from is there at 0
	 * (deploy/prometheus/ecworker-alerts.yaml): each poison reason, and the
	 * configured job's succeeded, retried and poisoned outcomes. */
	static const char *const reasons[] = {"reason=\"permanent\"", "reason=\"max-dequeue\""};
	static const char *const outcomes[] = {"outcome=\"succeeded\"", "outcome=\"retried\"",
	                                       "outcome=\"poisoned\""};
	for (int i = 0; i < 2; i++) {
		double v = proc_metric(page, "ecw_messages_poisoned_total", &found, reasons[i], NULL);
		ITEST_CHECK(found == 1 && v == 0, "ecw_messages_poisoned_total{%s}: %g (%d samples), expected 0",
		            reasons[i], v, found);
	}
	for (int i = 0; i < 3; i++) {
		double v = proc_metric(page, "ecw_messages_total", &found, "job=\"slow\"", outcomes[i], NULL);
		ITEST_CHECK(found == 1 && v == 0, "ecw_messages_total{job=\"slow\",%s}: %g (%d samples), expected 0",
		            outcomes[i], v, found);
	}
	check_alert_metrics(page);
	free(page);

	int64_t t0 = itest_now_ms();
	proc_signal(&p, SIGTERM);
	ITEST_CHECK(proc_wait(&p, 4000), "still running 4 s after SIGTERM with shutdown_grace 2s; log:\n%s",
	            proc_tail(p.log_path, 30));
	int64_t took = itest_now_ms() - t0;
	ITEST_CHECK(proc_exit_code(&p) == 0, "exit status %d after SIGTERM; log:\n%s", proc_exit_code(&p),
	            proc_tail(p.log_path, 30));
	ITEST_CHECK(took >= 1800, "exited %lld ms after SIGTERM: it did not wait the grace period",
	            (long long)took);

	/* Nothing deleted, everything visible again at once. */
	size_t got = 0;
	struct ecw_queue_msg *m = receive_n(&got, r, t->queue, 32, 30, 0);
	ITEST_CHECK(got == 16, "a receive right after the exit got %zu messages, expected all 16", got);
	for (size_t i = 0; i < got; i++)
		assert_int_equal(m[i].dequeue_count, 2);
	ecw_queue_msgs_free(m, got);
	assert_int_equal(queue_count(r, t->queue), 16);
	assert_int_equal(queue_count(r, r->fx.poison), 0);
	assert_int_equal(proc_count(&p, "message", "outcome", "released", NULL), 16);
	assert_int_equal(proc_count(&p, "stopping", NULL), 1);
	/* Like every per-message line, a release names the job and keys. */
	assert_int_equal(
	    proc_count(&p, "message", "outcome", "released", "job", "slow", "pk", "p", "rk", PROC_ANY, NULL),
	    16);
	proc_assert_logs_clean();
}

/* ---- 9. exactly once under load ------------------------------------------------------------------ */

#define LOAD_N 2000
#define PUTTERS 8

struct putter {
	struct ecw_account *acct;
	struct ecw_client *client;
	const char *queue;
	int from, to;
	int failed;
	char error[600];
};

static void *put_thread(void *arg)
{
	struct putter *pt = arg;

	for (int i = pt->from; i < pt->to; i++) {
		char text[128];
		int n =
		    snprintf(text, sizeof(text), "{\"job\":\"count\",\"pk\":\"load\",\"rk\":\"m%05d\"}", i);
		if (ecw_queue_put(NULL, pt->client, pt->queue, text, (size_t)n, NULL) < 0) {
			pt->failed++;
			snprintf(pt->error, sizeof(pt->error), "%s", itest_last_error());
		}
	}
	return NULL;
}

static void put_load(struct rt *r)
{
	struct putter pts[PUTTERS];
	pthread_t tids[PUTTERS];

	for (int i = 0; i < PUTTERS; i++) {
		memset(&pts[i], 0, sizeof(pts[i]));
		itest_client_for(&pts[i].acct, &pts[i].client, r->connstr ? r->connstr : itest_connstr(),
		                 NULL);
		pts[i].queue = r->fx.t->queue;
		pts[i].from = LOAD_N * i / PUTTERS;
		pts[i].to = LOAD_N * (i + 1) / PUTTERS;
		assert_int_equal(pthread_create(&tids[i], NULL, put_thread, &pts[i]), 0);
	}
	for (int i = 0; i < PUTTERS; i++) {
		pthread_join(tids[i], NULL);
		ITEST_CHECK(pts[i].failed == 0, "%d puts failed: %s", pts[i].failed, pts[i].error);
		ecw_client_free(pts[i].client);
		ecw_account_free(pts[i].acct);
	}
}

/* Runs `workers` processes on LOAD_N messages and checks each ran once. */
static void exactly_once(struct rt *r, int workers, const char *name)
{
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p[3];
	char jobs[256], pname[64];
	size_t done = 0;

	assert_true(workers <= 3);
	/* Thousands of deleted messages make Azurite's next queue GC stall
	 * it for tens of seconds: use one of our own, and stop it after. */
	struct proc_azurite az;
	struct ecw_account *pacct = NULL;
	struct ecw_client *pclient = NULL;
	if (proc_azurite_start(&az, name)) {
		itest_client_for(&pacct, &pclient, az.connstr, NULL);
		r->client = pclient;
		r->connstr = az.connstr;
		snprintf(r->worker_env, sizeof(r->worker_env), "ECW_TEST_CONNECTION_STRING=%s", az.connstr);
		ECW_ASSERT_OK(ecw_queue_create(NULL, pclient, t->queue));
	} else {
		itest_queue(t);
	}
	snprintf(jobs, sizeof(jobs), "  count: {type: test-count, table: %s}\n", t->table);
	o.jobs = jobs;
	o.concurrency = 16;
	o.batch_size = 16;
	int64_t t0 = itest_now_ms();
	put_load(r);
	int64_t t1 = itest_now_ms();
	for (int w = 0; w < workers; w++) {
		snprintf(pname, sizeof(pname), "%s-w%d", name, w + 1);
		start_worker(&p[w], r, pname, &o);
	}
	int64_t end = itest_now_ms() + 60000;
	for (;;) {
		done = 0;
		for (int w = 0; w < workers; w++) {
			ITEST_CHECK(proc_alive(&p[w]), "worker %d exited; log:\n%s", w + 1,
			            proc_tail(p[w].log_path, 30));
			done += proc_count(&p[w], "message", NULL);
		}
		if (done >= LOAD_N || itest_now_ms() > end)
			break;
		itest_sleep_ms(500);
	}
	int64_t t2 = itest_now_ms();
	print_message("%s: put %d messages in %lld ms, %d worker(s) processed %zu in %lld ms\n", name, LOAD_N,
	              (long long)(t1 - t0), workers, done, (long long)(t2 - t1));
	ITEST_CHECK(done >= LOAD_N, "only %zu of %d messages processed in 60 s", done, LOAD_N);

	size_t succeeded = 0, total = 0;
	for (int w = 0; w < workers; w++) {
		size_t s = proc_count(&p[w], "message", "outcome", "succeeded", NULL);
		print_message("  worker %d: %zu succeeded\n", w + 1, s);
		succeeded += s;
		total += proc_count(&p[w], "message", NULL);
	}
	ITEST_CHECK(succeeded == LOAD_N && total == LOAD_N,
	            "%zu message lines, %zu succeeded; expected %d of each", total, succeeded, LOAD_N);

	/* One row per message: none missing, none twice. */
	static unsigned char seen[LOAD_N];
	struct ecw_table_query *q = NULL;
	size_t rows = 0, dups = 0, strays = 0;
	memset(seen, 0, sizeof(seen));
	ECW_ASSERT_OK(ecw_table_query_new(&q, r->client, t->table, NULL));
	for (;;) {
		struct ecw_entity *e = NULL;
		int idx;
		char extra;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		rows++;
		if (sscanf(ecw_entity_pk(e), "m%5d%c", &idx, &extra) == 1 && idx >= 0 && idx < LOAD_N) {
			if (seen[idx]++)
				dups++;
		} else {
			strays++;
		}
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);
	size_t missing = 0;
	for (int i = 0; i < LOAD_N; i++)
		missing += seen[i] == 0;
	ITEST_CHECK(rows == LOAD_N && dups == 0 && missing == 0 && strays == 0,
	            "%zu rows: %zu missing, %zu run twice or more, %zu strays (expected %d, one each)", rows,
	            missing, dups, strays, LOAD_N);
	assert_int_equal(queue_count(r, t->queue), 0);
	assert_int_equal(queue_count(r, r->fx.poison), 0);
	for (int w = 0; w < workers; w++)
		proc_stop(&p[w], 10000);
	proc_assert_logs_clean();
	r->client = t->client;
	r->connstr = NULL;
	r->worker_env[0] = '\0';
	ecw_client_free(pclient);
	ecw_account_free(pacct);
	proc_azurite_stop(&az);
}

static void test_runtime__exactly_once_one_worker(void **state)
{
	exactly_once(*state, 1, "runtime-load1");
}

static void test_runtime__exactly_once_three_workers(void **state)
{
	exactly_once(*state, 3, "runtime-load3");
}

/* ---- 11. more outcome rules ------------------------------------------------------------------------ */

/* A transient failure on delivery max_dequeue_count is poisoned, not hidden
 * again. */
static void test_runtime__transient_until_max_dequeue_poisoned(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	char id[64];
	struct proc p;
	const char *text = "{\"job\":\"flaky\",\"pk\":\"p\",\"rk\":\"never-ok\"}";

	itest_queue(t);
	o.jobs = "  flaky: {type: test-flaky, fail_times: 10}\n";
	o.max_dequeue = 2;
	o.worker_extra = "  message_ttl: 1h\n";
	put(r, text, id);
	start_worker(&p, r, "runtime-flakymax", &o);

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
	assert_int_equal(queue_count(r, t->queue), 0);
	finish(&p);
}

/* The envelope goes first, then the original is deleted: when the envelope
 * cannot be written, the original must stay. */
static void test_runtime__poison_put_failure_keeps_original(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	char id[64];
	struct proc p;
	int status;
	const char *text = "{\"job\":\"broken\",\"pk\":\"p\",\"rk\":\"keep-me\"}";

	itest_queue(t);
	o.jobs = "  broken: {type: test-fail}\n";
	int port = start_worker(&p, r, "runtime-poisonfail", &o);
	int64_t end = itest_now_ms() + 10000;
	while ((status = proc_http_get(NULL, port, "/readyz")) != 200) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p), "/readyz answers %d; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(50);
	}
	/* The worker created its poison queue at start; take it away. */
	ECW_ASSERT_OK(ecw_queue_delete_queue(t->client, r->fx.poison));
	put(r, text, id);
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", "message_id", id, NULL);
	ITEST_CHECK(strcmp(proc_field(line, "outcome"), "poisoned") != 0,
	            "outcome \"poisoned\" although the poison queue does not exist");
	proc_log_dispose(&log);
	assert_int_equal(queue_count(r, t->queue), 1);

	/* Once the poison queue is back, the next delivery poisons it. */
	ECW_ASSERT_OK(ecw_queue_create(NULL, t->client, r->fx.poison));
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "poisoned");
	struct json_object **env = poison_envelopes(r, 1, 5000);
	ITEST_CHECK(envelope_for(env, text, strlen(text)) == env[0], "original differs");
	assert_int_equal(env_int(env[0], "dequeue_count"), 2);
	envelopes_free(env);
	assert_int_equal(queue_count(r, t->queue), 0);
	finish(&p);
}

/* An envelope that would pass the 64 KiB limit: the original goes to the
 * poison queue unchanged (replay accepts both). */
static void test_runtime__oversized_envelope_falls_back_to_original(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
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
	put_len(r, text, len, id);
	start_worker(&p, r, "runtime-bigpoison", &o);

	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id);
	assert_int_equal(proc_count(&p, "message", "message_id", id, "outcome", "poisoned", NULL), 1);
	size_t got = 0;
	struct ecw_queue_msg *m = receive_n(&got, r, r->fx.poison, 1, 30, 5000);
	assert_int_equal(got, 1);
	ITEST_CHECK(m[0].text_len == len && memcmp(m[0].text, text, len) == 0,
	            "the poison queue holds %zu bytes, not the %zu-byte original", m[0].text_len, len);
	ecw_queue_msgs_free(m, got);
	assert_int_equal(queue_count(r, t->queue), 0);
	free(text);
	finish(&p);
}

/* ---- 12. shutdown ------------------------------------------------------------------------------- */

static void wait_all_received(struct rt *r, struct proc *p)
{
	int64_t end = itest_now_ms() + 10000;

	while (peek_count(r, r->fx.t->queue) != 0) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(p),
		            "the worker did not receive the messages; log:\n%s", proc_tail(p->log_path, 20));
		itest_sleep_ms(20);
	}
}

/* SIGTERM waits for a job that finishes within the grace period, which then
 * settles its message as usual, and exits as soon as it did. */
static void test_runtime__sigterm_lets_short_jobs_finish(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	char jobs[256], id[64];
	struct proc p;
	struct ecw_entity *done = NULL;

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  slow: {type: test-sleep, duration: 2s, table: %s}\n", t->table);
	o.jobs = jobs;
	o.shutdown_grace = "20s";
	put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"finish-me\"}", id);
	start_worker(&p, r, "runtime-drain", &o);
	wait_all_received(r, &p);

	int64_t t0 = itest_now_ms();
	proc_signal(&p, SIGTERM);
	ITEST_CHECK(proc_wait(&p, 8000), "still running 8 s after SIGTERM; log:\n%s",
	            proc_tail(p.log_path, 20));
	int64_t took = itest_now_ms() - t0;
	ITEST_CHECK(proc_exit_code(&p) == 0, "exit status %d; log:\n%s", proc_exit_code(&p),
	            proc_tail(p.log_path, 20));
	ITEST_CHECK(took < 5000, "exited %lld ms after SIGTERM: a 2 s job should not wait out a 20 s grace",
	            (long long)took);
	assert_int_equal(proc_count(&p, "message", "message_id", id, "outcome", "succeeded", NULL), 1);
	ECW_ASSERT_OK(ecw_table_get(&done, t->client, t->table, "finish-me", "done"));
	ecw_entity_free(done);
	assert_int_equal(queue_count(r, t->queue), 0);
	proc_assert_logs_clean();
}

/* What waits in the prefetch has not started: SIGTERM gives it back at once
 * (visible again, a `released` line each) for another replica, while the
 * job already running finishes within the grace. */
static void test_runtime__sigterm_releases_prefetched_at_once(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	char jobs[256];
	struct proc p;

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  slow: {type: test-sleep, duration: 3s, table: %s}\n", t->table);
	o.jobs = jobs;
	o.concurrency = 1;
	o.shutdown_grace = "20s";
	o.worker_extra = "  prefetch: 4\n";
	for (int i = 0; i < 5; i++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"r-%d\"}", i);
		put(r, text, NULL);
	}
	start_worker(&p, r, "runtime-drain-prefetch", &o);
	wait_all_received(r, &p); /* 1 running, 4 waiting */

	int64_t t0 = itest_now_ms();
	proc_signal(&p, SIGTERM);
	while (peek_count(r, t->queue) < 4) {
		ITEST_CHECK(itest_now_ms() - t0 < 2000, "the 4 waiting messages were not visible again within 2 s "
		            "of SIGTERM (the running job takes 3 s); log:\n%s", proc_tail(p.log_path, 20));
		itest_sleep_ms(20);
	}
	ITEST_CHECK(proc_wait(&p, 8000), "still running 8 s after SIGTERM; log:\n%s", proc_tail(p.log_path, 20));
	ITEST_CHECK(proc_exit_code(&p) == 0, "exit status %d; log:\n%s", proc_exit_code(&p),
	            proc_tail(p.log_path, 20));
	assert_int_equal(proc_count(&p, "message", "outcome", "released", NULL), 4);
	assert_int_equal(proc_count(&p, "message", "outcome", "succeeded", NULL), 1);
	assert_int_equal(queue_count(r, t->queue), 4);
	proc_assert_logs_clean();
}

/* A second signal cuts the grace period short: status 130 at once. */
static void test_runtime__second_signal_exits_130(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;

	itest_queue(t);
	o.jobs = "  slow: {type: test-sleep, duration: 60s}\n";
	o.concurrency = 2;
	o.shutdown_grace = "30s";
	put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"a\"}", NULL);
	put(r, "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"b\"}", NULL);
	start_worker(&p, r, "runtime-sigint2", &o);
	wait_all_received(r, &p);

	proc_signal(&p, SIGTERM);
	itest_sleep_ms(300);
	ITEST_CHECK(proc_alive(&p), "exited on the first signal with jobs running and a 30 s grace");
	proc_signal(&p, SIGINT);
	ITEST_CHECK(proc_wait(&p, 3000), "still running 3 s after the second signal; log:\n%s",
	            proc_tail(p.log_path, 20));
	ITEST_CHECK(proc_exit_code(&p) == 130, "exit status %d after a second signal, expected 130; log:\n%s",
	            proc_exit_code(&p), proc_tail(p.log_path, 20));
	assert_int_equal(proc_count(&p, "stopping_now", NULL), 1);
	proc_assert_logs_clean();
}

/* ---- 13. concurrency -------------------------------------------------------------------------- */

/* The worker holds at most `concurrency` messages running plus `prefetch`
 * waiting for a job thread: the rest stay visible for other replicas. Both
 * are checked against the queue itself, with 4 jobs that take 3 s. */
static void concurrency_case(struct rt *r, int prefetch, size_t want_visible)
{
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	char *page = NULL, extra[64];
	int found;

	itest_queue(t);
	o.jobs = "  slow: {type: test-sleep, duration: 3s}\n";
	o.concurrency = 4;
	o.batch_size = 16;
	snprintf(extra, sizeof(extra), "  prefetch: %d\n", prefetch);
	o.worker_extra = extra;
	for (int i = 0; i < 10; i++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"c-%d\"}", i);
		put(r, text, NULL);
	}
	int port = start_worker(&p, r, "runtime-concurrency", &o);
	int64_t end = itest_now_ms() + 10000;
	while (peek_count(r, t->queue) == 10) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p), "nothing received; log:\n%s",
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(20);
	}
	itest_sleep_ms(1000); /* the jobs take 3 s: nothing finished yet */
	size_t visible = peek_count(r, t->queue);
	ITEST_CHECK(visible == want_visible, "%zu of 10 messages visible with 4 jobs running and prefetch %d, expected %zu",
	            visible, prefetch, want_visible);
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	double inflight = proc_metric(page, "ecw_jobs_in_flight", &found, NULL);
	ITEST_CHECK(found == 1 && inflight == (double)(10 - want_visible), "ecw_jobs_in_flight %g, expected %zu",
	            inflight, 10 - want_visible);
	free(page);
	finish(&p);
}

static void test_runtime__concurrency_limits_messages_held(void **state)
{
	concurrency_case(*state, 0, 6);
}

static void test_runtime__prefetch_holds_more_waiting(void **state)
{
	concurrency_case(*state, 3, 3);
}

/* ---- 14. start-up failures ------------------------------------------------------------------------ */

static void test_runtime__startup_failures_exit_1(void **state)
{
	struct rt *r = *state;
	struct wopts o = WOPTS_DEFAULT;
	char path[640], envcs[1024];
	struct proc p;
	const char *args[] = {"run", "-c", path, NULL};

	/* A wrong key: the service refuses, the worker says so and exits 1,
	 * and the key it was given never reaches its log. */
	static const char wrong_key[] =
	    "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ==";
	char *cs = itest_connstr_with(wrong_key, 0);
	snprintf(envcs, sizeof(envcs), "ECW_TEST_CONNECTION_STRING=%s", cs);
	free(cs);
	proc_add_secret(wrong_key);
	write_config(path, sizeof(path), r, "runtime-badkey", &o);
	const char *env1[] = {envcs, NULL};
	proc_start(&p, "runtime-badkey", args, env1);
	ITEST_CHECK(proc_wait(&p, 20000), "still running 20 s with a wrong key; log:\n%s",
	            proc_tail(p.log_path, 20));
	ITEST_CHECK(proc_exit_code(&p) == 1, "exit status %d with a wrong key, expected 1; log:\n%s",
	            proc_exit_code(&p), proc_tail(p.log_path, 20));
	assert_int_equal(proc_count(&p, "start_failed", NULL), 1);

	/* The metrics address is taken. */
	int port = write_config(path, sizeof(path), r, "runtime-portbusy", &o);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	proc_start(&p, "runtime-portbusy", args, NULL);
	bool exited = proc_wait(&p, 20000);
	close(fd);
	ITEST_CHECK(exited, "still running 20 s with its metrics port taken; log:\n%s",
	            proc_tail(p.log_path, 20));
	ITEST_CHECK(proc_exit_code(&p) == 1,
	            "exit status %d with the metrics port taken, expected 1; log:\n%s", proc_exit_code(&p),
	            proc_tail(p.log_path, 20));
	assert_int_equal(proc_count(&p, "start_failed", NULL), 1);

	/* A configuration error is a usage error. */
	proc_write_file(path, sizeof(path), "runtime-badcfg.yaml", "worker:\n  concurrency: lots\n");
	proc_start(&p, "runtime-badcfg", args, NULL);
	ITEST_CHECK(proc_wait(&p, 10000), "still running with a bad config");
	ITEST_CHECK(proc_exit_code(&p) == 2, "exit status %d with a bad config, expected 2; log:\n%s",
	            proc_exit_code(&p), proc_tail(p.log_path, 20));
	proc_assert_logs_clean();
}

/* Storage that is away at start-up (a restart, a network blip) is waited
 * out: the worker says so (start_retry), is alive but not ready, and starts
 * working once storage answers. Storage here is a pair of free ports with
 * nothing behind them, then faultproxy passing them to Azurite. A signal
 * during the wait ends it with a clean exit. */
static void test_runtime__startup_waits_for_storage(void **state)
{
	struct rt *r = *state;
	struct wopts o = WOPTS_DEFAULT;
	char path[640], envcs[1024], key[128], map_q[64], map_t[64];
	struct proc p, quitter, proxy;
	const char *args[] = {"run", "-c", path, NULL};
	int qport = proc_free_port(), tport = proc_free_port();
	const char *cs = itest_connstr(), *k = strstr(cs, "AccountKey="), *azq = getenv("ECW_TEST_QUEUE_PORT"),
	           *azt = getenv("ECW_TEST_TABLE_PORT");

	ITEST_CHECK(k && azq && azt, "needs the test connection string with a key, and the Azurite ports");
	k += strlen("AccountKey=");
	snprintf(key, sizeof(key), "%.*s", (int)strcspn(k, ";"), k);
	snprintf(envcs, sizeof(envcs),
	         "ECW_TEST_CONNECTION_STRING=DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
	         "AccountKey=%s;QueueEndpoint=http://127.0.0.1:%d/devstoreaccount1;"
	         "TableEndpoint=http://127.0.0.1:%d/devstoreaccount1;",
	         key, qport, tport);
	const char *env[] = {envcs, NULL};

	/* Stopped while it waits: exit 0, nothing processed. */
	write_config(path, sizeof(path), r, "runtime-startwait-quit", &o);
	proc_start(&quitter, "runtime-startwait-quit", args, env);
	PROC_EXPECT_LOG(&quitter, 1, 30000, "start_retry");
	proc_stop(&quitter, 10000);
	assert_int_equal(proc_count(&quitter, "start_failed", NULL), 0);

	int port = write_config(path, sizeof(path), r, "runtime-startwait", &o);
	proc_start(&p, "runtime-startwait", args, env);
	PROC_EXPECT_LOG(&p, 2, 30000, "start_retry");
	ITEST_CHECK(proc_alive(&p), "the worker exited while storage was away; log:\n%s", proc_tail(p.log_path, 20));
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 200);
	assert_int_equal(proc_http_get(NULL, port, "/readyz"), 503);

	/* Storage comes back. */
	snprintf(map_q, sizeof(map_q), "%d:127.0.0.1:%s", qport, azq);
	snprintf(map_t, sizeof(map_t), "%d:127.0.0.1:%s", tport, azt);
	const char *pargs[] = {"--map", map_q, "--map", map_t, NULL};
	proc_start_program(&proxy, "runtime-startwait-proxy", proc_tool_bin("faultproxy"), pargs, NULL);
	int status = 0;
	for (int64_t end = itest_now_ms() + 40000; (status = proc_http_get(NULL, port, "/readyz")) != 200;) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p),
		            "/readyz answers %d 40 s after storage came back; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(100);
	}
	char id[64];
	put(r, "{\"job\":\"noop\",\"pk\":\"p\",\"rk\":\"after-wait\"}", id);
	PROC_EXPECT_LOG(&p, 1, 10000, "message", "message_id", id, "outcome", "succeeded");
	assert_int_equal(proc_count(&p, "start_failed", NULL), 0);
	proc_stop(&p, 10000);
	proc_stop(&proxy, 10000);
	proc_assert_logs_clean();
}

/* Jobs that straddle lease renewals (visibility 2 s, renewed every second,
 * jobs of 0.5..2.5 s) on two workers: every message still runs once and is
 * settled once. */
static void test_runtime__exactly_once_across_renewals(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p[2];
	char jobs[256];
	enum { N = 160 };

	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  slow: {type: test-sleep, table: %s}\n", t->table);
	o.jobs = jobs;
	o.visibility_s = 2;
	o.concurrency = 32;
	for (int i = 0; i < N; i++) {
		char text[160];
		snprintf(text, sizeof(text),
		         "{\"job\":\"slow\",\"pk\":\"p\",\"rk\":\"s%03d\",\"sleep_ms\":%d}", i,
		         500 + (i * 137) % 2000);
		put(r, text, NULL);
	}
	start_worker(&p[0], r, "runtime-renewals-w1", &o);
	start_worker(&p[1], r, "runtime-renewals-w2", &o);
	int64_t end = itest_now_ms() + 40000;
	size_t done = 0;
	while (done < N && itest_now_ms() < end) {
		itest_sleep_ms(250);
		done = proc_count(&p[0], "message", NULL) + proc_count(&p[1], "message", NULL);
	}
	/* A message that reappeared would run again: wait one lease longer. */
	itest_sleep_ms(2500);
	size_t ok = 0, lines = 0, renewals = 0;
	for (int w = 0; w < 2; w++) {
		ok += proc_count(&p[w], "message", "outcome", "succeeded", NULL);
		lines += proc_count(&p[w], "message", NULL);
		renewals += proc_count(&p[w], "lease_renewed", NULL);
	}
	ITEST_CHECK(ok == N && lines == N,
	            "%zu message lines, %zu succeeded; expected %d of each (logs %s, %s)", lines, ok, N,
	            p[0].log_path, p[1].log_path);
	ITEST_CHECK(renewals >= N / 2, "only %zu lease renewals", renewals);
	for (int i = 0; i < N; i++) {
		char rk[16];
		snprintf(rk, sizeof(rk), "s%03d", i);
		ITEST_CHECK(rows_with_pk(r, t->table, rk, NULL, 0) == 1, "message %s has no done row", rk);
	}
	assert_int_equal(queue_count(r, t->queue), 0);
	assert_int_equal(queue_count(r, r->fx.poison), 0);
	proc_stop(&p[0], 10000);
	proc_stop(&p[1], 10000);
	proc_assert_logs_clean();
}

/* ---- 10. metrics, liveness and readiness ---------------------------------------------------------- */

static void test_runtime__metrics_endpoint(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	char *page = NULL;
	int status = 0, found;

	itest_queue(t);
	o.jobs = "  noop: {type: test-noop}\n  broken: {type: test-fail}\n";
	int port = start_worker(&p, r, "runtime-metrics", &o);

	int64_t end = itest_now_ms() + 10000;
	while ((status = proc_http_get(NULL, port, "/readyz")) != 200) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p), "/readyz answers %d; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(100);
	}
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 200);

	for (int i = 0; i < 5; i++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"job\":\"noop\",\"pk\":\"p\",\"rk\":\"ok-%d\"}", i);
		put(r, text, NULL);
	}
	put(r, "{\"job\":\"broken\",\"pk\":\"p\",\"rk\":\"bad\"}", NULL);
	PROC_EXPECT_LOG(&p, 6, 15000, "message", NULL);

	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	double v =
	    proc_metric(page, "ecw_messages_total", &found, "job=\"noop\"", "outcome=\"succeeded\"", NULL);
	ITEST_CHECK(found == 1 && v == 5,
	            "ecw_messages_total{job=\"noop\",outcome=\"succeeded\"} = %g (%d samples), "
	            "expected 5; page:\n%s",
	            v, found, page);
	v = proc_metric(page, "ecw_messages_total", &found, "job=\"broken\"", "outcome=\"poisoned\"", NULL);
	ITEST_CHECK(found == 1 && v == 1,
	            "ecw_messages_total{job=\"broken\",outcome=\"poisoned\"} = %g (%d samples), "
	            "expected 1; page:\n%s",
	            v, found, page);
	ITEST_CHECK(
	    strstr(page, "ecw_messages_total{job=\"noop\",outcome=\"succeeded\"} 5") != NULL,
	    "the page lacks the exact sample ecw_messages_total{job=\"noop\",outcome=\"succeeded\"} 5:\n%s",
	    page);
	v = proc_metric(page, "ecw_jobs_in_flight", &found, NULL);
	ITEST_CHECK(found == 1 && v == 0, "ecw_jobs_in_flight = %g (%d samples), expected 0", v, found);
	v = proc_metric(page, "ecw_messages_received_total", &found, NULL);
	ITEST_CHECK(found == 1 && v == 6, "ecw_messages_received_total = %g, expected 6", v);
	v = proc_metric(page, "ecw_messages_poisoned_total", &found, "reason=\"permanent\"", NULL);
	ITEST_CHECK(found == 1 && v == 1,
	            "ecw_messages_poisoned_total{reason=\"permanent\"} = %g, expected 1", v);
	v = proc_metric(page, "ecw_job_duration_seconds_count", &found, "job=\"noop\"", NULL);
	ITEST_CHECK(found == 1 && v == 5, "ecw_job_duration_seconds_count{job=\"noop\"} = %g, expected 5", v);
	v = proc_metric(page, "ecw_storage_requests_total", &found, NULL);
	ITEST_CHECK(found >= 1 && v >= 12,
	            "ecw_storage_requests_total sums to %g over %d samples; expected at least "
	            "the 6 deletes, the poison put and the receives",
	            v, found);
	free(page);
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 200);
	assert_int_equal(proc_http_get(NULL, port, "/readyz"), 200);
	finish(&p);
}

/* An idle worker still receives (empty answers): the gauge says when it
 * last did, "empty or not" as its help text says, so an alert on it tells a
 * stuck worker from an idle one. */
static void test_runtime__metrics_last_receive_on_idle_worker(void **state)
{
	struct rt *r = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	char *page = NULL;
	int status = 0, found;

	itest_queue(r->fx.t);
	int port = start_worker(&p, r, "runtime-idle", &o);
	int64_t end = itest_now_ms() + 10000;
	while ((status = proc_http_get(NULL, port, "/readyz")) != 200) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p), "/readyz answers %d; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(100);
	}
	itest_sleep_ms(1000);
	assert_int_equal(proc_http_get(&page, port, "/metrics"), 200);
	double last = proc_metric(page, "ecw_last_receive_timestamp_seconds", &found, NULL);
	long long now = (long long)time(NULL);
	free(page);
	ITEST_CHECK(
	    found == 1 && last >= (double)(now - 5) && last <= (double)(now + 5),
	    "ecw_last_receive_timestamp_seconds %.0f on an idle worker polling every 200 ms; now is %lld",
	    last, now);
	finish(&p);
}

/* /readyz answers 503 while the worker cannot receive (its queue is missing
 * and create_missing is off), and 200 again once it can; /healthz stays 200:
 * the process is alive. */
static void test_runtime__readyz_follows_storage(void **state)
{
	struct rt *r = *state;
	struct wopts o = WOPTS_DEFAULT;
	struct proc p;
	int status = 0;

	o.worker_extra = "  create_missing: false\n";
	int port = start_worker(&p, r, "runtime-readyz", &o);
	int64_t end = itest_now_ms() + 10000;
	while ((status = proc_http_get(NULL, port, "/readyz")) != 503) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p),
		            "/readyz answers %d without a queue; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(50);
	}
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 200);
	itest_queue(r->fx.t);
	end = itest_now_ms() + 10000;
	while ((status = proc_http_get(NULL, port, "/readyz")) != 200) {
		ITEST_CHECK(itest_now_ms() < end && proc_alive(&p),
		            "/readyz answers %d with the queue back; log:\n%s", status,
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(50);
	}
	assert_int_equal(proc_http_get(NULL, port, "/healthz"), 200);
	char id[64];
	put(r, "{\"job\":\"noop\",\"pk\":\"p\",\"rk\":\"after\"}", id);
	PROC_EXPECT_LOG(&p, 1, 10000, "message", "message_id", id, "outcome", "succeeded");
	finish(&p);
}

/* ---- 15. SAS credentials -------------------------------------------------------------------------- */

#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

/* An account SAS for devstoreaccount1 (see test_sas.c): "sv=...&sig=..."
 * (heap), and its signature as signed and as percent-encoded in the token. */
static char *account_sas(bool break_signature, char *sig_out, size_t sig_cap, char *pct_out, size_t pct_cap)
{
	const char *perms = "rwdlacup";
	struct ecw_buf key, sts, sig, pct, token;

	ecw_buf_init(&key, 0);
	ecw_buf_init(&sts, 0);
	ecw_buf_init(&sig, 0);
	ecw_buf_init(&pct, 0);
	ecw_buf_init(&token, 0);
	ECW_ASSERT_OK(ecw_base64_decode(&key, DEV_KEY, strlen(DEV_KEY)));
	ECW_ASSERT_OK(ecw_buf_printf(
	    &sts, "devstoreaccount1\n%s\nqt\nsco\n\n2099-01-01T00:00:00Z\n\nhttps,http\n2019-02-02\n",
	    perms));
	ECW_ASSERT_OK(ecw_auth_hmac_sha256_base64(&sig, (unsigned char *)key.ptr, key.len, sts.ptr, sts.len));
	if (break_signature)
		sig.ptr[0] = sig.ptr[0] == 'A' ? 'B' : 'A';
	ECW_ASSERT_OK(ecw_escape_pct(&pct, sig.ptr, sig.len));
	ECW_ASSERT_OK(ecw_buf_printf(&token,
	                             "sv=2019-02-02&ss=qt&srt=sco&sp=%s&se=2099-01-01T00%%3A00%%3A00Z"
	                             "&spr=https,http&sig=%s",
	                             perms, ecw_buf_cstr(&pct)));
	snprintf(sig_out, sig_cap, "%s", ecw_buf_cstr(&sig));
	snprintf(pct_out, pct_cap, "%s", ecw_buf_cstr(&pct));
	ecw_buf_dispose(&key);
	ecw_buf_dispose(&sts);
	ecw_buf_dispose(&sig);
	ecw_buf_dispose(&pct);
	return ecw_buf_take(&token);
}

/* Runs the worker on a SAS-only connection string: with a good SAS it
 * works, with a bad one it exits 1, and the signature is in no log. */
static void test_runtime__sas_signature_stays_out_of_logs(void **state)
{
	struct rt *r = *state;
	struct itest *t = r->fx.t;
	struct wopts o = WOPTS_DEFAULT;
	const char *qp = getenv("ECW_TEST_QUEUE_PORT"), *tp = getenv("ECW_TEST_TABLE_PORT");
	char path[640], envcs[2048], sig[128], pct[256], jobs[256], id[64];
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {envcs, NULL};
	struct proc p;

	ITEST_CHECK(qp && tp, "ECW_TEST_QUEUE_PORT / ECW_TEST_TABLE_PORT are not set");
	itest_queue(t);
	snprintf(jobs, sizeof(jobs), "  count: {type: test-count, table: %s}\n", t->table);
	o.jobs = jobs;
	for (int bad = 0; bad < 2; bad++) {
		char *sas = account_sas(bad, sig, sizeof(sig), pct, sizeof(pct));
		snprintf(envcs, sizeof(envcs),
		         "ECW_TEST_CONNECTION_STRING=QueueEndpoint=http://127.0.0.1:%s/devstoreaccount1;"
		         "TableEndpoint=http://127.0.0.1:%s/devstoreaccount1;SharedAccessSignature=%s",
		         qp, tp, sas);
		free(sas);
		proc_add_secret(sig);
		proc_add_secret(pct);
		write_config(path, sizeof(path), r, bad ? "runtime-sas-bad" : "runtime-sas", &o);
		proc_start(&p, bad ? "runtime-sas-bad" : "runtime-sas", args, env);
		if (bad) {
			ITEST_CHECK(proc_wait(&p, 20000), "still running 20 s with a bad SAS; log:\n%s",
			            proc_tail(p.log_path, 20));
			ITEST_CHECK(proc_exit_code(&p) == 1,
			            "exit status %d with a bad SAS, expected 1; log:\n%s", proc_exit_code(&p),
			            proc_tail(p.log_path, 20));
			assert_int_equal(proc_count(&p, "start", "auth", "sas", NULL), 1);
		} else {
			put(r, "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"via-sas\"}", id);
			PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id, "outcome", "succeeded");
			assert_int_equal(rows_with_pk(r, t->table, "via-sas", NULL, 0), 1);
			proc_stop(&p, 10000);
		}
	}
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_runtime__transient_twice_then_success, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__permanent_failure_poisoned_at_once, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__max_dequeue_poisoned_without_running, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__base64_and_plain, rt_setup, rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__garbage_poisoned_worker_keeps_running, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__long_job_keeps_lease, rt_setup, rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__lost_lease_stops_writes, rt_setup, rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__sigterm_releases_inflight, rt_setup, rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__exactly_once_one_worker, rt_setup, rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__exactly_once_three_workers, rt_setup, rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__exactly_once_across_renewals, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__metrics_endpoint, rt_setup, rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__metrics_last_receive_on_idle_worker, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__readyz_follows_storage, rt_setup, rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__sas_signature_stays_out_of_logs, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__transient_until_max_dequeue_poisoned, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__poison_put_failure_keeps_original, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__oversized_envelope_falls_back_to_original, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__sigterm_lets_short_jobs_finish, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__sigterm_releases_prefetched_at_once, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__second_signal_exits_130, rt_setup, rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__concurrency_limits_messages_held, rt_setup,
	                                    rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__prefetch_holds_more_waiting, rt_setup, rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__startup_failures_exit_1, rt_setup, rt_teardown),
	    cmocka_unit_test_setup_teardown(test_runtime__startup_waits_for_storage, rt_setup, rt_teardown),
	};
	/* ECW_TEST_FILTER=test_runtime__sig* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("runtime", tests, NULL, NULL);
}
