/* SPDX-License-Identifier: MIT */
/* node_expand.c - what a configuration value's ${...} references expand to
 * (ecw_node_expand, ecw_node.h), for the YAML tree (node.c) and the defaults
 * a schema fills in: ${VAR}, ${VAR:-default}, $$, and secrets from files.
 *
 * Secrets: a value may come from the environment (a connection string, a
 * SAS), so no message here ever quotes a value. Messages name the key, the
 * variable, the file's path and the position instead.
 *
 * Secrets from files, as Kubernetes mounts them: ${file:PATH} is the content
 * of the file PATH (absolute), and ${AZURE_STORAGE_CONNECTION_STRING} that
 * of the file AZURE_STORAGE_CONNECTION_STRING_FILE names when that variable
 * is set instead. The content is taken as it is but for its trailing line
 * ends (echo and most editors add one), up to SECRET_FILE_MAX bytes, and it
 * is registered with the log, which then redacts it in every line. A value
 * that read one keeps its text as written (ecw_node.source), so that the
 * storage connection string can be expanded again when the secret rotates
 * (connect.c): every read registers what it found. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ecw_buf.h"
#include "ecw_log.h"
#include "ecw_node.h"

#define MAX_VALUE_BYTES ((size_t)1024 * 1024) /* one scalar after expansion */
/* A secret file (a connection string, a SAS, a key): far more than any. */
#define SECRET_FILE_MAX ((size_t)64 * 1024)

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

/* Variables whose value may come from the file VAR_FILE names instead. */
static const char *const file_backed_vars[] = {"AZURE_STORAGE_CONNECTION_STRING", NULL};

/* Reads the regular file at path into out (capped at SECRET_FILE_MAX) and
 * drops its trailing line ends. Returns 0, or 1 with the error recorded: it
 * names the path and what pointed at it, never the content. */
static int read_secret_file(struct ecw_buf *out, const char *path, const char *what, const struct ecw_node *n,
			    const char *where, struct ecw_node_errors *errs)
{
	char chunk[4096];
	struct stat st;
	int fd, bad = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0 || fstat(fd, &st) != 0) {
		ecw_node_error(errs, n, "%s (in %s): cannot read %s: %s", what, where, path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	/* A FIFO or a device could block or never end. */
	if (!S_ISREG(st.st_mode)) {
		ecw_node_error(errs, n, "%s (in %s): %s is not a regular file", what, where, path);
		close(fd);
		return 1;
	}
	for (;;) {
		ssize_t got = read(fd, chunk, sizeof(chunk));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ecw_node_error(errs, n, "%s (in %s): cannot read %s: %s", what, where, path,
				       strerror(errno));
			bad = 1;
			break;
		}
		if (got == 0)
			break;
		if ((size_t)got > SECRET_FILE_MAX - out->len) {
			ecw_node_error(errs, n, "%s (in %s): %s is over %zu bytes", what, where, path,
				       SECRET_FILE_MAX);
			bad = 1;
			break;
		}
		if (ecw_buf_add(out, chunk, (size_t)got) < 0) {
			errs->lost++; /* lost to a failed allocation: the parse fails */
			bad = 1;
			break;
		}
	}
	memset(chunk, 0, sizeof(chunk));
	close(fd);
	while (!bad && out->len && (out->ptr[out->len - 1] == '\n' || out->ptr[out->len - 1] == '\r'))
		out->ptr[--out->len] = '\0';
	if (!bad && out->len == 0) {
		ecw_node_error(errs, n, "%s (in %s): %s is empty", what, where, path);
		bad = 1;
	}
	if (!bad && memchr(out->ptr, '\0', out->len)) {
		ecw_node_error(errs, n, "%s (in %s): %s holds a NUL byte", what, where, path);
		bad = 1;
	}
	if (!bad)
		ecw_log_add_secret(out->ptr);
	return bad;
}

/* Appends the content of the file at path to v (see read_secret_file). */
static int put_file(struct ecw_buf *v, const char *path, const char *what, const struct ecw_node *n,
		    const char *where, struct ecw_node_errors *errs)
{
	struct ecw_buf content;
	int err;

	ecw_buf_init(&content, SECRET_FILE_MAX);
	if ((err = read_secret_file(&content, path, what, n, where, errs)) == 0)
		err = put(v, content.ptr, content.len);
	if (content.ptr)
		memset(content.ptr, 0, content.cap);
	ecw_buf_dispose(&content);
	return err;
}

