/* SPDX-License-Identifier: MIT */
/* test_connect.c - from the storage section to an account and client
 * options: key and SAS as before, the identity modes' endpoints (by account
 * name or endpoints-only string) and the environment they read, where every
 * missing variable is an error naming it, and ca_file handed to the clients.
 * And the rule for a secret rotated in its file (issue 33): a refused
 * request makes the account read the file again, at most once per 10 s, and
 * a changed secret serves the same request again and every later one. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "connect.h"
#include "ecw_codec.h"
#include "ecw_config.h"
#include "ecw_log.h"

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
                                       "AZURE_STORAGE_CONNECTION_STRING_FILE",
                                       "ECW_TEST_RELOAD_CS",
                                       NULL};
static char token_file[64], secret_file[64];

static int setup(void **state)
{
	(void)state;
	for (size_t i = 0; env_vars[i]; i++)
		unsetenv(env_vars[i]);
	snprintf(secret_file, sizeof(secret_file), "/tmp/ecw-test-connect-secret.%ld", (long)getpid());
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
	unlink(secret_file);
	clock_real();
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

/* ---- a secret rotated in its file ------------------------------------------ */

#define SAS_CS(sig)                                                                                          \
	"QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;"                                             \
	"TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;"                                             \
	"SharedAccessSignature=sv=2019-02-02&ss=qt&srt=sco&sp=rwdlacup&se=2099-01-01T00%3A00%3A00Z&sig=" sig
#define SIG_OLD "0ldSiGnAtUrE0ldSiGnAtUrE0ldSiGnAtUrE0ldSiG%3D"
#define SIG_NEW "NeWsIgNaTuReNeWsIgNaTuReNeWsIgNaTuReNeWsIg%3D"
#define KEY_CS(key)                                                                                          \
	"DefaultEndpointsProtocol=http;AccountName=rotated;AccountKey=" key                                  \
	";QueueEndpoint=http://127.0.0.1:10001/rotated;TableEndpoint=http://127.0.0.1:10002/rotated"
/* base64 of "OldKeyOldKeyOldKeyOldKey" and "NewKeyNewKeyNewKeyNewKey" */
#define KEY_OLD "T2xkS2V5T2xkS2V5T2xkS2V5T2xkS2V5"
#define KEY_NEW "TmV3S2V5TmV3S2V5TmV3S2V5TmV3S2V5"
#define REFUSED "x-ms-error-code: AuthorizationFailure\n"

/* expr returns want; else the test fails showing the last error. */
#define EXPECT(expr, want)                                                                                   \
	do {                                                                                                 \
		int got_ = (expr);                                                                           \
		if (got_ != (want))                                                                          \
			fail_msg("%s returned %s, expected %s: %s", #expr, ecw_error_name(got_),             \
			         ecw_error_name(want), ecw_error_last()->message);                           \
	} while (0)

