/* SPDX-License-Identifier: MIT */
/* test_client.c - the retry policy (which answers are retried, how long the
 * client waits, what the caller finally sees), the per-attempt date and
 * signature, the test-only fault injection, and the shape of every queue and
 * table request, all through the fake transport on "UseDevelopmentStorage=true". */
#include "support.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BASE_MS 100
#define CAP_MS 1000
#define TRIES 4

#define QPATH "/devstoreaccount1/jobs"
#define TPATH "/devstoreaccount1/jobs"
#define ETAG "W/\"datetime'2026-08-19T10%3A00%3A00.1234567Z'\""

static const struct ecw_client_options test_opts = {.max_tries = TRIES,
                                                    .retry_base_ms = BASE_MS,
                                                    .retry_max_ms = CAP_MS,
                                                    .timeout_ms = 30000,
                                                    .connect_timeout_ms = 5000};

static int fx_setup(void **state)
{
	struct client_fixture *fx;
	client_fixture_setup(&fx, "UseDevelopmentStorage=true", &test_opts);
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	client_fixture_teardown(*state);
	return 0;
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)

/* The bound of the delay before retry n (1-based). */
static int64_t bound(int n)
{
	int64_t b = BASE_MS;
	for (int i = 1; i < n && b < CAP_MS; i++)
		b *= 2;
	return b < CAP_MS ? b : CAP_MS;
}

static void assert_sleeps(size_t want)
{
	assert_int_equal(sleeps_count(), want);
	for (size_t i = 0; i < want; i++) {
		int64_t ms = sleeps_at(i);
		if (ms < 0 || ms > bound((int)i + 1))
			fail_msg("sleep %zu was %lld ms, want 0..%lld", i + 1, (long long)ms,
			         (long long)bound((int)i + 1));
	}
}

/* One plain queue request straight through ecw_client_send. */
static int send_get(struct client_fixture *fx, long *status_out)
{
	struct ecw_request r;
	struct ecw_response resp;
	ecw_request_init(&r, ECW_SVC_QUEUE, "GET");
	ecw_response_init(&resp);
	assert_int_equal(ecw_buf_adds(&r.path, "/jobs"), 0);
	assert_int_equal(ecw_request_add_query(&r, "comp", "metadata"), 0);
	assert_int_equal(ecw_request_set_header(&r, "x-ms-version", ECW_QUEUE_API_VERSION), 0);
	int err = ecw_client_send(&resp, fx->c, &r);
	if (status_out)
		*status_out = resp.status;
	ecw_response_dispose(&resp);
	ecw_request_dispose(&r);
	return err;
}

/* A fresh fixture per sub-case inside one test. */
static struct client_fixture *fresh(void)
{
	struct client_fixture *fx;
	client_fixture_setup(&fx, "UseDevelopmentStorage=true", &test_opts);
	return fx;
}

/* ---- retry policy ------------------------------------------------------------ */

static const long transient[] = {408, 429, 500, 502, 503, 504};

static void test_client__transient_status_retried(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(transient) / sizeof(transient[0]); i++) {
		struct client_fixture *fx = fresh();
		fake_respond(&fx->fake, transient[i], "x-ms-request-id: a\n", NULL);
		fake_respond(&fx->fake, transient[i], "x-ms-request-id: b\n", NULL);
		fake_respond(&fx->fake, 200, "x-ms-approximate-messages-count: 1\n", NULL);
		long status = 0;
		int err = send_get(fx, &status);
		if (err != 0)
			fail_msg("status %ld twice then 200: got %s", transient[i], ecw_error_name(err));
		assert_int_equal(status, 200);
		assert_int_equal(fx->fake.nreqs, 3);
		assert_int_equal(fx->fake.overruns, 0);
		assert_sleeps(2);
		struct ecw_client_stats st;
		ecw_client_stats(&st, fx->c);
		assert_int_equal(st.requests, 3);
		assert_int_equal(st.retries, 2);
		client_fixture_teardown(fx);
	}
}

static void test_client__network_errors_retried(void **state)
{
	struct client_fixture *fx = *state;
	fake_net_error(&fx->fake, ECW_ETRANSIENT);
	fake_net_error(&fx->fake, ECW_ETIMEOUT);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_get(fx, NULL), 0);
	assert_int_equal(fx->fake.nreqs, 3);
	assert_sleeps(2);
}

static void test_client__transient_exhausted(void **state)
{
	(void)state;
	static const int want[] = {ECW_ETIMEOUT,   ECW_EBUSY, ECW_ETRANSIENT,
	                           ECW_ETRANSIENT, ECW_EBUSY, ECW_ETIMEOUT};
	for (size_t i = 0; i < sizeof(transient) / sizeof(transient[0]); i++) {
		struct client_fixture *fx = fresh();
		fake_always(&fx->fake, transient[i], "x-ms-request-id: rid-last\n", NULL);
		int err = send_get(fx, NULL);
		if (err != want[i])
			fail_msg("status %ld every time: got %s, want %s", transient[i], ecw_error_name(err),
			         ecw_error_name(want[i]));
		assert_int_equal(fx->fake.nreqs, TRIES);
		assert_sleeps(TRIES - 1);
		const struct ecw_error *e = ecw_error_last();
		assert_int_equal(e->code, want[i]);
		assert_int_equal(e->http_status, transient[i]);
		assert_string_equal(e->request_id, "rid-last");
		assert_true(ecw_error_is_transient(err));
		client_fixture_teardown(fx);
	}
}

static void test_client__network_exhausted(void **state)
{
	(void)state;
	static const int errs[] = {ECW_ETRANSIENT, ECW_ETIMEOUT};
	for (size_t i = 0; i < 2; i++) {
		struct client_fixture *fx = fresh();
		fake_always_net_error(&fx->fake, errs[i]);
		assert_int_equal(send_get(fx, NULL), errs[i]);
		assert_int_equal(fx->fake.nreqs, TRIES);
		assert_sleeps(TRIES - 1);
		assert_int_equal(ecw_error_last()->http_status, 0);
		client_fixture_teardown(fx);
	}
}

static void test_client__permanent_not_retried(void **state)
{
	(void)state;
	static const long status[] = {400, 401, 403, 404, 409, 412, 413};
	static const int want[] = {ECW_EINVALID,  ECW_EAUTH,         ECW_EAUTH,    ECW_ENOTFOUND,
	                           ECW_ECONFLICT, ECW_EPRECONDITION, ECW_ETOOLARGE};
	for (size_t i = 0; i < sizeof(status) / sizeof(status[0]); i++) {
		struct client_fixture *fx = fresh();
		fake_always(&fx->fake, status[i], "x-ms-error-code: SomeCode\n", NULL);
		int err = send_get(fx, NULL);
		if (err != want[i])
			fail_msg("status %ld: got %s, want %s", status[i], ecw_error_name(err),
			         ecw_error_name(want[i]));
		if (fx->fake.nreqs != 1)
			fail_msg("status %ld was retried (%zu requests)", status[i], fx->fake.nreqs);
		assert_sleeps(0);
		assert_int_equal(ecw_error_last()->http_status, status[i]);
		assert_false(ecw_error_is_transient(err));
		client_fixture_teardown(fx);
	}
}

