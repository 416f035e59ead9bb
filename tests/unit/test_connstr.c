/* SPDX-License-Identifier: MIT */
/* test_connstr.c - connection strings parsed as the Azure SDKs parse them, and
 * errors that name the bad part without ever echoing a key or a signature. */
#include "support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
/* The first bytes of the dev key, base64-decoded. */
static const unsigned char dev_key_head[8] = {0x11, 0xbc, 0xbc, 0xbd, 0xd3, 0x34, 0xdb, 0x13};

/* Distinctive secrets: an error message must never contain them. "U2VjcmV0S2V5U2VjcmV0S2V5" is
 * base64 of "SecretKeySecretKey". */
#define SECRET_KEY "U2VjcmV0S2V5U2VjcmV0S2V5"
#define SECRET_SIG "sig=Zx9SeCrEtSiGnAtUrE%2Bq"

static struct ecw_account *parse_ok(const char *cs)
{
	struct ecw_account *a = NULL;
	int err = ecw_account_parse(&a, cs);
	if (err != 0)
		fail_msg("ecw_account_parse(\"%s\") = %s: %s", cs, ecw_error_name(err),
		         ecw_error_last()->message);
	assert_non_null(a);
	return a;
}

/* Parses cs expecting ECW_EINVALID; the message must mention `names` (case-insensitive)
 * and must not contain any of the secrets. */
static void parse_fails(const char *cs, const char *names)
{
	struct ecw_account *a = NULL;
	ecw_error_clear();
	int err = ecw_account_parse(&a, cs);
	ecw_account_free(a); /* in case it wrongly succeeded */
	assert_int_equal(err, ECW_EINVALID);
	const struct ecw_error *e = ecw_error_last();
	assert_int_equal(e->code, ECW_EINVALID);
	if (!str_contains_ci(e->message, names))
		fail_msg("message \"%s\" does not name \"%s\"", e->message, names);
	static const char *const secrets[] = {
	    SECRET_KEY, "SecretKey", SECRET_SIG, "SeCrEtSiGnAtUrE", "NotBase64!!SeCrEtKeY", "SeCrEtKeY"};
	for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
		if (str_contains(e->message, secrets[i]))
			fail_msg("message \"%s\" leaks the secret \"%s\"", e->message, secrets[i]);
}

static void test_connstr__development_storage(void **state)
{
	(void)state;
	struct ecw_account *a = parse_ok("UseDevelopmentStorage=true");
	assert_str(ecw_account_name(a), "devstoreaccount1");
	assert_str(ecw_account_endpoint(a, ECW_SVC_QUEUE), "http://127.0.0.1:10001/devstoreaccount1");
	assert_str(ecw_account_endpoint(a, ECW_SVC_TABLE), "http://127.0.0.1:10002/devstoreaccount1");
	assert_false(ecw_account_uses_sas(a));
	assert_null(a->sas);
	assert_int_equal(a->key_len, 64);
	assert_memory_equal(a->key, dev_key_head, sizeof(dev_key_head));
	assert_str(a->endpoint_path[ECW_SVC_QUEUE], "/devstoreaccount1");
	assert_str(a->endpoint_path[ECW_SVC_TABLE], "/devstoreaccount1");
	ecw_account_free(a);
}

static void test_connstr__account_and_key_default_suffix(void **state)
{
	(void)state;
	struct ecw_account *a =
	    parse_ok("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" DEV_KEY);
	assert_str(ecw_account_name(a), "acct");
	assert_str(ecw_account_endpoint(a, ECW_SVC_QUEUE), "https://acct.queue.core.windows.net");
	assert_str(ecw_account_endpoint(a, ECW_SVC_TABLE), "https://acct.table.core.windows.net");
	assert_str(a->endpoint_path[ECW_SVC_QUEUE], "");
	assert_false(ecw_account_uses_sas(a));
	/* The key kept its "==" padding: the value was split at the first '=' only. */
	assert_int_equal(a->key_len, 64);
	assert_memory_equal(a->key, dev_key_head, sizeof(dev_key_head));
	ecw_account_free(a);
}

