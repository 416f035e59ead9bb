/* SPDX-License-Identifier: MIT */
/* test_cli.c - ecworker's commands as a user runs them (build/ecworker-test
 * as a process): check-config lists every problem as FILE:LINE:COL and exits
 * 2, or exits 0 on a valid file; enqueue puts a well-formed message (plain or
 * base64, with --id and --field) and refuses a job the config does not name;
 * every command answers --help; an unknown command is a usage error. No
 * output may carry the account key. */
#include "itest.h"
#include "proc.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "ecw_build_info.h"
#include "ecw_codec.h"
#include "ecw_version.h"

static int cli_setup(void **state)
{
	return itest_setup(state);
}

static int cli_teardown(void **state)
{
	proc_cleanup();
	return itest_teardown(state);
}

/* A valid configuration for the fixture's queue, as NAME.yaml. */
static void valid_config(char *path, size_t cap, struct itest *t, const char *name)
{
	char text[2048], file[128];
	int k = snprintf(text, sizeof(text),
	                 "storage:\n"
	                 "  connection_string: ${ECW_TEST_CONNECTION_STRING}\n"
	                 "worker:\n"
	                 "  queue: %s\n"
	                 "  visibility_timeout: 30s\n"
	                 "metrics:\n"
	                 "  listen: \"\"\n"
	                 "jobs:\n"
	                 "  greet: {type: test-noop}\n"
	                 "  broken: {type: test-fail}\n",
	                 t->queue);
	assert_true(k > 0 && (size_t)k < sizeof(text));
	snprintf(file, sizeof(file), "%s.yaml", name);
	proc_write_file(path, cap, file, text);
}

/* Runs the worker binary; fails unless it exits with want. */
static void run_expect(char **out, char **err, const char *name, const char *const *args,
                       const char *const *env, int want)
{
	char *o = NULL, *e = NULL;
	int code = proc_run(&o, &e, name, args, env, 20000);

	if (code != want)
		fail_msg("%s exited %d, expected %d\n-- stdout:\n%s\n-- stderr:\n%s", name, code, want, o, e);
	if (out)
		*out = o;
	else
		free(o);
	if (err)
		*err = e;
	else
		free(e);
}

/* ---- check-config ----------------------------------------------------------------- */

static void test_cli__check_config_reports_every_error_with_position(void **state)
{
	(void)state;
	char path[640], want[800];
	char *out = NULL, *err = NULL;
	/* Line 3 col 3: an unknown key. Line 4 col 23: a bad duration (the
	 * value's position). Line 8: a job type that does not exist. */
	proc_write_file(path, sizeof(path), "cli-bad.yaml",
	                "worker:\n"
	                "  queue: cli-bad-queue\n"
	                "  bogus_key: 1\n"
	                "  visibility_timeout: 5 parsecs\n"
	                "storage:\n"
	                "  connection_string: ${ECW_TEST_CONNECTION_STRING}\n"
	                "jobs:\n"
	                "  j1: {type: no-such-type}\n");
	const char *args[] = {"check-config", "-c", path, NULL};
	run_expect(&out, &err, "cli-check-bad", args, NULL, 2);

	snprintf(want, sizeof(want), "%s:3:3:", path);
	ITEST_CHECK(strstr(err, want) != NULL, "no line starting %s (the unknown key) in:\n%s", want, err);
	char *line = strstr(err, want);
	char *eol = strchr(line, '\n');
	ITEST_CHECK(strstr(line, "bogus_key") && (!eol || strstr(line, "bogus_key") < eol),
	            "the error at 3:3 does not name bogus_key:\n%s", err);
	snprintf(want, sizeof(want), "%s:4:23:", path);
	ITEST_CHECK(strstr(err, want) != NULL, "no line starting %s (the bad duration) in:\n%s", want, err);
	snprintf(want, sizeof(want), "%s:8:", path);
	ITEST_CHECK(strstr(err, want) != NULL, "no line starting %s (the unknown job type) in:\n%s", want,
	            err);
	/* Each error on a line of its own, and nothing else claims success. */
	size_t lines = 0;
	for (const char *p = err; (p = strstr(p, path)) != NULL; p++)
		lines++;
	ITEST_CHECK(lines >= 3, "%zu error lines, expected one per error (3):\n%s", lines, err);
	ITEST_CHECK(strstr(out, "OK") == NULL, "stdout claims OK:\n%s", out);
	free(out);
	free(err);
	proc_assert_logs_clean();
}

