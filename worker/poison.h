/* SPDX-License-Identifier: MIT */
/* poison.h - the poison envelope: what the worker puts on the poison queue
 * for a message it gives up on, so people can see what failed and why and
 * replay `original` byte for byte. This module owns the format: building an
 * envelope, reading one back (or recognising a message that is not one), and
 * the filters operators select envelopes with. */
#ifndef ECW_POISON_H
#define ECW_POISON_H

#include <stdbool.h>
#include <time.h>
#include "ecw_buf.h"
#include "ecw_err.h"

struct json_object;

struct ecw_poison_info {
	const char *original; /* the message text exactly as received */
	size_t original_len;
	const char *queue;
	const char *message_id;
	time_t inserted_at;
	long dequeue_count;
	time_t failed_at;
	const char *reason;        /* "permanent" | "max-dequeue" */
	const char *error;         /* one line */
	int http_status;           /* the storage answer behind error: 0 when none */
	const char *error_code;    /* its x-ms-error-code: NULL or "" when none */
	const char *job, *pk, *rk; /* NULL when not decodable */
	const char *worker;        /* "<host> ecworker/<version>" */
	const char *traceparent;   /* the failed run's trace context (trace.c), or NULL */
};

/* {"ecw_poison":1,"original":...,"queue":...,"message_id":...,"inserted_at":...,
 *  "dequeue_count":...,"failed_at":...,"reason":...,"error":...,"http_status":...,
 *  "error_code":...,"job":...,"pk":...,"rk":...,"worker":...,"traceparent":...} on one
 *  line; http_status and error_code only when the failure was a storage answer;
 *  traceparent: the failed run's span as the parent, for a reader (replay puts
 *  back `original`, whose own traceparent keeps the trace). */
int ecw_poison_envelope(struct ecw_buf *out, const struct ecw_poison_info *info) ECW_MUST_USE;

/* A poison message read back. A message that is not an ecworker envelope (a
 * Functions poison queue, a hand-written message) is "foreign": its whole
 * text is what replay puts back, and it has no job, keys or reason. */
struct ecw_poison_view {
	bool envelope;
	char *original; /* envelope: `original`; foreign: the text */
	size_t original_len;
	char *job, *pk, *rk;  /* NULL when absent */
	char *reason, *error; /* NULL when absent */
	int http_status;      /* 0 when absent (older envelopes, failures without a storage answer) */
	char *error_code;     /* NULL when absent */
	char *queue, *message_id, *worker;
	char *traceparent;  /* NULL when absent */
	long dequeue_count; /* -1 when absent */
	time_t failed_at;   /* 0 when absent or unreadable */
	time_t inserted_at;
};

/* Reads text into out (dispose it afterwards, also on failure). Never fails
 * on content: anything that is not a well-formed envelope (a JSON object
 * with "ecw_poison":1 and a string "original") is read as foreign. Fails
 * only for memory. */
int ecw_poison_parse(struct ecw_poison_view *out, const char *text, size_t len) ECW_MUST_USE;
void ecw_poison_view_dispose(struct ecw_poison_view *v);

/* The view as `poison list --json` prints it: the envelope's fields plus
 * "id" (the poison message id), "envelope" and "poison_inserted_at"; a
 * foreign message has "text" instead. NULL when out of memory; the caller
 * puts it with json_object_put. */
struct json_object *ecw_poison_view_json(const struct ecw_poison_view *v, const char *id,
					 time_t poison_inserted);

/* What operators select poison messages by; every set field must match. */
struct ecw_poison_filter {
	const char *job;    /* the envelope's job; never matches a foreign message */
	const char *reason; /* "permanent" | "max-dequeue"; never matches foreign */
	time_t since;       /* failed at or after (foreign: put on the poison
	                               * queue at or after); 0 = any */
	const char *grep;   /* a substring of the error, original, job or keys */
	char *const *ids;   /* poison message ids; NULL = any */
	size_t nids;
};

/* msg_inserted: when the poison message was put (for foreign messages). */
bool ecw_poison_filter_match(const struct ecw_poison_filter *f, const char *msg_id, time_t msg_inserted,
			     const struct ecw_poison_view *v);
/* True when no field is set. */
bool ecw_poison_filter_empty(const struct ecw_poison_filter *f);

/* --since: a duration back from now ("90m", "2h", "7d", "1w") or a UTC time
 * ("2026-11-20", "2026-11-20T10:00:00Z"). ECW_EINVALID with the reason. */
int ecw_poison_parse_since(time_t *out, const char *text, time_t now) ECW_MUST_USE;

#endif
