/* SPDX-License-Identifier: MIT */
/* test_config.c - the worker's configuration (worker/config/config.c): defaults,
 * every key, every kind of error at its exact line and column, errors
 * collected rather than stopping at the first and put in file order, secrets
 * kept out of messages, jobs through the real registry's test-only types,
 * then chains, and the shipped config/ecworker.yaml. The tree, ${VAR} and the
 * readers are test_node.c's. Tests run from the repo root. */
#include "config_text.h"

#include <errno.h>
#include <unistd.h>

#include "ecw_job.h"

/* A distinctive secret: no error line may ever contain it (or its pieces). */
#define SECRET "Zq7SeCrEtVaLuE9xK"

/* ---- helpers ------------------------------------------------------------- */

static void assert_defaults(const struct ecw_config *cfg)
{
	assert_str(cfg->file, FILE_NAME);
	assert_str(cfg->storage.connection_string, "UseDevelopmentStorage=true");
	assert_int_equal(cfg->storage.request_timeout_ms, 30000);
	assert_str(cfg->worker.queue, "ecw-jobs");
	assert_str(cfg->worker.poison_queue, "ecw-jobs-poison");
	assert_int_equal(cfg->worker.batch_size, 16);
	assert_int_equal(cfg->worker.concurrency, 16);
	assert_int_equal(cfg->worker.concurrency_min, 1);
	assert_int_equal(cfg->worker.prefetch, 16); /* the batch_size */
	assert_int_equal(cfg->worker.visibility_timeout_ms, 60000);
	assert_int_equal(cfg->worker.max_dequeue_count, 5);
	assert_int_equal(cfg->worker.retry_backoff_base_ms, 2000);
	assert_int_equal(cfg->worker.retry_backoff_max_ms, 300000);
	assert_int_equal(cfg->worker.poll_min_ms, 100);
	assert_int_equal(cfg->worker.poll_max_ms, 10000);
	assert_int_equal(cfg->worker.shutdown_grace_ms, 25000);
	assert_int_equal(cfg->worker.circuit_failures, 3);
	assert_int_equal(cfg->worker.circuit_probe_min_ms, 1000);
	assert_int_equal(cfg->worker.circuit_probe_max_ms, 30000);
	assert_int_equal(cfg->worker.stall_timeout_ms, 600000);
	assert_int_equal(cfg->worker.control_poll_ms, 10000);
	assert_int_equal(cfg->metrics.queue_refresh_ms, 15000);
	assert_int_equal(cfg->worker.message_ttl_s, -1);
	assert_true(cfg->worker.create_missing);
	assert_int_equal(cfg->log.level, ECW_LOG_INFO);
	assert_int_equal(cfg->log.format, ECW_LOG_JSON);
	assert_str(cfg->metrics.listen, "127.0.0.1:9464");
	assert_int_equal(cfg->njobs, 0);
	assert_null(ecw_config_job(cfg, "anything"));
}

/* ---- defaults and every key ---------------------------------------------- */

static void test_config__defaults_empty_file(void **state)
{
	(void)state;
	struct ecw_config *cfg = parse_ok("");
	assert_defaults(cfg);
	ecw_config_free(cfg);
	cfg = parse_ok("# only a comment\n\n");
	assert_defaults(cfg);
	ecw_config_free(cfg);
	cfg = parse_ok("---\n");
	assert_defaults(cfg);
	ecw_config_free(cfg);
}

static void test_config__defaults_empty_map(void **state)
{
	(void)state;
	struct ecw_config *cfg = parse_ok("{}\n");
	assert_defaults(cfg);
	ecw_config_free(cfg);
	/* Sections present but empty (or null) keep the defaults. */
	cfg = parse_ok("storage: {}\nworker:\nlog: {}\nmetrics: ~\njobs:\n");
	assert_defaults(cfg);
	ecw_config_free(cfg);
}

static void test_config__default_connection_string_from_env(void **state)
{
	(void)state;
	setenv("AZURE_STORAGE_CONNECTION_STRING",
	       "AccountName=acct;AccountKey="
	       "U2VjcmV0S2V5U2VjcmV0S2V5",
	       1);
	struct ecw_config *cfg = parse_ok("");
	assert_str(cfg->storage.connection_string, "AccountName=acct;AccountKey=U2VjcmV0S2V5U2VjcmV0S2V5");
	ecw_config_free(cfg);
	/* An empty variable falls back, as ${VAR:-default} does. */
	setenv("AZURE_STORAGE_CONNECTION_STRING", "", 1);
	cfg = parse_ok("");
	assert_str(cfg->storage.connection_string, "UseDevelopmentStorage=true");
	ecw_config_free(cfg);
	unsetenv("AZURE_STORAGE_CONNECTION_STRING");
}

static void test_config__every_key_set(void **state)
{
	(void)state;
	struct ecw_config *cfg = parse_ok("storage:\n"
	                                  "  connection_string: \"UseDevelopmentStorage=true\"\n"
	                                  "  request_timeout: 2s\n"
	                                  "worker:\n"
	                                  "  queue: orders-2\n"
	                                  "  poison_queue: orders-dead\n"
	                                  "  batch_size: 32\n"
	                                  "  concurrency: 256\n"
	                                  "  prefetch: 256\n"
	                                  "  visibility_timeout: 2m\n"
	                                  "  max_dequeue_count: 1000\n"
	                                  "  retry_backoff: {base: 1s, max: 168h}\n"
	                                  "  poll_interval:\n"
	                                  "    min: 1ms\n"
	                                  "    max: 1h\n"
	                                  "  shutdown_grace: 0\n"
	                                  "  message_ttl: 7200s\n"
	                                  "  create_missing: false\n"
	                                  "log: {level: debug, format: text}\n"
	                                  "metrics: {listen: \"\"}\n"
	                                  "jobs: {}\n");
	assert_str(cfg->storage.connection_string, "UseDevelopmentStorage=true");
	assert_int_equal(cfg->storage.request_timeout_ms, 2000);
	assert_str(cfg->worker.queue, "orders-2");
	assert_str(cfg->worker.poison_queue, "orders-dead");
	assert_int_equal(cfg->worker.batch_size, 32);
	assert_int_equal(cfg->worker.concurrency, 256);
	assert_int_equal(cfg->worker.prefetch, 256);
	assert_int_equal(cfg->worker.visibility_timeout_ms, 120000);
	assert_int_equal(cfg->worker.max_dequeue_count, 1000);
	assert_int_equal(cfg->worker.retry_backoff_base_ms, 1000);
	assert_int_equal(cfg->worker.retry_backoff_max_ms, 7LL * 24 * 3600 * 1000);
	assert_int_equal(cfg->worker.poll_min_ms, 1);
	assert_int_equal(cfg->worker.poll_max_ms, 3600000);
	assert_int_equal(cfg->worker.shutdown_grace_ms, 0);
	assert_int_equal(cfg->worker.message_ttl_s, 7200);
	assert_false(cfg->worker.create_missing);
	assert_int_equal(cfg->log.level, ECW_LOG_DEBUG);
	assert_int_equal(cfg->log.format, ECW_LOG_TEXT);
	assert_str(cfg->metrics.listen, "");
	assert_int_equal(cfg->njobs, 0);
	ecw_config_free(cfg);

	/* The other enum values, the other minimums, and a derived poison queue. */
	cfg = parse_ok("worker: {queue: abc, batch_size: 1, concurrency: 1, visibility_timeout: 1s,\n"
	               "  max_dequeue_count: 1, message_ttl: 1s, create_missing: True}\n"
	               "log: {level: warn}\n");
	assert_str(cfg->worker.poison_queue, "abc-poison");
	assert_int_equal(cfg->worker.batch_size, 1);
	assert_int_equal(cfg->worker.concurrency, 1);
	assert_int_equal(cfg->worker.prefetch, 1); /* follows batch_size */
	assert_int_equal(cfg->worker.visibility_timeout_ms, 1000);
	assert_int_equal(cfg->worker.max_dequeue_count, 1);
	assert_int_equal(cfg->worker.message_ttl_s, 1);
	assert_true(cfg->worker.create_missing);
	assert_int_equal(cfg->log.level, ECW_LOG_WARN);
	ecw_config_free(cfg);
	cfg = parse_ok("log: {level: error}\nworker: {visibility_timeout: 168h, message_ttl: 596523h}\n");
	assert_int_equal(cfg->log.level, ECW_LOG_ERROR);
	assert_int_equal(cfg->worker.visibility_timeout_ms, 7LL * 24 * 3600 * 1000);
	assert_int_equal(cfg->worker.message_ttl_s, 596523LL * 3600);
	ecw_config_free(cfg);
	/* Durations may be quoted: they are text either way. */
	cfg = parse_ok("worker: {shutdown_grace: \"30s\", retry_backoff: {base: '3s'}}\n");
	assert_int_equal(cfg->worker.shutdown_grace_ms, 30000);
	assert_int_equal(cfg->worker.retry_backoff_base_ms, 3000);
	ecw_config_free(cfg);
}

