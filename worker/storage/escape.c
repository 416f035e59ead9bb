/* escape.c - percent-encoding, OData key paths and literals, XML escaping,
 * RFC 1123 dates and resource-name rules: the pure text rules of the REST API. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "storage_private.h"

static int unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       strchr("-_.!~*'()", c) != NULL;
}

int ecw_pct_encode(struct ecw_buf *out, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	int err;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c && unreserved(c)) {
			err = ecw_buf_addc(out, (char)c);
		} else {
			char enc[3] = {'%', hex[c >> 4], hex[c & 15]};
			err = ecw_buf_add(out, enc, 3);
		}
		if (err < 0)
			return err;
	}
	return 0;
}

/* The key is first written as an OData literal ('' for '), then the whole
 * literal is percent-encoded; the service decodes the path before parsing it. */
static int add_key(struct ecw_buf *out, const char *key)
{
	int err = 0;

	for (const char *p = key; *p && err == 0; p++) {
		if (*p == '\'')
			err = ecw_buf_adds(out, "''");
		else
			err = ecw_pct_encode(out, p, 1);
	}
	return err;
}

int ecw_entity_path(struct ecw_buf *out, const char *table, const char *pk, const char *rk)
{
	int err;

	if ((err = ecw_buf_printf(out, "/%s(PartitionKey='", table)) < 0 ||
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
	int err = 0;

	for (size_t i = 0; i < n && err == 0; i++) {
		switch (s[i]) {
		case '&': err = ecw_buf_adds(out, "&amp;"); break;
		case '<': err = ecw_buf_adds(out, "&lt;"); break;
		case '>': err = ecw_buf_adds(out, "&gt;"); break;
		/* An XML parser turns a literal CR (and CRLF) into LF; a character
		 * reference survives, so text comes back byte for byte. */
		case '\r': err = ecw_buf_adds(out, "&#13;"); break;
		default: err = ecw_buf_addc(out, s[i]); break;
		}
	}
	return err;
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

int ecw_parse_http_date(time_t *out, const char *s)
{
	char wd[4], mon[4], zone[4];
	struct tm tm;
	int n = 0;

	memset(&tm, 0, sizeof(tm));
	if (sscanf(s, "%3s, %d %3s %d %d:%d:%d %3s%n", wd, &tm.tm_mday, mon, &tm.tm_year,
		   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, zone, &n) != 8 ||
	    s[n] != '\0' || strcmp(zone, "GMT") != 0 || s[3] != ',')
		goto bad;
	tm.tm_mon = -1;
	for (int i = 0; i < 12; i++)
		if (strcmp(mon, months[i]) == 0)
			tm.tm_mon = i;
	if (tm.tm_mon < 0 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
	    tm.tm_min > 59 || tm.tm_sec > 60 || tm.tm_year < 1970)
		goto bad;
	tm.tm_year -= 1900;
	*out = timegm(&tm);
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
