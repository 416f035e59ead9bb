/* SPDX-License-Identifier: MIT */
/* table_name.c - what a table may be called, checked before any request
 * names one: by table.c and batch.c (which sit above this file and call
 * each other one way), table_many.c, and the configuration's readers. */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "ecw_storage.h"

/* ^[A-Za-z][A-Za-z0-9]{2,62}$, and not the reserved name "tables" (which the
 * service refuses in any case). The one copy of the rule: configuration
 * readers call it too. */
bool ecw_table_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n < 3 || n > 63 || !((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z')))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			return false;
	}
	return strcasecmp(name, "tables") != 0;
}

int ecw_table_name_check(const char *name)
{
	if (ecw_table_name_valid(name))
		return 0;
	return ecw_error_set(ECW_EINVALID, "invalid table name '%.70s': a table name is " ECW_TABLE_NAME_RULE,
			     name ? name : "");
}