/* storage.request_timeout: the whole of one HTTP request, 1s..10m. */
static void test_config__request_timeout(void **state)
{
	(void)state;
	struct ecw_config *cfg = parse_ok("storage: {request_timeout: 1s}\n");
	assert_int_equal(cfg->storage.request_timeout_ms, 1000);
	ecw_config_free(cfg);
	cfg = parse_ok("storage: {request_timeout: 10m}\n");
	assert_int_equal(cfg->storage.request_timeout_ms, 600000);
	ecw_config_free(cfg);
	cfg = parse_ok("storage: {request_timeout: 2500ms}\n");
	assert_int_equal(cfg->storage.request_timeout_ms, 2500);
	ecw_config_free(cfg);

	one_error("storage: {request_timeout: 999ms}\n", "1:28",
	          "storage.request_timeout is out of range (1s..10m)");
	one_error("storage: {request_timeout: 0}\n", "1:28",
	          "storage.request_timeout is out of range (1s..10m)");
	one_error("storage: {request_timeout: 601s}\n", "1:28",
	          "storage.request_timeout is out of range (1s..10m)");
	one_error("storage: {request_timeout: 30}\n", "1:28",
	          "storage.request_timeout must be a duration like 250ms, 2s, 5m or 1h (1s..10m)");
}

/* storage.pipelining: a group's deletes pipelined unless it is false. */
static void test_config__pipelining(void **state)
{
	(void)state;
	struct ecw_config *cfg = parse_ok("storage: {request_timeout: 1s}\n");
	assert_true(cfg->storage.pipelining);
	ecw_config_free(cfg);
	cfg = parse_ok("storage: {pipelining: false}\n");
	assert_false(cfg->storage.pipelining);
	ecw_config_free(cfg);
	cfg = parse_ok("storage: {pipelining: true}\n");
	assert_true(cfg->storage.pipelining);
	ecw_config_free(cfg);
	one_error("storage: {pipelining: sometimes}\n", "1:23", "storage.pipelining must be true or false");
}

/* ---- errors, one kind at a time -------------------------------------------- */

static void test_config__unknown_key_top_level(void **state)
{
	(void)state;
	one_error(
	    "worker: {}\nworkers: {}\n", "2:1",
	    "unknown key 'workers' in the top level (expected one of: storage, worker, log, metrics, jobs, schedules, migrations)");
}

static void test_config__unknown_key_nested(void **state)
{
	(void)state;
	one_error(
	    "worker:\n  queue: abc\n  bacth_size: 4\n", "3:3",
	    "unknown key 'bacth_size' in worker (expected one of: queue, poison_queue, queues, batch_size, "
	    "concurrency, concurrency_min, prefetch, visibility_timeout, max_dequeue_count, retry_backoff, poll_interval, "
	    "shutdown_grace, circuit, stall_timeout, message_ttl, create_missing, schedule_table, "
	    "schedule_lease, control_poll)");
	one_error("worker:\n  retry_backoff: {base: 1s, min: 2s}\n", "2:29",
	          "unknown key 'min' in worker.retry_backoff (expected one of: base, max)");
	one_error("worker:\n  poll_interval: {mn: 1s}\n", "2:19",
	          "unknown key 'mn' in worker.poll_interval (expected one of: min, max)");
	one_error("log: {level: info, colour: true}\n", "1:20",
	          "unknown key 'colour' in log (expected one of: level, format)");
	one_error("metrics:\n  port: 9464\n", "2:3",
	          "unknown key 'port' in metrics (expected one of: listen, queue_refresh)");
	one_error(
	    "storage:\n  acount: x\n", "2:3",
	    "unknown key 'acount' in storage (expected one of: connection_string, auth, account, ca_file, "
	    "managed_identity_client_id, request_timeout, pipelining)");
}

static void test_config__wrong_type(void **state)
{
	(void)state;
	one_error("worker: 5\n", "1:9", "worker must be a map, not a value");
	one_error("worker: [a, b]\n", "1:9", "worker must be a map, not a list");
	one_error("- a\n- b\n", "1:1", "the configuration must be a map");
	one_error("just text\n", "1:1", "the configuration must be a map");
	one_error("worker:\n  batch_size: {n: 1}\n", "2:15",
	          "worker.batch_size must be an integer (1..32), not a map");
	one_error("worker:\n  batch_size: abc\n", "2:15", "worker.batch_size must be an integer (1..32)");
	one_error("worker:\n  batch_size: 1.5\n", "2:15", "worker.batch_size must be an integer (1..32)");
	one_error("worker:\n  batch_size: \"16\"\n", "2:15",
	          "worker.batch_size must be an integer (1..32), not a quoted string");
	one_error("worker:\n  batch_size:\n", "2:14",
	          "worker.batch_size has no value (expected an integer (1..32))");
	one_error("worker:\n  create_missing: 1\n", "2:19", "worker.create_missing must be true or false");
	one_error("worker:\n  create_missing: yes\n", "2:19", "worker.create_missing must be true or false");
	one_error("worker:\n  create_missing: 'true'\n", "2:19",
	          "worker.create_missing must be true or false, not a quoted string");
	one_error("worker:\n  queue: [a]\n", "2:10", "worker.queue must be a string, not a list");
	one_error("worker:\n  retry_backoff: 5s\n", "2:18",
	          "worker.retry_backoff must be a map, not a value");
	one_error("worker:\n  visibility_timeout: {s: 1}\n", "2:23",
	          "worker.visibility_timeout must be a duration");
	one_error("log: [info]\n", "1:6", "log must be a map, not a list");
	one_error("log: {level: verbose}\n", "1:14", "log.level must be one of: debug, info, warn, error");
	one_error("log: {format: xml}\n", "1:15", "log.format must be one of: json, text");
	one_error("metrics: {listen: [a]}\n", "1:19", "metrics.listen must be a string, not a list");
	one_error("storage: {connection_string: {a: b}}\n", "1:30",
	          "storage.connection_string must be a string, not a map");
	one_error("storage:\n  connection_string:\n", "2:21", "storage.connection_string has no value");
	one_error("jobs: [a]\n", "1:7", "jobs must be a map, not a list");
}

/* key: the worker key; bad: a value; pos: where the value starts. */
static void out_of_range(const char *key, const char *bad, const char *range)
{
	char text[256], want[256];

	snprintf(text, sizeof(text), "worker:\n  %s: %s\n", key, bad);
	snprintf(want, sizeof(want), "worker.%s is out of range (%s)", key, range);
	char pos[32];
	snprintf(pos, sizeof(pos), "2:%d", (int)strlen(key) + 5);
	one_error(text, pos, want);
}

