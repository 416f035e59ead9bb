/* SPDX-License-Identifier: MIT */
/* test_poison_replay.c - `ecworker poison replay` against a real Azurite, run as an operator runs it
 * (build/ecworker-test as a process; the fixture is poisonfx.h): the test builds poison envelopes itself
 * (ecw_poison_envelope, with awkward originals), puts them on the poison queue, runs the command, and then
 * reads both queues back in full with the client: replay puts `original` on the job queue unchanged and
 * deletes exactly what it replayed; a worker then processes what was replayed; --rate paces; messages
 * that are not envelopes replay unchanged and are never selected by --job or --reason; a replay killed
 * with SIGKILL, interrupted with SIGINT, or two replays at once, lose nothing; --hold takes days; a
 * canary that is poisoned again stops the replay, and canaries that succeed let the rest follow. The
 * heavy cases (hundreds of deletes) run on an Azurite of their own, since Azurite's queue GC stalls the
 * whole service after many deletes. What list and purge select is in test_poison_list.c. */
#include "itest.h"
#include "poisonfx.h"
#include "proc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_buf.h"
#include "ecw_codec.h"
#include "poison.h"

/* ---- poison envelopes read back -------------------------------------------------------- */

/* How many messages of s are envelopes of p's original (with error
 * containing error_has, unless NULL). */
static size_t envelopes_of(const struct px_qset *s, const struct px_put *p, const char *error_has)
{
	size_t k = 0;

	for (size_t m = 0; m < s->n; m++) {
		struct ecw_poison_view v;
		ECW_ASSERT_OK(ecw_poison_parse(&v, s->v[m].text, s->v[m].len));
		k += v.envelope && v.original_len == p->original_len &&
		     memcmp(v.original, p->original, v.original_len) == 0 &&
		     (!error_has || (v.error && strstr(v.error, error_has)));
		ecw_poison_view_dispose(&v);
	}
	return k;
}

/* ---- replay ---------------------------------------------------------------------------- */

/* Awkward originals for job `job`, rk "<prefix>-NN": unicode, quotes,
 * backslashes, XML specials, a base64 message, a long one. Returns the
 * count; texts[i] are heap strings, rks[i] their row keys. */
#define N_AWKWARD 8
static size_t awkward_originals(char **texts, char (*rks)[48], const char *job, const char *prefix)
{
	struct ecw_buf b;
	size_t n = 0;
	char *pad;

	for (int i = 0; i < N_AWKWARD; i++)
		snprintf(rks[i], sizeof(rks[0]), "%s-%02d", prefix, i);
	texts[n++] = px_job_message(job, "Zo\xc3\xab \xe2\x9c\x93 \xf0\x9f\x98\x80", rks[0],
	                            "\"note\":\"caf\xc3\xa9\"");
	texts[n++] = px_job_message(job, "say \"hi\" 'there'", rks[1], "\"q\":\"\\\"quoted\\\"\"");
	texts[n++] = px_job_message(job, "p", rks[2], "\"path\":\"C:\\\\dir\\\\file \\\\n not a newline\"");
	texts[n++] = px_job_message(job, "a+b&c=d%", rks[3], "\"xml\":\"<tag attr='1'>&amp; &lt;/tag>\"");
	/* base64 of a job message, as the worker accepts it */
	{
		char *inner = px_job_message(job, "b64", rks[4], "\"via\":\"base64\"");
		ecw_buf_init(&b, ECW_BUF_DEFAULT_MAX);
		ECW_ASSERT_OK(ecw_base64_encode(&b, inner, strlen(inner)));
		texts[n++] = ecw_buf_take(&b);
		free(inner);
	}
	/* long: 20,000 characters of padding */
	pad = malloc(20000 + 16);
	assert_non_null(pad);
	memcpy(pad, "\"pad\":\"", 7);
	for (int i = 0; i < 20000; i++)
		pad[7 + i] = (char)('a' + i % 26);
	memcpy(pad + 7 + 20000, "\"", 2);
	texts[n++] = px_job_message(job, "long", rks[5], pad);
	free(pad);
	/* spacing and key order a JSON library would not reproduce */
	{
		char buf[256];
		snprintf(buf, sizeof(buf),
		         "  {  \"rk\" : \"%s\",\n\t\"pk\":\"tabs\",  \"job\":\"%s\" , \"n\": 1.50 }  ",
		         rks[6], job);
		texts[n++] = strdup(buf);
	}
	texts[n++] = px_job_message(job, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", rks[7],
	                            "\"ctl\":\"tab\\there\\u0001\"");
	assert_int_equal(n, N_AWKWARD);
	return n;
}

