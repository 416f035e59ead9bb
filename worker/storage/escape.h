/* SPDX-License-Identifier: MIT */
/* escape.h - how text goes into a URL or a queue message (escape.c; the
 * $filter literal, ecw_escape_filter_string, and encodeURIComponent's
 * encoding, ecw_escape_pct, are public in ecw_storage.h).
 * Each function appends to the caller's buffer; nothing to free. */
#ifndef ECW_STORAGE_ESCAPE_H
#define ECW_STORAGE_ESCAPE_H

#include <stddef.h>

#include "ecw_buf.h"
#include "ecw_storage.h"

/* "/{table}(PartitionKey='..',RowKey='..')" with quotes doubled, then encoded. */
int ecw_escape_entity_path(struct ecw_buf *out, const char *table, const char *pk,
			   const char *rk) ECW_MUST_USE;
/* Escapes & < > and \r (as &#13;, which XML would otherwise turn into \n). */
int ecw_escape_xml(struct ecw_buf *out, const char *s, size_t n) ECW_MUST_USE;

#endif
