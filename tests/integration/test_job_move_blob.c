/* SPDX-License-Identifier: MIT */
/* test_job_move_blob.c - the move between a table and blobs (issue 36, item
 * 2), run in this process as a message would run it (moveblobfx.h), against
 * Azurite's table and blob services: an entity of every EDM type under
 * hostile keys archived to a blob (its name by the documented rule, content
 * the Table JSON, application/json, metadata with the keys encoded) and
 * restored identical; the same entity making the same bytes; two runs
 * overlapping, one holding an older read, never losing the newer version
 * (archive and restore; staged at the crash points' hook); a missing
 * container held as a missing table is, nothing deleted; a blob that is no
 * entity, of other keys or over the cap, and keys too long for a name, as
 * permanent errors naming the blob, nothing written; and the audit of both
 * directions (an entity in both places: identical is repaired, different a
 * conflict left alone). Crashes after each step, the `blocked` and
 * `poisoned` outcomes of a worker process are in test_job_move_blob_crash.c;
 * the SDK's view of a round trip in test_interop.c. */
#include "itest.h"
#include "moveblobfx.h"
#include "movefx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_audit.h"
#include "ecw_crash.h"
#include "ecw_job.h"

/* Keys that try every escape: URL marks, %, non-ASCII, dot segments, spaces,
 * the empty key, and two pairs whose names could only collide if the
 * escape of '.' and '%' were ambiguous. */
