/* config.c - the YAML configuration (see ecw_config.h). libyaml's events are
 * turned into an ecw_node tree once, here; every plain or quoted value has
 * its ${VAR} / ${VAR:-default} references expanded on the way (keys never
 * are). The checks then read the tree with the typed readers, collecting
 * every problem as "FILE:LINE:COL: message" rather than stopping at the first.
 *
 * Secrets: a value may come from the environment (a connection string, a
 * SAS), so no message here ever quotes a scalar's value. Messages name the
 * key (keys are never expanded), the variable, and the position instead. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <yaml.h>

#include "ecw_buf.h"
#include "ecw_config.h"
#include "migrate.h"
#include "schedule.h"
#include "ecw_job.h"
#include "ecw_storage.h"

#define MAX_FILE_BYTES ((size_t)1024 * 1024)
#define MAX_VALUE_BYTES ((size_t)1024 * 1024) /* one scalar after expansion */
#define MAX_DEPTH 64
#define MAX_ERROR_BYTES 4096
#define PATH_MAX_BYTES 256
#define NAME_BYTES 320

#define SEC ((int64_t)1000)
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define DAY (24 * HOUR)
/* Azure takes a message TTL in (32-bit) seconds; this is the largest whole
 * number of hours below INT32_MAX seconds. */
#define MAX_TTL (596523 * HOUR)

#define TTL_EXPECT "-1 (never expire) or a duration like 30s, 5m or 1h (1s..596523h)"
#define DEFAULT_CONNSTR "${AZURE_STORAGE_CONNECTION_STRING:-UseDevelopmentStorage=true}"

/* The parse running on this thread: it names the file for errors reported
 * without a node, and counts error lines lost to a failed allocation (so the
 * parse can fail with ECW_ENOMEM instead of passing a config it never fully
 * checked). Job types' parse callbacks run inside it, on the same thread. */
struct parse_ctx {
	const char *file;
	unsigned long lost;
	struct parse_ctx *prev;
};
static _Thread_local struct parse_ctx *cur_parse;

/* ---- errors ------------------------------------------------------------- */

void ecw_config_errors_init(struct ecw_config_errors *errs)
{
	errs->lines = NULL;
	errs->n = errs->cap = 0;
}

void ecw_config_errors_dispose(struct ecw_config_errors *errs)
{
	if (!errs)
		return;
	for (size_t i = 0; i < errs->n; i++)
		free(errs->lines[i]);
	free(errs->lines);
	errs->lines = NULL;
	errs->n = errs->cap = 0;
}

static void lost_error(void)
{
	if (cur_parse)
		cur_parse->lost++;
}

/* Takes line (heap) into errs. */
static void push_line(struct ecw_config_errors *errs, char *line)
{
	if (!line) {
		lost_error();
		return;
	}
	if (errs->n == errs->cap) {
		size_t cap = errs->cap ? errs->cap * 2 : 8;
		char **p = realloc(errs->lines, cap * sizeof(*p));
		if (!p) {
			free(line);
			lost_error();
			return;
		}
		errs->lines = p;
		errs->cap = cap;
	}
	errs->lines[errs->n++] = line;
}

/* An error line is one line: a key written with "\n" in quotes must not
 * split it. */
