/* template.c - key and filter templates (see jobs_private.h). A template is
 * compiled once at configuration time into literal and field parts, so a bad
 * template is a configuration error, and rendering is a walk over parts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_private.h"

struct part {
	char *text;      /* literal text, or the property name */
	bool field;
	char fill;       /* 0: no padding */
	bool left;       /* pad on the left ('>') */
	int width;
};

struct ecw_template {
	char *source;
	struct part *parts;
	size_t n;
};

void ecw_template_free(struct ecw_template *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->parts[i].text);
	free(t->parts);
	free(t->source);
	free(t);
}

const char *ecw_template_text(const struct ecw_template *t)
{
	return t->source;
}

static int add_part(struct ecw_template *t, const char *s, size_t n, bool field)
{
	struct part *p = realloc(t->parts, (t->n + 1) * sizeof(*p));

	if (!p)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	t->parts = p;
	p = &t->parts[t->n];
	memset(p, 0, sizeof(*p));
	if (!(p->text = strndup(s, n)))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	p->field = field;
	t->n++;
	return 0;
}

/* "Name" or "Name:F>W" / "Name:F<W". */
static int parse_field(struct ecw_template *t, const char *s, size_t n, const char *what, size_t col)
{
	const char *colon = memchr(s, ':', n);
	size_t name_len = colon ? (size_t)(colon - s) : n;
	int err;

	if (name_len == 0)
		return ecw_error_set(ECW_EINVALID, "%s: empty {} at column %zu", what, col);
	for (size_t i = 0; i < name_len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i && c >= '0' && c <= '9') || c >= 0x80))
			/* Not quoted: a configured template may hold a value from
			 * the environment. */
			return ecw_error_set(ECW_EINVALID,
					     "%s: the name at column %zu is not a property name (letters, digits "
					     "and '_', not starting with a digit)",
					     what, col);
	}
	if ((err = add_part(t, s, name_len, true)) < 0)
		return err;
	if (colon) {
		const char *spec = colon + 1;
		size_t sn = n - name_len - 1;
		char *end;
		long w;
		if (sn < 3 || (spec[1] != '>' && spec[1] != '<'))
			return ecw_error_set(ECW_EINVALID,
					     "%s: format at column %zu must be FILL>WIDTH or FILL<WIDTH, like {Id:0>6}",
					     what, col);
		w = strtol(spec + 2, &end, 10);
		if (end != spec + sn || w < 1 || w > 255 || spec[2] < '0' || spec[2] > '9')
			return ecw_error_set(ECW_EINVALID, "%s: width at column %zu must be 1..255", what, col);
		t->parts[t->n - 1].fill = spec[0];
		t->parts[t->n - 1].left = spec[1] == '>';
		t->parts[t->n - 1].width = (int)w;
	}
	return 0;
}

