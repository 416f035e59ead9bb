/* SPDX-License-Identifier: MIT */
/* rollup.c - time-window aggregates of raw readings: the average, minimum,
 * maximum, sum and count of a device's readings per hour, day or week,
 * kept in an aggregate entity per window and recomputed from the raw rows
 * whenever a message names the window. A keyless type: the message is
 * {"job":"tank-daily","device":"tank-7","window_start":"2020-10-11"}; its
 * string fields fill the key templates (from_partition, to_partition).
 *
 * Raw rows live in partition from_partition with RowKey = Unix seconds,
 * 10 digits zero-padded ("1602374400"; `{Prop:unix}` in a key template
 * writes that form). Fixed width makes string order equal time order, so a
 * window is one RowKey range of one partition and is read with a range
 * query, never a scan: PartitionKey eq 'P' and RowKey ge 'START' and
 * RowKey lt 'END', $select of RowKey and the aggregated properties only.
 * The aggregate goes to partition to_partition of table `to` (default: the
 * source table), RowKey yyyyMMdd (1d; 1w: the Monday) or yyyyMMddHH (1h).
 *
 *   1. GET the aggregate A (its ETag E,   a missing TABLE is an error
 *      or absent)
 *   2. query the window's raw rows and    a bad value (a String, a Boolean,
 *      fold them into the aggregates      a NaN) is a permanent error naming
 *                                         the row and property
 *   3. rows: when A equals the result,    no rows: when A exists, DELETE it
 *      write nothing; else UPDATE        If-Match E; else nothing
 *      If-Match E (INSERT when A was
 *      absent)
 *   404, 409 or 412 on the write or delete: another run (or someone) changed
 *   the aggregate since step 1: start over at 1 (at most MAX_ROUNDS rounds,
 *   then a transient error: retried later; the log's detail names a later
 *   round it ended in, "25 rows, unchanged (round 2)").
 *
 * Crash safety, step by step (a crash = the process dies right after it;
 * the message is not deleted, so it comes back and the job runs again):
 *   after 1 (rollup.read), after 2 (rollup.queried): nothing was written;
 *       the rerun starts afresh.
 *   after 3's write (rollup.written) or delete (rollup.deleted): the
 *       aggregate matches the raw rows as queried in that run. The rerun
 *       queries again: unchanged rows give the same result (rows come in
 *       RowKey order, so even the floating-point sums repeat bit for bit),
 *       so it writes nothing; rows changed meanwhile give the newer result.
 *   Every write replaces the whole aggregate entity, so there is no half
 *   state between steps to repair.
 * Duplicates, reordered and concurrent runs, late data: the result depends
 * only on the raw rows at query time, never on the message's age, so a
 * stale or repeated message simply recomputes the current state. Two runs
 * of one window racing with a late row L written between their queries:
 * each reads A (step 1) BEFORE it queries, and writes only If-Match what it
 * read. If the run that missed L writes first, the other's write fails
 * (412, or 409 for a racing insert) and it starts over: it reads the new A,
 * queries again (seeing L) and writes the newer result. If the run that saw
 * L writes first, the other's write fails likewise and its next round,
 * querying after L, computes the same result and writes nothing. So a write
 * only lands when no other write happened since its run's read, i.e. its
 * query is at least as recent as that of the aggregate it replaces; the
 * last write reflects the latest query of any run that wrote. Late rows
 * written after every run's query need a message of their own (whoever
 * writes late data enqueues the window again; a schedule's next pass does
 * too): that run then sees them. A window whose raw rows were all deleted
 * loses its aggregate the same way (delete If-Match). "Nothing changed"
 * writes nothing, so reruns leave the ETag and Timestamp as they were.
 *
 * Cost: one GET, the query's pages (1000 rows a page: a month of hourly
 * readings is one page per week), and one write or delete when the result
 * changed. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_clock.h"
#include "ecw_job.h"
#include "jobs_private.h"
#include "rollup_private.h"

#define MAX_ROUNDS 5
#define RESTART 1
/* The service allows 252 custom properties; WindowStart is one. */
#define MAX_AGGREGATES 250
/* Raw RowKeys are 10 digits: the last second they can name. */
#define MAX_UNIX_S INT64_C(9999999999)

enum fn { FN_AVG, FN_MIN, FN_MAX, FN_SUM, FN_COUNT };

static const char *const fn_names[] = {"avg", "min", "max", "sum", "count"};

struct agg {
	char *name; /* the aggregate's property */
	enum fn fn;
	char *prop; /* the raw rows' property; NULL for count() */
};

