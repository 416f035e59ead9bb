/* SPDX-License-Identifier: MIT */
/* cancel.c - a cancellation every wait can watch (see ecw_cancel.h): a flag,
 * an optional deadline, and a pipe whose read end polls readable once the
 * flag is set, so a poll() on a socket wakes for it too. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "ecw_cancel.h"
#include "ecw_clock.h"

struct ecw_cancel {
	atomic_bool fired;
	_Atomic int64_t deadline_ms; /* 0: none */
	int pipe[2];                 /* [0] polls readable once fired */
};

int ecw_cancel_new(struct ecw_cancel **out)
{
	struct ecw_cancel *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	if (pipe2(c->pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		free(c);
		return ecw_error_set(ECW_ERROR, "cannot make a pipe: errno %d", errno);
	}
	*out = c;
	return 0;
}

void ecw_cancel_free(struct ecw_cancel *c)
{
	if (!c)
		return;
	close(c->pipe[0]);
	close(c->pipe[1]);
	free(c);
}

void ecw_cancel_fire(struct ecw_cancel *c)
{
	if (!c || atomic_exchange(&c->fired, true))
		return;
	/* One byte, never read: the read end stays readable for good. */
	while (write(c->pipe[1], "x", 1) < 0 && errno == EINTR)
		;
}

void ecw_cancel_set_deadline(struct ecw_cancel *c, int64_t at_ms)
{
	if (c)
		atomic_store(&c->deadline_ms, at_ms);
}

bool ecw_cancel_is_set(const struct ecw_cancel *c)
{
	return ecw_cancel_clamp_ms(c, 1) == 0;
}

int ecw_cancel_fd(const struct ecw_cancel *c)
{
	return c ? c->pipe[0] : -1;
}

int64_t ecw_cancel_clamp_ms(const struct ecw_cancel *c, int64_t ms)
{
	int64_t deadline;

	if (!c)
		return ms;
	if (atomic_load(&c->fired))
		return 0;
	deadline = atomic_load(&c->deadline_ms);
	if (deadline != 0) {
		int64_t left = deadline - ecw_clock_now_ms();
		if (left <= 0)
			return 0;
		if (left < ms)
			return left;
	}
	return ms;
}

bool ecw_cancel_sleep_ms(const struct ecw_cancel *c, int64_t ms)
{
	int64_t end = ecw_clock_now_ms() + ms;

	if (!c) {
		ecw_clock_sleep_ms(ms);
		return false;
	}
	for (;;) {
		int64_t left = ecw_cancel_clamp_ms(c, end - ecw_clock_now_ms());
		if (ecw_cancel_is_set(c))
			return true;
		if (left <= 0)
			return false;
		struct pollfd p = {.fd = c->pipe[0], .events = POLLIN};
		(void)poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
	}
}
