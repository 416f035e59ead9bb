/* SPDX-License-Identifier: MIT */
/* template_filter.c - a filter template inverted into the keys it pins
 * (ecw_template_filter_keys, jobs_private.h), from the compiled parts that
 * template.c makes (template_private.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_private.h"
#include "template_private.h"

/* ---- inverting a filter -------------------------------------------------------------------- */

/* The filter's text as the service will lex it, one item per literal
 * character or placeholder, then its tokens. Only what the inversion needs
 * is told apart: words, strings, placeholders as operands, parentheses. */
struct inv_item {
	char c;                   /* a literal character, or '\0' for a placeholder */
	const struct part *field; /* the placeholder */
};

enum inv_kind { INV_WORD, INV_STRING, INV_FIELD, INV_OPEN, INV_CLOSE, INV_OTHER };

struct inv_tok {
	enum inv_kind kind;
	size_t at, len;  /* INV_WORD: its characters, items[at..at+len) */
	const char *key; /* a string or operand that is exactly one unformatted
			  * {PartitionKey} or {RowKey}: which; else NULL */
	size_t match;    /* INV_OPEN: its INV_CLOSE */
};

struct inv {
	const struct ecw_template *t;
	struct inv_item *items;
	size_t nitems;
	struct inv_tok *toks;
	size_t ntoks;
	struct ecw_template_keys *out;
};

/* The key a placeholder stands for unchanged, NULL for anything else. */
static const char *inv_key(const struct part *p)
{
	if (p->now || p->fmt != FMT_NONE)
		return NULL;
	if (strcmp(p->text, "PartitionKey") == 0 || strcmp(p->text, "RowKey") == 0)
		return p->text;
	return NULL;
}

static bool inv_is(const struct inv_item *it, char c)
{
	return !it->field && it->c == c;
}

static bool inv_word_char(const struct inv_item *it)
{
	return !it->field && !ecw_template_odata_space(it->c) && it->c != '(' && it->c != ')' &&
	       it->c != '\'';
}

/* A '...' literal starting at items[i] (the quote); returns the index after
 * it, sets *key when its whole content is one key. */
static size_t inv_string(const struct inv *v, size_t i, const char **key)
{
	size_t j = i + 1, content = 0;
	const struct part *only = NULL;

	while (j < v->nitems) {
		if (inv_is(&v->items[j], '\'')) {
			if (j + 1 < v->nitems && inv_is(&v->items[j + 1], '\'')) {
				content++; /* '' is a quote inside */
				only = NULL;
				j += 2;
				continue;
			}
			j++;
			break;
		}
		only = content == 0 ? v->items[j].field : NULL;
		content++;
		j++;
	}
	*key = content == 1 && only ? inv_key(only) : NULL;
	return j;
}

static void inv_add(struct inv *v, enum inv_kind kind, size_t at, size_t len, const char *key)
{
	struct inv_tok *t = &v->toks[v->ntoks++];

	memset(t, 0, sizeof(*t));
	t->kind = kind;
	t->at = at;
	t->len = len;
	t->key = key;
}

/* items -> toks (at most one token per item), parentheses matched. */
static int inv_lex(struct inv *v)
{
	size_t *stack = calloc(v->nitems + 1, sizeof(*stack)), depth = 0;
	int err = 0;

	if (!stack)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	for (size_t i = 0; i < v->nitems && err == 0;) {
		const struct inv_item *it = &v->items[i];
		const char *key = NULL;
		size_t j;
		if (it->field) {
			inv_add(v, INV_FIELD, i, 1, inv_key(it->field));
			i++;
		} else if (ecw_template_odata_space(it->c)) {
			i++;
		} else if (it->c == '(') {
			stack[depth++] = v->ntoks;
			inv_add(v, INV_OPEN, i++, 1, NULL);
		} else if (it->c == ')') {
			if (depth == 0)
				err = ecw_error_set(ECW_EINVALID, "filter: a ')' closes nothing");
			else
				v->toks[stack[--depth]].match = v->ntoks;
			inv_add(v, INV_CLOSE, i++, 1, NULL);
		} else if (it->c == '\'') {
			j = inv_string(v, i, &key);
			inv_add(v, INV_STRING, i, j - i, key);
			i = j;
		} else {
			for (j = i; j < v->nitems && inv_word_char(&v->items[j]); j++)
				;
			if (j < v->nitems && inv_is(&v->items[j], '\'')) {
				/* datetime'...', guid'...', X'...': a typed literal */
				j = inv_string(v, j, &key);
				inv_add(v, INV_OTHER, i, j - i, NULL);
			} else {
				inv_add(v, INV_WORD, i, j - i, NULL);
			}
			i = j;
		}
	}
	if (err == 0 && depth)
		err = ecw_error_set(ECW_EINVALID, "filter: a '(' is never closed");
	free(stack);
	return err;
}

/* Token k is the word w (ci: in any case). */
static bool inv_word(const struct inv *v, size_t k, const char *w, bool ci)
{
	const struct inv_tok *t = &v->toks[k];

	if (t->kind != INV_WORD || t->len != strlen(w))
		return false;
	for (size_t i = 0; i < t->len; i++) {
		char c = v->items[t->at + i].c;
		if (ci && c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != w[i])
			return false;
	}
	return true;
}