static void flatten(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

static void add_error_at(struct ecw_config_errors *errs, const char *file, int line, int col, const char *fmt,
                         va_list ap) ECW_PRINTF(5, 0);

static void add_error_at(struct ecw_config_errors *errs, const char *file, int line, int col, const char *fmt,
                         va_list ap)
{
	char msg[1024];
	struct ecw_buf b;
	int rc;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	flatten(msg);
	ecw_buf_init(&b, MAX_ERROR_BYTES);
	if (line > 0)
		rc = ecw_buf_printf(&b, "%s:%d:%d: %s", file, line, col, msg);
	else
		rc = ecw_buf_printf(&b, "%s: %s", file, msg);
	if (rc < 0) {
		ecw_buf_dispose(&b);
		lost_error();
		return;
	}
	push_line(errs, ecw_buf_take(&b));
}

void ecw_config_error(struct ecw_config_errors *errs, const struct ecw_node *at, const char *fmt, ...)
{
	const char *file;
	va_list ap;

	if (at)
		file = at->file ? at->file : "<config>";
	else
		file = cur_parse ? cur_parse->file : "<config>";
	va_start(ap, fmt);
	add_error_at(errs, file, at ? at->line : 1, at ? at->col : 1, fmt, ap);
	va_end(ap);
}

/* "FILE: message", for problems that have no position (an unreadable file). */
static void file_error(struct ecw_config_errors *errs, const char *file, const char *fmt, ...)
    ECW_PRINTF(3, 4);

static void file_error(struct ecw_config_errors *errs, const char *file, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_error_at(errs, file, 0, 0, fmt, ap);
	va_end(ap);
}

static void pos_error(struct ecw_config_errors *errs, const char *file, int line, int col, const char *fmt,
                      ...) ECW_PRINTF(5, 6);

static void pos_error(struct ecw_config_errors *errs, const char *file, int line, int col, const char *fmt,
                      ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_error_at(errs, file, line, col, fmt, ap);
	va_end(ap);
}

/* ---- the node tree ------------------------------------------------------ */

static void node_free(struct ecw_node *n)
{
	if (!n)
		return;
	if (n->value) {
		/* A value may be a secret from the environment. */
		memset(n->value, 0, strlen(n->value));
		free(n->value);
	}
	for (size_t i = 0; i < n->n; i++) {
		if (n->keys)
			node_free(n->keys[i]);
		node_free(n->items[i]);
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
	node_free(key);
	node_free(item);
	return ecw_error_set(ECW_ENOMEM, "out of memory");
}

/* YAML's null, written plainly: `key:`, `key: ~`, `key: null`. */
static bool node_is_null(const struct ecw_node *n)
{
	if (!n || n->kind != ECW_NODE_SCALAR || n->quoted || !n->value)
		return n == NULL;
	return n->value[0] == '\0' || strcmp(n->value, "~") == 0 || strcmp(n->value, "null") == 0 ||
	       strcmp(n->value, "Null") == 0 || strcmp(n->value, "NULL") == 0;
}

static const char *kind_name(const struct ecw_node *n)
{
	switch (n->kind) {
	case ECW_NODE_MAP:
		return "a map";
	case ECW_NODE_SEQ:
		return "a list";
	default:
		return "a value";
	}
}

/* ---- building the tree from libyaml's events ----------------------------- */

struct builder {
	yaml_parser_t parser;
	const char *file;
	const char *text;
	size_t len;
	struct ecw_config_errors *errs;
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

static bool var_start(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool var_char(char c)
{
	return var_start(c) || (c >= '0' && c <= '9');
}

/* Appends to an expanded value; ECW_ETOOLARGE past its cap (many large
 * variables), which is the value's fault, not the machine's. */
static int put(struct ecw_buf *v, const char *p, size_t n)
{
	if (n > v->max - v->len)
		return ECW_ETOOLARGE;
	return ecw_buf_add(v, p, n);
}

/* Expands s[0..len) into *out (heap). Returns 0, 1 when the value is bad (the
 * error is recorded at n), or a negative ecw_err. */
static int expand(char **out, struct builder *b, const struct ecw_node *n, const char *s, size_t len)
{
	struct ecw_buf v;
	size_t i = 0;
	int err = 0;

	*out = NULL;
	ecw_buf_init(&v, MAX_VALUE_BYTES);
	/* Never NULL, even for "". */
	if ((err = put(&v, "", 0)) < 0)
		goto done;
	while (i < len) {
		const char *dollar = memchr(s + i, '$', len - i);
		size_t name_at, name_len, def_at = 0, def_len = 0, close;
		bool has_def = false;
		char name[128];
		const char *val;

		if (!dollar) {
			err = put(&v, s + i, len - i);
			goto done;
		}
		if ((err = put(&v, s + i, (size_t)(dollar - (s + i)))) < 0)
			goto done;
		i = (size_t)(dollar - s);
		if (i + 1 < len && s[i + 1] == '$') {
			if ((err = put(&v, "$", 1)) < 0)
				goto done;
			i += 2;
			continue;
		}
		if (i + 1 >= len || s[i + 1] != '{') {
			/* A lone '$' is itself. */
			if ((err = put(&v, "$", 1)) < 0)
				goto done;
			i++;
			continue;
		}
		name_at = i + 2;
		for (close = name_at; close < len && var_char(s[close]); close++)
			;
		name_len = close - name_at;
		if (name_len == 0 || !var_start(s[name_at])) {
			ecw_config_error(
			    b->errs, n,
			    "bad ${...} in %s: a variable name (letters, digits, '_', not starting "
			    "with a digit) must follow '${' (write $$ for a literal $)",
			    path_or_top(b));
			err = 1;
			goto done;
		}
		if (name_len >= sizeof(name)) {
			ecw_config_error(b->errs, n,
			                 "bad ${...} in %s: variable name longer than %zu characters",
			                 path_or_top(b), sizeof(name) - 1);
			err = 1;
			goto done;
		}
		memcpy(name, s + name_at, name_len);
		name[name_len] = '\0';
		if (close + 1 < len && s[close] == ':' && s[close + 1] == '-') {
			const char *end;
			has_def = true;
			def_at = close + 2;
			end = memchr(s + def_at, '}', len - def_at);
			close = end ? (size_t)(end - s) : len;
			def_len = close - def_at;
			for (size_t k = def_at; k + 1 < close; k++) {
				if (s[k] == '$' && s[k + 1] == '{') {
					ecw_config_error(
					    b->errs, n, "bad ${%s:-...} in %s: the default cannot contain ${",
					    name, path_or_top(b));
					err = 1;
					goto done;
				}
			}
		}
		if (close >= len || s[close] != '}') {
			ecw_config_error(b->errs, n, "bad ${%s in %s: expected '}'%s", name, path_or_top(b),
			                 has_def ? "" : " or ':-default}'");
			err = 1;
			goto done;
		}
		val = getenv(name);
		if (has_def && (!val || !*val)) {
			err = put(&v, s + def_at, def_len);
		} else if (!val) {
			ecw_config_error(b->errs, n, "environment variable %s is not set (in %s)", name,
			                 path_or_top(b));
			err = 1;
			goto done;
		} else {
			err = put(&v, val, strlen(val));
		}
		if (err < 0)
			goto done;
		i = close + 1;
	}
done:
	if (err == ECW_ETOOLARGE) {
		ecw_config_error(b->errs, n, "%s is longer than %zu bytes after expansion", path_or_top(b),
		                 MAX_VALUE_BYTES);
		err = 1;
	}
	if (err == 0)
		*out = ecw_buf_take(&v);
	if (v.ptr)
		memset(v.ptr, 0, v.len);
	ecw_buf_dispose(&v);
	return err;
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
		lost_error();
		return;
	}
	if (p->context)
		pos_error(b->errs, b->file, (int)line + 1, (int)col + 1, "YAML syntax error: %s %s", problem,
		          p->context);
	else
		pos_error(b->errs, b->file, (int)line + 1, (int)col + 1, "YAML syntax error: %s", problem);
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
			ecw_config_error(b->errs, map->keys[i],
			                 "duplicate key '%.64s' in %s (first at %d:%d)", map->keys[i]->value,
			                 path_or_top(b), first->line, first->col);
			node_free(map->keys[i]);
			node_free(map->items[i]);
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
				ecw_config_error(b->errs, key, "a key in %s is %s: keys must be plain names",
				                 path_or_top(b), kind_name(key));
				node_free(key);
				key = NULL;
			}
			bad_key = key == NULL;
			if ((err = next_event(b, &ev)) < 0) {
				node_free(key);
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
			node_free(key);
			return err;
		}
		/* A pair whose key or value was bad (error recorded) is left out,
		 * so it is not reported again as a wrong type or range. */
		if (bad_key || !item) {
			node_free(key);
			node_free(item);
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
		pos_error(b->errs, b->file, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
		          "YAML aliases (*name) are not supported");
		return 0;
	}
	if (depth > MAX_DEPTH) {
		pos_error(b->errs, b->file, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
		          "nested deeper than %d levels", MAX_DEPTH);
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
			err = expand(&n->value, b, n, (const char *)ev->data.scalar.value,
			             ev->data.scalar.length);
			if (err < 0)
				goto done;
			if (err > 0) {
				err = 0;
				goto reject;
			}
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
		pos_error(b->errs, b->file, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
		          "unexpected YAML event %d", (int)ev->type);
		err = ECW_EINVALID;
		goto done;
	}
	if (anchor) {
		ecw_config_error(b->errs, n, "YAML anchors (&name) are not supported");
		goto reject;
	}
	if (tag) {
		ecw_config_error(b->errs, n, "YAML tags (!tag) are not supported");
		goto reject;
	}
	*out = n;
	n = NULL;
	goto done;
oom:
	err = ecw_error_set(ECW_ENOMEM, "out of memory");
	goto done;
reject:
	node_free(n);
	n = NULL;
done:
	node_free(n);
	return err;
}

/* The document's root, or NULL for an empty file. */
static int build_tree(struct ecw_node **out, const char *text, size_t len, const char *file,
                      struct ecw_config_errors *errs)
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
		pos_error(errs, file, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
		          "a second YAML document: the configuration must be one document");
		err = ECW_EINVALID;
	}
done:
	if (have_event)
		yaml_event_delete(&ev);
	yaml_parser_delete(&b.parser);
	if (err < 0) {
		node_free(root);
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
                        struct ecw_config_errors *errs)
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
		ecw_config_error(errs, map->keys[i], "unknown key '%.64s' in %s (expected one of: %s)", k,
		                 what ? what : "this map", ecw_buf_cstr(&list));
		bad++;
	}
	ecw_buf_dispose(&list);
	return bad;
}

