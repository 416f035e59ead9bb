/* SPDX-License-Identifier: MIT */
/* test_audit.c - `ecworker audit`'s comparison rules (jobs/audit.c), one case
 * per rule, and the move and index audits (jobs/move.c, jobs/index.c) run
 * against the in-memory Table service (table_server.h): each kind of drift
 * induced behind the job's back is found and counted, --repair fixes what it
 * may through the job's own run (conflicts never), the state then equals a
 * recomputation (run for every source changes nothing), and a second audit
 * finds nothing. The command's exit status rule is here too; the command as
 * a process is tests/integration/test_audit.c. At the end: the drift a
 * scheduled audit shows (found and not repaired, by kind) and the runner
 * both the command and the schedules use (worker/schedule/audit_run.c): its counts by
 * kind, and its stops. */
#include "support.h"

#include <json-c/json.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "cmd.h"
#include "ecw_audit.h"
#include "ecw_config.h"
#include "ecw_job.h"
#include "table_server.h"

struct fx {
	struct ecw_account *acct;
	struct ecw_client *c;
	struct table_server *s;
	struct ecw_config *cfg;
	/* what the audit reported, by kind: "pk/rk" of the first finding */
	char first[ECW_AUDIT_KINDS][256];
	size_t nlimits;    /* what the last audit could not check */
	const char *limit; /* the first of those (static text), or NULL */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	table_server_connect(&f->acct, &f->c, &f->s, false);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	ecw_config_free(f->cfg);
	table_server_disconnect(f->acct, f->c, f->s);
	free(f);
	return 0;
}

static void ok(int err, const char *what)
{
	if (err != 0)
		fail_msg("%s: %s: %s", what, ecw_error_name(err), ecw_error_last()->message);
}

static struct ecw_entity *entity(const char *pk, const char *rk)
{
	struct ecw_entity *e = NULL;

	ok(ecw_entity_new(&e, pk, rk), "entity");
	return e;
}

static void set(struct ecw_entity *e, const char *name, const char *v)
{
	ok(ecw_entity_set_string(e, name, v, strlen(v)), "set");
}

/* An index entry at (pk, rk) naming source (spk, srk), with Name = name. */
static struct ecw_entity *entry(const char *pk, const char *rk, const char *spk, const char *srk,
                                const char *name)
{
	struct ecw_entity *e = entity(pk, rk);

	if (name)
		set(e, "Name", name);
	set(e, ECW_AUDIT_INDEX_SRC_PK, spk);
	set(e, ECW_AUDIT_INDEX_SRC_RK, srk);
	return e;
}

/* ---- the rules, one by one ----------------------------------------------------------------------------- */

static void test_audit__move_pair(void **state)
{
	struct ecw_entity *copy = entity("Sales", "001"), *same = entity("Sales", "001"),
	                  *other = entity("Sales", "001");

	(void)state;
	set(copy, "Name", "Ann");
	set(same, "Name", "Ann");
	set(other, "Name", "Anne");
	/* Only in the source: the move has not run yet, which is no drift. */
	assert_int_equal(ecw_audit_move_pair(copy, NULL), ECW_AUDIT_OK);
	/* In both, identical: an unfinished move. */
	assert_int_equal(ecw_audit_move_pair(copy, same), ECW_AUDIT_STALE);
	/* In both, different: a conflict, whichever differs. */
	assert_int_equal(ecw_audit_move_pair(copy, other), ECW_AUDIT_CONFLICT);
	/* Types count: the string "1" is not the Int32 1. */
	ok(ecw_entity_set_int32(same, "N", 1), "int");
	set(copy, "N", "1");
	assert_int_equal(ecw_audit_move_pair(copy, same), ECW_AUDIT_CONFLICT);
	ecw_entity_free(copy);
	ecw_entity_free(same);
	ecw_entity_free(other);
}

static void test_audit__index_entry(void **state)
{
	struct ecw_entity *want = entry("email", "ann@x", "Sales", "001", "Ann");
	struct ecw_entity *same = entry("email", "ann@x", "Sales", "001", "Ann");
	struct ecw_entity *changed = entry("email", "ann@x", "Sales", "001", "Anne");
	struct ecw_entity *others = entry("email", "ann@x", "Ops", "002", "Ann");
	struct ecw_entity *foreign = entity("email", "ann@x");

	(void)state;
	set(foreign, "Name", "Ann");
	assert_int_equal(ecw_audit_index_entry(want, NULL, false), ECW_AUDIT_MISSING);
	assert_int_equal(ecw_audit_index_entry(want, same, false), ECW_AUDIT_OK);
	/* Its own entry with another copy: stale. */
	assert_int_equal(ecw_audit_index_entry(want, changed, false), ECW_AUDIT_STALE);
	/* Another source's entry: a conflict while that source claims the key
	 * too, else this source's entry is missing (the other is an orphan). */
	assert_int_equal(ecw_audit_index_entry(want, others, true), ECW_AUDIT_CONFLICT);
	assert_int_equal(ecw_audit_index_entry(want, others, false), ECW_AUDIT_MISSING);
	/* Something that is no entry where the entry belongs. */
	assert_int_equal(ecw_audit_index_entry(want, foreign, false), ECW_AUDIT_CONFLICT);
	ecw_entity_free(want);
	ecw_entity_free(same);
	ecw_entity_free(changed);
	ecw_entity_free(others);
	ecw_entity_free(foreign);
}

static void test_audit__index_orphan(void **state)
{
	struct ecw_entity *e = entry("email", "ann@x", "Sales", "001", NULL);
	struct ecw_entity *here = entry("email", "ann@x", "Sales", "001", "Ann");
	struct ecw_entity *elsewhere = entry("email", "ann@y", "Sales", "001", "Ann");

	(void)state;
	/* The source is gone. */
	assert_int_equal(ecw_audit_index_orphan(e, NULL), ECW_AUDIT_ORPHAN);
	/* The source computes to another key. */
	assert_int_equal(ecw_audit_index_orphan(e, elsewhere), ECW_AUDIT_ORPHAN);
	/* At the right keys: not an orphan (copies are judged from the source). */
	assert_int_equal(ecw_audit_index_orphan(e, here), ECW_AUDIT_OK);
	ecw_entity_free(e);
	ecw_entity_free(here);
	ecw_entity_free(elsewhere);
}

