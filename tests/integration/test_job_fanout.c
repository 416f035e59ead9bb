/* SPDX-License-Identifier: MIT */
/* test_job_fanout.c - the fanout job type against a real Azurite: customers
 * (the source table) whose Name, Email, Limit (Double), Since (DateTime) and
 * RowKey are copied into their orders (the target table), either all orders
 * in the partition named by the customer's RowKey or all orders whose
 * CustomerId names it (scattered over partitions). Most cases run the worker
 * binary (build/ecworker-test) as a process and judge it by what it leaves in
 * storage, compared with a full recomputation from the source table, and by
 * the write requests its metrics count; crash cases stop it dead after each
 * step (ECW_CRASH_AT) and check a fresh worker converges. Cases that need
 * something to happen between the job's query and its write (a target
 * deleted or changed, the source changed, the lease lost) run the job in
 * this process, on a client whose transport forwards every request to
 * Azurite with libcurl and lets the test act just before a given $batch. */
#include "itest.h"
#include "proc.h"
#include "workerfx.h"

#include <curl/curl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_config.h"
#include "ecw_job.h"

/* ---- fixture -------------------------------------------------------------------------------- */

/* t->table = Customers, t->table2 = Orders. */
static int fx_setup(void **state)
{
	*state = wfx_new(sizeof(struct wfx), WFX_QUEUE | WFX_TABLE | WFX_TABLE2);
	return 0;
}

static int fx_teardown(void **state)
{
	return wfx_teardown(state);
}

#define CUSTOMERS(x) ((x)->t->table)
#define ORDERS(x) ((x)->t->table2)
#define CPK "C" /* every customer's PartitionKey */

/* The copies every job here makes, target: source. */
static const char *const copy_target[] = {"CustomerName", "CustomerEmail", "CustomerLimit", "CustomerSince",
                                          "CustomerRef"};
static const char *const copy_source[] = {"Name", "Email", "Limit", "Since", "RowKey"};
#define NCOPIES 5
#define FIELDS                                                                                               \
	"{CustomerName: Name, CustomerEmail: Email, CustomerLimit: Limit, CustomerSince: Since, "            \
	"CustomerRef: RowKey}"

/* Three jobs on the same two tables:
 *   by-pk        the orders in the partition named by the customer's RowKey
 *   by-pk-clear  the same with on_delete: clear
 *   by-id        the orders whose CustomerId is the customer's RowKey, on_delete: clear */
static void jobs_text(char *out, size_t cap, struct wfx *x)
{
	int k = snprintf(out, cap,
	                 "  by-pk:\n"
	                 "    type: fanout\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    filter: \"PartitionKey eq '{RowKey}'\"\n"
	                 "    fields: " FIELDS "\n"
	                 "    on_delete: keep\n"
	                 "  by-pk-clear:\n"
	                 "    type: fanout\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    filter: \"PartitionKey eq '{RowKey}'\"\n"
	                 "    fields: " FIELDS "\n"
	                 "    on_delete: clear\n"
	                 "  by-id:\n"
	                 "    type: fanout\n"
	                 "    source: %s\n"
	                 "    table: %s\n"
	                 "    filter: \"CustomerId eq '{RowKey}'\"\n"
	                 "    fields: " FIELDS "\n"
	                 "    on_delete: clear\n",
	                 CUSTOMERS(x), ORDERS(x), CUSTOMERS(x), ORDERS(x), CUSTOMERS(x), ORDERS(x));
	assert_true(k > 0 && (size_t)k < cap);
}

/* Writes the worker's config (visibility_timeout vis_s) and returns the
 * metrics port. */
static int write_config(struct wfx *x, const char *name, int vis_s, int concurrency)
{
	char jobs[4096];

	jobs_text(jobs, sizeof(jobs), x);
	return wfx_job_config(x, name, vis_s, concurrency, jobs);
}

/* ---- data ----------------------------------------------------------------------------------- */

/* A customer; email NULL: without Email. */
static void put_customer(struct wfx *x, const char *rk, const char *name, const char *email, double limit)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, CPK, rk));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Name", name, strlen(name)));
	if (email)
		ECW_ASSERT_OK(ecw_entity_set_string(e, "Email", email, strlen(email)));
	ECW_ASSERT_OK(ecw_entity_set_double(e, "Limit", limit));
	ECW_ASSERT_OK(ecw_entity_set_datetime(e, "Since", "2024-02-29T23:59:59.1234567Z"));
	ECW_ASSERT_OK(ecw_entity_set_int32(e, "Visits", 7)); /* not copied */
	ECW_ASSERT_OK(
	    ecw_table_write(NULL, x->t->client, CUSTOMERS(x), e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
	ecw_entity_free(e);
}

static void delete_customer(struct wfx *x, const char *rk)
{
	ECW_ASSERT_OK(ecw_table_delete_if_exists(NULL, x->t->client, CUSTOMERS(x), CPK, rk));
}

/* The properties an order has besides the copies. */
static void order_base(struct ecw_entity **out, const char *pk, int n, const char *customer)
{
	char rk[16], note[32];

	snprintf(rk, sizeof(rk), "o%05d", n);
	snprintf(note, sizeof(note), "note %d", n);
	ECW_ASSERT_OK(ecw_entity_new(out, pk, rk));
	ECW_ASSERT_OK(ecw_entity_set_int32(*out, "Amount", n));
	ECW_ASSERT_OK(ecw_entity_set_string(*out, "Note", note, strlen(note)));
	ECW_ASSERT_OK(ecw_entity_set_string(*out, "CustomerId", customer, strlen(customer)));
	ECW_ASSERT_OK(ecw_entity_set_string(*out, "Status", "new", 3));
}

/* count orders o<first>.. in partition pk, for customer. */
static void put_orders(struct wfx *x, const char *pk, const char *customer, int first, int count)
{
	for (int i = 0; i < count;) {
		struct ecw_batch *b = NULL;
		ECW_ASSERT_OK(ecw_batch_new(&b, ORDERS(x)));
		for (; i < count && ecw_batch_count(b) < ECW_BATCH_MAX_OPS; i++) {
			struct ecw_entity *e = NULL;
			order_base(&e, pk, first + i, customer);
			ECW_ASSERT_OK(ecw_batch_add(b, ECW_BATCH_INSERT_OR_REPLACE, e, NULL));
			ecw_entity_free(e);
		}
		ECW_ASSERT_OK(ecw_batch_submit(x->t->client, b));
		ecw_batch_free(b);
	}
}

static void put_message(struct wfx *x, const char *job, const char *customer)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "job", json_object_new_string(job));
	json_object_object_add(o, "pk", json_object_new_string(CPK));
	json_object_object_add(o, "rk", json_object_new_string(customer));
	const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	ECW_ASSERT_OK(ecw_queue_put(NULL, x->t->client, x->t->queue, text, strlen(text), NULL));
	json_object_put(o);
}

