/* SPDX-License-Identifier: MIT */
/* fuzz.h - what every libFuzzer target in tests/fuzz/ shares: copies of the
 * input that make the sanitizers see any read past its end, and a check that
 * stops the target (libFuzzer saves the input) when an invariant breaks. */
#ifndef ECW_FUZZ_H
#define ECW_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bytes in a heap block of exactly n bytes (no NUL after them): the
 * parsers take (pointer, length), so reading data[n] is a bug ASan reports.
 * free() it. */
static inline char *fuzz_exact(const uint8_t *data, size_t n)
{
	char *p = malloc(n ? n : 1);

	if (!p)
		abort();
	if (n)
		memcpy(p, data, n);
	return p;
}

/* The bytes up to the first NUL, NUL-terminated (for C-string APIs). */
static inline char *fuzz_cstr(const uint8_t *data, size_t n)
{
	const uint8_t *nul = memchr(data, 0, n);
	size_t len = nul ? (size_t)(nul - data) : n;
	char *p = malloc(len + 1);

	if (!p)
		abort();
	memcpy(p, data, len);
	p[len] = '\0';
	return p;
}

/* An invariant: on failure, says which and aborts (a crash libFuzzer keeps). */
#define FUZZ_CHECK(cond)                                                                                     \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);         \
			abort();                                                                             \
		}                                                                                            \
	} while (0)

#endif