/* "worker.batch_size", or just the key for callers outside this file. */
static void key_name(char *buf, size_t n, const char *what, const char *key)
{
	if (what && *what)
		snprintf(buf, n, "%s.%s", what, key);
	else
		snprintf(buf, n, "%s", key);
}

/* Finds the scalar map[key]. Returns 1 with *out set, 0 when the key is
 * absent and not required, -1 when an error was recorded. */
static int get_scalar(const struct ecw_node **out, const struct ecw_node *map, const char *key, bool required,
                      const char *what, const char *expect, struct ecw_config_errors *errs)
{
	const struct ecw_node *v = ecw_node_get(map, key);
	char name[NAME_BYTES];

	*out = NULL;
	key_name(name, sizeof(name), what, key);
	if (!v) {
		if (!required)
			return 0;
		if (what && *what)
			ecw_config_error(errs, map, "%s: missing required key '%s' (%s)", what, key, expect);
		else
			ecw_config_error(errs, map, "missing required key '%s' (%s)", key, expect);
		return -1;
	}
	if (v->kind != ECW_NODE_SCALAR) {
		ecw_config_error(errs, v, "%s must be %s, not %s", name, expect, kind_name(v));
		return -1;
	}
	if (node_is_null(v)) {
		ecw_config_error(errs, v, "%s has no value (expected %s)", name, expect);
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

static int read_int(long long *out, const struct ecw_node *map, const char *key, long long min, long long max,
                    bool required, const char *what, struct ecw_config_errors *errs)
{
	const struct ecw_node *v;
	char name[NAME_BYTES], expect[96];
	long long x;
	bool overflow;
	int r;

	snprintf(expect, sizeof(expect), "an integer (%lld..%lld)", min, max);
	if ((r = get_scalar(&v, map, key, required, what, expect, errs)) <= 0)
		return r;
	key_name(name, sizeof(name), what, key);
	if (v->quoted) {
		ecw_config_error(errs, v, "%s must be %s, not a quoted string", name, expect);
		return -1;
	}
	if (!parse_ll(&x, v->value, &overflow)) {
		ecw_config_error(errs, v, "%s must be %s", name, expect);
		return -1;
	}
	if (overflow || x < min || x > max) {
		ecw_config_error(errs, v, "%s is out of range (%lld..%lld)", name, min, max);
		return -1;
	}
	*out = x;
	return 1;
}

int ecw_node_int(long long *out, const struct ecw_node *map, const char *key, long long min, long long max,
                 bool required, struct ecw_config_errors *errs)
{
	return read_int(out, map, key, min, max, required, NULL, errs) < 0 ? -1 : 0;
}

static int read_bool(bool *out, const struct ecw_node *map, const char *key, bool required, const char *what,
                     struct ecw_config_errors *errs)
{
	const struct ecw_node *v;
	char name[NAME_BYTES];
	const char *s;
	int r;

	if ((r = get_scalar(&v, map, key, required, what, "true or false", errs)) <= 0)
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
	ecw_config_error(errs, v, "%s must be true or false%s", name,
	                 v->quoted ? ", not a quoted string" : "");
	return -1;
}

int ecw_node_bool(bool *out, const struct ecw_node *map, const char *key, bool required,
                  struct ecw_config_errors *errs)
{
	return read_bool(out, map, key, required, NULL, errs) < 0 ? -1 : 0;
}

static int read_string(char **out, const struct ecw_node *map, const char *key, bool required,
                       const char *what, struct ecw_config_errors *errs)
{
	const struct ecw_node *v;
	char *copy;
	int r;

	if ((r = get_scalar(&v, map, key, required, what, "a string", errs)) <= 0)
		return r;
	if (!(copy = strdup(v->value))) {
		lost_error();
		ecw_error_set(ECW_ENOMEM, "out of memory");
		return -1;
	}
	free(*out);
	*out = copy;
	return 1;
}

int ecw_node_string(char **out, const struct ecw_node *map, const char *key, bool required,
                    struct ecw_config_errors *errs)
{
	return read_string(out, map, key, required, NULL, errs) < 0 ? -1 : 0;
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

int ecw_duration_parse(int64_t *out_ms, const char *s, bool days)
{
	int64_t n = 0, unit;
	const char *p = s;

	if (strcmp(s, "0") == 0) {
		*out_ms = 0;
		return 0;
	}
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (INT64_MAX - 9) / 10)
			return -2;
		n = n * 10 + (*p - '0');
	}
	if (strcmp(p, "ms") == 0)
		unit = 1;
	else if (strcmp(p, "s") == 0)
		unit = SEC;
	else if (strcmp(p, "m") == 0)
		unit = MIN;
	else if (strcmp(p, "h") == 0)
		unit = HOUR;
	else if (days && strcmp(p, "d") == 0)
		unit = 24 * HOUR;
	else if (days && strcmp(p, "w") == 0)
		unit = 7 * 24 * HOUR;
	else
		return -1;
	if (n > INT64_MAX / unit)
		return -2;
	*out_ms = n * unit;
	return 0;
}

/* Durations may be quoted: "60s" is text either way. */
static int read_duration(int64_t *out_ms, const struct ecw_node *map, const char *key, int64_t min_ms,
                         int64_t max_ms, bool whole_seconds, bool required, const char *what,
                         struct ecw_config_errors *errs)
{
	const struct ecw_node *v;
	char name[NAME_BYTES], lo[32], hi[32], expect[128];
	int64_t ms;
	int r;

	fmt_duration(lo, sizeof(lo), min_ms);
	fmt_duration(hi, sizeof(hi), max_ms);
	snprintf(expect, sizeof(expect), "a duration like 250ms, 2s, 5m or 1h (%s..%s)", lo, hi);
	if ((r = get_scalar(&v, map, key, required, what, expect, errs)) <= 0)
		return r;
	key_name(name, sizeof(name), what, key);
	r = ecw_duration_parse(&ms, v->value, false);
	if (r == -1) {
		ecw_config_error(errs, v, "%s must be %s", name, expect);
		return -1;
	}
	if (r == -2 || ms < min_ms || ms > max_ms) {
		ecw_config_error(errs, v, "%s is out of range (%s..%s)", name, lo, hi);
		return -1;
	}
	if (whole_seconds && ms % SEC != 0) {
		ecw_config_error(errs, v, "%s must be a whole number of seconds (%s..%s)", name, lo, hi);
		return -1;
	}
	*out_ms = ms;
	return 1;
}

int ecw_node_duration(int64_t *out_ms, const struct ecw_node *map, const char *key, int64_t min_ms,
                      int64_t max_ms, bool required, struct ecw_config_errors *errs)
{
	return read_duration(out_ms, map, key, min_ms, max_ms, false, required, NULL, errs) < 0 ? -1 : 0;
}

void ecw_strv_free(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

int ecw_node_string_list(char ***out, bool *present, const struct ecw_node *map, const char *key,
                         struct ecw_config_errors *errs)
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
	else if (!node_is_null(v)) {
		ecw_config_error(errs, v, "%s must be a list of strings, not %s", key, kind_name(v));
		return -1;
	}
	if (!(list = calloc(n + 1, sizeof(*list)))) {
		lost_error();
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const struct ecw_node *it = v->items[i];
		if (it->kind != ECW_NODE_SCALAR || node_is_null(it)) {
			ecw_config_error(errs, it, "%s[%zu] must be a string, not %s", key, i,
			                 it->kind != ECW_NODE_SCALAR ? kind_name(it) : "null");
			bad++;
			continue;
		}
		if (!(list[i] = strdup(it->value))) {
			lost_error();
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

/* ---- the configuration --------------------------------------------------- */

static const char *const top_keys[] = {"storage", "worker", "log", "metrics", "jobs", "schedules", "migrations", NULL};
static const char *const storage_keys[] = {"connection_string", "auth", "account", "ca_file",
                                           "managed_identity_client_id", "request_timeout", NULL};
static const char *const storage_auths[] = {"key", "workload-identity", "managed-identity", NULL};
static const char *const worker_keys[] = {"queue",          "poison_queue",       "batch_size",
                                          "concurrency",    "prefetch",           "visibility_timeout",
                                          "max_dequeue_count", "retry_backoff",   "poll_interval",
                                          "shutdown_grace", "message_ttl",        "create_missing",
                                          "schedule_table", "schedule_lease",     NULL};
static const char *const backoff_keys[] = {"base", "max", NULL};
static const char *const poll_keys[] = {"min", "max", NULL};
static const char *const log_keys[] = {"level", "format", NULL};
static const char *const metrics_keys[] = {"listen", NULL};
static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const log_formats[] = {"json", "text", NULL};

/* map[key] as a section: NULL when absent or null (`worker:` with nothing
 * under it means the defaults), an error when it is not a map. */
static const struct ecw_node *get_section(const struct ecw_node *map, const char *key, const char *what,
                                          struct ecw_config_errors *errs)
{
	const struct ecw_node *v = ecw_node_get(map, key);
	char name[NAME_BYTES];

	if (!v || node_is_null(v))
		return NULL;
	if (v->kind != ECW_NODE_MAP) {
		key_name(name, sizeof(name), what, key);
		ecw_config_error(errs, v, "%s must be a map, not %s", name, kind_name(v));
		return NULL;
	}
	return v;
}

/* Azure's rule: 3-63 lowercase letters, digits and single dashes, starting
 * and ending with a letter or digit. */
static bool queue_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 3 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '-') {
			if (s[i + 1] == '-')
				return false;
		} else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
			return false;
		}
	}
	return true;
}

