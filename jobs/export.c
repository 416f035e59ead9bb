/* SPDX-License-Identifier: MIT */
/* export.c - log history out of the table into blobs (issue 37): the keyless
 * job type `export`, enqueued by schedules as rollup is, which writes one
 * window of a table's rows into one blob as JSON lines, in the layout
 * Storage Analytics uses, and then (delete_after) deletes the rows the
 * committed blob holds. This file reads the settings; jobs/export_run.c
 * runs a message and argues its crash safety; jobs/export_io.c streams the
 * blobs.
 *
 *   applogs-hourly:
 *     type: export
 *     source: AppLogs
 *     from_partition: "{app}_{window:yyyyMMddHH}"  # the window's rows: a partition...
 *     row_keys: any                                # ...or a RowKey range in one: unix | inverted_ticks
 *     window: 1h                                   # 1h, 1d or 1w, as rollup's
 *     to_blob: {container: logs, name: "{app}/{window:yyyy/MM/dd/HH}00/000001.log"}
 *     delete_after: true
 *
 * The templates read the message's string fields and {window:PATTERN}, the
 * window's start (ecw_template.h's date patterns). Refused here: a name that
 * leaves out a field from_partition uses (two partitions would share a
 * blob), a name that two adjacent windows render alike (two windows in one
 * blob), a partition that does so with row_keys: any (the partition is the
 * window), literal text that makes no valid blob name, and {PartitionKey}
 * or {RowKey} (the message names no entity). The job's ops table is
 * jobs/export_audit.c's, on top of this file and its audit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_job.h"
#include "export_private.h"
#include "jobs_private.h"
#include "rollup_private.h"

void ecw_export_free(void *p)
{
	struct ecw_export *x = p;

	if (!x)
		return;
	free(x->source);
	free(x->container);
	ecw_template_free(x->from_pk);
	ecw_template_free(x->name);
	ecw_strv_free(x->fields);
	free(x);
}

/* Adds t's message fields to *fields (window and window_start are the
 * window's); refuses the keys. */
static int collect_fields(char ***fields, const struct ecw_template *t, const struct ecw_node *at,
			  const char *key, struct ecw_node_errors *errs)
{
	for (size_t i = 0; i < ecw_template_nparts(t); i++) {
		bool field, plain;
		const char *name = ecw_template_part(t, i, &field, &plain);
		if (!field || strcmp(name, "window") == 0 || strcmp(name, "window_start") == 0 ||
		    ecw_strv_has(*fields, name))
			continue;
		if (strcmp(name, "PartitionKey") == 0 || strcmp(name, "RowKey") == 0) {
			ecw_node_error(
				errs, at,
				"%s: an export's message names no entity: {%s} has no value (use message "
				"fields such as {app}, and {window:yyyyMMddHH})",
				key, name);
			return -1;
		}
		if (ecw_strv_add(fields, name) < 0) {
			ecw_node_error(errs, at, "%s: out of memory", key);
			return -1;
		}
	}
	return 0;
}

/* What t renders for the window starting at start_s, every message field
 * given the value "x" (out: a caller's buffer). */
static int render_sample(struct ecw_buf *out, const struct ecw_export *x, const struct ecw_template *t,
			 int64_t start_s)
{
	struct ecw_entity *e = NULL;
	char iso[32];
	int err;

	ecw_rollup_iso(iso, start_s);
	ecw_buf_reset(out);
	if ((err = ecw_entity_new(&e, "p", "r")) == 0 &&
	    (err = ecw_entity_set_datetime(e, "window", iso)) == 0 &&
	    (err = ecw_entity_set_string(e, "window_start", iso, strlen(iso))) == 0)
		for (size_t i = 0; err == 0 && x->fields && x->fields[i]; i++)
			err = ecw_entity_set_string(e, x->fields[i], "x", 1);
	if (err == 0)
		err = ecw_template_render(out, t, e, ECW_TEMPLATE_PLAIN);
	ecw_entity_free(e);
	return err;
}

/* The rules of the file's comment that need a rendering: two adjacent
 * windows (a Monday, so that a week is one too) tell their blobs, and with
 * row_keys: any their partitions, apart; the name is a valid blob name. */
