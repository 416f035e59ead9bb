/* SPDX-License-Identifier: MIT */
/* schedule.c - `schedules:` (see schedule.h): the section's checks, the
 * period math, and the scheduler each replica ticks on its own thread.
 *
 * Each window (a schedule's period) is enqueued once across replicas by
 * claiming it first: a marker entity in worker.schedule_table, PartitionKey
 * the schedule's name, RowKey the period's start. Insert fails with 409 for
 * every replica but one. The claimant enqueues the window's messages, then
 * merges Done=true (If-Match its claim's ETag).
 *
 * Crash safety, one step at a time (the claim is a lease of
 * worker.schedule_lease, measured from ClaimedAt in real time):
 *   - dies before the insert: nothing was written; the window is still due
 *     and the next tick of any replica claims it.
 *   - dies after the insert, before or while enqueueing: the marker stays
 *     not done. Once it is older than the lease, another replica (or this one
 *     restarted) takes it over with If-Match on the ETag it read, so of two
 *     replicas seeing the same stale claim only one wins (412 for the other),
 *     and enqueues the whole window again. The messages put before the crash
 *     are put twice: the jobs converge (a rollup recomputes its window, a
 *     purge finds nothing more to delete), so duplicates are harmless, while
 *     a lost window would not be.
 *   - dies after enqueueing, before Done: the same takeover, the same
 *     harmless duplicates.
 *   - dies after Done: the window is finished; nobody touches it again.
 * A claimant still enqueueing when its lease runs out (a huge for_each table)
 * may be taken over while alive: both enqueue (harmless), and its own Done
 * then fails with 412, which it logs and leaves to the new claimant. A replica
 * stopping in the middle of a window, or failing to enqueue, deletes its
 * marker (If-Match) so the window is redone at once instead of after the
 * lease.
 *
 * An audit schedule (audit: JOB) claims its windows the same way, but puts
 * no message: the claim goes to this replica's auditor
 * (worker/schedule/schedule_audit.c, where its crash safety is argued), which runs
 * the audit, renews the claim meanwhile, and marks the window done with its
 * result; while it runs, this replica claims no other audit window.
 *
 * Catch-up: a tick looks at the latest catch_up periods whose firing is due,
 * oldest first, and does those without a Done marker; older ones are left
 * for good. Periods known done are remembered so an idle tick sends nothing. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_buf.h"
#include "ecw_clock.h"
#include "ecw_entity.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "ecw_crash.h"
#include "ecw_version.h"
#include "message.h"
#include "metrics.h"
#include "schedule.h"
#include "schedule_private.h"

#define MAX_SCHEDULES 256
#define MAX_CATCH_UP 1000
#define DEFAULT_CATCH_UP 7
/* An audit's storage requests a second: at least 1, so that a pacing wait
 * (1/rate) never holds up its stop or the renewal of its claim. */
#define DEFAULT_AUDIT_RATE 100
#define MAX_AUDIT_RATE 100000
#define ERROR_WAIT_MS 5000
#define TICK_MS 1000
/* How often each replica reads the audits' latest results, and over how many
 * periods back (at least; catch_up when more). */
#define AUDIT_SHOW_MS 60000
#define AUDIT_SHOW_PERIODS 3
/* Distinct for_each values held while a window is enqueued. */
#define MAX_VALUES 1000000

struct schedule {
	struct ecw_schedule pub;
	char *name, *job, *table, *field, *as, *filter;
};

struct ecw_schedule_set {
	struct schedule *v;
	size_t n;
};

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

/* ---- the section ------------------------------------------------------------ */

static const char *const schedule_keys[] = {"job",  "audit",    "every",  "at",   "for_each", "window",
					    "name", "catch_up", "repair", "rate", NULL};
static const char *const for_each_keys[] = {"table", "field", "as", "filter", NULL};

static bool ident_ok(const char *s, size_t max, bool dash)
{
	size_t n = strlen(s);

	if (n < 1 || n > max || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || (dash && c == '-')))
			return false;
	}
	return true;
}

static const char *every_name(int64_t every_ms)
{
	return every_ms == ECW_SCHEDULE_HOUR_MS ? "1h" : every_ms == ECW_SCHEDULE_DAY_MS ? "1d" : "1w";
}

/* "HH:MM" within the period: 1h "00:MM", 1d up to "23:59", 1w up to
 * "167:59" (hours from Monday 00:00). Returns 0 or -1 (error recorded). */
static int parse_at(int64_t *out, const struct ecw_node *v, int64_t every_ms, const char *what,
		    struct ecw_node_errors *errs)
{
	const char *s = v->value, *colon = strchr(s, ':');
	long hh = 0, mm = 0,
	     max_h = every_ms == ECW_SCHEDULE_HOUR_MS  ? 0
		     : every_ms == ECW_SCHEDULE_DAY_MS ? 23
						       : 167;
	size_t nh = colon ? (size_t)(colon - s) : 0;
	bool ok = colon && nh >= 2 && nh <= 3 && strlen(colon + 1) == 2;

