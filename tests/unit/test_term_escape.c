/* SPDX-License-Identifier: MIT */
/* test_term_escape.c - ecw_term_escape: printable UTF-8 kept, the backslash
 * doubled, C0 controls, DEL, C1 controls, bidi controls and bytes that are not
 * UTF-8 shown as escapes, so that nothing a terminal obeys gets through. */
#include "support.h"

#include <string.h>

#include "ecw_codec.h"

static void expect(const char *in, size_t n, const char *want)
{
	struct ecw_buf b;

	ecw_buf_init(&b, 1 << 16);
	assert_int_equal(ecw_term_escape(&b, in, n), 0);
	assert_string_equal(ecw_buf_cstr(&b), want);
	ecw_buf_dispose(&b);
}

#define EXPECT(in, want) expect(in, sizeof(in) - 1, want)

static void test_term_escape__printable_kept(void **state)
{
	(void)state;
	EXPECT("", "");
	EXPECT("orders/2024-07 a~z {}", "orders/2024-07 a~z {}");
	EXPECT("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0",
	       "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0");
}

static void test_term_escape__controls(void **state)
{
	(void)state;
	EXPECT("a\\b", "a\\\\b");
	EXPECT("\x1b]0;pwned\x07", "\\e]0;pwned\\x07");
	EXPECT("\x1b[2J", "\\e[2J");
	EXPECT("ok\rEVIL\n\t", "ok\\rEVIL\\n\\t");
	EXPECT("\x01\x7f\x1f", "\\x01\\x7f\\x1f");
	expect("a\0b", 3, "a\\x00b");
	/* C1 as UTF-8 (U+009B is CSI), and bidi overrides and isolates. */
	EXPECT("\xc2\x9b"
	       "2J\xc2\x80",
	       "\\u009b2J\\u0080");
	EXPECT("x\xe2\x80\xaeyz\xe2\x81\xa6", "x\\u202eyz\\u2066");
	EXPECT("\xe2\x80\xa8", "\\u2028");
}

static void test_term_escape__not_utf8(void **state)
{
	(void)state;
	/* A lone 0x9B is CSI on a terminal that is not in UTF-8. */
	EXPECT("\x9b"
	       "2J",
	       "\\x9b2J");
	EXPECT("\xc3(", "\\xc3(");
	EXPECT("\xed\xa0\x80", "\\xed\\xa0\\x80"); /* a surrogate */
	EXPECT("\xc0\xaf", "\\xc0\\xaf");          /* an overlong '/' */
	EXPECT("\xf0\x9f\x98", "\\xf0\\x9f\\x98"); /* cut short */
}

/* Whatever goes in, what comes out has no control byte and is valid UTF-8. */
static void test_term_escape__every_byte(void **state)
{
	(void)state;
	char in[512];
	struct ecw_buf b;

	for (int i = 0; i < 256; i++)
		in[2 * i] = (char)i, in[2 * i + 1] = (char)(255 - i);
	ecw_buf_init(&b, 1 << 16);
	assert_int_equal(ecw_term_escape(&b, in, sizeof(in)), 0);
	for (size_t i = 0; i < b.len; i++)
		if ((unsigned char)b.ptr[i] < 0x20 || (unsigned char)b.ptr[i] == 0x7f)
			fail_msg("control byte 0x%02x at %zu of %s", (unsigned char)b.ptr[i], i,
			         ecw_buf_cstr(&b));
	assert_true(ecw_utf8_valid(b.ptr, b.len));
	ecw_buf_dispose(&b);
}

static void test_term_escape__cap(void **state)
{
	(void)state;
	struct ecw_buf b;

	ecw_buf_init(&b, 8);
	assert_true(ecw_term_escape(&b, "\x1b\x1b\x1b\x1b\x1b", 5) < 0);
	ecw_buf_dispose(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_term_escape__printable_kept),
	    cmocka_unit_test(test_term_escape__controls),
	    cmocka_unit_test(test_term_escape__not_utf8),
	    cmocka_unit_test(test_term_escape__every_byte),
	    cmocka_unit_test(test_term_escape__cap),
	};
	return cmocka_run_group_tests_name("term_escape", tests, NULL, NULL);
}
