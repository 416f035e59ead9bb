/* migrate.c - `migrations:` and `ecworker migrate` (see migrate.h). */
#include <stdlib.h>

#include "migrate.h"

int ecw_migrations_parse(struct ecw_migration_set **out, const struct ecw_node *sec,
			 struct ecw_config_errors *errs)
{
	*out = NULL;
	if (sec)
		ecw_config_error(errs, sec, "migrations: not built yet");
	return sec ? -1 : 0;
}

void ecw_migrations_free(struct ecw_migration_set *m)
{
	free(m);
}
