/* SPDX-License-Identifier: MIT */
/* test_xml.c - QueueMessagesList bodies as the Queue service returns them for
 * receive, put and peek, and the <Error> body of a failed queue request. */
#include "support.h"

#include <stdlib.h>
#include <string.h>

/* Wed, 19 Aug 2026 10:00:00 GMT */
#define T0 ((time_t)1787133600)

/* clang-format off */
static const char received[] =
	"\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"utf-8\"?>\r\n"
	"<QueueMessagesList>\r\n"
	"  <QueueMessage>\r\n"
	"    <MessageId>5974b586-0df3-4e2d-ad0c-18e3892bfca2</MessageId>\r\n"
	"    <InsertionTime>Wed, 19 Aug 2026 10:00:00 GMT</InsertionTime>\r\n"
	"    <ExpirationTime>Wed, 26 Aug 2026 10:00:00 GMT</ExpirationTime>\r\n"
	"    <PopReceipt>AgAAAAMAAAAAAAAAtnx+zVjS2wE=</PopReceipt>\r\n"
	"    <TimeNextVisible>Wed, 19 Aug 2026 10:00:30 GMT</TimeNextVisible>\r\n"
	"    <DequeueCount>3</DequeueCount>\r\n"
	"    <MessageText>{\"op\":\"x &amp; y &lt;z&gt;\"}&#13;\nline2</MessageText>\r\n"
	"  </QueueMessage>\r\n"
	"  <QueueMessage>\r\n"
	"    <MessageId>a0a0a0a0-0000-4000-8000-000000000002</MessageId>\r\n"
	"    <InsertionTime>Thu, 20 Aug 2026 00:00:01 GMT</InsertionTime>\r\n"
	"    <ExpirationTime>Fri, 31 Dec 9999 23:59:59 GMT</ExpirationTime>\r\n"
	"    <PopReceipt>AgAAAAMAAAAAAAAA/+/=</PopReceipt>\r\n"
	"    <TimeNextVisible>Thu, 20 Aug 2026 00:01:01 GMT</TimeNextVisible>\r\n"
	"    <DequeueCount>1</DequeueCount>\r\n"
	"    <MessageText>Zo\xc3\xab</MessageText>\r\n"
	"  </QueueMessage>\r\n"
	"</QueueMessagesList>";
/* clang-format on */

static void test_xml__receive_list(void **state)
{
	(void)state;
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	assert_int_equal(ecw_xml_parse_messages(&m, &n, received, strlen(received)), 0);
	assert_int_equal(n, 2);
	assert_non_null(m);

	assert_string_equal(m[0].id, "5974b586-0df3-4e2d-ad0c-18e3892bfca2");
	assert_string_equal(m[0].pop_receipt, "AgAAAAMAAAAAAAAAtnx+zVjS2wE=");
	assert_int_equal(m[0].dequeue_count, 3);
	assert_int_equal((long long)m[0].insertion_time, (long long)T0);
	assert_int_equal((long long)m[0].expiration_time, (long long)(T0 + 7 * 86400));
	assert_int_equal((long long)m[0].next_visible, (long long)(T0 + 30));
	static const char text0[] = "{\"op\":\"x & y <z>\"}\r\nline2";
	assert_str(m[0].text, text0);
	assert_int_equal(m[0].text_len, strlen(text0));

	assert_string_equal(m[1].id, "a0a0a0a0-0000-4000-8000-000000000002");
	assert_string_equal(m[1].pop_receipt, "AgAAAAMAAAAAAAAA/+/=");
	assert_int_equal(m[1].dequeue_count, 1);
	assert_int_equal((long long)m[1].insertion_time, (long long)(T0 + 14 * 3600 + 1));
	/* The service's "never expires" date. */
	assert_int_equal((long long)m[1].expiration_time, 0);
	assert_str(m[1].text, "Zo\xc3\xab");
	assert_int_equal(m[1].text_len, 4);
	ecw_queue_msgs_free(m, n);
}

static void test_xml__put_answer_without_text(void **state)
{
	(void)state;
	static const char body[] =
	    "<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessagesList><QueueMessage>"
	    "<MessageId>id-1</MessageId>"
	    "<InsertionTime>Wed, 19 Aug 2026 10:00:00 GMT</InsertionTime>"
	    "<ExpirationTime>Wed, 26 Aug 2026 10:00:00 GMT</ExpirationTime>"
	    "<PopReceipt>pr-1</PopReceipt>"
	    "<TimeNextVisible>Wed, 19 Aug 2026 10:00:00 GMT</TimeNextVisible>"
	    "</QueueMessage></QueueMessagesList>";
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	assert_int_equal(ecw_xml_parse_messages(&m, &n, body, strlen(body)), 0);
	assert_int_equal(n, 1);
	assert_string_equal(m[0].id, "id-1");
	assert_string_equal(m[0].pop_receipt, "pr-1");
	assert_int_equal((long long)m[0].next_visible, (long long)T0);
	ecw_queue_msgs_free(m, n);
}

