/* SPDX-License-Identifier: MIT */
/* status.c - HTTP statuses and the service's error codes become ecw_err
 * classes here and nowhere else (see status.h): the client classifies every
 * answer with it, the batch reader every sub-response, the token fetcher a
 * token endpoint's status. */
#include <string.h>

#include "status.h"

int ecw_status_to_err(long status, const char *code)
{
	if (status >= 200 && status < 300)
		return 0;
	switch (status) {
	case 400:
		/* Azurite's answer to a stale pop receipt on a message that still
		 * exists (received again since): the caller's lease is gone. */
		if (code && strcmp(code, "PopReceiptMismatch") == 0)
			return ECW_ENOTFOUND;
		return ECW_EINVALID;
	case 401:
	case 403: return ECW_EAUTH;
	case 404:
		/* A missing table, not a missing entity: callers tell the two
		 * apart by class, never by the service's string. */
		if (code && strcmp(code, "TableNotFound") == 0)
			return ECW_ENOTABLE;
		/* The same for blobs: a missing container is not a missing blob. */
		if (code && strcmp(code, "ContainerNotFound") == 0)
			return ECW_ENOCONTAINER;
		if (code && strcmp(code, "BlobNotFound") == 0)
			return ECW_EBLOBNOTFOUND;
		return ECW_ENOTFOUND;
	case 408: return ECW_ETIMEOUT;
	case 409: return ECW_ECONFLICT;
	/* Table UpdateConditionNotSatisfied, blob ConditionNotMet: an If-Match
	 * (or If-None-Match with an ETag) that did not hold. */
	case 412: return ECW_EPRECONDITION;
	case 413: return ECW_ETOOLARGE;
	case 429: return ECW_EBUSY;
	case 500:
		if (code && strcmp(code, "OperationTimedOut") == 0)
			return ECW_ETIMEOUT;
		return ECW_ETRANSIENT;
	case 502: return ECW_ETRANSIENT;
	case 503: return ECW_EBUSY;
	case 504: return ECW_ETIMEOUT;
	}
	return ECW_ERROR;
}
