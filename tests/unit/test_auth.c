/* SPDX-License-Identifier: MIT */
/* test_auth.c - Shared Key string-to-sign layouts (queue and table, checked
 * against the known answers in AZURE-NOTES.md), HMAC and base64, and SAS
 * accounts, which put the token in the URL and send no Authorization. */
#include "support.h"
#include "ecw_codec.h"

#include <stdlib.h>
#include <string.h>

#define QUEUE_DATE "Wed, 19 Aug 2026 10:00:00 GMT"
#define TABLE_DATE "Tue, 26 Mar 2024 08:12:52 GMT"

#define QUEUE_STS                                                                                            \
	"POST\n\n\n64\n\napplication/xml\n\n\n\n\n\n\nx-ms-date:" QUEUE_DATE                                 \
	"\nx-ms-version:2021-12-02\n/devstoreaccount1/devstoreaccount1/jobs/messages\n"                      \
	"messagettl:-1\nvisibilitytimeout:0"
#define QUEUE_SIG "oPPfGgWDKd7DtEuels7bySyPKJPhOGa1kxYI7yAzOKo="

#define TABLE_STS "GET\n\n\n" TABLE_DATE "\n/devstoreaccount1/devstoreaccount1/TestHubNameInstances"
#define TABLE_SIG "J47njd5k0R/5/ACiZVzb+czpFCADm+t6VJNJUD6i/Ts="

static struct ecw_account *dev;
static char body64[65];

static int group_setup(void **state)
{
	(void)state;
	memset(body64, 'x', 64);
	body64[64] = '\0';
	return ecw_account_parse(&dev, "UseDevelopmentStorage=true");
}

static int group_teardown(void **state)
{
	(void)state;
	ecw_account_free(dev);
	return 0;
}

static void add_query(struct ecw_request *r, const char *name, const char *value)
{
	assert_int_equal(ecw_request_add_query(r, name, value), 0);
}

static void set_header(struct ecw_request *r, const char *name, const char *value)
{
	assert_int_equal(ecw_request_set_header(r, name, value), 0);
}

static void set_path(struct ecw_request *r, const char *path)
{
	assert_int_equal(ecw_buf_adds(&r->path, path), 0);
}

/* The request behind the queue known answer: a put with a 64-byte body. */
static void queue_vector_request(struct ecw_request *r)
{
	ecw_request_init(r, ECW_SVC_QUEUE, "POST");
	set_path(r, "/jobs/messages");
	add_query(r, "messagettl", "-1");
	add_query(r, "visibilitytimeout", "0");
	set_header(r, "x-ms-date", QUEUE_DATE);
	set_header(r, "x-ms-version", "2021-12-02");
	r->content_type = "application/xml";
	r->body = body64;
	r->body_len = 64;
}

static void assert_sts(const struct ecw_request *r, const char *want)
{
	struct ecw_buf b;
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_auth_string_to_sign(&b, dev, r), 0);
	assert_int_equal(b.len, strlen(want));
	assert_string_equal(ecw_buf_cstr(&b), want);
	ecw_buf_dispose(&b);
}

static void assert_auth(const struct ecw_request *r, const char *sig)
{
	struct ecw_buf b, want;
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	ecw_buf_init(&want, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_buf_printf(&want, "SharedKey devstoreaccount1:%s", sig), 0);
	assert_int_equal(ecw_auth_header(&b, dev, r), 0);
	assert_string_equal(ecw_buf_cstr(&b), ecw_buf_cstr(&want));
	ecw_buf_dispose(&b);
	ecw_buf_dispose(&want);
}

static void test_auth__queue_known_answer(void **state)
{
	(void)state;
	struct ecw_request r;
	queue_vector_request(&r);
	assert_sts(&r, QUEUE_STS);
	assert_auth(&r, QUEUE_SIG);
	ecw_request_dispose(&r);
}

