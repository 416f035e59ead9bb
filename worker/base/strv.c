/* SPDX-License-Identifier: MIT */
/* strv.c - NULL-terminated string arrays (see ecw_strv.h). */
#include <stdlib.h>
#include <string.h>

#include "ecw_strv.h"

void ecw_strv_free(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

bool ecw_strv_has(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

int ecw_strv_add(char ***v, const char *s)
{
	size_t n = 0;
	char **nv, *copy = strdup(s);

	while (*v && (*v)[n])
		n++;
	if (!copy || !(nv = realloc(*v, (n + 2) * sizeof(*nv)))) {
		free(copy);
		return -1;
	}
	nv[n] = copy;
	nv[n + 1] = NULL;
	*v = nv;
	return 0;
}
