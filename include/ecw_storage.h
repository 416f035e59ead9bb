/* SPDX-License-Identifier: MIT */
/* ecw_storage.h - the Azure Storage Queue, Table and Blob REST client.
 * An ecw_account is a parsed connection string, or endpoints plus an Entra ID
 * token credential (ecw_token.h), set up once and then shared between threads. An ecw_client is one connection's worth of state (a libcurl handle
 * kept alive between requests, the retry policy): use one per thread. Every
 * call returns 0 or a negative ecw_err and leaves the details in
 * ecw_error_last(). Transient failures are retried inside the client with
 * capped exponential backoff and full jitter; the caller sees the final answer.
 * Nothing here knows about jobs. */
#ifndef ECW_STORAGE_H
#define ECW_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "ecw_buf.h"
#include "ecw_cancel.h"
#include "ecw_entity.h"
#include "ecw_err.h"
#include "ecw_token.h"

/* ---- accounts and connection strings ------------------------------------ */

struct ecw_account;

enum ecw_service { ECW_SVC_QUEUE, ECW_SVC_TABLE, ECW_SVC_BLOB };

/* Parses a connection string as the Azure SDKs do. On error the message names
 * the bad part but never echoes a key or signature. */
int ecw_account_parse(struct ecw_account **out, const char *connstr) ECW_MUST_USE;
/* For token authentication: a connection string naming only where the
 * account is (QueueEndpoint / TableEndpoint / BlobEndpoint, or AccountName with the optional
 * DefaultEndpointsProtocol and EndpointSuffix). AccountKey,
 * SharedAccessSignature and UseDevelopmentStorage are errors. The account
 * signs nothing until it takes a credential. */
int ecw_account_parse_endpoints(struct ecw_account **out, const char *connstr) ECW_MUST_USE;
/* Requests of this account carry `Authorization: Bearer` with cred's tokens.
 * The account owns cred from now on (and frees it with itself). Call before
 * any client uses the account. */
void ecw_account_take_credential(struct ecw_account *a, struct ecw_token_credential *cred);
void ecw_account_free(struct ecw_account *a);

/* Rotation of a key or SAS without a restart. The secret of an account made
 * by ecw_account_parse may be replaced while clients use it: each request is
 * signed with the secret in place when it is sent.
 *
 * Replaces the account's key and SAS with those of connstr, which must name
 * the same account and endpoints (ECW_EINVALID otherwise, the account
 * unchanged; the message never quotes a secret). Returns 1 when the secret
 * changed (clients sign with the new one from their next request on), 0
 * when connstr holds the secret already in place. The old secret's memory
 * is wiped. Thread-safe. */
int ecw_account_update_secret(struct ecw_account *a, const char *connstr) ECW_MUST_USE;
/* Asked, by a client whose request the service refused (401 or 403) with
 * the secret in place, to look for a newer one: it returns 1 when it put one
 * in place (ecw_account_update_secret; the client then sends the request
 * again, once), 0 when there is none. a is the account it was set on. */
typedef int (*ecw_account_reload_fn)(struct ecw_account *a, void *payload);
/* Sets the account's reload (where a secret comes from a file that may be
 * rewritten): it is asked by one client at a time, at most once per
 * interval_ms (a refusal meanwhile is final), and only when no newer secret
 * came since the refused request was signed. The account owns payload and
 * frees it with payload_free (may be NULL). Call before any client uses the
 * account; not for an account with a token credential. */
void ecw_account_set_reload(struct ecw_account *a, ecw_account_reload_fn reload, void *payload,
			    void (*payload_free)(void *payload), int64_t interval_ms);
/* "" when the string carried only a SAS and endpoints. */
const char *ecw_account_name(const struct ecw_account *a);
/* Endpoint without a trailing slash, e.g. "http://127.0.0.1:10001/devstoreaccount1".
 * The queue and table endpoints are always there. The blob endpoint is
 * BlobEndpoint, or derived from AccountName ({protocol}://{account}.blob.
 * {suffix}), or Azurite's for UseDevelopmentStorage=true; NULL when the
 * string names none (endpoints and a SAS without AccountName), or when the
 * derived one would be plain http off loopback (an explicit BlobEndpoint
 * like that is an error, as for the others). Blob calls then fail with
 * ECW_EINVALID before any request. */
