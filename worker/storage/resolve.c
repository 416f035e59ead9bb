/* SPDX-License-Identifier: MIT */
/* resolve.c - the process's cache of host name lookups, for http.c.
 *
 * Every job thread has its own client and so its own connections: at start,
 * or when the service drops idle connections, 2 x concurrency + 2 of them
 * open at once. Each used to call getaddrinfo, and in a Kubernetes pod
 * ("ndots:5") one lookup of an Azure storage name is an A and an AAAA query
 * for each search domain and then the name: 8 to 10 DNS queries, about a
 * thousand at the start of a 64-thread worker.
 * Here a name is looked up once and its addresses kept for 60 s, as libcurl
 * keeps them by default (CURLOPT_DNS_CACHE_TIMEOUT); threads asking while
 * a lookup of the same name is under way wait for its answer, failure
 * included, rather than asking too. A failure is not kept: the next call
 * asks again. A name whose every address refused a connection is forgotten
 * (ecw_resolve_forget) and, when its addresses were kept ones, looked up
 * again at once by http.c: an account that failed over to new addresses is
 * found in the same attempt rather than after the 60 s.
 *
 * Entries are few (the queue and table endpoints, a token endpoint): when
 * all are taken, the one kept longest goes. */
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "resolve.h"

#define RESOLVE_ENTRIES 8

enum entry_state {
	ENTRY_EMPTY,
	ENTRY_LOOKING, /* a thread is calling getaddrinfo for it */
	ENTRY_READY,   /* addrs hold the answer until expires_ms */
	ENTRY_FAILED,  /* the last lookup failed with rc: for its waiters only */
};

struct entry {
	char host[256];
	char port[8];
	enum entry_state state;
	uint64_t gen;       /* lookups completed for this entry */
	int rc;             /* ENTRY_FAILED: getaddrinfo's code */
	int64_t expires_ms; /* ENTRY_READY */
	int64_t stored_ms;  /* for choosing which entry goes */
	struct ecw_addrs addrs;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static struct entry entries[RESOLVE_ENTRIES];
static int64_t ttl_ms = 60000;
static atomic_uint_fast64_t lookups;
static int waiting; /* threads waiting for another's lookup; under mu */

static int (*lookup_fn)(const char *, const char *, const struct addrinfo *,
			struct addrinfo **) = getaddrinfo;

static int64_t clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Under mu. */
static struct entry *find(const char *host, const char *port)
{
	for (int i = 0; i < RESOLVE_ENTRIES; i++)
		if (entries[i].state != ENTRY_EMPTY && strcmp(entries[i].host, host) == 0 &&
		    strcmp(entries[i].port, port) == 0)
			return &entries[i];
	return NULL;
}

/* An entry to look host:port up in: an empty one, else the one kept longest
 * that no thread is filling; NULL when every entry is being filled. Under mu. */
static struct entry *claim(const char *host, const char *port)
{
	struct entry *e = NULL;

