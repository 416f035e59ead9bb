/* SPDX-License-Identifier: MIT */
/* status.c - `ecworker status`: what an operator checks first. The job and
 * poison queues' approximate depth and the age of their oldest visible
 * message (from a peek), the poison messages counted by job and reason (a
 * bounded scan: see poison_scan.h), and whether each table the jobs read or
 * write exists. Reads only; releases what the scan received. */
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "connect.h"
#include "ecw_buf.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "pause.h"
#include "poison_scan.h"

struct queue_state {
	const char *name;
	long long depth;
	struct ecw_pause pause; /* `ecworker pause`, from the queue's metadata */
	time_t oldest;          /* 0 when no visible message */
	bool missing;           /* the queue does not exist */
	char error[512];        /* "" when read */
};

struct tally {
	struct json_object *counts; /* "<length of job>:<job><reason>" -> count */
};

static enum ecw_scan_verdict tally_visit(void *payload, struct ecw_client *c, const struct ecw_scan_item *it)
{
	struct tally *t = payload;
	const struct ecw_poison_view *v = it->view;
	const char *job = v->envelope ? (v->job ? v->job : "(no job)") : "(foreign)";
	struct json_object *n;
	struct ecw_buf key;

	/* The job's length first: a job name is the message's to choose, tabs
	 * and all, so no separator could tell where it ends. */
	(void)c;
	ecw_buf_init(&key, 0);
	if (ecw_buf_printf(&key, "%zu:%s%s", strlen(job), job, v->envelope && v->reason ? v->reason : "-") ==
	    0) {
		if (json_object_object_get_ex(t->counts, ecw_buf_cstr(&key), &n))
			json_object_set_int64(n, json_object_get_int64(n) + 1);
		else
			json_object_object_add(t->counts, ecw_buf_cstr(&key), json_object_new_int64(1));
	}
	ecw_buf_dispose(&key);
	return ECW_SCAN_KEEP;
}

static void read_queue(struct queue_state *q, struct ecw_client *c)
{
	struct ecw_queue_msg *m = NULL;
	struct ecw_queue_meta *meta = calloc(1, sizeof(*meta));
	size_t n = 0;
	int err;

	if (!meta) {
		snprintf(q->error, sizeof(q->error), "out of memory");
		return;
	}
	err = ecw_queue_meta_get(meta, c, q->name);
	q->depth = meta->approximate_messages;
	ecw_pause_from_meta(&q->pause, meta);
	free(meta);
	if (err < 0 || (err = ecw_queue_peek(&m, &n, c, q->name, 1)) < 0) {
		if (err == ECW_ENOTFOUND)
			q->missing = true; /* not created yet: the worker creates it at start */
		else
			snprintf(q->error, sizeof(q->error), "%s", ecw_error_last()->message);
		return;
	}
	q->oldest = n ? m[0].insertion_time : 0;
	ecw_queue_msgs_free(m, n);
}

/* A job queue of the configuration at a glance: its depth, its pause and
 * its poison queue's depth (one Get Queue Metadata each; -1: could not be
 * read, or the queue does not exist yet). */
struct queue_glance {
	long long depth, poison_depth;
	bool paused;
};

static long long depth_of(struct ecw_client *c, const char *queue, bool *paused)
{
	struct ecw_queue_meta *meta = calloc(1, sizeof(*meta));
	struct ecw_pause pause = {0};
	long long depth = -1;

	if (meta && ecw_queue_meta_get(meta, c, queue) == 0) {
		depth = meta->approximate_messages;
		ecw_pause_from_meta(&pause, meta);
	}
	free(meta);
	if (paused)
		*paused = pause.paused;
	return depth;
}

/* Every job queue, by name, weight, depth and pause: --queue NAME shows one
 * in detail. glance[] gets what the text output prints. */