/* Azure's rule for table names: a letter, then 2-62 letters or digits. */
static bool table_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 3 || n > 63 || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

#define QUEUE_RULE                                                                                           \
	"3-63 lowercase letters, digits and single dashes, starting and ending with a letter or digit"

static int read_enum(int *out, const struct ecw_node *map, const char *key, const char *const *names,
                     const char *what, struct ecw_config_errors *errs)
{
	char *s = NULL, name[NAME_BYTES], list[128] = "";
	size_t used = 0;
	int r;

	for (size_t i = 0; names[i]; i++) {
		int w = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", names[i]);
		if (w > 0 && (size_t)w < sizeof(list) - used)
			used += (size_t)w;
	}
	if ((r = read_string(&s, map, key, false, what, errs)) <= 0)
		return r;
	for (int i = 0; names[i]; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = i;
			free(s);
			return 1;
		}
	}
	key_name(name, sizeof(name), what, key);
	ecw_config_error(errs, ecw_node_get(map, key), "%s must be one of: %s", name, list);
	free(s);
	return -1;
}

/* Azure's rule for account names: 3-24 lowercase letters and digits. */
static bool account_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 3 || n > 24)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

/* The connection string's place for messages: its node, or (when the file
 * does not set it) the default's environment variable. */
static void connstr_error(struct ecw_config_errors *errs, const struct ecw_node *at, const char *msg)
{
	if (at)
		ecw_config_error(errs, at, "storage.connection_string: %s", msg);
	else
		ecw_config_error(errs, NULL,
		                 "storage.connection_string (not set, so $AZURE_STORAGE_CONNECTION_STRING): %s", msg);
}

/* auth: key. The account parser's messages never echo a key or a signature. */
static void check_key_auth(struct ecw_config *cfg, const struct ecw_node *sec, struct ecw_config_errors *errs)
{
	const struct ecw_node *at = ecw_node_get(sec, "connection_string");
	struct ecw_account *acct = NULL;
	char msg[sizeof(ecw_error_last()->message) + 128];

	if (ecw_node_get(sec, "account"))
		ecw_config_error(errs, ecw_node_get(sec, "account"),
		                 "storage.account is for auth: workload-identity or managed-identity "
		                 "(with auth: key the connection string names the account)");
	if (ecw_account_parse(&acct, cfg->storage.connection_string) == 0) {
		ecw_account_free(acct);
		return;
	}
	snprintf(msg, sizeof(msg), "%s", ecw_error_last()->message);
	/* Endpoints without a key: most likely meant for an identity. */
	if (ecw_account_parse_endpoints(&acct, cfg->storage.connection_string) == 0) {
		size_t n = strlen(msg);
		snprintf(msg + n, sizeof(msg) - n, "; for Entra ID authentication set storage.auth "
		                                   "(workload-identity or managed-identity)");
		ecw_account_free(acct);
	}
	connstr_error(errs, at, msg);
}

/* auth: workload-identity or managed-identity: the account is named by
 * storage.account or by a connection string with only endpoints (the
 * default connection string does not apply: it would be a key's). */
