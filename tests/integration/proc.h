/* SPDX-License-Identifier: MIT */
/* proc.h - process-level helpers for the integration tests that run the
 * worker binary (build/ecworker-test, with the test-only job types): start it
 * with posix_spawn (stdout and stderr to a log file), send signals, wait for
 * its exit with a timeout, write config files, read its JSON log lines back
 * (and wait for them as an assertion) and its metrics, and check every log a
 * test produced for secrets. A struct proc is owned by
 * the caller; the module also remembers each process it started, so
 * proc_cleanup() (from a teardown) can SIGKILL what a failed assertion left
 * running, and each log file, so proc_assert_logs_clean() can read them all.
 * Strings returned by proc_* are heap copies unless said otherwise. */
#ifndef ECW_PROC_H
#define ECW_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct json_object;

struct proc {
	pid_t pid;   /* 0 before start and after reaping */
	bool exited; /* reaped: status is valid */
	int status;  /* waitpid() status */
	char name[96];
	char log_path[640]; /* stdout + stderr (proc_start), stderr (proc_run) */
	char out_path[640]; /* proc_run: stdout */
	char bin[640];      /* the program started (proc_restart starts it again) */
};

/* The worker: $ECW_TEST_WORKER_BIN, else ecworker-test in the build directory
 * this test binary lives in (BUILD/tests/integration/test_x -> BUILD/), else
 * "build/ecworker-test" relative to the working directory. */
const char *proc_worker_bin(void);

/* A path for a log or config in BUILD/test-logs/proc (created on first use):
 * "DIR/STEM.PID.EXT" for name "STEM.EXT", so that runs of the same binary at
 * the same time (one build directory, several people) never share a file. */
void proc_path(char *out, size_t cap, const char *name);

/* Writes text to proc_path(name) and returns the path in out. The file is
 * one of the test's files (see proc_assert_logs_clean), not checked for
 * secrets: a test may write one on purpose. */
void proc_write_file(char *out, size_t cap, const char *name, const char *text);

/* Starts the worker binary with args (NULL-terminated, without argv[0]),
 * stdin /dev/null, stdout and stderr appended to DIR/<name>.log (truncated
 * first). env: extra "K=V" entries (NULL-terminated, may be NULL) added to or
 * replacing this process's environment. Fails the test when it cannot. */
void proc_start(struct proc *p, const char *name, const char *const *args, const char *const *env);

/* The same with another program (e.g. proc_tool_bin("faultproxy")). */
void proc_start_program(struct proc *p, const char *name, const char *bin, const char *const *args,
                        const char *const *env);

/* Starts p's program again after it exited (a worker SIGKILLed by a test),
 * with the same name and log: the new output is appended after a line
 * "# restarted" (not JSON, so log readers skip it), so one log holds every
 * run of one worker. */
void proc_restart(struct proc *p, const char *const *args, const char *const *env);

/* A test tool, tests/tools/NAME.c: BUILD/tests/tools/NAME beside this
 * binary's build directory, else build/tests/tools/NAME. Static buffer. */
const char *proc_tool_bin(const char *tool);

/* `ecworker-test run -c config`. */
void proc_start_worker(struct proc *p, const char *name, const char *config);

void proc_signal(struct proc *p, int sig);

/* Waits up to timeout_ms for p to exit; true when it did (status set). */
bool proc_wait(struct proc *p, int timeout_ms);

/* True while p runs (reaps it, without blocking, when it has exited). */
bool proc_alive(struct proc *p);

/* The exit status, 128 + N when killed by signal N, -1 while running. */
int proc_exit_code(const struct proc *p);

/* SIGTERM, then asserts a clean exit (status 0) within timeout_ms. */
void proc_stop(struct proc *p, int timeout_ms);

/* Runs the worker binary to completion (killed after timeout_ms), stdout and
 * stderr to separate files, and returns its exit code; *out and *err (may be
 * NULL) receive what it printed (free() them). */
int proc_run(char **out, char **err, const char *name, const char *const *args, const char *const *env,
             int timeout_ms);

/* ---- the log ----------------------------------------------------------- */

/* A log file read back: every line, and the JSON objects among them. */
struct proc_log {
	char *text;                 /* the whole file */
	struct json_object **lines; /* one per line that is a JSON object */
	size_t n;
};

void proc_log_read(struct proc_log *out, const char *path);
void proc_log_dispose(struct proc_log *log);

/* Lines with "event" equal to event (NULL: any) and, for each following
 * KEY, VALUE pair (the list ends with one NULL key), the field KEY present
 * with the value VALUE (compared as text: 1 matches "1"; VALUE PROC_ANY:
 * present with any value). */
extern const char PROC_ANY[];

size_t proc_log_count(const struct proc_log *log, const char *event, ...);
/* The nth (0-based) such line, or NULL; owned by log. */
struct json_object *proc_log_find(const struct proc_log *log, size_t nth, const char *event, ...);

/* The same, reading p's log afresh. */
size_t proc_count(const struct proc *p, const char *event, ...);

/* Polls p's log until at least want lines match (true), timeout_ms passes
 * or p has exited and its log still lacks them (false). */
bool proc_wait_count(struct proc *p, size_t want, int timeout_ms, const char *event, ...);

/* proc_wait_count as an assertion (the arguments after ms without the
 * closing NULL): fails the test, showing whether p still runs and the end of
 * its log, unless want lines match within ms. Uses cmocka's fail_msg. */
