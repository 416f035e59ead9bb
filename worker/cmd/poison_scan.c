/* SPDX-License-Identifier: MIT */
/* poison_scan.c - the scan (see poison_scan.h).
 *
 * Why nothing is lost: the scan itself never deletes. A received message is
 * either taken by the visitor (which deletes it only after it has done its
 * work: replay puts `original` first), or held: hidden, renewed before its
 * hold runs out, and released at the end. If the process dies, the service
 * makes every held message visible again when its hold ends. */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_clock.h"
#include "ecw_log.h"
#include "poison_scan.h"

#define PEEK_MAX 32

struct held {
	struct ecw_queue_msg msg; /* id and pop receipt; text NULL */
	int64_t until_ms;         /* monotonic: hidden until about then */
};

struct scan {
	struct ecw_client *c;
	const struct ecw_scan_options *o;
	struct ecw_scan_result *r;
	struct held *held;
	size_t nheld, capheld;
	struct json_object *seen; /* id -> index into held + 1, or 0 when taken */
	int hold_s;
};

static int hold(struct scan *s, const struct ecw_queue_msg *m)
{
	struct held *h;

	if (s->nheld == s->capheld) {
		size_t cap = s->capheld ? s->capheld * 2 : 64;
		struct held *p = realloc(s->held, cap * sizeof(*p));
		if (!p)
			return ecw_error_set(ECW_ENOMEM, "out of memory");
		s->held = p;
		s->capheld = cap;
	}
	h = &s->held[s->nheld++];
	memset(h, 0, sizeof(*h));
	memcpy(h->msg.id, m->id, sizeof(h->msg.id));
	memcpy(h->msg.pop_receipt, m->pop_receipt, sizeof(h->msg.pop_receipt));
	h->until_ms = ecw_clock_now_ms() + (int64_t)s->hold_s * 1000;
	json_object_object_add(s->seen, m->id, json_object_new_int64((int64_t)s->nheld));
	return 0;
}

/* Renews every hold that ends within a third of hold_s. A renewal that
 * fails leaves the message to reappear; if the scan meets it again it holds
 * it again without visiting it twice. */
static void renew(struct scan *s)
{
	int64_t now = ecw_clock_now_ms(), margin = (int64_t)s->hold_s * 1000 / 3;

	for (size_t i = 0; i < s->nheld; i++) {
		struct held *h = &s->held[i];

		if (!h->msg.pop_receipt[0] || h->until_ms - now > margin)
			continue;
		if (ecw_queue_update(&h->msg, s->c, s->o->queue, s->hold_s, NULL, 0) < 0) {
			h->msg.pop_receipt[0] = '\0';
			continue;
		}
		h->until_ms = ecw_clock_now_ms() + (int64_t)s->hold_s * 1000;
	}
}

static void release_all(struct scan *s)
{
	for (size_t i = 0; i < s->nheld; i++) {
		struct held *h = &s->held[i];
		int err;

		if (!h->msg.pop_receipt[0])
			continue;
		err = ecw_queue_update(&h->msg, s->c, s->o->queue, 0, NULL, 0);
		if (err < 0 && err != ECW_ENOTFOUND) {
			struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "poison_release_failed");
			ecw_log_str(l, "id", h->msg.id);
			ecw_log_str(l, "error", ecw_error_last()->message);
			ecw_log_end(l);
			s->r->release_failed++;
		}
	}
	s->nheld = 0;
}

static bool stopping(const struct scan *s)
{
	return s->o->stop && *s->o->stop;
}

static void show(struct scan *s, void *payload, bool final)
{
	if (s->o->progress)
		ecw_progress_show(s->o->progress, s->r->seen,
				  s->o->progress_detail ? s->o->progress_detail(payload) : NULL, final);
}

/* Visits m when it matches. Returns 1 to go on, 0 to end the scan, or an
 * ecw_err. */
