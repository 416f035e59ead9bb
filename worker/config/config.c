/* SPDX-License-Identifier: MIT */
/* config.c - the worker's configuration (see ecw_config.h): the schema of
 * the file's sections, read from the node tree (worker/yaml/node.c) with its typed
 * readers. Every problem is collected as "FILE:LINE:COL: message" and the
 * list is put in file order at the end. The job types check their own
 * settings, and worker/config/schedules.c and worker/config/migrations.c
 * their sections; this file checks across them (a schedule's job, a job's then).
 *
 * Secrets: a value may come from the environment (a connection string, a
 * SAS), so no message here ever quotes a scalar's value. Messages name the
 * key, the variable, and the position instead. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "ecw_buf.h"
#include "ecw_config.h"
#include "ecw_job.h"
#include "ecw_storage.h"

#define MAX_FILE_BYTES ((size_t)1024 * 1024)
#define NAME_BYTES 320

#define SEC ((int64_t)1000)
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define DAY (24 * HOUR)
/* Azure takes a message TTL in (32-bit) seconds; this is the largest whole
 * number of hours below INT32_MAX seconds. */
#define MAX_TTL (596523 * HOUR)

#define TTL_EXPECT "-1 (never expire) or a duration like 30s, 5m or 1h (1s..596523h)"
#define DEFAULT_CONNSTR "${AZURE_STORAGE_CONNECTION_STRING:-UseDevelopmentStorage=true}"

/* ---- the configuration --------------------------------------------------- */

static const char *const top_keys[] = {"storage", "worker",    "log",        "metrics",
				       "jobs",    "schedules", "migrations", NULL};
static const char *const storage_keys[] = {
	"connection_string", "auth",       "account", "ca_file", "managed_identity_client_id",
	"request_timeout",   "pipelining", NULL};
static const char *const storage_auths[] = {"key", "workload-identity", "managed-identity", NULL};
static const char *const worker_keys[] = {"queue",
					  "poison_queue",
					  "queues",
					  "batch_size",
					  "concurrency",
					  "concurrency_min",
					  "prefetch",
					  "visibility_timeout",
					  "max_dequeue_count",
					  "retry_backoff",
					  "poll_interval",
					  "shutdown_grace",
					  "circuit",
					  "stall_timeout",
					  "message_ttl",
					  "create_missing",
					  "schedule_table",
					  "schedule_lease",
					  "control_poll",
					  NULL};
static const char *const backoff_keys[] = {"base", "max", NULL};
static const char *const poll_keys[] = {"min", "max", NULL};
static const char *const circuit_keys[] = {"failures", "probe_min", "probe_max", NULL};
static const char *const log_keys[] = {"level", "format", NULL};
static const char *const metrics_keys[] = {"listen", "queue_refresh", NULL};
static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const log_formats[] = {"json", "text", NULL};

/* The storage API's rules (ecw_queue_name_check, ecw_table_name_check), so
 * check-config refuses exactly what the client would refuse at start. */
static bool queue_name_ok(const char *s)
{
	return ecw_queue_name_check(s) == 0;
}

#define QUEUE_RULE                                                                                           \
	"3-63 lowercase letters, digits and single dashes, starting and ending with a letter or digit"

/* Azure's rule for account names: 3-24 lowercase letters and digits. */
static bool account_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 3 || n > 24)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

/* The connection string's place for messages: its node, or (when the file
 * does not set it) the default's environment variable. */
static void connstr_error(struct ecw_node_errors *errs, const struct ecw_node *at, const char *msg)
{
	if (at)
		ecw_node_error(errs, at, "storage.connection_string: %s", msg);
	else
		ecw_node_error(errs, NULL,
			       "storage.connection_string (not set, so $AZURE_STORAGE_CONNECTION_STRING): %s",
			       msg);
}

/* auth: key. The account parser's messages never echo a key or a signature. */
static void check_key_auth(struct ecw_config *cfg, const struct ecw_node *sec, struct ecw_node_errors *errs)
{
	const struct ecw_node *at = ecw_node_get(sec, "connection_string");
	struct ecw_account *acct = NULL;
	char msg[sizeof(ecw_error_last()->message) + 128];

	if (ecw_node_get(sec, "account"))
		ecw_node_error(errs, ecw_node_get(sec, "account"),
			       "storage.account is for auth: workload-identity or managed-identity "
			       "(with auth: key the connection string names the account)");
	if (ecw_account_parse(&acct, cfg->storage.connection_string) == 0) {
		ecw_account_free(acct);
		return;
	}
	snprintf(msg, sizeof(msg), "%s", ecw_error_last()->message);
	/* Endpoints without a key: most likely meant for an identity. */
	if (ecw_account_parse_endpoints(&acct, cfg->storage.connection_string) == 0) {
		size_t n = strlen(msg);
		snprintf(msg + n, sizeof(msg) - n,
			 "; for Entra ID authentication set storage.auth "
			 "(workload-identity or managed-identity)");
		ecw_account_free(acct);
	}
	connstr_error(errs, at, msg);
}

