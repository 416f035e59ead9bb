/* SPDX-License-Identifier: MIT */
/* backfill.c - `ecworker backfill`: one message per source entity. The
 * scan selects only the keys, pages through continuation tokens as it goes,
 * and paces the puts with a token bucket (pace.h). A job whose source is no
 * table (a move from blobs) walks its source's keys itself (source_keys). A put that fails after the
 * client's retries is counted and reported, never silently dropped. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backfill.h"
#include "cmd.h"
#include "ecw_config.h"
#include "connect.h"
#include "ecw_clock.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "message.h"
#include "ecw_pace.h"
#include "ecw_progress.h"

static void show(struct ecw_progress *p, const struct ecw_backfill_result *r, bool final)
{
	char detail[96];

	snprintf(detail, sizeof(detail), "%llu scanned, %llu failed", (unsigned long long)r->scanned,
		 (unsigned long long)r->failed);
	ecw_progress_show(p, r->enqueued, detail, final);
}

/* What one enqueue needs, for each key of the scan. */
struct put_state {
	struct ecw_backfill_result *r;
	const struct ecw_config *cfg;
	const struct ecw_job_def *job;
	const struct ecw_backfill_options *opts;
	struct ecw_client *c;
	struct ecw_buf text;
	struct ecw_progress prog;
	struct ecw_pace pace;
};

/* One message for (pk, rk); a failed put is counted and logged. Returns
 * non-zero to stop the walk (interrupted). */
static int put_one(void *arg, const char *pk, const char *rk)
{
	struct put_state *st = arg;
	struct ecw_backfill_result *r = st->r;
	struct ecw_queue_put_options po = {0, st->cfg->worker.message_ttl_s};

	if (st->opts->stop && *st->opts->stop) {
		r->stopped = true;
		return 1;
	}
	r->scanned++;
	ecw_pace_take(&st->pace, st->opts->stop);
	ecw_buf_reset(&st->text);
	if (ecw_message_encode(&st->text, st->job->name, pk, rk, NULL, NULL, false) < 0 ||
	    ecw_queue_put(NULL, st->c, st->opts->queue ? st->opts->queue : st->cfg->worker.queue,
			  st->text.ptr, st->text.len, &po) < 0) {
		r->failed++;
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "backfill_put_failed");
		ecw_log_str(l, "pk", pk);
		ecw_log_str(l, "rk", rk);
		ecw_log_str(l, "error", ecw_error_last()->message);
		ecw_log_end(l);
	} else {
		r->enqueued++;
	}
	show(&st->prog, r, false);
	return 0;
}

/* The source table, keys only, page by page. */
static int scan_table(struct put_state *st, const char *table)
{
	struct ecw_query_options qo = {.filter = st->opts->filter, .select = "PartitionKey", .top = 1000};
	struct ecw_table_query *q = NULL;
	int err;

	if ((err = ecw_table_query_new(&q, st->c, table, &qo)) < 0)
		return err;
	for (;;) {
		struct ecw_entity *e = NULL;

		if ((err = ecw_table_query_next(&e, q)) == ECW_ENOTABLE) {
			/* Never an empty table: nothing is enqueued from it. */
			err = ecw_error_set(ECW_ENOTABLE,
					    "the source table '%s' of job '%s' does not exist: nothing was "
					    "enqueued (correct the job's table name, or create the table)",
					    table, st->job->name);
			break;
		}
		if (err < 0 || !e)
			break;
		int stop = put_one(st, ecw_entity_pk(e), ecw_entity_rk(e));
		ecw_entity_free(e);
		if (stop)
			break;
	}
	ecw_table_query_free(q);
	return err;
}