/* Found by fuzz_queue_xml: a second MessageText leaked the first's copy (the
 * leak shows under make asan). The last one wins, as for every field. */
static void test_xml__repeated_text(void **state)
{
	(void)state;
	static const char body[] = "<QueueMessagesList><QueueMessage><MessageId>id-1</MessageId>"
	                           "<MessageText>first</MessageText><MessageText>second</MessageText>"
	                           "</QueueMessage></QueueMessagesList>";
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	assert_int_equal(ecw_xml_parse_messages(&m, &n, body, strlen(body)), 0);
	assert_int_equal(n, 1);
	assert_str(m[0].text, "second");
	assert_int_equal(m[0].text_len, 6);
	ecw_queue_msgs_free(m, n);
}

static void test_xml__empty_list(void **state)
{
	(void)state;
	static const char *const bodies[] = {
	    "<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessagesList />",
	    "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<QueueMessagesList></QueueMessagesList>",
	    "<QueueMessagesList>\r\n</QueueMessagesList>",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		struct ecw_queue_msg *m = NULL;
		size_t n = 99;
		assert_int_equal(ecw_xml_parse_messages(&m, &n, bodies[i], strlen(bodies[i])), 0);
		assert_int_equal(n, 0);
		ecw_queue_msgs_free(m, n);
	}
}

