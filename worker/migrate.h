/* migrate.h - `migrations:` in the configuration and `ecworker migrate`
 * (worker/migrate.c). */
#ifndef ECW_MIGRATE_H
#define ECW_MIGRATE_H

#include "ecw_config.h"

struct ecw_migration_set;

/* Reads the `migrations:` section (sec may be NULL: none). Problems go to
 * errs and the result is -1. */
int ecw_migrations_parse(struct ecw_migration_set **out, const struct ecw_node *sec,
			 struct ecw_config_errors *errs);
void ecw_migrations_free(struct ecw_migration_set *m);

#endif