int ecw_template_compile(struct ecw_template **out, const char *text, const char *what)
{
	struct ecw_template *t = calloc(1, sizeof(*t));
	struct ecw_buf lit;
	size_t i = 0, n = strlen(text);
	int err = 0;

	*out = NULL;
	ecw_buf_init(&lit, 0);
	if (!t || !(t->source = strdup(text))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	while (i < n && err == 0) {
		if (text[i] == '{' && i + 1 < n && text[i + 1] == '{') {
			err = ecw_buf_addc(&lit, '{');
			i += 2;
		} else if (text[i] == '}' && i + 1 < n && text[i + 1] == '}') {
			err = ecw_buf_addc(&lit, '}');
			i += 2;
		} else if (text[i] == '{') {
			const char *close = strchr(text + i + 1, '}');
			if (!close) {
				err = ecw_error_set(ECW_EINVALID, "%s: '{' at column %zu is never closed", what, i + 1);
				break;
			}
			if (lit.len && (err = add_part(t, lit.ptr, lit.len, false)) < 0)
				break;
			ecw_buf_reset(&lit);
			err = parse_field(t, text + i + 1, (size_t)(close - text - i - 1), what, i + 1);
			i = (size_t)(close - text) + 1;
		} else if (text[i] == '}') {
			err = ecw_error_set(ECW_EINVALID, "%s: '}' at column %zu has no '{' (write }} for a brace)",
					    what, i + 1);
		} else {
			err = ecw_buf_addc(&lit, text[i++]);
		}
	}
	if (err == 0 && lit.len)
		err = add_part(t, lit.ptr, lit.len, false);
	if (err == 0 && t->n == 0)
		err = ecw_error_set(ECW_EINVALID, "%s is empty", what);
done:
	ecw_buf_dispose(&lit);
	if (err < 0) {
		ecw_template_free(t);
		return err;
	}
	*out = t;
	return 0;
}

/* The text form of a property's value. */
static int value_text(struct ecw_buf *out, const struct ecw_prop *p)
{
	char num[40];

	switch (p->type) {
	case ECW_EDM_STRING:
	case ECW_EDM_DATETIME:
	case ECW_EDM_GUID:
		return ecw_buf_add(out, p->v.s, p->len);
	case ECW_EDM_INT32:
		return ecw_buf_printf(out, "%d", (int)p->v.i32);
	case ECW_EDM_INT64:
		return ecw_buf_printf(out, "%lld", (long long)p->v.i64);
	case ECW_EDM_BOOLEAN:
		return ecw_buf_adds(out, p->v.b ? "true" : "false");
	case ECW_EDM_DOUBLE:
		if (!isfinite(p->v.d))
			break;
		for (int prec = 1; prec <= 17; prec++) {
			snprintf(num, sizeof(num), "%.*g", prec, p->v.d);
			if (strtod(num, NULL) == p->v.d)
				break;
		}
		return ecw_buf_adds(out, num);
	case ECW_EDM_BINARY:
		break;
	}
	return ecw_error_set(ECW_EINVALID, "property '%s' (%s) has no text form for a key or filter", p->name,
			     ecw_edm_name(p->type));
}

int ecw_template_render(struct ecw_buf *out, const struct ecw_template *t, const struct ecw_entity *e,
			enum ecw_template_mode mode)
{
	struct ecw_buf v;
	int err = 0;

	ecw_buf_init(&v, 0);
	for (size_t i = 0; i < t->n && err == 0; i++) {
		const struct part *p = &t->parts[i];
		if (!p->field) {
			err = ecw_buf_adds(out, p->text);
			continue;
		}
		ecw_buf_reset(&v);
		if (strcmp(p->text, "PartitionKey") == 0) {
			err = ecw_buf_adds(&v, ecw_entity_pk(e));
		} else if (strcmp(p->text, "RowKey") == 0) {
			err = ecw_buf_adds(&v, ecw_entity_rk(e));
		} else {
			const struct ecw_prop *prop = ecw_entity_get(e, p->text);
			if (!prop) {
				err = ecw_error_set(ECW_EINVALID, "template '%s': the source entity has no property '%s'",
						    t->source, p->text);
				break;
			}
			err = value_text(&v, prop);
		}
		if (err < 0)
			break;
		/* Pad to width counting characters, not bytes. */
		size_t chars = 0;
		for (size_t k = 0; k < v.len; k++)
			chars += ((unsigned char)v.ptr[k] & 0xC0) != 0x80;
		if (p->fill && p->left)
			for (size_t k = chars; k < (size_t)p->width && err == 0; k++)
				err = ecw_buf_addc(out, p->fill);
		for (size_t k = 0; k < v.len && err == 0; k++)
			err = mode == ECW_TEMPLATE_ODATA && v.ptr[k] == '\'' ? ecw_buf_adds(out, "''")
									       : ecw_buf_addc(out, v.ptr[k]);
		if (p->fill && !p->left)
			for (size_t k = chars; k < (size_t)p->width && err == 0; k++)
				err = ecw_buf_addc(out, p->fill);
	}
	ecw_buf_dispose(&v);
	return err;
}
