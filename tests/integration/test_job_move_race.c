/* SPDX-License-Identifier: MIT */
/* test_job_move_race.c - two runs of one move overlap (a duplicate message
 * on another worker): run 1 reads v1; before its copy write, the application
 * changes the employee and run 2 moves it completely. Run 1 must not put its
 * stale v1 copy over the newer state, in either direction. Found by the
 * four-worker test's author; with an unconditional copy both cases lost the
 * application's update while reporting success. The job runs in this process
 * on a client whose transport (a test seam) stages the interleaving. */
#include <curl/curl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ecw_config.h"
#include "ecw_job.h"
#include "itest.h"

static struct ecw_client *app;
static const struct ecw_job_def *def;
static char emp[64], arch[64];
static int upserts;
static CURL *curl;
static int restore_mode; /* restore-employee: archive -> Employees */

static size_t on_body(char *p, size_t size, size_t n, void *payload)
{
	struct ecw_response *resp = payload;
	return ecw_buf_add(&resp->body, p, size * n) == 0 ? size * n : 0;
}
static size_t on_header(char *p, size_t size, size_t n, void *payload)
{
	struct ecw_response *resp = payload;
	const char *colon = memchr(p, ':', size * n);
	if (colon && colon != p &&
	    ecw_response_add_header(resp, p, (size_t)(colon - p), colon + 1,
	                            (size_t)(p + size * n - colon - 1)) < 0)
		return 0;
	return size * n;
}
static int forward(struct ecw_response *resp, const char *url, const struct ecw_request *r)
{
	struct curl_slist *hl = NULL;
	char line[4096];
	long status = 0;
	curl_easy_reset(curl);
	for (size_t i = 0; i < r->nheaders; i++) {
		snprintf(line, sizeof(line), "%s: %s", r->headers[i].name, r->headers[i].value);
		hl = curl_slist_append(hl, line);
	}
	snprintf(line, sizeof(line), "Content-Type:%s%s", r->content_type ? " " : "",
	         r->content_type ? r->content_type : "");
	hl = curl_slist_append(hl, line);
	hl = curl_slist_append(hl, "Expect:");
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, resp);
	if (strcmp(r->method, "GET") == 0) {
		curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, r->method);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, r->body ? r->body : "");
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
	}
	CURLcode rc = curl_easy_perform(curl);
	curl_slist_free_all(hl);
	if (rc != CURLE_OK)
		return ecw_error_set(ECW_ETRANSIENT, "transport: %s", curl_easy_strerror(rc));
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	resp->status = status;
	return 0;
}

static int run_move(struct ecw_client *c, const char *id)
{
	atomic_bool lost = false;
	struct ecw_job_ctx ctx = {.client = c,
	                          .job = def->name,
	                          .pk = "Sales",
	                          .rk = "e1",
	                          .trace_id = id,
	                          .message_id = id,
	                          .dequeue_count = 1,
	                          .lease_lost = &lost};
	ecw_error_clear();
	int err = def->type->run(def->settings, &ctx);
	print_message("  run %s: %s %s %s\n", id, err ? ecw_error_name(err) : "ok", ctx.outcome_detail,
	              err ? ecw_error_last()->message : "");
	return err;
}

static void put_in(const char *table, const char *last, enum ecw_write_mode mode)
{
	struct ecw_entity *e = NULL;
	if (ecw_entity_new(&e, "Sales", "e1") || ecw_entity_set_string(e, "LastName", last, strlen(last)) ||
	    ecw_table_write(NULL, app, table, e, mode, mode == ECW_WRITE_MERGE ? "*" : NULL))
		fail_msg("put failed: %s", ecw_error_last()->message);
	ecw_entity_free(e);
}

/* Before run 1's first copy write: the app changes the employee, and run 2
 * (a duplicate message on another worker) moves it completely. */
