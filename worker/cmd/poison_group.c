/* SPDX-License-Identifier: MIT */
/* poison_group.c - group keys and the count per group (see poison_group.h). */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_codec.h"
#include "poison_group.h"

static const char *const dim_names[] = {
	[ECW_GROUP_REASON] = "reason",
	[ECW_GROUP_JOB] = "job",
	[ECW_GROUP_ERROR] = "error",
	[ECW_GROUP_STATUS] = "status",
};

#define NDIMS (sizeof(dim_names) / sizeof(dim_names[0]))

int ecw_poison_group_dim_parse(enum ecw_group_dim *out, const char *name)
{
	for (size_t d = ECW_GROUP_REASON; d < NDIMS; d++)
		if (strcmp(name, dim_names[d]) == 0) {
			*out = (enum ecw_group_dim)d;
			return 0;
		}
	return ecw_error_set(ECW_EINVALID, "--group-by must be reason, job, error or status, not '%.100s'",
			     name);
}

int ecw_poison_group_key_dim(enum ecw_group_dim *out, const char *key)
{
	for (size_t d = ECW_GROUP_REASON; d < NDIMS; d++) {
		size_t n = strlen(dim_names[d]);
		if (strncmp(key, dim_names[d], n) == 0 && key[n] == ':') {
			*out = (enum ecw_group_dim)d;
			return 0;
		}
	}
	return ecw_error_set(ECW_EINVALID,
			     "--group '%.100s': a group key starts with reason:, job:, error: or status:, "
			     "as `poison list --group-by` prints it",
			     key);
}

/* ---- normalising an error --------------------------------------------------- */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_word(char c)
{
	return is_alnum(c) || c == '_' || c == '-';
}

/* Where the quote opened at s[i] closes, or len when it does not. */
static size_t closing_quote(const char *s, size_t len, size_t i)
{
	const char *end = memchr(s + i + 1, s[i], len - i - 1);

	return end ? (size_t)(end - s) : len;
}

int ecw_poison_group_normalise_error(struct ecw_buf *out, const char *s, size_t len)
{
	size_t i = 0;
	int err = 0;

	while (i < len && err == 0) {
		char c = s[i];
		size_t j;

		if ((c == '"' || (c == '\'' && (i == 0 || !is_alnum(s[i - 1])))) &&
		    (j = closing_quote(s, len, i)) < len) {
			char q[3] = {c, '*', c};
			err = ecw_buf_add(out, q, sizeof(q));
			i = j + 1;
		} else if (is_word(c)) {
			bool digit = false;
			for (j = i; j < len && is_word(s[j]); j++)
				digit = digit || is_digit(s[j]);
			err = digit ? ecw_buf_addc(out, '#') : ecw_buf_add(out, s + i, j - i);
			i = j;
		} else {
			err = ecw_buf_addc(out, c);
			i++;
		}
	}
	return err;
}

/* ---- keys ------------------------------------------------------------------- */

/* The raw value of v in dim, into raw (NULL: absent). */
static int raw_value(struct ecw_buf *raw, enum ecw_group_dim dim, const struct ecw_poison_view *v)
{
	switch (dim) {
	case ECW_GROUP_REASON: return v->reason ? ecw_buf_adds(raw, v->reason) : 0;
	case ECW_GROUP_JOB: return v->job ? ecw_buf_adds(raw, v->job) : 0;
	case ECW_GROUP_ERROR:
		return v->error ? ecw_poison_group_normalise_error(raw, v->error, strlen(v->error)) : 0;
	case ECW_GROUP_STATUS:
		if (v->http_status > 0)
			return ecw_buf_printf(raw, "%d%s%s", v->http_status, v->error_code ? " " : "",
					      v->error_code ? v->error_code : "");
		return v->error_code ? ecw_buf_adds(raw, v->error_code) : 0;
	case ECW_GROUP_NONE: break;
	}
	return 0;
}

/* The escaped value cut to ECW_GROUP_VALUE_MAX bytes on a UTF-8 boundary,
 * "..." included, appended to out. */
