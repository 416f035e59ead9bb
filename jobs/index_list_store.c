/* index_list_store.c - how an index list is stored: reading a whole list
 * (its keys, sorted, and what a conditional write of it needs) and writing
 * a changed list back atomically, conditional on what was read. The job
 * (index_list.c), its audit (index_list_audit.c) and `ecworker index get`
 * read and write lists only through here; the format is described at the
 * top of index_list.c.
 *
 * Today a list is one entity: Keys (String, the JSON array of [pk, rk]
 * pairs) and Count (Int32). A write is one request: insert when the list
 * was absent, replace If-Match the ETag read, delete If-Match when it
 * empties. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecw_job.h"
#include "index_list_private.h"
#include "jobs_private.h"

/* The service allows 64 KiB of UTF-16 in one String property (32,768 code
 * units; Azurite refuses more than 32 * 1024). A margin below it. */
#define KEYS_MAX_UTF16 32000
#define STRING_MAX_UTF16 32768

static const char *prop_string(const struct ecw_entity *e, const char *name)
{
	const struct ecw_prop *p = ecw_entity_get(e, name);
	return p && p->type == ECW_EDM_STRING ? p->v.s : NULL;
}

int ecw_il_list_keys(struct tuples *out, const struct ecw_entity *list)
{
	const char *json = prop_string(list, "Keys");

	ecw_il_tuples_init(out, 2);
	if (!json)
		return ecw_error_set(ECW_EINVALID, "no Keys string: is another job or program writing that "
						   "partition?");
	/* Nothing the service stores is longer: a bound on what is parsed. */
	if (ecw_il_utf16_units(json, strlen(json)) > STRING_MAX_UTF16)
		return ecw_error_set(ECW_EINVALID, "Keys is longer than one String property may be");
	return ecw_il_tuples_parse(out, json, strlen(json), 2, "Keys");
}

int ecw_il_list_entity(struct ecw_entity **out, const char *lpk, const char *lrk, const struct tuples *keys)
{
	struct ecw_buf json;
	size_t units;
	int err;

	*out = NULL;
	ecw_buf_init(&json, 0);
	if ((err = ecw_il_tuples_write(&json, keys)) < 0)
		goto done;
	if ((units = ecw_il_utf16_units(json.ptr, json.len)) > KEYS_MAX_UTF16) {
		err = ecw_error_set(ECW_ETOOLARGE,
				    "%.80s/%.80s is too large: it would hold %zu keys, %zu UTF-16 characters "
				    "of JSON in Keys, over the %d one String property may hold (64 KiB)",
				    lpk, lrk, keys->n, units, KEYS_MAX_UTF16);
		goto done;
	}
	if ((err = ecw_entity_new(out, lpk, lrk)) < 0 ||
	    (err = ecw_entity_set_string(*out, "Keys", json.ptr, json.len)) < 0 ||
	    (err = ecw_entity_set_int32(*out, "Count", (int32_t)keys->n)) < 0) {
		ecw_entity_free(*out);
		*out = NULL;
	}
done:
	ecw_buf_dispose(&json);
	return err;
}

void ecw_il_list_dispose(struct il_list *l)
{
	free(l->lpk);
	free(l->lrk);
	free(l->etag);
	ecw_il_tuples_dispose(&l->keys);
	memset(l, 0, sizeof(*l));
	ecw_il_tuples_init(&l->keys, 2);
}

int ecw_il_list_load(struct il_list *out, struct ecw_client *c, const char *table, const char *lpk,
		     const char *lrk)
{
	struct ecw_entity *e = NULL;
	int err;

	memset(out, 0, sizeof(*out));
	ecw_il_tuples_init(&out->keys, 2);
	if (!(out->lpk = strdup(lpk)) || !(out->lrk = strdup(lrk))) {
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
		goto done;
	}
	err = ecw_table_get(&e, c, table, lpk, lrk);
	if (err == ECW_ENOTFOUND) {
		ecw_error_clear();
		err = 0;
		goto done;
	}
	if (err < 0)
		goto done;
	if ((err = ecw_il_list_keys(&out->keys, e)) < 0) {
		err = ecw_error_set(ECW_EINVALID, "list %s/%.100s/%.100s: %s", table, lpk, lrk,
				    ecw_error_last()->message);
		goto done;
	}
	out->exists = true;
	if (!(out->etag = strdup(ecw_entity_etag(e) ? ecw_entity_etag(e) : "")))
		err = ecw_error_set(ECW_ENOMEM, "out of memory");
done:
	ecw_entity_free(e);
	if (err < 0)
		ecw_il_list_dispose(out);
	return err;
}

int ecw_il_list_check(const struct il_list *read, const struct tuples *keys)
{
	struct ecw_entity *e = NULL;
	int err = keys->n ? ecw_il_list_entity(&e, read->lpk, read->lrk, keys) : 0;

	ecw_entity_free(e);
	return err;
}

int ecw_il_list_save(struct ecw_client *c, const char *table, const struct il_list *read,
		     const struct tuples *keys)
{
	struct ecw_entity *e = NULL;
	int err;

	if (keys->n == 0)
		return read->exists ? ecw_table_delete(c, table, read->lpk, read->lrk, read->etag) : 0;
	if ((err = ecw_il_list_entity(&e, read->lpk, read->lrk, keys)) == 0)
		err = ecw_table_write(NULL, c, table, e, read->exists ? ECW_WRITE_UPDATE : ECW_WRITE_INSERT,
				      read->exists ? read->etag : NULL);
	ecw_entity_free(e);
	return err;
}
