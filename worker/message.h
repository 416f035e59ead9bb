/* message.h - the job message: a JSON object
 *   {"job":"<configured name>","pk":"...","rk":"...","id":"optional trace id", ...}
 * sent as plain text or as base64 of the same text. Decoding owns a json-c
 * object (ecw_message_dispose frees it); job/pk/rk/id point into it. */
#ifndef ECW_MESSAGE_H
#define ECW_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include "ecw_buf.h"
#include "ecw_err.h"

struct json_object;

struct ecw_message {
	struct json_object *obj;
	const char *job, *pk, *rk, *id; /* id NULL when absent */
	bool base64;                    /* the text was base64 of the JSON */
};

/* Decodes text. The choice is unambiguous: JSON text starts with '{' (after
 * whitespace), a character base64 never uses; anything else must be strict
 * base64 whose bytes are such JSON. Fails with ECW_EINVALID and a one-line
 * reason in the last error; on failure fields decoded so far (job, pk, rk)
 * stay set in out for the poison envelope. Keys are checked as the service
 * would. */
int ecw_message_decode(struct ecw_message *out, const char *text, size_t len) ECW_MUST_USE;
void ecw_message_dispose(struct ecw_message *m);

/* Builds a message's text: fields is a NULL-terminated list of "key=value"
 * strings added as string fields (they may not replace job/pk/rk/id). */
int ecw_message_encode(struct ecw_buf *out, const char *job, const char *pk, const char *rk,
		       const char *id, char *const *fields, bool base64) ECW_MUST_USE;

#endif
