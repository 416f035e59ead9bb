/* jobs_private.h - what the job types share with each other (not with the
 * runtime): key templates and the test-only crash points (which the
 * migrations and the scheduler in worker/ use as well: one definition, one
 * set of ECW_CRASH_AT / ECW_TEST_PAUSE_AT rules). */
#ifndef ECW_JOBS_PRIVATE_H
#define ECW_JOBS_PRIVATE_H

#include "ecw_buf.h"
#include "ecw_entity.h"
#include "ecw_err.h"
#include <stdbool.h>
#include <stdint.h>

/* A compiled template such as "email_{PartitionKey}" or "{Year:0>4}-{Id}":
 * {Name} is a property (or PartitionKey / RowKey), {Name:F>W} pads on the
 * left with F to width W ({Name:F<W} on the right), {{ and }} are literal
 * braces. Key helpers, {Name:FORMATTER}:
 *   inverted_ticks  DateTime.MaxValue.Ticks - the time's .NET ticks, 19
 *                   digits: newest sorts first (all 7 fractional digits)
 *   unix            Unix seconds, 10 digits (1970..2286): text order is time order
 *   date_int        yyyyMMdd
 *   hash4           4 lowercase hex digits: the first 2 bytes of the SHA-256
 *                   of the value's text, to spread hot partitions
 * The time formatters take a DateTime, or Unix seconds as Int32, Int64 or a
 * String of digits; anything else renders as ECW_EINVALID naming the
 * property. {now:inverted_ticks|unix|date_int} is the wall clock
 * (ecw_wall_ms), allowed only with ECW_TEMPLATE_ALLOW_NOW. Heap object:
 * ecw_template_free. */
struct ecw_template;

/* Parses text; on error returns ECW_EINVALID with a message naming what and
 * the column. Refuses {now:...}: a key that differs on every rerun breaks a
 * job's convergence (a retried move would write a second copy). */
int ecw_template_compile(struct ecw_template **out, const char *text, const char *what) ECW_MUST_USE;

/* For ecw_template_compile_flags. */
#define ECW_TEMPLATE_ALLOW_NOW 1u /* {now:...}: only where an entity is written exactly once */

int ecw_template_compile_flags(struct ecw_template **out, const char *text, const char *what,
			       unsigned flags) ECW_MUST_USE;
void ecw_template_free(struct ecw_template *t);
const char *ecw_template_text(const struct ecw_template *t);

enum ecw_template_mode {
	ECW_TEMPLATE_PLAIN,   /* values as they are (keys) */
	ECW_TEMPLATE_ODATA,   /* values with ' doubled, for inside an OData string literal */
};

/* Renders t against e. A property the entity lacks, or of a type that has no
 * text form (Binary), is ECW_EINVALID naming it: a permanent error. */
int ecw_template_render(struct ecw_buf *out, const struct ecw_template *t, const struct ecw_entity *e,
			enum ecw_template_mode mode) ECW_MUST_USE;

/* ---- times as keys (jobs/template.c) ---- */

/* "YYYY-MM-DDThh:mm:ss.fffffffZ" and its NUL. */
#define ECW_ISO_TICKS_SIZE 29

/* The time a key made by {X:inverted_ticks} stands for: key starts with the
 * 19 digits (what follows them is ignored). ECW_EINVALID otherwise. */
int ecw_inverted_ticks_to_iso(char out[ECW_ISO_TICKS_SIZE], const char *key) ECW_MUST_USE;
/* .NET ticks (0 .. DateTime.MaxValue.Ticks) as a DateTime's text. */
int ecw_ticks_to_iso(char out[ECW_ISO_TICKS_SIZE], int64_t ticks) ECW_MUST_USE;
/* A proleptic Gregorian date in years 1..9999. */
bool ecw_civil_date_valid(int y, int m, int d);
/* Unix ms of y-m-d hh:00:00 UTC (the date must be valid). */
int64_t ecw_civil_to_unix_ms(int y, int m, int d, int hh);

/* ---- table names with a date (jobs/purge_tables.c) ---- */

/* A pattern like "Logins{yyyyMMdd}": literal letters and digits, and one
 * {...} holding yyyy, MM and dd (and HH) once each. It must start with
 * prefix. Heap object: ecw_name_date_free. ECW_EINVALID with a message. */
struct ecw_name_date;
int ecw_name_date_compile(struct ecw_name_date **out, const char *pattern, const char *prefix) ECW_MUST_USE;
void ecw_name_date_free(struct ecw_name_date *p);
/* True when name is exactly the pattern (same length, same literal text,
 * case included, digits where the date goes) with a valid date; then the
 * period the table holds is [*start_ms, *start_ms + *span_ms) in Unix ms
 * (a day, or an hour with HH). */
bool ecw_name_date_match(int64_t *start_ms, int64_t *span_ms, const struct ecw_name_date *p, const char *name);
/* A table's period has ended at least keep ago: start + span <= now - keep. */
bool ecw_purge_expired(int64_t start_ms, int64_t span_ms, int64_t now_ms, int64_t keep_ms);

/* ---- reading job settings (jobs/common.c) ---- */

struct ecw_node;
struct ecw_config_errors;

/* job[key] as a table name (a letter, then 2-62 letters or digits). */
int ecw_jobcfg_table(char **out, const struct ecw_node *job, const char *key, bool required,
		     struct ecw_config_errors *errs);
/* job[key] compiled as a template; *out stays NULL when absent and optional. */
int ecw_jobcfg_template(struct ecw_template **out, const struct ecw_node *job, const char *key, bool required,
			struct ecw_config_errors *errs);

/* The hex SHA-256 of "pk NUL rk": a fixed-length, key-safe, unambiguous name
 * for a source entity, whatever its keys hold (back-references use it). */
int ecw_source_key_hash(char out[65], const char *pk, const char *rk) ECW_MUST_USE;

/* Named crash points, after each step of a job. In test builds, a process
 * started with ECW_CRASH_AT=<name> dies (_exit(86)) the moment a job passes
 * that point, so tests can stop a job dead after any step and check that a
 * fresh worker converges; ECW_TEST_PAUSE_AT=<name>:<ms> pauses there and
 * ECW_TEST_STEP_JITTER_MS=<ms> pauses randomly at every point, to stage
 * races. In the shipped binary they compile to nothing. */
#ifdef ECW_TESTING
void ecw_crash_point(const char *name);
/* For tests that run a job in their own process, where dying or sleeping at
 * a point would not help: hook(name, payload) is called at every point
 * first (NULL: no hook), e.g. to change the data between a run's read and
 * its write. Set it only while no job runs. */
void ecw_crash_point_hook(void (*hook)(const char *name, void *payload), void *payload);
#else
#define ecw_crash_point(name) ((void)0)
#endif

#endif
