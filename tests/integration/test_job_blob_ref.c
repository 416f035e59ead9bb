/* SPDX-License-Identifier: MIT */
/* test_job_blob_ref.c - the blob-ref job (the large-entities pattern)
 * against Azurite's table and blob services, with a grace of 3 s waited on
 * the service's clock (a blob's Last-Modified against an answer's Date),
 * never the local one. In this process (the job's run called directly):
 * an entity's unnamed blobs older than grace deleted, named ones (by name
 * or by this container's URL) and young ones kept, the message held
 * (ECW_ELATER) until the young are past their grace; an entity gone takes
 * its prefix's blobs with it; nothing outside the prefix is touched (a
 * neighbour whose prefix shares the text); a missing table or container is
 * blocked, nothing deleted; races staged at the run's crash points: a blob
 * re-uploaded between the listing and its delete (the If-Match fails, the
 * run lists again and keeps the new, young blob), and the application's
 * upload-then-update racing a run (the new blob is never deleted, the old
 * one once it is unnamed and old); two runs on one entity at once. As a
 * process: a message that waits for grace on a worker with
 * max_dequeue_count 1 is requeued, never poisoned, and completes; a
 * missing container holds the message (blocked, job_blocked naming it)
 * until it is created; a crash after the read, the listing and each delete
 * converges. And `ecworker audit`: orphans (unnamed old blobs, blobs of a
 * missing entity) found by listing the container and inverting the
 * prefix, --repair deleting them; a dangling reference reported as missing
 * and never repaired; a scheduled audit with repair: true, its
 * ecw_audit_drift. */
#include "auditfx.h"
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw_config.h"
#include "ecw_crash.h"
#include "ecw_job.h"

#define GRACE_S 3

struct br {
	struct wfx x; /* first: wfx_teardown; x.t->table holds the entities */
	char container[64];
	bool created;
	int grace_s; /* GRACE_S, unless a test needs longer */
	struct ecw_config *cfg;
	const struct ecw_job_def *def;
};

static int br_setup(void **state)
{
	struct br *b = wfx_new(sizeof(struct br), WFX_QUEUE | WFX_TABLE);

	itest_unique_name(b->container, sizeof(b->container), 'q', "files");
	b->grace_s = GRACE_S;
	ECW_ASSERT_OK(ecw_blob_container_create(NULL, b->x.t->client, b->container));
	b->created = true;
	*state = b;
	return 0;
}

static int br_teardown(void **state)
{
	struct br *b = *state;

	ecw_crash_point_hook(NULL, NULL);
	if (b->created) {
		int err = ecw_blob_container_delete(b->x.t->client, b->container);
		if (err != 0 && err != ECW_ENOCONTAINER)
			fail_msg("deleting container %s: %s", b->container, itest_last_error());
	}
	ecw_config_free(b->cfg);
	return wfx_teardown(state);
}

static struct ecw_client *client(struct br *b)
{
	return b->x.t->client;
}

/* The job's lines under jobs: (indented two spaces), on this test's table
 * and container (or another container). */
static const char *job_text(char *buf, size_t cap, const struct br *b, const char *container)
{
	snprintf(
	    buf, cap,
	    "  files:\n    type: blob-ref\n    source: %s\n    container: %s\n"
	    "    prefix: \"{PartitionKey}/{RowKey}/\"\n    properties: [Photo, Resume]\n    grace: %ds\n",
	    b->x.t->table, container ? container : b->container, b->grace_s);
	return buf;
}

/* ---- in this process -------------------------------------------------------------------------- */

static void load(struct br *b, const char *container)
{
	char text[2048], jobs[1024];
	struct ecw_node_errors errs;

	snprintf(text, sizeof(text),
	         "storage: {connection_string: \"UseDevelopmentStorage=true\"}\njobs:\n%s",
	         job_text(jobs, sizeof(jobs), b, container));
	ecw_config_free(b->cfg);
	b->cfg = NULL;
	ecw_node_errors_init(&errs);
	int err = ecw_config_parse(&b->cfg, text, strlen(text), "direct.yaml", &errs);
	ITEST_CHECK(err == 0, "config: %s", errs.n ? errs.lines[0] : itest_last_error());
	ecw_node_errors_dispose(&errs);
	b->def = ecw_config_job(b->cfg, "files");
	assert_non_null(b->def);
}

struct result {
	int err;
	int later_s;
	char detail[64];
};

static struct result run_with(struct br *b, struct ecw_client *c, const char *pk, const char *rk)
{
	struct ecw_job_ctx ctx = {.client = c, .job = "files", .pk = pk, .rk = rk, .message_id = "direct"};
	struct result r;

