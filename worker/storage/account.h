/* account.h - what an account holds (account.c parses it from a connection
 * string, see ecw_storage.h): the fields the signer, the request's URL and
 * the client read. The account owns every field, the token credential too,
 * and ecw_account_free frees them all; an account is read-only once made and
 * shared between threads. */
#ifndef ECW_STORAGE_ACCOUNT_H
#define ECW_STORAGE_ACCOUNT_H

#include <stddef.h>

#include "ecw_storage.h"
#include "ecw_token.h"

struct ecw_account {
	char *name;         /* "" when only a SAS was given */
	unsigned char *key; /* decoded AccountKey; NULL when none */
	size_t key_len;
	char *sas;                         /* token without a leading '?'; NULL when none */
	struct ecw_token_credential *cred; /* Entra ID tokens; NULL when none (owned) */
	char *endpoint[2];                 /* by enum ecw_service; no trailing '/' */
	const char *endpoint_path[2];      /* path part of endpoint[i] ("/devstoreaccount1" or "") */
};

#endif