/* ${file:PATH}, PATH being path[0..len). */
static int expand_file(struct ecw_buf *v, const char *path, size_t len, const struct ecw_node *n,
		       const char *where, struct ecw_node_errors *errs)
{
	char p[4096];

	if (len == 0 || path[0] != '/') {
		ecw_node_error(errs, n, "bad ${file:PATH} in %s: PATH must be an absolute path", where);
		return 1;
	}
	if (len >= sizeof(p) || memchr(path, '\0', len)) {
		ecw_node_error(errs, n, "bad ${file:PATH} in %s: PATH is longer than %zu bytes", where,
			       sizeof(p) - 1);
		return 1;
	}
	memcpy(p, path, len);
	p[len] = '\0';
	return put_file(v, p, "${file:PATH}", n, where, errs);
}

/* ${name} when name may come from a file: 1 with the error recorded when
 * both name and name_FILE are set, 0 with *done false when name_FILE is
 * not set (the variable applies), else the file's content appended. */
static int expand_file_backed(bool *done, struct ecw_buf *v, const char *name, const struct ecw_node *n,
			      const char *where, struct ecw_node_errors *errs)
{
	char file_var[160];
	const char *path, *direct;

	*done = false;
	for (size_t i = 0; file_backed_vars[i]; i++) {
		if (strcmp(name, file_backed_vars[i]) != 0)
			continue;
		snprintf(file_var, sizeof(file_var), "%s_FILE", name);
		if (!(path = getenv(file_var)) || !*path)
			return 0;
		*done = true;
		if ((direct = getenv(name)) && *direct) {
			ecw_node_error(errs, n, "both %s and %s are set (in %s): give one", name, file_var,
				       where);
			return 1;
		}
		return put_file(v, path, file_var, n, where, errs);
	}
	return 0;
}

int ecw_node_expand(char **out, bool *read_file, const char *s, size_t len, const struct ecw_node *n,
		    const char *where, struct ecw_node_errors *errs)
{
	struct ecw_buf v;
	bool file_read = false;
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
			ecw_node_error(
				errs, n,
				"bad ${...} in %s: a variable name (letters, digits, '_', not starting "
				"with a digit) must follow '${' (write $$ for a literal $)",
				where);
			err = 1;
			goto done;
		}
		if (name_len >= sizeof(name)) {
			ecw_node_error(errs, n, "bad ${...} in %s: variable name longer than %zu characters",
				       where, sizeof(name) - 1);
			err = 1;
			goto done;
		}
		memcpy(name, s + name_at, name_len);
		name[name_len] = '\0';
		if (strcmp(name, "file") == 0 && close + 1 < len && s[close] == ':' && s[close + 1] != '-') {
			const char *end = memchr(s + close + 1, '}', len - close - 1);
			if (!end) {
				ecw_node_error(errs, n, "bad ${file:PATH in %s: expected '}'", where);
				err = 1;
				goto done;
			}
			if ((err = expand_file(&v, s + close + 1, (size_t)(end - s) - close - 1, n, where,
					       errs)) != 0)
				goto done;
			file_read = true;
			i = (size_t)(end - s) + 1;
			continue;
		}
		if (close + 1 < len && s[close] == ':' && s[close + 1] == '-') {
			const char *end;
			has_def = true;
			def_at = close + 2;
			end = memchr(s + def_at, '}', len - def_at);
			close = end ? (size_t)(end - s) : len;
			def_len = close - def_at;
			for (size_t k = def_at; k + 1 < close; k++) {
				if (s[k] == '$' && s[k + 1] == '{') {
					ecw_node_error(errs, n,
						       "bad ${%s:-...} in %s: the default cannot contain ${",
						       name, where);
					err = 1;
					goto done;
				}
			}
		}
		if (close >= len || s[close] != '}') {
			ecw_node_error(errs, n, "bad ${%s in %s: expected '}'%s", name, where,
				       has_def ? "" : " or ':-default}'");
			err = 1;
			goto done;
		}
		bool from_file;
		if ((err = expand_file_backed(&from_file, &v, name, n, where, errs)) != 0)
			goto done;
		if (from_file) {
			file_read = true;
			i = close + 1;
			continue;
		}
		val = getenv(name);
		if (has_def && (!val || !*val)) {
			err = put(&v, s + def_at, def_len);
		} else if (!val) {
			ecw_node_error(errs, n, "environment variable %s is not set (in %s)", name, where);
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
		ecw_node_error(errs, n, "%s is longer than %zu bytes after expansion", where,
			       MAX_VALUE_BYTES);
		err = 1;
	}
	if (err == 0)
		*out = ecw_buf_take(&v);
	if (err == 0 && read_file)
		*read_file = file_read;
	if (v.ptr)
		memset(v.ptr, 0, v.len);
	ecw_buf_dispose(&v);
	return err;
}
