/* SPDX-License-Identifier: MIT */
/* client.c - one worker thread's storage client: its connections (http.c's
 * keep-alive ones, or a libcurl easy handle when a proxy is configured), the
 * retry policy, and the place where transport failures and CURLcodes become
 * ecw_err values (an answer's status and error code become one in status.c).
 * Every request goes through ecw_client_send: date, sign (auth.c, or a token
 * from token.c, which fetches through token_exchange below), send, classify,
 * maybe back off and try again. A refused token is renewed, and a refused key
 * or SAS replaced when the account's reload finds a newer one (account.h),
 * and the request goes again at once, once.
 *
 * Only this file talks to libcurl. */
#include <curl/curl.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "account.h"
#include "auth.h"
#include "client.h"
#include "date.h"
#include "ecw_clock.h"
#include "http.h"
#include "jsonparse.h"
#include "status.h"
#include "token.h"
#include "xml.h"

struct ecw_client {
	const struct ecw_account *acct;
	struct ecw_client_options opts;
	struct ecw_http *http; /* NULL when libcurl carries the requests */
	CURL *curl;            /* NULL unless a proxy is configured */
	CURLM *multi;          /* drives curl, so its waits watch the cancellation */
	struct ecw_client_stats stats;
	bool fresh_connect; /* next transfer opens a new connection */
	char errbuf[CURL_ERROR_SIZE];
#ifdef ECW_TESTING
	int fault_count;
	enum ecw_fault_kind fault_kind;
	long fault_status;
	ecw_send_fn send_fn;
	void *send_ctx;
#endif
};

static void set_shared_options(struct ecw_client *c);

/* ---- the client ------------------------------------------------------------ */

/* libcurl knows the proxy variables (with NO_PROXY and the schemes they
 * apply to); http.c does not speak to proxies. So a client made while one is
 * set sends through libcurl, as every client did before http.c. */
