/* SPDX-License-Identifier: MIT */
/* test_percent_keys.c - keys holding '%' against a Table service that
 * decodes an entity's URL path twice, as Azure has been reported to
 * (tests/unit/table_server.h): every entity call of the client (get, the
 * four keyed writes, delete, delete-if-exists) and every job step that gets,
 * writes or deletes one entity by key must reach the entity named, never the
 * one the twice-decoded path names. Each table holds a decoy: next to
 * "pct%41" sits "pctA", what (PartitionKey='..',RowKey='pct%2541') reads as
 * when decoded twice; a test fails if the decoy is read, changed or deleted,
 * or if the entity named is missed. Keys without '%' keep the direct
 * request. */
#include "support.h"
#include "table_server.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_config.h"
#include "ecw_job.h"

#define KEY "pct%41" /* named by the tests */
#define DECOY "pctA" /* what its one encoding, decoded twice, names */

struct fx {
	struct ecw_account *acct;
	struct ecw_client *c;
	struct table_server *s;
	struct ecw_config *cfg;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	table_server_connect(&f->acct, &f->c, &f->s, true);
	sleeps_reset();
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

static struct ecw_entity *entity(const char *pk, const char *rk, const char *name, const char *value)
{
	struct ecw_entity *e;

	assert_int_equal(ecw_entity_new(&e, pk, rk), 0);
	if (name)
		assert_int_equal(ecw_entity_set_string(e, name, value, strlen(value)), 0);
	return e;
}

static void seed(struct fx *f, const char *table, const char *pk, const char *rk, const char *name,
                 const char *value)
{
	struct ecw_entity *e = entity(pk, rk, name, value);
	table_server_put(f->s, table, e);
	ecw_entity_free(e);
}

/* The stored entity's string property name, or NULL (entity or property absent). */
static const char *stored(struct fx *f, const char *table, const char *pk, const char *rk, const char *name)
{
	const struct ecw_entity *e = table_server_find(f->s, table, pk, rk);
	const struct ecw_prop *p = e ? ecw_entity_get(e, name) : NULL;

	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

static void ok(int err, const char *what)
{
	if (err != 0)
		fail_msg("%s: %s: %s", what, ecw_error_name(err), ecw_error_last()->message);
}

/* ---- the client's entity calls ------------------------------------------------------------------------- */

static void test_percent_keys__fake_decodes_twice(void **state)
{
	struct fx *f = *state;
	struct ecw_request r;
	struct ecw_response resp;

	/* The fake itself: a direct GET of "pct%41" reads the decoy, "100%" is a broken path. */
	seed(f, "Tab", "p", DECOY, "Who", "decoy");
	ecw_request_init(&r, ECW_SVC_TABLE, "GET");
	ecw_response_init(&resp);
	assert_int_equal(ecw_escape_entity_path(&r.path, "Tab", "p", KEY), 0);
	assert_str(ecw_buf_cstr(&r.path), "/Tab(PartitionKey='p',RowKey='pct%2541')");
	assert_int_equal(
	    table_server_send(
	        f->s, &resp,
	        "http://127.0.0.1:10002/devstoreaccount1/Tab(PartitionKey='p',RowKey='pct%2541')", &r),
	    0);
	assert_int_equal(resp.status, 200);
	assert_true(str_contains(ecw_buf_cstr(&resp.body), "\"RowKey\":\"pctA\""));
	ecw_response_reset(&resp);
	assert_int_equal(
	    table_server_send(f->s, &resp,
	                      "http://127.0.0.1:10002/devstoreaccount1/Tab(PartitionKey='p',RowKey='100%25')",
	                      &r),
	    0);
	assert_int_equal(resp.status, 400);
	ecw_response_dispose(&resp);
	ecw_request_dispose(&r);
}

static void test_percent_keys__get(void **state)
{
	struct fx *f = *state;
	struct ecw_entity *e = NULL;

	seed(f, "Tab", "p", KEY, "Who", "named");
	seed(f, "Tab", "p", DECOY, "Who", "decoy");
	seed(f, "Tab", "100%", "50%", "Who", "percent");
	ok(ecw_table_get(&e, f->c, "Tab", "p", KEY), "get pct%41");
	assert_str(ecw_entity_rk(e), KEY);
	assert_str(ecw_entity_get(e, "Who")->v.s, "named");
	/* The ETag as a get gives it: the one to write or delete If-Match with. */
	assert_str(ecw_entity_etag(e), ecw_entity_etag(table_server_find(f->s, "Tab", "p", KEY)));
	ecw_entity_free(e);
	ok(ecw_table_get(&e, f->c, "Tab", "100%", "50%"), "get 100%/50%");
	assert_str(ecw_entity_get(e, "Who")->v.s, "percent");
	ecw_entity_free(e);
	/* Absent: the 404 of a get; a key that needs quoting in the filter too. */
	assert_int_equal(ecw_table_get(&e, f->c, "Tab", "p", "pct%42 o'brien"), ECW_ENOTFOUND);
	assert_null(e);
	assert_int_equal(ecw_error_last()->http_status, 404);
	assert_int_equal(ecw_table_get(&e, f->c, "NoSuchTable", "p", KEY), ECW_ENOTABLE);
	/* Bad input is still refused before any request. */
	assert_int_equal(ecw_table_get(&e, f->c, "Tab", "p", "a/%41"), ECW_EINVALID);
	assert_int_equal(table_server_keyed_percent_requests(f->s), 0);
	/* A key without '%' keeps the direct GET. */
	ok(ecw_table_get(&e, f->c, "Tab", "p", DECOY), "get pctA");
	assert_str(ecw_entity_get(e, "Who")->v.s, "decoy");
	ecw_entity_free(e);
	assert_int_equal(table_server_keyed_requests(f->s), 1);
}

static void test_percent_keys__writes(void **state)
{
	struct fx *f = *state;
	struct ecw_entity *e = entity("p", KEY, "Who", "replaced");
	char *etag = NULL, *stale = NULL;

	seed(f, "Tab", "p", DECOY, "Who", "decoy");
	/* Insert-or-replace creates, then replaces. */
	ok(ecw_table_write(&etag, f->c, "Tab", e, ECW_WRITE_INSERT_OR_REPLACE, NULL), "upsert");
	assert_str(stored(f, "Tab", "p", KEY, "Who"), "replaced");
	assert_non_null(etag);
	assert_str(etag, ecw_entity_etag(table_server_find(f->s, "Tab", "p", KEY)));
	stale = etag;
	etag = NULL;
	/* Insert-or-merge keeps what it does not name. */
	ecw_entity_free(e);
	e = entity("p", KEY, "Extra", "merged");
	ok(ecw_table_write(&etag, f->c, "Tab", e, ECW_WRITE_INSERT_OR_MERGE, NULL), "upsert merge");
	assert_str(stored(f, "Tab", "p", KEY, "Who"), "replaced");
	assert_str(stored(f, "Tab", "p", KEY, "Extra"), "merged");
	/* Update and merge If-Match: the current ETag applies, the stale one is 412. */
	ecw_entity_free(e);
	e = entity("p", KEY, "Who", "updated");
	assert_int_equal(ecw_table_write(NULL, f->c, "Tab", e, ECW_WRITE_UPDATE, stale), ECW_EPRECONDITION);
	free(stale);
	stale = NULL;
	ok(ecw_table_write(&stale, f->c, "Tab", e, ECW_WRITE_UPDATE, etag), "update");
	free(etag);
	etag = NULL;
	assert_str(stored(f, "Tab", "p", KEY, "Who"), "updated");
	assert_null(stored(f, "Tab", "p", KEY, "Extra"));
	ecw_entity_free(e);
	e = entity("p", KEY, "Extra", "again");
	ok(ecw_table_write(&etag, f->c, "Tab", e, ECW_WRITE_MERGE, stale), "merge");
	assert_str(etag, ecw_entity_etag(table_server_find(f->s, "Tab", "p", KEY)));
	assert_str(stored(f, "Tab", "p", KEY, "Who"), "updated");
	assert_str(stored(f, "Tab", "p", KEY, "Extra"), "again");
	assert_int_equal(ecw_table_write(NULL, f->c, "Tab", e, ECW_WRITE_MERGE, stale), ECW_EPRECONDITION);
	/* An update of an absent entity is a 404; a missing table ECW_ENOTABLE. */
	ecw_entity_free(e);
	e = entity("p", "pct%42", "Who", "x");
	assert_int_equal(ecw_table_write(NULL, f->c, "Tab", e, ECW_WRITE_UPDATE, "*"), ECW_ENOTFOUND);
	assert_int_equal(ecw_table_write(NULL, f->c, "NoSuchTable", e, ECW_WRITE_INSERT_OR_REPLACE, NULL),
	                 ECW_ENOTABLE);
	/* The If-Match rules are the direct call's. */
	assert_int_equal(ecw_table_write(NULL, f->c, "Tab", e, ECW_WRITE_UPDATE, NULL), ECW_EINVALID);
	assert_int_equal(ecw_table_write(NULL, f->c, "Tab", e, ECW_WRITE_INSERT_OR_REPLACE, "*"),
	                 ECW_EINVALID);
	/* An insert carries its keys in the body: 409 when it exists. */
	ecw_entity_free(e);
	e = entity("p", KEY, "Who", "second");
	assert_int_equal(ecw_table_write(NULL, f->c, "Tab", e, ECW_WRITE_INSERT, NULL), ECW_ECONFLICT);
	/* The decoy never moved. */
	assert_str(stored(f, "Tab", "p", DECOY, "Who"), "decoy");
	assert_null(stored(f, "Tab", "p", DECOY, "Extra"));
	assert_int_equal(table_server_count(f->s, "Tab"), 2);
	assert_int_equal(table_server_keyed_percent_requests(f->s), 0);
	free(etag);
	free(stale);
	ecw_entity_free(e);
}

static void test_percent_keys__delete(void **state)
{
	struct fx *f = *state;
	char stale[96];
	bool deleted = true;

	seed(f, "Tab", "p", KEY, "Who", "named");
	snprintf(stale, sizeof(stale), "%s", ecw_entity_etag(table_server_find(f->s, "Tab", "p", KEY)));
	seed(f, "Tab", "p", KEY, "Who", "newer");
	seed(f, "Tab", "p", DECOY, "Who", "decoy");
	assert_int_equal(ecw_table_delete(f->c, "Tab", "p", KEY, stale), ECW_EPRECONDITION);
	assert_non_null(table_server_find(f->s, "Tab", "p", KEY));
	assert_int_equal(ecw_table_delete(f->c, "Tab", "p", KEY, ""), ECW_EINVALID);
	ok(ecw_table_delete(f->c, "Tab", "p", KEY, ecw_entity_etag(table_server_find(f->s, "Tab", "p", KEY))),
	   "delete If-Match");
	assert_null(table_server_find(f->s, "Tab", "p", KEY));
	assert_int_equal(ecw_table_delete(f->c, "Tab", "p", KEY, "*"), ECW_ENOTFOUND);
	assert_int_equal(ecw_table_delete(f->c, "NoSuchTable", "p", KEY, "*"), ECW_ENOTABLE);
	ok(ecw_table_delete_if_exists(&deleted, f->c, "Tab", "p", KEY), "delete if exists (absent)");
	assert_false(deleted);
	seed(f, "Tab", "p", KEY, "Who", "back");
	ok(ecw_table_delete_if_exists(&deleted, f->c, "Tab", "p", KEY), "delete if exists");
	assert_true(deleted);
	assert_null(table_server_find(f->s, "Tab", "p", KEY));
	assert_str(stored(f, "Tab", "p", DECOY, "Who"), "decoy");
	assert_int_equal(table_server_keyed_percent_requests(f->s), 0);
}

/* ---- the jobs' steps --------------------------------------------------------------------------------------- */

static const struct ecw_job_def *job(struct fx *f, const char *yaml)
{
	char text[1024];

	snprintf(text, sizeof(text), "jobs:\n  j:\n%s", yaml);
	f->cfg = config_parse_ok(text, "t.yaml");
	return ecw_config_job(f->cfg, "j");
}

/* Runs def for (pk, rk), or keyless with message (JSON text) when pk is NULL. */
static int run(struct fx *f, const struct ecw_job_def *def, const char *pk, const char *rk,
               const char *message)
{
	struct json_object *msg = message ? json_tokener_parse(message) : NULL;
	atomic_bool lost = false, stopping = false;
	struct ecw_job_ctx ctx;
	int err;

	memset(&ctx, 0, sizeof(ctx));
	ctx.client = f->c;
	ctx.job = "j";
	ctx.pk = pk;
	ctx.rk = rk;
	ctx.trace_id = ctx.message_id = "m1";
	ctx.dequeue_count = 1;
	ctx.message = msg;
	ctx.lease_lost = &lost;
	ctx.stopping = &stopping;
	err = def->type->run(def->settings, &ctx);
	json_object_put(msg);
	return err;
}

static void run_ok(struct fx *f, const struct ecw_job_def *def, const char *pk, const char *rk,
                   const char *message)
{
	ok(run(f, def, pk, rk, message), "run");
}

static void test_percent_keys__move(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = job(f, "    {type: move, from: Src, to: Dst}\n");

	table_server_create_table(f->s, "Dst");
	seed(f, "Src", "p%25", KEY, "Who", "named");
	seed(f, "Src", "p%", DECOY, "Who", "decoy");
	/* Read, insert the copy, delete If-Match. */
	run_ok(f, def, "p%25", KEY, NULL);
	assert_str(stored(f, "Dst", "p%25", KEY, "Who"), "named");
	assert_null(table_server_find(f->s, "Src", "p%25", KEY));
	assert_str(stored(f, "Src", "p%", DECOY, "Who"), "decoy");
	assert_int_equal(table_server_count(f->s, "Dst"), 1);
	/* A copy already there (a rerun after a crash before the delete): read
	 * it and the source again, replace it If-Match, delete the source. */
	seed(f, "Src", "p%25", KEY, "Who", "changed");
	run_ok(f, def, "p%25", KEY, NULL);
	assert_str(stored(f, "Dst", "p%25", KEY, "Who"), "changed");
	assert_null(table_server_find(f->s, "Src", "p%25", KEY));
	/* Gone: done, nothing else touched. */
	run_ok(f, def, "p%25", KEY, NULL);
	assert_str(stored(f, "Src", "p%", DECOY, "Who"), "decoy");
	assert_int_equal(table_server_count(f->s, "Dst"), 1);
	assert_int_equal(table_server_keyed_percent_requests(f->s), 0);
}

static void test_percent_keys__index(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = job(f, "    type: index\n    source: Src\n    table: Idx\n"
	                                       "    partition_key: email\n    row_key: \"{Email}\"\n");

	table_server_create_table(f->s, "Idx");
	seed(f, "Src", "p", KEY, "Email", "a%41@x");
	seed(f, "Src", "p", DECOY, "Email", "decoy@x");
	seed(f, "Idx", "email", "aA@x", "SourceRowKey", "decoy entry");
	/* Indexed: the back-reference, then the entry under a key holding '%'. */
	run_ok(f, def, "p", KEY, NULL);
	assert_str(stored(f, "Idx", "email", "a%41@x", "SourceRowKey"), KEY);
	/* Changed: the new entry written, the old one deleted, the reference moved. */
	seed(f, "Src", "p", KEY, "Email", "b%42@x");
	run_ok(f, def, "p", KEY, NULL);
	assert_str(stored(f, "Idx", "email", "b%42@x", "SourceRowKey"), KEY);
	assert_null(table_server_find(f->s, "Idx", "email", "a%41@x"));
	/* Unchanged: a rerun reads the entry and leaves it. */
	run_ok(f, def, "p", KEY, NULL);
	assert_str(stored(f, "Idx", "email", "b%42@x", "SourceRowKey"), KEY);
	/* The source gone: the entry and its reference go. */
	assert_int_equal(ecw_table_delete(f->c, "Src", "p", KEY, "*"), 0);
	run_ok(f, def, "p", KEY, NULL);
	assert_null(table_server_find(f->s, "Idx", "email", "b%42@x"));
	/* Left: the decoy entry only (no reference, no entry of ours). */
	assert_int_equal(table_server_count(f->s, "Idx"), 1);
	assert_str(stored(f, "Idx", "email", "aA@x", "SourceRowKey"), "decoy entry");
	assert_str(stored(f, "Src", "p", DECOY, "Email"), "decoy@x");
	assert_int_equal(table_server_keyed_percent_requests(f->s), 0);
}

/* index's run_group on members of one partition whose keys hold '%': the
 * sources and the entries' places read by queries, the entries written in
 * one transaction, each member's outcome its own (one without an Email fails
 * alone, a duplicate finds the work done), and no keyed request on a '%'. */
static void test_percent_keys__index_group(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = job(f, "    type: index\n    source: Src\n    table: Idx\n"
	                                       "    partition_key: email\n    row_key: \"{Email}\"\n");
	const char *rks[] = {KEY, "k2%", "k3", "k2%", "k4"};
	atomic_bool lost = false, stopping = false;
	struct ecw_job_ctx ctxs[5];
	int errs[5];

	table_server_create_table(f->s, "Idx");
	seed(f, "Src", "p%", "k2%", "Email", "old%25@x");
	seed(f, "Src", "p%", DECOY, "Email", "decoy@x");
	run_ok(f, def, "p%", "k2%", NULL);
	seed(f, "Src", "p%", KEY, "Email", "a%41@x");
	seed(f, "Src", "p%", "k2%", "Email", "new%25@x");
	seed(f, "Src", "p%", "k3", "Other", "no email");
	seed(f, "Src", "p%", "k4", "Email", "d%@x");
	memset(ctxs, 0, sizeof(ctxs));
	for (int i = 0; i < 5; i++) {
		ctxs[i].client = f->c;
		ctxs[i].job = "j";
		ctxs[i].pk = "p%";
		ctxs[i].rk = rks[i];
		ctxs[i].trace_id = ctxs[i].message_id = "m";
		ctxs[i].dequeue_count = 1;
		ctxs[i].lease_lost = &lost;
		ctxs[i].stopping = &stopping;
		errs[i] = -1;
	}
	def->type->run_group(def->settings, ctxs, 5, errs);
	assert_int_equal(errs[0], 0);
	assert_int_equal(errs[1], 0);
	assert_int_equal(errs[2], ECW_EINVALID);
	assert_true(ctxs[2].error[0] != '\0');
	assert_int_equal(errs[3], 0);
	assert_int_equal(errs[4], 0);
	assert_str(ctxs[0].outcome_detail, "indexed");
	assert_str(stored(f, "Idx", "email", "a%41@x", "SourceRowKey"), KEY);
	assert_str(stored(f, "Idx", "email", "new%25@x", "SourceRowKey"), "k2%");
	assert_str(stored(f, "Idx", "email", "d%@x", "SourceRowKey"), "k4");
	assert_null(table_server_find(f->s, "Idx", "email", "old%25@x"));
	/* Three entries, three references: nothing of k3's, nothing of the decoy's. */
	assert_int_equal(table_server_count(f->s, "Idx"), 6);
	assert_int_equal(table_server_keyed_percent_requests(f->s), 0);
}

static void test_percent_keys__index_list(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = job(f, "    type: index-list\n    source: Src\n    table: Idx\n"
	                                       "    partition_key: name\n    row_key: \"{Last}\"\n");
	const struct ecw_entity *list;

	table_server_create_table(f->s, "Idx");
	seed(f, "Src", "p", KEY, "Last", "Jo%41");
	seed(f, "Src", "p", "k2", "Last", "Jo%41");
	seed(f, "Src", "p", DECOY, "Last", "decoy");
	seed(f, "Idx", "name", "JoA", "Keys", "decoy list");
	/* Two keys added to one list whose key holds '%' (the second read,
	 * changed and written If-Match), each with its back-reference. */
	run_ok(f, def, "p", KEY, NULL);
	run_ok(f, def, "p", "k2", NULL);
	assert_non_null(list = table_server_find(f->s, "Idx", "name", "Jo%41"));
	assert_str(stored(f, "Idx", "name", "Jo%41", "Keys"), "[[\"p\",\"k2\"],[\"p\",\"pct%41\"]]");
	/* Moved to another list: added there, removed here. */
	seed(f, "Src", "p", KEY, "Last", "Sm%69th");
	run_ok(f, def, "p", KEY, NULL);
	assert_str(stored(f, "Idx", "name", "Sm%69th", "Keys"), "[[\"p\",\"pct%41\"]]");
	assert_str(stored(f, "Idx", "name", "Jo%41", "Keys"), "[[\"p\",\"k2\"]]");
	/* The last key of a list gone: the list is deleted. */
	assert_int_equal(ecw_table_delete(f->c, "Src", "p", "k2", "*"), 0);
	run_ok(f, def, "p", "k2", NULL);
	assert_null(table_server_find(f->s, "Idx", "name", "Jo%41"));
	assert_str(stored(f, "Idx", "name", "JoA", "Keys"), "decoy list");
	assert_int_equal(table_server_keyed_percent_requests(f->s), 0);
}

static void test_percent_keys__fanout(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def =
	    job(f, "    type: fanout\n    source: Cust\n    table: Orders\n"
	           "    filter: \"PartitionKey eq '{RowKey}'\"\n    fields: {CustomerName: Name}\n"
	           "    on_delete: clear\n");

	seed(f, "Cust", "c", KEY, "Name", "Contoso");
	seed(f, "Cust", "c", DECOY, "Name", "Decoy Ltd");
	seed(f, "Orders", KEY, "o1", "CustomerName", "old");
	seed(f, "Orders", KEY, "o2", "CustomerName", "old");
	seed(f, "Orders", DECOY, "o1", "CustomerName", "Decoy Ltd");
	run_ok(f, def, "c", KEY, NULL);
	assert_str(stored(f, "Orders", KEY, "o1", "CustomerName"), "Contoso");
	assert_str(stored(f, "Orders", KEY, "o2", "CustomerName"), "Contoso");
	/* Deleted with on_delete: clear: each order replaced If-Match without the field. */
	assert_int_equal(ecw_table_delete(f->c, "Cust", "c", KEY, "*"), 0);
	run_ok(f, def, "c", KEY, NULL);
	assert_non_null(table_server_find(f->s, "Orders", KEY, "o1"));
	assert_null(stored(f, "Orders", KEY, "o1", "CustomerName"));
	assert_null(stored(f, "Orders", KEY, "o2", "CustomerName"));
	assert_str(stored(f, "Orders", DECOY, "o1", "CustomerName"), "Decoy Ltd");
	assert_str(stored(f, "Cust", "c", DECOY, "Name"), "Decoy Ltd");
	assert_int_equal(table_server_keyed_percent_requests(f->s), 0);
}

static void test_percent_keys__rollup(void **state)
{
	struct fx *f = *state;
	const struct ecw_job_def *def = job(
	    f, "    type: rollup\n    source: Tel\n    from_partition: \"{device}_raw\"\n"
	       "    to_partition: \"{device}_daily\"\n    window: 1d\n    aggregate: {samples: count()}\n");
	const char *msg = "{\"job\":\"j\",\"device\":\"t%41\",\"window_start\":\"2020-10-11\"}";
	const struct ecw_entity *daily;
	const struct ecw_prop *samples;

	seed(f, "Tel", "t%41_raw", "1602374400", "depth", "1");
	seed(f, "Tel", "t%41_raw", "1602378000", "depth", "2");
	seed(f, "Tel", "tA_daily", "20201011", "samples", "decoy");
	/* Written, then read with its ETag and replaced If-Match by a rerun. */
	run_ok(f, def, NULL, NULL, msg);
	seed(f, "Tel", "t%41_raw", "1602381600", "depth", "3");
	run_ok(f, def, NULL, NULL, msg);
	assert_non_null(daily = table_server_find(f->s, "Tel", "t%41_daily", "20201011"));
	assert_non_null(samples = ecw_entity_get(daily, "samples"));
	assert_int_equal(samples->type, ECW_EDM_INT32);
	assert_int_equal(samples->v.i32, 3);
	/* No raw rows left: the aggregate is deleted If-Match. */
	assert_int_equal(ecw_table_delete(f->c, "Tel", "t%41_raw", "1602374400", "*"), 0);
	assert_int_equal(ecw_table_delete(f->c, "Tel", "t%41_raw", "1602378000", "*"), 0);
	assert_int_equal(ecw_table_delete(f->c, "Tel", "t%41_raw", "1602381600", "*"), 0);
	run_ok(f, def, NULL, NULL, msg);
	assert_null(table_server_find(f->s, "Tel", "t%41_daily", "20201011"));
	assert_str(stored(f, "Tel", "tA_daily", "20201011", "samples"), "decoy");
	assert_int_equal(table_server_keyed_percent_requests(f->s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_percent_keys__fake_decodes_twice, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_percent_keys__get, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_percent_keys__writes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_percent_keys__delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_percent_keys__move, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_percent_keys__index, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_percent_keys__index_group, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_percent_keys__index_list, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_percent_keys__fanout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_percent_keys__rollup, setup, teardown),
	};
	return cmocka_run_group_tests_name("percent_keys", tests, NULL, NULL);
}
