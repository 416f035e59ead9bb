/* SPDX-License-Identifier: MIT */
/* test_blob_ref.c - the blob-ref job type's pure parts (jobs/blob_ref.c): the
 * prefix rule check-config applies (what it refuses and why: nothing outside
 * an entity's prefix may ever be deleted), a prefix rendered for hostile keys
 * and refused for keys the service would not take as a path, its inversion
 * (the audit's) round-tripping, what a property's value names (a name, this
 * container's URL percent-decoded; another account's or container's URL,
 * nothing), a blob's age on the service's clock at the grace's edge, and the
 * job's settings and their errors at line:col. */
#include "config_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob_ref_private.h"
#include "ecw_job.h"

static struct ecw_template *compile(const char *text)
{
	struct ecw_template *t = NULL;

	if (ecw_template_compile(&t, text, "prefix") != 0)
		fail_msg("'%s' did not compile: %s", text, ecw_error_last()->message);
	return t;
}

static void refused(const char *text, const char *needle)
{
	struct ecw_template *t = compile(text);

	if (ecw_blob_ref_prefix_check(t) != ECW_EINVALID)
		fail_msg("prefix '%s' was accepted", text);
	if (!strstr(ecw_error_last()->message, needle))
		fail_msg("prefix '%s': '%s' does not say '%s'", text, ecw_error_last()->message, needle);
	ecw_template_free(t);
}

static void accepted(const char *text)
{
	struct ecw_template *t = compile(text);

	if (ecw_blob_ref_prefix_check(t) != 0)
		fail_msg("prefix '%s' was refused: %s", text, ecw_error_last()->message);
	ecw_template_free(t);
}

static void test_blob_ref__prefix_rule(void **state)
{
	(void)state;
	accepted("{PartitionKey}/{RowKey}/");
	accepted("{RowKey}/{PartitionKey}/");
	accepted("files/{PartitionKey}/{RowKey}/");
	accepted("p-{PartitionKey}-x/{RowKey}/docs/");
	/* No '/' at the end: "a/b" would be the start of "a/bc"'s blobs. */
	refused("{PartitionKey}/{RowKey}", "end in a literal '/'");
	refused("{PartitionKey}/{RowKey}/x", "end in a literal '/'");
	/* No '/' between the keys: ("a", "bc") and ("ab", "c") share "abc/". */
	refused("{PartitionKey}{RowKey}/", "separated by a literal '/'");
	refused("{PartitionKey}-{RowKey}/", "separated by a literal '/'");
	/* One key alone: two entities would share a prefix. */
	refused("{PartitionKey}/", "both {PartitionKey} and {RowKey}");
	refused("files/{RowKey}/", "both {PartitionKey} and {RowKey}");
	/* Only the keys, plain: a property may hold '/' or be gone with the
	 * entity, a format is not one to one (padding, hash4). */
	refused("{PartitionKey}/{RowKey}/{Name}/", "only {PartitionKey} and {RowKey}");
	refused("{PartitionKey}/{RowKey:0>8}/", "without a format");
	refused("{PartitionKey:hash4}/{PartitionKey}/{RowKey}/", "without a format");
	refused("{PartitionKey}/{RowKey}/{RowKey}/", "used twice");
	/* Literal text that is no path of a blob name. */
	refused("/{PartitionKey}/{RowKey}/", "no valid blob name");
	refused("{PartitionKey}//{RowKey}/", "no valid blob name");
	refused("{PartitionKey}./{RowKey}/", "no valid blob name");
	refused("x\\{PartitionKey}/{RowKey}/", "no valid blob name");
}