/* Token k as a property name into name (cap bytes); false when it is none
 * (a keyword, a number, too long). */
static bool inv_prop(char *name, size_t cap, const struct inv *v, size_t k)
{
	static const char *const keywords[] = {"and", "or", "not", "eq",   "ne",    "gt",
					       "ge",  "lt", "le",  "true", "false", "null"};
	const struct inv_tok *t = &v->toks[k];

	if (t->kind != INV_WORD || t->len >= cap)
		return false;
	for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++)
		if (inv_word(v, k, keywords[i], true))
			return false;
	for (size_t i = 0; i < t->len; i++) {
		unsigned char c = (unsigned char)v->items[t->at + i].c;
		if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (i && c >= '0' && c <= '9')))
			return false;
		name[i] = (char)c;
	}
	name[t->len] = '\0';
	return true;
}

static void inv_conjuncts(struct inv *v, size_t lo, size_t hi);

/* One term of the top-level `and`: Prop eq KEY, KEY eq Prop, or a
 * parenthesised `and` of more terms. */
static void inv_term(struct inv *v, size_t lo, size_t hi)
{
	char name[256];
	const char *key = NULL;

	if (hi - lo == 3 && inv_word(v, lo + 1, "eq", false)) {
		if (v->toks[lo + 2].key && inv_prop(name, sizeof(name), v, lo))
			key = v->toks[lo + 2].key;
		else if (v->toks[lo].key && inv_prop(name, sizeof(name), v, lo + 2))
			key = v->toks[lo].key;
		if (key) {
			char *slot = key[0] == 'P' ? v->out->pk : v->out->rk;
			if (!slot[0])
				snprintf(slot, sizeof(v->out->pk), "%s", name);
		}
	} else if (hi - lo >= 2 && v->toks[lo].kind == INV_OPEN && v->toks[lo].match == hi - 1) {
		inv_conjuncts(v, lo, hi);
	}
}

/* toks[lo..hi): the enclosing parentheses stripped; an `or` at its top binds
 * nothing; otherwise each term between its top-level `and`s. */
static void inv_conjuncts(struct inv *v, size_t lo, size_t hi)
{
	size_t depth = 0, start;

	while (hi - lo >= 2 && v->toks[lo].kind == INV_OPEN && v->toks[lo].match == hi - 1) {
		lo++;
		hi--;
	}
	for (size_t k = lo; k < hi; k++) {
		depth += v->toks[k].kind == INV_OPEN;
		depth -= v->toks[k].kind == INV_CLOSE;
		if (depth == 0 && inv_word(v, k, "or", true))
			return;
	}
	start = lo;
	for (size_t k = lo; k <= hi; k++) {
		if (k < hi) {
			depth += v->toks[k].kind == INV_OPEN;
			depth -= v->toks[k].kind == INV_CLOSE;
		}
		if (k == hi || (depth == 0 && inv_word(v, k, "and", false))) {
			if (k > start)
				inv_term(v, start, k);
			start = k + 1;
		}
	}
}

int ecw_template_filter_keys(struct ecw_template_keys *out, const struct ecw_template *t)
{
	struct inv v = {.t = t, .out = out};
	bool uses_pk = false, uses_rk = false;
	size_t n = 0;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (!t->filter)
		return ecw_error_set(ECW_EINVALID, "template '%s' was not compiled as a filter", t->source);
	for (size_t i = 0; i < t->n; i++) {
		const struct part *p = &t->parts[i];
		n += p->field ? 1 : strlen(p->text);
		if (!p->field)
			continue;
		if (p->now || (strcmp(p->text, "PartitionKey") != 0 && strcmp(p->text, "RowKey") != 0))
			return ecw_error_set(ECW_EINVALID,
					     "filter: it uses more than the keys, so the keys alone do not "
					     "render it");
		uses_pk |= p->text[0] == 'P';
		uses_rk |= p->text[0] == 'R';
	}
	if (!(v.items = calloc(n + 1, sizeof(*v.items))) || !(v.toks = calloc(n + 1, sizeof(*v.toks)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < t->n; i++) {
		const struct part *p = &t->parts[i];
		if (p->field)
			v.items[v.nitems++].field = p;
		else
			for (const char *c = p->text; *c; c++)
				v.items[v.nitems++].c = *c;
	}
	if ((err = inv_lex(&v)) < 0)
		goto done;
	inv_conjuncts(&v, 0, v.ntoks);
	if ((uses_pk && !out->pk[0]) || (uses_rk && !out->rk[0]) || (!out->pk[0] && !out->rk[0]))
		err = ecw_error_set(ECW_EINVALID,
				    "filter: %s is not bound by a top-level `and` term `Prop eq {%s}` (or "
				    "'{%s}')",
				    uses_pk && !out->pk[0] ? "{PartitionKey}" : "{RowKey}",
				    uses_pk && !out->pk[0] ? "PartitionKey" : "RowKey",
				    uses_pk && !out->pk[0] ? "PartitionKey" : "RowKey");
done:
	if (err < 0)
		memset(out, 0, sizeof(*out));
	free(v.items);
	free(v.toks);
	return err;
}
