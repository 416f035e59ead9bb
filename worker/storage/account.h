/* SPDX-License-Identifier: MIT */
/* account.h - what an account holds (account.c parses it from a connection
 * string, see ecw_storage.h): the fields the signer, the request's URL and
 * the client read. The account owns every field, the token credential too,
 * and ecw_account_free frees them all. An account is shared between threads
 * and read-only once made, but for its secret (key, key_len, sas, gen): a
 * reload may replace it (ecw_account_update_secret), under secret_lock, so
 * whoever reads those fields of a shared account holds it
 * (ecw_account_secret_hold) meanwhile. */
#ifndef ECW_STORAGE_ACCOUNT_H
#define ECW_STORAGE_ACCOUNT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ecw_storage.h"
#include "ecw_token.h"

#define ECW_SVC_COUNT 3 /* the services of enum ecw_service */

struct ecw_account {
	char *name;         /* "" when only a SAS was given */
	unsigned char *key; /* decoded AccountKey; NULL when none */
	size_t key_len;
	char *sas;                         /* token without a leading '?'; NULL when none */
	uint64_t gen;                      /* counts the secrets the account has held */
	struct ecw_token_credential *cred; /* Entra ID tokens; NULL when none (owned) */
	char *endpoint[ECW_SVC_COUNT];     /* by enum ecw_service; no trailing '/'; the blob's may be NULL */
	const char *endpoint_path[ECW_SVC_COUNT]; /* path part of endpoint[i] ("/devstoreaccount1" or "") */
	const char *blob_none;                    /* why endpoint[ECW_SVC_BLOB] is NULL (static text) */
	/* The one mutable part of a shared account: readers of the secret
	 * take it shared, a new secret goes in with it held exclusively. */
	pthread_rwlock_t secret_lock;
	/* The reload (ecw_account_set_reload): one caller at a time, under
	 * reload_mu, at most once per reload_interval_ms. */
	ecw_account_reload_fn reload;
	void *reload_payload;
	void (*reload_payload_free)(void *payload);
	int64_t reload_interval_ms;
	pthread_mutex_t reload_mu;
	int64_t reloaded_at_ms; /* when reload was last asked (ecw_clock_now_ms) */
	bool reload_asked;      /* ... once at least */
};

/* Takes the secret's lock (shared) for reading key, key_len and sas, and
 * returns the secret's generation, to hand to ecw_account_secret_refused
 * when the service refuses it. Release it soon: a reload waits for it. */
uint64_t ecw_account_secret_hold(const struct ecw_account *a);
void ecw_account_secret_release(const struct ecw_account *a);
/* The service refused (401/403) a request signed with the secret of
 * generation gen. True when sending it again may help: a newer secret is in
 * place already, or the account's reload put one there just now. The reload
 * is asked only for the current generation, by one thread at a time, and at
 * most once per reload interval (false meanwhile); never without one. */
bool ecw_account_secret_refused(const struct ecw_account *a, uint64_t gen);

#endif
