/* SPDX-License-Identifier: MIT */
/* token.c - Entra ID access tokens for storage (see ecw_token.h).
 *
 * Where tokens come from:
 * - workload identity: the federated token kubelet projects into a file (read
 *   again for every exchange: it is rotated) is the client assertion of a
 *   client-credentials grant at {authority}{tenant}/oauth2/v2.0/token, scope
 *   https://storage.azure.com/.default;
 * - managed identity: GET the IMDS token endpoint with `Metadata: true`
 *   (api-version 2018-02-01), or, where App Service / Container Apps set
 *   IDENTITY_ENDPOINT and IDENTITY_HEADER, that endpoint with
 *   `X-IDENTITY-HEADER` (api-version 2019-08-01); resource
 *   https://storage.azure.com/.
 *
 * The cache: one token per credential, shared by every client of the account.
 * The first client that finds it due for refresh fetches a new one through its
 * own connection while the others go on with the old one if it is still
 * usable, or wait for the fetch when it is not (and then share its result,
 * success or failure, instead of each asking again). A failed refresh keeps a
 * still-usable token and tries again a little later. Times are the monotonic
 * clock's (ecw_clock.h), so tests can move them.
 *
 * Secrets: the token and the assertion live in heap memory wiped before it is
 * freed; error messages carry the endpoint's error code and description (with
 * anything shaped like a JWT cut out), never a request or response body. */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ecw_clock.h"
#include "escape.h"
#include "jsonparse.h"
#include "status.h"
#include "token.h"
#include "url.h"

#define STORAGE_SCOPE "https://storage.azure.com/.default"
#define STORAGE_RESOURCE "https://storage.azure.com/"
#define ASSERTION_TYPE "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#define MAX_ASSERTION_BYTES (64 * 1024)
/* After a failed refresh while the old token is still usable. */
#define RETRY_AFTER_FAILED_REFRESH_MS (10 * 1000)
/* A token younger than this that the service refuses is not worth replacing:
 * a new one would be refused the same way. */
#define FRESH_TOKEN_MS (60 * 1000)

struct ecw_token_credential {
	enum ecw_token_source source;
	char *authority; /* ends with '/' */
	char *tenant_id;
	char *client_id;
	char *token_file;
	char *endpoint;
	char *identity_header; /* a secret of its own (it authorizes token requests) */
	char *mi_client_id;

	pthread_mutex_t mu;
	pthread_cond_t fetched; /* signalled when a fetch ends */
	char *token;            /* NULL until the first fetch succeeds */
	int64_t obtained_ms, refresh_at_ms, usable_until_ms, next_try_ms;
	uint64_t gen;     /* counts tokens obtained */
	uint64_t fetches; /* counts fetches ended, failed or not */
	bool fetching;
	int last_err; /* of the last fetch; 0 when it succeeded */
	char last_msg[sizeof(((struct ecw_error *)0)->message)];
};

const char *ecw_token_source_name(enum ecw_token_source src)
{
	return src == ECW_TOKEN_WORKLOAD_IDENTITY ? "workload-identity" : "managed-identity";
}

enum ecw_token_source ecw_token_credential_source(const struct ecw_token_credential *cred)
{
	return cred->source;
}

static void wipe_free(char *s)
{
	if (s) {
		memset(s, 0, strlen(s));
		free(s);
	}
}

void ecw_token_credential_free(struct ecw_token_credential *cred)
{
	if (!cred)
		return;
	free(cred->authority);
	free(cred->tenant_id);
	free(cred->client_id);
	free(cred->token_file);
	free(cred->endpoint);
	wipe_free(cred->identity_header);
	free(cred->mi_client_id);
	wipe_free(cred->token);
	pthread_mutex_destroy(&cred->mu);
	pthread_cond_destroy(&cred->fetched);
	free(cred);
}

static bool is_http_url(const char *s)
{
	return strncmp(s, "https://", 8) == 0 || strncmp(s, "http://", 7) == 0;
}

/* Copies s (NULL stays NULL); false when out of memory. */
static bool dup_opt(char **out, const char *s)
{
	*out = NULL;
	return !s || (*out = strdup(s)) != NULL;
}

