/* SPDX-License-Identifier: MIT */
/* fuzz_queue_xml.c - the services' XML answers (worker/storage/xml.c):
 * message lists as receive and peek return them (ecw_xml_parse_messages),
 * blob listings (ecw_xml_parse_blob_list) and error bodies
 * (ecw_xml_parse_error), from the same input.
 * Invariants: a list that parses has ids, NUL-terminated texts whose length
 * is text_len (or none, without MessageText), and either messages or
 * nothing at all; a listing that parses has at most 5,000 blobs, each with
 * a name, a quoted ETag or none, and metadata within its caps, and a marker;
 * one that does not is empty; error fields are NUL-terminated within their
 * buffers. */
#include "ecw_storage.h"
#include "fuzz.h"
#include "xml.h"

static void check_blob_list(const char *body, size_t size)
{
	struct ecw_xml_blob_page page;

	if (ecw_xml_parse_blob_list(&page, body, size) < 0) {
		FUZZ_CHECK(page.n == 0 && !page.items && !page.next_marker);
		return;
	}
	FUZZ_CHECK(page.n <= ECW_XML_BLOB_PAGE_MAX && page.next_marker);
	for (size_t i = 0; i < page.n; i++) {
		const struct ecw_blob_info *b = page.items[i];
		size_t bytes = 0;
		FUZZ_CHECK(b && b->name && *b->name);
		FUZZ_CHECK(!b->etag[0] || (b->etag[0] == '"' && b->etag[strlen(b->etag) - 1] == '"'));
		FUZZ_CHECK(memchr(b->content_type, 0, sizeof(b->content_type)) && b->content_length >= 0);
		FUZZ_CHECK(b->n_meta <= ECW_BLOB_META_MAX);
		for (size_t k = 0; k < b->n_meta; k++)
			bytes += strlen(b->meta[k].name) + strlen(b->meta[k].value);
		FUZZ_CHECK(bytes <= ECW_BLOB_META_BYTES);
	}
	ecw_xml_blob_page_dispose(&page);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *body = fuzz_exact(data, size);
	struct ecw_queue_msg *msgs = NULL;
	size_t count = 99;
	char code[64], msg[300];

	if (ecw_xml_parse_messages(&msgs, &count, body, size) == 0) {
		FUZZ_CHECK((count == 0) == (msgs == NULL));
		for (size_t i = 0; i < count; i++) {
			FUZZ_CHECK(msgs[i].id[0] && memchr(msgs[i].id, 0, sizeof(msgs[i].id)));
			FUZZ_CHECK(memchr(msgs[i].pop_receipt, 0, sizeof(msgs[i].pop_receipt)));
			/* NULL only without MessageText (a put's answer; receive
			 * and peek refuse such a list). */
			if (msgs[i].text)
				FUZZ_CHECK(strlen(msgs[i].text) == msgs[i].text_len);
			else
				FUZZ_CHECK(msgs[i].text_len == 0);
		}
	} else {
		FUZZ_CHECK(msgs == NULL && count == 0);
	}
	ecw_queue_msgs_free(msgs, count);
	check_blob_list(body, size);
	ecw_xml_parse_error(code, sizeof(code), msg, sizeof(msg), body, size);
	FUZZ_CHECK(strlen(code) < sizeof(code) && strlen(msg) < sizeof(msg));
	free(body);
	return 0;
}