	for (size_t i = 0; ok && i < nh; i++)
		ok = s[i] >= '0' && s[i] <= '9', hh = hh * 10 + (s[i] - '0');
	for (size_t i = 1; ok && i <= 2; i++)
		ok = colon[i] >= '0' && colon[i] <= '9', mm = mm * 10 + (colon[i] - '0');
	if (!ok || mm > 59 || hh > max_h) {
		if (every_ms == ECW_SCHEDULE_HOUR_MS)
			ecw_node_error(errs, v,
				       "%s.at must be \"00:MM\" with every: 1h (minutes into the hour)",
				       what);
		else if (every_ms == ECW_SCHEDULE_DAY_MS)
			ecw_node_error(errs, v, "%s.at must be \"HH:MM\" (00:00..23:59 UTC) with every: 1d",
				       what);
		else
			ecw_node_error(
				errs, v,
				"%s.at must be \"HH:MM\" from Monday 00:00 UTC (00:00..167:59) with every: 1w",
				what);
		return -1;
	}
	*out = hh * ECW_SCHEDULE_HOUR_MS + mm * 60000;
	return 0;
}

static const char *list_fields(char *buf, size_t cap, const char *const *fields)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; fields && fields[i]; i++) {
		int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", fields[i]);
		if (w < 0 || (size_t)w >= cap - used)
			break;
		used += (size_t)w;
	}
	return buf;
}

static size_t count_fields(const char *const *fields)
{
	size_t n = 0;

	while (fields && fields[n])
		n++;
	return n;
}

/* for_each: {table, field, as, filter}; checks `as` against what the job reads. */
static int parse_for_each(struct schedule *s, const struct ecw_node *fe, const struct ecw_job_def *def,
			  const char *what, struct ecw_node_errors *errs)
{
	const char *const *fields =
		def && def->type->message_fields ? def->type->message_fields(def->settings) : NULL;
	size_t nf = count_fields(fields);
	char list[256];
	int bad = 0;

	if (fe->kind != ECW_NODE_MAP) {
		ecw_node_error(errs, fe, "%s.for_each must be a map {table, field, as, filter}", what);
		return -1;
	}
	bad |= ecw_node_check_keys(fe, for_each_keys, "for_each", errs) > 0;
	bad |= ecw_node_string(&s->table, fe, "table", true, errs) < 0;
	bad |= ecw_node_string(&s->field, fe, "field", true, errs) < 0;
	bad |= ecw_node_string(&s->as, fe, "as", false, errs) < 0;
	bad |= ecw_node_string(&s->filter, fe, "filter", false, errs) < 0;
	if (s->table && !ecw_table_name_valid(s->table)) {
		ecw_node_error(errs, ecw_node_get(fe, "table"),
			       "%s.for_each.table: invalid table name: a table name is " ECW_TABLE_NAME_RULE,
			       what);
		bad = 1;
	}
	if (s->field && !ident_ok(s->field, 255, false)) {
		ecw_node_error(errs, ecw_node_get(fe, "field"),
			       "%s.for_each.field must be PartitionKey, RowKey or a property name", what);
		bad = 1;
	}
	if (bad || !def)
		return bad ? -1 : 0;
	if (nf == 0) {
		ecw_node_error(errs, fe,
			       "%s.for_each: job '%s' reads no message field: drop for_each (every message "
			       "would be the same)",
			       what, def->name);
		return -1;
	}
	if (!s->as) {
		if (nf != 1) {
			ecw_node_error(
				errs, fe,
				"%s.for_each: give `as`, the message field that receives the value (job "
				"'%s' reads %s)",
				what, def->name, nf ? list_fields(list, sizeof(list), fields) : "no fields");
			return -1;
		}
		if (!(s->as = strdup(fields[0])))
			return -1;
		return 0;
	}
	for (size_t i = 0; i < nf; i++)
		if (strcmp(fields[i], s->as) == 0)
			return 0;
	ecw_node_error(errs, ecw_node_get(fe, "as"),
		       "%s.for_each.as: job '%s' reads no field '%.64s' (it reads %s)", what, def->name,
		       s->as, nf ? list_fields(list, sizeof(list), fields) : "no fields");
	return -1;
}

/* The job exists, is keyless, and gets every field it reads and the window
 * it works on. */
static int check_job(const struct schedule *s, const struct ecw_node *item, const struct ecw_job_def *def,
		     const char *what, struct ecw_node_errors *errs)
{
	const char *const *fields =
		def->type->message_fields ? def->type->message_fields(def->settings) : NULL;
	size_t nf = count_fields(fields);
	/* A type may have window_ms and still be configured without a window
	 * (it answers 0): that is no window either. */
	int64_t win = def->type->window_ms ? def->type->window_ms(def->settings) : 0;
	char list[256];
	int bad = 0;

	if (!def->type->keyless) {
		ecw_node_error(errs, ecw_node_get(item, "job"),
			       "%s.job: '%s' is a %s job, which takes an entity's keys (a schedule can only "
			       "enqueue a keyless job)",
			       what, def->name, def->type->name);
		return -1;
	}
	if (nf > 1 || (nf == 1 && !s->table)) {
		ecw_node_error(
			errs, item,
			"%s: job '%s' reads the message field(s) %s, and a schedule provides one, from "
			"for_each (with `as`)",
			what, def->name, list_fields(list, sizeof(list), fields));
		bad = 1;
	}
	if (s->pub.window != ECW_WINDOW_NONE) {
		const char *w = s->pub.window == ECW_WINDOW_PREVIOUS ? "previous" : "current";
		if (win <= 0) {
			ecw_node_error(errs, ecw_node_get(item, "window"),
				       "%s.window: job '%s' (%s) does not work on a window", what, def->name,
				       def->type->name);
			bad = 1;
		} else if (win != s->pub.every_ms) {
			ecw_node_error(errs, ecw_node_get(item, "window"),
				       "%s.window: %s needs every: %s to match the job's window %s", what, w,
				       (win == ECW_SCHEDULE_HOUR_MS || win == ECW_SCHEDULE_DAY_MS ||
					win == ECW_SCHEDULE_WEEK_MS)
					       ? every_name(win)
					       : "(the job's window)",
				       (win == ECW_SCHEDULE_HOUR_MS || win == ECW_SCHEDULE_DAY_MS ||
					win == ECW_SCHEDULE_WEEK_MS)
					       ? every_name(win)
					       : "is not 1h, 1d or 1w");
			bad = 1;
		}
	}
	return bad ? -1 : 0;
}