int ecw_backfill(struct ecw_backfill_result *r, const struct ecw_config *cfg, const struct ecw_job_def *job,
		 const struct ecw_backfill_options *opts)
{
	struct put_state st = {.r = r, .cfg = cfg, .job = job, .opts = opts};
	struct ecw_account *acct = NULL;
	const char *table = NULL;
	int64_t t0 = ecw_clock_now_ms();
	int err;

	memset(r, 0, sizeof(*r));
	ecw_progress_init(&st.prog, "backfill", opts->progress, 0);
	ecw_pace_init(&st.pace, opts->rate);
	ecw_buf_init(&st.text, ECW_QUEUE_MAX_TEXT);
	if (job->type->source_table)
		table = job->type->source_table(job->settings);
	if (!table && !job->type->source_keys) {
		err = ecw_error_set(ECW_EINVALID, "job '%s' (type %s) has no source table to scan", job->name,
				    job->type->name);
		goto done;
	}
	if (!table && opts->filter) {
		err = ecw_error_set(
			ECW_EINVALID,
			"job '%s' reads blobs, not a table: --filter (a table's $filter) does not "
			"apply",
			job->name);
		goto done;
	}
	if ((err = ecw_connect(&acct, &st.c, cfg)) < 0 ||
	    (cfg->worker.create_missing &&
	     (err = ecw_queue_create(NULL, st.c, opts->queue ? opts->queue : cfg->worker.queue)) < 0))
		goto done;
	err = table ? scan_table(&st, table) : job->type->source_keys(job->settings, st.c, put_one, &st);
	if (err > 0)
		err = 0; /* stopped */
done:
	r->seconds = (double)(ecw_clock_now_ms() - t0) / 1000.0;
	show(&st.prog, r, true);
	ecw_client_free(st.c);
	ecw_account_free(acct);
	ecw_buf_dispose(&st.text);
	return err;
}

static volatile sig_atomic_t backfill_stop;

static void on_interrupt(int sig)
{
	(void)sig;
	backfill_stop = 1;
}

int ecw_cmd_backfill(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker backfill [-c FILE] JOB [--filter ODATA] [--rate N] [--queue NAME]\n\n"
		"Scans JOB's source table and enqueues one message per entity, so derived data\n"
		"(a new index, say) is built over what already exists (a move from blobs: one per\n"
		"blob of its container). The worker then processes them like any other message.\n"
		"Progress goes to stderr when it is a terminal; a summary ends the run. Ctrl-C\n"
		"stops after the message in hand.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"      --filter ODATA  only entities matching this $filter, e.g. \"PartitionKey eq 'Sales'\"\n"
		"      --rate N        at most N messages per second (default: as fast as storage allows)\n"
		"      --queue NAME    put them on NAME, one of worker.queues (a low-weight bulk queue,\n"
		"                      so that a big backfill does not starve other messages)\n"
		"  -h, --help          this text\n\n"
		"Exit status: 0 all enqueued, 1 some puts failed or the scan failed, 2 usage.\n";
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'},
		{"filter", required_argument, NULL, 'f'}, {"rate", required_argument, NULL, 'r'},
		{"queue", required_argument, NULL, 'q'},  {NULL, 0, NULL, 0},
	};
	struct ecw_backfill_options bo = {.stop = &backfill_stop};
	struct ecw_backfill_result res;
	struct sigaction sa;
	const struct ecw_job_def *job;
	struct ecw_config *cfg = NULL;
	const char *path = NULL;
	char *end;
	int ch, rc = ECW_EXIT_USAGE;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'f': bo.filter = optarg; break;
		case 'q': bo.queue = optarg; break;
		case 'r':
			bo.rate = strtod(optarg, &end);
			if (end == optarg || *end || bo.rate <= 0) {
				fprintf(stderr, "backfill: --rate must be a positive number\n");
				return ECW_EXIT_USAGE;
			}
			break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return ECW_EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "backfill: expected JOB\n");
		fputs(help, stderr);
		return ECW_EXIT_USAGE;
	}
	if (!(cfg = ecw_cli_load_config(path)))
		return ECW_EXIT_USAGE;
	if (bo.queue && !ecw_cli_queue(cfg, "backfill", bo.queue))
		goto done;
	if (!(job = ecw_config_job(cfg, argv[optind]))) {
		fprintf(stderr, "backfill: no job named '%s' in %s\n", argv[optind], cfg->file);
		goto done;
	}
	ecw_log_setup(cfg->log.level, cfg->log.format);
	bo.progress = isatty(2);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_interrupt;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (ecw_backfill(&res, cfg, job, &bo) < 0) {
		fprintf(stderr, "backfill: %s\n", ecw_error_last()->message);
		rc = 1;
		goto done;
	}
	printf("backfill %s: %llu scanned, %llu enqueued, %llu failed in %.1f s%s\n", job->name,
	       (unsigned long long)res.scanned, (unsigned long long)res.enqueued,
	       (unsigned long long)res.failed, res.seconds, res.stopped ? " (stopped early)" : "");
	rc = res.failed ? 1 : 0;
done:
	ecw_config_free(cfg);
	return rc;
}
