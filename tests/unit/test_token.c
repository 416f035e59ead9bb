/* SPDX-License-Identifier: MIT */
/* test_token.c - the Entra ID token credential through the fake transport:
 * token answers as each endpoint writes them (expires_in as a number or a
 * string, expires_on), the exact requests (workload identity's form, IMDS and
 * App Service queries and headers), the bearer header on storage requests,
 * refresh timing on a stopped clock (before expiry, a failed refresh keeping
 * the old token, a refused token replaced once), how failures are classed,
 * secrets kept out of every message, and one fetch shared by many threads. */
#include "support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOKEN1 "eyJ0eXAiOiJKV1QifQ.eyJhdWQiOiJodHRwczovL3N0b3JhZ2UuYXp1cmUuY29tIn0.b25l"
#define TOKEN2 "eyJ0eXAiOiJKV1QifQ.eyJhdWQiOiJodHRwczovL3N0b3JhZ2UuYXp1cmUuY29tIn0.dHdv"
#define ASSERTION1 "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YTpiIn0.QVNTRVJUMQ"
#define ASSERTION2 "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YTpiIn0.QVNTRVJUMg"
#define ANSWER1 "{\"token_type\":\"Bearer\",\"expires_in\":3600,\"access_token\":\"" TOKEN1 "\"}"
#define ANSWER2 "{\"token_type\":\"Bearer\",\"expires_in\":3600,\"access_token\":\"" TOKEN2 "\"}"
#define TENANT "72f988bf-86f1-41af-91ab-2d7cd011db47"
#define CLIENT_ID "0c4bd8c5-6a1e-4b8e-8f2b-5d1e6b9a3c21"
#define TOKEN_PATH "/" TENANT "/oauth2/v2.0/token"
#define ENDPOINTS                                                                                            \
	"QueueEndpoint=https://acct.queue.core.windows.net;TableEndpoint=https://acct.table.core.windows.net"
#define HOUR_MS (3600 * 1000LL)

static const struct ecw_client_options opts = {3,    100,  1000, 30000, 5000, false,
                                               NULL, NULL, NULL, NULL,  false};

struct fx {
	struct ecw_account *acct;
	struct ecw_client *c;
	struct fake_transport fake;
	char token_file[64];
};

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static struct fx *fx_new(const struct ecw_token_options *o)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct ecw_token_credential *cred = NULL;

	assert_non_null(fx);
	assert_int_equal(ecw_account_parse_endpoints(&fx->acct, ENDPOINTS), 0);
	assert_int_equal(ecw_token_credential_new(&cred, o), 0);
	ecw_account_take_credential(fx->acct, cred);
	assert_int_equal(ecw_client_new(&fx->c, fx->acct, &opts), 0);
	fake_init(&fx->fake, fx->acct);
	ecw_client_set_transport(fx->c, fake_send, &fx->fake);
	sleeps_reset();
	clock_fake_set(1000 * HOUR_MS);
	return fx;
}

/* Workload identity with a token file holding ASSERTION1 (and a newline). */
static struct fx *wi_new(void)
{
	char path[64];
	struct fx *fx;

	snprintf(path, sizeof(path), "/tmp/ecw-test-token.%ld", (long)getpid());
	write_file(path, ASSERTION1 "\n");
	fx = fx_new(&(struct ecw_token_options){.source = ECW_TOKEN_WORKLOAD_IDENTITY,
	                                        .authority_host = "https://login.example.net",
	                                        .tenant_id = TENANT,
	                                        .client_id = CLIENT_ID,
	                                        .federated_token_file = path});
	snprintf(fx->token_file, sizeof(fx->token_file), "%s", path);
	return fx;
}

static void fx_free(struct fx *fx)
{
	ecw_client_free(fx->c);
	fake_dispose(&fx->fake);
	ecw_account_free(fx->acct);
	if (fx->token_file[0])
		unlink(fx->token_file);
	free(fx);
	clock_real();
}

