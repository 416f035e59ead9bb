/* SPDX-License-Identifier: MIT */
/* poison.c - `ecworker poison list | replay | purge`: the operator's
 * commands on the poison queue. Every one walks the queue with the scan of
 * poison_scan.h, which never deletes on its own: list only reads, replay
 * puts `original` back on the job queue and only then deletes the envelope,
 * purge deletes only with --yes. What is not selected is released untouched. */
#include <getopt.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "connect.h"
#include "ecw_clock.h"
#include "ecw_duration.h"
#include "ecw_log.h"
#include "ecw_pace.h"
#include "poison_group.h"
#include "poison_scan.h"

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	(void)sig;
	interrupted = 1;
}

static const char filter_help[] =
	"Selecting messages (every option given must match):\n"
	"      --job NAME        envelopes of this job\n"
	"      --reason R        permanent | max-dequeue\n"
	"      --since WHEN      failed at or after WHEN: a duration back from now (90m, 2h,\n"
	"                        7d, 1w) or a UTC time (2026-11-20, 2026-11-20T10:00:00Z)\n"
	"      --grep TEXT       TEXT occurs in the error, the original message, the job or\n"
	"                        the keys (case-sensitive)\n"
	"      --id ID           this poison message id (repeatable)\n"
	"      --group KEY       the messages of this group, KEY as `poison list --group-by`\n"
	"                        prints it (DIM:VALUE, below)\n"
	"      --limit N         at most N messages\n"
	"      --queue NAME      the poison queue of job queue NAME (worker.queues; default:\n"
	"                        the first), and where replay puts the messages back\n"
	"      --hold DURATION   how long scanned messages stay hidden between renewals\n"
	"                        (default 60s; after a crash they reappear within this time)\n"
	"  -c, --config FILE     configuration (default $ECW_CONFIG, else ./ecworker.yaml)\n"
	"  -h, --help            this text\n\n"
	"A message that is not an ecworker envelope (written by another tool, e.g. an\n"
	"Azure Functions poison queue) has no job or reason: --job and --reason never\n"
	"select it (--group \"job:(not an envelope)\" does), --since uses the time it\n"
	"was put on the poison queue, and replay puts its text back unchanged.\n\n"
	"Groups: a key is DIM:VALUE, printed by `poison list --group-by DIM` exactly as\n"
	"--group takes it (quote it for the shell):\n"
	"  reason:VALUE   permanent or max-dequeue\n"
	"  job:VALUE      the job the message named\n"
	"  error:VALUE    the error with its variable parts replaced: text in double\n"
	"                 quotes, or in single quotes opening after anything but a letter\n"
	"                 or digit, becomes \"*\" or '*'; a word (letters, digits, _ and -)\n"
	"                 holding a digit becomes # (keys, numbers, ETags, request ids,\n"
	"                 times), so failures that differ only in those share a group\n"
	"  status:VALUE   the storage answer behind the error as the envelope records\n"
	"                 it: \"409 EntityAlreadyExists\", or \"503\" without an error code\n"
	"VALUE is - when the envelope lacks the field (status: envelopes of failures\n"
	"that had no storage answer, and those of workers older than the field) and\n"
	"(not an envelope) for a message that is not one. Control characters in VALUE\n"
	"are escaped (\\e, \\xNN, \\uNNNN, \\\\), and a VALUE over 200 bytes is cut to\n"
	"end in \"...\".\n\n"
	"How the queue is read: peek shows only the first 32 messages, so when there are\n"
	"more the command receives them (hidden from other readers while it runs, renewed\n"
	"as needed) and releases each one it did not act on, unchanged, when it ends. The\n"
	"service counts each receive in the poison message's dequeue count; nothing reads\n"
	"that count on a poison queue. Listing never deletes.\n";

