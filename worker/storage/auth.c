/* SPDX-License-Identifier: MIT */
/* auth.c - Shared Key signing for the Queue, Table and Blob services, and
 * HMAC. The services sign different strings: Queue and Blob the full layout
 * with the standard headers, every x-ms-* header and every query parameter;
 * Table only VERB, Content-MD5, Content-Type, x-ms-date and the resource
 * (+ ?comp=). */
#include <ctype.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth.h"
#include "ecw_codec.h"

/* HMAC() fetches the algorithm from OpenSSL's provider store on every call,
 * which cost as much as the rest of signing a request. Each thread instead
 * keeps one HMAC-SHA256 context with the key it last used: a signature with
 * the same key (every request of a worker) only re-initialises it. The key
 * copy is wiped when the thread ends. */
struct hmac_cache {
	EVP_MAC_CTX *ctx;
	size_t key_len;
	unsigned char key[128];
};

static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;
static pthread_key_t hmac_tls;
static EVP_MAC *hmac_alg; /* fetched once, kept for the life of the process */
static bool hmac_tls_ok;

static void hmac_cache_free(void *p)
{
	struct hmac_cache *h = p;

	EVP_MAC_CTX_free(h->ctx);
	OPENSSL_cleanse(h, sizeof(*h));
	free(h);
}

static void hmac_init_once(void)
{
	hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
	hmac_tls_ok = hmac_alg && pthread_key_create(&hmac_tls, hmac_cache_free) == 0;
}

/* This thread's context, initialised with key; NULL when there is none to be
 * had (the caller then uses HMAC()). */
static EVP_MAC_CTX *hmac_ctx(const unsigned char *key, size_t key_len)
{
	OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
			       OSSL_PARAM_construct_end()};
	struct hmac_cache *h;

	pthread_once(&hmac_once, hmac_init_once);
	if (!hmac_tls_ok || key_len == 0 || key_len > sizeof(h->key))
		return NULL;
	if (!(h = pthread_getspecific(hmac_tls))) {
		if (!(h = calloc(1, sizeof(*h))))
			return NULL;
		if (!(h->ctx = EVP_MAC_CTX_new(hmac_alg)) || pthread_setspecific(hmac_tls, h) != 0) {
			hmac_cache_free(h);
			return NULL;
		}
	}
	if (h->key_len == key_len && CRYPTO_memcmp(h->key, key, key_len) == 0)
		return EVP_MAC_init(h->ctx, NULL, 0, NULL) ? h->ctx : NULL;
	h->key_len = 0;
	if (!EVP_MAC_init(h->ctx, key, key_len, params))
		return NULL;
	memcpy(h->key, key, key_len);
	h->key_len = key_len;
	return h->ctx;
}

int ecw_auth_hmac_sha256_base64(struct ecw_buf *out, const unsigned char *key, size_t key_len,
				const char *msg, size_t msg_len)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	size_t n = 0;
	EVP_MAC_CTX *ctx = hmac_ctx(key, key_len);

	if (ctx) {
		if (!EVP_MAC_update(ctx, (const unsigned char *)msg, msg_len) ||
		    !EVP_MAC_final(ctx, mac, &n, sizeof(mac)))
			return ecw_error_set(ECW_ERROR, "HMAC-SHA256 failed");
		mac_len = (unsigned int)n;
	} else if (!HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, msg_len, mac,
			 &mac_len)) {
		return ecw_error_set(ECW_ERROR, "HMAC-SHA256 failed");
	}
	return ecw_base64_encode(out, mac, mac_len);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(((const struct ecw_kv *)a)->name, ((const struct ecw_kv *)b)->name);
}

/* The pairs of src whose name starts with prefix (all when NULL) into dst,
 * each name lowercased, sorted by name. The lowercased names are kept in
 * names (one allocation, not one per name), so dst is good until names
 * is disposed of or grows. Returns how many, or < 0. */
static int sorted_lower(struct ecw_kv *dst, const struct ecw_kv *src, size_t n, const char *prefix,
			struct ecw_buf *names)
{
	size_t k = 0, at[ECW_REQ_MAX_HEADERS > ECW_REQ_MAX_QUERY ? ECW_REQ_MAX_HEADERS : ECW_REQ_MAX_QUERY];
	size_t plen = prefix ? strlen(prefix) : 0;

	for (size_t i = 0; i < n && k < sizeof(at) / sizeof(at[0]); i++) {
		if (prefix && strncasecmp(src[i].name, prefix, plen) != 0)
			continue;
		at[k] = names->len;
		if (ecw_buf_add(names, src[i].name, strlen(src[i].name) + 1) < 0)
			return -1;
		dst[k++].value = src[i].value;
	}
	for (size_t i = 0; i < k; i++) {
		dst[i].name = names->ptr + at[i];
		for (char *p = dst[i].name; *p; p++)
			*p = (char)tolower((unsigned char)*p);
	}
	qsort(dst, k, sizeof(*dst), cmp_names);
	return (int)k;
}

