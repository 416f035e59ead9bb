/* SPDX-License-Identifier: MIT */
/* test_interop.c - ecworker's client against the official Azure SDK for
 * JavaScript (tests/interop/sdk.js, pinned in tests/package.json), both ways:
 * messages an application sends (plain, or base64 as Azure Functions expect)
 * reach the worker byte for byte and decode; messages ecworker writes reach
 * applications byte for byte; entities keep every EDM type across the two,
 * and through an archive in a blob and back (issue 36: the archive's blob,
 * read with @azure/storage-blob and parsed by the Tables SDK, and the
 * restored entity both read as the original did). */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"
#include "message.h"
#include "moveblobfx.h"

extern char **environ;

/* Runs `node tests/interop/sdk.js args...` with input on stdin; returns its
 * exit status and its stdout in out. */
static int sdk(struct ecw_buf *out, const char *input, const char *const *args)
{
	const char *argv[12] = {"node", "tests/interop/sdk.js"};
	int in[2], outp[2], status = -1;
	posix_spawn_file_actions_t fa;
	pid_t pid;
	size_t n = 2;

	if (access("tests/interop/sdk.js", R_OK) != 0)
		fail_msg("tests/interop/sdk.js not found: run from the repository root");
	for (; args[n - 2] && n < 11; n++)
		argv[n] = args[n - 2];
	argv[n] = NULL;
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(outp), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
	posix_spawn_file_actions_addclose(&fa, in[1]);
	posix_spawn_file_actions_addclose(&fa, outp[0]);
	assert_int_equal(posix_spawnp(&pid, "node", &fa, NULL, (char *const *)argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(outp[1]);
	if (input && write(in[1], input, strlen(input)) != (ssize_t)strlen(input))
		fail_msg("could not write to node");
	close(in[1]);
	for (;;) {
		char buf[4096];
		ssize_t k = read(outp[0], buf, sizeof(buf));
		if (k <= 0)
			break;
		assert_int_equal(ecw_buf_add(out, buf, (size_t)k), 0);
	}
	close(outp[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_interop__sdk_message_reaches_the_client_byte_for_byte(void **state)
{
	struct itest *t = *state;
	static const char text[] =
	    "{\"job\":\"a&b\",\"pk\":\"<o'brien>\",\"rk\":\"Zo\xc3\xab \xe2\x9c\x93\",\"n\":\"\\\"q\\\"\"}";
	struct ecw_buf out;
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;

	ecw_buf_init(&out, 0);
	t->queue_used = true;
	assert_int_equal(sdk(&out, text, (const char *const[]){"send", t->queue, NULL}), 0);
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, t->queue, 1, 30));
	assert_int_equal(n, 1);
	assert_int_equal(m[0].text_len, strlen(text));
	assert_memory_equal(m[0].text, text, strlen(text));
	ecw_queue_msgs_free(m, n);
	ecw_buf_dispose(&out);
}

static void test_interop__client_message_reaches_the_sdk_byte_for_byte(void **state)
{
	struct itest *t = *state;
	/* No CR here: Azurite answers a CR as "&#xD;" and the SDK's XML parser
	 * does not decode character references, so even the SDK's own "a\r\nb"
	 * comes back to it as "a&#xD;\nb". ecworker's own round trip of CR is
	 * tested in test_queue.c. */
	static const char text[] = "line 1\nline 2 & <tag> \"q\" 'a' Zo\xc3\xab \xe2\x9c\x93";
	struct ecw_buf out;

	ecw_buf_init(&out, 0);
	ECW_ASSERT_OK(ecw_queue_create(NULL, t->client, itest_queue(t)));
	ECW_ASSERT_OK(ecw_queue_put(NULL, t->client, t->queue, text, strlen(text), NULL));
	assert_int_equal(sdk(&out, NULL, (const char *const[]){"receive", t->queue, NULL}), 0);
	assert_int_equal(out.len, strlen(text));
	assert_memory_equal(out.ptr, text, strlen(text));
	ecw_buf_dispose(&out);
}

/* What Azure Functions sends (base64) and what SDK apps send (plain) both
 * decode to the same job message. */
static void test_interop__sdk_plain_and_base64_messages_decode(void **state)
{
	struct itest *t = *state;
	static const char json[] =
	    "{\"job\":\"archive-employee\",\"pk\":\"Sales\",\"rk\":\"o'brien 001\",\"id\":\"t-1\"}";
	struct ecw_buf out;

	ecw_buf_init(&out, 0);
	t->queue_used = true;
	assert_int_equal(sdk(&out, json, (const char *const[]){"send", t->queue, NULL}), 0);
	assert_int_equal(sdk(&out, json, (const char *const[]){"send", t->queue, "--base64", NULL}), 0);
	for (int i = 0; i < 2; i++) {
		struct ecw_queue_msg *m = NULL;
		struct ecw_message msg;
		size_t n = 0;

		ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, t->queue, 1, 30));
		assert_int_equal(n, 1);
		ECW_ASSERT_OK(ecw_message_decode(&msg, m[0].text, m[0].text_len));
		assert_int_equal(msg.base64, i == 1);
		assert_string_equal(msg.job, "archive-employee");
		assert_string_equal(msg.pk, "Sales");
		assert_string_equal(msg.rk, "o'brien 001");
		assert_string_equal(msg.id, "t-1");
		ecw_message_dispose(&msg);
		ECW_ASSERT_OK(ecw_queue_delete(t->client, t->queue, m[0].id, m[0].pop_receipt));
		ecw_queue_msgs_free(m, n);
	}
	ecw_buf_dispose(&out);
}

static void expect_type(const struct ecw_entity *e, const char *name, enum ecw_edm type)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);

	ITEST_CHECK(p != NULL, "property %s missing", name);
	ITEST_CHECK(p->type == type, "%s is %s, expected %s", name, ecw_entity_edm_name(p->type),
	            ecw_entity_edm_name(type));
}