/* Every entity of a table matching filter (NULL: all); the caller frees. */
static struct ecw_entity **query_all(size_t *n, struct wfx *x, const char *table, const char *filter)
{
	return itest_query_all(n, x->t->client, table, filter);
}

/* The orders of a customer (by their CustomerId). */
static struct ecw_entity **orders_of(size_t *n, struct wfx *x, const char *customer)
{
	struct ecw_buf f;
	struct ecw_entity **v;

	ecw_buf_init(&f, 0);
	ECW_ASSERT_OK(ecw_buf_adds(&f, "CustomerId eq "));
	ECW_ASSERT_OK(ecw_escape_filter_string(&f, customer));
	v = query_all(n, x, ORDERS(x), ecw_buf_cstr(&f));
	ecw_buf_dispose(&f);
	return v;
}

/* ---- the recomputation ---------------------------------------------------------------------- */

/* The copies an order should carry for customer c (NULL: none), as an
 * entity with the order's keys. */
static struct ecw_entity *expected_copies(const struct ecw_entity *order, const struct ecw_entity *c)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, ecw_entity_pk(order), ecw_entity_rk(order)));
	for (int i = 0; c && i < NCOPIES; i++) {
		if (strcmp(copy_source[i], "RowKey") == 0) {
			ECW_ASSERT_OK(ecw_entity_set_string(e, copy_target[i], ecw_entity_rk(c),
			                                    strlen(ecw_entity_rk(c))));
			continue;
		}
		const struct ecw_prop *p = ecw_entity_get(c, copy_source[i]);
		if (p) {
			struct ecw_prop q = *p;
			q.name = copy_target[i];
			ECW_ASSERT_OK(ecw_entity_set_prop(e, &q));
		}
	}
	return e;
}

/* The copies an order carries. */
static struct ecw_entity *actual_copies(const struct ecw_entity *order)
{
	struct ecw_entity *e = NULL;

	ECW_ASSERT_OK(ecw_entity_new(&e, ecw_entity_pk(order), ecw_entity_rk(order)));
	for (int i = 0; i < NCOPIES; i++) {
		const struct ecw_prop *p = ecw_entity_get(order, copy_target[i]);
		if (p)
			ECW_ASSERT_OK(ecw_entity_set_prop(e, p));
	}
	return e;
}

/* An entity as JSON, for failure messages, in the caller's buffer. */
static const char *describe(char *text, size_t cap, const struct ecw_entity *e)
{
	struct ecw_buf b;

	ecw_buf_init(&b, 0);
	if (ecw_entity_to_json(&b, e) < 0)
		snprintf(text, cap, "(unprintable)");
	else
		snprintf(text, cap, "%s", ecw_buf_cstr(&b));
	ecw_buf_dispose(&b);
	return text;
}

/* Everything but the copies is as put_orders wrote it (status: the Status
 * it should have). */
static void check_untouched(const struct ecw_entity *order, const char *status)
{
	struct ecw_entity *want = NULL, *have = NULL;
	const struct ecw_prop *cid = ecw_entity_get(order, "CustomerId");
	const char *rk = ecw_entity_rk(order);
	char *end;
	long n = strtol(rk + 1, &end, 10);

	assert_true(end != rk + 1 && *end == '\0'); /* "o<number>" */
	assert_non_null(cid);
	order_base(&want, ecw_entity_pk(order), (int)n, cid->v.s);
	if (status)
		ECW_ASSERT_OK(ecw_entity_set_string(want, "Status", status, strlen(status)));
	ECW_ASSERT_OK(ecw_entity_clone(&have, order));
	for (int i = 0; i < NCOPIES; i++)
		ecw_entity_remove(have, copy_target[i]);
	char d[1024];
	ITEST_CHECK(ecw_entity_equal(want, have), "order %s/%s: other properties changed: %s",
	            ecw_entity_pk(order), ecw_entity_rk(order), describe(d, sizeof(d), order));
	ecw_entity_free(want);
	ecw_entity_free(have);
}

/* A full recomputation: for every order whose customer is in `fanned` (a
 * NULL-terminated list of customers whose messages were processed), the
 * copies must equal what the customer holds now (exact EDM types). When the
 * customer is gone they must be what `kept` (NULL-terminated; may be NULL)
 * holds for that customer (on_delete: keep: the customer as it was), or
 * absent (on_delete: clear). Every other order carries no copies, and every
 * order's other properties are untouched. Returns the number of orders. */
static size_t check_recomputed(struct wfx *x, const char *const *fanned, struct ecw_entity *const *kept)
{
	size_t n = 0;
	struct ecw_entity **orders = query_all(&n, x, ORDERS(x), NULL);

	for (size_t i = 0; i < n; i++) {
		const struct ecw_entity *o = orders[i];
		const char *cust = ecw_entity_get(o, "CustomerId")->v.s;
		bool processed = false;
		struct ecw_entity *c = NULL, *want, *have;

		for (size_t k = 0; fanned && fanned[k]; k++)
			processed |= strcmp(fanned[k], cust) == 0;
		if (processed) {
			int err = ecw_table_get(&c, x->t->client, CUSTOMERS(x), CPK, cust);
			if (err == ECW_ENOTFOUND) {
				ecw_error_clear();
				c = NULL;
				for (size_t k = 0; kept && kept[k] && !c; k++)
					if (strcmp(ecw_entity_rk(kept[k]), cust) == 0)
						ECW_ASSERT_OK(ecw_entity_clone(&c, kept[k]));
			} else {
				ECW_ASSERT_OK(err);
			}
		}
		want = expected_copies(o, c);
		have = actual_copies(o);
		char d1[1024], d2[1024];
		ITEST_CHECK(ecw_entity_equal(want, have), "order %s/%s of %s: copies %s, recomputed %s",
		            ecw_entity_pk(o), ecw_entity_rk(o), cust, describe(d1, sizeof(d1), have),
		            describe(d2, sizeof(d2), want));
		ecw_entity_free(want);
		ecw_entity_free(have);
		ecw_entity_free(c);
		if (!ecw_entity_get(o, "Status") || strcmp(ecw_entity_get(o, "Status")->v.s, "new") == 0)
			check_untouched(o, NULL);
	}
	itest_entities_free(orders, n);
	return n;
}

