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
 *   URL, for tests and unusual networks). */
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

int ecw_connect_account(struct ecw_account **out, const struct ecw_config *cfg)
{
	if (cfg->storage.auth == ECW_AUTH_KEY)
		return ecw_account_parse(out, cfg->storage.connection_string);
	return identity_account(out, cfg);
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
	static const char *const secret_settings[] = {"AccountKey=", "SharedAccessSignature=", NULL};
	const char *connstr = cfg->storage.connection_string;

	for (const char *p = connstr; p && *p;) {
		const char *end = strchr(p, ';');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		for (size_t i = 0; secret_settings[i]; i++) {
			size_t k = strlen(secret_settings[i]);
			char value[4096];
			if (n > k && n - k < sizeof(value) && strncasecmp(p, secret_settings[i], k) == 0) {
				memcpy(value, p + k, n - k);
				value[n - k] = '\0';
				ecw_log_add_secret(value[0] == '?' ? value + 1 : value);
			}
		}
		p = end ? end + 1 : NULL;
	}
}