static void schedule_dispose(struct schedule *s)
{
	free(s->name);
	free(s->job);
	free(s->table);
	free(s->field);
	free(s->as);
	free(s->filter);
}

/* The configured job named name, or NULL. */
static const struct ecw_job_def *find_job(const struct ecw_job_def *jobs, size_t njobs, const char *name)
{
	for (size_t i = 0; i < njobs; i++)
		if (strcmp(jobs[i].name, name) == 0)
			return &jobs[i];
	return NULL;
}

/* audit: JOB, a configured job whose type can be audited, with repair and
 * rate; for_each and window mean nothing to an audit. *def: the job. */
static int parse_audit(struct schedule *s, const struct ecw_node *item, const struct ecw_job_def **def,
		       const struct ecw_job_def *jobs, size_t njobs, const char *what,
		       struct ecw_node_errors *errs)
{
	static const char *const refused[] = {"job", "for_each", "window", NULL};
	long long rate = DEFAULT_AUDIT_RATE;
	int bad = 0;

	s->pub.audit = true;
	for (size_t i = 0; refused[i]; i++)
		if (ecw_node_get(item, refused[i])) {
			ecw_node_error(
				errs, ecw_node_get(item, refused[i]),
				i == 0 ? "%s: give job or audit, not both"
				       : "%s.%s is not for an audit schedule (it audits the whole job)",
				what, refused[i]);
			bad = 1;
		}
	if (ecw_node_string(&s->job, item, "audit", true, errs) < 0)
		return -1;
	if (!(*def = find_job(jobs, njobs, s->job))) {
		ecw_node_error(errs, ecw_node_get(item, "audit"),
			       "%s.audit names '%.64s', which is not a configured job", what, s->job);
		bad = 1;
	} else if (!(*def)->type->audit) {
		ecw_node_error(errs, ecw_node_get(item, "audit"),
			       "%s.audit: job '%s' is of type %s, which cannot be audited", what,
			       (*def)->name, (*def)->type->name);
		bad = 1;
	}
	bad |= ecw_node_bool(&s->pub.repair, item, "repair", false, errs) < 0;
	bad |= ecw_node_int(&rate, item, "rate", 1, MAX_AUDIT_RATE, false, errs) < 0;
	s->pub.rate = (int)rate;
	return bad ? -1 : 0;
}