/* auth: workload-identity or managed-identity: the account is named by
 * storage.account or by a connection string with only endpoints (the
 * default connection string does not apply: it would be a key's). */
static void check_identity_auth(struct ecw_config *cfg, const struct ecw_node *sec,
				struct ecw_node_errors *errs)
{
	const struct ecw_node *at_cs = ecw_node_get(sec, "connection_string"),
			      *at_acct = ecw_node_get(sec, "account");
	const char *mode = storage_auths[cfg->storage.auth];
	struct ecw_account *acct = NULL;

	if (ecw_node_read_string(&cfg->storage.account, sec, "account", false, "storage", errs) < 0)
		return;
	if (cfg->storage.account && !account_name_ok(cfg->storage.account)) {
		ecw_node_error(errs, at_acct, "storage.account must be 3-24 lowercase letters and digits");
		return;
	}
	if (cfg->storage.account && at_cs) {
		ecw_node_error(
			errs, at_acct,
			"storage.account and storage.connection_string both name the account: give one");
		return;
	}
	if (!cfg->storage.account && !at_cs) {
		ecw_node_error(
			errs, ecw_node_get(sec, "auth"),
			"storage.auth: %s needs storage.account, or a storage.connection_string with only "
			"QueueEndpoint and TableEndpoint",
			mode);
		return;
	}
	if (cfg->storage.account)
		return;
	if (ecw_account_parse_endpoints(&acct, cfg->storage.connection_string) < 0)
		connstr_error(errs, at_cs, ecw_error_last()->message);
	else if (strncmp(ecw_account_endpoint(acct, ECW_SVC_QUEUE), "https://", 8) != 0 ||
		 strncmp(ecw_account_endpoint(acct, ECW_SVC_TABLE), "https://", 8) != 0)
		/* A bearer token is a secret: never sent in the clear. */
		connstr_error(errs, at_cs, "with token authentication both endpoints must be https://");
	ecw_account_free(acct);
}

/* auth: key without a connection string in the file: the default, through
 * the same expansion a value in the file gets. Only then: the default's
 * variables (AZURE_STORAGE_CONNECTION_STRING or its _FILE) concern no other
 * configuration. Errors are placed at the file's start. */
static int default_connection_string(struct ecw_config *cfg, struct ecw_node_errors *errs)
{
	struct ecw_node at = {.kind = ECW_NODE_SCALAR, .line = 1, .col = 1, .file = cfg->file};
	bool read_file = false;
	int err = ecw_node_expand(&cfg->storage.connection_string, &read_file, DEFAULT_CONNSTR,
				  strlen(DEFAULT_CONNSTR), &at, "storage.connection_string", errs);

	if (err == 0 && read_file && !(cfg->storage.connection_string_source = strdup(DEFAULT_CONNSTR)))
		err = ECW_ENOMEM;
	if (err < 0)
		errs->lost++; /* out of memory: the parse must fail */
	return err;
}

static void check_storage(struct ecw_config *cfg, const struct ecw_node *root, struct ecw_node_errors *errs)
{
	const struct ecw_node *sec = ecw_node_section(root, "storage", NULL, errs);
	const struct ecw_node *at;
	int auth = ECW_AUTH_KEY, ra, rc;

	ecw_node_check_keys(sec, storage_keys, "storage", errs);
	if ((ra = ecw_node_read_enum(&auth, sec, "auth", storage_auths, "storage", errs)) > 0)
		cfg->storage.auth = (enum ecw_storage_auth)auth;
	if (ecw_node_read_string(&cfg->storage.ca_file, sec, "ca_file", false, "storage", errs) > 0 &&
	    access(cfg->storage.ca_file, R_OK) != 0)
		ecw_node_error(errs, ecw_node_get(sec, "ca_file"), "storage.ca_file: cannot read %s: %s",
			       cfg->storage.ca_file, strerror(errno));
	at = ecw_node_get(sec, "managed_identity_client_id");
	if (ecw_node_read_string(&cfg->storage.managed_identity_client_id, sec, "managed_identity_client_id",
				 false, "storage", errs) > 0 &&
	    ra >= 0 && cfg->storage.auth != ECW_AUTH_MANAGED_IDENTITY)
		ecw_node_error(errs, at,
			       "storage.managed_identity_client_id is for auth: managed-identity (workload "
			       "identity takes its client id from AZURE_CLIENT_ID)");
	ecw_node_read_duration(&cfg->storage.request_timeout_ms, sec, "request_timeout", SEC, 10 * MIN, false,
			       false, "storage", errs);
	ecw_node_read_bool(&cfg->storage.pipelining, sec, "pipelining", false, "storage", errs);
	/* Which checks apply depends on the mode: none when it is unknown. */
	if ((rc = ecw_node_read_string(&cfg->storage.connection_string, sec, "connection_string", false,
				       "storage", errs)) < 0 ||
	    ra < 0)
		return;
	if (rc == 0 && cfg->storage.auth == ECW_AUTH_KEY && default_connection_string(cfg, errs) != 0)
		return;
	if (rc > 0 && cfg->storage.auth == ECW_AUTH_KEY &&
	    (at = ecw_node_get(sec, "connection_string"))->source &&
	    !(cfg->storage.connection_string_source = strdup(at->source)))
		errs->lost++; /* out of memory: the parse must fail */
	if (cfg->storage.auth == ECW_AUTH_KEY)
		check_key_auth(cfg, sec, errs);
	else
		check_identity_auth(cfg, sec, errs);
}