	if (!b->def)
		load(b, NULL);
	ecw_error_clear();
	r.err = b->def->type->run(b->def->settings, &ctx);
	r.later_s = ctx.later_s;
	snprintf(r.detail, sizeof(r.detail), "%s", ctx.outcome_detail);
	return r;
}

static struct result run(struct br *b, const char *pk, const char *rk)
{
	return run_with(b, client(b), pk, rk);
}

static void put_blob(struct br *b, const char *name, const char *text)
{
	ECW_ASSERT_OK(ecw_blob_put(NULL, client(b), b->container, name, text, strlen(text), NULL));
}

static bool exists(struct br *b, const char *name)
{
	struct ecw_blob_info *info = NULL;
	int err = ecw_blob_props(&info, client(b), b->container, name);

	ecw_blob_info_free(info);
	if (err == ECW_EBLOBNOTFOUND)
		return false;
	ECW_ASSERT_OK(err);
	return true;
}

static void assert_blobs(struct br *b, const char *const *there, const char *const *gone, const char *when)
{
	for (size_t i = 0; there && there[i]; i++)
		ITEST_CHECK(exists(b, there[i]), "%s: %s was deleted", when, there[i]);
	for (size_t i = 0; gone && gone[i]; i++)
		ITEST_CHECK(!exists(b, gone[i]), "%s: %s is still there", when, gone[i]);
}

/* Until name is older than the grace by the service's clock. */
static void wait_past_grace(struct br *b, const char *name)
{
	int64_t end = itest_now_ms() + 20000;

	for (;;) {
		struct ecw_blob_info *info = NULL;
		ECW_ASSERT_OK(ecw_blob_props(&info, client(b), b->container, name));
		bool old = info->service_date - info->last_modified >= b->grace_s + 1;
		ecw_blob_info_free(info);
		if (old)
			return;
		ITEST_CHECK(itest_now_ms() < end, "%s never grew older than %d s on the service's clock",
		            name, b->grace_s);
		itest_sleep_ms(200);
	}
}

