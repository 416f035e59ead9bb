/* SPDX-License-Identifier: MIT */
/* index.c - `ecworker index get`: prints one list an index-list job keeps
 * (every source key with that value, in order), read whole through the job
 * (ecw_job_type.list_get) the way the job itself reads it, so that operators
 * see what applications read, however many properties and entities the list
 * spans. Keys are the sources' and may hold anything: the human output
 * escapes them for the terminal, --json quotes them. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "connect.h"
#include "ecw_codec.h"
#include "ecw_config.h"
#include "ecw_job.h"
#include "ecw_storage.h"

static const char help[] = "usage: ecworker index get [-c FILE] JOB VALUE [--partition PK] [--json]\n\n"
			   "Prints the list an index-list job keeps for VALUE (the list's RowKey, what its\n"
			   "row_key renders to): one source key per line, PartitionKey TAB RowKey, in\n"
			   "order, after a line naming the list and its count. A value no source has\n"
			   "has no list: count 0.\n\n"
			   "  -c, --config FILE   configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
			   "      --partition PK  the list's PartitionKey, when the job's partition_key\n"
			   "                      depends on the source (default: the partition_key itself)\n"
			   "      --json          one JSON object: job, table, partition_key, row_key,\n"
			   "                      exists, count, keys ([[pk, rk], ...])\n"
			   "  -h, --help          this text\n"
			   "Exit status: 0 printed (also when there is no list), 1 storage or list\n"
			   "failure, 2 usage or configuration error.\n";

struct printer {
	bool json;
	size_t count;
	struct ecw_buf line, term;
};

/* One key: a line, or a JSON array element; written as it comes, so that a
 * list of any length costs one key's memory here. */
static int print_key(void *arg, const char *pk, const char *rk)
{
	struct printer *p = arg;
	int err = 0;

	ecw_buf_reset(&p->line);
	if (p->json) {
		if ((p->count ? ecw_buf_addc(&p->line, ',') : 0) < 0 || ecw_buf_addc(&p->line, '[') < 0 ||
		    ecw_json_quote(&p->line, pk, strlen(pk)) < 0 || ecw_buf_addc(&p->line, ',') < 0 ||
		    ecw_json_quote(&p->line, rk, strlen(rk)) < 0 || ecw_buf_addc(&p->line, ']') < 0)
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
	} else {
		/* Each key escaped alone: a tab inside a key is escaped, the one
		 * between the keys is not. */
		if (ecw_buf_adds(&p->line, ecw_cli_term(&p->term, pk)) < 0 ||
		    ecw_buf_addc(&p->line, '\t') < 0 ||
		    ecw_buf_adds(&p->line, ecw_cli_term(&p->term, rk)) < 0 ||
		    ecw_buf_addc(&p->line, '\n') < 0)
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	if (err == 0) {
		fwrite(p->line.ptr, 1, p->line.len, stdout);
		p->count++;
	}
	return err;
}

/* "name":"value", for the JSON object's head. */
static int json_field(struct ecw_buf *b, const char *name, const char *value)
{
	int err = ecw_buf_printf(b, "\"%s\":", name);

	if (err == 0)
		err = ecw_json_quote(b, value, strlen(value));
	return err ? err : ecw_buf_addc(b, ',');
}

/* What comes before the keys: the JSON object's head, or a comment line. */
static int print_head(const struct ecw_job_def *def, const char *lpk, const char *lrk, bool json)
{
	const char *table = def->type->target_table(def->settings);
	struct ecw_buf head, term;
	int err;

	ecw_buf_init(&head, 0);
	ecw_buf_init(&term, 0);
	if (!json)
		err = ecw_buf_printf(&head, "# %s: the list %s in %s\n", def->name, ecw_cli_term(&term, lrk),
				     table);
	else if ((err = ecw_buf_addc(&head, '{')) == 0 && (err = json_field(&head, "job", def->name)) == 0 &&
		 (err = json_field(&head, "table", table)) == 0 &&
		 (err = lpk ? json_field(&head, "partition_key", lpk) : 0) == 0 &&
		 (err = json_field(&head, "row_key", lrk)) == 0)
		err = ecw_buf_adds(&head, "\"keys\":[");
	if (err == 0)
		fwrite(head.ptr, 1, head.len, stdout);
	ecw_buf_dispose(&head);
	ecw_buf_dispose(&term);
	return err;
}

/* Reads and prints the list; the exit status. */
static int get_list(const struct ecw_job_def *def, struct ecw_client *c, const char *lpk, const char *lrk,
		    bool json)
{
	struct printer p = {.json = json};
	bool exists = false;
	int err;

	ecw_buf_init(&p.line, 0);
	ecw_buf_init(&p.term, 0);
	if ((err = print_head(def, lpk, lrk, json)) == 0)
		err = def->type->list_get(def->settings, c, lpk, lrk, print_key, &p, &exists);
	if (err == 0 && json)
		printf("],\"exists\":%s,\"count\":%zu}\n", exists ? "true" : "false", p.count);
	else if (err == 0)
		printf("# %zu keys%s\n", p.count, exists ? "" : " (no list: no source has that value)");
	else
		fprintf(stderr, "%sindex get: %s\n", json ? "\n" : "",
			ecw_cli_term(&p.term, ecw_error_last()->message));
	fflush(stdout);
	ecw_buf_dispose(&p.line);
	ecw_buf_dispose(&p.term);
	return err < 0 ? 1 : 0;
}

int ecw_cmd_index(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{"partition", required_argument, NULL, 'p'},
		{"json", no_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL, *lpk = NULL;
	bool json = false;
	struct ecw_config *cfg = NULL;
	const struct ecw_job_def *def;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	int ch, rc = ECW_EXIT_USAGE;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'p': lpk = optarg; break;
		case 'j': json = true; break;
		case 'h': fputs(help, stdout); return 0;
		default: fputs(help, stderr); return ECW_EXIT_USAGE;
		}
	}
	if (argc - optind != 3 || strcmp(argv[optind], "get") != 0) {
		fprintf(stderr, "index: expected get JOB VALUE\n");
		fputs(help, stderr);
		return ECW_EXIT_USAGE;
	}
	if (!(cfg = ecw_cli_load_config(path)))
		goto done;
	if (!(def = ecw_config_job(cfg, argv[optind + 1]))) {
		fprintf(stderr, "index get: no job named '%s' in %s\n", argv[optind + 1], cfg->file);
		goto done;
	}
	if (!def->type->list_get) {
		fprintf(stderr, "index get: '%s' is a %s job, which keeps no lists (index-list jobs do)\n",
			def->name, def->type->name);
		goto done;
	}
	if ((lpk && ecw_entity_key_check(lpk, "--partition") < 0) ||
	    ecw_entity_key_check(argv[optind + 2], "VALUE") < 0) {
		fprintf(stderr, "index get: %s\n", ecw_error_last()->message);
		goto done;
	}
	rc = 1;
	if (ecw_connect(&acct, &c, cfg) < 0) {
		fprintf(stderr, "index get: %s\n", ecw_error_last()->message);
		goto done;
	}
	rc = get_list(def, c, lpk, argv[optind + 2], json);
done:
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_config_free(cfg);
	return rc;
}
