/* SPDX-License-Identifier: MIT */
/* test_entity.c - every EDM type survives set -> to_json -> from_json with its
 * type and value intact (the JSON is checked with json-c on the side: doubles
 * and the other ambiguous types must carry their annotation), service
 * responses parse with their metadata, and bad names and text are refused. */
#include "support.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------- */

static struct ecw_entity *new_entity(const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;
	assert_int_equal(ecw_entity_new(&e, pk, rk), 0);
	assert_non_null(e);
	return e;
}

/* e as JSON, checked to be one line; *jout is the JSON parsed by json-c. */
static char *to_json(const struct ecw_entity *e, json_object **jout)
{
	struct ecw_buf b;
	ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
	assert_int_equal(ecw_entity_to_json(&b, e), 0);
	char *s = ecw_buf_take(&b);
	assert_non_null(s);
	assert_null(strchr(s, '\n'));
	assert_null(strchr(s, '\r'));
	json_object *j = json_tokener_parse(s);
	if (!j)
		fail_msg("ecw_entity_to_json produced invalid JSON: %s", s);
	assert_true(json_object_is_type(j, json_type_object));
	*jout = j;
	return s;
}

static struct ecw_entity *from_json(const char *s)
{
	struct ecw_entity *e = NULL;
	int err = ecw_entity_from_json(&e, s, strlen(s));
	if (err != 0)
		fail_msg("ecw_entity_from_json failed (%s: %s) on %s", ecw_error_name(err),
		         ecw_error_last()->message, s);
	assert_non_null(e);
	return e;
}

/* to_json -> from_json, asserting the result equals e. */
static struct ecw_entity *round_trip(const struct ecw_entity *e, json_object **jout)
{
	char *s = to_json(e, jout);
	struct ecw_entity *back = from_json(s);
	if (!ecw_entity_equal(e, back))
		fail_msg("round trip changed the entity: %s", s);
	free(s);
	return back;
}

static json_object *jfield(json_object *j, const char *name)
{
	json_object *v = NULL;
	if (!json_object_object_get_ex(j, name, &v))
		return NULL;
	return v;
}

/* The "name@odata.type" annotation, or NULL. */
static const char *jannot(json_object *j, const char *name)
{
	char key[300];
	snprintf(key, sizeof(key), "%s@odata.type", name);
	json_object *v = jfield(j, key);
	return v ? json_object_get_string(v) : NULL;
}

static const char *jstring(json_object *j, const char *name)
{
	json_object *v = jfield(j, name);
	assert_non_null(v);
	assert_true(json_object_is_type(v, json_type_string));
	return json_object_get_string(v);
}

static const struct ecw_prop *prop(const struct ecw_entity *e, const char *name, enum ecw_edm t)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);
	if (!p)
		fail_msg("property %s missing", name);
	if (p->type != t)
		fail_msg("property %s has type %s, want %s", name, ecw_entity_edm_name(p->type),
		         ecw_entity_edm_name(t));
	assert_str(p->name, name);
	return p;
}

