/* SPDX-License-Identifier: MIT */
/* test_log.c - log lines as written to a file descriptor: JSON lines that
 * json-c reads back strictly (fields in call order, escaping, UTF-8), text
 * lines with their quoting, level filtering, the bounded line, redaction of
 * registered secrets and of sig= / AccountKey= values in both formats, and
 * whole lines from eight threads writing through one pipe at once. */
#include "support.h"

#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ecw_log.h"

/* ---- capture ------------------------------------------------------------- */

/* Lines go to an anonymous temporary file for the length of one test. */
static FILE *capture_file;

static int capture_setup(void **state)
{
	(void)state;
	capture_file = tmpfile();
	if (!capture_file)
		return -1;
	ecw_log_set_fd(fileno(capture_file));
	ecw_log_setup(ECW_LOG_INFO, ECW_LOG_JSON);
	return 0;
}

static int capture_teardown(void **state)
{
	(void)state;
	ecw_log_set_fd(2);
	if (capture_file)
		fclose(capture_file);
	capture_file = NULL;
	return 0;
}

/* Starts the capture over (the descriptor's offset too, or the next line
 * would land after a hole). */
static void capture_clear(void)
{
	assert_int_equal(ftruncate(fileno(capture_file), 0), 0);
	assert_int_equal(lseek(fileno(capture_file), 0, SEEK_SET), 0);
}

/* Everything written so far (heap, NUL-terminated; free() it). */
static char *captured(void)
{
	struct ecw_buf b;
	char chunk[4096];
	off_t off = 0;
	ssize_t n;

	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	while ((n = pread(fileno(capture_file), chunk, sizeof(chunk), off)) > 0) {
		assert_int_equal(ecw_buf_add(&b, chunk, (size_t)n), 0);
		off += n;
	}
	return ecw_buf_take(&b);
}

/* The only line written so far, checked to be exactly one line (heap). */
static char *one_line(void)
{
	char *all = captured();
	size_t n = strlen(all);

	if (n == 0 || all[n - 1] != '\n' || memchr(all, '\n', n - 1))
		fail_msg("expected exactly one line, got: [%s]", all);
	return all;
}

/* One parse of line[0..n) with flags: the object, or NULL when it is not
 * exactly one JSON object. */
static json_object *parse_with(const char *line, size_t n, int flags)
{
	struct json_tokener *tok = json_tokener_new();
	json_object *j;

	assert_non_null(tok);
	json_tokener_set_flags(tok, flags);
	j = json_tokener_parse_ex(tok, line, (int)n);
	if (j && (json_tokener_get_parse_end(tok) != n || !json_object_is_type(j, json_type_object))) {
		json_object_put(j);
		j = NULL;
	}
	json_tokener_free(tok);
	return j;
}

/* Strict parse of one JSON object (trailing newline allowed, nothing else),
 * in two passes, because json-c 0.18's strict mode (Debian 13) refuses every
 * byte above 0x7f in a string (json-c issues #875, #892): the line's UTF-8 is
 * validated by a lenient parse, and its syntax (escaped control characters,
 * no NaN, no trailing commas) by a strict parse of a copy whose non-ASCII
 * bytes are replaced by 'x'. */
static json_object *parse_json(const char *line)
{
	size_t n = strlen(line);
	json_object *j, *ascii_only;
	char *copy;

	if (n > 0 && line[n - 1] == '\n')
		n--;
	copy = strndup(line, n);
	assert_non_null(copy);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)copy[i] >= 0x80)
			copy[i] = 'x';
	ascii_only = parse_with(copy, n, JSON_TOKENER_STRICT);
	free(copy);
	j = parse_with(line, n, JSON_TOKENER_VALIDATE_UTF8);
	if (!ascii_only || !j)
		fail_msg("not one valid JSON object: [%s]", line);
	json_object_put(ascii_only);
	return j;
}

static const char *jstr(json_object *j, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(j, key, &v) || !json_object_is_type(v, json_type_string))
		fail_msg("no string field %s", key);
	return json_object_get_string(v);
}

