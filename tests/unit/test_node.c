/* SPDX-License-Identifier: MIT */
/* test_node.c - the YAML node tree and its readers (worker/yaml/node.c): every
 * kind of YAML the tree refuses, at its exact line and column, repeated keys,
 * ${VAR} and ${file:PATH} expansion (and AZURE_STORAGE_CONNECTION_STRING_FILE), the readers job types use on a tree built by hand, and
 * errors recorded at no node. Through the configuration where a case needs a
 * file (config_text.h). Tests run from the repo root. */
#include "config_text.h"

#include <unistd.h>

#include "ecw_log.h"
#include "ecw_node.h"

/* ---- the tree ---------------------------------------------------------------- */

static void test_node__yaml_errors(void **state)
{
	(void)state;
	one_error("worker:\n  queue: abc\n batch_size: 4\n", "3:2", "YAML syntax error");
	one_error("worker: {queue: abc\n", "2:1", "YAML syntax error");
	one_error("worker:\n\tqueue: abc\n", "2:1", "YAML syntax error");
	one_error("log: {}\n---\nlog: {}\n", "2:1", "a second YAML document");
	one_error("log: &l {level: info}\n", "1:6", "YAML anchors (&name) are not supported");
	struct ecw_node_errors errs;
	parse_bad(&errs, "log: &l {level: info}\nmetrics: *l\n", 2);
	error_is(&errs, 0, "1:6", "YAML anchors (&name) are not supported");
	error_is(&errs, 1, "2:10", "YAML aliases (*name) are not supported");
	ecw_node_errors_dispose(&errs);
	one_error("worker: {batch_size: !!int 4}\n", "1:22", "YAML tags (!tag) are not supported");
	one_error("? [a, b]\n: c\n", "1:3", "a key in the top level is a list: keys must be plain names");
	/* Invalid UTF-8: the reader's byte offset becomes a line and column. */
	one_error("log: {}\nworker:\n  queue: ab\xff\n", "3:12", "YAML syntax error");
	/* Too deep to be a configuration. */
	char deep[71];
	memset(deep, '[', 70);
	deep[70] = '\0';
	one_error(deep, "1:66", "nested deeper than 64 levels");
}

static void test_node__duplicate_key(void **state)
{
	(void)state;
	one_error("worker:\n  queue: abc\n  batch_size: 4\n  queue: def\n", "4:3",
	          "duplicate key 'queue' in worker (first at 2:3)");
	one_error("log: {}\nworker: {}\nlog: {}\n", "3:1",
	          "duplicate key 'log' in the top level (first at 1:1)");
	one_error("jobs:\n  a: {type: test-noop}\n  a: {type: test-noop}\n", "3:3",
	          "duplicate key 'a' in jobs (first at 2:3)");
	/* The first one counts; a third is reported too. */
	struct ecw_node_errors errs;
	parse_bad(&errs, "worker: {batch_size: 4, batch_size: 99, batch_size: x}\n", 2);
	error_is(&errs, 0, "1:25", "duplicate key 'batch_size' in worker (first at 1:10)");
	error_is(&errs, 1, "1:41", "duplicate key 'batch_size' in worker (first at 1:10)");
	ecw_node_errors_dispose(&errs);
}

/* ---- ${VAR} ------------------------------------------------------------------ */

static void test_node__env_set(void **state)
{
	(void)state;
	setenv("ECW_T_SET", "orders", 1);
	setenv("ECW_T_NUM", "8", 1);
	struct ecw_config *cfg =
	    parse_ok("worker:\n  queue: ${ECW_T_SET}\n  poison_queue: ${ECW_T_SET}-dead-${ECW_T_NUM}\n"
	             "  batch_size: ${ECW_T_NUM}\n  visibility_timeout: ${ECW_T_NUM}0s\n");
	assert_str(cfg->worker.queue, "orders");
	assert_str(cfg->worker.poison_queue, "orders-dead-8");
	/* Expanded before typing: a plain ${VAR} may be a number. */
	assert_int_equal(cfg->worker.batch_size, 8);
	assert_int_equal(cfg->worker.visibility_timeout_ms, 80000);
	ecw_config_free(cfg);
	/* Quoted values expand too (and stay strings). */
	cfg = parse_ok("worker: {queue: \"${ECW_T_SET}\"}\n");
	assert_str(cfg->worker.queue, "orders");
	ecw_config_free(cfg);
	one_error("worker: {batch_size: \"${ECW_T_NUM}\"}\n", "1:22", "not a quoted string");
	unsetenv("ECW_T_NUM");
}

