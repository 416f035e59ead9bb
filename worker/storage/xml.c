/* xml.c - reads the Queue service's XML answers (message lists and error
 * bodies) with libxml2: the only file that uses it. Parsing is local only
 * (XML_PARSE_NONET, no entity substitution), and whitespace-only text is kept
 * because it can be a message's whole text. */
#include <stdio.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "storage_private.h"

static pthread_once_t xml_once = PTHREAD_ONCE_INIT;

static void xml_init(void)
{
	/* libxml2 sets up its globals here; doing it lazily from several
	 * threads at once is not safe. */
	xmlInitParser();
}

static xmlDocPtr parse(const char *body, size_t len)
{
	pthread_once(&xml_once, xml_init);
	if (len > (size_t)INT32_MAX)
		return NULL;
	return xmlReadMemory(body, (int)len, NULL, "UTF-8", XML_PARSE_NONET | XML_PARSE_NOERROR |
								     XML_PARSE_NOWARNING | XML_PARSE_HUGE);
}

static bool is(xmlNodePtr n, const char *name)
{
	return n->type == XML_ELEMENT_NODE && xmlStrcmp(n->name, (const xmlChar *)name) == 0;
}

static void copy_text(char *dst, size_t cap, xmlNodePtr n)
{
	xmlChar *t = xmlNodeGetContent(n);

	snprintf(dst, cap, "%s", t ? (const char *)t : "");
	xmlFree(t);
}

static int parse_time(time_t *out, xmlNodePtr n)
{
	char buf[64];

	copy_text(buf, sizeof(buf), n);
	return ecw_parse_http_date(out, buf);
}

static int parse_message(struct ecw_queue_msg *m, xmlNodePtr qm)
{
	int err = 0;

	for (xmlNodePtr n = qm->children; n && err == 0; n = n->next) {
		if (n->type != XML_ELEMENT_NODE)
			continue;
		if (is(n, "MessageId")) {
			copy_text(m->id, sizeof(m->id), n);
		} else if (is(n, "PopReceipt")) {
			copy_text(m->pop_receipt, sizeof(m->pop_receipt), n);
		} else if (is(n, "DequeueCount")) {
			char buf[32], *end;
			copy_text(buf, sizeof(buf), n);
			m->dequeue_count = strtol(buf, &end, 10);
			if (end == buf || *end)
				err = ecw_error_set(ECW_ERROR, "queue: bad DequeueCount in response");
		} else if (is(n, "InsertionTime")) {
			err = parse_time(&m->insertion_time, n);
		} else if (is(n, "ExpirationTime")) {
			err = parse_time(&m->expiration_time, n);
			/* "Never expires" comes back as 9999-12-31. */
			if (err == 0 && m->expiration_time >= (time_t)253402214400LL)
				m->expiration_time = 0;
		} else if (is(n, "TimeNextVisible")) {
			err = parse_time(&m->next_visible, n);
		} else if (is(n, "MessageText")) {
			xmlChar *t = xmlNodeGetContent(n);
			/* Like every field, a repeated one: the last wins. */
			free(m->text);
			m->text_len = t ? strlen((const char *)t) : 0;
			m->text = strdup(t ? (const char *)t : "");
			xmlFree(t);
			if (!m->text)
				err = ecw_error_set(ECW_ENOMEM, "out of memory");
		}
	}
	if (err == 0 && !m->id[0])
		err = ecw_error_set(ECW_ERROR, "queue: message without MessageId in response");
	return err;
}

int ecw_xml_parse_messages(struct ecw_queue_msg **out, size_t *count, const char *body, size_t len)
{
	struct ecw_queue_msg *msgs = NULL;
	xmlDocPtr doc = parse(body, len);
	xmlNodePtr root;
	size_t n = 0, i = 0;
	int err = 0;

	*out = NULL;
	*count = 0;
	if (!doc || !(root = xmlDocGetRootElement(doc)) || !is(root, "QueueMessagesList")) {
		err = ecw_error_set(ECW_ERROR, "queue: response is not a QueueMessagesList");
		goto done;
	}
	for (xmlNodePtr c = root->children; c; c = c->next)
		n += is(c, "QueueMessage");
	if (n && !(msgs = calloc(n, sizeof(*msgs)))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	for (xmlNodePtr c = root->children; c && err == 0; c = c->next)
		if (is(c, "QueueMessage"))
			err = parse_message(&msgs[i++], c);
	if (err < 0) {
		ecw_queue_msgs_free(msgs, n);
		goto done;
	}
	*out = msgs;
	*count = n;
done:
	xmlFreeDoc(doc);
	return err;
}

void ecw_xml_parse_error(char *code, size_t code_cap, char *msg, size_t msg_cap,
			 const char *body, size_t len)
{
	xmlDocPtr doc = parse(body, len);
	xmlNodePtr root;

	code[0] = msg[0] = '\0';
	if (doc && (root = xmlDocGetRootElement(doc)) && is(root, "Error")) {
		for (xmlNodePtr n = root->children; n; n = n->next) {
			if (is(n, "Code"))
				copy_text(code, code_cap, n);
			else if (is(n, "Message"))
				copy_text(msg, msg_cap, n);
		}
	}
	xmlFreeDoc(doc);
}

void ecw_queue_msgs_free(struct ecw_queue_msg *msgs, size_t count)
{
	if (!msgs)
		return;
	for (size_t i = 0; i < count; i++)
		free(msgs[i].text);
	free(msgs);
}
