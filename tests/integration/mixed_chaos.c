/* SPDX-License-Identifier: MIT */
/* mixed_chaos.c - what a chaos run of the mixed-workload scenario adds (struct mixed_chaos; mixed.c runs
 * it, mixed_private.h): the workers' traffic through tests/tools/faultproxy (503s, connection resets
 * before and after the service did the work, stalls past storage.request_timeout), an on-disk Azurite
 * stopped and started again mid-run, and, once the chaos is over and the queue drained, the poison queue
 * listed with the operator's command (every envelope must carry a reason) and replayed with `poison
 * replay`; then every message put is accounted for, and the verdict checks that the chaos asked for
 * happened and that nothing was lost. Last, before the judge, the run ends as production ends it:
 * `ecworker audit`, which may find only the index's documented window, `audit --repair` of that job,
 * and an audit that finds nothing (mx_audit_end). (The SIGKILLs of random workers are mixed.c's
 * drive.) */
#include "auditfx.h"
#include "itest.h"
#include "mixed_private.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- chaos ------------------------------------------------------------------------------------ */

bool mx_has_faults(const struct mixed_chaos *ch)
{
	return ch->p503 > 0 || ch->preset > 0 || ch->pstall > 0;
}

/* A port from text that must hold one (the proxy's ready file). */
static int port_at(const char *s, char **end)
{
	long v;

	errno = 0;
	v = strtol(s, end, 10);
	return errno == 0 && *end != s && v > 0 && v <= 65535 ? (int)v : -1;
}

/* Starts faultproxy in front of the private Azurite's queue and table ports
 * and points the workers' connection string at it. */
void mx_start_proxy(struct mx *x, unsigned seed)
{
	const struct mixed_chaos *ch = &x->sc->chaos;
	char name[96], file[128], map_q[48], map_t[48], p503[32], preset[32], pstall[32], stall[32], sd[32];
	int qport = -1, tport = -1;

	snprintf(name, sizeof(name), "%s-proxy", x->sc->name);
	snprintf(file, sizeof(file), "%s.json", name);
	proc_path(x->proxy_stats, sizeof(x->proxy_stats), file);
	snprintf(file, sizeof(file), "%s.ready", name);
	proc_path(x->proxy_ready, sizeof(x->proxy_ready), file);
	unlink(x->proxy_ready);
	snprintf(map_q, sizeof(map_q), "0:127.0.0.1:%d", x->az.queue_port);
	snprintf(map_t, sizeof(map_t), "0:127.0.0.1:%d", x->az.table_port);
	snprintf(p503, sizeof(p503), "%.4f", ch->p503);
	snprintf(preset, sizeof(preset), "%.4f", ch->preset);
	snprintf(pstall, sizeof(pstall), "%.4f", ch->pstall);
	snprintf(stall, sizeof(stall), "%d", ch->stall_ms ? ch->stall_ms : 60000);
	snprintf(sd, sizeof(sd), "%u", seed % 2147483647u);
	const char *args[] = {"--map",        map_q,          "--map",        map_t,      "--p503",
	                      p503,           "--preset",     preset,         "--pstall", pstall,
	                      "--stall-ms",   stall,          "--seed",       sd,         "--stats",
	                      x->proxy_stats, "--ready-file", x->proxy_ready, NULL};
	proc_start_program(&x->proxy, name, proc_tool_bin("faultproxy"), args, NULL);
	x->proxy_on = true;

	/* The ready file: one line per --map, "LISTEN_PORT TARGET", in order. */
	for (int64_t end = itest_now_ms() + 10000; qport < 0 || tport < 0;) {
		FILE *f = fopen(x->proxy_ready, "r");
		char a[128], b[128], *e;
		if (f) {
			if (fgets(a, sizeof(a), f) && fgets(b, sizeof(b), f)) {
				qport = port_at(a, &e);
				tport = port_at(b, &e);
			}
			fclose(f);
		}
		ITEST_CHECK(proc_alive(&x->proxy), "faultproxy exited (%d):\n%s", proc_exit_code(&x->proxy),
		            proc_tail(x->proxy.log_path, 20));
		ITEST_CHECK(itest_now_ms() < end, "faultproxy wrote no ready file %s in 10 s",
		            x->proxy_ready);
		if (qport < 0 || tport < 0)
			itest_sleep_ms(20);
	}
	proc_env_connstr(x->env_conn, sizeof(x->env_conn), x->connstr, qport, tport);
}

