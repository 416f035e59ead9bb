/* SPDX-License-Identifier: MIT */
/* test_resolve.c - resolve.c, the process's cache of name lookups: a name is
 * looked up once for 60 s (here, a shorter time), for every thread that asks
 * while the lookup runs (its failure too), again after being forgotten or
 * after a failure, apart for each name and port, and with the entry kept
 * longest giving way when all are taken. The lookup function is replaced by
 * one that maps the names *.test to loopback addresses through the real
 * getaddrinfo, and can be slowed down or made to fail. What http.c does with
 * it (a kept address that refuses) is test_http's. */
#include "support.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int fail_next;    /* lookups to fail with EAI_AGAIN */
static atomic_int wait_waiters; /* > 0: a lookup waits until this many threads wait for it */
static atomic_int calls;

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* "anything.test" is 127.0.0.1; every other name is looked up as it is. */
static int fake_lookup(const char *host, const char *port, const struct addrinfo *hints,
                       struct addrinfo **res)
{
	size_t n = strlen(host);
	int want = atomic_load(&wait_waiters);

	atomic_fetch_add(&calls, 1);
	if (want > 0) {
		for (int i = 0; i < 10000 && ecw_resolve_waiting() < want; i++)
			pause_ms(1);
	}
	if (atomic_load(&fail_next) > 0) {
		atomic_fetch_sub(&fail_next, 1);
		return EAI_AGAIN;
	}
	if (n > 5 && strcmp(host + n - 5, ".test") == 0)
		host = "127.0.0.1";
	return getaddrinfo(host, port, hints, res);
}

