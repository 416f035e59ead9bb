/* SPDX-License-Identifier: MIT */
/* test_credentials.c - how the worker process guards its secrets (issue 20,
 * item 9): it starts with the connection string read from the file
 * AZURE_STORAGE_CONNECTION_STRING_FILE names (as Kubernetes mounts a
 * Secret); it refuses at start, naming the endpoint, to send a key's
 * signature over http to a host that is not loopback; and it leaves no core
 * file when it dies (the key is in its memory). And (issue 33, item 5) a
 * SAS rewritten in that file serves the running worker: no restart, no
 * message failed, poisoned or lost, no signature in its output. */
#include "ecw_codec.h"
#include "itest.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int cred_teardown(void **state)
{
	proc_cleanup();
	return itest_teardown(state);
}

/* A configuration for the fixture's queue with one job, greet; storage is the given lines (may be ""). */
static void config(char *path, size_t cap, struct itest *t, const char *name, const char *storage)
{
	char text[2048], file[128];
	int k = snprintf(text, sizeof(text),
	                 "%s"
	                 "worker:\n"
	                 "  queue: %s\n"
	                 "  poll_interval: {min: 50ms, max: 200ms}\n"
	                 "metrics:\n"
	                 "  listen: \"\"\n"
	                 "jobs:\n"
	                 "  greet: {type: test-noop}\n",
	                 storage, itest_queue(t));
	assert_true(k > 0 && (size_t)k < sizeof(text));
	snprintf(file, sizeof(file), "%s.yaml", name);
	proc_write_file(path, cap, file, text);
}

#define JOB "{\"job\":\"greet\",\"pk\":\"p\",\"rk\":\"r\"}"

/* The default configuration's connection string comes from the file: the worker starts and runs a job. */
static void test_credentials__connection_string_from_file(void **state)
{
	struct itest *t = *state;
	char cfg[640], secret[640], content[1024], env_file[700];
	struct ecw_queue_msg put;
	struct proc p;

	snprintf(content, sizeof(content), "%s\n", itest_connstr());
	proc_write_file(secret, sizeof(secret), "credentials-connstr.txt", content);
	config(cfg, sizeof(cfg), t, "credentials-file", "");
	snprintf(env_file, sizeof(env_file), "AZURE_STORAGE_CONNECTION_STRING_FILE=%s", secret);
	const char *env[] = {env_file,
	                     "AZURE_STORAGE_CONNECTION_STRING=", "ECW_TEST_CONNECTION_STRING=", NULL};
	const char *args[] = {"run", "-c", cfg, NULL};

	ECW_ASSERT_OK(ecw_queue_create(NULL, t->client, t->queue));
	ECW_ASSERT_OK(ecw_queue_put(&put, t->client, t->queue, JOB, strlen(JOB), NULL));
	proc_start(&p, "credentials-file", args, env);
	PROC_EXPECT_LOG(&p, 1, 15000, "start", "auth", "shared-key");
	PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", put.id, "outcome", "succeeded");
	proc_stop(&p, 15000);
	proc_assert_logs_clean();
}

/* check-config and run both refuse an AccountKey over http to a host that is not loopback, naming it. */
static void test_credentials__http_endpoint_refused_at_start(void **state)
{
	struct itest *t = *state;
	char cfg[640], *out = NULL, *err = NULL;
	const char *storage =
	    "storage:\n"
	    "  connection_string: \"AccountName=acct;AccountKey=U2VjcmV0S2V5U2VjcmV0S2V5;"
	    "QueueEndpoint=http://192.0.2.1:10001/acct;TableEndpoint=https://192.0.2.1/acct\"\n";

	config(cfg, sizeof(cfg), t, "credentials-http", storage);
	const char *check[] = {"check-config", "-c", cfg, NULL}, *run[] = {"run", "-c", cfg, NULL};
	const char *const *argv[] = {check, run};
	for (size_t i = 0; i < 2; i++) {
		int code = proc_run(&out, &err, argv[i][0], argv[i], NULL, 20000);
		ITEST_CHECK(code == 2, "%s exited %d\n%s%s", argv[i][0], code, out, err);
		ITEST_CHECK(strstr(err, "QueueEndpoint http://192.0.2.1:10001/acct is http://") &&
		                strstr(err, "loopback host") && !strstr(err, "U2VjcmV0S2V5"),
		            "%s says:\n%s", argv[i][0], err);
		free(out);
		free(err);
	}
	proc_assert_logs_clean();
}

