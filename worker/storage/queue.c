/* SPDX-License-Identifier: MIT */
/* queue.c - the Queue service operations. Messages travel as
 * <QueueMessage><MessageText>escaped text</MessageText></QueueMessage>; the
 * text is sent as given (no base64: decoding is the caller's business). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client.h"
#include "date.h"
#include "ecw_codec.h"
#include "escape.h"
#include "names.h"
#include "xml.h"

#define MAX_VISIBILITY_S 604800 /* 7 days */

int ecw_queue_name_check(const char *name)
{
	if (ecw_names_dns_valid(name))
		return 0;
	return ecw_error_set(ECW_EINVALID,
			     "invalid queue name '%.70s': 3-63 lowercase letters, digits and single dashes",
			     name ? name : "");
}

static int queue_request(struct ecw_request *r, const char *op, const char *method, const char *queue,
			 const char *suffix)
{
	int err;

	ecw_request_init(r, ECW_SVC_QUEUE, method);
	r->op = op;
	if ((err = ecw_queue_name_check(queue)) < 0 ||
	    (err = ecw_buf_printf(&r->path, "/%s%s", queue, suffix ? suffix : "")) < 0)
		return err;
	return 0;
}

static int add_int_query(struct ecw_request *r, const char *name, long long v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lld", v);
	return ecw_request_add_query(r, name, buf);
}

/* Text must fit the service limit and be characters XML 1.0 can carry. */
static int check_text(const char *text, size_t len)
{
	uint32_t cp;
	size_t k;

	if (len > ECW_QUEUE_MAX_TEXT)
		return ecw_error_set(ECW_ETOOLARGE, "queue: message text is %zu bytes, the limit is %d", len,
				     ECW_QUEUE_MAX_TEXT);
	for (size_t i = 0; i < len; i += k) {
		if (!(k = ecw_utf8_decode(text + i, len - i, &cp)))
			return ecw_error_set(ECW_EINVALID,
					     "queue: message text is not valid UTF-8 (byte %zu)", i);
		if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xFFFE || cp == 0xFFFF)
			return ecw_error_set(
				ECW_EINVALID,
				"queue: message text has U+%04X at byte %zu, which XML cannot carry",
				(unsigned)cp, i);
	}
	return 0;
}

static int message_body(struct ecw_buf *body, const char *text, size_t len)
{
	int err;

	if ((err = ecw_buf_adds(
		     body, "<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessage><MessageText>")) < 0 ||
	    (err = ecw_escape_xml(body, text, len)) < 0 ||
	    (err = ecw_buf_adds(body, "</MessageText></QueueMessage>")) < 0)
		return err;
	return 0;
}

