/* SPDX-License-Identifier: MIT */
/* test_queue.c - the Queue client against a real Azurite: create, put,
 * receive, peek, update, delete, clear, count, visibility and TTL, the 64 KiB
 * limit with XML-special and multi-byte text, authentication and network
 * failures, and connection reuse. Each test gets its own queue. */
#include "itest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void put_text(struct itest *t, const char *q, const char *text)
{
	ECW_ASSERT_OK(ecw_queue_put(NULL, t->client, q, text, strlen(text), NULL));
}

static long long queue_count(struct itest *t, const char *q)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, t->client, q));
	return n;
}

/* Receives until `want` messages have arrived in total (polling while they are
 * still invisible) or timeout_ms passes. Returns the messages in arrival order;
 * *got may be below want on timeout. */
static struct ecw_queue_msg *receive_until(size_t *got, struct itest *t, const char *q, size_t want,
                                           int visibility_s, long timeout_ms)
{
	struct ecw_queue_msg *all = calloc(want ? want : 1, sizeof(*all));
	assert_non_null(all);
	*got = 0;
	int64_t deadline = itest_now_ms() + timeout_ms;
	while (*got < want) {
		struct ecw_queue_msg *m = NULL;
		size_t n = 0;
		int max = (int)(want - *got > 32 ? 32 : want - *got);
		ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, max, visibility_s));
		assert_true(n <= (size_t)max);
		for (size_t i = 0; i < n; i++) {
			all[*got] = m[i]; /* take ownership of the text */
			m[i].text = NULL;
			(*got)++;
		}
		ecw_queue_msgs_free(m, n);
		if (*got >= want || itest_now_ms() > deadline)
			break;
		if (n == 0)
			itest_sleep_ms(200);
	}
	return all;
}

static void free_msgs(struct ecw_queue_msg *m, size_t n)
{
	ecw_queue_msgs_free(m, n);
}

static void test_queue__create_idempotent(void **state)
{
	struct itest *t = *state;
	bool created = false;

	t->queue_used = true;
	ECW_ASSERT_OK(ecw_queue_create(&created, t->client, t->queue));
	assert_true(created);
	created = true;
	ECW_ASSERT_OK(ecw_queue_create(&created, t->client, t->queue));
	assert_false(created);
	ECW_ASSERT_OK(ecw_queue_create(NULL, t->client, t->queue)); /* created_out may be NULL */
	assert_int_equal(queue_count(t, t->queue), 0);

	/* Deleted queue: operations on it are ECW_ENOTFOUND. */
	ECW_ASSERT_OK(ecw_queue_delete_queue(t->client, t->queue));
	long long n = 0;
	ECW_ASSERT_ERR(ecw_queue_count(&n, t->client, t->queue), ECW_ENOTFOUND);
	itest_assert_service_error(404, "QueueNotFound");
	ECW_ASSERT_ERR(ecw_queue_put(NULL, t->client, t->queue, "x", 1, NULL), ECW_ENOTFOUND);
}

static void test_queue__bad_name_rejected_before_request(void **state)
{
	struct itest *t = *state;
	struct ecw_client_stats before = itest_stats(t->client);
	static const char *bad[] = {"ab",     "Upper",    "under_score", "-lead",
	                            "trail-", "dou--ble", "sp ace",      ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bool created = true;
		ECW_ASSERT_ERR(ecw_queue_create(&created, t->client, bad[i]), ECW_EINVALID);
	}
	assert_int_equal(itest_stats(t->client).requests, before.requests);
}