static void test_node__env_unset(void **state)
{
	(void)state;
	one_error("worker:\n  queue: ${ECW_T_UNSET}\n", "2:10",
	          "environment variable ECW_T_UNSET is not set (in worker.queue)");
	one_error("storage:\n  connection_string: \"AccountName=a;AccountKey=${ECW_T_UNSET}\"\n", "2:22",
	          "environment variable ECW_T_UNSET is not set (in storage.connection_string)");
	/* One error for the value, not a second one for its type. */
	one_error("worker:\n  batch_size: ${ECW_T_UNSET}\n", "2:15",
	          "environment variable ECW_T_UNSET is not set (in worker.batch_size)");
	/* Unknown keys' values are expanded too, so both are reported. */
	struct ecw_node_errors errs;
	parse_bad(&errs, "jobs:\n  a:\n    type: test-noop\n    tags: [x, '${ECW_T_UNSET}']\n", 2);
	error_is(&errs, 0, "4:5", "unknown key 'tags' in test job");
	error_is(&errs, 1, "4:15", "environment variable ECW_T_UNSET is not set (in jobs.a.tags[1])");
	ecw_node_errors_dispose(&errs);
}

static void test_node__env_default(void **state)
{
	(void)state;
	struct ecw_config *cfg =
	    parse_ok("worker:\n  queue: ${ECW_T_UNSET:-fallback-q}\n  batch_size: ${ECW_T_UNSET:-4}\n"
	             "log: {level: \"${ECW_T_UNSET:-}debug\"}\n");
	assert_str(cfg->worker.queue, "fallback-q");
	assert_int_equal(cfg->worker.batch_size, 4);
	assert_int_equal(cfg->log.level, ECW_LOG_DEBUG);
	ecw_config_free(cfg);
	/* Set wins; empty falls back (as in the shell). */
	setenv("ECW_T_SET", "set-q", 1);
	setenv("ECW_T_EMPTY", "", 1);
	cfg = parse_ok("worker: {queue: '${ECW_T_SET:-other}', poison_queue: \"${ECW_T_EMPTY:-empty-q}\"}\n");
	assert_str(cfg->worker.queue, "set-q");
	assert_str(cfg->worker.poison_queue, "empty-q");
	ecw_config_free(cfg);
	/* ${VAR} (no default) of an empty variable is empty. */
	cfg = parse_ok("metrics: {listen: \"${ECW_T_EMPTY}\"}\n");
	assert_str(cfg->metrics.listen, "");
	ecw_config_free(cfg);
	unsetenv("ECW_T_SET");
	unsetenv("ECW_T_EMPTY");
}

/* The expanded text, seen through the one free-text value the config keeps:
 * the connection string (here in an endpoint's path, which may hold '$'). */
#define CS_HEAD "AccountName=devstoreaccount1;AccountKey=" DEV_KEY ";QueueEndpoint=http://127.0.0.1:10001/"
#define CS_TAIL ";TableEndpoint=http://127.0.0.1:10002/t"
#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

static void expands_to(const char *in, const char *out)
{
	char text[512], want[512];

	snprintf(text, sizeof(text), "storage: {connection_string: '" CS_HEAD "%s" CS_TAIL "'}\n", in);
	snprintf(want, sizeof(want), CS_HEAD "%s" CS_TAIL, out);
	struct ecw_config *cfg = parse_ok(text);
	assert_str(cfg->storage.connection_string, want);
	ecw_config_free(cfg);
}

