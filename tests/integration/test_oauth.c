/* SPDX-License-Identifier: MIT */
/* test_oauth.c - Entra ID authentication end to end: a worker configuration
 * with storage.auth: workload-identity (or managed-identity, IMDS style and
 * App Service style) gets a token from a token endpoint this test runs
 * (tokensrv.c, which checks every request field and mints a JWT), and sends
 * it as a bearer token to the https Azurite that run-tests.sh starts with
 * `--oauth basic`, trusted through storage.ca_file. Queue, table and blob
 * operations (batches too) go through; a token Azurite refuses (expired, or
 * for another audience) and a token endpoint that refuses the identity come
 * back as clear auth errors without a secret in them; and the worker process
 * runs a job that way. */
#include "itest.h"
#include "proc.h"
#include "tokensrv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "connect.h"
#include "ecw_config.h"

#define ASSERTION                                                                                            \
	"eyJhbGciOiJSUzI1NiIsImtpZCI6InRlc3QifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZGVmYXVsdDplY3cifQ.ZmVkZXJhdGVk"

struct ot {
	struct tokensrv *srv;
	char token_file[640];
	char queue[64], table[64], container[64];
	struct ecw_config *cfg;
	struct ecw_account *acct;
	struct ecw_client *c;
};

static const char *need_env(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		fail_msg(
		    "%s is not set: run through tests/run-tests.sh (it starts an https Azurite with --oauth basic)",
		    name);
	return v;
}

static void clear_identity_env(void)
{
	static const char *const vars[] = {
	    "AZURE_CLIENT_ID",   "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST",
	    "IDENTITY_ENDPOINT", "IDENTITY_HEADER", "ECW_IMDS_ENDPOINT",          NULL};
	for (size_t i = 0; vars[i]; i++)
		unsetenv(vars[i]);
}

static int ot_setup(void **state)
{
	struct ot *o = calloc(1, sizeof(*o));

	assert_non_null(o);
	clear_identity_env();
	itest_unique_name(o->queue, sizeof(o->queue), 'q', "oauth");
	itest_unique_name(o->table, sizeof(o->table), 't', "oauth");
	itest_unique_name(o->container, sizeof(o->container), 'q', "oauth");
	proc_write_file(o->token_file, sizeof(o->token_file), "federated-token.txt", ASSERTION "\n");
	*state = o;
	return 0;
}

static int ot_teardown(void **state)
{
	struct ot *o = *state;

	proc_cleanup();
	ecw_client_free(o->c);
	ecw_account_free(o->acct);
	ecw_config_free(o->cfg);
	tokensrv_stop(o->srv);
	unlink(o->token_file);
	clear_identity_env();
	free(o);
	return 0;
}

/* The storage section for the https Azurite; extra: more lines under storage:. */
static void storage_yaml(char *out, size_t cap, const char *auth, bool ca_file, const char *extra)
{
	int k =
	    snprintf(out, cap,
	             "storage:\n"
	             "  auth: %s\n"
	             "  connection_string: \"QueueEndpoint=https://127.0.0.1:%s/devstoreaccount1;"
	             "TableEndpoint=https://127.0.0.1:%s/devstoreaccount1;"
	             "BlobEndpoint=https://127.0.0.1:%s/devstoreaccount1\"\n"
	             "%s%s%s"
	             "%s",
	             auth, need_env("ECW_TEST_HTTPS_QUEUE_PORT"), need_env("ECW_TEST_HTTPS_TABLE_PORT"),
	             need_env("ECW_TEST_HTTPS_BLOB_PORT"), ca_file ? "  ca_file: \"" : "",
	             ca_file ? need_env("ECW_TEST_CA_FILE") : "", ca_file ? "\"\n" : "", extra ? extra : "");
	assert_true(k > 0 && (size_t)k < cap);
}

/* Parses the configuration and connects as every command does. */
static void connect_with(struct ot *o, const char *yaml)
{
	struct ecw_node_errors errs;

	ecw_node_errors_init(&errs);
	if (ecw_config_parse(&o->cfg, yaml, strlen(yaml), "oauth.yaml", &errs) != 0)
		fail_msg("config: %s", errs.n ? errs.lines[0] : "?");
	ecw_node_errors_dispose(&errs);
	ECW_ASSERT_OK(ecw_connect(&o->acct, &o->c, o->cfg));
}