/* A section's two durations that bound a range, such as poll_interval's min
 * and max: each in [min_ms, max_ms], and low <= high, with the error at the
 * one given (or at low when only it was, against high's default). */
struct pair {
	const char *what, *low, *high;
	int64_t min_ms, max_ms;
	const char *high_default;
};

static void read_low_high(int64_t *low, int64_t *high, const struct ecw_node *sec, struct pair p,
			  struct ecw_node_errors *errs)
{
	int rl = ecw_node_read_duration(low, sec, p.low, p.min_ms, p.max_ms, false, false, p.what, errs);
	int rh = ecw_node_read_duration(high, sec, p.high, p.min_ms, p.max_ms, false, false, p.what, errs);

	if (rl < 0 || rh < 0 || *high >= *low)
		return;
	if (rh > 0)
		ecw_node_error(errs, ecw_node_get(sec, p.high), "%s.%s must not be less than %s", p.what,
			       p.high, p.low);
	else
		ecw_node_error(errs, ecw_node_get(sec, p.low), "%s.%s is more than %s (default %s): set %s",
			       p.what, p.low, p.high, p.high_default, p.high);
}

/* worker.circuit: circuit.c. */
static void parse_circuit(struct ecw_config *cfg, const struct ecw_node *worker, struct ecw_node_errors *errs)
{
	const struct ecw_node *sec = ecw_node_section(worker, "circuit", "worker", errs);
	long long x;

	if (!sec)
		return;
	ecw_node_check_keys(sec, circuit_keys, "worker.circuit", errs);
	if (ecw_node_read_int(&x, sec, "failures", 0, 1000, false, "worker.circuit", errs) > 0)
		cfg->worker.circuit_failures = (int)x;
	read_low_high(&cfg->worker.circuit_probe_min_ms, &cfg->worker.circuit_probe_max_ms, sec,
		      (const struct pair){"worker.circuit", "probe_min", "probe_max", 100, HOUR, "30s"},
		      errs);
}

static const char *const queue_def_keys[] = {"name", "weight", "poison_queue", NULL};

/* One item of worker.queues into d: 0, or -1 with the error recorded. */
static int parse_queue_def(struct ecw_queue_def *d, const struct ecw_node *item, size_t i,
			   struct ecw_node_errors *errs)
{
	char what[48];
	long long w = 1;

	snprintf(what, sizeof(what), "worker.queues[%zu]", i);
	if (!item || item->kind != ECW_NODE_MAP) {
		ecw_node_error(errs, item, "%s must be a map {name, weight, poison_queue}", what);
		return -1;
	}
	ecw_node_check_keys(item, queue_def_keys, what, errs);
	if (ecw_node_read_string(&d->name, item, "name", true, what, errs) < 0)
		return -1;
	if (!queue_name_ok(d->name)) {
		ecw_node_error(errs, ecw_node_get(item, "name"), "%s.name is not a valid queue name (%s)",
			       what, QUEUE_RULE);
		return -1;
	}
	if (ecw_node_read_int(&w, item, "weight", 1, 100, false, what, errs) < 0)
		return -1;
	d->weight = (int)w;
	int rp = ecw_node_read_string(&d->poison, item, "poison_queue", false, what, errs);
	if (rp < 0)
		return -1;
	if (rp == 0) {
		struct ecw_buf b;
		ecw_buf_init(&b, 128);
		if (ecw_buf_printf(&b, "%s-poison", d->name) == 0)
			d->poison = ecw_buf_take(&b);
		ecw_buf_dispose(&b);
		if (!d->poison)
			return errs->lost++, -1;
	}
	if (!queue_name_ok(d->poison)) {
		ecw_node_error(errs, rp ? ecw_node_get(item, "poison_queue") : ecw_node_get(item, "name"),
			       rp ? "%s.poison_queue is not a valid queue name (%s)"
				  : "%s.name is too long for the default poison queue <name>-poison: set "
				    "poison_queue (%s)",
			       what, QUEUE_RULE);
		return -1;
	}
	return 0;
}

/* Whether name is used twice among the queues and their poison queues. */
static bool queue_name_twice(const struct ecw_queue_def *q, size_t n, const char *name)
{
	int seen = 0;

	for (size_t i = 0; i < n; i++)
		seen += (q[i].name && strcmp(q[i].name, name) == 0) +
			(q[i].poison && strcmp(q[i].poison, name) == 0);
	return seen > 1;
}

