/* SPDX-License-Identifier: MIT */
/* ecw_strv.h - a NULL-terminated array of heap strings, itself on the heap
 * (what ecw_node_string_list returns, and the lists job types build). */
#ifndef ECW_STRV_H
#define ECW_STRV_H

/* Frees each string and the array; NULL is fine. */
void ecw_strv_free(char **v);

#endif