static struct json_object *queues_json(struct queue_glance *glance, const struct ecw_config *cfg,
				       struct ecw_client *c, const struct queue_state *jq,
				       const struct queue_state *pq)
{
	struct json_object *all = json_object_new_array();

	for (size_t i = 0; i < cfg->worker.nqueues; i++) {
		const struct ecw_queue_def *qd = &cfg->worker.queues[i];
		struct json_object *q = json_object_new_object();
		struct queue_glance *g = &glance[i];

		if (strcmp(qd->name, jq->name) == 0) { /* the one in detail: read already */
			g->depth = jq->error[0] || jq->missing ? -1 : jq->depth;
			g->paused = jq->pause.paused;
			g->poison_depth = pq->error[0] || pq->missing ? -1 : pq->depth;
		} else {
			g->depth = depth_of(c, qd->name, &g->paused);
			g->poison_depth = depth_of(c, qd->poison, NULL);
		}
		json_object_object_add(q, "name", json_object_new_string(qd->name));
		json_object_object_add(q, "weight", json_object_new_int(qd->weight));
		json_object_object_add(q, "approximate_messages",
				       g->depth < 0 ? NULL : json_object_new_int64(g->depth));
		json_object_object_add(q, "paused", json_object_new_boolean(g->paused));
		json_object_object_add(q, "poison_queue", json_object_new_string(qd->poison));
		json_object_object_add(q, "poison_approximate_messages",
				       g->poison_depth < 0 ? NULL : json_object_new_int64(g->poison_depth));
		json_object_array_add(all, q);
	}
	return all;
}

/* The text form of queues_json, when there are several queues. */
static void print_glance(const struct queue_glance *glance, const struct ecw_config *cfg, const char *shown)
{
	char w[64], depth[32], poison[32];

	for (size_t i = 0; i < cfg->worker.nqueues; i++) {
		const struct ecw_queue_def *qd = &cfg->worker.queues[i];
		const struct queue_glance *g = &glance[i];

		snprintf(w, sizeof(w), "%s (weight %d)", qd->name, qd->weight);
		snprintf(depth, sizeof(depth), g->depth < 0 ? "not read" : "~%lld messages", g->depth);
		snprintf(poison, sizeof(poison), g->poison_depth < 0 ? "not read" : "~%lld", g->poison_depth);
		printf("%-13s %-32s %-18s poison %s%s\n", i == 0 ? "queues" : "", w, depth, poison,
		       g->paused ? ", PAUSED" : "");
	}
	printf("%-13s below: %s in detail (status --queue NAME for another)\n\n", "", shown);
}

/* 1 exists, 0 missing, -1 could not tell (error in the last error). */
static int table_exists(struct ecw_client *c, const char *table)
{
	struct ecw_entity *e = NULL;
	int err = ecw_table_get(&e, c, table, "ecw-status-probe", "");

	ecw_entity_free(e);
	if (err == 0)
		return 1;
	if (err == ECW_ENOTABLE)
		return 0;
	if (err == ECW_ENOTFOUND)
		return 1;
	return -1;
}

/* The tables the jobs name, each once, in configuration order. */
static size_t job_tables(const char **out, size_t cap, const struct ecw_config *cfg)
{
	size_t n = 0;

	for (size_t i = 0; i < cfg->njobs; i++) {
		const struct ecw_job_def *j = &cfg->jobs[i];
		const char *t[2] = {
			j->type->source_table ? j->type->source_table(j->settings) : NULL,
			j->type->target_table ? j->type->target_table(j->settings) : NULL,
		};
		for (int k = 0; k < 2; k++) {
			size_t m;
			if (!t[k])
				continue;
			for (m = 0; m < n && strcmp(out[m], t[k]) != 0; m++)
				;
			if (m == n && n < cap)
				out[n++] = t[k];
		}
	}
	return n;
}

static void age(char *out, size_t cap, time_t t, time_t now)
{
	char h[32];

	if (!t) {
		snprintf(out, cap, "none visible");
		return;
	}
	ecw_progress_human_age(h, sizeof(h), (long long)(now - t));
	snprintf(out, cap, "oldest %s", h);
}

