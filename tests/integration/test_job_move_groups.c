/* SPDX-License-Identifier: MIT */
/* test_job_move_groups.c - the move job's groups, as a process: messages of one partition that arrive
 * together run together, with entity group transactions (a transaction of copies, then one of deletes).
 * build/ecworker-test runs against the real Azurite with a config written per test (its own queue, poison
 * queue and tables; movefx.h), and the tests judge it by what it leaves in the tables and the queues and by
 * its JSON log and metrics: a receive moved in fewer writes than entities, with a duplicate, a missing
 * source and a refused transaction among them; a crash after each group step; a member changed between
 * the group's copy and its delete; another message's lease renewed while the group's pipelined deletes
 * get no answer. One message at a time is in test_job_move.c and test_job_move_crash.c.
 * Run one case with ECW_TEST_FILTER='test_job_move_groups__group_crash*'. */
#include "itest.h"
#include "movefx.h"
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_clock.h"

/* ---- groups: messages of one partition run together ---------------------------------------- */

/* The largest "group" among p's message lines (0: none ran in one), and in
 * *grouped how many lines carry one. */
static long long largest_group(const struct proc *p, size_t *grouped)
{
	struct proc_log log;
	long long max = 0;

	*grouped = 0;
	proc_log_read(&log, p->log_path);
	for (size_t i = 0; i < log.n; i++) {
		if (strcmp(proc_field(log.lines[i], "event"), "message") != 0)
			continue;
		long long g = proc_field_int(log.lines[i], "group", 0);
		if (g >= 2)
			(*grouped)++;
		if (g > max)
			max = g;
	}
	proc_log_dispose(&log);
	return max;
}

/* Waits for every message of the list to be logged a success with the
 * detail its run must give. */
