/* SPDX-License-Identifier: MIT */
/* cli.c - what every command shares: loading the configuration with its
 * problems on stderr, the -c/--help options, and untrusted text made safe to
 * print. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "ecw_codec.h"
#include "ecw_config.h"

const char *ecw_cli_term(struct ecw_buf *b, const char *s)
{
	ecw_buf_reset(b);
	(void)!ecw_term_escape(b, s ? s : "", s ? strlen(s) : 0);
	return ecw_buf_cstr(b);
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

int ecw_cli_load_config_only(struct ecw_config **out, int argc, char **argv, const char *help)
{
	const char *path = NULL;
	int ch;

	*out = NULL;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", common_opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return ECW_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
		fputs(help, stderr);
		return ECW_EXIT_USAGE;
	}
	return (*out = ecw_cli_load_config(path)) ? -1 : ECW_EXIT_USAGE;
}

const struct ecw_queue_def *ecw_cli_queue(const struct ecw_config *cfg, const char *cmd, const char *name)
{
	const struct ecw_queue_def *q = ecw_config_queue(cfg, name ? name : cfg->worker.queue);
	struct ecw_buf safe;

	if (q)
		return q;
	ecw_buf_init(&safe, 0);
	fprintf(stderr, "%s: '%s' is not a job queue of %s (worker.queue or worker.queues)\n", cmd,
		ecw_cli_term(&safe, name), cfg->file);
	ecw_buf_dispose(&safe);
	return NULL;
}
