/* SPDX-License-Identifier: MIT */
/* entity.c - typed entities and their JSON form.
 *
 * Reading: json-c parses; a property's type comes from its "@odata.type"
 * annotation, else from the JSON token: string, boolean, or a number that is
 * Int32 when written as an integer and Double when written with '.', 'e' or
 * 'E' (the service writes a Double 50000 as 50000.0 and never annotates
 * finite doubles). Writing: by hand, on one line, annotating every type JSON
 * cannot carry (Int64, Double, DateTime, Guid, Binary), with doubles in the
 * shortest form that reads back bit for bit. */
#include <errno.h>
#include <float.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_codec.h"
#include "entity.h"
#include "jsonparse.h"

/* Allocations: the two keys share one block (pk points to it, rk into it),
 * and each property's name and value bytes (a string's with its NUL, a
 * binary's) share one block, which name points to: the value follows the
 * name's NUL. An entity read and copied costs a block a property, not two. */
struct ecw_entity {
	char *pk, *rk;
	char *etag, *timestamp;
	struct ecw_prop *props; /* each name's block owned */
	size_t n, cap;
};

static const char *const edm_names[] = {
	"Edm.String",  "Edm.Int32",    "Edm.Int64", "Edm.Double",
	"Edm.Boolean", "Edm.DateTime", "Edm.Guid",  "Edm.Binary",
};

const char *ecw_entity_edm_name(enum ecw_edm t)
{
	return (unsigned)t < sizeof(edm_names) / sizeof(edm_names[0]) ? edm_names[t] : "Edm.Unknown";
}

/* ---- keys and names ---------------------------------------------------------- */

int ecw_entity_key_check(const char *key, const char *what)
{
	size_t n, k;
	uint32_t cp;

	if (!key)
		return ecw_error_set(ECW_EINVALID, "%s is missing", what);
	n = strlen(key);
	if (n > ECW_KEY_MAX)
		return ecw_error_set(ECW_EINVALID, "%s is %zu bytes, the limit is %d", what, n, ECW_KEY_MAX);
	for (size_t i = 0; i < n; i += k) {
		if (!(k = ecw_utf8_decode(key + i, n - i, &cp)))
			return ecw_error_set(ECW_EINVALID, "%s is not valid UTF-8 (byte %zu)", what, i);
		if (cp == '/' || cp == '\\' || cp == '#' || cp == '?')
			return ecw_error_set(ECW_EINVALID,
					     "%s contains '%c', which the service forbids in keys", what,
					     (char)cp);
		if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
			return ecw_error_set(ECW_EINVALID, "%s contains control character U+%04X at byte %zu",
					     what, (unsigned)cp, i);
	}
	return 0;
}

static bool reserved_name(const char *name)
{
	return strcmp(name, "PartitionKey") == 0 || strcmp(name, "RowKey") == 0 ||
	       strcmp(name, "Timestamp") == 0;
}

/* C#-identifier-like: a letter or '_' first, then letters, digits or '_';
 * non-ASCII letters are accepted as valid UTF-8. At most 255 characters. */
static int check_name(const char *name)
{
	size_t n = name ? strlen(name) : 0, k, chars = 0;
	uint32_t cp;

	if (n == 0)
		return ecw_error_set(ECW_EINVALID, "property name is empty");
	if (reserved_name(name))
		return ecw_error_set(ECW_EINVALID, "'%s' is a system property, not a custom one", name);
	for (size_t i = 0; i < n; i += k, chars++) {
		if ((unsigned char)name[i] < 0x80)
			k = 1, cp = (unsigned char)name[i];
		else if (!(k = ecw_utf8_decode(name + i, n - i, &cp)))
			return ecw_error_set(ECW_EINVALID, "property name is not valid UTF-8");
		if (cp < 0x80 && !(cp == '_' || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') ||
				   (i > 0 && cp >= '0' && cp <= '9')))
			return ecw_error_set(
				ECW_EINVALID,
				"property name '%.64s' must be letters, digits and '_', not starting with a digit",
				name);
	}
	if (chars > 255)
		return ecw_error_set(ECW_EINVALID, "property name '%.32s...' is longer than 255 characters",
				     name);
	return 0;
}

static int check_utf8(const char *s, size_t n, const char *name)
{
	uint32_t cp;
	size_t k;

	for (size_t i = 0; i < n; i += k) {
		if ((unsigned char)s[i] < 0x80)
			k = 1; /* most text is ASCII: no need to decode it */
		else if (!(k = ecw_utf8_decode(s + i, n - i, &cp)))
			return ecw_error_set(ECW_EINVALID, "property '%s' is not valid UTF-8 (byte %zu)",
					     name, i);
	}
	return 0;
}