struct rollup {
	char *source, *to;
	struct ecw_template *from_pk, *to_pk;
	int64_t window_ms;
	struct agg *aggs;
	size_t naggs;
	char *select;
	/* The templates' fields, NULL-terminated: all of them (fields, for
	 * rendering) and those other than window_start (message_fields). */
	char **fields;
	const char **message_fields;
};

/* ---- settings ------------------------------------------------------------------- */

static void rollup_free(void *p)
{
	struct rollup *r = p;

	if (!r)
		return;
	for (size_t i = 0; i < r->naggs; i++) {
		free(r->aggs[i].name);
		free(r->aggs[i].prop);
	}
	free(r->aggs);
	free(r->source);
	free(r->to);
	free(r->select);
	ecw_template_free(r->from_pk);
	ecw_template_free(r->to_pk);
	ecw_strv_free(r->fields);
	free(r->message_fields);
	free(r);
}

/* A name the entity setters accept (checked on a scratch entity, so the
 * rules live in one place). */
static bool valid_property_name(struct ecw_entity *scratch, const char *name)
{
	return ecw_entity_set_bool(scratch, name, true) == 0;
}

/* The field names of a compiled (so well-formed) template: each "{Name" or
 * "{Name:spec" that is not an escaped "{{". */
static int template_fields(char ***out, const struct ecw_template *t)
{
	const char *s = ecw_template_text(t);

	for (size_t i = 0; s[i]; i++) {
		if (s[i] == '{' && s[i + 1] == '{') {
			i++;
		} else if (s[i] == '}' && s[i + 1] == '}') {
			i++;
		} else if (s[i] == '{') {
			size_t n = strcspn(s + i + 1, ":}");
			char *name = strndup(s + i + 1, n);
			int bad = !name || (!ecw_strv_has(*out, name) && ecw_strv_add(out, name) < 0);
			free(name);
			if (bad)
				return -1;
			i += n;
		}
	}
	return 0;
}

/* Checks a key template's fields: message fields only (a keyless message
 * names no entity), each one a name a String property can have. */
static int check_template(char ***all, const struct ecw_template *t, const struct ecw_node *job,
			  const char *key, struct ecw_entity *scratch, struct ecw_node_errors *errs)
{
	char **mine = NULL;
	int bad = 0;

	if (template_fields(&mine, t) < 0) {
		ecw_strv_free(mine);
		ecw_node_error(errs, ecw_node_get(job, key), "%s: out of memory", key);
		return -1;
	}
	for (size_t i = 0; mine && mine[i]; i++) {
		if (strcmp(mine[i], "PartitionKey") == 0 || strcmp(mine[i], "RowKey") == 0) {
			ecw_node_error(
				errs, ecw_node_get(job, key),
				"%s: a rollup's message names no entity: {%s} has no value (use message "
				"fields such as {device})",
				key, mine[i]);
			bad = 1;
		} else if (!valid_property_name(scratch, mine[i])) {
			ecw_node_error(errs, ecw_node_get(job, key), "%s: {%s} cannot be a message field: %s",
				       key, mine[i], ecw_error_last()->message);
			bad = 1;
		} else if (!ecw_strv_has(*all, mine[i]) && ecw_strv_add(all, mine[i]) < 0) {
			ecw_node_error(errs, ecw_node_get(job, key), "%s: out of memory", key);
			bad = 1;
		}
	}
	ecw_strv_free(mine);
	return bad ? -1 : 0;
}

/* "avg(depth)", "count()": spaces allowed around the parts. */
static int parse_agg(struct agg *a, const char *text)
{
	const char *open = strchr(text, '('), *close = strrchr(text, ')');
	const char *p, *q;
	size_t n;
	bool found = false;

	if (!open || !close || close < open)
		return -1;
	for (p = close + 1; *p == ' '; p++)
		;
	if (*p)
		return -1;
	for (p = text; *p == ' '; p++)
		;
	for (q = open; q > p && q[-1] == ' '; q--)
		;
	n = (size_t)(q - p);
	for (size_t i = 0; i < sizeof(fn_names) / sizeof(fn_names[0]); i++)
		if (strlen(fn_names[i]) == n && strncmp(p, fn_names[i], n) == 0) {
			a->fn = (enum fn)i;
			found = true;
		}
	if (!found)
		return -2;
	for (p = open + 1; *p == ' '; p++)
		;
	for (q = close; q > p && q[-1] == ' '; q--)
		;
	if (a->fn == FN_COUNT)
		return q == p ? 0 : -3;
	if (q == p)
		return -4;
	return (a->prop = strndup(p, (size_t)(q - p))) ? 0 : -1;
}