static void test_blob_ref__prefix_render_and_invert(void **state)
{
	/* Keys may hold anything but / \ # ? and controls. */
	static const char *const keys[][2] = {
	    /* UTF-8 written as escapes: clang-format 14 and 19 count the
	     * columns of multibyte text differently. */
	    {"Sales", "00042"},  {"a b%20c", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"},
	    {"x.y", "'quoted'"}, {"..a", "b"},
	    {"{x}", "}{"},       {"-", "%"},
	};
	struct ecw_template *t = compile("emp/{PartitionKey}-p/{RowKey}/");
	struct ecw_buf out;
	char pk[ECW_KEY_MAX + 1], rk[ECW_KEY_MAX + 1], name[512];

	(void)state;
	ecw_buf_init(&out, 4096);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (ecw_blob_ref_prefix_render(&out, t, keys[i][0], keys[i][1]) != 0)
			fail_msg("keys %zu: %s", i, ecw_error_last()->message);
		snprintf(name, sizeof(name), "emp/%s-p/%s/", keys[i][0], keys[i][1]);
		assert_string_equal(ecw_buf_cstr(&out), name);
		/* A blob under it inverts to its keys, whatever follows. */
		snprintf(name, sizeof(name), "%sphoto/v2.jpg", ecw_buf_cstr(&out));
		assert_true(ecw_blob_ref_prefix_invert(pk, rk, sizeof(pk), t, name));
		assert_string_equal(pk, keys[i][0]);
		assert_string_equal(rk, keys[i][1]);
	}
	/* A key ending in the literal after it is cut at the last one. */
	assert_true(ecw_blob_ref_prefix_invert(pk, rk, sizeof(pk), t, "emp/a-p-p/b/c"));
	assert_string_equal(pk, "a-p");
	assert_string_equal(rk, "b");
	/* Names no keys' prefix starts. */
	assert_false(ecw_blob_ref_prefix_invert(pk, rk, sizeof(pk), t, "other/a-p/b/c"));
	assert_false(ecw_blob_ref_prefix_invert(pk, rk, sizeof(pk), t, "emp/a/b/c"));
	assert_false(ecw_blob_ref_prefix_invert(pk, rk, sizeof(pk), t, "emp/a-p/b"));
	assert_false(ecw_blob_ref_prefix_invert(pk, rk, 2, t, "emp/ab-p/b/c")); /* does not fit */
	/* Keys the service would not take as a path: a permanent error that
	 * names them. */
	struct ecw_template *plain = compile("{PartitionKey}/{RowKey}/");
	assert_int_equal(ecw_blob_ref_prefix_render(&out, plain, "", "r"), ECW_EINVALID); /* "/r/" */
	assert_int_equal(ecw_blob_ref_prefix_render(&out, plain, "p", ""), ECW_EINVALID); /* "p//" */
	ecw_template_free(plain);
	assert_int_equal(ecw_blob_ref_prefix_render(&out, t, "", "r"), 0); /* "emp/-p/r/": fine */
	assert_int_equal(ecw_blob_ref_prefix_render(&out, t, "a", "dot."), ECW_EINVALID);
	assert_non_null(strstr(ecw_error_last()->message, "'dot.'"));
	assert_int_equal(ecw_blob_ref_prefix_render(&out, t, "a", ".."), ECW_EINVALID);
	ecw_buf_dispose(&out);
	ecw_template_free(t);
}

static void names(const char *value, const char *want)
{
	struct ecw_buf out;
	int rc;

	ecw_buf_init(&out, ECW_BLOB_REF_VALUE_MAX);
	rc = ecw_blob_ref_name_of(&out, value, strlen(value), "http://127.0.0.1:10000/devstoreaccount1",
	                          "employee-files");
	if (want && (rc != 1 || strcmp(ecw_buf_cstr(&out), want) != 0))
		fail_msg("'%s' named '%s' (rc %d), expected '%s'", value, ecw_buf_cstr(&out), rc, want);
	if (!want && rc != 0)
		fail_msg("'%s' named '%s', expected nothing", value, ecw_buf_cstr(&out));
	ecw_buf_dispose(&out);
}

static void test_blob_ref__what_a_value_names(void **state)
{
	(void)state;
	names("Sales/1/photo.jpg", "Sales/1/photo.jpg");
	names("Sales/1/a%20b.jpg", "Sales/1/a%20b.jpg"); /* a name is taken as it is */
	names("http://127.0.0.1:10000/devstoreaccount1/employee-files/Sales/1/photo.jpg",
	      "Sales/1/photo.jpg");
	names("HTTP://127.0.0.1:10000/DevStoreAccount1/employee-files/Sales/1/a%20b%2Fc%C3%A9.jpg",
	      "Sales/1/a b/cé.jpg");
	names("http://127.0.0.1:10000/devstoreaccount1/employee-files/Sales/1/p.jpg?sv=2021&sig=x#f",
	      "Sales/1/p.jpg");
	/* Nothing: empty, another container or account, the container itself,
	 * a bad escape, a NUL, too long. */
	names("", NULL);
	names("http://127.0.0.1:10000/devstoreaccount1/employee-filesx/Sales/1/p.jpg", NULL);
	names("http://127.0.0.1:10000/devstoreaccount1/Employee-files/Sales/1/p.jpg", NULL);
	names("https://other.blob.core.windows.net/employee-files/Sales/1/p.jpg", NULL);
	names("http://127.0.0.1:10000/devstoreaccount2/employee-files/Sales/1/p.jpg", NULL);
	names("http://127.0.0.1:10000/devstoreaccount1/employee-files/", NULL);
	names("http://127.0.0.1:10000/devstoreaccount1/employee-files/a%2", NULL);
	names("http://127.0.0.1:10000/devstoreaccount1/employee-files/a%zz", NULL);
	names("http://127.0.0.1:10000/devstoreaccount1/employee-files/a%00b", NULL);
	char *big = malloc(ECW_BLOB_REF_VALUE_MAX + 2);
	assert_non_null(big);
	memset(big, 'a', ECW_BLOB_REF_VALUE_MAX + 1);
	big[ECW_BLOB_REF_VALUE_MAX + 1] = '\0';
	names(big, NULL);
	free(big);
}