static void test_cli__check_config_valid_file_exits_0(void **state)
{
	struct itest *t = *state;
	char path[640], env_config[700];
	char *out = NULL;

	valid_config(path, sizeof(path), t, "cli-valid");
	const char *args[] = {"check-config", "-c", path, NULL};
	run_expect(&out, NULL, "cli-check-valid", args, NULL, 0);
	ITEST_CHECK(strstr(out, "OK") && strstr(out, t->queue), "stdout: %s", out);
	free(out);

	/* Without -c: $ECW_CONFIG. */
	snprintf(env_config, sizeof(env_config), "ECW_CONFIG=%s", path);
	const char *args2[] = {"check-config", NULL};
	const char *env[] = {env_config, NULL};
	run_expect(&out, NULL, "cli-check-env", args2, env, 0);
	ITEST_CHECK(strstr(out, t->queue) != NULL, "stdout: %s", out);
	free(out);

	/* ${VAR} from the environment, ${VAR:-default} when unset or empty. */
	proc_write_file(path, sizeof(path), "cli-vars.yaml",
	                "storage:\n"
	                "  connection_string: ${ECW_TEST_CONNECTION_STRING}\n"
	                "worker:\n"
	                "  queue: ${ECW_TEST_UNSET_QUEUE:-q-from-default}\n"
	                "  poison_queue: ${ECW_TEST_POISON}\n"
	                "  visibility_timeout: ${ECW_TEST_EMPTY:-45s}\n");
	const char *args3[] = {"check-config", "-c", path, NULL};
	const char *env3[] = {"ECW_TEST_POISON=p-from-env", "ECW_TEST_EMPTY=", NULL};
	run_expect(&out, NULL, "cli-check-vars", args3, env3, 0);
	ITEST_CHECK(strstr(out, "queue q-from-default") && strstr(out, "poison queue p-from-env"),
	            "stdout: %s", out);
	free(out);
	proc_assert_logs_clean();
}

static void test_cli__check_config_missing_file_exits_2(void **state)
{
	(void)state;
	char *err = NULL;
	const char *args[] = {"check-config", "-c", "/nonexistent/ecw-cli-test.yaml", NULL};

	run_expect(NULL, &err, "cli-check-missing", args, NULL, 2);
	ITEST_CHECK(strstr(err, "/nonexistent/ecw-cli-test.yaml") != NULL,
	            "stderr does not name the file:\n%s", err);
	free(err);
	proc_assert_logs_clean();
}

static void test_cli__check_config_unset_variable_is_an_error(void **state)
{
	(void)state;
	char path[640], want[700];
	char *err = NULL;

	proc_write_file(path, sizeof(path), "cli-unset.yaml",
	                "storage:\n"
	                "  connection_string: ${ECW_TEST_SURELY_UNSET_VARIABLE}\n");
	const char *args[] = {"check-config", "-c", path, NULL};
	run_expect(NULL, &err, "cli-check-unset", args, NULL, 2);
	snprintf(want, sizeof(want), "%s:2:", path);
	ITEST_CHECK(strstr(err, want) && strstr(err, "ECW_TEST_SURELY_UNSET_VARIABLE"),
	            "expected an error at %s naming the variable:\n%s", want, err);
	free(err);
	proc_assert_logs_clean();
}

/* One configuration problem per file: check-config exits 2 and reports it
 * at the position given ("L:C", or "L" when only the line is certain). */