/* Waits until the fixture's table holds at least want entities (test-count:
 * one per run); returns how many it holds. */
static size_t wait_runs(struct px *x, size_t want, int timeout_ms)
{
	int64_t end = itest_now_ms() + timeout_ms;
	size_t n = 0;

	for (;;) {
		struct ecw_entity **v = itest_query_all(&n, x->c, x->table, NULL);
		itest_entities_free(v, n);
		if (n >= want || itest_now_ms() > end)
			return n;
		itest_sleep_ms(200);
	}
}

/* Every entity's PartitionKey (the message's rk, test-count) counted. */
static size_t runs_for(struct px *x, const char *rk)
{
	size_t n = 0, hits = 0;
	struct ecw_entity **v = itest_query_all(&n, x->c, x->table, NULL);

	for (size_t i = 0; i < n; i++)
		hits += strcmp(ecw_entity_pk(v[i]), rk) == 0;
	itest_entities_free(v, n);
	return hits;
}

static void test_poison_replay__replay_moves_originals_byte_for_byte(void **state)
{
	struct px *x = *state;
	char *sel[N_AWKWARD], *other[N_AWKWARD];
	char sel_rk[N_AWKWARD][48], other_rk[N_AWKWARD][48];
	struct px_put p[40];
	bool keep[40];
	size_t n = 0, nsel = 0;
	time_t now = time(NULL);
	char *out = NULL;

	memset(p, 0, sizeof(p));
	px_write_config(x, "  count: {type: test-count, table: %T}\n"
	                   "  idle: {type: test-noop}\n");
	x->table_used = true;
	ECW_ASSERT_OK(ecw_table_create(NULL, x->c, x->table));
	awkward_originals(sel, sel_rk, "count", "sel");
	awkward_originals(other, other_rk, "idle", "other");
	/* 8 selected (job count) and 32 others (job idle: the same awkward
	 * texts, and more), 40 in all: more than one peek shows. */
	for (int i = 0; i < N_AWKWARD; i++, n++) {
		px_put_envelope(&p[n], x, "count", "permanent", now - 3600, "TableNotFound: fixed now",
		                sel[i], strlen(sel[i]), "pk", sel_rk[i]);
		keep[n] = false;
		nsel++;
	}
	for (int i = 0; n < 40; i++, n++) {
		px_put_envelope(&p[n], x, "idle", i % 2 ? "permanent" : "max-dequeue", now - 7200,
		                "still broken", other[i % N_AWKWARD], strlen(other[i % N_AWKWARD]), "pk",
		                other_rk[i % N_AWKWARD]);
		keep[n] = true;
	}

	px_cmd_expect(&out, NULL, x, 0, "replay", (const char *const[]){"--job", "count", NULL});
	ITEST_CHECK(strstr(out, "8 selected, 8 replayed") != NULL, "summary: %s", out);
	free(out);

	/* The poison queue: the 32 others, untouched; the job queue: exactly
	 * the 8 originals, byte for byte. */
	px_expect_poison_exactly(x, p, n, keep, false);
	struct px_qset jq;
	px_read_queue(&jq, x, x->queue, true);
	assert_int_equal(jq.n, nsel);
	for (size_t i = 0; i < nsel; i++)
		ITEST_CHECK(px_qset_count_text(&jq, sel[i], strlen(sel[i])) == 1,
		            "original %zu is not on the job queue exactly once, byte for byte:\n%.300s", i,
		            sel[i]);
	px_qset_free(&jq);

	/* A worker processes what was replayed: one run for each. */
	struct proc w;
	const char *args[] = {"run", "-c", x->cfg, NULL};
	proc_start(&w, "poison-worker", args, x->env);
	size_t runs = wait_runs(x, nsel, 30000);
	proc_stop(&w, 20000);
	ITEST_CHECK(runs == nsel, "%zu runs for %zu replayed messages; worker log:\n%s", runs, nsel,
	            proc_tail(w.log_path, 20));
	for (size_t i = 0; i < nsel; i++)
		ITEST_CHECK(runs_for(x, sel_rk[i]) == 1, "replayed message %s was not run once", sel_rk[i]);
	assert_int_equal(px_queue_count(x, x->queue), 0);
	/* Nothing came back poisoned. */
	assert_int_equal(px_queue_count(x, x->poison), 40 - (long long)nsel);

	for (int i = 0; i < N_AWKWARD; i++) {
		free(sel[i]);
		free(other[i]);
	}
	px_puts_clear(p, n);
	proc_assert_logs_clean();
}

