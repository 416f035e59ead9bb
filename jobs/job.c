/* SPDX-License-Identifier: MIT */
/* job.c - the job API's helpers (ecw_job.h) the job types share: reading
 * the settings every type has (table names and key templates, with errors at
 * the value's line and column; filters lexed as OData), the lease check before a write, and how the
 * runtime reads a job's error. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_node.h"
#include "ecw_storage.h"
#include "jobs_private.h"

/* The storage API's rule, so check-config refuses what the client would
 * refuse at start. The value is not shown: it may hold an expanded ${VAR}. */
int ecw_job_setting_table(char **out, const struct ecw_node *job, const char *key, bool required,
			  struct ecw_node_errors *errs)
{
	if (ecw_node_string(out, job, key, required, errs) < 0)
		return -1;
	if (*out && !ecw_table_name_valid(*out)) {
		ecw_node_error(errs, ecw_node_get(job, key),
			       "%s: invalid table name: a table name is " ECW_TABLE_NAME_RULE, key);
		return -1;
	}
	return 0;
}

static int jobcfg_compile(struct ecw_template **out, const struct ecw_node *job, const char *key,
			  bool required, unsigned flags, struct ecw_node_errors *errs)
{
	char *text = NULL;
	int rc = 0;

	*out = NULL;
	if (ecw_node_string(&text, job, key, required, errs) < 0)
		return -1;
	if (text && ecw_template_compile_flags(out, text, key, flags) < 0) {
		ecw_node_error(errs, ecw_node_get(job, key), "%s", ecw_error_last()->message);
		rc = -1;
	}
	free(text);
	return rc;
}

int ecw_job_setting_template(struct ecw_template **out, const struct ecw_node *job, const char *key,
			     bool required, struct ecw_node_errors *errs)
{
	return jobcfg_compile(out, job, key, required, 0, errs);
}

int ecw_job_setting_filter(struct ecw_template **out, const struct ecw_node *job, const char *key,
			   bool required, struct ecw_node_errors *errs)
{
	return jobcfg_compile(out, job, key, required, ECW_TEMPLATE_FILTER, errs);
}

int ecw_job_source_key_hash(char out[65], const char *pk, const char *rk)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	struct ecw_buf in;
	int err;

	ecw_buf_init(&in, 0);
	/* Keys never hold NUL, so "pk NUL rk" is unambiguous. */
	if ((err = ecw_buf_adds(&in, pk)) < 0 || (err = ecw_buf_add(&in, "", 1)) < 0 ||
	    (err = ecw_buf_adds(&in, rk)) < 0)
		goto done;
	if (!EVP_Digest(in.ptr, in.len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32) {
		err = ecw_error_set(ECW_ERROR, "SHA-256 failed");
		goto done;
	}
	for (unsigned int i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
done:
	ecw_buf_dispose(&in);
	return err;
}

int ecw_job_check_lease(const struct ecw_job_ctx *ctx)
{
	if (ctx->lease_lost && atomic_load(ctx->lease_lost))
		return ecw_error_set(ECW_ETRANSIENT,
				     "lease lost on message %s: another worker may hold it; not writing",
				     ctx->message_id ? ctx->message_id : "?");
	return 0;
}

bool ecw_job_err_is_permanent(int err)
{
	return err == ECW_EINVALID || err == ECW_ETOOLARGE;
}

void ecw_job_member_fail(struct ecw_job_ctx *ctx, int *err_out, int err)
{
	snprintf(ctx->error, sizeof(ctx->error), "%s",
		 ecw_error_last()->message[0] ? ecw_error_last()->message : ecw_error_name(err));
	ctx->error_status = ecw_error_last()->http_status;
	snprintf(ctx->error_code, sizeof(ctx->error_code), "%s", ecw_error_last()->service_code);
	snprintf(ctx->error_table, sizeof(ctx->error_table), "%s", ecw_error_last()->table);
	*err_out = err;
}
