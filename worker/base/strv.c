/* SPDX-License-Identifier: MIT */
/* strv.c - NULL-terminated string arrays (see ecw_strv.h). */
#include <stdlib.h>

#include "ecw_strv.h"

void ecw_strv_free(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}
