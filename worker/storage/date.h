/* SPDX-License-Identifier: MIT */
/* date.h - RFC 1123 dates (date.c): the x-ms-date of every request and the
 * times of queue messages. Pure; nothing to free. */
#ifndef ECW_STORAGE_DATE_H
#define ECW_STORAGE_DATE_H

#include <time.h>

#include "ecw_err.h"

/* RFC 1123 in the C locale: "Wed, 19 Aug 2026 10:00:00 GMT" (29 chars + NUL). */
void ecw_date_format(char out[32], time_t t);
/* Reads that form (a one-digit day too); ECW_EINVALID for anything else. */
int ecw_date_parse(time_t *out, const char *s) ECW_MUST_USE;

#endif