static void check_identity_auth(struct ecw_config *cfg, const struct ecw_node *sec, struct ecw_config_errors *errs)
{
	const struct ecw_node *at_cs = ecw_node_get(sec, "connection_string"), *at_acct = ecw_node_get(sec, "account");
	const char *mode = storage_auths[cfg->storage.auth];
	struct ecw_account *acct = NULL;

	if (read_string(&cfg->storage.account, sec, "account", false, "storage", errs) < 0)
		return;
	if (cfg->storage.account && !account_name_ok(cfg->storage.account)) {
		ecw_config_error(errs, at_acct, "storage.account must be 3-24 lowercase letters and digits");
		return;
	}
	if (cfg->storage.account && at_cs) {
		ecw_config_error(errs, at_acct,
		                 "storage.account and storage.connection_string both name the account: give one");
		return;
	}
	if (!cfg->storage.account && !at_cs) {
		ecw_config_error(errs, ecw_node_get(sec, "auth"),
		                 "storage.auth: %s needs storage.account, or a storage.connection_string with only "
		                 "QueueEndpoint and TableEndpoint",
		                 mode);
		return;
	}
	if (cfg->storage.account) {
		/* The default string is not used: drop it, so nothing mistakes it for the account. */
		memset(cfg->storage.connection_string, 0, strlen(cfg->storage.connection_string));
		free(cfg->storage.connection_string);
		cfg->storage.connection_string = NULL;
		return;
	}
	if (ecw_account_parse_endpoints(&acct, cfg->storage.connection_string) < 0)
		connstr_error(errs, at_cs, ecw_error_last()->message);
	else if (strncmp(ecw_account_endpoint(acct, ECW_SVC_QUEUE), "https://", 8) != 0 ||
	         strncmp(ecw_account_endpoint(acct, ECW_SVC_TABLE), "https://", 8) != 0)
		/* A bearer token is a secret: never sent in the clear. */
		connstr_error(errs, at_cs, "with token authentication both endpoints must be https://");
	ecw_account_free(acct);
}

static void check_storage(struct ecw_config *cfg, const struct ecw_node *root, struct ecw_config_errors *errs)
{
	const struct ecw_node *sec = get_section(root, "storage", NULL, errs);
	const struct ecw_node *at;
	int auth = ECW_AUTH_KEY, ra;

	ecw_node_check_keys(sec, storage_keys, "storage", errs);
	if ((ra = read_enum(&auth, sec, "auth", storage_auths, "storage", errs)) > 0)
		cfg->storage.auth = (enum ecw_storage_auth)auth;
	if (read_string(&cfg->storage.ca_file, sec, "ca_file", false, "storage", errs) > 0 &&
	    access(cfg->storage.ca_file, R_OK) != 0)
		ecw_config_error(errs, ecw_node_get(sec, "ca_file"), "storage.ca_file: cannot read %s: %s",
		                 cfg->storage.ca_file, strerror(errno));
	at = ecw_node_get(sec, "managed_identity_client_id");
	if (read_string(&cfg->storage.managed_identity_client_id, sec, "managed_identity_client_id", false,
	                "storage", errs) > 0 &&
	    ra >= 0 && cfg->storage.auth != ECW_AUTH_MANAGED_IDENTITY)
		ecw_config_error(errs, at,
		                 "storage.managed_identity_client_id is for auth: managed-identity (workload "
		                 "identity takes its client id from AZURE_CLIENT_ID)");
	read_duration(&cfg->storage.request_timeout_ms, sec, "request_timeout", SEC, 10 * MIN, false, false,
	              "storage", errs);
	/* Which checks apply depends on the mode: none when it is unknown. */
	if (read_string(&cfg->storage.connection_string, sec, "connection_string", false, "storage", errs) < 0 ||
	    ra < 0)
		return;
	if (cfg->storage.auth == ECW_AUTH_KEY)
		check_key_auth(cfg, sec, errs);
	else
		check_identity_auth(cfg, sec, errs);
}