static void test_config__out_of_range(void **state)
{
	(void)state;
	out_of_range("batch_size", "0", "1..32");
	out_of_range("batch_size", "33", "1..32");
	out_of_range("batch_size", "-1", "1..32");
	out_of_range("batch_size", "99999999999999999999999", "1..32");
	out_of_range("concurrency", "0", "1..256");
	out_of_range("concurrency", "257", "1..256");
	out_of_range("prefetch", "-1", "0..256");
	out_of_range("prefetch", "257", "0..256");
	struct ecw_config *cfg = parse_ok("worker: {prefetch: 0}\n"); /* the low end is allowed */
	assert_int_equal(cfg->worker.prefetch, 0);
	ecw_config_free(cfg);
	out_of_range("max_dequeue_count", "0", "1..1000");
	out_of_range("max_dequeue_count", "1001", "1..1000");
	out_of_range("visibility_timeout", "0", "1s..168h");
	out_of_range("visibility_timeout", "999ms", "1s..168h");
	out_of_range("visibility_timeout", "169h", "1s..168h");
	out_of_range("visibility_timeout", "604801s", "1s..168h");
	out_of_range("shutdown_grace", "61m", "0..1h");
	out_of_range("shutdown_grace", "99999999999999999999h", "0..1h");
	out_of_range("message_ttl", "0", "-1 or 1s..596523h");
	out_of_range("message_ttl", "0s", "-1 or 1s..596523h");
	out_of_range("message_ttl", "596524h", "-1 or 1s..596523h");
	one_error("worker:\n  retry_backoff: {base: 500ms}\n", "2:25",
	          "worker.retry_backoff.base is out of range (1s..168h)");
	one_error("worker:\n  retry_backoff: {base: 0}\n", "2:25",
	          "worker.retry_backoff.base is out of range (1s..168h)");
	one_error("worker:\n  retry_backoff: {max: 169h}\n", "2:24",
	          "worker.retry_backoff.max is out of range (1s..168h)");
	one_error("worker:\n  poll_interval: {min: 0}\n", "2:24",
	          "worker.poll_interval.min is out of range (1ms..1h)");
	one_error("worker:\n  poll_interval: {max: 2h}\n", "2:24",
	          "worker.poll_interval.max is out of range (1ms..1h)");
}

static void test_config__bad_durations(void **state)
{
	(void)state;
	static const char *const bad[] = {"10x", "1.5s", "-1s", "s",     "10S",
	                                  "1d",  "5 s",  "+5s", "1h30m", "ms"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[128];
		snprintf(text, sizeof(text), "worker:\n  shutdown_grace: %s\n", bad[i]);
		one_error(text, "2:19",
		          "worker.shutdown_grace must be a duration like 250ms, 2s, 5m or 1h (0..1h)");
	}
	one_error("worker:\n  visibility_timeout: 1500ms\n", "2:23",
	          "worker.visibility_timeout must be a whole number of seconds (1s..168h)");
	one_error("worker:\n  message_ttl: 1500ms\n", "2:16",
	          "worker.message_ttl must be a whole number of seconds");
	one_error(
	    "worker:\n  message_ttl: -2\n", "2:16",
	    "worker.message_ttl must be -1 (never expire) or a duration like 30s, 5m or 1h (1s..596523h)");
	one_error("worker:\n  message_ttl: 10x\n", "2:16", "worker.message_ttl must be -1 (never expire)");
}

static void test_config__max_less_than_base(void **state)
{
	(void)state;
	one_error("worker:\n  retry_backoff: {base: 10s, max: 5s}\n", "2:35",
	          "worker.retry_backoff.max must not be less than base");
	/* Only base given, above the default max: the error is at base. */
	one_error("worker:\n  retry_backoff: {base: 10m}\n", "2:25",
	          "worker.retry_backoff.base is more than max (default 5m): set max");
	one_error("worker:\n  poll_interval:\n    min: 5s\n    max: 1s\n", "4:10",
	          "worker.poll_interval.max must not be less than min");
	one_error("worker:\n  poll_interval: {min: 20s}\n", "2:24",
	          "worker.poll_interval.min is more than max (default 10s): set max");
	/* Equal is fine. */
	struct ecw_config *cfg =
	    parse_ok("worker: {retry_backoff: {base: 1m, max: 60s}, poll_interval: {min: 1s, max: 1s}}\n");
	assert_int_equal(cfg->worker.retry_backoff_base_ms, 60000);
	assert_int_equal(cfg->worker.retry_backoff_max_ms, 60000);
	ecw_config_free(cfg);
}

/* worker.circuit and worker.stall_timeout: read, bounded, and the probe's
 * range ordered like the other ranges. */
static void test_config__circuit_and_stall_timeout(void **state)
{
	(void)state;
	struct ecw_config *cfg =
	    parse_ok("worker:\n  circuit: {failures: 0, probe_min: 250ms, probe_max: 2m}\n"
	             "  stall_timeout: 90s\n");
	assert_int_equal(cfg->worker.circuit_failures, 0);
	assert_int_equal(cfg->worker.circuit_probe_min_ms, 250);
	assert_int_equal(cfg->worker.circuit_probe_max_ms, 120000);
	assert_int_equal(cfg->worker.stall_timeout_ms, 90000);
	ecw_config_free(cfg);
	one_error("worker:\n  circuit: {failures: -1}\n", "2:23", "worker.circuit.failures");
	one_error("worker:\n  circuit: {probe_min: 1m}\n", "2:24",
	          "worker.circuit.probe_min is more than probe_max (default 30s): set probe_max");
	one_error("worker:\n  circuit: {probe_min: 2s, probe_max: 1s}\n", "2:39",
	          "worker.circuit.probe_max must not be less than probe_min");
	one_error("worker:\n  circuit: {probes: 1}\n", "2:13",
	          "unknown key 'probes' in worker.circuit (expected one of: failures, probe_min, probe_max)");
	one_error("worker:\n  stall_timeout: 30s\n", "2:18", "worker.stall_timeout");
	one_error("worker:\n  stall_timeout: 25h\n", "2:18", "worker.stall_timeout");
}

/* worker.concurrency_min: 1..concurrency. */
static void test_config__concurrency_min(void **state)
{
	(void)state;
	struct ecw_config *cfg = parse_ok("worker:\n  concurrency: 32\n  concurrency_min: 32\n");
	assert_int_equal(cfg->worker.concurrency_min, 32);
	ecw_config_free(cfg);
	one_error("worker:\n  concurrency: 8\n  concurrency_min: 9\n", "3:20",
	          "worker.concurrency_min must not be more than worker.concurrency (8)");
	one_error("worker:\n  concurrency_min: 0\n", "2:20", "worker.concurrency_min");
}

/* worker.control_poll and metrics.queue_refresh: read, 1s..10m. */
static void test_config__control_poll_and_queue_refresh(void **state)
{
	(void)state;
	struct ecw_config *cfg = parse_ok("worker:\n  control_poll: 3s\nmetrics:\n  queue_refresh: 1m\n");
	assert_int_equal(cfg->worker.control_poll_ms, 3000);
	assert_int_equal(cfg->metrics.queue_refresh_ms, 60000);
	ecw_config_free(cfg);
	one_error("worker:\n  control_poll: 500ms\n", "2:17", "worker.control_poll");
	one_error("worker:\n  control_poll: 11m\n", "2:17", "worker.control_poll");
	one_error("metrics:\n  queue_refresh: 0\n", "2:18", "metrics.queue_refresh");
	one_error("metrics:\n  queue_refresh: 1h\n", "2:18", "metrics.queue_refresh");
	one_error("metrics:\n  refresh: 1m\n", "2:3",
	          "unknown key 'refresh' in metrics (expected one of: listen, queue_refresh)");
}