static void test_xml__peek_list(void **state)
{
	(void)state;
	static const char body[] =
	    "<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessagesList><QueueMessage>"
	    "<MessageId>peek-1</MessageId>"
	    "<InsertionTime>Wed, 19 Aug 2026 10:00:00 GMT</InsertionTime>"
	    "<ExpirationTime>Wed, 26 Aug 2026 10:00:00 GMT</ExpirationTime>"
	    "<DequeueCount>0</DequeueCount>"
	    "<MessageText>hello &lt;world&gt;</MessageText>"
	    "</QueueMessage><QueueMessage>"
	    "<MessageId>peek-2</MessageId>"
	    "<InsertionTime>Wed, 19 Aug 2026 10:00:01 GMT</InsertionTime>"
	    "<ExpirationTime>Wed, 26 Aug 2026 10:00:01 GMT</ExpirationTime>"
	    "<DequeueCount>2</DequeueCount>"
	    "<MessageText></MessageText>"
	    "</QueueMessage></QueueMessagesList>";
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	assert_int_equal(ecw_xml_parse_messages(&m, &n, body, strlen(body)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(m[0].id, "peek-1");
	assert_string_equal(m[0].pop_receipt, "");
	assert_int_equal((long long)m[0].next_visible, 0);
	assert_int_equal(m[0].dequeue_count, 0);
	assert_str(m[0].text, "hello <world>");
	assert_int_equal(m[0].text_len, 13);
	assert_string_equal(m[1].id, "peek-2");
	assert_int_equal(m[1].dequeue_count, 2);
	assert_str(m[1].text, "");
	assert_int_equal(m[1].text_len, 0);
	ecw_queue_msgs_free(m, n);
}

static void test_xml__large_text(void **state)
{
	(void)state;
	/* 64 KiB of text, half of it escaped. */
	struct ecw_buf b;
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_buf_adds(&b, "<QueueMessagesList><QueueMessage><MessageId>big</MessageId>"
	                                  "<DequeueCount>1</DequeueCount><MessageText>"),
	                 0);
	for (int i = 0; i < 32768; i++)
		assert_int_equal(ecw_buf_adds(&b, "a&amp;"), 0);
	assert_int_equal(ecw_buf_adds(&b, "</MessageText></QueueMessage></QueueMessagesList>"), 0);
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	assert_int_equal(ecw_xml_parse_messages(&m, &n, b.ptr, b.len), 0);
	assert_int_equal(n, 1);
	assert_int_equal(m[0].text_len, 65536);
	assert_non_null(m[0].text);
	for (size_t i = 0; i < 65536; i += 2)
		if (m[0].text[i] != 'a' || m[0].text[i + 1] != '&')
			fail_msg("text differs at byte %zu", i);
	assert_int_equal(m[0].text[65536], '\0');
	ecw_queue_msgs_free(m, n);
	ecw_buf_dispose(&b);
}

static void test_xml__malformed(void **state)
{
	(void)state;
	static const char *const bodies[] = {
	    "",
	    "not xml",
	    "<QueueMessagesList><QueueMessage><MessageId>x</MessageId>",
	    "<?xml version=\"1.0\"?><Error><Code>QueueNotFound</Code></Error>",
	    /* The service never declares a DOCTYPE; one is refused outright, so
	     * no entity is ever expanded. */
	    "<?xml version=\"1.0\"?><!DOCTYPE QueueMessagesList [<!ENTITY a \"aaaaaaaa\">]>"
	    "<QueueMessagesList><QueueMessage><MessageId>x</MessageId><MessageText>&a;&a;</MessageText>"
	    "</QueueMessage></QueueMessagesList>",
	    "<!DOCTYPE QueueMessagesList><QueueMessagesList />",
	    /* Two roots, and text after the root. */
	    "<QueueMessagesList /><QueueMessagesList />",
	    "<QueueMessagesList />x",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		struct ecw_queue_msg *m = NULL;
		size_t n = 0;
		int err = ecw_xml_parse_messages(&m, &n, bodies[i], strlen(bodies[i]));
		if (err >= 0)
			fail_msg("parsed \"%s\" as a message list", bodies[i]);
		ecw_queue_msgs_free(m, n);
	}
	ecw_queue_msgs_free(NULL, 0);
}

static void test_xml__error_body(void **state)
{
	(void)state;
	static const char body[] =
	    "\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"utf-8\"?><Error>"
	    "<Code>QueueNotFound</Code>"
	    "<Message>The specified queue does not exist.\nRequestId:2b1c0f2e-0003-0001-0000-000000000000\n"
	    "Time:2026-08-19T10:00:00.0000000Z</Message></Error>";
	char code[64], msg[256];
	ecw_xml_parse_error(code, sizeof(code), msg, sizeof(msg), body, strlen(body));
	assert_string_equal(code, "QueueNotFound");
	assert_true(str_starts(msg, "The specified queue does not exist."));

	/* Entities are decoded. */
	static const char esc[] =
	    "<Error><Code>InvalidXmlDocument</Code><Message>bad &lt;tag&gt; &amp; co</Message></Error>";
	ecw_xml_parse_error(code, sizeof(code), msg, sizeof(msg), esc, strlen(esc));
	assert_string_equal(code, "InvalidXmlDocument");
	assert_string_equal(msg, "bad <tag> & co");
}

static void test_xml__error_body_missing_parts(void **state)
{
	(void)state;
	char code[64], msg[256];
	memset(code, 'X', sizeof(code));
	memset(msg, 'X', sizeof(msg));
	static const char only_code[] = "<Error><Code>AuthenticationFailed</Code></Error>";
	ecw_xml_parse_error(code, sizeof(code), msg, sizeof(msg), only_code, strlen(only_code));
	assert_string_equal(code, "AuthenticationFailed");
	assert_string_equal(msg, "");

	memset(code, 'X', sizeof(code));
	ecw_xml_parse_error(code, sizeof(code), msg, sizeof(msg), "garbage <", 9);
	assert_string_equal(code, "");
	assert_string_equal(msg, "");
	ecw_xml_parse_error(code, sizeof(code), msg, sizeof(msg), "", 0);
	assert_string_equal(code, "");
	assert_string_equal(msg, "");
}

static void test_xml__error_body_truncated_to_cap(void **state)
{
	(void)state;
	static const char body[] =
	    "<Error><Code>QueueNotFound</Code><Message>The specified queue does not exist.</Message></Error>";
	char code[8], msg[12];
	memset(code, 'X', sizeof(code));
	memset(msg, 'X', sizeof(msg));
	ecw_xml_parse_error(code, 6, msg, 5, body, strlen(body));
	assert_string_equal(code, "Queue");
	assert_int_equal(code[6], 'X');
	assert_string_equal(msg, "The ");
	assert_int_equal(msg[5], 'X');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_xml__receive_list),
	    cmocka_unit_test(test_xml__put_answer_without_text),
	    cmocka_unit_test(test_xml__repeated_text),
	    cmocka_unit_test(test_xml__empty_list),
	    cmocka_unit_test(test_xml__peek_list),
	    cmocka_unit_test(test_xml__large_text),
	    cmocka_unit_test(test_xml__malformed),
	    cmocka_unit_test(test_xml__error_body),
	    cmocka_unit_test(test_xml__error_body_missing_parts),
	    cmocka_unit_test(test_xml__error_body_truncated_to_cap),
	};
	return cmocka_run_group_tests_name("xml", tests, NULL, NULL);
}