/* The one timing test: 200 messages at --rate 50 take about 4 s. */
static void test_poison_replay__replay_rate_paces(void **state)
{
	struct px *x = *state;
	struct px_put *p = calloc(200, sizeof(*p));
	time_t now = time(NULL);
	char rk[32], *out = NULL;

	assert_non_null(p);
	px_write_config(x, "  alpha: {type: test-noop}\n");
	for (int i = 0; i < 200; i++) {
		snprintf(rk, sizeof(rk), "r%03d", i);
		px_put_job(&p[i], x, "alpha", "permanent", now - 60, "e", "p", rk, "");
	}
	int64_t t0 = itest_now_ms();
	px_cmd_expect(&out, NULL, x, 0, "replay", (const char *const[]){"--rate", "50", NULL});
	int64_t ms = itest_now_ms() - t0;
	ITEST_CHECK(strstr(out, "200 selected, 200 replayed") != NULL, "summary: %s", out);
	ITEST_CHECK(ms >= 3500 && ms <= 5000, "200 messages at --rate 50 took %lld ms, expected 3500..5000",
	            (long long)ms);
	assert_int_equal(px_queue_count(x, x->poison), 0);
	assert_int_equal(px_queue_count(x, x->queue), 200);
	free(out);
	px_puts_free(p, 200);
	proc_assert_logs_clean();
}

/* Messages that are not envelopes: never selected by --job or --reason,
 * replayed unchanged byte for byte. */
static void test_poison_replay__foreign_messages_replay_unchanged(void **state)
{
	struct px *x = *state;
	static const char *const foreign[] = {
	    /* what an Azure Functions poison queue holds: the message itself */
	    "process order 42 for Zo\xc3\xab: \"rush\" \\ <now> & later",
	    /* JSON, even a job message for alpha, but not an envelope */
	    "{\"job\":\"alpha\",\"pk\":\"p\",\"rk\":\"looks-like-a-job\"}",
	    /* envelope-like but without the marker / with another version */
	    "{\"ecw_poison\":2,\"original\":\"x\",\"job\":\"alpha\",\"reason\":\"permanent\"}",
	    "{\"ecw_poison\":1,\"job\":\"alpha\",\"reason\":\"permanent\"}",
	    /* an envelope followed by more text is not one */
	    "{\"ecw_poison\":1,\"original\":\"y\",\"job\":\"alpha\"} trailing",
	    /* base64 text */
	    "eyJqb2IiOiJhbHBoYSIsInBrIjoicCIsInJrIjoiYjY0In0=",
	};
	enum { NF = sizeof(foreign) / sizeof(foreign[0]) };
	struct px_put p[NF + 1];
	struct px_idset got;
	char *out = NULL;

	memset(p, 0, sizeof(p));
	px_write_config(x, "  alpha: {type: test-noop}\n");
	for (size_t i = 0; i < NF; i++) {
		p[i].text = strdup(foreign[i]);
		p[i].len = strlen(foreign[i]);
		px_put_text(p[i].id, x, x->poison, foreign[i], p[i].len);
	}
	char *orig = px_job_message("alpha", "p", "real", "");
	px_put_envelope(&p[NF], x, "alpha", "permanent", time(NULL) - 60, "e", orig, strlen(orig), "p",
	                "real");

	/* --job and --reason select the real envelope only. */
	px_list_ids(&got, x, (const char *const[]){"--job", "alpha", NULL}, NULL);
	ITEST_CHECK(got.n == 1 && strcmp(got.v[0], p[NF].id) == 0, "--job alpha selected %zu messages",
	            got.n);
	px_idset_free(&got);
	px_list_ids(&got, x, (const char *const[]){"--reason", "permanent", NULL}, NULL);
	ITEST_CHECK(got.n == 1 && strcmp(got.v[0], p[NF].id) == 0, "--reason permanent selected %zu messages",
	            got.n);
	px_idset_free(&got);
	/* --since uses the time they were put: all of them are recent. */
	px_list_ids(&got, x, (const char *const[]){"--since", "10m", NULL}, NULL);
	assert_int_equal(got.n, NF + 1);
	px_idset_free(&got);

	/* replay --job alpha leaves every foreign message alone */
	px_cmd_expect(&out, NULL, x, 0, "replay", (const char *const[]){"--job", "alpha", NULL});
	free(out);
	bool keep[NF + 1];
	for (size_t i = 0; i < NF; i++)
		keep[i] = true;
	keep[NF] = false;
	px_expect_poison_exactly(x, p, NF + 1, keep, true);
	struct px_qset jq;
	px_read_queue(&jq, x, x->queue, false);
	ITEST_CHECK(jq.n == 1 && jq.v[0].len == strlen(orig) && memcmp(jq.v[0].text, orig, jq.v[0].len) == 0,
	            "the job queue holds %zu messages, expected the envelope's original", jq.n);
	px_qset_free(&jq);

	/* replay by --id: each foreign text goes back unchanged */
	const char *args[2 * NF + 2];
	size_t k = 0;
	for (size_t i = 0; i < NF; i++) {
		args[k++] = "--id";
		args[k++] = p[i].id;
	}
	args[k] = NULL;
	px_cmd_expect(&out, NULL, x, 0, "replay", args);
	free(out);
	assert_int_equal(px_queue_count(x, x->poison), 0);
	px_read_queue(&jq, x, x->queue, false);
	assert_int_equal(jq.n, NF);
	for (size_t i = 0; i < NF; i++)
		ITEST_CHECK(px_qset_count_text(&jq, foreign[i], strlen(foreign[i])) == 1,
		            "foreign message %zu is not on the job queue byte for byte: %s", i, foreign[i]);
	px_qset_free(&jq);
	free(orig);
	px_puts_clear(p, NF + 1);
	proc_assert_logs_clean();
}

