/* check_config.c - `ecworker check-config`: every problem of a
 * configuration, as FILE:LINE:COLUMN: message, and of the OTEL_* variables
 * that `run` reads at start. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "ecw_config.h"
#include "ecw_err.h"
#include "otlp.h"

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

int ecw_cmd_check_config(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker check-config [-c FILE]\n\n"
		"Validates the configuration and prints every problem as FILE:LINE:COLUMN: message,\n"
		"and the OTEL_* variables as `run` reads them at start. Exits 0 when all is valid,\n"
		"2 otherwise. Environment variables are expanded as `run` would; their values are\n"
		"never printed.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"  -h, --help          this text\n";
	struct ecw_config *cfg;
	int rc;

	bool otlp = false;

	if ((rc = ecw_cli_load_config_only(&cfg, argc, argv, help)) >= 0)
		return rc;
	if (check_otel(&otlp) < 0) {
		ecw_config_free(cfg);
		return ECW_EXIT_USAGE;
	}
	/* The configuration checks the connection string too (without printing it). */
	printf("%s: OK (%zu job%s; queue %s, poison queue %s%s)\n", cfg->file, cfg->njobs,
	       cfg->njobs == 1 ? "" : "s", cfg->worker.queue, cfg->worker.poison_queue,
	       otlp ? "; OTLP trace export on" : "");
	rc = 0;
	ecw_config_free(cfg);
	return rc;
}