static long long stat_int(struct json_object *o, const char *key)
{
	struct json_object *v;
	return json_object_object_get_ex(o, key, &v) ? (long long)json_object_get_int64(v) : -1;
}

/* A running process's user + system CPU seconds (/proc/PID/stat), or -1. */
static double cpu_seconds(pid_t pid)
{
	char path[64], text[1024], *end;
	unsigned long long ticks = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	/* After "(comm)": state is field 3, utime and stime fields 14 and 15. */
	const char *p = strrchr(text, ')');
	for (int field = 2; p && field < 14; field++)
		p = strchr(p + 1, ' ');
	for (int k = 0; p && k < 2; k++) {
		errno = 0;
		unsigned long long v = strtoull(p + 1, &end, 10);
		if (errno || end == p + 1)
			return -1;
		ticks += v;
		p = end;
	}
	return p ? (double)ticks / (double)sysconf(_SC_CLK_TCK) : -1;
}

/* Stops the proxy (SIGTERM: it writes its stats and exits 0) and reads them. */
void mx_stop_proxy(struct mx *x, struct proxy_stats *ps)
{
	struct json_object *o, *f = NULL;

	ps->cpu_s = cpu_seconds(x->proxy.pid);
	proc_stop(&x->proxy, 10000);
	o = json_object_from_file(x->proxy_stats);
	ITEST_CHECK(o && json_object_object_get_ex(o, "faults", &f), "faultproxy left no stats in %s: %s",
	            x->proxy_stats, proc_tail(x->proxy.log_path, 10));
	ps->connections = stat_int(o, "connections");
	ps->requests = stat_int(o, "requests");
	ps->f503 = stat_int(f, "503");
	ps->reset_before = stat_int(f, "reset_before");
	ps->reset_after = stat_int(f, "reset_after");
	ps->stall = stat_int(f, "stall");
	json_object_put(o);
}

static long long scrape_retries(int port)
{
	char *page = NULL;
	long long n = 0;

	if (proc_http_get(&page, port, "/metrics") == 200)
		n = (long long)proc_metric(page, "ecw_storage_retries_total", NULL, NULL);
	free(page);
	return n;
}

/* Stops Azurite (SIGTERM, as a service manager does) with the producers held
 * between two operations, keeps it down, and starts it again on the same
 * ports and location. The workers are left alone: they must ride through. */
void mx_restart_azurite(struct mx *x, struct worker *w, struct producer *prods, struct chaos_state *cs)
{
	const struct mixed_scenario *sc = x->sc;
	int qp = x->az.queue_port, tp = x->az.table_port;
	char name[96];

	atomic_store(&x->pause, true);
	for (int64_t end = itest_now_ms() + 30000;;) {
		bool held = true;
		for (int k = 0; k < sc->producers; k++)
			held &= atomic_load(&prods[k].paused) || atomic_load(&prods[k].done);
		if (held)
			break;
		ITEST_CHECK(itest_now_ms() < end, "the producers did not pause within 30 s");
		itest_sleep_ms(10);
	}
	cs->count_at_stop = mx_queue_count(x, x->queue);
	for (int k = 0; k < sc->workers; k++)
		cs->retries_before += scrape_retries(w[k].port);
	int64_t t_stop = itest_now_ms();
	cs->stop_ms = proc_azurite_terminate(&x->az, 60000);
	itest_sleep_ms(sc->chaos.down_ms);
	snprintf(name, sizeof(name), "%s-restarted", sc->name);
	struct proc_azurite_disk d = {x->az_dir, qp, tp};
	ITEST_CHECK(proc_azurite_start_on_disk(&x->az, name, &d), "no azurite script to restart");
	ITEST_CHECK(x->az.queue_port == qp && x->az.table_port == tp,
	            "Azurite came back on ports %d/%d, not %d/%d", x->az.queue_port, x->az.table_port, qp,
	            tp);
	cs->outage_ms = (long)(itest_now_ms() - t_stop);
	cs->restarted = true;
	atomic_store(&x->pause, false);
}

