/* SPDX-License-Identifier: MIT */
/* node_error.c - a configuration's error lines (struct ecw_node_errors,
 * ecw_node.h): "FILE:LINE:COL: message", one line each, kept in the order
 * of the file. Every reader of the configuration reports here, the YAML
 * tree (node.c) and the expansion of ${...} (node_expand.c) included, so
 * this file sits below both and calls neither. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_buf.h"
#include "ecw_node.h"

#define MAX_ERROR_BYTES 4096

void ecw_node_errors_init(struct ecw_node_errors *errs)
{
	errs->lines = NULL;
	errs->n = errs->cap = 0;
	errs->file = NULL;
	errs->lost = 0;
}

void ecw_node_errors_dispose(struct ecw_node_errors *errs)
{
	if (!errs)
		return;
	for (size_t i = 0; i < errs->n; i++)
		free(errs->lines[i]);
	free(errs->lines);
	errs->lines = NULL;
	errs->n = errs->cap = 0;
}

void ecw_node_errors_lost(struct ecw_node_errors *errs)
{
	errs->lost++;
}

/* Takes line (heap) into errs. */
static void push_line(struct ecw_node_errors *errs, char *line)
{
	if (!line) {
		ecw_node_errors_lost(errs);
		return;
	}
	if (errs->n == errs->cap) {
		size_t cap = errs->cap ? errs->cap * 2 : 8;
		char **p = realloc(errs->lines, cap * sizeof(*p));
		if (!p) {
			free(line);
			ecw_node_errors_lost(errs);
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

static void add_error_at(struct ecw_node_errors *errs, const char *file, int line, int col, const char *fmt,
			 va_list ap) ECW_PRINTF(5, 0);

static void add_error_at(struct ecw_node_errors *errs, const char *file, int line, int col, const char *fmt,
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
		ecw_node_errors_lost(errs);
		return;
	}
	push_line(errs, ecw_buf_take(&b));
}

void ecw_node_error(struct ecw_node_errors *errs, const struct ecw_node *at, const char *fmt, ...)
{
	const char *file;
	va_list ap;

	if (at)
		file = at->file ? at->file : "<config>";
	else
		file = errs->file ? errs->file : "<config>";
	va_start(ap, fmt);
	add_error_at(errs, file, at ? at->line : 1, at ? at->col : 1, fmt, ap);
	va_end(ap);
}

void ecw_node_error_file(struct ecw_node_errors *errs, const char *file, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_error_at(errs, file, 0, 0, fmt, ap);
	va_end(ap);
}

void ecw_node_error_at(struct ecw_node_errors *errs, const char *file, int line, int col, const char *fmt,
		       ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_error_at(errs, file, line, col, fmt, ap);
	va_end(ap);
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

void ecw_node_errors_sort(struct ecw_node_errors *errs, size_t from, const char *file)
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
