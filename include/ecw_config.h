/* SPDX-License-Identifier: MIT */
/* ecw_config.h - the worker's configuration: read from YAML as a node tree
 * (ecw_node.h: ${VAR} / ${VAR:-default} expanded), every key checked, and
 * every error reported with file:line:column. Jobs read their own settings
 * from the node tree, so job types never see this header or libyaml.
 * ecw_config_load returns a heap object freed with ecw_config_free; the
 * errors list is caller-owned (ecw_node_errors_init / _dispose). */
#ifndef ECW_CONFIG_H
#define ECW_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ecw_err.h"
#include "ecw_log.h"
#include "ecw_node.h"

/* ---- the configuration --------------------------------------------------- */

enum ecw_storage_auth { ECW_AUTH_KEY, ECW_AUTH_WORKLOAD_IDENTITY, ECW_AUTH_MANAGED_IDENTITY };

struct ecw_job_type;
struct ecw_schedule_set;
struct ecw_migration_set;

#define ECW_CONFIG_QUEUES_MAX 8

/* One job queue of worker.queues. */
struct ecw_queue_def {
	char *name;
	char *poison; /* default <name>-poison */
	int weight;   /* 1..100, default 1: its share of the receives while several have work */
};

struct ecw_job_def {
	char *name;                      /* the key under jobs: */
	const struct ecw_job_type *type; /* from the registry, by `type:` */
	void *settings;                  /* type->parse's result, freed by type->free */
	char **then;                     /* jobs to enqueue for the same keys after success
					   * (NULL-terminated; NULL when none); no cycles */
};

struct ecw_config {
	char *file; /* the path it was read from */
	struct {
		enum ecw_storage_auth auth;       /* key|workload-identity|managed-identity, default key */
		char *connection_string;          /* secret: never print it. With an identity auth:
		                               * endpoints only, or NULL when account is set */
		char *account;                    /* identity auth: the account's name; else NULL */
		char *ca_file;                    /* a PEM CA bundle to trust; NULL: the system's */
		char *managed_identity_client_id; /* a user-assigned identity; NULL: system-assigned */
		int64_t request_timeout_ms;       /* one HTTP request, whole; 1s..10m, default 30s */
		bool pipelining; /* a group's message deletes pipelined on one connection; default true */
		/* auth: key, when the connection string (or a part of it) came
		 * from a secret file: its text as written (${file:PATH}, or the
		 * default with AZURE_STORAGE_CONNECTION_STRING_FILE), expanded
		 * again to pick up a rotated secret (connect.c); NULL otherwise. */
		char *connection_string_source;
	} storage;
	struct {
		/* The job queues: worker.queues, or the one worker.queue with
		 * weight 1. Never empty once loaded; queue and poison_queue
		 * below name the first. */
		struct ecw_queue_def *queues;
		size_t nqueues;
		char *queue;        /* default ecw-jobs */
		char *poison_queue; /* default <queue>-poison */
		int batch_size;     /* 1..32, default 16 */
		int concurrency;    /* 1..256, default 16 */
		/* The adaptive limit's floor (worker/runtime/limiter.c): while storage
		 * throttles, fewer jobs run, not fewer than this; 1..concurrency,
		 * default 1; = concurrency: a fixed number. */
		int concurrency_min;
		int prefetch;                  /* 0..256, default batch_size: messages held
		                               * waiting for a job thread */
		int64_t visibility_timeout_ms; /* 1s..7d, whole seconds, default 60s */
		int max_dequeue_count;         /* 1..1000, default 5 */
		int64_t retry_backoff_base_ms; /* default 2s */
		int64_t retry_backoff_max_ms;  /* >= base, <= 7d, default 5m */
		int64_t poll_min_ms;           /* default 100ms */
		int64_t poll_max_ms;           /* >= min, default 10s */
		int64_t shutdown_grace_ms;     /* default 25s */
		/* The storage circuit (worker/runtime/circuit.c): outage-class failures in a
		 * row before a probe may open it (0..1000, 0: never; default 3),
		 * and the probe's doubling wait while open. */
		int circuit_failures;
		int64_t circuit_probe_min_ms; /* 100ms..10m, default 1s */
		int64_t circuit_probe_max_ms; /* >= min, <= 1h, default 30s */
		/* A job that completed no storage call this long is stalled:
		 * logged, ecw_jobs_stalled, /healthz fails. 1m..24h, default 10m. */
		int64_t stall_timeout_ms;
		long long message_ttl_s;   /* -1 never, or 1..; default -1 (a duration or -1) */
		bool create_missing;       /* default true */
		char *schedule_table;      /* schedules' markers; default EcwSchedules */
		int64_t schedule_lease_ms; /* a claim on a schedule's window; 1s..1h, default 2m */
		/* How often a working worker looks whether its queue was paused
		 * (`ecworker pause`); 1s..10m, default 10s. */
		int64_t control_poll_ms;
	} worker;
	struct {
		enum ecw_log_level level;   /* debug|info|warn|error, default info */
		enum ecw_log_format format; /* json|text, default json */
	} log;
	struct {
		char *listen; /* "host:port"; "" disables; default "127.0.0.1:9464" */
		/* How often the queue gauges (approximate messages, oldest
		 * message's age) are read while the worker works; 1s..10m,
		 * default 15s. */
		int64_t queue_refresh_ms;
	} metrics;
	struct ecw_job_def *jobs;
	size_t njobs;
	struct ecw_schedule_set *schedules;   /* `schedules:` (below); NULL when none */
	struct ecw_migration_set *migrations; /* `migrations:` (below); NULL when none */
};