static void test_client__status_to_err(void **state)
{
	(void)state;
	assert_int_equal(ecw_status_to_err(400, "InvalidInput"), ECW_EINVALID);
	assert_int_equal(ecw_status_to_err(401, ""), ECW_EAUTH);
	assert_int_equal(ecw_status_to_err(403, "AuthorizationFailure"), ECW_EAUTH);
	assert_int_equal(ecw_status_to_err(404, "ResourceNotFound"), ECW_ENOTFOUND);
	assert_int_equal(ecw_status_to_err(409, "EntityAlreadyExists"), ECW_ECONFLICT);
	assert_int_equal(ecw_status_to_err(412, "UpdateConditionNotSatisfied"), ECW_EPRECONDITION);
	assert_int_equal(ecw_status_to_err(413, "RequestBodyTooLarge"), ECW_ETOOLARGE);
	assert_int_equal(ecw_status_to_err(408, ""), ECW_ETIMEOUT);
	assert_int_equal(ecw_status_to_err(429, ""), ECW_EBUSY);
	assert_int_equal(ecw_status_to_err(500, "InternalError"), ECW_ETRANSIENT);
	assert_int_equal(ecw_status_to_err(502, ""), ECW_ETRANSIENT);
	assert_int_equal(ecw_status_to_err(503, "ServerBusy"), ECW_EBUSY);
	assert_int_equal(ecw_status_to_err(504, ""), ECW_ETIMEOUT);
	assert_true(ecw_error_is_transient(ECW_EBUSY));
	assert_true(ecw_error_is_transient(ECW_ETIMEOUT));
	assert_true(ecw_error_is_transient(ECW_ETRANSIENT));
	assert_false(ecw_error_is_transient(ECW_OK));
	assert_false(ecw_error_is_transient(ECW_ENOTFOUND));
	assert_false(ecw_error_is_transient(ECW_EINVALID));
	assert_false(ecw_error_is_transient(ECW_ENOTABLE));
	/* Absent: the entity, or its whole table; nothing else. */
	assert_true(ecw_error_is_absent(ECW_ENOTFOUND));
	assert_true(ecw_error_is_absent(ECW_ENOTABLE));
	assert_false(ecw_error_is_absent(ECW_OK));
	assert_false(ecw_error_is_absent(ECW_ECONFLICT));
	assert_false(ecw_error_is_absent(ECW_EPRECONDITION));
}

/* Delays for retry n stay in [0, cap] and, over evenly spaced rnd values, reach
 * both ends of the range (uniform: full jitter, not a fixed or halved delay). */
static void check_jitter(const struct ecw_client_options *o, int n, int64_t cap)
{
	assert_int_equal(ecw_client_retry_delay_ms(o, n, 0), 0);
	int64_t top = ecw_client_retry_delay_ms(o, n, UINT32_MAX);
	if (top < 0 || top > cap)
		fail_msg("retry %d, rnd max: %lld ms, want 0..%lld", n, (long long)top, (long long)cap);
	int64_t lo = INT64_MAX, hi = -1;
	for (uint32_t k = 0; k <= 1000; k++) {
		int64_t d = ecw_client_retry_delay_ms(o, n, (uint32_t)(k * (UINT32_MAX / 1000u)));
		if (d < 0 || d > cap)
			fail_msg("retry %d: %lld ms, want 0..%lld", n, (long long)d, (long long)cap);
		lo = d < lo ? d : lo;
		hi = d > hi ? d : hi;
	}
	if (lo > cap / 10 || hi < cap * 9 / 10)
		fail_msg("retry %d: delays only span %lld..%lld of 0..%lld ms", n, (long long)lo,
		         (long long)hi, (long long)cap);
}

static void test_client__retry_delay_full_jitter(void **state)
{
	(void)state;
	const struct ecw_client_options o = {4, 200, 5000, 30000, 5000, false, NULL, NULL, NULL, NULL, false};
	for (int n = 1; n <= 70; n++) {
		int64_t cap = 200;
		for (int i = 1; i < n && cap < 5000; i++)
			cap *= 2;
		check_jitter(&o, n, cap < 5000 ? cap : 5000);
	}
	/* The cap holds for very late retries and large settings do not overflow. */
	check_jitter(&o, 1000, 5000);
	check_jitter(&o, INT32_MAX, 5000);
	const struct ecw_client_options big = {.retry_base_ms = 60000, .retry_max_ms = 3600000};
	check_jitter(&big, 1, 60000);
	check_jitter(&big, 7, 3600000);
	check_jitter(&big, 199, 3600000);
}

static void test_client__max_tries_option(void **state)
{
	(void)state;
	const struct ecw_client_options one = {1,    BASE_MS, CAP_MS, 30000, 5000, false,
	                                       NULL, NULL,    NULL,   NULL,  false};
	struct client_fixture *fx;
	client_fixture_setup(&fx, "UseDevelopmentStorage=true", &one);
	fake_always(&fx->fake, 503, NULL, NULL);
	assert_int_equal(send_get(fx, NULL), ECW_EBUSY);
	assert_int_equal(fx->fake.nreqs, 1);
	assert_sleeps(0);
	client_fixture_teardown(fx);

	/* NULL options: the default of 4 tries. */
	client_fixture_setup(&fx, "UseDevelopmentStorage=true", NULL);
	fake_always(&fx->fake, 500, NULL, NULL);
	assert_int_equal(send_get(fx, NULL), ECW_ETRANSIENT);
	assert_int_equal(fx->fake.nreqs, 4);
	assert_int_equal(sleeps_count(), 3);
	client_fixture_teardown(fx);
}

/* ---- dates, signatures and errors -------------------------------------------- */

static void test_client__date_regenerated_and_signed(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 503, NULL, NULL);
	fake_respond(&fx->fake, 200, NULL, NULL);
	/* The first attempt takes more than a second of wall time. */
	fx->fake.real_sleep_ms = 1100;
	time_t before = time(NULL);
	assert_int_equal(send_get(fx, NULL), 0);
	time_t after = time(NULL);
	assert_int_equal(fx->fake.nreqs, 2);
	time_t t[2];
	for (int i = 0; i < 2; i++) {
		const struct fake_request *q = &fx->fake.reqs[i];
		assert_int_equal(fake_header_count(q, "x-ms-date"), 1);
		assert_int_equal(fake_header_count(q, "Authorization"), 1);
		assert_null(fake_header(q, "Date"));
		assert_str(fake_header(q, "x-ms-version"), ECW_QUEUE_API_VERSION);
		assert_true(str_starts(fake_header(q, "Authorization"), "SharedKey devstoreaccount1:"));
		/* The signature covers the date sent with this attempt. */
		assert_true(q->auth_ok);
		assert_int_equal(ecw_date_parse(&t[i], fake_header(q, "x-ms-date")), 0);
		assert_true(t[i] >= before - 1 && t[i] <= after + 1);
	}
	assert_true(t[1] > t[0]);
	assert_string_not_equal(fake_header(&fx->fake.reqs[0], "Authorization"),
	                        fake_header(&fx->fake.reqs[1], "Authorization"));
}

static void test_client__error_fields_from_headers(void **state)
{
	struct client_fixture *fx = *state;
	/* No body at all (as for HEAD): the headers are the only source. */
	fake_respond(
	    &fx->fake, 404,
	    "x-ms-request-id: 2b1c0f2e-0003-0001-0000-000000000000\nx-ms-error-code: QueueNotFound\n", NULL);
	assert_int_equal(send_get(fx, NULL), ECW_ENOTFOUND);
	const struct ecw_error *e = ecw_error_last();
	assert_int_equal(e->code, ECW_ENOTFOUND);
	assert_int_equal(e->http_status, 404);
	assert_string_equal(e->service_code, "QueueNotFound");
	assert_string_equal(e->request_id, "2b1c0f2e-0003-0001-0000-000000000000");
	assert_true(str_contains(e->message, "QueueNotFound"));
	assert_true(str_contains(e->message, "2b1c0f2e-0003-0001-0000-000000000000"));
}

