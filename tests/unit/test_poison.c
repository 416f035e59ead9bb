/* SPDX-License-Identifier: MIT */
/* test_poison.c - the poison envelope read back (worker/poison.c): what an
 * envelope is and is not, every field, originals with any bytes, and the
 * filters operators select with. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "poison.h"

static const char weird[] =
    "{\"job\":\"move\",\"pk\":\"Sal\\u00e9s\",\"rk\":\"a\\\"b\"}\r\n\t\xc3\xa9\x00tail";

static struct ecw_poison_info info(void)
{
	struct ecw_poison_info in = {
	    .original = weird,
	    .original_len = sizeof(weird) - 1,
	    .queue = "jobs",
	    .message_id = "m-1",
	    .inserted_at = 1763600000,
	    .dequeue_count = 5,
	    .failed_at = 1763700000,
	    .reason = "max-dequeue",
	    .error = "TableNotFound: Employees",
	    .http_status = 404,
	    .error_code = "TableNotFound",
	    .job = "archive",
	    .pk = "Sales",
	    .rk = "0001",
	    .worker = "host ecworker/0.2.0",
	};
	return in;
}

static void parse(struct ecw_poison_view *v, const char *text, size_t len)
{
	assert_int_equal(ecw_poison_parse(v, text, len), 0);
}

static void test_poison__envelope_reads_back_every_field(void **state)
{
	struct ecw_poison_info in = info();
	struct ecw_poison_view v;
	struct ecw_buf b;

	(void)state;
	ecw_buf_init(&b, 0);
	assert_int_equal(ecw_poison_envelope(&b, &in), 0);
	parse(&v, b.ptr, b.len);
	assert_true(v.envelope);
	/* The original comes back byte for byte, NUL and CR included. */
	assert_int_equal(v.original_len, sizeof(weird) - 1);
	assert_memory_equal(v.original, weird, sizeof(weird) - 1);
	assert_string_equal(v.job, "archive");
	assert_string_equal(v.pk, "Sales");
	assert_string_equal(v.rk, "0001");
	assert_string_equal(v.reason, "max-dequeue");
	assert_string_equal(v.error, "TableNotFound: Employees");
	assert_int_equal(v.http_status, 404);
	assert_string_equal(v.error_code, "TableNotFound");
	assert_string_equal(v.queue, "jobs");
	assert_string_equal(v.message_id, "m-1");
	assert_string_equal(v.worker, "host ecworker/0.2.0");
	assert_int_equal(v.dequeue_count, 5);
	assert_int_equal(v.failed_at, 1763700000);
	assert_int_equal(v.inserted_at, 1763600000);
	ecw_poison_view_dispose(&v);
	ecw_buf_dispose(&b);
}

static void test_poison__undecodable_message_keeps_absent_fields_absent(void **state)
{
	struct ecw_poison_info in = info();
	struct ecw_poison_view v;
	struct ecw_buf b;

	(void)state;
	in.job = in.pk = in.rk = NULL;
	in.reason = "permanent";
	in.http_status = 0; /* a failure with no storage answer */
	in.error_code = "";
	ecw_buf_init(&b, 0);
	assert_int_equal(ecw_poison_envelope(&b, &in), 0);
	parse(&v, b.ptr, b.len);
	assert_true(v.envelope);
	assert_null(v.job);
	assert_null(v.pk);
	assert_null(v.rk);
	assert_string_equal(v.reason, "permanent");
	assert_int_equal(v.http_status, 0);
	assert_null(v.error_code);
	assert_null(strstr(b.ptr, "http_status"));
	assert_null(strstr(b.ptr, "error_code"));
	ecw_poison_view_dispose(&v);
	ecw_buf_dispose(&b);
}

/* Anything that is not exactly an envelope is foreign: its whole text is
 * what replay puts back. */
static void test_poison__foreign_messages_are_read_whole(void **state)
{
	static const char *const texts[] = {
	    "eyJqb2IiOiJtb3ZlIn0=", /* base64, a Functions poison message */
	    "plain words",
	    "{\"job\":\"move\",\"pk\":\"a\",\"rk\":\"b\"}",   /* a job message, not an envelope */
	    "{\"ecw_poison\":2,\"original\":\"x\"}",          /* a future version */
	    "{\"ecw_poison\":\"1\",\"original\":\"x\"}",      /* a string, not 1 */
	    "{\"ecw_poison\":1,\"original\":7}",              /* original not a string */
	    "{\"ecw_poison\":1}",                             /* no original */
	    "{\"ecw_poison\":1,\"original\":\"x\"} trailing", /* bytes after the object */
	    "{\"ecw_poison\":1,\"original\":\"x\"",           /* cut short */
	    "[1,2]",
	    "",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct ecw_poison_view v;
		parse(&v, texts[i], strlen(texts[i]));
		assert_false(v.envelope);
		assert_int_equal(v.original_len, strlen(texts[i]));
		assert_memory_equal(v.original, texts[i], strlen(texts[i]));
		assert_null(v.job);
		assert_null(v.reason);
		assert_int_equal(v.dequeue_count, -1);
		ecw_poison_view_dispose(&v);
	}
}