static void test_connstr__endpoint_suffix(void **state)
{
	(void)state;
	struct ecw_account *a = parse_ok("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" DEV_KEY
	                                 ";EndpointSuffix=core.chinacloudapi.cn");
	assert_str(ecw_account_endpoint(a, ECW_SVC_QUEUE), "https://acct.queue.core.chinacloudapi.cn");
	assert_str(ecw_account_endpoint(a, ECW_SVC_TABLE), "https://acct.table.core.chinacloudapi.cn");
	ecw_account_free(a);
	/* The protocol applies to derived endpoints (http with the emulator's account). */
	a = parse_ok("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" DEV_KEY
	             ";EndpointSuffix=emulator.test");
	assert_str(ecw_account_endpoint(a, ECW_SVC_QUEUE), "http://devstoreaccount1.queue.emulator.test");
	ecw_account_free(a);
}

static void test_connstr__explicit_endpoints_win(void **state)
{
	(void)state;
	struct ecw_account *a = parse_ok("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" DEV_KEY
	                                 ";QueueEndpoint=https://10.0.0.5:10001/acct/"
	                                 ";TableEndpoint=https://10.0.0.5:10002/acct");
	assert_str(ecw_account_endpoint(a, ECW_SVC_QUEUE), "https://10.0.0.5:10001/acct");
	assert_str(ecw_account_endpoint(a, ECW_SVC_TABLE), "https://10.0.0.5:10002/acct");
	assert_str(a->endpoint_path[ECW_SVC_QUEUE], "/acct");
	assert_str(a->endpoint_path[ECW_SVC_TABLE], "/acct");
	ecw_account_free(a);

	/* Only one explicit endpoint: the other is still derived. */
	a = parse_ok("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" DEV_KEY
	             ";QueueEndpoint=https://myqueues.example.com/");
	assert_str(ecw_account_endpoint(a, ECW_SVC_QUEUE), "https://myqueues.example.com");
	assert_str(ecw_account_endpoint(a, ECW_SVC_TABLE), "https://acct.table.core.windows.net");
	ecw_account_free(a);
}

static void test_connstr__names_case_insensitive(void **state)
{
	(void)state;
	struct ecw_account *a = parse_ok("defaultendpointsprotocol=https;ACCOUNTNAME=acct;accountKEY=" DEV_KEY
	                                 ";endpointsuffix=example.net");
	assert_str(ecw_account_name(a), "acct");
	assert_str(ecw_account_endpoint(a, ECW_SVC_QUEUE), "https://acct.queue.example.net");
	assert_int_equal(a->key_len, 64);
	ecw_account_free(a);

	a = parse_ok("usedevelopmentstorage=true");
	assert_str(ecw_account_name(a), "devstoreaccount1");
	ecw_account_free(a);
}

static void test_connstr__empty_parts_skipped(void **state)
{
	(void)state;
	struct ecw_account *a =
	    parse_ok(";;DefaultEndpointsProtocol=https;;AccountName=acct;AccountKey=" DEV_KEY ";;");
	assert_str(ecw_account_name(a), "acct");
	assert_str(ecw_account_endpoint(a, ECW_SVC_TABLE), "https://acct.table.core.windows.net");
	assert_int_equal(a->key_len, 64);
	ecw_account_free(a);
}

static void test_connstr__value_split_at_first_equals(void **state)
{
	(void)state;
	/* "QUJDRA==" is base64 of "ABCD": both '=' belong to the value. */
	struct ecw_account *a =
	    parse_ok("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=QUJDRA==");
	assert_int_equal(a->key_len, 4);
	assert_memory_equal(a->key, "ABCD", 4);
	ecw_account_free(a);

	/* A SAS token is full of '=': everything after the first belongs to it. */
	a = parse_ok("SharedAccessSignature=sv=2021-12-02&ss=q&sig=ab%2Bc%3D;"
	             "QueueEndpoint=https://acct.queue.core.windows.net;"
	             "TableEndpoint=https://acct.table.core.windows.net");
	assert_str(a->sas, "sv=2021-12-02&ss=q&sig=ab%2Bc%3D");
	ecw_account_free(a);
}

