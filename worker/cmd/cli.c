/* cli.c - what every command shares: the usage text, loading the
 * configuration with its problems on stderr, and the -c/--help options. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "ecw_config.h"
#include "ecw_version.h"

static int cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("ecworker %s\n", ECW_VERSION);
	return 0;
}

static int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ecw_cli_usage(stdout);
	return 0;
}

const struct ecw_command ecw_commands[] = {
	{"run", ecw_cmd_run, "run the worker until SIGTERM or SIGINT"},
	{"check-config", ecw_cmd_check_config, "validate a configuration file and list every problem"},
	{"enqueue", ecw_cmd_enqueue, "put a well-formed job message on the job queue"},
	{"backfill", ecw_cmd_backfill, "enqueue one message per entity of a job's source table"},
	{"poison", ecw_cmd_poison, "list, replay or purge poison messages (poison --help)"},
	{"status", ecw_cmd_status, "queue depths, poison counts by job and reason, tables"},
	{"migrate", ecw_cmd_migrate, "apply the configured migrations once (migrate status: their state)"},
	{"version", cmd_version, "print the version"},
	{"help", cmd_help, "this text"},
	{NULL, NULL, NULL},
};

const struct ecw_command *ecw_command_find(const char *name)
{
	static const char *const aliases[][2] = {{"--version", "version"}, {"--help", "help"}, {"-h", "help"}};

	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcmp(name, aliases[i][0]) == 0)
			name = aliases[i][1];
	for (size_t i = 0; ecw_commands[i].name; i++)
		if (strcmp(ecw_commands[i].name, name) == 0)
			return &ecw_commands[i];
	return NULL;
}

void ecw_cli_usage(FILE *file)
{
	fprintf(file, "usage: ecworker COMMAND [OPTIONS]\n\ncommands:\n");
	for (size_t i = 0; ecw_commands[i].name; i++)
		fprintf(file, "  %-14s %s\n", ecw_commands[i].name, ecw_commands[i].summary);
	fprintf(file, "\nEvery command takes --help. The configuration file is -c FILE, else $ECW_CONFIG,\n"
		      "else ./ecworker.yaml. Exit status: 0 ok, 2 usage or configuration error,\n"
		      "1 runtime failure.\n");
}

struct ecw_config *ecw_cli_load_config(const char *path)
{
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;

	ecw_node_errors_init(&errs);
	if (ecw_config_load(&cfg, path ? path : ecw_config_default_path(), &errs) < 0) {
		for (size_t i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.lines[i]);
		if (errs.n == 0)
			fprintf(stderr, "%s: %s\n", path ? path : ecw_config_default_path(),
				ecw_error_last()->message);
		cfg = NULL;
	}
	ecw_node_errors_dispose(&errs);
	return cfg;
}

static const struct option common_opts[] = {
	{"config", required_argument, NULL, 'c'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

int ecw_cli_parse_common(const char **config, int argc, char **argv, const char *help)
{
	int ch;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", common_opts, NULL)) != -1) {
		switch (ch) {
		case 'c': *config = optarg; break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return ECW_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
		fputs(help, stderr);
		return ECW_EXIT_USAGE;
	}
	return -1;
}
