/* SPDX-License-Identifier: MIT */
/* runtime_preflight.c - what `run` makes of the configuration checked
 * against storage at start (preflight.c), after the queues and tables it may
 * create were created. Refused credentials and a missing poison queue end
 * the start, naming what is wrong: with no poison queue every poisoning
 * would fail, message after message. A table a job reads or writes that is
 * not there blocks that job (job_block.c: its messages are held, never
 * poisoned), not the worker. A missing work queue is waited for: nothing
 * can be received from it, so nothing is lost, and /readyz says not ready
 * until it exists. */
#include <stdbool.h>

#include "ecw_clock.h"
#include "ecw_log.h"
#include "runtime_private.h"
#include "runtime.h"

static void on_problem(const struct ecw_preflight_problem *p, void *payload)
{
	bool *fatal = payload;
	struct ecw_log_line *l;

	switch (p->kind) {
	case ECW_PREFLIGHT_SOURCE:
	case ECW_PREFLIGHT_TARGET:
		if (p->job) {
			ecw_job_block_note(p->job, p->name, p->text, ecw_clock_now_ms());
			return;
		}
		l = ecw_log_begin(ECW_LOG_ERROR, "table_missing");
		ecw_log_str(l, "table", p->name);
		break;
	case ECW_PREFLIGHT_QUEUE:
		l = ecw_log_begin(ECW_LOG_WARN, "queue_missing");
		ecw_log_str(l, "queue", p->name);
		break;
	default: /* credentials, the poison queue */
		*fatal = true;
		l = ecw_log_begin(ECW_LOG_ERROR, "start_failed");
		ecw_log_str(l, "queue", p->name);
		break;
	}
	ecw_log_str(l, "error", p->text);
	ecw_log_end(l);
}

int ecw_runtime_preflight(const struct ecw_config *cfg, struct ecw_client *c, const struct ecw_account *acct)
{
	bool fatal = false;
	int n = ecw_preflight(cfg, c, acct, on_problem, &fatal);

	if (n < 0) {
		/* Storage did not answer: the runs will tell, job by job. */
		ecw_runtime_log_storage_error("start.preflight");
		return 0;
	}
	return fatal ? -1 : 0;
}