static void workload_identity(struct ot *o, const struct tokensrv_config *sc, bool ca_file)
{
	char yaml[1024], authority[96];

	o->srv = tokensrv_start(sc);
	snprintf(authority, sizeof(authority), "%s/", tokensrv_base(o->srv));
	setenv("AZURE_CLIENT_ID", TOKENSRV_CLIENT_ID, 1);
	setenv("AZURE_TENANT_ID", TOKENSRV_TENANT, 1);
	setenv("AZURE_FEDERATED_TOKEN_FILE", o->token_file, 1);
	setenv("AZURE_AUTHORITY_HOST", authority, 1);
	storage_yaml(yaml, sizeof(yaml), "workload-identity", ca_file, NULL);
	connect_with(o, yaml);
	assert_string_equal(ecw_account_auth_name(o->acct), "workload-identity");
}

static void assert_server_clean(struct ot *o, size_t requests)
{
	if (tokensrv_mismatches(o->srv))
		fail_msg("the token endpoint saw a request it did not expect: %s", tokensrv_mismatch(o->srv));
	assert_int_equal(tokensrv_requests(o->srv), requests);
}

/* put / receive / update / delete a message, count, then the queue goes. */
static void queue_round_trip(struct ot *o)
{
	struct ecw_queue_msg *msgs = NULL;
	size_t n = 0;
	long long count = -1;

	ECW_ASSERT_OK(ecw_queue_create(NULL, o->c, o->queue));
	ECW_ASSERT_OK(ecw_queue_put(NULL, o->c, o->queue, "via bearer", 10, NULL));
	ECW_ASSERT_OK(ecw_queue_receive(&msgs, &n, o->c, o->queue, 1, 30));
	assert_int_equal(n, 1);
	assert_string_equal(msgs[0].text, "via bearer");
	ECW_ASSERT_OK(ecw_queue_update(&msgs[0], o->c, o->queue, 30, NULL, 0));
	ECW_ASSERT_OK(ecw_queue_delete(o->c, o->queue, msgs[0].id, msgs[0].pop_receipt));
	ECW_ASSERT_OK(ecw_queue_count(&count, o->c, o->queue));
	assert_int_equal(count, 0);
	ECW_ASSERT_OK(ecw_queue_delete_queue(o->c, o->queue));
	ecw_queue_msgs_free(msgs, n);
}

static struct ecw_entity *entity(const char *pk, const char *rk, int v)
{
	struct ecw_entity *e = NULL;
	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "V", v));
	return e;
}

/* insert / get / query / batch / delete, then the table goes. */
static void table_round_trip(struct ot *o)
{
	struct ecw_entity *a = entity("p", "o'brien 001", 1), *b = entity("p", "b", 2),
	                  *c = entity("p", "c", 3);
	struct ecw_entity *big = entity("q", "big", 4), *got = NULL, **all;
	struct ecw_batch *batch = NULL;
	static char text[30001];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(text) - 1; i++)
		text[i] = (char)('a' + i % 26);

	ECW_ASSERT_OK(ecw_table_create(NULL, o->c, o->table));
	ECW_ASSERT_OK(ecw_table_write(NULL, o->c, o->table, a, ECW_WRITE_INSERT, NULL));
	ECW_ASSERT_OK(ecw_table_get(&got, o->c, o->table, "p", "o'brien 001"));
	assert_true(ecw_entity_equal(a, got));
	ecw_entity_free(got);
	got = NULL;
	/* A body past 16 KiB goes out in its own TLS write after the head; a
	 * smaller one goes with it (http.c). Both must arrive whole. */
	ECW_ASSERT_OK(ecw_entity_set_string(big, "Text", text, sizeof(text) - 1));
	ECW_ASSERT_OK(ecw_table_write(NULL, o->c, o->table, big, ECW_WRITE_INSERT, NULL));
	ECW_ASSERT_OK(ecw_table_get(&got, o->c, o->table, "q", "big"));
	assert_true(ecw_entity_equal(big, got));
	ECW_ASSERT_OK(ecw_batch_new(&batch, o->table));
	ECW_ASSERT_OK(ecw_batch_add(batch, ECW_BATCH_INSERT, b, NULL));
	ECW_ASSERT_OK(ecw_batch_add(batch, ECW_BATCH_INSERT_OR_REPLACE, c, NULL));
	ECW_ASSERT_OK(ecw_batch_add(batch, ECW_BATCH_MERGE, a, "*"));
	ECW_ASSERT_OK(ecw_batch_submit(o->c, batch));
	all = itest_query_all(&n, o->c, o->table, "PartitionKey eq 'p'");
	assert_int_equal(n, 3);
	itest_entities_free(all, n);
	ECW_ASSERT_OK(ecw_table_delete(o->c, o->table, "p", "b", "*"));
	ECW_ASSERT_OK(ecw_table_delete_table(o->c, o->table));
	ecw_batch_free(batch);
	ecw_entity_free(got);
	ecw_entity_free(a);
	ecw_entity_free(b);
	ecw_entity_free(c);
	ecw_entity_free(big);
}