/* How many of a customer's orders carry CustomerName == name. */
static size_t orders_named(struct wfx *x, const char *customer, const char *name)
{
	size_t n = 0, hits = 0;
	struct ecw_entity **v = orders_of(&n, x, customer);

	for (size_t i = 0; i < n; i++) {
		const struct ecw_prop *p = ecw_entity_get(v[i], "CustomerName");
		hits += name ? p && p->type == ECW_EDM_STRING && strcmp(p->v.s, name) == 0 : !p;
	}
	itest_entities_free(v, n);
	return hits;
}

/* ---- running the worker --------------------------------------------------------------------- */

/* Starts a worker, waits until `want` messages succeeded, reads the write
 * requests it made from its metrics, and stops it. */
static long long run_worker(struct wfx *x, const char *name, size_t want, int vis_s, struct proc *keep)
{
	return wfx_run(x, name, write_config(x, name, vis_s, 4), want, 60000, keep);
}

/* A worker started with ECW_CRASH_AT=point must die there (exit 86). */
static void run_until_crash(struct wfx *x, const char *name, const char *point)
{
	write_config(x, name, 1, 1);
	wfx_run_until_crash(x, name, point);
}

/* ---- 1. the happy path ---------------------------------------------------------------------- */

static void test_job_fanout__happy_path(void **state)
{
	struct wfx *x = *state;
	const char *fanned[] = {"alice", NULL};
	size_t n = 0;

	put_customer(x, "alice", "Alice Liddell", "alice@example.com", 50000.0);
	put_customer(x, "bob", "Bob", "bob@example.com", 10.5);
	put_orders(x, "alice", "alice", 1, 3);
	put_orders(x, "bob", "bob", 1, 2);
	put_message(x, "by-pk", "alice");

	struct proc p;
	long long writes = run_worker(x, "fanout-happy", 1, 30, &p);
	wfx_assert_queues_empty(x);
	/* Three orders in one partition: one transaction. */
	assert_int_equal(writes, 1);
	assert_int_equal(check_recomputed(x, fanned, NULL), 5);
	struct json_object *line = NULL;
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	line = proc_log_find(&log, 0, "message", "outcome", "succeeded", NULL);
	assert_non_null(line);
	assert_string_equal(proc_field(line, "detail"), "3 targets, 3 written, 0 gone");
	proc_log_dispose(&log);

	/* Exact EDM types: an integral Double stays Double, DateTime keeps 7 digits. */
	struct ecw_entity **v = orders_of(&n, x, "alice");
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		const struct ecw_prop *lim = ecw_entity_get(v[i], "CustomerLimit");
		const struct ecw_prop *since = ecw_entity_get(v[i], "CustomerSince");
		assert_non_null(lim);
		assert_int_equal(lim->type, ECW_EDM_DOUBLE);
		assert_true(lim->v.d == 50000.0);
		assert_non_null(since);
		assert_int_equal(since->type, ECW_EDM_DATETIME);
		assert_string_equal(since->v.s, "2024-02-29T23:59:59.1234567Z");
		assert_string_equal(ecw_entity_get(v[i], "CustomerRef")->v.s, "alice");
		assert_null(ecw_entity_get(v[i], "Visits"));
	}
	itest_entities_free(v, n);
	proc_assert_logs_clean();
}

/* ---- 2. every message twice: the second run writes nothing ---------------------------------- */

static void test_job_fanout__run_twice(void **state)
{
	struct wfx *x = *state;
	const char *fanned[] = {"carol", "dave", NULL};
	size_t n1 = 0, n2 = 0;

	put_customer(x, "carol", "Carol", "carol@example.com", 1.0);
	put_customer(x, "dave", "Dave", NULL, 2.0);
	put_orders(x, "carol", "carol", 1, 120);
	put_orders(x, "shard-1", "dave", 1, 30);
	put_orders(x, "shard-2", "dave", 31, 30);
	put_message(x, "by-pk", "carol");
	put_message(x, "by-id", "dave");
	assert_true(run_worker(x, "fanout-twice-1", 2, 30, NULL) == 4); /* 100 + 20, 30, 30 */
	check_recomputed(x, fanned, NULL);

	struct ecw_entity **before = query_all(&n1, x, ORDERS(x), NULL);
	put_message(x, "by-pk", "carol");
	put_message(x, "by-id", "dave");
	put_message(x, "by-pk", "carol");
	assert_int_equal(run_worker(x, "fanout-twice-2", 3, 30, NULL), 0);
	struct ecw_entity **after = query_all(&n2, x, ORDERS(x), NULL);
	assert_int_equal(n1, n2);
	/* Not a single entity was rewritten: every ETag is the same. */
	for (size_t i = 0; i < n1; i++)
		ITEST_CHECK(strcmp(ecw_entity_etag(before[i]), ecw_entity_etag(after[i])) == 0,
		            "order %s/%s was written again", ecw_entity_pk(after[i]),
		            ecw_entity_rk(after[i]));
	itest_entities_free(before, n1);
	itest_entities_free(after, n2);
	check_recomputed(x, fanned, NULL);
	wfx_assert_queues_empty(x);
	proc_assert_logs_clean();
}

/* ---- 3. a change, a stale message, a missing field ------------------------------------------ */

static void test_job_fanout__name_changed_and_stale_message(void **state)
{
	struct wfx *x = *state;
	const char *fanned[] = {"erin", NULL};

	put_customer(x, "erin", "Erin", "erin@example.com", 5.0);
	put_orders(x, "erin", "erin", 1, 4);
	put_message(x, "by-pk", "erin");
	run_worker(x, "fanout-change-1", 1, 30, NULL);
	assert_int_equal(orders_named(x, "erin", "Erin"), 4);

	/* Renamed: the message for the rename, and a stale one from before
	 * it that arrives late. Both bring the orders to the current name. */
	put_customer(x, "erin", "Erin Brockovich", "erin@example.com", 5.0);
	put_message(x, "by-pk", "erin");
	assert_int_equal(run_worker(x, "fanout-change-2", 1, 30, NULL), 1);
	assert_int_equal(orders_named(x, "erin", "Erin Brockovich"), 4);
	check_recomputed(x, fanned, NULL);

	/* Changed again before the worker saw the previous message: the old
	 * message reads the newest state. */
	put_message(x, "by-pk", "erin");
	put_customer(x, "erin", "Erin B.", NULL, 6.5);
	assert_int_equal(run_worker(x, "fanout-change-3", 1, 30, NULL), 1);
	/* No Email any more: the copy went too (an UPDATE, the rest intact). */
	assert_int_equal(orders_named(x, "erin", "Erin B."), 4);
	check_recomputed(x, fanned, NULL);

	/* A stale message after convergence: reads, writes nothing. */
	put_message(x, "by-pk", "erin");
	assert_int_equal(run_worker(x, "fanout-change-4", 1, 30, NULL), 0);
	check_recomputed(x, fanned, NULL);
	wfx_assert_queues_empty(x);
	proc_assert_logs_clean();
}

