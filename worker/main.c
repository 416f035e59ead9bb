/* main.c - argument dispatch only; every other object links into the tests. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define ECW_VERSION "0.1.0"

static void usage(FILE *f)
{
	fprintf(f, "usage: ecworker COMMAND [ARGS]\n\n"
		   "commands:\n"
		   "  demo       run a storage tour against AZURE_STORAGE_CONNECTION_STRING\n"
		   "             (default UseDevelopmentStorage=true)\n"
		   "  version    print the version\n"
		   "  help       this text\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "demo") == 0)
		return ecw_cmd_demo(argc - 1, argv + 1);
	if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("ecworker %s\n", ECW_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "ecworker: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
