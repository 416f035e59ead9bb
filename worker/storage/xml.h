/* xml.h - the Queue service's XML answers (xml.c, the only user of expat).
 * The message array ecw_xml_parse_messages returns is the caller's, freed
 * with ecw_queue_msgs_free. */
#ifndef ECW_STORAGE_XML_H
#define ECW_STORAGE_XML_H

#include <stddef.h>

#include "ecw_storage.h"

/* Parses a QueueMessagesList. A message without MessageText (as a put's
 * answer has) comes back with text NULL. */
int ecw_xml_parse_messages(struct ecw_queue_msg **out, size_t *count, const char *body, size_t len) ECW_MUST_USE;
/* <Error><Code/><Message/></Error>; missing parts come back as "". */
void ecw_xml_parse_error(char *code, size_t code_cap, char *msg, size_t msg_cap,
			 const char *body, size_t len);

#endif