/* ---- 4. source deleted: keep and clear ------------------------------------------------------ */

static void test_job_fanout__source_deleted_keep_and_clear(void **state)
{
	struct wfx *x = *state;
	const char *fanned[] = {"frank", "grace", NULL};
	struct ecw_entity *frank = NULL;

	put_customer(x, "frank", "Frank", "frank@example.com", 1.0);
	put_customer(x, "grace", "Grace", "grace@example.com", 2.0);
	put_orders(x, "frank", "frank", 1, 3);
	put_orders(x, "grace", "grace", 1, 130);
	put_message(x, "by-pk", "frank");
	put_message(x, "by-pk-clear", "grace");
	run_worker(x, "fanout-deleted-1", 2, 30, NULL);
	ECW_ASSERT_OK(ecw_table_get(&frank, x->t->client, CUSTOMERS(x), CPK, "frank"));

	/* frank (on_delete: keep): the copies stay; grace (clear): they go. */
	delete_customer(x, "frank");
	delete_customer(x, "grace");
	put_message(x, "by-pk", "frank");
	put_message(x, "by-pk-clear", "grace");
	struct proc p;
	assert_int_equal(run_worker(x, "fanout-deleted-2", 2, 30, &p), 2); /* grace: 100 + 30 */
	assert_int_equal(orders_named(x, "frank", "Frank"), 3);
	assert_int_equal(orders_named(x, "grace", NULL), 130);
	assert_int_equal(proc_count(&p, "message", "job", "by-pk", "detail", "missing", NULL), 1);
	assert_int_equal(proc_count(&p, "message", "job", "by-pk-clear", "detail",
	                            "cleared: 130 targets, 130 written, 0 gone", NULL),
	                 1);
	struct ecw_entity *kept[] = {frank, NULL};
	check_recomputed(x, fanned, kept);

	/* Twice: nothing more to do. */
	put_message(x, "by-pk", "frank");
	put_message(x, "by-pk-clear", "grace");
	assert_int_equal(run_worker(x, "fanout-deleted-3", 2, 30, NULL), 0);

	/* grace is back: her orders get copies again. */
	put_customer(x, "grace", "Grace Hopper", NULL, 3.0);
	put_message(x, "by-pk-clear", "grace");
	run_worker(x, "fanout-deleted-4", 1, 30, NULL);
	assert_int_equal(orders_named(x, "grace", "Grace Hopper"), 130);
	check_recomputed(x, fanned, kept);
	ecw_entity_free(frank);
	wfx_assert_queues_empty(x);
	proc_assert_logs_clean();
}

/* ---- 5. messages reordered ------------------------------------------------------------------ */

static void test_job_fanout__reordered(void **state)
{
	struct wfx *x = *state;
	const char *fanned[] = {"heidi", "ivan", NULL};

	put_customer(x, "heidi", "Heidi", "h@example.com", 1.0);
	put_customer(x, "ivan", "Ivan", "i@example.com", 1.0);
	put_orders(x, "p-heidi", "heidi", 1, 15);
	put_orders(x, "p-ivan", "ivan", 1, 15);
	put_orders(x, "p-mixed", "heidi", 100, 5);
	put_orders(x, "p-mixed", "ivan", 200, 5);

	/* The changes in order: heidi v2, ivan v2, heidi v3, ivan deleted.
	 * Their messages arrive in the opposite order. */
	put_customer(x, "heidi", "Heidi v2", "h2@example.com", 2.0);
	put_customer(x, "ivan", "Ivan v2", "i2@example.com", 2.0);
	put_customer(x, "heidi", "Heidi v3", NULL, 3.0);
	delete_customer(x, "ivan");
	put_message(x, "by-id", "ivan");
	put_message(x, "by-id", "heidi");
	put_message(x, "by-id", "ivan");
	put_message(x, "by-id", "heidi");
	run_worker(x, "fanout-reordered", 4, 30, NULL);
	assert_int_equal(orders_named(x, "heidi", "Heidi v3"), 20);
	assert_int_equal(orders_named(x, "ivan", NULL), 20);
	check_recomputed(x, fanned, NULL);
	wfx_assert_queues_empty(x);
	proc_assert_logs_clean();
}

/* ---- 6. several workers at once ------------------------------------------------------------- */

static void test_job_fanout__concurrent_workers(void **state)
{
	struct wfx *x = *state;
	const char *fanned[] = {"judy", NULL};
	struct proc p[2];
	const char *args[] = {"run", "-c", NULL, NULL};
	char cfg[2][640];

	put_customer(x, "judy", "Judy 0", "j@example.com", 0.0);
	for (int s = 0; s < 8; s++) {
		char pk[32];
		snprintf(pk, sizeof(pk), "judy-%d", s);
		put_orders(x, pk, "judy", s * 100, 60);
	}
	for (int w = 0; w < 2; w++) {
		char name[32];
		snprintf(name, sizeof(name), "fanout-concurrent-%d", w);
		write_config(x, name, 30, 4);
		memcpy(cfg[w], x->config, sizeof(cfg[w]));
		args[2] = cfg[w];
		proc_start(&p[w], name, args, NULL);
	}
	/* Changes while both workers fan out, each with its message (and a
	 * duplicate), so runs with different versions overlap. */
	for (int v = 1; v <= 6; v++) {
		char name[32];
		snprintf(name, sizeof(name), "Judy %d", v);
		put_customer(x, "judy", name, v % 2 ? NULL : "j@example.com", (double)v);
		put_message(x, "by-id", "judy");
		put_message(x, "by-id", "judy");
		itest_sleep_ms(150);
	}
	int64_t end = itest_now_ms() + 60000;
	while (proc_count(&p[0], "message", "outcome", "succeeded", NULL) +
	           proc_count(&p[1], "message", "outcome", "succeeded", NULL) <
	       12) {
		ITEST_CHECK(itest_now_ms() < end, "12 messages did not succeed within 60 s (logs %s, %s)",
		            p[0].log_path, p[1].log_path);
		itest_sleep_ms(100);
	}
	proc_stop(&p[0], 10000);
	proc_stop(&p[1], 10000);
	assert_int_equal(orders_named(x, "judy", "Judy 6"), 480);
	check_recomputed(x, fanned, NULL);
	wfx_assert_queues_empty(x);
	proc_assert_logs_clean();
}