static int parse_aggregates(struct rollup *r, const struct ecw_node *job, struct ecw_entity *scratch,
			    struct ecw_node_errors *errs)
{
	const struct ecw_node *map = ecw_node_get(job, "aggregate");
	struct ecw_buf select;
	int bad = 0;

	if (!map) {
		ecw_node_error(
			errs, job,
			"rollup job: missing required key 'aggregate' (property: avg(p), min(p), max(p), "
			"sum(p) or count())");
		return -1;
	}
	if (map->kind != ECW_NODE_MAP || map->n == 0 || map->n > MAX_AGGREGATES) {
		ecw_node_error(errs, map,
			       "aggregate: a map of property: function, 1 to %d of them, e.g. "
			       "{averageDepth: avg(depth), samples: count()}",
			       MAX_AGGREGATES);
		return -1;
	}
	if (!(r->aggs = calloc(map->n, sizeof(*r->aggs)))) {
		ecw_node_error(errs, map, "aggregate: out of memory");
		return -1;
	}
	ecw_buf_init(&select, 0);
	if (ecw_buf_adds(&select, "RowKey") < 0)
		bad = 1;
	for (size_t i = 0; i < map->n; i++) {
		const struct ecw_node *k = map->keys[i], *v = map->items[i];
		struct agg *a = &r->aggs[r->naggs];
		int rc;

		/* Filled in order, so free() reaches every name. */
		if (!(a->name = strdup(k->value))) {
			ecw_node_error(errs, map, "aggregate: out of memory");
			bad = 1;
			break;
		}
		r->naggs++;
		if (strcmp(k->value, "WindowStart") == 0) {
			ecw_node_error(errs, k, "aggregate: WindowStart is the window's own property");
			bad = 1;
		} else if (!valid_property_name(scratch, k->value)) {
			ecw_node_error(errs, k, "aggregate: '%s' cannot be a property: %s", k->value,
				       ecw_error_last()->message);
			bad = 1;
		}
		if (v->kind != ECW_NODE_SCALAR) {
			ecw_node_error(errs, v, "aggregate.%s: a function such as avg(depth) or count()",
				       k->value);
			bad = 1;
			continue;
		}
		/* The values may come from the environment: not quoted back. */
		if ((rc = parse_agg(a, v->value)) == -2) {
			ecw_node_error(errs, v,
				       "aggregate.%s: unknown function (avg, min, max, sum or count)",
				       k->value);
			bad = 1;
		} else if (rc == -3) {
			ecw_node_error(errs, v, "aggregate.%s: count() takes no property: it counts the rows",
				       k->value);
			bad = 1;
		} else if (rc == -4) {
			ecw_node_error(errs, v, "aggregate.%s: %s() needs a property, e.g. %s(depth)",
				       k->value, fn_names[a->fn], fn_names[a->fn]);
			bad = 1;
		} else if (rc < 0) {
			ecw_node_error(errs, v, "aggregate.%s: a function such as avg(depth) or count()",
				       k->value);
			bad = 1;
		} else if (a->prop && !valid_property_name(scratch, a->prop)) {
			ecw_node_error(
				errs, v,
				"aggregate.%s: the argument is not a property name (letters, digits and "
				"'_', not starting with a digit; not a key or Timestamp)",
				k->value);
			bad = 1;
		} else if (a->prop) {
			/* Each aggregated property once in $select. */
			bool seen = false;
			for (size_t j = 0; j + 1 < r->naggs; j++)
				seen |= r->aggs[j].prop && strcmp(r->aggs[j].prop, a->prop) == 0;
			if (!seen && (ecw_buf_addc(&select, ',') < 0 || ecw_buf_adds(&select, a->prop) < 0))
				bad = 1;
		}
	}
	r->select = ecw_buf_take(&select);
	if (!r->select)
		bad = 1;
	return bad ? -1 : 0;
}

int ecw_rollup_window_setting(int64_t *out_ms, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	char *text = NULL;
	int64_t ms = 0;
	int rc = 0;

	if (ecw_node_string(&text, job, "window", true, errs) < 0)
		return -1;
	if (ecw_duration_parse(&ms, text, true) < 0 ||
	    (ms != ECW_ROLLUP_HOUR_MS && ms != ECW_ROLLUP_DAY_MS && ms != ECW_ROLLUP_WEEK_MS)) {
		ecw_node_error(errs, ecw_node_get(job, "window"),
			       "window: 1h, 1d or 1w (weeks start Monday)");
		rc = -1;
	}
	*out_ms = ms;
	free(text);
	return rc;
}

