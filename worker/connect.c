/* connect.c - accounts and clients from the configuration (see connect.h). */
#include <stddef.h>

#include "connect.h"

int ecw_connect_account(struct ecw_account **out, const struct ecw_config *cfg)
{
	return ecw_account_parse(out, cfg->storage.connection_string);
}

void ecw_connect_client_options(struct ecw_client_options *opts, const struct ecw_config *cfg)
{
	(void)cfg;
	*opts = (struct ecw_client_options)ECW_CLIENT_OPTIONS_INIT;
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