/* An employee naming photo (a name or URL; NULL: no Photo) and resume. */
static void write_employee(struct br *b, const char *pk, const char *rk, const char *photo,
                           const char *resume)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Name", "Ann", 3));
	if (photo)
		ECW_ASSERT_OK(ecw_entity_set_string(e, "Photo", photo, strlen(photo)));
	if (resume)
		ECW_ASSERT_OK(ecw_entity_set_string(e, "Resume", resume, strlen(resume)));
	ECW_ASSERT_OK(ecw_table_write(NULL, client(b), b->x.t->table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

/* The URL of a blob of this container, as an SDK gives it (name escaped). */
static void blob_url(char *out, size_t cap, struct br *b, const char *escaped_name)
{
	snprintf(out, cap, "%s/%s/%s", ecw_client_endpoint(client(b), ECW_SVC_BLOB), b->container,
	         escaped_name);
}

/* Named blobs (by name, by URL) and young ones stay; unnamed old ones go;
 * the message waits (ECW_ELATER, for the youngest's remaining grace) until
 * the young are past it; a neighbour's blobs (Sales/10/ beside Sales/1/)
 * and a blob outside every prefix are never touched. Values that name
 * nothing (absent, empty, not a string, another container's URL) protect
 * nothing. */
static void test_job_blob_ref__deletes_only_unnamed_old_blobs(void **state)
{
	struct br *b = *state;
	char url[512], other[512];
	struct ecw_entity *e = NULL;

	blob_url(url, sizeof(url), b, "Sales/1/r%C3%A9sum%C3%A9%201.pdf");
	snprintf(other, sizeof(other), "%s/other-container/Sales/1/old.jpg",
	         ecw_client_endpoint(client(b), ECW_SVC_BLOB));
	write_employee(b, "Sales", "1", "Sales/1/photo.jpg", url);
	put_blob(b, "Sales/1/photo.jpg", "p");
	put_blob(b, "Sales/1/résumé 1.pdf", "r");
	put_blob(b, "Sales/1/old.jpg", "o");
	put_blob(b, "Sales/10/x.jpg", "neighbour");
	put_blob(b, "Sales/1", "not under any prefix");
	/* Sales/2: values that name nothing. */
	ECW_ASSERT_OK(ecw_entity_new(&e, "Sales", "2"));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Photo", "", 0));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Resume", 7));
	ECW_ASSERT_OK(ecw_table_write(NULL, client(b), b->x.t->table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
	put_blob(b, "Sales/2/old.jpg", "o");
	put_blob(b, "Sales/2/7", "o");
	wait_past_grace(b, "Sales/2/7");
	put_blob(b, "Sales/1/young.jpg", "y"); /* uploaded, its entity not written yet */

	struct result r = run(b, "Sales", "1");
	ITEST_CHECK(r.err == ECW_ELATER, "run: %s (%s)", ecw_error_name(r.err), itest_last_error());
	ITEST_CHECK(r.later_s >= 1 && r.later_s <= GRACE_S + 1, "back in %d s", r.later_s);
	assert_string_equal(r.detail, "1 deleted, 1 in grace");
	assert_blobs(b,
	             (const char *const[]){"Sales/1/photo.jpg", "Sales/1/résumé 1.pdf", "Sales/1/young.jpg",
	                                   "Sales/10/x.jpg", "Sales/1", NULL},
	             (const char *const[]){"Sales/1/old.jpg", NULL}, "first run");

	wait_past_grace(b, "Sales/1/young.jpg");
	r = run(b, "Sales", "1");
	ITEST_CHECK(r.err == 0, "run: %s (%s)", ecw_error_name(r.err), itest_last_error());
	assert_string_equal(r.detail, "1 deleted");
	assert_blobs(b,
	             (const char *const[]){"Sales/1/photo.jpg", "Sales/1/résumé 1.pdf", "Sales/10/x.jpg",
	                                   "Sales/1", NULL},
	             (const char *const[]){"Sales/1/young.jpg", NULL}, "second run");

	/* Sales/2 names nothing; a Photo of another container's URL neither. */
	write_employee(b, "Sales", "3", other, NULL);
	put_blob(b, "Sales/3/old.jpg", "o");
	r = run(b, "Sales", "2");
	ITEST_CHECK(r.err == 0, "run: %s (%s)", ecw_error_name(r.err), itest_last_error());
	assert_string_equal(r.detail, "2 deleted");
	assert_blobs(b, NULL, (const char *const[]){"Sales/2/old.jpg", "Sales/2/7", NULL}, "Sales/2");
	wait_past_grace(b, "Sales/3/old.jpg");
	r = run(b, "Sales", "3");
	ITEST_CHECK(r.err == 0, "run: %s (%s)", ecw_error_name(r.err), itest_last_error());
	assert_blobs(b, NULL, (const char *const[]){"Sales/3/old.jpg", NULL}, "Sales/3");
}

/* The entity is gone: every blob under its prefix goes once past grace;
 * a run with nothing left is done at once. */
static void test_job_blob_ref__entity_gone_cleans_its_prefix(void **state)
{
	struct br *b = *state;

	put_blob(b, "HR/7/a.jpg", "a");
	put_blob(b, "HR/7/b/c.pdf", "b");
	put_blob(b, "HR/70/a.jpg", "neighbour");
	wait_past_grace(b, "HR/7/b/c.pdf");
	struct result r = run(b, "HR", "7");
	ITEST_CHECK(r.err == 0, "run: %s (%s)", ecw_error_name(r.err), itest_last_error());
	assert_string_equal(r.detail, "gone, 2 deleted");
	assert_blobs(b, (const char *const[]){"HR/70/a.jpg", NULL},
	             (const char *const[]){"HR/7/a.jpg", "HR/7/b/c.pdf", NULL}, "gone");
	r = run(b, "HR", "7");
	assert_int_equal(r.err, 0);
	assert_string_equal(r.detail, "gone, 0 deleted");
}

/* A missing table or container is a configuration problem: ECW_ENOTABLE
 * or ECW_ENOCONTAINER naming it (the runtime holds the message: blocked),
 * nothing deleted. Keys whose prefix is no blob path are a permanent error
 * naming them. */
static void test_job_blob_ref__missing_table_or_container_deletes_nothing(void **state)
{
	struct br *b = *state;
	char missing[64];

	put_blob(b, "Sales/1/old.jpg", "o");
	wait_past_grace(b, "Sales/1/old.jpg");
	ECW_ASSERT_OK(ecw_table_delete_table(client(b), b->x.t->table));
	struct result r = run(b, "Sales", "1");
	ITEST_CHECK(r.err == ECW_ENOTABLE, "run: %s (%s)", ecw_error_name(r.err), itest_last_error());
	assert_string_equal(ecw_error_last()->table, b->x.t->table);
	assert_true(exists(b, "Sales/1/old.jpg"));

	ECW_ASSERT_OK(ecw_table_create(NULL, client(b), b->x.t->table));
	itest_unique_name(missing, sizeof(missing), 'q', "nofiles");
	load(b, missing);
	r = run(b, "Sales", "1");
	ITEST_CHECK(r.err == ECW_ENOCONTAINER, "run: %s (%s)", ecw_error_name(r.err), itest_last_error());
	assert_string_equal(ecw_error_last()->table, missing);
	ECW_ASSERT_ERR(ecw_blob_container_delete(client(b), missing), ECW_ENOCONTAINER); /* never created */

	load(b, NULL);
	r = run(b, "Sales", "dot.");
	ITEST_CHECK(r.err == ECW_EINVALID, "run: %s", ecw_error_name(r.err));
	assert_true(ecw_job_err_is_permanent(r.err));
	assert_non_null(strstr(ecw_error_last()->message, "'dot.'"));
	assert_true(exists(b, "Sales/1/old.jpg"));
}

/* ---- races staged at the run's points ---------------------------------------------------------- */

struct race {
	struct br *b;
	const char *at;
	bool fired;
	void (*act)(struct race *r);
};

static void race_hook(const char *name, void *payload)
{
	struct race *r = payload;

	if (r->fired || strcmp(name, r->at) != 0)
		return;
	r->fired = true;
	r->act(r);
}

static void reupload(struct race *r)
{
	put_blob(r->b, "Sales/1/old.jpg", "uploaded again");
}

/* A blob re-uploaded after the run listed it: its ETag changed, so the
 * delete If-Match the listed one fails (412), the run lists again, and the
 * new blob, young, is kept; the run waits. An unconditional delete would
 * lose the new upload. */
static void test_job_blob_ref__reupload_after_listing_is_kept(void **state)
{
	struct br *b = *state;
	struct race race = {.b = b, .at = "blob-ref.listed", .act = reupload};
	struct ecw_buf out;

	write_employee(b, "Sales", "1", "Sales/1/photo.jpg", NULL);
	put_blob(b, "Sales/1/old.jpg", "first");
	wait_past_grace(b, "Sales/1/old.jpg");
	ecw_crash_point_hook(race_hook, &race);
	struct result r = run(b, "Sales", "1");
	ecw_crash_point_hook(NULL, NULL);
	assert_true(race.fired);
	ITEST_CHECK(r.err == ECW_ELATER, "run: %s (%s)", ecw_error_name(r.err), itest_last_error());
	assert_string_equal(r.detail, "0 deleted, 1 in grace");
	ecw_buf_init(&out, 0);
	ECW_ASSERT_OK(ecw_blob_get(&out, NULL, client(b), b->container, "Sales/1/old.jpg", 1024));
	assert_string_equal(ecw_buf_cstr(&out), "uploaded again");
	ecw_buf_dispose(&out);
}

static void upload_then_update(struct race *r)
{
	put_blob(r->b, "Sales/1/photo-v2.jpg", "v2");
	write_employee(r->b, "Sales", "1", "Sales/1/photo-v2.jpg", NULL);
}

/* The application replaces a photo as it must: uploads the new blob, then
 * writes the entity naming it. A run that read the entity before the
 * upload sees the new blob unnamed, but young: kept. Once it is past grace
 * the next run deletes the old photo, now unnamed, and keeps the new. */
static void test_job_blob_ref__upload_racing_the_entity_update(void **state)
{
	struct br *b = *state;
	struct race race = {.b = b, .at = "blob-ref.read", .act = upload_then_update};

	write_employee(b, "Sales", "1", "Sales/1/photo-v1.jpg", NULL);
	put_blob(b, "Sales/1/photo-v1.jpg", "v1");
	wait_past_grace(b, "Sales/1/photo-v1.jpg");
	ecw_crash_point_hook(race_hook, &race);
	struct result r = run(b, "Sales", "1");
	ecw_crash_point_hook(NULL, NULL);
	assert_true(race.fired);
	ITEST_CHECK(r.err == ECW_ELATER, "run: %s (%s)", ecw_error_name(r.err), itest_last_error());
	assert_blobs(b, (const char *const[]){"Sales/1/photo-v1.jpg", "Sales/1/photo-v2.jpg", NULL}, NULL,
	             "racing run");
	wait_past_grace(b, "Sales/1/photo-v2.jpg");
	r = run(b, "Sales", "1");
	ITEST_CHECK(r.err == 0, "run: %s (%s)", ecw_error_name(r.err), itest_last_error());
	assert_blobs(b, (const char *const[]){"Sales/1/photo-v2.jpg", NULL},
	             (const char *const[]){"Sales/1/photo-v1.jpg", NULL}, "after grace");
}

struct twin {
	struct br *b;
	struct result r;
	char error[600];
};

static void *twin_main(void *arg)
{
	struct twin *w = arg;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;

	itest_client_for(&acct, &c, itest_connstr(), NULL);
	w->r = run_with(w->b, c, "Sales", "1");
	if (w->r.err)
		snprintf(w->error, sizeof(w->error), "%s", ecw_error_last()->message);
	ecw_client_free(c);
	ecw_account_free(acct);
	return NULL;
}

/* Two workers on one entity at once, each with its own connection: both
 * succeed (one's delete of a blob the other deleted is 404: done), every
 * unnamed old blob is gone and both named ones stay. */
#define TWIN_BLOBS 24

static void test_job_blob_ref__two_runs_on_one_entity(void **state)
{
	struct br *b = *state;
	struct twin w[2] = {{.b = b}, {.b = b}};
	pthread_t th[2];
	char name[64];

	write_employee(b, "Sales", "1", "Sales/1/a.jpg", "Sales/1/b.pdf");
	put_blob(b, "Sales/1/a.jpg", "a");
	put_blob(b, "Sales/1/b.pdf", "b");
	for (int i = 0; i < TWIN_BLOBS; i++) {
		snprintf(name, sizeof(name), "Sales/1/old-%02d", i);
		put_blob(b, name, "o");
	}
	wait_past_grace(b, name);
	load(b, NULL);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, twin_main, &w[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++)
		ITEST_CHECK(w[i].r.err == 0, "run %d: %s (%s)", i, ecw_error_name(w[i].r.err), w[i].error);
	for (int i = 0; i < TWIN_BLOBS; i++) {
		snprintf(name, sizeof(name), "Sales/1/old-%02d", i);
		ITEST_CHECK(!exists(b, name), "%s is still there", name);
	}
	assert_blobs(b, (const char *const[]){"Sales/1/a.jpg", "Sales/1/b.pdf", NULL}, NULL, "two runs");
}

/* ---- as a process -------------------------------------------------------------------------------- */

static void put_message(struct br *b, const char *pk, const char *rk)
{
	char text[256];

	snprintf(text, sizeof(text), "{\"job\":\"files\",\"pk\":\"%s\",\"rk\":\"%s\"}", pk, rk);
	ECW_ASSERT_OK(ecw_queue_put(NULL, client(b), b->x.t->queue, text, strlen(text), NULL));
}

static void write_worker(struct br *b, const char *name, int max_dequeue, const char *container)
{
	char jobs[1024];
	struct wfx_worker w = WFX_WORKER(b->x.t->queue, b->x.poison);

	w.concurrency = 1;
	w.visibility_s = 2;
	w.max_dequeue = max_dequeue;
	w.jobs = job_text(jobs, sizeof(jobs), b, container);
	wfx_write_config(b->x.config, sizeof(b->x.config), name, &w);
}

/* A message waiting for grace is the job's design, not a failure: on a
 * worker allowed one delivery it is requeued (a fresh copy, hidden for the
 * grace left), never poisoned, and its copy completes once the blob is
 * past grace. Were the wait a transient failure, its first delivery would
 * be its last and it would be poisoned. */
static void test_job_blob_ref__waiting_for_grace_is_never_poisoned(void **state)
{
	struct br *b = *state;
	const char *args[] = {"run", "-c", b->x.config, NULL};
	struct proc p;

	write_employee(b, "Sales", "1", "Sales/1/photo.jpg", NULL);
	put_blob(b, "Sales/1/photo.jpg", "p");
	put_blob(b, "Sales/1/young.jpg", "y");
	put_message(b, "Sales", "1");
	write_worker(b, "blobref-wait", 1, NULL);
	proc_start(&p, "blobref-wait", args, NULL);
	PROC_EXPECT_LOG(&p, 1, 20000, "message", "outcome", "succeeded");
	assert_int_equal(proc_count(&p, "message", "outcome", "poisoned", NULL), 0);
	ITEST_CHECK(proc_count(&p, "message", "outcome", "requeued", NULL) >= 1, "never requeued:\n%s",
	            proc_tail(p.log_path, 20));
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *l = proc_log_find(&log, 0, "message", "outcome", "requeued", NULL);
	long long hidden = proc_field_int(l, "hidden_s", -1);
	ITEST_CHECK(hidden >= 1 && hidden <= GRACE_S + 1, "hidden %lld s", hidden);
	proc_log_dispose(&log);
	proc_stop(&p, 10000);
	assert_blobs(b, (const char *const[]){"Sales/1/photo.jpg", NULL},
	             (const char *const[]){"Sales/1/young.jpg", NULL}, "after the wait");
	wfx_assert_queues_empty(&b->x);
}

/* The application's container missing: check-config --online names it;
 * the message is held (blocked, the job_blocked line naming the container),
 * never poisoned, never deleting; once the container exists it completes. */
static void test_job_blob_ref__missing_container_blocks_until_created(void **state)
{
	struct br *b = *state;
	const char *args[] = {"run", "-c", b->x.config, NULL};
	char late[64];
	struct proc p;

	itest_unique_name(late, sizeof(late), 'q', "late");
	put_message(b, "Sales", "1");
	write_worker(b, "blobref-blocked", 2, late);
	/* check-config --online names it. */
	const char *online[] = {"check-config", "--online", "-c", b->x.config, NULL};
	char *out = NULL, *err = NULL, line[256];
	int rc = proc_run(&out, &err, "blobref-online", online, NULL, 30000);
	ITEST_CHECK(rc == 1, "check-config --online exited %d:\n%s\n%s", rc, out, err);
	snprintf(line, sizeof(line), "job 'files' works in blob container '%s', which does not exist", late);
	ITEST_CHECK(strstr(out, line), "no line \"%s\" in:\n%s", line, out);
	free(out);
	free(err);
	proc_start(&p, "blobref-blocked", args, NULL);
	PROC_EXPECT_LOG(&p, 1, 20000, "job_blocked", "job", "files", "table", late);
	PROC_EXPECT_LOG(&p, 1, 20000, "message", "outcome", "blocked");
	ECW_ASSERT_OK(ecw_blob_container_create(NULL, client(b), late));
	PROC_EXPECT_LOG(&p, 1, 30000, "message", "outcome", "succeeded");
	assert_int_equal(proc_count(&p, "message", "outcome", "poisoned", NULL), 0);
	PROC_EXPECT_LOG(&p, 1, 5000, "job_unblocked", "job", "files");
	proc_stop(&p, 10000);
	ECW_ASSERT_OK(ecw_blob_container_delete(client(b), late));
	wfx_assert_queues_empty(&b->x);
}

/* A worker killed right after the read, the listing, and each delete (three
 * unnamed old blobs: one crash per delete); each fresh worker goes on from
 * what is there, and the last converges to what a run without a crash
 * leaves: the named blob alone. */
static void test_job_blob_ref__crash_after_each_step_converges(void **state)
{
	static const char *const points[] = {"blob-ref.read", "blob-ref.listed", "blob-ref.deleted",
	                                     "blob-ref.deleted", "blob-ref.deleted"};
	static const int left[] = {4, 4, 3, 2, 1};
	struct br *b = *state;
	char name[64];
	struct proc p;

	write_employee(b, "Sales", "1", "Sales/1/photo.jpg", NULL);
	put_blob(b, "Sales/1/photo.jpg", "p");
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "Sales/1/old-%d.jpg", i);
		put_blob(b, name, "o");
	}
	wait_past_grace(b, name);
	put_message(b, "Sales", "1");
	write_worker(b, "blobref-crash", 10, NULL);
	for (size_t k = 0; k < sizeof(points) / sizeof(points[0]); k++) {
		char run_name[64];
		int n = 0;
		snprintf(run_name, sizeof(run_name), "blobref-crash-%zu", k);
		wfx_run_until_crash(&b->x, run_name, points[k]);
		assert_true(exists(b, "Sales/1/photo.jpg"));
		for (int i = 0; i < 3; i++) {
			snprintf(name, sizeof(name), "Sales/1/old-%d.jpg", i);
			n += exists(b, name);
		}
		ITEST_CHECK(n + 1 == left[k], "after a crash at %s: %d blobs, expected %d", points[k], n + 1,
		            left[k]);
	}
	const char *args[] = {"run", "-c", b->x.config, NULL};
	proc_start(&p, "blobref-crash-final", args, NULL);
	PROC_EXPECT_LOG(&p, 1, 20000, "message", "outcome", "succeeded");
	proc_stop(&p, 10000);
	assert_blobs(b, (const char *const[]){"Sales/1/photo.jpg", NULL}, NULL, "converged");
	wfx_assert_queues_empty(&b->x);
}

