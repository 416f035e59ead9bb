/* SPDX-License-Identifier: MIT */
/* schedules.c - the `schedules:` section of the configuration: each
 * schedule's checks against the job it names, and the parsed set
 * (struct ecw_schedule, ecw_config.h) that the configuration owns
 * (ecw_config_free frees it). What a schedule does at run time, its windows
 * and their markers, is worker/schedule/'s, which reads this set without
 * owning it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_config.h"
#include "ecw_duration.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_node.h"
#include "ecw_storage.h"

#define MAX_SCHEDULES 256
#define MAX_CATCH_UP 1000
#define DEFAULT_CATCH_UP 7
/* An audit's storage requests a second: at least 1, so that a pacing wait
 * (1/rate) never holds up its stop or the renewal of its claim. */
#define DEFAULT_AUDIT_RATE 100
#define MAX_AUDIT_RATE 100000

struct schedule {
	struct ecw_schedule pub;
	char *name, *job, *table, *field, *as, *filter;
};

struct ecw_schedule_set {
	struct schedule *v;
	size_t n;
};

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