static long core_limit_of(pid_t pid)
{
	char path[64], line[256];
	long soft = -2;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/limits", (long)pid);
	assert_non_null(f = fopen(path, "r"));
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Max core file size", 18) == 0)
			soft = strncmp(line + 26, "unlimited", 9) == 0 ? -1 : strtol(line + 26, NULL, 10);
	fclose(f);
	return soft;
}

/* Even when started with core dumps allowed, the worker allows none: SIGABRT leaves no core. */
static void test_credentials__no_core_dump(void **state)
{
	struct itest *t = *state;
	struct rlimit was, allowed;
	char cfg[640];
	struct proc p;

	config(cfg, sizeof(cfg), t, "credentials-core",
	       "storage:\n  connection_string: ${ECW_TEST_CONNECTION_STRING}\n");
	assert_int_equal(getrlimit(RLIMIT_CORE, &was), 0);
	allowed = was;
	allowed.rlim_cur = allowed.rlim_max; /* as far as this process may */
	if (allowed.rlim_cur == 0 && geteuid() == 0)
		allowed.rlim_cur = allowed.rlim_max = RLIM_INFINITY;
	assert_int_equal(setrlimit(RLIMIT_CORE, &allowed), 0);
	proc_start_worker(&p, "credentials-core", cfg);
	assert_int_equal(setrlimit(RLIMIT_CORE, &was), 0);
	PROC_EXPECT_LOG(&p, 1, 15000, "start");
	assert_int_equal(core_limit_of(p.pid), 0);
	proc_signal(&p, SIGABRT);
	assert_true(proc_wait(&p, 10000));
	assert_true(WIFSIGNALED(p.status) && WTERMSIG(p.status) == SIGABRT);
	ITEST_CHECK(!WCOREDUMP(p.status), "the worker dumped core (limit raised to %ld)",
	            (long)allowed.rlim_cur);
	proc_assert_logs_clean();
}

/* ---- a SAS rotated in its file (issue 33) ---------------------------------- */

#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

/* A SAS-only connection string for the test's Azurite: an account SAS
 * (version 2019-02-02, queue and table, every permission) that expires at
 * the Unix time expiry. Its signature, as signed (base64) and as sent
 * (percent-encoded), goes to proc_add_secret: the worker must never print
 * either. */
static void sas_connstr(char *out, size_t cap, time_t expiry)
{
	const char *qp = getenv("ECW_TEST_QUEUE_PORT"), *tp = getenv("ECW_TEST_TABLE_PORT");
	struct ecw_buf key, sts, sig, enc;
	char se[32];
	struct tm tm;

	assert_non_null(qp);
	assert_non_null(tp);
	gmtime_r(&expiry, &tm);
	strftime(se, sizeof(se), "%Y-%m-%dT%H:%M:%SZ", &tm);
	ecw_buf_init(&key, 0);
	ecw_buf_init(&sts, 0);
	ecw_buf_init(&sig, 0);
	ecw_buf_init(&enc, 0);
	assert_int_equal(ecw_base64_decode(&key, DEV_KEY, strlen(DEV_KEY)), 0);
	/* account, permissions, services, resource types, start, expiry, IP,
	 * protocol, version, each followed by a newline. */
	assert_int_equal(
	    ecw_buf_printf(&sts, "devstoreaccount1\nrwdlacup\nqt\nsco\n\n%s\n\nhttps,http\n2019-02-02\n", se),
	    0);
	assert_int_equal(
	    ecw_auth_hmac_sha256_base64(&sig, (unsigned char *)key.ptr, key.len, sts.ptr, sts.len), 0);
	assert_int_equal(ecw_escape_pct(&enc, sig.ptr, sig.len), 0);
	proc_add_secret(sig.ptr);
	proc_add_secret(enc.ptr);
	se[13] = se[16] = '\0'; /* "YYYY-MM-DDTHH", "MM", "SSZ": ':' as %3A */
	int k = snprintf(out, cap,
	                 "QueueEndpoint=http://127.0.0.1:%s/devstoreaccount1;"
	                 "TableEndpoint=http://127.0.0.1:%s/devstoreaccount1;"
	                 "SharedAccessSignature=sv=2019-02-02&ss=qt&srt=sco&sp=rwdlacup&se=%s%%3A%s%%3A%s"
	                 "&spr=https,http&sig=%s\n",
	                 qp, tp, se, se + 14, se + 17, enc.ptr);
	assert_true(k > 0 && (size_t)k < cap);
	ecw_buf_dispose(&key);
	ecw_buf_dispose(&sts);
	ecw_buf_dispose(&sig);
	ecw_buf_dispose(&enc);
}

