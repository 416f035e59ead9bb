/* SPDX-License-Identifier: MIT */
/* pause.c - `ecworker pause` and `ecworker resume`: the fleet stops and
 * starts receiving from a queue. The pause is written into the queue's own
 * metadata (pause.h says why there); every worker reads it at its next look
 * at the queue, at most worker.control_poll later, and while it lasts
 * receives nothing from the queue (so no dequeue count grows), finishes what
 * it holds and stays healthy. Set Queue Metadata replaces all of a queue's
 * metadata and has no ETag, so the command reads it, changes only its own
 * three names and writes the rest back; two commands changing one queue's
 * metadata at the same moment may lose one of the changes (run them one at a
 * time). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "connect.h"
#include "ecw_codec.h"
#include "ecw_config.h"
#include "ecw_storage.h"
#include "pause.h"

static const char pause_help[] =
	"usage: ecworker pause [-c FILE] [--queue NAME] [--reason TEXT]\n\n"
	"Stops every worker of the fleet receiving from the job queue (or NAME, a\n"
	"configured job queue) until `ecworker resume`. Workers see it within\n"
	"worker.control_poll (default 10s), finish the messages they hold, stay healthy\n"
	"and show ecw_paused{queue} 1; `ecworker status` shows who paused, when and why.\n"
	"Messages stay on the queue; their dequeue counts do not grow.\n\n"
	"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
	"      --queue NAME    the queue, one of worker.queues (default: the first)\n"
	"      --reason TEXT   why, shown by status and in the workers' logs (at most 256 bytes)\n"
	"  -h, --help          this text\n";

static const char resume_help[] =
	"usage: ecworker resume [-c FILE] [--queue NAME]\n\n"
	"Lets the fleet receive from the job queue (or NAME) again: workers start within\n"
	"worker.control_poll (default 10s).\n\n"
	"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
	"      --queue NAME    the queue, one of worker.queues (default: the first)\n"
	"  -h, --help          this text\n";

/* Reads the queue's metadata, applies p, writes it back: 0, or 1 after
 * saying why. *before gets the pause as it was. */
static int write_pause(struct ecw_client *c, const char *cmd, const char *queue, const struct ecw_pause *p,
		       struct ecw_pause *before)
{
	struct ecw_queue_meta *m = calloc(1, sizeof(*m));
	int rc = 1;

	if (!m) {
		fprintf(stderr, "%s: out of memory\n", cmd);
		return 1;
	}
	if (ecw_queue_meta_get(m, c, queue) < 0)
		goto failed;
	ecw_pause_from_meta(before, m);
	if (ecw_pause_to_meta(m, p) < 0 || ecw_queue_meta_set(c, queue, m) < 0)
		goto failed;
	rc = 0;
	goto done;
failed:
	fprintf(stderr, "%s: queue %s: %s\n", cmd, queue, ecw_error_last()->message);
done:
	free(m);
	return rc;
}

static int pause_or_resume(int argc, char **argv, bool pausing)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{"queue", required_argument, NULL, 'q'},
		{"reason", required_argument, NULL, 'r'},
		{NULL, 0, NULL, 0},
	};
	const char *cmd = pausing ? "pause" : "resume", *help = pausing ? pause_help : resume_help;
	const char *path = NULL, *queue = NULL, *reason = "";
	struct ecw_config *cfg = NULL;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct ecw_pause p = {0}, before;
	struct ecw_buf safe;
	int ch, rc = ECW_EXIT_USAGE;

	ecw_buf_init(&safe, 0);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'q': queue = optarg; break;
		case 'r':
			if (!pausing) {
				fprintf(stderr, "resume: --reason is for pause\n");
				goto done;
			}
			reason = optarg;
			break;
		case 'h':
			fputs(help, stdout);
			rc = 0;
			goto done;
		default: fputs(help, stderr); goto done;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n%s", cmd, ecw_cli_term(&safe, argv[optind]),
			help);
		goto done;
	}
	if (strlen(reason) > ECW_PAUSE_REASON_MAX || !ecw_utf8_valid(reason, strlen(reason))) {
		fprintf(stderr, "%s: --reason must be UTF-8 of at most %d bytes\n", cmd,
			ECW_PAUSE_REASON_MAX);
		goto done;
	}
	if (!(cfg = ecw_cli_load_config(path)))
		goto done;
	if (!queue)
		queue = cfg->worker.queue;
	if (!ecw_cli_queue(cfg, cmd, queue))
		goto done;
	p.paused = pausing;
	if (pausing) {
		time_t now = time(NULL);
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(p.at, sizeof(p.at), "%Y-%m-%dT%H:%M:%SZ", &tm);
		ecw_pause_whoami(p.by, sizeof(p.by));
		snprintf(p.reason, sizeof(p.reason), "%s", reason);
	}
	rc = 1;
	if (ecw_connect(&acct, &c, cfg) < 0) {
		fprintf(stderr, "%s: %s\n", cmd, ecw_error_last()->message);
		goto done;
	}
	if ((rc = write_pause(c, cmd, queue, &p, &before)) != 0)
		goto done;
	if (pausing)
		printf("paused %s (by %s at %s)%s\n", queue, p.by, p.at,
		       before.paused ? "; it was already paused, now in your name" : "");
	else if (before.paused)
		printf("resumed %s (paused by %s since %s)\n", queue, before.by[0] ? before.by : "(unknown)",
		       before.at[0] ? before.at : "(unknown)");
	else
		printf("%s was not paused\n", queue);
done:
	ecw_buf_dispose(&safe);
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_config_free(cfg);
	return rc;
}

int ecw_cmd_pause(int argc, char **argv)
{
	return pause_or_resume(argc, argv, true);
}

int ecw_cmd_resume(int argc, char **argv)
{
	return pause_or_resume(argc, argv, false);
}
