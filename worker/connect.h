/* SPDX-License-Identifier: MIT */
/* connect.h - from the configuration's storage section to an account (the
 * endpoints and the credential) and the client options every command uses.
 * Commands call these instead of parsing the connection string themselves,
 * so how the worker authenticates is decided in one place. */
#ifndef ECW_CONNECT_H
#define ECW_CONNECT_H

#include "ecw_config.h"
#include "ecw_storage.h"

/* At most one reading of a rotated secret's file per this many ms. */
#define ECW_CONNECT_RELOAD_INTERVAL_MS 10000

/* The account described by cfg->storage: its endpoints and its credential
 * (a key, a SAS, or an Entra ID token credential made from the environment,
 * where a missing variable is an error naming it). When the key or SAS came
 * from a secret file (cfg->storage.connection_string_source), the account
 * reads the file again when the service refuses the secret, at most once per
 * ECW_CONNECT_RELOAD_INTERVAL_MS, and takes a changed one (a
 * `credentials_reloaded` line says so). Free with ecw_account_free. */
int ecw_connect_account(struct ecw_account **out, const struct ecw_config *cfg) ECW_MUST_USE;

/* Fills opts with the defaults plus what cfg->storage sets (ca_file, which
 * points into cfg: cfg must outlive the clients). */
void ecw_connect_client_options(struct ecw_client_options *opts, const struct ecw_config *cfg);

/* Both at once, for one-shot commands: an account and one client on it.
 * On failure both are NULL and the error is set. */
int ecw_connect(struct ecw_account **acct_out, struct ecw_client **client_out,
		const struct ecw_config *cfg) ECW_MUST_USE;

/* Registers the secrets of cfg->storage's connection string (the account
 * key, the SAS token) with the log, which then redacts them in every line. */
void ecw_connect_register_secrets(const struct ecw_config *cfg);

#endif