static void write_secret(const char *content)
{
	FILE *f = fopen(secret_file, "w");

	assert_non_null(f);
	assert_true(fputs(content, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

/* An account from a configuration, one client on it whose transport is the
 * fake, and the log captured in a file. */
struct reload_fx {
	struct ecw_config *cfg;
	struct ecw_account *acct;
	struct ecw_client *c;
	struct fake_transport fake;
	FILE *log;
};

static void reload_fx_start(struct reload_fx *fx, const char *yaml)
{
	memset(fx, 0, sizeof(*fx));
	fx->cfg = config(yaml);
	assert_int_equal(ecw_connect_account(&fx->acct, fx->cfg), 0);
	assert_int_equal(ecw_client_new(&fx->c, fx->acct, NULL), 0);
	fake_init(&fx->fake, fx->acct);
	ecw_client_set_transport(fx->c, fake_send, &fx->fake);
	assert_non_null(fx->log = tmpfile());
	ecw_log_setup(ECW_LOG_DEBUG, ECW_LOG_JSON);
	ecw_log_set_fd(fileno(fx->log));
}

/* The log so far (heap). */
static char *reload_fx_log(struct reload_fx *fx)
{
	size_t len = 0;
	char *text = calloc(1, 65536);

	assert_non_null(text);
	while (len < 65535) {
		ssize_t got = pread(fileno(fx->log), text + len, 65535 - len, (off_t)len);
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	return text;
}

static void reload_fx_stop(struct reload_fx *fx)
{
	ecw_log_set_fd(2);
	ecw_log_setup(ECW_LOG_INFO, ECW_LOG_JSON);
	fclose(fx->log);
	fake_dispose(&fx->fake);
	ecw_client_free(fx->c);
	ecw_account_free(fx->acct);
	ecw_config_free(fx->cfg);
}

/* The SAS in the file expired and was replaced: the refused request reads
 * the file again and goes again, at once, with the new SAS; so does every
 * later one. One line says so, and neither SAS is in the log; the new one is
 * redacted from every line. */
static void test_connect__sas_from_file_reloaded_when_refused(void **state)
{
	struct reload_fx fx;
	char yaml[160], *log;
	(void)state;

	write_secret(SAS_CS(SIG_OLD) "\n");
	snprintf(yaml, sizeof(yaml), "storage: {connection_string: \"${file:%s}\"}\n", secret_file);
	reload_fx_start(&fx, yaml);
	assert_true(str_starts(fx.cfg->storage.connection_string_source, "${file:/tmp/"));
	write_secret(SAS_CS(SIG_NEW) "\n");
	fake_respond(&fx.fake, 403, REFUSED, NULL);
	fake_respond(&fx.fake, 201, NULL, NULL);
	fake_respond(&fx.fake, 204, NULL, NULL);

	EXPECT(ecw_queue_create(NULL, fx.c, "jobs"), 0);
	assert_int_equal(fx.fake.nreqs, 2);
	assert_true(url_has_param(fx.fake.reqs[0].url, "sig=" SIG_OLD));
	assert_true(url_has_param(fx.fake.reqs[1].url, "sig=" SIG_NEW));
	/* Later requests, of this client or another, sign with the new SAS. */
	EXPECT(ecw_queue_create(NULL, fx.c, "jobs"), 0);
	assert_int_equal(fx.fake.nreqs, 3);
	assert_true(url_has_param(fx.fake.reqs[2].url, "sig=" SIG_NEW));

	ecw_log_msg(ECW_LOG_INFO, "probe", "%s", strstr(SAS_CS(SIG_NEW), "sv="));
	log = reload_fx_log(&fx);
	assert_true(str_contains(log, "\"event\":\"credentials_reloaded\""));
	assert_true(str_contains(log, "\"auth\":\"sas\""));
	assert_false(str_contains(log, "0ldSiGnAtUrE"));
	assert_false(str_contains(log, "NeWsIgNaTuRe"));
	assert_false(str_contains(log, "sv=2019-02-02&ss=qt")); /* the whole new SAS is a secret */
	free(log);
	reload_fx_stop(&fx);
}

/* The secret in the file is the one refused: the request fails as before
 * (no second attempt), with the service's refusal as its last error. */
static void test_connect__unchanged_file_no_retry(void **state)
{
	struct reload_fx fx;
	char yaml[160], *log;
	(void)state;

	write_secret(SAS_CS(SIG_OLD));
	snprintf(yaml, sizeof(yaml), "storage: {connection_string: \"${file:%s}\"}\n", secret_file);
	reload_fx_start(&fx, yaml);
	fake_respond(&fx.fake, 403, REFUSED, NULL);

	EXPECT(ecw_queue_create(NULL, fx.c, "jobs"), ECW_EAUTH);
	assert_int_equal(fx.fake.nreqs, 1);
	assert_int_equal(ecw_error_last()->http_status, 403);
	assert_str(ecw_error_last()->service_code, "AuthorizationFailure");
	log = reload_fx_log(&fx);
	assert_true(str_contains(log, "\"event\":\"credentials_unchanged\""));
	assert_false(str_contains(log, "credentials_reloaded"));
	free(log);
	reload_fx_stop(&fx);
}

/* The file is read again at most once per 10 s: a refusal within 10 s of the
 * last reading is final even when the file changed meanwhile; the first
 * refusal after them reads it and goes again. */
static void test_connect__reread_at_most_once_per_10s(void **state)
{
	struct reload_fx fx;
	char yaml[160];
	(void)state;

	clock_fake_set(1000000);
	write_secret(SAS_CS(SIG_OLD));
	snprintf(yaml, sizeof(yaml), "storage: {connection_string: \"${file:%s}\"}\n", secret_file);
	reload_fx_start(&fx, yaml);
	fake_respond(&fx.fake, 403, REFUSED, NULL); /* read: unchanged */
	EXPECT(ecw_queue_create(NULL, fx.c, "jobs"), ECW_EAUTH);
	assert_int_equal(fx.fake.nreqs, 1);

	write_secret(SAS_CS(SIG_NEW));
	clock_fake_advance(ECW_CONNECT_RELOAD_INTERVAL_MS - 1);
	fake_respond(&fx.fake, 403, REFUSED, NULL); /* too soon: not read */
	EXPECT(ecw_queue_create(NULL, fx.c, "jobs"), ECW_EAUTH);
	assert_int_equal(fx.fake.nreqs, 2);
	assert_true(url_has_param(fx.fake.reqs[1].url, "sig=" SIG_OLD));

	clock_fake_advance(1);
	fake_respond(&fx.fake, 403, REFUSED, NULL); /* read: changed, sent again */
	fake_respond(&fx.fake, 201, NULL, NULL);
	EXPECT(ecw_queue_create(NULL, fx.c, "jobs"), 0);
	assert_int_equal(fx.fake.nreqs, 4);
	assert_true(url_has_param(fx.fake.reqs[2].url, "sig=" SIG_OLD));
	assert_true(url_has_param(fx.fake.reqs[3].url, "sig=" SIG_NEW));

	/* The new SAS refused at once: read within 10 s of the last, so not. */
	fake_respond(&fx.fake, 403, REFUSED, NULL);
	EXPECT(ecw_queue_create(NULL, fx.c, "jobs"), ECW_EAUTH);
	assert_int_equal(fx.fake.nreqs, 5);
	reload_fx_stop(&fx);
}

/* AZURE_STORAGE_CONNECTION_STRING_FILE with an account key: a rotated key
 * signs the request sent again, and the account holds it from then on. */
static void test_connect__key_from_connection_string_file(void **state)
{
	struct reload_fx fx;
	struct ecw_buf want;
	char *log;
	(void)state;

	write_secret(KEY_CS(KEY_OLD) "\n");
	setenv("AZURE_STORAGE_CONNECTION_STRING_FILE", secret_file, 1);
	reload_fx_start(&fx, "storage: {request_timeout: 5s}\n");
	assert_non_null(fx.cfg->storage.connection_string_source);
	write_secret(KEY_CS(KEY_NEW) "\n");
	fake_respond(&fx.fake, 403, "x-ms-error-code: AuthenticationFailed\n", NULL);
	fake_respond(&fx.fake, 201, NULL, NULL);

	EXPECT(ecw_queue_create(NULL, fx.c, "jobs"), 0);
	assert_int_equal(fx.fake.nreqs, 2);
	/* auth_ok: signed with the key the account held when it was sent. */
	assert_true(fx.fake.reqs[0].auth_ok);
	assert_true(fx.fake.reqs[1].auth_ok);
	ecw_buf_init(&want, 0);
	assert_int_equal(ecw_base64_decode(&want, KEY_NEW, strlen(KEY_NEW)), 0);
	assert_int_equal(fx.acct->key_len, want.len);
	assert_memory_equal(fx.acct->key, want.ptr, want.len);
	ecw_buf_dispose(&want);
	log = reload_fx_log(&fx);
	assert_true(str_contains(log, "\"event\":\"credentials_reloaded\""));
	assert_true(str_contains(log, "\"auth\":\"shared-key\""));
	assert_false(str_contains(log, KEY_OLD));
	assert_false(str_contains(log, KEY_NEW));
	free(log);
	reload_fx_stop(&fx);
}

/* A file that now names another account cannot be taken without a restart:
 * the request fails as it was, a line says why (no secret in it), and the
 * secret in use stays. */
static void test_connect__reload_refuses_another_account(void **state)
{
	struct reload_fx fx;
	char yaml[160], *log;
	(void)state;

	write_secret(SAS_CS(SIG_OLD));
	snprintf(yaml, sizeof(yaml), "storage: {connection_string: \"${file:%s}\"}\n", secret_file);
	reload_fx_start(&fx, yaml);
	write_secret(KEY_CS(KEY_NEW));
	fake_respond(&fx.fake, 403, REFUSED, NULL);
	EXPECT(ecw_queue_create(NULL, fx.c, "jobs"), ECW_EAUTH);
	assert_int_equal(fx.fake.nreqs, 1);
	assert_str(ecw_account_auth_name(fx.acct), "sas");
	log = reload_fx_log(&fx);
	assert_true(str_contains(log, "\"event\":\"credentials_reload_failed\""));
	assert_true(str_contains(log, "another account or other endpoints"));
	assert_false(str_contains(log, KEY_NEW));
	free(log);
	reload_fx_stop(&fx);
}

/* A secret that does not come from a file is never read again: a refusal is
 * final, as before. */
static void test_connect__secret_not_from_file_unchanged(void **state)
{
	struct reload_fx fx;
	(void)state;

	setenv("ECW_TEST_RELOAD_CS", SAS_CS(SIG_OLD), 1);
	reload_fx_start(&fx, "storage: {connection_string: \"${ECW_TEST_RELOAD_CS}\"}\n");
	assert_null(fx.cfg->storage.connection_string_source);
	setenv("ECW_TEST_RELOAD_CS", SAS_CS(SIG_NEW), 1);
	fake_respond(&fx.fake, 403, REFUSED, NULL);
	EXPECT(ecw_queue_create(NULL, fx.c, "jobs"), ECW_EAUTH);
	assert_int_equal(fx.fake.nreqs, 1);
	reload_fx_stop(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_connect__key_as_before, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect__workload_identity_by_account, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect__workload_identity_env_missing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect__managed_identity_env, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect__sas_from_file_reloaded_when_refused, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_connect__unchanged_file_no_retry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect__reread_at_most_once_per_10s, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect__key_from_connection_string_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect__reload_refuses_another_account, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect__secret_not_from_file_unchanged, setup, teardown),
	};
	return cmocka_run_group_tests_name("connect", tests, NULL, NULL);
}
