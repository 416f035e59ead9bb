/* SPDX-License-Identifier: MIT */
/* table_server.c - the in-memory Table service of table_server.h. Small on
 * purpose: linear scans over a fixed array of entities, a $filter reader for
 * the comparisons jobs and the client write, one changeset per $batch. Caps:
 * TS_MAX_ENTITIES entities, TS_MAX_TABLES tables, 100 operations a batch. */
#define _GNU_SOURCE /* memmem */
#include "table_server.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TS_MAX_TABLES 16
#define TS_MAX_ENTITIES 512
#define TS_MAX_OPS 100

struct stored {
	char *table;
	struct ecw_entity *e; /* with its ETag set */
};

struct table_server {
	bool twice;
	char *tables[TS_MAX_TABLES];
	size_t ntables;
	struct stored rows[TS_MAX_ENTITIES];
	size_t nrows;
	unsigned long etag_seq;
	size_t keyed, keyed_pct, unsupported;
	size_t page_max;                      /* entities a query page holds at most; 0: the service's 1000 */
	char last_select[TS_MAX_TABLES][512]; /* per table, the latest query's $select ("": none) */
};

/* ---- the store --------------------------------------------------------------------------------------- */

struct table_server *table_server_new(bool decodes_path_twice)
{
	struct table_server *s = calloc(1, sizeof(*s));
	assert_non_null(s);
	s->twice = decodes_path_twice;
	return s;
}

void table_server_free(struct table_server *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->ntables; i++)
		free(s->tables[i]);
	for (size_t i = 0; i < s->nrows; i++) {
		free(s->rows[i].table);
		ecw_entity_free(s->rows[i].e);
	}
	free(s);
}

static bool has_table(const struct table_server *s, const char *table)
{
	for (size_t i = 0; i < s->ntables; i++)
		if (strcmp(s->tables[i], table) == 0)
			return true;
	return false;
}

void table_server_create_table(struct table_server *s, const char *table)
{
	if (has_table(s, table))
		return;
	assert_true(s->ntables < TS_MAX_TABLES);
	s->tables[s->ntables] = strdup(table);
	assert_non_null(s->tables[s->ntables]);
	s->ntables++;
}

static struct stored *find_row(const struct table_server *s, const char *table, const char *pk,
                               const char *rk)
{
	for (size_t i = 0; i < s->nrows; i++)
		if (strcmp(s->rows[i].table, table) == 0 && strcmp(ecw_entity_pk(s->rows[i].e), pk) == 0 &&
		    strcmp(ecw_entity_rk(s->rows[i].e), rk) == 0)
			return (struct stored *)&s->rows[i];
	return NULL;
}

const struct ecw_entity *table_server_find(const struct table_server *s, const char *table, const char *pk,
                                           const char *rk)
{
	const struct stored *row = find_row(s, table, pk, rk);
	return row ? row->e : NULL;
}

size_t table_server_count(const struct table_server *s, const char *table)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nrows; i++)
		n += strcmp(s->rows[i].table, table) == 0;
	return n;
}

size_t table_server_keyed_requests(const struct table_server *s)
{
	return s->keyed;
}

size_t table_server_keyed_percent_requests(const struct table_server *s)
{
	return s->keyed_pct;
}

void table_server_connect(struct ecw_account **acct, struct ecw_client **c, struct table_server **s,
                          bool decodes_path_twice)
{
	assert_int_equal(ecw_account_parse(acct, "UseDevelopmentStorage=true"), 0);
	assert_int_equal(ecw_client_new(c, *acct, NULL), 0);
	*s = table_server_new(decodes_path_twice);
	ecw_client_set_transport(*c, table_server_send, *s);
	ecw_error_clear();
}

void table_server_disconnect(struct ecw_account *acct, struct ecw_client *c, struct table_server *s)
{
	/* Whatever a test did, it met nothing the fake cannot answer. */
	assert_int_equal(table_server_unsupported(s), 0);
	ecw_client_free(c);
	ecw_account_free(acct);
	table_server_free(s);
}

