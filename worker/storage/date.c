/* SPDX-License-Identifier: MIT */
/* date.c - RFC 1123 dates, as the services write and read them (see date.h). */
#include <stdio.h>
#include <string.h>

#include "date.h"
#include "ecw_clock.h"

static const char *const wdays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
				     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Written by hand: strftime's %a and %b follow the locale. */
/* Every request carries the date, and most of a second's requests carry the
 * same one: each thread keeps the last second it formatted. */
void ecw_date_format(char out[32], time_t t)
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
int ecw_date_parse(time_t *out, const char *s)
{
	int day, mon = -1, year, h, mi, sec;
	const char *p;

	if (strlen(s) < 28 || s[3] != ',' || s[4] != ' ')
		goto bad;
	p = s + 5;
	if (p[1] == ' ') {
		day = ecw_clock_digits(p, 1);
		p += 2;
	} else {
		day = p[2] == ' ' ? ecw_clock_digits(p, 2) : -1;
		p += 3;
	}
	for (int i = 0; i < 12; i++)
		if (strncmp(p, months[i], 3) == 0)
			mon = i + 1;
	if (strlen(p) != 21 || p[3] != ' ' || p[8] != ' ' || p[11] != ':' || p[14] != ':' ||
	    strcmp(p + 17, " GMT") != 0)
		goto bad;
	year = ecw_clock_digits(p + 4, 4);
	h = ecw_clock_digits(p + 9, 2);
	mi = ecw_clock_digits(p + 12, 2);
	sec = ecw_clock_digits(p + 15, 2);
	if (mon < 0 || day < 1 || day > 31 || year < 1970 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
	    sec < 0 || sec > 60)
		goto bad;
	*out = (time_t)((ecw_clock_days_from_civil(year, mon, day) * 24 + h) * 3600 + mi * 60 + sec);
	return 0;
bad:
	return ecw_error_set(ECW_EINVALID, "not an RFC 1123 date: '%.40s'", s);
}
