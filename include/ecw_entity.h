/* SPDX-License-Identifier: MIT */
/* ecw_entity.h - a table entity: PartitionKey, RowKey and a bag of typed
 * properties that keeps each property's EDM type exactly through read and
 * write, so an entity read from one table and written to another is identical.
 * An ecw_entity is a heap object (ecw_entity_new / ecw_entity_free); the
 * ecw_prop views it hands out stay valid until the entity is changed or freed. */
#ifndef ECW_ENTITY_H
#define ECW_ENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ecw_buf.h"
#include "ecw_err.h"

enum ecw_edm {
	ECW_EDM_STRING,
	ECW_EDM_INT32,
	ECW_EDM_INT64,
	ECW_EDM_DOUBLE,
	ECW_EDM_BOOLEAN,
	ECW_EDM_DATETIME, /* kept as "YYYY-MM-DDThh:mm:ss.fffffffZ" (7 digits, UTC) */
	ECW_EDM_GUID,     /* kept as the 36-character text read or set */
	ECW_EDM_BINARY,
};

struct ecw_prop {
	const char *name;
	enum ecw_edm type;
	union {
		const char *s;            /* STRING, DATETIME, GUID: NUL-terminated */
		const unsigned char *bin; /* BINARY */
		int32_t i32;
		int64_t i64;
		double d;
		bool b;
	} v;
	size_t len; /* bytes of s or bin */
};

/* Longest key the service accepts, in bytes of UTF-8. */
#define ECW_KEY_MAX 1024

struct ecw_entity;

/* Keys are checked (see ecw_entity_key_check) and copied. */
int ecw_entity_new(struct ecw_entity **out, const char *pk, const char *rk) ECW_MUST_USE;
void ecw_entity_free(struct ecw_entity *e);
int ecw_entity_clone(struct ecw_entity **out, const struct ecw_entity *e) ECW_MUST_USE;
int ecw_entity_set_keys(struct ecw_entity *e, const char *pk, const char *rk) ECW_MUST_USE;

const char *ecw_entity_pk(const struct ecw_entity *e);
const char *ecw_entity_rk(const struct ecw_entity *e);
/* ETag and Timestamp as the service returned them; NULL on a new entity. */
const char *ecw_entity_etag(const struct ecw_entity *e);
const char *ecw_entity_timestamp(const struct ecw_entity *e);

/* Setters add the property or replace its value and type. Names must be valid
 * identifiers of at most 255 characters and not PartitionKey, RowKey,
 * Timestamp, or contain "@odata". Strings must be valid UTF-8. */
int ecw_entity_set_string(struct ecw_entity *e, const char *name, const char *s, size_t len) ECW_MUST_USE;
int ecw_entity_set_int32(struct ecw_entity *e, const char *name, int32_t v) ECW_MUST_USE;
int ecw_entity_set_int64(struct ecw_entity *e, const char *name, int64_t v) ECW_MUST_USE;
int ecw_entity_set_double(struct ecw_entity *e, const char *name, double v) ECW_MUST_USE;
int ecw_entity_set_bool(struct ecw_entity *e, const char *name, bool v) ECW_MUST_USE;
/* ISO 8601 UTC with 0..7 fractional digits ("2026-08-19T10:00:00.5Z"). */
int ecw_entity_set_datetime(struct ecw_entity *e, const char *name, const char *iso) ECW_MUST_USE;
int ecw_entity_set_guid(struct ecw_entity *e, const char *name, const char *guid) ECW_MUST_USE;
int ecw_entity_set_binary(struct ecw_entity *e, const char *name, const void *p, size_t len) ECW_MUST_USE;
/* Copies one property (name, type, value) from another entity's view. */
int ecw_entity_set_prop(struct ecw_entity *e, const struct ecw_prop *p) ECW_MUST_USE;
/* Returns true when the property existed. */
bool ecw_entity_remove(struct ecw_entity *e, const char *name);

/* NULL when absent. */
const struct ecw_prop *ecw_entity_get(const struct ecw_entity *e, const char *name);
size_t ecw_entity_count(const struct ecw_entity *e);
const struct ecw_prop *ecw_entity_at(const struct ecw_entity *e, size_t i);

/* Same keys and the same properties with the same types and values (bitwise
 * for doubles, so NaN equals NaN); ETag and Timestamp are ignored. */
bool ecw_entity_equal(const struct ecw_entity *a, const struct ecw_entity *b);
/* Two values alike by the same rule (the names are not compared). */
bool ecw_entity_prop_equal(const struct ecw_prop *a, const struct ecw_prop *b);

/* The JSON body the Table service takes: keys, properties, and an
 * "@odata.type" annotation for every type JSON cannot tell apart
 * (Int64, Double, DateTime, Guid, Binary). One line. */
int ecw_entity_to_json(struct ecw_buf *out, const struct ecw_entity *e) ECW_MUST_USE;
/* What ecw_entity_to_json writes after the keys: ,"Name":value for each
 * property, and the closing brace. For a caller that writes the keys
 * itself, with something after them (the export's "odata.etag"). */
int ecw_entity_props_to_json(struct ecw_buf *out, const struct ecw_entity *e) ECW_MUST_USE;
/* Parses one entity as the service returns it (minimal or no metadata).
 * Unannotated numbers are Int32 when written without '.', 'e' or 'E' and in
 * range, otherwise Double: the service writes doubles as 50000.0. */
int ecw_entity_from_json(struct ecw_entity **out, const char *json, size_t len) ECW_MUST_USE;

/* Checks a PartitionKey or RowKey against the service's rules before any
 * request: valid UTF-8, at most 1 KiB, none of / \ # ? and no control
 * characters (U+0000-001F, U+007F-009F). what names the key in the error. */
int ecw_entity_key_check(const char *key, const char *what) ECW_MUST_USE;

const char *ecw_entity_edm_name(enum ecw_edm t); /* "Edm.Int64" ... */

#endif
