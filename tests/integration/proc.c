/* SPDX-License-Identifier: MIT */
/* proc.c - see proc.h. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "proc.h"
#include "itest.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Azurite's well-known devstoreaccount1 key: it must never reach a log. */
#define WELL_KNOWN_KEY                                                                                       \
	"Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

#define MAX_TRACKED 64
#define MAX_FILES 512

static pid_t g_pids[MAX_TRACKED];
/* The files of the current test; scan: output of ours to check for secrets
 * (not the inputs the test wrote). */
static struct {
	char path[640];
	bool scan;
} g_files[MAX_FILES];
static size_t g_nfiles;
static char g_extra_secrets[8][256];
static size_t g_nextra;

/* ---- paths ------------------------------------------------------------------ */

/* BUILD when this binary is BUILD/tests/integration/NAME, else "". */
static const char *build_dir(void)
{
	static char dir[PATH_MAX];
	static bool done;

	if (!done) {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		done = true;
		if (n > 0) {
			exe[n] = '\0';
			for (int up = 0; up < 3; up++) {
				char *slash = strrchr(exe, '/');
				if (!slash)
					return dir;
				*slash = '\0';
			}
			if (strlen(exe) < sizeof(dir))
				memcpy(dir, exe, strlen(exe) + 1);
		}
	}
	return dir;
}

const char *proc_worker_bin(void)
{
	static char bin[PATH_MAX];
	const char *env = getenv("ECW_TEST_WORKER_BIN");

	if (env && *env)
		return env;
	if (!bin[0]) {
		if (build_dir()[0] &&
		    (size_t)snprintf(bin, sizeof(bin), "%s/ecworker-test", build_dir()) < sizeof(bin) &&
		    access(bin, X_OK) == 0)
			return bin;
		snprintf(bin, sizeof(bin), "build/ecworker-test");
	}
	return bin;
}

static const char *log_dir(void)
{
	static char dir[PATH_MAX];

	if (!dir[0]) {
		char parent[PATH_MAX - 16];
		int k;

		if (build_dir()[0])
			k = snprintf(parent, sizeof(parent), "%s/test-logs", build_dir());
		else
			k = snprintf(parent, sizeof(parent), "/tmp/ecw-itest-%ld", (long)getuid());
		assert_true(k > 0 && (size_t)k < sizeof(parent));
		k = snprintf(dir, sizeof(dir), "%s/proc", parent);
		assert_true(k > 0 && (size_t)k < sizeof(dir));
		mkdir(parent, 0755);
		if (mkdir(dir, 0755) != 0 && errno != EEXIST)
			fail_msg("cannot create %s: %s", dir, strerror(errno));
	}
	return dir;
}

void proc_path(char *out, size_t cap, const char *name)
{
	/* The pid keeps runs apart: several people may run the same test
	 * binary at once on one build directory. */
	const char *dot = strrchr(name, '.');
	int stem = dot ? (int)(dot - name) : (int)strlen(name);
	int k = snprintf(out, cap, "%s/%.*s.%ld%s", log_dir(), stem, name, (long)getpid(), dot ? dot : "");
	assert_true(k > 0 && (size_t)k < cap);
}

static void track_file(const char *path, bool scan)
{
	for (size_t i = 0; i < g_nfiles; i++)
		if (strcmp(g_files[i].path, path) == 0) {
			g_files[i].scan |= scan;
			return;
		}
	if (g_nfiles == MAX_FILES)
		fail_msg("more than %d files in one test", MAX_FILES);
	snprintf(g_files[g_nfiles].path, sizeof(g_files[0].path), "%s", path);
	g_files[g_nfiles++].scan = scan;
}

static void track_pid(pid_t pid)
{
	for (size_t i = 0; i < MAX_TRACKED; i++)
		if (g_pids[i] == 0) {
			g_pids[i] = pid;
			return;
		}
	fail_msg("more than %d processes started in one test", MAX_TRACKED);
}

static void untrack_pid(pid_t pid)
{
	for (size_t i = 0; i < MAX_TRACKED; i++)
		if (g_pids[i] == pid)
			g_pids[i] = 0;
}

