/* SPDX-License-Identifier: MIT */
/* test_poison_scan.c - the poison queue scan (worker/poison_scan.c) against
 * a scripted queue: it visits each matching message once even when the
 * service hands one out twice, releases everything it did not take with
 * visibility 0 and the newest pop receipt, never deletes on its own, and
 * peeks when one peek sees the whole queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "poison_scan.h"
#include "support.h"

#define ENV(job)                                                                                             \
	"{&quot;ecw_poison&quot;:1,&quot;original&quot;:&quot;x&quot;,&quot;job&quot;:&quot;" job            \
	"&quot;,&quot;reason&quot;:&quot;permanent&quot;}"

static const char *msg_xml(char *out, size_t cap, const char *id, const char *receipt, const char *text)
{
	snprintf(out, cap,
	         "<QueueMessage><MessageId>%s</MessageId>"
	         "<InsertionTime>Wed, 19 Aug 2026 10:00:00 GMT</InsertionTime>"
	         "<ExpirationTime>Fri, 31 Dec 9999 23:59:59 GMT</ExpirationTime>"
	         "<PopReceipt>%s</PopReceipt>"
	         "<TimeNextVisible>Wed, 19 Aug 2026 10:01:00 GMT</TimeNextVisible>"
	         "<DequeueCount>1</DequeueCount><MessageText>%s</MessageText></QueueMessage>",
	         id, receipt, text);
	return out;
}

struct seen {
	char ids[16][64];
	size_t n;
	const char *take; /* the id the visitor deletes (by saying so) */
};

static enum ecw_scan_verdict visit(void *payload, struct ecw_client *c, const struct ecw_scan_item *it)
{
	struct seen *s = payload;

	(void)c;
	assert_true(s->n < 16);
	snprintf(s->ids[s->n++], 64, "%s", it->msg->id);
	return s->take && strcmp(s->take, it->msg->id) == 0 ? ECW_SCAN_TAKEN : ECW_SCAN_KEEP;
}

static int setup(void **state)
{
	struct client_fixture *fx;
	struct ecw_client_options o = ECW_CLIENT_OPTIONS_INIT;

	o.max_tries = 1;
	client_fixture_setup(&fx, "UseDevelopmentStorage=true", &o);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	client_fixture_teardown(*state);
	return 0;
}

static size_t count_method(const struct fake_transport *f, const char *method)
{
	size_t n = 0;

	for (size_t i = 0; i < f->nreqs; i++)
		n += strcmp(f->reqs[i].method, method) == 0;
	return n;
}

static void test_poison_scan__visits_once_releases_the_rest_never_deletes(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_scan_options o = {.queue = "poison", .hold_s = 60};
	struct ecw_scan_result r;
	struct seen s = {.take = "m2"};
	char a[1024], b[1024], body[4096], body2[4096];

	/* The fake keeps the body pointers: one buffer per answer. Batch 1: m1, m2. Batch 2: m1 again (its hold lapsed, new receipt) and m3.
	 * Then the queue is empty. */
	snprintf(body, sizeof(body), "<QueueMessagesList>%s%s</QueueMessagesList>",
	         msg_xml(a, sizeof(a), "m1", "r1", ENV("archive")),
	         msg_xml(b, sizeof(b), "m2", "r2", "foreign"));
	fake_respond(&fx->fake, 200, NULL, body);
	snprintf(body2, sizeof(body2), "<QueueMessagesList>%s%s</QueueMessagesList>",
	         msg_xml(a, sizeof(a), "m1", "r1b", ENV("archive")),
	         msg_xml(b, sizeof(b), "m3", "r3", ENV("index")));
	fake_respond(&fx->fake, 200, NULL, body2);
	fake_respond(&fx->fake, 200, NULL, "<QueueMessagesList />");
	fake_always(&fx->fake, 204,
	            "x-ms-popreceipt: new\nx-ms-time-next-visible: Wed, 19 Aug 2026 10:02:00 GMT\n", NULL);

	assert_int_equal(ecw_poison_scan(&r, fx->c, &o, visit, &s), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.ids[0], "m1");
	assert_string_equal(s.ids[1], "m2");
	assert_string_equal(s.ids[2], "m3");
	assert_int_equal(r.seen, 3);
	assert_int_equal(r.matched, 3);
	assert_true(r.complete);
	assert_false(r.peeked);
	/* The scan itself never deletes (m2 was "taken" by the visitor, which
	 * would have deleted it itself). */
	assert_int_equal(count_method(&fx->fake, "DELETE"), 0);
	/* Released: m1 with its newest receipt, and m3; each visible at once. */
	assert_int_equal(count_method(&fx->fake, "PUT"), 2);
	for (size_t i = 0; i < fx->fake.nreqs; i++) {
		const struct fake_request *q = &fx->fake.reqs[i];
		if (strcmp(q->method, "PUT") != 0)
			continue;
		assert_true(url_has_param(q->url, "visibilitytimeout=0"));
		assert_null(q->body);
		if (str_contains(q->path, "/messages/m1"))
			assert_true(url_has_param(q->url, "popreceipt=r1b"));
		else
			assert_true(str_contains(q->path, "/messages/m3") &&
			            url_has_param(q->url, "popreceipt=r3"));
	}
	/* Received messages were hidden for the hold. */
	assert_true(url_has_param(fx->fake.reqs[0].url, "visibilitytimeout=60"));
}

