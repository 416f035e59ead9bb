/* test_credentials.c - how the worker process guards its secrets (issue 20,
 * item 9): it starts with the connection string read from the file
 * AZURE_STORAGE_CONNECTION_STRING_FILE names (as Kubernetes mounts a
 * Secret); it refuses at start, naming the endpoint, to send a key's
 * signature over http to a host that is not loopback; and it leaves no core
 * file when it dies (the key is in its memory). */
#include "itest.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_credentials__connection_string_from_file, itest_setup,
	                                    cred_teardown),
	    cmocka_unit_test_setup_teardown(test_credentials__http_endpoint_refused_at_start, itest_setup,
	                                    cred_teardown),
	    cmocka_unit_test_setup_teardown(test_credentials__no_core_dump, itest_setup, cred_teardown),
	};
	return cmocka_run_group_tests_name("credentials", tests, NULL, NULL);
}