static bool is_timestamp(const char *s)
{
	/* 2026-11-21T05:31:00.123Z */
	static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";

	for (size_t i = 0; i < sizeof(shape) - 1; i++) {
		if (shape[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != shape[i])
			return false;
	}
	return true;
}

static int num2(const char *s)
{
	return (s[0] - '0') * 10 + (s[1] - '0');
}
static int num4(const char *s)
{
	return num2(s) * 100 + num2(s + 2);
}

/* The text line without its timestamp and the space after it. */
static const char *text_rest(const char *line)
{
	if (!is_timestamp(line) || line[24] != ' ')
		fail_msg("text line does not start with a timestamp: [%s]", line);
	return line + 25;
}

/* ---- JSON ---------------------------------------------------------------- */

/* Runs first, before any test calls ecw_log_setup: info and JSON. */
static void test_log__defaults_before_setup(void **state)
{
	(void)state;
	FILE *f = tmpfile();
	assert_non_null(f);
	ecw_log_set_fd(fileno(f));
	ecw_log_msg(ECW_LOG_DEBUG, "dropped", "debug is below the default level");
	ecw_log_msg(ECW_LOG_INFO, "kept", "info");
	ecw_log_set_fd(2);

	char buf[512] = "";
	ssize_t n = pread(fileno(f), buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
	fclose(f);
	json_object *j = parse_json(buf);
	assert_string_equal(jstr(j, "event"), "kept");
	assert_string_equal(jstr(j, "level"), "info");
	json_object_put(j);
}

static void test_log__json_fields_in_order(void **state)
{
	(void)state;
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "job.done");
	assert_non_null(l);
	ecw_log_str(l, "job", "move");
	ecw_log_int(l, "n", -42);
	ecw_log_int(l, "big", INT64_MAX);
	ecw_log_double(l, "secs", 1.5);
	ecw_log_double(l, "tenth", 0.1);
	ecw_log_bool(l, "ok", true);
	ecw_log_bool(l, "bad", false);
	ecw_log_end(l);

	char *line = one_line();
	json_object *j = parse_json(line);
	static const char *const want[] = {"time", "level", "event", "job", "n",
	                                   "big",  "secs",  "tenth", "ok",  "bad"};
	size_t i = 0;
	json_object_object_foreach(j, key, val) {
		(void)val;
		assert_true(i < sizeof(want) / sizeof(want[0]));
		assert_string_equal(key, want[i]);
		i++;
	}
	assert_int_equal(i, sizeof(want) / sizeof(want[0]));
	assert_true(is_timestamp(jstr(j, "time")));
	assert_int_equal(strlen(jstr(j, "time")), 24);
	/* The time is now's, to the second (allowing for a slow machine). */
	const char *t = jstr(j, "time");
	struct tm tm = {0};
	tm.tm_year = num4(t) - 1900;
	tm.tm_mon = num2(t + 5) - 1;
	tm.tm_mday = num2(t + 8);
	tm.tm_hour = num2(t + 11);
	tm.tm_min = num2(t + 14);
	tm.tm_sec = num2(t + 17);
	long long age = (long long)time(NULL) - (long long)timegm(&tm);
	if (age < 0 || age > 5)
		fail_msg("line time %s is %lld s from now", t, age);
	assert_string_equal(jstr(j, "level"), "info");
	assert_string_equal(jstr(j, "event"), "job.done");
	assert_string_equal(jstr(j, "job"), "move");

	json_object *v;
	assert_true(json_object_object_get_ex(j, "n", &v) && json_object_is_type(v, json_type_int));
	assert_int_equal(json_object_get_int64(v), -42);
	assert_true(json_object_object_get_ex(j, "big", &v));
	assert_true(json_object_get_int64(v) == INT64_MAX);
	assert_true(json_object_object_get_ex(j, "secs", &v) && json_object_is_type(v, json_type_double));
	assert_true(json_object_get_double(v) == 1.5);
	assert_true(json_object_object_get_ex(j, "ok", &v) && json_object_is_type(v, json_type_boolean));
	assert_true(json_object_get_boolean(v));
	assert_true(json_object_object_get_ex(j, "bad", &v) && !json_object_get_boolean(v));
	/* Shortest form that reads back: 0.1, not 0.10000000000000001. */
	assert_true(str_contains(line, "\"tenth\":0.1,"));
	json_object_put(j);
	free(line);
}

static void test_log__json_escaping(void **state)
{
	(void)state;
	static const char *const values[] = {
	    "say \"hi\"",
	    "two\nlines\r\n",
	    "back\\slash and /slash/",
	    "tab\there \x01 bell\x07",
	    "Zo\xc3\xab \xe2\x82\xac \xf0\x9f\x98\x80",
	    "",
	};
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "esc \"event\"\n");
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%zu", i);
		ecw_log_str(l, key, values[i]);
	}
	ecw_log_str(l, "quote\"key", "v");
	ecw_log_end(l);

	char *line = one_line();
	json_object *j = parse_json(line);
	assert_string_equal(jstr(j, "event"), "esc \"event\"\n");
	assert_string_equal(jstr(j, "level"), "warn");
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%zu", i);
		assert_string_equal(jstr(j, key), values[i]);
	}
	assert_string_equal(jstr(j, "quote\"key"), "v");
	/* Slashes are not escaped (URLs stay readable, secrets stay findable),
	 * and UTF-8 is written as UTF-8. */
	assert_true(str_contains(line, "/slash/"));
	assert_true(str_contains(line, "Zo\xc3\xab \xe2\x82\xac \xf0\x9f\x98\x80"));
	json_object_put(j);
	free(line);
}

