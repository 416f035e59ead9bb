/* SPDX-License-Identifier: MIT */
/* node.c - the YAML tree and its typed readers (see ecw_node.h). libyaml's
 * events are turned into an ecw_node tree once, here (the only file that sees
 * libyaml); every plain or quoted value has its ${VAR} / ${VAR:-default} /
 * ${file:PATH} references expanded on the way (keys never are). The readers collect every
 * problem as "FILE:LINE:COL: message" (node_error.c) rather than stopping at the first; the
 * schemas (worker/config/config.c, the job types, schedules, migrations) use them.
 *
 * Secrets: a value may come from the environment (a connection string, a
 * SAS), so no message here ever quotes a scalar's value. Messages name the
 * key (keys are never expanded), the variable, and the position instead.
 * The expansion itself, secrets from files included, is node_expand.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "ecw_buf.h"
#include "ecw_log.h"
#include "ecw_node.h"

#define MAX_DEPTH 64
#define PATH_MAX_BYTES 256
#define NAME_BYTES 320

#define SEC ((int64_t)1000)
#define MIN (60 * SEC)
#define HOUR (60 * MIN)

/* ---- the node tree ------------------------------------------------------ */

void ecw_node_free(struct ecw_node *n)
{
	if (!n)
		return;
	if (n->value) {
		/* A value may be a secret from the environment. */
		memset(n->value, 0, strlen(n->value));
		free(n->value);
	}
	if (n->source) {
		/* So may the text around a ${file:PATH}. */
		memset(n->source, 0, strlen(n->source));
		free(n->source);
	}
	for (size_t i = 0; i < n->n; i++) {
		if (n->keys)
			ecw_node_free(n->keys[i]);
		ecw_node_free(n->items[i]);
	}
	free(n->keys);
	free(n->items);
	free(n);
}

static struct ecw_node *node_new(enum ecw_node_kind kind, const yaml_mark_t *m, const char *file)
{
	struct ecw_node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->kind = kind;
	n->line = (int)m->line + 1;
	n->col = (int)m->column + 1;
	n->file = file;
	return n;
}

/* Appends (key, item) to a MAP, or item to a SEQ (key NULL); takes both. */
static int node_append(struct ecw_node *n, size_t *cap, struct ecw_node *key, struct ecw_node *item)
{
	if (n->n == *cap) {
		size_t c = *cap ? *cap * 2 : 4;
		struct ecw_node **items = realloc(n->items, c * sizeof(*items));
		if (!items)
			goto fail;
		n->items = items;
		if (n->kind == ECW_NODE_MAP) {
			struct ecw_node **keys = realloc(n->keys, c * sizeof(*keys));
			if (!keys)
				goto fail;
			n->keys = keys;
		}
		*cap = c;
	}
	if (n->kind == ECW_NODE_MAP)
		n->keys[n->n] = key;
	n->items[n->n++] = item;
	return 0;
fail:
	ecw_node_free(key);
	ecw_node_free(item);
	return ecw_error_set(ECW_ENOMEM, "out of memory");
}

bool ecw_node_is_null(const struct ecw_node *n)
{
	if (!n || n->kind != ECW_NODE_SCALAR || n->quoted || !n->value)
		return n == NULL;
	return n->value[0] == '\0' || strcmp(n->value, "~") == 0 || strcmp(n->value, "null") == 0 ||
	       strcmp(n->value, "Null") == 0 || strcmp(n->value, "NULL") == 0;
}

const char *ecw_node_kind_name(const struct ecw_node *n)
{
	switch (n->kind) {
	case ECW_NODE_MAP: return "a map";
	case ECW_NODE_SEQ: return "a list";
	default: return "a value";
	}
}
/* ---- building the tree from libyaml's events ----------------------------- */

struct builder {
	yaml_parser_t parser;
	const char *file;
	const char *text;
	size_t len;
	struct ecw_node_errors *errs;
	char path[PATH_MAX_BYTES]; /* "worker.queue", for messages */
	size_t path_len;
};