void proc_write_file(char *out, size_t cap, const char *name, const char *text)
{
	FILE *f;

	proc_path(out, cap, name);
	track_file(out, false);
	f = fopen(out, "w");
	if (!f)
		fail_msg("cannot write %s: %s", out, strerror(errno));
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

char *proc_read_file(const char *path, size_t *len_out)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;

	if (len_out)
		*len_out = 0;
	if (!f)
		return strdup("");
	for (;;) {
		if (len + 65536 + 1 > cap) {
			cap = (cap + 65536 + 1) * 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		size_t n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	fclose(f);
	buf[len] = '\0';
	if (len_out)
		*len_out = len;
	return buf;
}

/* ---- processes ---------------------------------------------------------------- */

/* environ with the "K=V" entries of extra added or replacing theirs. */
static char **make_env(const char *const *extra)
{
	size_t n = 0, k = 0, i;
	char **env;

	while (environ[n])
		n++;
	for (i = 0; extra && extra[i]; i++)
		k++;
	env = calloc(n + k + 1, sizeof(*env));
	assert_non_null(env);
	k = 0;
	for (i = 0; i < n; i++) {
		bool replaced = false;
		const char *eq = strchr(environ[i], '=');
		size_t nl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
		for (size_t j = 0; extra && extra[j]; j++)
			if (strncmp(extra[j], environ[i], nl) == 0 && extra[j][nl] == '=')
				replaced = true;
		if (!replaced)
			env[k++] = environ[i];
	}
	for (i = 0; extra && extra[i]; i++)
		env[k++] = (char *)extra[i];
	env[k] = NULL;
	return env;
}

static pid_t spawn_program(const char *bin, const char *out_path, const char *err_path, bool append,
                           const char *const *args, const char *const *env)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, deflt;
	char **argv, **envp;
	size_t n = 0;
	pid_t pid;
	int rc;

	/* The build directory may be shared: someone's make can be relinking
	 * the binary right now (not yet executable, or busy). Wait a little. */
	for (int64_t end = itest_now_ms() + 15000; access(bin, X_OK) != 0;) {
		if (itest_now_ms() > end)
			fail_msg("the program %s is missing (%s): build it with `make %s` (the worker may "
			         "also be named by ECW_TEST_WORKER_BIN)",
			         bin, strerror(errno), bin);
		itest_sleep_ms(200);
	}
	while (args && args[n])
		n++;
	argv = calloc(n + 2, sizeof(*argv));
	assert_non_null(argv);
	argv[0] = (char *)bin;
	for (size_t i = 0; i < n; i++)
		argv[i + 1] = (char *)args[i];
	envp = make_env(env);

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, out_path,
	                                 O_WRONLY | O_CREAT | (append ? 0 : O_TRUNC) | O_APPEND, 0644);
	if (err_path && strcmp(err_path, out_path) != 0)
		posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND,
		                                 0644);
	else
		posix_spawn_file_actions_adddup2(&fa, 1, 2);
	/* The child starts with default dispositions and nothing blocked,
	 * whatever this test process (or cmocka) set up. */
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigemptyset(&deflt);
	sigaddset(&deflt, SIGTERM);
	sigaddset(&deflt, SIGINT);
	sigaddset(&deflt, SIGPIPE);
	sigaddset(&deflt, SIGSEGV);
	sigaddset(&deflt, SIGABRT);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &deflt);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	for (int tries = 0; (rc = posix_spawn(&pid, bin, &fa, &attr, argv, envp)) == ETXTBSY && tries < 50;
	     tries++)
		itest_sleep_ms(200);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	free(argv);
	free(envp);
	if (rc != 0)
		fail_msg("posix_spawn %s: %s", bin, strerror(rc));
	track_pid(pid);
	return pid;
}

static pid_t spawn(const char *out_path, const char *err_path, const char *const *args,
                   const char *const *env)
{
	return spawn_program(proc_worker_bin(), out_path, err_path, false, args, env);
}

void proc_start_program(struct proc *p, const char *name, const char *bin, const char *const *args,
                        const char *const *env)
{
	char file[160];

	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->bin, sizeof(p->bin), "%s", bin);
	snprintf(file, sizeof(file), "%s.log", name);
	proc_path(p->log_path, sizeof(p->log_path), file);
	track_file(p->log_path, true);
	p->pid = spawn_program(p->bin, p->log_path, NULL, false, args, env);
}

void proc_start(struct proc *p, const char *name, const char *const *args, const char *const *env)
{
	proc_start_program(p, name, proc_worker_bin(), args, env);
}

void proc_restart(struct proc *p, const char *const *args, const char *const *env)
{
	FILE *f;

	if (!p->exited || !p->bin[0])
		fail_msg("proc_restart(%s): it was never started or still runs", p->name);
	f = fopen(p->log_path, "a");
	if (!f)
		fail_msg("cannot append to %s: %s", p->log_path, strerror(errno));
	fputs("\n# restarted\n", f);
	assert_int_equal(fclose(f), 0);
	p->exited = false;
	p->status = 0;
	p->pid = spawn_program(p->bin, p->log_path, NULL, true, args, env);
}