static void test_connstr__sas(void **state)
{
	(void)state;
	struct ecw_account *a =
	    parse_ok("QueueEndpoint=https://acct.queue.core.windows.net/;"
	             "TableEndpoint=https://acct.table.core.windows.net;"
	             "SharedAccessSignature=?sv=2021-12-02&ss=qt&srt=sco&sp=rwdlacup&sig=abc%2Bdef%3D");
	assert_true(ecw_account_uses_sas(a));
	assert_str(a->sas, "sv=2021-12-02&ss=qt&srt=sco&sp=rwdlacup&sig=abc%2Bdef%3D");
	assert_null(a->key);
	assert_str(ecw_account_name(a), "");
	assert_str(ecw_account_endpoint(a, ECW_SVC_QUEUE), "https://acct.queue.core.windows.net");
	assert_str(ecw_account_endpoint(a, ECW_SVC_TABLE), "https://acct.table.core.windows.net");
	ecw_account_free(a);

	/* With an account name the endpoints are derived as usual. */
	a = parse_ok(
	    "DefaultEndpointsProtocol=https;AccountName=acct;SharedAccessSignature=sv=2021-12-02&sig=x");
	assert_true(ecw_account_uses_sas(a));
	assert_str(a->sas, "sv=2021-12-02&sig=x");
	assert_str(ecw_account_endpoint(a, ECW_SVC_QUEUE), "https://acct.queue.core.windows.net");
	ecw_account_free(a);
}

/* A key's signature, a SAS or a bearer token over plain http can be read on the way: refused, naming the
 * endpoint and the rule, unless the host is loopback or the key is the emulator's published one. */
static void test_connstr__http_refused_for_secrets_off_loopback(void **state)
{
	(void)state;
	parse_fails("AccountName=acct;AccountKey=" SECRET_KEY ";QueueEndpoint=http://10.0.0.5:10001/acct;"
	            "TableEndpoint=https://10.0.0.5:10002/acct",
	            "QueueEndpoint http://10.0.0.5:10001/acct is http://");
	parse_fails("AccountName=acct;AccountKey=" SECRET_KEY ";QueueEndpoint=http://10.0.0.5:10001/acct;"
	            "TableEndpoint=https://10.0.0.5:10002/acct",
	            "loopback host");
	parse_fails("DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=" SECRET_KEY,
	            "QueueEndpoint http://acct.queue.core.windows.net is http://");
	parse_fails("QueueEndpoint=https://q.example.com;TableEndpoint=http://t.example.com;"
	            "SharedAccessSignature=sv=2021-12-02&" SECRET_SIG,
	            "TableEndpoint http://t.example.com is http://: the SharedAccessSignature");
	/* Not loopback: a name that merely starts like one, another range, an IPv6 address. */
	parse_fails("AccountName=acct;AccountKey=" SECRET_KEY ";QueueEndpoint=http://127.0.0.1.example.com/a;"
	            "TableEndpoint=https://h/a",
	            "QueueEndpoint");
	parse_fails("AccountName=acct;AccountKey=" SECRET_KEY ";QueueEndpoint=http://128.0.0.1/a;"
	            "TableEndpoint=https://h/a",
	            "QueueEndpoint");
	parse_fails("AccountName=acct;AccountKey=" SECRET_KEY ";QueueEndpoint=http://[::2]:1/a;"
	            "TableEndpoint=https://h/a",
	            "QueueEndpoint");
	/* The emulator's key with another account name is still refused. */
	parse_fails("DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=" DEV_KEY, "is http://");
}

static void test_connstr__http_allowed_to_loopback_and_the_emulator(void **state)
{
	(void)state;
	static const char *const loopback[] = {"http://127.0.0.1:10001/a", "http://127.9.8.7/a",
	                                       "http://localhost:10001/a", "http://LOCALHOST/a",
	                                       "http://[::1]:10001/a"};
	char cs[512];
	struct ecw_account *a;

	for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++) {
		snprintf(cs, sizeof(cs),
		         "AccountName=acct;AccountKey=" SECRET_KEY ";QueueEndpoint=%s;TableEndpoint=%s",
		         loopback[i], loopback[i]);
		ecw_account_free(parse_ok(cs));
		snprintf(cs, sizeof(cs), "QueueEndpoint=%s;TableEndpoint=%s;SharedAccessSignature=sv=1&sig=x",
		         loopback[i], loopback[i]);
		ecw_account_free(parse_ok(cs));
	}
	/* Azurite in a compose network: the published key is no secret. */
	a = parse_ok("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" DEV_KEY
	             ";QueueEndpoint=http://azurite:10001/devstoreaccount1;"
	             "TableEndpoint=http://azurite:10002/devstoreaccount1");
	assert_str(ecw_account_endpoint(a, ECW_SVC_QUEUE), "http://azurite:10001/devstoreaccount1");
	ecw_account_free(a);
}