/* ---- the audit ------------------------------------------------------------------------------------ */

/* Orphans, found by listing the container and inverting the prefix: an
 * unnamed blob past grace (Sales/1/old.jpg) and the blobs of a missing
 * entity (HR/9/...); a young unnamed blob (uploaded again right before each
 * audit, with a grace of 5 s), named blobs, and a blob under no prefix are
 * none. A dangling reference (Sales/1's Resume names a blob that
 * does not exist) is missing. --repair deletes the orphans (If-Match) and
 * never "repairs" the dangling reference: exit 3 still. */
static void test_job_blob_ref__audit_finds_and_repairs(void **state)
{
	struct br *b = *state;
	char *out = NULL;

	b->grace_s = 5;
	write_employee(b, "Sales", "1", "Sales/1/photo.jpg", "Sales/1/gone.pdf");
	write_employee(b, "Sales", "2", "Sales/2/photo.jpg", NULL);
	put_blob(b, "Sales/1/photo.jpg", "p");
	put_blob(b, "Sales/2/photo.jpg", "p");
	put_blob(b, "Sales/1/old.jpg", "o");
	put_blob(b, "HR/9/a.jpg", "a");
	put_blob(b, "HR/9/b/c.jpg", "c");
	put_blob(b, "readme.txt", "not under a prefix");
	wait_past_grace(b, "HR/9/b/c.jpg");
	write_worker(b, "blobref-audit", 5, NULL);

	const char *args[] = {"--json", NULL};
	put_blob(b, "Sales/2/young.jpg", "y");
	assert_int_equal(auditfx_run(&out, b->x.config, "blobref-audit-json", args), 3);
	auditfx_counts_are(out, "files", 1, 0, 3, 0, 0);
	free(out);
	assert_blobs(b, (const char *const[]){"Sales/1/old.jpg", "HR/9/a.jpg", NULL}, NULL,
	             "read-only audit");

	const char *repair[] = {"--repair", "--json", NULL};
	put_blob(b, "Sales/2/young.jpg", "y");
	assert_int_equal(auditfx_run(&out, b->x.config, "blobref-audit-repair", repair), 3);
	auditfx_counts_are(out, "files", 1, 0, 3, 0, 3);
	free(out);
	assert_blobs(b,
	             (const char *const[]){"Sales/1/photo.jpg", "Sales/2/photo.jpg", "Sales/2/young.jpg",
	                                   "readme.txt", NULL},
	             (const char *const[]){"Sales/1/old.jpg", "HR/9/a.jpg", "HR/9/b/c.jpg", NULL},
	             "repaired");

	put_blob(b, "Sales/2/young.jpg", "y");
	assert_int_equal(auditfx_run(&out, b->x.config, "blobref-audit-again", args), 3);
	auditfx_counts_are(out, "files", 1, 0, 0, 0, 0);
	free(out);
}