static void expect_successes(struct proc *p, char (*id)[64], size_t n, const char *detail)
{
	for (size_t i = 0; i < n; i++) {
		PROC_EXPECT_LOG(p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded");
		mv_expect_success(p, id[i], detail);
	}
}

/* One receive, run in groups. 28 employees in North and 4 in South, every
 * message enqueued before the worker starts (one job thread, receives of
 * 32) so that a receive brings them together; with them a message sent
 * twice (received together, the second rides with the first's run: worker/runtime/runtime.c),
 * one for an employee that never existed (nothing may be written for it),
 * and in South a stale archive copy of one employee (another version, with
 * a property the source lacks). The South transaction of copies is then
 * refused (409) as a whole, and its members must take the single path,
 * which replaces the stale copy with the source as it is (not merged into
 * it). A group writes twice (a transaction of inserts, one of deletes)
 * where its members alone would write twice each: with South's members all
 * alone (two writes each, one more for the stale copy, one for the refused
 * transaction: 10) and North's 30 messages in groups of at most 16, a few
 * per receive, the worker must write fewer times than it moves entities
 * (32; it wrote 16 when this was written), where one message at a time
 * would write 65. */
#define GRP_NORTH 28
#define GRP_SOUTH 4

static void test_job_move_groups__group_moves_a_receive_together(void **state)
{
	enum { N = GRP_NORTH + GRP_SOUTH, STALE = GRP_NORTH + 1, DUP = 3 };
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e[N], *stale;
	char jobs[512], rk[32], id[N][64], dup_id[64], ghost_id[64], *page = NULL;
	struct proc p;
	struct proc_log log;

	for (int i = 0; i < N; i++) {
		snprintf(rk, sizeof(rk), "emp '%02d", i);
		e[i] = mv_employee(i < GRP_NORTH ? "North" : "South", rk, i % 5 + 1);
		mv_write_entity(m, m->emp, e[i]);
	}
	stale = mv_employee("South", ecw_entity_rk(e[STALE]), 9);
	ECW_ASSERT_OK(ecw_entity_set_string(stale, "Obsolete", "an older archive's", 18));
	mv_write_entity(m, m->arch, stale);
	/* South, then North with the duplicate and the ghost among them: in
	 * queue order the duplicate shares a group of 16 with the original. */
	for (int i = GRP_NORTH; i < N; i++)
		mv_put_job(m, "archive-employee", "South", ecw_entity_rk(e[i]), NULL, false, id[i]);
	for (int i = 0; i < GRP_NORTH; i++) {
		mv_put_job(m, "archive-employee", "North", ecw_entity_rk(e[i]), NULL, i % 2 == 1, id[i]);
		if (i == 13) {
			mv_put_job(m, "archive-employee", "North", ecw_entity_rk(e[DUP]), NULL, false,
			           dup_id);
			mv_put_job(m, "archive-employee", "North", "nobody", NULL, false, ghost_id);
		}
	}
	o.concurrency = 1;
	o.batch_size = 32;
	o.metrics_port = proc_free_port();
	mv_start_worker(&p, m, "move-group", mv_std_jobs(jobs, sizeof(jobs), m), &o);
	PROC_EXPECT_LOG(&p, N + 2, 20000, "message", "outcome", "succeeded");

	for (int i = 0; i < N; i++)
		if (i != DUP)
			mv_expect_success(&p, id[i], "");
	mv_expect_success(&p, ghost_id, "missing");
	/* The duplicate pair: one moved it, the other rode with that run. */
	char w1[64], w2[64];
	snprintf(w1, sizeof(w1), "%s", proc_field(mv_msg_line(&log, &p, id[DUP], "succeeded"), "ran_with"));
	proc_log_dispose(&log);
	snprintf(w2, sizeof(w2), "%s", proc_field(mv_msg_line(&log, &p, dup_id, "succeeded"), "ran_with"));
	proc_log_dispose(&log);
	ITEST_CHECK((strcmp(w1, "") == 0 && strcmp(w2, id[DUP]) == 0) ||
	                (strcmp(w1, dup_id) == 0 && strcmp(w2, "") == 0),
	            "the duplicate messages ran_with '%s' and '%s', expected one to name the other", w1, w2);
	assert_int_equal(proc_count(&p, "message", "message_id", id[DUP], NULL), 1);
	assert_int_equal(proc_count(&p, "message", "message_id", dup_id, NULL), 1);
	assert_int_equal(proc_count(&p, "message", "outcome", "retried", NULL), 0);
	assert_int_equal(proc_count(&p, "message", "outcome", "poisoned", NULL), 0);

	for (int i = 0; i < N; i++)
		mv_assert_only_in(m, m->arch, m->emp, e[i],
		                  i == STALE ? "the stale copy replaced" : "moved in a group");
	assert_int_equal(mv_table_rows(m, m->arch), N); /* nothing for the ghost */
	assert_int_equal(mv_table_rows(m, m->emp), 0);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);

	size_t grouped = 0;
	long long largest = largest_group(&p, &grouped);
	assert_int_equal(proc_http_get(&page, o.metrics_port, "/metrics"), 200);
	/* The table writes the worker attempted: what a group saves (reads are
	 * one GET per entity either way). */
	long long writes = proc_table_writes(page);
	print_message(
	    "  %lld table writes for %d entities; %zu of %d messages ran in groups (largest %lld)\n", writes,
	    N, grouped, N + 2, largest);
	ITEST_CHECK(writes < N,
	            "%lld table writes to move %d entities: the groups did not save writes; metrics:\n%s",
	            writes, N, page);
	ITEST_CHECK(largest >= 2, "no message ran in a group (no \"group\" in any message line); log %s",
	            p.log_path);
	ITEST_CHECK(largest <= 16, "a group of %lld, over move's group_max of 16", largest);
	/* Step 1 of a group reads its sources with a query per 14 members: far
	 * fewer GETs than entities (the single paths, the ghost's and the
	 * duplicate's reads are what is left). */
	long long gets = (long long)proc_metric(page, "ecw_storage_requests_total", NULL, "op=\"table.get\"",
	                                        NULL),
	          queries = (long long)proc_metric(page, "ecw_storage_requests_total", NULL,
	                                           "op=\"table.query\"", NULL);
	print_message("  %lld table GETs and %lld queries for %d entities\n", gets, queries, N);
	ITEST_CHECK(queries >= 2 && gets < N / 2,
	            "%lld GETs and %lld queries for %d entities: the group read its sources one by one", gets,
	            queries, N);
	/* South's members took the single path: the stale copy was replaced by
	 * an update If-Match the copy as read, never written over blindly. */
	long long updates =
	    (long long)proc_metric(page, "ecw_storage_requests_total", NULL, "op=\"table.update\"", NULL);
	ITEST_CHECK(updates >= 1, "no table.update: the stale copy was not replaced by the single path");
	assert_int_equal(
	    (long long)proc_metric(page, "ecw_storage_requests_total", NULL, "op=\"table.upsert\"", NULL), 0);
	free(page);
	mv_finish(&p);
	for (int i = 0; i < N; i++)
		ecw_entity_free(e[i]);
	ecw_entity_free(stale);
}