static void test_node__env_dollar(void **state)
{
	(void)state;
	setenv("ECW_T_SET", "x", 1);
	expands_to("a$$b", "a$b");
	expands_to("$${ECW_T_SET}", "${ECW_T_SET}");
	expands_to("$$$${X}", "$${X}");
	expands_to("a$b", "a$b"); /* a lone $ is itself */
	expands_to("a$", "a$");
	expands_to("$", "$");
	expands_to("$$", "$");
	expands_to("${ECW_T_SET}$$${ECW_T_SET}", "x$x");
	expands_to("${ECW_T_SET}}", "x}");
	expands_to("${ECW_T_SET}${ECW_T_SET:-y}${ECW_T_UNSET:-z}", "xxz");
	expands_to("${ECW_T_UNSET:-a$b}", "a$b"); /* the default is literal text */
	unsetenv("ECW_T_SET");
}

static void test_node__env_malformed(void **state)
{
	(void)state;
	one_error("worker: {queue: \"${ECW_T_SET\"}\n", "1:17",
	          "bad ${ECW_T_SET in worker.queue: expected '}' or ':-default}'");
	one_error("worker: {queue: \"${ECW_T_SET:-abc\"}\n", "1:17",
	          "bad ${ECW_T_SET in worker.queue: expected '}'");
	one_error("worker: {queue: \"${}\"}\n", "1:17", "bad ${...} in worker.queue: a variable name");
	one_error("worker: {queue: \"${1X}\"}\n", "1:17", "bad ${...} in worker.queue: a variable name");
	one_error("worker: {queue: \"${ A}\"}\n", "1:17", "bad ${...} in worker.queue");
	one_error("worker: {queue: \"${\"}\n", "1:17", "bad ${...} in worker.queue");
	one_error("worker: {queue: \"${A-b}\"}\n", "1:17",
	          "bad ${A in worker.queue: expected '}' or ':-default}'");
	one_error("worker: {queue: \"${A:b}\"}\n", "1:17",
	          "bad ${A in worker.queue: expected '}' or ':-default}'");
	one_error("worker: {queue: \"${A:-${B}}\"}\n", "1:17",
	          "bad ${A:-...} in worker.queue: the default cannot contain ${");
}

static void test_node__env_too_long(void **state)
{
	(void)state;
	size_t n = 600 * 1024;
	char *big = malloc(n + 1);
	assert_non_null(big);
	memset(big, 'a', n);
	big[n] = '\0';
	setenv("ECW_T_SET", big, 1);
	free(big);
	/* One is fine (the value is just wrong for the key); two pass the 1 MiB cap. */
	one_error("worker:\n  queue: ${ECW_T_SET}\n", "2:10", "worker.queue is not a valid queue name");
	one_error("worker:\n  queue: ${ECW_T_SET}${ECW_T_SET}\n", "2:10",
	          "worker.queue is longer than 1048576 bytes after expansion");
	unsetenv("ECW_T_SET");
}

static void test_node__env_keys_not_expanded(void **state)
{
	(void)state;
	setenv("ECW_T_SET", "worker", 1);
	one_error("${ECW_T_SET}: {}\n", "1:1", "unknown key '${ECW_T_SET}' in the top level");
	unsetenv("ECW_T_SET");
}

/* ---- secrets from files ------------------------------------------------------------ */

#define FILE_SECRET "topsecretfromafile0123456789"

/* A file of the test's with content (n bytes); its absolute path in path. */
static void secret_file(char *path, size_t cap, const char *content, size_t n)
{
	int fd;

	snprintf(path, cap, "/tmp/ecw-test-node-XXXXXX");
	assert_true((fd = mkstemp(path)) >= 0);
	assert_int_equal(write(fd, content, n), (ssize_t)n);
	assert_int_equal(close(fd), 0);
}

