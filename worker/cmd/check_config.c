/* check_config.c - `ecworker check-config`: every problem of a
 * configuration, as FILE:LINE:COLUMN: message. */
#include <stdio.h>

#include "cmd.h"
#include "ecw_config.h"

int ecw_cmd_check_config(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker check-config [-c FILE]\n\n"
		"Validates the configuration and prints every problem as FILE:LINE:COLUMN: message.\n"
		"Exits 0 when it is valid, 2 otherwise. Environment variables are expanded as\n"
		"`run` would; their values are never printed.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"  -h, --help          this text\n";
	struct ecw_config *cfg;
	int rc;

	if ((rc = ecw_cli_load_config_only(&cfg, argc, argv, help)) >= 0)
		return rc;
	/* The configuration checks the connection string too (without printing it). */
	printf("%s: OK (%zu job%s; queue %s, poison queue %s)\n", cfg->file, cfg->njobs,
	       cfg->njobs == 1 ? "" : "s", cfg->worker.queue, cfg->worker.poison_queue);
	rc = 0;
	ecw_config_free(cfg);
	return rc;
}