static void test_client__error_fields_from_bodies(void **state)
{
	struct client_fixture *fx = *state;
	/* Queue: an XML <Error> body. */
	fake_respond(&fx->fake, 403, "x-ms-request-id: rid-q\nContent-Type: application/xml\n",
	             "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>AuthenticationFailed</Code>"
	             "<Message>Server failed to authenticate the request.</Message></Error>");
	assert_int_equal(ecw_queue_clear(fx->c, "jobs"), ECW_EAUTH);
	assert_string_equal(ecw_error_last()->service_code, "AuthenticationFailed");
	assert_string_equal(ecw_error_last()->request_id, "rid-q");

	/* Table: a JSON odata.error body. */
	fake_respond(&fx->fake, 409, "x-ms-request-id: rid-t\nContent-Type: application/json\n",
	             "{\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{\"lang\":\"en-US\","
	             "\"value\":\"The specified entity already exists.\"}}}");
	struct ecw_entity *e = NULL;
	assert_int_equal(ecw_entity_new(&e, "p", "r"), 0);
	assert_int_equal(ecw_table_write(NULL, fx->c, "jobs", e, ECW_WRITE_INSERT, NULL), ECW_ECONFLICT);
	assert_string_equal(ecw_error_last()->service_code, "EntityAlreadyExists");
	assert_string_equal(ecw_error_last()->request_id, "rid-t");
	assert_int_equal(ecw_error_last()->http_status, 409);
	ecw_entity_free(e);
}

static void test_client__error_xml_body_with_bom(void **state)
{
	struct client_fixture *fx = *state;
	/* Azure's XML bodies start with a UTF-8 byte order mark; without an
	 * x-ms-error-code header the body is the only place the code is. */
	fake_respond(&fx->fake, 404, "x-ms-request-id: rid-bom\nContent-Type: application/xml\n",
	             "\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>QueueNotFound</Code>"
	             "<Message>The specified queue does not "
	             "exist.\nRequestId:rid-bom\nTime:2026-08-19T10:00:00.0000000Z"
	             "</Message></Error>");
	assert_int_equal(ecw_queue_clear(fx->c, "jobs"), ECW_ENOTFOUND);
	assert_string_equal(ecw_error_last()->service_code, "QueueNotFound");
	assert_true(str_contains(ecw_error_last()->message, "The specified queue does not exist."));
}

static void test_client__sas_not_in_error_message(void **state)
{
	(void)state;
	struct client_fixture *fx;
	client_fixture_setup(&fx,
	                     "QueueEndpoint=https://acct.queue.core.windows.net;"
	                     "TableEndpoint=https://acct.table.core.windows.net;"
	                     "SharedAccessSignature=sv=2021-12-02&sig=SeCrEtSiGnAtUrE",
	                     &test_opts);
	fake_respond(&fx->fake, 403, "x-ms-error-code: AuthenticationFailed\n", NULL);
	assert_int_equal(ecw_queue_clear(fx->c, "jobs"), ECW_EAUTH);
	assert_false(str_contains(ecw_error_last()->message, "SeCrEtSiGnAtUrE"));
	fake_always_net_error(&fx->fake, ECW_ETRANSIENT);
	assert_int_equal(ecw_queue_clear(fx->c, "jobs"), ECW_ETRANSIENT);
	assert_false(str_contains(ecw_error_last()->message, "SeCrEtSiGnAtUrE"));
	client_fixture_teardown(fx);
}

/* ---- fault injection ------------------------------------------------------- */

static void test_client__inject_status_retried(void **state)
{
	struct client_fixture *fx = *state;
	ecw_client_inject_faults(fx->c, 2, ECW_FAULT_STATUS, 503);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_get(fx, NULL), 0);
	/* The injected answers never reached the transport. */
	assert_int_equal(fx->fake.nreqs, 1);
	assert_sleeps(2);
	struct ecw_client_stats st;
	ecw_client_stats(&st, fx->c);
	assert_int_equal(st.retries, 2);
}

static void test_client__inject_status_exhausted(void **state)
{
	struct client_fixture *fx = *state;
	ecw_client_inject_faults(fx->c, TRIES, ECW_FAULT_STATUS, 504);
	assert_int_equal(send_get(fx, NULL), ECW_ETIMEOUT);
	assert_int_equal(fx->fake.nreqs, 0);
	assert_sleeps(TRIES - 1);
	assert_int_equal(ecw_error_last()->http_status, 504);
	/* The faults are used up: the next call goes through. */
	sleeps_reset();
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_get(fx, NULL), 0);
	assert_int_equal(fx->fake.nreqs, 1);
	assert_sleeps(0);
}

static void test_client__inject_permanent_status(void **state)
{
	struct client_fixture *fx = *state;
	ecw_client_inject_faults(fx->c, 1, ECW_FAULT_STATUS, 404);
	assert_int_equal(send_get(fx, NULL), ECW_ENOTFOUND);
	assert_int_equal(fx->fake.nreqs, 0);
	assert_sleeps(0);
}

static void test_client__inject_reset(void **state)
{
	struct client_fixture *fx = *state;
	ecw_client_inject_faults(fx->c, 2, ECW_FAULT_RESET, 0);
	fake_respond(&fx->fake, 200, NULL, NULL);
	assert_int_equal(send_get(fx, NULL), 0);
	assert_int_equal(fx->fake.nreqs, 1);
	assert_sleeps(2);

	sleeps_reset();
	ecw_client_inject_faults(fx->c, TRIES, ECW_FAULT_RESET, 0);
	assert_int_equal(send_get(fx, NULL), ECW_ETRANSIENT);
	assert_int_equal(fx->fake.nreqs, 1);
	assert_sleeps(TRIES - 1);
	assert_int_equal(ecw_error_last()->http_status, 0);
}

/* ---- queue request shapes ------------------------------------------------- */

/* The request body without an optional leading XML declaration. */
static const char *xml_body(const struct fake_request *q)
{
	assert_non_null(q->body);
	const char *p = q->body;
	if (str_starts(p, "<?xml")) {
		p = strstr(p, "?>");
		assert_non_null(p);
		p += 2;
		while (*p == '\n' || *p == '\r')
			p++;
	}
	return p;
}

static const char put_answer[] = "<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessagesList><QueueMessage>"
                                 "<MessageId>11111111-2222-3333-4444-555555555555</MessageId>"
                                 "<InsertionTime>Wed, 19 Aug 2026 10:00:00 GMT</InsertionTime>"
                                 "<ExpirationTime>Fri, 31 Dec 9999 23:59:59 GMT</ExpirationTime>"
                                 "<PopReceipt>AgAAAAMAAAAAAAAA+/==</PopReceipt>"
                                 "<TimeNextVisible>Wed, 19 Aug 2026 10:00:30 GMT</TimeNextVisible>"
                                 "</QueueMessage></QueueMessagesList>";

static void test_client__queue_put(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 201, "Content-Type: application/xml\n", put_answer);
	static const char text[] = "{\"a\":\"x<y & z>w\"}\r\n";
	const struct ecw_queue_put_options opts = {.visibility_delay_s = 30, .ttl_s = -1};
	struct ecw_queue_msg out;
	memset(&out, 0, sizeof(out));
	assert_int_equal(ecw_queue_put(&out, fx->c, "jobs", text, strlen(text), &opts), 0);
	assert_string_equal(out.id, "11111111-2222-3333-4444-555555555555");
	assert_string_equal(out.pop_receipt, "AgAAAAMAAAAAAAAA+/==");
	assert_null(out.text);

	assert_int_equal(fx->fake.nreqs, 1);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_string_equal(q->method, "POST");
	assert_string_equal(q->path, QPATH "/messages");
	assert_true(str_starts(q->url, "http://127.0.0.1:10001/devstoreaccount1/jobs/messages?"));
	assert_true(url_has_param(q->url, "messagettl=-1"));
	assert_true(url_has_param(q->url, "visibilitytimeout=30"));
	assert_string_equal(xml_body(q), "<QueueMessage><MessageText>{\"a\":\"x&lt;y &amp; z&gt;w\"}&#13;\n"
	                                 "</MessageText></QueueMessage>");
	assert_int_equal(q->body_len, strlen(q->body));
	assert_non_null(q->content_type);
	assert_true(strlen(q->content_type) > 0);
	assert_str(fake_header(q, "x-ms-version"), ECW_QUEUE_API_VERSION);
	assert_true(q->auth_ok);
}