/* --repair --via-queue: the audit deletes nothing itself; each entity with
 * orphans gets the job's message once (Sales/1 has two, HR/9 is gone), and
 * a worker then deletes the orphans past grace and leaves the named blob;
 * the next audit finds none. */
static void test_job_blob_ref__audit_via_queue_repairs_through_the_worker(void **state)
{
	struct br *b = *state;
	const char *repair[] = {"--repair", "--via-queue", "--json", NULL}, *args[] = {"--json", NULL};
	const char *run_args[] = {"run", "-c", b->x.config, NULL};
	struct proc p;
	const char *orphans[] = {"Sales/1/old.jpg", "Sales/1/older.jpg", "HR/9/a.jpg", NULL};
	char *out = NULL;
	long long n = -1;

	write_employee(b, "Sales", "1", "Sales/1/photo.jpg", NULL);
	put_blob(b, "Sales/1/photo.jpg", "p");
	for (int i = 0; orphans[i]; i++)
		put_blob(b, orphans[i], "o");
	wait_past_grace(b, "HR/9/a.jpg");
	write_worker(b, "blobref-via-queue", 5, NULL);
	assert_int_equal(auditfx_run(&out, b->x.config, "blobref-audit-via-queue", repair), 0);
	auditfx_counts_are(out, "files", 0, 0, 3, 0, 3);
	ITEST_CHECK(strstr(out, "\"via_queue\":true"), "no via_queue in %s", out);
	free(out);
	assert_blobs(b, orphans, NULL, "queued, before any worker ran");
	ECW_ASSERT_OK(ecw_queue_count(&n, client(b), b->x.t->queue));
	assert_int_equal(n, 2); /* one message per entity, not per orphan */

	proc_start(&p, "blobref-via-queue-worker", run_args, NULL);
	PROC_EXPECT_LOG(&p, 2, 20000, "message", "job", "files", "outcome", "succeeded");
	proc_stop(&p, 10000);
	assert_blobs(b, (const char *const[]){"Sales/1/photo.jpg", NULL}, orphans, "after the worker");
	wfx_assert_queues_empty(&b->x);
	assert_int_equal(auditfx_run(&out, b->x.config, "blobref-audit-via-queue-again", args), 0);
	auditfx_counts_are(out, "files", 0, 0, 0, 0, 0);
	free(out);
}