/* Rewrites the secret file in one step, as the kubelet swaps a mounted
 * Secret's files: the worker reads the old content or the new, never half. */
static void rotate(const char *path, time_t expiry)
{
	char cs[1024], next[640];

	sas_connstr(cs, sizeof(cs), expiry);
	proc_write_file(next, sizeof(next), "credentials-rotate.next.txt", cs);
	assert_int_equal(rename(next, path), 0);
}

static void put_job(struct itest *t, const char *rk, long long sleep_ms)
{
	char text[160];

	snprintf(text, sizeof(text), "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"%s\",\"sleep_ms\":%lld}", rk,
	         sleep_ms);
	ECW_ASSERT_OK(ecw_queue_put(NULL, t->client, t->queue, text, strlen(text), NULL));
}

static int64_t unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The SAS in AZURE_STORAGE_CONNECTION_STRING_FILE expires while the worker
 * runs, twice. First the file is rewritten before the expiry (as a
 * rotation should be): the refused requests go again with the new SAS at
 * once, and nothing fails, not even a job whose table write comes after
 * the expiry. Then it expires before the file is rewritten: the worker
 * reads the file, finds the same SAS (one line), gets on with the refusals
 * (no reading for 10 s), and once the file holds a fresh SAS it takes it at
 * the next reading: the messages put meanwhile are done then. Every
 * message's work is in the table, done on its first delivery; nothing is
 * poisoned; no signature is in the log. */