static void test_audit__index_ref(void **state)
{
	struct ecw_entity *want = entry("email", "ann@x", "Sales", "001", "Ann");

	(void)state;
	/* What a finished run leaves: the entry as current, nothing pending. */
	assert_int_equal(ecw_audit_index_ref(true, "email", "ann@x", 0, want), ECW_AUDIT_OK);
	/* No reference (or another job's or source's entity in its place). */
	assert_int_equal(ecw_audit_index_ref(false, NULL, NULL, 0, want), ECW_AUDIT_STALE);
	/* Another current location, none, or pending ones left. */
	assert_int_equal(ecw_audit_index_ref(true, "email", "ann@old", 0, want), ECW_AUDIT_STALE);
	assert_int_equal(ecw_audit_index_ref(true, NULL, NULL, 1, want), ECW_AUDIT_STALE);
	assert_int_equal(ecw_audit_index_ref(true, "email", "ann@x", 1, want), ECW_AUDIT_STALE);
	ecw_entity_free(want);
}

static void test_audit__exit_status(void **state)
{
	struct ecw_audit_counts c = {0};

	(void)state;
	assert_int_equal(ecw_audit_exit_status(&c, false), 0);
	assert_int_equal(ecw_audit_exit_status(&c, true), 1);
	c.found[ECW_AUDIT_ORPHAN] = 2;
	c.found[ECW_AUDIT_STALE] = 1;
	assert_int_equal(ecw_audit_exit_status(&c, false), ECW_EXIT_DRIFT);
	c.repaired = 2;
	assert_int_equal(ecw_audit_exit_status(&c, false), ECW_EXIT_DRIFT);
	c.repaired = 3;
	assert_int_equal(ecw_audit_exit_status(&c, false), 0);
	/* A failure wins over everything. */
	assert_int_equal(ecw_audit_exit_status(&c, true), 1);
	assert_string_equal(ecw_audit_kind_name(ECW_AUDIT_MISSING), "missing");
	assert_string_equal(ecw_audit_kind_name(ECW_AUDIT_CONFLICT), "conflict");
	assert_string_equal(ecw_audit_kind_name(ECW_AUDIT_OK), "ok");
}

/* ---- the audits against the in-memory service --------------------------------------------------------- */

static const struct ecw_job_def *job(struct fx *f, const char *yaml)
{
	char text[1024];

	snprintf(text, sizeof(text), "jobs:\n  j:\n%s", yaml);
	f->cfg = config_parse_ok(text, "t.yaml");
	return ecw_config_job(f->cfg, "j");
}

static void run_ok(struct fx *f, const struct ecw_job_def *def, const char *pk, const char *rk)
{
	struct ecw_job_ctx ctx;

	memset(&ctx, 0, sizeof(ctx));
	ctx.client = f->c;
	ctx.job = "j";
	ctx.pk = pk;
	ctx.rk = rk;
	ctx.trace_id = ctx.message_id = "m";
	ok(def->type->run(def->settings, &ctx), "run");
}

static void remember(const struct ecw_audit_finding *fd, void *payload)
{
	struct fx *f = payload;

	if (!f->first[fd->kind][0])
		snprintf(f->first[fd->kind], sizeof(f->first[fd->kind]), "%s/%s", fd->pk, fd->rk);
}

static struct ecw_audit_counts audit(struct fx *f, const struct ecw_job_def *def, bool repair,
                                     const char *partition)
{
	struct ecw_audit_ctx ctx = {.client = f->c,
	                            .job = "j",
	                            .partition = partition,
	                            .repair = repair,
	                            .on_finding = remember,
	                            .payload = f};

	memset(f->first, 0, sizeof(f->first));
	ok(def->type->audit(def->settings, &ctx), "audit");
	f->nlimits = ctx.counts.nlimits;
	f->limit = ctx.counts.nlimits ? ctx.counts.limits[0] : NULL;
	return ctx.counts;
}

static void counts_are(const struct ecw_audit_counts *c, unsigned missing, unsigned stale, unsigned orphan,
                       unsigned conflict, unsigned repaired)
{
	if (c->found[ECW_AUDIT_MISSING] != missing || c->found[ECW_AUDIT_STALE] != stale ||
	    c->found[ECW_AUDIT_ORPHAN] != orphan || c->found[ECW_AUDIT_CONFLICT] != conflict ||
	    c->repaired != repaired)
		fail_msg(
		    "counts: missing %llu stale %llu orphan %llu conflict %llu repaired %llu; want %u %u %u %u "
		    "%u",
		    (unsigned long long)c->found[ECW_AUDIT_MISSING],
		    (unsigned long long)c->found[ECW_AUDIT_STALE],
		    (unsigned long long)c->found[ECW_AUDIT_ORPHAN],
		    (unsigned long long)c->found[ECW_AUDIT_CONFLICT], (unsigned long long)c->repaired,
		    missing, stale, orphan, conflict, repaired);
}

static void put(struct fx *f, const char *table, struct ecw_entity *e)
{
	table_server_put(f->s, table, e);
	ecw_entity_free(e);
}

static struct ecw_entity *employee(const char *pk, const char *rk, const char *name)
{
	struct ecw_entity *e = entity(pk, rk);

	set(e, "Name", name);
	return e;
}

/* Identical in both tables: completed by deleting the source copy; different:
 * a conflict left alone; only in the source: no drift. */
static void test_audit__move_completes_identical_reports_different(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = job(f, "    {type: move, from: Emp, to: Arch}\n");
	struct ecw_audit_counts c;

	table_server_create_table(f->s, "Emp");
	table_server_create_table(f->s, "Arch");
	put(f, "Emp", employee("Sales", "001", "Ann"));
	put(f, "Arch", employee("Sales", "001", "Ann"));
	put(f, "Emp", employee("Sales", "002", "Bob"));
	put(f, "Arch", employee("Sales", "002", "Robert"));
	put(f, "Emp", employee("Sales", "003", "Cy"));
	put(f, "Arch", employee("Ops", "004", "Di"));

	c = audit(f, def, false, NULL);
	assert_int_equal(c.checked, 3);
	counts_are(&c, 0, 1, 0, 1, 0);
	assert_string_equal(f->first[ECW_AUDIT_STALE], "Sales/001");
	assert_string_equal(f->first[ECW_AUDIT_CONFLICT], "Sales/002");
	/* Read-only without --repair. */
	assert_non_null(table_server_find(f->s, "Emp", "Sales", "001"));

	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 1, 0, 1, 1);
	assert_null(table_server_find(f->s, "Emp", "Sales", "001"));
	assert_non_null(table_server_find(f->s, "Arch", "Sales", "001"));
	/* The conflict: both copies kept, as they were. */
	assert_non_null(table_server_find(f->s, "Emp", "Sales", "002"));
	assert_non_null(table_server_find(f->s, "Arch", "Sales", "002"));
	assert_non_null(table_server_find(f->s, "Emp", "Sales", "003"));

	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 1, 0);
	/* --partition: only that partition of the source. */
	c = audit(f, def, false, "Ops");
	assert_int_equal(c.checked, 0);
}