static int setup(void **state)
{
	(void)state;
	ecw_resolve_flush();
	ecw_resolve_set_lookup(fake_lookup);
	ecw_resolve_set_ttl_ms(60000);
	atomic_store(&fail_next, 0);
	atomic_store(&wait_waiters, 0);
	atomic_store(&calls, 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ecw_resolve_set_lookup(NULL);
	ecw_resolve_set_ttl_ms(60000);
	ecw_resolve_flush();
	return 0;
}

/* Resolves host:port and checks it is 127.0.0.1:port; returns whether the
 * answer was kept from before. */
static bool resolve_ok(const char *host, const char *port)
{
	struct ecw_addrs a;
	char why[256] = "";
	bool kept = true;

	if (ecw_resolve(host, port, &a, &kept, why, sizeof(why)) != 0)
		fail_msg("%s:%s: %s", host, port, why);
	assert_true(a.n >= 1);
	assert_int_equal(a.a[0].family, AF_INET);
	const struct sockaddr_in *in = (const struct sockaddr_in *)&a.a[0].sa;
	assert_int_equal(ntohl(in->sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(ntohs(in->sin_port), (int)strtol(port, NULL, 10));
	return kept;
}

static void test_resolve__kept_for_later_calls(void **state)
{
	uint64_t before = ecw_resolve_lookups();
	(void)state;

	assert_false(resolve_ok("svc.test", "443"));
	assert_true(resolve_ok("svc.test", "443"));
	assert_true(resolve_ok("svc.test", "443"));
	assert_int_equal(atomic_load(&calls), 1);
	assert_int_equal(ecw_resolve_lookups() - before, 1);
}

static void test_resolve__looked_up_again_when_old(void **state)
{
	(void)state;

	ecw_resolve_set_ttl_ms(30);
	assert_false(resolve_ok("svc.test", "443"));
	assert_true(resolve_ok("svc.test", "443"));
	pause_ms(60);
	assert_false(resolve_ok("svc.test", "443"));
	assert_int_equal(atomic_load(&calls), 2);
}

static void test_resolve__forgotten_name_looked_up_again(void **state)
{
	(void)state;

	resolve_ok("svc.test", "443");
	ecw_resolve_forget("svc.test", "443");
	assert_false(resolve_ok("svc.test", "443"));
	assert_true(resolve_ok("svc.test", "443"));
	assert_int_equal(atomic_load(&calls), 2);
}

/* A failed lookup says why, and the next call asks again. */
static void test_resolve__failure_not_kept(void **state)
{
	struct ecw_addrs a;
	char why[256] = "", want[256];
	bool kept;
	(void)state;

	atomic_store(&fail_next, 1);
	assert_int_equal(ecw_resolve("svc.test", "443", &a, &kept, why, sizeof(why)), ECW_ETRANSIENT);
	snprintf(want, sizeof(want), "could not resolve host svc.test: %s", gai_strerror(EAI_AGAIN));
	assert_string_equal(why, want);
	assert_false(resolve_ok("svc.test", "443"));
	assert_int_equal(atomic_load(&calls), 2);
}

static void test_resolve__names_and_ports_apart(void **state)
{
	(void)state;

	for (int round = 0; round < 2; round++) {
		assert_int_equal(resolve_ok("svc.test", "443"), round == 1);
		assert_int_equal(resolve_ok("svc.test", "10002"), round == 1);
		assert_int_equal(resolve_ok("other.test", "443"), round == 1);
	}
	assert_int_equal(atomic_load(&calls), 3);
}

/* More names than entries: the one kept longest goes, the newest stay. */
static void test_resolve__oldest_gives_way(void **state)
{
	char host[32];
	(void)state;

	for (int i = 0; i < 10; i++) {
		snprintf(host, sizeof(host), "n%d.test", i);
		assert_false(resolve_ok(host, "443"));
		pause_ms(2); /* each stored at a later millisecond */
	}
	assert_int_equal(atomic_load(&calls), 10);
	for (int i = 2; i < 10; i++) {
		snprintf(host, sizeof(host), "n%d.test", i);
		assert_true(resolve_ok(host, "443"));
	}
	assert_int_equal(atomic_load(&calls), 10);
	assert_false(resolve_ok("n0.test", "443"));
	assert_int_equal(atomic_load(&calls), 11);
}

#define THREADS 16

struct asker {
	pthread_t th;
	int rc;
	bool kept;
	struct ecw_addrs a;
	char why[256];
};

static void *ask(void *p)
{
	struct asker *k = p;

	k->rc = ecw_resolve("svc.test", "443", &k->a, &k->kept, k->why, sizeof(k->why));
	return NULL;
}

/* Threads asking while the name is looked up wait for that lookup: the
 * lookup does not return until the other 15 are waiting for it. */
static void test_resolve__one_lookup_for_many_threads(void **state)
{
	static struct asker k[THREADS];
	(void)state;

	atomic_store(&wait_waiters, THREADS - 1);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&k[i].th, NULL, ask, &k[i]), 0);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(k[i].th, NULL);
		assert_int_equal(k[i].rc, 0);
		assert_false(k[i].kept); /* every one of them got this lookup's answer */
		assert_true(k[i].a.n >= 1);
	}
	assert_int_equal(atomic_load(&calls), 1);
	assert_int_equal(ecw_resolve_waiting(), 0);
}

/* ... and its failure: one lookup, one answer for all, nothing kept. */
static void test_resolve__waiters_share_a_failure(void **state)
{
	static struct asker k[THREADS];
	(void)state;

	atomic_store(&wait_waiters, THREADS - 1);
	atomic_store(&fail_next, 1);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&k[i].th, NULL, ask, &k[i]), 0);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(k[i].th, NULL);
		assert_int_equal(k[i].rc, ECW_ETRANSIENT);
		assert_non_null(strstr(k[i].why, "could not resolve host svc.test: "));
	}
	assert_int_equal(atomic_load(&calls), 1);
	atomic_store(&wait_waiters, 0);
	assert_false(resolve_ok("svc.test", "443"));
	assert_int_equal(atomic_load(&calls), 2);
}

static void test_resolve__too_long_refused(void **state)
{
	struct ecw_addrs a;
	char host[300], why[512] = "";
	bool kept;
	(void)state;

	memset(host, 'h', sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	assert_int_equal(ecw_resolve(host, "443", &a, &kept, why, sizeof(why)), ECW_ETRANSIENT);
	assert_non_null(strstr(why, "could not resolve host hhh"));
	assert_int_equal(atomic_load(&calls), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_resolve__kept_for_later_calls, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resolve__looked_up_again_when_old, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resolve__forgotten_name_looked_up_again, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resolve__failure_not_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resolve__names_and_ports_apart, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resolve__oldest_gives_way, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resolve__one_lookup_for_many_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resolve__waiters_share_a_failure, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resolve__too_long_refused, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