const char *ecw_account_endpoint(const struct ecw_account *a, enum ecw_service svc);
bool ecw_account_uses_sas(const struct ecw_account *a);
/* Whether the account's credential could create a queue or a table of svc:
 * a SAS must be an account SAS (ss) naming the service, the container
 * resource type (srt c) and the write or create permission (sp w or c); a
 * service SAS never can. true for a key, and for an Entra ID token, whose
 * role the service only tells when asked to act. */
bool ecw_account_may_create(const struct ecw_account *a, enum ecw_service svc);
/* How requests are authorized: "shared-key", "sas", "workload-identity",
 * "managed-identity", or "none". For logs. */
const char *ecw_account_auth_name(const struct ecw_account *a);

/* ---- clients ------------------------------------------------------------- */

struct ecw_client;

struct ecw_client_options {
	int max_tries;          /* attempts per call including the first; default 4 */
	int retry_base_ms;      /* backoff base; default 200 */
	int retry_max_ms;       /* backoff cap; default 5000 */
	int timeout_ms;         /* whole request; default 30000 */
	int connect_timeout_ms; /* default 5000 */
	/* Tests only: accept any TLS certificate. Never set from configuration. */
	bool insecure_skip_tls_verify_for_tests;
	/* Called after every HTTP attempt (may be NULL): op names the operation
	 * ("queue.receive", "table.get", ...; "token.get" for a request to a
	 * token endpoint), status is the HTTP status or 0 when no answer came,
	 * attempt counts from 1. For metrics. */
	void (*on_attempt)(void *payload, const char *op, int status, int attempt);
	void *on_attempt_payload;
	/* A PEM bundle of CA certificates to trust for https (libcurl's CAINFO,
	 * for storage and token endpoints alike); NULL: the system's. Must
	 * outlive the client. Verification stays on either way. */
	const char *ca_file;
	/* Ends every wait of a call (connect, send, receive, retry sleep) at
	 * once when set: the call fails with ECW_ECANCELED. NULL: none. Must
	 * outlive the client. */
	const struct ecw_cancel *cancel;
	/* Never send requests pipelined (storage.pipelining: false): a group's
	 * message deletes then go one round trip each. */
	bool no_pipelining;
};

/* Whether pipelining stopped for the whole process: a server took
 * pipelined requests and left one after the first unanswered until the
 * timeout (a server, or something on the way, that does not keep to RFC
 * 9112's pipelining). From then on every request goes alone. */
bool ecw_client_pipelining_stopped(void);

/* clang-format 14 and 19 lay a braced macro out differently: */
/* clang-format off */
#define ECW_CLIENT_OPTIONS_INIT {4, 200, 5000, 30000, 5000, false, NULL, NULL, NULL, NULL, false}
/* clang-format on */

/* opts may be NULL for the defaults. The account must outlive the client. */
int ecw_client_new(struct ecw_client **out, const struct ecw_account *acct,
		   const struct ecw_client_options *opts) ECW_MUST_USE;
void ecw_client_free(struct ecw_client *c);

/* Counters for tests and metrics. */
struct ecw_client_stats {
	uint64_t requests; /* HTTP attempts, retries included */
	uint64_t retries;
	uint64_t connections; /* new TCP connections opened */
};
void ecw_client_stats(struct ecw_client_stats *out, const struct ecw_client *c);
/* The endpoint of svc of the account c uses (ecw_account_endpoint): what a
 * blob's URL starts with, for a job that reads blob URLs. */
const char *ecw_client_endpoint(const struct ecw_client *c, enum ecw_service svc);

/* ---- queues -------------------------------------------------------------- */

/* Service limit on a message's text, in bytes. */
#define ECW_QUEUE_MAX_TEXT 65536
#define ECW_QUEUE_MAX_BATCH 32

struct ecw_queue_msg {
	char id[64];
	char pop_receipt[128]; /* "" for peeked messages */
	long dequeue_count;
	time_t insertion_time;
	time_t expiration_time; /* 0 when the message never expires */
	time_t next_visible;    /* 0 for peeked messages */
	char *text;             /* NUL-terminated, unescaped; never NULL from
				     * receive and peek */
	size_t text_len;
};

struct ecw_queue_put_options {
	int visibility_delay_s; /* 0..604800: hidden this long after put */
	long long ttl_s;        /* 0 = service default (7 days), -1 = never expires */
};