/* One storage request: GET {queue}/jobs?comp=metadata. */
static int send_queue(struct ecw_client *c)
{
	struct ecw_request r;
	struct ecw_response resp;
	int err;

	ecw_request_init(&r, ECW_SVC_QUEUE, "GET");
	ecw_response_init(&resp);
	assert_int_equal(ecw_buf_adds(&r.path, "/jobs"), 0);
	assert_int_equal(ecw_request_add_query(&r, "comp", "metadata"), 0);
	err = ecw_client_send(&resp, c, &r);
	ecw_response_dispose(&resp);
	ecw_request_dispose(&r);
	return err;
}

static size_t count_token_requests(const struct fake_transport *f, const char *path)
{
	size_t n = 0;
	for (size_t i = 0; i < f->nreqs; i++)
		n += strcmp(f->reqs[i].path, path) == 0;
	return n;
}

/* ---- answers ------------------------------------------------------------- */

static void parse_ok(const char *body, int64_t now, const char *want_token, int64_t want_life,
                     int64_t want_refresh)
{
	char *tok = NULL;
	int64_t life = -1, refresh = -1;

	if (ecw_token_parse_response(&tok, &life, &refresh, body, strlen(body), now) != 0)
		fail_msg("parse of %s: %s", body, ecw_error_last()->message);
	assert_str(tok, want_token);
	assert_int_equal(life, want_life);
	assert_int_equal(refresh, want_refresh);
	free(tok);
}

static void parse_bad(const char *body, const char *needle)
{
	char *tok = (char *)1;
	int64_t life, refresh;

	assert_int_equal(ecw_token_parse_response(&tok, &life, &refresh, body, strlen(body), 1700000000),
	                 ECW_ERROR);
	assert_null(tok);
	if (!str_contains(ecw_error_last()->message, needle))
		fail_msg("message \"%s\" lacks \"%s\"", ecw_error_last()->message, needle);
	assert_false(str_contains(ecw_error_last()->message, "eyJ"));
}

static void test_token__answer_expires_in_number(void **state)
{
	(void)state;
	/* Entra ID v2.0 */
	parse_ok(
	    "{\"token_type\":\"Bearer\",\"expires_in\":3599,\"ext_expires_in\":3599,\"access_token\":\"" TOKEN1
	    "\"}",
	    0, TOKEN1, 3599, 0);
}

static void test_token__answer_expires_in_string(void **state)
{
	(void)state;
	/* IMDS: numbers as strings, expires_in wins over expires_on */
	parse_ok(
	    "{\"access_token\":\"" TOKEN1 "\",\"refresh_token\":\"\",\"expires_in\":\"86399\","
	    "\"expires_on\":\"1700086399\",\"not_before\":\"1700000000\",\"resource\":\"https://storage.azure.com/\","
	    "\"token_type\":\"Bearer\"}",
	    1700000000 + 500, TOKEN1, 86399, 0);
}

static void test_token__answer_expires_on(void **state)
{
	(void)state;
	/* App Service 2019-08-01: only expires_on, seconds since the epoch, as a string */
	parse_ok("{\"access_token\":\"" TOKEN2
	         "\",\"expires_on\":\"1700003600\",\"resource\":\"https://storage.azure.com/\","
	         "\"token_type\":\"Bearer\",\"client_id\":\"" CLIENT_ID "\"}",
	         1700000000, TOKEN2, 3600, 0);
	parse_ok("{\"access_token\":\"" TOKEN2 "\",\"expires_on\":1700000060}", 1700000000, TOKEN2, 60, 0);
	/* refresh_in, where the endpoint sends it, is kept */
	parse_ok("{\"access_token\":\"" TOKEN1 "\",\"expires_in\":86400,\"refresh_in\":43200}", 0, TOKEN1,
	         86400, 43200);
}

