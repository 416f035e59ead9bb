/* SPDX-License-Identifier: MIT */
/* test_escape.c - percent-encoding as encodeURIComponent, entity paths, OData
 * string literals, XML escaping, RFC 1123 dates, and the key and name checks
 * that run before any request. */
#include "support.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*encode_fn)(struct ecw_buf *out, const char *s, size_t n);

static void encodes(encode_fn fn, const char *in, size_t n, const char *want)
{
	struct ecw_buf b;
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(fn(&b, in, n), 0);
	if (strcmp(ecw_buf_cstr(&b), want) != 0)
		fail_msg("encoding \"%.*s\": got \"%s\", want \"%s\"", (int)n, in, ecw_buf_cstr(&b), want);
	assert_int_equal(b.len, strlen(want));
	ecw_buf_dispose(&b);
}

static void pct(const char *in, const char *want)
{
	encodes(ecw_escape_pct, in, strlen(in), want);
}

static void test_escape__pct_encode_reserved(void **state)
{
	(void)state;
	pct("a+b&c=d%", "a%2Bb%26c%3Dd%25");
	pct("o'brien 001", "o'brien%20001");
	pct("/?#[]@$,;:", "%2F%3F%23%5B%5D%40%24%2C%3B%3A");
	pct("\"<>\\^`{|}", "%22%3C%3E%5C%5E%60%7B%7C%7D");
	pct("\t\r\n\x7f", "%09%0D%0A%7F");
	pct("", "");
}

static void test_escape__pct_encode_unreserved_kept(void **state)
{
	(void)state;
	pct("( ) ! * ~", "(%20)%20!%20*%20~");
	pct("ABCXYZabcxyz0189-_.!~*'()", "ABCXYZabcxyz0189-_.!~*'()");
}

static void test_escape__pct_encode_utf8(void **state)
{
	(void)state;
	pct("Zo\xc3\xab", "Zo%C3%AB");
	pct("\xe2\x82\xac", "%E2%82%AC");        /* U+20AC */
	pct("\xf0\x9f\x98\x80", "%F0%9F%98%80"); /* U+1F600 */
}

static void test_escape__pct_encode_length(void **state)
{
	(void)state;
	encodes(ecw_escape_pct, "abcdef", 3, "abc");
	encodes(ecw_escape_pct, "a\0b", 3, "a%00b");
}

static void path_is(const char *table, const char *pk, const char *rk, const char *want)
{
	struct ecw_buf b;
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_escape_entity_path(&b, table, pk, rk), 0);
	assert_string_equal(ecw_buf_cstr(&b), want);
	ecw_buf_dispose(&b);
}

static void test_escape__entity_path(void **state)
{
	(void)state;
	path_is("jobs", "p", "r", "/jobs(PartitionKey='p',RowKey='r')");
	path_is("jobs", "o'brien 001", "Zo\xc3\xab",
	        "/jobs(PartitionKey='o''brien%20001',RowKey='Zo%C3%AB')");
	path_is("jobs", "a+b&c=d%", "''", "/jobs(PartitionKey='a%2Bb%26c%3Dd%25',RowKey='''''')");
	path_is("jobs", "", "", "/jobs(PartitionKey='',RowKey='')");
}

static void filter_is(const char *prefix, const char *value, const char *want)
{
	struct ecw_buf b;
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_buf_adds(&b, prefix), 0);
	assert_int_equal(ecw_escape_filter_string(&b, value), 0);
	assert_string_equal(ecw_buf_cstr(&b), want);
	ecw_buf_dispose(&b);
}

static void test_escape__filter_string(void **state)
{
	(void)state;
	filter_is("", "o'brien", "'o''brien'");
	filter_is("PartitionKey eq ", "o'brien", "PartitionKey eq 'o''brien'");
	filter_is("", "", "''");
	filter_is("", "''", "''''''");
	/* Not URL-encoded here: the request encodes the whole $filter once. */
	filter_is("RowKey eq ", "a+b&c=d% x", "RowKey eq 'a+b&c=d% x'");
	filter_is("", "Zo\xc3\xab", "'Zo\xc3\xab'");
}