/* A bearer token is never sent over http, loopback or not. */
static void test_connstr__http_refused_for_tokens(void **state)
{
	(void)state;
	struct ecw_account *a = NULL;

	assert_int_equal(ecw_account_parse_endpoints(&a, "QueueEndpoint=http://127.0.0.1:1/a;"
	                                                 "TableEndpoint=https://127.0.0.1:2/a"),
	                 ECW_EINVALID);
	assert_null(a);
	assert_true(str_contains(ecw_error_last()->message,
	                         "QueueEndpoint http://127.0.0.1:1/a is http://: with token authentication"));
	assert_int_equal(ecw_account_parse_endpoints(&a, "AccountName=acct;DefaultEndpointsProtocol=http"),
	                 ECW_EINVALID);
	assert_int_equal(ecw_account_parse_endpoints(&a, "QueueEndpoint=https://127.0.0.1:1/a;"
	                                                 "TableEndpoint=https://127.0.0.1:2/a"),
	                 0);
	ecw_account_free(a);
}

static void test_connstr__error_missing_account_name(void **state)
{
	(void)state;
	parse_fails("DefaultEndpointsProtocol=https;AccountKey=" SECRET_KEY, "AccountName");
}

static void test_connstr__error_key_not_base64(void **state)
{
	(void)state;
	parse_fails("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=NotBase64!!SeCrEtKeY",
	            "AccountKey");
	/* Bad padding is not base64 either. */
	parse_fails("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" SECRET_KEY "=",
	            "AccountKey");
}

static void test_connstr__error_unknown_setting(void **state)
{
	(void)state;
	parse_fails("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" SECRET_KEY ";Bogus=1",
	            "Bogus");
	parse_fails("AccountName=acct;"
	            "SharedAccessSignature=sv=1&" SECRET_SIG ";Colour=blue",
	            "Colour");
	/* Found by fuzz_config (whose ${VAR} secret showed in such a name): a
	 * key pasted without "AccountKey=" reads as a setting named by the key
	 * up to its padding; only names that look like names are quoted. */
	parse_fails("AccountName=acct;" SECRET_KEY "==", "part 2 is not a known setting");
	parse_fails("AccountName=acct;SeCrEtKeY0=", "part 2");
	parse_fails("AccountName=acct;AccountKey=" SECRET_KEY ";Sec-retKey=1", "part 3");
}

static void test_connstr__error_part_without_equals(void **state)
{
	(void)state;
	struct ecw_account *a = NULL;
	ecw_error_clear();
	int err = ecw_account_parse(
	    &a, "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" SECRET_KEY ";JustSomeText");
	ecw_account_free(a);
	assert_int_equal(err, ECW_EINVALID);
	const char *msg = ecw_error_last()->message;
	assert_false(str_contains(msg, SECRET_KEY));
	assert_false(str_contains(msg, "SecretKey"));
	/* The part is named by its text or by its position (the 4th). */
	if (!str_contains(msg, "JustSomeText") && !str_contains(msg, "4"))
		fail_msg("message \"%s\" does not name the part without '='", msg);
}

static void test_connstr__error_no_endpoint(void **state)
{
	(void)state;
	parse_fails("SharedAccessSignature=sv=2021-12-02&" SECRET_SIG, "endpoint");
}

static void test_connstr__error_empty(void **state)
{
	(void)state;
	struct ecw_account *a = NULL;
	assert_int_equal(ecw_account_parse(&a, ""), ECW_EINVALID);
	ecw_account_free(a);
	a = NULL;
	assert_int_equal(ecw_account_parse(&a, ";;;"), ECW_EINVALID);
	ecw_account_free(a);
}