static bool same_bits(double a, double b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

/* ---- types ----------------------------------------------------------------- */

static void test_entity__keys_in_json(void **state)
{
	(void)state;
	struct ecw_entity *e = new_entity("o'brien 001", "Zo\xc3\xab");
	assert_str(ecw_entity_pk(e), "o'brien 001");
	assert_str(ecw_entity_rk(e), "Zo\xc3\xab");
	assert_null(ecw_entity_etag(e));
	assert_null(ecw_entity_timestamp(e));
	assert_int_equal(ecw_entity_count(e), 0);
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	assert_string_equal(jstring(j, "PartitionKey"), "o'brien 001");
	assert_string_equal(jstring(j, "RowKey"), "Zo\xc3\xab");
	assert_str(ecw_entity_pk(back), "o'brien 001");
	assert_str(ecw_entity_rk(back), "Zo\xc3\xab");
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

static void test_entity__string(void **state)
{
	(void)state;
	static const char s[] = "Zo\xc3\xab \"quoted\" back\\slash\nnew line\ttab \xf0\x9f\x98\x80";
	struct ecw_entity *e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_string(e, "S", s, strlen(s)), 0);
	assert_int_equal(ecw_entity_set_string(e, "Empty", "", 0), 0);
	assert_int_equal(ecw_entity_set_string(e, "Prefix", "abcdef", 3), 0);
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	assert_string_equal(jstring(j, "S"), s);
	assert_string_equal(jstring(j, "Prefix"), "abc");
	const struct ecw_prop *p = prop(back, "S", ECW_EDM_STRING);
	assert_int_equal(p->len, strlen(s));
	assert_string_equal(p->v.s, s);
	p = prop(back, "Empty", ECW_EDM_STRING);
	assert_int_equal(p->len, 0);
	assert_string_equal(p->v.s, "");
	p = prop(back, "Prefix", ECW_EDM_STRING);
	assert_int_equal(p->len, 3);
	assert_string_equal(p->v.s, "abc");
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

static void test_entity__int32(void **state)
{
	(void)state;
	struct ecw_entity *e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_int32(e, "Zero", 0), 0);
	assert_int_equal(ecw_entity_set_int32(e, "Neg", -5), 0);
	assert_int_equal(ecw_entity_set_int32(e, "Min", INT32_MIN), 0);
	assert_int_equal(ecw_entity_set_int32(e, "Max", INT32_MAX), 0);
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	json_object *v = jfield(j, "Max");
	assert_non_null(v);
	assert_true(json_object_is_type(v, json_type_int));
	assert_int_equal(json_object_get_int64(v), INT32_MAX);
	assert_int_equal(prop(back, "Zero", ECW_EDM_INT32)->v.i32, 0);
	assert_int_equal(prop(back, "Neg", ECW_EDM_INT32)->v.i32, -5);
	assert_int_equal(prop(back, "Min", ECW_EDM_INT32)->v.i32, INT32_MIN);
	assert_int_equal(prop(back, "Max", ECW_EDM_INT32)->v.i32, INT32_MAX);
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

static void test_entity__int64(void **state)
{
	(void)state;
	struct ecw_entity *e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_int64(e, "Big", 9007199254740993LL), 0);
	assert_int_equal(ecw_entity_set_int64(e, "Min", INT64_MIN), 0);
	assert_int_equal(ecw_entity_set_int64(e, "Max", INT64_MAX), 0);
	assert_int_equal(ecw_entity_set_int64(e, "Small", 5), 0);
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	/* A string plus an annotation: JSON numbers lose precision beyond 2^53. */
	assert_string_equal(jstring(j, "Big"), "9007199254740993");
	assert_string_equal(jstring(j, "Min"), "-9223372036854775808");
	assert_string_equal(jstring(j, "Max"), "9223372036854775807");
	assert_string_equal(jstring(j, "Small"), "5");
	assert_str(jannot(j, "Big"), "Edm.Int64");
	assert_str(jannot(j, "Min"), "Edm.Int64");
	assert_str(jannot(j, "Small"), "Edm.Int64");
	assert_true(prop(back, "Big", ECW_EDM_INT64)->v.i64 == 9007199254740993LL);
	assert_true(prop(back, "Min", ECW_EDM_INT64)->v.i64 == INT64_MIN);
	assert_true(prop(back, "Max", ECW_EDM_INT64)->v.i64 == INT64_MAX);
	assert_true(prop(back, "Small", ECW_EDM_INT64)->v.i64 == 5);
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

static void test_entity__double_integral_stays_double(void **state)
{
	(void)state;
	struct ecw_entity *e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_double(e, "D", 50000.0), 0);
	assert_int_equal(ecw_entity_set_double(e, "Five", 5.0), 0);
	assert_int_equal(ecw_entity_set_double(e, "Zero", 0.0), 0);
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	assert_str(jannot(j, "D"), "Edm.Double");
	assert_str(jannot(j, "Five"), "Edm.Double");
	assert_str(jannot(j, "Zero"), "Edm.Double");
	json_object *v = jfield(j, "D");
	assert_non_null(v);
	assert_true(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int));
	assert_true(json_object_get_double(v) == 50000.0);
	assert_true(prop(back, "D", ECW_EDM_DOUBLE)->v.d == 50000.0);
	assert_true(prop(back, "Five", ECW_EDM_DOUBLE)->v.d == 5.0);
	assert_true(prop(back, "Zero", ECW_EDM_DOUBLE)->v.d == 0.0);
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

static void test_entity__double_exact(void **state)
{
	(void)state;
	static const double values[] = {
	    0.1, 1e300, -2.5e-300, 1.0 / 3.0, 4.9406564584124654e-324, 1.7976931348623157e308, -123456.789};
	struct ecw_entity *e = new_entity("p", "r");
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		char name[16];
		snprintf(name, sizeof(name), "D%zu", i);
		assert_int_equal(ecw_entity_set_double(e, name, values[i]), 0);
	}
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		char name[16];
		snprintf(name, sizeof(name), "D%zu", i);
		assert_str(jannot(j, name), "Edm.Double");
		const struct ecw_prop *p = prop(back, name, ECW_EDM_DOUBLE);
		if (!same_bits(p->v.d, values[i]))
			fail_msg("%s: got %.17g, want %.17g", name, p->v.d, values[i]);
	}
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