/* worker.queues: 1..ECW_CONFIG_QUEUES_MAX queues with weights, each with its
 * poison queue, every name different; or, without it, the one worker.queue
 * and worker.poison_queue with weight 1. worker.queue and poison_queue then
 * name the first (the default of the commands). */
static void parse_queues(struct ecw_config *cfg, const struct ecw_node *sec, struct ecw_node_errors *errs)
{
	const struct ecw_node *list = ecw_node_get(sec, "queues");
	size_t n = list ? list->n : 1;

	if (list && (ecw_node_get(sec, "queue") || ecw_node_get(sec, "poison_queue"))) {
		ecw_node_error(
			errs, list,
			"worker.queues replaces worker.queue and worker.poison_queue: give one or the other");
		return;
	}
	if (list && (list->kind != ECW_NODE_SEQ || list->n < 1 || list->n > ECW_CONFIG_QUEUES_MAX)) {
		ecw_node_error(errs, list, "worker.queues must be a list of 1 to %d queues",
			       ECW_CONFIG_QUEUES_MAX);
		return;
	}
	if (!(cfg->worker.queues = calloc(n, sizeof(*cfg->worker.queues)))) {
		errs->lost++;
		return;
	}
	cfg->worker.nqueues = n;
	if (!list) {
		struct ecw_queue_def *d = &cfg->worker.queues[0];
		d->name = strdup(cfg->worker.queue);
		d->poison = strdup(cfg->worker.poison_queue ? cfg->worker.poison_queue : "");
		d->weight = 1;
		if (!d->name || !d->poison)
			errs->lost++;
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (parse_queue_def(&cfg->worker.queues[i], list->items[i], i, errs) < 0)
			return;
	for (size_t i = 0; i < n; i++) {
		const struct ecw_queue_def *d = &cfg->worker.queues[i];
		if (queue_name_twice(cfg->worker.queues, n, d->name) ||
		    queue_name_twice(cfg->worker.queues, n, d->poison)) {
			ecw_node_error(
				errs, list->items[i],
				"worker.queues[%zu]: its name or its poison queue's is used twice (every queue "
				"and poison queue must differ)",
				i);
			return;
		}
	}
	free(cfg->worker.queue);
	free(cfg->worker.poison_queue);
	cfg->worker.queue = strdup(cfg->worker.queues[0].name);
	cfg->worker.poison_queue = strdup(cfg->worker.queues[0].poison);
	if (!cfg->worker.queue || !cfg->worker.poison_queue)
		errs->lost++;
}

static void check_worker(struct ecw_config *cfg, const struct ecw_node *root, struct ecw_node_errors *errs)
{
	const struct ecw_node *sec = ecw_node_section(root, "worker", NULL, errs);
	const struct ecw_node *backoff, *poll, *ttl;
	long long x;
	int rq, rp;

	ecw_node_check_keys(sec, worker_keys, "worker", errs);

	rq = ecw_node_read_string(&cfg->worker.queue, sec, "queue", false, "worker", errs);
	if (rq >= 0 && !queue_name_ok(cfg->worker.queue)) {
		ecw_node_error(errs, ecw_node_get(sec, "queue"),
			       "worker.queue is not a valid queue name (%s)", QUEUE_RULE);
		rq = -1;
	}
	rp = ecw_node_read_string(&cfg->worker.poison_queue, sec, "poison_queue", false, "worker", errs);
	if (rp > 0 && !queue_name_ok(cfg->worker.poison_queue)) {
		ecw_node_error(errs, ecw_node_get(sec, "poison_queue"),
			       "worker.poison_queue is not a valid queue name (%s)", QUEUE_RULE);
	} else if (rp == 0 && rq >= 0) {
		struct ecw_buf b;
		ecw_buf_init(&b, 128);
		if (ecw_buf_printf(&b, "%s-poison", cfg->worker.queue) < 0) {
			errs->lost++;
		} else if (!queue_name_ok(ecw_buf_cstr(&b))) {
			ecw_node_error(errs, ecw_node_get(sec, "queue"),
				       "worker.queue is too long for the default poison queue <queue>-poison "
				       "(at most 63 characters): set worker.poison_queue");
		} else {
			free(cfg->worker.poison_queue);
			cfg->worker.poison_queue = ecw_buf_take(&b);
		}
		ecw_buf_dispose(&b);
	} else if (rp > 0 && rq >= 0 && strcmp(cfg->worker.queue, cfg->worker.poison_queue) == 0) {
		ecw_node_error(errs, ecw_node_get(sec, "poison_queue"),
			       "worker.poison_queue must differ from worker.queue");
	}
	parse_queues(cfg, sec, errs);

	if (ecw_node_read_int(&x, sec, "batch_size", 1, 32, false, "worker", errs) > 0)
		cfg->worker.batch_size = (int)x;
	if (ecw_node_read_int(&x, sec, "concurrency", 1, 256, false, "worker", errs) > 0)
		cfg->worker.concurrency = (int)x;
	if (ecw_node_read_int(&x, sec, "concurrency_min", 1, 256, false, "worker", errs) > 0) {
		cfg->worker.concurrency_min = (int)x;
		if (x > cfg->worker.concurrency)
			ecw_node_error(errs, ecw_node_get(sec, "concurrency_min"),
				       "worker.concurrency_min must not be more than worker.concurrency (%d)",
				       cfg->worker.concurrency);
	}
	if (ecw_node_read_int(&x, sec, "prefetch", 0, 256, false, "worker", errs) > 0)
		cfg->worker.prefetch = (int)x;
	ecw_node_read_duration(&cfg->worker.visibility_timeout_ms, sec, "visibility_timeout", SEC, 7 * DAY,
			       true, false, "worker", errs);
	if (ecw_node_read_int(&x, sec, "max_dequeue_count", 1, 1000, false, "worker", errs) > 0)
		cfg->worker.max_dequeue_count = (int)x;

	backoff = ecw_node_section(sec, "retry_backoff", "worker", errs);
	if (backoff) {
		ecw_node_check_keys(backoff, backoff_keys, "worker.retry_backoff", errs);
		read_low_high(&cfg->worker.retry_backoff_base_ms, &cfg->worker.retry_backoff_max_ms, backoff,
			      (const struct pair){"worker.retry_backoff", "base", "max", SEC, 7 * DAY, "5m"},
			      errs);
	}
	poll = ecw_node_section(sec, "poll_interval", "worker", errs);
	if (poll) {
		ecw_node_check_keys(poll, poll_keys, "worker.poll_interval", errs);
		read_low_high(&cfg->worker.poll_min_ms, &cfg->worker.poll_max_ms, poll,
			      (const struct pair){"worker.poll_interval", "min", "max", 1, HOUR, "10s"},
			      errs);
	}

	ecw_node_read_duration(&cfg->worker.shutdown_grace_ms, sec, "shutdown_grace", 0, HOUR, false, false,
			       "worker", errs);
	parse_circuit(cfg, sec, errs);
	ecw_node_read_duration(&cfg->worker.stall_timeout_ms, sec, "stall_timeout", MIN, DAY, false, false,
			       "worker", errs);
	ecw_node_read_duration(&cfg->worker.control_poll_ms, sec, "control_poll", SEC, 10 * MIN, false, false,
			       "worker", errs);

	if (ecw_node_read_scalar(&ttl, sec, "message_ttl", false, "worker", TTL_EXPECT, errs) > 0) {
		int64_t ms = 0;
		int r = strcmp(ttl->value, "-1") == 0 ? 1 : ecw_duration_parse(&ms, ttl->value, false);
		if (r == 1)
			cfg->worker.message_ttl_s = -1;
		else if (r == -1)
			ecw_node_error(errs, ttl, "worker.message_ttl must be %s", TTL_EXPECT);
		else if (r == -2 || ms < SEC || ms > MAX_TTL)
			ecw_node_error(errs, ttl, "worker.message_ttl is out of range (-1 or 1s..596523h)");
		else if (ms % SEC != 0)
			ecw_node_error(errs, ttl, "worker.message_ttl must be a whole number of seconds");
		else
			cfg->worker.message_ttl_s = ms / SEC;
	}

	ecw_node_read_bool(&cfg->worker.create_missing, sec, "create_missing", false, "worker", errs);

	/* The schedules' markers (worker/schedule/schedule.c): a table name, and how long
	 * a claim holds before another replica may take the window over. */
	if (ecw_node_read_string(&cfg->worker.schedule_table, sec, "schedule_table", false, "worker", errs) >
		    0 &&
	    !ecw_table_name_valid(cfg->worker.schedule_table))
		ecw_node_error(
			errs, ecw_node_get(sec, "schedule_table"),
			"worker.schedule_table: invalid table name: a table name is " ECW_TABLE_NAME_RULE);
	ecw_node_read_duration(&cfg->worker.schedule_lease_ms, sec, "schedule_lease", SEC, HOUR, false, false,
			       "worker", errs);
}

static void check_log(struct ecw_config *cfg, const struct ecw_node *root, struct ecw_node_errors *errs)
{
	const struct ecw_node *sec = ecw_node_section(root, "log", NULL, errs);
	int v;

	ecw_node_check_keys(sec, log_keys, "log", errs);
	if (ecw_node_read_enum(&v, sec, "level", log_levels, "log", errs) > 0)
		cfg->log.level = (enum ecw_log_level)v;
	if (ecw_node_read_enum(&v, sec, "format", log_formats, "log", errs) > 0)
		cfg->log.format = (enum ecw_log_format)v;
}

/* "" (disabled), or host:port where host is an IPv4 literal, a bracketed
 * IPv6 literal or localhost (what the metrics server can bind) and port is
 * 0..65535 (0: any free port). */
static bool listen_ok(const char *s)
{
	const char *colon, *port;
	char host[64];
	size_t hlen;
	unsigned char addr[16];
	long p = 0;

	if (!*s)
		return true;
	colon = strrchr(s, ':');
	if (!colon)
		return false;
	port = colon + 1;
	if (!*port || strlen(port) > 5)
		return false;
	for (const char *q = port; *q; q++) {
		if (*q < '0' || *q > '9')
			return false;
		p = p * 10 + (*q - '0');
	}
	if (p > 65535)
		return false;
	hlen = (size_t)(colon - s);
	if (s[0] == '[') {
		if (hlen < 3 || s[hlen - 1] != ']' || hlen - 2 >= sizeof(host))
			return false;
		memcpy(host, s + 1, hlen - 2);
		host[hlen - 2] = '\0';
		return inet_pton(AF_INET6, host, addr) == 1;
	}
	if (hlen == 0 || hlen >= sizeof(host))
		return false;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	return strcmp(host, "localhost") == 0 || inet_pton(AF_INET, host, addr) == 1;
}

static void check_metrics(struct ecw_config *cfg, const struct ecw_node *root, struct ecw_node_errors *errs)
{
	const struct ecw_node *sec = ecw_node_section(root, "metrics", NULL, errs);

	ecw_node_check_keys(sec, metrics_keys, "metrics", errs);
	ecw_node_read_duration(&cfg->metrics.queue_refresh_ms, sec, "queue_refresh", SEC, 10 * MIN, false,
			       false, "metrics", errs);
	if (ecw_node_read_string(&cfg->metrics.listen, sec, "listen", false, "metrics", errs) > 0 &&
	    !listen_ok(cfg->metrics.listen))
		ecw_node_error(errs, ecw_node_get(sec, "listen"),
			       "metrics.listen must be \"\" (disabled) or host:port, with host an IPv4 "
			       "address, [IPv6 address] or localhost and port 0..65535");
}

static bool job_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
	}
	return true;
}