static void test_client__queue_put_default_ttl(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 201, NULL, put_answer);
	assert_int_equal(ecw_queue_put(NULL, fx->c, "jobs", "hi", 2, NULL), 0);
	assert_int_equal(fx->fake.nreqs, 1);
	const struct fake_request *q = &fx->fake.reqs[0];
	/* ttl 0 means the service default: no messagettl at all. */
	assert_false(str_contains(q->url, "messagettl"));
	assert_string_equal(xml_body(q), "<QueueMessage><MessageText>hi</MessageText></QueueMessage>");
}

static void test_client__queue_put_size_limit(void **state)
{
	struct client_fixture *fx = *state;
	char *big = malloc(ECW_QUEUE_MAX_TEXT + 1);
	assert_non_null(big);
	memset(big, 'a', ECW_QUEUE_MAX_TEXT + 1);
	assert_int_equal(ecw_queue_put(NULL, fx->c, "jobs", big, ECW_QUEUE_MAX_TEXT + 1, NULL),
	                 ECW_ETOOLARGE);
	assert_int_equal(fx->fake.nreqs, 0);
	assert_int_equal(ecw_error_last()->code, ECW_ETOOLARGE);
	/* Exactly the limit is sent. */
	fake_respond(&fx->fake, 201, NULL, put_answer);
	assert_int_equal(ecw_queue_put(NULL, fx->c, "jobs", big, ECW_QUEUE_MAX_TEXT, NULL), 0);
	assert_int_equal(fx->fake.nreqs, 1);
	free(big);
}

static void test_client__queue_invalid_input_sends_nothing(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	assert_int_equal(ecw_queue_put(NULL, fx->c, "Bad_Queue", "x", 1, NULL), ECW_EINVALID);
	assert_int_equal(ecw_queue_receive(&m, &n, fx->c, "jobs", 0, 30), ECW_EINVALID);
	assert_int_equal(ecw_queue_receive(&m, &n, fx->c, "jobs", 33, 30), ECW_EINVALID);
	assert_int_equal(ecw_queue_peek(&m, &n, fx->c, "jobs", 33), ECW_EINVALID);
	assert_int_equal(fx->fake.nreqs, 0);
}

static void test_client__queue_create(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 201, NULL, NULL);
	fake_respond(&fx->fake, 204, NULL, NULL);
	bool created = false;
	assert_int_equal(ecw_queue_create(&created, fx->c, "jobs"), 0);
	assert_true(created);
	assert_int_equal(ecw_queue_create(&created, fx->c, "jobs"), 0);
	assert_false(created);
	assert_int_equal(fx->fake.nreqs, 2);
	assert_string_equal(fx->fake.reqs[0].method, "PUT");
	assert_string_equal(fx->fake.reqs[0].path, QPATH);
	assert_int_equal(url_nparams(fx->fake.reqs[0].url), 0);
	/* A queue that exists with metadata (a pause) answers 409
	 * QueueAlreadyExists: it exists, so that is success too; a queue still
	 * being deleted is not. */
	fake_respond(&fx->fake, 409, "x-ms-error-code: QueueAlreadyExists\n", NULL);
	fake_respond(&fx->fake, 409, "x-ms-error-code: QueueBeingDeleted\n", NULL);
	created = true;
	assert_int_equal(ecw_queue_create(&created, fx->c, "jobs"), 0);
	assert_false(created);
	assert_int_equal(ecw_queue_create(&created, fx->c, "jobs"), ECW_ECONFLICT);
	assert_string_equal(ecw_error_last()->service_code, "QueueBeingDeleted");
}

static void test_client__queue_receive(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 200, NULL,
	             "<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessagesList><QueueMessage>"
	             "<MessageId>m1</MessageId>"
	             "<InsertionTime>Wed, 19 Aug 2026 10:00:00 GMT</InsertionTime>"
	             "<ExpirationTime>Wed, 26 Aug 2026 10:00:00 GMT</ExpirationTime>"
	             "<PopReceipt>pr1</PopReceipt>"
	             "<TimeNextVisible>Wed, 19 Aug 2026 10:01:00 GMT</TimeNextVisible>"
	             "<DequeueCount>1</DequeueCount>"
	             "<MessageText>a &amp; b</MessageText>"
	             "</QueueMessage></QueueMessagesList>");
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	assert_int_equal(ecw_queue_receive(&m, &n, fx->c, "jobs", 5, 60), 0);
	assert_int_equal(n, 1);
	assert_string_equal(m[0].id, "m1");
	assert_string_equal(m[0].pop_receipt, "pr1");
	assert_str(m[0].text, "a & b");
	ecw_queue_msgs_free(m, n);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_string_equal(q->method, "GET");
	assert_string_equal(q->path, QPATH "/messages");
	assert_true(url_has_param(q->url, "numofmessages=5"));
	assert_true(url_has_param(q->url, "visibilitytimeout=60"));
	assert_false(str_contains(q->url, "peekonly"));
}

/* Found by fuzz_queue_xml: a list of messages without MessageText (as a put
 * answers) gave receive a message whose text was NULL. */
static void test_client__queue_receive_without_text(void **state)
{
	struct client_fixture *fx = *state;
	static const char body[] =
	    "<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessagesList><QueueMessage>"
	    "<MessageId>m1</MessageId><PopReceipt>pr1</PopReceipt><DequeueCount>1</DequeueCount>"
	    "</QueueMessage></QueueMessagesList>";
	struct ecw_queue_msg *m = NULL;
	size_t n = 7;
	fake_respond(&fx->fake, 200, NULL, body);
	assert_int_equal(ecw_queue_receive(&m, &n, fx->c, "jobs", 5, 60), ECW_ERROR);
	assert_null(m);
	assert_int_equal(n, 0);
	assert_true(str_contains(ecw_error_last()->message, "MessageText"));
	fake_respond(&fx->fake, 200, NULL, body);
	assert_int_equal(ecw_queue_peek(&m, &n, fx->c, "jobs", 5), ECW_ERROR);
	assert_null(m);
	/* An empty text is a text. */
	fake_respond(&fx->fake, 200, NULL,
	             "<QueueMessagesList><QueueMessage><MessageId>m2</MessageId><MessageText></MessageText>"
	             "</QueueMessage></QueueMessagesList>");
	assert_int_equal(ecw_queue_peek(&m, &n, fx->c, "jobs", 5), 0);
	assert_int_equal(n, 1);
	assert_str(m[0].text, "");
	ecw_queue_msgs_free(m, n);
}

static void test_client__queue_peek(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 200, NULL, "<QueueMessagesList />");
	struct ecw_queue_msg *m = NULL;
	size_t n = 7;
	assert_int_equal(ecw_queue_peek(&m, &n, fx->c, "jobs", 32), 0);
	assert_int_equal(n, 0);
	ecw_queue_msgs_free(m, n);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_string_equal(q->method, "GET");
	assert_string_equal(q->path, QPATH "/messages");
	assert_true(url_has_param(q->url, "peekonly=true"));
	assert_true(url_has_param(q->url, "numofmessages=32"));
	assert_false(str_contains(q->url, "visibilitytimeout"));
}