static void test_entity__double_special(void **state)
{
	(void)state;
	struct ecw_entity *e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_double(e, "N", NAN), 0);
	assert_int_equal(ecw_entity_set_double(e, "Inf", INFINITY), 0);
	assert_int_equal(ecw_entity_set_double(e, "NegInf", -INFINITY), 0);
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	assert_string_equal(jstring(j, "N"), "NaN");
	assert_string_equal(jstring(j, "Inf"), "Infinity");
	assert_string_equal(jstring(j, "NegInf"), "-Infinity");
	assert_str(jannot(j, "N"), "Edm.Double");
	assert_str(jannot(j, "Inf"), "Edm.Double");
	assert_str(jannot(j, "NegInf"), "Edm.Double");
	assert_true(isnan(prop(back, "N", ECW_EDM_DOUBLE)->v.d));
	double inf = prop(back, "Inf", ECW_EDM_DOUBLE)->v.d;
	assert_true(isinf(inf) && inf > 0);
	double ninf = prop(back, "NegInf", ECW_EDM_DOUBLE)->v.d;
	assert_true(isinf(ninf) && ninf < 0);
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

static void test_entity__boolean(void **state)
{
	(void)state;
	struct ecw_entity *e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_bool(e, "T", true), 0);
	assert_int_equal(ecw_entity_set_bool(e, "F", false), 0);
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	json_object *v = jfield(j, "T");
	assert_non_null(v);
	assert_true(json_object_is_type(v, json_type_boolean));
	assert_true(prop(back, "T", ECW_EDM_BOOLEAN)->v.b);
	assert_false(prop(back, "F", ECW_EDM_BOOLEAN)->v.b);
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

static void test_entity__datetime(void **state)
{
	(void)state;
	struct ecw_entity *e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_datetime(e, "Seven", "2026-08-19T10:00:00.1234567Z"), 0);
	assert_int_equal(ecw_entity_set_datetime(e, "One", "2026-08-19T10:00:00.5Z"), 0);
	assert_int_equal(ecw_entity_set_datetime(e, "Three", "1999-12-31T23:59:59.123Z"), 0);
	assert_int_equal(ecw_entity_set_datetime(e, "None", "2026-08-19T10:00:00Z"), 0);
	/* Normalized to 7 digits on set. */
	assert_string_equal(prop(e, "One", ECW_EDM_DATETIME)->v.s, "2026-08-19T10:00:00.5000000Z");
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	assert_str(jannot(j, "Seven"), "Edm.DateTime");
	assert_str(jannot(j, "None"), "Edm.DateTime");
	assert_string_equal(jstring(j, "Seven"), "2026-08-19T10:00:00.1234567Z");
	const struct ecw_prop *p = prop(back, "Seven", ECW_EDM_DATETIME);
	assert_string_equal(p->v.s, "2026-08-19T10:00:00.1234567Z");
	assert_int_equal(p->len, 28);
	assert_string_equal(prop(back, "One", ECW_EDM_DATETIME)->v.s, "2026-08-19T10:00:00.5000000Z");
	assert_string_equal(prop(back, "Three", ECW_EDM_DATETIME)->v.s, "1999-12-31T23:59:59.1230000Z");
	assert_string_equal(prop(back, "None", ECW_EDM_DATETIME)->v.s, "2026-08-19T10:00:00.0000000Z");
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