/* create / put / list / get / props / delete over https, then the container goes. */
static void blob_round_trip(struct ot *o)
{
	struct ecw_blob_list *l = NULL;
	struct ecw_blob_info *it = NULL, *props = NULL;
	struct ecw_buf out;

	ecw_buf_init(&out, 0);
	ECW_ASSERT_OK(ecw_blob_container_create(NULL, o->c, o->container));
	ECW_ASSERT_OK(ecw_blob_put(NULL, o->c, o->container, "via bearer", "via bearer", 10, NULL));
	ECW_ASSERT_OK(ecw_blob_list_new(&l, o->c, o->container, NULL));
	ECW_ASSERT_OK(ecw_blob_list_next(&it, l));
	assert_non_null(it);
	ECW_ASSERT_OK(ecw_blob_get(&out, NULL, o->c, o->container, it->name, 100));
	assert_string_equal(ecw_buf_cstr(&out), "via bearer");
	ECW_ASSERT_OK(ecw_blob_props(&props, o->c, o->container, it->name));
	assert_string_equal(props->etag, it->etag);
	ECW_ASSERT_OK(ecw_blob_delete(o->c, o->container, it->name, props->etag));
	ECW_ASSERT_OK(ecw_blob_container_delete(o->c, o->container));
	ecw_blob_info_free(props);
	ecw_blob_info_free(it);
	ecw_blob_list_free(l);
	ecw_buf_dispose(&out);
}

/* ---- token exchange, then bearer requests --------------------------------------- */

static void test_oauth__workload_identity_queue_table_and_blob(void **state)
{
	struct ot *o = *state;

	workload_identity(o, &(struct tokensrv_config){.mode = TOKENSRV_ENTRA, .assertion = ASSERTION}, true);
	queue_round_trip(o);
	table_round_trip(o);
	blob_round_trip(o);
	/* One token for all of it. */
	assert_server_clean(o, 1);
}

static void test_oauth__managed_identity_imds(void **state)
{
	struct ot *o = *state;
	char yaml[1024], endpoint[128];

	o->srv = tokensrv_start(
	    &(struct tokensrv_config){.mode = TOKENSRV_IMDS, .mi_client_id = TOKENSRV_CLIENT_ID});
	snprintf(endpoint, sizeof(endpoint), "%s/metadata/identity/oauth2/token", tokensrv_base(o->srv));
	setenv("ECW_IMDS_ENDPOINT", endpoint, 1);
	storage_yaml(yaml, sizeof(yaml), "managed-identity", true,
	             "  managed_identity_client_id: " TOKENSRV_CLIENT_ID "\n");
	connect_with(o, yaml);
	assert_string_equal(ecw_account_auth_name(o->acct), "managed-identity");
	queue_round_trip(o);
	table_round_trip(o);
	assert_server_clean(o, 1);
}

static void test_oauth__managed_identity_app_service(void **state)
{
	struct ot *o = *state;
	char yaml[1024], endpoint[128];

	o->srv = tokensrv_start(&(struct tokensrv_config){.mode = TOKENSRV_APP_SERVICE});
	snprintf(endpoint, sizeof(endpoint), "%s/msi/token", tokensrv_base(o->srv));
	setenv("IDENTITY_ENDPOINT", endpoint, 1);
	setenv("IDENTITY_HEADER", TOKENSRV_IDENTITY_HEADER, 1);
	storage_yaml(yaml, sizeof(yaml), "managed-identity", true, NULL);
	connect_with(o, yaml);
	queue_round_trip(o);
	assert_server_clean(o, 1);
}