/* 0, or ECW_EINVALID with a message naming the name and the rule: 3-63
 * lowercase letters, digits and single dashes, starting and ending with a
 * letter or digit. The queue calls check it before any request. */
int ecw_queue_name_check(const char *name) ECW_MUST_USE;
/* Creates the queue; an existing queue is success. created_out may be NULL. */
int ecw_queue_create(bool *created_out, struct ecw_client *c, const char *queue) ECW_MUST_USE;
int ecw_queue_delete_queue(struct ecw_client *c, const char *queue) ECW_MUST_USE;
/* out (may be NULL) receives id, pop receipt, times; its text stays NULL. */
int ecw_queue_put(struct ecw_queue_msg *out, struct ecw_client *c, const char *queue, const char *text,
		  size_t len, const struct ecw_queue_put_options *opts) ECW_MUST_USE;
/* Receives up to max (1..32) messages and hides them for visibility_s seconds.
 * *out is an array of *count messages, freed with ecw_queue_msgs_free. */
int ecw_queue_receive(struct ecw_queue_msg **out, size_t *count, struct ecw_client *c, const char *queue,
		      int max, int visibility_s) ECW_MUST_USE;
int ecw_queue_peek(struct ecw_queue_msg **out, size_t *count, struct ecw_client *c, const char *queue,
		   int max) ECW_MUST_USE;
void ecw_queue_msgs_free(struct ecw_queue_msg *msgs, size_t count);
/* ECW_ENOTFOUND: the message is gone or was received again (stale receipt). */
int ecw_queue_delete(struct ecw_client *c, const char *queue, const char *id,
		     const char *pop_receipt) ECW_MUST_USE;
/* One message of ecw_queue_delete_many, and then its result: err as
 * ecw_queue_delete would return it. */
struct ecw_queue_delete_item {
	const char *queue, *id, *pop_receipt;
	int err;
};
/* Told of item i once its err is in, with the last error set for it when
 * it failed. */
typedef void (*ecw_queue_deleted_fn)(void *payload, size_t i);
/* Deletes each item's message as ecw_queue_delete would, the requests
 * pipelined on one connection (a round trip for them all rather than one
 * each; a delete is idempotent, so one left unanswered is sent again), and
 * calls deleted for each once its result is in: first any whose request
 * could not be made (a bad name, id or receipt), then the rest in order. */
void ecw_queue_delete_many(struct ecw_client *c, struct ecw_queue_delete_item *items, size_t n,
			   ecw_queue_deleted_fn deleted, void *payload);
/* Hides the message for visibility_s more seconds and, when text is not NULL,
 * replaces its text. The new pop receipt replaces msg->pop_receipt and the new
 * next-visible time msg->next_visible. ECW_ENOTFOUND as for delete. */
int ecw_queue_update(struct ecw_queue_msg *msg, struct ecw_client *c, const char *queue, int visibility_s,
		     const char *text, size_t len) ECW_MUST_USE;
/* For an ECW_ENOTFOUND from delete or update (e: ecw_error_last()): true when
 * the service said that the message is still there under a newer pop receipt
 * (received again since: Azurite's 400 PopReceiptMismatch), false when it said
 * that it is gone. Azure has been seen to answer a stale receipt as "gone"
 * too, so false does not prove the message gone. */
bool ecw_queue_err_received_again(const struct ecw_error *e);
int ecw_queue_clear(struct ecw_client *c, const char *queue) ECW_MUST_USE;
/* Approximate: includes invisible messages. */
int ecw_queue_count(long long *out, struct ecw_client *c, const char *queue) ECW_MUST_USE;

/* A queue's metadata (Get Queue Metadata): the approximate number of
 * messages, visible or not, and its name-value pairs (x-ms-meta-NAME).
 * Fixed arrays, no pointers: a caller-owned value. Only what fits is kept;
 * `partial` says something did not (more than ECW_QUEUE_META_MAX pairs, a
 * longer name or value, or more headers than the transport keeps), and then
 * the pairs may not be written back (ecw_queue_meta_set refuses): Set Queue
 * Metadata replaces them all, and would lose what was not kept. */
