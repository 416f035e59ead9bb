/* fuzz_template.c - key and filter templates (jobs/template.c): compiled from
 * the input's first line and rendered, plain and as OData literal text,
 * against a fixed entity that has every EDM type, whose string property S
 * holds the input's second line (and T the rest).
 * Invariants: a compiled template keeps its source text; the OData rendering
 * is the plain one with the values' ' doubled; valid UTF-8 in gives valid UTF-8 out. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size), *nl2;
	size_t tlen = nl ? (size_t)(nl - data) : size;
	const char *rest = nl ? (const char *)nl + 1 : "";
	size_t rest_len = nl ? size - tlen - 1 : 0;
	char *text = fuzz_cstr(data, tlen);
	struct ecw_template *t = NULL;
	struct ecw_entity *e;
	struct ecw_buf plain, odata, doubled; /* doubled: odata undoubled */
	int ep, eo;

	nl2 = memchr(rest, '\n', rest_len);
	{
		size_t slen = nl2 ? (size_t)((const char *)nl2 - rest) : rest_len;
		e = make_entity(rest, slen, nl2 ? (const char *)nl2 + 1 : "", nl2 ? rest_len - slen - 1 : 0);
	}
	if (ecw_template_compile(&t, text, "fuzz template") != 0) {
		FUZZ_CHECK(t == NULL);
		FUZZ_CHECK(ecw_error_last()->code == ECW_EINVALID);
		goto done;
	}
	FUZZ_CHECK(strcmp(ecw_template_text(t), text) == 0);
	ecw_buf_init(&plain, 0);
	ecw_buf_init(&odata, 0);
	ecw_buf_init(&doubled, 0);
	ep = ecw_template_render(&plain, t, e, ECW_TEMPLATE_PLAIN);
	eo = ecw_template_render(&odata, t, e, ECW_TEMPLATE_ODATA);
	FUZZ_CHECK(ep == eo);
	if (ep == 0) {
		/* Without a quote in the template itself, the OData rendering
		 * with every '' made ' again is the plain one. */
		if (!strchr(text, '\'')) {
			for (size_t i = 0; i < odata.len; i++) {
				FUZZ_CHECK(ecw_buf_add(&doubled, &odata.ptr[i], 1) == 0);
				if (odata.ptr[i] == '\'') {
					FUZZ_CHECK(i + 1 < odata.len && odata.ptr[i + 1] == '\'');
					i++;
				}
			}
			FUZZ_CHECK(doubled.len == plain.len &&
			           memcmp(ecw_buf_cstr(&doubled), ecw_buf_cstr(&plain), plain.len) == 0);
		}
		if (ecw_utf8_valid(text, strlen(text)))
			FUZZ_CHECK(ecw_utf8_valid(ecw_buf_cstr(&plain), plain.len));
	} else {
		FUZZ_CHECK(ep == ECW_EINVALID);
	}
	ecw_buf_dispose(&plain);
	ecw_buf_dispose(&odata);
	ecw_buf_dispose(&doubled);
done:
	ecw_template_free(t);
	ecw_entity_free(e);
	free(text);
	return 0;
}