/* A group's crash right after each of its steps: five employees of one
 * partition, their messages enqueued before the worker starts so that one
 * receive brings them and one group takes them (a worker can only die at a
 * move.group point in a group). A transaction applies all or nothing, so
 * right after the crash every member must be where run's own step leaves
 * its entity (never some copied and others not), and a fresh worker must
 * converge on the redelivered messages to the no-crash state. Each point
 * has its own partition, so that the rounds do not meet. */
#define GRP_CRASH_N 5

static void group_crash_after(struct mv *m, const char *point, enum mv_where then, const char *rerun_detail)
{
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e[GRP_CRASH_N];
	char jobs[512], rk[32], id[GRP_CRASH_N][64], name[64], filter[64];
	const char *pk = point + strlen("move.group."); /* read, copied, deleted */
	struct proc p1, p2;

	o.visibility_s = 2; /* the redelivery comes quickly */
	mv_std_jobs(jobs, sizeof(jobs), m);
	for (int i = 0; i < GRP_CRASH_N; i++) {
		snprintf(rk, sizeof(rk), "o'brien %03d", i);
		e[i] = mv_employee(pk, rk, i + 1);
		mv_write_entity(m, m->emp, e[i]);
		mv_put_job(m, "archive-employee", pk, rk, NULL, false, id[i]);
	}
	o.crash_at = point;
	snprintf(name, sizeof(name), "move-group-crash-%s", pk);
	mv_start_crashing_worker(&p1, m, name, jobs, &o);
	assert_int_equal(proc_count(&p1, "message", NULL), 0);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), GRP_CRASH_N);

	for (int i = 0; i < GRP_CRASH_N; i++) {
		struct ecw_entity *s = mv_get_or_null(m, m->emp, pk, ecw_entity_rk(e[i]));
		struct ecw_entity *a = mv_get_or_null(m, m->arch, pk, ecw_entity_rk(e[i]));
		ITEST_CHECK(s || a, "after %s: %s is in neither table", point, ecw_entity_rk(e[i]));
		if (then == MV_IN_SOURCE || then == MV_IN_BOTH)
			mv_assert_same_entity(e[i], s, "the source after the crash");
		else
			ITEST_CHECK(s == NULL, "after %s the source of %s is still there", point,
			            ecw_entity_rk(e[i]));
		if (then == MV_IN_TARGET || then == MV_IN_BOTH)
			mv_assert_same_entity(e[i], a, "the copy after the crash");
		else
			ITEST_CHECK(a == NULL, "after %s a copy of %s exists already", point,
			            ecw_entity_rk(e[i]));
		ecw_entity_free(s);
		ecw_entity_free(a);
	}

	o.crash_at = NULL;
	snprintf(name, sizeof(name), "move-group-rerun-%s", pk);
	mv_start_worker(&p2, m, name, jobs, &o);
	for (int i = 0; i < GRP_CRASH_N; i++)
		PROC_EXPECT_LOG(&p2, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded",
		                "dequeue_count", "2");
	expect_successes(&p2, id, GRP_CRASH_N, rerun_detail);
	for (int i = 0; i < GRP_CRASH_N; i++) {
		mv_assert_only_in(m, m->arch, m->emp, e[i], point);
		ecw_entity_free(e[i]);
	}
	size_t n = 0;
	snprintf(filter, sizeof(filter), "PartitionKey eq '%s'", pk);
	struct ecw_entity **all = itest_query_all(&n, m->c, m->arch, filter); /* n is set by the call */
	itest_entities_free(all, n);
	assert_int_equal(n, GRP_CRASH_N);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p2);
}

static void test_job_move_groups__group_crash_after_each_step(void **state)
{
	group_crash_after(*state, "move.group.read", MV_IN_SOURCE, "");
	group_crash_after(*state, "move.group.copied", MV_IN_BOTH, "");
	/* The rerun finds no sources: already moved. */
	group_crash_after(*state, "move.group.deleted", MV_IN_TARGET, "already-moved");
}

/* A crash among a group's pipelined message deletes (right after the
 * first answer: deliver.group.delete_answered): every entity is moved, the
 * first message is gone and the others are deleted or come back. Those
 * that come back run again and find the move done (already-moved): the
 * archive holds each employee once, the source none, nothing is poisoned
 * and the queue ends empty. */
