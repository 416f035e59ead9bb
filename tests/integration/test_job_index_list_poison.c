/* SPDX-License-Identifier: MIT */
/* test_job_index_list_poison.c - the index-list job (jobs/index_list.c) when its messages are poisoned: a
 * run that died after writing an intent leaves it in the employee's reference, and poisoning the message
 * hands the intent over (the job's abandon) so that a later run cleans it up. Cases: messages poisoned
 * after a crash (over max_dequeue_count, for good, with a crash in the abandon itself) and replayed with
 * `poison replay`, run by the worker as a process against the real Azurite with a config written per test
 * (indexlistfx.h) and judged by a full recomputation of the list table; abandon called in-process on
 * references written by hand; and an abandon that fails, logged while the message is poisoned all the
 * same. The job's other cases are in test_job_index_list.c and test_job_index_list_races.c. */
#include "ecw_config.h"
#include "ecw_job.h"
#include "indexlistfx.h"
#include "itest.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- poisoned messages hand their intents over ----------------------------------------------- */

/* One poisoning case: a move From -> To whose first delivery dies after a
 * step (an intent in the ref), the message poisoned, replayed with the
 * operator's command under a new message id, and run by a fresh worker. */
struct poison_case {
	const char *name; /* max-dequeue | deleted | permanent | crash-in-abandon */
	const char *crash;
	char queue[64], poison[64];
	char rk[32], from[32], to[32];
	char poisoned_id[128]; /* the message id the poisoning worker logged */
	char *pending;         /* the ref's Pending once poisoned */
	struct proc crashed, poisoner, poisoner2, fresh;
};

/* `poison replay` over the case's queues: puts the original text back. */
static void replay_case(struct wfx *x, struct poison_case *c, const struct il_wopts *o)
{
	char path[640], name[96], *out = NULL, *err = NULL;
	const char *args[] = {"poison", "replay", "-c", path, NULL};

	snprintf(name, sizeof(name), "il-replay-%s", c->name);
	il_write_config(path, sizeof(path), x, name, o);
	int rc = proc_run(&out, &err, name, args, NULL, 30000);
	ITEST_CHECK(rc == 0 && strstr(out, "1 selected, 1 replayed"), "%s: poison replay exited %d:\n%s%s",
	            c->name, rc, out, err);
	free(out);
	free(err);
}

/* One worker on the case's queues; a message it dies holding is back in 1 s. */
static struct il_wopts case_opts(const struct poison_case *c, int max_dequeue)
{
	struct il_wopts o = {.queue = c->queue,
	                     .poison = c->poison,
	                     .concurrency = 1,
	                     .visibility_s = 1,
	                     .max_dequeue = max_dequeue};
	return o;
}

