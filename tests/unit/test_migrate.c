/* SPDX-License-Identifier: MIT */
/* test_migrate.c - the `migrations:` section: every step kind parsed and
 * printed as the plan, entity value types, the checksum (stable, and
 * changed by a step's edit but not by the description), and each kind of
 * error at its line and column. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_config.h"
#include "migrate.h"

#define FILE_NAME "m.yaml"
#define HEAD "storage:\n  connection_string: UseDevelopmentStorage=true\nmigrations:\n"

static struct ecw_config *parse_ok(const char *text)
{
	return config_parse_ok(text, FILE_NAME);
}

/* text has exactly one error, at pos ("LINE:COL"), containing needle. */
static void one_error(const char *text, const char *pos, const char *needle)
{
	struct ecw_node_errors errs;
	struct ecw_config *cfg = NULL;
	char prefix[64];
	int err;

	ecw_node_errors_init(&errs);
	err = ecw_config_parse(&cfg, text, strlen(text), FILE_NAME, &errs);
	assert_null(cfg);
	snprintf(prefix, sizeof(prefix), FILE_NAME ":%s: ", pos);
	if (err != ECW_EINVALID || errs.n != 1 || !str_starts(errs.lines[0], prefix) ||
	    !str_contains(errs.lines[0], needle)) {
		config_dump(&errs);
		fail_msg("want one error \"%s...%s...\" from:\n%s", prefix, needle, text);
	}
	ecw_node_errors_dispose(&errs);
}

static const char every_kind[] = HEAD
    "  table: Versions\n"
    "  lease: 5s\n"
    "  list:\n"
    "    - id: 0001-devices\n"
    "      version: 1\n"
    "      description: Devices\n"
    "      steps:\n"
    "        - create_table: Devices\n"
    "        - upsert_entity: {table: Devices, entity: {PartitionKey: all, RowKey: tank-7, Name: \"Tank 7\"}}\n"
    "        - insert_entity: {table: Devices, entity: {PartitionKey: all, RowKey: tank-8}}\n"
    "    - id: 0002-rename\n"
    "      version: 5\n"
    "      steps:\n"
    "        - rename_table: {from: Readings, to: TankTelemetry}\n"
    "        - set_property: {table: TankTelemetry, filter: \"Unit eq 'cm'\", set: {Unit: mm, Source: \"{PartitionKey}\"}}\n"
    "        - copy_table: {from: TankTelemetry, to: Backup}\n"
    "        - delete_entity: {table: Devices, pk: all, rk: tank-8}\n"
    "        - delete_partition: {table: Backup, pk: old}\n"
    "        - clear_table: Backup\n"
    "        - delete_table: Backup\n";

static void test_migrate__every_step_kind_and_the_plan(void **state)
{
	struct ecw_config *cfg = parse_ok(every_kind);
	const struct ecw_migration_set *m = cfg->migrations;
	struct ecw_buf plan;

	(void)state;
	assert_int_equal(ecw_migrations_count(m), 2);
	assert_string_equal(ecw_migrations_table(m), "Versions");
	assert_string_equal(ecw_migrations_id(m, 1), "0002-rename");
	ecw_buf_init(&plan, 0);
	assert_int_equal(ecw_migrate_plan(&plan, m, 0, 0), 0);
	assert_int_equal(ecw_migrate_plan(&plan, m, 1, 0), 0);
	assert_string_equal(
	    ecw_buf_cstr(&plan),
	    "1 0001-devices: Devices\n"
	    "  step 1/3: create_table Devices\n"
	    "  step 2/3: upsert_entity Devices (all, tank-7)\n"
	    "  step 3/3: insert_entity Devices (all, tank-8)\n"
	    "5 0002-rename\n"
	    "  step 1/7: rename_table Readings -> TankTelemetry (copy)\n"
	    "  step 1/7: rename_table (delete Readings)\n"
	    "  step 2/7: set_property TankTelemetry where Unit eq 'cm': Unit=\"mm\" Source=\"{PartitionKey}\"\n"
	    "  step 3/7: copy_table TankTelemetry -> Backup\n"
	    "  step 4/7: delete_entity Devices (all, tank-8)\n"
	    "  step 5/7: delete_partition Backup (old)\n"
	    "  step 6/7: clear_table Backup\n"
	    "  step 7/7: delete_table Backup\n");
	/* From a resume point on. */
	ecw_buf_reset(&plan);
	assert_int_equal(ecw_migrate_plan(&plan, m, 1, 7), 0);
	assert_string_equal(ecw_buf_cstr(&plan), "5 0002-rename\n  step 7/7: delete_table Backup\n");
	ecw_buf_dispose(&plan);
	ecw_config_free(cfg);
}

