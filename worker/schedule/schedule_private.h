/* SPDX-License-Identifier: MIT */
/* schedule_private.h - what worker/schedule/schedule.c (the windows and their
 * markers) and worker/schedule/schedule_audit.c (the audit windows) share, and no
 * other file: the markers' times, the log lines of a window, giving a claim
 * back, and the hand-over of a claimed audit window. */
#ifndef ECW_SCHEDULE_PRIVATE_H
#define ECW_SCHEDULE_PRIVATE_H

#include "schedule.h"

/* The wall clock ms as an Edm.DateTime ("YYYY-MM-DDTHH:MM:SS.mmmZ"). */
int ecw_schedule_iso_time(char *out, size_t cap, int64_t ms) ECW_MUST_USE;
/* An Edm.DateTime back to Unix ms; false when it is not one. */
bool ecw_schedule_parse_iso(int64_t *out, const char *s);
/* A line about one window (window may be NULL). */
void ecw_schedule_log_window(enum ecw_log_level level, const char *event, const struct ecw_schedule *sc,
			     const char *window, const char *why);
/* A schedule_error line with the last error; op names the step. */
void ecw_schedule_log_error(const char *op, const struct ecw_schedule *sc, const char *window);
/* Gives a claim back (deletes the marker If-Match etag), so the window is
 * done again from the start, at once, by whichever replica claims it. */
void ecw_schedule_release(struct ecw_client *c, const struct ecw_config *cfg, const struct ecw_schedule *sc,
			  const char *rk, const char *etag);

/* ---- audit windows (schedule_audit.c) ---- */

/* True when a's thread is free to take a window (NULL: false). */
bool ecw_schedule_audit_idle(struct ecw_schedule_audit *a);
/* Hands the claimed window rk of sc (claim's etag, whose ownership moves)
 * to a's idle thread, which runs the audit, then marks the window done with
 * the result or gives it back. False when a is not idle (ask
 * ecw_schedule_audit_idle first): etag stays the caller's, and the claim
 * is the caller's to give back. */
bool ecw_schedule_audit_take(struct ecw_schedule_audit *a, const struct ecw_schedule *sc, const char *rk,
			     char *etag, bool takeover) ECW_MUST_USE;
/* Shows the result a done marker of sc holds (if any) on /metrics. */
void ecw_schedule_audit_show(const struct ecw_schedule *sc, const struct ecw_entity *marker);
/* Reads sc's markers of the latest max(periods, catch_up) periods with c and
 * shows the newest result on /metrics. */
int ecw_schedule_audit_read(struct ecw_client *c, const struct ecw_config *cfg, const struct ecw_schedule *sc,
			    int periods) ECW_MUST_USE;

#endif