/* The index job over Src into Idx, copying Name. */
static const struct ecw_job_def *index_job(struct fx *f)
{
	table_server_create_table(f->s, "Src");
	table_server_create_table(f->s, "Idx");
	return job(f, "    type: index\n    source: Src\n    table: Idx\n    partition_key: email\n"
	              "    row_key: \"{Email}\"\n    properties: [Name]\n");
}

static void source(struct fx *f, const char *pk, const char *rk, const char *email, const char *name)
{
	struct ecw_entity *e = employee(pk, rk, name);

	set(e, "Email", email);
	put(f, "Src", e);
}

/* Every entity of Idx, as "pk/rk=SourcePartitionKey/SourceRowKey:Name;" in
 * key order, references left out: the state to compare. */
static void index_state(struct fx *f, char *out, size_t cap)
{
	struct ecw_query_options qo = {0};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	size_t n = 0;

	out[0] = '\0';
	ok(ecw_table_query_new(&q, f->c, "Idx", &qo), "query");
	while (ecw_table_query_next(&e, q) == 0 && e) {
		const struct ecw_prop *spk = ecw_entity_get(e, ECW_AUDIT_INDEX_SRC_PK),
		                      *srk = ecw_entity_get(e, ECW_AUDIT_INDEX_SRC_RK),
		                      *nm = ecw_entity_get(e, "Name");
		if (strncmp(ecw_entity_pk(e), "~ref~", 5) != 0)
			n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s/%s=%s/%s:%s;",
			                      ecw_entity_pk(e), ecw_entity_rk(e), spk ? spk->v.s : "-",
			                      srk ? srk->v.s : "-", nm ? nm->v.s : "-");
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);
	assert_true(n < cap);
}

/* Each kind induced behind the job's back after it converged: found,
 * repaired by run (the conflict excepted), the state then what running the
 * job for every source gives, and a second audit finds only the conflict. */
static void test_audit__index_each_kind(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = index_job(f);
	static const char *const rks[] = {"001", "002", "003", "004", "005"};
	struct ecw_audit_counts c;
	char after[4096], recomputed[4096];

	source(f, "Sales", "001", "ann@x", "Ann");
	source(f, "Sales", "002", "bob@x", "Bob");
	source(f, "Sales", "003", "cy@x", "Cy");
	source(f, "Sales", "004", "di@x", "Di");
	source(f, "Sales", "005", "ed@x", "Ed");
	for (size_t i = 0; i < 5; i++)
		run_ok(f, def, "Sales", rks[i]);
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 0, 0);
	assert_int_equal(c.checked, 10); /* 5 sources, 5 entries */
	/* The sources are read with only what an entry is computed from (the
	 * client adds Timestamp to every $select). */
	assert_string_equal(table_server_last_select(f->s, "Src"),
	                    "PartitionKey,RowKey,Email,Name,Timestamp");

	/* missing: Ann's entry deleted */
	ok(ecw_table_delete(f->c, "Idx", "email", "ann@x", "*"), "delete entry");
	/* stale: Bob's copy changed */
	put(f, "Idx", entry("email", "bob@x", "Sales", "002", "Robert"));
	/* orphan: Cy deleted behind the job's back */
	ok(ecw_table_delete(f->c, "Src", "Sales", "003", "*"), "delete source");
	/* orphan: an entry Di no longer computes to (no reference names it) */
	put(f, "Idx", entry("email", "di@old", "Sales", "004", "Di"));
	/* conflict: a sixth source with Ed's e-mail, never indexed */
	source(f, "Ops", "006", "ed@x", "Eddie");

	c = audit(f, def, false, NULL);
	counts_are(&c, 1, 1, 2, 1, 0);
	assert_string_equal(f->first[ECW_AUDIT_MISSING], "email/ann@x");
	assert_string_equal(f->first[ECW_AUDIT_STALE], "email/bob@x");
	assert_string_equal(f->first[ECW_AUDIT_CONFLICT], "email/ed@x");

	c = audit(f, def, true, NULL);
	counts_are(&c, 1, 1, 2, 1, 4);

	/* The state equals a recomputation: running the job for every source
	 * (the conflicting one fails, as its messages would) changes nothing. */
	index_state(f, after, sizeof(after));
	assert_non_null(strstr(after, "email/ann@x=Sales/001:Ann;"));
	assert_non_null(strstr(after, "email/bob@x=Sales/002:Bob;"));
	assert_null(strstr(after, "cy@x"));
	assert_null(strstr(after, "di@old"));
	for (size_t i = 0; i < 5; i++)
		if (i != 2)
			run_ok(f, def, "Sales", rks[i]);
	index_state(f, recomputed, sizeof(recomputed));
	assert_string_equal(after, recomputed);

	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 1, 0);
	/* With the conflict settled by the operator, nothing is left. */
	ok(ecw_table_delete(f->c, "Src", "Ops", "006", "*"), "settle");
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 0, 0);
}

/* Why an orphan is registered before the run: run alone, for the source an
 * entry written behind its back names, does not see that entry (no
 * back-reference lists it); the audit's repair removes it. */
static void test_audit__index_orphan_needs_registration(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = index_job(f);
	struct ecw_audit_counts c;

	source(f, "Sales", "001", "ann@x", "Ann");
	run_ok(f, def, "Sales", "001");
	put(f, "Idx", entry("email", "ann@old", "Sales", "001", "Ann"));
	run_ok(f, def, "Sales", "001");
	assert_non_null(table_server_find(f->s, "Idx", "email", "ann@old"));

	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 0, 1, 0, 1);
	assert_null(table_server_find(f->s, "Idx", "email", "ann@old"));
	assert_non_null(table_server_find(f->s, "Idx", "email", "ann@x"));
	/* And an orphan whose source never existed nor left a reference. */
	put(f, "Idx", entry("email", "ghost@x", "Sales", "999", "Ghost"));
	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 0, 1, 0, 1);
	assert_null(table_server_find(f->s, "Idx", "email", "ghost@x"));
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 0, 0);
}

/* A back-reference deleted or changed behind the job's back: the entry is
 * right, but a run after the next change of the value would not find it to
 * remove it. Stale; repaired by the run. */
