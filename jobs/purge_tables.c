/* SPDX-License-Identifier: MIT */
/* purge_tables.c - the high-volume delete pattern: data lands in one table
 * per day (or hour), e.g. Logins20201011, and expires a whole table at a
 * time. Deleting a table is one request, where deleting its entities would
 * be one per 100 (a batch per partition), and it frees the space at once.
 * A keyless type: the message is {"job":"NAME"} (a daily schedule enqueues it).
 *
 *   1. list the tables whose names start with `prefix` (every page)
 *   2. for each name that is EXACTLY `name_date` with a valid date D (or
 *      hour), when D's period has ended at least `keep` ago
 *      (D + 1 day <= now - keep; with HH, D + 1 hour): delete the table.
 *      404: already gone, which is what we wanted.
 *
 * A name that does not match the pattern exactly (another length, a letter
 * where a digit goes, an impossible date, other case) is never deleted.
 *
 * Crash safety: the job only deletes, and only tables that are expired by a
 * rule that stays true as time passes. A crash after any delete leaves some
 * expired tables in place; the redelivered message lists again and deletes
 * the rest; a table deleted twice answers 404, which counts as done.
 * Converges. A table of a day within `keep` is never touched, whatever
 * happens. Caution: Azure keeps a deleted table's name reserved for a while
 * (409 TableBeingDeleted on create), so keep must comfortably exceed the
 * time writers still write to a day's table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_clock.h"
#include "ecw_job.h"
#include "jobs_private.h"

#define HOUR_MS INT64_C(3600000)
#define DAY_MS (24 * HOUR_MS)

struct ecw_name_date {
	char *lit; /* the name with the date's places as '#' */
	size_t len;
	int y, mo, d, h; /* offsets of yyyy, MM, dd, HH in a name; h -1: none */
};

void ecw_purge_tables_name_date_free(struct ecw_name_date *p)
{
	if (!p)
		return;
	free(p->lit);
	free(p);
}

