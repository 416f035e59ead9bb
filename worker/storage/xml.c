/* SPDX-License-Identifier: MIT */
/* xml.c - reads the services' XML answers (queue message lists, blob
 * listings and error bodies) with expat: the only file that uses it. The
 * bodies are flat, so one pass of callbacks fills the results directly; no
 * tree is built. A document with a DOCTYPE is refused (the service never
 * sends one), so no entity is ever declared or expanded, and whitespace-only
 * text is kept because it can be a message's whole text.
 *
 * Depths: 1 is the root (QueueMessagesList, EnumerationResults or Error), 2
 * a QueueMessage, an error's Code/Message, or a listing's Blobs and
 * NextMarker, 3 a message's field or a Blob, 4 a blob's Name, Properties or
 * Metadata, 5 a property or a metadata pair. A field's text is all the text
 * inside it, nested elements included, like the DOM's textContent. */
#include <expat.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "blob_info.h"
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

/* What every document's reader has, first in each (the DOCTYPE handler and
 * read_all see only this part). */
struct doc {
	XML_Parser parser;
	const char *root; /* the root element this document must have */
	int depth;
	bool root_ok;
	int field;           /* the reader's open field (its enum's), 0 when none */
	int field_depth;     /* where the open field started */
	struct ecw_buf text; /* the open field's text */
	int err;             /* set by a callback, which then stops the parse */
};

struct reader {
	struct doc d;
	bool in_msg;

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

static void fail(struct doc *d, int err)
{
	if (d->err == 0)
		d->err = err;
	XML_StopParser(d->parser, XML_FALSE);
}

/* The root: the one this document must have, or the parse stops. */
static void check_root(struct doc *d, const XML_Char *name)
{
	d->root_ok = strcmp(name, d->root) == 0;
	if (!d->root_ok)
		XML_StopParser(d->parser, XML_FALSE);
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
	r->d.depth++;
	if (r->d.field != F_NONE)
		return; /* nested inside a field: its text still counts */
	if (r->d.depth == 1) {
		check_root(&r->d, name);
	} else if (list && r->d.depth == 2) {
		r->in_msg = strcmp(name, "QueueMessage") == 0;
		if (r->in_msg && (err = add_message(r)) < 0)
			fail(&r->d, err);
	} else if (list && r->d.depth == 3 && r->in_msg) {
		for (size_t i = 0; i < sizeof(msg_fields) / sizeof(msg_fields[0]); i++)
			if (strcmp(name, msg_fields[i].name) == 0)
				r->d.field = msg_fields[i].field;
	} else if (!list && r->d.depth == 2) {
		if (strcmp(name, "Code") == 0)
			r->d.field = F_ERR_CODE;
		else if (strcmp(name, "Message") == 0)
			r->d.field = F_ERR_MESSAGE;
	}
	if (r->d.field != F_NONE) {
		r->d.field_depth = r->d.depth;
		ecw_buf_reset(&r->d.text);
	}
}

static void XMLCALL on_end(void *data, const XML_Char *name)
{
	struct reader *r = data;
	int err = 0;

	(void)name;
	if (r->d.field != F_NONE && r->d.depth == r->d.field_depth) {
		if (r->d.field == F_ERR_CODE)
			copy_text(r->code, r->code_cap, &r->d.text);
		else if (r->d.field == F_ERR_MESSAGE)
			copy_text(r->msg, r->msg_cap, &r->d.text);
		else
			err = set_field(&r->msgs[r->n - 1], r->d.field, &r->d.text);
		r->d.field = F_NONE;
		r->d.field_depth = 0;
	} else if (r->d.field == F_NONE && r->d.depth == 2 && r->in_msg) {
		if (!r->msgs[r->n - 1].id[0])
			err = ecw_error_set(ECW_ERROR, "queue: message without MessageId in response");
		r->in_msg = false;
	}
	if (err < 0)
		fail(&r->d, err);
	r->d.depth--;
}

/* Text counts only inside a field, whichever the reader. */
static void XMLCALL on_text(void *data, const XML_Char *s, int len)
{
	struct doc *d = data;
	int err;

	if (d->field != 0 && (err = ecw_buf_add(&d->text, s, (size_t)len)) < 0)
		fail(d, err);
}

static void XMLCALL on_doctype(void *data, const XML_Char *name, const XML_Char *sysid, const XML_Char *pubid,
			       int has_internal_subset)
{
	struct doc *d = data;

	(void)name, (void)sysid, (void)pubid, (void)has_internal_subset;
	XML_StopParser(d->parser, XML_FALSE);
}

/* Runs the whole body through the callbacks, d (the first member of the
 * reader they are given) their data: 0 when the document was well formed,
 * had the expected root and no callback failed; a callback's error; or 1
 * when the document was refused (not XML, another root, a DOCTYPE). */
static int read_all(struct doc *d, XML_StartElementHandler start, XML_EndElementHandler end,
		    XML_CharacterDataHandler text, const char *body, size_t len)
{
	enum XML_Status st;

	if (len > (size_t)INT_MAX)
		return 1;
	if (!(d->parser = XML_ParserCreate("UTF-8")))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	XML_SetUserData(d->parser, d);
	XML_SetElementHandler(d->parser, start, end);
	XML_SetCharacterDataHandler(d->parser, text);
	XML_SetStartDoctypeDeclHandler(d->parser, on_doctype);
	ecw_buf_init(&d->text, len + 1);
	st = XML_Parse(d->parser, body, (int)len, XML_TRUE);
	ecw_buf_dispose(&d->text);
	XML_ParserFree(d->parser);
	d->parser = NULL;
	if (d->err < 0)
		return d->err;
	return st == XML_STATUS_OK && d->root_ok ? 0 : 1;
}

int ecw_xml_parse_messages(struct ecw_queue_msg **out, size_t *count, const char *body, size_t len)
{
	struct reader r = {.d.root = "QueueMessagesList"};
	int err;

	*out = NULL;
	*count = 0;
	err = read_all(&r.d, on_start, on_end, on_text, body, len);
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
		.d.root = "Error", .code = code, .code_cap = code_cap, .msg = msg, .msg_cap = msg_cap};

