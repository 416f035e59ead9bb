/* SPDX-License-Identifier: MIT */
/* progress.c - the progress line (see progress.h). */
#include <stdio.h>

#include "ecw_clock.h"
#include "ecw_progress.h"

void ecw_progress_init(struct ecw_progress *p, const char *what, bool on, uint64_t total)
{
	p->on = on;
	p->what = what;
	p->t0_ms = p->last_ms = ecw_clock_now_ms();
	p->total = total;
}

void ecw_progress_show(struct ecw_progress *p, uint64_t done, const char *detail, bool final)
{
	int64_t now = ecw_clock_now_ms();
	double secs = (double)(now - p->t0_ms) / 1000.0, rate;
	char eta[32] = "", of[32] = "";

	if (!p->on || (!final && now - p->last_ms < 1000))
		return;
	p->last_ms = now;
	rate = secs > 0 ? (double)done / secs : 0.0;
	if (!final && p->total > done && rate > 0)
		snprintf(eta, sizeof(eta), ", ETA %.0f s", (double)(p->total - done) / rate);
	if (p->total)
		snprintf(of, sizeof(of), " of ~%llu", (unsigned long long)p->total);
	/* \033[K clears what a longer previous line left. */
	fprintf(stderr, "\r%s: %llu%s%s%s, %.0f/s, %.1f s%s\033[K%s", p->what, (unsigned long long)done, of,
		detail && *detail ? ", " : "", detail ? detail : "", rate, secs, eta, final ? "\n" : "");
	fflush(stderr);
}

void ecw_progress_human_age(char *out, size_t cap, long long d)
{
	if (d < 0)
		d = 0;
	if (d < 120)
		snprintf(out, cap, "%llds", d);
	else if (d < 7200)
		snprintf(out, cap, "%lldm", d / 60);
	else if (d < 172800)
		snprintf(out, cap, "%lldh", d / 3600);
	else
		snprintf(out, cap, "%lldd", d / 86400);
}