static void test_entity__datetime_invalid(void **state)
{
	(void)state;
	static const char *const bad[] = {"",
	                                  "not a date",
	                                  "2026-08-19",
	                                  "2026-08-19 10:00:00Z",
	                                  "2026-08-19T10:00:00",
	                                  "2026-08-19T10:00:00.12345678Z",
	                                  "2026-08-19T10:00:00.Z",
	                                  "2026-13-19T10:00:00Z"};
	struct ecw_entity *e = new_entity("p", "r");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ecw_entity_set_datetime(e, "When", bad[i]) != ECW_EINVALID)
			fail_msg("datetime \"%s\" accepted", bad[i]);
	assert_null(ecw_entity_get(e, "When"));
	ecw_entity_free(e);
}

static void test_entity__guid(void **state)
{
	(void)state;
	static const char g[] = "c9da6455-213d-42c9-9a79-3e9149a57833";
	struct ecw_entity *e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_guid(e, "G", g), 0);
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	assert_str(jannot(j, "G"), "Edm.Guid");
	assert_string_equal(jstring(j, "G"), g);
	const struct ecw_prop *p = prop(back, "G", ECW_EDM_GUID);
	assert_string_equal(p->v.s, g);
	assert_int_equal(p->len, 36);
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

static void test_entity__binary_with_zero_bytes(void **state)
{
	(void)state;
	static const unsigned char bin[] = {0x00, 0x01, 0x00, 0xff};
	struct ecw_entity *e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_binary(e, "B", bin, sizeof(bin)), 0);
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	assert_str(jannot(j, "B"), "Edm.Binary");
	assert_string_equal(jstring(j, "B"), "AAEA/w==");
	const struct ecw_prop *p = prop(back, "B", ECW_EDM_BINARY);
	assert_int_equal(p->len, sizeof(bin));
	assert_memory_equal(p->v.bin, bin, sizeof(bin));
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

static void test_entity__all_types_round_trip(void **state)
{
	(void)state;
	static const unsigned char bin[] = {0x00, 0xfe, 0x00};
	struct ecw_entity *e = new_entity("part", "row");
	assert_int_equal(ecw_entity_set_string(e, "S", "text", 4), 0);
	assert_int_equal(ecw_entity_set_int32(e, "I", 42), 0);
	assert_int_equal(ecw_entity_set_int64(e, "L", 9007199254740993LL), 0);
	assert_int_equal(ecw_entity_set_double(e, "D", 50000.0), 0);
	assert_int_equal(ecw_entity_set_double(e, "N", NAN), 0);
	assert_int_equal(ecw_entity_set_bool(e, "B", true), 0);
	assert_int_equal(ecw_entity_set_datetime(e, "T", "2026-08-19T10:00:00.1234567Z"), 0);
	assert_int_equal(ecw_entity_set_guid(e, "G", "c9da6455-213d-42c9-9a79-3e9149a57833"), 0);
	assert_int_equal(ecw_entity_set_binary(e, "Bin", bin, sizeof(bin)), 0);
	assert_int_equal(ecw_entity_count(e), 9);
	json_object *j;
	struct ecw_entity *back = round_trip(e, &j);
	assert_int_equal(ecw_entity_count(back), 9);
	for (size_t i = 0; i < ecw_entity_count(e); i++) {
		const struct ecw_prop *p = ecw_entity_at(e, i);
		assert_non_null(p);
		const struct ecw_prop *q = ecw_entity_get(back, p->name);
		assert_non_null(q);
		assert_int_equal(q->type, p->type);
	}
	/* A clone is equal too, and so is an entity rebuilt with set_prop. */
	struct ecw_entity *c = NULL;
	assert_int_equal(ecw_entity_clone(&c, back), 0);
	assert_true(ecw_entity_equal(c, e));
	/* ... and a deep copy: changing it leaves the original as it was. */
	assert_int_equal(ecw_entity_set_string(c, "S", "other", 5), 0);
	assert_int_equal(ecw_entity_set_binary(c, "Bin", bin, 0), 0);
	assert_false(ecw_entity_equal(c, e));
	assert_string_equal(ecw_entity_get(back, "S")->v.s, "text");
	assert_int_equal(ecw_entity_get(back, "Bin")->len, sizeof(bin));
	struct ecw_entity *c2 = NULL;
	assert_int_equal(ecw_entity_clone(&c2, c), 0);
	assert_true(ecw_entity_equal(c2, c));
	assert_int_equal(ecw_entity_get(c2, "Bin")->len, 0);
	ecw_entity_free(c2);
	struct ecw_entity *copy = new_entity("part", "row");
	for (size_t i = 0; i < ecw_entity_count(back); i++)
		assert_int_equal(ecw_entity_set_prop(copy, ecw_entity_at(back, i)), 0);
	assert_true(ecw_entity_equal(copy, e));
	ecw_entity_free(copy);
	ecw_entity_free(c);
	json_object_put(j);
	ecw_entity_free(back);
	ecw_entity_free(e);
}