static void test_auth__queue_known_answer_query_order(void **state)
{
	(void)state;
	/* Parameters added in the other order sign the same. */
	struct ecw_request r;
	ecw_request_init(&r, ECW_SVC_QUEUE, "POST");
	set_path(&r, "/jobs/messages");
	add_query(&r, "visibilitytimeout", "0");
	add_query(&r, "messagettl", "-1");
	set_header(&r, "x-ms-version", "2021-12-02");
	set_header(&r, "x-ms-date", QUEUE_DATE);
	r.content_type = "application/xml";
	r.body = body64;
	r.body_len = 64;
	assert_sts(&r, QUEUE_STS);
	assert_auth(&r, QUEUE_SIG);
	ecw_request_dispose(&r);
}

static void test_auth__table_known_answer(void **state)
{
	(void)state;
	struct ecw_request r;
	ecw_request_init(&r, ECW_SVC_TABLE, "GET");
	set_path(&r, "/TestHubNameInstances");
	set_header(&r, "x-ms-date", TABLE_DATE);
	set_header(&r, "x-ms-version", "2019-02-02");
	set_header(&r, "Accept", "application/json;odata=minimalmetadata");
	set_header(&r, "DataServiceVersion", "3.0;");
	assert_sts(&r, TABLE_STS);
	assert_auth(&r, TABLE_SIG);
	ecw_request_dispose(&r);
}

static void test_auth__table_signs_comp_only(void **state)
{
	(void)state;
	struct ecw_request r;
	ecw_request_init(&r, ECW_SVC_TABLE, "GET");
	set_path(&r, "/jobs()");
	add_query(&r, "$filter", "PartitionKey eq 'p'");
	add_query(&r, "NextPartitionKey", "1!8!cA--");
	add_query(&r, "comp", "acl");
	add_query(&r, "$top", "10");
	set_header(&r, "x-ms-date", TABLE_DATE);
	set_header(&r, "x-ms-version", "2019-02-02");
	set_header(&r, "x-ms-client-request-id", "abc");
	assert_sts(&r, "GET\n\n\n" TABLE_DATE "\n/devstoreaccount1/devstoreaccount1/jobs()?comp=acl");
	ecw_request_dispose(&r);

	/* No comp: the query is not signed at all. A write signs its Content-Type. */
	ecw_request_init(&r, ECW_SVC_TABLE, "PUT");
	set_path(&r, "/jobs(PartitionKey='p',RowKey='o''brien%20001')");
	add_query(&r, "timeout", "30");
	set_header(&r, "x-ms-date", TABLE_DATE);
	set_header(&r, "x-ms-version", "2019-02-02");
	set_header(&r, "If-Match", "*");
	r.content_type = "application/json";
	r.body = "{}";
	r.body_len = 2;
	assert_sts(&r, "PUT\n\napplication/json\n" TABLE_DATE
	               "\n/devstoreaccount1/devstoreaccount1/jobs(PartitionKey='p',RowKey='o''brien%20001')");
	ecw_request_dispose(&r);
}

static void test_auth__queue_query_sorted_lowercased_decoded(void **state)
{
	(void)state;
	struct ecw_request r;
	ecw_request_init(&r, ECW_SVC_QUEUE, "PUT");
	set_path(&r, "/jobs/messages/abc");
	add_query(&r, "VisibilityTimeout", "30");
	add_query(&r, "popreceipt", "AgAAAA+/==");
	add_query(&r, "NumOfMessages", "5");
	set_header(&r, "x-ms-version", "2021-12-02");
	set_header(&r, "X-Ms-Client-Request-Id", "req-1");
	set_header(&r, "x-ms-date", QUEUE_DATE);
	set_header(&r, "Accept", "application/xml");
	/* Bodyless: Content-Length is empty, not "0"; no Content-Type. */
	assert_sts(&r, "PUT\n\n\n\n\n\n\n\n\n\n\n\n"
	               "x-ms-client-request-id:req-1\nx-ms-date:" QUEUE_DATE "\nx-ms-version:2021-12-02\n"
	               "/devstoreaccount1/devstoreaccount1/jobs/messages/abc\n"
	               "numofmessages:5\npopreceipt:AgAAAA+/==\nvisibilitytimeout:30");

	/* Signed decoded, sent encoded. */
	struct ecw_buf url;
	ecw_buf_init(&url, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_request_url(&url, dev, &r), 0);
	const char *u = ecw_buf_cstr(&url);
	assert_true(str_starts(u, "http://127.0.0.1:10001/devstoreaccount1/jobs/messages/abc?"));
	assert_true(url_has_param(u, "popreceipt=AgAAAA%2B%2F%3D%3D"));
	assert_int_equal(url_nparams(u), 3);
	ecw_buf_dispose(&url);
	ecw_request_dispose(&r);
}