struct bad_config {
	const char *what, *yaml, *where;
};

static const struct bad_config bad_configs[] = {
    {"fractional visibility", "worker:\n  visibility_timeout: 1500ms\n", "2:23"},
    {"duplicate key", "worker:\n  queue: a-q\n  queue: b-q\n", "3:3"},
    {"backoff max below base", "worker:\n  retry_backoff: {base: 10s, max: 1s}\n", "2"},
    {"batch_size too big", "worker:\n  batch_size: 33\n", "2:15"},
    {"quoted number", "worker:\n  batch_size: \"16\"\n", "2:15"},
    {"concurrency 0", "worker:\n  concurrency: 0\n", "2:16"},
    {"max_dequeue_count too big", "worker:\n  max_dequeue_count: 1001\n", "2:22"},
    {"poison queue = queue", "worker:\n  queue: same-q\n  poison_queue: same-q\n", "3"},
    {"bad queue name", "worker:\n  queue: Bad_Name\n", "2:10"},
    {"anchor and alias", "worker: &w\n  queue: a-q\nlog: *w\n", "1"},
    {"unknown top-level key", "storage: {}\nbogus: 1\n", "2:1"},
    {"bad job name", "jobs:\n  \"bad name!\": {type: test-noop}\n", "2:3"},
    {"job setting missing", "jobs:\n  c: {type: test-count}\n", "2"},
    {"unknown job setting", "jobs:\n  x: {type: test-noop, extra: 1}\n", "2:24"},
    {"job without type", "jobs:\n  x: {table: t}\n", "2"},
    {"bad listen address", "metrics:\n  listen: nonsense\n", "2:11"},
    {"two documents", "worker: {}\n---\nworker: {}\n", "2"},
    {"message_ttl 0", "worker:\n  message_ttl: 0\n", "2:16"},
    {"shutdown_grace over 1h", "worker:\n  shutdown_grace: 2h\n", "2:19"},
    {"poll min 0", "worker:\n  poll_interval: {min: 0ms, max: 1s}\n", "2:24"},
    {"no d unit", "worker:\n  visibility_timeout: 8d\n", "2:23"},
    {"visibility over 168h", "worker:\n  visibility_timeout: 169h\n", "2:23"},
    {"bad log level", "log:\n  level: verbose\n", "2:10"},
    {"bool as yes", "worker:\n  create_missing: yes\n", "2:19"},
    {"worker not a map", "worker: 5\n", "1:9"},
    {"unset variable", "worker:\n  queue: ${ECW_TEST_SURELY_UNSET_VARIABLE}\n", "2:10"},
    {"YAML syntax error", "worker:\n  queue: [a-q\n", "3"},
};

static void test_cli__check_config_rejects_each_bad_value(void **state)
{
	(void)state;
	size_t failures = 0;
	char report[8192] = "";
	size_t rlen = 0;

	for (size_t i = 0; i < sizeof(bad_configs) / sizeof(bad_configs[0]); i++) {
		const struct bad_config *b = &bad_configs[i];
		char path[640], file[64], name[64], want[800], text[1024];
		char *out = NULL, *err = NULL;

		snprintf(file, sizeof(file), "cli-bad-%02zu.yaml", i);
		snprintf(name, sizeof(name), "cli-bad-%02zu", i);
		/* A valid connection string, so each file holds one problem. */
		snprintf(text, sizeof(text), "%s%s",
		         strncmp(b->yaml, "storage:", 8) == 0
		             ? ""
		             : "storage:\n  connection_string: ${ECW_TEST_CONNECTION_STRING}\n",
		         b->yaml);
		/* The storage lines moved everything down two lines. */
		int line = 0, col = 0;
		int k = sscanf(b->where, "%d:%d", &line, &col);
		if (strncmp(b->yaml, "storage:", 8) != 0)
			line += 2;
		proc_write_file(path, sizeof(path), file, text);
		const char *args[] = {"check-config", "-c", path, NULL};
		int code = proc_run(&out, &err, name, args, NULL, 10000);
		if (k == 2)
			snprintf(want, sizeof(want), "%s:%d:%d:", path, line, col);
		else
			snprintf(want, sizeof(want), "%s:%d:", path, line);
		if (code != 2 || !strstr(err, want)) {
			failures++;
			int n = snprintf(report + rlen, sizeof(report) - rlen,
			                 "  %s: exit %d, wanted 2 and %s...; got: %.300s%s\n", b->what, code,
			                 want + strlen(path), err[0] ? err : out, err[0] ? "" : " (stdout)");
			if (n > 0 && rlen + (size_t)n < sizeof(report))
				rlen += (size_t)n;
		}
		free(out);
		free(err);
	}
	ITEST_CHECK(failures == 0, "%zu bad configuration(s) not reported as expected:\n%s", failures,
	            report);
	proc_assert_logs_clean();
}

