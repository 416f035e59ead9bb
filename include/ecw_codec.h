/* SPDX-License-Identifier: MIT */
/* ecw_codec.h - base64 (RFC 4648, standard alphabet, padded; base64.c),
 * UTF-8 decoding (utf8.c), JSON string literals (json_quote.c), text safe
 * for a terminal (term_escape.c), written to caller-owned ecw_bufs, and a
 * string hash (hash.c). Decoding is strict: what the service or a message
 * could carry ambiguously is refused, never guessed. */
#ifndef ECW_CODEC_H
#define ECW_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include "ecw_buf.h"

/* FNV-1a (64 bits) of s with its NUL, continuing from h (a first string:
 * from ECW_HASH_START): to tell keys apart before comparing them, never
 * for anything an attacker may aim at. */
#define ECW_HASH_START 14695981039346656037ULL
uint64_t ecw_hash_str(uint64_t h, const char *s);

int ecw_base64_encode(struct ecw_buf *out, const void *p, size_t n) ECW_MUST_USE;
/* Rejects bad characters, bad padding, bad lengths and non-canonical bits. */
int ecw_base64_decode(struct ecw_buf *out, const char *s, size_t n) ECW_MUST_USE;
/* Decodes one UTF-8 sequence (shortest form, no surrogates, <= U+10FFFF);
 * returns its length in bytes, or 0 when s does not start with one. */
size_t ecw_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* True when all n bytes are valid UTF-8. */
int ecw_utf8_valid(const char *s, size_t n);

/* n bytes as a JSON string literal, quotes included, as json-c writes one
 * with NOSLASHESCAPE: \" \\ \b \f \n \r \t, any other byte below 0x20 as
 * \u00xx, every other byte as it is (UTF-8 is the caller's to check). */
int ecw_json_quote(struct ecw_buf *out, const char *s, size_t n) ECW_MUST_USE;
/* The length ecw_json_quote would append. */
size_t ecw_json_quote_len(const char *s, size_t n);

/* n bytes of untrusted text as a terminal may show them: printable UTF-8 as
 * it is; \ as \\; TAB, LF, CR and ESC as \t \n \r \e; other C0 controls,
 * DEL and every byte that is not UTF-8 as \xNN; C1 controls, bidi controls
 * and U+2028/U+2029 as \uNNNN. The result holds no byte below 0x20, no DEL
 * and only valid UTF-8. */
int ecw_term_escape(struct ecw_buf *out, const char *s, size_t n) ECW_MUST_USE;

#endif
