/* SPDX-License-Identifier: MIT */
/* table.c - the Table service operations and the query iterator. Bodies are
 * JSON with minimal metadata; ETags are echoed byte for byte. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "client.h"
#include "entity.h"
#include "escape.h"
#include "jsonparse.h"

static int table_request(struct ecw_request *r, const char *op, const char *method)
{
	int err;

	ecw_request_init(r, ECW_SVC_TABLE, method);
	r->op = op;
	/* Azurite answers 415 unless Accept is exactly one JSON flavour. */
	if ((err = ecw_request_set_header(r, "Accept", "application/json;odata=minimalmetadata")) < 0 ||
	    (err = ecw_request_set_header(r, "DataServiceVersion", "3.0;")) < 0 ||
	    (err = ecw_request_set_header(r, "MaxDataServiceVersion", "3.0;NetFx")) < 0)
		return err;
	return 0;
}

/* A request on one entity: checks the table name and keys before anything is sent. */
static int entity_request(struct ecw_request *r, const char *op, const char *method, const char *table,
			  const char *pk, const char *rk)
{
	int err;

	if ((err = table_request(r, op, method)) < 0 || (err = ecw_table_name_check(table)) < 0 ||
	    (err = ecw_entity_key_check(pk, "PartitionKey")) < 0 ||
	    (err = ecw_entity_key_check(rk, "RowKey")) < 0 ||
	    (err = ecw_escape_entity_path(&r->path, table, pk, rk)) < 0)
		return err;
	return 0;
}

static int send_simple(struct ecw_client *c, struct ecw_request *r, struct ecw_response *resp)
{
	int err = ecw_client_send(resp, c, r);

	ecw_request_dispose(r);
	return err;
}

int ecw_table_create(bool *created_out, struct ecw_client *c, const char *table)
{
	struct ecw_request r;
	struct ecw_response resp;
	char body[128];
	int err;

	ecw_response_init(&resp);
	if ((err = table_request(&r, "table.create", "POST")) < 0 ||
	    (err = ecw_table_name_check(table)) < 0 || (err = ecw_buf_adds(&r.path, "/Tables")) < 0 ||
	    (err = ecw_request_set_header(&r, "Prefer", "return-no-content")) < 0) {
		ecw_request_dispose(&r);
		goto done;
	}
	snprintf(body, sizeof(body), "{\"TableName\":\"%s\"}", table);
	r.content_type = "application/json";
	r.body = body;
	r.body_len = strlen(body);
	err = send_simple(c, &r, &resp);
	if (created_out)
		*created_out = err == 0;
	if (err == ECW_ECONFLICT && strcmp(ecw_error_last()->service_code, "TableAlreadyExists") == 0) {
		ecw_error_clear();
		err = 0;
	}
done:
	ecw_response_dispose(&resp);
	return err;
}

int ecw_table_delete_table(struct ecw_client *c, const char *table)
{
	struct ecw_request r;
	struct ecw_response resp;
	int err;

	ecw_response_init(&resp);
	if ((err = table_request(&r, "table.delete_table", "DELETE")) < 0 ||
	    (err = ecw_table_name_check(table)) < 0 ||
	    (err = ecw_buf_printf(&r.path, "/Tables('%s')", table)) < 0)
		ecw_request_dispose(&r);
	else
		err = send_simple(c, &r, &resp);
	ecw_response_dispose(&resp);
	return err;
}

