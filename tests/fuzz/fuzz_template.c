/* SPDX-License-Identifier: MIT */
/* fuzz_template.c - key and filter templates (jobs/template.c): compiled from
 * the input's first line, as a key and as a filter, and rendered (plain, and
 * as OData) against a fixed entity that has every EDM type, whose string
 * property S holds the input's second line (and T the rest).
 * Invariants: a compiled template keeps its source text; whatever a filter
 * compiles also compiles as a key; a rendered filter has the structure of its
 * template (the same words and parentheses outside '...' literals, each
 * placeholder one word, every literal closed), whatever the values hold;
 * valid UTF-8 in gives valid UTF-8 out. */
#include "ecw_codec.h"
#include "ecw_entity.h"
#include "fuzz.h"
#include "jobs_private.h"

static struct ecw_entity *make_entity(const char *s, size_t slen, const char *t, size_t tlen)
{
	static const unsigned char bin[] = {0, 1, 2, 0xff};
	struct ecw_entity *e;

	FUZZ_CHECK(ecw_entity_new(&e, "pk'ü", "rk 1") == 0);
	if (ecw_utf8_valid(s, slen) && !memchr(s, 0, slen))
		FUZZ_CHECK(ecw_entity_set_string(e, "S", s, slen) == 0);
	if (ecw_utf8_valid(t, tlen) && !memchr(t, 0, tlen))
		FUZZ_CHECK(ecw_entity_set_string(e, "T", t, tlen) == 0);
	FUZZ_CHECK(ecw_entity_set_string(e, "Empty", "", 0) == 0);
	FUZZ_CHECK(ecw_entity_set_int32(e, "I", -42) == 0);
	FUZZ_CHECK(ecw_entity_set_int32(e, "IMin", INT32_MIN) == 0);
	FUZZ_CHECK(ecw_entity_set_int64(e, "L", INT64_MIN) == 0);
	FUZZ_CHECK(ecw_entity_set_double(e, "D", 0.1) == 0);
	FUZZ_CHECK(ecw_entity_set_double(e, "Big", -1.7976931348623157e308) == 0);
	FUZZ_CHECK(ecw_entity_set_double(e, "NaN", __builtin_nan("")) == 0);
	FUZZ_CHECK(ecw_entity_set_bool(e, "B", true) == 0);
	FUZZ_CHECK(ecw_entity_set_datetime(e, "When", "2026-08-19T10:00:00.5Z") == 0);
	FUZZ_CHECK(ecw_entity_set_guid(e, "G", "c9da6455-213d-42c9-9a79-3e9149a57833") == 0);
	FUZZ_CHECK(ecw_entity_set_binary(e, "Bin", bin, sizeof(bin)) == 0);
	FUZZ_CHECK(ecw_entity_set_string(e, "Ä_ü", "ö'ö", strlen("ö'ö")) == 0);
	return e;
}

/* The structure of OData text s (n bytes) as the service lexes it: 'w' for
 * each word (a '...' literal, '' inside, is part of its word), '(' and ')'
 * apart, spaces between. False when a literal is never closed. */
static bool skeleton(struct ecw_buf *out, const char *s, size_t n)
{
	bool in_word = false, in_string = false;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_string) {
			in_string = c != '\'';
		} else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			in_word = false;
		} else if (c == '(' || c == ')') {
			in_word = false;
			FUZZ_CHECK(ecw_buf_addc(out, c) == 0);
		} else {
			if (!in_word)
				FUZZ_CHECK(ecw_buf_addc(out, 'w') == 0);
			in_word = true;
			in_string = c == '\'';
		}
	}
	return !in_string;
}

/* The template as OData text with every placeholder one word ("x"). */
static void template_words(struct ecw_buf *out, const char *text)
{
	for (size_t i = 0; text[i];) {
		if ((text[i] == '{' || text[i] == '}') && text[i + 1] == text[i]) {
			FUZZ_CHECK(ecw_buf_addc(out, text[i]) == 0);
			i += 2;
		} else if (text[i] == '{') {
			FUZZ_CHECK(ecw_buf_addc(out, 'x') == 0);
			i = (size_t)(strchr(text + i, '}') - text) + 1;
		} else {
			FUZZ_CHECK(ecw_buf_addc(out, text[i++]) == 0);
		}
	}
}

