/* cli.h - the subcommands main.c dispatches to. Each returns the process exit
 * status; only main.c exits. */
#ifndef ECW_CLI_H
#define ECW_CLI_H

int ecw_cmd_demo(int argc, char **argv);

#endif
