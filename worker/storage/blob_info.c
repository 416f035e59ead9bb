/* SPDX-License-Identifier: MIT */
/* blob_info.c - a blob's properties and metadata as the service told them
 * (blob_info.h), filled by blob.c from headers and by xml.c from a
 * listing. What the service sends is untrusted: every field is bounded, and
 * metadata that does not fit is marked partial, never kept cut. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "blob_info.h"
#include "names.h"

struct ecw_blob_info *ecw_blob_info_new(const char *name, size_t len)
{
	struct ecw_blob_info *info = calloc(1, sizeof(*info));

	if (!info || !(info->name = strndup(name, len))) {
		free(info);
		ecw_error_set(ECW_ENOMEM, "out of memory");
		return NULL;
	}
	return info;
}

void ecw_blob_info_free(struct ecw_blob_info *info)
{
	if (!info)
		return;
	for (size_t i = 0; i < info->n_meta; i++)
		free((char *)info->meta[i].name);
	free(info->meta);
	free(info->name);
	free(info);
}

const char *ecw_blob_info_meta(const struct ecw_blob_info *info, const char *name)
{
	for (size_t i = 0; i < info->n_meta; i++)
		if (strcasecmp(info->meta[i].name, name) == 0)
			return info->meta[i].value;
	return NULL;
}

static bool printable_ascii(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

int ecw_blob_info_add_meta(struct ecw_blob_info *info, const char *name, size_t nlen, const char *value,
			   size_t vlen)
{
	size_t bytes = nlen + vlen;
	char *pair;

	for (size_t i = 0; i < info->n_meta; i++)
		bytes += strlen(info->meta[i].name) + strlen(info->meta[i].value);
	if (info->n_meta == ECW_BLOB_META_MAX || bytes > ECW_BLOB_META_BYTES ||
	    !printable_ascii(value, vlen)) {
		info->meta_partial = true;
		return 0;
	}
	if (!info->meta && !(info->meta = calloc(ECW_BLOB_META_MAX, sizeof(*info->meta))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	if (!(pair = malloc(nlen + 1 + vlen + 1)))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	memcpy(pair, name, nlen);
	pair[nlen] = '\0';
	memcpy(pair + nlen + 1, value, vlen);
	pair[nlen + 1 + vlen] = '\0';
	if (strlen(pair) != nlen || !ecw_names_meta_valid(pair, ECW_BLOB_META_BYTES)) {
		free(pair);
		info->meta_partial = true;
		return 0;
	}
	info->meta[info->n_meta].name = pair;
	info->meta[info->n_meta].value = pair + nlen + 1;
	info->n_meta++;
	return 0;
}

int ecw_blob_info_set_etag(struct ecw_blob_info *info, const char *etag, size_t len)
{
	bool quoted = len >= 2 && etag[0] == '"' && etag[len - 1] == '"';

	if (len + (quoted ? 0 : 2) >= sizeof(info->etag) || !printable_ascii(etag, len))
		return ecw_error_set(ECW_ERROR, "blob: the service sent an ETag that is not one");
	if (quoted) {
		memcpy(info->etag, etag, len);
		info->etag[len] = '\0';
	} else {
		info->etag[0] = '"';
		memcpy(info->etag + 1, etag, len);
		info->etag[len + 1] = '"';
		info->etag[len + 2] = '\0';
	}
	return 0;
}