static void test_audit__index_reference(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = index_job(f);
	struct ecw_entity *ref = NULL;
	struct ecw_table_query *q = NULL;
	struct ecw_query_options qo = {.filter = "PartitionKey ge '~ref~' and PartitionKey lt '~ref~~'"};
	struct ecw_audit_counts c;
	char pk[128], rk[128];

	source(f, "Sales", "001", "ann@x", "Ann");
	run_ok(f, def, "Sales", "001");
	ok(ecw_table_query_new(&q, f->c, "Idx", &qo), "query");
	ok(ecw_table_query_next(&ref, q), "next");
	assert_non_null(ref);
	snprintf(pk, sizeof(pk), "%s", ecw_entity_pk(ref));
	snprintf(rk, sizeof(rk), "%s", ecw_entity_rk(ref));
	ecw_entity_free(ref);
	ecw_table_query_free(q);

	ok(ecw_table_delete(f->c, "Idx", pk, rk, "*"), "delete reference");
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 1, 0, 0, 0);
	assert_string_equal(f->first[ECW_AUDIT_STALE], "email/ann@x");
	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 1, 0, 0, 1);
	assert_non_null(table_server_find(f->s, "Idx", pk, rk));
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 0, 0);

	/* Naming another place as current: stale too. */
	ref = entity(pk, rk);
	set(ref, "Job", "j");
	set(ref, ECW_AUDIT_INDEX_SRC_PK, "Sales");
	set(ref, ECW_AUDIT_INDEX_SRC_RK, "001");
	set(ref, "IndexPartitionKey", "email");
	set(ref, "IndexRowKey", "ann@old");
	put(f, "Idx", ref);
	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 1, 0, 0, 1);
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 0, 0);
}

/* --partition: sources of one partition, and entries naming one. */
static void test_audit__index_partition(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = index_job(f);
	struct ecw_audit_counts c;

	source(f, "Sales", "001", "ann@x", "Ann");
	source(f, "Ops", "002", "bob@x", "Bob");
	c = audit(f, def, false, "Ops");
	assert_int_equal(c.checked, 1);
	counts_are(&c, 1, 0, 0, 0, 0);
	assert_string_equal(f->first[ECW_AUDIT_MISSING], "email/bob@x");
	c = audit(f, def, true, "Ops");
	counts_are(&c, 1, 0, 0, 0, 1);
	assert_null(table_server_find(f->s, "Idx", "email", "ann@x"));
	c = audit(f, def, false, NULL);
	counts_are(&c, 1, 0, 0, 0, 0);
}

/* ---- scheduled audits ---------------------------------------------------------------------------------- */

static void test_audit__drift_is_found_and_not_repaired(void **state)
{
	struct ecw_audit_counts c = {0};

	(void)state;
	for (int k = 0; k < ECW_AUDIT_KINDS; k++)
		assert_int_equal(ecw_audit_drift(&c, k), 0);
	/* Read-only: what was found. */
	c.found[ECW_AUDIT_MISSING] = 3;
	c.found[ECW_AUDIT_CONFLICT] = 1;
	assert_int_equal(ecw_audit_drift(&c, ECW_AUDIT_MISSING), 3);
	assert_int_equal(ecw_audit_drift(&c, ECW_AUDIT_CONFLICT), 1);
	assert_int_equal(ecw_audit_drift(&c, ECW_AUDIT_STALE), 0);
	/* Repairing: what is left, per kind (2 of 3 missing fixed); a
	 * conflict is never repaired and stays. */
	c.repaired_kind[ECW_AUDIT_MISSING] = 2;
	c.repaired = 2;
	assert_int_equal(ecw_audit_drift(&c, ECW_AUDIT_MISSING), 1);
	c.repaired_kind[ECW_AUDIT_MISSING] = 3;
	assert_int_equal(ecw_audit_drift(&c, ECW_AUDIT_MISSING), 0);
	assert_int_equal(ecw_audit_drift(&c, ECW_AUDIT_CONFLICT), 1);
	/* Nonsense in, nothing out: no kind, or more repaired than found. */
	assert_int_equal(ecw_audit_drift(&c, ECW_AUDIT_OK), 0);
	assert_int_equal(ecw_audit_drift(&c, ECW_AUDIT_KINDS), 0);
	c.repaired_kind[ECW_AUDIT_STALE] = 1;
	assert_int_equal(ecw_audit_drift(&c, ECW_AUDIT_STALE), 0);
}

struct calls {
	struct fx *f;
	int requests, stop_after; /* on_request says stop once requests reaches stop_after (0: never) */
};

static bool count_request(void *payload)
{
	struct calls *k = payload;

	return ++k->requests != k->stop_after;
}

static void remember_run(const struct ecw_audit_finding *fd, void *payload)
{
	remember(fd, ((struct calls *)payload)->f);
}

/* The runner: the same counts as the job's audit, repaired ones by kind, the
 * findings handed on; on_request before every request, and stopping when it
 * says so or when the stop flag is set. */
static void test_audit__run_counts_by_kind_and_stops(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = index_job(f);
	struct calls k = {.f = f};
	struct ecw_audit_run_opts o = {
	    .on_request = count_request, .on_finding = remember_run, .payload = &k};
	struct ecw_audit_counts c;
	atomic_bool stop = false;
	bool stopped = true;

	source(f, "Sales", "001", "ann@x", "Ann");
	source(f, "Sales", "002", "bob@x", "Bob");
	run_ok(f, def, "Sales", "002");
	source(f, "Ops", "003", "bob@x", "Bobby");                   /* a conflict with 002 */
	put(f, "Idx", entry("email", "cy@x", "Sales", "009", "Cy")); /* an orphan */

	memset(f->first, 0, sizeof(f->first));
	ok(ecw_audit_run(&c, &stopped, f->c, def, &o), "run");
	assert_false(stopped);
	counts_are(&c, 1, 0, 1, 1, 0);
	assert_string_equal(f->first[ECW_AUDIT_ORPHAN], "email/cy@x");
	assert_true(k.requests >= 5); /* two query pages, a GET or two per entity */
	assert_int_equal(ecw_audit_drift(&c, ECW_AUDIT_MISSING), 1);

	o.repair = true;
	ok(ecw_audit_run(&c, &stopped, f->c, def, &o), "repair");
	counts_are(&c, 1, 0, 1, 1, 2);
	assert_int_equal(c.repaired_kind[ECW_AUDIT_MISSING], 1);
	assert_int_equal(c.repaired_kind[ECW_AUDIT_ORPHAN], 1);
	assert_int_equal(c.repaired_kind[ECW_AUDIT_CONFLICT], 0);
	for (int kind = 0; kind < ECW_AUDIT_KINDS; kind++)
		assert_int_equal(ecw_audit_drift(&c, kind), kind == ECW_AUDIT_CONFLICT ? 1 : 0);

	/* on_request says stop at its third call: stopped, fewer compared. */
	o.repair = false;
	k.requests = 0;
	k.stop_after = 3;
	ok(ecw_audit_run(&c, &stopped, f->c, def, &o), "stopped by on_request");
	assert_true(stopped);
	assert_int_equal(k.requests, 3);
	assert_true(c.checked < 4);

	/* The stop flag set before: nothing is read. */
	atomic_store(&stop, true);
	o.stop = &stop;
	k.requests = 0;
	k.stop_after = 0;
	ok(ecw_audit_run(&c, &stopped, f->c, def, &o), "stopped by the flag");
	assert_true(stopped);
	assert_int_equal(k.requests, 0);
	assert_int_equal(c.checked, 0);
}