/* Strings are written as json-c writes them (ecw_json_quote, shared with the
 * log lines): short escapes where JSON has them, \u00xx for other control
 * bytes, UTF-8 as it is; and they read back byte for byte. */
static void test_entity__string_escapes(void **state)
{
	(void)state;
	static const char text[] = "q\" b\\ n\n t\t c\x01 z\xc3\xab";
	struct ecw_entity *e = new_entity("part", "row");
	struct ecw_buf b;
	assert_int_equal(ecw_entity_set_string(e, "S", text, sizeof(text) - 1), 0);
	ecw_buf_init(&b, 0);
	assert_int_equal(ecw_entity_to_json(&b, e), 0);
	assert_non_null(strstr(ecw_buf_cstr(&b), "\"S\":\"q\\\" b\\\\ n\\n t\\t c\\u0001 z\xc3\xab\""));
	struct ecw_entity *back = NULL;
	assert_int_equal(ecw_entity_from_json(&back, b.ptr, b.len), 0);
	assert_true(ecw_entity_equal(back, e));
	ecw_entity_free(back);
	ecw_buf_dispose(&b);
	ecw_entity_free(e);
}

/* ---- service responses ----------------------------------------------------- */

static void test_entity__from_service_response(void **state)
{
	(void)state;
	static const char body[] =
	    "{\"odata.metadata\":\"http://127.0.0.1:10002/devstoreaccount1/$metadata#jobs/@Element\","
	    "\"odata.etag\":\"W/\\\"datetime'2026-08-19T10%3A00%3A00.1234567Z'\\\"\","
	    "\"PartitionKey\":\"p\",\"RowKey\":\"r\","
	    "\"Timestamp@odata.type\":\"Edm.DateTime\",\"Timestamp\":\"2026-08-19T10:00:00.1234567Z\","
	    "\"D\":50000.0,\"I\":5,\"Neg\":-7,\"Big\":3000000000,\"E\":1e3,\"F\":0.25,"
	    "\"L@odata.type\":\"Edm.Int64\",\"L\":\"9007199254740993\","
	    "\"G@odata.type\":\"Edm.Guid\",\"G\":\"c9da6455-213d-42c9-9a79-3e9149a57833\","
	    "\"Bin@odata.type\":\"Edm.Binary\",\"Bin\":\"AAEA/w==\","
	    "\"When@odata.type\":\"Edm.DateTime\",\"When\":\"2026-08-19T10:00:00.5Z\","
	    "\"X@odata.type\":\"Edm.Double\",\"X\":\"NaN\","
	    "\"Name\":\"x\",\"Flag\":false}";
	struct ecw_entity *e = from_json(body);
	assert_str(ecw_entity_pk(e), "p");
	assert_str(ecw_entity_rk(e), "r");
	assert_str(ecw_entity_etag(e), "W/\"datetime'2026-08-19T10%3A00%3A00.1234567Z'\"");
	assert_str(ecw_entity_timestamp(e), "2026-08-19T10:00:00.1234567Z");
	/* Metadata and Timestamp are not properties. */
	assert_null(ecw_entity_get(e, "Timestamp"));
	assert_null(ecw_entity_get(e, "odata.etag"));
	assert_null(ecw_entity_get(e, "odata.metadata"));
	assert_null(ecw_entity_get(e, "L@odata.type"));
	assert_null(ecw_entity_get(e, "PartitionKey"));
	assert_int_equal(ecw_entity_count(e), 13);

	assert_true(prop(e, "D", ECW_EDM_DOUBLE)->v.d == 50000.0);
	assert_int_equal(prop(e, "I", ECW_EDM_INT32)->v.i32, 5);
	assert_int_equal(prop(e, "Neg", ECW_EDM_INT32)->v.i32, -7);
	assert_true(prop(e, "Big", ECW_EDM_DOUBLE)->v.d == 3000000000.0);
	assert_true(prop(e, "E", ECW_EDM_DOUBLE)->v.d == 1000.0);
	assert_true(prop(e, "F", ECW_EDM_DOUBLE)->v.d == 0.25);
	assert_true(prop(e, "L", ECW_EDM_INT64)->v.i64 == 9007199254740993LL);
	assert_string_equal(prop(e, "G", ECW_EDM_GUID)->v.s, "c9da6455-213d-42c9-9a79-3e9149a57833");
	const struct ecw_prop *bin = prop(e, "Bin", ECW_EDM_BINARY);
	assert_int_equal(bin->len, 4);
	assert_memory_equal(bin->v.bin, "\x00\x01\x00\xff", 4);
	assert_string_equal(prop(e, "When", ECW_EDM_DATETIME)->v.s, "2026-08-19T10:00:00.5000000Z");
	assert_true(isnan(prop(e, "X", ECW_EDM_DOUBLE)->v.d));
	assert_string_equal(prop(e, "Name", ECW_EDM_STRING)->v.s, "x");
	assert_false(prop(e, "Flag", ECW_EDM_BOOLEAN)->v.b);

	/* Written back, the unannotated double is now annotated and stays a double. */
	json_object *j;
	char *s = to_json(e, &j);
	assert_str(jannot(j, "D"), "Edm.Double");
	assert_str(jannot(j, "Big"), "Edm.Double");
	assert_null(jfield(j, "odata.etag"));
	assert_null(jfield(j, "odata.metadata"));
	assert_null(jfield(j, "Timestamp"));
	struct ecw_entity *back = from_json(s);
	assert_true(ecw_entity_equal(e, back));
	assert_true(prop(back, "D", ECW_EDM_DOUBLE)->v.d == 50000.0);
	ecw_entity_free(back);
	free(s);
	json_object_put(j);
	ecw_entity_free(e);
}

