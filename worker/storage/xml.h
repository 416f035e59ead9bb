/* SPDX-License-Identifier: MIT */
/* xml.h - the Queue service's XML answers (xml.c, the only user of expat).
 * The message array ecw_xml_parse_messages returns is the caller's, freed
 * with ecw_xml_msgs_free (or the public ecw_queue_msgs_free, which calls it). */
#ifndef ECW_STORAGE_XML_H
#define ECW_STORAGE_XML_H

#include <stddef.h>

#include "ecw_storage.h"

/* Parses a QueueMessagesList. A message without MessageText (as a put's
 * answer has) comes back with text NULL. */
int ecw_xml_parse_messages(struct ecw_queue_msg **out, size_t *count, const char *body,
			   size_t len) ECW_MUST_USE;
/* Frees an array from ecw_xml_parse_messages and each message's text; NULL is fine. */
void ecw_xml_msgs_free(struct ecw_queue_msg *msgs, size_t count);
/* <Error><Code/><Message/></Error>; missing parts come back as "". */
void ecw_xml_parse_error(char *code, size_t code_cap, char *msg, size_t msg_cap, const char *body,
			 size_t len);

#endif
