/* jsonparse.h - reading JSON (jsonparse.c): one value as json-c parses it, and
 * the table service's {"odata.error":...} bodies. A parsed value is the
 * caller's (json_object_put); the error reader writes the caller's arrays.
 * (Not json.h: json-c's include folder has one.) */
#ifndef ECW_STORAGE_JSONPARSE_H
#define ECW_STORAGE_JSONPARSE_H

#include <stddef.h>

struct json_object;
/* Parses one JSON value (nothing but whitespace after it); NULL if invalid. */
struct json_object *ecw_jsonparse_value(const char *s, size_t len);
/* {"odata.error":{"code":..,"message":{"value":..}}}; missing parts "". */
void ecw_jsonparse_error(char *code, size_t code_cap, char *msg, size_t msg_cap, const char *body,
			 size_t len);

#endif