/* worker.queues: weights and poison queues, or the one worker.queue. */
static void test_config__queues(void **state)
{
	(void)state;
	struct ecw_config *cfg = parse_ok("worker:\n  queues:\n    - {name: ecw-jobs, weight: 4}\n"
	                                  "    - {name: ecw-bulk, poison_queue: bulk-dead}\n");
	assert_int_equal(cfg->worker.nqueues, 2);
	assert_str(cfg->worker.queues[0].name, "ecw-jobs");
	assert_str(cfg->worker.queues[0].poison, "ecw-jobs-poison");
	assert_int_equal(cfg->worker.queues[0].weight, 4);
	assert_str(cfg->worker.queues[1].name, "ecw-bulk");
	assert_str(cfg->worker.queues[1].poison, "bulk-dead");
	assert_int_equal(cfg->worker.queues[1].weight, 1);
	assert_str(cfg->worker.queue, "ecw-jobs"); /* the first, for the commands */
	assert_str(cfg->worker.poison_queue, "ecw-jobs-poison");
	ecw_config_free(cfg);
	cfg = parse_ok("worker:\n  queue: only-one\n");
	assert_int_equal(cfg->worker.nqueues, 1);
	assert_str(cfg->worker.queues[0].name, "only-one");
	assert_str(cfg->worker.queues[0].poison, "only-one-poison");
	assert_int_equal(cfg->worker.queues[0].weight, 1);
	ecw_config_free(cfg);

	one_error("worker:\n  queue: a-b\n  queues: [{name: c-d}]\n", "3:11",
	          "worker.queues replaces worker.queue and worker.poison_queue");
	one_error("worker:\n  queues: []\n", "2:11", "worker.queues must be a list of 1 to 8 queues");
	one_error("worker:\n  queues: {name: a-b}\n", "2:11", "worker.queues must be a list");
	one_error("worker:\n  queues: [q-1, q-2]\n", "2:12", "worker.queues[0] must be a map");
	one_error("worker:\n  queues: [{weight: 2}]\n", "2:12", "name");
	one_error("worker:\n  queues: [{name: Bad_Name}]\n", "2:19",
	          "worker.queues[0].name is not a valid queue name");
	one_error("worker:\n  queues: [{name: a-b, weight: 0}]\n", "2:32", "worker.queues[0].weight");
	one_error("worker:\n  queues: [{name: a-b, weight: 101}]\n", "2:32", "worker.queues[0].weight");
	one_error("worker:\n  queues: [{name: a-b, priority: 1}]\n", "2:24",
	          "unknown key 'priority' in worker.queues[0]");
	one_error("worker:\n  queues: [{name: a-b}, {name: a-b}]\n", "2:12", "is used twice");
	one_error("worker:\n  queues: [{name: a-b}, {name: c-d, poison_queue: a-b}]\n", "2:12",
	          "is used twice");
	one_error("worker:\n  queues: [{name: a-b, poison_queue: a-b}]\n", "2:12", "is used twice");
	one_error("worker:\n  queues: [{name: a}, {name: b}, {name: c}, {name: d}, {name: e}, {name: f}, "
	          "{name: g}, {name: h}, {name: i}]\n",
	          "2:11", "worker.queues must be a list of 1 to 8 queues");
}

static void test_config__bad_queue_name(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "Jobs", "ab",   "a--b",
	    "-abc", "abc-", "a_bc",
	    "a.bc", "\"\"", "a123456789012345678901234567890123456789012345678901234567890123" /* 64 */};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[160];
		snprintf(text, sizeof(text), "worker:\n  queue: %s\n", bad[i]);
		one_error(text, "2:10",
		          "worker.queue is not a valid queue name (3-63 lowercase letters, digits and single "
		          "dashes, "
		          "starting and ending with a letter or digit)");
		snprintf(text, sizeof(text), "worker:\n  poison_queue: %s\n", bad[i]);
		one_error(text, "2:17", "worker.poison_queue is not a valid queue name (3-63 lowercase");
	}
	/* 63 characters is fine, but then <queue>-poison is too long. */
	one_error(
	    "worker:\n  queue: a12345678901234567890123456789012345678901234567890123456789012\n", "2:10",
	    "worker.queue is too long for the default poison queue <queue>-poison (at most 63 characters): "
	    "set worker.poison_queue");
	struct ecw_config *cfg =
	    parse_ok("worker:\n  queue: a12345678901234567890123456789012345678901234567890123456789012\n"
	             "  poison_queue: a-b-c-1\n");
	assert_int_equal(strlen(cfg->worker.queue), 63);
	assert_str(cfg->worker.poison_queue, "a-b-c-1");
	ecw_config_free(cfg);
}

static void test_config__poison_equals_queue(void **state)
{
	(void)state;
	one_error("worker:\n  queue: orders\n  poison_queue: orders\n", "3:17",
	          "worker.poison_queue must differ from worker.queue");
	/* Against the default queue too. */
	one_error("worker:\n  poison_queue: ecw-jobs\n", "2:17",
	          "worker.poison_queue must differ from worker.queue");
}

static void test_config__bad_listen(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "9464",         "localhost",      "127.0.0.1:",     ":9464",        "127.0.0.1:65536",
	    "127.0.0.1:-1", "127.0.0.1:94a4", "::1:9464",       "[::1]9464",    "[::1:9464",
	    "[]:9464",      "[nothost]:9464", "example.com:80", "300.1.1.1:80", "127.0.0.1:123456",
	    "127.0.0.1:80 "};
	static const char *const good[] = {"",           "127.0.0.1:9464", "0.0.0.0:0",
	                                   "[::1]:9464", "[::]:65535",     "localhost:9464"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[128];
		snprintf(text, sizeof(text), "metrics:\n  listen: \"%s\"\n", bad[i]);
		one_error(
		    text, "2:11",
		    "metrics.listen must be \"\" (disabled) or host:port, with host an IPv4 address, [IPv6 "
		    "address] or localhost and port 0..65535");
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char text[128];
		snprintf(text, sizeof(text), "metrics:\n  listen: \"%s\"\n", good[i]);
		struct ecw_config *cfg = parse_ok(text);
		assert_str(cfg->metrics.listen, good[i]);
		ecw_config_free(cfg);
	}
	/* A plain 9464 is read as the text "9464": still not host:port. */
	one_error("metrics: {listen: 9464}\n", "1:19", "metrics.listen must be \"\" (disabled) or host:port");
}

static void test_config__bad_connection_string(void **state)
{
	(void)state;
	one_error("storage:\n  connection_string: \"\"\n", "2:22",
	          "storage.connection_string: connection string is empty");
	one_error("storage:\n  connection_string: UseDevelopmentStorage=false\n", "2:22",
	          "storage.connection_string: connection string: UseDevelopmentStorage must be 'true'");
	/* From the environment when the file does not say: at the file start. */
	setenv("AZURE_STORAGE_CONNECTION_STRING", "garbage", 1);
	one_error("worker: {}\n", "1:1",
	          "storage.connection_string (not set, so $AZURE_STORAGE_CONNECTION_STRING):");
	unsetenv("AZURE_STORAGE_CONNECTION_STRING");
}

/* ---- storage.auth ----------------------------------------------------------- */

#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#define HTTPS_ENDPOINTS                                                                                      \
	"QueueEndpoint=https://127.0.0.1:10001/devstoreaccount1;TableEndpoint=https://127.0.0.1:10002/devstoreaccount1"

static void test_config__auth_default_is_key(void **state)
{
	struct ecw_config *cfg = parse_ok("storage: {connection_string: UseDevelopmentStorage=true}\n");
	(void)state;

	assert_int_equal(cfg->storage.auth, ECW_AUTH_KEY);
	assert_null(cfg->storage.account);
	assert_null(cfg->storage.ca_file);
	assert_null(cfg->storage.managed_identity_client_id);
	ecw_config_free(cfg);
}

