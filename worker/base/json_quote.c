/* SPDX-License-Identifier: MIT */
/* json_quote.c - JSON string literals (ecw_codec.h), as json-c writes them,
 * for log lines, entity JSON and index lists. */
#include <string.h>

#include "ecw_codec.h"

/* The escape for c, or NULL when c stands as it is: json-c's NOSLASHESCAPE
 * form, which log lines had when json-c wrote them and tools still read. */
static const char *json_escape(unsigned char c, char tmp[7])
{
	static const char hex[] = "0123456789abcdef";

	switch (c) {
	case '"': return "\\\"";
	case '\\': return "\\\\";
	case '\b': return "\\b";
	case '\f': return "\\f";
	case '\n': return "\\n";
	case '\r': return "\\r";
	case '\t': return "\\t";
	}
	if (c >= 0x20)
		return NULL;
	memcpy(tmp, "\\u00", 4);
	tmp[4] = hex[c >> 4];
	tmp[5] = hex[c & 0xf];
	tmp[6] = '\0';
	return tmp;
}

/* A byte that stands as it is: most of them, tested inline so that long
 * strings (an export writes a table's worth) cost a compare a byte. */
static inline int plain(unsigned char c)
{
	return c >= 0x20 && c != '"' && c != '\\';
}

size_t ecw_json_quote_len(const char *s, size_t n)
{
	size_t len = 2;
	char tmp[7];

	for (size_t i = 0; i < n; i++)
		len += plain((unsigned char)s[i]) ? 1 : strlen(json_escape((unsigned char)s[i], tmp));
	return len;
}

int ecw_json_quote(struct ecw_buf *out, const char *s, size_t n)
{
	size_t run = 0;
	char tmp[7];
	int err;

	if ((err = ecw_buf_addc(out, '"')) < 0)
		return err;
	for (size_t i = 0; i < n; i++) {
		if (plain((unsigned char)s[i]))
			continue;
		const char *e = json_escape((unsigned char)s[i], tmp);
		if ((err = ecw_buf_add(out, s + run, i - run)) < 0 || (err = ecw_buf_adds(out, e)) < 0)
			return err;
		run = i + 1;
	}
	if ((err = ecw_buf_add(out, s + run, n - run)) < 0)
		return err;
	return ecw_buf_addc(out, '"');
}