static void test_token__answer_errors(void **state)
{
	(void)state;
	parse_bad("not json", "not a JSON object");
	parse_bad("[1]", "not a JSON object");
	parse_bad("{\"expires_in\":3600}", "no access_token");
	parse_bad("{\"access_token\":\"\",\"expires_in\":3600}", "no access_token");
	parse_bad("{\"access_token\":\"" TOKEN1 "\"}", "neither expires_in nor expires_on");
	parse_bad("{\"access_token\":\"" TOKEN1 "\",\"expires_in\":\"12x\"}", "expires_in is not a number");
	parse_bad("{\"access_token\":\"" TOKEN1 "\",\"expires_in\":\"\"}", "expires_in is not a number");
	parse_bad("{\"access_token\":\"" TOKEN1 "\",\"expires_on\":true}", "expires_on is not a time");
	parse_bad("{\"access_token\":\"" TOKEN1 "\",\"expires_on\":1699999999}", "already expired");
	parse_bad("{\"access_token\":\"a b\",\"expires_in\":3600}", "not a token");
	/* Beyond any time (fuzz_token_response): infinity, int64's end, and
	 * a lifetime whose milliseconds would overflow. */
	parse_bad("{\"access_token\":\"" TOKEN1 "\",\"expires_on\":1003.6e800}", "expires_on is not a time");
	parse_bad("{\"access_token\":\"" TOKEN1 "\",\"expires_in\":-1e400}", "expires_in is not a number");
	parse_bad("{\"access_token\":\"" TOKEN1 "\",\"expires_in\":9223372036854775807}",
	          "expires_in is not a number");
	parse_bad("{\"access_token\":\"" TOKEN1 "\",\"expires_in\":\"100000000001\"}",
	          "expires_in is not a number");
	parse_ok("{\"access_token\":\"" TOKEN1 "\",\"expires_in\":3599.9}", 0, TOKEN1, 3599, 0);
}

/* An error answer's summary, as quoted in error messages: the first line of
 * the code and of the description, JWTs cut out, within the buffer even
 * when a cut would lengthen the text ("eyJx" is shorter than "[JWT]"). */
static void summary(char *out, size_t cap, const char *body)
{
	ecw_token_error_summary(out, cap, body, strlen(body));
}

static void test_token__error_summary(void **state)
{
	char out[40], big[256];
	(void)state;

	summary(big, sizeof(big),
	        "{\"error\":\"invalid_client\",\"error_description\":"
	        "\"AADSTS7000215: bad assertion " ASSERTION1 " here\\r\\nTrace ID: 1\"}");
	assert_string_equal(big, "invalid_client: AADSTS7000215: bad assertion [JWT] here");
	summary(big, sizeof(big), "{\"error\":\"in\\nvalid\",\"message\":\"m\"}");
	assert_string_equal(big, "in: m");
	summary(big, sizeof(big), "{\"message\":\"No managed identity endpoint found.\"}");
	assert_string_equal(big, "No managed identity endpoint found.");
	summary(big, sizeof(big), "[]");
	assert_string_equal(big, "");
	/* 39 bytes fit, and the eight runs written as "[JWT]" would take 47:
	 * cut in place, that wrote past the buffer. */
	memset(out, 'z', sizeof(out));
	summary(out, sizeof(out), "{\"message\":\"eyJx eyJx eyJx eyJx eyJx eyJx eyJx eyJx\"}");
	assert_int_equal(strlen(out), sizeof(out) - 1);
	assert_string_equal(out, "[JWT] [JWT] [JWT] [JWT] [JWT] [JWT] [JW");
}