/* Every ASCII byte, in a key, a value and the event, is written exactly as
 * json-c writes it (the log writes its own literals, and the JSON-escaped
 * form of a secret must match them byte for byte). */
static void test_log__json_escaping_matches_json_c(void **state)
{
	(void)state;
	char all[128];
	size_t n = 0;

	for (int c = 1; c < 128; c++)
		all[n++] = (char)c;
	all[n] = '\0';

	json_object *o = json_object_new_string(all);
	const char *want =
	    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	char expect[1024];

	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, all);
	ecw_log_str(l, all, all);
	ecw_log_end(l);
	char *line = one_line();
	snprintf(expect, sizeof(expect), "\"event\":%s,%s:%s}\n", want, want, want);
	if (!str_contains(line, expect))
		fail_msg("expected the line to end with [%s], got [%s]", expect, line);
	json_object_put(o);
	free(line);
}

static void test_log__json_invalid_utf8_replaced(void **state)
{
	(void)state;
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "bad\xff");
	ecw_log_str(l, "v", "a\xc3(b\xed\xa0\x80z");
	ecw_log_str(l, "k\xfe", "x");
	ecw_log_end(l);

	char *line = one_line();
	json_object *j = parse_json(line); /* validates UTF-8 */
	assert_string_equal(jstr(j, "event"), "bad\xef\xbf\xbd");
	assert_string_equal(jstr(j, "v"), "a\xef\xbf\xbd(b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
	assert_string_equal(jstr(j, "k\xef\xbf\xbd"), "x");
	json_object_put(j);
	free(line);
}

static void test_log__json_nonfinite_and_null(void **state)
{
	(void)state;
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "nums");
	ecw_log_double(l, "nan", 0.0 / 0.0);
	ecw_log_double(l, "inf", 1.0 / 0.0);
	ecw_log_double(l, "ninf", -1.0 / 0.0);
	ecw_log_double(l, "tiny", 5e-324);
	ecw_log_str(l, "skipped", NULL);
	ecw_log_str(l, NULL, "no key");
	ecw_log_end(l);

	char *line = one_line();
	json_object *j = parse_json(line);
	assert_string_equal(jstr(j, "nan"), "NaN");
	assert_string_equal(jstr(j, "inf"), "+Inf");
	assert_string_equal(jstr(j, "ninf"), "-Inf");
	json_object *v;
	assert_true(json_object_object_get_ex(j, "tiny", &v));
	assert_true(json_object_get_double(v) == 5e-324);
	assert_false(json_object_object_get_ex(j, "skipped", NULL));
	assert_false(str_contains(line, "no key"));
	json_object_put(j);
	free(line);
}

static void test_log__msg_one_call(void **state)
{
	(void)state;
	ecw_log_msg(ECW_LOG_ERROR, "storage.failed", "queue %s: %d attempts, \"%s\"", "jobs", 5, "gave up");
	char *line = one_line();
	json_object *j = parse_json(line);
	assert_string_equal(jstr(j, "level"), "error");
	assert_string_equal(jstr(j, "event"), "storage.failed");
	assert_string_equal(jstr(j, "msg"), "queue jobs: 5 attempts, \"gave up\"");
	assert_int_equal(json_object_object_length(j), 4);
	json_object_put(j);
	free(line);
}

static void test_log__level_filtering(void **state)
{
	(void)state;
	ecw_log_setup(ECW_LOG_WARN, ECW_LOG_JSON);
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "dropped");
	assert_null(l);
	/* Every field call and end accept the NULL line. */
	ecw_log_str(l, "k", "v");
	ecw_log_int(l, "k", 1);
	ecw_log_double(l, "k", 1.0);
	ecw_log_bool(l, "k", true);
	ecw_log_end(l);
	ecw_log_msg(ECW_LOG_DEBUG, "dropped", "x");
	ecw_log_msg(ECW_LOG_INFO, "dropped", "x");
	ecw_log_msg(ECW_LOG_WARN, "w", "x");
	ecw_log_msg(ECW_LOG_ERROR, "e", "x");
	char *all = captured();
	assert_false(str_contains(all, "dropped"));
	assert_true(str_contains(all, "\"event\":\"w\""));
	assert_true(str_contains(all, "\"event\":\"e\""));
	free(all);

	ecw_log_setup(ECW_LOG_DEBUG, ECW_LOG_JSON);
	ecw_log_msg(ECW_LOG_DEBUG, "dbg", "x");
	all = captured();
	assert_true(str_contains(all, "\"level\":\"debug\",\"event\":\"dbg\""));
	free(all);

	ecw_log_setup(ECW_LOG_ERROR, ECW_LOG_TEXT);
	assert_null(ecw_log_begin(ECW_LOG_WARN, "dropped"));
	assert_non_null(l = ecw_log_begin(ECW_LOG_ERROR, "kept"));
	ecw_log_end(l);
}

