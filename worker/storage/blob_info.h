/* SPDX-License-Identifier: MIT */
/* blob_info.h - making a struct ecw_blob_info (blob_info.c; the type and
 * its free are public, ecw_storage.h): below blob.c, which fills one from an
 * answer's headers, and xml.c, which fills one per item of a listing.
 *
 * Ownership: ecw_blob_info_new makes a heap object the caller frees with
 * ecw_blob_info_free; each metadata pair's name is one allocation holding
 * its value too. */
#ifndef ECW_STORAGE_BLOB_INFO_H
#define ECW_STORAGE_BLOB_INFO_H

#include <stddef.h>

#include "ecw_storage.h"

/* An info naming the blob (len bytes of name), everything else empty;
 * NULL, the last error set, when out of memory. */
struct ecw_blob_info *ecw_blob_info_new(const char *name, size_t len);
/* Keeps one metadata pair the service sent, or sets meta_partial when it
 * does not fit (ECW_BLOB_META_MAX pairs, ECW_BLOB_META_BYTES together) or
 * is not a metadata name with a printable ASCII value. < 0 only when out of
 * memory. */
int ecw_blob_info_add_meta(struct ecw_blob_info *info, const char *name, size_t nlen, const char *value,
			   size_t vlen) ECW_MUST_USE;
/* The ETag as the headers carry it, quoted: a listing's XML gives it bare
 * (0x8D...), an answer's header with its quotes; either is kept quoted, so
 * one ETag reads the same from both and serves as If-Match. ECW_ERROR
 * when it does not fit. */
int ecw_blob_info_set_etag(struct ecw_blob_info *info, const char *etag, size_t len) ECW_MUST_USE;

#endif
