/* SPDX-License-Identifier: MIT */
/* ecw_node.h - a YAML document as a tree of nodes (libyaml, used only in
 * worker/yaml/node.c), with ${VAR} / ${VAR:-default} expanded in every value, and
 * the typed readers every schema checks it with: the worker's (ecw_config.h),
 * the job types', the schedules' and the migrations'. Each problem is
 * recorded as "FILE:LINE:COL: message" in a caller-owned list (_init /
 * _dispose) rather than stopping at the first, so one run shows them all.
 * The tree is a heap object (ecw_node_free); schemas only read it. */
#ifndef ECW_NODE_H
#define ECW_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ecw_duration.h"
#include "ecw_err.h"
#include "ecw_strv.h"

/* ---- errors ------------------------------------------------------------- */

struct ecw_node_errors {
	char **lines; /* "FILE:LINE:COL: message" */
	size_t n, cap;
	/* Where an error at no node is placed (at line 1, column 1); NULL:
	 * "<config>". A schema's parse sets it for its duration. */
	const char *file;
	/* Lines (or values a check needed) lost to a failed allocation: a
	 * parse that lost one must fail rather than pass what it never fully
	 * checked. */
	unsigned long lost;
};

void ecw_node_errors_init(struct ecw_node_errors *errs);
void ecw_node_errors_dispose(struct ecw_node_errors *errs);
/* Puts the lines from index from on in the order of their positions in file
 * (checks run section by section; a reader wants them as the file reads).
 * Lines with no position in it come first; lines at the same position keep
 * their order. */
void ecw_node_errors_sort(struct ecw_node_errors *errs, size_t from, const char *file);
/* Counts an error line (or a value a check needed) lost to a failed
 * allocation: the parse must fail rather than pass what it never fully
 * checked. */
void ecw_node_errors_lost(struct ecw_node_errors *errs);

/* ---- the node tree (what YAML said, after ${VAR} expansion) ---------------- */

enum ecw_node_kind { ECW_NODE_SCALAR, ECW_NODE_MAP, ECW_NODE_SEQ };

struct ecw_node {
	enum ecw_node_kind kind;
	int line, col;           /* 1-based, where the node starts */
	const char *file;        /* the file's name, for messages */
	char *value;             /* SCALAR: the expanded text */
	bool quoted;             /* SCALAR: written in quotes (so never a number) */
	struct ecw_node **keys;  /* MAP: key scalars */
	struct ecw_node **items; /* MAP: values; SEQ: items */
	size_t n;
	/* SCALAR: the text as written when its expansion read a secret file
	 * (${file:PATH}, or a variable's _FILE): expanding it again reads the
	 * file afresh (a rotated secret); NULL otherwise. */
	char *source;
};

/* Records "file:line:col: message" at node (or at the start of errs->file if
 * NULL). Messages never quote a value: it may be a secret from the
 * environment. */
void ecw_node_error(struct ecw_node_errors *errs, const struct ecw_node *at, const char *fmt, ...)
	ECW_PRINTF(3, 4);
/* "FILE:LINE:COL: message" at a position no node has (a YAML syntax error). */
void ecw_node_error_at(struct ecw_node_errors *errs, const char *file, int line, int col, const char *fmt,
		       ...) ECW_PRINTF(5, 6);
/* "FILE: message", for a problem with no position (an unreadable file). */
void ecw_node_error_file(struct ecw_node_errors *errs, const char *file, const char *fmt, ...)
	ECW_PRINTF(3, 4);

/* The tree of text (one YAML document; file names it in messages). *out is
 * NULL for an empty document. Keys are taken as written and values expanded;
 * a value, key or pair that is rejected (anchors, aliases, tags, a bad
 * ${...}, a repeated key) is recorded in errs and left out of the tree.
 * Returns 0, ECW_EINVALID when the text is not one YAML document (syntax
 * error, too deep: no tree), or ECW_ENOMEM. Free with ecw_node_free. */
int ecw_node_parse(struct ecw_node **out, const char *text, size_t len, const char *file,
		   struct ecw_node_errors *errs) ECW_MUST_USE;