/* ---- 7. a crash after every step ------------------------------------------------------------ */

/* 201 orders of one customer over three partitions: a lone one (a single
 * MERGE), 150 (a batch of 100, one of 50) and 50 (a batch). */
static void test_job_fanout__crash_after_every_step(void **state)
{
	struct wfx *x = *state;
	static const struct {
		const char *point;
		size_t done; /* orders written when it died */
	} points[] = {
	    {"fanout.read", 0},    {"fanout.page", 0},      {"fanout.single", 1},
	    {"fanout.batch", 101}, {"fanout.targets", 201}, {"fanout.checked", 201},
	};

	for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
		char cust[32], pk[48], name[64];
		const char *fanned[] = {cust, NULL};
		snprintf(cust, sizeof(cust), "crash%zu", i);
		put_customer(x, cust, "Before", "b@example.com", 1.0);
		snprintf(pk, sizeof(pk), "%s-a", cust);
		put_orders(x, pk, cust, 0, 1);
		snprintf(pk, sizeof(pk), "%s-b", cust);
		put_orders(x, pk, cust, 1, 150);
		snprintf(pk, sizeof(pk), "%s-c", cust);
		put_orders(x, pk, cust, 151, 50);

		/* Copies made: die after the step, then a fresh worker. */
		put_message(x, "by-id", cust);
		snprintf(name, sizeof(name), "fanout-crash-%s-set", points[i].point + 7);
		run_until_crash(x, name, points[i].point);
		ITEST_CHECK(orders_named(x, cust, "Before") == points[i].done,
		            "crash at %s: %zu orders written, expected %zu", points[i].point,
		            orders_named(x, cust, "Before"), points[i].done);
		snprintf(name, sizeof(name), "fanout-crash-%s-set-rerun", points[i].point + 7);
		run_worker(x, name, 1, 1, NULL);
		assert_int_equal(orders_named(x, cust, "Before"), 201);
		check_recomputed(x, fanned, NULL);

		/* Source deleted, copies cleared (replace): the same. */
		delete_customer(x, cust);
		put_message(x, "by-id", cust);
		snprintf(name, sizeof(name), "fanout-crash-%s-clear", points[i].point + 7);
		run_until_crash(x, name, points[i].point);
		ITEST_CHECK(orders_named(x, cust, NULL) == points[i].done,
		            "crash at %s while clearing: %zu orders cleared, expected %zu", points[i].point,
		            orders_named(x, cust, NULL), points[i].done);
		snprintf(name, sizeof(name), "fanout-crash-%s-clear-rerun", points[i].point + 7);
		run_worker(x, name, 1, 1, NULL);
		assert_int_equal(orders_named(x, cust, NULL), 201);
		check_recomputed(x, fanned, NULL);
		wfx_assert_queues_empty(x);
	}
	proc_assert_logs_clean();
}

/* ---- 8. a quote in a key cannot change the filter ------------------------------------------- */

static void test_job_fanout__quote_in_key(void **state)
{
	struct wfx *x = *state;
	/* Unescaped, this key would make the filter
	 * PartitionKey eq 'x' or PartitionKey eq 'victim': victim's orders. */
	const char *sneaky = "x' or PartitionKey eq 'victim";
	const char *fanned[] = {"o'brien", "x' or PartitionKey eq 'victim", NULL};

	put_customer(x, "o'brien", "Miles O'Brien", "m@example.com", 1.0);
	put_customer(x, sneaky, "Sneaky", "s@example.com", 1.0);
	put_customer(x, "victim", "Victim", "v@example.com", 1.0);
	put_orders(x, "o'brien", "o'brien", 1, 3);
	put_orders(x, sneaky, sneaky, 1, 2);
	put_orders(x, "victim", "victim", 1, 4);
	put_message(x, "by-pk", "o'brien");
	put_message(x, "by-pk", sneaky);
	put_message(x, "by-id", "o'brien"); /* the same copies through the other filter */
	run_worker(x, "fanout-quote", 3, 30, NULL);
	assert_int_equal(orders_named(x, "o'brien", "Miles O'Brien"), 3);
	assert_int_equal(orders_named(x, sneaky, "Sneaky"), 2);
	assert_int_equal(orders_named(x, "victim", NULL), 4);
	check_recomputed(x, fanned, NULL);
	wfx_assert_queues_empty(x);
	proc_assert_logs_clean();
}

/* ---- 9. large fan-outs: write requests counted ---------------------------------------------- */

static void test_job_fanout__large_fanout_write_counts(void **state)
{
	struct wfx *x = *state;
	const char *fanned[] = {"whale", "spread", NULL};
	struct proc p;

	put_customer(x, "whale", "Whale", "w@example.com", 1e6);
	put_customer(x, "spread", "Spread", "s@example.com", 2.0);
	put_orders(x, "whale", "whale", 0, 2500);
	for (int s = 0; s < 50; s++) {
		char pk[32];
		snprintf(pk, sizeof(pk), "spread-%02d", s);
		put_orders(x, pk, "spread", s * 20, 20);
	}

	/* 2,500 targets in one partition: 25 transactions of 100. */
	put_message(x, "by-pk", "whale");
	long long w1 = run_worker(x, "fanout-large-whale", 1, 30, &p);
	struct proc_log log;
	proc_log_read(&log, p.log_path);
	struct json_object *ok = proc_log_find(&log, 0, "message", "outcome", "succeeded", NULL);
	print_message("2,500 targets in one partition: %lld write requests, %lld ms\n", w1,
	              proc_field_int(ok, "duration_ms", -1));
	assert_string_equal(proc_field(ok, "detail"), "2500 targets, 2500 written, 0 gone");
	proc_log_dispose(&log);
	ITEST_CHECK(w1 <= 30, "%lld write requests for 2,500 targets in one partition, at most 30 allowed",
	            w1);
	assert_int_equal(w1, 25);

	/* 1,000 targets in 50 partitions of 20: one transaction each. */
	put_message(x, "by-id", "spread");
	long long w2 = run_worker(x, "fanout-large-spread", 1, 30, NULL);
	print_message("50 partitions of 20: %lld write requests\n", w2);
	assert_int_equal(w2, 50);
	assert_int_equal(orders_named(x, "whale", "Whale"), 2500);
	assert_int_equal(orders_named(x, "spread", "Spread"), 1000);
	assert_int_equal(check_recomputed(x, fanned, NULL), 3500);

	/* Second runs: nothing to write. */
	put_message(x, "by-pk", "whale");
	put_message(x, "by-id", "spread");
	long long w3 = run_worker(x, "fanout-large-again", 2, 30, NULL);
	print_message("second runs: %lld write requests\n", w3);
	assert_int_equal(w3, 0);
	wfx_assert_queues_empty(x);
	proc_assert_logs_clean();
}