#define ECW_QUEUE_META_MAX 16
#define ECW_QUEUE_META_NAME_MAX 63
#define ECW_QUEUE_META_VALUE_MAX 1023
struct ecw_queue_meta {
	long long approximate_messages;
	size_t n;
	bool partial;
	struct {
		char name[ECW_QUEUE_META_NAME_MAX + 1];   /* as the service gave it */
		char value[ECW_QUEUE_META_VALUE_MAX + 1]; /* printable ASCII */
	} pairs[ECW_QUEUE_META_MAX];
};
int ecw_queue_meta_get(struct ecw_queue_meta *out, struct ecw_client *c, const char *queue) ECW_MUST_USE;
/* Replaces the queue's metadata with m's pairs. ECW_EINVALID when m is
 * partial, or a name is not a C identifier or a value not printable ASCII
 * (checked before any request). */
int ecw_queue_meta_set(struct ecw_client *c, const char *queue, const struct ecw_queue_meta *m) ECW_MUST_USE;
/* The value named name (case-insensitive, as metadata names are), or NULL. */
const char *ecw_queue_meta_value(const struct ecw_queue_meta *m, const char *name);
/* Sets name to value, replacing any; value NULL removes it. ECW_ETOOLARGE
 * when m is full or the value too long. */
int ecw_queue_meta_put(struct ecw_queue_meta *m, const char *name, const char *value) ECW_MUST_USE;

/* ---- tables -------------------------------------------------------------- */

/* A call on a table that does not exist returns ECW_ENOTABLE, one on an
 * entity that does not exist ECW_ENOTFOUND: gets, writes, deletes, queries
 * and batches alike. Deleting a missing table is ECW_ENOTFOUND: the service
 * (and Azurite) answer it with a plain 404 ResourceNotFound. */

/* The service's rule for a table name, the one copy of it: the client checks
 * it before any request, and the configuration's readers check it too. */
#define ECW_TABLE_NAME_RULE "a letter, then 2-62 letters or digits, not the reserved name 'tables'"
bool ecw_table_name_valid(const char *name);
/* 0, or ECW_EINVALID with the message "invalid table name 'NAME': a table
 * name is " ECW_TABLE_NAME_RULE. Where the name may hold an expanded ${VAR}
 * (the configuration), report ecw_table_name_valid's answer with the rule
 * instead: an error line never shows such a value. */
int ecw_table_name_check(const char *name) ECW_MUST_USE;
int ecw_table_create(bool *created_out, struct ecw_client *c, const char *table) ECW_MUST_USE;
int ecw_table_delete_table(struct ecw_client *c, const char *table) ECW_MUST_USE;
/* The account's tables whose names start with prefix (NULL or "": all), as
 * the service stores them, in its order, following NextTableName
 * continuations. The filter is the range [prefix, prefix with its last
 * character + 1), which compares case-sensitively as the service does.
 * top: names per page, 1..1000, 0 = service default (tests force pages
 * with it). *out is a NULL-terminated heap array: ecw_table_names_free. */
int ecw_table_list(char ***out, struct ecw_client *c, const char *prefix, int top) ECW_MUST_USE;
void ecw_table_names_free(char **names);
/* ECW_ENOTFOUND when the entity does not exist, ECW_ENOTABLE when the table
 * does not. */
int ecw_table_get(struct ecw_entity **out, struct ecw_client *c, const char *table, const char *pk,
		  const char *rk) ECW_MUST_USE;

enum ecw_write_mode {
	ECW_WRITE_INSERT,            /* POST: ECW_ECONFLICT if it exists */
	ECW_WRITE_INSERT_OR_REPLACE, /* PUT without If-Match */
	ECW_WRITE_INSERT_OR_MERGE,   /* MERGE without If-Match */
	ECW_WRITE_UPDATE,            /* PUT with If-Match: replace an existing entity */
	ECW_WRITE_MERGE,             /* MERGE with If-Match */
};

/* Writes e. if_match (an ETag byte for byte, or "*") is required for UPDATE
 * and MERGE and must be NULL otherwise; a mismatch is ECW_EPRECONDITION.
 * etag_out (may be NULL) receives the new ETag; free() it. */
int ecw_table_write(char **etag_out, struct ecw_client *c, const char *table, const struct ecw_entity *e,
		    enum ecw_write_mode mode, const char *if_match) ECW_MUST_USE;
