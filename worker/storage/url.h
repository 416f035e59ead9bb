/* SPDX-License-Identifier: MIT */
/* url.h - which hosts a secret may reach over plain http (url.c): the
 * account's endpoints (account.c) and the token authority (token.c) ask the
 * same question, so the rule is written once. */
#ifndef ECW_STORAGE_URL_H
#define ECW_STORAGE_URL_H

#include <stdbool.h>
#include <stddef.h>

/* True when url (n bytes, "http://host[:port][/...]" or https) names a
 * loopback host: localhost, an address of 127.0.0.0/8, or ::1 (bracketed).
 * Traffic to such a host never leaves the machine, so a secret sent to it in
 * the clear is not exposed on a network. Any other name, or a URL that is
 * not http(s), is false: a name that only resolves to loopback today may
 * not tomorrow. */
bool ecw_url_is_loopback(const char *url, size_t n);

/* True when url (n bytes) starts with "http://" (any case). */
bool ecw_url_is_plain_http(const char *url, size_t n);

#endif
