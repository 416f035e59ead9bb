/* SPDX-License-Identifier: MIT */
/* test_terminal_escapes.c - what the operator commands print of a poison message reaches the terminal
 * escaped, against a real Azurite (build/ecworker-test as a process; the fixture is poisonfx.h). Poison
 * envelopes whose job, keys, reason and error hold terminal escape sequences (OSC retitle, clear screen,
 * cursor up, CR, C1 CSI, a bidi override) and a foreign message with CR, LF, C1 and bidi are put on the
 * poison queue; then `poison list`, `poison replay --dry-run`, `poison purge` (without --yes) and
 * `status` must print no control byte but the line ends, no C1 or bidi control and no invalid UTF-8, and
 * show the escaped forms (\e, \xNN, \uNNNN, \r); `poison list --json` and `status --json` must parse
 * back to the exact original text, a tab in a job name included. */
#include "itest.h"
#include "poisonfx.h"
#include "proc.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_codec.h"

#define JOB "job\x1b]0;pwned\x07"
#define JOB_SHOWN "job\\e]0;pwned\\x07"
#define PK "pk\x1b[2J\r"
#define PK_SHOWN "pk\\e[2J\\r"
#define RK                                                                                                   \
	"rk\xc2\x9b"                                                                                         \
	"31m\xe2\x80\xae"
#define RK_SHOWN "rk\\u009b31m\\u202e"
#define REASON "perm\x1b[5m"
#define REASON_SHOWN "perm\\e[5m"
#define ERROR_TEXT "err\x1b[1A\x1b[2Kfake line\n"
#define ERROR_SHOWN "err\\e[1A\\e[2Kfake line\\n"
#define FOREIGN                                                                                              \
	"foreign\r\xc2\x9b"                                                                                  \
	"2J\xe2\x80\xae\n tail"
#define FOREIGN_SHOWN "foreign\\r\\u009b2J\\u202e\\n tail"
#define TAB_JOB "a\tb"

/* Text a terminal shows as it is: valid UTF-8, no C0 control but LF, no DEL,
 * no C1 control, no bidi control. */
static void expect_terminal_safe(const char *out, const char *what)
{
	size_t n = strlen(out), k;
	uint32_t cp;

	for (size_t i = 0; i < n; i += k) {
		if (!(k = ecw_utf8_decode(out + i, n - i, &cp)))
			fail_msg("%s: byte 0x%02x at %zu is not UTF-8:\n%s", what, (unsigned char)out[i], i,
			         out);
		if ((cp < 0x20 && cp != '\n') || (cp >= 0x7F && cp <= 0x9F) ||
		    (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069))
			fail_msg("%s: control character U+%04X at %zu reaches the terminal:\n%s", what,
			         (unsigned)cp, i, out);
	}
}

static void expect_has(const char *out, const char *want, const char *what)
{
	ITEST_CHECK(strstr(out, want), "%s does not show [%s]:\n%s", what, want, out);
}

static void put_hostile(struct px_put *p, struct px *x)
{
	px_put_job(&p[0], x, JOB, REASON, time(NULL) - 60, ERROR_TEXT, PK, RK, "");
	px_put_job(&p[1], x, TAB_JOB, "permanent", time(NULL) - 60, "e", "p", "r", "");
	px_put_text(p[2].id, x, x->poison, FOREIGN, strlen(FOREIGN));
}

static void run(char **out, struct px *x, int want, const char *sub, const char *const *args)
{
	char *err = NULL;

	px_cmd_expect(out, &err, x, want, sub, args);
	expect_terminal_safe(err, sub);
	free(err);
}

static void test_terminal_escapes__poison_commands(void **state)
{
	struct px *x = *state;
	struct px_put p[3];
	char *out = NULL;

	memset(p, 0, sizeof(p));
	px_write_config(x, "  archive: {type: test-noop}\n");
	put_hostile(p, x);

	run(&out, x, 0, "list", NULL);
	expect_terminal_safe(out, "poison list");
	expect_has(out, JOB_SHOWN, "poison list");
	expect_has(out, ERROR_SHOWN, "poison list");
	expect_has(out, FOREIGN_SHOWN, "poison list");
	free(out);

	run(&out, x, 0, "replay", (const char *const[]){"--dry-run", NULL});
	expect_terminal_safe(out, "poison replay --dry-run");
	expect_has(out, "would replay ", "poison replay --dry-run");
	expect_has(out, " " JOB_SHOWN " " PK_SHOWN "/" RK_SHOWN " -> ", "poison replay --dry-run");
	free(out);

	run(&out, x, 2, "purge", NULL); /* 2: nothing deleted without --yes */
	expect_terminal_safe(out, "poison purge");
	expect_has(out, " " JOB_SHOWN " " PK_SHOWN "/" RK_SHOWN "\n", "poison purge");
	free(out);

	/* --json: exact JSON, which parses back to the very bytes put. */
	struct json_object *lines = NULL;
	struct px_idset ids;
	bool seen_envelope = false, seen_foreign = false;
	px_list_ids(&ids, x, NULL, &lines);
	ITEST_CHECK(ids.n == 3, "poison list --json listed %zu messages, want 3", ids.n);
	for (size_t i = 0; i < json_object_array_length(lines); i++) {
		struct json_object *o = json_object_array_get_idx(lines, i), *v;
		if (json_object_object_get_ex(o, "text", &v)) {
			assert_string_equal(json_object_get_string(v), FOREIGN);
			seen_foreign = true;
		} else if (json_object_object_get_ex(o, "job", &v) &&
		           strcmp(json_object_get_string(v), JOB) == 0) {
			assert_true(json_object_object_get_ex(o, "pk", &v));
			assert_string_equal(json_object_get_string(v), PK);
			assert_true(json_object_object_get_ex(o, "rk", &v));
			assert_string_equal(json_object_get_string(v), RK);
			assert_true(json_object_object_get_ex(o, "error", &v));
			assert_string_equal(json_object_get_string(v), ERROR_TEXT);
			assert_true(json_object_object_get_ex(o, "reason", &v));
			assert_string_equal(json_object_get_string(v), REASON);
			seen_envelope = true;
		}
	}
	json_object_put(lines);
	assert_true(seen_envelope && seen_foreign);
	px_idset_free(&ids);
	px_puts_clear(p, 3);
}