static void test_client__queue_delete(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 204, NULL, NULL);
	assert_int_equal(ecw_queue_delete(fx->c, "jobs", "m-1", "AgAAAA+/=="), 0);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_string_equal(q->method, "DELETE");
	assert_string_equal(q->path, QPATH "/messages/m-1");
	assert_true(url_has_param(q->url, "popreceipt=AgAAAA%2B%2F%3D%3D"));
	assert_int_equal(url_nparams(q->url), 1);
	assert_true(q->auth_ok);
}

static void test_client__queue_stale_receipt(void **state)
{
	struct client_fixture *fx = *state;
	/* Gone, or received again by someone else (Azurite's 400): both "lease lost". */
	fake_respond(&fx->fake, 404, "x-ms-error-code: MessageNotFound\n", NULL);
	fake_respond(&fx->fake, 400, "x-ms-error-code: PopReceiptMismatch\n",
	             "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>PopReceiptMismatch</Code>"
	             "<Message>The specified pop receipt did not match.</Message></Error>");
	assert_int_equal(ecw_queue_delete(fx->c, "jobs", "m-1", "pr"), ECW_ENOTFOUND);
	assert_int_equal(ecw_queue_delete(fx->c, "jobs", "m-1", "pr"), ECW_ENOTFOUND);
	assert_int_equal(fx->fake.nreqs, 2);
}

/* Which of the two a stale receipt was, without the service's string. */
static void test_client__queue_received_again(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_queue_msg msg;
	memset(&msg, 0, sizeof(msg));
	snprintf(msg.id, sizeof(msg.id), "m-1");
	snprintf(msg.pop_receipt, sizeof(msg.pop_receipt), "pr");
	fake_respond(&fx->fake, 400, "x-ms-error-code: PopReceiptMismatch\n", NULL);
	fake_respond(&fx->fake, 404, "x-ms-error-code: MessageNotFound\n", NULL);
	fake_respond(&fx->fake, 400, "x-ms-error-code: PopReceiptMismatch\n", NULL);
	assert_int_equal(ecw_queue_update(&msg, fx->c, "jobs", 0, NULL, 0), ECW_ENOTFOUND);
	assert_true(ecw_queue_err_received_again(ecw_error_last()));
	assert_int_equal(ecw_queue_update(&msg, fx->c, "jobs", 0, NULL, 0), ECW_ENOTFOUND);
	assert_false(ecw_queue_err_received_again(ecw_error_last()));
	assert_int_equal(ecw_queue_delete(fx->c, "jobs", "m-1", "pr"), ECW_ENOTFOUND);
	assert_true(ecw_queue_err_received_again(ecw_error_last()));
	/* Another failure is not a stale receipt. */
	ecw_error_set(ECW_EINVALID, "not from the service");
	assert_false(ecw_queue_err_received_again(ecw_error_last()));
}

static void test_client__queue_update(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 204,
	             "x-ms-popreceipt: AgAAAA/new==\nx-ms-time-next-visible: Wed, 19 Aug 2026 10:02:00 GMT\n",
	             NULL);
	struct ecw_queue_msg msg;
	memset(&msg, 0, sizeof(msg));
	snprintf(msg.id, sizeof(msg.id), "m-2");
	snprintf(msg.pop_receipt, sizeof(msg.pop_receipt), "AgAAAA+old==");
	assert_int_equal(ecw_queue_update(&msg, fx->c, "jobs", 120, "new <text>", 10), 0);
	assert_string_equal(msg.pop_receipt, "AgAAAA/new==");
	assert_int_equal((long long)msg.next_visible, 1787133600LL + 120);
	/* The message now carries its new text. */
	assert_str(msg.text, "new <text>");
	assert_int_equal(msg.text_len, 10);
	free(msg.text);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_string_equal(q->method, "PUT");
	assert_string_equal(q->path, QPATH "/messages/m-2");
	assert_true(url_has_param(q->url, "popreceipt=AgAAAA%2Bold%3D%3D"));
	assert_true(url_has_param(q->url, "visibilitytimeout=120"));
	assert_string_equal(xml_body(q),
	                    "<QueueMessage><MessageText>new &lt;text&gt;</MessageText></QueueMessage>");
}

static void test_client__queue_count_and_clear(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 200, "x-ms-approximate-messages-count: 42\n", NULL);
	fake_respond(&fx->fake, 204, NULL, NULL);
	long long n = 0;
	assert_int_equal(ecw_queue_count(&n, fx->c, "jobs"), 0);
	assert_int_equal(n, 42);
	assert_int_equal(ecw_queue_clear(fx->c, "jobs"), 0);
	assert_string_equal(fx->fake.reqs[0].method, "GET");
	assert_string_equal(fx->fake.reqs[0].path, QPATH);
	assert_true(url_has_param(fx->fake.reqs[0].url, "comp=metadata"));
	assert_string_equal(fx->fake.reqs[1].method, "DELETE");
	assert_string_equal(fx->fake.reqs[1].path, QPATH "/messages");
}

/* ---- table request shapes ----------------------------------------------- */

static struct ecw_entity *entity(const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	assert_int_equal(ecw_entity_new(&e, pk, rk), 0);
	assert_int_equal(ecw_entity_set_double(e, "d", 50000.0), 0);
	assert_int_equal(ecw_entity_set_string(e, "s", "x", 1), 0);
	return e;
}

static void check_table_headers(const struct fake_request *q)
{
	assert_str(fake_header(q, "x-ms-version"), ECW_TABLE_API_VERSION);
	const char *accept = fake_header(q, "Accept");
	assert_non_null(accept);
	assert_true(str_starts(accept, "application/json"));
	assert_true(q->auth_ok);
}

static void check_entity_body(const struct fake_request *q, const struct ecw_entity *want)
{
	assert_non_null(q->body);
	assert_non_null(q->content_type);
	assert_true(str_starts(q->content_type, "application/json"));
	struct ecw_entity *got = NULL;
	assert_int_equal(ecw_entity_from_json(&got, q->body, q->body_len), 0);
	assert_true(ecw_entity_equal(got, want));
	ecw_entity_free(got);
}

static void test_client__table_get(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 200, "ETag: " ETAG "\nContent-Type: application/json\n",
	             "{\"odata.metadata\":\"x\",\"odata.etag\":\"W/"
	             "\\\"datetime'2026-08-19T10%3A00%3A00.1234567Z'\\\"\","
	             "\"PartitionKey\":\"o'brien "
	             "001\",\"RowKey\":\"r\",\"Timestamp\":\"2026-08-19T10:00:00.1234567Z\","
	             "\"d\":50000.0,\"n\":5}");
	fake_respond(&fx->fake, 404, "x-ms-error-code: ResourceNotFound\n",
	             "{\"odata.error\":{\"code\":\"ResourceNotFound\",\"message\":{\"value\":\"The specified "
	             "resource does not exist.\"}}}");
	struct ecw_entity *e = NULL;
	assert_int_equal(ecw_table_get(&e, fx->c, "jobs", "o'brien 001", "r"), 0);
	assert_non_null(e);
	assert_str(ecw_entity_etag(e), ETAG);
	assert_int_equal(ecw_entity_get(e, "d")->type, ECW_EDM_DOUBLE);
	assert_int_equal(ecw_entity_get(e, "n")->type, ECW_EDM_INT32);
	ecw_entity_free(e);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_string_equal(q->method, "GET");
	assert_string_equal(q->path, TPATH "(PartitionKey='o''brien%20001',RowKey='r')");
	assert_true(str_starts(q->url, "http://127.0.0.1:10002/devstoreaccount1/jobs("));
	check_table_headers(q);

	e = NULL;
	assert_int_equal(ecw_table_get(&e, fx->c, "jobs", "p", "missing"), ECW_ENOTFOUND);
	assert_null(e);
	assert_string_equal(ecw_error_last()->service_code, "ResourceNotFound");
}