/* ---- 10. a fan-out that outlives its lease keeps it ----------------------------------------- */

static void test_job_fanout__long_fanout_keeps_lease(void **state)
{
	struct wfx *x = *state;
	struct proc p;
	struct proc_log log;

	put_customer(x, "titan", "Titan", "t@example.com", 1.0);
	put_orders(x, "titan", "titan", 0, 12000);
	put_message(x, "by-pk", "titan");
	/* A 1 s lease, renewed every 0.5 s while the 120 transactions go. Each
	 * one pauses 20 ms after it commits, so the run outlasts the lease
	 * however fast the machine is (on a quiet one it once took 998 ms). */
	static const char *const slow[] = {"ECW_TEST_PAUSE_AT=fanout.batch:20", NULL};
	long long writes =
	    wfx_run_env(x, "fanout-long", write_config(x, "fanout-long", 1, 4), 1, 60000, &p, slow);
	proc_log_read(&log, p.log_path);
	struct json_object *ok = proc_log_find(&log, 0, "message", "outcome", "succeeded", NULL);
	long long ms = proc_field_int(ok, "duration_ms", -1);
	size_t renewals = proc_log_count(&log, "lease_renewed", NULL);
	print_message("12,000 targets: %lld write requests, %lld ms, %zu lease renewals\n", writes, ms,
	              renewals);
	ITEST_CHECK(ms > 1000, "the run took %lld ms: too short to outlive a 1 s lease", ms);
	ITEST_CHECK(renewals >= 1, "a %lld ms run with a 1 s lease was never renewed", ms);
	/* Held all along: run once, on its first delivery, never lost. */
	assert_int_equal(proc_field_int(ok, "dequeue_count", -1), 1);
	assert_int_equal(proc_log_count(&log, "lease_lost", NULL), 0);
	assert_int_equal(proc_log_count(&log, "message", NULL), 1);
	assert_string_equal(proc_field(ok, "detail"), "12000 targets, 12000 written, 0 gone");
	proc_log_dispose(&log);
	assert_int_equal(writes, 120);
	assert_int_equal(orders_named(x, "titan", "Titan"), 12000);
	wfx_assert_queues_empty(x);
	proc_assert_logs_clean();
}

/* ---- in-process runs: a transport that lets the test act before a $batch -------------------- */

struct hook {
	struct wfx *x;
	CURL *curl;
	int batches;    /* table.batch requests sent so far */
	int act_before; /* call act before this batch (1-based); 0: never */
	void (*act)(struct hook *h);
	int lose_lease_after; /* set the lease lost after this batch; 0: never */
	atomic_bool lease_lost;
	int merges, updates; /* table.merge / table.update attempts */
	char customer[64];
};

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

/* Sends the signed request to Azurite as it is (libcurl, like the client). */
static int forward(struct hook *h, struct ecw_response *resp, const char *url, const struct ecw_request *r)
{
	struct curl_slist *hl = NULL;
	char line[4096];
	long status = 0;
	CURLcode rc;

	curl_easy_reset(h->curl);
	for (size_t i = 0; i < r->nheaders; i++) {
		snprintf(line, sizeof(line), "%s: %s", r->headers[i].name, r->headers[i].value);
		hl = curl_slist_append(hl, line);
	}
	snprintf(line, sizeof(line), "Content-Type:%s%s", r->content_type ? " " : "",
	         r->content_type ? r->content_type : "");
	hl = curl_slist_append(hl, line);
	hl = curl_slist_append(hl, "Expect:");
	curl_easy_setopt(h->curl, CURLOPT_URL, url);
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, resp);
	curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, 30000L);
	if (strcmp(r->method, "GET") == 0) {
		curl_easy_setopt(h->curl, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, r->method);
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, r->body ? r->body : "");
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
	}
	rc = curl_easy_perform(h->curl);
	curl_slist_free_all(hl);
	if (rc != CURLE_OK)
		return ecw_error_set(ECW_ETRANSIENT, "test transport: %s", curl_easy_strerror(rc));
	curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
	resp->status = status;
	return 0;
}

static int hook_send(void *ctx, struct ecw_response *resp, const char *url, const struct ecw_request *r)
{
	struct hook *h = ctx;
	bool batch = r->op && strcmp(r->op, "table.batch") == 0;
	int err;

	if (batch && ++h->batches == h->act_before && h->act)
		h->act(h);
	if (r->op && strcmp(r->op, "table.merge") == 0)
		h->merges++;
	if (r->op && strcmp(r->op, "table.update") == 0)
		h->updates++;
	err = forward(h, resp, url, r);
	if (batch && h->batches == h->lose_lease_after)
		atomic_store(&h->lease_lost, true);
	return err;
}

/* Runs job for customer in this process on a hooked client; returns run's result. */
static int run_inproc(struct wfx *x, struct hook *h, const char *job, const char *customer)
{
	char text[8192], jobs[4096];
	struct ecw_config *cfg = NULL;
	struct ecw_node_errors errs;
	struct ecw_account *acct = NULL;
	struct ecw_client *c = NULL;
	int err;

	jobs_text(jobs, sizeof(jobs), x);
	snprintf(text, sizeof(text),
	         "storage: {connection_string: \"${ECW_TEST_CONNECTION_STRING}\"}\njobs:\n%s", jobs);
	ecw_node_errors_init(&errs);
	err = ecw_config_parse(&cfg, text, strlen(text), "inproc.yaml", &errs);
	ITEST_CHECK(err == 0, "config: %s", errs.n ? errs.lines[0] : itest_last_error());
	ecw_node_errors_dispose(&errs);
	const struct ecw_job_def *def = ecw_config_job(cfg, job);
	assert_non_null(def);

	itest_client_for(&acct, &c, itest_connstr(), NULL);
	h->x = x;
	assert_non_null(h->curl = curl_easy_init());
	ecw_client_set_transport(c, hook_send, h);
	snprintf(h->customer, sizeof(h->customer), "%s", customer);
	struct ecw_job_ctx ctx = {
	    .client = c,
	    .job = def->name,
	    .pk = CPK,
	    .rk = customer,
	    .trace_id = "inproc",
	    .message_id = "inproc",
	    .dequeue_count = 1,
	    .lease_lost = &h->lease_lost,
	};
	ecw_error_clear();
	err = def->type->run(def->settings, &ctx);
	if (err < 0)
		print_message("run: %s (%s)\n", ecw_error_name(err), itest_last_error());
	else
		print_message("run: %s\n", ctx.outcome_detail);
	curl_easy_cleanup(h->curl);
	h->curl = NULL;
	ecw_client_free(c);
	ecw_account_free(acct);
	ecw_config_free(cfg);
	return err;
}