int ecw_token_credential_new(struct ecw_token_credential **out, const struct ecw_token_options *o)
{
	struct ecw_token_credential *cred;
	const char *authority =
		o->authority_host && *o->authority_host ? o->authority_host : ECW_TOKEN_DEFAULT_AUTHORITY;
	const char *endpoint = o->endpoint && *o->endpoint ? o->endpoint : ECW_TOKEN_DEFAULT_IMDS;
	size_t alen = strlen(authority);
	int err;

	*out = NULL;
	if (o->source == ECW_TOKEN_WORKLOAD_IDENTITY) {
		if (!o->client_id || !*o->client_id)
			return ecw_error_set(ECW_EINVALID,
					     "workload identity: no client id (AZURE_CLIENT_ID)");
		if (!o->tenant_id || !*o->tenant_id)
			return ecw_error_set(ECW_EINVALID,
					     "workload identity: no tenant id (AZURE_TENANT_ID)");
		if (!o->federated_token_file || !*o->federated_token_file)
			return ecw_error_set(
				ECW_EINVALID,
				"workload identity: no federated token file (AZURE_FEDERATED_TOKEN_FILE)");
		/* The tenant goes into the URL path as it is. */
		for (const char *p = o->tenant_id; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
				return ecw_error_set(
					ECW_EINVALID,
					"workload identity: the tenant id (AZURE_TENANT_ID) must be a GUID or a domain name");
		/* The federated assertion goes to it: https, or http to a loopback
		 * host (a local token server, as the tests run). */
		if (!(strncmp(authority, "https://", 8) == 0 ||
		      (strncmp(authority, "http://", 7) == 0 && ecw_url_is_loopback(authority, alen))))
			return ecw_error_set(
				ECW_EINVALID,
				"workload identity: AZURE_AUTHORITY_HOST must be an https:// URL (the federated "
				"token is sent to it; http only to a loopback host)");
	} else if (!is_http_url(endpoint) || strchr(endpoint, '?') || strchr(endpoint, '#')) {
		return ecw_error_set(
			ECW_EINVALID,
			"managed identity: the token endpoint must be an http(s) URL without a query");
	}
	if (!(cred = calloc(1, sizeof(*cred))))
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	cred->source = o->source;
	pthread_mutex_init(&cred->mu, NULL);
	pthread_cond_init(&cred->fetched, NULL);
	if (!(cred->authority = malloc(alen + 2))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto fail;
	}
	memcpy(cred->authority, authority, alen + 1);
	if (alen == 0 || authority[alen - 1] != '/')
		memcpy(cred->authority + alen, "/", 2);
	if (!dup_opt(&cred->tenant_id, o->tenant_id) || !dup_opt(&cred->client_id, o->client_id) ||
	    !dup_opt(&cred->token_file, o->federated_token_file) || !dup_opt(&cred->endpoint, endpoint) ||
	    !dup_opt(&cred->identity_header, o->identity_header) ||
	    !dup_opt(&cred->mi_client_id, o->mi_client_id && *o->mi_client_id ? o->mi_client_id : NULL)) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto fail;
	}
	*out = cred;
	return 0;
fail:
	ecw_token_credential_free(cred);
	return err;
}

/* ---- timing --------------------------------------------------------------- */

int64_t ecw_token_refresh_after_ms(int64_t lifetime_ms, int64_t refresh_in_ms)
{
	int64_t before_expiry = lifetime_ms - 5 * 60 * 1000, half = lifetime_ms / 2;
	int64_t at = before_expiry > half ? before_expiry : half;

	if (refresh_in_ms > 0 && refresh_in_ms < at)
		at = refresh_in_ms;
	return at;
}

int64_t ecw_token_usable_ms(int64_t lifetime_ms)
{
	int64_t margin = lifetime_ms / 4;

	if (margin > 60 * 1000)
		margin = 60 * 1000;
	return lifetime_ms - margin;
}

/* ---- answers ---------------------------------------------------------------- */

/* Past this many seconds (about 3,000 years) a time is not one: a lifetime
 * this long in ms would overflow, and a double beyond int64 (1e400 reads as
 * infinity) cannot even be converted (fuzz_token_response found both). */
#define SECONDS_MAX 100000000000LL