static void check_worker(struct ecw_config *cfg, const struct ecw_node *root, struct ecw_config_errors *errs)
{
	const struct ecw_node *sec = get_section(root, "worker", NULL, errs);
	const struct ecw_node *backoff, *poll, *ttl;
	long long x;
	int rq, rp;

	ecw_node_check_keys(sec, worker_keys, "worker", errs);

	rq = read_string(&cfg->worker.queue, sec, "queue", false, "worker", errs);
	if (rq >= 0 && !queue_name_ok(cfg->worker.queue)) {
		ecw_config_error(errs, ecw_node_get(sec, "queue"),
		                 "worker.queue is not a valid queue name (%s)", QUEUE_RULE);
		rq = -1;
	}
	rp = read_string(&cfg->worker.poison_queue, sec, "poison_queue", false, "worker", errs);
	if (rp > 0 && !queue_name_ok(cfg->worker.poison_queue)) {
		ecw_config_error(errs, ecw_node_get(sec, "poison_queue"),
		                 "worker.poison_queue is not a valid queue name (%s)", QUEUE_RULE);
	} else if (rp == 0 && rq >= 0) {
		struct ecw_buf b;
		ecw_buf_init(&b, 128);
		if (ecw_buf_printf(&b, "%s-poison", cfg->worker.queue) < 0) {
			lost_error();
		} else if (!queue_name_ok(ecw_buf_cstr(&b))) {
			ecw_config_error(
			    errs, ecw_node_get(sec, "queue"),
			    "worker.queue is too long for the default poison queue <queue>-poison "
			    "(at most 63 characters): set worker.poison_queue");
		} else {
			free(cfg->worker.poison_queue);
			cfg->worker.poison_queue = ecw_buf_take(&b);
		}
		ecw_buf_dispose(&b);
	} else if (rp > 0 && rq >= 0 && strcmp(cfg->worker.queue, cfg->worker.poison_queue) == 0) {
		ecw_config_error(errs, ecw_node_get(sec, "poison_queue"),
		                 "worker.poison_queue must differ from worker.queue");
	}

	if (read_int(&x, sec, "batch_size", 1, 32, false, "worker", errs) > 0)
		cfg->worker.batch_size = (int)x;
	if (read_int(&x, sec, "concurrency", 1, 256, false, "worker", errs) > 0)
		cfg->worker.concurrency = (int)x;
	if (read_int(&x, sec, "prefetch", 0, 256, false, "worker", errs) > 0)
		cfg->worker.prefetch = (int)x;
	read_duration(&cfg->worker.visibility_timeout_ms, sec, "visibility_timeout", SEC, 7 * DAY, true,
	              false, "worker", errs);
	if (read_int(&x, sec, "max_dequeue_count", 1, 1000, false, "worker", errs) > 0)
		cfg->worker.max_dequeue_count = (int)x;

	backoff = get_section(sec, "retry_backoff", "worker", errs);
	if (backoff) {
		int rb, rm;
		ecw_node_check_keys(backoff, backoff_keys, "worker.retry_backoff", errs);
		rb = read_duration(&cfg->worker.retry_backoff_base_ms, backoff, "base", SEC, 7 * DAY, false,
		                   false, "worker.retry_backoff", errs);
		rm = read_duration(&cfg->worker.retry_backoff_max_ms, backoff, "max", SEC, 7 * DAY, false,
		                   false, "worker.retry_backoff", errs);
		if (rb >= 0 && rm >= 0 &&
		    cfg->worker.retry_backoff_max_ms < cfg->worker.retry_backoff_base_ms) {
			const struct ecw_node *at = ecw_node_get(backoff, rm > 0 ? "max" : "base");
			ecw_config_error(
			    errs, at,
			    rm > 0 ? "worker.retry_backoff.max must not be less than base"
			           : "worker.retry_backoff.base is more than max (default 5m): set max");
		}
	}

	poll = get_section(sec, "poll_interval", "worker", errs);
	if (poll) {
		int rmin, rmax;
		ecw_node_check_keys(poll, poll_keys, "worker.poll_interval", errs);
		rmin = read_duration(&cfg->worker.poll_min_ms, poll, "min", 1, HOUR, false, false,
		                     "worker.poll_interval", errs);
		rmax = read_duration(&cfg->worker.poll_max_ms, poll, "max", 1, HOUR, false, false,
		                     "worker.poll_interval", errs);
		if (rmin >= 0 && rmax >= 0 && cfg->worker.poll_max_ms < cfg->worker.poll_min_ms) {
			const struct ecw_node *at = ecw_node_get(poll, rmax > 0 ? "max" : "min");
			ecw_config_error(
			    errs, at,
			    rmax > 0 ? "worker.poll_interval.max must not be less than min"
			             : "worker.poll_interval.min is more than max (default 10s): set max");
		}
	}

	read_duration(&cfg->worker.shutdown_grace_ms, sec, "shutdown_grace", 0, HOUR, false, false, "worker",
	              errs);

	if (get_scalar(&ttl, sec, "message_ttl", false, "worker", TTL_EXPECT, errs) > 0) {
		int64_t ms = 0;
		int r = strcmp(ttl->value, "-1") == 0 ? 1 : ecw_duration_parse(&ms, ttl->value, false);
		if (r == 1)
			cfg->worker.message_ttl_s = -1;
		else if (r == -1)
			ecw_config_error(errs, ttl, "worker.message_ttl must be %s", TTL_EXPECT);
		else if (r == -2 || ms < SEC || ms > MAX_TTL)
			ecw_config_error(errs, ttl, "worker.message_ttl is out of range (-1 or 1s..596523h)");
		else if (ms % SEC != 0)
			ecw_config_error(errs, ttl, "worker.message_ttl must be a whole number of seconds");
		else
			cfg->worker.message_ttl_s = ms / SEC;
	}

	read_bool(&cfg->worker.create_missing, sec, "create_missing", false, "worker", errs);

	/* The schedules' markers (worker/schedule.c): a table name, and how long
	 * a claim holds before another replica may take the window over. */
	if (read_string(&cfg->worker.schedule_table, sec, "schedule_table", false, "worker", errs) > 0 &&
	    !table_name_ok(cfg->worker.schedule_table))
		ecw_config_error(errs, ecw_node_get(sec, "schedule_table"),
		                 "worker.schedule_table is not a valid table name (a letter, then 2-62 letters or digits)");
	read_duration(&cfg->worker.schedule_lease_ms, sec, "schedule_lease", SEC, HOUR, false, false, "worker",
	              errs);
}

static void check_log(struct ecw_config *cfg, const struct ecw_node *root, struct ecw_config_errors *errs)
{
	const struct ecw_node *sec = get_section(root, "log", NULL, errs);
	int v;

	ecw_node_check_keys(sec, log_keys, "log", errs);
	if (read_enum(&v, sec, "level", log_levels, "log", errs) > 0)
		cfg->log.level = (enum ecw_log_level)v;
	if (read_enum(&v, sec, "format", log_formats, "log", errs) > 0)
		cfg->log.format = (enum ecw_log_format)v;
}

/* "" (disabled), or host:port where host is an IPv4 literal, a bracketed
 * IPv6 literal or localhost (what the metrics server can bind) and port is
 * 0..65535 (0: any free port). */
static bool listen_ok(const char *s)
{
	const char *colon, *port;
	char host[64];
	size_t hlen;
	unsigned char addr[16];
	long p = 0;

	if (!*s)
		return true;
	colon = strrchr(s, ':');
	if (!colon)
		return false;
	port = colon + 1;
	if (!*port || strlen(port) > 5)
		return false;
	for (const char *q = port; *q; q++) {
		if (*q < '0' || *q > '9')
			return false;
		p = p * 10 + (*q - '0');
	}
	if (p > 65535)
		return false;
	hlen = (size_t)(colon - s);
	if (s[0] == '[') {
		if (hlen < 3 || s[hlen - 1] != ']' || hlen - 2 >= sizeof(host))
			return false;
		memcpy(host, s + 1, hlen - 2);
		host[hlen - 2] = '\0';
		return inet_pton(AF_INET6, host, addr) == 1;
	}
	if (hlen == 0 || hlen >= sizeof(host))
		return false;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	return strcmp(host, "localhost") == 0 || inet_pton(AF_INET, host, addr) == 1;
}

static void check_metrics(struct ecw_config *cfg, const struct ecw_node *root, struct ecw_config_errors *errs)
{
	const struct ecw_node *sec = get_section(root, "metrics", NULL, errs);

	ecw_node_check_keys(sec, metrics_keys, "metrics", errs);
	if (read_string(&cfg->metrics.listen, sec, "listen", false, "metrics", errs) > 0 &&
	    !listen_ok(cfg->metrics.listen))
		ecw_config_error(errs, ecw_node_get(sec, "listen"),
		                 "metrics.listen must be \"\" (disabled) or host:port, with host an IPv4 "
		                 "address, [IPv6 address] or localhost and port 0..65535");
}

static bool job_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
	}
	return true;
}

/* Whether job `target` can be reached from job i by following `then`
 * (seen marks jobs already explored). */
static bool then_reaches(const struct ecw_config *cfg, size_t i, size_t target, unsigned char *seen)
{
	for (size_t k = 0; cfg->jobs[i].then && cfg->jobs[i].then[k]; k++)
		for (size_t j = 0; j < cfg->njobs; j++) {
			if (strcmp(cfg->jobs[j].name, cfg->jobs[i].then[k]) != 0)
				continue;
			if (j == target)
				return true;
			if (!seen[j]) {
				seen[j] = 1;
				if (then_reaches(cfg, j, target, seen))
					return true;
			}
		}
	return false;
}

