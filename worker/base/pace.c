/* SPDX-License-Identifier: MIT */
/* pace.c - the token bucket (see pace.h). */
#include "ecw_clock.h"
#include "ecw_pace.h"

void ecw_pace_init(struct ecw_pace *p, double rate)
{
	p->rate = rate > 0 ? rate : 0;
	p->tokens = 1;
	p->last_ms = (double)ecw_clock_now_ms();
}

void ecw_pace_take(struct ecw_pace *p, volatile sig_atomic_t *stop)
{
	if (p->rate <= 0)
		return;
	for (;;) {
		double now = (double)ecw_clock_now_ms();

		p->tokens += (now - p->last_ms) / 1000.0 * p->rate;
		p->last_ms = now;
		if (p->tokens > p->rate)
			p->tokens = p->rate > 1 ? p->rate : 1;
		if (p->tokens >= 1)
			break;
		if (stop && *stop)
			return;
		ecw_clock_sleep_ms((int64_t)((1 - p->tokens) * 1000.0 / p->rate) + 1);
	}
	p->tokens -= 1;
}