/* if_match: an ETag or "*". ECW_ENOTFOUND if absent, ECW_EPRECONDITION on mismatch. */
int ecw_table_delete(struct ecw_client *c, const char *table, const char *pk, const char *rk,
		     const char *if_match) ECW_MUST_USE;
/* Deletes whatever version exists; an absent entity is success (a missing
 * table is ECW_ENOTABLE). deleted_out may be NULL. */
int ecw_table_delete_if_exists(bool *deleted_out, struct ecw_client *c, const char *table, const char *pk,
			       const char *rk) ECW_MUST_USE;

/* Most RowKeys one query of ecw_table_get_many names: the service refuses a
 * $filter of more than 15 comparisons, and the PartitionKey's takes one. */
#define ECW_TABLE_GET_MANY_KEYS 14

/* Reads the entities (pk, rks[i]), i < n, of one partition with one query
 * per ECW_TABLE_GET_MANY_KEYS distinct RowKeys ("PartitionKey eq .. and
 * (RowKey eq .. or ..)", keys as literals), following continuations. out is
 * the caller's array of n: out[i] receives entity i with its ETag (the
 * caller frees it), or NULL when it does not exist; a RowKey named twice
 * gets a copy in each place. Keys are checked before any request
 * (ECW_EINVALID). ECW_ENOTABLE when the table does not exist; on any error
 * every out[i] is NULL. One request instead of n, but the service serves a
 * filter OR-ing RowKeys by scanning the partition (its design guide): the
 * cost grows with the partition's size, not with n. */
int ecw_table_get_many(struct ecw_entity **out, struct ecw_client *c, const char *table, const char *pk,
		       const char *const *rks, size_t n) ECW_MUST_USE;

/* Appends 'value' as an OData string literal: quoted, single quotes doubled. */
int ecw_escape_filter_string(struct ecw_buf *filter, const char *value) ECW_MUST_USE;
/* Appends n bytes as JavaScript's encodeURIComponent does: A-Z a-z 0-9
 * - _ . ! ~ * ' ( ) as they are, every other byte as %XX (uppercase hex).
 * The result is printable ASCII without spaces (a blob metadata value). */
int ecw_escape_pct(struct ecw_buf *out, const char *s, size_t n) ECW_MUST_USE;

struct ecw_query_options {
	const char *filter; /* OData $filter, NULL for all entities */
	const char *select; /* comma-separated property names, NULL for all */
	int top;            /* entities per page, 1..1000; 0 = service default */
	long long limit;    /* stop after this many entities; 0 = no limit */
};

struct ecw_table_query;

/* A query that follows continuation tokens page by page as it is iterated. */
int ecw_table_query_new(struct ecw_table_query **out, struct ecw_client *c, const char *table,
			const struct ecw_query_options *opts) ECW_MUST_USE;
/* Sets *out to the next entity (caller frees) or to NULL at the end. */
int ecw_table_query_next(struct ecw_entity **out, struct ecw_table_query *q) ECW_MUST_USE;
/* Pages fetched so far (an empty page with a continuation token counts). */
int ecw_table_query_pages(const struct ecw_table_query *q);
void ecw_table_query_free(struct ecw_table_query *q);

/* ---- entity group transactions ------------------------------------------- */

#define ECW_BATCH_MAX_OPS 100
#define ECW_BATCH_MAX_BYTES (4 * 1024 * 1024)

enum ecw_batch_op {
	ECW_BATCH_INSERT,
	ECW_BATCH_INSERT_OR_REPLACE,
	ECW_BATCH_INSERT_OR_MERGE,
	ECW_BATCH_UPDATE, /* needs if_match */
	ECW_BATCH_MERGE,  /* needs if_match */
	ECW_BATCH_DELETE, /* needs if_match; only the keys of e are used */
};

struct ecw_batch;

int ecw_batch_new(struct ecw_batch **out, const char *table) ECW_MUST_USE;
void ecw_batch_free(struct ecw_batch *b);
/* Copies e. Fails before any request when the batch would break a service
 * rule: more than 100 operations, another PartitionKey, a RowKey twice. */
int ecw_batch_add(struct ecw_batch *b, enum ecw_batch_op op, const struct ecw_entity *e,
		  const char *if_match) ECW_MUST_USE;
