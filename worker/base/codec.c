/* codec.c - base64, UTF-8 and JSON string literals, shared by the storage
 * client (keys, binary properties, signatures, entity JSON), the runtime
 * (base64 messages), the log lines and the jobs. */
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

size_t ecw_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len;
	uint32_t c, min;

	if (n == 0)
		return 0;
	if (u[0] < 0x80) {
		*cp = u[0];
		return 1;
	} else if ((u[0] & 0xE0) == 0xC0) {
		len = 2, c = u[0] & 0x1F, min = 0x80;
	} else if ((u[0] & 0xF0) == 0xE0) {
		len = 3, c = u[0] & 0x0F, min = 0x800;
	} else if ((u[0] & 0xF8) == 0xF0) {
		len = 4, c = u[0] & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((u[i] & 0xC0) != 0x80)
			return 0;
		c = c << 6 | (u[i] & 0x3F);
	}
	if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		return 0;
	*cp = c;
	return len;
}

int ecw_utf8_valid(const char *s, size_t n)
{
	uint32_t cp;
	uint64_t w;
	size_t i = 0, k;

	/* ASCII eight bytes at a time: names, keys and most values are. */
	while (i < n) {
		if (n - i >= 8 && (memcpy(&w, s + i, 8), (w & 0x8080808080808080ULL) == 0)) {
			i += 8;
		} else if ((unsigned char)s[i] < 0x80) {
			i++;
		} else {
			if (!(k = ecw_utf8_decode(s + i, n - i, &cp)))
				return 0;
			i += k;
		}
	}
	return 1;
}

/* ---- JSON string literals ---- */

/* The escape for c, or NULL when c stands as it is: json-c's NOSLASHESCAPE
 * form, which log lines had when json-c wrote them and tools still read. */
static const char *json_escape(unsigned char c, char tmp[7])
{
	static const char hex[] = "0123456789abcdef";

	switch (c) {
	case '"': return "\\\"";
	case '\\': return "\\\\";
	case '\b': return "\\b";
	case '\f': return "\\f";
	case '\n': return "\\n";
	case '\r': return "\\r";
	case '\t': return "\\t";
	}
	if (c >= 0x20)
		return NULL;
	memcpy(tmp, "\\u00", 4);
	tmp[4] = hex[c >> 4];
	tmp[5] = hex[c & 0xf];
	tmp[6] = '\0';
	return tmp;
}

size_t ecw_json_quoted_len(const char *s, size_t n)
{
	size_t len = 2;
	char tmp[7];

	for (size_t i = 0; i < n; i++) {
		const char *e = json_escape((unsigned char)s[i], tmp);

		len += e ? strlen(e) : 1;
	}
	return len;
}

int ecw_json_quote(struct ecw_buf *out, const char *s, size_t n)
{
	size_t run = 0;
	char tmp[7];
	int err;

	if ((err = ecw_buf_addc(out, '"')) < 0)
		return err;
	for (size_t i = 0; i < n; i++) {
		const char *e = json_escape((unsigned char)s[i], tmp);

		if (!e)
			continue;
		if ((err = ecw_buf_add(out, s + run, i - run)) < 0 || (err = ecw_buf_adds(out, e)) < 0)
			return err;
		run = i + 1;
	}
	if ((err = ecw_buf_add(out, s + run, n - run)) < 0)
		return err;
	return ecw_buf_addc(out, '"');
}
