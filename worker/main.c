/* SPDX-License-Identifier: MIT */
/* main.c - the table of commands and dispatch only: the first argument names
 * a command (one file each in worker/cmd/, behind cmd.h); every other object
 * links into the tests. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "cmd.h"
#include "ecw_version.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary; /* one line for `ecworker help` */
};

static void usage(FILE *file);

static int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	usage(stdout);
	return 0;
}

/* Every command, in the order `help` lists them; ends with a NULL name. */
static const struct command commands[] = {
	{"run", ecw_cmd_run, "run the worker until SIGTERM or SIGINT"},
	{"check-config", ecw_cmd_check_config, "validate a configuration file and list every problem"},
	{"enqueue", ecw_cmd_enqueue, "put a well-formed job message on the job queue"},
	{"backfill", ecw_cmd_backfill, "enqueue one message per entity of a job's source table"},
	{"poison", ecw_cmd_poison, "list, replay or purge poison messages (poison --help)"},
	{"status", ecw_cmd_status, "queue depths, pauses, poison counts by job and reason, tables"},
	{"pause", ecw_cmd_pause, "stop the whole fleet receiving from a queue (until resume)"},
	{"resume", ecw_cmd_resume, "let the fleet receive from a paused queue again"},
	{"audit", ecw_cmd_audit, "compare derived data with its sources; --repair fixes it"},
	{"index", ecw_cmd_index, "index get JOB VALUE: print the list an index-list job keeps"},
	{"migrate", ecw_cmd_migrate, "apply the configured migrations once (migrate status: their state)"},
	{"version", ecw_cmd_version, "the version, commit and library versions"},
	{"help", cmd_help, "this text"},
	{NULL, NULL, NULL},
};

/* The command named name (its aliases too: --version, --help, -h), or NULL. */
static const struct command *command_find(const char *name)
{
	static const char *const aliases[][2] = {
		{"--version", "version"}, {"--help", "help"}, {"-h", "help"}};

	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcmp(name, aliases[i][0]) == 0)
			name = aliases[i][1];
	for (size_t i = 0; commands[i].name; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void usage(FILE *file)
{
	fprintf(file, "usage: ecworker COMMAND [OPTIONS]\n\ncommands:\n");
	for (size_t i = 0; commands[i].name; i++)
		fprintf(file, "  %-14s %s\n", commands[i].name, commands[i].summary);
	fprintf(file, "\nEvery command takes --help. The configuration file is -c FILE, else $ECW_CONFIG,\n"
		      "else ./ecworker.yaml. Exit status: 0 ok, 2 usage or configuration error,\n"
		      "1 runtime failure (audit: 3 drift left).\n");
}

/* The account key, a SAS or a token is in this process's memory from the
 * first command on: no core file may hold it (RLIMIT_CORE 0), and no other
 * process of the same user may read it through ptrace or /proc/PID/mem
 * (not dumpable, which also stops a core dump when the limit is raised
 * again). Best effort: a failure leaves the process as it was, not down. */
static void no_core_dumps(void)
{
	const struct rlimit none = {0, 0};

	(void)setrlimit(RLIMIT_CORE, &none);
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

int main(int argc, char **argv)
{
	const struct command *cmd;

	/* Before anything else: a write to a pipe or socket whose reader is
	 * gone (a log collector that died, a peer that closed a TLS
	 * connection) must fail with EPIPE, not kill the worker with SIGPIPE
	 * (exit 141). */
	signal(SIGPIPE, SIG_IGN);
	no_core_dumps();
	if (argc < 2) {
		usage(stderr);
		return ECW_EXIT_USAGE;
	}
	if (!(cmd = command_find(argv[1]))) {
		fprintf(stderr, "ecworker: unknown command '%s'\n", argv[1]);
		usage(stderr);
		return ECW_EXIT_USAGE;
	}
	return cmd->run(argc - 1, argv + 1);
}
