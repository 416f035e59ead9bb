/* SPDX-License-Identifier: MIT */
/* test_message.c - decoding job messages (worker/message.c): plain JSON and
 * base64, the fields a message must have, and fields that would read as
 * something else in C (a "\u0000" inside them). The fuzz target
 * tests/fuzz/fuzz_message.c checks the same rules on any input. */
#include "support.h"

#include <stdlib.h>
#include <string.h>

#include "message.h"

static void decodes(const char *text, const char *job, const char *pk, const char *rk, const char *id)
{
	struct ecw_message m;
	int err = ecw_message_decode(&m, text, strlen(text));

	if (err != 0)
		fail_msg("decoding '%s': %s: %s", text, ecw_error_name(err), ecw_error_last()->message);
	assert_str(m.job, job);
	assert_str(m.pk, pk);
	assert_str(m.rk, rk);
	if (id)
		assert_str(m.id, id);
	else
		assert_null(m.id);
	ecw_message_dispose(&m);
}

static void refused(const char *text, size_t len, const char *needle)
{
	struct ecw_message m;
	int err = ecw_message_decode(&m, text, len);

	if (err != ECW_EINVALID)
		fail_msg("decoding '%.*s' = %s, want ECW_EINVALID", (int)len, text, ecw_error_name(err));
	if (!str_contains(ecw_error_last()->message, needle))
		fail_msg("message '%s' does not say '%s'", ecw_error_last()->message, needle);
	ecw_message_dispose(&m);
}

static void test_message__plain_and_base64(void **state)
{
	(void)state;
	decodes("{\"job\":\"archive\",\"pk\":\"Sales\",\"rk\":\"0042\",\"id\":\"t-1\"}", "archive", "Sales",
	        "0042", "t-1");
	decodes(" \r\n{\"job\":\"j\",\"pk\":\"\",\"rk\":\"r\"}\n", "j", "", "r", NULL);
	/* base64 of {"job":"j","pk":"p","rk":"r"} */
	decodes("eyJqb2IiOiJqIiwicGsiOiJwIiwicmsiOiJyIn0=", "j", "p", "r", NULL);
	decodes("  eyJqb2IiOiJqIiwicGsiOiJwIiwicmsiOiJyIn0=\r\n", "j", "p", "r", NULL);
}

static void test_message__required_fields(void **state)
{
	(void)state;
	refused("{\"job\":\"j\",\"pk\":\"p\"}", 20, "\"rk\"");
	refused("{\"job\":\"\",\"pk\":\"p\",\"rk\":\"r\"}", 28, "empty");
	refused("{\"job\":\"j\",\"pk\":\"a/b\",\"rk\":\"r\"}", 31, "pk");
	refused("[1]", 3, "neither a JSON object nor base64");
}

/* A keyless job's message (a rollup's) has neither key; one key alone is
 * refused, and ecw_message_require_keys is what a keyed job type gets. */
static void test_message__keyless(void **state)
{
	(void)state;
	struct ecw_message m;
	static const char text[] =
	    "{\"job\":\"tank-daily\",\"device\":\"tank-7\",\"window_start\":\"2020-10-11\"}";

	assert_int_equal(ecw_message_decode(&m, text, strlen(text)), 0);
	assert_str(m.job, "tank-daily");
	assert_null(m.pk);
	assert_null(m.rk);
	assert_int_equal(ecw_message_require_keys(&m), ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "no \"pk\""));
	ecw_message_dispose(&m);

	refused("{\"job\":\"j\",\"rk\":\"r\"}", 20, "has \"rk\" but no \"pk\"");
	refused("{\"job\":\"j\",\"pk\":\"p\",\"rk\":null}", 30, "has \"pk\" but no \"rk\"");

	struct ecw_buf b;
	char *fields[] = {"device=tank-7", NULL};
	ecw_buf_init(&b, 0);
	assert_int_equal(ecw_message_encode(&b, "tank-daily", NULL, NULL, NULL, fields, false), 0);
	assert_str(b.ptr, "{\"job\":\"tank-daily\",\"device\":\"tank-7\"}");
	ecw_buf_reset(&b);
	assert_int_equal(ecw_message_encode(&b, "j", "p", NULL, NULL, NULL, false), ECW_EINVALID);
	ecw_buf_dispose(&b);

	decodes("{\"job\":\"j\",\"pk\":\"p\",\"rk\":\"r\"}", "j", "p", "r", NULL);
	assert_int_equal(ecw_message_decode(&m, "{\"job\":\"j\",\"pk\":\"p\",\"rk\":\"r\"}", 29), 0);
	assert_int_equal(ecw_message_require_keys(&m), 0);
	ecw_message_dispose(&m);
}

/* Found by fuzz_message: "arc\u0000hive" was the job "arc", and a key with a
 * NUL in it slipped past the key check (which stops at the NUL). */
static void test_message__nul_in_a_field(void **state)
{
	(void)state;
	static const char *const texts[] = {
	    "{\"job\":\"arc\\u0000hive\",\"pk\":\"p\",\"rk\":\"r\"}",
	    "{\"job\":\"j\",\"pk\":\"p\\u0000/\",\"rk\":\"r\"}",
	    "{\"job\":\"j\",\"pk\":\"p\",\"rk\":\"\\u0000\"}",
	    "{\"job\":\"j\",\"pk\":\"p\",\"rk\":\"r\",\"id\":\"t\\u0000x\"}",
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		refused(texts[i], strlen(texts[i]), "U+0000");
}

/* Found by fuzz_message: NUL bytes after base64 passed for the whitespace
 * around it (strchr finds the terminator); real whitespace still does. */
static void test_message__nul_after_base64(void **state)
{
	(void)state;
	static const char text[] = "eyJqb2IiOiJqIiwicGsiOiJwIiwicmsiOiJyIn0=\0\0\n";
	refused(text, sizeof(text) - 1, "base64");
	decodes("eyJqb2IiOiJqIiwicGsiOiJwIiwicmsiOiJyIn0= \t\r\n", "j", "p", "r", NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_message__plain_and_base64), cmocka_unit_test(test_message__required_fields),
	    cmocka_unit_test(test_message__keyless),          cmocka_unit_test(test_message__nul_in_a_field),
	    cmocka_unit_test(test_message__nul_after_base64),
	};
	return cmocka_run_group_tests_name("message", tests, NULL, NULL);
}