/* Whether job `target` can be reached from job i by following `then`
 * (seen marks jobs already explored). */
static bool then_reaches(const struct ecw_config *cfg, size_t i, size_t target, unsigned char *seen)
{
	for (size_t k = 0; cfg->jobs[i].then && cfg->jobs[i].then[k]; k++)
		for (size_t j = 0; j < cfg->njobs; j++) {
			if (strcmp(cfg->jobs[j].name, cfg->jobs[i].then[k]) != 0)
				continue;
			if (j == target)
				return true;
			if (!seen[j]) {
				seen[j] = 1;
				if (then_reaches(cfg, j, target, seen))
					return true;
			}
		}
	return false;
}

/* Every job a `then` names must exist, and following `then` must end: a
 * cycle would enqueue the same keys forever. */
static void check_then(const struct ecw_config *cfg, const struct ecw_node *sec, struct ecw_node_errors *errs)
{
	unsigned char *state;

	for (size_t i = 0; i < cfg->njobs; i++) {
		const struct ecw_node *at = ecw_node_get(ecw_node_get(sec, cfg->jobs[i].name), "then");
		const struct ecw_job_def *next;
		if (cfg->jobs[i].then && cfg->jobs[i].type && cfg->jobs[i].type->keyless)
			ecw_node_error(errs, at, "jobs.%s.then: a %s job names no entity to hand on",
				       cfg->jobs[i].name, cfg->jobs[i].type->name);
		for (size_t k = 0; cfg->jobs[i].then && cfg->jobs[i].then[k]; k++)
			if (!(next = ecw_config_job(cfg, cfg->jobs[i].then[k])))
				ecw_node_error(errs, at,
					       "jobs.%s.then names '%.64s', which is not a configured job",
					       cfg->jobs[i].name, cfg->jobs[i].then[k]);
			else if (next->type && next->type->keyless)
				ecw_node_error(
					errs, at,
					"jobs.%s.then names '%.64s', a %s job, which takes no entity's keys",
					cfg->jobs[i].name, next->name, next->type->name);
	}
	if (!(state = calloc(cfg->njobs ? cfg->njobs : 1, 1)))
		return;
	for (size_t i = 0; i < cfg->njobs; i++) {
		/* Blame only the jobs on a cycle, not those that lead into one. */
		memset(state, 0, cfg->njobs);
		if (then_reaches(cfg, i, i, state)) {
			ecw_node_error(errs, ecw_node_get(ecw_node_get(sec, cfg->jobs[i].name), "then"),
				       "jobs.%s.then leads back to itself: a cycle would enqueue forever",
				       cfg->jobs[i].name);
		}
	}
	free(state);
}