static void test_queue__put_receive_delete(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	struct ecw_queue_msg put;
	time_t now = time(NULL);

	memset(&put, 0, sizeof(put));
	ECW_ASSERT_OK(ecw_queue_put(&put, t->client, q, "hello, queue", 12, NULL));
	assert_true(put.id[0] != '\0');
	assert_true(put.pop_receipt[0] != '\0');
	assert_null(put.text);
	/* Azurite runs on this machine: its clock is ours (allow a little skew). */
	assert_true(put.insertion_time >= now - 5 && put.insertion_time <= now + 5);
	/* The service default TTL is 7 days. */
	assert_true(put.expiration_time - put.insertion_time >= 7 * 86400 - 2);
	assert_true(put.expiration_time - put.insertion_time <= 7 * 86400 + 2);

	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 1, 30));
	assert_int_equal(n, 1);
	assert_string_equal(m[0].id, put.id);
	assert_int_equal(m[0].text_len, 12);
	assert_memory_equal(m[0].text, "hello, queue", 13); /* NUL-terminated */
	assert_int_equal(m[0].dequeue_count, 1);
	assert_true(m[0].pop_receipt[0] != '\0');
	assert_true(m[0].next_visible >= now + 25 && m[0].next_visible <= now + 40);
	assert_int_equal(m[0].insertion_time, put.insertion_time);

	/* Hidden now. */
	struct ecw_queue_msg *m2 = NULL;
	size_t n2 = 99;
	ECW_ASSERT_OK(ecw_queue_receive(&m2, &n2, t->client, q, 32, 30));
	assert_int_equal(n2, 0);
	ecw_queue_msgs_free(m2, n2);

	ECW_ASSERT_OK(ecw_queue_delete(t->client, q, m[0].id, m[0].pop_receipt));
	assert_int_equal(queue_count(t, q), 0);
	/* Deleting again: the message is gone. */
	ECW_ASSERT_ERR(ecw_queue_delete(t->client, q, m[0].id, m[0].pop_receipt), ECW_ENOTFOUND);
	itest_assert_service_error(404, "MessageNotFound");
	ecw_queue_msgs_free(m, n);
}

static void test_queue__receive_empty_queue(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	struct ecw_queue_msg *m = NULL;
	size_t n = 99;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 32, 30));
	assert_int_equal(n, 0);
	ecw_queue_msgs_free(m, n);
	n = 99;
	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, t->client, q, 32));
	assert_int_equal(n, 0);
	ecw_queue_msgs_free(m, n);
}

static void test_queue__receive_max_out_of_range(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_ERR(ecw_queue_receive(&m, &n, t->client, q, 33, 30), ECW_EINVALID);
	ECW_ASSERT_ERR(ecw_queue_receive(&m, &n, t->client, q, 0, 30), ECW_EINVALID);
	ECW_ASSERT_ERR(ecw_queue_peek(&m, &n, t->client, q, 33), ECW_EINVALID);
}

static void test_queue__visibility_delay(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	struct ecw_queue_put_options o = {.visibility_delay_s = 2, .ttl_s = 0};
	struct ecw_queue_msg put;
	time_t now = time(NULL);

	ECW_ASSERT_OK(ecw_queue_put(&put, t->client, q, "later", 5, &o));
	assert_true(put.next_visible >= now + 1 && put.next_visible <= now + 8);

	struct ecw_queue_msg *m = NULL;
	size_t n = 99;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 32, 30));
	assert_int_equal(n, 0);
	ecw_queue_msgs_free(m, n);
	n = 99;
	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, t->client, q, 32));
	assert_int_equal(n, 0);
	ecw_queue_msgs_free(m, n);
	/* The approximate count includes invisible messages. */
	assert_int_equal(queue_count(t, q), 1);

	/* It shows up once the delay has passed, not before. */
	size_t got = 0;
	struct ecw_queue_msg *all = receive_until(&got, t, q, 1, 30, 8000);
	assert_int_equal(got, 1);
	assert_string_equal(all[0].id, put.id);
	assert_string_equal(all[0].text, "later");
	assert_int_equal(all[0].dequeue_count, 1);
	assert_true(time(NULL) >= put.next_visible);
	free_msgs(all, got);
}

static void test_queue__ttl_never_expires(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	struct ecw_queue_put_options o = {.visibility_delay_s = 0, .ttl_s = -1};
	struct ecw_queue_msg put;

	memset(&put, 0xff, sizeof(put));
	put.text = NULL;
	ECW_ASSERT_OK(ecw_queue_put(&put, t->client, q, "forever", 7, &o));
	/* The header promises 0 for "never expires". Azurite (and the service)
	 * answer ExpirationTime "Fri, 31 Dec 9999 23:59:59 GMT": the client must
	 * turn that into 0. */
	ITEST_CHECK(put.expiration_time == 0, "put: expiration_time %lld, expected 0 (never)",
	            (long long)put.expiration_time);

	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 1, 30));
	assert_int_equal(n, 1);
	assert_string_equal(m[0].text, "forever");
	ITEST_CHECK(m[0].expiration_time == 0, "receive: expiration_time %lld, expected 0 (never)",
	            (long long)m[0].expiration_time);
	ecw_queue_msgs_free(m, n);

	n = 0;
	ECW_ASSERT_OK(ecw_queue_put(NULL, t->client, q, "forever2", 8, &o));
	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, t->client, q, 1));
	assert_int_equal(n, 1);
	assert_string_equal(m[0].text, "forever2");
	ITEST_CHECK(m[0].expiration_time == 0, "peek: expiration_time %lld, expected 0 (never)",
	            (long long)m[0].expiration_time);
	ecw_queue_msgs_free(m, n);
}