void ecw_table_names_free(char **names)
{
	for (size_t i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
}

/* Appends the names of one page's "value" array to *v (count *n). */
static int add_table_names(char ***v, size_t *n, const struct ecw_response *resp)
{
	struct json_object *root = ecw_jsonparse_value(resp->body.ptr, resp->body.len), *value, *name;
	int err = 0;

	if (!root || !json_object_object_get_ex(root, "value", &value) ||
	    !json_object_is_type(value, json_type_array)) {
		err = ecw_error_set(ECW_ERROR, "table list: answer without a \"value\" array");
		goto done;
	}
	for (size_t i = 0; i < json_object_array_length(value) && err == 0; i++) {
		struct json_object *item = json_object_array_get_idx(value, i);
		char **grown;
		if (!json_object_object_get_ex(item, "TableName", &name) ||
		    !json_object_is_type(name, json_type_string)) {
			err = ecw_error_set(ECW_ERROR, "table list: an item without a TableName");
			break;
		}
		if (!(grown = realloc(*v, (*n + 2) * sizeof(**v))) ||
		    !(grown[*n] = strdup(json_object_get_string(name)))) {
			if (grown)
				*v = grown;
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
			break;
		}
		*v = grown;
		grown[++*n] = NULL;
	}
done:
	json_object_put(root);
	return err;
}

int ecw_table_list(char ***out, struct ecw_client *c, const char *prefix, int top)
{
	struct ecw_response resp;
	struct ecw_buf filter;
	char **names = calloc(1, sizeof(*names)), *next = NULL, topbuf[16];
	size_t n = 0, plen = prefix ? strlen(prefix) : 0;
	int err = 0;

	*out = NULL;
	ecw_buf_init(&filter, 0);
	ecw_response_init(&resp);
	if (!names)
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	if (top < 0 || top > 1000) {
		err = ecw_error_set(ECW_EINVALID, "table list: top must be 0..1000");
		goto done;
	}
	/* A table name holds letters and digits only, so the prefix needs no
	 * quoting, and its last character + 1 (at most 'z' + 1 = '{') bounds
	 * the range. */
	for (size_t i = 0; i < plen; i++)
		if (!((prefix[i] >= 'A' && prefix[i] <= 'Z') || (prefix[i] >= 'a' && prefix[i] <= 'z') ||
		      (prefix[i] >= '0' && prefix[i] <= '9'))) {
			err = ecw_error_set(ECW_EINVALID,
					    "table list: a prefix holds letters and digits only");
			goto done;
		}
	if (plen && (err = ecw_buf_printf(&filter, "TableName ge '%s' and TableName lt '%.*s%c'", prefix,
					  (int)(plen - 1), prefix, prefix[plen - 1] + 1)) < 0)
		goto done;
	do {
		struct ecw_request r;
		const char *cont;
		ecw_response_reset(&resp);
		if ((err = table_request(&r, "table.list", "GET")) < 0 ||
		    (err = ecw_buf_adds(&r.path, "/Tables")) < 0 ||
		    (plen && (err = ecw_request_add_query(&r, "$filter", ecw_buf_cstr(&filter))) < 0)) {
			ecw_request_dispose(&r);
			goto done;
		}
		if (top) {
			snprintf(topbuf, sizeof(topbuf), "%d", top);
			if ((err = ecw_request_add_query(&r, "$top", topbuf)) < 0) {
				ecw_request_dispose(&r);
				goto done;
			}
		}
		if (next && (err = ecw_request_add_query(&r, "NextTableName", next)) < 0) {
			ecw_request_dispose(&r);
			goto done;
		}
		if ((err = send_simple(c, &r, &resp)) < 0 || (err = add_table_names(&names, &n, &resp)) < 0)
			goto done;
		cont = ecw_response_header(&resp, "x-ms-continuation-NextTableName");
		free(next);
		next = NULL;
		if (cont && *cont && !(next = strdup(cont))) {
			err = ecw_error_set(ECW_ENOMEM, "out of memory");
			goto done;
		}
	} while (next);
done:
	free(next);
	ecw_buf_dispose(&filter);
	ecw_response_dispose(&resp);
	if (err < 0) {
		ecw_table_names_free(names);
		return err;
	}
	*out = names;
	return 0;
}

/* ---- keys holding '%' -------------------------------------------------------
 * The Table service has been reported (Azure Storage team, 2012) to
 * percent-decode the URL path of an entity twice: "pct%41", sent as
 * (PartitionKey='pct%2541'), is read as 'pctA', and "100%" (sent '100%25')
 * does not decode at all. A GET, PUT, MERGE or DELETE addressed by its keys
 * then fails or, worse, hits another entity: a move would read its source as
 * absent and its message be deleted. Inserts carry the keys in the body, and
 * $filter values are query parameters, decoded once. A $batch sub-request's
 * URL is no URL of the HTTP request at all: it is text inside the multipart
 * body, which the service's batch reader parses and decodes itself, once, as
 * Azurite does for every request; the reports name $batch among the calls
 * that work. So when either key holds '%', the entity calls below read
 * through a $filter query and write or delete through a one-operation $batch,
 * and answer as the direct request would (the same ecw_err, the entity with
 * its ETag, the new ETag). Keys without '%' keep the direct request: no
 * extra cost for them. Azurite decodes once, so the integration tests run
 * both routes against it, and tests/unit/test_percent_keys.c runs them
 * against a fake that decodes twice. */
static bool keys_hold_percent(const char *pk, const char *rk)
{
	return (pk && strchr(pk, '%')) || (rk && strchr(rk, '%'));
}

static int get_through_filter(struct ecw_entity **out, struct ecw_client *c, const char *table,
			      const char *pk, const char *rk);
static int write_through_batch(char **etag_out, struct ecw_client *c, const char *table,
			       const struct ecw_entity *e, enum ecw_batch_op op, const char *if_match);
static int delete_through_batch(struct ecw_client *c, const char *table, const char *pk, const char *rk,
				const char *if_match);

int ecw_table_get(struct ecw_entity **out, struct ecw_client *c, const char *table, const char *pk,
		  const char *rk)
{
	struct ecw_request r;
	struct ecw_response resp;
	const char *etag;
	int err;

	*out = NULL;
	if (keys_hold_percent(pk, rk))
		return get_through_filter(out, c, table, pk, rk);
	ecw_response_init(&resp);
	if ((err = entity_request(&r, "table.get", "GET", table, pk, rk)) < 0) {
		ecw_request_dispose(&r);
		goto done;
	}
	if ((err = send_simple(c, &r, &resp)) < 0)
		goto done;
	if ((err = ecw_entity_from_json(out, resp.body.ptr, resp.body.len)) < 0)
		goto done;
	/* The header and odata.etag agree; keep the header if the body had none. */
	if (!ecw_entity_etag(*out) && (etag = ecw_response_header(&resp, "ETag")) &&
	    (err = ecw_entity_set_etag(*out, etag)) < 0) {
		ecw_entity_free(*out);
		*out = NULL;
	}
done:
	ecw_response_dispose(&resp);
	return err;
}

int ecw_table_write(char **etag_out, struct ecw_client *c, const char *table, const struct ecw_entity *e,
		    enum ecw_write_mode mode, const char *if_match)
{
	static const char *const methods[] = {"POST", "PUT", "MERGE", "PUT", "MERGE"};
	static const char *const ops[] = {"table.insert", "table.upsert", "table.upsert_merge",
					  "table.update", "table.merge"};
	static const enum ecw_batch_op batch_ops[] = {ECW_BATCH_INSERT, ECW_BATCH_INSERT_OR_REPLACE,
						      ECW_BATCH_INSERT_OR_MERGE, ECW_BATCH_UPDATE,
						      ECW_BATCH_MERGE};
	bool conditional = mode == ECW_WRITE_UPDATE || mode == ECW_WRITE_MERGE;
	struct ecw_request r;
	struct ecw_response resp;
	struct ecw_buf body;
	const char *etag;
	int err;

	if (etag_out)
		*etag_out = NULL;
	/* An insert is a POST to the table, its keys in the body: no detour. */
	if ((unsigned)mode <= ECW_WRITE_MERGE && mode != ECW_WRITE_INSERT && e &&
	    keys_hold_percent(ecw_entity_pk(e), ecw_entity_rk(e)))
		return write_through_batch(etag_out, c, table, e, batch_ops[mode], if_match);
	ecw_response_init(&resp);
	ecw_buf_init(&body, 0);
	if ((unsigned)mode > ECW_WRITE_MERGE) {
		ecw_request_init(&r, ECW_SVC_TABLE, "PUT");
		err = ecw_error_set(ECW_EINVALID, "table: unknown write mode %d", (int)mode);
		goto done;
	}
	if (mode == ECW_WRITE_INSERT) {
		if ((err = table_request(&r, "table.insert", "POST")) < 0 ||
		    (err = ecw_table_name_check(table)) < 0 ||
		    (err = ecw_buf_printf(&r.path, "/%s", table)) < 0 ||
		    (err = ecw_request_set_header(&r, "Prefer", "return-no-content")) < 0)
			goto done;
	} else if ((err = entity_request(&r, ops[mode], methods[mode], table, ecw_entity_pk(e),
					 ecw_entity_rk(e))) < 0) {
		goto done;
	}
	if (conditional != (if_match != NULL) || (if_match && !*if_match)) {
		err = ecw_error_set(ECW_EINVALID,
				    conditional ? "table: update and merge need If-Match (an ETag or *)"
						: "table: If-Match only goes with update and merge");
		goto done;
	}
	if ((if_match && (err = ecw_request_set_header(&r, "If-Match", if_match)) < 0) ||
	    (err = ecw_entity_to_json(&body, e)) < 0)
		goto done;
	r.content_type = "application/json";
	r.body = body.ptr;
	r.body_len = body.len;
	if ((err = ecw_client_send(&resp, c, &r)) < 0)
		goto done;
	if (etag_out && (etag = ecw_response_header(&resp, "ETag")) && !(*etag_out = strdup(etag)))
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
done:
	ecw_request_dispose(&r);
	ecw_buf_dispose(&body);
	ecw_response_dispose(&resp);
	return err;
}

int ecw_table_delete(struct ecw_client *c, const char *table, const char *pk, const char *rk,
		     const char *if_match)
{
	struct ecw_request r;
	struct ecw_response resp;
	int err;

	if (keys_hold_percent(pk, rk))
		return delete_through_batch(c, table, pk, rk, if_match);
	ecw_response_init(&resp);
	if ((err = entity_request(&r, "table.delete", "DELETE", table, pk, rk)) < 0 ||
	    (!if_match || !*if_match
		     ? (err = ecw_error_set(ECW_EINVALID, "table: delete needs If-Match (an ETag or *)"))
		     : (err = ecw_request_set_header(&r, "If-Match", if_match))) < 0)
		ecw_request_dispose(&r);
	else
		err = send_simple(c, &r, &resp);
	ecw_response_dispose(&resp);
	return err;
}

int ecw_table_delete_if_exists(bool *deleted_out, struct ecw_client *c, const char *table, const char *pk,
			       const char *rk)
{
	int err = ecw_table_delete(c, table, pk, rk, "*");

	if (deleted_out)
		*deleted_out = err == 0;
	/* Only a missing entity counts as done: a missing table (ECW_ENOTABLE)
	 * is a mistake. */
	if (err == ECW_ENOTFOUND) {
		ecw_error_clear();
		err = 0;
	}
	return err;
}

/* ---- queries -------------------------------------------------------------- */

struct ecw_table_query {
	struct ecw_client *client;
	const char *op;      /* for on_attempt: "table.query", or "table.get" read through a filter */
	char request_id[64]; /* the last page's x-ms-request-id; "" if none */
	char *table, *filter, *select;
	int top;
	long long limit, returned;
	char *next_pk, *next_rk; /* continuation; NULL when none */
	bool started;
	struct ecw_entity **page; /* the current page's entities; handed out ones are NULL */
	size_t page_len, page_pos;
	int pages;
};

static void page_free(struct ecw_table_query *q)
{
	for (size_t i = 0; q->page && i < q->page_len; i++)
		ecw_entity_free(q->page[i]);
	free(q->page);
	q->page = NULL;
	q->page_len = q->page_pos = 0;
}

/* A page's entities, read from its body: each entity of the common form
 * ({"odata.metadata":..,"value":[..]}) by the entity reader, which reads a
 * flat entity without building a json-c tree (ecw_entity_from_json); any
 * other form through json-c as a whole. Either way every entity is read
 * before the page is taken, so a bad one fails the page. */
static int page_read(struct ecw_entity ***out, size_t *n, const char *body, size_t len)
{
	struct ecw_json_span *spans = NULL;
	struct json_object *root = NULL, *value = NULL;
	struct ecw_entity **v = NULL;
	int err = ecw_jsonparse_object_array(&spans, n, body, len, "value");

	*out = NULL;
	if (err < 0)
		return err;
	if (err == 1) {
		if (!(root = ecw_jsonparse_value(body, len)) ||
		    !json_object_object_get_ex(root, "value", &value) ||
		    !json_object_is_type(value, json_type_array)) {
			json_object_put(root);
			return ecw_error_set(ECW_ERROR, "table query: answer without a \"value\" array");
		}
		*n = json_object_array_length(value);
	}
	err = 0;
	if (*n && !(v = calloc(*n, sizeof(*v))))
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
	for (size_t i = 0; err == 0 && i < *n; i++)
		err = root ? ecw_entity_from_json_object(&v[i], json_object_array_get_idx(value, i))
			   : ecw_entity_from_json(&v[i], spans[i].ptr, spans[i].len);
	if (err < 0) {
		for (size_t i = 0; v && i < *n; i++)
			ecw_entity_free(v[i]);
		free(v);
		v = NULL;
		*n = 0;
	}
	json_object_put(root);
	free(spans);
	*out = v;
	return err;
}

void ecw_table_query_free(struct ecw_table_query *q)
{
	if (!q)
		return;
	free(q->table);
	free(q->filter);
	free(q->select);
	free(q->next_pk);
	free(q->next_rk);
	page_free(q);
	free(q);
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *d = s ? strdup(s) : NULL;

	if (s && !d)
		*oom = true;
	return d;
}

static bool listed(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
		while (*p == ' ')
			p++;
		if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == ' ' || p[n] == '\0'))
			return true;
	}
	return false;
}

