/* SPDX-License-Identifier: MIT */
/* audit.c - `ecworker audit`: compares each auditable job's derived data with
 * a recomputation from its source, both directions, and with --repair fixes
 * what it found through the job's own run (the design is in ecw_audit.h).
 * This file owns the options, progress, the report (a table and a few
 * examples per kind, keys escaped for the terminal, and what a job's audit
 * could not check, its limits; or one JSON object per job per line),
 * --via-queue's messages and the exit status. Running one job's audit, paced
 * at --rate (storage requests a second, repairs included), is
 * worker/schedule/audit_run.c's, which the scheduled audits share; the job types own
 * their scans (jobs/move.c, jobs/index.c, jobs/fanout_audit.c,
 * jobs/index_list_audit.c, ...). Memory: per job, the counts and at most
 * AUDIT_EXAMPLES copied examples of each kind, freed before the next job. */
#include <getopt.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "schedule.h"
#include "cmd.h"
#include "connect.h"
#include "message.h"
#include "ecw_audit.h"
#include "ecw_buf.h"
#include "ecw_clock.h"
#include "ecw_config.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_progress.h"

#define AUDIT_EXAMPLES 3            /* kept per kind and job */
#define AUDIT_PROGRESS_LOG_MS 10000 /* a progress log line this often when stderr is no terminal */

static const char help[] =
	"usage: ecworker audit [-c FILE] [JOB...] [--repair [--via-queue [--queue NAME]]] [--json]\n"
	"                      [--rate N] [--partition PK]\n\n"
	"Compares each job's derived data with a recomputation from its source, in both\n"
	"directions, and reports what differs: missing (a source's derived entity is not\n"
	"there), stale (it differs; a move: the entity is in both places, identical),\n"
	"orphan (its source is gone or no longer gives it), conflict (two claims the audit\n"
	"will not choose between). Without JOB, every job whose type can be audited (move,\n"
	"index, index-list, fanout, blob-ref and export). A part a job's audit could not\n"
	"check is printed as a limit (\"limits\" in --json). Read-only unless --repair.\n\n"
	"  -c, --config FILE    configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
	"      --repair         fix each finding through the job's own run, as a message\n"
	"                       would (conflicts are never repaired)\n"
	"      --via-queue      with --repair: enqueue the job's message for each source to\n"
	"                       repair instead of running the job here; the workers repair\n"
	"                       it (\"repaired\" then counts the messages enqueued)\n"
	"      --queue NAME     with --via-queue: put them on NAME, one of worker.queues\n"
	"      --json           one JSON object per job per line on stdout\n"
	"      --rate N         at most N storage requests per second (repairs included)\n"
	"      --partition PK   only sources of this PartitionKey\n"
	"  -h, --help           this text\n\n"
	"Exit status: 0 consistent (with --repair: everything found was repaired),\n"
	"3 drift found and not all repaired, 1 runtime failure, 2 usage or configuration.\n";

int ecw_audit_exit_status(const struct ecw_audit_counts *total, bool failed)
{
	uint64_t found = 0;

	if (failed)
		return 1;
	for (int k = 0; k < ECW_AUDIT_KINDS; k++)
		found += total->found[k];
	return found > total->repaired ? ECW_EXIT_DRIFT : 0;
}

/* ---- one job's report ---- */

struct example {
	enum ecw_audit_kind kind;
	char *table, *pk, *rk, *source_pk, *source_rk, *error;
	const char *detail; /* a static phrase */
	bool repaired;
};

struct report {
	const struct ecw_job_def *job;
	struct example ex[ECW_AUDIT_KINDS][AUDIT_EXAMPLES];
	size_t nex[ECW_AUDIT_KINDS];
	bool oom; /* an example could not be copied: the counts stay right */
	struct ecw_progress prog;
	bool log_progress;
	int64_t last_log_ms;
	/* --via-queue: where a repair's message goes, and on what */
	const struct ecw_config *cfg;
	const char *queue;
	struct ecw_client *client;
	struct ecw_buf text;
};

static char *dup_or_null(const char *s, bool *oom)
{
	char *d;

	if (!s)
		return NULL;
	if (!(d = strdup(s)))
		*oom = true;
	return d;
}

static void report_dispose(struct report *r)
{
	for (int k = 0; k < ECW_AUDIT_KINDS; k++)
		for (size_t i = 0; i < r->nex[k]; i++) {
			struct example *x = &r->ex[k][i];
			free(x->table);
			free(x->pk);
			free(x->rk);
			free(x->source_pk);
			free(x->source_rk);
			free(x->error);
		}
	memset(r->nex, 0, sizeof(r->nex));
}

