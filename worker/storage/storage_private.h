/* storage_private.h - what the files of worker/storage share with each other
 * (and with the unit tests), but not with the rest of ecworker: the account's
 * fields, the request/response records the client signs and sends, and the
 * pure helpers for signing, escaping, dates, XML and JSON error bodies.
 * Requests and responses are caller-owned structs (_init / _dispose). */
#ifndef ECW_STORAGE_PRIVATE_H
#define ECW_STORAGE_PRIVATE_H

#include <sys/socket.h>

#include "ecw_codec.h"
#include "ecw_storage.h"
#include "ecw_token.h"

#define ECW_QUEUE_API_VERSION "2021-12-02"
#define ECW_TABLE_API_VERSION "2019-02-02"

struct ecw_account {
	char *name;                 /* "" when only a SAS was given */
	unsigned char *key;         /* decoded AccountKey; NULL when none */
	size_t key_len;
	char *sas;                  /* token without a leading '?'; NULL when none */
	struct ecw_token_credential *cred; /* Entra ID tokens; NULL when none (owned) */
	char *endpoint[2];          /* by enum ecw_service; no trailing '/' */
	const char *endpoint_path[2]; /* path part of endpoint[i] ("/devstoreaccount1" or "") */
};

struct ecw_kv {
	char *name;
	char *value;
};

#define ECW_REQ_MAX_QUERY 8
#define ECW_REQ_MAX_HEADERS 16
#define ECW_RESP_MAX_HEADERS 48

struct ecw_request {
	enum ecw_service svc;
	const char *method;         /* static string: "GET", "MERGE", ... */
	const char *op;             /* static string naming the operation, for metrics */
	struct ecw_buf path;        /* percent-encoded, after the endpoint: "/q/messages" */
	struct ecw_kv query[ECW_REQ_MAX_QUERY];   /* values DECODED: signed decoded, sent encoded */
	size_t nquery;
	struct ecw_kv headers[ECW_REQ_MAX_HEADERS]; /* without x-ms-date/Authorization: the client adds them */
	size_t nheaders;
	const char *content_type;   /* NULL: no body type (an empty Content-Type: is sent) */
	const char *body;           /* not owned */
	size_t body_len;
	const char *label;          /* names the request in messages (not owned); NULL:
				     * METHOD, endpoint path and path */
};

void ecw_request_init(struct ecw_request *r, enum ecw_service svc, const char *method);
void ecw_request_dispose(struct ecw_request *r);
int ecw_request_add_query(struct ecw_request *r, const char *name, const char *value) ECW_MUST_USE;
/* Adds or replaces (names compare case-insensitively). */
int ecw_request_set_header(struct ecw_request *r, const char *name, const char *value) ECW_MUST_USE;
const char *ecw_request_header(const struct ecw_request *r, const char *name);
/* Whether the request sends a body (and so Content-Length and Content-Type). */
bool ecw_request_has_body(const struct ecw_request *r);
/* endpoint + path + "?" + encoded query (+ "&" + SAS). For logs use the path
 * only: the URL may carry a SAS signature. */
int ecw_request_url(struct ecw_buf *out, const struct ecw_account *a, const struct ecw_request *r) ECW_MUST_USE;

struct ecw_response {
	long status;                /* 0 until a response arrived */
	struct ecw_buf hdrs;        /* "name\0value\0" for each header kept, values trimmed */
	size_t hat[ECW_RESP_MAX_HEADERS]; /* where each header's name starts in hdrs */
	size_t nheaders;
	struct ecw_buf body;
};

void ecw_response_init(struct ecw_response *resp);
void ecw_response_dispose(struct ecw_response *resp);
void ecw_response_reset(struct ecw_response *resp);
int ecw_response_add_header(struct ecw_response *resp, const char *name, size_t nlen,
			    const char *value, size_t vlen) ECW_MUST_USE;
/* Case-insensitive; NULL when absent. */
const char *ecw_response_header(const struct ecw_response *resp, const char *name);

/* ---- http.c ---- */

/* A client's HTTP/1.1 connections (see http.c). o is the client's and must
 * outlive it: timeouts, CA file, TLS verification. */
struct ecw_http;
int ecw_http_new(struct ecw_http **out, const struct ecw_client_options *o) ECW_MUST_USE;
void ecw_http_free(struct ecw_http *h);
/* The next request opens a new connection. */
void ecw_http_close_all(struct ecw_http *h);
/* Connections opened so far. */
uint64_t ecw_http_connections(const struct ecw_http *h);
/* Sends r (headers already signed) to url and reads the answer into resp,
 * which the caller has reset. Returns 0 when an answer came (any status), or
 * a negative ecw_err with why it failed in why (no URL, no request name). */
int ecw_http_send(struct ecw_http *h, struct ecw_response *resp, const char *url, const struct ecw_request *r,
		  char *why, size_t why_len) ECW_MUST_USE;