static void test_blob_ref__age_on_the_service_clock(void **state)
{
	(void)state;
	/* Whole seconds on both sides: 10 s apart may be 9.01 s in fact, so
	 * a 10 s grace is past only at 11. */
	assert_int_equal(ecw_blob_ref_wait_s(1000, 1000, 10), 11);
	assert_int_equal(ecw_blob_ref_wait_s(1010, 1000, 10), 1);
	assert_int_equal(ecw_blob_ref_wait_s(1011, 1000, 10), 0);
	assert_int_equal(ecw_blob_ref_wait_s(5000, 1000, 10), 0);
	/* Modified "after" the date, or no date: it waits all of the grace. */
	assert_int_equal(ecw_blob_ref_wait_s(1000, 1005, 10), 11);
	assert_int_equal(ecw_blob_ref_wait_s(0, 1000, 10), 11);
}

/* ---- settings ---------------------------------------------------------------- */

#define JOB_OK                                                                                               \
	"    type: blob-ref\n    source: Employees\n    container: employee-files\n"                         \
	"    prefix: \"{PartitionKey}/{RowKey}/\"\n    properties: [Photo, Resume]\n    grace: 10m\n"

/* The job's settings under jobs.employee-files, as config_text.h parses
 * a whole file (so positions count from line 3, column 5). */
static void job_error(const char *job_yaml, const char *pos, const char *needle)
{
	char text[2048];

	snprintf(text, sizeof(text), "jobs:\n  employee-files:\n%s", job_yaml);
	one_error(text, pos, needle);
}

static void test_blob_ref__config(void **state)
{
	struct ecw_config *cfg;
	const struct ecw_job_def *def;

	(void)state;
	cfg = parse_ok("jobs:\n  employee-files:\n" JOB_OK);
	def = ecw_config_job(cfg, "employee-files");
	assert_non_null(def);
	assert_string_equal(def->type->name, "blob-ref");
	assert_string_equal(def->type->source_table(def->settings), "Employees");
	assert_null(def->type->prepare); /* never creates the container */
	assert_non_null(def->type->audit);
	assert_int_equal(((const struct blob_ref *)def->settings)->grace_s, 600);
	ecw_config_free(cfg);

	job_error("    type: blob-ref\n    source: Employees\n    container: employee-files\n"
	          "    prefix: \"{PartitionKey}/{RowKey}\"\n    properties: [Photo]\n    grace: 10m\n",
	          "6:13", "end in a literal '/'");
	job_error("    type: blob-ref\n    source: Employees\n    container: Employee_Files\n"
	          "    prefix: \"{PartitionKey}/{RowKey}/\"\n    properties: [Photo]\n    grace: 10m\n",
	          "5:16", "invalid container name");
	job_error("    type: blob-ref\n    source: Employees\n    container: employee-files\n"
	          "    prefix: \"{PartitionKey}/{RowKey}/\"\n    properties: []\n    grace: 10m\n",
	          "7:17", "properties");
	job_error(
	    "    type: blob-ref\n    source: Employees\n    container: employee-files\n"
	    "    prefix: \"{PartitionKey}/{RowKey}/\"\n    properties: [Photo, RowKey]\n    grace: 10m\n",
	    "7:17", "not a key");
	job_error(
	    "    type: blob-ref\n    source: Employees\n    container: employee-files\n"
	    "    prefix: \"{PartitionKey}/{RowKey}/\"\n    properties: [Photo, Photo]\n    grace: 10m\n",
	    "7:17", "twice");
	job_error("    type: blob-ref\n    source: Employees\n    container: employee-files\n"
	          "    prefix: \"{PartitionKey}/{RowKey}/\"\n    properties: [Photo]\n",
	          "3:5", "grace");
	job_error("    type: blob-ref\n    source: Employees\n    container: employee-files\n"
	          "    prefix: \"{PartitionKey}/{RowKey}/\"\n    properties: [Photo]\n    grace: 1500ms\n",
	          "8:12", "whole number of seconds");
	job_error("    type: blob-ref\n    source: Employees\n    container: employee-files\n"
	          "    prefix: \"{PartitionKey}/{RowKey}/\"\n    properties: [Photo]\n    grace: 10m\n"
	          "    create: true\n",
	          "9:5", "create");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_blob_ref__prefix_rule),
	    cmocka_unit_test(test_blob_ref__prefix_render_and_invert),
	    cmocka_unit_test(test_blob_ref__what_a_value_names),
	    cmocka_unit_test(test_blob_ref__age_on_the_service_clock),
	    cmocka_unit_test(test_blob_ref__config),
	};
	return cmocka_run_group_tests_name("blob_ref", tests, NULL, NULL);
}