/* "YYYY-MM-DDThh:mm:ss[.f{1,7}]Z" -> the same with exactly 7 digits. */
static int normalize_datetime(char out[29], const char *s, const char *name)
{
	const char *p = s;
	size_t frac = 0;
	int mo, d, h, mi, sec;

	if (!s || strlen(s) < 20)
		goto bad;
	for (int i = 0; i < 19; i++)
		if ((i == 4 || i == 7)     ? s[i] != '-'
		    : i == 10              ? s[i] != 'T'
		    : (i == 13 || i == 16) ? s[i] != ':'
					   : (s[i] < '0' || s[i] > '9'))
			goto bad;
	/* All digits where digits belong (just checked): read by position. */
	mo = (s[5] - '0') * 10 + (s[6] - '0');
	d = (s[8] - '0') * 10 + (s[9] - '0');
	h = (s[11] - '0') * 10 + (s[12] - '0');
	mi = (s[14] - '0') * 10 + (s[15] - '0');
	sec = (s[17] - '0') * 10 + (s[18] - '0');
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59)
		goto bad;
	p = s + 19;
	memcpy(out, s, 19);
	out[19] = '.';
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			if (frac == 7)
				goto bad;
			out[20 + frac++] = *p;
		}
		if (frac == 0)
			goto bad;
	}
	for (; frac < 7; frac++)
		out[20 + frac] = '0';
	if (strcmp(p, "Z") != 0)
		goto bad;
	out[27] = 'Z';
	out[28] = '\0';
	return 0;
bad:
	return ecw_error_set(ECW_EINVALID,
			     "property '%s': DateTime must be UTC ISO 8601 like 2026-08-19T10:00:00.1234567Z",
			     name);
}

static int check_guid(const char *s, const char *name)
{
	if (!s || strlen(s) != 36)
		goto bad;
	for (int i = 0; i < 36; i++) {
		char c = s[i];
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (c != '-')
				goto bad;
		} else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
			goto bad;
		}
	}
	return 0;
bad:
	return ecw_error_set(ECW_EINVALID, "property '%s': not a GUID (8-4-4-4-12 hex digits)", name);
}

/* ---- the bag -------------------------------------------------------------------- */

/* The value's bytes live in the name's block (struct ecw_entity). */
static void prop_dispose(struct ecw_prop *p)
{
	free((char *)p->name);
}

void ecw_entity_free(struct ecw_entity *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++)
		prop_dispose(&e->props[i]);
	free(e->props);
	free(e->pk); /* rk's block too */
	free(e->etag);
	free(e->timestamp);
	free(e);
}

int ecw_entity_set_keys(struct ecw_entity *e, const char *pk, const char *rk)
{
	size_t pn, rn;
	char *p;
	int err;

	if ((err = ecw_entity_key_check(pk, "PartitionKey")) < 0 ||
	    (err = ecw_entity_key_check(rk, "RowKey")) < 0)
		return err;
	pn = strlen(pk) + 1;
	rn = strlen(rk) + 1;
	if (!(p = malloc(pn + rn)))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	memcpy(p, pk, pn);
	memcpy(p + pn, rk, rn);
	free(e->pk); /* after the copy: pk or rk may be e's own */
	e->pk = p;
	e->rk = p + pn;
	return 0;
}

int ecw_entity_new(struct ecw_entity **out, const char *pk, const char *rk)
{
	struct ecw_entity *e = calloc(1, sizeof(*e));
	int err;

	*out = NULL;
	if (!e)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	if ((err = ecw_entity_set_keys(e, pk, rk)) < 0) {
		ecw_entity_free(e);
		return err;
	}
	*out = e;
	return 0;
}

const char *ecw_entity_pk(const struct ecw_entity *e)
{
	return e->pk;
}
const char *ecw_entity_rk(const struct ecw_entity *e)
{
	return e->rk;
}
const char *ecw_entity_etag(const struct ecw_entity *e)
{
	return e->etag;
}
const char *ecw_entity_timestamp(const struct ecw_entity *e)
{
	return e->timestamp;
}

static int set_owned_string(char **slot, const char *v)
{
	char *copy = v ? strdup(v) : NULL;

	if (v && !copy)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	free(*slot);
	*slot = copy;
	return 0;
}

int ecw_entity_set_etag(struct ecw_entity *e, const char *etag)
{
	return set_owned_string(&e->etag, etag);
}

static struct ecw_prop *find(const struct ecw_entity *e, const char *name)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->props[i].name, name) == 0)
			return &e->props[i];
	return NULL;
}

const struct ecw_prop *ecw_entity_get(const struct ecw_entity *e, const char *name)
{
	return find(e, name);
}

size_t ecw_entity_count(const struct ecw_entity *e)
{
	return e->n;
}

const struct ecw_prop *ecw_entity_at(const struct ecw_entity *e, size_t i)
{
	return i < e->n ? &e->props[i] : NULL;
}