static void test_poison__filters_select_on_every_field(void **state)
{
	struct ecw_poison_info in = info();
	struct ecw_poison_view env, foreign;
	struct ecw_buf b;
	char *ids[] = {"p-2", "p-1"};

	(void)state;
	ecw_buf_init(&b, 0);
	assert_int_equal(ecw_poison_envelope(&b, &in), 0);
	parse(&env, b.ptr, b.len);
	parse(&foreign, "Sales foreign text", 18);

	struct ecw_poison_filter f = {0};
	assert_true(ecw_poison_filter_empty(&f));
	assert_true(ecw_poison_filter_match(&f, "p-1", 100, &env));
	assert_true(ecw_poison_filter_match(&f, "p-9", 100, &foreign));

	f.job = "archive";
	assert_false(ecw_poison_filter_empty(&f));
	assert_true(ecw_poison_filter_match(&f, "p-1", 0, &env));
	assert_false(ecw_poison_filter_match(&f, "p-1", 0, &foreign)); /* foreign has no job */
	f.job = "archiv";
	assert_false(ecw_poison_filter_match(&f, "p-1", 0, &env)); /* exact, not a prefix */
	f.job = NULL;

	f.reason = "max-dequeue";
	assert_true(ecw_poison_filter_match(&f, "p-1", 0, &env));
	f.reason = "permanent";
	assert_false(ecw_poison_filter_match(&f, "p-1", 0, &env));
	assert_false(ecw_poison_filter_match(&f, "p-1", 0, &foreign));
	f.reason = NULL;

	/* since: the envelope's failed_at; a foreign message's poison insertion time. */
	f.since = 1763700000;
	assert_true(ecw_poison_filter_match(&f, "p-1", 0, &env));
	f.since = 1763700001;
	assert_false(ecw_poison_filter_match(&f, "p-1", 1763800000, &env));
	assert_true(ecw_poison_filter_match(&f, "p-1", 1763800000, &foreign));
	assert_false(ecw_poison_filter_match(&f, "p-1", 1763600000, &foreign));
	f.since = 0;

	f.grep = "TableNotFound"; /* in the error */
	assert_true(ecw_poison_filter_match(&f, "p-1", 0, &env));
	f.grep = "Sal\\u00e9s"; /* in the original */
	assert_true(ecw_poison_filter_match(&f, "p-1", 0, &env));
	f.grep = "0001"; /* in the keys */
	assert_true(ecw_poison_filter_match(&f, "p-1", 0, &env));
	f.grep = "tablenotfound"; /* case-sensitive */
	assert_false(ecw_poison_filter_match(&f, "p-1", 0, &env));
	f.grep = "foreign";
	assert_true(ecw_poison_filter_match(&f, "p-1", 0, &foreign));
	f.grep = NULL;

	f.ids = ids;
	f.nids = 2;
	assert_true(ecw_poison_filter_match(&f, "p-1", 0, &env));
	assert_true(ecw_poison_filter_match(&f, "p-2", 0, &foreign));
	assert_false(ecw_poison_filter_match(&f, "p-3", 0, &env));

	/* All given must match. */
	f.job = "archive";
	f.reason = "permanent";
	assert_false(ecw_poison_filter_match(&f, "p-1", 0, &env));
	f.reason = "max-dequeue";
	assert_true(ecw_poison_filter_match(&f, "p-1", 0, &env));

	ecw_poison_view_dispose(&env);
	ecw_poison_view_dispose(&foreign);
	ecw_buf_dispose(&b);
}

static void test_poison__since_takes_durations_and_utc_times(void **state)
{
	const time_t now = 1763700000;
	time_t t;

	(void)state;
	assert_int_equal(ecw_poison_parse_since(&t, "90m", now), 0);
	assert_int_equal(t, now - 5400);
	assert_int_equal(ecw_poison_parse_since(&t, "2h", now), 0);
	assert_int_equal(t, now - 7200);
	assert_int_equal(ecw_poison_parse_since(&t, "7d", now), 0);
	assert_int_equal(t, now - 7 * 86400);
	assert_int_equal(ecw_poison_parse_since(&t, "1w", now), 0);
	assert_int_equal(t, now - 604800);
	assert_int_equal(ecw_poison_parse_since(&t, "30s", now), 0);
	assert_int_equal(t, now - 30);
	assert_int_equal(ecw_poison_parse_since(&t, "2026-11-20", now), 0);
	assert_int_equal(t, 1795132800);
	assert_int_equal(ecw_poison_parse_since(&t, "2026-11-20T10:30:00Z", now), 0);
	assert_int_equal(t, 1795132800 + 37800);
	assert_int_equal(ecw_poison_parse_since(&t, "2026-11-20T10:30", now), 0);
	assert_int_equal(t, 1795132800 + 37800);
	static const char *const bad[] = {
	    "", "5", "5x", "-2h", "h", "2026-13-45", "2026-11-20T", "yesterday", "2026-11-20Tnoon", "1e9d"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(ecw_poison_parse_since(&t, bad[i], now), ECW_EINVALID);
		assert_non_null(strstr(ecw_error_last()->message, "--since"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_poison__envelope_reads_back_every_field),
	    cmocka_unit_test(test_poison__undecodable_message_keeps_absent_fields_absent),
	    cmocka_unit_test(test_poison__foreign_messages_are_read_whole),
	    cmocka_unit_test(test_poison__filters_select_on_every_field),
	    cmocka_unit_test(test_poison__since_takes_durations_and_utc_times),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