/* Every job a `then` names must exist, and following `then` must end: a
 * cycle would enqueue the same keys forever. */
static void check_then(const struct ecw_config *cfg, const struct ecw_node *sec, struct ecw_config_errors *errs)
{
	unsigned char *state;

	for (size_t i = 0; i < cfg->njobs; i++) {
		const struct ecw_node *at = ecw_node_get(ecw_node_get(sec, cfg->jobs[i].name), "then");
		const struct ecw_job_def *next;
		if (cfg->jobs[i].then && cfg->jobs[i].type && cfg->jobs[i].type->keyless)
			ecw_config_error(errs, at, "jobs.%s.then: a %s job names no entity to hand on",
			                 cfg->jobs[i].name, cfg->jobs[i].type->name);
		for (size_t k = 0; cfg->jobs[i].then && cfg->jobs[i].then[k]; k++)
			if (!(next = ecw_config_job(cfg, cfg->jobs[i].then[k])))
				ecw_config_error(errs, at, "jobs.%s.then names '%.64s', which is not a configured job",
				                 cfg->jobs[i].name, cfg->jobs[i].then[k]);
			else if (next->type && next->type->keyless)
				ecw_config_error(errs, at, "jobs.%s.then names '%.64s', a %s job, which takes no entity's keys",
				                 cfg->jobs[i].name, next->name, next->type->name);
	}
	if (!(state = calloc(cfg->njobs ? cfg->njobs : 1, 1)))
		return;
	for (size_t i = 0; i < cfg->njobs; i++) {
		/* Blame only the jobs on a cycle, not those that lead into one. */
		memset(state, 0, cfg->njobs);
		if (then_reaches(cfg, i, i, state)) {
			ecw_config_error(errs, ecw_node_get(ecw_node_get(sec, cfg->jobs[i].name), "then"),
			                 "jobs.%s.then leads back to itself: a cycle would enqueue forever",
			                 cfg->jobs[i].name);
		}
	}
	free(state);
}