/* ---- refusals ------------------------------------------------------------------- */

/* The last error: Azurite's 403 AuthenticationFailed, said clearly, once
 * (a just-minted token is not worth replacing), and without the token. */
static void assert_token_refused(struct ot *o)
{
	const struct ecw_error *e = ecw_error_last();

	assert_int_equal(e->http_status, 403);
	assert_string_equal(e->service_code, "AuthenticationFailed");
	ITEST_CHECK(strstr(e->message, "the service refused the access token") != NULL, "message: %s",
	            e->message);
	ITEST_CHECK(strstr(e->message, "eyJ") == NULL, "message: %s", e->message);
	assert_int_equal(itest_stats(o->c).requests, 1 + 1); /* the token, the refused request */
	assert_server_clean(o, 1);
}

static void test_oauth__expired_token_is_refused(void **state)
{
	struct ot *o = *state;

	/* The endpoint says an hour, the token itself expired ten minutes ago. */
	workload_identity(
	    o,
	    &(struct tokensrv_config){.mode = TOKENSRV_ENTRA, .assertion = ASSERTION, .exp_offset_s = -600},
	    true);
	ECW_ASSERT_ERR(ecw_queue_create(NULL, o->c, o->queue), ECW_EAUTH);
	assert_token_refused(o);
}

static void test_oauth__wrong_audience_is_refused(void **state)
{
	struct ot *o = *state;

	workload_identity(o,
	                  &(struct tokensrv_config){.mode = TOKENSRV_ENTRA,
	                                            .assertion = ASSERTION,
	                                            .audience = "https://vault.azure.net"},
	                  true);
	ECW_ASSERT_ERR(ecw_table_create(NULL, o->c, o->table), ECW_EAUTH);
	assert_token_refused(o);
}

static void test_oauth__token_endpoint_refusal_is_clear(void **state)
{
	struct ot *o = *state;
	const char *msg;

	workload_identity(
	    o, &(struct tokensrv_config){.mode = TOKENSRV_ENTRA, .assertion = ASSERTION, .status = 400},
	    true);
	ECW_ASSERT_ERR(ecw_queue_create(NULL, o->c, o->queue), ECW_EAUTH);
	msg = ecw_error_last()->message;
	ITEST_CHECK(strstr(msg, "workload identity: POST http://127.0.0.1:") != NULL, "message: %s", msg);
	ITEST_CHECK(strstr(msg, "answered 400 invalid_client: AADSTS700213") != NULL, "message: %s", msg);
	ITEST_CHECK(strstr(msg, ASSERTION) == NULL && strstr(msg, "eyJ") == NULL, "message: %s", msg);
	/* Permanent: asked once, storage never asked. */
	assert_int_equal(itest_stats(o->c).requests, 1);
	assert_server_clean(o, 1);
}

static void test_oauth__untrusted_certificate_without_ca_file(void **state)
{
	struct ot *o = *state;

	workload_identity(o, &(struct tokensrv_config){.mode = TOKENSRV_ENTRA, .assertion = ASSERTION},
	                  false);
	ECW_ASSERT_ERR(ecw_queue_create(NULL, o->c, o->queue), ECW_ERROR);
	ITEST_CHECK(strstr(ecw_error_last()->message, "certificate") != NULL, "message: %s",
	            ecw_error_last()->message);
}

/* ---- the worker process ----------------------------------------------------------- */