static void test_queue__ttl_positive(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	struct ecw_queue_put_options o = {.visibility_delay_s = 0, .ttl_s = 3600};
	struct ecw_queue_msg put;

	ECW_ASSERT_OK(ecw_queue_put(&put, t->client, q, "an hour", 7, &o));
	assert_int_equal(put.expiration_time - put.insertion_time, 3600);

	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 1, 30));
	assert_int_equal(n, 1);
	assert_int_equal(m[0].expiration_time, put.expiration_time);
	ECW_ASSERT_OK(ecw_queue_delete(t->client, q, m[0].id, m[0].pop_receipt));
	ecw_queue_msgs_free(m, n);

	/* A one-second TTL really expires: after it, nothing is delivered. */
	struct ecw_queue_put_options o1 = {.visibility_delay_s = 0, .ttl_s = 1};
	ECW_ASSERT_OK(ecw_queue_put(&put, t->client, q, "brief", 5, &o1));
	assert_int_equal(put.expiration_time - put.insertion_time, 1);
	itest_sleep_ms(2500);
	n = 99;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 32, 30));
	assert_int_equal(n, 0);
	ecw_queue_msgs_free(m, n);

	/* The visibility delay must stay below the TTL: refused, not silently sent. */
	struct ecw_queue_put_options bad = {.visibility_delay_s = 60, .ttl_s = 30};
	ECW_ASSERT_ERR(ecw_queue_put(NULL, t->client, q, "x", 1, &bad), ECW_EINVALID);
}

static bool same_id_set(struct ecw_queue_msg *a, size_t na, char ids[][64], size_t nids)
{
	if (na != nids)
		return false;
	for (size_t i = 0; i < na; i++) {
		bool found = false;
		for (size_t j = 0; j < nids && !found; j++)
			found = strcmp(a[i].id, ids[j]) == 0;
		if (!found)
			return false;
		for (size_t j = 0; j < i; j++)
			if (strcmp(a[i].id, a[j].id) == 0)
				return false; /* delivered twice in one round */
	}
	return true;
}

static void test_queue__receive_32_dequeue_counts(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	char ids[32][64];
	char text[32];

	for (int i = 0; i < 32; i++) {
		struct ecw_queue_msg put;
		snprintf(text, sizeof(text), "msg-%02d", i);
		ECW_ASSERT_OK(ecw_queue_put(&put, t->client, q, text, strlen(text), NULL));
		memcpy(ids[i], put.id, sizeof(ids[i]));
	}
	assert_int_equal(queue_count(t, q), 32);

	/* One receive of 32 gets them all at once. */
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 32, 1));
	assert_int_equal(n, 32);
	assert_true(same_id_set(m, n, ids, 32));
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(m[i].dequeue_count, 1);
		assert_int_equal(m[i].text_len, 6);
		assert_memory_equal(m[i].text, "msg-", 4);
	}
	ecw_queue_msgs_free(m, n);

	/* Not deleted: each re-delivery after the 1 s visibility counts up. */
	for (long round = 2; round <= 3; round++) {
		itest_sleep_ms(1100);
		size_t got = 0;
		struct ecw_queue_msg *all = receive_until(&got, t, q, 32, 1, 8000);
		assert_int_equal(got, 32);
		assert_true(same_id_set(all, got, ids, 32));
		for (size_t i = 0; i < got; i++)
			ITEST_CHECK(all[i].dequeue_count == round,
			            "round %ld: message %s has dequeue count %ld", round, all[i].id,
			            all[i].dequeue_count);
		if (round == 3) {
			for (size_t i = 0; i < got; i++)
				ECW_ASSERT_OK(ecw_queue_delete(t->client, q, all[i].id, all[i].pop_receipt));
		}
		free_msgs(all, got);
	}
	assert_int_equal(queue_count(t, q), 0);
}