static void xml(const char *in, const char *want)
{
	encodes(ecw_escape_xml, in, strlen(in), want);
}

static void test_escape__xml_escape(void **state)
{
	(void)state;
	xml("a&b<c>d", "a&amp;b&lt;c&gt;d");
	xml("line1\r\nline2", "line1&#13;\nline2");
	xml("&amp;", "&amp;amp;");
	xml("plain text 123 {\"k\":1}", "plain text 123 {\"k\":1}");
	xml("Zo\xc3\xab", "Zo\xc3\xab");
	xml("", "");
	encodes(ecw_escape_xml, "<<>>", 2, "&lt;&lt;");
}

static void date_is(time_t t, const char *want)
{
	char out[32];
	memset(out, '#', sizeof(out));
	ecw_date_format(out, t);
	assert_string_equal(out, want);
	time_t back = 0;
	assert_int_equal(ecw_date_parse(&back, want), 0);
	assert_int_equal((long long)back, (long long)t);
}

static void test_escape__http_date_round_trip(void **state)
{
	(void)state;
	/* Whatever the process locale, names are the C locale's. */
	(void)setlocale(LC_ALL, "");
	date_is(1787133600, "Wed, 19 Aug 2026 10:00:00 GMT");
	date_is(1711440772, "Tue, 26 Mar 2024 08:12:52 GMT");
	date_is(0, "Thu, 01 Jan 1970 00:00:00 GMT");
	date_is(1709251199, "Thu, 29 Feb 2024 23:59:59 GMT");
	/* What the service returns as the expiry of a message that never expires. */
	date_is((time_t)253402300799LL, "Fri, 31 Dec 9999 23:59:59 GMT");
	/* Every month name and day name. */
	static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
	                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	for (int m = 0; m < 12; m++) {
		struct tm tm = {.tm_year = 2026 - 1900, .tm_mon = m, .tm_mday = 15, .tm_hour = 12};
		time_t t = timegm(&tm);
		char out[32], want[32];
		ecw_date_format(out, t);
		static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
		snprintf(want, sizeof(want), "%s, 15 %s 2026 12:00:00 GMT", days[tm.tm_wday], months[m]);
		assert_string_equal(out, want);
		time_t back = 0;
		assert_int_equal(ecw_date_parse(&back, out), 0);
		assert_int_equal((long long)back, (long long)t);
	}
	(void)setlocale(LC_ALL, "C");
}

static void test_escape__http_date_rejects_garbage(void **state)
{
	(void)state;
	time_t t = 0;
	assert_true(ecw_date_parse(&t, "") < 0);
	assert_true(ecw_date_parse(&t, "not a date") < 0);
	assert_true(ecw_date_parse(&t, "2026-08-19T10:00:00Z") < 0);
	assert_true(ecw_date_parse(&t, "Wed, 19 Foo 2026 10:00:00 GMT") < 0);
	assert_true(ecw_date_parse(&t, "Wed, 19 Aug 2026 10:00:00 UTC") < 0);
	assert_true(ecw_date_parse(&t, "Wed, 19 Aug 2026 10:00:00 GMT ") < 0);
	assert_true(ecw_date_parse(&t, "Wed, 19 Aug 2026 1:00:00 GMT") < 0);
	assert_true(ecw_date_parse(&t, "Wed, 19 Aug 26 10:00:00 GMT") < 0);
	assert_true(ecw_date_parse(&t, "Wed 19 Aug 2026 10:00:00 GMT") < 0);
	assert_true(ecw_date_parse(&t, "Wed, 19 Aug 2026 24:00:00 GMT") < 0);
	assert_true(ecw_date_parse(&t, "Wed, 32 Aug 2026 10:00:00 GMT") < 0);
	assert_true(ecw_date_parse(&t, "Wed, 1x Aug 2026 10:00:00 GMT") < 0);
	assert_true(ecw_date_parse(&t, "Wed, 19 Aug 2026 10:0a:00 GMT") < 0);
	assert_true(ecw_date_parse(&t, "Wed, 19 Aug 1969 10:00:00 GMT") < 0);
	/* A one-digit day is read too. */
	assert_int_equal(ecw_date_parse(&t, "Sun, 9 Aug 2026 10:00:00 GMT"), 0);
	assert_int_equal((long long)t, 1786269600LL);
}