static void on_finding(const struct ecw_audit_finding *f, void *payload)
{
	struct report *r = payload;
	struct example *x;

	if (r->nex[f->kind] >= AUDIT_EXAMPLES)
		return;
	x = &r->ex[f->kind][r->nex[f->kind]++];
	memset(x, 0, sizeof(*x));
	x->kind = f->kind;
	x->detail = f->detail;
	x->repaired = f->repaired;
	x->table = dup_or_null(f->table, &r->oom);
	x->pk = dup_or_null(f->pk, &r->oom);
	x->rk = dup_or_null(f->rk, &r->oom);
	x->source_pk = dup_or_null(f->source_pk, &r->oom);
	x->source_rk = dup_or_null(f->source_rk, &r->oom);
	x->error = dup_or_null(f->error, &r->oom);
}

static void on_checked(const struct ecw_audit_counts *c, void *payload)
{
	struct report *r = payload;
	uint64_t found = 0;
	char detail[128];

	for (int k = 0; k < ECW_AUDIT_KINDS; k++)
		found += c->found[k];
	snprintf(detail, sizeof(detail), "%llu found, %llu repaired", (unsigned long long)found,
		 (unsigned long long)c->repaired);
	ecw_progress_show(&r->prog, c->checked, detail, false);
	if (r->log_progress && ecw_clock_now_ms() - r->last_log_ms >= AUDIT_PROGRESS_LOG_MS) {
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "audit_progress");
		r->last_log_ms = ecw_clock_now_ms();
		ecw_log_str(l, "job", r->job->name);
		ecw_log_int(l, "checked", (long long)c->checked);
		ecw_log_int(l, "found", (long long)found);
		ecw_log_int(l, "repaired", (long long)c->repaired);
		ecw_log_end(l);
	}
}

/* --via-queue: the job's message, as `ecworker enqueue` would put it, with
 * "audit" as its trace id: for the source (pk, rk), or for a keyless job
 * (an export's window) with fields ("name=value") and no keys. */
static int put_message(struct report *r, const char *pk, const char *rk, char *const *fields)
{
	struct ecw_queue_put_options po = {0, r->cfg->worker.message_ttl_s};
	int err;

	ecw_buf_reset(&r->text);
	if ((err = ecw_message_encode(&r->text, r->job->name, pk, rk, "audit", fields, false)) < 0)
		return err;
	return ecw_queue_put(NULL, r->client, r->queue, r->text.ptr, r->text.len, &po);
}

static int on_requeue(const char *pk, const char *rk, void *payload)
{
	return put_message(payload, pk, rk, NULL);
}

static int on_requeue_fields(char *const *fields, void *payload)
{
	return put_message(payload, NULL, NULL, fields);
}

/* ---- output ---- */

static void print_header(void)
{
	printf("%-24s %-6s %9s %8s %8s %8s %8s %8s\n", "job", "type", "checked", "missing", "stale", "orphan",
	       "conflict", "repaired");
}

static void print_human(const struct report *r, const struct ecw_audit_counts *c, const char *error)
{
	struct ecw_buf a, b, s1, s2, e;

	ecw_buf_init(&a, 4 * ECW_KEY_MAX);
	ecw_buf_init(&b, 4 * ECW_KEY_MAX);
	ecw_buf_init(&s1, 4 * ECW_KEY_MAX);
	ecw_buf_init(&s2, 4 * ECW_KEY_MAX);
	ecw_buf_init(&e, 4096);
	printf("%-24s %-6s %9llu %8llu %8llu %8llu %8llu %8llu\n", ecw_cli_term(&a, r->job->name),
	       r->job->type->name, (unsigned long long)c->checked,
	       (unsigned long long)c->found[ECW_AUDIT_MISSING], (unsigned long long)c->found[ECW_AUDIT_STALE],
	       (unsigned long long)c->found[ECW_AUDIT_ORPHAN],
	       (unsigned long long)c->found[ECW_AUDIT_CONFLICT], (unsigned long long)c->repaired);
	for (int k = 0; k < ECW_AUDIT_KINDS; k++)
		for (size_t i = 0; i < r->nex[k]; i++) {
			const struct example *x = &r->ex[k][i];
			printf("  %-8s %s: %s/%s", ecw_audit_kind_name(x->kind), x->table ? x->table : "?",
			       ecw_cli_term(&a, x->pk), ecw_cli_term(&b, x->rk));
			if (x->source_pk && x->source_rk)
				printf(" (source %s/%s)", ecw_cli_term(&s1, x->source_pk),
				       ecw_cli_term(&s2, x->source_rk));
			printf(": %s%s%s%s\n", x->detail ? x->detail : "", x->repaired ? "; repaired" : "",
			       x->error ? "; repair failed: " : "",
			       x->error ? ecw_cli_term(&e, x->error) : "");
		}
	for (size_t i = 0; i < c->nlimits; i++)
		printf("  limit: %s\n", c->limits[i]);
	if (error)
		printf("  error: %s\n", ecw_cli_term(&e, error));
	ecw_buf_dispose(&a);
	ecw_buf_dispose(&b);
	ecw_buf_dispose(&s1);
	ecw_buf_dispose(&s2);
	ecw_buf_dispose(&e);
}

