/* cli.c - `ecworker run | check-config | enqueue`: argument parsing, loading
 * the configuration, and handing over to the runtime or the storage client. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backfill.h"
#include "cli.h"
#include "connect.h"
#include "ecw_config.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "message.h"
#include "runtime.h"

#define EXIT_USAGE 2

void ecw_cli_usage(void *file)
{
	fprintf(file, "usage: ecworker COMMAND [OPTIONS]\n\n"
		      "commands:\n"
		      "  run            run the worker until SIGTERM or SIGINT\n"
		      "  check-config   validate a configuration file and list every problem\n"
		      "  enqueue        put a well-formed job message on the job queue\n"
		      "  backfill       enqueue one message per entity of a job's source table\n"
		      "  poison         list, replay or purge poison messages (poison --help)\n"
		      "  status         queue depths, poison counts by job and reason, tables\n"
		      "  migrate        apply the configured migrations once (migrate status: their state)\n"
		      "  version        print the version\n"
		      "  help           this text\n\n"
		      "Every command takes --help. The configuration file is -c FILE, else $ECW_CONFIG,\n"
		      "else ./ecworker.yaml. Exit status: 0 ok, 2 usage or configuration error,\n"
		      "1 runtime failure.\n");
}

struct ecw_config *ecw_cli_load_config(const char *path)
{
	struct ecw_config_errors errs;
	struct ecw_config *cfg = NULL;

	ecw_config_errors_init(&errs);
	if (ecw_config_load(&cfg, path ? path : ecw_config_default_path(), &errs) < 0) {
		for (size_t i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.lines[i]);
		if (errs.n == 0)
			fprintf(stderr, "%s: %s\n", path ? path : ecw_config_default_path(),
				ecw_error_last()->message);
		cfg = NULL;
	}
	ecw_config_errors_dispose(&errs);
	return cfg;
}

static const struct option common_opts[] = {
	{"config", required_argument, NULL, 'c'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/* Parses -c/--help only. Returns -1 to continue, else an exit status. */
static int parse_common(const char **config, int argc, char **argv, const char *help)
{
	int ch;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", common_opts, NULL)) != -1) {
		switch (ch) {
		case 'c': *config = optarg; break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
		fputs(help, stderr);
		return EXIT_USAGE;
	}
	return -1;
}

int ecw_cmd_run(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker run [-c FILE]\n\n"
		"Receives messages from the job queue and runs the job each names, until SIGTERM\n"
		"or SIGINT. On the first signal it stops receiving, gives running jobs\n"
		"worker.shutdown_grace to finish, releases what is still held (visible again at\n"
		"once) and exits 0; a second signal exits at once (status 130).\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"  -h, --help          this text\n";
	const char *path = NULL;
	struct ecw_config *cfg;
	int rc;

	if ((rc = parse_common(&path, argc, argv, help)) >= 0)
		return rc;
	if (!(cfg = ecw_cli_load_config(path)))
		return EXIT_USAGE;
	bool threads_done = true;

	ecw_log_setup(cfg->log.level, cfg->log.format);
	rc = ecw_runtime_run(cfg, &threads_done);
	/* Released jobs may still read their settings until the process exits. */
	if (threads_done)
		ecw_config_free(cfg);
	return rc;
}

int ecw_cmd_check_config(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker check-config [-c FILE]\n\n"
		"Validates the configuration and prints every problem as FILE:LINE:COLUMN: message.\n"
		"Exits 0 when it is valid, 2 otherwise. Environment variables are expanded as\n"
		"`run` would; their values are never printed.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"  -h, --help          this text\n";
	const char *path = NULL;
	struct ecw_config *cfg;
	int rc;

	if ((rc = parse_common(&path, argc, argv, help)) >= 0)
		return rc;
	if (!(cfg = ecw_cli_load_config(path)))
		return EXIT_USAGE;
	/* The configuration checks the connection string too (without printing it). */
	printf("%s: OK (%zu job%s; queue %s, poison queue %s)\n", cfg->file, cfg->njobs, cfg->njobs == 1 ? "" : "s",
	       cfg->worker.queue, cfg->worker.poison_queue);
	rc = 0;
	ecw_config_free(cfg);
	return rc;
}