static int rollup_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type",         "then",   "source",    "to", "from_partition",
					      "to_partition", "window", "aggregate", NULL};
	struct rollup *r = calloc(1, sizeof(*r));
	struct ecw_entity *scratch = NULL;
	char **to_fields = NULL;
	int bad = 0;

	*out = NULL;
	if (!r || ecw_entity_new(&scratch, "p", "r") < 0) {
		free(r);
		ecw_node_error(errs, job, "rollup job: out of memory");
		return -1;
	}
	bad |= ecw_node_check_keys(job, allowed, "rollup job", errs) > 0;
	bad |= ecw_job_setting_table(&r->source, job, "source", true, errs) < 0;
	bad |= ecw_job_setting_table(&r->to, job, "to", false, errs) < 0;
	bad |= ecw_job_setting_template(&r->from_pk, job, "from_partition", true, errs) < 0;
	bad |= ecw_job_setting_template(&r->to_pk, job, "to_partition", true, errs) < 0;
	bad |= ecw_rollup_window_setting(&r->window_ms, job, errs) < 0;
	bad |= parse_aggregates(r, job, scratch, errs) < 0;
	if (!r->to && r->source && !(r->to = strdup(r->source)))
		bad = 1;
	if (r->from_pk)
		bad |= check_template(&r->fields, r->from_pk, job, "from_partition", scratch, errs) < 0;
	if (r->to_pk) {
		bad |= check_template(&r->fields, r->to_pk, job, "to_partition", scratch, errs) < 0;
		if (template_fields(&to_fields, r->to_pk) < 0)
			bad = 1;
	}
	if (!bad && !to_fields) {
		/* Every device's windows would share one partition and clash. */
		ecw_node_error(
			errs, ecw_node_get(job, "to_partition"),
			"to_partition: needs a message field, e.g. \"{device}_daily\", or every source's "
			"aggregates land on the same keys");
		bad = 1;
	}
	for (size_t i = 0; !bad && r->fields && r->fields[i]; i++)
		if (!ecw_strv_has(to_fields, r->fields[i])) {
			/* Two raw partitions would write one aggregate in turn. */
			ecw_node_error(
				errs, ecw_node_get(job, "to_partition"),
				"to_partition: must use every field from_partition uses ({%s} is missing), "
				"or different sources write the same aggregate",
				r->fields[i]);
			bad = 1;
		}
	if (!bad && strcmp(r->source, r->to) == 0 &&
	    strcmp(ecw_template_text(r->from_pk), ecw_template_text(r->to_pk)) == 0) {
		ecw_node_error(errs, ecw_node_get(job, "to_partition"),
			       "to_partition: the same as from_partition in the same table: aggregates would "
			       "land among the raw rows");
		bad = 1;
	}
	if (!bad) {
		size_t n = 0, k = 0;
		while (r->fields && r->fields[n])
			n++;
		if (!(r->message_fields = calloc(n + 1, sizeof(*r->message_fields))))
			bad = 1;
		for (size_t i = 0; !bad && i < n; i++)
			if (strcmp(r->fields[i], "window_start") != 0)
				r->message_fields[k++] = r->fields[i];
	}
	ecw_strv_free(to_fields);
	ecw_entity_free(scratch);
	if (bad) {
		rollup_free(r);
		return -1;
	}
	*out = r;
	return 0;
}

static int rollup_prepare(const void *settings, struct ecw_client *c)
{
	const struct rollup *r = settings;

	if (strcmp(r->to, r->source) == 0)
		return 0; /* the rollups live in the source table: only read, never made */
	return ecw_table_create(NULL, c, r->to);
}

static const char *rollup_source(const void *settings)
{
	return ((const struct rollup *)settings)->source;
}

static const char *rollup_target(const void *settings)
{
	return ((const struct rollup *)settings)->to;
}

static const char *const *rollup_message_fields(const void *settings)
{
	return ((const struct rollup *)settings)->message_fields;
}

static int64_t rollup_window_ms(const void *settings)
{
	return ((const struct rollup *)settings)->window_ms;
}

/* ---- windows -------------------------------------------------------------------- */

static bool leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static const char *window_name(int64_t window_ms)
{
	return window_ms == ECW_ROLLUP_HOUR_MS ? "1h" : window_ms == ECW_ROLLUP_DAY_MS ? "1d" : "1w";
}

