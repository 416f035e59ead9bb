/* SPDX-License-Identifier: MIT */
/* ecw_err.h - the status codes every fallible ecworker function returns, and
 * the per-thread "last error" that explains the most recent failure: a one-line
 * message (never containing a secret), the HTTP status, the service's error code
 * and its x-ms-request-id. The last error lives in thread-local storage owned by
 * this module; it stays valid until the next failing call on the same thread. */
#ifndef ECW_ERR_H
#define ECW_ERR_H

#include <stdbool.h>
#include <stddef.h>

#define ECW_MUST_USE __attribute__((warn_unused_result))
#define ECW_PRINTF(f, a) __attribute__((format(printf, f, a)))

typedef enum ecw_err {
	ECW_OK = 0,
	ECW_ERROR = -1,          /* anything else: an unexpected answer, a bug, TLS setup */
	ECW_ENOMEM = -2,         /* out of memory, or a bounded buffer's cap reached */
	ECW_EINVALID = -3,       /* bad input caught before any request, or 400 */
	ECW_ENOTFOUND = -4,      /* any other 404; for queue delete/update a stale pop receipt too */
	ECW_ECONFLICT = -5,      /* 409: already exists, being deleted, ... */
	ECW_EPRECONDITION = -6,  /* 412: If-Match did not match the current ETag */
	ECW_EAUTH = -7,          /* 401/403: wrong key, expired or insufficient SAS */
	ECW_EBUSY = -8,          /* 429/503: throttled or server busy (after retries) */
	ECW_ETIMEOUT = -9,       /* 408/504 or a network timeout (after retries) */
	ECW_ETRANSIENT = -10,    /* 500/502, refused or reset connection (after retries) */
	ECW_ETOOLARGE = -11,     /* 413, or a body over a service limit caught before sending */
	ECW_ENOTABLE = -12,      /* 404: the table itself does not exist */
	ECW_ECANCELED = -13,     /* the worker is stopping: a wait was cut short (ecw_cancel.h) */
	ECW_EBLOBNOTFOUND = -14, /* 404 BlobNotFound: the container is there, the blob is not */
	ECW_ENOCONTAINER = -15,  /* 404 ContainerNotFound: the blob container itself does not exist */
	ECW_ELATER = -16,        /* no failure: a job is not done yet and asks to run again later */
} ecw_err;

struct ecw_error {
	int code;              /* an ecw_err */
	int http_status;       /* 0 when no response arrived */
	char service_code[64]; /* x-ms-error-code or the body's code; "" if none */
	char request_id[64];   /* x-ms-request-id; "" if none */
	char message[512];     /* one line for logs */
	/* ECW_ENOTABLE: the table that does not exist, as the request named it
	 * ("" when unknown); ECW_ENOCONTAINER: the blob container, likewise;
	 * "" for every other code. Set by worker/storage. */
	char table[64];
};

/* The last error recorded on this thread (code ECW_OK and "" when none). */
const struct ecw_error *ecw_error_last(void);

/* Records a failure and returns code, so callers can write
 * `return ecw_error_set(ECW_EINVALID, "...")`. Clears status/service fields. */
int ecw_error_set(int code, const char *fmt, ...) ECW_PRINTF(2, 3);

/* Records a failure that came from the service. */
int ecw_error_set_http(int code, int http_status, const char *service_code, const char *request_id,
		       const char *fmt, ...) ECW_PRINTF(5, 6);

void ecw_error_clear(void);

/* Names the missing table of the last error when it is ECW_ENOTABLE, or
 * the missing container when it is ECW_ENOCONTAINER (the storage client,
 * which knows what a request named); does nothing for any other code. At
 * most 63 bytes of the name are kept. */
void ecw_error_set_table(const char *table, size_t len);

/* "ECW_ENOTFOUND" style names, for logs and tests. */
const char *ecw_error_name(int code);

/* True for the codes a caller may retry later: EBUSY, ETIMEOUT, ETRANSIENT. */
bool ecw_error_is_transient(int code);

/* True for ECW_ENOTFOUND and ECW_ENOTABLE: what was asked for is not there,
 * whether or not its table is (for the many callers to whom the two mean
 * the same: delete-if-exists, read-or-absent); likewise ECW_EBLOBNOTFOUND
 * and ECW_ENOCONTAINER for a blob and its container. */
bool ecw_error_is_absent(int code);

#endif