static void test_job_move_groups__group_crash_among_deletes(void **state)
{
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e[GRP_CRASH_N];
	char jobs[512], rk[32], id[64];
	struct proc p1, p2;

	o.visibility_s = 2;
	mv_std_jobs(jobs, sizeof(jobs), m);
	for (int i = 0; i < GRP_CRASH_N; i++) {
		snprintf(rk, sizeof(rk), "settling %03d", i);
		e[i] = mv_employee("Settling", rk, i + 1);
		mv_write_entity(m, m->emp, e[i]);
		mv_put_job(m, "archive-employee", "Settling", rk, NULL, false, id);
	}
	o.crash_at = "deliver.group.delete_answered";
	mv_start_crashing_worker(&p1, m, "move-group-crash-deletes", jobs, &o);
	long long back = mv_queue_count(m, m->fx.t->queue);
	ITEST_CHECK(back >= 0 && back < GRP_CRASH_N,
	            "%lld of %d messages left after the first delete's answer", back, GRP_CRASH_N);
	print_message("  %lld of %d messages left after the first delete's answer\n", back, GRP_CRASH_N);
	for (int i = 0; i < GRP_CRASH_N; i++)
		mv_assert_only_in(m, m->arch, m->emp, e[i], "a crash among the group's deletes");

	o.crash_at = NULL;
	mv_start_worker(&p2, m, "move-group-crash-deletes-rerun", jobs, &o);
	PROC_EXPECT_LOG(&p2, 1, 15000, "start"); /* even with nothing left to do, stopped once running */
	if (back > 0)
		PROC_EXPECT_LOG(&p2, (size_t)back, 15000, "message", "outcome", "succeeded", "detail",
		                "already-moved");
	for (int64_t end = ecw_clock_now_ms() + 15000; mv_queue_count(m, m->fx.t->queue) != 0;) {
		ITEST_CHECK(ecw_clock_now_ms() < end, "messages left on the queue after the rerun");
		itest_sleep_ms(100);
	}
	for (int i = 0; i < GRP_CRASH_N; i++) {
		mv_assert_only_in(m, m->arch, m->emp, e[i], "the rerun");
		ecw_entity_free(e[i]);
	}
	assert_int_equal(proc_count(&p2, "message", NULL), (size_t)back);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p2);
}

/* One member changes between the group's copy and its delete: five
 * employees of one partition in one group, the worker held for 3 s right
 * after its transaction of copies (ECW_TEST_PAUSE_AT=move.group.copied)
 * while the application updates one of them. The transaction of deletes is
 * If-Match the versions read, so it must be refused (412) as a whole; each
 * member then runs alone, and the changed one must end archived in its
 * NEWER version (a delete that ignored the change would lose it, keeping
 * the old copy), the others as they were. */
static void test_job_move_groups__group_member_changed_before_delete(void **state)
{
	enum { N = 5, CHANGED = 2 };
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct ecw_entity *e[N], *v2;
	char jobs[512], rk[32], id[N][64], group[16];
	struct proc p;
	size_t n = 0;

	for (int i = 0; i < N; i++) {
		snprintf(rk, sizeof(rk), "a+b&c=d%% %d", i);
		e[i] = mv_employee("Sales", rk, 1);
		mv_write_entity(m, m->emp, e[i]);
		mv_put_job(m, "archive-employee", "Sales", rk, NULL, false, id[i]);
	}
	v2 = mv_employee("Sales", ecw_entity_rk(e[CHANGED]), 2);
	o.pause_at = "move.group.copied:3000";
	mv_start_worker(&p, m, "move-group-changed", mv_std_jobs(jobs, sizeof(jobs), m), &o);

	/* The copies are in: the group is paused before its delete. */
	for (int64_t end = itest_now_ms() + 15000; itest_now_ms() < end; itest_sleep_ms(20)) {
		struct ecw_entity **all = itest_query_all(&n, m->c, m->arch, NULL); /* n is set by the call */
		itest_entities_free(all, n);
		if (n == N)
			break;
	}
	ITEST_CHECK(n == N, "%zu of %d copies appeared; log:\n%s", n, N, proc_tail(p.log_path, 20));
	int err = ecw_table_write(NULL, m->c, m->emp, v2, ECW_WRITE_UPDATE, "*");
	ITEST_CHECK(err == 0, "updating %s during the pause: %s (the group deleted the source first?)",
	            ecw_entity_rk(v2), itest_last_error());

	snprintf(group, sizeof(group), "%d", N);
	for (int i = 0; i < N; i++)
		PROC_EXPECT_LOG(&p, 1, 15000, "message", "message_id", id[i], "outcome", "succeeded", "group",
		                group);
	expect_successes(&p, id, N, "");
	assert_int_equal(proc_count(&p, "message", "outcome", "retried", NULL), 0);
	for (int i = 0; i < N; i++)
		mv_assert_only_in(m, m->arch, m->emp, i == CHANGED ? v2 : e[i],
		                  i == CHANGED ? "the version written after the group's read" : "unchanged");
	assert_int_equal(mv_table_rows(m, m->arch), N);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
	mv_finish(&p);
	for (int i = 0; i < N; i++)
		ecw_entity_free(e[i]);
	ecw_entity_free(v2);
}