/* ---- crashes and concurrency (a private Azurite) ------------------------------------------ */

/* n envelopes of job alpha, originals with rk "r0000".. and a Zoë. */
static struct px_put *put_many(struct px *x, size_t n)
{
	struct px_put *p = calloc(n, sizeof(*p));
	time_t now = time(NULL);
	char rk[32];

	assert_non_null(p);
	for (size_t i = 0; i < n; i++) {
		snprintf(rk, sizeof(rk), "r%04zu", i);
		px_put_job(&p[i], x, "alpha", "permanent", now - 60, "e", "Zo\xc3\xab", rk,
		           "\"q\":\"\\\"x\\\"\"");
	}
	return p;
}

/* Every original is on the job queue (at least once) or still on the poison
 * queue as an envelope with that original; returns how many are on the job
 * queue. dups receives how many originals are on the job queue twice or more
 * or on both queues. */
static size_t expect_none_lost(struct px *x, const struct px_put *p, size_t n, size_t *dups,
                               size_t *in_poison)
{
	struct px_qset jq, pq;
	size_t on_job = 0;

	px_read_queue(&jq, x, x->queue, false);
	px_read_queue(&pq, x, x->poison, false);
	*dups = 0;
	*in_poison = 0;
	for (size_t i = 0; i < n; i++) {
		size_t j = px_qset_count_text(&jq, p[i].original, p[i].original_len);
		size_t k = envelopes_of(&pq, &p[i], NULL);
		ITEST_CHECK(j + k > 0, "original %zu (%.80s) is on neither queue: lost", i, p[i].original);
		on_job += j > 0;
		*in_poison += k > 0;
		*dups += j + k > 1;
	}
	ITEST_CHECK(jq.n <= n + *dups * 2 && pq.n <= n, "unexpected extra messages: %zu job, %zu poison",
	            jq.n, pq.n);
	px_qset_free(&jq);
	px_qset_free(&pq);
	return on_job;
}

/* Puts n envelopes (put_many), starts `replay --rate 100 --hold HOLD`,
 * sends sig after ms and waits for the exit. */
static struct px_put *replay_then_signal(struct proc *r, struct px *x, size_t n, const char *hold, int ms,
                                         int sig)
{
	px_write_config(x, "  alpha: {type: test-noop}\n");
	struct px_put *p = put_many(x, n);
	const char *args[] = {"poison", "replay", "-c", x->cfg, "--rate", "100", "--hold", hold, NULL};
	proc_start(r, "poison-replay-signal", args, x->env);
	itest_sleep_ms(ms);
	ITEST_CHECK(proc_alive(r), "the replay ended before signal %d (status %d):\n%s", sig,
	            proc_exit_code(r), proc_tail(r->log_path, 20));
	proc_signal(r, sig);
	ITEST_CHECK(proc_wait(r, 10000), "the replay did not end within 10 s of signal %d", sig);
	return p;
}

