/* SPDX-License-Identifier: MIT */
/* message.h - the job message: a JSON object
 *   {"job":"<configured name>","pk":"...","rk":"...","id":"optional trace id",
 *    "traceparent":"optional W3C trace context (trace.c)", ...}
 * sent as plain text or as base64 of the same text. The keys name the changed
 * entity; a keyless job type's messages have neither (a rollup's carries its
 * own fields instead). Decoding owns a json-c object (ecw_message_dispose
 * frees it); job/pk/rk/id point into it. */
#ifndef ECW_MESSAGE_H
#define ECW_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include "ecw_buf.h"
#include "ecw_err.h"

struct json_object;

struct ecw_message {
	struct json_object *obj;
	const char *job, *pk, *rk, *id; /* pk/rk NULL when absent (both), id NULL when absent */
	bool base64;                    /* the text was base64 of the JSON */
	/* "traceparent" as sent, not yet checked (trace.c reads it): NULL
	 * when absent or not a string; present is true when the field is
	 * there at all (null aside), so a non-string can be warned about. A
	 * bad one never fails the decoding. */
	const char *traceparent;
	size_t traceparent_len;
	bool traceparent_present;
};

/* Decodes text. The choice is unambiguous: JSON text starts with '{' (after
 * whitespace), a character base64 never uses; anything else must be strict
 * base64 whose bytes are such JSON. Fails with ECW_EINVALID and a one-line
 * reason in the last error; on failure fields decoded so far (job, pk, rk)
 * stay set in out for the poison envelope. Keys are checked as the service
 * would. */
int ecw_message_decode(struct ecw_message *out, const char *text, size_t len) ECW_MUST_USE;
/* ECW_EINVALID "message has no pk and rk" unless the message names an
 * entity: the runtime's check before a job type that needs keys. */
int ecw_message_require_keys(const struct ecw_message *m) ECW_MUST_USE;
void ecw_message_dispose(struct ecw_message *m);

/* Builds a message's text: fields is a NULL-terminated list of "key=value"
 * strings added as string fields (they may not replace job/pk/rk/id). pk
 * and rk are both NULL for a keyless job's message. */
int ecw_message_encode(struct ecw_buf *out, const char *job, const char *pk, const char *rk, const char *id,
		       char *const *fields, bool base64) ECW_MUST_USE;

struct ecw_log_line;
/* Adds a keyless message's own fields to its log line l (NULL: nothing):
 * window_start, then fields (NULL-terminated, may be NULL). Bounded: at most
 * 8 fields of at most 256 bytes, strings and numbers only, none named like
 * the line's own keys; a field left out is counted in "fields_omitted". */
void ecw_message_log_fields(struct ecw_log_line *l, const struct ecw_message *m, const char *const *fields);

#endif
