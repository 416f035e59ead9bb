/* SPDX-License-Identifier: MIT */
/* table_server.h - an in-memory Table service behind the client's transport
 * seam, for unit tests that need answers to follow from what was written
 * rather than from a script: tables of entities answering get, insert,
 * insert-or-replace and insert-or-merge, update and merge with If-Match,
 * delete with If-Match, queries ($filter of comparisons joined by and, or,
 * not and parentheses; $select; $top with continuation headers) and $batch,
 * in the service's JSON and multipart formats, with an ETag that changes on
 * every write.
 *
 * With decodes_path_twice it reads an entity's URL path as the Azure Table
 * service has been reported to (Azure Storage team, 2012): percent-decoded
 * twice before the keys are parsed, so (PartitionKey='pct%2541'), the one
 * encoding of "pct%41", addresses "pctA", and '100%25' does not decode (400).
 * $filter values and the URLs inside a $batch body are decoded once.
 *
 * The server owns what it holds; an entity it hands out stays valid until
 * the next request or write to the server. Anything it does not understand
 * is answered 501 NotImplementedInFake, which fails the caller loudly. */
#ifndef ECW_TEST_TABLE_SERVER_H
#define ECW_TEST_TABLE_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "ecw_entity.h"
#include "ecw_storage.h"

struct ecw_response;
struct ecw_request;
struct table_server;

struct table_server *table_server_new(bool decodes_path_twice);
void table_server_free(struct table_server *s);
void table_server_create_table(struct table_server *s, const char *table);
/* Stores a copy of e under its keys (replacing any), with a new ETag. */
void table_server_put(struct table_server *s, const char *table, const struct ecw_entity *e);
/* NULL when absent. */
const struct ecw_entity *table_server_find(const struct table_server *s, const char *table, const char *pk,
                                           const char *rk);
size_t table_server_count(const struct table_server *s, const char *table);
/* Requests that named one entity by its keys in the URL path, and of those
 * the ones whose path held an encoded '%' (%25). */
size_t table_server_keyed_requests(const struct table_server *s);
size_t table_server_keyed_percent_requests(const struct table_server *s);
/* The $select of the latest query of table, "" when it had none. */
const char *table_server_last_select(const struct table_server *s, const char *table);
/* Query pages hold at most n entities from now on (0: the service's 1000),
 * so that tests meet continuations with few entities. A $filter of more
 * than 15 comparisons is always refused, as the service refuses it. */
void table_server_set_page_max(struct table_server *s, size_t n);
/* Requests answered 501: the fake met something it cannot do. */
size_t table_server_unsupported(const struct table_server *s);

/* The fixture of the unit tests that run jobs and audits against the fake:
 * a new server (*s) and a client (*c, of a development-storage account
 * *acct) whose every request it answers; the last error cleared. */
void table_server_connect(struct ecw_account **acct, struct ecw_client **c, struct table_server **s,
                          bool decodes_path_twice);
/* Asserts the server met nothing it cannot answer, then frees all three. */
void table_server_disconnect(struct ecw_account *acct, struct ecw_client *c, struct table_server *s);

/* The ecw_send_fn to give to ecw_client_set_transport with ctx = s. */
int table_server_send(void *ctx, struct ecw_response *resp, const char *url, const struct ecw_request *r);

#endif