bool ecw_entity_remove(struct ecw_entity *e, const char *name)
{
	struct ecw_prop *p = find(e, name);

	if (!p)
		return false;
	prop_dispose(p);
	memmove(p, p + 1, (size_t)(e->props + e->n - p - 1) * sizeof(*p));
	e->n--;
	return true;
}

static bool is_text(enum ecw_edm t)
{
	return t == ECW_EDM_STRING || t == ECW_EDM_DATETIME || t == ECW_EDM_GUID;
}

/* v's name and value bytes copied into one block (struct ecw_entity); a
 * text value's bytes are v's s, a binary's its bin, both len long. */
static int prop_make(struct ecw_prop *dst, const char *name, const struct ecw_prop *v)
{
	bool text = is_text(v->type), bytes = text || v->type == ECW_EDM_BINARY;
	size_t nn = strlen(name) + 1;
	char *block = malloc(nn + (bytes ? v->len + 1 : 0));

	if (!block)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	memcpy(block, name, nn);
	*dst = *v;
	dst->name = block;
	if (bytes) {
		char *value = block + nn;
		if (v->len)
			memcpy(value, text ? v->v.s : (const char *)v->v.bin, v->len);
		value[v->len] = '\0';
		if (text)
			dst->v.s = value;
		else
			dst->v.bin = (const unsigned char *)value;
	}
	return 0;
}

/* Adds the property or replaces it; v's bytes are copied (they may be the
 * replaced property's own). */
static int put(struct ecw_entity *e, const char *name, struct ecw_prop v)
{
	struct ecw_prop made, *slot;
	int err;

	if ((err = check_name(name)) < 0)
		return err;
	if (!(slot = find(e, name)) && e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 8;
		struct ecw_prop *p = realloc(e->props, cap * sizeof(*p));
		if (!p)
			return ecw_error_set(ECW_ENOMEM, "out of memory");
		e->props = p;
		e->cap = cap;
	}
	if ((err = prop_make(&made, name, &v)) < 0)
		return err;
	if (slot)
		prop_dispose(slot);
	else
		slot = &e->props[e->n++];
	*slot = made;
	return 0;
}

static int put_text(struct ecw_entity *e, const char *name, enum ecw_edm type, const char *s, size_t len)
{
	return put(e, name, (struct ecw_prop){.type = type, .v.s = s, .len = len});
}

int ecw_entity_set_string(struct ecw_entity *e, const char *name, const char *s, size_t len)
{
	int err;

	if (!s)
		return ecw_error_set(ECW_EINVALID, "property '%s': NULL string", name);
	if (memchr(s, '\0', len))
		return ecw_error_set(ECW_EINVALID, "property '%s': string contains a NUL byte", name);
	if ((err = check_utf8(s, len, name)) < 0)
		return err;
	return put_text(e, name, ECW_EDM_STRING, s, len);
}

int ecw_entity_set_int32(struct ecw_entity *e, const char *name, int32_t v)
{
	return put(e, name, (struct ecw_prop){.type = ECW_EDM_INT32, .v.i32 = v});
}

int ecw_entity_set_int64(struct ecw_entity *e, const char *name, int64_t v)
{
	return put(e, name, (struct ecw_prop){.type = ECW_EDM_INT64, .v.i64 = v});
}

int ecw_entity_set_double(struct ecw_entity *e, const char *name, double v)
{
	return put(e, name, (struct ecw_prop){.type = ECW_EDM_DOUBLE, .v.d = v});
}

int ecw_entity_set_bool(struct ecw_entity *e, const char *name, bool v)
{
	return put(e, name, (struct ecw_prop){.type = ECW_EDM_BOOLEAN, .v.b = v});
}

int ecw_entity_set_datetime(struct ecw_entity *e, const char *name, const char *iso)
{
	char norm[29];
	int err;

	if ((err = normalize_datetime(norm, iso, name)) < 0)
		return err;
	return put_text(e, name, ECW_EDM_DATETIME, norm, 28);
}

int ecw_entity_set_guid(struct ecw_entity *e, const char *name, const char *guid)
{
	int err;

	if ((err = check_guid(guid, name)) < 0)
		return err;
	return put_text(e, name, ECW_EDM_GUID, guid, 36);
}

int ecw_entity_set_binary(struct ecw_entity *e, const char *name, const void *p, size_t len)
{
	return put(e, name, (struct ecw_prop){.type = ECW_EDM_BINARY, .v.bin = p, .len = len});
}

