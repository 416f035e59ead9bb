/* escape.h - the pure text rules of the REST API (escape.c): percent-encoding,
 * OData key paths, XML escaping, RFC 1123 dates, resource-name rules. Each
 * function appends to a caller's buffer or writes a caller's array; nothing
 * here allocates anything the caller must free. */
#ifndef ECW_STORAGE_ESCAPE_H
#define ECW_STORAGE_ESCAPE_H

#include <stddef.h>
#include <time.h>

#include "ecw_buf.h"

/* As JavaScript's encodeURIComponent: leaves A-Z a-z 0-9 - _ . ! ~ * ' ( ). */
int ecw_pct_encode(struct ecw_buf *out, const char *s, size_t n) ECW_MUST_USE;
/* "/{table}(PartitionKey='..',RowKey='..')" with quotes doubled, then encoded. */
int ecw_entity_path(struct ecw_buf *out, const char *table, const char *pk, const char *rk) ECW_MUST_USE;
/* Escapes & < > and \r (as &#13;, which XML would otherwise turn into \n). */
int ecw_xml_escape(struct ecw_buf *out, const char *s, size_t n) ECW_MUST_USE;
/* RFC 1123 in the C locale: "Wed, 19 Aug 2026 10:00:00 GMT" (29 chars + NUL). */
void ecw_http_date(char out[32], time_t t);
int ecw_parse_http_date(time_t *out, const char *s) ECW_MUST_USE;
int ecw_check_queue_name(const char *name) ECW_MUST_USE;

int ecw_check_table_name(const char *name) ECW_MUST_USE;

#endif
