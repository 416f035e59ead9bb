/* main.c - dispatch only: the first argument names a command of the table in
 * worker/cmd/cli.c; every other object links into the tests. */
#include <stdio.h>

#include "cmd.h"

int main(int argc, char **argv)
{
	const struct ecw_command *cmd;

	if (argc < 2) {
		ecw_cli_usage(stderr);
		return ECW_EXIT_USAGE;
	}
	if (!(cmd = ecw_command_find(argv[1]))) {
		fprintf(stderr, "ecworker: unknown command '%s'\n", argv[1]);
		ecw_cli_usage(stderr);
		return ECW_EXIT_USAGE;
	}
	return cmd->run(argc - 1, argv + 1);
}