int ecw_entity_set_prop(struct ecw_entity *e, const struct ecw_prop *p)
{
	switch (p->type) {
	case ECW_EDM_STRING: return ecw_entity_set_string(e, p->name, p->v.s, p->len);
	case ECW_EDM_INT32: return ecw_entity_set_int32(e, p->name, p->v.i32);
	case ECW_EDM_INT64: return ecw_entity_set_int64(e, p->name, p->v.i64);
	case ECW_EDM_DOUBLE: return ecw_entity_set_double(e, p->name, p->v.d);
	case ECW_EDM_BOOLEAN: return ecw_entity_set_bool(e, p->name, p->v.b);
	case ECW_EDM_DATETIME: return ecw_entity_set_datetime(e, p->name, p->v.s);
	case ECW_EDM_GUID: return ecw_entity_set_guid(e, p->name, p->v.s);
	case ECW_EDM_BINARY: return ecw_entity_set_binary(e, p->name, p->v.bin, p->len);
	}
	return ecw_error_set(ECW_EINVALID, "property '%s': unknown type", p->name);
}

int ecw_entity_clone(struct ecw_entity **out, const struct ecw_entity *e)
{
	struct ecw_entity *c;
	int err;

	*out = NULL;
	if ((err = ecw_entity_new(&c, e->pk, e->rk)) < 0)
		return err;
	if (e->n && !(c->props = malloc(e->n * sizeof(*c->props))))
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
	else
		c->cap = e->n;
	for (size_t i = 0; i < e->n && err == 0; i++)
		/* Not checked again: e's names and values passed the setters. */
		if ((err = prop_make(&c->props[i], e->props[i].name, &e->props[i])) == 0)
			c->n++;
	if (err == 0 && (err = set_owned_string(&c->etag, e->etag)) == 0)
		err = set_owned_string(&c->timestamp, e->timestamp);
	if (err < 0) {
		ecw_entity_free(c);
		return err;
	}
	*out = c;
	return 0;
}

bool ecw_entity_prop_equal(const struct ecw_prop *a, const struct ecw_prop *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case ECW_EDM_INT32: return a->v.i32 == b->v.i32;
	case ECW_EDM_INT64: return a->v.i64 == b->v.i64;
	case ECW_EDM_DOUBLE:
		return memcmp(&a->v.d, &b->v.d, sizeof(double)) == 0 || (isnan(a->v.d) && isnan(b->v.d));
	case ECW_EDM_BOOLEAN: return a->v.b == b->v.b;
	case ECW_EDM_BINARY: return a->len == b->len && memcmp(a->v.bin, b->v.bin, a->len) == 0;
	default: return a->len == b->len && memcmp(a->v.s, b->v.s, a->len) == 0;
	}
}

bool ecw_entity_equal(const struct ecw_entity *a, const struct ecw_entity *b)
{
	if (strcmp(a->pk, b->pk) != 0 || strcmp(a->rk, b->rk) != 0 || a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct ecw_prop *p = find(b, a->props[i].name);
		if (!p || !ecw_entity_prop_equal(&a->props[i], p))
			return false;
	}
	return true;
}

/* ---- writing JSON ------------------------------------------------------------------ */

/* The shortest %.Ng that strtod reads back to the same bits, always with a
 * '.' or exponent so it also reads as a Double without its annotation. Any
 * decimal of up to 15 digits (DBL_DIG) comes back from a double unchanged,
 * so when a shorter one reads back, %.15g (which drops trailing zeros)
 * prints those same digits: the search starts at 15. */
static int json_double(struct ecw_buf *out, double d)
{
	char buf[40];

	if (isnan(d))
		return ecw_buf_adds(out, "\"NaN\"");
	if (isinf(d))
		return ecw_buf_adds(out, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
	for (int prec = DBL_DIG; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, d);
		if (strtod(buf, NULL) == d && (d != 0 || signbit(d) == signbit(strtod(buf, NULL))))
			break;
	}
	if (!strpbrk(buf, ".eE"))
		strncat(buf, ".0", sizeof(buf) - strlen(buf) - 1);
	return ecw_buf_adds(out, buf);
}

int ecw_entity_to_json(struct ecw_buf *out, const struct ecw_entity *e)
{
	int err;

	if ((err = ecw_buf_adds(out, "{\"PartitionKey\":")) < 0 ||
	    (err = ecw_json_quote(out, e->pk, strlen(e->pk))) < 0 ||
	    (err = ecw_buf_adds(out, ",\"RowKey\":")) < 0 ||
	    (err = ecw_json_quote(out, e->rk, strlen(e->rk))) < 0)
		return err;
	return ecw_entity_props_to_json(out, e);
}