static bool proxy_configured(void)
{
	static const char *const vars[] = {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy",
					   "ALL_PROXY"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		if (v && *v)
			return true;
	}
	return false;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init(void)
{
	curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int ecw_client_new(struct ecw_client **out, const struct ecw_account *acct,
		   const struct ecw_client_options *opts)
{
	static const struct ecw_client_options defaults = ECW_CLIENT_OPTIONS_INIT;
	struct ecw_client *c;
	int err;

	*out = NULL;
	pthread_once(&curl_once, curl_init);
	if (curl_init_result != CURLE_OK)
		return ecw_error_set(ECW_ERROR, "libcurl initialisation failed: %s",
				     curl_easy_strerror(curl_init_result));
	if (!(c = calloc(1, sizeof(*c))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	c->acct = acct;
	c->opts = opts ? *opts : defaults;
	if (c->opts.max_tries < 1)
		c->opts.max_tries = 1;
	if (c->opts.retry_base_ms < 0)
		c->opts.retry_base_ms = 0;
	if (c->opts.retry_max_ms < c->opts.retry_base_ms)
		c->opts.retry_max_ms = c->opts.retry_base_ms;
	if (!proxy_configured()) {
		if ((err = ecw_http_new(&c->http, &c->opts)) < 0) {
			free(c);
			return err;
		}
	} else {
		if (!(c->curl = curl_easy_init()) || !(c->multi = curl_multi_init())) {
			if (c->curl)
				curl_easy_cleanup(c->curl);
			free(c);
			return ecw_error_set(ECW_ERROR, "curl_easy_init failed");
		}
		set_shared_options(c);
	}
	*out = c;
	return 0;
}

void ecw_client_free(struct ecw_client *c)
{
	if (!c)
		return;
	ecw_http_free(c->http);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c);
}

void ecw_client_stats(struct ecw_client_stats *out, const struct ecw_client *c)
{
	*out = c->stats;
}

const struct ecw_account *ecw_client_account(const struct ecw_client *c)
{
	return c->acct;
}

const char *ecw_client_endpoint(const struct ecw_client *c, enum ecw_service svc)
{
	return ecw_account_endpoint(c->acct, svc);
}

#ifdef ECW_TESTING
void ecw_client_inject_faults(struct ecw_client *c, int count, enum ecw_fault_kind kind, long status)
{
	c->fault_count = count;
	c->fault_kind = kind;
	c->fault_status = status;
}

void ecw_client_set_transport(struct ecw_client *c, ecw_send_fn fn, void *ctx)
{
	c->send_fn = fn;
	c->send_ctx = ctx;
}
#endif

/* Sets the last error for a request that got no answer: its label, or its
 * method and path (never its URL, which may carry a SAS), then why. */
static int request_failed(const struct ecw_client *c, const struct ecw_request *r, int err, const char *why)
{
	if (r->label)
		return ecw_error_set(err, "%s: %s", r->label, why);
	return ecw_error_set(err, "%s %s%s: %s", r->method, c->acct->endpoint_path[r->svc],
			     ecw_buf_cstr(&r->path), why);
}

static const char *api_version(enum ecw_service svc)
{
	return svc == ECW_SVC_QUEUE  ? ECW_QUEUE_API_VERSION
	       : svc == ECW_SVC_BLOB ? ECW_BLOB_API_VERSION
				     : ECW_TABLE_API_VERSION;
}

/* The most r's answer may hold: its own cap, or its kind's. */
static size_t answer_cap(const struct ecw_request *r)
{
	return r->answer_max ? r->answer_max : ecw_response_cap(r->op);
}

/* ---- libcurl transport ----------------------------------------------------- */

/* The body as libcurl hands it over, under the response's cap (the body's
 * max, set by the request's kind): past it, libcurl stops with
 * CURLE_WRITE_ERROR and closes the connection. */
static size_t on_body(char *p, size_t size, size_t n, void *payload)
{
	struct ecw_response *resp = payload;

	if (ecw_buf_add(&resp->body, p, size * n) < 0)
		return 0;
	return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *payload)
{
	struct ecw_response *resp = payload;
	size_t len = size * n;
	const char *colon;

	/* A new status line (after a 100 Continue) starts a new header set. */
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		ecw_response_clear_headers(resp);
		return len;
	}
	colon = memchr(p, ':', len);
	if (colon && colon != p &&
	    ecw_response_add_header(resp, p, (size_t)(colon - p), colon + 1, (size_t)(p + len - colon - 1)) <
		    0)
		return 0;
	return len;
}

static int curl_code_to_err(CURLcode rc)
{
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT: return ECW_ETIMEOUT;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM: return ECW_ETRANSIENT;
	case CURLE_WRITE_ERROR:
	case CURLE_FILESIZE_EXCEEDED: return ECW_ETOOLARGE;
	case CURLE_ABORTED_BY_CALLBACK: return ECW_ECANCELED;
	case CURLE_OUT_OF_MEMORY: return ECW_ENOMEM;
	default: return ECW_ERROR;
	}
}

/* The options every transfer shares. libcurl keeps options from one
 * transfer to the next, so they are set once, when the client is made; a
 * request sets only what is its own (curl_send). */
/* libcurl's OpenSSL context, before each handshake: the system's CAs too. */
static CURLcode add_system_cas(CURL *curl, void *ssl_ctx, void *payload)
{
	(void)curl;
	(void)payload;
	return SSL_CTX_set_default_verify_paths(ssl_ctx) == 1 ? CURLE_OK : CURLE_SSL_CACERT_BADFILE;
}

static void set_shared_options(struct ecw_client *c)
{
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)c->opts.timeout_ms);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)c->opts.connect_timeout_ms);
	curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_header);
	if (c->opts.ca_file) {
		curl_easy_setopt(c->curl, CURLOPT_CAINFO, c->opts.ca_file);
		/* CAINFO replaces libcurl's bundle; ca_file adds to it, as in http.c. */
		curl_easy_setopt(c->curl, CURLOPT_SSL_CTX_FUNCTION, add_system_cas);
	}
	if (c->opts.insecure_skip_tls_verify_for_tests) {
		curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
}

/* curl_easy_perform, but through the client's multi handle, whose wait
 * (curl_multi_poll) also watches the cancellation's descriptor: a fired
 * cancellation ends the transfer at once with CURLE_ABORTED_BY_CALLBACK
 * (easy_perform's own wait looks at a progress callback only once a
 * second). Its deadline is the transfer's timeout (curl_send clamps it).
 * The connections stay in the multi handle's cache from one transfer to
 * the next; one removed mid-transfer is closed. */
