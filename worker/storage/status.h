/* SPDX-License-Identifier: MIT */
/* status.h - the one place where an HTTP status and the service's error code
 * become an ecw_err class (status.c). Pure: no state, nothing to free. */
#ifndef ECW_STORAGE_STATUS_H
#define ECW_STORAGE_STATUS_H

#include "ecw_err.h"

/* 0 for 2xx; otherwise the class of a non-2xx status, refined by the
 * service's error code (x-ms-error-code or the body's; NULL or "" when none). */
int ecw_status_to_err(long status, const char *service_code);

#endif
