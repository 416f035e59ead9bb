/* SPDX-License-Identifier: MIT */
/* backfill.c - `ecworker backfill`: one message per source entity. The
 * scan selects only the keys, pages through continuation tokens as it goes,
 * and paces the puts with a token bucket (pace.h). A put that fails after the
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

int ecw_backfill(struct ecw_backfill_result *r, const struct ecw_config *cfg, const struct ecw_job_def *job,
		 const struct ecw_backfill_options *opts)
{
	struct ecw_query_options qo = {.filter = opts->filter, .select = "PartitionKey", .top = 1000};
	struct ecw_queue_put_options po = {0, cfg->worker.message_ttl_s};
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct ecw_table_query *q = NULL;
	struct ecw_buf text;
	const char *table;
	int64_t t0 = ecw_clock_now_ms();
	struct ecw_progress prog;
	struct ecw_pace pace;
	int err;

	memset(r, 0, sizeof(*r));
	ecw_progress_init(&prog, "backfill", opts->progress, 0);
	ecw_pace_init(&pace, opts->rate);
	ecw_buf_init(&text, ECW_QUEUE_MAX_TEXT);
	if (!job->type->source_table || !(table = job->type->source_table(job->settings))) {
		err = ecw_error_set(ECW_EINVALID, "job '%s' (type %s) has no source table to scan", job->name,
				    job->type->name);
		goto done;
	}
	if ((err = ecw_connect(&acct, &c, cfg)) < 0 ||
	    (cfg->worker.create_missing &&
	     (err = ecw_queue_create(NULL, c, opts->queue ? opts->queue : cfg->worker.queue)) < 0) ||
	    (err = ecw_table_query_new(&q, c, table, &qo)) < 0)
		goto done;
	for (;;) {
		struct ecw_entity *e = NULL;

		if (opts->stop && *opts->stop) {
			r->stopped = true;
			break;
		}
		if ((err = ecw_table_query_next(&e, q)) == ECW_ENOTABLE) {
			/* Never an empty table: nothing is enqueued from it. */
			err = ecw_error_set(ECW_ENOTABLE,
					    "the source table '%s' of job '%s' does not exist: nothing was "
					    "enqueued (correct the job's table name, or create the table)",
					    table, job->name);
			goto done;
		}
		if (err < 0)
			goto done;
		if (!e)
			break;
		r->scanned++;
		ecw_pace_take(&pace, opts->stop);
		ecw_buf_reset(&text);
		if (ecw_message_encode(&text, job->name, ecw_entity_pk(e), ecw_entity_rk(e), NULL, NULL,
				       false) < 0 ||
		    ecw_queue_put(NULL, c, opts->queue ? opts->queue : cfg->worker.queue, text.ptr, text.len,
				  &po) < 0) {
			r->failed++;
			struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "backfill_put_failed");
			ecw_log_str(l, "pk", ecw_entity_pk(e));
			ecw_log_str(l, "rk", ecw_entity_rk(e));
			ecw_log_str(l, "error", ecw_error_last()->message);
			ecw_log_end(l);
		} else {
			r->enqueued++;
		}
		ecw_entity_free(e);
		show(&prog, r, false);
	}
	err = 0;
done:
	r->seconds = (double)(ecw_clock_now_ms() - t0) / 1000.0;
	show(&prog, r, true);
	ecw_table_query_free(q);
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_buf_dispose(&text);
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
		"(a new index, say) is built over what already exists. The worker then processes\n"
		"them like any other message. Progress goes to stderr when it is a terminal; a\n"
		"summary ends the run. Ctrl-C stops after the message in hand.\n\n"
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