const char *table_server_last_select(const struct table_server *s, const char *table)
{
	for (size_t t = 0; t < s->ntables; t++)
		if (strcmp(s->tables[t], table) == 0)
			return s->last_select[t];
	return "";
}

size_t table_server_unsupported(const struct table_server *s)
{
	return s->unsupported;
}

static void new_etag(struct table_server *s, char *out, size_t cap)
{
	snprintf(out, cap, "W/\"datetime'2026-08-19T10%%3A00%%3A00.%07luZ'\"", ++s->etag_seq);
}

/* Stores e (taken) under table, replacing the row with its keys. */
static void store(struct table_server *s, const char *table, struct ecw_entity *e, const char *etag)
{
	struct stored *row = find_row(s, table, ecw_entity_pk(e), ecw_entity_rk(e));

	assert_int_equal(ecw_entity_set_etag(e, etag), 0);
	if (row) {
		ecw_entity_free(row->e);
		row->e = e;
		return;
	}
	assert_true(s->nrows < TS_MAX_ENTITIES);
	s->rows[s->nrows].table = strdup(table);
	assert_non_null(s->rows[s->nrows].table);
	s->rows[s->nrows++].e = e;
}

static void remove_row(struct table_server *s, struct stored *row)
{
	free(row->table);
	ecw_entity_free(row->e);
	*row = s->rows[--s->nrows];
}

void table_server_put(struct table_server *s, const char *table, const struct ecw_entity *e)
{
	struct ecw_entity *copy;
	char etag[96];

	table_server_create_table(s, table);
	assert_int_equal(ecw_entity_clone(&copy, e), 0);
	new_etag(s, etag, sizeof(etag));
	store(s, table, copy, etag);
}

/* ---- answers -------------------------------------------------------------------------------------------- */

static void add_header(struct ecw_response *resp, const char *name, const char *value)
{
	assert_int_equal(ecw_response_add_header(resp, name, strlen(name), value, strlen(value)), 0);
}

static void answer_error(struct ecw_response *resp, int status, const char *code)
{
	char body[256];

	snprintf(body, sizeof(body),
	         "{\"odata.error\":{\"code\":\"%s\",\"message\":{\"lang\":\"en-US\",\"value\":\"%s\"}}}",
	         code, code);
	resp->status = status;
	add_header(resp, "Content-Type", "application/json");
	assert_int_equal(ecw_buf_adds(&resp->body, body), 0);
}

static void unsupported(struct table_server *s, struct ecw_response *resp, const char *what)
{
	s->unsupported++;
	print_message("table_server: cannot do %s\n", what);
	answer_error(resp, 501, "NotImplementedInFake");
}

/* e as the service writes it in a body, odata.etag first. */
static void entity_json(struct ecw_buf *out, const struct ecw_entity *e)
{
	struct ecw_buf body;

	ecw_buf_init(&body, 0);
	assert_int_equal(ecw_entity_to_json(&body, e), 0);
	assert_true(body.len >= 2 && body.ptr[0] == '{');
	assert_int_equal(ecw_buf_adds(out, "{\"odata.etag\":\""), 0);
	for (const char *p = ecw_entity_etag(e); *p; p++)
		assert_int_equal(*p == '"' ? ecw_buf_adds(out, "\\\"") : ecw_buf_addc(out, *p), 0);
	assert_int_equal(ecw_buf_adds(out, "\","), 0);
	assert_int_equal(ecw_buf_add(out, body.ptr + 1, body.len - 1), 0);
	ecw_buf_dispose(&body);
}

/* ---- decoding -------------------------------------------------------------------------------------------- */

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	                              : -1;
}

/* Percent-decodes s[0..n) into a new string; NULL on a broken escape. */
static char *pct_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1), *o = out;

	assert_non_null(out);
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			*o++ = s[i];
			continue;
		}
		if (i + 2 >= n || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0) {
			free(out);
			return NULL;
		}
		*o++ = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
		i += 2;
	}
	*o = '\0';
	return out;
}