static void test_client__table_write_modes(void **state)
{
	struct client_fixture *fx = *state;
	static const struct {
		enum ecw_write_mode mode;
		const char *if_match;
		const char *method;
		bool entity_url;
	} cases[] = {
	    {ECW_WRITE_INSERT, NULL, "POST", false},
	    {ECW_WRITE_INSERT_OR_REPLACE, NULL, "PUT", true},
	    {ECW_WRITE_INSERT_OR_MERGE, NULL, "MERGE", true},
	    {ECW_WRITE_UPDATE, ETAG, "PUT", true},
	    {ECW_WRITE_MERGE, "*", "MERGE", true},
	};
	struct ecw_entity *e = entity("p", "Zo\xc3\xab");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fake_respond(&fx->fake, 204, "ETag: W/\"datetime'2026-08-19T10%3A00%3A01Z'\"\n", NULL);
		char *etag = NULL;
		assert_int_equal(ecw_table_write(&etag, fx->c, "jobs", e, cases[i].mode, cases[i].if_match),
		                 0);
		assert_str(etag, "W/\"datetime'2026-08-19T10%3A00%3A01Z'\"");
		free(etag);
		assert_int_equal(fx->fake.nreqs, i + 1);
		const struct fake_request *q = &fx->fake.reqs[i];
		if (strcmp(q->method, cases[i].method) != 0)
			fail_msg("write mode %zu: method %s, want %s", i, q->method, cases[i].method);
		assert_string_equal(
		    q->path, cases[i].entity_url ? TPATH "(PartitionKey='p',RowKey='Zo%C3%AB')" : TPATH);
		if (cases[i].if_match)
			assert_str(fake_header(q, "If-Match"), cases[i].if_match);
		else if (fake_header(q, "If-Match"))
			fail_msg("write mode %zu sent If-Match: %s", i, fake_header(q, "If-Match"));
		check_table_headers(q);
		check_entity_body(q, e);
	}
	ecw_entity_free(e);
}

static void test_client__table_write_if_match_rules(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_entity *e = entity("p", "r");
	assert_int_equal(ecw_table_write(NULL, fx->c, "jobs", e, ECW_WRITE_UPDATE, NULL), ECW_EINVALID);
	assert_int_equal(ecw_table_write(NULL, fx->c, "jobs", e, ECW_WRITE_MERGE, NULL), ECW_EINVALID);
	assert_int_equal(ecw_table_write(NULL, fx->c, "jobs", e, ECW_WRITE_INSERT, "*"), ECW_EINVALID);
	assert_int_equal(ecw_table_write(NULL, fx->c, "jobs", e, ECW_WRITE_INSERT_OR_MERGE, ETAG),
	                 ECW_EINVALID);
	assert_int_equal(ecw_table_write(NULL, fx->c, "bad-table", e, ECW_WRITE_INSERT, NULL), ECW_EINVALID);
	assert_int_equal(fx->fake.nreqs, 0);

	fake_respond(&fx->fake, 412, "x-ms-error-code: UpdateConditionNotSatisfied\n", NULL);
	assert_int_equal(ecw_table_write(NULL, fx->c, "jobs", e, ECW_WRITE_UPDATE, ETAG), ECW_EPRECONDITION);
	assert_int_equal(fx->fake.nreqs, 1);
	ecw_entity_free(e);
}

static void test_client__table_delete(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 204, NULL, NULL);
	fake_respond(&fx->fake, 404, "x-ms-error-code: ResourceNotFound\n", NULL);
	fake_respond(&fx->fake, 412, "x-ms-error-code: UpdateConditionNotSatisfied\n", NULL);
	assert_int_equal(ecw_table_delete(fx->c, "jobs", "p", "o'brien 001", ETAG), 0);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_string_equal(q->method, "DELETE");
	assert_string_equal(q->path, TPATH "(PartitionKey='p',RowKey='o''brien%20001')");
	assert_str(fake_header(q, "If-Match"), ETAG);
	check_table_headers(q);
	assert_int_equal(ecw_table_delete(fx->c, "jobs", "p", "r", "*"), ECW_ENOTFOUND);
	assert_str(fake_header(&fx->fake.reqs[1], "If-Match"), "*");
	assert_int_equal(ecw_table_delete(fx->c, "jobs", "p", "r", ETAG), ECW_EPRECONDITION);
	assert_int_equal(fx->fake.nreqs, 3);
}

static void test_client__table_delete_if_exists(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 204, NULL, NULL);
	fake_respond(&fx->fake, 404, "x-ms-error-code: ResourceNotFound\n", NULL);
	bool deleted = false;
	assert_int_equal(ecw_table_delete_if_exists(&deleted, fx->c, "jobs", "p", "r"), 0);
	assert_true(deleted);
	assert_int_equal(ecw_table_delete_if_exists(&deleted, fx->c, "jobs", "p", "r"), 0);
	assert_false(deleted);
	assert_string_equal(fx->fake.reqs[0].method, "DELETE");
	assert_str(fake_header(&fx->fake.reqs[0], "If-Match"), "*");
}

/* The service's 404 TableNotFound as Azurite sends it (x-ms-error-code and
 * body) and as Azure does (the body only). */
#define TABLE_NOT_FOUND_BODY                                                                                 \
	"{\"odata.error\":{\"code\":\"TableNotFound\",\"message\":{\"value\":\"The table specified "         \
	"does not exist.\\nRequestId:r-1\"}}}"

/* A missing table and a missing entity are told apart by class, once, in the
 * client: 404 TableNotFound is ECW_ENOTABLE, 404 ResourceNotFound stays
 * ECW_ENOTFOUND; neither is retried, and the last error keeps the status,
 * the service's code and its message. */