const char *proc_tool_bin(const char *tool)
{
	static char bin[PATH_MAX];
	int k = build_dir()[0] ? snprintf(bin, sizeof(bin), "%s/tests/tools/%s", build_dir(), tool) : -1;

	if (k > 0 && (size_t)k < sizeof(bin) && access(bin, X_OK) == 0)
		return bin;
	k = snprintf(bin, sizeof(bin), "build/tests/tools/%s", tool);
	assert_true(k > 0 && (size_t)k < sizeof(bin));
	return bin;
}

void proc_start_worker(struct proc *p, const char *name, const char *config)
{
	const char *args[] = {"run", "-c", config, NULL};
	proc_start(p, name, args, NULL);
}

void proc_signal(struct proc *p, int sig)
{
	if (p->pid > 0 && !p->exited && kill(p->pid, sig) != 0)
		fail_msg("kill(%ld, %d): %s", (long)p->pid, sig, strerror(errno));
}

static bool reap(struct proc *p, bool block)
{
	int st;
	pid_t r;

	if (p->exited || p->pid <= 0)
		return true;
	do
		r = waitpid(p->pid, &st, block ? 0 : WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == p->pid) {
		p->exited = true;
		p->status = st;
		untrack_pid(p->pid);
		return true;
	}
	if (r < 0)
		fail_msg("waitpid(%ld): %s", (long)p->pid, strerror(errno));
	return false;
}

bool proc_wait(struct proc *p, int timeout_ms)
{
	int64_t end = itest_now_ms() + timeout_ms;

	for (;;) {
		if (reap(p, false))
			return true;
		if (itest_now_ms() >= end)
			return false;
		itest_sleep_ms(10);
	}
}

bool proc_alive(struct proc *p)
{
	return !reap(p, false);
}

int proc_exit_code(const struct proc *p)
{
	if (!p->exited)
		return -1;
	if (WIFEXITED(p->status))
		return WEXITSTATUS(p->status);
	if (WIFSIGNALED(p->status))
		return 128 + WTERMSIG(p->status);
	return -1;
}

void proc_stop(struct proc *p, int timeout_ms)
{
	int64_t t0 = itest_now_ms();

	if (!proc_alive(p))
		fail_msg("worker %s had already exited with status %d before SIGTERM; log %s:\n%s", p->name,
		         proc_exit_code(p), p->log_path, proc_tail(p->log_path, 30));
	proc_signal(p, SIGTERM);
	if (!proc_wait(p, timeout_ms))
		fail_msg("worker %s still running %d ms after SIGTERM; log %s:\n%s", p->name, timeout_ms,
		         p->log_path, proc_tail(p->log_path, 30));
	if (proc_exit_code(p) != 0)
		fail_msg("worker %s exited with status %d after SIGTERM (%lld ms), expected 0; log %s:\n%s",
		         p->name, proc_exit_code(p), (long long)(itest_now_ms() - t0), p->log_path,
		         proc_tail(p->log_path, 30));
}

int proc_run(char **out, char **err, const char *name, const char *const *args, const char *const *env,
             int timeout_ms)
{
	struct proc p;
	char file[160];

	memset(&p, 0, sizeof(p));
	snprintf(p.name, sizeof(p.name), "%s", name);
	snprintf(file, sizeof(file), "%s.out", name);
	proc_path(p.out_path, sizeof(p.out_path), file);
	snprintf(file, sizeof(file), "%s.err", name);
	proc_path(p.log_path, sizeof(p.log_path), file);
	track_file(p.out_path, true);
	track_file(p.log_path, true);
	p.pid = spawn(p.out_path, p.log_path, args, env);
	if (!proc_wait(&p, timeout_ms)) {
		kill(p.pid, SIGKILL);
		reap(&p, true);
		fail_msg("%s did not finish within %d ms; stderr:\n%s", name, timeout_ms,
		         proc_tail(p.log_path, 20));
	}
	if (out)
		*out = proc_read_file(p.out_path, NULL);
	if (err)
		*err = proc_read_file(p.log_path, NULL);
	return proc_exit_code(&p);
}

void proc_cleanup(void)
{
	for (size_t i = 0; i < MAX_TRACKED; i++) {
		if (g_pids[i] > 0) {
			int st;
			kill(g_pids[i], SIGKILL);
			while (waitpid(g_pids[i], &st, 0) < 0 && errno == EINTR)
				;
			g_pids[i] = 0;
		}
	}
	g_nfiles = 0;
	g_nextra = 0;
}

void proc_add_secret(const char *secret)
{
	assert_true(g_nextra < 8 && strlen(secret) < sizeof(g_extra_secrets[0]));
	snprintf(g_extra_secrets[g_nextra++], sizeof(g_extra_secrets[0]), "%s", secret);
}