static void test_token__refresh_timing(void **state)
{
	(void)state;
	/* An hour: five minutes before expiry. */
	assert_int_equal(ecw_token_refresh_after_ms(HOUR_MS, 0), HOUR_MS - 300000);
	/* Short tokens: at half-life. */
	assert_int_equal(ecw_token_refresh_after_ms(600000, 0), 300000);
	assert_int_equal(ecw_token_refresh_after_ms(120000, 0), 60000);
	/* The endpoint's refresh_in when it is earlier. */
	assert_int_equal(ecw_token_refresh_after_ms(24 * HOUR_MS, 12 * HOUR_MS), 12 * HOUR_MS);
	assert_int_equal(ecw_token_refresh_after_ms(HOUR_MS, 2 * HOUR_MS), HOUR_MS - 300000);
	/* Sent until a minute before expiry, or a quarter of a short life. */
	assert_int_equal(ecw_token_usable_ms(HOUR_MS), HOUR_MS - 60000);
	assert_int_equal(ecw_token_usable_ms(120000), 90000);
}

/* ---- requests ------------------------------------------------------------ */

static void test_token__workload_identity_request(void **state)
{
	struct fx *fx = wi_new();
	const struct fake_request *q;
	(void)state;

	fake_respond(&fx->fake, 200, "Content-Type: application/json\n", ANSWER1);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	assert_int_equal(fx->fake.nreqs, 2);
	q = &fx->fake.reqs[0];
	assert_str(q->method, "POST");
	assert_str(q->url, "https://login.example.net/" TENANT "/oauth2/v2.0/token");
	assert_str(q->content_type, "application/x-www-form-urlencoded");
	assert_str(fake_header(q, "Accept"), "application/json");
	assert_null(fake_header(q, "Authorization"));
	assert_str(q->body,
	           "client_id=" CLIENT_ID "&scope=https%3A%2F%2Fstorage.azure.com%2F.default"
	           "&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer"
	           "&client_assertion=" ASSERTION1 "&grant_type=client_credentials");

	/* The storage request carries the token, and a version that takes OAuth. */
	q = &fx->fake.reqs[1];
	assert_str(q->url, "https://acct.queue.core.windows.net/jobs?comp=metadata");
	assert_str(fake_header(q, "Authorization"), "Bearer " TOKEN1);
	assert_str(fake_header(q, "x-ms-version"), "2021-12-02");
	assert_non_null(fake_header(q, "x-ms-date"));
	fx_free(fx);
}

static void test_token__federated_token_read_again_for_each_token(void **state)
{
	struct fx *fx = wi_new();
	(void)state;

	fake_respond(&fx->fake, 200, NULL, ANSWER1);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	/* kubelet rotates the file; the next exchange sends the new one. */
	write_file(fx->token_file, ASSERTION2);
	clock_fake_advance(HOUR_MS - 300000);
	fake_respond(&fx->fake, 200, NULL, ANSWER2);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	assert_int_equal(fx->fake.nreqs, 4);
	assert_true(str_contains(fx->fake.reqs[2].body, "&client_assertion=" ASSERTION2 "&"));
	assert_str(fake_header(&fx->fake.reqs[3], "Authorization"), "Bearer " TOKEN2);
	fx_free(fx);
}

static void test_token__imds_request(void **state)
{
	struct fx *fx = fx_new(
	    &(struct ecw_token_options){.source = ECW_TOKEN_MANAGED_IDENTITY, .mi_client_id = CLIENT_ID});
	const struct fake_request *q;
	(void)state;

	fake_respond(&fx->fake, 200, NULL,
	             "{\"access_token\":\"" TOKEN1
	             "\",\"expires_in\":\"3599\",\"expires_on\":\"1\",\"token_type\":\"Bearer\"}");
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	q = &fx->fake.reqs[0];
	assert_str(q->method, "GET");
	assert_str(q->url, "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01"
	                   "&resource=https%3A%2F%2Fstorage.azure.com%2F&client_id=" CLIENT_ID);
	assert_str(fake_header(q, "Metadata"), "true");
	assert_null(fake_header(q, "X-IDENTITY-HEADER"));
	assert_null(q->body);
	assert_str(fake_header(&fx->fake.reqs[1], "Authorization"), "Bearer " TOKEN1);
	fx_free(fx);
}