static void check_filter(const char *text, const struct ecw_entity *e)
{
	struct ecw_template *t = NULL;
	struct ecw_buf odata, words, want, got;
	int err;

	if (ecw_template_compile_flags(&t, text, "fuzz filter", ECW_TEMPLATE_FILTER) != 0) {
		FUZZ_CHECK(t == NULL);
		FUZZ_CHECK(ecw_error_last()->code == ECW_EINVALID);
		return;
	}
	FUZZ_CHECK(strcmp(ecw_template_text(t), text) == 0);
	ecw_buf_init(&odata, 0);
	ecw_buf_init(&words, 0);
	ecw_buf_init(&want, 0);
	ecw_buf_init(&got, 0);
	err = ecw_template_render(&odata, t, e, ECW_TEMPLATE_ODATA);
	if (err == 0) {
		template_words(&words, text);
		FUZZ_CHECK(skeleton(&want, words.ptr, words.len));
		FUZZ_CHECK(skeleton(&got, odata.ptr, odata.len));
		FUZZ_CHECK(want.len == got.len &&
		           memcmp(ecw_buf_cstr(&want), ecw_buf_cstr(&got), got.len) == 0);
		if (ecw_utf8_valid(text, strlen(text)))
			FUZZ_CHECK(ecw_utf8_valid(ecw_buf_cstr(&odata), odata.len));
	} else {
		FUZZ_CHECK(err == ECW_EINVALID);
	}
	ecw_buf_dispose(&odata);
	ecw_buf_dispose(&words);
	ecw_buf_dispose(&want);
	ecw_buf_dispose(&got);
	ecw_template_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size), *nl2;
	size_t tlen = nl ? (size_t)(nl - data) : size;
	const char *rest = nl ? (const char *)nl + 1 : "";
	size_t rest_len = nl ? size - tlen - 1 : 0;
	char *text = fuzz_cstr(data, tlen);
	struct ecw_template *t = NULL;
	struct ecw_entity *e;
	struct ecw_buf plain, odata;
	int ep;

	nl2 = memchr(rest, '\n', rest_len);
	{
		size_t slen = nl2 ? (size_t)((const char *)nl2 - rest) : rest_len;
		e = make_entity(rest, slen, nl2 ? (const char *)nl2 + 1 : "", nl2 ? rest_len - slen - 1 : 0);
	}
	if (ecw_template_compile(&t, text, "fuzz template") != 0) {
		FUZZ_CHECK(t == NULL);
		FUZZ_CHECK(ecw_error_last()->code == ECW_EINVALID);
		/* A filter is a key template with more rules. */
		FUZZ_CHECK(ecw_template_compile_flags(&t, text, "fuzz filter", ECW_TEMPLATE_FILTER) != 0);
		goto done;
	}
	FUZZ_CHECK(strcmp(ecw_template_text(t), text) == 0);
	ecw_buf_init(&plain, 0);
	ecw_buf_init(&odata, 0);
	ep = ecw_template_render(&plain, t, e, ECW_TEMPLATE_PLAIN);
	if (ep == 0) {
		if (ecw_utf8_valid(text, strlen(text)))
			FUZZ_CHECK(ecw_utf8_valid(ecw_buf_cstr(&plain), plain.len));
	} else {
		FUZZ_CHECK(ep == ECW_EINVALID);
	}
	/* Never lexed, so never rendered as a filter. */
	FUZZ_CHECK(ecw_template_render(&odata, t, e, ECW_TEMPLATE_ODATA) == ECW_EINVALID && odata.len == 0);
	ecw_buf_dispose(&plain);
	ecw_buf_dispose(&odata);
	check_filter(text, e);
done:
	ecw_template_free(t);
	ecw_entity_free(e);
	free(text);
	return 0;
}