/* A scheduled audit with repair: true (on a simulated clock inside one
 * hourly window; the grace is judged on the service's clock all the same):
 * the orphan is deleted and ecw_audit_drift shows 0 orphans, while the
 * dangling reference, never repaired, stays 1. */
static void test_job_blob_ref__scheduled_audit_repairs_orphans(void **state)
{
	struct br *b = *state;
	struct wfx_worker w = WFX_WORKER(b->x.t->queue, b->x.poison);
	char path[640], jobs[2048], one[1024], extra[256], clock[128];
	const char *args[] = {"run", "-c", path, NULL};
	const char *env[] = {clock, NULL};
	struct timespec ts;
	struct proc p;

	write_employee(b, "Sales", "1", "Sales/1/photo.jpg", "Sales/1/gone.pdf");
	put_blob(b, "Sales/1/photo.jpg", "p");
	put_blob(b, "HR/9/a.jpg", "orphan");
	wait_past_grace(b, "HR/9/a.jpg");
	clock_gettime(CLOCK_REALTIME, &ts);
	/* 2020-10-11 10:20 UTC at the start, real speed */
	snprintf(clock, sizeof(clock), "ECW_TEST_CLOCK=%lld:%lld:1",
	         (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, 1602411600LL * 1000);
	snprintf(jobs, sizeof(jobs),
	         "%sschedules:\n  - {audit: files, every: 1h, catch_up: 1, repair: true}\n",
	         job_text(one, sizeof(one), b, NULL));
	snprintf(extra, sizeof(extra), "  schedule_table: %s\n", itest_extra_table(b->x.t, "brsched"));
	w.jobs = jobs;
	w.worker_extra = extra;
	w.metrics_port = proc_free_port();
	wfx_write_config(path, sizeof(path), "blobref-sched", &w);
	proc_start(&p, "blobref-sched", args, env);

	int64_t end = itest_now_ms() + 30000;
	double orphan = -1, missing = -1;
	for (;;) {
		char *page = NULL;
		int f1 = 0, f2 = 0;
		if (proc_http_get(&page, w.metrics_port, "/metrics") == 200) {
			orphan = proc_metric(page, "ecw_audit_drift", &f1, "job=\"files\"", "kind=\"orphan\"",
			                     NULL);
			missing = proc_metric(page, "ecw_audit_drift", &f2, "job=\"files\"",
			                      "kind=\"missing\"", NULL);
		}
		free(page);
		if (f1 == 1 && f2 == 1)
			break;
		ITEST_CHECK(itest_now_ms() < end, "no ecw_audit_drift for files; log:\n%s",
		            proc_tail(p.log_path, 20));
		itest_sleep_ms(200);
	}
	proc_stop(&p, 10000);
	ITEST_CHECK(orphan == 0 && missing == 1, "drift: orphan %g, missing %g", orphan, missing);
	assert_blobs(b, (const char *const[]){"Sales/1/photo.jpg", NULL},
	             (const char *const[]){"HR/9/a.jpg", NULL}, "scheduled audit");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__deletes_only_unnamed_old_blobs, br_setup,
	                                    br_teardown),
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__entity_gone_cleans_its_prefix, br_setup,
	                                    br_teardown),
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__missing_table_or_container_deletes_nothing,
	                                    br_setup, br_teardown),
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__reupload_after_listing_is_kept, br_setup,
	                                    br_teardown),
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__upload_racing_the_entity_update, br_setup,
	                                    br_teardown),
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__two_runs_on_one_entity, br_setup, br_teardown),
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__waiting_for_grace_is_never_poisoned, br_setup,
	                                    br_teardown),
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__missing_container_blocks_until_created,
	                                    br_setup, br_teardown),
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__crash_after_each_step_converges, br_setup,
	                                    br_teardown),
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__audit_finds_and_repairs, br_setup,
	                                    br_teardown),
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__audit_via_queue_repairs_through_the_worker,
	                                    br_setup, br_teardown),
	    cmocka_unit_test_setup_teardown(test_job_blob_ref__scheduled_audit_repairs_orphans, br_setup,
	                                    br_teardown),
	};
	return cmocka_run_group_tests_name("job_blob_ref", tests, NULL, NULL);
}
