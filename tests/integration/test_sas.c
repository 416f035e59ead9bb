/* SPDX-License-Identifier: MIT */
/* test_sas.c - SAS authentication against Azurite: an account SAS signed here
 * (the account-SAS string-to-sign of version 2019-02-02) drives the three
 * services through a SAS-only connection string; a SAS with a wrong
 * signature is an auth error at once, and its signature never shows up in
 * the error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_codec.h"
#include "itest.h"

#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

/* Returns "sv=...&sig=..." for devstoreaccount1 (heap; free it). */
static char *account_sas(bool break_signature)
{
	const char *perms = "rwdlacup", *expiry = "2099-01-01T00:00:00Z";
	struct ecw_buf key, sts, sig, token;

	ecw_buf_init(&key, 0);
	ecw_buf_init(&sts, 0);
	ecw_buf_init(&sig, 0);
	ecw_buf_init(&token, 0);
	assert_int_equal(ecw_base64_decode(&key, DEV_KEY, strlen(DEV_KEY)), 0);
	/* account, permissions, services, resource types, start, expiry, IP,
	 * protocol, version, each followed by a newline. */
	assert_int_equal(ecw_buf_printf(&sts,
	                                "devstoreaccount1\n%s\nbqt\nsco\n\n%s\n\nhttps,http\n2019-02-02\n",
	                                perms, expiry),
	                 0);
	assert_int_equal(
	    ecw_auth_hmac_sha256_base64(&sig, (unsigned char *)key.ptr, key.len, sts.ptr, sts.len), 0);
	if (break_signature)
		sig.ptr[0] = sig.ptr[0] == 'A' ? 'B' : 'A';
	assert_int_equal(ecw_buf_printf(&token,
	                                "sv=2019-02-02&ss=bqt&srt=sco&sp=%s&se=2099-01-01T00%%3A00%%3A00Z"
	                                "&spr=https,http&sig=",
	                                perms),
	                 0);
	assert_int_equal(ecw_escape_pct(&token, sig.ptr, sig.len), 0);
	(void)expiry;
	ecw_buf_dispose(&key);
	ecw_buf_dispose(&sts);
	ecw_buf_dispose(&sig);
	return ecw_buf_take(&token);
}

static char *sas_connstr(const char *sas)
{
	const char *qp = getenv("ECW_TEST_QUEUE_PORT"), *tp = getenv("ECW_TEST_TABLE_PORT"),
	           *bp = getenv("ECW_TEST_BLOB_PORT");
	struct ecw_buf b;

	assert_non_null(qp);
	assert_non_null(tp);
	assert_non_null(bp);
	ecw_buf_init(&b, 0);
	/* No AccountName, no key: only endpoints and the token (with a leading
	 * '?', as the portal shows it). */
	assert_int_equal(ecw_buf_printf(&b,
	                                "QueueEndpoint=http://127.0.0.1:%s/devstoreaccount1;"
	                                "TableEndpoint=http://127.0.0.1:%s/devstoreaccount1;"
	                                "BlobEndpoint=http://127.0.0.1:%s/devstoreaccount1;"
	                                "SharedAccessSignature=?%s",
	                                qp, tp, bp, sas),
	                 0);
	return ecw_buf_take(&b);
}