static void test_auth__queue_content_length_empty_when_zero(void **state)
{
	(void)state;
	struct ecw_request r;
	ecw_request_init(&r, ECW_SVC_QUEUE, "DELETE");
	set_path(&r, "/jobs/messages");
	set_header(&r, "x-ms-date", QUEUE_DATE);
	set_header(&r, "x-ms-version", "2021-12-02");
	r.body = "";
	r.body_len = 0;
	assert_sts(&r, "DELETE\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:" QUEUE_DATE
	               "\nx-ms-version:2021-12-02\n/devstoreaccount1/devstoreaccount1/jobs/messages");
	ecw_request_dispose(&r);
}

static void test_auth__request_url(void **state)
{
	(void)state;
	struct ecw_request r;
	struct ecw_buf url;
	ecw_buf_init(&url, ECW_BUF_DEFAULT_MAX);
	ecw_request_init(&r, ECW_SVC_TABLE, "GET");
	set_path(&r, "/jobs()");
	add_query(&r, "$filter", "PartitionKey eq 'a+b&c'");
	add_query(&r, "NextRowKey", "1!8!cg==");
	assert_int_equal(ecw_request_url(&url, dev, &r), 0);
	const char *u = ecw_buf_cstr(&url);
	assert_true(str_starts(u, "http://127.0.0.1:10002/devstoreaccount1/jobs()?"));
	assert_true(str_contains(u, "=PartitionKey%20eq%20'a%2Bb%26c'"));
	assert_true(url_has_param(u, "NextRowKey=1!8!cg%3D%3D"));
	assert_int_equal(url_nparams(u), 2);
	ecw_buf_dispose(&url);
	ecw_request_dispose(&r);

	/* No query: no '?'. */
	ecw_buf_init(&url, ECW_BUF_DEFAULT_MAX);
	ecw_request_init(&r, ECW_SVC_QUEUE, "PUT");
	set_path(&r, "/jobs");
	assert_int_equal(ecw_request_url(&url, dev, &r), 0);
	assert_string_equal(ecw_buf_cstr(&url), "http://127.0.0.1:10001/devstoreaccount1/jobs");
	ecw_buf_dispose(&url);
	ecw_request_dispose(&r);
}

static void test_auth__request_headers_replace_case_insensitive(void **state)
{
	(void)state;
	struct ecw_request r;
	ecw_request_init(&r, ECW_SVC_QUEUE, "GET");
	set_header(&r, "x-ms-version", "2000-01-01");
	set_header(&r, "X-MS-VERSION", "2021-12-02");
	assert_int_equal(r.nheaders, 1);
	assert_str(ecw_request_header(&r, "x-ms-Version"), "2021-12-02");
	assert_null(ecw_request_header(&r, "If-Match"));
	ecw_request_dispose(&r);
}

static void test_auth__hmac_sha256(void **state)
{
	(void)state;
	struct ecw_buf b;
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	/* RFC 4231 test case 2. */
	static const char msg[] = "what do ya want for nothing?";
	assert_int_equal(
	    ecw_auth_hmac_sha256_base64(&b, (const unsigned char *)"Jefe", 4, msg, sizeof(msg) - 1), 0);
	assert_string_equal(ecw_buf_cstr(&b), "W9zBRr9gdU5qBCQmCJV1x1oAPwidJzmDnexYuWTsOEM=");
	ecw_buf_dispose(&b);

	/* The queue vector, straight through the HMAC with the decoded dev key. */
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(
	    ecw_auth_hmac_sha256_base64(&b, dev->key, dev->key_len, QUEUE_STS, strlen(QUEUE_STS)), 0);
	assert_string_equal(ecw_buf_cstr(&b), QUEUE_SIG);
	ecw_buf_dispose(&b);
}

