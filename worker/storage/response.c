/* response.c - the response record (see response.h): the headers kept in one
 * buffer, and the body. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "response.h"

/* The headers kept from one response, together: 48 headers would be 96
 * allocations as separate strings. */
#define RESP_HEADERS_MAX ((size_t)64 * 1024)

void ecw_response_init(struct ecw_response *resp)
{
	memset(resp, 0, sizeof(*resp));
	ecw_buf_init(&resp->body, ECW_BUF_DEFAULT_MAX);
	ecw_buf_init(&resp->hdrs, RESP_HEADERS_MAX);
}

void ecw_response_clear_headers(struct ecw_response *resp)
{
	ecw_buf_reset(&resp->hdrs);
	resp->nheaders = 0;
}

void ecw_response_reset(struct ecw_response *resp)
{
	ecw_response_clear_headers(resp);
	resp->status = 0;
	ecw_buf_reset(&resp->body);
}

void ecw_response_dispose(struct ecw_response *resp)
{
	if (!resp)
		return;
	ecw_response_reset(resp);
	ecw_buf_dispose(&resp->body);
	ecw_buf_dispose(&resp->hdrs);
}

int ecw_response_add_header(struct ecw_response *resp, const char *name, size_t nlen, const char *value,
			    size_t vlen)
{
	int err;

	while (vlen && (*value == ' ' || *value == '\t'))
		value++, vlen--;
	while (vlen && strchr(" \t\r\n", value[vlen - 1]))
		vlen--;
	/* Each is kept as two C strings, so a NUL ends it (as strndup did). */
	nlen = strnlen(name, nlen);
	vlen = strnlen(value, vlen);
	/* The headers we read come early: extras past the count or the size
	 * are dropped. */
	if (resp->nheaders == ECW_RESP_MAX_HEADERS || nlen + vlen + 2 > resp->hdrs.max - resp->hdrs.len)
		return 0;
	resp->hat[resp->nheaders] = resp->hdrs.len;
	if ((err = ecw_buf_add(&resp->hdrs, name, nlen)) < 0 || (err = ecw_buf_addc(&resp->hdrs, '\0')) < 0 ||
	    (err = ecw_buf_add(&resp->hdrs, value, vlen)) < 0 ||
	    (err = ecw_buf_addc(&resp->hdrs, '\0')) < 0) {
		resp->hdrs.len = resp->hat[resp->nheaders];
		return err;
	}
	resp->nheaders++;
	return 0;
}

const char *ecw_response_header(const struct ecw_response *resp, const char *name)
{
	for (size_t i = 0; i < resp->nheaders; i++) {
		const char *n = resp->hdrs.ptr + resp->hat[i];

		if (strcasecmp(n, name) == 0)
			return n + strlen(n) + 1;
	}
	return NULL;
}
