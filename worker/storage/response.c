/* SPDX-License-Identifier: MIT */
/* response.c - the response record (see response.h): the headers kept in one
 * buffer, and the body; and the cap on an answer's body by the request's
 * kind. */
#include <stdio.h>
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

void ecw_response_header_at(const struct ecw_response *resp, size_t i, const char **name, const char **value)
{
	*name = resp->hdrs.ptr + resp->hat[i];
	*value = *name + strlen(*name) + 1;
}

/* ---- caps by kind ------------------------------------------------------------------------ */

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

/* What the service can legitimately send for each kind, with room to spare;
 * anything beyond is a broken or hostile endpoint (a proxy's page, a wrong
 * TableEndpoint) and fails with ECW_ETOOLARGE, which is not retried. One
 * thread holds one answer at a time, so a worker's answers take at most
 * its slots times the largest cap. Matched by exact name. */
static const struct {
	const char *op;
	size_t cap;
} caps[] = {
	/* An entity: at most 1 MiB of data on the service. In JSON binary goes
	 * as base64 (4/3) and the service escapes every character from U+007F
	 * up as a 6-byte \u escape (for 2-3 bytes), control characters too (6
	 * for 1): 8 MiB covers the worst of it. Writes may echo the entity. */
	{"table.get", 8 * MiB},
	{"table.insert", 8 * MiB},
	{"table.upsert", 8 * MiB},
	{"table.upsert_merge", 8 * MiB},
	{"table.update", 8 * MiB},
	{"table.merge", 8 * MiB},
	/* A query page: at most 1,000 entities (the service's documented
     * page limit; it documents no byte limit). The jobs ask for pages of
     * 1,000, so 32 MiB allows 32 KiB of JSON an entity on average; a
     * table of bigger entities would need a smaller $top. */
	{"table.query", 32 * MiB},
	/* A batch: at most 100 operations and 4 MiB sent; an answer is a
     * sub-response of a few hundred bytes an operation, or the entities
     * echoed, escaped as above. */
	{"table.batch", 16 * MiB},
	/* A receive or peek: at most 32 messages of 64 KiB of text each, which
     * the XML escapes up to 6 bytes a character (&quot;): 12 MiB, plus
     * each message's few hundred bytes of envelope. */
	{"queue.receive", 16 * MiB},
	{"queue.peek", 16 * MiB},
	/* A blob listing's page: max_results blobs (1,000 unless the caller
	 * asks for up to 5,000), each a name of up to 1,024 characters (up to
	 * 3 KiB of UTF-8, more where XML escapes it), its properties (a KiB or
	 * two of XML) and with include=metadata up to 8 KiB of metadata: a
	 * page of 1,000 stays under 16 MiB. A blob's body is capped by its
	 * reader (ecw_blob_get's max_bytes), not here. */
	{"blob.list", 32 * MiB},
	/* A token endpoint's JSON: an access token of a few KiB. */
	{"token.get", 64 * KiB},
};

/* Everything else (creates, deletes, puts, updates, counts, table lists of
 * up to 1,000 names, and every error) is a few hundred bytes to a few KiB;
 * 1 MiB leaves room for a proxy's or a gateway's error page. */
#define CAP_SMALL (1 * MiB)

size_t ecw_response_cap(const char *op)
{
	for (size_t i = 0; op && i < sizeof(caps) / sizeof(caps[0]); i++)
		if (strcmp(caps[i].op, op) == 0)
			return caps[i].cap;
	return CAP_SMALL;
}

void ecw_response_cap_text(char *out, size_t n, size_t cap, const char *op)
{
	char size[32];

	if (cap >= MiB && cap % MiB == 0)
		snprintf(size, sizeof(size), "%zu MiB", cap / MiB);
	else if (cap >= KiB && cap % KiB == 0)
		snprintf(size, sizeof(size), "%zu KiB", cap / KiB);
	else
		snprintf(size, sizeof(size), "%zu-byte", cap);
	snprintf(out, n, "an answer over the %s cap%s%s", size, op ? " for " : "", op ? op : "");
}