static void test_token__app_service_request(void **state)
{
	struct fx *fx = fx_new(&(struct ecw_token_options){.source = ECW_TOKEN_MANAGED_IDENTITY,
	                                                   .endpoint = "http://localhost:42356/msi/token",
	                                                   .identity_header = "hdr-secret-1234"});
	const struct fake_request *q;
	(void)state;

	fake_respond(&fx->fake, 200, NULL,
	             "{\"access_token\":\"" TOKEN1 "\",\"expires_on\":\"99999999999\"}");
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	q = &fx->fake.reqs[0];
	assert_str(
	    q->url,
	    "http://localhost:42356/msi/token?api-version=2019-08-01&resource=https%3A%2F%2Fstorage.azure.com%2F");
	assert_str(fake_header(q, "X-IDENTITY-HEADER"), "hdr-secret-1234");
	assert_null(fake_header(q, "Metadata"));
	fx_free(fx);
}

static void test_token__table_requests_carry_the_token(void **state)
{
	struct fx *fx = wi_new();
	(void)state;

	fake_respond(&fx->fake, 200, NULL, ANSWER1);
	fake_respond(&fx->fake, 204, NULL, NULL);
	assert_int_equal(ecw_table_create(NULL, fx->c, "Tbl"), 0);
	assert_str(fake_header(&fx->fake.reqs[1], "Authorization"), "Bearer " TOKEN1);
	/* Table OAuth needs 2019-02-02 or later. */
	assert_str(fake_header(&fx->fake.reqs[1], "x-ms-version"), "2019-02-02");
	fx_free(fx);
}

/* ---- the cache ----------------------------------------------------------- */