/* Parses head, path, tail expecting one error at pos containing needle; no error may show the file's
 * secret. */
static void file_error(const char *head, const char *path, const char *tail, const char *pos,
                       const char *needle)
{
	char text[4352];
	struct ecw_node_errors errs;

	snprintf(text, sizeof(text), "%s%s%s", head, path, tail);
	parse_bad(&errs, text, 1);
	error_is(&errs, 0, pos, needle);
	assert_false(str_contains(errs.lines[0], FILE_SECRET));
	ecw_node_errors_dispose(&errs);
}

static void test_node__file_expands_to_content(void **state)
{
	(void)state;
	char path[64], text[512];

	/* Trailing line ends go (echo, editors, Windows); the rest is taken as it is, never expanded. */
	secret_file(path, sizeof(path), "q${ECW_T_SET}$$x\r\n\n", 18);
	setenv("ECW_T_SET", "x", 1);
	snprintf(text, sizeof(text), "${file:%s}", path);
	expands_to(text, "q${ECW_T_SET}$$x");
	snprintf(text, sizeof(text), "a${file:%s}b${ECW_T_SET}", path);
	expands_to(text, "aq${ECW_T_SET}$$xbx");
	unlink(path);

	/* A secret from a file: the log redacts it. */
	secret_file(path, sizeof(path), FILE_SECRET "\n", strlen(FILE_SECRET) + 1);
	snprintf(text, sizeof(text), "worker: {queue: \"${file:%s}\"}\n", path);
	struct ecw_config *cfg = parse_ok(text);
	assert_str(cfg->worker.queue, FILE_SECRET);
	ecw_config_free(cfg);
	char log_path[] = "/tmp/ecw-test-node-log-XXXXXX", line[256] = "";
	int fd = mkstemp(log_path);
	assert_true(fd >= 0);
	ecw_log_set_fd(fd);
	ecw_log_msg(ECW_LOG_ERROR, "t", "the value is %s", FILE_SECRET);
	ecw_log_set_fd(2);
	assert_true(pread(fd, line, sizeof(line) - 1, 0) > 0);
	close(fd);
	unlink(log_path);
	assert_true(str_contains(line, "[REDACTED]"));
	assert_false(str_contains(line, FILE_SECRET));
	unlink(path);
}

static void test_node__file_errors(void **state)
{
	(void)state;
	char path[64], big_path[64];
	size_t big = 64 * 1024 + 1;
	char *content = malloc(big);

	/* Missing, relative, not a regular file, unclosed: each says which and where, at the value. */
	file_error(
	    "worker: {queue: \"${file:", "/nonexistent/ecw-secret", "}\"}\n", "1:17",
	    "${file:PATH} (in worker.queue): cannot read /nonexistent/ecw-secret: No such file or directory");
	file_error("worker: {queue: \"${file:", "secret.txt", "}\"}\n", "1:17",
	           "bad ${file:PATH} in worker.queue: PATH must be an absolute path");
	file_error("worker: {queue: \"${file:", "/tmp", "}\"}\n", "1:17", "/tmp is not a regular file");
	file_error("worker: {queue: \"${file:", "/tmp/x", "\"}\n", "1:17",
	           "bad ${file:PATH in worker.queue: expected '}'");
	/* Empty, or only line ends. */
	secret_file(path, sizeof(path), "\n", 1);
	file_error("storage: {connection_string: \"${file:", path, "}\"}\n", "1:30", "is empty");
	unlink(path);
	/* Over 64 KiB (of the secret, repeated): refused without a byte of it in the message. */
	assert_non_null(content);
	for (size_t i = 0; i < big; i++)
		content[i] = FILE_SECRET[i % strlen(FILE_SECRET)];
	secret_file(big_path, sizeof(big_path), content, big);
	file_error("storage: {connection_string: \"${file:", big_path, "}\"}\n", "1:30",
	           "is over 65536 bytes");
	unlink(big_path);
	/* Exactly 64 KiB is read (the value is then a bad queue name, said without it). */
	secret_file(big_path, sizeof(big_path), content, big - 1);
	file_error("worker: {queue: \"${file:", big_path, "}\"}\n", "1:17",
	           "worker.queue is not a valid queue name");
	unlink(big_path);
	free(content);
	/* A secret that makes the value wrong is not quoted in the error. */
	secret_file(path, sizeof(path), FILE_SECRET, strlen(FILE_SECRET));
	file_error("storage: {connection_string: \"${file:", path, "}\"}\n", "1:30",
	           "storage.connection_string");
	file_error("worker: {batch_size: \"${file:", path, "}\"}\n", "1:22", "worker.batch_size");
	unlink(path);
}

