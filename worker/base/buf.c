/* SPDX-License-Identifier: MIT */
/* buf.c - bounded growable buffers (see ecw_buf.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_buf.h"

void ecw_buf_init(struct ecw_buf *b, size_t max)
{
	b->ptr = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max ? max : ECW_BUF_DEFAULT_MAX;
}

void ecw_buf_dispose(struct ecw_buf *b)
{
	if (!b)
		return;
	free(b->ptr);
	b->ptr = NULL;
	b->len = b->cap = 0;
}

void ecw_buf_reset(struct ecw_buf *b)
{
	b->len = 0;
	if (b->ptr)
		b->ptr[0] = '\0';
}

static int grow(struct ecw_buf *b, size_t extra)
{
	size_t need, cap;
	char *p;

	if (extra > b->max - b->len)
		return ecw_error_set(ECW_ENOMEM, "buffer would exceed its %zu-byte cap", b->max);
	need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	/* 256 first: a request's URL, headers and string-to-sign, and most
	 * answers' heads, fit without a second realloc (at 64, ~46 reallocs a
	 * message). */
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	p = realloc(b->ptr, cap);
	if (!p)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	b->ptr = p;
	b->cap = cap;
	return 0;
}

int ecw_buf_add(struct ecw_buf *b, const void *p, size_t n)
{
	int err;

	/* Room for n bytes and the NUL (which also keeps within max) is the
	 * common case: no call. */
	if (n >= b->cap - b->len && (err = grow(b, n)) < 0)
		return err;
	if (n)
		memcpy(b->ptr + b->len, p, n);
	b->len += n;
	b->ptr[b->len] = '\0';
	return 0;
}

int ecw_buf_adds(struct ecw_buf *b, const char *s)
{
	return ecw_buf_add(b, s, strlen(s));
}

int ecw_buf_cat(struct ecw_buf *b, ...)
{
	size_t start = b->len;
	const char *s;
	va_list ap;
	int err = 0;

	va_start(ap, b);
	while ((s = va_arg(ap, const char *)) != NULL)
		if ((err = ecw_buf_adds(b, s)) < 0)
			break;
	va_end(ap);
	if (err < 0 && b->ptr) {
		b->len = start;
		b->ptr[start] = '\0';
	}
	return err;
}

size_t ecw_buf_int_text(char *out, long long v)
{
	char tmp[ECW_INT_TEXT_MAX], *p = tmp + sizeof(tmp);
	/* Negated as unsigned, so LLONG_MIN has a magnitude too. */
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	size_t n;

	do
		*--p = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	if (v < 0)
		*--p = '-';
	n = (size_t)(tmp + sizeof(tmp) - p);
	memcpy(out, p, n);
	return n;
}

int ecw_buf_addi(struct ecw_buf *b, long long v)
{
	char tmp[ECW_INT_TEXT_MAX];

	return ecw_buf_add(b, tmp, ecw_buf_int_text(tmp, v));
}

int ecw_buf_printf(struct ecw_buf *b, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	int n, err;

	/* Most texts are short: format once, on the stack, and copy. Only a
	 * longer one is measured first and formatted again in place (formatting
	 * is a good part of what building a request costs). */
	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return ecw_error_set(ECW_ERROR, "bad format");
	if ((size_t)n < sizeof(small))
		return ecw_buf_add(b, small, (size_t)n);
	if ((err = grow(b, (size_t)n)) < 0)
		return err;
	va_start(ap, fmt);
	vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

const char *ecw_buf_cstr(const struct ecw_buf *b)
{
	return b->ptr ? b->ptr : "";
}

char *ecw_buf_take(struct ecw_buf *b)
{
	char *p = b->ptr;

	if (!p)
		p = calloc(1, 1);
	b->ptr = NULL;
	b->len = b->cap = 0;
	return p;
}