static int hook_send(void *ctx, struct ecw_response *resp, const char *url, const struct ecw_request *r)
{
	(void)ctx;
	/* Run 1's first write to a table, whatever the job calls it. */
	if (r->svc == ECW_SVC_TABLE && strcmp(r->method, "GET") != 0 && strcmp(r->method, "DELETE") != 0 &&
	    ++upserts == 1) {
		struct ecw_account *a2 = NULL;
		if (!restore_mode) {
			print_message("  [app updates LastName to v2 in Employees; run 2 archives it]\n");
			put_in(emp, "v2", ECW_WRITE_MERGE);
		} else {
			print_message(
			    "  [run 2 restores it; then the app updates LastName to v2 in Employees]\n");
		}
		struct ecw_client *c2 = NULL;
		if (ecw_account_parse(&a2, getenv("ECW_TEST_CONNECTION_STRING")) ||
		    ecw_client_new(&c2, a2, NULL))
			fail_msg("client: %s", ecw_error_last()->message);
		assert_int_equal(run_move(c2, "run2"), 0);
		if (restore_mode)
			put_in(emp, "v2", ECW_WRITE_MERGE);
		ecw_client_free(c2);
		ecw_account_free(a2);
	}
	return forward(resp, url, r);
}

static void scenario(bool restore)
{
	const char *cs = itest_connstr();
	struct ecw_account *acct = NULL, *acct2 = NULL;
	struct ecw_client *c = NULL;
	struct ecw_config *cfg = NULL;
	struct ecw_node_errors errs;
	struct ecw_entity *e = NULL, *f = NULL;
	char text[1024];
	int err;

	restore_mode = restore;
	upserts = 0;
	itest_unique_name(emp, sizeof(emp), 't', "raceemp");
	itest_unique_name(arch, sizeof(arch), 't', "racearch");
	itest_client_for(&acct, &app, cs, NULL);
	itest_client_for(&acct2, &c, cs, NULL);
	snprintf(text, sizeof(text),
	         "storage: {connection_string: \"${ECW_TEST_CONNECTION_STRING}\"}\njobs:\n"
	         "  archive-employee: {type: move, from: %s, to: %s}\n"
	         "  restore-employee: {type: move, from: %s, to: %s}\n",
	         emp, arch, arch, emp);
	ecw_node_errors_init(&errs);
	if (ecw_config_parse(&cfg, text, strlen(text), "race.yaml", &errs) < 0)
		fail_msg("config: %s", errs.n ? errs.lines[0] : "?");
	def = ecw_config_job(cfg, restore ? "restore-employee" : "archive-employee");
	ECW_ASSERT_OK(ecw_table_create(NULL, app, emp));
	ECW_ASSERT_OK(ecw_table_create(NULL, app, arch));
	put_in(restore ? arch : emp, "v1", ECW_WRITE_INSERT_OR_REPLACE);
	curl = curl_easy_init();
	ecw_client_set_transport(c, hook_send, NULL);
	err = run_move(c, "run1");
	assert_int_equal(upserts >= 1, 1); /* the interleaving really happened */

	bool in_emp = ecw_table_get(&e, app, emp, "Sales", "e1") == 0;
	bool in_arch = ecw_table_get(&f, app, arch, "Sales", "e1") == 0;
	const struct ecw_entity *where = restore ? (in_emp ? e : NULL) : (in_arch ? f : NULL);
	const struct ecw_prop *p = where ? ecw_entity_get(where, "LastName") : NULL;
	ITEST_CHECK(err == 0, "run 1 failed: %s", ecw_error_last()->message);
	ITEST_CHECK(in_emp != in_arch, "the employee is in %s table", in_emp ? "both" : "neither");
	ITEST_CHECK(p && strcmp(p->v.s, "v2") == 0,
	            "lost update: %s holds LastName %s, the application wrote v2",
	            restore ? "Employees" : "the archive", p ? p->v.s : "(absent)");
	ecw_entity_free(f);
	ecw_entity_free(e);
	(void)!ecw_table_delete_table(app, emp);
	(void)!ecw_table_delete_table(app, arch);
	curl_easy_cleanup(curl);
	ecw_client_free(c);
	ecw_client_free(app);
	ecw_account_free(acct);
	ecw_account_free(acct2);
	ecw_config_free(cfg);
	ecw_node_errors_dispose(&errs);
}

static void test_job_move_race__archive_never_loses_an_update(void **state)
{
	(void)state;
	scenario(false);
}

static void test_job_move_race__restore_never_loses_an_update(void **state)
{
	(void)state;
	scenario(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_job_move_race__archive_never_loses_an_update),
	    cmocka_unit_test(test_job_move_race__restore_never_loses_an_update),
	};
	return cmocka_run_group_tests_name("job_move_race", tests, NULL, NULL);
}