/* AZURE_STORAGE_CONNECTION_STRING_FILE stands for AZURE_STORAGE_CONNECTION_STRING, the default included. */
static void test_node__connection_string_file(void **state)
{
	(void)state;
	char path[64];
	struct ecw_node_errors errs;

	secret_file(path, sizeof(path), CS_HEAD "q" CS_TAIL "\n", strlen(CS_HEAD "q" CS_TAIL) + 1);
	setenv("AZURE_STORAGE_CONNECTION_STRING_FILE", path, 1);
	struct ecw_config *cfg = parse_ok("");
	assert_str(cfg->storage.connection_string, CS_HEAD "q" CS_TAIL);
	ecw_config_free(cfg);
	cfg = parse_ok("storage: {connection_string: \"${AZURE_STORAGE_CONNECTION_STRING}\"}\n");
	assert_str(cfg->storage.connection_string, CS_HEAD "q" CS_TAIL);
	ecw_config_free(cfg);

	/* Both set: which one was meant is not guessed. */
	setenv("AZURE_STORAGE_CONNECTION_STRING", "UseDevelopmentStorage=true", 1);
	one_error("", "1:1",
	          "both AZURE_STORAGE_CONNECTION_STRING and AZURE_STORAGE_CONNECTION_STRING_FILE are set "
	          "(in storage.connection_string): give one");
	/* In the file: there, and for the default that then applies (the value is left out). */
	parse_bad(&errs, "storage: {connection_string: \"${AZURE_STORAGE_CONNECTION_STRING}\"}\n", 2);
	error_is(&errs, 1, "1:30",
	         "both AZURE_STORAGE_CONNECTION_STRING and AZURE_STORAGE_CONNECTION_STRING_FILE");
	ecw_node_errors_dispose(&errs);
	unsetenv("AZURE_STORAGE_CONNECTION_STRING");
	unlink(path);

	/* Unreadable: named, with the variable that named it. */
	parse_bad(&errs, "", 1);
	assert_true(str_contains(errs.lines[0], "AZURE_STORAGE_CONNECTION_STRING_FILE"));
	assert_true(str_contains(errs.lines[0], path));
	assert_true(str_contains(errs.lines[0], "No such file or directory"));
	ecw_node_errors_dispose(&errs);
	unsetenv("AZURE_STORAGE_CONNECTION_STRING_FILE");
}

/* ---- the readers job types use ------------------------------------------------------ */

/* A small tree by hand: {s: "x", n: 5, q: "5", b: true, d: 90s, l: [a, b], m: {}, z: ~}. */
struct tree {
	struct ecw_node map, k[8], v[8], li[2];
	struct ecw_node *keys[8], *items[8], *list[2];
};

static void scalar(struct ecw_node *n, const char *value, bool quoted, int line)
{
	memset(n, 0, sizeof(*n));
	n->kind = ECW_NODE_SCALAR;
	n->value = (char *)value;
	n->quoted = quoted;
	n->line = line;
	n->col = 4;
	n->file = "h.yaml";
}