static int check_jobs(struct ecw_config *cfg, const struct ecw_node *root, struct ecw_node_errors *errs)
{
	const struct ecw_node *sec = ecw_node_section(root, "jobs", NULL, errs);
	struct ecw_buf names;
	int err = 0;

	ecw_buf_init(&names, 4096);
	if (!sec || sec->n == 0)
		goto done;
	if (!(cfg->jobs = calloc(sec->n, sizeof(*cfg->jobs)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < sec->n; i++) {
		const struct ecw_node *k = sec->keys[i], *job = sec->items[i], *tn;
		const struct ecw_job_type *type;
		struct ecw_job_def *def;
		char what[NAME_BYTES];
		void *settings = NULL;
		size_t before;

		if (!job_name_ok(k->value))
			ecw_node_error(errs, k, "job name '%.64s' must be 1-63 letters, digits, '-' or '_'",
				       k->value);
		snprintf(what, sizeof(what), "jobs.%.64s", k->value);
		if (job->kind != ECW_NODE_MAP) {
			ecw_node_error(errs, job, "%s must be a map with at least a 'type', not %s", what,
				       ecw_node_is_null(job) ? "nothing" : ecw_node_kind_name(job));
			continue;
		}
		if (ecw_node_read_scalar(&tn, job, "type", true, what, "a job type", errs) <= 0)
			continue;
		if (!(type = ecw_job_type_find(tn->value))) {
			const char *const *all = ecw_job_type_names();
			ecw_buf_reset(&names);
			for (size_t j = 0; all && all[j]; j++)
				if (ecw_buf_printf(&names, "%s%s", j ? ", " : "", all[j]) < 0)
					break;
			ecw_node_error(errs, tn, "%s.type is not a known job type (expected one of: %s)",
				       what, ecw_buf_cstr(&names));
			continue;
		}
		before = errs->n;
		if (type->parse && type->parse(&settings, job, errs) < 0) {
			/* The type reported why; whatever it left is its own to free.
			 * A type that failed silently (out of memory) must still fail
			 * the parse, not leave a config without this job. */
			if (errs->n == before)
				ecw_node_error(errs, job, "%s: the %s job type rejected its settings", what,
					       type->name);
			if (settings && type->free)
				type->free(settings);
			continue;
		}
		def = &cfg->jobs[cfg->njobs];
		if (!(def->name = strdup(k->value))) {
			if (settings && type->free)
				type->free(settings);
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
			goto done;
		}
		def->type = type;
		def->settings = settings;
		cfg->njobs++;
		bool present = false;
		if (ecw_node_string_list(&def->then, &present, job, "then", errs) == 0 && def->then &&
		    !def->then[0]) {
			ecw_strv_free(def->then);
			def->then = NULL;
		}
	}
	check_then(cfg, sec, errs);
done:
	ecw_buf_dispose(&names);
	return err;
}

static void set_defaults(struct ecw_config *cfg)
{
	cfg->storage.request_timeout_ms = 30 * SEC;
	cfg->worker.batch_size = 16;
	cfg->worker.concurrency = 16;
	cfg->worker.concurrency_min = 1;
	cfg->worker.prefetch = -1; /* batch_size, once that is read */
	cfg->worker.visibility_timeout_ms = 60 * SEC;
	cfg->worker.max_dequeue_count = 5;
	cfg->worker.retry_backoff_base_ms = 2 * SEC;
	cfg->worker.retry_backoff_max_ms = 5 * MIN;
	cfg->worker.poll_min_ms = 100;
	cfg->worker.poll_max_ms = 10 * SEC;
	cfg->worker.shutdown_grace_ms = 25 * SEC;
	cfg->worker.circuit_failures = 3;
	cfg->worker.circuit_probe_min_ms = SEC;
	cfg->worker.circuit_probe_max_ms = 30 * SEC;
	cfg->worker.stall_timeout_ms = 10 * MIN;
	cfg->worker.control_poll_ms = 10 * SEC;
	cfg->metrics.queue_refresh_ms = 15 * SEC;
	cfg->worker.message_ttl_s = -1;
	cfg->worker.create_missing = true;
	cfg->storage.pipelining = true;
	cfg->worker.schedule_lease_ms = 2 * MIN;
	cfg->log.level = ECW_LOG_INFO;
	cfg->log.format = ECW_LOG_JSON;
}

/* The string defaults (the connection string's is check_storage's). */
static int set_string_defaults(struct ecw_config *cfg)
{
	cfg->worker.queue = strdup("ecw-jobs");
	cfg->metrics.listen = strdup("127.0.0.1:9464");
	cfg->worker.schedule_table = strdup("EcwSchedules");
	if (!cfg->worker.queue || !cfg->metrics.listen || !cfg->worker.schedule_table)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	return 0;
}

int ecw_config_parse(struct ecw_config **out, const char *text, size_t len, const char *file,
		     struct ecw_node_errors *errs)
{
	const char *outer_file = errs->file;
	unsigned long lost = errs->lost;
	struct ecw_config *cfg = NULL;
	struct ecw_node *root = NULL;
	size_t first_error = errs->n;
	int err = 0;

	*out = NULL;
	file = file ? file : "<config>";
	/* An error at no node (about the default connection string, which the
	 * file does not set) is placed at the file's start. */
	errs->file = file;
	if (!(cfg = calloc(1, sizeof(*cfg))) || !(cfg->file = strdup(file))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	set_defaults(cfg);
	if ((err = set_string_defaults(cfg)) < 0)
		goto done;
	if ((err = ecw_node_parse(&root, text ? text : "", text ? len : 0, file, errs)) < 0)
		goto done;
	if (root && !ecw_node_is_null(root) && root->kind != ECW_NODE_MAP) {
		ecw_node_error(errs, root, "the configuration must be a map (storage:, worker:, ...), not %s",
			       ecw_node_kind_name(root));
	} else {
		ecw_node_check_keys(root, top_keys, "the top level", errs);
		check_storage(cfg, root, errs);
		check_worker(cfg, root, errs);
		if (cfg->worker.prefetch < 0)
			cfg->worker.prefetch = cfg->worker.batch_size;
		check_log(cfg, root, errs);
		check_metrics(cfg, root, errs);
		if ((err = check_jobs(cfg, root, errs)) < 0)
			goto done;
		/* After the jobs: a schedule names them. */
		ecw_schedules_parse(&cfg->schedules, ecw_node_get(root, "schedules"), cfg->jobs, cfg->njobs,
				    errs);
		ecw_migrations_parse(&cfg->migrations, ecw_node_get(root, "migrations"), errs);
	}
done:
	ecw_node_free(root);
	if (err == 0 && errs->lost != lost)
		err = ecw_error_set(ECW_ENOMEM, "out of memory while recording configuration errors");
	if (err == 0 && errs->n > first_error)
		err = ECW_EINVALID;
	if (err == ECW_EINVALID)
		ecw_node_errors_sort(errs, first_error, file);
	if (err < 0)
		ecw_config_free(cfg);
	else
		*out = cfg;
	errs->file = outer_file;
	return err;
}

int ecw_config_load(struct ecw_config **out, const char *path, struct ecw_node_errors *errs)
{
	struct ecw_buf text;
	char chunk[8192];
	int fd = -1, err = 0;

	*out = NULL;
	ecw_buf_init(&text, MAX_FILE_BYTES);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		ecw_node_error_file(errs, path, "cannot read: %s", strerror(errno));
		err = ECW_EINVALID;
		goto done;
	}
	for (;;) {
		ssize_t got = read(fd, chunk, sizeof(chunk));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ecw_node_error_file(errs, path, "cannot read: %s", strerror(errno));
			err = ECW_EINVALID;
			goto done;
		}
		if (got == 0)
			break;
		if (ecw_buf_add(&text, chunk, (size_t)got) < 0) {
			if (text.len + (size_t)got > MAX_FILE_BYTES)
				ecw_node_error_file(errs, path, "cannot read: larger than %zu bytes",
						    MAX_FILE_BYTES);
			else
				ecw_node_error_file(errs, path, "cannot read: out of memory");
			err = ECW_EINVALID;
			goto done;
		}
	}
	err = ecw_config_parse(out, ecw_buf_cstr(&text), text.len, path, errs);
done:
	if (fd >= 0)
		close(fd);
	if (text.ptr)
		memset(text.ptr, 0, text.len);
	ecw_buf_dispose(&text);
	return err;
}

void ecw_config_free(struct ecw_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->file);
	if (cfg->storage.connection_string) {
		memset(cfg->storage.connection_string, 0, strlen(cfg->storage.connection_string));
		free(cfg->storage.connection_string);
	}
	if (cfg->storage.connection_string_source) {
		memset(cfg->storage.connection_string_source, 0,
		       strlen(cfg->storage.connection_string_source));
		free(cfg->storage.connection_string_source);
	}
	free(cfg->storage.account);
	free(cfg->storage.ca_file);
	free(cfg->storage.managed_identity_client_id);
	free(cfg->worker.queue);
	free(cfg->worker.poison_queue);
	for (size_t i = 0; i < cfg->worker.nqueues; i++) {
		free(cfg->worker.queues[i].name);
		free(cfg->worker.queues[i].poison);
	}
	free(cfg->worker.queues);
	free(cfg->worker.schedule_table);
	free(cfg->metrics.listen);
	for (size_t i = 0; i < cfg->njobs; i++) {
		struct ecw_job_def *j = &cfg->jobs[i];
		free(j->name);
		ecw_strv_free(j->then);
		if (j->settings && j->type && j->type->free)
			j->type->free(j->settings);
	}
	free(cfg->jobs);
	ecw_schedules_free(cfg->schedules);
	ecw_migrations_free(cfg->migrations);
	free(cfg);
}

const struct ecw_queue_def *ecw_config_queue(const struct ecw_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->worker.nqueues; i++)
		if (strcmp(cfg->worker.queues[i].name, name) == 0)
			return &cfg->worker.queues[i];
	return NULL;
}

const struct ecw_job_def *ecw_config_job(const struct ecw_config *cfg, const char *name)
{
	if (!cfg || !name)
		return NULL;
	for (size_t i = 0; i < cfg->njobs; i++)
		if (strcmp(cfg->jobs[i].name, name) == 0)
			return &cfg->jobs[i];
	return NULL;
}

const char *ecw_config_default_path(void)
{
	const char *p = getenv("ECW_CONFIG");

	return p && *p ? p : "./ecworker.yaml";
}
