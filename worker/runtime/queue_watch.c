/* SPDX-License-Identifier: MIT */
/* queue_watch.c - looking at the queues between receives (runtime_private.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_clock.h"
#include "ecw_log.h"
#include "telemetry.h"
#include "runtime_private.h"

#define REST_REFRESHES 40 /* the poison queue's cadence at rest, in refreshes */

void ecw_queue_watch_init(struct ecw_queue_watch *w, const char *queue, const char *poison_queue,
			  int64_t control_poll_ms, int64_t refresh_ms)
{
	memset(w, 0, sizeof(*w));
	w->jobs.name = queue;
	w->poison.name = poison_queue;
	w->control_poll_ms = control_poll_ms;
	w->refresh_ms = refresh_ms;
}

static void log_pause_change(const char *queue, const struct ecw_pause *p)
{
	struct ecw_log_line *l = ecw_log_begin(p->paused ? ECW_LOG_WARN : ECW_LOG_INFO,
					       p->paused ? "queue_paused" : "queue_resumed");

	ecw_log_str(l, "queue", queue);
	if (p->paused) {
		ecw_log_str(l, "paused_at", p->at);
		ecw_log_str(l, "paused_by", p->by);
		ecw_log_str(l, "reason", p->reason);
		ecw_log_str(l, "msg", "receiving nothing from the queue until `ecworker resume`");
	}
	ecw_log_end(l);
}

/* The oldest visible message's age, by a peek: 0 when none is visible. */
static int read_age(struct ecw_queue_seen *q, struct ecw_client *c)
{
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;
	int err = ecw_queue_peek(&m, &n, c, q->name, 1);

	if (err == 0) {
		time_t now = time(NULL);
		q->oldest_age_s = n && m[0].insertion_time && now > m[0].insertion_time
					  ? (int64_t)(now - m[0].insertion_time)
					  : 0;
	}
	ecw_queue_msgs_free(m, n);
	return err;
}

int ecw_queue_watch_look(struct ecw_queue_watch *w, struct ecw_queue_seen *q, struct ecw_client *c)
{
	struct ecw_queue_meta *meta = malloc(sizeof(*meta));
	int64_t now = ecw_clock_now_ms();
	bool jobs = q == &w->jobs;
	int err;

	if (!meta)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	q->next_ms = now + (jobs && w->control_poll_ms < w->refresh_ms ? w->control_poll_ms : w->refresh_ms);
	if ((err = ecw_queue_meta_get(meta, c, q->name)) < 0)
		goto done;
	q->looked = true;
	q->approximate = meta->approximate_messages;
	if (q->approximate == 0) {
		q->oldest_age_s = 0;
	} else if (now >= q->next_age_ms) {
		q->next_age_ms = now + w->refresh_ms;
		if ((err = read_age(q, c)) < 0)
			goto done;
	}
	ecw_metrics_queue(q->name, q->approximate, q->oldest_age_s);
	if (jobs) {
		struct ecw_pause p;

		ecw_pause_from_meta(&p, meta);
		if (p.paused != w->pause.paused)
			log_pause_change(q->name, &p);
		w->pause = p;
		ecw_metrics_paused(q->name, p.paused);
	}
done:
	free(meta);
	return err;
}

bool ecw_queue_watch_due(const struct ecw_queue_seen *q, int64_t now_ms)
{
	return now_ms >= q->next_ms;
}

bool ecw_queue_watch_poison_due_at_rest(const struct ecw_queue_watch *w, int64_t now_ms)
{
	return now_ms >= w->poison.next_ms + (REST_REFRESHES - 1) * w->refresh_ms;
}