static void test_token__cached_until_due_then_refreshed(void **state)
{
	struct fx *fx = wi_new();
	(void)state;

	fake_respond(&fx->fake, 200, NULL, ANSWER1);
	fake_always(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	clock_fake_advance(HOUR_MS - 300000 - 1);
	assert_int_equal(send_queue(fx->c), 0);
	assert_int_equal(count_token_requests(&fx->fake, TOKEN_PATH), 1);
	assert_str(fake_header(&fx->fake.reqs[2], "Authorization"), "Bearer " TOKEN1);
	/* Five minutes before expiry: a new one. */
	clock_fake_advance(1);
	fx->fake.nsteps = fx->fake.next = 0;
	fake_respond(&fx->fake, 200, NULL, ANSWER2);
	assert_int_equal(send_queue(fx->c), 0);
	assert_int_equal(count_token_requests(&fx->fake, TOKEN_PATH), 2);
	assert_str(fake_header(&fx->fake.reqs[4], "Authorization"), "Bearer " TOKEN2);
	fx_free(fx);
}

static void test_token__failed_refresh_keeps_the_old_token(void **state)
{
	struct fx *fx = wi_new();
	(void)state;

	fake_respond(&fx->fake, 200, NULL, ANSWER1);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	clock_fake_advance(HOUR_MS - 300000);
	/* Due: the endpoint fails, the old token is still good and is used. */
	fake_respond(&fx->fake, 503, NULL, "{\"error\":\"temporarily_unavailable\"}");
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	assert_int_equal(fx->fake.nreqs, 4);
	assert_str(fake_header(&fx->fake.reqs[3], "Authorization"), "Bearer " TOKEN1);
	assert_int_equal(sleeps_count(), 0);
	/* Not asked again at once... */
	clock_fake_advance(5000);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	assert_int_equal(fx->fake.nreqs, 5);
	/* ...but ten seconds later. */
	clock_fake_advance(5000);
	fake_respond(&fx->fake, 200, NULL, ANSWER2);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	assert_int_equal(count_token_requests(&fx->fake, TOKEN_PATH), 3);
	assert_str(fake_header(&fx->fake.reqs[6], "Authorization"), "Bearer " TOKEN2);
	fx_free(fx);
}

static void test_token__no_usable_token_and_endpoint_down_is_transient(void **state)
{
	struct fx *fx = wi_new();
	int err;
	(void)state;

	fake_respond(&fx->fake, 200, NULL, ANSWER1);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	clock_fake_advance(HOUR_MS - 60000); /* past the usable margin */
	fake_always(&fx->fake, 503, NULL, "{\"error\":\"temporarily_unavailable\"}");
	err = send_queue(fx->c);
	assert_int_equal(err, ECW_EBUSY);
	assert_true(ecw_error_is_transient(err));
	/* Each of the client's tries asked for a token; no storage request went out without one. */
	assert_int_equal(count_token_requests(&fx->fake, TOKEN_PATH), 1 + 3);
	assert_int_equal(fx->fake.nreqs, 2 + 3);
	assert_int_equal(sleeps_count(), 2);
	assert_true(
	    str_contains(ecw_error_last()->message, "workload identity: POST https://login.example.net/"));
	assert_true(str_contains(ecw_error_last()->message, "answered 503"));
	fx_free(fx);
}

static void test_token__network_failure_is_transient(void **state)
{
	struct fx *fx = fx_new(&(struct ecw_token_options){.source = ECW_TOKEN_MANAGED_IDENTITY});
	(void)state;

	fake_net_error(&fx->fake, ECW_ETRANSIENT);
	fake_respond(&fx->fake, 404, NULL,
	             "{\"error\":\"not_found\",\"error_description\":\"IMDS is updating\"}");
	fake_respond(&fx->fake, 200, NULL, "{\"access_token\":\"" TOKEN1 "\",\"expires_in\":\"3600\"}");
	fake_respond(&fx->fake, 200, NULL, NULL);
	/* A reset, then IMDS's 404 while it updates: both retried. */
	assert_int_equal(send_queue(fx->c), 0);
	assert_int_equal(fx->fake.nreqs, 4);
	assert_int_equal(sleeps_count(), 2);
	fx_free(fx);
}

static void test_token__refusal_is_auth_error_without_secrets(void **state)
{
	struct fx *fx = wi_new();
	const char *msg;
	(void)state;

	fake_always(
	    &fx->fake, 400, "x-ms-request-id: 5f1a\n",
	    "{\"error\":\"invalid_client\",\"error_description\":\"AADSTS700213: No matching federated identity "
	    "record found for presented assertion " ASSERTION1 ".\\r\\nTrace ID: 1\\r\\nCorrelation ID: 2\","
	    "\"error_codes\":[700213]}");
	assert_int_equal(send_queue(fx->c), ECW_EAUTH);
	/* Permanent: asked once, nothing sent to storage, no backoff. */
	assert_int_equal(fx->fake.nreqs, 1);
	assert_int_equal(sleeps_count(), 0);
	msg = ecw_error_last()->message;
	assert_int_equal(ecw_error_last()->http_status, 400);
	assert_str(ecw_error_last()->request_id, "5f1a");
	assert_true(
	    str_contains(msg, "answered 400 invalid_client: AADSTS700213: No matching federated identity"));
	assert_true(str_contains(msg, "AZURE_CLIENT_ID"));
	assert_false(str_contains(msg, "Trace ID"));
	assert_false(str_contains(msg, ASSERTION1));
	assert_false(str_contains(msg, "eyJ"));
	/* 401 likewise. */
	fx->fake.fallback.status = 401;
	assert_int_equal(send_queue(fx->c), ECW_EAUTH);
	fx_free(fx);
}

static void test_token__storage_refusal_gets_one_new_token(void **state)
{
	struct fx *fx = wi_new();
	(void)state;

	fake_respond(&fx->fake, 200, NULL, ANSWER1);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	/* Ten minutes on, the service refuses the token (revoked): a new one, once. */
	clock_fake_advance(600000);
	fake_respond(&fx->fake, 401, "x-ms-error-code: InvalidAuthenticationInfo\n", NULL);
	fake_respond(&fx->fake, 200, NULL, ANSWER2);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_queue(fx->c), 0);
	assert_int_equal(fx->fake.nreqs, 5);
	assert_str(fake_header(&fx->fake.reqs[4], "Authorization"), "Bearer " TOKEN2);
	assert_int_equal(sleeps_count(), 0);
	/* A freshly minted token that is refused is not replaced: the error stands. */
	fake_respond(&fx->fake, 403, "x-ms-error-code: AuthenticationFailed\n", NULL);
	assert_int_equal(send_queue(fx->c), ECW_EAUTH);
	assert_int_equal(fx->fake.nreqs, 6);
	assert_true(str_contains(ecw_error_last()->message, "the service refused the access token"));
	assert_false(str_contains(ecw_error_last()->message, "eyJ"));
	fx_free(fx);
}