static void test_entity__from_json_rejects_garbage(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "",
	    "not json",
	    "[1,2]",
	    "{\"PartitionKey\":\"p\",",
	    "{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"L@odata.type\":\"Edm.Int64\",\"L\":\"12x\"}",
	    "{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"B@odata.type\":\"Edm.Binary\",\"B\":\"!!\"}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ecw_entity *e = NULL;
		int err = ecw_entity_from_json(&e, bad[i], strlen(bad[i]));
		if (err >= 0)
			fail_msg("ecw_entity_from_json accepted %s", bad[i]);
		ecw_entity_free(e);
	}
	/* Found by fuzz_entity_json: a NUL byte after the object passed for
	 * trailing whitespace (strchr finds the terminator); whitespace does. */
	static const char nul[] = "{\"PartitionKey\":\"p\",\"RowKey\":\"r\"}\0";
	struct ecw_entity *e = NULL;
	assert_int_equal(ecw_entity_from_json(&e, nul, sizeof(nul) - 1), ECW_EINVALID);
	assert_null(e);
	static const char ws[] = "{\"PartitionKey\":\"p\",\"RowKey\":\"r\"} \r\n\t";
	assert_int_equal(ecw_entity_from_json(&e, ws, sizeof(ws) - 1), 0);
	ecw_entity_free(e);
}

static void test_entity__json_parse_error(void **state)
{
	(void)state;
	static const char body[] =
	    "{\"odata.error\":{\"code\":\"ResourceNotFound\",\"message\":{\"lang\":\"en-US\","
	    "\"value\":\"The specified resource does not exist.\\nRequestId:abc\"}}}";
	char code[64], msg[256];
	ecw_jsonparse_error(code, sizeof(code), msg, sizeof(msg), body, strlen(body));
	assert_string_equal(code, "ResourceNotFound");
	assert_true(str_starts(msg, "The specified resource does not exist."));

	ecw_jsonparse_error(code, sizeof(code), msg, sizeof(msg), "garbage", 7);
	assert_string_equal(code, "");
	assert_string_equal(msg, "");

	/* Truncated to the caps, always terminated. */
	char small[9];
	memset(small, 'Z', sizeof(small));
	char tiny[5];
	ecw_jsonparse_error(small, 8, tiny, sizeof(tiny), body, strlen(body));
	assert_string_equal(small, "Resourc");
	assert_int_equal(small[8], 'Z');
	assert_string_equal(tiny, "The ");
}