/* ---- fanout ------------------------------------------------------------------------------------------- */

static void test_audit__fanout_copies(void **state)
{
	struct ecw_entity *set_ = entity("C", "c1"), *t = entity("P", "o1"), *none = entity("C", "c1");
	const char *removed[] = {"CustomerEmail"};

	(void)state;
	set(set_, "CustomerName", "Ann");
	set(t, "CustomerName", "Ann");
	ok(ecw_entity_set_int32(t, "Amount", 5), "int"); /* not a copy: ignored, as are the keys */
	assert_int_equal(ecw_audit_fanout_copies(set_, removed, 1, t), ECW_AUDIT_OK);
	/* A field the source lacks must be absent. */
	set(t, "CustomerEmail", "ann@x");
	assert_int_equal(ecw_audit_fanout_copies(set_, removed, 1, t), ECW_AUDIT_STALE);
	ecw_entity_remove(t, "CustomerEmail");
	/* Another value, or none. */
	set(t, "CustomerName", "Anne");
	assert_int_equal(ecw_audit_fanout_copies(set_, removed, 1, t), ECW_AUDIT_STALE);
	ecw_entity_remove(t, "CustomerName");
	assert_int_equal(ecw_audit_fanout_copies(set_, removed, 1, t), ECW_AUDIT_STALE);
	/* Types count: an Int32 5 is no Int64 5, nor the string "5". */
	ok(ecw_entity_set_int64(set_, "Amount", 5), "int64");
	set(t, "CustomerName", "Ann");
	assert_int_equal(ecw_audit_fanout_copies(set_, removed, 1, t), ECW_AUDIT_STALE);
	ok(ecw_entity_set_int64(t, "Amount", 5), "int64");
	assert_int_equal(ecw_audit_fanout_copies(set_, removed, 1, t), ECW_AUDIT_OK);
	/* A source gone (with clear): nothing set, every copy removed. */
	const char *all[] = {"CustomerName", "CustomerEmail", "Amount"};
	assert_int_equal(ecw_audit_fanout_copies(none, all, 3, t), ECW_AUDIT_STALE);
	assert_int_equal(ecw_audit_fanout_copies(none, all + 1, 1, t), ECW_AUDIT_OK);
	ecw_entity_free(set_);
	ecw_entity_free(t);
	ecw_entity_free(none);
}

/* A fanout from Cust to Ord copying Name as CustomerName (and Email as
 * CustomerEmail), with filter and on_delete as given. */
static const struct ecw_job_def *fanout_job(struct fx *f, const char *filter, const char *on_delete)
{
	char yaml[512];

	table_server_create_table(f->s, "Cust");
	table_server_create_table(f->s, "Ord");
	snprintf(yaml, sizeof(yaml),
	         "    type: fanout\n    source: Cust\n    table: Ord\n    filter: \"%s\"\n"
	         "    fields: {CustomerName: Name, CustomerEmail: Email}\n    on_delete: %s\n",
	         filter, on_delete);
	return job(f, yaml);
}

static void customer(struct fx *f, const char *rk, const char *name)
{
	struct ecw_entity *e = employee("C", rk, name);

	put(f, "Cust", e);
}

static void order(struct fx *f, const char *pk, const char *rk, const char *cust)
{
	struct ecw_entity *e = entity(pk, rk);

	set(e, "CustomerId", cust);
	put(f, "Ord", e);
}

static const char *copy_of(struct fx *f, const char *pk, const char *rk)
{
	const struct ecw_entity *e = table_server_find(f->s, "Ord", pk, rk);
	const struct ecw_prop *p;

	assert_non_null(e);
	p = ecw_entity_get(e, "CustomerName");
	return p ? p->v.s : NULL;
}

/* Customers c1 (two orders), c2 (one) and c3 (two, in two partitions),
 * converged by run; then c1 renamed and o3's copy edited behind the job's
 * back, and c3 deleted. */
static void fanout_drift(struct fx *f, const struct ecw_job_def *def)
{
	struct ecw_entity *e;

	customer(f, "c1", "Ann");
	customer(f, "c2", "Bob");
	customer(f, "c3", "Cy");
	order(f, "P1", "o1", "c1");
	order(f, "P2", "o2", "c1");
	order(f, "P1", "o3", "c2");
	order(f, "P1", "o4", "c3");
	order(f, "P2", "o5", "c3");
	order(f, "P2", "o6", "c9"); /* no customer, no copies */
	run_ok(f, def, "C", "c1");
	run_ok(f, def, "C", "c2");
	run_ok(f, def, "C", "c3");
	assert_string_equal(copy_of(f, "P2", "o5"), "Cy");
	customer(f, "c1", "Anna");
	ok(ecw_entity_clone(&e, table_server_find(f->s, "Ord", "P1", "o3")), "clone");
	set(e, "CustomerName", "Robert");
	put(f, "Ord", e);
	ok(ecw_table_delete(f->c, "Cust", "C", "c3", "*"), "delete c3");
}

/* Stale targets counted one by one and repaired by one run per source; the
 * copies of a deleted source found from the targets (clear) and cleared. */
static void test_audit__fanout_stale_and_orphan(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = fanout_job(f, "CustomerId eq '{RowKey}'", "clear");
	struct ecw_audit_counts c;

	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 0, 0);
	/* The sources are read with only what the filter and the copies read. */
	assert_string_equal(table_server_last_select(f->s, "Cust"),
	                    "PartitionKey,RowKey,Name,Email,Timestamp");
	fanout_drift(f, def);

	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 3, 2, 0, 0);
	/* sources c1, c2; their 3 targets; the 5 targets with copies of pass 2 */
	assert_int_equal(c.checked, 2 + 3 + 5);
	assert_string_equal(f->first[ECW_AUDIT_STALE], "P1/o1");
	assert_string_equal(f->first[ECW_AUDIT_ORPHAN], "P1/o4");
	assert_string_equal(copy_of(f, "P1", "o3"), "Robert"); /* read-only */

	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 3, 2, 0, 5);
	assert_string_equal(copy_of(f, "P1", "o1"), "Anna");
	assert_string_equal(copy_of(f, "P2", "o2"), "Anna");
	assert_string_equal(copy_of(f, "P1", "o3"), "Bob");
	assert_null(copy_of(f, "P1", "o4"));
	assert_null(copy_of(f, "P2", "o5"));
	assert_null(copy_of(f, "P2", "o6"));
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 0, 0);
	assert_int_equal(f->nlimits, 0);
}