static int parse_one(struct schedule *s, const struct ecw_node *item, size_t idx,
		     const struct ecw_job_def *jobs, size_t njobs, struct ecw_node_errors *errs)
{
	const struct ecw_node *every = ecw_node_get(item, "every"), *at = ecw_node_get(item, "at");
	const struct ecw_node *fe = ecw_node_get(item, "for_each");
	const struct ecw_job_def *def = NULL;
	char what[32], *window = NULL;
	long long catch_up = DEFAULT_CATCH_UP;
	int bad = 0;

	snprintf(what, sizeof(what), "schedules[%zu]", idx);
	if (item->kind != ECW_NODE_MAP) {
		ecw_node_error(errs, item, "%s must be a map with at least job and every", what);
		return -1;
	}
	bad |= ecw_node_check_keys(item, schedule_keys, what, errs) > 0;
	if (ecw_node_get(item, "audit")) {
		bad |= parse_audit(s, item, &def, jobs, njobs, what, errs) < 0;
	} else if (ecw_node_string(&s->job, item, "job", false, errs) < 0) {
		bad = 1;
	} else if (!s->job) {
		ecw_node_error(errs, item, "%s: missing required key 'job' (or 'audit')", what);
		bad = 1;
	} else if (!(def = find_job(jobs, njobs, s->job))) {
		ecw_node_error(errs, ecw_node_get(item, "job"),
			       "%s.job names '%.64s', which is not a configured job", what, s->job);
		bad = 1;
	} else {
		static const char *const audit_only[] = {"repair", "rate", NULL};
		for (size_t i = 0; audit_only[i]; i++)
			if (ecw_node_get(item, audit_only[i])) {
				ecw_node_error(errs, ecw_node_get(item, audit_only[i]),
					       "%s.%s is for an audit schedule (audit: JOB)", what,
					       audit_only[i]);
				bad = 1;
			}
	}
	if (!every) {
		ecw_node_error(errs, item, "%s: missing required key 'every' (1h, 1d or 1w)", what);
		bad = 1;
	} else if (every->kind != ECW_NODE_SCALAR ||
		   ecw_duration_parse(&s->pub.every_ms, every->value, true) < 0 ||
		   (s->pub.every_ms != ECW_SCHEDULE_HOUR_MS && s->pub.every_ms != ECW_SCHEDULE_DAY_MS &&
		    s->pub.every_ms != ECW_SCHEDULE_WEEK_MS)) {
		ecw_node_error(errs, every,
			       "%s.every must be 1h, 1d or 1w (periods start on the hour, at UTC midnight, "
			       "on Monday 00:00 UTC)",
			       what);
		s->pub.every_ms = 0;
		bad = 1;
	}
	if (at && s->pub.every_ms) {
		if (at->kind != ECW_NODE_SCALAR || !at->value) {
			ecw_node_error(errs, at, "%s.at must be \"HH:MM\"", what);
			bad = 1;
		} else {
			bad |= parse_at(&s->pub.at_ms, at, s->pub.every_ms, what, errs) < 0;
		}
	}
	if (ecw_node_string(&window, item, "window", false, errs) < 0) {
		bad = 1;
	} else if (window) {
		if (strcmp(window, "previous") == 0)
			s->pub.window = ECW_WINDOW_PREVIOUS;
		else if (strcmp(window, "current") == 0)
			s->pub.window = ECW_WINDOW_CURRENT;
		else {
			ecw_node_error(errs, ecw_node_get(item, "window"),
				       "%s.window must be previous or current", what);
			bad = 1;
		}
		free(window);
	}
	if (ecw_node_int(&catch_up, item, "catch_up", 1, MAX_CATCH_UP, false, errs) < 0)
		bad = 1;
	s->pub.catch_up = (int)catch_up;
	if (ecw_node_string(&s->name, item, "name", false, errs) < 0) {
		bad = 1;
	} else if (s->name && !ident_ok(s->name, 63, true)) {
		ecw_node_error(errs, ecw_node_get(item, "name"),
			       "%s.name must be 1-63 letters, digits, '-' or '_'", what);
		bad = 1;
	} else if (!s->name && s->job && !(s->name = strdup(s->job))) {
		return -1;
	}
	if (fe && !s->pub.audit && parse_for_each(s, fe, def, what, errs) < 0)
		bad = 1;
	if (def && !bad && !s->pub.audit && check_job(s, item, def, what, errs) < 0)
		bad = 1;
	s->pub.name = s->name;
	s->pub.job = s->job;
	s->pub.table = s->table;
	s->pub.field = s->field;
	s->pub.as = s->as;
	s->pub.filter = s->filter;
	return bad ? -1 : 0;
}

int ecw_schedules_parse(struct ecw_schedule_set **out, const struct ecw_node *sec,
			const struct ecw_job_def *jobs, size_t njobs, struct ecw_node_errors *errs)
{
	struct ecw_schedule_set *set = NULL;
	int bad = 0;

	*out = NULL;
	/* `schedules:` with nothing under it: none. */
	if (!sec || (sec->kind == ECW_NODE_SCALAR && (!sec->value || !sec->value[0]) && !sec->quoted) ||
	    (sec->kind == ECW_NODE_SEQ && sec->n == 0))
		return 0;
	if (sec->kind != ECW_NODE_SEQ) {
		ecw_node_error(errs, sec, "schedules must be a list of {job, every, at, ...}");
		return -1;
	}
	if (sec->n > MAX_SCHEDULES) {
		ecw_node_error(errs, sec, "schedules: at most %d", MAX_SCHEDULES);
		return -1;
	}
	if (!(set = calloc(1, sizeof(*set))) || !(set->v = calloc(sec->n, sizeof(*set->v)))) {
		free(set);
		ecw_node_error(errs, sec, "schedules: out of memory");
		return -1;
	}
	set->n = sec->n;
	for (size_t i = 0; i < sec->n; i++) {
		if (parse_one(&set->v[i], sec->items[i], i, jobs, njobs, errs) < 0) {
			bad = 1;
			continue;
		}
		for (size_t j = 0; j < i; j++)
			if (set->v[j].name && strcmp(set->v[j].name, set->v[i].name) == 0) {
				const struct ecw_node *at = ecw_node_get(sec->items[i], "name");
				ecw_node_error(
					errs, at ? at : sec->items[i],
					"schedules[%zu]: the name '%s' is taken by schedules[%zu] (it names "
					"the schedule's markers): give each its own `name`",
					i, set->v[i].name, j);
				bad = 1;
			}
	}
	if (bad) {
		ecw_schedules_free(set);
		return -1;
	}
	*out = set;
	return 0;
}

void ecw_schedules_free(struct ecw_schedule_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		schedule_dispose(&s->v[i]);
	free(s->v);
	free(s);
}

size_t ecw_schedules_count(const struct ecw_schedule_set *s)
{
	return s ? s->n : 0;
}

const struct ecw_schedule *ecw_schedules_get(const struct ecw_schedule_set *s, size_t i)
{
	return s && i < s->n ? &s->v[i].pub : NULL;
}

/* ---- the scheduler ------------------------------------------------------------ */

struct ecw_scheduler {
	const struct ecw_config *cfg;
	const struct ecw_schedule_set *set;
	int64_t **done; /* per schedule: catch_up period starts known done (INT64_MIN: empty) */
	struct ecw_schedule_audit *auditor;
	int64_t show_audits_ms; /* when the audits' results are read next (ecw_now_ms) */
};

