/* SPDX-License-Identifier: MIT */
/* test_metrics_listener.c - the metrics server stays up under idle and slow
 * clients: with 500 connections open that trickle a partial request header
 * (slowloris), from one address or from many, GET /healthz still answers 200
 * within 2 s; the connections over the caps are the oldest ones, closed by the
 * server; and a connection that sends nothing is closed after the idle
 * timeout; the log gets a few lines a minute, not one per client. Raw sockets, non-blocking, so a stuck server fails the test
 * instead of hanging it; loopback sources 127.0.0.N stand for distinct
 * clients (Linux answers on all of 127/8). ecw_clock_now_ms is the real clock here:
 * no test fakes it. */
#include "support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ecw_clock.h"
#include "ecw_log.h"
#include "telemetry.h"

#define SLOW_CLIENTS 500
#define PARTIAL_HEADER "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "

static void sleep_real_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* A non-blocking socket from 127.0.0.<src> to 127.0.0.1:port, connecting
 * (loopback: done, or refused, at once unless the backlog is full). */
static int connect_from(int src, int port)
{
	struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	from.sin_addr.s_addr = htonl(0x7F000000u | (uint32_t)src);
	if (bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0)
		fail_msg("bind 127.0.0.%d: %s", src, strerror(errno));
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons((uint16_t)port);
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0 && errno != EINPROGRESS)
		fail_msg("connect from 127.0.0.%d: %s", src, strerror(errno));
	return fd;
}

/* Sends what fits now; a slow client does not care if a byte is lost. */
static void send_some(int fd, const char *text)
{
	(void)!send(fd, text, strlen(text), MSG_NOSIGNAL);
}

/* True when the server closed fd (EOF or reset) within ms. */
static bool closed_within(int fd, int ms)
{
	int64_t end = ecw_clock_now_ms() + ms;
	char b[256];

	for (int64_t left; (left = end - ecw_clock_now_ms()) > 0;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		ssize_t n = recv(fd, b, sizeof(b), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return true;
	}
	return false;
}

/* GET /healthz from 127.0.0.<src>: the status, or -1 when no status line came
 * within ms. *took_ms is the time it took. */
static int healthz_within(int src, int port, int ms, int64_t *took_ms)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	int64_t start = ecw_clock_now_ms(), end = start + ms;
	char got[512];
	size_t have = 0, sent = 0;
	int fd = connect_from(src, port), status = -1;

	for (int64_t left; status < 0 && (left = end - ecw_clock_now_ms()) > 0;) {
		struct pollfd p = {.fd = fd, .events = sent < sizeof(req) - 1 ? POLLOUT : POLLIN};
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		if (sent < sizeof(req) - 1) {
			ssize_t n = send(fd, req + sent, sizeof(req) - 1 - sent, MSG_NOSIGNAL);
			if (n < 0 && errno != EAGAIN)
				break;
			sent += n > 0 ? (size_t)n : 0;
			continue;
		}
		ssize_t n = recv(fd, got + have, sizeof(got) - 1 - have, 0);
		if (n <= 0 && !(n < 0 && errno == EAGAIN))
			break;
		have += n > 0 ? (size_t)n : 0;
		got[have] = '\0';
		if (strstr(got, "\r\n") && sscanf(got, "HTTP/1.1 %d", &status) != 1)
			status = 0;
	}
	*took_ms = ecw_clock_now_ms() - start;
	close(fd);
	return status;
}

static struct ecw_metrics_server *start_alive(void)
{
	struct ecw_metrics_server *s = NULL;

	if (ecw_metrics_start(&s, "127.0.0.1:0") < 0)
		fail_msg("ecw_metrics_start: %s", ecw_error_last()->message);
	ecw_metrics_set_liveness_window(600000);
	ecw_metrics_heartbeat();
	return s;
}

/* Opens SLOW_CLIENTS slow clients, client i from 127.0.0.<src(i)>, each
 * sending a partial header and then a byte twice, 300 ms apart. */