/* Every key is optional: an empty file is a valid configuration. */
static void test_cli__check_config_empty_file_is_valid(void **state)
{
	(void)state;
	char path[640];
	char *out = NULL;

	proc_write_file(path, sizeof(path), "cli-empty.yaml", "");
	const char *args[] = {"check-config", "-c", path, NULL};
	const char *env[] = {"AZURE_STORAGE_CONNECTION_STRING=", NULL};
	run_expect(&out, NULL, "cli-check-empty", args, env, 0);
	ITEST_CHECK(strstr(out, "ecw-jobs") && strstr(out, "ecw-jobs-poison"), "defaults not shown: %s", out);
	free(out);
	proc_assert_logs_clean();
}

/* A bad connection string is reported without echoing the secret in it. */
static void test_cli__check_config_never_echoes_secrets(void **state)
{
	(void)state;
	char path[640];
	char *out = NULL, *err = NULL;

	proc_write_file(path, sizeof(path), "cli-badcs.yaml",
	                "storage:\n"
	                "  connection_string: \"AccountName=acct;AccountKey=not*base64*sekret-value;"
	                "QueueEndpoint=http://127.0.0.1:1/acct;TableEndpoint=http://127.0.0.1:2/acct\"\n");
	const char *args[] = {"check-config", "-c", path, NULL};
	run_expect(&out, &err, "cli-check-badcs", args, NULL, 2);
	ITEST_CHECK(strstr(err, "sekret-value") == NULL && strstr(out, "sekret-value") == NULL,
	            "the key is echoed:\n%s%s", out, err);
	ITEST_CHECK(strstr(err, "AccountKey") != NULL, "the error does not name the bad setting:\n%s", err);
	free(out);
	free(err);

	/* The same through an environment variable: its value is never printed. */
	proc_write_file(path, sizeof(path), "cli-badcs-env.yaml",
	                "storage:\n  connection_string: ${ECW_TEST_BAD_CS}\nworker:\n  queue: Bad_Name\n");
	const char *env[] = {"ECW_TEST_BAD_CS=AccountName=acct;AccountKey=another*sekret;BlobEndpoint=x",
	                     NULL};
	run_expect(&out, &err, "cli-check-badcs-env", args, env, 2);
	ITEST_CHECK(strstr(err, "another*sekret") == NULL && strstr(out, "another*sekret") == NULL,
	            "the key is echoed:\n%s%s", out, err);
	free(out);
	free(err);
	proc_assert_logs_clean();
}

/* ---- enqueue -------------------------------------------------------------------------- */

/* Receives the one message on the fixture's queue. */
static struct ecw_queue_msg *receive_one(struct itest *t)
{
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;

	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, t->queue, 32, 30));
	ITEST_CHECK(n == 1, "%zu messages on the queue, expected 1", n);
	return m;
}

