/* entity.h - what the table and batch code need of entities beyond the public
 * ecw_entity.h (entity.c; json-c lives there, in table.c and batch.c). */
#ifndef ECW_STORAGE_ENTITY_H
#define ECW_STORAGE_ENTITY_H

#include <stddef.h>

#include "ecw_entity.h"

/* {"odata.error":{"code":..,"message":{"value":..}}}; missing parts "". */
void ecw_json_parse_error(char *code, size_t code_cap, char *msg, size_t msg_cap,
			  const char *body, size_t len);
struct json_object;
/* Parses one JSON value (nothing but whitespace after it); NULL if invalid.
 * Release with json_object_put. */
struct json_object *ecw_json_parse(const char *s, size_t len);
/* *out is the caller's (ecw_entity_free); obj stays the caller's. */
int ecw_entity_from_json_object(struct ecw_entity **out, struct json_object *obj) ECW_MUST_USE;
/* Sets the ETag of an entity (after a write, from the ETag header). */
int ecw_entity_set_etag(struct ecw_entity *e, const char *etag) ECW_MUST_USE;

#endif