static void test_client__table_not_found(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_entity *e = NULL, *row = NULL;
	struct ecw_table_query *q = NULL;
	bool deleted = true;

	assert_int_equal(ecw_status_to_err(404, "TableNotFound"), ECW_ENOTABLE);
	assert_int_equal(ecw_status_to_err(404, "ResourceNotFound"), ECW_ENOTFOUND);
	assert_int_equal(ecw_status_to_err(404, NULL), ECW_ENOTFOUND);
	assert_string_equal(ecw_error_name(ECW_ENOTABLE), "ECW_ENOTABLE");
	assert_false(ecw_error_is_transient(ECW_ENOTABLE));

	fake_respond(&fx->fake, 404, "x-ms-error-code: TableNotFound\nx-ms-request-id: r-1\n",
	             TABLE_NOT_FOUND_BODY);
	assert_int_equal(ecw_table_get(&e, fx->c, "jobs", "p", "r"), ECW_ENOTABLE);
	assert_null(e);
	assert_int_equal(ecw_error_last()->code, ECW_ENOTABLE);
	assert_int_equal(ecw_error_last()->http_status, 404);
	assert_string_equal(ecw_error_last()->service_code, "TableNotFound");
	assert_string_equal(ecw_error_last()->request_id, "r-1");
	assert_string_equal(ecw_error_last()->message,
	                    "GET " TPATH "(PartitionKey='p',RowKey='r'): 404 TableNotFound: "
	                    "The table specified does not exist. (request id r-1)");
	assert_int_equal(fx->fake.nreqs, 1);
	assert_sleeps(0);

	fake_respond(&fx->fake, 404, NULL, TABLE_NOT_FOUND_BODY);
	struct ecw_entity *w = entity("p", "r");
	assert_int_equal(ecw_table_write(NULL, fx->c, "jobs", w, ECW_WRITE_INSERT, NULL), ECW_ENOTABLE);
	assert_string_equal(ecw_error_last()->service_code, "TableNotFound");
	ecw_entity_free(w);

	fake_respond(&fx->fake, 404, NULL, TABLE_NOT_FOUND_BODY);
	assert_int_equal(ecw_table_query_new(&q, fx->c, "jobs", NULL), 0);
	assert_int_equal(ecw_table_query_next(&row, q), ECW_ENOTABLE);
	assert_null(row);
	ecw_table_query_free(q);

	/* An absent entity is done; a missing table is not. */
	fake_respond(&fx->fake, 404, NULL, TABLE_NOT_FOUND_BODY);
	assert_int_equal(ecw_table_delete_if_exists(&deleted, fx->c, "jobs", "p", "r"), ECW_ENOTABLE);
	assert_false(deleted);

	fake_respond(&fx->fake, 404, "x-ms-error-code: ResourceNotFound\n",
	             "{\"odata.error\":{\"code\":\"ResourceNotFound\",\"message\":{\"value\":\"The specified "
	             "resource does not exist.\"}}}");
	assert_int_equal(ecw_table_get(&e, fx->c, "jobs", "p", "r"), ECW_ENOTFOUND);
	assert_string_equal(ecw_error_last()->service_code, "ResourceNotFound");
	assert_int_equal(fx->fake.nreqs, 5);
	assert_sleeps(0);
}

static void test_client__table_invalid_key_sends_nothing(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_entity *e = NULL;
	bool deleted;
	assert_int_equal(ecw_table_get(&e, fx->c, "jobs", "a/b", "r"), ECW_EINVALID);
	assert_null(e);
	assert_int_equal(ecw_table_get(&e, fx->c, "jobs", "p",
	                               "a\x01"
	                               "b"),
	                 ECW_EINVALID);
	assert_int_equal(ecw_table_delete(fx->c, "jobs", "p", "a#b", "*"), ECW_EINVALID);
	assert_int_equal(ecw_table_delete_if_exists(&deleted, fx->c, "jobs", "a?b", "r"), ECW_EINVALID);
	assert_int_equal(ecw_table_delete(fx->c, "jobs", "p", "\xff", "*"), ECW_EINVALID);
	assert_int_equal(fx->fake.nreqs, 0);
}

static void test_client__table_create(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 201, NULL, "{\"TableName\":\"jobs\"}");
	bool created = false;
	assert_int_equal(ecw_table_create(&created, fx->c, "jobs"), 0);
	assert_true(created);
	const struct fake_request *q = &fx->fake.reqs[0];
	assert_string_equal(q->method, "POST");
	assert_string_equal(q->path, "/devstoreaccount1/Tables");
	check_table_headers(q);
	assert_non_null(q->body);
	json_object *j = json_tokener_parse(q->body);
	assert_non_null(j);
	json_object *name = NULL;
	assert_true(json_object_object_get_ex(j, "TableName", &name));
	assert_string_equal(json_object_get_string(name), "jobs");
	json_object_put(j);
}

static void test_client__table_query_pages(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(
	    &fx->fake, 200,
	    "x-ms-continuation-NextPartitionKey: 1!4!cA--\nx-ms-continuation-NextRowKey: 1!8!cjI+Lw==\n",
	    "{\"odata.metadata\":\"x\",\"value\":[{\"odata.etag\":\"W/\\\"1\\\"\",\"PartitionKey\":\"p\","
	    "\"RowKey\":\"r1\",\"n\":1},{\"odata.etag\":\"W/"
	    "\\\"2\\\"\",\"PartitionKey\":\"p\",\"RowKey\":\"r2\",\"n\":2}]}");
	/* An empty page that still carries a token, without NextRowKey. */
	fake_respond(&fx->fake, 200, "x-ms-continuation-NextPartitionKey: 1!4!cQ--\n",
	             "{\"odata.metadata\":\"x\",\"value\":[]}");
	fake_respond(
	    &fx->fake, 200, NULL,
	    "{\"odata.metadata\":\"x\",\"value\":[{\"PartitionKey\":\"q\",\"RowKey\":\"r3\",\"n\":3}]}");
	struct ecw_buf filter;
	ecw_buf_init(&filter, 4096);
	assert_int_equal(ecw_buf_adds(&filter, "PartitionKey ge "), 0);
	assert_int_equal(ecw_escape_filter_string(&filter, "o'b"), 0);
	const struct ecw_query_options qo = {.filter = ecw_buf_cstr(&filter), .select = "n", .top = 2};
	struct ecw_table_query *tq = NULL;
	assert_int_equal(ecw_table_query_new(&tq, fx->c, "jobs", &qo), 0);
	const char *want_rk[] = {"r1", "r2", "r3"};
	for (int i = 0; i < 3; i++) {
		struct ecw_entity *e = NULL;
		assert_int_equal(ecw_table_query_next(&e, tq), 0);
		if (!e)
			fail_msg("query ended after %d entities", i);
		assert_str(ecw_entity_rk(e), want_rk[i]);
		assert_int_equal(ecw_entity_get(e, "n")->v.i32, i + 1);
		ecw_entity_free(e);
	}
	struct ecw_entity *end = (struct ecw_entity *)&end; /* not NULL */
	assert_int_equal(ecw_table_query_next(&end, tq), 0);
	assert_null(end);
	assert_int_equal(ecw_table_query_pages(tq), 3);
	ecw_table_query_free(tq);
	ecw_buf_dispose(&filter);

	assert_int_equal(fx->fake.nreqs, 3);
	for (int i = 0; i < 3; i++) {
		const struct fake_request *q = &fx->fake.reqs[i];
		assert_string_equal(q->method, "GET");
		assert_string_equal(q->path, TPATH "()");
		assert_true(str_contains(q->url, "filter=PartitionKey%20ge%20'o''b'"));
		assert_true(str_contains(q->url, "top=2"));
		assert_true(str_contains(q->url, "select=n"));
		check_table_headers(q);
	}
	assert_false(str_contains(fx->fake.reqs[0].url, "NextPartitionKey"));
	assert_true(url_has_param(fx->fake.reqs[1].url, "NextPartitionKey=1!4!cA--"));
	assert_true(url_has_param(fx->fake.reqs[1].url, "NextRowKey=1!8!cjI%2BLw%3D%3D"));
	assert_true(url_has_param(fx->fake.reqs[2].url, "NextPartitionKey=1!4!cQ--"));
	assert_false(str_contains(fx->fake.reqs[2].url, "NextRowKey"));
}

/* A page is read whole before its first entity is handed out: the common
 * form entity by entity (the flat reader), any other form through json-c;
 * one bad entity fails the page, never a part of it. */