/* 200 archive messages over 2 partitions, every one enqueued before the
 * worker starts: one by one a move costs 3 table requests (GET, insert,
 * delete); a group of 14 costs a query, a transaction of copies and one of
 * deletes. Prints the requests per message (ecw_storage_requests_total). */
static void test_job_move_groups__requests_per_message(void **state)
{
	enum { N = 200 };
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	char jobs[512], rk[32], id[64], *page = NULL;
	struct proc p;

	for (int i = 0; i < N; i++) {
		const char *pk = i % 2 ? "East" : "West";
		struct ecw_entity *e;
		snprintf(rk, sizeof(rk), "emp '%03d", i);
		e = mv_employee(pk, rk, i % 5 + 1);
		mv_write_entity(m, m->emp, e);
		ecw_entity_free(e);
		mv_put_job(m, "archive-employee", pk, rk, NULL, false, id);
	}
	o.batch_size = 32;
	o.metrics_port = proc_free_port();
	int64_t t0 = ecw_clock_now_ms();
	mv_start_worker(&p, m, "move-group-requests", mv_std_jobs(jobs, sizeof(jobs), m), &o);
	PROC_EXPECT_LOG(&p, N, 60000, "message", "outcome", "succeeded");
	long long ms = (long long)(ecw_clock_now_ms() - t0);
	assert_int_equal(proc_http_get(&page, o.metrics_port, "/metrics"), 200);
	double all = proc_metric(page, "ecw_storage_requests_total", NULL, NULL), table = 0;
	static const char *const tops[] = {"op=\"table.get\"",
	                                   "op=\"table.query\"",
	                                   "op=\"table.batch\"",
	                                   "op=\"table.insert\"",
	                                   "op=\"table.delete\"",
	                                   "op=\"table.update\"",
	                                   NULL};
	for (size_t i = 0; tops[i]; i++)
		table += proc_metric(page, "ecw_storage_requests_total", NULL, tops[i], NULL);
	size_t grouped = 0;
	long long largest = largest_group(&p, &grouped);
	print_message("  %d move messages over 2 partitions in %lld ms: %.2f table requests per message, "
	              "%.2f storage requests per message in all; %zu ran in groups (largest %lld)\n",
	              N, ms, table / N, all / N, grouped, largest);
	assert_int_equal(mv_table_rows(m, m->arch), N);
	assert_int_equal(mv_table_rows(m, m->emp), 0);
	ITEST_CHECK(table / N <= 0.6,
	            "%.2f table requests per move message: the groups did not read with queries (one GET "
	            "each makes it over 1)",
	            table / N);
	free(page);
	mv_finish(&p);
}

/* One pass of test_job_move_groups__group_deletes_pipelined: n moves of
 * one partition through faultproxy; the worker's storage requests (its
 * metrics, just before it stops) and faultproxy's bursts of requests. */
