/* SPDX-License-Identifier: MIT */
/* test_sigpipe.c - the worker binary whose stdout and stderr go to a pipe
 * nobody reads any more (a log collector that died): its writes must fail
 * with EPIPE, not kill it with SIGPIPE (exit 141). Each command starts with
 * SIGPIPE at its default, as a shell would start it, so only the worker's
 * own main.c can make it survive. Needs no storage: `run` is pointed at a
 * port where nothing listens, so it keeps logging failures. */
#include "itest.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char dead_storage[] =
    "storage:\n"
    "  connection_string: \"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
    "KBHBeksoGMGw==;QueueEndpoint=http://127.0.0.1:1/devstoreaccount1;"
    "TableEndpoint=http://127.0.0.1:1/devstoreaccount1\"\n"
    "worker:\n"
    "  queue: jobs\n"
    "metrics:\n"
    "  listen: \"\"\n"
    "jobs:\n"
    "  greet: {type: test-noop}\n";

/* Starts the worker with args, stdout and stderr on a pipe whose read end
 * is closed before it writes a byte. */
static pid_t start_unread(const char *const *args)
{
	const char *argv[8] = {proc_worker_bin()};
	int fds[2];
	pid_t pid;

	for (int i = 0; args[i] && i < 6; i++)
		argv[i + 1] = args[i];
	assert_int_equal(pipe(fds), 0);
	close(fds[0]); /* the reader is gone */
	assert_true((pid = fork()) >= 0);
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[1]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	return pid;
}

/* Waits up to ms for pid: its status, or -1 still running. */
static int wait_ms(pid_t pid, int ms)
{
	int status;

	for (int waited = 0; waited <= ms; waited += 20) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		itest_sleep_ms(20);
	}
	return -1;
}

static void assert_not_sigpipe(const char *what, int status)
{
	if (status == -1)
		fail_msg("%s: still running", what);
	if (WIFSIGNALED(status))
		fail_msg("%s: killed by signal %d%s", what, WTERMSIG(status),
		         WTERMSIG(status) == SIGPIPE ? " (SIGPIPE)" : "");
}

/* Commands that write once and exit: help to stdout, errors to stderr. */
static void test_sigpipe__short_commands_survive(void **state)
{
	static const char *const help[] = {"help", NULL};
	static const char *const unknown[] = {"no-such-command", NULL};
	static const char *const missing[] = {"check-config", "-c", "/nonexistent/ecworker.yaml", NULL};
	int status;
	(void)state;

	status = wait_ms(start_unread(help), 10000);
	assert_not_sigpipe("help", status);
	assert_int_equal(WEXITSTATUS(status), 0);
	status = wait_ms(start_unread(unknown), 10000);
	assert_not_sigpipe("an unknown command", status);
	assert_int_equal(WEXITSTATUS(status), 2);
	status = wait_ms(start_unread(missing), 10000);
	assert_not_sigpipe("check-config", status);
	assert_int_equal(WEXITSTATUS(status), 2);
}

/* The daemon: it logs its start and its storage failures into the dead
 * pipe for a while, is still alive, and stops on SIGTERM as it should. */
static void test_sigpipe__run_keeps_logging_into_a_dead_pipe(void **state)
{
	char config[640];
	const char *args[] = {"run", "-c", config, NULL};
	pid_t pid;
	int status;
	(void)state;

	proc_write_file(config, sizeof(config), "sigpipe.yaml", dead_storage);
	pid = start_unread(args);
	status = wait_ms(pid, 1500);
	if (status != -1) {
		assert_not_sigpipe("run", status);
		fail_msg("run exited %d on its own", WEXITSTATUS(status));
	}
	kill(pid, SIGTERM);
	status = wait_ms(pid, 60000);
	if (status == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		fail_msg("run did not stop within 60 s of SIGTERM");
	}
	assert_not_sigpipe("run", status);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sigpipe__short_commands_survive),
	    cmocka_unit_test(test_sigpipe__run_keeps_logging_into_a_dead_pipe),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