static void assert_message(const char *json, const char *job, const char *pk, const char *rk, const char *id,
                           const char *k, const char *v)
{
	struct json_object *o = json_tokener_parse(json), *f;

	ITEST_CHECK(o && json_object_is_type(o, json_type_object), "not a JSON object: %s", json);
	const char *keys[] = {"job", "pk", "rk", "id", k};
	const char *vals[] = {job, pk, rk, id, v};
	for (int i = 0; i < 5; i++) {
		if (!keys[i])
			continue;
		if (!vals[i]) {
			ITEST_CHECK(!json_object_object_get_ex(o, keys[i], NULL), "%s present in %s", keys[i],
			            json);
			continue;
		}
		ITEST_CHECK(json_object_object_get_ex(o, keys[i], &f) &&
		                json_object_is_type(f, json_type_string) &&
		                strcmp(json_object_get_string(f), vals[i]) == 0,
		            "\"%s\" is not \"%s\" in %s", keys[i], vals[i], json);
	}
	json_object_put(o);
}

static void test_cli__enqueue_plain_with_fields(void **state)
{
	struct itest *t = *state;
	char path[640];
	char *out = NULL;

	t->queue_used = true; /* enqueue creates it (create_missing) */
	valid_config(path, sizeof(path), t, "cli-enqueue");
	const char *args[] = {"enqueue",     "-c",   path,      "greet",   "Sales",
	                      "o'brien 001", "--id", "trace-7", "--field", "color=blue green",
	                      "--field",     "n=1",  NULL};
	run_expect(&out, NULL, "cli-enqueue-plain", args, NULL, 0);

	struct ecw_queue_msg *m = receive_one(t);
	char *nl = strchr(out, '\n');
	if (nl)
		*nl = '\0';
	ITEST_CHECK(strcmp(out, m->id) == 0, "printed \"%s\", the message id is %s", out, m->id);
	ITEST_CHECK(m->text[0] == '{', "plain text expected: %s", m->text);
	assert_message(m->text, "greet", "Sales", "o'brien 001", "trace-7", "color", "blue green");
	assert_message(m->text, "greet", "Sales", "o'brien 001", "trace-7", "n", "1");
	ecw_queue_msgs_free(m, 1);
	free(out);
	proc_assert_logs_clean();
}

static void test_cli__enqueue_base64(void **state)
{
	struct itest *t = *state;
	char path[640];
	struct ecw_buf raw;

	t->queue_used = true;
	valid_config(path, sizeof(path), t, "cli-enqueue64");
	const char *args[] = {"enqueue",        "-c",    path,    "--base64",       "--field",
	                      "period=2026-11", "greet", "Sales", "Zo\xc3\xab 002", NULL};
	run_expect(NULL, NULL, "cli-enqueue-base64", args, NULL, 0);

	struct ecw_queue_msg *m = receive_one(t);
	ecw_buf_init(&raw, 0);
	ITEST_CHECK(ecw_base64_decode(&raw, m->text, m->text_len) == 0, "not strict base64: %s", m->text);
	assert_message(ecw_buf_cstr(&raw), "greet", "Sales", "Zo\xc3\xab 002", NULL, "period", "2026-11");
	ecw_buf_dispose(&raw);
	ecw_queue_msgs_free(m, 1);
	proc_assert_logs_clean();
}

static void test_cli__enqueue_refuses_bad_input(void **state)
{
	struct itest *t = *state;
	char path[640];
	char *err = NULL;
	long long n = -1;

	valid_config(path, sizeof(path), t, "cli-enqueue-bad");
	itest_queue(t);
	const char *unknown[] = {"enqueue", "-c", path, "no-such-job", "p", "r", NULL};
	run_expect(NULL, &err, "cli-enqueue-unknown", unknown, NULL, 2);
	ITEST_CHECK(strstr(err, "no-such-job") != NULL, "stderr does not name the job:\n%s", err);
	free(err);
	const char *badkey[] = {"enqueue", "-c", path, "greet", "a/b", "r", NULL};
	run_expect(NULL, NULL, "cli-enqueue-badkey", badkey, NULL, 2);
	const char *badfield[] = {"enqueue", "-c", path, "greet", "p", "r", "--field", "novalue", NULL};
	run_expect(NULL, NULL, "cli-enqueue-badfield", badfield, NULL, 2);
	const char *missing[] = {"enqueue", "-c", path, "greet", "p", NULL};
	run_expect(NULL, NULL, "cli-enqueue-missing", missing, NULL, 2);
	ECW_ASSERT_OK(ecw_queue_count(&n, t->client, t->queue));
	assert_int_equal(n, 0);
	proc_assert_logs_clean();
}

