/* SPDX-License-Identifier: MIT */
/* xml.h - the services' XML answers (xml.c, the only user of expat): queue
 * messages, blob listings and error bodies. The message array
 * ecw_xml_parse_messages returns is the caller's, freed with
 * ecw_xml_msgs_free (or the public ecw_queue_msgs_free, which calls it); a
 * blob listing's page is a caller-owned struct the parse fills, disposed of
 * with ecw_xml_blob_page_dispose. */
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
/* One page of a List Blobs answer (EnumerationResults): its blobs in order,
 * each a heap ecw_blob_info the page owns until taken (set to NULL), and
 * the NextMarker ("" on the last page). */
#define ECW_XML_BLOB_PAGE_MAX 5000 /* the service's most in one page */
struct ecw_xml_blob_page {
	struct ecw_blob_info **items;
	size_t n;
	char *next_marker;
};
/* A Name with Encoded="true" is percent-decoded; an Etag is quoted
 * (ecw_blob_info_set_etag). On error the page is empty. */
int ecw_xml_parse_blob_list(struct ecw_xml_blob_page *out, const char *body, size_t len) ECW_MUST_USE;
/* Frees the items left in it (NULL ones skipped) and the marker. */
void ecw_xml_blob_page_dispose(struct ecw_xml_blob_page *p);
/* <Error><Code/><Message/></Error>; missing parts come back as "". */
void ecw_xml_parse_error(char *code, size_t code_cap, char *msg, size_t msg_cap, const char *body,
			 size_t len);

#endif