/* ---- validation ------------------------------------------------------------ */

static void test_entity__invalid_property_names(void **state)
{
	(void)state;
	char long_name[300];
	memset(long_name, 'n', 256);
	long_name[256] = '\0';
	const char *const bad[] = {"",       "1abc",    "a-b",          "a b",    "a.b",      "x@odata.type",
	                           "@odata", long_name, "PartitionKey", "RowKey", "Timestamp"};
	struct ecw_entity *e = new_entity("p", "r");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (ecw_entity_set_int32(e, bad[i], 1) != ECW_EINVALID)
			fail_msg("property name \"%.40s\" accepted", bad[i]);
		if (ecw_entity_set_string(e, bad[i], "v", 1) != ECW_EINVALID)
			fail_msg("property name \"%.40s\" accepted for a string", bad[i]);
	}
	assert_int_equal(ecw_entity_count(e), 0);
	long_name[255] = '\0';
	assert_int_equal(ecw_entity_set_int32(e, long_name, 1), 0);
	assert_int_equal(ecw_entity_set_int32(e, "_x", 1), 0);
	assert_int_equal(ecw_entity_set_int32(e, "a1_B2", 1), 0);
	assert_int_equal(ecw_entity_count(e), 3);
	ecw_entity_free(e);
}

static void test_entity__invalid_utf8_string(void **state)
{
	(void)state;
	struct ecw_entity *e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_string(e, "S", "\xff", 1), ECW_EINVALID);
	assert_int_equal(ecw_entity_set_string(e, "S", "ab\xc3", 3), ECW_EINVALID);
	assert_int_equal(ecw_entity_set_string(e, "S", "\xc0\xaf", 2), ECW_EINVALID);
	/* Only len bytes are looked at: the valid prefix of a longer string. */
	assert_int_equal(ecw_entity_set_string(e, "S", "ok\xff", 2), 0);
	assert_string_equal(prop(e, "S", ECW_EDM_STRING)->v.s, "ok");
	ecw_entity_free(e);
}

static void test_entity__invalid_keys(void **state)
{
	(void)state;
	struct ecw_entity *e = NULL;
	assert_int_equal(ecw_entity_new(&e, "a/b", "r"), ECW_EINVALID);
	assert_null(e);
	assert_int_equal(ecw_entity_new(&e, "p", "a#b"), ECW_EINVALID);
	assert_null(e);
	assert_int_equal(ecw_entity_new(&e, "\xff", "r"), ECW_EINVALID);
	assert_null(e);
	e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_keys(e, "p2", "a?b"), ECW_EINVALID);
	assert_str(ecw_entity_pk(e), "p");
	assert_str(ecw_entity_rk(e), "r");
	assert_int_equal(ecw_entity_set_keys(e, "p2", "r2"), 0);
	assert_str(ecw_entity_pk(e), "p2");
	assert_str(ecw_entity_rk(e), "r2");
	ecw_entity_free(e);
}

static void test_entity__set_replaces_and_remove(void **state)
{
	(void)state;
	struct ecw_entity *e = new_entity("p", "r");
	assert_int_equal(ecw_entity_set_int32(e, "V", 1), 0);
	assert_int_equal(ecw_entity_set_string(e, "V", "one", 3), 0);
	assert_int_equal(ecw_entity_count(e), 1);
	assert_string_equal(prop(e, "V", ECW_EDM_STRING)->v.s, "one");
	assert_true(ecw_entity_remove(e, "V"));
	assert_false(ecw_entity_remove(e, "V"));
	assert_null(ecw_entity_get(e, "V"));
	assert_int_equal(ecw_entity_count(e), 0);
	ecw_entity_free(e);
	ecw_entity_free(NULL);
}