static CURLcode curl_perform(struct ecw_client *c)
{
	struct curl_waitfd cancel = {.fd = ecw_cancel_fd(c->opts.cancel), .events = CURL_WAIT_POLLIN};
	CURLcode rc = CURLE_OK;
	CURLMsg *m;
	int running = 1, left;

	if (curl_multi_add_handle(c->multi, c->curl) != CURLM_OK)
		return CURLE_OUT_OF_MEMORY;
	for (;;) {
		if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
			rc = CURLE_OUT_OF_MEMORY;
			break;
		}
		if (!running)
			break;
		if (ecw_cancel_is_set(c->opts.cancel) ||
		    curl_multi_poll(c->multi, cancel.fd >= 0 ? &cancel : NULL, cancel.fd >= 0 ? 1 : 0, 1000,
				    NULL) != CURLM_OK ||
		    ecw_cancel_is_set(c->opts.cancel)) {
			rc = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
	}
	while ((m = curl_multi_info_read(c->multi, &left)))
		if (m->msg == CURLMSG_DONE && rc == CURLE_OK)
			rc = m->data.result;
	curl_multi_remove_handle(c->multi, c->curl);
	return rc;
}

/* Appends "name: value" (or "name:", which makes libcurl leave out a header
 * of its own) and a NUL to lines; *at gets where the line starts. */
static int add_line(struct ecw_buf *lines, size_t *at, const char *name, const char *value)
{
	int err;

	*at = lines->len;
	if ((err = ecw_buf_adds(lines, name)) < 0 || (err = ecw_buf_addc(lines, ':')) < 0)
		return err;
	if (value && ((err = ecw_buf_addc(lines, ' ')) < 0 || (err = ecw_buf_adds(lines, value)) < 0))
		return err;
	return ecw_buf_addc(lines, '\0');
}