static void key_ok(const char *key)
{
	ecw_error_clear();
	int err = ecw_entity_key_check(key, "RowKey");
	if (err != 0)
		fail_msg("ecw_entity_key_check rejected a valid key (%zu bytes): %s", strlen(key),
		         ecw_error_last()->message);
}

static void key_bad(const char *key, const char *why)
{
	ecw_error_clear();
	int err = ecw_entity_key_check(key, "PartitionKey");
	if (err != ECW_EINVALID)
		fail_msg("ecw_entity_key_check accepted a key with %s (got %d)", why, err);
	assert_int_equal(ecw_error_last()->code, ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "PartitionKey"));
}

static void test_escape__key_check_forbidden_characters(void **state)
{
	(void)state;
	key_bad("a/b", "'/'");
	key_bad("a\\b", "'\\'");
	key_bad("a#b", "'#'");
	key_bad("a?b", "'?'");
	key_bad("/", "'/' alone");
}

static void test_escape__key_check_control_characters(void **state)
{
	(void)state;
	key_bad("a\x01"
	        "b",
	        "U+0001");
	key_bad("a\tb", "U+0009");
	key_bad("a\nb", "U+000A");
	key_bad("a\x1f", "U+001F");
	key_bad("a\x7f", "U+007F");
	key_bad("a\xc2\x80"
	        "b",
	        "U+0080");
	key_bad("a\xc2\x85"
	        "b",
	        "U+0085");
	key_bad("a\xc2\x9f"
	        "b",
	        "U+009F");
	/* U+00A0 and U+007E are fine. */
	key_ok("a\xc2\xa0"
	       "b");
	key_ok("a~b");
	key_ok("a b");
}

static void test_escape__key_check_invalid_utf8(void **state)
{
	(void)state;
	key_bad("\xff", "byte 0xFF");
	key_bad("a\xc3", "a truncated sequence at the end");
	key_bad("a\xc3(b", "a bad continuation byte");
	key_bad("\xe2\x82", "a truncated 3-byte sequence");
	key_bad("\xc0\xaf", "an overlong encoding");
	key_bad("\xe0\x80\xaf", "an overlong 3-byte encoding");
	key_bad("\xed\xa0\x80", "a UTF-16 surrogate");
	key_bad("\xf4\x90\x80\x80", "a code point above U+10FFFF");
	key_bad("\x80", "a lone continuation byte");
}

static void test_escape__key_check_length(void **state)
{
	(void)state;
	char key[1100];
	memset(key, 'k', 1024);
	key[1024] = '\0';
	key_ok(key);
	key[1024] = 'k';
	key[1025] = '\0';
	key_bad(key, "1025 bytes");
	/* The limit is in bytes: 512 two-byte characters fit, 513 do not. */
	for (int i = 0; i < 512; i++) {
		key[2 * i] = '\xc3';
		key[2 * i + 1] = '\xa9';
	}
	key[1024] = '\0';
	key_ok(key);
	key[1024] = '\xc3';
	key[1025] = '\xa9';
	key[1026] = '\0';
	key_bad(key, "1026 bytes of UTF-8");
}

static void test_escape__key_check_accepts(void **state)
{
	(void)state;
	key_ok("Zo\xc3\xab");
	key_ok("a+b&c=d%");
	key_ok("o'brien 001");
	key_ok("\xf0\x9f\x98\x80");
	key_ok("p");
}

/* 60 characters: with three more a name is at the 63-character limit. */
#define SIXTY "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij"