/* --delay hides the message for that long after the put (the service
 * counts it, nobody sees it); --ttl sets its expiry, -1 never; without
 * --ttl the configuration's message_ttl applies. */
static void test_cli__enqueue_delay_and_ttl(void **state)
{
	struct itest *t = *state;
	char path[640];
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	long long count = -1;

	t->queue_used = true;
	valid_config(path, sizeof(path), t, "cli-enqueue-ttl");
	const char *delayed[] = {"enqueue", "-c", path,    "greet", "p", "delayed",
	                         "--delay", "1h", "--ttl", "2h",    NULL};
	run_expect(NULL, NULL, "cli-enqueue-delayed", delayed, NULL, 0);
	ECW_ASSERT_OK(ecw_queue_count(&count, t->client, t->queue));
	assert_int_equal(count, 1);
	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, t->client, t->queue, 32));
	ITEST_CHECK(n == 0, "a message delayed 1h is visible at once (%zu peeked)", n);
	ecw_queue_msgs_free(m, n);

	const char *ttl[] = {"enqueue", "-c", path, "greet", "p", "short-lived", "--ttl", "90m", NULL};
	run_expect(NULL, NULL, "cli-enqueue-ttl", ttl, NULL, 0);
	const char *forever[] = {"enqueue", "-c", path, "greet", "p", "forever", "--ttl", "-1", NULL};
	run_expect(NULL, NULL, "cli-enqueue-forever", forever, NULL, 0);
	const char *plain[] = {"enqueue", "-c", path, "greet", "p", "plain", NULL};
	run_expect(NULL, NULL, "cli-enqueue-default-ttl", plain, NULL, 0);
	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, t->client, t->queue, 32));
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		long long life =
		    m[i].expiration_time ? (long long)(m[i].expiration_time - m[i].insertion_time) : -1;
		if (strstr(m[i].text, "short-lived"))
			ITEST_CHECK(life == 5400, "--ttl 90m: the message lives %lld s", life);
		else if (strstr(m[i].text, "forever"))
			ITEST_CHECK(life == -1, "--ttl -1: the message expires after %lld s", life);
		else /* worker.message_ttl, whose default is -1 (never) */
			ITEST_CHECK(life == -1, "no --ttl: the message expires after %lld s", life);
	}
	ecw_queue_msgs_free(m, n);
	proc_assert_logs_clean();
}

/* Durations the service would refuse, or that are not durations, are usage
 * errors naming the option; nothing is put. */
static void test_cli__enqueue_refuses_bad_delay_and_ttl(void **state)
{
	static const struct {
		const char *opt, *value, *says;
	} bad[] = {
	    {"--delay", "8d", "--delay is out of range"},     {"--delay", "-5s", "--delay must be"},
	    {"--delay", "1500ms", "whole number of seconds"}, {"--delay", "soon", "--delay must be"},
	    {"--ttl", "0", "--ttl is out of range"},          {"--ttl", "-2", "--ttl must be"},
	    {"--ttl", "100000w", "--ttl is out of range"},
	};
	struct itest *t = *state;
	char path[640];
	char *err = NULL;
	long long count = -1;

	valid_config(path, sizeof(path), t, "cli-enqueue-bad-ttl");
	itest_queue(t);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *args[] = {"enqueue", "-c",       path,         "greet", "p",
		                      "r",       bad[i].opt, bad[i].value, NULL};
		run_expect(NULL, &err, "cli-enqueue-bad-duration", args, NULL, 2);
		ITEST_CHECK(strstr(err, bad[i].says) != NULL, "%s %s: stderr does not say \"%s\":\n%s",
		            bad[i].opt, bad[i].value, bad[i].says, err);
		free(err);
	}
	/* Expiring before it could be seen. */
	const char *late[] = {"enqueue", "-c", path,    "greet", "p", "r",
	                      "--delay", "1h", "--ttl", "30m",   NULL};
	run_expect(NULL, &err, "cli-enqueue-expires-first", late, NULL, 2);
	ITEST_CHECK(strstr(err, "expire") != NULL, "stderr does not say it would expire:\n%s", err);
	free(err);
	ECW_ASSERT_OK(ecw_queue_count(&count, t->client, t->queue));
	assert_int_equal(count, 0);
	proc_assert_logs_clean();
}