static void test_log__line_cap_drops_whole_fields(void **state)
{
	(void)state;
	size_t big = 70 * 1024;
	char *huge = malloc(big + 1);
	assert_non_null(huge);
	memset(huge, 'x', big);
	huge[big] = '\0';

	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "big");
	ecw_log_str(l, "before", "a");
	ecw_log_str(l, "huge", huge);
	ecw_log_str(l, "after", "b");
	ecw_log_end(l);
	char *line = one_line();
	assert_true(strlen(line) < 1024);
	json_object *j = parse_json(line);
	assert_string_equal(jstr(j, "before"), "a");
	assert_false(json_object_object_get_ex(j, "huge", NULL));
	assert_string_equal(jstr(j, "after"), "b");
	json_object *v;
	assert_true(json_object_object_get_ex(j, "truncated", &v) && json_object_get_boolean(v));
	json_object_put(j);
	free(line);

	/* Many fields that fit one by one stop at the cap, still valid JSON. */
	capture_clear();
	huge[1000] = '\0';
	l = ecw_log_begin(ECW_LOG_INFO, "many");
	for (int i = 0; i < 100; i++)
		ecw_log_str(l, "f", huge);
	ecw_log_end(l);
	line = one_line();
	assert_true(strlen(line) <= 64 * 1024 + 64);
	assert_true(strlen(line) > 60 * 1024);
	j = parse_json(line);
	assert_true(json_object_object_get_ex(j, "truncated", NULL));
	json_object_put(j);
	free(line);

	/* And in text. */
	capture_clear();
	ecw_log_setup(ECW_LOG_INFO, ECW_LOG_TEXT);
	huge[1000] = 'x';
	l = ecw_log_begin(ECW_LOG_INFO, "big");
	ecw_log_str(l, "huge", huge);
	ecw_log_int(l, "n", 1);
	ecw_log_end(l);
	line = one_line();
	assert_string_equal(text_rest(line), "INFO big n=1 truncated=true\n");
	free(line);
	free(huge);
}

/* ---- text ---------------------------------------------------------------- */

static void test_log__text_format_quoting(void **state)
{
	(void)state;
	ecw_log_setup(ECW_LOG_DEBUG, ECW_LOG_TEXT);
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "queue.slow");
	ecw_log_str(l, "a", "plain");
	ecw_log_str(l, "b", "with space");
	ecw_log_str(l, "c", "has\"quote");
	ecw_log_str(l, "d", "k=v");
	ecw_log_str(l, "e", "");
	ecw_log_str(l, "f", "line\nbreak \\ tab\t\x01");
	ecw_log_str(l, "g", "C:\\path");
	ecw_log_str(l, "h", "Zo\xc3\xab");
	ecw_log_int(l, "n", -3);
	ecw_log_bool(l, "ok", false);
	ecw_log_double(l, "x", 0.25);
	ecw_log_str(l, "bad key=", "v");
	ecw_log_end(l);
	char *line = one_line();
	assert_string_equal(text_rest(line),
	                    "WARN queue.slow a=plain b=\"with space\" c=\"has\\\"quote\" d=\"k=v\" "
	                    "e=\"\" f=\"line\\nbreak \\\\ tab\\t\\u0001\" g=C:\\path h=Zo\xc3\xab "
	                    "n=-3 ok=false x=0.25 bad_key_=v\n");
	free(line);

	capture_clear();
	ecw_log_msg(ECW_LOG_DEBUG, "two words", "hello %s", "world");
	line = one_line();
	assert_string_equal(text_rest(line), "DEBUG \"two words\" msg=\"hello world\"\n");
	free(line);

	capture_clear();
	ecw_log_msg(ECW_LOG_ERROR, "e", "x");
	line = one_line();
	assert_string_equal(text_rest(line), "ERROR e msg=x\n");
	free(line);
}

/* ---- redaction --------------------------------------------------------------- */

#define ACCOUNT_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