/* An OData string literal at *p ('..' with '' for '): its value, and *p past it. */
static char *read_literal(const char **p)
{
	const char *s = *p;
	struct ecw_buf v;

	if (*s != '\'')
		return NULL;
	ecw_buf_init(&v, 0);
	for (s++;; s++) {
		if (!*s) {
			ecw_buf_dispose(&v);
			return NULL;
		}
		if (*s == '\'' && s[1] == '\'') {
			assert_int_equal(ecw_buf_addc(&v, '\''), 0);
			s++;
		} else if (*s == '\'') {
			break;
		} else {
			assert_int_equal(ecw_buf_addc(&v, *s), 0);
		}
	}
	*p = s + 1;
	assert_int_equal(ecw_buf_addc(&v, '\0'), 0);
	return ecw_buf_take(&v);
}

/* A decoded resource path after the account: "/T", "/T()", "/$batch",
 * "/T(PartitionKey='..',RowKey='..')". */
struct target {
	char table[64];
	bool query;    /* "/T()" */
	char *pk, *rk; /* an entity path */
};

static bool parse_target(struct target *t, const char *path)
{
	const char *p = path, *open;
	size_t n;

	memset(t, 0, sizeof(*t));
	if (*p++ != '/')
		return false;
	open = strchr(p, '(');
	n = open ? (size_t)(open - p) : strlen(p);
	if (n == 0 || n >= sizeof(t->table))
		return false;
	memcpy(t->table, p, n);
	if (!open)
		return true;
	if (strcmp(open, "()") == 0)
		return t->query = true;
	p = open + 1;
	if (strncmp(p, "PartitionKey=", 13) != 0)
		return false;
	p += 13;
	if (!(t->pk = read_literal(&p)) || strncmp(p, ",RowKey=", 8) != 0)
		return false;
	p += 8;
	if (!(t->rk = read_literal(&p)) || strcmp(p, ")") != 0)
		return false;
	return true;
}

static void target_dispose(struct target *t)
{
	free(t->pk);
	free(t->rk);
	t->pk = t->rk = NULL;
}

/* ---- one operation, shared by direct requests and batches ------------------------------------------------- */

struct op_result {
	int status;
	const char *code;
	char etag[96];
	const struct ecw_entity *entity; /* a GET's */
};

static bool etag_matches(const char *if_match, const struct ecw_entity *e)
{
	return strcmp(if_match, "*") == 0 || strcmp(if_match, ecw_entity_etag(e)) == 0;
}

/* Merges b's properties into a's copy. */
static struct ecw_entity *merged(const struct ecw_entity *old, const struct ecw_entity *patch)
{
	struct ecw_entity *m;

	assert_int_equal(ecw_entity_clone(&m, old), 0);
	for (size_t i = 0; i < ecw_entity_count(patch); i++)
		assert_int_equal(ecw_entity_set_prop(m, ecw_entity_at(patch, i)), 0);
	return m;
}

/* Runs method on t: checks only when apply is false (a batch checks every
 * operation before applying any), checks and applies when it is true. */