static void path_push(struct builder *b, size_t *saved, const char *fmt, ...) ECW_PRINTF(3, 4);

static void path_push(struct builder *b, size_t *saved, const char *fmt, ...)
{
	va_list ap;
	size_t room = sizeof(b->path) - b->path_len;
	int n;

	*saved = b->path_len;
	va_start(ap, fmt);
	n = vsnprintf(b->path + b->path_len, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->path_len += (size_t)n < room ? (size_t)n : room - 1;
}

static void path_pop(struct builder *b, size_t saved)
{
	b->path_len = saved;
	b->path[saved] = '\0';
}

static const char *path_or_top(const struct builder *b)
{
	return b->path_len ? b->path : "the top level";
}

/* A syntax error from libyaml: its messages are fixed strings, never the text. */
static void yaml_error(struct builder *b)
{
	const yaml_parser_t *p = &b->parser;
	size_t line = p->problem_mark.line, col = p->problem_mark.column;
	const char *problem = p->problem ? p->problem : "unknown error";

	if (p->error == YAML_READER_ERROR) {
		/* Reader errors (bad UTF-8) carry a byte offset, not a mark. */
		line = col = 0;
		for (size_t i = 0; i < p->problem_offset && i < b->len; i++) {
			if (b->text[i] == '\n') {
				line++;
				col = 0;
			} else {
				col++;
			}
		}
	} else if (p->error == YAML_MEMORY_ERROR) {
		ecw_node_errors_lost(b->errs);
		return;
	}
	if (p->context)
		ecw_node_error_at(b->errs, b->file, (int)line + 1, (int)col + 1, "YAML syntax error: %s %s",
				  problem, p->context);
	else
		ecw_node_error_at(b->errs, b->file, (int)line + 1, (int)col + 1, "YAML syntax error: %s",
				  problem);
}

/* Next event; a syntax error is recorded and returns ECW_EINVALID. */
static int next_event(struct builder *b, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&b->parser, ev)) {
		yaml_error(b);
		return b->parser.error == YAML_MEMORY_ERROR ? ecw_error_set(ECW_ENOMEM, "out of memory")
							    : ECW_EINVALID;
	}
	return 0;
}

struct dup_entry {
	const char *key;
	size_t i;
};