int ecw_entity_props_to_json(struct ecw_buf *out, const struct ecw_entity *e)
{
	struct ecw_buf b64;
	int err = 0;

	ecw_buf_init(&b64, 0);
	for (size_t i = 0; i < e->n; i++) {
		const struct ecw_prop *p = &e->props[i];
		bool annotate =
			p->type != ECW_EDM_STRING && p->type != ECW_EDM_INT32 && p->type != ECW_EDM_BOOLEAN;

		if ((err = ecw_buf_addc(out, ',')) < 0)
			goto done;
		if (annotate) {
			/* "Name@odata.type":"Edm.X", */
			size_t n = strlen(p->name);
			if ((err = ecw_json_quote(out, p->name, n)) < 0)
				goto done;
			out->len--; /* reopen the closing quote */
			if ((err = ecw_buf_cat(out, "@odata.type\":\"", ecw_entity_edm_name(p->type), "\",",
					       NULL)) < 0)
				goto done;
		}
		if ((err = ecw_json_quote(out, p->name, strlen(p->name))) < 0 ||
		    (err = ecw_buf_addc(out, ':')) < 0)
			goto done;
		switch (p->type) {
		case ECW_EDM_STRING:
		case ECW_EDM_DATETIME:
		case ECW_EDM_GUID: err = ecw_json_quote(out, p->v.s, p->len); break;
		case ECW_EDM_INT32: err = ecw_buf_addi(out, p->v.i32); break;
		case ECW_EDM_INT64:
			if ((err = ecw_buf_addc(out, '"')) == 0 && (err = ecw_buf_addi(out, p->v.i64)) == 0)
				err = ecw_buf_addc(out, '"');
			break;
		case ECW_EDM_DOUBLE: err = json_double(out, p->v.d); break;
		case ECW_EDM_BOOLEAN: err = ecw_buf_adds(out, p->v.b ? "true" : "false"); break;
		case ECW_EDM_BINARY:
			ecw_buf_reset(&b64);
			if ((err = ecw_base64_encode(&b64, p->v.bin, p->len)) == 0)
				err = ecw_json_quote(out, ecw_buf_cstr(&b64), b64.len);
			break;
		}
		if (err < 0)
			goto done;
	}
	err = ecw_buf_addc(out, '}');
done:
	ecw_buf_dispose(&b64);
	return err;
}

/* ---- reading JSON ------------------------------------------------------------------- */

static int parse_int64(int64_t *out, const char *s, const char *name)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (!*s || *end || errno == ERANGE || end == s || (*s != '-' && (*s < '0' || *s > '9')))
		return ecw_error_set(ECW_EINVALID, "property '%s': Edm.Int64 value is not a 64-bit integer",
				     name);
	*out = v;
	return 0;
}

/* A JSON value as read_value sees it, from either reader: json-c's tree
 * (read_prop) or the flat reader (flat_parse). s is NUL-terminated. */
enum jkind { J_STRING, J_INT, J_DOUBLE, J_BOOL, J_NULL, J_OTHER };

struct jval {
	enum jkind kind;
	const char *s; /* J_STRING */
	size_t n;
	int64_t i; /* J_INT */
	double d;  /* J_INT (as a double) and J_DOUBLE */
	bool b;    /* J_BOOL */
};

static int read_double(double *out, const struct jval *v, const char *name)
{
	if (v->kind == J_STRING) {
		const char *s = v->s;
		char *end;
		if (strcmp(s, "NaN") == 0)
			*out = NAN;
		else if (strcmp(s, "Infinity") == 0 || strcmp(s, "INF") == 0)
			*out = INFINITY;
		else if (strcmp(s, "-Infinity") == 0 || strcmp(s, "-INF") == 0)
			*out = -INFINITY;
		else if ((*out = strtod(s, &end)), end == s || *end)
			return ecw_error_set(ECW_EINVALID, "property '%s': Edm.Double value is not a number",
					     name);
		return 0;
	}
	if (v->kind == J_DOUBLE || v->kind == J_INT) {
		*out = v->d;
		return 0;
	}
	return ecw_error_set(ECW_EINVALID, "property '%s': Edm.Double value is not a number", name);
}

/* One property of the entity from its value and its "@odata.type" (NULL:
 * none). Both readers end here, so they agree on what a value means. */