/* Reads one answer from fd (the caller's, left open) as ecw_http_send reads
 * one from a connection: the way in for tests/fuzz/fuzz_http_answer.c, as
 * the framing is this file's parser of bytes from outside. *close: the
 * connection would not be kept; *left: bytes read past the answer. */
int ecw_http_read_fd(struct ecw_response *resp, int fd, bool head_only, int timeout_ms, bool *close, size_t *left,
		     char *why, size_t why_len) ECW_MUST_USE;

/* ---- resolve.c ---- */

#define ECW_ADDRS_MAX 8
struct ecw_addrs {
	size_t n;
	struct {
		struct sockaddr_storage sa;
		socklen_t len;
		int family;
	} a[ECW_ADDRS_MAX];
};
/* host:port's addresses (at most ECW_ADDRS_MAX, in getaddrinfo's order):
 * from the process's cache when looked up less than 60 s ago (*kept true),
 * else looked up now, once for all the threads that ask meanwhile. Returns 0,
 * or ECW_ETRANSIENT with "could not resolve host ..." in why. */
int ecw_resolve(const char *host, const char *port, struct ecw_addrs *out, bool *kept, char *why,
		size_t why_len) ECW_MUST_USE;
/* None of host:port's addresses took a connection: look it up again next time. */
void ecw_resolve_forget(const char *host, const char *port);
/* Lookups made so far (getaddrinfo calls). */
uint64_t ecw_resolve_lookups(void);

/* ---- client.c ---- */

/* Dates, signs, sends (retrying transient failures), and maps a non-2xx
 * answer to an ecw_err with the last error set from the body and headers. */
int ecw_client_send(struct ecw_response *resp, struct ecw_client *c, struct ecw_request *r) ECW_MUST_USE;
const struct ecw_account *ecw_client_account(const struct ecw_client *c);
/* One exchange outside the storage protocol (the token endpoints) on c's
 * connection and TLS settings: url is absolute, nothing is signed or retried,
 * and the answer's status is left to the caller. Returns 0 when an answer came,
 * or a negative ecw_err for a network failure (last error set). */
int ecw_client_exchange(struct ecw_response *resp, struct ecw_client *c, const char *url,
			const struct ecw_request *r) ECW_MUST_USE;
/* Maps an HTTP status (and the service's error code) to an ecw_err. */
int ecw_status_to_err(long status, const char *service_code);
/* Full jitter: uniform in [0, min(max, base * 2^(retry-1))]; retry is 1-based. */
int64_t ecw_retry_delay_ms(const struct ecw_client_options *o, int retry, uint32_t rnd);

#ifdef ECW_TESTING
/* Test-only seams, compiled only into test builds (-DECW_TESTING). */
enum ecw_fault_kind {
	ECW_FAULT_STATUS,            /* answer with `status`, request never sent */
	ECW_FAULT_STATUS_AFTER_SEND, /* send for real, then replace the answer with `status` */
	ECW_FAULT_RESET,             /* connection reset before any answer; next request reconnects */
};
/* The next `count` requests (attempts, not calls) fail as described. */
void ecw_client_inject_faults(struct ecw_client *c, int count, enum ecw_fault_kind kind, long status);
/* Replaces the HTTP transport: fn gets the full URL and the signed request
 * (headers include x-ms-date and Authorization) and fills resp; it returns 0,
 * or a negative ecw_err for a network failure. */
typedef int (*ecw_send_fn)(void *ctx, struct ecw_response *resp, const char *url,
			   const struct ecw_request *r);
void ecw_client_set_transport(struct ecw_client *c, ecw_send_fn fn, void *ctx);
/* resolve.c's lookup function (NULL: getaddrinfo again; its answers are
 * freed with freeaddrinfo), how long answers are kept, and forgetting them. */
struct addrinfo;
void ecw_resolve_set_lookup(int (*fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **));
void ecw_resolve_set_ttl_ms(int64_t ms);
void ecw_resolve_flush(void);
/* Threads waiting for another thread's lookup. */
int ecw_resolve_waiting(void);
#endif

/* ---- auth.c ---- */

/* The Shared Key string-to-sign for r (layout depends on r->svc; r must carry
 * x-ms-date already). */
int ecw_auth_string_to_sign(struct ecw_buf *out, const struct ecw_account *a,
			    const struct ecw_request *r) ECW_MUST_USE;
/* "SharedKey account:signature" */
int ecw_auth_header(struct ecw_buf *out, const struct ecw_account *a,
		    const struct ecw_request *r) ECW_MUST_USE;
int ecw_hmac_sha256_base64(struct ecw_buf *out, const unsigned char *key, size_t key_len,
			   const char *msg, size_t msg_len) ECW_MUST_USE;

/* ---- token.c (json-c lives there too) ---- */

/* Reads a token endpoint's 200 answer: access_token, and its lifetime from
 * expires_in (a number or a string of digits, seconds from now) or else
 * expires_on (seconds since the epoch, number or string; now_unix converts
 * it). refresh_in (optional) comes back in *refresh_in_s, 0 when absent.
 * *token_out is heap (a secret: wipe and free it). */