static void test_queue__peek_leaves_messages(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	put_text(t, q, "one");
	put_text(t, q, "two");
	put_text(t, q, "three");

	for (int round = 0; round < 2; round++) {
		struct ecw_queue_msg *m = NULL;
		size_t n = 0;
		ECW_ASSERT_OK(ecw_queue_peek(&m, &n, t->client, q, 32));
		assert_int_equal(n, 3);
		for (size_t i = 0; i < n; i++) {
			assert_string_equal(m[i].pop_receipt, "");
			assert_int_equal(m[i].next_visible, 0);
			assert_int_equal(m[i].dequeue_count, 0);
			assert_true(m[i].id[0] != '\0');
		}
		/* Peek order is insertion order. */
		assert_string_equal(m[0].text, "one");
		assert_string_equal(m[1].text, "two");
		assert_string_equal(m[2].text, "three");
		ecw_queue_msgs_free(m, n);
	}
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, t->client, q, 1));
	assert_int_equal(n, 1);
	assert_string_equal(m[0].text, "one");
	ecw_queue_msgs_free(m, n);

	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 32, 30));
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(m[i].dequeue_count, 1);
	ecw_queue_msgs_free(m, n);
}

static void test_queue__update_text_and_visibility(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	put_text(t, q, "version 1");

	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 1, 30));
	assert_int_equal(n, 1);
	char old_receipt[128];
	memcpy(old_receipt, m[0].pop_receipt, sizeof(old_receipt));

	/* New text, visible again at once. */
	ECW_ASSERT_OK(ecw_queue_update(&m[0], t->client, q, 0, "version 2 & <more>", 18));
	assert_true(m[0].pop_receipt[0] != '\0');
	assert_string_not_equal(m[0].pop_receipt, old_receipt);
	assert_true(m[0].next_visible <= time(NULL) + 2);

	struct ecw_queue_msg *p = NULL;
	size_t np = 0;
	ECW_ASSERT_OK(ecw_queue_peek(&p, &np, t->client, q, 32));
	assert_int_equal(np, 1);
	assert_string_equal(p[0].id, m[0].id);
	assert_int_equal(p[0].text_len, 18);
	assert_string_equal(p[0].text, "version 2 & <more>");
	ecw_queue_msgs_free(p, np);

	/* The old receipt is stale: the lease is lost (Azurite answers 400
	 * PopReceiptMismatch here, the service 404; both are ECW_ENOTFOUND). */
	ECW_ASSERT_ERR(ecw_queue_delete(t->client, q, m[0].id, old_receipt), ECW_ENOTFOUND);

	/* New visibility, text kept: hidden for a minute. */
	char second_receipt[128];
	memcpy(second_receipt, m[0].pop_receipt, sizeof(second_receipt));
	time_t now = time(NULL);
	ECW_ASSERT_OK(ecw_queue_update(&m[0], t->client, q, 60, NULL, 0));
	assert_string_not_equal(m[0].pop_receipt, second_receipt);
	assert_true(m[0].next_visible >= now + 55 && m[0].next_visible <= now + 65);

	np = 99;
	ECW_ASSERT_OK(ecw_queue_receive(&p, &np, t->client, q, 32, 30));
	assert_int_equal(np, 0);
	ecw_queue_msgs_free(p, np);
	ECW_ASSERT_OK(ecw_queue_peek(&p, &np, t->client, q, 32));
	assert_int_equal(np, 0);
	ecw_queue_msgs_free(p, np);

	/* Updating with a stale receipt is refused the same way. */
	struct ecw_queue_msg stale = m[0];
	stale.text = NULL;
	memcpy(stale.pop_receipt, second_receipt, sizeof(stale.pop_receipt));
	ECW_ASSERT_ERR(ecw_queue_update(&stale, t->client, q, 0, NULL, 0), ECW_ENOTFOUND);

	/* Bring it back with the current receipt: the text is still version 2. */
	ECW_ASSERT_OK(ecw_queue_update(&m[0], t->client, q, 0, NULL, 0));
	ECW_ASSERT_OK(ecw_queue_peek(&p, &np, t->client, q, 32));
	assert_int_equal(np, 1);
	assert_string_equal(p[0].text, "version 2 & <more>");
	ecw_queue_msgs_free(p, np);

	ECW_ASSERT_OK(ecw_queue_delete(t->client, q, m[0].id, m[0].pop_receipt));
	assert_int_equal(queue_count(t, q), 0);
	/* Updating a deleted message: gone. */
	ECW_ASSERT_ERR(ecw_queue_update(&m[0], t->client, q, 0, NULL, 0), ECW_ENOTFOUND);
	ecw_queue_msgs_free(m, n);
}

