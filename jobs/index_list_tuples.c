/* SPDX-License-Identifier: MIT */
/* index_list_tuples.c - sorted sets of string tuples, the index lists' one
 * data structure (struct tuples, index_list_private.h): a list's keys
 * ([PartitionKey, RowKey] pairs), a ref's intents, and their JSON. It sits
 * below every other index-list file and calls none of them. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_codec.h"
#include "ecw_err.h"
#include "index_list_private.h"

/* ---- sorted sets of string tuples ---------------------------------------------------- */

/* struct tuples (index_list_private.h): a list's keys, a ref's intents. */

void ecw_index_list_tuples_init(struct tuples *t, int width)
{
	memset(t, 0, sizeof(*t));
	t->width = width;
}

void ecw_index_list_tuples_dispose(struct tuples *t)
{
	for (size_t i = 0; i < t->n; i++)
		for (int k = 0; k < t->width; k++)
			free(t->v[i].s[k]);
	free(t->v);
	ecw_index_list_tuples_init(t, t->width);
}

static int tup_cmp(const struct tup *a, const char *const *key, int width)
{
	for (int k = 0; k < width; k++) {
		int c = strcmp(a->s[k], key[k]);
		if (c)
			return c;
	}
	return 0;
}

/* True when key is in t; *pos is its index or where it would go. */
bool ecw_index_list_tuples_find(const struct tuples *t, const char *const *key, size_t *pos)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = tup_cmp(&t->v[mid], key, t->width);
		if (c == 0) {
			*pos = mid;
			return true;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*pos = lo;
	return false;
}

/* Adds a copy of key unless present. */
int ecw_index_list_tuples_add(struct tuples *t, const char *const *key)
{
	struct tup nt = {{NULL, NULL, NULL}};
	size_t pos;

	if (ecw_index_list_tuples_find(t, key, &pos))
		return 0;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		struct tup *v = realloc(t->v, cap * sizeof(*v));
		if (!v)
			return ecw_error_set(ECW_ENOMEM, "out of memory");
		t->v = v;
		t->cap = cap;
	}
	for (int k = 0; k < t->width; k++)
		if (!(nt.s[k] = strdup(key[k]))) {
			for (int j = 0; j < k; j++)
				free(nt.s[j]);
			return ecw_error_set(ECW_ENOMEM, "out of memory");
		}
	memmove(&t->v[pos + 1], &t->v[pos], (t->n - pos) * sizeof(*t->v));
	t->v[pos] = nt;
	t->n++;
	return 0;
}

void ecw_index_list_tuples_remove_at(struct tuples *t, size_t pos)
{
	for (int k = 0; k < t->width; k++)
		free(t->v[pos].s[k]);
	memmove(&t->v[pos], &t->v[pos + 1], (t->n - pos - 1) * sizeof(*t->v));
	t->n--;
}

int ecw_index_list_tuples_copy(struct tuples *out, const struct tuples *t)
{
	int err;

	ecw_index_list_tuples_init(out, t->width);
	for (size_t i = 0; i < t->n; i++)
		if ((err = ecw_index_list_tuples_add(out, (const char *const *)t->v[i].s)) < 0) {
			ecw_index_list_tuples_dispose(out);
			return err;
		}
	return 0;
}

/* Parses a JSON array of width-string arrays (what tuples_write wrote, or
 * any order and duplicates). what names the property in errors. */
int ecw_index_list_tuples_parse(struct tuples *out, const char *json, size_t len, int width, const char *what)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *arr = NULL;
	int err = 0;

	ecw_index_list_tuples_init(out, width);
	if (!tok)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	if (len > (size_t)0x7fffffff || !(arr = json_tokener_parse_ex(tok, json, (int)len)) ||
	    json_tokener_get_error(tok) != json_tokener_success ||
	    !json_object_is_type(arr, json_type_array)) {
		err = ecw_error_set(ECW_EINVALID, "%s is not a JSON array", what);
		goto done;
	}
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *item = json_object_array_get_idx(arr, i);
		const char *key[3] = {NULL, NULL, NULL};
		if (!json_object_is_type(item, json_type_array) ||
		    json_object_array_length(item) != (size_t)width) {
			err = ecw_error_set(ECW_EINVALID, "%s: item %zu is not an array of %d strings", what,
					    i, width);
			goto done;
		}
		for (int k = 0; k < width; k++) {
			struct json_object *s = json_object_array_get_idx(item, (size_t)k);
			if (!json_object_is_type(s, json_type_string) ||
			    strlen(json_object_get_string(s)) != (size_t)json_object_get_string_len(s)) {
				err = ecw_error_set(ECW_EINVALID,
						    "%s: item %zu is not an array of %d strings", what, i,
						    width);
				goto done;
			}
			key[k] = json_object_get_string(s);
		}
		if ((err = ecw_index_list_tuples_add(out, key)) < 0)
			goto done;
	}
done:
	if (err < 0)
		ecw_index_list_tuples_dispose(out);
	json_object_put(arr);
	json_tokener_free(tok);
	return err;
}

/* The compact JSON form: [["a","b"],["c","d"]]. */
int ecw_index_list_tuples_write(struct ecw_buf *out, const struct tuples *t)
{
	int err = ecw_buf_addc(out, '[');

	for (size_t i = 0; err == 0 && i < t->n; i++) {
		if (i && (err = ecw_buf_addc(out, ',')) < 0)
			break;
		err = ecw_buf_addc(out, '[');
		for (int k = 0; err == 0 && k < t->width; k++)
			if ((err = k ? ecw_buf_addc(out, ',') : 0) == 0)
				err = ecw_json_quote(out, t->v[i].s[k], strlen(t->v[i].s[k]));
		if (err == 0)
			err = ecw_buf_addc(out, ']');
	}
	return err ? err : ecw_buf_addc(out, ']');
}

/* How the service measures a String: UTF-16 code units. */
size_t ecw_index_list_tuples_utf16_units(const char *s, size_t n)
{
	size_t units = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c & 0xC0) != 0x80)
			units += c >= 0xF0 ? 2 : 1;
	}
	return units;
}
