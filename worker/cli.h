/* cli.h - the subcommands main.c dispatches to. Each takes its own argv
 * (argv[0] is the command name) and returns the exit status: 0 ok, 2 usage
 * or configuration error, 1 runtime failure. Only main.c exits. */
#ifndef ECW_CLI_H
#define ECW_CLI_H

int ecw_cmd_run(int argc, char **argv);
int ecw_cmd_check_config(int argc, char **argv);
int ecw_cmd_enqueue(int argc, char **argv);
int ecw_cmd_backfill(int argc, char **argv);
void ecw_cli_usage(void *file);

#endif