static void test_queue__clear(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	for (int i = 0; i < 5; i++)
		put_text(t, q, "to be cleared");
	assert_int_equal(queue_count(t, q), 5);
	ECW_ASSERT_OK(ecw_queue_clear(t->client, q));
	assert_int_equal(queue_count(t, q), 0);
	struct ecw_queue_msg *m = NULL;
	size_t n = 99;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 32, 30));
	assert_int_equal(n, 0);
	ecw_queue_msgs_free(m, n);
	/* Clearing an empty queue is fine too. */
	ECW_ASSERT_OK(ecw_queue_clear(t->client, q));
}

static void test_queue__approximate_count(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	assert_int_equal(queue_count(t, q), 0);
	for (int i = 0; i < 7; i++)
		put_text(t, q, "counted");
	assert_int_equal(queue_count(t, q), 7);

	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 2, 30));
	assert_int_equal(n, 2);
	/* Invisible messages still count. */
	assert_int_equal(queue_count(t, q), 7);
	for (size_t i = 0; i < n; i++)
		ECW_ASSERT_OK(ecw_queue_delete(t->client, q, m[i].id, m[i].pop_receipt));
	ecw_queue_msgs_free(m, n);
	assert_int_equal(queue_count(t, q), 5);
}

/* Fills buf with exactly len bytes of text full of what XML and naive
 * escaping get wrong, never splitting a UTF-8 sequence. Multi-byte characters
 * appear only in the first mb_limit bytes (see the 64 KiB test for why). */
static void hostile_text(char *buf, size_t len, size_t mb_limit)
{
	static const char *pieces[] = {
	    "&",
	    "<",
	    ">",
	    "\"",
	    "'",
	    "\r\n",
	    "\r",
	    "\n",
	    "\t",
	    "&amp;",
	    "&lt;",
	    "]]>",
	    "<![CDATA[x]]>",
	    "<MessageText>",
	    "</QueueMessage>",
	    "\xc3\xa9",
	    "\xe2\x82\xac",
	    "\xf0\x9f\x98\x80",
	    "Zo\xc3\xab",
	    "\xe6\x97\xa5\xe6\x9c\xac",
	    "%2B+/=",
	    "\\",
	    " ",
	    "plain ascii ",
	};
	size_t np = sizeof(pieces) / sizeof(pieces[0]);
	size_t off = 0, k = 0;
	while (off < len) {
		const char *p = pieces[k++ % np];
		size_t pl = strlen(p);
		bool multibyte = false;
		for (size_t i = 0; i < pl; i++)
			multibyte |= (unsigned char)p[i] >= 0x80;
		if (multibyte && off + pl > mb_limit)
			continue;
		if (off + pl > len) {
			memset(buf + off, 'x', len - off);
			off = len;
			break;
		}
		memcpy(buf + off, p, pl);
		off += pl;
	}
	buf[len] = '\0';
}