static void test_connstr__free_null(void **state)
{
	(void)state;
	ecw_account_free(NULL);
}

/* ---- the secret replaced while clients use it (issue 33) ---------------- */

#define ROT_CS(key) "DefaultEndpointsProtocol=https;AccountName=rotated;AccountKey=" key
#define ROT_SAS                                                                                              \
	"DefaultEndpointsProtocol=https;AccountName=rotated;SharedAccessSignature=sv=2019-02-02&" SECRET_SIG

static uint64_t generation(const struct ecw_account *a)
{
	uint64_t gen = ecw_account_secret_hold(a);

	ecw_account_secret_release(a);
	return gen;
}

/* Only the secret may change: the same secret is no change, another account
 * or endpoint is refused (naming no secret), a key or a SAS goes in with a
 * new generation. */
static void test_connstr__update_secret(void **state)
{
	(void)state;
	struct ecw_account *a = parse_ok(ROT_CS(DEV_KEY));
	uint64_t gen0 = generation(a);

	assert_int_equal(ecw_account_update_secret(a, ROT_CS(DEV_KEY)), 0);
	assert_int_equal(generation(a), gen0);
	static const char *const others[] = {
	    "DefaultEndpointsProtocol=https;AccountName=other;AccountKey=" SECRET_KEY,
	    ROT_CS(SECRET_KEY) ";EndpointSuffix=core.chinacloudapi.cn",
	    ROT_CS(SECRET_KEY) ";QueueEndpoint=https://10.0.0.1/rotated",
	};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		assert_int_equal(ecw_account_update_secret(a, others[i]), ECW_EINVALID);
		assert_true(str_contains(ecw_error_last()->message, "another account or other endpoints"));
		assert_false(str_contains(ecw_error_last()->message, SECRET_KEY));
	}
	assert_int_equal(ecw_account_update_secret(a, "AccountName=rotated;AccountKey=NotBase64!!SeCrEtKeY"),
	                 ECW_EINVALID);
	assert_false(str_contains(ecw_error_last()->message, "SeCrEtKeY"));
	assert_int_equal(generation(a), gen0);
	assert_memory_equal(a->key, dev_key_head, sizeof(dev_key_head));

	assert_int_equal(ecw_account_update_secret(a, ROT_CS(SECRET_KEY)), 1);
	assert_int_equal(generation(a), gen0 + 1);
	assert_int_equal(a->key_len, strlen("SecretKeySecretKey"));
	assert_memory_equal(a->key, "SecretKeySecretKey", a->key_len);
	assert_str(ecw_account_auth_name(a), "shared-key");
	assert_int_equal(ecw_account_update_secret(a, ROT_SAS), 1);
	assert_int_equal(generation(a), gen0 + 2);
	assert_str(ecw_account_auth_name(a), "sas");
	assert_true(ecw_account_uses_sas(a));
	assert_null(a->key);
	ecw_account_free(a);
}

struct counting_reload {
	int calls;
	const char *next; /* the file's new content; NULL: unchanged */
};

static int counting_reload(struct ecw_account *a, void *payload)
{
	struct counting_reload *r = payload;

	r->calls++;
	/* What a reading may meet on the way must not replace the refusal. */
	ecw_error_set(ECW_EINVALID, "the reload's own error");
	return r->next ? ecw_account_update_secret(a, r->next) : 0;
}

/* A refused generation asks the reload only while it is the one in place,
 * at most once per interval; a request signed with an older one just goes
 * again. The refusal stays the caller's last error. */