/* An entity an application wrote with the SDK keeps every type through
 * ecworker's client, and a copy ecworker writes reads back in the SDK as the
 * original does. */
static void test_interop__sdk_entity_keeps_types_through_the_client(void **state)
{
	struct itest *t = *state;
	struct ecw_buf a, b;
	struct ecw_entity *e = NULL;

	ecw_buf_init(&a, 0);
	ecw_buf_init(&b, 0);
	t->table_used = true;
	assert_int_equal(
	    sdk(&a, NULL, (const char *const[]){"write-entity", t->table, "p", "original", NULL}), 0);
	ECW_ASSERT_OK(ecw_table_get(&e, t->client, t->table, "p", "original"));
	expect_type(e, "Str", ECW_EDM_STRING);
	expect_type(e, "Int", ECW_EDM_INT32);
	expect_type(e, "Big", ECW_EDM_INT64);
	assert_true(ecw_entity_get(e, "Big")->v.i64 == 9007199254740993LL);
	/* The SDK itself reads 50000.0 back as Int32 (JSON.parse drops ".0");
	 * ecworker keeps it a Double. */
	expect_type(e, "Dbl", ECW_EDM_DOUBLE);
	assert_true(ecw_entity_get(e, "Dbl")->v.d == 50000.0);
	expect_type(e, "Frac", ECW_EDM_DOUBLE);
	expect_type(e, "Flag", ECW_EDM_BOOLEAN);
	expect_type(e, "When", ECW_EDM_DATETIME);
	assert_string_equal(ecw_entity_get(e, "When")->v.s, "2026-08-19T10:00:00.1234567Z");
	expect_type(e, "Id", ECW_EDM_GUID);
	expect_type(e, "Bytes", ECW_EDM_BINARY);
	assert_int_equal(ecw_entity_get(e, "Bytes")->len, 5);
	assert_memory_equal(ecw_entity_get(e, "Bytes")->v.bin, "\x00\x01\x02\xff\x00", 5);

	ECW_ASSERT_OK(ecw_entity_set_keys(e, "p", "copy"));
	ECW_ASSERT_OK(ecw_table_write(NULL, t->client, t->table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_buf_reset(&a);
	assert_int_equal(sdk(&a, NULL, (const char *const[]){"read-entity", t->table, "p", "original", NULL}),
	                 0);
	assert_int_equal(sdk(&b, NULL, (const char *const[]){"read-entity", t->table, "p", "copy", NULL}), 0);
	/* Identical but for the row key. */
	const char *ra = strstr(a.ptr, "\"original\""), *rb = strstr(b.ptr, "\"copy\"");
	assert_non_null(ra);
	assert_non_null(rb);
	assert_int_equal(ra - a.ptr, rb - b.ptr);
	assert_memory_equal(a.ptr, b.ptr, (size_t)(ra - a.ptr));
	assert_string_equal(ra + strlen("\"original\""), rb + strlen("\"copy\""));
	ecw_entity_free(e);
	ecw_buf_dispose(&a);
	ecw_buf_dispose(&b);
}

/* An entity ecworker writes reads in the SDK with the types it was given. */
static void test_interop__client_entity_read_by_the_sdk_with_types(void **state)
{
	struct itest *t = *state;
	struct ecw_entity *e = NULL;
	struct ecw_buf out;

	ecw_buf_init(&out, 0);
	ECW_ASSERT_OK(ecw_table_create(NULL, t->client, itest_table(t)));
	ECW_ASSERT_OK(ecw_entity_new(&e, "a+b&c=d%", "o'brien 001"));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "Big", INT64_MIN));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Frac", 0.1));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "When", "2026-08-19T10:00:00.5Z"));
	ECW_ASSERT_OK(ecw_entity_set_guid(e, "Id", "c9da6455-213d-42c9-9a79-3e9149a57833"));
	ECW_ASSERT_OK(ecw_entity_set_binary(e, "Bytes", "\x00\xff", 2));
	ECW_ASSERT_OK(ecw_entity_set_bool(e, "Flag", false));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Str", "Zo\xc3\xab", 4));
	ECW_ASSERT_OK(ecw_table_write(NULL, t->client, t->table, e, ECW_WRITE_INSERT, NULL));
	assert_int_equal(
	    sdk(&out, NULL, (const char *const[]){"read-entity", t->table, "a+b&c=d%", "o'brien 001", NULL}),
	    0);
	static const char *const want[] = {
	    "\"Big\":{\"value\":\"-9223372036854775808\",\"type\":\"Int64\"}",
	    "\"Frac\":{\"value\":\"0.1\",\"type\":\"Double\"}",
	    "\"When\":{\"value\":\"2026-08-19T10:00:00.5000000Z\",\"type\":\"DateTime\"}",
	    "\"Id\":{\"value\":\"c9da6455-213d-42c9-9a79-3e9149a57833\",\"type\":\"Guid\"}",
	    "\"Bytes\":{\"value\":\"AP8=\",\"type\":\"Binary\"}",
	    "\"Flag\":{\"value\":\"false\",\"type\":\"Boolean\"}",
	    "\"Str\":{\"value\":\"Zo\xc3\xab\",\"type\":\"String\"}",
	    NULL,
	};
	for (int i = 0; want[i]; i++)
		ITEST_CHECK(strstr(out.ptr, want[i]) != NULL, "SDK read %s\n  expected to contain %s",
		            out.ptr, want[i]);
	ecw_entity_free(e);
	ecw_buf_dispose(&out);
}