/* Reads and checks path. Returns 0, or ECW_EINVALID with every problem in errs
 * (or another ecw_err when the file cannot be read, also described in errs). */
int ecw_config_load(struct ecw_config **out, const char *path, struct ecw_node_errors *errs) ECW_MUST_USE;
/* The same from text in memory; file names the source in messages. */
int ecw_config_parse(struct ecw_config **out, const char *text, size_t len, const char *file,
		     struct ecw_node_errors *errs) ECW_MUST_USE;
void ecw_config_free(struct ecw_config *cfg);
/* The job queue named name (worker.queues), or NULL. */
const struct ecw_queue_def *ecw_config_queue(const struct ecw_config *cfg, const char *name);
/* The job named name, or NULL. */
const struct ecw_job_def *ecw_config_job(const struct ecw_config *cfg, const char *name);
/* The file to read when -c is not given: $ECW_CONFIG, else "./ecworker.yaml". */
const char *ecw_config_default_path(void);

/* ---- `schedules:` (worker/config/schedules.c) ------------------------------- */

/* Jobs enqueued on a timetable by the worker itself, or audited on one. The
 * set belongs to the configuration (ecw_config_free frees it); the
 * runtime's scheduler (worker/schedule/schedule.h) reads it without owning
 * it. */
#define ECW_SCHEDULE_HOUR_MS ((int64_t)3600000)
#define ECW_SCHEDULE_DAY_MS (24 * ECW_SCHEDULE_HOUR_MS)
#define ECW_SCHEDULE_WEEK_MS (7 * ECW_SCHEDULE_DAY_MS)

/* Reads the `schedules:` section (sec may be NULL: none). jobs[0..njobs) are
 * the configured jobs (parsed first), which a schedule names and whose type
 * says what a schedule must give it. Problems go to errs and the result is -1. */
int ecw_schedules_parse(struct ecw_schedule_set **out, const struct ecw_node *sec,
			const struct ecw_job_def *jobs, size_t njobs, struct ecw_node_errors *errs);
void ecw_schedules_free(struct ecw_schedule_set *s);

enum ecw_schedule_window { ECW_WINDOW_NONE, ECW_WINDOW_PREVIOUS, ECW_WINDOW_CURRENT };

