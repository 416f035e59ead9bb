/* SPDX-License-Identifier: MIT */
/* utf8.c - strict UTF-8 decoding and checking (ecw_codec.h): shortest
 * forms only, no surrogates, nothing above U+10FFFF. */
#include <string.h>

#include "ecw_codec.h"

size_t ecw_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len;
	uint32_t c, min;

	if (n == 0)
		return 0;
	if (u[0] < 0x80) {
		*cp = u[0];
		return 1;
	} else if ((u[0] & 0xE0) == 0xC0) {
		len = 2, c = u[0] & 0x1F, min = 0x80;
	} else if ((u[0] & 0xF0) == 0xE0) {
		len = 3, c = u[0] & 0x0F, min = 0x800;
	} else if ((u[0] & 0xF8) == 0xF0) {
		len = 4, c = u[0] & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((u[i] & 0xC0) != 0x80)
			return 0;
		c = c << 6 | (u[i] & 0x3F);
	}
	if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		return 0;
	*cp = c;
	return len;
}

int ecw_utf8_valid(const char *s, size_t n)
{
	uint32_t cp;
	uint64_t w;
	size_t i = 0, k;

	/* ASCII eight bytes at a time: names, keys and most values are. */
	while (i < n) {
		if (n - i >= 8 && (memcpy(&w, s + i, 8), (w & 0x8080808080808080ULL) == 0)) {
			i += 8;
		} else if ((unsigned char)s[i] < 0x80) {
			i++;
		} else {
			if (!(k = ecw_utf8_decode(s + i, n - i, &cp)))
				return 0;
			i += k;
		}
	}
	return 1;
}