static void test_oauth__worker_runs_a_job_with_workload_identity(void **state)
{
	struct ot *o = *state;
	char storage[1024], text[2048], path[640], authority[96], id[64] = "", rowkey[96];
	char env_client[96], env_tenant[96], env_file[700], env_authority[128];
	struct ecw_queue_msg put;
	struct ecw_entity *row = NULL;
	struct proc p;
	char poison[64];
	int k;

	workload_identity(o, &(struct tokensrv_config){.mode = TOKENSRV_ENTRA, .assertion = ASSERTION}, true);
	itest_unique_name(poison, sizeof(poison), 'q', "oauthpoison");
	ECW_ASSERT_OK(ecw_queue_create(NULL, o->c, o->queue));
	ECW_ASSERT_OK(
	    ecw_queue_put(&put, o->c, o->queue, "{\"job\":\"count\",\"pk\":\"p\",\"rk\":\"r1\"}", 34, NULL));
	snprintf(id, sizeof(id), "%s", put.id);

	storage_yaml(storage, sizeof(storage), "workload-identity", true, NULL);
	k = snprintf(
	    text, sizeof(text),
	    "%s"
	    "worker: {queue: %s, poison_queue: %s, concurrency: 4, poll_interval: {min: 50ms, max: 200ms}, "
	    "shutdown_grace: 5s}\n"
	    "log: {level: debug, format: json}\n"
	    "metrics: {listen: \"\"}\n"
	    "jobs:\n"
	    "  count: {type: test-count, table: %s}\n",
	    storage, o->queue, poison, o->table);
	assert_true(k > 0 && (size_t)k < sizeof(text));
	proc_write_file(path, sizeof(path), "oauth-worker.yaml", text);
	snprintf(authority, sizeof(authority), "%s/", tokensrv_base(o->srv));
	snprintf(env_client, sizeof(env_client), "AZURE_CLIENT_ID=%s", TOKENSRV_CLIENT_ID);
	snprintf(env_tenant, sizeof(env_tenant), "AZURE_TENANT_ID=%s", TOKENSRV_TENANT);
	snprintf(env_file, sizeof(env_file), "AZURE_FEDERATED_TOKEN_FILE=%s", o->token_file);
	snprintf(env_authority, sizeof(env_authority), "AZURE_AUTHORITY_HOST=%s", authority);
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {env_client, env_tenant, env_file, env_authority, NULL};
	proc_start(&p, "oauth-worker", args, env);

	if (!proc_wait_count(&p, 1, 20000, "message", "message_id", id, "outcome", "succeeded", NULL))
		fail_msg("the worker did not process the message; log %s:\n%s", p.log_path,
		         proc_tail(p.log_path, 30));
	assert_int_equal(proc_count(&p, "start", "auth", "workload-identity", NULL), 1);
	/* test-count's row: PartitionKey the message's rk, RowKey its id and delivery. */
	snprintf(rowkey, sizeof(rowkey), "%s~1", id);
	ECW_ASSERT_OK(ecw_table_get(&row, o->c, o->table, "r1", rowkey));
	ecw_entity_free(row);
	proc_stop(&p, 10000);
	/* Two processes, one token each. */
	assert_server_clean(o, 2);
	/* No token and no assertion in the log: not whole, and no JWT at all
	 * (the secret list holds 255 bytes a secret: the token's tail will do). */
	const char *token = tokensrv_last_token(o->srv);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	ITEST_CHECK(strstr(log.text, "eyJ") == NULL, "a JWT in the log %s", p.log_path);
	proc_log_dispose(&log);
	proc_add_secret(strlen(token) > 200 ? token + strlen(token) - 200 : token);
	proc_add_secret(ASSERTION);
	proc_assert_logs_clean();
	ECW_ASSERT_OK(ecw_queue_delete_queue(o->c, o->queue));
	ECW_ASSERT_OK(ecw_queue_delete_queue(o->c, poison));
	ECW_ASSERT_OK(ecw_table_delete_table(o->c, o->table));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_oauth__workload_identity_queue_table_and_blob, ot_setup,
	                                    ot_teardown),
	    cmocka_unit_test_setup_teardown(test_oauth__managed_identity_imds, ot_setup, ot_teardown),
	    cmocka_unit_test_setup_teardown(test_oauth__managed_identity_app_service, ot_setup, ot_teardown),
	    cmocka_unit_test_setup_teardown(test_oauth__expired_token_is_refused, ot_setup, ot_teardown),
	    cmocka_unit_test_setup_teardown(test_oauth__wrong_audience_is_refused, ot_setup, ot_teardown),
	    cmocka_unit_test_setup_teardown(test_oauth__token_endpoint_refusal_is_clear, ot_setup,
	                                    ot_teardown),
	    cmocka_unit_test_setup_teardown(test_oauth__untrusted_certificate_without_ca_file, ot_setup,
	                                    ot_teardown),
	    cmocka_unit_test_setup_teardown(test_oauth__worker_runs_a_job_with_workload_identity, ot_setup,
	                                    ot_teardown),
	};
	return cmocka_run_group_tests_name("oauth", tests, NULL, NULL);
}