static void run_op(struct table_server *s, struct op_result *out, const char *method, const struct target *t,
                   const char *if_match, const char *body, size_t body_len, bool apply, const char *etag)
{
	struct ecw_entity *in = NULL;
	struct stored *row;

	memset(out, 0, sizeof(*out));
	if (!has_table(s, t->table)) {
		out->status = 404, out->code = "TableNotFound";
		return;
	}
	if (strcmp(method, "GET") == 0 && t->pk) {
		if (!(row = find_row(s, t->table, t->pk, t->rk))) {
			out->status = 404, out->code = "ResourceNotFound";
			return;
		}
		out->status = 200;
		out->entity = row->e;
		return;
	}
	if (strcmp(method, "DELETE") != 0 && ecw_entity_from_json(&in, body ? body : "", body_len) < 0) {
		out->status = 400, out->code = "InvalidInput";
		return;
	}
	if (t->pk && in)
		assert_int_equal(ecw_entity_set_keys(in, t->pk, t->rk), 0);
	row = in ? find_row(s, t->table, ecw_entity_pk(in), ecw_entity_rk(in))
	         : find_row(s, t->table, t->pk, t->rk);
	out->status = 204;
	if (strcmp(method, "POST") == 0 && row) {
		out->status = 409, out->code = "EntityAlreadyExists";
	} else if (if_match && !row) {
		out->status = 404, out->code = "ResourceNotFound";
	} else if (if_match && !etag_matches(if_match, row->e)) {
		out->status = 412, out->code = "UpdateConditionNotSatisfied";
	} else if (strcmp(method, "DELETE") == 0 && !if_match) {
		out->status = 412, out->code = "MissingIfMatch";
	}
	if (out->status != 204 || !apply) {
		ecw_entity_free(in);
		return;
	}
	if (strcmp(method, "DELETE") == 0) {
		remove_row(s, row);
		return;
	}
	snprintf(out->etag, sizeof(out->etag), "%s", etag);
	if (strcmp(method, "MERGE") == 0 && row) {
		struct ecw_entity *m = merged(row->e, in);
		ecw_entity_free(in);
		in = m;
	}
	store(s, t->table, in, etag);
}

/* ---- queries -------------------------------------------------------------------------------------------- */

/* A reader of $filter: or of ands of [not] comparisons or parenthesised
 * filters; a comparison is Name op literal ('string', a number, true, false,
 * datetime'..'). A property the entity lacks compares false. */
struct filter_reader {
	const char *p;
	const struct ecw_entity *e;
	bool bad;
	int comparisons;
};

static void skip_ws(struct filter_reader *f)
{
	while (*f->p == ' ')
		f->p++;
}

static bool word(struct filter_reader *f, const char *w)
{
	size_t n = strlen(w);

	skip_ws(f);
	if (strncmp(f->p, w, n) != 0 || (f->p[n] && f->p[n] != ' ' && f->p[n] != '(' && f->p[n] != '\''))
		return false;
	f->p += n;
	return true;
}

static bool read_or(struct filter_reader *f);

static int compare_prop(const struct ecw_prop *prop, const char *key, const char *lit, bool is_string,
                        bool is_bool, double num)
{
	if (key)
		return is_string ? strcmp(key, lit) : 2;
	if (!prop)
		return 2;
	switch (prop->type) {
	case ECW_EDM_STRING:
	case ECW_EDM_GUID:
	case ECW_EDM_DATETIME: return is_string ? strcmp(prop->v.s, lit) : 2;
	case ECW_EDM_BOOLEAN: return is_bool ? (prop->v.b == (num != 0) ? 0 : prop->v.b ? 1 : -1) : 2;
	case ECW_EDM_INT32: return !is_string && !is_bool ? (prop->v.i32 > num) - (prop->v.i32 < num) : 2;
	case ECW_EDM_INT64: return !is_string && !is_bool ? (prop->v.i64 > num) - (prop->v.i64 < num) : 2;
	case ECW_EDM_DOUBLE: return !is_string && !is_bool ? (prop->v.d > num) - (prop->v.d < num) : 2;
	default: return 2;
	}
}

