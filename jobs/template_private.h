/* SPDX-License-Identifier: MIT */
/* template_private.h - a compiled template's parts, shared by template.c
 * (compiling, rendering, reading keys back) and template_filter.c
 * (inverting a filter). The template owns its parts and their strings;
 * ecw_template_free frees them. */
#ifndef ECW_TEMPLATE_PRIVATE_H
#define ECW_TEMPLATE_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>

enum fmt {
	FMT_NONE,
	FMT_PAD,            /* {Name:F>W} / {Name:F<W} */
	FMT_INVERTED_TICKS, /* 19 digits, newest first */
	FMT_UNIX,           /* 10 digits of Unix seconds */
	FMT_DATE_INT,       /* yyyyMMdd */
	FMT_HASH4,          /* 4 hex digits of SHA-256 */
	FMT_DATE_PATTERN,   /* {Name:yyyy/MM/dd/HH}: the time's fields in UTC */
};

struct part {
	char *text; /* literal text, or the property name */
	bool field;
	bool operand; /* a filter's placeholder outside quotes: one typed literal */
	bool now;     /* {now:...}: the wall clock, not a property */
	enum fmt fmt;
	char fill; /* FMT_PAD */
	bool left; /* pad on the left ('>') */
	int width;
	char *pattern; /* FMT_DATE_PATTERN */
};

struct ecw_template {
	char *source;
	struct part *parts;
	size_t n;
	bool filter; /* compiled with ECW_TEMPLATE_FILTER: may render as ECW_TEMPLATE_ODATA */
};

/* Whitespace as OData lexes it between tokens. */
bool ecw_template_odata_space(char c);

#endif