static int check_windows(const struct ecw_export *x, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	const int64_t monday = 1602460800; /* 2020-10-12T00:00:00Z */
	struct ecw_buf a, b;
	int bad = 0;

	ecw_buf_init(&a, 0);
	ecw_buf_init(&b, 0);
	if (render_sample(&a, x, x->name, monday) < 0 ||
	    render_sample(&b, x, x->name, monday + x->window_ms / 1000) < 0) {
		ecw_node_error(errs, ecw_node_get(job, "to_blob"), "to_blob.name: %s",
			       ecw_error_last()->message);
		bad = 1;
	} else if (strcmp(ecw_buf_cstr(&a), ecw_buf_cstr(&b)) == 0) {
		ecw_node_error(
			errs, ecw_node_get(job, "to_blob"),
			"to_blob.name: two windows would share the blob \"%s\": use {window:...} down to the "
			"window's length, e.g. {window:yyyy/MM/dd/HH} for 1h",
			ecw_buf_cstr(&a));
		bad = 1;
	} else if (ecw_blob_name_check(ecw_buf_cstr(&a)) < 0) {
		ecw_node_error(errs, ecw_node_get(job, "to_blob"),
			       "to_blob.name: it makes no valid blob name: %s", ecw_error_last()->message);
		bad = 1;
	} else if (x->gzip != (a.len > 3 && strcmp(ecw_buf_cstr(&a) + a.len - 3, ".gz") == 0)) {
		ecw_node_error(errs, ecw_node_get(job, "to_blob"),
			       x->gzip ? "to_blob.name: with compress: gzip the name ends in .gz (\"%s\")"
				       : "to_blob.name: a name ending in .gz needs compress: gzip (\"%s\")",
			       ecw_buf_cstr(&a));
		bad = 1;
	}
	if (!bad && x->rows == ECW_EXPORT_ROWS_ANY &&
	    (render_sample(&a, x, x->from_pk, monday) < 0 ||
	     render_sample(&b, x, x->from_pk, monday + x->window_ms / 1000) < 0 ||
	     strcmp(ecw_buf_cstr(&a), ecw_buf_cstr(&b)) == 0)) {
		ecw_node_error(
			errs, ecw_node_get(job, "from_partition"),
			"from_partition: with row_keys: any the partition is the window, so it needs "
			"{window:...} down to the window's length (or row_keys: unix or inverted_ticks "
			"for a RowKey range)");
		bad = 1;
	}
	ecw_error_clear();
	ecw_buf_dispose(&a);
	ecw_buf_dispose(&b);
	return bad ? -1 : 0;
}

static int parse_rows(struct ecw_export *x, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	char *text = NULL;
	int rc = 0;

	if (ecw_node_string(&text, job, "row_keys", false, errs) < 0)
		return -1;
	if (!text || strcmp(text, "any") == 0)
		x->rows = ECW_EXPORT_ROWS_ANY;
	else if (strcmp(text, "unix") == 0)
		x->rows = ECW_EXPORT_ROWS_UNIX;
	else if (strcmp(text, "inverted_ticks") == 0)
		x->rows = ECW_EXPORT_ROWS_INVERTED_TICKS;
	else {
		ecw_node_error(errs, ecw_node_get(job, "row_keys"),
			       "row_keys: any (the partition is the window), unix (10 digits of Unix "
			       "seconds) or inverted_ticks (19 digits, newest first)");
		rc = -1;
	}
	free(text);
	return rc;
}

static int parse_to_blob(struct ecw_export *x, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"container", "name", NULL};
	const struct ecw_node *side = ecw_node_get(job, "to_blob");
	int bad = 0;

	if (!side || side->kind != ECW_NODE_MAP) {
		ecw_node_error(errs, side ? side : job, "to_blob: a map with container and name (required)");
		return -1;
	}
	bad |= ecw_node_check_keys(side, allowed, "to_blob", errs) > 0;
	if (ecw_node_string(&x->container, side, "container", true, errs) < 0) {
		bad = 1;
	} else if (ecw_blob_container_check(x->container) < 0) {
		ecw_error_clear();
		ecw_node_error(
			errs, ecw_node_get(side, "container"),
			"to_blob.container: invalid container name: 3-63 lowercase letters, digits and "
			"single dashes, starting and ending with a letter or digit");
		bad = 1;
	}
	bad |= ecw_job_setting_template(&x->name, side, "name", true, errs) < 0;
	return bad ? -1 : 0;
}

static int parse_compress(struct ecw_export *x, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	char *text = NULL;
	int rc = 0;

	if (ecw_node_string(&text, job, "compress", false, errs) < 0)
		return -1;
	x->gzip = text && strcmp(text, "gzip") == 0;
	if (text && !x->gzip && strcmp(text, "none") != 0) {
		ecw_node_error(errs, ecw_node_get(job, "compress"), "compress: none or gzip");
		rc = -1;
	}
	free(text);
	return rc;
}

/* Whether the audit (jobs/export_audit.c) can read a row's window back
 * from its keys: every message field a plain placeholder of from_partition
 * (a padded or formatted value has more than one reading), and with
 * row_keys: any, the window's start in from_partition down to the window's
 * length. Why not, naming the placeholder, goes into x->audit_limit. */
