/* SPDX-License-Identifier: MIT */
/* runtimefx.c - see runtimefx.h. */
#include "runtimefx.h"

#include <stdlib.h>
#include <string.h>

#include "ecw_buf.h"

int rtfx_setup(void **state)
{
	struct rtfx *r = wfx_new(sizeof(*r), 0);

	r->client = r->fx.t->client;
	*state = r;
	return 0;
}

int rtfx_teardown(void **state)
{
	return wfx_teardown(state);
}

int rtfx_write_config(char *path, size_t cap, struct rtfx *r, const char *name, const struct rtfx_wopts *o)
{
	struct wfx_worker w = WFX_WORKER(r->fx.t->queue, r->fx.poison);

	w.batch_size = o->batch_size;
	w.concurrency = o->concurrency;
	w.visibility_s = o->visibility_s;
	w.max_dequeue = o->max_dequeue;
	w.retry_max = "4s";
	w.shutdown_grace = o->shutdown_grace;
	w.worker_extra = o->worker_extra;
	w.metrics_port = proc_free_port();
	w.jobs = o->jobs ? o->jobs : "  noop: {type: test-noop}\n";
	wfx_write_config(path, cap, name, &w);
	return w.metrics_port;
}

int rtfx_start_worker(struct proc *p, struct rtfx *r, const char *name, const struct rtfx_wopts *o)
{
	char path[640];
	int port = rtfx_write_config(path, sizeof(path), r, name, o);
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {r->worker_env, NULL};

	proc_start(p, name, args, r->worker_env[0] ? env : NULL);
	return port;
}

void rtfx_finish(struct proc *p)
{
	proc_stop(p, 10000);
	proc_assert_logs_clean();
}

/* ---- storage helpers --------------------------------------------------------------- */

void rtfx_put_len(struct rtfx *r, const char *text, size_t len, char *id_out)
{
	struct ecw_queue_msg m;

	memset(&m, 0, sizeof(m));
	ECW_ASSERT_OK(ecw_queue_put(&m, r->client, r->fx.t->queue, text, len, NULL));
	if (id_out)
		memcpy(id_out, m.id, sizeof(m.id));
}

void rtfx_put(struct rtfx *r, const char *text, char *id_out)
{
	rtfx_put_len(r, text, strlen(text), id_out);
}

long long rtfx_queue_count(struct rtfx *r, const char *q)
{
	long long n = -1;
	ECW_ASSERT_OK(ecw_queue_count(&n, r->client, q));
	return n;
}

size_t rtfx_peek_count(struct rtfx *r, const char *q)
{
	struct ecw_queue_msg *m = NULL;
	size_t n = 0;

	ECW_ASSERT_OK(ecw_queue_peek(&m, &n, r->client, q, 32));
	ecw_queue_msgs_free(m, n);
	return n;
}

struct ecw_queue_msg *rtfx_receive_n(size_t *got, struct rtfx *r, const char *q, size_t want,
                                     int visibility_s, int timeout_ms)
{
	struct ecw_queue_msg *all = calloc(want ? want : 1, sizeof(*all));
	int64_t end = itest_now_ms() + timeout_ms;

	assert_non_null(all);
	*got = 0;
	while (*got < want) {
		struct ecw_queue_msg *m = NULL;
		size_t n = 0;
		int max = (int)(want - *got > 32 ? 32 : want - *got);

		ECW_ASSERT_OK(ecw_queue_receive(&m, &n, r->client, q, max, visibility_s));
		for (size_t i = 0; i < n; i++) {
			all[(*got)++] = m[i];
			m[i].text = NULL;
		}
		ecw_queue_msgs_free(m, n);
		if (*got >= want || itest_now_ms() > end)
			break;
		if (n == 0)
			itest_sleep_ms(100);
	}
	return all;
}

size_t rtfx_rows_with_pk(struct rtfx *r, const char *table, const char *pk, struct ecw_entity **out,
                         size_t max)
{
	struct ecw_buf f;
	struct ecw_table_query *q = NULL;
	size_t n = 0;

	ecw_buf_init(&f, 0);
	ECW_ASSERT_OK(ecw_buf_adds(&f, "PartitionKey eq "));
	ECW_ASSERT_OK(ecw_escape_filter_string(&f, pk));
	struct ecw_query_options qo = {.filter = ecw_buf_cstr(&f)};
	ECW_ASSERT_OK(ecw_table_query_new(&q, r->client, table, &qo));
	for (;;) {
		struct ecw_entity *e = NULL;
		ECW_ASSERT_OK(ecw_table_query_next(&e, q));
		if (!e)
			break;
		if (out && n < max)
			out[n] = e;
		else
			ecw_entity_free(e);
		n++;
	}
	ecw_table_query_free(q);
	ecw_buf_dispose(&f);
	return n;
}