/* As ecw_batch_add, but the batch keeps e itself, not a copy: e must stay as
 * it is, and alive, until the batch is freed. (A move group saves a copy of
 * every entity it writes or deletes.) */
int ecw_batch_add_borrowed(struct ecw_batch *b, enum ecw_batch_op op, const struct ecw_entity *e,
			   const char *if_match) ECW_MUST_USE;
size_t ecw_batch_count(const struct ecw_batch *b);
/* Sends the batch: all operations apply or none. On failure the error is that
 * of the failing operation and ecw_batch_failed_index() names it. */
int ecw_batch_submit(struct ecw_client *c, struct ecw_batch *b) ECW_MUST_USE;
/* 0-based index of the operation that failed the last submit; -1 if none
 * failed or the service did not say which. */
int ecw_batch_failed_index(const struct ecw_batch *b);
/* After a successful submit: operation i's HTTP status and new ETag (NULL for
 * deletes). */
int ecw_batch_status(const struct ecw_batch *b, size_t i);
const char *ecw_batch_etag(const struct ecw_batch *b, size_t i);

/* ---- blobs --------------------------------------------------------------- */

/* Block blobs in containers, each written whole or in blocks and read whole
 * or by ranges. A call on a container that does not exist returns
 * ECW_ENOCONTAINER, one on a blob that does not exist ECW_EBLOBNOTFOUND
 * (both ecw_error_is_absent). A condition that did not hold (If-Match, or
 * If-None-Match with an ETag) is ECW_EPRECONDITION, as for tables;
 * If-None-Match "*" on a blob that exists is ECW_ECONFLICT (409
 * BlobAlreadyExists), as a table insert of an entity that exists. Names are
 * checked before any request (ECW_EINVALID). */

/* A blob name: 1-1024 characters of valid UTF-8, none of them a control
 * character (U+0000-001F, U+007F-009F) or a backslash (which the service
 * reads as '/'); no empty segment (a leading '/' or "//") and no segment
 * ending in '.' ("." and "..", which URL normalization rewrites, included),
 * so not ending in '/' or '.' either. The URL carries each segment
 * percent-encoded, '/' kept. */
#define ECW_BLOB_NAME_MAX 1024
int ecw_blob_name_check(const char *name) ECW_MUST_USE;
/* A container name: 3-63 lowercase letters, digits and single dashes,
 * starting and ending with a letter or digit (the queue rule). */
int ecw_blob_container_check(const char *container) ECW_MUST_USE;

/* Creates the container; an existing one (409 ContainerAlreadyExists) is
 * success. created_out may be NULL. */
int ecw_blob_container_create(bool *created_out, struct ecw_client *c, const char *container) ECW_MUST_USE;
/* Deletes the container and every blob in it. ECW_ENOCONTAINER when absent. */
int ecw_blob_container_delete(struct ecw_client *c, const char *container) ECW_MUST_USE;

/* Metadata: names are C identifiers (a letter or '_', then letters, digits
 * and '_'; case-insensitive on the service, which keeps their case), values
 * printable ASCII without leading, trailing or doubled spaces (the service
 * folds whitespace in what it signs). At most ECW_BLOB_META_MAX pairs of at
 * most ECW_BLOB_META_BYTES together, the service's limit. */
#define ECW_BLOB_META_MAX 16
#define ECW_BLOB_META_BYTES 8192
struct ecw_blob_meta {
	const char *name;
	const char *value;
};

struct ecw_blob_put_options {
	const char *content_type;         /* NULL: application/octet-stream; printable ASCII, < 256 bytes */
	const char *if_match;             /* NULL, "*" (it exists) or an ETag: else ECW_EPRECONDITION */
	const char *if_none_match;        /* NULL, "*" (it does not exist: else ECW_ECONFLICT) or an ETag */
	const struct ecw_blob_meta *meta; /* n_meta pairs (the blob's whole metadata) */
	size_t n_meta;
};

/* What the service tells of a blob: Get Blob and Get Blob Properties (from
 * the answer's headers), or an item of a listing. A heap object:
 * ecw_blob_info_free. */
