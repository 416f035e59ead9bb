/* main.c - argument dispatch only; every other object links into the tests. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "runtime.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		ecw_cli_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "run") == 0)
		return ecw_cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "check-config") == 0)
		return ecw_cmd_check_config(argc - 1, argv + 1);
	if (strcmp(argv[1], "enqueue") == 0)
		return ecw_cmd_enqueue(argc - 1, argv + 1);
	if (strcmp(argv[1], "backfill") == 0)
		return ecw_cmd_backfill(argc - 1, argv + 1);
	if (strcmp(argv[1], "poison") == 0)
		return ecw_cmd_poison(argc - 1, argv + 1);
	if (strcmp(argv[1], "status") == 0)
		return ecw_cmd_status(argc - 1, argv + 1);
	if (strcmp(argv[1], "migrate") == 0)
		return ecw_cmd_migrate(argc - 1, argv + 1);
	if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("ecworker %s\n", ECW_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		ecw_cli_usage(stdout);
		return 0;
	}
	fprintf(stderr, "ecworker: unknown command '%s'\n", argv[1]);
	ecw_cli_usage(stderr);
	return 2;
}