static int read_value(struct ecw_entity *e, const char *name, const struct jval *v, const char *type)
{
	enum jkind jt = v->kind;
	struct ecw_buf bin;
	double d = 0;
	int err;

	if (type) {
		if (strcmp(type, "Edm.String") == 0 && jt == J_STRING)
			return ecw_entity_set_string(e, name, v->s, v->n);
		if (strcmp(type, "Edm.Int32") == 0 && jt == J_INT) {
			if (v->i < INT32_MIN || v->i > INT32_MAX)
				return ecw_error_set(ECW_EINVALID, "property '%s': Edm.Int32 out of range",
						     name);
			return ecw_entity_set_int32(e, name, (int32_t)v->i);
		}
		if (strcmp(type, "Edm.Int64") == 0) {
			int64_t i64 = 0;
			if (jt == J_INT)
				return ecw_entity_set_int64(e, name, v->i);
			if (jt != J_STRING)
				goto mismatch;
			if ((err = parse_int64(&i64, v->s, name)) < 0)
				return err;
			return ecw_entity_set_int64(e, name, i64);
		}
		if (strcmp(type, "Edm.Double") == 0) {
			if ((err = read_double(&d, v, name)) < 0)
				return err;
			return ecw_entity_set_double(e, name, d);
		}
		if (strcmp(type, "Edm.Boolean") == 0 && jt == J_BOOL)
			return ecw_entity_set_bool(e, name, v->b);
		if (strcmp(type, "Edm.DateTime") == 0 && jt == J_STRING)
			return ecw_entity_set_datetime(e, name, v->s);
		if (strcmp(type, "Edm.Guid") == 0 && jt == J_STRING)
			return ecw_entity_set_guid(e, name, v->s);
		if (strcmp(type, "Edm.Binary") == 0 && jt == J_STRING) {
			ecw_buf_init(&bin, 0);
			if ((err = ecw_base64_decode(&bin, v->s, strlen(v->s))) < 0)
				err = ecw_error_set(ECW_EINVALID,
						    "property '%s': Edm.Binary value is not base64", name);
			else
				err = ecw_entity_set_binary(e, name, bin.ptr, bin.len);
			ecw_buf_dispose(&bin);
			return err;
		}
		goto mismatch;
	}
	switch (jt) {
	case J_STRING: return ecw_entity_set_string(e, name, v->s, v->n);
	case J_BOOL: return ecw_entity_set_bool(e, name, v->b);
	case J_INT:
		if (v->i >= INT32_MIN && v->i <= INT32_MAX)
			return ecw_entity_set_int32(e, name, (int32_t)v->i);
		return ecw_entity_set_double(e, name, v->d);
	case J_DOUBLE: return ecw_entity_set_double(e, name, v->d);
	case J_NULL: return 0; /* a null property is an absent one */
	default:
		return ecw_error_set(ECW_EINVALID, "property '%s': objects and arrays are not table values",
				     name);
	}
mismatch:
	return ecw_error_set(ECW_EINVALID, "property '%s': value does not match its type %s", name, type);
}

static int read_prop(struct ecw_entity *e, const char *name, struct json_object *jv, const char *type)
{
	struct jval v = {.kind = J_OTHER};

	switch (json_object_get_type(jv)) {
	case json_type_string:
		v.kind = J_STRING;
		v.s = json_object_get_string(jv);
		v.n = (size_t)json_object_get_string_len(jv);
		break;
	case json_type_int:
		v.kind = J_INT;
		v.i = json_object_get_int64(jv);
		v.d = json_object_get_double(jv);
		break;
	case json_type_double:
		v.kind = J_DOUBLE;
		v.d = json_object_get_double(jv);
		break;
	case json_type_boolean:
		v.kind = J_BOOL;
		v.b = json_object_get_boolean(jv);
		break;
	case json_type_null: v.kind = J_NULL; break;
	default: break;
	}
	return read_value(e, name, &v, type);
}

/* Whether a member of an entity's JSON is one of its properties: not a key,
 * the Timestamp, an annotation or the service's metadata. Both readers ask. */
static bool is_property(const char *key, size_t klen)
{
	return !reserved_name(key) && !memchr(key, '@', klen) && strncmp(key, "odata.", 6) != 0;
}

#define ANNOTATION "@odata.type"
/* A name the setters take has at most 255 characters of up to 4 bytes; a
 * longer key has no annotation looked up (and fails in its setter). */
#define ANNOTATION_MAX (4 * 255 + sizeof(ANNOTATION))

/* "<key>@odata.type" in ann (ANNOTATION_MAX bytes): its length, or 0 when
 * the key is too long to have one. */
static size_t annotation_name(char *ann, const char *key, size_t klen)
{
	if (klen >= 4 * 255)
		return 0;
	memcpy(ann, key, klen);
	memcpy(ann + klen, ANNOTATION, sizeof(ANNOTATION));
	return klen + sizeof(ANNOTATION) - 1;
}

static int from_object(struct ecw_entity **out, struct json_object *obj)
{
	struct json_object *pk, *rk, *v;
	struct ecw_entity *e = NULL;
	int err;

	*out = NULL;
	if (!json_object_is_type(obj, json_type_object) ||
	    !json_object_object_get_ex(obj, "PartitionKey", &pk) ||
	    !json_object_is_type(pk, json_type_string) || !json_object_object_get_ex(obj, "RowKey", &rk) ||
	    !json_object_is_type(rk, json_type_string))
		return ecw_error_set(ECW_EINVALID, "entity JSON needs string PartitionKey and RowKey");
	if ((err = ecw_entity_new(&e, json_object_get_string(pk), json_object_get_string(rk))) < 0)
		return err;
	if (json_object_object_get_ex(obj, "odata.etag", &v) &&
	    (err = set_owned_string(&e->etag, json_object_get_string(v))) < 0)
		goto fail;
	if (json_object_object_get_ex(obj, "Timestamp", &v) &&
	    (err = set_owned_string(&e->timestamp, json_object_get_string(v))) < 0)
		goto fail;
	json_object_object_foreach(obj, key, val) {
		struct json_object *t;
		const char *type = NULL;
		char ann[ANNOTATION_MAX];
		size_t klen = strlen(key);

		if (!is_property(key, klen))
			continue;
		if (annotation_name(ann, key, klen) && json_object_object_get_ex(obj, ann, &t))
			type = json_object_get_string(t);
		if ((err = read_prop(e, key, val, type)) < 0)
			goto fail;
	}
	*out = e;
	return 0;
fail:
	ecw_entity_free(e);
	return err;
}