static void test_config__auth_identity_by_account(void **state)
{
	struct ecw_config *cfg;
	(void)state;

	cfg = parse_ok("storage: {auth: workload-identity, account: myacct01}\n");
	assert_int_equal(cfg->storage.auth, ECW_AUTH_WORKLOAD_IDENTITY);
	assert_str(cfg->storage.account, "myacct01");
	/* The default connection string (a key's) is not kept. */
	assert_null(cfg->storage.connection_string);
	ecw_config_free(cfg);
	cfg = parse_ok("storage:\n  auth: managed-identity\n  account: myacct01\n"
	               "  managed_identity_client_id: 0c4bd8c5-6a1e-4b8e-8f2b-5d1e6b9a3c21\n"
	               "  ca_file: config/ecworker.yaml\n");
	assert_int_equal(cfg->storage.auth, ECW_AUTH_MANAGED_IDENTITY);
	assert_str(cfg->storage.managed_identity_client_id, "0c4bd8c5-6a1e-4b8e-8f2b-5d1e6b9a3c21");
	assert_str(cfg->storage.ca_file, "config/ecworker.yaml");
	ecw_config_free(cfg);
}

static void test_config__auth_identity_by_endpoints(void **state)
{
	struct ecw_config *cfg;
	(void)state;

	cfg = parse_ok("storage:\n  auth: workload-identity\n  connection_string: \"" HTTPS_ENDPOINTS "\"\n");
	assert_str(cfg->storage.connection_string, HTTPS_ENDPOINTS);
	assert_null(cfg->storage.account);
	ecw_config_free(cfg);
	/* A sovereign cloud by name and suffix. */
	cfg = parse_ok("storage:\n  auth: managed-identity\n"
	               "  connection_string: AccountName=acct;EndpointSuffix=core.chinacloudapi.cn\n");
	ecw_config_free(cfg);
}

static void test_config__auth_errors(void **state)
{
	struct ecw_node_errors errs;
	(void)state;

	one_error("storage: {auth: oauth}\n", "1:17",
	          "storage.auth must be one of: key, workload-identity, managed-identity");
	one_error(
	    "storage:\n  auth: workload-identity\n", "2:9",
	    "storage.auth: workload-identity needs storage.account, or a storage.connection_string with only "
	    "QueueEndpoint and TableEndpoint");
	one_error(
	    "storage:\n  auth: managed-identity\n  account: acct\n  connection_string: \"" HTTPS_ENDPOINTS
	    "\"\n",
	    "3:12", "storage.account and storage.connection_string both name the account: give one");
	one_error("storage: {auth: workload-identity, account: My_Account}\n", "1:45",
	          "storage.account must be 3-24 lowercase letters and digits");
	one_error("storage: {auth: workload-identity, account: ab}\n", "1:45",
	          "3-24 lowercase letters and digits");
	/* A key with an identity is a mistake, said without the key. */
	parse_bad(
	    &errs,
	    "storage:\n  auth: workload-identity\n  connection_string: \"AccountName=devstoreaccount1;AccountKey=" DEV_KEY
	    ";" HTTPS_ENDPOINTS "\"\n",
	    1);
	error_is(&errs, 0, "3:22", "AccountKey cannot be used with token authentication");
	assert_false(str_contains(errs.lines[0], DEV_KEY));
	ecw_node_errors_dispose(&errs);
	one_error("storage:\n  auth: managed-identity\n  connection_string: \"" HTTPS_ENDPOINTS
	          ";SharedAccessSignature=sv=2019-02-02&sig=abc\"\n",
	          "3:22", "SharedAccessSignature cannot be used with token authentication");
	one_error("storage:\n  auth: managed-identity\n  connection_string: UseDevelopmentStorage=true\n",
	          "3:22", "UseDevelopmentStorage cannot be used with token authentication");
	/* A bearer token never travels over http. */
	one_error("storage:\n  auth: workload-identity\n  connection_string: "
	          "\"QueueEndpoint=http://127.0.0.1:1/a;TableEndpoint=https://127.0.0.1:2/a\"\n",
	          "3:22", "with token authentication every endpoint must be https://");
	/* Options of one mode in another. */
	one_error("storage: {account: acct}\n", "1:20",
	          "storage.account is for auth: workload-identity or managed-identity");
	one_error(
	    "storage: {auth: workload-identity, account: acct, managed_identity_client_id: x}\n", "1:79",
	    "storage.managed_identity_client_id is for auth: managed-identity (workload identity takes its "
	    "client id from AZURE_CLIENT_ID)");
	/* With a bad mode, nothing else is judged by a guess. */
	one_error("storage: {auth: Key, connection_string: \"" HTTPS_ENDPOINTS "\"}\n", "1:17",
	          "storage.auth must be one of");
}

static void test_config__key_auth_endpoints_only_hints_at_identity(void **state)
{
	(void)state;
	one_error("storage:\n  connection_string: \"" HTTPS_ENDPOINTS "\"\n", "2:22",
	          "needs AccountKey or SharedAccessSignature (or UseDevelopmentStorage=true); for Entra ID "
	          "authentication set storage.auth (workload-identity or managed-identity)");
}

static void test_config__ca_file_must_be_readable(void **state)
{
	(void)state;
	one_error("storage: {ca_file: /nonexistent/ca.pem}\n", "1:20",
	          "storage.ca_file: cannot read /nonexistent/ca.pem: No such file or directory");
	one_error("storage: {ca_file: \"\"}\n", "1:20", "storage.ca_file: cannot read");
}

/* ---- collecting ------------------------------------------------------------ */

static void test_config__errors_collected(void **state)
{
	(void)state;
	struct ecw_node_errors errs;
	parse_bad(&errs,
	          "jobs:\n"                                /* 1 */
	          "  x: {type: nope}\n"                    /* 2 */
	          "metrics: {listen: nope}\n"              /* 3 */
	          "worker:\n"                              /* 4 */
	          "  queue: BAD\n"                         /* 5 */
	          "  batch_size: 0\n"                      /* 6 */
	          "  concurrency: many\n"                  /* 7 */
	          "  visibility_timeout: 10x\n"            /* 8 */
	          "  retry_backoff: {base: 5m, max: 1m}\n" /* 9 */
	          "  create_missing: 2\n"                  /* 10 */
	          "  colour: blue\n"                       /* 11 */
	          "log: {level: loud, format: xml}\n"      /* 12 */
	          "extra: 1\n",                            /* 13 */
	          12);
	/* In file order, whatever order the checks ran in. */
	error_is(&errs, 0, "2:13", "jobs.x.type is not a known job type (expected one of: ");
	error_is(&errs, 1, "3:19", "metrics.listen must be");
	error_is(&errs, 2, "5:10", "worker.queue is not a valid queue name");
	error_is(&errs, 3, "6:15", "worker.batch_size is out of range (1..32)");
	error_is(&errs, 4, "7:16", "worker.concurrency must be an integer (1..256)");
	error_is(&errs, 5, "8:23", "worker.visibility_timeout must be a duration");
	error_is(&errs, 6, "9:34", "worker.retry_backoff.max must not be less than base");
	error_is(&errs, 7, "10:19", "worker.create_missing must be true or false");
	error_is(&errs, 8, "11:3", "unknown key 'colour' in worker");
	error_is(&errs, 9, "12:14", "log.level must be one of");
	error_is(&errs, 10, "12:28", "log.format must be one of");
	error_is(&errs, 11, "13:1", "unknown key 'extra' in the top level");
	ecw_node_errors_dispose(&errs);
}

static void test_config__errors_appended(void **state)
{
	(void)state;
	/* The list is the caller's: a second parse adds to it. */
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;
	parse_bad(&errs, "x: 1\n", 1);
	assert_int_equal(ecw_config_parse(&cfg, "y: 1\n", 5, "u.yaml", &errs), ECW_EINVALID);
	assert_int_equal(errs.n, 2);
	assert_true(str_starts(errs.lines[1], "u.yaml:1:1: unknown key 'y'"));
	/* A good parse leaves it alone and succeeds. */
	assert_int_equal(ecw_config_parse(&cfg, "{}", 2, "v.yaml", &errs), 0);
	assert_int_equal(errs.n, 2);
	ecw_config_free(cfg);
	ecw_node_errors_dispose(&errs);
	ecw_node_errors_dispose(&errs); /* twice is fine */
	ecw_node_errors_dispose(NULL);
	ecw_config_free(NULL);
}

