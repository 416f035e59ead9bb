/* SPDX-License-Identifier: MIT */
/* run.c - `ecworker run`: loads the configuration and hands over to the
 * runtime (worker/runtime/runtime.c) until a signal stops it. */
#include <stdbool.h>

#include "cmd.h"
#include "ecw_config.h"
#include "ecw_log.h"
#include "runtime.h"

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
	struct ecw_config *cfg;
	int rc;

	if ((rc = ecw_cli_load_config_only(&cfg, argc, argv, help)) >= 0)
		return rc;
	bool threads_done = true;

	ecw_log_setup(cfg->log.level, cfg->log.format);
	rc = ecw_runtime_run(cfg, &threads_done);
	/* Released jobs may still read their settings until the process exits. */
	if (threads_done)
		ecw_config_free(cfg);
	return rc;
}
