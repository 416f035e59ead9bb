/* test_tls.c - https verifies certificates. The runner starts a second
 * Azurite queue service with a self-signed certificate
 * (ECW_TEST_HTTPS_QUEUE_PORT): a default client refuses it, at once and
 * without retrying; only the test-only option accepts it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"

static char *https_connstr(void)
{
	const char *port = getenv("ECW_TEST_HTTPS_QUEUE_PORT");
	struct ecw_buf b;

	if (!port || !*port)
		fail_msg("ECW_TEST_HTTPS_QUEUE_PORT is not set: run through tests/run-tests.sh");
	ecw_buf_init(&b, 0);
	assert_int_equal(
	    ecw_buf_printf(
	        &b,
	        "AccountName=devstoreaccount1;"
	        "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
	        "QueueEndpoint=https://127.0.0.1:%s/devstoreaccount1;"
	        "TableEndpoint=https://127.0.0.1:1/devstoreaccount1",
	        port),
	    0);
	return ecw_buf_take(&b);
}

static void test_tls__self_signed_certificate_is_refused_by_default(void **state)
{
	struct itest *t = *state;
	char *cs = https_connstr();
	struct ecw_account *acct;
	struct ecw_client *c;
	struct ecw_client_stats st;
	int err;

	itest_client_for(&acct, &c, cs, NULL); /* ITEST_OPTIONS: verification on */
	err = ecw_queue_create(NULL, c, t->queue);
	assert_int_equal(err, ECW_ERROR);
	assert_false(ecw_err_is_transient(err));
	ecw_client_stats(&st, c);
	assert_int_equal(st.requests, 1);
	assert_int_equal(st.retries, 0);
	/* libcurl says why: a certificate problem. */
	ITEST_CHECK(strstr(ecw_error_last()->message, "certificate") != NULL, "message: %s",
	            ecw_error_last()->message);
	ecw_client_free(c);
	ecw_account_free(acct);
	free(cs);
}

static void test_tls__test_only_option_accepts_it(void **state)
{
	struct itest *t = *state;
	struct ecw_client_options o = ITEST_OPTIONS;
	char *cs = https_connstr();
	struct ecw_account *acct;
	struct ecw_client *c;
	struct ecw_queue_msg *msgs = NULL;
	size_t n = 0;

	o.insecure_skip_tls_verify_for_tests = true;
	itest_client_for(&acct, &c, cs, &o);
	ECW_ASSERT_OK(ecw_queue_create(NULL, c, t->queue));
	ECW_ASSERT_OK(ecw_queue_put(NULL, c, t->queue, "over tls", 8, NULL));
	ECW_ASSERT_OK(ecw_queue_receive(&msgs, &n, c, t->queue, 1, 30));
	assert_int_equal(n, 1);
	assert_string_equal(msgs[0].text, "over tls");
	ECW_ASSERT_OK(ecw_queue_delete_queue(c, t->queue));
	ecw_queue_msgs_free(msgs, n);
	ecw_client_free(c);
	ecw_account_free(acct);
	free(cs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_tls__self_signed_certificate_is_refused_by_default,
	                                    itest_setup, itest_teardown),
	    cmocka_unit_test_setup_teardown(test_tls__test_only_option_accepts_it, itest_setup,
	                                    itest_teardown),
	};
	return cmocka_run_group_tests_name("tls", tests, NULL, NULL);
}