/* Checksums: the same text twice gives the same; a step's edit changes it;
 * the description does not. */
static void test_migrate__checksum(void **state)
{
	const char *base = HEAD "  list:\n    - id: a\n      version: 1\n      description: one\n"
	                        "      steps:\n        - create_table: Tab\n";
	const char *desc = HEAD "  list:\n    - id: a\n      version: 1\n      description: two\n"
	                        "      steps:\n        - create_table: Tab\n";
	const char *edit = HEAD "  list:\n    - id: a\n      version: 1\n      description: one\n"
	                        "      steps:\n        - create_table: Tub\n";
	struct ecw_config *c1 = parse_ok(base), *c2 = parse_ok(base), *c3 = parse_ok(desc),
	                  *c4 = parse_ok(edit);
	const char *s1 = ecw_migrations_checksum(c1->migrations, 0);

	(void)state;
	assert_int_equal(strlen(s1), 64);
	assert_string_equal(s1, ecw_migrations_checksum(c2->migrations, 0));
	assert_string_equal(s1, ecw_migrations_checksum(c3->migrations, 0));
	assert_string_not_equal(s1, ecw_migrations_checksum(c4->migrations, 0));
	ecw_config_free(c1);
	ecw_config_free(c2);
	ecw_config_free(c3);
	ecw_config_free(c4);
}

/* Entity values: every supported type parses; bad ones are errors. */
static void test_migrate__entity_values(void **state)
{
	struct ecw_config *cfg = parse_ok(
	    HEAD "  list:\n    - id: a\n      version: 1\n      steps:\n"
	         "        - upsert_entity:\n"
	         "            table: Tab\n"
	         "            entity:\n"
	         "              PartitionKey: p\n"
	         "              RowKey: 7\n"
	         "              S: text\n"
	         "              Q: \"12\"\n"
	         "              I: 12\n"
	         "              L: 5000000000\n"
	         "              D: 2.5\n"
	         "              E: 1e3\n"
	         "              B: true\n"
	         "              T: {type: Edm.DateTime, value: \"2026-08-19T10:00:00Z\"}\n"
	         "              G: {type: Edm.Guid, value: \"c0ffee00-0000-4000-8000-000000000001\"}\n"
	         "              X: {type: Edm.Binary, value: \"AAEC\"}\n"
	         "              Y: {type: Edm.Int64, value: \"7\"}\n"
	         "              W: {type: Edm.Double, value: \"5\"}\n");

	(void)state;
	assert_int_equal(ecw_migrations_count(cfg->migrations), 1);
	ecw_config_free(cfg);
	one_error(
	    HEAD
	    "  list:\n    - id: a\n      version: 1\n      steps:\n"
	    "        - upsert_entity: {table: Tab, entity: {PartitionKey: p, RowKey: r, N: 99999999999999999999}}\n",
	    "8:79", "out of the range of Edm.Int64");
	one_error(
	    HEAD
	    "  list:\n    - id: a\n      version: 1\n      steps:\n"
	    "        - upsert_entity: {table: Tab, entity: {PartitionKey: p, RowKey: r, N: {type: Edm.Int32, value: \"3000000000\"}}}\n",
	    "8:79", "out of the range of Edm.Int32");
	one_error(
	    HEAD
	    "  list:\n    - id: a\n      version: 1\n      steps:\n"
	    "        - upsert_entity: {table: Tab, entity: {PartitionKey: p, RowKey: r, N: {type: Edm.Float, value: \"1\"}}}\n",
	    "8:79", "unknown type 'Edm.Float'");
	one_error(HEAD
	          "  list:\n    - id: a\n      version: 1\n      steps:\n"
	          "        - upsert_entity: {table: Tab, entity: {PartitionKey: p, RowKey: r, N: [1]}}\n",
	          "8:79", "not a list");
	one_error(HEAD "  list:\n    - id: a\n      version: 1\n      steps:\n"
	               "        - upsert_entity: {table: Tab, entity: {PartitionKey: p, RowKey: \"a/b\"}}\n",
	          "8:47", "RowKey");
	one_error(HEAD "  list:\n    - id: a\n      version: 1\n      steps:\n"
	               "        - upsert_entity: {table: Tab, entity: {RowKey: r}}\n",
	          "8:47", "PartitionKey and RowKey are required");
}

