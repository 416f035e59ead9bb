/* SPDX-License-Identifier: MIT */
/* test_error.c - the per-thread last error (worker/base/error.c): its
 * message, service code and request id are one line that is safe on a
 * terminal, whatever a service's answer or a message's key put in them:
 * no C0 control, no DEL, no C1 control (CSI and friends, in UTF-8 or as a
 * lone 8-bit byte) survives, the rest
 * of the text (UTF-8 included) does, and the length stays. */
#include "support.h"

#include <string.h>

#include "ecw_err.h"

static bool terminal_safe(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	for (unsigned char prev = 0; *p; prev = *p++)
		if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) ||
		    (*p >= 0x80 && *p <= 0x9f && prev < 0x80))
			return false;
	return true;
}

static void test_error__message_is_terminal_safe(void **state)
{
	static const char hostile[] = "key 'a\x1b]0;pwned\x07\x1b[2J\r\nb\x7f\xc2\x9b"
	                              "31m' \xc3\xa9t\xc3\xa9";

	(void)state;
	assert_int_equal(ecw_error_set(ECW_EINVALID, "bad %s", hostile), ECW_EINVALID);
	const char *m = ecw_error_last()->message;
	assert_true(terminal_safe(m));
	assert_int_equal(strlen(m), strlen("bad ") + strlen(hostile));
	assert_non_null(strstr(m, "pwned"));
	assert_non_null(strstr(m, "\xc3\xa9t\xc3\xa9")); /* été, kept */
	assert_int_equal(ecw_error_last()->code, ECW_EINVALID);
}

static void test_error__service_fields_are_terminal_safe(void **state)
{
	(void)state;
	assert_int_equal(ecw_error_set_http(ECW_ETRANSIENT, 500, "Code\x1b[31m", "rid\x9b\xc2\x9b", "%s: %s",
	                                    "GET /t", "body\x1b]8;;http://x\x1b\\link"),
	                 ECW_ETRANSIENT);
	const struct ecw_error *e = ecw_error_last();
	assert_true(terminal_safe(e->message));
	assert_true(terminal_safe(e->service_code));
	assert_true(terminal_safe(e->request_id));
	assert_string_equal(e->service_code, "Code [31m");
	assert_int_equal(e->http_status, 500);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_error__message_is_terminal_safe),
	    cmocka_unit_test(test_error__service_fields_are_terminal_safe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
