/* SPDX-License-Identifier: MIT */
/* ecw_strv.h - a NULL-terminated array of heap strings, itself on the heap
 * (what ecw_node_string_list returns, and the lists job types build). */
#ifndef ECW_STRV_H
#define ECW_STRV_H

#include <stdbool.h>

/* Frees each string and the array; NULL is fine. */
void ecw_strv_free(char **v);
/* Whether v (may be NULL) holds s. */
bool ecw_strv_has(char *const *v, const char *s);
/* Appends a copy of s to *v (NULL: a new array); -1 when out of memory, *v
 * unchanged. */
int ecw_strv_add(char ***v, const char *s);

#endif