static void open_slow_clients(int *fds, int port, int sources, int first_src)
{
	for (int i = 0; i < SLOW_CLIENTS; i++) {
		fds[i] = connect_from(first_src + i % sources, port);
		send_some(fds[i], PARTIAL_HEADER);
	}
	for (int round = 0; round < 2; round++) {
		sleep_real_ms(300);
		for (int i = 0; i < SLOW_CLIENTS; i++)
			send_some(fds[i], "a");
	}
}

static void close_all(int *fds)
{
	for (int i = 0; i < SLOW_CLIENTS; i++)
		close(fds[i]);
}

static void expect_healthz_fast(int src, int port)
{
	int64_t took;
	int status = healthz_within(src, port, 2000, &took);

	if (status != 200)
		fail_msg("GET /healthz from 127.0.0.%d beside %d slow clients: %s %d after %lld ms", src,
		         SLOW_CLIENTS, status < 0 ? "no answer" : "status", status, (long long)took);
	print_message("GET /healthz from 127.0.0.%d beside %d slow clients: 200 in %lld ms\n", src,
	              SLOW_CLIENTS, (long long)took);
}

static int count_lines(FILE *f)
{
	int n = 0, c;

	rewind(f);
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	return n;
}

/* One attacker address holding 500 connections: the probe from another
 * address, and from the attacker's own (a node's SNAT, a sidecar), gets in.
 * The log: two kinds of line (libmicrohttpd's, the caps'), 10 a minute each. */
static void test_metrics_listener__healthz_beside_slow_clients_one_address(void **state)
{
	(void)state;
	FILE *log = tmpfile();
	assert_non_null(log);
	ecw_log_set_fd(fileno(log));
	struct ecw_metrics_server *s = start_alive();
	int port = ecw_metrics_port(s), fds[SLOW_CLIENTS];

	open_slow_clients(fds, port, 1, 10);
	expect_healthz_fast(2, port);
	expect_healthz_fast(10, port);
	close_all(fds);
	ecw_metrics_stop(s);
	ecw_log_set_fd(2);
	int lines = count_lines(log);
	fclose(log);
	if (lines > 2 * 10)
		fail_msg("%d log lines for %d slow clients, want at most 20", lines, SLOW_CLIENTS);
}

/* 500 connections from 100 addresses, 5 each: under any per-address limit,
 * so only the cap on all connections can make room. */
static void test_metrics_listener__healthz_beside_slow_clients_many_addresses(void **state)
{
	(void)state;
	struct ecw_metrics_server *s = start_alive();
	int port = ecw_metrics_port(s), fds[SLOW_CLIENTS];

	open_slow_clients(fds, port, 100, 10);
	expect_healthz_fast(2, port);
	close_all(fds);
	ecw_metrics_stop(s);
}

/* Past the caps the server closes the oldest connections, not the newest:
 * the first client from an address is gone, the last one still open. */
static void test_metrics_listener__oldest_closed_at_the_cap(void **state)
{
	(void)state;
	struct ecw_metrics_server *s = start_alive();
	int port = ecw_metrics_port(s), fds[SLOW_CLIENTS];

	open_slow_clients(fds, port, 1, 10);
	assert_true(closed_within(fds[0], 1000));
	assert_false(closed_within(fds[SLOW_CLIENTS - 1], 200));
	close_all(fds);
	ecw_metrics_stop(s);
}

/* A client that connects and sends nothing is closed after the idle timeout
 * (a few seconds), not kept for good. */
static void test_metrics_listener__idle_connection_closed(void **state)
{
	(void)state;
	struct ecw_metrics_server *s = start_alive();
	int fd = connect_from(1, ecw_metrics_port(s));
	int64_t start = ecw_clock_now_ms();

	if (!closed_within(fd, 8000))
		fail_msg("an idle connection was still open after 8 s");
	print_message("an idle connection closed after %lld ms\n", (long long)(ecw_clock_now_ms() - start));
	close(fd);
	ecw_metrics_stop(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_metrics_listener__healthz_beside_slow_clients_one_address),
	    cmocka_unit_test(test_metrics_listener__healthz_beside_slow_clients_many_addresses),
	    cmocka_unit_test(test_metrics_listener__oldest_closed_at_the_cap),
	    cmocka_unit_test(test_metrics_listener__idle_connection_closed),
	};
	return cmocka_run_group_tests_name("metrics_listener", tests, NULL, NULL);
}