int ecw_scheduler_new(struct ecw_scheduler **out, const struct ecw_config *cfg,
		      struct ecw_schedule_audit *auditor)
{
	struct ecw_scheduler *s = calloc(1, sizeof(*s));
	size_t n = ecw_schedules_count(cfg->schedules);

	*out = NULL;
	if (!s || !(s->done = calloc(n ? n : 1, sizeof(*s->done))))
		goto oom;
	s->cfg = cfg;
	s->set = cfg->schedules;
	s->auditor = auditor;
	for (size_t i = 0; i < n; i++) {
		size_t k = (size_t)s->set->v[i].pub.catch_up;
		if (!(s->done[i] = malloc(k * sizeof(**s->done))))
			goto oom;
		for (size_t j = 0; j < k; j++)
			s->done[i][j] = INT64_MIN;
	}
	*out = s;
	return 0;
oom:
	ecw_scheduler_free(s);
	return ecw_error_set(ECW_ENOMEM, "out of memory");
}

void ecw_scheduler_free(struct ecw_scheduler *s)
{
	if (!s)
		return;
	for (size_t i = 0; s->done && i < ecw_schedules_count(s->set); i++)
		free(s->done[i]);
	free(s->done);
	free(s);
}

static bool known_done(const int64_t *done, int k, int64_t p)
{
	for (int i = 0; i < k; i++)
		if (done[i] == p)
			return true;
	return false;
}

/* Replaces the oldest entry: older periods drop out of the catch-up list first. */
static void remember_done(int64_t *done, int k, int64_t p)
{
	int oldest = 0;

	if (known_done(done, k, p))
		return;
	for (int i = 1; i < k; i++)
		if (done[i] < done[oldest])
			oldest = i;
	done[oldest] = p;
}

void ecw_schedule_log_error(const char *op, const struct ecw_schedule *sc, const char *window)
{
	const struct ecw_error *e = ecw_error_last();
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "schedule_error");

	ecw_log_str(l, "op", op);
	ecw_log_str(l, "schedule", sc->name);
	ecw_log_str(l, "window", window);
	ecw_log_str(l, "code", ecw_err_name(e->code));
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
	ecw_log_str(l, "worker", ecw_worker_id());
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

static int value_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The distinct for_each values, sorted, into *out (n strings; free each and
 * the array). Entities without the field as a string are skipped (counted
 * in *skipped). */
static int collect_values(char ***out, size_t *n, size_t *skipped, struct ecw_client *c,
			  const struct ecw_schedule *sc, const atomic_bool *stopping)
{
	struct ecw_query_options qo = {sc->filter, sc->field, 0, 0};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	char **v = NULL;
	size_t cap = 0, k = 0;
	int err;

	*out = NULL;
	*n = *skipped = 0;
	if ((err = ecw_table_query_new(&q, c, sc->table, &qo)) < 0)
		goto done;
	while ((err = ecw_table_query_next(&e, q)) == 0 && e) {
		const char *val = NULL;
		const struct ecw_prop *p;
		if (strcmp(sc->field, "PartitionKey") == 0)
			val = ecw_entity_pk(e);
		else if (strcmp(sc->field, "RowKey") == 0)
			val = ecw_entity_rk(e);
		else if ((p = ecw_entity_get(e, sc->field)) && p->type == ECW_EDM_STRING)
			val = p->v.s;
		if (!val) {
			(*skipped)++;
		} else {
			if (k == cap) {
				char **nv;
				if (cap >= MAX_VALUES) {
					err = ecw_error_set(ECW_ETOOLARGE, "for_each: more than %d entities",
							    MAX_VALUES);
					goto done;
				}
				cap = cap ? cap * 2 : 64;
				if (!(nv = realloc(v, cap * sizeof(*v)))) {
					err = ecw_error_set(ECW_ENOMEM, "out of memory");
					goto done;
				}
				v = nv;
			}
			if (!(v[k] = strdup(val))) {
				err = ecw_error_set(ECW_ENOMEM, "out of memory");
				goto done;
			}
			k++;
		}
		ecw_entity_free(e);
		e = NULL;
		if (atomic_load(stopping)) {
			err = ecw_error_set(ECW_ETRANSIENT, "stopping");
			goto done;
		}
	}
	if (err < 0)
		goto done;
	if (k > 1) {
		size_t w = 1;
		qsort(v, k, sizeof(*v), value_cmp);
		for (size_t i = 1; i < k; i++) {
			if (strcmp(v[i], v[w - 1]) == 0)
				free(v[i]);
			else
				v[w++] = v[i];
		}
		k = w;
	}
done:
	ecw_entity_free(e);
	ecw_table_query_free(q);
	if (err < 0) {
		for (size_t i = 0; i < k; i++)
			free(v[i]);
		free(v);
		return err;
	}
	*out = v;
	*n = k;
	return 0;
}