static struct json_object *queue_json(const struct queue_state *q, time_t now)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "name", json_object_new_string(q->name));
	json_object_object_add(o, "exists", json_object_new_boolean(!q->missing));
	if (q->missing)
		return o;
	if (q->error[0]) {
		json_object_object_add(o, "error", json_object_new_string(q->error));
		return o;
	}
	json_object_object_add(o, "approximate_messages", json_object_new_int64(q->depth));
	if (q->pause.paused) {
		struct json_object *p = json_object_new_object();
		json_object_object_add(p, "at", json_object_new_string(q->pause.at));
		json_object_object_add(p, "by", json_object_new_string(q->pause.by));
		json_object_object_add(p, "reason", json_object_new_string(q->pause.reason));
		json_object_object_add(o, "paused", p);
	} else {
		json_object_object_add(o, "paused", json_object_new_boolean(false));
	}
	json_object_object_add(
		o, "oldest_visible_age_s",
		q->oldest ? json_object_new_int64(now > q->oldest ? (int64_t)(now - q->oldest) : 0) : NULL);
	return o;
}

int ecw_cmd_status(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker status [-c FILE] [--json] [--scan N] [--queue NAME]\n\n"
		"Shows the job queue's and the poison queue's approximate depth (it includes\n"
		"messages in flight) and the age of their oldest visible message; the poison\n"
		"messages counted by job and reason; and whether each table the jobs read or\n"
		"write exists. With several queues, every queue's depth, pause and poison depth\n"
		"come first, then the first queue (or --queue NAME) in detail. Changes nothing.\n"
		"When the poison queue holds more than 32 messages the count receives them\n"
		"(hidden for a moment, then released unchanged), at most N of them.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"      --json          one JSON object\n"
		"      --scan N        count at most N poison messages (default 1000)\n"
		"      --queue NAME    that job queue in detail (default: the first)\n"
		"  -h, --help          this text\n\n"
		"Exit status: 0 shown, 1 storage could not be read, 2 usage.\n";
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'},
		{"json", no_argument, NULL, 'j'},         {"scan", required_argument, NULL, 's'},
		{"queue", required_argument, NULL, 'q'},  {NULL, 0, NULL, 0},
	};
	const char *path = NULL, *tables[512], *queue = NULL;
	struct ecw_config *cfg = NULL;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct queue_state jq = {0}, pq = {0};
	struct queue_glance glance[ECW_CONFIG_QUEUES_MAX];
	struct tally t = {0};
	struct ecw_scan_result sr = {0};
	struct ecw_scan_options so = {0};
	struct json_object *out = NULL, *arr;
	bool json = false;
	long long scan = 1000;
	char *end, when[48];
	int ch, rc = 2, scan_err = 0;
	size_t ntables;
	time_t now = time(NULL);

	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'j': json = true; break;
		case 'q': queue = optarg; break;
		case 's':
			scan = strtoll(optarg, &end, 10);
			if (end == optarg || *end || scan < 1) {
				fprintf(stderr, "status: --scan must be a positive whole number, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "status: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!(cfg = ecw_cli_load_config(path)))
		return 2;
	ecw_log_setup(cfg->log.level, cfg->log.format);
	rc = 1;
	if (ecw_connect(&acct, &c, cfg) < 0) {
		fprintf(stderr, "status: %s\n", ecw_error_last()->message);
		goto done;
	}
	const struct ecw_queue_def *qd = ecw_cli_queue(cfg, "status", queue);
	if (!qd) {
		rc = 2;
		goto done;
	}
	jq.name = qd->name;
	pq.name = qd->poison;
	read_queue(&jq, c);
	read_queue(&pq, c);
	t.counts = json_object_new_object();
	if (!pq.error[0] && !pq.missing) {
		so.queue = pq.name;
		so.max_seen = (uint64_t)scan;
		so.peek_ok = true;
		so.hold_s = 30;
		if ((scan_err = ecw_poison_scan(&sr, c, &so, tally_visit, &t)) < 0)
			snprintf(pq.error, sizeof(pq.error), "%s", ecw_error_last()->message);
	}
	ntables = job_tables(tables, sizeof(tables) / sizeof(tables[0]), cfg);

	out = json_object_new_object();
	json_object_object_add(out, "queue", queue_json(&jq, now));
	json_object_object_add(out, "poison_queue", queue_json(&pq, now));
	json_object_object_add(out, "queues", queues_json(glance, cfg, c, &jq, &pq));
	arr = json_object_new_array();
	json_object_object_foreach(t.counts, key, val) {
		struct json_object *row = json_object_new_object();
		char *job;
		size_t job_len = strtoul(key, &job, 10);
		job++; /* the ':' */
		json_object_object_add(row, "job", json_object_new_string_len(job, (int)job_len));
		json_object_object_add(row, "reason", json_object_new_string(job + job_len));
		json_object_object_add(row, "count", json_object_get(val));
		json_object_array_add(arr, row);
	}
	if (!pq.error[0] && !pq.missing) {
		struct json_object *p = json_object_object_get(out, "poison_queue");
		json_object_object_add(p, "scanned", json_object_new_int64((int64_t)sr.seen));
		json_object_object_add(p, "scan_complete", json_object_new_boolean(sr.complete));
		json_object_object_add(p, "by_job_and_reason", json_object_get(arr));
	}
	json_object_object_add(out, "tables", json_object_new_array());
	for (size_t i = 0; i < ntables; i++) {
		struct json_object *row = json_object_new_object();
		int ex = table_exists(c, tables[i]);
		json_object_object_add(row, "name", json_object_new_string(tables[i]));
		if (ex < 0)
			json_object_object_add(row, "error",
					       json_object_new_string(ecw_error_last()->message));
		else
			json_object_object_add(row, "exists", json_object_new_boolean(ex == 1));
		json_object_array_add(json_object_object_get(out, "tables"), row);
	}

	if (json) {
		puts(json_object_to_json_string_ext(out,
						    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	} else {
		const struct queue_state *qs[2] = {&jq, &pq};
		const char *label[2] = {"queue", "poison queue"};
		if (cfg->worker.nqueues > 1)
			print_glance(glance, cfg, jq.name);
		for (int i = 0; i < 2; i++) {
			if (qs[i]->error[0] || qs[i]->missing) {
				printf("%-13s %-24s %s%s\n", label[i], qs[i]->name,
				       qs[i]->missing ? "missing" : "error: ",
				       qs[i]->missing ? "" : qs[i]->error);
				continue;
			}
			age(when, sizeof(when), qs[i]->oldest, now);
			printf("%-13s %-24s ~%lld messages, %s\n", label[i], qs[i]->name, qs[i]->depth, when);
			if (qs[i]->pause.paused) {
				struct ecw_buf safe;
				ecw_buf_init(&safe, 0);
				printf("%-13s %-24s PAUSED since %s by %s", "", "",
				       qs[i]->pause.at[0] ? qs[i]->pause.at : "(unknown)",
				       qs[i]->pause.by[0] ? qs[i]->pause.by : "(unknown)");
				printf("%s%s\n", qs[i]->pause.reason[0] ? ": " : "",
				       ecw_cli_term(&safe, qs[i]->pause.reason));
				ecw_buf_dispose(&safe);
			}
		}
		if (!pq.error[0] && sr.seen) {
			struct ecw_buf safe;

			ecw_buf_init(&safe, 0);
			printf("\npoison messages by job and reason (%llu counted%s):\n",
			       (unsigned long long)sr.seen, sr.complete ? "" : ", stopped at --scan");
			for (size_t i = 0; i < json_object_array_length(arr); i++) {
				struct json_object *row = json_object_array_get_idx(arr, i);
				printf("  %-24s ",
				       ecw_cli_term(&safe, json_object_get_string(
								   json_object_object_get(row, "job"))));
				printf("%-12s %lld\n",
				       ecw_cli_term(&safe, json_object_get_string(
								   json_object_object_get(row, "reason"))),
				       (long long)json_object_get_int64(
					       json_object_object_get(row, "count")));
			}
			ecw_buf_dispose(&safe);
		}
		if (ntables)
			printf("\ntables:\n");
		for (size_t i = 0; i < ntables; i++) {
			struct json_object *row =
				json_object_array_get_idx(json_object_object_get(out, "tables"), i);
			struct json_object *ex;
			printf("  %-24s %s\n", tables[i],
			       json_object_object_get_ex(row, "exists", &ex)
				       ? (json_object_get_boolean(ex) ? "exists" : "missing")
				       : json_object_get_string(json_object_object_get(row, "error")));
		}
	}
	json_object_put(arr);
	rc = jq.error[0] || pq.error[0] || scan_err < 0 ? 1 : 0;
done:
	json_object_put(out);
	json_object_put(t.counts);
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_config_free(cfg);
	return rc;
}