/* The federated assertion goes to the authority host: https only, but for a loopback token server. */
static void test_token__authority_host_must_be_https(void **state)
{
	static const char *const refused[] = {"http://login.microsoftonline.com/", "http://10.1.2.3:8080/",
	                                      "http://localhost.example.com/", "ftp://login.example.com/"};
	static const char *const accepted[] = {"https://login.microsoftonline.us/", "http://127.0.0.1:8080/",
	                                       "http://localhost:1", "http://[::1]:8080/"};
	struct ecw_token_credential *cred = NULL;
	struct ecw_token_options o = {.source = ECW_TOKEN_WORKLOAD_IDENTITY,
	                              .tenant_id = TENANT,
	                              .client_id = CLIENT_ID,
	                              .federated_token_file = "/x"};
	(void)state;

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		o.authority_host = refused[i];
		assert_int_equal(ecw_token_credential_new(&cred, &o), ECW_EINVALID);
		assert_null(cred);
		assert_true(
		    str_contains(ecw_error_last()->message, "AZURE_AUTHORITY_HOST must be an https:// URL"));
	}
	for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
		o.authority_host = accepted[i];
		assert_int_equal(ecw_token_credential_new(&cred, &o), 0);
		ecw_token_credential_free(cred);
		cred = NULL;
	}
}

static void test_token__options_errors(void **state)
{
	struct ecw_token_credential *cred = (struct ecw_token_credential *)1;
	struct ecw_token_options o = {.source = ECW_TOKEN_WORKLOAD_IDENTITY,
	                              .tenant_id = TENANT,
	                              .client_id = CLIENT_ID,
	                              .federated_token_file = "/x"};
	(void)state;

	o.client_id = NULL;
	assert_int_equal(ecw_token_credential_new(&cred, &o), ECW_EINVALID);
	assert_null(cred);
	assert_true(str_contains(ecw_error_last()->message, "AZURE_CLIENT_ID"));
	o.client_id = CLIENT_ID;
	o.tenant_id = "";
	assert_int_equal(ecw_token_credential_new(&cred, &o), ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "AZURE_TENANT_ID"));
	o.tenant_id = "a/../b";
	assert_int_equal(ecw_token_credential_new(&cred, &o), ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "AZURE_TENANT_ID"));
	o.tenant_id = TENANT;
	o.federated_token_file = NULL;
	assert_int_equal(ecw_token_credential_new(&cred, &o), ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "AZURE_FEDERATED_TOKEN_FILE"));
	o.federated_token_file = "/x";
	o.authority_host = "login.microsoftonline.com";
	assert_int_equal(ecw_token_credential_new(&cred, &o), ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "AZURE_AUTHORITY_HOST"));
	o = (struct ecw_token_options){.source = ECW_TOKEN_MANAGED_IDENTITY,
	                               .endpoint = "http://x/token?a=b"};
	assert_int_equal(ecw_token_credential_new(&cred, &o), ECW_EINVALID);
	assert_true(str_contains(ecw_error_last()->message, "managed identity"));
}