/* An entity of every EDM type and edge value under hostile keys, archived to
 * a blob and restored by the move's two jobs, reads back in the SDK exactly
 * as it read before. */
static void test_interop__blob_archive_and_restore_read_back_identical_in_the_sdk(void **state)
{
	static const char *const keys[][2] = {
	    {"a+b&c=d%", "o'brien 001"}, {"Zo\xc3\xab", "%41"}, {"..", "."}, {"sp ace ", " x. "}};
	struct mbx *x = *state;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *pk = keys[i][0], *rk = keys[i][1];
		struct ecw_entity *e = mbx_every_type(pk, rk, 1);
		struct ecw_buf before, after, archived;
		char name[512];
		ecw_buf_init(&before, 0);
		ecw_buf_init(&after, 0);
		ecw_buf_init(&archived, 0);
		ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table, e, ECW_WRITE_INSERT, NULL));
		assert_int_equal(
		    sdk(&before, NULL, (const char *const[]){"read-entity", x->t->table, pk, rk, NULL}), 0);
		ECW_ASSERT_OK(mbx_run(x, x->archive, NULL, pk, rk, NULL));
		/* The archive itself, downloaded by @azure/storage-blob and parsed
		 * by the Tables SDK's own deserializer, is the entity the SDK read
		 * from the table: the blob is the Table JSON format. */
		mbx_name(name, sizeof(name), pk, rk);
		assert_int_equal(
		    sdk(&archived, NULL, (const char *const[]){"read-blob-entity", x->container, name, NULL}),
		    0);
		/* One difference, the blob's gain: the SDK reads an integral
		 * Double from the table as Int32 (the service's JSON does not
		 * annotate a Double), the blob says Edm.Double. */
		char *want_blob =
		    itest_replace(ecw_buf_cstr(&before), "\"Whole\":{\"value\":\"50000\",\"type\":\"Int32\"}",
		                  "\"Whole\":{\"value\":\"50000\",\"type\":\"Double\"}");
		ITEST_CHECK(
		    strcmp(want_blob, ecw_buf_cstr(&archived)) == 0,
		    "'%s'/'%s': the SDK read\n  %s\nfrom the table (integral Double as Double), and from the "
		    "archive's blob\n  %s",
		    pk, rk, want_blob, ecw_buf_cstr(&archived));
		free(want_blob);
		ITEST_CHECK(
		    sdk(&after, NULL, (const char *const[]){"read-entity", x->t->table, pk, rk, NULL}) != 0,
		    "'%s'/'%s' is still in the table after the archive", pk, rk);
		ecw_buf_reset(&after);
		ECW_ASSERT_OK(mbx_run(x, x->restore, NULL, pk, rk, NULL));
		assert_int_equal(
		    sdk(&after, NULL, (const char *const[]){"read-entity", x->t->table, pk, rk, NULL}), 0);
		ITEST_CHECK(strcmp(ecw_buf_cstr(&before), ecw_buf_cstr(&after)) == 0,
		            "'%s'/'%s': the SDK read\n  %s\nbefore, and after the round trip\n  %s", pk, rk,
		            ecw_buf_cstr(&before), ecw_buf_cstr(&after));
		ITEST_CHECK(strstr(ecw_buf_cstr(&after),
		                   "\"Big\":{\"value\":\"9007199254740993\",\"type\":\"Int64\"}"),
		            "the SDK read %s", ecw_buf_cstr(&after));
		ecw_buf_dispose(&before);
		ecw_buf_dispose(&after);
		ecw_buf_dispose(&archived);
		ecw_entity_free(e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_interop__sdk_message_reaches_the_client_byte_for_byte,
	                                    itest_setup, itest_teardown),
	    cmocka_unit_test_setup_teardown(test_interop__client_message_reaches_the_sdk_byte_for_byte,
	                                    itest_setup, itest_teardown),
	    cmocka_unit_test_setup_teardown(test_interop__sdk_plain_and_base64_messages_decode, itest_setup,
	                                    itest_teardown),
	    cmocka_unit_test_setup_teardown(test_interop__sdk_entity_keeps_types_through_the_client,
	                                    itest_setup, itest_teardown),
	    cmocka_unit_test_setup_teardown(test_interop__client_entity_read_by_the_sdk_with_types,
	                                    itest_setup, itest_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_interop__blob_archive_and_restore_read_back_identical_in_the_sdk, mbx_setup,
	        mbx_teardown),
	};
	return cmocka_run_group_tests_name("interop", tests, NULL, NULL);
}
