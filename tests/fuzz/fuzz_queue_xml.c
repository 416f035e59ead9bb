/* SPDX-License-Identifier: MIT */
/* fuzz_queue_xml.c - the Queue service's XML answers (worker/storage/xml.c):
 * message lists as receive and peek return them (ecw_xml_parse_messages) and
 * error bodies (ecw_xml_parse_error), from the same input.
 * Invariants: a list that parses has ids, NUL-terminated texts whose length
 * is text_len (or none, without MessageText), and either messages or
 * nothing at all; error fields are
 * NUL-terminated within their buffers. */
#include "ecw_storage.h"
#include "fuzz.h"
#include "xml.h"

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
	ecw_xml_parse_error(code, sizeof(code), msg, sizeof(msg), body, size);
	FUZZ_CHECK(strlen(code) < sizeof(code) && strlen(msg) < sizeof(msg));
	free(body);
	return 0;
}