static void test_log__redacts_registered_secrets(void **state)
{
	(void)state;
	ecw_log_add_secret(ACCOUNT_KEY);
	ecw_log_add_secret("pa\"ss\\word-with-quote");
	ecw_log_add_secret("short7!"); /* under 8 bytes: ignored */
	ecw_log_add_secret("");
	ecw_log_add_secret(NULL);
	ecw_log_add_secret(ACCOUNT_KEY); /* twice is harmless */

	for (int fmt = 0; fmt < 2; fmt++) {
		capture_clear();
		ecw_log_setup(ECW_LOG_INFO, fmt ? ECW_LOG_TEXT : ECW_LOG_JSON);
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "auth");
		ecw_log_str(l, "key", ACCOUNT_KEY);
		ecw_log_str(l, "embedded", "key is " ACCOUNT_KEY ", twice " ACCOUNT_KEY "!");
		ecw_log_str(l, "quoted", "x pa\"ss\\word-with-quote y");
		ecw_log_str(l, "common", "short7! stays");
		ecw_log_end(l);
		ecw_log_msg(ECW_LOG_ERROR, "auth", "signing with %s failed", ACCOUNT_KEY);
		char *all = captured();
		assert_false(str_contains(all, "Eby8vdM02xNOcqFlqUwJPLlmEtlCD"));
		assert_false(str_contains(all, "word-with-quote"));
		assert_true(str_contains(all, "short7! stays"));
		if (fmt == 0) {
			char *nl = strchr(all, '\n');
			assert_non_null(nl);
			*nl = '\0';
			json_object *j = parse_json(all);
			assert_string_equal(jstr(j, "key"), "[REDACTED]");
			assert_string_equal(jstr(j, "embedded"), "key is [REDACTED], twice [REDACTED]!");
			assert_string_equal(jstr(j, "quoted"), "x [REDACTED] y");
			json_object_put(j);
			j = parse_json(nl + 1);
			assert_string_equal(jstr(j, "msg"), "signing with [REDACTED] failed");
			json_object_put(j);
		} else {
			assert_true(str_contains(
			    all, " key=\"[REDACTED]\" embedded=\"key is [REDACTED], twice "
			         "[REDACTED]!\" quoted=\"x [REDACTED] y\" common=\"short7! stays\"\n"));
			assert_true(str_contains(all, "msg=\"signing with [REDACTED] failed\"\n"));
		}
		free(all);
	}
}

/* A rotated secret is taken back (the table does not fill with every
 * rotation): its forms are no longer redacted, every other secret still is,
 * one starting with the same byte too. */
static void test_log__forgotten_secret(void **state)
{
	(void)state;
	ecw_log_add_secret("rotated-away/secret\"one");
	ecw_log_add_secret("rotated-in/secret-two");
	ecw_log_forget_secret("rotated-away/secret\"one");
	ecw_log_forget_secret("never-registered-secret"); /* harmless */
	ecw_log_forget_secret(NULL);

	for (int fmt = 0; fmt < 2; fmt++) {
		capture_clear();
		ecw_log_setup(ECW_LOG_INFO, fmt ? ECW_LOG_TEXT : ECW_LOG_JSON);
		ecw_log_msg(ECW_LOG_INFO, "rotation",
		            "old rotated-away/secret\"one new rotated-in/secret-two");
		char *all = captured();
		assert_true(str_contains(all, "rotated-away/secret"));
		assert_false(str_contains(all, "rotated-in/secret-two"));
		assert_true(str_contains(all, "[REDACTED]"));
		free(all);
	}
	ecw_log_forget_secret("rotated-in/secret-two");
}