/* ---- 11. a target vanishes between the query and the batch ---------------------------------- */

static void delete_order7(struct hook *h)
{
	bool deleted = false;
	ECW_ASSERT_OK(
	    ecw_table_delete_if_exists(&deleted, h->x->t->client, ORDERS(h->x), h->customer, "o00007"));
	assert_true(deleted);
}

static void test_job_fanout__batch_falls_back_when_target_vanished(void **state)
{
	struct wfx *x = *state;
	struct hook h = {.act_before = 1, .act = delete_order7};
	const char *fanned[] = {"kim", NULL};
	struct ecw_entity *e = NULL;

	put_customer(x, "kim", "Kim", "k@example.com", 1.0);
	put_orders(x, "kim", "kim", 0, 150);
	assert_int_equal(run_inproc(x, &h, "by-pk", "kim"), 0);
	/* The first batch failed (404 at the deleted one, nothing applied); its
	 * 100 went one by one (99 merged, the deleted one 404 and skipped); the
	 * second batch (50) went through. */
	assert_int_equal(h.batches, 2);
	assert_int_equal(h.merges, 100);
	assert_int_equal(orders_named(x, "kim", "Kim"), 149);
	/* Never re-created by the fan-out. */
	ECW_ASSERT_ERR(ecw_table_get(&e, x->t->client, ORDERS(x), "kim", "o00007"), ECW_ENOTFOUND);
	check_recomputed(x, fanned, NULL);
}

/* ---- 12. targets changed between the query and the batch ------------------------------------ */

static void change_targets(struct hook *h)
{
	struct ecw_entity *e = NULL;
	char pk[80];

	/* The application ships order 3 (another property) and moves order 5
	 * to another customer. */
	snprintf(pk, sizeof(pk), "%s-p", h->customer);
	ECW_ASSERT_OK(ecw_entity_new(&e, pk, "o00003"));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "Status", "shipped", 7));
	ECW_ASSERT_OK(ecw_table_write(NULL, h->x->t->client, ORDERS(h->x), e, ECW_WRITE_MERGE, "*"));
	ecw_entity_free(e);
	ECW_ASSERT_OK(ecw_entity_new(&e, pk, "o00005"));
	ECW_ASSERT_OK(ecw_entity_set_string(e, "CustomerId", "someone-else", 12));
	ECW_ASSERT_OK(ecw_table_write(NULL, h->x->t->client, ORDERS(h->x), e, ECW_WRITE_MERGE, "*"));
	ecw_entity_free(e);
}

static void test_job_fanout__batch_falls_back_when_target_changed(void **state)
{
	struct wfx *x = *state;
	struct hook h = {.act_before = 1, .act = change_targets};
	struct ecw_entity *e = NULL;

	put_customer(x, "lena", "Lena", "l@example.com", 1.0);
	put_customer(x, "someone-else", "Someone", "s@example.com", 1.0);
	put_orders(x, "lena-p", "lena", 1, 10);
	assert_int_equal(run_inproc(x, &h, "by-id", "lena"), 0);
	/* The batch failed with 412; ten single MERGEs, two of them 412 again:
	 * order 3 read again and merged (11 attempts), order 5 no longer a
	 * target (skipped). */
	assert_int_equal(h.batches, 1);
	assert_int_equal(h.merges, 11);
	assert_int_equal(orders_named(x, "lena", "Lena"), 9);
	ECW_ASSERT_OK(ecw_table_get(&e, x->t->client, ORDERS(x), "lena-p", "o00003"));
	assert_string_equal(ecw_entity_get(e, "Status")->v.s, "shipped");
	assert_string_equal(ecw_entity_get(e, "CustomerName")->v.s, "Lena");
	ecw_entity_free(e);
	ECW_ASSERT_OK(ecw_table_get(&e, x->t->client, ORDERS(x), "lena-p", "o00005"));
	assert_null(ecw_entity_get(e, "CustomerName"));
	ecw_entity_free(e);
	size_t n = 0;
	struct ecw_entity **v = orders_of(&n, x, "lena");
	for (size_t i = 0; i < n; i++)
		check_untouched(v[i], strcmp(ecw_entity_rk(v[i]), "o00003") == 0 ? "shipped" : NULL);
	itest_entities_free(v, n);
}

/* ---- 13. the source changes while the job writes -------------------------------------------- */

static void rename_customer(struct hook *h)
{
	put_customer(h->x, h->customer, "Renamed meanwhile", "new@example.com", 9.0);
}

static void test_job_fanout__source_changed_during_run(void **state)
{
	struct wfx *x = *state;
	struct hook h = {.act_before = 1, .act = rename_customer};
	const char *fanned[] = {"mona", NULL};

	put_customer(x, "mona", "Mona", "m@example.com", 1.0);
	put_orders(x, "mona", "mona", 0, 150);
	assert_int_equal(run_inproc(x, &h, "by-pk", "mona"), 0);
	/* Round 1 wrote the old version (2 batches); the final read saw a new
	 * ETag, so round 2 wrote the new one (2 more). */
	assert_int_equal(h.batches, 4);
	assert_int_equal(orders_named(x, "mona", "Renamed meanwhile"), 150);
	check_recomputed(x, fanned, NULL);
}

/* ---- 14. a lost lease stops the writes ------------------------------------------------------ */