static void test_poison_replay__replay_killed_loses_nothing(void **state)
{
	struct px *x = *state;
	const size_t n = 500;
	size_t dups, in_poison;
	struct proc r;

	struct px_put *p = replay_then_signal(&r, x, n, "3s", 2000, SIGKILL);
	/* What it held reappears once its hold (3 s) ends. */
	itest_sleep_ms(4000);
	size_t on_job = expect_none_lost(x, p, n, &dups, &in_poison);
	ITEST_CHECK(on_job > 0 && in_poison > 0,
	            "killed after 2 s at 100/s: %zu on the job queue, %zu still poisoned", on_job, in_poison);
	print_message("killed replay: %zu on the job queue, %zu still on the poison queue, %zu on both\n",
	              on_job, in_poison, dups);
	px_puts_free(p, n);
	proc_assert_logs_clean();
}

/* Ctrl-C (SIGINT) stops after the message in hand, exits 130, and releases
 * what it held at once: with the default hold (60 s), every message not
 * replayed is visible again right after the exit, none on both queues. */
static void test_poison_replay__replay_interrupted_releases_at_once(void **state)
{
	struct px *x = *state;
	const size_t n = 200;
	size_t dups, in_poison;
	struct proc r;

	struct px_put *p = replay_then_signal(&r, x, n, "60s", 1000, SIGINT);
	ITEST_CHECK(proc_exit_code(&r) == 130, "exit status %d after SIGINT, expected 130:\n%s",
	            proc_exit_code(&r), proc_tail(r.log_path, 20));
	size_t on_job = expect_none_lost(x, p, n, &dups, &in_poison);
	assert_int_equal(dups, 0);
	assert_int_equal(on_job + in_poison, n);
	ITEST_CHECK(on_job > 0 && in_poison > 0, "%zu replayed, %zu left: not interrupted midway", on_job,
	            in_poison);
	px_puts_free(p, n);
	proc_assert_logs_clean();
}

/* --hold takes the units its error message names (1s to 7d). */
static void test_poison_replay__hold_accepts_days(void **state)
{
	struct px *x = *state;

	px_write_config(x, "  alpha: {type: test-noop}\n");
	px_cmd_expect(NULL, NULL, x, 0, "list", (const char *const[]){"--hold", "1d", NULL});
	px_cmd_expect(NULL, NULL, x, 0, "list", (const char *const[]){"--hold", "2h", NULL});
	px_cmd_expect(NULL, NULL, x, 2, "list", (const char *const[]){"--hold", "8d", NULL});
	proc_assert_logs_clean();
}

static void test_poison_replay__two_replays_at_once(void **state)
{
	struct px *x = *state;
	const size_t n = 300;
	size_t dups, in_poison;
	struct proc r[2];

	px_write_config(x, "  alpha: {type: test-noop}\n");
	struct px_put *p = put_many(x, n);
	const char *args[] = {"poison", "replay", "-c", x->cfg, NULL};
	proc_start(&r[0], "poison-replay-a", args, x->env);
	proc_start(&r[1], "poison-replay-b", args, x->env);
	for (int i = 0; i < 2; i++) {
		ITEST_CHECK(proc_wait(&r[i], 60000), "replay %d still running after 60 s", i);
		ITEST_CHECK(proc_exit_code(&r[i]) == 0, "replay %d exited %d:\n%s", i, proc_exit_code(&r[i]),
		            proc_tail(r[i].log_path, 20));
	}
	assert_int_equal(px_queue_count(x, x->poison), 0);
	size_t on_job = expect_none_lost(x, p, n, &dups, &in_poison);
	assert_int_equal(on_job, n);
	assert_int_equal(in_poison, 0);
	print_message("two replays: %zu originals replayed, %zu twice\n", on_job, dups);
	px_puts_free(p, n);
	proc_assert_logs_clean();
}

/* ---- the canary ------------------------------------------------------------------------ */

/* More than one peek shows: the canary's look at the poison queue receives. */
#define N_CANARY 40