static void test_client__table_query_page_read_whole(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_table_query *tq = NULL;
	struct ecw_entity *e = NULL;
	const struct ecw_query_options qo = {.filter = "PartitionKey eq 'p'"};

	/* Not the common form (a \u escape in a member): json-c reads it. */
	fake_respond(
	    &fx->fake, 200, NULL,
	    "{\"odata.metadata\":\"\\u0078\",\"value\":[{\"PartitionKey\":\"p\",\"RowKey\":\"r\\u00e9\","
	    "\"n\":7}]}");
	assert_int_equal(ecw_table_query_new(&tq, fx->c, "jobs", &qo), 0);
	assert_int_equal(ecw_table_query_next(&e, tq), 0);
	assert_non_null(e);
	assert_str(ecw_entity_rk(e), "r\xc3\xa9");
	assert_int_equal(ecw_entity_get(e, "n")->v.i32, 7);
	ecw_entity_free(e);
	ecw_table_query_free(tq);

	/* The common form, its second entity without a RowKey: no entity. */
	tq = NULL;
	fake_respond(&fx->fake, 200, NULL,
	             "{\"odata.metadata\":\"x\",\"value\":[{\"PartitionKey\":\"p\",\"RowKey\":\"r1\"},"
	             "{\"PartitionKey\":\"p\",\"n\":2}]}");
	assert_int_equal(ecw_table_query_new(&tq, fx->c, "jobs", &qo), 0);
	e = (struct ecw_entity *)&e;
	assert_true(ecw_table_query_next(&e, tq) < 0);
	assert_null(e);
	ecw_table_query_free(tq);
}

/* A page over the answer cap for table.query (a thousand large entities) is
 * asked for again with a tenth of the entities, from the same continuation,
 * down to one; the smaller $top stays for the rest of the query. A single
 * entity over the cap is the error it is. */
static void test_client__table_query_page_over_the_cap_shrinks(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_table_query *tq = NULL;
	struct ecw_entity *e = NULL;

	fake_net_error(&fx->fake, ECW_ETOOLARGE); /* no $top: the service's 1000 */
	fake_net_error(&fx->fake, ECW_ETOOLARGE); /* $top=100 */
	fake_respond(&fx->fake, 200, "x-ms-continuation-NextPartitionKey: 1!4!cA--\n",
	             "{\"value\":[{\"PartitionKey\":\"p\",\"RowKey\":\"r1\"}]}");
	fake_respond(&fx->fake, 200, NULL, "{\"value\":[{\"PartitionKey\":\"p\",\"RowKey\":\"r2\"}]}");
	assert_int_equal(ecw_table_query_new(&tq, fx->c, "jobs", NULL), 0);
	for (int i = 1; i <= 2; i++) {
		assert_int_equal(ecw_table_query_next(&e, tq), 0);
		assert_non_null(e);
		ecw_entity_free(e);
	}
	assert_int_equal(ecw_table_query_next(&e, tq), 0);
	assert_null(e);
	ecw_table_query_free(tq);
	assert_int_equal(fx->fake.nreqs, 4);
	assert_false(str_contains(fx->fake.reqs[0].url, "top="));
	assert_true(url_has_param(fx->fake.reqs[1].url, "%24top=100"));
	assert_true(url_has_param(fx->fake.reqs[2].url, "%24top=10"));
	assert_true(url_has_param(fx->fake.reqs[3].url, "NextPartitionKey=1!4!cA--"));
	assert_true(url_has_param(fx->fake.reqs[3].url, "%24top=10"));

	/* One entity over the cap: nothing smaller to ask for. */
	const struct ecw_query_options one = {.top = 1};
	fake_net_error(&fx->fake, ECW_ETOOLARGE);
	assert_int_equal(ecw_table_query_new(&tq, fx->c, "jobs", &one), 0);
	assert_int_equal(ecw_table_query_next(&e, tq), ECW_ETOOLARGE);
	ecw_table_query_free(tq);
	assert_int_equal(fx->fake.nreqs, 5);
}

static void test_client__table_query_select_adds_keys_once(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 200, NULL, "{\"value\":[{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"n\":1}]}");
	/* The caller names PartitionKey itself; the client adds only what is missing. */
	const struct ecw_query_options qo = {.select = "PartitionKey,n"};
	struct ecw_table_query *tq = NULL;
	struct ecw_entity *e = NULL;
	assert_int_equal(ecw_table_query_new(&tq, fx->c, "jobs", &qo), 0);
	assert_int_equal(ecw_table_query_next(&e, tq), 0);
	assert_non_null(e);
	ecw_entity_free(e);
	ecw_table_query_free(tq);
	assert_int_equal(fx->fake.nreqs, 1);
	assert_true(url_has_param(fx->fake.reqs[0].url, "%24select=PartitionKey%2Cn%2CRowKey%2CTimestamp"));
}

static void test_client__table_query_limit(void **state)
{
	struct client_fixture *fx = *state;
	fake_respond(&fx->fake, 200,
	             "x-ms-continuation-NextPartitionKey: 1!4!cA--\nx-ms-continuation-NextRowKey: 1!4!cjM-\n",
	             "{\"value\":[{\"PartitionKey\":\"p\",\"RowKey\":\"r1\"},{\"PartitionKey\":\"p\","
	             "\"RowKey\":\"r2\"}]}");
	const struct ecw_query_options qo = {.limit = 1};
	struct ecw_table_query *tq = NULL;
	assert_int_equal(ecw_table_query_new(&tq, fx->c, "jobs", &qo), 0);
	struct ecw_entity *e = NULL;
	assert_int_equal(ecw_table_query_next(&e, tq), 0);
	assert_non_null(e);
	ecw_entity_free(e);
	e = (struct ecw_entity *)&e;
	assert_int_equal(ecw_table_query_next(&e, tq), 0);
	assert_null(e);
	ecw_table_query_free(tq);
	/* The limit was reached: the next page is never fetched. */
	assert_int_equal(fx->fake.nreqs, 1);
	assert_false(str_contains(fx->fake.reqs[0].url, "filter"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_client__table_query_select_adds_keys_once),
	    cmocka_unit_test(test_client__transient_status_retried),
	    T(test_client__network_errors_retried),
	    cmocka_unit_test(test_client__transient_exhausted),
	    cmocka_unit_test(test_client__network_exhausted),
	    cmocka_unit_test(test_client__permanent_not_retried),
	    cmocka_unit_test(test_client__status_to_err),
	    cmocka_unit_test(test_client__retry_delay_full_jitter),
	    cmocka_unit_test(test_client__max_tries_option),
	    T(test_client__date_regenerated_and_signed),
	    T(test_client__error_fields_from_headers),
	    T(test_client__error_fields_from_bodies),
	    T(test_client__error_xml_body_with_bom),
	    cmocka_unit_test(test_client__sas_not_in_error_message),
	    T(test_client__inject_status_retried),
	    T(test_client__inject_status_exhausted),
	    T(test_client__inject_permanent_status),
	    T(test_client__inject_reset),
	    T(test_client__queue_put),
	    T(test_client__queue_put_default_ttl),
	    T(test_client__queue_put_size_limit),
	    T(test_client__queue_invalid_input_sends_nothing),
	    T(test_client__queue_create),
	    T(test_client__queue_receive),
	    T(test_client__queue_receive_without_text),
	    T(test_client__queue_peek),
	    T(test_client__queue_delete),
	    T(test_client__queue_stale_receipt),
	    T(test_client__queue_received_again),
	    T(test_client__queue_update),
	    T(test_client__queue_count_and_clear),
	    T(test_client__table_get),
	    T(test_client__table_write_modes),
	    T(test_client__table_write_if_match_rules),
	    T(test_client__table_delete),
	    T(test_client__table_delete_if_exists),
	    T(test_client__table_not_found),
	    T(test_client__table_invalid_key_sends_nothing),
	    T(test_client__table_create),
	    T(test_client__table_query_pages),
	    T(test_client__table_query_page_read_whole),
	    T(test_client__table_query_page_over_the_cap_shrinks),
	    T(test_client__table_query_limit),
	};
	return cmocka_run_group_tests_name("client", tests, NULL, NULL);
}