static int put_message(struct ecw_client *c, const struct ecw_config *cfg, const struct ecw_schedule *sc,
		       const char *id, const char *value, const char *window_start)
{
	struct ecw_queue_put_options po = {0, cfg->worker.message_ttl_s};
	struct ecw_buf text, fv, fw;
	char *fields[3] = {NULL, NULL, NULL};
	size_t nf = 0;
	int err;

	ecw_buf_init(&text, ECW_QUEUE_MAX_TEXT);
	ecw_buf_init(&fv, ECW_QUEUE_MAX_TEXT);
	ecw_buf_init(&fw, 128);
	if (value) {
		if ((err = ecw_buf_printf(&fv, "%s=%s", sc->as, value)) < 0)
			goto done;
		fields[nf++] = fv.ptr;
	}
	if (window_start) {
		if ((err = ecw_buf_printf(&fw, "window_start=%s", window_start)) < 0)
			goto done;
		fields[nf++] = fw.ptr;
	}
	if ((err = ecw_message_encode(&text, sc->job, NULL, NULL, id, fields, false)) < 0)
		goto done;
	err = ecw_queue_put(NULL, c, cfg->worker.queue, text.ptr, text.len, &po);
done:
	ecw_buf_dispose(&text);
	ecw_buf_dispose(&fv);
	ecw_buf_dispose(&fw);
	return err;
}

/* Puts the window's messages; *count says how many went out. */
static int enqueue_window(size_t *count, struct ecw_client *c, const struct ecw_config *cfg,
			  const struct ecw_schedule *sc, int64_t period, const char *rk,
			  const atomic_bool *stopping)
{
	char ws[32], id[128];
	const char *window_start = NULL;
	char **values = NULL;
	size_t n = 0, skipped = 0;
	int err = 0;

	*count = 0;
	snprintf(id, sizeof(id), "schedule:%s:%s", sc->name, rk);
	if (sc->window != ECW_WINDOW_NONE) {
		if ((err = ecw_schedule_window_start(ws, sizeof(ws), period, sc->every_ms, sc->window)) < 0)
			return err;
		window_start = ws;
	}
	if (!sc->table) {
		if ((err = put_message(c, cfg, sc, id, NULL, window_start)) == 0)
			*count = 1;
		return err;
	}
	if ((err = collect_values(&values, &n, &skipped, c, sc, stopping)) < 0)
		return err;
	if (skipped) {
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "schedule_skipped_entities");
		ecw_log_str(l, "schedule", sc->name);
		ecw_log_str(l, "window", rk);
		ecw_log_str(l, "table", sc->table);
		ecw_log_str(l, "field", sc->field);
		ecw_log_int(l, "entities", (int64_t)skipped);
		ecw_log_str(l, "reason", "no such String property");
		ecw_log_end(l);
	}
	for (size_t i = 0; i < n && err == 0; i++) {
		if (atomic_load(stopping))
			err = ecw_error_set(ECW_ETRANSIENT, "stopping");
		else if ((err = put_message(c, cfg, sc, id, values[i], window_start)) == 0)
			(*count)++;
	}
	for (size_t i = 0; i < n; i++)
		free(values[i]);
	free(values);
	return err;
}

/* Claims the window (insert, or takeover of a stale claim) into *etag.
 * Returns 1 when claimed, 0 when another replica holds or finished it, <0
 * on a storage error. */
static int claim(char **etag, bool *takeover, struct ecw_client *c, const struct ecw_config *cfg,
		 const struct ecw_schedule *sc, const char *rk, const struct ecw_entity *marker)
{
	struct ecw_entity *e = NULL;
	char at[48];
	int64_t now = ecw_wall_ms(), claimed_ms = 0;
	const struct ecw_prop *p;
	int32_t claims = 1;
	int err;

	*etag = NULL;
	*takeover = marker != NULL;
	if (marker) {
		int64_t age_real;
		p = ecw_entity_get(marker, "ClaimedAt");
		/* An unreadable claim counts as stale: it can only have come from
		 * a replica that is not this code. */
		age_real = p && p->type == ECW_EDM_DATETIME && ecw_schedule_parse_iso(&claimed_ms, p->v.s)
				   ? (now - claimed_ms) / ecw_wall_scale()
				   : INT64_MAX;
		if (age_real < cfg->worker.schedule_lease_ms) {
			ecw_schedule_log_window(ECW_LOG_DEBUG, "schedule_skipped", sc, rk, "claimed");
			return 0;
		}
		if ((p = ecw_entity_get(marker, "Claims")) && p->type == ECW_EDM_INT32 &&
		    p->v.i32 < INT32_MAX)
			claims = p->v.i32 + 1;
		else
			claims = 2;
	}
	if ((err = ecw_schedule_iso_time(at, sizeof(at), now)) < 0 ||
	    (err = ecw_entity_new(&e, sc->name, rk)) < 0 ||
	    (err = ecw_entity_set_string(e, "ClaimedBy", ecw_worker_id(), strlen(ecw_worker_id()))) < 0 ||
	    (err = ecw_entity_set_datetime(e, "ClaimedAt", at)) < 0 ||
	    (err = ecw_entity_set_int32(e, "Claims", claims)) < 0 ||
	    (err = ecw_entity_set_bool(e, "Done", false)) < 0)
		goto done;
	if (marker)
		err = ecw_table_write(etag, c, cfg->worker.schedule_table, e, ECW_WRITE_MERGE,
				      ecw_entity_etag(marker));
	else
		err = ecw_table_write(etag, c, cfg->worker.schedule_table, e, ECW_WRITE_INSERT, NULL);
	if (err == ECW_ECONFLICT || err == ECW_EPRECONDITION) {
		ecw_schedule_log_window(ECW_LOG_DEBUG, "schedule_skipped", sc, rk,
					marker ? "taken over elsewhere" : "claimed");
		err = 0;
		goto done;
	}
	if (err < 0)
		goto done;
	if (marker) {
		struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "schedule_takeover");
		p = ecw_entity_get(marker, "ClaimedBy");
		ecw_log_str(l, "schedule", sc->name);
		ecw_log_str(l, "window", rk);
		ecw_log_str(l, "previous_claimant", p && p->type == ECW_EDM_STRING ? p->v.s : NULL);
		ecw_log_int(l, "claims", claims);
		ecw_log_str(l, "worker", ecw_worker_id());
		ecw_log_end(l);
	}
	err = 1;