/* One schedule as configured (a view owned by the set). */
struct ecw_schedule {
	const char *name; /* the markers' PartitionKey; default the job's name */
	const char *job;  /* the job enqueued, or (audit) the job audited */
	/* audit: JOB: the window runs the job's audit in the claimant (no
	 * message), with repair, at rate storage requests a second; its result
	 * goes into the marker (worker/schedule/schedule_audit.c). */
	bool audit;
	bool repair;
	int rate;
	int64_t every_ms; /* ECW_SCHEDULE_HOUR_MS, _DAY_MS or _WEEK_MS */
	int64_t at_ms;    /* offset of the firing into its period */
	int catch_up;     /* how many of the latest due periods a tick considers */
	enum ecw_schedule_window window;
	const char *table;  /* for_each.table; NULL: one message per period */
	const char *field;  /* for_each.field: PartitionKey, RowKey or a String property */
	const char *as;     /* for_each.as: the message field the value goes in */
	const char *filter; /* for_each.filter (OData) or NULL */
};

/* 0 for NULL. */
size_t ecw_schedules_count(const struct ecw_schedule_set *s);
const struct ecw_schedule *ecw_schedules_get(const struct ecw_schedule_set *s, size_t i);

/* ---- `migrations:` (worker/config/migrations.c) ----------------------------- */

/* An ordered list of schema and data changes, applied once per environment
 * and recorded in a version table. The set is a heap object owned by the
 * configuration (ecw_config_free frees it); the migrations room
 * (worker/migrate/migrate.h) plans and applies it without owning it, and
 * everything in it is the set's. */

/* Reads the `migrations:` section (sec may be NULL: none). Problems go to
 * errs and the result is -1. */
int ecw_migrations_parse(struct ecw_migration_set **out, const struct ecw_node *sec,
			 struct ecw_node_errors *errs);
void ecw_migrations_free(struct ecw_migration_set *m);

/* How many migrations the set lists (0 for NULL). */
size_t ecw_migrations_count(const struct ecw_migration_set *m);
/* The version table's name. */
const char *ecw_migrations_table(const struct ecw_migration_set *m);
/* Migration i's id and the hex SHA-256 of its definition (id, version and
 * steps as written; the description is left out). */
const char *ecw_migrations_id(const struct ecw_migration_set *m, size_t i);
const char *ecw_migrations_checksum(const struct ecw_migration_set *m, size_t i);

struct ecw_entity;
struct ecw_template;

enum ecw_migration_step_kind {
	ECW_MIGRATION_CREATE_TABLE,
	ECW_MIGRATION_DELETE_TABLE,
	ECW_MIGRATION_CLEAR_TABLE,
	ECW_MIGRATION_COPY_TABLE,
	ECW_MIGRATION_RENAME_TABLE, /* only while parsing: becomes COPY + DELETE */
	ECW_MIGRATION_UPSERT_ENTITY,
	ECW_MIGRATION_INSERT_ENTITY,
	ECW_MIGRATION_DELETE_ENTITY,
	ECW_MIGRATION_DELETE_PARTITION,
	ECW_MIGRATION_SET_PROPERTY,
};

struct ecw_migration_template {
	char *name;
	struct ecw_template *t;
};

struct ecw_migration_step {
	enum ecw_migration_step_kind kind;
	int pos;                              /* 1-based position in the YAML list */
	const char *phase;                    /* rename_table: "copy" or "delete"; else NULL */
	char *table;                          /* the table (copy: the source) */
	char *to;                             /* copy: the target */
	char *pk, *rk;                        /* delete_entity, delete_partition */
	char *filter;                         /* set_property: an OData filter; NULL for all */
	struct ecw_entity *entity;            /* upsert/insert: the entity; set_property: the constants */
	struct ecw_migration_template *tmpls; /* set_property: string values (templates) */
	size_t ntmpls;
	char sum[65]; /* this step's definition, hashed */
};

struct ecw_migration {
	char *id;
	long long version;
	char *description;
	struct ecw_migration_step *steps;
	size_t nsteps;
	size_t nlisted; /* steps as written (rename_table counts once) */
	char sum[65];
};

struct ecw_migration_set {
	char *table;
	int64_t lease_ms;
	int64_t wait_ms;
	struct ecw_migration *list;
	size_t n;
};

/* A step kind's name as the section writes it ("copy_table"). */
const char *ecw_migrations_step_name(enum ecw_migration_step_kind kind);

#endif