/* on_delete: keep: a deleted source's copies stay by design, and there is
 * no pass from the targets. */
static void test_audit__fanout_keep_has_no_orphans(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = fanout_job(f, "CustomerId eq '{RowKey}'", "keep");
	struct ecw_audit_counts c;

	fanout_drift(f, def);
	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 3, 0, 0, 3);
	assert_int_equal(c.checked, 2 + 3);
	assert_string_equal(copy_of(f, "P1", "o4"), "Cy");
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 0, 0);
	assert_int_equal(f->nlimits, 0);
}

/* Both keys bound (a GET of the source per target), --partition on the
 * property bound to PartitionKey, and a source whose filter cannot render. */
static void test_audit__fanout_both_keys_and_partition(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def =
	    fanout_job(f, "CustomerPk eq '{PartitionKey}' and CustomerId eq '{RowKey}'", "clear");
	struct ecw_entity *e;
	struct ecw_audit_counts c;

	customer(f, "c1", "Ann");
	e = employee("D", "c1", "Dee"); /* same RowKey, another partition */
	put(f, "Cust", e);
	for (int i = 0; i < 2; i++) {
		e = entity("P", i ? "o2" : "o1");
		set(e, "CustomerPk", i ? "D" : "C");
		set(e, "CustomerId", "c1");
		put(f, "Ord", e);
	}
	run_ok(f, def, "C", "c1");
	run_ok(f, def, "D", "c1");
	ok(ecw_table_delete(f->c, "Cust", "D", "c1", "*"), "delete D/c1");
	/* Only D's targets: D's copy is an orphan; C/c1 is not looked at. */
	c = audit(f, def, false, "D");
	counts_are(&c, 0, 0, 1, 0, 0);
	assert_int_equal(c.checked, 1);
	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 0, 1, 0, 1);
	assert_null(copy_of(f, "P", "o2"));
	assert_string_equal(copy_of(f, "P", "o1"), "Ann");
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 0, 0);
}

/* A filter the keys do not invert: orphans not checked, and said so; the
 * same with --partition when PartitionKey is not bound. A source whose
 * filter cannot render is counted, not judged. */
static void test_audit__fanout_limits(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def =
	    fanout_job(f, "CustomerId eq '{RowKey}' or CustomerId eq 'x-{RowKey}'", "clear");
	struct ecw_audit_counts c;

	fanout_drift(f, def);
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 3, 0, 0, 0);
	assert_int_equal(f->nlimits, 1);
	assert_non_null(strstr(f->limit, "orphans not checked"));
	ecw_config_free(f->cfg);

	def = fanout_job(f, "CustomerId eq '{RowKey}'", "clear");
	c = audit(f, def, false, "C");
	counts_are(&c, 0, 3, 0, 0, 0);
	assert_int_equal(f->nlimits, 1);
	assert_non_null(strstr(f->limit, "--partition"));
	ecw_config_free(f->cfg);

	/* keep allows any property in the filter: Region is one c1 lacks. */
	def = fanout_job(f, "CustomerId eq '{RowKey}' and Region eq '{Region}'", "keep");
	c = audit(f, def, false, NULL);
	assert_int_equal(c.checked, 2);
	counts_are(&c, 0, 0, 0, 0, 0);
}

/* ---- index-list ---------------------------------------------------------------------------------------- */

static void test_audit__index_list_member(void **state)
{
	(void)state;
	assert_int_equal(ecw_audit_index_list_member(true, true), ECW_AUDIT_OK);
	/* The list is there without the source's key, or not there at all. */
	assert_int_equal(ecw_audit_index_list_member(true, false), ECW_AUDIT_MISSING);
	assert_int_equal(ecw_audit_index_list_member(false, false), ECW_AUDIT_MISSING);
}

static void test_audit__index_list_ref(void **state)
{
	(void)state;
	/* What a finished run leaves: the list committed, no intents. */
	assert_int_equal(ecw_audit_index_list_ref(true, "lastname", "Jones", 0, "lastname", "Jones"),
	                 ECW_AUDIT_OK);
	/* No reference (or another source's entity in its place). */
	assert_int_equal(ecw_audit_index_list_ref(false, NULL, NULL, 0, "lastname", "Jones"),
	                 ECW_AUDIT_STALE);
	/* Another list committed, none, or intents left (unreadable ones too). */
	assert_int_equal(ecw_audit_index_list_ref(true, "lastname", "Smith", 0, "lastname", "Jones"),
	                 ECW_AUDIT_STALE);
	assert_int_equal(ecw_audit_index_list_ref(true, "other", "Jones", 0, "lastname", "Jones"),
	                 ECW_AUDIT_STALE);
	assert_int_equal(ecw_audit_index_list_ref(true, NULL, NULL, 0, "lastname", "Jones"), ECW_AUDIT_STALE);
	assert_int_equal(ecw_audit_index_list_ref(true, "lastname", "Jones", 1, "lastname", "Jones"),
	                 ECW_AUDIT_STALE);
	assert_int_equal(ecw_audit_index_list_ref(true, "lastname", "Jones", SIZE_MAX, "lastname", "Jones"),
	                 ECW_AUDIT_STALE);
}

static void test_audit__index_list_shape(void **state)
{
	(void)state;
	assert_int_equal(ecw_audit_index_list_shape(2, true, 2), ECW_AUDIT_OK);
	/* A wrong Count, a missing one; a Count of 0 beside keys is wrong, not empty. */
	assert_int_equal(ecw_audit_index_list_shape(2, true, 3), ECW_AUDIT_STALE);
	assert_int_equal(ecw_audit_index_list_shape(2, false, 0), ECW_AUDIT_STALE);
	assert_int_equal(ecw_audit_index_list_shape(2, true, 0), ECW_AUDIT_STALE);
	assert_int_equal(ecw_audit_index_list_shape(1, true, -1), ECW_AUDIT_STALE);
	/* No key: an empty list left behind, whatever its Count says. */
	assert_int_equal(ecw_audit_index_list_shape(0, true, 0), ECW_AUDIT_ORPHAN);
	assert_int_equal(ecw_audit_index_list_shape(0, true, 5), ECW_AUDIT_ORPHAN);
	assert_int_equal(ecw_audit_index_list_shape(0, false, 0), ECW_AUDIT_ORPHAN);
}