static void json_add_str(struct json_object *o, const char *key, const char *v)
{
	json_object_object_add(o, key, v ? json_object_new_string(v) : NULL);
}

static void print_json(const struct report *r, const struct ecw_audit_counts *c, const char *error,
		       bool stopped, uint64_t requests)
{
	struct json_object *o = json_object_new_object(), *ex = json_object_new_array(),
			   *limits = json_object_new_array();

	if (!o || !ex || !limits) {
		json_object_put(o);
		json_object_put(ex);
		json_object_put(limits);
		fprintf(stderr, "audit: out of memory\n");
		return;
	}
	json_add_str(o, "job", r->job->name);
	json_add_str(o, "type", r->job->type->name);
	json_object_object_add(o, "checked", json_object_new_int64((int64_t)c->checked));
	for (int k = 0; k < ECW_AUDIT_KINDS; k++)
		json_object_object_add(o, ecw_audit_kind_name(k),
				       json_object_new_int64((int64_t)c->found[k]));
	json_object_object_add(o, "repaired", json_object_new_int64((int64_t)c->repaired));
	json_object_object_add(o, "requests", json_object_new_int64((int64_t)requests));
	if (r->cfg)
		json_object_object_add(o, "via_queue", json_object_new_boolean(true));
	json_object_object_add(o, "complete", json_object_new_boolean(!error && !stopped));
	if (error)
		json_add_str(o, "error", error);
	for (size_t i = 0; i < c->nlimits; i++)
		json_object_array_add(limits, json_object_new_string(c->limits[i]));
	json_object_object_add(o, "limits", limits);
	for (int k = 0; k < ECW_AUDIT_KINDS; k++)
		for (size_t i = 0; i < r->nex[k]; i++) {
			const struct example *x = &r->ex[k][i];
			struct json_object *e = json_object_new_object();
			if (!e)
				continue;
			json_add_str(e, "kind", ecw_audit_kind_name(x->kind));
			json_add_str(e, "table", x->table);
			json_add_str(e, "pk", x->pk);
			json_add_str(e, "rk", x->rk);
			json_add_str(e, "source_pk", x->source_pk);
			json_add_str(e, "source_rk", x->source_rk);
			json_add_str(e, "detail", x->detail);
			json_object_object_add(e, "repaired", json_object_new_boolean(x->repaired));
			if (x->error)
				json_add_str(e, "error", x->error);
			json_object_array_add(ex, e);
		}
	json_object_object_add(o, "examples", ex);
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

/* ---- choosing the jobs ---- */

static bool auditable(const struct ecw_job_def *j)
{
	return j->type->audit != NULL;
}

/* Names alike, NULL (a side in blobs) alike with NULL. */
static bool same_side(const char *a, const char *b)
{
	return a && b ? strcmp(a, b) == 0 : a == b;
}

/* Two moves of opposite directions (from A to B, from B to A) both find an
 * entity that is in both tables; repaired, it would be completed in the
 * direction of whichever ran first, so --repair needs one named. A move to
 * blobs and one from blobs into its table count as opposite (whichever
 * containers they name: naming the job is never wrong). */
/* A move with a side in blobs: the restore names its container. */
static bool moves_blobs(const struct ecw_job_def *j)
{
	return j->type->container && j->type->container(j->settings);
}

static const struct ecw_job_def *inverse_move(const struct ecw_config *cfg, const struct ecw_job_def *j)
{
	const char *from, *to;

	if (strcmp(j->type->name, "move") != 0 || !j->type->source_table || !j->type->target_table)
		return NULL;
	from = j->type->source_table(j->settings);
	to = j->type->target_table(j->settings);
	for (size_t i = 0; i < cfg->njobs; i++) {
		const struct ecw_job_def *o = &cfg->jobs[i];
		if (o == j || o->type != j->type)
			continue;
		if (same_side(o->type->source_table(o->settings), to) &&
		    same_side(o->type->target_table(o->settings), from))
			return o;
	}
	return NULL;
}

/* The jobs to audit, in the configuration's order (all auditable ones) or in
 * the order named; NULL-terminated, heap (free()). Usage problems printed:
 * returns NULL. */
static const struct ecw_job_def **choose_jobs(const struct ecw_config *cfg, char **names, int n, bool repair)
{
	const struct ecw_job_def **v = calloc((n ? (size_t)n : cfg->njobs) + 1, sizeof(*v));
	struct ecw_buf b;
	size_t k = 0;
	bool bad = false;

	if (!v) {
		fprintf(stderr, "audit: out of memory\n");
		return NULL;
	}
	ecw_buf_init(&b, 4096);
	for (int i = 0; i < n; i++) {
		const struct ecw_job_def *j = ecw_config_job(cfg, names[i]);
		if (!j) {
			fprintf(stderr, "audit: no job named '%s' in %s\n", ecw_cli_term(&b, names[i]),
				cfg->file);
			bad = true;
		} else if (!auditable(j)) {
			fprintf(stderr, "audit: job '%s' is of type %s, which cannot be audited yet\n",
				j->name, j->type->name);
			bad = true;
		} else {
			v[k++] = j;
		}
	}
	for (size_t i = 0; n == 0 && i < cfg->njobs; i++) {
		const struct ecw_job_def *j = &cfg->jobs[i], *inv;
		if (!auditable(j)) {
			if (j->type->source_table)
				fprintf(stderr, "audit: skipping job '%s': type %s cannot be audited yet\n",
					j->name, j->type->name);
			continue;
		}
		if (repair && (inv = inverse_move(cfg, j))) {
			fprintf(stderr,
				"audit: --repair: jobs '%s' and '%s' move between the same %s in opposite "
				"directions; name the one whose direction completes a move found in both\n",
				j->name, inv->name,
				moves_blobs(j) || moves_blobs(inv) ? "table and blobs" : "tables");
			bad = true;
		}
		v[k++] = j;
	}
	ecw_buf_dispose(&b);
	if (bad) {
		free(v);
		return NULL;
	}
	return v;
}

/* ---- the command ---- */

static atomic_bool audit_stop; /* lock-free (audit_run.c): a signal handler may set it */

static void on_interrupt(int sig)
{
	(void)sig;
	atomic_store(&audit_stop, true);
}

struct audit_opts {
	const char *config, *partition;
	const char *queue; /* --via-queue's; NULL: worker.queue */
	bool repair, json, via_queue;
	double rate;
	const struct ecw_config *cfg;
};

/* Audits one job and prints its report; false when it failed. */
static bool audit_one(struct ecw_client *c, const struct ecw_job_def *job, const struct audit_opts *o,
		      struct ecw_audit_counts *total)
{
	struct report *r = calloc(1, sizeof(*r));
	struct ecw_audit_run_opts ro = {.partition = o->partition,
					.repair = o->repair,
					.cfg = o->cfg,
					.rate = o->rate,
					.stop = &audit_stop,
					.on_finding = on_finding,
					.on_checked = on_checked};
	struct ecw_audit_counts counts;
	struct ecw_client_stats st;
	char error[600] = "";
	uint64_t requests_before;
	bool stopped = false;
	int err;

	if (!r) {
		fprintf(stderr, "audit: out of memory\n");
		return false;
	}
	r->job = job;
	r->client = c;
	r->log_progress = !isatty(2);
	r->last_log_ms = ecw_clock_now_ms();
	ecw_buf_init(&r->text, ECW_QUEUE_MAX_TEXT);
	if (o->via_queue) {
		r->cfg = o->cfg;
		r->queue = o->queue ? o->queue : o->cfg->worker.queue;
		ro.requeue = on_requeue;
		ro.requeue_fields = on_requeue_fields;
	}
	ecw_client_stats(&st, c);
	requests_before = st.requests;
	ecw_progress_init(&r->prog, job->name, isatty(2) && !o->json, 0);
	ro.payload = r;
	if ((err = ecw_audit_run(&counts, &stopped, c, job, &ro)) < 0)
		snprintf(error, sizeof(error), "%s",
			 ecw_error_last()->message[0] ? ecw_error_last()->message : ecw_error_name(err));
	ecw_progress_show(&r->prog, counts.checked, "done", true);
	if (o->json) {
		ecw_client_stats(&st, c);
		print_json(r, &counts, err < 0 ? error : NULL, stopped, st.requests - requests_before);
	} else {
		print_human(r, &counts, err < 0 ? error : NULL);
	}
	if (r->oom)
		fprintf(stderr, "audit: out of memory keeping examples (the counts are right)\n");
	fflush(stdout);
	total->checked += counts.checked;
	total->repaired += counts.repaired;
	for (int k = 0; k < ECW_AUDIT_KINDS; k++) {
		total->found[k] += counts.found[k];
		total->repaired_kind[k] += counts.repaired_kind[k];
	}
	report_dispose(r);
	ecw_buf_dispose(&r->text);
	free(r);
	return err == 0 && !stopped;
}

int ecw_cmd_audit(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{"repair", no_argument, NULL, 'R'},
		{"json", no_argument, NULL, 'j'},
		{"rate", required_argument, NULL, 'r'},
		{"partition", required_argument, NULL, 'p'},
		{"via-queue", no_argument, NULL, 'q'},
		{"queue", required_argument, NULL, 'Q'},
		{NULL, 0, NULL, 0},
	};
	struct audit_opts o = {0};
	struct ecw_audit_counts total = {0};
	const struct ecw_job_def **jobs = NULL;
	struct ecw_config *cfg = NULL;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct sigaction sa;
	bool failed = false;
	char *end;
	int ch, rc = ECW_EXIT_USAGE;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': o.config = optarg; break;
		case 'R': o.repair = true; break;
		case 'j': o.json = true; break;
		case 'q': o.via_queue = true; break;
		case 'Q': o.queue = optarg; break;
		case 'p':
			if (ecw_entity_key_check(optarg, "--partition") < 0) {
				fprintf(stderr,
					"audit: --partition is no PartitionKey the service accepts\n");
				return ECW_EXIT_USAGE;
			}
			o.partition = optarg;
			break;
		case 'r':
			o.rate = strtod(optarg, &end);
			if (end == optarg || *end || !(o.rate > 0)) {
				fprintf(stderr, "audit: --rate must be a positive number\n");
				return ECW_EXIT_USAGE;
			}
			break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return ECW_EXIT_USAGE;
		}
	}
	if (o.via_queue && !o.repair) {
		fprintf(stderr, "audit: --via-queue goes with --repair\n");
		return ECW_EXIT_USAGE;
	}
	if (o.queue && !o.via_queue) {
		fprintf(stderr, "audit: --queue goes with --via-queue\n");
		return ECW_EXIT_USAGE;
	}
	if (!(cfg = ecw_cli_load_config(o.config)))
		return ECW_EXIT_USAGE;
	if (o.queue && !ecw_cli_queue(cfg, "audit", o.queue))
		goto done;
	o.cfg = cfg;
	if (!(jobs = choose_jobs(cfg, argv + optind, argc - optind, o.repair)))
		goto done;
	ecw_log_setup(cfg->log.level, cfg->log.format);
	if (!jobs[0]) {
		fprintf(stderr, "audit: no job to audit in %s\n", cfg->file);
		goto done;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_interrupt;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (ecw_connect(&acct, &c, cfg) < 0 ||
	    (o.via_queue && cfg->worker.create_missing &&
	     ecw_queue_create(NULL, c, o.queue ? o.queue : cfg->worker.queue) < 0)) {
		fprintf(stderr, "audit: %s\n", ecw_error_last()->message);
		rc = 1;
		goto done;
	}
	if (!o.json) {
		if (o.via_queue)
			printf("--via-queue: \"repaired\" counts the messages enqueued; audit again once the "
			       "workers have run them\n");
		print_header();
	}
	for (size_t i = 0; jobs[i] && !atomic_load(&audit_stop); i++)
		if (!audit_one(c, jobs[i], &o, &total))
			failed = true;
	rc = ecw_audit_exit_status(&total, failed || atomic_load(&audit_stop));
done:
	free(jobs);
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_config_free(cfg);
	return rc;
}
