/* escape.c - percent-encoding, OData key paths and literals, XML escaping,
 * RFC 1123 dates and resource-name rules: the pure text rules of the REST API. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ecw_clock.h"
#include "escape.h"

/* RFC 3986 unreserved characters plus the marks encodeURIComponent keeps. */
static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.' || c == '!' || c == '~' || c == '*' ||
	       c == '\'' || c == '(' || c == ')';
}

/* Runs of bytes that need no encoding are copied whole: paths and query
 * values are mostly plain, and this is on every request's path. */
int ecw_pct_encode(struct ecw_buf *out, const char *s, size_t n)
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
		if ((err = ecw_pct_encode(out, key, (size_t)(q - key))) < 0 ||
		    (err = ecw_buf_adds(out, "''")) < 0)
			return err;
		key = q + 1;
	}
	return ecw_pct_encode(out, key, strlen(key));
}

int ecw_entity_path(struct ecw_buf *out, const char *table, const char *pk, const char *rk)
{
	int err;

	if ((err = ecw_buf_addc(out, '/')) < 0 || (err = ecw_buf_adds(out, table)) < 0 ||
	    (err = ecw_buf_adds(out, "(PartitionKey='")) < 0 ||
	    (err = add_key(out, pk)) < 0 ||
	    (err = ecw_buf_adds(out, "',RowKey='")) < 0 ||
	    (err = add_key(out, rk)) < 0 ||
	    (err = ecw_buf_adds(out, "')")) < 0)
		return err;
	return 0;
}

int ecw_filter_add_string(struct ecw_buf *filter, const char *value)
{
	int err;

	if ((err = ecw_buf_addc(filter, '\'')) < 0)
		return err;
	for (const char *p = value; *p; p++)
		if ((err = (*p == '\'' ? ecw_buf_adds(filter, "''") : ecw_buf_addc(filter, *p))) < 0)
			return err;
	return ecw_buf_addc(filter, '\'');
}

int ecw_xml_escape(struct ecw_buf *out, const char *s, size_t n)
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

static const char *const wdays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
				     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Written by hand: strftime's %a and %b follow the locale. */
/* Every request carries the date, and most of a second's requests carry the
 * same one: each thread keeps the last second it formatted. */
void ecw_http_date(char out[32], time_t t)
{
	static _Thread_local time_t last = (time_t)-1;
	static _Thread_local char text[32];
	struct tm tm;

	if (t != last) {
		gmtime_r(&t, &tm);
		snprintf(text, sizeof(text), "%s, %02d %s %04d %02d:%02d:%02d GMT", wdays[tm.tm_wday],
			 tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
		last = t;
	}
	memcpy(out, text, sizeof(text));
}

/* "Wed, 19 Aug 2026 10:00:00 GMT", the only form the service sends (every
 * message carries three): read by position rather than with sscanf, which
 * cost more than the rest of a message's XML. A one-digit day is taken too. */
int ecw_parse_http_date(time_t *out, const char *s)
{
	int day, mon = -1, year, h, mi, sec;
	const char *p;

	if (strlen(s) < 28 || s[3] != ',' || s[4] != ' ')
		goto bad;
	p = s + 5;
	if (p[1] == ' ') {
		day = ecw_digits(p, 1);
		p += 2;
	} else {
		day = p[2] == ' ' ? ecw_digits(p, 2) : -1;
		p += 3;
	}
	for (int i = 0; i < 12; i++)
		if (strncmp(p, months[i], 3) == 0)
			mon = i + 1;
	if (strlen(p) != 21 || p[3] != ' ' || p[8] != ' ' || p[11] != ':' || p[14] != ':' ||
	    strcmp(p + 17, " GMT") != 0)
		goto bad;
	year = ecw_digits(p + 4, 4);
	h = ecw_digits(p + 9, 2);
	mi = ecw_digits(p + 12, 2);
	sec = ecw_digits(p + 15, 2);
	if (mon < 0 || day < 1 || day > 31 || year < 1970 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 ||
	    sec > 60)
		goto bad;
	*out = (time_t)((ecw_days_from_civil(year, mon, day) * 24 + h) * 3600 + mi * 60 + sec);
	return 0;
bad:
	return ecw_error_set(ECW_EINVALID, "not an RFC 1123 date: '%.40s'", s);
}

/* 3-63 characters: lowercase letters, digits and single dashes, starting
 * and ending with a letter or digit. */
int ecw_check_queue_name(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n < 3 || n > 63)
		goto bad;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (c == '-') {
			if (i == 0 || i == n - 1 || name[i - 1] == '-')
				goto bad;
		} else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
			goto bad;
		}
	}
	return 0;
bad:
	return ecw_error_set(ECW_EINVALID,
			     "invalid queue name '%.70s': 3-63 lowercase letters, digits and single dashes",
			     name ? name : "");
}

/* ^[A-Za-z][A-Za-z0-9]{2,62}$, and not the reserved name "tables". */
int ecw_check_table_name(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n < 3 || n > 63 || !((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z')))
		goto bad;
	for (size_t i = 1; i < n; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			goto bad;
	}
	if (strcasecmp(name, "tables") == 0)
		goto bad;
	return 0;
bad:
	return ecw_error_set(ECW_EINVALID,
			     "invalid table name '%.70s': a letter then 2-62 letters or digits",
			     name ? name : "");
}