static bool read_comparison(struct filter_reader *f)
{
	static const char *const ops[] = {"eq", "ne", "gt", "ge", "lt", "le"};
	char name[64], *lit = NULL;
	const char *key = NULL;
	size_t n = 0;
	int op = -1, c;
	bool is_string = false, is_bool = false, result;
	double num = 0;

	f->comparisons++;
	skip_ws(f);
	while ((f->p[n] >= 'A' && f->p[n] <= 'Z') || (f->p[n] >= 'a' && f->p[n] <= 'z') ||
	       (f->p[n] >= '0' && f->p[n] <= '9') || f->p[n] == '_')
		n++;
	if (n == 0 || n >= sizeof(name))
		return f->bad = true, false;
	memcpy(name, f->p, n);
	name[n] = '\0';
	f->p += n;
	for (int i = 0; i < 6 && op < 0; i++)
		if (word(f, ops[i]))
			op = i;
	if (op < 0)
		return f->bad = true, false;
	skip_ws(f);
	if (strncmp(f->p, "datetime'", 9) == 0)
		f->p += 8;
	if (*f->p == '\'') {
		if (!(lit = read_literal(&f->p)))
			return f->bad = true, false;
		is_string = true;
	} else if (word(f, "true") || word(f, "false")) {
		is_bool = true;
		num = f->p[-1] == 'e' && f->p[-2] == 'u';
	} else {
		char *end;
		num = strtod(f->p, &end);
		if (end == f->p)
			return f->bad = true, false;
		f->p = end + (*end == 'L');
	}
	if (strcmp(name, "PartitionKey") == 0)
		key = ecw_entity_pk(f->e);
	else if (strcmp(name, "RowKey") == 0)
		key = ecw_entity_rk(f->e);
	c = compare_prop(key ? NULL : ecw_entity_get(f->e, name), key, lit, is_string, is_bool, num);
	free(lit);
	if (c == 2)
		return op == 1; /* only ne holds between a missing property and a value */
	switch (op) {
	case 0: result = c == 0; break;
	case 1: result = c != 0; break;
	case 2: result = c > 0; break;
	case 3: result = c >= 0; break;
	case 4: result = c < 0; break;
	default: result = c <= 0; break;
	}
	return result;
}

static bool read_factor(struct filter_reader *f)
{
	bool v;

	if (word(f, "not"))
		return !read_factor(f);
	skip_ws(f);
	if (*f->p != '(')
		return read_comparison(f);
	f->p++;
	v = read_or(f);
	skip_ws(f);
	if (*f->p != ')')
		f->bad = true;
	else
		f->p++;
	return v;
}

static bool read_and(struct filter_reader *f)
{
	bool v = read_factor(f);

	while (!f->bad && word(f, "and"))
		v = read_factor(f) && v;
	return v;
}

static bool read_or(struct filter_reader *f)
{
	bool v = read_and(f);

	while (!f->bad && word(f, "or"))
		v = read_and(f) || v;
	return v;
}

/* 1 when e matches, 0 when not, -1 when the filter is beyond the reader. */
static int filter_matches(const char *filter, const struct ecw_entity *e, int *comparisons)
{
	struct filter_reader f = {.p = filter, .e = e};
	bool v = read_or(&f);

	skip_ws(&f);
	if (comparisons)
		*comparisons = f.comparisons;
	return f.bad || *f.p ? -1 : v;
}

/* The service refuses a $filter of more than 15 comparisons (InvalidInput). */
static bool too_many_comparisons(const char *filter)
{
	struct ecw_entity *probe = NULL;
	int n = 0;

	assert_int_equal(ecw_entity_new(&probe, "probe", "probe"), 0);
	(void)filter_matches(filter, probe, &n);
	ecw_entity_free(probe);
	return n > 15;
}

void table_server_set_page_max(struct table_server *s, size_t n)
{
	s->page_max = n;
}

/* The query parameter name's decoded value, or NULL. */
static char *query_param(const char *url, const char *name)
{
	const char *p = strchr(url, '?');
	size_t n = strlen(name);

	for (p = p ? p + 1 : NULL; p && *p;) {
		size_t len = strcspn(p, "&");
		char *pair = pct_decode(p, len);
		if (pair && strncmp(pair, name, n) == 0 && pair[n] == '=') {
			char *v = strdup(pair + n + 1);
			free(pair);
			assert_non_null(v);
			return v;
		}
		free(pair);
		p += len;
		if (*p == '&')
			p++;
	}
	return NULL;
}

static int by_keys(const void *a, const void *b)
{
	const struct ecw_entity *x = *(const struct ecw_entity *const *)a,
	                        *y = *(const struct ecw_entity *const *)b;
	int c = strcmp(ecw_entity_pk(x), ecw_entity_pk(y));
	return c ? c : strcmp(ecw_entity_rk(x), ecw_entity_rk(y));
}

