/* SPDX-License-Identifier: MIT */
/* fanout_private.h - what the fanout job (jobs/fanout.c) shares with its
 * audit (jobs/fanout_audit.c) and no one else: the settings, the copies a
 * source gives its targets (what run's step 3 compares each target with,
 * judged by ecw_audit_fanout_copies), the filter rendered as run renders it,
 * the read of one target through that filter, and run itself (the audit's
 * repair). Only those two files include it (tests/check-deps.sh). */
#ifndef ECW_FANOUT_PRIVATE_H
#define ECW_FANOUT_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>

#include "ecw_buf.h"
#include "ecw_entity.h"
#include "ecw_err.h"
#include "ecw_job.h"
#include "ecw_template.h"

struct fanout_field {
	char *target; /* property written in the targets */
	char *source; /* property read from the source (or PartitionKey / RowKey) */
};

/* The parsed settings (fanout_parse), read-only once parsed. */
struct fanout {
	char *source, *table;
	struct ecw_template *filter;
	struct fanout_field *fields;
	size_t nfields;
	bool clear_on_delete;
	char *select; /* the target fields, comma-separated, for $select */
};

/* The copies one source gives every target: set holds each target property
 * to set, with the source's EDM type and value (keys: the source's);
 * removed lists the target properties that must be absent (the source lacks
 * them, or is gone). The names point into the settings. Caller's struct:
 * ecw_fanout_want_dispose. */
struct fanout_want {
	struct ecw_entity *set;
	const char **removed;
	size_t nremoved;
};

/* From src, the source with keys (pk, rk); src NULL: the source is gone and
 * every copy is to be removed. */
int ecw_fanout_want(struct fanout_want *out, const struct fanout *f, const struct ecw_entity *src,
		    const char *pk, const char *rk) ECW_MUST_USE;
void ecw_fanout_want_dispose(struct fanout_want *w);

/* The filter rendered as run's step 2 renders it: from src, or, once it is
 * gone (NULL), from the keys (pk, rk) alone. ECW_EINVALID when it cannot
 * render (a property the source lacks: run poisons that message). */
int ecw_fanout_render_filter(struct ecw_buf *out, const struct fanout *f, const struct ecw_entity *src,
			     const char *pk, const char *rk) ECW_MUST_USE;

/* Target (pk, rk) read through the rendered filter (one query: `(filter)
 * and PartitionKey eq .. and RowKey eq ..`, the keys escaped); *out NULL
 * when it is gone or the filter no longer selects it. select: $select,
 * NULL for every property. */
int ecw_fanout_select_target(struct ecw_entity **out, struct ecw_client *c, const struct fanout *f,
			     const char *filter, const char *select, const char *pk,
			     const char *rk) ECW_MUST_USE;

/* The job's run (ecw_job_type.run) and audit (ecw_job_type.audit). */
int ecw_fanout_run(const void *settings, struct ecw_job_ctx *ctx);
int ecw_fanout_audit(const void *settings, struct ecw_audit_ctx *ctx);

/* The rest of the type descriptor (ecw_job_fanout), which sits in the file
 * on top (fanout_audit.c) so that no file calls back into it. */
void ecw_fanout_free(void *p);
int ecw_fanout_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs);
int ecw_fanout_prepare(const void *settings, struct ecw_client *c);
const char *ecw_fanout_source_table(const void *settings);
const char *ecw_fanout_target_table(const void *settings);

#endif