static void test_credentials__sas_rotated_in_file(void **state)
{
	struct itest *t = *state;
	static const char *const phase1[] = {"a1", "a2", "a3", "a4"}, *const phase2[] = {"b1", "b2", "b3"};
	char secret[640], cs[1024], cfg[640], text[1024], env_file[700];
	time_t exp1 = time(NULL) + 7, exp2 = exp1 + 4;
	struct proc p;
	long long left;

	sas_connstr(cs, sizeof(cs), exp1);
	proc_write_file(secret, sizeof(secret), "credentials-rotate.txt", cs);
	snprintf(text, sizeof(text),
	         "worker:\n"
	         "  queue: %s\n"
	         "  poison_queue: %s\n"
	         "  poll_interval: {min: 50ms, max: 200ms}\n"
	         "  max_dequeue_count: 3\n"
	         "metrics:\n"
	         "  listen: \"\"\n"
	         "log:\n"
	         "  level: debug\n"
	         "jobs:\n"
	         "  count: {type: test-count, table: %s}\n",
	         itest_queue(t), itest_poison(t), itest_table(t));
	proc_write_file(cfg, sizeof(cfg), "credentials-rotate.yaml", text);
	snprintf(env_file, sizeof(env_file), "AZURE_STORAGE_CONNECTION_STRING_FILE=%s", secret);
	const char *env[] = {env_file,
	                     "AZURE_STORAGE_CONNECTION_STRING=", "ECW_TEST_CONNECTION_STRING=", NULL};
	const char *args[] = {"run", "-c", cfg, NULL};
	ECW_ASSERT_OK(ecw_queue_create(NULL, t->client, t->poison));

	proc_start(&p, "credentials-rotate", args, env);
	PROC_EXPECT_LOG(&p, 1, 15000, "start", "auth", "sas");
	for (size_t i = 0; i < 3; i++)
		put_job(t, phase1[i], 0);
	PROC_EXPECT_LOG(&p, 3, 15000, "message", "outcome", "succeeded");
	/* Its table write comes 1.5 s after the SAS expired. */
	left = (long long)exp1 * 1000 - unix_ms();
	ITEST_CHECK(left > 1000, "the first SAS expires too soon (%lld ms left): the machine is slow", left);
	put_job(t, phase1[3], left + 1500);
	rotate(secret, exp2);
	PROC_EXPECT_LOG(&p, 4, 20000, "message", "outcome", "succeeded");
	ITEST_CHECK(
	    proc_count(&p, "credentials_reloaded", NULL) == 1 && proc_count(&p, "storage_error", NULL) == 0 &&
	        proc_count(&p, "credentials_unchanged", NULL) == 0,
	    "after the first expiry: %zu reloaded, %zu unchanged, %zu storage errors; log %s:\n%s",
	    proc_count(&p, "credentials_reloaded", NULL), proc_count(&p, "credentials_unchanged", NULL),
	    proc_count(&p, "storage_error", NULL), p.log_path, proc_tail(p.log_path, 30));

	/* The second SAS expires with no new one in the file. */
	PROC_EXPECT_LOG(&p, 1, 20000, "storage_error", "op", "queue.receive", "status", "403");
	PROC_EXPECT_LOG(&p, 1, 20000, "credentials_unchanged");
	for (size_t i = 0; i < 3; i++)
		put_job(t, phase2[i], 0);
	itest_sleep_ms(1000);
	ITEST_CHECK(proc_count(&p, "message", "outcome", "succeeded", NULL) == 4,
	            "a message was done with an expired SAS; log %s", p.log_path);
	rotate(secret, time(NULL) + 3600);
	PROC_EXPECT_LOG(&p, 7, 25000, "message", "outcome", "succeeded");
	ITEST_CHECK(proc_count(&p, "credentials_reloaded", NULL) == 2 &&
	                proc_count(&p, "credentials_unchanged", NULL) == 1,
	            "%zu reloaded, %zu unchanged (one reading per 10 s); log %s:\n%s",
	            proc_count(&p, "credentials_reloaded", NULL),
	            proc_count(&p, "credentials_unchanged", NULL), p.log_path, proc_tail(p.log_path, 30));
	proc_stop(&p, 15000);

	/* Each message's work, done on its first delivery; nothing poisoned. */
	const char *const *all[] = {phase1, phase2};
	size_t nall[] = {4, 3};
	for (size_t g = 0; g < 2; g++) {
		for (size_t i = 0; i < nall[g]; i++) {
			char filter[64];
			size_t n = 0;
			snprintf(filter, sizeof(filter), "PartitionKey eq '%s'", all[g][i]);
			struct ecw_entity **v = itest_query_all(&n, t->client, t->table, filter);
			ITEST_CHECK(n == 1, "%zu runs of %s", n, all[g][i]);
			const struct ecw_prop *dq = ecw_entity_get(v[0], "Dequeue");
			ITEST_CHECK(dq && dq->v.i64 == 1, "%s was done on delivery %lld", all[g][i],
			            dq ? (long long)dq->v.i64 : -1LL);
			itest_entities_free(v, n);
		}
	}
	long long count = -1;
	ECW_ASSERT_OK(ecw_queue_count(&count, t->client, t->poison));
	assert_int_equal(count, 0);
	ECW_ASSERT_OK(ecw_queue_count(&count, t->client, t->queue));
	assert_int_equal(count, 0);
	assert_int_equal(proc_count(&p, "message", "outcome", "poisoned", NULL), 0);
	assert_int_equal(proc_count(&p, "message", "outcome", "retried", NULL), 0);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_credentials__connection_string_from_file, itest_setup,
	                                    cred_teardown),
	    cmocka_unit_test_setup_teardown(test_credentials__http_endpoint_refused_at_start, itest_setup,
	                                    cred_teardown),
	    cmocka_unit_test_setup_teardown(test_credentials__no_core_dump, itest_setup, cred_teardown),
	    cmocka_unit_test_setup_teardown(test_credentials__sas_rotated_in_file, itest_setup,
	                                    cred_teardown),
	};
	return cmocka_run_group_tests_name("credentials", tests, NULL, NULL);
}