static void test_token__unreadable_token_file_is_auth_error(void **state)
{
	struct fx *fx = wi_new();
	(void)state;

	unlink(fx->token_file);
	assert_int_equal(send_queue(fx->c), ECW_EAUTH);
	assert_int_equal(fx->fake.nreqs, 0);
	assert_true(str_contains(ecw_error_last()->message, "cannot read the federated token file"));
	write_file(fx->token_file, "\n");
	assert_int_equal(send_queue(fx->c), ECW_EAUTH);
	assert_true(str_contains(ecw_error_last()->message, "is empty"));
	fx_free(fx);
}

/* ---- threads ------------------------------------------------------------- */

#define NTHREADS 8

struct worker {
	struct ecw_client *c;
	struct fake_transport fake;
	pthread_barrier_t *go;
	int err;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	pthread_barrier_wait(w->go);
	w->err = send_queue(w->c);
	return NULL;
}

static void test_token__threads_share_one_fetch(void **state)
{
	struct fx *fx = wi_new();
	struct worker w[NTHREADS];
	pthread_t tid[NTHREADS];
	pthread_barrier_t go;
	size_t fetches = 0;
	(void)state;

	clock_real();
	pthread_barrier_init(&go, NULL, NTHREADS);
	for (int i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		assert_int_equal(ecw_client_new(&w[i].c, fx->acct, &opts), 0);
		fake_init(&w[i].fake, fx->acct);
		/* Token answers are slow: the others arrive while one fetches. */
		w[i].fake.real_sleep_ms = 200;
		fake_always(&w[i].fake, 200, NULL, ANSWER1);
		ecw_client_set_transport(w[i].c, fake_send, &w[i].fake);
		w[i].go = &go;
	}
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&tid[i], NULL, worker_main, &w[i]), 0);
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(tid[i], NULL);
		assert_int_equal(w[i].err, 0);
		fetches += count_token_requests(&w[i].fake, TOKEN_PATH);
		assert_str(fake_header(&w[i].fake.reqs[w[i].fake.nreqs - 1], "Authorization"),
		           "Bearer " TOKEN1);
		ecw_client_free(w[i].c);
		fake_dispose(&w[i].fake);
	}
	assert_int_equal(fetches, 1);
	pthread_barrier_destroy(&go);
	fx_free(fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_token__answer_expires_in_number),
	    cmocka_unit_test(test_token__answer_expires_in_string),
	    cmocka_unit_test(test_token__answer_expires_on),
	    cmocka_unit_test(test_token__answer_errors),
	    cmocka_unit_test(test_token__error_summary),
	    cmocka_unit_test(test_token__refresh_timing),
	    cmocka_unit_test(test_token__workload_identity_request),
	    cmocka_unit_test(test_token__federated_token_read_again_for_each_token),
	    cmocka_unit_test(test_token__imds_request),
	    cmocka_unit_test(test_token__app_service_request),
	    cmocka_unit_test(test_token__table_requests_carry_the_token),
	    cmocka_unit_test(test_token__cached_until_due_then_refreshed),
	    cmocka_unit_test(test_token__failed_refresh_keeps_the_old_token),
	    cmocka_unit_test(test_token__no_usable_token_and_endpoint_down_is_transient),
	    cmocka_unit_test(test_token__network_failure_is_transient),
	    cmocka_unit_test(test_token__refusal_is_auth_error_without_secrets),
	    cmocka_unit_test(test_token__storage_refusal_gets_one_new_token),
	    cmocka_unit_test(test_token__options_errors),
	    cmocka_unit_test(test_token__authority_host_must_be_https),
	    cmocka_unit_test(test_token__unreadable_token_file_is_auth_error),
	    cmocka_unit_test(test_token__threads_share_one_fetch),
	};
	return cmocka_run_group_tests_name("token", tests, NULL, NULL);
}