	for (int i = 0; i < RESOLVE_ENTRIES; i++) {
		struct entry *c = &entries[i];
		if (c->state == ENTRY_EMPTY) {
			e = c;
			break;
		}
		if (c->state != ENTRY_LOOKING && (!e || c->stored_ms < e->stored_ms))
			e = c;
	}
	if (!e)
		return NULL;
	snprintf(e->host, sizeof(e->host), "%s", host);
	snprintf(e->port, sizeof(e->port), "%s", port);
	e->state = ENTRY_LOOKING;
	return e;
}

/* getaddrinfo's answer, in its order (RFC 6724's preference), as far as fits. */
static int lookup(const char *host, const char *port, struct ecw_addrs *out)
{
	struct addrinfo hints, *ai = NULL;
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	atomic_fetch_add(&lookups, 1);
	if ((rc = lookup_fn(host, port, &hints, &ai)) != 0)
		return rc;
	out->n = 0;
	for (const struct addrinfo *p = ai; p && out->n < ECW_ADDRS_MAX; p = p->ai_next) {
		if (p->ai_addrlen > sizeof(out->a[0].sa))
			continue;
		out->a[out->n].family = p->ai_family;
		out->a[out->n].len = p->ai_addrlen;
		memcpy(&out->a[out->n].sa, p->ai_addr, p->ai_addrlen);
		out->n++;
	}
	freeaddrinfo(ai);
	return out->n ? 0 : EAI_NONAME;
}

static int failed(const char *host, int rc, char *why, size_t why_len)
{
	snprintf(why, why_len, "could not resolve host %s: %s", host, gai_strerror(rc));
	return ECW_ETRANSIENT;
}

int ecw_resolve(const char *host, const char *port, struct ecw_addrs *out, bool *kept, char *why,
		size_t why_len)
{
	struct entry *e;
	int rc;

	*kept = false;
	if (strlen(host) >= sizeof(entries[0].host) || strlen(port) >= sizeof(entries[0].port))
		return failed(host, EAI_NONAME, why, why_len);
	pthread_mutex_lock(&mu);
	for (uint64_t waited_gen = UINT64_MAX;;) {
		e = find(host, port);
		if (!e || e->state == ENTRY_FAILED ||
		    (e->state == ENTRY_READY && clock_ms() >= e->expires_ms))
			break;
		if (e->state == ENTRY_READY) {
			*out = e->addrs;
			*kept = e->gen != waited_gen;
			pthread_mutex_unlock(&mu);
			return 0;
		}
		/* Another thread is looking it up: its answer is ours. */
		uint64_t gen = e->gen;
		waiting++;
		while (e->state == ENTRY_LOOKING && e->gen == gen)
			pthread_cond_wait(&done_cv, &mu);
		waiting--;
		waited_gen = gen + 1;
		if (e->gen == gen + 1 && e->state == ENTRY_FAILED && strcmp(e->host, host) == 0 &&
		    strcmp(e->port, port) == 0) {
			rc = e->rc;
			pthread_mutex_unlock(&mu);
			return failed(host, rc, why, why_len);
		}
		/* Found, or the entry has since moved on (another lookup of
		 * the name, or another name in it): look again. */
	}
	if (e)
		e->state = ENTRY_LOOKING;
	else
		e = claim(host, port); /* NULL: every entry is being filled; look up uncached */
	pthread_mutex_unlock(&mu);

	rc = lookup(host, port, out);
	if (e) {
		pthread_mutex_lock(&mu);
		e->gen++;
		e->stored_ms = clock_ms();
		if (rc == 0) {
			e->addrs = *out;
			e->expires_ms = e->stored_ms + ttl_ms;
			e->state = ENTRY_READY;
		} else {
			e->rc = rc;
			e->state = ENTRY_FAILED;
		}
		pthread_mutex_unlock(&mu);
		pthread_cond_broadcast(&done_cv); /* after the unlock, as in runtime.c */
	}
	return rc ? failed(host, rc, why, why_len) : 0;
}

void ecw_resolve_forget(const char *host, const char *port)
{
	pthread_mutex_lock(&mu);
	struct entry *e = find(host, port);
	if (e && e->state == ENTRY_READY)
		e->state = ENTRY_EMPTY;
	pthread_mutex_unlock(&mu);
}

uint64_t ecw_resolve_lookups(void)
{
	return atomic_load(&lookups);
}

#ifdef ECW_TESTING
void ecw_resolve_set_lookup(int (*fn)(const char *, const char *, const struct addrinfo *,
				      struct addrinfo **))
{
	lookup_fn = fn ? fn : getaddrinfo;
}

void ecw_resolve_set_ttl_ms(int64_t ms)
{
	pthread_mutex_lock(&mu);
	ttl_ms = ms;
	pthread_mutex_unlock(&mu);
}

int ecw_resolve_waiting(void)
{
	pthread_mutex_lock(&mu);
	int n = waiting;
	pthread_mutex_unlock(&mu);
	return n;
}

void ecw_resolve_flush(void)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < RESOLVE_ENTRIES; i++)
		if (entries[i].state != ENTRY_LOOKING)
			entries[i].state = ENTRY_EMPTY;
	pthread_mutex_unlock(&mu);
}
#endif