/* `poison list --group-by` prints group keys escaped (keys are what --group
 * takes, so they hold the escaped text itself), --json the same keys, and
 * replay --group with a printed key moves exactly that message. */
static void test_terminal_escapes__poison_groups(void **state)
{
	struct px *x = *state;
	struct px_put p[3];
	char *out = NULL;
	static const struct {
		const char *dim, *key;
	} shown[] = {
	    {"job", "job:" JOB_SHOWN},
	    {"job", "job:a\\tb"},
	    {"reason", "reason:" REASON_SHOWN},
	    {"error", "error:err\\e[#\\e[# line\\n"}, /* "2Kfake" holds a digit: # */
	    {"status", "status:(not an envelope)"},
	};

	memset(p, 0, sizeof(p));
	px_write_config(x, "  archive: {type: test-noop}\n");
	put_hostile(p, x);
	p[2].text = strdup(FOREIGN); /* for px_expect_poison_exactly */
	p[2].len = strlen(FOREIGN);
	for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++) {
		char want[256];
		run(&out, x, 0, "list", (const char *const[]){"--group-by", shown[i].dim, NULL});
		expect_terminal_safe(out, "poison list --group-by");
		snprintf(want, sizeof(want), "  %s\n", shown[i].key);
		expect_has(out, want, "poison list --group-by");
		free(out);
		run(&out, x, 0, "list", (const char *const[]){"--group-by", shown[i].dim, "--json", NULL});
		expect_terminal_safe(out, "poison list --group-by --json");
		struct json_object *j = NULL;
		bool found = false;
		for (char *line = out, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
			*nl = '\0';
			assert_non_null(j = json_tokener_parse(line));
			found = found || strcmp(json_object_get_string(json_object_object_get(j, "key")),
			                        shown[i].key) == 0;
			json_object_put(j);
		}
		ITEST_CHECK(found, "poison list --group-by %s --json has no key [%s]", shown[i].dim,
		            shown[i].key);
		free(out);
	}

	run(&out, x, 0, "replay", (const char *const[]){"--group", "job:" JOB_SHOWN, NULL});
	free(out);
	px_expect_poison_exactly(x, p, 3, (const bool[]){false, true, true}, true);
	struct px_qset q;
	px_read_queue(&q, x, x->queue, true);
	assert_int_equal(q.n, 1);
	assert_int_equal(px_qset_count_text(&q, p[0].original, p[0].original_len), 1);
	px_qset_free(&q);
	px_puts_clear(p, 3);
}

/* `status` counts poison messages by job and reason: the table shows them
 * escaped; --json has them exact, a job with a tab in it too. */
static void test_terminal_escapes__status(void **state)
{
	struct px *x = *state;
	struct px_put p[3];
	char *out = NULL, *err = NULL;
	const char *args[] = {"status", "-c", x->cfg, NULL, NULL};

	memset(p, 0, sizeof(p));
	px_write_config(x, "  archive: {type: test-noop}\n");
	put_hostile(p, x);

	int code = proc_run(&out, &err, "status", args, x->env, 30000);
	ITEST_CHECK(code == 0, "status exited %d\n%s\n%s", code, out, err);
	expect_terminal_safe(out, "status");
	expect_terminal_safe(err, "status (stderr)");
	expect_has(out, JOB_SHOWN, "status");
	expect_has(out, REASON_SHOWN, "status");
	expect_has(out, "a\\tb", "status");
	free(out);
	free(err);

	args[3] = "--json";
	code = proc_run(&out, &err, "status-json", args, x->env, 30000);
	ITEST_CHECK(code == 0, "status --json exited %d\n%s\n%s", code, out, err);
	struct json_object *o = json_tokener_parse(out), *pq, *rows;
	ITEST_CHECK(o, "status --json printed no JSON:\n%s", out);
	assert_true(json_object_object_get_ex(o, "poison_queue", &pq));
	assert_true(json_object_object_get_ex(pq, "by_job_and_reason", &rows));
	int found = 0;
	for (size_t i = 0; i < json_object_array_length(rows); i++) {
		struct json_object *r = json_object_array_get_idx(rows, i), *job, *reason;
		assert_true(json_object_object_get_ex(r, "job", &job));
		assert_true(json_object_object_get_ex(r, "reason", &reason));
		found += strcmp(json_object_get_string(job), JOB) == 0 &&
		         strcmp(json_object_get_string(reason), REASON) == 0;
		found += strcmp(json_object_get_string(job), TAB_JOB) == 0 &&
		         strcmp(json_object_get_string(reason), "permanent") == 0;
	}
	ITEST_CHECK(found == 2, "status --json: the two jobs not found exactly in %s", out);
	json_object_put(o);
	free(out);
	free(err);
	px_puts_clear(p, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_terminal_escapes__poison_commands, px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_terminal_escapes__status, px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_terminal_escapes__poison_groups, px_setup, px_teardown),
	};
	return cmocka_run_group_tests_name("terminal_escapes", tests, NULL, NULL);
}