static void test_job_index_list_poison__poisoned_intents_handed_over(void **state)
{
	struct wfx *x = *state;
	struct poison_case cs[] = {{.name = "max-dequeue", .crash = "index_list.added"},
	                           {.name = "deleted", .crash = "index_list.added"},
	                           {.name = "permanent", .crash = "index_list.intent"},
	                           {.name = "crash-in-abandon", .crash = "index_list.added"}};
	const size_t n = sizeof(cs) / sizeof(cs[0]);
	char *etag_abandoned = NULL;

	/* Each employee in its From list with a companion (so the list stays). */
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		char buddy[40];
		snprintf(c->rk, sizeof(c->rk), "p%zu", i);
		snprintf(c->from, sizeof(c->from), "From%zu", i);
		snprintf(c->to, sizeof(c->to), "To%zu", i);
		snprintf(buddy, sizeof(buddy), "%s-buddy", c->rk);
		il_change(x, "Poison", c->rk, c->from);
		il_change(x, "Poison", buddy, c->from);
		itest_unique_name(c->queue, sizeof(c->queue), 'q', "pcase");
		itest_unique_name(c->poison, sizeof(c->poison), 'q', "ppoison");
		itest_keep_queue(x->t, c->queue);
		itest_keep_queue(x->t, c->poison);
		ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, c->queue));
		ECW_ASSERT_OK(ecw_queue_create(NULL, x->t->client, c->poison));
	}
	il_run_worker(x, "il-poison-seed", 2 * n, 4);

	/* The move, and a first delivery that dies after writing its intent
	 * (and, at .added, adding the employee to To). */
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		struct il_wopts o = case_opts(c, 20);
		char name[96];
		il_emp_set(x, "Poison", c->rk, c->to);
		il_msg_put(x, c->queue, "Poison", c->rk);
		snprintf(name, sizeof(name), "il-poison-crash-%s", c->name);
		il_start_worker(&c->crashed, x, name, &o, c->crash);
	}
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		ITEST_CHECK(proc_wait(&c->crashed, 20000) && proc_exit_code(&c->crashed) == 86,
		            "%s: the first delivery did not die at %s; log:\n%s", c->name, c->crash,
		            proc_tail(c->crashed.log_path, 20));
		struct ecw_entity *ref = il_get_ref(x, "Poison", c->rk);
		ITEST_CHECK(ref && il_str_prop(ref, "Pending") && strstr(il_str_prop(ref, "Pending"), c->to),
		            "%s: no intent for %s after the crash: %s", c->name, c->to,
		            ref ? il_str_prop(ref, "Pending") : "(no ref)");
		ecw_entity_free(ref);
	}

	/* Poisoned: over max_dequeue_count on receipt, without running; or, for
	 * "permanent", run at its second delivery with a value that makes no key.
	 * In "crash-in-abandon" the poisoning worker dies right after handing
	 * the intents over, and another poisons the message again. */
	il_emp_set(x, "Poison", cs[2].rk, "AC/DC");
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		struct il_wopts o = case_opts(c, strcmp(c->name, "permanent") == 0 ? 5 : 1);
		char name[96];
		snprintf(name, sizeof(name), "il-poison-%s", c->name);
		il_start_worker(&c->poisoner, x, name, &o,
		                strcmp(c->name, "crash-in-abandon") == 0 ? "index_list.abandoned" : NULL);
	}
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		struct proc *p = &c->poisoner;
		if (strcmp(c->name, "crash-in-abandon") == 0) {
			struct il_wopts o = case_opts(c, 1);
			ITEST_CHECK(proc_wait(p, 20000) && proc_exit_code(p) == 86,
			            "%s: the poisoning worker did not die in abandon; log:\n%s", c->name,
			            proc_tail(p->log_path, 20));
			ITEST_CHECK(il_queue_count(x, c->poison) == 0, "%s: an envelope before the crash",
			            c->name);
			struct ecw_entity *ref = il_get_ref(x, "Poison", c->rk);
			assert_non_null(ref);
			etag_abandoned = strdup(ecw_entity_etag(ref));
			ecw_entity_free(ref);
			p = &c->poisoner2;
			il_start_worker(p, x, "il-poison-crash-in-abandon-2", &o, NULL);
		}
		ITEST_CHECK(proc_wait_count(p, 1, 20000, "message", "outcome", "poisoned", NULL),
		            "%s: not poisoned; log:\n%s", c->name, proc_tail(p->log_path, 20));
		struct proc_log log;
		proc_log_read(&log, p->log_path);
		struct json_object *line = proc_log_find(&log, 0, "message", NULL);
		assert_string_equal(proc_field(line, "reason"),
		                    strcmp(c->name, "permanent") == 0 ? "permanent" : "max-dequeue");
		snprintf(c->poisoned_id, sizeof(c->poisoned_id), "%s", proc_field(line, "message_id"));
		proc_log_dispose(&log);
		il_wait_drained(x, c->queue, p, 1, 10000);
		assert_int_equal(il_queue_count(x, c->poison), 1);
		ITEST_CHECK(proc_count(p, "abandon_failed", NULL) == 0, "%s: abandon failed:\n%s", c->name,
		            proc_tail(p->log_path, 20));
		proc_stop(p, 10000);
		struct ecw_entity *ref = il_get_ref(x, "Poison", c->rk);
		assert_non_null(ref);
		c->pending = strdup(il_str_prop(ref, "Pending") ? il_str_prop(ref, "Pending") : "(none)");
		if (p == &c->poisoner2) /* nothing of the id was left to hand over */
			ITEST_CHECK(strcmp(ecw_entity_etag(ref), etag_abandoned) == 0,
			            "%s: the second poisoning wrote the ref again", c->name);
		ecw_entity_free(ref);
	}

	/* The operator fixes what made it fail, and replays: a new message id. */
	il_emp_set(x, "Poison", cs[1].rk, NULL);
	il_emp_set(x, "Poison", cs[2].rk, "Fixed2");
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		struct il_wopts o = IL_WOPTS_DEFAULT;
		char name[96];
		o.queue = c->queue;
		o.poison = c->poison;
		o.concurrency = 1;
		replay_case(x, c, &o);
		snprintf(name, sizeof(name), "il-poison-replayed-%s", c->name);
		il_start_worker(&c->fresh, x, name, &o, NULL);
	}
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		ITEST_CHECK(proc_wait_count(&c->fresh, 1, 20000, "message", "outcome", "succeeded", NULL),
		            "%s: the replayed message did not succeed; log:\n%s", c->name,
		            proc_tail(c->fresh.log_path, 20));
		ITEST_CHECK(proc_count(&c->fresh, "message", "message_id", c->poisoned_id, NULL) == 0,
		            "%s: the replay ran under the poisoned message's id", c->name);
		il_wait_drained(x, c->queue, &c->fresh, 1, 10000);
		proc_stop(&c->fresh, 10000);
		assert_int_equal(il_queue_count(x, c->poison), 0);
	}

	/* The end state is the no-poison state: every list exact, no intents
	 * left in any ref, no ref for the deleted employee. */
	il_check_index(x);
	for (size_t i = 0; i < n; i++) {
		struct poison_case *c = &cs[i];
		char buddy[64], alone[64];
		snprintf(buddy, sizeof(buddy), "[[\"Poison\",\"%s-buddy\"]]", c->rk);
		snprintf(alone, sizeof(alone), "[[\"Poison\",\"%s\"]]", c->rk);
		il_expect_list(x, c->from, buddy);
		il_expect_list(x, c->to,
		               strcmp(c->name, "deleted") == 0 || strcmp(c->name, "permanent") == 0 ? NULL
		                                                                                    : alone);
		struct ecw_entity *ref = il_get_ref(x, "Poison", c->rk);
		if (strcmp(c->name, "deleted") == 0)
			ITEST_CHECK(ref == NULL, "deleted: the ref is still there: %s",
			            il_str_prop(ref, "Pending"));
		ecw_entity_free(ref);
		/* How: the poisoning handed the dead id's intents over. */
		ITEST_CHECK(strstr(c->pending, "\"~poisoned~\"") && !strstr(c->pending, c->poisoned_id),
		            "%s: once poisoned, the ref's intents should be \"~poisoned~\"'s, not %s's: %s",
		            c->name, c->poisoned_id, c->pending);
		free(c->pending);
	}
	il_expect_list(x, "Fixed2", "[[\"Poison\",\"p2\"]]");
	free(etag_abandoned);
	proc_assert_logs_clean();
}