struct ecw_blob_info {
	char *name;           /* the blob's name (a listing's item, or as asked) */
	char etag[128];       /* byte for byte, quotes included: for If-Match */
	time_t last_modified; /* the service's clock */
	time_t service_date;  /* the answer's Date header (a listing: its page's), 0
				* when absent: judge a blob's age by last_modified
				* against it, never by the local clock */
	/* The blob's size; for ecw_blob_get_range the bytes of the range read. */
	long long content_length;
	/* The blob's size from every call (for ecw_blob_get_range its
	 * Content-Range's total). */
	long long total_length;
	char content_type[256];
	/* The metadata as the service gave it (names in their case; a listing's
	 * only with opts.metadata). What does not fit (over ECW_BLOB_META_MAX
	 * pairs or ECW_BLOB_META_BYTES, a value not printable ASCII, or more
	 * headers than the transport keeps) sets meta_partial. */
	struct ecw_blob_meta *meta;
	size_t n_meta;
	bool meta_partial;
};
void ecw_blob_info_free(struct ecw_blob_info *info);
/* The value named name (case-insensitive), or NULL. */
const char *ecw_blob_info_meta(const struct ecw_blob_info *info, const char *name);

/* Put Blob: a block blob of len bytes, in one request (up to
 * ECW_BLOB_PUT_MAX, this client's bound; more goes in blocks,
 * ecw_blob_put_block). etag_out (may be NULL) receives the new ETag;
 * free() it. */
#define ECW_BLOB_PUT_MAX ((size_t)256 * 1024 * 1024)
int ecw_blob_put(char **etag_out, struct ecw_client *c, const char *container, const char *name,
		 const void *data, size_t len, const struct ecw_blob_put_options *opts) ECW_MUST_USE;
/* One blob of ecw_blob_put_many, and then its result: err as ecw_blob_put
 * would return it. */
struct ecw_blob_put_item {
	const char *name;
	const void *data;
	size_t len;
	const struct ecw_blob_put_options *opts; /* NULL: none */
	int err;
};
/* Told of item i once its err is in, with the last error set for it when
 * it failed. */
typedef void (*ecw_blob_put_fn)(void *payload, size_t i);
/* Puts each item's blob into container as ecw_blob_put would (no ETag
 * kept), the requests pipelined on one connection (a round trip for a
 * write of them rather than one each: 32 puts and 256 KiB
 * of bodies at most; a larger one goes alone), and calls done for each once
 * its result is in: first any whose request could not be made, then the
 * rest in order. A put is idempotent as a PUT, not as a write: one left
 * unanswered is sent again and may meet what its first sending did (with
 * If-None-Match "*": ECW_ECONFLICT), as a retried ecw_blob_put may. */
void ecw_blob_put_many(struct ecw_client *c, const char *container, struct ecw_blob_put_item *items, size_t n,
		       ecw_blob_put_fn done, void *payload);
/* Get Blob: the whole blob into out (its old contents dropped), which must
 * take max_bytes; a blob over max_bytes is ECW_ETOOLARGE with out empty,
 * never a part of it. The answer is held in memory up to max_bytes (at least
 * 64 KiB, room for an error's answer). info_out (may be NULL) receives its
 * properties and metadata. */
int ecw_blob_get(struct ecw_buf *out, struct ecw_blob_info **info_out, struct ecw_client *c,
		 const char *container, const char *name, size_t max_bytes) ECW_MUST_USE;
/* Get Blob with x-ms-range: at most len bytes from offset (>= 0; len >= 1)
 * into out, its old contents dropped (its memory reused for them), as
 * ecw_blob_get. The answer is held in memory up to len (at least 64 KiB, room for an error's answer),
 * whatever the blob's size, so a large blob streams in chunks: read from 0,
 * then on while offset < info->total_length. info_out (may be NULL)
 * receives the properties and metadata, content_length the bytes read and
 * total_length the blob's size. A range starting at or past the end (every
 * range of an empty blob; the service's 416 InvalidRange) is no error: 0
 * with out empty and, when info_out is asked for, the blob's properties read
 * by a Get Blob Properties with the same If-Match (content_length 0,
 * total_length its size, which can be past offset if it grew in between).
 * if_match: NULL, "*" or an ETag (else ECW_EPRECONDITION): streaming with
 * the first chunk's ETag fails rather than mixing two versions. */
int ecw_blob_get_range(struct ecw_buf *out, struct ecw_blob_info **info_out, struct ecw_client *c,
		       const char *container, const char *name, long long offset, size_t len,
		       const char *if_match) ECW_MUST_USE;
