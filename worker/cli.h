/* cli.h - the subcommands main.c dispatches to. Each takes its own argv
 * (argv[0] is the command name) and returns the exit status: 0 ok, 2 usage
 * or configuration error, 1 runtime failure. Only main.c exits. */
#ifndef ECW_CLI_H
#define ECW_CLI_H

int ecw_cmd_run(int argc, char **argv);
int ecw_cmd_check_config(int argc, char **argv);
int ecw_cmd_enqueue(int argc, char **argv);
int ecw_cmd_backfill(int argc, char **argv);
int ecw_cmd_poison(int argc, char **argv);     /* poison_cmd.c */
int ecw_cmd_status(int argc, char **argv);     /* status.c */
int ecw_cmd_migrate(int argc, char **argv);    /* migrate.c */
void ecw_poison_usage(void *file);

struct ecw_config;
/* Loads the configuration, printing every problem to stderr; NULL on failure
 * (the command then exits 2). */
struct ecw_config *ecw_cli_load_config(const char *path);
void ecw_cli_usage(void *file);

#endif