/* ---- the poison queue, the account and the verdict ------------------------------------------ */

void mx_list_poison(struct mx *x, const struct worker *w, struct poison_seen *ps)
{
	char name[96], *out = NULL, *err = NULL;
	const char *args[] = {"poison", "list", "-c", w->cfg, "--json", NULL};
	const char *env[] = {x->env_direct, "ECW_TEST_METRICS_PORT=0", NULL};

	snprintf(name, sizeof(name), "%s-poison-list", x->sc->name);
	int rc = proc_run(&out, &err, name, args, env, 120000);
	ITEST_CHECK(rc == 0, "poison list exited with %d:\n%s", rc, err);
	for (char *line = out, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (!*line)
			continue;
		struct json_object *o = json_tokener_parse(line), *env_flag = NULL;
		ITEST_CHECK(o, "poison list printed a line that is not JSON: %.300s", line);
		ITEST_CHECK(!json_object_object_get_ex(o, "envelope", &env_flag) ||
		                json_object_get_boolean(env_flag),
		            "a poison message that is not a worker's envelope: %.600s", line);
		const char *reason = proc_field(o, "reason"), *error = proc_field(o, "error");
		bool md = strcmp(reason, "max-dequeue") == 0, perm = strcmp(reason, "permanent") == 0;
		ITEST_CHECK((md || perm) && *error, "a poison envelope without a reason and an error: %.600s",
		            line);
		ps->n++;
		ps->max_dequeue += md;
		ps->permanent += perm;
		mx_idset_add(&ps->ids, proc_field(o, "message_id"));
		json_object_put(o);
	}
	free(out);
	free(err);
}

/* `poison replay`: the operator's way back. Returns how many it replayed. */
long long mx_replay_poison(struct mx *x, const struct worker *w)
{
	char name[96], *out = NULL, *err = NULL, *end;
	const char *args[] = {"poison", "replay", "-c", w->cfg, NULL};
	const char *env[] = {x->env_direct, "ECW_TEST_METRICS_PORT=0", NULL};
	long long n = -1;

	snprintf(name, sizeof(name), "%s-poison-replay", x->sc->name);
	int rc = proc_run(&out, &err, name, args, env, 300000);
	ITEST_CHECK(rc == 0, "poison replay exited with %d:\n%s\n%s", rc, out, err);
	const char *p = strstr(out, "selected, ");
	if (p) {
		errno = 0;
		n = strtoll(p + strlen("selected, "), &end, 10);
		if (errno || end == p + strlen("selected, ") || strncmp(end, " replayed", 9) != 0)
			n = -1;
	}
	ITEST_CHECK(n >= 0, "poison replay printed no summary: %s", out);
	free(out);
	free(err);
	return n;
}

/* Every message the producers put, accounted for. What can honestly be
 * asserted: the job queue is empty at the end and the poison queue was
 * snapshotted before the replay, and a message leaves the job queue only by
 * a worker's delete, after its job succeeded or after its envelope is on the
 * poison queue (worker/README.md, "Outcome rules"). So each message is
 * - succeeded: a worker logged "succeeded" for its id;
 * - poisoned: an envelope for its id was on the poison queue, with a reason;
 * - lease-lost: a worker ran it and logged "lease-lost" for its id, but no
 *   one logged its success: the delete reached the service and its answer
 *   was lost (a reset after the service did the work), the retried delete
 *   found it gone (404);
 * - unlogged: no worker logged a success or a lost lease. A SIGKILL can fall
 *   between the service's delete and the worker's log line; the message
 *   is gone from the queue, so (by the rule above) its job succeeded. Only a
 *   killed worker can do this, holding at most `concurrency` jobs, so there
 *   are at most kills x concurrency of them, and none without kills.
 * The recomputation of the derived tables then judges what the jobs did. */
void mx_account_messages(struct mx *x, struct tally *t, struct poison_seen *ps, struct account *a)
{
	memset(a, 0, sizeof(*a));
	for (size_t i = 0; i < x->put_ids.n; i++) {
		const char *id = x->put_ids.v[i];
		if (mx_idset_has(&t->ok_ids, id))
			a->succeeded++;
		else if (mx_idset_has(&ps->ids, id))
			a->poisoned++;
		else if (mx_idset_has(&t->lost_ids, id))
			a->lease_lost++;
		else if (!a->unlogged++)
			snprintf(a->first_unlogged, sizeof(a->first_unlogged), "%s", id);
	}
}