static void audit_plan(struct ecw_export *x)
{
	const unsigned need = x->window_ms == ECW_ROLLUP_HOUR_MS ? 0xf : 0x7; /* yyyy MM dd (HH) */
	bool has_time = false;

	x->audit_limit[0] = '\0';
	for (size_t i = 0; i < ecw_template_nparts(x->from_pk); i++) {
		bool field, plain;
		const char *name = ecw_template_part(x->from_pk, i, &field, &plain);
		if (!field)
			continue;
		if (strcmp(name, "window") == 0)
			has_time |= (ecw_template_part_date_fields(x->from_pk, i) & need) == need;
		else if (strcmp(name, "window_start") == 0)
			has_time |= plain;
		else if (!plain) {
			snprintf(x->audit_limit, sizeof(x->audit_limit),
				 "from_partition's {%.40s:...} is padded or formatted: a PartitionKey cannot "
				 "be read back into the message field, so no row was audited",
				 name);
			return;
		}
	}
	for (size_t i = 0; x->fields && x->fields[i]; i++) {
		bool used = false;
		for (size_t k = 0; k < ecw_template_nparts(x->from_pk); k++) {
			bool field, plain;
			const char *name = ecw_template_part(x->from_pk, k, &field, &plain);
			used |= field && strcmp(name, x->fields[i]) == 0;
		}
		if (!used) {
			snprintf(x->audit_limit, sizeof(x->audit_limit),
				 "to_blob.name uses {%.40s}, which from_partition does not: a row does not "
				 "tell its blob, so no row was audited",
				 x->fields[i]);
			return;
		}
	}
	if (x->rows == ECW_EXPORT_ROWS_ANY && !has_time)
		snprintf(x->audit_limit, sizeof(x->audit_limit),
			 "with row_keys: any, from_partition gives no window start that can be read back "
			 "(a {window:...} date pattern with yyyy, MM, dd%s, {window:unix}, or "
			 "{window_start}), so no row was audited",
			 x->window_ms == ECW_ROLLUP_HOUR_MS ? " and HH" : "");
}

int ecw_export_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs)
{
	static const char *const allowed[] = {"type",     "then",   "source",  "from_partition",
					      "row_keys", "window", "to_blob", "delete_after",
					      "compress", NULL};
	struct ecw_export *x = calloc(1, sizeof(*x));
	int bad = 0;

	*out = NULL;
	if (!x) {
		ecw_node_error(errs, job, "export job: out of memory");
		return -1;
	}
	bad |= ecw_node_check_keys(job, allowed, "export job", errs) > 0;
	bad |= ecw_job_setting_table(&x->source, job, "source", true, errs) < 0;
	bad |= ecw_job_setting_template(&x->from_pk, job, "from_partition", true, errs) < 0;
	bad |= parse_rows(x, job, errs) < 0;
	bad |= ecw_rollup_window_setting(&x->window_ms, job, errs) < 0;
	bad |= parse_to_blob(x, job, errs) < 0;
	bad |= parse_compress(x, job, errs) < 0;
	bad |= ecw_node_read_bool(&x->delete_after, job, "delete_after", false, "export job", errs) < 0;
	if (!bad) {
		char **name_fields = NULL;
		bad |= collect_fields(&x->fields, x->from_pk, ecw_node_get(job, "from_partition"),
				      "from_partition", errs) < 0;
		bad |= collect_fields(&name_fields, x->name, ecw_node_get(job, "to_blob"), "to_blob.name",
				      errs) < 0;
		for (size_t i = 0; !bad && x->fields && x->fields[i]; i++)
			if (!ecw_strv_has(name_fields, x->fields[i])) {
				ecw_node_error(
					errs, ecw_node_get(job, "to_blob"),
					"to_blob.name: must use every field from_partition uses ({%s} is "
					"missing), or two partitions' rows land in one blob",
					x->fields[i]);
				bad = 1;
			}
		for (size_t i = 0; !bad && name_fields && name_fields[i]; i++)
			bad |= !ecw_strv_has(x->fields, name_fields[i]) &&
			       ecw_strv_add(&x->fields, name_fields[i]) < 0;
		ecw_strv_free(name_fields);
	}
	if (!bad)
		bad |= check_windows(x, job, errs) < 0;
	if (!bad)
		audit_plan(x);
	if (bad) {
		ecw_export_free(x);
		return -1;
	}
	*out = x;
	return 0;
}

/* The container the export writes: created at start with create_missing, as
 * a move's to_blob container is. Never the source table. */
int ecw_export_prepare(const void *settings, struct ecw_client *c)
{
	return ecw_blob_container_create(NULL, c, ((const struct ecw_export *)settings)->container);
}

const char *ecw_export_source(const void *settings)
{
	return ((const struct ecw_export *)settings)->source;
}

const char *const *ecw_export_message_fields(const void *settings)
{
	return (const char *const *)((const struct ecw_export *)settings)->fields;
}

int64_t ecw_export_window_ms(const void *settings)
{
	return ((const struct ecw_export *)settings)->window_ms;
}
