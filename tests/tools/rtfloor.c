/* SPDX-License-Identifier: MIT */
/* rtfloor.c - the CPU floor of one HTTP round trip on this machine: a client
 * that does nothing but send a small request on a keep-alive loopback
 * connection and read the answer (blocking send and recv, no TLS, no header
 * parsing beyond finding the end), timed with getrusage. make bench runs it
 * against its Azurite: whatever a worker does per storage request costs at
 * least this much, so requests/msg x this figure is a floor under any
 * worker's CPU per message.
 *
 *   rtfloor PORT [COUNT]     prints {"requests":N,"user_us":U,"sys_us":S}
 *                            (U and S per round trip) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* An unsigned request: Azurite answers it with a short error, which is all
 * the floor needs (the answer's size is that of a small entity). */
static const char request[] = "GET /devstoreaccount1/Tables('rtfloor') HTTP/1.1\r\n"
                              "Host: 127.0.0.1\r\n"
                              "x-ms-version: 2019-02-02\r\n"
                              "Accept: application/json;odata=minimalmetadata\r\n"
                              "x-ms-date: Sat, 21 Nov 2026 10:00:00 GMT\r\n\r\n";

static long parse_long(const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "rtfloor: bad number '%s' (%ld to %ld)\n", s, min, max);
		exit(2);
	}
	return v;
}

static double us(const struct timeval *a, const struct timeval *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e6 + (double)(b->tv_usec - a->tv_usec);
}

/* Reads one answer: headers, then Content-Length bytes of body. */
static int read_answer(int fd, char *buf, size_t cap)
{
	size_t got = 0, need = 0;
	char *end = NULL;

	for (;;) {
		ssize_t k = recv(fd, buf + got, cap - got - 1, 0);
		if (k <= 0)
			return -1;
		got += (size_t)k;
		buf[got] = '\0';
		if (!end && (end = strstr(buf, "\r\n\r\n"))) {
			const char *cl = strcasestr(buf, "\r\ncontent-length:");
			need = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 17, NULL, 10) : 0);
		}
		if (end && got >= need)
			return 0;
		if (got + 1 >= cap)
			return -1;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = {.sin_family = AF_INET};
	struct rusage r0, r1;
	static char buf[65536];
	long count;
	int fd, one = 1;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: rtfloor PORT [COUNT]\n");
		return 2;
	}
	addr.sin_port = htons((unsigned short)parse_long(argv[1], 1, 65535));
	count = argc == 3 ? parse_long(argv[2], 1, 100000000) : 5000;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("rtfloor: connect");
		return 1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	getrusage(RUSAGE_SELF, &r0);
	for (long i = 0; i < count; i++) {
		if (send(fd, request, sizeof(request) - 1, 0) != (ssize_t)(sizeof(request) - 1) ||
		    read_answer(fd, buf, sizeof(buf)) < 0) {
			fprintf(stderr, "rtfloor: the connection broke after %ld round trips\n", i);
			return 1;
		}
	}
	getrusage(RUSAGE_SELF, &r1);
	printf("{\"requests\":%ld,\"user_us\":%.2f,\"sys_us\":%.2f}\n", count,
	       us(&r0.ru_utime, &r1.ru_utime) / (double)count,
	       us(&r0.ru_stime, &r1.ru_stime) / (double)count);
	close(fd);
	return 0;
}
