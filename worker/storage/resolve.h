/* SPDX-License-Identifier: MIT */
/* resolve.h - host names to addresses for the transport (resolve.c): one
 * process-wide cache, shared by every thread's connections. Addresses are
 * copied into the caller's struct; nothing to free. */
#ifndef ECW_STORAGE_RESOLVE_H
#define ECW_STORAGE_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "ecw_err.h"

#define ECW_ADDRS_MAX 8
struct ecw_addrs {
	size_t n;
	struct {
		struct sockaddr_storage sa;
		socklen_t len;
		int family;
	} a[ECW_ADDRS_MAX];
};
/* host:port's addresses (at most ECW_ADDRS_MAX, in getaddrinfo's order):
 * from the process's cache when looked up less than 60 s ago (*kept true),
 * else looked up now, once for all the threads that ask meanwhile. Returns 0,
 * or ECW_ETRANSIENT with "could not resolve host ..." in why. */
int ecw_resolve(const char *host, const char *port, struct ecw_addrs *out, bool *kept, char *why,
		size_t why_len) ECW_MUST_USE;
/* None of host:port's addresses took a connection: look it up again next time. */
void ecw_resolve_forget(const char *host, const char *port);
/* Lookups made so far (getaddrinfo calls). */
uint64_t ecw_resolve_lookups(void);

#ifdef ECW_TESTING
/* Test-only seams (-DECW_TESTING): the lookup function (NULL: getaddrinfo
 * again; its answers are freed with freeaddrinfo), how long answers are
 * kept, and forgetting them. */
struct addrinfo;
void ecw_resolve_set_lookup(int (*fn)(const char *, const char *, const struct addrinfo *,
				      struct addrinfo **));
void ecw_resolve_set_ttl_ms(int64_t ms);
void ecw_resolve_flush(void);
/* Threads waiting for another thread's lookup. */
int ecw_resolve_waiting(void);
#endif

#endif