static const char *const keys[][2] = {
    {"a+b&c=d%", "o'brien 001"},
    {"Zo\xc3\xab", "%41"},
    {"..", "."},
    {"sp ace ", " x. "},
    {"", "empty pk"},
    {"x.", "r"},
    {"x%2E", "r"},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* percent-decoding of a metadata value */
static void pct_decode(char *out, size_t cap, const char *s)
{
	size_t k = 0;

	for (size_t i = 0; s[i] && k + 1 < cap; i++) {
		unsigned v;
		if (s[i] == '%' && sscanf(s + i + 1, "%2x", &v) == 1) {
			out[k++] = (char)v;
			i += 2;
		} else {
			out[k++] = s[i];
		}
	}
	out[k] = '\0';
}

static void write_entity(struct mbx *x, const struct ecw_entity *e)
{
	ECW_ASSERT_OK(ecw_table_write(NULL, x->t->client, x->t->table, e, ECW_WRITE_INSERT_OR_REPLACE, NULL));
}

static char *blob_text(struct mbx *x, const char *pk, const char *rk)
{
	struct ecw_buf b;
	char name[4096];

	mbx_name(name, sizeof(name), pk, rk);
	ecw_buf_init(&b, 0);
	ECW_ASSERT_OK(ecw_blob_get(&b, NULL, x->t->client, x->container, name, 8u << 20));
	return ecw_buf_take(&b);
}

static void put_blob(struct mbx *x, const char *pk, const char *rk, const char *data, size_t len)
{
	char name[4096];

	mbx_name(name, sizeof(name), pk, rk);
	ECW_ASSERT_OK(ecw_blob_put(NULL, x->t->client, x->container, name, data, len, NULL));
}

static size_t blob_count(struct mbx *x)
{
	struct ecw_blob_list *l = NULL;
	struct ecw_blob_info *info = NULL;
	size_t n = 0;

	ECW_ASSERT_OK(ecw_blob_list_new(&l, x->t->client, x->container, NULL));
	for (;;) {
		ECW_ASSERT_OK(ecw_blob_list_next(&info, l));
		if (!info)
			break;
		n++;
		ecw_blob_info_free(info);
	}
	ecw_blob_list_free(l);
	return n;
}

/* ---- 1. fidelity ---------------------------------------------------------------------------------- */

static void test_job_move_blob__round_trip_keeps_every_type_under_hostile_keys(void **state)
{
	struct mbx *x = *state;
	char detail[64], got[4096];

	for (size_t i = 0; i < NKEYS; i++) {
		struct ecw_entity *e = mbx_every_type(keys[i][0], keys[i][1], 1);
		write_entity(x, e);
		ecw_entity_free(e);
	}
	for (size_t i = 0; i < NKEYS; i++) {
		const char *pk = keys[i][0], *rk = keys[i][1];
		struct ecw_entity *want = mbx_every_type(pk, rk, 1), *copy;
		struct ecw_blob_info *info = NULL;
		ITEST_CHECK(mbx_run(x, x->archive, NULL, pk, rk, detail) == 0, "archive '%s'/'%s': %s", pk,
		            rk, itest_last_error());
		assert_string_equal(detail, "");
		ITEST_CHECK(!itest_get_or_null(x->t->client, x->t->table, pk, rk),
		            "'%s'/'%s' still in the table", pk, rk);
		copy = mbx_blob_entity(x->t->client, x->container, pk, rk, &info);
		mv_assert_same_entity(want, copy, "the blob");
		assert_string_equal(info->content_type, "application/json");
		assert_string_equal(ecw_blob_info_meta(info, "ecw_source_table"), x->t->table);
		ITEST_CHECK(strncmp(ecw_blob_info_meta(info, "ecw_source_etag"), "W/\"", 3) == 0,
		            "ecw_source_etag is %s", ecw_blob_info_meta(info, "ecw_source_etag"));
		pct_decode(got, sizeof(got), ecw_blob_info_meta(info, "ecw_partition_key"));
		assert_string_equal(got, pk);
		pct_decode(got, sizeof(got), ecw_blob_info_meta(info, "ecw_row_key"));
		assert_string_equal(got, rk);
		ecw_blob_info_free(info);
		ecw_entity_free(copy);
		ecw_entity_free(want);
	}
	assert_int_equal(blob_count(x), NKEYS);

	/* The Table JSON, as any SDK or script reads it: annotated where JSON
	 * alone would lose the type; no ETag, no Timestamp. */
	char *text = blob_text(x, keys[0][0], keys[0][1]);
	static const char *const want[] = {
	    "\"PartitionKey\":\"a+b&c=d%\"",
	    "\"Big@odata.type\":\"Edm.Int64\"",
	    "\"Big\":\"9007199254740993\"",
	    "\"Nan@odata.type\":\"Edm.Double\"",
	    "\"Nan\":\"NaN\"",
	    "\"NegInf\":\"-Infinity\"",
	    "\"When@odata.type\":\"Edm.DateTime\"",
	    "\"When\":\"2026-08-19T10:00:00.1234567Z\"",
	    "\"Id@odata.type\":\"Edm.Guid\"",
	    "\"Bytes@odata.type\":\"Edm.Binary\"",
	    "\"Bytes\":\"AAEC/wA=\"",
	    NULL,
	};
	for (int k = 0; want[k]; k++)
		ITEST_CHECK(strstr(text, want[k]), "the blob holds %s\n  expected it to contain %s", text,
		            want[k]);
	ITEST_CHECK(!strstr(text, "etag") && !strstr(text, "Timestamp"), "the blob holds %s", text);
	free(text);

	for (size_t i = 0; i < NKEYS; i++) {
		const char *pk = keys[i][0], *rk = keys[i][1];
		struct ecw_entity *want_e = mbx_every_type(pk, rk, 1), *back;
		ITEST_CHECK(mbx_run(x, x->restore, NULL, pk, rk, detail) == 0, "restore '%s'/'%s': %s", pk,
		            rk, itest_last_error());
		back = itest_get_or_null(x->t->client, x->t->table, pk, rk);
		mv_assert_same_entity(want_e, back, "restored");
		ITEST_CHECK(!mbx_blob_entity(x->t->client, x->container, pk, rk, NULL),
		            "the blob of '%s'/'%s' is left", pk, rk);
		ecw_entity_free(back);
		ecw_entity_free(want_e);
	}
	assert_int_equal(blob_count(x), 0);
}

/* One version of an entity always makes the same bytes (no ETag, no
 * Timestamp), and a second run of a finished move says what it found. */
static void test_job_move_blob__same_entity_same_bytes(void **state)
{
	struct mbx *x = *state;
	struct ecw_entity *e = mbx_every_type("Sales", "e1", 3);
	char detail[64];

	write_entity(x, e);
	ECW_ASSERT_OK(mbx_run(x, x->archive, NULL, "Sales", "e1", NULL));
	char *first = blob_text(x, "Sales", "e1");
	ECW_ASSERT_OK(mbx_run(x, x->archive, NULL, "Sales", "e1", detail));
	assert_string_equal(detail, "already-moved");
	ECW_ASSERT_OK(mbx_run(x, x->restore, NULL, "Sales", "e1", NULL));
	ECW_ASSERT_OK(mbx_run(x, x->restore, NULL, "Sales", "e1", detail));
	assert_string_equal(detail, "already-moved");
	ECW_ASSERT_OK(mbx_run(x, x->archive, NULL, "Sales", "e1", NULL));
	char *second = blob_text(x, "Sales", "e1");
	assert_string_equal(first, second);
	ECW_ASSERT_OK(mbx_run(x, x->archive, NULL, "Nobody", "e0", detail));
	assert_string_equal(detail, "missing");
	ECW_ASSERT_OK(mbx_run(x, x->restore, NULL, "Nobody", "e0", detail));
	assert_string_equal(detail, "missing");
	free(first);
	free(second);
	ecw_entity_free(e);
}

/* ---- 2. two runs overlapping ---------------------------------------------------------------------- */

static struct race_state {
	struct mbx *x;
	const char *point;
	bool restore;
	int fired, run2_err;
} race;

/* At run 1's first pass of race.point: the application writes v2 and run 2
 * (a duplicate message on another worker) moves it completely; restoring,
 * run 2 first and the application after. */
static void race_hook(const char *name, void *payload)
{
	struct ecw_account *a2 = NULL;
	struct ecw_client *c2 = NULL;
	struct ecw_entity *v2;

	(void)payload;
	if (strcmp(name, race.point) != 0 || race.fired++)
		return;
	v2 = mbx_every_type("Sales", "e1", 2);
	itest_client_for(&a2, &c2, itest_connstr(), NULL);
	if (!race.restore)
		ECW_ASSERT_OK(ecw_table_write(NULL, c2, race.x->t->table, v2, ECW_WRITE_UPDATE, "*"));
	race.run2_err =
	    mbx_run(race.x, race.restore ? race.x->restore : race.x->archive, c2, "Sales", "e1", NULL);
	if (race.restore)
		ECW_ASSERT_OK(ecw_table_write(NULL, c2, race.x->t->table, v2, ECW_WRITE_UPDATE, "*"));
	ecw_entity_free(v2);
	ecw_client_free(c2);
	ecw_account_free(a2);
}

/* Runs the race (restore: a restore, of an archived v1) to its end: both
 * runs succeed, run 1 finding the move done; returns v2, the newer version. */
static struct ecw_entity *run_race(struct mbx *x, bool restore)
{
	struct ecw_entity *v1 = mbx_every_type("Sales", "e1", 1);
	char detail[64];
	int err;

	write_entity(x, v1);
	if (restore)
		ECW_ASSERT_OK(mbx_run(x, x->archive, NULL, "Sales", "e1", NULL));
	race = (struct race_state){
	    .x = x, .point = restore ? "move.from_blob.read" : "move.to_blob.read", .restore = restore};
	ecw_crash_point_hook(race_hook, NULL);
	err = mbx_run(x, restore ? x->restore : x->archive, NULL, "Sales", "e1", detail);
	ecw_crash_point_hook(NULL, NULL);
	assert_int_equal(race.fired >= 1, 1);
	assert_int_equal(race.run2_err, 0);
	ITEST_CHECK(err == 0, "run 1: %s", itest_last_error());
	assert_string_equal(detail, "already-moved");
	ecw_entity_free(v1);
	return mbx_every_type("Sales", "e1", 2);
}

/* Run 1 reads v1; the application writes v2 and run 2 archives it and
 * deletes the source; run 1 then writes its blob. A blind put would leave
 * v1 in the blob and v2 nowhere. */
static void test_job_move_blob__archive_race_never_loses_the_newer_version(void **state)
{
	struct mbx *x = *state;
	struct ecw_entity *v2 = run_race(x, false);
	struct ecw_entity *b = mbx_blob_entity(x->t->client, x->container, "Sales", "e1", NULL);

	mv_assert_same_entity(v2, b, "the blob after the race (v2, the newer version)");
	ITEST_CHECK(!itest_get_or_null(x->t->client, x->t->table, "Sales", "e1"),
	            "the source is still there");
	ecw_entity_free(b);
	ecw_entity_free(v2);
}

/* Run 1 reads the blob (v1); run 2 restores it and the application then
 * writes v2 into the table; run 1 then writes. An upsert would put the
 * stale v1 over the application's v2. */
static void test_job_move_blob__restore_race_never_overwrites_the_application(void **state)
{
	struct mbx *x = *state;
	struct ecw_entity *v2 = run_race(x, true);
	struct ecw_entity *t = itest_get_or_null(x->t->client, x->t->table, "Sales", "e1");

	mv_assert_same_entity(v2, t, "the table after the race (the application's v2)");
	assert_int_equal(blob_count(x), 0);
	ecw_entity_free(t);
	ecw_entity_free(v2);
}

/* ---- 3. configuration and data problems -------------------------------------------------------- */

/* A missing container is a missing table to the runtime (held: `blocked`),
 * named; nothing is deleted. */
static void test_job_move_blob__missing_container_holds_and_names_it(void **state)
{
	struct mbx *x = *state;
	struct ecw_entity *e = mbx_every_type("Sales", "e1", 1), *still;
	int err;

	write_entity(x, e);
	mbx_container_drop(x->t->client, x->container);
	err = mbx_run(x, x->archive, NULL, "Sales", "e1", NULL);
	assert_int_equal(err, ECW_ENOTABLE);
	assert_false(ecw_job_err_is_permanent(err));
	assert_string_equal(ecw_error_last()->table, x->container);
	ITEST_CHECK(strstr(ecw_error_last()->message, x->container), "%s", itest_last_error());
	still = itest_get_or_null(x->t->client, x->t->table, "Sales", "e1");
	mv_assert_same_entity(e, still, "the source, with no container to archive to");
	err = mbx_run(x, x->restore, NULL, "Sales", "e1", NULL);
	assert_int_equal(err, ECW_ENOTABLE);
	assert_string_equal(ecw_error_last()->table, x->container);
	ecw_entity_free(still);
	ecw_entity_free(e);
	ecw_error_clear();
	ECW_ASSERT_OK(ecw_blob_container_create(NULL, x->t->client, x->container)); /* for teardown */
}

static void expect_poison(struct mbx *x, const char *pk, const char *rk, int code, const char *why)
{
	int err = mbx_run(x, x->restore, NULL, pk, rk, NULL);

	ITEST_CHECK(err == code, "restore gave %s (%s), expected %s", ecw_error_name(err), itest_last_error(),
	            ecw_error_name(code));
	assert_true(ecw_job_err_is_permanent(err));
	ITEST_CHECK(strstr(ecw_error_last()->message, why) && strstr(ecw_error_last()->message, x->container),
	            "the reason is '%s', expected it to name the container and say '%s'", itest_last_error(),
	            why);
	ITEST_CHECK(!itest_get_or_null(x->t->client, x->t->table, pk, rk), "something was restored");
}

/* A blob that is no entity, one of other keys, or one over the cap is a
 * permanent error naming it: nothing written, the blob left for a person. */
static void test_job_move_blob__bad_blobs_poison_with_a_reason(void **state)
{
	struct mbx *x = *state;
	struct ecw_entity *other = mbx_every_type("Other", "keys", 1);
	struct ecw_buf json;
	char *big = malloc((4u << 20) + 1);

	put_blob(x, "Sales", "junk", "not json {", 10);
	expect_poison(x, "Sales", "junk", ECW_EINVALID, "no table entity");
	ecw_buf_init(&json, 0);
	ECW_ASSERT_OK(ecw_entity_to_json(&json, other));
	put_blob(x, "Sales", "moved", json.ptr, json.len);
	expect_poison(x, "Sales", "moved", ECW_EINVALID, "other keys");
	assert_non_null(big);
	memset(big, ' ', (4u << 20) + 1);
	put_blob(x, "Sales", "big", big, (4u << 20) + 1);
	expect_poison(x, "Sales", "big", ECW_ETOOLARGE, "over 4 MiB");
	assert_int_equal(blob_count(x), 3);
	free(big);
	ecw_buf_dispose(&json);
	ecw_entity_free(other);
}

/* Keys too long for a blob name (1,024 characters): a permanent error
 * naming the container, before any request. */
static void test_job_move_blob__keys_too_long_for_a_name(void **state)
{
	struct mbx *x = *state;
	char pk[601], rk[601];
	int err;

	memset(pk, 'p', 600);
	memset(rk, 'r', 600);
	pk[600] = rk[600] = '\0';
	err = mbx_run(x, x->archive, NULL, pk, rk, NULL);
	assert_int_equal(err, ECW_EINVALID);
	ITEST_CHECK(strstr(ecw_error_last()->message, "no valid blob name"), "%s", itest_last_error());
	assert_int_equal(blob_count(x), 0);
}

/* ---- 4. the audit ------------------------------------------------------------------------------ */

static struct ecw_audit_counts audit(struct mbx *x, const struct ecw_job_def *def, bool repair)
{
	struct ecw_audit_ctx ctx = {.client = x->t->client, .job = def->name, .repair = repair};

	ECW_ASSERT_OK(def->type->audit(def->settings, &ctx));
	return ctx.counts;
}

/* Both places hold "same" (identical: a move stopped half way) and
 * "differs" (the table's v2 against the blob's v1); "only" is only in a
 * blob, "live" only in the table, and a blob of no key is in the container.
 * Unrepaired, the audit reports one stale and one conflict; repaired, the
 * stale pair is completed in the job's direction and the conflict left. */
static void seed_drift(struct mbx *x)
{
	static const char *const rks[] = {"same.", "differs", "only"};

	for (int i = 0; i < 3; i++) {
		struct ecw_entity *e = mbx_every_type("Sales", rks[i], 1);
		write_entity(x, e);
		ECW_ASSERT_OK(mbx_run(x, x->archive, NULL, "Sales", rks[i], NULL));
		ecw_entity_free(e);
	}
	struct ecw_entity *same = mbx_every_type("Sales", "same.", 1),
	                  *v2 = mbx_every_type("Sales", "differs", 2),
	                  *live = mbx_every_type("Sales", "live", 1);
	write_entity(x, same);
	write_entity(x, v2);
	write_entity(x, live);
	ECW_ASSERT_OK(ecw_blob_put(NULL, x->t->client, x->container, "notes/readme.txt", "hi", 2, NULL));
	ecw_entity_free(same);
	ecw_entity_free(v2);
	ecw_entity_free(live);
}

static void expect_counts(const struct ecw_audit_counts *c, uint64_t repaired)
{
	assert_int_equal(c->found[ECW_AUDIT_STALE], 1);
	assert_int_equal(c->found[ECW_AUDIT_CONFLICT], 1);
	assert_int_equal(c->found[ECW_AUDIT_MISSING] + c->found[ECW_AUDIT_ORPHAN], 0);
	assert_int_equal(c->repaired, repaired);
	assert_int_equal(ecw_audit_drift(c, ECW_AUDIT_STALE), 1 - repaired);
	assert_int_equal(ecw_audit_drift(c, ECW_AUDIT_CONFLICT), 1);
}

static void test_job_move_blob__audit_archive(void **state)
{
	struct mbx *x = *state;
	struct ecw_audit_counts c;
	struct ecw_entity *e;

	seed_drift(x);
	c = audit(x, x->archive, false);
	expect_counts(&c, 0);
	assert_int_equal(c.checked, 3); /* the table's three entities */
	c = audit(x, x->archive, true);
	expect_counts(&c, 1);
	/* Completed as an archive: only in the blob. */
	ITEST_CHECK(!itest_get_or_null(x->t->client, x->t->table, "Sales", "same."),
	            "same. still in the table");
	e = mbx_blob_entity(x->t->client, x->container, "Sales", "same.", NULL);
	assert_non_null(e);
	ecw_entity_free(e);
	/* The conflict is left as it was. */
	e = itest_get_or_null(x->t->client, x->t->table, "Sales", "differs");
	assert_int_equal(ecw_entity_get(e, "Version")->v.i32, 2);
	ecw_entity_free(e);
	e = mbx_blob_entity(x->t->client, x->container, "Sales", "differs", NULL);
	assert_int_equal(ecw_entity_get(e, "Version")->v.i32, 1);
	ecw_entity_free(e);
	c = audit(x, x->archive, false);
	assert_int_equal(c.found[ECW_AUDIT_STALE], 0);
}

static void test_job_move_blob__audit_restore(void **state)
{
	struct mbx *x = *state;
	struct ecw_audit_counts c;
	struct ecw_entity *e;

	seed_drift(x);
	c = audit(x, x->restore, false);
	expect_counts(&c, 0);
	assert_int_equal(c.checked, 3); /* the blobs of keys: not notes/readme.txt */
	c = audit(x, x->restore, true);
	expect_counts(&c, 1);
	/* Completed as a restore: only in the table. */
	ITEST_CHECK(!mbx_blob_entity(x->t->client, x->container, "Sales", "same.", NULL),
	            "same.'s blob is left");
	e = itest_get_or_null(x->t->client, x->t->table, "Sales", "same.");
	assert_non_null(e);
	ecw_entity_free(e);
	e = mbx_blob_entity(x->t->client, x->container, "Sales", "differs", NULL);
	assert_int_equal(ecw_entity_get(e, "Version")->v.i32, 1);
	ecw_entity_free(e);
	c = audit(x, x->restore, false);
	assert_int_equal(c.found[ECW_AUDIT_STALE], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_job_move_blob__round_trip_keeps_every_type_under_hostile_keys, mbx_setup, mbx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob__same_entity_same_bytes, mbx_setup,
	                                    mbx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob__archive_race_never_loses_the_newer_version,
	                                    mbx_setup, mbx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob__restore_race_never_overwrites_the_application,
	                                    mbx_setup, mbx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob__missing_container_holds_and_names_it,
	                                    mbx_setup, mbx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob__bad_blobs_poison_with_a_reason, mbx_setup,
	                                    mbx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob__keys_too_long_for_a_name, mbx_setup,
	                                    mbx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob__audit_archive, mbx_setup, mbx_teardown),
	    cmocka_unit_test_setup_teardown(test_job_move_blob__audit_restore, mbx_setup, mbx_teardown),
	};
	return cmocka_run_group_tests_name("job_move_blob", tests, NULL, NULL);
}
