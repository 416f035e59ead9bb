/* SPDX-License-Identifier: MIT */
/* escape.c - percent-encoding, OData key paths and string literals, XML
 * escaping: how text goes into a URL, a $filter or a queue message. */
#include <stdbool.h>
#include <string.h>

#include "ecw_storage.h"
#include "escape.h"

/* RFC 3986 unreserved characters plus the marks encodeURIComponent keeps. */
static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
	       c == '_' || c == '.' || c == '!' || c == '~' || c == '*' || c == '\'' || c == '(' || c == ')';
}

/* Runs of bytes that need no encoding are copied whole: paths and query
 * values are mostly plain, and this is on every request's path. */
int ecw_escape_pct(struct ecw_buf *out, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t run = 0;
	int err;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (unreserved(c))
			continue;
		char enc[3] = {'%', hex[c >> 4], hex[c & 15]};
		if ((err = ecw_buf_add(out, s + run, i - run)) < 0 || (err = ecw_buf_add(out, enc, 3)) < 0)
			return err;
		run = i + 1;
	}
	return ecw_buf_add(out, s + run, n - run);
}

/* The key is first written as an OData literal ('' for '), then the whole
 * literal is percent-encoded; the service decodes the path before parsing it. */
static int add_key(struct ecw_buf *out, const char *key)
{
	const char *q;
	int err;

	while ((q = strchr(key, '\'')) != NULL) {
		if ((err = ecw_escape_pct(out, key, (size_t)(q - key))) < 0 ||
		    (err = ecw_buf_adds(out, "''")) < 0)
			return err;
		key = q + 1;
	}
	return ecw_escape_pct(out, key, strlen(key));
}

int ecw_escape_entity_path(struct ecw_buf *out, const char *table, const char *pk, const char *rk)
{
	int err;

	if ((err = ecw_buf_addc(out, '/')) < 0 || (err = ecw_buf_adds(out, table)) < 0 ||
	    (err = ecw_buf_adds(out, "(PartitionKey='")) < 0 || (err = add_key(out, pk)) < 0 ||
	    (err = ecw_buf_adds(out, "',RowKey='")) < 0 || (err = add_key(out, rk)) < 0 ||
	    (err = ecw_buf_adds(out, "')")) < 0)
		return err;
	return 0;
}

int ecw_escape_filter_string(struct ecw_buf *filter, const char *value)
{
	int err;

	if ((err = ecw_buf_addc(filter, '\'')) < 0)
		return err;
	for (const char *p = value; *p; p++)
		if ((err = (*p == '\'' ? ecw_buf_adds(filter, "''") : ecw_buf_addc(filter, *p))) < 0)
			return err;
	return ecw_buf_addc(filter, '\'');
}

int ecw_escape_xml(struct ecw_buf *out, const char *s, size_t n)
{
	size_t run = 0;
	int err;

	for (size_t i = 0; i < n; i++) {
		const char *e;
		switch (s[i]) {
		case '&': e = "&amp;"; break;
		case '<': e = "&lt;"; break;
		case '>': e = "&gt;"; break;
		/* An XML parser turns a literal CR (and CRLF) into LF; a character
		 * reference survives, so text comes back byte for byte. */
		case '\r': e = "&#13;"; break;
		default: continue;
		}
		if ((err = ecw_buf_add(out, s + run, i - run)) < 0 || (err = ecw_buf_adds(out, e)) < 0)
			return err;
		run = i + 1;
	}
	return ecw_buf_add(out, s + run, n - run);
}