int ecw_cmd_enqueue(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker enqueue [-c FILE] JOB PK RK [--base64] [--id ID] [--field KEY=VALUE ...]\n"
		"       ecworker enqueue [-c FILE] JOB --field KEY=VALUE ...   (a keyless job: rollup, purge-tables)\n\n"
		"Puts {\"job\":JOB,\"pk\":PK,\"rk\":RK,...} on the job queue, for operators and demos\n"
		"(applications use their own SDK). JOB must be configured.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"      --base64        send the text base64-encoded (as Azure Functions expect)\n"
		"      --id ID         a trace id carried in the message as \"id\"\n"
		"      --field K=V     an extra string field for the job (repeatable)\n"
		"  -h, --help          this text\n";
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'},
		{"base64", no_argument, NULL, 'b'},       {"id", required_argument, NULL, 'i'},
		{"field", required_argument, NULL, 'f'},  {NULL, 0, NULL, 0},
	};
	const char *path = NULL, *id = NULL;
	char **fields = calloc((size_t)argc + 1, sizeof(char *));
	size_t nfields = 0;
	bool base64 = false;
	struct ecw_config *cfg = NULL;
	const struct ecw_job_def *def;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct ecw_queue_msg put;
	bool keyed;
	struct ecw_buf text;
	int ch, rc = EXIT_USAGE;

	ecw_buf_init(&text, 16 * ECW_QUEUE_MAX_TEXT);
	if (!fields)
		return 1;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'b': base64 = true; break;
		case 'i': id = optarg; break;
		case 'f': fields[nfields++] = optarg; break;
		case 'h': fputs(help, stdout); rc = 0; goto done;
		default: fputs(help, stderr); goto done;
		}
	}
	if (argc - optind != 3 && argc - optind != 1) {
		fprintf(stderr, "enqueue: expected JOB PK RK, or JOB alone for a keyless job\n");
		fputs(help, stderr);
		goto done;
	}
	if (!(cfg = ecw_cli_load_config(path)))
		goto done;
	if (!(def = ecw_config_job(cfg, argv[optind]))) {
		fprintf(stderr, "enqueue: no job named '%s' in %s\n", argv[optind], cfg->file);
		goto done;
	}
	keyed = argc - optind == 3;
	if (keyed == def->type->keyless) {
		fprintf(stderr, keyed ? "enqueue: '%s' is a %s job, which takes no PK RK (give its fields with -f)\n"
				      : "enqueue: '%s' is a %s job: give the entity's PK and RK\n",
			def->name, def->type->name);
		goto done;
	}
	if ((keyed && (ecw_key_check(argv[optind + 1], "PK") < 0 || ecw_key_check(argv[optind + 2], "RK") < 0)) ||
	    ecw_message_encode(&text, argv[optind], keyed ? argv[optind + 1] : NULL, keyed ? argv[optind + 2] : NULL,
			       id, fields, base64) < 0) {
		fprintf(stderr, "enqueue: %s\n", ecw_error_last()->message);
		goto done;
	}
	if (text.len > ECW_QUEUE_MAX_TEXT) {
		fprintf(stderr, "enqueue: the message is %zu bytes, over the queue's limit of %d\n", text.len,
			ECW_QUEUE_MAX_TEXT);
		goto done;
	}
	rc = 1;
	if (ecw_connect(&acct, &c, cfg) < 0 ||
	    (cfg->worker.create_missing && ecw_queue_create(NULL, c, cfg->worker.queue) < 0) ||
	    ecw_queue_put(&put, c, cfg->worker.queue, text.ptr, text.len,
			  &(struct ecw_queue_put_options){0, cfg->worker.message_ttl_s}) < 0) {
		fprintf(stderr, "enqueue: %s\n", ecw_error_last()->message);
		goto done;
	}
	printf("%s\n", put.id);
	rc = 0;
done:
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_config_free(cfg);
	ecw_buf_dispose(&text);
	free(fields);
	return rc;
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
		"usage: ecworker backfill [-c FILE] JOB [--filter ODATA] [--rate N]\n\n"
		"Scans JOB's source table and enqueues one message per entity, so derived data\n"
		"(a new index, say) is built over what already exists. The worker then processes\n"
		"them like any other message. Progress goes to stderr when it is a terminal; a\n"
		"summary ends the run. Ctrl-C stops after the message in hand.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"      --filter ODATA  only entities matching this $filter, e.g. \"PartitionKey eq 'Sales'\"\n"
		"      --rate N        at most N messages per second (default: as fast as storage allows)\n"
		"  -h, --help          this text\n\n"
		"Exit status: 0 all enqueued, 1 some puts failed or the scan failed, 2 usage.\n";
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'},
		{"filter", required_argument, NULL, 'f'}, {"rate", required_argument, NULL, 'r'},
		{NULL, 0, NULL, 0},
	};
	struct ecw_backfill_options bo = {.stop = &backfill_stop};
	struct ecw_backfill_result res;
	struct sigaction sa;
	const struct ecw_job_def *job;
	struct ecw_config *cfg = NULL;
	const char *path = NULL;
	char *end;
	int ch, rc = EXIT_USAGE;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'f': bo.filter = optarg; break;
		case 'r':
			bo.rate = strtod(optarg, &end);
			if (end == optarg || *end || bo.rate <= 0) {
				fprintf(stderr, "backfill: --rate must be a positive number\n");
				return EXIT_USAGE;
			}
			break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "backfill: expected JOB\n");
		fputs(help, stderr);
		return EXIT_USAGE;
	}
	if (!(cfg = ecw_cli_load_config(path)))
		return EXIT_USAGE;
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
	       (unsigned long long)res.scanned, (unsigned long long)res.enqueued, (unsigned long long)res.failed,
	       res.seconds, res.stopped ? " (stopped early)" : "");
	rc = res.failed ? 1 : 0;
done:
	ecw_config_free(cfg);
	return rc;
}
