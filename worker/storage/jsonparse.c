/* jsonparse.c - reading JSON with json-c (see jsonparse.h): one value, and
 * the table service's error bodies. */
#include <json-c/json.h>
#include <stdint.h>
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