int ecw_rollup_window_parse(int64_t *out_s, const char *text, int64_t window_ms)
{
	static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	size_t n = strlen(text);
	int y, mo, d, h = 0, mi = 0, s = 0;
	bool ok;
	int64_t t;

	*out_s = 0;
	ok = n >= 10 && (y = ecw_clock_digits(text, 4)) >= 0 && text[4] == '-' &&
	     (mo = ecw_clock_digits(text + 5, 2)) >= 0 && text[7] == '-' &&
	     (d = ecw_clock_digits(text + 8, 2)) >= 0;
	if (ok && n == 17)
		ok = text[10] == 'T' && (h = ecw_clock_digits(text + 11, 2)) >= 0 && text[13] == ':' &&
		     (mi = ecw_clock_digits(text + 14, 2)) >= 0 && text[16] == 'Z';
	else if (ok && n == 20)
		ok = text[10] == 'T' && (h = ecw_clock_digits(text + 11, 2)) >= 0 && text[13] == ':' &&
		     (mi = ecw_clock_digits(text + 14, 2)) >= 0 && text[16] == ':' &&
		     (s = ecw_clock_digits(text + 17, 2)) >= 0 && text[19] == 'Z';
	else if (ok)
		ok = n == 10;
	if (!ok)
		return ecw_error_set(ECW_EINVALID,
				     "window_start \"%.40s\" is not YYYY-MM-DD, YYYY-MM-DDTHH:MMZ or "
				     "YYYY-MM-DDTHH:MM:SSZ (UTC)",
				     text);
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && leap(y)) || h > 23 ||
	    mi > 59 || s > 59)
		return ecw_error_set(ECW_EINVALID,
				     "window_start \"%.40s\" is not a valid date and time from 1970 on",
				     text);
	if (n == 10 && window_ms == ECW_ROLLUP_HOUR_MS)
		return ecw_error_set(
			ECW_EINVALID,
			"window_start \"%.40s\": a 1h window needs the hour, e.g. \"%.10sT05:00Z\"", text,
			text);
	t = ecw_clock_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
	if (window_ms == ECW_ROLLUP_HOUR_MS && t % 3600 != 0)
		return ecw_error_set(ECW_EINVALID, "window_start \"%.40s\" is not on the hour (window 1h)",
				     text);
	if (window_ms != ECW_ROLLUP_HOUR_MS && t % 86400 != 0)
		return ecw_error_set(ECW_EINVALID, "window_start \"%.40s\" is not midnight UTC (window %s)",
				     text, window_name(window_ms));
	/* 1970-01-01 was a Thursday: day 4 was the first Monday. */
	if (window_ms == ECW_ROLLUP_WEEK_MS && (t / 86400 + 3) % 7 != 0)
		return ecw_error_set(
			ECW_EINVALID,
			"window_start \"%.40s\" is not a Monday (window 1w: weeks start Monday 00:00 UTC)",
			text);
	if (t + window_ms / 1000 - 1 > MAX_UNIX_S)
		return ecw_error_set(
			ECW_EINVALID,
			"window_start \"%.40s\": the window ends after 2286-11-20T17:46:39Z, the last "
			"second a 10-digit RowKey can name",
			text);
	*out_s = t;
	return 0;
}

void ecw_rollup_row_key(char out[16], int64_t start_s, int64_t window_ms)
{
	int y, m, d;
	char *p = out;

	ecw_clock_civil_from_days(start_s / 86400, &y, &m, &d);
	p = ecw_clock_put_digits(p, y, 4);
	p = ecw_clock_put_digits(p, m, 2);
	p = ecw_clock_put_digits(p, d, 2);
	if (window_ms == ECW_ROLLUP_HOUR_MS)
		p = ecw_clock_put_digits(p, (int)(start_s % 86400 / 3600), 2);
	*p = '\0';
}

void ecw_rollup_iso(char out[32], int64_t s)
{
	int y, m, d;
	char *p = out;

	ecw_clock_civil_from_days(s / 86400, &y, &m, &d);
	p = ecw_clock_put_digits(p, y, 4);
	*p++ = '-';
	p = ecw_clock_put_digits(p, m, 2);
	*p++ = '-';
	p = ecw_clock_put_digits(p, d, 2);
	*p++ = 'T';
	p = ecw_clock_put_digits(p, (int)(s % 86400 / 3600), 2);
	*p++ = ':';
	p = ecw_clock_put_digits(p, (int)(s % 3600 / 60), 2);
	*p++ = ':';
	p = ecw_clock_put_digits(p, (int)(s % 60), 2);
	*p++ = 'Z';
	*p = '\0';
}