static void test_migrate__errors(void **state)
{
	(void)state;
	/* Versions increase strictly; ids are unique. */
	one_error(HEAD "  list:\n"
	               "    - {id: a, version: 2, steps: [create_table: Tab]}\n"
	               "    - {id: b, version: 2, steps: [create_table: Tab]}\n",
	          "6:24", "must be greater than 2 (of 'a')");
	one_error(HEAD "  list:\n"
	               "    - {id: a, version: 1, steps: [create_table: Tab]}\n"
	               "    - {id: a, version: 2, steps: [create_table: Tab]}\n",
	          "6:12", "id 'a' appears twice");
	one_error(HEAD "  list:\n    - {id: a, version: 0, steps: [create_table: Tab]}\n", "5:24", "version");
	one_error(HEAD "  list:\n    - {version: 1, steps: [create_table: Tab]}\n", "5:7", "'id'");
	/* Steps. */
	one_error(HEAD "  list:\n    - {id: a, version: 1, steps: []}\n", "5:34", "one or more steps");
	one_error(HEAD "  list:\n    - {id: a, version: 1, steps: [drop_table: Tab]}\n", "5:35",
	          "unknown step 'drop_table'");
	one_error(HEAD "  list:\n    - {id: a, version: 1, steps: [create_table: 9ab]}\n", "5:49",
	          "a table name is a letter");
	one_error(HEAD
	          "  list:\n    - {id: a, version: 1, steps: [{create_table: Tab, delete_table: Tab}]}\n",
	          "5:35", "a step is a map with one key");
	one_error(HEAD "  list:\n    - {id: a, version: 1, steps: [copy_table: {from: Tab, to: Tab}]}\n",
	          "5:47", "from and to name the same table");
	one_error(HEAD "  list:\n    - {id: a, version: 1, steps: [copy_table: {from: Tab}]}\n", "5:47",
	          "missing required key 'to'");
	one_error(HEAD "  list:\n    - {id: a, version: 1, steps: [delete_entity: {table: Tab, pk: p}]}\n",
	          "5:50", "missing required key 'rk'");
	one_error(HEAD "  list:\n    - {id: a, version: 1, steps: [set_property: {table: Tab, set: {}}]}\n",
	          "5:67", "set is a map of one or more");
	one_error(
	    HEAD
	    "  list:\n    - {id: a, version: 1, steps: [set_property: {table: Tab, set: {RowKey: x}}]}\n",
	    "5:68", "keys cannot be set");
	one_error(
	    HEAD
	    "  list:\n    - {id: a, version: 1, steps: [set_property: {table: Tab, set: {N: \"{N}x\"}}]}\n",
	    "5:71", "reads {N}, which the same step sets");
	one_error(
	    HEAD
	    "  list:\n    - {id: a, version: 1, steps: [set_property: {table: Tab, set: {N: \"{bad\"}}]}\n",
	    "5:71", "set_property:");
	/* The section itself. */
	one_error(HEAD "  lease: 10ms\n  list: []\n", "4:10", "lease");
	one_error(HEAD "  tabel: X\n  list: []\n", "4:3", "tabel");
	one_error(HEAD "  table: EcwMigrations\n", "4:3", "list is a list of migrations");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_migrate__every_step_kind_and_the_plan),
	    cmocka_unit_test(test_migrate__checksum),
	    cmocka_unit_test(test_migrate__entity_values),
	    cmocka_unit_test(test_migrate__errors),
	};
	return cmocka_run_group_tests_name("migrate", tests, NULL, NULL);
}