static void test_log__redacts_sig_and_account_key(void **state)
{
	(void)state;
	static const char url[] = "https://acct.queue.core.windows.net/jobs/messages?sv=2022-11-02&ss=q"
	                          "&sig=AbC%2Bd3F%2Fg%3D&se=2026-12-01T00%3A00%3A00Z";
	static const char connstr[] = "DefaultEndpointsProtocol=https;AccountName=dev;"
	                              "AccountKey=Zm9vYmFyYmF6cXV4;QueueEndpoint=http://127.0.0.1:10001/dev";
	static const char sas_connstr[] =
	    "QueueEndpoint=https://a.example/;SharedAccessSignature=sv=1&SIG=xyz123";

	for (int fmt = 0; fmt < 2; fmt++) {
		capture_clear();
		ecw_log_setup(ECW_LOG_INFO, fmt ? ECW_LOG_TEXT : ECW_LOG_JSON);
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "request");
		ecw_log_str(l, "url", url);
		ecw_log_str(l, "conn", connstr);
		ecw_log_str(l, "sas", sas_connstr);
		ecw_log_str(l, "quoted", "said \"sig=abc\" and ended sig=tail");
		ecw_log_str(l, "empty", "sig=&x=1");
		ecw_log_str(l, "sig", "bare-field-value");
		ecw_log_end(l);
		char *line = one_line();
		assert_false(str_contains(line, "AbC"));
		assert_false(str_contains(line, "Zm9vYmFy"));
		assert_false(str_contains(line, "xyz123"));
		assert_false(str_contains(line, "abc"));
		assert_false(str_contains(line, "tail"));
		if (fmt == 0) {
			json_object *j = parse_json(line);
			assert_string_equal(
			    jstr(j, "url"),
			    "https://acct.queue.core.windows.net/jobs/messages?sv=2022-11-02&ss=q"
			    "&sig=[REDACTED]&se=2026-12-01T00%3A00%3A00Z");
			assert_string_equal(jstr(j, "conn"),
			                    "DefaultEndpointsProtocol=https;AccountName=dev;"
			                    "AccountKey=[REDACTED];QueueEndpoint=http://127.0.0.1:10001/dev");
			assert_string_equal(
			    jstr(j, "sas"),
			    "QueueEndpoint=https://a.example/;SharedAccessSignature=sv=1&SIG=[REDACTED]");
			assert_string_equal(jstr(j, "quoted"),
			                    "said \"sig=[REDACTED]\" and ended sig=[REDACTED]");
			assert_string_equal(jstr(j, "empty"), "sig=&x=1");
			/* "sig":"..." is not sig=, but the same key in text is. */
			assert_string_equal(jstr(j, "sig"), "bare-field-value");
			json_object_put(j);
		} else {
			assert_true(str_contains(
			    line, " url=\"https://acct.queue.core.windows.net/jobs/messages?"
			          "sv=2022-11-02&ss=q&sig=[REDACTED]&se=2026-12-01T00%3A00%3A00Z\" "));
			assert_true(str_contains(
			    line, " conn=\"DefaultEndpointsProtocol=https;AccountName=dev;"
			          "AccountKey=[REDACTED];QueueEndpoint=http://127.0.0.1:10001/dev\""));
			assert_true(str_contains(line, "SharedAccessSignature=sv=1&SIG=[REDACTED]\""));
			assert_true(str_contains(line, " quoted=\"said \\\"sig=[REDACTED]\\\" and ended "
			                               "sig=[REDACTED]\" "));
			assert_true(str_contains(line, " empty=\"sig=&x=1\" "));
			assert_true(str_contains(line, " sig=[REDACTED]\n"));
			assert_false(str_contains(line, "bare-field-value"));
		}
		free(line);
	}
}

/* ---- threads ------------------------------------------------------------- */

#define WRITERS 8
#define LINES_PER_WRITER 200

struct reader {
	int fd;
	struct ecw_buf got;
};

static void *read_all(void *arg)
{
	struct reader *r = arg;
	char chunk[8192];
	ssize_t n;

	while ((n = read(r->fd, chunk, sizeof(chunk))) > 0)
		if (ecw_buf_add(&r->got, chunk, (size_t)n) < 0)
			break;
	return NULL;
}

static void *write_lines(void *arg)
{
	int id = (int)(intptr_t)arg;
	/* Some lines longer than PIPE_BUF, where the kernel alone would not
	 * keep writes apart. */
	size_t len = id % 2 ? 6000 : 100 + (size_t)id;
	char *pad = malloc(len + 1);

	memset(pad, 'a' + id, len);
	pad[len] = '\0';
	for (int i = 0; i < LINES_PER_WRITER; i++) {
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "thread");
		ecw_log_int(l, "id", id);
		ecw_log_int(l, "i", i);
		ecw_log_str(l, "pad", pad);
		ecw_log_end(l);
	}
	free(pad);
	return NULL;
}

/* Access tokens and federated assertions are JWTs, new every hour: the log
 * cuts out anything shaped like one, and client_assertion= values. */
static void test_log__redacts_jwts_and_assertions(void **state)
{
	(void)state;
	static const char jwt[] =
	    "eyJ0eXAiOiJKV1QifQ.eyJhdWQiOiJodHRwczovL3N0b3JhZ2UuYXp1cmUuY29tIn0.c2lnX3Rlc3Q";

	for (int fmt = 0; fmt < 2; fmt++) {
		capture_clear();
		ecw_log_setup(ECW_LOG_INFO, fmt ? ECW_LOG_TEXT : ECW_LOG_JSON);
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "token");
		ecw_log_str(
		    l, "auth",
		    "Bearer eyJ0eXAiOiJKV1QifQ.eyJhdWQiOiJodHRwczovL3N0b3JhZ2UuYXp1cmUuY29tIn0.c2lnX3Rlc3Q");
		ecw_log_str(
		    l, "body",
		    "client_id=abc&client_assertion=opaque-assertion-value&grant_type=client_credentials");
		ecw_log_str(
		    l, "json",
		    "{\"access_token\":\"eyJ0eXAiOiJKV1QifQ.eyJhdWQiOiJodHRwczovL3N0b3JhZ2UuYXp1cmUuY29tIn0.c2lnX3Rlc3Q\"}");
		/* Not JWTs: one dot, or "eyJ" inside a longer word. */
		ecw_log_str(l, "plain", "keyJar.value theyJump.x.y eyJhbGci.only");
		ecw_log_end(l);
		char *line = one_line();
		assert_false(str_contains(line, jwt));
		assert_false(str_contains(line, "c2lnX3Rlc3Q"));
		assert_false(str_contains(line, "opaque-assertion-value"));
		if (fmt == 0) {
			json_object *j = parse_json(line);
			assert_string_equal(jstr(j, "auth"), "Bearer [REDACTED]");
			assert_string_equal(
			    jstr(j, "body"),
			    "client_id=abc&client_assertion=[REDACTED]&grant_type=client_credentials");
			assert_string_equal(jstr(j, "json"), "{\"access_token\":\"[REDACTED]\"}");
			assert_string_equal(jstr(j, "plain"), "keyJar.value theyJump.x.y eyJhbGci.only");
			json_object_put(j);
		} else {
			assert_true(str_contains(line, " auth=\"Bearer [REDACTED]\" "));
		}
		free(line);
	}
}