int ecw_rollup_filter(struct ecw_buf *out, const char *pk, int64_t start_s, int64_t end_s)
{
	char lo[16], hi[16];
	int err;

	snprintf(lo, sizeof(lo), "%010lld", (long long)start_s);
	snprintf(hi, sizeof(hi), "%010lld", (long long)end_s);
	if ((err = ecw_buf_adds(out, "PartitionKey eq ")) < 0 ||
	    (err = ecw_escape_filter_string(out, pk)) < 0 ||
	    (err = ecw_buf_adds(out, " and RowKey ge ")) < 0 ||
	    (err = ecw_escape_filter_string(out, lo)) < 0 ||
	    (err = ecw_buf_adds(out, " and RowKey lt ")) < 0 || (err = ecw_escape_filter_string(out, hi)) < 0)
		return err;
	return 0;
}

/* ---- aggregation ----------------------------------------------------------------- */

/* Result types: count() Int32; avg Double; min, max and sum Int64 while
 * every value seen is Int32 or Int64, Double once any is a Double. */
struct slot {
	long long n;
	bool all_int;
	bool ioverflow; /* the Int64 sum overflowed (avg then uses dsum) */
	int64_t imin, imax, isum;
	double dmin, dmax, dsum;
};

struct ecw_rollup_acc {
	const struct rollup *r;
	long long rows;
	struct slot *slots;
};

int ecw_rollup_acc_new(struct ecw_rollup_acc **out, const void *settings)
{
	const struct rollup *r = settings;
	struct ecw_rollup_acc *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a || !(a->slots = calloc(r->naggs, sizeof(*a->slots)))) {
		free(a);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	a->r = r;
	for (size_t i = 0; i < r->naggs; i++)
		a->slots[i].all_int = true;
	*out = a;
	return 0;
}

void ecw_rollup_acc_free(struct ecw_rollup_acc *a)
{
	if (!a)
		return;
	free(a->slots);
	free(a);
}

int ecw_rollup_acc_add(struct ecw_rollup_acc *a, const struct ecw_entity *row)
{
	for (size_t i = 0; i < a->r->naggs; i++) {
		const struct agg *g = &a->r->aggs[i];
		struct slot *s = &a->slots[i];
		const struct ecw_prop *p;
		bool is_int;
		int64_t iv = 0;
		double dv;

		if (!g->prop || !(p = ecw_entity_get(row, g->prop)))
			continue; /* count(), or a row without this reading */
		if (p->type == ECW_EDM_INT32 || p->type == ECW_EDM_INT64) {
			is_int = true;
			iv = p->type == ECW_EDM_INT32 ? p->v.i32 : p->v.i64;
			dv = (double)iv;
		} else if (p->type == ECW_EDM_DOUBLE && isfinite(p->v.d)) {
			is_int = false;
			dv = p->v.d;
		} else {
			/* Bad data is reported, never skipped: a skipped value
			 * would make the aggregate silently wrong. */
			return ecw_error_set(
				ECW_EINVALID,
				"rollup: raw row %.200s/%.40s: property '%s' is %s%s, not a number (%s)",
				ecw_entity_pk(row), ecw_entity_rk(row), g->prop, ecw_entity_edm_name(p->type),
				p->type == ECW_EDM_DOUBLE ? " (not finite)" : "", fn_names[g->fn]);
		}
		if (s->n == 0) {
			s->imin = s->imax = iv;
			s->dmin = s->dmax = dv;
		}
		if (is_int && s->all_int) {
			if (g->fn == FN_SUM && __builtin_add_overflow(s->isum, iv, &s->isum))
				return ecw_error_set(
					ECW_EINVALID,
					"rollup: sum(%s) leaves the Int64 range at raw row %.200s/%.40s",
					g->prop, ecw_entity_pk(row), ecw_entity_rk(row));
			if (g->fn != FN_SUM && __builtin_add_overflow(s->isum, iv, &s->isum))
				s->ioverflow = true;
			s->imin = iv < s->imin ? iv : s->imin;
			s->imax = iv > s->imax ? iv : s->imax;
		}
		s->all_int &= is_int;
		s->dsum += dv;
		s->dmin = dv < s->dmin ? dv : s->dmin;
		s->dmax = dv > s->dmax ? dv : s->dmax;
		s->n++;
	}
	a->rows++;
	return 0;
}