static void test_sas__queue_and_table_through_account_sas(void **state)
{
	struct itest *t = *state;
	char *sas = account_sas(false), *cs = sas_connstr(sas);
	struct ecw_account *acct;
	struct ecw_client *c;
	struct ecw_queue_msg *msgs = NULL;
	struct ecw_entity *e, *got;
	size_t n = 0;

	itest_client_for(&acct, &c, cs, NULL);
	assert_true(ecw_account_uses_sas(acct));
	t->queue_used = t->table_used = true; /* teardown removes them with the key client */

	ECW_ASSERT_OK(ecw_queue_create(NULL, c, t->queue));
	ECW_ASSERT_OK(ecw_queue_put(NULL, c, t->queue, "via sas", 7, NULL));
	ECW_ASSERT_OK(ecw_queue_receive(&msgs, &n, c, t->queue, 1, 30));
	assert_int_equal(n, 1);
	assert_string_equal(msgs[0].text, "via sas");
	ECW_ASSERT_OK(ecw_queue_delete(c, t->queue, msgs[0].id, msgs[0].pop_receipt));

	ECW_ASSERT_OK(ecw_table_create(NULL, c, t->table));
	ECW_ASSERT_OK(ecw_entity_new(&e, "p", "o'brien 001"));
	ECW_ASSERT_OK(ecw_entity_set_int64(e, "Big", 9007199254740993LL));
	ECW_ASSERT_OK(ecw_table_write(NULL, c, t->table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ECW_ASSERT_OK(ecw_table_get(&got, c, t->table, "p", "o'brien 001"));
	assert_true(ecw_entity_equal(e, got));

	ecw_entity_free(e);
	ecw_entity_free(got);
	ecw_queue_msgs_free(msgs, n);
	ecw_client_free(c);
	ecw_account_free(acct);
	free(cs);
	free(sas);
}

/* The SAS goes on the blob URL after the blob's own query (a listing's). */
static void test_sas__blob_through_account_sas(void **state)
{
	struct itest *t = *state;
	char *sas = account_sas(false), *cs = sas_connstr(sas);
	struct ecw_account *acct;
	struct ecw_client *c;
	struct ecw_blob_list *l = NULL;
	struct ecw_blob_info *it = NULL;
	struct ecw_buf out;
	char container[64];

	ecw_buf_init(&out, 0);
	itest_client_for(&acct, &c, cs, NULL);
	itest_unique_name(container, sizeof(container), 'q', "sasblob");
	assert_true(ecw_account_may_create(acct, ECW_SVC_BLOB));
	ECW_ASSERT_OK(ecw_blob_container_create(NULL, c, container));
	ECW_ASSERT_OK(ecw_blob_put(NULL, c, container, "via sas/x y", "via sas", 7, NULL));
	ECW_ASSERT_OK(ecw_blob_get(&out, NULL, c, container, "via sas/x y", 100));
	assert_string_equal(ecw_buf_cstr(&out), "via sas");
	ECW_ASSERT_OK(ecw_blob_list_new(&l, c, container, &(struct ecw_blob_list_options){.prefix = "via"}));
	ECW_ASSERT_OK(ecw_blob_list_next(&it, l));
	assert_non_null(it);
	assert_string_equal(it->name, "via sas/x y");
	ECW_ASSERT_OK(ecw_blob_delete(c, container, "via sas/x y", it->etag));
	ECW_ASSERT_OK(ecw_blob_container_delete(c, container));
	(void)t;

	ecw_blob_info_free(it);
	ecw_blob_list_free(l);
	ecw_buf_dispose(&out);
	ecw_client_free(c);
	ecw_account_free(acct);
	free(cs);
	free(sas);
}

static void test_sas__bad_signature_is_auth_error_without_retry_or_leak(void **state)
{
	struct itest *t = *state;
	char *sas = account_sas(true), *cs = sas_connstr(sas);
	const char *sig = strstr(sas, "sig=") + 4;
	struct ecw_account *acct;
	struct ecw_client *c;
	struct ecw_client_stats st;

	itest_client_for(&acct, &c, cs, NULL);
	ECW_ASSERT_ERR(ecw_queue_create(NULL, c, t->queue), ECW_EAUTH);
	ecw_client_stats(&st, c);
	assert_int_equal(st.requests, 1);
	assert_int_equal(st.retries, 0);
	assert_int_equal(ecw_error_last()->http_status, 403);
	assert_null(strstr(ecw_error_last()->message, sig));
	assert_null(strstr(ecw_error_last()->message, "sig="));
	ECW_ASSERT_ERR(ecw_table_create(NULL, c, t->table), ECW_EAUTH);
	assert_null(strstr(ecw_error_last()->message, "sig="));

	ecw_client_free(c);
	ecw_account_free(acct);
	free(cs);
	free(sas);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_sas__queue_and_table_through_account_sas, itest_setup,
	                                    itest_teardown),
	    cmocka_unit_test_setup_teardown(test_sas__blob_through_account_sas, itest_setup, itest_teardown),
	    cmocka_unit_test_setup_teardown(test_sas__bad_signature_is_auth_error_without_retry_or_leak,
	                                    itest_setup, itest_teardown),
	};
	return cmocka_run_group_tests_name("sas", tests, NULL, NULL);
}