static void test_poison_scan__filter_and_limit(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_poison_filter f = {.job = "index"};
	struct ecw_scan_options o = {.queue = "poison", .filter = &f, .limit = 1};
	struct ecw_scan_result r;
	struct seen s = {0};
	char a[1024], b[1024], c2[1024], body[4096];

	snprintf(body, sizeof(body), "<QueueMessagesList>%s%s%s</QueueMessagesList>",
	         msg_xml(a, sizeof(a), "m1", "r1", ENV("archive")),
	         msg_xml(b, sizeof(b), "m2", "r2", ENV("index")),
	         msg_xml(c2, sizeof(c2), "m3", "r3", ENV("index")));
	fake_respond(&fx->fake, 200, NULL, body);
	fake_always(&fx->fake, 204, "x-ms-popreceipt: new\n", NULL);

	assert_int_equal(ecw_poison_scan(&r, fx->c, &o, visit, &s), 0);
	/* Only the first index envelope: the limit ends the scan. */
	assert_int_equal(s.n, 1);
	assert_string_equal(s.ids[0], "m2");
	assert_int_equal(r.matched, 1);
	assert_false(r.complete);
	/* One receive, then all three released (m3 arrived in the same batch). */
	assert_int_equal(count_method(&fx->fake, "GET"), 1);
	assert_int_equal(count_method(&fx->fake, "PUT"), 3);
	assert_int_equal(count_method(&fx->fake, "DELETE"), 0);
}

static void test_poison_scan__peeks_when_one_peek_sees_everything(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_scan_options o = {.queue = "poison", .peek_ok = true};
	struct ecw_scan_result r;
	struct seen s = {0};
	char a[1024], body[4096];

	snprintf(body, sizeof(body), "<QueueMessagesList>%s</QueueMessagesList>",
	         msg_xml(a, sizeof(a), "m1", "", ENV("archive")));
	fake_respond(&fx->fake, 200, NULL, body);

	assert_int_equal(ecw_poison_scan(&r, fx->c, &o, visit, &s), 0);
	assert_int_equal(s.n, 1);
	assert_true(r.peeked);
	assert_true(r.complete);
	/* One peek and nothing else: nothing hidden, nothing to release. */
	assert_int_equal(fx->fake.nreqs, 1);
	assert_true(url_has_param(fx->fake.reqs[0].url, "peekonly=true"));
}

static void test_poison_scan__receive_failure_still_releases(void **state)
{
	struct client_fixture *fx = *state;
	struct ecw_scan_options o = {.queue = "poison"};
	struct ecw_scan_result r;
	struct seen s = {0};
	char a[1024], body[4096];

	snprintf(body, sizeof(body), "<QueueMessagesList>%s</QueueMessagesList>",
	         msg_xml(a, sizeof(a), "m1", "r1", ENV("archive")));
	fake_respond(&fx->fake, 200, NULL, body);
	fake_respond(&fx->fake, 403, "x-ms-error-code: AuthenticationFailed\n", NULL);
	fake_always(&fx->fake, 204, "x-ms-popreceipt: new\n", NULL);

	assert_int_equal(ecw_poison_scan(&r, fx->c, &o, visit, &s), ECW_EAUTH);
	assert_int_equal(s.n, 1);
	assert_false(r.complete);
	/* m1 was still released. */
	assert_int_equal(count_method(&fx->fake, "PUT"), 1);
	assert_true(str_contains(fx->fake.reqs[2].path, "/messages/m1"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_poison_scan__visits_once_releases_the_rest_never_deletes,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_poison_scan__filter_and_limit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_poison_scan__peeks_when_one_peek_sees_everything, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_poison_scan__receive_failure_still_releases, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
