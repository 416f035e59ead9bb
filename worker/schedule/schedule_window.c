/* SPDX-License-Identifier: MIT */
/* schedule_window.c - one window of a schedule, below both the scheduler
 * (schedule.c) and the auditor (schedule_audit.c), which call it and never
 * each other's internals: the period math (UTC), the marker's RowKey and
 * times (Edm.DateTime), the log lines about a window, and giving a claim
 * back. The crash safety of the windows is argued in schedule.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_config.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "ecw_version.h"
#include "schedule.h"
#include "schedule_private.h"

/* ---- period math ------------------------------------------------------------ */

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

int64_t ecw_schedule_period_start(int64_t t_ms, int64_t every_ms)
{
	/* 1970-01-01 was a Thursday: Mondays are 3 days before the epoch's weeks. */
	int64_t shift = every_ms == ECW_SCHEDULE_WEEK_MS ? 3 * ECW_SCHEDULE_DAY_MS : 0;

	return floor_div(t_ms + shift, every_ms) * every_ms - shift;
}

size_t ecw_schedule_due(int64_t *out, size_t max, int64_t now_ms, int64_t every_ms, int64_t at_ms)
{
	int64_t last = ecw_schedule_period_start(now_ms - at_ms, every_ms);

	for (size_t i = 0; i < max; i++)
		out[i] = last - (int64_t)(max - 1 - i) * every_ms;
	return max;
}

enum utc_format { UTC_DAY, UTC_HOUR, UTC_MINUTE, UTC_SECOND };

/* ms as "YYYY-MM-DD", "YYYY-MM-DDTHH:00:00Z", "YYYY-MM-DDTHH:MMZ" or
 * "YYYY-MM-DDTHH:MM:SS" (years 0..9999). */
static int format_utc(char *out, size_t cap, int64_t ms, enum utc_format f)
{
	time_t t = (time_t)floor_div(ms, 1000);
	struct tm tm;
	int n;

	if (!gmtime_r(&t, &tm) || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900)
		return ecw_error_set(ECW_EINVALID, "time %" PRId64 " ms is out of range", ms);
	switch (f) {
	case UTC_DAY:
		n = snprintf(out, cap, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
		break;
	case UTC_HOUR:
		n = snprintf(out, cap, "%04d-%02d-%02dT%02d:00:00Z", tm.tm_year + 1900, tm.tm_mon + 1,
			     tm.tm_mday, tm.tm_hour);
		break;
	case UTC_MINUTE:
		n = snprintf(out, cap, "%04d-%02d-%02dT%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
			     tm.tm_mday, tm.tm_hour, tm.tm_min);
		break;
	default:
		n = snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
			     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
		break;
	}
	if (n < 0 || (size_t)n >= cap)
		return ecw_error_set(ECW_EINVALID, "no room for a time");
	return 0;
}

int ecw_schedule_window_start(char *out, size_t cap, int64_t period_ms, int64_t every_ms,
			      enum ecw_schedule_window w)
{
	int64_t start = w == ECW_WINDOW_PREVIOUS ? period_ms - every_ms : period_ms;

	return format_utc(out, cap, start, every_ms == ECW_SCHEDULE_HOUR_MS ? UTC_HOUR : UTC_DAY);
}

int ecw_schedule_marker_key(char *out, size_t cap, int64_t period_ms)
{
	return format_utc(out, cap, period_ms, UTC_MINUTE);
}

/* ---- a window's log lines, times and claim ---------------------------------------- */

void ecw_schedule_log_error(const char *op, const struct ecw_schedule *sc, const char *window)
{
	const struct ecw_error *e = ecw_error_last();
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "schedule_error");

	ecw_log_str(l, "op", op);
	ecw_log_str(l, "schedule", sc->name);
	ecw_log_str(l, "window", window);
	ecw_log_str(l, "code", ecw_error_name(e->code));
	ecw_log_int(l, "status", e->http_status);
	ecw_log_str(l, "request_id", e->request_id[0] ? e->request_id : NULL);
	ecw_log_str(l, "error", e->message);
	ecw_log_end(l);
}

void ecw_schedule_log_window(enum ecw_log_level level, const char *event, const struct ecw_schedule *sc,
			     const char *window, const char *why)
{
	struct ecw_log_line *l = ecw_log_begin(level, event);

	ecw_log_str(l, "schedule", sc->name);
	ecw_log_str(l, "window", window);
	ecw_log_str(l, "reason", why);
	ecw_log_str(l, "worker", ecw_version_worker_id());
	ecw_log_end(l);
}

/* The wall clock as an Edm.DateTime. */
int ecw_schedule_iso_time(char *out, size_t cap, int64_t ms)
{
	char head[32];
	int err;

	if ((err = format_utc(head, sizeof(head), ms, UTC_SECOND)) < 0)
		return err;
	snprintf(out, cap, "%s.%03dZ", head, (int)(ms - floor_div(ms, 1000) * 1000));
	return 0;
}

/* An Edm.DateTime back to Unix ms; false when it is not one. */
bool ecw_schedule_parse_iso(int64_t *out, const char *s)
{
	struct tm tm;
	int y, mo, d, h, mi, sec, used = 0;
	int64_t frac = 0, scale = 1000;

	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6)
		return false;
	s += used;
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9'; s++) {
			scale /= 10;
			frac += (*s - '0') * (scale ? scale : 0);
		}
	if (strcmp(s, "Z") != 0)
		return false;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d;
	tm.tm_hour = h, tm.tm_min = mi, tm.tm_sec = sec;
	*out = (int64_t)timegm(&tm) * 1000 + frac;
	return true;
}

void ecw_schedule_release(struct ecw_client *c, const struct ecw_config *cfg, const struct ecw_schedule *sc,
			  const char *rk, const char *etag)
{
	int err = ecw_table_delete(c, cfg->worker.schedule_table, sc->name, rk, etag);

	if (err < 0 && !ecw_error_is_absent(err) && err != ECW_EPRECONDITION)
		ecw_schedule_log_error("schedule.release", sc, rk);
	else
		ecw_schedule_log_window(ECW_LOG_WARN, "schedule_released", sc, rk,
					"the window is done again from the start");
}