/* ---- help and dispatch ------------------------------------------------------------------- */

static void test_cli__help_exits_0(void **state)
{
	(void)state;
	static const char *cmds[] = {"run", "check-config", "enqueue"};

	for (size_t i = 0; i < 3; i++) {
		char name[64], *out = NULL;
		const char *args[] = {cmds[i], "--help", NULL};
		snprintf(name, sizeof(name), "cli-help-%s", cmds[i]);
		run_expect(&out, NULL, name, args, NULL, 0);
		ITEST_CHECK(strstr(out, "usage: ecworker") && strstr(out, cmds[i]), "%s --help printed:\n%s",
		            cmds[i], out);
		free(out);
	}
	char *out = NULL;
	const char *help[] = {"help", NULL};
	run_expect(&out, NULL, "cli-help", help, NULL, 0);
	ITEST_CHECK(strstr(out, "check-config") && strstr(out, "enqueue"), "help printed:\n%s", out);
	free(out);
	proc_assert_logs_clean();
}

static void test_cli__unknown_command_exits_2(void **state)
{
	(void)state;
	char *err = NULL;
	const char *args[] = {"frobnicate", NULL};

	run_expect(NULL, &err, "cli-unknown", args, NULL, 2);
	ITEST_CHECK(strstr(err, "frobnicate") && strstr(err, "usage"), "stderr:\n%s", err);
	free(err);
	const char *none[] = {NULL};
	run_expect(NULL, NULL, "cli-none", none, NULL, 2);
	const char *badopt[] = {"check-config", "--no-such-option", NULL};
	run_expect(NULL, NULL, "cli-badopt", badopt, NULL, 2);
	proc_assert_logs_clean();
}

/* check-config reads the OTEL_* variables as run does at start: a bad one
 * is exit 2 naming the variable (never an exporter header's value, which is
 * a secret), a good endpoint is reported on. */