static int curl_send(struct ecw_client *c, struct ecw_response *resp, const char *url,
		     const struct ecw_request *r)
{
	/* The header list is libcurl's public struct curl_slist with its nodes
	 * on the stack and its lines in one buffer: libcurl only reads the
	 * list, and curl_slist_append would allocate twice a line. */
	struct curl_slist nodes[ECW_REQ_MAX_HEADERS + 2];
	size_t at[ECW_REQ_MAX_HEADERS + 2], n = 0;
	bool body = ecw_request_has_body(r);
	struct ecw_buf lines;
	CURLcode rc;
	long status = 0, conns = 0;
	int err = 0;

	ecw_buf_init(&lines, 0);
	for (size_t i = 0; i < r->nheaders && err == 0; i++)
		err = add_line(&lines, &at[n++], r->headers[i].name, r->headers[i].value);
	/* A body always goes with our Content-Type (an empty one removes
	 * libcurl's form type, which the server would sign) and never with
	 * Expect: 100-continue. A request without one needs neither. */
	if (err == 0 && (body || r->content_type))
		err = add_line(&lines, &at[n++], "Content-Type", r->content_type);
	if (err == 0 && body)
		err = add_line(&lines, &at[n++], "Expect", NULL);
	if (err < 0)
		goto done;
	for (size_t i = 0; i < n; i++) {
		nodes[i].data = lines.ptr + at[i];
		nodes[i].next = i + 1 < n ? &nodes[i + 1] : NULL;
	}

	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, n ? nodes : NULL);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, resp);
	curl_easy_setopt(c->curl, CURLOPT_FRESH_CONNECT, c->fresh_connect ? 1L : 0L);
	c->fresh_connect = false;
	/* The last transfer's method and body go first: no body, then GET, then
	 * this request's body and method. */
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, (char *)NULL);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)-1);
	curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
	if (body) {
		/* PUT/POST/MERGE always carry a body, if only Content-Length: 0. */
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, r->body ? r->body : "");
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
	}
	/* HEAD is libcurl's NOBODY (HTTPGET above turned it off again): as a
	 * custom method it would wait for the body its Content-Length names. */
	if (strcmp(r->method, "HEAD") == 0)
		curl_easy_setopt(c->curl, CURLOPT_NOBODY, 1L);
	curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST,
			 strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0 ? NULL : r->method);
	/* A Content-Length over the cap fails before the body is read. */
	curl_easy_setopt(c->curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)resp->body.max);
	/* A cancellation's deadline ends the transfer as its timeout would. */
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS,
			 (long)ecw_cancel_clamp_ms(c->opts.cancel, c->opts.timeout_ms));

	c->errbuf[0] = '\0';
	rc = curl_perform(c);
	curl_easy_getinfo(c->curl, CURLINFO_NUM_CONNECTS, &conns);
	c->stats.connections += (uint64_t)conns;
	if (rc != CURLE_OK) {
		char why[CURL_ERROR_SIZE + 64];

		err = ecw_cancel_is_set(c->opts.cancel) ? ECW_ECANCELED : curl_code_to_err(rc);
		if (err == ECW_ECANCELED)
			snprintf(why, sizeof(why), "the worker is stopping");
		else if (err == ECW_ETOOLARGE)
			ecw_response_cap_text(why, sizeof(why), resp->body.max, r->op);
		else
			snprintf(why, sizeof(why), "%s", c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
		err = request_failed(c, r, err, why);
		goto done;
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	resp->status = status;
done:
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
	ecw_buf_dispose(&lines);
	return err;
}

/* Sends through http.c, or libcurl for a proxied client, the answer's body
 * capped by the request's kind; a failure's message names the request
 * (never its URL, which may carry a SAS). */
static int transport_send(struct ecw_client *c, struct ecw_response *resp, const char *url,
			  const struct ecw_request *r)
{
	char why[256];
	uint64_t before;
	int err;

	resp->body.max = answer_cap(r);
	if (c->curl)
		return curl_send(c, resp, url, r);
	if (c->fresh_connect) {
		ecw_http_close_all(c->http);
		c->fresh_connect = false;
	}
	before = ecw_http_connections(c->http);
	err = ecw_http_send(c->http, resp, url, r, why, sizeof(why));
	c->stats.connections += ecw_http_connections(c->http) - before;
	if (err == 0)
		return 0;
	return request_failed(c, r, err, why);
}

/* ---- errors and retries ------------------------------------------------------- */

int64_t ecw_client_retry_delay_ms(const struct ecw_client_options *o, int retry, uint32_t rnd)
{
	int64_t ceiling = ecw_clock_backoff_ms(o->retry_base_ms, o->retry_max_ms, retry);

	if (ceiling <= 0)
		return 0;
	return (int64_t)((uint64_t)rnd % (uint64_t)(ceiling + 1));
}

/* A table request's path starts with its table: /{table}(...), /{table}()
 * or /{table}. The table a 404 TableNotFound is about goes into the last
 * error (ecw_error_set_table), for the runtime's job_blocked line and gauge.
 * A $batch names its table in its body: batch.c names it. A blob request's
 * path starts with its container (/{container}/{blob}, /{container}?...),
 * named likewise for a 404 ContainerNotFound. */
static void name_missing_table(const struct ecw_request *r)
{
	const char *path = ecw_buf_cstr(&r->path);
	size_t n;

	if ((r->svc != ECW_SVC_TABLE && r->svc != ECW_SVC_BLOB) || *path != '/')
		return;
	path++;
	n = strcspn(path, r->svc == ECW_SVC_BLOB ? "/?" : "(/?");
	if (r->svc == ECW_SVC_BLOB || (n > 0 && *path != '$' && !(n == 6 && memcmp(path, "Tables", 6) == 0)))
		ecw_error_set_table(path, n);
}

/* Turns a non-2xx answer into an ecw_err and the last error. */
static int classify(const struct ecw_client *c, const struct ecw_request *r, const struct ecw_response *resp)
{
	char code[64] = "", msg[256] = "";
	const char *hcode = ecw_response_header(resp, "x-ms-error-code");
	const char *reqid = ecw_response_header(resp, "x-ms-request-id");
	int err;

	const char *body = ecw_buf_cstr(&resp->body);
	size_t skip = 0;

	/* Azure's XML error bodies start with a UTF-8 byte-order mark. */
	if (resp->body.len >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0)
		skip = 3;
	while (skip < resp->body.len && strchr(" \t\r\n", body[skip]))
		skip++;
	if (skip < resp->body.len && body[skip] == '<')
		ecw_xml_parse_error(code, sizeof(code), msg, sizeof(msg), body, resp->body.len);
	else if (skip < resp->body.len && body[skip] == '{')
		ecw_jsonparse_error(code, sizeof(code), msg, sizeof(msg), body + skip, resp->body.len - skip);
	if (hcode && *hcode) {
		size_t n = strlen(hcode);
		if (n >= sizeof(code))
			n = sizeof(code) - 1;
		memcpy(code, hcode, n);
		code[n] = '\0';
	}
	err = ecw_status_to_err(resp->status, code);
	/* The service's text for an auth failure can quote the request's
	 * signature; keep only the code. */
	if (err == ECW_EAUTH && c->acct->cred)
		snprintf(msg, sizeof(msg),
			 "the service refused the access token (check that the identity has a data role on "
			 "the account, such as %s, and that the token is for https://storage.azure.com)",
			 r->svc == ECW_SVC_BLOB
				 ? "Storage Blob Data Contributor"
				 : "Storage Queue Data Contributor and Storage Table Data Contributor");
	else if (err == ECW_EAUTH)
		snprintf(msg, sizeof(msg), "%s",
			 "the service refused the credentials (check the account key or SAS)");
	/* Cut at the first line: the service appends RequestId and Time lines. */
	msg[strcspn(msg, "\r\n")] = '\0';
	ecw_error_set_http(err, (int)resp->status, code, reqid, "%s %s%s: %ld %s%s%s%s%s%s", r->method,
			   c->acct->endpoint_path[r->svc], ecw_buf_cstr(&r->path), resp->status, code,
			   *msg ? ": " : "", msg, reqid ? " (request id " : "", reqid ? reqid : "",
			   reqid ? ")" : "");
	if (err == ECW_ENOTABLE || err == ECW_ENOCONTAINER)
		name_missing_table(r);
	return err;
}

/* The credential in a request must not outlive its use in heap memory. */
static void wipe_header(struct ecw_request *r, const char *name)
{
	for (size_t i = 0; i < r->nheaders; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			memset(r->headers[i].value, 0, strlen(r->headers[i].value));
}

static int send_once(struct ecw_client *c, struct ecw_response *resp, const char *url,
		     const struct ecw_request *r)
{
	int err;

#ifdef ECW_TESTING
	if (c->fault_count > 0) {
		c->fault_count--;
		switch (c->fault_kind) {
		case ECW_FAULT_STATUS:
			resp->status = c->fault_status;
			return ecw_response_add_header(resp, "x-ms-error-code", 15, "InjectedFault", 13);
		case ECW_FAULT_RESET:
			c->fresh_connect = true;
			return ecw_error_set(ECW_ETRANSIENT, "%s %s%s: connection reset by peer (injected)",
					     r->method, c->acct->endpoint_path[r->svc],
					     ecw_buf_cstr(&r->path));
		case ECW_FAULT_STATUS_AFTER_SEND:
			err = c->send_fn ? c->send_fn(c->send_ctx, resp, url, r)
					 : transport_send(c, resp, url, r);
			if (err == 0) {
				ecw_response_reset(resp);
				resp->status = c->fault_status;
				err = ecw_response_add_header(resp, "x-ms-error-code", 15, "InjectedFault",
							      13);
			}
			return err;
		}
	}
	if (c->send_fn)
		return c->send_fn(c->send_ctx, resp, url, r);
#endif
	err = transport_send(c, resp, url, r);
	return err;
}

/* One exchange outside the storage protocol, on c's connections and TLS
 * settings: what token.c fetches tokens through (an ecw_token_exchange_fn,
 * payload the client). */
static int token_exchange(struct ecw_response *resp, const char *url, const struct ecw_request *r,
			  void *payload)
{
	struct ecw_client *c = payload;
	int err;

	ecw_response_reset(resp);
	c->stats.requests++;
#ifdef ECW_TESTING
	/* The fake transport answers token requests too; injected faults are
	 * for the storage requests they were aimed at. */
	if (c->send_fn)
		err = c->send_fn(c->send_ctx, resp, url, r);
	else
#endif
		err = transport_send(c, resp, url, r);
	if (c->opts.on_attempt)
		c->opts.on_attempt(c->opts.on_attempt_payload, r->op ? r->op : "other",
				   err == 0 ? (int)resp->status : 0, 1);
	return err;
}

/* The pause before retry attempt + 1: 0, or ECW_ECANCELED (the last error
 * set) when the cancellation cut it short. A client without one sleeps
 * through ecw_clock_sleep_ms, which the unit tests wrap. */
static int back_off(struct ecw_client *c, const struct ecw_request *r, int attempt)
{
	c->stats.retries++;
	if (!ecw_cancel_sleep_ms(c->opts.cancel,
				 ecw_client_retry_delay_ms(&c->opts, attempt, ecw_clock_random_u32())))
		return 0;
	return request_failed(c, r, ECW_ECANCELED, "the worker is stopping (before a retry)");
}

/* Wipes a buffer that held a secret (a SAS in a URL, a signature). */
static void wipe_buf(struct ecw_buf *b)
{
	if (b->ptr)
		explicit_bzero(b->ptr, b->cap);
	ecw_buf_reset(b);
}

/* The URL of r and, for an account key, its Authorization value in auth,
 * from the secret in place (a SAS in the URL, or the key's signature), whose
 * generation goes to *gen: what to tell the account when the service
 * refuses it. A token's Authorization is the caller's. */
static int sign_with_secret(struct ecw_buf *url, struct ecw_buf *auth, uint64_t *gen, struct ecw_client *c,
			    const struct ecw_request *r)
{
	int err;

	wipe_buf(url);
	*gen = ecw_account_secret_hold(c->acct);
	if ((err = ecw_request_url(url, c->acct, r)) == 0 && !c->acct->cred && !c->acct->sas)
		err = ecw_auth_header(auth, c->acct, r);
	ecw_account_secret_release(c->acct);
	return err;
}

int ecw_client_send(struct ecw_response *resp, struct ecw_client *c, struct ecw_request *r)
{
	struct ecw_buf url, auth;
	char date[32];
	uint64_t token_gen = 0, secret_gen = 0;
	bool token_renewed = false, secret_renewed = false;
	int err, attempt;

	ecw_buf_init(&url, 0);
	ecw_buf_init(&auth, 0);
	if ((err = ecw_request_set_header(r, "x-ms-version", api_version(r->svc))) < 0)
		goto done;
	for (attempt = 1;; attempt++) {
		ecw_response_reset(resp);
		if (ecw_cancel_is_set(c->opts.cancel)) {
			err = request_failed(c, r, ECW_ECANCELED, "the worker is stopping");
			goto done;
		}
		/* A fresh date on every attempt: the service rejects requests whose
		 * date is more than 15 minutes off, and a retry may come late. */
		ecw_date_format(date, time(NULL));
		if ((err = ecw_request_set_header(r, "x-ms-date", date)) < 0)
			goto done;
		wipe_buf(&auth);
		if (c->acct->cred) {
			/* A token that cannot be had is this attempt's failure: a
			 * transient one is retried like any other. */
			if ((err = ecw_buf_adds(&auth, "Bearer ")) < 0 ||
			    (err = ecw_token_get(&auth, &token_gen, c->acct->cred, token_exchange, c)) < 0) {
				if (err == ECW_ENOMEM || !ecw_error_is_transient(err) ||
				    attempt >= c->opts.max_tries)
					goto done;
				if ((err = back_off(c, r, attempt)) < 0)
					goto done;
				continue;
			}
		}
		/* Each attempt signs with the secret in place now: a reload may
		 * have replaced the one the last attempt was refused with. */
		if ((err = sign_with_secret(&url, &auth, &secret_gen, c, r)) < 0)
			goto done;
		if (auth.len && (err = ecw_request_set_header(r, "Authorization", auth.ptr)) < 0)
			goto done;
		c->stats.requests++;
		err = send_once(c, resp, url.ptr, r);
		if (c->opts.on_attempt)
			c->opts.on_attempt(c->opts.on_attempt_payload, r->op ? r->op : "other",
					   err == 0 ? (int)resp->status : 0, attempt);
		if (err == 0)
			err = resp->status >= 200 && resp->status < 300 ? 0 : classify(c, r, resp);
		/* A token the service refuses (revoked, or expired early by clock
		 * skew): once per call, forget it and go again with a new one. */
		if (err == ECW_EAUTH && c->acct->cred && !token_renewed &&
		    (resp->status == 401 ||
		     strcmp(ecw_error_last()->service_code, "AuthenticationFailed") == 0 ||
		     strcmp(ecw_error_last()->service_code, "InvalidAuthenticationInfo") == 0) &&
		    ecw_token_refused(c->acct->cred, token_gen)) {
			token_renewed = true;
			attempt--;
			continue;
		}
		/* A key or SAS the service refuses (expired, rotated): once per
		 * call, go again when the account has a newer one (its reload
		 * read a rewritten secret file). */
		if (err == ECW_EAUTH && !c->acct->cred && !secret_renewed &&
		    ecw_account_secret_refused(c->acct, secret_gen)) {
			secret_renewed = true;
			attempt--;
			continue;
		}
		if (err == 0 || !ecw_error_is_transient(err) || attempt >= c->opts.max_tries)
			break;
		if ((err = back_off(c, r, attempt)) < 0)
			goto done;
	}
done:
	wipe_buf(&auth);
	wipe_buf(&url);
	ecw_buf_dispose(&auth);
	ecw_buf_dispose(&url);
	wipe_header(r, "Authorization");
	return err;
}

/* ---- pipelined requests ------------------------------------------------------- */

/* Set, for the whole process, when a server took pipelined requests and
 * then let one go unanswered until the timeout: a server (or something on
 * the way) that does not keep to RFC 9112's pipelining. From then on every
 * request goes alone. */
static atomic_bool pipelining_stopped;

bool ecw_client_pipelining_stopped(void)
{
	return atomic_load(&pipelining_stopped);
}

/* Whether the n requests can go pipelined: more than one, on http.c (not
 * libcurl, not a test's seam), the pipelining not turned off. */
static bool can_pipeline(const struct ecw_client *c, size_t n)
{
#ifdef ECW_TESTING
	if (c->send_fn || c->fault_count > 0)
		return false;
#endif
	return n > 1 && c->http && !c->opts.no_pipelining && !atomic_load(&pipelining_stopped);
}

/* Signs r for one attempt as ecw_client_send does (x-ms-version, x-ms-date,
 * Authorization from the key, the token in bearer or none for a SAS) and
 * puts its URL in url. */
static int sign_for_pipeline(struct ecw_client *c, struct ecw_request *r, struct ecw_buf *url, uint64_t *gen,
			     const char *date, const char *bearer)
{
	struct ecw_buf auth;
	int err;

	ecw_buf_init(&auth, 0);
	if ((err = ecw_request_set_header(r, "x-ms-version", api_version(r->svc))) < 0 ||
	    (err = ecw_request_set_header(r, "x-ms-date", date)) < 0 ||
	    (err = sign_with_secret(url, &auth, gen, c, r)) < 0)
		goto done;
	if (bearer)
		err = ecw_request_set_header(r, "Authorization", bearer);
	else if (auth.len)
		err = ecw_request_set_header(r, "Authorization", auth.ptr);
done:
	wipe_buf(&auth);
	ecw_buf_dispose(&auth);
	return err;
}

/* The answers of one pipelined exchange, each concluded as ecw_client_send
 * would conclude it: a 2xx or a final refusal goes to done; a request
 * without its answer, or with one worth another try (transient, a token
 * refused, a key or SAS refused when the account has a newer one: gens[i]
 * is the generation it was signed with), goes again alone through
 * ecw_client_send (after a pause, for an answer that asked for one). */
static void conclude_pipelined(struct ecw_client *c, struct ecw_request **rs, struct ecw_response *resps,
			       const uint64_t *gens, size_t n, size_t answered, int err, const char *why,
			       ecw_client_done_fn done, void *payload)
{
	for (size_t i = 0; i < n; i++) {
		const char *op = rs[i]->op ? rs[i]->op : "other";
		int e;

		if (i < answered) {
			if (c->opts.on_attempt)
				c->opts.on_attempt(c->opts.on_attempt_payload, op, (int)resps[i].status, 1);
			e = resps[i].status >= 200 && resps[i].status < 300 ? 0
									    : classify(c, rs[i], &resps[i]);
			if (e == 0 || (!ecw_error_is_transient(e) && !(e == ECW_EAUTH && c->acct->cred) &&
				       !(e == ECW_EAUTH && ecw_account_secret_refused(c->acct, gens[i])))) {
				done(payload, i, e);
				continue;
			}
			if (ecw_error_is_transient(e) && back_off(c, rs[i], 1) < 0) {
				done(payload, i, ECW_ECANCELED);
				continue;
			}
		} else {
			if (c->opts.on_attempt)
				c->opts.on_attempt(c->opts.on_attempt_payload, op, 0, 1);
			if (err == ECW_ECANCELED || err == ECW_ENOMEM) {
				done(payload, i, request_failed(c, rs[i], err, why));
				continue;
			}
		}
		ecw_response_reset(&resps[i]);
		done(payload, i, ecw_client_send(&resps[i], c, rs[i]));
	}
}

/* Each request alone, with ecw_client_send's whole policy. */
static void send_each_alone(struct ecw_client *c, struct ecw_request **rs, struct ecw_response *resps,
			    size_t n, ecw_client_done_fn done, void *payload)
{
	for (size_t i = 0; i < n; i++) {
		ecw_response_reset(&resps[i]);
		done(payload, i, ecw_client_send(&resps[i], c, rs[i]));
	}
}

/* At most ECW_HTTP_PIPELINE_MAX requests, pipelined when they can be. */
static void send_pipelined_chunk(struct ecw_client *c, struct ecw_request **rs, struct ecw_response *resps,
				 size_t n, ecw_client_done_fn done, void *payload)
{
	struct ecw_buf urls[ECW_HTTP_PIPELINE_MAX], bearer;
	const char *url_ptrs[ECW_HTTP_PIPELINE_MAX];
	uint64_t gens[ECW_HTTP_PIPELINE_MAX];
	char date[32], why[256] = "";
	size_t answered = 0, signed_n = 0;
	uint64_t token_gen = 0, before;
	int err = 0;

	ecw_buf_init(&bearer, 0);
	if (!can_pipeline(c, n)) {
		send_each_alone(c, rs, resps, n, done, payload);
		return;
	}
	ecw_date_format(date, time(NULL));
	/* A token that cannot be had now: each request goes alone, where
	 * ecw_client_send retries getting it. */
	if (c->acct->cred &&
	    ((err = ecw_buf_adds(&bearer, "Bearer ")) < 0 ||
	     (err = ecw_token_get(&bearer, &token_gen, c->acct->cred, token_exchange, c)) < 0))
		goto alone;
	for (; signed_n < n; signed_n++) {
		ecw_buf_init(&urls[signed_n], 0);
		if ((err = sign_for_pipeline(c, rs[signed_n], &urls[signed_n], &gens[signed_n], date,
					     c->acct->cred ? bearer.ptr : NULL)) < 0) {
			wipe_buf(&urls[signed_n]);
			ecw_buf_dispose(&urls[signed_n]);
			goto alone;
		}
		url_ptrs[signed_n] = urls[signed_n].ptr;
		ecw_response_reset(&resps[signed_n]);
		resps[signed_n].body.max = answer_cap(rs[signed_n]);
	}
	if (c->fresh_connect) {
		ecw_http_close_all(c->http);
		c->fresh_connect = false;
	}
	c->stats.requests += n;
	before = ecw_http_connections(c->http);
	err = ecw_http_send_pipelined(c->http, resps, url_ptrs, (const struct ecw_request *const *)rs, n,
				      &answered, why, sizeof(why));
	c->stats.connections += ecw_http_connections(c->http) - before;
	if (err == ECW_ETIMEOUT && answered > 0)
		atomic_store(&pipelining_stopped, true);
	for (size_t i = 0; i < n; i++) {
		wipe_header(rs[i], "Authorization");
		wipe_buf(&urls[i]);
		ecw_buf_dispose(&urls[i]);
	}
	conclude_pipelined(c, rs, resps, gens, n, answered, err, why, done, payload);
	goto out;
alone:
	for (size_t i = 0; i < signed_n; i++) {
		wipe_header(rs[i], "Authorization");
		wipe_buf(&urls[i]);
		ecw_buf_dispose(&urls[i]);
	}
	ecw_error_clear();
	send_each_alone(c, rs, resps, n, done, payload);
out:
	if (bearer.ptr)
		memset(bearer.ptr, 0, bearer.cap);
	ecw_buf_dispose(&bearer);
}

struct chunk_done {
	ecw_client_done_fn done;
	void *payload;
	size_t base;
};

static void chunk_done(void *payload, size_t i, int err)
{
	struct chunk_done *cd = payload;

	cd->done(cd->payload, cd->base + i, err);
}

void ecw_client_send_pipelined(struct ecw_client *c, struct ecw_request **rs, struct ecw_response *resps,
			       size_t n, ecw_client_done_fn done, void *payload)
{
	for (size_t base = 0, k; base < n; base += k) {
		struct chunk_done cd = {done, payload, base};
		size_t bodies = rs[base]->body_len;

		/* At most ECW_HTTP_PIPELINE_MAX requests and their bodies'
		 * bound in a write; a body over it goes alone. */
		for (k = 1; base + k < n && k < ECW_HTTP_PIPELINE_MAX &&
			    bodies + rs[base + k]->body_len <= ECW_HTTP_PIPELINE_BODY_MAX;
		     k++)
			bodies += rs[base + k]->body_len;
		send_pipelined_chunk(c, rs + base, resps + base, k, chunk_done, &cd);
	}
}