/* Wipes the values (they may be secrets) as it frees; NULL is fine. */
void ecw_node_free(struct ecw_node *n);
/* Expands s[0..len) as a value of the document is expanded, into *out (heap);
 * where names it in messages ("storage.connection_string"), which are placed
 * at at. *read_file (may be NULL) tells whether a secret file was read on
 * the way. Returns 0, 1 when the value is bad (the error is recorded), or a
 * negative ecw_err. */
int ecw_node_expand(char **out, bool *read_file, const char *s, size_t len, const struct ecw_node *at,
		    const char *where, struct ecw_node_errors *errs);

/* YAML's null, written plainly: `key:`, `key: ~`, `key: null`; and NULL. */
bool ecw_node_is_null(const struct ecw_node *n);
/* "a map", "a list" or "a value", for messages. */
const char *ecw_node_kind_name(const struct ecw_node *n);
/* MAP lookup; NULL when absent or when map is not a MAP. */
const struct ecw_node *ecw_node_get(const struct ecw_node *map, const char *key);
/* Reports every key of map not in allowed (NULL-terminated); returns how many. */
int ecw_node_check_keys(const struct ecw_node *map, const char *const *allowed, const char *what,
			struct ecw_node_errors *errs);

/* ---- typed readers ------------------------------------------------------- */

/* Typed readers of map[key], as the job types use them (messages name the
 * bare key). When the key is absent, *out keeps its value (the default)
 * unless required, which is an error. A wrong type or range is an error at
 * the value's position. All return 0 or -1 (error recorded). */
int ecw_node_string(char **out, const struct ecw_node *map, const char *key, bool required,
		    struct ecw_node_errors *errs); /* *out: heap copy, free() the old one */
int ecw_node_int(long long *out, const struct ecw_node *map, const char *key, long long min, long long max,
		 bool required, struct ecw_node_errors *errs);
int ecw_node_bool(bool *out, const struct ecw_node *map, const char *key, bool required,
		  struct ecw_node_errors *errs);
/* "250ms", "2s", "5m", "1h" (an integer and a unit; "0" alone is 0). */
int ecw_node_duration(int64_t *out_ms, const struct ecw_node *map, const char *key, int64_t min_ms,
		      int64_t max_ms, bool required, struct ecw_node_errors *errs);
/* A sequence of scalars; *out is a NULL-terminated heap array (free with
 * ecw_strv_free); *present tells an absent key from an empty list. */
int ecw_node_string_list(char ***out, bool *present, const struct ecw_node *map, const char *key,
			 struct ecw_node_errors *errs);

/* The same readers for a key of a named section, as the worker's schema
 * uses them: messages name what.key ("worker.batch_size"; what NULL or "":
 * the bare key). They return 1 when the key was read, 0 when it is absent
 * and not required (*out unchanged), -1 when an error was recorded. */
/* map[key] as a section: NULL when absent or null (`worker:` with nothing
 * under it means the defaults), an error when it is not a map. */
const struct ecw_node *ecw_node_section(const struct ecw_node *map, const char *key, const char *what,
					struct ecw_node_errors *errs);
/* The scalar map[key] itself (not null); expect says what it should be. */
int ecw_node_read_scalar(const struct ecw_node **out, const struct ecw_node *map, const char *key,
			 bool required, const char *what, const char *expect, struct ecw_node_errors *errs);
int ecw_node_read_string(char **out, const struct ecw_node *map, const char *key, bool required,
			 const char *what, struct ecw_node_errors *errs);
int ecw_node_read_int(long long *out, const struct ecw_node *map, const char *key, long long min,
		      long long max, bool required, const char *what, struct ecw_node_errors *errs);
int ecw_node_read_bool(bool *out, const struct ecw_node *map, const char *key, bool required,
		       const char *what, struct ecw_node_errors *errs);
/* whole_seconds: a duration the service takes in seconds ("1500ms" is an error). */
int ecw_node_read_duration(int64_t *out_ms, const struct ecw_node *map, const char *key, int64_t min_ms,
			   int64_t max_ms, bool whole_seconds, bool required, const char *what,
			   struct ecw_node_errors *errs);
/* One of names (NULL-terminated): *out is its index. Never required. */
int ecw_node_read_enum(int *out, const struct ecw_node *map, const char *key, const char *const *names,
		       const char *what, struct ecw_node_errors *errs);

#endif
