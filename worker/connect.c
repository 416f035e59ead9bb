/* SPDX-License-Identifier: MIT */
/* connect.c - accounts and clients from the configuration (see connect.h).
 *
 * storage.auth: key reads the connection string (AccountKey or SAS). The
 * identity modes take the endpoints from storage.account or an endpoints-only
 * connection string, and a token credential from the environment the
 * platform sets up:
 * - workload-identity: AZURE_CLIENT_ID, AZURE_TENANT_ID,
 *   AZURE_FEDERATED_TOKEN_FILE (the webhook of Azure Workload Identity sets
 *   them) and optionally AZURE_AUTHORITY_HOST;
 * - managed-identity: IDENTITY_ENDPOINT + IDENTITY_HEADER where App Service
 *   and Container Apps set them, else IMDS (ECW_IMDS_ENDPOINT overrides its
 *   URL, for tests and unusual networks).
 *
 * A key or SAS from a secret file (${file:PATH}, or
 * AZURE_STORAGE_CONNECTION_STRING_FILE) may be rewritten in place, as
 * Kubernetes updates a mounted Secret: when the service refuses the secret
 * in use, the account asks reload_secret, at most once per
 * ECW_CONNECT_RELOAD_INTERVAL_MS, to expand the value as written again; a
 * changed secret goes into the account (the refused request is sent again
 * with it), is registered with the log, and the old one is forgotten. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "connect.h"
#include "ecw_log.h"
#include "ecw_token.h"

/* The variable's value, or NULL when it is unset or empty. */
static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static int missing(const char *mode, const char *var, const char *why)
{
	return ecw_error_set(ECW_EINVALID, "storage.auth is %s but %s is not set (%s)", mode, var, why);
}

static int workload_identity_options(struct ecw_token_options *o)
{
	static const char wi[] = "workload-identity";
	static const char webhook[] = "the Azure Workload Identity webhook sets it in pods labelled "
				      "azure.workload.identity/use: \"true\"";

	o->source = ECW_TOKEN_WORKLOAD_IDENTITY;
	if (!(o->client_id = env("AZURE_CLIENT_ID")))
		return missing(wi, "AZURE_CLIENT_ID", webhook);
	if (!(o->tenant_id = env("AZURE_TENANT_ID")))
		return missing(wi, "AZURE_TENANT_ID", webhook);
	if (!(o->federated_token_file = env("AZURE_FEDERATED_TOKEN_FILE")))
		return missing(wi, "AZURE_FEDERATED_TOKEN_FILE", webhook);
	/* Read for every token; a path that cannot be read is better said now. */
	if (access(o->federated_token_file, R_OK) != 0)
		return ecw_error_set(
			ECW_EINVALID,
			"storage.auth is %s but AZURE_FEDERATED_TOKEN_FILE (%s) cannot be read: %s", wi,
			o->federated_token_file, strerror(errno));
	o->authority_host = env("AZURE_AUTHORITY_HOST");
	return 0;
}

static int managed_identity_options(struct ecw_token_options *o, const struct ecw_config *cfg)
{
	const char *endpoint = env("IDENTITY_ENDPOINT"), *header = env("IDENTITY_HEADER");

	o->source = ECW_TOKEN_MANAGED_IDENTITY;
	o->mi_client_id = cfg->storage.managed_identity_client_id;
	if (endpoint && !header)
		return ecw_error_set(
			ECW_EINVALID,
			"storage.auth is managed-identity and IDENTITY_ENDPOINT is set but IDENTITY_HEADER is not "
			"(App Service and Container Apps set both; Azure Arc's flow is not supported)");
	if (endpoint) {
		o->endpoint = endpoint;
		o->identity_header = header;
		/* It authorizes token requests: never in a log line. */
		ecw_log_add_secret(header);
	} else {
		o->endpoint = env("ECW_IMDS_ENDPOINT");
	}
	return 0;
}

static int identity_account(struct ecw_account **out, const struct ecw_config *cfg)
{
	struct ecw_token_options o = {0};
	struct ecw_token_credential *cred = NULL;
	char name[64];
	int err;

	*out = NULL;
	err = cfg->storage.auth == ECW_AUTH_WORKLOAD_IDENTITY ? workload_identity_options(&o)
							      : managed_identity_options(&o, cfg);
	if (err < 0 || (err = ecw_token_credential_new(&cred, &o)) < 0)
		return err;
	if (cfg->storage.account) {
		snprintf(name, sizeof(name), "AccountName=%s", cfg->storage.account);
		err = ecw_account_parse_endpoints(out, name);
	} else {
		err = ecw_account_parse_endpoints(out, cfg->storage.connection_string);
	}
	if (err < 0) {
		ecw_token_credential_free(cred);
		return err;
	}
	ecw_account_take_credential(*out, cred);
	return 0;
}

/* ---- a secret rotated in its file ------------------------------------------- */

/* The account's reload (ecw_account_set_reload) when the connection string
 * came from a secret file: the text as written, expanded again. */
struct reload {
	char *source;  /* cfg->storage.connection_string_source */
	char *file;    /* the configuration's path, for messages */
	char *current; /* the connection string in use: a secret */
};

static void free_secret(char *s)
{
	if (!s)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}

static void reload_free(void *payload)
{
	struct reload *rl = payload;

	if (!rl)
		return;
	free_secret(rl->source);
	free(rl->file);
	free_secret(rl->current);
	free(rl);
}

/* Calls fn with each secret of a connection string: the AccountKey's value,
 * the SharedAccessSignature's (without its leading '?', and with it: a file
 * may hold it so). */
