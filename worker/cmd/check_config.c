/* SPDX-License-Identifier: MIT */
/* check_config.c - `ecworker check-config`: every problem of a
 * configuration, as FILE:LINE:COLUMN: message, and of the OTEL_* variables
 * that `run` reads at start; with --online, what storage says of it
 * (preflight.c), as `run` checks it at start. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "connect.h"
#include "ecw_buf.h"
#include "ecw_config.h"
#include "ecw_err.h"
#include "ecw_storage.h"
#include "telemetry.h"
#include "runtime.h"

static const char *env_lookup(const char *name)
{
	return getenv(name);
}

/* The OTEL_* variables, checked as `run` checks them at start: 0, or prints
 * the problem (it names the variable, never a header's value) and returns -1. */
static int check_otel(bool *enabled)
{
	struct ecw_otlp_config *oc = calloc(1, sizeof(*oc)); /* ~70 KiB: not on the stack */
	int rc = 0;

	if (!oc) {
		fprintf(stderr, "check-config: out of memory\n");
		return -1;
	}
	if (ecw_otlp_config_read(oc, env_lookup) < 0) {
		fprintf(stderr, "environment: %s\n", ecw_error_last()->message);
		rc = -1;
	}
	*enabled = oc->enabled;
	memset(oc, 0, sizeof(*oc)); /* the header values */
	free(oc);
	return rc;
}

static void print_problem(const struct ecw_preflight_problem *p, void *payload)
{
	struct ecw_buf safe;

	(void)payload;
	ecw_buf_init(&safe, 0);
	printf("%s\n", ecw_cli_term(&safe, p->text)); /* a service's words may be in it */
	ecw_buf_dispose(&safe);
}

/* --online: the configuration against storage (preflight.c). 0 when
 * nothing is wrong, 1 otherwise. */
static int check_online(const struct ecw_config *cfg)
{
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	int n, rc = 1;

	ecw_connect_register_secrets(cfg);
	if (ecw_connect(&acct, &c, cfg) < 0) {
		fprintf(stderr, "check-config: cannot connect: %s\n", ecw_error_last()->message);
		goto done;
	}
	if ((n = ecw_preflight(cfg, c, acct, print_problem, NULL)) < 0) {
		fprintf(stderr, "check-config: storage did not answer: %s\n", ecw_error_last()->message);
		goto done;
	}
	if (n == 0)
		printf("%s: storage OK (credentials accepted; every queue and table there or to be "
		       "created)\n",
		       cfg->file);
	rc = n == 0 ? 0 : 1;
done:
	ecw_client_free(c);
	ecw_account_free(acct);
	return rc;
}

int ecw_cmd_check_config(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker check-config [-c FILE] [--online]\n\n"
		"Validates the configuration and prints every problem as FILE:LINE:COLUMN: message,\n"
		"and the OTEL_* variables as `run` reads them at start. Exits 0 when all is valid,\n"
		"2 otherwise. Environment variables are expanded as `run` would; their values are\n"
		"never printed.\n\n"
		"With --online it then connects with the configured credentials and checks that\n"
		"they are accepted, that every queue exists (or will be created), that every table\n"
		"a job reads exists, and that the tables the worker would create can be created;\n"
		"one line per problem, naming the job and the table. Exits 1 when there is any\n"
		"(or storage did not answer). The step before a deploy. ECW_CHECK_ONLINE=1 in the\n"
		"environment does the same (the packaged systemd unit's ExecStartPre).\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"      --online        check against storage too\n"
		"  -h, --help          this text\n";
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"online", no_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct ecw_config *cfg;
	const char *path = NULL;
	bool otlp = false, online = false;
	int ch, rc;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'o': online = true; break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return ECW_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "check-config: unexpected argument '%s'\n", argv[optind]);
		fputs(help, stderr);
		return ECW_EXIT_USAGE;
	}
	/* The systemd unit's ExecStartPre goes online when the packaged
	 * environment file says so, its command line staying as it is. */
	if (getenv("ECW_CHECK_ONLINE") && strcmp(getenv("ECW_CHECK_ONLINE"), "1") == 0)
		online = true;
	if (!(cfg = ecw_cli_load_config(path)))
		return ECW_EXIT_USAGE;
	if (check_otel(&otlp) < 0) {
		ecw_config_free(cfg);
		return ECW_EXIT_USAGE;
	}
	/* The configuration checks the connection string too (without printing it). */
	printf("%s: OK (%zu job%s; queue %s, poison queue %s%s)\n", cfg->file, cfg->njobs,
	       cfg->njobs == 1 ? "" : "s", cfg->worker.queue, cfg->worker.poison_queue,
	       otlp ? "; OTLP trace export on" : "");
	rc = online ? check_online(cfg) : 0;
	ecw_config_free(cfg);
	return rc;
}