/* The chaos run's verdict: the chaos happened (each kind of fault asked for
 * was injected at least once, so the run cannot pass vacuously), both queues
 * are empty after the replay, and every message put is accounted for. */
void mx_judge_chaos(struct mx *x, struct tally *t, const struct chaos_state *cs, struct poison_seen *ps,
                    const struct account *a, long long replayed)
{
	const struct mixed_scenario *sc = x->sc;
	const struct mixed_chaos *ch = &sc->chaos;
	long long left = mx_queue_count(x, x->queue), in_poison = mx_queue_count(x, x->poison);

	if (ch->kill_every_ms)
		ITEST_CHECK(cs->kills > 0, "no worker was killed");
	if (ch->p503 > 0)
		ITEST_CHECK(cs->ps.f503 > 0, "the proxy answered no request with 503");
	if (ch->preset > 0)
		ITEST_CHECK(
		    cs->ps.reset_before > 0 && cs->ps.reset_after > 0,
		    "the proxy reset %lld connection(s) before and %lld after forwarding: both must happen",
		    cs->ps.reset_before, cs->ps.reset_after);
	if (ch->pstall > 0)
		ITEST_CHECK(cs->ps.stall > 0, "the proxy stalled no request");
	if (ch->azurite_restart) {
		ITEST_CHECK(cs->restarted, "Azurite was never restarted");
		ITEST_CHECK(cs->count_at_stop > 0,
		            "the queue was empty when Azurite stopped: nothing rode through");
		ITEST_CHECK(t->retries - cs->retries_before + t->storage_errors > 0,
		            "the workers saw neither a retry nor a storage error while Azurite was down");
	}
	if (in_poison)
		mx_show_poison(x);
	ITEST_CHECK(in_poison == 0, "%lld message(s) on the poison queue after the replay and the drain",
	            in_poison);
	ITEST_CHECK(left == 0, "%lld message(s) left on the queue after the workers stopped", left);
	ITEST_CHECK(replayed == ps->n, "poison list showed %lld envelope(s), replay replayed %lld", ps->n,
	            replayed);
	ITEST_CHECK(
	    a->unlogged <= (long long)cs->kills * sc->concurrency,
	    "%lld message(s) put (first %s) left the queue without a success, a lost lease or an envelope "
	    "in any log, more than %d kills x %d jobs could hide",
	    a->unlogged, a->first_unlogged, cs->kills, sc->concurrency);
	ITEST_CHECK(atomic_load(&x->moves) >= sc->min_moves, "only %d LastName moves, the scenario needs %d",
	            atomic_load(&x->moves), sc->min_moves);
}

/* ---- the end, as production ends it: the audit ------------------------------------------------- */

/* `ecworker audit -c CFG args...` straight to Azurite (the proxy is gone, and
 * with it the faults); its exit code, stdout in *out (the caller frees it). */
static int run_audit(char **out, struct mx *x, const struct worker *w, const char *what,
                     const char *const *args)
{
	const char *env[] = {x->env_direct, "ECW_TEST_METRICS_PORT=0", NULL};
	char name[96];

	snprintf(name, sizeof(name), "%s-audit-%s", x->sc->name, what);
	return auditfx_run_env(out, w->cfg, name, args, env);
}

/* job's --json line in out (json_object_put it), which must say the audit
 * was complete and checked everything: a limit (a part it could not check)
 * is no clean result. */
static struct json_object *audit_line(struct mx *x, const char *out, const char *job)
{
	struct json_object *o = auditfx_job_line(out, job), *complete = NULL, *limits = NULL;

	ITEST_CHECK(
	    json_object_object_get_ex(o, "complete", &complete) && json_object_get_boolean(complete) &&
	        json_object_object_get_ex(o, "limits", &limits) && json_object_array_length(limits) == 0,
	    "%s (seed %u): the audit of %s did not check everything: %s", x->sc->name, x->seed, job,
	    json_object_to_json_string(o));
	return o;
}