/* ---- secrets ------------------------------------------------------------------ */

static void test_config__secret_never_in_errors(void **state)
{
	(void)state;
	struct ecw_node_errors errs;
	setenv("ECW_T_SECRET", SECRET, 1);
	parse_bad(&errs,
	          "storage: {connection_string: \"${ECW_T_SECRET}\"}\n"
	          "worker:\n"
	          "  queue: ${ECW_T_SECRET}\n"
	          "  poison_queue: \"${ECW_T_SECRET}\"\n"
	          "  batch_size: ${ECW_T_SECRET}\n"
	          "  concurrency: \"${ECW_T_SECRET}\"\n"
	          "  visibility_timeout: ${ECW_T_SECRET}\n"
	          "  retry_backoff:\n    base: '${ECW_T_SECRET}'\n    max: ${ECW_T_SECRET}\n"
	          "  message_ttl: ${ECW_T_SECRET}\n"
	          "  create_missing: ${ECW_T_SECRET}\n"
	          "log:\n  level: ${ECW_T_SECRET}\n  format: ${ECW_T_SECRET}\n"
	          "metrics:\n  listen: ${ECW_T_SECRET}\n"
	          "jobs:\n"
	          "  a:\n    type: ${ECW_T_SECRET}\n"
	          "  b:\n    type: test-flaky\n    fail_times: ${ECW_T_SECRET}\n    table: ${ECW_T_SECRET}\n"
	          "  c: {type: test-noop, other: \"${ECW_T_SECRET}\"}\n",
	          16);
	for (size_t i = 0; i < errs.n; i++) {
		if (str_contains(errs.lines[i], SECRET) || str_contains(errs.lines[i], "SeCrEt") ||
		    str_contains(errs.lines[i], "Zq7"))
			fail_msg("error line leaks the secret: %s", errs.lines[i]);
	}
	ecw_node_errors_dispose(&errs);
	/* The job types' own settings (found by fuzz_config: on_delete, a
	 * fanout's source fields, a fanout's filter and template names quoted
	 * the value). */
	setenv("ECW_T_SECRET_NAME", "Zq7-" SECRET, 1);
	parse_bad(&errs,
	          "storage: {connection_string: UseDevelopmentStorage=true}\n"
	          "jobs:\n"
	          "  f:\n    type: fanout\n    source: Customers\n    table: Orders\n"
	          "    filter: \"PartitionKey eq '{${ECW_T_SECRET}}'\"\n"
	          "    fields: {A: \"${ECW_T_SECRET_NAME}\"}\n"
	          "    on_delete: ${ECW_T_SECRET}\n"
	          "  g:\n    type: fanout\n    source: Customers\n    table: Orders\n"
	          "    filter: \"PartitionKey eq '{${ECW_T_SECRET}}'\"\n"
	          "    fields: {A: Name}\n    on_delete: clear\n"
	          "  i:\n    type: index\n    source: Employees\n    table: ByEmail\n"
	          "    partition_key: \"{${ECW_T_SECRET_NAME}}\"\n    row_key: \"{RowKey}\"\n",
	          4);
	for (size_t i = 0; i < errs.n; i++) {
		if (str_contains(errs.lines[i], SECRET) || str_contains(errs.lines[i], "SeCrEt") ||
		    str_contains(errs.lines[i], "Zq7"))
			fail_msg("error line leaks the secret: %s", errs.lines[i]);
	}
	ecw_node_errors_dispose(&errs);
	unsetenv("ECW_T_SECRET_NAME");
	unsetenv("ECW_T_SECRET");
}

/* ---- files ------------------------------------------------------------------ */

static void test_config__default_path(void **state)
{
	(void)state;
	unsetenv("ECW_CONFIG");
	assert_str(ecw_config_default_path(), "./ecworker.yaml");
	setenv("ECW_CONFIG", "", 1);
	assert_str(ecw_config_default_path(), "./ecworker.yaml");
	setenv("ECW_CONFIG", "/etc/ecworker/prod.yaml", 1);
	assert_str(ecw_config_default_path(), "/etc/ecworker/prod.yaml");
	unsetenv("ECW_CONFIG");
}

static void test_config__shipped_file(void **state)
{
	(void)state;
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;
	int err;

	ecw_node_errors_init(&errs);
	err = ecw_config_load(&cfg, "config/ecworker.yaml", &errs);
	if (err != 0) {
		config_dump(&errs);
		fail_msg("config/ecworker.yaml: %s (run from the repo root)", ecw_error_name(err));
	}
	assert_int_equal(errs.n, 0);
	assert_str(cfg->file, "config/ecworker.yaml");
	/* The documented values are the defaults. */
	free(cfg->file);
	cfg->file = strdup(FILE_NAME);
	assert_defaults(cfg);
	ecw_config_free(cfg);
	ecw_node_errors_dispose(&errs);
}