static void test_job_fanout__lease_lost_stops_writes(void **state)
{
	struct wfx *x = *state;
	struct hook h = {.lose_lease_after = 2};

	put_customer(x, "nina", "Nina", "n@example.com", 1.0);
	put_orders(x, "nina", "nina", 0, 500);
	int err = run_inproc(x, &h, "by-pk", "nina");
	assert_int_equal(err, ECW_ETRANSIENT);
	assert_non_null(strstr(ecw_error_last()->message, "lease lost"));
	assert_false(ecw_job_err_is_permanent(err));
	/* Two transactions, then nothing more. */
	assert_int_equal(h.batches, 2);
	assert_int_equal(h.merges + h.updates, 0);
	assert_int_equal(orders_named(x, "nina", "Nina"), 200);
	assert_int_equal(orders_named(x, "nina", NULL), 300);
}

/* ---- 15. transactions stay under 4 MiB --------------------------------------------------------------------
 */

static void test_job_fanout__large_values_split_batches(void **state)
{
	struct wfx *x = *state;
	struct hook h = {0};
	const char *fanned[] = {"olga", NULL};
	char *name = malloc(30001), *email = malloc(30001);

	/* Strings hold up to 32K characters (64 KiB of UTF-16): two of 30,000
	 * copied into 100 orders are 6 MB, more than one transaction carries. */
	assert_non_null(name);
	assert_non_null(email);
	memset(name, 'n', 30000);
	name[30000] = '\0';
	memset(email, 'e', 30000);
	email[30000] = '\0';
	put_customer(x, "olga", name, email, 1.0);
	put_orders(x, "olga", "olga", 0, 100);
	assert_int_equal(run_inproc(x, &h, "by-pk", "olga"), 0);
	assert_int_equal(h.batches, 2);
	assert_int_equal(h.merges + h.updates, 0);
	assert_int_equal(orders_named(x, "olga", name), 100);
	check_recomputed(x, fanned, NULL);
	free(name);
	free(email);
}

/* ---- 16. configuration ------------------------------------------------------------------------------------
 */

static void expect_config_error(const char *job_yaml, const char *needle)
{
	char text[2048];
	struct ecw_config *cfg = NULL;
	struct ecw_node_errors errs;
	bool found = false;

	snprintf(text, sizeof(text),
	         "storage: {connection_string: \"UseDevelopmentStorage=true\"}\njobs:\n  j:\n%s", job_yaml);
	ecw_node_errors_init(&errs);
	ECW_ASSERT_ERR(ecw_config_parse(&cfg, text, strlen(text), "bad.yaml", &errs), ECW_EINVALID);
	for (size_t i = 0; i < errs.n; i++)
		found |= strstr(errs.lines[i], needle) != NULL;
	ITEST_CHECK(found, "no error mentioning '%s' for:\n%s\nerrors: %s", needle, job_yaml,
	            errs.n ? errs.lines[0] : "(none)");
	ecw_node_errors_dispose(&errs);
	ecw_config_free(cfg);
}

static void test_job_fanout__config_errors(void **state)
{
	(void)state;
#define BASE "    type: fanout\n    source: Customers\n    table: Orders\n"
	expect_config_error(BASE "    filter: \"PartitionKey eq '{RowKey}'\"\n", "fields");
	expect_config_error(BASE "    filter: \"PartitionKey eq '{RowKey}'\"\n    fields: [Name]\n",
	                    "fields");
	expect_config_error(BASE "    filter: \"PartitionKey eq '{RowKey}'\"\n    fields: {RowKey: Name}\n",
	                    "cannot be a target property");
	expect_config_error(BASE "    filter: \"PartitionKey eq '{RowKey}'\"\n    fields: {A: Timestamp}\n",
	                    "cannot be a source property");
	expect_config_error(BASE "    fields: {A: Name}\n", "filter");
	/* A bad field before good ones (found by fuzz_config: under
	 * LeakSanitizer the good ones' copies leaked). */
	expect_config_error(
	    BASE "    filter: \"PartitionKey eq '{RowKey}'\"\n    fields: {A: '', B: Name, C: Email}\n",
	    "fields.A");
	expect_config_error(BASE "    filter: \"PartitionKey eq '{RowKey'\"\n    fields: {A: Name}\n",
	                    "filter");
	expect_config_error(BASE "    filter: \"PartitionKey eq '{RowKey}'\"\n    fields: {A: Name}\n"
	                         "    on_delete: drop\n",
	                    "on_delete: keep or clear");
	expect_config_error(
	    BASE "    filter: \"Region eq '{Region}'\"\n    fields: {A: Name}\n    on_delete: clear\n",
	    "only {PartitionKey} and {RowKey}");
	expect_config_error(
	    BASE "    filter: \"PartitionKey eq '{RowKey}'\"\n    fields: {A: Name}\n    extra: 1\n",
	    "extra");
#undef BASE
	/* A filter on other source properties is fine when copies are kept. */
	const char *ok = "storage: {connection_string: \"UseDevelopmentStorage=true\"}\njobs:\n  j:\n"
	                 "    type: fanout\n    source: Customers\n    table: Orders\n"
	                 "    filter: \"Region eq '{Region}'\"\n    fields: {A: Name, B: RowKey}\n";
	struct ecw_config *cfg = NULL;
	struct ecw_node_errors errs;
	ecw_node_errors_init(&errs);
	int err = ecw_config_parse(&cfg, ok, strlen(ok), "ok.yaml", &errs);
	ITEST_CHECK(err == 0, "config: %s", errs.n ? errs.lines[0] : itest_last_error());
	assert_string_equal(ecw_config_job(cfg, "j")->type->name, "fanout");
	ecw_node_errors_dispose(&errs);
	ecw_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_job_fanout__happy_path, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__run_twice, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__name_changed_and_stale_message, fx_setup,
	                                    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__source_deleted_keep_and_clear, fx_setup,
	                                    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__reordered, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__concurrent_workers, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__crash_after_every_step, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__quote_in_key, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__large_fanout_write_counts, fx_setup,
	                                    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__long_fanout_keeps_lease, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__batch_falls_back_when_target_vanished, fx_setup,
	                                    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__batch_falls_back_when_target_changed, fx_setup,
	                                    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__source_changed_during_run, fx_setup,
	                                    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__lease_lost_stops_writes, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_fanout__large_values_split_batches, fx_setup,
	                                    fx_teardown),
	    cmocka_unit_test(test_job_fanout__config_errors),
	};
	/* ECW_TEST_FILTER=test_job_fanout__crash* runs only the matching cases. */
	if (getenv("ECW_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ECW_TEST_FILTER"));
	return cmocka_run_group_tests_name("job_fanout", tests, NULL, NULL);
}