/* Prints the examples of an audit line (the orphans the window left). */
static void print_examples(struct json_object *o)
{
	struct json_object *ex = NULL;

	if (!json_object_object_get_ex(o, "examples", &ex))
		return;
	for (size_t i = 0; i < json_object_array_length(ex); i++) {
		struct json_object *e = json_object_array_get_idx(ex, i);
		print_message("    e.g. %s %s/%s of (%s, %s): %s\n", proc_field(e, "kind"),
		              proc_field(e, "pk"), proc_field(e, "rk"), proc_field(e, "source_pk"),
		              proc_field(e, "source_rk"), proc_field(e, "detail"));
	}
}

/* The window jobs/index.c documents ("What is not covered, honestly"): a
 * round writes an entry after another round of the same source cleaned that
 * place and committed, then never commits itself (killed right after the
 * write, or its lease lost with the write in flight). The entry is named by
 * no reference, and no run of the job will find it again; the audit finds it
 * from the index (an orphan: its source is gone or computes elsewhere) and
 * repairs it through the job's run. A SIGKILL every 300 ms hits it now and
 * then: production ends it with a repairing audit, and so does this test.
 * Only that kind may be repaired away: the judge that follows stays as
 * strict as it is. */
long long mx_audit_end(struct mx *x, const struct worker *w)
{
	const char *all[] = {"--json", NULL};
	const char *repair[] = {"--repair", "--json", J_EMAIL, NULL};
	const char *name = x->sc->name;
	int64_t t0 = itest_now_ms();
	long long hits = 0;
	char *out = NULL;
	int rc;

	/* 1. What the run left: read-only, every job. */
	rc = run_audit(&out, x, w, "1", all);
	ITEST_CHECK(rc == 0 || rc == 3, "%s (seed %u): the audit after the drain exited %d", name, x->seed,
	            rc);
	for (int j = 0; j < NJOBS; j++) {
		struct json_object *o = audit_line(x, out, MX_JOBS[j]);
		bool email = strcmp(MX_JOBS[j], J_EMAIL) == 0;
		long long orphan = auditfx_field(o, "orphan");
		ITEST_CHECK(
		    auditfx_field(o, "missing") == 0 && auditfx_field(o, "stale") == 0 &&
		        auditfx_field(o, "conflict") == 0 && (email || orphan == 0),
		    "%s (seed %u): the audit after the drain found drift other than the index's known "
		    "window (orphan entries of %s, jobs/index.c): %s",
		    name, x->seed, J_EMAIL, json_object_to_json_string(o));
		if (email) {
			hits = orphan;
			if (hits)
				print_examples(o);
		}
		json_object_put(o);
	}
	ITEST_CHECK(rc == (hits ? 3 : 0), "%s (seed %u): the audit found %lld orphan(s) and exited %d", name,
	            x->seed, hits, rc);
	free(out);
	out = NULL;

	/* 2. The repair, of the job that can hold that kind (the moves go in
	 * opposite directions: a repair of every job is refused). */
	rc = run_audit(&out, x, w, "repair", repair);
	ITEST_CHECK(rc == 0, "%s (seed %u): audit --repair %s exited %d:\n%s", name, x->seed, J_EMAIL, rc,
	            out ? out : "");
	auditfx_counts_are(out, J_EMAIL, 0, 0, hits, 0, hits);
	free(out);
	out = NULL;

	/* 3. Nothing is left, in any job. */
	rc = run_audit(&out, x, w, "2", all);
	ITEST_CHECK(rc == 0, "%s (seed %u): the audit after the repair exited %d:\n%s", name, x->seed, rc,
	            out ? out : "");
	for (int j = 0; j < NJOBS; j++) {
		json_object_put(audit_line(x, out, MX_JOBS[j]));
		auditfx_counts_are(out, MX_JOBS[j], 0, 0, 0, 0, 0);
	}
	free(out);
	print_message(
	    "%s: the index window was hit %lld time(s) (orphan email entries repaired by the audit); "
	    "a second audit of every job found nothing (the three audits: %.1f s)\n",
	    name, hits, (double)(itest_now_ms() - t0) / 1000.0);
	return hits;
}
