/* SPDX-License-Identifier: MIT */
/* names.c - the one copy of the name rules queues and blobs share
 * (names.h), below queue.c and blob.c. */
#include <ctype.h>
#include <string.h>

#include "names.h"

bool ecw_names_dns_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n < 3 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (c == '-') {
			if (i == 0 || i == n - 1 || name[i - 1] == '-')
				return false;
		} else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
			return false;
		}
	}
	return true;
}

bool ecw_names_meta_valid(const char *s, size_t max)
{
	if (!*s || strlen(s) > max || !(isalpha((unsigned char)*s) || *s == '_'))
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return false;
	return true;
}
