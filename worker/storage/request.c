/* SPDX-License-Identifier: MIT */
/* request.c - the request record (see request.h): its query and headers as
 * owned name/value copies, and the URL it is sent to. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "account.h"
#include "escape.h"
#include "request.h"

void ecw_request_init(struct ecw_request *r, enum ecw_service svc, const char *method)
{
	memset(r, 0, sizeof(*r));
	r->svc = svc;
	r->method = method;
	ecw_buf_init(&r->path, 64 * 1024);
}

/* A pair's name and value share one allocation, which name points at. */
static void free_kvs(struct ecw_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(kv[i].name);
}

void ecw_request_dispose(struct ecw_request *r)
{
	if (!r)
		return;
	ecw_buf_dispose(&r->path);
	free_kvs(r->query, r->nquery);
	free_kvs(r->headers, r->nheaders);
	r->nquery = r->nheaders = 0;
}

static int kv_set(struct ecw_kv *kv, const char *name, size_t nlen, const char *value, size_t vlen)
{
	char *n = malloc(nlen + 1 + vlen + 1); /* "name\0value\0" */

	if (!n)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	memcpy(n, name, nlen);
	n[nlen] = '\0';
	memcpy(n + nlen + 1, value, vlen);
	n[nlen + 1 + vlen] = '\0';
	free(kv->name);
	kv->name = n;
	kv->value = n + nlen + 1;
	return 0;
}

int ecw_request_add_query(struct ecw_request *r, const char *name, const char *value)
{
	int err;

	if (r->nquery == ECW_REQ_MAX_QUERY)
		return ecw_error_set(ECW_ERROR, "too many query parameters");
	r->query[r->nquery].name = r->query[r->nquery].value = NULL;
	if ((err = kv_set(&r->query[r->nquery], name, strlen(name), value, strlen(value))) < 0)
		return err;
	r->nquery++;
	return 0;
}

int ecw_request_set_header(struct ecw_request *r, const char *name, const char *value)
{
	size_t i;
	int err;

	for (i = 0; i < r->nheaders; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			return kv_set(&r->headers[i], name, strlen(name), value, strlen(value));
	if (r->nheaders == ECW_REQ_MAX_HEADERS)
		return ecw_error_set(ECW_ERROR, "too many request headers");
	r->headers[i].name = r->headers[i].value = NULL;
	if ((err = kv_set(&r->headers[i], name, strlen(name), value, strlen(value))) < 0)
		return err;
	r->nheaders++;
	return 0;
}

const char *ecw_request_header(const struct ecw_request *r, const char *name)
{
	for (size_t i = 0; i < r->nheaders; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			return r->headers[i].value;
	return NULL;
}

int ecw_request_url(struct ecw_buf *out, const struct ecw_account *a, const struct ecw_request *r)
{
	int err;
	char sep = '?';

	if ((err = ecw_buf_adds(out, a->endpoint[r->svc])) < 0 ||
	    (err = ecw_buf_adds(out, ecw_buf_cstr(&r->path))) < 0)
		return err;
	for (size_t i = 0; i < r->nquery; i++) {
		if ((err = ecw_buf_addc(out, sep)) < 0 ||
		    (err = ecw_escape_pct(out, r->query[i].name, strlen(r->query[i].name))) < 0 ||
		    (err = ecw_buf_addc(out, '=')) < 0 ||
		    (err = ecw_escape_pct(out, r->query[i].value, strlen(r->query[i].value))) < 0)
			return err;
		sep = '&';
	}
	if (a->sas && ((err = ecw_buf_addc(out, sep)) < 0 || (err = ecw_buf_adds(out, a->sas)) < 0))
		return err;
	return 0;
}

/* PUT/POST/MERGE always carry a body, if only Content-Length: 0. */
bool ecw_request_has_body(const struct ecw_request *r)
{
	return r->body_len || strcmp(r->method, "PUT") == 0 || strcmp(r->method, "POST") == 0 ||
	       strcmp(r->method, "MERGE") == 0;
}