static void test_config__load_errors(void **state)
{
	(void)state;
	struct ecw_node_errors errs;
	struct ecw_config *cfg = (struct ecw_config *)1;
	char dir[] = "/tmp/ecw-test-config-......", path[256];
	FILE *f;

	ecw_node_errors_init(&errs);
	assert_int_equal(ecw_config_load(&cfg, "/nonexistent/ecw.yaml", &errs), ECW_EINVALID);
	assert_null(cfg);
	assert_int_equal(errs.n, 1);
	assert_str(errs.lines[0], "/nonexistent/ecw.yaml: cannot read: No such file or directory");

	memset(strchr(dir, '.'), 'X', 6); /* mkdtemp's template: six of them at the end */
	assert_non_null(mkdtemp(dir));
	assert_int_equal(ecw_config_load(&cfg, dir, &errs), ECW_EINVALID);
	assert_int_equal(errs.n, 2);
	assert_true(str_contains(errs.lines[1], ": cannot read: Is a directory"));

	/* Over 1 MiB. */
	snprintf(path, sizeof(path), "%s/big.yaml", dir);
	assert_non_null(f = fopen(path, "w"));
	for (int i = 0; i < 1100; i++)
		fprintf(f, "# %01020d\n", i);
	fclose(f);
	assert_int_equal(ecw_config_load(&cfg, path, &errs), ECW_EINVALID);
	assert_int_equal(errs.n, 3);
	assert_true(str_contains(errs.lines[2], "big.yaml: cannot read: larger than 1048576 bytes"));
	unlink(path);

	/* A file's errors carry its path. */
	snprintf(path, sizeof(path), "%s/bad.yaml", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("worker:\n  batch_size: 40\n", f);
	fclose(f);
	assert_int_equal(ecw_config_load(&cfg, path, &errs), ECW_EINVALID);
	assert_int_equal(errs.n, 4);
	char want[400];
	snprintf(want, sizeof(want), "%s:2:15: worker.batch_size is out of range (1..32)", path);
	assert_str(errs.lines[3], want);
	unlink(path);
	rmdir(dir);
	ecw_node_errors_dispose(&errs);
}

/* ---- jobs ----------------------------------------------------------------------- */

static void test_config__jobs(void **state)
{
	(void)state;
	struct ecw_config *cfg = parse_ok("jobs:\n"
	                                  "  welcome: {type: test-noop}\n"
	                                  "  Sync_Payroll-2:\n"
	                                  "    type: test-flaky\n"
	                                  "    fail_times: 3\n"
	                                  "    table: attempts\n"
	                                  "  c: {type: test-count, table: runs}\n");
	assert_int_equal(cfg->njobs, 3);
	assert_str(cfg->jobs[0].name, "welcome");
	assert_ptr_equal(cfg->jobs[0].type, ecw_job_type_find("test-noop"));
	assert_str(cfg->jobs[1].name, "Sync_Payroll-2");
	assert_str(cfg->jobs[1].type->name, "test-flaky");
	assert_non_null(cfg->jobs[1].settings);
	assert_str(cfg->jobs[2].name, "c");
	assert_ptr_equal(ecw_config_job(cfg, "Sync_Payroll-2"), &cfg->jobs[1]);
	assert_ptr_equal(ecw_config_job(cfg, "c"), &cfg->jobs[2]);
	assert_null(ecw_config_job(cfg, "sync_payroll-2"));
	ecw_config_free(cfg); /* frees each job's settings: the sanitizer build checks */
}

static void test_config__jobs_errors(void **state)
{
	(void)state;
	struct ecw_node_errors errs;
	char want[512];
	struct ecw_buf names;

	/* The unknown-type message lists every registered type. */
	ecw_buf_init(&names, 0);
	for (const char *const *n = ecw_job_type_names(); *n; n++)
		assert_int_equal(ecw_buf_printf(&names, "%s%s", names.len ? ", " : "", *n), 0);
	snprintf(want, sizeof(want), "jobs.a.type is not a known job type (expected one of: %s)",
	         ecw_buf_cstr(&names));
	one_error("jobs:\n  a: {type: mvoe}\n", "2:13", want);
	ecw_buf_dispose(&names);

	one_error("jobs:\n  a: {table: x}\n", "2:6", "jobs.a: missing required key 'type' (a job type)");
	one_error("jobs:\n  a:\n", "2:5", "jobs.a must be a map with at least a 'type', not nothing");
	one_error("jobs:\n  a: test-noop\n", "2:6",
	          "jobs.a must be a map with at least a 'type', not a value");
	one_error("jobs:\n  a: {type: [x]}\n", "2:13", "jobs.a.type must be a job type, not a list");
	one_error("jobs:\n  bad.name: {type: test-noop}\n", "2:3",
	          "job name 'bad.name' must be 1-63 letters, digits, '-' or '_'");
	one_error("jobs:\n  '': {type: test-noop}\n", "2:3", "job name '' must be 1-63");
	one_error(
	    "jobs:\n  a1234567890123456789012345678901234567890123456789012345678901234: {type: test-noop}\n",
	    "2:3", "must be 1-63 letters");
	/* The type's own checks, through the readers. */
	one_error("jobs:\n  a: {type: test-noop, table: t}\n", "2:24", "unknown key 'table' in test job");
	one_error("jobs:\n  a: {type: test-flaky, fail_times: 101}\n", "2:37",
	          "fail_times is out of range (0..100)");
	one_error("jobs:\n  a: {type: test-count}\n", "2:6", "missing required key 'table'");
	/* Several jobs, each with its problem, and a good one between. */
	parse_bad(&errs,
	          "jobs:\n  a: {type: nope}\n  b: {type: test-noop}\n  c: {type: test-sleep, duration: 2x}\n",
	          2);
	error_is(&errs, 0, "2:13", "jobs.a.type is not a known job type");
	error_is(&errs, 1, "4:35", "duration must be a duration");
	ecw_node_errors_dispose(&errs);
}

/* ---- then: chaining ----------------------------------------------------------------- */

/* A NULL-terminated list equal to want (NULL-terminated). */
static void assert_strv(char *const *got, const char *const *want)
{
	size_t i = 0;

	assert_non_null(got);
	for (; want[i]; i++) {
		if (!got[i])
			fail_msg("list ends after %zu entries, expected '%s' next", i, want[i]);
		assert_str(got[i], want[i]);
	}
	if (got[i])
		fail_msg("list has more than %zu entries: '%s'", i, got[i]);
}

static void test_config__then_filled(void **state)
{
	(void)state;
	struct ecw_config *cfg = parse_ok("jobs:\n"
	                                  "  archive: {type: test-noop, then: [drop-email, note]}\n"
	                                  "  drop-email: {type: test-noop, then: [note]}\n"
	                                  "  note: {type: test-count, table: runs}\n"
	                                  "  empty: {type: test-noop, then: []}\n"
	                                  "  nothing:\n"
	                                  "    type: test-noop\n"
	                                  "    then:\n"
	                                  "  block:\n"
	                                  "    type: test-noop\n"
	                                  "    then:\n"
	                                  "      - note\n"
	                                  "      - 'drop-email'\n");
	assert_int_equal(cfg->njobs, 6);
	assert_strv(ecw_config_job(cfg, "archive")->then, (const char *const[]){"drop-email", "note", NULL});
	assert_strv(ecw_config_job(cfg, "drop-email")->then, (const char *const[]){"note", NULL});
	/* No then, an empty list and a key with nothing under it: all NULL. */
	assert_null(ecw_config_job(cfg, "note")->then);
	assert_null(ecw_config_job(cfg, "empty")->then);
	assert_null(ecw_config_job(cfg, "nothing")->then);
	assert_strv(ecw_config_job(cfg, "block")->then, (const char *const[]){"note", "drop-email", NULL});
	ecw_config_free(cfg); /* frees the lists: the sanitizer build checks */
}

/* A job may be a follow-up of several jobs, and a chain may be long: only a
 * way back is a cycle. */
static void test_config__then_diamond_is_not_a_cycle(void **state)
{
	(void)state;
	struct ecw_config *cfg = parse_ok("jobs:\n"
	                                  "  a: {type: test-noop, then: [b, c]}\n"
	                                  "  b: {type: test-noop, then: [d]}\n"
	                                  "  c: {type: test-noop, then: [d, d]}\n"
	                                  "  d: {type: test-noop, then: [e]}\n"
	                                  "  e: {type: test-noop}\n");
	assert_strv(ecw_config_job(cfg, "c")->then, (const char *const[]){"d", "d", NULL});
	ecw_config_free(cfg);
}

static void test_config__then_unknown_job(void **state)
{
	(void)state;
	struct ecw_node_errors errs;

	/* At the then node (the list), naming the job and the missing name. */
	one_error("jobs:\n  a: {type: test-noop, then: [b, nope]}\n  b: {type: test-noop}\n", "2:30",
	          "jobs.a.then names 'nope', which is not a configured job");
	one_error("jobs:\n"
	          "  a:\n"
	          "    type: test-noop\n"
	          "    then:\n"
	          "      - nope\n",
	          "5:7", "jobs.a.then names 'nope', which is not a configured job");
	/* Names are case-sensitive, like job names in messages. */
	one_error("jobs:\n  a: {type: test-noop, then: [B]}\n  b: {type: test-noop}\n", "2:30",
	          "jobs.a.then names 'B'");
	/* Two unknown names: two errors. */
	parse_bad(&errs, "jobs:\n  a: {type: test-noop, then: [x, y]}\n", 2);
	error_is(&errs, 0, "2:30", "names 'x'");
	error_is(&errs, 1, "2:30", "names 'y'");
	ecw_node_errors_dispose(&errs);
}

static void test_config__then_wrong_type(void **state)
{
	(void)state;
	one_error("jobs:\n  a: {type: test-noop, then: b}\n  b: {type: test-noop}\n", "2:30",
	          "then must be a list of strings, not a value");
	one_error("jobs:\n  a: {type: test-noop, then: {b: 1}}\n  b: {type: test-noop}\n", "2:30",
	          "then must be a list of strings, not a map");
	one_error("jobs:\n  a: {type: test-noop, then: [[b]]}\n  b: {type: test-noop}\n", "2:31",
	          "then[0] must be a string, not a list");
	one_error("jobs:\n  a: {type: test-noop, then: [b, ~]}\n  b: {type: test-noop}\n", "2:34",
	          "then[1] must be a string, not null");
}

static void test_config__then_cycles(void **state)
{
	(void)state;
	struct ecw_node_errors errs;

	/* A job that follows itself. */
	one_error("jobs:\n  a: {type: test-noop, then: [a]}\n", "2:30",
	          "jobs.a.then leads back to itself: a cycle would enqueue forever");
	/* a -> b -> a: both jobs are on the cycle. */
	parse_bad(&errs,
	          "jobs:\n"
	          "  a: {type: test-noop, then: [b]}\n"
	          "  b:\n"
	          "    type: test-noop\n"
	          "    then: [a]\n",
	          2);
	error_is(&errs, 0, "2:30", "jobs.a.then leads back to itself");
	error_is(&errs, 1, "5:11", "jobs.b.then leads back to itself");
	ecw_node_errors_dispose(&errs);
	/* A longer way round, behind a good branch. */
	parse_bad(&errs,
	          "jobs:\n"
	          "  a: {type: test-noop, then: [ok, b]}\n"
	          "  ok: {type: test-noop}\n"
	          "  b: {type: test-noop, then: [c]}\n"
	          "  c: {type: test-noop, then: [a]}\n",
	          3);
	error_is(&errs, 0, "2:30", "jobs.a.then leads back");
	error_is(&errs, 1, "4:30", "jobs.b.then leads back");
	error_is(&errs, 2, "5:30", "jobs.c.then leads back");
	ecw_node_errors_dispose(&errs);
}

/* A job that only leads INTO a cycle does not lead back to itself: the
 * error belongs to the jobs on the cycle, and saying "jobs.x.then leads back
 * to itself" about x sends the reader to the wrong place. */
static void test_config__then_cycle_blamed_on_its_members_only(void **state)
{
	(void)state;
	static const char text[] = "jobs:\n"
	                           "  x: {type: test-noop, then: [a]}\n"
	                           "  a: {type: test-noop, then: [a]}\n";
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;
	char first[256] = "", second[256] = "";
	size_t n;

	/* Collected, freed, then judged: a failure here leaks nothing. */
	ecw_node_errors_init(&errs);
	assert_int_equal(ecw_config_parse(&cfg, text, strlen(text), FILE_NAME, &errs), ECW_EINVALID);
	n = errs.n;
	if (n > 0)
		snprintf(first, sizeof(first), "%s", errs.lines[0]);
	if (n > 1)
		snprintf(second, sizeof(second), "%s", errs.lines[1]);
	ecw_node_errors_dispose(&errs);
	assert_null(cfg);
	if (n != 1 || !str_starts(first, FILE_NAME ":3:30: ") ||
	    !str_contains(first, "jobs.a.then leads back"))
		fail_msg("%zu error(s), expected only \"" FILE_NAME
		         ":3:30: jobs.a.then leads back to itself...\"; "
		         "got \"%s\" and \"%s\"",
		         n, first, second);
}

/* A job's table named "tables" is refused by check-config with the storage
 * API's rule (ecw_table_name_valid, ECW_TABLE_NAME_RULE), at the value, as
 * the client would refuse it at start; the value itself is not shown (it may
 * come from a ${VAR}). */
static void test_config__job_table_reserved_name(void **state)
{
	(void)state;
	static const char *const names[] = {"tables", "Tables", "TABLES"};
	char text[256], needle[160];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(text, sizeof(text),
		         "jobs:\n  i:\n    type: index\n    source: Employees\n    table: %s\n"
		         "    partition_key: \"{Email}\"\n    row_key: \"{RowKey}\"\n",
		         names[i]);
		snprintf(needle, sizeof(needle), "table: invalid table name: a table name is %s",
		         ECW_TABLE_NAME_RULE);
		one_error(text, "5:12", needle);
	}
}