static void help(FILE *f, const char *cmd)
{
	if (strcmp(cmd, "list") == 0)
		fputs("usage: ecworker poison list [-c FILE] [FILTERS] [--group-by DIM] [--json]\n\n"
		      "Shows the poison messages: id, age (since it failed), job, keys, reason, the\n"
		      "dequeue count it had on the job queue, and the error (cut to the terminal width).\n\n"
		      "      --json            one JSON object per line: the envelope's fields plus \"id\"\n"
		      "                        (the poison message id) and \"envelope\" (false for a\n"
		      "                        message that is not an ecworker envelope, with \"text\")\n"
		      "      --group-by DIM    count the selected messages per group instead: DIM is\n"
		      "                        reason, job, error or status. A table by count (most\n"
		      "                        first, ties by key): COUNT, OLDEST and NEWEST failure\n"
		      "                        (UTC) and the group's KEY, which --group takes; with\n"
		      "                        --json one object per group {\"key\",\"count\",\"oldest\",\n"
		      "                        \"newest\"}. At most 10000 groups are kept: the messages\n"
		      "                        of any further group are counted in one row, (other\n"
		      "                        groups) ({\"other_groups\":true} in JSON), and said so.\n",
		      f);
	else if (strcmp(cmd, "replay") == 0)
		fputs("usage: ecworker poison replay [-c FILE] [FILTERS] [--to QUEUE] [--rate N]\n"
		      "                              [--dry-run] [--canary N [--canary-wait DURATION]]\n\n"
		      "Puts each selected message's original text back on the job queue, byte for byte,\n"
		      "and only then deletes it from the poison queue. If the command dies between the\n"
		      "two, the message is on both queues: replaying it again later is harmless,\n"
		      "because every job converges to the current state. Messages not selected are\n"
		      "released untouched. Fix the cause first (worker/README.md, \"Runbook: messages\n"
		      "were poisoned\").\n\n"
		      "      --to QUEUE        put them on QUEUE instead of the configured job queue\n"
		      "      --rate N          at most N messages per second (token bucket)\n"
		      "      --dry-run         print what would be replayed; change nothing\n"
		      "      --canary N        replay N first, wait until the worker has processed each\n"
		      "                        (deleted it) or poisoned it again, and go on with the rest\n"
		      "                        only when none came back; otherwise stop with a report\n"
		      "      --canary-wait D   how long to wait for the canaries (default 5m); the\n"
		      "                        replay stops when they are not done by then\n\n"
		      "Ctrl-C stops after the message in hand. A summary (selected, replayed, skipped,\n"
		      "failed) ends the run. Exit status: 0 ok, 1 a message failed or a canary came\n"
		      "back, 2 usage.\n",
		      f);
	else
		fputs("usage: ecworker poison purge [-c FILE] [FILTERS] --yes\n\n"
		      "Deletes the selected poison messages. Without --yes it only shows what it would\n"
		      "delete and exits 2. Deleted messages are gone: list or replay them first.\n\n"
		      "      --yes             really delete\n",
		      f);
	fputc('\n', f);
	fputs(filter_help, f);
}

void ecw_poison_usage(FILE *file)
{
	fputs("usage: ecworker poison list|replay|purge [OPTIONS]\n\n"
	      "  list     show poison messages (never changes the queue)\n"
	      "  replay   put selected messages back on the job queue\n"
	      "  purge    delete selected messages (needs --yes)\n\n"
	      "`ecworker poison COMMAND --help` explains each; all take the same filters.\n"
	      "`poison list --group-by reason|job|error|status` counts them per group, and\n"
	      "`--group KEY` selects one group for any of the three.\n",
	      file);
}

/* ---- options ---------------------------------------------------------------- */

struct opts {
	const char *cmd;
	const char *config;
	struct ecw_poison_filter filter;
	const char *group;            /* --group KEY */
	enum ecw_group_dim group_dim; /* the dimension KEY names */
	enum ecw_group_dim group_by;  /* list --group-by; ECW_GROUP_NONE: list the messages */
	uint64_t limit;
	int hold_s;
	bool json, dry_run, yes;
	const char *to;
	const char *queue; /* --queue: the job queue whose poison queue this is */
	double rate;
	uint64_t canary;
	int64_t canary_wait_ms;
	char **ids;
};

static bool parse_count(uint64_t *out, const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s || *end || *s == '-' || v == 0)
		return false;
	*out = v;
	return true;
}

/* A duration option: milliseconds, or -1. */
static int64_t parse_duration(const char *s)
{
	int64_t ms;

	return ecw_duration_parse(&ms, s, true) == 0 && ms > 0 ? ms : -1;
}

static int usage_error(const char *cmd, const char *fmt, ...) ECW_PRINTF(2, 3);

static int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "poison %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(ecworker poison %s --help explains the options)\n", cmd);
	return 2;
}

