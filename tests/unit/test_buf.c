/* SPDX-License-Identifier: MIT */
/* test_buf.c - the growable buffer: NUL-terminated after every append, the
 * hard cap (an append past it fails and changes nothing), the inline one-byte
 * append at every capacity boundary, and ecw_buf_cat's all-or-nothing. */
#include "support.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_buf__addc_across_growth(void **state)
{
	struct ecw_buf b;
	char want[1001];

	(void)state;
	ecw_buf_init(&b, 0);
	/* 1,000 bytes cross the first allocation (64) and four doublings; the
	 * fast path and the growing path alternate at each boundary. */
	for (int i = 0; i < 1000; i++) {
		want[i] = (char)('a' + i % 26);
		assert_int_equal(ecw_buf_addc(&b, want[i]), 0);
		assert_int_equal(b.len, (size_t)i + 1);
		assert_int_equal(b.ptr[b.len], '\0');
		assert_true(b.len < b.cap);
	}
	want[1000] = '\0';
	assert_string_equal(ecw_buf_cstr(&b), want);
	ecw_buf_dispose(&b);
}

static void test_buf__cap_is_hard(void **state)
{
	struct ecw_buf b;

	(void)state;
	ecw_buf_init(&b, 5);
	assert_int_equal(ecw_buf_adds(&b, "abcd"), 0);
	assert_int_equal(ecw_buf_addc(&b, 'e'), 0);
	assert_int_equal(ecw_buf_addc(&b, 'f'), ECW_ENOMEM);
	assert_int_equal(ecw_buf_adds(&b, "x"), ECW_ENOMEM);
	assert_int_equal(ecw_buf_printf(&b, "%d", 7), ECW_ENOMEM);
	assert_string_equal(ecw_buf_cstr(&b), "abcde");
	assert_true(b.cap <= 6);
	ecw_buf_dispose(&b);
}

static void test_buf__cat(void **state)
{
	struct ecw_buf b;

	(void)state;
	ecw_buf_init(&b, 12);
	assert_int_equal(ecw_buf_cat(&b, "GET", " ", "/q", NULL), 0);
	assert_string_equal(ecw_buf_cstr(&b), "GET /q");
	assert_int_equal(ecw_buf_cat(&b, NULL), 0);
	assert_string_equal(ecw_buf_cstr(&b), "GET /q");
	/* The second piece fits, the third does not: nothing of the call stays. */
	assert_int_equal(ecw_buf_cat(&b, "?", "a=1", "&bcd=2", NULL), ECW_ENOMEM);
	assert_string_equal(ecw_buf_cstr(&b), "GET /q");
	assert_int_equal(b.len, 6);
	ecw_buf_dispose(&b);
}

static void test_buf__take_and_reset(void **state)
{
	struct ecw_buf b;
	char *p;

	(void)state;
	ecw_buf_init(&b, 0);
	assert_string_equal(ecw_buf_cstr(&b), "");
	p = ecw_buf_take(&b);
	assert_string_equal(p, "");
	free(p);
	assert_int_equal(ecw_buf_printf(&b, "%s-%d", "x", 300), 0);
	ecw_buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_string_equal(ecw_buf_cstr(&b), "");
	assert_int_equal(ecw_buf_addc(&b, 'y'), 0);
	p = ecw_buf_take(&b);
	assert_string_equal(p, "y");
	assert_null(b.ptr);
	free(p);
}

static void test_buf__integers(void **state)
{
	static const long long vs[] = {0,         7,        -1, 10, 99, -100, 2147483647LL, -2147483648LL,
	                               LLONG_MAX, LLONG_MIN};
	struct ecw_buf b;
	char want[32], out[ECW_INT_TEXT_MAX];

	(void)state;
	ecw_buf_init(&b, 0);
	for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
		snprintf(want, sizeof(want), "%lld", vs[i]);
		ecw_buf_reset(&b);
		assert_int_equal(ecw_buf_addi(&b, vs[i]), 0);
		assert_string_equal(ecw_buf_cstr(&b), want);
		assert_int_equal(ecw_buf_int_text(out, vs[i]), strlen(want));
		assert_memory_equal(out, want, strlen(want));
	}
	ecw_buf_dispose(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buf__addc_across_growth),
	    cmocka_unit_test(test_buf__cap_is_hard),
	    cmocka_unit_test(test_buf__cat),
	    cmocka_unit_test(test_buf__take_and_reset),
	    cmocka_unit_test(test_buf__integers),
	};
	return cmocka_run_group_tests_name("buf", tests, NULL, NULL);
}
