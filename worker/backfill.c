/* backfill.c - enqueue one message per source entity (see backfill.h). The
 * scan selects only the keys, pages through continuation tokens as it goes,
 * and paces the puts with a token bucket (pace.h). A put that fails after the
 * client's retries is counted and reported, never silently dropped. */
#include <stdio.h>
#include <string.h>

#include "backfill.h"
#include "connect.h"
#include "ecw_clock.h"
#include "ecw_job.h"
#include "ecw_log.h"
#include "ecw_storage.h"
#include "message.h"
#include "pace.h"
#include "progress.h"

static void show(struct ecw_progress *p, const struct ecw_backfill_result *r, bool final)
{
	char detail[96];

	snprintf(detail, sizeof(detail), "%llu scanned, %llu failed", (unsigned long long)r->scanned,
		 (unsigned long long)r->failed);
	ecw_progress_show(p, r->enqueued, detail, final);
}

int ecw_backfill(struct ecw_backfill_result *r, const struct ecw_config *cfg, const struct ecw_job_def *job,
		 const struct ecw_backfill_options *opts)
{
	struct ecw_query_options qo = {.filter = opts->filter, .select = "PartitionKey", .top = 1000};
	struct ecw_queue_put_options po = {0, cfg->worker.message_ttl_s};
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct ecw_table_query *q = NULL;
	struct ecw_buf text;
	const char *table;
	int64_t t0 = ecw_now_ms();
	struct ecw_progress prog;
	struct ecw_pace pace;
	int err;

	memset(r, 0, sizeof(*r));
	ecw_progress_init(&prog, "backfill", opts->progress, 0);
	ecw_pace_init(&pace, opts->rate);
	ecw_buf_init(&text, ECW_QUEUE_MAX_TEXT);
	if (!job->type->source_table || !(table = job->type->source_table(job->settings))) {
		err = ecw_error_set(ECW_EINVALID, "job '%s' (type %s) has no source table to scan", job->name,
				    job->type->name);
		goto done;
	}
	if ((err = ecw_connect(&acct, &c, cfg)) < 0 ||
	    (cfg->worker.create_missing && (err = ecw_queue_create(NULL, c, cfg->worker.queue)) < 0) ||
	    (err = ecw_table_query_new(&q, c, table, &qo)) < 0)
		goto done;
	for (;;) {
		struct ecw_entity *e = NULL;

		if (opts->stop && *opts->stop) {
			r->stopped = true;
			break;
		}
		if ((err = ecw_table_query_next(&e, q)) < 0)
			goto done;
		if (!e)
			break;
		r->scanned++;
		ecw_pace_take(&pace, opts->stop);
		ecw_buf_reset(&text);
		if (ecw_message_encode(&text, job->name, ecw_entity_pk(e), ecw_entity_rk(e), NULL, NULL, false) < 0 ||
		    ecw_queue_put(NULL, c, cfg->worker.queue, text.ptr, text.len, &po) < 0) {
			r->failed++;
			struct ecw_log_line *l = ecw_log_begin(ECW_LOG_WARN, "backfill_put_failed");
			ecw_log_str(l, "pk", ecw_entity_pk(e));
			ecw_log_str(l, "rk", ecw_entity_rk(e));
			ecw_log_str(l, "error", ecw_error_last()->message);
			ecw_log_end(l);
		} else {
			r->enqueued++;
		}
		ecw_entity_free(e);
		show(&prog, r, false);
	}
	err = 0;
done:
	r->seconds = (double)(ecw_now_ms() - t0) / 1000.0;
	show(&prog, r, true);
	ecw_table_query_free(q);
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_buf_dispose(&text);
	return err;
}