/* Returns -1 to go on, else an exit status. */
static int parse_opts(struct opts *o, int argc, char **argv)
{
	static const struct option lopts[] = {
		{"config", required_argument, NULL, 'c'},      {"help", no_argument, NULL, 'h'},
		{"job", required_argument, NULL, 'j'},         {"reason", required_argument, NULL, 'R'},
		{"since", required_argument, NULL, 's'},       {"grep", required_argument, NULL, 'g'},
		{"id", required_argument, NULL, 'i'},          {"limit", required_argument, NULL, 'l'},
		{"hold", required_argument, NULL, 'H'},        {"json", no_argument, NULL, 'J'},
		{"to", required_argument, NULL, 't'},          {"rate", required_argument, NULL, 'r'},
		{"dry-run", no_argument, NULL, 'n'},           {"canary", required_argument, NULL, 'C'},
		{"canary-wait", required_argument, NULL, 'W'}, {"yes", no_argument, NULL, 'y'},
		{"group-by", required_argument, NULL, 'B'},    {"group", required_argument, NULL, 'G'},
		{"queue", required_argument, NULL, 'q'},       {NULL, 0, NULL, 0},
	};
	bool list = strcmp(o->cmd, "list") == 0, replay = strcmp(o->cmd, "replay") == 0;
	int ch;
	int64_t ms;
	char *end;

	o->canary_wait_ms = 300000;
	o->hold_s = 60;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:h", lopts, NULL)) != -1) {
		switch (ch) {
		case 'c': o->config = optarg; break;
		case 'h': help(stdout, o->cmd); return 0;
		case 'j': o->filter.job = optarg; break;
		case 'q': o->queue = optarg; break;
		case 'R':
			if (strcmp(optarg, "permanent") != 0 && strcmp(optarg, "max-dequeue") != 0)
				return usage_error(o->cmd,
						   "--reason must be permanent or max-dequeue, not '%s'",
						   optarg);
			o->filter.reason = optarg;
			break;
		case 's':
			if (ecw_poison_parse_since(&o->filter.since, optarg, time(NULL)) < 0)
				return usage_error(o->cmd, "%s", ecw_error_last()->message);
			break;
		case 'g': o->filter.grep = optarg; break;
		case 'i': o->ids[o->filter.nids++] = optarg; break;
		case 'l':
			if (!parse_count(&o->limit, optarg))
				return usage_error(
					o->cmd, "--limit must be a positive whole number, not '%s'", optarg);
			break;
		case 'H':
			if ((ms = parse_duration(optarg)) < 1000 || ms > 7LL * 86400 * 1000)
				return usage_error(
					o->cmd, "--hold must be a duration from 1s to 7d, not '%s'", optarg);
			o->hold_s = (int)(ms / 1000);
			break;
		case 'B':
			if (!list)
				return usage_error(
					o->cmd,
					"--group-by is for `poison list`; `poison %s` takes --group "
					"KEY, a key as `poison list --group-by` prints it",
					o->cmd);
			if (ecw_poison_group_dim_parse(&o->group_by, optarg) < 0)
				return usage_error(o->cmd, "%s", ecw_error_last()->message);
			break;
		case 'G':
			if (o->group)
				return usage_error(o->cmd, "%s", "--group selects one group: give it once");
			if (ecw_poison_group_key_dim(&o->group_dim, optarg) < 0)
				return usage_error(o->cmd, "%s", ecw_error_last()->message);
			o->group = optarg;
			break;
		case 'J':
			if (!list)
				return usage_error(o->cmd, "%s", "--json is for `poison list`");
			o->json = true;
			break;
		case 't':
		case 'r':
		case 'n':
		case 'C':
		case 'W':
			if (!replay)
				return usage_error(
					o->cmd, "%s",
					"--to, --rate, --dry-run and --canary are for `poison replay`");
			if (ch == 't')
				o->to = optarg;
			else if (ch == 'n')
				o->dry_run = true;
			else if (ch == 'C' && !parse_count(&o->canary, optarg))
				return usage_error(
					o->cmd, "--canary must be a positive whole number, not '%s'", optarg);
			else if (ch == 'W' && (o->canary_wait_ms = parse_duration(optarg)) < 0)
				return usage_error(o->cmd,
						   "--canary-wait must be a duration (90s, 5m), not '%s'",
						   optarg);
			else if (ch == 'r' &&
				 ((o->rate = strtod(optarg, &end)) <= 0 || end == optarg || *end))
				return usage_error(o->cmd, "--rate must be a positive number, not '%s'",
						   optarg);
			break;
		case 'y':
			if (strcmp(o->cmd, "purge") != 0)
				return usage_error(o->cmd, "%s", "--yes is for `poison purge`");
			o->yes = true;
			break;
		default: help(stderr, o->cmd); return 2;
		}
	}
	if (optind != argc)
		return usage_error(o->cmd, "unexpected argument '%s'", argv[optind]);
	o->filter.ids = o->filter.nids ? o->ids : NULL;
	return -1;
}

/* ---- list --------------------------------------------------------------- */

/* Display text: a row that runs out of memory is printed short. */
static void out_add(struct ecw_buf *b, const void *p, size_t n)
{
	if (ecw_buf_add(b, p, n) < 0)
		return;
}

static void out_adds(struct ecw_buf *b, const char *s)
{
	out_add(b, s, strlen(s));
}

/* Appends at most max display columns of s, escaped for the terminal
 * (ecw_cli_term), to b, cutting on a UTF-8 boundary. */
static void add_cut(struct ecw_buf *b, const char *s, size_t max)
{
	struct ecw_buf safe;
	size_t cols = 0;

	ecw_buf_init(&safe, 0);
	for (const unsigned char *p = (const unsigned char *)ecw_cli_term(&safe, s); *p && cols < max;
	     cols++) {
		size_t n = 1;
		while ((p[n] & 0xC0) == 0x80)
			n++;
		if (cols + 1 == max && p[n]) {
			out_adds(b, "~");
			break;
		}
		out_add(b, p, n);
		p += n;
	}
	ecw_buf_dispose(&safe);
}

static void add_col(struct ecw_buf *b, const char *s, size_t width)
{
	size_t before = b->len, cols = 0;

	add_cut(b, s, width);
	for (size_t i = before; i < b->len; i++)
		cols += ((unsigned char)b->ptr[i] & 0xC0) != 0x80;
	while (cols++ < width + 2)
		out_adds(b, " ");
}