static void test_poison_replay__canary_poisoned_again_stops(void **state)
{
	struct px *x = *state;
	struct px_put p[N_CANARY];
	char rk[32], *out = NULL, *err = NULL;
	struct proc w;
	time_t now = time(NULL);

	memset(p, 0, sizeof(p));
	px_write_config(x, "  doomed: {type: test-fail}\n");
	for (int i = 0; i < N_CANARY; i++) {
		snprintf(rk, sizeof(rk), "c%02d", i);
		px_put_job(&p[i], x, "doomed", "permanent", now - 600, "first failure", "p", rk, "");
	}
	proc_start_worker(&w, "poison-canary-fail-worker", x->cfg);
	int code = px_cmdv(&out, &err, x, "replay",
	                   (const char *const[]){"--canary", "3", "--canary-wait", "30s", NULL});
	/* The replay stops at the first canary that comes back; the worker
	 * poisons the other canaries too, once it gets to them. */
	for (int64_t end = itest_now_ms() + 20000; px_queue_count(x, x->queue) > 0 && itest_now_ms() < end;)
		itest_sleep_ms(100);
	proc_stop(&w, 20000);
	ITEST_CHECK(code == 1, "replay --canary exited %d, expected 1\n-- stdout:\n%s\n-- stderr:\n%s", code,
	            out, err);
	ITEST_CHECK(strstr(err, "poisoned again") != NULL, "stderr does not report 'poisoned again':\n%s",
	            err);
	free(out);
	free(err);

	/* The others untouched, the 3 canaries replaced by new envelopes of
	 * the same originals. */
	struct px_qset pq;
	size_t untouched = 0, again = 0;
	px_read_queue(&pq, x, x->poison, false);
	assert_int_equal(px_queue_count(x, x->queue), 0);
	for (int i = 0; i < N_CANARY; i++) {
		const struct px_qmsg *q = px_qset_find_id(&pq, p[i].id);
		if (q) {
			ITEST_CHECK(q->len == p[i].len && memcmp(q->text, p[i].text, q->len) == 0,
			            "untouched envelope %d changed", i);
			untouched++;
			continue;
		}
		size_t found = envelopes_of(&pq, &p[i], "can never succeed");
		ITEST_CHECK(found == 1, "canary %d did not come back as one new envelope (%zu)", i, found);
		again++;
	}
	assert_int_equal(untouched, N_CANARY - 3);
	assert_int_equal(again, 3);
	assert_int_equal(pq.n, N_CANARY);
	px_qset_free(&pq);
	px_puts_clear(p, N_CANARY);
	proc_assert_logs_clean();
}

static void test_poison_replay__canary_ok_replays_the_rest(void **state)
{
	struct px *x = *state;
	struct px_put p[40];
	char rk[32], *out = NULL, *err = NULL;
	struct proc w;
	time_t now = time(NULL);

	memset(p, 0, sizeof(p));
	x->table_used = true;
	ECW_ASSERT_OK(ecw_table_create(NULL, x->c, x->table));
	px_write_config(x, "  count: {type: test-count, table: %T}\n");
	for (int i = 0; i < 40; i++) {
		snprintf(rk, sizeof(rk), "k%02d", i);
		px_put_job(&p[i], x, "count", "max-dequeue", now - 600, "was down", "p", rk, "");
	}
	proc_start_worker(&w, "poison-canary-ok-worker", x->cfg);
	int code = px_cmdv(&out, &err, x, "replay",
	                   (const char *const[]){"--canary", "3", "--canary-wait", "30s", NULL});
	ITEST_CHECK(code == 0, "replay --canary exited %d, expected 0\n-- stdout:\n%s\n-- stderr:\n%s", code,
	            out, err);
	ITEST_CHECK(strstr(out, "40 selected, 40 replayed") != NULL, "summary: %s\n%s", out, err);
	free(out);
	free(err);
	assert_int_equal(px_queue_count(x, x->poison), 0);
	size_t runs = wait_runs(x, 40, 30000);
	proc_stop(&w, 20000);
	assert_int_equal(runs, 40);
	for (int i = 0; i < 40; i++) {
		snprintf(rk, sizeof(rk), "k%02d", i);
		ITEST_CHECK(runs_for(x, rk) == 1, "%s was not run once", rk);
	}
	assert_int_equal(px_queue_count(x, x->poison), 0);
	px_puts_clear(p, 40);
	proc_assert_logs_clean();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_poison_replay__foreign_messages_replay_unchanged, px_setup,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_replay__replay_moves_originals_byte_for_byte,
	                                    px_setup, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_replay__canary_poisoned_again_stops, px_setup,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_replay__canary_ok_replays_the_rest, px_setup,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_replay__replay_rate_paces, px_setup_private,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_replay__replay_killed_loses_nothing, px_setup_private,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_replay__two_replays_at_once, px_setup_private,
	                                    px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_replay__replay_interrupted_releases_at_once,
	                                    px_setup_private, px_teardown),
	    cmocka_unit_test_setup_teardown(test_poison_replay__hold_accepts_days, px_setup, px_teardown),
	};
	return cmocka_run_group_tests_name("poison_replay", tests, NULL, NULL);
}