static void tree_init(struct tree *t)
{
	static const char *const keys[] = {"s", "n", "q", "b", "d", "l", "m", "z"};
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < 8; i++) {
		scalar(&t->k[i], keys[i], false, i + 1);
		t->k[i].col = 1;
		t->keys[i] = &t->k[i];
		t->items[i] = &t->v[i];
	}
	scalar(&t->v[0], "x", true, 1);
	scalar(&t->v[1], "5", false, 2);
	scalar(&t->v[2], "5", true, 3);
	scalar(&t->v[3], "true", false, 4);
	scalar(&t->v[4], "90s", false, 5);
	scalar(&t->li[0], "a", false, 6);
	scalar(&t->li[1], "b", true, 6);
	t->list[0] = &t->li[0];
	t->list[1] = &t->li[1];
	t->v[5] = (struct ecw_node){
	    .kind = ECW_NODE_SEQ, .line = 6, .col = 4, .file = "h.yaml", .items = t->list, .n = 2};
	t->v[6] = (struct ecw_node){.kind = ECW_NODE_MAP, .line = 7, .col = 4, .file = "h.yaml"};
	scalar(&t->v[7], "~", false, 8);
	t->map = (struct ecw_node){.kind = ECW_NODE_MAP,
	                           .line = 1,
	                           .col = 1,
	                           .file = "h.yaml",
	                           .keys = t->keys,
	                           .items = t->items,
	                           .n = 8};
}

static void test_node__readers(void **state)
{
	(void)state;
	struct tree t;
	struct ecw_node_errors errs;
	char *s = NULL, **list = NULL;
	long long n = 7;
	bool b = false, present = true;
	int64_t ms = 1;

	tree_init(&t);
	ecw_node_errors_init(&errs);

	assert_ptr_equal(ecw_node_get(&t.map, "d"), &t.v[4]);
	assert_null(ecw_node_get(&t.map, "nope"));
	assert_null(ecw_node_get(&t.v[0], "s"));
	assert_null(ecw_node_get(NULL, "s"));

	assert_int_equal(ecw_node_string(&s, &t.map, "s", true, &errs), 0);
	assert_str(s, "x");
	assert_int_equal(ecw_node_string(&s, &t.map, "n", true, &errs), 0); /* an old value is freed */
	assert_str(s, "5");
	assert_int_equal(ecw_node_string(&s, &t.map, "absent", false, &errs), 0);
	assert_str(s, "5");
	assert_int_equal(ecw_node_int(&n, &t.map, "n", 0, 10, true, &errs), 0);
	assert_int_equal(n, 5);
	assert_int_equal(ecw_node_int(&n, &t.map, "absent", 0, 10, false, &errs), 0);
	assert_int_equal(n, 5);
	assert_int_equal(ecw_node_bool(&b, &t.map, "b", false, &errs), 0);
	assert_true(b);
	assert_int_equal(ecw_node_duration(&ms, &t.map, "d", 0, 100000, false, &errs), 0);
	assert_int_equal(ms, 90000);
	assert_int_equal(ecw_node_string_list(&list, &present, &t.map, "l", &errs), 0);
	assert_true(present);
	assert_str(list[0], "a");
	assert_str(list[1], "b");
	assert_null(list[2]);
	assert_int_equal(ecw_node_string_list(&list, &present, &t.map, "absent", &errs), 0);
	assert_false(present);
	assert_non_null(list); /* kept */
	ecw_strv_free(list);
	list = NULL;
	/* A null list is an empty one. */
	assert_int_equal(ecw_node_string_list(&list, &present, &t.map, "z", &errs), 0);
	assert_true(present);
	assert_null(list[0]);
	ecw_strv_free(list);
	list = NULL;
	ecw_strv_free(NULL);
	assert_int_equal(errs.n, 0);

	/* Errors: bare key names (the caller knows its section), positions of the values. */
	assert_int_equal(ecw_node_int(&n, &t.map, "q", 0, 10, true, &errs), -1);
	assert_int_equal(ecw_node_int(&n, &t.map, "n", 6, 10, true, &errs), -1);
	assert_int_equal(ecw_node_int(&n, &t.map, "absent", 0, 10, true, &errs), -1);
	assert_int_equal(ecw_node_bool(&b, &t.map, "n", false, &errs), -1);
	assert_int_equal(ecw_node_duration(&ms, &t.map, "d", 0, 60000, false, &errs), -1);
	assert_int_equal(ecw_node_string(&s, &t.map, "m", false, &errs), -1);
	assert_int_equal(ecw_node_string(&s, &t.map, "z", false, &errs), -1);
	assert_int_equal(ecw_node_string_list(&list, &present, &t.map, "s", &errs), -1);
	assert_null(list);
	static const char *const allowed[] = {"s", "n", "q", "b", "d", "l", NULL};
	assert_int_equal(ecw_node_check_keys(&t.map, allowed, "the thing", &errs), 2);
	assert_int_equal(ecw_node_check_keys(NULL, allowed, "the thing", &errs), 0);
	assert_int_equal(n, 5);
	assert_str(s, "5");
	free(s);

	static const char *const want[] = {
	    "h.yaml:3:4: q must be an integer (0..10), not a quoted string",
	    "h.yaml:2:4: n is out of range (6..10)",
	    "h.yaml:1:1: missing required key 'absent' (an integer (0..10))",
	    "h.yaml:2:4: n must be true or false",
	    "h.yaml:5:4: d is out of range (0..1m)",
	    "h.yaml:7:4: m must be a string, not a map",
	    "h.yaml:8:4: z has no value (expected a string)",
	    "h.yaml:1:4: s must be a list of strings, not a value",
	    "h.yaml:7:1: unknown key 'm' in the thing (expected one of: s, n, q, b, d, l)",
	    "h.yaml:8:1: unknown key 'z' in the thing (expected one of: s, n, q, b, d, l)",
	};
	if (errs.n != sizeof(want) / sizeof(want[0]))
		config_dump(&errs);
	assert_int_equal(errs.n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < errs.n; i++)
		assert_str(errs.lines[i], want[i]);
	ecw_node_errors_dispose(&errs);
}