static const char *hdr(const struct ecw_request *r, const char *name)
{
	const char *v = ecw_request_header(r, name);
	return v ? v : "";
}

static int canonical_resource(struct ecw_buf *out, const struct ecw_account *a, const struct ecw_request *r)
{
	/* Path-style (emulator) URLs carry the account in the endpoint path, so
	 * the account name appears twice: /devstoreaccount1/devstoreaccount1/q. */
	return ecw_buf_cat(out, "/", a->name, a->endpoint_path[r->svc], ecw_buf_cstr(&r->path), NULL);
}

/* The Queue and Blob layout. */
static int full_sts(struct ecw_buf *out, const struct ecw_account *a, const struct ecw_request *r)
{
	struct ecw_kv hs[ECW_REQ_MAX_HEADERS], qs[ECW_REQ_MAX_QUERY];
	struct ecw_buf hnames, qnames;
	int nh = 0, nq = 0, err = ECW_ENOMEM;
	char clen[24] = "";

	if (r->body_len)
		snprintf(clen, sizeof(clen), "%zu", r->body_len);
	ecw_buf_init(&hnames, 64 * 1024);
	ecw_buf_init(&qnames, 64 * 1024);
	nh = sorted_lower(hs, r->headers, r->nheaders, "x-ms-", &hnames);
	nq = sorted_lower(qs, r->query, r->nquery, NULL, &qnames);
	if (nh < 0 || nq < 0)
		goto done;
	/* VERB, Content-Encoding, Content-Language, Content-Length (empty when
	 * 0), Content-MD5, Content-Type, Date, If-Modified-Since, If-Match,
	 * If-None-Match, If-Unmodified-Since, Range. ecworker never sends the
	 * encoding or language (Azurite signs the two in the other order), and
	 * never Date (x-ms-date stands for it). */
	if ((err = ecw_buf_cat(out, r->method, "\n\n\n", clen, "\n", hdr(r, "Content-MD5"), "\n",
			       r->content_type ? r->content_type : "", "\n\n", hdr(r, "If-Modified-Since"),
			       "\n", hdr(r, "If-Match"), "\n", hdr(r, "If-None-Match"), "\n",
			       hdr(r, "If-Unmodified-Since"), "\n", hdr(r, "Range"), "\n", NULL)) < 0)
		goto done;
	for (int i = 0; i < nh; i++)
		if ((err = ecw_buf_cat(out, hs[i].name, ":", hs[i].value, "\n", NULL)) < 0)
			goto done;
	if ((err = canonical_resource(out, a, r)) < 0)
		goto done;
	for (int i = 0; i < nq; i++)
		if ((err = ecw_buf_cat(out, "\n", qs[i].name, ":", qs[i].value, NULL)) < 0)
			goto done;
	err = 0;
done:
	ecw_buf_dispose(&hnames);
	ecw_buf_dispose(&qnames);
	return err;
}

static int table_sts(struct ecw_buf *out, const struct ecw_account *a, const struct ecw_request *r)
{
	int err;

	if ((err = ecw_buf_cat(out, r->method, "\n\n", r->content_type ? r->content_type : "", "\n",
			       hdr(r, "x-ms-date"), "\n", NULL)) < 0 ||
	    (err = canonical_resource(out, a, r)) < 0)
		return err;
	for (size_t i = 0; i < r->nquery; i++)
		if (strcasecmp(r->query[i].name, "comp") == 0)
			return ecw_buf_cat(out, "?comp=", r->query[i].value, NULL);
	return 0;
}

int ecw_auth_string_to_sign(struct ecw_buf *out, const struct ecw_account *a, const struct ecw_request *r)
{
	return r->svc == ECW_SVC_TABLE ? table_sts(out, a, r) : full_sts(out, a, r);
}

int ecw_auth_header(struct ecw_buf *out, const struct ecw_account *a, const struct ecw_request *r)
{
	struct ecw_buf sts;
	int err;

	if (!a->key)
		return ecw_error_set(ECW_EAUTH, "no account key to sign with");
	ecw_buf_init(&sts, 0);
	if ((err = ecw_auth_string_to_sign(&sts, a, r)) < 0 ||
	    (err = ecw_buf_cat(out, "SharedKey ", a->name, ":", NULL)) < 0 ||
	    (err = ecw_auth_hmac_sha256_base64(out, a->key, a->key_len, sts.ptr, sts.len)) < 0)
		goto done;
done:
	ecw_buf_dispose(&sts);
	return err;
}