/* An entity always carries its keys, and Azure leaves out whatever $select
 * does not name: add the system properties the caller did not list. */
static int select_with_keys(char **out, const char *select)
{
	static const char *const system[] = {"PartitionKey", "RowKey", "Timestamp"};
	struct ecw_buf b;
	int err;

	ecw_buf_init(&b, 0);
	err = ecw_buf_adds(&b, select);
	for (size_t i = 0; i < 3 && err == 0; i++)
		if (!listed(select, system[i]))
			err = ecw_buf_printf(&b, ",%s", system[i]);
	if (err < 0) {
		ecw_buf_dispose(&b);
		return err;
	}
	*out = ecw_buf_take(&b);
	return 0;
}

int ecw_table_query_new(struct ecw_table_query **out, struct ecw_client *c, const char *table,
			const struct ecw_query_options *opts)
{
	struct ecw_table_query *q;
	bool oom = false;
	int err;

	*out = NULL;
	if ((err = ecw_table_name_check(table)) < 0)
		return err;
	if (opts && (opts->top < 0 || opts->top > 1000 || opts->limit < 0))
		return ecw_error_set(ECW_EINVALID, "table query: top must be 0..1000 and limit >= 0");
	if (!(q = calloc(1, sizeof(*q))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	q->client = c;
	q->op = "table.query";
	q->table = dup_or_null(table, &oom);
	if (opts) {
		q->filter = dup_or_null(opts->filter && *opts->filter ? opts->filter : NULL, &oom);
		q->top = opts->top;
		q->limit = opts->limit;
		if (opts->select && *opts->select && (err = select_with_keys(&q->select, opts->select)) < 0) {
			ecw_table_query_free(q);
			return err;
		}
	}
	if (oom) {
		ecw_table_query_free(q);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	*out = q;
	return 0;
}

int ecw_table_query_pages(const struct ecw_table_query *q)
{
	return q->pages;
}

static int set_continuation(char **slot, const char *v)
{
	free(*slot);
	*slot = NULL;
	if (v && *v && !(*slot = strdup(v)))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	return 0;
}

/* The largest page a query asks for when none is set: the service's. */
#define PAGE_MAX 1000

static int fetch_page_once(struct ecw_table_query *q);

/* A page over the answer cap for table.query (ecw_response_cap: large
 * entities, up to 1 MiB each, a thousand to a page) is asked for again with
 * a tenth of the entities, down to one, from the same continuation: a page of
 * one entity always fits. The smaller $top stays for the rest of the query. */
static int fetch_page(struct ecw_table_query *q)
{
	int err;

	while ((err = fetch_page_once(q)) == ECW_ETOOLARGE) {
		int top = q->top ? q->top : PAGE_MAX;
		if (top <= 1)
			break;
		q->top = top / 10 > 1 ? top / 10 : 1;
	}
	return err;
}

static int fetch_page_once(struct ecw_table_query *q)
{
	struct ecw_request r;
	struct ecw_response resp;
	struct ecw_entity **page = NULL;
	size_t page_len = 0;
	const char *reqid;
	char top[16];
	int err;

	ecw_response_init(&resp);
	if ((err = table_request(&r, q->op, "GET")) < 0 ||
	    (err = ecw_buf_printf(&r.path, "/%s()", q->table)) < 0)
		goto done;
	if (q->filter && (err = ecw_request_add_query(&r, "$filter", q->filter)) < 0)
		goto done;
	if (q->select && (err = ecw_request_add_query(&r, "$select", q->select)) < 0)
		goto done;
	if (q->top) {
		snprintf(top, sizeof(top), "%d", q->top);
		if ((err = ecw_request_add_query(&r, "$top", top)) < 0)
			goto done;
	}
	/* NextRowKey can be absent; an empty one would be an error. */
	if (q->next_pk && (err = ecw_request_add_query(&r, "NextPartitionKey", q->next_pk)) < 0)
		goto done;
	if (q->next_rk && (err = ecw_request_add_query(&r, "NextRowKey", q->next_rk)) < 0)
		goto done;
	if ((err = ecw_client_send(&resp, q->client, &r)) < 0)
		goto done;
	if ((err = page_read(&page, &page_len, resp.body.ptr, resp.body.len)) < 0)
		goto done;
	reqid = ecw_response_header(&resp, "x-ms-request-id");
	snprintf(q->request_id, sizeof(q->request_id), "%s", reqid ? reqid : "");
	if ((err = set_continuation(&q->next_pk,
				    ecw_response_header(&resp, "x-ms-continuation-NextPartitionKey"))) < 0 ||
	    (err = set_continuation(&q->next_rk,
				    ecw_response_header(&resp, "x-ms-continuation-NextRowKey"))) < 0)
		goto done;
	page_free(q);
	q->page = page;
	q->page_len = page_len;
	page = NULL;
	page_len = 0;
	q->pages++;
	q->started = true;
done:
	for (size_t i = 0; i < page_len; i++)
		ecw_entity_free(page[i]);
	free(page);
	ecw_request_dispose(&r);
	ecw_response_dispose(&resp);
	return err;
}

int ecw_table_query_next(struct ecw_entity **out, struct ecw_table_query *q)
{
	int err;

	*out = NULL;
	if (q->limit && q->returned >= q->limit)
		return 0;
	while (q->page_pos >= q->page_len) {
		if (q->started && !q->next_pk)
			return 0;
		if ((err = fetch_page(q)) < 0)
			return err;
	}
	*out = q->page[q->page_pos];
	q->page[q->page_pos++] = NULL;
	q->returned++;
	return 0;
}

/* ---- the detours for keys holding '%' (see keys_hold_percent) -------------- */

static int check_entity_keys(const char *table, const char *pk, const char *rk)
{
	int err;

	if ((err = ecw_table_name_check(table)) < 0 || (err = ecw_entity_key_check(pk, "PartitionKey")) < 0 ||
	    (err = ecw_entity_key_check(rk, "RowKey")) < 0)
		return err;
	return 0;
}

/* A get as a query for exactly these keys: the entity in the page carries its
 * odata.etag as the get's body does; none is the get's 404, and a missing
 * table the query's own 404 TableNotFound (ECW_ENOTABLE). */
static int get_through_filter(struct ecw_entity **out, struct ecw_client *c, const char *table,
			      const char *pk, const char *rk)
{
	struct ecw_table_query *q = NULL;
	struct ecw_buf filter;
	int err;

	ecw_buf_init(&filter, 0);
	if ((err = check_entity_keys(table, pk, rk)) < 0 ||
	    (err = ecw_buf_adds(&filter, "PartitionKey eq ")) < 0 ||
	    (err = ecw_escape_filter_string(&filter, pk)) < 0 ||
	    (err = ecw_buf_adds(&filter, " and RowKey eq ")) < 0 ||
	    (err = ecw_escape_filter_string(&filter, rk)) < 0)
		goto done;
	const struct ecw_query_options opts = {.filter = ecw_buf_cstr(&filter), .top = 1, .limit = 1};
	if ((err = ecw_table_query_new(&q, c, table, &opts)) < 0)
		goto done;
	q->op = "table.get";
	/* The answer a get's 404 gives, with the query's request id. */
	if ((err = ecw_table_query_next(out, q)) == 0 && !*out)
		err = ecw_error_set_http(
			ECW_ENOTFOUND, 404, "ResourceNotFound", q->request_id[0] ? q->request_id : NULL,
			"GET %s: 404 ResourceNotFound: no entity (PartitionKey='%.80s',RowKey='%.80s'), "
			"read through $filter as its keys hold '%%'%s%s%s",
			table, pk, rk, q->request_id[0] ? " (request id " : "", q->request_id,
			q->request_id[0] ? ")" : "");
done:
	ecw_table_query_free(q);
	ecw_buf_dispose(&filter);
	return err;
}

/* One operation in one changeset: the batch reader already maps a failed
 * sub-response as the client maps an answer (412 ECW_EPRECONDITION, 404
 * ECW_ENOTFOUND or ECW_ENOTABLE, 409 ECW_ECONFLICT) and keeps the new ETag.
 * The batch borrows e: it lives until the batch is freed here. */
static int write_through_batch(char **etag_out, struct ecw_client *c, const char *table,
			       const struct ecw_entity *e, enum ecw_batch_op op, const char *if_match)
{
	struct ecw_batch *b = NULL;
	const char *etag;
	int err;

	if ((err = check_entity_keys(table, ecw_entity_pk(e), ecw_entity_rk(e))) < 0 ||
	    (err = ecw_batch_new(&b, table)) < 0 || (err = ecw_batch_add_borrowed(b, op, e, if_match)) < 0 ||
	    (err = ecw_batch_submit(c, b)) < 0)
		goto done;
	if (etag_out && (etag = ecw_batch_etag(b, 0)) && !(*etag_out = strdup(etag)))
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
done:
	ecw_batch_free(b);
	return err;
}

static int delete_through_batch(struct ecw_client *c, const char *table, const char *pk, const char *rk,
				const char *if_match)
{
	struct ecw_entity *keys = NULL;
	int err;

	if (!if_match || !*if_match)
		return ecw_error_set(ECW_EINVALID, "table: delete needs If-Match (an ETag or *)");
	if ((err = check_entity_keys(table, pk, rk)) < 0 || (err = ecw_entity_new(&keys, pk, rk)) < 0)
		return err;
	err = write_through_batch(NULL, c, table, keys, ECW_BATCH_DELETE, if_match);
	ecw_entity_free(keys);
	return err;
}
