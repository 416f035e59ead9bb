/* ecw_config.h - ecworker's configuration: parsed from YAML (libyaml, used
 * only in worker/config.c), with ${VAR} / ${VAR:-default} expanded, every key
 * checked, and every error reported with file:line:column. Jobs read their own
 * settings from the generic node tree below, so job types never see libyaml.
 * ecw_config_load returns a heap object freed with ecw_config_free; the
 * errors list is caller-owned (_init / _dispose). */
#ifndef ECW_CONFIG_H
#define ECW_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ecw_err.h"
#include "ecw_log.h"

/* ---- errors ------------------------------------------------------------- */

struct ecw_config_errors {
	char **lines;       /* "FILE:LINE:COL: message" */
	size_t n, cap;
};

void ecw_config_errors_init(struct ecw_config_errors *errs);
void ecw_config_errors_dispose(struct ecw_config_errors *errs);

/* ---- the node tree (what YAML said, after ${VAR} expansion) ---------------- */

enum ecw_node_kind { ECW_NODE_SCALAR, ECW_NODE_MAP, ECW_NODE_SEQ };

struct ecw_node {
	enum ecw_node_kind kind;
	int line, col;              /* 1-based, where the node starts */
	const char *file;           /* the config file's name, for messages */
	char *value;                /* SCALAR: the expanded text */
	bool quoted;                /* SCALAR: written in quotes (so never a number) */
	struct ecw_node **keys;     /* MAP: key scalars */
	struct ecw_node **items;    /* MAP: values; SEQ: items */
	size_t n;
};

/* Records "file:line:col: message" at node (or at the file start if NULL). */
void ecw_config_error(struct ecw_config_errors *errs, const struct ecw_node *at, const char *fmt, ...)
	ECW_PRINTF(3, 4);

/* MAP lookup; NULL when absent or when map is not a MAP. */
const struct ecw_node *ecw_node_get(const struct ecw_node *map, const char *key);
/* Reports every key of map not in allowed (NULL-terminated); returns how many. */
int ecw_node_check_keys(const struct ecw_node *map, const char *const *allowed, const char *what,
			struct ecw_config_errors *errs);

/* Typed readers of map[key]. When the key is absent, *out keeps its value
 * (the default) unless required, which is an error. A wrong type or range is
 * an error at the value's position. All return 0 or -1 (error recorded). */
int ecw_node_string(char **out, const struct ecw_node *map, const char *key, bool required,
		    struct ecw_config_errors *errs);        /* *out: heap copy, free() the old one */
int ecw_node_int(long long *out, const struct ecw_node *map, const char *key, long long min,
		 long long max, bool required, struct ecw_config_errors *errs);
int ecw_node_bool(bool *out, const struct ecw_node *map, const char *key, bool required,
		  struct ecw_config_errors *errs);
/* "250ms", "2s", "5m", "1h" (an integer and a unit; "0" alone is 0). */
int ecw_node_duration(int64_t *out_ms, const struct ecw_node *map, const char *key, int64_t min_ms,
		      int64_t max_ms, bool required, struct ecw_config_errors *errs);
/* A sequence of scalars; *out is a NULL-terminated heap array (free with
 * ecw_strv_free); *present tells an absent key from an empty list. */
int ecw_node_string_list(char ***out, bool *present, const struct ecw_node *map, const char *key,
			 struct ecw_config_errors *errs);
void ecw_strv_free(char **v);

/* ---- the configuration --------------------------------------------------- */

enum ecw_storage_auth { ECW_AUTH_KEY, ECW_AUTH_WORKLOAD_IDENTITY, ECW_AUTH_MANAGED_IDENTITY };

struct ecw_job_type;
struct ecw_schedule_set;
struct ecw_migration_set;

struct ecw_job_def {
	char *name;                       /* the key under jobs: */
	const struct ecw_job_type *type;  /* from the registry, by `type:` */
	void *settings;                   /* type->parse's result, freed by type->free */
	char **then;                      /* jobs to enqueue for the same keys after success
					   * (NULL-terminated; NULL when none); no cycles */
};

struct ecw_config {
	char *file;                       /* the path it was read from */
	struct {
		enum ecw_storage_auth auth;   /* key|workload-identity|managed-identity, default key */
		char *connection_string;      /* secret: never print it. With an identity auth:
		                               * endpoints only, or NULL when account is set */
		char *account;                /* identity auth: the account's name; else NULL */
		char *ca_file;                /* a PEM CA bundle to trust; NULL: the system's */
		char *managed_identity_client_id; /* a user-assigned identity; NULL: system-assigned */
		int64_t request_timeout_ms;   /* one HTTP request, whole; 1s..10m, default 30s */
	} storage;
	struct {
		char *queue;                  /* default ecw-jobs */
		char *poison_queue;           /* default <queue>-poison */
		int batch_size;               /* 1..32, default 16 */
		int concurrency;              /* 1..256, default 16 */
		int prefetch;                 /* 0..256, default batch_size: messages held
		                               * waiting for a job thread */
		int64_t visibility_timeout_ms;/* 1s..7d, whole seconds, default 60s */
		int max_dequeue_count;        /* 1..1000, default 5 */
		int64_t retry_backoff_base_ms;/* default 2s */
		int64_t retry_backoff_max_ms; /* >= base, <= 7d, default 5m */
		int64_t poll_min_ms;          /* default 100ms */
		int64_t poll_max_ms;          /* >= min, default 10s */
		int64_t shutdown_grace_ms;    /* default 25s */
		long long message_ttl_s;      /* -1 never, or 1..; default -1 (a duration or -1) */
		bool create_missing;          /* default true */
		char *schedule_table;         /* schedules' markers; default EcwSchedules */
		int64_t schedule_lease_ms;    /* a claim on a schedule's window; 1s..1h, default 2m */
	} worker;
	struct {
		enum ecw_log_level level;     /* debug|info|warn|error, default info */
		enum ecw_log_format format;   /* json|text, default json */
	} log;
	struct {
		char *listen;                 /* "host:port"; "" disables; default "127.0.0.1:9464" */
	} metrics;
	struct ecw_job_def *jobs;
	size_t njobs;
	struct ecw_schedule_set *schedules;   /* `schedules:` (worker/schedule.h); NULL when none */
	struct ecw_migration_set *migrations; /* `migrations:` (worker/migrate.h); NULL when none */
};

/* Reads and checks path. Returns 0, or ECW_EINVALID with every problem in errs
 * (or another ecw_err when the file cannot be read, also described in errs). */
int ecw_config_load(struct ecw_config **out, const char *path, struct ecw_config_errors *errs) ECW_MUST_USE;
/* The same from text in memory; file names the source in messages. */
int ecw_config_parse(struct ecw_config **out, const char *text, size_t len, const char *file,
		     struct ecw_config_errors *errs) ECW_MUST_USE;
void ecw_config_free(struct ecw_config *cfg);
/* The job named name, or NULL. */
const struct ecw_job_def *ecw_config_job(const struct ecw_config *cfg, const char *name);
/* The file to read when -c is not given: $ECW_CONFIG, else "./ecworker.yaml". */
const char *ecw_config_default_path(void);

/* A duration as the configuration writes it: "250ms", "2s", "5m", "1h" or
 * "0"; with days also "7d" and "1w" (command-line options; the configuration
 * keeps to hours). Returns 0, -1 (not a duration) or -2 (too large). */
int ecw_duration_parse(int64_t *out_ms, const char *s, bool days) ECW_MUST_USE;

#endif
