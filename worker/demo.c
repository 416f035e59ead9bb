/* demo.c - `ecworker demo`: a tour of the storage client against whatever
 * AZURE_STORAGE_CONNECTION_STRING names (a local Azurite under `make demo`).
 * It plays one archive job by hand: an application queues a message naming an
 * employee, the worker receives it (hidden, not deleted), copies the entity to
 * the archive table, deletes the original with If-Match, and only then
 * deletes the message. Until the runtime lands this is what `make demo` runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ecw_storage.h"

#define STEP(...) do { printf("  " __VA_ARGS__); putchar('\n'); } while (0)

static int fail(const char *what)
{
	const struct ecw_error *e = ecw_error_last();

	fprintf(stderr, "ecworker demo: %s: %s (%s)\n", what, e->message, ecw_err_name(e->code));
	return 1;
}

int ecw_cmd_demo(int argc, char **argv)
{
	const char *cs = getenv("AZURE_STORAGE_CONNECTION_STRING");
	const char *queue = "ecw-demo-jobs", *from = "DemoEmployees", *to = "DemoEmployeesArchive";
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	struct ecw_entity *e = NULL, *got = NULL, *copy = NULL;
	struct ecw_queue_msg *msgs = NULL;
	size_t n = 0;
	long long depth = 0;
	char *etag = NULL;
	int rc = 1;

	(void)argc;
	(void)argv;
	if (!cs || !*cs)
		cs = "UseDevelopmentStorage=true";
	if (ecw_account_parse(&acct, cs) < 0)
		return fail("connection string");
	if (ecw_client_new(&c, acct, NULL) < 0) {
		rc = fail("client");
		goto done;
	}
	printf("ecworker demo against %s and %s\n", ecw_account_endpoint(acct, ECW_SVC_QUEUE),
	       ecw_account_endpoint(acct, ECW_SVC_TABLE));

	if (ecw_queue_create(NULL, c, queue) < 0 || ecw_table_create(NULL, c, from) < 0 ||
	    ecw_table_create(NULL, c, to) < 0 || ecw_queue_clear(c, queue) < 0) {
		rc = fail("creating the queue and tables");
		goto done;
	}
	STEP("created queue %s and tables %s, %s (idempotent); cleared the queue", queue, from, to);

	if (ecw_entity_new(&e, "Sales", "o'brien 001") < 0 ||
	    ecw_entity_set_string(e, "Email", "obrien@example.com", 18) < 0 ||
	    ecw_entity_set_int64(e, "EmployeeId", 9007199254740993LL) < 0 ||
	    ecw_entity_set_double(e, "Salary", 50000.0) < 0 ||
	    ecw_entity_set_datetime(e, "HireDate", "2019-03-01T09:00:00.1234567Z") < 0 ||
	    ecw_table_write(NULL, c, from, e, ECW_WRITE_INSERT_OR_REPLACE, NULL) < 0) {
		rc = fail("writing the employee");
		goto done;
	}
	STEP("upserted %s(Sales, o'brien 001) with Int64, Double and DateTime properties", from);

	static const char msg[] = "{\"job\":\"archive-employee\",\"pk\":\"Sales\",\"rk\":\"o'brien 001\"}";
	if (ecw_queue_put(NULL, c, queue, msg, strlen(msg), &(struct ecw_queue_put_options){0, -1}) < 0) {
		rc = fail("queueing the job");
		goto done;
	}
	STEP("queued %s", msg);

	if (ecw_queue_receive(&msgs, &n, c, queue, 1, 30) < 0) {
		rc = fail("receiving");
		goto done;
	}
	if (n != 1) {
		fprintf(stderr, "ecworker demo: expected 1 message, received %zu\n", n);
		goto done;
	}
	STEP("received message %s (dequeue count %ld), hidden for 30 s", msgs[0].id, msgs[0].dequeue_count);

	if (ecw_table_get(&got, c, from, "Sales", "o'brien 001") < 0 ||
	    ecw_table_write(NULL, c, to, got, ECW_WRITE_INSERT_OR_REPLACE, NULL) < 0) {
		rc = fail("copying to the archive");
		goto done;
	}
	STEP("copied the entity to %s (ETag read: %s)", to, ecw_entity_etag(got));
	if (ecw_table_delete(c, from, "Sales", "o'brien 001", ecw_entity_etag(got)) < 0) {
		rc = fail("deleting the original with If-Match");
		goto done;
	}
	STEP("deleted the original with If-Match");
	if (ecw_table_get(&copy, c, to, "Sales", "o'brien 001") < 0) {
		rc = fail("reading the archive copy");
		goto done;
	}
	if (!ecw_entity_equal(copy, got)) {
		fprintf(stderr, "ecworker demo: the archive copy differs from the original\n");
		goto done;
	}
	STEP("archive copy is identical, property by property and type by type");

	if (ecw_queue_delete(c, queue, msgs[0].id, msgs[0].pop_receipt) < 0 ||
	    ecw_queue_count(&depth, c, queue) < 0) {
		rc = fail("deleting the message");
		goto done;
	}
	STEP("deleted the message after every step succeeded; queue depth now %lld", depth);
	printf("demo finished: storage client OK\n");
	rc = 0;
done:
	free(etag);
	ecw_queue_msgs_free(msgs, n);
	ecw_entity_free(e);
	ecw_entity_free(got);
	ecw_entity_free(copy);
	ecw_client_free(c);
	ecw_account_free(acct);
	return rc;
}