static bool alnum(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int ecw_purge_tables_name_date_compile(struct ecw_name_date **out, const char *pattern, const char *prefix)
{
	static const char *const tok[] = {"yyyy", "MM", "dd", "HH"};
	struct ecw_name_date *p = calloc(1, sizeof(*p));
	const char *open = strchr(pattern, '{'), *close = open ? strchr(open, '}') : NULL;
	int *at[4], err = 0;
	size_t o = 0;

	*out = NULL;
	if (!p || !(p->lit = malloc(strlen(pattern) + 1))) {
		ecw_purge_tables_name_date_free(p);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	at[0] = &p->y, at[1] = &p->mo, at[2] = &p->d, at[3] = &p->h;
	p->y = p->mo = p->d = p->h = -1;
	if (!open || !close || strchr(close + 1, '{') || strchr(close + 1, '}') ||
	    memchr(pattern, '}', (size_t)(open - pattern))) {
		err = ecw_error_set(ECW_EINVALID,
				    "name_date: one {...} holds the date, like Logins{yyyyMMdd}");
		goto done;
	}
	if (strncmp(pattern, prefix, strlen(prefix)) != 0 || open - pattern < (ptrdiff_t)strlen(prefix)) {
		err = ecw_error_set(ECW_EINVALID, "name_date: must start with the prefix '%s'", prefix);
		goto done;
	}
	for (const char *s = pattern; *s && err == 0;) {
		if (s == open) {
			for (s++; s < close && err == 0;) {
				size_t k;
				for (k = 0; k < 4 && strncmp(s, tok[k], strlen(tok[k])) != 0; k++)
					;
				if (k == 4 || *at[k] >= 0) {
					err = ecw_error_set(
						ECW_EINVALID,
						"name_date: inside {} write yyyy, MM, dd (and HH) once each, "
						"nothing else");
					break;
				}
				*at[k] = (int)o;
				for (size_t i = 0; i < strlen(tok[k]); i++)
					p->lit[o++] = '#';
				s += strlen(tok[k]);
			}
			s = close + 1;
		} else if (!alnum(*s)) {
			err = ecw_error_set(
				ECW_EINVALID,
				"name_date: outside {} a table name holds letters and digits only");
		} else {
			p->lit[o++] = *s++;
		}
	}
	if (err == 0 && (p->y < 0 || p->mo < 0 || p->d < 0))
		err = ecw_error_set(ECW_EINVALID, "name_date: the date needs yyyy, MM and dd");
	if (err == 0 && (o < 3 || o > 63))
		err = ecw_error_set(ECW_EINVALID,
				    "name_date: names would be %zu characters; a table name has 3-63", o);
done:
	if (err < 0) {
		ecw_purge_tables_name_date_free(p);
		return err;
	}
	p->lit[o] = '\0';
	p->len = o;
	*out = p;
	return 0;
}

static int num(const char *s, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	return v;
}

bool ecw_purge_tables_name_date_match(int64_t *start_ms, int64_t *span_ms, const struct ecw_name_date *p,
				      const char *name)
{
	int y, mo, d, h = 0;

	if (strlen(name) != p->len)
		return false;
	for (size_t i = 0; i < p->len; i++)
		if (p->lit[i] == '#' ? !(name[i] >= '0' && name[i] <= '9') : name[i] != p->lit[i])
			return false;
	y = num(name + p->y, 4), mo = num(name + p->mo, 2), d = num(name + p->d, 2);
	if (p->h >= 0 && (h = num(name + p->h, 2)) > 23)
		return false;
	if (!ecw_template_civil_date_valid(y, mo, d))
		return false;
	*start_ms = ecw_template_civil_to_unix_ms(y, mo, d, h);
	*span_ms = p->h >= 0 ? HOUR_MS : DAY_MS;
	return true;
}

bool ecw_purge_tables_expired(int64_t start_ms, int64_t span_ms, int64_t now_ms, int64_t keep_ms)
{
	return start_ms + span_ms <= now_ms - keep_ms;
}

/* ---- the job type ---------------------------------------------------------- */

struct purge {
	char *prefix;
	char *name_date;
	struct ecw_name_date *pattern;
	int64_t keep_ms;
};

static void purge_free(void *v)
{
	struct purge *p = v;

	if (!p)
		return;
	free(p->prefix);
	free(p->name_date);
	ecw_purge_tables_name_date_free(p->pattern);
	free(p);
}

static int purge_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type", "then", "prefix", "name_date", "keep", NULL};
	struct purge *p = calloc(1, sizeof(*p));
	char *keep = NULL;
	int bad = 0, rc;

	*out = NULL;
	if (!p)
		return -1;
	bad |= ecw_node_check_keys(job, allowed, "purge-tables job", errs) > 0;
	if (ecw_node_string(&p->prefix, job, "prefix", true, errs) < 0) {
		bad = 1;
	} else {
		bool ok = p->prefix && strlen(p->prefix) <= 62 &&
			  ((p->prefix[0] >= 'A' && p->prefix[0] <= 'Z') ||
			   (p->prefix[0] >= 'a' && p->prefix[0] <= 'z'));
		for (size_t i = 0; ok && p->prefix[i]; i++)
			ok = alnum(p->prefix[i]);
		if (!ok) {
			ecw_node_error(
				errs, ecw_node_get(job, "prefix"),
				"prefix: the start of a table name: a letter, then letters and digits");
			bad = 1;
		}
	}
	if (ecw_node_string(&p->name_date, job, "name_date", true, errs) < 0) {
		bad = 1;
	} else if (!bad && ecw_purge_tables_name_date_compile(&p->pattern, p->name_date, p->prefix) < 0) {
		ecw_node_error(errs, ecw_node_get(job, "name_date"), "%s", ecw_error_last()->message);
		bad = 1;
	}
	if (ecw_node_string(&keep, job, "keep", true, errs) < 0) {
		bad = 1;
	} else if ((rc = ecw_duration_parse(&p->keep_ms, keep, true)) < 0 || p->keep_ms < HOUR_MS) {
		ecw_node_error(errs, ecw_node_get(job, "keep"),
			       "keep: %s; write how long tables stay, at least 1h, like 60d, 8w or 36h",
			       rc == -2 ? "too large"
			       : rc < 0 ? "not a duration"
					: "too short");
		bad = 1;
	}
	free(keep);
	if (bad) {
		purge_free(p);
		return -1;
	}
	*out = p;
	return 0;
}

static int purge_run(const void *settings, struct ecw_job_ctx *ctx)
{
	const struct purge *p = settings;
	char **names = NULL;
	int64_t now = ecw_clock_wall_ms(), start, span;
	long deleted = 0, kept = 0;
	int err;

	if ((err = ecw_table_list(&names, ctx->client, p->prefix, 0)) < 0)
		return err;
	for (size_t i = 0; names[i]; i++) {
		if (!ecw_purge_tables_name_date_match(&start, &span, p->pattern, names[i]))
			continue;
		if (!ecw_purge_tables_expired(start, span, now, p->keep_ms)) {
			kept++;
			continue;
		}
		if ((err = ecw_job_check_lease(ctx)) < 0)
			goto done;
		err = ecw_table_delete_table(ctx->client, names[i]);
		if (ecw_error_is_absent(err)) {
			ecw_error_clear(); /* gone already: a rerun, or someone else */
			err = 0;
		} else if (err < 0) {
			goto done;
		} else {
			deleted++;
		}
		ecw_crash_point("purge_tables.deleted");
	}
done:
	snprintf(ctx->outcome_detail, sizeof(ctx->outcome_detail), "deleted %ld, kept %ld", deleted, kept);
	ecw_table_names_free(names);
	return err;
}

const struct ecw_job_type ecw_job_purge_tables = {
	.name = "purge-tables",
	.keyless = true,
	.parse = purge_parse,
	.run = purge_run,
	.free = purge_free,
};