/* e with only the properties $select names. */
static struct ecw_entity *selected(const struct ecw_entity *e, const char *select)
{
	struct ecw_entity *out;

	assert_int_equal(ecw_entity_clone(&out, e), 0);
	if (!select)
		return out;
	for (size_t i = ecw_entity_count(e); i-- > 0;) {
		const char *name = ecw_entity_at(e, i)->name;
		size_t n = strlen(name);
		bool listed = false;
		for (const char *p = select; p && !listed; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
			listed = strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0');
		if (!listed)
			ecw_entity_remove(out, name);
	}
	return out;
}

static void answer_query(struct table_server *s, struct ecw_response *resp, const char *table,
                         const char *url)
{
	const struct ecw_entity *hits[TS_MAX_ENTITIES];
	char *filter = query_param(url, "$filter"), *select = query_param(url, "$select"),
	     *top = query_param(url, "$top"), *npk = query_param(url, "NextPartitionKey"),
	     *nrk = query_param(url, "NextRowKey");
	size_t n = 0, limit = top ? (size_t)strtoul(top, NULL, 10) : 1000, sent = 0, i = 0;

	for (size_t t = 0; t < s->ntables; t++)
		if (strcmp(s->tables[t], table) == 0)
			snprintf(s->last_select[t], sizeof(s->last_select[t]), "%s", select ? select : "");
	if (!has_table(s, table)) {
		answer_error(resp, 404, "TableNotFound");
		goto done;
	}
	if (filter && too_many_comparisons(filter)) {
		answer_error(resp, 400, "InvalidInput");
		goto done;
	}
	if (s->page_max && limit > s->page_max)
		limit = s->page_max;
	for (size_t r = 0; r < s->nrows; r++) {
		int m;
		if (strcmp(s->rows[r].table, table) != 0)
			continue;
		if (filter && (m = filter_matches(filter, s->rows[r].e, NULL)) < 0) {
			unsupported(s, resp, filter);
			goto done;
		}
		if (!filter || m)
			hits[n++] = s->rows[r].e;
	}
	qsort(hits, n, sizeof(*hits), by_keys);
	/* The continuation names the first entity of the next page. */
	while (npk && i < n &&
	       (strcmp(ecw_entity_pk(hits[i]), npk) < 0 ||
	        (strcmp(ecw_entity_pk(hits[i]), npk) == 0 && nrk && strcmp(ecw_entity_rk(hits[i]), nrk) < 0)))
		i++;
	resp->status = 200;
	add_header(resp, "Content-Type", "application/json;odata=minimalmetadata");
	assert_int_equal(ecw_buf_adds(&resp->body, "{\"value\":["), 0);
	for (; i < n && sent < limit; i++, sent++) {
		struct ecw_entity *e = selected(hits[i], select);
		if (sent)
			assert_int_equal(ecw_buf_addc(&resp->body, ','), 0);
		entity_json(&resp->body, e);
		ecw_entity_free(e);
	}
	assert_int_equal(ecw_buf_adds(&resp->body, "]}"), 0);
	if (i < n) {
		add_header(resp, "x-ms-continuation-NextPartitionKey", ecw_entity_pk(hits[i]));
		add_header(resp, "x-ms-continuation-NextRowKey", ecw_entity_rk(hits[i]));
	}
done:
	free(filter);
	free(select);
	free(top);
	free(npk);
	free(nrk);
}

/* ---- $batch ---------------------------------------------------------------------------------------------- */

struct batch_op {
	char method[16];
	struct target t;
	char if_match[128];
	const char *body;
	size_t body_len;
};

/* The path of an absolute URL after the account segment, decoded once. */
static char *resource_of(const char *url, size_t n)
{
	const char *p = memmem(url, n, "://", 3), *end = url + n;
	p = p ? p + 3 : url;
	p = memchr(p, '/', (size_t)(end - p)); /* the account */
	p = p ? memchr(p + 1, '/', (size_t)(end - p - 1)) : NULL;
	return p ? pct_decode(p, (size_t)(end - p)) : NULL;
}

static const char *line_end(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	return nl ? nl + 1 : end;
}

/* Reads one changeset part (from after its boundary line to the next one). */
static bool read_batch_op(struct batch_op *op, const char *p, const char *end)
{
	const char *l, *sp1, *sp2;
	char *res;

	memset(op, 0, sizeof(*op));
	while (p < end && !(p[0] == '\r' && p[1] == '\n')) /* the part's headers */
		p = line_end(p, end);
	p += 2;
	l = p;
	p = line_end(p, end);
	if (!(sp1 = memchr(l, ' ', (size_t)(p - l))) ||
	    !(sp2 = memchr(sp1 + 1, ' ', (size_t)(p - sp1 - 1))) || (size_t)(sp1 - l) >= sizeof(op->method))
		return false;
	memcpy(op->method, l, (size_t)(sp1 - l));
	if (!(res = resource_of(sp1 + 1, (size_t)(sp2 - sp1 - 1))))
		return false;
	bool ok = parse_target(&op->t, res);
	free(res);
	if (!ok)
		return false;
	while (p < end && !(p[0] == '\r' && p[1] == '\n')) {
		l = p;
		p = line_end(p, end);
		if (strncasecmp(l, "If-Match: ", 10) == 0)
			snprintf(op->if_match, sizeof(op->if_match), "%.*s", (int)(p - l - 12), l + 10);
	}
	p += 2;
	op->body = p;
	op->body_len = (size_t)(end - p);
	while (op->body_len && (op->body[op->body_len - 1] == '\n' || op->body[op->body_len - 1] == '\r'))
		op->body_len--;
	return true;
}

static void answer_batch(struct table_server *s, struct ecw_response *resp, const char *body, size_t len)
{
	struct batch_op ops[TS_MAX_OPS];
	struct op_result res;
	const char *end = body + len, *cs = memmem(body, len, "boundary=changeset_", 19), *p;
	char boundary[80], etag[96];
	size_t nops = 0, blen;
	struct ecw_buf *out = &resp->body;

	if (!cs) {
		unsupported(s, resp, "a batch without a changeset");
		return;
	}
	cs += 9;
	blen = strcspn(cs, "\r\n");
	snprintf(boundary, sizeof(boundary), "--%.*s", (int)blen, cs);
	blen = strlen(boundary);
	/* Parts start after a "--changeset_x" line; the last one ends at "--changeset_x--". */
	for (p = body; (p = memmem(p, (size_t)(end - p), boundary, blen)) != NULL;) {
		const char *start = line_end(p, end),
		           *next = memmem(start, (size_t)(end - start), boundary, blen);
		if (p[blen] == '-' || !next)
			break;
		if (p > body && p[-1] != '\n') {
			p += blen;
			continue;
		}
		assert_true(nops < TS_MAX_OPS);
		if (!read_batch_op(&ops[nops], start, next - 2)) {
			unsupported(s, resp, "a batch operation");
			goto done;
		}
		nops++;
		p = next;
	}
	new_etag(s, etag, sizeof(etag));
	resp->status = 202;
	add_header(resp, "Content-Type", "multipart/mixed; boundary=batchresponse_fake");
	assert_int_equal(ecw_buf_adds(out, "--batchresponse_fake\r\nContent-Type: multipart/mixed; "
	                                   "boundary=changesetresponse_fake\r\n\r\n"),
	                 0);
	for (size_t i = 0; i < nops; i++) {
		run_op(s, &res, ops[i].method, &ops[i].t, ops[i].if_match[0] ? ops[i].if_match : NULL,
		       ops[i].body, ops[i].body_len, false, etag);
		if (res.status / 100 == 2)
			continue;
		/* As Azure: only the failed operation's part, and no "i:" prefix
		 * in a one-operation changeset. */
		char part[512], index[24] = "";
		if (nops > 1)
			snprintf(index, sizeof(index), "%zu:", i);
		snprintf(
		    part, sizeof(part),
		    "--changesetresponse_fake\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: "
		    "binary\r\n\r\nHTTP/1.1 %d Failed\r\nContent-Type: application/json\r\n\r\n"
		    "{\"odata.error\":{\"code\":\"%s\",\"message\":{\"lang\":\"en-US\",\"value\":\"%s%s\"}}}\r\n",
		    res.status, res.code, index, res.code);
		assert_int_equal(ecw_buf_adds(out, part), 0);
		goto close;
	}
	for (size_t i = 0; i < nops; i++) {
		char part[512];
		run_op(s, &res, ops[i].method, &ops[i].t, ops[i].if_match[0] ? ops[i].if_match : NULL,
		       ops[i].body, ops[i].body_len, true, etag);
		assert_int_equal(res.status, 204);
		snprintf(
		    part, sizeof(part),
		    "--changesetresponse_fake\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: "
		    "binary\r\n\r\nHTTP/1.1 204 No Content\r\n%s%s%s\r\n\r\n",
		    res.etag[0] ? "ETag: " : "", res.etag, res.etag[0] ? "\r\n" : "");
		assert_int_equal(ecw_buf_adds(out, part), 0);
	}
close:
	assert_int_equal(ecw_buf_adds(out, "--changesetresponse_fake--\r\n--batchresponse_fake--\r\n"), 0);
done:
	for (size_t i = 0; i < nops; i++)
		target_dispose(&ops[i].t);
}

/* ---- the transport ----------------------------------------------------------------------------------------- */

int table_server_send(void *ctx, struct ecw_response *resp, const char *url, const struct ecw_request *r)
{
	struct table_server *s = ctx;
	const char *p = strstr(url, "://"), *if_match = ecw_request_header(r, "If-Match");
	char *once = NULL, *path = NULL, etag[96];
	struct target t;
	struct op_result res;
	size_t n;

	memset(&t, 0, sizeof(t));
	/* "/devstoreaccount1/rest": the resource is what follows the account. */
	p = p ? p + 3 : url;
	p = strchr(p, '/');
	p = p ? strchr(p + 1, '/') : NULL;
	if (!p) {
		unsupported(s, resp, url);
		return 0;
	}
	n = strcspn(p, "?");
	if (!(once = pct_decode(p, n)) || (s->twice && !(path = pct_decode(once, strlen(once))))) {
		answer_error(resp, 400, "InvalidUri");
		goto done;
	}
	if (!s->twice)
		path = strdup(once);
	assert_non_null(path);
	if (strcmp(path, "/$batch") == 0 && strcmp(r->method, "POST") == 0) {
		answer_batch(s, resp, r->body, r->body_len);
		goto done;
	}
	if (strcmp(path, "/Tables") == 0 || !parse_target(&t, path)) {
		unsupported(s, resp, path);
		goto done;
	}
	if (t.query) {
		answer_query(s, resp, t.table, url);
		goto done;
	}
	if (t.pk) {
		s->keyed++;
		if (memmem(p, n, "%25", 3))
			s->keyed_pct++;
	}
	if (!t.pk && strcmp(r->method, "POST") != 0) {
		unsupported(s, resp, path);
		goto done;
	}
	new_etag(s, etag, sizeof(etag));
	run_op(s, &res, r->method, &t, if_match, r->body, r->body_len, true, etag);
	if (res.code) {
		answer_error(resp, res.status, res.code);
		goto done;
	}
	resp->status = res.status;
	if (res.entity) {
		add_header(resp, "ETag", ecw_entity_etag(res.entity));
		add_header(resp, "Content-Type", "application/json;odata=minimalmetadata");
		entity_json(&resp->body, res.entity);
	} else if (res.etag[0]) {
		add_header(resp, "ETag", res.etag);
	}
done:
	target_dispose(&t);
	free(once);
	free(path);
	return 0;
}