/* ---- logs ------------------------------------------------------------------------- */

void proc_log_read(struct proc_log *out, const char *path)
{
	size_t len, cap = 0;
	char *line;

	memset(out, 0, sizeof(*out));
	out->text = proc_read_file(path, &len);
	line = out->text;
	while (line < out->text + len) {
		char *nl = memchr(line, '\n', (size_t)(out->text + len - line));
		size_t n = nl ? (size_t)(nl - line) : (size_t)(out->text + len - line);

		/* A line still being written has no newline yet: leave it. */
		if (!nl)
			break;
		if (n > 0 && line[0] == '{') {
			struct json_tokener *tok = json_tokener_new();
			struct json_object *o;
			assert_non_null(tok);
			o = json_tokener_parse_ex(tok, line, (int)n);
			if (o && json_tokener_get_parse_end(tok) == n &&
			    json_object_is_type(o, json_type_object)) {
				if (out->n == cap) {
					cap = cap ? cap * 2 : 256;
					out->lines = realloc(out->lines, cap * sizeof(*out->lines));
					assert_non_null(out->lines);
				}
				out->lines[out->n++] = o;
			} else {
				json_object_put(o);
			}
			json_tokener_free(tok);
		}
		line += n + 1;
	}
}

void proc_log_dispose(struct proc_log *log)
{
	for (size_t i = 0; i < log->n; i++)
		json_object_put(log->lines[i]);
	free(log->lines);
	free(log->text);
	memset(log, 0, sizeof(*log));
}

const char *proc_field(struct json_object *line, const char *key)
{
	struct json_object *v;

	if (!line || !json_object_object_get_ex(line, key, &v) || !v)
		return "";
	return json_object_get_string(v);
}

long long proc_field_int(struct json_object *line, const char *key, long long missing)
{
	struct json_object *v;

	if (!line || !json_object_object_get_ex(line, key, &v) || !v)
		return missing;
	return (long long)json_object_get_int64(v);
}

#define MAX_PAIRS 8

const char PROC_ANY[] = "<any value>";

struct match {
	const char *event;
	const char *keys[MAX_PAIRS], *values[MAX_PAIRS];
	int n;
};

static void match_init(struct match *m, const char *event, va_list ap)
{
	const char *k;

	m->event = event;
	m->n = 0;
	while ((k = va_arg(ap, const char *)) != NULL) {
		assert_true(m->n < MAX_PAIRS);
		m->keys[m->n] = k;
		m->values[m->n] = va_arg(ap, const char *);
		if (!m->values[m->n])
			fail_msg("log match: NULL value for \"%s\" (use PROC_ANY; the list ends with one "
			         "NULL key)",
			         k);
		m->n++;
	}
}

static bool matches(struct json_object *line, const struct match *m)
{
	struct json_object *v;

	if (m->event && strcmp(proc_field(line, "event"), m->event) != 0)
		return false;
	for (int i = 0; i < m->n; i++) {
		if (!json_object_object_get_ex(line, m->keys[i], &v) || !v)
			return false;
		if (m->values[i] != PROC_ANY && strcmp(json_object_get_string(v), m->values[i]) != 0)
			return false;
	}
	return true;
}

static size_t count_matching(const struct proc_log *log, const struct match *m)
{
	size_t n = 0;

	for (size_t i = 0; i < log->n; i++)
		n += matches(log->lines[i], m);
	return n;
}

size_t proc_log_count(const struct proc_log *log, const char *event, ...)
{
	struct match m;
	va_list ap;

	va_start(ap, event);
	match_init(&m, event, ap);
	va_end(ap);
	return count_matching(log, &m);
}

struct json_object *proc_log_find(const struct proc_log *log, size_t nth, const char *event, ...)
{
	struct match m;
	va_list ap;

	va_start(ap, event);
	match_init(&m, event, ap);
	va_end(ap);
	for (size_t i = 0; i < log->n; i++)
		if (matches(log->lines[i], &m) && nth-- == 0)
			return log->lines[i];
	return NULL;
}

size_t proc_count(const struct proc *p, const char *event, ...)
{
	struct proc_log log;
	struct match m;
	va_list ap;
	size_t n;

	va_start(ap, event);
	match_init(&m, event, ap);
	va_end(ap);
	proc_log_read(&log, p->log_path);
	n = count_matching(&log, &m);
	proc_log_dispose(&log);
	return n;
}