static void b64_is(const void *p, size_t n, const char *want)
{
	struct ecw_buf b;
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_base64_encode(&b, p, n), 0);
	assert_string_equal(ecw_buf_cstr(&b), want);
	ecw_buf_dispose(&b);

	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_base64_decode(&b, want, strlen(want)), 0);
	assert_int_equal(b.len, n);
	if (n)
		assert_memory_equal(b.ptr, p, n);
	ecw_buf_dispose(&b);
}

static void test_auth__base64_vectors(void **state)
{
	(void)state;
	/* RFC 4648 section 10. */
	b64_is("", 0, "");
	b64_is("f", 1, "Zg==");
	b64_is("fo", 2, "Zm8=");
	b64_is("foo", 3, "Zm9v");
	b64_is("foob", 4, "Zm9vYg==");
	b64_is("fooba", 5, "Zm9vYmE=");
	b64_is("foobar", 6, "Zm9vYmFy");
	static const unsigned char bin[] = {0x00, 0x01, 0x00, 0xff, 0xfb, 0xef};
	b64_is(bin, sizeof(bin), "AAEA//vv");
}

static void test_auth__base64_round_trip_all_bytes(void **state)
{
	(void)state;
	unsigned char all[256];
	for (size_t i = 0; i < sizeof(all); i++)
		all[i] = (unsigned char)i;
	for (size_t n = 0; n <= sizeof(all); n += 1) {
		struct ecw_buf enc, dec;
		ecw_buf_init(&enc, ECW_BUF_DEFAULT_MAX);
		ecw_buf_init(&dec, ECW_BUF_DEFAULT_MAX);
		assert_int_equal(ecw_base64_encode(&enc, all + (256 - n), n), 0);
		assert_int_equal(enc.len, (n + 2) / 3 * 4);
		assert_int_equal(ecw_base64_decode(&dec, enc.ptr ? enc.ptr : "", enc.len), 0);
		assert_int_equal(dec.len, n);
		if (n)
			assert_memory_equal(dec.ptr, all + (256 - n), n);
		ecw_buf_dispose(&enc);
		ecw_buf_dispose(&dec);
	}
}

static void test_auth__base64_decode_strict(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "Zg",       /* missing padding */
	    "Zg=",      /* short padding */
	    "Zm9vY",    /* length 5 */
	    "Zm8==",    /* padding too long */
	    "Z!==",     /* bad character */
	    "Zm9v\n",   /* whitespace */
	    "Zm 9v",    /* whitespace inside */
	    "=Zm9",     /* padding first */
	    "Zg==Zg==", /* data after padding */
	    "Z===",     /* three pad characters */
	    "Zm9v-_==", /* base64url alphabet */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ecw_buf b;
		ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
		int err = ecw_base64_decode(&b, bad[i], strlen(bad[i]));
		if (err != ECW_EINVALID)
			fail_msg("ecw_base64_decode(\"%s\") = %d, want ECW_EINVALID", bad[i], err);
		ecw_buf_dispose(&b);
	}
	/* Only n bytes are read. */
	struct ecw_buf b;
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_base64_decode(&b, "Zm9vZZZ", 4), 0);
	assert_int_equal(b.len, 3);
	assert_memory_equal(b.ptr, "foo", 3);
	ecw_buf_dispose(&b);
}

#define SAS_CS                                                                                               \
	"QueueEndpoint=https://acct.queue.core.windows.net/;"                                                \
	"TableEndpoint=https://acct.table.core.windows.net;"                                                 \
	"SharedAccessSignature=?sv=2021-12-02&ss=qt&sig=abc%2Bdef%3D"

