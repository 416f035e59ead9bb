/* SPDX-License-Identifier: MIT */
/* test_proxy.c - which transport a client uses. Without proxy variables a
 * client sends through http.c, straight to the endpoint; a client made while
 * http_proxy (or https_proxy, all_proxy) is set sends through libcurl, which
 * goes through the proxy. The proxy here is Azurite itself: it serves an
 * absolute-form request by its path, so an account whose TableEndpoint names
 * a port where nothing listens reaches the tables only through the proxy. */
#include "itest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The test connection string with its TableEndpoint moved to port 1, where
 * nothing listens; *proxy gets the real table endpoint's origin. */
static void unreachable_account(struct ecw_account **out, char *proxy, size_t cap)
{
	const char *cs = itest_connstr(), *te = strstr(cs, "TableEndpoint=http://");
	char moved[1024];

	assert_non_null(te);
	const char *origin = te + strlen("TableEndpoint="), *path = strchr(origin + strlen("http://"), '/');
	assert_non_null(path);
	assert_true(snprintf(proxy, cap, "%.*s", (int)(path - origin), origin) < (int)cap);
	assert_true(snprintf(moved, sizeof(moved), "%.*shttp://127.0.0.1:1%s", (int)(origin - cs), cs, path) <
	            (int)sizeof(moved));
	ECW_ASSERT_OK(ecw_account_parse(out, moved));
}

static void test_proxy__direct_without_variables(void **state)
{
	static const struct ecw_client_options opts = ITEST_OPTIONS;
	struct ecw_account *a = NULL;
	struct ecw_client *c = NULL;
	char proxy[256], name[64];
	bool created;
	(void)state;

	unreachable_account(&a, proxy, sizeof(proxy));
	unsetenv("http_proxy");
	unsetenv("all_proxy");
	unsetenv("ALL_PROXY");
	ECW_ASSERT_OK(ecw_client_new(&c, a, &opts));
	itest_unique_name(name, sizeof(name), 't', "px");
	assert_int_equal(ecw_table_create(&created, c, name), ECW_ETRANSIENT);
	assert_non_null(strstr(ecw_error_last()->message, "connecting to 127.0.0.1 port 1"));
	ecw_client_free(c);
	ecw_account_free(a);
}

static void test_proxy__through_the_proxy_variable(void **state)
{
	static const struct ecw_client_options opts = ITEST_OPTIONS;
	struct ecw_account *a = NULL;
	struct ecw_client *c = NULL;
	char proxy[256], name[64];
	bool created = false;
	(void)state;

	unreachable_account(&a, proxy, sizeof(proxy));
	assert_int_equal(setenv("http_proxy", proxy, 1), 0);
	ECW_ASSERT_OK(ecw_client_new(&c, a, &opts));
	itest_unique_name(name, sizeof(name), 't', "px");
	ECW_ASSERT_OK(ecw_table_create(&created, c, name));
	assert_true(created);
	unsetenv("http_proxy");
	ecw_client_free(c);
	ecw_account_free(a);
	/* It is there for a direct client too. (Azurite refuses the signature
	 * of an absolute-form request whose path has quotes, so the proxied
	 * client does no more than this.) */
	itest_client_for(&a, &c, itest_connstr(), &opts);
	ECW_ASSERT_OK(ecw_table_create(&created, c, name));
	assert_false(created);
	ECW_ASSERT_OK(ecw_table_delete_table(c, name));
	ecw_client_free(c);
	ecw_account_free(a);
}

/* Blobs through libcurl, HEAD too (libcurl's NOBODY: as a custom method it
 * would wait for the body its Content-Length names, until the timeout). The
 * proxy is the blob endpoint's Azurite. */
static void test_proxy__blob_props_through_libcurl(void **state)
{
	static const struct ecw_client_options opts = ITEST_OPTIONS;
	struct ecw_account *a = NULL;
	struct ecw_client *c = NULL;
	struct ecw_blob_info *info = NULL;
	struct ecw_buf out;
	char proxy[64], name[64];
	int64_t start;
	(void)state;

	assert_true(snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%s", getenv("ECW_TEST_BLOB_PORT")) > 0);
	ecw_buf_init(&out, 0);
	assert_int_equal(setenv("http_proxy", proxy, 1), 0);
	itest_client_for(&a, &c, itest_connstr(), &opts);
	unsetenv("http_proxy");
	itest_unique_name(name, sizeof(name), 'q', "pxblob");
	start = itest_now_ms();
	ECW_ASSERT_OK(ecw_blob_container_create(NULL, c, name));
	ECW_ASSERT_OK(ecw_blob_put(NULL, c, name, "a b", "0123456789", 10, NULL));
	ECW_ASSERT_OK(ecw_blob_props(&info, c, name, "a b"));
	assert_int_equal(info->content_length, 10);
	ecw_blob_info_free(info);
	ECW_ASSERT_ERR(ecw_blob_props(&info, c, name, "absent"), ECW_EBLOBNOTFOUND);
	ECW_ASSERT_OK(ecw_blob_get(&out, NULL, c, name, "a b", 10));
	assert_int_equal(out.len, 10);
	ECW_ASSERT_OK(ecw_blob_container_delete(c, name));
	ITEST_CHECK(itest_now_ms() - start < 5000, "blob calls through libcurl took %lld ms",
	            (long long)(itest_now_ms() - start));
	ecw_buf_dispose(&out);
	ecw_client_free(c);
	ecw_account_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_proxy__direct_without_variables),
	    cmocka_unit_test(test_proxy__through_the_proxy_variable),
	    cmocka_unit_test(test_proxy__blob_props_through_libcurl),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