/* A table name from a ${VAR} that breaks the rule is refused without its
 * value in the error line (found by fuzz_config: the value may be a secret). */
static void test_config__table_name_error_hides_the_value(void **state)
{
	(void)state;
	struct ecw_node_errors errs;

	setenv("ECW_TEST_TABLE_VALUE", "Not A Table Zq7Hidden", 1);
	parse_bad(&errs,
	          "jobs:\n  i:\n    type: index\n    source: ${ECW_TEST_TABLE_VALUE}\n    table: Index\n"
	          "    partition_key: \"{Email}\"\n    row_key: \"{RowKey}\"\n",
	          1);
	error_is(&errs, 0, "4:13", "source: invalid table name: a table name is " ECW_TABLE_NAME_RULE);
	assert_null(strstr(errs.lines[0], "Zq7Hidden"));
	ecw_node_errors_dispose(&errs);
	unsetenv("ECW_TEST_TABLE_VALUE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_config__defaults_empty_file, setup),
	    cmocka_unit_test_setup(test_config__defaults_empty_map, setup),
	    cmocka_unit_test_setup(test_config__default_connection_string_from_env, setup),
	    cmocka_unit_test_setup(test_config__every_key_set, setup),
	    cmocka_unit_test_setup(test_config__request_timeout, setup),
	    cmocka_unit_test_setup(test_config__unknown_key_top_level, setup),
	    cmocka_unit_test_setup(test_config__pipelining, setup),
	    cmocka_unit_test_setup(test_config__unknown_key_nested, setup),
	    cmocka_unit_test_setup(test_config__wrong_type, setup),
	    cmocka_unit_test_setup(test_config__out_of_range, setup),
	    cmocka_unit_test_setup(test_config__bad_durations, setup),
	    cmocka_unit_test_setup(test_config__max_less_than_base, setup),
	    cmocka_unit_test_setup(test_config__circuit_and_stall_timeout, setup),
	    cmocka_unit_test_setup(test_config__control_poll_and_queue_refresh, setup),
	    cmocka_unit_test_setup(test_config__queues, setup),
	    cmocka_unit_test_setup(test_config__concurrency_min, setup),
	    cmocka_unit_test_setup(test_config__bad_queue_name, setup),
	    cmocka_unit_test_setup(test_config__poison_equals_queue, setup),
	    cmocka_unit_test_setup(test_config__bad_listen, setup),
	    cmocka_unit_test_setup(test_config__bad_connection_string, setup),
	    cmocka_unit_test_setup(test_config__auth_default_is_key, setup),
	    cmocka_unit_test_setup(test_config__auth_identity_by_account, setup),
	    cmocka_unit_test_setup(test_config__auth_identity_by_endpoints, setup),
	    cmocka_unit_test_setup(test_config__auth_errors, setup),
	    cmocka_unit_test_setup(test_config__key_auth_endpoints_only_hints_at_identity, setup),
	    cmocka_unit_test_setup(test_config__ca_file_must_be_readable, setup),
	    cmocka_unit_test_setup(test_config__errors_collected, setup),
	    cmocka_unit_test_setup(test_config__errors_appended, setup),
	    cmocka_unit_test_setup(test_config__secret_never_in_errors, setup),
	    cmocka_unit_test_setup(test_config__default_path, setup),
	    cmocka_unit_test_setup(test_config__shipped_file, setup),
	    cmocka_unit_test_setup(test_config__load_errors, setup),
	    cmocka_unit_test_setup(test_config__jobs, setup),
	    cmocka_unit_test_setup(test_config__jobs_errors, setup),
	    cmocka_unit_test_setup(test_config__then_filled, setup),
	    cmocka_unit_test_setup(test_config__then_diamond_is_not_a_cycle, setup),
	    cmocka_unit_test_setup(test_config__then_unknown_job, setup),
	    cmocka_unit_test_setup(test_config__then_wrong_type, setup),
	    cmocka_unit_test_setup(test_config__then_cycles, setup),
	    cmocka_unit_test_setup(test_config__then_cycle_blamed_on_its_members_only, setup),
	    cmocka_unit_test_setup(test_config__job_table_reserved_name, setup),
	    cmocka_unit_test_setup(test_config__table_name_error_hides_the_value, setup),
	};
	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
