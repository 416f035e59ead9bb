/* SPDX-License-Identifier: MIT */
/* moveblobfx.h - the fixture of the tests of the move between a table and
 * blobs (test_job_move_blob.c in this process, test_job_move_blob_crash.c
 * as a worker process, test_interop.c through the official SDK): a
 * container of the test's own (mbx_container_new / mbx_container_drop), the
 * two jobs of issue 36 on it (mbx_jobs), an in-process fixture (struct mbx:
 * a table, a container and those jobs parsed by the real configuration)
 * that runs a job as a message would (mbx_run), the name the documented
 * rule gives a pair of keys (mbx_name), what a blob holds (mbx_blob_entity),
 * and an entity of every EDM type and edge value (mbx_every_type). */
#ifndef ECW_MOVEBLOBFX_H
#define ECW_MOVEBLOBFX_H

#include <stdbool.h>
#include <stddef.h>

#include "ecw_config.h"
#include "ecw_entity.h"
#include "itest.h"
#include "movefx.h"

/* The name template of the tests' jobs. */
#define MBX_TEMPLATE "{PartitionKey}/{RowKey}.json"

/* A fresh container name (64 bytes), created unless create is false. */
void mbx_container_new(char *out, struct ecw_client *c, bool create);
/* Deletes it, if it exists. */
void mbx_container_drop(struct ecw_client *c, const char *container);

/* The jobs lines (indented two spaces) of archive-blob (table -> container)
 * and restore-blob (container -> table), in buf; returns buf. */
const char *mbx_jobs(char *buf, size_t cap, const char *table, const char *container);

struct mbx {
	struct itest *t; /* first: the itest fixture (t->table is the table) */
	char container[64];
	struct ecw_config *cfg;
	const struct ecw_job_def *archive, *restore;
};

/* cmocka setup: a table and a container created, the jobs parsed. */
int mbx_setup(void **state);
int mbx_teardown(void **state);

/* Runs def for (pk, rk) on client c (NULL: the fixture's) as a message
 * would; detail (64 bytes, may be NULL) receives the outcome detail. */
int mbx_run(struct mbx *x, const struct ecw_job_def *def, struct ecw_client *c, const char *pk,
            const char *rk, char *detail);

/* The blob name MBX_TEMPLATE gives (pk, rk) by the documented rule: each
 * key with '%' as %25, a last '.' as %2E, and "" as %00. */
void mbx_name(char *out, size_t cap, const char *pk, const char *rk);

/* The entity the blob of (pk, rk) holds, or NULL when there is no blob
 * (nor container); the blob must parse. info_out (may be NULL) its
 * properties. */
struct ecw_entity *mbx_blob_entity(struct ecw_client *c, const char *container, const char *pk,
                                   const char *rk, struct ecw_blob_info **info_out);

/* An entity with every EDM type: Int64 beyond 2^53 and at both ends, Double
 * NaN, +-Infinity, 0.1 and an integral one, DateTime with 7 fractional
 * digits, Guid, Binary with NULs, strings with quotes, controls, an emoji,
 * and U+2028 unless a key holds '%'; version changes one value. Not -0:
 * Azurite's table keeps it as 0 (JSON.stringify(-0) is "0"), so no test
 * through Azurite can show a -0 kept. */
struct ecw_entity *mbx_every_type(const char *pk, const char *rk, int version);

/* cmocka setup and teardown of the tests that run a worker process:
 * movefx's fixture (mv_setup) and a fresh container name in container, not
 * created (the worker creates what an archive writes); dropped after. */
int mbx_mv_setup(void **state, char container[64]);
int mbx_mv_teardown(void **state, const char *container);

/* Where e is with m's employee table (m->emp) as the table side and
 * container as the blob side: MV_IN_SOURCE (the table), MV_IN_TARGET (the
 * blob) or MV_IN_BOTH; each copy must equal e, and one must exist (the test
 * fails naming when otherwise). */
enum mv_where mbx_where_is(struct mv *m, const char *container, const struct ecw_entity *e, const char *when);

#endif
