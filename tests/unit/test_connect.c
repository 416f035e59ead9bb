/* test_connect.c - from the storage section to an account and client
 * options: key and SAS as before, the identity modes' endpoints (by account
 * name or endpoints-only string) and the environment they read, where every
 * missing variable is an error naming it, and ca_file handed to the clients. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "connect.h"
#include "ecw_config.h"

#define ENDPOINTS                                                                                            \
	"QueueEndpoint=https://127.0.0.1:10001/devstoreaccount1;TableEndpoint=https://127.0.0.1:10002/devstoreaccount1"

static const char *const env_vars[] = {"AZURE_CLIENT_ID",
                                       "AZURE_TENANT_ID",
                                       "AZURE_FEDERATED_TOKEN_FILE",
                                       "AZURE_AUTHORITY_HOST",
                                       "IDENTITY_ENDPOINT",
                                       "IDENTITY_HEADER",
                                       "ECW_IMDS_ENDPOINT",
                                       "AZURE_STORAGE_CONNECTION_STRING",
                                       NULL};
static char token_file[64];

static int setup(void **state)
{
	(void)state;
	for (size_t i = 0; env_vars[i]; i++)
		unsetenv(env_vars[i]);
	snprintf(token_file, sizeof(token_file), "/tmp/ecw-test-connect.%ld", (long)getpid());
	FILE *f = fopen(token_file, "w");
	assert_non_null(f);
	fputs("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln\n", f);
	fclose(f);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(token_file);
	return 0;
}

static struct ecw_config *config(const char *text)
{
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;

	ecw_node_errors_init(&errs);
	if (ecw_config_parse(&cfg, text, strlen(text), "t.yaml", &errs) != 0) {
		for (size_t i = 0; i < errs.n; i++)
			print_message("  %s\n", errs.lines[i]);
		fail_msg("config does not parse");
	}
	ecw_node_errors_dispose(&errs);
	return cfg;
}

static void set_workload_env(void)
{
	setenv("AZURE_CLIENT_ID", "0c4bd8c5-6a1e-4b8e-8f2b-5d1e6b9a3c21", 1);
	setenv("AZURE_TENANT_ID", "72f988bf-86f1-41af-91ab-2d7cd011db47", 1);
	setenv("AZURE_FEDERATED_TOKEN_FILE", token_file, 1);
}

/* The account fails with ECW_EINVALID and a message containing needle. */
static void account_fails(const struct ecw_config *cfg, const char *needle)
{
	struct ecw_account *acct = (struct ecw_account *)1;

	assert_int_equal(ecw_connect_account(&acct, cfg), ECW_EINVALID);
	assert_null(acct);
	if (!str_contains(ecw_error_last()->message, needle))
		fail_msg("message \"%s\" lacks \"%s\"", ecw_error_last()->message, needle);
}

static void test_connect__key_as_before(void **state)
{
	struct ecw_config *cfg = config("storage: {connection_string: UseDevelopmentStorage=true}\n");
	struct ecw_account *acct;
	struct ecw_client_options o;
	(void)state;

	assert_int_equal(ecw_connect_account(&acct, cfg), 0);
	assert_str(ecw_account_auth_name(acct), "shared-key");
	ecw_connect_client_options(&o, cfg);
	assert_null(o.ca_file);
	assert_int_equal(o.max_tries, 4);
	assert_int_equal(o.timeout_ms, 30000);
	assert_false(o.no_pipelining);
	ecw_config_free(cfg);
	cfg = config(
	    "storage: {connection_string: UseDevelopmentStorage=true, request_timeout: 2s, pipelining: false}\n");
	ecw_connect_client_options(&o, cfg);
	assert_int_equal(o.timeout_ms, 2000);
	assert_true(o.no_pipelining);
	ecw_account_free(acct);
	ecw_config_free(cfg);
}

static void test_connect__workload_identity_by_account(void **state)
{
	struct ecw_config *cfg =
	    config("storage: {auth: workload-identity, account: myacct01, ca_file: config/ecworker.yaml}\n");
	struct ecw_account *acct;
	struct ecw_client_options o;
	(void)state;

	set_workload_env();
	assert_int_equal(ecw_connect_account(&acct, cfg), 0);
	assert_str(ecw_account_auth_name(acct), "workload-identity");
	assert_str(ecw_account_name(acct), "myacct01");
	assert_str(ecw_account_endpoint(acct, ECW_SVC_QUEUE), "https://myacct01.queue.core.windows.net");
	assert_str(ecw_account_endpoint(acct, ECW_SVC_TABLE), "https://myacct01.table.core.windows.net");
	ecw_connect_client_options(&o, cfg);
	assert_str(o.ca_file, "config/ecworker.yaml");
	ecw_account_free(acct);
	ecw_config_free(cfg);
}

static void test_connect__workload_identity_env_missing(void **state)
{
	struct ecw_config *cfg =
	    config("storage: {auth: workload-identity, connection_string: \"" ENDPOINTS "\"}\n");
	(void)state;

	account_fails(cfg, "storage.auth is workload-identity but AZURE_CLIENT_ID is not set");
	set_workload_env();
	unsetenv("AZURE_TENANT_ID");
	account_fails(cfg, "AZURE_TENANT_ID is not set");
	set_workload_env();
	setenv("AZURE_FEDERATED_TOKEN_FILE", "", 1); /* empty counts as unset */
	account_fails(cfg, "AZURE_FEDERATED_TOKEN_FILE is not set");
	setenv("AZURE_FEDERATED_TOKEN_FILE", "/nonexistent/token", 1);
	account_fails(
	    cfg, "AZURE_FEDERATED_TOKEN_FILE (/nonexistent/token) cannot be read: No such file or directory");
	set_workload_env();
	setenv("AZURE_AUTHORITY_HOST", "login.microsoftonline.com", 1);
	account_fails(cfg, "AZURE_AUTHORITY_HOST");
	unsetenv("AZURE_AUTHORITY_HOST");
	struct ecw_account *acct;
	assert_int_equal(ecw_connect_account(&acct, cfg), 0);
	assert_str(ecw_account_endpoint(acct, ECW_SVC_TABLE), "https://127.0.0.1:10002/devstoreaccount1");
	assert_str(ecw_account_name(acct), "");
	ecw_account_free(acct);
	ecw_config_free(cfg);
}

static void test_connect__managed_identity_env(void **state)
{
	struct ecw_config *cfg = config("storage: {auth: managed-identity, account: myacct01}\n");
	struct ecw_account *acct;
	(void)state;

	/* IMDS needs nothing from the environment. */
	assert_int_equal(ecw_connect_account(&acct, cfg), 0);
	assert_str(ecw_account_auth_name(acct), "managed-identity");
	ecw_account_free(acct);
	/* App Service style needs both. */
	setenv("IDENTITY_ENDPOINT", "http://localhost:42356/msi/token", 1);
	account_fails(cfg, "IDENTITY_ENDPOINT is set but IDENTITY_HEADER is not");
	setenv("IDENTITY_HEADER", "a-header-secret", 1);
	assert_int_equal(ecw_connect_account(&acct, cfg), 0);
	ecw_account_free(acct);
	unsetenv("IDENTITY_ENDPOINT");
	unsetenv("IDENTITY_HEADER");
	setenv("ECW_IMDS_ENDPOINT", "not a url", 1);
	account_fails(cfg, "managed identity: the token endpoint must be an http(s) URL");
	ecw_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_connect__key_as_before, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect__workload_identity_by_account, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect__workload_identity_env_missing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect__managed_identity_env, setup, teardown),
	};
	return cmocka_run_group_tests_name("connect", tests, NULL, NULL);
}
