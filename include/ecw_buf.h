/* SPDX-License-Identifier: MIT */
/* ecw_buf.h - a growable byte buffer with a hard cap (after curl's dynbuf).
 * The caller owns the struct (ecw_buf_init / ecw_buf_dispose); the bytes are
 * always NUL-terminated so text can be used as a C string. Appending past the
 * cap fails with ECW_ENOMEM and leaves the buffer as it was. */
#ifndef ECW_BUF_H
#define ECW_BUF_H

#include <stddef.h>
#include "ecw_err.h"

struct ecw_buf {
	char *ptr;  /* NULL until the first append */
	size_t len; /* bytes used, not counting the NUL */
	size_t cap; /* bytes allocated */
	size_t max; /* hard cap on len */
};

#define ECW_BUF_DEFAULT_MAX ((size_t)64 * 1024 * 1024)

void ecw_buf_init(struct ecw_buf *b, size_t max);
void ecw_buf_dispose(struct ecw_buf *b);
void ecw_buf_reset(struct ecw_buf *b); /* len = 0, keeps memory */
int ecw_buf_add(struct ecw_buf *b, const void *p, size_t n) ECW_MUST_USE;
int ecw_buf_adds(struct ecw_buf *b, const char *s) ECW_MUST_USE;
/* Appends each string in turn up to the NULL; cheaper than printf("%s%s..")
 * where requests are built. All or nothing, as for one append. */
int ecw_buf_cat(struct ecw_buf *b, ...) __attribute__((sentinel)) ECW_MUST_USE;
/* v in decimal, as printf's %lld without its cost. */
int ecw_buf_addi(struct ecw_buf *b, long long v) ECW_MUST_USE;
/* The same into out, which has room for ECW_INT_TEXT_MAX bytes; no NUL is
 * written. Returns the length. */
#define ECW_INT_TEXT_MAX 20
size_t ecw_buf_int_text(char *out, long long v);
int ecw_buf_printf(struct ecw_buf *b, const char *fmt, ...) ECW_PRINTF(2, 3) ECW_MUST_USE;
/* One byte; inline because escaping loops call it per character. The fast
 * path needs room for the byte and the NUL (cap never exceeds max + 1). */
ECW_MUST_USE static inline int ecw_buf_addc(struct ecw_buf *b, char c)
{
	if (b->len + 1 < b->cap) {
		b->ptr[b->len++] = c;
		b->ptr[b->len] = '\0';
		return 0;
	}
	return ecw_buf_add(b, &c, 1);
}
/* "" when empty, never NULL. */
const char *ecw_buf_cstr(const struct ecw_buf *b);
/* Hands the bytes to the caller (free() them); the buffer is left empty. */
char *ecw_buf_take(struct ecw_buf *b);

#endif