static void test_escape__queue_names(void **state)
{
	(void)state;
	static const char *const good[] = {"jobs", "abc", "a1-b2", "123", "0-a", SIXTY "123"};
	static const char *const bad[] = {"",       "ab",    "Jobs",  "-jobs",     "jobs-",
	                                  "jo--bs", "jo_bs", "jo bs", SIXTY "1234"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (ecw_queue_name_check(good[i]) != 0)
			fail_msg("queue name \"%s\" rejected", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ecw_queue_name_check(bad[i]) != ECW_EINVALID)
			fail_msg("queue name \"%s\" accepted", bad[i]);
}

static void test_escape__table_names(void **state)
{
	(void)state;
	static const char *const good[] = {"jobs", "Jobs", "abc", "a12", "JobsV2", SIXTY "ABC"};
	/* "tables" is reserved by the service. */
	static const char *const bad[] = {"",     "ab",     "1abc",   "ab-c",   "ab_c",
	                                  "ab c", "jobs()", "tables", "Tables", SIXTY "ABCD"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (ecw_table_name_check(good[i]) != 0)
			fail_msg("table name \"%s\" rejected", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ecw_table_name_check(bad[i]) != ECW_EINVALID)
			fail_msg("table name \"%s\" accepted", bad[i]);
}

/* ecw_table_name_check at every edge of the rule, and its one message, which
 * names the name and the rule (check-config shows the same one). */
static void test_escape__table_name_check_edges(void **state)
{
	(void)state;
	static const char *const good[] = {
	    "abc", "A12", "Z99", "zZ0", SIXTY "ABC" /* 63 */, "tablesX", "Xtables", "tables1", "Tabl3s",
	};
	static const char *const bad[] = {
	    "",
	    "a",
	    "ab" /* 2 */,
	    SIXTY "ABCD" /* 64 */,
	    "1abc",
	    "9ab",
	    "_abc",
	    "ab-c",
	    "ab.c",
	    "tables",
	    "Tables",
	    "TABLES",
	    "tAbLeS",
	    "caf\xc3\xa9",
	    "\xc3\xa9"
	    "abc",
	    "ab\x7f",
	    "ab\tc",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (ecw_table_name_check(good[i]) != 0)
			fail_msg("table name \"%s\" rejected: %s", good[i], ecw_error_last()->message);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ecw_table_name_check(bad[i]) != ECW_EINVALID)
			fail_msg("table name \"%s\" accepted", bad[i]);
	assert_int_equal(ecw_table_name_check(NULL), ECW_EINVALID);
	assert_int_equal(ecw_table_name_check("tables"), ECW_EINVALID);
	assert_string_equal(ecw_error_last()->message,
	                    "invalid table name 'tables': a table name is a letter, then 2-62 letters or "
	                    "digits, not the reserved name 'tables'");
	assert_int_equal(ecw_error_last()->code, ECW_EINVALID);
	assert_int_equal(ecw_table_name_check("9lives"), ECW_EINVALID);
	assert_string_equal(ecw_error_last()->message,
	                    "invalid table name '9lives': a table name is a letter, then 2-62 letters or "
	                    "digits, not the reserved name 'tables'");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_escape__pct_encode_reserved),
	    cmocka_unit_test(test_escape__pct_encode_unreserved_kept),
	    cmocka_unit_test(test_escape__pct_encode_utf8),
	    cmocka_unit_test(test_escape__pct_encode_length),
	    cmocka_unit_test(test_escape__entity_path),
	    cmocka_unit_test(test_escape__filter_string),
	    cmocka_unit_test(test_escape__xml_escape),
	    cmocka_unit_test(test_escape__http_date_round_trip),
	    cmocka_unit_test(test_escape__http_date_rejects_garbage),
	    cmocka_unit_test(test_escape__key_check_forbidden_characters),
	    cmocka_unit_test(test_escape__key_check_control_characters),
	    cmocka_unit_test(test_escape__key_check_invalid_utf8),
	    cmocka_unit_test(test_escape__key_check_length),
	    cmocka_unit_test(test_escape__key_check_accepts),
	    cmocka_unit_test(test_escape__queue_names),
	    cmocka_unit_test(test_escape__table_names),
	    cmocka_unit_test(test_escape__table_name_check_edges),
	};
	return cmocka_run_group_tests_name("escape", tests, NULL, NULL);
}
