/* SPDX-License-Identifier: MIT */
/* rollup_private.h - the parts of the rollup job type (jobs/rollup.c) that
 * the unit tests check without a service: window arithmetic, the message's
 * window_start, the range filter, and the aggregation of rows. Only rollup.c,
 * the export job (jobs/export.c, export_run.c: its windows are rollup's) and
 * their tests include it. The accumulator is a heap object
 * (ecw_rollup_acc_new / _free); entities it hands out are the caller's. */
#ifndef ECW_ROLLUP_PRIVATE_H
#define ECW_ROLLUP_PRIVATE_H

#include <stdint.h>

#include "ecw_buf.h"
#include "ecw_entity.h"
#include "ecw_err.h"

#define ECW_ROLLUP_HOUR_MS INT64_C(3600000)
#define ECW_ROLLUP_DAY_MS INT64_C(86400000)
#define ECW_ROLLUP_WEEK_MS INT64_C(604800000)

struct ecw_node;
struct ecw_node_errors;

/* The job's `window:` (1h, 1d or 1w, weeks starting Monday) into *out_ms;
 * -1 with the problem in errs. */
int ecw_rollup_window_setting(int64_t *out_ms, const struct ecw_node *job, struct ecw_node_errors *errs);

/* Parses a message's window_start for a window of window_ms (one of the
 * three above) into Unix seconds: "YYYY-MM-DD" (1d and 1w only),
 * "YYYY-MM-DDTHH:MMZ" or "YYYY-MM-DDTHH:MM:SSZ" (UTC). The start must be
 * aligned (1h: on the hour; 1d: midnight UTC; 1w: a Monday, midnight) and
 * the window must end by 2286-11-20T17:46:39Z (raw RowKeys are 10 digits). Anything
 * else is ECW_EINVALID with a message saying why. */
int ecw_rollup_window_parse(int64_t *out_s, const char *text, int64_t window_ms) ECW_MUST_USE;

/* The aggregate's RowKey for the window starting at start_s: yyyyMMddHH for
 * 1h windows, else yyyyMMdd (a week's Monday); "YYYY-MM-DDTHH:MM:SSZ" for its
 * WindowStart. Both zero-padded, so string order is time order. */
void ecw_rollup_row_key(char out[16], int64_t start_s, int64_t window_ms);
void ecw_rollup_iso(char out[32], int64_t s);

/* The OData filter of a window's raw rows: PartitionKey eq 'PK' and RowKey
 * ge 'START' and RowKey lt 'END', the bounds as 10-digit Unix seconds. */
int ecw_rollup_filter(struct ecw_buf *out, const char *pk, int64_t start_s, int64_t end_s) ECW_MUST_USE;

/* Folds a window's rows, in RowKey order, into the aggregates that settings
 * (a rollup job's parsed settings) configure. add fails with ECW_EINVALID
 * naming the row's RowKey and the property when an aggregated value is not a
 * finite number, or a sum leaves Int64's range. finish builds the aggregate
 * entity (keys pk/rk, the aggregates and WindowStart), or sets *out to NULL
 * when no row was added (an empty window has no aggregate). */
struct ecw_rollup_acc;
int ecw_rollup_acc_new(struct ecw_rollup_acc **out, const void *settings) ECW_MUST_USE;
int ecw_rollup_acc_add(struct ecw_rollup_acc *a, const struct ecw_entity *row) ECW_MUST_USE;
int ecw_rollup_acc_finish(struct ecw_entity **out, const struct ecw_rollup_acc *a, const char *pk,
			  const char *rk, int64_t start_s) ECW_MUST_USE;
void ecw_rollup_acc_free(struct ecw_rollup_acc *a);

#endif
