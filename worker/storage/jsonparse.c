/* SPDX-License-Identifier: MIT */
/* jsonparse.c - reading JSON with json-c (see jsonparse.h): one value, and
 * the table service's error bodies. */
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "jsonparse.h"

struct json_object *ecw_jsonparse_value(const char *s, size_t len)
{
	struct json_tokener *tok = json_tokener_new_ex(64);
	struct json_object *obj;

	if (!tok || len > INT32_MAX) {
		json_tokener_free(tok);
		return NULL;
	}
	obj = json_tokener_parse_ex(tok, s, (int)len);
	if (obj && tok->char_offset != (int)len) {
		/* Trailing text after the value (other than whitespace) is an error. */
		for (size_t i = (size_t)tok->char_offset; i < len; i++)
			if (!memchr(" \t\r\n", s[i], 4)) { /* strchr would take NUL for whitespace */
				json_object_put(obj);
				obj = NULL;
				break;
			}
	}
	json_tokener_free(tok);
	return obj;
}

void ecw_jsonparse_error(char *code, size_t code_cap, char *msg, size_t msg_cap, const char *body, size_t len)
{
	struct json_object *obj = ecw_jsonparse_value(body, len), *err, *v, *m;

	code[0] = msg[0] = '\0';
	if (obj && json_object_object_get_ex(obj, "odata.error", &err)) {
		if (json_object_object_get_ex(err, "code", &v))
			snprintf(code, code_cap, "%s", json_object_get_string(v));
		if (json_object_object_get_ex(err, "message", &m)) {
			if (json_object_is_type(m, json_type_object) &&
			    json_object_object_get_ex(m, "value", &v))
				snprintf(msg, msg_cap, "%s", json_object_get_string(v));
			else if (json_object_is_type(m, json_type_string))
				snprintf(msg, msg_cap, "%s", json_object_get_string(m));
		}
	}
	json_object_put(obj);
}

/* ---- the common form of a query page (ecw_jsonparse_object_array) ---- */

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* A plain string at p (its opening quote): printable ASCII, escapes \" \\ \/
 * only. Past its closing quote, or NULL. */
static const char *plain_string(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '"')
			return p + 1;
		if (*p == '\\') {
			if (++p == end || (*p != '"' && *p != '\\' && *p != '/'))
				return NULL;
		} else if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) {
			return NULL;
		}
	}
	return NULL;
}

/* Past the object at p (its '{'): brackets counted outside strings, a
 * backslash in a string skipping the next byte. NULL when it does not end. */
static const char *object_end(const char *p, const char *end)
{
	int depth = 0;
	bool in_string = false;

	for (; p < end; p++) {
		if (in_string) {
			if (*p == '\\')
				p++;
			else if (*p == '"')
				in_string = false;
		} else if (*p == '"') {
			in_string = true;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if ((*p == '}' || *p == ']') && --depth == 0) {
			return p + 1;
		}
	}
	return NULL;
}

/* The array at p (its '['): each element an object, into v. */
static const char *object_spans(struct ecw_json_span **v, size_t *n, size_t *cap, const char *p,
				const char *end, int *err)
{
	p = skip_ws(p + 1, end);
	if (p < end && *p == ']')
		return p + 1;
	for (;;) {
		const char *q;
		if (p == end || *p != '{' || !(q = object_end(p, end)))
			return NULL;
		if (*n == *cap) {
			size_t ncap = *cap ? *cap * 2 : 16;
			struct ecw_json_span *nv = realloc(*v, ncap * sizeof(*nv));
			if (!nv) {
				*err = ECW_ENOMEM;
				return NULL;
			}
			*v = nv;
			*cap = ncap;
		}
		(*v)[(*n)++] = (struct ecw_json_span){p, (size_t)(q - p)};
		p = skip_ws(q, end);
		if (p < end && *p == ']')
			return p + 1;
		if (p == end || *p != ',')
			return NULL;
		p = skip_ws(p + 1, end);
	}
}

int ecw_jsonparse_object_array(struct ecw_json_span **spans, size_t *n, const char *s, size_t len,
			       const char *name)
{
	const char *p = skip_ws(s, s + len), *end = s + len;
	size_t cap = 0, name_len = strlen(name);
	bool seen = false;
	int err = 0;

	*spans = NULL;
	*n = 0;
	if (p == end || *p != '{')
		goto no;
	for (p = skip_ws(p + 1, end); p < end && *p != '}';) {
		const char *key = p, *key_end;
		if (*p != '"' || !(key_end = plain_string(p, end)))
			goto no;
		p = skip_ws(key_end, end);
		if (p == end || *p != ':')
			goto no;
		p = skip_ws(p + 1, end);
		if ((size_t)(key_end - key) == name_len + 2 && memcmp(key + 1, name, name_len) == 0) {
			if (seen || p == end || *p != '[' ||
			    !(p = object_spans(spans, n, &cap, p, end, &err)))
				goto no;
			seen = true;
		} else if (p == end || *p != '"' || !(p = plain_string(p, end))) {
			goto no;
		}
		p = skip_ws(p, end);
		if (p < end && *p == ',')
			p = skip_ws(p + 1, end);
		else if (p == end || *p != '}')
			goto no;
		else
			break;
		if (p < end && *p == '}')
			goto no; /* a trailing comma */
	}
	if (p == end || !seen || skip_ws(p + 1, end) != end)
		goto no;
	return 0;
no:
	free(*spans);
	*spans = NULL;
	*n = 0;
	return err < 0 ? err : 1;
}
