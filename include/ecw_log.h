/* SPDX-License-Identifier: MIT */
/* ecw_log.h - structured logging on stderr: one JSON object per line (or
 * "time LEVEL event k=v ..." text). A line is built field by field and written
 * with one write(2), so lines from threads never interleave. Registered
 * secrets (the account key, SAS signatures, the connection string) and
 * anything shaped like a JWT (access tokens, federated assertions) are
 * replaced by "[REDACTED]" in every line, as a last line of defence. */
#ifndef ECW_LOG_H
#define ECW_LOG_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include "ecw_err.h"

struct ecw_buf;

enum ecw_log_level { ECW_LOG_DEBUG, ECW_LOG_INFO, ECW_LOG_WARN, ECW_LOG_ERROR };
enum ecw_log_format { ECW_LOG_JSON, ECW_LOG_TEXT };

void ecw_log_setup(enum ecw_log_level level, enum ecw_log_format format);
/* Adds a string that must never appear in a log line (copied; empty ignored). */
void ecw_log_add_secret(const char *secret);
/* Takes back a secret that is no longer in use (a rotated key or SAS), so
 * that rotations do not fill the table; its copies are wiped. A secret
 * registered twice is gone after one call. */
void ecw_log_forget_secret(const char *secret);
/* Redirect for tests: lines go to fd instead of 2. */
void ecw_log_set_fd(int fd);

struct ecw_log_line;

/* NULL when level is below the threshold (the field calls accept NULL). */
struct ecw_log_line *ecw_log_begin(enum ecw_log_level level, const char *event);
void ecw_log_str(struct ecw_log_line *l, const char *key, const char *value); /* NULL value: skipped */
void ecw_log_int(struct ecw_log_line *l, const char *key, int64_t value);
void ecw_log_double(struct ecw_log_line *l, const char *key, double value);
void ecw_log_bool(struct ecw_log_line *l, const char *key, bool value);
/* Writes the line and frees l. */
void ecw_log_end(struct ecw_log_line *l);

/* Holds the calling thread's lines until the matching ecw_log_release
 * (calls nest), which writes them together: one write(2) per PIPE_BUF
 * bytes of whole lines instead of one per line. A held line is already
 * redacted; what a crash meanwhile loses is those lines, never more. For a
 * moment of several lines in a row (a group of messages concluded), not
 * for a wait. */
void ecw_log_hold(void);
void ecw_log_release(void);

/* The calling thread's trace fields: every line it begins until the next
 * call carries "trace_id" and "span_id" right after "event" (copied, each at
 * most 32 characters; NULL or "" clears them). The runtime sets them around
 * the run of one message. */
void ecw_log_set_trace(const char *trace_id, const char *span_id);

/* Copies s (n bytes) to out with every registered secret, JWT and sig= /
 * AccountKey= value replaced by [REDACTED], as a log line is: for text
 * that leaves the process another way (the OTLP export). */
int ecw_log_redact(struct ecw_buf *out, const char *s, size_t n) ECW_MUST_USE;

/* One-call form for a plain message: {"event":event,"msg":...}. */
void ecw_log_msg(enum ecw_log_level level, const char *event, const char *fmt, ...) ECW_PRINTF(3, 4);

#endif
