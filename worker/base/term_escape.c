/* SPDX-License-Identifier: MIT */
/* term_escape.c - text from a message or the service made safe to print on
 * an operator's terminal (ecw_codec.h). A poison message's text, keys, job
 * name and error are anyone's to write, and a terminal obeys what it prints:
 * ESC sequences move the cursor, clear the screen, retitle the window or
 * rewrite the line above; C1 controls (U+009B is CSI) do the same without ESC;
 * a lone byte 0x9B is CSI to a terminal that is not in UTF-8; and bidi
 * overrides reorder what the eye reads. Each of these is written as a visible
 * escape, and the backslash is doubled so an escape in the text itself cannot
 * pass for one made here; everything else is kept as it is. */
#include <stdio.h>
#include <string.h>

#include "ecw_codec.h"

/* Characters that change how the rest of the line shows: C1 controls, the
 * bidi marks, embeddings, overrides and isolates, and the line and paragraph
 * separators. */
static int invisible_control(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
	       (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

int ecw_term_escape(struct ecw_buf *out, const char *s, size_t n)
{
	char esc[16];
	size_t i = 0, run = 0, k;
	uint32_t cp;
	int err;

	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		const char *named = c == '\\'   ? "\\\\"
				    : c == '\t' ? "\\t"
				    : c == '\n' ? "\\n"
				    : c == '\r' ? "\\r"
				    : c == 0x1B ? "\\e"
						: NULL;

		k = ecw_utf8_decode(s + i, n - i, &cp);
		if (!named && k > 0 && cp >= 0x20 && cp != 0x7F && !invisible_control(cp)) {
			i += k;
			continue;
		}
		if (named)
			snprintf(esc, sizeof(esc), "%s", named);
		else if (k == 0 || cp < 0x80)
			snprintf(esc, sizeof(esc), "\\x%02x", c),
				k = 1; /* C0, DEL, a byte that is not UTF-8 */
		else
			snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)cp);
		if ((err = ecw_buf_add(out, s + run, i - run)) < 0 || (err = ecw_buf_adds(out, esc)) < 0)
			return err;
		i += named ? 1 : k;
		run = i;
	}
	return ecw_buf_add(out, s + run, i - run);
}