static void test_auth__sas_url(void **state)
{
	(void)state;
	struct ecw_account *sas = NULL;
	assert_int_equal(ecw_account_parse(&sas, SAS_CS), 0);
	struct ecw_request r;
	struct ecw_buf url;

	ecw_buf_init(&url, ECW_BUF_DEFAULT_MAX);
	ecw_request_init(&r, ECW_SVC_QUEUE, "GET");
	set_path(&r, "/jobs/messages");
	add_query(&r, "numofmessages", "1");
	assert_int_equal(ecw_request_url(&url, sas, &r), 0);
	assert_string_equal(ecw_buf_cstr(&url), "https://acct.queue.core.windows.net/jobs/messages"
	                                        "?numofmessages=1&sv=2021-12-02&ss=qt&sig=abc%2Bdef%3D");
	ecw_buf_dispose(&url);
	ecw_request_dispose(&r);

	ecw_buf_init(&url, ECW_BUF_DEFAULT_MAX);
	ecw_request_init(&r, ECW_SVC_TABLE, "GET");
	set_path(&r, "/jobs(PartitionKey='p',RowKey='r')");
	assert_int_equal(ecw_request_url(&url, sas, &r), 0);
	assert_string_equal(ecw_buf_cstr(&url),
	                    "https://acct.table.core.windows.net"
	                    "/jobs(PartitionKey='p',RowKey='r')?sv=2021-12-02&ss=qt&sig=abc%2Bdef%3D");
	ecw_buf_dispose(&url);
	ecw_request_dispose(&r);
	ecw_account_free(sas);
}

static void test_auth__sas_sends_no_authorization(void **state)
{
	(void)state;
	struct client_fixture *fx;
	client_fixture_setup(&fx, SAS_CS, NULL);
	fake_respond(&fx->fake, 200, "x-ms-approximate-messages-count: 7\nx-ms-request-id: r1\n", NULL);
	long long n = -1;
	assert_int_equal(ecw_queue_count(&n, fx->c, "jobs"), 0);
	assert_int_equal(n, 7);
	assert_int_equal(fx->fake.nreqs, 1);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_null(fake_header(q, "Authorization"));
	assert_non_null(fake_header(q, "x-ms-date"));
	assert_true(str_starts(q->url, "https://acct.queue.core.windows.net/jobs?"));
	assert_true(url_has_param(q->url, "comp=metadata"));
	assert_true(url_has_param(q->url, "sig=abc%2Bdef%3D"));
	assert_true(url_has_param(q->url, "sv=2021-12-02"));
	client_fixture_teardown(fx);
}

static void test_auth__shared_key_client_signs(void **state)
{
	(void)state;
	struct client_fixture *fx;
	client_fixture_setup(&fx, "UseDevelopmentStorage=true", NULL);
	fake_respond(&fx->fake, 200, "x-ms-approximate-messages-count: 3\n", NULL);
	long long n = -1;
	assert_int_equal(ecw_queue_count(&n, fx->c, "jobs"), 0);
	assert_int_equal(n, 3);
	assert_int_equal(fx->fake.nreqs, 1);
	const struct fake_request *q = &fx->fake.reqs[0];
	const char *auth = fake_header(q, "Authorization");
	assert_non_null(auth);
	assert_true(str_starts(auth, "SharedKey devstoreaccount1:"));
	assert_true(q->auth_ok);
	assert_int_equal(fake_header_count(q, "Authorization"), 1);
	assert_int_equal(fake_header_count(q, "x-ms-date"), 1);
	assert_null(fake_header(q, "Date"));
	client_fixture_teardown(fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_auth__queue_known_answer),
	    cmocka_unit_test(test_auth__queue_known_answer_query_order),
	    cmocka_unit_test(test_auth__table_known_answer),
	    cmocka_unit_test(test_auth__table_signs_comp_only),
	    cmocka_unit_test(test_auth__queue_query_sorted_lowercased_decoded),
	    cmocka_unit_test(test_auth__queue_content_length_empty_when_zero),
	    cmocka_unit_test(test_auth__request_url),
	    cmocka_unit_test(test_auth__request_headers_replace_case_insensitive),
	    cmocka_unit_test(test_auth__hmac_sha256),
	    cmocka_unit_test(test_auth__base64_vectors),
	    cmocka_unit_test(test_auth__base64_round_trip_all_bytes),
	    cmocka_unit_test(test_auth__base64_decode_strict),
	    cmocka_unit_test(test_auth__sas_url),
	    cmocka_unit_test(test_auth__sas_sends_no_authorization),
	    cmocka_unit_test(test_auth__shared_key_client_signs),
	};
	return cmocka_run_group_tests_name("auth", tests, group_setup, group_teardown);
}
