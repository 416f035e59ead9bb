/* SPDX-License-Identifier: MIT */
/* entity.h - what the table code needs of entities beyond the public
 * ecw_entity.h (entity.c; json-c lives there, in jsonparse.c, table.c,
 * batch.c and token.c). An entity is a heap object: whoever gets one from
 * a call here frees it with ecw_entity_free; a json-c object passed in
 * stays the caller's. */
#ifndef ECW_STORAGE_ENTITY_H
#define ECW_STORAGE_ENTITY_H

#include <stddef.h>

#include "ecw_entity.h"

struct json_object;
/* *out is the caller's (ecw_entity_free); obj stays the caller's. */
int ecw_entity_from_json_object(struct ecw_entity **out, struct json_object *obj) ECW_MUST_USE;
/* Sets the ETag of an entity (after a write, from the ETag header). */
int ecw_entity_set_etag(struct ecw_entity *e, const char *etag) ECW_MUST_USE;

#endif