#define PROC_EXPECT_LOG(p, want, ms, ...)                                                                    \
	do {                                                                                                 \
		if (!proc_wait_count((p), (want), (ms), __VA_ARGS__, NULL))                                  \
			fail_msg("%s: expected %d log line(s) matching (%s) within %d ms (worker %s); log "  \
			         "%s:\n%s",                                                                  \
			         (p)->name, (int)(want), #__VA_ARGS__, (int)(ms),                            \
			         proc_alive(p) ? "running" : "EXITED", (p)->log_path,                        \
			         proc_tail((p)->log_path, 30));                                              \
	} while (0)

/* A field of a log line as text ("" when absent); owned by the line. */
const char *proc_field(struct json_object *line, const char *key);
long long proc_field_int(struct json_object *line, const char *key, long long missing);

/* The last n lines of a file, for failure messages (static buffer). */
const char *proc_tail(const char *path, int n);

/* Fails when any log or output file of a process started since the last
 * proc_cleanup() contains the account key (of ECW_TEST_CONNECTION_STRING, and
 * Azurite's well-known one; raw or JSON-escaped) or "AccountKey=" (any case).
 * Call it as a test's last step: when it passes it deletes those files and
 * the ones proc_write_file wrote (unless $ECW_TEST_KEEP_LOGS is set), so only
 * failed tests leave theirs. */
void proc_assert_logs_clean(void);

/* One more string proc_assert_logs_clean() looks for (copied), until the
 * next proc_cleanup(): e.g. a wrong key a test handed to the worker. */
void proc_add_secret(const char *secret);

/* Kills (SIGKILL) and reaps every process started since the last call and
 * forgets the files. For teardowns; never fails. */
void proc_cleanup(void);

/* ---- a private Azurite ------------------------------------------------------ */

/* An in-memory Azurite of a test's own, for heavy tests: Azurite's queue GC
 * runs every 60 s and, after thousands of messages were deleted, blocks the
 * whole service for tens of seconds (Azurite 3.37, O(n^2) extent deletion),
 * which would stall whatever test or binary comes next on the shared one. */
struct proc_azurite {
	pid_t pid;
	int queue_port, table_port;
	char connstr[512]; /* like ECW_TEST_CONNECTION_STRING, for this one */
	char log_path[640];
};

/* The azurite script: $ECW_TEST_AZURITE_BIN, else tests/node_modules/.bin/
 * azurite below the working directory or a parent of this binary's; NULL
 * when none is found. */
const char *proc_azurite_bin(void);

/* Starts one (queue and table on ports it picks) and waits until both
 * listen. Returns false, having printed why, when there is no azurite
 * script; fails the test when it does not come up. */
bool proc_azurite_start(struct proc_azurite *az, const char *name);
void proc_azurite_stop(struct proc_azurite *az);

/* One that keeps its state on disk in location (an existing directory),
 * with no --inMemoryPersistence; queue_port and table_port 0 pick free ports,
 * others are used as given: to start it again where it was (same location,
 * the ports of the first start), as after a crash or an upgrade. */
struct proc_azurite_disk {
	const char *location;
	int queue_port, table_port;
};
bool proc_azurite_start_on_disk(struct proc_azurite *az, const char *name, const struct proc_azurite_disk *d);

/* SIGTERM, as a service manager stops it (Azurite saves its state), and
 * waits up to timeout_ms for the exit; fails the test when it does not
 * exit. Returns the ms it took. */
long proc_azurite_terminate(struct proc_azurite *az, int timeout_ms);

/* A fresh directory proc_path(name) for a test's files (an Azurite
 * location); proc_dir_remove deletes it with everything in it. */
void proc_make_dir(char *out, size_t cap, const char *name);
void proc_dir_remove(const char *path);

/* ---- HTTP (the metrics endpoint) ----------------------------------------- */

/* GET http://127.0.0.1:port/path; returns the HTTP status (0 when no answer)
 * and, when body is not NULL, the body (free() it). */
int proc_http_get(char **body, int port, const char *path);

/* A free TCP port on 127.0.0.1 (bound, read and closed again). */
int proc_free_port(void);

/* A worker's storage behind two free ports (queue, table) that faultproxy
 * passes on to Azurite: the environment entry of the worker's connection
 * string, and faultproxy's two --map arguments. */
struct proc_proxied {
	char envcs[1024], map_q[64], map_t[64];
};
void proc_proxied_storage(struct proc_proxied *out);
/* "ECW_TEST_CONNECTION_STRING=..." in out: the account key of connstr (the
 * test fails when it has none) with queue and table endpoints on
 * 127.0.0.1 at qport and tport, over http. */
void proc_env_connstr(char *out, size_t cap, const char *connstr, int qport, int tport);

/* A number from faultproxy's --stats file ("connections", "requests",
 * ..., or a fault's count: "faults.stall"); the test fails when there is
 * none. */
long long proc_proxy_stat(const char *stats_path, const char *name);

/* The sum of the samples of metric name on a /metrics page (Prometheus text)
 * whose labels include every one of the given key="value" strings
 * (NULL-terminated; none: every sample). *found (may be NULL): how many
 * samples matched. */
double proc_metric(const char *page, const char *name, int *found, ...);

/* The table write requests a worker attempted, whatever the answer: the
 * ecw_storage_requests_total samples of the operations that write entities
 * (insert, upsert, upsert_merge, update, merge, delete, batch), not the reads
 * nor the creation or deletion of tables. */
long long proc_table_writes(const char *page);

/* A whole file as a string (free() it), its length in *len_out (may be
 * NULL); "" when it cannot be read. */
char *proc_read_file(const char *path, size_t *len_out);

/* ---- the official Azure SDK for JavaScript ------------------------------ */

/* Runs `node tests/interop/sdk.js args...` (from the repository root: its
 * commands are listed at the top of that file); returns its exit status,
 * with stdout in *out (may be NULL; free() it) and stderr shown on failure. */
int proc_sdk(char **out, const char *const *args);

#endif