int ecw_rollup_acc_finish(struct ecw_entity **out, const struct ecw_rollup_acc *a, const char *pk,
			  const char *rk, int64_t start_s)
{
	struct ecw_entity *e = NULL;
	char iso[32];
	int err = 0;

	*out = NULL;
	if (a->rows == 0)
		return 0;
	if (a->rows > INT32_MAX)
		return ecw_error_set(ECW_EINVALID, "rollup: %lld rows in one window: count() is an Int32",
				     a->rows);
	if ((err = ecw_entity_new(&e, pk, rk)) < 0)
		return err;
	for (size_t i = 0; i < a->r->naggs && err == 0; i++) {
		const struct agg *g = &a->r->aggs[i];
		const struct slot *s = &a->slots[i];

		if (g->fn == FN_COUNT) {
			err = ecw_entity_set_int32(e, g->name, (int32_t)a->rows);
			continue;
		}
		if (s->n == 0)
			continue; /* no row of the window has the property */
		switch (g->fn) {
		case FN_AVG: {
			/* Exact integer sum when it fits: the mean of integer
			 * readings does not depend on summation order then. */
			bool exact = s->all_int && !s->ioverflow;
			err = ecw_entity_set_double(
				e, g->name, exact ? (double)s->isum / (double)s->n : s->dsum / (double)s->n);
			break;
		}
		case FN_MIN:
			err = s->all_int ? ecw_entity_set_int64(e, g->name, s->imin)
					 : ecw_entity_set_double(e, g->name, s->dmin);
			break;
		case FN_MAX:
			err = s->all_int ? ecw_entity_set_int64(e, g->name, s->imax)
					 : ecw_entity_set_double(e, g->name, s->dmax);
			break;
		case FN_SUM:
			err = s->all_int ? ecw_entity_set_int64(e, g->name, s->isum)
					 : ecw_entity_set_double(e, g->name, s->dsum);
			break;
		case FN_COUNT: break;
		}
	}
	ecw_rollup_iso(iso, start_s);
	if (err == 0)
		err = ecw_entity_set_datetime(e, "WindowStart", iso);
	if (err < 0) {
		ecw_entity_free(e);
		return err;
	}
	*out = e;
	return 0;
}

/* ---- one run ------------------------------------------------------------------- */

struct run {
	const struct rollup *r;
	struct ecw_job_ctx *ctx;
	char from[ECW_KEY_MAX + 1], to[ECW_KEY_MAX + 1], rk[16];
	int64_t start_s, end_s;
	char *filter;
	long long rows;
	int round; /* 0 the first time; more after a lost race */
};

/* The message's fields as String properties, for the key templates. */
static int message_entity(struct ecw_entity **out, const struct rollup *r, struct ecw_job_ctx *ctx)
{
	int err = ecw_entity_new(out, "p", "r");

	for (size_t i = 0; err == 0 && r->fields && r->fields[i]; i++) {
		struct json_object *v = NULL;
		const char *name = r->fields[i];
		if (!json_object_object_get_ex(ctx->message, name, &v) ||
		    json_object_is_type(v, json_type_null)) {
			err = ecw_error_set(
				ECW_EINVALID,
				"rollup job '%s': the message has no \"%s\" (a key template uses it)",
				ctx->job, name);
		} else if (!json_object_is_type(v, json_type_string) ||
			   strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v)) {
			err = ecw_error_set(ECW_EINVALID,
					    "rollup job '%s': message field \"%s\" must be a string",
					    ctx->job, name);
		} else {
			err = ecw_entity_set_string(*out, name, json_object_get_string(v),
						    (size_t)json_object_get_string_len(v));
		}
	}
	return err;
}

static int render_key(char *out, const struct ecw_template *t, const struct ecw_entity *fields,
		      const char *what)
{
	struct ecw_buf b;
	int err;

	ecw_buf_init(&b, 0);
	if ((err = ecw_template_render(&b, t, fields, ECW_TEMPLATE_PLAIN)) == 0 &&
	    (err = ecw_entity_key_check(ecw_buf_cstr(&b), what)) == 0)
		memcpy(out, ecw_buf_cstr(&b), b.len + 1);
	ecw_buf_dispose(&b);
	return err;
}

/* The window's aggregate from the raw rows (NULL: no rows). */
static int compute(struct ecw_entity **out, struct run *u)
{
	struct ecw_query_options qo = {.filter = u->filter, .select = u->r->select, .top = 1000};
	struct ecw_table_query *q = NULL;
	struct ecw_rollup_acc *acc = NULL;
	struct ecw_entity *row = NULL;
	int err;

	*out = NULL;
	u->rows = 0;
	if ((err = ecw_rollup_acc_new(&acc, u->r)) < 0 ||
	    (err = ecw_table_query_new(&q, u->ctx->client, u->r->source, &qo)) < 0)
		goto done;
	while ((err = ecw_table_query_next(&row, q)) == 0 && row) {
		err = ecw_rollup_acc_add(acc, row);
		ecw_entity_free(row);
		row = NULL;
		if (err < 0)
			goto done;
		u->rows++;
	}
	if (err == 0)
		err = ecw_rollup_acc_finish(out, acc, u->to, u->rk, u->start_s);
done:
	ecw_table_query_free(q);
	ecw_rollup_acc_free(acc);
	return err;
}

