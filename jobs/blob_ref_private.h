/* SPDX-License-Identifier: MIT */
/* blob_ref_private.h - what blob_ref.c (the job: the large-entities
 * pattern) shares with blob_ref_audit.c (its audit, and the ops table on
 * top) and with its unit tests: the settings, the prefix rule and its
 * inversion, what a property names, and a blob's age. */
#ifndef ECW_BLOB_REF_PRIVATE_H
#define ECW_BLOB_REF_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ecw_buf.h"
#include "ecw_entity.h"
#include "ecw_err.h"
#include "ecw_job.h"
#include "ecw_template.h"

#define ECW_BLOB_REF_PROPS_MAX 32
#define ECW_BLOB_REF_GRACE_MAX_S 604800 /* a queue message's longest hide: 7 days */
/* The longest value that can name a blob: 1,024 characters, 4 bytes each in
 * UTF-8, 3 times that as %-escapes in a URL, beside the endpoint and
 * container. A longer one names nothing; names[] buffers hold this much. */
#define ECW_BLOB_REF_VALUE_MAX (ECW_BLOB_NAME_MAX * 4 * 3 + 1024)

struct blob_ref {
	char *source;    /* the table of the entities */
	char *container; /* the application's container: never created here */
	struct ecw_template *prefix;
	char **props; /* NULL-terminated, 1..ECW_BLOB_REF_PROPS_MAX */
	int64_t grace_s;
};

int ecw_blob_ref_parse(void **out, const struct ecw_node *job, struct ecw_node_errors *errs);
void ecw_blob_ref_free(void *settings);
int ecw_blob_ref_run(const void *settings, struct ecw_job_ctx *ctx);

/* The prefix rule (check-config): t is made of literal text and the
 * placeholders {PartitionKey} and {RowKey}, each exactly once and without a
 * format; a literal holding a '/' between them and one ending in '/' after
 * the last; and it renders a valid blob name path for plain keys. Keys hold
 * no '/', so each key is cut off by a '/' of the literal that follows it:
 * two entities never share a prefix and no prefix is the start of
 * another's. 0, or ECW_EINVALID with a message saying which rule failed. */
int ecw_blob_ref_prefix_check(const struct ecw_template *t) ECW_MUST_USE;
/* The prefix of (pk, rk) under a template that passed the check, into out
 * (its old contents dropped). ECW_EINVALID naming the keys when what it
 * renders is no blob name path (an empty key, a key ending in '.', too long):
 * a permanent error. */
int ecw_blob_ref_prefix_render(struct ecw_buf *out, const struct ecw_template *t, const char *pk,
			       const char *rk) ECW_MUST_USE;
/* The inverse, for the audit: when name lies under the prefix of some keys,
 * true with those keys in pk and rk (each cap bytes, NUL-terminated); false
 * when no keys' prefix starts it (or a key would not fit). */
bool ecw_blob_ref_prefix_invert(char *pk, char *rk, size_t cap, const struct ecw_template *t,
				const char *name);

/* What a property's value names (a String; anything else names nothing):
 * a blob of container by its name, or by its URL on the account's blob
 * endpoint (compared without case up to the container, then exactly; the
 * query and fragment dropped; the rest percent-decoded). 1 with the name in
 * out; 0 when it names nothing here (empty, another account or container,
 * a bad %-escape, a NUL). */
int ecw_blob_ref_name_of(struct ecw_buf *out, const char *value, size_t len, const char *endpoint,
			 const char *container) ECW_MUST_USE;
/* Adds to names the blob name each configured property of e names (at
 * most ECW_BLOB_REF_PROPS_MAX; *n the count). e NULL: none. */
int ecw_blob_ref_names(struct ecw_buf *names, size_t *n, const struct blob_ref *b, const struct ecw_entity *e,
		       const char *endpoint) ECW_MUST_USE;

/* Whether name is one of the n names. */
bool ecw_blob_ref_named(const struct ecw_buf *names, size_t n, const char *name);

/* How long a blob last modified at lm (the service's clock) must still wait,
 * seen at the service's date: 0 when it is older than grace_s, else the
 * seconds until it is (at least 1). Both times have whole seconds, so a blob
 * counts as older than grace only once date - lm >= grace + 1: never
 * younger in fact. date 0 (no Date header): it waits all of grace + 1. */
int64_t ecw_blob_ref_wait_s(time_t date, time_t lm, int64_t grace_s);

#endif