static void round_trip(struct itest *t, const char *q, const char *text, size_t len)
{
	ECW_ASSERT_OK(ecw_queue_clear(t->client, q));
	ECW_ASSERT_OK(ecw_queue_put(NULL, t->client, q, text, len, NULL));

	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, t->client, q, 1));
	assert_int_equal(n, 1);
	assert_int_equal(m[0].text_len, len);
	assert_memory_equal(m[0].text, text, len + 1);
	ecw_queue_msgs_free(m, n);

	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 1, 30));
	assert_int_equal(n, 1);
	assert_int_equal(m[0].text_len, len);
	assert_memory_equal(m[0].text, text, len + 1);

	/* Update with hostile text too. */
	char utext[1001];
	hostile_text(utext, 1000, 1000);
	ECW_ASSERT_OK(ecw_queue_update(&m[0], t->client, q, 0, utext, 1000));
	struct ecw_queue_msg *p = NULL;
	size_t np = 0;
	ECW_ASSERT_OK(ecw_queue_peek(&p, &np, t->client, q, 1));
	assert_int_equal(np, 1);
	assert_int_equal(p[0].text_len, 1000);
	assert_memory_equal(p[0].text, utext, 1001);
	ecw_queue_msgs_free(p, np);
	ecw_queue_msgs_free(m, n);
}

static void test_queue__64k_hostile_text_round_trip(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	size_t len = ECW_QUEUE_MAX_TEXT;
	char *text = malloc(len + 1);
	assert_non_null(text);
	/* Azurite 3.37 decodes each chunk of a request body as UTF-8 on its own
	 * (readRequestIntoText joins Buffers with Array.join), so a multi-byte
	 * character that straddles a TCP read is turned into U+FFFD, which also
	 * pushes a 65,536-byte text over the limit (413). Chunks are at least a
	 * few KiB, so multi-byte characters stay in the first 2 KiB here; the
	 * next test covers them throughout a text that fits in one chunk. */
	hostile_text(text, len, 2048);
	assert_int_equal(strlen(text), 65536);
	round_trip(t, q, text, len);
	free(text);
}

static void test_queue__multibyte_text_round_trip(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	size_t len = 8192;
	char *text = malloc(len + 1);
	assert_non_null(text);
	hostile_text(text, len, len);
	round_trip(t, q, text, len);
	free(text);
}

static void test_queue__small_edge_texts_round_trip(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	/* Text ending in whitespace or consisting of an entity-looking string. */
	static const char *texts[] = {"&#13;", "a\r\n", "x  ", "\xe2\x82\xac"};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		ECW_ASSERT_OK(ecw_queue_clear(t->client, q));
		put_text(t, q, texts[i]);
		struct ecw_queue_msg *m = NULL;
		size_t n = 0;
		ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 1, 30));
		assert_int_equal(n, 1);
		assert_int_equal(m[0].text_len, strlen(texts[i]));
		assert_string_equal(m[0].text, texts[i]);
		ecw_queue_msgs_free(m, n);
	}
}

static void test_queue__over_64k_rejected(void **state)
{
	struct itest *t = *state;
	const char *q = itest_queue(t);
	size_t len = ECW_QUEUE_MAX_TEXT + 1;
	char *text = malloc(len + 1);
	assert_non_null(text);
	hostile_text(text, len, len);
	ECW_ASSERT_ERR(ecw_queue_put(NULL, t->client, q, text, len, NULL), ECW_ETOOLARGE);
	assert_int_equal(queue_count(t, q), 0);

	/* The same limit applies to update. */
	put_text(t, q, "small");
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &n, t->client, q, 1, 30));
	assert_int_equal(n, 1);
	ECW_ASSERT_ERR(ecw_queue_update(&m[0], t->client, q, 0, text, len), ECW_ETOOLARGE);
	ecw_queue_msgs_free(m, n);
	free(text);
}