/* Get Blob Properties (HEAD). */
int ecw_blob_props(struct ecw_blob_info **out, struct ecw_client *c, const char *container,
		   const char *name) ECW_MUST_USE;
/* Blocks: a blob of up to ECW_BLOB_BLOCKS_MAX blocks (the service's cap)
 * of up to ECW_BLOB_BLOCK_MAX bytes each (this client's bound, what a
 * streaming writer holds at once). Each block is put under an id, then the
 * list of ids commits them in order as the blob's whole content; until then
 * the blob (or its old content) is unchanged and the blocks invisible. A
 * block id is the caller's text, 1..ECW_BLOB_BLOCK_ID_MAX bytes of
 * printable ASCII (sent base64'd); every id of one blob must have the same
 * length (the service's rule: a put under an id of another length than
 * the blob's uncommitted blocks' is 400, ECW_EINVALID; a list mixing
 * lengths is refused before any request).
 * Putting a block again under its id replaces it, so a retried put is
 * harmless. Blocks never committed are dropped by the service after a week,
 * and every block not in a list when that list is committed. */
#define ECW_BLOB_BLOCK_MAX ((size_t)4 * 1024 * 1024)
#define ECW_BLOB_BLOCK_ID_MAX 48
#define ECW_BLOB_BLOCKS_MAX 50000
/* Put Block: len (1..ECW_BLOB_BLOCK_MAX) bytes of data under block_id. */
int ecw_blob_put_block(struct ecw_client *c, const char *container, const char *name, const char *block_id,
		       const void *data, size_t len) ECW_MUST_USE;
/* Put Block List: the blob becomes blocks block_ids[0..n) in that order
 * (each the latest block put under its id; n may be 0: an empty blob). An
 * id with no block is 400 InvalidBlockList (ECW_EINVALID). opts (may be
 * NULL) as for ecw_blob_put: the content type, the whole metadata and the
 * conditions (If-Match failing: ECW_EPRECONDITION; If-None-Match "*" on a
 * blob that exists: ECW_ECONFLICT), which the commit alone decides.
 * etag_out (may be NULL) receives the new ETag; free() it. */
int ecw_blob_put_block_list(char **etag_out, struct ecw_client *c, const char *container, const char *name,
			    const char *const *block_ids, size_t n,
			    const struct ecw_blob_put_options *opts) ECW_MUST_USE;
/* Delete Blob with its snapshots (x-ms-delete-snapshots: include). if_match:
 * NULL, "*" or an ETag (ECW_EPRECONDITION when it does not match). */
int ecw_blob_delete(struct ecw_client *c, const char *container, const char *name,
		    const char *if_match) ECW_MUST_USE;

struct ecw_blob_list_options {
	const char *prefix; /* NULL or "": every blob */
	const char *marker; /* NULL: from the start; or a NextMarker (ecw_blob_list_marker) */
	int max_results;    /* blobs per page, 1..5000; 0 = 1000 (a page then stays under
			     * the answer's 32 MiB cap, metadata and all) */
	bool metadata;      /* include=metadata: each item's meta */
};

struct ecw_blob_list;

/* List Blobs: the container's blobs in name order, page by page
 * (following NextMarker) as it is iterated. Nothing is sent until the first
 * ecw_blob_list_next. */
int ecw_blob_list_new(struct ecw_blob_list **out, struct ecw_client *c, const char *container,
		      const struct ecw_blob_list_options *opts) ECW_MUST_USE;
/* Sets *out to the next blob (ecw_blob_info_free) or to NULL at the end. */
int ecw_blob_list_next(struct ecw_blob_info **out, struct ecw_blob_list *l) ECW_MUST_USE;
/* Pages fetched so far (an empty page with a marker counts). */
int ecw_blob_list_pages(const struct ecw_blob_list *l);
/* Where the next page starts: the last page's NextMarker, to resume a
 * listing later from (opts.marker); "" once the last page is in. */
const char *ecw_blob_list_marker(const struct ecw_blob_list *l);
/* The Date header of the last page's answer (0 before the first or when
 * absent). */
time_t ecw_blob_list_date(const struct ecw_blob_list *l);
void ecw_blob_list_free(struct ecw_blob_list *l);

#endif