/* ---- the flat reader ---------------------------------------------------------------
 *
 * An entity as the service sends it is one flat JSON object of strings,
 * numbers, booleans and nulls. json-c builds a tree of it (a hash table, a
 * copy of every name and string, a locale duplicated for every parse):
 * about 45,000 instructions an entity, a fifth of the worker's instructions
 * at concurrency 64 (callgrind). flat_parse reads that common form in a copy
 * of the text, in place, and gives up (FLAT_NO) on anything else: a \u
 * escape, a control character or invalid UTF-8 in a string, a number other
 * than a plain integer of up to 18 digits or a plain decimal, a nested value,
 * a name given twice, more than FLAT_MAX members, trailing text, and any
 * error of a property. ecw_entity_from_json then reads the text with json-c
 * as before, so every input gets exactly the entity, or the error, it always
 * got; fuzz_entity_json holds the two readers to that on every input. */

#define FLAT_MAX 128
#define FLAT_NO 1

struct flat_member {
	const char *name; /* NUL-terminated in the copy */
	size_t name_len;
	struct jval v;
};

static bool json_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A string at *p (just past its opening quote), decoded in place (a decoded
 * string is never longer) and NUL-terminated. Two-character escapes only
 * (an ETag has \"): a \\u escape, a control character or invalid UTF-8 is
 * left to json-c. */
static bool flat_string(char **p, const char *end, const char **s, size_t *n)
{
	char *q = *p, *w;

	/* Up to the first escape nothing moves. */
	while (q < end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
		q++;
	for (w = q; q < end && *q != '"';) {
		if ((unsigned char)*q < 0x20)
			return false;
		if (*q != '\\') {
			*w++ = *q++;
			continue;
		}
		if (++q == end)
			return false;
		switch (*q++) {
		case '"': *w++ = '"'; break;
		case '\\': *w++ = '\\'; break;
		case '/': *w++ = '/'; break;
		case 'b': *w++ = '\b'; break;
		case 'f': *w++ = '\f'; break;
		case 'n': *w++ = '\n'; break;
		case 'r': *w++ = '\r'; break;
		case 't': *w++ = '\t'; break;
		default: return false;
		}
	}
	if (q == end || !ecw_utf8_valid(*p, (size_t)(w - *p)))
		return false;
	*s = *p;
	*n = (size_t)(w - *p);
	*w = '\0';
	*p = q + 1;
	return true;
}

/* A number in JSON's grammar: an integer of up to 18 digits (J_INT, exact in
 * an int64 and a double) or one with a fraction or exponent (J_DOUBLE, by
 * strtod as json-c reads it, finite and in range). */
static bool flat_number(char **p, const char *end, struct jval *v)
{
	char *q = *p, text[64];
	size_t digits = 0, n;
	bool is_int = true;

	if (q < end && *q == '-')
		q++;
	if (q < end && *q == '0') {
		q++;
		digits = 1;
	} else {
		for (; q < end && *q >= '0' && *q <= '9'; q++)
			digits++;
	}
	if (digits == 0)
		return false;
	if (q < end && *q == '.') {
		is_int = false;
		if (++q == end || *q < '0' || *q > '9')
			return false;
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < end && (*q == 'e' || *q == 'E')) {
		is_int = false;
		if (++q < end && (*q == '+' || *q == '-'))
			q++;
		if (q == end || *q < '0' || *q > '9')
			return false;
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	}
	if ((n = (size_t)(q - *p)) >= sizeof(text) || (is_int && digits > 18))
		return false;
	memcpy(text, *p, n);
	text[n] = '\0';
	errno = 0;
	if (is_int) {
		v->kind = J_INT;
		v->i = strtoll(text, NULL, 10);
		v->d = (double)v->i;
	} else {
		v->kind = J_DOUBLE;
		v->d = strtod(text, NULL);
		if (errno == ERANGE || !isfinite(v->d))
			return false;
	}
	*p = q;
	return true;
}

static bool flat_literal(char **p, const char *end, const char *word, size_t n)
{
	if ((size_t)(end - *p) < n || memcmp(*p, word, n) != 0)
		return false;
	*p += n;
	return true;
}

/* The members of the object in text (modified: strings are ended in place),
 * in their order. Returns how many, or -1 when the text is not of the flat
 * form. */
static int flat_members(struct flat_member *m, char *p, const char *end)
{
	int n = 0;

	while (p < end && json_ws(*p))
		p++;
	if (p == end || *p++ != '{')
		return -1;
	for (;;) {
		while (p < end && json_ws(*p))
			p++;
		if (n == FLAT_MAX || p == end || *p++ != '"' ||
		    !flat_string(&p, end, &m[n].name, &m[n].name_len))
			return -1;
		while (p < end && json_ws(*p))
			p++;
		if (p == end || *p++ != ':')
			return -1;
		while (p < end && json_ws(*p))
			p++;
		if (p == end)
			return -1;
		struct jval *v = &m[n].v;
		memset(v, 0, sizeof(*v));
		if (*p == '"') {
			p++;
			v->kind = J_STRING;
			if (!flat_string(&p, end, &v->s, &v->n))
				return -1;
		} else if (*p == '-' || (*p >= '0' && *p <= '9')) {
			if (!flat_number(&p, end, v))
				return -1;
		} else if (flat_literal(&p, end, "true", 4)) {
			v->kind = J_BOOL;
			v->b = true;
		} else if (flat_literal(&p, end, "false", 5)) {
			v->kind = J_BOOL;
		} else if (flat_literal(&p, end, "null", 4)) {
			v->kind = J_NULL;
		} else {
			return -1; /* an object or an array: json-c's path says what is wrong */
		}
		for (int k = 0; k < n; k++)
			if (m[k].name_len == m[n].name_len &&
			    memcmp(m[k].name, m[n].name, m[n].name_len) == 0)
				return -1; /* json-c keeps the last of a repeated name: its path does that */
		n++;
		while (p < end && json_ws(*p))
			p++;
		if (p == end)
			return -1;
		if (*p == '}')
			break;
		if (*p++ != ',')
			return -1;
	}
	for (p++; p < end; p++)
		if (!json_ws(*p))
			return -1;
	return n;
}

/* The member named name (NUL-terminated), or NULL. */
static const struct flat_member *flat_get(const struct flat_member *m, int n, const char *name, size_t len)
{
	for (int i = 0; i < n; i++)
		if (m[i].name_len == len && memcmp(m[i].name, name, len) == 0)
			return &m[i];
	return NULL;
}

/* from_object on the flat form. Returns 0, or FLAT_NO when json-c's path
 * must read it (not the flat form, or anything wrong with it). */
static int flat_parse(struct ecw_entity **out, const char *json, size_t len)
{
	struct flat_member m[FLAT_MAX];
	const struct flat_member *pk, *rk, *v;
	struct ecw_entity *e = NULL;
	char *copy;
	int n;

	*out = NULL;
	if (len > 1024 * 1024 || !(copy = malloc(len + 1)))
		return FLAT_NO;
	memcpy(copy, json, len);
	copy[len] = '\0';
	if ((n = flat_members(m, copy, copy + len)) < 0 || !(pk = flat_get(m, n, "PartitionKey", 12)) ||
	    pk->v.kind != J_STRING || !(rk = flat_get(m, n, "RowKey", 6)) || rk->v.kind != J_STRING ||
	    ecw_entity_new(&e, pk->v.s, rk->v.s) < 0)
		goto no;
	if ((v = flat_get(m, n, "odata.etag", 10)) &&
	    (v->v.kind != J_STRING || set_owned_string(&e->etag, v->v.s) < 0))
		goto no;
	if ((v = flat_get(m, n, "Timestamp", 9)) &&
	    (v->v.kind != J_STRING || set_owned_string(&e->timestamp, v->v.s) < 0))
		goto no;
	for (int i = 0; i < n; i++) {
		const char *key = m[i].name, *type = NULL;
		char ann[ANNOTATION_MAX];
		size_t klen = m[i].name_len, alen;

		if (!is_property(key, klen))
			continue;
		if ((alen = annotation_name(ann, key, klen)) && (v = flat_get(m, n, ann, alen))) {
			if (v->v.kind != J_STRING)
				goto no;
			type = v->v.s;
		}
		if (read_value(e, key, &m[i].v, type) < 0)
			goto no;
	}
	free(copy);
	*out = e;
	return 0;
no:
	ecw_entity_free(e);
	free(copy);
	ecw_error_clear();
	return FLAT_NO;
}

int ecw_entity_from_json(struct ecw_entity **out, const char *json, size_t len)
{
	struct json_object *obj;
	int err;

	if (flat_parse(out, json, len) == 0)
		return 0;
	obj = ecw_jsonparse_value(json, len);
	if (!obj)
		return ecw_error_set(ECW_EINVALID, "entity is not valid JSON");
	err = from_object(out, obj);
	json_object_put(obj);
	return err;
}

int ecw_entity_from_json_object(struct ecw_entity **out, struct json_object *obj)
{
	return from_object(out, obj);
}
