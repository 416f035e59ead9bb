/* SPDX-License-Identifier: MIT */
/* base64.c - base64 (RFC 4648, standard alphabet, padded; ecw_codec.h), for
 * keys, binary properties, signatures and base64 messages. */
#include <openssl/evp.h>
#include <string.h>

#include "ecw_codec.h"

int ecw_base64_encode(struct ecw_buf *out, const void *p, size_t n)
{
	size_t need = 4 * ((n + 2) / 3);
	size_t start = out->len;
	int err;

	/* Reserve, then let OpenSSL write in place. */
	if ((err = ecw_buf_add(out, "", 0)) < 0)
		return err;
	for (size_t i = 0; i < need; i++)
		if ((err = ecw_buf_addc(out, '=')) < 0)
			return err;
	if (n)
		EVP_EncodeBlock((unsigned char *)out->ptr + start, p, (int)n);
	return 0;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Written out rather than EVP_DecodeBlock, which accepts whitespace and
 * cannot tell padding from zero bytes. */
int ecw_base64_decode(struct ecw_buf *out, const char *s, size_t n)
{
	int err;

	if (n % 4 != 0)
		goto bad;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		int pad = 0;
		for (int j = 0; j < 4; j++) {
			unsigned char c = (unsigned char)s[i + j];
			if (c == '=' && i + 4 == n && j >= 2) {
				v[j] = 0;
				pad++;
			} else if (pad || (v[j] = b64_value(c)) < 0) {
				goto bad;
			}
		}
		unsigned char bytes[3] = {(unsigned char)(v[0] << 2 | v[1] >> 4),
					  (unsigned char)(v[1] << 4 | v[2] >> 2),
					  (unsigned char)(v[2] << 6 | v[3])};
		/* Non-canonical: bits that padding drops must be zero. */
		if ((pad == 1 && (v[2] & 3)) || (pad == 2 && (v[1] & 15)))
			goto bad;
		if ((err = ecw_buf_add(out, bytes, (size_t)(3 - pad))) < 0)
			return err;
	}
	return 0;
bad:
	return ecw_error_set(ECW_EINVALID, "not valid base64");
}