static int consider(struct scan *s, const struct ecw_queue_msg *m, bool peeked, ecw_scan_visit visit,
		    void *payload)
{
	struct ecw_poison_view v;
	enum ecw_scan_verdict verdict = ECW_SCAN_KEEP;
	int err;

	s->r->seen++;
	if ((err = ecw_poison_parse(&v, m->text, m->text_len)) < 0) {
		ecw_poison_view_dispose(&v);
		return err;
	}
	if ((!s->o->filter || ecw_poison_filter_match(s->o->filter, m->id, m->insertion_time, &v)) &&
	    (!s->o->group || ecw_poison_group_match(s->o->group_dim, s->o->group, &v)) &&
	    (!s->o->limit || s->r->matched < s->o->limit)) {
		struct ecw_scan_item it = {m, &v, peeked};
		s->r->matched++;
		verdict = visit(payload, s->c, &it);
	}
	ecw_poison_view_dispose(&v);
	if (!peeked) {
		if (verdict == ECW_SCAN_TAKEN)
			json_object_object_add(s->seen, m->id, json_object_new_int64(0));
		else if ((err = hold(s, m)) < 0)
			return err;
	}
	if (verdict == ECW_SCAN_STOP)
		return 0;
	if (s->o->limit && s->r->matched >= s->o->limit)
		return 0;
	if (s->o->max_seen && s->r->seen >= s->o->max_seen)
		return 0;
	return 1;
}

/* One peek: when it shows fewer than PEEK_MAX messages it showed them all. */
static int try_peek(struct scan *s, ecw_scan_visit visit, void *payload, bool *done)
{
	struct ecw_queue_msg *msgs = NULL;
	size_t n = 0;
	int err, go = 1;

	*done = false;
	if ((err = ecw_queue_peek(&msgs, &n, s->c, s->o->queue, PEEK_MAX)) < 0)
		return err;
	if (n < PEEK_MAX) {
		*done = true;
		s->r->peeked = true;
		for (size_t i = 0; i < n && go > 0 && !stopping(s); i++)
			go = consider(s, &msgs[i], true, visit, payload);
		s->r->complete = go > 0 && !stopping(s);
		err = go < 0 ? go : 0;
	}
	ecw_queue_msgs_free(msgs, n);
	return err;
}

int ecw_poison_scan(struct ecw_scan_result *r, struct ecw_client *c, const struct ecw_scan_options *o,
		    ecw_scan_visit visit, void *payload)
{
	struct scan s = {.c = c, .o = o, .r = r, .hold_s = o->hold_s > 0 ? o->hold_s : 60};
	int err = 0, go = 1;
	bool done = false;

	memset(r, 0, sizeof(*r));
	if (!(s.seen = json_object_new_object()))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	if (o->peek_ok && (err = try_peek(&s, visit, payload, &done)) < 0)
		goto out;
	while (!done && go > 0) {
		struct ecw_queue_msg *msgs = NULL;
		size_t n = 0;
		int max = PEEK_MAX;

		if (stopping(&s))
			break;
		renew(&s);
		if (o->max_seen && o->max_seen - r->seen < (uint64_t)max)
			max = (int)(o->max_seen - r->seen);
		if ((err = ecw_queue_receive(&msgs, &n, c, o->queue, max, s.hold_s)) < 0)
			break;
		if (n == 0) {
			r->complete = true;
			break;
		}
		for (size_t i = 0; i < n; i++) {
			struct json_object *idx;

			if (json_object_object_get_ex(s.seen, msgs[i].id, &idx)) {
				/* Met again (its hold lapsed): hold it anew, visit it once only. */
				int64_t k = json_object_get_int64(idx);
				if (k > 0) {
					memcpy(s.held[k - 1].msg.pop_receipt, msgs[i].pop_receipt,
					       sizeof(msgs[i].pop_receipt));
					s.held[k - 1].until_ms =
						ecw_clock_now_ms() + (int64_t)s.hold_s * 1000;
				}
				continue;
			}
			if (go <= 0 || stopping(&s)) {
				/* Received after the end was decided: hold it, so it is released. */
				int e = hold(&s, &msgs[i]);
				if (e < 0)
					go = e;
				continue;
			}
			go = consider(&s, &msgs[i], false, visit, payload);
			show(&s, payload, false);
		}
		ecw_queue_msgs_free(msgs, n);
		if (go < 0)
			err = go;
	}
out:
	r->stopped = stopping(&s);
	release_all(&s);
	show(&s, payload, true);
	free(s.held);
	json_object_put(s.seen);
	return err < 0 ? err : 0;
}