static void moves_through_proxy(struct mv *m, const char *name, const char *storage_extra, int n,
                                long long *requests, long long *bursts)
{
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct proc p, proxy;
	struct proc_proxied ps;
	char jobs[512], rk[32], id[64], stats[640], proxy_name[96], stats_name[128], *page = NULL;

	for (int i = 0; i < n; i++) {
		struct ecw_entity *e;
		snprintf(rk, sizeof(rk), "%s %03d", name, i);
		e = mv_employee("Sales", rk, 1);
		mv_write_entity(m, m->emp, e);
		ecw_entity_free(e);
		mv_put_job(m, "archive-employee", "Sales", rk, NULL, false, id);
	}
	proc_proxied_storage(&ps);
	snprintf(proxy_name, sizeof(proxy_name), "%s-proxy", name);
	snprintf(stats_name, sizeof(stats_name), "%s.json", proxy_name);
	proc_path(stats, sizeof(stats), stats_name);
	const char *pargs[] = {"--map", ps.map_q, "--map", ps.map_t, "--stats", stats, NULL};
	proc_start_program(&proxy, proxy_name, proc_tool_bin("faultproxy"), pargs, NULL);
	o.batch_size = 32;
	o.concurrency = 2;
	o.metrics_port = proc_free_port();
	o.env = ps.envcs;
	o.storage_extra = storage_extra;
	mv_start_worker(&p, m, name, mv_std_jobs(jobs, sizeof(jobs), m), &o);
	PROC_EXPECT_LOG(&p, (size_t)n, 60000, "message", "outcome", "succeeded");
	assert_int_equal(proc_http_get(&page, o.metrics_port, "/metrics"), 200);
	*requests = (long long)proc_metric(page, "ecw_storage_requests_total", NULL, NULL);
	free(page);
	mv_finish(&p);
	proc_stop(&proxy, 10000);
	*bursts = proc_proxy_stat(stats, "requests");
}

/* A group's message deletes go pipelined, a write for them all (storage.pipelining, on unless
 * false). faultproxy, between the worker and Azurite, counts bursts of requests, which pipelined
 * requests share, and the worker counts its requests: with pipelining the bursts are fewer by most of
 * the deletes; with `pipelining: false` each request is a burst of its own. Every move is done either
 * way, each message deleted. */
static void test_job_move_groups__group_deletes_pipelined(void **state)
{
	enum { N = 24 };
	struct mv *m = *state;
	long long requests, bursts;

	moves_through_proxy(m, "move-group-pipelined", NULL, N, &requests, &bursts);
	print_message("  pipelined: %lld requests in %lld bursts\n", requests, bursts);
	ITEST_CHECK(bursts <= requests - N / 2,
	            "%lld bursts for %lld requests: the group's %d deletes did not share their writes",
	            bursts, requests, N);
	assert_int_equal(mv_table_rows(m, m->arch), N);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);

	moves_through_proxy(m, "move-group-alone", "  pipelining: false\n", N, &requests, &bursts);
	print_message("  pipelining: false: %lld requests in %lld bursts\n", requests, bursts);
	/* Polls after the metrics were read only add bursts. */
	ITEST_CHECK(bursts >= requests - 1, "%lld bursts for %lld requests with pipelining: false", bursts,
	            requests);
	assert_int_equal(mv_table_rows(m, m->arch), 2 * N);
	assert_int_equal(mv_table_rows(m, m->emp), 0);
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
}

/* Renewals go on while a group's pipelined deletes hang: a slow message (test-sleep, 8 s) runs beside a
 * group of five moves whose pipelined deletes get no answer, faultproxy holding the answers of the first
 * pipelined burst (--stall-pipelined 1; Azurite deletes them all the same) until the worker gives up after
 * storage.request_timeout, 5 s, and sends each delete alone (answered 404: the group's members end
 * lease-lost, deleted). All that time settle_group holds the five members' slot locks, and with a lease of
 * 2 s the slow message must be renewed every second meanwhile. A renewer that waited for a busy slot's lock
 * renewed nothing until the exchange ended: the slow message's lease ran out (lease_lost, the message
 * delivered again). Passing busy slots by (runtime_renew.c), it renews the slow message all along. */
