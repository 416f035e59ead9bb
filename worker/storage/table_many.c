/* SPDX-License-Identifier: MIT */
/* table_many.c - ecw_table_get_many: the entities of one partition named by
 * their RowKeys, read with one query per ECW_TABLE_GET_MANY_KEYS of them
 * instead of one GET each. The filter is
 *   PartitionKey eq 'pk' and (RowKey eq 'a' or RowKey eq 'b' or ...)
 * with every key a quoted literal (ecw_escape_filter_string): a key can hold
 * quotes, "or", parentheses or '%' and still only ever be a value. The
 * service refuses a $filter of more than 15 comparisons (AZURE-NOTES.md;
 * Azurite does not count them), so a query names 14 RowKeys at most.
 * Only what was asked for is kept: an answer naming another key (a hostile
 * or broken service) is dropped, never taken for one of ours. */
#include <stdlib.h>
#include <string.h>

#include "ecw_storage.h"

/* Index of the first rks[j] (j < i) equal to rks[i], or i. */
static size_t first_of(const char *const *rks, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (strcmp(rks[j], rks[i]) == 0)
			return j;
	return i;
}

/* The filter for the distinct keys rks[idx[0..k-1]]. */
static int chunk_filter(struct ecw_buf *f, const char *pk, const char *const *rks, const size_t *idx,
			size_t k)
{
	int err;

	if ((err = ecw_buf_adds(f, "PartitionKey eq ")) < 0 || (err = ecw_escape_filter_string(f, pk)) < 0 ||
	    (err = ecw_buf_adds(f, " and (")) < 0)
		return err;
	for (size_t i = 0; i < k; i++)
		if ((err = ecw_buf_adds(f, i ? " or RowKey eq " : "RowKey eq ")) < 0 ||
		    (err = ecw_escape_filter_string(f, rks[idx[i]])) < 0)
			return err;
	return ecw_buf_addc(f, ')');
}

/* Runs one query for rks[idx[0..k-1]] and files each answer under its key. */
static int read_chunk(struct ecw_entity **out, struct ecw_client *c, const char *table, const char *pk,
		      const char *const *rks, const size_t *idx, size_t k)
{
	struct ecw_table_query *q = NULL;
	struct ecw_entity *e = NULL;
	struct ecw_buf filter;
	int err;

	ecw_buf_init(&filter, 0);
	if ((err = chunk_filter(&filter, pk, rks, idx, k)) < 0)
		goto done;
	const struct ecw_query_options opts = {.filter = ecw_buf_cstr(&filter)};
	if ((err = ecw_table_query_new(&q, c, table, &opts)) < 0)
		goto done;
	while ((err = ecw_table_query_next(&e, q)) == 0 && e) {
		size_t i = k;
		if (strcmp(ecw_entity_pk(e), pk) == 0)
			for (i = 0; i < k && strcmp(rks[idx[i]], ecw_entity_rk(e)) != 0; i++)
				;
		if (i < k && !out[idx[i]] && ecw_entity_etag(e)) {
			out[idx[i]] = e;
		} else {
			ecw_entity_free(e); /* not asked for, twice, or without an ETag */
		}
		e = NULL;
	}
done:
	ecw_table_query_free(q);
	ecw_buf_dispose(&filter);
	return err;
}

int ecw_table_get_many(struct ecw_entity **out, struct ecw_client *c, const char *table, const char *pk,
		       const char *const *rks, size_t n)
{
	size_t idx[ECW_TABLE_GET_MANY_KEYS], k = 0;
	int err;

	for (size_t i = 0; i < n; i++)
		out[i] = NULL;
	if ((err = ecw_table_name_check(table)) < 0 || (err = ecw_entity_key_check(pk, "PartitionKey")) < 0)
		return err;
	for (size_t i = 0; i < n; i++)
		if ((err = ecw_entity_key_check(rks[i], "RowKey")) < 0)
			return err;
	for (size_t i = 0; i < n && err == 0; i++) {
		if (first_of(rks, i) == i)
			idx[k++] = i;
		if (k == ECW_TABLE_GET_MANY_KEYS || (i + 1 == n && k > 0)) {
			err = read_chunk(out, c, table, pk, rks, idx, k);
			k = 0;
		}
	}
	/* A key named twice: each place gets its own copy. */
	for (size_t i = 0; i < n && err == 0; i++) {
		size_t j = first_of(rks, i);
		if (j != i && out[j])
			err = ecw_entity_clone(&out[i], out[j]);
	}
	if (err < 0)
		for (size_t i = 0; i < n; i++) {
			ecw_entity_free(out[i]);
			out[i] = NULL;
		}
	return err;
}
