/* SPDX-License-Identifier: MIT */
/* names.h - name rules that more than one service shares (names.c): queue.c
 * and blob.c call them, each saying in its own message what was refused.
 * Pure; nothing to free. */
#ifndef ECW_STORAGE_NAMES_H
#define ECW_STORAGE_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/* 3-63 characters: lowercase letters, digits and single dashes, starting
 * and ending with a letter or digit (a DNS label's rule, which queue and
 * container names follow). NULL is not valid. */
bool ecw_names_dns_valid(const char *name);
/* A metadata name (x-ms-meta-NAME) of queues and blobs: a C# identifier, a
 * letter or '_', then letters, digits and '_', at most max bytes. */
bool ecw_names_meta_valid(const char *name, size_t max);

#endif