static void test_audit__index_list_key(void **state)
{
	(void)state;
	assert_int_equal(ecw_audit_index_list_key(true, "lastname", "Jones", "lastname", "Jones"),
	                 ECW_AUDIT_OK);
	/* The source is gone. */
	assert_int_equal(ecw_audit_index_list_key(false, NULL, NULL, "lastname", "Jones"), ECW_AUDIT_ORPHAN);
	/* It computes to another list: the key is in the wrong one. */
	assert_int_equal(ecw_audit_index_list_key(true, "lastname", "Smith", "lastname", "Jones"),
	                 ECW_AUDIT_STALE);
	assert_int_equal(ecw_audit_index_list_key(true, "other", "Jones", "lastname", "Jones"),
	                 ECW_AUDIT_STALE);
}

/* The index-list job over Src into Lists, by LastName. */
static const struct ecw_job_def *index_list_job(struct fx *f)
{
	table_server_create_table(f->s, "Src");
	table_server_create_table(f->s, "Lists");
	return job(f, "    type: index-list\n    source: Src\n    table: Lists\n    partition_key: lastname\n"
	              "    row_key: \"{LastName}\"\n");
}

static void person(struct fx *f, const char *pk, const char *rk, const char *last)
{
	struct ecw_entity *e = entity(pk, rk);

	set(e, "LastName", last);
	put(f, "Src", e);
}

/* A list entity written behind the job's back. */
static void list_put(struct fx *f, const char *rk, const char *keys, int32_t count)
{
	struct ecw_entity *e = entity("lastname", rk);

	set(e, "Keys", keys);
	ok(ecw_entity_set_int32(e, "Count", count), "count");
	put(f, "Lists", e);
}

/* Every entity of Lists, as "pk/rk=Keys#Count;" (references as
 * "ref:SourcePartitionKey/SourceRowKey>ListRowKey|Pending;") in key order. */
static void list_state(struct fx *f, char *out, size_t cap)
{
	struct ecw_query_options qo = {0};
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	size_t n = 0;

	out[0] = '\0';
	ok(ecw_table_query_new(&q, f->c, "Lists", &qo), "query");
	while (ecw_table_query_next(&e, q) == 0 && e) {
		const struct ecw_prop *keys = ecw_entity_get(e, "Keys"), *count = ecw_entity_get(e, "Count"),
		                      *spk = ecw_entity_get(e, "SourcePartitionKey"),
		                      *srk = ecw_entity_get(e, "SourceRowKey"),
		                      *lrk = ecw_entity_get(e, "ListRowKey"),
		                      *pend = ecw_entity_get(e, "Pending");
		if (strncmp(ecw_entity_pk(e), "~ref~", 5) == 0)
			n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "ref:%s/%s>%s|%s;",
			                      spk ? spk->v.s : "-", srk ? srk->v.s : "-",
			                      lrk ? lrk->v.s : "-", pend ? pend->v.s : "");
		else
			n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s/%s=%s#%d;",
			                      ecw_entity_pk(e), ecw_entity_rk(e), keys ? keys->v.s : "-",
			                      count ? count->v.i32 : -1);
		ecw_entity_free(e);
	}
	ecw_table_query_free(q);
	assert_true(n < cap);
}

/* Each kind induced behind the job's back after it converged: found (the
 * conflict too), repaired (the conflict never), the state then what running
 * the job for every source gives, and a second audit finds only the
 * conflict. */
static void test_audit__index_list_each_kind(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = index_list_job(f);
	static const char *const rks[] = {"001", "002", "003", "004", "005"};
	struct ecw_audit_counts c;
	char after[8192], recomputed[8192];

	person(f, "Sales", "001", "Jones");
	person(f, "Sales", "002", "Jones");
	person(f, "Sales", "003", "Smith");
	person(f, "Ops", "004", "Smith");
	person(f, "Ops", "005", "Brown");
	for (size_t i = 0; i < 5; i++)
		run_ok(f, def, i < 3 ? "Sales" : "Ops", rks[i]);
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 0, 0);
	assert_int_equal(c.checked, 13); /* 5 sources, 3 lists, 5 keys */
	/* The sources are read with only what the list keys are rendered from. */
	assert_string_equal(table_server_last_select(f->s, "Src"), "PartitionKey,RowKey,LastName,Timestamp");

	/* missing: 001 taken out of Jones */
	list_put(f, "Jones", "[[\"Sales\",\"002\"]]", 1);
	/* orphan: a key whose source never was, in Smith; and Smith's Count wrong (stale) */
	list_put(f, "Smith", "[[\"Ops\",\"004\"],[\"Ops\",\"999\"],[\"Sales\",\"003\"]]", 7);
	/* stale: 003 in the wrong list too */
	list_put(f, "Brown", "[[\"Ops\",\"005\"],[\"Sales\",\"003\"]]", 2);
	/* orphan: an empty list left behind */
	list_put(f, "Empty", "[]", 0);
	/* missing + stale: 004 changes to Green without a message */
	person(f, "Ops", "004", "Green");
	/* conflict: an entity that is no list */
	put(f, "Lists", employee("lastname", "Weird", "no keys"));

	c = audit(f, def, false, NULL);
	/* missing: 001 (not in Jones), 004 (no Green list); stale: Smith's
	 * Count, 003 in Brown, 004 in Smith; orphan: Ops/999, Empty. */
	counts_are(&c, 2, 3, 2, 1, 0);
	assert_string_equal(f->first[ECW_AUDIT_MISSING], "lastname/Green");
	assert_string_equal(f->first[ECW_AUDIT_CONFLICT], "lastname/Weird");
	/* Read-only without --repair. */
	assert_non_null(table_server_find(f->s, "Lists", "lastname", "Empty"));

	/* Repairs go as the scan goes: 004's run (pass 1) takes it out of Smith
	 * and rewrites Smith with its Count, so pass 2 finds neither. */
	c = audit(f, def, true, NULL);
	counts_are(&c, 2, 1, 2, 1, 5);
	list_state(f, after, sizeof(after));
	assert_non_null(strstr(after, "lastname/Jones=[[\"Sales\",\"001\"],[\"Sales\",\"002\"]]#2;"));
	assert_non_null(strstr(after, "lastname/Smith=[[\"Sales\",\"003\"]]#1;"));
	assert_non_null(strstr(after, "lastname/Brown=[[\"Ops\",\"005\"]]#1;"));
	assert_non_null(strstr(after, "lastname/Green=[[\"Ops\",\"004\"]]#1;"));
	assert_null(strstr(after, "Empty"));
	assert_null(strstr(after, "999"));
	assert_non_null(table_server_find(f->s, "Lists", "lastname", "Weird"));

	/* The state equals a recomputation: running the job for every source
	 * changes nothing. */
	for (size_t i = 0; i < 5; i++)
		run_ok(f, def, i < 3 ? "Sales" : "Ops", rks[i]);
	list_state(f, recomputed, sizeof(recomputed));
	assert_string_equal(after, recomputed);
	assert_null(strstr(after, "~poisoned~"));

	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 1, 0);
	/* --partition: the sources and keys of Ops only; lists as a whole and
	 * entities that are no list name no source, so they are left out. */
	c = audit(f, def, false, "Ops");
	counts_are(&c, 0, 0, 0, 0, 0);
	assert_int_equal(c.checked, 4); /* 2 sources, 2 keys */
}

