/* SPDX-License-Identifier: MIT */
/* migrate.c - `ecworker migrate` and `ecworker migrate status`: the options
 * and what the operator reads. The migrations are parsed with the
 * configuration (worker/migrate/migrate.c) and applied by worker/migrate/migrate_apply.c,
 * which tells each step through say_line below. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "connect.h"
#include "ecw_config.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "migrate.h"

/* Progress on stdout as it happens; problems on stderr. */
static void say_line(bool problem, const char *line, void *payload)
{
	(void)payload;
	if (problem) {
		fprintf(stderr, "migrate: %s\n", line);
	} else {
		printf("%s\n", line);
		fflush(stdout);
	}
}

static int migrate_status(int argc, char **argv);

int ecw_cmd_migrate(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker migrate [-c FILE] [--dry-run]\n"
		"       ecworker migrate status [-c FILE]\n\n"
		"Applies the configuration's pending migrations (migrations.list) in version\n"
		"order, each once per environment, recording them in the version table\n"
		"(migrations.table, default EcwMigrations). Stops at the first failing step;\n"
		"the next run resumes there. A migration another process is applying is\n"
		"waited for (up to migrations.wait), then taken over if its lease ran out.\n"
		"`migrate status` lists every migration and its state, and changes nothing.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"  -n, --dry-run       print the pending migrations and their steps; write nothing\n"
		"  -h, --help          this text\n\n"
		"Exit status: 0 all applied (or shown), 1 a migration failed or storage could\n"
		"not be read, 2 usage or configuration error.\n";
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{"dry-run", no_argument, NULL, 'n'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL;
	bool dry = false;
	struct ecw_config *cfg = NULL;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	const struct ecw_migration_set *m;
	size_t n;
	int ch, rc = ECW_EXIT_USAGE;

	if (argc >= 2 && strcmp(argv[1], "status") == 0)
		return migrate_status(argc - 1, argv + 1);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:hn", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'n': dry = true; break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return ECW_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "migrate: unexpected argument '%s'\n", argv[optind]);
		fputs(help, stderr);
		return ECW_EXIT_USAGE;
	}
	if (!(cfg = ecw_cli_load_config(path)))
		return ECW_EXIT_USAGE;
	m = cfg->migrations;
	if ((n = ecw_migrations_count(m)) == 0) {
		printf("%s: no migrations configured (migrations.list)\n", cfg->file);
		rc = 0;
		goto done;
	}
	ecw_log_setup(cfg->log.level, cfg->log.format);
	rc = 1;
	if (ecw_connect(&acct, &c, cfg) < 0) {
		fprintf(stderr, "migrate: %s\n", ecw_error_last()->message);
		goto done;
	}
	if (dry) {
		struct ecw_buf plan;
		size_t pending;
		ecw_buf_init(&plan, 0);
		if (ecw_migrate_dry_run(&plan, &pending, c, m, say_line, NULL) == 0) {
			printf("dry run: %zu of %zu migration%s pending in %s; nothing written\n%s", pending,
			       n, n == 1 ? "" : "s", ecw_migrations_table(m), ecw_buf_cstr(&plan));
			rc = 0;
		}
		ecw_buf_dispose(&plan);
	} else {
		struct ecw_migrate_counts done;
		if (ecw_migrate_apply(&done, c, m, isatty(2), say_line, NULL) == 0) {
			printf("migrate: %zu applied now, %zu already applied, %zu in all\n", done.applied,
			       done.already, n);
			rc = 0;
		}
	}
done:
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_config_free(cfg);
	return rc;
}

static int migrate_status(int argc, char **argv)
{
	static const char help[] =
		"usage: ecworker migrate status [-c FILE]\n\n"
		"Lists each migration once, in version order: applied (when and by whom),\n"
		"pending, running (by whom, at which step, the lease) or failed (at which step,\n"
		"the error). Reads the version table; creates and changes nothing.\n\n"
		"  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
		"  -h, --help          this text\n\n"
		"Exit status: 0 shown, 1 storage could not be read, 2 usage.\n";
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL;
	struct ecw_config *cfg = NULL;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct ecw_migrate_row *rows = NULL;
	struct ecw_buf term;
	size_t nrows = 0;
	int ch, rc = ECW_EXIT_USAGE;

	ecw_buf_init(&term, 4096);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return ECW_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "migrate status: unexpected argument '%s'\n", argv[optind]);
		fputs(help, stderr);
		return ECW_EXIT_USAGE;
	}
	if (!(cfg = ecw_cli_load_config(path)))
		return ECW_EXIT_USAGE;
	if (!cfg->migrations) {
		printf("%s: no migrations configured (migrations.list)\n", cfg->file);
		rc = 0;
		goto done;
	}
	rc = 1;
	if (ecw_connect(&acct, &c, cfg) < 0 || ecw_migrate_status(&rows, &nrows, c, cfg->migrations) < 0) {
		fprintf(stderr, "migrate status: %s\n", ecw_error_last()->message);
		goto done;
	}
	/* The version table's rows may have been edited by anyone who can
	 * write the table: escaped for the terminal. */
	printf("%-10s %-30s %s\n", "VERSION", "ID", "STATE");
	for (size_t i = 0; i < nrows; i++) {
		printf("%-10lld %-30s ", rows[i].version, ecw_cli_term(&term, rows[i].id));
		printf("%s%s\n", ecw_cli_term(&term, rows[i].state),
		       rows[i].listed ? "" : " (not in the configuration)");
	}
	rc = 0;
done:
	ecw_buf_dispose(&term);
	ecw_migrate_rows_free(rows, nrows);
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_config_free(cfg);
	return rc;
}