bool proc_wait_count(struct proc *p, size_t want, int timeout_ms, const char *event, ...)
{
	int64_t end = itest_now_ms() + timeout_ms;
	struct match m;
	va_list ap;

	va_start(ap, event);
	match_init(&m, event, ap);
	va_end(ap);
	for (;;) {
		bool gone = !proc_alive(p);
		struct proc_log log;
		size_t n;

		proc_log_read(&log, p->log_path);
		n = count_matching(&log, &m);
		proc_log_dispose(&log);
		if (n >= want)
			return true;
		if (gone || itest_now_ms() >= end)
			return false;
		itest_sleep_ms(100);
	}
}

const char *proc_tail(const char *path, int n)
{
	static char buf[6000];
	char *text = proc_read_file(path, NULL);
	size_t len = strlen(text);
	const char *start = text + len;
	int lines = 0;

	while (start > text && lines <= n) {
		start--;
		if (*start == '\n')
			lines++;
	}
	if (*start == '\n')
		start++;
	len = strlen(start);
	if (len >= sizeof(buf))
		start += len - (sizeof(buf) - 1);
	snprintf(buf, sizeof(buf), "%s", start);
	free(text);
	return buf;
}

/* ---- secrets -------------------------------------------------------------------------- */

/* The AccountKey value of ECW_TEST_CONNECTION_STRING, or "". */
static void connstr_key(char *out, size_t cap)
{
	const char *cs = getenv("ECW_TEST_CONNECTION_STRING");

	out[0] = '\0';
	while (cs && *cs) {
		const char *end = strchr(cs, ';');
		size_t n = end ? (size_t)(end - cs) : strlen(cs);
		if (n > 11 && strncasecmp(cs, "AccountKey=", 11) == 0 && n - 11 < cap) {
			memcpy(out, cs + 11, n - 11);
			out[n - 11] = '\0';
		}
		cs = end ? end + 1 : NULL;
	}
}

/* s with every '/' written as "\/" (json-c's default escaping). */
static void slash_escaped(char *out, size_t cap, const char *s)
{
	size_t k = 0;

	for (; *s && k + 3 < cap; s++) {
		if (*s == '/')
			out[k++] = '\\';
		out[k++] = *s;
	}
	out[k] = '\0';
}

static const char *find_bytes(const char *hay, size_t n, const char *needle)
{
	size_t k = strlen(needle);

	for (size_t i = 0; k && i + k <= n; i++)
		if (memcmp(hay + i, needle, k) == 0)
			return hay + i;
	return NULL;
}

static void check_file(const char *path)
{
	char keys[10][256], escaped[10][512];
	size_t len, nkeys = 2;
	char *text = proc_read_file(path, &len);

	snprintf(keys[0], sizeof(keys[0]), "%s", WELL_KNOWN_KEY);
	connstr_key(keys[1], sizeof(keys[1]));
	for (size_t i = 0; i < g_nextra; i++)
		snprintf(keys[nkeys++], sizeof(keys[0]), "%s", g_extra_secrets[i]);
	for (size_t i = 0; i < nkeys; i++)
		slash_escaped(escaped[i], sizeof(escaped[i]), keys[i]);
	for (size_t i = 0; i < nkeys; i++) {
		const char *pats[2] = {keys[i], escaped[i]};
		for (int j = 0; j < 2; j++) {
			if (strlen(pats[j]) < 8)
				continue;
			const char *hit = find_bytes(text, len, pats[j]);
			if (hit) {
				int line = 1;
				for (const char *q = text; q < hit; q++)
					line += *q == '\n';
				free(text);
				fail_msg("%s:%d contains secret #%zu (0: Azurite's key, 1: the test key, "
				         "2..: added)",
				         path, line, i);
			}
		}
	}
	for (size_t i = 0; i + 11 <= len; i++) {
		if (strncasecmp(text + i, "AccountKey=", 11) == 0) {
			int line = 1;
			char excerpt[200];
			for (size_t q = 0; q < i; q++)
				line += text[q] == '\n';
			snprintf(excerpt, sizeof(excerpt), "%.*s", (int)(len - i < 120 ? len - i : 120),
			         text + i);
			free(text);
			fail_msg("%s:%d contains \"AccountKey=\": ...%s", path, line, excerpt);
		}
	}
	free(text);
}

void proc_assert_logs_clean(void)
{
	const char *keep = getenv("ECW_TEST_KEEP_LOGS");

	for (size_t i = 0; i < g_nfiles; i++)
		if (g_files[i].scan)
			check_file(g_files[i].path);
	if (keep && *keep && strcmp(keep, "0") != 0)
		return;
	for (size_t i = 0; i < g_nfiles; i++)
		unlink(g_files[i].path);
	g_nfiles = 0;
}