static void test_cli__check_config_checks_otel_variables(void **state)
{
	struct itest *t = *state;
	char path[640];
	char *out = NULL, *err = NULL;

	valid_config(path, sizeof(path), t, "cli-otel");
	const char *args[] = {"check-config", "-c", path, NULL};
	const char *bad_protocol[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318",
	                              "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", NULL};
	run_expect(NULL, &err, "cli-otel-protocol", args, bad_protocol, 2);
	ITEST_CHECK(strstr(err, "OTEL_EXPORTER_OTLP_PROTOCOL"), "stderr: %s", err);
	free(err);
	const char *bad_header[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318",
	                            "OTEL_EXPORTER_OTLP_HEADERS=api-key=sekrit-value,broken", NULL};
	run_expect(&out, &err, "cli-otel-headers", args, bad_header, 2);
	ITEST_CHECK(strstr(err, "OTEL_EXPORTER_OTLP_HEADERS") && !strstr(err, "sekrit") &&
	                !strstr(out, "sekrit"),
	            "stdout: %s\nstderr: %s", out, err);
	free(out);
	free(err);
	const char *good[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", NULL};
	run_expect(&out, NULL, "cli-otel-good", args, good, 0);
	ITEST_CHECK(strstr(out, "OTLP trace export on"), "stdout: %s", out);
	free(out);
	run_expect(&out, NULL, "cli-otel-none", args, NULL, 0);
	ITEST_CHECK(!strstr(out, "OTLP"), "stdout: %s", out);
	free(out);
}

/* ---- version ------------------------------------------------------------------------------ */

/* `ecworker --version` and `ecworker version`: the version of
 * include/ecw_version.h, the commit and compiler of this build (the header the
 * Makefile wrote for both binaries), and each library's version at build time
 * beside the one loaded (libcurl's and json-c's as this process sees them). */
static void test_cli__version_names_commit_and_libraries(void **state)
{
	(void)state;
	static const char *spellings[] = {"--version", "version"};
	char want[256];

	for (size_t i = 0; i < 2; i++) {
		char *out = NULL;
		const char *args[] = {spellings[i], NULL};

		run_expect(&out, NULL, "cli-version", args, NULL, 0);
		snprintf(want, sizeof(want), "ecworker %s\ncommit %s\ncompiler %s\n", ECW_VERSION,
		         ECW_BUILD_COMMIT, ECW_BUILD_COMPILER);
		ITEST_CHECK(strncmp(out, want, strlen(want)) == 0, "%s printed:\n%s\nwanted it to start:\n%s",
		            spellings[i], out, want);
		ITEST_CHECK(strcmp(ECW_BUILD_COMMIT, "unknown") != 0,
		            "built in a clone, the commit is known");
		snprintf(want, sizeof(want), "  libcurl        %s / %s\n", ECW_BUILT_WITH_LIBCURL,
		         curl_version_info(CURLVERSION_NOW)->version);
		ITEST_CHECK(strstr(out, want), "%s printed:\n%s\nwithout: %s", spellings[i], out, want);
		snprintf(want, sizeof(want), "  json-c         %s / %s\n", ECW_BUILT_WITH_JSON_C,
		         json_c_version());
		ITEST_CHECK(strstr(out, want), "%s printed:\n%s\nwithout: %s", spellings[i], out, want);
		for (const char *lib = "openssl\0libyaml\0expat\0libmicrohttpd\0zlib\0"; *lib;
		     lib += strlen(lib) + 1) {
			const char *at = strstr(out, lib);
			ITEST_CHECK(at && strstr(at, " / ") && strchr(at, '\n') > strstr(at, " / ") + 3,
			            "%s printed:\n%s\nno versions for %s", spellings[i], out, lib);
		}
		free(out);
	}
	const char *extra[] = {"version", "extra", NULL};
	run_expect(NULL, NULL, "cli-version-extra", extra, NULL, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_cli__check_config_reports_every_error_with_position,
	                                    cli_setup, cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__check_config_valid_file_exits_0, cli_setup,
	                                    cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__check_config_missing_file_exits_2, cli_setup,
	                                    cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__check_config_unset_variable_is_an_error, cli_setup,
	                                    cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__check_config_rejects_each_bad_value, cli_setup,
	                                    cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__check_config_empty_file_is_valid, cli_setup,
	                                    cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__check_config_never_echoes_secrets, cli_setup,
	                                    cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__enqueue_plain_with_fields, cli_setup, cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__enqueue_base64, cli_setup, cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__enqueue_delay_and_ttl, cli_setup, cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__enqueue_refuses_bad_delay_and_ttl, cli_setup,
	                                    cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__enqueue_refuses_bad_input, cli_setup, cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__help_exits_0, cli_setup, cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__unknown_command_exits_2, cli_setup, cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__check_config_checks_otel_variables, cli_setup,
	                                    cli_teardown),
	    cmocka_unit_test_setup_teardown(test_cli__version_names_commit_and_libraries, cli_setup,
	                                    cli_teardown),
	};
	/* ECW_TEST_FILTER=test_cli__sig* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
