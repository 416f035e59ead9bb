/* SPDX-License-Identifier: MIT */
/* cmd.h - the operator commands, one file each in worker/cmd/, which the
 * table in worker/main.c dispatches to, and what they share (cli.c). Each
 * takes its own argv (argv[0] is the command name) and returns the exit
 * status: 0 ok, 2 usage or configuration error, 1 runtime failure (status,
 * audit and migrate document more). Only main.c exits. Commands call the
 * runtime, the configuration, the storage client and the jobs; nothing below
 * calls a command. */
#ifndef ECW_CMD_H
#define ECW_CMD_H

#include <stdbool.h>
#include <stdio.h>

#define ECW_EXIT_USAGE 2
#define ECW_EXIT_DRIFT 3 /* audit: drift found and not all repaired */

int ecw_cmd_run(int argc, char **argv);          /* run.c */
int ecw_cmd_check_config(int argc, char **argv); /* check_config.c */
int ecw_cmd_enqueue(int argc, char **argv);      /* enqueue.c */
int ecw_cmd_backfill(int argc, char **argv);     /* backfill.c */
int ecw_cmd_poison(int argc, char **argv);       /* poison.c */
int ecw_cmd_status(int argc, char **argv);       /* status.c */
int ecw_cmd_migrate(int argc, char **argv);      /* migrate.c */
int ecw_cmd_audit(int argc, char **argv);        /* audit.c */
int ecw_cmd_index(int argc, char **argv);        /* index.c */
int ecw_cmd_pause(int argc, char **argv);        /* pause.c */
int ecw_cmd_resume(int argc, char **argv);       /* pause.c */
int ecw_cmd_version(int argc, char **argv);      /* version.c */
void ecw_poison_usage(FILE *file);

struct ecw_config;
/* Loads the configuration, printing every problem to stderr; NULL on failure
 * (the command then exits 2). Free with ecw_config_free. */
struct ecw_config *ecw_cli_load_config(const char *path);
/* For a command whose only options are -c and --help: parses them and loads
 * the configuration. Returns -1 with *out set (free with ecw_config_free) to
 * go on, else the exit status (the help or the problems were printed). */
int ecw_cli_load_config_only(struct ecw_config **out, int argc, char **argv, const char *help);

struct ecw_audit_counts;
/* audit.c: the exit status for these totals: 1 when a job's audit failed
 * (or was interrupted), else ECW_EXIT_DRIFT when a finding was not repaired,
 * else 0. */
int ecw_audit_exit_status(const struct ecw_audit_counts *total, bool failed);

struct ecw_queue_def;
/* The job queue named name (NULL: the first) of cfg, or NULL after saying on
 * stderr, as "CMD: 'name' is not a job queue of FILE", that there is none. */
const struct ecw_queue_def *ecw_cli_queue(const struct ecw_config *cfg, const char *cmd, const char *name);

struct ecw_buf;
/* s (NULL: "") escaped for the operator's terminal (ecw_term_escape) into b,
 * which is emptied first: what a command prints of a message's text, keys,
 * job name or error goes through here, since anyone who can put a message
 * could otherwise send the terminal escape sequences. Returns b's text,
 * valid until b changes; out of memory, what fitted. --json output needs
 * none of this: JSON escapes every control character itself. */
const char *ecw_cli_term(struct ecw_buf *b, const char *s);

#endif