static void test_queue__wrong_key_is_auth_error_at_once(void **state)
{
	struct itest *t = *state;
	/* A well-formed key that is not the account's. */
	char *cs = itest_connstr_with(
	    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==", 0);
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	itest_client_for(&acct, &c, cs, NULL);

	bool created = false;
	ECW_ASSERT_ERR(ecw_queue_create(&created, c, t->queue), ECW_EAUTH);
	itest_assert_service_error(403, NULL);
	/* The message must not leak the key. */
	assert_null(strstr(ecw_error_last()->message, "AAAAAAAAAAAA"));
	struct ecw_client_stats s = itest_stats(c);
	assert_int_equal(s.requests, 1);
	assert_int_equal(s.retries, 0);

	ecw_client_free(c);
	ecw_account_free(acct);
	free(cs);
}

static void test_queue__connection_refused_retried_then_transient(void **state)
{
	(void)state;
	char *cs = itest_connstr_with(NULL, itest_closed_port());
	struct ecw_client_options o = {3, 10, 50, 5000, 1000, false, NULL, NULL, NULL, NULL, false};
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	itest_client_for(&acct, &c, cs, &o);

	int64_t start = itest_now_ms();
	long long n = 0;
	ECW_ASSERT_ERR(ecw_queue_count(&n, c, "nowhere"), ECW_ETRANSIENT);
	int64_t elapsed = itest_now_ms() - start;
	assert_int_equal(ecw_error_last()->http_status, 0);
	struct ecw_client_stats s = itest_stats(c);
	assert_int_equal(s.requests, 3);
	assert_int_equal(s.retries, 2);
	/* Two backoffs of at most 50 ms each: well under a second. */
	ITEST_CHECK(elapsed < 1500, "took %lld ms", (long long)elapsed);

	ecw_client_free(c);
	ecw_account_free(acct);
	free(cs);
}

static void test_queue__keep_alive_one_connection(void **state)
{
	struct itest *t = *state;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	itest_client_for(&acct, &c, itest_connstr(), NULL);

	t->queue_used = true;
	ECW_ASSERT_OK(ecw_queue_create(NULL, c, t->queue)); /* 1 */
	for (int i = 0; i < 5; i++) {                       /* 3 each: 16 */
		long long n = -1;
		ECW_ASSERT_OK(ecw_queue_put(NULL, c, t->queue, "ka", 2, NULL));
		ECW_ASSERT_OK(ecw_queue_count(&n, c, t->queue));
		assert_int_equal(n, i + 1);
		struct ecw_queue_msg *m = NULL;
		size_t k = 0;
		ECW_ASSERT_OK(ecw_queue_peek(&m, &k, c, t->queue, 32));
		assert_int_equal(k, (size_t)(i + 1));
		ecw_queue_msgs_free(m, k);
	}
	struct ecw_queue_msg *m = NULL;
	size_t k = 0;
	ECW_ASSERT_OK(ecw_queue_receive(&m, &k, c, t->queue, 1, 30)); /* 17 */
	assert_int_equal(k, 1);
	ECW_ASSERT_OK(ecw_queue_update(&m[0], c, t->queue, 30, "ka2", 3));       /* 18 */
	ECW_ASSERT_OK(ecw_queue_delete(c, t->queue, m[0].id, m[0].pop_receipt)); /* 19 */
	ecw_queue_msgs_free(m, k);
	ECW_ASSERT_OK(ecw_queue_clear(c, t->queue)); /* 20 */

	struct ecw_client_stats s = itest_stats(c);
	assert_int_equal(s.requests, 20);
	assert_int_equal(s.retries, 0);
	assert_int_equal(s.connections, 1);

	ecw_client_free(c);
	ecw_account_free(acct);
}

/* A group's deletes, pipelined on the client's connection: each answered
 * for its own message, a stale receipt's 404 for that one only. */
static void test_queue__delete_many_pipelined(void **state)
{
	struct itest *t = *state;

	t->queue_used = true;
	itest_check_delete_many(t->client, t->queue);
}

#define T(name) cmocka_unit_test_setup_teardown(name, itest_setup, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_queue__create_idempotent),
	    T(test_queue__bad_name_rejected_before_request),
	    T(test_queue__put_receive_delete),
	    T(test_queue__delete_many_pipelined),
	    T(test_queue__receive_empty_queue),
	    T(test_queue__receive_max_out_of_range),
	    T(test_queue__visibility_delay),
	    T(test_queue__ttl_never_expires),
	    T(test_queue__ttl_positive),
	    T(test_queue__receive_32_dequeue_counts),
	    T(test_queue__peek_leaves_messages),
	    T(test_queue__update_text_and_visibility),
	    T(test_queue__clear),
	    T(test_queue__approximate_count),
	    T(test_queue__64k_hostile_text_round_trip),
	    T(test_queue__multibyte_text_round_trip),
	    T(test_queue__small_edge_texts_round_trip),
	    T(test_queue__over_64k_rejected),
	    T(test_queue__wrong_key_is_auth_error_at_once),
	    T(test_queue__connection_refused_retried_then_transient),
	    T(test_queue__keep_alive_one_connection),
	};
	return cmocka_run_group_tests_name("queue", tests, NULL, NULL);
}