done:
	ecw_entity_free(e);
	return err;
}

void ecw_schedule_release(struct ecw_client *c, const struct ecw_config *cfg, const struct ecw_schedule *sc,
			  const char *rk, const char *etag)
{
	int err = ecw_table_delete(c, cfg->worker.schedule_table, sc->name, rk, etag);

	if (err < 0 && !ecw_err_is_absent(err) && err != ECW_EPRECONDITION)
		ecw_schedule_log_error("schedule.release", sc, rk);
	else
		ecw_schedule_log_window(ECW_LOG_WARN, "schedule_released", sc, rk,
					"the window is done again from the start");
}

/* Marks the window done, or (failed or stopping) gives the claim back. */
static void finish(struct ecw_client *c, const struct ecw_config *cfg, const struct ecw_schedule *sc,
		   const char *rk, const char *etag, size_t count, bool ok)
{
	struct ecw_entity *e = NULL;
	char at[48];
	int err;

	if (!ok) {
		ecw_schedule_release(c, cfg, sc, rk, etag);
		return;
	}
	if ((err = ecw_schedule_iso_time(at, sizeof(at), ecw_wall_ms())) < 0 ||
	    (err = ecw_entity_new(&e, sc->name, rk)) < 0 ||
	    (err = ecw_entity_set_bool(e, "Done", true)) < 0 ||
	    (err = ecw_entity_set_int64(e, "Enqueued", (int64_t)count)) < 0 ||
	    (err = ecw_entity_set_datetime(e, "DoneAt", at)) < 0)
		goto done;
	err = ecw_table_write(NULL, c, cfg->worker.schedule_table, e, ECW_WRITE_MERGE, etag);
	if (err == ECW_EPRECONDITION || ecw_err_is_absent(err))
		/* Taken over after the lease ran out: the new claimant enqueues
		 * the window again and marks it done. */
		ecw_schedule_log_window(ECW_LOG_WARN, "schedule_lease_lost", sc, rk,
					"taken over before done");
	else if (err < 0)
		ecw_schedule_log_error("schedule.done", sc, rk);
done:
	ecw_entity_free(e);
}

/* Runs one due window whose marker (NULL: none) was read this tick. Returns
 * 1 when it is done (by anyone, as far as this replica knows), 0 when not,
 * <0 on a storage error. */
static int run_window(struct ecw_client *c, const struct ecw_config *cfg, const struct ecw_schedule *sc,
		      int64_t period, const char *rk, const struct ecw_entity *marker,
		      struct ecw_schedule_audit *auditor, const atomic_bool *stopping)
{
	const struct ecw_prop *done = marker ? ecw_entity_get(marker, "Done") : NULL;
	char *etag = NULL;
	bool takeover;
	size_t count = 0;
	int r, err;

	if (done && done->type == ECW_EDM_BOOLEAN && done->v.b) {
		ecw_schedule_log_window(ECW_LOG_DEBUG, "schedule_skipped", sc, rk, "done");
		if (sc->audit)
			ecw_schedule_audit_show(sc, marker);
		return 1;
	}
	/* One audit at a time per replica: claim no window it cannot start. */
	if (sc->audit && !ecw_schedule_audit_idle(auditor)) {
		ecw_schedule_log_window(ECW_LOG_DEBUG, "schedule_skipped", sc, rk, "an audit runs here");
		return 0;
	}
	if ((r = claim(&etag, &takeover, c, cfg, sc, rk, marker)) <= 0) {
		if (r < 0)
			ecw_schedule_log_error(marker ? "schedule.takeover" : "schedule.claim", sc, rk);
		return r;
	}
	ecw_crash_point("schedule.claimed");
	if (sc->audit) {
		/* The auditor's thread marks it done (or gives it back). */
		if (!ecw_schedule_audit_take(auditor, sc, rk, etag, takeover)) {
			ecw_schedule_release(c, cfg, sc, rk, etag);
			free(etag);
		}
		return 0;
	}
	err = enqueue_window(&count, c, cfg, sc, period, rk, stopping);
	if (err == 0)
		ecw_crash_point("schedule.enqueued");
	else if (!atomic_load(stopping))
		ecw_schedule_log_error("schedule.enqueue", sc, rk);
	finish(c, cfg, sc, rk, etag, count, err == 0);
	free(etag);
	if (err < 0)
		return err;
	ecw_metrics_scheduled(sc->name, (int64_t)count);
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_INFO, "schedule_enqueued");
	char ws[32];
	ecw_log_str(l, "schedule", sc->name);
	ecw_log_str(l, "job", sc->job);
	ecw_log_str(l, "window", rk);
	if (sc->window != ECW_WINDOW_NONE &&
	    ecw_schedule_window_start(ws, sizeof(ws), period, sc->every_ms, sc->window) == 0)
		ecw_log_str(l, "window_start", ws);
	ecw_log_int(l, "count", (int64_t)count);
	ecw_log_bool(l, "takeover", takeover);
	ecw_log_str(l, "worker", ecw_worker_id());
	ecw_log_end(l);
	return 1;
}

