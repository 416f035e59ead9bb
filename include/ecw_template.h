/* SPDX-License-Identifier: MIT */
/* ecw_template.h - key templates (jobs/template.c): what a job or a
 * migration writes a key or a filter from, given an entity. */
#ifndef ECW_TEMPLATE_H
#define ECW_TEMPLATE_H

#include "ecw_buf.h"
#include "ecw_entity.h"
#include "ecw_err.h"

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
 *   a date pattern  yyyy MM dd HH mm ss (zero-padded, UTC) and the
 *                   separators / - _ . T, at least one field:
 *                   {window:yyyy/MM/dd/HH} renders 2026/11/29/21
 * The time formatters take a DateTime, or Unix seconds as Int32, Int64 or a
 * String of digits; anything else renders as ECW_EINVALID naming the
 * property. {now:inverted_ticks|unix|date_int} is the wall clock
 * (ecw_clock_wall_ms), allowed only with ECW_TEMPLATE_ALLOW_NOW. Heap object:
 * ecw_template_free. */
struct ecw_template;

/* Parses text; on error returns ECW_EINVALID with a message naming what and
 * the column. Refuses {now:...}: a key that differs on every rerun breaks a
 * job's convergence (a retried move would write a second copy). */
int ecw_template_compile(struct ecw_template **out, const char *text, const char *what) ECW_MUST_USE;

/* For ecw_template_compile_flags. */
#define ECW_TEMPLATE_ALLOW_NOW 1u /* {now:...}: only where an entity is written exactly once */
/* An OData $filter, lexed as one: a placeholder inside a '...' literal is
 * text; outside, it must be a whole operand (after the start, a space or
 * '(', before the end, a space or ')'; `Cust{RowKey}` and `{A}{B}` are
 * refused), and an unclosed ' or a " outside a literal is an error too. */
#define ECW_TEMPLATE_FILTER 2u

int ecw_template_compile_flags(struct ecw_template **out, const char *text, const char *what,
			       unsigned flags) ECW_MUST_USE;
void ecw_template_free(struct ecw_template *t);
const char *ecw_template_text(const struct ecw_template *t);
/* The parts t was compiled into, in order (i < ecw_template_nparts(t)):
 * literal text ("{{" read as "{"), or a placeholder (*field), whose
 * property name is returned and which is *plain when it has no format or
 * padding. For a job that reasons about all that a template can render
 * (blob-ref's prefix rule). */
size_t ecw_template_nparts(const struct ecw_template *t);
const char *ecw_template_part(const struct ecw_template *t, size_t i, bool *field, bool *plain);
/* Whether t could have rendered s, judged by its literal text alone: s
 * starts with the text before t's first placeholder and ends with the text
 * after its last (equals it, with none). false means no entity renders s;
 * true only that one might (an audit tells its job's entities from another
 * job's in a shared table by it). */
bool ecw_template_may_render(const struct ecw_template *t, const char *s);
/* Adds to out, a comma-separated $select list, each property t reads
 * ({Name}, PartitionKey and RowKey included; not {now}) that out does not
 * hold yet: what a query needs to return for t to render as on the whole
 * entity. */
int ecw_template_select(struct ecw_buf *out, const struct ecw_template *t) ECW_MUST_USE;
/* Adds name to the $select list out unless it holds it already. */
int ecw_template_select_add(struct ecw_buf *out, const char *name) ECW_MUST_USE;

enum ecw_template_mode {
	ECW_TEMPLATE_PLAIN, /* values as they are (keys) */
	/* A filter (compiled with ECW_TEMPLATE_FILTER; another template is
	 * ECW_EINVALID): inside a '...' literal a value's text with ' doubled;
	 * outside, one literal of the property's EDM type: String and the keys
	 * '...' (' doubled), Int32 26, Int64 26L, Double 0.1 or 5.0 (NaN and
	 * infinities are ECW_EINVALID), Boolean true, Guid guid'...', DateTime
	 * datetime'2026-08-19T10:00:00.5Z', Binary X'00ff'. A formatted or padded
	 * value is a string there: '0026'. */
	ECW_TEMPLATE_ODATA,
};

/* Renders t against e. A property the entity lacks, or of a type that has no
 * text form (Binary, except as a filter's operand), is ECW_EINVALID naming
 * it: a permanent error. */
int ecw_template_render(struct ecw_buf *out, const struct ecw_template *t, const struct ecw_entity *e,
			enum ecw_template_mode mode) ECW_MUST_USE;

/* ---- inverting a filter (pass 2 of the fanout audit) ---- */

/* The properties through which an entity a filter selects names the entity
 * the filter was rendered from: "" where none does. */
struct ecw_template_keys {
	char pk[256]; /* holds the source's PartitionKey */
	char rk[256]; /* holds the source's RowKey */
};

/* For a filter template t (ECW_TEMPLATE_FILTER) that uses no property but
 * PartitionKey and RowKey: finds its top-level `and` terms of the form
 * `Prop eq {PartitionKey}` or `Prop eq '{RowKey}'` (either side, the key
 * quoted or not, unformatted; `(a and b) and c` counts as three terms) and
 * names the Prop each key is bound to (the first term's, if several). Every
 * entity the filter rendered from keys (pk, rk) selects then holds pk in
 * out->pk and rk in out->rk, as Strings. ECW_EINVALID with a message saying
 * why (nothing is bound, a key the filter uses is not, another property is
 * used, parentheses do not match): terms under `or` or `not`, compared by
 * ne/gt/..., or a key inside a longer string ('C-{RowKey}') bind nothing. */
int ecw_template_filter_keys(struct ecw_template_keys *out, const struct ecw_template *t) ECW_MUST_USE;

#endif
