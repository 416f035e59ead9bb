/* migrate.h - `migrations:` in the configuration and `ecworker migrate`
 * (worker/migrate.c): an ordered list of schema and data changes, applied
 * once per environment and recorded in a version table. The parsed set is a
 * heap object owned by the configuration (ecw_migrations_free); the plan text
 * goes to a caller-owned buffer. */
#ifndef ECW_MIGRATE_H
#define ECW_MIGRATE_H

#include <stddef.h>
#include "ecw_buf.h"
#include "ecw_config.h"

struct ecw_migration_set;

/* Reads the `migrations:` section (sec may be NULL: none). Problems go to
 * errs and the result is -1. */
int ecw_migrations_parse(struct ecw_migration_set **out, const struct ecw_node *sec,
			 struct ecw_node_errors *errs);
void ecw_migrations_free(struct ecw_migration_set *m);

/* How many migrations the set lists (0 for NULL). */
size_t ecw_migrations_count(const struct ecw_migration_set *m);
/* The version table's name. */
const char *ecw_migrations_table(const struct ecw_migration_set *m);
/* Migration i's id and the hex SHA-256 of its definition (id, version and
 * steps as written; the description is left out). */
const char *ecw_migration_id(const struct ecw_migration_set *m, size_t i);
const char *ecw_migration_checksum(const struct ecw_migration_set *m, size_t i);
/* Appends migration i as the plan prints it: one line per step, from step
 * `from` (0-based) on. */
int ecw_migration_plan(struct ecw_buf *out, const struct ecw_migration_set *m, size_t i, size_t from) ECW_MUST_USE;

#endif
