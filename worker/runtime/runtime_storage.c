/* SPDX-License-Identifier: MIT */
/* runtime_storage.c - what the runtime's files note of their storage
 * requests: the count of a thread's attempts (each a request sent, retries
 * included; runtime.c's client hook counts them, deliver.c reads them for a
 * message's storage_requests) and the storage_error log line. It sits below
 * every other file of the runtime and calls none of them. */
#include <stdint.h>

#include "ecw_err.h"
#include "ecw_log.h"
#include "runtime_private.h"

static _Thread_local int64_t t_attempts;

void ecw_runtime_count_attempt(void)
{
	t_attempts++;
}

int64_t ecw_runtime_thread_attempts(void)
{
	return t_attempts;
}

void ecw_runtime_log_storage_error(const char *what)
{
	const struct ecw_error *e = ecw_error_last();
	struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "storage_error");

	ecw_log_str(l, "op", what);
	ecw_log_str(l, "code", ecw_error_name(e->code));
	ecw_log_int(l, "status", e->http_status);
	ecw_log_str(l, "service_code", e->service_code[0] ? e->service_code : NULL);
	ecw_log_str(l, "request_id", e->request_id[0] ? e->request_id : NULL);
	ecw_log_str(l, "error", e->message);
	ecw_log_end(l);
}