/* A request without a body whose answer matters only by its status. */
static int bodyless_call_status(long *status, struct ecw_client *c, const char *op, const char *method,
				const char *queue, const char *suffix)
{
	struct ecw_request r;
	struct ecw_response resp;
	int err;

	ecw_response_init(&resp);
	if ((err = queue_request(&r, op, method, queue, suffix)) == 0 &&
	    (err = ecw_client_send(&resp, c, &r)) == 0 && status)
		*status = resp.status;
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

static int bodyless_call(struct ecw_client *c, const char *op, const char *method, const char *queue,
			 const char *suffix)
{
	return bodyless_call_status(NULL, c, op, method, queue, suffix);
}

int ecw_queue_create(bool *created_out, struct ecw_client *c, const char *queue)
{
	long status = 0;
	int err = bodyless_call_status(&status, c, "queue.create", "PUT", queue, NULL);

	/* 204: it already existed. 409 QueueAlreadyExists: it exists with
	 * metadata other than this request's (none), e.g. an `ecworker pause`:
	 * it exists all the same (QueueBeingDeleted stays an error). */
	if (err == ECW_ECONFLICT && strcmp(ecw_error_last()->service_code, "QueueAlreadyExists") == 0) {
		ecw_error_clear();
		err = 0;
		status = 204;
	}
	if (err == 0 && created_out)
		*created_out = status == 201;
	return err;
}

int ecw_queue_delete_queue(struct ecw_client *c, const char *queue)
{
	return bodyless_call(c, "queue.delete_queue", "DELETE", queue, NULL);
}

int ecw_queue_put(struct ecw_queue_msg *out, struct ecw_client *c, const char *queue, const char *text,
		  size_t len, const struct ecw_queue_put_options *opts)
{
	struct ecw_request r;
	struct ecw_response resp;
	struct ecw_buf body;
	struct ecw_queue_msg *msgs = NULL;
	size_t n = 0;
	int err;

	ecw_response_init(&resp);
	ecw_buf_init(&body, 0);
	if ((err = queue_request(&r, "queue.put", "POST", queue, "/messages")) < 0 ||
	    (err = check_text(text, len)) < 0)
		goto done;
	if (opts && (opts->visibility_delay_s < 0 || opts->visibility_delay_s > MAX_VISIBILITY_S ||
		     opts->ttl_s < -1 || (opts->ttl_s > 0 && opts->visibility_delay_s >= opts->ttl_s))) {
		err = ecw_error_set(
			ECW_EINVALID,
			"queue: visibility delay must be 0..604800 s and below the TTL; TTL -1, 0 or positive");
		goto done;
	}
	if (opts && opts->visibility_delay_s &&
	    (err = add_int_query(&r, "visibilitytimeout", opts->visibility_delay_s)) < 0)
		goto done;
	if (opts && opts->ttl_s && (err = add_int_query(&r, "messagettl", opts->ttl_s)) < 0)
		goto done;
	if ((err = message_body(&body, text, len)) < 0)
		goto done;
	r.content_type = "application/xml";
	r.body = body.ptr;
	r.body_len = body.len;
	if ((err = ecw_client_send(&resp, c, &r)) < 0)
		goto done;
	if (out) {
		memset(out, 0, sizeof(*out));
		if ((err = ecw_xml_parse_messages(&msgs, &n, resp.body.ptr, resp.body.len)) < 0)
			goto done;
		if (n != 1) {
			err = ecw_error_set(ECW_ERROR, "queue: put answered with %zu messages", n);
			goto done;
		}
		*out = msgs[0];
		free(out->text);
		out->text = NULL;
		out->text_len = 0;
		free(msgs);
		msgs = NULL;
	}
done:
	ecw_queue_msgs_free(msgs, n);
	ecw_buf_dispose(&body);
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

static int get_messages(struct ecw_queue_msg **out, size_t *count, struct ecw_client *c, const char *queue,
			int max, int visibility_s, bool peek)
{
	struct ecw_request r;
	struct ecw_response resp;
	int err;

	*out = NULL;
	*count = 0;
	ecw_response_init(&resp);
	if ((err = queue_request(&r, peek ? "queue.peek" : "queue.receive", "GET", queue, "/messages")) < 0)
		goto done;
	if (max < 1 || max > ECW_QUEUE_MAX_BATCH) {
		err = ecw_error_set(ECW_EINVALID, "queue: can take 1..32 messages at once, not %d", max);
		goto done;
	}
	if (!peek && (visibility_s < 1 || visibility_s > MAX_VISIBILITY_S)) {
		err = ecw_error_set(ECW_EINVALID, "queue: visibility timeout must be 1..604800 s, not %d",
				    visibility_s);
		goto done;
	}
	if ((peek && (err = ecw_request_add_query(&r, "peekonly", "true")) < 0) ||
	    (err = add_int_query(&r, "numofmessages", max)) < 0 ||
	    (!peek && (err = add_int_query(&r, "visibilitytimeout", visibility_s)) < 0) ||
	    (err = ecw_client_send(&resp, c, &r)) < 0)
		goto done;
	err = ecw_xml_parse_messages(out, count, resp.body.ptr, resp.body.len);
	/* Only a put's answer lacks MessageText: a received or peeked message
	 * without one would reach the job (and the poison queue) as "". */
	for (size_t i = 0; err == 0 && i < *count; i++)
		if (!(*out)[i].text) {
			err = ecw_error_set(ECW_ERROR, "queue: message %s without MessageText in response",
					    (*out)[i].id);
			ecw_queue_msgs_free(*out, *count);
			*out = NULL;
			*count = 0;
		}
done:
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

int ecw_queue_receive(struct ecw_queue_msg **out, size_t *count, struct ecw_client *c, const char *queue,
		      int max, int visibility_s)
{
	return get_messages(out, count, c, queue, max, visibility_s, false);
}

int ecw_queue_peek(struct ecw_queue_msg **out, size_t *count, struct ecw_client *c, const char *queue,
		   int max)
{
	return get_messages(out, count, c, queue, max, 0, true);
}

static int message_request(struct ecw_request *r, const char *op, const char *method, const char *queue,
			   const char *id, const char *pop_receipt)
{
	int err;

	if ((err = queue_request(r, op, method, queue, "/messages/")) < 0)
		return err;
	if (!id || !*id || !pop_receipt || !*pop_receipt)
		return ecw_error_set(ECW_EINVALID, "queue: a message id and pop receipt are required");
	if ((err = ecw_escape_pct(&r->path, id, strlen(id))) < 0 ||
	    (err = ecw_request_add_query(r, "popreceipt", pop_receipt)) < 0)
		return err;
	return 0;
}

int ecw_queue_delete(struct ecw_client *c, const char *queue, const char *id, const char *pop_receipt)
{
	struct ecw_request r;
	struct ecw_response resp;
	int err;

	ecw_response_init(&resp);
	if ((err = message_request(&r, "queue.delete", "DELETE", queue, id, pop_receipt)) == 0)
		err = ecw_client_send(&resp, c, &r);
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

struct delete_many {
	struct ecw_queue_delete_item *items;
	size_t *item_of; /* the item each pipelined request deletes */
	ecw_queue_deleted_fn deleted;
	void *payload;
};

static void deleted_one(void *payload, size_t k, int err)
{
	struct delete_many *dm = payload;
	size_t i = dm->item_of[k];

	dm->items[i].err = err;
	dm->deleted(dm->payload, i);
}

void ecw_queue_delete_many(struct ecw_client *c, struct ecw_queue_delete_item *items, size_t n,
			   ecw_queue_deleted_fn deleted, void *payload)
{
	size_t cap = n ? n : 1, k = 0;
	struct ecw_request *rs = calloc(cap, sizeof(*rs)), **rp = calloc(cap, sizeof(*rp));
	struct ecw_response *resps = calloc(cap, sizeof(*resps));
	size_t *item_of = calloc(cap, sizeof(*item_of));
	struct delete_many dm = {items, item_of, deleted, payload};

	if (!rs || !rp || !resps || !item_of) {
		/* No room to pipeline: one at a time. */
		for (size_t i = 0; i < n; i++) {
			items[i].err = ecw_queue_delete(c, items[i].queue, items[i].id, items[i].pop_receipt);
			deleted(payload, i);
		}
		goto done;
	}
	/* A request that cannot be made (a bad name or receipt) is told at
	 * once; the rest go together, in their order. */
	for (size_t i = 0; i < n; i++) {
		int err = message_request(&rs[k], "queue.delete", "DELETE", items[i].queue, items[i].id,
					  items[i].pop_receipt);
		if (err < 0) {
			ecw_request_dispose(&rs[k]);
			items[i].err = err;
			deleted(payload, i);
			continue;
		}
		ecw_response_init(&resps[k]);
		item_of[k] = i;
		rp[k] = &rs[k];
		k++;
	}
	ecw_client_send_pipelined(c, rp, resps, k, deleted_one, &dm);
	for (size_t j = 0; j < k; j++) {
		ecw_request_dispose(&rs[j]);
		ecw_response_dispose(&resps[j]);
	}
done:
	free(rs);
	free(rp);
	free(resps);
	free(item_of);
}

int ecw_queue_update(struct ecw_queue_msg *msg, struct ecw_client *c, const char *queue, int visibility_s,
		     const char *text, size_t len)
{
	struct ecw_request r;
	struct ecw_response resp;
	struct ecw_buf body;
	const char *receipt, *next;
	int err;

	ecw_response_init(&resp);
	ecw_buf_init(&body, 0);
	if ((err = message_request(&r, "queue.update", "PUT", queue, msg->id, msg->pop_receipt)) < 0)
		goto done;
	if (visibility_s < 0 || visibility_s > MAX_VISIBILITY_S) {
		err = ecw_error_set(ECW_EINVALID, "queue: visibility timeout must be 0..604800 s, not %d",
				    visibility_s);
		goto done;
	}
	if ((err = add_int_query(&r, "visibilitytimeout", visibility_s)) < 0)
		goto done;
	if (text) {
		if ((err = check_text(text, len)) < 0 || (err = message_body(&body, text, len)) < 0)
			goto done;
		r.content_type = "application/xml";
		r.body = body.ptr;
		r.body_len = body.len;
	}
	if ((err = ecw_client_send(&resp, c, &r)) < 0)
		goto done;
	receipt = ecw_response_header(&resp, "x-ms-popreceipt");
	next = ecw_response_header(&resp, "x-ms-time-next-visible");
	if (!receipt || strlen(receipt) >= sizeof(msg->pop_receipt)) {
		err = ecw_error_set(ECW_ERROR, "queue: update answered without a usable pop receipt");
		goto done;
	}
	snprintf(msg->pop_receipt, sizeof(msg->pop_receipt), "%s", receipt);
	if (next && (err = ecw_date_parse(&msg->next_visible, next)) < 0)
		goto done;
	if (text) {
		char *copy = malloc(len + 1);
		if (!copy) {
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
			goto done;
		}
		memcpy(copy, text, len);
		copy[len] = '\0';
		free(msg->text);
		msg->text = copy;
		msg->text_len = len;
	}
done:
	ecw_buf_dispose(&body);
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

int ecw_queue_clear(struct ecw_client *c, const char *queue)
{
	return bodyless_call(c, "queue.clear", "DELETE", queue, "/messages");
}

int ecw_queue_count(long long *out, struct ecw_client *c, const char *queue)
{
	struct ecw_queue_meta *m = malloc(sizeof(*m)); /* ~17 KiB: not on the stack */
	int err;

	if (!m)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	if ((err = ecw_queue_meta_get(m, c, queue)) == 0)
		*out = m->approximate_messages;
	free(m);
	return err;
}

/* ---- metadata -------------------------------------------------------------------------------- */

#define META_PREFIX "x-ms-meta-"

static bool printable_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

static bool meta_name_ok(const char *s)
{
	return ecw_names_meta_valid(s, ECW_QUEUE_META_NAME_MAX);
}

/* Keeps one x-ms-meta-* header, or marks out partial. The answer is the
 * service's, so untrusted: what does not fit or is not printable ASCII is
 * not kept. */
static void meta_keep(struct ecw_queue_meta *out, const char *name, const char *value)
{
	size_t nl = strlen(name), vl = strlen(value);

	if (out->n == ECW_QUEUE_META_MAX || nl > ECW_QUEUE_META_NAME_MAX || vl > ECW_QUEUE_META_VALUE_MAX ||
	    !meta_name_ok(name) || !printable_ascii(value)) {
		out->partial = true;
		return;
	}
	memcpy(out->pairs[out->n].name, name, nl + 1);
	memcpy(out->pairs[out->n].value, value, vl + 1);
	out->n++;
}

int ecw_queue_meta_get(struct ecw_queue_meta *out, struct ecw_client *c, const char *queue)
{
	struct ecw_request r;
	struct ecw_response resp;
	const char *v;
	char *end;
	int err;

	memset(out, 0, sizeof(*out));
	ecw_response_init(&resp);
	if ((err = queue_request(&r, "queue.metadata", "GET", queue, NULL)) < 0 ||
	    (err = ecw_request_add_query(&r, "comp", "metadata")) < 0 ||
	    (err = ecw_client_send(&resp, c, &r)) < 0)
		goto done;
	v = ecw_response_header(&resp, "x-ms-approximate-messages-count");
	if (!v || !*v || (out->approximate_messages = strtoll(v, &end, 10), *end) ||
	    out->approximate_messages < 0) {
		err = ecw_error_set(ECW_ERROR, "queue: metadata answer without a message count");
		goto done;
	}
	for (size_t i = 0; i < resp.nheaders; i++) {
		const char *name, *value;

		ecw_response_header_at(&resp, i, &name, &value);
		if (strncasecmp(name, META_PREFIX, strlen(META_PREFIX)) == 0)
			meta_keep(out, name + strlen(META_PREFIX), value);
	}
	/* The transport keeps so many headers: at the limit, some may be gone. */
	if (resp.nheaders == ECW_RESP_MAX_HEADERS)
		out->partial = true;
done:
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

int ecw_queue_meta_set(struct ecw_client *c, const char *queue, const struct ecw_queue_meta *m)
{
	struct ecw_request r;
	struct ecw_response resp;
	char header[sizeof(META_PREFIX) + ECW_QUEUE_META_NAME_MAX];
	int err;

	if (m->partial)
		return ecw_error_set(
			ECW_EINVALID,
			"queue %s has metadata that ecworker could not keep whole (over %d pairs or "
			"%d bytes a value): not rewritten",
			queue, ECW_QUEUE_META_MAX, ECW_QUEUE_META_VALUE_MAX);
	for (size_t i = 0; i < m->n; i++)
		if (!meta_name_ok(m->pairs[i].name) || !printable_ascii(m->pairs[i].value))
			return ecw_error_set(ECW_EINVALID,
					     "queue metadata: a name that is not an identifier, "
					     "or a value that is not printable ASCII");
	ecw_response_init(&resp);
	if ((err = queue_request(&r, "queue.metadata_set", "PUT", queue, NULL)) < 0 ||
	    (err = ecw_request_add_query(&r, "comp", "metadata")) < 0)
		goto done;
	for (size_t i = 0; i < m->n && err == 0; i++) {
		snprintf(header, sizeof(header), META_PREFIX "%s", m->pairs[i].name);
		err = ecw_request_set_header(&r, header, m->pairs[i].value);
	}
	if (err == 0)
		err = ecw_client_send(&resp, c, &r);
done:
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

const char *ecw_queue_meta_value(const struct ecw_queue_meta *m, const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcasecmp(m->pairs[i].name, name) == 0)
			return m->pairs[i].value;
	return NULL;
}

int ecw_queue_meta_put(struct ecw_queue_meta *m, const char *name, const char *value)
{
	size_t i;

	for (i = 0; i < m->n && strcasecmp(m->pairs[i].name, name) != 0; i++)
		;
	if (!value) {
		if (i < m->n)
			memmove(&m->pairs[i], &m->pairs[i + 1], (m->n - i - 1) * sizeof(m->pairs[0]));
		m->n -= i < m->n;
		return 0;
	}
	if (strlen(name) > ECW_QUEUE_META_NAME_MAX || strlen(value) > ECW_QUEUE_META_VALUE_MAX ||
	    (i == m->n && m->n == ECW_QUEUE_META_MAX))
		return ecw_error_set(ECW_ETOOLARGE, "queue metadata: no room for %s", name);
	snprintf(m->pairs[i].name, sizeof(m->pairs[i].name), "%s", name);
	snprintf(m->pairs[i].value, sizeof(m->pairs[i].value), "%s", value);
	m->n += i == m->n;
	return 0;
}

bool ecw_queue_err_received_again(const struct ecw_error *e)
{
	return e->code == ECW_ENOTFOUND && strcmp(e->service_code, "PopReceiptMismatch") == 0;
}

void ecw_queue_msgs_free(struct ecw_queue_msg *msgs, size_t count)
{
	ecw_xml_msgs_free(msgs, count);
}