/* Reads the markers of the due periods from the first on. *markers[i] is the
 * marker of due[i] or NULL. */
static int read_markers(struct ecw_entity **markers, struct ecw_client *c, const struct ecw_config *cfg,
			const struct ecw_schedule *sc, const char (*keys)[32], size_t n)
{
	struct ecw_query_options qo = {NULL, NULL, 0, 0};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	struct ecw_buf f;
	int err;

	ecw_buf_init(&f, 1024);
	if ((err = ecw_buf_printf(&f, "PartitionKey eq ")) < 0 ||
	    (err = ecw_escape_filter_string(&f, sc->name)) < 0 ||
	    (err = ecw_buf_printf(&f, " and RowKey ge ")) < 0 ||
	    (err = ecw_escape_filter_string(&f, keys[0])) < 0)
		goto done;
	qo.filter = ecw_buf_cstr(&f);
	if ((err = ecw_table_query_new(&q, c, cfg->worker.schedule_table, &qo)) < 0)
		goto done;
	while ((err = ecw_table_query_next(&e, q)) == 0 && e) {
		for (size_t i = 0; i < n && e; i++)
			if (!markers[i] && strcmp(ecw_entity_rk(e), keys[i]) == 0) {
				markers[i] = e;
				e = NULL;
			}
		ecw_entity_free(e);
		e = NULL;
	}
done:
	ecw_table_query_free(q);
	ecw_buf_dispose(&f);
	return err;
}

static int tick_one(struct ecw_scheduler *s, size_t idx, struct ecw_client *c, const atomic_bool *stopping)
{
	const struct ecw_schedule *sc = &s->set->v[idx].pub;
	size_t k = (size_t)sc->catch_up, n;
	int64_t *due = NULL;
	char(*keys)[32] = NULL;
	struct ecw_entity **markers = NULL;
	bool pending = false;
	int err = 0;

	if (!(due = calloc(k, sizeof(*due))) || !(keys = calloc(k, sizeof(*keys))) ||
	    !(markers = calloc(k, sizeof(*markers)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	n = ecw_schedule_due(due, k, ecw_wall_ms(), sc->every_ms, sc->at_ms);
	for (size_t i = 0; i < n; i++) {
		if ((err = ecw_schedule_marker_key(keys[i], sizeof(keys[i]), due[i])) < 0)
			goto done;
		pending |= !known_done(s->done[idx], sc->catch_up, due[i]);
	}
	if (!pending)
		goto done;
	if ((err = read_markers(markers, c, s->cfg, sc, (const char(*)[32])keys, n)) < 0) {
		ecw_schedule_log_error("schedule.read", sc, keys[0]);
		goto done;
	}
	for (size_t i = 0; i < n && !atomic_load(stopping); i++) {
		int r;
		if (known_done(s->done[idx], sc->catch_up, due[i]))
			continue;
		if ((r = run_window(c, s->cfg, sc, due[i], keys[i], markers[i], s->auditor, stopping)) < 0) {
			err = r;
			break;
		}
		if (r == 1)
			remember_done(s->done[idx], sc->catch_up, due[i]);
	}
done:
	for (size_t i = 0; markers && i < k; i++)
		ecw_entity_free(markers[i]);
	free(markers);
	free(keys);
	free(due);
	return err;
}

int64_t ecw_scheduler_tick(struct ecw_scheduler *s, struct ecw_client *c, const atomic_bool *stopping)
{
	int64_t wait = TICK_MS, now, scale = ecw_wall_scale();
	bool failed = false;

	/* Every replica shows the audits' latest results, whoever ran them:
	 * read at start, then about once a minute (one query per audit
	 * schedule); a window seen done in between shows its own at once. */
	if (ecw_now_ms() >= s->show_audits_ms) {
		s->show_audits_ms = ecw_now_ms() + AUDIT_SHOW_MS;
		for (size_t i = 0; i < ecw_schedules_count(s->set) && !atomic_load(stopping); i++)
			if (s->set->v[i].pub.audit &&
			    ecw_schedule_audit_read(c, s->cfg, &s->set->v[i].pub, AUDIT_SHOW_PERIODS) < 0) {
				ecw_schedule_log_error("schedule.audit_read", &s->set->v[i].pub, NULL);
				failed = true;
			}
	}
	for (size_t i = 0; i < ecw_schedules_count(s->set) && !atomic_load(stopping); i++)
		failed |= tick_one(s, i, c, stopping) < 0;
	if (failed)
		return ERROR_WAIT_MS;
	/* Wake at the next firing when it comes before the next second. */
	now = ecw_wall_ms();
	for (size_t i = 0; i < ecw_schedules_count(s->set); i++) {
		const struct ecw_schedule *sc = &s->set->v[i].pub;
		int64_t next =
			ecw_schedule_period_start(now - sc->at_ms, sc->every_ms) + sc->every_ms + sc->at_ms;
		int64_t real = (next - now) / scale + 1;
		if (real < wait)
			wait = real;
	}
	return wait < 1 ? 1 : wait;
}
