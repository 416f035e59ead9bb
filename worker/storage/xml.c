/* SPDX-License-Identifier: MIT */
/* xml.c - reads the Queue service's XML answers (message lists and error
 * bodies) with expat: the only file that uses it. The bodies are small and
 * flat, so one pass of callbacks fills the messages directly; no tree is
 * built. A document with a DOCTYPE is refused (the service never sends one),
 * so no entity is ever declared or expanded, and whitespace-only text is kept
 * because it can be a message's whole text.
 *
 * Depths: 1 is the root (QueueMessagesList or Error), 2 a QueueMessage or an
 * error's Code/Message, 3 a message's field. A field's text is all the text
 * inside it, nested elements included, like the DOM's textContent. */
#include <expat.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "date.h"
#include "xml.h"

enum field {
	F_NONE,
	F_ID,
	F_POP_RECEIPT,
	F_DEQUEUE_COUNT,
	F_INSERTION_TIME,
	F_EXPIRATION_TIME,
	F_NEXT_VISIBLE,
	F_TEXT,
	F_ERR_CODE,
	F_ERR_MESSAGE,
};

struct reader {
	XML_Parser parser;
	const char *root; /* the root element this document must have */
	int depth;
	int field_depth; /* where the open field started, 0 when none */
	enum field field;
	bool root_ok;
	bool in_msg;
	struct ecw_buf text; /* the open field's text */
	int err;             /* set by a callback, which then stops the parse */

	struct ecw_queue_msg *msgs;
	size_t n, cap;

	char *code, *msg; /* the error body's fields */
	size_t code_cap, msg_cap;
};

static const struct {
	const char *name;
	enum field field;
} msg_fields[] = {
	{"MessageId", F_ID},
	{"PopReceipt", F_POP_RECEIPT},
	{"DequeueCount", F_DEQUEUE_COUNT},
	{"InsertionTime", F_INSERTION_TIME},
	{"ExpirationTime", F_EXPIRATION_TIME},
	{"TimeNextVisible", F_NEXT_VISIBLE},
	{"MessageText", F_TEXT},
};

static void fail(struct reader *r, int err)
{
	if (r->err == 0)
		r->err = err;
	XML_StopParser(r->parser, XML_FALSE);
}

/* Copies the text, cut to fit as snprintf would. */
static void copy_text(char *dst, size_t cap, const struct ecw_buf *text)
{
	size_t n = text->len < cap - 1 ? text->len : cap - 1;

	memcpy(dst, ecw_buf_cstr(text), n);
	dst[n] = '\0';
}

static int parse_time(time_t *out, const struct ecw_buf *text)
{
	return ecw_date_parse(out, ecw_buf_cstr(text));
}

/* A field of the current message is complete. Like every field, a repeated
 * one: the last wins. */
static int set_field(struct ecw_queue_msg *m, enum field f, struct ecw_buf *text)
{
	char *end;
	int err = 0;

	switch (f) {
	case F_ID: copy_text(m->id, sizeof(m->id), text); break;
	case F_POP_RECEIPT: copy_text(m->pop_receipt, sizeof(m->pop_receipt), text); break;
	case F_DEQUEUE_COUNT:
		m->dequeue_count = strtol(ecw_buf_cstr(text), &end, 10);
		if (end == ecw_buf_cstr(text) || *end)
			err = ecw_error_set(ECW_ERROR, "queue: bad DequeueCount in response");
		break;
	case F_INSERTION_TIME: err = parse_time(&m->insertion_time, text); break;
	case F_EXPIRATION_TIME:
		err = parse_time(&m->expiration_time, text);
		/* "Never expires" comes back as 9999-12-31. */
		if (err == 0 && m->expiration_time >= (time_t)253402214400LL)
			m->expiration_time = 0;
		break;
	case F_NEXT_VISIBLE: err = parse_time(&m->next_visible, text); break;
	case F_TEXT:
		free(m->text);
		m->text_len = text->len;
		m->text = text->ptr ? ecw_buf_take(text) : strdup("");
		if (!m->text)
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
		break;
	default: break;
	}
	return err;
}

static int add_message(struct reader *r)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 32;
		struct ecw_queue_msg *m = realloc(r->msgs, cap * sizeof(*m));
		if (!m)
			return ecw_error_set(ECW_ENOMEM, "out of memory");
		r->msgs = m;
		r->cap = cap;
	}
	memset(&r->msgs[r->n++], 0, sizeof(r->msgs[0]));
	return 0;
}