/* Short lines (written side by side) and long ones (written alone) from
 * several threads arrive whole, to a pipe (socket false) or to a Unix stream
 * socket, as a parent's socketpair or journald's stdout is. */
static void concurrent_writers_whole_lines(bool socket)
{
	int p[2];
	pthread_t reader_thread, writers[WRITERS];
	struct reader r;
	int seen[WRITERS][LINES_PER_WRITER];

	if (socket)
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
	else
		assert_int_equal(pipe(p), 0);
	assert_true(PIPE_BUF < 6000);
	r.fd = p[0];
	ecw_buf_init(&r.got, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(pthread_create(&reader_thread, NULL, read_all, &r), 0);
	ecw_log_set_fd(p[1]);
	for (int t = 0; t < WRITERS; t++)
		assert_int_equal(pthread_create(&writers[t], NULL, write_lines, (void *)(intptr_t)t), 0);
	for (int t = 0; t < WRITERS; t++)
		pthread_join(writers[t], NULL);
	ecw_log_set_fd(fileno(capture_file));
	close(p[1]);
	pthread_join(reader_thread, NULL);
	close(p[0]);

	memset(seen, 0, sizeof(seen));
	char *all = ecw_buf_take(&r.got);
	size_t nlines = 0;
	for (char *line = all, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		assert_non_null(nl);
		*nl = '\0';
		json_object *j = parse_json(line);
		json_object *v;
		assert_true(json_object_object_get_ex(j, "id", &v));
		int id = json_object_get_int(v);
		assert_true(json_object_object_get_ex(j, "i", &v));
		int i = json_object_get_int(v);
		assert_true(id >= 0 && id < WRITERS && i >= 0 && i < LINES_PER_WRITER);
		seen[id][i]++;
		const char *pad = jstr(j, "pad");
		size_t want = id % 2 ? 6000 : 100 + (size_t)id;
		assert_int_equal(strlen(pad), want);
		assert_int_equal(strspn(pad, (char[]){(char)('a' + id), 0}), want);
		json_object_put(j);
		nlines++;
	}
	assert_int_equal(nlines, WRITERS * LINES_PER_WRITER);
	for (int t = 0; t < WRITERS; t++)
		for (int i = 0; i < LINES_PER_WRITER; i++)
			assert_int_equal(seen[t][i], 1);
	free(all);
}

static void test_log__concurrent_writers_whole_lines(void **state)
{
	(void)state;
	concurrent_writers_whole_lines(false);
}

static void test_log__concurrent_writers_whole_lines_unix_socket(void **state)
{
	(void)state;
	concurrent_writers_whole_lines(true);
}

/* Registering secrets while other threads log is safe. */
static void *register_secrets(void *arg)
{
	char s[32];

	(void)arg;
	for (int i = 0; i < 20; i++) {
		snprintf(s, sizeof(s), "concurrent-secret-%02d", i);
		ecw_log_add_secret(s);
	}
	return NULL;
}

static void *log_secrets(void *arg)
{
	char s[32];

	(void)arg;
	for (int i = 0; i < 200; i++) {
		snprintf(s, sizeof(s), "concurrent-secret-%02d", i % 20);
		ecw_log_msg(ECW_LOG_INFO, "race", "%s", s);
	}
	return NULL;
}

/* ---- held lines --------------------------------------------------------- */

/* What the pipe's read end has now (non-blocking), appended to out. */
static size_t drain_pipe(int fd, char *out, size_t cap, size_t have)
{
	ssize_t n;

	while (have < cap - 1 && (n = read(fd, out + have, cap - 1 - have)) > 0)
		have += (size_t)n;
	out[have] = '\0';
	return have;
}

static size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* A thread's held lines are written at its release, redacted, in order and
 * whole; holds nest; a line that would pass PIPE_BUF flushes what is held
 * first; a line longer than PIPE_BUF goes out at once, after what was held. */
static void test_log__held_lines_written_at_release(void **state)
{
	static char got[65536];
	char big[PIPE_BUF + 200];
	int p[2];
	size_t n;

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	ecw_log_set_fd(p[1]);
	ecw_log_add_secret("held-secret-0123456789");

	/* Held until the outer release, then all three, in order, redacted. */
	ecw_log_hold();
	ecw_log_msg(ECW_LOG_INFO, "held", "first");
	ecw_log_hold();
	ecw_log_msg(ECW_LOG_WARN, "held", "second held-secret-0123456789");
	ecw_log_release();
	ecw_log_msg(ECW_LOG_INFO, "held", "third");
	assert_int_equal(drain_pipe(p[0], got, sizeof(got), 0), 0);
	ecw_log_release();
	n = drain_pipe(p[0], got, sizeof(got), 0);
	assert_int_equal(count_lines(got), 3);
	assert_non_null(strstr(got, "\"msg\":\"first\""));
	assert_true(strstr(got, "first") < strstr(got, "second") &&
	            strstr(got, "second") < strstr(got, "third"));
	assert_null(strstr(got, "held-secret-0123456789"));
	assert_non_null(strstr(got, "[REDACTED]"));
	assert_int_equal(got[n - 1], '\n');

	/* More than PIPE_BUF held: whole lines go out before the release. */
	ecw_log_hold();
	for (int i = 0; i < 40; i++)
		ecw_log_msg(ECW_LOG_INFO, "held", "line %02d %0200d", i, 0);
	n = drain_pipe(p[0], got, sizeof(got), 0);
	assert_true(n > 0 && n <= 40 * 300);
	assert_int_equal(got[n - 1], '\n');
	size_t early = count_lines(got);
	assert_true(early > 0 && early < 40);
	ecw_log_release();
	n = drain_pipe(p[0], got, sizeof(got), n);
	assert_int_equal(count_lines(got), 40);
	for (int i = 1; i < 40; i++) {
		char a[32], b[32];
		snprintf(a, sizeof(a), "line %02d", i - 1);
		snprintf(b, sizeof(b), "line %02d", i);
		assert_true(strstr(got, a) < strstr(got, b));
	}

	/* A line too long to hold goes out at once, after the held one. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ecw_log_hold();
	ecw_log_msg(ECW_LOG_INFO, "held", "short");
	ecw_log_msg(ECW_LOG_INFO, "held", "%s", big);
	n = drain_pipe(p[0], got, sizeof(got), 0);
	assert_int_equal(count_lines(got), 2);
	assert_true(strstr(got, "short") < strstr(got, "xxxx"));
	ecw_log_release();
	assert_int_equal(drain_pipe(p[0], got, sizeof(got), 0), 0);

	/* A release without a hold does nothing; lines then go out at once. */
	ecw_log_release();
	ecw_log_msg(ECW_LOG_INFO, "held", "not held");
	assert_int_equal(count_lines((drain_pipe(p[0], got, sizeof(got), 0), got)), 1);

	ecw_log_set_fd(fileno(capture_file));
	close(p[0]);
	close(p[1]);
}

static void test_log__secrets_registered_while_logging(void **state)
{
	(void)state;
	pthread_t a, b;

	assert_int_equal(pthread_create(&a, NULL, register_secrets, NULL), 0);
	assert_int_equal(pthread_create(&b, NULL, log_secrets, NULL), 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	capture_clear();
	log_secrets(NULL);
	char *all = captured();
	assert_false(str_contains(all, "concurrent-secret"));
	assert_true(str_contains(all, "\"msg\":\"[REDACTED]\""));
	free(all);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_log__defaults_before_setup),
	    cmocka_unit_test_setup_teardown(test_log__json_fields_in_order, capture_setup, capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__json_escaping, capture_setup, capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__json_escaping_matches_json_c, capture_setup,
	                                    capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__redacts_jwts_and_assertions, capture_setup,
	                                    capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__json_invalid_utf8_replaced, capture_setup,
	                                    capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__json_nonfinite_and_null, capture_setup,
	                                    capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__msg_one_call, capture_setup, capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__level_filtering, capture_setup, capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__line_cap_drops_whole_fields, capture_setup,
	                                    capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__text_format_quoting, capture_setup, capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__redacts_registered_secrets, capture_setup,
	                                    capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__forgotten_secret, capture_setup, capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__redacts_sig_and_account_key, capture_setup,
	                                    capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__concurrent_writers_whole_lines, capture_setup,
	                                    capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__concurrent_writers_whole_lines_unix_socket,
	                                    capture_setup, capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__held_lines_written_at_release, capture_setup,
	                                    capture_teardown),
	    cmocka_unit_test_setup_teardown(test_log__secrets_registered_while_logging, capture_setup,
	                                    capture_teardown),
	};
	return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
