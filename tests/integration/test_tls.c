/* SPDX-License-Identifier: MIT */
/* test_tls.c - https verifies certificates. The runner starts a second
 * Azurite queue service with a self-signed certificate
 * (ECW_TEST_HTTPS_QUEUE_PORT): a default client refuses it, at once and
 * without retrying; only the test-only option accepts it. A ca_file adds to
 * the system's CAs rather than replacing them, on both transports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "proc.h"

/* A CA certificate of no server here (EC P-256, its key thrown away). */
#define OTHER_CA_PEM                                                                                         \
	"-----BEGIN CERTIFICATE-----\n"                                                                      \
	"MIIBjjCCATWgAwIBAgIUHXtkwPo1Ec9z45k3j2fPTNihTRgwCgYIKoZIzj0EAwIw\n"                                 \
	"HDEaMBgGA1UEAwwRZWN3IHRlc3Qgb3RoZXIgQ0EwIBcNMjYxMTI1MjI0MTI4WhgP\n"                                 \
	"MjEyNjExMDEyMjQxMjhaMBwxGjAYBgNVBAMMEWVjdyB0ZXN0IG90aGVyIENBMFkw\n"                                 \
	"EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEVw3fefKqThBexv4L/TWSKvdrGVGgOeH\n"                                 \
	"nPD2Qet7OtmauvNJLHzYVb9koTQJJcTyyQmowXEBx5nPzHF0A7VhtqNTMFEwHQYD\n"                                 \
	"VR0OBBYEFMytjCCAtG41/Lr57SSeHrCr3auGMB8GA1UdIwQYMBaAFMytjCCAtG41\n"                                 \
	"/Lr57SSeHrCr3auGMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIg\n"                                 \
	"DV+HHMDqxKkgz44niilGGp6koFaSk6bJeh/VaXY+CdUCICc3EanlQEtp/0ONaH/b\n"                                 \
	"0MiBj+2trVD1Dqy2b7qQUuNY\n"                                                                         \
	"-----END CERTIFICATE-----\n"

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
	assert_false(ecw_error_is_transient(err));
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

/* Pipelined deletes over TLS: the requests go in one TLS write and the
 * answers, however they fall into records, are each read whole. */
static void test_tls__pipelined_deletes(void **state)
{
	struct itest *t = *state;
	struct ecw_client_options o = ITEST_OPTIONS;
	char *cs = https_connstr();
	struct ecw_account *acct;
	struct ecw_client *c;

	o.insecure_skip_tls_verify_for_tests = true;
	itest_client_for(&acct, &c, cs, &o);
	itest_check_delete_many(c, t->queue);
	ECW_ASSERT_OK(ecw_queue_delete_queue(c, t->queue));
	ecw_client_free(c);
	ecw_account_free(acct);
	free(cs);
}

/* The system store is what OpenSSL's SSL_CERT_FILE names: here Azurite's certificate. A ca_file of other
 * CAs must not hide it, through http.c and through libcurl (a proxy variable makes the client use it;
 * no_proxy keeps the request off the proxy). */
static void test_tls__ca_file_adds_to_the_system_store(void **state)
{
	struct itest *t = *state;
	struct ecw_client_options o = ITEST_OPTIONS;
	const char *azurite_ca = getenv("ECW_TEST_CA_FILE");
	char *cs = https_connstr(), other_ca[640];
	struct ecw_account *acct;
	struct ecw_client *c;

	if (!azurite_ca || !*azurite_ca)
		fail_msg("ECW_TEST_CA_FILE is not set: run through tests/run-tests.sh");
	/* Another CA: a certificate of its own (this one trusts nothing Azurite shows). */
	proc_write_file(other_ca, sizeof(other_ca), "tls-other-ca.pem", OTHER_CA_PEM);
	setenv("SSL_CERT_FILE", azurite_ca, 1);
	setenv("SSL_CERT_DIR", "/nonexistent", 1);
	o.ca_file = other_ca;
	for (int via_curl = 0; via_curl < 2; via_curl++) {
		if (via_curl) {
			setenv("https_proxy", "http://127.0.0.1:9", 1);
			setenv("no_proxy", "127.0.0.1", 1);
		}
		itest_client_for(&acct, &c, cs, &o);
		if (ecw_queue_create(NULL, c, t->queue) != 0)
			fail_msg("%s: the system's CAs were not trusted beside ca_file: %s",
			         via_curl ? "libcurl" : "http.c", ecw_error_last()->message);
		ECW_ASSERT_OK(ecw_queue_delete_queue(c, t->queue));
		ecw_client_free(c);
		ecw_account_free(acct);
	}
	unsetenv("https_proxy");
	unsetenv("no_proxy");
	unsetenv("SSL_CERT_FILE");
	unsetenv("SSL_CERT_DIR");
	free(cs);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_tls__self_signed_certificate_is_refused_by_default,
	                                    itest_setup, itest_teardown),
	    cmocka_unit_test_setup_teardown(test_tls__test_only_option_accepts_it, itest_setup,
	                                    itest_teardown),
	    cmocka_unit_test_setup_teardown(test_tls__ca_file_adds_to_the_system_store, itest_setup,
	                                    itest_teardown),
	    cmocka_unit_test_setup_teardown(test_tls__pipelined_deletes, itest_setup, itest_teardown),
	};
	return cmocka_run_group_tests_name("tls", tests, NULL, NULL);
}
