/* SPDX-License-Identifier: MIT */
/* url.c - see url.h. */
#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

#include "url.h"

bool ecw_url_is_plain_http(const char *url, size_t n)
{
	return n >= 7 && strncasecmp(url, "http://", 7) == 0;
}

bool ecw_url_is_loopback(const char *url, size_t n)
{
	const char *host, *end, *cut;
	char text[64];
	struct in_addr v4;
	struct in6_addr v6;

	if (ecw_url_is_plain_http(url, n))
		host = url + 7;
	else if (n >= 8 && strncasecmp(url, "https://", 8) == 0)
		host = url + 8;
	else
		return false;
	end = host;
	while (end < url + n && *end != '/' && *end != '?' && *end != '#')
		end++;
	if (host < end && *host == '[') {
		/* [v6]:port */
		if (!(cut = memchr(host, ']', (size_t)(end - host))))
			return false;
		host++;
	} else {
		cut = memchr(host, ':', (size_t)(end - host));
		if (!cut)
			cut = end;
	}
	if (cut <= host || (size_t)(cut - host) >= sizeof(text))
		return false;
	memcpy(text, host, (size_t)(cut - host));
	text[cut - host] = '\0';
	if (strcasecmp(text, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, text, &v4) == 1)
		return (ntohl(v4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, text, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}
