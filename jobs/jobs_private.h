/* SPDX-License-Identifier: MIT */
/* jobs_private.h - what the job types share with each other and with no one
 * else: times as keys, dated table names, source-key hashes. What the
 * migrations use as well (key templates, the settings readers) is public, in
 * include/ecw_template.h and include/ecw_job.h. */
#ifndef ECW_JOBS_PRIVATE_H
#define ECW_JOBS_PRIVATE_H

#include "ecw_buf.h"
#include "ecw_entity.h"
#include "ecw_err.h"
#include "ecw_crash.h"
#include "ecw_job.h"
#include "ecw_template.h"
#include <stdbool.h>
#include <stdint.h>

/* ---- times as keys (jobs/template.c) ---- */

/* .NET ticks (100 ns since 0001-01-01 UTC): a second, 1970-01-01, and
 * DateTime.MaxValue (9999-12-31T23:59:59.9999999), whose difference from a
 * time is its inverted ticks. */
#define ECW_TICKS_PER_SECOND INT64_C(10000000)
#define ECW_TICKS_UNIX_EPOCH INT64_C(621355968000000000)
#define ECW_TICKS_MAX INT64_C(3155378975999999999)

/* "YYYY-MM-DDThh:mm:ss.fffffffZ" and its NUL. */
#define ECW_ISO_TICKS_SIZE 29

/* The time a key made by {X:inverted_ticks} stands for: key starts with the
 * 19 digits (what follows them is ignored). ECW_EINVALID otherwise. */
int ecw_template_inverted_ticks_to_iso(char out[ECW_ISO_TICKS_SIZE], const char *key) ECW_MUST_USE;
/* .NET ticks (0 .. DateTime.MaxValue.Ticks) as a DateTime's text. */
int ecw_template_ticks_to_iso(char out[ECW_ISO_TICKS_SIZE], int64_t ticks) ECW_MUST_USE;
/* A proleptic Gregorian date in years 1..9999. */
bool ecw_template_civil_date_valid(int y, int m, int d);
/* Unix ms of y-m-d hh:00:00 UTC (the date must be valid). */
int64_t ecw_template_civil_to_unix_ms(int y, int m, int d, int hh);

/* ---- reading a key back into a template's parts (jobs/template.c) ---- */

/* The most steps ecw_template_split takes over one key: a key built to make
 * the search long is taken as ambiguous. */
#define ECW_TEMPLATE_SPLIT_STEPS 100000L

/* Splits s into t's parts as t could have rendered it: part i's text is
 * spans[2i] bytes into s, spans[2i+1] long (spans: 2 * ecw_template_nparts
 * entries, the caller's). A literal part matches its text; unix, date_int,
 * inverted_ticks, hash4 and a date pattern their fixed-width text (digits
 * where the date goes, the pattern's separators); a plain value any text,
 * a padded one at least its width. 1 when exactly one split exists, 0 when
 * none, 2 when more than one (or the search ran past
 * ECW_TEMPLATE_SPLIT_STEPS); ECW_ENOMEM. What a split gives is only what t
 * may have read: a caller renders t again to be sure. */
int ecw_template_split(size_t *spans, const struct ecw_template *t, const char *s) ECW_MUST_USE;
/* The date fields part i's text gives, bit k for yyyy, MM, dd, HH, mm, ss
 * (k = 0..5): all of them for unix and inverted_ticks, yyyy MM dd for
 * date_int, a date pattern's own; 0 for any other part (a padded one too). */
unsigned ecw_template_part_date_fields(const struct ecw_template *t, size_t i);
/* The time text, part i's as ecw_template_split found it, stands for, in
 * Unix seconds (inverted ticks rounded down to the second; the fields a
 * date pattern lacks at their lowest: January, the 1st, 00:00:00, 1970).
 * ECW_EINVALID when the part gives no time or text is no valid one. */
int ecw_template_part_time(int64_t *out_s, const struct ecw_template *t, size_t i, const char *text,
			   size_t len) ECW_MUST_USE;

/* ---- table names with a date (jobs/purge_tables.c) ---- */

/* A pattern like "Logins{yyyyMMdd}": literal letters and digits, and one
 * {...} holding yyyy, MM and dd (and HH) once each. It must start with
 * prefix. Heap object: ecw_purge_tables_name_date_free. ECW_EINVALID with a message. */
struct ecw_name_date;
int ecw_purge_tables_name_date_compile(struct ecw_name_date **out, const char *pattern,
				       const char *prefix) ECW_MUST_USE;
void ecw_purge_tables_name_date_free(struct ecw_name_date *p);
/* True when name is exactly the pattern (same length, same literal text,
 * case included, digits where the date goes) with a valid date; then the
 * period the table holds is [*start_ms, *start_ms + *span_ms) in Unix ms
 * (a day, or an hour with HH). */
bool ecw_purge_tables_name_date_match(int64_t *start_ms, int64_t *span_ms, const struct ecw_name_date *p,
				      const char *name);
/* A table's period has ended at least keep ago: start + span <= now - keep. */
bool ecw_purge_tables_expired(int64_t start_ms, int64_t span_ms, int64_t now_ms, int64_t keep_ms);

/* The hex SHA-256 of "pk NUL rk": a fixed-length, key-safe, unambiguous name
 * for a source entity, whatever its keys hold (back-references use it). */
int ecw_job_source_key_hash(char out[65], const char *pk, const char *rk) ECW_MUST_USE;

/* ---- groups (ecw_job.h run_group; jobs/job.c) ---- */

/* Member ctx of a group failed with err: errs[i] (*err_out) takes it, and
 * ctx->error the last error's message (or err's name). */
void ecw_job_member_fail(struct ecw_job_ctx *ctx, int *err_out, int err);

#endif