static void test_job_move_groups__renewals_go_on_while_deletes_hang(void **state)
{
	enum { N = 5, VIS_S = 2, TIMEOUT_S = 5, SLOW_S = 8 };
	struct mv *m = *state;
	struct mv_wopts o = MV_WOPTS_DEFAULT;
	struct proc p, proxy;
	struct proc_proxied ps;
	char jobs[640], std[512], rk[32], id[N][64], slow_id[64], stats[640], storage[64];
	int k;

	/* The slow message first: the oldest, a job thread takes it alone; the
	 * other takes the group. */
	mv_put_job(m, "slow", "Slow", "one", NULL, false, slow_id);
	for (int i = 0; i < N; i++) {
		struct ecw_entity *e;
		snprintf(rk, sizeof(rk), "hanging %03d", i);
		e = mv_employee("Hanging", rk, 1);
		mv_write_entity(m, m->emp, e);
		ecw_entity_free(e);
		mv_put_job(m, "archive-employee", "Hanging", rk, NULL, false, id[i]);
	}
	k = snprintf(jobs, sizeof(jobs), "%s  slow: {type: test-sleep, duration: %ds}\n",
	             mv_std_jobs(std, sizeof(std), m), SLOW_S);
	assert_true(k > 0 && (size_t)k < sizeof(jobs));
	proc_proxied_storage(&ps);
	proc_path(stats, sizeof(stats), "move-group-hang-proxy.json");
	const char *pargs[] = {"--map", ps.map_q,  "--map", ps.map_t, "--stall-pipelined",
	                       "1",     "--stats", stats,   NULL};
	proc_start_program(&proxy, "move-group-hang-proxy", proc_tool_bin("faultproxy"), pargs, NULL);
	snprintf(storage, sizeof(storage), "  request_timeout: %ds\n", TIMEOUT_S);
	o.visibility_s = VIS_S;
	o.concurrency = 2;
	o.env = ps.envcs;
	o.storage_extra = storage;
	int64_t t0 = ecw_clock_now_ms();
	mv_start_worker(&p, m, "move-group-hang", jobs, &o);

	PROC_EXPECT_LOG(&p, 1, (SLOW_S + 10) * 1000, "message", "message_id", slow_id);
	long long ms = (long long)(ecw_clock_now_ms() - t0);
	for (int i = 0; i < N; i++)
		PROC_EXPECT_LOG(&p, 1, 5000, "message", "message_id", id[i], "group", "5");
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *slow = proc_log_find(&log, 0, "message", "message_id", slow_id, NULL);
	size_t renewals = proc_log_count(&log, "lease_renewed", "message_id", slow_id, NULL);
	long long held_ms =
	    proc_field_int(proc_log_find(&log, 0, "message", "message_id", id[0], NULL), "duration_ms", 0);
	print_message(
	    "  the group's deletes held %lld ms; the slow message renewed %zu times, its outcome %s "
	    "after %lld ms\n",
	    held_ms, renewals, proc_field(slow, "outcome"), ms);
	ITEST_CHECK(proc_log_count(&log, "lease_lost", "message_id", slow_id, NULL) == 0,
	            "the slow message's lease was lost while the group's deletes hung (%zu renewals in all); "
	            "log %s:\n%s",
	            renewals, p.log_path, proc_tail(p.log_path, 30));
	ITEST_CHECK(strcmp(proc_field(slow, "outcome"), "succeeded") == 0 &&
	                proc_field_int(slow, "dequeue_count", 0) == 1,
	            "the slow message: outcome %s at delivery %lld, expected succeeded at 1",
	            proc_field(slow, "outcome"), proc_field_int(slow, "dequeue_count", 0));
	ITEST_CHECK(held_ms >= TIMEOUT_S * 1000, "the group settled in %lld ms: its deletes were not held",
	            held_ms);
	ITEST_CHECK(renewals >= (size_t)(SLOW_S / VIS_S), "the slow message renewed %zu times in %d s",
	            renewals, SLOW_S);
	proc_log_dispose(&log);
	mv_finish(&p);
	proc_stop(&proxy, 10000);
	assert_int_equal(proc_proxy_stat(stats, "faults.stall_pipelined"), 1);
	for (int i = 0; i < N; i++) {
		snprintf(rk, sizeof(rk), "hanging %03d", i);
		struct ecw_entity *a = mv_get_or_null(m, m->arch, "Hanging", rk);
		ITEST_CHECK(a != NULL, "%s was not archived", rk);
		ecw_entity_free(a);
	}
	assert_int_equal(mv_queue_count(m, m->fx.t->queue), 0);
	assert_int_equal(mv_queue_count(m, m->fx.poison), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_move_groups__group_moves_a_receive_together, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_groups__requests_per_message, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_groups__group_deletes_pipelined, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_groups__group_crash_among_deletes, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_groups__group_crash_after_each_step, mv_setup,
	                                    mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_groups__group_member_changed_before_delete,
	                                    mv_setup, mv_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_groups__renewals_go_on_while_deletes_hang, mv_setup,
	                                    mv_teardown),
	};
	/* ECW_TEST_FILTER=test_job_move_groups__group_crash* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("job_move_groups", tests, NULL, NULL);
}
