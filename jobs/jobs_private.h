/* jobs_private.h - what the job types share with each other (not with the
 * runtime): key templates and the test-only crash points. */
#ifndef ECW_JOBS_PRIVATE_H
#define ECW_JOBS_PRIVATE_H

#include "ecw_buf.h"
#include "ecw_entity.h"
#include "ecw_err.h"
#include <stdbool.h>

/* A compiled template such as "email_{PartitionKey}" or "{Year:0>4}-{Id}":
 * {Name} is a property (or PartitionKey / RowKey), {Name:F>W} pads on the
 * left with F to width W ({Name:F<W} on the right), {{ and }} are literal
 * braces. Heap object: ecw_template_free. */
struct ecw_template;

/* Parses text; on error returns ECW_EINVALID with a message naming what and
 * the column. */
int ecw_template_compile(struct ecw_template **out, const char *text, const char *what) ECW_MUST_USE;
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
#else
#define ecw_crash_point(name) ((void)0)
#endif

#endif