static int check_jobs(struct ecw_config *cfg, const struct ecw_node *root, struct ecw_config_errors *errs)
{
	const struct ecw_node *sec = get_section(root, "jobs", NULL, errs);
	struct ecw_buf names;
	int err = 0;

	ecw_buf_init(&names, 4096);
	if (!sec || sec->n == 0)
		goto done;
	if (!(cfg->jobs = calloc(sec->n, sizeof(*cfg->jobs)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < sec->n; i++) {
		const struct ecw_node *k = sec->keys[i], *job = sec->items[i], *tn;
		const struct ecw_job_type *type;
		struct ecw_job_def *def;
		char what[NAME_BYTES];
		void *settings = NULL;
		size_t before;

		if (!job_name_ok(k->value))
			ecw_config_error(errs, k, "job name '%.64s' must be 1-63 letters, digits, '-' or '_'",
			                 k->value);
		snprintf(what, sizeof(what), "jobs.%.64s", k->value);
		if (job->kind != ECW_NODE_MAP) {
			ecw_config_error(errs, job, "%s must be a map with at least a 'type', not %s", what,
			                 node_is_null(job) ? "nothing" : kind_name(job));
			continue;
		}
		if (get_scalar(&tn, job, "type", true, what, "a job type", errs) <= 0)
			continue;
		if (!(type = ecw_job_type_find(tn->value))) {
			const char *const *all = ecw_job_type_names();
			ecw_buf_reset(&names);
			for (size_t j = 0; all && all[j]; j++)
				if (ecw_buf_printf(&names, "%s%s", j ? ", " : "", all[j]) < 0)
					break;
			ecw_config_error(errs, tn, "%s.type is not a known job type (expected one of: %s)",
			                 what, ecw_buf_cstr(&names));
			continue;
		}
		before = errs->n;
		if (type->parse && type->parse(&settings, job, errs) < 0) {
			/* The type reported why; whatever it left is its own to free.
			 * A type that failed silently (out of memory) must still fail
			 * the parse, not leave a config without this job. */
			if (errs->n == before)
				ecw_config_error(errs, job, "%s: the %s job type rejected its settings", what,
				                 type->name);
			if (settings && type->free)
				type->free(settings);
			continue;
		}
		def = &cfg->jobs[cfg->njobs];
		if (!(def->name = strdup(k->value))) {
			if (settings && type->free)
				type->free(settings);
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
			goto done;
		}
		def->type = type;
		def->settings = settings;
		cfg->njobs++;
		bool present = false;
		if (ecw_node_string_list(&def->then, &present, job, "then", errs) == 0 && def->then && !def->then[0]) {
			ecw_strv_free(def->then);
			def->then = NULL;
		}
	}
	check_then(cfg, sec, errs);
done:
	ecw_buf_dispose(&names);
	return err;
}

static void set_defaults(struct ecw_config *cfg)
{
	cfg->storage.request_timeout_ms = 30 * SEC;
	cfg->worker.batch_size = 16;
	cfg->worker.concurrency = 16;
	cfg->worker.prefetch = -1; /* batch_size, once that is read */
	cfg->worker.visibility_timeout_ms = 60 * SEC;
	cfg->worker.max_dequeue_count = 5;
	cfg->worker.retry_backoff_base_ms = 2 * SEC;
	cfg->worker.retry_backoff_max_ms = 5 * MIN;
	cfg->worker.poll_min_ms = 100;
	cfg->worker.poll_max_ms = 10 * SEC;
	cfg->worker.shutdown_grace_ms = 25 * SEC;
	cfg->worker.message_ttl_s = -1;
	cfg->worker.create_missing = true;
	cfg->worker.schedule_lease_ms = 2 * MIN;
	cfg->log.level = ECW_LOG_INFO;
	cfg->log.format = ECW_LOG_JSON;
}

/* The string defaults: the connection string through the same expansion a
 * value in the file gets. */
static int set_string_defaults(struct ecw_config *cfg, const char *file, struct ecw_config_errors *errs)
{
	struct builder b;
	struct ecw_node at = {.kind = ECW_NODE_SCALAR, .line = 1, .col = 1, .file = file};
	int err;

	memset(&b, 0, sizeof(b));
	b.errs = errs;
	snprintf(b.path, sizeof(b.path), "storage.connection_string");
	b.path_len = strlen(b.path);
	err = expand(&cfg->storage.connection_string, &b, &at, DEFAULT_CONNSTR, strlen(DEFAULT_CONNSTR));
	if (err != 0)
		return err < 0 ? err : ecw_error_set(ECW_ERROR, "bad default connection string");
	cfg->worker.queue = strdup("ecw-jobs");
	cfg->metrics.listen = strdup("127.0.0.1:9464");
	cfg->worker.schedule_table = strdup("EcwSchedules");
	if (!cfg->worker.queue || !cfg->metrics.listen || !cfg->worker.schedule_table)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	return 0;
}

struct err_pos {
	char *line;
	long l, c;
	size_t i;
};

static int err_pos_cmp(const void *a, const void *b)
{
	const struct err_pos *x = a, *y = b;

	if (x->l != y->l)
		return x->l < y->l ? -1 : 1;
	if (x->c != y->c)
		return x->c < y->c ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* Puts the lines this parse added in file order: the checks run section by
 * section, and a reader wants them as the file reads. */
static void sort_errors(struct ecw_config_errors *errs, size_t from, const char *file)
{
	size_t n = errs->n - from, flen = strlen(file);
	struct err_pos *e;

	if (n < 2 || !(e = malloc(n * sizeof(*e))))
		return;
	for (size_t i = 0; i < n; i++) {
		const char *s = errs->lines[from + i];
		char *end;
		e[i].line = errs->lines[from + i];
		e[i].i = i;
		e[i].l = e[i].c = 0;
		if (strncmp(s, file, flen) == 0 && s[flen] == ':') {
			e[i].l = strtol(s + flen + 1, &end, 10);
			if (*end == ':')
				e[i].c = strtol(end + 1, NULL, 10);
		}
	}
	qsort(e, n, sizeof(*e), err_pos_cmp);
	for (size_t i = 0; i < n; i++)
		errs->lines[from + i] = e[i].line;
	free(e);
}

int ecw_config_parse(struct ecw_config **out, const char *text, size_t len, const char *file,
                     struct ecw_config_errors *errs)
{
	struct parse_ctx ctx = {.file = file ? file : "<config>", .prev = cur_parse};
	struct ecw_config *cfg = NULL;
	struct ecw_node *root = NULL;
	size_t first_error = errs->n;
	int err = 0;

	*out = NULL;
	file = ctx.file;
	cur_parse = &ctx;
	if (!(cfg = calloc(1, sizeof(*cfg))) || !(cfg->file = strdup(file))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	set_defaults(cfg);
	if ((err = set_string_defaults(cfg, file, errs)) < 0)
		goto done;
	if ((err = build_tree(&root, text ? text : "", text ? len : 0, file, errs)) < 0)
		goto done;
	if (root && !node_is_null(root) && root->kind != ECW_NODE_MAP) {
		ecw_config_error(errs, root,
		                 "the configuration must be a map (storage:, worker:, ...), not %s",
		                 kind_name(root));
	} else {
		ecw_node_check_keys(root, top_keys, "the top level", errs);
		check_storage(cfg, root, errs);
		check_worker(cfg, root, errs);
		if (cfg->worker.prefetch < 0)
			cfg->worker.prefetch = cfg->worker.batch_size;
		check_log(cfg, root, errs);
		check_metrics(cfg, root, errs);
		if ((err = check_jobs(cfg, root, errs)) < 0)
			goto done;
		/* After the jobs: a schedule names them. */
		ecw_schedules_parse(&cfg->schedules, ecw_node_get(root, "schedules"), cfg, errs);
		ecw_migrations_parse(&cfg->migrations, ecw_node_get(root, "migrations"), errs);
	}
done:
	node_free(root);
	if (err == 0 && ctx.lost)
		err = ecw_error_set(ECW_ENOMEM, "out of memory while recording configuration errors");
	if (err == 0 && errs->n > first_error)
		err = ECW_EINVALID;
	if (err == ECW_EINVALID)
		sort_errors(errs, first_error, file);
	if (err < 0)
		ecw_config_free(cfg);
	else
		*out = cfg;
	cur_parse = ctx.prev;
	return err;
}

int ecw_config_load(struct ecw_config **out, const char *path, struct ecw_config_errors *errs)
{
	struct ecw_buf text;
	char chunk[8192];
	int fd = -1, err = 0;

	*out = NULL;
	ecw_buf_init(&text, MAX_FILE_BYTES);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		file_error(errs, path, "cannot read: %s", strerror(errno));
		err = ECW_EINVALID;
		goto done;
	}
	for (;;) {
		ssize_t got = read(fd, chunk, sizeof(chunk));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			file_error(errs, path, "cannot read: %s", strerror(errno));
			err = ECW_EINVALID;
			goto done;
		}
		if (got == 0)
			break;
		if (ecw_buf_add(&text, chunk, (size_t)got) < 0) {
			if (text.len + (size_t)got > MAX_FILE_BYTES)
				file_error(errs, path, "cannot read: larger than %zu bytes", MAX_FILE_BYTES);
			else
				file_error(errs, path, "cannot read: out of memory");
			err = ECW_EINVALID;
			goto done;
		}
	}
	err = ecw_config_parse(out, ecw_buf_cstr(&text), text.len, path, errs);
done:
	if (fd >= 0)
		close(fd);
	if (text.ptr)
		memset(text.ptr, 0, text.len);
	ecw_buf_dispose(&text);
	return err;
}

void ecw_config_free(struct ecw_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->file);
	if (cfg->storage.connection_string) {
		memset(cfg->storage.connection_string, 0, strlen(cfg->storage.connection_string));
		free(cfg->storage.connection_string);
	}
	free(cfg->storage.account);
	free(cfg->storage.ca_file);
	free(cfg->storage.managed_identity_client_id);
	free(cfg->worker.queue);
	free(cfg->worker.poison_queue);
	free(cfg->worker.schedule_table);
	free(cfg->metrics.listen);
	for (size_t i = 0; i < cfg->njobs; i++) {
		struct ecw_job_def *j = &cfg->jobs[i];
		free(j->name);
		ecw_strv_free(j->then);
		if (j->settings && j->type && j->type->free)
			j->type->free(j->settings);
	}
	free(cfg->jobs);
	ecw_schedules_free(cfg->schedules);
	ecw_migrations_free(cfg->migrations);
	free(cfg);
}

const struct ecw_job_def *ecw_config_job(const struct ecw_config *cfg, const char *name)
{
	if (!cfg || !name)
		return NULL;
	for (size_t i = 0; i < cfg->njobs; i++)
		if (strcmp(cfg->jobs[i].name, name) == 0)
			return &cfg->jobs[i];
	return NULL;
}

const char *ecw_config_default_path(void)
{
	const char *p = getenv("ECW_CONFIG");

	return p && *p ? p : "./ecworker.yaml";
}