static int dup_cmp(const void *a, const void *b)
{
	const struct dup_entry *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	if (c)
		return c;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* Reports each repeated key in map at its later occurrence and drops it, so
 * the checks see only the first. Sorting keeps a huge map from taking
 * quadratic time. */
static int drop_duplicates(struct builder *b, struct ecw_node *map)
{
	struct dup_entry *e;
	bool *drop;
	size_t k = 0;

	if (map->n < 2)
		return 0;
	e = malloc(map->n * sizeof(*e));
	drop = calloc(map->n, sizeof(*drop));
	if (!e || !drop) {
		free(e);
		free(drop);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < map->n; i++) {
		e[i].key = map->keys[i]->value;
		e[i].i = i;
	}
	qsort(e, map->n, sizeof(*e), dup_cmp);
	/* Within a run of equal keys the first is the earliest: drop the rest. */
	for (size_t i = 1; i < map->n; i++)
		if (strcmp(e[i].key, e[i - 1].key) == 0)
			drop[e[i].i] = true;
	/* Report in file order. */
	for (size_t i = 0; i < map->n; i++) {
		if (drop[i]) {
			const struct ecw_node *first = map->keys[i];
			for (size_t j = 0; j < i; j++) {
				if (strcmp(map->keys[j]->value, map->keys[i]->value) == 0) {
					first = map->keys[j];
					break;
				}
			}
			ecw_node_error(b->errs, map->keys[i], "duplicate key '%.64s' in %s (first at %d:%d)",
				       map->keys[i]->value, path_or_top(b), first->line, first->col);
			ecw_node_free(map->keys[i]);
			ecw_node_free(map->items[i]);
		} else {
			map->keys[k] = map->keys[i];
			map->items[k++] = map->items[i];
		}
	}
	map->n = k;
	free(e);
	free(drop);
	return 0;
}

static int build_node(struct ecw_node **out, struct builder *b, yaml_event_t *ev, bool is_key, int depth);

/* Reads events up to the end of the collection that ev started. */
static int build_collection(struct ecw_node *n, struct builder *b, int depth)
{
	yaml_event_t ev;
	size_t cap = 0, saved;
	int err = 0;

	for (;;) {
		struct ecw_node *key = NULL, *item = NULL;
		bool bad_key = false;

		if ((err = next_event(b, &ev)) < 0)
			return err;
		if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (n->kind == ECW_NODE_MAP) {
			err = build_node(&key, b, &ev, true, depth + 1);
			yaml_event_delete(&ev);
			if (err < 0)
				return err;
			if (key && key->kind != ECW_NODE_SCALAR) {
				ecw_node_error(b->errs, key, "a key in %s is %s: keys must be plain names",
					       path_or_top(b), ecw_node_kind_name(key));
				ecw_node_free(key);
				key = NULL;
			}
			bad_key = key == NULL;
			if ((err = next_event(b, &ev)) < 0) {
				ecw_node_free(key);
				return err;
			}
			path_push(b, &saved, "%s%.64s", b->path_len ? "." : "", key ? key->value : "?");
		} else {
			path_push(b, &saved, "[%zu]", n->n);
		}
		err = build_node(&item, b, &ev, false, depth + 1);
		yaml_event_delete(&ev);
		path_pop(b, saved);
		if (err < 0) {
			ecw_node_free(key);
			return err;
		}
		/* A pair whose key or value was bad (error recorded) is left out,
		 * so it is not reported again as a wrong type or range. */
		if (bad_key || !item) {
			ecw_node_free(key);
			ecw_node_free(item);
			continue;
		}
		if ((err = node_append(n, &cap, key, item)) < 0)
			return err;
	}
	if (n->kind == ECW_NODE_MAP)
		err = drop_duplicates(b, n);
	return err;
}

/* Builds the node that ev starts (ev stays the caller's). *out is NULL when
 * the node was rejected (error recorded); the return is negative only when
 * the whole parse must stop (syntax error, out of memory). */
static int build_node(struct ecw_node **out, struct builder *b, yaml_event_t *ev, bool is_key, int depth)
{
	struct ecw_node *n = NULL;
	const yaml_char_t *anchor = NULL, *tag = NULL;
	int err = 0;

	*out = NULL;
	if (ev->type == YAML_ALIAS_EVENT) {
		ecw_node_error_at(b->errs, b->file, (int)ev->start_mark.line + 1,
				  (int)ev->start_mark.column + 1, "YAML aliases (*name) are not supported");
		return 0;
	}
	if (depth > MAX_DEPTH) {
		ecw_node_error_at(b->errs, b->file, (int)ev->start_mark.line + 1,
				  (int)ev->start_mark.column + 1, "nested deeper than %d levels", MAX_DEPTH);
		return ECW_EINVALID;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		if (!(n = node_new(ECW_NODE_SCALAR, &ev->start_mark, b->file)))
			goto oom;
		/* Only plain scalars are typed by YAML; quoted and block (| >)
		 * ones are always strings. */
		n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
		if (is_key) {
			if (!(n->value =
				      strndup((const char *)ev->data.scalar.value, ev->data.scalar.length)))
				goto oom;
		} else {
			bool read_file = false;
			err = ecw_node_expand(&n->value, &read_file, (const char *)ev->data.scalar.value,
					      ev->data.scalar.length, n, path_or_top(b), b->errs);
			if (err < 0)
				goto done;
			if (err > 0) {
				err = 0;
				goto reject;
			}
			if (read_file && !(n->source = strndup((const char *)ev->data.scalar.value,
							       ev->data.scalar.length)))
				goto oom;
		}
		break;
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT:
		if (ev->type == YAML_SEQUENCE_START_EVENT) {
			anchor = ev->data.sequence_start.anchor;
			tag = ev->data.sequence_start.tag;
			n = node_new(ECW_NODE_SEQ, &ev->start_mark, b->file);
		} else {
			anchor = ev->data.mapping_start.anchor;
			tag = ev->data.mapping_start.tag;
			n = node_new(ECW_NODE_MAP, &ev->start_mark, b->file);
		}
		if (!n)
			goto oom;
		if ((err = build_collection(n, b, depth)) < 0)
			goto done;
		break;
	default:
		/* The parser only hands out node events here. */
		ecw_node_error_at(b->errs, b->file, (int)ev->start_mark.line + 1,
				  (int)ev->start_mark.column + 1, "unexpected YAML event %d", (int)ev->type);
		err = ECW_EINVALID;
		goto done;
	}
	if (anchor) {
		ecw_node_error(b->errs, n, "YAML anchors (&name) are not supported");
		goto reject;
	}
	if (tag) {
		ecw_node_error(b->errs, n, "YAML tags (!tag) are not supported");
		goto reject;
	}
	*out = n;
	n = NULL;
	goto done;
oom:
	err = ecw_error_set(ECW_ENOMEM, "out of memory");
	goto done;
reject:
	ecw_node_free(n);
	n = NULL;
done:
	ecw_node_free(n);
	return err;
}

int ecw_node_parse(struct ecw_node **out, const char *text, size_t len, const char *file,
		   struct ecw_node_errors *errs)
{
	struct builder b;
	yaml_event_t ev;
	struct ecw_node *root = NULL;
	bool have_event = false;
	int err = 0;

	*out = NULL;
	memset(&b, 0, sizeof(b));
	b.file = file;
	b.text = text;
	b.len = len;
	b.errs = errs;
	if (!yaml_parser_initialize(&b.parser))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	yaml_parser_set_input_string(&b.parser, (const unsigned char *)text, len);
	yaml_parser_set_encoding(&b.parser, YAML_UTF8_ENCODING);

	if ((err = next_event(&b, &ev)) < 0) /* stream start */
		goto done;
	yaml_event_delete(&ev);
	if ((err = next_event(&b, &ev)) < 0)
		goto done;
	have_event = true;
	if (ev.type == YAML_STREAM_END_EVENT)
		goto done;
	/* document start */
	yaml_event_delete(&ev);
	have_event = false;
	if ((err = next_event(&b, &ev)) < 0)
		goto done;
	have_event = true;
	if ((err = build_node(&root, &b, &ev, false, 0)) < 0)
		goto done;
	yaml_event_delete(&ev);
	have_event = false;
	if ((err = next_event(&b, &ev)) < 0) /* document end */
		goto done;
	yaml_event_delete(&ev);
	if ((err = next_event(&b, &ev)) < 0)
		goto done;
	have_event = true;
	if (ev.type == YAML_DOCUMENT_START_EVENT) {
		ecw_node_error_at(errs, file, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
				  "a second YAML document: the configuration must be one document");
		err = ECW_EINVALID;
	}
done:
	if (have_event)
		yaml_event_delete(&ev);
	yaml_parser_delete(&b.parser);
	if (err < 0) {
		ecw_node_free(root);
		return err;
	}
	*out = root;
	return 0;
}
/* ---- typed readers ------------------------------------------------------ */

const struct ecw_node *ecw_node_get(const struct ecw_node *map, const char *key)
{
	if (!map || map->kind != ECW_NODE_MAP || !key)
		return NULL;
	for (size_t i = 0; i < map->n; i++)
		if (map->keys[i]->value && strcmp(map->keys[i]->value, key) == 0)
			return map->items[i];
	return NULL;
}

int ecw_node_check_keys(const struct ecw_node *map, const char *const *allowed, const char *what,
			struct ecw_node_errors *errs)
{
	struct ecw_buf list;
	int bad = 0;

	if (!map || map->kind != ECW_NODE_MAP)
		return 0;
	ecw_buf_init(&list, 2048);
	for (size_t i = 0; allowed && allowed[i]; i++)
		if (ecw_buf_printf(&list, "%s%s", i ? ", " : "", allowed[i]) < 0)
			break;
	for (size_t i = 0; i < map->n; i++) {
		const char *k = map->keys[i]->value ? map->keys[i]->value : "";
		size_t j;
		for (j = 0; allowed && allowed[j]; j++)
			if (strcmp(k, allowed[j]) == 0)
				break;
		if (allowed && allowed[j])
			continue;
		ecw_node_error(errs, map->keys[i], "unknown key '%.64s' in %s (expected one of: %s)", k,
			       what ? what : "this map", ecw_buf_cstr(&list));
		bad++;
	}
	ecw_buf_dispose(&list);
	return bad;
}

/* "worker.batch_size", or just the key (the job types' readers: what NULL). */
static void key_name(char *buf, size_t n, const char *what, const char *key)
{
	if (what && *what)
		snprintf(buf, n, "%s.%s", what, key);
	else
		snprintf(buf, n, "%s", key);
}

/* Finds the scalar map[key]. Returns 1 with *out set, 0 when the key is
 * absent and not required, -1 when an error was recorded. */
int ecw_node_read_scalar(const struct ecw_node **out, const struct ecw_node *map, const char *key,
			 bool required, const char *what, const char *expect, struct ecw_node_errors *errs)
{
	const struct ecw_node *v = ecw_node_get(map, key);
	char name[NAME_BYTES];

	*out = NULL;
	key_name(name, sizeof(name), what, key);
	if (!v) {
		if (!required)
			return 0;
		if (what && *what)
			ecw_node_error(errs, map, "%s: missing required key '%s' (%s)", what, key, expect);
		else
			ecw_node_error(errs, map, "missing required key '%s' (%s)", key, expect);
		return -1;
	}
	if (v->kind != ECW_NODE_SCALAR) {
		ecw_node_error(errs, v, "%s must be %s, not %s", name, expect, ecw_node_kind_name(v));
		return -1;
	}
	if (ecw_node_is_null(v)) {
		ecw_node_error(errs, v, "%s has no value (expected %s)", name, expect);
		return -1;
	}
	*out = v;
	return 1;
}

/* A whole decimal integer, optionally signed, nothing else. */
static bool parse_ll(long long *out, const char *s, bool *overflow)
{
	const char *p = s;
	char *end;

	*overflow = false;
	if (*p == '-' || *p == '+')
		p++;
	if (*p < '0' || *p > '9')
		return false;
	for (const char *q = p; *q; q++)
		if (*q < '0' || *q > '9')
			return false;
	errno = 0;
	*out = strtoll(s, &end, 10);
	if (errno == ERANGE)
		*overflow = true;
	return true;
}

int ecw_node_read_int(long long *out, const struct ecw_node *map, const char *key, long long min,
		      long long max, bool required, const char *what, struct ecw_node_errors *errs)
{
	const struct ecw_node *v;
	char name[NAME_BYTES], expect[96];
	long long x;
	bool overflow;
	int r;

	snprintf(expect, sizeof(expect), "an integer (%lld..%lld)", min, max);
	if ((r = ecw_node_read_scalar(&v, map, key, required, what, expect, errs)) <= 0)
		return r;
	key_name(name, sizeof(name), what, key);
	if (v->quoted) {
		ecw_node_error(errs, v, "%s must be %s, not a quoted string", name, expect);
		return -1;
	}
	if (!parse_ll(&x, v->value, &overflow)) {
		ecw_node_error(errs, v, "%s must be %s", name, expect);
		return -1;
	}
	if (overflow || x < min || x > max) {
		ecw_node_error(errs, v, "%s is out of range (%lld..%lld)", name, min, max);
		return -1;
	}
	*out = x;
	return 1;
}

int ecw_node_int(long long *out, const struct ecw_node *map, const char *key, long long min, long long max,
		 bool required, struct ecw_node_errors *errs)
{
	return ecw_node_read_int(out, map, key, min, max, required, NULL, errs) < 0 ? -1 : 0;
}

int ecw_node_read_bool(bool *out, const struct ecw_node *map, const char *key, bool required,
		       const char *what, struct ecw_node_errors *errs)
{
	const struct ecw_node *v;
	char name[NAME_BYTES];
	const char *s;
	int r;

	if ((r = ecw_node_read_scalar(&v, map, key, required, what, "true or false", errs)) <= 0)
		return r;
	key_name(name, sizeof(name), what, key);
	s = v->value;
	/* YAML 1.2's core schema: no yes/no/on/off, which surprise people. */
	if (!v->quoted && (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0)) {
		*out = true;
		return 1;
	}
	if (!v->quoted && (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0)) {
		*out = false;
		return 1;
	}
	ecw_node_error(errs, v, "%s must be true or false%s", name, v->quoted ? ", not a quoted string" : "");
	return -1;
}

int ecw_node_bool(bool *out, const struct ecw_node *map, const char *key, bool required,
		  struct ecw_node_errors *errs)
{
	return ecw_node_read_bool(out, map, key, required, NULL, errs) < 0 ? -1 : 0;
}

int ecw_node_read_string(char **out, const struct ecw_node *map, const char *key, bool required,
			 const char *what, struct ecw_node_errors *errs)
{
	const struct ecw_node *v;
	char *copy;
	int r;

	if ((r = ecw_node_read_scalar(&v, map, key, required, what, "a string", errs)) <= 0)
		return r;
	if (!(copy = strdup(v->value))) {
		ecw_node_errors_lost(errs);
		ecw_error_set(ECW_ENOMEM, "out of memory");
		return -1;
	}
	free(*out);
	*out = copy;
	return 1;
}

int ecw_node_string(char **out, const struct ecw_node *map, const char *key, bool required,
		    struct ecw_node_errors *errs)
{
	return ecw_node_read_string(out, map, key, required, NULL, errs) < 0 ? -1 : 0;
}

/* "0", or a duration in the largest unit that shows it exactly ("168h" for
 * 7 days: there is no d unit to write it back with). */
static void fmt_duration(char *buf, size_t n, int64_t ms)
{
	if (ms == 0)
		snprintf(buf, n, "0");
	else if (ms % HOUR == 0)
		snprintf(buf, n, "%lldh", (long long)(ms / HOUR));
	else if (ms % MIN == 0)
		snprintf(buf, n, "%lldm", (long long)(ms / MIN));
	else if (ms % SEC == 0)
		snprintf(buf, n, "%llds", (long long)(ms / SEC));
	else
		snprintf(buf, n, "%lldms", (long long)ms);
}

/* Durations may be quoted: "60s" is text either way. */
int ecw_node_read_duration(int64_t *out_ms, const struct ecw_node *map, const char *key, int64_t min_ms,
			   int64_t max_ms, bool whole_seconds, bool required, const char *what,
			   struct ecw_node_errors *errs)
{
	const struct ecw_node *v;
	char name[NAME_BYTES], lo[32], hi[32], expect[128];
	int64_t ms;
	int r;

	fmt_duration(lo, sizeof(lo), min_ms);
	fmt_duration(hi, sizeof(hi), max_ms);
	snprintf(expect, sizeof(expect), "a duration like 250ms, 2s, 5m or 1h (%s..%s)", lo, hi);
	if ((r = ecw_node_read_scalar(&v, map, key, required, what, expect, errs)) <= 0)
		return r;
	key_name(name, sizeof(name), what, key);
	r = ecw_duration_parse(&ms, v->value, false);
	if (r == -1) {
		ecw_node_error(errs, v, "%s must be %s", name, expect);
		return -1;
	}
	if (r == -2 || ms < min_ms || ms > max_ms) {
		ecw_node_error(errs, v, "%s is out of range (%s..%s)", name, lo, hi);
		return -1;
	}
	if (whole_seconds && ms % SEC != 0) {
		ecw_node_error(errs, v, "%s must be a whole number of seconds (%s..%s)", name, lo, hi);
		return -1;
	}
	*out_ms = ms;
	return 1;
}

int ecw_node_duration(int64_t *out_ms, const struct ecw_node *map, const char *key, int64_t min_ms,
		      int64_t max_ms, bool required, struct ecw_node_errors *errs)
{
	if (ecw_node_read_duration(out_ms, map, key, min_ms, max_ms, false, required, NULL, errs) < 0)
		return -1;
	return 0;
}

int ecw_node_string_list(char ***out, bool *present, const struct ecw_node *map, const char *key,
			 struct ecw_node_errors *errs)
{
	const struct ecw_node *v = ecw_node_get(map, key);
	char **list = NULL;
	size_t n = 0;
	int bad = 0;

	*present = v != NULL;
	if (!v)
		return 0;
	/* `key:` with its items commented out is an empty list. */
	if (v->kind == ECW_NODE_SEQ)
		n = v->n;
	else if (!ecw_node_is_null(v)) {
		ecw_node_error(errs, v, "%s must be a list of strings, not %s", key, ecw_node_kind_name(v));
		return -1;
	}
	if (!(list = calloc(n + 1, sizeof(*list)))) {
		ecw_node_errors_lost(errs);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const struct ecw_node *it = v->items[i];
		if (it->kind != ECW_NODE_SCALAR || ecw_node_is_null(it)) {
			ecw_node_error(errs, it, "%s[%zu] must be a string, not %s", key, i,
				       it->kind != ECW_NODE_SCALAR ? ecw_node_kind_name(it) : "null");
			bad++;
			continue;
		}
		if (!(list[i] = strdup(it->value))) {
			ecw_node_errors_lost(errs);
			bad++;
			break;
		}
	}
	if (bad) {
		for (size_t i = 0; i < n; i++)
			free(list[i]);
		free(list);
		return -1;
	}
	ecw_strv_free(*out);
	*out = list;
	return 0;
}

const struct ecw_node *ecw_node_section(const struct ecw_node *map, const char *key, const char *what,
					struct ecw_node_errors *errs)
{
	const struct ecw_node *v = ecw_node_get(map, key);
	char name[NAME_BYTES];

	if (!v || ecw_node_is_null(v))
		return NULL;
	if (v->kind != ECW_NODE_MAP) {
		key_name(name, sizeof(name), what, key);
		ecw_node_error(errs, v, "%s must be a map, not %s", name, ecw_node_kind_name(v));
		return NULL;
	}
	return v;
}

int ecw_node_read_enum(int *out, const struct ecw_node *map, const char *key, const char *const *names,
		       const char *what, struct ecw_node_errors *errs)
{
	char *s = NULL, name[NAME_BYTES], list[128] = "";
	size_t used = 0;
	int r;

	for (size_t i = 0; names[i]; i++) {
		int w = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", names[i]);
		if (w > 0 && (size_t)w < sizeof(list) - used)
			used += (size_t)w;
	}
	if ((r = ecw_node_read_string(&s, map, key, false, what, errs)) <= 0)
		return r;
	for (int i = 0; names[i]; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = i;
			free(s);
			return 1;
		}
	}
	key_name(name, sizeof(name), what, key);
	ecw_node_error(errs, ecw_node_get(map, key), "%s must be one of: %s", name, list);
	free(s);
	return -1;
}