static void each_connstr_secret(const char *connstr, void (*fn)(const char *secret, void *payload),
				void *payload)
{
	static const char *const secret_settings[] = {"AccountKey=", "SharedAccessSignature=", NULL};

	for (const char *p = connstr; p && *p;) {
		const char *end = strchr(p, ';');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		for (size_t i = 0; secret_settings[i]; i++) {
			size_t k = strlen(secret_settings[i]);
			char value[4096];
			if (n > k && n - k < sizeof(value) && strncasecmp(p, secret_settings[i], k) == 0) {
				memcpy(value, p + k, n - k);
				value[n - k] = '\0';
				fn(value, payload);
				if (value[0] == '?')
					fn(value + 1, payload);
				explicit_bzero(value, sizeof(value));
			}
		}
		p = end ? end + 1 : NULL;
	}
}

static void add_secret(const char *secret, void *payload)
{
	(void)payload;
	ecw_log_add_secret(secret);
}

/* A secret of the connection string no longer in use, unless the new one
 * (payload) still holds it. */
static void forget_secret(const char *secret, void *payload)
{
	if (!strstr((const char *)payload, secret))
		ecw_log_forget_secret(secret);
}

static void reload_failed(const char *why)
{
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "credentials_reload_failed");

	ecw_log_str(l, "error", why);
	ecw_log_str(l, "msg",
		    "the storage secret's file was read again but cannot be used: requests go on "
		    "with the secret in use");
	ecw_log_end(l);
}

/* Reads the secret's file(s) again through the value as written; when they
 * hold another secret, puts it in the account. 1 when the secret changed. */
static int reload_secret(struct ecw_account *a, void *payload)
{
	struct reload *rl = payload;
	struct ecw_node at = {.kind = ECW_NODE_SCALAR, .line = 1, .col = 1, .file = rl->file};
	struct ecw_node_errors errs;
	struct ecw_log_line *l;
	char *cs = NULL, *old;
	int rc = 0;

	ecw_node_errors_init(&errs);
	/* The expansion registers what it read with the log, before anything
	 * could print it. */
	if (ecw_node_expand(&cs, NULL, rl->source, strlen(rl->source), &at, "storage.connection_string",
			    &errs) != 0) {
		reload_failed(errs.n ? errs.lines[0] : "out of memory");
		goto done;
	}
	if (strcmp(cs, rl->current) == 0) {
		ecw_log_msg(ECW_LOG_WARN, "credentials_unchanged",
			    "the service refused the storage secret and its file still holds the same one");
		goto done;
	}
	each_connstr_secret(cs, add_secret, NULL);
	if ((rc = ecw_account_update_secret(a, cs)) < 0) {
		reload_failed(ecw_error_last()->message);
		rc = 0;
		goto done;
	}
	/* The old secret is no longer sent: the log need not keep a copy. */
	forget_secret(rl->current, cs);
	each_connstr_secret(rl->current, forget_secret, cs);
	old = rl->current;
	rl->current = cs;
	cs = old;
	if (rc > 0) {
		l = ecw_log_begin(ECW_LOG_INFO, "credentials_reloaded");
		ecw_log_str(l, "auth", ecw_account_auth_name(a));
		ecw_log_str(l, "msg",
			    "the storage secret changed in its file: later requests use the new one");
		ecw_log_end(l);
	}
done:
	free_secret(cs);
	ecw_node_errors_dispose(&errs);
	return rc;
}

static int watch_secret_file(struct ecw_account *a, const struct ecw_config *cfg)
{
	struct reload *rl = calloc(1, sizeof(*rl));

	if (!rl || !(rl->source = strdup(cfg->storage.connection_string_source)) ||
	    !(rl->file = strdup(cfg->file ? cfg->file : "<config>")) ||
	    !(rl->current = strdup(cfg->storage.connection_string))) {
		reload_free(rl);
		return ecw_error_set(ECW_ENOMEM, "out of memory");
	}
	ecw_account_set_reload(a, reload_secret, rl, reload_free, ECW_CONNECT_RELOAD_INTERVAL_MS);
	return 0;
}

int ecw_connect_account(struct ecw_account **out, const struct ecw_config *cfg)
{
	int err;

	if (cfg->storage.auth != ECW_AUTH_KEY)
		return identity_account(out, cfg);
	if ((err = ecw_account_parse(out, cfg->storage.connection_string)) < 0)
		return err;
	if (cfg->storage.connection_string_source && (err = watch_secret_file(*out, cfg)) < 0) {
		ecw_account_free(*out);
		*out = NULL;
	}
	return err;
}

void ecw_connect_client_options(struct ecw_client_options *opts, const struct ecw_config *cfg)
{
	*opts = (struct ecw_client_options)ECW_CLIENT_OPTIONS_INIT;
	opts->ca_file = cfg->storage.ca_file;
	opts->timeout_ms = (int)cfg->storage.request_timeout_ms;
	opts->no_pipelining = !cfg->storage.pipelining;
}

int ecw_connect(struct ecw_account **acct_out, struct ecw_client **client_out, const struct ecw_config *cfg)
{
	struct ecw_client_options opts;
	int err;

	*acct_out = NULL;
	*client_out = NULL;
	ecw_connect_client_options(&opts, cfg);
	if ((err = ecw_connect_account(acct_out, cfg)) < 0)
		return err;
	if ((err = ecw_client_new(client_out, *acct_out, &opts)) < 0) {
		ecw_account_free(*acct_out);
		*acct_out = NULL;
	}
	return err;
}

/* The account key and the SAS token (and its signature) must never reach a
 * log line; the log redacts whatever is registered here. */
void ecw_connect_register_secrets(const struct ecw_config *cfg)
{
	each_connstr_secret(cfg->storage.connection_string, add_secret, NULL);
}