static void test_connstr__secret_refused_asks_reload_once_per_interval(void **state)
{
	(void)state;
	struct ecw_account *a = parse_ok(ROT_CS(DEV_KEY));
	struct counting_reload r = {0, ROT_CS(SECRET_KEY)};
	uint64_t gen0 = generation(a), gen1;

	clock_fake_set(5000);
	assert_false(ecw_account_secret_refused(a, gen0)); /* no reload: a refusal is final */
	ecw_account_set_reload(a, counting_reload, &r, NULL, 10000);
	ecw_error_set_http(ECW_EAUTH, 403, "AuthorizationFailure", "req-1", "GET /q: 403 refused");
	assert_true(ecw_account_secret_refused(a, gen0));
	assert_int_equal(r.calls, 1);
	assert_int_equal(ecw_error_last()->code, ECW_EAUTH);
	assert_int_equal(ecw_error_last()->http_status, 403);
	assert_str(ecw_error_last()->service_code, "AuthorizationFailure");
	assert_str(ecw_error_last()->request_id, "req-1");
	gen1 = generation(a);
	assert_int_equal(gen1, gen0 + 1);
	/* Another thread's request, signed before the new secret came. */
	assert_true(ecw_account_secret_refused(a, gen0));
	assert_int_equal(r.calls, 1);
	/* The new secret refused too, within the interval: final. */
	r.next = NULL;
	clock_fake_advance(9999);
	assert_false(ecw_account_secret_refused(a, gen1));
	assert_int_equal(r.calls, 1);
	clock_fake_advance(1);
	assert_false(ecw_account_secret_refused(a, gen1)); /* read: nothing new */
	assert_int_equal(r.calls, 2);
	clock_real();
	ecw_account_free(a);
}

struct reader {
	const struct ecw_account *a;
	int mixed; /* readings that saw neither key whole */
};

static void *read_secret(void *arg)
{
	struct reader *rd = arg;

	for (int i = 0; i < 20000; i++) {
		ecw_account_secret_hold(rd->a);
		if (!(rd->a->key_len == 64 && memcmp(rd->a->key, dev_key_head, sizeof(dev_key_head)) == 0) &&
		    !(rd->a->key_len == 18 && memcmp(rd->a->key, "SecretKeySecretKey", 18) == 0))
			rd->mixed++;
		ecw_account_secret_release(rd->a);
	}
	return NULL;
}

/* Readers under the secret's lock see one key or the other, whole, while a
 * reload swaps them back and forth. */
static void test_connstr__secret_swapped_while_read(void **state)
{
	(void)state;
	struct ecw_account *a = parse_ok(ROT_CS(DEV_KEY));
	struct reader rd[3] = {{a, 0}, {a, 0}, {a, 0}};
	pthread_t t[3];

	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&t[i], NULL, read_secret, &rd[i]), 0);
	for (int i = 0; i < 2000; i++)
		assert_int_equal(ecw_account_update_secret(a, i % 2 ? ROT_CS(DEV_KEY) : ROT_CS(SECRET_KEY)),
		                 1);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(rd[i].mixed, 0);
	}
	ecw_account_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_connstr__development_storage),
	    cmocka_unit_test(test_connstr__account_and_key_default_suffix),
	    cmocka_unit_test(test_connstr__endpoint_suffix),
	    cmocka_unit_test(test_connstr__explicit_endpoints_win),
	    cmocka_unit_test(test_connstr__names_case_insensitive),
	    cmocka_unit_test(test_connstr__empty_parts_skipped),
	    cmocka_unit_test(test_connstr__value_split_at_first_equals),
	    cmocka_unit_test(test_connstr__sas),
	    cmocka_unit_test(test_connstr__http_refused_for_secrets_off_loopback),
	    cmocka_unit_test(test_connstr__http_allowed_to_loopback_and_the_emulator),
	    cmocka_unit_test(test_connstr__http_refused_for_tokens),
	    cmocka_unit_test(test_connstr__error_missing_account_name),
	    cmocka_unit_test(test_connstr__error_key_not_base64),
	    cmocka_unit_test(test_connstr__error_unknown_setting),
	    cmocka_unit_test(test_connstr__error_part_without_equals),
	    cmocka_unit_test(test_connstr__error_no_endpoint),
	    cmocka_unit_test(test_connstr__error_empty),
	    cmocka_unit_test(test_connstr__free_null),
	    cmocka_unit_test(test_connstr__update_secret),
	    cmocka_unit_test(test_connstr__secret_refused_asks_reload_once_per_interval),
	    cmocka_unit_test(test_connstr__secret_swapped_while_read),
	};
	return cmocka_run_group_tests_name("connstr", tests, NULL, NULL);
}