static void test_entity__equal(void **state)
{
	(void)state;
	struct ecw_entity *a = new_entity("p", "r");
	struct ecw_entity *b = new_entity("p", "r");
	assert_true(ecw_entity_equal(a, b));
	assert_int_equal(ecw_entity_set_int32(a, "V", 5), 0);
	assert_false(ecw_entity_equal(a, b));
	/* Same number, other type. */
	assert_int_equal(ecw_entity_set_int64(b, "V", 5), 0);
	assert_false(ecw_entity_equal(a, b));
	assert_int_equal(ecw_entity_set_double(b, "V", 5.0), 0);
	assert_false(ecw_entity_equal(a, b));
	assert_int_equal(ecw_entity_set_int32(b, "V", 5), 0);
	assert_true(ecw_entity_equal(a, b));
	/* NaN equals NaN (bitwise). */
	assert_int_equal(ecw_entity_set_double(a, "N", NAN), 0);
	assert_int_equal(ecw_entity_set_double(b, "N", NAN), 0);
	assert_true(ecw_entity_equal(a, b));
	/* Binary compares its bytes, zeros included. */
	assert_int_equal(ecw_entity_set_binary(a, "Bin", "\x00\x01", 2), 0);
	assert_int_equal(ecw_entity_set_binary(b, "Bin", "\x00\x02", 2), 0);
	assert_false(ecw_entity_equal(a, b));
	assert_int_equal(ecw_entity_set_binary(b, "Bin", "\x00\x01", 2), 0);
	assert_true(ecw_entity_equal(a, b));
	/* ETags are ignored, keys are not. */
	assert_int_equal(ecw_entity_set_etag(a, "W/\"x\""), 0);
	assert_str(ecw_entity_etag(a), "W/\"x\"");
	assert_true(ecw_entity_equal(a, b));
	assert_int_equal(ecw_entity_set_keys(b, "p", "r2"), 0);
	assert_false(ecw_entity_equal(a, b));
	ecw_entity_free(a);
	ecw_entity_free(b);
}

static void test_entity__edm_names(void **state)
{
	(void)state;
	assert_str(ecw_entity_edm_name(ECW_EDM_STRING), "Edm.String");
	assert_str(ecw_entity_edm_name(ECW_EDM_INT32), "Edm.Int32");
	assert_str(ecw_entity_edm_name(ECW_EDM_INT64), "Edm.Int64");
	assert_str(ecw_entity_edm_name(ECW_EDM_DOUBLE), "Edm.Double");
	assert_str(ecw_entity_edm_name(ECW_EDM_BOOLEAN), "Edm.Boolean");
	assert_str(ecw_entity_edm_name(ECW_EDM_DATETIME), "Edm.DateTime");
	assert_str(ecw_entity_edm_name(ECW_EDM_GUID), "Edm.Guid");
	assert_str(ecw_entity_edm_name(ECW_EDM_BINARY), "Edm.Binary");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_entity__keys_in_json),
	    cmocka_unit_test(test_entity__string),
	    cmocka_unit_test(test_entity__int32),
	    cmocka_unit_test(test_entity__int64),
	    cmocka_unit_test(test_entity__double_integral_stays_double),
	    cmocka_unit_test(test_entity__double_exact),
	    cmocka_unit_test(test_entity__double_special),
	    cmocka_unit_test(test_entity__boolean),
	    cmocka_unit_test(test_entity__datetime),
	    cmocka_unit_test(test_entity__datetime_invalid),
	    cmocka_unit_test(test_entity__guid),
	    cmocka_unit_test(test_entity__binary_with_zero_bytes),
	    cmocka_unit_test(test_entity__all_types_round_trip),
	    cmocka_unit_test(test_entity__string_escapes),
	    cmocka_unit_test(test_entity__from_service_response),
	    cmocka_unit_test(test_entity__from_json_rejects_garbage),
	    cmocka_unit_test(test_entity__json_parse_error),
	    cmocka_unit_test(test_entity__invalid_property_names),
	    cmocka_unit_test(test_entity__invalid_utf8_string),
	    cmocka_unit_test(test_entity__invalid_keys),
	    cmocka_unit_test(test_entity__set_replaces_and_remove),
	    cmocka_unit_test(test_entity__equal),
	    cmocka_unit_test(test_entity__edm_names),
	};
	return cmocka_run_group_tests_name("entity", tests, NULL, NULL);
}