int ecw_token_parse_response(char **token_out, int64_t *lifetime_s, int64_t *refresh_in_s,
			     const char *body, size_t len, int64_t now_unix) ECW_MUST_USE;
/* "invalid_client: AADSTS7000215: ..." from a token endpoint's error answer
 * (OAuth's error and the first line of error_description, or App Service's
 * {"message": ...}), for an error message: one line, JWTs cut out; "" when
 * the answer has neither. */
void ecw_token_error_summary(char *out, size_t cap, const char *body, size_t len);
/* When a token of this lifetime is due for refresh, in ms after it was
 * obtained: 5 minutes before expiry, or at half-life for short tokens, or
 * earlier when the endpoint said so (refresh_in_ms > 0). */
int64_t ecw_token_refresh_after_ms(int64_t lifetime_ms, int64_t refresh_in_ms);
/* Until when (ms after it was obtained) a token may still be sent: a margin
 * before expiry for clock skew and requests in flight. */
int64_t ecw_token_usable_ms(int64_t lifetime_ms);
/* Puts a valid token for cred into out (replacing its content): the cached
 * one, or a new one fetched through c's connection (one client fetches while
 * the others keep using a still-valid token or wait). *gen_out identifies the
 * token for ecw_token_refused. Errors: ECW_EAUTH for a refusal by the token
 * endpoint (400/401/403: a configuration problem), transient codes for 5xx
 * and network failures. */
int ecw_token_get(struct ecw_buf *out, uint64_t *gen_out, struct ecw_token_credential *cred,
		  struct ecw_client *c) ECW_MUST_USE;
/* The service refused token gen: forget it. True when asking again may help
 * (a newer token exists, or this one was not freshly minted). */
bool ecw_token_refused(struct ecw_token_credential *cred, uint64_t gen);

/* ---- escape.c ---- */

/* As JavaScript's encodeURIComponent: leaves A-Z a-z 0-9 - _ . ! ~ * ' ( ). */
int ecw_pct_encode(struct ecw_buf *out, const char *s, size_t n) ECW_MUST_USE;
/* "/{table}(PartitionKey='..',RowKey='..')" with quotes doubled, then encoded. */
int ecw_entity_path(struct ecw_buf *out, const char *table, const char *pk, const char *rk) ECW_MUST_USE;
/* Escapes & < > and \r (as &#13;, which XML would otherwise turn into \n). */
int ecw_xml_escape(struct ecw_buf *out, const char *s, size_t n) ECW_MUST_USE;
/* RFC 1123 in the C locale: "Wed, 19 Aug 2026 10:00:00 GMT" (29 chars + NUL). */
void ecw_http_date(char out[32], time_t t);
int ecw_parse_http_date(time_t *out, const char *s) ECW_MUST_USE;
int ecw_check_queue_name(const char *name) ECW_MUST_USE;

int ecw_check_table_name(const char *name) ECW_MUST_USE;

/* ---- xml.c (the only user of expat) ---- */

/* Parses a QueueMessagesList. A message without MessageText (as a put's
 * answer has) comes back with text NULL. */
int ecw_xml_parse_messages(struct ecw_queue_msg **out, size_t *count, const char *body, size_t len) ECW_MUST_USE;
/* <Error><Code/><Message/></Error>; missing parts come back as "". */
void ecw_xml_parse_error(char *code, size_t code_cap, char *msg, size_t msg_cap,
			 const char *body, size_t len);

/* ---- entity.c (json-c lives there, in table.c and batch.c) ---- */

/* {"odata.error":{"code":..,"message":{"value":..}}}; missing parts "". */
void ecw_json_parse_error(char *code, size_t code_cap, char *msg, size_t msg_cap,
			  const char *body, size_t len);
struct json_object;
/* Parses one JSON value (nothing but whitespace after it); NULL if invalid.
 * Release with json_object_put. */
struct json_object *ecw_json_parse(const char *s, size_t len);
int ecw_entity_from_json_object(struct ecw_entity **out, struct json_object *obj) ECW_MUST_USE;
/* Sets the ETag of an entity (after a write, from the ETag header). */
int ecw_entity_set_etag(struct ecw_entity *e, const char *etag) ECW_MUST_USE;

/* ---- batch.c (pure parts, for unit tests) ---- */

/* The multipart body for b; table_url is endpoint + "/" + table. */
int ecw_batch_build_body(struct ecw_buf *out, const struct ecw_batch *b, const char *table_url,
			 const char *batch_id, const char *changeset_id) ECW_MUST_USE;
/* Reads a $batch response into b's per-operation results. Returns 0 when every
 * operation succeeded, else the failing operation's ecw_err (with the last
 * error set and the failed index recorded in b). */
int ecw_batch_parse_response(struct ecw_batch *b, const char *content_type, const char *body,
			     size_t len) ECW_MUST_USE;

#endif