	code[0] = msg[0] = '\0';
	if (read_all(&r.d, on_start, on_end, on_text, body, len) != 0)
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

/* ---- blob listings ---------------------------------------------------------------------------- */

enum blob_field {
	B_NONE,
	B_NAME,
	B_LAST_MODIFIED,
	B_ETAG,
	B_LENGTH,
	B_TYPE,
	B_META,
	B_NEXT_MARKER,
};

struct blob_reader {
	struct doc d;
	bool in_blobs, in_blob, in_props, in_meta;
	bool name_encoded;   /* <Name Encoded="true">: percent-encoded */
	char meta_name[256]; /* the open metadata element's name; "" when too long */
	struct ecw_blob_info *cur;
	struct ecw_xml_blob_page *page;
	size_t cap;
};

static const struct {
	const char *name;
	enum blob_field field;
} prop_fields[] = {
	{"Last-Modified", B_LAST_MODIFIED},
	{"Etag", B_ETAG},
	{"Content-Length", B_LENGTH},
	{"Content-Type", B_TYPE},
};

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* A name the service percent-encoded (one XML cannot carry), decoded in
 * place. */
static int pct_decode(struct ecw_buf *b)
{
	size_t k = 0;

	for (size_t i = 0; i < b->len; i++) {
		if (b->ptr[i] == '%') {
			int hi = i + 2 < b->len ? hexval(b->ptr[i + 1]) : -1,
			    lo = i + 2 < b->len ? hexval(b->ptr[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return ecw_error_set(ECW_ERROR,
						     "blob list: a badly encoded name in the answer");
			b->ptr[k++] = (char)(hi * 16 + lo);
			i += 2;
		} else {
			b->ptr[k++] = b->ptr[i];
		}
	}
	b->len = k;
	if (b->ptr)
		b->ptr[k] = '\0';
	return 0;
}

static bool attr_true(const XML_Char **attrs, const char *name)
{
	for (size_t i = 0; attrs[i] && attrs[i + 1]; i += 2)
		if (strcmp(attrs[i], name) == 0)
			return strcmp(attrs[i + 1], "true") == 0;
	return false;
}

static void open_field(struct blob_reader *r, enum blob_field f)
{
	r->d.field = f;
	r->d.field_depth = r->d.depth;
	ecw_buf_reset(&r->d.text);
}

static void XMLCALL blob_start(void *data, const XML_Char *name, const XML_Char **attrs)
{
	struct blob_reader *r = data;
	int depth = ++r->d.depth;

	if (r->d.field != B_NONE)
		return; /* nested inside a field: its text still counts */
	if (depth == 1) {
		check_root(&r->d, name);
	} else if (depth == 2) {
		r->in_blobs = strcmp(name, "Blobs") == 0;
		if (strcmp(name, "NextMarker") == 0)
			open_field(r, B_NEXT_MARKER);
	} else if (depth == 3 && r->in_blobs) {
		/* Each item is made once its Name is in; a page holds at most
		 * the service's 5,000, so a hostile answer cannot make more. A
		 * BlobPrefix (only with a delimiter, never sent) is passed over. */
		r->in_blob = strcmp(name, "Blob") == 0;
		r->cur = NULL;
		if (r->in_blob && r->page->n == ECW_XML_BLOB_PAGE_MAX)
			fail(&r->d, ecw_error_set(ECW_ERROR, "blob list: over %d blobs in one page",
						  ECW_XML_BLOB_PAGE_MAX));
	} else if (depth == 4 && r->in_blob) {
		r->in_props = strcmp(name, "Properties") == 0;
		r->in_meta = strcmp(name, "Metadata") == 0;
		if (strcmp(name, "Name") == 0) {
			r->name_encoded = attr_true(attrs, "Encoded");
			open_field(r, B_NAME);
		}
	} else if (depth == 5 && r->cur && r->in_props) {
		for (size_t i = 0; i < sizeof(prop_fields) / sizeof(prop_fields[0]); i++)
			if (strcmp(name, prop_fields[i].name) == 0)
				open_field(r, prop_fields[i].field);
	} else if (depth == 5 && r->cur && r->in_meta) {
		size_t n = strlen(name);
		if (n < sizeof(r->meta_name))
			memcpy(r->meta_name, name, n + 1);
		else
			r->meta_name[0] = '\0';
		open_field(r, B_META);
	}
}

/* The open field of the current blob is complete. */
static int blob_field_done(struct blob_reader *r)
{
	struct ecw_buf *t = &r->d.text;
	struct ecw_blob_info *b = r->cur;
	const char *v = ecw_buf_cstr(t);
	char *end;
	int err;

	/* Only a Name and the NextMarker come before their blob is known. */
	if (!b && r->d.field != B_NAME && r->d.field != B_NEXT_MARKER)
		return 0;
	switch (r->d.field) {
	case B_NAME:
		if (b)
			return ecw_error_set(ECW_ERROR, "blob list: a blob with two names in the answer");
		if (r->name_encoded && (err = pct_decode(t)) < 0)
			return err;
		if (t->len == 0 || t->len > 4 * ECW_BLOB_NAME_MAX || strlen(v) != t->len)
			return ecw_error_set(ECW_ERROR,
					     "blob list: a blob name the service cannot have sent");
		if (!(r->cur = ecw_blob_info_new(v, t->len)))
			return ECW_ENOMEM;
		r->page->items[r->page->n++] = r->cur;
		return 0;
	case B_LAST_MODIFIED: return ecw_date_parse(&b->last_modified, v);
	case B_ETAG: return ecw_blob_info_set_etag(b, v, t->len);
	case B_LENGTH:
		b->content_length = strtoll(v, &end, 10);
		if (end == v || *end || b->content_length < 0)
			return ecw_error_set(ECW_ERROR, "blob list: a bad Content-Length in the answer");
		b->total_length = b->content_length;
		return 0;
	case B_TYPE: copy_text(b->content_type, sizeof(b->content_type), t); return 0;
	case B_META:
		if (!r->meta_name[0]) {
			b->meta_partial = true;
			return 0;
		}
		return ecw_blob_info_add_meta(b, r->meta_name, strlen(r->meta_name), v, t->len);
	case B_NEXT_MARKER:
		free(r->page->next_marker);
		if (!(r->page->next_marker = strdup(v)))
			return ecw_error_set(ECW_ENOMEM, "out of memory");
		return 0;
	default: return 0;
	}
}

static void XMLCALL blob_end(void *data, const XML_Char *name)
{
	struct blob_reader *r = data;
	int err = 0;

	(void)name;
	if (r->d.field != B_NONE && r->d.depth == r->d.field_depth) {
		err = blob_field_done(r);
		r->d.field = B_NONE;
	} else if (r->d.field == B_NONE && r->d.depth == 3 && r->in_blob) {
		if (!r->cur)
			err = ecw_error_set(ECW_ERROR, "blob list: a blob without a Name in the answer");
		r->cur = NULL;
		r->in_blob = false;
	} else if (r->d.field == B_NONE && r->d.depth == 4) {
		r->in_props = r->in_meta = false;
	} else if (r->d.field == B_NONE && r->d.depth == 2) {
		r->in_blobs = false;
	}
	if (err < 0)
		fail(&r->d, err);
	r->d.depth--;
}

int ecw_xml_parse_blob_list(struct ecw_xml_blob_page *out, const char *body, size_t len)
{
	struct blob_reader r = {.d.root = "EnumerationResults", .page = out};
	int err;

	memset(out, 0, sizeof(*out));
	if (!(out->items = calloc(ECW_XML_BLOB_PAGE_MAX, sizeof(*out->items))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	err = read_all(&r.d, blob_start, blob_end, on_text, body, len);
	if (err == 1)
		err = ecw_error_set(ECW_ERROR, "blob list: the answer is not an EnumerationResults");
	if (err == 0 && !out->next_marker && !(out->next_marker = strdup("")))
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
	if (err < 0)
		ecw_xml_blob_page_dispose(out);
	return err;
}

void ecw_xml_blob_page_dispose(struct ecw_xml_blob_page *p)
{
	if (!p)
		return;
	for (size_t i = 0; p->items && i < p->n; i++)
		ecw_blob_info_free(p->items[i]);
	free(p->items);
	free(p->next_marker);
	memset(p, 0, sizeof(*p));
}
