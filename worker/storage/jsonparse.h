/* SPDX-License-Identifier: MIT */
/* jsonparse.h - reading JSON (jsonparse.c): one value as json-c parses it, and
 * the table service's {"odata.error":...} bodies. A parsed value is the
 * caller's (json_object_put); the error reader writes the caller's arrays.
 * (Not json.h: json-c's include folder has one.) */
#ifndef ECW_STORAGE_JSONPARSE_H
#define ECW_STORAGE_JSONPARSE_H

#include <stddef.h>

#include "ecw_err.h"

struct json_object;
/* Parses one JSON value (nothing but whitespace after it); NULL if invalid. */
struct json_object *ecw_jsonparse_value(const char *s, size_t len);
/* {"odata.error":{"code":..,"message":{"value":..}}}; missing parts "". */
void ecw_jsonparse_error(char *code, size_t code_cap, char *msg, size_t msg_cap, const char *body,
			 size_t len);

/* A span of the text given. */
struct ecw_json_span {
	const char *ptr;
	size_t len;
};

/* The common form of a query page, {"odata.metadata":"...","value":[{..},..]}
 * without a full parse: s must be one JSON object whose members are plain
 * printable-ASCII strings (no escapes but \" \\ \/) and exactly one member
 * `name`, an array of objects. *spans (malloc'd, the caller frees it; NULL
 * when empty) gets each object's text, *n their number; each object is only
 * delimited here (string-aware bracket counting), and the caller parses it in
 * full. 1: not that form (parse s in full instead); ECW_ENOMEM. */
int ecw_jsonparse_object_array(struct ecw_json_span **spans, size_t *n, const char *s, size_t len,
			       const char *name);

#endif