static bool restart_err(int err)
{
	/* A missing table (ECW_ENOTABLE) is a misconfiguration, not a race. */
	return err == ECW_ENOTFOUND || err == ECW_ECONFLICT || err == ECW_EPRECONDITION;
}

static int round_once(struct run *u)
{
	struct ecw_job_ctx *ctx = u->ctx;
	struct ecw_entity *cur = NULL, *want = NULL;
	const char *detail;
	bool writing = false;
	int err;

	err = ecw_table_get(&cur, ctx->client, u->r->to, u->to, u->rk);
	if (err == ECW_ENOTFOUND) {
		ecw_error_clear();
		err = 0;
	}
	if (err < 0)
		goto done;
	ecw_crash_point("rollup.read");
	if ((err = compute(&want, u)) < 0)
		goto done;
	ecw_crash_point("rollup.queried");
	if (!want && !cur) {
		detail = "empty";
	} else if (!want) {
		if ((err = ecw_job_check_lease(ctx)) < 0)
			goto done;
		writing = true;
		if ((err = ecw_table_delete(ctx->client, u->r->to, u->to, u->rk, ecw_entity_etag(cur))) < 0)
			goto done;
		ecw_crash_point("rollup.deleted");
		detail = "deleted";
	} else if (cur && ecw_entity_equal(cur, want)) {
		detail = "unchanged";
	} else {
		if ((err = ecw_job_check_lease(ctx)) < 0)
			goto done;
		writing = true;
		err = cur ? ecw_table_write(NULL, ctx->client, u->r->to, want, ECW_WRITE_UPDATE,
					    ecw_entity_etag(cur))
			  : ecw_table_write(NULL, ctx->client, u->r->to, want, ECW_WRITE_INSERT, NULL);
		if (err < 0)
			goto done;
		ecw_crash_point("rollup.written");
		detail = "written";
	}
	/* A later round says so: the log shows the race this run lost. */
	if (u->round > 0)
		snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "%lld rows, %s (round %d)",
			 u->rows, detail, u->round + 1);
	else
		snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "%lld rows, %s", u->rows, detail);
done:
	if (writing && restart_err(err)) {
		/* The aggregate changed since our read (another run, or
		 * someone): read it again and recompute. */
		ecw_error_clear();
		err = RESTART;
	}
	ecw_entity_free(cur);
	ecw_entity_free(want);
	return err;
}

static int rollup_run(const void *settings, struct ecw_job_ctx *ctx)
{
	const struct rollup *r = settings;
	struct ecw_entity *fields = NULL;
	struct json_object *ws = NULL;
	struct run u = {.r = r, .ctx = ctx};
	struct ecw_buf filter;
	int err;

	ecw_buf_init(&filter, 0);
	if (!ctx->message || !json_object_object_get_ex(ctx->message, "window_start", &ws) ||
	    !json_object_is_type(ws, json_type_string)) {
		err = ecw_error_set(ECW_EINVALID,
				    "rollup job '%s': the message needs \"window_start\" as a string",
				    ctx->job);
		goto done;
	}
	if ((err = ecw_rollup_window_parse(&u.start_s, json_object_get_string(ws), r->window_ms)) < 0 ||
	    (err = message_entity(&fields, r, ctx)) < 0 ||
	    (err = render_key(u.from, r->from_pk, fields, "from_partition result")) < 0 ||
	    (err = render_key(u.to, r->to_pk, fields, "to_partition result")) < 0)
		goto done;
	u.end_s = u.start_s + r->window_ms / 1000;
	ecw_rollup_row_key(u.rk, u.start_s, r->window_ms);
	if ((err = ecw_rollup_filter(&filter, u.from, u.start_s, u.end_s)) < 0)
		goto done;
	u.filter = (char *)ecw_buf_cstr(&filter);
	for (u.round = 0; u.round < MAX_ROUNDS; u.round++)
		if ((err = round_once(&u)) != RESTART)
			goto done;
	err = ecw_error_set(ECW_ETRANSIENT, "rollup %s/%s: the aggregate kept changing under us (%d rounds)",
			    u.to, u.rk, MAX_ROUNDS);
done:
	ecw_entity_free(fields);
	ecw_buf_dispose(&filter);
	return err;
}

const struct ecw_job_type ecw_job_rollup = {
	.name = "rollup",
	.keyless = true,
	.parse = rollup_parse,
	.prepare = rollup_prepare,
	.run = rollup_run,
	.free = rollup_free,
	.source_table = rollup_source,
	.target_table = rollup_target,
	.message_fields = rollup_message_fields,
	.window_ms = rollup_window_ms,
};