/* A reference deleted, or naming another list, or holding an intent: the key
 * is in its list, but the run after the next change would not find it there.
 * Stale; the run repairs it. And a key written behind the job's back into a
 * list, with --partition: found, and cleaned only because the audit
 * registers the list in the source's reference first. */
static void test_audit__index_list_reference_and_stray(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = index_list_job(f);
	struct ecw_entity *ref = NULL;
	struct ecw_table_query *q = NULL;
	struct ecw_query_options qo = {.filter = "PartitionKey ge '~ref~' and PartitionKey lt '~ref~~'"};
	struct ecw_audit_counts c;
	struct ecw_job_ctx jc;
	char pk[128], rk[128];

	memset(&jc, 0, sizeof(jc));
	person(f, "Sales", "001", "Jones");
	person(f, "Ops", "002", "Smith");
	run_ok(f, def, "Sales", "001");
	run_ok(f, def, "Ops", "002");
	ok(ecw_table_query_new(&q, f->c, "Lists", &qo), "query");
	do {
		ecw_entity_free(ref);
		ok(ecw_table_query_next(&ref, q), "next");
		assert_non_null(ref);
	} while (strcmp(ecw_entity_get(ref, "SourceRowKey")->v.s, "001") != 0);
	snprintf(pk, sizeof(pk), "%s", ecw_entity_pk(ref));
	snprintf(rk, sizeof(rk), "%s", ecw_entity_rk(ref));
	ecw_entity_free(ref);
	ecw_table_query_free(q);

	ok(ecw_table_delete(f->c, "Lists", pk, rk, "*"), "delete reference");
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 1, 0, 0, 0);
	assert_string_equal(f->first[ECW_AUDIT_STALE], "lastname/Jones");
	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 1, 0, 0, 1);
	assert_non_null(table_server_find(f->s, "Lists", pk, rk));

	/* Naming another list, and an intent left behind. */
	ref = entity(pk, rk);
	set(ref, "SourcePartitionKey", "Sales");
	set(ref, "SourceRowKey", "001");
	set(ref, "ListPartitionKey", "lastname");
	set(ref, "ListRowKey", "Old");
	put(f, "Lists", ref);
	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 1, 0, 0, 1);
	ref = entity(pk, rk);
	set(ref, "SourcePartitionKey", "Sales");
	set(ref, "SourceRowKey", "001");
	set(ref, "ListPartitionKey", "lastname");
	set(ref, "ListRowKey", "Jones");
	set(ref, "Pending", "[[\"lastname\",\"Jones\",\"m9\"]]");
	put(f, "Lists", ref);
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 1, 0, 0, 0);
	/* Only m9's runs may drop its intent (it may be running): not repaired. */
	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 1, 0, 0, 0);
	/* Once m9 is poisoned, its intent is handed over: the run drops it. */
	jc.client = f->c;
	jc.job = "j";
	jc.pk = "Sales";
	jc.rk = "001";
	jc.trace_id = jc.message_id = "m9";
	ok(def->type->abandon(def->settings, &jc), "abandon");
	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 1, 0, 0, 1);

	/* A stray key the reference does not name: run alone leaves it. */
	list_put(f, "Smith", "[[\"Ops\",\"002\"],[\"Sales\",\"001\"]]", 2);
	run_ok(f, def, "Sales", "001");
	assert_non_null(strstr(
	    ecw_entity_get(table_server_find(f->s, "Lists", "lastname", "Smith"), "Keys")->v.s, "001"));
	/* --partition Ops: 002's source and key only; Sales' key is not looked at. */
	c = audit(f, def, false, "Ops");
	counts_are(&c, 0, 0, 0, 0, 0);
	c = audit(f, def, true, "Sales");
	counts_are(&c, 0, 1, 0, 0, 1);
	assert_string_equal(f->first[ECW_AUDIT_STALE], "lastname/Smith");
	assert_string_equal(
	    ecw_entity_get(table_server_find(f->s, "Lists", "lastname", "Smith"), "Keys")->v.s,
	    "[[\"Ops\",\"002\"]]");
	c = audit(f, def, false, NULL);
	counts_are(&c, 0, 0, 0, 0, 0);
}

/* A Keys longer than the service lets one String be is no list the job
 * wrote: a conflict, and never parsed. */
static void test_audit__index_list_keys_capped(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = index_list_job(f);
	struct ecw_audit_counts c;
	size_t n = 40000;
	char *big = malloc(n + 1);

	assert_non_null(big);
	memset(big, ' ', n);
	big[0] = '[';
	memcpy(big + n - 1, "]", 2);
	list_put(f, "Huge", big, 0);
	free(big);
	c = audit(f, def, true, NULL);
	counts_are(&c, 0, 0, 0, 1, 0);
	assert_string_equal(f->first[ECW_AUDIT_CONFLICT], "lastname/Huge");
	assert_non_null(table_server_find(f->s, "Lists", "lastname", "Huge"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_audit__move_pair),
	    cmocka_unit_test(test_audit__index_entry),
	    cmocka_unit_test(test_audit__index_orphan),
	    cmocka_unit_test(test_audit__index_ref),
	    cmocka_unit_test(test_audit__exit_status),
	    cmocka_unit_test_setup_teardown(test_audit__move_completes_identical_reports_different, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_audit__index_each_kind, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_audit__index_orphan_needs_registration, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_audit__index_reference, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_audit__index_partition, setup, teardown),
	    cmocka_unit_test(test_audit__drift_is_found_and_not_repaired),
	    cmocka_unit_test_setup_teardown(test_audit__run_counts_by_kind_and_stops, setup, teardown),
	    cmocka_unit_test(test_audit__fanout_copies),
	    cmocka_unit_test_setup_teardown(test_audit__fanout_stale_and_orphan, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_audit__fanout_keep_has_no_orphans, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_audit__fanout_both_keys_and_partition, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_audit__fanout_limits, setup, teardown),
	    cmocka_unit_test(test_audit__index_list_member),
	    cmocka_unit_test(test_audit__index_list_ref),
	    cmocka_unit_test(test_audit__index_list_shape),
	    cmocka_unit_test(test_audit__index_list_key),
	    cmocka_unit_test_setup_teardown(test_audit__index_list_each_kind, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_audit__index_list_reference_and_stray, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_audit__index_list_keys_capped, setup, teardown),
	};
	return cmocka_run_group_tests_name("audit", tests, NULL, NULL);
}