static size_t terminal_width(void)
{
	struct winsize ws;
	const char *cols = getenv("COLUMNS");
	char *end;
	long n;

	if (isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	if (!cols)
		return 0;
	n = strtol(cols, &end, 10);
	return end != cols && !*end && n > 0 && n <= 10000 ? (size_t)n : 0;
}

struct lister {
	const struct opts *o;
	size_t width;
	time_t now;
	uint64_t shown;
};

static void print_json(const struct ecw_scan_item *it)
{
	struct json_object *obj = ecw_poison_view_json(it->view, it->msg->id, it->msg->insertion_time);

	if (obj)
		puts(json_object_to_json_string_ext(obj,
						    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(obj);
}

#define W_ID 36
#define W_AGE 5
#define W_JOB 18
#define W_KEYS 26
#define W_REASON 11
#define W_DEQ 3

static void print_header(size_t width)
{
	struct ecw_buf b;

	ecw_buf_init(&b, 0);
	add_col(&b, "ID", W_ID);
	add_col(&b, "AGE", W_AGE);
	add_col(&b, "JOB", W_JOB);
	add_col(&b, "KEYS", W_KEYS);
	add_col(&b, "REASON", W_REASON);
	add_col(&b, "DEQ", W_DEQ);
	out_adds(&b, "ERROR");
	(void)width;
	puts(b.ptr);
	ecw_buf_dispose(&b);
}

static void print_row(const struct lister *L, const struct ecw_scan_item *it)
{
	const struct ecw_poison_view *v = it->view;
	struct ecw_buf b, keys;
	char age[32], deq[24];
	size_t used, room;

	ecw_buf_init(&b, 0);
	ecw_buf_init(&keys, 0);
	time_t when = v->envelope && v->failed_at ? v->failed_at : it->msg->insertion_time;

	if (when)
		ecw_progress_human_age(age, sizeof(age), (long long)(L->now - when));
	else
		snprintf(age, sizeof(age), "-");
	if (v->dequeue_count >= 0)
		snprintf(deq, sizeof(deq), "%ld", v->dequeue_count);
	else
		snprintf(deq, sizeof(deq), "-");
	if (v->pk || v->rk) {
		out_adds(&keys, v->pk ? v->pk : "");
		out_adds(&keys, "/");
		out_adds(&keys, v->rk ? v->rk : "");
	}
	add_col(&b, it->msg->id, W_ID);
	add_col(&b, age, W_AGE);
	add_col(&b, v->envelope ? (v->job ? v->job : "(no job)") : "(foreign)", W_JOB);
	add_col(&b, keys.len ? keys.ptr : "-", W_KEYS);
	add_col(&b, v->reason ? v->reason : "-", W_REASON);
	add_col(&b, deq, W_DEQ);
	used = W_ID + W_AGE + W_JOB + W_KEYS + W_REASON + W_DEQ + 12;
	room = L->width > used + 10 ? L->width - used : L->width ? 10 : (size_t)-1;
	add_cut(&b, v->envelope ? (v->error ? v->error : "") : v->original, room);
	puts(b.ptr);
	ecw_buf_dispose(&keys);
	ecw_buf_dispose(&b);
}

static enum ecw_scan_verdict list_visit(void *payload, struct ecw_client *c, const struct ecw_scan_item *it)
{
	struct lister *L = payload;

	(void)c;
	if (L->o->json) {
		print_json(it);
	} else {
		if (L->shown == 0)
			print_header(L->width);
		print_row(L, it);
	}
	L->shown++;
	return ECW_SCAN_KEEP;
}

/* ---- list --group-by ------------------------------------------------------- */

#define GROUPS_MAX 10000

/* How many groups list keeps. Test builds may lower it (never raise it) with
 * ECW_TEST_POISON_GROUPS_MAX, so that a test meets the cap with a few messages. */
static size_t groups_max(void)
{
#ifdef ECW_TESTING
	const char *v = getenv("ECW_TEST_POISON_GROUPS_MAX");
	char *end = NULL;
	long n = v ? strtol(v, &end, 10) : 0;

	if (v && end != v && *end == '\0' && n > 0 && n < GROUPS_MAX)
		return (size_t)n;
#endif
	return GROUPS_MAX;
}

struct grouper {
	enum ecw_group_dim dim;
	struct ecw_group_table *table;
	struct ecw_buf key;
	int err; /* out of memory: the scan stopped */
};

static enum ecw_scan_verdict group_visit(void *payload, struct ecw_client *c, const struct ecw_scan_item *it)
{
	struct grouper *g = payload;
	const struct ecw_poison_view *v = it->view;
	/* The failure time, as --since and the age column take it. */
	time_t when = v->envelope && v->failed_at ? v->failed_at : it->msg->insertion_time;

	(void)c;
	if ((g->err = ecw_poison_group_key(&g->key, g->dim, v)) < 0 ||
	    (g->err = ecw_poison_group_table_add(g->table, ecw_buf_cstr(&g->key), when)) < 0)
		return ECW_SCAN_STOP;
	return ECW_SCAN_KEEP;
}

/* "2026-11-20T10:00:00Z", or "-" when unknown. */
static const char *utc(char out[32], time_t t)
{
	struct tm tm;

	if (!t || !gmtime_r(&t, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, 32, "-");
	return out;
}

/* The key is safe to print as it is (poison_group.h), and must be: it is
 * what --group takes. */
static void print_group(const struct ecw_group *g, bool json)
{
	char oldest[32], newest[32];

	utc(oldest, g->oldest);
	utc(newest, g->newest);
	if (!json) {
		printf("%7llu  %-20s  %-20s  %s\n", (unsigned long long)g->count, oldest, newest,
		       g->key ? g->key : "(other groups)");
		return;
	}
	struct json_object *obj = json_object_new_object();
	if (!obj)
		return;
	if (g->key)
		json_object_object_add(obj, "key", json_object_new_string(g->key));
	else
		json_object_object_add(obj, "other_groups", json_object_new_boolean(1));
	json_object_object_add(obj, "count", json_object_new_int64((int64_t)g->count));
	if (g->oldest)
		json_object_object_add(obj, "oldest", json_object_new_string(oldest));
	if (g->newest)
		json_object_object_add(obj, "newest", json_object_new_string(newest));
	puts(json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(obj);
}

/* Returns the exit status. */
static int list_groups(const struct opts *o, struct ecw_client *c, const struct ecw_scan_options *so)
{
	size_t max = groups_max();
	struct grouper g = {.dim = o->group_by, .table = ecw_poison_group_table_new(max)};
	struct ecw_scan_result r = {0};
	const struct ecw_group *v, *other;
	size_t n;
	int rc = 1;

	ecw_buf_init(&g.key, 0);
	if (!g.table) {
		fprintf(stderr, "poison list: out of memory\n");
		goto done;
	}
	if (ecw_poison_scan(&r, c, so, group_visit, &g) < 0 || g.err < 0) {
		fprintf(stderr, "poison list: %s\n", ecw_error_last()->message);
		goto done;
	}
	v = ecw_poison_group_table_sorted(&n, g.table);
	other = ecw_poison_group_table_other(g.table);
	if (!o->json && (n || other->count))
		printf("%7s  %-20s  %-20s  %s\n", "COUNT", "OLDEST", "NEWEST", "KEY");
	for (size_t i = 0; i < n; i++)
		print_group(&v[i], o->json);
	if (other->count)
		print_group(other, o->json);
	fflush(stdout);
	if (other->count)
		fprintf(stderr,
			"more than %zu groups: the %llu messages of the groups beyond them are counted "
			"together as (other groups); narrow the selection to see them\n",
			max, (unsigned long long)other->count);
	if (!o->json)
		fprintf(stderr, "%zu groups of %llu selected poison messages (of %llu)%s\n", n,
			(unsigned long long)r.matched, (unsigned long long)r.seen,
			r.complete || o->limit ? "" : " (scan stopped early)");
	rc = 0;
done:
	ecw_buf_dispose(&g.key);
	ecw_poison_group_table_free(g.table);
	return rc;
}

/* ---- replay and purge ------------------------------------------------------ */

struct canary {
	struct ecw_queue_msg put; /* id and pop receipt from the put */
	char label[160];          /* "job pk/rk" for the report */
	enum { C_WAITING, C_IN_FLIGHT, C_GONE, C_PROCESSED, C_POISONED } state;
	char error[512]; /* C_POISONED: the new envelope's error */
};

struct actor {
	const struct opts *o;
	const char *queue;  /* the poison queue */
	const char *target; /* where replay puts */
	struct ecw_queue_put_options po;
	struct ecw_pace pace;
	uint64_t replayed, failed, not_deleted, deleted;
	struct canary *canaries; /* record puts here while canary_slots > 0 */
	size_t ncanaries, canary_slots;
	char detail[96];
};

/* "job pk/rk" of an envelope, or "(foreign, N bytes)", escaped for the
 * terminal, cut to cap on a character boundary. */
static void describe(char *out, size_t cap, const struct ecw_scan_item *it)
{
	const struct ecw_poison_view *v = it->view;
	struct ecw_buf b, part;
	size_t n;

	ecw_buf_init(&b, 0);
	ecw_buf_init(&part, 0);
	if (v->envelope) {
		out_adds(&b, v->job ? ecw_cli_term(&part, v->job) : "(no job)");
		out_adds(&b, " ");
		out_adds(&b, ecw_cli_term(&part, v->pk));
		out_adds(&b, "/");
		out_adds(&b, ecw_cli_term(&part, v->rk));
	} else {
		(void)!ecw_buf_printf(&b, "(foreign, %zu bytes)", v->original_len);
	}
	n = b.len < cap ? b.len : cap - 1;
	while (n < b.len && n > 0 && ((unsigned char)b.ptr[n] & 0xC0) == 0x80)
		n--;
	memcpy(out, ecw_buf_cstr(&b), n);
	out[n] = '\0';
	ecw_buf_dispose(&part);
	ecw_buf_dispose(&b);
}

static void report_message(const char *what, const struct ecw_scan_item *it, const char *error)
{
	struct ecw_buf safe;
	char label[160];

	ecw_buf_init(&safe, 0);
	describe(label, sizeof(label), it);
	fprintf(stderr, "%s %s", what, ecw_cli_term(&safe, it->msg->id));
	if (it->view->envelope)
		fprintf(stderr, " (%s)", label);
	if (error)
		fprintf(stderr, ": %s", ecw_cli_term(&safe, error));
	fputc('\n', stderr);
	ecw_buf_dispose(&safe);
}

/* A dry run's line: "would replay ID LABEL -> QUEUE", "would delete ID LABEL". */
static void print_would(const char *verb, const struct ecw_scan_item *it, const char *label,
			const char *target)
{
	struct ecw_buf safe;

	ecw_buf_init(&safe, 0);
	printf("would %s %s %s%s%s\n", verb, ecw_cli_term(&safe, it->msg->id), label, target ? " -> " : "",
	       target ? target : "");
	ecw_buf_dispose(&safe);
}

static enum ecw_scan_verdict replay_visit(void *payload, struct ecw_client *c, const struct ecw_scan_item *it)
{
	struct actor *a = payload;
	struct ecw_queue_msg put;
	char label[160];
	int err;

	describe(label, sizeof(label), it);
	if (a->o->dry_run) {
		print_would("replay", it, label, a->target);
		return ECW_SCAN_KEEP;
	}
	if (it->view->original_len > ECW_QUEUE_MAX_TEXT) {
		a->failed++;
		report_message("cannot replay", it, "the original is larger than a queue message");
		return ECW_SCAN_KEEP;
	}
	ecw_pace_take(&a->pace, &interrupted);
	/* First the copy on the job queue, then the envelope goes: a crash in
	 * between leaves the message on both, never on neither. */
	memset(&put, 0, sizeof(put));
	if (ecw_queue_put(&put, c, a->target, it->view->original, it->view->original_len, &a->po) < 0) {
		a->failed++;
		report_message("replay failed for", it, ecw_error_last()->message);
		return ECW_SCAN_KEEP;
	}
	a->replayed++;
	if (a->canary_slots > a->ncanaries) {
		struct canary *k = &a->canaries[a->ncanaries++];
		memset(k, 0, sizeof(*k));
		k->put = put;
		snprintf(k->label, sizeof(k->label), "%s", label);
	}
	if ((err = ecw_queue_delete(c, a->queue, it->msg->id, it->msg->pop_receipt)) < 0) {
		/* The copy is on the job queue; the envelope stays and a later
		 * replay would put it there again (harmless: jobs converge). */
		a->not_deleted++;
		report_message("replayed, but could not delete", it, ecw_error_last()->message);
		return err == ECW_ENOTFOUND ? ECW_SCAN_TAKEN : ECW_SCAN_KEEP;
	}
	return ECW_SCAN_TAKEN;
}

static enum ecw_scan_verdict purge_visit(void *payload, struct ecw_client *c, const struct ecw_scan_item *it)
{
	struct actor *a = payload;
	char label[160];
	int err;

	describe(label, sizeof(label), it);
	if (!a->o->yes) {
		print_would("delete", it, label, NULL);
		return ECW_SCAN_KEEP;
	}
	if ((err = ecw_queue_delete(c, a->queue, it->msg->id, it->msg->pop_receipt)) < 0) {
		if (err == ECW_ENOTFOUND)
			return ECW_SCAN_TAKEN; /* deleted by someone else meanwhile */
		a->failed++;
		report_message("could not delete", it, ecw_error_last()->message);
		return ECW_SCAN_KEEP;
	}
	a->deleted++;
	return ECW_SCAN_TAKEN;
}

static const char *actor_detail(void *payload)
{
	struct actor *a = payload;

	snprintf(a->detail, sizeof(a->detail), "%llu replayed, %llu deleted, %llu failed",
		 (unsigned long long)a->replayed, (unsigned long long)a->deleted,
		 (unsigned long long)a->failed);
	return a->detail;
}

/* ---- the canary --------------------------------------------------------- */

struct canary_check {
	struct actor *a;
	size_t found;
};

/* Looks for new envelopes whose message_id is a canary's job-queue id. */
static enum ecw_scan_verdict canary_visit(void *payload, struct ecw_client *c, const struct ecw_scan_item *it)
{
	struct canary_check *cc = payload;
	const struct ecw_poison_view *v = it->view;

	(void)c;
	if (!v->envelope || !v->message_id)
		return ECW_SCAN_KEEP;
	for (size_t i = 0; i < cc->a->ncanaries; i++) {
		struct canary *k = &cc->a->canaries[i];
		if (k->state != C_POISONED && strcmp(k->put.id, v->message_id) == 0) {
			k->state = C_POISONED;
			snprintf(k->error, sizeof(k->error), "%s", v->error ? v->error : "");
			cc->found++;
		}
	}
	return ECW_SCAN_KEEP;
}

/* Asks the job queue about each unfinished canary with the pop receipt of
 * its put: an update that succeeds means no worker has received it yet
 * (it was visible and stays so: visibility 0, text unchanged); a receipt
 * mismatch means a worker holds it; "not found" means it is gone, either
 * done or poisoned again, which the poison queue then tells apart (the
 * worker puts the envelope before it deletes the message). */
static int canary_wait(struct actor *a, struct ecw_client *c, const struct ecw_scan_options *base)
{
	int64_t deadline = ecw_clock_now_ms() + a->o->canary_wait_ms;
	size_t waiting, in_flight, poisoned = 0;
	struct ecw_buf safe;

	for (;;) {
		bool newly_gone = false;

		waiting = in_flight = 0;
		for (size_t i = 0; i < a->ncanaries; i++) {
			struct canary *k = &a->canaries[i];
			int err;

			if (k->state == C_PROCESSED || k->state == C_POISONED || k->state == C_GONE)
				continue;
			err = k->put.pop_receipt[0] ? ecw_queue_update(&k->put, c, a->target, 0, NULL, 0)
						    : ECW_ENOTFOUND;
			if (err == 0) {
				k->state = C_WAITING;
			} else if (err == ECW_ENOTFOUND && ecw_queue_err_received_again(ecw_error_last())) {
				k->state = C_IN_FLIGHT; /* keep asking with the same receipt */
			} else if (err == ECW_ENOTFOUND) {
				k->state = C_GONE;
				newly_gone = true;
			} else {
				fprintf(stderr, "canary: cannot ask the job queue about %s: %s\n", k->put.id,
					ecw_error_last()->message);
			}
		}
		if (newly_gone) {
			struct canary_check cc = {a, 0};
			struct ecw_scan_options so = *base;
			struct ecw_scan_result r;

			so.filter = NULL;
			so.group = NULL;
			so.limit = 0;
			so.peek_ok = true;
			so.progress = NULL;
			if (ecw_poison_scan(&r, c, &so, canary_visit, &cc) < 0) {
				fprintf(stderr, "canary: cannot read the poison queue: %s\n",
					ecw_error_last()->message);
				return -1;
			}
			for (size_t i = 0; i < a->ncanaries; i++)
				if (a->canaries[i].state == C_GONE)
					a->canaries[i].state = C_PROCESSED;
		}
		poisoned = 0;
		for (size_t i = 0; i < a->ncanaries; i++) {
			waiting += a->canaries[i].state == C_WAITING;
			in_flight += a->canaries[i].state == C_IN_FLIGHT;
			poisoned += a->canaries[i].state == C_POISONED;
		}
		if (poisoned || (waiting == 0 && in_flight == 0) || ecw_clock_now_ms() >= deadline ||
		    interrupted)
			break;
		ecw_clock_sleep_ms(500);
	}
	fprintf(stderr,
		"canary: %zu replayed: %zu processed, %zu poisoned again, %zu in progress, %zu not picked up\n",
		a->ncanaries, a->ncanaries - waiting - in_flight - poisoned, poisoned, in_flight, waiting);
	ecw_buf_init(&safe, 0);
	for (size_t i = 0; i < a->ncanaries; i++) {
		struct canary *k = &a->canaries[i];
		if (k->state == C_POISONED)
			fprintf(stderr, "  poisoned again: %s (job queue id %s): %s\n", k->label, k->put.id,
				ecw_cli_term(&safe, k->error));
		else if (k->state == C_WAITING || k->state == C_IN_FLIGHT)
			fprintf(stderr, "  %s: %s (job queue id %s)\n",
				k->state == C_WAITING ? "not picked up (is a worker running?)"
						      : "still in progress",
				k->label, k->put.id);
	}
	ecw_buf_dispose(&safe);
	if (poisoned) {
		fprintf(stderr,
			"canary: stopped; the other selected messages are untouched in the poison queue.\n"
			"Find the cause (ecworker poison list --since 10m), fix it, and replay again.\n");
		return -1;
	}
	if (waiting || in_flight) {
		fprintf(stderr,
			"canary: not finished within --canary-wait; stopped, the other selected messages are "
			"untouched\n");
		return -1;
	}
	return 0;
}

/* ---- the command ------------------------------------------------------- */

static void print_summary(const struct opts *o, const struct ecw_scan_result *r, uint64_t selected,
			  const struct actor *a)
{
	uint64_t skipped = r->seen - selected;

	fflush(stdout);

	if (strcmp(o->cmd, "replay") == 0)
		printf("replay%s: %llu selected, %llu replayed, %llu skipped, %llu failed%s\n",
		       o->dry_run ? " (dry run)" : "", (unsigned long long)selected,
		       (unsigned long long)a->replayed, (unsigned long long)skipped,
		       (unsigned long long)(a->failed + a->not_deleted), r->stopped ? " (interrupted)" : "");
	else if (strcmp(o->cmd, "purge") == 0)
		printf("purge%s: %llu selected, %llu deleted, %llu skipped, %llu failed%s\n",
		       o->yes ? "" : " (not done)", (unsigned long long)selected,
		       (unsigned long long)a->deleted, (unsigned long long)skipped,
		       (unsigned long long)a->failed, r->stopped ? " (interrupted)" : "");
	fflush(stdout);
	if (a->not_deleted)
		fprintf(stderr,
			"%llu replayed messages could not be deleted from the poison queue: a later replay "
			"puts them on the job queue again, which is harmless\n",
			(unsigned long long)a->not_deleted);
	if (r->release_failed)
		fprintf(stderr,
			"%llu messages could not be released; they become visible again within --hold\n",
			(unsigned long long)r->release_failed);
}

static int run(struct opts *o)
{
	struct ecw_config *cfg = ecw_cli_load_config(o->config);
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct ecw_progress prog;
	struct ecw_scan_options so = {0};
	struct ecw_scan_result r = {0}, r2 = {0};
	struct lister L = {0};
	struct actor a = {0};
	struct sigaction sa;
	long long depth = 0;
	bool list = strcmp(o->cmd, "list") == 0, replay = strcmp(o->cmd, "replay") == 0;
	int rc = 1;

	if (!cfg)
		return 2;
	char cmd[32];
	snprintf(cmd, sizeof(cmd), "poison %s", o->cmd);
	const struct ecw_queue_def *q = ecw_cli_queue(cfg, cmd, o->queue);
	if (!q) {
		ecw_config_free(cfg);
		return 2;
	}
	ecw_log_setup(cfg->log.level, cfg->log.format);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_interrupt;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (ecw_connect(&acct, &c, cfg) < 0 || ecw_queue_count(&depth, c, q->poison) < 0) {
		fprintf(stderr, "poison %s: %s\n", o->cmd, ecw_error_last()->message);
		goto done;
	}
	ecw_progress_init(&prog, o->cmd, isatty(2) && !o->json, (uint64_t)(depth > 0 ? depth : 0));
	so.queue = q->poison;
	so.filter = &o->filter;
	so.group = o->group;
	so.group_dim = o->group_dim;
	so.limit = o->limit;
	so.hold_s = o->hold_s;
	so.stop = &interrupted;
	so.progress = &prog;
	a.o = o;
	a.queue = q->poison;
	a.target = o->to ? o->to : q->name;
	a.po = (struct ecw_queue_put_options){0, cfg->worker.message_ttl_s};
	ecw_pace_init(&a.pace, o->rate);
	if (list) {
		L.o = o;
		L.width = terminal_width();
		L.now = time(NULL);
		so.peek_ok = true;
		if (o->group_by != ECW_GROUP_NONE) {
			rc = list_groups(o, c, &so);
			goto done;
		}
		if (ecw_poison_scan(&r, c, &so, list_visit, &L) < 0) {
			fprintf(stderr, "poison list: %s\n", ecw_error_last()->message);
			goto done;
		}
		fflush(stdout);
		if (!o->json)
			fprintf(stderr, "%llu of %llu poison messages selected%s\n",
				(unsigned long long)r.matched, (unsigned long long)r.seen,
				r.complete || o->limit ? "" : " (scan stopped early)");
		rc = 0;
		goto done;
	}
	so.progress_detail = actor_detail;
	if (replay && strcmp(a.target, a.queue) == 0) {
		/* Each copy would be met again by the same scan, for ever. */
		fprintf(stderr, "poison replay: --to names the poison queue itself\n");
		rc = 2;
		goto done;
	}
	if (replay && !o->dry_run) {
		long long n;
		int err = !o->to && cfg->worker.create_missing ? ecw_queue_create(NULL, c, a.target)
							       : ecw_queue_count(&n, c, a.target);
		if (err < 0) {
			fprintf(stderr, "poison replay: queue '%s': %s\n", a.target,
				ecw_error_last()->message);
			goto done;
		}
	}
	if (replay && o->canary && !o->dry_run) {
		/* The canaries first, on their own: the scan ends (everything else
		 * released) before the wait. */
		struct ecw_scan_options cs = so;

		cs.limit = o->limit && o->limit < o->canary ? o->limit : o->canary;
		if (!(a.canaries = calloc(cs.limit, sizeof(*a.canaries)))) {
			fprintf(stderr, "poison replay: out of memory\n");
			goto done;
		}
		a.canary_slots = cs.limit;
		if (ecw_poison_scan(&r, c, &cs, replay_visit, &a) < 0) {
			fprintf(stderr, "poison replay: %s\n", ecw_error_last()->message);
			print_summary(o, &r, r.matched, &a);
			goto done;
		}
		fprintf(stderr, "canary: %zu replayed; waiting up to %.0f s for the worker\n", a.ncanaries,
			(double)o->canary_wait_ms / 1000.0);
		if (a.failed || a.not_deleted || canary_wait(&a, c, &so) < 0 || interrupted) {
			print_summary(o, &r, r.matched, &a);
			rc = interrupted ? 130 : 1;
			goto done;
		}
		if (o->limit)
			so.limit = o->limit - r.matched;
		if (o->limit && so.limit == 0) {
			print_summary(o, &r, r.matched, &a);
			rc = 0;
			goto done;
		}
	}
	if (ecw_poison_scan(&r2, c, &so, replay ? replay_visit : purge_visit, &a) < 0)
		fprintf(stderr, "poison %s: %s\n", o->cmd, ecw_error_last()->message);
	else
		rc = a.failed || a.not_deleted ? 1 : 0;
	/* The canary pass's messages count in the summary too. */
	r2.matched += r.matched;
	print_summary(o, &r2, r2.matched, &a);
	if (r2.stopped)
		rc = 130;
	if (!replay && !o->yes && rc == 0) {
		fprintf(stderr,
			"purge: nothing deleted; run again with --yes to delete these %llu messages\n",
			(unsigned long long)r2.matched);
		rc = 2;
	}
done:
	free(a.canaries);
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_config_free(cfg);
	return rc;
}

int ecw_cmd_poison(int argc, char **argv)
{
	struct opts o = {0};
	int rc;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		ecw_poison_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "list") != 0 && strcmp(argv[1], "replay") != 0 && strcmp(argv[1], "purge") != 0) {
		fprintf(stderr, "poison: unknown command '%s'\n", argv[1]);
		ecw_poison_usage(stderr);
		return 2;
	}
	o.cmd = argv[1];
	if (!(o.ids = calloc((size_t)argc, sizeof(char *))))
		return 1;
	if ((rc = parse_opts(&o, argc - 1, argv + 1)) < 0)
		rc = run(&o);
	free(o.ids);
	return rc;
}
