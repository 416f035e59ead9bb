/* SPDX-License-Identifier: MIT */
/* enqueue.c - `ecworker enqueue`: a well-formed job message on the job
 * queue, for operators and demos. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "connect.h"
#include "ecw_config.h"
#include "ecw_duration.h"
#include "ecw_job.h"
#include "ecw_storage.h"
#include "message.h"
#include "telemetry.h"

#define WEEK_S (7 * 86400)
#define MAX_TTL_S (596523LL * 3600) /* the largest the service takes short of -1 */

/* A whole number of seconds from D: 0, or -1 after saying why. */
static int whole_seconds(int64_t *out_s, const char *opt, const char *s, int64_t min_s, int64_t max_s)
{
	int64_t ms = 0;
	int r = ecw_duration_parse(&ms, s, true);

	if (r == -1 || (r == 0 && ms % 1000 != 0)) {
		fprintf(stderr,
			"enqueue: %s must be a whole number of seconds as a duration (90s, 5m, 2h, 7d), "
			"not '%s'\n",
			opt, s);
		return -1;
	}
	if (r == -2 || ms / 1000 < min_s || ms / 1000 > max_s) {
		fprintf(stderr, "enqueue: %s is out of range (%llds..%llds), not '%s'\n", opt,
			(long long)min_s, (long long)max_s, s);
		return -1;
	}
	*out_s = ms / 1000;
	return 0;
}

static int parse_delay(int *out_s, const char *s)
{
	int64_t v;

	if (whole_seconds(&v, "--delay", s, 0, WEEK_S) < 0)
		return -1;
	*out_s = (int)v;
	return 0;
}

static int parse_ttl(long long *out_s, const char *s)
{
	int64_t v;

	if (strcmp(s, "-1") == 0) {
		*out_s = -1;
		return 0;
	}
	if (whole_seconds(&v, "--ttl", s, 1, MAX_TTL_S) < 0)
		return -1;
	*out_s = v;
	return 0;
}

int ecw_cmd_enqueue(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker enqueue [-c FILE] JOB PK RK [--base64] [--id ID] [--traceparent TP]\n"
		"                        [--field KEY=VALUE ...] [--queue NAME] [--delay DURATION] [--ttl DURATION]\n"
		"       ecworker enqueue [-c FILE] JOB --field KEY=VALUE ...   (a keyless job: rollup, purge-tables)\n\n"
		"Puts {\"job\":JOB,\"pk\":PK,\"rk\":RK,...} on the job queue, for operators and demos\n"
		"(applications use their own SDK). JOB must be configured.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"      --base64        send the text base64-encoded (as Azure Functions expect)\n"
		"      --id ID         a trace id carried in the message as \"id\"\n"
		"      --traceparent TP  a W3C trace context (00-<32 hex>-<16 hex>-<2 hex>): the run\n"
		"                      joins that trace (worker/README.md: Trace context and OTLP)\n"
		"      --field K=V     an extra string field for the job (repeatable)\n"
		"      --delay D       the message stays invisible for D after it is put (30s, 5m,\n"
		"                      2h, 7d; at most 7d, whole seconds; default 0)\n"
		"      --queue NAME    put it on NAME, one of worker.queues (default: the first)\n"
		"      --ttl D         the message expires D after it is put (whole seconds, at\n"
		"                      least 1s and longer than --delay), or -1: never; default\n"
		"                      worker.message_ttl\n"
		"  -h, --help          this text\n";
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'},
		{"base64", no_argument, NULL, 'b'},       {"id", required_argument, NULL, 'i'},
		{"field", required_argument, NULL, 'f'},  {"traceparent", required_argument, NULL, 'p'},
		{"delay", required_argument, NULL, 'd'},  {"ttl", required_argument, NULL, 't'},
		{"queue", required_argument, NULL, 'q'},  {NULL, 0, NULL, 0},
	};
	struct ecw_queue_put_options put_opts = {0, 0};
	bool ttl_given = false;
	const char *path = NULL, *id = NULL, *queue = NULL;
	char **fields = calloc((size_t)argc + 2, sizeof(char *));
	char traceparent[sizeof("traceparent=") + ECW_TRACEPARENT_LEN];
	struct ecw_trace_ctx tc;
	size_t nfields = 0;
	bool base64 = false;
	struct ecw_config *cfg = NULL;
	const struct ecw_job_def *def;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct ecw_queue_msg put;
	bool keyed;
	struct ecw_buf text;
	int ch, rc = ECW_EXIT_USAGE;

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
		case 'q': queue = optarg; break;
		case 'd':
			if (parse_delay(&put_opts.visibility_delay_s, optarg) < 0)
				goto done;
			break;
		case 't':
			if (parse_ttl(&put_opts.ttl_s, optarg) < 0)
				goto done;
			ttl_given = true;
			break;
		case 'p':
			/* Written back as version 00, as the worker writes it. */
			if (ecw_trace_parent_parse(&tc, optarg, strlen(optarg)) < 0) {
				fprintf(stderr, "enqueue: --traceparent: %s\n", ecw_error_last()->message);
				goto done;
			}
			memcpy(traceparent, "traceparent=", sizeof("traceparent=") - 1);
			ecw_trace_parent_format(traceparent + sizeof("traceparent=") - 1, &tc);
			fields[nfields++] = traceparent;
			break;
		case 'h':
			fputs(help, stdout);
			rc = 0;
			goto done;
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
	if (!queue)
		queue = cfg->worker.queue;
	if (!ecw_cli_queue(cfg, "enqueue", queue))
		goto done;
	if (!ttl_given)
		put_opts.ttl_s = cfg->worker.message_ttl_s;
	/* The service refuses a message that would expire before it is seen. */
	if (put_opts.ttl_s > 0 && put_opts.visibility_delay_s >= put_opts.ttl_s) {
		fprintf(stderr,
			"enqueue: the message would expire (after %llds) before its delay ends (%ds)%s\n",
			put_opts.ttl_s, put_opts.visibility_delay_s,
			ttl_given ? "" : ": worker.message_ttl is the ttl; give --ttl");
		goto done;
	}
	if (!(def = ecw_config_job(cfg, argv[optind]))) {
		fprintf(stderr, "enqueue: no job named '%s' in %s\n", argv[optind], cfg->file);
		goto done;
	}
	keyed = argc - optind == 3;
	if (keyed == def->type->keyless) {
		fprintf(stderr,
			keyed ? "enqueue: '%s' is a %s job, which takes no PK RK (give its fields with -f)\n"
			      : "enqueue: '%s' is a %s job: give the entity's PK and RK\n",
			def->name, def->type->name);
		goto done;
	}
	if ((keyed && (ecw_entity_key_check(argv[optind + 1], "PK") < 0 ||
		       ecw_entity_key_check(argv[optind + 2], "RK") < 0)) ||
	    ecw_message_encode(&text, argv[optind], keyed ? argv[optind + 1] : NULL,
			       keyed ? argv[optind + 2] : NULL, id, fields, base64) < 0) {
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
	    (cfg->worker.create_missing && ecw_queue_create(NULL, c, queue) < 0) ||
	    ecw_queue_put(&put, c, queue, text.ptr, text.len, &put_opts) < 0) {
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