static void test_node__error_without_node(void **state)
{
	(void)state;
	struct ecw_node_errors errs;
	struct ecw_node at = {.kind = ECW_NODE_SCALAR, .line = 3, .col = 9, .file = "f.yaml"};

	ecw_node_errors_init(&errs);
	ecw_node_error(&errs, &at, "value %d is odd", 7);
	ecw_node_error(&errs, NULL, "outside any file");
	ecw_node_error(&errs, &at, "one\nline\tonly");
	assert_int_equal(errs.n, 3);
	assert_str(errs.lines[0], "f.yaml:3:9: value 7 is odd");
	assert_str(errs.lines[1], "<config>:1:1: outside any file");
	assert_str(errs.lines[2], "f.yaml:3:9: one?line?only");
	ecw_node_errors_dispose(&errs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_node__yaml_errors, setup),
	    cmocka_unit_test_setup(test_node__duplicate_key, setup),
	    cmocka_unit_test_setup(test_node__env_set, setup),
	    cmocka_unit_test_setup(test_node__env_unset, setup),
	    cmocka_unit_test_setup(test_node__env_default, setup),
	    cmocka_unit_test_setup(test_node__env_dollar, setup),
	    cmocka_unit_test_setup(test_node__env_malformed, setup),
	    cmocka_unit_test_setup(test_node__env_too_long, setup),
	    cmocka_unit_test_setup(test_node__env_keys_not_expanded, setup),
	    cmocka_unit_test_setup(test_node__file_expands_to_content, setup),
	    cmocka_unit_test_setup(test_node__file_errors, setup),
	    cmocka_unit_test_setup(test_node__connection_string_file, setup),
	    cmocka_unit_test_setup(test_node__readers, setup),
	    cmocka_unit_test_setup(test_node__error_without_node, setup),
	};
	return cmocka_run_group_tests_name("node", tests, NULL, NULL);
}