static void XMLCALL on_start(void *data, const XML_Char *name, const XML_Char **attrs)
{
	struct reader *r = data;
	bool list = r->code == NULL;
	int err;

	(void)attrs;
	r->depth++;
	if (r->field != F_NONE)
		return; /* nested inside a field: its text still counts */
	if (r->depth == 1) {
		r->root_ok = strcmp(name, r->root) == 0;
		if (!r->root_ok)
			XML_StopParser(r->parser, XML_FALSE);
	} else if (list && r->depth == 2) {
		r->in_msg = strcmp(name, "QueueMessage") == 0;
		if (r->in_msg && (err = add_message(r)) < 0)
			fail(r, err);
	} else if (list && r->depth == 3 && r->in_msg) {
		for (size_t i = 0; i < sizeof(msg_fields) / sizeof(msg_fields[0]); i++)
			if (strcmp(name, msg_fields[i].name) == 0)
				r->field = msg_fields[i].field;
	} else if (!list && r->depth == 2) {
		if (strcmp(name, "Code") == 0)
			r->field = F_ERR_CODE;
		else if (strcmp(name, "Message") == 0)
			r->field = F_ERR_MESSAGE;
	}
	if (r->field != F_NONE) {
		r->field_depth = r->depth;
		ecw_buf_reset(&r->text);
	}
}

static void XMLCALL on_end(void *data, const XML_Char *name)
{
	struct reader *r = data;
	int err = 0;

	(void)name;
	if (r->field != F_NONE && r->depth == r->field_depth) {
		if (r->field == F_ERR_CODE)
			copy_text(r->code, r->code_cap, &r->text);
		else if (r->field == F_ERR_MESSAGE)
			copy_text(r->msg, r->msg_cap, &r->text);
		else
			err = set_field(&r->msgs[r->n - 1], r->field, &r->text);
		r->field = F_NONE;
		r->field_depth = 0;
	} else if (r->field == F_NONE && r->depth == 2 && r->in_msg) {
		if (!r->msgs[r->n - 1].id[0])
			err = ecw_error_set(ECW_ERROR, "queue: message without MessageId in response");
		r->in_msg = false;
	}
	if (err < 0)
		fail(r, err);
	r->depth--;
}

static void XMLCALL on_text(void *data, const XML_Char *s, int len)
{
	struct reader *r = data;
	int err;

	if (r->field != F_NONE && (err = ecw_buf_add(&r->text, s, (size_t)len)) < 0)
		fail(r, err);
}

static void XMLCALL on_doctype(void *data, const XML_Char *name, const XML_Char *sysid, const XML_Char *pubid,
			       int has_internal_subset)
{
	struct reader *r = data;

	(void)name, (void)sysid, (void)pubid, (void)has_internal_subset;
	XML_StopParser(r->parser, XML_FALSE);
}

/* Runs the whole body through the callbacks: 0 when the document was well
 * formed, had the expected root and no callback failed; a callback's error;
 * or 1 when the document was refused (not XML, another root, a DOCTYPE). */
static int read_all(struct reader *r, const char *body, size_t len)
{
	enum XML_Status st;

	if (len > (size_t)INT_MAX)
		return 1;
	if (!(r->parser = XML_ParserCreate("UTF-8")))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	XML_SetUserData(r->parser, r);
	XML_SetElementHandler(r->parser, on_start, on_end);
	XML_SetCharacterDataHandler(r->parser, on_text);
	XML_SetStartDoctypeDeclHandler(r->parser, on_doctype);
	ecw_buf_init(&r->text, len + 1);
	st = XML_Parse(r->parser, body, (int)len, XML_TRUE);
	ecw_buf_dispose(&r->text);
	XML_ParserFree(r->parser);
	r->parser = NULL;
	if (r->err < 0)
		return r->err;
	return st == XML_STATUS_OK && r->root_ok ? 0 : 1;
}

int ecw_xml_parse_messages(struct ecw_queue_msg **out, size_t *count, const char *body, size_t len)
{
	struct reader r = {.root = "QueueMessagesList"};
	int err;

	*out = NULL;
	*count = 0;
	err = read_all(&r, body, len);
	if (err == 1)
		err = ecw_error_set(ECW_ERROR, "queue: response is not a QueueMessagesList");
	if (err < 0) {
		ecw_xml_msgs_free(r.msgs, r.n);
		return err;
	}
	*out = r.msgs;
	*count = r.n;
	return 0;
}

void ecw_xml_parse_error(char *code, size_t code_cap, char *msg, size_t msg_cap, const char *body, size_t len)
{
	struct reader r = {
		.root = "Error", .code = code, .code_cap = code_cap, .msg = msg, .msg_cap = msg_cap};

	code[0] = msg[0] = '\0';
	if (read_all(&r, body, len) != 0)
		code[0] = msg[0] = '\0';
}

void ecw_xml_msgs_free(struct ecw_queue_msg *msgs, size_t count)
{
	if (!msgs)
		return;
	for (size_t i = 0; i < count; i++)
		free(msgs[i].text);
	free(msgs);
}