/* Writes the ref of (pk, rk) by hand: committed to lastname/list, pending
 * (NULL: none), naming source keys spk/srk (a ref of someone else when they
 * differ). */
static void ref_put(struct wfx *x, const char *pk, const char *rk, const char *spk, const char *srk,
                    const char *list, const char *pending)
{
	char *h = il_ref_rk(pk, rk), rpk[64];
	struct ecw_entity *e = NULL;

	snprintf(rpk, sizeof(rpk), "%s%.2s", IL_REF_PREFIX, h);
	ECW_ASSERT_OK(ecw_entity_new(&e, rpk, h));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "SourcePartitionKey", spk, strlen(spk)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "SourceRowKey", srk, strlen(srk)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "ListPartitionKey", IL_LIST_PK, strlen(IL_LIST_PK)));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "ListRowKey", list, strlen(list)));
	if (pending)
		ECW_ASSERT_OK(ecw_entity_set_string(e, "Pending", pending, strlen(pending)));
	ECW_ASSERT_OK(
	    ecw_table_write(NULL, x->t->client, x->t->table2, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
	free(h);
}

static char *ref_etag(struct wfx *x, const char *pk, const char *rk)
{
	struct ecw_entity *e = il_get_ref(x, pk, rk);
	char *etag = e ? strdup(ecw_entity_etag(e)) : NULL;
	ecw_entity_free(e);
	return etag;
}

/* Calls the job's abandon for ctx: it must return want and leave the ref as
 * it was (the same ETag, or still absent). */
static void abandon_writes_nothing(struct wfx *x, const struct ecw_job_def *def, struct ecw_job_ctx *ctx,
                                   int want)
{
	char *before = ref_etag(x, ctx->pk, ctx->rk), *after;

	assert_int_equal(def->type->abandon(def->settings, ctx), want);
	after = ref_etag(x, ctx->pk, ctx->rk);
	ITEST_CHECK(before ? after && strcmp(before, after) == 0 : after == NULL,
	            "abandon for (%s, %s) wrote the ref: ETag %s, now %s", ctx->pk, ctx->rk,
	            before ? before : "(none)", after ? after : "(none)");
	free(before);
	free(after);
}

/* The job's abandon and run called in-process, on refs written by hand:
 * abandon rewrites exactly the id's own intents and writes nothing when there
 * are none (or no ref); a run then drops the "~poisoned~" intents and keeps
 * another live owner's. */
static void test_job_index_list_poison__abandon_in_process(void **state)
{
	struct wfx *x = *state;
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;
	struct il_wopts o = IL_WOPTS_DEFAULT;
	char path[640];

	/* The worker's configuration, loaded here: the job as it would run. */
	il_write_config(path, sizeof(path), x, "il-abandon", &o);
	ecw_node_errors_init(&errs);
	ECW_ASSERT_OK(ecw_config_load(&cfg, path, &errs));
	ecw_node_errors_dispose(&errs);
	const struct ecw_job_def *def = ecw_config_job(cfg, IL_JOB);
	assert_non_null(def);
	assert_non_null(def->type->abandon);
	struct ecw_job_ctx ctx = {.client = x->t->client,
	                          .job = IL_JOB,
	                          .pk = "Unit",
	                          .rk = "u1",
	                          .trace_id = "msg-1",
	                          .message_id = "msg-1",
	                          .dequeue_count = 6};

	/* No ref: nothing to hand over, and no ref made. */
	abandon_writes_nothing(x, def, &ctx, 0);

	/* Intents of others only (and none at all): no write. */
	ref_put(x, "Unit", "u1", "Unit", "u1", "Jones", "[[\"lastname\",\"Smith\",\"msg-2\"]]");
	ref_put(x, "Unit", "u2", "Unit", "u2", "Jones", NULL);
	abandon_writes_nothing(x, def, &ctx, 0);
	ctx.rk = "u2";
	abandon_writes_nothing(x, def, &ctx, 0);

	/* Its own: rewritten, merged with a "~poisoned~" one already there;
	 * another owner's and the committed list stay. */
	ctx.rk = "u1";
	ref_put(x, "Unit", "u1", "Unit", "u1", "Jones",
	        "[[\"lastname\",\"Brown\",\"msg-1\"],[\"lastname\",\"Smith\",\"msg-2\"],"
	        "[\"lastname\",\"Smith\",\"msg-1\"],[\"lastname\",\"Brown\",\"~poisoned~\"]]");
	ECW_ASSERT_OK(def->type->abandon(def->settings, &ctx));
	struct ecw_entity *ref = il_get_ref(x, "Unit", "u1");
	assert_non_null(ref);
	assert_string_equal(il_str_prop(ref, "Pending"), "[[\"lastname\",\"Brown\",\"~poisoned~\"],"
	                                                 "[\"lastname\",\"Smith\",\"msg-2\"],"
	                                                 "[\"lastname\",\"Smith\",\"~poisoned~\"]]");
	assert_string_equal(il_str_prop(ref, "ListRowKey"), "Jones");
	assert_string_equal(il_str_prop(ref, "SourceRowKey"), "u1");
	ecw_entity_free(ref);
	/* Once more (a crash before the envelope, poisoned again): no write. */
	abandon_writes_nothing(x, def, &ctx, 0);

	/* A ref that is not this source's: an error, nothing written. */
	ref_put(x, "Unit", "u3", "Unit", "someone else", "Jones", "[[\"lastname\",\"Smith\",\"msg-1\"]]");
	ctx.rk = "u3";
	abandon_writes_nothing(x, def, &ctx, ECW_EINVALID);

	/* A later run (another id) drops the "~poisoned~" intents after
	 * removing u1 from their lists; msg-2's, of a run that may be live,
	 * stays. */
	il_emp_set(x, "Unit", "u1", "Jones");
	ctx.rk = "u1";
	ctx.trace_id = ctx.message_id = "msg-3";
	ctx.dequeue_count = 1;
	ECW_ASSERT_OK(def->type->run(def->settings, &ctx));
	ref = il_get_ref(x, "Unit", "u1");
	assert_non_null(ref);
	assert_string_equal(il_str_prop(ref, "Pending"), "[[\"lastname\",\"Smith\",\"msg-2\"]]");
	assert_string_equal(il_str_prop(ref, "ListRowKey"), "Jones");
	ecw_entity_free(ref);
	il_expect_list(x, "Jones", "[[\"Unit\",\"u1\"]]");
	ecw_config_free(cfg);
	proc_assert_logs_clean();
}

/* An abandon that fails is logged, and the message is poisoned all the same
 * (its intents, if any, stay with the dead id: the documented leftover). */
static void test_job_index_list_poison__abandon_failure_still_poisons(void **state)
{
	struct wfx *x = *state;
	struct il_wopts o = IL_WOPTS_DEFAULT;
	struct proc p;
	struct proc_log log;

	/* The ref at the employee's hashed key names someone else: the run and
	 * the abandon both refuse it. */
	ref_put(x, "Odd", "r1", "Odd", "someone else", "Jones", "[[\"lastname\",\"Smith\",\"msg-1\"]]");
	char *before = ref_etag(x, "Odd", "r1");
	il_change(x, "Odd", "r1", "Jones");
	il_start_worker(&p, x, "il-abandon-fails", &o, NULL);
	ITEST_CHECK(proc_wait_count(&p, 1, 20000, "message", NULL), "no outcome:\n%s",
	            proc_tail(p.log_path, 20));
	il_wait_drained(x, x->t->queue, &p, 1, 10000);
	proc_log_read(&log, p.log_path);
	struct json_object *line = proc_log_find(&log, 0, "message", NULL);
	struct json_object *failed = proc_log_find(&log, 0, "abandon_failed", NULL);
	assert_string_equal(proc_field(line, "outcome"), "poisoned");
	assert_string_equal(proc_field(line, "reason"), "permanent");
	ITEST_CHECK(failed, "no abandon_failed line:\n%s", proc_tail(p.log_path, 20));
	assert_string_equal(proc_field(failed, "level"), "warn");
	assert_string_equal(proc_field(failed, "job"), IL_JOB);
	assert_string_equal(proc_field(failed, "rk"), "r1");
	assert_string_equal(proc_field(failed, "message_id"), proc_field(line, "message_id"));
	ITEST_CHECK(strstr(proc_field(failed, "error"), "is not for (Odd, r1)"), "error: %s",
	            proc_field(failed, "error"));
	proc_log_dispose(&log);
	assert_int_equal(il_queue_count(x, x->poison), 1);
	proc_stop(&p, 10000);
	char *after = ref_etag(x, "Odd", "r1");
	assert_string_equal(before, after);
	free(before);
	free(after);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_index_list_poison__poisoned_intents_handed_over,
	                                    il_setup, il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list_poison__abandon_in_process, il_setup,
	                                    il_teardown),
	    cmocka_unit_test_setup_teardown(test_job_index_list_poison__abandon_failure_still_poisons,
	                                    il_setup, il_teardown),
	};
	/* ECW_TEST_FILTER=test_job_index_list_poison__abandon* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