/* ---- a private Azurite ------------------------------------------------------------ */

const char *proc_azurite_bin(void)
{
	static char bin[PATH_MAX];
	const char *env = getenv("ECW_TEST_AZURITE_BIN");
	char dir[PATH_MAX];

	if (env && *env)
		return access(env, X_OK) == 0 ? env : NULL;
	if (access("tests/node_modules/.bin/azurite", X_OK) == 0)
		return "tests/node_modules/.bin/azurite";
	/* BUILD/.., BUILD/../.. (build/asan): the source tree. */
	snprintf(dir, sizeof(dir), "%s", build_dir());
	for (int up = 0; dir[0] && up < 3; up++) {
		int k = snprintf(bin, sizeof(bin), "%s/tests/node_modules/.bin/azurite", dir);
		if (k > 0 && (size_t)k < sizeof(bin) && access(bin, X_OK) == 0)
			return bin;
		char *slash = strrchr(dir, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	return NULL;
}

/* The port in "Azurite SVC service is successfully listening at http://HOST:PORT". */
static int listening_port(const char *log, const char *svc)
{
	char pat[96];
	const char *p = log, *hit = NULL;

	snprintf(pat, sizeof(pat), "Azurite %s service is successfully listening at http://", svc);
	while ((p = strstr(p, pat)) != NULL)
		hit = p++;
	if (!hit)
		return 0;
	hit += strlen(pat);
	const char *colon = strchr(hit, ':');
	return colon ? (int)strtol(colon + 1, NULL, 10) : 0;
}

/* Starts Azurite: in memory (d NULL) or on disk at d->location. */
static bool azurite_start(struct proc_azurite *az, const char *name, const struct proc_azurite_disk *d)
{
	const char *bin = proc_azurite_bin();
	char file[160], ports[64];
	posix_spawn_file_actions_t fa;
	int rc;

	memset(az, 0, sizeof(*az));
	if (!bin) {
		print_message(
		    "note: no azurite script (set ECW_TEST_AZURITE_BIN): %s uses the shared Azurite\n", name);
		return false;
	}
	snprintf(file, sizeof(file), "%s.azurite.log", name);
	proc_path(az->log_path, sizeof(az->log_path), file);
	track_file(az->log_path, false);
	snprintf(ports, sizeof(ports), "%d %d", d ? d->queue_port : 0, d ? d->table_port : 0);
	/* From the log directory, so nothing it might write lands elsewhere;
	 * exec, so the pid is Azurite's own. $3: the location ("" in memory),
	 * $4 and $5: the ports. */
	const char *argv[] = {
	    "/bin/sh",
	    "-c",
	    "cd \"$1\" && bin=$2 loc=$3 && set -- $4 && q=$1 t=$2 && "
	    "if [ -n \"$loc\" ]; then set -- --location \"$loc\"; else set -- --inMemoryPersistence; fi && "
	    "exec \"$bin\" \"$@\" --skipApiVersionCheck --disableTelemetry "
	    "--blobHost 127.0.0.1 --blobPort 0 --queueHost 127.0.0.1 --queuePort \"$q\" "
	    "--tableHost 127.0.0.1 --tablePort \"$t\"",
	    "sh",
	    log_dir(),
	    bin,
	    d ? d->location : "",
	    ports,
	    NULL};
	char cwd[PATH_MAX - 256], abs_bin[PATH_MAX];
	if (bin[0] != '/' && getcwd(cwd, sizeof(cwd))) {
		int k = snprintf(abs_bin, sizeof(abs_bin), "%s/%s", cwd, bin);
		if (k > 0 && (size_t)k < sizeof(abs_bin))
			argv[5] = abs_bin;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, az->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	rc = posix_spawn(&az->pid, "/bin/sh", &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		fail_msg("posix_spawn azurite: %s", strerror(rc));
	track_pid(az->pid);

	int64_t end = itest_now_ms() + 30000;
	for (;;) {
		char *log = proc_read_file(az->log_path, NULL);
		az->queue_port = listening_port(log, "Queue");
		az->table_port = listening_port(log, "Table");
		free(log);
		if (az->queue_port > 0 && az->table_port > 0)
			break;
		int st;
		if (waitpid(az->pid, &st, WNOHANG) == az->pid) {
			untrack_pid(az->pid);
			az->pid = 0;
			fail_msg("the private Azurite exited during start-up:\n%s",
			         proc_tail(az->log_path, 20));
		}
		if (itest_now_ms() > end)
			fail_msg("the private Azurite did not report its ports in 30 s:\n%s",
			         proc_tail(az->log_path, 20));
		itest_sleep_ms(50);
	}
	snprintf(az->connstr, sizeof(az->connstr),
	         "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=%s;"
	         "QueueEndpoint=http://127.0.0.1:%d/devstoreaccount1;TableEndpoint=http://127.0.0.1:%d/"
	         "devstoreaccount1;",
	         WELL_KNOWN_KEY, az->queue_port, az->table_port);
	return true;
}

bool proc_azurite_start(struct proc_azurite *az, const char *name)
{
	return azurite_start(az, name, NULL);
}

bool proc_azurite_start_on_disk(struct proc_azurite *az, const char *name, const struct proc_azurite_disk *d)
{
	return azurite_start(az, name, d);
}

long proc_azurite_terminate(struct proc_azurite *az, int timeout_ms)
{
	int64_t t0 = itest_now_ms();
	int st;

	if (az->pid <= 0)
		return 0;
	kill(az->pid, SIGTERM);
	for (;;) {
		pid_t r = waitpid(az->pid, &st, WNOHANG);
		if (r == az->pid || (r < 0 && errno != EINTR))
			break;
		if (itest_now_ms() - t0 > timeout_ms)
			fail_msg("Azurite (pid %ld) still runs %d ms after SIGTERM:\n%s", (long)az->pid,
			         timeout_ms, proc_tail(az->log_path, 20));
		itest_sleep_ms(20);
	}
	untrack_pid(az->pid);
	az->pid = 0;
	return (long)(itest_now_ms() - t0);
}

void proc_make_dir(char *out, size_t cap, const char *name)
{
	proc_path(out, cap, name);
	proc_dir_remove(out); /* a dead run's, with the same pid */
	if (mkdir(out, 0700) != 0)
		fail_msg("cannot create %s: %s", out, strerror(errno));
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void proc_dir_remove(const char *path)
{
	nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void proc_azurite_stop(struct proc_azurite *az)
{
	int st;

	if (az->pid <= 0)
		return;
	/* In memory: nothing to lose, and no GC pause to wait out. */
	kill(az->pid, SIGKILL);
	while (waitpid(az->pid, &st, 0) < 0 && errno == EINTR)
		;
	untrack_pid(az->pid);
	az->pid = 0;
}

/* ---- HTTP ------------------------------------------------------------------------------- */

struct body {
	char *p;
	size_t n;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *payload)
{
	struct body *b = payload;
	size_t n = size * nmemb;
	char *np = realloc(b->p, b->n + n + 1);

	if (!np)
		return 0;
	b->p = np;
	memcpy(b->p + b->n, data, n);
	b->n += n;
	b->p[b->n] = '\0';
	return n;
}

int proc_http_get(char **body, int port, const char *path)
{
	CURL *h = curl_easy_init();
	struct body b = {NULL, 0};
	char url[256];
	long status = 0;

	if (body)
		*body = NULL;
	assert_non_null(h);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	if (body)
		*body = b.p ? b.p : strdup("");
	else
		free(b.p);
	return (int)status;
}

int proc_free_port(void)
{
	/* Never hand out the same port twice in one process: several workers
	 * started together each need their own. */
	static int given[256];
	static size_t ngiven;

	for (int tries = 0; tries < 50; tries++) {
		struct sockaddr_in sa;
		socklen_t slen = sizeof(sa);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		bool dup = false;
		int port;

		assert_true(fd >= 0);
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &slen), 0);
		close(fd);
		port = ntohs(sa.sin_port);
		for (size_t i = 0; i < ngiven; i++)
			dup |= given[i] == port;
		if (dup)
			continue;
		if (ngiven < sizeof(given) / sizeof(given[0]))
			given[ngiven++] = port;
		return port;
	}
	fail_msg("no free port");
	return -1;
}

double proc_metric(const char *page, const char *name, int *found, ...)
{
	const char *want[16];
	int nwant = 0, nfound = 0;
	size_t nn = strlen(name);
	double sum = 0;
	va_list ap;

	va_start(ap, found);
	while (nwant < 16 && (want[nwant] = va_arg(ap, const char *)) != NULL)
		nwant++;
	va_end(ap);
	for (const char *l = page; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char line[1024];

		/* name{labels} value, or name value: the value follows the
		 * last '}' (label values here never hold one). */
		if (len < sizeof(line) && l[0] != '#' && strncmp(l, name, nn) == 0 &&
		    (l[nn] == '{' || l[nn] == ' ')) {
			const char *labels_end;
			bool ok = true;
			memcpy(line, l, len);
			line[len] = '\0';
			labels_end = line[nn] == '{' ? strrchr(line, '}') : line + nn - 1;
			for (int i = 0; ok && i < nwant; i++) {
				const char *hit = strstr(line, want[i]);
				ok = hit && labels_end && hit < labels_end;
			}
			if (ok && labels_end) {
				char *endp;
				double v = strtod(labels_end + 1, &endp);
				if (endp != labels_end + 1) {
					sum += v;
					nfound++;
				}
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	if (found)
		*found = nfound;
	return sum;
}

long long proc_table_writes(const char *page)
{
	/* With the closing quote, so that "table.upsert" is not also
	 * "table.upsert_merge", nor "table.delete" "table.delete_table". */
	static const char *const ops[] = {
	    "op=\"table.insert\"", "op=\"table.upsert\"", "op=\"table.upsert_merge\"", "op=\"table.update\"",
	    "op=\"table.merge\"",  "op=\"table.delete\"", "op=\"table.batch\"",        NULL};
	long long n = 0;

	for (int i = 0; ops[i]; i++)
		n += (long long)proc_metric(page, "ecw_storage_requests_total", NULL, ops[i], NULL);
	return n;
}

/* ---- the official Azure SDK for JavaScript ---------------------------------------- */

int proc_sdk(char **out, const char *const *args)
{
	const char *argv[16] = {"node", "tests/interop/sdk.js"};
	char err_path[640];
	int outp[2], status = -1;
	posix_spawn_file_actions_t fa;
	struct ecw_buf b;
	pid_t pid;
	size_t n = 2;

	if (access("tests/interop/sdk.js", R_OK) != 0)
		fail_msg("tests/interop/sdk.js not found: run from the repository root");
	for (; args[n - 2] && n < 15; n++)
		argv[n] = args[n - 2];
	argv[n] = NULL;
	proc_path(err_path, sizeof(err_path), "sdk.err");
	assert_int_equal(pipe(outp), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addclose(&fa, outp[0]);
	assert_int_equal(posix_spawnp(&pid, "node", &fa, NULL, (char *const *)argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(outp[1]);
	ecw_buf_init(&b, 0);
	for (;;) {
		char buf[4096];
		ssize_t k = read(outp[0], buf, sizeof(buf));
		if (k <= 0)
			break;
		assert_int_equal(ecw_buf_add(&b, buf, (size_t)k), 0);
	}
	close(outp[0]);
	waitpid(pid, &status, 0);
	status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	if (status != 0)
		print_error("sdk.js %s %s: exit %d: %s\n", args[0], args[1] ? args[1] : "", status,
		            proc_tail(err_path, 5));
	unlink(err_path);
	if (out)
		*out = ecw_buf_take(&b);
	ecw_buf_dispose(&b);
	return status;
}

void proc_env_connstr(char *out, size_t cap, const char *connstr, int qport, int tport)
{
	const char *k = strstr(connstr, "AccountKey=");
	char key[128];

	ITEST_CHECK(k, "the connection string has no AccountKey");
	k += strlen("AccountKey=");
	snprintf(key, sizeof(key), "%.*s", (int)strcspn(k, ";"), k);
	snprintf(out, cap,
	         "ECW_TEST_CONNECTION_STRING=DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
	         "AccountKey=%s;QueueEndpoint=http://127.0.0.1:%d/devstoreaccount1;"
	         "TableEndpoint=http://127.0.0.1:%d/devstoreaccount1;",
	         key, qport, tport);
}

void proc_proxied_storage(struct proc_proxied *out)
{
	int qport = proc_free_port(), tport = proc_free_port();
	const char *azq = getenv("ECW_TEST_QUEUE_PORT"), *azt = getenv("ECW_TEST_TABLE_PORT");

	ITEST_CHECK(azq && azt, "needs the Azurite ports");
	proc_env_connstr(out->envcs, sizeof(out->envcs), itest_connstr(), qport, tport);
	snprintf(out->map_q, sizeof(out->map_q), "%d:127.0.0.1:%s", qport, azq);
	snprintf(out->map_t, sizeof(out->map_t), "%d:127.0.0.1:%s", tport, azt);
}

long long proc_proxy_stat(const char *stats_path, const char *name)
{
	struct json_object *st = json_object_from_file(stats_path), *in = st, *v = NULL;
	const char *key = name;
	long long n;

	if (strncmp(name, "faults.", 7) == 0) {
		key = name + 7;
		if (!st || !json_object_object_get_ex(st, "faults", &in))
			in = NULL;
	}
	ITEST_CHECK(in && json_object_object_get_ex(in, key, &v), "faultproxy left no \"%s\" in %s", name,
	            stats_path);
	n = (long long)json_object_get_int64(v);
	json_object_put(st);
	return n;
}
