/* enqueue.c - `ecworker enqueue`: a well-formed job message on the job
 * queue, for operators and demos. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "connect.h"
#include "ecw_config.h"
#include "ecw_job.h"
#include "ecw_storage.h"
#include "message.h"
#include "trace.h"

int ecw_cmd_enqueue(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker enqueue [-c FILE] JOB PK RK [--base64] [--id ID] [--traceparent TP]\n"
		"                         [--field KEY=VALUE ...]\n"
		"       ecworker enqueue [-c FILE] JOB --field KEY=VALUE ...   (a keyless job: rollup, purge-tables)\n\n"
		"Puts {\"job\":JOB,\"pk\":PK,\"rk\":RK,...} on the job queue, for operators and demos\n"
		"(applications use their own SDK). JOB must be configured.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"      --base64        send the text base64-encoded (as Azure Functions expect)\n"
		"      --id ID         a trace id carried in the message as \"id\"\n"
		"      --traceparent TP  a W3C trace context (00-<32 hex>-<16 hex>-<2 hex>): the run\n"
		"                      joins that trace (README: Trace context and OTLP)\n"
		"      --field K=V     an extra string field for the job (repeatable)\n"
		"  -h, --help          this text\n";
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{"base64", no_argument, NULL, 'b'},
		{"id", required_argument, NULL, 'i'},
		{"field", required_argument, NULL, 'f'},
		{"traceparent", required_argument, NULL, 't'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL, *id = NULL;
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
		case 't':
			/* Written back as version 00, as the worker writes it. */
			if (ecw_traceparent_parse(&tc, optarg, strlen(optarg)) < 0) {
				fprintf(stderr, "enqueue: --traceparent: %s\n", ecw_error_last()->message);
				goto done;
			}
			memcpy(traceparent, "traceparent=", sizeof("traceparent=") - 1);
			ecw_traceparent_format(traceparent + sizeof("traceparent=") - 1, &tc);
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