/* A JSON number, or a string of digits (IMDS and App Service send strings),
 * within SECONDS_MAX either way of 0. */
static bool json_seconds(int64_t *out, json_object *v)
{
	const char *s;
	char *end;
	long long n;

	if (!v)
		return false;
	if (json_object_is_type(v, json_type_int)) {
		n = json_object_get_int64(v);
	} else if (json_object_is_type(v, json_type_double)) {
		double d = json_object_get_double(v);
		if (!(d >= (double)-SECONDS_MAX && d <= (double)SECONDS_MAX)) /* NaN too */
			return false;
		n = (long long)d;
	} else {
		if (!json_object_is_type(v, json_type_string) || !*(s = json_object_get_string(v)))
			return false;
		errno = 0;
		n = strtoll(s, &end, 10);
		if (*end || errno || s[0] == '-' || s[0] == '+' || s[0] == ' ')
			return false;
	}
	if (n > SECONDS_MAX || n < -SECONDS_MAX)
		return false;
	*out = n;
	return true;
}

int ecw_token_parse_response(char **token_out, int64_t *lifetime_s, int64_t *refresh_in_s, const char *body,
			     size_t len, int64_t now_unix)
{
	json_object *root = ecw_jsonparse_value(body, len), *v;
	const char *tok;
	int64_t n = 0;
	int err = 0;

	*token_out = NULL;
	*lifetime_s = *refresh_in_s = 0;
	if (!root || !json_object_is_type(root, json_type_object)) {
		err = ecw_error_set(ECW_ERROR, "the token endpoint's answer is not a JSON object");
		goto done;
	}
	if (!json_object_object_get_ex(root, "access_token", &v) ||
	    !json_object_is_type(v, json_type_string) || !*(tok = json_object_get_string(v))) {
		err = ecw_error_set(ECW_ERROR, "the token endpoint's answer has no access_token");
		goto done;
	}
	for (const char *p = tok; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f) {
			err = ecw_error_set(ECW_ERROR, "the token endpoint's access_token is not a token");
			goto done;
		}
	if (json_object_object_get_ex(root, "expires_in", &v)) {
		if (!json_seconds(&n, v)) {
			err = ecw_error_set(ECW_ERROR,
					    "the token endpoint's expires_in is not a number of seconds");
			goto done;
		}
	} else if (json_object_object_get_ex(root, "expires_on", &v)) {
		if (!json_seconds(&n, v)) {
			err = ecw_error_set(ECW_ERROR,
					    "the token endpoint's expires_on is not a time in seconds");
			goto done;
		}
		n -= now_unix;
	} else {
		err = ecw_error_set(ECW_ERROR,
				    "the token endpoint's answer has neither expires_in nor expires_on");
		goto done;
	}
	if (n <= 0) {
		err = ecw_error_set(ECW_ERROR,
				    "the token endpoint returned a token that has already expired");
		goto done;
	}
	*lifetime_s = n;
	if (json_object_object_get_ex(root, "refresh_in", &v) && json_seconds(&n, v) && n > 0)
		*refresh_in_s = n;
	if (!(*token_out = strdup(tok)))
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
done:
	json_object_put(root);
	return err;
}

/* Appends the n bytes at s to out, with everything shaped like a JWT ("eyJ"
 * and on through base64url and dots) written as "[JWT]", in case an endpoint
 * quotes an assertion; up to cap - 1 bytes in all. The cut is not done in
 * place: "[JWT]" is longer than a run such as "eyJx", and doing it in place
 * wrote past a full buffer (found by fuzz_token_response). */
