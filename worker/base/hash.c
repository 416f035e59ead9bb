/* SPDX-License-Identifier: MIT */
/* hash.c - a string hash: FNV-1a, 64 bits (ecw_codec.h). */
#include <stdint.h>

#include "ecw_codec.h"

uint64_t ecw_hash_str(uint64_t h, const char *s)
{
	do
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	while (*s++);
	return h;
}