static int add_capped(struct ecw_buf *out, const struct ecw_buf *safe)
{
	size_t n = safe->len;

	if (n <= ECW_GROUP_VALUE_MAX)
		return ecw_buf_add(out, safe->ptr, n);
	n = ECW_GROUP_VALUE_MAX - 3;
	while (n > 0 && ((unsigned char)safe->ptr[n] & 0xC0) == 0x80)
		n--;
	return ecw_buf_add(out, safe->ptr, n) < 0 ? ECW_ENOMEM : ecw_buf_adds(out, "...");
}

int ecw_poison_group_key(struct ecw_buf *out, enum ecw_group_dim dim, const struct ecw_poison_view *v)
{
	struct ecw_buf raw, safe;
	int err;

	ecw_buf_reset(out);
	ecw_buf_init(&raw, 0);
	ecw_buf_init(&safe, 0);
	if ((err = ecw_buf_cat(out, dim_names[dim], ":", NULL)) < 0)
		goto done;
	if (!v->envelope) {
		err = ecw_buf_adds(out, ECW_GROUP_NOT_ENVELOPE);
		goto done;
	}
	if ((err = raw_value(&raw, dim, v)) < 0)
		goto done;
	if (!raw.ptr) {
		err = ecw_buf_adds(out, ECW_GROUP_ABSENT);
		goto done;
	}
	if ((err = ecw_term_escape(&safe, raw.ptr, raw.len)) == 0)
		err = add_capped(out, &safe);
done:
	ecw_buf_dispose(&safe);
	ecw_buf_dispose(&raw);
	return err;
}

bool ecw_poison_group_match(enum ecw_group_dim dim, const char *key, const struct ecw_poison_view *v)
{
	struct ecw_buf b;
	bool match;

	ecw_buf_init(&b, 0);
	match = ecw_poison_group_key(&b, dim, v) == 0 && strcmp(ecw_buf_cstr(&b), key) == 0;
	ecw_buf_dispose(&b);
	return match;
}

/* ---- counting ----------------------------------------------------------------- */

struct ecw_group_table {
	struct ecw_group *v; /* room for max groups, taken at once */
	size_t n, max;
	struct json_object *index; /* key -> position in v */
	struct ecw_group other;
	bool sorted;
};

struct ecw_group_table *ecw_poison_group_table_new(size_t max_groups)
{
	struct ecw_group_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->max = max_groups;
	if (!(t->index = json_object_new_object()) ||
	    !(t->v = calloc(max_groups ? max_groups : 1, sizeof(*t->v)))) {
		ecw_poison_group_table_free(t);
		return NULL;
	}
	return t;
}

void ecw_poison_group_table_free(struct ecw_group_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].key);
	free(t->v);
	json_object_put(t->index);
	free(t);
}

static void count(struct ecw_group *g, time_t when)
{
	g->count++;
	if (when && (!g->oldest || when < g->oldest))
		g->oldest = when;
	if (when && when > g->newest)
		g->newest = when;
}

/* A new group for key at the end of t->v (t->n < t->max). */
static int add_group(struct ecw_group **out, struct ecw_group_table *t, const char *key)
{
	struct json_object *pos;

	if (!(pos = json_object_new_int64((int64_t)t->n)))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	*out = &t->v[t->n];
	memset(*out, 0, sizeof(**out));
	if (!((*out)->key = strdup(key)) || json_object_object_add(t->index, key, pos) < 0) {
		free((*out)->key);
		json_object_put(pos);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	t->n++;
	return 0;
}

int ecw_poison_group_table_add(struct ecw_group_table *t, const char *key, time_t when)
{
	struct json_object *pos;
	struct ecw_group *g = &t->other;
	int err;

	if (t->sorted)
		return ecw_error_set(ECW_EINVALID, "the group table is sorted already");
	if (json_object_object_get_ex(t->index, key, &pos))
		g = &t->v[json_object_get_int64(pos)];
	else if (t->n < t->max && (err = add_group(&g, t, key)) < 0)
		return err;
	count(g, when);
	return 0;
}

static int by_count_then_key(const void *a, const void *b)
{
	const struct ecw_group *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->key, y->key);
}

const struct ecw_group *ecw_poison_group_table_sorted(size_t *n, struct ecw_group_table *t)
{
	if (!t->sorted && t->n > 1)
		qsort(t->v, t->n, sizeof(*t->v), by_count_then_key);
	t->sorted = true;
	*n = t->n;
	return t->v;
}

const struct ecw_group *ecw_poison_group_table_other(const struct ecw_group_table *t)
{
	return &t->other;
}