static void add_cutting_jwts(char *out, size_t cap, const char *s, size_t n)
{
	size_t w = strlen(out);
	const char *end = s + n;

	while (s < end && w + 1 < cap) {
		if (end - s >= 3 && memcmp(s, "eyJ", 3) == 0) {
			while (s < end &&
			       ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
				(*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.' || *s == '='))
				s++;
			for (const char *r = "[JWT]"; *r && w + 1 < cap; r++)
				out[w++] = *r;
			continue;
		}
		out[w++] = *s++;
	}
	out[w] = '\0';
}

void ecw_token_error_summary(char *out, size_t cap, const char *body, size_t len)
{
	json_object *root = ecw_jsonparse_value(body, len), *v;
	const char *code = "", *desc = "";

	out[0] = '\0';
	if (!root || !json_object_is_type(root, json_type_object))
		goto done;
	if (json_object_object_get_ex(root, "error", &v) && json_object_is_type(v, json_type_string))
		code = json_object_get_string(v);
	if (json_object_object_get_ex(root, "error_description", &v) &&
	    json_object_is_type(v, json_type_string))
		desc = json_object_get_string(v);
	else if (json_object_object_get_ex(root, "message", &v) && json_object_is_type(v, json_type_string))
		desc = json_object_get_string(v);
	/* Entra appends "Trace ID: ..." lines: the first line says it. The
	 * code is cut there too (fuzz_token_response found one with a line
	 * break passing whole into the error message). */
	add_cutting_jwts(out, cap, code, strcspn(code, "\r\n"));
	if (*code && *desc)
		add_cutting_jwts(out, cap, ": ", 2);
	add_cutting_jwts(out, cap, desc, strcspn(desc, "\r\n"));
done:
	json_object_put(root);
}

/* ---- fetching ---------------------------------------------------------------- */

/* Reads the federated token; its content is a secret. */
static int read_assertion(struct ecw_buf *out, const char *path)
{
	char chunk[4096];
	int fd, err = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return ecw_error_set(ECW_EAUTH,
				     "workload identity: cannot read the federated token file %s: %s", path,
				     strerror(errno));
	for (;;) {
		ssize_t got = read(fd, chunk, sizeof(chunk));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			err = ecw_error_set(ECW_EAUTH,
					    "workload identity: cannot read the federated token file %s: %s",
					    path, strerror(errno));
			break;
		}
		if (got == 0)
			break;
		if (ecw_buf_add(out, chunk, (size_t)got) < 0) {
			err = ecw_error_set(ECW_EAUTH,
					    "workload identity: the federated token file %s is over %d bytes",
					    path, MAX_ASSERTION_BYTES);
			break;
		}
	}
	memset(chunk, 0, sizeof(chunk));
	close(fd);
	/* A trailing newline is not part of the token. */
	while (err == 0 && out->len && strchr(" \t\r\n", out->ptr[out->len - 1]))
		out->ptr[--out->len] = '\0';
	if (err == 0 && out->len == 0)
		err = ecw_error_set(ECW_EAUTH, "workload identity: the federated token file %s is empty",
				    path);
	return err;
}

static int add_form(struct ecw_buf *b, const char *name, const char *value, size_t n)
{
	int err;

	if ((b->len && (err = ecw_buf_addc(b, '&')) < 0) || (err = ecw_buf_adds(b, name)) < 0 ||
	    (err = ecw_buf_addc(b, '=')) < 0)
		return err;
	return ecw_escape_pct(b, value, n);
}

static int add_query(struct ecw_buf *url, const char *name, const char *value)
{
	int err;

	if ((err = ecw_buf_addc(url, strchr(url->ptr, '?') ? '&' : '?')) < 0 ||
	    (err = ecw_buf_adds(url, name)) < 0 || (err = ecw_buf_addc(url, '=')) < 0)
		return err;
	return ecw_escape_pct(url, value, strlen(value));
}

/* Makes the token request: the URL (absolute), the label for messages, the
 * body (a secret for workload identity) and r's method and headers. */
static int build_request(struct ecw_request *r, struct ecw_buf *url, struct ecw_buf *label,
			 struct ecw_buf *body, const struct ecw_token_credential *cred)
{
	struct ecw_buf assertion;
	int err;

	ecw_buf_init(&assertion, MAX_ASSERTION_BYTES);
	if (cred->source == ECW_TOKEN_WORKLOAD_IDENTITY) {
		r->method = "POST";
		r->content_type = "application/x-www-form-urlencoded";
		if ((err = ecw_buf_printf(url, "%s%s/oauth2/v2.0/token", cred->authority, cred->tenant_id)) <
			    0 ||
		    (err = ecw_buf_printf(label, "workload identity: POST %s", url->ptr)) < 0 ||
		    (err = read_assertion(&assertion, cred->token_file)) < 0 ||
		    (err = add_form(body, "client_id", cred->client_id, strlen(cred->client_id))) < 0 ||
		    (err = add_form(body, "scope", STORAGE_SCOPE, strlen(STORAGE_SCOPE))) < 0 ||
		    (err = add_form(body, "client_assertion_type", ASSERTION_TYPE, strlen(ASSERTION_TYPE))) <
			    0 ||
		    (err = add_form(body, "client_assertion", assertion.ptr, assertion.len)) < 0 ||
		    (err = add_form(body, "grant_type", "client_credentials", 18)) < 0)
			goto done;
		r->body = body->ptr;
		r->body_len = body->len;
	} else {
		r->method = "GET";
		if ((err = ecw_buf_adds(url, cred->endpoint)) < 0 ||
		    (err = ecw_buf_printf(label, "managed identity: GET %s", url->ptr)) < 0 ||
		    (err = add_query(url, "api-version",
				     cred->identity_header ? "2019-08-01" : "2018-02-01")) < 0 ||
		    (err = add_query(url, "resource", STORAGE_RESOURCE)) < 0 ||
		    (cred->mi_client_id && (err = add_query(url, "client_id", cred->mi_client_id)) < 0) ||
		    (err = cred->identity_header
				   ? ecw_request_set_header(r, "X-IDENTITY-HEADER", cred->identity_header)
				   : ecw_request_set_header(r, "Metadata", "true")) < 0)
			goto done;
	}
	if ((err = ecw_request_set_header(r, "Accept", "application/json")) < 0)
		goto done;
	r->label = label->ptr;
	r->op = "token.get";
done:
	if (assertion.ptr)
		memset(assertion.ptr, 0, assertion.cap);
	ecw_buf_dispose(&assertion);
	return err;
}

/* What a token endpoint's status means: a refusal is a configuration problem
 * (ECW_EAUTH), throttling and server trouble are transient. IMDS answers 404
 * and 410 while it is updating or restarting. */
static int status_to_err(const struct ecw_token_credential *cred, long status)
{
	int err = ecw_status_to_err(status, NULL);

	if (ecw_error_is_transient(err))
		return err;
	if (cred->source == ECW_TOKEN_MANAGED_IDENTITY && (status == 404 || status == 410))
		return ECW_ETRANSIENT;
	if (status >= 400 && status < 500)
		return ECW_EAUTH;
	return ECW_ERROR;
}

static int fetch(char **token, int64_t *lifetime_s, int64_t *refresh_in_s, struct ecw_token_credential *cred,
		 ecw_token_exchange_fn exchange, void *payload)
{
	struct ecw_request r;
	struct ecw_response resp;
	struct ecw_buf url, label, body;
	char summary[256];
	const char *what =
		cred->source == ECW_TOKEN_WORKLOAD_IDENTITY ? "workload identity" : "managed identity";
	int err;

	ecw_request_init(&r, ECW_SVC_QUEUE, "GET");
	ecw_response_init(&resp);
	ecw_buf_init(&url, 0);
	ecw_buf_init(&label, 0);
	ecw_buf_init(&body, 2 * MAX_ASSERTION_BYTES);
	if ((err = build_request(&r, &url, &label, &body, cred)) < 0 ||
	    (err = exchange(&resp, url.ptr, &r, payload)) < 0)
		goto done;
	if (resp.status != 200) {
		const char *reqid = ecw_response_header(&resp, "x-ms-request-id");
		err = status_to_err(cred, resp.status);
		ecw_token_error_summary(summary, sizeof(summary), ecw_buf_cstr(&resp.body), resp.body.len);
		ecw_error_set_http(
			err, (int)resp.status, "", reqid ? reqid : "", "%s answered %ld%s%s%s", label.ptr,
			resp.status, *summary ? " " : "", summary,
			err == ECW_EAUTH
				? (cred->source == ECW_TOKEN_WORKLOAD_IDENTITY
					   ? " (check AZURE_CLIENT_ID, AZURE_TENANT_ID and the identity's federated credential)"
					   : " (check that the identity is assigned and storage.managed_identity_client_id)")
				: "");
		goto done;
	}
	if ((err = ecw_token_parse_response(token, lifetime_s, refresh_in_s, resp.body.ptr, resp.body.len,
					    (int64_t)time(NULL))) < 0)
		ecw_error_set(err, "%s: %s", what, ecw_error_last()->message);
done:
	if (resp.body.ptr)
		memset(resp.body.ptr, 0, resp.body.cap);
	if (body.ptr)
		memset(body.ptr, 0, body.cap);
	ecw_response_dispose(&resp);
	ecw_request_dispose(&r);
	ecw_buf_dispose(&body);
	ecw_buf_dispose(&label);
	ecw_buf_dispose(&url);
	return err;
}

/* ---- the cache ----------------------------------------------------------------- */

/* Caller holds cred->mu. */
static int copy_token(struct ecw_buf *out, uint64_t *gen_out, const struct ecw_token_credential *cred)
{
	*gen_out = cred->gen;
	return ecw_buf_adds(out, cred->token);
}

static bool usable(const struct ecw_token_credential *cred, int64_t now)
{
	return cred->token && now < cred->usable_until_ms;
}

int ecw_token_get(struct ecw_buf *out, uint64_t *gen_out, struct ecw_token_credential *cred,
		  ecw_token_exchange_fn exchange, void *payload)
{
	char *token = NULL;
	int64_t lifetime_s = 0, refresh_in_s = 0, t0, now;
	int err;

	pthread_mutex_lock(&cred->mu);
	for (;;) {
		now = ecw_clock_now_ms();
		if (cred->token && now < cred->refresh_at_ms)
			goto use_cached;
		/* Due for refresh, but someone is at it or it failed a moment ago. */
		if (usable(cred, now) && (cred->fetching || now < cred->next_try_ms))
			goto use_cached;
		if (!cred->fetching)
			break;
		uint64_t seen = cred->fetches;
		while (cred->fetching)
			pthread_cond_wait(&cred->fetched, &cred->mu);
		/* The fetch waited for failed: its error is ours too. */
		if (cred->fetches != seen && cred->last_err < 0 && !usable(cred, ecw_clock_now_ms())) {
			err = ecw_error_set(cred->last_err, "%s", cred->last_msg);
			pthread_mutex_unlock(&cred->mu);
			return err;
		}
	}
	cred->fetching = true;
	pthread_mutex_unlock(&cred->mu);

	t0 = ecw_clock_now_ms(); /* the lifetime counts from the request, not the answer */
	err = fetch(&token, &lifetime_s, &refresh_in_s, cred, exchange, payload);

	pthread_mutex_lock(&cred->mu);
	cred->fetching = false;
	cred->fetches++;
	now = ecw_clock_now_ms();
	if (err == 0) {
		wipe_free(cred->token);
		cred->token = token;
		cred->gen++;
		cred->obtained_ms = t0;
		cred->refresh_at_ms = t0 + ecw_token_refresh_after_ms(lifetime_s * 1000, refresh_in_s * 1000);
		cred->usable_until_ms = t0 + ecw_token_usable_ms(lifetime_s * 1000);
		cred->next_try_ms = 0;
		cred->last_err = 0;
	} else {
		int64_t wait = (cred->usable_until_ms - now) / 2;
		cred->last_err = err;
		snprintf(cred->last_msg, sizeof(cred->last_msg), "%s", ecw_error_last()->message);
		cred->next_try_ms =
			now + (wait < RETRY_AFTER_FAILED_REFRESH_MS ? wait : RETRY_AFTER_FAILED_REFRESH_MS);
	}
	pthread_cond_broadcast(&cred->fetched);
	if (err < 0 && !usable(cred, now)) {
		pthread_mutex_unlock(&cred->mu);
		return err;
	}
use_cached:
	err = copy_token(out, gen_out, cred);
	pthread_mutex_unlock(&cred->mu);
	return err;
}

bool ecw_token_refused(struct ecw_token_credential *cred, uint64_t gen)
{
	bool again;
	int64_t now = ecw_clock_now_ms();

	pthread_mutex_lock(&cred->mu);
	if (cred->gen != gen) {
		again = cred->token != NULL; /* a newer one is here already */
	} else {
		again = now - cred->obtained_ms >= FRESH_TOKEN_MS;
		if (again)
			cred->refresh_at_ms = cred->usable_until_ms = cred->next_try_ms = now;
	}
	pthread_mutex_unlock(&cred->mu);
	return again;
}
