/* SPDX-License-Identifier: MIT */
/* test_trace.c - W3C trace context (worker/telemetry/trace.c): traceparent read and
 * written, each kind of invalid value refused with its reason, a run's span
 * in the message's trace or a new one, and the trace fields the log adds to
 * a thread's lines (worker/base/log.c). */
#include "support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ecw_log.h"
#include "telemetry.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static void test_trace__parse_and_format(void **state)
{
	struct ecw_trace_ctx c;
	char out[ECW_TRACEPARENT_LEN + 1];

	(void)state;
	assert_int_equal(ecw_trace_parent_parse(&c, TP, strlen(TP)), 0);
	assert_int_equal(c.trace_id[0], 0x4b);
	assert_int_equal(c.trace_id[15], 0x36);
	assert_int_equal(c.span_id[0], 0x00);
	assert_int_equal(c.span_id[7], 0xb7);
	assert_int_equal(c.flags, 1);
	ecw_trace_parent_format(out, &c);
	assert_string_equal(out, TP);
	/* flags 00: not sampled, still valid */
	assert_int_equal(
	    ecw_trace_parent_parse(&c, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", 55), 0);
	assert_int_equal(c.flags, 0);
}

static void refused(const char *text, const char *needle)
{
	struct ecw_trace_ctx c;

	if (ecw_trace_parent_parse(&c, text, strlen(text)) != ECW_EINVALID)
		fail_msg("'%s' was accepted", text);
	if (!str_contains(ecw_error_last()->message, needle))
		fail_msg("'%s': message '%s' does not say '%s'", text, ecw_error_last()->message, needle);
	/* The sender's text is never quoted back. */
	if (strlen(text) > 8 && str_contains(ecw_error_last()->message, text))
		fail_msg("'%s' quoted in '%s'", text, ecw_error_last()->message);
}

static void test_trace__invalid(void **state)
{
	(void)state;
	/* length */
	refused("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", "characters");
	refused("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-010", "characters");
	refused("", "version");
	/* uppercase */
	refused("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "lowercase hex");
	refused("00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01", "lowercase hex");
	/* all-zero ids */
	refused("00-00000000000000000000000000000000-00f067aa0ba902b7-01", "trace-id is all zeros");
	refused("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "parent-id is all zeros");
	/* versions */
	refused("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "version ff");
	refused("0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "version");
	refused("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", "characters");
	/* junk */
	refused("00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", "separated");
	refused("00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01", "lowercase hex");
	refused("hello, this is not a traceparent at all, not even close", "version");
}

/* A version it does not know is read as 00 where it can be (the spec's
 * forward compatibility): its first 55 characters, more only after '-'. */
static void test_trace__future_version(void **state)
{
	struct ecw_trace_ctx c;
	char out[ECW_TRACEPARENT_LEN + 1];
	const char *v1 = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-something-new";

	(void)state;
	assert_int_equal(ecw_trace_parent_parse(&c, v1, strlen(v1)), 0);
	ecw_trace_parent_format(out, &c);
	assert_string_equal(out, TP);
	assert_int_equal(ecw_trace_parent_parse(&c, v1, 55), 0);
}

static bool is_lower_hex(const char *s, size_t n)
{
	if (strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static void test_trace__child_span(void **state)
{
	struct ecw_trace_ctx parent, child;
	struct ecw_span_ids a, b;
	char out[ECW_TRACEPARENT_LEN + 1];

	(void)state;
	assert_int_equal(ecw_trace_parent_parse(&parent, TP, strlen(TP)), 0);
	ecw_trace_span_start(&a, &parent, "6b2a1ba4-c6b8-4e0d-9a54-0d3c4a0e6f11");
	ecw_trace_span_start(&b, &parent, "6b2a1ba4-c6b8-4e0d-9a54-0d3c4a0e6f11");
	/* the message's trace, its parent-id as the parent, a fresh span id */
	assert_string_equal(a.trace_hex, "4bf92f3577b34da6a3ce929d0e0e4736");
	assert_true(a.has_parent);
	assert_memory_equal(a.parent_id, parent.span_id, 8);
	assert_true(is_lower_hex(a.span_hex, 16));
	assert_string_not_equal(a.span_hex, "00f067aa0ba902b7");
	assert_string_not_equal(a.span_hex, "0000000000000000");
	assert_string_not_equal(a.span_hex, b.span_hex);
	assert_int_equal(a.flags, 1);
	/* what the run's follow-ups carry: same trace, the run's span as parent */
	ecw_trace_child_context(&child, &a);
	ecw_trace_parent_format(out, &child);
	assert_memory_equal(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-", 36);
	assert_memory_equal(out + 36, a.span_hex, 16);
	assert_string_equal(out + 52, "-01");
	/* a not-sampled parent stays not sampled; unknown flag bits are dropped */
	parent.flags = 0xfe;
	ecw_trace_span_start(&a, &parent, NULL);
	assert_int_equal(a.flags, 0);
}

/* Without a traceparent: a new trace, the queue message id's when it is a
 * GUID (every delivery of the message shares it), else random. */
static void test_trace__new_trace(void **state)
{
	struct ecw_span_ids a, b;

	(void)state;
	ecw_trace_span_start(&a, NULL, "6B2A1BA4-c6b8-4e0d-9a54-0d3c4a0e6f11");
	ecw_trace_span_start(&b, NULL, "6b2a1ba4-c6b8-4e0d-9a54-0d3c4a0e6f11");
	assert_string_equal(a.trace_hex, "6b2a1ba4c6b84e0d9a540d3c4a0e6f11");
	assert_string_equal(b.trace_hex, a.trace_hex);
	assert_false(a.has_parent);
	assert_int_equal(a.flags, ECW_TRACE_FLAG_SAMPLED);
	assert_string_not_equal(a.span_hex, b.span_hex);
	ecw_trace_span_start(&a, NULL, "not-a-guid");
	ecw_trace_span_start(&b, NULL, "not-a-guid");
	assert_true(is_lower_hex(a.trace_hex, 32));
	assert_string_not_equal(a.trace_hex, b.trace_hex);
	ecw_trace_span_start(&a, NULL, "00000000-0000-0000-0000-000000000000");
	assert_string_not_equal(a.trace_hex, "00000000000000000000000000000000");
}

/* The thread's trace fields ride on every line it begins, right after
 * "event", until cleared; another thread's lines do not get them. */
static void *other_thread_line(void *p)
{
	(void)p;
	ecw_log_msg(ECW_LOG_INFO, "other", "x");
	return NULL;
}

static void test_trace__log_fields(void **state)
{
	FILE *f = tmpfile();
	char text[4096];
	size_t n;
	pthread_t t;

	(void)state;
	assert_non_null(f);
	ecw_log_set_fd(fileno(f));
	ecw_log_setup(ECW_LOG_INFO, ECW_LOG_JSON);
	ecw_log_set_trace("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
	ecw_log_msg(ECW_LOG_INFO, "one", "a");
	assert_int_equal(pthread_create(&t, NULL, other_thread_line, NULL), 0);
	pthread_join(t, NULL);
	ecw_log_set_trace(NULL, NULL);
	ecw_log_msg(ECW_LOG_INFO, "two", "b");
	ecw_log_set_fd(2);
	rewind(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	assert_true(str_contains(text, "\"event\":\"one\",\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\","
	                               "\"span_id\":\"00f067aa0ba902b7\",\"msg\":\"a\"}"));
	assert_true(str_contains(text, "\"event\":\"other\",\"msg\":\"x\"}"));
	assert_true(str_contains(text, "\"event\":\"two\",\"msg\":\"b\"}"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_trace__parse_and_format), cmocka_unit_test(test_trace__invalid),
	    cmocka_unit_test(test_trace__future_version),   cmocka_unit_test(test_trace__child_span),
	    cmocka_unit_test(test_trace__new_trace),        cmocka_unit_test(test_trace__log_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
