/* SPDX-License-Identifier: MIT */
/* trace.h - W3C Trace Context (level 1) for job messages: the
 * "traceparent" field a message may carry, read and written, and the span
 * each run of a message opens. Values only, no allocation: a span is a
 * struct the caller owns.
 *
 *   traceparent = "00-" 32 hex (trace-id) "-" 16 hex (parent-id) "-" 2 hex (flags)
 *
 * Lowercase hex only; an all-zero trace-id or parent-id is invalid. A
 * version other than 00 (but not ff, which is invalid) is read as the spec
 * asks of a version it does not know: the first 55 characters as version 00,
 * and anything after them only when it starts with '-'. What the worker
 * writes is always version 00. */
#ifndef ECW_TRACE_H
#define ECW_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ecw_err.h"

#define ECW_TRACEPARENT_LEN 55 /* "00-" + 32 + "-" + 16 + "-" + 2 */
#define ECW_TRACE_FLAG_SAMPLED 0x01

/* A trace context: the trace, the span that is the parent of what comes
 * next, and the flags. */
struct ecw_trace_ctx {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t flags;
};

/* One run of a message: a new span in the message's trace (or in a new
 * trace when the message carried none), with the hex forms the log lines
 * use. */
struct ecw_span_ids {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t parent_id[8];
	bool has_parent; /* the message carried a valid traceparent */
	uint8_t flags;
	char trace_hex[33];
	char span_hex[17];
};

/* Reads a traceparent (text of len bytes). ECW_EINVALID with a one-line
 * reason in the last error (the text itself is never quoted: it is the
 * sender's, of any size). */
int ecw_trace_parent_parse(struct ecw_trace_ctx *out, const char *text, size_t len) ECW_MUST_USE;
/* Writes ctx as a version-00 traceparent, NUL-terminated. */
void ecw_trace_parent_format(char out[ECW_TRACEPARENT_LEN + 1], const struct ecw_trace_ctx *ctx);
/* The traceparent a message sent by the run of span carries: the same trace,
 * span's id as the parent-id, span's flags. */
void ecw_trace_child_context(struct ecw_trace_ctx *out, const struct ecw_span_ids *span);

/* Opens the span of one run: parent NULL starts a new trace, whose id is
 * the queue message id's 32 hex digits when it is a GUID (so every delivery
 * of an untraced message shares one trace: its retries line up) and random
 * otherwise; the span id is always fresh and random. message_id may be
 * NULL. */
void ecw_trace_span_start(struct ecw_span_ids *out, const struct ecw_trace_ctx *parent,
			  const char *message_id);

/* n bytes as 2n lowercase hex digits and a NUL. */
void ecw_trace_hex(char *out, const uint8_t *bytes, size_t n);
/* n random bytes, never all zero (getrandom; a weaker mix if it fails). */
void ecw_trace_random(uint8_t *out, size_t n);

#endif
